//! The fast planner: greedy by benefit per slot, then local search, on the cost model.
//!
//! 1. Start with every group on its host algorithm (a group that must aggregate takes its
//!    first feasible option).
//! 2. Greedy: groups in decreasing order of *benefit per slot* — what their best option
//!    saves alone (exposed time, host minus best) over the slots it reserves — each takes
//!    the option that minimises (predicted iteration time, exposed communication) given
//!    the groups placed so far, keeping slots and tree quota; among equals the one whose
//!    switches carry the fewest trees so far (least-loaded roots, which spreads trees of
//!    the DP groups over the candidate switches).
//! 3. Local search until nothing improves or the time limit: *relocate* (one group to
//!    another of its options) and *swap* (two groups exchange their tree roots).

use super::model::{Eval, Model};
use super::options::OptKind;
use std::collections::HashMap;
use std::time::Instant;

/// (iteration, exposed) with a relative tolerance: `a` is strictly better than `b`.
fn better(a: &Eval, b: &Eval) -> bool {
    let tol = 1e-9 * b.t.abs().max(1.0);
    if a.t < b.t - tol {
        return true;
    }
    a.t <= b.t + tol && a.exposed < b.exposed - 1e-9 * b.exposed.abs().max(1.0)
}

/// Objective key: `iteration` compares (T, exposed), `exposed` compares (exposed, T).
pub(super) struct Searcher<'a> {
    m: &'a Model,
    exposed_first: bool,
    scratch: Vec<f64>,
    deadline: Instant,
    /// Evaluations made.
    pub evals: u64,
}

impl<'a> Searcher<'a> {
    pub(super) fn new(m: &'a Model, exposed_first: bool, deadline: Instant) -> Self {
        Searcher {
            m,
            exposed_first,
            scratch: vec![0.0; m.channels],
            deadline,
            evals: 0,
        }
    }

    fn eval(&mut self, a: &[usize]) -> Eval {
        self.evals += 1;
        let mut e = self.m.evaluate(a, &mut self.scratch);
        if self.exposed_first {
            std::mem::swap(&mut e.t, &mut e.exposed);
        }
        e
    }

    fn out_of_time(&self) -> bool {
        Instant::now() >= self.deadline
    }

    /// Trees per switch under `a`, over all groups (the least-loaded tie-break).
    fn trees(&self, a: &[usize]) -> HashMap<u32, u32> {
        let mut t = HashMap::new();
        for (g, &o) in a.iter().enumerate() {
            for s in &self.m.opts[g][o].switches {
                *t.entry(s.0).or_default() += 1;
            }
        }
        t
    }

    /// Greedy construction.
    pub(super) fn greedy(&mut self) -> Option<Vec<usize>> {
        let m = self.m;
        let n = m.groups.len();
        let mut a: Vec<usize> = (0..n).map(|g| super::model::host_index(&m.opts[g], &m.groups[g])).collect();
        // groups without a host option (must aggregate) first, then benefit per slot
        let mut order: Vec<(bool, f64, usize)> = (0..n)
            .filter(|&g| m.opts[g].len() > 1 || !is_host(m, g, 0))
            .map(|g| {
                let host = m.vals[g][a[g]].exposed;
                let (best, slots) = m.vals[g]
                    .iter()
                    .zip(&m.opts[g])
                    .map(|(v, o)| (v.exposed, o.slots.max(1) as f64 * o.switches.len().max(1) as f64))
                    .fold((f64::INFINITY, 1.0), |b, x| if x.0 < b.0 { x } else { b });
                (is_host(m, g, a[g]), -(host - best) / slots, g)
            })
            .collect();
        order.sort_by(|x, y| x.0.cmp(&y.0).then(x.1.total_cmp(&y.1)).then(x.2.cmp(&y.2)));
        // required groups start on an option that fits
        for &(host_ok, _, g) in &order {
            if !host_ok && !self.place_first_feasible(&mut a, g) {
                return None;
            }
        }
        for &(_, _, g) in &order {
            if self.out_of_time() {
                break;
            }
            self.best_move(&mut a, g);
        }
        Some(a)
    }

    fn place_first_feasible(&mut self, a: &mut [usize], g: usize) -> bool {
        for o in 0..self.m.opts[g].len() {
            a[g] = o;
            if self.m.feasible(a) {
                return true;
            }
        }
        false
    }

    /// Move group `g` to its best option given the others; true when it changed.
    fn best_move(&mut self, a: &mut [usize], g: usize) -> bool {
        let cur = a[g];
        let mut best = self.eval(a);
        let mut best_o = cur;
        let trees = self.trees(a);
        let load = |o: usize, m: &Model| -> u32 {
            m.opts[g][o].switches.iter().map(|s| trees.get(&s.0).copied().unwrap_or(0)).sum()
        };
        let mut best_load = load(cur, self.m);
        for o in 0..self.m.opts[g].len() {
            if o == cur {
                continue;
            }
            a[g] = o;
            if !self.m.feasible(a) {
                continue;
            }
            let e = self.eval(a);
            let l = load(o, self.m);
            if better(&e, &best) || (!better(&best, &e) && l < best_load) {
                best = e;
                best_o = o;
                best_load = l;
            }
        }
        a[g] = best_o;
        best_o != cur
    }

    /// Relocate and swap moves until nothing improves or time runs out.
    pub(super) fn local_search(&mut self, a: &mut [usize]) {
        let n = self.m.groups.len();
        loop {
            let mut improved = false;
            for g in 0..n {
                if self.out_of_time() {
                    return;
                }
                if self.m.opts[g].len() > 1 {
                    let before = self.eval(a);
                    let cur = a[g];
                    self.best_move(a, g);
                    let after = self.eval(a);
                    if better(&after, &before) {
                        improved = true;
                    } else if a[g] != cur && better(&before, &after) {
                        a[g] = cur;
                    }
                }
            }
            improved |= self.swaps(a);
            if !improved || self.out_of_time() {
                return;
            }
        }
    }

    /// Two groups on trees exchange roots (same form and slots) when that improves.
    fn swaps(&mut self, a: &mut [usize]) -> bool {
        let m = self.m;
        let n = m.groups.len();
        let root = |g: usize, o: usize| match &m.opts[g][o].kind {
            OptKind::Tree { root, form, .. } => Some((*root, *form, m.opts[g][o].slots)),
            _ => None,
        };
        let mut improved = false;
        for g in 0..n {
            let Some((rg, fg, kg)) = root(g, a[g]) else { continue };
            for h in g + 1..n {
                if self.out_of_time() {
                    return improved;
                }
                let Some((rh, fh, kh)) = root(h, a[h]) else { continue };
                if rg == rh {
                    continue;
                }
                let og = (0..m.opts[g].len()).find(|&o| root(g, o) == Some((rh, fg, kg)));
                let oh = (0..m.opts[h].len()).find(|&o| root(h, o) == Some((rg, fh, kh)));
                let (Some(og), Some(oh)) = (og, oh) else { continue };
                let before = self.eval(a);
                let (cg, ch) = (a[g], a[h]);
                a[g] = og;
                a[h] = oh;
                if m.feasible(a) && better(&self.eval(a), &before) {
                    improved = true;
                    break;
                }
                a[g] = cg;
                a[h] = ch;
            }
        }
        improved
    }
}

fn is_host(m: &Model, g: usize, o: usize) -> bool {
    matches!(m.opts[g][o].kind, OptKind::Host | OptKind::NvLink)
}
