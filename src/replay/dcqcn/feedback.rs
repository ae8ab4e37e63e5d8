//! The DCQCN model's feedback: when a queue pair's expected marks reach one (its next
//! CNP, solved for in closed form over the ports it crosses), the CNP's sending, and its
//! reaction point's timers (module docs of `dcqcn`).

use super::state::{at_or_after, Ev, State, MARK_SPACING};
use crate::replay::solver::Net;

impl Net {
    /// Predict when queue pair `q` sends its next CNP (its marks reach one at the rates
    /// and backlogs of now) and schedule it.
    pub(super) fn cc_predict(&self, cc: &mut State, q: u32) {
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
    pub(super) fn cc_terms(&self, cc: &State, q: u32, terms: &mut Vec<(u32, f64, f64)>) {
        terms.clear();
        let scale = 1.0 / (cc.packet * MARK_SPACING);
        for &u in &cc.qps[q as usize].units {
            let x = &self.units[u as usize];
            for k in 0..x.len {
                let c = self.arena[(x.off + k) as usize];
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
    pub(super) fn cc_next_cnp(
        &self,
        cc: &State,
        q: u32,
        terms: &mut Vec<(u32, f64, f64)>,
    ) -> Option<f64> {
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
    pub(super) fn cc_solve_one(
        &self,
        cc: &State,
        c: u32,
        r: f64,
        start: f64,
        need: f64,
    ) -> Option<f64> {
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
    pub(super) fn cc_on_cnp(&self, cc: &mut State, q: u32) {
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
                    let c = self.arena[(x.off + k) as usize] as usize;
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
    /// ([`Net::cc_events`] leaves it): this must end by scheduling it anew.
    pub(super) fn cc_on_timer(&self, cc: &mut State, q: u32) {
        if cc.advance_qp(q, self.now) {
            cc.mark_pair_units(q);
            cc.mark_recap(q);
        }
        cc.schedule_timer(q);
    }
}
