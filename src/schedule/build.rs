//! [`build`]: a validated configuration → the compact [`Workload`], in named phases:
//! check what the schedule can model, lay out the groups, size the ops, time the compute,
//! calibrate, assemble the op sequences, plan each stage.

use super::buckets::{self, BucketRules, LayerTensors};
use super::calibrate::calibrate;
use super::engine::{Engine, EngineCost};
use super::layers::{self, MoeShape, Shape, Times};
use super::moe::{self, Routing};
use super::roofline::{self, ComputeModel, PartCosts, Roofline};
use super::shape::{self, Flops as LayerFlops, RawShape};
use super::{
    chunk_layers, pipeline, CpPlan, ExpertSizes, Groups, MoePlan, RankOrder, ScheduleError,
    ScheduleOptions, StagePlan, Workload,
};
use crate::megatron::error::source_place;
use crate::megatron::{CpCommType, Dtype, MoeDispatcher, Recompute, TrainingConfig};
use crate::units::{Bytes, Flops, Nanos};

/// Build the workload of one iteration of `cfg`.
pub fn build(cfg: &TrainingConfig, opts: &ScheduleOptions) -> Result<Workload, ScheduleError> {
    let (m, v) = check(cfg, opts)?;
    let split = cfg
        .stage_layers()
        .map_err(|e| ScheduleError::Sizes(e.to_string()))?;
    let groups = groups(cfg);
    let el = cfg.params_dtype.size_bytes();
    let tp_bytes = Bytes(
        cfg.micro_batch_size
            * (cfg.seq_length / cfg.context_parallel_size as u64)
            * cfg.hidden_size
            * el,
    );
    let tp = cfg.tensor_model_parallel_size;
    let sp = cfg.sequence_parallel && tp > 1;
    // Sequence parallelism and Megatron's older scatter/gather both send 1/TP per rank.
    let pp_gather = cfg.scatter_gather_in_pipeline();
    let pp_bytes = Bytes(if sp || pp_gather {
        tp_bytes.0 / tp as u64
    } else {
        tp_bytes.0
    });
    let raw = shape::raw(cfg);
    let fl = shape::flops(cfg);
    let routing = cfg.num_experts.map(|e| {
        moe::route(
            shape::moe_tokens(cfg),
            cfg.moe_router_topk,
            e,
            cfg.expert_model_parallel_size,
            cfg.moe_expert_capacity_factor,
            opts.moe_routing,
        )
    });
    let model = CostModel::new(cfg, opts, &raw, &fl);
    let busiest = busiest_stage_ms(cfg, &split, &model.parts, routing.as_ref());
    let calibration = calibrate(cfg, opts, busiest, m, v)?;
    let factor = calibration.factor;
    check_compute(busiest * factor, opts, factor)?;
    let ns = move |secs: f64| Nanos((secs * factor * 1e9).round() as u64);
    let times = times(&model.parts, ns);
    let shp = step_shape(cfg, el);
    let (fwd_steps, bwd_steps) = layers::dense_layer(&shp, &times);
    let moe = routing.map(|r| moe_plan(cfg, opts, &shp, &times, &r, el, &model.parts, ns));
    let mut stages = plan_stages(cfg, opts, &split, &shp, &times, m, v);
    for st in &mut stages {
        st.optimizer = model.optimizer(st);
    }
    let grad_el = grad_dtype_bytes(cfg);
    let tied = !cfg.untie_embeddings_and_output_weights;
    let emb_bytes = (tied && cfg.pipeline_model_parallel_size > 1)
        .then(|| Bytes(shape::word_embedding(cfg) * grad_el));
    let layer_f = (raw.attn_fwd + raw.mlp_fwd) / tp as f64;
    Ok(Workload {
        groups,
        microbatches: m,
        vpp: v,
        num_layers: cfg.num_layers,
        tp_bytes,
        pp_bytes,
        pp_gather,
        fwd_steps,
        bwd_steps,
        layer_fwd_flops: Flops(layer_f.round() as u64),
        stages,
        distributed_optimizer: cfg.use_distributed_optimizer,
        grad_dtype_bytes: grad_el,
        emb_bytes,
        padded_vocab: cfg.padded_vocab(),
        cp: shp.cp.map(|comm| CpPlan {
            comm,
            kv_bytes: shp.kv_bytes,
            a2a_size: shp.cp_a2a,
        }),
        moe,
        calibration,
    })
}

/// The bytes of one gradient element as Megatron reduces it (`arguments.py`): bf16 jobs
/// accumulate and reduce in fp32 unless `--grad-reduce-in-bf16`; fp16 jobs reduce in
/// fp16 unless `--accumulate-allreduce-grads-in-fp32`; fp32 jobs in fp32.
pub(crate) fn grad_dtype_bytes(cfg: &TrainingConfig) -> u64 {
    match cfg.params_dtype {
        Dtype::Bf16 if cfg.grad_reduce_in_bf16 => 2,
        Dtype::Bf16 => 4,
        Dtype::Fp16 if cfg.accumulate_allreduce_grads_in_fp32 => 4,
        Dtype::Fp16 => 2,
        Dtype::Fp32 => 4,
    }
}

fn groups(cfg: &TrainingConfig) -> Groups {
    let order = if cfg.use_tp_pp_dp_mapping {
        RankOrder::TpCpEpPpDp
    } else {
        RankOrder::TpCpEpDpPp
    };
    let experts = if cfg.num_experts.is_some() {
        ExpertSizes {
            ep: cfg.expert_model_parallel_size,
            etp: cfg.expert_tensor_parallel_size,
        }
    } else {
        ExpertSizes {
            ep: 1,
            etp: cfg.tensor_model_parallel_size,
        }
    };
    Groups::with_experts(
        cfg.tensor_model_parallel_size,
        cfg.context_parallel_size,
        cfg.data_parallel_size,
        cfg.pipeline_model_parallel_size,
        order,
        experts,
    )
}

/// Uncalibrated forward + backward compute of the busiest stage for one micro-batch (ms):
/// its dense and MoE layers (the slowest EP rank's experts), plus the logits on the last.
/// The layers of each model chunk of stage `r`: round-robin over the virtual stages when
/// interleaved (the split is then even), else the stage's share of `split` (layers per
/// stage, possibly uneven) in stage order.
fn stage_chunks(cfg: &TrainingConfig, split: &[u32], v: u32, r: u32) -> Vec<std::ops::Range<u32>> {
    let pp = cfg.pipeline_model_parallel_size;
    if v > 1 {
        return (0..v)
            .map(|c| chunk_layers(cfg.num_layers, pp, v, r, c))
            .collect();
    }
    let start: u32 = split[..r as usize].iter().sum();
    let one = start..start + split[r as usize];
    std::iter::once(one).collect()
}

fn busiest_stage_ms(
    cfg: &TrainingConfig,
    split: &[u32],
    c: &PartCosts,
    routing: Option<&Routing>,
) -> f64 {
    let pp = cfg.pipeline_model_parallel_size;
    let v = cfg.virtual_pipeline_model_parallel_size.unwrap_or(1).max(1);
    let full = cfg.recompute_granularity == Recompute::Full;
    // forward, backward and (full recomputation) the forward again
    let both = |p: (f64, f64)| p.0 + p.1 + if full { p.0 } else { 0.0 };
    let attn = both(c.attn());
    let layer = attn + both(c.mlp);
    let head = both(c.head);
    let moe = routing.map_or(0.0, |r| {
        let tokens = max_expert_tokens(cfg, r);
        attn + both(c.router)
            + both(c.shared)
            + both((c.per_expert_token.0 * tokens, c.per_expert_token.1 * tokens))
    });
    (0..pp)
        .map(|r| {
            let chunks = stage_chunks(cfg, split, v, r);
            let moe_layers: u32 = chunks
                .iter()
                .flat_map(|c| c.clone())
                .filter(|l| routing.is_some() && cfg.moe_layer_freq.is_moe_layer(*l))
                .count() as u32;
            let dense = split[r as usize] - moe_layers;
            let head = if r == pp - 1 { head } else { 0.0 };
            (dense as f64 * layer + moe_layers as f64 * moe + head) * 1e3
        })
        .fold(0.0, f64::max)
}

/// The tokens the experts at EP index `j` run: every EP rank's share routed to it.
fn expert_tokens(cfg: &TrainingConfig, r: &Routing, j: usize) -> f64 {
    r.to_rank[j] * cfg.expert_model_parallel_size as f64
}

fn max_expert_tokens(cfg: &TrainingConfig, r: &Routing) -> f64 {
    (0..r.to_rank.len())
        .map(|j| expert_tokens(cfg, r, j))
        .fold(0.0, f64::max)
}

/// The compute model of a job: each layer part's cost, and what prices the optimizer.
struct CostModel<'a> {
    parts: PartCosts,
    roofline: Option<Roofline<'a>>,
    /// Ranks the distributed optimizer shards a parameter over (DP×CP), else 1.
    shard: u32,
}

impl<'a> CostModel<'a> {
    fn new(
        cfg: &TrainingConfig,
        opts: &'a ScheduleOptions,
        raw: &RawShape,
        fl: &LayerFlops,
    ) -> CostModel<'a> {
        let shard = if cfg.use_distributed_optimizer {
            cfg.data_parallel_size * cfg.context_parallel_size
        } else {
            1
        };
        match opts.compute {
            ComputeModel::Mfu => {
                let peak = opts.gpu.peak_tflops * 1e12 * opts.mfu;
                let tp = cfg.tensor_model_parallel_size as f64;
                CostModel {
                    parts: roofline::flat(fl, raw, tp, peak),
                    roofline: None,
                    shard,
                }
            }
            ComputeModel::Roofline => {
                let r = Roofline::new(cfg, &opts.gpu, opts.efficiency);
                let mut parts = r.parts(cfg);
                let engine = opts
                    .engine_cost
                    .unwrap_or_else(|| EngineCost::of(Engine::of(cfg)));
                engine.apply(&mut parts);
                CostModel {
                    parts,
                    roofline: Some(r),
                    shard,
                }
            }
        }
    }

    /// The optimizer step of a rank of stage `st` (the roofline only; not calibrated:
    /// the log's compute timers do not include it).
    fn optimizer(&self, st: &StagePlan) -> Nanos {
        let Some(r) = &self.roofline else {
            return Nanos(0);
        };
        let params = st.params_per_gpu + st.expert_params_per_gpu;
        Nanos((r.optimizer(params, self.shard) * 1e9).round() as u64)
    }
}

/// Compute time of each layer part, forward and backward, calibrated.
fn times(c: &PartCosts, ns: impl Fn(f64) -> Nanos) -> Times {
    let fb = |p: (f64, f64)| (ns(p.0), ns(p.1));
    Times {
        attn: fb(c.attn()),
        qkv: fb(c.qkv),
        core: fb(c.core),
        proj: fb(c.proj),
        mlp: fb(c.mlp),
        router: fb(c.router),
        shared: fb(c.shared),
        head: fb(c.head),
    }
}

/// Sizes that shape the op sequences.
fn step_shape(cfg: &TrainingConfig, el: u64) -> Shape {
    let (tp, cp) = (cfg.tensor_model_parallel_size, cfg.context_parallel_size);
    let tokens = cfg.micro_batch_size * (cfg.seq_length / cp as u64);
    let kvw = shape::kv_width(cfg) / tp as u64;
    let hw = cfg.hidden_size / tp as u64;
    Shape {
        tp,
        sp: cfg.sequence_parallel && tp > 1,
        recompute: cfg.recompute_granularity == Recompute::Full,
        cp: (cp > 1).then_some(cfg.cp_comm_type),
        cp_size: cp,
        cp_a2a: match cfg.cp_comm_type {
            CpCommType::A2aP2p => cfg.hierarchical_cp_sizes().map_or(1, |s| s[0]),
            _ => 1,
        },
        kv_bytes: Bytes(2 * tokens * kvw * el),
        a2a_qkv: Bytes(tokens * (hw + 2 * kvw) * el),
        a2a_out: Bytes(tokens * hw * el),
        ce_bytes: Bytes(tokens * 4),
    }
}

#[allow(clippy::too_many_arguments)]
fn moe_plan(
    cfg: &TrainingConfig,
    opts: &ScheduleOptions,
    shp: &Shape,
    times: &Times,
    r: &Routing,
    el: u64,
    costs: &PartCosts,
    ns: impl Fn(f64) -> Nanos,
) -> MoePlan {
    let h = cfg.hidden_size;
    let (ep, etp) = (
        cfg.expert_model_parallel_size,
        cfg.expert_tensor_parallel_size,
    );
    let bytes = |tokens: f64| Bytes((tokens * (h * el) as f64).round() as u64);
    let dispatch_bytes: Vec<Bytes> = r.to_rank.iter().map(|t| bytes(*t)).collect();
    let etp_gather_bytes = r
        .to_rank
        .iter()
        .map(|t| bytes(t * ep as f64 * etp as f64))
        .collect();
    let per_ep: Vec<f64> = (0..r.to_rank.len())
        .map(|j| expert_tokens(cfg, r, j))
        .collect();
    let tokens = shape::moe_tokens(cfg);
    let ms = MoeShape {
        dispatcher: cfg.moe_token_dispatcher_type,
        etp,
        etp_ep: etp * ep,
        shared: cfg.moe_shared_expert_intermediate_size.is_some(),
        allgather_bytes: bytes(tokens * (etp * ep) as f64),
    };
    let (fwd_steps, bwd_steps) = layers::moe_layer(shp, times, &ms);
    MoePlan {
        num_experts: cfg.num_experts.unwrap_or(0),
        topk: cfg.moe_router_topk,
        dispatcher: cfg.moe_token_dispatcher_type,
        layer_freq: cfg.moe_layer_freq.clone(),
        routing: opts.moe_routing,
        tokens,
        dropped: r.dropped,
        dispatch_bytes,
        etp_gather_bytes,
        expert_fwd: per_ep
            .iter()
            .map(|t| ns(t * costs.per_expert_token.0))
            .collect(),
        expert_bwd: per_ep
            .iter()
            .map(|t| ns(t * costs.per_expert_token.1))
            .collect(),
        fwd_steps,
        bwd_steps,
    }
}

fn plan_stages(
    cfg: &TrainingConfig,
    opts: &ScheduleOptions,
    split: &[u32],
    shp: &Shape,
    times: &Times,
    m: u32,
    v: u32,
) -> Vec<StagePlan> {
    let pp = cfg.pipeline_model_parallel_size;
    let tensors = LayerTensors {
        dense: shape::dense_layer(cfg),
        moe: shape::moe_layer(cfg),
    };
    let grad_el = grad_dtype_bytes(cfg);
    let rules = BucketRules {
        overlap: cfg.overlap_grad_reduce,
        size: 40_000_000u64.max(1_000_000 * cfg.data_parallel_size as u64),
        grad_el,
        param_el: if cfg.use_distributed_optimizer {
            cfg.params_dtype.size_bytes()
        } else {
            0
        },
        linear_weight_el: match (cfg.use_distributed_optimizer, cfg.fp8_param_gather()) {
            (false, _) => 0,
            (true, true) => 1,
            (true, false) => cfg.params_dtype.size_bytes(),
        },
    };
    let (emb_fwd, emb_bwd) = layers::embedding(shp);
    let (head_fwd, head_bwd) = layers::head(shp, times);
    let is_moe = |l: u32| cfg.num_experts.is_some() && cfg.moe_layer_freq.is_moe_layer(l);
    (0..pp)
        .map(|r| {
            let chunks = stage_chunks(cfg, split, v, r);
            let (buckets, dense, expert) =
                buckets::stage_buckets(cfg, r, &chunks, &tensors, &rules);
            let sp_params: u64 = chunks
                .iter()
                .flat_map(|c| c.clone())
                .map(|l| shape::sequence_parallel_params(cfg, is_moe(l)))
                .sum::<u64>()
                + if r == pp - 1 {
                    shape::norm_params(cfg)
                } else {
                    0
                };
            StagePlan {
                stage: r,
                warmup: pipeline::warmup_with(pp, r, m, v, opts.warmup_rule),
                order: pipeline::stage_order_with(pp, r, m, v, opts.warmup_rule),
                chunks,
                params_per_gpu: dense,
                expert_params_per_gpu: expert,
                buckets,
                layernorm_bytes: shp.sp.then(|| Bytes(sp_params * grad_el)),
                embedding_fwd: if r == 0 { emb_fwd.clone() } else { vec![] },
                embedding_bwd: if r == 0 { emb_bwd.clone() } else { vec![] },
                head_fwd: if r == pp - 1 {
                    head_fwd.clone()
                } else {
                    vec![]
                },
                head_bwd: if r == pp - 1 {
                    head_bwd.clone()
                } else {
                    vec![]
                },
                optimizer: Nanos(0),
            }
        })
        .collect()
}

/// Where a field's value came from, for an error message.
fn place(cfg: &TrainingConfig, field: &str) -> String {
    cfg.sources
        .get(field)
        .map(source_place)
        .unwrap_or_else(|| "inputs".into())
}

fn unsupported(cfg: &TrainingConfig, field: &str, msg: String) -> ScheduleError {
    ScheduleError::Unsupported {
        at: place(cfg, field),
        field: field.into(),
        msg,
    }
}

/// What the schedule can model; returns `(m, v)`.
fn check(cfg: &TrainingConfig, opts: &ScheduleOptions) -> Result<(u32, u32), ScheduleError> {
    check_sizes(cfg)?;
    check_magnitudes(cfg)?;
    let (m, v) = check_pipeline(cfg)?;
    check_context_parallel(cfg)?;
    check_experts(cfg)?;
    opts.check()?;
    Ok((m, v))
}

fn check_sizes(cfg: &TrainingConfig) -> Result<(), ScheduleError> {
    let (tp, cp, pp, dp) = (
        cfg.tensor_model_parallel_size,
        cfg.context_parallel_size,
        cfg.pipeline_model_parallel_size,
        cfg.data_parallel_size,
    );
    if [tp, cp, pp, dp].contains(&0) {
        return Err(ScheduleError::Sizes(format!(
            "TP={tp}, CP={cp}, PP={pp}, DP={dp}: every size must be at least 1"
        )));
    }
    let w = tp as u64 * cp as u64 * pp as u64 * dp as u64;
    if w != cfg.world_size as u64 {
        return Err(ScheduleError::Sizes(format!(
            "world size {} ≠ TP·CP·PP·DP = {tp}·{cp}·{pp}·{dp} = {w}",
            cfg.world_size
        )));
    }
    if !cfg.num_attention_heads.is_multiple_of(tp) {
        return Err(ScheduleError::Sizes(format!(
            "{} attention heads are not divisible by TP {tp}",
            cfg.num_attention_heads
        )));
    }
    if cfg.hidden_size == 0 || cfg.seq_length == 0 {
        return Err(ScheduleError::Sizes(
            "hidden size and sequence length must be positive".into(),
        ));
    }
    if !cfg.seq_length.is_multiple_of(cp as u64) {
        return Err(ScheduleError::Sizes(format!(
            "sequence length {} is not divisible by CP {cp}",
            cfg.seq_length
        )));
    }
    Ok(())
}

/// The largest message the schedule models, 2^50 B (1 PiB): far above any real job, low
/// enough that every byte count and FLOP product downstream fits its integer type.
pub const MAX_MESSAGE_BYTES: u128 = 1 << 50;

/// Most layers, experts and micro-batches per iteration the schedule models (2^20 each):
/// real jobs use hundreds at most, and the trace holds records per layer and micro-batch,
/// so a crafted count must not size the work.
pub const MAX_COUNT: u64 = 1 << 20;

/// Crafted sizes are refused here, before any arithmetic that could overflow or any
/// loop sized by them: each per-message product the schedule forms, computed in `u128`,
/// must stay within [`MAX_MESSAGE_BYTES`], and layer/expert/micro-batch counts within
/// [`MAX_COUNT`]. The error names the fields and the product.
fn check_magnitudes(cfg: &TrainingConfig) -> Result<(), ScheduleError> {
    let el = cfg.params_dtype.size_bytes() as u128;
    let (b, s, h) = (
        cfg.micro_batch_size as u128,
        cfg.seq_length as u128,
        cfg.hidden_size as u128,
    );
    let ffn = cfg.ffn_hidden_size as u128;
    let vocab = cfg.padded_vocab() as u128;
    // `None`: the product overflows even u128.
    let prod = |fs: &[u128]| fs.iter().try_fold(1u128, |a, &f| a.checked_mul(f));
    let products = [
        (
            "micro_batch_size·seq_length·hidden_size·bytes",
            prod(&[b, s, h, el]),
        ),
        (
            "hidden_size²·12·bytes (a layer's attention weights)",
            prod(&[h, h, 12, el]),
        ),
        (
            "hidden_size·ffn_hidden_size·3·bytes (a layer's MLP weights)",
            prod(&[h, ffn, 3, el]),
        ),
        (
            "padded vocabulary·hidden_size·bytes (the embedding)",
            prod(&[vocab, h, el]),
        ),
        (
            "micro_batch_size·seq_length·padded vocabulary·4 (the logits)",
            prod(&[b, s, vocab, 4]),
        ),
    ];
    for (what, v) in products {
        if v.is_none_or(|v| v > MAX_MESSAGE_BYTES) {
            let v = v.map_or("more than 2^128".to_string(), |v| v.to_string());
            return Err(ScheduleError::Magnitude(format!(
                "{what} = {v} B exceeds the largest message modelled (2^50 B): check these sizes"
            )));
        }
    }
    let counts = [
        ("num_layers", cfg.num_layers as u64),
        ("num_experts", cfg.num_experts.unwrap_or(0) as u64),
        (
            "micro-batches per iteration (global_batch_size / micro_batch_size)",
            cfg.global_batch_size / cfg.micro_batch_size.max(1),
        ),
    ];
    for (what, n) in counts {
        if n > MAX_COUNT {
            return Err(ScheduleError::Magnitude(format!(
                "{what} = {n} exceeds the most modelled ({MAX_COUNT})"
            )));
        }
    }
    Ok(())
}

fn check_pipeline(cfg: &TrainingConfig) -> Result<(u32, u32), ScheduleError> {
    let (pp, dp) = (cfg.pipeline_model_parallel_size, cfg.data_parallel_size);
    let per_step = cfg.micro_batch_size.checked_mul(dp as u64).unwrap_or(0);
    if per_step == 0
        || cfg.global_batch_size == 0
        || !cfg.global_batch_size.is_multiple_of(per_step)
    {
        return Err(ScheduleError::Batch {
            global: cfg.global_batch_size,
            micro: cfg.micro_batch_size,
            dp,
        });
    }
    let m = cfg.global_batch_size / per_step;
    let m = u32::try_from(m)
        .map_err(|_| ScheduleError::Sizes(format!("{m} micro-batches is too many")))?;
    let v = cfg.virtual_pipeline_model_parallel_size.unwrap_or(1).max(1);
    if v > 1 && pp == 1 {
        return Err(ScheduleError::Sizes(format!(
            "virtual pipeline size {v} needs pipeline size > 1"
        )));
    }
    // An uneven split (v = 1) is checked by `TrainingConfig::stage_layers`.
    let uneven = v == 1
        && cfg
            .stage_layers()
            .is_ok_and(|s| s.iter().any(|n| *n != s[0]));
    if cfg.num_layers == 0 || (!uneven && !cfg.num_layers.is_multiple_of(pp.saturating_mul(v))) {
        return Err(ScheduleError::Layers {
            layers: cfg.num_layers,
            pp,
            v,
        });
    }
    if v > 1 && m % pp != 0 {
        return Err(ScheduleError::Interleave { m, pp });
    }
    Ok((m, v))
}

/// Context parallelism: the hierarchical `a2a+p2p` needs sizes the job description does
/// not carry; Ulysses needs the heads of each TP rank to split over CP.
fn check_context_parallel(cfg: &TrainingConfig) -> Result<(), ScheduleError> {
    let (tp, cp) = (cfg.tensor_model_parallel_size, cfg.context_parallel_size);
    if cp <= 1 {
        return Ok(());
    }
    let heads = cfg.num_attention_heads / tp.max(1);
    let groups = cfg.num_query_groups.unwrap_or(cfg.num_attention_heads) / tp.max(1);
    match cfg.cp_comm_type {
        CpCommType::A2aP2p => {
            // Megatron asserts the sizes are given and multiply to CP; Transformer Engine
            // takes two levels, the all-to-all inside and the ring across.
            let Some(sizes) = cfg.hierarchical_cp_sizes() else {
                return Err(unsupported(
                    cfg,
                    "cp_comm_type",
                    "`a2a+p2p` needs --hierarchical-context-parallel-sizes (all-to-all size, ring size), as Megatron requires".into(),
                ));
            };
            let product: u64 = sizes.iter().map(|s| u64::from(*s)).product();
            if sizes.len() != 2 || product != u64::from(cp) {
                return Err(unsupported(
                    cfg,
                    "hierarchical_context_parallel_sizes",
                    format!("expected two sizes (all-to-all, ring) whose product is the context_parallel_size {cp}, found {sizes:?}"),
                ));
            }
            let a = sizes[0];
            if !heads.is_multiple_of(a) || !groups.is_multiple_of(a) {
                return Err(unsupported(
                    cfg,
                    "hierarchical_context_parallel_sizes",
                    format!("the all-to-all size {a} must divide each TP rank's {heads} attention heads and {groups} K/V heads"),
                ));
            }
            Ok(())
        }
        CpCommType::A2a => {
            if !heads.is_multiple_of(cp) || !groups.is_multiple_of(cp) {
                return Err(unsupported(
                    cfg,
                    "context_parallel_size",
                    format!("cp_comm_type a2a splits each TP rank's {heads} attention heads and {groups} K/V heads over CP {cp}, which must divide both: use a CP that divides {} or cp_comm_type p2p", gcd(heads, groups)),
                ));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Expert parallelism: the expert layout must fit, MoE with TP needs sequence
/// parallelism (Megatron raises during training otherwise), DeepEP's fused dispatcher is
/// not modelled.
fn check_experts(cfg: &TrainingConfig) -> Result<(), ScheduleError> {
    let ep = cfg.expert_model_parallel_size.max(1);
    let Some(e) = cfg.num_experts else {
        if ep > 1 {
            return Err(unsupported(
                cfg,
                "expert_model_parallel_size",
                format!(
                    "EP {ep} needs a MoE model: set num_experts (a multiple of {ep}) or use EP 1"
                ),
            ));
        }
        return Ok(());
    };
    let (tp, pp, etp) = (
        cfg.tensor_model_parallel_size,
        cfg.pipeline_model_parallel_size,
        cfg.expert_tensor_parallel_size.max(1),
    );
    if e == 0 || !e.is_multiple_of(ep) {
        return Err(unsupported(
            cfg,
            "expert_model_parallel_size",
            format!("{e} experts do not split over EP {ep}: use an EP that divides {e}"),
        ));
    }
    if cfg.moe_router_topk == 0 || cfg.moe_router_topk > e {
        return Err(unsupported(
            cfg,
            "moe_router_topk",
            format!(
                "top-{} routing over {e} experts: use 1 ≤ topk ≤ {e}",
                cfg.moe_router_topk
            ),
        ));
    }
    let emp = etp as u64 * ep as u64 * pp as u64;
    if !(cfg.world_size as u64).is_multiple_of(emp) {
        return Err(unsupported(
            cfg,
            "expert_model_parallel_size",
            format!(
                "world size {} is not a multiple of expert TP·EP·PP = {etp}·{ep}·{pp} = {emp}",
                cfg.world_size
            ),
        ));
    }
    if tp > 1 && !cfg.sequence_parallel {
        return Err(unsupported(
            cfg,
            "sequence_parallel",
            format!("MoE layers with TP {tp} need sequence parallelism (Megatron refuses to train them without): add --sequence-parallel or use TP 1"),
        ));
    }
    if cfg.moe_token_dispatcher_type == MoeDispatcher::Flex {
        return Err(unsupported(
            cfg,
            "moe_token_dispatcher_type",
            "the `flex` dispatcher (DeepEP / HybridEP fused kernels) is not modelled: use alltoall or allgather".into(),
        ));
    }
    if let Some(c) = cfg.moe_expert_capacity_factor {
        if !(c.is_finite() && c > 0.0) {
            return Err(unsupported(
                cfg,
                "moe_expert_capacity_factor",
                format!("capacity factor {c} must be positive (or unset for dropless routing)"),
            ));
        }
    }
    Ok(())
}

/// The options' own ranges (MFU in (0, 1], a positive finite calibration factor): what
/// [`ScheduleOptions::check`] runs before anything is built.
/// The longest compute of one micro-batch on the busiest stage, after calibration: a
/// day, in ms. Every compute time of the workload is a part of it, so every one stays
/// finite and far inside u64 nanoseconds.
pub const MAX_MICROBATCH_MS: f64 = 86_400_000.0;

/// Refuses options (a GPU of a tiny peak, a tiny MFU, a large factor) under which one
/// micro-batch of the busiest stage computes `ms` for longer than [`MAX_MICROBATCH_MS`].
fn check_compute(ms: f64, opts: &ScheduleOptions, factor: f64) -> Result<(), ScheduleError> {
    if ms.is_finite() && ms <= MAX_MICROBATCH_MS {
        return Ok(());
    }
    Err(ScheduleError::Option(format!(
        "one micro-batch of the busiest stage would compute for {ms:.3e} ms (GPU {} at {:?} \
         TFLOP/s, MFU {:?}, calibration factor {factor:?}), more than a day \
         ({MAX_MICROBATCH_MS} ms): check --gpu, --mfu and --calibration-factor",
        opts.gpu.name, opts.gpu.peak_tflops, opts.mfu
    )))
}
