//! One in-process entry per stage: trace (to a file and/or memory), replay (of records or of
//! a trace file), ns-3 (emit, build, run). Each returns data; the `*_report` functions give
//! the text the command line prints, so a sweep cell's log says the same.

use super::{GeneratedTrace, Job, PipelineError};
use crate::formats::write_atomic;
use crate::ns3::{self, EmitOptions, EmitReport, InaConfig};
use crate::record::FlowRecord;
use crate::replay::budget::{self, MemoryBudget};
use crate::replay::timeline::{Timeline, TimelineOptions, TimelineSampler};
use crate::replay::{self, RecordTable, ReplayOptions, ReplayResult};
use crate::topology::{Routing, RoutingMode, Topology};
use crate::trace::{self, TraceHeader, TraceOptions, TraceReader, TraceStats, TraceWriter};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The plan of `job` for `opts` (INA mode `planned`: its ECMP seed, INA switches, payload
/// and window), made for — and recording — the trace header those options give, so
/// lowering it with the same options is accepted (`ina3d plan`, the run's planner policies).
/// Its candidates are verified and repaired by replays under `model`, the rate model the
/// plan will be judged by (the run's, the cluster's).
pub fn make_plan(
    job: &Job,
    opts: &TraceOptions,
    po: &crate::plan::PlanOptions,
    model: replay::RateModel,
) -> Result<crate::formats::plan_json::PlanFile, PipelineError> {
    let header = trace::header(&job.cfg, &job.workload, &job.topology, opts);
    let replayer = PlanReplayer { job, opts, model };
    crate::plan::plan(
        &job.workload,
        &job.topology,
        opts,
        po,
        trace::planned::plan_job(&header),
        Some(&replayer),
    )
    .map_err(|e| PipelineError::Plan(Box::new(e)))
}

/// Replays a candidate plan of `job` as `ina3d trace --plan` and `ina3d replay` would (in
/// memory, under `model`): the planner's verification and repair ([`crate::plan::plan`]).
pub struct PlanReplayer<'a> {
    /// The job.
    pub job: &'a Job,
    /// Its trace options (the plan's seed, INA switches, payload, window).
    pub opts: &'a TraceOptions,
    /// The rate model the candidates are replayed under.
    pub model: replay::RateModel,
}

impl crate::plan::Replayer for PlanReplayer<'_> {
    fn replay(
        &self,
        plan: &crate::formats::plan_json::PlanFile,
        deadline: Option<std::time::Instant>,
    ) -> Result<crate::plan::Replayed, crate::plan::ReplayFailure> {
        use crate::plan::ReplayFailure;
        let failed = |e: &PipelineError| ReplayFailure::Failed(super::error_chain(e));
        let o = trace::planned::lowering_options(self.opts, plan);
        let t = generate_trace(self.job, &o, None, true, &mut |_| {}).map_err(|e| failed(&e))?;
        if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
            return Err(ReplayFailure::OutOfTime);
        }
        let table = RecordTable::from_records(&t.records)
            .map_err(|e| ReplayFailure::Failed(format!("a candidate plan: {e}")))?;
        let r = replay_table_until(
            table,
            &t.header,
            &self.job.topology,
            o.seed,
            "a candidate plan",
            false,
            self.model,
            deadline,
        )
        .map_err(|e| match e {
            PipelineError::Replay { source, .. }
                if matches!(*source, replay::ReplayError::OutOfTime { .. }) =>
            {
                ReplayFailure::OutOfTime
            }
            e => failed(&e),
        })?;
        let mut stage_end = vec![0.0f64; self.job.workload.pp() as usize];
        for (rec, row) in t.records.iter().zip(r.row_iter()) {
            let pipeline = rec.microbatch.is_some() || rec.mode == crate::record::Mode::Compute;
            if let (Some(s), true) = (rec.stage, pipeline) {
                if let Some(e) = stage_end.get_mut(s as usize) {
                    *e = e.max(row.end_ns as f64);
                }
            }
        }
        Ok(crate::plan::Replayed {
            iteration_ns: r.summary.iteration_time_ns as f64,
            stage_end,
        })
    }
}

/// Generates the trace of `job` with `opts` into `file` (atomically; gzip when the name
/// ends in `.gz`) and/or into memory (`keep`). `progress` is called with the number of
/// records generated so far, every 65,536 records.
pub fn generate_trace(
    job: &Job,
    opts: &TraceOptions,
    file: Option<&Path>,
    keep: bool,
    progress: &mut dyn FnMut(u64),
) -> Result<GeneratedTrace, PipelineError> {
    let mut records = Vec::new();
    let (header, stats, path) = generate_into(job, opts, file, progress, &mut |r| {
        if keep {
            records.push(r);
        }
        Ok(())
    })?;
    Ok(GeneratedTrace {
        header,
        stats,
        records,
        path,
    })
}

/// [`generate_trace`] handing each record to `sink` (after writing it to `file`, if any)
/// instead of keeping it: the header, the counts and the file written.
fn generate_into(
    job: &Job,
    opts: &TraceOptions,
    file: Option<&Path>,
    progress: &mut dyn FnMut(u64),
    sink: &mut dyn FnMut(FlowRecord) -> Result<(), trace::TraceError>,
) -> Result<(TraceHeader, TraceStats, Option<PathBuf>), PipelineError> {
    let header = trace::header(&job.cfg, &job.workload, &job.topology, opts);
    let mut writer = file.map(|p| TraceWriter::create(p, &header)).transpose()?;
    let mut n = 0u64;
    let stats = trace::generate_workload(&job.workload, &job.topology, opts, &mut |r| {
        n += 1;
        if n.is_multiple_of(1 << 16) {
            progress(n);
        }
        if let Some(w) = writer.as_mut() {
            w.write(&r)?;
        }
        sink(r)
    })
    .map_err(|source| PipelineError::Generate {
        what: file.map_or("the trace".into(), |p| format!("`{}`", p.display())),
        source: Box::new(source),
    })?;
    let path = writer.map(TraceWriter::finish).transpose()?;
    Ok((header, stats, path))
}

/// What `ina3d trace` prints about a generated trace: file and record count, the layout,
/// the compute model, records and bytes per class and mode, and fallbacks.
pub fn trace_report(job: &Job, opts: &TraceOptions, t: &GeneratedTrace) -> String {
    let (wl, stats) = (&job.workload, &t.stats);
    let c = &wl.calibration;
    let mut s = String::new();
    let target = t.path.as_ref().map_or("trace in memory".into(), |p| {
        format!("wrote {}", p.display())
    });
    let _ = writeln!(s, "{target} ({} records)", stats.records);
    if let Some(p) = opts.plan.as_ref().filter(|p| p.fixed_policy.is_some()) {
        let _ = writeln!(
            s,
            "  lowered plan: its answer is the fixed policy {} (it replayed fastest of the planner's candidates)",
            p.fixed_policy.expect("filtered")
        );
    } else if let Some(p) = &opts.plan {
        let _ = writeln!(
            s,
            "  lowered plan ({} {}): predicted iteration {:.3} ms; `ina3d replay` prints its error",
            p.solver.used,
            p.solver.status,
            p.prediction.iteration_ns / 1e6
        );
    }
    let _ = writeln!(
        s,
        "  TP{} PP{} DP{} CP{} v{} on {} GPUs, m = {} micro-batches, warm-up per stage {:?}",
        wl.tp(),
        wl.pp(),
        wl.dp(),
        wl.groups.cp,
        wl.vpp,
        wl.world(),
        wl.microbatches,
        wl.stages.iter().map(|s| s.warmup).collect::<Vec<_>>()
    );
    if let Some(m) = &wl.moe {
        let _ = writeln!(
            s,
            "  MoE: {} experts, top-{}, EP{} expert-TP{} expert-DP{}, {} dispatcher, {} routing, {:.2} % of token copies dropped",
            m.num_experts,
            m.topk,
            wl.groups.ep,
            wl.groups.etp,
            wl.groups.edp,
            m.dispatcher.as_str(),
            m.routing,
            100.0 * m.dropped
        );
    }
    let _ = writeln!(
        s,
        "  NCCL channels per network collective: {}",
        stats.channels
    );
    let _ = writeln!(
        s,
        "  compute: {} at {} TF × MFU {} × calibration {:.4} ({})",
        c.gpu.name,
        c.gpu.peak_tflops,
        c.mfu,
        c.factor,
        c.source.as_str()
    );
    for ((class, mode), (count, bytes)) in &stats.by_class_mode {
        let _ = writeln!(
            s,
            "  {:<8} {:<8} {:>10} records {:>20} B",
            class.as_str(),
            mode.as_str(),
            count,
            bytes.0
        );
    }
    if stats.ina_fallbacks > 0 {
        let _ = writeln!(
            s,
            "  note: {} INA-eligible collectives had no aggregating switch above all their members (--ina-switches {}) and use the host algorithm",
            stats.ina_fallbacks, opts.ina.switches
        );
    }
    if stats.hd_fallbacks > 0 {
        let _ = writeln!(s, "  note: {} halving-doubling collectives had a non-power-of-two group and used the ring", stats.hd_fallbacks);
    }
    s
}

/// The topology a trace header names, if any.
pub fn header_topology(h: &TraceHeader) -> Option<&str> {
    h.get("topology").map(str::trim).filter(|s| !s.is_empty())
}

/// The ECMP seed a trace header names, if any; a malformed one is an error naming `trace`.
pub fn header_seed(h: &TraceHeader, trace: &Path) -> Result<Option<u64>, PipelineError> {
    h.get("seed")
        .map(|s| {
            s.trim().parse::<u64>().map_err(|_| PipelineError::Option {
                option: format!("{}: header seed", trace.display()),
                msg: format!("`{s}` is not an unsigned integer"),
            })
        })
        .transpose()
}

/// The routing mode a trace header records (`routing`; absent in traces of the default
/// `ecmp` and in those written before the field existed); a malformed one is an error
/// naming `trace` and the field.
pub fn header_routing(h: &TraceHeader, trace: &Path) -> Result<RoutingMode, PipelineError> {
    h.get("routing")
        .map_or(Ok(RoutingMode::Ecmp), |s| s.parse::<RoutingMode>())
        .map_err(|msg| PipelineError::Option {
            option: format!("{}: header field routing", trace.display()),
            msg,
        })
}

/// The routing to replay `trace` with: the header's; `given` must agree with it.
pub fn resolve_routing(
    given: Option<RoutingMode>,
    header: &TraceHeader,
    trace: &Path,
) -> Result<RoutingMode, PipelineError> {
    let h = header_routing(header, trace)?;
    match given {
        Some(g) if g != h => Err(PipelineError::RoutingMismatch {
            given: g,
            header: h,
            trace: trace.to_path_buf(),
        }),
        _ => Ok(h),
    }
}

/// The topology to use for `trace`: the one given (`cli`) or else the one its header
/// names; an error when both are given and differ, or when neither is.
pub fn resolve_topology(
    cli: Option<&str>,
    header: Option<&str>,
    trace: &Path,
) -> Result<String, PipelineError> {
    match (cli.map(str::trim), header) {
        (Some(c), Some(h)) if c != h => Err(PipelineError::TopologyMismatch {
            given: c.into(),
            header: h.into(),
            trace: trace.to_path_buf(),
        }),
        (Some(c), _) => Ok(c.to_string()),
        (None, Some(h)) => Ok(h.to_string()),
        (None, None) => Err(PipelineError::NoTopology(trace.to_path_buf())),
    }
}

/// The seed to route with: the one given, else the trace's, else 0; a warning when both
/// are given and differ (`what` names whose routes will differ).
pub fn resolve_seed(
    cli: Option<u64>,
    header: Option<u64>,
    what: &str,
    warnings: &mut Vec<String>,
) -> u64 {
    if let (Some(c), Some(h)) = (cli, header) {
        if c != h {
            warnings.push(format!(
                "--seed {c} differs from the trace's seed {h}: {what} will differ from the generator's"
            ));
        }
    }
    cli.or(header).unwrap_or(0)
}

/// Replays `records` (with the header they were generated under) on `topo`, routing ECMP
/// with `seed`, under the rate model `model`; the summary names the trace `trace_name`.
pub fn replay_records(
    records: &[FlowRecord],
    header: &TraceHeader,
    topo: &Topology,
    seed: u64,
    trace_name: &str,
    progress: bool,
    model: replay::RateModel,
) -> Result<ReplayResult, PipelineError> {
    let table = RecordTable::from_records(records).map_err(|source| PipelineError::Replay {
        trace: trace_name.into(),
        source: Box::new(source),
    })?;
    replay_table(table, header, topo, seed, trace_name, progress, model)
}

/// [`replay_records`], and the timeline of the replay when `timeline` asks for one
/// ([`crate::replay::timeline`]).
#[allow(clippy::too_many_arguments)]
pub fn replay_records_timeline(
    records: &[FlowRecord],
    header: &TraceHeader,
    topo: &Topology,
    seed: u64,
    trace_name: &str,
    progress: bool,
    model: replay::RateModel,
    timeline: Option<&TimelineOptions>,
) -> Result<(ReplayResult, Option<Timeline>), PipelineError> {
    let Some(opts) = timeline else {
        let r = replay_records(records, header, topo, seed, trace_name, progress, model)?;
        return Ok((r, None));
    };
    let mut sampler = sampler(header, topo, opts)?;
    for (i, r) in records.iter().enumerate() {
        sampler.observe(i, r).map_err(timeline_err)?;
    }
    let table = RecordTable::from_records(records).map_err(|source| PipelineError::Replay {
        trace: trace_name.into(),
        source: Box::new(source),
    })?;
    let routing = Routing::new(topo, seed).map_err(|e| routing_error(topo, e))?;
    let result = replay_routed(
        table, header, topo, &routing, trace_name, progress, model, None,
    )?;
    let t = sampler.assemble(&result, topo, &routing);
    Ok((result, Some(t)))
}

/// The sampler of a timeline of the job `header` describes on `topo`.
fn sampler(
    header: &TraceHeader,
    topo: &Topology,
    opts: &TimelineOptions,
) -> Result<TimelineSampler, PipelineError> {
    TimelineSampler::new(header, topo, opts).map_err(timeline_err)
}

/// A timeline error as the pipeline's.
fn timeline_err(e: replay::timeline::TimelineError) -> PipelineError {
    PipelineError::Timeline(Box::new(e))
}

/// [`replay_records`] of records already in the replayer's compact table, under the
/// rate model `model`.
pub fn replay_table(
    records: RecordTable,
    header: &TraceHeader,
    topo: &Topology,
    seed: u64,
    trace_name: &str,
    progress: bool,
    model: replay::RateModel,
) -> Result<ReplayResult, PipelineError> {
    replay_table_until(
        records, header, topo, seed, trace_name, progress, model, None,
    )
}

/// [`replay_table`] stopped at `deadline` ([`replay::ReplayError::OutOfTime`]), if any.
#[allow(clippy::too_many_arguments)]
pub fn replay_table_until(
    records: RecordTable,
    header: &TraceHeader,
    topo: &Topology,
    seed: u64,
    trace_name: &str,
    progress: bool,
    model: replay::RateModel,
    deadline: Option<std::time::Instant>,
) -> Result<ReplayResult, PipelineError> {
    let mode = header_routing(header, Path::new(trace_name))?;
    let bar = progress.then(|| crate::progress::spinner("computing routes"));
    let routing = Routing::with_mode(topo, seed, mode);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let routing = routing.map_err(|e| routing_error(topo, e))?;
    replay_routed(
        records, header, topo, &routing, trace_name, progress, model, deadline,
    )
}

/// The error of a topology that cannot be routed.
fn routing_error(topo: &Topology, source: crate::topology::TopologyError) -> PipelineError {
    PipelineError::Routing {
        spec: topo.source.clone(),
        source: Box::new(source),
    }
}

/// The routes of `topo` computed on another core while `work` runs here: `work`'s
/// result, then the routes (waited for under a spinner when `progress`). `work`'s error
/// comes first.
fn with_routes<T>(
    topo: &Topology,
    seed: u64,
    mode: RoutingMode,
    progress: bool,
    work: impl FnOnce() -> Result<T, PipelineError>,
) -> Result<(T, Routing), PipelineError> {
    std::thread::scope(|s| {
        let routes = s.spawn(|| Routing::with_mode(topo, seed, mode));
        let out = work()?;
        let bar = (progress && !routes.is_finished())
            .then(|| crate::progress::spinner("computing routes"));
        let routing = routes
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        if let Some(b) = bar {
            b.finish_and_clear();
        }
        Ok((out, routing.map_err(|e| routing_error(topo, e))?))
    })
}

/// [`replay_table_until`] with the routes already computed.
#[allow(clippy::too_many_arguments)]
fn replay_routed(
    records: RecordTable,
    header: &TraceHeader,
    topo: &Topology,
    routing: &Routing,
    trace_name: &str,
    progress: bool,
    model: replay::RateModel,
    deadline: Option<std::time::Instant>,
) -> Result<ReplayResult, PipelineError> {
    if routing.mode() == RoutingMode::Spray && model == replay::RateModel::Dcqcn {
        return Err(PipelineError::Option {
            option: "--routing spray".into(),
            msg: "replays under --rate-model ideal only: the DCQCN model rates one queue pair on one path, and a sprayed transfer is cut into strands over many".into(),
        });
    }
    records.use_huge_pages();
    let mut opts = ReplayOptions::from_header(header).map_err(|source| PipelineError::Replay {
        trace: trace_name.into(),
        source: Box::new(source),
    })?;
    opts.progress = progress;
    opts.trace_name = trace_name.into();
    opts.rate_model = model;
    opts.deadline = deadline;
    replay::simulate_table(records, topo, routing, &opts).map_err(|source| PipelineError::Replay {
        trace: trace_name.into(),
        source: Box::new(source),
    })
}

/// Generates the trace of `spec`'s job in memory, without writing a file, and replays it
/// on the job's topology with the spec's seed (the routes the generator built INA trees
/// on): what `ina3d trace` then `ina3d replay` of the file give, minus the file. The
/// records go from the generator straight into the replayer's compact table. The
/// summary names the trace `<input> (generated)`. `progress` is called with the number of
/// records generated so far, every 65,536 records.
pub fn replay_job(
    spec: &super::JobSpec,
    bars: bool,
    model: replay::RateModel,
    progress: &mut dyn FnMut(u64),
) -> Result<(Job, ReplayResult), PipelineError> {
    let (job, result, _) = replay_job_timeline(spec, bars, model, progress, None)?;
    Ok((job, result))
}

/// [`replay_job`], and the timeline of the replay when `timeline` asks for one
/// ([`crate::replay::timeline`]).
pub fn replay_job_timeline(
    spec: &super::JobSpec,
    bars: bool,
    model: replay::RateModel,
    progress: &mut dyn FnMut(u64),
    timeline: Option<&TimelineOptions>,
) -> Result<(Job, ReplayResult, Option<Timeline>), PipelineError> {
    let job = Job::prepare(spec)?;
    let opts = spec.trace_options()?;
    let mut sampler = timeline
        .map(|o| {
            let h = trace::header(&job.cfg, &job.workload, &job.topology, &opts);
            self::sampler(&h, &job.topology, o)
        })
        .transpose()?;
    let budget = MemoryBudget::of_process().map_err(|source| PipelineError::Replay {
        trace: spec.input.clone(),
        source: Box::new(source),
    })?;
    // the routes depend on the topology and seed alone: computed while the records come
    let ((header, table), routing) =
        with_routes(&job.topology, spec.seed, spec.routing, bars, || {
            let mut table = RecordTable::new();
            let (header, _, _) = generate_into(&job, &opts, None, progress, &mut |r| {
                if let Some(s) = sampler.as_mut() {
                    s.observe(table.len(), &r)
                        .map_err(|e| trace::TraceError::Generate(e.to_string()))?;
                }
                table
                    .push(&r)
                    .map_err(|e| trace::TraceError::Generate(e.to_string()))?;
                // the generator streams: refuse as soon as the records exceed what fits,
                // before the replay's own state (the larger part of its memory) exists
                match budget.as_ref() {
                    Some(b) if table.len().is_multiple_of(1 << 16) => {
                        let (n, rows) = (table.len() as u64, table.rows() as u64);
                        b.check(
                            n,
                            rows,
                            &format!("at least {n}: the generator was still going"),
                        )
                        .map_err(|e| trace::TraceError::Generate(e.to_string()))
                    }
                    _ => Ok(()),
                }
            })?;
            table.finish();
            if let Some(b) = budget.as_ref() {
                let (n, rows) = (table.len() as u64, table.rows() as u64);
                b.check(n, rows, "the whole trace")
                    .map_err(|source| PipelineError::Replay {
                        trace: spec.input.clone(),
                        source: Box::new(source),
                    })?;
            }
            Ok((header, table))
        })?;
    let name = format!("{} (generated)", spec.input);
    let result = replay_routed(
        table,
        &header,
        &job.topology,
        &routing,
        &name,
        bars,
        model,
        None,
    )?;
    let t = sampler.map(|s| s.assemble(&result, &job.topology, &routing));
    Ok((job, result, t))
}

/// A replay of a trace file, with the warnings met on the way.
#[derive(Debug)]
pub struct FileReplay {
    /// The replay.
    pub result: ReplayResult,
    /// Seed disagreements and the like, for the caller to print.
    pub warnings: Vec<String>,
    /// For a trace lowered from a plan (`trace --plan`): the planner's solver and its
    /// predicted iteration time (ns), from the header.
    pub plan_prediction: Option<(String, f64)>,
    /// For a collective-bench trace: its spec and records (for [`super::write_bench`]).
    pub bench: Option<(trace::BenchSpec, Vec<FlowRecord>)>,
    /// The replay's timeline, when asked for ([`FileOptions::timeline`]).
    pub timeline: Option<Timeline>,
}

impl FileReplay {
    /// The line comparing a planned trace's prediction with this replay, if it has one.
    pub fn plan_report(&self) -> Option<String> {
        let (solver, p) = self.plan_prediction.as_ref()?;
        let t = self.result.summary.iteration_time_ns as f64;
        Some(format!(
            "plan ({solver}) predicted {:.3} ms: prediction error {:+.2} % against this replay",
            p / 1e6,
            100.0 * (p - t) / t.max(1.0)
        ))
    }
}

/// How [`replay_file`] replays a trace file: every choice besides the file, defaulted
/// as `ina3d replay FILE` defaults it (the header's topology, seed and routing, no
/// progress, no timeline).
#[derive(Clone, Copy, Debug, Default)]
pub struct FileOptions<'a> {
    /// The topology (`--topology`), else the header's; they must agree.
    pub topology: Option<&'a str>,
    /// The ECMP seed (`--seed`), else the header's (a warning when they differ).
    pub seed: Option<u64>,
    /// `--routing`: refused when it contradicts the header's `routing`
    /// ([`resolve_routing`]), as a topology that contradicts the header's is.
    pub routing: Option<RoutingMode>,
    /// Progress bars on stderr.
    pub progress: bool,
    /// The rate model ([`replay::RateModel::chosen`] picks it from the flags).
    pub model: replay::RateModel,
    /// The timeline of the replay, when asked for ([`crate::replay::timeline`]).
    pub timeline: Option<&'a TimelineOptions>,
}

/// Replays the trace file `path` as `o` says ([`FileOptions`]). The records are read one
/// at a time into the replayer's compact table (a collective-bench trace's are also kept
/// whole, for its bench table).
pub fn replay_file(path: &Path, o: &FileOptions) -> Result<FileReplay, PipelineError> {
    let FileOptions {
        topology,
        seed,
        routing,
        progress,
        model,
        timeline,
    } = *o;
    let rd = TraceReader::open(path).map_err(|source| PipelineError::ReadTrace {
        path: path.to_path_buf(),
        source: Box::new(source),
    })?;
    let header = rd.header().clone();
    let spec = resolve_topology(topology, header_topology(&header), path)?;
    let mut warnings = Vec::new();
    let seed = resolve_seed(seed, header_seed(&header, path)?, "routes", &mut warnings);
    let mode = resolve_routing(routing, &header, path)?;
    let topo = Topology::from_spec(&spec).map_err(|source| PipelineError::Topology {
        spec,
        source: Box::new(source),
    })?;
    trace::check_topology_hash(&header, &topo, path).map_err(|source| {
        PipelineError::ReadTrace {
            path: path.to_path_buf(),
            source: Box::new(source),
        }
    })?;
    // every record's endpoints against the topology (NVLink within a server)
    let rd = rd.with_check(&topo).checking_aggregations();
    let mut sampler = timeline.map(|o| sampler(&header, &topo, o)).transpose()?;
    // the routes are computed while the records are read
    let ((table, kept), routing) = with_routes(&topo, seed, mode, progress, || {
        read_table(path, rd, progress, sampler.as_mut())
    })?;
    let name = path.display().to_string();
    let result = replay_routed(
        table, &header, &topo, &routing, &name, progress, model, None,
    )?;
    let timeline = sampler.map(|s| s.assemble(&result, &topo, &routing));
    let bench = super::bench_spec(&header, path)?;
    let plan_prediction = header
        .get("plan_predicted_iteration_ns")
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|p| (header.get("plan_solver").unwrap_or("?").to_string(), p));
    Ok(FileReplay {
        result,
        warnings,
        plan_prediction,
        bench: bench.map(|b| (b, kept)),
        timeline,
    })
}

/// Read the records of trace file `path` from `rd`, opened on it (validating them as
/// [`trace::read`] does), into a record table: the table and — for a collective-bench
/// trace only — the records. With `progress`, a bar follows the bytes of the file read.
/// A timeline's `sampler` sees every record as it goes into the table.
fn read_table(
    path: &Path,
    mut rd: TraceReader,
    progress: bool,
    mut sampler: Option<&mut TimelineSampler>,
) -> Result<(RecordTable, Vec<FlowRecord>), PipelineError> {
    let read_err = |source| PipelineError::ReadTrace {
        path: path.to_path_buf(),
        source: Box::new(source),
    };
    let header = rd.header().clone();
    let replay_err = |source| PipelineError::Replay {
        trace: path.display().to_string(),
        source: Box::new(source),
    };
    let budget = MemoryBudget::of_process().map_err(replay_err)?;
    let keep = matches!(trace::BenchSpec::from_header(&header), Ok(Some(_)));
    let mut table = RecordTable::new();
    let mut kept = Vec::new();
    let bar = progress.then(|| read_bar(rd.file_progress().map_or(0, |(_, size)| size)));
    while let Some(r) = rd.next() {
        let r = r.map_err(read_err)?;
        if let Some(b) = bar.as_ref().filter(|_| table.len().is_multiple_of(65_536)) {
            b.set_position(rd.file_progress().map_or(0, |(n, _)| n));
            b.set_message(format!("{} records", table.len()));
        }
        if let Some(s) = sampler.as_deref_mut() {
            s.observe(table.len(), &r).map_err(timeline_err)?;
        }
        table.push(&r).map_err(replay_err)?;
        // the records of the whole file, extrapolated from the part read, must fit
        if let Some(b) = budget
            .as_ref()
            .filter(|_| table.len().is_multiple_of(1 << 20))
        {
            let n = table.len() as u64;
            let (read, size) = rd.file_progress().unwrap_or((0, 0));
            let pct = 100.0 * read as f64 / size.max(1) as f64;
            let all = budget::extrapolate(n, read, size).max(n);
            // rows in the proportion of the part read
            let rows = (table.rows() as u128 * all as u128 / n as u128) as u64;
            b.check(
                all,
                rows,
                &format!("estimated from the first {n} records, {pct:.1} % of the file"),
            )
            .map_err(replay_err)?;
        }
        if keep {
            kept.push(r);
        }
    }
    table.finish();
    if let Some(b) = budget.as_ref() {
        b.check(table.len() as u64, table.rows() as u64, "the whole file")
            .map_err(replay_err)?;
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    Ok((table, kept))
}

/// The bar of reading a trace file of `size` bytes.
fn read_bar(size: u64) -> indicatif::ProgressBar {
    crate::progress::bar(
        size,
        "{elapsed_precise} [{bar:30}] {bytes}/{total_bytes} of the trace read  {msg}",
    )
}

/// The bar of an ns-3 run (its length is set from the glue's progress lines).
pub fn ns3_bar() -> indicatif::ProgressBar {
    crate::progress::bar(0, "ns-3 {bar:40} {pos}/{len} records ({elapsed})")
}

/// The one line `ina3d replay` prints about a replay written to `out`.
pub fn replay_report(r: &ReplayResult, out: &Path) -> String {
    let s = &r.summary;
    let ms = |ns: u64| ns as f64 / 1e6;
    format!(
        "{} records: iteration {:.3} ms, compute {:.3} ms, exposed tp {:.3} pp {:.3} dp {:.3} emb {:.3} ms, bubble {:.3} ms, INA slot peak {}, {} fallbacks; wall {:.2} s -> {}",
        s.records,
        ms(s.iteration_time_ns),
        ms(s.compute_ns),
        ms(s.exposed_tp_ns),
        ms(s.exposed_pp_ns),
        ms(s.exposed_dp_ns),
        ms(s.exposed_emb_ns),
        ms(s.bubble_ns),
        s.ina_slot_peak,
        r.ina_fallbacks,
        s.wall_time_ns as f64 / 1e9,
        out.display()
    )
}

/// What an ns-3 emit reads: a trace file, or a glue `trace.txt` (+ its `params.txt`)
/// to re-emit.
#[derive(Debug)]
pub struct Ns3Input {
    /// The records.
    pub records: Vec<FlowRecord>,
    /// The INA switch model (trace header, or `params.txt`).
    pub ina: InaConfig,
    /// The topology the trace names (a `trace.txt` names none).
    pub topology: Option<String>,
    /// The ECMP seed the trace names.
    pub seed: Option<u64>,
    /// The routing mode the trace's header names (`None` for a glue `trace.txt`, which
    /// has no header: its `routes.txt` holds the paths).
    pub routing: Option<RoutingMode>,
    /// The bench the trace's header describes, if it is one.
    pub bench: Option<trace::BenchSpec>,
    /// A glue `trace.txt`'s planned slots: the `reservations.txt` beside it (its path and
    /// numbered lines), matched to the records' aggregations by [`Ns3Input::ina_on`].
    pub reservations: Option<(PathBuf, Vec<(u64, crate::formats::reservations_txt::Line)>)>,
}

impl Ns3Input {
    /// The INA switch model to emit with on `topo`: [`Ns3Input::ina`], with a glue
    /// `trace.txt`'s planned reservations restored from its `reservations.txt` (the model
    /// keys them by switch, class, group and first member, which needs the topology to
    /// tell hosts from switches).
    pub fn ina_on(&self, topo: &Topology) -> Result<InaConfig, PipelineError> {
        let mut ina = self.ina.clone();
        if let Some((path, lines)) = &self.reservations {
            ina.reservations = ns3::emit::reservations_from_lines(&self.records, topo, path, lines)
                .map_err(|e| PipelineError::Ns3(Box::new(e)))?;
        }
        Ok(ina)
    }
}

/// Reads the input of `ina3d ns3 emit`: a trace (`.csv`, `.csv.gz`) or a glue `trace.txt`
/// beside a `params.txt` (without one, the INA model keeps its defaults; one that cannot
/// be read is an error) and, when that says the planned slot policy, a `reservations.txt`.
pub fn load_ns3_input(path: &Path) -> Result<Ns3Input, PipelineError> {
    let io = |source| PipelineError::Io {
        path: path.to_path_buf(),
        source,
    };
    if path.extension().is_some_and(|e| e == "txt") {
        let text = std::fs::read_to_string(path).map_err(io)?;
        if text.starts_with("# ina3d-ns3 trace") || text.trim_start().starts_with("RECORDS") {
            let params = path.with_file_name("params.txt");
            let (ina, seed) = match std::fs::read_to_string(&params) {
                Ok(t) => ns3::emit::read_params(&params, &t)
                    .map_err(|e| PipelineError::Ns3(Box::new(e)))?,
                // no params.txt: the defaults (the doc above); one that cannot be read
                // (a directory, no permission, not UTF-8) is an error, not the defaults
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => (InaConfig::default(), None),
                Err(source) => {
                    return Err(PipelineError::Io {
                        path: params,
                        source,
                    })
                }
            };
            let (records, _) = crate::formats::glue_trace_txt::parse(path, &text)
                .map_err(|e| PipelineError::Ns3(Box::new(e.into())))?;
            let reservations = if ina.policy() == trace::InaPolicy::Planned {
                let rp = path.with_file_name("reservations.txt");
                let text = std::fs::read_to_string(&rp).map_err(|source| PipelineError::Io {
                    path: rp.clone(),
                    source,
                })?;
                let lines = crate::formats::reservations_txt::parse_numbered(&rp, &text)
                    .map_err(|e| PipelineError::Ns3(Box::new(e.into())))?;
                Some((rp, lines))
            } else {
                None
            };
            return Ok(Ns3Input {
                records,
                ina,
                topology: None,
                seed,
                routing: None,
                bench: None,
                reservations,
            });
        }
    }
    let t = trace::read(path).map_err(|source| PipelineError::ReadTrace {
        path: path.to_path_buf(),
        source: Box::new(source),
    })?;
    let ina = ns3::ina_model(&t.header).map_err(|source| PipelineError::Ns3Trace {
        trace: path.to_path_buf(),
        source: Box::new(source),
    })?;
    Ok(Ns3Input {
        bench: super::bench_spec(&t.header, path)?,
        topology: header_topology(&t.header).map(String::from),
        seed: header_seed(&t.header, path)?,
        routing: Some(header_routing(&t.header, path)?),
        records: t.records,
        ina,
        reservations: None,
    })
}

/// Writes the ns-3 inputs of `records` into `out` and records `source_trace` (the trace's
/// name) beside them, so the ns-3 summary names the same trace as the replayer's.
pub fn emit_ns3(
    records: &[FlowRecord],
    ina: &InaConfig,
    topo: &Topology,
    opts: &EmitOptions,
    out: &Path,
    source_trace: &str,
) -> Result<EmitReport, PipelineError> {
    let set = crate::formats::atomic::OutputSet::begin(out, "ina3d ns3 emit")?;
    let r = ns3::emit(records, ina, topo, opts, out).map_err(|source| PipelineError::Emit {
        dir: out.to_path_buf(),
        source: Box::new(source),
    })?;
    let src = out.join(ns3::run::SOURCE_TRACE_FILE);
    write_atomic(&src, |w| writeln!(w, "{source_trace}"))?;
    set.finish()?;
    Ok(r)
}

/// What `ina3d ns3 emit` prints.
pub fn emit_report(r: &EmitReport, out: &Path, seed: u64) -> String {
    format!(
        "wrote {} files into {}: {} flows ({} records split), {} INA proxies, starts from {}, contention-free makespan {} ns\n\
         glue routes: the replayer's router, per (src, dst, NCCL channel) connection ({} connections routed, seed {})",
        r.files.len(),
        out.display(),
        r.flows,
        r.split_records,
        r.proxies.len(),
        r.start_source,
        r.schedule_makespan.0,
        r.routes,
        seed
    ) + &r.warnings.iter().map(|w| format!("\nwarning: {w}")).collect::<String>()
}

/// The glue binary, built from `ns3-glue/` when missing or older than its sources. Builds
/// are serialised within this process (sweep threads share one binary).
pub fn glue() -> Result<PathBuf, PipelineError> {
    static BUILD: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = BUILD.lock().unwrap_or_else(|e| e.into_inner());
    ns3::run::build_glue(&ns3::run::glue_source_dir(), &ns3::run::glue_binary())
        .map_err(|e| PipelineError::Ns3(Box::new(e)))
}

/// Runs the glue `binary` on the emitted directory `dir`; `progress(done, total)` follows
/// the records.
pub fn run_ns3(
    binary: &Path,
    dir: &Path,
    progress: impl FnMut(u64, u64),
) -> Result<ns3::run::RunReport, PipelineError> {
    // the emitted inputs must be whole before the glue reads them
    crate::formats::atomic::check_complete(&dir.join(ns3::run::SOURCE_TRACE_FILE))?;
    let set = crate::formats::atomic::OutputSet::begin(dir, "ina3d ns3 run")?;
    let r = ns3::run::run_glue(binary, dir, progress).map_err(|source| PipelineError::Ns3Run {
        dir: dir.to_path_buf(),
        source: Box::new(source),
    })?;
    set.finish()?;
    Ok(r)
}

/// The line `ina3d ns3 run` prints.
pub fn ns3_report(r: &ns3::run::RunReport, dir: &Path) -> String {
    // what the glue fell back on (e.g. a DCQCN key missing from config.txt) comes first
    let warnings: String = r
        .warnings
        .iter()
        .map(|w| format!("warning: {w}\n"))
        .collect();
    warnings
        + &format!(
            "ns-3: {} records, iteration {} ns, INA slot peak {}, wall {:.2} s; outputs in {}",
            r.summary.records,
            r.summary.iteration_time_ns,
            r.summary.ina_slot_peak,
            r.summary.wall_time_ns as f64 / 1e9,
            dir.display()
        )
}
