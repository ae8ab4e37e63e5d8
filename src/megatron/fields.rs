//! Turning Megatron `name = value` pairs (from any input kind) into [`TrainingConfig`]
//! fields, and Megatron's defaults.
//!
//! Every input kind (arguments block, launch script, TOML/JSON file, preset, `--set`)
//! reduces to the same `(name, Python str() of the value, Source)` triples, so there is
//! exactly one place that knows how each argument is typed. The derived fields live in
//! [`super::derive`], the consistency checks in [`super::validate`].

use super::config::{
    CpCommType, Dtype, MoeDispatcher, MoeLayerFreq, Normalization, PositionEmbedding, Recompute,
    Source, TrainingConfig,
};
use super::error::{Loc, MegatronError};
use super::pattern::eval_layer_pattern;
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
    "cp_comm_type",
    "expert_model_parallel_size",
    "expert_tensor_parallel_size",
    "data_parallel_size",
    "world_size",
    "num_layers",
    "hidden_size",
    "ffn_hidden_size",
    "num_attention_heads",
    "group_query_attention",
    "num_query_groups",
    "seq_length",
    "max_position_embeddings",
    "position_embedding_type",
    "normalization",
    "add_bias_linear",
    "num_experts",
    "moe_router_topk",
    "moe_layer_freq",
    "moe_token_dispatcher_type",
    "moe_expert_capacity_factor",
    "moe_ffn_hidden_size",
    "moe_shared_expert_intermediate_size",
    "micro_batch_size",
    "global_batch_size",
    "vocab_size",
    "make_vocab_size_divisible_by",
    "padded_vocab_size",
    "sequence_parallel",
    "use_distributed_optimizer",
    "zero_stage",
    "overlap_grad_reduce",
    "overlap_param_gather",
    "accumulate_allreduce_grads_in_fp32",
    "grad_reduce_in_bf16",
    "fp16",
    "bf16",
    "params_dtype",
    "untie_embeddings_and_output_weights",
    "swiglu",
    "recompute_granularity",
    "use_tp_pp_dp_mapping",
    "log_interval",
    "timing_log_level",
];

/// Arguments kept verbatim in `extra` but typed (checked) on input, because a derived field
/// depends on them, plus the spellings of other Megatron versions and forks mapped onto
/// the fields above. A launch script's value for one of these must resolve.
pub(crate) const TYPED_EXTRA: &[&str] = &[
    "num_layers_per_virtual_pipeline_stage",
    "deepspeed",
    "deepspeed_config",
    "checkpoint_activations",
    "recompute_activations",
    "DDP_impl",
    "use_rotary_position_embeddings",
    "disable_bias_linear",
    "num_key_value_heads",
    "topk",
    "moe_expert_parallel_size",
    "expert_interval",
    "pad_vocab_size_to",
    "decoder_first_pipeline_num_layers",
    "decoder_last_pipeline_num_layers",
    "account_for_embedding_in_pipeline_split",
    "account_for_loss_in_pipeline_split",
    "pp_partition_method",
    "partition_method",
    "pipeline_model_parallel_layout",
    "embed_layernorm",
    "rampup_batch_size",
    "quick_geglu",
    "fp8_param_gather",
    "num_virtual_stages_per_pipeline_rank",
    "hierarchical_context_parallel_sizes",
    "tokenizer_type",
    "tokenizer_model",
    "tokenizer_name_or_path",
    "vocab_file",
];

/// Arguments that name the tokenizer: a launch script's value for one of these that does
/// not resolve is a warning, not an error, when the vocabulary is given otherwise
/// (docs/model.md#vocabulary).
pub(crate) const TOKENIZER_ARGS: &[&str] = &[
    "tokenizer_type",
    "tokenizer_model",
    "tokenizer_name_or_path",
    "vocab_file",
];

/// Arguments that change the job's traffic or compute in ways the model does not follow:
/// read, kept in `extra` with where they came from, and named in a warning when set
/// (docs/model.md#known-gaps). (argument, what is not modelled.)
pub(crate) const NOT_MODELLED: &[(&str, &str)] = &[
    ("overlap_param_gather", "the distributed optimizer's parameter all-gathers run at the end of the iteration, not overlapped with the next forward"),
    ("tp_comm_overlap", "TP collectives overlapped with the GEMMs (Transformer Engine userbuffers) run as separate steps"),
    ("fp8_format", "FP8 compute: the GPU's bf16 peak times the compute unless a log calibrates it"),
    ("fp8_dot_product_attention", "FP8 attention: ring attention's FP8 backward (K/V alone around the ring, dK/dV in one all-to-all) is modelled as the bf16 one"),
    ("moe_pad_expert_input_to_capacity", "padding expert inputs to capacity: tokens over capacity are dropped, the padding is not sent"),
    ("sync_tp_duplicated_parameters", "Megatron-DeepSpeed's all-reduce of TP-duplicated parameters (norms, biases) every step is not generated"),
];

/// Arguments with no Megatron default that a job cannot be described without.
pub(crate) const REQUIRED: &[&str] = &[
    "num_layers",
    "hidden_size",
    "num_attention_heads",
    "seq_length",
    "micro_batch_size",
];

/// True for an argument whose value changes the model of the job: a field, or one of
/// the arguments kept in `extra` that a derived field depends on (`deepspeed`,
/// `num_layers_per_virtual_pipeline_stage`, the Megatron-DeepSpeed spellings…).
pub fn is_modelled(key: &str) -> bool {
    FIELDS.contains(&key) || TYPED_EXTRA.contains(&key)
}

/// Normalises an argument name as Megatron's argparse does (`--num-layers` → `num_layers`),
/// and maps the few renamed arguments of older versions onto today's names.
pub fn canonical_key(key: &str) -> String {
    // Case is kept: Megatron names are case-sensitive (`barrier_with_L1_time`).
    let k = key.trim().trim_start_matches('-').replace('-', "_");
    match k.as_str() {
        // Megatron ≤ 2021 and Megatron-DeepSpeed.
        "model_parallel_size" => "tensor_model_parallel_size".into(),
        "dtype" => "params_dtype".into(),
        // Megatron-core's TransformerConfig name.
        "num_moe_experts" => "num_experts".into(),
        _ => k,
    }
}

fn is_none(v: &str) -> bool {
    let v = v.trim();
    v.is_empty() || v == "None" || v == "null"
}

pub(crate) fn parse_uint(v: &str, key: &str, loc: &Loc, min: u64) -> Result<u64, MegatronError> {
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

pub(crate) fn parse_u32(v: &str, key: &str, loc: &Loc, min: u64) -> Result<u32, MegatronError> {
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

/// The items of a Python list's `str()` (`['p2p', 'a2a']`), or the value itself.
fn list_items(v: &str) -> Vec<&str> {
    let t = v.trim();
    let inner = t
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .unwrap_or(t);
    inner
        .split([',', ' '])
        .map(|s| s.trim().trim_matches(['\'', '"']))
        .filter(|s| !s.is_empty())
        .collect()
}

fn parse_cp_comm_type(v: &str, key: &str, loc: &Loc) -> Result<CpCommType, MegatronError> {
    let one = |s: &str| match s {
        "p2p" => Ok(CpCommType::P2p),
        "a2a" => Ok(CpCommType::A2a),
        "allgather" | "all_gather" => Ok(CpCommType::AllGather),
        "a2a+p2p" => Ok(CpCommType::A2aP2p),
        other => Err(MegatronError::at(
            loc,
            key,
            format!("expected p2p, a2a, allgather or a2a+p2p, found `{other}`"),
        )),
    };
    let items = list_items(v);
    let Some(first) = items.first() else {
        return one("");
    };
    let t = one(first)?;
    for s in &items[1..] {
        if one(s)? != t {
            return Err(MegatronError::at(
                loc,
                key,
                format!(
                    "per-layer types that differ (`{}`) are not modelled: give one type for every layer",
                    v.trim()
                ),
            ));
        }
    }
    Ok(t)
}

fn parse_dispatcher(v: &str, key: &str, loc: &Loc) -> Result<MoeDispatcher, MegatronError> {
    match v.trim() {
        "allgather" => Ok(MoeDispatcher::AllGather),
        "alltoall" => Ok(MoeDispatcher::AllToAll),
        "alltoall_seq" => Ok(MoeDispatcher::AllToAllSeq),
        "flex" => Ok(MoeDispatcher::Flex),
        other => Err(MegatronError::at(
            loc,
            key,
            format!("expected allgather, alltoall, alltoall_seq or flex, found `{other}`"),
        )),
    }
}

fn parse_norm(v: &str, key: &str, loc: &Loc) -> Result<Normalization, MegatronError> {
    // Megatron-LM spells `LayerNorm`/`RMSNorm`, Megatron-DeepSpeed `layernorm`/`rmsnorm`.
    match v.trim().to_ascii_lowercase().as_str() {
        "layernorm" => Ok(Normalization::LayerNorm),
        "rmsnorm" => Ok(Normalization::RMSNorm),
        _ => Err(MegatronError::at(
            loc,
            key,
            format!("expected LayerNorm or RMSNorm, found `{}`", v.trim()),
        )),
    }
}

/// A list of sizes as Python prints it (`[2, 4]`), as a TOML array is rendered, or as a
/// launch script gives `nargs='+'` values (`2 4`, `2,4`).
pub(crate) fn parse_size_list(v: &str, key: &str, loc: &Loc) -> Result<Vec<u32>, MegatronError> {
    let inner = v.trim().trim_start_matches('[').trim_end_matches(']');
    let sizes: Vec<u32> = inner
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(|s| parse_u32(s, key, loc, 1))
        .collect::<Result<_, _>>()?;
    if sizes.is_empty() || sizes.len() > 8 {
        return Err(MegatronError::at(
            loc,
            key,
            format!("expected a list of 1 to 8 sizes such as `[2, 4]`, found `{v}`"),
        ));
    }
    Ok(sizes)
}

fn parse_pos_emb(v: &str, key: &str, loc: &Loc) -> Result<PositionEmbedding, MegatronError> {
    match v.trim() {
        "learned_absolute" => Ok(PositionEmbedding::LearnedAbsolute),
        "rope" => Ok(PositionEmbedding::Rope),
        "yarn" => Ok(PositionEmbedding::Yarn),
        "mrope" => Ok(PositionEmbedding::Mrope),
        "relative" => Ok(PositionEmbedding::Relative),
        "alibi" => Ok(PositionEmbedding::Alibi),
        "none" => Ok(PositionEmbedding::None),
        other => Err(MegatronError::at(
            loc,
            key,
            format!(
                "expected learned_absolute, rope, yarn, mrope, relative, alibi or none, found `{other}`"
            ),
        )),
    }
}

fn parse_recompute(v: &str, key: &str, loc: &Loc) -> Result<Recompute, MegatronError> {
    match v {
        "" | "None" | "none" | "null" => Ok(Recompute::None),
        "selective" => Ok(Recompute::Selective),
        "full" => Ok(Recompute::Full),
        other => Err(MegatronError::at(
            loc,
            key,
            format!("expected None, selective or full, found `{other}`"),
        )),
    }
}

fn parse_capacity(v: &str, key: &str, loc: &Loc) -> Result<Option<f64>, MegatronError> {
    match v.trim().parse::<f64>() {
        // Megatron: a negative factor means "no capacity limit".
        Ok(x) if x.is_finite() => Ok((x >= 0.0).then_some(x)),
        _ => Err(MegatronError::at(
            loc,
            key,
            format!(
                "expected a number (or None for dropless), found `{}`",
                v.trim()
            ),
        )),
    }
}

fn parse_layer_freq(v: &str, key: &str, loc: &Loc) -> Result<MoeLayerFreq, MegatronError> {
    let t = v.trim().trim_matches(['\'', '"']);
    if t.contains('[') {
        return eval_layer_pattern(t)
            .map(MoeLayerFreq::Pattern)
            .map_err(|e| MegatronError::at(loc, key, format!("bad layer pattern `{t}`: {e}")));
    }
    Ok(MoeLayerFreq::Every(parse_u32(t, key, loc, 1)?))
}

/// `--num-experts`: Megatron-LM's integer (0 means dense), or Megatron-DeepSpeed's list of
/// one count. One expert is read as a dense model: it is Megatron-DeepSpeed's dense
/// default (`[1]`, `--num-experts 1`), and a single expert exchanges no tokens.
fn parse_num_experts(v: &str, key: &str, loc: &Loc) -> Result<Option<u32>, MegatronError> {
    let t = v.trim();
    if t.starts_with('[') {
        let items = list_items(t);
        return match items.as_slice() {
            [one] => Ok(Some(parse_u32(one, key, loc, 1)?).filter(|n| *n > 1)),
            _ => Err(MegatronError::at(
                loc,
                key,
                format!("expected one expert count, found `{t}` (per-stage expert counts of Megatron-DeepSpeed are not modelled)"),
            )),
        };
    }
    Ok(Some(parse_u32(t, key, loc, 0)?).filter(|n| *n > 1))
}

/// Same origin: both from one file, both overrides, or both from one preset.
fn same_origin(a: &Source, b: &Source) -> bool {
    match (a, b) {
        (Source::File { path: x, .. }, Source::File { path: y, .. }) => x == y,
        (Source::Preset { name: x }, Source::Preset { name: y }) => x == y,
        (Source::Override, Source::Override) => true,
        _ => false,
    }
}

/// Records that `field` was set from `src`.
macro_rules! set {
    ($self:ident, $src:ident, $field:ident, $val:expr) => {{
        $self.$field = $val;
        $self
            .sources
            .insert(stringify!($field).to_string(), $src.clone());
    }};
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
            cp_comm_type: CpCommType::P2p,
            expert_model_parallel_size: 1,
            expert_tensor_parallel_size: 1,
            data_parallel_size: 1,
            world_size: 1,
            num_layers: 0,
            hidden_size: 0,
            ffn_hidden_size: 0,
            num_attention_heads: 0,
            group_query_attention: false,
            num_query_groups: None,
            seq_length: 0,
            max_position_embeddings: 0,
            position_embedding_type: PositionEmbedding::LearnedAbsolute,
            normalization: Normalization::LayerNorm,
            add_bias_linear: true,
            num_experts: None,
            moe_router_topk: 2,
            moe_layer_freq: MoeLayerFreq::Every(1),
            moe_token_dispatcher_type: MoeDispatcher::AllGather,
            moe_expert_capacity_factor: None,
            moe_ffn_hidden_size: None,
            moe_shared_expert_intermediate_size: None,
            micro_batch_size: 0,
            global_batch_size: 0,
            vocab_size: None,
            make_vocab_size_divisible_by: DEFAULT_VOCAB_DIVISOR,
            padded_vocab_size: None,
            sequence_parallel: false,
            use_distributed_optimizer: false,
            zero_stage: None,
            overlap_grad_reduce: false,
            overlap_param_gather: false,
            accumulate_allreduce_grads_in_fp32: false,
            grad_reduce_in_bf16: false,
            fp16: false,
            bf16: false,
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
            warnings: Vec::new(),
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
        let v = value.trim();
        let handled = self.apply_parallel(&key, v, &src, loc)?
            || self.apply_shape(&key, v, &src, loc)?
            || self.apply_moe(&key, v, &src, loc)?
            || self.apply_precision(&key, v, &src, loc)?
            || self.apply_flags(&key, v, &src, loc)?
            || self.apply_aliases(&key, v, &src, loc)?;
        if !handled {
            if NOT_MODELLED.iter().any(|(k, _)| *k == key) {
                self.sources.insert(key.clone(), src);
            }
            self.extra.insert(key, v.to_string());
        }
        Ok(())
    }

    /// Parallel sizes. A Python `None` for a field without an Option leaves the default.
    fn apply_parallel(
        &mut self,
        k: &str,
        v: &str,
        src: &Source,
        loc: &Loc,
    ) -> Result<bool, MegatronError> {
        let none = is_none(v);
        match k {
            "tensor_model_parallel_size" if !none => {
                set!(
                    self,
                    src,
                    tensor_model_parallel_size,
                    parse_u32(v, k, loc, 1)?
                )
            }
            "pipeline_model_parallel_size" if !none => {
                set!(
                    self,
                    src,
                    pipeline_model_parallel_size,
                    parse_u32(v, k, loc, 1)?
                )
            }
            "virtual_pipeline_model_parallel_size" => {
                let n = if none {
                    None
                } else {
                    Some(parse_u32(v, k, loc, 1)?)
                };
                set!(self, src, virtual_pipeline_model_parallel_size, n)
            }
            "context_parallel_size" if !none => {
                set!(self, src, context_parallel_size, parse_u32(v, k, loc, 1)?)
            }
            "cp_comm_type" if !none => {
                set!(self, src, cp_comm_type, parse_cp_comm_type(v, k, loc)?)
            }
            "expert_model_parallel_size" if !none => {
                set!(
                    self,
                    src,
                    expert_model_parallel_size,
                    parse_u32(v, k, loc, 1)?
                )
            }
            "expert_tensor_parallel_size" if !none => {
                set!(
                    self,
                    src,
                    expert_tensor_parallel_size,
                    parse_u32(v, k, loc, 1)?
                )
            }
            "data_parallel_size" if !none => {
                set!(self, src, data_parallel_size, parse_u32(v, k, loc, 1)?)
            }
            "world_size" if !none => set!(self, src, world_size, parse_u32(v, k, loc, 1)?),
            "use_tp_pp_dp_mapping" => set!(self, src, use_tp_pp_dp_mapping, parse_bool(v, k, loc)?),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Model shape.
    fn apply_shape(
        &mut self,
        k: &str,
        v: &str,
        src: &Source,
        loc: &Loc,
    ) -> Result<bool, MegatronError> {
        let none = is_none(v);
        let opt_u64 = |min| -> Result<Option<u64>, MegatronError> {
            if none {
                Ok(None)
            } else {
                parse_uint(v, k, loc, min).map(Some)
            }
        };
        match k {
            "num_layers" if !none => set!(self, src, num_layers, parse_u32(v, k, loc, 1)?),
            "hidden_size" if !none => set!(self, src, hidden_size, parse_uint(v, k, loc, 1)?),
            "ffn_hidden_size" if !none => {
                set!(self, src, ffn_hidden_size, parse_uint(v, k, loc, 1)?)
            }
            "num_attention_heads" if !none => {
                set!(self, src, num_attention_heads, parse_u32(v, k, loc, 1)?)
            }
            "group_query_attention" => {
                set!(self, src, group_query_attention, parse_bool(v, k, loc)?)
            }
            "num_query_groups" => {
                let n = if none {
                    None
                } else {
                    Some(parse_u32(v, k, loc, 1)?)
                };
                set!(self, src, num_query_groups, n)
            }
            "seq_length" if !none => set!(self, src, seq_length, parse_uint(v, k, loc, 1)?),
            "max_position_embeddings" if !none => {
                set!(
                    self,
                    src,
                    max_position_embeddings,
                    parse_uint(v, k, loc, 1)?
                )
            }
            "position_embedding_type" if !none => {
                set!(
                    self,
                    src,
                    position_embedding_type,
                    parse_pos_emb(v, k, loc)?
                )
            }
            "normalization" if !none => set!(self, src, normalization, parse_norm(v, k, loc)?),
            "add_bias_linear" => set!(self, src, add_bias_linear, parse_bool(v, k, loc)?),
            "micro_batch_size" if !none => {
                set!(self, src, micro_batch_size, parse_uint(v, k, loc, 1)?)
            }
            "global_batch_size" if !none => {
                set!(self, src, global_batch_size, parse_uint(v, k, loc, 1)?)
            }
            "vocab_size" => set!(self, src, vocab_size, opt_u64(1)?),
            "padded_vocab_size" => set!(self, src, padded_vocab_size, opt_u64(1)?),
            "make_vocab_size_divisible_by" if !none => {
                set!(
                    self,
                    src,
                    make_vocab_size_divisible_by,
                    parse_uint(v, k, loc, 1)?
                )
            }
            "swiglu" => set!(self, src, swiglu, parse_bool(v, k, loc)?),
            "untie_embeddings_and_output_weights" => {
                set!(
                    self,
                    src,
                    untie_embeddings_and_output_weights,
                    parse_bool(v, k, loc)?
                )
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Mixture of experts.
    fn apply_moe(
        &mut self,
        k: &str,
        v: &str,
        src: &Source,
        loc: &Loc,
    ) -> Result<bool, MegatronError> {
        let none = is_none(v);
        match k {
            "num_experts" => {
                let n = if none {
                    None
                } else {
                    parse_num_experts(v, k, loc)?
                };
                set!(self, src, num_experts, n)
            }
            "moe_router_topk" if !none => {
                set!(self, src, moe_router_topk, parse_u32(v, k, loc, 1)?)
            }
            "moe_layer_freq" if !none => {
                set!(self, src, moe_layer_freq, parse_layer_freq(v, k, loc)?)
            }
            "moe_token_dispatcher_type" if !none => {
                set!(
                    self,
                    src,
                    moe_token_dispatcher_type,
                    parse_dispatcher(v, k, loc)?
                )
            }
            "moe_expert_capacity_factor" => {
                let f = if none {
                    None
                } else {
                    parse_capacity(v, k, loc)?
                };
                set!(self, src, moe_expert_capacity_factor, f)
            }
            "moe_ffn_hidden_size" => {
                let n = if none {
                    None
                } else {
                    Some(parse_uint(v, k, loc, 1)?)
                };
                set!(self, src, moe_ffn_hidden_size, n)
            }
            "moe_shared_expert_intermediate_size" => {
                let n = if none {
                    None
                } else {
                    Some(parse_uint(v, k, loc, 1)?)
                };
                set!(self, src, moe_shared_expert_intermediate_size, n)
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Precision. `--fp16` and `--bf16` exclude each other: one set by a more trusted
    /// input (or an override) turns off the other when that came from elsewhere (a preset's
    /// bf16 under a config file's `fp16 = true`); both from the same input is an error
    /// [`TrainingConfig::validate`] reports.
    fn apply_precision(
        &mut self,
        k: &str,
        v: &str,
        src: &Source,
        loc: &Loc,
    ) -> Result<bool, MegatronError> {
        match k {
            "fp16" | "bf16" => {
                let on = parse_bool(v, k, loc)?;
                let other = if k == "fp16" { "bf16" } else { "fp16" };
                let other_on = if k == "fp16" { self.bf16 } else { self.fp16 };
                if on && other_on && !self.sources.get(other).is_some_and(|s| same_origin(s, src)) {
                    if k == "fp16" {
                        self.bf16 = false;
                    } else {
                        self.fp16 = false;
                    }
                    self.sources.insert(
                        other.into(),
                        Source::Derived {
                            how: format!(
                                "turned off by {k} at {}",
                                super::error::source_place(src)
                            ),
                        },
                    );
                }
                if k == "fp16" {
                    set!(self, src, fp16, on)
                } else {
                    set!(self, src, bf16, on)
                }
            }
            "params_dtype" if !is_none(v) => set!(self, src, params_dtype, parse_dtype(v, k, loc)?),
            "accumulate_allreduce_grads_in_fp32" => {
                set!(
                    self,
                    src,
                    accumulate_allreduce_grads_in_fp32,
                    parse_bool(v, k, loc)?
                )
            }
            "grad_reduce_in_bf16" => set!(self, src, grad_reduce_in_bf16, parse_bool(v, k, loc)?),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Optimizer, overlap, recomputation and logging flags.
    fn apply_flags(
        &mut self,
        k: &str,
        v: &str,
        src: &Source,
        loc: &Loc,
    ) -> Result<bool, MegatronError> {
        let none = is_none(v);
        match k {
            "sequence_parallel" => set!(self, src, sequence_parallel, parse_bool(v, k, loc)?),
            "use_distributed_optimizer" => {
                set!(self, src, use_distributed_optimizer, parse_bool(v, k, loc)?)
            }
            "zero_stage" => {
                let n = if none {
                    None
                } else {
                    Some(parse_u32(v, k, loc, 0)?)
                };
                set!(self, src, zero_stage, n)
            }
            "overlap_grad_reduce" => set!(self, src, overlap_grad_reduce, parse_bool(v, k, loc)?),
            "overlap_param_gather" => set!(self, src, overlap_param_gather, parse_bool(v, k, loc)?),
            "recompute_granularity" => {
                set!(
                    self,
                    src,
                    recompute_granularity,
                    parse_recompute(v, k, loc)?
                )
            }
            "log_interval" if !none => set!(self, src, log_interval, parse_u32(v, k, loc, 1)?),
            "timing_log_level" if !none => {
                set!(self, src, timing_log_level, parse_u32(v, k, loc, 0)?)
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Spellings of older Megatron versions and of Megatron-DeepSpeed, mapped onto today's
    /// fields; the argument itself is also kept in `extra`, verbatim.
    fn apply_aliases(
        &mut self,
        k: &str,
        v: &str,
        src: &Source,
        loc: &Loc,
    ) -> Result<bool, MegatronError> {
        let none = is_none(v);
        match k {
            // Pre-2022 spellings of activation recomputation.
            "checkpoint_activations" if parse_bool(v, k, loc)? => {
                set!(self, src, recompute_granularity, Recompute::Full)
            }
            "recompute_activations" if parse_bool(v, k, loc)? => {
                set!(self, src, recompute_granularity, Recompute::Selective)
            }
            // Megatron before 2022 (`--DDP-impl local|torch`): PyTorch's DDP all-reduces
            // gradient buckets during the backward, Megatron's own (`local`) after it.
            "DDP_impl" if !none => {
                let overlap = match v.trim() {
                    "torch" => true,
                    "local" => false,
                    other => {
                        return Err(MegatronError::at(
                            loc,
                            k,
                            format!("expected local or torch, found `{other}`"),
                        ))
                    }
                };
                set!(self, src, overlap_grad_reduce, overlap)
            }
            "use_rotary_position_embeddings" if parse_bool(v, k, loc)? => {
                set!(self, src, position_embedding_type, PositionEmbedding::Rope)
            }
            // `--disable-bias-linear` is store_false into add_bias_linear.
            "disable_bias_linear" if parse_bool(v, k, loc)? => {
                set!(self, src, add_bias_linear, false)
            }
            // Megatron-DeepSpeed's GQA: KV heads = query groups.
            "num_key_value_heads" if !none => {
                set!(self, src, num_query_groups, Some(parse_u32(v, k, loc, 1)?));
                set!(self, src, group_query_attention, true);
            }
            // Megatron-DeepSpeed's MoE spellings.
            "topk" if !none => set!(self, src, moe_router_topk, parse_u32(v, k, loc, 1)?),
            "moe_expert_parallel_size" if !none => {
                set!(
                    self,
                    src,
                    expert_model_parallel_size,
                    parse_u32(v, k, loc, 1)?
                )
            }
            "num_layers_per_virtual_pipeline_stage"
            | "expert_interval"
            | "pad_vocab_size_to"
            | "num_virtual_stages_per_pipeline_rank"
            | "decoder_first_pipeline_num_layers"
            | "decoder_last_pipeline_num_layers"
                if !none =>
            {
                parse_uint(v, k, loc, 1)?;
                self.sources.insert(k.to_string(), src.clone());
            }
            "hierarchical_context_parallel_sizes" if !none => {
                parse_size_list(v, k, loc)?;
                self.sources.insert(k.to_string(), src.clone());
            }
            "deepspeed"
            | "embed_layernorm"
            | "quick_geglu"
            | "fp8_param_gather"
            | "account_for_embedding_in_pipeline_split"
            | "account_for_loss_in_pipeline_split" => {
                parse_bool(v, k, loc)?;
                self.sources.insert(k.to_string(), src.clone());
            }
            "deepspeed_config"
            | "rampup_batch_size"
            | "pp_partition_method"
            | "partition_method"
            | "pipeline_model_parallel_layout"
            | "tokenizer_type"
            | "tokenizer_model"
            | "tokenizer_name_or_path"
            | "vocab_file" => {
                self.sources.insert(k.to_string(), src.clone());
            }
            _ => return Ok(false),
        }
        // Handled: also kept verbatim (the typed value is in its field).
        self.extra.insert(k.to_string(), v.to_string());
        Ok(true)
    }
}
