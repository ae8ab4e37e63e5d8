//! The main job (`ina3d run`, and every sweep cell): for each ECMP seed and each policy,
//! trace → replay (→ ns-3 → compare), then `results.csv`.
//!
//! Layout of the output directory with one seed:
//!
//! ```text
//! results.csv                 one row per policy (docs/outputs.md)
//! results.svg                 its picture: speed-ups (with their seed range), exposed time
//! <policy>/trace.csv.gz       the trace of that policy (unless traces are off)
//! <policy>/plan.json          the plan of a planner policy (plan, plan-exact, sharp)
//! <policy>/replay/            fct.csv, fct.txt (unless flows are off), summary.csv, links.csv, switches.csv
//! <policy>/timeline.json      the replay as Chrome/Perfetto trace events (with `timeline`)
//! <policy>/ns3/               ns-3 inputs and outputs (when ns-3 ran)
//! <policy>/compare/           fct_error.csv, iteration.csv, flows.csv (when ns-3 ran)
//! ```
//!
//! With several seeds each seed has that layout under `seed-<s>/` (its own `results.csv`),
//! and the top `results.csv` gives, per policy, the median over the seeds and the range of
//! the iteration time and the speed-up, with the seeds listed ([`crate::report::seeds_table`]).
//!
//! The per-flow comparison (`<policy>/compare/`) joins tables with polars: a build without
//! the `tables` feature runs ns-3 and puts its iteration time and speed-up in `results.csv`,
//! and says where `ina3d compare` (of a full build) would write the rest.

use super::stages::{
    emit_ns3, generate_trace, glue, replay_records_timeline, replay_report, run_ns3, trace_report,
};
use super::{
    Job, Ns3Choice, PipelineError, Policy, PolicyContext, Reporter, RunSpec, AUTO_NS3_MAX_NET_BYTES,
};
use crate::fct::Summary;
use crate::ns3::{self, EmitOptions};
use crate::report::{self, PolicyResult, ResultsTable};
use crate::trace::TraceOptions;
use std::path::{Path, PathBuf};

/// What a run produced.
#[derive(Debug)]
pub struct RunOutcome {
    /// Per seed, one result per policy in the spec's order.
    pub per_seed: Vec<(u64, Vec<PolicyResult>)>,
    /// The table written to `results.csv`.
    pub table: ResultsTable,
    /// `results.csv`.
    pub results: PathBuf,
    /// `results.svg`, the picture of the table ([`crate::report::plot`]).
    pub picture: PathBuf,
    /// Why ns-3 did not run on its own, when it did not run at all and was not turned off.
    pub ns3_note: Option<String>,
    /// Whether ns-3 ran (for at least one policy).
    pub ns3_ran: bool,
}

/// Runs `spec` into `out`. Output files name themselves (trace names in summaries) under
/// `name_root` instead of `out` — a sweep writes a cell into a temporary directory that is
/// renamed when complete; the command line passes `out` twice.
pub fn run(
    spec: &RunSpec,
    out: &Path,
    name_root: &Path,
    rep: &mut dyn Reporter,
) -> Result<RunOutcome, PipelineError> {
    spec.validate()?;
    let job = Job::prepare(&spec.job)?;
    // marked incomplete until results.csv and its picture are written; what an earlier
    // run left there is cleared first
    let set = begin_output(spec, out)?;
    for w in &job.warnings {
        rep.warn(w);
    }
    let base = spec.job.trace_options()?;
    let mut ctx = Runner {
        spec,
        job: &job,
        ns3_installed: Path::new(ns3::run::NS3_HEADER).exists(),
        glue: None,
        ns3_ran: false,
    };
    let several = spec.seeds.len() > 1;
    let steps = spec.seeds.len() * spec.policies.len();
    let per_seed = match seed_workers(spec) {
        1 => {
            let mut per_seed = Vec::new();
            for (i, &seed) in spec.seeds.iter().enumerate() {
                per_seed.push((seed, ctx.seed(i, seed, &base, out, name_root, rep)?));
            }
            per_seed
        }
        workers => {
            let (per_seed, ns3_ran) = parallel_seeds(&ctx, workers, &base, out, name_root, rep)?;
            ctx.ns3_ran |= ns3_ran;
            per_seed
        }
    };
    rep.step(steps, steps, "results");
    let table = if several {
        report::seeds_table(&per_seed)?
    } else {
        report::results_table(&per_seed[0].1)?
    };
    let results = out.join("results.csv");
    table.write_csv(&results)?;
    let picture = out.join("results.svg");
    report::plot::write_svg(
        &picture,
        &format!("{} on {}", spec.job.input, spec.job.topology),
        "seeds",
        &report::plot::figures(&table),
    )?;
    set.finish()?;
    let ns3_note = (!ctx.ns3_ran && spec.ns3 == Ns3Choice::Auto).then(|| {
        if !spec.flows {
            "flows are off: the comparison needs the replay's per-flow files".to_string()
        } else if ctx.ns3_installed {
            "the trace moves more than 256 MiB over the network".to_string()
        } else {
            "not installed".to_string()
        }
    });
    Ok(RunOutcome {
        per_seed,
        table,
        results,
        picture,
        ns3_note,
        ns3_ran: ctx.ns3_ran,
    })
}

/// Marks `out` as being written by this run (command, seeds, the entries it will hold) and
/// clears what an earlier run left there: its listed entries, and in a directory written
/// before markers listed them, every `seed-<n>` and policy directory and the results table
/// and picture. A re-run never leaves another seed's or policy's results beside its own.
fn begin_output(
    spec: &RunSpec,
    out: &Path,
) -> Result<crate::formats::atomic::OutputSet, PipelineError> {
    let seeds: Vec<String> = spec.seeds.iter().map(u64::to_string).collect();
    let mut members: Vec<String> = if spec.seeds.len() > 1 {
        seeds.iter().map(|s| format!("seed-{s}")).collect()
    } else {
        spec.policies
            .iter()
            .map(|p| p.as_str().to_string())
            .collect()
    };
    members.extend(["results.csv".to_string(), "results.svg".to_string()]);
    let owned = |name: &str| {
        let seed_dir = name
            .strip_prefix("seed-")
            .is_some_and(|n| n.parse::<u64>().is_ok());
        seed_dir || name.parse::<Policy>().is_ok() || name == "results.csv" || name == "results.svg"
    };
    let what = format!("ina3d run, seeds {}", seeds.join(" "));
    Ok(crate::formats::atomic::OutputSet::with_members(
        out, &what, members, owned,
    )?)
}

/// Payload bytes a trace puts on the network, from the replayer's summary.
fn net_bytes(s: &Summary) -> u64 {
    s.tp_bytes + s.pp_bytes + s.dp_bytes + s.emb_bytes
}

struct Runner<'a> {
    spec: &'a RunSpec,
    job: &'a Job,
    ns3_installed: bool,
    glue: Option<PathBuf>,
    ns3_ran: bool,
}

impl Runner<'_> {
    /// Every policy at the `i`-th seed, `seed`, into `out` (`out/seed-<seed>` with several
    /// seeds, with that seed's own `results.csv`).
    fn seed(
        &mut self,
        i: usize,
        seed: u64,
        base: &TraceOptions,
        out: &Path,
        name_root: &Path,
        rep: &mut dyn Reporter,
    ) -> Result<Vec<PolicyResult>, PipelineError> {
        let spec = self.spec;
        let several = spec.seeds.len() > 1;
        let steps = spec.seeds.len() * spec.policies.len();
        let sub = |d: &Path| {
            if several {
                d.join(format!("seed-{seed}"))
            } else {
                d.to_path_buf()
            }
        };
        let (dir, names) = (sub(out), sub(name_root));
        let seeded = TraceOptions {
            seed,
            ..base.clone()
        };
        let mut rows = Vec::new();
        for &p in &spec.policies {
            let tag = if several {
                format!("{p} seed {seed}")
            } else {
                p.to_string()
            };
            rep.step(i * spec.policies.len() + rows.len(), steps, &tag);
            let r = self
                .policy(
                    p,
                    &seeded,
                    &dir.join(p.as_str()),
                    &names.join(p.as_str()),
                    &tag,
                    rep,
                )
                .map_err(|e| PipelineError::Policy {
                    policy: p,
                    seed,
                    source: Box::new(e),
                })?;
            rows.push(r);
        }
        if several {
            report::results_table(&rows)?.write_csv(&dir.join("results.csv"))?;
        }
        Ok(rows)
    }

    /// One policy at one seed into `dir` (named `names` in its outputs).
    fn policy(
        &mut self,
        p: Policy,
        base: &TraceOptions,
        dir: &Path,
        names: &Path,
        tag: &str,
        rep: &mut dyn Reporter,
    ) -> Result<PolicyResult, PipelineError> {
        let opts = p.trace_options(&PolicyContext {
            job: self.job,
            base,
            dir,
            plan_time_limit: std::time::Duration::from_secs_f64(self.spec.plan_time_limit),
            rate_model: self.spec.rate_model(),
        })?;
        if let Some(f) = opts.plan.as_ref().and_then(|p| p.fixed_policy) {
            rep.line(&format!(
                "[{tag}] plan: the answer is the fixed policy {f} (it replayed fastest of the planner's candidates)"
            ));
        } else if let Some(plan) = &opts.plan {
            rep.line(&format!(
                "[{tag}] plan: solver {} ({}), predicted iteration {:.3} ms (all host {:.3} ms), gap {:.2} %, {:.2} s",
                plan.solver.used,
                plan.solver.status,
                plan.prediction.iteration_ns / 1e6,
                plan.prediction.host_iteration_ns / 1e6,
                100.0 * plan.solver.gap,
                plan.solver.solve_time_s
            ));
        }
        std::fs::create_dir_all(dir).map_err(PipelineError::io(dir))?;
        let file = self.spec.traces.then(|| dir.join("trace.csv.gz"));
        let name = match &file {
            Some(_) => names.join("trace.csv.gz").display().to_string(),
            None => format!("{} (in memory)", names.join("trace").display()),
        };
        let t = generate_trace(self.job, &opts, file.as_deref(), true, &mut |_| {})?;
        rep.line(&prefixed(tag, &trace_report(self.job, &opts, &t)));
        let replay_dir = dir.join("replay");
        let timeline = self
            .spec
            .timeline
            .then(crate::replay::timeline::TimelineOptions::default);
        let (r, made) = replay_records_timeline(
            &t.records,
            &t.header,
            &self.job.topology,
            base.seed,
            &name,
            rep.bars(),
            self.spec.rate_model(),
            timeline.as_ref(),
        )?;
        if let Some(t) = made {
            let path = dir.join("timeline.json");
            if let Some(note) = &t.note {
                rep.warn(&format!("[{tag}] {note}"));
            }
            t.write(&path)?;
            rep.line(&format!(
                "[{tag}] timeline: {} spans on {} ranks -> {}",
                t.spans(),
                t.ranks,
                path.display()
            ));
        }
        let per_record = if self.spec.flows {
            crate::replay::PerRecord::Write
        } else {
            crate::replay::PerRecord::Skip
        };
        crate::replay::write_outputs_with(&replay_dir, &r, per_record)?;
        rep.line(&format!(
            "[{tag}] replay: {}",
            replay_report(&r, &replay_dir)
        ));
        let ns3 = match self.spec.ns3 {
            Ns3Choice::On => true,
            Ns3Choice::Off => false,
            Ns3Choice::Auto => {
                self.spec.flows
                    && self.ns3_installed
                    && net_bytes(&r.summary) <= AUTO_NS3_MAX_NET_BYTES
            }
        };
        let ns3 = if ns3 {
            // the header's model: it carries a plan's slot reservations
            let model = ns3::ina_model(&t.header).map_err(|e| PipelineError::Ns3(Box::new(e)))?;
            Some(self.ns3(&t.records, &model, base.seed, dir, &name, tag, rep)?)
        } else {
            None
        };
        Ok(PolicyResult {
            policy: p.to_string(),
            ina_slots: u64::from(self.spec.job.ina.slots),
            replay: r.summary,
            ns3,
            plan: opts.plan.as_ref().map(report::PlanFigures::of),
        })
    }

    /// ns-3 on one policy's records, compared with its replay in `dir/replay`.
    #[allow(clippy::too_many_arguments)]
    fn ns3(
        &mut self,
        records: &[crate::record::FlowRecord],
        model: &ns3::InaConfig,
        seed: u64,
        dir: &Path,
        name: &str,
        tag: &str,
        rep: &mut dyn Reporter,
    ) -> Result<Summary, PipelineError> {
        let ns3_dir = dir.join("ns3");
        let emit = EmitOptions {
            seed,
            routing: self.spec.job.routing,
            gpu_type: "A100".into(),
            tcp: self.spec.tcp_connections,
            transport: self.spec.transport,
            ..EmitOptions::default()
        };
        let e = emit_ns3(records, model, &self.job.topology, &emit, &ns3_dir, name)?;
        rep.line(&prefixed(tag, &super::emit_report(&e, &ns3_dir, seed)));
        let bin = match &self.glue {
            Some(b) => b.clone(),
            None => self.glue.insert(glue()?).clone(),
        };
        let bar = rep.bars().then(super::ns3_bar);
        let run = run_ns3(&bin, &ns3_dir, |done, total| {
            if let Some(b) = &bar {
                b.set_length(total);
                b.set_position(done);
            }
        });
        if let Some(b) = bar {
            b.finish_and_clear();
        }
        let run = run?;
        rep.line(&format!("[{tag}] {}", super::ns3_report(&run, &ns3_dir)));
        compare_dirs(dir, tag, rep)?;
        self.ns3_ran = true;
        Ok(run.summary)
    }
}

/// The replay and ns-3 outputs of one policy compared flow by flow into `dir/compare`.
#[cfg(feature = "tables")]
fn compare_dirs(dir: &Path, tag: &str, rep: &mut dyn Reporter) -> Result<(), PipelineError> {
    let c = report::compare_with(
        &dir.join("replay"),
        &dir.join("ns3"),
        &report::CompareOptions::default(),
    )?;
    c.write(&dir.join("compare"))?;
    rep.line(&format!("[{tag}] replayer vs ns-3:\n{}", c.summary_text()?));
    Ok(())
}

/// Without polars there is no per-flow join: say how to make it.
#[cfg(not(feature = "tables"))]
fn compare_dirs(dir: &Path, tag: &str, rep: &mut dyn Reporter) -> Result<(), PipelineError> {
    rep.line(&format!(
        "[{tag}] per-flow comparison not made (this build has no `tables` feature): \
         `ina3d compare --replay {0}/replay --ns3 {0}/ns3 -o {0}/compare` from a default build",
        dir.display()
    ));
    Ok(())
}

/// How many seeds run at once: one per core, at most one per seed; one when ns-3 is asked
/// for on every policy (packet-level runs hold far more memory than replays). Seeds are
/// independent (their own directories, their own routes), so the results do not depend on
/// this; only the order of the stage messages does.
fn seed_workers(spec: &RunSpec) -> usize {
    if spec.seeds.len() < 2 || spec.ns3 == Ns3Choice::On {
        return 1;
    }
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(spec.seeds.len())
}

/// A stage message of a seed running on a worker thread, for the run's reporter.
enum Message {
    Line(String),
    Warn(String),
    /// A policy started (the main thread numbers the steps).
    Step(String),
}

/// The reporter of a worker thread: forwards to the main thread, draws no bars.
struct Forward(std::sync::mpsc::Sender<Message>);

impl Reporter for Forward {
    fn line(&mut self, text: &str) {
        // the receiver lives until every worker has ended
        let _ = self.0.send(Message::Line(text.into()));
    }
    fn warn(&mut self, text: &str) {
        let _ = self.0.send(Message::Warn(text.into()));
    }
    fn step(&mut self, _done: usize, _total: usize, what: &str) {
        let _ = self.0.send(Message::Step(what.into()));
    }
}

type SeedRows = Result<Vec<PolicyResult>, PipelineError>;

/// Each seed with its rows, in seed order, and whether ns-3 ran.
type AllSeeds = (Vec<(u64, Vec<PolicyResult>)>, bool);

/// The seeds on `workers` threads, each taking the next seed not started; their messages
/// reach `rep` on this thread as they come. Returns the rows in seed order (the first
/// failing seed's error, in seed order; no seed starts after a failure) and whether ns-3
/// ran.
fn parallel_seeds(
    ctx: &Runner<'_>,
    workers: usize,
    base: &TraceOptions,
    out: &Path,
    name_root: &Path,
    rep: &mut dyn Reporter,
) -> Result<AllSeeds, PipelineError> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let seeds = &ctx.spec.seeds;
    let steps = seeds.len() * ctx.spec.policies.len();
    let next = AtomicUsize::new(0);
    let ns3_ran = AtomicBool::new(false);
    let slots: Vec<std::sync::Mutex<Option<SeedRows>>> =
        seeds.iter().map(|_| std::sync::Mutex::new(None)).collect();
    let (tx, rx) = std::sync::mpsc::channel::<Message>();
    std::thread::scope(|s| {
        for _ in 0..workers {
            let (tx, next, ns3_ran, slots) = (tx.clone(), &next, &ns3_ran, &slots);
            s.spawn(move || {
                let mut fwd = Forward(tx);
                let mut runner = Runner {
                    spec: ctx.spec,
                    job: ctx.job,
                    ns3_installed: ctx.ns3_installed,
                    glue: None,
                    ns3_ran: false,
                };
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(&seed) = seeds.get(i) else { break };
                    let rows = runner.seed(i, seed, base, out, name_root, &mut fwd);
                    if rows.is_err() {
                        next.store(seeds.len(), Ordering::SeqCst);
                    }
                    *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(rows);
                }
                if runner.ns3_ran {
                    ns3_ran.store(true, Ordering::SeqCst);
                }
            });
        }
        drop(tx);
        let mut done = 0;
        for m in rx {
            match m {
                Message::Line(t) => rep.line(&t),
                Message::Warn(t) => rep.warn(&t),
                Message::Step(what) => {
                    rep.step(done, steps, &what);
                    done += 1;
                }
            }
        }
    });
    let mut per_seed = Vec::with_capacity(seeds.len());
    for (slot, &seed) in slots.into_iter().zip(seeds) {
        // seeds are handed out in order: every seed before a failure has its rows, and
        // none after it started
        match slot.into_inner().unwrap_or_else(|e| e.into_inner()) {
            Some(rows) => per_seed.push((seed, rows?)),
            None => break,
        }
    }
    Ok((per_seed, ns3_ran.load(Ordering::SeqCst)))
}

/// `text` with `[tag] ` before its first line.
fn prefixed(tag: &str, text: &str) -> String {
    format!("[{tag}] {}", text.trim_end())
}
