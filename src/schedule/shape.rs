//! The model's shape as the schedule needs it: matmul FLOPs per layer part and the
//! parameter tensors of each kind of layer, per GPU, in the order Megatron's DDP fills
//! its gradient buckets (docs/model.md#parameters-and-buckets,
//! docs/model.md#compute-and-calibration).

use crate::megatron::{Normalization, PositionEmbedding, TrainingConfig};

/// Forward FLOPs of one layer's parts on one GPU (already divided by TP where Megatron
/// splits the matmul), for one micro-batch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Flops {
    /// QKV projection.
    pub qkv: f64,
    /// Attention core: scores `QKᵀ` and their product with V; each local query attends to
    /// the whole sequence (no causal halving, docs/model.md#known-gaps).
    pub core: f64,
    /// Attention output projection.
    pub proj: f64,
    /// Dense MLP.
    pub mlp: f64,
    /// Logits on the last stage.
    pub head: f64,
    /// MoE router (replicated on every TP rank, on its `T` tokens).
    pub router: f64,
    /// Shared experts of a MoE layer.
    pub shared: f64,
    /// One routed token through one expert (fc1 + fc2), divided by nothing: the expert
    /// TP split cancels against the expert-TP all-gather of the tokens.
    pub per_expert_token: f64,
}

/// Un-split forward FLOPs (whole layer, before ÷TP), kept as one sum where the schedule
/// has always used it so that dense traces keep their exact compute times.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct RawShape {
    pub attn_fwd: f64,
    pub mlp_fwd: f64,
    pub head_fwd: f64,
}

/// Width of K (or V) per token: `h/a · g` with GQA, `h` without.
pub(crate) fn kv_width(cfg: &TrainingConfig) -> u64 {
    let heads = cfg.num_attention_heads.max(1) as u64;
    match cfg.num_query_groups {
        Some(g) => cfg.hidden_size / heads * g as u64,
        None => cfg.hidden_size,
    }
}

/// Tokens of one micro-batch a rank routes in a MoE layer: `b·s/CP`, divided by TP
/// (sequence parallelism is required with TP > 1 in MoE layers).
pub(crate) fn moe_tokens(cfg: &TrainingConfig) -> f64 {
    let sl = (cfg.seq_length / cfg.context_parallel_size.max(1) as u64) as f64;
    cfg.micro_batch_size as f64 * sl / cfg.tensor_model_parallel_size.max(1) as f64
}

pub(crate) fn raw(cfg: &TrainingConfig) -> RawShape {
    let (b, h, ffn) = (
        cfg.micro_batch_size as f64,
        cfg.hidden_size as f64,
        cfg.ffn_hidden_size as f64,
    );
    let s = cfg.seq_length as f64;
    let sl = s / cfg.context_parallel_size.max(1) as f64;
    let kv = kv_width(cfg) as f64;
    let mlp_mats = if cfg.gated_linear_unit() { 3.0 } else { 2.0 };
    RawShape {
        // QKV + scores (QKᵀ) + values (AV) + output projection.
        attn_fwd: 2.0 * b * sl * h * (h + 2.0 * kv) + 4.0 * b * sl * s * h + 2.0 * b * sl * h * h,
        mlp_fwd: 2.0 * b * sl * h * ffn * mlp_mats,
        head_fwd: 2.0 * b * sl * h * cfg.padded_vocab() as f64,
    }
}

pub(crate) fn flops(cfg: &TrainingConfig) -> Flops {
    let (b, h) = (cfg.micro_batch_size as f64, cfg.hidden_size as f64);
    let tp = cfg.tensor_model_parallel_size.max(1) as f64;
    let s = cfg.seq_length as f64;
    let sl = s / cfg.context_parallel_size.max(1) as f64;
    let kv = kv_width(cfg) as f64;
    let mats = if cfg.gated_linear_unit() { 3.0 } else { 2.0 };
    let r = raw(cfg);
    let experts = cfg.num_experts.unwrap_or(0) as f64;
    let ffn_e = cfg.moe_ffn_hidden_size.unwrap_or(cfg.ffn_hidden_size) as f64;
    let shared = cfg.moe_shared_expert_intermediate_size.unwrap_or(0) as f64;
    Flops {
        qkv: 2.0 * b * sl * h * (h + 2.0 * kv) / tp,
        core: 4.0 * b * sl * s * h / tp,
        proj: 2.0 * b * sl * h * h / tp,
        mlp: r.mlp_fwd / tp,
        head: r.head_fwd / tp,
        router: 2.0 * moe_tokens(cfg) * h * experts,
        shared: 2.0 * b * sl * h * shared * mats / tp,
        per_expert_token: 2.0 * h * ffn_e * mats,
    }
}

/// Elements of each parameter tensor one GPU holds, split by the buffer Megatron's DDP
/// puts it in: dense (reduced over DP×CP) or expert (reduced over expert DP).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Tensors {
    /// Dense tensors, in reverse definition order (the order buckets fill).
    pub dense: Vec<Tensor>,
    /// Expert tensors, in reverse definition order.
    pub expert: Vec<Tensor>,
}

/// One parameter tensor on one GPU.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Tensor {
    /// Elements.
    pub elems: u64,
    /// The weight of a Transformer Engine linear layer (QKV, projection, fc1, fc2, the
    /// experts'): FP8 under `--fp8-param-gather`. Biases, norms, the router and the
    /// embeddings stay in the params dtype.
    pub linear_weight: bool,
}

/// A linear layer's weight.
fn w(elems: u64) -> Tensor {
    Tensor {
        elems,
        linear_weight: true,
    }
}

/// Any other parameter.
fn p(elems: u64) -> Tensor {
    Tensor {
        elems,
        linear_weight: false,
    }
}

/// Elements of `t`.
pub(crate) fn elems(t: &[Tensor]) -> u64 {
    t.iter().map(|x| x.elems).sum()
}

fn norm_tensors(cfg: &TrainingConfig) -> Vec<Tensor> {
    // Reverse definition order: bias, then weight.
    match cfg.normalization {
        Normalization::LayerNorm => vec![p(cfg.hidden_size), p(cfg.hidden_size)],
        Normalization::RMSNorm => vec![p(cfg.hidden_size)],
    }
}

/// Elements of one norm's parameters (weight, and bias for LayerNorm).
pub(crate) fn norm_params(cfg: &TrainingConfig) -> u64 {
    elems(&norm_tensors(cfg))
}

fn attention_tensors(cfg: &TrainingConfig) -> Vec<Tensor> {
    let (h, tp) = (
        cfg.hidden_size,
        cfg.tensor_model_parallel_size.max(1) as u64,
    );
    let qkv_out = h + 2 * kv_width(cfg);
    let bias = cfg.add_bias_linear;
    let mut t = Vec::with_capacity(6);
    if bias {
        t.push(p(h)); // output projection bias: row-parallel, not split
    }
    t.push(w(h * h / tp));
    if bias {
        t.push(p(qkv_out / tp));
    }
    t.push(w(h * qkv_out / tp));
    t.extend(norm_tensors(cfg));
    t
}

/// A TP-split MLP of hidden size `ffn` (dense MLP or shared experts): fc2 then fc1.
fn mlp_tensors(cfg: &TrainingConfig, ffn: u64, split: u64) -> Vec<Tensor> {
    let h = cfg.hidden_size;
    let gated = if cfg.gated_linear_unit() { 2 } else { 1 };
    let mut t = Vec::with_capacity(4);
    if cfg.add_bias_linear {
        t.push(p(h));
    }
    t.push(w(ffn * h / split));
    if cfg.add_bias_linear {
        t.push(p(gated * ffn / split));
    }
    t.push(w(gated * ffn * h / split));
    t
}

/// One dense transformer layer: MLP (fc2, fc1), pre-MLP norm, attention.
pub(crate) fn dense_layer(cfg: &TrainingConfig) -> Tensors {
    let tp = cfg.tensor_model_parallel_size.max(1) as u64;
    let mut dense = mlp_tensors(cfg, cfg.ffn_hidden_size, tp);
    dense.extend(norm_tensors(cfg));
    dense.extend(attention_tensors(cfg));
    Tensors {
        dense,
        expert: vec![],
    }
}

/// One MoE layer: shared experts and router (dense buffer), the rank's `E/EP` experts
/// split by expert TP (expert buffer), pre-MLP norm and attention.
pub(crate) fn moe_layer(cfg: &TrainingConfig) -> Tensors {
    let (h, tp) = (
        cfg.hidden_size,
        cfg.tensor_model_parallel_size.max(1) as u64,
    );
    let experts = cfg.num_experts.unwrap_or(0) as u64;
    let mut dense = Vec::new();
    if let Some(f) = cfg.moe_shared_expert_intermediate_size {
        dense.extend(mlp_tensors(cfg, f, tp));
    }
    if cfg.add_bias_linear {
        dense.push(p(experts));
    }
    dense.push(p(experts * h));
    dense.extend(norm_tensors(cfg));
    dense.extend(attention_tensors(cfg));
    let local = experts / cfg.expert_model_parallel_size.max(1) as u64;
    let etp = cfg.expert_tensor_parallel_size.max(1) as u64;
    let ffn_e = cfg.moe_ffn_hidden_size.unwrap_or(cfg.ffn_hidden_size);
    let one = mlp_tensors(cfg, ffn_e, etp);
    let (fc2, fc1) = one.split_at(if cfg.add_bias_linear { 2 } else { 1 });
    // Grouped experts register fc1 of every local expert, then fc2: reversed, fc2 first.
    let mut expert = Vec::with_capacity(2 * local as usize * 2);
    for _ in 0..local {
        expert.extend_from_slice(fc2);
    }
    for _ in 0..local {
        expert.extend_from_slice(fc1);
    }
    Tensors { dense, expert }
}

/// The input word embedding (`V_pad/TP · h`) and, first in bucket order, the learned
/// position embedding (`max_position_embeddings · h`, replicated on every TP rank).
pub(crate) fn embedding_tensors(cfg: &TrainingConfig) -> Vec<Tensor> {
    let mut t = Vec::with_capacity(3);
    // Megatron-DeepSpeed's `--embed-layernorm` (BLOOM): a LayerNorm after the embedding,
    // weight and bias, not split over TP.
    if cfg
        .extra
        .get("embed_layernorm")
        .is_some_and(|v| v == "True")
    {
        t.push(p(2 * cfg.hidden_size));
    }
    if cfg.position_embedding_type == PositionEmbedding::LearnedAbsolute {
        t.push(p(cfg.max_position_embeddings * cfg.hidden_size));
    }
    t.push(p(word_embedding(cfg)));
    t
}

/// The word embedding (or the output layer of the same shape) per GPU.
pub(crate) fn word_embedding(cfg: &TrainingConfig) -> u64 {
    cfg.padded_vocab() / cfg.tensor_model_parallel_size.max(1) as u64 * cfg.hidden_size
}

/// Tensors the last stage holds after its last layer in definition order, reversed:
/// the output layer (untied, or the tied copy when PP > 1) and the final norm.
pub(crate) fn head_tensors(cfg: &TrainingConfig) -> Vec<Tensor> {
    let mut t = Vec::with_capacity(3);
    if cfg.untie_embeddings_and_output_weights || cfg.pipeline_model_parallel_size > 1 {
        t.push(p(word_embedding(cfg)));
    }
    t.extend(norm_tensors(cfg));
    t
}

/// Elements of the parameters with Megatron's `sequence_parallel` attribute in one layer:
/// the norms, row-parallel biases and (MoE) the router. With sequence parallelism their
/// gradients are all-reduced over TP at the end of the iteration.
pub(crate) fn sequence_parallel_params(cfg: &TrainingConfig, moe: bool) -> u64 {
    let h = cfg.hidden_size;
    let norms = 2 * norm_params(cfg);
    let bias = u64::from(cfg.add_bias_linear);
    if !moe {
        return norms + bias * 2 * h;
    }
    let experts = cfg.num_experts.unwrap_or(0) as u64;
    let shared_bias = u64::from(cfg.moe_shared_expert_intermediate_size.is_some());
    norms + bias * (h + shared_bias * h + experts) + experts * h
}
