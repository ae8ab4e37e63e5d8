//! What the training engine itself costs, beyond the kernels the roofline prices
//! (docs/compute.md#the-training-engine).
//!
//! Megatron-LM's own schedule is the reference: its kernels are what the per-generation
//! efficiencies ([`super::Efficiency`]) were fitted on, so it adds nothing. DeepSpeed's
//! pipeline engine (Megatron-DeepSpeed with `--deepspeed` and PP > 1) runs the same
//! kernels measurably slower: published runs of it sit 12–39 % above what the same shapes
//! cost under Megatron's schedule, and the gap shrinks as the micro-batch grows. Two
//! constants describe it — a factor on the kernels' time and a fixed host time per layer
//! and pass (the engine interprets its instruction stream and DeepSpeed's activation
//! checkpointing partitions, gathers and re-runs each layer from Python, which a small
//! micro-batch does not hide) — fitted on one set of published Megatron-DeepSpeed runs
//! (`ina3d validate --reality --fit deepspeed-pipeline`) and checked on others.

use crate::megatron::TrainingConfig;
use serde::{Deserialize, Serialize};

/// The engine that runs the job's schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Engine {
    /// Megatron-LM's (and NeMo's) own pipeline schedules.
    Megatron,
    /// DeepSpeed's `PipelineEngine` (Megatron-DeepSpeed, `--deepspeed`, PP > 1).
    DeepSpeedPipeline,
}

crate::keyword::keyword_enum!(Engine, "training engine", Engine::Megatron => "megatron", Engine::DeepSpeedPipeline => "deepspeed-pipeline");

impl Engine {
    /// The engine `cfg` runs under.
    pub fn of(cfg: &TrainingConfig) -> Engine {
        if cfg.deepspeed_pipeline() {
            Engine::DeepSpeedPipeline
        } else {
            Engine::Megatron
        }
    }
}

/// The fitted cost of one engine.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EngineCost {
    /// Every kernel's time is multiplied by this (≥ 1).
    pub kernel_factor: f64,
    /// Seconds the engine adds to every pass of every layer over one micro-batch
    /// (forward, backward, and the recomputed forward under full recomputation).
    pub per_layer_pass_s: f64,
}

impl EngineCost {
    /// Megatron-LM's schedule: the reference, nothing added.
    pub const NONE: EngineCost = EngineCost {
        kernel_factor: 1.0,
        per_layer_pass_s: 0.0,
    };

    /// The cost fitted for `e` (docs/compute.md#the-training-engine: the fit rows, the
    /// command that refits them and the residuals).
    pub fn of(e: Engine) -> EngineCost {
        match e {
            Engine::Megatron => EngineCost::NONE,
            // `ina3d validate --reality --fit deepspeed-pipeline`: the 17 BigScience
            // topology-search rows (A100 80GB, Megatron-DeepSpeed, micro-batch 1 to 8;
            // fit median |error| 1.6 %, largest 4.2 %). Measured on A100 only: other generations take
            // the same constants (docs/compute.md says so).
            Engine::DeepSpeedPipeline => EngineCost {
                kernel_factor: 1.0903595463105469,
                per_layer_pass_s: 2.8431435681058725e-3,
            },
        }
    }

    /// Whether the cost is usable: a factor in [1, 4], a host time in [0, 1 s].
    pub fn is_valid(&self) -> bool {
        (1.0..=4.0).contains(&self.kernel_factor) && (0.0..=1.0).contains(&self.per_layer_pass_s)
    }

    /// Add the engine's cost to one micro-batch's part costs: every part's kernels by the
    /// factor, and the per-pass host time once per layer (on the attention block's output
    /// projection, which every layer has: the recomputed forward re-runs it, so full
    /// recomputation pays it three times).
    pub(crate) fn apply(&self, parts: &mut super::roofline::PartCosts) {
        if *self == EngineCost::NONE {
            return;
        }
        let k = self.kernel_factor;
        for p in [
            &mut parts.qkv,
            &mut parts.core,
            &mut parts.proj,
            &mut parts.mlp,
            &mut parts.head,
            &mut parts.router,
            &mut parts.shared,
            &mut parts.per_expert_token,
        ] {
            p.0 *= k;
            p.1 *= k;
        }
        parts.proj.0 += self.per_layer_pass_s;
        parts.proj.1 += self.per_layer_pass_s;
    }
}
