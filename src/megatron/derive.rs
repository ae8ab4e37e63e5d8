//! The fields Megatron derives from others (its `validate_args`), and overrides.
//!
//! Every derivation runs only for a field no input set explicitly, records how it was
//! derived in `sources`, and uses checked arithmetic: a crafted size that would overflow
//! is an error naming the field and where its value came from.

use super::config::{Dtype, MoeLayerFreq, Source, TrainingConfig};
use super::error::{source_place, Loc, MegatronError, Warning};
use super::fields::{canonical_key, GPT2_VOCAB, REQUIRED};
use super::pattern::MAX_PATTERN_LAYERS;
use super::tokenizer::{tokenizer_vocab, TokenizerVocab};

/// Smallest multiple of `m` that is ≥ `v`; `None` on overflow (`m = 0` leaves `v`).
pub fn round_up(v: u64, m: u64) -> Option<u64> {
    if m == 0 {
        Some(v)
    } else {
        v.div_ceil(m).checked_mul(m)
    }
}

impl TrainingConfig {
    /// Where `field`'s value came from, for an error or a warning.
    pub(crate) fn place(&self, field: &str) -> String {
        self.sources
            .get(field)
            .map(source_place)
            .unwrap_or_else(|| "inputs".into())
    }

    /// An error for a product of sizes that does not fit 64 bits.
    pub(crate) fn overflow(&self, field: &str, what: &str) -> MegatronError {
        MegatronError::Inconsistent {
            at: self.place(field),
            field: field.into(),
            expected: format!("{what} does not fit in 64 bits: expected a realistic size"),
        }
    }

    fn derive<T>(&mut self, field: &str, how: impl Into<String>, set: impl FnOnce(&mut Self) -> T) {
        if !self.is_explicit(field) {
            set(self);
            self.sources
                .insert(field.to_string(), Source::Derived { how: how.into() });
        }
    }

    fn extra_u64(&self, key: &str) -> Option<u64> {
        self.extra
            .get(key)
            .and_then(|v| v.trim().parse::<u64>().ok())
    }

    /// Computes the fields Megatron derives from others, for every such field no input
    /// set explicitly: precision, FFN size (4h, or Megatron's SwiGLU rule), max positions,
    /// GQA, the MoE defaults, virtual pipeline size, DP ↔ world size, global batch, the
    /// padded vocabulary and the ZeRO stage's optimizer. Fails when a required argument is
    /// still missing or a size overflows.
    pub fn finalize(&mut self) -> Result<(), MegatronError> {
        self.check_required()?;
        self.derive_precision();
        self.derive_shape()?;
        self.derive_moe()?;
        self.derive_virtual_pipeline();
        self.derive_world()?;
        self.derive_batch()?;
        self.derive_vocab()?;
        self.derive_zero();
        self.warn_not_modelled();
        Ok(())
    }

    fn check_required(&self) -> Result<(), MegatronError> {
        match REQUIRED.iter().find(|f| !self.is_explicit(f)) {
            Some(f) => Err(MegatronError::Missing {
                at: "inputs".into(),
                field: (*f).to_string(),
                hint: "an arguments block, a launch script flag, a config file key or a preset"
                    .into(),
            }),
            None => Ok(()),
        }
    }

    /// Megatron: `--bf16` / `--fp16` set the parameter dtype; under bf16, gradients are
    /// accumulated and all-reduced in fp32 unless `--grad-reduce-in-bf16`.
    fn derive_precision(&mut self) {
        if !self.is_explicit("params_dtype") {
            let (dt, how) = if self.bf16 {
                (Dtype::Bf16, "--bf16")
            } else if self.fp16 {
                (Dtype::Fp16, "--fp16")
            } else {
                (Dtype::Fp32, "")
            };
            self.params_dtype = dt;
            let src = if how.is_empty() {
                Source::Default
            } else {
                Source::Derived { how: how.into() }
            };
            self.sources.insert("params_dtype".into(), src);
        }
        if self.bf16 {
            let want = !self.grad_reduce_in_bf16;
            if self.accumulate_allreduce_grads_in_fp32 != want {
                self.accumulate_allreduce_grads_in_fp32 = want;
                self.sources.insert(
                    "accumulate_allreduce_grads_in_fp32".into(),
                    Source::Derived {
                        how: "bf16: Megatron accumulates and all-reduces gradients in fp32 unless --grad-reduce-in-bf16".into(),
                    },
                );
            }
        } else if matches!(
            self.sources.get("accumulate_allreduce_grads_in_fp32"),
            Some(Source::Derived { .. })
        ) {
            // The bf16 rule no longer applies (an override turned bf16 off): back to
            // Megatron's default, so an fp16 job reduces its gradients in fp16.
            self.accumulate_allreduce_grads_in_fp32 = false;
            self.sources
                .insert("accumulate_allreduce_grads_in_fp32".into(), Source::Default);
        }
    }

    fn derive_shape(&mut self) -> Result<(), MegatronError> {
        let h = self.hidden_size;
        if self.swiglu {
            // Megatron: int((4h · 2/3) / 64) · 64, keeping SwiGLU's parameter count ≈ 4h MLP's.
            let f = h
                .checked_mul(8)
                .map(|x| x / 3 / 64 * 64)
                .ok_or_else(|| self.overflow("hidden_size", "8·hidden_size"))?;
            self.derive("ffn_hidden_size", "SwiGLU: floor(8h/3 / 64)·64", |c| {
                c.ffn_hidden_size = f
            });
        } else {
            let f = h
                .checked_mul(4)
                .ok_or_else(|| self.overflow("hidden_size", "4·hidden_size"))?;
            self.derive("ffn_hidden_size", "4·hidden_size", |c| {
                c.ffn_hidden_size = f
            });
        }
        let s = self.seq_length;
        self.derive("max_position_embeddings", "seq_length", |c| {
            c.max_position_embeddings = s
        });
        self.derive_gqa();
        Ok(())
    }

    /// Megatron applies `num_query_groups` only under `--group-query-attention`; a launch
    /// script that gives the groups without the switch runs multi-head attention, which
    /// is said in a warning rather than silently either way.
    fn derive_gqa(&mut self) {
        if self.group_query_attention || self.num_query_groups.is_none() {
            return;
        }
        if let Some(Source::File { path, line }) = self.sources.get("num_query_groups") {
            if !self.is_explicit("group_query_attention") {
                self.warnings.push(Warning {
                    at: format!("{path}:{line}:1"),
                    field: "num_query_groups".into(),
                    message: "given without --group-query-attention, which Megatron needs to apply it: read as multi-head attention (add --group-query-attention for GQA)".into(),
                });
            }
        }
        self.num_query_groups = None;
        self.sources.insert(
            "num_query_groups".into(),
            Source::Derived {
                how: "group_query_attention is False".into(),
            },
        );
    }

    /// Megatron's MoE defaults: expert TP = TP, expert MLP size = `ffn_hidden_size`; and
    /// Megatron-DeepSpeed's expert interval as a layer pattern.
    fn derive_moe(&mut self) -> Result<(), MegatronError> {
        let tp = self.tensor_model_parallel_size;
        self.derive(
            "expert_tensor_parallel_size",
            "tensor_model_parallel_size",
            |c| c.expert_tensor_parallel_size = tp,
        );
        if self.num_experts.is_none() {
            return Ok(());
        }
        let f = self.ffn_hidden_size;
        self.derive("moe_ffn_hidden_size", "ffn_hidden_size", |c| {
            c.moe_ffn_hidden_size = Some(f)
        });
        let Some(every) = self.extra_u64("expert_interval") else {
            return Ok(());
        };
        if self.is_explicit("moe_layer_freq") {
            return Ok(());
        }
        // Megatron-DeepSpeed: layer n (1-based) is MoE when n % interval == 0.
        let l = self.num_layers as usize;
        if l > MAX_PATTERN_LAYERS {
            return Err(MegatronError::Inconsistent {
                at: self.place("num_layers"),
                field: "num_layers".into(),
                expected: format!(
                    "{l} layers with a Megatron-DeepSpeed expert_interval: at most {MAX_PATTERN_LAYERS} layers are supported"
                ),
            });
        }
        let pattern = (0..l as u64).map(|i| (i + 1) % every == 0).collect();
        self.derive(
            "moe_layer_freq",
            format!(
                "Megatron-DeepSpeed expert_interval {every}: layers n·{every} (1-based) are MoE"
            ),
            |c| c.moe_layer_freq = MoeLayerFreq::Pattern(pattern),
        );
        Ok(())
    }

    fn derive_virtual_pipeline(&mut self) {
        // Megatron-core's newer spelling gives the chunks per stage directly.
        if let Some(v) = self
            .extra_u64("num_virtual_stages_per_pipeline_rank")
            .and_then(|n| u32::try_from(n).ok())
            .filter(|v| *v > 1)
        {
            self.derive(
                "virtual_pipeline_model_parallel_size",
                "num_virtual_stages_per_pipeline_rank",
                |c| c.virtual_pipeline_model_parallel_size = Some(v),
            );
            return;
        }
        let Some(n) = self
            .extra_u64("num_layers_per_virtual_pipeline_stage")
            .and_then(|n| u32::try_from(n).ok())
        else {
            return;
        };
        let (l, pp) = (self.num_layers, self.pipeline_model_parallel_size);
        if n > 0 && pp > 1 && pp.checked_mul(n).is_some_and(|d| l % d == 0) {
            self.derive(
                "virtual_pipeline_model_parallel_size",
                "num_layers / pipeline_model_parallel_size / num_layers_per_virtual_pipeline_stage",
                |c| c.virtual_pipeline_model_parallel_size = Some(l / pp / n),
            );
        }
    }

    /// TP·CP·PP, the GPUs of one model replica.
    pub(crate) fn model_parallel_product(&self) -> Option<u64> {
        u64::from(self.tensor_model_parallel_size)
            .checked_mul(u64::from(self.context_parallel_size))?
            .checked_mul(u64::from(self.pipeline_model_parallel_size))
    }

    /// DP from the world size (when only the world is given), or the world size from DP.
    fn derive_world(&mut self) -> Result<(), MegatronError> {
        let mp = self
            .model_parallel_product()
            .ok_or_else(|| self.overflow("tensor_model_parallel_size", "TP·CP·PP"))?;
        if !self.is_explicit("data_parallel_size") && self.is_explicit("world_size") {
            let w = u64::from(self.world_size);
            if !w.is_multiple_of(mp) {
                return Err(self.world_not_divisible(w, mp));
            }
            self.derive("data_parallel_size", "world_size / (TP·CP·PP)", |c| {
                c.data_parallel_size = (w / mp) as u32
            });
        } else {
            let w = mp
                .checked_mul(u64::from(self.data_parallel_size))
                .and_then(|w| u32::try_from(w).ok())
                .ok_or_else(|| MegatronError::Inconsistent {
                    at: self.place("data_parallel_size"),
                    field: "world_size".into(),
                    expected: format!(
                        "TP·CP·PP·DP = {mp}·{} does not fit in 32 bits",
                        self.data_parallel_size
                    ),
                })?;
            self.derive("world_size", "TP·CP·PP·DP", |c| c.world_size = w);
        }
        Ok(())
    }

    /// The error for a GPU count the parallel sizes do not divide, with the overrides that
    /// make the job valid: a DP (smallest that reaches the given GPU count and splits the
    /// global batch) or the matching world size.
    fn world_not_divisible(&self, w: u64, mp: u64) -> MegatronError {
        let mb = self.micro_batch_size.max(1);
        let gb = self.global_batch_size;
        let first = w.div_ceil(mp).max(1);
        let fits = |k: u64| {
            !self.is_explicit("global_batch_size") || gb.is_multiple_of(mb.saturating_mul(k))
        };
        let k = (first..first.saturating_add(4096))
            .find(|k| fits(*k))
            .unwrap_or(first);
        MegatronError::Inconsistent {
            at: self.place("world_size"),
            field: "world_size".into(),
            expected: format!(
                "world_size {w} is not divisible by tensor·context·pipeline = {}·{}·{} = {mp}: the parallel sizes need a multiple of {mp} GPUs; \
                 make it valid with an override, e.g. `--dp {k}` or `--set world_size={}` ({} GPUs), or smaller parallel sizes",
                self.tensor_model_parallel_size,
                self.context_parallel_size,
                self.pipeline_model_parallel_size,
                k.saturating_mul(mp),
                k.saturating_mul(mp),
            ),
        }
    }

    fn derive_batch(&mut self) -> Result<(), MegatronError> {
        if self.extra_value("rampup_batch_size").is_some() {
            let at = self.place("rampup_batch_size");
            self.warn(Warning {
                at,
                field: "rampup_batch_size".into(),
                message: "the batch ramp-up of the first iterations is not modelled: the iteration modelled has the final global batch".into(),
            });
        }
        let gb = self
            .micro_batch_size
            .checked_mul(u64::from(self.data_parallel_size))
            .ok_or_else(|| {
                self.overflow("micro_batch_size", "micro_batch_size·data_parallel_size")
            })?;
        self.derive(
            "global_batch_size",
            "micro_batch_size·data_parallel_size",
            |c| c.global_batch_size = gb,
        );
        Ok(())
    }

    /// The vocabulary (docs/model.md#vocabulary): the tokenizer's own size when the
    /// tokenizer is a published one, `--vocab-size` for `NullTokenizer`/`TikTokenizer` or
    /// a tokenizer the reader does not know, GPT-2's 50257 when nothing names one (with a
    /// warning); then padded as Megatron pads it: to `--pad-vocab-size-to` when given
    /// (Megatron-DeepSpeed), else up to a multiple of `make_vocab_size_divisible_by·TP`.
    fn derive_vocab(&mut self) -> Result<(), MegatronError> {
        if self.is_explicit("padded_vocab_size") {
            return Ok(());
        }
        let pad_to = self.extra_u64("pad_vocab_size_to");
        let Some((v, how)) = self.vocabulary(pad_to.is_some())? else {
            // The tokenizer's size is unknown, but --pad-vocab-size-to fixes the rows.
            let to = pad_to.unwrap_or(0);
            let how = format!(
                "--pad-vocab-size-to {to} ({}); the tokenizer's own size is not known to the reader (Megatron-DeepSpeed requires it to be at most {to})",
                self.place("pad_vocab_size_to")
            );
            self.derive("padded_vocab_size", how, |c| c.padded_vocab_size = Some(to));
            return Ok(());
        };
        if self.vocab_size != Some(v) {
            // Megatron sizes the embedding from the tokenizer whatever --vocab-size says
            // (the warning names both).
            self.vocab_size = Some(v);
            self.sources
                .insert("vocab_size".into(), Source::Derived { how: how.clone() });
        }
        if let Some(to) = pad_to {
            let at = self.place("pad_vocab_size_to");
            let div = self.make_vocab_size_divisible_by.max(1);
            if to < v {
                return Err(MegatronError::Inconsistent {
                    at,
                    field: "pad_vocab_size_to".into(),
                    expected: format!(
                        "a size ≥ the vocabulary {v} (Megatron-DeepSpeed pads only up), found {to}"
                    ),
                });
            }
            if !to.is_multiple_of(div) {
                return Err(MegatronError::Inconsistent {
                    at,
                    field: "pad_vocab_size_to".into(),
                    expected: format!("a multiple of make_vocab_size_divisible_by {div} (Megatron-DeepSpeed refuses others), found {to}"),
                });
            }
            let how = format!("--pad-vocab-size-to {to} ({at}); vocabulary {v}: {how}");
            self.derive("padded_vocab_size", how, |c| c.padded_vocab_size = Some(to));
            return Ok(());
        }
        let p = self
            .vocab_multiple()
            .and_then(|m| round_up(v, m))
            .ok_or_else(|| {
                self.overflow("make_vocab_size_divisible_by", "the padded vocabulary")
            })?;
        let how = format!("{v} rounded up to make_vocab_size_divisible_by·TP; vocabulary: {how}");
        self.derive("padded_vocab_size", how, |c| c.padded_vocab_size = Some(p));
        Ok(())
    }

    /// The size of the tokenizer file `model` names, when it is on disk (as given, or
    /// beside the input that names it); `None` when it is not. A file that is there but
    /// is no tokenizer is an error naming it.
    fn tokenizer_file_size(
        &self,
        key: Option<&str>,
        model: Option<&str>,
    ) -> Result<Option<(u64, String)>, MegatronError> {
        let (Some(key), Some(model)) = (key, model) else {
            return Ok(None);
        };
        let given = std::path::Path::new(model.trim());
        let mut candidates = vec![given.to_path_buf()];
        if let Some(Source::File { path, .. }) = self.sources.get(key) {
            if let Some(dir) = std::path::Path::new(path).parent() {
                candidates.push(dir.join(given));
            }
        }
        for c in candidates {
            match super::tokenizer::read_tokenizer_size(&c) {
                Ok(Some(found)) => return Ok(Some(found)),
                Ok(None) => continue,
                Err(msg) => {
                    return Err(MegatronError::Syntax {
                        at: self.place(key),
                        field: key.into(),
                        expected: format!("a tokenizer file: {msg}"),
                    })
                }
            }
        }
        Ok(None)
    }

    /// The unpadded vocabulary and how it was found; warns when it is assumed. `None`
    /// when it is unknown and `padded_given` (the padded size does not depend on it).
    fn vocabulary(&mut self, padded_given: bool) -> Result<Option<(u64, String)>, MegatronError> {
        let ttype = self.extra_value("tokenizer_type").map(str::to_string);
        let model_key = ["tokenizer_model", "tokenizer_name_or_path", "vocab_file"]
            .into_iter()
            .find(|k| self.extra_value(k).is_some());
        let model = model_key.and_then(|k| self.extra_value(k).map(str::to_string));
        let given = if self.is_explicit("vocab_size") {
            self.vocab_size
        } else {
            None
        };
        let given_at = self.place("vocab_size");
        let tok_at = self.place(if ttype.is_some() {
            "tokenizer_type"
        } else {
            model_key.unwrap_or("tokenizer_type")
        });
        let tv = match self.tokenizer_file_size(model_key, model.as_deref())? {
            Some((n, how)) => TokenizerVocab::Known(n, how),
            None => tokenizer_vocab(ttype.as_deref(), model.as_deref()),
        };
        if padded_given
            && given.is_none()
            && matches!(tv, TokenizerVocab::Unknown(_) | TokenizerVocab::None)
        {
            return Ok(None);
        }
        Ok(Some(match tv {
            TokenizerVocab::Known(n, how) => {
                if let Some(g) = given.filter(|g| *g != n) {
                    self.warn(Warning {
                        at: given_at.clone(),
                        field: "vocab_size".into(),
                        message: format!("{g} differs from the tokenizer's {n} ({how}, {tok_at}); Megatron sizes the embedding from the tokenizer, so {n} is used"),
                    });
                }
                (n, format!("{how} ({tok_at})"))
            }
            TokenizerVocab::FromVocabSize(default, how) => match (given, default) {
                (Some(g), _) => (g, format!("--vocab-size ({given_at}); {how} ({tok_at})")),
                (None, Some(d)) => (d, format!("{how} ({tok_at})")),
                (None, None) => {
                    return Err(MegatronError::Missing {
                        at: tok_at,
                        field: "vocab_size".into(),
                        hint: format!("{how}: give --vocab-size"),
                    })
                }
            },
            TokenizerVocab::Unknown(what) => match given {
                Some(g) => {
                    self.warn(Warning {
                        at: tok_at.clone(),
                        field: "tokenizer_type".into(),
                        message: format!("{what}: --vocab-size {g} ({given_at}) is used as its size; Megatron reads the size from the tokenizer itself, check it"),
                    });
                    (g, format!("--vocab-size ({given_at}), the size of {what}"))
                }
                None => {
                    self.warn(Warning {
                        at: tok_at.clone(),
                        field: "tokenizer_type".into(),
                        message: format!("{what}: GPT-2's {GPT2_VOCAB} assumed, which sizes the embedding, LM head and logits; give --vocab-size (or --set padded_vocab_size=N)"),
                    });
                    (
                        GPT2_VOCAB,
                        format!("assumed GPT-2's {GPT2_VOCAB}: {what} ({tok_at})"),
                    )
                }
            },
            TokenizerVocab::None => match given {
                Some(g) => (g, format!("vocab_size ({given_at})")),
                None => {
                    self.warn(Warning {
                        at: "inputs".into(),
                        field: "vocab_size".into(),
                        message: format!("no tokenizer and no vocab_size in any input: GPT-2's {GPT2_VOCAB} assumed, which sizes the embedding, LM head and logits"),
                    });
                    (GPT2_VOCAB, format!("no tokenizer and no vocab_size in any input: GPT-2 BPE's {GPT2_VOCAB} assumed"))
                }
            },
        }))
    }

    /// A warning for each argument of [`super::fields::NOT_MODELLED`] the job sets.
    fn warn_not_modelled(&mut self) {
        for (k, what) in super::fields::NOT_MODELLED {
            let typed = (*k == "overlap_param_gather"
                && self.overlap_param_gather
                && self.use_distributed_optimizer)
                .then_some("True");
            let Some(v) = typed.or_else(|| self.extra_value(k)) else {
                continue;
            };
            if matches!(v, "False" | "false" | "0") {
                continue;
            }
            let at = self.place(k);
            self.warn(Warning {
                at,
                field: (*k).to_string(),
                message: format!("set (`{v}`) but not modelled: {what}"),
            });
        }
    }

    /// Records a warning once (finalize runs again after every override).
    fn warn(&mut self, w: Warning) {
        if !self.warnings.contains(&w) {
            self.warnings.push(w);
        }
    }

    /// Megatron-DeepSpeed: ZeRO applies only under `--deepspeed`; stages 1 and 2 shard
    /// the optimizer state (and gradients) over DP as Megatron's distributed optimizer
    /// does — a reduce-scatter of gradients and an all-gather of parameters per step.
    /// Stage 3 is refused by [`TrainingConfig::validate`].
    fn derive_zero(&mut self) {
        let deepspeed = self
            .extra
            .get("deepspeed")
            .is_some_and(|v| matches!(v.trim(), "True" | "true" | "1"));
        if !deepspeed {
            if self.zero_stage.is_some() {
                self.zero_stage = None;
                self.sources.insert(
                    "zero_stage".into(),
                    Source::Derived {
                        how: "DeepSpeed is off (no --deepspeed): ZeRO does not apply".into(),
                    },
                );
            }
            return;
        }
        if let Some(stage @ (1 | 2)) = self.zero_stage {
            if !self.use_distributed_optimizer {
                self.use_distributed_optimizer = true;
                self.sources.insert(
                    "use_distributed_optimizer".into(),
                    Source::Derived {
                        how: format!(
                            "DeepSpeed ZeRO stage {stage} ({}) shards optimizer state over DP as the distributed optimizer does",
                            self.place("zero_stage")
                        ),
                    },
                );
            }
        }
    }

    /// `make_vocab_size_divisible_by · TP`, the multiple Megatron pads the vocabulary to;
    /// `None` on overflow.
    pub fn vocab_multiple(&self) -> Option<u64> {
        self.make_vocab_size_divisible_by
            .max(1)
            .checked_mul(u64::from(self.tensor_model_parallel_size.max(1)))
    }

    /// Applies one override without recomputing the derived fields: records
    /// [`Source::Override`] and marks the fields that depend on it for re-derivation.
    ///
    /// The latest override wins among the parallel sizes: overriding `world_size`
    /// re-derives DP; overriding DP re-derives the world size; overriding TP, CP or PP
    /// re-derives the world size if DP was overridden, else DP (the GPU count is kept).
    /// Changing TP or the vocabulary divisor re-derives a padded vocabulary read from a log.
    pub fn override_arg(&mut self, key: &str, value: &str) -> Result<(), MegatronError> {
        let k = canonical_key(key);
        let loc = Loc::new(override_place(&k), 0, 0);
        self.apply(&k, value, Source::Override, &loc)?;
        let known = super::fields::FIELDS
            .iter()
            .chain(super::fields::TYPED_EXTRA)
            .any(|f| *f == k);
        if !known {
            // A typo (`--set pp=2`) must not pass silently as an extra argument.
            let mut w = super::cfgfile::unknown_key_warning(&loc, &k);
            w.at = "override".into();
            self.warnings.push(w);
        }
        let rederive = |c: &mut Self, f: &str| {
            c.sources.insert(
                f.to_string(),
                Source::Derived {
                    how: "re-derived after an override".into(),
                },
            );
        };
        match k.as_str() {
            "world_size" => rederive(self, "data_parallel_size"),
            "tensor_model_parallel_size"
            | "context_parallel_size"
            | "pipeline_model_parallel_size" => {
                if matches!(
                    self.sources.get("data_parallel_size"),
                    Some(Source::Override)
                ) {
                    rederive(self, "world_size");
                } else {
                    rederive(self, "data_parallel_size");
                }
                if k == "tensor_model_parallel_size" && self.vocab_size.is_some() {
                    rederive(self, "padded_vocab_size");
                }
            }
            "data_parallel_size" => rederive(self, "world_size"),
            "make_vocab_size_divisible_by"
            | "vocab_size"
            | "pad_vocab_size_to"
            | "tokenizer_type"
            | "tokenizer_model"
            | "tokenizer_name_or_path"
            | "vocab_file" => rederive(self, "padded_vocab_size"),
            "num_query_groups" if self.num_query_groups.is_some() => {
                self.group_query_attention = true;
                self.sources
                    .insert("group_query_attention".into(), Source::Override);
            }
            "hidden_size" | "swiglu" => rederive(self, "ffn_hidden_size"),
            "seq_length" => rederive(self, "max_position_embeddings"),
            "bf16" | "fp16" => rederive(self, "params_dtype"),
            _ => {}
        }
        Ok(())
    }

    /// Overrides one argument by Megatron name (snake_case or kebab-case, with or without
    /// leading `--`) as [`TrainingConfig::override_arg`] does, then recomputes the derived
    /// fields. Call [`TrainingConfig::validate`] once all overrides are applied.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), MegatronError> {
        self.override_arg(key, value)?;
        self.finalize()
    }
}

/// Where an override of `key` came from, as its errors name it: the command-line flags
/// that set it (a parallel size's short flag, Megatron's flag, or `--set KEY=VALUE`).
fn override_place(key: &str) -> String {
    let short = match key {
        "tensor_model_parallel_size" => Some("--tp"),
        "pipeline_model_parallel_size" => Some("--pp"),
        "data_parallel_size" => Some("--dp"),
        "virtual_pipeline_model_parallel_size" => Some("--vpp"),
        "context_parallel_size" => Some("--cp"),
        "expert_model_parallel_size" => Some("--ep"),
        _ => None,
    };
    let flag = format!("--{}", key.replace('_', "-"));
    match short {
        Some(s) => format!("override ({s} or {flag})"),
        None => format!("override ({flag} or --set {key})"),
    }
}
