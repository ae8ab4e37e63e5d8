//! The DCQCN model's state: per port its fluid queue and RED profile, per queue pair its
//! reaction point and notification state, per unit what it offers and has sent, the work
//! of the current instant and the model's own event timers (module docs of `dcqcn`).

use super::rp::{Red, Rp};
use crate::netmodel::{bytes_per_ns, DcqcnParams};
use crate::replay::prepare::KeyHasher;
use crate::replay::rates::{QpKey, StreamWindow};
use crate::replay::timers::Timers;
use crate::topology::{NodeKind, Topology};
use crate::units::BitsPerSec;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

/// A map keyed by connection, hashed with the path interner's multiplicative hash: a
/// record's start looks its connection's queue pair up (tens of millions of times on a
/// large job), and SipHash cost more than the rest of the lookup. Neither map is
/// iterated, so the hash does not reach the results.
pub type ConnMap<V> = HashMap<QpKey, V, BuildHasherDefault<KeyHasher>>;

/// Rounds of re-evaluating ports within one instant after a port before them on a path
/// changed what it passes on (a path crosses at most a few congested ports: host, leaf,
/// spine tiers up and down).
pub(super) const UPSTREAM_ROUNDS: usize = 4;

/// Packets leave a marked queue 1.5× rarer than RED's probability says: ns-3 RED's
/// uniformised marking puts the next mark uniformly between `1/p` and `2/p` packets.
pub(super) const MARK_SPACING: f64 = 1.5;

/// Rounds of "bring the model's state up to date, then re-solve the rates" within one
/// instant before the rest is left to the next nanosecond (each round settles what the
/// previous one's re-solve changed: a port found congested, an aggregation's new rate).
pub(super) const SETTLE_ROUNDS: usize = 8;

/// A queue pair: its reaction point, its active transfers and its notification state.
pub(super) struct Qp {
    pub(super) rp: Rp,
    /// Active transfers (unit slots).
    pub(super) units: Vec<u32>,
    /// Expected marks since the current CNP window opened (already divided by
    /// [`MARK_SPACING`]): a CNP leaves when they reach 1.
    pub(super) marks: f64,
    /// When the last CNP was sent (at the receiver).
    pub(super) last_cnp: Option<u64>,
    /// Arrival times of CNPs on their way back.
    pub(super) pending: Vec<u64>,
    /// In the current flush's re-cap / re-prediction lists.
    pub(super) recap: bool,
    pub(super) predict: bool,
    /// No CNP before this time (a CNP found due when its marks fell short by rounding
    /// is looked for from the next nanosecond).
    pub(super) not_before: u64,
}

/// What the model's own events do, in processing order within one nanosecond.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Ev {
    /// A port's backlog runs dry, or reaches KMIN (index: channel).
    Port,
    /// A transfer has put its last byte on the network (index: unit slot).
    Sent,
    /// A queue pair's marks reach one: it sends a CNP (index: queue pair).
    Cnp,
    /// A queue pair's CNP arrives or its timer fires (index: queue pair).
    Timer,
    /// An aggregation stream behind a backlog re-reads its window rate (index: unit
    /// slot; [`Net::cc_window`]).
    Window,
}

impl Ev {
    /// The kinds, in processing order.
    pub(super) const ALL: [Ev; 5] = [Ev::Port, Ev::Sent, Ev::Cnp, Ev::Timer, Ev::Window];
    pub(super) const KINDS: usize = Ev::ALL.len();

    /// Its key kind in [`Timers`] (its processing order).
    pub(super) fn id(self) -> usize {
        self as usize
    }
}

/// The model's state (module docs).
pub(super) struct State {
    pub(super) params: DcqcnParams,
    /// Per channel: it is a switch's egress port (only those queue and mark).
    pub(super) queued: Vec<bool>,
    /// Per channel: its capacity (B/ns) and its RED profile.
    pub(super) cap: Vec<f64>,
    pub(super) red: Vec<Red>,
    /// Per channel: backlog (bytes) as of `q_time`.
    pub(super) queue: Vec<f64>,
    pub(super) q_time: Vec<u64>,
    /// Per watched channel: the rate bytes arrive at it (B/ns) since `q_time`, and the
    /// share of its arrivals it passes on (`capacity / arrivals` while it is congested or
    /// drains a backlog, else 1): what the ports after it on a path see of a transfer's
    /// offered rate.
    pub(super) arr: Vec<f64>,
    pub(super) pass: Vec<f64>,
    /// Watched ports that pass on other than 1: when none does, arrivals are the offered
    /// rates everywhere.
    pub(super) passing: usize,
    /// Per channel: watched (congested or backlogged), and congested at its last update
    /// (`queue > 0` or arrivals above capacity: the transfers crossing it are fed by a
    /// backlog).
    pub(super) watched: Vec<bool>,
    pub(super) backlog: Vec<bool>,
    /// Watched ports, for the statistics.
    pub(super) hot: usize,
    /// Per arena slot (a unit's `k`-th channel): the rate the unit's bytes arrive there
    /// (B/ns), as of the channel's last update.
    pub(super) slot_arr: Vec<f64>,
    /// Queue pairs by connection (source, destination, NCCL channel): each channel is
    /// its own queue pair, as in the glue.
    pub(super) index: ConnMap<u32>,
    pub(super) qps: Vec<Qp>,
    /// Record transfers whose connection has no queue pair yet (it gets one when first
    /// marked, and they join it).
    pub(super) orphans: ConnMap<Vec<u32>>,
    /// Per unit slot: its queue pair (`u32::MAX`: none), and its path's line rate.
    pub(super) unit_qp: Vec<u32>,
    pub(super) unit_line: Vec<f64>,
    /// Per unit slot: the connection of a record transfer (rate controlled).
    pub(super) unit_pair: Vec<Option<QpKey>>,
    /// Per unit slot: watched ports on its path; the rate it offers (as the ports see
    /// it); the wire bytes it has put on the network while crossing a watched port (it
    /// never offers more than it has) as of `unit_t` (its [`Ev::Sent`] time is in
    /// `events`).
    pub(super) unit_watch: Vec<u32>,
    pub(super) unit_off: Vec<f64>,
    pub(super) unit_sent: Vec<f64>,
    pub(super) unit_t: Vec<u64>,
    pub(super) unit_dirty: Vec<bool>,
    /// Record transfers that have put their last byte on the network since the last
    /// flush: the solver fills them with the streams from now on ([`Net::cc_sent_all`]).
    pub(super) sent_all: Vec<u32>,
    /// Aggregation streams on a port whose backlog line changed: their window rate is
    /// re-read ([`Net::cc_window`]).
    pub(super) window_dirty: Vec<u32>,
    /// Per channel: watched record transfers whose first hop it is (their NIC share
    /// changes with the transfers on it).
    pub(super) first_watched: Vec<u32>,
    /// Work of the current instant: transfers whose offered rate may have changed,
    /// first hops whose transfers' NIC share changed, ports to re-evaluate, queue pairs
    /// to re-cap and whose next CNP to predict.
    pub(super) dirty_units: Vec<u32>,
    pub(super) nic_dirty: Vec<u32>,
    pub(super) dirty_ports: Vec<u32>,
    /// The allocation of the last round's `dirty_ports`, for the next.
    pub(super) spare_ports: Vec<u32>,
    pub(super) port_dirty: Vec<bool>,
    pub(super) recap_qps: Vec<u32>,
    pub(super) predict_qps: Vec<u32>,
    /// The model's own events: at most one time per (kind, index), popped by (time,
    /// kind, index) (`src/replay/timers.rs`).
    pub(super) events: Timers,
    /// Scratch list of a queue pair's marking terms ([`Net::cc_terms`]), kept between
    /// uses: a CNP is predicted tens of millions of times on a large job.
    pub(super) terms: Vec<(u32, f64, f64)>,
    /// The engine's next `CcTick`, if any.
    pub(super) next_tick: Option<u64>,
    /// Wire bytes of a full packet (marks are counted per packet).
    pub(super) packet: f64,
    /// Events processed (for the replay's statistics).
    pub(super) ticks: u64,
    /// Per unit slot: an aggregation stream's window, as it started ([`Net::cc_window`]).
    pub(super) stream: Vec<StreamWindow>,
    /// The replay has aggregations (a transfer's last byte then changes how it is filled).
    pub(super) has_aggs: bool,
}

/// No queue pair.
pub(super) const NO_QP: u32 = u32::MAX;

/// `t` rounded up to a whole nanosecond no earlier than `now` (saturating far away).
pub(super) fn at_or_after(now: u64, t: f64) -> u64 {
    if t.is_nan() || t <= now as f64 {
        now
    } else if t >= 1.8e19 {
        u64::MAX
    } else {
        ceil_ns(t).max(now)
    }
}

/// `t.ceil() as u64` for `0 ≤ t < 2⁶⁴`, without the call to libm's `ceil` (the release
/// build targets baseline x86-64, which has no rounding instruction; it was 1.5 % of a
/// large replay): the truncation is exact, and it is below `t` only when `t` has a
/// fraction.
#[inline]
pub(super) fn ceil_ns(t: f64) -> u64 {
    let whole = t as u64;
    whole + u64::from((whole as f64) < t)
}

/// Hand a work list's allocation back to its slot once processed (`std::mem::take`
/// left an empty one there; if the processing refilled it, that list stays).
pub(super) fn recycle(slot: &mut Vec<u32>, mut list: Vec<u32>) {
    if slot.is_empty() {
        list.clear();
        *slot = list;
    }
}

impl State {
    /// The model for `topo`'s channels (two per link, `2·link + direction`).
    pub fn new(topo: &Topology, params: DcqcnParams) -> State {
        let nch = topo.links.len() * 2;
        let mut queued = vec![false; nch];
        let mut ch_rate = vec![BitsPerSec(0); nch];
        for (l, link) in topo.links.iter().enumerate() {
            for (d, from) in [(0, link.a), (1, link.b)] {
                queued[2 * l + d] = topo.kinds[from.0 as usize] == NodeKind::Switch;
                ch_rate[2 * l + d] = link.rate;
            }
        }
        let red = ch_rate.iter().map(|&r| Red::for_rate(r)).collect();
        let cap = ch_rate.iter().map(|&r| bytes_per_ns(r)).collect();
        State {
            params,
            queued,
            cap,
            red,
            queue: vec![0.0; nch],
            q_time: vec![0; nch],
            arr: vec![0.0; nch],
            pass: vec![1.0; nch],
            passing: 0,
            watched: vec![false; nch],
            backlog: vec![false; nch],
            hot: 0,
            slot_arr: Vec::new(),
            index: ConnMap::default(),
            qps: Vec::new(),
            orphans: ConnMap::default(),
            unit_qp: Vec::new(),
            unit_line: Vec::new(),
            unit_pair: Vec::new(),
            unit_watch: Vec::new(),
            unit_off: Vec::new(),
            unit_sent: Vec::new(),
            unit_t: Vec::new(),
            unit_dirty: Vec::new(),
            sent_all: Vec::new(),
            window_dirty: Vec::new(),
            first_watched: vec![0; nch],
            dirty_units: Vec::new(),
            nic_dirty: Vec::new(),
            dirty_ports: Vec::new(),
            spare_ports: Vec::new(),
            port_dirty: vec![false; nch],
            recap_qps: Vec::new(),
            predict_qps: Vec::new(),
            events: Timers::new(Ev::KINDS),
            terms: Vec::new(),
            next_tick: None,
            packet: 1048.0,
            ticks: 0,
            stream: Vec::new(),
            has_aggs: false,
        }
    }

    /// The queue pair of `pair`, made at line rate `line` if new.
    pub fn qp(&mut self, pair: QpKey, line: f64) -> u32 {
        if let Some(&q) = self.index.get(&pair) {
            return q;
        }
        let q = self.qps.len() as u32;
        self.qps.push(Qp {
            rp: Rp::new(line),
            units: Vec::new(),
            marks: 0.0,
            last_cnp: None,
            pending: Vec::new(),
            recap: false,
            predict: false,
            not_before: 0,
        });
        self.index.insert(pair, q);
        q
    }

    /// Send queue pair `q`'s CNP: its marked packet reaches the receiver at `rx`, the CNP
    /// reaches the sender `back` ns later (at most one per `cnp_interval` at the
    /// receiver: a window still closed at `rx` moves the CNP to its opening).
    pub(super) fn send_cnp(&mut self, q: u32, rx: u64, back: u64) {
        let iv = self.params.cnp_interval_ns;
        let x = &mut self.qps[q as usize];
        let rx = x.last_cnp.map_or(rx, |t| rx.max(t.saturating_add(iv)));
        x.marks = 0.0;
        x.last_cnp = Some(rx);
        x.pending.push(rx.saturating_add(back));
    }

    /// Deliver queue pair `q`'s CNPs due by `now` and run its timers; true when its rate
    /// changed.
    pub fn advance_qp(&mut self, q: u32, now: u64) -> bool {
        let p = self.params;
        let x = &mut self.qps[q as usize];
        let mut changed = false;
        if !x.pending.is_empty() {
            x.pending.sort_unstable();
            let due = x.pending.partition_point(|&t| t <= now);
            for k in 0..due {
                let t = x.pending[k];
                // timers due before this CNP run first
                changed |= x.rp.advance(t.saturating_sub(1), &p);
                x.rp.on_cnp(t, &p);
            }
            x.pending.drain(..due);
        }
        changed |= x.rp.advance(now, &p);
        changed
    }

    /// The earliest thing that changes queue pair `q`'s rate: a timer, or the decrease
    /// check a CNP on its way back leads to (its arrival alone changes nothing: it is
    /// delivered, in order, when the pair is next advanced).
    pub fn qp_next(&self, q: u32) -> Option<u64> {
        let x = &self.qps[q as usize];
        let c = x
            .pending
            .iter()
            .copied()
            .min()
            .map(|t| x.rp.decrease_after(t, &self.params));
        match (c, x.rp.next_event()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Schedule event `kind` of index `i` at `t`, replacing its pending time
    /// (`u64::MAX`: cancel it).
    pub(super) fn schedule(&mut self, kind: Ev, i: u32, t: u64) {
        self.events.set(kind.id(), i, t);
    }

    /// The time of the earliest event.
    pub(super) fn earliest(&self) -> Option<u64> {
        self.events.peek().map(|(t, ..)| t)
    }

    /// Schedule queue pair `q`'s next timer or CNP arrival (none without transfers: a
    /// pair catches up when one starts).
    pub(super) fn schedule_timer(&mut self, q: u32) {
        let t = if self.qps[q as usize].units.is_empty() {
            None
        } else {
            self.qp_next(q)
        };
        self.schedule(Ev::Timer, q, t.unwrap_or(u64::MAX));
    }

    pub(super) fn mark_port(&mut self, c: u32) {
        if !self.port_dirty[c as usize] {
            self.port_dirty[c as usize] = true;
            self.dirty_ports.push(c);
        }
    }

    pub(super) fn mark_unit(&mut self, u: u32) {
        if !self.unit_dirty[u as usize] {
            self.unit_dirty[u as usize] = true;
            self.dirty_units.push(u);
        }
    }

    /// Queue pair `q`'s rate or membership changed: each of its transfers offers anew.
    pub(super) fn mark_pair_units(&mut self, q: u32) {
        for i in 0..self.qps[q as usize].units.len() {
            let v = self.qps[q as usize].units[i];
            self.mark_unit(v);
        }
    }

    /// Queue pair `q` gained or lost a transfer: its transfers offer anew, are re-capped,
    /// and its next CNP is predicted again.
    pub(super) fn mark_pair_changed(&mut self, q: u32) {
        self.mark_pair_units(q);
        self.mark_recap(q);
        self.mark_predict(q);
    }

    pub(super) fn mark_recap(&mut self, q: u32) {
        let x = &mut self.qps[q as usize];
        if !x.recap {
            x.recap = true;
            self.recap_qps.push(q);
        }
    }

    pub(super) fn mark_predict(&mut self, q: u32) {
        let x = &mut self.qps[q as usize];
        if !x.predict {
            x.predict = true;
            self.predict_qps.push(q);
        }
    }

    /// Unit slot `u` holds a new transfer: its per-unit state starts afresh.
    pub(super) fn reset_unit(&mut self, u: u32, now: u64) {
        let ui = u as usize;
        if self.unit_qp.len() <= ui {
            let n = ui + 1;
            self.unit_qp.resize(n, NO_QP);
            self.unit_line.resize(n, 0.0);
            self.unit_pair.resize(n, None);
            self.unit_watch.resize(n, 0);
            self.unit_off.resize(n, 0.0);
            self.unit_sent.resize(n, 0.0);
            self.unit_t.resize(n, 0);
            self.unit_dirty.resize(n, false);
            self.stream.resize(n, StreamWindow::default());
        }
        self.unit_qp[ui] = NO_QP;
        self.unit_pair[ui] = None;
        self.unit_watch[ui] = 0;
        self.unit_off[ui] = 0.0;
        self.unit_sent[ui] = 0.0;
        self.unit_t[ui] = now;
        self.stream[ui] = StreamWindow::default();
        self.schedule(Ev::Sent, u, u64::MAX);
        self.schedule(Ev::Window, u, u64::MAX);
    }

    /// Whether work is left for this instant.
    pub(super) fn dirty(&self) -> bool {
        !(self.dirty_units.is_empty()
            && self.nic_dirty.is_empty()
            && self.dirty_ports.is_empty()
            && self.recap_qps.is_empty()
            && self.predict_qps.is_empty()
            && self.sent_all.is_empty()
            && self.window_dirty.is_empty())
    }

    /// Port `c`'s backlog at `t` (≥ its last update), on its current line.
    pub(super) fn backlog_at(&self, c: usize, t: u64) -> f64 {
        if !self.watched[c] {
            return self.queue[c];
        }
        let dt = t.saturating_sub(self.q_time[c]) as f64;
        (self.queue[c] + (self.arr[c] - self.cap[c]) * dt).max(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::BitsPerSec;

    fn gbps(g: u64) -> f64 {
        crate::netmodel::bytes_per_ns(BitsPerSec(g * 1_000_000_000))
    }
    use crate::topology::Topology;

    #[test]
    fn rounding_up_to_the_nanosecond_is_ceil() {
        for t in [
            0.0,
            0.25,
            1.0,
            1.5,
            4_000.000_000_1,
            123_456_789.999,
            9_007_199_254_740_991.0,
            9_007_199_254_740_993.0,
            1.2e19,
            1.799_999e19,
        ] {
            assert_eq!(ceil_ns(t), t.ceil() as u64, "{t}");
            let below = f64::from_bits(t.to_bits().saturating_sub(1)).max(0.0);
            assert_eq!(ceil_ns(below), below.ceil() as u64, "{below}");
        }
    }

    #[test]
    fn a_pair_sends_at_most_one_cnp_per_interval_at_the_receiver() {
        let topo = Topology::from_spec(
            "leaf-spine:leaves=1,spines=1,hosts-per-leaf=2,gpus-per-server=1,nvlink=off",
        )
        .expect("topology");
        let mut s = State::new(&topo, DcqcnParams::default());
        let q = s.qp((0, 1, 0), gbps(100));
        s.qps[q as usize].units.push(0);
        // the first CNP's marked packet reaches the receiver at 10; the CNP takes 100 ns back
        s.send_cnp(q, 10, 100);
        assert_eq!(s.qps[q as usize].pending, vec![110]);
        // marks found due 10 µs later move to the window's opening, 50 µs after the first
        s.send_cnp(q, 10_010, 100);
        assert_eq!(s.qps[q as usize].last_cnp, Some(50_010));
        assert_eq!(s.qps[q as usize].pending, vec![110, 50_110]);
        // the pair's next change is the decrease check after the first CNP arrives: the
        // check grid starts 1 ns after it, every 4 µs
        assert_eq!(s.qp_next(q), Some(110 + 1 + 4_000));
    }
}
