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

pub use super::source::Source;

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

/// How context-parallel attention exchanges K/V (`--cp-comm-type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CpCommType {
    /// Ring of point-to-point K/V exchanges (Megatron's default).
    #[serde(rename = "p2p")]
    P2p,
    /// All-to-all over the CP group (Ulysses-style).
    #[serde(rename = "a2a")]
    A2a,
    /// All-gather of K/V before attention.
    #[serde(rename = "allgather")]
    AllGather,
    /// Hierarchical: all-to-all inside, ring across (`a2a+p2p`).
    #[serde(rename = "a2a+p2p")]
    A2aP2p,
}

impl CpCommType {
    /// Megatron's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            CpCommType::P2p => "p2p",
            CpCommType::A2a => "a2a",
            CpCommType::AllGather => "allgather",
            CpCommType::A2aP2p => "a2a+p2p",
        }
    }
}

/// MoE token dispatcher (`--moe-token-dispatcher-type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MoeDispatcher {
    /// All-gather tokens over the EP×TP group, reduce-scatter outputs (Megatron's default).
    #[serde(rename = "allgather")]
    AllGather,
    /// All-to-all dispatch and combine.
    #[serde(rename = "alltoall")]
    AllToAll,
    /// The sequence-level all-to-all of Megatron-core ≤ 0.11 (removed since).
    #[serde(rename = "alltoall_seq")]
    AllToAllSeq,
    /// DeepEP / HybridEP fused dispatch.
    #[serde(rename = "flex")]
    Flex,
}

impl MoeDispatcher {
    /// Megatron's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            MoeDispatcher::AllGather => "allgather",
            MoeDispatcher::AllToAll => "alltoall",
            MoeDispatcher::AllToAllSeq => "alltoall_seq",
            MoeDispatcher::Flex => "flex",
        }
    }
}

/// Normalisation layer (`--normalization`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Normalization {
    /// LayerNorm: a weight and a bias per norm.
    LayerNorm,
    /// RMSNorm: a weight only.
    RMSNorm,
}

impl Normalization {
    /// Megatron's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Normalization::LayerNorm => "LayerNorm",
            Normalization::RMSNorm => "RMSNorm",
        }
    }
}

/// Position embedding (`--position-embedding-type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PositionEmbedding {
    /// Learned absolute embedding table of `max_position_embeddings × h` (the default).
    LearnedAbsolute,
    /// Rotary (no parameters).
    Rope,
    /// YaRN-scaled rotary.
    Yarn,
    /// Multimodal rotary.
    Mrope,
    /// Relative attention bias.
    Relative,
    /// ALiBi (Megatron-DeepSpeed's `alibi`): a fixed per-head bias on the attention
    /// scores, no parameters.
    Alibi,
    /// None.
    None,
}

impl PositionEmbedding {
    /// Megatron's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            PositionEmbedding::LearnedAbsolute => "learned_absolute",
            PositionEmbedding::Rope => "rope",
            PositionEmbedding::Yarn => "yarn",
            PositionEmbedding::Mrope => "mrope",
            PositionEmbedding::Relative => "relative",
            PositionEmbedding::Alibi => "alibi",
            PositionEmbedding::None => "none",
        }
    }
}

/// Which transformer layers are mixture-of-experts layers (`--moe-layer-freq`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MoeLayerFreq {
    /// One MoE layer every N layers, starting with layer 0 (Megatron: `i % N == 0`).
    Every(u32),
    /// An explicit per-layer pattern (`true` = MoE), one entry per layer, from Megatron's
    /// list syntax (`([0]*3+[1]*29)`, `[1,0,1,0]`).
    Pattern(Vec<bool>),
}

impl MoeLayerFreq {
    /// Whether layer `i` (0-based) is a MoE layer. Computed per layer so no per-layer table
    /// is ever sized by the (untrusted) layer count.
    pub fn is_moe_layer(&self, i: u32) -> bool {
        match self {
            MoeLayerFreq::Every(n) => *n > 0 && i.is_multiple_of(*n),
            MoeLayerFreq::Pattern(p) => p.get(i as usize).copied().unwrap_or(false),
        }
    }
}

/// On the wire as Megatron writes it: an integer, or a list of 0/1.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum MoeLayerFreqRepr {
    Every(u32),
    Pattern(Vec<u8>),
}

impl Serialize for MoeLayerFreq {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            MoeLayerFreq::Every(n) => MoeLayerFreqRepr::Every(*n),
            MoeLayerFreq::Pattern(p) => {
                MoeLayerFreqRepr::Pattern(p.iter().map(|b| u8::from(*b)).collect())
            }
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for MoeLayerFreq {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match MoeLayerFreqRepr::deserialize(d)? {
            MoeLayerFreqRepr::Every(n) => MoeLayerFreq::Every(n),
            MoeLayerFreqRepr::Pattern(p) => {
                MoeLayerFreq::Pattern(p.into_iter().map(|b| b != 0).collect())
            }
        })
    }
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
    /// How CP attention exchanges K/V (`--cp-comm-type`; one type for every layer).
    pub cp_comm_type: CpCommType,
    /// EP (1 for dense models).
    pub expert_model_parallel_size: u32,
    /// Expert TP: TP inside the expert layers (Megatron's default: the dense TP).
    pub expert_tensor_parallel_size: u32,
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
    /// `--group-query-attention`: `num_query_groups` applies only when this is set.
    pub group_query_attention: bool,
    /// KV groups under GQA; `None` means multi-head attention.
    pub num_query_groups: Option<u32>,
    /// s.
    pub seq_length: u64,
    /// Max positions (learned position embedding size).
    pub max_position_embeddings: u64,
    /// Position embedding kind.
    pub position_embedding_type: PositionEmbedding,
    /// Norm layer kind.
    pub normalization: Normalization,
    /// Biases in every linear layer (`--disable-bias-linear` clears it).
    pub add_bias_linear: bool,
    /// Experts per MoE layer; `None` for a dense model.
    pub num_experts: Option<u32>,
    /// Experts each token is routed to.
    pub moe_router_topk: u32,
    /// Which layers are MoE layers.
    pub moe_layer_freq: MoeLayerFreq,
    /// Token dispatcher.
    pub moe_token_dispatcher_type: MoeDispatcher,
    /// Expert capacity factor; `None` = dropless.
    pub moe_expert_capacity_factor: Option<f64>,
    /// Hidden size of one expert's MLP (Megatron's default: `ffn_hidden_size`).
    pub moe_ffn_hidden_size: Option<u64>,
    /// Hidden size of the shared experts' MLP; `None` = no shared expert.
    pub moe_shared_expert_intermediate_size: Option<u64>,
    /// b.
    pub micro_batch_size: u64,
    /// Global batch.
    pub global_batch_size: u64,
    /// Vocabulary before padding.
    pub vocab_size: Option<u64>,
    /// Pad the vocabulary to a multiple of this times TP.
    pub make_vocab_size_divisible_by: u64,
    /// Vocabulary padded to a multiple of `make_vocab_size_divisible_by`·TP.
    pub padded_vocab_size: Option<u64>,
    /// Sequence parallelism.
    pub sequence_parallel: bool,
    /// Distributed optimizer (ZeRO-1 style RS + AG).
    pub use_distributed_optimizer: bool,
    /// DeepSpeed ZeRO stage of a Megatron-DeepSpeed job (`None` when DeepSpeed is off).
    pub zero_stage: Option<u32>,
    /// Overlap DP gradient reduction with backward, in buckets.
    pub overlap_grad_reduce: bool,
    /// Overlap parameter all-gather with the next forward.
    pub overlap_param_gather: bool,
    /// Accumulate/all-reduce gradients in fp32.
    pub accumulate_allreduce_grads_in_fp32: bool,
    /// Reduce gradients in bf16 instead of fp32.
    pub grad_reduce_in_bf16: bool,
    /// `--fp16`: mixed precision with fp16 parameters.
    pub fp16: bool,
    /// `--bf16`: mixed precision with bf16 parameters.
    pub bf16: bool,
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
    /// What the reader could not decide or chose to ignore, each naming file:line (printed
    /// by the CLI on stderr; not part of the configuration, so not serialised).
    #[serde(skip)]
    pub warnings: Vec<super::error::Warning>,
}
