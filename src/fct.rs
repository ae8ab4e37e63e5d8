//! The results contract shared by both back-ends and the report stage.
//!
//! The native replayer and the ns-3 glue both write, for one trace:
//! - `fct.csv`: one [`FctRow`] per trace record (compute and NVLink records included, so
//!   the timeline is complete), joinable on `flow_id` ([`crate::formats::fct_csv`]);
//! - `fct.txt`: the HPCC text format (network records only) for tools that read it
//!   ([`crate::formats::hpcc_fct`]);
//! - `summary.csv`: one [`Summary`] row ([`crate::formats::summary_csv`]), computed by the
//!   same Rust function ([`summarize`]) from the trace and the per-record times, so both
//!   back-ends' summaries mean exactly the same.
//!
//! [`summarize`] depends only on the trace records and the per-record start/end times,
//! never on a back-end's internals; what only a back-end knows (bytes through switches,
//! INA slot peak, wall time) is passed in a [`SummaryContext`].

pub mod bench;
pub mod stats;

use crate::record::{AggDir, AggTag, Class, FlowRecord, Mode};
use crate::units::NodeId;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// One record's outcome, as written to `fct.csv`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FctRow {
    /// Trace record id.
    pub flow_id: u64,
    /// Source node id.
    pub src: u32,
    /// Destination node id.
    pub dst: u32,
    /// How the record consumed time (`net`, `ina`, `nvlink` or `compute` in the file).
    pub mode: Mode,
    /// Traffic class (`tp`, `pp`, `dp`, `emb` or `compute` in the file).
    pub class: Class,
    /// Payload bytes.
    pub size_bytes: u64,
    /// When the record started (after deps and gap), ns from iteration start.
    pub start_ns: u64,
    /// When it finished.
    pub end_ns: u64,
    /// `end_ns - start_ns`.
    pub fct_ns: u64,
    /// Completion time alone on an idle network (size/bottleneck rate + path latency).
    pub standalone_fct_ns: u64,
}

impl FctRow {
    /// The row of record `r` that ran from `start_ns` to `end_ns` and would take
    /// `standalone_fct_ns` alone on an idle network: the one place a record becomes a row.
    pub fn of_record(r: &FlowRecord, start_ns: u64, end_ns: u64, standalone_fct_ns: u64) -> Self {
        FctRow {
            flow_id: r.id.0,
            src: r.src.0,
            dst: r.dst.0,
            mode: r.mode,
            class: r.class,
            size_bytes: r.bytes.0,
            start_ns,
            end_ns,
            fct_ns: end_ns - start_ns,
            standalone_fct_ns,
        }
    }
}

/// The iteration summary, one row in `summary.csv`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// `replay` or `ns3`.
    pub backend: String,
    /// Trace file it ran.
    pub trace: String,
    /// Number of trace records.
    pub records: u64,
    /// Makespan of the DAG.
    pub iteration_time_ns: u64,
    /// Busy compute of the busiest GPU.
    pub compute_ns: u64,
    /// Compute on the critical path beyond the busiest GPU's own (pipeline fill/drain).
    pub bubble_ns: u64,
    /// Critical-path time in TP records.
    pub exposed_tp_ns: u64,
    /// Critical-path time in PP records.
    pub exposed_pp_ns: u64,
    /// Critical-path time in DP records.
    pub exposed_dp_ns: u64,
    /// Critical-path time in embedding records.
    pub exposed_emb_ns: u64,
    /// Critical-path time in context-parallel records (ring attention, Ulysses).
    #[serde(default)]
    pub exposed_cp_ns: u64,
    /// Critical-path time in expert-parallel records (MoE dispatch and combine).
    #[serde(default)]
    pub exposed_ep_ns: u64,
    /// Compute on the critical path.
    pub critical_path_compute_ns: u64,
    /// Payload bytes per class that crossed the network (net + ina records).
    pub tp_bytes: u64,
    /// See `tp_bytes`.
    pub pp_bytes: u64,
    /// See `tp_bytes`.
    pub dp_bytes: u64,
    /// See `tp_bytes`.
    pub emb_bytes: u64,
    /// See `tp_bytes`.
    #[serde(default)]
    pub cp_bytes: u64,
    /// See `tp_bytes`.
    #[serde(default)]
    pub ep_bytes: u64,
    /// Payload × switches touched, summed over network records ([`crate::topology::Topology::switch_hops`]).
    pub switch_bytes: u64,
    /// Peak number of INA aggregator slots in use on any switch.
    pub ina_slot_peak: u64,
    /// Wall-clock time the back-end took.
    pub wall_time_ns: u64,
}

impl Summary {
    /// Every numeric metric of the summary with its `summary.csv` column name, in column
    /// order: what `ina3d compare` puts side by side (`iteration.csv`).
    pub fn metrics(&self) -> [(&'static str, u64); 20] {
        [
            ("records", self.records),
            ("iteration_time_ns", self.iteration_time_ns),
            ("compute_ns", self.compute_ns),
            ("bubble_ns", self.bubble_ns),
            ("exposed_tp_ns", self.exposed_tp_ns),
            ("exposed_pp_ns", self.exposed_pp_ns),
            ("exposed_dp_ns", self.exposed_dp_ns),
            ("exposed_emb_ns", self.exposed_emb_ns),
            ("exposed_cp_ns", self.exposed_cp_ns),
            ("exposed_ep_ns", self.exposed_ep_ns),
            ("critical_path_compute_ns", self.critical_path_compute_ns),
            ("tp_bytes", self.tp_bytes),
            ("pp_bytes", self.pp_bytes),
            ("dp_bytes", self.dp_bytes),
            ("emb_bytes", self.emb_bytes),
            ("cp_bytes", self.cp_bytes),
            ("ep_bytes", self.ep_bytes),
            ("switch_bytes", self.switch_bytes),
            ("ina_slot_peak", self.ina_slot_peak),
            ("wall_time_ns", self.wall_time_ns),
        ]
    }
}

/// One change of a switch's slot occupancy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotSample {
    /// When, ns.
    pub time_ns: u64,
    /// The switch.
    pub switch: NodeId,
    /// Slots in use from then on.
    pub slots_in_use: u32,
}

/// Aggregator-slot use of one switch over a run, from its `switches.csv` samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwitchSlots {
    /// The switch.
    pub switch: NodeId,
    /// Most slots in use at once (held for a positive time).
    pub peak: u64,
    /// Slot-time: the integral of slots in use over time, slot·ns (Σ w × held duration).
    pub slot_time: u64,
}

/// Peak and slot-time of every switch with samples, ascending switch id: the one reading
/// of a back-end's occupancy samples (`switches.csv`, [`SlotSample`]: slots in use from
/// `time_ns` on). Each switch's samples are taken in time order (file order among equal
/// times); a value that lasts no time (another sample of the switch at the same
/// nanosecond) is neither a peak nor slot-time, so back-ends that log several changes at
/// one instant read the same as one that logs their sum; the last sample of a switch
/// counts for the peak but adds no slot-time (a run ends with its slots free).
pub fn switch_slots(samples: &[SlotSample]) -> Vec<SwitchSlots> {
    let mut order: Vec<&SlotSample> = samples.iter().collect();
    order.sort_by_key(|s| (s.switch, s.time_ns));
    order
        .chunk_by(|a, b| a.switch == b.switch)
        .map(|run| {
            let mut out = SwitchSlots {
                switch: run[0].switch,
                peak: 0,
                slot_time: 0,
            };
            for (k, s) in run.iter().enumerate() {
                let held = run.get(k + 1).map(|next| next.time_ns - s.time_ns);
                if held != Some(0) {
                    out.peak = out.peak.max(s.slots_in_use as u64);
                }
                let dt = held.unwrap_or(0);
                out.slot_time = out
                    .slot_time
                    .saturating_add((s.slots_in_use as u64).saturating_mul(dt));
            }
            out
        })
        .collect()
}

/// Peak aggregator slots in use on any one switch, from a back-end's occupancy samples
/// (`switches.csv`): the `ina_slot_peak` of a [`Summary`], the largest [`switch_slots`] peak.
pub fn slot_peak(samples: &[SlotSample]) -> u64 {
    switch_slots(samples)
        .iter()
        .map(|s| s.peak)
        .max()
        .unwrap_or(0)
}

/// What only the back-end knows, passed through to the [`Summary`] unchanged.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SummaryContext {
    /// `replay` or `ns3`.
    pub backend: String,
    /// Trace file name.
    pub trace: String,
    /// Payload × [`crate::topology::Topology::switch_hops`], summed over network records.
    pub switch_bytes: u64,
    /// Peak INA slots in use on any one switch ([`slot_peak`]).
    pub ina_slot_peak: u64,
    /// Wall-clock time of the run.
    pub wall_time_ns: u64,
}

/// Why a summary could not be computed (or its files read or written).
#[derive(Debug, thiserror::Error)]
pub enum FctError {
    /// A trace record has no result row.
    #[error("record {0} has no result row (every record needs its start and end time)")]
    MissingRow(u64),
    /// Two result rows for one record.
    #[error("record {0} has more than one result row")]
    DuplicateRow(u64),
    /// A row ends before it starts.
    #[error("record {id}: end {end_ns} ns is before start {start_ns} ns")]
    BadTimes {
        /// Record id.
        id: u64,
        /// Start.
        start_ns: u64,
        /// End.
        end_ns: u64,
    },
    /// A dep names a record not in the trace.
    #[error("record {id}: dep {dep} is not in the trace")]
    DanglingDep {
        /// Record id.
        id: u64,
        /// The missing dep.
        dep: u64,
    },
}

/// What [`summarize`] reads of a trace: the fields of record `i` (positions `0..len`, in
/// trace order) that the summary depends on. Implemented by `[FlowRecord]` (with an id
/// index) and by the replayer's compact record table, so both back-ends' summaries come
/// from the one computation below whatever holds the records.
pub trait TraceView {
    /// Number of records.
    fn len(&self) -> usize;
    /// True when there are no records.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Record id.
    fn id(&self, i: usize) -> u64;
    /// Sender.
    fn src(&self, i: usize) -> NodeId;
    /// Mode.
    fn mode(&self, i: usize) -> Mode;
    /// Class.
    fn class(&self, i: usize) -> Class;
    /// Gap before the start, ns.
    fn gap(&self, i: usize) -> u64;
    /// Fixed duration, ns.
    fn dur(&self, i: usize) -> u64;
    /// Payload bytes.
    fn bytes(&self, i: usize) -> u64;
    /// INA membership.
    fn agg(&self, i: usize) -> Option<AggTag>;
    /// Replace `out` with the positions of record `i`'s deps, in its dep order (every dep
    /// is a record of the trace: checked before a summary is made).
    fn deps(&self, i: usize, out: &mut Vec<usize>);
}

/// A slice of records with its id index, as a [`TraceView`].
struct Records<'a> {
    records: &'a [FlowRecord],
    index: &'a RecordIndex,
}

impl TraceView for Records<'_> {
    fn len(&self) -> usize {
        self.records.len()
    }
    fn id(&self, i: usize) -> u64 {
        self.records[i].id.0
    }
    fn src(&self, i: usize) -> NodeId {
        self.records[i].src
    }
    fn mode(&self, i: usize) -> Mode {
        self.records[i].mode
    }
    fn class(&self, i: usize) -> Class {
        self.records[i].class
    }
    fn gap(&self, i: usize) -> u64 {
        self.records[i].gap.0
    }
    fn dur(&self, i: usize) -> u64 {
        self.records[i].dur.0
    }
    fn bytes(&self, i: usize) -> u64 {
        self.records[i].bytes.0
    }
    fn agg(&self, i: usize) -> Option<AggTag> {
        self.records[i].agg
    }
    fn deps(&self, i: usize, out: &mut Vec<usize>) {
        out.clear();
        out.extend(
            self.records[i]
                .deps
                .iter()
                .filter_map(|d| self.index.get(d.0)),
        );
    }
}

/// The iteration summary of one run, from the trace and each record's start/end.
///
/// - iteration time: the makespan (latest end; the iteration starts at 0);
/// - compute: the busiest GPU's busy time = its `Compute` durations plus the gaps of the
///   records it sends (a gap is compute on the sender; gaps of INA down edges, whose
///   sender is a switch, are not compute and are left out);
/// - critical path: from the last-finishing record (ties: smallest id) back through its
///   binding dep, the latest-ending one (ties: smallest id). For an INA edge the deps of
///   every edge of its aggregation are candidates (the aggregation moves as one unit) and
///   deps inside the aggregation are not. Each step from the binding dep's end to the
///   record's end is split into: the record's gap (compute), its own duration (its class;
///   NVLink records count for their traffic class), and any wait beyond the gap (slot
///   queueing, back-end launch delay), charged to the record's class too, so the
///   buckets add up to the iteration time exactly;
/// - bubble = max(0, critical-path compute − compute);
/// - bytes per class: payload of `net` and `ina` records.
pub fn summarize(
    records: &[FlowRecord],
    rows: &[FctRow],
    ctx: &SummaryContext,
) -> Result<Summary, FctError> {
    let index = RecordIndex::new(records);
    let (start, end) = record_times(records, rows, &index)?;
    let view = Records {
        records,
        index: &index,
    };
    Ok(summarize_times(&view, &start, &end, ctx))
}

/// [`summarize`] of a trace whose records' start and end times (by position) are already
/// known and consistent (`start[i] ≤ end[i]`, every dep in the trace): what a back-end
/// that timed the records itself (the replayer) calls, without building rows first.
pub fn summarize_times<V: TraceView + ?Sized>(
    v: &V,
    start: &[u64],
    end: &[u64],
    ctx: &SummaryContext,
) -> Summary {
    summarize_timed(v, &(start, end), ctx)
}

/// Each record's start and end, by position (slices of them, or a back-end's own
/// run-time state).
pub trait Times {
    /// Start of record `i`, ns.
    fn start(&self, i: usize) -> u64;
    /// End of record `i`, ns.
    fn end(&self, i: usize) -> u64;
}

impl Times for (&[u64], &[u64]) {
    fn start(&self, i: usize) -> u64 {
        self.0[i]
    }
    fn end(&self, i: usize) -> u64 {
        self.1[i]
    }
}

/// [`summarize_times`] of times held as the back-end holds them.
pub fn summarize_timed<V: TraceView + ?Sized, T: Times + ?Sized>(
    v: &V,
    t: &T,
    ctx: &SummaryContext,
) -> Summary {
    let mut s = Summary {
        backend: ctx.backend.clone(),
        trace: ctx.trace.clone(),
        records: v.len() as u64,
        switch_bytes: ctx.switch_bytes,
        ina_slot_peak: ctx.ina_slot_peak,
        wall_time_ns: ctx.wall_time_ns,
        iteration_time_ns: (0..v.len()).map(|i| t.end(i)).max().unwrap_or(0),
        ..Summary::default()
    };
    busy_compute_and_bytes(v, &mut s);
    let buckets = critical_path(v, t);
    s.exposed_tp_ns = buckets[0];
    s.exposed_pp_ns = buckets[1];
    s.exposed_dp_ns = buckets[2];
    s.exposed_emb_ns = buckets[3];
    s.critical_path_compute_ns = buckets[4];
    s.exposed_cp_ns = buckets[5];
    s.exposed_ep_ns = buckets[6];
    s.bubble_ns = s.critical_path_compute_ns.saturating_sub(s.compute_ns);
    s
}

/// Record ids to positions. Traces usually number their records 0..n in file order: then
/// the id is the index and no map is needed (summaries run on millions of records).
struct RecordIndex {
    n: usize,
    map: Option<HashMap<u64, usize>>,
}

impl RecordIndex {
    fn new(records: &[FlowRecord]) -> Self {
        let dense = records.iter().enumerate().all(|(i, r)| r.id.0 == i as u64);
        RecordIndex {
            n: records.len(),
            map: (!dense).then(|| {
                records
                    .iter()
                    .enumerate()
                    .map(|(i, r)| (r.id.0, i))
                    .collect()
            }),
        }
    }
    fn get(&self, id: u64) -> Option<usize> {
        match &self.map {
            None => (id < self.n as u64).then_some(id as usize),
            Some(m) => m.get(&id).copied(),
        }
    }
}

/// Each record's start and end from the rows: exactly one row per record, ends not
/// before starts, and every dep a record of the trace.
fn record_times(
    records: &[FlowRecord],
    rows: &[FctRow],
    index: &RecordIndex,
) -> Result<(Vec<u64>, Vec<u64>), FctError> {
    let n = records.len();
    let mut start = vec![u64::MAX; n];
    let mut end = vec![0u64; n];
    for row in rows {
        let Some(i) = index.get(row.flow_id) else {
            continue;
        };
        if row.end_ns < row.start_ns {
            return Err(FctError::BadTimes {
                id: row.flow_id,
                start_ns: row.start_ns,
                end_ns: row.end_ns,
            });
        }
        if start[i] != u64::MAX {
            return Err(FctError::DuplicateRow(row.flow_id));
        }
        start[i] = row.start_ns;
        end[i] = row.end_ns;
    }
    if let Some(i) = start.iter().position(|&s| s == u64::MAX) {
        return Err(FctError::MissingRow(records[i].id.0));
    }
    for r in records {
        if let Some(d) = r.deps.iter().find(|d| index.get(d.0).is_none()) {
            return Err(FctError::DanglingDep {
                id: r.id.0,
                dep: d.0,
            });
        }
    }
    Ok((start, end))
}

/// The busiest GPU's compute (its `Compute` durations plus the gaps of what it sends;
/// INA down edges are sent by a switch, so their gaps are not compute) and the payload
/// bytes per class that crossed the network.
fn busy_compute_and_bytes<V: TraceView + ?Sized>(v: &V, s: &mut Summary) {
    let n = v.len();
    let max_node = (0..n).map(|i| v.src(i).0).max().unwrap_or(0) as usize;
    let mut busy = vec![0u64; max_node + 1];
    for i in 0..n {
        let mode = v.mode(i);
        let is_switch_sender =
            mode == Mode::Ina && v.agg(i).map(|a| a.dir == AggDir::Down).unwrap_or(false);
        let mut b = if is_switch_sender { 0 } else { v.gap(i) };
        if mode == Mode::Compute {
            b += v.dur(i);
        }
        busy[v.src(i).idx()] += b;
        if matches!(mode, Mode::Net | Mode::Ina) {
            let slot = match v.class(i) {
                Class::Tp => &mut s.tp_bytes,
                Class::Pp => &mut s.pp_bytes,
                Class::Dp => &mut s.dp_bytes,
                Class::Emb => &mut s.emb_bytes,
                Class::Cp => &mut s.cp_bytes,
                Class::Ep => &mut s.ep_bytes,
                Class::Compute => continue,
            };
            *slot += v.bytes(i);
        }
    }
    s.compute_ns = busy.iter().copied().max().unwrap_or(0);
}

/// Critical-path time per bucket `[tp, pp, dp, emb, compute, cp, ep]` (see [`summarize`]).
fn critical_path<V: TraceView + ?Sized, T: Times + ?Sized>(v: &V, t: &T) -> [u64; 7] {
    let n = v.len();
    let mut buckets = [0u64; 7];
    // Aggregation members, for jumping across a coupled INA unit.
    let mut agg_members: HashMap<u64, Vec<usize>> = HashMap::new();
    for i in 0..n {
        if let Some(a) = v.agg(i) {
            agg_members.entry(a.id).or_default().push(i);
        }
    }
    let Some(mut cur) = (0..n).max_by(|&a, &b| t.end(a).cmp(&t.end(b)).then(b.cmp(&a))) else {
        return buckets;
    };
    let mut scratch = Vec::new();
    // Each step moves to a strictly earlier end; the guard only bounds inconsistent rows.
    for _ in 0..=n {
        let best = binding_dep(v, &agg_members, t, cur, &mut scratch);
        let (prev_end, gap) = match best {
            Some((d, owner)) => (t.end(d), v.gap(owner)),
            None => (0, v.gap(cur)),
        };
        // prev_end + gap + wait + dur = end[cur]; clamp for back-ends whose rows are not
        // exactly consistent (the walk still terminates and sums to the makespan).
        let span = t.end(cur).saturating_sub(prev_end);
        let dur = (t.end(cur) - t.start(cur)).min(span);
        let gap = gap.min(span - dur);
        let wait = span - dur - gap;
        buckets[4] += gap;
        let cls = if v.mode(cur) == Mode::Compute {
            Class::Compute
        } else {
            v.class(cur)
        };
        buckets[bucket(cls)] += dur + wait;
        match best {
            Some((d, _)) => cur = d,
            None => break,
        }
    }
    buckets
}

/// The bucket of a class in [`critical_path`]'s array.
fn bucket(c: Class) -> usize {
    match c {
        Class::Tp => 0,
        Class::Pp => 1,
        Class::Dp => 2,
        Class::Emb => 3,
        Class::Compute => 4,
        Class::Cp => 5,
        Class::Ep => 6,
    }
}

/// The dep that bound `cur`'s start — the latest-ending one (ties: smallest id) — with the
/// record whose dep it is. For an INA edge the deps of every edge of its aggregation are
/// candidates (the aggregation moves as one unit) and deps inside the aggregation are not.
fn binding_dep<V: TraceView + ?Sized, T: Times + ?Sized>(
    v: &V,
    agg_members: &HashMap<u64, Vec<usize>>,
    t: &T,
    cur: usize,
    scratch: &mut Vec<usize>,
) -> Option<(usize, usize)> {
    let mut best: Option<(usize, usize)> = None; // (dep, owner edge)
    let mut consider = |owner: usize| {
        v.deps(owner, scratch);
        let owner_agg = v.agg(owner);
        for &d in scratch.iter() {
            if let (Some(a), Some(ra)) = (v.agg(d), owner_agg) {
                if a.id == ra.id {
                    continue;
                }
            }
            let better = match best {
                None => true,
                Some((b, _)) => t.end(d) > t.end(b) || (t.end(d) == t.end(b) && v.id(d) < v.id(b)),
            };
            if better {
                best = Some((d, owner));
            }
        }
    };
    match v.agg(cur).and_then(|a| agg_members.get(&a.id)) {
        Some(members) => members.iter().for_each(|&m| consider(m)),
        None => consider(cur),
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{AggGroup, AggTag};
    use crate::units::{Bytes, FlowId, Nanos, NodeId};

    fn rec(
        id: u64,
        src: u32,
        mode: Mode,
        class: Class,
        deps: &[u64],
        gap: u64,
        dur: u64,
    ) -> FlowRecord {
        FlowRecord {
            id: FlowId(id),
            src: NodeId(src),
            dst: NodeId(if mode == Mode::Compute { src } else { src + 1 }),
            bytes: Bytes(if mode == Mode::Compute { 0 } else { 1000 }),
            deps: deps.iter().map(|&d| FlowId(d)).collect(),
            gap: Nanos(gap),
            dur: Nanos(dur),
            mode,
            class,
            ..Default::default()
        }
    }

    fn row(r: &FlowRecord, start: u64, end: u64) -> FctRow {
        FctRow::of_record(r, start, end, end - start)
    }

    /// Hand-made DAG:
    /// ```text
    /// 0: compute gpu0 [0,100)
    /// 1: compute gpu1 [0,30)
    /// 2: pp net 0->1, deps 0, gap 10: [110, 160)
    /// 3: tp net 1->2, deps 1, gap 0: [30, 50)
    /// 4: compute gpu1 deps 2,3: [160, 260)
    /// 5: dp net 1->2 deps 4 gap 5: [265, 300) (+ wait 0)
    /// ```
    /// Critical path: 5 ← 4 ← 2 ← 0. compute on it: 100 + 10 + 100 + 5 = 215; pp 50; dp 35.
    /// busiest GPU: gpu1 = 30 + 100 + 5 (gap of 5) = 135 (gpu0: 100 + 10 = 110).
    #[test]
    fn summarize_walks_the_hand_computed_critical_path() {
        let recs = vec![
            rec(0, 0, Mode::Compute, Class::Compute, &[], 0, 100),
            rec(1, 1, Mode::Compute, Class::Compute, &[], 0, 30),
            rec(2, 0, Mode::Net, Class::Pp, &[0], 10, 0),
            rec(3, 1, Mode::Net, Class::Tp, &[1], 0, 0),
            rec(4, 1, Mode::Compute, Class::Compute, &[2, 3], 0, 100),
            rec(5, 1, Mode::Net, Class::Dp, &[4], 5, 0),
        ];
        let times = [
            (0, 100),
            (0, 30),
            (110, 160),
            (30, 50),
            (160, 260),
            (265, 300),
        ];
        // rows in a shuffled order, as ns-3 writes them in completion order
        let mut rows: Vec<FctRow> = recs
            .iter()
            .zip(times)
            .map(|(r, (a, b))| row(r, a, b))
            .collect();
        rows.reverse();
        let s = summarize(&recs, &rows, &SummaryContext::default()).unwrap();
        assert_eq!(s.iteration_time_ns, 300);
        assert_eq!(s.critical_path_compute_ns, 215);
        assert_eq!(s.exposed_pp_ns, 50);
        assert_eq!(s.exposed_dp_ns, 35);
        assert_eq!(s.exposed_tp_ns, 0);
        assert_eq!(s.compute_ns, 135);
        assert_eq!(s.bubble_ns, 80);
        assert_eq!(s.pp_bytes, 1000);
        assert_eq!(s.tp_bytes, 1000);
        assert_eq!(s.dp_bytes, 1000);
        assert_eq!(
            s.critical_path_compute_ns
                + s.exposed_tp_ns
                + s.exposed_pp_ns
                + s.exposed_dp_ns
                + s.exposed_emb_ns,
            s.iteration_time_ns
        );
    }

    #[test]
    fn summarize_charges_slot_waiting_to_the_waiting_record_class() {
        let recs = vec![
            rec(0, 0, Mode::Compute, Class::Compute, &[], 0, 100),
            rec(1, 0, Mode::Net, Class::Dp, &[0], 0, 0),
        ];
        // record 1 could start at 100 but started at 140 (queued for slots)
        let rows = vec![row(&recs[0], 0, 100), row(&recs[1], 140, 200)];
        let s = summarize(&recs, &rows, &SummaryContext::default()).unwrap();
        assert_eq!(s.exposed_dp_ns, 100);
        assert_eq!(s.critical_path_compute_ns, 100);
    }

    #[test]
    fn summarize_crosses_an_aggregation_through_its_latest_external_dep() {
        let mut recs = vec![
            rec(0, 0, Mode::Compute, Class::Compute, &[], 0, 100),
            rec(1, 1, Mode::Compute, Class::Compute, &[], 0, 300),
            rec(2, 0, Mode::Ina, Class::Dp, &[0], 0, 0),
            rec(3, 1, Mode::Ina, Class::Dp, &[1], 0, 0),
            rec(4, 9, Mode::Ina, Class::Dp, &[2, 3], 0, 0),
        ];
        for (i, dir) in [(2, AggDir::Up), (3, AggDir::Up), (4, AggDir::Down)] {
            recs[i].agg = Some(AggTag {
                id: 7,
                switch: NodeId(9),
                fanin: 2,
                dir,
                group: AggGroup::Dense,
            });
        }
        let rows: Vec<FctRow> = [(0, 100), (0, 300), (300, 400), (300, 400), (300, 400)]
            .iter()
            .zip(&recs)
            .map(|(&(a, b), r)| row(r, a, b))
            .collect();
        let s = summarize(&recs, &rows, &SummaryContext::default()).unwrap();
        // last record is 2 (ties at 400: smallest id); its aggregation's latest dep is 1 (ends 300)
        assert_eq!(s.critical_path_compute_ns, 300);
        assert_eq!(s.exposed_dp_ns, 100);
        assert_eq!(s.compute_ns, 300);
    }

    #[test]
    fn summarize_rejects_a_record_without_times() {
        let recs = vec![rec(0, 0, Mode::Compute, Class::Compute, &[], 0, 100)];
        assert!(matches!(
            summarize(&recs, &[], &SummaryContext::default()),
            Err(FctError::MissingRow(0))
        ));
    }

    #[test]
    fn metrics_list_every_numeric_summary_column_in_file_order() {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.serialize(Summary::default()).unwrap();
        let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
        let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
        let numeric: Vec<&str> = header
            .into_iter()
            .filter(|c| !matches!(*c, "backend" | "trace"))
            .collect();
        let names: Vec<&str> = Summary::default().metrics().iter().map(|m| m.0).collect();
        assert_eq!(names, numeric);
    }

    fn sample(time_ns: u64, switch: u32, slots_in_use: u32) -> SlotSample {
        SlotSample {
            time_ns,
            switch: NodeId(switch),
            slots_in_use,
        }
    }

    #[test]
    fn switch_slots_integrate_each_switchs_occupancy_over_time() {
        // switch 7: 100 slots over [10, 60), 250 over [60, 90), 150 over [90, 100), then free;
        // switch 3: 256 over [0, 1000). Interleaved as a back-end writes them (time order).
        let s = vec![
            sample(0, 3, 256),
            sample(10, 7, 100),
            sample(60, 7, 250),
            sample(90, 7, 150),
            sample(100, 7, 0),
            sample(1000, 3, 0),
        ];
        let got = switch_slots(&s);
        assert_eq!(
            got,
            vec![
                SwitchSlots {
                    switch: NodeId(3),
                    peak: 256,
                    slot_time: 256 * 1000
                },
                SwitchSlots {
                    switch: NodeId(7),
                    peak: 250,
                    slot_time: 100 * 50 + 250 * 30 + 150 * 10
                },
            ]
        );
        assert_eq!(slot_peak(&s), 256);
    }

    #[test]
    fn a_value_that_lasts_no_time_is_not_a_peak() {
        // at t = 50 one aggregation frees 100 and another takes 100, logged as two changes
        let s = vec![
            sample(0, 1, 100),
            sample(50, 1, 200),
            sample(50, 1, 100),
            sample(80, 1, 0),
        ];
        let got = switch_slots(&s);
        assert_eq!(got[0].peak, 100);
        assert_eq!(got[0].slot_time, 100 * 80);
        assert_eq!(slot_peak(&[]), 0);
    }
}
