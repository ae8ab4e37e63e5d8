//! The joint planner: which job's groups get the switches' aggregators when several jobs
//! share every pool.
//!
//! It builds on the single-job planner ([`crate::plan`], through
//! [`crate::pipeline::make_plan`]) and adds only the coupling between jobs:
//!
//! 1. **Candidates per job.** Each job is planned alone (its own groups, options, cost
//!    model, verified by replaying it) under pools of `P`, `P/2`, `P/4` and `P/8` slots per
//!    switch, plus the all-host plan. Each candidate carries its replayed iteration time
//!    alone and its *peak* reservation on every switch: the most its groups that may be
//!    active together reserve there at once (the plan's reuse rule,
//!    [`crate::trace::planned::concurrent_sets`]).
//! 2. **Joint choice.** One candidate per job such that on every switch the jobs' peaks
//!    add up to at most the pool `P` — jobs run concurrently, so any two jobs' groups are
//!    taken to be active together — minimising the objective: the slowest job's iteration
//!    ([`Objective::Slowest`]), the sum of slowdowns ([`Objective::SumSlowdown`]), or, for
//!    the fair variant, the sum of slowdowns with every job's slowdown at most a bound
//!    (when no choice meets it, the smallest largest slowdown). A slowdown is a
//!    candidate's time over the job's full-pool plan alone. The choice is exact
//!    (branch and bound over the candidates) up to [`MAX_NODES`] search nodes.
//!
//! **Approximation, named:** the choice prices switch memory, not the links the jobs share:
//! each candidate's time is its replay *alone*. The cluster replay that follows measures
//! both; `jobs.csv` puts the predicted slowdown (`predicted_slowdown`) beside the replayed
//! one. A job's pool is uniform over switches in its candidates (a job given `P/2`
//! gets `P/2` on its private ToRs too), so the choice is exact among these candidates,
//! not among every per-switch split.

use super::spec::Objective;
use crate::formats::plan_json::PlanFile;
use crate::pipeline::{make_plan, Job, PipelineError};
use crate::plan::PlanOptions;
use crate::trace::{InaMode, TraceOptions};
use crate::units::NodeId;
use std::collections::BTreeMap;

/// Search nodes the joint choice may visit before it keeps its best choice unproven.
pub const MAX_NODES: u64 = 2_000_000;

/// The pool fractions each job is planned under.
pub const LEVELS: [u32; 4] = [1, 2, 4, 8];

/// One plan a job may run.
#[derive(Clone, Debug)]
pub struct Candidate {
    /// The pool (slots per switch) it was planned under; `None`: every group on the host.
    pub level: Option<u32>,
    /// The plan (`None` for all-host).
    pub plan: Option<PlanFile>,
    /// Its iteration time alone, ns (replayed by the planner's verification when it ran).
    pub time_ns: f64,
    /// Its peak reservation per switch.
    pub peaks: BTreeMap<NodeId, u32>,
}

/// The trace options that lower a candidate (`base`: the job's options at this policy).
pub fn lowering(base: &TraceOptions, c: &Candidate) -> TraceOptions {
    let mut o = base.clone();
    match (&c.plan, c.level) {
        (Some(p), Some(level)) => {
            o.ina.slots = level;
            o = crate::trace::planned::lowering_options(&o, p);
        }
        _ => {
            o.ina.mode = InaMode::Off;
            o.plan = None;
        }
    }
    o
}

/// The candidates of one job (the full pool first, the all-host plan last), verified
/// by replays under `model`.
pub fn candidates(
    job: &Job,
    base: &TraceOptions,
    pool: u32,
    po: &PlanOptions,
    model: crate::replay::RateModel,
) -> Result<Vec<Candidate>, PipelineError> {
    let mut out: Vec<Candidate> = Vec::new();
    let mut host_time = None;
    for div in LEVELS {
        let level = pool / div;
        if level == 0 || out.iter().any(|c| c.level == Some(level)) {
            continue;
        }
        let mut o = base.clone();
        o.ina.set_mode(InaMode::Planned);
        o.ina.slots = level;
        let mut lpo = po.clone();
        lpo.settings.slots = level;
        let p = make_plan(job, &o, &lpo, model)?;
        let (time, host) = match &p.verification {
            Some(v) => (v.replayed_ns, v.host_replayed_ns),
            None => (p.prediction.iteration_ns, p.prediction.host_iteration_ns),
        };
        host_time.get_or_insert(host);
        out.push(Candidate {
            level: Some(level),
            peaks: peaks(&p),
            plan: Some(p),
            time_ns: time,
        });
    }
    out.push(Candidate {
        level: None,
        plan: None,
        time_ns: host_time.unwrap_or(f64::INFINITY),
        peaks: BTreeMap::new(),
    });
    Ok(out)
}

/// A plan's peak reservation per switch: the largest sum over groups that may be active
/// together (the plan's reuse rule).
pub fn peaks(p: &PlanFile) -> BTreeMap<NodeId, u32> {
    let windows: Vec<(f64, f64)> = p.groups.iter().map(|g| g.active.interval()).collect();
    let mut out: BTreeMap<NodeId, u32> = BTreeMap::new();
    for set in crate::trace::planned::concurrent_sets(&windows) {
        let mut sum: BTreeMap<NodeId, u32> = BTreeMap::new();
        for g in set {
            for &(sw, k) in &p.groups[g].reservations {
                *sum.entry(sw).or_default() += k;
            }
        }
        for (sw, k) in sum {
            let e = out.entry(sw).or_default();
            *e = (*e).max(k);
        }
    }
    out
}

/// What the joint choice minimises.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Goal {
    /// The planner's objective.
    Objective(Objective),
    /// The sum of slowdowns with each at most this bound.
    Fair(f64),
}

/// The joint choice: one candidate index per job.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    /// Per job, the chosen candidate.
    pub pick: Vec<usize>,
    /// Whether the search finished (the choice is optimal among the candidates).
    pub proven: bool,
    /// What the fair variant had to give up, if anything.
    pub note: Option<String>,
}

/// One candidate per job within every switch's pool, best for `goal` (see the module docs).
pub fn choose(cands: &[Vec<Candidate>], pool: u32, goal: Goal) -> Choice {
    let alone: Vec<f64> = cands
        .iter()
        .map(|c| c.first().map_or(1.0, |x| x.time_ns.max(1.0)))
        .collect();
    let slow = |j: usize, c: usize| cands[j][c].time_ns / alone[j];
    match goal {
        Goal::Objective(Objective::Slowest) => search(
            cands,
            pool,
            &|j, c| cands[j][c].time_ns,
            Agg::Max,
            &slow,
            None,
        ),
        Goal::Objective(Objective::SumSlowdown) => search(
            cands,
            pool,
            &slow,
            Agg::Sum,
            &|j, c| cands[j][c].time_ns,
            None,
        ),
        Goal::Fair(bound) => {
            let fair = search(cands, pool, &slow, Agg::Sum, &slow, Some(bound));
            if fair.pick.len() == cands.len() {
                return fair;
            }
            let mut c = search(cands, pool, &slow, Agg::Max, &slow, None);
            c.note = Some(format!(
                "no choice keeps every job within slowdown {bound} (predicted): the smallest largest slowdown instead"
            ));
            c
        }
    }
}

#[derive(Clone, Copy)]
enum Agg {
    Max,
    Sum,
}

impl Agg {
    fn add(self, a: f64, b: f64) -> f64 {
        match self {
            Agg::Max => a.max(b),
            Agg::Sum => a + b,
        }
    }
}

struct Search<'a> {
    cands: &'a [Vec<Candidate>],
    pool: u32,
    cost: &'a dyn Fn(usize, usize) -> f64,
    agg: Agg,
    tie: &'a dyn Fn(usize, usize) -> f64,
    bound: Option<f64>,
    /// Per job, the smallest cost of its candidates (the bound for jobs not yet chosen).
    least: Vec<f64>,
    used: BTreeMap<NodeId, u32>,
    pick: Vec<usize>,
    best: Option<(f64, f64, Vec<usize>)>,
    nodes: u64,
}

/// Branch and bound over jobs in order, each job's candidates cheapest first; a choice
/// is kept when it beats the best by the primary cost, or ties it and beats it by the
/// secondary sum (`tie`).
fn search(
    cands: &[Vec<Candidate>],
    pool: u32,
    cost: &dyn Fn(usize, usize) -> f64,
    agg: Agg,
    tie: &dyn Fn(usize, usize) -> f64,
    bound: Option<f64>,
) -> Choice {
    let least = (0..cands.len())
        .map(|j| {
            (0..cands[j].len())
                .filter(|&c| bound.is_none_or(|b| ok_bound(cands, j, c, b)))
                .map(|c| cost(j, c))
                .fold(f64::INFINITY, f64::min)
        })
        .collect();
    let mut s = Search {
        cands,
        pool,
        cost,
        agg,
        tie,
        bound,
        least,
        used: BTreeMap::new(),
        pick: Vec::new(),
        best: None,
        nodes: 0,
    };
    s.go(0, 0.0, 0.0);
    let proven = s.nodes <= MAX_NODES;
    Choice {
        pick: s.best.map(|b| b.2).unwrap_or_default(),
        proven,
        note: None,
    }
}

/// Whether candidate `c` of job `j` keeps its slowdown within `b`.
fn ok_bound(cands: &[Vec<Candidate>], j: usize, c: usize, b: f64) -> bool {
    let alone = cands[j].first().map_or(1.0, |x| x.time_ns.max(1.0));
    cands[j][c].time_ns / alone <= b * (1.0 + 1e-9)
}

impl Search<'_> {
    fn go(&mut self, j: usize, acc: f64, tie: f64) {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return;
        }
        if j == self.cands.len() {
            let better = match &self.best {
                None => true,
                Some((b, t, _)) => acc < *b - 1e-9 || (acc <= *b + 1e-9 && tie < *t - 1e-9),
            };
            if better {
                self.best = Some((acc, tie, self.pick.clone()));
            }
            return;
        }
        // the best this branch can still reach
        let reach = (j..self.cands.len()).fold(acc, |a, k| self.agg.add(a, self.least[k]));
        if let Some((b, _, _)) = &self.best {
            if reach > *b + 1e-9 {
                return;
            }
        }
        let mut order: Vec<usize> = (0..self.cands[j].len()).collect();
        order.sort_by(|&a, &b| {
            (self.cost)(j, a)
                .total_cmp(&(self.cost)(j, b))
                .then(a.cmp(&b))
        });
        for c in order {
            if let Some(b) = self.bound {
                if !ok_bound(self.cands, j, c, b) {
                    continue;
                }
            }
            let peaks = &self.cands[j][c].peaks;
            let fits = peaks
                .iter()
                .all(|(sw, k)| self.used.get(sw).copied().unwrap_or(0) + k <= self.pool);
            if !fits {
                continue;
            }
            for (sw, k) in peaks {
                *self.used.entry(*sw).or_default() += k;
            }
            self.pick.push(c);
            let (a, t) = (self.agg.add(acc, (self.cost)(j, c)), tie + (self.tie)(j, c));
            self.go(j + 1, a, t);
            self.pick.pop();
            for (sw, k) in peaks {
                *self.used.get_mut(sw).expect("added above") -= k;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(level: Option<u32>, t: f64, peaks: &[(u32, u32)]) -> Candidate {
        Candidate {
            level,
            plan: None,
            time_ns: t,
            peaks: peaks.iter().map(|&(s, k)| (NodeId(s), k)).collect(),
        }
    }

    /// Two jobs over one spine (node 9) with a pool of 100: each alone wants all of it.
    fn two_jobs() -> Vec<Vec<Candidate>> {
        vec![
            vec![
                cand(Some(100), 100.0, &[(9, 100)]),
                cand(Some(50), 110.0, &[(9, 50)]),
                cand(None, 150.0, &[]),
            ],
            vec![
                cand(Some(100), 200.0, &[(9, 100)]),
                cand(Some(50), 260.0, &[(9, 50)]),
                cand(None, 400.0, &[]),
            ],
        ]
    }

    #[test]
    fn the_slowest_job_gets_the_pool_when_the_objective_is_the_slowest_iteration() {
        let c = choose(&two_jobs(), 100, Goal::Objective(Objective::Slowest));
        // (host 150, full 200) beats (half 110, half 260): the slowest is 200 < 260
        assert_eq!(c.pick, vec![2, 0]);
        assert!(c.proven);
    }

    #[test]
    fn halves_minimise_the_sum_of_slowdowns_here() {
        let c = choose(&two_jobs(), 100, Goal::Objective(Objective::SumSlowdown));
        // slowdowns: (1.1 + 1.3) = 2.4 < (1.5 + 1.0) = 2.5 < (1.0 + 2.0)
        assert_eq!(c.pick, vec![1, 1]);
    }

    #[test]
    fn the_fair_variant_bounds_each_slowdown_or_says_it_cannot() {
        let c = choose(&two_jobs(), 100, Goal::Fair(1.3));
        assert_eq!(c.pick, vec![1, 1]);
        assert_eq!(c.note, None);
        let c = choose(&two_jobs(), 100, Goal::Fair(1.2));
        assert_eq!(c.pick, vec![1, 1], "smallest largest slowdown: 1.3");
        assert!(c.note.is_some());
    }

    #[test]
    fn jobs_on_disjoint_switches_both_keep_their_whole_pool() {
        let mut c = two_jobs();
        c[1][0].peaks = [(NodeId(8), 100)].into_iter().collect();
        let ch = choose(&c, 100, Goal::Objective(Objective::Slowest));
        assert_eq!(ch.pick, vec![0, 0]);
    }
}
