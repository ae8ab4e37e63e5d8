//! The glue's routes: the replayer's path of every (source, destination) connection.
//!
//! ECMP is per connection in both back-ends ([`crate::topology::pair_key`]): the replayer
//! routes each net record and INA edge with [`Routing::connection_path`], and
//! [`PairRoutes`] asks the very same function (on the same topology and seed) for every
//! pair the glue carries, which `routes.txt` hands to the glue's `Ina3dPairRouting`
//! (forwarding by source and destination). So every record takes the same path in both.
//!
//! `routes.txt` is written by [`crate::formats::routes_txt`].
//!
//! Only the network carries packets: NVLink links are never on a path (intra-server
//! traffic is an NVLink record with an analytical duration), and hosts never forward.

use super::{InaPolicy, Ns3Error};
use crate::formats::routes_txt::{self, Hop};
use crate::record::{AggDir, FlowRecord, Mode};
use crate::topology::{LinkKind, NodeKind, Routing, Topology};
use crate::units::{BitsPerSec, Bytes, Nanos, NodeId};
use std::collections::{BTreeMap, BTreeSet};

/// The (src, dst) pairs whose packets the glue sends for `records`: every net record and
/// INA edge (switch ends included) and its reverse direction (TCP ACKs; INA results), and,
/// under the best-effort policy, the pairs of each aggregation's fallback host ring in
/// both directions (data and acknowledgements): its workers in the order of their up
/// edges, each to the next, as the replayer's ring and the glue's run it.
pub fn glue_pairs(
    records: &[FlowRecord],
    topo: &Topology,
    policy: InaPolicy,
) -> BTreeSet<(NodeId, NodeId)> {
    let mut pairs = BTreeSet::new();
    let mut rings: BTreeMap<u64, Vec<NodeId>> = BTreeMap::new();
    for r in records
        .iter()
        .filter(|r| matches!(r.mode, Mode::Net | Mode::Ina) && r.src != r.dst)
    {
        pairs.insert((r.src, r.dst));
        pairs.insert((r.dst, r.src));
        if let (Mode::Ina, Some(a)) = (r.mode, r.agg) {
            let ring = rings.entry(a.id).or_default();
            if a.dir == AggDir::Up
                && topo.kinds.get(r.src.idx()) == Some(&NodeKind::Host)
                && !ring.contains(&r.src)
            {
                ring.push(r.src);
            }
        }
    }
    if policy == InaPolicy::BestEffort {
        for ring in rings.values().filter(|r| r.len() > 1) {
            for (k, &a) in ring.iter().enumerate() {
                let b = ring[(k + 1) % ring.len()];
                pairs.insert((a, b));
                pairs.insert((b, a));
            }
        }
    }
    pairs
}

/// The path of every routed pair, from the replayer's own route function.
#[derive(Clone, Debug, PartialEq)]
pub struct PairRoutes {
    paths: BTreeMap<(NodeId, NodeId), Vec<Hop>>,
}

impl PairRoutes {
    /// The path of every pair in `pairs` ([`Routing::connection_path`] on `topo` with ECMP
    /// seed `seed`, as the replayer routes).
    pub fn new(
        topo: &Topology,
        seed: u64,
        pairs: &BTreeSet<(NodeId, NodeId)>,
    ) -> Result<Self, Ns3Error> {
        let routing = Routing::new(topo, seed).map_err(|e| Ns3Error::Routing(e.to_string()))?;
        let mut paths = BTreeMap::new();
        for &(src, dst) in pairs {
            if src == dst {
                continue;
            }
            let chans = routing
                .connection_path(src, dst)
                .map_err(|_| Ns3Error::NoRoute { src, dst })?;
            let hops = chans
                .iter()
                .map(|&c| {
                    let (_, to) = topo.channel_ends(c);
                    (to, c.link())
                })
                .collect();
            paths.insert((src, dst), hops);
        }
        Ok(PairRoutes { paths })
    }

    /// The hops from `src` to `dst` (empty when `src == dst`), or [`Ns3Error::NoRoute`]
    /// for a pair that is not routed.
    pub fn path(&self, src: NodeId, dst: NodeId) -> Result<&[Hop], Ns3Error> {
        if src == dst {
            return Ok(&[]);
        }
        self.paths
            .get(&(src, dst))
            .map(Vec::as_slice)
            .ok_or(Ns3Error::NoRoute { src, dst })
    }

    /// Every routed pair and its hops, in (src, dst) order.
    pub fn iter(&self) -> impl Iterator<Item = (NodeId, NodeId, &[Hop])> + '_ {
        self.paths.iter().map(|(&(s, d), h)| (s, d, h.as_slice()))
    }

    /// Number of routed pairs.
    pub fn len(&self) -> usize {
        self.paths.len()
    }

    /// True when no pair is routed.
    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }

    /// Completion time alone on an idle network: serialisation at the bottleneck rate plus
    /// the path's propagation delay (store-and-forward of one packet is not added, as in
    /// the HPCC family's `standalone_fct`).
    pub fn standalone(
        &self,
        topo: &Topology,
        src: NodeId,
        dst: NodeId,
        bytes: Bytes,
    ) -> Result<Nanos, Ns3Error> {
        if src == dst {
            return Ok(Nanos::ZERO);
        }
        let path = self.path(src, dst)?;
        let rate = path
            .iter()
            .map(|(_, l)| topo.links[l.idx()].rate)
            .min()
            .unwrap_or(BitsPerSec(u64::MAX));
        let delay: Nanos = path.iter().map(|(_, l)| topo.links[l.idx()].delay).sum();
        Ok(rate.transmit_time(bytes) + delay)
    }

    /// `routes.txt` text ([`routes_txt`]) and the number of `PATH` lines: every pair's
    /// path, and each host's address facing its first network link.
    pub fn text(&self, topo: &Topology) -> (String, usize) {
        let mut r = routes_txt::Routes::default();
        for (i, k) in topo.kinds.iter().enumerate() {
            if *k != NodeKind::Host {
                continue;
            }
            let nic = topo
                .links
                .iter()
                .find(|l| l.kind != LinkKind::NvLink && (l.a.idx() == i || l.b.idx() == i));
            if let Some(l) = nic {
                let peer = if l.a.idx() == i { l.b } else { l.a };
                r.addrs.push((NodeId(i as u32), peer));
            }
        }
        r.paths = self.paths.clone();
        (routes_txt::to_string(&r), self.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Class;
    use crate::topology::{pair_key, Link};
    use crate::units::FlowId;

    /// hosts 0, 1 on switch 2; host 3 on switch 4; switches 2 and 4 joined by two paths via 5 and 6.
    fn diamond() -> Topology {
        let l = |a, b| Link {
            a: NodeId(a),
            b: NodeId(b),
            rate: BitsPerSec::gbps(100),
            delay: Nanos(1000),
            error_rate: 0.0,
            kind: LinkKind::Nic,
        };
        let mut kinds = vec![
            NodeKind::Host,
            NodeKind::Host,
            NodeKind::Switch,
            NodeKind::Host,
        ];
        kinds.extend([NodeKind::Switch; 3]);
        Topology {
            kinds,
            links: vec![
                l(0, 2),
                l(1, 2),
                l(3, 4),
                l(2, 5),
                l(5, 4),
                l(2, 6),
                l(6, 4),
            ],
            gpus: vec![NodeId(0), NodeId(1), NodeId(3)],
            gpus_per_server: 1,
            nvlink_rate: None,
            source: "diamond".into(),
        }
    }

    fn net(id: u64, src: u32, dst: u32) -> FlowRecord {
        FlowRecord {
            id: FlowId(id),
            src: NodeId(src),
            dst: NodeId(dst),
            bytes: Bytes(1000),
            deps: vec![],
            gap: Nanos::ZERO,
            dur: Nanos::ZERO,
            mode: Mode::Net,
            class: Class::Dp,
            ..Default::default()
        }
    }

    #[test]
    fn every_pair_takes_the_replayers_connection_path_and_its_reverse_is_routed_too() {
        let t = diamond();
        let pairs = glue_pairs(&[net(0, 0, 3), net(1, 1, 3)], &t, InaPolicy::Static);
        assert_eq!(pairs.len(), 4, "two pairs and their reverses");
        let r = PairRoutes::new(&t, 5, &pairs).unwrap();
        let routing = Routing::new(&t, 5).unwrap();
        for (s, d) in pairs {
            let want = routing.path(s, d, pair_key(s, d)).unwrap();
            let got = r.path(s, d).unwrap();
            assert_eq!(
                got.iter().map(|h| h.1).collect::<Vec<_>>(),
                want.iter().map(|c| c.link()).collect::<Vec<_>>()
            );
            assert_eq!(got.last().unwrap().0, d);
        }
    }

    #[test]
    fn routes_txt_reads_back_as_the_same_paths_and_unrouted_pairs_are_an_error() {
        let t = diamond();
        let r =
            PairRoutes::new(&t, 0, &glue_pairs(&[net(0, 0, 3)], &t, InaPolicy::Static)).unwrap();
        let (text, n) = r.text(&t);
        assert_eq!(n, 2);
        assert!(text.contains("ADDR 0 2\n"), "{text}");
        let back = routes_txt::parse(std::path::Path::new("routes.txt"), &text)
            .unwrap()
            .paths;
        assert_eq!(back.len(), 2);
        for (s, d, hops) in r.iter() {
            assert_eq!(back[&(s, d)], hops);
        }
        assert!(matches!(
            r.path(NodeId(1), NodeId(3)),
            Err(Ns3Error::NoRoute { .. })
        ));
    }

    #[test]
    fn standalone_time_is_bottleneck_serialisation_plus_path_delay() {
        let t = diamond();
        let r = PairRoutes::new(&t, 0, &[(NodeId(0), NodeId(3))].into()).unwrap();
        // 1 MB at 100 Gbps = 80 µs, 4 hops of 1 µs
        assert_eq!(
            r.standalone(&t, NodeId(0), NodeId(3), Bytes(1_000_000))
                .unwrap(),
            Nanos(84_000)
        );
    }

    #[test]
    fn best_effort_routes_the_fallback_ring_of_the_workers_in_up_edge_order_both_ways() {
        use crate::record::AggTag;
        let edge = |id, src, dst, sw, dir| FlowRecord {
            mode: Mode::Ina,
            agg: Some(AggTag {
                id: 9,
                switch: NodeId(sw),
                fanin: 2,
                dir,
            }),
            ..net(id, src, dst)
        };
        // workers 3, 1 and 0 (in that up-edge order) under switches 2 and 4, root 5
        let recs = [
            edge(0, 3, 4, 4, AggDir::Up),
            edge(1, 1, 2, 2, AggDir::Up),
            edge(2, 0, 2, 2, AggDir::Up),
            edge(3, 2, 5, 5, AggDir::Up),
            edge(4, 4, 5, 5, AggDir::Up),
        ];
        let fallback = glue_pairs(&recs, &diamond(), InaPolicy::BestEffort);
        let plain = glue_pairs(&recs, &diamond(), InaPolicy::Static);
        let extra: Vec<_> = fallback.difference(&plain).copied().collect();
        let n = |a, b| (NodeId(a), NodeId(b));
        // the ring 3 -> 1 -> 0 -> 3 and its reverse; no switch pair is added
        assert_eq!(
            extra,
            vec![n(0, 1), n(0, 3), n(1, 0), n(1, 3), n(3, 0), n(3, 1)]
        );
    }
}
