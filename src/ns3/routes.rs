//! Per-destination shortest-path routes for the ns-3 glue (see the module docs of
//! [`crate::ns3`] for how they relate to the replayer's per-flow ECMP).
//!
//! Only the network carries packets: NVLink links are left out (intra-server traffic is
//! an NVLink record with an analytical duration), and hosts never forward.

use super::Ns3Error;
use crate::topology::{LinkKind, NodeKind, Topology};
use crate::units::{BitsPerSec, Bytes, LinkId, Nanos, NodeId};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Deterministic 64-bit mixer (splitmix64), so routes do not depend on std's RandomState.
pub fn mix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// For each destination, every node's next hop (node, link) towards it.
#[derive(Clone, Debug)]
pub struct DestRoutes {
    next: BTreeMap<NodeId, Vec<Option<(NodeId, LinkId)>>>,
}

impl DestRoutes {
    /// Shortest-path next hops towards every node of `dsts`; among equal-cost next hops one
    /// is chosen per (node, destination) by a seeded hash.
    pub fn new(topo: &Topology, dsts: &BTreeSet<NodeId>, seed: u64) -> Self {
        let n = topo.node_count();
        // adjacency: (neighbour, lowest link id to it) — parallel links collapse to the first,
        // as the glue installs routes on the first link between two nodes.
        let mut adj: Vec<BTreeMap<NodeId, LinkId>> = vec![BTreeMap::new(); n];
        for (i, l) in topo.links.iter().enumerate() {
            if l.kind == LinkKind::NvLink || l.a.idx() >= n || l.b.idx() >= n {
                continue;
            }
            adj[l.a.idx()].entry(l.b).or_insert(LinkId(i as u32));
            adj[l.b.idx()].entry(l.a).or_insert(LinkId(i as u32));
        }
        let mut next = BTreeMap::new();
        for &d in dsts {
            if d.idx() >= n {
                continue;
            }
            let mut dist = vec![u32::MAX; n];
            dist[d.idx()] = 0;
            let mut q = VecDeque::from([d]);
            while let Some(u) = q.pop_front() {
                // Hosts terminate paths: they are sources, never transit.
                if u != d && topo.kinds[u.idx()] == NodeKind::Host {
                    continue;
                }
                for &v in adj[u.idx()].keys() {
                    if dist[v.idx()] == u32::MAX {
                        dist[v.idx()] = dist[u.idx()] + 1;
                        q.push_back(v);
                    }
                }
            }
            let mut hops = vec![None; n];
            for u in 0..n {
                if u == d.idx() || dist[u] == u32::MAX {
                    continue;
                }
                let cands: Vec<(NodeId, LinkId)> = adj[u]
                    .iter()
                    .filter(|(v, _)| {
                        dist[v.idx()].checked_add(1) == Some(dist[u]) && (**v == d || topo.kinds[v.idx()] != NodeKind::Host)
                    })
                    .map(|(v, l)| (*v, *l))
                    .collect();
                if !cands.is_empty() {
                    let h = mix64(seed ^ mix64(((u as u64) << 32) | d.0 as u64));
                    hops[u] = Some(cands[(h % cands.len() as u64) as usize]);
                }
            }
            next.insert(d, hops);
        }
        DestRoutes { next }
    }

    /// Next hop from `node` towards `dst`, if routed.
    pub fn next_hop(&self, node: NodeId, dst: NodeId) -> Option<(NodeId, LinkId)> {
        self.next.get(&dst)?.get(node.idx()).copied().flatten()
    }

    /// Every `(node, dst, next_hop)` in (dst, node) order.
    pub fn entries(&self) -> impl Iterator<Item = (NodeId, NodeId, NodeId)> + '_ {
        self.next.iter().flat_map(|(d, hops)| {
            hops.iter()
                .enumerate()
                .filter_map(move |(u, h)| h.map(|(v, _)| (NodeId(u as u32), *d, v)))
        })
    }

    /// The links from `src` to `dst`.
    pub fn path(&self, src: NodeId, dst: NodeId) -> Result<Vec<LinkId>, Ns3Error> {
        let mut links = Vec::new();
        let mut u = src;
        while u != dst {
            let (v, l) = self.next_hop(u, dst).ok_or(Ns3Error::NoRoute { src, dst })?;
            links.push(l);
            u = v;
            if links.len() > self.next.get(&dst).map_or(0, Vec::len) {
                return Err(Ns3Error::NoRoute { src, dst });
            }
        }
        Ok(links)
    }

    /// Completion time alone on an idle network: serialisation at the bottleneck rate plus
    /// the path's propagation delay (store-and-forward of one packet is not added, as in
    /// the HPCC family's `standalone_fct`).
    pub fn standalone(&self, topo: &Topology, src: NodeId, dst: NodeId, bytes: Bytes) -> Result<Nanos, Ns3Error> {
        if src == dst {
            return Ok(Nanos::ZERO);
        }
        let path = self.path(src, dst)?;
        let rate = path.iter().map(|l| topo.links[l.idx()].rate).min().unwrap_or(BitsPerSec(u64::MAX));
        let delay: Nanos = path.iter().map(|l| topo.links[l.idx()].delay).sum();
        Ok(rate.transmit_time(bytes) + delay)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::Link;

    /// hosts 0, 1 on switch 2; host 3 on switch 4; switches 2 and 4 joined by two paths via 5 and 6.
    fn diamond() -> Topology {
        let l = |a, b| Link { a: NodeId(a), b: NodeId(b), rate: BitsPerSec::gbps(100), delay: Nanos(1000), error_rate: 0.0, kind: LinkKind::Nic };
        let mut kinds = vec![NodeKind::Host, NodeKind::Host, NodeKind::Switch, NodeKind::Host];
        kinds.extend([NodeKind::Switch; 3]);
        Topology { kinds, links: vec![l(0, 2), l(1, 2), l(3, 4), l(2, 5), l(5, 4), l(2, 6), l(6, 4)], gpus: vec![NodeId(0), NodeId(1), NodeId(3)], gpus_per_server: 1, nvlink_rate: None, source: "diamond".into() }
    }

    #[test]
    fn every_flow_to_one_destination_shares_the_next_hop_of_each_node() {
        let t = diamond();
        let r = DestRoutes::new(&t, &[NodeId(3)].into(), 1);
        let p0 = r.path(NodeId(0), NodeId(3)).unwrap();
        let p1 = r.path(NodeId(1), NodeId(3)).unwrap();
        assert_eq!(p0.len(), 4);
        assert_eq!(p0[1..], p1[1..], "both go through the same spine");
    }

    #[test]
    fn hosts_never_forward_and_unrouted_pairs_are_an_error() {
        let t = diamond();
        let r = DestRoutes::new(&t, &[NodeId(0)].into(), 0);
        assert_eq!(r.next_hop(NodeId(1), NodeId(0)), Some((NodeId(2), LinkId(1))));
        assert!(matches!(r.path(NodeId(1), NodeId(3)), Err(Ns3Error::NoRoute { .. })));
    }

    #[test]
    fn standalone_time_is_bottleneck_serialisation_plus_path_delay() {
        let t = diamond();
        let r = DestRoutes::new(&t, &[NodeId(3)].into(), 0);
        // 1 MB at 100 Gbps = 80 µs, 4 hops of 1 µs
        assert_eq!(r.standalone(&t, NodeId(0), NodeId(3), Bytes(1_000_000)).unwrap(), Nanos(84_000));
    }

    #[test]
    fn the_route_hash_is_the_documented_splitmix64() {
        assert_eq!(mix64(0), 0xe220_a839_7b1d_cdaf);
    }
}
