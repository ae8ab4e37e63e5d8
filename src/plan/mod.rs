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

mod feasibility;
mod heuristic;
mod ilp;
mod lp;
mod repair;
pub use repair::{fixed_candidates, REPLAY_NS_PER_RECORD};
pub mod model;
pub mod options;
pub mod price;
pub mod timeline;

use crate::formats::plan_json::{
    Activity, Decision, PlanFile, PlanSettings, PlannedGroup, Prediction, SolverReport, PLAN_SCHEMA,
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
    /// Wall-time safety net of the whole solve (the search is bounded by `work`; a plan
    /// the limit stopped says so: `solver.hit_time_limit`).
    pub time_limit: Duration,
    /// The search's budget of work, so the same inputs give the same plan on an idle and on
    /// a loaded machine.
    pub work: Work,
    /// `auto` tries the exact solver only up to this many binary variables (beyond, the
    /// `microlp` branch and bound does not close in seconds: see `benches/plan.rs`).
    pub auto_max_variables: u64,
    /// With a replayer: plans solved and replayed at most ([`plan`]'s repair loop; 0:
    /// the model alone).
    pub replay_rounds: u32,
    /// With a replayer: replay every fixed policy of `ina3d run` the settings admit as a
    /// candidate too (docs/plan.md). The cluster's joint planner turns it off: a job
    /// answered by a fixed policy reserves nothing in the switches' shared pools, which
    /// is what the joint choice divides.
    pub fixed_policies: bool,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            settings: Settings {
                slots: crate::collective::DEFAULT_INA_SLOTS,
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
            work: Work::default(),
            auto_max_variables: 2000,
            replay_rounds: 3,
            fixed_policies: true,
        }
    }
}

/// A search's budget of work: what bounds [`solve`] (the wall-clock limit being only a
/// safety net).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Work {
    /// Evaluations of the cost model the heuristic may make per solve (its constructions,
    /// local search and perturbations).
    pub evals: u64,
    /// Branch-and-bound nodes of the exact program per solve.
    pub nodes: u64,
}

impl Default for Work {
    /// 20,000 evaluations (the local search of the 16-GPU study's jobs converges in a few
    /// thousand), 2,000 nodes.
    fn default() -> Self {
        Work {
            evals: 20_000,
            nodes: 2_000,
        }
    }
}

/// Why no plan could be made.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The settings admit no plan, proved (a counting argument or the exact program): the
    /// message names the groups, the switches and the constraint.
    #[error("infeasible: {0}")]
    Infeasible(String),
    /// No plan was found for the groups that must aggregate, and none was proved
    /// impossible either (the solver stopped at the time limit).
    #[error("no plan found: {0}")]
    Unproved(String),
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

/// The model of a job, for tests and benchmarks that look inside the planner.
pub fn build_model(
    wl: &Workload,
    topo: &Topology,
    trace: &TraceOptions,
    settings: &Settings,
) -> Result<Model, PlanError> {
    let routing = Routing::with_mode(topo, trace.seed, trace.routing)?;
    let (can_agg, tor) = crate::trace::aggregating_switches(topo, &trace.ina.switches)?;
    let net = Net {
        topo,
        routing: &routing,
        can_agg,
        tor,
        payload: trace.ina.payload,
        window: trace.ina.window,
        lw: crate::lower::Lowering::with_channels(
            topo,
            crate::trace::nvlink_step_latency(topo, trace),
            trace.nccl_channels,
        ),
        host: trace.collective,
    };
    if settings.slots == 0 {
        return Err(PlanError::Model("--ina-slots must be at least 1".into()));
    }
    model::build(wl, &net, settings)
}

/// The plan of `wl` on `topo` (ECMP seed, INA switches, payload and window from `trace`);
/// `job` is what the plan is made for (recorded, and checked when it is lowered). With a
/// `replayer`, the plan is verified and repaired by replaying it ([`repair`]).
pub fn plan(
    wl: &Workload,
    topo: &Topology,
    trace: &TraceOptions,
    po: &PlanOptions,
    job: BTreeMap<String, String>,
    replayer: Option<&dyn Replayer>,
) -> Result<PlanFile, PlanError> {
    let started = Instant::now();
    let mut m = build_model(wl, topo, trace, &po.settings)?;
    match replayer {
        Some(r) if po.replay_rounds > 0 => repair::repair(&mut m, wl, po, job, r, started),
        _ => {
            let solved = solve(&m, po, started)?;
            Ok(file(&m, po, job, solved, started.elapsed()))
        }
    }
}

/// Replays a plan of the planner's job (the trace `ina3d trace --plan` lowers, replayed as
/// `ina3d replay` replays it): what [`plan`] verifies and repairs its plans with. The
/// pipeline implements it; the planner does not depend on the replayer.
pub trait Replayer {
    /// Replay `plan`, giving up once `deadline` passes ([`ReplayFailure::OutOfTime`]): the
    /// planner's time limit bounds its replays too.
    fn replay(&self, plan: &PlanFile, deadline: Option<Instant>)
        -> Result<Replayed, ReplayFailure>;
}

/// Why a replay of a plan gave no time.
#[derive(Clone, Debug, PartialEq)]
pub enum ReplayFailure {
    /// The deadline passed before the replay ended.
    OutOfTime,
    /// The replay failed (the message says why).
    Failed(String),
}

impl std::fmt::Display for ReplayFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReplayFailure::OutOfTime => f.write_str("out of time"),
            ReplayFailure::Failed(m) => f.write_str(m),
        }
    }
}

/// What a replay of a plan measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Replayed {
    /// Iteration time (ns).
    pub iteration_ns: f64,
    /// Per stage, when the pipeline's last op (or its send) ended (ns).
    pub stage_end: Vec<f64>,
}

/// `why` after the solver's note, if it has one.
fn append_note(note: &mut Option<String>, why: String) {
    *note = Some(match note.take() {
        Some(n) => format!("{n}; {why}"),
        None => why,
    });
}

/// The plan file of a given assignment (an option index per group of `m`): what a
/// brute force over placements lowers and replays.
pub fn assignment_file(
    m: &Model,
    po: &PlanOptions,
    job: BTreeMap<String, String>,
    a: &[usize],
) -> PlanFile {
    file(m, po, job, fixed(m, a), Duration::ZERO)
}

/// The plan the repair loop replays first and every other is measured against: every group
/// on its host algorithm — but for the groups that must aggregate (`--require`, no host
/// option), which keep what a first solve gave them, so the baseline fits the pools.
fn baseline(m: &Model, po: &PlanOptions) -> Result<Vec<usize>, PlanError> {
    let has_host = |g: usize| {
        m.opts[g]
            .iter()
            .any(|o| matches!(o.kind, OptKind::Host(_) | OptKind::NvLink))
    };
    let host = |g: usize| model::host_index(&m.opts[g], &m.groups[g]);
    if (0..m.groups.len()).all(has_host) {
        return Ok((0..m.groups.len()).map(host).collect());
    }
    let solved = solve(m, po, Instant::now())?;
    Ok((0..m.groups.len())
        .map(|g| {
            if has_host(g) {
                host(g)
            } else {
                solved.assign[g]
            }
        })
        .collect())
}

/// A fixed assignment as a solve's outcome (nothing proven).
fn fixed(m: &Model, a: &[usize]) -> Solved {
    let mut scratch = vec![0.0; m.channels];
    let eval = m.evaluate(a, &mut scratch);
    Solved {
        assign: a.to_vec(),
        bound: m.lower_bound().min(eval.t),
        eval,
        used: SolverKind::Heuristic,
        status: "heuristic",
        size: (0, 0),
        note: None,
        windows: m.windows.clone(),
        other: None,
        hit_time_limit: false,
    }
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
    /// Every group's activity window in the model the assignment was solved (or
    /// evaluated) on: the windows its slot pools were checked against, and so the ones
    /// its plan file must record. A calibration moves the model's windows
    /// ([`Model::calibrate`]); an assignment written with a later model's windows could
    /// over-fill a pool that its own phases kept within bounds.
    pub windows: Vec<(f64, f64)>,
    /// With the exact solver: the other solver's plan when it differs (the heuristic's when
    /// the exact one is kept, and the other way round), which the repair loop replays too,
    /// so the plan returned is the better of the two *as replayed*.
    pub other: Option<(Vec<usize>, SolverKind)>,
    /// The wall-clock limit, not the work budget, stopped the search.
    pub hit_time_limit: bool,
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
    // the heuristic's work budget, then the exact program's: the deadline is a safety net
    let budget = heuristic::Budget {
        evals: po.work.evals,
        deadline: started + po.time_limit.mul_f64(0.98),
    };
    // the heuristic's constructions place required groups first-fit; when they find no
    // fit, the exact feasibility program gives a start or proves that none exists
    let (a, start_note, mut hit) = match heuristic::run(m, exposed, budget) {
        (Some(a), hit) => (a, None, hit),
        (None, hit) => {
            let start = feasibility::start_or_proof(m, deadline)?;
            let (a, h2) = heuristic::improve(m, exposed, budget, start);
            (
                a,
                Some("the heuristic's constructions found no fit for the required groups; the search started from the exact feasibility program's"),
                hit || h2,
            )
        }
    };
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
        windows: m.windows.clone(),
        other: None,
        hit_time_limit: hit,
    };
    if let Some(n) = start_note {
        out.note = Some(match out.note.take() {
            Some(o) => format!("{n}; {o}"),
            None => n.into(),
        });
    }
    if !exact {
        return Ok(out);
    }
    let limit = lp::Limit {
        nodes: po.work.nodes,
        time: deadline.saturating_duration_since(Instant::now()),
    };
    match ilp::solve(m, exposed, &a, limit) {
        Ok(r) => {
            let e = m.evaluate(&r.assign, &mut scratch);
            let key = |e: &Eval| if exposed { e.exposed } else { e.t };
            out.size = (r.variables, r.constraints);
            hit |= r.hit_time;
            out.hit_time_limit = hit;
            let differs = r.assign != a;
            if e.feasible && key(&e) <= key(&heur) * (1.0 + 1e-9) {
                out.assign = r.assign;
                out.eval = e;
                out.used = SolverKind::Ilp;
                out.status = if r.optimal { "optimal" } else { "node-limit" };
                if r.hit_time {
                    out.status = "time-limit";
                }
                out.note = None;
                out.other = differs.then(|| (a.clone(), SolverKind::Heuristic));
            } else {
                out.note =
                    Some("the exact solver's plan was not better than the heuristic's".into());
                out.other = (differs && e.feasible).then(|| (r.assign.clone(), SolverKind::Ilp));
            }
            // the program's T leaves out the model's calibration offset
            let off = if exposed { 0.0 } else { m.offset };
            let b = if r.optimal {
                key(&out.eval)
            } else {
                r.bound.map_or(relax, |b| b + off)
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
                expert: grp.is_expert(),
                decision: match &o.kind {
                    OptKind::Host(_) | OptKind::NvLink => Decision::Host,
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
                host_algorithm: match o.kind {
                    OptKind::Host(a) => Some(a),
                    _ => None,
                },
                active: {
                    let (from, until) = s.windows[g];
                    Activity {
                        from_ns: from,
                        until_ns: until.is_finite().then_some(until),
                    }
                },
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
            hit_time_limit: s.hit_time_limit,
            exact_gain: None,
        },
        prediction: Prediction {
            iteration_ns: s.eval.t,
            exposed_ns: s.eval.exposed,
            host_iteration_ns: host_eval.t,
        },
        groups,
        verification: None,
        fixed_policy: None,
        candidates: vec![],
    }
}
