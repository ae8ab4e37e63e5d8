//! Everything fixed before the first event, built in named phases: id index, aggregation
//! grouping (with endpoint and tag validation), the dependants CSR, the cycle check, the
//! channel tables, the record paths and the aggregation units.
//!
//! Every phase either succeeds or names the record, node, link or aggregation at fault
//! ([`ReplayError`]); a trace that passes all of them cannot hang the event loop.

mod paths;
mod trees;

pub(super) use paths::{KeyHasher, Paths, NONE};
pub(super) use trees::{ina_wire, wire, Agg};

use super::huge;
use super::route::PathSource;
use super::table::{Loc, RecordTable, Segment, UNRESOLVED};
use super::{ReplayError, ReplayOptions};
use crate::record::{Class, Mode};
use crate::topology::Topology;
use crate::units::{FlowId, NodeId};
use paths::{Channels, RecordPaths};
use std::collections::HashMap;
use trees::{AggContext, SwitchIndex};

/// Everything fixed before the first event.
pub(super) struct Prepared {
    /// Aggregation of each record ([`NONE`]: none); empty when no record aggregates.
    pub rec_agg: Vec<u32>,
    /// Deps of each record (taken into the event loop's record state).
    pub pending: Vec<u32>,
    /// Who waits for whom.
    pub deps: Dependants,
    /// Channel lists of the aggregation trees and fallback rings (fixed here), then of
    /// the active host transfers (one region per unit, reused: see the event loop).
    pub arena: Vec<u32>,
    /// The path of each explicit row ([`NONE`]: it crosses no channel), into `paths`
    /// (taken into the event loop's record state).
    pub rec_path: Vec<u32>,
    /// The path of each column of each ring block.
    pub block_path: Vec<Vec<u32>>,
    /// The distinct routed paths.
    pub paths: Paths,
    pub ch_cap: Vec<f64>,
    pub aggs: Vec<Agg>,
    pub switch_nodes: Vec<NodeId>,
    pub switch_bytes: u64,
}

impl Prepared {
    /// The aggregation of record `i`, or [`NONE`].
    pub fn agg_of(&self, i: usize) -> u32 {
        self.rec_agg.get(i).copied().unwrap_or(NONE)
    }
}

/// Validate `records` against `topo` and `routing` and build the tables the event loop runs on.
pub(super) fn prepare<R: PathSource + ?Sized>(
    records: &RecordTable,
    topo: &Topology,
    routing: &R,
    opts: &ReplayOptions,
) -> Result<Prepared, ReplayError> {
    if let Some(id) = records.duplicate() {
        return Err(ReplayError::DuplicateId(id));
    }
    let (rec_agg, members) = group_aggregations(records, topo.node_count())?;
    let agg_of = |i: usize| rec_agg.get(i).copied().unwrap_or(NONE);
    let (deps, pending) = Dependants::build(records, &agg_of)?;
    check_acyclic(records, &agg_of, &members, &deps, &pending)?;
    let channels = Channels::new(topo);
    let mut arena = Vec::new();
    let paths = RecordPaths::route(records, topo, routing, &channels)?;
    let mut switches = SwitchIndex::new(topo.node_count());
    let mut aggs = Vec::with_capacity(members.len());
    for mem in members {
        let ctx = AggContext {
            records,
            topo,
            routing,
            opts,
            channels: &channels,
            paths: &paths,
        };
        aggs.push(ctx.build(mem, &mut arena, &mut switches)?);
    }
    Ok(Prepared {
        rec_agg,
        pending,
        deps,
        arena,
        rec_path: paths.of,
        block_path: paths.blocks,
        paths: paths.paths,
        ch_cap: channels.cap,
        aggs,
        switch_nodes: switches.nodes,
        switch_bytes: paths.switch_bytes,
    })
}

/// Check every record's endpoints and aggregation tag, and group the `Ina` records by
/// aggregation id in order of first appearance: (aggregation of each record or [`NONE`],
/// members of each aggregation).
fn group_aggregations(
    records: &RecordTable,
    nodes: usize,
) -> Result<(Vec<u32>, Vec<Vec<u32>>), ReplayError> {
    let any_ina =
        records.has_tags() || (0..records.rows() as u32).any(|r| records.row_mode(r) == Mode::Ina);
    let mut g = Grouping {
        agg_of: HashMap::new(),
        rec_agg: if any_ina {
            huge::filled(records.len(), NONE)
        } else {
            Vec::new()
        },
        members: Vec::new(),
    };
    for seg in records.segments() {
        let (pos, row, len) = match seg {
            Segment::Rows { pos, row, len } => (pos, row, len),
            Segment::Block(_, x) => {
                // a block's columns repeat its first row: the first bad record is there
                for c in 0..x.n as usize {
                    for node in [x.src[c], x.dst[c]] {
                        if node.idx() >= nodes {
                            let id = records.id(x.lo as usize + c);
                            return Err(ReplayError::UnknownNode { id, node, nodes });
                        }
                    }
                }
                continue;
            }
        };
        for j in 0..len {
            let (i, f) = ((pos + j) as usize, records.row_fields(row + j));
            let id = records.id(i);
            for node in [f.src, f.dst] {
                if node.idx() >= nodes {
                    return Err(ReplayError::UnknownNode { id, node, nodes });
                }
            }
            if !any_ina {
                continue;
            }
            g.add(i, id, f.mode, f.class, records.row_agg(row + j))?;
        }
    }
    let (rec_agg, members) = in_id_order(g.rec_agg, g.members, &g.agg_of);
    Ok((rec_agg, members))
}

/// The aggregations found so far: the dense index of each id (first appearance), of each
/// record ([`NONE`]: none; empty when no record aggregates), and each one's members.
struct Grouping {
    agg_of: HashMap<u64, u32>,
    rec_agg: Vec<u32>,
    members: Vec<Vec<u32>>,
}

impl Grouping {
    /// Check record `i`'s aggregation tag against its mode and class, and add an `Ina`
    /// record to its aggregation.
    fn add(
        &mut self,
        i: usize,
        id: FlowId,
        mode: Mode,
        class: Class,
        tag: Option<crate::record::AggTag>,
    ) -> Result<(), ReplayError> {
        match (mode, tag) {
            (Mode::Ina, Some(a)) => {
                if class == Class::Compute {
                    return Err(ReplayError::BadAggregation {
                        agg: a.id,
                        msg: format!("record {id} has class compute"),
                    });
                }
                let next = self.members.len() as u32;
                let ai = *self.agg_of.entry(a.id).or_insert(next);
                if ai == next {
                    self.members.push(Vec::new());
                }
                if let Some(slot) = self.rec_agg.get_mut(i) {
                    *slot = ai;
                }
                self.members[ai as usize].push(i as u32);
                Ok(())
            }
            (Mode::Ina, None) => Err(ReplayError::BadAggregation {
                agg: u64::MAX,
                msg: format!("record {id} has mode ina but no aggregation tag"),
            }),
            (_, Some(a)) => Err(ReplayError::BadAggregation {
                agg: a.id,
                msg: format!("record {id} carries an aggregation tag but its mode is {mode}"),
            }),
            _ => Ok(()),
        }
    }
}

/// Renumber the aggregations (first-appearance order) in aggregation-id order. The
/// dense index breaks the slot policy's ties — asks of one nanosecond are answered in
/// index order and waiting aggregations queue by (arrival, index) (`engine.rs`,
/// `pools.rs`) — and the glue breaks them by aggregation id
/// (`ns3-glue/model/ina-apps.cc`, `InaSlotAdmission::AnswerAsks`, `m_waiting`), the rule
/// `docs/model.md#slot-policies` states. The generator numbers aggregations in the order
/// it writes them, so its traces are already in id order and left untouched.
fn in_id_order(
    mut rec_agg: Vec<u32>,
    members: Vec<Vec<u32>>,
    agg_of: &HashMap<u64, u32>,
) -> (Vec<u32>, Vec<Vec<u32>>) {
    let mut by_id: Vec<(u64, u32)> = agg_of.iter().map(|(&id, &ix)| (id, ix)).collect();
    by_id.sort_unstable();
    if by_id
        .iter()
        .enumerate()
        .all(|(k, &(_, ix))| ix as usize == k)
    {
        return (rec_agg, members);
    }
    let mut new_of = vec![0u32; members.len()];
    for (k, &(_, ix)) in by_id.iter().enumerate() {
        new_of[ix as usize] = k as u32;
    }
    for a in rec_agg.iter_mut().filter(|a| **a != NONE) {
        *a = new_of[*a as usize];
    }
    let mut slots: Vec<Option<Vec<u32>>> = members.into_iter().map(Some).collect();
    let members = by_id
        .iter()
        .map(|&(_, ix)| slots[ix as usize].take().unwrap_or_default())
        .collect();
    (rec_agg, members)
}

/// Who waits for whom. An explicit row's dependants are a CSR by row:
/// `list[off[r]..off[r + 1]]`. A ring block record's are implicit — the two records of
/// the next row that wait for it ([`Block::deps`](super::table::Block::deps)) — plus any
/// explicit record that names it, kept per block as (record, dependant) pairs sorted by
/// record. Deps between members of one aggregation are internal to the unit and left
/// out.
pub(super) struct Dependants {
    off: Vec<u32>,
    list: Vec<u32>,
    ext: Vec<Vec<(u32, u32)>>,
    /// Some counted dep names a record after its dependant.
    forward: bool,
}

impl Dependants {
    /// The dependants and each record's dep count, in two passes over the explicit deps
    /// (count, then fill), so no list of pairs is built for the rows.
    fn build(
        records: &RecordTable,
        agg_of: &impl Fn(usize) -> u32,
    ) -> Result<(Dependants, Vec<u32>), ReplayError> {
        let n = records.len();
        let rows = records.rows();
        let mut pending = huge::filled(n, 0u32);
        // off[r + 1] counts row r's dependants, then becomes the CSR offsets
        let mut off = huge::filled(rows + 1, 0u32);
        let mut ext: Vec<Vec<(u32, u32)>> = vec![Vec::new(); records.blocks().len()];
        let mut forward = false;
        let counted = |i: usize, d: u32| {
            let a = agg_of(i);
            !(a != NONE && a == agg_of(d as usize))
        };
        let segments = records.segments();
        // the explicit edges (dep d → record i), in record order: every dep of a row, and
        // the deps of a block's first row
        let each_edge = |f: &mut dyn FnMut(usize, usize, u32) -> Result<(), ReplayError>| {
            for seg in &segments {
                match *seg {
                    Segment::Rows { pos, row, len } => {
                        for j in 0..len {
                            for (k, &d) in records.row_deps(row + j).iter().enumerate() {
                                f((pos + j) as usize, k, d)?;
                            }
                        }
                    }
                    Segment::Block(_, x) => {
                        for c in 0..x.n {
                            for (k, d) in x.deps(1, c).into_iter().enumerate() {
                                f((x.lo + c) as usize, k, d)?;
                            }
                        }
                    }
                }
            }
            Ok(())
        };
        each_edge(&mut |i, k, d| {
            if d == UNRESOLVED {
                return Err(ReplayError::DanglingDep {
                    id: records.id(i),
                    dep: records.dangling_id(i, k),
                });
            }
            if !counted(i, d) {
                return Ok(());
            }
            if d as usize == i {
                return Err(ReplayError::Cycle(records.id(i), 1));
            }
            forward |= d as usize > i;
            pending[i] += 1;
            match records.locate(d as usize) {
                Loc::Row(r) => off[r as usize + 1] += 1,
                Loc::Block { b, .. } => ext[b as usize].push((d, i as u32)),
            }
            Ok(())
        })?;
        // rows 2.. of a block wait for two records of the row before
        for x in records.blocks() {
            pending[(x.lo + x.n) as usize..x.hi as usize].fill(2);
        }
        for r in 0..rows {
            off[r + 1] += off[r];
        }
        let mut fill = off.clone();
        let mut list = huge::filled(off[rows] as usize, 0u32);
        each_edge(&mut |i, _, d| {
            if counted(i, d) {
                if let Loc::Row(r) = records.locate(d as usize) {
                    list[fill[r as usize] as usize] = i as u32;
                    fill[r as usize] += 1;
                }
            }
            Ok(())
        })?;
        for e in &mut ext {
            e.sort_unstable();
        }
        let deps = Dependants {
            off,
            list,
            ext,
            forward,
        };
        Ok((deps, pending))
    }

    /// The dependants of explicit row `r`: `list[range]`.
    #[inline]
    pub fn of_row(&self, r: u32) -> std::ops::Range<usize> {
        self.off[r as usize] as usize..self.off[r as usize + 1] as usize
    }

    /// The dependant at `k` of [`Dependants::of_row`]'s range.
    #[inline]
    pub fn at(&self, k: usize) -> u32 {
        self.list[k]
    }

    /// The explicit dependants of record `p` of block `b`: `ext_at(b, k)` for `k` in the
    /// range (empty for most block records).
    #[inline]
    pub fn of_block(&self, b: u32, p: u32) -> std::ops::Range<usize> {
        let e = &self.ext[b as usize];
        match e.first() {
            Some(&(first, _)) if p >= first => {
                let a = e.partition_point(|&(t, _)| t < p);
                let z = a + e[a..].partition_point(|&(t, _)| t == p);
                a..z
            }
            _ => 0..0,
        }
    }

    /// The dependant at `k` of [`Dependants::of_block`]'s range.
    #[inline]
    pub fn ext_at(&self, b: u32, k: usize) -> u32 {
        self.ext[b as usize][k].1
    }

    /// Calls `f` with each dependant of record `r`.
    fn each(&self, records: &RecordTable, r: u32, mut f: impl FnMut(u32)) {
        match records.locate(r as usize) {
            Loc::Row(row) => self.of_row(row).for_each(|k| f(self.at(k))),
            Loc::Block { b, k, col } => {
                let x = &records.blocks()[b as usize];
                if k < x.rows() {
                    f(x.pos(k + 1, col));
                    f(x.pos(k + 1, (col + 1) % x.n));
                }
                self.of_block(b, r).for_each(|e| f(self.ext_at(b, e)));
            }
        }
    }
}

/// Kahn's algorithm over records with each aggregation contracted to one node: an error
/// naming a record that can never start, and how many cannot, when there is a cycle. A
/// trace without aggregations whose every dep names an earlier record is acyclic as it
/// stands (positions are a topological order) and is not walked.
fn check_acyclic(
    records: &RecordTable,
    agg_of: &impl Fn(usize) -> u32,
    members: &[Vec<u32>],
    deps: &Dependants,
    pending: &[u32],
) -> Result<(), ReplayError> {
    if members.is_empty() && !deps.forward {
        return Ok(());
    }
    let n = records.len();
    let node = |i: usize| {
        if agg_of(i) != NONE {
            n + agg_of(i) as usize
        } else {
            i
        }
    };
    let mut indeg = huge::filled(n + members.len(), 0u32);
    for i in 0..n {
        indeg[node(i)] += pending[i];
    }
    // a member record is not a node of its own: its aggregation is
    let is_node = |v: usize| v >= n || agg_of(v) == NONE;
    let mut stack: Vec<usize> = (0..n + members.len())
        .filter(|&v| is_node(v) && indeg[v] == 0)
        .collect();
    let mut seen = 0usize;
    let mut one = [0u32];
    while let Some(v) = stack.pop() {
        seen += 1;
        let recs: &[u32] = if v >= n {
            &members[v - n]
        } else {
            one[0] = v as u32;
            &one
        };
        for &r in recs {
            deps.each(records, r, |d| {
                let t = node(d as usize);
                indeg[t] -= 1;
                if indeg[t] == 0 {
                    stack.push(t);
                }
            });
        }
    }
    let total = (0..n + members.len()).filter(|&v| is_node(v)).count();
    if seen < total {
        let stuck = (0..n).find(|&i| indeg[node(i)] > 0).unwrap_or(0);
        // count records (not contracted nodes) that can never start
        let left = (0..n).filter(|&i| indeg[node(i)] > 0).count();
        return Err(ReplayError::Cycle(records.id(stuck), left));
    }
    Ok(())
}
