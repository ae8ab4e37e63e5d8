//! Gradient buckets of one stage, as Megatron's DDP forms them
//! (docs/model.md#parameters-and-buckets): one buffer per model chunk for dense
//! parameters and one for expert parameters, each filled tensor by tensor in reverse
//! definition order; a bucket closes once it holds at least the bucket size. Megatron
//! buckets only the first pipeline stage's first chunk (`disable_bucketing` for chunks
//! after the first and pipeline ranks > 0 in `megatron/training/training.py` and
//! `distributed_data_parallel.py`): every other chunk's buffer is one bucket, started when
//! the chunk's last backward completes it.

use super::shape::{self, Tensors};
use super::{Bucket, GradGroup};
use crate::megatron::TrainingConfig;
use crate::units::Bytes;

/// What bucket formation needs to know.
pub(crate) struct BucketRules {
    /// `overlap_grad_reduce`.
    pub overlap: bool,
    /// Bucket size in parameters: `max(40,000,000, 1,000,000·DP)` (DP without CP).
    pub size: u64,
    /// Gradient element bytes.
    pub grad_el: u64,
    /// Parameter element bytes (the distributed optimizer gathers them), 0 without it.
    pub param_el: u64,
    /// Bytes of a linear layer's weight element in that all-gather: 1 under
    /// `--fp8-param-gather` (its FP8 copy), else `param_el`.
    pub linear_weight_el: u64,
}

/// Per-layer tensors of both layer kinds, computed once.
pub(crate) struct LayerTensors {
    pub dense: Tensors,
    pub moe: Tensors,
}

/// The stage's buckets (dense first, then expert, each in the order they become ready)
/// and its dense and expert parameters per GPU.
pub(crate) fn stage_buckets(
    cfg: &TrainingConfig,
    stage: u32,
    chunks: &[std::ops::Range<u32>],
    tensors: &LayerTensors,
    rules: &BucketRules,
) -> (Vec<Bucket>, u64, u64) {
    let pp = cfg.pipeline_model_parallel_size.max(1);
    let v = chunks.len() as u32;
    let is_moe = |l: u32| cfg.num_experts.is_some() && cfg.moe_layer_freq.is_moe_layer(l);
    let mut out = Vec::new();
    let mut totals = [0u64; 2];
    for (g, group) in [GradGroup::DataContext, GradGroup::ExpertData]
        .into_iter()
        .enumerate()
    {
        // Backward visits chunks from v−1 down to 0 in its last micro-batch.
        for c in (0..v).rev() {
            let layers = chunks[c as usize].clone();
            let bucketing = rules.overlap && stage == 0 && c == 0;
            // Elements so far in the open bucket: all, and linear weights among them.
            let (mut acc, mut acc_w) = (0u64, 0u64);
            for l in layers.clone().rev() {
                let layer = if is_moe(l) {
                    &tensors.moe
                } else {
                    &tensors.dense
                };
                let mut list: Vec<shape::Tensor> = Vec::new();
                let dense = group == GradGroup::DataContext;
                if dense && stage == pp - 1 && c == v - 1 && l == layers.end - 1 {
                    list.extend(shape::head_tensors(cfg));
                }
                list.extend(if dense { &layer.dense } else { &layer.expert });
                if dense && stage == 0 && c == 0 && l == layers.start {
                    // The embeddings' gradients complete right after layer 0's.
                    list.extend(shape::embedding_tensors(cfg));
                }
                for t in list {
                    acc += t.elems;
                    if t.linear_weight {
                        acc_w += t.elems;
                    }
                    if bucketing && acc >= rules.size {
                        out.push(bucket(c, Some(l), (acc, acc_w), group, rules));
                        totals[g] += acc;
                        (acc, acc_w) = (0, 0);
                    }
                }
            }
            if acc > 0 {
                let trigger = rules.overlap.then_some(layers.start);
                out.push(bucket(c, trigger, (acc, acc_w), group, rules));
                totals[g] += acc;
            }
        }
    }
    (out, totals[0], totals[1])
}

/// A bucket of `params` elements, `weights` of them linear layers' weights.
fn bucket(
    chunk: u32,
    trigger_layer: Option<u32>,
    (params, weights): (u64, u64),
    group: GradGroup,
    r: &BucketRules,
) -> Bucket {
    Bucket {
        chunk,
        trigger_layer,
        params,
        grad_bytes: Bytes(params * r.grad_el),
        param_bytes: Bytes((params - weights) * r.param_el + weights * r.linear_weight_el),
        group,
    }
}
