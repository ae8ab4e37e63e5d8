//! Cluster topologies, GPU placement and routing.
//!
//! A [`Topology`] is an undirected multigraph of nodes (GPU hosts, switches, NVSwitches)
//! joined by full-duplex [`Link`]s, numbered the way HPCC's `topology.txt` numbers them so
//! that emitted files and our own simulator agree on every id. GPUs are placed in Megatron
//! rank order: rank `r` lives on `gpus[r]`, server `r / gpus_per_server`.
//!
//! Public entry: [`Topology::from_spec`] (a builder spec such as `fat-tree:k=8` or a path
//! to an HPCC `topology.txt`), then [`Routing::new`] for ECMP paths and INA aggregation
//! trees ([`Routing::aggregation_tree`]).
//!
//! Numbering (the same as SimAI's generated topologies, so files we write are the files
//! its users know): GPUs `0..G` in rank order, then one NVSwitch per server (when the
//! NVLink domain is on), then packet switches from the bottom layer up (ToRs/leaves,
//! then aggregation, then core/spine).

mod build;
pub use build::STANDARD_RATES;
mod dcell;
mod error;
mod families;
mod file;
mod graph;
mod routing;
mod spec;

pub use error::TopologyError;
pub use routing::{
    connection_key, ecmp_choice, ecmp_hash, pair_key, AggEdge, AggTree, Routing, RoutingMode,
    Spray, TreeShape, MAX_ROOTS, MAX_STRANDS,
};

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

/// The routing family of a topology: which rule the one router ([`Routing`]) applies, with
/// the few structural facts the rule needs (docs/model.md#routing). Builders set it;
/// topologies read from a file are [`Fabric::Clos`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "family", rename_all = "kebab-case")]
pub enum Fabric {
    /// Shortest paths with ECMP per connection; only switches forward (fat-tree,
    /// leaf-spine, rail, dual-plane, any file).
    #[default]
    Clos,
    /// Jellyfish (NSDI'12): one of the `paths` shortest loopless switch paths (Yen), picked
    /// per connection by the ECMP hash.
    Jellyfish {
        /// k of the k shortest paths.
        paths: u32,
    },
    /// Dragonfly (ISCA'08): `groups` groups of `routers` routers (routers numbered group
    /// by group); minimal routing (local, global, local) or Valiant's through an
    /// intermediate group picked by the ECMP hash.
    Dragonfly {
        /// Number of groups.
        groups: u32,
        /// Routers per group.
        routers: u32,
        /// Valiant routing instead of minimal.
        valiant: bool,
    },
    /// k-ary n-cube with wrap-around, one router per node (routers numbered with the first
    /// dimension fastest); dimension-order routing.
    Torus {
        /// The size of every dimension.
        dims: Vec<u32>,
    },
    /// BCube(n, k) (SIGCOMM'09): servers relay; source routing corrects one address digit
    /// per hop, starting at a digit picked by the ECMP hash (the k+1 parallel paths).
    BCube {
        /// Switch ports (digit base).
        n: u32,
        /// Levels above 0.
        k: u32,
    },
    /// DCell(n, k) (SIGCOMM'08): servers relay; DCellRouting through the link that joins
    /// the two sub-DCells.
    DCell {
        /// Servers per DCell_0.
        n: u32,
        /// Levels.
        k: u32,
    },
    /// Switchless direct connect (TopoOpt, NSDI'23): servers relay; shortest paths over
    /// servers with ECMP per connection.
    Direct,
}

impl Fabric {
    /// Whether hosts forward other hosts' traffic (server-centric and direct-connect fabrics).
    pub fn hosts_relay(&self) -> bool {
        matches!(
            self,
            Fabric::BCube { .. } | Fabric::DCell { .. } | Fabric::Direct
        )
    }
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
    /// How the one router routes it.
    #[serde(default)]
    pub fabric: Fabric,
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
    /// True when every rank of `members` lives in one NVLink domain (one server of a
    /// topology with NVLink): the one rule by which a transfer or a collective goes over
    /// NVLink rather than the network.
    pub fn one_nvlink_domain(&self, members: &[Rank]) -> bool {
        self.nvlink_rate.is_some()
            && members
                .iter()
                .all(|r| self.server_of(*r) == self.server_of(members[0]))
    }
    /// True when both ranks share one NVLink domain ([`Topology::one_nvlink_domain`]).
    pub fn same_nvlink_domain(&self, a: Rank, b: Rank) -> bool {
        self.one_nvlink_domain(&[a, b])
    }

    /// All hosts (GPUs with their NIC), ascending id.
    pub fn hosts(&self) -> Vec<NodeId> {
        self.nodes_of(NodeKind::Host)
    }
    /// All packet switches (not NVSwitches), ascending id.
    pub fn switches(&self) -> Vec<NodeId> {
        self.nodes_of(NodeKind::Switch)
    }
    /// All NVSwitches, ascending id.
    pub fn nvswitches(&self) -> Vec<NodeId> {
        self.nodes_of(NodeKind::NvSwitch)
    }
    fn nodes_of(&self, k: NodeKind) -> Vec<NodeId> {
        (0..self.kinds.len() as u32)
            .map(NodeId)
            .filter(|n| self.kinds[n.idx()] == k)
            .collect()
    }
    /// Kind of a node, `None` when the id is out of range.
    pub fn kind(&self, n: NodeId) -> Option<NodeKind> {
        self.kinds.get(n.idx()).copied()
    }
    /// The channels leaving `n` with the node each reaches, in ascending channel order
    /// (every link kind, NVLink included). O(links); use [`Topology::adjacency`] in loops.
    pub fn neighbors(&self, n: NodeId) -> Vec<(Channel, NodeId)> {
        let mut out = Vec::new();
        for (i, l) in self.links.iter().enumerate() {
            let id = LinkId(i as u32);
            if l.a == n {
                out.push((Channel::of(id, true), l.b));
            }
            if l.b == n && l.a != n {
                out.push((Channel::of(id, false), l.a));
            }
        }
        out
    }
    /// For every node, the channels leaving it and the node at their far end, ascending
    /// channel order (every link kind, NVLink included).
    pub fn adjacency(&self) -> Vec<Vec<(Channel, NodeId)>> {
        let mut adj = vec![Vec::new(); self.kinds.len()];
        for (i, l) in self.links.iter().enumerate() {
            let id = LinkId(i as u32);
            if let Some(v) = adj.get_mut(l.a.idx()) {
                v.push((Channel::of(id, true), l.b));
            }
            if let Some(v) = adj.get_mut(l.b.idx()) {
                v.push((Channel::of(id, false), l.a));
            }
        }
        adj
    }
    /// The (from, to) nodes of one direction of a link. Panics on an out-of-range channel
    /// (channels come from this topology's own routing).
    pub fn channel_ends(&self, c: Channel) -> (NodeId, NodeId) {
        let l = &self.links[c.link().idx()];
        if c.0.is_multiple_of(2) {
            (l.a, l.b)
        } else {
            (l.b, l.a)
        }
    }
    /// [`Topology::server_of_node`] in constant time where GPU `r` is node `r` (every
    /// builder numbers hosts first), for a check run on every record.
    pub fn server_of_gpu(&self, n: NodeId) -> Option<u32> {
        if self.gpus.get(n.idx()) == Some(&n) {
            return Some(self.server_of(Rank(n.0)));
        }
        self.server_of_node(n)
    }

    /// How many packet switches a transfer from `src` along `path` touches: `src` itself
    /// when it is a switch (an INA down edge leaves its aggregating switch), then every
    /// switch a channel of the path enters (the last one too, when an INA up edge ends at
    /// its switch). `switch_bytes` of a [`crate::fct::Summary`] is Σ payload × this over
    /// network records; both back-ends count with this one function, on the paths their
    /// packets take.
    pub fn switch_hops(&self, src: NodeId, path: &[Channel]) -> u64 {
        let is_switch = |v: NodeId| self.kind(v) == Some(NodeKind::Switch);
        u64::from(is_switch(src))
            + path
                .iter()
                .filter(|&&c| is_switch(self.channel_ends(c).1))
                .count() as u64
    }
    /// The server (NVLink domain) of a GPU node, `None` when `n` is not a GPU of `gpus`.
    pub fn server_of_node(&self, n: NodeId) -> Option<u32> {
        self.gpus
            .iter()
            .position(|&g| g == n)
            .map(|r| self.server_of(Rank(r as u32)))
    }

    /// Check that a job of `world` GPUs with tensor-parallel size `tp` fits: no more GPUs
    /// than hosts, and — when servers have an NVLink domain — TP groups that neither
    /// exceed a server nor straddle two (Megatron places ranks in order, so a TP group
    /// stays inside a server exactly when `tp` divides `gpus_per_server`). Topologies
    /// without NVLink (every GPU a plain host, e.g. HPCC's `fat.txt`) allow any `tp`:
    /// TP traffic then crosses the network, which is what such a topology models.
    pub fn check_world(&self, world: u32, tp: u32) -> Result<(), TopologyError> {
        let hosts = self.gpus.len() as u32;
        if world == 0 || tp == 0 {
            return Err(TopologyError::World(format!(
                "world size {world} and tensor-parallel size {tp} must both be at least 1"
            )));
        }
        if world > hosts {
            return Err(TopologyError::World(format!(
                "the job needs {world} GPUs but topology `{}` has only {hosts} hosts",
                self.source
            )));
        }
        if !world.is_multiple_of(tp) {
            return Err(TopologyError::World(format!(
                "world size {world} is not a multiple of tensor-parallel size {tp}"
            )));
        }
        if self.nvlink_rate.is_some() {
            let gps = self.gpus_per_server;
            if tp > gps {
                return Err(TopologyError::World(format!(
                    "tensor-parallel size {tp} is larger than a server of {gps} GPUs \
                     (topology `{}` has an NVLink domain per server; TP groups must stay inside one)",
                    self.source
                )));
            }
            if !gps.is_multiple_of(tp) {
                return Err(TopologyError::World(format!(
                    "tensor-parallel size {tp} does not divide the {gps} GPUs of a server, \
                     so rank-order placement would split a TP group across two servers"
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switch_hops_count_a_sending_switch_and_every_switch_entered() {
        // host 0 — switch 2 — host 1; an INA up edge 0→2 touches 2, a down edge 2→1 too,
        // a host-to-host flow 0→1 crosses 2 once.
        let t = Topology::from_spec("leaf-spine:leaves=1,spines=1,hosts-per-leaf=2,nvlink=off")
            .unwrap();
        let r = Routing::new(&t, 0).unwrap();
        let leaf = t.switches()[0];
        let (h0, h1) = (t.gpus[0], t.gpus[1]);
        assert_eq!(t.switch_hops(h0, &r.connection_path(h0, h1).unwrap()), 1);
        assert_eq!(t.switch_hops(h0, &r.connection_path(h0, leaf).unwrap()), 1);
        assert_eq!(
            t.switch_hops(leaf, &r.connection_path(leaf, h1).unwrap()),
            1
        );
        let spine = t.switches()[1];
        assert_eq!(
            t.switch_hops(spine, &r.connection_path(spine, h1).unwrap()),
            2
        );
    }
}
