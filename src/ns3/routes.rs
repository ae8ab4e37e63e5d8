//! The glue's routes: the replayer's path of every (source, destination) connection.
//!
//! ECMP is per connection in both back-ends ([`crate::topology::pair_key`]): the replayer
//! routes each net record and INA edge with [`Routing::connection_path`], and
//! [`PairRoutes`] asks the very same function (on the same topology and seed) for every
//! pair the glue carries, which `routes.txt` hands to the glue's `Ina3dPairRouting`
//! (forwarding by source and destination). So every record takes the same path in both.
//!
//! `routes.txt` (glue routes v2): `#` comments; `ADDR node peer` (a host's identity
//! address is its interface towards `peer`); `PATH src dst node:link …`, one line per
//! routed pair, the hops in order from `src` — each the next node and the `topology.txt`
//! link row (0-based) crossed to reach it — ending at `dst`.
//!
//! Only the network carries packets: NVLink links are never on a path (intra-server
//! traffic is an NVLink record with an analytical duration), and hosts never forward.

use super::{InaPolicy, Ns3Error};
use crate::record::{AggDir, FlowRecord, Mode};
use crate::topology::{LinkKind, NodeKind, Routing, Topology};
use crate::units::{BitsPerSec, Bytes, LinkId, Nanos, NodeId};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

/// One hop of a path: the node reached and the link crossed to reach it.
pub type Hop = (NodeId, LinkId);

/// The (src, dst) pairs whose packets the glue sends for `records`: every net record and
/// INA edge (switch ends included) and its reverse direction (TCP ACKs; INA results), and,
/// under the best-effort policy, each aggregating switch to and from its aggregation's
/// fallback host (the lowest-id worker, as the glue picks it).
pub fn glue_pairs(
    records: &[FlowRecord],
    topo: &Topology,
    policy: InaPolicy,
) -> BTreeSet<(NodeId, NodeId)> {
    let mut pairs = BTreeSet::new();
    let mut aggs: BTreeMap<u64, (BTreeSet<NodeId>, Option<NodeId>)> = BTreeMap::new();
    for r in records
        .iter()
        .filter(|r| matches!(r.mode, Mode::Net | Mode::Ina) && r.src != r.dst)
    {
        pairs.insert((r.src, r.dst));
        pairs.insert((r.dst, r.src));
        if let (Mode::Ina, Some(a)) = (r.mode, r.agg) {
            let e = aggs.entry(a.id).or_default();
            e.0.insert(a.switch);
            if a.dir == AggDir::Up && topo.kinds.get(r.src.idx()) == Some(&NodeKind::Host) {
                e.1 = Some(e.1.map_or(r.src, |w: NodeId| w.min(r.src)));
            }
        }
    }
    if policy == InaPolicy::BestEffort {
        for (switches, fallback) in aggs.values() {
            let Some(host) = *fallback else { continue };
            for &s in switches {
                if s != host {
                    pairs.insert((s, host));
                    pairs.insert((host, s));
                }
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

    /// `routes.txt` text (format in the module docs) and the number of `PATH` lines.
    pub fn text(&self, topo: &Topology) -> (String, usize) {
        let mut s = String::from("# ina3d-ns3 routes v2: ADDR node peer | PATH src dst node:link... (hops from src; link = topology.txt row, 0-based)\n");
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
                let _ = writeln!(s, "ADDR {i} {peer}");
            }
        }
        for (src, dst, hops) in self.iter() {
            let _ = write!(s, "PATH {src} {dst}");
            for (n, l) in hops {
                let _ = write!(s, " {n}:{}", l.0);
            }
            s.push('\n');
        }
        (s, self.len())
    }
}

/// Read the `PATH` lines of a `routes.txt` back ((src, dst) → hops); `ADDR` lines are
/// checked for shape only. Errors name the file, line and field.
pub fn read_routes_txt(
    path: &Path,
    text: &str,
) -> Result<BTreeMap<(NodeId, NodeId), Vec<Hop>>, Ns3Error> {
    let mut out = BTreeMap::new();
    for (i, raw) in text.lines().enumerate() {
        let no = i + 1;
        let t: Vec<&str> = raw.split_whitespace().collect();
        if t.is_empty() || t[0].starts_with('#') {
            continue;
        }
        let node = |k: usize, field: &str| -> Result<NodeId, Ns3Error> {
            t.get(k)
                .and_then(|v| v.parse().ok())
                .map(NodeId)
                .ok_or_else(|| {
                    Ns3Error::parse(
                        path,
                        no,
                        field,
                        format!("expected a node id, found `{}`", t.get(k).unwrap_or(&"")),
                    )
                })
        };
        match t[0] {
            "ADDR" if t.len() == 3 => {
                node(1, "node")?;
                node(2, "peer")?;
            }
            "PATH" if t.len() >= 4 => {
                let (src, dst) = (node(1, "src")?, node(2, "dst")?);
                let hops = t[3..]
                    .iter()
                    .map(|h| {
                        let (n, l) = h.split_once(':').ok_or_else(|| Ns3Error::parse(path, no, "hop", format!("expected `node:link`, found `{h}`")))?;
                        match (n.parse(), l.parse()) {
                            (Ok(n), Ok(l)) => Ok((NodeId(n), LinkId(l))),
                            _ => Err(Ns3Error::parse(path, no, "hop", format!("expected `node:link`, found `{h}`"))),
                        }
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                if hops.last().map(|h| h.0) != Some(dst) {
                    return Err(Ns3Error::parse(path, no, "hop", format!("the path does not end at its destination {dst}")));
                }
                if out.insert((src, dst), hops).is_some() {
                    return Err(Ns3Error::parse(path, no, "PATH", format!("pair {src} {dst} is routed twice")));
                }
            }
            other => return Err(Ns3Error::parse(path, no, "keyword", format!("expected `ADDR node peer` or `PATH src dst node:link...`, found `{other}` with {} fields", t.len()))),
        }
    }
    Ok(out)
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
        let back = read_routes_txt(Path::new("routes.txt"), &text).unwrap();
        assert_eq!(back.len(), 2);
        for (s, d, hops) in r.iter() {
            assert_eq!(back[&(s, d)], hops);
        }
        assert!(matches!(
            r.path(NodeId(1), NodeId(3)),
            Err(Ns3Error::NoRoute { .. })
        ));
        let bad = read_routes_txt(Path::new("routes.txt"), "PATH 0 3 2:0 5\n")
            .unwrap_err()
            .to_string();
        assert!(bad.contains("routes.txt:1: hop"), "{bad}");
        let short = read_routes_txt(Path::new("routes.txt"), "PATH 0 3 2:0\n")
            .unwrap_err()
            .to_string();
        assert!(
            short.contains("does not end at its destination 3"),
            "{short}"
        );
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
    fn best_effort_routes_each_aggregating_switch_to_and_from_the_lowest_worker() {
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
        // workers 1 and 3 under switches 2 and 4, root 5
        let recs = [
            edge(0, 1, 2, 2, AggDir::Up),
            edge(1, 3, 4, 4, AggDir::Up),
            edge(2, 2, 5, 5, AggDir::Up),
            edge(3, 4, 5, 5, AggDir::Up),
        ];
        let fallback = glue_pairs(&recs, &diamond(), InaPolicy::BestEffort);
        let plain = glue_pairs(&recs, &diamond(), InaPolicy::Static);
        let extra: Vec<_> = fallback.difference(&plain).copied().collect();
        let n = |a, b| (NodeId(a), NodeId(b));
        assert_eq!(
            extra,
            vec![n(1, 4), n(1, 5), n(4, 1), n(5, 1)],
            "switch 2 already talks to host 1"
        );
    }
}
