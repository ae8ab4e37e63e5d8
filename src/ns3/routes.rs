//! The glue's routes: the replayer's path of every connection, a (source, destination,
//! NCCL channel) triple.
//!
//! ECMP is per connection in both back-ends ([`crate::topology::connection_key`]): the
//! replayer routes channel `c` of a net record with [`Routing::channel_path`] (an INA edge
//! is channel 0, [`Routing::connection_path`]), and [`PairRoutes`] asks the very same
//! function (on the same topology and seed) for every connection the glue carries, which
//! `routes.txt` hands to the glue's `Ina3dPairRouting` (forwarding by source, destination
//! and the channel of the packet's connection). So every record takes the same path in both.
//!
//! `routes.txt` is written by [`crate::formats::routes_txt`].
//!
//! Only the network carries packets: NVLink links are never on a path (intra-server
//! traffic is an NVLink record with an analytical duration), and hosts never forward.

use super::{InaPolicy, Ns3Error};
use crate::formats::routes_txt::{self, Connection, Hop};
use crate::record::{AggDir, FlowRecord, Mode};
use crate::topology::{LinkKind, NodeKind, Routing, RoutingMode, Topology};
use crate::units::{BitsPerSec, Bytes, Nanos, NodeId};
use std::collections::{BTreeMap, BTreeSet};

/// The connections (src, dst, channel) whose packets the glue sends for `records`: every
/// net record on its NCCL channel and every INA edge (switch ends included; channel 0, as
/// [`super::emit::validate`] checks), each with its reverse direction on the same channel
/// (TCP ACKs and RoCE CNPs; INA results), and, under the best-effort policy, the pairs of
/// each aggregation's fallback host ring in both directions (data and acknowledgements)
/// on channel 0: its workers in the order of their up edges, each to the next, as the
/// replayer's ring and the glue's run it.
pub fn glue_pairs(
    records: &[FlowRecord],
    topo: &Topology,
    policy: InaPolicy,
) -> BTreeSet<Connection> {
    let mut pairs = BTreeSet::new();
    let mut rings: BTreeMap<u64, Vec<NodeId>> = BTreeMap::new();
    for r in records
        .iter()
        .filter(|r| matches!(r.mode, Mode::Net | Mode::Ina) && r.src != r.dst)
    {
        pairs.insert((r.src, r.dst, r.channel));
        pairs.insert((r.dst, r.src, r.channel));
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
                pairs.insert((a, b, 0));
                pairs.insert((b, a, 0));
            }
        }
    }
    pairs
}

/// The path of every routed connection, from the replayer's own route function.
#[derive(Clone, Debug, PartialEq)]
pub struct PairRoutes {
    paths: BTreeMap<Connection, Vec<Hop>>,
}

impl PairRoutes {
    /// The path of every connection in `pairs` ([`Routing::channel_path`] on `topo` with
    /// ECMP seed `seed`, as the replayer routes; channel 0 is the connection path).
    pub fn new(
        topo: &Topology,
        seed: u64,
        mode: RoutingMode,
        pairs: &BTreeSet<Connection>,
    ) -> Result<Self, Ns3Error> {
        if mode == RoutingMode::Spray {
            return Err(Ns3Error::Routing(
                "--routing spray: the ns-3 glue forwards each connection on the one path routes.txt gives it and does not spray packets yet; emit the trace under ecmp or dmodk".into(),
            ));
        }
        let routing =
            Routing::with_mode(topo, seed, mode).map_err(|e| Ns3Error::Routing(e.to_string()))?;
        let mut paths = BTreeMap::new();
        for &(src, dst, channel) in pairs {
            if src == dst {
                continue;
            }
            let chans = routing
                .channel_path(src, dst, channel)
                .map_err(|_| Ns3Error::NoRoute { src, dst })?;
            let hops = chans
                .iter()
                .map(|&c| {
                    let (_, to) = topo.channel_ends(c);
                    (to, c.link())
                })
                .collect();
            paths.insert((src, dst, channel), hops);
        }
        Ok(PairRoutes { paths })
    }

    /// The hops of channel `channel` from `src` to `dst` (empty when `src == dst`), or
    /// [`Ns3Error::NoRoute`] for a connection that is not routed.
    pub fn path(&self, src: NodeId, dst: NodeId, channel: u32) -> Result<&[Hop], Ns3Error> {
        if src == dst {
            return Ok(&[]);
        }
        self.paths
            .get(&(src, dst, channel))
            .map(Vec::as_slice)
            .ok_or(Ns3Error::NoRoute { src, dst })
    }

    /// Every routed connection and its hops, in (src, dst, channel) order.
    pub fn iter(&self) -> impl Iterator<Item = (Connection, &[Hop])> + '_ {
        self.paths.iter().map(|(&c, h)| (c, h.as_slice()))
    }

    /// Number of routed connections.
    pub fn len(&self) -> usize {
        self.paths.len()
    }

    /// True when no connection is routed.
    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }

    /// Completion time alone on an idle network of `bytes` on channel `channel` from `src`
    /// to `dst`: serialisation at the bottleneck rate plus the path's propagation delay
    /// (store-and-forward of one packet is not added, as in the HPCC family's
    /// `standalone_fct`).
    pub fn standalone(
        &self,
        topo: &Topology,
        (src, dst, channel): Connection,
        bytes: Bytes,
    ) -> Result<Nanos, Ns3Error> {
        if src == dst {
            return Ok(Nanos::ZERO);
        }
        let path = self.path(src, dst, channel)?;
        let rate = path
            .iter()
            .map(|(_, l)| topo.links[l.idx()].rate)
            .min()
            .unwrap_or(BitsPerSec(u64::MAX));
        let delay: Nanos = path.iter().map(|(_, l)| topo.links[l.idx()].delay).sum();
        Ok(rate.transmit_time(bytes) + delay)
    }

    /// `routes.txt` text ([`routes_txt`]) and the number of `PATH` lines: every
    /// connection's path, and each host's address facing its first network link.
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
    use crate::record::{AggGroup, Class};
    use crate::topology::{connection_key, Link};
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
            fabric: Default::default(),
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
    fn every_channel_takes_the_replayers_channel_path_and_its_reverse_is_routed_too() {
        let t = diamond();
        let on = |r: FlowRecord, channel| FlowRecord { channel, ..r };
        let recs = [
            net(0, 0, 3),
            net(1, 1, 3),
            on(net(2, 0, 3), 1),
            on(net(3, 0, 3), 5),
        ];
        let pairs = glue_pairs(&recs, &t, InaPolicy::Static);
        assert_eq!(pairs.len(), 8, "four connections and their reverses");
        let r = PairRoutes::new(&t, 5, RoutingMode::Ecmp, &pairs).unwrap();
        let routing = Routing::new(&t, 5).unwrap();
        for (s, d, c) in pairs {
            let want = routing.path(s, d, connection_key(s, d, c)).unwrap();
            let got = r.path(s, d, c).unwrap();
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
        let recs = [
            net(0, 0, 3),
            FlowRecord {
                channel: 1,
                ..net(1, 0, 3)
            },
        ];
        let r = PairRoutes::new(
            &t,
            0,
            RoutingMode::Ecmp,
            &glue_pairs(&recs, &t, InaPolicy::Static),
        )
        .unwrap();
        let (text, n) = r.text(&t);
        assert_eq!(n, 4, "two channels of one pair, both ways");
        assert!(text.contains("ADDR 0 2\n"), "{text}");
        let back = routes_txt::parse(std::path::Path::new("routes.txt"), &text)
            .unwrap()
            .paths;
        assert_eq!(back.len(), 4);
        for (c, hops) in r.iter() {
            assert_eq!(back[&c], hops);
        }
        assert!(matches!(
            r.path(NodeId(1), NodeId(3), 0),
            Err(Ns3Error::NoRoute { .. })
        ));
        assert!(matches!(
            r.path(NodeId(0), NodeId(3), 2),
            Err(Ns3Error::NoRoute { .. })
        ));
    }

    #[test]
    fn standalone_time_is_bottleneck_serialisation_plus_path_delay() {
        let t = diamond();
        let r = PairRoutes::new(
            &t,
            0,
            RoutingMode::Ecmp,
            &[(NodeId(0), NodeId(3), 0)].into(),
        )
        .unwrap();
        // 1 MB at 100 Gbps = 80 µs, 4 hops of 1 µs
        assert_eq!(
            r.standalone(&t, (NodeId(0), NodeId(3), 0), Bytes(1_000_000))
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
                group: AggGroup::Dense,
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
        let n = |a, b| (NodeId(a), NodeId(b), 0);
        // the ring 3 -> 1 -> 0 -> 3 and its reverse; no switch pair is added
        assert_eq!(
            extra,
            vec![n(0, 1), n(0, 3), n(1, 0), n(1, 3), n(3, 0), n(3, 1)]
        );
    }
}
