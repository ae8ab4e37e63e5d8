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
use super::options::{Form, OptKind};
use std::collections::HashMap;
use std::time::Instant;

/// `a` is strictly better than `b`: objective, then pressure ([`Eval::pressure`]), then
/// exposed communication, each with a relative tolerance.
fn better(a: &Eval, b: &Eval) -> bool {
    let cmp = |x: f64, y: f64| {
        let tol = 1e-9 * y.abs().max(1e-9);
        if x < y - tol {
            Some(true)
        } else if x > y + tol {
            Some(false)
        } else {
            None
        }
    };
    cmp(a.t, b.t)
        .or_else(|| cmp(a.pressure, b.pressure))
        .or_else(|| cmp(a.exposed, b.exposed))
        .unwrap_or(false)
}

/// The heuristic: both constructions, each improved by local search and pair moves, the
/// better kept. `None`: groups that must aggregate cannot all fit. The search is bounded
/// by `budget` (its evaluations of the model: the first construction and its search may
/// use half, the second the rest, then the perturbations) so the same inputs give the
/// same plan however loaded the machine; `deadline` is only a safety net
/// ([`Searcher::hit_deadline`] says when it stopped the search).
pub(super) fn run(m: &Model, exposed_first: bool, budget: Budget) -> (Option<Vec<usize>>, bool) {
    let mut h = Searcher::new(m, exposed_first, budget);
    let mut best: Option<(Vec<usize>, Eval)> = None;
    for spread in [false, true] {
        h.limit = if spread {
            budget.evals
        } else {
            budget.evals / 2
        };
        let start = if spread { h.spread() } else { h.greedy() };
        let Some(mut a) = start else { continue };
        h.search(&mut a);
        let e = h.eval(&a);
        if e.feasible && best.as_ref().is_none_or(|b| better(&e, &b.1)) {
            best = Some((a, e));
        }
    }
    h.limit = budget.evals;
    let Some((mut a, mut e)) = best else {
        return (None, h.hit_deadline);
    };
    h.perturb(&mut a, &mut e, 24);
    (Some(a), h.hit_deadline)
}

/// What bounds a search: its work, and a wall-clock safety net.
#[derive(Clone, Copy, Debug)]
pub(super) struct Budget {
    /// Model evaluations at most.
    pub evals: u64,
    /// The time limit's deadline: reached only when the work budget is too large for it.
    pub deadline: std::time::Instant,
}

/// Groups of one class and stage: what a class move moves together.
type Block = (crate::record::Class, Option<u32>);

/// A small deterministic generator (SplitMix64) for the perturbations.
struct Mix(u64);

impl Mix {
    fn next(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (((z ^ (z >> 31)) as u128 * n as u128) >> 64) as usize
    }
}

/// Local search and pair moves from `a`, a start that fits (the feasibility program's,
/// when neither construction found one: [`super::feasibility`]); with whether the
/// deadline stopped it.
pub(super) fn improve(
    m: &Model,
    exposed_first: bool,
    budget: Budget,
    mut a: Vec<usize>,
) -> (Vec<usize>, bool) {
    let mut h = Searcher::new(m, exposed_first, budget);
    h.search(&mut a);
    (a, h.hit_deadline)
}

/// Objective key: `iteration` compares (T, exposed), `exposed` compares (exposed, T).
pub(super) struct Searcher<'a> {
    m: &'a Model,
    exposed_first: bool,
    scratch: Vec<f64>,
    deadline: Instant,
    /// Evaluations made.
    pub evals: u64,
    /// Evaluations allowed so far (the current phase's share of the budget).
    limit: u64,
    /// The deadline, not the budget, stopped the search.
    pub hit_deadline: bool,
}

impl<'a> Searcher<'a> {
    pub(super) fn new(m: &'a Model, exposed_first: bool, budget: Budget) -> Self {
        Searcher {
            m,
            exposed_first,
            scratch: vec![0.0; m.channels],
            deadline: budget.deadline,
            evals: 0,
            limit: budget.evals,
            hit_deadline: false,
        }
    }

    fn eval(&mut self, a: &[usize]) -> Eval {
        self.evals += 1;
        let mut e = self.m.evaluate(a, &mut self.scratch);
        if self.exposed_first {
            std::mem::swap(&mut e.t, &mut e.exposed);
            e.pressure = 0.0;
        }
        e
    }

    /// The budget is spent — or, as a safety net only, the deadline passed (recorded).
    fn out_of_time(&mut self) -> bool {
        if self.evals >= self.limit {
            return true;
        }
        if self.hit_deadline || Instant::now() >= self.deadline {
            self.hit_deadline = true;
        }
        self.hit_deadline
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
        let mut a: Vec<usize> = (0..n)
            .map(|g| super::model::host_index(&m.opts[g], &m.groups[g]))
            .collect();
        // groups without a host option (must aggregate) first, then benefit per slot
        let mut order: Vec<(bool, f64, usize)> = (0..n)
            .filter(|&g| m.opts[g].len() > 1 || !is_host(m, g, 0))
            .map(|g| {
                let host = m.vals[g][a[g]].exposed;
                let (best, slots) = m.vals[g]
                    .iter()
                    .zip(&m.opts[g])
                    .map(|(v, o)| {
                        (
                            v.exposed,
                            o.slots.max(1) as f64 * o.switches.len().max(1) as f64,
                        )
                    })
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

    /// Second construction: every group that can aggregate on its least-loaded tree
    /// (fewest trees already on its switches, then its fastest option alone), keeping
    /// slots and quota; the others on the host. Local search then brings back to the
    /// host what the network cannot carry.
    pub(super) fn spread(&mut self) -> Option<Vec<usize>> {
        let m = self.m;
        let n = m.groups.len();
        let mut a: Vec<usize> = (0..n)
            .map(|g| super::model::host_index(&m.opts[g], &m.groups[g]))
            .collect();
        let mut trees: HashMap<u32, u32> = HashMap::new();
        let mut usage = m.usage(&a);
        for g in 0..n {
            // out of time, the groups left stay on the host (those without a host option
            // are still placed: the assignment must fit)
            if is_host(m, g, a[g]) && self.out_of_time() {
                continue;
            }
            let mut best: Option<(u32, f64, usize)> = None;
            for (o, opt) in m.opts[g].iter().enumerate() {
                if !opt.is_ina() {
                    continue;
                }
                let load: u32 = opt
                    .switches
                    .iter()
                    .map(|s| trees.get(&s.0).copied().unwrap_or(0))
                    .sum();
                let key = (load, m.vals[g][o].exposed, o);
                if usage.fits(m, &a, g, o) && best.is_none_or(|b| (key.0, key.1) < (b.0, b.1)) {
                    best = Some(key);
                }
            }
            match best {
                Some((_, _, o)) => {
                    usage.apply(m, &mut a, g, o);
                    for s in &m.opts[g][o].switches {
                        *trees.entry(s.0).or_default() += 1;
                    }
                }
                None if !is_host(m, g, a[g]) => {
                    if !self.place_first_feasible(&mut a, g) {
                        return None;
                    }
                    usage = m.usage(&a);
                }
                None => {}
            }
        }
        Some(a)
    }

    /// Pairs of groups of one class and stage move together, each among its `k` fastest
    /// options alone (and its current one), when that improves: what one group cannot
    /// gain alone because the other sets the iteration time.
    pub(super) fn pairs(&mut self, a: &mut [usize], k: usize) -> bool {
        let m = self.m;
        let n = m.groups.len();
        let short = |g: usize, cur: usize| -> Vec<usize> {
            let mut o: Vec<usize> = (0..m.opts[g].len()).collect();
            o.sort_by(|&x, &y| {
                m.vals[g][x]
                    .exposed
                    .total_cmp(&m.vals[g][y].exposed)
                    .then(x.cmp(&y))
            });
            o.truncate(k);
            if !o.contains(&cur) {
                o.push(cur);
            }
            o
        };
        let mut improved = false;
        for g in 0..n {
            if m.opts[g].len() < 2 {
                continue;
            }
            for h in g + 1..n {
                if m.opts[h].len() < 2
                    || m.groups[h].class != m.groups[g].class
                    || m.groups[h].stage != m.groups[g].stage
                {
                    continue;
                }
                if self.out_of_time() {
                    return improved;
                }
                let mut best = self.eval(a);
                let (cg, ch) = (a[g], a[h]);
                let (mut bg, mut bh) = (cg, ch);
                for og in short(g, cg) {
                    for oh in short(h, ch) {
                        if (og, oh) == (cg, ch) {
                            continue;
                        }
                        a[g] = og;
                        a[h] = oh;
                        // joint check: each against the other's new option
                        if !(m.fits_move(a, h, oh) && m.fits_move(a, g, og)) {
                            continue;
                        }
                        let e = self.eval(a);
                        if better(&e, &best) {
                            best = e;
                            bg = og;
                            bh = oh;
                        }
                    }
                }
                a[g] = bg;
                a[h] = bh;
                improved |= (bg, bh) != (cg, ch);
            }
        }
        improved
    }

    /// Every group of one class and stage moves at once: all to the host, or all to
    /// trees spread over the least-loaded roots (fewest trees already on their switches,
    /// then fastest alone), when that improves. Plateaus one group cannot leave alone —
    /// eight embedding groups whose tail load only drops when most of them aggregate —
    /// are left this way.
    fn class_moves(&mut self, a: &mut [usize]) -> bool {
        let m = self.m;
        let mut blocks: Vec<(Block, Vec<usize>)> = Vec::new();
        for g in (0..m.groups.len()).filter(|&g| m.opts[g].len() > 1) {
            let key = (m.groups[g].class, m.groups[g].stage);
            match blocks.iter_mut().find(|b| b.0 == key) {
                Some(b) => b.1.push(g),
                None => blocks.push((key, vec![g])),
            }
        }
        let mut improved = false;
        for (_, gs) in blocks.iter().filter(|b| b.1.len() > 1) {
            if self.out_of_time() {
                break;
            }
            let before = self.eval(a);
            let keep: Vec<usize> = gs.iter().map(|&g| a[g]).collect();
            // all to the host, or all onto trees of one form (or Rina), spread
            let forms = [None, Some(Form::Hierarchical), Some(Form::RootOnly)];
            for (to_host, form) in [(true, None)]
                .into_iter()
                .chain(forms.iter().map(|&f| (false, f)))
            {
                let mut trees = self.trees(a);
                for &g in gs {
                    for s in &m.opts[g][a[g]].switches {
                        *trees.entry(s.0).or_default() -= 1;
                    }
                    a[g] = super::model::host_index(&m.opts[g], &m.groups[g]);
                }
                if !to_host {
                    for &g in gs {
                        let mut best: Option<((u32, u32), f64, usize)> = None;
                        for (o, opt) in m.opts[g].iter().enumerate() {
                            let fits_form = match (&opt.kind, form) {
                                (OptKind::Tree { form: f, .. }, Some(want)) => *f == want,
                                (_, Some(_)) => false,
                                _ => true,
                            };
                            if !opt.is_ina() || !fits_form || !m.fits_move(a, g, o) {
                                continue;
                            }
                            // trees already at its root first (the lower switches of a
                            // tree are every tree's), then on all its switches
                            let at =
                                |s: &crate::units::NodeId| trees.get(&s.0).copied().unwrap_or(0);
                            let root = match &opt.kind {
                                OptKind::Tree { root, .. } => at(root),
                                _ => 0,
                            };
                            let load: u32 = opt.switches.iter().map(at).sum();
                            let key = ((root, load), m.vals[g][o].exposed, o);
                            if best.is_none_or(|b| (key.0, key.1) < (b.0, b.1)) {
                                best = Some(key);
                            }
                        }
                        if let Some((_, _, o)) = best {
                            a[g] = o;
                            for s in &m.opts[g][o].switches {
                                *trees.entry(s.0).or_default() += 1;
                            }
                        }
                    }
                }
                // the other groups settle around the moved block before it is judged
                let mut b = a.to_vec();
                self.local_search(&mut b);
                let e = self.eval(&b);
                if e.feasible && better(&e, &before) {
                    a.copy_from_slice(&b);
                    improved = true;
                    break;
                }
                for (i, &g) in gs.iter().enumerate() {
                    a[g] = keep[i];
                }
            }
        }
        improved
    }

    /// Iterated local search: up to `tries` times (or until the deadline), move two or
    /// three groups with a choice to random options, search locally from there, and keep
    /// the result when it is better (a way out of the local optima relocate and swap
    /// stop in). Deterministic: a fixed seed, and the same tries whenever they fit the
    /// time limit.
    fn perturb(&mut self, a: &mut Vec<usize>, best: &mut Eval, tries: u32) {
        let m = self.m;
        let free: Vec<usize> = (0..m.groups.len())
            .filter(|&g| m.opts[g].len() > 1)
            .collect();
        if free.is_empty() {
            return;
        }
        let mut rng = Mix(0x5EED);
        for _ in 0..tries {
            if self.out_of_time() {
                return;
            }
            let mut b = a.clone();
            // two or three groups, or every group of one class and stage, to random options
            let picked: Vec<usize> = if rng.next(2) == 0 {
                let g0 = free[rng.next(free.len())];
                let key = (m.groups[g0].class, m.groups[g0].stage);
                free.iter()
                    .copied()
                    .filter(|&g| (m.groups[g].class, m.groups[g].stage) == key)
                    .collect()
            } else {
                (0..2 + rng.next(2))
                    .map(|_| free[rng.next(free.len())])
                    .collect()
            };
            for g in picked {
                let o = rng.next(m.opts[g].len());
                if m.fits_move(&b, g, o) {
                    b[g] = o;
                }
            }
            self.search(&mut b);
            let e = self.eval(&b);
            if e.feasible && better(&e, best) {
                *a = b;
                *best = e;
            }
        }
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

    /// Move group `g` to its best option given the others; true when it changed. First
    /// each *kind* (host, a tree, Rina) at its largest slot level that fits, then the other
    /// slot levels of the best kind: a third of the evaluations of trying every option.
    fn best_move(&mut self, a: &mut [usize], g: usize) -> bool {
        let m = self.m;
        let cur = a[g];
        // (evaluation, option, trees on its switches) of the best so far
        let first = self.eval(a);
        let trees = self.trees(a);
        let load = |o: usize| -> u32 {
            m.opts[g][o]
                .switches
                .iter()
                .map(|s| trees.get(&s.0).copied().unwrap_or(0))
                .sum()
        };
        let mut best = (first, cur, load(cur));
        let kinds = self.kinds(g);
        let try_option =
            |s: &mut Self, a: &mut [usize], o: usize, best: &mut (Eval, usize, u32)| {
                if o == cur || !m.fits_move(a, g, o) {
                    return;
                }
                a[g] = o;
                let e = s.eval(a);
                let l = load(o);
                if better(&e, &best.0) || (!better(&best.0, &e) && l < best.2) {
                    *best = (e, o, l);
                }
            };
        for (i, kind) in kinds.iter().enumerate() {
            if i % 32 == 31 && self.out_of_time() {
                break;
            }
            // largest level that fits (options of a kind come largest first)
            if let Some(&o) = kind.iter().find(|&&o| o == cur || m.fits_move(a, g, o)) {
                try_option(self, a, o, &mut best);
            }
        }
        if let Some(kind) = kinds.iter().find(|k| k.contains(&best.1)) {
            for &o in kind {
                try_option(self, a, o, &mut best);
            }
        }
        a[g] = best.1;
        best.1 != cur
    }

    /// The options of `g` grouped by what they do (equal but for the slots), each group
    /// largest slot level first.
    fn kinds(&self, g: usize) -> Vec<Vec<usize>> {
        let opts = &self.m.opts[g];
        let mut out: Vec<Vec<usize>> = Vec::new();
        for o in 0..opts.len() {
            match out.iter_mut().find(|k| opts[k[0]].kind == opts[o].kind) {
                Some(k) => k.push(o),
                None => out.push(vec![o]),
            }
        }
        for k in &mut out {
            k.sort_by_key(|&o| std::cmp::Reverse(opts[o].slots));
        }
        out
    }

    /// Local search and pair moves, alternating until neither improves or time runs out.
    fn search(&mut self, a: &mut [usize]) {
        loop {
            self.local_search(a);
            let paired = self.pairs(a, 4);
            if !(self.class_moves(a) || paired) || self.out_of_time() {
                break;
            }
        }
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
            let Some((rg, fg, kg)) = root(g, a[g]) else {
                continue;
            };
            for h in g + 1..n {
                if self.out_of_time() {
                    return improved;
                }
                let Some((rh, fh, kh)) = root(h, a[h]) else {
                    continue;
                };
                if rg == rh {
                    continue;
                }
                let og = (0..m.opts[g].len()).find(|&o| root(g, o) == Some((rh, fg, kg)));
                let oh = (0..m.opts[h].len()).find(|&o| root(h, o) == Some((rg, fh, kh)));
                let (Some(og), Some(oh)) = (og, oh) else {
                    continue;
                };
                let before = self.eval(a);
                let (cg, ch) = (a[g], a[h]);
                a[g] = og;
                a[h] = oh;
                let fits = m.fits_move(a, h, oh) && m.fits_move(a, g, og);
                if fits && better(&self.eval(a), &before) {
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
    matches!(m.opts[g][o].kind, OptKind::Host(_) | OptKind::NvLink)
}
