//! The routing rules of the non-Clos fabrics ([`Fabric`]), in the one router
//! (docs/model.md#routing-on-other-fabrics).
//!
//! Every rule first chooses a sequence of *forwarding nodes* (switches, and on
//! server-centric and direct-connect fabrics the relaying servers), then turns each step
//! into a channel, taking among parallel links the one [`ecmp_choice`] picks for the
//! transfer's key at the step's node — so, as on Clos, every transfer of one connection
//! and NCCL channel takes one path and the channels of a GPU pair spread.
//!
//! - **Jellyfish**: the `paths` shortest loopless switch paths between the two hosts'
//!   switches (Yen's algorithm on hop counts, ties broken by the lower node sequence),
//!   one of them picked by `ecmp_choice(seed, key, first switch, count)`. Computed on
//!   first use per switch pair and kept.
//! - **Dragonfly**: minimal — inside a group the local link; between groups local to the
//!   router holding a global link to the destination group (one of the links between the
//!   two groups, by `ecmp_choice`), the global link, local to the destination router: at
//!   most 3 router hops. Valiant — minimal to an intermediate group other than both
//!   ends (by `ecmp_choice` on the key salted with [`VALIANT`]), then minimal from the
//!   router it arrives at: at most 5.
//! - **Torus**: dimension order (first dimension first), each dimension the shorter way
//!   round; a tie (distance k/2) goes the way `ecmp_choice` picks at the first router of
//!   that dimension.
//! - **BCube**: the source route that corrects one address digit per hop, server → switch
//!   of that level → server, digits in the order `i, i−1, …` (cyclically) from the level
//!   `i = ecmp_choice(seed, key, source, k+1)`: BCube's k+1 parallel paths.
//! - **DCell**: DCellRouting: inside a DCell_0 through its switch, else through the link
//!   joining the two sub-DCells of the lowest DCell that holds both ends, recursively.
//! - **Direct** (TopoOpt), and any path with a switch at one end (INA edges): shortest
//!   paths over forwarding nodes with ECMP at every node, from a per-destination
//!   breadth-first search computed on first use.

use super::{Pick, Routing, FAR};
use crate::topology::graph;
use crate::topology::{Channel, Fabric, NodeKind, Topology, TopologyError};
use crate::units::NodeId;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

/// Salt of the key that picks Valiant's intermediate group (so it is independent of the
/// global-link choices the same key makes).
pub const VALIANT: u64 = 0x5641_4c49_414e_5421;

/// Switch paths (dense switch indices) between one pair of switches, shortest first.
type PathSet = Arc<Vec<Vec<u32>>>;

/// What a non-Clos fabric's routing keeps beside the shared tables of [`Routing`].
#[derive(Debug)]
pub(super) struct General {
    fabric: Fabric,
    /// Hosts forward other hosts' traffic.
    relay: bool,
    /// Node of every dense switch index.
    switch_nodes: Vec<NodeId>,
    /// Per destination node: every node's hops to it through forwarding nodes, on first use.
    to_node: Vec<OnceLock<Vec<u16>>>,
    /// Dragonfly: global links between two groups (lower group first), as (router in the
    /// lower group, router in the other), dense indices, ascending.
    globals: BTreeMap<(u32, u32), Vec<(u32, u32)>>,
    /// Jellyfish: the k shortest paths of each switch pair used so far.
    kpaths: Mutex<HashMap<(u32, u32), PathSet>>,
    /// Switch neighbours (dense indices, ascending, each once) of every switch, for the
    /// searches of Yen's algorithm (Jellyfish only; empty otherwise).
    switch_adj: Vec<Vec<u32>>,
}

impl General {
    /// The tables of `topo`'s family. Errors: a topology whose structure does not match
    /// its family (hand-made, or a builder bug).
    pub(super) fn new(r: &Routing, topo: &Topology) -> Result<General, TopologyError> {
        let switch_nodes: Vec<NodeId> = (0..r.kinds.len() as u32)
            .map(NodeId)
            .filter(|v| r.kinds[v.idx()] == NodeKind::Switch)
            .collect();
        let mismatch = |what: String| {
            TopologyError::World(format!(
                "topology `{}` does not have the shape of its family: {what}",
                topo.source
            ))
        };
        let mut globals: BTreeMap<(u32, u32), Vec<(u32, u32)>> = BTreeMap::new();
        match &topo.fabric {
            Fabric::Dragonfly {
                groups, routers, ..
            } => {
                if switch_nodes.len() as u64 != *groups as u64 * *routers as u64 {
                    return Err(mismatch(format!(
                        "{} routers, not {groups} × {routers}",
                        switch_nodes.len()
                    )));
                }
                for (i, &v) in switch_nodes.iter().enumerate() {
                    for &(_, w) in r.net(v) {
                        let j = r.sw[w.idx()];
                        if j == super::NONE {
                            continue;
                        }
                        let (gi, gj) = (i as u32 / routers, j / routers);
                        if gi < gj {
                            globals.entry((gi, gj)).or_default().push((i as u32, j));
                        }
                    }
                }
                for l in globals.values_mut() {
                    l.sort_unstable();
                    l.dedup();
                }
            }
            Fabric::Torus { dims } => {
                let nodes: u64 = dims.iter().map(|&k| k as u64).product();
                if switch_nodes.len() as u64 != nodes {
                    return Err(mismatch(format!(
                        "{} routers, not the {nodes} of {dims:?}",
                        switch_nodes.len()
                    )));
                }
            }
            Fabric::BCube { n, k } => {
                let servers = (*n as u64).pow(k + 1);
                let hosts = r.kinds.iter().filter(|&&x| x == NodeKind::Host).count() as u64;
                if hosts != servers
                    || switch_nodes.len() as u64 != (*k as u64 + 1) * servers / *n as u64
                {
                    return Err(mismatch(format!("{hosts} servers, not {servers}")));
                }
            }
            Fabric::DCell { n, k } => {
                let t = crate::topology::dcell::dcell_sizes(*n as u64, *k as u64)
                    .ok_or_else(|| mismatch("too large".into()))?;
                let hosts = r.kinds.iter().filter(|&&x| x == NodeKind::Host).count() as u64;
                if hosts != t[*k as usize] {
                    return Err(mismatch(format!("{hosts} servers, not {}", t[*k as usize])));
                }
            }
            Fabric::Clos | Fabric::Jellyfish { .. } | Fabric::Direct => {}
        }
        let switch_adj = if matches!(topo.fabric, Fabric::Jellyfish { .. }) {
            switch_nodes
                .iter()
                .map(|&v| {
                    let mut a: Vec<u32> = r
                        .net(v)
                        .iter()
                        .map(|&(_, w)| r.sw[w.idx()])
                        .filter(|&j| j != super::NONE)
                        .collect();
                    a.sort_unstable();
                    a.dedup();
                    a
                })
                .collect()
        } else {
            Vec::new()
        };
        Ok(General {
            switch_adj,
            relay: topo.fabric.hosts_relay(),
            fabric: topo.fabric.clone(),
            switch_nodes,
            to_node: (0..r.kinds.len()).map(|_| OnceLock::new()).collect(),
            globals,
            kpaths: Mutex::new(HashMap::new()),
        })
    }

    /// Whether `v` forwards traffic that is not its own.
    fn forwards(&self, r: &Routing, v: NodeId) -> bool {
        match r.kinds[v.idx()] {
            NodeKind::Switch => true,
            NodeKind::Host => self.relay,
            NodeKind::NvSwitch => false,
        }
    }

    /// Hops from every node to `dst`, entering only forwarding nodes on the way.
    fn dist_to(&self, r: &Routing, dst: NodeId) -> &[u16] {
        self.to_node[dst.idx()].get_or_init(|| {
            graph::hops(r.kinds.len(), [dst.0], 0, |u| {
                // the search goes on only through nodes that forward (and from dst itself)
                let through = u == dst.0 || self.forwards(r, NodeId(u));
                r.net(NodeId(u))
                    .iter()
                    .filter(move |_| through)
                    .map(|&(_, w)| w.0)
            })
        })
    }

    /// [`General::dist_to`] for the sibling modules.
    pub(super) fn dist_to_node(&self, r: &Routing, dst: NodeId) -> &[u16] {
        self.dist_to(r, dst)
    }

    /// Hops from host `h` to switch `s` (`None` if unreachable).
    pub(super) fn hops(&self, r: &Routing, h: NodeId, s: NodeId) -> Option<u16> {
        let d = self.dist_to(r, s)[h.idx()];
        (d != FAR).then_some(d)
    }

    /// Append the path from `src` to `dst` (distinct endpoints) to `out`.
    pub(super) fn path(
        &self,
        r: &Routing,
        src: NodeId,
        dst: NodeId,
        pick: &Pick,
        out: &mut Vec<Channel>,
    ) -> Result<(), TopologyError> {
        let host = |v: NodeId| r.kinds[v.idx()] == NodeKind::Host;
        let nodes = match &self.fabric {
            Fabric::Jellyfish { paths } if host(src) && host(dst) => {
                self.via_switches(r, src, dst, pick, out, |a, b| {
                    self.k_shortest(a, b, *paths, pick)
                })?
            }
            Fabric::Dragonfly {
                groups,
                routers,
                valiant,
            } if host(src) && host(dst) => self.via_switches(r, src, dst, pick, out, |a, b| {
                self.dragonfly(a, b, *groups, *routers, *valiant, pick)
            })?,
            Fabric::Torus { dims } if host(src) && host(dst) => {
                self.via_switches(r, src, dst, pick, out, |a, b| {
                    Some(self.torus(a, b, dims, pick))
                })?
            }
            Fabric::BCube { n, k } if host(src) && host(dst) => self.bcube(src, dst, *n, *k, pick),
            Fabric::DCell { n, k } if host(src) && host(dst) => self.dcell(src, dst, *n, *k),
            _ => return self.shortest(r, src, dst, pick, out),
        };
        self.steps(r, &nodes, pick, out)
            .ok_or(TopologyError::Disconnected { from: src, to: dst })
    }

    /// A path between two hosts through their switches: `between(a, b)` gives the
    /// switch sequence (dense indices) from src's switch `a` to dst's switch `b`. Pushes
    /// src's first channel to `out` and returns the node sequence from src's switch to dst.
    fn via_switches(
        &self,
        r: &Routing,
        src: NodeId,
        dst: NodeId,
        pick: &Pick,
        out: &mut Vec<Channel>,
        between: impl FnOnce(u32, u32) -> Option<Vec<u32>>,
    ) -> Result<Vec<NodeId>, TopologyError> {
        let gone = TopologyError::Disconnected { from: src, to: dst };
        let first = self
            .attach(r, src, pick)
            .ok_or(TopologyError::Disconnected { from: src, to: dst })?;
        let a = r.channel_ends(first).1;
        let b = self
            .attach(r, dst, pick)
            .map(|c| r.channel_ends(c).1)
            .ok_or(TopologyError::Disconnected { from: src, to: dst })?;
        let sw = between(r.sw[a.idx()], r.sw[b.idx()]).ok_or(gone)?;
        out.push(first);
        let mut nodes: Vec<NodeId> = sw.iter().map(|&i| self.switch_nodes[i as usize]).collect();
        nodes.push(dst);
        Ok(nodes)
    }

    /// The NIC channel a host's transfer with `key` leaves on: among the host's links to
    /// switches (its NIC ports), `ecmp_choice` at the host.
    fn attach(&self, r: &Routing, h: NodeId, pick: &Pick) -> Option<Channel> {
        let ports = r
            .net(h)
            .iter()
            .filter(|&&(_, w)| r.sw[w.idx()] != super::NONE);
        let n = ports.clone().count();
        ports.map(|&(c, _)| c).nth(pick.at(h, n))
    }

    /// The channels of a node sequence: from `nodes[0]` (the node `out` has reached, or
    /// the source) to each next node, over the parallel link `ecmp_choice` picks.
    fn steps(
        &self,
        r: &Routing,
        nodes: &[NodeId],
        pick: &Pick,
        out: &mut Vec<Channel>,
    ) -> Option<()> {
        for w in nodes.windows(2) {
            let (u, v) = (w[0], w[1]);
            let par = r.net(u).iter().filter(|&&(_, x)| x == v);
            let n = par.clone().count();
            let &(c, _) = par.clone().nth(pick.at(u, n))?;
            out.push(c);
        }
        Some(())
    }

    /// Shortest paths over forwarding nodes, ECMP at every node.
    fn shortest(
        &self,
        r: &Routing,
        src: NodeId,
        dst: NodeId,
        pick: &Pick,
        out: &mut Vec<Channel>,
    ) -> Result<(), TopologyError> {
        let dist = self.dist_to(r, dst);
        let mut v = src;
        let mut d = dist[src.idx()];
        if d == FAR {
            return Err(TopologyError::Disconnected { from: src, to: dst });
        }
        while v != dst {
            let next = |&&(_, w): &&(Channel, NodeId)| {
                dist[w.idx()] == d - 1 && (w == dst || self.forwards(r, w))
            };
            let n = r.net(v).iter().filter(next).count();
            let Some(&(c, w)) = r.net(v).iter().filter(next).nth(pick.at(v, n)) else {
                return Err(TopologyError::Disconnected { from: src, to: dst });
            };
            out.push(c);
            v = w;
            d -= 1;
        }
        Ok(())
    }

    // ------------------------------------------------------------------ Jellyfish

    /// One of the `k` shortest switch paths from `a` to `b`, by `ecmp_choice` at `a`.
    fn k_shortest(&self, a: u32, b: u32, k: u32, pick: &Pick) -> Option<Vec<u32>> {
        let set = {
            let mut cache = self.kpaths.lock().unwrap_or_else(|e| e.into_inner());
            cache
                .entry((a, b))
                .or_insert_with(|| Arc::new(self.yen(a, b, k as usize)))
                .clone()
        };
        let i = pick.at(self.switch_nodes[a as usize], set.len());
        set.get(i).cloned()
    }

    /// Shortest switch path from `a` to `b` avoiding `banned` nodes and edges (BFS,
    /// neighbours ascending, so the lowest path among the shortest).
    fn bfs_path(
        &self,
        a: u32,
        b: u32,
        banned_nodes: &BTreeSet<u32>,
        banned_edges: &BTreeSet<(u32, u32)>,
    ) -> Option<Vec<u32>> {
        graph::path(self.switch_nodes.len(), a, b, |u| {
            self.switch_adj[u as usize]
                .iter()
                .copied()
                .filter(move |&w| !banned_nodes.contains(&w) && !banned_edges.contains(&(u, w)))
        })
    }

    /// Yen's k shortest loopless paths from `a` to `b` (hop counts; candidates ordered by
    /// length, then node sequence).
    fn yen(&self, a: u32, b: u32, k: usize) -> Vec<Vec<u32>> {
        let none = BTreeSet::new();
        let Some(first) = self.bfs_path(a, b, &none, &BTreeSet::new()) else {
            return Vec::new();
        };
        let mut found = vec![first];
        let mut cands: BTreeSet<(usize, Vec<u32>)> = BTreeSet::new();
        while found.len() < k {
            let last = found.last().expect("one path").clone();
            for i in 0..last.len().saturating_sub(1) {
                let root = &last[..=i];
                let mut edges = BTreeSet::new();
                for p in &found {
                    if p.len() > i + 1 && &p[..=i] == root {
                        edges.insert((p[i], p[i + 1]));
                    }
                }
                let nodes: BTreeSet<u32> = root[..i].iter().copied().collect();
                if let Some(spur) = self.bfs_path(last[i], b, &nodes, &edges) {
                    let mut p = root[..i].to_vec();
                    p.extend(spur);
                    if !found.contains(&p) {
                        cands.insert((p.len(), p));
                    }
                }
            }
            match cands.pop_first() {
                Some((_, p)) => found.push(p),
                None => break,
            }
        }
        found
    }

    // ------------------------------------------------------------------ Dragonfly

    /// Minimal or Valiant router path from router `a` to router `b` (dense indices).
    #[allow(clippy::too_many_arguments)]
    fn dragonfly(
        &self,
        a: u32,
        b: u32,
        groups: u32,
        routers: u32,
        valiant: bool,
        pick: &Pick,
    ) -> Option<Vec<u32>> {
        let (ga, gb) = (a / routers, b / routers);
        if !valiant || ga == gb || groups < 3 {
            return self.minimal(a, b, routers, pick);
        }
        let via = pick.at_salted(VALIANT, self.switch_nodes[a as usize], groups as usize - 2);
        // the via-th group other than ga and gb
        let gi = (0..groups).filter(|&g| g != ga && g != gb).nth(via)?;
        let to = self.global(ga, gi, self.switch_nodes[a as usize], pick)?;
        let mut p = self.minimal(a, to.0, routers, pick)?;
        p.push(to.1);
        let rest = self.minimal(to.1, b, routers, pick)?;
        p.extend_from_slice(&rest[1..]);
        Some(p)
    }

    /// The global link from group `g1` to group `g2` a transfer with `key` takes at `at`:
    /// (router in g1, router in g2).
    fn global(&self, g1: u32, g2: u32, at: NodeId, pick: &Pick) -> Option<(u32, u32)> {
        let l = self.globals.get(&(g1.min(g2), g1.max(g2)))?;
        let (x, y) = l[pick.at(at, l.len())];
        Some(if g1 < g2 { (x, y) } else { (y, x) })
    }

    /// Minimal route: local, global, local.
    fn minimal(&self, a: u32, b: u32, routers: u32, pick: &Pick) -> Option<Vec<u32>> {
        let (ga, gb) = (a / routers, b / routers);
        if a == b {
            return Some(vec![a]);
        }
        if ga == gb {
            return Some(vec![a, b]);
        }
        let (u, v) = self.global(ga, gb, self.switch_nodes[a as usize], pick)?;
        let mut p = vec![a];
        if u != a {
            p.push(u);
        }
        p.push(v);
        if v != b {
            p.push(b);
        }
        Some(p)
    }

    // ------------------------------------------------------------------ torus

    /// Dimension-order route from router `a` to router `b`.
    fn torus(&self, a: u32, b: u32, dims: &[u32], pick: &Pick) -> Vec<u32> {
        let mut p = vec![a];
        let mut cur = a;
        let mut stride = 1u32;
        for &k in dims {
            let (ca, cb) = ((cur / stride) % k, (b / stride) % k);
            let fwd = (cb + k - ca) % k;
            if fwd != 0 {
                let up = match (2 * fwd).cmp(&k) {
                    std::cmp::Ordering::Less => true,
                    std::cmp::Ordering::Greater => false,
                    std::cmp::Ordering::Equal => pick.at(self.switch_nodes[cur as usize], 2) == 0,
                };
                let hops = if up { fwd } else { k - fwd };
                let mut c = ca;
                for _ in 0..hops {
                    let next = if up { (c + 1) % k } else { (c + k - 1) % k };
                    cur = cur - c * stride + next * stride;
                    c = next;
                    p.push(cur);
                }
            }
            stride *= k;
        }
        p
    }

    // ------------------------------------------------------------------ BCube, DCell

    /// BCube source route: server, level switch, server, … correcting one digit per hop.
    fn bcube(&self, src: NodeId, dst: NodeId, n: u32, k: u32, pick: &Pick) -> Vec<NodeId> {
        let per_level = n.pow(k);
        let digit = |x: u32, l: u32| (x / n.pow(l)) % n;
        let start = pick.at(src, k as usize + 1) as u32;
        let mut cur = src.0;
        let mut nodes = vec![src];
        for step in 0..=k {
            let l = (start + k + 1 - step) % (k + 1);
            let (dc, dd) = (digit(cur, l), digit(dst.0, l));
            if dc == dd {
                continue;
            }
            let low = n.pow(l);
            let sw = (cur / (low * n)) * low + cur % low;
            nodes.push(self.switch_nodes[(l * per_level + sw) as usize]);
            cur = cur - dc * low + dd * low;
            nodes.push(NodeId(cur));
        }
        nodes
    }

    /// DCellRouting from server `src` to server `dst`.
    fn dcell(&self, src: NodeId, dst: NodeId, n: u32, k: u32) -> Vec<NodeId> {
        let t = crate::topology::dcell::dcell_sizes(n as u64, k as u64)
            .expect("checked at construction");
        let mut nodes = Vec::new();
        self.dcell_into(src.0 as u64, dst.0 as u64, n as u64, &t, &mut nodes);
        nodes
    }

    fn dcell_into(&self, s: u64, d: u64, n: u64, t: &[u64], out: &mut Vec<NodeId>) {
        if s == d {
            out.push(NodeId(s as u32));
            return;
        }
        if s / n == d / n {
            out.extend([
                NodeId(s as u32),
                self.switch_nodes[(s / n) as usize],
                NodeId(d as u32),
            ]);
            return;
        }
        // the lowest level l whose DCell holds both; copies i and j of DCell_(l−1) in it
        let l = (1..t.len())
            .find(|&l| s / t[l] == d / t[l])
            .expect("one DCell_k holds all");
        let sub = t[l - 1];
        let offset = s / t[l] * t[l];
        let (i, j) = ((s - offset) / sub, (d - offset) / sub);
        let (n1, n2) = if i < j {
            crate::topology::dcell::dcell_link(offset, sub, i, j)
        } else {
            let (x, y) = crate::topology::dcell::dcell_link(offset, sub, j, i);
            (y, x)
        };
        self.dcell_into(s, n1, n, t, out);
        self.dcell_into(n2, d, n, t, out);
    }
}

impl Routing {
    /// Every host reaches every other through forwarding nodes (one search from the first
    /// host suffices: links are undirected and only the ends may be non-forwarding).
    pub(super) fn check_reachable(&self) -> Result<(), TopologyError> {
        let g = self.general.as_ref().expect("general routing");
        let hosts: Vec<NodeId> = (0..self.kinds.len() as u32)
            .map(NodeId)
            .filter(|v| self.kinds[v.idx()] == NodeKind::Host)
            .collect();
        let Some(&h0) = hosts.first() else {
            return Ok(());
        };
        for &h in &hosts {
            if self.net(h).is_empty() {
                return Err(TopologyError::World(format!(
                    "host {h} has no network link (only NVLink or nothing), so no flow can reach it"
                )));
            }
        }
        let dist = g.dist_to(self, h0);
        if let Some(&h) = hosts.iter().find(|h| dist[h.idx()] == FAR) {
            return Err(TopologyError::Disconnected { from: h, to: h0 });
        }
        Ok(())
    }
}
