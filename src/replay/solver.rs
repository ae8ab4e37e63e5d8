//! The network the engine rates ([`Net`]): units (active transfers) on channels, the
//! clock, and the incremental max-min solver — the progressive-filling re-solve of the
//! component a batch of changes touched. A rate model (`rates::RateControl`)
//! reads it and caps units ([`Net::set_cap`]); the engine adds and removes units.
//!
//! Each channel keeps the list of units on it with each unit's position remembered, so
//! adding or removing a unit is O(path length). A channel is *tight* when the rate caps of
//! its units sum above its capacity; only tight channels couple units, so a re-solve
//! visits the units reachable from the changed ones through tight channels and leaves
//! every other unit's rate as it is (exact: a channel that cannot be saturated constrains
//! nobody).

use crate::netmodel::fluid_time;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Channels by fair share (as ordered bits of a non-negative f64), then channel, then the
/// channel's version (stale entries are skipped).
type ShareHeap = BinaryHeap<Reverse<(u64, u32, u32)>>;

/// The latest time any event of a replay may fall at: 2^62 ns (146 years). Every time
/// the engine adds up saturates instead of wrapping, and an event past this horizon stops
/// the replay with [`super::ReplayError::PastHorizon`] — no input can wrap a time round
/// to a shorter iteration.
pub const TIME_HORIZON_NS: u64 = 1 << 62;

/// Who a unit moves bytes for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Owner {
    /// A `Net` record.
    Rec(u32),
    /// An aggregation streaming on its tree.
    Agg(u32),
    /// One flow of an aggregation's fallback ring.
    Ring(u32),
}

/// An active transfer: a fluid flow on `arena[off..off+len]`.
pub(super) struct Unit {
    pub off: u32,
    pub len: u32,
    /// Wire bytes left at `last`.
    pub remaining: f64,
    pub wire: f64,
    /// Bytes per ns; 0 before the first solve and once done.
    pub rate: f64,
    /// Own rate limit (bottleneck over multiplicity, INA window).
    pub cap: f64,
    pub last: u64,
    /// Version of the unit's pending completion event (`TxDone` events of older versions
    /// are stale).
    pub ver: u32,
    /// Time of the pending completion event (`u64::MAX`: none). A rate change that
    /// moves the finish later keeps it, and the engine's `tx_done` moves it on when it
    /// fires early: under DCQCN, rates change at every tick and a new event per change
    /// filled the heap with stale ones (a 16-GPU INA job: 168 s, most of it popping them).
    pub due: u64,
    /// Propagation delay added after the last byte left.
    pub latency: u64,
    pub owner: Owner,
    /// Creation order of the unit (its slot in `units` is reused once it finishes): the
    /// id its completion events carry and the tie-break of the solver's ordering, so
    /// results do not depend on which slot a unit got.
    pub serial: u32,
}

impl Unit {
    /// When its last byte leaves at its current rate (saturating: `u64::MAX` for bytes
    /// left at rate 0).
    pub fn finish(&self) -> u64 {
        self.last
            .saturating_add(fluid_time(self.remaining, self.rate))
    }
}

/// Which units a re-solve fills before the others ([`Net::resolve`]): `None`, all
/// together; else aggregation streams and fallback rings, and the host transfers the
/// function names, before the rest.
pub(super) type FillFirst<'a> = Option<SentAll<'a>>;

/// The host transfers a re-solve fills with the aggregation streams ([`FillFirst`]).
pub(super) type SentAll<'a> = &'a dyn Fn(&Net, u32) -> bool;

/// A [`FillFirst`] naming no host transfer.
fn never(_: &Net, _: u32) -> bool {
    false
}

/// The network being rated: the clock, the active transfers on their channels and the
/// solver's state. What a rate model reads, and caps through [`Net::set_cap`].
pub(super) struct Net {
    /// Simulated time, ns.
    pub now: u64,
    /// Every path a unit runs on: the prepared tables' arena, with a region per running
    /// host transfer appended (the engine's `region`).
    pub arena: Vec<u32>,
    /// Per channel: capacity, bytes per ns.
    pub ch_cap: Vec<f64>,
    pub units: Vec<Unit>,
    /// Slots of finished units, reused by the next units (a large trace has millions of
    /// transfers but only the concurrent ones need a slot).
    pub free_units: Vec<u32>,
    /// The slot of each unit, by serial.
    pub slot_of: Vec<u32>,
    pub pos: Vec<u32>,
    /// Each channel's units (`ch_units[c]`: (unit, position in its path)) and the
    /// solver's state of it, one cache line per channel ([`ChanTable`]).
    pub ch_units: ChanTable,
    pub ch_bytes: Vec<f64>,
    // solver scratch
    scratch: Scratch,
    dirty: Vec<u32>,
    pub fresh: Vec<u32>,
    stamp: u32,
    unit_mark: Vec<u32>,
    unit_frozen: Vec<u32>,
    new_rate: Vec<f64>,
    /// Max-min re-solves so far.
    pub resolves: u64,
    /// Completion events the last re-solves call for, (time, unit serial, version), for
    /// the engine to queue.
    pub due: Vec<(u64, u32, u32)>,
}

/// The re-solve's lists, kept between re-solves so that each batch does not allocate.
#[derive(Default)]
pub(super) struct Scratch {
    units: Vec<u32>,
    channels: Vec<u32>,
    stack: Vec<u32>,
    heap: ShareHeap,
}

/// The solver's state of one channel, in one cache line: adding, removing and re-solving
/// a transfer touch every channel of its path, and with the fields in separate arrays
/// (and the unit list on the heap) each touch cost a cache miss per field. A channel with
/// at most [`INLINE`] units (most of them: a NIC carries one or two transfers at a time)
/// keeps them here; a longer list lives in [`ChanTable`]'s spill lists.
#[repr(C, align(64))]
#[derive(Clone, Debug, Default)]
pub(super) struct Chan {
    /// Capacity, bytes per ns (`Prepared::ch_cap`, kept here beside the demand it is
    /// compared with).
    cap: f64,
    /// Sum of the rate caps of its units.
    demand: f64,
    /// Capacity not yet given out in a progressive fill.
    rem: f64,
    /// Stamp of the last re-solve that reached it.
    mark: u32,
    /// Stamp of the last re-solve whose component it is a tight channel of.
    comp: u32,
    /// Version of its entries in the fill's share heap.
    ver: u32,
    /// Units not yet frozen in a progressive fill.
    cnt: u32,
    /// Units on it.
    len: u32,
    /// Its spill list, when `len` > [`INLINE`].
    spill: u32,
    /// The units, while they fit: (unit, position of the channel in its path).
    inline: [(u32, u32); INLINE],
}

/// Units a channel holds in its own cache line.
const INLINE: usize = 2;

/// Every channel's [`Chan`]; indexing gives a channel's units, (unit, position of the
/// channel in its path), in the order a `Vec` with `push` and `swap_remove` keeps them.
pub(super) struct ChanTable {
    chans: Vec<Chan>,
    /// Unit lists of the channels with more than [`INLINE`] units.
    spill: Vec<Vec<(u32, u32)>>,
    /// Spill lists not in use.
    free: Vec<u32>,
}

impl ChanTable {
    /// Channels of capacities `cap` (bytes per ns), no units on them.
    pub fn new(cap: &[f64]) -> ChanTable {
        let mut v = super::huge::filled(cap.len(), Chan::default());
        for (x, &c) in v.iter_mut().zip(cap) {
            x.cap = c;
        }
        ChanTable {
            chans: v,
            spill: Vec::new(),
            free: Vec::new(),
        }
    }

    /// Append `e` to channel `c`'s units.
    #[inline]
    fn push(&mut self, c: usize, e: (u32, u32)) {
        let x = &mut self.chans[c];
        let n = x.len as usize;
        if n < INLINE {
            x.inline[n] = e;
        } else if n == INLINE {
            let s = match self.free.pop() {
                Some(s) => s,
                None => {
                    self.spill.push(Vec::new());
                    (self.spill.len() - 1) as u32
                }
            };
            let list = &mut self.spill[s as usize];
            list.clear();
            list.extend_from_slice(&x.inline);
            list.push(e);
            x.spill = s;
        } else {
            self.spill[x.spill as usize].push(e);
        }
        x.len += 1;
    }

    /// Remove channel `c`'s unit at `p`, the last one taking its place (`Vec::swap_remove`);
    /// the unit now at `p`, if any.
    #[inline]
    fn swap_remove(&mut self, c: usize, p: usize) -> Option<(u32, u32)> {
        let x = &mut self.chans[c];
        let n = x.len as usize;
        x.len -= 1;
        if n <= INLINE {
            x.inline[p] = x.inline[n - 1];
            return (p < n - 1).then(|| x.inline[p]);
        }
        let list = &mut self.spill[x.spill as usize];
        list.swap_remove(p);
        let moved = list.get(p).copied();
        if n - 1 == INLINE {
            x.inline.copy_from_slice(&list[..INLINE]);
            self.free.push(x.spill);
        }
        moved
    }
}

impl std::ops::Index<usize> for ChanTable {
    type Output = [(u32, u32)];
    #[inline]
    fn index(&self, c: usize) -> &[(u32, u32)] {
        let x = &self.chans[c];
        if x.len as usize <= INLINE {
            &x.inline[..x.len as usize]
        } else {
            &self.spill[x.spill as usize]
        }
    }
}

impl Net {
    /// The network of channels of capacities `ch_cap` (bytes per ns) with `arena`, the
    /// prepared paths, and no unit yet.
    pub fn new(arena: Vec<u32>, ch_cap: Vec<f64>) -> Net {
        let nch = ch_cap.len();
        Net {
            now: 0,
            pos: vec![0; arena.len()],
            arena,
            ch_units: ChanTable::new(&ch_cap),
            ch_cap,
            units: Vec::new(),
            free_units: Vec::new(),
            slot_of: Vec::new(),
            ch_bytes: super::huge::filled(nch, 0.0),
            scratch: Default::default(),
            dirty: Vec::new(),
            fresh: Vec::new(),
            stamp: 0,
            unit_mark: Vec::new(),
            unit_frozen: Vec::new(),
            new_rate: Vec::new(),
            resolves: 0,
            due: Vec::new(),
        }
    }

    /// Whether the rates are solved for every change so far (no re-solve pending).
    pub fn solved(&self) -> bool {
        self.dirty.is_empty() && self.fresh.is_empty()
    }

    /// The units and tight channels the last re-solve visited.
    pub fn component(&self) -> (&[u32], &[u32]) {
        (&self.scratch.units, &self.scratch.channels)
    }

    /// True when the caps of the units on `c` sum above its capacity.
    #[inline]
    pub(super) fn tight(&self, c: usize) -> bool {
        let x = &self.ch_units.chans[c];
        x.demand > x.cap * (1.0 + 1e-9)
    }

    /// Channel `c`'s state.
    #[inline]
    fn ch(&mut self, c: usize) -> &mut Chan {
        &mut self.ch_units.chans[c]
    }

    /// Put a new unit on the channels `arena[off..off+len]`, with its own rate limit `cap`;
    /// it gets a rate at the next [`Net::resolve`]. Returns the unit's slot.
    pub(super) fn add_unit(
        &mut self,
        off: u32,
        len: u32,
        wire: f64,
        cap: f64,
        latency: u64,
        owner: Owner,
    ) -> u32 {
        let serial = self.slot_of.len() as u32;
        let unit = Unit {
            off,
            len,
            remaining: wire,
            wire,
            rate: 0.0,
            cap,
            last: self.now,
            ver: 0,
            due: u64::MAX,
            latency,
            owner,
            serial,
        };
        let u = match self.free_units.pop() {
            Some(u) => {
                let i = u as usize;
                self.units[i] = unit;
                (self.unit_mark[i], self.unit_frozen[i], self.new_rate[i]) = (0, 0, 0.0);
                u
            }
            None => {
                self.units.push(unit);
                self.unit_mark.push(0);
                self.unit_frozen.push(0);
                self.new_rate.push(0.0);
                (self.units.len() - 1) as u32
            }
        };
        self.slot_of.push(u);
        for k in 0..len {
            let a = (off + k) as usize;
            let c = self.arena[a] as usize;
            let before = self.tight(c);
            self.pos[a] = self.ch_units[c].len() as u32;
            self.ch_units.push(c, (u, k));
            self.ch(c).demand += cap;
            if before || self.tight(c) {
                self.dirty.push(c as u32);
            }
        }
        self.fresh.push(u);
        u
    }

    /// Change unit `u`'s own rate limit to `cap` (the DCQCN model's caps); it gets its
    /// new rate at the next [`Net::resolve`].
    pub(super) fn set_cap(&mut self, u: u32, cap: f64) {
        let (off, len, old) = {
            let x = &self.units[u as usize];
            (x.off, x.len, x.cap)
        };
        if (cap - old).abs() <= 1e-12 * cap.max(old) {
            return;
        }
        self.units[u as usize].cap = cap;
        for k in 0..len {
            let c = self.arena[(off + k) as usize] as usize;
            let before = self.tight(c);
            self.ch(c).demand += cap - old;
            if before || self.tight(c) {
                self.dirty.push(c as u32);
            }
        }
        self.fresh.push(u);
    }

    /// Take a finished unit off its channels; `account` adds its wire bytes to each
    /// (aggregations account per edge instead, see the event loop).
    pub(super) fn remove_unit(&mut self, u: u32, account: bool) {
        let (off, len, cap, wire) = {
            let x = &self.units[u as usize];
            (x.off, x.len, x.cap, x.wire)
        };
        for k in 0..len {
            let a = (off + k) as usize;
            let c = self.arena[a] as usize;
            if self.tight(c) {
                self.dirty.push(c as u32);
            }
            let p = self.pos[a] as usize;
            if let Some((u2, k2)) = self.ch_units.swap_remove(c, p) {
                self.pos[(self.units[u2 as usize].off + k2) as usize] = p as u32;
            }
            let x = self.ch(c);
            x.demand = if x.len == 0 { 0.0 } else { x.demand - cap };
            if account {
                self.ch_bytes[c] += wire;
            }
        }
        // a unit re-capped earlier in this batch (the DCQCN model) needs no rate any more
        if !self.fresh.is_empty() {
            self.fresh.retain(|&x| x != u);
        }
    }

    /// Re-solve max-min rates for the units connected (through tight channels) to what
    /// changed in this batch; units outside that component keep their rates. `first`:
    /// which units are filled first ([`FillFirst`]). False when nothing changed (then
    /// [`Net::component`] is not this batch's).
    pub fn resolve(&mut self, first: FillFirst) -> bool {
        if self.dirty.is_empty() && self.fresh.is_empty() {
            return false;
        }
        self.resolves += 1;
        self.stamp = self.stamp.wrapping_add(1);
        let (comp_units, comp_ch) = self.find_component();
        let comp_units = self.progressive_fill(comp_units, &comp_ch, first);
        self.apply_rates(&comp_units);
        // the lists go back for the next re-solve (one per batch: millions at scale)
        self.scratch.units = comp_units;
        self.scratch.channels = comp_ch;
        true
    }

    /// The units and tight channels reachable from this batch's dirty channels and new
    /// units through tight channels (channels marked with the current stamp).
    fn find_component(&mut self) -> (Vec<u32>, Vec<u32>) {
        let st = self.stamp;
        let mut comp_units = std::mem::take(&mut self.scratch.units);
        let mut comp_ch = std::mem::take(&mut self.scratch.channels);
        let mut stack = std::mem::take(&mut self.scratch.stack);
        comp_units.clear();
        comp_ch.clear();
        let dirty = std::mem::take(&mut self.dirty);
        for &c in &dirty {
            if self.ch(c as usize).mark != st {
                self.ch(c as usize).mark = st;
                stack.push(c);
            }
        }
        let fresh = std::mem::take(&mut self.fresh);
        for &u in &fresh {
            self.visit(u, &mut stack, &mut comp_units);
        }
        while let Some(c) = stack.pop() {
            let cu = c as usize;
            if self.tight(cu) {
                comp_ch.push(c);
                self.ch(cu).comp = st;
            }
            for i in 0..self.ch_units[cu].len() {
                let u = self.ch_units[cu][i].0;
                self.visit(u, &mut stack, &mut comp_units);
            }
        }
        self.dirty = dirty;
        self.dirty.clear();
        self.fresh = fresh;
        self.fresh.clear();
        self.scratch.stack = stack;
        (comp_units, comp_ch)
    }

    /// Add unit `u` to the component (once) and stack its unvisited tight channels.
    fn visit(&mut self, u: u32, stack: &mut Vec<u32>, comp_units: &mut Vec<u32>) {
        let st = self.stamp;
        if self.unit_mark[u as usize] == st {
            return;
        }
        self.unit_mark[u as usize] = st;
        comp_units.push(u);
        let (off, len) = (self.units[u as usize].off, self.units[u as usize].len);
        for k in off..off + len {
            let c = self.arena[k as usize] as usize;
            if self.ch(c).mark != st && self.tight(c) {
                self.ch(c).mark = st;
                stack.push(c as u32);
            }
        }
    }

    /// Progressive filling: repeatedly freeze either the units of the channel with the
    /// smallest fair share or the unit with the smallest own cap, whichever binds first.
    /// Leaves each unit's rate in `new_rate`; returns the units sorted by cap.
    ///
    /// With `first` (the DCQCN model), aggregation streams and fallback rings are filled
    /// first and host transfers share what they leave ([`FillFirst`]).
    fn progressive_fill(
        &mut self,
        mut comp_units: Vec<u32>,
        comp_ch: &[u32],
        first: FillFirst,
    ) -> Vec<u32> {
        for &c in comp_ch {
            let x = self.ch(c as usize);
            x.rem = x.cap;
        }
        comp_units.sort_unstable_by(|&a, &b| {
            self.units[a as usize]
                .cap
                .total_cmp(&self.units[b as usize].cap)
                .then(
                    self.units[a as usize]
                        .serial
                        .cmp(&self.units[b as usize].serial),
                )
        });
        match first {
            Some(sent_all)
                if comp_units.iter().any(|&u| self.is_ina(u))
                    && comp_units.iter().any(|&u| !self.is_ina(u)) =>
            {
                let (aggs, hosts): (Vec<u32>, Vec<u32>) = comp_units
                    .iter()
                    .partition(|&&u| self.filled_first(u, sent_all));
                self.fill(&aggs, comp_ch, Some((true, sent_all)));
                self.fill(&hosts, comp_ch, Some((false, sent_all)));
            }
            _ => self.fill(&comp_units, comp_ch, None),
        }
        comp_units
    }

    /// Whether unit `u` carries the INA application's packets: an aggregation stream or
    /// a fallback ring's flow.
    fn is_ina(&self, u: u32) -> bool {
        matches!(self.units[u as usize].owner, Owner::Agg(_) | Owner::Ring(_))
    }

    /// Whether unit `u` is filled before host transfers ([`FillFirst`]): an aggregation
    /// stream or fallback ring, or a host transfer `sent_all` names (under DCQCN, one
    /// whose bytes all wait in the queues ahead of them).
    fn filled_first(&self, u: u32, sent_all: SentAll) -> bool {
        self.is_ina(u) || sent_all(self, u)
    }

    /// Progressive filling of `units` (sorted by cap) on the remaining capacity of
    /// `comp_ch`. `class`: `None`, every unit on the channels (none frozen yet); else
    /// the units not yet frozen, only those filled first with `Some((true, _))`.
    fn fill(&mut self, units: &[u32], comp_ch: &[u32], class: Option<(bool, SentAll)>) {
        let st = self.stamp;
        let aggs_only = matches!(class, Some((true, _)));
        let sent_all: SentAll = match class {
            Some((_, f)) => f,
            None => &never,
        };
        let mut heap = std::mem::take(&mut self.scratch.heap);
        heap.clear();
        for &c in comp_ch {
            let cu = c as usize;
            let counted = match class {
                None => self.ch_units[cu].len(),
                Some(_) => self.ch_units[cu]
                    .iter()
                    .filter(|&&(u, _)| {
                        self.unit_frozen[u as usize] != st
                            && (!aggs_only || self.filled_first(u, sent_all))
                    })
                    .count(),
            };
            let x = self.ch(cu);
            x.cnt = counted as u32;
            x.ver = x.ver.wrapping_add(1);
            if counted > 0 {
                let share = x.rem / counted as f64;
                heap.push(Reverse((share.to_bits(), c, x.ver)));
            }
        }
        let mut ui = 0;
        loop {
            while ui < units.len() && self.unit_frozen[units[ui] as usize] == st {
                ui += 1;
            }
            while let Some(&Reverse((_, c, v))) = heap.peek() {
                let x = &self.ch_units.chans[c as usize];
                if x.ver != v || x.cnt == 0 {
                    heap.pop();
                } else {
                    break;
                }
            }
            let top = heap
                .peek()
                .map(|&Reverse((s, c, _))| (f64::from_bits(s), c));
            let next_cap = units.get(ui).map(|&u| self.units[u as usize].cap);
            match (top, next_cap) {
                (None, None) => break,
                (Some((share, c)), cap) if cap.is_none_or(|cap| share < cap) => {
                    heap.pop();
                    let cu = c as usize;
                    // saturated: nothing left for a later fill
                    let x = self.ch(cu);
                    x.cnt = 0;
                    x.rem = 0.0;
                    let share = share.max(1e-12);
                    for i in 0..self.ch_units[cu].len() {
                        let u = self.ch_units[cu][i].0;
                        if self.unit_frozen[u as usize] != st
                            && (!aggs_only || self.filled_first(u, sent_all))
                        {
                            self.freeze(u, share, &mut heap);
                        }
                    }
                }
                (_, Some(cap)) => {
                    let u = units[ui];
                    self.freeze(u, cap, &mut heap);
                }
                (Some(_), None) => unreachable!("guarded above"),
            }
        }
        self.scratch.heap = heap;
    }

    /// Fix unit `u` at `rate`: take it off the remaining capacity and count of every
    /// component channel it crosses, re-queueing their shares.
    fn freeze(&mut self, u: u32, rate: f64, heap: &mut ShareHeap) {
        let st = self.stamp;
        self.unit_frozen[u as usize] = st;
        self.new_rate[u as usize] = rate;
        let (off, len) = (self.units[u as usize].off, self.units[u as usize].len);
        for k in off..off + len {
            let c = self.arena[k as usize] as usize;
            let x = self.ch(c);
            if x.comp != st || x.cnt == 0 {
                continue;
            }
            x.rem = (x.rem - rate).max(0.0);
            x.cnt -= 1;
            x.ver = x.ver.wrapping_add(1);
            if x.cnt > 0 {
                let share = x.rem / x.cnt as f64;
                heap.push(Reverse((share.to_bits(), c as u32, x.ver)));
            }
        }
    }

    /// Give every unit whose rate changed its new rate: bytes sent so far are settled at
    /// the old rate; a finish earlier than the pending completion event supersedes it
    /// (version bump), a later one is found when that event fires.
    fn apply_rates(&mut self, comp_units: &[u32]) {
        for &u in comp_units {
            let r = self.new_rate[u as usize];
            let now = self.now;
            let x = &mut self.units[u as usize];
            if x.rate > 0.0 && (r - x.rate).abs() <= 1e-12 * r.max(x.rate) {
                continue;
            }
            if x.rate > 0.0 {
                x.remaining = (x.remaining - x.rate * (now - x.last) as f64).max(0.0);
            }
            x.last = now;
            x.rate = r;
            // a unit starved behind higher-priority streams (rate ≈ 0) gets a far event,
            // superseded when its rate changes; a finish later than the pending event
            // keeps that event, which moves itself on when it fires (the engine's `tx_done`)
            let t = x.finish();
            if t < x.due {
                x.due = t;
                x.ver = x.ver.wrapping_add(1);
                let (serial, ver) = (x.serial, x.ver);
                self.due.push((t, serial, ver));
            }
        }
    }
}
