//! Turning Megatron `name = value` pairs (from any input kind) into [`TrainingConfig`]
//! fields, Megatron's defaults, the derived fields, overrides and the consistency check.
//!
//! Every input kind (arguments block, launch script, TOML/JSON file, preset, `--set`)
//! reduces to the same `(name, Python str() of the value, Source)` triples, so there is
//! exactly one place that knows how each argument is typed.

use super::config::{Dtype, Recompute, Source, TrainingConfig};
use super::error::{source_place, Loc, MegatronError};
use std::collections::BTreeMap;

/// GPT-2 BPE vocabulary size: Megatron's GPT examples use it, and it is what
/// `padded_vocab()` assumes when no input names a vocabulary size.
pub const GPT2_VOCAB: u64 = 50257;

/// Megatron's `--make-vocab-size-divisible-by` default.
pub const DEFAULT_VOCAB_DIVISOR: u64 = 128;

/// Every field of [`TrainingConfig`] that has a provenance entry.
pub(crate) const FIELDS: &[&str] = &[
    "tensor_model_parallel_size",
    "pipeline_model_parallel_size",
    "virtual_pipeline_model_parallel_size",
    "context_parallel_size",
    "expert_model_parallel_size",
    "data_parallel_size",
    "world_size",
    "num_layers",
    "hidden_size",
    "ffn_hidden_size",
    "num_attention_heads",
    "num_query_groups",
    "seq_length",
    "max_position_embeddings",
    "micro_batch_size",
    "global_batch_size",
    "vocab_size",
    "padded_vocab_size",
    "sequence_parallel",
    "use_distributed_optimizer",
    "overlap_grad_reduce",
    "overlap_param_gather",
    "accumulate_allreduce_grads_in_fp32",
    "grad_reduce_in_bf16",
    "params_dtype",
    "untie_embeddings_and_output_weights",
    "swiglu",
    "recompute_granularity",
    "use_tp_pp_dp_mapping",
    "log_interval",
    "timing_log_level",
];

/// Arguments with no Megatron default that a job cannot be described without.
pub(crate) const REQUIRED: &[&str] = &[
    "num_layers",
    "hidden_size",
    "num_attention_heads",
    "seq_length",
    "micro_batch_size",
];

/// Normalises an argument name as Megatron's argparse does (`--num-layers` → `num_layers`),
/// and maps the few renamed arguments of older versions onto today's names.
pub fn canonical_key(key: &str) -> String {
    // Case is kept: Megatron names are case-sensitive (`barrier_with_L1_time`).
    let k = key.trim().trim_start_matches('-').replace('-', "_");
    match k.as_str() {
        // Megatron ≤ 2021 and Megatron-DeepSpeed.
        "model_parallel_size" => "tensor_model_parallel_size".into(),
        "params_dtype" | "dtype" => "params_dtype".into(),
        _ => k,
    }
}

fn is_none(v: &str) -> bool {
    let v = v.trim();
    v.is_empty() || v == "None" || v == "null"
}

fn parse_uint(v: &str, key: &str, loc: &Loc, min: u64) -> Result<u64, MegatronError> {
    let t = v.trim();
    let t = t.strip_prefix('+').unwrap_or(t);
    match t.parse::<u64>() {
        Ok(n) if n >= min => Ok(n),
        Ok(n) => Err(MegatronError::at(
            loc,
            key,
            format!("expected an integer ≥ {min}, found `{n}`"),
        )),
        Err(_) => Err(MegatronError::at(
            loc,
            key,
            format!(
                "expected {}, found `{}`",
                if min > 0 {
                    "a positive integer"
                } else {
                    "a non-negative integer"
                },
                v.trim()
            ),
        )),
    }
}

fn parse_u32(v: &str, key: &str, loc: &Loc, min: u64) -> Result<u32, MegatronError> {
    let n = parse_uint(v, key, loc, min)?;
    u32::try_from(n).map_err(|_| {
        MegatronError::at(loc, key, format!("expected a size below 2^32, found `{n}`"))
    })
}

/// Python's `str(bool)` plus what hand-written files use.
pub(crate) fn parse_bool(v: &str, key: &str, loc: &Loc) -> Result<bool, MegatronError> {
    match v.trim() {
        "True" | "true" | "1" | "yes" | "on" => Ok(true),
        "False" | "false" | "0" | "no" | "off" | "None" | "" => Ok(false),
        other => Err(MegatronError::at(
            loc,
            key,
            format!("expected True or False, found `{other}`"),
        )),
    }
}

fn parse_dtype(v: &str, key: &str, loc: &Loc) -> Result<Dtype, MegatronError> {
    match v.trim().trim_start_matches("torch.") {
        "bfloat16" | "bf16" => Ok(Dtype::Bf16),
        "float16" | "fp16" | "half" => Ok(Dtype::Fp16),
        "float32" | "fp32" | "float" => Ok(Dtype::Fp32),
        other => Err(MegatronError::at(
            loc,
            key,
            format!("expected torch.bfloat16, torch.float16 or torch.float32, found `{other}`"),
        )),
    }
}

impl TrainingConfig {
    /// Megatron-LM's argument defaults. The shape fields that have no default (layers,
    /// hidden size, heads, sequence length, micro-batch) are 0 here and must come from an
    /// input; [`TrainingConfig::finalize`] refuses a config where they are still missing.
    pub fn megatron_defaults() -> TrainingConfig {
        let mut c = TrainingConfig {
            tensor_model_parallel_size: 1,
            pipeline_model_parallel_size: 1,
            virtual_pipeline_model_parallel_size: None,
            context_parallel_size: 1,
            expert_model_parallel_size: 1,
            data_parallel_size: 1,
            world_size: 1,
            num_layers: 0,
            hidden_size: 0,
            ffn_hidden_size: 0,
            num_attention_heads: 0,
            num_query_groups: None,
            seq_length: 0,
            max_position_embeddings: 0,
            micro_batch_size: 0,
            global_batch_size: 0,
            vocab_size: None,
            padded_vocab_size: None,
            sequence_parallel: false,
            use_distributed_optimizer: false,
            overlap_grad_reduce: false,
            overlap_param_gather: false,
            accumulate_allreduce_grads_in_fp32: false,
            grad_reduce_in_bf16: false,
            params_dtype: Dtype::Fp32,
            untie_embeddings_and_output_weights: false,
            swiglu: false,
            recompute_granularity: Recompute::None,
            use_tp_pp_dp_mapping: false,
            log_interval: 100,
            timing_log_level: 0,
            iterations: Vec::new(),
            timers: BTreeMap::new(),
            extra: BTreeMap::new(),
            sources: BTreeMap::new(),
        };
        for f in FIELDS {
            c.sources.insert((*f).to_string(), Source::Default);
        }
        c
    }

    /// True when `field` was given by an input (file, preset or override), as opposed to
    /// defaulted or derived.
    pub fn is_explicit(&self, field: &str) -> bool {
        matches!(
            self.sources.get(field),
            Some(Source::File { .. } | Source::Preset { .. } | Source::Override)
        )
    }

    fn explicit_extra_bool(&self, key: &str) -> Option<bool> {
        self.extra
            .get(key)
            .map(|v| matches!(v.trim(), "True" | "true" | "1"))
    }

    /// Sets one Megatron argument from the `str()` of its value, recording `src`. Unknown
    /// names are kept verbatim in `extra`. Derived fields are not recomputed here; call
    /// [`TrainingConfig::finalize`] once all inputs are applied.
    pub(crate) fn apply(
        &mut self,
        key: &str,
        value: &str,
        src: Source,
        loc: &Loc,
    ) -> Result<(), MegatronError> {
        let key = canonical_key(key);
        let k = key.as_str();
        let v = value.trim();
        macro_rules! set {
            ($field:ident, $val:expr) => {{
                self.$field = $val;
                self.sources.insert(stringify!($field).to_string(), src);
            }};
        }
        // A Python `None` for a field without an Option leaves the default in place.
        let none = is_none(v);
        match k {
            "tensor_model_parallel_size" if !none => {
                set!(tensor_model_parallel_size, parse_u32(v, k, loc, 1)?)
            }
            "pipeline_model_parallel_size" if !none => {
                set!(pipeline_model_parallel_size, parse_u32(v, k, loc, 1)?)
            }
            "virtual_pipeline_model_parallel_size" => set!(
                virtual_pipeline_model_parallel_size,
                if none {
                    None
                } else {
                    Some(parse_u32(v, k, loc, 1)?)
                }
            ),
            "context_parallel_size" if !none => {
                set!(context_parallel_size, parse_u32(v, k, loc, 1)?)
            }
            "expert_model_parallel_size" if !none => {
                set!(expert_model_parallel_size, parse_u32(v, k, loc, 1)?)
            }
            "data_parallel_size" if !none => set!(data_parallel_size, parse_u32(v, k, loc, 1)?),
            "world_size" if !none => set!(world_size, parse_u32(v, k, loc, 1)?),
            "num_layers" if !none => set!(num_layers, parse_u32(v, k, loc, 1)?),
            "hidden_size" if !none => set!(hidden_size, parse_uint(v, k, loc, 1)?),
            "ffn_hidden_size" if !none => set!(ffn_hidden_size, parse_uint(v, k, loc, 1)?),
            "num_attention_heads" if !none => set!(num_attention_heads, parse_u32(v, k, loc, 1)?),
            "num_query_groups" => {
                set!(
                    num_query_groups,
                    if none {
                        None
                    } else {
                        Some(parse_u32(v, k, loc, 1)?)
                    }
                );
            }
            "seq_length" if !none => set!(seq_length, parse_uint(v, k, loc, 1)?),
            "max_position_embeddings" if !none => {
                set!(max_position_embeddings, parse_uint(v, k, loc, 1)?)
            }
            "micro_batch_size" if !none => set!(micro_batch_size, parse_uint(v, k, loc, 1)?),
            "global_batch_size" if !none => set!(global_batch_size, parse_uint(v, k, loc, 1)?),
            "vocab_size" => set!(
                vocab_size,
                if none {
                    None
                } else {
                    Some(parse_uint(v, k, loc, 1)?)
                }
            ),
            "padded_vocab_size" => set!(
                padded_vocab_size,
                if none {
                    None
                } else {
                    Some(parse_uint(v, k, loc, 1)?)
                }
            ),
            "sequence_parallel" => set!(sequence_parallel, parse_bool(v, k, loc)?),
            "use_distributed_optimizer" => set!(use_distributed_optimizer, parse_bool(v, k, loc)?),
            "overlap_grad_reduce" => set!(overlap_grad_reduce, parse_bool(v, k, loc)?),
            "overlap_param_gather" => set!(overlap_param_gather, parse_bool(v, k, loc)?),
            "accumulate_allreduce_grads_in_fp32" => {
                set!(accumulate_allreduce_grads_in_fp32, parse_bool(v, k, loc)?)
            }
            "grad_reduce_in_bf16" => set!(grad_reduce_in_bf16, parse_bool(v, k, loc)?),
            "params_dtype" if !none => set!(params_dtype, parse_dtype(v, k, loc)?),
            "untie_embeddings_and_output_weights" => {
                set!(untie_embeddings_and_output_weights, parse_bool(v, k, loc)?)
            }
            "swiglu" => set!(swiglu, parse_bool(v, k, loc)?),
            "recompute_granularity" => set!(
                recompute_granularity,
                match v {
                    "" | "None" | "none" | "null" => Recompute::None,
                    "selective" => Recompute::Selective,
                    "full" => Recompute::Full,
                    other => {
                        return Err(MegatronError::at(
                            loc,
                            k,
                            format!("expected None, selective or full, found `{other}`"),
                        ));
                    }
                }
            ),
            // Pre-2022 spellings of activation recomputation.
            "checkpoint_activations" => {
                if parse_bool(v, k, loc)? {
                    set!(recompute_granularity, Recompute::Full)
                }
                self.extra.insert(key, v.to_string());
            }
            "recompute_activations" => {
                if parse_bool(v, k, loc)? {
                    set!(recompute_granularity, Recompute::Selective)
                }
                self.extra.insert(key, v.to_string());
            }
            "use_tp_pp_dp_mapping" => set!(use_tp_pp_dp_mapping, parse_bool(v, k, loc)?),
            "log_interval" if !none => set!(log_interval, parse_u32(v, k, loc, 1)?),
            "timing_log_level" if !none => set!(timing_log_level, parse_u32(v, k, loc, 0)?),
            // Typed here, kept in `extra` because finalize() derives fields from them.
            "bf16" | "fp16" | "group_query_attention" => {
                parse_bool(v, k, loc)?;
                self.sources.insert(k.to_string(), src);
                self.extra.insert(key, v.to_string());
            }
            "make_vocab_size_divisible_by" | "num_layers_per_virtual_pipeline_stage" => {
                if !none {
                    parse_uint(v, k, loc, 1)?;
                }
                self.sources.insert(k.to_string(), src);
                self.extra.insert(key, v.to_string());
            }
            _ => {
                self.extra.insert(key, v.to_string());
            }
        }
        Ok(())
    }

    fn derive<T>(&mut self, field: &str, how: impl Into<String>, set: impl FnOnce(&mut Self) -> T) {
        if !self.is_explicit(field) {
            set(self);
            self.sources
                .insert(field.to_string(), Source::Derived { how: how.into() });
        }
    }

    /// Computes the fields Megatron derives from others, for every such field no input
    /// set explicitly: dtype from `--bf16`/`--fp16`, FFN size (4h, or Megatron's SwiGLU
    /// rule), max positions, virtual pipeline size, DP ↔ world size, global batch, and the
    /// padded vocabulary. Fails when a required argument is still missing.
    pub fn finalize(&mut self) -> Result<(), MegatronError> {
        for f in REQUIRED {
            if !self.is_explicit(f) {
                return Err(MegatronError::Missing {
                    at: "inputs".into(),
                    field: (*f).to_string(),
                    hint: "an arguments block, a launch script flag, a config file key or a preset"
                        .into(),
                });
            }
        }
        let bf16 = self.explicit_extra_bool("bf16").unwrap_or(false);
        let fp16 = self.explicit_extra_bool("fp16").unwrap_or(false);
        if !self.is_explicit("params_dtype") {
            if bf16 {
                self.derive("params_dtype", "--bf16", |c| c.params_dtype = Dtype::Bf16);
            } else if fp16 {
                self.derive("params_dtype", "--fp16", |c| c.params_dtype = Dtype::Fp16);
            } else {
                self.params_dtype = Dtype::Fp32;
                self.sources.insert("params_dtype".into(), Source::Default);
            }
        }
        let h = self.hidden_size;
        if self.swiglu {
            // Megatron: int((4h · 2/3) / 64) · 64, keeping SwiGLU's parameter count ≈ 4h MLP's.
            self.derive("ffn_hidden_size", "SwiGLU: floor(8h/3 / 64)·64", |c| {
                c.ffn_hidden_size = (8 * h / 3) / 64 * 64
            });
        } else {
            self.derive("ffn_hidden_size", "4·hidden_size", |c| {
                c.ffn_hidden_size = 4 * h
            });
        }
        let s = self.seq_length;
        self.derive("max_position_embeddings", "seq_length", |c| {
            c.max_position_embeddings = s
        });
        if self.explicit_extra_bool("group_query_attention") == Some(false)
            && self.num_query_groups.is_some()
        {
            self.num_query_groups = None;
            self.sources.insert(
                "num_query_groups".into(),
                Source::Derived {
                    how: "group_query_attention is False".into(),
                },
            );
        }
        if let Some(n) = self
            .extra
            .get("num_layers_per_virtual_pipeline_stage")
            .and_then(|v| v.trim().parse::<u32>().ok())
        {
            let (l, pp) = (self.num_layers, self.pipeline_model_parallel_size);
            if n > 0 && pp > 1 && l % (pp * n) == 0 {
                self.derive(
                    "virtual_pipeline_model_parallel_size",
                    "num_layers / pipeline_model_parallel_size / num_layers_per_virtual_pipeline_stage",
                    |c| c.virtual_pipeline_model_parallel_size = Some(l / pp / n),
                );
            }
        }
        let mp = self.tensor_model_parallel_size as u64
            * self.context_parallel_size as u64
            * self.pipeline_model_parallel_size as u64;
        if !self.is_explicit("data_parallel_size") && self.is_explicit("world_size") {
            let w = self.world_size as u64;
            if !w.is_multiple_of(mp) {
                return Err(MegatronError::Inconsistent {
                    at: source_place(&self.sources["world_size"]),
                    field: "world_size".into(),
                    expected: format!(
                        "world_size {w} is not divisible by tensor·context·pipeline = {}·{}·{} = {mp}",
                        self.tensor_model_parallel_size, self.context_parallel_size, self.pipeline_model_parallel_size
                    ),
                });
            }
            self.derive("data_parallel_size", "world_size / (TP·CP·PP)", |c| {
                c.data_parallel_size = (w / mp) as u32
            });
        } else {
            let w = mp * self.data_parallel_size as u64;
            let w = u32::try_from(w).map_err(|_| MegatronError::Inconsistent {
                at: "inputs".into(),
                field: "world_size".into(),
                expected: format!("TP·CP·PP·DP = {w} does not fit in 32 bits"),
            })?;
            self.derive("world_size", "TP·CP·PP·DP", |c| c.world_size = w);
        }
        let gb = self.micro_batch_size * self.data_parallel_size as u64;
        self.derive(
            "global_batch_size",
            "micro_batch_size·data_parallel_size",
            |c| c.global_batch_size = gb,
        );
        if !self.is_explicit("padded_vocab_size") {
            let (v, how) = match self.vocab_size {
                Some(v) => (v, "vocab_size rounded up to make_vocab_size_divisible_by·TP".to_string()),
                None => (GPT2_VOCAB, format!("no vocab_size in any input: GPT-2 BPE's {GPT2_VOCAB} assumed, rounded up to make_vocab_size_divisible_by·TP")),
            };
            let p = round_up(v, self.vocab_multiple());
            self.derive("padded_vocab_size", how, |c| c.padded_vocab_size = Some(p));
        }
        Ok(())
    }

    /// `make_vocab_size_divisible_by · TP`, the multiple Megatron pads the vocabulary to.
    pub fn vocab_multiple(&self) -> u64 {
        let d = self
            .extra
            .get("make_vocab_size_divisible_by")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|d| *d > 0)
            .unwrap_or(DEFAULT_VOCAB_DIVISOR);
        d * self.tensor_model_parallel_size.max(1) as u64
    }

    /// Overrides one argument by Megatron name (snake_case or kebab-case, with or without
    /// leading `--`), records [`Source::Override`] and recomputes derived fields.
    ///
    /// The latest override wins among the parallel sizes: overriding `world_size`
    /// re-derives DP; overriding DP re-derives the world size; overriding TP, CP or PP
    /// re-derives the world size if DP was overridden, else DP (the GPU count is kept).
    /// Changing TP or the vocabulary divisor re-derives a padded vocabulary read from a log.
    /// Call [`TrainingConfig::validate`] once all overrides are applied.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), MegatronError> {
        let k = canonical_key(key);
        let loc = Loc::new("override", 0, 0);
        let unset = |c: &mut Self, f: &str| {
            c.sources.insert(
                f.to_string(),
                Source::Derived {
                    how: "re-derived after an override".into(),
                },
            );
        };
        self.apply(&k, value, Source::Override, &loc)?;
        match k.as_str() {
            "world_size" => unset(self, "data_parallel_size"),
            "tensor_model_parallel_size"
            | "context_parallel_size"
            | "pipeline_model_parallel_size" => {
                if matches!(
                    self.sources.get("data_parallel_size"),
                    Some(Source::Override)
                ) {
                    unset(self, "world_size");
                } else {
                    unset(self, "data_parallel_size");
                }
                if k == "tensor_model_parallel_size" && self.vocab_size.is_some() {
                    unset(self, "padded_vocab_size");
                }
            }
            "data_parallel_size" => unset(self, "world_size"),
            "make_vocab_size_divisible_by" | "vocab_size" if self.vocab_size.is_some() => {
                unset(self, "padded_vocab_size")
            }
            "num_query_groups" if self.num_query_groups.is_some() => {
                self.extra
                    .insert("group_query_attention".into(), "True".into());
            }
            "hidden_size" | "swiglu" => unset(self, "ffn_hidden_size"),
            "seq_length" => unset(self, "max_position_embeddings"),
            "bf16" | "fp16" => unset(self, "params_dtype"),
            _ => {}
        }
        self.finalize()
    }

    /// Checks the sizes agree as Megatron requires: W = TP·CP·PP·DP, the global batch is a
    /// multiple of micro-batch·DP, layers divide evenly over PP stages (and over PP·v
    /// chunks when interleaved), heads and query groups divide by TP. The error names the
    /// numbers that disagree and where the first one came from.
    pub fn validate(&self) -> Result<(), MegatronError> {
        let at = |f: &str| {
            self.sources
                .get(f)
                .map(source_place)
                .unwrap_or_else(|| "inputs".into())
        };
        let bad = |f: &str, msg: String| {
            Err(MegatronError::Inconsistent {
                at: at(f),
                field: f.into(),
                expected: msg,
            })
        };
        let (tp, cp, pp, dp) = (
            self.tensor_model_parallel_size as u64,
            self.context_parallel_size as u64,
            self.pipeline_model_parallel_size as u64,
            self.data_parallel_size as u64,
        );
        if tp * cp * pp * dp != self.world_size as u64 {
            return bad(
                "world_size",
                format!(
                    "world_size {} ≠ TP·CP·PP·DP = {tp}·{cp}·{pp}·{dp} = {}",
                    self.world_size,
                    tp * cp * pp * dp
                ),
            );
        }
        let mb = self.micro_batch_size * dp;
        if mb == 0 || !self.global_batch_size.is_multiple_of(mb) || self.global_batch_size == 0 {
            return bad(
                "global_batch_size",
                format!(
                    "global_batch_size {} is not a positive multiple of micro_batch_size·data_parallel_size = {}·{dp} = {mb}",
                    self.global_batch_size, self.micro_batch_size
                ),
            );
        }
        let l = self.num_layers as u64;
        if !l.is_multiple_of(pp) {
            return bad(
                "num_layers",
                format!("num_layers {l} is not divisible by pipeline_model_parallel_size {pp}"),
            );
        }
        if let Some(v) = self.virtual_pipeline_model_parallel_size {
            let v = v as u64;
            if !l.is_multiple_of(pp * v) {
                return bad(
                    "num_layers",
                    format!(
                        "num_layers {l} is not divisible by pipeline_model_parallel_size·virtual_pipeline_model_parallel_size = {pp}·{v} = {}",
                        pp * v
                    ),
                );
            }
        }
        let heads = self.num_attention_heads as u64;
        if !heads.is_multiple_of(tp) {
            return bad(
                "num_attention_heads",
                format!("num_attention_heads {heads} is not divisible by tensor_model_parallel_size {tp}"),
            );
        }
        if let Some(g) = self.num_query_groups {
            let g = g as u64;
            if !g.is_multiple_of(tp) {
                return bad(
                    "num_query_groups",
                    format!(
                        "num_query_groups {g} is not divisible by tensor_model_parallel_size {tp}"
                    ),
                );
            }
            if !heads.is_multiple_of(g) {
                return bad(
                    "num_query_groups",
                    format!("num_attention_heads {heads} is not divisible by num_query_groups {g}"),
                );
            }
        }
        Ok(())
    }

    /// Micro-batches per iteration per pipeline: global / (micro · DP).
    pub fn num_microbatches(&self) -> u64 {
        let d = self.micro_batch_size * self.data_parallel_size as u64;
        self.global_batch_size.checked_div(d).unwrap_or(0)
    }

    /// Vocabulary as the embedding is sized: the padded size when known (logged or
    /// derived), else the vocabulary (or GPT-2's 50257) rounded up to
    /// `make_vocab_size_divisible_by · TP`.
    pub fn padded_vocab(&self) -> u64 {
        if let Some(p) = self.padded_vocab_size {
            return p;
        }
        round_up(self.vocab_size.unwrap_or(GPT2_VOCAB), self.vocab_multiple())
    }

    /// Mean logged elapsed time per iteration (ms), over every logged line (including the
    /// first, which carries warm-up in real runs), or `None` without iteration lines.
    pub fn mean_iteration_ms(&self) -> Option<f64> {
        if self.iterations.is_empty() {
            return None;
        }
        Some(
            self.iterations.iter().map(|i| i.elapsed_ms).sum::<f64>()
                / self.iterations.len() as f64,
        )
    }

    /// Median logged elapsed time per iteration (ms): robust to the warm-up line.
    pub fn median_iteration_ms(&self) -> Option<f64> {
        let mut v: Vec<f64> = self.iterations.iter().map(|i| i.elapsed_ms).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(|a, b| a.total_cmp(b));
        let n = v.len();
        Some(if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        })
    }
}

/// Smallest multiple of `m` that is ≥ `v`.
pub fn round_up(v: u64, m: u64) -> u64 {
    if m == 0 {
        v
    } else {
        v.div_ceil(m) * m
    }
}
