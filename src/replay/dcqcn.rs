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
//!   before it passes on (`capacity / arrivals`, FIFO). Packets entering a queue of `Q`
//!   bytes are marked with RED's probability ([`crate::netmodel::mark_probability`]);
//!   with ns-3 RED's uniformised marking (the glue's ports, `Wait` on) the gap between
//!   marks is uniform in `[1/p, 2/p]` packets, so a flow's expected marks grow at
//!   `p / 1.5` per packet that reaches the port.
//! - **Notification point**: once a pair's expected marks since its last CNP window reach
//!   one, a CNP is sent (at most one per `cnp_interval` per pair) and reaches the sender
//!   after the marked packet's queueing delay (`Q / capacity`) and the path's propagation
//!   delay twice (to the receiver, and the CNP back).
//! - **Service.** A port with a backlog is work conserving: transfers crossing it share
//!   its capacity max-min whatever their DCQCN rate (the backlog feeds them); a transfer
//!   whose path has no backlog is capped at its pair's DCQCN rate (shared equally among
//!   the pair's active transfers).
//!
//! **Event-driven, in closed form.** Between two changes of what arrives at a port, its
//! queue is linear in time, so RED's probability is piecewise linear in time and the
//! marks a transfer collects are an exact integral ([`Red::integral`]); the moment a
//! pair's marks reach one is solved for ([`Red::cum_inv`]) instead of being looked for
//! tick by tick. A port is brought up to date only when something it carries changes
//! (a transfer starts or ends on it, a pair crossing it changes rate, a port before it
//! changes what it passes on) and at its own events (its backlog empties, it reaches
//! KMIN with transfers whose pair has no state yet); a pair only at its CNPs and timers.
//! Nothing runs for the ports and pairs that nothing happens to. Until 2 Dec 2026 every
//! watched port was advanced at every 4 µs tick and at every change anywhere
//! (docs/model.md#dcqcn-rate-model gives the cost and the results it moved).
//!
//! **Approximations** (measured in `docs/model.md`): the queue is one fluid per port, not
//! per flow, so a port's backlog serves every transfer crossing it and FIFO order is not
//! kept (a transfer arriving at a backlogged port is not delayed behind it); marking is
//! the expected count, not random; a marked packet's queueing delay is its port's backlog
//! when the CNP is sent, and the CNP window's opening is placed at the port with the
//! backlog of the port's last update. Aggregation streams (their own window protocol)
//! and fallback rings load the queues at their solved rate and are not DCQCN controlled;
//! a stream's window rate counts the largest queueing delay on its tree
//! ([`Sim::cc_window`]: one port's, not a chain's sum, re-read every
//! `RATE_DECREASE_INTERVAL` while a port on its tree queues), and a host transfer whose
//! bytes all wait in the queues is filled with the streams ([`Sim::cc_sent_all`]);
//! fallback rings keep their line-rate cap (their window is not modelled).
//! A transfer offers at most its path's line rate: a NIC faster than a slower link on its
//! path does not overrun that link's port in the model (it does in the glue).

use super::engine::{EventKind, Owner, Sim};
use super::prepare::KeyHasher;
use super::timers::Timers;
use crate::netmodel::{bytes_per_ns, red_params, DcqcnParams};
use crate::topology::{NodeKind, Topology};
use crate::units::BitsPerSec;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

/// A map keyed by connection, hashed with the path interner's multiplicative hash: a
/// record's start looks its connection's queue pair up (tens of millions of times on a
/// large job), and SipHash cost more than the rest of the lookup. Neither map is
/// iterated, so the hash does not reach the results.
pub type ConnMap<V> = HashMap<QpKey, V, BuildHasherDefault<KeyHasher>>;

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
        self.alpha *= decay(keep, n);
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

    /// When a CNP arriving at `t` (with none waiting for a decrease check) is acted on:
    /// the first check after it on the grid its first CNP started.
    fn decrease_after(&self, t: u64, p: &DcqcnParams) -> u64 {
        if let Some(d) = self.next_decrease.filter(|_| self.decrease_cnp) {
            return d;
        }
        let origin = self.origin.unwrap_or(t);
        let iv = p.rate_decrease_ns.max(1);
        let k = match (t - origin).checked_sub(1) {
            None => 1,
            Some(x) => x / iv + 1,
        };
        origin + 1 + k * iv
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

/// `keep^n`, alpha's decay over `n` updates without a CNP: `powf`'s value, remembered
/// (per thread, for the `keep` last asked) for the `n` below [`DECAY_MEMO`]. Alpha decays
/// at every decrease check and CNP of every marked pair, tens of millions of times on a
/// large job, over a few to a few hundred updates (`alpha_resume_ns` 1 µs against the
/// 4 µs checks and 50 µs CNP windows, `netmodel::DcqcnParams`), and `powf` was 5 % of
/// the replay's CPU. The values are `powf`'s own, so the results do not change.
fn decay(keep: f64, n: u64) -> f64 {
    use std::cell::RefCell;
    thread_local! {
        static TABLE: RefCell<(u64, Vec<f64>)> = const { RefCell::new((0, Vec::new())) };
    }
    if n >= DECAY_MEMO {
        return keep.powf(n as f64);
    }
    TABLE.with(|t| {
        let mut t = t.borrow_mut();
        if t.1.is_empty() || t.0 != keep.to_bits() {
            t.0 = keep.to_bits();
            t.1 = (0..DECAY_MEMO).map(|k| keep.powf(k as f64)).collect();
        }
        t.1[n as usize]
    })
}

/// Update counts whose decay [`decay`] remembers.
const DECAY_MEMO: u64 = 1024;

/// Rounds of re-evaluating ports within one instant after a port before them on a path
/// changed what it passes on (a path crosses at most a few congested ports: host, leaf,
/// spine tiers up and down).
const UPSTREAM_ROUNDS: usize = 4;

/// Packets leave a marked queue 1.5× rarer than RED's probability says: ns-3 RED's
/// uniformised marking puts the next mark uniformly between `1/p` and `2/p` packets.
const MARK_SPACING: f64 = 1.5;

/// Rounds of "bring the model's state up to date, then re-solve the rates" within one
/// instant before the rest is left to the next nanosecond (each round settles what the
/// previous one's re-solve changed: a port found congested, an aggregation's new rate).
const SETTLE_ROUNDS: usize = 8;

/// RED's marking profile of one port (bytes): probability 0 up to KMIN, rising linearly
/// to PMAX at KMAX, 1 above ([`crate::netmodel::mark_probability`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Red {
    kmin: f64,
    kmax: f64,
    pmax: f64,
}

impl Red {
    /// The profile `ns3 emit` writes for a port of `rate` ([`red_params`]).
    pub fn for_rate(rate: BitsPerSec) -> Red {
        let (kmax, kmin, pmax) = red_params(rate);
        Red {
            kmin: kmin as f64 * 1000.0,
            kmax: kmax as f64 * 1000.0,
            pmax,
        }
    }

    /// The marking probability at a backlog of `q` bytes.
    pub fn p(&self, q: f64) -> f64 {
        if q <= self.kmin {
            0.0
        } else if q >= self.kmax {
            1.0
        } else {
            self.pmax * (q - self.kmin) / (self.kmax - self.kmin)
        }
    }

    /// `∫₀^q p(x) dx`: continuous and non-decreasing in `q`.
    pub fn cum(&self, q: f64) -> f64 {
        let span = self.kmax - self.kmin;
        if q <= self.kmin {
            0.0
        } else if q <= self.kmax {
            let x = q - self.kmin;
            self.pmax * x * x / (2.0 * span)
        } else {
            self.pmax * span / 2.0 + (q - self.kmax)
        }
    }

    /// The backlog where [`Red::cum`] reaches `y > 0`.
    pub fn cum_inv(&self, y: f64) -> f64 {
        let span = self.kmax - self.kmin;
        let mid = self.pmax * span / 2.0;
        if y <= mid {
            self.kmin + (2.0 * y * span / self.pmax).sqrt()
        } else {
            self.kmax + (y - mid)
        }
    }

    /// `∫ p(Q(s)) ds` over `dt` ns in which the backlog moves linearly from `qa` to `qb`
    /// (exact: `(cum(qb) − cum(qa)) / (qb − qa) · dt`). A backlog that runs dry within the
    /// interval may be given as the negative value its line reaches: `p` is 0 below KMIN.
    pub fn integral(&self, qa: f64, qb: f64, dt: f64) -> f64 {
        if dt <= 0.0 {
            return 0.0;
        }
        let dq = qb - qa;
        if dq.abs() <= 1e-9 * qa.abs().max(qb.abs()).max(1.0) {
            return self.p(0.5 * (qa + qb)) * dt;
        }
        (self.cum(qb) - self.cum(qa)) / dq * dt
    }
}

/// A queue pair: its reaction point, its active transfers and its notification state.
pub(super) struct Qp {
    pub rp: Rp,
    /// Active transfers (unit slots).
    pub units: Vec<u32>,
    /// Expected marks since the current CNP window opened (already divided by
    /// [`MARK_SPACING`]): a CNP leaves when they reach 1.
    marks: f64,
    /// When the last CNP was sent (at the receiver).
    last_cnp: Option<u64>,
    /// Arrival times of CNPs on their way back.
    pending: Vec<u64>,
    /// In the current flush's re-cap / re-prediction lists.
    recap: bool,
    predict: bool,
    /// No CNP before this time (a CNP found due when its marks fell short by rounding
    /// is looked for from the next nanosecond).
    not_before: u64,
}

/// What the model's own events do, in processing order within one nanosecond.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// A port's backlog runs dry, or reaches KMIN (index: channel).
    Port,
    /// A transfer has put its last byte on the network (index: unit slot).
    Sent,
    /// A queue pair's marks reach one: it sends a CNP (index: queue pair).
    Cnp,
    /// A queue pair's CNP arrives or its timer fires (index: queue pair).
    Timer,
    /// An aggregation stream behind a backlog re-reads its window rate (index: unit
    /// slot; [`Sim::cc_window`]).
    Window,
}

impl Ev {
    /// The kinds, in processing order.
    const ALL: [Ev; 5] = [Ev::Port, Ev::Sent, Ev::Cnp, Ev::Timer, Ev::Window];
    const KINDS: usize = Ev::ALL.len();

    /// Its key kind in [`Timers`] (its processing order).
    fn id(self) -> usize {
        self as usize
    }
}

/// The model's state (module docs).
pub(super) struct State {
    pub params: DcqcnParams,
    /// Per channel: it is a switch's egress port (only those queue and mark).
    queued: Vec<bool>,
    /// Per channel: its capacity (B/ns) and its RED profile.
    cap: Vec<f64>,
    red: Vec<Red>,
    /// Per channel: backlog (bytes) as of `q_time`.
    pub queue: Vec<f64>,
    q_time: Vec<u64>,
    /// Per watched channel: the rate bytes arrive at it (B/ns) since `q_time`, and the
    /// share of its arrivals it passes on (`capacity / arrivals` while it is congested or
    /// drains a backlog, else 1): what the ports after it on a path see of a transfer's
    /// offered rate.
    arr: Vec<f64>,
    pass: Vec<f64>,
    /// Watched ports that pass on other than 1: when none does, arrivals are the offered
    /// rates everywhere.
    passing: usize,
    /// Per channel: watched (congested or backlogged), and congested at its last update
    /// (`queue > 0` or arrivals above capacity: the transfers crossing it are fed by a
    /// backlog).
    watched: Vec<bool>,
    backlog: Vec<bool>,
    /// Watched ports, for the statistics.
    pub hot: usize,
    /// Per arena slot (a unit's `k`-th channel): the rate the unit's bytes arrive there
    /// (B/ns), as of the channel's last update.
    slot_arr: Vec<f64>,
    /// Queue pairs by connection (source, destination, NCCL channel): each channel is
    /// its own queue pair, as in the glue.
    pub index: ConnMap<u32>,
    pub qps: Vec<Qp>,
    /// Record transfers whose connection has no queue pair yet (it gets one when first
    /// marked, and they join it).
    orphans: ConnMap<Vec<u32>>,
    /// Per unit slot: its queue pair (`u32::MAX`: none), and its path's line rate.
    pub unit_qp: Vec<u32>,
    pub unit_line: Vec<f64>,
    /// Per unit slot: the connection of a record transfer (rate controlled).
    pub unit_pair: Vec<Option<QpKey>>,
    /// Per unit slot: watched ports on its path; the rate it offers (as the ports see
    /// it); the wire bytes it has put on the network while crossing a watched port (it
    /// never offers more than it has) as of `unit_t` (its [`Ev::Sent`] time is in
    /// `events`).
    unit_watch: Vec<u32>,
    unit_off: Vec<f64>,
    unit_sent: Vec<f64>,
    unit_t: Vec<u64>,
    unit_dirty: Vec<bool>,
    /// Record transfers that have put their last byte on the network since the last
    /// flush: the solver fills them with the streams from now on ([`Sim::cc_sent_all`]).
    sent_all: Vec<u32>,
    /// Aggregation streams on a port whose backlog line changed: their window rate is
    /// re-read ([`Sim::cc_window`]).
    window_dirty: Vec<u32>,
    /// Per channel: watched record transfers whose first hop it is (their NIC share
    /// changes with the transfers on it).
    first_watched: Vec<u32>,
    /// Work of the current instant: transfers whose offered rate may have changed,
    /// first hops whose transfers' NIC share changed, ports to re-evaluate, queue pairs
    /// to re-cap and whose next CNP to predict.
    dirty_units: Vec<u32>,
    nic_dirty: Vec<u32>,
    dirty_ports: Vec<u32>,
    /// The allocation of the last round's `dirty_ports`, for the next.
    spare_ports: Vec<u32>,
    port_dirty: Vec<bool>,
    recap_qps: Vec<u32>,
    predict_qps: Vec<u32>,
    /// The model's own events: at most one time per (kind, index), popped by (time,
    /// kind, index) (`src/replay/timers.rs`).
    events: Timers,
    /// Scratch list of a queue pair's marking terms ([`Sim::cc_terms`]), kept between
    /// uses: a CNP is predicted tens of millions of times on a large job.
    terms: Vec<(u32, f64, f64)>,
    /// The engine's next `CcTick`, if any.
    pub next_tick: Option<u64>,
    /// Wire bytes of a full packet (marks are counted per packet).
    pub packet: f64,
    /// Events processed (for the replay's statistics).
    pub ticks: u64,
}

/// A queue pair's connection: source, destination, NCCL channel.
pub type QpKey = (u32, u32, u32);

/// No queue pair.
pub(super) const NO_QP: u32 = u32::MAX;

/// `t` rounded up to a whole nanosecond no earlier than `now` (saturating far away).
fn at_or_after(now: u64, t: f64) -> u64 {
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
fn ceil_ns(t: f64) -> u64 {
    let whole = t as u64;
    whole + u64::from((whole as f64) < t)
}

/// Hand a work list's allocation back to its slot once processed (`std::mem::take`
/// left an empty one there; if the processing refilled it, that list stays).
fn recycle(slot: &mut Vec<u32>, mut list: Vec<u32>) {
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
    fn send_cnp(&mut self, q: u32, rx: u64, back: u64) {
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
    fn schedule(&mut self, kind: Ev, i: u32, t: u64) {
        self.events.set(kind.id(), i, t);
    }

    /// The time of the earliest event.
    fn earliest(&self) -> Option<u64> {
        self.events.peek().map(|(t, ..)| t)
    }

    /// Schedule queue pair `q`'s next timer or CNP arrival (none without transfers: a
    /// pair catches up when one starts).
    fn schedule_timer(&mut self, q: u32) {
        let t = if self.qps[q as usize].units.is_empty() {
            None
        } else {
            self.qp_next(q)
        };
        self.schedule(Ev::Timer, q, t.unwrap_or(u64::MAX));
    }

    fn mark_port(&mut self, c: u32) {
        if !self.port_dirty[c as usize] {
            self.port_dirty[c as usize] = true;
            self.dirty_ports.push(c);
        }
    }

    fn mark_unit(&mut self, u: u32) {
        if !self.unit_dirty[u as usize] {
            self.unit_dirty[u as usize] = true;
            self.dirty_units.push(u);
        }
    }

    /// Queue pair `q`'s rate or membership changed: each of its transfers offers anew.
    fn mark_pair_units(&mut self, q: u32) {
        for i in 0..self.qps[q as usize].units.len() {
            let v = self.qps[q as usize].units[i];
            self.mark_unit(v);
        }
    }

    /// Queue pair `q` gained or lost a transfer: its transfers offer anew, are re-capped,
    /// and its next CNP is predicted again.
    fn mark_pair_changed(&mut self, q: u32) {
        self.mark_pair_units(q);
        self.mark_recap(q);
        self.mark_predict(q);
    }

    fn mark_recap(&mut self, q: u32) {
        let x = &mut self.qps[q as usize];
        if !x.recap {
            x.recap = true;
            self.recap_qps.push(q);
        }
    }

    fn mark_predict(&mut self, q: u32) {
        let x = &mut self.qps[q as usize];
        if !x.predict {
            x.predict = true;
            self.predict_qps.push(q);
        }
    }

    /// Unit slot `u` holds a new transfer: its per-unit state starts afresh.
    fn reset_unit(&mut self, u: u32, now: u64) {
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
        }
        self.unit_qp[ui] = NO_QP;
        self.unit_pair[ui] = None;
        self.unit_watch[ui] = 0;
        self.unit_off[ui] = 0.0;
        self.unit_sent[ui] = 0.0;
        self.unit_t[ui] = now;
        self.schedule(Ev::Sent, u, u64::MAX);
        self.schedule(Ev::Window, u, u64::MAX);
    }

    /// Whether work is left for this instant.
    fn dirty(&self) -> bool {
        !(self.dirty_units.is_empty()
            && self.nic_dirty.is_empty()
            && self.dirty_ports.is_empty()
            && self.recap_qps.is_empty()
            && self.predict_qps.is_empty()
            && self.sent_all.is_empty()
            && self.window_dirty.is_empty())
    }

    /// Port `c`'s backlog at `t` (≥ its last update), on its current line.
    fn backlog_at(&self, c: usize, t: u64) -> f64 {
        if !self.watched[c] {
            return self.queue[c];
        }
        let dt = t.saturating_sub(self.q_time[c]) as f64;
        (self.queue[c] + (self.arr[c] - self.cap[c]) * dt).max(0.0)
    }
}

impl Sim<'_> {
    /// The first channel of unit `u`'s path (its NIC, for a host's transfer).
    fn first_hop(&self, u: u32) -> u32 {
        self.p.arena[self.units[u as usize].off as usize]
    }

    fn is_rec(&self, u: u32) -> bool {
        matches!(self.units[u as usize].owner, Owner::Rec(_))
    }

    /// Unit `u` was put on its channels (`Sim::add_unit`): it starts afresh and, if it
    /// crosses watched ports, they carry it from now on.
    pub(super) fn cc_added(&mut self, u: u32) {
        let Some(mut cc) = self.cc.take() else { return };
        let now = self.now;
        cc.reset_unit(u, now);
        let (off, len) = (self.units[u as usize].off, self.units[u as usize].len);
        let arena_len = self.p.arena.len();
        if cc.slot_arr.len() < arena_len {
            cc.slot_arr.resize(arena_len, 0.0);
        }
        // the ports' integration up to now must not count it
        cc.slot_arr[off as usize..(off + len) as usize].fill(0.0);
        let mut watch = 0;
        for k in off..off + len {
            let c = self.p.arena[k as usize];
            if cc.watched[c as usize] {
                watch += 1;
                cc.mark_port(c);
            }
            if cc.first_watched[c as usize] > 0 {
                cc.nic_dirty.push(c);
            }
        }
        if watch > 0 {
            self.cc_watch_unit(&mut cc, u, watch);
        }
        self.cc = Some(cc);
    }

    /// Unit `u` (not watched before) now crosses `watch` watched ports: its bytes start
    /// counting from now.
    fn cc_watch_unit(&self, cc: &mut State, u: u32, watch: u32) {
        let ui = u as usize;
        if cc.unit_watch[ui] == 0 {
            cc.unit_t[ui] = self.now;
            if self.is_rec(u) {
                cc.first_watched[self.first_hop(u) as usize] += 1;
            }
        }
        cc.unit_watch[ui] += watch;
        cc.mark_unit(u);
    }

    /// Unit `u` is about to leave its channels (`Sim::remove_unit`): the ports it crosses
    /// are brought up to now with it.
    pub(super) fn cc_removing(&mut self, u: u32) {
        let Some(mut cc) = self.cc.take() else { return };
        let ui = u as usize;
        let (off, len) = (self.units[ui].off, self.units[ui].len);
        if cc.unit_watch[ui] > 0 {
            self.cc_advance_path(&mut cc, u);
            for k in off..off + len {
                let c = self.p.arena[k as usize];
                if cc.watched[c as usize] {
                    cc.mark_port(c);
                }
            }
            if self.is_rec(u) {
                cc.first_watched[self.first_hop(u) as usize] -= 1;
            }
            cc.unit_watch[ui] = 0;
        }
        cc.schedule(Ev::Sent, u, u64::MAX);
        cc.schedule(Ev::Window, u, u64::MAX);
        cc.unit_dirty[ui] = false;
        for k in off..off + len {
            let c = self.p.arena[k as usize];
            if cc.first_watched[c as usize] > 0 {
                cc.nic_dirty.push(c);
            }
        }
        self.cc = Some(cc);
    }

    /// Record transfer `u` (from `src` to `dst`, its path's line rate `line`) started:
    /// it joins its pair's queue pair if the pair has one (a pair gets one when first
    /// marked) and is capped at its DCQCN share.
    pub(super) fn cc_start(&mut self, u: u32, conn: QpKey, line: f64) {
        let Some(mut cc) = self.cc.take() else { return };
        let ui = u as usize;
        cc.unit_line[ui] = line;
        cc.unit_pair[ui] = Some(conn);
        cc.unit_qp[ui] = NO_QP;
        cc.unit_sent[ui] = 0.0;
        match cc.index.get(&conn).copied() {
            Some(q) => {
                if cc.advance_qp(q, self.now) {
                    cc.mark_pair_units(q);
                }
                self.cc_join(&mut cc, q, u);
            }
            None => cc.orphans.entry(conn).or_default().push(u),
        }
        cc.mark_unit(u);
        self.cc = Some(cc);
    }

    /// Unit `u` joins queue pair `q`: the pair's rate is shared among one more.
    fn cc_join(&mut self, cc: &mut State, q: u32, u: u32) {
        cc.qps[q as usize].units.push(u);
        cc.unit_qp[u as usize] = q;
        cc.mark_pair_changed(q);
        cc.schedule_timer(q);
    }

    /// Transfer `u` finished: it leaves its queue pair, whose other transfers share the
    /// pair's rate among fewer.
    pub(super) fn cc_done(&mut self, u: u32) {
        let Some(mut cc) = self.cc.take() else { return };
        let ui = u as usize;
        if ui < cc.unit_qp.len() {
            if cc.unit_watch[ui] > 0 {
                // its marks up to now count for its pair
                self.cc_advance_path(&mut cc, u);
            }
            let q = cc.unit_qp[ui];
            cc.unit_qp[ui] = NO_QP;
            let pair = cc.unit_pair[ui].take();
            if q != NO_QP {
                let units = &mut cc.qps[q as usize].units;
                if let Some(k) = units.iter().position(|&x| x == u) {
                    units.swap_remove(k);
                }
                cc.mark_pair_changed(q);
                cc.schedule_timer(q);
            } else if let Some(pair) = pair {
                if let Some(v) = cc.orphans.get_mut(&pair) {
                    if let Some(k) = v.iter().position(|&x| x == u) {
                        v.swap_remove(k);
                    }
                    if v.is_empty() {
                        cc.orphans.remove(&pair);
                    }
                }
            }
        }
        self.cc = Some(cc);
    }

    /// Channel `c` is tight (found by the solver): watch its queue if its transfers offer
    /// more than it carries (caps can exceed a port while the NICs' shares do not).
    pub(super) fn cc_heat(&mut self, c: u32) {
        let Some(mut cc) = self.cc.take() else { return };
        let cu = c as usize;
        if cc.queued[cu] && !cc.watched[cu] {
            let offered: f64 = self.ch_units[cu]
                .iter()
                .map(|&(u, _)| self.offered_now(&cc, u))
                .sum();
            if offered > cc.cap[cu] * (1.0 + 1e-9) {
                cc.watched[cu] = true;
                cc.hot += 1;
                cc.queue[cu] = 0.0;
                cc.q_time[cu] = self.now;
                cc.arr[cu] = 0.0;
                cc.pass[cu] = 1.0;
                cc.backlog[cu] = false;
                for i in 0..self.ch_units[cu].len() {
                    let (u, k) = self.ch_units[cu][i];
                    cc.slot_arr[(self.units[u as usize].off + k) as usize] = 0.0;
                    self.cc_watch_unit(&mut cc, u, 1);
                }
                cc.mark_port(c);
            }
        }
        self.cc = Some(cc);
    }

    /// The solver gave unit `u` a new rate: an aggregation stream or fallback ring offers
    /// its solved rate to the ports it crosses.
    pub(super) fn cc_rate_changed(&mut self, u: u32) {
        let Some(cc) = self.cc.as_mut() else { return };
        if !matches!(self.units[u as usize].owner, Owner::Rec(_))
            && cc.unit_watch.get(u as usize).is_some_and(|&w| w > 0)
        {
            cc.mark_unit(u);
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
        let Some(mut cc) = self.cc.take() else { return };
        self.cc_window(&mut cc, u);
        self.cc = Some(cc);
    }

    /// Cap aggregation stream `u` at its window's rate over the round trip its packets
    /// see now: `w` packets per `RTT + D`, `D` the largest queueing delay (`Q / C`) among
    /// the watched ports on its tree (docs/model.md#dcqcn-rate-model, *Window-limited
    /// streams*). In the glue a worker sends a packet only when a result comes back, so a
    /// queue on the tree slows the whole aggregation (its results wait for every
    /// worker's packet) and it yields the port to the queue pairs beside it; at its
    /// solved rate it kept the queue up and starved them, which DCQCN then cut as well.
    /// **Approximation**: `D` is the largest single port's delay, not the longest
    /// chain's sum (exact with one backlogged port on the tree, short when an up and a
    /// down chain both queue); it is re-read when a port on the tree changes what it
    /// carries and every `RATE_DECREASE_INTERVAL` while one queues ([`Ev::Window`]), not
    /// followed continuously.
    fn cc_window(&mut self, cc: &mut State, u: u32) {
        let x = &self.units[u as usize];
        let Owner::Agg(a) = x.owner else { return };
        let g = &self.p.aggs[a as usize];
        if !g.window.is_finite() || g.rtt == 0 {
            return;
        }
        let now = self.now;
        let arena = &self.p.arena[x.off as usize..(x.off + x.len) as usize];
        let (mut wait, mut queues) = (0.0f64, false);
        for &c in arena {
            let cu = c as usize;
            if cc.watched[cu] {
                wait = wait.max(cc.backlog_at(cu, now) / self.p.ch_cap[cu]);
                queues |= cc.queue[cu] > 0.0 || cc.arr[cu] > cc.cap[cu];
            }
        }
        let rtt = g.rtt as f64;
        let cap = g.tree_cap.min(g.window * rtt / (rtt + wait));
        // while a port on the tree queues, its delay moves: read it again a decrease
        // interval on (the tick the model used until 2 Dec 2026)
        let t = if queues {
            now.saturating_add(cc.params.rate_decrease_ns.max(1))
        } else {
            u64::MAX
        };
        cc.schedule(Ev::Window, u, t);
        self.set_cap(u, cap);
    }

    /// Whether any channel on unit `u`'s path is congested or has a backlog.
    fn backlogged(&self, cc: &State, u: u32) -> bool {
        let x = &self.units[u as usize];
        (x.off..x.off + x.len).any(|k| cc.backlog[self.p.arena[k as usize] as usize])
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

    /// Count the bytes watched unit `u` put on the network up to now.
    fn cc_bring_sent(&self, cc: &mut State, u: u32) {
        let ui = u as usize;
        let now = self.now;
        if cc.unit_watch[ui] > 0 && cc.unit_pair[ui].is_some() {
            let dt = now.saturating_sub(cc.unit_t[ui]) as f64;
            let wire = self.units[ui].wire;
            let before = cc.unit_sent[ui];
            cc.unit_sent[ui] = (before + cc.unit_off[ui] * dt).min(wire);
            self.cc_check_sent_all(cc, u, before);
        }
        cc.unit_t[ui] = now;
    }

    /// Record transfer `u` had sent `before` bytes: if it has now put its last byte on
    /// the network, the solver re-solves it at the next flush, filling it with the
    /// streams ([`Sim::cc_sent_all`]; only a replay with aggregations, where that fill
    /// differs).
    fn cc_check_sent_all(&self, cc: &mut State, u: u32, before: f64) {
        let wire = self.units[u as usize].wire;
        if before < wire && cc.unit_sent[u as usize] >= wire && !self.p.aggs.is_empty() {
            cc.sent_all.push(u);
        }
    }

    /// Schedule the moment watched record transfer `u` has offered all its bytes.
    fn cc_schedule_sent(&self, cc: &mut State, u: u32) {
        let ui = u as usize;
        let wire = self.units[ui].wire;
        let (off, sent) = (cc.unit_off[ui], cc.unit_sent[ui]);
        let t = if cc.unit_watch[ui] > 0 && cc.unit_pair[ui].is_some() && off > 0.0 && sent < wire {
            at_or_after(self.now, cc.unit_t[ui] as f64 + (wire - sent) / off).max(self.now + 1)
        } else {
            u64::MAX
        };
        cc.schedule(Ev::Sent, u, t);
    }

    /// Unit `u`'s offered rate may have changed: if it did, the watched ports it crosses
    /// are brought up to now at the old rate and re-evaluated.
    fn cc_refresh_unit(&self, cc: &mut State, u: u32) {
        let ui = u as usize;
        cc.unit_dirty[ui] = false;
        if cc.unit_watch[ui] == 0 {
            return;
        }
        let new = self.offered_now(cc, u);
        let old = cc.unit_off[ui];
        if new != old {
            self.cc_bring_sent(cc, u);
            self.cc_advance_path(cc, u);
            let x = &self.units[ui];
            for k in x.off..x.off + x.len {
                let c = self.p.arena[k as usize];
                if cc.watched[c as usize] {
                    cc.mark_port(c);
                }
            }
            cc.unit_off[ui] = new;
        }
        self.cc_schedule_sent(cc, u);
    }

    /// Bring every watched port on unit `u`'s path up to now.
    fn cc_advance_path(&self, cc: &mut State, u: u32) {
        let x = &self.units[u as usize];
        for k in x.off..x.off + x.len {
            let c = self.p.arena[k as usize];
            if cc.watched[c as usize] {
                self.cc_advance_port(cc, c, self.now);
            }
        }
    }

    /// Where queue pair `q`'s CNP window opens at port `c` for a transfer whose path
    /// takes `lat` ns: packets reaching the receiver after the receiver's last CNP plus
    /// `cnp_interval` count, and they left the port a queueing delay and `lat` earlier.
    fn cc_open(&self, cc: &State, q: u32, c: usize, lat: u64) -> f64 {
        match cc.qps[q as usize].last_cnp {
            Some(t) => {
                (t + cc.params.cnp_interval_ns) as f64 - lat as f64 - cc.queue[c] / cc.cap[c]
            }
            None => f64::NEG_INFINITY,
        }
    }

    /// Bring watched port `c`'s backlog and the marks of the transfers crossing it up to
    /// `t`, at the arrival rates since its last update (exact: they held).
    fn cc_advance_port(&self, cc: &mut State, c: u32, t: u64) {
        let cu = c as usize;
        let t0 = cc.q_time[cu];
        if t <= t0 {
            return;
        }
        cc.ticks += 1;
        let dt = (t - t0) as f64;
        let q0 = cc.queue[cu];
        let g = cc.arr[cu] - cc.cap[cu];
        let q1 = q0 + g * dt;
        let red = cc.red[cu];
        if q0 > red.kmin || q1 > red.kmin {
            let scale = 1.0 / (cc.packet * MARK_SPACING);
            for i in 0..self.ch_units[cu].len() {
                let (u, k) = self.ch_units[cu][i];
                let ui = u as usize;
                let Some(pair) = cc.unit_pair.get(ui).copied().flatten() else {
                    continue;
                };
                let a = cc.slot_arr[(self.units[ui].off + k) as usize];
                if a <= 0.0 {
                    continue;
                }
                let lat = self.units[ui].latency;
                let q = match cc.unit_qp[ui] {
                    NO_QP => {
                        if red.integral(q0, q1, dt) <= 0.0 {
                            continue;
                        }
                        self.cc_make_qp(cc, pair, ui)
                    }
                    q => q,
                };
                let start = self.cc_open(cc, q, cu, lat).max(t0 as f64);
                if start >= t as f64 {
                    continue;
                }
                let qs = q0 + g * (start - t0 as f64);
                let m = red.integral(qs, q1, t as f64 - start) * a * scale;
                cc.qps[q as usize].marks += m;
            }
        }
        cc.queue[cu] = if q1 > 1e-6 { q1 } else { 0.0 };
        cc.q_time[cu] = t;
    }

    /// Pair `pair` is marked for the first time (its transfer in slot `ui`): its queue
    /// pair is made at the transfer's line rate and every transfer of the pair in flight
    /// joins it.
    fn cc_make_qp(&self, cc: &mut State, pair: QpKey, ui: usize) -> u32 {
        let q = cc.qp(pair, cc.unit_line[ui]);
        let units = cc.orphans.remove(&pair).unwrap_or_default();
        for u in units {
            let x = &self.units[u as usize];
            if x.rate > 0.0 && matches!(x.owner, Owner::Rec(_)) {
                cc.qps[q as usize].units.push(u);
                cc.unit_qp[u as usize] = q;
            }
        }
        cc.mark_pair_changed(q);
        q
    }

    /// The share of unit `u`'s offered bytes that reach the `k`-th channel of its path:
    /// the product of what each watched port before it passes on (`State::pass`).
    ///
    /// An aggregation stream's arena is its tree's sorted channel multiset, not a path:
    /// its order says nothing about which port comes first, and a channel two tree edges
    /// share is listed twice, so a product over it fed a backlogged port's `pass` back
    /// into its own arrivals (queues grew 3.6× per 4 µs until the clock overflowed). A
    /// stream loads every port of its tree at its solved, window-capped rate
    /// ([`Sim::cc_window`]).
    fn upstream(&self, cc: &State, u: u32, k: u32) -> f64 {
        if cc.passing == 0 || matches!(self.units[u as usize].owner, Owner::Agg(_)) {
            return 1.0;
        }
        let off = self.units[u as usize].off as usize;
        self.p.arena[off..off + k as usize]
            .iter()
            .filter(|&&c| cc.watched[c as usize])
            .map(|&c| cc.pass[c as usize])
            .product()
    }

    /// Re-evaluate watched port `c` now: its arrivals, what it passes on (the ports after
    /// it are re-evaluated when that changes, if `propagate`), whether it is congested
    /// (its queue pairs re-capped when that changes), its next event, and whether it is
    /// still watched.
    fn cc_recompute(&self, cc: &mut State, c: u32, propagate: bool) {
        let cu = c as usize;
        let now = self.now;
        self.cc_advance_port(cc, c, now);
        let mut sum = 0.0;
        let mut orphans = false;
        for i in 0..self.ch_units[cu].len() {
            let (u, k) = self.ch_units[cu][i];
            let ui = u as usize;
            let a = cc.unit_off[ui] * self.upstream(cc, u, k);
            cc.slot_arr[(self.units[ui].off + k) as usize] = a;
            sum += a;
            match cc.unit_qp[ui] {
                NO_QP => orphans |= a > 0.0 && cc.unit_pair[ui].is_some(),
                q => cc.mark_predict(q),
            }
            // the port's backlog line changes: a stream across it re-reads its window
            if matches!(self.units[ui].owner, Owner::Agg(_)) {
                cc.window_dirty.push(u);
            }
        }
        cc.arr[cu] = sum;
        let cap = cc.cap[cu];
        let q = cc.queue[cu];
        let congested = q > 0.0 || sum > cap * (1.0 + 1e-9);
        let pass = if congested && sum > 0.0 {
            cap / sum
        } else {
            1.0
        };
        let was = cc.pass[cu];
        if pass != was {
            match (was != 1.0, pass != 1.0) {
                (false, true) => cc.passing += 1,
                (true, false) => cc.passing -= 1,
                _ => {}
            }
            cc.pass[cu] = pass;
            if propagate {
                for i in 0..self.ch_units[cu].len() {
                    let (u, k) = self.ch_units[cu][i];
                    let x = &self.units[u as usize];
                    if matches!(x.owner, Owner::Agg(_)) {
                        continue; // not a path, and no port throttles it (`upstream`)
                    }
                    for j in x.off + k + 1..x.off + x.len {
                        let d = self.p.arena[j as usize];
                        if cc.watched[d as usize] {
                            self.cc_advance_port(cc, d, now);
                            cc.mark_port(d);
                        }
                    }
                }
            }
        }
        if congested != cc.backlog[cu] {
            cc.backlog[cu] = congested;
            for i in 0..self.ch_units[cu].len() {
                let u = self.ch_units[cu][i].0;
                if let Some(&q) = cc.unit_qp.get(u as usize) {
                    if q != NO_QP {
                        cc.mark_recap(q);
                    }
                }
            }
        }
        // its next event: the backlog runs dry, or reaches KMIN where a transfer without
        // a queue pair would be marked
        let red = cc.red[cu];
        let t = if q > 0.0 && sum < cap {
            at_or_after(now, now as f64 + q / (cap - sum))
        } else if orphans && q <= red.kmin && sum > cap {
            at_or_after(now, now as f64 + (red.kmin - q) / (sum - cap))
        } else {
            u64::MAX
        };
        let t = if t < u64::MAX { t.max(now + 1) } else { t };
        cc.schedule(Ev::Port, c, t);
        if !congested {
            self.cc_cool(cc, c);
        }
    }

    /// Stop watching port `c` (no backlog, arrivals within its capacity).
    fn cc_cool(&self, cc: &mut State, c: u32) {
        let cu = c as usize;
        cc.watched[cu] = false;
        cc.hot -= 1;
        cc.schedule(Ev::Port, c, u64::MAX);
        cc.arr[cu] = 0.0;
        for i in 0..self.ch_units[cu].len() {
            let u = self.ch_units[cu][i].0;
            let ui = u as usize;
            self.cc_bring_sent(cc, u);
            cc.unit_watch[ui] -= 1;
            if cc.unit_watch[ui] == 0 {
                if self.is_rec(u) {
                    cc.first_watched[self.first_hop(u) as usize] -= 1;
                }
                cc.schedule(Ev::Sent, u, u64::MAX);
            }
        }
    }

    /// Predict when queue pair `q` sends its next CNP (its marks reach one at the rates
    /// and backlogs of now) and schedule it.
    fn cc_predict(&self, cc: &mut State, q: u32) {
        cc.qps[q as usize].predict = false;
        let now = self.now;
        let mut terms = std::mem::take(&mut cc.terms);
        let t = self
            .cc_next_cnp(cc, q, &mut terms)
            .map_or(u64::MAX, |t| at_or_after(now, t));
        cc.terms = terms;
        let t = if t < u64::MAX {
            t.max(cc.qps[q as usize].not_before)
        } else {
            t
        };
        cc.schedule(Ev::Cnp, q, t);
    }

    /// The marking terms of queue pair `q`: per watched port one of its transfers
    /// crosses, (port, marks per unit of `∫p`, when its window opens there).
    fn cc_terms(&self, cc: &State, q: u32, terms: &mut Vec<(u32, f64, f64)>) {
        terms.clear();
        let scale = 1.0 / (cc.packet * MARK_SPACING);
        for &u in &cc.qps[q as usize].units {
            let x = &self.units[u as usize];
            for k in 0..x.len {
                let c = self.p.arena[(x.off + k) as usize];
                let cu = c as usize;
                if !cc.watched[cu] {
                    continue;
                }
                let a = cc.slot_arr[(x.off + k) as usize];
                if a > 0.0 {
                    let start = self.cc_open(cc, q, cu, x.latency).max(cc.q_time[cu] as f64);
                    terms.push((c, a * scale, start));
                }
            }
        }
    }

    /// When queue pair `q`'s marks reach one, at the arrival rates of now (`None`: not
    /// while they hold); `terms` is scratch space.
    fn cc_next_cnp(&self, cc: &State, q: u32, terms: &mut Vec<(u32, f64, f64)>) -> Option<f64> {
        let x = &cc.qps[q as usize];
        if x.units.is_empty() {
            return None;
        }
        let need = 1.0 - x.marks;
        self.cc_terms(cc, q, terms);
        if terms.is_empty() {
            return None;
        }
        if need <= 0.0 {
            return Some(self.now as f64);
        }
        if let [(c, r, start)] = terms[..] {
            return self.cc_solve_one(cc, c, r, start, need);
        }
        // several ports: the marks grow monotonically in time; search, then bisect
        let marks = |b: f64| -> f64 {
            terms
                .iter()
                .map(|&(c, r, start)| {
                    if b <= start {
                        return 0.0;
                    }
                    let cu = c as usize;
                    let g = cc.arr[cu] - cc.cap[cu];
                    let t0 = cc.q_time[cu] as f64;
                    let qs = cc.queue[cu] + g * (start - t0);
                    let qb = cc.queue[cu] + g * (b - t0);
                    r * cc.red[cu].integral(qs, qb, b - start)
                })
                .sum()
        };
        let lo0 = terms.iter().map(|t| t.2).fold(f64::INFINITY, f64::min);
        let mut lo = lo0.max(self.now as f64 - 1.0);
        if marks(lo.max(self.now as f64)) >= need {
            return Some(self.now as f64);
        }
        let mut step = 1000.0;
        let mut hi = lo + step;
        while marks(hi) < need {
            lo = hi;
            step *= 2.0;
            hi = lo + step;
            if step > 1e13 {
                return None;
            }
        }
        while hi - lo > 0.5 {
            let mid = 0.5 * (lo + hi);
            if marks(mid) >= need {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        Some(hi)
    }

    /// When marks collected at `r` per unit of `∫p` at port `c` from `start` reach
    /// `need`, its backlog moving at the rates of now.
    fn cc_solve_one(&self, cc: &State, c: u32, r: f64, start: f64, need: f64) -> Option<f64> {
        let cu = c as usize;
        let red = cc.red[cu];
        let g = cc.arr[cu] - cc.cap[cu];
        let t0 = cc.q_time[cu] as f64;
        let qs = cc.queue[cu] + g * (start - t0);
        if g.abs() < 1e-12 {
            let p = red.p(qs);
            return (p > 0.0).then(|| start + need / (r * p));
        }
        // ∫ p dt = (cum(Q(b)) − cum(Q(start))) / g
        let y = red.cum(qs) + need * g / r;
        if y <= 0.0 {
            return None;
        }
        let qb = red.cum_inv(y);
        Some(start + (qb - qs) / g)
    }

    /// Queue pair `q`'s predicted CNP is due: its ports are brought up to now, and the
    /// CNP leaves if its marks reached one.
    fn cc_on_cnp(&self, cc: &mut State, q: u32) {
        let now = self.now;
        let mut terms = std::mem::take(&mut cc.terms);
        self.cc_terms(cc, q, &mut terms);
        for &(c, ..) in &terms {
            self.cc_advance_port(cc, c, now);
        }
        cc.terms = terms;
        if cc.qps[q as usize].marks >= 1.0 - 1e-9 {
            // the marked packet waited at the port marking it most now
            let mut best: Option<(f64, u32, u64)> = None;
            for &u in &cc.qps[q as usize].units {
                let x = &self.units[u as usize];
                for k in 0..x.len {
                    let c = self.p.arena[(x.off + k) as usize] as usize;
                    if !cc.watched[c] {
                        continue;
                    }
                    let w = cc.slot_arr[(x.off + k) as usize] * cc.red[c].p(cc.queue[c]);
                    if best.is_none_or(|b| w > b.0) {
                        best = Some((w, c as u32, x.latency));
                    }
                }
            }
            if let Some((_, c, lat)) = best {
                let wait = (cc.queue[c as usize] / cc.cap[c as usize]) as u64;
                cc.send_cnp(q, now + wait + lat, lat);
                cc.schedule_timer(q);
            }
        } else {
            cc.qps[q as usize].not_before = now + 1;
        }
        cc.mark_predict(q);
    }

    /// Queue pair `q`'s CNP arrived or its timer fired. Its entry is still scheduled
    /// ([`Sim::cc_events`] leaves it): this must end by scheduling it anew.
    fn cc_on_timer(&self, cc: &mut State, q: u32) {
        if cc.advance_qp(q, self.now) {
            cc.mark_pair_units(q);
            cc.mark_recap(q);
        }
        cc.schedule_timer(q);
    }

    /// The model's events due now (`EventKind::CcTick`), and after them those due before
    /// the engine's next event as long as they leave the transfers' rates as they are
    /// (a re-cap that changes one returns to the engine, which re-solves).
    pub(super) fn cc_tick(&mut self) {
        match self.cc.as_mut() {
            Some(cc) if cc.next_tick == Some(self.now) => cc.next_tick = None,
            _ => return, // superseded, or the model is off
        }
        loop {
            self.cc_events();
            if !self.solved() {
                return;
            }
            self.cc_flush();
            if !self.solved() {
                return;
            }
            let engine = self.next_event_time();
            let Some(cc) = self.cc.as_mut() else { return };
            if cc.dirty() {
                return;
            }
            let Some(t) = cc.earliest() else { return };
            // the engine's events of an instant come before the model's
            if engine.is_some_and(|e| e <= t) || t > super::engine::TIME_HORIZON_NS {
                return;
            }
            self.now = t;
        }
    }

    /// Process the model's events due now.
    fn cc_events(&mut self) {
        let Some(mut cc) = self.cc.take() else { return };
        let now = self.now;
        // (popping an event unschedules it: its handler may schedule it again)
        while let Some((t, kind, i)) = cc.events.peek() {
            if t > now {
                break;
            }
            // a queue pair's timer reschedules itself whatever it does ([`State::
            // schedule_timer`]): its entry is moved from the top to its next time in one
            // step instead of popped and pushed again (the timers' order is total, so
            // where an entry sits does not change what pops next)
            if Ev::ALL[kind] != Ev::Timer {
                cc.events.pop();
            }
            match Ev::ALL[kind] {
                Ev::Port => {
                    if cc.watched[i as usize] {
                        cc.mark_port(i);
                    }
                }
                Ev::Sent => {
                    self.cc_bring_sent(&mut cc, i);
                    // it was scheduled for this moment: what rounding left is sent too
                    let before = cc.unit_sent[i as usize];
                    cc.unit_sent[i as usize] = self.units[i as usize].wire;
                    self.cc_check_sent_all(&mut cc, i, before);
                    cc.mark_unit(i);
                }
                Ev::Cnp => self.cc_on_cnp(&mut cc, i),
                Ev::Timer => self.cc_on_timer(&mut cc, i),
                Ev::Window => {
                    self.cc_window(&mut cc, i);
                }
            }
        }
        self.cc = Some(cc);
    }

    /// Bring the model's state up to now after a batch of events: offered rates, the
    /// ports they load, caps, predicted CNPs.
    fn cc_flush(&mut self) {
        // nothing to bring up to date (most calls: the engine settles every batch of its
        // events, the model's tick loop after every instant of its own)
        if !self.cc.as_ref().is_some_and(|cc| cc.dirty()) {
            return;
        }
        let Some(mut cc) = self.cc.take() else { return };
        for _ in 0..SETTLE_ROUNDS {
            let mut nics = std::mem::take(&mut cc.nic_dirty);
            nics.sort_unstable();
            nics.dedup();
            for &c in &nics {
                for i in 0..self.ch_units[c as usize].len() {
                    let v = self.ch_units[c as usize][i].0;
                    if cc.unit_watch[v as usize] > 0 && self.is_rec(v) && self.first_hop(v) == c {
                        cc.mark_unit(v);
                    }
                }
            }
            recycle(&mut cc.nic_dirty, nics);
            let units = std::mem::take(&mut cc.dirty_units);
            for &u in &units {
                self.cc_refresh_unit(&mut cc, u);
            }
            cc.dirty_units = units;
            cc.dirty_units.clear();
            for round in 0..=UPSTREAM_ROUNDS {
                if cc.dirty_ports.is_empty() {
                    break;
                }
                // (re-evaluating a port marks the ports after it: they go to a fresh list)
                let spare = std::mem::take(&mut cc.spare_ports);
                let mut ports = std::mem::replace(&mut cc.dirty_ports, spare);
                for &c in &ports {
                    cc.port_dirty[c as usize] = false;
                }
                for &c in &ports {
                    if cc.watched[c as usize] {
                        self.cc_recompute(&mut cc, c, round < UPSTREAM_ROUNDS);
                    }
                }
                ports.clear();
                cc.spare_ports = ports;
            }
            let recap = std::mem::take(&mut cc.recap_qps);
            for &q in &recap {
                cc.qps[q as usize].recap = false;
                self.cc_recap(&cc, q);
            }
            recycle(&mut cc.recap_qps, recap);
            let mut streams = std::mem::take(&mut cc.window_dirty);
            streams.sort_unstable();
            streams.dedup();
            for &u in &streams {
                self.cc_window(&mut cc, u);
            }
            recycle(&mut cc.window_dirty, streams);
            if cc.dirty_units.is_empty() && cc.nic_dirty.is_empty() && cc.dirty_ports.is_empty() {
                break;
            }
        }
        let predict = std::mem::take(&mut cc.predict_qps);
        for &q in &predict {
            self.cc_predict(&mut cc, q);
        }
        recycle(&mut cc.predict_qps, predict);
        // transfers whose last byte is on the network: filled with the streams now
        let sent = std::mem::take(&mut cc.sent_all);
        for &u in &sent {
            if cc.unit_pair[u as usize].is_some() {
                self.fresh.push(u);
            }
        }
        recycle(&mut cc.sent_all, sent);
        self.cc = Some(cc);
    }

    /// After a batch of events: bring the model up to date and re-solve the rates, until
    /// neither changes the other (or [`SETTLE_ROUNDS`]), then schedule the model's next
    /// event.
    pub(super) fn settle(&mut self) {
        if self.cc.is_none() {
            self.resolve();
            return;
        }
        let mut left = true;
        for _ in 0..SETTLE_ROUNDS {
            self.cc_flush();
            self.resolve();
            left = self.cc.as_ref().is_some_and(|cc| cc.dirty());
            if !left {
                break;
            }
        }
        let Some(cc) = self.cc.as_mut() else { return };
        let t = if left {
            Some(self.now + 1)
        } else {
            cc.earliest()
        };
        if let Some(t) = t {
            if cc.next_tick.is_none_or(|n| t < n || n < self.now) {
                cc.next_tick = Some(t);
                self.push(t, EventKind::CcTick, 0, 0);
            }
        }
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
    fn red_marks_from_kmin_linearly_to_pmax_at_kmax_then_always() {
        let red = Red::for_rate(BitsPerSec(100_000_000_000));
        // 100 Gb/s: KMIN 400 KB, KMAX 1,600 KB, PMAX 0.2 (what `ns3 emit` writes)
        assert_eq!(red.p(400_000.0), 0.0);
        assert!((red.p(1_000_000.0) - 0.1).abs() < 1e-12);
        assert_eq!(red.p(1_600_000.0), 1.0);
        for q in [0.0, 399_999.0, 500_000.0, 1_599_999.0, 2_000_000.0] {
            assert_eq!(
                red.p(q),
                crate::netmodel::mark_probability(q, BitsPerSec(100_000_000_000))
            );
        }
    }

    /// `∫ p(Q(s)) ds` summed in 1 ns slices, the queue linear from `qa` to `qb`.
    fn brute_integral(red: &Red, qa: f64, qb: f64, dt: u64) -> f64 {
        (0..dt)
            .map(|i| red.p(qa + (qb - qa) * (i as f64 + 0.5) / dt as f64))
            .sum()
    }

    #[test]
    fn the_marks_of_a_linear_backlog_are_its_exact_integral_across_kmin_and_kmax() {
        let red = Red::for_rate(BitsPerSec(100_000_000_000));
        // growing through both thresholds, draining through them, running dry (given as
        // the negative value its line reaches), flat above KMAX and below KMIN
        for (qa, qb, dt) in [
            (300_000.0, 2_000_000.0, 200_000u64),
            (2_000_000.0, 300_000.0, 150_000),
            (500_000.0, -100_000.0, 80_000),
            (1_700_000.0, 1_700_000.0, 1_000),
            (100.0, 100.0, 1_000),
        ] {
            let exact = red.integral(qa, qb, dt as f64);
            let brute = brute_integral(&red, qa, qb, dt);
            assert!(
                (exact - brute).abs() <= 1e-3 * brute.max(1.0),
                "{qa} -> {qb} over {dt}: {exact} vs {brute}"
            );
        }
    }

    #[test]
    fn where_the_marks_reach_a_level_inverts_their_cumulative() {
        let red = Red::for_rate(BitsPerSec(100_000_000_000));
        for q in [400_001.0, 900_000.0, 1_599_999.0, 1_600_000.0, 5_000_000.0] {
            let back = red.cum_inv(red.cum(q));
            assert!((back - q).abs() < 1e-3, "{q} -> {back}");
        }
    }

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
