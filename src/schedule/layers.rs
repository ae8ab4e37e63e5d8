//! The op sequences of one layer, of the embedding and of the LM head: which collectives
//! run between which computations, in forward and in backward
//! (docs/model.md#per-op-sizes, docs/model.md#context-parallelism,
//! docs/model.md#expert-parallelism).

use super::{A2aSizes, CollKind, GroupKind, LayerStep, Pass, StepBytes};
use crate::megatron::{CpCommType, MoeDispatcher};
use crate::units::{Bytes, Nanos};

use CollKind::{AllGather as Ag, AllReduce as Ar, ReduceScatter as Rs};
use LayerStep::{Compute as C, Tp};

/// Compute time of each part of a layer, forward (`.0`) and backward (`.1`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Times {
    /// Whole attention (QKV, core, projection) as one step, when CP needs no split.
    pub attn: (Nanos, Nanos),
    /// QKV projection.
    pub qkv: (Nanos, Nanos),
    /// Attention core.
    pub core: (Nanos, Nanos),
    /// Output projection.
    pub proj: (Nanos, Nanos),
    /// Dense MLP.
    pub mlp: (Nanos, Nanos),
    /// MoE router.
    pub router: (Nanos, Nanos),
    /// Shared experts.
    pub shared: (Nanos, Nanos),
    /// LM head (logits).
    pub head: (Nanos, Nanos),
}

/// What shapes the op sequences.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape {
    pub tp: u32,
    pub sp: bool,
    pub recompute: bool,
    /// CP comm type, when CP > 1.
    pub cp: Option<CpCommType>,
    /// CP size.
    pub cp_size: u32,
    /// `a2a+p2p`: CP ranks per all-to-all group (1 otherwise).
    pub cp_a2a: u32,
    /// One ring step's K and V.
    pub kv_bytes: Bytes,
    /// Ulysses all-to-all before attention (Q, K, V of the local chunk, per rank).
    pub a2a_qkv: Bytes,
    /// Ulysses all-to-all of the attention output (per rank).
    pub a2a_out: Bytes,
    /// Cross-entropy all-reduce: `b·(s/CP)` fp32 values.
    pub ce_bytes: Bytes,
}

impl Shape {
    fn has_tp(&self) -> bool {
        self.tp > 1
    }
}

/// The attention block (docs/model.md#per-op-sizes): TP collectives around the attention,
/// whose core runs over the CP group when CP > 1.
fn attention(s: &Shape, t: &Times, pass: Pass) -> Vec<LayerStep> {
    let cp_all = |k| LayerStep::Coll {
        kind: k,
        group: GroupKind::Cp,
        bytes: StepBytes::Fixed(Bytes(s.kv_bytes.0 * s.cp_size as u64)),
    };
    let a2a = |b| LayerStep::AllToAll {
        group: GroupKind::Cp,
        sizes: A2aSizes::Even(b),
    };
    let inner = |b| LayerStep::AllToAll {
        group: GroupKind::Cp,
        sizes: A2aSizes::CpInner(b),
    };
    let body: Vec<LayerStep> = match (s.cp, pass) {
        (None, Pass::Fwd) => vec![C(t.attn.0)],
        (None, Pass::Bwd) => vec![C(t.attn.1)],
        (Some(CpCommType::A2a), Pass::Fwd) => vec![
            C(t.qkv.0),
            a2a(s.a2a_qkv),
            C(t.core.0),
            a2a(s.a2a_out),
            C(t.proj.0),
        ],
        // Backward sends the output gradient alone (Transformer Engine ≥ 2.9 saves the
        // head-split output in forward), then returns dQ, dK, dV.
        (Some(CpCommType::A2a), Pass::Bwd) => vec![
            C(t.proj.1),
            a2a(s.a2a_out),
            C(t.core.1),
            a2a(s.a2a_qkv),
            C(t.qkv.1),
        ],
        // Hierarchical (Transformer Engine's `a2a+p2p`, `AttnFuncWithCPAndKVP2P` with two
        // groups): Q, K, V through an all-to-all inside each group of `cp_a2a` CP ranks,
        // the ring across the groups, the output back through the all-to-all; backward dO
        // in, the ring, dQ, dK, dV out.
        (Some(CpCommType::A2aP2p), Pass::Fwd) => vec![
            C(t.qkv.0),
            inner(s.a2a_qkv),
            LayerStep::CpRing {
                pass,
                core: t.core.0,
            },
            inner(s.a2a_out),
            C(t.proj.0),
        ],
        (Some(CpCommType::A2aP2p), Pass::Bwd) => vec![
            C(t.proj.1),
            inner(s.a2a_out),
            LayerStep::CpRing {
                pass,
                core: t.core.1,
            },
            inner(s.a2a_qkv),
            C(t.qkv.1),
        ],
        (Some(CpCommType::AllGather), Pass::Fwd) => {
            vec![C(t.qkv.0), cp_all(Ag), C(t.core.0), C(t.proj.0)]
        }
        // Backward gathers K and V again (forward keeps only the local chunk), then
        // reduce-scatters dK, dV.
        (Some(CpCommType::AllGather), Pass::Bwd) => {
            vec![C(t.proj.1), cp_all(Ag), C(t.core.1), cp_all(Rs), C(t.qkv.1)]
        }
        // p2p: ring attention.
        (Some(_), Pass::Fwd) => vec![
            C(t.qkv.0),
            LayerStep::CpRing {
                pass,
                core: t.core.0,
            },
            C(t.proj.0),
        ],
        (Some(_), Pass::Bwd) => vec![
            C(t.proj.1),
            LayerStep::CpRing {
                pass,
                core: t.core.1,
            },
            C(t.qkv.1),
        ],
    };
    tp_around(s, body, pass)
}

/// A column-parallel then row-parallel block's TP collectives around `body`: no SP, one
/// all-reduce after (forward) or after the input gradient (backward); SP, an all-gather
/// before and a reduce-scatter after (forward), and backward an all-gather of the output
/// gradient, the body, the input re-gathered for the weight gradient and a reduce-scatter.
fn tp_around(s: &Shape, body: Vec<LayerStep>, pass: Pass) -> Vec<LayerStep> {
    let mut v = Vec::with_capacity(body.len() + 3);
    match (s.has_tp(), s.sp, pass) {
        (false, _, _) => v.extend(body),
        (true, false, _) => {
            v.extend(body);
            v.push(Tp(Ar));
        }
        (true, true, Pass::Fwd) => {
            v.push(Tp(Ag));
            v.extend(body);
            v.push(Tp(Rs));
        }
        (true, true, Pass::Bwd) => {
            v.push(Tp(Ag));
            v.extend(body);
            v.extend([Tp(Ag), Tp(Rs)]);
        }
    }
    v
}

fn pick(t: (Nanos, Nanos), pass: Pass) -> Nanos {
    match pass {
        Pass::Fwd => t.0,
        Pass::Bwd => t.1,
    }
}

/// The dense MLP block.
fn mlp(s: &Shape, t: &Times, pass: Pass) -> Vec<LayerStep> {
    tp_around(s, vec![C(pick(t.mlp, pass))], pass)
}

/// The MoE block: shared experts, router, dispatch, experts, combine (forward order).
fn moe(s: &Shape, t: &Times, m: &MoeShape, pass: Pass) -> Vec<LayerStep> {
    let mut shared = Vec::new();
    if m.shared {
        shared = tp_around(s, vec![C(pick(t.shared, pass))], pass);
    }
    let coll = |kind, group, bytes| LayerStep::Coll { kind, group, bytes };
    let a2a = |sizes| LayerStep::AllToAll {
        group: GroupKind::Ep,
        sizes,
    };
    let mut experts = Vec::new();
    match m.dispatcher {
        MoeDispatcher::AllGather => {
            let sz = StepBytes::Fixed(m.allgather_bytes);
            if m.etp_ep > 1 {
                experts.push(coll(Ag, GroupKind::ExpertTpEp, sz));
            }
            experts.push(LayerStep::Experts(pass));
            if m.etp_ep > 1 {
                experts.push(coll(Rs, GroupKind::ExpertTpEp, sz));
            }
        }
        _ => {
            // Forward: dispatch then combine. Backward: combine's gradient travels the
            // dispatch way and dispatch's the combine way — the same two patterns again.
            experts.push(a2a(A2aSizes::Dispatch));
            if m.etp > 1 {
                experts.push(coll(Ag, GroupKind::ExpertTp, StepBytes::ExpertTokens));
            }
            experts.push(LayerStep::Experts(pass));
            if m.etp > 1 {
                experts.push(coll(Rs, GroupKind::ExpertTp, StepBytes::ExpertTokens));
            }
            experts.push(a2a(A2aSizes::Combine));
        }
    }
    let router = C(pick(t.router, pass));
    let mut v = Vec::new();
    match pass {
        Pass::Fwd => {
            v.extend(shared);
            v.push(router);
            v.extend(experts);
        }
        Pass::Bwd => {
            v.extend(experts);
            v.push(router);
            v.extend(shared);
        }
    }
    v
}

/// What shapes a MoE block.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MoeShape {
    pub dispatcher: MoeDispatcher,
    pub etp: u32,
    /// Expert TP × EP.
    pub etp_ep: u32,
    pub shared: bool,
    /// The all-gather dispatcher's gathered tokens: `ETP·EP·T·h` elements.
    pub allgather_bytes: Bytes,
}

/// Full recomputation prepends the forward to the backward; zero computes are dropped
/// (tiny models) so the op chain has no empty records.
fn finish(s: &Shape, fwd: Vec<LayerStep>, bwd: Vec<LayerStep>) -> (Vec<LayerStep>, Vec<LayerStep>) {
    let mut bwd = bwd;
    if s.recompute {
        let mut b = fwd.clone();
        b.extend(bwd);
        bwd = b;
    }
    let keep = |v: Vec<LayerStep>| -> Vec<LayerStep> {
        v.into_iter()
            .filter(|st| !matches!(st, C(Nanos(0))))
            .collect()
    };
    (keep(fwd), keep(bwd))
}

/// Forward and backward steps of a dense layer.
pub(crate) fn dense_layer(s: &Shape, t: &Times) -> (Vec<LayerStep>, Vec<LayerStep>) {
    let mut fwd = attention(s, t, Pass::Fwd);
    fwd.extend(mlp(s, t, Pass::Fwd));
    let mut bwd = mlp(s, t, Pass::Bwd);
    bwd.extend(attention(s, t, Pass::Bwd));
    finish(s, fwd, bwd)
}

/// Forward and backward steps of a MoE layer.
pub(crate) fn moe_layer(s: &Shape, t: &Times, m: &MoeShape) -> (Vec<LayerStep>, Vec<LayerStep>) {
    let mut fwd = attention(s, t, Pass::Fwd);
    fwd.extend(moe(s, t, m, Pass::Fwd));
    let mut bwd = moe(s, t, m, Pass::Bwd);
    bwd.extend(attention(s, t, Pass::Bwd));
    finish(s, fwd, bwd)
}

/// The embedding's TP collective (vocabulary-parallel lookup): an all-reduce of the
/// output without SP, a reduce-scatter into the sequence-parallel layout with SP, whose
/// backward is an all-gather.
pub(crate) fn embedding(s: &Shape) -> (Vec<LayerStep>, Vec<LayerStep>) {
    match (s.has_tp(), s.sp) {
        (false, _) => (vec![], vec![]),
        (true, false) => (vec![Tp(Ar)], vec![]),
        (true, true) => (vec![Tp(Rs)], vec![Tp(Ag)]),
    }
}

/// The LM head (column-parallel, vocabulary split over TP) and the vocabulary-parallel
/// cross-entropy's three all-reduces (max logit, target logit, sum of exponentials).
pub(crate) fn head(s: &Shape, t: &Times) -> (Vec<LayerStep>, Vec<LayerStep>) {
    let mut fwd = Vec::new();
    let mut bwd = Vec::new();
    if s.has_tp() && s.sp {
        fwd.push(Tp(Ag));
    }
    fwd.push(C(t.head.0));
    if s.has_tp() {
        for _ in 0..3 {
            fwd.push(LayerStep::Coll {
                kind: Ar,
                group: GroupKind::Tp,
                bytes: StepBytes::Fixed(s.ce_bytes),
            });
        }
    }
    bwd.push(C(t.head.1));
    match (s.has_tp(), s.sp) {
        (false, _) => {}
        (true, false) => bwd.push(Tp(Ar)),
        (true, true) => bwd.extend([Tp(Ag), Tp(Rs)]),
    }
    let keep = |v: Vec<LayerStep>| -> Vec<LayerStep> {
        v.into_iter()
            .filter(|st| !matches!(st, C(Nanos(0))))
            .collect()
    };
    (keep(fwd), keep(bwd))
}
