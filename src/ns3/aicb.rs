//! `ina3d export aicb`: the AICB/SimAI workload text for a training config, so SimAI users
//! can run the same job (docs/model.md#aicb-workload).
//!
//! Layout (what SimAI's `HYBRID_TRANSFORMER_FWD_IN_BCKWD` reader takes): a header line, the
//! number of layer lines, then per line 12 whitespace-separated fields
//! `name dep fwd_ns fwd_comm fwd_bytes ig_ns ig_comm ig_bytes wg_ns wg_comm wg_bytes update_ns`.
//!
//! Rows, for the layers of one pipeline stage (`num_layers / PP`):
//! - `grad_norm`: the data-parallel synchronisation of this GPU's parameters
//!   (`params_per_stage / TP`, docs/model.md#parameters-and-buckets) — with the distributed optimizer an all-gather
//!   of bf16 parameters (fwd slot) and a reduce-scatter of the gradients (wg slot), without
//!   it an all-reduce of the gradients (wg slot). Gradients are fp32 unless
//!   `grad_reduce_in_bf16`.
//! - `embedding_layer`: the vocab-parallel embedding's TP all-reduce, `b·s·h` elements.
//! - per transformer layer, `attention_layer` and `mlp_layer`: compute from FLOPs (§5.4;
//!   backward = 2× forward split evenly between input-grad and weight-grad, full recompute
//!   adds one forward to input-grad) and the TP collectives of §5.3 (no SP: all-reduce in
//!   forward and input-grad; SP: reduce-scatter forward, all-gather input-grad), each of
//!   `b·s·h` elements in the params dtype.
//!
//! Known difference: AICB's own Llama-7B file counts ~0.25 % more parameters than the
//! §5.3 formula (tests pin the gap).

use crate::megatron::config::{Recompute, TrainingConfig};

/// GPU throughput used to turn FLOPs into time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GpuModel {
    /// Peak dense bf16 FLOP/s.
    pub peak_flops: f64,
    /// Model FLOPs utilisation.
    pub mfu: f64,
}

impl Default for GpuModel {
    /// A100 (312 TFLOP/s bf16) at MFU 0.45 (docs/model.md#compute-and-calibration).
    fn default() -> Self {
        GpuModel {
            peak_flops: 312e12,
            mfu: 0.45,
        }
    }
}

/// A config AICB cannot express.
#[derive(Debug, thiserror::Error)]
pub enum AicbError {
    /// A field is zero or inconsistent.
    #[error("training config: {0}")]
    Config(String),
}

/// Parameters of one transformer layer.
pub fn layer_params(c: &TrainingConfig) -> (u64, u64) {
    let h = c.hidden_size;
    let heads = u64::from(c.num_attention_heads.max(1));
    let kv = u64::from(c.num_query_groups.unwrap_or(c.num_attention_heads).max(1));
    let head_dim = h / heads;
    // q, k, v, output projection (GQA shrinks k and v) + layer norm
    let attn = h * h + 2 * h * kv * head_dim + h * h + 2 * h;
    let mlp_mats = if c.swiglu { 3 } else { 2 };
    let mlp = mlp_mats * h * c.ffn_hidden_size + 2 * h;
    (attn, mlp)
}

/// Vocabulary padded to a multiple of 128·TP.
pub fn padded_vocab(c: &TrainingConfig) -> u64 {
    if let Some(p) = c.padded_vocab_size {
        return p;
    }
    let v = c.vocab_size.unwrap_or(0);
    let m = 128 * u64::from(c.tensor_model_parallel_size.max(1));
    v.div_ceil(m) * m
}

/// Parameters held by one GPU of the first stage (the largest: it has the embedding).
pub fn params_per_gpu(c: &TrainingConfig) -> u64 {
    let (a, m) = layer_params(c);
    let pp = u64::from(c.pipeline_model_parallel_size.max(1));
    let layers = u64::from(c.num_layers) / pp;
    let emb = padded_vocab(c) * c.hidden_size;
    let mut stage = layers * (a + m) + emb;
    if pp == 1 {
        // single stage also holds the final norm and, untied, the output layer
        stage += 2 * c.hidden_size
            + if c.untie_embeddings_and_output_weights {
                emb
            } else {
                0
            };
    }
    stage / u64::from(c.tensor_model_parallel_size.max(1))
}

/// Forward FLOPs per GPU of one layer's attention and MLP parts.
pub fn layer_forward_flops(c: &TrainingConfig) -> (f64, f64) {
    let (b, s, h) = (
        c.micro_batch_size as f64,
        c.seq_length as f64,
        c.hidden_size as f64,
    );
    let heads = f64::from(c.num_attention_heads.max(1));
    let kv = f64::from(c.num_query_groups.unwrap_or(c.num_attention_heads).max(1));
    let tp = f64::from(c.tensor_model_parallel_size.max(1));
    let qkv = 2.0 * b * s * h * (h + 2.0 * h * kv / heads);
    let attn = qkv + 2.0 * b * s * h * h + 4.0 * b * s * s * h;
    let mats = if c.swiglu { 3.0 } else { 2.0 };
    let mlp = 2.0 * mats * b * s * h * c.ffn_hidden_size as f64;
    (attn / tp, mlp / tp)
}

/// The AICB workload text.
pub fn workload_text(c: &TrainingConfig, gpu: &GpuModel) -> Result<String, AicbError> {
    let tp = c.tensor_model_parallel_size;
    let pp = c.pipeline_model_parallel_size;
    let dp = c.data_parallel_size;
    if tp == 0
        || pp == 0
        || dp == 0
        || c.hidden_size == 0
        || c.seq_length == 0
        || c.micro_batch_size == 0
    {
        return Err(AicbError::Config(
            "TP, PP, DP, hidden size, sequence length and micro-batch must be positive".into(),
        ));
    }
    if !c.num_layers.is_multiple_of(pp) {
        return Err(AicbError::Config(format!(
            "{} layers do not split over {pp} pipeline stages",
            c.num_layers
        )));
    }
    if !(gpu.peak_flops > 0.0 && gpu.mfu > 0.0) {
        return Err(AicbError::Config(
            "GPU peak FLOP/s and MFU must be positive".into(),
        ));
    }
    let ga = c.global_batch_size / (c.micro_batch_size * u64::from(dp));
    if ga == 0 {
        return Err(AicbError::Config(
            "global batch smaller than micro-batch × DP".into(),
        ));
    }
    let dt = c.params_dtype.size_bytes();
    let act = c.micro_batch_size * c.seq_length / u64::from(c.context_parallel_size.max(1))
        * c.hidden_size
        * dt;
    let pp_comm = if c.sequence_parallel {
        act / u64::from(tp)
    } else {
        act
    };
    let ns = |flops: f64| (flops / (gpu.peak_flops * gpu.mfu) * 1e9).round() as u64;
    let mut rows: Vec<String> = Vec::new();
    let row =
        |name: &str, f: (u64, &str, u64), ig: (u64, &str, u64), wg: (u64, &str, u64), upd: u64| {
            format!(
                "{name}\t-1\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{upd}",
                f.0, f.1, f.2, ig.0, ig.1, ig.2, wg.0, wg.1, wg.2
            )
        };
    let params = params_per_gpu(c);
    let grad_bytes = if c.grad_reduce_in_bf16 { 2 } else { 4 };
    if dp > 1 || c.use_distributed_optimizer {
        if c.use_distributed_optimizer {
            rows.push(row(
                "grad_norm",
                (1, "ALLGATHER", params * dt),
                (1, "NONE", 0),
                (1, "REDUCESCATTER", params * grad_bytes),
                1,
            ));
        } else {
            rows.push(row(
                "grad_norm",
                (1, "NONE", 0),
                (1, "NONE", 0),
                (1, "ALLREDUCE", params * grad_bytes),
                1,
            ));
        }
    }
    let tp_op = if tp > 1 { act } else { 0 };
    let (fwd_op, ig_op) = match (tp > 1, c.sequence_parallel) {
        (false, _) => ("NONE", "NONE"),
        (true, false) => ("ALLREDUCE", "ALLREDUCE"),
        (true, true) => ("REDUCESCATTER", "ALLGATHER"),
    };
    rows.push(row(
        "embedding_layer",
        (1, fwd_op, tp_op),
        (1, ig_op, tp_op),
        (1, "NONE", 0),
        1,
    ));
    let (fa, fm) = layer_forward_flops(c);
    let recompute = c.recompute_granularity == Recompute::Full;
    let (pa, pm) = layer_params(c);
    // Adam: ~12 FLOPs per parameter per step
    let upd = |p: u64| ns(12.0 * p as f64 / f64::from(tp)).max(1);
    for _ in 0..c.num_layers / pp {
        for (name, f, p) in [("attention_layer", fa, pa), ("mlp_layer", fm, pm)] {
            let fwd = ns(f).max(1);
            let ig = ns(f + if recompute { f } else { 0.0 }).max(1);
            rows.push(row(
                name,
                (fwd, fwd_op, tp_op),
                (ig, ig_op, tp_op),
                (fwd, "NONE", 0),
                upd(p),
            ));
        }
    }
    let vpp = c.virtual_pipeline_model_parallel_size.unwrap_or(1);
    let ep = c.expert_model_parallel_size.max(1);
    let mut s = format!(
        "HYBRID_TRANSFORMER_FWD_IN_BCKWD\tmodel_parallel_NPU_group: {tp} ep: {ep} pp: {pp} vpp: {vpp} ga: {ga} all_gpus: {} checkpoints: 0 checkpoint_initiates: 0 pp_comm: {pp_comm}\n{}\n",
        c.world_size,
        rows.len()
    );
    for r in rows {
        s.push_str(&r);
        s.push('\n');
    }
    Ok(s)
}
