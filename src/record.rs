//! The records of a flow trace: the contract between trace generation and both back-ends.
//!
//! A trace is a DAG of records. A record becomes *ready* when all its `deps` have finished;
//! it *starts* `gap` later (compute time of its source rank that sits between the last
//! dependency and this transfer); it then lasts as its [`Mode`] says:
//!
//! - [`Mode::Net`]: a unicast transfer of `bytes` from `src` to `dst` over the network,
//!   routed by the topology's ECMP hash of its connection `(src, dst, channel)`
//!   ([`crate::topology::connection_key`]). Both back-ends simulate it.
//! - [`Mode::Ina`]: one edge of an in-network aggregation tree (`agg` set). All edges with
//!   the same aggregation id advance together as one unit (docs/model.md#trace-dag).
//! - [`Mode::NvLink`]: a whole collective confined to one NVLink domain, kept as a single
//!   record whose duration `dur` was computed analytically (bus bandwidth) at generation
//!   time; back-ends wait `dur` and move nothing on the network (docs/model.md#nvlink-records: keeping every
//!   NVLink ring step would be ~66 M records for GPT-3 175B).
//! - [`Mode::Compute`]: `dur` of computation on the GPU `src` (= `dst`), bytes 0.
//!
//! So both back-ends treat NVLink and compute identically by construction: a timer of `dur`.

use crate::keyword::keyword_enum;
use crate::units::{Bytes, FlowId, Nanos, NodeId};
use serde::{Deserialize, Serialize};

/// Payload bytes of one packet of a host (`net`) transfer, for wire-overhead accounting:
/// flowSim's 1,000 B (docs/model.md#wire-bytes). The replayer counts `size + ceil(size/1000)·48` wire
/// bytes and the ns-3 glue uses 1,000 B TCP segments, so both put the same bytes on a link.
/// INA packets carry the trace's slot payload instead (`ina_payload_bytes`).
pub const NET_PACKET_PAYLOAD: Bytes = Bytes(1000);

/// Header bytes per packet counted on the wire (flowSim's 48 B; the glue's INA packets carry
/// exactly this much, its TCP segments 54 B: TCP with timestamps, IPv4, PPP).
pub const PACKET_HEADER: Bytes = Bytes(48);

/// How a record consumes time (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Unicast network flow.
    Net,
    /// One edge of an INA aggregation tree.
    Ina,
    /// Intra-server collective with an analytical duration.
    NvLink,
    /// GPU computation.
    Compute,
}

/// Traffic class, the axis along which INA policies choose what to aggregate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Class {
    /// Tensor parallel (per-layer all-reduce / all-gather / reduce-scatter, layer-norm grads).
    Tp,
    /// Pipeline parallel point-to-point activations and gradients.
    Pp,
    /// Data-parallel gradient synchronisation (and parameter all-gather).
    Dp,
    /// Tied-embedding gradient all-reduce between first and last stage.
    Emb,
    /// Computation (not traffic).
    Compute,
    /// Context parallel: ring-attention K/V exchanges, Ulysses all-to-alls, K/V
    /// all-gathers (docs/model.md#context-parallelism).
    Cp,
    /// Expert parallel: MoE dispatch and combine all-to-alls, expert-TP and
    /// expert-TP×EP gathers (docs/model.md#expert-parallelism).
    Ep,
}

impl Class {
    /// All classes, in report order.
    pub const ALL: [Class; 7] = [
        Class::Tp,
        Class::Pp,
        Class::Dp,
        Class::Emb,
        Class::Compute,
        Class::Cp,
        Class::Ep,
    ];
    /// The traffic classes (what INA can be enabled for; all-to-alls and point-to-point
    /// transfers are never aggregated whatever their class).
    pub const TRAFFIC: [Class; 6] = [
        Class::Tp,
        Class::Pp,
        Class::Dp,
        Class::Emb,
        Class::Cp,
        Class::Ep,
    ];
}

keyword_enum!(Class, "traffic class", Class::Tp => "tp", Class::Pp => "pp", Class::Dp => "dp", Class::Emb => "emb", Class::Compute => "compute", Class::Cp => "cp", Class::Ep => "ep");
keyword_enum!(Mode, "mode", Mode::Net => "net", Mode::Ina => "ina", Mode::NvLink => "nvlink", Mode::Compute => "compute");

/// Direction of an INA tree edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AggDir {
    /// Towards the root: a worker (or child switch) sending its values to `switch` for summing.
    Up,
    /// Away from the root: `switch` multicasting the sum down to a worker (or child switch).
    Down,
}

keyword_enum!(AggDir, "aggregation direction", AggDir::Up => "up", AggDir::Down => "down");

/// Which gradients an aggregation reduces. A MoE model's expert-data-parallel group can
/// have exactly the members of a dense data-parallel group (expert TP 1, EP dividing DP:
/// docs/model.md#expert-parallelism) while it syncs other gradients at other times, so a
/// plan's slot reservation ([`crate::trace::Reservation`]) tells them apart by this.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum AggGroup {
    /// Every aggregation but a MoE model's expert gradients (TP, dense DP, embedding).
    #[default]
    Dense,
    /// A MoE model's expert gradients, over an expert-data-parallel group.
    Expert,
}

keyword_enum!(AggGroup, "aggregation group", AggGroup::Dense => "dense", AggGroup::Expert => "expert");

impl AggGroup {
    /// The group of a collective over an expert-DP group (`expert`) or any other.
    pub fn of_expert(expert: bool) -> Self {
        if expert {
            AggGroup::Expert
        } else {
            AggGroup::Dense
        }
    }

    /// How messages name the group before a class: `expert ` or nothing.
    pub fn prefix(self) -> &'static str {
        match self {
            AggGroup::Dense => "",
            AggGroup::Expert => "expert ",
        }
    }
}

/// Membership of a record in an in-network aggregation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AggTag {
    /// Aggregation id: all edges of one aggregation share it.
    pub id: u64,
    /// The aggregating switch of this edge (receiver of an up edge, sender of a down edge).
    pub switch: NodeId,
    /// How many children that switch sums for this aggregation.
    pub fanin: u32,
    /// Edge direction.
    pub dir: AggDir,
    /// Which gradients the aggregation reduces (dense or a MoE model's expert ones).
    pub group: AggGroup,
}

/// One record of the trace DAG.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlowRecord {
    /// Unique id; records are written in an order where every dep precedes its dependant.
    pub id: FlowId,
    /// Sender (GPU, or switch for INA down edges); the GPU itself for compute.
    pub src: NodeId,
    /// Receiver; equals `src` for compute.
    pub dst: NodeId,
    /// Payload bytes (no headers). 0 for compute.
    pub bytes: Bytes,
    /// Records that must finish before this one is ready.
    pub deps: Vec<FlowId>,
    /// Compute time between readiness and start.
    pub gap: Nanos,
    /// Fixed duration for `NvLink` and `Compute` records; 0 otherwise.
    pub dur: Nanos,
    /// How the record consumes time.
    pub mode: Mode,
    /// Traffic class.
    pub class: Class,
    /// Iteration index (0-based).
    pub iteration: u32,
    /// Collective instance id (shared by all flows of one collective), if any.
    pub collective: Option<u64>,
    /// Algorithm step within the collective.
    pub step: Option<u32>,
    /// Micro-batch.
    pub microbatch: Option<u32>,
    /// Transformer layer (global, 0-based).
    pub layer: Option<u32>,
    /// Pipeline stage of the sender.
    pub stage: Option<u32>,
    /// Number of ranks in the collective (NVLink records: its group size).
    pub group_size: Option<u32>,
    /// INA membership.
    pub agg: Option<AggTag>,
    /// NCCL channel of a `net` record (0 for every other mode): channel `c` of a
    /// connection is its own connection, routed with its own ECMP key
    /// ([`crate::topology::connection_key`]`(src, dst, c)`).
    pub channel: u32,
}

impl Default for FlowRecord {
    /// A zero-length compute record on node 0 with no deps and no tags: the base for
    /// struct-update syntax, so code that builds records spells only the fields it sets.
    fn default() -> Self {
        FlowRecord {
            id: FlowId(0),
            src: NodeId(0),
            dst: NodeId(0),
            bytes: Bytes::ZERO,
            deps: Vec::new(),
            gap: Nanos::ZERO,
            dur: Nanos::ZERO,
            mode: Mode::Compute,
            class: Class::Compute,
            iteration: 0,
            collective: None,
            step: None,
            microbatch: None,
            layer: None,
            stage: None,
            group_size: None,
            agg: None,
            channel: 0,
        }
    }
}
