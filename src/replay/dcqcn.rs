//! The replayer's DCQCN rate model (`RateModel::Dcqcn`, `docs/model.md` "DCQCN rate
//! dynamics"): what RoCE's congestion control does to flows that share a switch port,
//! as fluid state evaluated only where ports are congested.
//!
//! - **Reaction point** ([`Rp`]), one per queue pair (source, destination, NCCL channel:
//!   each channel its own connection, as in the glue), kept across
//!   the pair's records as the glue keeps its queue pairs: starts at line rate; a CNP sets
//!   alpha to 1 (the first) or raises it by g at the next alpha update; a rate-decrease
//!   check every `RATE_DECREASE_INTERVAL` after a CNP cuts `rate ×= 1 − alpha/2` (target
//!   = rate unless `CLAMP_TARGET_RATE` is 0 and no increase happened since the last cut);
//!   an increase timer every `RP_TIMER` after a cut: fast recovery (`rate = (rate +
//!   target)/2`) `FAST_RECOVERY_TIMES` times, then additive, then hyper increase of the
//!   target. No byte counter (HPCC's and SimAI's ns-3 have none).
//! - **Congestion point**, one fluid queue per switch egress channel: it grows at the
//!   rate bytes arrive beyond the port's capacity and drains below it. A queue
//!   pair offers `min(its DCQCN rate / its active transfers, its first hop's capacity /
//!   the transfers sharing it)` (the sending NIC paces and serves its queue pairs in
//!   turn); its bytes reach a port at that rate scaled by what each congested port
//!   before it passes on (`capacity / arrivals`, FIFO: `Sim::cc_advance`). Packets
//!   entering a queue of `Q` bytes are marked with RED's probability
//!   ([`crate::netmodel::mark_probability`]); with ns-3 RED's uniformised marking (the
//!   glue's ports, `Wait` on) the gap between marks is uniform in `[1/p, 2/p]` packets,
//!   so a flow's expected marks grow at `p / 1.5` per packet that reaches the port.
//! - **Notification point**: once a pair's expected marks since its last CNP window reach
//!   one, a CNP is sent (at most one per `cnp_interval` per pair) and reaches the sender
//!   after the marked packet's queueing delay (`Q / capacity`) and the path's propagation
//!   delay twice (to the receiver, and the CNP back).
//! - **Service.** A port with a backlog is work conserving: transfers crossing it share
//!   its capacity max-min whatever their DCQCN rate (the backlog feeds them); a transfer
//!   whose path has no backlog is capped at its pair's DCQCN rate (shared equally among
//!   the pair's active transfers).
//!
//! **Approximations** (measured in `docs/model.md`): the queue is one fluid per port, not
//! per flow, so a port's backlog serves every transfer crossing it and FIFO order is not
//! kept (a transfer arriving at a backlogged port is not delayed behind it); the queue and
//! the marks advance in ticks of `RATE_DECREASE_INTERVAL` with the offered rates of the
//! tick's start; marking is the expected count, not random. Aggregation streams (their own
//! window protocol) and fallback rings load the queues at their solved rate and are not
//! DCQCN controlled; a stream's window rate counts the largest queueing delay on its tree
//! ([`Sim::cc_window`]: one port's, not a chain's sum), and a host transfer whose bytes
//! all wait in the queues is filled with the streams ([`Sim::cc_sent_all`]); fallback
//! rings keep their line-rate cap (their window is not modelled).
//! A transfer offers at most its path's line rate: a NIC faster than a slower link on its
//! path does not overrun that link's port in the model (it does in the glue).
//!
//! **Cost.** Nothing runs while no switch port is oversubscribed and no queue pair is
//! below line rate: the ticks are scheduled only while a congested port or a throttled
//! queue pair with a transfer exists.

use super::engine::{EventKind, Owner, Sim};
use crate::netmodel::{bytes_per_ns, mark_probability, DcqcnParams};
use crate::topology::{NodeKind, Topology};
use crate::units::BitsPerSec;
use std::collections::HashMap;

/// How the replayer rates transfers on shared links.
///
/// The default is the model of the fabric's transport ([`RateModel::for_transport`]):
/// `dcqcn` for RoCE, the transport the ns-3 glue runs unless told otherwise and what LLM
/// clusters run; `ideal` for TCP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RateModel {
    /// Max-min fair rates, recomputed at every arrival and completion: a transport that
    /// reaches its fair share at once (what TCP approaches on long transfers; the model
    /// for `tcp`).
    Ideal,
    /// Max-min fair rates capped by each queue pair's DCQCN rate, with fluid switch
    /// queues and ECN marking on oversubscribed ports (this module): what the RoCE glue
    /// and SimAI run, and the default.
    #[default]
    Dcqcn,
}

impl RateModel {
    /// The model that follows `transport` (docs/model.md#dcqcn-rate-model): DCQCN's
    /// cuts and slow recovery under RoCE, max-min rates under TCP, whose windows reach
    /// their fair share within a few round trips.
    pub fn for_transport(transport: crate::formats::params_txt::Transport) -> RateModel {
        use crate::formats::params_txt::Transport;
        match transport {
            Transport::Roce => RateModel::Dcqcn,
            Transport::Tcp => RateModel::Ideal,
        }
    }
}

crate::keyword::keyword_enum!(RateModel, "rate model", RateModel::Ideal => "ideal", RateModel::Dcqcn => "dcqcn");

/// Passes over the watched ports per advance, so that each port's arrivals see the
/// congested ports before it on their paths (a path crosses at most a few: host, leaf,
/// spine tiers up and down).
const UPSTREAM_ROUNDS: usize = 3;

/// Packets leave a marked queue 1.5× rarer than RED's probability says: ns-3 RED's
/// uniformised marking puts the next mark uniformly between `1/p` and `2/p` packets.
const MARK_SPACING: f64 = 1.5;

/// DCQCN's reaction point of one queue pair (module docs), times in ns, rates in B/ns.
#[derive(Clone, Debug, PartialEq)]
pub struct Rp {
    line: f64,
    rate: f64,
    target: f64,
    alpha: f64,
    /// Time of the first CNP: origin of the alpha and rate-decrease grids.
    origin: Option<u64>,
    alpha_ticks: u64,
    alpha_cnp: bool,
    decrease_cnp: bool,
    next_decrease: Option<u64>,
    next_increase: Option<u64>,
    stage: u32,
}

impl Rp {
    /// A queue pair at line rate `line`.
    pub fn new(line: f64) -> Rp {
        Rp {
            line,
            rate: line,
            target: line,
            alpha: 1.0,
            origin: None,
            alpha_ticks: 0,
            alpha_cnp: false,
            decrease_cnp: false,
            next_decrease: None,
            next_increase: None,
            stage: 0,
        }
    }

    /// The current rate.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// The current target rate.
    pub fn target(&self) -> f64 {
        self.target
    }

    /// Alpha as of `now` (the updates due by then applied).
    pub fn alpha(&mut self, now: u64, p: &DcqcnParams) -> f64 {
        self.advance_alpha(now, p);
        self.alpha
    }

    fn advance_alpha(&mut self, now: u64, p: &DcqcnParams) {
        let Some(origin) = self.origin else { return };
        if now < origin {
            return;
        }
        let due = (now - origin) / p.alpha_resume_ns.max(1);
        let mut n = due.saturating_sub(self.alpha_ticks);
        if n == 0 {
            return;
        }
        let keep = 1.0 - p.ewma_gain;
        if self.alpha_cnp {
            self.alpha = keep * self.alpha + p.ewma_gain;
            self.alpha_cnp = false;
            n -= 1;
        }
        self.alpha *= keep.powf(n as f64);
        self.alpha_ticks = due;
    }

    /// A CNP reached the sender at `now`.
    pub fn on_cnp(&mut self, now: u64, p: &DcqcnParams) {
        self.advance_alpha(now, p);
        self.alpha_cnp = true;
        self.decrease_cnp = true;
        let origin = match self.origin {
            Some(o) => o,
            None => {
                // the first CNP: alpha starts at 1 (its initial value, not an update),
                // both grids start here, the target is the rate now
                self.origin = Some(now);
                self.alpha_ticks = 0;
                self.alpha = 1.0;
                self.alpha_cnp = false;
                self.target = self.rate;
                now
            }
        };
        if self.next_decrease.is_none() {
            // checks run at origin + 1 ns + k·interval, k ≥ 1: the first after now acts
            let iv = p.rate_decrease_ns.max(1);
            let k = match (now - origin).checked_sub(1) {
                None => 1,
                Some(x) => x / iv + 1,
            };
            self.next_decrease = Some(origin + 1 + k * iv);
        }
    }

    /// The next timer due (a rate-decrease check with a CNP pending, or the increase
    /// timer).
    pub fn next_event(&self) -> Option<u64> {
        let d = self.next_decrease.filter(|_| self.decrease_cnp);
        match (d, self.next_increase) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Run every timer due at or before `now`; true when the rate changed.
    pub fn advance(&mut self, now: u64, p: &DcqcnParams) -> bool {
        let mut changed = false;
        while let Some(t) = self.next_event().filter(|&t| t <= now) {
            if self.decrease_cnp && Some(t) == self.next_decrease {
                self.decrease(t, p);
            } else {
                self.increase(p);
                self.stage += 1;
                let done = self.rate >= self.line && self.target >= self.line;
                self.next_increase = (!done).then_some(t + p.rp_timer_ns);
            }
            changed = true;
        }
        changed
    }

    fn decrease(&mut self, now: u64, p: &DcqcnParams) {
        self.advance_alpha(now, p);
        if p.clamp_target || self.stage != 0 {
            self.target = self.rate;
        }
        self.rate = (self.rate * (1.0 - self.alpha / 2.0)).max(bytes_per_ns(p.min_rate));
        self.stage = 0;
        self.decrease_cnp = false;
        self.next_decrease = None;
        self.next_increase = Some(now + p.rp_timer_ns);
    }

    fn increase(&mut self, p: &DcqcnParams) {
        let f = p.fast_recovery_times;
        if self.stage == f {
            self.target = (self.target + bytes_per_ns(p.rate_ai)).min(self.line);
        } else if self.stage > f {
            self.target = (self.target + bytes_per_ns(p.rate_hai)).min(self.line);
        }
        self.rate = (self.rate + self.target) / 2.0;
        if self.line - self.rate < 1e-9 * self.line {
            self.rate = self.line;
        }
    }
}

/// A queue pair: its reaction point, its active transfers and its notification state.
pub(super) struct Qp {
    pub rp: Rp,
    /// Active transfers (unit slots).
    pub units: Vec<u32>,
    /// Expected marks since the current CNP window opened.
    marks: f64,
    /// When the last CNP was sent.
    last_cnp: Option<u64>,
    /// Arrival times of CNPs on their way back.
    pending: Vec<u64>,
    /// In [`State::busy`].
    busy: bool,
}

/// The model's state (module docs).
pub(super) struct State {
    pub params: DcqcnParams,
    /// Per channel: it is a switch's egress port (only those queue and mark).
    queued: Vec<bool>,
    /// Per channel: its link rate.
    ch_rate: Vec<BitsPerSec>,
    /// Per channel: backlog, bytes.
    pub queue: Vec<f64>,
    /// Per channel: the rate its transfers offered over the last advance (B/ns; NaN:
    /// not measured since it was watched), and its KMIN in bytes.
    ch_offered: Vec<f64>,
    kmin: Vec<f64>,
    /// Per watched channel: the share of its arrivals it passes on over the last advance
    /// (`capacity / arrivals` while it is congested or drains a backlog, else 1): what
    /// the ports after it on a path see of a transfer's offered rate.
    pass: Vec<f64>,
    /// Whether any watched port passes on less (or more) than it receives: when none
    /// does, arrivals are the offered rates everywhere.
    throttling: bool,
    /// Channels congested or backlogged, checked at every tick.
    pub hot: Vec<u32>,
    hot_mark: Vec<bool>,
    /// Queue pairs by connection (source, destination, NCCL channel): each channel is
    /// its own queue pair, as in the glue.
    pub index: HashMap<QpKey, u32>,
    pub qps: Vec<Qp>,
    /// Per unit slot: its queue pair (`u32::MAX`: none), and its path's line rate.
    pub unit_qp: Vec<u32>,
    pub unit_line: Vec<f64>,
    /// Per unit slot: the (source, destination) of a record transfer (rate controlled).
    pub unit_pair: Vec<Option<QpKey>>,
    /// Per unit slot: wire bytes the sender has put on the network (a transfer never
    /// offers more than it has), when it started, and its bytes offered in the tick
    /// `unit_stamp` (counted once however many watched ports it crosses).
    unit_sent: Vec<f64>,
    unit_since: Vec<u64>,
    unit_stamp: Vec<u64>,
    unit_bytes: Vec<f64>,
    /// Queue pairs with an active transfer and a timer or CNP pending.
    pub busy: Vec<u32>,
    /// The next tick scheduled, if any.
    pub next_tick: Option<u64>,
    /// When the queues were last advanced.
    pub last_tick: u64,
    /// Wire bytes of a full packet (marks are counted per packet).
    pub packet: f64,
    /// Ticks run (for the replay's statistics).
    pub ticks: u64,
}

/// A queue pair's connection: source, destination, NCCL channel.
pub type QpKey = (u32, u32, u32);

/// No queue pair.
pub(super) const NO_QP: u32 = u32::MAX;

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
        let kmin = ch_rate
            .iter()
            .map(|&r| crate::netmodel::red_params(r).1 as f64 * 1000.0)
            .collect();
        State {
            params,
            queued,
            ch_rate,
            queue: vec![0.0; nch],
            ch_offered: vec![f64::NAN; nch],
            kmin,
            pass: vec![1.0; nch],
            throttling: false,
            hot: Vec::new(),
            hot_mark: vec![false; nch],
            index: HashMap::new(),
            qps: Vec::new(),
            unit_qp: Vec::new(),
            unit_line: Vec::new(),
            unit_pair: Vec::new(),
            unit_sent: Vec::new(),
            unit_since: Vec::new(),
            unit_stamp: Vec::new(),
            unit_bytes: Vec::new(),
            busy: Vec::new(),
            next_tick: None,
            last_tick: 0,
            packet: 1048.0,
            ticks: 0,
        }
    }

    /// Channel `c` became congested at `now`: watch it (switch egress ports only).
    pub fn heat(&mut self, c: u32, now: u64) {
        let cu = c as usize;
        if self.queued[cu] && !self.hot_mark[cu] {
            if self.hot.is_empty() {
                self.last_tick = now;
            }
            self.ch_offered[cu] = f64::NAN;
            self.hot_mark[cu] = true;
            self.hot.push(c);
        }
    }

    /// Stop watching the channels `keep` (parallel to `hot`) says are done.
    pub fn cool(&mut self, keep: &[bool]) {
        let mut k = 0;
        let mark = &mut self.hot_mark;
        self.hot.retain(|&c| {
            let stay = keep[k];
            k += 1;
            if !stay {
                mark[c as usize] = false;
            }
            stay
        });
    }

    /// Advance channel `c`'s queue over `dt` ns in which `bytes` arrived, against `cap`
    /// B/ns; returns RED's marking probability over the interval (at the mean backlog).
    pub fn grow(&mut self, c: u32, bytes: f64, cap: f64, dt: u64) -> f64 {
        let cu = c as usize;
        let q0 = self.queue[cu];
        let q1 = (q0 + bytes - cap * dt as f64).max(0.0);
        self.queue[cu] = q1;
        mark_probability((q0 + q1) / 2.0, self.ch_rate[cu])
    }

    /// Watch queue pair `q`'s timers and CNPs at every tick.
    fn make_busy(&mut self, q: u32) {
        let x = &mut self.qps[q as usize];
        if !x.busy {
            x.busy = true;
            self.busy.push(q);
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
            busy: false,
        });
        self.index.insert(pair, q);
        q
    }

    /// Add `marks` expected marks to queue pair `q`, on packets that reach the receiver
    /// at `rx`; when they reach one (and the receiver's CNP window is open at `rx`), a CNP
    /// leaves then and reaches the sender `back` ns later. True when a CNP was sent.
    pub fn mark(&mut self, q: u32, marks: f64, rx: u64, back: u64) -> bool {
        let iv = self.params.cnp_interval_ns;
        let x = &mut self.qps[q as usize];
        if x.last_cnp.is_some_and(|t| rx < t + iv) {
            return false;
        }
        x.marks += marks / MARK_SPACING;
        if x.marks < 1.0 {
            return false;
        }
        x.marks = 0.0;
        x.last_cnp = Some(rx);
        x.pending.push(rx + back);
        true
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

    /// The earliest thing queue pair `q` waits for: a CNP arrival or a timer.
    pub fn qp_next(&self, q: u32) -> Option<u64> {
        let x = &self.qps[q as usize];
        let c = x.pending.iter().copied().min();
        match (c, x.rp.next_event()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

impl Sim<'_> {
    /// Record transfer `u` (from `src` to `dst`, its path's line rate `line`) started:
    /// it joins its pair's queue pair if the pair has one (a pair gets one when first
    /// marked) and is capped at its DCQCN share.
    pub(super) fn cc_start(&mut self, u: u32, conn: QpKey, line: f64) {
        let Some(mut cc) = self.cc.take() else { return };
        let ui = u as usize;
        if cc.unit_qp.len() <= ui {
            cc.unit_qp.resize(ui + 1, NO_QP);
            cc.unit_line.resize(ui + 1, 0.0);
            cc.unit_pair.resize(ui + 1, None);
            cc.unit_sent.resize(ui + 1, 0.0);
            cc.unit_since.resize(ui + 1, 0);
            cc.unit_stamp.resize(ui + 1, u64::MAX);
            cc.unit_bytes.resize(ui + 1, 0.0);
        }
        cc.unit_sent[ui] = 0.0;
        cc.unit_since[ui] = self.now;
        cc.unit_stamp[ui] = u64::MAX;
        cc.unit_line[ui] = line;
        cc.unit_pair[ui] = Some(conn);
        cc.unit_qp[ui] = NO_QP;
        if let Some(&q) = cc.index.get(&conn) {
            cc.advance_qp(q, self.now);
            cc.qps[q as usize].units.push(u);
            cc.unit_qp[ui] = q;
            self.cc_recap(&cc, q);
            if cc.qp_next(q).is_some() {
                cc.make_busy(q);
            }
        }
        self.cc = Some(cc);
    }

    /// Transfer `u` finished: it leaves its queue pair, whose other transfers share the
    /// pair's rate among fewer.
    pub(super) fn cc_done(&mut self, u: u32) {
        let Some(mut cc) = self.cc.take() else { return };
        let ui = u as usize;
        if ui < cc.unit_qp.len() {
            let q = cc.unit_qp[ui];
            cc.unit_qp[ui] = NO_QP;
            cc.unit_pair[ui] = None;
            if q != NO_QP {
                let units = &mut cc.qps[q as usize].units;
                if let Some(k) = units.iter().position(|&x| x == u) {
                    units.swap_remove(k);
                }
                self.cc_recap(&cc, q);
            }
        }
        self.cc = Some(cc);
    }

    /// Channel `c` is tight (found by the solver): watch its queue if its transfers offer
    /// more than it carries (caps can exceed a port while the NICs' shares do not).
    pub(super) fn cc_heat(&mut self, c: u32) {
        let Some(cc) = self.cc.as_ref() else { return };
        let cu = c as usize;
        if !cc.queued[cu] || cc.hot_mark[cu] {
            return;
        }
        let offered: f64 = self.ch_units[cu]
            .iter()
            .map(|&(u, _)| self.offered_now(cc, u))
            .sum();
        if offered > self.p.ch_cap[cu] * (1.0 + 1e-9) {
            let now = self.now;
            self.cc.as_mut().expect("checked").heat(c, now);
        }
    }

    /// Whether any channel on unit `u`'s path has a backlog.
    fn backlogged(&self, cc: &State, u: u32) -> bool {
        let x = &self.units[u as usize];
        (x.off..x.off + x.len).any(|k| cc.queue[self.p.arena[k as usize] as usize] > 0.0)
    }

    /// Give queue pair `q`'s transfers their caps: the pair's rate shared equally, or the
    /// line rate where a backlog feeds them.
    fn cc_recap(&mut self, cc: &State, q: u32) {
        let x = &cc.qps[q as usize];
        let share = x.rp.rate() / x.units.len().max(1) as f64;
        for &u in &x.units {
            let line = cc.unit_line[u as usize];
            let cap = if self.backlogged(cc, u) {
                line
            } else {
                line.min(share)
            };
            self.set_cap(u, cap);
        }
    }

    /// Whether unit `u` is a host transfer whose sender has put all its bytes on the
    /// network (they wait in the queues of the watched ports on its path): a FIFO port
    /// serves them before the packets an aggregation stream sends after them, so the
    /// solver fills them with the streams, not with the transfers the streams leave room
    /// for ([`Sim::ina_first`]). Without this, a stream starting at a port where a pipeline
    /// send's last 18 KB were queued took the whole port for its 814 µs and the send ended
    /// after it (docs/model.md#dcqcn-rate-model, *Window-limited streams*).
    pub(super) fn cc_sent_all(&self, u: u32) -> bool {
        let Some(cc) = self.cc.as_ref() else {
            return false;
        };
        let ui = u as usize;
        let x = &self.units[ui];
        matches!(x.owner, Owner::Rec(_))
            && cc.unit_pair.get(ui).is_some_and(|p| p.is_some())
            && cc.unit_sent[ui] >= x.wire
    }

    /// An aggregation stream started: cap it at what its window allows with the queues
    /// now on its tree ([`Sim::cc_window`]).
    pub(super) fn cc_stream_start(&mut self, u: u32) {
        let Some(cc) = self.cc.take() else { return };
        self.cc_window(&cc, u);
        self.cc = Some(cc);
    }

    /// Cap aggregation stream `u` at its window's rate over the round trip its packets
    /// see now: `w` packets per `RTT + D`, `D` the largest queueing delay (`Q / C`) among
    /// the watched ports on its tree (docs/model.md#dcqcn-rate-model, *Window-limited
    /// streams*). In the glue a worker sends a packet only when a result comes back, so a
    /// queue on the tree slows the whole aggregation (its results wait for every
    /// worker's packet) and it yields the port to the queue pairs beside it; at its
    /// solved rate, as before, it kept the queue up and starved them, which DCQCN then
    /// cut as well. **Approximation**: `D` is the largest single port's delay, not the
    /// longest chain's sum (exact with one backlogged port on the tree, short when an up
    /// and a down chain both queue), and it is re-read at the model's ticks.
    fn cc_window(&mut self, cc: &State, u: u32) {
        let x = &self.units[u as usize];
        let Owner::Agg(a) = x.owner else { return };
        let g = &self.p.aggs[a as usize];
        if !g.window.is_finite() || g.rtt == 0 {
            return;
        }
        let arena = &self.p.arena[x.off as usize..(x.off + x.len) as usize];
        let wait = arena
            .iter()
            .map(|&c| cc.queue[c as usize] / self.p.ch_cap[c as usize])
            .fold(0.0, f64::max);
        let rtt = g.rtt as f64;
        let cap = g.tree_cap.min(g.window * rtt / (rtt + wait));
        self.set_cap(u, cap);
    }

    /// The rate unit `u` offers to the ports it crosses: its DCQCN share, at most its
    /// share of its first hop (the NIC serves its queue pairs in turn); an aggregation
    /// or ring flow offers its solved rate.
    fn offered(&self, cc: &State, u: u32) -> f64 {
        let x = &self.units[u as usize];
        if !matches!(x.owner, Owner::Rec(_)) {
            return x.rate;
        }
        let ui = u as usize;
        let line = cc.unit_line.get(ui).copied().unwrap_or(x.cap);
        let dcqcn = match cc.unit_qp.get(ui).copied().unwrap_or(NO_QP) {
            NO_QP => line,
            q => {
                let y = &cc.qps[q as usize];
                y.rp.rate() / y.units.len().max(1) as f64
            }
        };
        let first = self.p.arena[x.off as usize] as usize;
        let nic = self.p.ch_cap[first] / self.ch_units[first].len().max(1) as f64;
        dcqcn.min(nic).min(line)
    }

    /// Wire bytes unit `u` put on the network in the tick since `prev`: its offered
    /// rate over the part of the tick it existed, at most what it had left to send
    /// (the rest of a transfer sent faster than it is served waits in the queues).
    fn tick_bytes(&self, cc: &mut State, u: u32, prev: u64) -> f64 {
        let ui = u as usize;
        let x = &self.units[ui];
        let rec =
            matches!(x.owner, Owner::Rec(_)) && cc.unit_pair.get(ui).is_some_and(|p| p.is_some());
        if !rec {
            return x.rate * self.now.saturating_sub(prev) as f64;
        }
        if cc.unit_stamp[ui] == cc.ticks {
            return cc.unit_bytes[ui];
        }
        let since = prev.max(cc.unit_since[ui]);
        let want = self.offered(cc, u) * self.now.saturating_sub(since) as f64;
        let b = want.min((x.wire - cc.unit_sent[ui]).max(0.0));
        cc.unit_sent[ui] += b;
        cc.unit_stamp[ui] = cc.ticks;
        cc.unit_bytes[ui] = b;
        b
    }

    /// One tick: advance every watched port's queue, mark, send CNPs, run the queue pairs'
    /// timers, re-cap what changed, and schedule the next tick.
    pub(super) fn cc_tick(&mut self) {
        match self.cc.as_mut() {
            Some(cc) if cc.next_tick == Some(self.now) => cc.next_tick = None,
            _ => return, // superseded, or the model is off
        }
        self.cc_advance();
        let Some(mut cc) = self.cc.take() else { return };
        let now = self.now;
        let mut recap: Vec<u32> = Vec::new();
        let busy = std::mem::take(&mut cc.busy);
        for q in busy {
            cc.qps[q as usize].busy = false;
            if cc.advance_qp(q, now) {
                recap.push(q);
            }
            if cc.qp_next(q).is_some() && !cc.qps[q as usize].units.is_empty() {
                cc.make_busy(q);
            }
        }
        // a backlog appearing or draining changes the caps of every pair crossing it, and
        // the window rate of every aggregation stream crossing it
        let mut streams: Vec<u32> = Vec::new();
        for &c in &cc.hot {
            for &(u, _) in &self.ch_units[c as usize] {
                let q = cc.unit_qp.get(u as usize).copied().unwrap_or(NO_QP);
                if q != NO_QP {
                    recap.push(q);
                } else if matches!(self.units[u as usize].owner, Owner::Agg(_)) {
                    streams.push(u);
                }
            }
        }
        recap.sort_unstable();
        recap.dedup();
        for q in recap {
            self.cc_recap(&cc, q);
        }
        streams.sort_unstable();
        streams.dedup();
        for u in streams {
            self.cc_window(&cc, u);
        }
        let offered = &cc.ch_offered;
        let queue = &cc.queue;
        let cap = &self.p.ch_cap;
        let keep: Vec<bool> = cc
            .hot
            .iter()
            .map(|&c| {
                let cu = c as usize;
                queue[cu] > 0.0 || offered[cu].is_nan() || offered[cu] > cap[cu]
            })
            .collect();
        cc.cool(&keep);
        self.cc = Some(cc);
        self.cc_schedule();
    }

    /// A transfer on `arena[off..off+len]` is about to start, end or change its cap: if
    /// it crosses a watched port, bring the queues up to now first, at the rates offered
    /// since the last advance (which held until this change).
    pub(super) fn cc_touch(&mut self, off: u32, len: u32) {
        let Some(cc) = self.cc.as_ref() else { return };
        if cc.hot.is_empty() || cc.last_tick >= self.now {
            return;
        }
        let arena = &self.p.arena[off as usize..(off + len) as usize];
        if arena.iter().any(|&c| cc.hot_mark[c as usize]) {
            self.cc_advance();
        }
    }

    /// Bring every watched port's queue and marks up to now, at the rates offered since
    /// the last advance: exact as long as every change to a watched port's transfers
    /// advances first ([`Sim::cc_touch`]).
    ///
    /// A transfer's bytes reach a port at the rate its sender offers them only if no
    /// watched port before it on its path is congested: a FIFO port that carries more
    /// than its capacity (or drains a backlog) passes each transfer on in proportion to
    /// its arrivals, `capacity / arrivals` of them (`State::pass`). So the arrivals at
    /// each watched port are its transfers' offered bytes scaled by the ports before it,
    /// iterated until every port has seen the ones upstream of it (a path crosses at most
    /// a few watched ports).
    pub(super) fn cc_advance(&mut self) {
        let Some(mut cc) = self.cc.take() else { return };
        if cc.hot.is_empty() || self.now <= cc.last_tick {
            cc.last_tick = cc.last_tick.max(self.now);
            self.cc = Some(cc);
            return;
        }
        let prev = cc.last_tick;
        cc.last_tick = self.now;
        cc.ticks += 1;
        let dt = self.now - prev;
        let hot = std::mem::take(&mut cc.hot);
        // each watched port's transfers: (unit, position on its path, bytes its sender
        // offered in the interval)
        let mut at: Vec<Vec<(u32, u32, f64)>> = Vec::with_capacity(hot.len());
        for &c in &hot {
            let mut v = Vec::with_capacity(self.ch_units[c as usize].len());
            for i in 0..self.ch_units[c as usize].len() {
                let (u, k) = self.ch_units[c as usize][i];
                let sent = cc.unit_sent.get(u as usize).copied();
                v.push((u, k, self.tick_bytes(&mut cc, u, prev)));
                // a transfer that has just put its last byte on the network is filled
                // with the streams from now on (`Sim::cc_sent_all`): re-solve it
                let wire = self.units[u as usize].wire;
                if sent.is_some_and(|b| b < wire) && cc.unit_sent[u as usize] >= wire {
                    self.fresh.push(u);
                }
            }
            at.push(v);
        }
        for &c in &hot {
            cc.pass[c as usize] = 1.0;
        }
        cc.throttling = false;
        let mut arrived: Vec<f64> = at.iter().map(|v| v.iter().map(|x| x.2).sum()).collect();
        for _ in 0..UPSTREAM_ROUNDS {
            let mut changed = false;
            for (i, &c) in hot.iter().enumerate() {
                let cu = c as usize;
                let cap = self.p.ch_cap[cu] * dt as f64;
                // a backlogged port sends at capacity while it has bytes: what arrived and
                // what was queued, never more (a port passing `cap / arrived` for the whole
                // interval created bytes once its backlog ran dry, and ports after it
                // grew queues of terabytes)
                let pass = if arrived[i] > 0.0 && (cc.queue[cu] > 0.0 || arrived[i] > cap) {
                    cap.min(cc.queue[cu] + arrived[i]) / arrived[i]
                } else {
                    1.0
                };
                changed |= pass != cc.pass[cu];
                cc.pass[cu] = pass;
            }
            if !changed {
                break;
            }
            cc.throttling = hot.iter().any(|&c| cc.pass[c as usize] != 1.0);
            for (i, v) in at.iter().enumerate() {
                arrived[i] = v
                    .iter()
                    .map(|&(u, k, b)| b * self.upstream(&cc, u, k))
                    .sum();
            }
        }
        for (i, &c) in hot.iter().enumerate() {
            let v: Vec<(u32, f64)> = at[i]
                .iter()
                .map(|&(u, k, b)| (u, b * self.upstream(&cc, u, k)))
                .collect();
            self.cc_port(&mut cc, c, dt, arrived[i], &v);
        }
        cc.hot = hot;
        self.cc = Some(cc);
    }

    /// The share of unit `u`'s offered bytes that reach the `k`-th channel of its path:
    /// the product of what each watched port before it passes on (`State::pass`).
    fn upstream(&self, cc: &State, u: u32, k: u32) -> f64 {
        // an aggregation stream's arena is its tree's sorted channel multiset, not a path:
        // its order says nothing about which port comes first, and a channel two tree
        // edges share is listed twice, so a product over it fed a backlogged port's
        // `pass` back into its own arrivals (queues grew 3.6× per tick until the clock
        // overflowed). A stream loads every port of its tree at its solved, window-capped
        // rate ([`Sim::cc_window`]).
        if !cc.throttling || matches!(self.units[u as usize].owner, Owner::Agg(_)) {
            return 1.0;
        }
        let off = self.units[u as usize].off as usize;
        self.p.arena[off..off + k as usize]
            .iter()
            .filter(|&&c| cc.hot_mark[c as usize])
            .map(|&c| cc.pass[c as usize])
            .product()
    }

    /// Advance port `c`'s queue over `dt` ns in which `total` bytes arrived, `arrivals`
    /// per transfer, and mark the transfers' queue pairs (a pair that sends a CNP is
    /// watched for its arrival).
    fn cc_port(&mut self, cc: &mut State, c: u32, dt: u64, total: f64, arrivals: &[(u32, f64)]) {
        let cu = c as usize;
        let cap = self.p.ch_cap[cu];
        cc.ch_offered[cu] = if dt > 0 { total / dt as f64 } else { f64::NAN };
        let p = cc.grow(c, total, cap, dt);
        if p <= 0.0 || dt == 0 {
            return;
        }
        let wait = (cc.queue[cu] / cap) as u64;
        for &(u, bytes) in arrivals {
            let Some(pair) = cc.unit_pair.get(u as usize).copied().flatten() else {
                continue;
            };
            let q = match cc.unit_qp[u as usize] {
                NO_QP => {
                    let q = cc.qp(pair, cc.unit_line[u as usize]);
                    // every transfer of the pair now in flight joins it
                    self.cc_adopt(cc, q, pair);
                    q
                }
                q => q,
            };
            let marks = p * bytes / cc.packet;
            let lat = self.units[u as usize].latency;
            if cc.mark(q, marks, self.now + wait + lat, lat) {
                cc.make_busy(q);
            }
        }
    }

    /// A new queue pair `q` for `pair`: the pair's transfers in flight join it.
    fn cc_adopt(&mut self, cc: &mut State, q: u32, pair: QpKey) {
        for (u, p) in cc.unit_pair.iter().enumerate() {
            if *p == Some(pair) && cc.unit_qp[u] == NO_QP {
                let x = &self.units[u];
                if x.rate > 0.0 && matches!(x.owner, Owner::Rec(_)) {
                    cc.unit_qp[u] = q;
                    cc.qps[q as usize].units.push(u as u32);
                }
            }
        }
    }

    /// Schedule the next tick: every `RATE_DECREASE_INTERVAL` while a watched port's
    /// backlog is above KMIN (it marks); else when a growing backlog will reach KMIN or a
    /// draining one will empty (at the rates offered now), at the earliest timer or CNP
    /// of a queue pair with a transfer, and never sooner than one interval.
    pub(super) fn cc_schedule(&mut self) {
        let Some(cc) = self.cc.as_ref() else { return };
        let step = cc.params.rate_decrease_ns.max(1);
        let mut next: Option<u64> = cc.busy.iter().filter_map(|&q| cc.qp_next(q)).min();
        // a port asks for a tick one interval away at the soonest: with one already
        // scheduled by then, no port can bring it forward (a marking port is then
        // skipped at every event of the interval, not re-summed)
        let ports = if cc.next_tick.is_some_and(|n| n <= self.now + step) {
            &[][..]
        } else {
            &cc.hot[..]
        };
        for &c in ports {
            let cu = c as usize;
            let (q, cap) = (cc.queue[cu], self.p.ch_cap[cu]);
            let kmin = cc.kmin[cu];
            if q > kmin {
                // marking: every interval, whatever arrives
                next = Some(next.map_or(self.now + step, |n| n.min(self.now + step)));
                continue;
            }
            let offered: f64 = self.ch_units[cu]
                .iter()
                .map(|&(u, k)| self.offered_now(cc, u) * self.upstream(cc, u, k))
                .sum();
            // a stream's window rate follows the backlog (`Sim::cc_window`): re-read it
            // every interval while it queues
            let windowed = q > 0.0
                && self.ch_units[cu]
                    .iter()
                    .any(|&(u, _)| matches!(self.units[u as usize].owner, Owner::Agg(_)));
            let dt = if !offered.is_finite() || windowed {
                Some(step)
            } else if offered > cap {
                Some(((kmin - q) / (offered - cap)).ceil() as u64)
            } else if q > 0.0 {
                Some((q / (cap - offered).max(1e-9)).ceil() as u64)
            } else {
                Some(step) // idle: the next tick stops watching it
            };
            if let Some(dt) = dt {
                // a backlog draining at a nearly zero net rate gives a huge (saturated) dt
                let t = self.now.saturating_add(dt.max(step));
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        }
        if let Some(t) = next.map(|t| t.max(self.now + 1)).filter(|&t| t < u64::MAX) {
            if cc.next_tick.is_none_or(|n| t < n) {
                self.cc.as_mut().expect("checked").next_tick = Some(t);
                self.push(t, EventKind::CcTick, 0, 0);
            }
        }
    }

    /// The rate unit `u` offers now: 0 once it has put all its bytes on the network.
    fn offered_now(&self, cc: &State, u: u32) -> f64 {
        let ui = u as usize;
        let x = &self.units[ui];
        let rec =
            matches!(x.owner, Owner::Rec(_)) && cc.unit_pair.get(ui).is_some_and(|p| p.is_some());
        if rec && cc.unit_sent[ui] >= x.wire {
            return 0.0;
        }
        self.offered(cc, u)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gbps(g: u64) -> f64 {
        crate::netmodel::bytes_per_ns(BitsPerSec(g * 1_000_000_000))
    }

    #[test]
    fn the_first_cnp_cuts_the_rate_by_alpha_over_two_at_the_next_decrease_check() {
        let p = DcqcnParams::default();
        let mut rp = Rp::new(gbps(100));
        rp.on_cnp(10_000, &p);
        // the check runs 1 ns after the 4 µs grid point: alpha decayed by 4 updates
        assert_eq!(rp.next_event(), Some(14_001));
        assert!(rp.advance(14_001, &p));
        let alpha = (1.0f64 - 1.0 / 256.0).powi(4);
        let want = gbps(100) * (1.0 - alpha / 2.0);
        assert!((rp.rate() - want).abs() < 1e-9, "{} vs {want}", rp.rate());
        // CLAMP_TARGET_RATE 0 and no increase yet: the target stays at line rate
        assert_eq!(rp.target(), gbps(100));
    }

    #[test]
    fn recovery_halves_the_gap_then_adds_rate_ai_then_rate_hai_every_rp_timer() {
        let p = DcqcnParams::default();
        let line = gbps(100);
        let mut rp = Rp::new(line);
        rp.on_cnp(0, &p);
        rp.advance(4_001, &p);
        let cut = rp.rate();
        // fast recovery, 900 µs after the cut
        assert!(!rp.advance(904_000, &p));
        assert!(rp.advance(904_001, &p));
        assert!((rp.rate() - (cut + line) / 2.0).abs() < 1e-9);
        // then additive (target is at line rate already: stays), then hyper
        rp.advance(904_001 + 900_000, &p);
        assert!((rp.rate() - ((cut + line) / 2.0 + line) / 2.0).abs() < 1e-9);
        assert_eq!(rp.target(), line);
    }

    #[test]
    fn a_cut_after_an_increase_sets_the_target_and_alpha_decays_without_cnps() {
        let p = DcqcnParams::default();
        let line = gbps(100);
        let mut rp = Rp::new(line);
        rp.on_cnp(0, &p);
        rp.advance(4_001, &p);
        rp.advance(904_001, &p); // one fast recovery
        let before = rp.rate();
        rp.on_cnp(1_000_000, &p);
        rp.advance(1_000_001, &p);
        assert_eq!(rp.target(), before);
        // 1,000 alpha updates without a CNP since the first (whose alpha is 1); this
        // CNP's raise applies at the next update, after the cut of the same instant
        let g = 1.0 / 256.0;
        let a = (1.0f64 - g).powi(1000);
        let alpha = rp.alpha(1_000_001, &p);
        assert!((alpha - a).abs() < 1e-12, "{alpha} vs {a}");
        assert!((rp.alpha(1_001_000, &p) - ((1.0 - g) * a + g)).abs() < 1e-12);
        assert!((rp.rate() - before * (1.0 - alpha / 2.0)).abs() < 1e-6 * before);
    }

    #[test]
    fn the_rate_never_falls_below_min_rate() {
        let p = DcqcnParams::default();
        let mut rp = Rp::new(gbps(100));
        for k in 0..200u64 {
            rp.on_cnp(k * 10_000, &p);
            rp.advance(k * 10_000 + 9_000, &p);
        }
        assert!((rp.rate() - bytes_per_ns(p.min_rate)).abs() < 1e-12);
    }

    #[test]
    fn a_queue_grows_by_the_excess_and_marks_past_kmin() {
        let topo = Topology::from_spec(
            "leaf-spine:leaves=1,spines=1,hosts-per-leaf=2,gpus-per-server=1,nvlink=off",
        )
        .expect("topology");
        let mut s = State::new(&topo, DcqcnParams::default());
        let c = (0..topo.links.len() as u32 * 2)
            .find(|&c| s.queued[c as usize])
            .expect("a switch port");
        let rate = s.ch_rate[c as usize];
        let (_, kmin, _) = crate::netmodel::red_params(rate);
        let cap = crate::netmodel::bytes_per_ns(rate);
        // offered twice the capacity: the queue grows at `cap` B/ns
        let dt = (kmin * 1000) as f64 / cap;
        let half = dt as u64 / 2;
        assert_eq!(s.grow(c, 2.0 * cap * half as f64, cap, half), 0.0);
        // to 2.5 KMIN: the mean backlog 1.5 KMIN marks with PMAX·0.5/(KMAX/KMIN − 1)
        let p = s.grow(c, 4.0 * cap * dt, cap, 2 * dt as u64);
        let (kmax, _, pmax) = crate::netmodel::red_params(rate);
        let want = pmax * 0.5 * kmin as f64 / (kmax - kmin) as f64;
        assert!((p - want).abs() < 1e-3, "{p} vs {want}");
        // draining below the capacity empties it, never below 0
        s.grow(c, 0.0, cap, 10 * dt as u64);
        assert_eq!(s.queue[c as usize], 0.0);
    }

    #[test]
    fn a_pair_sends_at_most_one_cnp_per_interval() {
        let topo = Topology::from_spec(
            "leaf-spine:leaves=1,spines=1,hosts-per-leaf=2,gpus-per-server=1,nvlink=off",
        )
        .expect("topology");
        let mut s = State::new(&topo, DcqcnParams::default());
        let q = s.qp((0, 1, 0), gbps(100));
        // marked packets reaching the receiver at 0, 10, … ns; the CNP takes 100 ns back
        assert!(!s.mark(q, 1.0, 0, 100)); // 1/1.5 expected marks: none yet
        assert!(s.mark(q, 1.0, 10, 100));
        assert!(!s.mark(q, 10.0, 50_009, 100));
        assert!(s.mark(q, 10.0, 50_010, 100));
        assert_eq!(s.qp_next(q), Some(110));
    }
}
