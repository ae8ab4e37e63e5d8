//! The event loop: records and aggregation units started, rated (see `solver`) and
//! finished in time order, then the results assembled.
//!
//! Data layout: records, units (active transfers) and channels live in flat vectors
//! indexed by `u32`; every path is a slice of one channel arena (see `prepare`).

use super::pools::{Grant, Occupancy, Pools};
use super::prepare::{ina_wire, prepare, wire, Prepared, NONE};
use super::queue::EventQueue;
use super::rates::{RateControl, Started, StreamWindow};
use super::result::{RecState, RecordTimes, Standalone, TIMER};
use super::route::PathSource;
use super::solver::{Net, Owner, TIME_HORIZON_NS};
use super::table::{Loc, RecordTable};
use super::{ReplayError, ReplayOptions, ReplayResult};
use crate::fct::{self, SummaryContext};
use crate::formats::links_csv::ChannelStat;
use crate::record::FlowRecord;
use crate::topology::Topology;
use crate::units::{Bytes, LinkId};
use std::time::Instant;

/// What an event does. The declaration order is the processing order within one
/// nanosecond (then by index, then version): transfers finish, records and aggregations
/// end (freeing their dependants and slots), then records and aggregations start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum EventKind {
    /// A unit's last byte left (index: unit; version: the rate it was scheduled with).
    TxDone,
    /// A record ends (index: record).
    End,
    /// An aggregation ends, with every edge (index: aggregation).
    AggEnd,
    /// A record starts (index: record).
    Start,
    /// An aggregation is ready and asks for slots (index: aggregation).
    AggStart,
    /// The rate model's own event ([`RateControl::tick`]; the DCQCN model's).
    CcTick,
}
/// The records' times, by position, from their run-time states.
struct Times<'a>(&'a [RecState]);

impl fct::Times for Times<'_> {
    fn start(&self, i: usize) -> u64 {
        self.0[i].start
    }
    fn end(&self, i: usize) -> u64 {
        self.0[i].end
    }
}

/// Mutable simulation state.
pub(super) struct Sim<'a> {
    pub p: Prepared,
    pub opts: &'a ReplayOptions,
    /// The clock, the units on their channels and the solver.
    net: Net,
    /// How the units are rated (`opts.rate_model`).
    model: Box<dyn RateControl>,
    /// Pending events, popped by (time, kind, index, version).
    queue: EventQueue<EventKind>,
    /// Rows of each column of each ring block that have ended (a block record is ready
    /// once its column and the one before have ended the row before; see `finish`).
    ended: Vec<Vec<u32>>,
    /// The run-time state of each record, in one place (see [`RecState`]).
    rec: Vec<RecState>,
    /// Free arena regions for host transfers, by length: a transfer's path is copied into
    /// a region of its own while it runs (the solver keeps each unit's position on its
    /// channels per arena slot, and records share interned paths).
    regions: Vec<Vec<u32>>,
    done: usize,
    pools: Pools,
    occupancy: Occupancy,
    fallbacks: u64,
    events: u64,
    /// The first event scheduled past [`TIME_HORIZON_NS`] (kind, index), if any.
    beyond: Option<(EventKind, u32)>,
}

impl<'a> Sim<'a> {
    fn new(
        mut p: Prepared,
        records: &RecordTable,
        opts: &'a ReplayOptions,
        model: Box<dyn RateControl>,
    ) -> Sim<'a> {
        let rec = RecState::table(&mut p, records);
        let pools = Pools::new(&opts.ina, p.switch_nodes.len());
        let occupancy = Occupancy::new(p.switch_nodes.clone());
        let net = Net::new(std::mem::take(&mut p.arena), std::mem::take(&mut p.ch_cap));
        Sim {
            opts,
            net,
            model,
            queue: EventQueue::new(),
            ended: records
                .blocks()
                .iter()
                .map(|x| vec![0; x.n as usize])
                .collect(),
            rec,
            regions: Vec::new(),
            done: 0,
            pools,
            occupancy,
            fallbacks: 0,
            beyond: None,
            events: 0,
            p,
        }
    }

    fn push(&mut self, t: u64, kind: EventKind, idx: u32, ver: u32) {
        // the DCQCN model may park its tick far ahead, and a unit starved to a rate near 0
        // gets a far transfer end that a new rate supersedes: those two are judged when
        // they fire (`tx_done`), every other event is the trace's
        let parked = matches!(kind, EventKind::CcTick | EventKind::TxDone);
        if t > TIME_HORIZON_NS && !parked && self.beyond.is_none() {
            self.beyond = Some((kind, idx));
        }
        self.queue.push(t, (kind, idx, ver));
    }

    /// The error for an event past the horizon, naming the record concerned.
    fn past_horizon(&self, kind: EventKind, idx: u32, records: &RecordTable) -> ReplayError {
        let what = match kind {
            EventKind::End | EventKind::Start => format!("record {}", records.id(idx as usize)),
            EventKind::AggEnd | EventKind::AggStart => format!("aggregation {idx}"),
            EventKind::TxDone => {
                let u = self.net.slot_of[idx as usize] as usize;
                match self.net.units.get(u).map(|x| x.owner) {
                    Some(Owner::Rec(i)) => format!("record {}", records.id(i as usize)),
                    Some(Owner::Agg(a) | Owner::Ring(a)) => format!("aggregation {a}"),
                    None => "a transfer".to_string(),
                }
            }
            EventKind::CcTick => "the DCQCN model".to_string(),
        };
        ReplayError::PastHorizon { what }
    }

    /// Run every event to the last; then every record has ended (or it is an error).
    fn run(&mut self, records: &RecordTable) -> Result<(), ReplayError> {
        let n = records.len();
        for i in 0..n as u32 {
            if self.rec[i as usize].pending == 0 {
                self.ready(i, records);
            }
        }
        let bar = self.opts.progress.then(|| progress_bar(n));
        // the clock is read at the first batch of events, then every 16,384 events
        let mut next_check = 0;
        while let Some(t) = self.queue.next_time() {
            self.net.now = t;
            // every event of this nanosecond, then one re-solve for the batch
            while let Some((kind, idx, ver)) = self.queue.pop_now() {
                self.events += 1;
                self.handle(kind, idx, ver, records);
            }
            if let Some((kind, idx)) = self.beyond {
                return Err(self.past_horizon(kind, idx, records));
            }
            self.settle();
            // (reading it is negligible beside the events' handling)
            if self.events >= next_check {
                next_check = self.events + 0x4000;
                if self.opts.deadline.is_some_and(|d| Instant::now() >= d) {
                    if let Some(b) = bar {
                        b.finish_and_clear();
                    }
                    return Err(ReplayError::OutOfTime {
                        done: self.done,
                        total: n,
                        simulated_ns: t,
                    });
                }
            }
            if let Some(b) = &bar {
                if self.events & 0x3fff == 0 || self.queue.is_empty() {
                    b.set_position(self.done as u64);
                    b.set_message(format!("{:.3} ms", t as f64 / 1e6));
                }
            }
        }
        if let Some(b) = bar {
            b.finish_and_clear();
        }
        if self.done < n {
            let first = (0..n).find(|&i| self.rec[i].end == u64::MAX).unwrap_or(0);
            return Err(ReplayError::Stalled(n - self.done, records.id(first)));
        }
        Ok(())
    }

    /// After a batch of events: the model brings the rates up to date; the completion
    /// events the new rates call for, and the model's next own event, are queued.
    fn settle(&mut self) {
        let tick = self.model.settle(&mut self.net);
        let mut due = std::mem::take(&mut self.net.due);
        for &(t, serial, ver) in &due {
            self.push(t, EventKind::TxDone, serial, ver);
        }
        due.clear();
        self.net.due = due;
        if let Some(t) = tick {
            self.push(t, EventKind::CcTick, 0, 0);
        }
    }

    fn handle(&mut self, kind: EventKind, idx: u32, ver: u32, records: &RecordTable) {
        match kind {
            EventKind::TxDone => self.tx_done(idx, ver, records),
            EventKind::End => self.finish(idx, records),
            EventKind::AggEnd => self.end_agg(idx, records),
            EventKind::Start => self.start_record(idx, records),
            EventKind::AggStart => self.try_agg(idx),
            EventKind::CcTick => {
                let next = self.queue.peek_time();
                self.model.tick(&mut self.net, next);
            }
        }
    }

    /// The last byte of unit `serial` left (unless the event is stale: a newer rate, or
    /// the unit already gone): take it off the network, free its slot and end its owner
    /// after the path latency.
    fn tx_done(&mut self, serial: u32, ver: u32, records: &RecordTable) {
        let u = self.net.slot_of[serial as usize];
        let x = &self.net.units[u as usize];
        if x.serial != serial || x.ver != ver {
            return;
        }
        // the finish at the rate now (the event may be from an earlier, faster rate); a
        // unit at rate 0 (done, or starved) waits for its next rate
        let finish = if x.rate == 0.0 { u64::MAX } else { x.finish() };
        if finish > self.net.now {
            let x = &mut self.net.units[u as usize];
            x.due = finish;
            if finish < u64::MAX {
                x.ver = x.ver.wrapping_add(1);
                let ver = x.ver;
                self.push(finish, EventKind::TxDone, serial, ver);
            }
            return;
        }
        if self.net.now > TIME_HORIZON_NS {
            // a transfer that really ends past the horizon (not a superseded far event)
            self.beyond.get_or_insert((EventKind::TxDone, serial));
            return;
        }
        let (owner, lat, off, len, rate) = (x.owner, x.latency, x.off, x.len, x.rate);
        let t = self.net.now;
        self.model.finished(&mut self.net, u);
        self.net.units[u as usize].rate = 0.0;
        self.model.removing(&mut self.net, u);
        self.net.remove_unit(u, !matches!(owner, Owner::Agg(_)));
        self.net.free_units.push(u);
        match owner {
            Owner::Rec(i) => {
                self.regions[len as usize].push(off);
                self.push(t.saturating_add(lat), EventKind::End, i, 0)
            }
            Owner::Agg(a) => {
                self.account_edges(a, records);
                // a stream its window bounds ends with its last round, not a latency
                // after its fluid's last byte (netmodel::ina_tail)
                let g = &self.p.aggs[a as usize];
                let tail = crate::netmodel::ina_tail(g.wire, rate, g.window, g.rounds, g.rtt, lat);
                self.push(t.saturating_add(tail), EventKind::AggEnd, a, 0);
            }
            Owner::Ring(a) => {
                let agg = &mut self.p.aggs[a as usize];
                agg.outstanding -= 1;
                if agg.outstanding == 0 {
                    self.push(t.saturating_add(lat), EventKind::AggEnd, a, 0);
                }
            }
        }
    }

    /// Each edge of a finished aggregation adds its own bytes to its own path
    /// (reduce-scatter shards differ from the stream size).
    fn account_edges(&mut self, a: u32, records: &RecordTable) {
        for &m in &self.p.aggs[a as usize].members {
            let w = ina_wire(records.bytes(m as usize), self.opts).0 as f64;
            let path = self.rec[m as usize].path;
            if path == NONE {
                continue;
            }
            for &c in self.p.paths.of(path) {
                self.net.ch_bytes[c as usize] += w;
            }
        }
    }

    /// An arena region of `len` slots holding `channels` for one running transfer.
    fn region(&mut self, len: u32, path: u32) -> u32 {
        if self.regions.len() <= len as usize {
            self.regions.resize(len as usize + 1, Vec::new());
        }
        let off = match self.regions[len as usize].pop() {
            Some(off) => off,
            None => {
                let off = self.net.arena.len() as u32;
                self.net.arena.resize(off as usize + len as usize, 0);
                self.net.pos.resize(off as usize + len as usize, 0);
                off
            }
        };
        let o = off as usize;
        self.net.arena[o..o + len as usize].copy_from_slice(self.p.paths.of(path));
        off
    }

    /// Record `i`'s last dep ended: start it after its gap, or count it towards its
    /// aggregation, which starts when its last edge is ready.
    fn ready(&mut self, i: u32, records: &RecordTable) {
        let t = self.rec[i as usize]
            .start
            .saturating_add(records.gap(i as usize));
        let a = self.p.agg_of(i as usize);
        if a == NONE {
            self.push(t, EventKind::Start, i, 0);
        } else {
            let agg = &mut self.p.aggs[a as usize];
            agg.start_at = agg.start_at.max(t);
            agg.pending -= 1;
            if agg.pending == 0 {
                let t = agg.start_at;
                self.push(t, EventKind::AggStart, a, 0);
            }
        }
    }

    /// Record `i` ended now: each record waiting for it has one dep fewer.
    fn finish(&mut self, i: u32, records: &RecordTable) {
        self.rec[i as usize].end = self.net.now;
        self.done += 1;
        match records.locate(i as usize) {
            Loc::Row(r) => {
                for k in self.p.deps.of_row(r) {
                    let d = self.p.deps.at(k);
                    self.release(d, records);
                }
            }
            Loc::Block { b, k, col } => {
                // record (k + 1, c) waits for (k, c) and (k, c − 1), and each column's
                // rows end in order: it is ready once both columns have ended row k
                let x = &records.blocks()[b as usize];
                let ended = &mut self.ended[b as usize];
                ended[col as usize] = k;
                if k < x.rows() {
                    let (left, right) = ((col + x.n - 1) % x.n, (col + 1) % x.n);
                    let mine = (ended[left as usize] >= k).then(|| x.pos(k + 1, col));
                    let next = (ended[right as usize] >= k).then(|| x.pos(k + 1, right));
                    for d in [mine, next].into_iter().flatten() {
                        // no gap inside a block: it starts now
                        self.push(self.net.now, EventKind::Start, d, 0);
                    }
                }
                for e in self.p.deps.of_block(b, i) {
                    let d = self.p.deps.ext_at(b, e);
                    self.release(d, records);
                }
            }
        }
    }

    /// One dep of record `d` ended now.
    #[inline]
    fn release(&mut self, d: u32, records: &RecordTable) {
        let r = &mut self.rec[d as usize];
        r.start = r.start.max(self.net.now);
        r.pending -= 1;
        if r.pending == 0 {
            self.ready(d, records);
        }
    }

    fn start_record(&mut self, i: u32, records: &RecordTable) {
        let iu = i as usize;
        self.rec[iu].start = self.net.now;
        // a block record's run-time state is its block's: its own is only written
        let (f, path) = match records.locate(iu) {
            Loc::Row(r) => (records.row_fields(r), self.rec[iu].path),
            Loc::Block { b, k, col } => (
                records.block_fields(b, k, col),
                self.p.block_path[b as usize][col as usize],
            ),
        };
        match path {
            TIMER => self.push(self.net.now.saturating_add(f.dur), EventKind::End, i, 0),
            path => {
                let (len, delay) = match path {
                    NONE => (0, 0),
                    p => (self.p.paths.len[p as usize], self.p.paths.delay[p as usize]),
                };
                let mut w = wire(Bytes(f.bytes), self.opts).0 as f64;
                if path != NONE {
                    // a sprayed transfer is its strands, each one a unit's share
                    w /= self.p.paths.strands[path as usize] as f64;
                }
                if len == 0 || w == 0.0 {
                    self.push(self.net.now.saturating_add(delay), EventKind::End, i, 0);
                } else {
                    let cap = self.p.paths.bottleneck[path as usize];
                    let off = self.region(len, path);
                    let u = self.net.add_unit(off, len, w, cap, delay, Owner::Rec(i));
                    let conn = (f.src.0, f.dst.0, f.channel);
                    let what = Started::Transfer { conn, line: cap };
                    self.model.started(&mut self.net, u, what);
                }
            }
        }
    }

    /// The smallest channel capacity on `arena[off..off+len]`.
    fn bottleneck(&self, off: u32, len: u32) -> f64 {
        (off..off + len)
            .map(|k| self.net.ch_cap[self.net.arena[k as usize] as usize])
            .fold(f64::INFINITY, f64::min)
    }

    fn start_agg(&mut self, a: u32, slots: u32) {
        let now = self.net.now;
        let agg = &mut self.p.aggs[a as usize];
        agg.started = now;
        agg.slots = slots;
        if agg.wire == 0.0 || agg.tree_len == 0 {
            let t = now.saturating_add(agg.latency);
            self.push(t, EventKind::AggEnd, a, 0);
            return;
        }
        // a granted stream keeps its whole window in flight: its `w` slots cover the
        // window or, when shorter, every packet it has; a pool smaller than the window
        // (`w` < `want`) limits the packets in flight to `w`, each packet its payload
        // plus headers on the wire
        let in_flight = if slots < agg.want {
            slots
        } else {
            self.opts.ina.window
        };
        let packet = self.opts.ina.payload.0 + self.opts.header.0;
        let window = if agg.switches.is_empty() {
            f64::INFINITY
        } else {
            crate::netmodel::window_rate(in_flight, packet, agg.rtt)
        };
        agg.window = window;
        agg.rounds = crate::netmodel::window_rounds(agg.wire, packet, in_flight);
        let cap = agg.tree_cap.min(window);
        let (off, len, w, lat) = (agg.tree_off, agg.tree_len, agg.wire, agg.latency);
        let stream = StreamWindow {
            window: agg.window,
            rtt: agg.rtt,
            tree_cap: agg.tree_cap,
        };
        let u = self.net.add_unit(off, len, w, cap, lat, Owner::Agg(a));
        self.model
            .started(&mut self.net, u, Started::Stream(stream));
    }

    fn fallback(&mut self, a: u32) {
        self.fallbacks += 1;
        let now = self.net.now;
        let agg = &mut self.p.aggs[a as usize];
        agg.started = now;
        agg.slots = 0;
        let ring = agg.ring.clone();
        let (w, lat) = (agg.ring_wire, agg.ring_latency);
        let usable: Vec<(u32, u32)> = ring.into_iter().filter(|r| r.1 > 0).collect();
        agg.outstanding = usable.len() as u32;
        if usable.is_empty() || w == 0.0 {
            agg.outstanding = 0;
            self.push(now.saturating_add(lat), EventKind::AggEnd, a, 0);
            return;
        }
        for (off, len) in usable {
            let cap = self.bottleneck(off, len);
            let u = self.net.add_unit(off, len, w, cap, lat, Owner::Ring(a));
            self.model.started(&mut self.net, u, Started::Ring);
        }
    }

    fn try_agg(&mut self, a: u32) {
        let agg = &self.p.aggs[a as usize];
        match self.pools.ask(agg, self.opts.ina.window) {
            Grant::Slots(k) => self.grant(a, k),
            Grant::Fallback => self.fallback(a),
            Grant::Wait => {
                let key = self.pools.wait_key(agg, a, self.net.now);
                self.pools.waiting.insert(key);
            }
        }
    }

    /// Start aggregation `a` with `slots` on each of its switches: reserved in the pools
    /// until it ends, held physically as its first packet reaches each switch.
    fn grant(&mut self, a: u32, slots: u32) {
        let agg = &self.p.aggs[a as usize];
        if slots > 0 {
            self.pools.change(agg, slots, true);
            self.occupancy.acquire(agg, slots, self.net.now);
        }
        self.start_agg(a, slots);
    }

    /// Serve waiting aggregations in queue order (priority rank, arrival, id), each one
    /// whose slots are free now.
    fn serve_waiting(&mut self) {
        if self.pools.waiting.is_empty() {
            return;
        }
        let keys: Vec<(u8, u64, u32)> = self.pools.waiting.iter().copied().collect();
        for key in keys {
            let a = key.2;
            let agg = &self.p.aggs[a as usize];
            if let Grant::Slots(k) = self.pools.ask(agg, self.opts.ina.window) {
                self.pools.waiting.remove(&key);
                self.grant(a, k);
            }
        }
    }

    fn end_agg(&mut self, a: u32, records: &RecordTable) {
        let now = self.net.now;
        let slots = self.p.aggs[a as usize].slots;
        if slots > 0 {
            let agg = &self.p.aggs[a as usize];
            self.pools.change(agg, slots, false);
            self.occupancy.release(agg, slots, now - agg.latency);
        }
        let started = self.p.aggs[a as usize].started;
        let members = std::mem::take(&mut self.p.aggs[a as usize].members);
        for &m in &members {
            self.rec[m as usize].start = started;
        }
        for &m in &members {
            self.finish(m, records);
        }
        self.p.aggs[a as usize].members = members;
        self.serve_waiting();
    }

    /// Statistics of every channel that carried bytes, channel order.
    fn channel_stats(&self, topo: &Topology) -> Vec<ChannelStat> {
        let makespan = self.rec.iter().map(|r| r.end).max().unwrap_or(0);
        let mut channels = Vec::new();
        for (c, bytes) in self.net.ch_bytes.iter().enumerate() {
            let b = bytes.round() as u64;
            if b == 0 {
                continue;
            }
            let l = &topo.links[c / 2];
            let (from, to) = if c % 2 == 0 { (l.a, l.b) } else { (l.b, l.a) };
            let cap_bytes = l.rate.0 as f64 / 8e9 * makespan as f64;
            channels.push(ChannelStat {
                link: LinkId((c / 2) as u32),
                from,
                to,
                rate_bps: l.rate.0,
                bytes: b,
                utilisation: if cap_bytes > 0.0 {
                    b as f64 / cap_bytes
                } else {
                    0.0
                },
            });
        }
        channels
    }
}

fn progress_bar(n: usize) -> indicatif::ProgressBar {
    crate::progress::bar(
        n as u64,
        "{elapsed_precise} [{bar:30}] {pos}/{len} records  sim {msg}",
    )
}

/// Replay `records` on `topo`, routing every transfer with `routing`: [`simulate_table`]
/// of their [`RecordTable`].
pub fn simulate<R: PathSource + ?Sized>(
    records: &[FlowRecord],
    topo: &Topology,
    routing: &R,
    opts: &ReplayOptions,
) -> Result<ReplayResult, ReplayError> {
    let table = RecordTable::from_records(records)?;
    table.use_huge_pages();
    simulate_table(table, topo, routing, opts)
}

/// Replay the records of `records` on `topo`, routing every transfer with `routing`.
///
/// Validates the trace first (see the module docs), then runs the event loop to the
/// last record and returns each record's times (its `fct.csv` rows on demand, trace
/// order), the summary (`fct::summarize_times`), per-channel and per-switch statistics.
pub fn simulate_table<R: PathSource + ?Sized>(
    records: RecordTable,
    topo: &Topology,
    routing: &R,
    opts: &ReplayOptions,
) -> Result<ReplayResult, ReplayError> {
    let wall = std::time::Instant::now();
    let bar = opts
        .progress
        .then(|| crate::progress::spinner("checking the trace, interning paths"));
    let p = prepare(&records, topo, routing, opts)?;
    let model: Box<dyn RateControl> = match opts.rate_model {
        super::RateModel::Ideal => Box::new(super::ideal::Ideal),
        super::RateModel::Dcqcn => {
            Box::new(super::dcqcn::Dcqcn::new(topo, opts, !p.aggs.is_empty()))
        }
    };
    let mut sim = Sim::new(p, &records, opts, model);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    sim.run(&records)?;
    let channels = sim.channel_stats(topo);
    let tenant_slots = sim.occupancy.tenant_slots(opts.ina.tenants.len());
    let slots = std::mem::replace(&mut sim.occupancy, Occupancy::new(Vec::new())).samples();
    let standalone = Standalone::take(&mut sim.p, opts);
    let rec = std::mem::take(&mut sim.rec);
    let (switch_bytes, ina_fallbacks, events, resolves) = (
        sim.p.switch_bytes,
        sim.fallbacks,
        sim.events,
        sim.net.resolves,
    );
    // the prepared tables and the solver's state are done with: free them before the
    // summary is made (each record's state is kept: its times are the rows')
    drop(sim);
    let ctx = SummaryContext {
        backend: "replay".into(),
        trace: opts.trace_name.clone(),
        switch_bytes,
        ina_slot_peak: fct::slot_peak(&slots),
        wall_time_ns: wall.elapsed().as_nanos() as u64,
    };
    let summary = fct::summarize_timed(&records, &Times(&rec), &ctx);
    Ok(ReplayResult {
        summary,
        channels,
        slots,
        tenant_slots,
        ina_fallbacks,
        events,
        resolves,
        times: RecordTimes {
            records,
            rec,
            standalone,
        },
    })
}
