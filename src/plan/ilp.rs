//! The exact planner: the cost model as a mixed-integer linear program, solved by
//! `good_lp` with the pure-Rust `microlp` backend.
//!
//! Binary `x[g][o]` picks option `o` of group `g` (Σ_o x = 1); continuous `T` (iteration
//! time) and `ΔE[s]` (stage shifts from TP decisions). Constraints, all linear because
//! every non-linear part (an option's time at a slot level, a DP stream's end) is
//! precomputed per option: chain rows `T ≥ c + ΔE[s] + Σ value·x`, shift rows
//! `ΔE[s'] ≥ Σ ∂E[s']/∂TP · ΔTP·x` per replica, link rows `T ≥ start + Σ load·x` per
//! phase and channel, slot rows `Σ slots·x ≤ pool` and quota rows `Σ x ≤ Q` per phase and
//! switch. Rows that cannot bind (their largest possible value is below a lower bound of
//! `T`, or their largest possible use fits the pool) are left out. Times are in
//! milliseconds to keep coefficients within the solver's recommended range.
//! Objective: `T` (iteration) or Σ exposed·x (exposed).

use super::lp::{self, Domain, Limit, LpError, Vars};
use super::model::Model;
use good_lp::{constraint, Expression, Variable};
use std::collections::HashMap;

const MS: f64 = 1e-6;

/// What the exact solve gave.
pub(super) struct IlpResult {
    /// Chosen option per group.
    pub assign: Vec<usize>,
    /// Optimality proved.
    pub optimal: bool,
    /// Best proven bound on the objective (ns).
    pub bound: Option<f64>,
    /// Binary variables.
    pub variables: u64,
    /// Constraints.
    pub constraints: u64,
    /// The wall-clock safety net, not the node limit, stopped the solve.
    pub hit_time: bool,
}

/// Variables: per group, per option (None for a group with one option).
type X = Vec<Option<Vec<Variable>>>;

fn pick(x: &X, g: usize, f: impl Fn(usize) -> f64, konst: f64) -> Expression {
    match &x[g] {
        Some(v) => v.iter().enumerate().map(|(o, &var)| f(o) * var).sum(),
        None => Expression::from(konst),
    }
}

/// Solve the model; `warm` is a feasible assignment to start from (the heuristic's).
pub(super) fn solve(
    m: &Model,
    exposed_objective: bool,
    warm: &[usize],
    limit: Limit,
) -> Result<IlpResult, String> {
    let mut vars = Vars::new();
    let mut nvars = 0u64;
    let x: X = m
        .opts
        .iter()
        .map(|o| {
            (o.len() > 1).then(|| {
                nvars += o.len() as u64;
                o.iter().map(|_| vars.add(Domain::Binary)).collect()
            })
        })
        .collect();
    let t = vars.add(Domain::NonNegative);
    // D (end of the gradient sync) and L (largest tail channel load)
    let aux = (vars.add(Domain::NonNegative), vars.add(Domain::NonNegative));
    let has_shift = m.replicas.iter().any(|r| r.iter().any(Option::is_some));
    let pp = m.cf.len();
    let de: Vec<Variable> = if has_shift {
        (0..pp).map(|_| vars.add(Domain::Free)).collect()
    } else {
        Vec::new()
    };
    let objective: Expression = if exposed_objective {
        (0..m.groups.len())
            .map(|g| {
                pick(
                    &x,
                    g,
                    |o| m.vals[g][o].exposed * MS,
                    m.vals[g][0].exposed * MS,
                )
            })
            .sum()
    } else {
        Expression::from(t)
    };
    let mut cons = Vec::new();
    for v in x.iter().flatten() {
        let s: Expression = v.iter().copied().sum();
        cons.push(constraint!(s == 1.0));
    }
    if !exposed_objective {
        iteration_rows(m, &x, t, &de, aux, &mut cons);
    }
    resource_rows(m, &x, &|_| true, Limits::of(m), &mut cons);
    let ncons = cons.len() as u64;
    let mut initial: Vec<(Variable, f64)> = Vec::new();
    for (g, xs) in x.iter().enumerate() {
        if let Some(v) = xs {
            for (o, &var) in v.iter().enumerate() {
                initial.push((var, if warm[g] == o { 1.0 } else { 0.0 }));
            }
        }
    }
    let mut scratch = vec![0.0; m.channels];
    let warm_eval = m.evaluate(warm, &mut scratch);
    // the program's T leaves out the calibration offset
    initial.push((t, (warm_eval.t - m.offset) * MS));
    let wde = m.shifts(warm);
    let wd = m.dp_end(warm, &wde, &mut scratch);
    initial.push((aux.0, wd * MS));
    initial.push((aux.1, m.load_max(&m.tail, warm, true, &mut scratch) * MS));
    if has_shift {
        for (s, d) in m.shifts(warm).into_iter().enumerate() {
            initial.push((de[s], d * MS));
        }
    }
    let sol = lp::minimise(&vars, &objective, &cons, &initial, limit).map_err(|e| e.to_string())?;
    if !sol.found() {
        return Err("the solver stopped before any integer point (time limit)".into());
    }
    let optimal = sol.optimal;
    let assign: Vec<usize> = x
        .iter()
        .map(|xs| match xs {
            Some(v) => v
                .iter()
                .enumerate()
                .max_by(|a, b| sol.value(*a.1).total_cmp(&sol.value(*b.1)))
                .map_or(0, |(o, _)| o),
            None => 0,
        })
        .collect();
    Ok(IlpResult {
        assign,
        optimal,
        bound: sol.bound.map(|b| b / MS),
        variables: nvars,
        constraints: ncons,
        hit_time: sol.hit_time,
    })
}

/// Chain, shift and link rows.
fn iteration_rows(
    m: &Model,
    x: &X,
    t: Variable,
    de: &[Variable],
    d: (Variable, Variable),
    cons: &mut Vec<good_lp::Constraint>,
) {
    for r in &m.rows {
        let mut e = Expression::from(t);
        if !de.is_empty() {
            e -= de[r.stage];
        }
        for (g, f) in [
            (
                r.dp,
                (|v: &super::model::Vals| v.end) as fn(&super::model::Vals) -> f64,
            ),
            (r.tp, |v| v.ln),
            (r.emb, |v| v.end),
            (r.ag, |v| v.gather),
        ] {
            if let Some(g) = g {
                e -= pick(x, g, |o| f(&m.vals[g][o]) * MS, f(&m.vals[g][0]) * MS);
            }
        }
        cons.push(constraint!(e >= r.c * MS));
    }
    if !de.is_empty() {
        for rep in &m.replicas {
            for (sp, &d) in de.iter().enumerate() {
                let mut e = Expression::from(d);
                for (s, g) in rep.iter().enumerate() {
                    if let Some(g) = *g {
                        e -= pick(
                            x,
                            g,
                            |o| {
                                (m.cf[sp][s] * m.vals[g][o].dfwd + m.cb[sp][s] * m.vals[g][o].dbwd)
                                    * MS
                            },
                            0.0,
                        );
                    }
                }
                cons.push(constraint!(e >= 0.0));
            }
        }
    }
    // D ≥ every DP stream end and every release's link load; L ≥ every tail link load;
    // T ≥ D + L; T ≥ every pipeline link load.
    let lb = m.lower_bound();
    let shift = |s: usize| -> Expression {
        if de.is_empty() {
            Expression::from(0.0)
        } else {
            Expression::from(de[s])
        }
    };
    if m.dp.is_empty() {
        for s in 0..m.timeline.stage_end.len() {
            cons.push(constraint!(d.0 - shift(s) >= m.timeline.stage_end[s] * MS));
        }
    }
    for &g in &m.dp {
        let s = m.groups[g].stage.unwrap_or(0) as usize;
        let e = pick(x, g, |o| m.vals[g][o].end * MS, m.vals[g][0].end * MS);
        cons.push(constraint!(d.0 - shift(s) - e >= 0.0));
    }
    for (r, s, gs) in &m.releases {
        load_rows(
            m,
            x,
            gs,
            false,
            |e, _| Some(constraint!(d.0 - shift(*s) - e >= r * MS)),
            cons,
        );
    }
    load_rows(
        m,
        x,
        &m.tail,
        true,
        |e, _| Some(constraint!(d.1 - e >= 0.0)),
        cons,
    );
    cons.push(constraint!(Expression::from(t) - d.0 - d.1 >= 0.0));
    load_rows(
        m,
        x,
        &m.pipe,
        false,
        |e, most| (most > lb).then(|| constraint!(Expression::from(t) - e >= 0.0)),
        cons,
    );
}

/// One row per channel carrying load of `groups`: `make(Σ load·x, largest possible load)`
/// gives the row (None: it cannot bind).
fn load_rows(
    m: &Model,
    x: &X,
    groups: &[usize],
    tail: bool,
    make: impl Fn(Expression, f64) -> Option<good_lp::Constraint>,
    cons: &mut Vec<good_lp::Constraint>,
) {
    // per channel: the load of groups without a choice, and per other group its load
    // under each of its options
    type PerChannel = std::collections::BTreeMap<u32, (f64, Vec<(usize, Vec<f64>)>)>;
    let mut chans: PerChannel = Default::default();
    for &g in groups {
        let n = m.opts[g].len();
        for (o, opt) in m.opts[g].iter().enumerate() {
            for &(c, l) in if tail { &opt.tail_loads } else { &opt.loads } {
                let e = chans.entry(c).or_default();
                if n == 1 {
                    e.0 += l;
                } else {
                    match e.1.iter_mut().find(|x| x.0 == g) {
                        Some(x) => x.1[o] += l,
                        None => {
                            let mut v = vec![0.0; n];
                            v[o] = l;
                            e.1.push((g, v));
                        }
                    }
                }
            }
        }
    }
    for (_, (k, vs)) in chans {
        let most = k + vs
            .iter()
            .map(|v| v.1.iter().copied().fold(0.0, f64::max))
            .sum::<f64>();
        let mut e = Expression::from(k * MS);
        for (g, v) in &vs {
            e += pick(x, *g, |o| v[o] * MS, 0.0);
        }
        if let Some(c) = make(e, most) {
            cons.push(c);
        }
    }
}

/// The slot pool and tree quota per switch that resource rows enforce: the model's, or
/// one of them lifted (to tell which constraint an infeasible set of groups breaks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Limits {
    /// Slots per switch (`None`: unlimited).
    pub slots: Option<u32>,
    /// Trees per switch (`None`: unlimited).
    pub quota: Option<u32>,
}

impl Limits {
    /// The model's own limits.
    pub fn of(m: &Model) -> Limits {
        Limits {
            slots: Some(m.slots),
            quota: m.quota,
        }
    }
}

/// Whether the groups with `keep[g]` can take options that fit `limits` together, every
/// other group on no switch (its host option): `Ok(Some(assignment))` (the other groups at
/// [`super::model::host_index`]), `Ok(None)` when the program *proves* that no combination
/// fits (the branch and bound closed without an integer point), `Err` when the solver
/// stopped first (the time limit) or failed. The same resource rows as [`solve`]; no
/// objective, so the first integer point ends the search.
pub(super) fn feasible(
    m: &Model,
    keep: &[bool],
    limits: Limits,
    limit: Limit,
) -> Result<Option<Vec<usize>>, String> {
    let mut vars = Vars::new();
    let x: X = m
        .opts
        .iter()
        .enumerate()
        .map(|(g, o)| keep[g].then(|| o.iter().map(|_| vars.add(Domain::Binary)).collect()))
        .collect();
    let mut cons = Vec::new();
    for v in x.iter().flatten() {
        let s: Expression = v.iter().copied().sum();
        cons.push(constraint!(s == 1.0));
    }
    resource_rows(m, &x, &|g| keep[g], limits, &mut cons);
    match lp::minimise(&vars, &Expression::from(0.0), &cons, &[], limit) {
        Ok(sol) if sol.found() => Ok(Some(
            x.iter()
                .enumerate()
                .map(|(g, xs)| match xs {
                    Some(v) => v
                        .iter()
                        .enumerate()
                        .max_by(|a, b| sol.value(*a.1).total_cmp(&sol.value(*b.1)))
                        .map_or(0, |(o, _)| o),
                    None => super::model::host_index(&m.opts[g], &m.groups[g]),
                })
                .collect(),
        )),
        Ok(_) => Err("the solver stopped before any integer point (node or time limit)".into()),
        Err(LpError::Infeasible) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// Slot-pool and tree-quota rows per phase and switch, over the groups `keep` admits.
fn resource_rows(
    m: &Model,
    x: &X,
    keep: &dyn Fn(usize) -> bool,
    limits: Limits,
    cons: &mut Vec<good_lp::Constraint>,
) {
    for p in &m.phases {
        let mut sw: HashMap<u32, Vec<(usize, usize)>> = HashMap::new();
        for &g in p.groups.iter().filter(|&&g| keep(g)) {
            for (o, opt) in m.opts[g].iter().enumerate() {
                for s in &opt.switches {
                    sw.entry(s.0).or_default().push((g, o));
                }
            }
        }
        let mut keys: Vec<u32> = sw.keys().copied().collect();
        keys.sort_unstable();
        for s in keys {
            let uses = &sw[&s];
            let most_slots: u64 = groups_max(uses, |g, o| m.opts[g][o].slots as u64);
            let most_trees: u64 = groups_max(uses, |_, _| 1);
            let var = |g: usize, o: usize| x[g].as_ref().map(|v| v[o]);
            let term = |f: &dyn Fn(usize, usize) -> f64| -> (Expression, f64) {
                let mut e = Expression::from(0.0);
                let mut k = 0.0;
                for &(g, o) in uses {
                    match var(g, o) {
                        Some(v) => e += f(g, o) * v,
                        None => k += f(g, o),
                    }
                }
                (e, k)
            };
            if let Some(pool) = limits.slots.filter(|&p| most_slots > p as u64) {
                let (e, k) = term(&|g, o| m.opts[g][o].slots as f64);
                cons.push(constraint!(e <= pool as f64 - k));
            }
            if let Some(q) = limits.quota.filter(|&q| most_trees > q as u64) {
                let (e, k) = term(&|_, _| 1.0);
                cons.push(constraint!(e <= q as f64 - k));
            }
        }
    }
}

/// Σ over groups of the largest `f` among that group's listed options.
fn groups_max(uses: &[(usize, usize)], f: impl Fn(usize, usize) -> u64) -> u64 {
    let mut best: HashMap<usize, u64> = HashMap::new();
    for &(g, o) in uses {
        let e = best.entry(g).or_default();
        *e = (*e).max(f(g, o));
    }
    best.values().sum()
}
