//! Stage 2: the parallel workload of one iteration (rank groups, pipeline order, per-op
//! sizes and compute times).
//!
//! Public entry: [`build`]. The [`Workload`] is *compact*: every rank of a pipeline stage
//! runs the same order, every dense layer the same op sequence and every MoE layer
//! another, so the workload stores each once (a few kB even for 1,024 GPUs) and the trace
//! generator expands it while streaming.
//!
//! Model (docs/model.md#workload-model; approximations are named there):
//! - TP per layer: no SP → forward 2 all-reduces, backward 2; SP → forward 2 all-gathers +
//!   2 reduce-scatters, backward 4 all-gathers + 2 reduce-scatters; each of `b·(s/CP)·h`
//!   elements in the params dtype. The embedding, the LM head and the cross-entropy add
//!   their own TP collectives. Full recomputation re-runs each layer's forward (compute
//!   *and* its collectives) just before its backward, as Megatron does.
//! - CP per layer (docs/model.md#context-parallelism): ring attention over the CP group
//!   (`p2p`), Ulysses all-to-alls (`a2a`) or K/V all-gathers (`allgather`).
//! - EP per MoE layer (docs/model.md#expert-parallelism): dispatch and combine
//!   all-to-alls over the EP group (or all-gathers and reduce-scatters over expert TP×EP),
//!   the experts' compute per EP rank.
//! - PP p2p: `(s/CP)·b·h` params-dtype elements per boundary crossing (÷TP under SP).
//! - DP: gradients in the dtype Megatron reduces them in, buckets of `max(40M, 1M·DP)`
//!   parameters in reverse definition order when `overlap_grad_reduce` (stage 0, chunk 0
//!   only), all-reduce, or reduce-scatter + all-gather of params with the distributed
//!   optimizer; dense parameters over DP×CP, expert parameters over expert DP.
//! - Compute: exact matmul FLOPs per layer (QKV with GQA, attention scores and values,
//!   output projection, MLP incl. SwiGLU, router and experts, logits on the last stage)
//!   ÷ TP, backward = 2× forward, at `peak · MFU`, scaled by a calibration factor from the
//!   log (see [`Calibration`]). Element-wise ops, softmax, norms and the optimizer step are
//!   not counted (the MFU and the calibration absorb them).

mod buckets;
mod build;
mod calibrate;
pub mod engine;
pub mod gpu;
pub mod groups;
mod layers;
pub mod moe;
mod ops;
pub mod pipeline;
pub mod roofline;
mod shape;
mod workload;

pub use build::{build, MAX_MESSAGE_BYTES};
pub use engine::{Engine, EngineCost};
pub use gpu::{Generation, Gpu};
pub use groups::{Coords, ExpertCoords, ExpertSizes, Groups, RankOrder};
pub use moe::MoeRouting;
pub use ops::{A2aPart, A2aSizes, Bucket, CollKind, GradGroup, GroupKind, LayerStep, StepBytes};
pub use pipeline::{
    chunk_layers, stage_order, stage_order_with, warmup, warmup_with, Pass, PipeOp, WarmupRule,
};
pub use roofline::{ComputeModel, Efficiency};
pub use workload::{
    Calibration, CalibrationSource, CpPlan, MoePlan, ScheduleError, ScheduleOptions, StagePlan,
    Workload, MAX_CALIBRATION_FACTOR,
};
