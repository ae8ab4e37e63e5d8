//! Deterministic ECMP routing over the network links of a [`Topology`], and INA
//! aggregation trees built from those routes.
//!
//! Only network links ([`LinkKind::Nic`], [`LinkKind::Fabric`]) carry routed traffic and
//! only switches forward: a path never crosses NVLink, an NVSwitch or a third host.
//!
//! **Precomputation.** Hosts with the same set of attached switches (all hosts under one
//! ToR, say) have the same distance from every switch, so one breadth-first search per
//! such *attachment group* gives every switch its distance to those hosts and its set of
//! shortest next hops. A path query then walks the table: O(hops), no allocation beyond
//! the returned path. Memory: groups × switches × 6 bytes plus the distinct next-hop
//! lists (interned, shared by all groups) — for a 1,024-host fat-tree (k=16: 128 ToRs,
//! 320 switches) about 250 kB; for 16,000 hosts (k=40) about 10 MB.
//!
//! **ECMP.** Among the equal-cost next hops of node `v` (ascending [`Channel`] id), the
//! flow with key `key` takes index [`ecmp_choice`]`(seed, key, v, n)`. The functions are
//! specified bit for bit below so the ns-3 glue can reproduce every path.
//!
//! **Modes.** That is the default, [`RoutingMode::Ecmp`]; under `dmodk` and `spray` every
//! such choice goes through the mode's rule instead (`routing/mode.rs`).

use super::{Channel, Fabric, LinkKind, NodeKind, Topology, TopologyError};
use crate::units::{BitsPerSec, LinkId, Nanos, NodeId};
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

mod general;
use general::General;
mod mode;
mod trees;
use mode::Pick;
pub use mode::{RoutingMode, Spray, MAX_STRANDS};
pub use trees::{TreeShape, MAX_ROOTS};

const NONE: u32 = u32::MAX;
use super::graph::{self, FAR};

/// SplitMix64's finaliser (Steele, Lea, Flood 2014): a cheap bijective 64-bit mixer.
#[inline]
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The seeded flow hash: `splitmix64(seed ^ splitmix64(key))`, where `splitmix64(x)` adds
/// `0x9E3779B97F4A7C15` (wrapping) then applies `z ^= z>>30; z *= 0xBF58476D1CE4E5B9;
/// z ^= z>>27; z *= 0x94D049BB133111EB; z ^= z>>31`. Pure and platform-independent.
#[inline]
pub fn ecmp_hash(seed: u64, key: u64) -> u64 {
    splitmix64(seed ^ splitmix64(key))
}

/// Which of `n` equal-cost next hops a flow with `key` takes at `node`:
/// `(ecmp_hash(seed, key ^ splitmix64(node)) · n) >> 64` (a multiply-shift, so every index
/// is equally likely without the bias of `%`). Salting with the node decorrelates the
/// choices of successive hops (no ECMP polarisation). `n == 0` gives 0.
#[inline]
pub fn ecmp_choice(seed: u64, key: u64, node: NodeId, n: usize) -> usize {
    let h = ecmp_hash(seed, key ^ splitmix64(node.0 as u64));
    ((h as u128 * n as u128) >> 64) as usize
}

/// The ECMP key of the connection from `src` to `dst`: `(src << 32) | dst`.
///
/// Both back-ends route every transfer (net records, INA edges) with this key, so all
/// transfers between one ordered pair share one path, as a RoCE/TCP fabric hashing the
/// 5-tuple of NCCL's persistent per-peer connections does. The reverse direction is
/// another connection (another key, possibly another path), as in a real fabric.
#[inline]
pub fn pair_key(src: NodeId, dst: NodeId) -> u64 {
    ((src.0 as u64) << 32) | dst.0 as u64
}

/// The ECMP key of NCCL channel `channel` of the connection from `src` to `dst`: channel 0
/// is [`pair_key`]`(src, dst)`, channel `c > 0` is `pair_key ^ splitmix64(c)`. Each NCCL
/// channel has its own connection (its own queue pair / source port), so a fabric hashes
/// the channels of one GPU pair independently (docs/model.md#nccl-channels). Both
/// back-ends route a `net` record with the key of its channel.
#[inline]
pub fn connection_key(src: NodeId, dst: NodeId, channel: u32) -> u64 {
    let k = pair_key(src, dst);
    if channel == 0 {
        k
    } else {
        k ^ splitmix64(channel as u64)
    }
}

/// Distances and shortest next hops towards one attachment group of hosts.
#[derive(Clone, Debug)]
struct Group {
    /// Per switch (dense switch index): hops to any host of the group, [`FAR`] if none.
    dist: Vec<u16>,
    /// Per switch: id of its list of shortest next hops in [`Routing::lists`], or
    /// [`LAST`] (the group's hosts hang off it) or [`NONE`] (unreachable).
    next: Vec<u32>,
}

/// Marks a switch one hop from the group's hosts.
const LAST: u32 = u32::MAX - 1;

/// Next-hop lists shared by all groups. Most switches have the same next hops towards
/// most groups (all uplinks, say), so interning the lists makes the per-group table one
/// `u32` per switch and keeps the lists themselves in cache: a path query costs about one
/// cache miss per hop instead of three.
#[derive(Clone, Debug, Default)]
struct Lists {
    off: Vec<u32>,
    chans: Vec<Channel>,
    ids: std::collections::HashMap<Vec<Channel>, u32>,
}

impl Lists {
    /// Id of `l`, adding it if new. Ids follow first insertion, so they are deterministic.
    fn intern(&mut self, l: &[Channel]) -> u32 {
        if let Some(&id) = self.ids.get(l) {
            return id;
        }
        if self.off.is_empty() {
            self.off.push(0);
        }
        let id = (self.off.len() - 1) as u32;
        self.chans.extend_from_slice(l);
        self.off.push(self.chans.len() as u32);
        self.ids.insert(l.to_vec(), id);
        id
    }
    #[inline]
    fn get(&self, id: u32) -> &[Channel] {
        &self.chans[self.off[id as usize] as usize..self.off[id as usize + 1] as usize]
    }
}

/// Precomputed ECMP routes of a topology. Independent of the [`Topology`] it came from
/// (it copies the few link facts it needs), so it can be shared freely.
#[derive(Clone, Debug)]
pub struct Routing {
    seed: u64,
    /// How equal-cost next hops are chosen.
    mode: RoutingMode,
    /// Per node: its D-mod-k destination index (rank among hosts, or among switches).
    rank: Vec<u32>,
    kinds: Vec<NodeKind>,
    /// Per link: ends, rate, delay.
    ends: Vec<(NodeId, NodeId)>,
    rates: Vec<BitsPerSec>,
    delays: Vec<Nanos>,
    /// Network adjacency (CSR): channels leaving each node over Nic/Fabric links.
    adj_off: Vec<u32>,
    adj: Vec<(Channel, NodeId)>,
    /// Dense switch index per node ([`NONE`] for non-switches).
    sw: Vec<u32>,
    /// Node of every dense switch index (the inverse of `sw`).
    switch_node: Vec<NodeId>,
    /// Attachment group per host ([`NONE`] for non-hosts).
    group_of: Vec<u32>,
    groups: Vec<Group>,
    lists: Lists,
    /// Per switch: hops from the nearest host (ToR/leaf = 1, aggregation = 2, core = 3).
    level: Vec<u16>,
    /// Per destination switch (dense index), every switch's hop distance to it over
    /// switches, computed on first use: only the switches that end a transfer (INA tree
    /// nodes) ever need one, so a 5,120-switch fat-tree pays for the few it uses.
    to_switch: Vec<OnceLock<Vec<u16>>>,
    /// The family rule of a non-Clos fabric ([`Fabric`]); `None` for Clos, which the
    /// attachment-group tables above route.
    general: Option<Arc<General>>,
}

impl Routing {
    /// Precompute ECMP routes. Errors: a link of zero rate; a host with no network link,
    /// or two hosts with no network path between them (hosts do not forward traffic).
    pub fn new(topo: &Topology, seed: u64) -> Result<Routing, TopologyError> {
        Routing::with_mode(topo, seed, RoutingMode::Ecmp)
    }

    /// Precompute routes chosen by `mode` ([`RoutingMode`]). Errors as [`Routing::new`].
    pub fn with_mode(
        topo: &Topology,
        seed: u64,
        mode: RoutingMode,
    ) -> Result<Routing, TopologyError> {
        let n = topo.kinds.len();
        let (ends, rates, delays) = link_facts(topo)?;
        let (adj_off, adj) = network_adjacency(topo);
        let mut sw = vec![NONE; n];
        let mut switch_node = Vec::new();
        for (v, k) in topo.kinds.iter().enumerate() {
            if *k == NodeKind::Switch {
                sw[v] = switch_node.len() as u32;
                switch_node.push(NodeId(v as u32));
            }
        }
        let switches = switch_node.len();
        let mut r = Routing {
            seed,
            mode,
            rank: dmodk_ranks(&topo.kinds),
            kinds: topo.kinds.clone(),
            ends,
            rates,
            delays,
            adj_off,
            adj,
            sw,
            switch_node,
            group_of: vec![NONE; n],
            groups: Vec::new(),
            lists: Lists::default(),
            level: Vec::new(),
            to_switch: (0..switches).map(|_| OnceLock::new()).collect(),
            general: None,
        };
        r.level = r.levels();
        if topo.fabric != Fabric::Clos {
            r.general = Some(Arc::new(General::new(&r, topo)?));
            r.check_reachable()?;
            return Ok(r);
        }
        let sources = r.attachment_groups()?;
        let mut lists = Lists::default();
        r.groups = sources.iter().map(|s| r.bfs(s, &mut lists)).collect();
        lists.ids = Default::default();
        r.lists = lists;
        r.check_connected()?;
        Ok(r)
    }

    /// Numbers the hosts' attachment groups (the sets of switches a host's NICs reach) by
    /// first appearance, ascending host id, into `group_of`; returns each group's
    /// switches. Errors: a host with no network link.
    fn attachment_groups(&mut self) -> Result<Vec<Vec<NodeId>>, TopologyError> {
        let mut keys: BTreeMap<Vec<NodeId>, u32> = BTreeMap::new();
        let mut sources: Vec<Vec<NodeId>> = Vec::new();
        for v in 0..self.kinds.len() {
            if self.kinds[v] != NodeKind::Host {
                continue;
            }
            let net = self.net(NodeId(v as u32));
            if net.is_empty() {
                return Err(TopologyError::World(format!(
                    "host {v} has no network link (only NVLink or nothing), so no flow can reach it"
                )));
            }
            let mut key: Vec<NodeId> = net
                .iter()
                .map(|&(_, w)| w)
                .filter(|w| self.sw[w.idx()] != NONE)
                .collect();
            key.sort_unstable();
            key.dedup();
            let next = keys.len() as u32;
            let g = *keys.entry(key.clone()).or_insert_with(|| {
                sources.push(key);
                next
            });
            self.group_of[v] = g;
        }
        Ok(sources)
    }

    /// Channels leaving `v` over network links, with their far ends.
    #[inline]
    fn net(&self, v: NodeId) -> &[(Channel, NodeId)] {
        &self.adj[self.adj_off[v.idx()] as usize..self.adj_off[v.idx() + 1] as usize]
    }

    /// The switches (dense indices) one network link from switch `u` (dense index), in
    /// channel order: the graph the Clos tables search.
    fn switch_neighbours(&self, u: u32) -> impl Iterator<Item = u32> + '_ {
        self.net(self.switch_node[u as usize])
            .iter()
            .map(|&(_, w)| self.sw[w.idx()])
            .filter(|&wi| wi != NONE)
    }

    /// Distances from a group's attachment switches (1 hop from its hosts) through
    /// switches only, and every switch's shortest next hops towards the group.
    fn bfs(&self, sources: &[NodeId], lists: &mut Lists) -> Group {
        let switches = self.switch_node.len();
        let starts = sources.iter().map(|s| self.sw[s.idx()]);
        let dist = graph::hops(switches, starts, 1, |u| self.switch_neighbours(u));
        let mut next = Vec::with_capacity(switches);
        let mut hops = Vec::new();
        for &v in &self.switch_node {
            let dv = dist[self.sw[v.idx()] as usize];
            next.push(if dv == FAR {
                NONE
            } else if dv == 1 {
                LAST
            } else {
                hops.clear();
                for &(c, w) in self.net(v) {
                    let wi = self.sw[w.idx()];
                    if wi != NONE && dist[wi as usize] == dv - 1 {
                        hops.push(c);
                    }
                }
                lists.intern(&hops)
            });
        }
        Group { dist, next }
    }

    /// Per switch, hops from the nearest host (the switches a host links to are layer 1).
    fn levels(&self) -> Vec<u16> {
        let attached = (0..self.kinds.len())
            .filter(|&v| self.kinds[v] == NodeKind::Host)
            .flat_map(|v| self.net(NodeId(v as u32)))
            .map(|&(_, w)| self.sw[w.idx()])
            .filter(|&wi| wi != NONE);
        graph::hops(self.switch_node.len(), attached, 1, |u| {
            self.switch_neighbours(u)
        })
    }

    /// Every host must reach every group: through a switch at finite distance, or by a
    /// direct host-host link.
    fn check_connected(&self) -> Result<(), TopologyError> {
        let hosts: Vec<NodeId> = (0..self.kinds.len() as u32)
            .map(NodeId)
            .filter(|v| self.kinds[v.idx()] == NodeKind::Host)
            .collect();
        let mut rep = vec![None; self.groups.len()];
        for &h in &hosts {
            let g = self.group_of[h.idx()] as usize;
            rep[g].get_or_insert(h);
        }
        for (g, grp) in self.groups.iter().enumerate() {
            let Some(to) = rep[g] else { continue };
            for &h in &hosts {
                if h == to {
                    continue;
                }
                let ok = self.net(h).iter().any(|&(_, w)| {
                    let wi = self.sw[w.idx()];
                    (wi != NONE && grp.dist[wi as usize] != FAR) || w == to
                });
                if !ok {
                    return Err(TopologyError::Disconnected { from: h, to });
                }
            }
        }
        // A group whose members cannot reach each other (no switch, no direct link).
        for &h in &hosts {
            let g = self.group_of[h.idx()] as usize;
            if let Some(to) = rep[g] {
                let pick = Pick::new(self, to, 0);
                if to != h && self.route(h, to, &pick, &mut Vec::new()).is_err() {
                    return Err(TopologyError::Disconnected { from: h, to });
                }
            }
        }
        Ok(())
    }

    /// `v` is a host.
    fn host(&self, v: NodeId) -> Result<(), TopologyError> {
        match self.kinds.get(v.idx()) {
            Some(NodeKind::Host) => Ok(()),
            _ => self.endpoint(v).and(Err(TopologyError::NotAHost {
                node: v,
                what: format!("a {:?}", self.kinds[v.idx()]).to_lowercase(),
            })),
        }
    }

    /// `v` may end a path: a host or a packet switch.
    fn endpoint(&self, v: NodeId) -> Result<(), TopologyError> {
        match self.kinds.get(v.idx()) {
            Some(NodeKind::Host | NodeKind::Switch) => Ok(()),
            Some(k) => Err(TopologyError::NotAHost {
                node: v,
                what: format!("a {k:?}").to_lowercase(),
            }),
            None => Err(TopologyError::NotAHost {
                node: v,
                what: format!("out of range (the topology has {} nodes)", self.kinds.len()),
            }),
        }
    }

    /// The seed of the ECMP hash.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The ECMP path of the connection from `src` to `dst` (hosts or switches): the one
    /// place where a transfer's ECMP key is chosen, [`pair_key`]`(src, dst)`. The
    /// replayer routes every net record and INA edge with it, `ina3d ns3 emit` writes its
    /// paths into the glue's `routes.txt`, and INA trees are built from it.
    pub fn connection_path(&self, src: NodeId, dst: NodeId) -> Result<Vec<Channel>, TopologyError> {
        self.path(src, dst, pair_key(src, dst))
    }

    /// The ECMP path of NCCL channel `channel` of the connection from `src` to `dst`
    /// ([`connection_key`]); channel 0 is [`Routing::connection_path`].
    pub fn channel_path(
        &self,
        src: NodeId,
        dst: NodeId,
        channel: u32,
    ) -> Result<Vec<Channel>, TopologyError> {
        self.path(src, dst, connection_key(src, dst, channel))
    }

    /// The ECMP path from `src` to `dst` (each a host or a packet switch) for flow key
    /// `key`, as the channels it crosses in order. Same seed and key → same path.
    /// `src == dst` gives the empty path. Among the equal-cost next hops of a node, in
    /// ascending channel order, the path takes [`ecmp_choice`]`(seed, key, node, n)`;
    /// only switches forward.
    pub fn path(&self, src: NodeId, dst: NodeId, key: u64) -> Result<Vec<Channel>, TopologyError> {
        let mut out = Vec::with_capacity(8);
        self.path_into(src, dst, key, &mut out)?;
        Ok(out)
    }

    /// [`Routing::path`] into a reused buffer (cleared first), for hot loops.
    pub fn path_into(
        &self,
        src: NodeId,
        dst: NodeId,
        key: u64,
        out: &mut Vec<Channel>,
    ) -> Result<(), TopologyError> {
        self.endpoint(src)?;
        self.endpoint(dst)?;
        out.clear();
        if src == dst {
            return Ok(());
        }
        self.walk(src, dst, key, out)
    }

    /// Append the path from `src` to `dst` (distinct, both endpoints) to `out`: the
    /// family's rule on a non-Clos fabric, else the attachment-group tables.
    fn walk(
        &self,
        src: NodeId,
        dst: NodeId,
        key: u64,
        out: &mut Vec<Channel>,
    ) -> Result<(), TopologyError> {
        let pick = Pick::new(self, dst, key);
        if let Some(g) = &self.general {
            return g.path(self, src, dst, &pick, out);
        }
        if self.kinds[dst.idx()] == NodeKind::Switch {
            return self.route_to_switch(src, dst, &pick, out);
        }
        self.route(src, dst, &pick, out)
    }

    /// Hop distances of every switch to switch `t` (dense index) over switches.
    fn switch_distances(&self, t: u32) -> &[u16] {
        self.to_switch[t as usize].get_or_init(|| {
            graph::hops(self.switch_node.len(), [t], 0, |u| {
                self.switch_neighbours(u)
            })
        })
    }

    /// Walk from `src` (host or switch) to switch `dst`: at every node the channels to
    /// switches one hop closer to `dst`, ascending, and [`ecmp_choice`] among them.
    fn route_to_switch(
        &self,
        src: NodeId,
        dst: NodeId,
        pick: &Pick,
        out: &mut Vec<Channel>,
    ) -> Result<(), TopologyError> {
        let dist = self.switch_distances(self.sw[dst.idx()]);
        let dist_of = |w: NodeId| match self.sw[w.idx()] {
            NONE => FAR,
            wi => dist[wi as usize],
        };
        let mut v = src;
        let mut d = if self.kinds[src.idx()] == NodeKind::Switch {
            dist_of(src)
        } else {
            // A host is one hop beyond its nearest attached switch.
            self.net(src)
                .iter()
                .map(|&(_, w)| dist_of(w))
                .min()
                .unwrap_or(FAR)
                .saturating_add(1)
        };
        if d == FAR {
            return Err(TopologyError::Disconnected { from: src, to: dst });
        }
        while v != dst {
            let closer = |&&(_, w): &&(Channel, NodeId)| dist_of(w) == d - 1;
            let n = self.net(v).iter().filter(closer).count();
            let i = pick.at(v, n);
            let Some(&(c, w)) = self.net(v).iter().filter(closer).nth(i) else {
                return Err(TopologyError::Disconnected { from: src, to: dst });
            };
            out.push(c);
            v = w;
            d -= 1;
        }
        Ok(())
    }

    /// Walk from `src` (host or switch) to host `dst`, appending channels to `out`.
    fn route(
        &self,
        src: NodeId,
        dst: NodeId,
        pick: &Pick,
        out: &mut Vec<Channel>,
    ) -> Result<(), TopologyError> {
        let grp = &self.groups[self.group_of[dst.idx()] as usize];
        let dist_of = |w: NodeId| {
            let wi = self.sw[w.idx()];
            if wi == NONE {
                FAR
            } else {
                grp.dist[wi as usize]
            }
        };
        let mut v = src;
        if self.kinds[src.idx()] != NodeKind::Switch {
            // First hop from a host: a direct link to dst if there is one, else the
            // attached switches closest to dst.
            let direct = self.net(v).iter().filter(|&&(_, w)| w == dst).count();
            if direct > 0 {
                let i = pick.at(v, direct);
                let (c, _) = *self
                    .net(v)
                    .iter()
                    .filter(|&&(_, w)| w == dst)
                    .nth(i)
                    .expect("i < count");
                out.push(c);
                return Ok(());
            }
            let best = self
                .net(v)
                .iter()
                .map(|&(_, w)| dist_of(w))
                .min()
                .unwrap_or(FAR);
            if best == FAR {
                return Err(TopologyError::Disconnected { from: src, to: dst });
            }
            let cnt = self
                .net(v)
                .iter()
                .filter(|&&(_, w)| dist_of(w) == best)
                .count();
            let i = pick.at(v, cnt);
            let (c, w) = *self
                .net(v)
                .iter()
                .filter(|&&(_, w)| dist_of(w) == best)
                .nth(i)
                .expect("i < count");
            out.push(c);
            v = w;
        }
        loop {
            let id = grp.next[self.sw[v.idx()] as usize];
            if id == NONE {
                return Err(TopologyError::Disconnected { from: src, to: dst });
            }
            if id == LAST {
                // Last hop: the links from this switch down to dst.
                let down = |&&(_, w): &&(Channel, NodeId)| w == v;
                let cnt = self.net(dst).iter().filter(down).count();
                if cnt == 0 {
                    // v serves dst's attachment group, so it is linked to dst: unreachable
                    // unless the tables are corrupt; an error, not a panic.
                    return Err(TopologyError::Disconnected { from: src, to: dst });
                }
                let i = pick.at(v, cnt);
                let (c, _) = *self.net(dst).iter().filter(down).nth(i).expect("i < count");
                out.push(Channel(c.0 ^ 1));
                return Ok(());
            }
            let hops = self.lists.get(id);
            let c = hops[pick.at(v, hops.len())];
            out.push(c);
            v = self.channel_ends(c).1;
        }
    }

    /// The (from, to) nodes of a channel.
    #[inline]
    pub fn channel_ends(&self, c: Channel) -> (NodeId, NodeId) {
        let (a, b) = self.ends[c.link().idx()];
        if c.0.is_multiple_of(2) {
            (a, b)
        } else {
            (b, a)
        }
    }

    /// Sum of the propagation delays of a path (serialisation not included: it depends on
    /// the packet or flow size).
    pub fn path_delay(&self, path: &[Channel]) -> Nanos {
        path.iter().map(|c| self.delays[c.link().idx()]).sum()
    }

    /// The smallest link rate along a path; `BitsPerSec(u64::MAX)` for the empty path.
    pub fn bottleneck(&self, path: &[Channel]) -> BitsPerSec {
        path.iter()
            .map(|c| self.rates[c.link().idx()])
            .min()
            .unwrap_or(BitsPerSec(u64::MAX))
    }

    /// Rate of the link under a channel.
    pub fn rate(&self, c: Channel) -> BitsPerSec {
        self.rates[c.link().idx()]
    }

    /// Propagation delay of the link under a channel.
    pub fn delay(&self, c: Channel) -> Nanos {
        self.delays[c.link().idx()]
    }

    /// Layer of a switch: hops from the nearest host (ToR/leaf 1, aggregation 2, core 3);
    /// `None` for hosts, NVSwitches and switches no host reaches.
    pub fn level(&self, v: NodeId) -> Option<u16> {
        let vi = *self.sw.get(v.idx())?;
        if vi == NONE {
            return None;
        }
        Some(self.level[vi as usize]).filter(|&l| l != FAR)
    }

    /// Hops between host `h` and switch `s` over network links (`None` if unreachable).
    fn hops_to_switch(&self, h: NodeId, s: NodeId) -> Option<u16> {
        if let Some(g) = &self.general {
            return g.hops(self, h, s);
        }
        let grp = &self.groups[self.group_of[h.idx()] as usize];
        let d = grp.dist[self.sw[s.idx()] as usize];
        (d != FAR).then_some(d)
    }

    /// The INA aggregation tree of `members` (hosts) for flow key `key`.
    ///
    /// The root is a switch that may aggregate (`can_aggregate`) and sits *above* every
    /// member — reachable from each by a strictly upward shortest path (its distance from
    /// every member equals its layer, [`Routing::level`]) — on the lowest such layer: the
    /// shared ToR when all members hang off one, else an aggregation or core/spine switch
    /// ([`Routing::aggregation_candidates`]). Ties are broken by
    /// [`ecmp_choice`]`(seed, key, lowest member, candidates)` over the candidates in
    /// ascending id; [`Routing::aggregation_tree_at`] builds the tree below it.
    ///
    /// Errors: no members, a member twice, a member that is not a host, or no aggregating
    /// switch above all members.
    pub fn aggregation_tree(
        &self,
        members: &[NodeId],
        can_aggregate: &dyn Fn(NodeId) -> bool,
        key: u64,
    ) -> Result<AggTree, TopologyError> {
        if self.general.is_some() {
            return self.cheapest_tree(members, can_aggregate, key);
        }
        let (ms, cands) = self.candidates(members, can_aggregate)?;
        let root = cands[ecmp_choice(self.seed, key, ms[0], cands.len())];
        self.tree_below(&ms, can_aggregate, root, key)
    }

    /// Every switch that may root the aggregation tree of `members` (see
    /// [`Routing::aggregation_tree`]): the aggregating switches above all members on the
    /// lowest layer that has one, ascending id. Errors as [`Routing::aggregation_tree`].
    pub fn aggregation_candidates(
        &self,
        members: &[NodeId],
        can_aggregate: &dyn Fn(NodeId) -> bool,
    ) -> Result<Vec<NodeId>, TopologyError> {
        Ok(self.candidates(members, can_aggregate)?.1)
    }

    /// The aggregation tree of `members` rooted at `root` (any switch above all members
    /// that may aggregate): each member's upward path is the reverse of the ECMP path from
    /// the root down to it (flow key `key`); the union of those paths is collapsed so every
    /// member and aggregating switch points to the nearest aggregating switch above it. A
    /// member whose walk reaches a switch already in the tree joins there, so each node has
    /// exactly one parent even where ECMP would have split.
    pub fn aggregation_tree_at(
        &self,
        members: &[NodeId],
        can_aggregate: &dyn Fn(NodeId) -> bool,
        root: NodeId,
        key: u64,
    ) -> Result<AggTree, TopologyError> {
        let (ms, _) = self.members_and_reps(members)?;
        let agg = self.kinds.get(root.idx()) == Some(&NodeKind::Switch) && can_aggregate(root);
        if self.general.is_some() {
            if !agg {
                return Err(TopologyError::NoAggregator {
                    members: ms.len(),
                    first: ms[0],
                });
            }
            return self.general_tree_at(&ms, can_aggregate, root);
        }
        let above = self
            .level(root)
            .is_some_and(|l| ms.iter().all(|&m| self.hops_to_switch(m, root) == Some(l)));
        if !agg || !above {
            return Err(TopologyError::NoAggregator {
                members: ms.len(),
                first: ms[0],
            });
        }
        self.tree_below(&ms, can_aggregate, root, key)
    }

    /// Sorted members (checked: non-empty, distinct, hosts) and one representative per
    /// attachment group (distances are equal within a group).
    fn members_and_reps(
        &self,
        members: &[NodeId],
    ) -> Result<(Vec<NodeId>, Vec<NodeId>), TopologyError> {
        let mut ms = members.to_vec();
        ms.sort_unstable();
        if ms.is_empty() {
            return Err(TopologyError::Members("no members".into()));
        }
        if let Some(w) = ms.windows(2).find(|w| w[0] == w[1]) {
            return Err(TopologyError::Members(format!(
                "node {} is listed twice",
                w[0]
            )));
        }
        for &m in &ms {
            self.host(m)?;
        }
        if self.general.is_some() {
            // no attachment groups: every member stands for itself
            let reps = ms.clone();
            return Ok((ms, reps));
        }
        let mut reps: Vec<NodeId> = Vec::new();
        let mut seen = vec![false; self.groups.len()];
        for &m in &ms {
            let g = self.group_of[m.idx()] as usize;
            if !seen[g] {
                seen[g] = true;
                reps.push(m);
            }
        }
        Ok((ms, reps))
    }

    /// Sorted members and the candidate roots (non-empty) of [`Routing::aggregation_candidates`].
    fn candidates(
        &self,
        members: &[NodeId],
        can_aggregate: &dyn Fn(NodeId) -> bool,
    ) -> Result<(Vec<NodeId>, Vec<NodeId>), TopologyError> {
        let (ms, reps) = self.members_and_reps(members)?;
        if self.general.is_some() {
            let cands = self.general_candidates(&ms, can_aggregate);
            if cands.is_empty() {
                return Err(TopologyError::NoAggregator {
                    members: ms.len(),
                    first: ms[0],
                });
            }
            return Ok((ms, cands));
        }
        let agg = |v: NodeId| self.kinds[v.idx()] == NodeKind::Switch && can_aggregate(v);
        let mut best = FAR;
        let mut cands: Vec<NodeId> = Vec::new();
        for v in 0..self.kinds.len() as u32 {
            let v = NodeId(v);
            let Some(l) = self.level(v) else { continue };
            if l > best || !agg(v) {
                continue;
            }
            if reps.iter().all(|&m| self.hops_to_switch(m, v) == Some(l)) {
                if l < best {
                    best = l;
                    cands.clear();
                }
                cands.push(v);
            }
        }
        if cands.is_empty() {
            return Err(TopologyError::NoAggregator {
                members: ms.len(),
                first: ms[0],
            });
        }
        Ok((ms, cands))
    }

    /// The tree below a chosen root (see [`Routing::aggregation_tree_at`]).
    fn tree_below(
        &self,
        ms: &[NodeId],
        can_aggregate: &dyn Fn(NodeId) -> bool,
        root: NodeId,
        key: u64,
    ) -> Result<AggTree, TopologyError> {
        let agg = |v: NodeId| self.kinds[v.idx()] == NodeKind::Switch && can_aggregate(v);

        let mut in_tree: BTreeMap<NodeId, ()> = BTreeMap::new();
        in_tree.insert(root, ());
        let mut edges: Vec<AggEdge> = Vec::new();
        let mut down = Vec::new();
        for &m in ms {
            down.clear();
            self.walk(root, m, key, &mut down)?;
            let mut child = m;
            let mut seg: Vec<Channel> = Vec::new();
            for &c in down.iter().rev() {
                let up = Channel(c.0 ^ 1);
                seg.push(up);
                let v = self.channel_ends(up).1;
                if agg(v) {
                    edges.push(AggEdge {
                        child,
                        parent: v,
                        fanin_at_parent: 0,
                        path: std::mem::take(&mut seg),
                    });
                    if in_tree.insert(v, ()).is_some() {
                        break;
                    }
                    child = v;
                }
            }
        }
        let mut fanin: BTreeMap<NodeId, u32> = BTreeMap::new();
        for e in &edges {
            *fanin.entry(e.parent).or_default() += 1;
        }
        for e in &mut edges {
            e.fanin_at_parent = fanin[&e.parent];
        }
        // Bottom-up: an upward shortest path climbs one layer per hop, so ordering by the
        // child's layer puts every edge into a node before that node's own edge.
        edges.sort_by_key(|e| (self.level(e.child).unwrap_or(0), e.child));
        Ok(AggTree { root, edges })
    }
}

/// Per link: its ends, rate and delay. Errors: a link of zero rate, or an end that is
/// not a node of `topo`.
#[allow(clippy::type_complexity)]
fn link_facts(
    topo: &Topology,
) -> Result<(Vec<(NodeId, NodeId)>, Vec<BitsPerSec>, Vec<Nanos>), TopologyError> {
    let n = topo.kinds.len();
    let mut ends = Vec::with_capacity(topo.links.len());
    let mut rates = Vec::with_capacity(topo.links.len());
    let mut delays = Vec::with_capacity(topo.links.len());
    for (i, l) in topo.links.iter().enumerate() {
        if l.rate.0 == 0 {
            return Err(TopologyError::ZeroRate {
                link: i as u32,
                a: l.a,
                b: l.b,
            });
        }
        if l.a.idx() >= n || l.b.idx() >= n {
            return Err(TopologyError::World(format!(
                "link {i} joins node {} and {} but the topology has only {n} nodes",
                l.a, l.b
            )));
        }
        ends.push((l.a, l.b));
        rates.push(l.rate);
        delays.push(l.delay);
    }
    Ok((ends, rates, delays))
}

/// The network adjacency in CSR form (offsets, then the channels leaving each node with
/// their far ends, ascending channel order): network links only, no NVLink, nothing
/// through an NVSwitch, no self-loop.
fn network_adjacency(topo: &Topology) -> (Vec<u32>, Vec<(Channel, NodeId)>) {
    let n = topo.kinds.len();
    let mut deg = vec![0u32; n + 1];
    let is_net = |l: &super::Link| {
        l.kind != LinkKind::NvLink
            && topo.kinds[l.a.idx()] != NodeKind::NvSwitch
            && topo.kinds[l.b.idx()] != NodeKind::NvSwitch
            && l.a != l.b
    };
    for l in topo.links.iter().filter(|l| is_net(l)) {
        deg[l.a.idx()] += 1;
        deg[l.b.idx()] += 1;
    }
    let mut adj_off = vec![0u32; n + 1];
    for v in 0..n {
        adj_off[v + 1] = adj_off[v] + deg[v];
    }
    let mut fill = adj_off.clone();
    let mut adj = vec![(Channel(0), NodeId(0)); adj_off[n] as usize];
    for (i, l) in topo.links.iter().enumerate().filter(|(_, l)| is_net(l)) {
        let id = LinkId(i as u32);
        adj[fill[l.a.idx()] as usize] = (Channel::of(id, true), l.b);
        fill[l.a.idx()] += 1;
        adj[fill[l.b.idx()] as usize] = (Channel::of(id, false), l.a);
        fill[l.b.idx()] += 1;
    }
    (adj_off, adj)
}

/// Per node, its D-mod-k destination index: its rank among the hosts, or among the other
/// nodes.
fn dmodk_ranks(kinds: &[NodeKind]) -> Vec<u32> {
    let (mut hosts, mut others) = (0u32, 0u32);
    kinds
        .iter()
        .map(|k| {
            let c = if *k == NodeKind::Host {
                &mut hosts
            } else {
                &mut others
            };
            *c += 1;
            *c - 1
        })
        .collect()
}

/// One edge of an aggregation tree: `child` (a member host or an aggregating switch)
/// sends its (partial) aggregate to `parent` along `path`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AggEdge {
    /// The sender of the partial aggregate.
    pub child: NodeId,
    /// The aggregating switch receiving it.
    pub parent: NodeId,
    /// How many children `parent` aggregates (its number of edges in).
    pub fanin_at_parent: u32,
    /// The channels from child to parent (non-aggregating switches in between forward).
    pub path: Vec<Channel>,
}

/// An INA aggregation tree: edges point upward to `root`, which multicasts the result back
/// down the same edges reversed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AggTree {
    /// The top aggregating switch.
    pub root: NodeId,
    /// Edges bottom-up: every edge into a node comes before that node's own edge.
    pub edges: Vec<AggEdge>,
}

impl AggTree {
    /// The aggregating switches of the tree (root included), ascending id.
    pub fn switches(&self) -> Vec<NodeId> {
        let mut s: Vec<NodeId> = self.edges.iter().map(|e| e.parent).collect();
        s.push(self.root);
        s.sort_unstable();
        s.dedup();
        s
    }
    /// Number of children aggregated at `node` (0 if it is not an aggregating node).
    pub fn fanin(&self, node: NodeId) -> u32 {
        self.edges.iter().filter(|e| e.parent == node).count() as u32
    }
    /// The children of `node`, in edge order.
    pub fn children(&self, node: NodeId) -> Vec<NodeId> {
        self.edges
            .iter()
            .filter(|e| e.parent == node)
            .map(|e| e.child)
            .collect()
    }
}
