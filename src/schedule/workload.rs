//! The workload of one iteration and what it is built from: the options, the calibration,
//! the per-stage, context-parallel and mixture-of-experts plans, and why a build fails.

use super::engine::EngineCost;
use super::gpu::Gpu;
use super::groups::Groups;
use super::moe::MoeRouting;
use super::ops::{A2aPart, A2aSizes, Bucket, LayerStep, PartSizes, StepBytes};
use super::pipeline::{Pass, PipeOp, WarmupRule};
use super::roofline::{ComputeModel, Efficiency};
use crate::megatron::{CpCommType, MoeDispatcher, MoeLayerFreq};
use crate::units::{Bytes, Flops, Nanos};
use serde::{Deserialize, Serialize};

/// The largest calibration factor, given or measured: a job whose compute runs 1,000×
/// slower than `FLOPs / (peak·MFU)` says its timers or options are wrong, not its GPUs.
pub const MAX_CALIBRATION_FACTOR: f64 = 1000.0;

/// Why a workload cannot be built: the numbers that disagree are named.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ScheduleError {
    /// A size is zero or the sizes do not multiply up.
    #[error("inconsistent parallel sizes: {0}")]
    Sizes(String),
    /// A size or count beyond what the schedule models (a crafted or mistyped value).
    #[error("size out of range: {0}")]
    Magnitude(String),
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
    /// The job uses a feature the schedule does not model: where the field's value came
    /// from (`file:line:column`, a preset, an override), the field, and what to change.
    #[error("{at}: {field}: {msg}")]
    Unsupported {
        /// Where the field's value came from.
        at: String,
        /// Megatron's argument name.
        field: String,
        /// What is not modelled and what would make the job acceptable.
        msg: String,
    },
    /// An option is out of range.
    #[error("{0}")]
    Option(String),
}

/// How compute time is derived, and the modelling choices that are not Megatron arguments.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScheduleOptions {
    /// The GPU.
    pub gpu: Gpu,
    /// How compute time is derived: the roofline (default) or the flat `peak · MFU`.
    #[serde(default)]
    pub compute: ComputeModel,
    /// The roofline's efficiencies instead of the GPU generation's fitted ones.
    #[serde(skip)]
    pub efficiency: Option<Efficiency>,
    /// The engine's cost instead of the fitted one of the job's engine (the suite's fit).
    #[serde(skip)]
    pub engine_cost: Option<EngineCost>,
    /// Model FLOPs utilisation of the flat model ([`ComputeModel::Mfu`]).
    pub mfu: f64,
    /// Calibrate against the log's timers / iteration time when present.
    pub calibrate: bool,
    /// Use this factor instead of calibrating.
    pub factor: Option<f64>,
    /// How MoE tokens spread over the experts.
    #[serde(default)]
    pub moe_routing: MoeRouting,
    /// Which Megatron release's interleaved warm-up to follow.
    #[serde(default)]
    pub warmup_rule: WarmupRule,
}

impl ScheduleOptions {
    /// Whether these options can be used at all (MFU in (0, 1], a calibration factor in
    /// (0, [`MAX_CALIBRATION_FACTOR`]]), checked on their own, before any job is read: a grid or a
    /// command line with `mfu = NaN` stops before anything runs.
    pub fn check(&self) -> Result<(), ScheduleError> {
        if !(self.mfu > 0.0 && self.mfu <= 1.0) {
            return Err(ScheduleError::Option(format!(
                "MFU {} must be in (0, 1]",
                self.mfu
            )));
        }
        if let Some(f) = self.factor {
            if !(f > 0.0 && f <= MAX_CALIBRATION_FACTOR) {
                return Err(ScheduleError::Option(format!(
                    "calibration factor {f:?} must be in (0, {MAX_CALIBRATION_FACTOR}]"
                )));
            }
        }
        if let Some(e) = self.engine_cost {
            if !e.is_valid() {
                return Err(ScheduleError::Option(format!(
                    "engine cost {e:?}: the kernel factor must be in [1, 4], the host time per layer pass in [0, 1] s"
                )));
            }
        }
        Ok(())
    }
}

impl Default for ScheduleOptions {
    fn default() -> Self {
        ScheduleOptions {
            gpu: Gpu::preset("a100").expect("preset"),
            compute: ComputeModel::Roofline,
            efficiency: None,
            engine_cost: None,
            mfu: 0.45,
            calibrate: true,
            factor: None,
            moe_routing: MoeRouting::Uniform,
            warmup_rule: WarmupRule::Current,
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
    /// How compute was priced.
    #[serde(default)]
    pub compute: ComputeModel,
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
    /// Dense parameters per GPU on this stage.
    pub params_per_gpu: u64,
    /// Expert parameters per GPU on this stage (0 for dense models).
    pub expert_params_per_gpu: u64,
    /// DP buckets (dense, then expert), each list in the order its buckets become ready.
    pub buckets: Vec<Bucket>,
    /// Gradients of the sequence-parallel parameters (norms, row-parallel biases, routers)
    /// all-reduced over TP at the end of the iteration (SP only).
    pub layernorm_bytes: Option<Bytes>,
    /// Before the first layer of chunk 0 in forward (first stage): the embedding's TP
    /// collective.
    pub embedding_fwd: Vec<LayerStep>,
    /// After the first layer of chunk 0 in backward (first stage).
    pub embedding_bwd: Vec<LayerStep>,
    /// The optimizer step of each rank of this stage, at the end of the iteration
    /// (before the distributed optimizer's parameter all-gathers; 0 under the flat model).
    #[serde(default)]
    pub optimizer: Nanos,
    /// After the last layer of the last chunk in forward (last stage): the LM head's
    /// all-gather (SP), the logits, the cross-entropy all-reduces.
    pub head_fwd: Vec<LayerStep>,
    /// Before the last layer of the last chunk in backward (last stage).
    pub head_bwd: Vec<LayerStep>,
}

/// Context-parallel attention of every layer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpPlan {
    /// How K/V are exchanged.
    pub comm: CpCommType,
    /// K and V of one rank's sequence chunk: `2·b·(s/CP)·(g·d/TP)` elements, params dtype —
    /// one ring step.
    pub kv_bytes: Bytes,
    /// `a2a+p2p`: the CP ranks of each all-to-all group (`--hierarchical-context-parallel-sizes`'
    /// first size); the ring runs over the CP ranks `a2a_size` apart. 1 otherwise.
    pub a2a_size: u32,
}

impl CpPlan {
    /// The CP groups' members split into the rings attention runs over: the whole group,
    /// or with `a2a+p2p` the members `a2a_size` apart (Megatron's level-1 hierarchical
    /// groups), in CP-rank order.
    pub fn rings<T: Copy>(&self, members: &[T]) -> Vec<Vec<T>> {
        let a = (self.a2a_size.max(1) as usize).min(members.len().max(1));
        (0..a)
            .map(|u| members.iter().skip(u).step_by(a).copied().collect())
            .collect()
    }

    /// The CP group's members split into the all-to-all groups of `a2a+p2p`:
    /// `a2a_size` consecutive members each (Megatron's level-0 hierarchical groups).
    pub fn a2a_groups<T: Copy>(&self, members: &[T]) -> Vec<Vec<T>> {
        members
            .chunks(self.a2a_size.max(1) as usize)
            .map(<[T]>::to_vec)
            .collect()
    }
}

/// Mixture-of-experts layers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MoePlan {
    /// Experts per MoE layer.
    pub num_experts: u32,
    /// Experts per token.
    pub topk: u32,
    /// Token dispatcher.
    pub dispatcher: MoeDispatcher,
    /// Which layers are MoE layers.
    pub layer_freq: MoeLayerFreq,
    /// Token routing assumed.
    pub routing: MoeRouting,
    /// Tokens one rank routes per micro-batch.
    pub tokens: f64,
    /// Fraction of token copies dropped by the capacity factor.
    pub dropped: f64,
    /// Dispatch: bytes every rank sends to the rank of EP index `j`.
    pub dispatch_bytes: Vec<Bytes>,
    /// Expert-TP all-gather (alltoall dispatcher, expert TP > 1) at EP index `j`.
    pub etp_gather_bytes: Vec<Bytes>,
    /// Experts' forward compute at EP index `j`.
    pub expert_fwd: Vec<Nanos>,
    /// Experts' backward compute at EP index `j`.
    pub expert_bwd: Vec<Nanos>,
    /// Forward steps of a MoE layer.
    pub fwd_steps: Vec<LayerStep>,
    /// Backward steps of a MoE layer (includes recomputation).
    pub bwd_steps: Vec<LayerStep>,
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
    /// Megatron's pipeline scatter/gather: each TP rank sent 1/TP of the activation
    /// (`pp_bytes`), and the receiving TP group all-gathers `pp_bytes · TP` before using it.
    #[serde(default)]
    pub pp_gather: bool,
    /// Forward steps of one dense layer.
    pub fwd_steps: Vec<LayerStep>,
    /// Backward steps of one dense layer (includes recomputation).
    pub bwd_steps: Vec<LayerStep>,
    /// Forward FLOPs of one dense layer on one GPU.
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
    /// Context parallelism (CP > 1).
    pub cp: Option<CpPlan>,
    /// Mixture of experts (a MoE model).
    pub moe: Option<MoePlan>,
    /// Compute calibration.
    pub calibration: Calibration,
}

impl Workload {
    /// The all-to-alls an [`LayerStep::AllToAll`] of `sizes` runs over group `g`: the
    /// whole group (Ulysses' even split, MoE dispatch and combine), or with `a2a+p2p` an
    /// even one inside each of the CP group's all-to-all groups of two or more.
    pub fn a2a_parts(&self, sizes: A2aSizes, g: &[crate::units::Rank]) -> Vec<A2aPart> {
        let dispatch = || {
            self.moe
                .as_ref()
                .map(|m| m.dispatch_bytes.clone())
                .unwrap_or_default()
        };
        let whole = |sizes| {
            vec![A2aPart {
                members: g.to_vec(),
                sizes,
            }]
        };
        match sizes {
            A2aSizes::Even(total) => whole(PartSizes::Even(total)),
            A2aSizes::Dispatch => whole(PartSizes::ToReceiver(dispatch())),
            A2aSizes::Combine => whole(PartSizes::FromSender(dispatch())),
            A2aSizes::CpInner(total) => self
                .cp
                .as_ref()
                .map(|p| p.a2a_groups(g))
                .unwrap_or_default()
                .into_iter()
                .filter(|ig| ig.len() > 1)
                .map(|members| A2aPart {
                    members,
                    sizes: PartSizes::Even(total),
                })
                .collect(),
        }
    }

    /// The size of a [`LayerStep::Coll`] over the group whose first member is `first`.
    pub fn step_bytes(&self, b: StepBytes, first: crate::units::Rank) -> Bytes {
        match (b, &self.moe) {
            (StepBytes::Fixed(b), _) => b,
            (StepBytes::ExpertTokens, Some(m)) => {
                let j = self.groups.expert_coords(first).ep as usize;
                m.etp_gather_bytes.get(j).copied().unwrap_or(Bytes(0))
            }
            (StepBytes::ExpertTokens, None) => Bytes(0),
        }
    }

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
    /// Whether layer `l` (global, 0-based) is a MoE layer.
    pub fn is_moe_layer(&self, l: u32) -> bool {
        self.moe
            .as_ref()
            .is_some_and(|m| m.layer_freq.is_moe_layer(l))
    }
    /// Chunk `chunk` of stage `s` holds the model's first layers (and the embedding).
    pub fn is_first_chunk(&self, s: u32, chunk: u32) -> bool {
        s == 0 && chunk == 0
    }
    /// Chunk `chunk` of stage `s` holds the model's last layers (and the LM head).
    pub fn is_last_chunk(&self, s: u32, chunk: u32) -> bool {
        s == self.pp() - 1 && chunk == self.vpp - 1
    }
    /// Whether `op` on stage `s` waits for another stage's output: every forward but the
    /// first chunk's, every backward but the last chunk's.
    pub fn receives(&self, s: u32, op: PipeOp) -> bool {
        match op.pass {
            Pass::Fwd => !self.is_first_chunk(s, op.chunk),
            Pass::Bwd => !self.is_last_chunk(s, op.chunk),
        }
    }
    /// The (stage, chunk) that `op`'s output on stage `s` goes to: forward to the next stage
    /// (from the last stage, to stage 0's next chunk: interleaved 1F1B), backward to the
    /// previous one (from stage 0, to the last stage's previous chunk); `None` at the ends.
    pub fn next_hop(&self, s: u32, op: PipeOp) -> Option<(u32, u32)> {
        let (pp, v) = (self.pp(), self.vpp);
        match op.pass {
            Pass::Fwd if s < pp - 1 => Some((s + 1, op.chunk)),
            Pass::Fwd if op.chunk < v - 1 => Some((0, op.chunk + 1)),
            Pass::Bwd if s > 0 => Some((s - 1, op.chunk)),
            Pass::Bwd if op.chunk > 0 => Some((pp - 1, op.chunk - 1)),
            _ => None,
        }
    }
    /// The stage `op`'s input on stage `s` comes from (the one whose [`Workload::next_hop`]
    /// is `(s, op.chunk)`); `None` when `op` receives nothing.
    pub fn prev_hop(&self, s: u32, op: PipeOp) -> Option<u32> {
        let (pp, v) = (self.pp(), self.vpp);
        match op.pass {
            Pass::Fwd if s > 0 => Some(s - 1),
            Pass::Fwd if op.chunk > 0 => Some(pp - 1),
            Pass::Bwd if s < pp - 1 => Some(s + 1),
            Pass::Bwd if op.chunk < v - 1 => Some(0),
            _ => None,
        }
    }
    /// The steps layer `l` runs in `pass`.
    pub fn layer_steps(&self, l: u32, pass: Pass) -> &[LayerStep] {
        match (&self.moe, pass) {
            (Some(m), Pass::Fwd) if m.layer_freq.is_moe_layer(l) => &m.fwd_steps,
            (Some(m), Pass::Bwd) if m.layer_freq.is_moe_layer(l) => &m.bwd_steps,
            (_, Pass::Fwd) => &self.fwd_steps,
            (_, Pass::Bwd) => &self.bwd_steps,
        }
    }
}
