//! Stage 2: the 3D-parallel workload of one iteration (rank groups, pipeline order,
//! per-op sizes and compute times).
//!
//! Public entry: [`build`]. The [`Workload`] is *compact*: every rank of a pipeline stage
//! runs the same order, every layer the same op sequence, so the workload stores each once
//! (a few kB even for 1,024 GPUs) and the trace generator expands it while streaming.
//!
//! Model (docs/model.md#workload-model; approximations are marked):
//! - TP per layer: no SP → forward 2 all-reduces, backward 2; SP → forward 2 all-gathers +
//!   2 reduce-scatters, backward 4 all-gathers + 2 reduce-scatters; each of `b·(s/CP)·h`
//!   elements in the params dtype. Full recomputation re-runs each layer's forward
//!   (compute *and* its TP collectives) just before its backward, as Megatron does.
//! - PP p2p: `(s/CP)·b·h` params-dtype elements per boundary crossing (÷TP under SP).
//! - DP: gradients in fp32 (bf16 with `grad_reduce_in_bf16`), buckets of
//!   `max(40M, 1M·DP·CP)` parameters in reverse layer order when `overlap_grad_reduce`,
//!   all-reduce, or reduce-scatter + all-gather of params with the distributed optimizer.
//! - Compute: exact matmul FLOPs per layer (QKV with GQA, attention scores and values,
//!   output projection, MLP incl. SwiGLU, logits on the last stage) ÷ TP, backward = 2×
//!   forward, at `peak · MFU`, scaled by a calibration factor from the log (see
//!   [`Calibration`]). Element-wise ops, softmax, layer norms and the optimizer step are
//!   not counted (the MFU and the calibration absorb them). Context-parallel attention
//!   traffic (KV ring exchange) is not modelled.

pub mod groups;
pub mod pipeline;

pub use groups::{Coords, Groups, RankOrder};
pub use pipeline::{chunk_layers, stage_order, warmup, Pass, PipeOp};

use crate::megatron::{Recompute, TrainingConfig};
use crate::units::{Bytes, Flops, Nanos};
use serde::{Deserialize, Serialize};

/// Why a workload cannot be built: the numbers that disagree are named.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ScheduleError {
    /// A size is zero or the sizes do not multiply up.
    #[error("inconsistent parallel sizes: {0}")]
    Sizes(String),
    /// The batch does not split into whole micro-batches.
    #[error("global batch {global} is not a multiple of micro-batch {micro} × data-parallel {dp} = {}", micro * *dp as u64)]
    Batch {
        /// Global batch.
        global: u64,
        /// Micro-batch.
        micro: u64,
        /// DP.
        dp: u32,
    },
    /// Layers do not split evenly over (virtual) stages.
    #[error("{layers} layers do not split evenly over pipeline {pp} × virtual chunks {v} = {} model chunks", pp * v)]
    Layers {
        /// Layers.
        layers: u32,
        /// PP.
        pp: u32,
        /// Chunks per stage.
        v: u32,
    },
    /// Interleaving needs whole groups of `pp` micro-batches.
    #[error("interleaved 1F1B needs the number of micro-batches ({m}) to be a multiple of pipeline size {pp}")]
    Interleave {
        /// Micro-batches.
        m: u32,
        /// PP.
        pp: u32,
    },
    /// An option is out of range.
    #[error("{0}")]
    Option(String),
}

/// A GPU's dense bf16 peak, used for compute time before calibration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Gpu {
    /// Preset name.
    pub name: String,
    /// Dense bf16 tensor-core peak, TFLOP/s.
    pub peak_tflops: f64,
}

impl Gpu {
    /// Named presets, dense bf16 peak from the vendors' datasheets (no sparsity):
    /// `a100` 312, `h100` 989 (SXM), `h800` 989 (an H100 with reduced NVLink/NVLink-C2C),
    /// `h20` 148. `<name>:<tflops>` defines any other GPU.
    pub fn preset(name: &str) -> Option<Gpu> {
        let n = name.trim().to_ascii_lowercase();
        if let Some((nm, tf)) = n.split_once(':') {
            let tf: f64 = tf
                .trim()
                .parse()
                .ok()
                .filter(|t: &f64| t.is_finite() && *t > 0.0)?;
            return Some(Gpu {
                name: nm.to_string(),
                peak_tflops: tf,
            });
        }
        let tf = match n.as_str() {
            "a100" => 312.0,
            "h100" => 989.0,
            "h800" => 989.0,
            "h20" => 148.0,
            _ => return None,
        };
        Some(Gpu {
            name: n,
            peak_tflops: tf,
        })
    }
}

/// How compute time is derived.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScheduleOptions {
    /// GPU peak.
    pub gpu: Gpu,
    /// Model FLOPs utilisation assumed before calibration.
    pub mfu: f64,
    /// Calibrate against the log's timers / iteration time when present.
    pub calibrate: bool,
    /// Use this factor instead of calibrating.
    pub factor: Option<f64>,
}

impl Default for ScheduleOptions {
    fn default() -> Self {
        ScheduleOptions {
            gpu: Gpu::preset("a100").expect("preset"),
            mfu: 0.45,
            calibrate: true,
            factor: None,
        }
    }
}

/// What the compute scale factor was derived from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CalibrationSource {
    /// No measurement in the input: factor 1 (pure `FLOPs / (peak·MFU)`).
    None,
    /// `forward-compute` + `backward-compute` timers (max across ranks).
    Timers,
    /// Median logged iteration time (communication and bubble are thereby folded into
    /// compute: an over-estimate of compute, said so in the trace header).
    IterationTime,
    /// Given by the user.
    Given,
}

impl CalibrationSource {
    /// Kebab-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            CalibrationSource::None => "none",
            CalibrationSource::Timers => "timers",
            CalibrationSource::IterationTime => "iteration-time",
            CalibrationSource::Given => "given",
        }
    }
}

/// The calibration applied to every compute time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// GPU used.
    pub gpu: Gpu,
    /// MFU assumed.
    pub mfu: f64,
    /// Multiplier on `FLOPs / (peak·MFU)`.
    pub factor: f64,
    /// Where the factor came from.
    pub source: CalibrationSource,
    /// What the log measured (ms per iteration), if anything.
    pub measured_ms: Option<f64>,
    /// What the uncalibrated model predicts for the same quantity (ms).
    pub modelled_ms: Option<f64>,
}

/// A collective primitive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CollKind {
    /// All-reduce of S bytes.
    AllReduce,
    /// All-gather to S bytes (each rank contributes S/n).
    AllGather,
    /// Reduce-scatter of S bytes (each rank keeps S/n).
    ReduceScatter,
}

impl CollKind {
    /// nccl-tests bus-bandwidth factor: busbw = algbw × this.
    pub fn busbw_factor(self, n: u32) -> f64 {
        let n = n.max(1) as f64;
        match self {
            CollKind::AllReduce => 2.0 * (n - 1.0) / n,
            CollKind::AllGather | CollKind::ReduceScatter => (n - 1.0) / n,
        }
    }
    /// Short name.
    pub fn as_str(self) -> &'static str {
        match self {
            CollKind::AllReduce => "all-reduce",
            CollKind::AllGather => "all-gather",
            CollKind::ReduceScatter => "reduce-scatter",
        }
    }
}

/// One step of a layer's forward or backward on every rank of a TP group.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum LayerStep {
    /// GPU computation.
    Compute(Nanos),
    /// A TP collective of [`Workload::tp_bytes`].
    Tp(CollKind),
}

/// One DP gradient bucket of a stage.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bucket {
    /// Model chunk whose gradients it holds.
    pub chunk: u32,
    /// With `overlap_grad_reduce`: the (global) layer whose backward in the chunk's last
    /// micro-batch completes the bucket. `None`: after the stage's last backward.
    pub trigger_layer: Option<u32>,
    /// Parameters per GPU.
    pub params: u64,
    /// Gradient bytes reduced.
    pub grad_bytes: Bytes,
    /// Parameter bytes gathered afterwards (distributed optimizer only, else 0).
    pub param_bytes: Bytes,
}

/// Per-stage plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StagePlan {
    /// Stage index.
    pub stage: u32,
    /// Warm-up forwards.
    pub warmup: u32,
    /// 1F1B order.
    pub order: Vec<PipeOp>,
    /// Global layers of each chunk.
    pub chunks: Vec<std::ops::Range<u32>>,
    /// Parameters per GPU on this stage.
    pub params_per_gpu: u64,
    /// DP buckets, in the order they become ready.
    pub buckets: Vec<Bucket>,
    /// Layer-norm gradient all-reduce over TP (SP only).
    pub layernorm_bytes: Option<Bytes>,
    /// Extra forward compute on this stage per micro-batch (logits on the last stage).
    pub head_fwd: Nanos,
    /// Extra backward compute (logits gradient).
    pub head_bwd: Nanos,
}

/// The workload of one iteration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    /// Groups (and sizes).
    pub groups: Groups,
    /// Micro-batches per iteration per pipeline.
    pub microbatches: u32,
    /// Model chunks per stage (1 without interleaving).
    pub vpp: u32,
    /// Transformer layers.
    pub num_layers: u32,
    /// Each TP collective's size S (full buffer, params dtype).
    pub tp_bytes: Bytes,
    /// PP p2p bytes per boundary crossing per TP rank.
    pub pp_bytes: Bytes,
    /// Forward steps of one layer.
    pub fwd_steps: Vec<LayerStep>,
    /// Backward steps of one layer (includes recomputation).
    pub bwd_steps: Vec<LayerStep>,
    /// Forward FLOPs of one layer on one GPU.
    pub layer_fwd_flops: Flops,
    /// Stages.
    pub stages: Vec<StagePlan>,
    /// DP all-reduce (false) or reduce-scatter + all-gather (true, distributed optimizer).
    pub distributed_optimizer: bool,
    /// Gradient element bytes.
    pub grad_dtype_bytes: u64,
    /// Tied-embedding all-reduce between first and last stage (PP > 1, tied embeddings).
    pub emb_bytes: Option<Bytes>,
    /// Padded vocabulary.
    pub padded_vocab: u64,
    /// Compute calibration.
    pub calibration: Calibration,
}

impl Workload {
    /// TP size.
    pub fn tp(&self) -> u32 {
        self.groups.tp
    }
    /// PP size.
    pub fn pp(&self) -> u32 {
        self.groups.pp
    }
    /// DP size.
    pub fn dp(&self) -> u32 {
        self.groups.dp
    }
    /// World size.
    pub fn world(&self) -> u32 {
        self.groups.world()
    }
    /// Bubble fraction `(PP−1)/(v·m)` — a check, not an input.
    pub fn bubble_fraction(&self) -> f64 {
        (self.pp() as f64 - 1.0) / (self.vpp as f64 * self.microbatches as f64)
    }
}

struct Shape {
    attn_fwd: f64,
    mlp_fwd: f64,
    head_fwd: f64,
    attn_params: u64,
}

fn shape(cfg: &TrainingConfig) -> Shape {
    let (b, h, ffn) = (
        cfg.micro_batch_size as f64,
        cfg.hidden_size as f64,
        cfg.ffn_hidden_size as f64,
    );
    let cp = cfg.context_parallel_size.max(1) as f64;
    let s = cfg.seq_length as f64;
    let sl = s / cp;
    let heads = cfg.num_attention_heads.max(1) as u64;
    let kv = match cfg.num_query_groups {
        Some(g) => cfg.hidden_size / heads * g as u64,
        None => cfg.hidden_size,
    };
    let mlp_mats = if cfg.swiglu { 3.0 } else { 2.0 };
    Shape {
        // QKV + scores (QKᵀ) + values (AV) + output projection; each local query attends to the full sequence.
        attn_fwd: 2.0 * b * sl * h * (h + 2.0 * kv as f64)
            + 4.0 * b * sl * s * h
            + 2.0 * b * sl * h * h,
        mlp_fwd: 2.0 * b * sl * h * ffn * mlp_mats,
        head_fwd: 2.0 * b * sl * h * cfg.padded_vocab() as f64,
        attn_params: cfg.hidden_size * (cfg.hidden_size + 2 * kv)
            + cfg.hidden_size * cfg.hidden_size,
    }
}

fn check(cfg: &TrainingConfig, opts: &ScheduleOptions) -> Result<(u32, u32), ScheduleError> {
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
    if cfg.expert_model_parallel_size > 1 || cfg.num_experts.is_some() {
        return Err(ScheduleError::Sizes(format!(
            "expert_model_parallel_size {} / num_experts {}: mixture-of-experts layers (their all-to-all traffic and expert gradients) are not modelled yet",
            cfg.expert_model_parallel_size,
            cfg.num_experts.map_or("None".into(), |n| n.to_string())
        )));
    }
    if cfg.micro_batch_size == 0
        || cfg.global_batch_size == 0
        || !cfg
            .global_batch_size
            .is_multiple_of(cfg.micro_batch_size * dp as u64)
    {
        return Err(ScheduleError::Batch {
            global: cfg.global_batch_size,
            micro: cfg.micro_batch_size,
            dp,
        });
    }
    let m = cfg.global_batch_size / (cfg.micro_batch_size * dp as u64);
    let m = u32::try_from(m)
        .map_err(|_| ScheduleError::Sizes(format!("{m} micro-batches is too many")))?;
    let v = cfg.virtual_pipeline_model_parallel_size.unwrap_or(1).max(1);
    if v > 1 && pp == 1 {
        return Err(ScheduleError::Sizes(format!(
            "virtual pipeline size {v} needs pipeline size > 1"
        )));
    }
    if cfg.num_layers == 0 || !cfg.num_layers.is_multiple_of(pp * v) {
        return Err(ScheduleError::Layers {
            layers: cfg.num_layers,
            pp,
            v,
        });
    }
    if v > 1 && m % pp != 0 {
        return Err(ScheduleError::Interleave { m, pp });
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
    if !(opts.mfu > 0.0 && opts.mfu <= 1.0) {
        return Err(ScheduleError::Option(format!(
            "MFU {} must be in (0, 1]",
            opts.mfu
        )));
    }
    if let Some(f) = opts.factor {
        if !(f.is_finite() && f > 0.0) {
            return Err(ScheduleError::Option(format!(
                "calibration factor {f} must be positive"
            )));
        }
    }
    Ok((m, v))
}

/// Build the workload of one iteration of `cfg`.
pub fn build(cfg: &TrainingConfig, opts: &ScheduleOptions) -> Result<Workload, ScheduleError> {
    let (m, v) = check(cfg, opts)?;
    let (tp, cp, pp, dp) = (
        cfg.tensor_model_parallel_size,
        cfg.context_parallel_size,
        cfg.pipeline_model_parallel_size,
        cfg.data_parallel_size,
    );
    let order = if cfg.use_tp_pp_dp_mapping {
        RankOrder::TpCpEpPpDp
    } else {
        RankOrder::TpCpEpDpPp
    };
    let groups = Groups::new(tp, cp, dp, pp, order);
    let el = cfg.params_dtype.size_bytes();
    let h = cfg.hidden_size;
    let sl = cfg.seq_length / cp as u64;
    let tp_bytes = Bytes(cfg.micro_batch_size * sl * h * el);
    let pp_bytes = Bytes(if cfg.sequence_parallel && tp > 1 {
        tp_bytes.0 / tp as u64
    } else {
        tp_bytes.0
    });
    let vpad = cfg.padded_vocab();
    let sh = shape(cfg);
    let tpf = tp as f64;
    let recompute = cfg.recompute_granularity == Recompute::Full;

    // Uncalibrated per-microbatch compute of the busiest stage, for calibration.
    let per_stage_layers = cfg.num_layers / pp;
    let layer_f = (sh.attn_fwd + sh.mlp_fwd) / tpf;
    let head_f = sh.head_fwd / tpf;
    let peak = opts.gpu.peak_tflops * 1e12 * opts.mfu;
    let bwd_mult = if recompute { 3.0 } else { 2.0 };
    let stage_mb_ms = |with_head: bool| -> f64 {
        let f = per_stage_layers as f64 * layer_f + if with_head { head_f } else { 0.0 };
        f * (1.0 + bwd_mult) / peak * 1e3
    };
    let busiest_ms = stage_mb_ms(true).max(stage_mb_ms(pp == 1));
    let (factor, source, measured, modelled) = if let Some(f) = opts.factor {
        (f, CalibrationSource::Given, None, None)
    } else if !opts.calibrate {
        (1.0, CalibrationSource::None, None, None)
    } else if let (Some(fc), Some(bc)) = (
        cfg.timers.get("forward-compute"),
        cfg.timers.get("backward-compute"),
    ) {
        let meas = fc.max + bc.max;
        let model = busiest_ms * m as f64;
        if meas > 0.0 && model > 0.0 {
            (
                meas / model,
                CalibrationSource::Timers,
                Some(meas),
                Some(model),
            )
        } else {
            (1.0, CalibrationSource::None, None, None)
        }
    } else if let Some(it) = cfg.median_iteration_ms() {
        let model = busiest_ms * (m as f64 + (pp as f64 - 1.0) / v as f64);
        if it > 0.0 && model > 0.0 {
            (
                it / model,
                CalibrationSource::IterationTime,
                Some(it),
                Some(model),
            )
        } else {
            (1.0, CalibrationSource::None, None, None)
        }
    } else {
        (1.0, CalibrationSource::None, None, None)
    };
    let ns = |flops: f64| Nanos((flops / peak * factor * 1e9).round() as u64);

    let attn_f = ns(sh.attn_fwd / tpf);
    let mlp_f = ns(sh.mlp_fwd / tpf);
    let attn_b = ns(2.0 * sh.attn_fwd / tpf);
    let mlp_b = ns(2.0 * sh.mlp_fwd / tpf);
    let (sp, has_tp) = (cfg.sequence_parallel && tp > 1, tp > 1);
    use CollKind::*;
    use LayerStep::{Compute as C, Tp};
    let mut fwd_steps = Vec::new();
    let mut bwd_steps = Vec::new();
    if !has_tp {
        fwd_steps.extend([C(attn_f), C(mlp_f)]);
        bwd_steps.extend([C(mlp_b), C(attn_b)]);
    } else if sp {
        fwd_steps.extend([
            Tp(AllGather),
            C(attn_f),
            Tp(ReduceScatter),
            Tp(AllGather),
            C(mlp_f),
            Tp(ReduceScatter),
        ]);
        // Per block: gather the output gradient, compute, re-gather the input for the weight
        // gradient, reduce-scatter the input gradient.
        bwd_steps.extend([
            Tp(AllGather),
            C(mlp_b),
            Tp(AllGather),
            Tp(ReduceScatter),
            Tp(AllGather),
            C(attn_b),
            Tp(AllGather),
            Tp(ReduceScatter),
        ]);
    } else {
        fwd_steps.extend([C(attn_f), Tp(AllReduce), C(mlp_f), Tp(AllReduce)]);
        bwd_steps.extend([C(mlp_b), Tp(AllReduce), C(attn_b), Tp(AllReduce)]);
    }
    if recompute {
        let mut b = fwd_steps.clone();
        b.extend(bwd_steps);
        bwd_steps = b;
    }
    // Drop zero compute steps (tiny models) so the op chain has no empty records.
    fwd_steps.retain(|s| !matches!(s, C(Nanos(0))));
    bwd_steps.retain(|s| !matches!(s, C(Nanos(0))));

    let grad_el: u64 = if cfg.grad_reduce_in_bf16 { 2 } else { 4 };
    let tpu = tp as u64;
    let ffn = cfg.ffn_hidden_size;
    // Per-GPU parameter tensors of one layer in reverse definition order: MLP fc2, fc1,
    // pre-MLP layer norm, attention projection, QKV, pre-attention layer norm.
    let mlp_fc1 = h * ffn * if cfg.swiglu { 2 } else { 1 };
    let qkv = sh.attn_params - h * h;
    let layer_tensors: [u64; 6] = [
        h * ffn / tpu,
        mlp_fc1 / tpu,
        2 * h,
        h * h / tpu,
        qkv / tpu,
        2 * h,
    ];
    let emb_params = vpad / tp as u64 * h;
    let tied = !cfg.untie_embeddings_and_output_weights;
    let bucket_size = 40_000_000u64.max(1_000_000 * dp as u64 * cp as u64);
    let mut stages = Vec::with_capacity(pp as usize);
    for r in 0..pp {
        let chunks: Vec<_> = (0..v)
            .map(|c| chunk_layers(cfg.num_layers, pp, v, r, c))
            .collect();
        let last_chunk_on_last = r == pp - 1;
        let mut buckets = Vec::new();
        let mut total = 0u64;
        let mut all = 0u64;
        // Backward visits chunks from v−1 down to 0 in its last micro-batch.
        for c in (0..v).rev() {
            let layers = chunks[c as usize].clone();
            let mut acc = 0u64;
            for l in layers.clone().rev() {
                let mut tensors: Vec<u64> = Vec::with_capacity(8);
                if last_chunk_on_last && c == v - 1 && l == layers.end - 1 && (!tied || pp > 1) {
                    tensors.push(emb_params); // output layer (or the tied copy on the last stage)
                }
                // Megatron fills buckets tensor by tensor in reverse definition order.
                tensors.extend_from_slice(&layer_tensors);
                if r == 0 && c == 0 && l == layers.start {
                    tensors.push(emb_params); // input embedding: its gradient completes right after layer 0's
                }
                for t in tensors {
                    acc += t;
                    if cfg.overlap_grad_reduce && acc >= bucket_size {
                        buckets.push((c, Some(l), acc));
                        total += acc;
                        acc = 0;
                    }
                }
            }
            if acc > 0 {
                if cfg.overlap_grad_reduce {
                    buckets.push((c, Some(layers.start), acc));
                    total += acc;
                } else {
                    all += acc;
                }
            }
        }
        if !cfg.overlap_grad_reduce {
            buckets.push((0, None, all));
            total += all;
        }
        let buckets = buckets
            .into_iter()
            .map(|(chunk, trigger_layer, params)| Bucket {
                chunk,
                trigger_layer,
                params,
                grad_bytes: Bytes(params * grad_el),
                param_bytes: Bytes(if cfg.use_distributed_optimizer {
                    params * el
                } else {
                    0
                }),
            })
            .collect();
        let nl = cfg.num_layers / pp;
        let layernorm_bytes =
            sp.then(|| Bytes((nl as u64 * 4 * h + if r == pp - 1 { 2 * h } else { 0 }) * grad_el));
        stages.push(StagePlan {
            stage: r,
            warmup: warmup(pp, r, m, v),
            order: stage_order(pp, r, m, v),
            chunks,
            params_per_gpu: total,
            buckets,
            layernorm_bytes,
            head_fwd: if r == pp - 1 { ns(head_f) } else { Nanos(0) },
            head_bwd: if r == pp - 1 {
                ns(2.0 * head_f)
            } else {
                Nanos(0)
            },
        });
    }
    let emb_bytes = (tied && pp > 1).then(|| Bytes(emb_params * grad_el));
    Ok(Workload {
        groups,
        microbatches: m,
        vpp: v,
        num_layers: cfg.num_layers,
        tp_bytes,
        pp_bytes,
        fwd_steps,
        bwd_steps,
        layer_fwd_flops: Flops(layer_f.round() as u64),
        stages,
        distributed_optimizer: cfg.use_distributed_optimizer,
        grad_dtype_bytes: grad_el,
        emb_bytes,
        padded_vocab: vpad,
        calibration: Calibration {
            gpu: opts.gpu.clone(),
            mfu: opts.mfu,
            factor,
            source,
            measured_ms: measured,
            modelled_ms: modelled,
        },
    })
}
