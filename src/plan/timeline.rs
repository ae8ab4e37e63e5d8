//! The planner's contention-free timeline of one pipeline replica: when each stage ends
//! its last backward and when each gradient bucket is complete.
//!
//! It walks the same per-stage op order the trace generator lowers (the workload's
//! 1F1B / interleaved order, [`crate::schedule::StagePlan::order`]) with fixed durations:
//! an op takes its layers' time (compute and TP collectives) plus the embedding on the
//! first chunk of the first stage and the LM head and loss on the last chunk of the last
//! stage ([`EdgeTimes`]), then its point-to-point send, which the sender waits for (the
//! trace's sends are synchronous). An op starts when its stage is free and its input has
//! arrived. The durations come from the planner's pricing, which replays every replica's
//! collectives (and sends) of one step together, so the contention between replicas is
//! in them; what is left out (the replay measures its effect): the gradient traffic of
//! replicas or stages that finished earlier, and differences between the TP ranks and
//! replicas of a stage (each hop takes its slowest send's time).

use crate::schedule::{Pass, Workload};

/// Per-layer times of one stage (ns): forward and backward of one layer of one
/// micro-batch, compute and TP collectives included.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LayerTimes {
    /// Forward.
    pub fwd: f64,
    /// Backward (recomputation included).
    pub bwd: f64,
}

/// Times of one stage's steps around its layers (ns, per micro-batch): the embedding's
/// (first stage, first chunk) and the LM head's and loss's (last stage, last chunk),
/// compute and collectives.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EdgeTimes {
    /// Embedding, forward (before the first layer).
    pub emb_fwd: f64,
    /// Embedding, backward (after the first layer's backward).
    pub emb_bwd: f64,
    /// LM head and loss, forward (after the last layer).
    pub head_fwd: f64,
    /// LM head and loss, backward (before the last layer's backward).
    pub head_bwd: f64,
}

/// What the timeline gives back.
#[derive(Clone, Debug, PartialEq)]
pub struct Timeline {
    /// Per stage: when its last op (and its send) ends.
    pub stage_end: Vec<f64>,
    /// Per stage, per gradient bucket: when the bucket's gradients are complete.
    pub triggers: Vec<Vec<f64>>,
}

impl Timeline {
    /// The pipeline's makespan.
    pub fn end(&self) -> f64 {
        self.stage_end.iter().copied().fold(0.0, f64::max)
    }
}

/// Run the timeline: `layer[s]` and `edge[s]` per stage, `p2p(from, to)` the time of one
/// activation or gradient transfer between stages. `None` if the order cannot progress (a
/// workload the trace generator would refuse too).
pub fn run(
    wl: &Workload,
    layer: &[LayerTimes],
    edge: &[EdgeTimes],
    p2p: &dyn Fn(u32, u32) -> f64,
) -> Option<Timeline> {
    let (pp, m) = (wl.pp(), wl.microbatches);
    let mut free = vec![0.0f64; pp as usize];
    let mut cursor = vec![0usize; pp as usize];
    let mut inbox: std::collections::HashMap<(u32, Pass, u32, u32), f64> = Default::default();
    let mut triggers: Vec<Vec<f64>> = wl
        .stages
        .iter()
        .map(|s| vec![f64::NAN; s.buckets.len()])
        .collect();
    loop {
        let mut progress = false;
        let mut done = true;
        for s in 0..pp {
            let plan = &wl.stages[s as usize];
            let si = s as usize;
            while cursor[si] < plan.order.len() {
                let op = plan.order[cursor[si]];
                let arrival = if wl.receives(s, op) {
                    match inbox.remove(&(s, op.pass, op.chunk, op.microbatch)) {
                        Some(t) => t,
                        None => break,
                    }
                } else {
                    0.0
                };
                let start = free[si].max(arrival);
                let layers = plan.chunks.get(op.chunk as usize)?.clone();
                let nl = layers.len() as f64;
                let e = &edge[si];
                let head = if wl.is_last_chunk(s, op.chunk) {
                    (e.head_fwd, e.head_bwd)
                } else {
                    (0.0, 0.0)
                };
                let emb = if wl.is_first_chunk(s, op.chunk) {
                    (e.emb_fwd, e.emb_bwd)
                } else {
                    (0.0, 0.0)
                };
                let end = match op.pass {
                    Pass::Fwd => start + emb.0 + nl * layer[si].fwd + head.0,
                    Pass::Bwd => {
                        let t0 = start + head.1;
                        if op.microbatch == m - 1 {
                            for (b, bucket) in plan.buckets.iter().enumerate() {
                                if bucket.chunk != op.chunk {
                                    continue;
                                }
                                if let Some(l) = bucket.trigger_layer {
                                    // backward runs the chunk's layers in reverse, the
                                    // embedding's after the first layer's
                                    let done_layers = (layers.end - l) as f64;
                                    let emb_done = if l == layers.start { emb.1 } else { 0.0 };
                                    triggers[si][b] = t0 + done_layers * layer[si].bwd + emb_done;
                                }
                            }
                        }
                        t0 + nl * layer[si].bwd + emb.1
                    }
                };
                free[si] = match wl.next_hop(s, op) {
                    Some((ts, tc)) => {
                        let t = end + p2p(s, ts);
                        inbox.insert((ts, op.pass, tc, op.microbatch), t);
                        t
                    }
                    None => end,
                };
                cursor[si] += 1;
                progress = true;
            }
            if cursor[si] < plan.order.len() {
                done = false;
            }
        }
        if done {
            break;
        }
        if !progress {
            return None;
        }
    }
    for (s, t) in triggers.iter_mut().enumerate() {
        for x in t.iter_mut() {
            if x.is_nan() {
                *x = free[s];
            }
        }
    }
    Some(Timeline {
        stage_end: free,
        triggers,
    })
}
