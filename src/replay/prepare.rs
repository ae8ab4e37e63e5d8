//! Everything fixed before the first event, built in named phases: id index, aggregation
//! grouping (with endpoint and tag validation), the dependants CSR, the cycle check, the
//! channel tables, the record paths and the aggregation units.
//!
//! Every phase either succeeds or names the record, node, link or aggregation at fault
//! ([`ReplayError`]); a trace that passes all of them cannot hang the event loop.

use super::huge;
use super::route::PathSource;
use super::table::{Loc, RecordTable, Segment, UNRESOLVED};
use super::{InaPolicy, ReplayError, ReplayOptions};
use crate::netmodel::{self, EdgeDir};
use crate::record::{AggDir, AggGroup, Class, Mode};
use crate::topology::{Channel, NodeKind, Topology};
use crate::units::{Bytes, FlowId, NodeId};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// "No index": a record outside any aggregation, an unassigned switch.
pub(super) const NONE: u32 = u32::MAX;

/// One aggregation unit: its members, its tree, its fallback ring and its run-time state.
pub(super) struct Agg {
    pub class: Class,
    pub members: Vec<u32>,
    /// Wire bytes of the stream (the largest up edge, INA packet headers).
    pub wire: f64,
    pub tree_off: u32,
    pub tree_len: u32,
    /// The unit's own rate limit: capacity over multiplicity on its tightest channel.
    pub tree_cap: f64,
    /// Dense indices of the switches that aggregate (empty: multicast only, no slots).
    pub switches: Vec<u32>,
    /// Slots its group reserves per switch (`planned` policy; 0 otherwise).
    pub reserved: u32,
    /// The job it belongs to in a merged multi-job trace (`InaSwitchModel::tenants`; 0
    /// when the trace is one job's).
    pub tenant: u32,
    /// Slots the stream occupies on each of its switches, `w = min(window, packets)`
    /// (0 for multicast only or an empty stream).
    pub want: u32,
    /// When each aggregating switch holds the `w` slots (same order as `switches`).
    pub holds: Vec<SlotHold>,
    /// Up + down tree latency (propagation).
    pub latency: u64,
    /// The window's round trip: the same chains with one packet's store-and-forward per
    /// hop ([`netmodel::window_round_trip`]).
    pub rtt: u64,
    pub standalone: u64,
    /// Fallback ring flows as (arena offset, length).
    pub ring: Vec<(u32, u32)>,
    pub ring_wire: f64,
    pub ring_latency: u64,
    // run-time state
    pub pending: u32,
    pub start_at: u64,
    pub started: u64,
    pub slots: u32,
    pub outstanding: u32,
    /// The granted stream's window rate (infinite: no window) and its rounds
    /// ([`netmodel::window_rounds`]), set when it starts: its end's tail reads them.
    pub window: f64,
    pub rounds: u64,
}

/// When one aggregating switch physically holds an aggregation's slots: from the arrival
/// of the stream's first packet, `acquire` ns after the unit starts (the shortest up
/// chain from a worker to the switch), until its last result packet leaves the switch,
/// `release` ns after the unit's last byte left the workers — for a switch that sends
/// results down, the longest up chain (the last packet reaching the root) plus the down
/// chain from the root to this switch; for one that only sums upwards (Rina's rack
/// reduction), the longest up chain to it (its last partial sum leaves upwards then).
#[derive(Clone, Copy, Debug)]
pub(super) struct SlotHold {
    /// Dense switch index.
    pub switch: u32,
    /// Offset from the unit's start, ns.
    pub acquire: u64,
    /// Offset from the unit's transmission end (its end minus the tree latency), ns.
    pub release: u64,
}

/// Per-channel constants (channel `2l` is link `l` from `a` to `b`, `2l+1` the reverse).
pub(super) struct Channels {
    /// Capacity in bytes per ns.
    pub cap: Vec<f64>,
    /// Rate in bits per second.
    pub rate: Vec<u64>,
    /// Propagation delay, ns.
    pub delay: Vec<u64>,
}

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

/// Wire bytes of a host transfer (network packet payload).
pub(super) fn wire(bytes: Bytes, opts: &ReplayOptions) -> Bytes {
    bytes.with_headers(opts.payload, opts.header)
}

/// Wire bytes of an INA stream: one slot's payload per packet.
pub(super) fn ina_wire(bytes: Bytes, opts: &ReplayOptions) -> Bytes {
    bytes.with_headers(opts.ina.payload, opts.header)
}

/// Slots a stream of `s` bytes occupies on each aggregating switch: SwitchML's worker
/// pool, `min(window, packets)` slot indices reused round-robin (a stream shorter than a
/// window never uses more slots than it has packets).
pub(super) fn slots_wanted(s: Bytes, opts: &ReplayOptions) -> u32 {
    if opts.ina.payload.0 == 0 {
        return opts.ina.window;
    }
    let packets = s.0.div_ceil(opts.ina.payload.0);
    packets.min(opts.ina.window as u64) as u32
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

impl Channels {
    fn new(topo: &Topology) -> Channels {
        let nch = topo.links.len() * 2;
        let mut ch = Channels {
            cap: huge::filled(nch, 0.0),
            rate: vec![0; nch],
            delay: vec![0; nch],
        };
        for (l, link) in topo.links.iter().enumerate() {
            for dir in 0..2 {
                let c = l * 2 + dir;
                ch.cap[c] = link.rate.0 as f64 / 8e9;
                ch.rate[c] = link.rate.0;
                ch.delay[c] = link.delay.0;
            }
        }
        ch
    }

    /// Every channel of `path` exists in `topo` and has a non-zero rate.
    fn check(&self, topo: &Topology, id: FlowId, path: &[Channel]) -> Result<(), ReplayError> {
        for c in path {
            let Some(link) = topo.links.get(c.link().idx()) else {
                return Err(ReplayError::NoRoute {
                    id,
                    src: NodeId(0),
                    dst: NodeId(0),
                    reason: format!(
                        "router returned channel {} of a link the topology lacks",
                        c.0
                    ),
                });
            };
            if link.rate.0 == 0 {
                return Err(ReplayError::ZeroCapacity {
                    id,
                    link: c.link(),
                    a: link.a,
                    b: link.b,
                });
            }
        }
        Ok(())
    }

    /// Route `src → dst` on NCCL channel `channel` (0: the connection path) for record
    /// `id`, check it, append it to `arena`: (offset, length, propagation delay, the path).
    #[allow(clippy::too_many_arguments)]
    fn route<R: PathSource + ?Sized>(
        &self,
        topo: &Topology,
        routing: &R,
        id: FlowId,
        src: NodeId,
        dst: NodeId,
        channel: u32,
        arena: &mut Vec<u32>,
    ) -> Result<(u32, u32, u64, Vec<Channel>), ReplayError> {
        let path =
            routing
                .channel_path(src, dst, channel)
                .map_err(|reason| ReplayError::NoRoute {
                    id,
                    src,
                    dst,
                    reason,
                })?;
        self.check(topo, id, &path)?;
        let off = arena.len() as u32;
        let mut delay = 0;
        for c in &path {
            arena.push(c.0);
            delay += self.delay[c.idx()];
        }
        Ok((off, path.len() as u32, delay, path))
    }
}

/// The distinct routed paths of a trace: path `p` is `channels[off[p]..off[p] + len[p]]`.
/// Records share a path when they share (sender, receiver, NCCL channel): the router's
/// answer depends on nothing else, so one routing and one copy serve them all.
#[derive(Default)]
pub(super) struct Paths {
    pub off: Vec<u32>,
    pub len: Vec<u32>,
    /// Propagation delay, ns.
    pub delay: Vec<u64>,
    /// The smallest channel rate, bits per second.
    pub min_rate: Vec<u64>,
    /// The smallest channel capacity, bytes per ns (a lone transfer's own rate limit;
    /// per strand for a sprayed path: capacity over the strands crossing the channel).
    pub bottleneck: Vec<f64>,
    /// Equal strands a transfer on the path is cut into: 1, or under `--routing spray`
    /// the denominator of its even split, the path then listing each channel once per
    /// strand crossing it (the solver's multiplicity, as for an INA tree).
    pub strands: Vec<u32>,
    pub channels: Vec<u32>,
}

impl Paths {
    /// The channels of path `p`.
    pub fn of(&self, p: u32) -> &[u32] {
        let o = self.off[p as usize] as usize;
        &self.channels[o..o + self.len[p as usize] as usize]
    }
}

/// A multiplicative hash for the path keys (small integers): the default SipHash costs more
/// than the rest of a lookup, and the keys are not attacker-chosen hash-flooding material
/// beyond what the trace's length already bounds. The DCQCN model's queue pairs are keyed
/// by connection with it too (`dcqcn::State::index`).
#[derive(Default)]
pub(super) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(v as u64);
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// The routed path of every `Net` and `Ina` record between distinct nodes (an index into
/// the interned [`Paths`]): per explicit row, and per column of each ring block (its rows
/// repeat the columns' connections); and the trace's switch bytes.
struct RecordPaths {
    of: Vec<u32>,
    blocks: Vec<Vec<u32>>,
    paths: Paths,
    switch_bytes: u64,
}

/// The interned paths while they are found, in order of first use.
struct Interner<'a, R: PathSource + ?Sized> {
    topo: &'a Topology,
    routing: &'a R,
    channels: &'a Channels,
    paths: Paths,
    keys: HashMap<(NodeId, NodeId, u32), u32, BuildHasherDefault<KeyHasher>>,
    /// Switch hops of each path (`Topology::switch_hops` of its sender and channels).
    hops: Vec<u64>,
}

impl<R: PathSource + ?Sized> Interner<'_, R> {
    /// The path of a transfer `src → dst` on NCCL channel `channel` ([`NONE`] when it
    /// moves nothing on the network), routed for record `id` the first time.
    fn path(
        &mut self,
        mode: Mode,
        src: NodeId,
        dst: NodeId,
        channel: u32,
        id: impl FnOnce() -> FlowId,
    ) -> Result<u32, ReplayError> {
        if !matches!(mode, Mode::Net | Mode::Ina) || src == dst {
            return Ok(NONE);
        }
        let key = (src, dst, channel);
        if let Some(&k) = self.keys.get(&key) {
            return Ok(k);
        }
        let k = self.paths.off.len() as u32;
        let id_of = id();
        let (off, len, delay, route) = self.channels.route(
            self.topo,
            self.routing,
            id_of,
            src,
            dst,
            channel,
            &mut self.paths.channels,
        )?;
        let (len, strands) = self.spray(mode, src, dst, id_of, off, len)?;
        let ps = &mut self.paths;
        ps.off.push(off);
        ps.len.push(len);
        ps.strands.push(strands);
        ps.delay.push(delay);
        ps.min_rate.push(
            route
                .iter()
                .map(|c| self.channels.rate[c.idx()])
                .min()
                .unwrap_or(0),
        );
        ps.bottleneck
            .push(netmodel::multiset_cap(&ps.channels[off as usize..], |c| {
                self.channels.cap[c as usize]
            }));
        self.hops.push(self.topo.switch_hops(src, &route));
        self.keys.insert(key, k);
        Ok(k)
    }

    /// Under `--routing spray`, replace a network transfer's routed path (at `off`, `len`
    /// channels in the arena) by its strands: each channel once per strand crossing it,
    /// ascending. The routed path stays the one its delay and switch hops are taken
    /// from (every equal-cost path of a Clos has the same length). (length, strands).
    fn spray(
        &mut self,
        mode: Mode,
        src: NodeId,
        dst: NodeId,
        id: FlowId,
        off: u32,
        len: u32,
    ) -> Result<(u32, u32), ReplayError> {
        if mode != Mode::Net {
            return Ok((len, 1));
        }
        let split = self
            .routing
            .spray(src, dst)
            .map_err(|reason| ReplayError::NoRoute {
                id,
                src,
                dst,
                reason,
            })?;
        let Some(split) = split.filter(|s| s.strands > 1) else {
            return Ok((len, 1));
        };
        let arena = &mut self.paths.channels;
        arena.truncate(off as usize);
        for (c, n) in &split.load {
            arena.extend(std::iter::repeat_n(c.0, *n as usize));
        }
        Ok(((arena.len() - off as usize) as u32, split.strands))
    }

    /// Switch bytes of `bytes` on path `p`.
    fn switch_bytes(&self, bytes: u64, p: u32) -> u64 {
        match p {
            NONE => 0,
            p => bytes * self.hops[p as usize],
        }
    }
}

impl RecordPaths {
    fn route<R: PathSource + ?Sized>(
        records: &RecordTable,
        topo: &Topology,
        routing: &R,
        channels: &Channels,
    ) -> Result<RecordPaths, ReplayError> {
        let mut of = huge::filled(records.rows(), NONE);
        let mut blocks = Vec::with_capacity(records.blocks().len());
        let mut switch_bytes = 0u64;
        let mut paths = Interner {
            topo,
            routing,
            channels,
            paths: Paths::default(),
            keys: HashMap::default(),
            hops: Vec::new(),
        };
        // in position order, so paths are routed (and numbered) at their first record
        for seg in records.segments() {
            match seg {
                Segment::Rows { pos, row, len } => {
                    for j in 0..len {
                        let f = records.row_fields(row + j);
                        let id = || records.id((pos + j) as usize);
                        let p = paths.path(f.mode, f.src, f.dst, f.channel, id)?;
                        of[(row + j) as usize] = p;
                        switch_bytes += paths.switch_bytes(f.bytes, p);
                    }
                }
                Segment::Block(b, x) => {
                    let mut cols = Vec::with_capacity(x.n as usize);
                    for c in 0..x.n {
                        let f = records.block_fields(b, 1, c);
                        let id = || records.id((x.lo + c) as usize);
                        cols.push(paths.path(f.mode, f.src, f.dst, f.channel, id)?);
                    }
                    for k in 1..=x.rows() {
                        for (c, &p) in cols.iter().enumerate() {
                            switch_bytes += paths.switch_bytes(x.bytes_at(k, c as u32), p);
                        }
                    }
                    blocks.push(cols);
                }
            }
        }
        Ok(RecordPaths {
            of,
            blocks,
            paths: paths.paths,
            switch_bytes,
        })
    }

    /// The path of record `i` (an explicit row or a block record).
    fn of_record(&self, records: &RecordTable, i: u32) -> u32 {
        match records.locate(i as usize) {
            Loc::Row(r) => self.of[r as usize],
            Loc::Block { b, col, .. } => self.blocks[b as usize][col as usize],
        }
    }
}

/// Dense indices of the aggregating switches, in order of first use.
struct SwitchIndex {
    idx: Vec<u32>,
    nodes: Vec<NodeId>,
}

impl SwitchIndex {
    fn new(nodes: usize) -> SwitchIndex {
        SwitchIndex {
            idx: vec![NONE; nodes],
            nodes: Vec::new(),
        }
    }
    fn of(&mut self, sw: NodeId) -> u32 {
        if self.idx[sw.idx()] == NONE {
            self.idx[sw.idx()] = self.nodes.len() as u32;
            self.nodes.push(sw);
        }
        self.idx[sw.idx()]
    }
}

/// What building one aggregation unit reads.
struct AggContext<'a, R: PathSource + ?Sized> {
    records: &'a RecordTable,
    topo: &'a Topology,
    routing: &'a R,
    opts: &'a ReplayOptions,
    channels: &'a Channels,
    paths: &'a RecordPaths,
}

impl<R: PathSource + ?Sized> AggContext<'_, R> {
    /// The channels of member record `m` (none when it crosses no channel).
    fn path_of(&self, m: u32) -> &[u32] {
        match self.paths.of_record(self.records, m) {
            NONE => &[],
            p => self.paths.paths.of(p),
        }
    }

    /// The propagation delay of member record `m`'s path.
    fn delay_of(&self, m: u32) -> u64 {
        match self.paths.of_record(self.records, m) {
            NONE => 0,
            p => self.paths.paths.delay[p as usize],
        }
    }
}

/// An aggregation's tree latency, window round trip and slot holding times.
struct TreeTiming {
    latency: u64,
    rtt: u64,
    holds: Vec<SlotHold>,
}

/// The stream size, aggregating switches and tree channels of one aggregation.
struct Tree {
    class: Class,
    /// Largest up edge (largest edge when there is none).
    s: Bytes,
    /// Dense switch indices (empty when nothing goes up: multicast only).
    switches: Vec<u32>,
    /// Channel multiset of every edge's path, sorted.
    channels: Vec<u32>,
}

impl<R: PathSource + ?Sized> AggContext<'_, R> {
    /// One aggregation unit from its member records; the fallback ring's paths and the
    /// tree's channel multiset are appended to `arena`.
    fn build(
        &self,
        mem: Vec<u32>,
        arena: &mut Vec<u32>,
        switches: &mut SwitchIndex,
    ) -> Result<Agg, ReplayError> {
        let tree = self.tree(&mem, switches)?;
        // the unit's own limit: capacity over multiplicity on its tightest channel
        let tree_cap = netmodel::multiset_cap(&tree.channels, |c| self.channels.cap[c as usize]);
        let nodes: Vec<(u32, NodeId)> = tree
            .switches
            .iter()
            .map(|&i| (i, switches.nodes[i as usize]))
            .collect();
        let packet = self.opts.ina.payload.0 + self.opts.header.0;
        let TreeTiming {
            latency,
            rtt,
            holds,
        } = self.tree_timing(&mem, &nodes, &tree.channels, packet);
        let wire_s = ina_wire(tree.s, self.opts);
        let standalone = netmodel::ina_time(
            wire_s.0,
            tree_cap,
            self.opts.ina.window,
            packet,
            latency,
            rtt,
            !tree.switches.is_empty(),
        );
        let (ring, ring_wire, ring_latency) = self.fallback_ring(&mem, tree.s, arena)?;
        let reserved = planned_reservation(
            self.records,
            &mem,
            self.topo,
            self.opts,
            &tree.switches,
            &switches.nodes,
            self.records.agg(mem[0] as usize).map_or(0, |a| a.id),
            tree.class,
        )?;
        let tenant = tenant_of(
            self.records,
            &mem,
            self.topo,
            self.opts,
            self.records.agg(mem[0] as usize).map_or(0, |a| a.id),
        )?;
        let tree_off = arena.len() as u32;
        arena.extend_from_slice(&tree.channels);
        Ok(Agg {
            class: tree.class,
            pending: mem.len() as u32,
            members: mem,
            wire: wire_s.0 as f64,
            tree_off,
            tree_len: tree.channels.len() as u32,
            tree_cap,
            want: if tree.switches.is_empty() {
                0
            } else {
                slots_wanted(tree.s, self.opts)
            },
            holds,
            switches: tree.switches,
            reserved,
            tenant,
            latency,
            rtt,
            standalone,
            ring,
            ring_wire,
            ring_latency,
            start_at: 0,
            started: 0,
            slots: 0,
            outstanding: 0,
            window: f64::INFINITY,
            rounds: 0,
        })
    }

    /// Check the members' classes and switches; collect the stream size, the aggregating
    /// switches and the channel multiset.
    fn tree(&self, mem: &[u32], switches: &mut SwitchIndex) -> Result<Tree, ReplayError> {
        let t = self.records;
        let first = mem[0] as usize;
        let id = t.agg(first).map(|a| a.id).unwrap_or(0);
        let class = t.class(first);
        let mut s = Bytes(0);
        let mut s_up = Bytes(0);
        let mut has_up = false;
        let mut channels: Vec<u32> = Vec::new();
        let mut sw_list = Vec::new();
        for &m in mem {
            let i = m as usize;
            if t.class(i) != class {
                return Err(ReplayError::BadAggregation {
                    agg: id,
                    msg: format!(
                        "record {} is class {} but record {} is class {}",
                        t.id(i),
                        t.class(i),
                        t.id(first),
                        class
                    ),
                });
            }
            let tag = t.agg(i);
            let up = tag.map(|a| a.dir) == Some(AggDir::Up);
            if up {
                s_up = s_up.max(t.bytes(i));
            }
            s = s.max(t.bytes(i));
            channels.extend_from_slice(self.path_of(m));
            let sw = tag.map(|a| a.switch).unwrap_or(t.dst(i));
            has_up |= up;
            if self.topo.kinds.get(sw.idx()) != Some(&NodeKind::Switch) {
                return Err(ReplayError::BadAggregation {
                    agg: id,
                    msg: format!("record {}: node {sw} is not a switch", t.id(i)),
                });
            }
            sw_list.push(switches.of(sw));
        }
        // The stream size: what every worker sends up (down edges of a reduce-scatter
        // carry smaller shards, within the same time); S of the down edges if none go up.
        if has_up {
            s = s_up;
        } else {
            // multicast only: no aggregator slots are taken
            sw_list.clear();
        }
        // A channel crossed by k edges (children behind a switch that does not aggregate)
        // stays in the multiset k times: the unit then weighs k on it in the max-min
        // solve, as k streams of S do.
        channels.sort_unstable();
        sw_list.sort_unstable();
        sw_list.dedup();
        Ok(Tree {
            class,
            s,
            switches: sw_list,
            channels,
        })
    }

    /// The tree's latency (longest up chain plus longest down chain of propagation), its
    /// window round trip (the same chains with one `packet` of wire bytes
    /// store-and-forwarded per hop, at each channel's share of the tree multiset
    /// `channels`: [`netmodel::window_round_trip`]) and, for each aggregating switch, when
    /// it holds slots relative to the stream (see [`SlotHold`] and
    /// [`netmodel::TreeChains`]).
    fn tree_timing(
        &self,
        mem: &[u32],
        switches: &[(u32, NodeId)],
        channels: &[u32],
        packet: u64,
    ) -> TreeTiming {
        let edges: Vec<(u32, u32, u64, EdgeDir)> = mem
            .iter()
            .filter_map(|&m| {
                let i = m as usize;
                let dir = match self.records.agg(i)?.dir {
                    AggDir::Up => EdgeDir::Up,
                    AggDir::Down => EdgeDir::Down,
                };
                let (src, dst) = (self.records.src(i), self.records.dst(i));
                Some((src.0, dst.0, self.delay_of(m), dir))
            })
            .collect();
        let serialization: Vec<u64> = mem
            .iter()
            .filter(|&&m| self.records.agg(m as usize).is_some())
            .map(|&m| {
                let share =
                    |&c: &u32| netmodel::multiset_share(channels, c, self.channels.cap[c as usize]);
                netmodel::store_and_forward(packet, self.path_of(m).iter().map(share))
            })
            .collect();
        let rtt = netmodel::window_round_trip(&edges, &serialization);
        let chains = netmodel::TreeChains::new(&edges);
        let holds = switches
            .iter()
            .map(|&(switch, node)| {
                let (acquire, release) = chains.slot_hold(node.0);
                SlotHold {
                    switch,
                    acquire,
                    release,
                }
            })
            .collect();
        TreeTiming {
            latency: chains.up_latency() + chains.down_latency(),
            rtt,
            holds,
        }
    }

    /// The host ring the aggregation falls back to: one flow per worker host (member i →
    /// member i+1) as (arena offset, length), the wire bytes each carries (`2(n−1)`
    /// chunks of `ceil(S/n)`) and the ring's latency (`2(n−1)` longest hops).
    #[allow(clippy::type_complexity)]
    fn fallback_ring(
        &self,
        mem: &[u32],
        s: Bytes,
        arena: &mut Vec<u32>,
    ) -> Result<(Vec<(u32, u32)>, f64, u64), ReplayError> {
        let mut hosts: Vec<(NodeId, FlowId)> = Vec::new();
        for &m in mem {
            let (i, t) = (m as usize, self.records);
            let src = t.src(i);
            if t.agg(i).map(|a| a.dir) == Some(AggDir::Up)
                && self.topo.kinds[src.idx()] == NodeKind::Host
                && !hosts.iter().any(|h| h.0 == src)
            {
                hosts.push((src, t.id(i)));
            }
        }
        let hn = hosts.len();
        if hn < 2 {
            return Ok((Vec::new(), 0.0, 0));
        }
        let mut ring = Vec::with_capacity(hn);
        let mut ring_delay = 0;
        for k in 0..hn {
            let (a, rid) = hosts[k];
            let b = hosts[(k + 1) % hn].0;
            let (off, len, d, _) =
                self.channels
                    .route(self.topo, self.routing, rid, a, b, 0, arena)?;
            ring.push((off, len));
            ring_delay = ring_delay.max(d);
        }
        let chunk = Bytes(s.0.div_ceil(hn as u64));
        let steps = 2 * (hn as u64 - 1);
        Ok((
            ring,
            (steps * wire(chunk, self.opts).0) as f64,
            steps * ring_delay,
        ))
    }
}

/// The slots an aggregation's group reserves on each of its switches under the `planned`
/// policy (the smallest, should they differ): matched by class, group (dense or expert)
/// and first member (the lowest host sending an up edge), see
/// [`crate::trace::Reservation`]. 0 for other policies
/// and for multicast-only aggregations; an error when a switch has no reservation for it
/// or one larger than the pool.
#[allow(clippy::too_many_arguments)]
fn planned_reservation(
    records: &RecordTable,
    mem: &[u32],
    topo: &Topology,
    opts: &ReplayOptions,
    switches: &[u32],
    switch_nodes: &[NodeId],
    id: u64,
    class: Class,
) -> Result<u32, ReplayError> {
    if opts.ina.policy != InaPolicy::Planned || switches.is_empty() {
        return Ok(0);
    }
    let first = first_member(records, mem, topo);
    let group = mem
        .first()
        .and_then(|&m| records.agg(m as usize))
        .map_or(AggGroup::Dense, |a| a.group);
    let kind = group.prefix();
    let mut k = u32::MAX;
    for &sw in switches {
        let node = switch_nodes[sw as usize];
        let r = first.and_then(|f| opts.ina.reservation(node, class, group, f));
        let msg = match (r, first) {
            (Some(x), _) if x <= opts.ina.slots => {
                k = k.min(x);
                continue;
            }
            (Some(x), _) => format!("reserves {x} slots on switch {node} but its pool holds {}", opts.ina.slots),
            (None, Some(f)) => format!("the planned slot policy has no reservation on switch {node} for the {kind}{class} aggregation of first member {f}"),
            (None, None) => "the planned slot policy needs a host among its up-edge senders".into(),
        };
        return Err(ReplayError::BadAggregation { agg: id, msg });
    }
    Ok(k)
}

/// An aggregation's first member: the lowest host sending one of its up edges (none for a
/// multicast-only aggregation).
fn first_member(records: &RecordTable, mem: &[u32], topo: &Topology) -> Option<NodeId> {
    mem.iter()
        .map(|&m| m as usize)
        .filter(|&i| {
            records.agg(i).map(|a| a.dir) == Some(AggDir::Up)
                && topo.kinds[records.src(i).idx()] == NodeKind::Host
        })
        .map(|i| records.src(i))
        .min()
}

/// The job (tenant) an aggregation belongs to in a merged multi-job trace: the job of its
/// first member. 0 for a one-job trace and for a multicast-only aggregation (it holds no
/// slots); an error when the member is in no job of the header's `ina_tenants`.
fn tenant_of(
    records: &RecordTable,
    mem: &[u32],
    topo: &Topology,
    opts: &ReplayOptions,
    id: u64,
) -> Result<u32, ReplayError> {
    if opts.ina.tenants.is_empty() {
        return Ok(0);
    }
    let Some(first) = first_member(records, mem, topo) else {
        return Ok(0);
    };
    opts.ina
        .tenant_of(first)
        .ok_or_else(|| ReplayError::BadAggregation {
            agg: id,
            msg: format!(
                "its first member, host {first}, is in no job of the trace's `{}`",
                crate::trace::INA_TENANTS_KEY
            ),
        })
}
