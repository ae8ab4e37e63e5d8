//! `TrainingConfig`: what one Megatron-LM job is, as the rest of the pipeline needs it.
//!
//! Field names are Megatron's own argument names so `--json` output and overrides read
//! like Megatron's. Every field set by a parse records where it came from in `sources`.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Parameter / gradient element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    /// bfloat16 (2 bytes).
    Bf16,
    /// float16 (2 bytes).
    Fp16,
    /// float32 (4 bytes).
    Fp32,
}

impl Dtype {
    /// Size of one element in bytes.
    pub fn size_bytes(self) -> u64 {
        match self {
            Dtype::Bf16 | Dtype::Fp16 => 2,
            Dtype::Fp32 => 4,
        }
    }
}

/// Activation recomputation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Recompute {
    /// No recomputation.
    None,
    /// Selective (attention core only; negligible extra FLOPs in this model).
    Selective,
    /// Full: every layer's forward runs again during backward.
    Full,
}

/// Where a field's value came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Source {
    /// A line of an input file.
    File {
        /// Path as given.
        path: String,
        /// 1-based line.
        line: usize,
    },
    /// A named model preset.
    Preset {
        /// Preset name.
        name: String,
    },
    /// A command-line override.
    Override,
    /// Computed from other fields (e.g. DP from world size).
    Derived {
        /// How.
        how: String,
    },
    /// Megatron's default, not seen in any input.
    Default,
}

/// One logged training iteration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IterationRecord {
    /// Iteration number as logged.
    pub iteration: u64,
    /// Elapsed time per iteration (ms), averaged by Megatron over the log interval.
    pub elapsed_ms: f64,
    /// Any other `key: value` fields of the line, verbatim.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fields: BTreeMap<String, String>,
}

/// A timer as logged: min and max across ranks (equal when only one value was printed).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimerStat {
    /// Minimum across ranks, ms.
    pub min: f64,
    /// Maximum across ranks, ms.
    pub max: f64,
}

/// The training job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainingConfig {
    /// TP.
    pub tensor_model_parallel_size: u32,
    /// PP.
    pub pipeline_model_parallel_size: u32,
    /// Virtual pipeline chunks per stage (interleaved 1F1B) — `None` for plain 1F1B.
    pub virtual_pipeline_model_parallel_size: Option<u32>,
    /// CP.
    pub context_parallel_size: u32,
    /// EP (1 for dense models).
    pub expert_model_parallel_size: u32,
    /// DP.
    pub data_parallel_size: u32,
    /// W = TP·CP·PP·DP.
    pub world_size: u32,
    /// Transformer layers.
    pub num_layers: u32,
    /// h.
    pub hidden_size: u64,
    /// MLP hidden size (4h by default).
    pub ffn_hidden_size: u64,
    /// Attention heads.
    pub num_attention_heads: u32,
    /// KV groups under GQA; `None` means multi-head attention.
    pub num_query_groups: Option<u32>,
    /// s.
    pub seq_length: u64,
    /// Max positions (learned position embedding size).
    pub max_position_embeddings: u64,
    /// b.
    pub micro_batch_size: u64,
    /// Global batch.
    pub global_batch_size: u64,
    /// Vocabulary before padding.
    pub vocab_size: Option<u64>,
    /// Vocabulary padded to a multiple of 128·TP.
    pub padded_vocab_size: Option<u64>,
    /// Sequence parallelism.
    pub sequence_parallel: bool,
    /// Distributed optimizer (ZeRO-1 style RS + AG).
    pub use_distributed_optimizer: bool,
    /// Overlap DP gradient reduction with backward, in buckets.
    pub overlap_grad_reduce: bool,
    /// Overlap parameter all-gather with the next forward.
    pub overlap_param_gather: bool,
    /// Accumulate/all-reduce gradients in fp32.
    pub accumulate_allreduce_grads_in_fp32: bool,
    /// Reduce gradients in bf16 instead of fp32.
    pub grad_reduce_in_bf16: bool,
    /// Parameter dtype.
    pub params_dtype: Dtype,
    /// Output layer separate from the input embedding.
    pub untie_embeddings_and_output_weights: bool,
    /// SwiGLU MLP.
    pub swiglu: bool,
    /// Activation recomputation.
    pub recompute_granularity: Recompute,
    /// Rank order `tp-cp-ep-pp-dp` instead of `tp-cp-ep-dp-pp`.
    pub use_tp_pp_dp_mapping: bool,
    /// Iterations between log lines.
    pub log_interval: u32,
    /// Megatron timer level.
    pub timing_log_level: u32,
    /// Logged iterations, in file order.
    pub iterations: Vec<IterationRecord>,
    /// Logged timers (per iteration, ms), by Megatron's name.
    pub timers: BTreeMap<String, TimerStat>,
    /// Arguments we do not model, verbatim.
    pub extra: BTreeMap<String, String>,
    /// Where each field came from, by field name.
    pub sources: BTreeMap<String, Source>,
}
