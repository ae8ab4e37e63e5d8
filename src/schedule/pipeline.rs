//! 1F1B and interleaved 1F1B order of one pipeline stage (docs/model.md#pipeline-schedule, Megatron's
//! `forward_backward_pipelining_without_interleaving` / `_with_interleaving`).

use serde::{Deserialize, Serialize};

/// Forward or backward pass of one micro-batch through one model chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pass {
    /// Forward.
    Fwd,
    /// Backward.
    Bwd,
}

/// One step of a stage's schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PipeOp {
    /// Forward or backward.
    pub pass: Pass,
    /// Micro-batch (0-based).
    pub microbatch: u32,
    /// Model chunk on this stage (0 without interleaving).
    pub chunk: u32,
}

/// Which Megatron release's interleaved warm-up rule to follow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WarmupRule {
    /// Megatron-core since November 2024 (commit 4295be1, "tunable schedule with
    /// overlapping"): `min((pp − stage − 1)·2 + (v − 1)·pp, m·v)`.
    #[default]
    Current,
    /// Earlier releases: as `Current`, except that with `m == pp` *every* step of the
    /// interleaved schedule is a warm-up step (all forwards, then all backwards).
    AllWarmupWhenMEqualsPp,
}

/// Warm-up forwards of stage `stage` of `pp` with `m` micro-batches and `v` chunks per stage
/// (`v = 1`: plain 1F1B, `min(pp − stage − 1, m)`; interleaved:
/// `min((pp − stage − 1)·2 + (v − 1)·pp, m·v)`), under today's Megatron rule
/// (docs/model.md#pipeline-schedule).
pub fn warmup(pp: u32, stage: u32, m: u32, v: u32) -> u32 {
    warmup_with(pp, stage, m, v, WarmupRule::Current)
}

/// [`warmup`] under a chosen Megatron release's rule (see [`WarmupRule`]).
pub fn warmup_with(pp: u32, stage: u32, m: u32, v: u32, rule: WarmupRule) -> u32 {
    let to_last = pp - stage - 1;
    if v <= 1 {
        to_last.min(m)
    } else if rule == WarmupRule::AllWarmupWhenMEqualsPp && m == pp {
        m * v
    } else {
        (to_last * 2 + (v - 1) * pp).min(m * v)
    }
}

/// The `k`-th virtual micro-batch of a pass as Megatron numbers it: chunk
/// `(k mod pp·v) / pp` (reversed for backward) and micro-batch `(k / (pp·v))·pp + k mod pp`.
fn virtual_op(pass: Pass, k: u32, pp: u32, v: u32) -> PipeOp {
    if v <= 1 {
        return PipeOp {
            pass,
            microbatch: k,
            chunk: 0,
        };
    }
    let in_group = k % (pp * v);
    let mut chunk = in_group / pp;
    if pass == Pass::Bwd {
        chunk = v - 1 - chunk;
    }
    PipeOp {
        pass,
        microbatch: (k / (pp * v)) * pp + k % pp,
        chunk,
    }
}

/// The full order of stage `stage`: `w` warm-up forwards, `m·v − w` (forward, backward)
/// pairs, `w` cool-down backwards. Interleaving needs `m` to be a multiple of `pp`
/// (checked by [`crate::schedule::build`]).
pub fn stage_order(pp: u32, stage: u32, m: u32, v: u32) -> Vec<PipeOp> {
    stage_order_with(pp, stage, m, v, WarmupRule::Current)
}

/// [`stage_order`] under a chosen warm-up rule.
pub fn stage_order_with(pp: u32, stage: u32, m: u32, v: u32, rule: WarmupRule) -> Vec<PipeOp> {
    let v = v.max(1);
    let total = m * v;
    let w = warmup_with(pp, stage, m, v, rule);
    let mut out = Vec::with_capacity(2 * total as usize);
    for k in 0..w {
        out.push(virtual_op(Pass::Fwd, k, pp, v));
    }
    for i in 0..total - w {
        out.push(virtual_op(Pass::Fwd, w + i, pp, v));
        out.push(virtual_op(Pass::Bwd, i, pp, v));
    }
    for i in total - w..total {
        out.push(virtual_op(Pass::Bwd, i, pp, v));
    }
    out
}

/// Global layers (0-based) of chunk `chunk` on stage `stage`: chunks are assigned round-robin,
/// virtual stage `chunk·pp + stage` holding `L/(pp·v)` consecutive layers.
pub fn chunk_layers(
    num_layers: u32,
    pp: u32,
    v: u32,
    stage: u32,
    chunk: u32,
) -> std::ops::Range<u32> {
    let v = v.max(1);
    let per = num_layers / (pp * v);
    let vs = chunk * pp + stage;
    vs * per..(vs + 1) * per
}
