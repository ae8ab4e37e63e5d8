//! Lowering one collective onto the cluster: the one place where a ring, a double binary
//! tree, halving-doubling, the hierarchical algorithm, an INA tree, Rina, an all-to-all,
//! ring attention, NVLink records and NCCL channels turn into transfers.
//!
//! A lowering yields its transfers ([`Xfer`]: sender, receiver, bytes, the transfers it
//! waits for, the NCCL channel, the aggregation it belongs to) into a [`Sink`]. Two sinks
//! consume them:
//! - the trace generator (`crate::trace::gen`), which makes each transfer a record of the
//!   trace, its dependencies joined to every rank's chain of compute and earlier traffic;
//! - the planner's pricer (`crate::plan::price`), which records the transfers of one
//!   collective alone and prices them per channel, on the paths the replay routes them on
//!   ([`crate::topology::Routing::channel_path`]).
//!
//! So the planner prices exactly what the trace of a plan holds. What a lowering needs of
//! its sink is the rank's *chain* ([`Chain`]: the transfers its next one must wait for and
//! compute not yet attached to a record) and a way to emit.
//!
//! **Adding a collective**: write `fn algo<S: Sink>(&self, sink, kind, bytes, members,
//! coll)` in a new file of this module, in the shape of [`Lowering::ring`] (or
//! `swing.rs`) — start each member from its chain ([`Sink::start`]), emit each step's
//! transfers with [`Lowering::p2p`] depending on what the step needs, and leave each
//! member's chain on the transfers its completion waits for — add a variant to
//! [`Algorithm`] and one arm to [`Lowering::host_algorithm`]. The trace generator and the
//! planner then both have it; `docs/model.md` documents the schedule of each algorithm.

mod a2a;
mod channels;
mod cp;
mod host;
mod ina;
mod nvlink;
mod swing;

pub use channels::{default_channels, slice};
pub use cp::RingAttention;
pub use host::ring_steps;
pub use ina::{rina_racks, RinaRacks};
pub use nvlink::{nvlink_collective_time, NCCL_NVLINK_RING_STEP};
pub use swing::{
    peer as swing_peer, rho as swing_rho, schedule as swing_schedule, Step as SwingStep,
};

use crate::record::{AggTag, Mode};
use crate::topology::Topology;
use crate::units::{Bytes, Nanos, NodeId};

pub use crate::collective::Algorithm;

/// A rank's chain: the transfers its next action waits for (`tail`) and compute not yet
/// attached to a record (`pending`, the next transfer's gap unless an external dependency
/// forces it into a compute record first).
#[derive(Clone, Debug)]
pub struct Chain<Id> {
    /// What the rank's next action waits for.
    pub tail: Vec<Id>,
    /// Compute since then.
    pub pending: Nanos,
}

impl<Id> Default for Chain<Id> {
    fn default() -> Self {
        Chain {
            tail: Vec::new(),
            pending: Nanos(0),
        }
    }
}

/// One transfer of a lowering (or an analytical NVLink / compute step).
#[derive(Clone, Debug, PartialEq)]
pub struct Xfer<Id> {
    /// Sender (a GPU, or a switch for INA down edges and Rina's ToR workers).
    pub src: NodeId,
    /// Receiver.
    pub dst: NodeId,
    /// Payload bytes.
    pub bytes: Bytes,
    /// What it waits for.
    pub deps: Vec<Id>,
    /// Compute after its last dependency before it may start.
    pub gap: Nanos,
    /// Fixed duration (NVLink and compute records), 0 for network transfers.
    pub dur: Nanos,
    /// Network flow, INA edge, NVLink record or compute.
    pub mode: Mode,
    /// Collective instance.
    pub coll: Option<u64>,
    /// Algorithm step.
    pub step: Option<u32>,
    /// Members of the collective an INA edge or NVLink record belongs to.
    pub group: Option<u32>,
    /// Aggregation of an INA edge.
    pub agg: Option<AggTag>,
    /// NCCL channel of a network flow (0 for every other mode).
    pub channel: u32,
}

impl<Id> Xfer<Id> {
    /// A transfer of `mode` from `src` to `dst` in collective `coll`, after `deps` and
    /// `gap`: no fixed duration, step, group or aggregation, channel 0.
    pub fn new(
        mode: Mode,
        (src, dst): (NodeId, NodeId),
        bytes: Bytes,
        deps: Vec<Id>,
        gap: Nanos,
        coll: Option<u64>,
    ) -> Self {
        Xfer {
            src,
            dst,
            bytes,
            deps,
            gap,
            dur: Nanos(0),
            mode,
            coll,
            step: None,
            group: None,
            agg: None,
            channel: 0,
        }
    }

    /// A compute record of `dur` on `node` after `deps`.
    pub fn compute(node: NodeId, deps: Vec<Id>, dur: Nanos) -> Self {
        Xfer {
            dur,
            ..Xfer::new(Mode::Compute, (node, node), Bytes(0), deps, Nanos(0), None)
        }
    }
}

/// Events a lowering reports besides its transfers (the generator counts them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Note {
    /// Halving-doubling asked for on a group that is not a power of two: the ring ran.
    HdFallback,
}

/// Why a collective could not be lowered.
#[derive(Debug, thiserror::Error)]
pub enum LowerError {
    /// An aggregation tree without edges.
    #[error("aggregation tree of {0} members has no edges")]
    EmptyTree(usize),
    /// A tree's edges do not reach from the members up to one root and back.
    #[error("aggregation tree: {0}")]
    BadTree(String),
    /// Swing's all-gather view left a rank without a block (never for even counts up to
    /// 2¹⁶: tests/swing.rs).
    #[error("no Swing schedule for {0} ranks")]
    NoSwingSchedule(usize),
}

/// Where a lowering puts its transfers, and the ranks' chains it starts from and leaves.
pub trait Sink {
    /// A transfer's handle (what later transfers depend on).
    type Id: Copy + Ord;
    /// The sink's error (emitting may fail, e.g. writing a file).
    type Error: From<LowerError>;
    /// The chain of rank `r`.
    fn chain(&mut self, r: crate::units::Rank) -> &mut Chain<Self::Id>;
    /// Turn `r`'s pending compute into a record of its own, so a dependency from another
    /// rank can join the chain without serialising that compute after it.
    fn flush(&mut self, r: crate::units::Rank) -> Result<(), Self::Error>;
    /// Emit one transfer.
    fn emit(&mut self, x: Xfer<Self::Id>) -> Result<Self::Id, Self::Error>;
    /// A new collective instance's id.
    fn new_coll(&mut self) -> u64;
    /// A new aggregation's id.
    fn new_agg(&mut self) -> u64;
    /// Which gradients this sink's aggregations reduce: the lowering does not know whose
    /// collective it lowers, the sink does (a MoE model's expert-DP gradient stream).
    fn agg_group(&self) -> crate::record::AggGroup {
        crate::record::AggGroup::Dense
    }
    /// Something worth counting happened.
    fn note(&mut self, _n: Note) {}

    /// The dependencies and gap of `r`'s next transfer when it waits for nothing else:
    /// its chain's tail and pending compute, both taken.
    fn start(&mut self, r: crate::units::Rank) -> Result<(Vec<Self::Id>, Nanos), Self::Error> {
        let c = self.chain(r);
        Ok((std::mem::take(&mut c.tail), std::mem::take(&mut c.pending)))
    }

    /// Every member's pending compute made a record, then their chains' tails: what a
    /// collective whose parts all start together (channels, all-to-all pairs) starts from.
    fn flushed_tails(
        &mut self,
        members: &[crate::units::Rank],
    ) -> Result<Vec<Vec<Self::Id>>, Self::Error> {
        for &r in members {
            self.flush(r)?;
        }
        Ok(members
            .iter()
            .map(|&r| self.chain(r).tail.clone())
            .collect())
    }

    /// Replace `r`'s chain tail.
    fn set_tail(&mut self, r: crate::units::Rank, ids: &[Self::Id]) {
        let t = &mut self.chain(r).tail;
        t.clear();
        t.extend_from_slice(ids);
    }
}

/// The lowering context: the topology, NVLink's step latency, the NCCL channel count, and
/// while a collective is split over channels, the channel being lowered and how many
/// channels share each GPU's NVLink.
#[derive(Clone, Copy, Debug)]
pub struct Lowering<'t> {
    /// Topology.
    pub topo: &'t Topology,
    /// Latency α per algorithm step of an NVLink record.
    pub nvlink_alpha: Nanos,
    /// NCCL channels per network collective (per local GPU of the communicator when
    /// `per_local_gpu`).
    pub channels: u32,
    /// `channels` is NCCL's default count for one GPU's NICs ([`default_channels`]), so a
    /// communicator with several GPUs on a server uses that many per GPU
    /// ([`Lowering::channels_for`]); false when the count was given (`--nccl-channels`).
    pub per_local_gpu: bool,
    /// The channel being lowered (inside [`Lowering::over_channels`]).
    channel: u32,
    /// Channels sharing each GPU's NVLink right now (NVLink records made inside a
    /// channel get `1/share` of the NVLink rate).
    nvlink_share: u32,
}

impl<'t> Lowering<'t> {
    /// A context on `topo` with NVLink step latency `alpha` and `channels` NCCL channels.
    pub fn new(topo: &'t Topology, alpha: Nanos, channels: u32) -> Self {
        Lowering {
            topo,
            nvlink_alpha: alpha,
            channels,
            per_local_gpu: false,
            channel: 0,
            nvlink_share: 1,
        }
    }

    /// The context with NCCL's channel count: `configured` (`--nccl-channels`) as given, or
    /// by default [`default_channels`] per local GPU of each communicator.
    pub fn with_channels(topo: &'t Topology, alpha: Nanos, configured: Option<u32>) -> Self {
        Lowering {
            per_local_gpu: configured.is_none(),
            ..Lowering::new(
                topo,
                alpha,
                configured.unwrap_or_else(|| default_channels(topo)),
            )
        }
    }

    /// `x` on the channel being lowered, when it is a network flow.
    fn on_channel<Id>(&self, mut x: Xfer<Id>) -> Xfer<Id> {
        if x.mode == Mode::Net {
            x.channel = self.channel;
        }
        x
    }
}
