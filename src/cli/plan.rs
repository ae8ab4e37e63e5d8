//! `ina3d plan`: decide, for every aggregation group of a job, host algorithm or INA, the
//! tree and the slots per switch; write `plan.json` and print the same as a summary.

use super::job::JobArgs;
use anyhow::{bail, Context};
use ina3d::formats::plan_json::{self, Decision, PlanFile, Verification};
use ina3d::pipeline::{generate_trace, make_plan, replay_records, Job};
use ina3d::plan::model::Settings;
use ina3d::plan::options::Form;
use ina3d::plan::{Objective, PlanOptions, SolverKind};
use ina3d::replay::RateModel;
use ina3d::trace::{self, parse_classes, InaMode, TraceOptions};
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `ina3d plan`.
#[derive(clap::Args, Debug)]
#[command(after_long_help = PLAN_HELP)]
pub struct Args {
    /// Megatron log, launch script, config file (TOML/JSON) or preset name (e.g. gpt3-13b).
    pub input: String,
    /// Topology: a builder spec (`fat-tree:k=8`, …) or an HPCC topology.txt.
    #[arg(long)]
    pub topology: String,
    /// Traffic classes the plan may aggregate.
    #[arg(long, default_value = "tp,dp,emb")]
    pub ina_classes: String,
    /// ECMP / tie-break seed (the plan holds for this seed's routes).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// The job (the same options as `ina3d trace`; the slot policy is `planned`).
    #[command(flatten)]
    pub job: JobArgs,
    /// Output plan (JSON).
    #[arg(short = 'o', long)]
    pub output: PathBuf,
    /// The rate model the plan's candidates are verified and repaired under (their
    /// replays), as `ina3d replay` takes it.
    #[command(flatten)]
    pub rate: super::replay::RateArgs,
    /// Concurrent aggregation trees per switch (SHARP-like hardware: 1); default unlimited.
    #[arg(long, value_name = "Q")]
    pub tree_quota: Option<u32>,
    /// What to minimise: iteration (predicted iteration time) or exposed (Σ exposed
    /// communication over groups).
    #[arg(long, default_value = "iteration", value_parser = super::keyword::<Objective>(Objective::NAMES))]
    pub objective: Objective,
    /// ilp (exact integer program; best plan so far at the time limit, marked with its
    /// gap), heuristic (greedy + local search, scales to thousands of GPUs), auto (ilp when
    /// the instance is small enough, never worse than the heuristic).
    #[arg(long, default_value = "auto", value_parser = super::keyword::<SolverKind>(SolverKind::NAMES))]
    pub solver: SolverKind,
    /// Wall-time safety net of the whole plan, seconds: the model's build, the solves and
    /// the repair loop's replays. The search is bounded by work (model evaluations,
    /// branch-and-bound nodes, replays), so the same inputs give the same plan; a solve or
    /// replay still running at the limit is stopped, and the plan says so
    /// (`solver.hit_time_limit`).
    #[arg(long, default_value_t = ina3d::pipeline::DEFAULT_PLAN_TIME_LIMIT, value_name = "S")]
    pub time_limit: f64,
    /// Reservations a tree may take, as fractions of one window (`--ina-window`).
    #[arg(long, default_value = "1,0.5,0.25", value_name = "F,F,…")]
    pub slot_levels: String,
    /// Classes that must aggregate (no host option), e.g. `dp`.
    #[arg(long, value_name = "CLASSES")]
    pub require: Option<String>,
    /// Aggregation forms offered: hierarchical, root-only, steiner (on general graphs:
    /// members joined to the nearest tree node), rina.
    #[arg(
        long,
        default_value = "hierarchical,root-only,steiner,rina",
        value_name = "FORMS"
    )]
    pub forms: String,
    /// Lower the plan, replay it and the all-host trace, and record the prediction error
    /// in the plan (`verification`); the repair loop (`--replay-rounds`) does it anyway.
    #[arg(long)]
    pub verify: bool,
    /// Verify and repair: replay the all-host plan, then up to N times solve the model
    /// calibrated on the last replay and replay its plan; the fastest replayed plan is
    /// kept (never one slower than the all-host plan), with the prediction the model made
    /// before replaying it. 0: the model alone. Counts against --time-limit.
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub replay_rounds: u32,
}

const PLAN_HELP: &str = "\
The plan is made for one job on one topology with one ECMP seed and INA switch model;
`ina3d trace --plan plan.json` with the same options lowers it (and names any option
that differs). A job is called infeasible only with a proof — a counting argument or the
exact program over the groups that must aggregate (--require) — naming the groups, the
switches and the constraint (--ina-slots, --tree-quota); when the time limit ends the search
before a plan or a proof, the error says so (raise --time-limit).

Topology specs: see `ina3d trace --help`.";

fn settings(a: &Args) -> anyhow::Result<Settings> {
    let levels: Vec<f64> = a
        .slot_levels
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<f64>().ok().filter(|f| *f > 0.0 && *f <= 1.0))
        .collect::<Option<_>>()
        .with_context(|| format!("--slot-levels `{}`: fractions in (0, 1]", a.slot_levels))?;
    if levels.is_empty() {
        bail!("--slot-levels: give at least one fraction of a window");
    }
    let mut forms = Vec::new();
    let mut rina = false;
    for f in a.forms.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match f {
            "hierarchical" => forms.push(Form::Hierarchical),
            "root-only" => forms.push(Form::RootOnly),
            "steiner" => forms.push(Form::Steiner),
            "rina" => rina = true,
            other => {
                bail!("--forms: unknown form `{other}` (expected hierarchical, root-only, steiner, rina)")
            }
        }
    }
    let required = match &a.require {
        Some(r) => parse_classes(r)
            .map_err(anyhow::Error::msg)
            .context("--require")?,
        None => vec![],
    };
    Ok(Settings {
        slots: a.job.ina_slots,
        quota: a.tree_quota,
        levels,
        classes: parse_classes(&a.ina_classes)
            .map_err(anyhow::Error::msg)
            .context("--ina-classes")?,
        required,
        forms,
        rina,
    })
}

/// Run `ina3d plan`.
pub fn run(a: Args) -> anyhow::Result<()> {
    if !ina3d::pipeline::plan_time_limit_ok(a.time_limit) {
        bail!(
            "--time-limit {}: expected a number of seconds above 0 and at most {} (a day)",
            a.time_limit,
            ina3d::pipeline::MAX_PLAN_TIME_LIMIT
        );
    }
    if a.job.ina_policy.is_some() {
        bail!("--ina-policy: a plan's slot policy is always `planned` (drop the flag)");
    }
    let classes = parse_classes(&a.ina_classes)
        .map_err(anyhow::Error::msg)
        .context("--ina-classes")?;
    let spec = a
        .job
        .spec(&a.input, &a.topology, InaMode::Planned, classes, a.seed)?;
    let opts = spec.trace_options()?;
    let prepared = Job::prepare(&spec)?;
    for w in &prepared.warnings {
        eprintln!("warning: {w}");
    }
    let po = PlanOptions {
        settings: settings(&a)?,
        objective: a.objective,
        solver: a.solver,
        time_limit: Duration::from_secs_f64(a.time_limit),
        replay_rounds: a.replay_rounds,
        ..PlanOptions::default()
    };
    let bar = ina3d::progress::spinner(&format!(
        "planning ({}, time limit {} s)",
        a.solver, a.time_limit
    ));
    let model = a.rate.model();
    let planned = make_plan(&prepared, &opts, &po, model);
    bar.finish_and_clear();
    let mut p = planned?;
    if a.verify && p.verification.is_none() {
        p.verification = Some(verify(&prepared, &opts, &p, model)?);
    }
    plan_json::write(&a.output, &p)?;
    print_summary(&p);
    println!("wrote {}", a.output.display());
    Ok(())
}

/// Lower the plan and the all-host trace, replay both, compare with the prediction.
fn verify(
    job: &Job,
    opts: &TraceOptions,
    p: &PlanFile,
    model: RateModel,
) -> anyhow::Result<Verification> {
    let replayed = |o: &TraceOptions, name: &str| -> anyhow::Result<f64> {
        let t = generate_trace(job, o, None, true, &mut |_| {})?;
        let r = replay_records(
            &t.records,
            &t.header,
            &job.topology,
            o.seed,
            name,
            false,
            model,
        )?;
        Ok(r.summary.iteration_time_ns as f64)
    };
    let planned = trace::planned::lowering_options(opts, p);
    let mut host = opts.clone();
    host.ina.set_mode(InaMode::Off);
    let t = replayed(&planned, "the plan").context("replaying the plan")?;
    let h = replayed(&host, "the all-host trace").context("replaying the all-host trace")?;
    Ok(Verification {
        replayed_ns: t,
        error: (p.prediction.iteration_ns - t) / t,
        host_replayed_ns: h,
    })
}

/// The plan as text: solver line, prediction, one line per group that aggregates.
pub fn print_summary(p: &PlanFile) {
    let s = &p.solver;
    let ms = |ns: f64| ns / 1e6;
    println!(
        "plan: solver {} (asked {}), {}: objective {:.3} ms, bound {:.3} ms, gap {:.2} %, {:.2} s (limit {} s), {} variables, {} constraints",
        s.used, s.requested, s.status, ms(s.objective_ns), ms(s.bound_ns), 100.0 * s.gap, s.solve_time_s, s.time_limit_s, s.variables, s.constraints
    );
    if let Some(n) = &s.note {
        println!("  note: {n}");
    }
    if s.hit_time_limit {
        println!(
            "  the time limit ({} s) cut the search or a replay before its work budget: this plan may differ on a faster or idler machine",
            s.time_limit_s
        );
    }
    if let Some(f) = &p.fixed_policy {
        println!("  answer: the fixed policy {f} (it replayed fastest; `ina3d trace --plan` lowers it as `ina3d run` does)");
    }
    if let Some(g) = s.exact_gain {
        println!(
            "  heuristic vs exact plan, replayed: the heuristic's {:+.2} % against the exact solver's",
            100.0 * g
        );
    }
    if !p.candidates.is_empty() {
        let list: Vec<String> = p
            .candidates
            .iter()
            .map(|c| {
                let name = match &c.candidate {
                    plan_json::Candidate::Plan { solver, round } => format!("{solver} r{round}"),
                    plan_json::Candidate::Fixed { policy } => policy.to_string(),
                };
                match c.replayed_ns {
                    Some(t) => format!("{name} {:.3}", ms(t)),
                    None => format!("{name} (failed)"),
                }
            })
            .collect();
        println!("  replayed candidates (ms): {}", list.join(", "));
    }
    let pr = &p.prediction;
    println!(
        "  predicted iteration {:.3} ms (all host: {:.3} ms, {:+.2} %), exposed communication {:.3} ms",
        ms(pr.iteration_ns),
        ms(pr.host_iteration_ns),
        100.0 * (pr.iteration_ns - pr.host_iteration_ns) / pr.host_iteration_ns,
        ms(pr.exposed_ns)
    );
    if let Some(v) = &p.verification {
        println!(
            "  replayed iteration {:.3} ms (all host {:.3} ms): prediction error {:+.2} %",
            ms(v.replayed_ns),
            ms(v.host_replayed_ns),
            100.0 * v.error
        );
    }
    let (mut ina, mut host) = (0, 0);
    for g in &p.groups {
        let ranks: Vec<String> = g.members.iter().map(|r| r.0.to_string()).collect();
        let what = match &g.decision {
            Decision::Host => {
                host += 1;
                continue;
            }
            Decision::Tree { form, root, edges } => {
                format!("{form} tree, root {root}, {} edges", edges.len())
            }
            Decision::Rina { tors } => format!("rina over ToRs {}", ina3d::units::list(tors)),
        };
        ina += 1;
        if ina <= 40 {
            println!(
                "  {:<4} ranks {:<24} {what}, {} slots/switch, collective {:.3} ms (host {:.3} ms) ×{}",
                g.class.as_str(),
                ranks.join(","),
                g.slots,
                ms(g.collective_ns),
                ms(g.host_collective_ns),
                g.collectives
            );
        }
    }
    if ina > 40 {
        println!(
            "  … {} more aggregating groups (see the plan file)",
            ina - 40
        );
    }
    println!("  {ina} groups aggregate, {host} stay on the host algorithm");
}
