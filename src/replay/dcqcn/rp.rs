//! DCQCN's reaction point ([`Rp`]: a queue pair's rate, target and alpha under CNPs and
//! timers) and RED's marking profile ([`Red`]) of one port, in closed form (module docs
//! of `dcqcn`).

use crate::netmodel::{bytes_per_ns, red_params, DcqcnParams};
use crate::units::BitsPerSec;

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
    pub(super) fn decrease_after(&self, t: u64, p: &DcqcnParams) -> u64 {
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

/// RED's marking profile of one port (bytes): probability 0 up to KMIN, rising linearly
/// to PMAX at KMAX, 1 above ([`crate::netmodel::mark_probability`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Red {
    pub(super) kmin: f64,
    pub(super) kmax: f64,
    pub(super) pmax: f64,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::BitsPerSec;

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
}
