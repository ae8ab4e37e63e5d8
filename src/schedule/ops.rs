//! The op vocabulary of a workload: the collectives, the groups they run over, the steps
//! of a layer and the DP gradient buckets. Plain data, shared by the files that build the
//! workload and by the stages after it.

use super::pipeline::Pass;
use crate::units::{Bytes, Nanos};
use serde::{Deserialize, Serialize};
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
    /// All-to-all: each rank holds S bytes and sends a part to every other member.
    AllToAll,
}

impl CollKind {
    /// nccl-tests bus-bandwidth factor: busbw = algbw × this (`2(n−1)/n` for all-reduce,
    /// `(n−1)/n` for the others, all-to-all included).
    pub fn busbw_factor(self, n: u32) -> f64 {
        let n = n.max(1) as f64;
        match self {
            CollKind::AllReduce => 2.0 * (n - 1.0) / n,
            CollKind::AllGather | CollKind::ReduceScatter | CollKind::AllToAll => (n - 1.0) / n,
        }
    }
}

crate::keyword::keyword_enum!(CollKind, "collective", CollKind::AllReduce => "all-reduce", CollKind::AllGather => "all-gather", CollKind::ReduceScatter => "reduce-scatter", CollKind::AllToAll => "all-to-all");

/// The group a layer step runs over, for a rank of the stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GroupKind {
    /// The dense tensor-parallel group.
    Tp,
    /// The context-parallel group.
    Cp,
    /// The expert-parallel group.
    Ep,
    /// The expert tensor-parallel group.
    ExpertTp,
    /// The expert TP × EP group (the all-gather dispatcher's domain).
    ExpertTpEp,
}

/// The size of a [`LayerStep::Coll`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum StepBytes {
    /// The same for every group.
    Fixed(Bytes),
    /// The expert-TP all-gather of the tokens an EP rank received:
    /// [`MoePlan::etp_gather_bytes`](crate::schedule::MoePlan::etp_gather_bytes) at the
    /// rank's EP index.
    ExpertTokens,
}

/// Who sends what in an all-to-all step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum A2aSizes {
    /// Each member holds the same buffer S and sends S/n to every member (Ulysses).
    Even(Bytes),
    /// MoE dispatch: every member sends
    /// [`MoePlan::dispatch_bytes`](crate::schedule::MoePlan::dispatch_bytes)`[j]` to member
    /// `j` (members in EP-index order).
    Dispatch,
    /// MoE combine (the transpose): member `i` sends `dispatch_bytes[i]` to every member.
    Combine,
    /// Hierarchical CP (`a2a+p2p`): an even all-to-all of buffer S inside each group of
    /// [`CpPlan::a2a_size`](crate::schedule::CpPlan::a2a_size) consecutive CP ranks of the CP
    /// group (Megatron's level-0 hierarchical groups).
    CpInner(Bytes),
}

/// One all-to-all a layer step runs over (part of) a group: its members and who sends what
/// ([`Workload::a2a_parts`](crate::schedule::Workload::a2a_parts)).
#[derive(Clone, Debug, PartialEq)]
pub struct A2aPart {
    /// Members, in the order the sizes index them.
    pub members: Vec<crate::units::Rank>,
    pub(super) sizes: PartSizes,
}

#[derive(Clone, Debug, PartialEq)]
pub(super) enum PartSizes {
    /// Member `i` sends `S/n` (split exactly) to every member.
    Even(Bytes),
    /// Member `i` sends `b[j]` to member `j`.
    ToReceiver(Vec<Bytes>),
    /// Member `i` sends `b[i]` to every member.
    FromSender(Vec<Bytes>),
}

impl A2aPart {
    /// Bytes member `i` sends to member `j`.
    pub fn size(&self, i: usize, j: usize) -> Bytes {
        let at = |b: &[Bytes], k: usize| b.get(k).copied().unwrap_or(Bytes(0));
        match &self.sizes {
            PartSizes::Even(total) => {
                let n = self.members.len() as u64;
                let j = j as u64;
                Bytes(total.0 / n + u64::from(j < total.0 % n))
            }
            PartSizes::ToReceiver(b) => at(b, j),
            PartSizes::FromSender(b) => at(b, i),
        }
    }
}

/// One step of a layer's forward or backward on every rank of the stage.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum LayerStep {
    /// GPU computation.
    Compute(Nanos),
    /// A dense TP collective of [`Workload::tp_bytes`](crate::schedule::Workload::tp_bytes).
    Tp(CollKind),
    /// A collective of `bytes` over each group of kind `group`.
    Coll {
        /// Primitive.
        kind: CollKind,
        /// Group.
        group: GroupKind,
        /// Size S.
        bytes: StepBytes,
    },
    /// An all-to-all over each group of kind `group`.
    AllToAll {
        /// Group.
        group: GroupKind,
        /// Per-pair sizes.
        sizes: A2aSizes,
    },
    /// Ring attention over the CP group: `core` is the attention-core compute of the pass,
    /// split into CP parts that overlap the K/V (and, backward, dK/dV) exchanges with the
    /// ring neighbours ([`CpPlan`](crate::schedule::CpPlan)).
    CpRing {
        /// Forward or backward.
        pass: Pass,
        /// Attention-core compute of the whole pass.
        core: Nanos,
    },
    /// The experts' computation, per EP rank
    /// ([`MoePlan::expert_fwd`](crate::schedule::MoePlan::expert_fwd) / `expert_bwd`).
    Experts(Pass),
}

/// Which ranks a DP bucket is reduced over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GradGroup {
    /// Dense parameters: the DP×CP group.
    DataContext,
    /// Expert parameters: the expert data-parallel group.
    ExpertData,
}

/// One DP gradient bucket of a stage.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bucket {
    /// Model chunk whose gradients it holds.
    pub chunk: u32,
    /// The (global) layer whose backward in the chunk's last micro-batch completes the
    /// bucket (with `overlap_grad_reduce`). `None`: after the stage's last backward.
    pub trigger_layer: Option<u32>,
    /// Parameters per GPU.
    pub params: u64,
    /// Gradient bytes reduced.
    pub grad_bytes: Bytes,
    /// Parameter bytes gathered afterwards (distributed optimizer only, else 0).
    pub param_bytes: Bytes,
    /// Group it is reduced over.
    pub group: GradGroup,
}
