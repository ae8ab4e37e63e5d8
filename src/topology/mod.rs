//! Cluster topologies, GPU placement and routing.
//!
//! A [`Topology`] is an undirected multigraph of nodes (GPU hosts, switches, NVSwitches)
//! joined by full-duplex [`Link`]s, numbered the way HPCC's `topology.txt` numbers them so
//! that emitted files and our own simulator agree on every id. GPUs are placed in Megatron
//! rank order: rank `r` lives on `gpus[r]`, server `r / gpus_per_server`.
//!
//! Public entry: [`Topology::from_spec`] (a builder spec such as `fat-tree:k=8` or a path
//! to an HPCC `topology.txt`), then [`Routing::new`] for ECMP paths.

use crate::units::{BitsPerSec, LinkId, Nanos, NodeId, Rank};
use serde::{Deserialize, Serialize};

/// What a node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeKind {
    /// A GPU with its NIC (an HPCC "host").
    Host,
    /// A packet switch (ToR/leaf, aggregation, spine/core). Only these may aggregate (INA).
    Switch,
    /// An NVSwitch inside a server (SimAI's third node kind).
    NvSwitch,
}

/// What a link is, so back-ends can treat NVLink differently from the network.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkKind {
    /// GPU NIC to its first switch.
    Nic,
    /// Switch to switch.
    Fabric,
    /// GPU to NVSwitch inside a server.
    NvLink,
}

/// A full-duplex link: each direction has the full `rate`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Link {
    /// One end.
    pub a: NodeId,
    /// The other end.
    pub b: NodeId,
    /// Rate of each direction.
    pub rate: BitsPerSec,
    /// One-way propagation delay.
    pub delay: Nanos,
    /// HPCC's error-rate column, kept so a read topology is written back unchanged.
    pub error_rate: f64,
    /// What the link connects.
    pub kind: LinkKind,
}

/// One direction of a link: `2·link` is a→b, `2·link+1` is b→a. Simulators keep per-direction state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Channel(pub u32);

impl Channel {
    /// The channel of `link` leaving `from`.
    pub fn of(link: LinkId, from_a: bool) -> Self {
        Channel(link.0 * 2 + u32::from(!from_a))
    }
    /// The underlying link.
    pub fn link(self) -> LinkId {
        LinkId(self.0 / 2)
    }
    /// Index into a dense per-channel table.
    pub fn idx(self) -> usize {
        self.0 as usize
    }
}

/// A built or loaded cluster.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Topology {
    /// Kind of every node, indexed by `NodeId`.
    pub kinds: Vec<NodeKind>,
    /// All links.
    pub links: Vec<Link>,
    /// GPU placement in rank order: rank `r` is node `gpus[r]`.
    pub gpus: Vec<NodeId>,
    /// GPUs per server (the NVLink domain size); 1 when the topology has no NVLink.
    pub gpus_per_server: u32,
    /// Per-GPU NVLink bandwidth when servers have an NVLink domain.
    pub nvlink_rate: Option<BitsPerSec>,
    /// The spec or file it came from, for provenance in trace headers.
    pub source: String,
}

impl Topology {
    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.kinds.len()
    }
    /// The node hosting a rank.
    pub fn gpu(&self, r: Rank) -> NodeId {
        self.gpus[r.idx()]
    }
    /// Server index of a rank (rank order placement).
    pub fn server_of(&self, r: Rank) -> u32 {
        r.0 / self.gpus_per_server.max(1)
    }
    /// True when both ranks share one NVLink domain.
    pub fn same_nvlink_domain(&self, a: Rank, b: Rank) -> bool {
        self.nvlink_rate.is_some() && self.server_of(a) == self.server_of(b)
    }
}
