//! The exact planner's programs handed to `microlp` directly: `good_lp` builds the rows
//! (its expressions and `constraint!`), this adapter solves them under a *node limit* — a
//! budget of work, which `good_lp` does not expose (it offers a time limit only) — so the
//! same program gives the same answer on an idle and on a loaded machine. The wall-clock
//! deadline stays as a safety net, and a solve it stopped says so.
//!
//! Coefficients are handed over sorted by variable (good_lp keeps them in a hash map), so
//! the solver sees the same program in the same order on every run.

use good_lp::{Constraint, Expression, IntoAffineExpression, ProblemVariables, Variable};
use microlp::{ComparisonOp, LinearExpr, OptimizationDirection, SolveOptions, TerminationReason};
use std::collections::HashMap;
use std::time::Duration;

/// A variable's domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Domain {
    /// 0 or 1.
    Binary,
    /// Real, at least 0.
    NonNegative,
    /// Real, unbounded.
    Free,
}

/// The variables of a program: good_lp's (to build rows with) and their domains, in the
/// order they were added.
pub(super) struct Vars {
    /// good_lp's variables.
    pub inner: ProblemVariables,
    order: Vec<(Variable, Domain)>,
}

impl Vars {
    pub(super) fn new() -> Self {
        Vars {
            inner: ProblemVariables::new(),
            order: Vec::new(),
        }
    }

    /// A new variable of `domain`.
    pub(super) fn add(&mut self, domain: Domain) -> Variable {
        let v = match domain {
            Domain::Binary => self.inner.add(good_lp::variable().binary()),
            Domain::NonNegative => self.inner.add(good_lp::variable().min(0.0)),
            Domain::Free => self.inner.add(good_lp::variable()),
        };
        self.order.push((v, domain));
        v
    }
}

/// What bounds a solve.
#[derive(Clone, Copy, Debug)]
pub(super) struct Limit {
    /// Branch-and-bound nodes at most (the root relaxation not counted).
    pub nodes: u64,
    /// Wall-clock safety net.
    pub time: Duration,
}

/// A solve's outcome.
pub(super) struct Outcome {
    /// Value per variable, `None` when the solver stopped before any integer point.
    values: Option<HashMap<Variable, f64>>,
    /// Optimality proved.
    pub optimal: bool,
    /// Best proven bound on the objective (program units).
    pub bound: Option<f64>,
    /// The wall-clock safety net, not the node limit, stopped the solve.
    pub hit_time: bool,
}

impl Outcome {
    /// The value of `v` in the incumbent (0 when there is none).
    pub(super) fn value(&self, v: Variable) -> f64 {
        self.values
            .as_ref()
            .and_then(|m| m.get(&v).copied())
            .unwrap_or(0.0)
    }

    /// Whether the solver found an integer point.
    pub(super) fn found(&self) -> bool {
        self.values.is_some()
    }
}

/// Why a program has no outcome.
#[derive(Debug, PartialEq)]
pub(super) enum LpError {
    /// Proved infeasible.
    Infeasible,
    /// The solver failed (message).
    Failed(String),
}

impl std::fmt::Display for LpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LpError::Infeasible => f.write_str("the exact model is infeasible"),
            LpError::Failed(m) => f.write_str(m),
        }
    }
}

/// Minimise `objective` over `vars` subject to `cons` (each `expression ≤ 0` or `= 0`, as
/// good_lp normalises them), starting from `warm` (ignored by the solver when it does not
/// fit), within `limit`.
pub(super) fn minimise(
    vars: &Vars,
    objective: &Expression,
    cons: &[Constraint],
    warm: &[(Variable, f64)],
    limit: Limit,
) -> Result<Outcome, LpError> {
    let index: HashMap<Variable, usize> = vars
        .order
        .iter()
        .enumerate()
        .map(|(i, (v, _))| (*v, i))
        .collect();
    let sorted = |e: &Expression| {
        let mut c: Vec<(usize, f64)> = e
            .linear_coefficients()
            .filter_map(|(v, k)| index.get(&v).map(|&i| (i, k)))
            .collect();
        c.sort_by_key(|&(i, _)| i);
        c
    };
    let mut obj = vec![0.0; vars.order.len()];
    for (i, k) in sorted(objective) {
        obj[i] += k;
    }
    let mut p = microlp::Problem::new(OptimizationDirection::Minimize);
    let mv: Vec<microlp::Variable> = vars
        .order
        .iter()
        .zip(&obj)
        .map(|((_, d), &k)| match d {
            Domain::Binary => p.add_binary_var(k),
            Domain::NonNegative => p.add_var(k, (0.0, f64::INFINITY)),
            Domain::Free => p.add_var(k, (f64::NEG_INFINITY, f64::INFINITY)),
        })
        .collect();
    for c in cons {
        let e = c.expression();
        let mut lhs = LinearExpr::empty();
        for (i, k) in sorted(e) {
            lhs.add(mv[i], k);
        }
        let op = if c.is_equality() {
            ComparisonOp::Eq
        } else {
            ComparisonOp::Le
        };
        p.add_constraint(lhs, op, -e.constant());
    }
    let mut o = SolveOptions::default();
    o.node_limit = Some(limit.nodes);
    o.time_limit = Some(limit.time.max(Duration::from_millis(1)));
    let mut w: Vec<(microlp::Variable, f64)> = warm
        .iter()
        .filter_map(|(v, x)| index.get(v).map(|&i| (mv[i], *x)))
        .collect();
    w.sort_by_key(|(v, _)| v.idx());
    o.warm_start = (!w.is_empty()).then_some(w);
    let out = p.solve_with(o).map_err(|e| match e {
        microlp::Error::Infeasible => LpError::Infeasible,
        e => LpError::Failed(e.to_string()),
    })?;
    let reason = out.termination_reason();
    let stats = out.stats();
    let values = out.solution().map(|s| {
        vars.order
            .iter()
            .zip(&mv)
            .map(|((v, _), m)| (*v, s.var_value(*m)))
            .collect()
    });
    Ok(Outcome {
        values,
        optimal: reason == TerminationReason::ProvenOptimal,
        bound: stats.best_bound,
        hit_time: reason == TerminationReason::TimeLimit,
    })
}
