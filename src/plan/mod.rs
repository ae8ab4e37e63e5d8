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
pub mod model;
pub mod options;
pub mod price;
pub mod timeline;

use crate::formats::plan_json::{
    Activity, Decision, PlanFile, PlanSettings, PlannedGroup, Prediction, SolverReport,
    Verification, PLAN_SCHEMA,
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
    /// With a replayer: plans solved and replayed at most ([`plan`]'s repair loop; 0:
    /// the model alone).
    pub replay_rounds: u32,
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
            auto_max_variables: 2000,
            replay_rounds: 3,
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
        Some(r) if po.replay_rounds > 0 => repair(&mut m, wl, po, job, r, started),
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

/// A plan the repair loop replayed: its prediction (made before its replay, by the model
/// calibrated on the replays before it) and its replayed time.
struct Tried {
    assign: Vec<usize>,
    solved: Option<Solved>,
    predicted: f64,
    replayed: Replayed,
}

/// Solve, replay, calibrate, repeat: the all-host plan is replayed first and the model
/// calibrated on it ([`Model::calibrate`]); then up to `replay_rounds` times the model is
/// solved, its plan replayed, and the model calibrated on that replay, until a plan comes
/// back a second time, its prediction is within 2 % of its replay, or time runs out. The
/// plan returned is the fastest *replayed* (the all-host plan when nothing beat it), with
/// the prediction the model made for it before it was replayed and its replay recorded as
/// the plan's verification — but when the all-host replay leaves no time to replay a
/// plan, the model's plan solved in what is left, unverified ([`unverified`]), if it
/// predicts better than the all-host replay.
fn repair(
    m: &mut Model,
    wl: &Workload,
    po: &PlanOptions,
    job: BTreeMap<String, String>,
    rp: &dyn Replayer,
    started: Instant,
) -> Result<PlanFile, PlanError> {
    let deadline = started + po.time_limit;
    let host = baseline(m, po)?;
    let mut scratch = vec![0.0; m.channels];
    // a replay still running at `until` is stopped: `None`
    let replay = |m: &Model, a: &[usize], po: &PlanOptions, until: Instant| {
        let f = file(m, po, job.clone(), fixed(m, a), Duration::ZERO);
        replay_until(rp, &f, until)
    };
    let host_predicted = m.evaluate(&host, &mut scratch).t;
    // When the all-host plan and a plan cannot both be replayed in time (cluster-scale
    // jobs: GPT-3 175B on 8,192 GPUs takes ~30 s a replay), the model's plan is solved
    // first and replayed alone, so the time goes to the plan returned.
    let estimate = replay_estimate(m, wl);
    let left = deadline.saturating_duration_since(Instant::now());
    if estimate * 3 > left {
        return tight(m, po, job, rp, started, estimate, host_predicted);
    }
    // the all-host replay may take half of what is left: the other half solves
    let t0 = Instant::now();
    let Some(r0) = replay(m, &host, po, t0 + left / 2)? else {
        let seen = t0.elapsed() * 2;
        return tight(m, po, job, rp, started, estimate.max(seen), host_predicted);
    };
    let replay_cost = t0.elapsed();
    // the all-host plan as the uncalibrated model sees it: the windows its required
    // groups (if any) were fitted in
    let host_windows = m.windows.clone();
    let mut tried = vec![Tried {
        assign: host.clone(),
        solved: None,
        predicted: host_predicted,
        replayed: r0.clone(),
    }];
    let measured = |a: &[usize], r: &Replayed| model::Measured {
        at: a.to_vec(),
        stage_end: r.stage_end.clone(),
        iteration: r.iteration_ns,
    };
    m.calibrate(wl, &measured(&host, &r0));
    let mut rounds = 0;
    let mut note = None;
    // a plan solved when no time was left to replay it
    let mut unreplayed: Option<Solved> = None;
    while rounds < po.replay_rounds {
        // a round is a solve and the replay of its plan (a replay taken 20 % longer than
        // the all-host one, to be safe); the rounds that still fit, each solve half as
        // long as its replay at least, share what is left
        let left = deadline.saturating_duration_since(Instant::now());
        let replay_est = replay_cost.mul_f64(1.2);
        let fit = (left.as_secs_f64() / (1.5 * replay_est.as_secs_f64()).max(1e-6)) as u32;
        if fit == 0 {
            note = Some(format!(
                "time limit: {rounds} plan(s) replayed (a replay takes {:.2} s)",
                replay_cost.as_secs_f64()
            ));
            if rounds == 0 {
                // no plan solved yet: the model, calibrated on the all-host replay, gets
                // what is left, so the limit never turns a better plan into the host's
                let within = PlanOptions {
                    time_limit: left,
                    ..po.clone()
                };
                unreplayed = Some(solve(m, &within, Instant::now())?);
            }
            break;
        }
        let share = (po.replay_rounds - rounds).min(fit);
        rounds += 1;
        let round_po = PlanOptions {
            time_limit: left.saturating_sub(replay_est * share) / share,
            ..po.clone()
        };
        let solved = solve(m, &round_po, Instant::now())?;
        if tried.iter().any(|t| t.assign == solved.assign) {
            break;
        }
        let predicted = solved.eval.t;
        let Some(r) = replay(m, &solved.assign, po, replay_deadline(started, po))? else {
            note = Some(format!(
                "time limit: the replay of round {rounds}'s plan did not finish ({} plan(s) replayed before it)",
                tried.len()
            ));
            if tried.len() == 1 {
                unreplayed = Some(solved);
            }
            break;
        };
        let close = (predicted - r.iteration_ns).abs() <= 0.02 * r.iteration_ns;
        m.calibrate(wl, &measured(&solved.assign, &r));
        tried.push(Tried {
            assign: solved.assign.clone(),
            solved: Some(solved),
            predicted,
            replayed: r,
        });
        if close {
            break;
        }
    }
    // the host plan's prediction: by the model calibrated on the last plan replayed, when
    // one was (not on its own replay)
    if tried.len() > 1 {
        let last = tried.last().expect("tried").assign.clone();
        let r = tried.last().expect("tried").replayed.clone();
        m.calibrate(wl, &measured(&last, &r));
        tried[0].predicted = m.evaluate(&host, &mut scratch).t;
    }
    if let Some(u) = unreplayed.filter(|u| u.eval.t < r0.iteration_ns) {
        let cut = note
            .as_deref()
            .is_some_and(|n| n.contains("did not finish"));
        return Ok(unverified(m, po, job, u, started, &r0, replay_cost, cut));
    }
    let best = (0..tried.len())
        .min_by(|&a, &b| {
            let (x, y) = (&tried[a].replayed, &tried[b].replayed);
            x.iteration_ns.total_cmp(&y.iteration_ns).then(a.cmp(&b))
        })
        .expect("the host plan was replayed");
    let host_replayed = tried[0].replayed.iteration_ns;
    let t = tried.swap_remove(best);
    // the windows stay those the plan was solved on ([`Solved::windows`]); the
    // evaluation is the last-calibrated model's
    let mut solved = t.solved.unwrap_or_else(|| Solved {
        windows: host_windows,
        ..fixed(m, &t.assign)
    });
    if best == 0 && tried.len() > 1 {
        solved.note = Some(format!(
            "no plan replayed faster than the all-host plan ({} tried)",
            tried.len()
        ));
    } else if let Some(n) = note {
        solved.note = Some(n);
    }
    let mut f = file(m, po, job, solved, started.elapsed());
    f.prediction.iteration_ns = t.predicted;
    f.prediction.host_iteration_ns = tried
        .first()
        .filter(|_| best != 0)
        .map_or(t.predicted, |h| h.predicted);
    f.verification = Some(Verification {
        replayed_ns: t.replayed.iteration_ns,
        error: (t.predicted - t.replayed.iteration_ns) / t.replayed.iteration_ns,
        host_replayed_ns: host_replayed,
    });
    Ok(f)
}

/// The model's plan `u`, solved after the all-host replay `r0` left no time to replay it
/// (or, `cut`, whose replay the time limit stopped): predicted by the model calibrated on
/// `r0`, not verified (no replay of its own), the all-host replay named in its note.
#[allow(clippy::too_many_arguments)]
fn unverified(
    m: &Model,
    po: &PlanOptions,
    job: BTreeMap<String, String>,
    u: Solved,
    started: Instant,
    r0: &Replayed,
    replay_cost: Duration,
    cut: bool,
) -> PlanFile {
    let why = format!(
        "time limit: the all-host plan replayed {:.3} ms (a replay takes {:.1} s); this plan was solved on the model calibrated on that replay{}, and is not replayed{}",
        r0.iteration_ns / 1e6,
        replay_cost.as_secs_f64(),
        if cut { "" } else { " with what was left" },
        if cut { " (its replay did not finish before the time limit)" } else { "" },
    );
    let mut f = file(m, po, job, u, started.elapsed());
    f.prediction.host_iteration_ns = r0.iteration_ns;
    append_note(&mut f.solver.note, why);
    f
}

/// Wall time one replay (trace generation included) is expected to take before any was
/// measured: the records the groups' collectives lower to on their host option, and as
/// many again for compute and pipeline records per collective step of a stage, at
/// [`REPLAY_NS_PER_RECORD`] each. An estimate that errs long: it only decides whether
/// the all-host plan is replayed before the plan.
fn replay_estimate(m: &Model, wl: &Workload) -> Duration {
    let colls: f64 = (0..m.groups.len())
        .map(|g| m.opts[g][model::host_index(&m.opts[g], &m.groups[g])].records)
        .sum();
    let ops = wl.world() as f64 * wl.microbatches as f64 * 2.0;
    Duration::from_secs_f64((2.0 * colls + ops) * REPLAY_NS_PER_RECORD * 1e-9)
}

/// Measured: GPT-3 175B TP8·PP16·DP64 on fat-tree k=32 generates and replays in ≈ 32 s
/// on this project's 2-core machine (`cargo bench --bench plan`, scale section).
pub const REPLAY_NS_PER_RECORD: f64 = 1500.0;

/// The plan when replays are dear: solve the uncalibrated model with what the replay of
/// its plan leaves, then replay the plan if that fits the time limit. The plan returned is
/// the model's (the all-host plan only when the model predicts nothing better); its
/// verification, when it was replayed, has no all-host replay to compare with (0).
fn tight(
    m: &Model,
    po: &PlanOptions,
    job: BTreeMap<String, String>,
    rp: &dyn Replayer,
    started: Instant,
    estimate: Duration,
    host_predicted: f64,
) -> Result<PlanFile, PlanError> {
    let deadline = started + po.time_limit;
    let left = deadline.saturating_duration_since(Instant::now());
    let replay_fits = estimate.mul_f64(1.2) < left.mul_f64(0.8);
    let budget = if replay_fits {
        left.saturating_sub(estimate.mul_f64(1.2))
    } else {
        left
    };
    let solved = solve(
        m,
        &PlanOptions {
            time_limit: budget,
            ..po.clone()
        },
        Instant::now(),
    )?;
    let predicted = solved.eval.t;
    let mut f = file(m, po, job, solved, started.elapsed());
    f.prediction.host_iteration_ns = host_predicted;
    let now_left = deadline.saturating_duration_since(Instant::now());
    let mut cut = false;
    if replay_fits && estimate.mul_f64(1.1) < now_left {
        match replay_until(rp, &f, replay_deadline(started, po))? {
            Some(r) => {
                f.verification = Some(Verification {
                    replayed_ns: r.iteration_ns,
                    error: (predicted - r.iteration_ns) / r.iteration_ns,
                    host_replayed_ns: 0.0,
                });
            }
            None => cut = true,
        }
        f.solver.solve_time_s = started.elapsed().as_secs_f64();
    }
    let why = format!(
        "replays are dear here (~{:.0} s each, estimated): the plan was solved on the uncalibrated model{}",
        estimate.as_secs_f64(),
        if f.verification.is_some() {
            " and replayed alone"
        } else if cut {
            " and not replayed (its replay did not finish before the time limit)"
        } else {
            " and not replayed (no time left)"
        }
    );
    append_note(&mut f.solver.note, why);
    Ok(f)
}

/// When the repair loop's replays must have ended: 2 % of the time limit stays for the
/// wrap-up (the plan file, the host plan's re-evaluation), as in [`solve`].
fn replay_deadline(started: Instant, po: &PlanOptions) -> Instant {
    started + po.time_limit.mul_f64(0.98)
}

/// `plan` replayed by `rp`, `None` when `until` stopped it.
fn replay_until(
    rp: &dyn Replayer,
    plan: &PlanFile,
    until: Instant,
) -> Result<Option<Replayed>, PlanError> {
    match rp.replay(plan, Some(until)) {
        Ok(r) => Ok(Some(r)),
        Err(ReplayFailure::OutOfTime) => Ok(None),
        Err(ReplayFailure::Failed(e)) => {
            Err(PlanError::Model(format!("replaying a candidate plan: {e}")))
        }
    }
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
    let first = PlanOptions {
        time_limit: po.time_limit / (po.replay_rounds + 2),
        ..po.clone()
    };
    let solved = solve(m, &first, Instant::now())?;
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
    // the heuristic's constructions place required groups first-fit; when they find no
    // fit, the exact feasibility program gives a start or proves that none exists
    let (a, start_note) = match heuristic::run(m, exposed, h_deadline) {
        Some(a) => (a, None),
        None => {
            let start = feasibility::start_or_proof(m, deadline)?;
            (
                heuristic::improve(m, exposed, h_deadline, start),
                Some("the heuristic's constructions found no fit for the required groups; the search started from the exact feasibility program's"),
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
