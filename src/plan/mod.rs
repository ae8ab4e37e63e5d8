//! 3D-INA planning (`ina3d plan`): which aggregation groups — each TP group's collectives,
//! each DP group's buckets, each embedding group — aggregate in which switches with how
//! many slots, to minimise the predicted iteration time (or exposed communication).
//!
//! Public entry: [`plan`] (workload + topology + INA switch model → a
//! [`PlanFile`](crate::formats::plan_json::PlanFile)). The cost model is [`model`]; the
//! exact solver is an integer program ([`ilp`], `good_lp` + `microlp`), the fast one a
//! greedy + local search ([`heuristic`]). `ina3d trace --plan` lowers a plan
//! ([`crate::trace::generate_workload`] with `TraceOptions::plan`); `docs/plan.md`
//! explains the model and its measured error for users.

pub mod groups;
mod heuristic;
mod ilp;
pub mod model;
pub mod options;
pub mod timeline;

use crate::formats::plan_json::{
    Decision, PlanFile, PlanSettings, PlannedGroup, Prediction, SolverReport, PLAN_SCHEMA,
};
use crate::keyword::keyword_enum;
use crate::schedule::Workload;
use crate::topology::{Routing, Topology};
use crate::trace::TraceOptions;
use model::{Eval, Model, Settings};
use options::{Form, Net, OptKind};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// What the planner minimises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Objective {
    /// Predicted iteration time (ties broken by exposed communication).
    Iteration,
    /// Σ over groups of exposed communication.
    Exposed,
}

/// Which solver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SolverKind {
    /// The integer program (exact up to its time limit).
    Ilp,
    /// Greedy + local search.
    Heuristic,
    /// The integer program when the instance is small enough to close in the time limit,
    /// else the heuristic; never worse than the heuristic.
    Auto,
}

keyword_enum!(Objective, "objective", Objective::Iteration => "iteration", Objective::Exposed => "exposed");
keyword_enum!(SolverKind, "solver", SolverKind::Ilp => "ilp", SolverKind::Heuristic => "heuristic", SolverKind::Auto => "auto");

/// Planner options.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanOptions {
    /// What the groups may do.
    pub settings: Settings,
    /// What to minimise.
    pub objective: Objective,
    /// Which solver.
    pub solver: SolverKind,
    /// Wall-time budget of the whole solve.
    pub time_limit: Duration,
    /// `auto` tries the exact solver only up to this many binary variables (beyond, the
    /// `microlp` branch and bound does not close in seconds: see `benches/plan.rs`).
    pub auto_max_variables: u64,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            settings: Settings {
                slots: 8192,
                quota: None,
                levels: vec![1.0, 0.5, 0.25],
                classes: vec![
                    crate::record::Class::Tp,
                    crate::record::Class::Dp,
                    crate::record::Class::Emb,
                ],
                required: vec![],
                forms: vec![Form::Hierarchical, Form::RootOnly, Form::Steiner],
                rina: true,
            },
            objective: Objective::Iteration,
            solver: SolverKind::Auto,
            time_limit: Duration::from_secs(10),
            auto_max_variables: 2000,
        }
    }
}

/// Why no plan could be made.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The settings admit no plan: the message names the constraint and the group.
    #[error("infeasible: {0}")]
    Infeasible(String),
    /// The job or topology cannot be modelled.
    #[error("{0}")]
    Model(String),
    /// Routing failed.
    #[error(transparent)]
    Topology(#[from] crate::topology::TopologyError),
    /// The INA switch settings are wrong.
    #[error(transparent)]
    Trace(#[from] crate::trace::TraceError),
}

/// The planner's cost model covers dense TP/PP/DP(+embedding) jobs: context-parallel
/// attention and MoE all-to-alls are neither planned nor priced, so such jobs are refused
/// rather than planned on a model that leaves their traffic out (docs/plan.md).
fn refuse_unmodelled(wl: &Workload) -> Result<(), PlanError> {
    if wl.groups.cp > 1 {
        return Err(PlanError::Model(format!(
            "context parallelism (CP{}) is not in the planner's cost model yet: plan a CP1 job",
            wl.groups.cp
        )));
    }
    if wl.moe.is_some() {
        return Err(PlanError::Model(
            "MoE (expert parallelism) is not in the planner's cost model yet: plan a dense job"
                .into(),
        ));
    }
    Ok(())
}

/// The model of a job, for tests and benchmarks that look inside the planner.
pub fn build_model(
    wl: &Workload,
    topo: &Topology,
    trace: &TraceOptions,
    settings: &Settings,
) -> Result<Model, PlanError> {
    refuse_unmodelled(wl)?;
    let routing = Routing::new(topo, trace.seed)?;
    let (can_agg, tor) = crate::trace::aggregating_switches(topo, &trace.ina.switches)?;
    let net = Net {
        topo,
        routing: &routing,
        can_agg,
        tor,
        payload: trace.ina.payload,
        window: trace.ina.window,
        nvlink_alpha: crate::trace::nvlink_step_latency(topo, trace),
    };
    if settings.slots == 0 {
        return Err(PlanError::Model("--ina-slots must be at least 1".into()));
    }
    model::build(wl, &net, settings)
}

/// The plan of `wl` on `topo` (ECMP seed, INA switches, payload and window from `trace`);
/// `job` is what the plan is made for (recorded, and checked when it is lowered).
pub fn plan(
    wl: &Workload,
    topo: &Topology,
    trace: &TraceOptions,
    po: &PlanOptions,
    job: BTreeMap<String, String>,
) -> Result<PlanFile, PlanError> {
    let started = Instant::now();
    let m = build_model(wl, topo, trace, &po.settings)?;
    let solved = solve(&m, po, started)?;
    Ok(file(&m, po, job, solved, started.elapsed()))
}

/// A solve's outcome.
pub struct Solved {
    /// Option per group.
    pub assign: Vec<usize>,
    /// Its evaluation.
    pub eval: Eval,
    /// Solver used.
    pub used: SolverKind,
    /// `optimal`, `time-limit` or `heuristic`.
    pub status: &'static str,
    /// Proven lower bound on the objective (ns).
    pub bound: f64,
    /// Binary variables / constraints of the exact model (0 when not built).
    pub size: (u64, u64),
    /// Why the exact answer was not kept, if so.
    pub note: Option<String>,
}

/// Run the requested solver on a model.
pub fn solve(m: &Model, po: &PlanOptions, started: Instant) -> Result<Solved, PlanError> {
    let exposed = po.objective == Objective::Exposed;
    let deadline = started + po.time_limit;
    let nvars: u64 = m
        .opts
        .iter()
        .filter(|o| o.len() > 1)
        .map(|o| o.len() as u64)
        .sum();
    let exact = match po.solver {
        SolverKind::Ilp => true,
        SolverKind::Heuristic => false,
        SolverKind::Auto => nvars <= po.auto_max_variables,
    };
    // the heuristic alone gets the whole budget; before an exact solve, a tenth (its plan
    // is the exact solver's starting incumbent)
    // 2 % of the budget stays for the wrap-up (evaluations, the plan file)
    let h_deadline = if exact {
        started + po.time_limit / 10
    } else {
        started + po.time_limit.mul_f64(0.98)
    };
    let a = heuristic::run(m, exposed, h_deadline).ok_or_else(|| {
        PlanError::Infeasible(
            "the groups that must aggregate (--require) do not fit the slot pools and tree quota together"
                .into(),
        )
    })?;
    let mut scratch = vec![0.0; m.channels];
    let heur = m.evaluate(&a, &mut scratch);
    let relax = if exposed {
        m.vals
            .iter()
            .map(|v| v.iter().map(|x| x.exposed).fold(f64::INFINITY, f64::min))
            .sum()
    } else {
        m.lower_bound()
    };
    let mut out = Solved {
        assign: a.clone(),
        eval: heur.clone(),
        used: SolverKind::Heuristic,
        status: "heuristic",
        bound: relax,
        size: (nvars, 0),
        note: (po.solver == SolverKind::Auto && !exact).then(|| {
            format!(
                "{nvars} binary variables exceed the exact solver's limit ({}) for auto",
                po.auto_max_variables
            )
        }),
    };
    if !exact {
        return Ok(out);
    }
    let left = deadline.saturating_duration_since(Instant::now());
    match ilp::solve(m, exposed, &a, left) {
        Ok(r) => {
            let e = m.evaluate(&r.assign, &mut scratch);
            let key = |e: &Eval| if exposed { e.exposed } else { e.t };
            out.size = (r.variables, r.constraints);
            if e.feasible && key(&e) <= key(&heur) * (1.0 + 1e-9) {
                out.assign = r.assign;
                out.eval = e;
                out.used = SolverKind::Ilp;
                out.status = if r.optimal { "optimal" } else { "time-limit" };
                out.note = None;
            } else {
                out.note =
                    Some("the exact solver's plan was not better than the heuristic's".into());
            }
            let b = if r.optimal {
                key(&out.eval)
            } else {
                r.bound.unwrap_or(relax)
            };
            out.bound = b.max(relax).min(key(&out.eval));
        }
        Err(e) => out.note = Some(format!("exact solver failed: {e}")),
    }
    Ok(out)
}

/// The plan file of a solved model.
pub fn file(
    m: &Model,
    po: &PlanOptions,
    job: BTreeMap<String, String>,
    s: Solved,
    took: Duration,
) -> PlanFile {
    let mut scratch = vec![0.0; m.channels];
    let host: Vec<usize> = (0..m.groups.len())
        .map(|g| model::host_index(&m.opts[g], &m.groups[g]))
        .collect();
    let host_eval = m.evaluate(&host, &mut scratch);
    let objective = if po.objective == Objective::Exposed {
        s.eval.exposed
    } else {
        s.eval.t
    };
    let groups = m
        .groups
        .iter()
        .enumerate()
        .map(|(g, grp)| {
            let o = &m.opts[g][s.assign[g]];
            let h = &m.opts[g][host[g]];
            let colls = grp.colls();
            let largest = |opt: &options::Opt| {
                colls
                    .iter()
                    .zip(&opt.times)
                    .filter(|(c, _)| c.aggregatable())
                    .max_by_key(|(c, _)| c.bytes)
                    .map_or(0.0, |(_, t)| *t)
            };
            PlannedGroup {
                class: grp.class,
                stage: grp.stage,
                members: grp.members.clone(),
                decision: match &o.kind {
                    OptKind::Host | OptKind::NvLink => Decision::Host,
                    OptKind::Tree { form, root, edges } => Decision::Tree {
                        form: form.as_str().into(),
                        root: *root,
                        edges: edges.clone(),
                    },
                    OptKind::Rina { tors } => Decision::Rina { tors: tors.clone() },
                },
                slots: o.slots,
                reservations: o.switches.iter().map(|&w| (w, o.slots)).collect(),
                collectives: colls
                    .iter()
                    .filter(|c| c.aggregatable())
                    .map(|c| c.count)
                    .sum(),
                collective_ns: largest(o),
                host_collective_ns: largest(h),
                exposed_ns: m.vals[g][s.assign[g]].exposed,
            }
        })
        .collect();
    let st = &po.settings;
    PlanFile {
        schema: PLAN_SCHEMA,
        job,
        settings: PlanSettings {
            slots: st.slots,
            tree_quota: st.quota,
            slot_levels: st.levels.clone(),
            objective: po.objective.as_str().into(),
            classes: st.classes.clone(),
            required: st.required.clone(),
        },
        solver: SolverReport {
            requested: po.solver.as_str().into(),
            used: s.used.as_str().into(),
            status: s.status.into(),
            objective_ns: objective,
            bound_ns: s.bound,
            gap: if objective > 0.0 {
                ((objective - s.bound) / objective).max(0.0)
            } else {
                0.0
            },
            solve_time_s: took.as_secs_f64(),
            time_limit_s: po.time_limit.as_secs_f64(),
            variables: s.size.0,
            constraints: s.size.1,
            note: s.note,
        },
        prediction: Prediction {
            iteration_ns: s.eval.t,
            exposed_ns: s.eval.exposed,
            host_iteration_ns: host_eval.t,
        },
        groups,
        verification: None,
    }
}
