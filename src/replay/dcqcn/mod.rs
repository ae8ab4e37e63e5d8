//! The replayer's DCQCN rate model (`RateModel::Dcqcn`, `docs/model.md` "DCQCN rate
//! dynamics"): what RoCE's congestion control does to flows that share a switch port,
//! as fluid state evaluated only where ports are congested.
//!
//! - **Reaction point** ([`Rp`], `rp.rs`), one per queue pair (source, destination, NCCL channel:
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
//! ([`Net::cc_window`]: one port's, not a chain's sum, re-read every
//! `RATE_DECREASE_INTERVAL` while a port on its tree queues), and a host transfer whose
//! bytes all wait in the queues is filled with the streams ([`Net::cc_sent_all`]);
//! fallback rings keep their line-rate cap (their window is not modelled).
//! A transfer offers at most its path's line rate: a NIC faster than a slower link on its
//! path does not overrun that link's port in the model (it does in the glue).
//!
//! Files: `rp.rs` (reaction point, RED), `state.rs` (the model's state), `ports.rs`
//! (congestion points and the flush of an instant), `feedback.rs` (CNPs and timers);
//! this file the model behind the engine's [`RateControl`] seam.

mod feedback;
mod ports;
mod rp;
mod state;

pub use rp::Rp;

use super::rates::{RateControl, Started};
use super::solver::{Net, TIME_HORIZON_NS};
use super::ReplayOptions;
use crate::topology::Topology;
use state::{State, SETTLE_ROUNDS};

/// The exact DCQCN model (module docs), the reference the faster models are measured
/// against.
pub(super) struct Dcqcn {
    st: State,
}

impl Dcqcn {
    /// The model of `topo`'s ports under `opts` (its DCQCN parameters and packet size);
    /// `has_aggs`: the trace has aggregations.
    pub fn new(topo: &Topology, opts: &ReplayOptions, has_aggs: bool) -> Dcqcn {
        let mut st = State::new(topo, opts.dcqcn);
        st.packet = (opts.payload.0 + opts.header.0) as f64;
        st.has_aggs = has_aggs;
        Dcqcn { st }
    }

    /// Re-solve the rates (aggregation streams, and the host transfers whose bytes all
    /// wait in the queues, first); an aggregation stream or ring offers its solved rate
    /// to the model's ports, and a tight channel may be congested.
    fn resolve(&mut self, net: &mut Net) {
        let st = &self.st;
        let sent_all = |n: &Net, u: u32| n.cc_sent_all(st, u);
        if !net.resolve(Some(&sent_all)) {
            return;
        }
        let (units, channels) = net.component();
        for &u in units {
            net.cc_rate_changed(&mut self.st, u);
        }
        for &c in channels {
            net.cc_heat(&mut self.st, c);
        }
    }
}

impl RateControl for Dcqcn {
    fn started(&mut self, net: &mut Net, u: u32, what: Started) {
        net.cc_added(&mut self.st, u);
        match what {
            Started::Transfer { conn, line } => net.cc_start(&mut self.st, u, conn, line),
            Started::Stream(w) => {
                self.st.stream[u as usize] = w;
                net.cc_stream_start(&mut self.st, u);
            }
            Started::Ring => {}
        }
    }

    fn finished(&mut self, net: &mut Net, u: u32) {
        net.cc_done(&mut self.st, u);
    }

    fn removing(&mut self, net: &mut Net, u: u32) {
        net.cc_removing(&mut self.st, u);
    }

    /// Bring the model up to date and re-solve the rates, until neither changes the
    /// other (or [`SETTLE_ROUNDS`]); then the model's next event.
    fn settle(&mut self, net: &mut Net) -> Option<u64> {
        let mut left = true;
        for _ in 0..SETTLE_ROUNDS {
            net.cc_flush(&mut self.st);
            self.resolve(net);
            left = self.st.dirty();
            if !left {
                break;
            }
        }
        let cc = &mut self.st;
        let t = if left {
            Some(net.now + 1)
        } else {
            cc.earliest()
        }?;
        if cc.next_tick.is_none_or(|n| t < n || n < net.now) {
            cc.next_tick = Some(t);
            return Some(t);
        }
        None
    }

    /// The model's events due now, and after them those due before the engine's next
    /// event as long as they leave the transfers' rates as they are (a re-cap that
    /// changes one returns to the engine, which re-solves).
    fn tick(&mut self, net: &mut Net, engine_next: Option<u64>) {
        match self.st.next_tick {
            Some(t) if t == net.now => self.st.next_tick = None,
            _ => return, // superseded
        }
        loop {
            net.cc_events(&mut self.st);
            if !net.solved() {
                return;
            }
            net.cc_flush(&mut self.st);
            if !net.solved() {
                return;
            }
            let cc = &self.st;
            if cc.dirty() {
                return;
            }
            let Some(t) = cc.earliest() else { return };
            // the engine's events of an instant come before the model's
            if engine_next.is_some_and(|e| e <= t) || t > TIME_HORIZON_NS {
                return;
            }
            net.now = t;
        }
    }
}
