//! Where the replayer gets its paths from.
//!
//! The replayer asks a [`PathSource`] for the channels of every transfer, always through
//! [`PathSource::connection_path`]: ECMP **per connection**, keyed by
//! [`topology::pair_key`](crate::topology::pair_key)`(src, dst)`, so every net record and
//! INA edge between one ordered pair takes one path (as a fabric hashing the 5-tuple of
//! NCCL's persistent per-peer connections does). `ina3d ns3 emit` writes the same
//! function's paths into the glue's `routes.txt` and the glue forwards by (source,
//! destination), so both back-ends put every record on the same path.
//!
//! [`SharedRoutes`] is what `ina3d replay` uses: host-to-host transfers take the shared
//! ECMP routes of `topology::Routing`; transfers with a switch at one end (INA tree edges),
//! which `Routing::path` does not serve, take [`ShortestPaths`]: shortest paths over the
//! same network links with the same `ecmp_choice` rule over next hops in ascending channel
//! order. In a two-tier tree those edges have a single shortest path; in a three-tier
//! fat-tree a ToR→core edge may pick another (equivalent) aggregation switch than the
//! generator's tree did (the trace carries no paths, so both back-ends use this one).

use crate::topology::{ecmp_choice, pair_key, Channel, LinkKind, NodeKind, Routing, Topology};
use crate::units::NodeId;
use std::cell::OnceCell;

/// Anything that can route a transfer: channels from `src` to `dst`, ECMP choice keyed
/// by `key`, or a readable reason why there is no route.
pub trait PathSource {
    /// The channels of the path for ECMP key `key`, in order from `src`. Empty when
    /// `src == dst`.
    fn path(&self, src: NodeId, dst: NodeId, key: u64) -> Result<Vec<Channel>, String>;

    /// The path of the connection from `src` to `dst`: [`PathSource::path`] keyed by
    /// [`pair_key`]`(src, dst)`. The one place where a transfer's ECMP key is chosen: the
    /// replayer routes every net and INA record with it and `ina3d ns3 emit` writes its
    /// paths into the glue's `routes.txt`.
    fn connection_path(&self, src: NodeId, dst: NodeId) -> Result<Vec<Channel>, String> {
        self.path(src, dst, pair_key(src, dst))
    }
}

/// Shortest-path ECMP routing over network links (NIC and fabric; never NVLink or an
/// NVSwitch): among the equal-cost next hops, in ascending channel order, the one at
/// `topology::ecmp_choice(seed, key, node, n)`. Hosts never forward (a path only enters a
/// host at its end). Distances to each destination are computed once, on first use.
pub struct ShortestPaths {
    adj: Vec<Vec<(u32, Channel)>>,
    host: Vec<bool>,
    dist: Vec<OnceCell<Vec<u32>>>,
    seed: u64,
}

impl ShortestPaths {
    /// Routing over `topo` with ECMP hash seed `seed`.
    pub fn new(topo: &Topology, seed: u64) -> Self {
        let n = topo.node_count();
        let mut adj = vec![Vec::new(); n];
        let nvs = |v: NodeId| topo.kinds.get(v.idx()) == Some(&NodeKind::NvSwitch);
        for (i, l) in topo.links.iter().enumerate() {
            let id = crate::units::LinkId(i as u32);
            if l.a.idx() < n
                && l.b.idx() < n
                && l.kind != LinkKind::NvLink
                && !nvs(l.a)
                && !nvs(l.b)
            {
                adj[l.a.idx()].push((l.b.0, Channel::of(id, true)));
                adj[l.b.idx()].push((l.a.0, Channel::of(id, false)));
            }
        }
        for a in &mut adj {
            a.sort_by_key(|&(_, c): &(u32, Channel)| c);
        }
        let host = topo.kinds.iter().map(|k| *k == NodeKind::Host).collect();
        ShortestPaths {
            adj,
            host,
            dist: (0..n).map(|_| OnceCell::new()).collect(),
            seed,
        }
    }

    fn distances(&self, dst: usize) -> &Vec<u32> {
        self.dist[dst].get_or_init(|| {
            let mut d = vec![u32::MAX; self.adj.len()];
            d[dst] = 0;
            let mut q = std::collections::VecDeque::from([dst]);
            while let Some(u) = q.pop_front() {
                // a host relays nothing: distances only propagate out of the destination or switches
                if u != dst && self.host[u] {
                    continue;
                }
                for &(v, _) in &self.adj[u] {
                    if d[v as usize] == u32::MAX {
                        d[v as usize] = d[u] + 1;
                        q.push_back(v as usize);
                    }
                }
            }
            d
        })
    }
}

impl PathSource for ShortestPaths {
    fn path(&self, src: NodeId, dst: NodeId, key: u64) -> Result<Vec<Channel>, String> {
        let n = self.adj.len();
        if src.idx() >= n || dst.idx() >= n {
            return Err(format!(
                "node {} or {} is not in the topology ({n} nodes)",
                src, dst
            ));
        }
        if src == dst {
            return Ok(Vec::new());
        }
        let d = self.distances(dst.idx());
        if d[src.idx()] == u32::MAX {
            return Err(format!("no path from node {src} to node {dst}"));
        }
        let mut path = Vec::with_capacity(d[src.idx()] as usize);
        let mut u = src.idx();
        let mut cands: Vec<Channel> = Vec::new();
        while u != dst.idx() {
            cands.clear();
            let mut next = Vec::new();
            for &(v, c) in &self.adj[u] {
                if d[v as usize] + 1 == d[u] && (v as usize == dst.idx() || !self.host[v as usize])
                {
                    cands.push(c);
                    next.push(v);
                }
            }
            if cands.is_empty() {
                return Err(format!("no path from node {src} to node {dst}"));
            }
            let pick = ecmp_choice(self.seed, key, NodeId(u as u32), cands.len());
            path.push(cands[pick]);
            u = next[pick] as usize;
        }
        Ok(path)
    }
}

/// The routes `ina3d replay` uses: the shared `topology::Routing` between hosts, and
/// [`ShortestPaths`] (same links, same ECMP rule) when an end is a switch.
pub struct SharedRoutes<'a> {
    shared: &'a Routing,
    local: ShortestPaths,
    host: Vec<bool>,
}

impl<'a> SharedRoutes<'a> {
    /// Routes over `topo` with its precomputed `routing` (whose seed is reused).
    pub fn new(topo: &Topology, routing: &'a Routing) -> Self {
        SharedRoutes {
            shared: routing,
            local: ShortestPaths::new(topo, routing.seed()),
            host: topo.kinds.iter().map(|k| *k == NodeKind::Host).collect(),
        }
    }
}

impl PathSource for SharedRoutes<'_> {
    fn path(&self, src: NodeId, dst: NodeId, key: u64) -> Result<Vec<Channel>, String> {
        let h = |v: NodeId| self.host.get(v.idx()).copied().unwrap_or(false);
        if h(src) && h(dst) {
            self.shared.path(src, dst, key).map_err(|e| e.to_string())
        } else {
            self.local.path(src, dst, key)
        }
    }
}
