//! The DCQCN model's congestion and notification points on the network
//! ([`Net`]'s units and channels): a transfer joining or leaving, ports brought up to
//! date and re-evaluated, what each transfer offers, queue pairs re-capped, aggregation
//! streams' window rates, and the model's events and flush of one instant (module docs
//! of `dcqcn`).

use super::state::{
    at_or_after, recycle, Ev, State, MARK_SPACING, NO_QP, SETTLE_ROUNDS, UPSTREAM_ROUNDS,
};
use crate::replay::rates::QpKey;
use crate::replay::solver::{Net, Owner};

impl Net {
    /// The first channel of unit `u`'s path (its NIC, for a host's transfer).
    pub(super) fn first_hop(&self, u: u32) -> u32 {
        self.arena[self.units[u as usize].off as usize]
    }

    pub(super) fn is_rec(&self, u: u32) -> bool {
        matches!(self.units[u as usize].owner, Owner::Rec(_))
    }

    /// Unit `u` was put on its channels (`Net::add_unit`): it starts afresh and, if it
    /// crosses watched ports, they carry it from now on.
    pub(super) fn cc_added(&mut self, cc: &mut State, u: u32) {
        let now = self.now;
        cc.reset_unit(u, now);
        let (off, len) = (self.units[u as usize].off, self.units[u as usize].len);
        let arena_len = self.arena.len();
        if cc.slot_arr.len() < arena_len {
            cc.slot_arr.resize(arena_len, 0.0);
        }
        // the ports' integration up to now must not count it
        cc.slot_arr[off as usize..(off + len) as usize].fill(0.0);
        let mut watch = 0;
        for k in off..off + len {
            let c = self.arena[k as usize];
            if cc.watched[c as usize] {
                watch += 1;
                cc.mark_port(c);
            }
            if cc.first_watched[c as usize] > 0 {
                cc.nic_dirty.push(c);
            }
        }
        if watch > 0 {
            self.cc_watch_unit(cc, u, watch);
        }
    }

    /// Unit `u` (not watched before) now crosses `watch` watched ports: its bytes start
    /// counting from now.
    pub(super) fn cc_watch_unit(&self, cc: &mut State, u: u32, watch: u32) {
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

    /// Unit `u` is about to leave its channels (`Net::remove_unit`): the ports it crosses
    /// are brought up to now with it.
    pub(super) fn cc_removing(&mut self, cc: &mut State, u: u32) {
        let ui = u as usize;
        let (off, len) = (self.units[ui].off, self.units[ui].len);
        if cc.unit_watch[ui] > 0 {
            self.cc_advance_path(cc, u);
            for k in off..off + len {
                let c = self.arena[k as usize];
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
            let c = self.arena[k as usize];
            if cc.first_watched[c as usize] > 0 {
                cc.nic_dirty.push(c);
            }
        }
    }

    /// Record transfer `u` (from `src` to `dst`, its path's line rate `line`) started:
    /// it joins its pair's queue pair if the pair has one (a pair gets one when first
    /// marked) and is capped at its DCQCN share.
    pub(super) fn cc_start(&mut self, cc: &mut State, u: u32, conn: QpKey, line: f64) {
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
                self.cc_join(cc, q, u);
            }
            None => cc.orphans.entry(conn).or_default().push(u),
        }
        cc.mark_unit(u);
    }

    /// Unit `u` joins queue pair `q`: the pair's rate is shared among one more.
    pub(super) fn cc_join(&mut self, cc: &mut State, q: u32, u: u32) {
        cc.qps[q as usize].units.push(u);
        cc.unit_qp[u as usize] = q;
        cc.mark_pair_changed(q);
        cc.schedule_timer(q);
    }

    /// Transfer `u` finished: it leaves its queue pair, whose other transfers share the
    /// pair's rate among fewer.
    pub(super) fn cc_done(&mut self, cc: &mut State, u: u32) {
        let ui = u as usize;
        if ui < cc.unit_qp.len() {
            if cc.unit_watch[ui] > 0 {
                // its marks up to now count for its pair
                self.cc_advance_path(cc, u);
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
    }

    /// Channel `c` is tight (found by the solver): watch its queue if its transfers offer
    /// more than it carries (caps can exceed a port while the NICs' shares do not).
    pub(super) fn cc_heat(&self, cc: &mut State, c: u32) {
        let cu = c as usize;
        if cc.queued[cu] && !cc.watched[cu] {
            let offered: f64 = self.ch_units[cu]
                .iter()
                .map(|&(u, _)| self.offered_now(cc, u))
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
                    self.cc_watch_unit(cc, u, 1);
                }
                cc.mark_port(c);
            }
        }
    }

    /// The solver gave unit `u` a new rate: an aggregation stream or fallback ring offers
    /// its solved rate to the ports it crosses.
    pub(super) fn cc_rate_changed(&self, cc: &mut State, u: u32) {
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
    /// for ([`Net::ina_first`]). Without this, a stream starting at a port where a pipeline
    /// send's last 18 KB were queued took the whole port for its 814 µs and the send ended
    /// after it (docs/model.md#dcqcn-rate-model, *Window-limited streams*).
    pub(super) fn cc_sent_all(&self, cc: &State, u: u32) -> bool {
        let ui = u as usize;
        let x = &self.units[ui];
        matches!(x.owner, Owner::Rec(_))
            && cc.unit_pair.get(ui).is_some_and(|p| p.is_some())
            && cc.unit_sent[ui] >= x.wire
    }

    /// An aggregation stream started: cap it at what its window allows with the queues
    /// now on its tree ([`Net::cc_window`]).
    pub(super) fn cc_stream_start(&mut self, cc: &mut State, u: u32) {
        self.cc_window(cc, u);
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
    pub(super) fn cc_window(&mut self, cc: &mut State, u: u32) {
        let x = &self.units[u as usize];
        let Owner::Agg(_) = x.owner else { return };
        let g = cc.stream.get(u as usize).copied().unwrap_or_default();
        if !g.window.is_finite() || g.rtt == 0 {
            return;
        }
        let now = self.now;
        let arena = &self.arena[x.off as usize..(x.off + x.len) as usize];
        let (mut wait, mut queues) = (0.0f64, false);
        for &c in arena {
            let cu = c as usize;
            if cc.watched[cu] {
                wait = wait.max(cc.backlog_at(cu, now) / self.ch_cap[cu]);
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
    pub(super) fn backlogged(&self, cc: &State, u: u32) -> bool {
        let x = &self.units[u as usize];
        (x.off..x.off + x.len).any(|k| cc.backlog[self.arena[k as usize] as usize])
    }

    /// Give queue pair `q`'s transfers their caps: the pair's rate shared equally, or the
    /// line rate where a backlog feeds them.
    pub(super) fn cc_recap(&mut self, cc: &State, q: u32) {
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
    pub(super) fn offered(&self, cc: &State, u: u32) -> f64 {
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
        let first = self.arena[x.off as usize] as usize;
        let nic = self.ch_cap[first] / self.ch_units[first].len().max(1) as f64;
        dcqcn.min(nic).min(line)
    }

    /// The rate unit `u` offers now: 0 once it has put all its bytes on the network.
    pub(super) fn offered_now(&self, cc: &State, u: u32) -> f64 {
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
    pub(super) fn cc_bring_sent(&self, cc: &mut State, u: u32) {
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
    /// streams ([`Net::cc_sent_all`]; only a replay with aggregations, where that fill
    /// differs).
    pub(super) fn cc_check_sent_all(&self, cc: &mut State, u: u32, before: f64) {
        let wire = self.units[u as usize].wire;
        if before < wire && cc.unit_sent[u as usize] >= wire && cc.has_aggs {
            cc.sent_all.push(u);
        }
    }

    /// Schedule the moment watched record transfer `u` has offered all its bytes.
    pub(super) fn cc_schedule_sent(&self, cc: &mut State, u: u32) {
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
    pub(super) fn cc_refresh_unit(&self, cc: &mut State, u: u32) {
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
                let c = self.arena[k as usize];
                if cc.watched[c as usize] {
                    cc.mark_port(c);
                }
            }
            cc.unit_off[ui] = new;
        }
        self.cc_schedule_sent(cc, u);
    }

    /// Bring every watched port on unit `u`'s path up to now.
    pub(super) fn cc_advance_path(&self, cc: &mut State, u: u32) {
        let x = &self.units[u as usize];
        for k in x.off..x.off + x.len {
            let c = self.arena[k as usize];
            if cc.watched[c as usize] {
                self.cc_advance_port(cc, c, self.now);
            }
        }
    }

    /// Where queue pair `q`'s CNP window opens at port `c` for a transfer whose path
    /// takes `lat` ns: packets reaching the receiver after the receiver's last CNP plus
    /// `cnp_interval` count, and they left the port a queueing delay and `lat` earlier.
    pub(super) fn cc_open(&self, cc: &State, q: u32, c: usize, lat: u64) -> f64 {
        match cc.qps[q as usize].last_cnp {
            Some(t) => {
                (t + cc.params.cnp_interval_ns) as f64 - lat as f64 - cc.queue[c] / cc.cap[c]
            }
            None => f64::NEG_INFINITY,
        }
    }

    /// Bring watched port `c`'s backlog and the marks of the transfers crossing it up to
    /// `t`, at the arrival rates since its last update (exact: they held).
    pub(super) fn cc_advance_port(&self, cc: &mut State, c: u32, t: u64) {
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
    pub(super) fn cc_make_qp(&self, cc: &mut State, pair: QpKey, ui: usize) -> u32 {
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
    /// ([`Net::cc_window`]).
    pub(super) fn upstream(&self, cc: &State, u: u32, k: u32) -> f64 {
        if cc.passing == 0 || matches!(self.units[u as usize].owner, Owner::Agg(_)) {
            return 1.0;
        }
        let off = self.units[u as usize].off as usize;
        self.arena[off..off + k as usize]
            .iter()
            .filter(|&&c| cc.watched[c as usize])
            .map(|&c| cc.pass[c as usize])
            .product()
    }

    /// Re-evaluate watched port `c` now: its arrivals, what it passes on (the ports after
    /// it are re-evaluated when that changes, if `propagate`), whether it is congested
    /// (its queue pairs re-capped when that changes), its next event, and whether it is
    /// still watched.
    pub(super) fn cc_recompute(&self, cc: &mut State, c: u32, propagate: bool) {
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
                        let d = self.arena[j as usize];
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
    pub(super) fn cc_cool(&self, cc: &mut State, c: u32) {
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

    /// Process the model's events due now.
    pub(super) fn cc_events(&mut self, cc: &mut State) {
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
                    self.cc_bring_sent(cc, i);
                    // it was scheduled for this moment: what rounding left is sent too
                    let before = cc.unit_sent[i as usize];
                    cc.unit_sent[i as usize] = self.units[i as usize].wire;
                    self.cc_check_sent_all(cc, i, before);
                    cc.mark_unit(i);
                }
                Ev::Cnp => self.cc_on_cnp(cc, i),
                Ev::Timer => self.cc_on_timer(cc, i),
                Ev::Window => {
                    self.cc_window(cc, i);
                }
            }
        }
    }

    /// Bring the model's state up to now after a batch of events: offered rates, the
    /// ports they load, caps, predicted CNPs.
    pub(super) fn cc_flush(&mut self, cc: &mut State) {
        // nothing to bring up to date (most calls: the engine settles every batch of its
        // events, the model's tick loop after every instant of its own)
        if !cc.dirty() {
            return;
        }
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
                self.cc_refresh_unit(cc, u);
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
                        self.cc_recompute(cc, c, round < UPSTREAM_ROUNDS);
                    }
                }
                ports.clear();
                cc.spare_ports = ports;
            }
            let recap = std::mem::take(&mut cc.recap_qps);
            for &q in &recap {
                cc.qps[q as usize].recap = false;
                self.cc_recap(cc, q);
            }
            recycle(&mut cc.recap_qps, recap);
            let mut streams = std::mem::take(&mut cc.window_dirty);
            streams.sort_unstable();
            streams.dedup();
            for &u in &streams {
                self.cc_window(cc, u);
            }
            recycle(&mut cc.window_dirty, streams);
            if cc.dirty_units.is_empty() && cc.nic_dirty.is_empty() && cc.dirty_ports.is_empty() {
                break;
            }
        }
        let predict = std::mem::take(&mut cc.predict_qps);
        for &q in &predict {
            self.cc_predict(cc, q);
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
    }
}
