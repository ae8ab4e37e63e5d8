//! In-network aggregation (docs/model.md#in-network-aggregation): a collective over an
//! aggregation tree, and Rina (racks reduced into their ToR, the ToRs and the other members
//! in a ring).

use super::{LowerError, Lowering, Sink, Xfer};
use crate::record::{AggDir, AggTag, Mode};
use crate::schedule::CollKind;
use crate::topology::Topology;
use crate::units::{Bytes, Nanos, NodeId, Rank};
use std::collections::{BTreeMap, HashMap};

/// Rina's racks of a group: the members under each aggregating ToR that holds at least two
/// of them, and the members that stay plain ring workers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RinaRacks {
    /// ToR → its members (rank order).
    pub racks: BTreeMap<NodeId, Vec<Rank>>,
    /// Members outside every rack.
    pub plain: Vec<Rank>,
}

/// Rina's racks of `members`: each member's ToR (`tor[host]`) that may aggregate (`may`),
/// when at least two members share it; the other members stay plain ring workers.
pub fn rina_racks(
    topo: &Topology,
    members: &[Rank],
    tor: &[Option<NodeId>],
    may: impl Fn(NodeId) -> bool,
) -> RinaRacks {
    let mut racks: BTreeMap<NodeId, Vec<Rank>> = BTreeMap::new();
    let mut plain: Vec<Rank> = Vec::new();
    for &r in members {
        let node = topo.gpu(r);
        match tor[node.idx()] {
            Some(t) if may(t) => racks.entry(t).or_default().push(r),
            _ => plain.push(r),
        }
    }
    racks.retain(|_, v| {
        if v.len() < 2 {
            plain.extend(v.iter().copied());
            false
        } else {
            true
        }
    });
    RinaRacks { racks, plain }
}

/// A worker of Rina's ring: a ToR standing for its rack (with the up edges into it), or a
/// plain GPU.
enum RinaWorker<Id> {
    Tor(NodeId, Vec<Id>),
    Gpu(Rank),
}

/// A ToR's multicast of the result to its rack.
struct RinaDown<Id> {
    tor: NodeId,
    agg: u64,
    deps: Vec<Id>,
    step: u32,
}

impl Lowering<'_> {
    /// One edge of an INA aggregation: an `ina` transfer of step `step` of collective
    /// `coll` over `group` members, aggregated as `agg` says (no fixed duration: the
    /// back-ends stream it with the other edges of its aggregation).
    #[allow(clippy::too_many_arguments)]
    fn ina_edge<S: Sink>(
        &self,
        sink: &mut S,
        src: NodeId,
        dst: NodeId,
        bytes: Bytes,
        deps: Vec<S::Id>,
        gap: Nanos,
        coll: u64,
        step: u32,
        group: u32,
        agg: AggTag,
    ) -> Result<S::Id, S::Error> {
        sink.emit(Xfer {
            step: Some(step),
            group: Some(group),
            agg: Some(agg),
            ..Xfer::new(Mode::Ina, (src, dst), bytes, deps, gap, Some(coll))
        })
    }

    /// An INA all-reduce (or reduce-scatter) over `edges` (child, parent, fan-in at
    /// parent), bottom-up with the root's edges last: every edge carries S up; down edges
    /// carry S (all-reduce) or the members' shards below them (reduce-scatter).
    #[allow(clippy::too_many_arguments)]
    pub fn tree<S: Sink>(
        &self,
        sink: &mut S,
        kind: CollKind,
        bytes: Bytes,
        members: &[Rank],
        coll: u64,
        edges: &[(NodeId, NodeId, u32)],
    ) -> Result<(), S::Error> {
        let nodes: Vec<NodeId> = members.iter().map(|r| self.topo.gpu(*r)).collect();
        if edges.is_empty() {
            return Err(LowerError::EmptyTree(nodes.len()).into());
        }
        // Bottom-up order is given by the tree; keep it stable for determinism.
        let rank_of: HashMap<NodeId, Rank> =
            nodes.iter().copied().zip(members.iter().copied()).collect();
        let n = members.len() as u64;
        // Leaves below each node (for reduce-scatter shard sizes).
        let mut below: HashMap<NodeId, u64> = nodes.iter().map(|&m| (m, 1)).collect();
        for &(c, p, _) in edges {
            let b = below.get(&c).copied().unwrap_or(0);
            *below.entry(p).or_default() += b;
        }
        let agg = sink.new_agg();
        let mut up_into: HashMap<NodeId, Vec<S::Id>> = HashMap::new();
        for &(c, p, fanin) in edges {
            let (deps, gap) = match rank_of.get(&c) {
                Some(&r) => sink.start(r)?,
                None => (up_into.remove(&c).unwrap_or_default(), Nanos(0)),
            };
            let id = self.ina_edge(
                sink,
                c,
                p,
                bytes,
                deps,
                gap,
                coll,
                0,
                members.len() as u32,
                AggTag {
                    id: agg,
                    switch: p,
                    fanin,
                    dir: AggDir::Up,
                    group: sink.agg_group(),
                },
            )?;
            up_into.entry(p).or_default().push(id);
        }
        let root = edges.last().map(|e| e.1).expect("edges");
        let root_in = up_into.remove(&root).unwrap_or_default();
        let mut down_into: HashMap<NodeId, S::Id> = HashMap::new();
        for &(c, p, fanin) in edges.iter().rev() {
            let deps = if p == root {
                root_in.clone()
            } else {
                match down_into.get(&p) {
                    Some(&d) => vec![d],
                    None => {
                        return Err(LowerError::BadTree(format!(
                            "edge {c} → {p}: {p} is neither the root nor below it"
                        ))
                        .into())
                    }
                }
            };
            let b = match kind {
                CollKind::ReduceScatter => Bytes(bytes.0 * below.get(&c).copied().unwrap_or(1) / n),
                _ => bytes,
            };
            let id = self.ina_edge(
                sink,
                p,
                c,
                b,
                deps,
                Nanos(0),
                coll,
                1,
                members.len() as u32,
                AggTag {
                    id: agg,
                    switch: p,
                    fanin,
                    dir: AggDir::Down,
                    group: sink.agg_group(),
                },
            )?;
            down_into.insert(c, id);
            if let Some(&r) = rank_of.get(&c) {
                sink.set_tail(r, &[id]);
            }
        }
        Ok(())
    }

    /// Rina: members under an aggregating ToR with at least two members reduce into the ToR
    /// (an up-only aggregation), the ToRs and the remaining members run a ring all-reduce of
    /// S as equal workers, then each ToR multicasts the result (a down-only aggregation).
    /// Without racks it is the ring.
    pub fn rina<S: Sink>(
        &self,
        sink: &mut S,
        bytes: Bytes,
        members: &[Rank],
        coll: u64,
        r: &RinaRacks,
    ) -> Result<(), S::Error> {
        let (racks, plain) = (&r.racks, &r.plain);
        if racks.is_empty() {
            return self.ring(sink, CollKind::AllReduce, bytes, members, coll);
        }
        let n_members = members.len() as u32;
        // Ring workers in rank order of their first member.
        let mut workers: Vec<(Rank, RinaWorker<S::Id>)> =
            plain.iter().map(|&r| (r, RinaWorker::Gpu(r))).collect();
        let mut rack_agg: BTreeMap<NodeId, u64> = BTreeMap::new();
        for (tor, rs) in racks {
            let (agg, ups) = self.rina_reduce_into_tor(sink, *tor, rs, bytes, n_members, coll)?;
            rack_agg.insert(*tor, agg);
            workers.push((rs[0], RinaWorker::Tor(*tor, ups)));
        }
        workers.sort_by_key(|w| w.0);
        if workers.len() == 1 {
            // One rack holds everyone: plain single-switch aggregation.
            if let (_, RinaWorker::Tor(tor, ups)) = &workers[0] {
                let down = RinaDown {
                    tor: *tor,
                    agg: rack_agg[tor],
                    deps: ups.clone(),
                    step: 1,
                };
                self.rina_multicast(sink, &racks[tor], &down, bytes, n_members, coll)?;
            }
            return Ok(());
        }
        let done = self.rina_ring(sink, &workers, bytes, coll)?;
        let steps = super::ring_steps(CollKind::AllReduce, workers.len() as u64) as u32;
        for (i, (_, w)) in workers.iter().enumerate() {
            match w {
                RinaWorker::Gpu(r) => sink.chain(*r).tail = done[i].clone(),
                RinaWorker::Tor(tor, _) => {
                    let down = RinaDown {
                        tor: *tor,
                        agg: sink.new_agg(),
                        deps: done[i].clone(),
                        step: steps + 1,
                    };
                    self.rina_multicast(sink, &racks[tor], &down, bytes, n_members, coll)?;
                }
            }
        }
        Ok(())
    }

    /// The rack's members reduce S into their ToR: an up-only aggregation. Returns its id
    /// and the up edges (what the ToR's ring steps wait for).
    fn rina_reduce_into_tor<S: Sink>(
        &self,
        sink: &mut S,
        tor: NodeId,
        rs: &[Rank],
        bytes: Bytes,
        n_members: u32,
        coll: u64,
    ) -> Result<(u64, Vec<S::Id>), S::Error> {
        let agg = sink.new_agg();
        let mut ups = Vec::new();
        for &r in rs {
            let (deps, gap) = sink.start(r)?;
            ups.push(self.ina_edge(
                sink,
                self.topo.gpu(r),
                tor,
                bytes,
                deps,
                gap,
                coll,
                0,
                n_members,
                AggTag {
                    id: agg,
                    switch: tor,
                    fanin: rs.len() as u32,
                    dir: AggDir::Up,
                    group: sink.agg_group(),
                },
            )?);
        }
        Ok((agg, ups))
    }

    /// The ring all-reduce of S among Rina's workers (`net` transfers whose ends may be
    /// ToRs); returns, per worker, the transfers its completion waits for.
    fn rina_ring<S: Sink>(
        &self,
        sink: &mut S,
        workers: &[(Rank, RinaWorker<S::Id>)],
        bytes: Bytes,
        coll: u64,
    ) -> Result<Vec<Vec<S::Id>>, S::Error> {
        let n = workers.len();
        let node_of = |w: &RinaWorker<S::Id>| match w {
            RinaWorker::Tor(t, _) => *t,
            RinaWorker::Gpu(r) => self.topo.gpu(*r),
        };
        let steps = super::ring_steps(CollKind::AllReduce, n as u64) as usize;
        let prev = self.ring_schedule(
            sink,
            n,
            steps,
            bytes,
            &mut |sink, i| match &workers[i].1 {
                RinaWorker::Tor(_, ups) => Ok((ups.clone(), Nanos(0))),
                RinaWorker::Gpu(r) => sink.start(*r),
            },
            &mut |lw, sink, i, k, b, deps, gap| {
                let (a, to) = (node_of(&workers[i].1), node_of(&workers[(i + 1) % n].1));
                sink.emit(lw.on_channel(Xfer {
                    step: Some(k + 1),
                    ..Xfer::new(Mode::Net, (a, to), b, deps, gap, Some(coll))
                }))
            },
        )?;
        Ok((0..n)
            .map(|i| vec![prev[i], prev[(i + n - 1) % n]])
            .collect())
    }

    /// The ToR sends the result down to its rack: a down-only aggregation `down.agg`.
    fn rina_multicast<S: Sink>(
        &self,
        sink: &mut S,
        rs: &[Rank],
        down: &RinaDown<S::Id>,
        bytes: Bytes,
        n_members: u32,
        coll: u64,
    ) -> Result<(), S::Error> {
        for &r in rs {
            let id = self.ina_edge(
                sink,
                down.tor,
                self.topo.gpu(r),
                bytes,
                down.deps.clone(),
                Nanos(0),
                coll,
                down.step,
                n_members,
                AggTag {
                    id: down.agg,
                    switch: down.tor,
                    fanin: rs.len() as u32,
                    dir: AggDir::Down,
                    group: sink.agg_group(),
                },
            )?;
            sink.set_tail(r, &[id]);
        }
        Ok(())
    }
}
