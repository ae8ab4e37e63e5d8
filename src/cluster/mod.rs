//! Several jobs on one fabric (`ina3d cluster CLUSTER.toml -o DIR`): shared links and
//! shared switch memory.
//!
//! - [`ClusterSpec`] ([`spec`]): the cluster file — fabric, slots per switch, policies,
//!   one `[[job]]` per job — checked with errors naming file, line, column and field.
//! - [`place`]: each job's ranks on the fabric's servers (contiguous, interleaved,
//!   seeded random, explicit), as a topology view per job (rank → node).
//! - [`merge`]: each job's trace, generated on its view, appended into one DAG with
//!   disjoint record, aggregation and collective ids (a record's job is its id range);
//!   each job's figures read back from the merged replay.
//! - [`joint`]: the joint planner of `plan` and `plan-fair`.
//! - [`table`]: `jobs.csv`, `cluster.csv` and the printed table.
//!
//! Per policy the merged trace is replayed once on the fabric (and on ns-3 when asked), and
//! every job is also replayed **alone** on the same fabric, placement and policy — alone
//! meaning the job is the pool's only tenant: `split` and `atp` alone get the whole pool,
//! `plan` alone runs the job's own full-pool plan. A job's slowdown is its shared
//! iteration over its alone iteration.
//!
//! Layout of DIR: `jobs.csv`, `cluster.csv`, and per policy `<policy>/trace.csv.gz` (the
//! merged trace, header `cluster_jobs` naming each job's record ids), `<policy>/replay/`
//! (the merged replay's files), `<policy>/<job>.plan.json` (planner policies), and
//! `<policy>/ns3/` with ns-3.

pub mod joint;
pub mod merge;
pub mod place;
pub mod spec;
pub mod table;

pub use spec::{ClusterJob, ClusterSpec, Objective, Sweep, SweepPoint};

use crate::fct::Summary;
use crate::formats::cluster_csv::{ClusterRow, JobRow};
use crate::formats::FormatError;
use crate::keyword::keyword_enum;
use crate::pipeline::{error_chain, generate_trace, replay_records, Job, PipelineError, Reporter};
use crate::plan::PlanOptions;
use crate::replay::{ReplayResult, TenantSlots};
use crate::topology::Topology;
use crate::trace::{
    format_reservations, format_tenants, InaMode, InaPolicy, Reservation, Tenant, TraceHeader,
    TraceOptions, INA_RESERVATIONS_KEY, INA_TENANTS_KEY,
};
use merge::Merged;
use std::collections::BTreeMap;
use std::path::Path;

/// How the jobs share the switches' slot pools.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ClusterPolicy {
    /// No INA: every job's collectives on the host ring.
    Ring,
    /// Per-job fixed INA: every job's `ina-classes` on hierarchical trees, each switch's
    /// pool split evenly among the jobs (and a job's part among its classes), as `static`
    /// splits it among classes.
    Split,
    /// ATP-like: best effort across jobs on the whole pool; an aggregation that finds no
    /// slot falls back to the host ring.
    Atp,
    /// The joint planner (objective from the file: the slowest job's iteration, or the
    /// sum of slowdowns).
    Plan,
    /// The joint planner bounding every job's predicted slowdown (`fair-slowdown`),
    /// minimising the sum of slowdowns within the bound.
    PlanFair,
}

keyword_enum!(ClusterPolicy, "cluster policy", ClusterPolicy::Ring => "ring", ClusterPolicy::Split => "split", ClusterPolicy::Atp => "atp", ClusterPolicy::Plan => "plan", ClusterPolicy::PlanFair => "plan-fair");

impl ClusterPolicy {
    /// Whether it runs the joint planner.
    pub fn plans(self) -> bool {
        matches!(self, ClusterPolicy::Plan | ClusterPolicy::PlanFair)
    }
}

/// Why a cluster run failed.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The cluster file (or a job it names) is wrong: file, line, column and field.
    #[error(transparent)]
    File(#[from] FormatError),
    /// A stage failed on one job at one policy.
    #[error("job `{job}`, policy `{policy}`")]
    Job {
        /// The job.
        job: String,
        /// The policy.
        policy: ClusterPolicy,
        /// Why.
        #[source]
        source: Box<PipelineError>,
    },
    /// A stage failed on the merged trace of a policy.
    #[error("policy `{policy}`")]
    Policy {
        /// The policy.
        policy: ClusterPolicy,
        /// Why.
        #[source]
        source: Box<PipelineError>,
    },
}

/// A job read, scheduled and placed.
#[derive(Debug)]
pub struct PlacedJob {
    /// Its name.
    pub name: String,
    /// The job on its topology view (rank → the node its placement gives).
    pub job: Job,
    /// Its ranks' fabric GPU indices.
    pub gpus: Vec<u32>,
    /// Its placement's name.
    pub placement: String,
    /// Its start offset.
    pub start_ns: u64,
}

/// The fabric and the placed jobs, ready for every policy.
#[derive(Debug)]
pub struct Cluster {
    /// The file.
    pub spec: ClusterSpec,
    /// The shared fabric.
    pub fabric: Topology,
    /// The jobs, in file order.
    pub jobs: Vec<PlacedJob>,
}

impl Cluster {
    /// Reads every job, schedules it and places it; errors name the job and the field.
    pub fn prepare(spec: ClusterSpec) -> Result<Cluster, ClusterError> {
        let fabric = Topology::from_spec(&spec.topology)
            .map_err(|e| FormatError::file(&spec.path, format!("topology: {}", error_chain(&e))))?;
        let mut jobs = Vec::new();
        for (i, cj) in spec.jobs.iter().enumerate() {
            let job = Job::prepare(&cj.spec).map_err(|e| {
                let field = match &e {
                    PipelineError::Fit(_) => "placement",
                    PipelineError::Option { .. } | PipelineError::Override { .. } => "set",
                    _ => "input",
                };
                spec.job_error(i, field, error_chain(&e))
            })?;
            jobs.push(job);
        }
        let worlds: Vec<u32> = jobs.iter().map(|j| j.workload.world()).collect();
        let placements: Vec<&place::Placement> = spec.jobs.iter().map(|j| &j.placement).collect();
        let gpus = place::place(&fabric, &worlds, &placements)
            .map_err(|e| spec.job_error(e.job, "placement", e.msg))?;
        let jobs = jobs
            .into_iter()
            .zip(gpus)
            .zip(&spec.jobs)
            .map(|((mut job, gpus), cj)| {
                job.topology = place::job_topology(&fabric, &gpus);
                PlacedJob {
                    name: cj.name.clone(),
                    job,
                    gpus,
                    placement: cj.placement.label(),
                    start_ns: cj.start_ns,
                }
            })
            .collect();
        Ok(Cluster { spec, fabric, jobs })
    }

    /// The tenants of a merged trace: every job with its hosts.
    pub fn tenants(&self) -> Vec<Tenant> {
        self.jobs
            .iter()
            .map(|j| Tenant {
                name: j.name.clone(),
                hosts: place::hosts(&self.fabric, &j.gpus),
            })
            .collect()
    }
}

/// One job at one policy.
#[derive(Clone, Debug)]
pub struct JobResult {
    /// The job.
    pub job: String,
    /// The policy.
    pub policy: ClusterPolicy,
    /// GPUs it runs on.
    pub gpus: u32,
    /// Its placement's name.
    pub placement: String,
    /// Its start offset, ns.
    pub start_ns: u64,
    /// Its figures in the shared run (iteration from its own start).
    pub shared: Summary,
    /// Its figures alone on the same fabric, placement and policy.
    pub alone: Summary,
    /// The slots it held in the shared run.
    pub slots: TenantSlots,
    /// The slots it held alone.
    pub alone_slots: u64,
    /// Planner policies: the pool its chosen plan was made under (`Some(0)`: all host).
    pub plan_pool: Option<u32>,
    /// Planner policies: its slowdown as the joint planner predicted it.
    pub predicted_slowdown: Option<f64>,
    /// Its iteration in the ns-3 run of the merged trace, when ns-3 ran.
    pub ns3_iteration_ns: Option<u64>,
    /// Its iteration in an ns-3 run of its trace alone, when ns-3 ran.
    pub ns3_alone_iteration_ns: Option<u64>,
}

impl JobResult {
    /// Shared iteration over alone iteration.
    pub fn slowdown(&self) -> f64 {
        self.shared.iteration_time_ns as f64 / self.alone.iteration_time_ns.max(1) as f64
    }
}

/// One policy over the whole cluster.
#[derive(Clone, Debug)]
pub struct PolicyResult {
    /// The policy.
    pub policy: ClusterPolicy,
    /// The merged replay's summary (iteration = the makespan from the common start).
    pub merged: Summary,
    /// Aggregator utilisation: slot-time held over pool × aggregating switches × makespan.
    pub utilisation: f64,
    /// Aggregations that fell back to the host ring.
    pub fallbacks: u64,
    /// Planner policies: whether the joint choice is proven optimal among its candidates.
    pub plan_proven: Option<bool>,
    /// What the planner had to give up, if anything.
    pub note: Option<String>,
}

/// Everything a cluster run produced.
#[derive(Clone, Debug)]
pub struct ClusterOutcome {
    /// Per policy (spec order), per job (file order).
    pub jobs: Vec<JobResult>,
    /// Per policy.
    pub policies: Vec<PolicyResult>,
}

/// Runs every policy of `cluster` into `out` (see the module docs for the layout).
pub fn run(
    cluster: &Cluster,
    out: &Path,
    rep: &mut dyn Reporter,
) -> Result<ClusterOutcome, ClusterError> {
    for j in &cluster.jobs {
        for w in &j.job.warnings {
            rep.line(&format!("warning: job `{}`: {w}", j.name));
        }
        rep.line(&format!(
            "job `{}`: {} GPUs ({}), TP{} PP{} DP{}, GPUs {}",
            j.name,
            j.gpus.len(),
            j.placement,
            j.job.workload.tp(),
            j.job.workload.pp(),
            j.job.workload.dp(),
            ranges(&j.gpus)
        ));
    }
    let set = begin_output(cluster, out)?;
    let mut r = Runner {
        c: cluster,
        out,
        alone: BTreeMap::new(),
        candidates: None,
        glue: None,
    };
    let mut jobs = Vec::new();
    let mut policies = Vec::new();
    for &p in &cluster.spec.policies {
        let (js, pr) = r.policy(p, rep)?;
        jobs.extend(js);
        policies.push(pr);
    }
    let outcome = ClusterOutcome { jobs, policies };
    table::write_jobs(&out.join(table::JOBS_CSV), &outcome.jobs)?;
    table::write_cluster(
        &out.join(table::CLUSTER_CSV),
        &outcome,
        cluster.spec.ina_slots,
    )?;
    set.finish()?;
    Ok(outcome)
}

/// What a cluster run's markers name: the command, the file, and a fingerprint of the
/// cluster it ran (every key, job and placement), so a sweep resumes a point only when it
/// was run for the same cluster.
fn run_name(spec: &ClusterSpec) -> String {
    let s = spec;
    let jobs: Vec<_> = s
        .jobs
        .iter()
        .map(|j| (&j.name, &j.spec, &j.placement, j.start_ns))
        .collect();
    let what = format!(
        "{:?}",
        (
            (&s.topology, s.ina_slots, &s.policies, &s.ina_classes),
            (&s.ina_switches, &s.ina, s.seed, &s.routing, &s.objective),
            (s.fair_slowdown, s.plan_time_limit, &s.plan_solver, s.ns3),
            (s.traces, &s.rate_model, jobs),
        )
    );
    format!(
        "ina3d cluster {}, cluster {:016x}",
        spec.path.display(),
        crate::formats::fnv1a64(what.as_bytes())
    )
}

/// Marks `out` as being written by `cluster` (a policy directory per policy, the two
/// tables) after clearing what an earlier run left there: its listed entries and, in a
/// directory written before markers listed them, every policy directory, the tables and a
/// sweep's `points/`.
fn begin_output(
    cluster: &Cluster,
    out: &Path,
) -> Result<crate::formats::atomic::OutputSet, ClusterError> {
    let mut members: Vec<String> = cluster
        .spec
        .policies
        .iter()
        .map(|p| p.as_str().to_string())
        .collect();
    members.extend([table::JOBS_CSV.to_string(), table::CLUSTER_CSV.to_string()]);
    let owned = |name: &str| {
        name.parse::<ClusterPolicy>().is_ok()
            || name == table::JOBS_CSV
            || name == table::CLUSTER_CSV
            || name == POINTS_DIR
    };
    Ok(crate::formats::atomic::OutputSet::with_members(
        out,
        &run_name(&cluster.spec),
        members,
        owned,
    )?)
}

/// `0-7,16-23`: a sorted list as ranges.
fn ranges(v: &[u32]) -> String {
    let mut s: Vec<u32> = v.to_vec();
    s.sort_unstable();
    s.chunk_by(|a, b| *b == a + 1)
        .map(|r| {
            if r.len() == 1 {
                r[0].to_string()
            } else {
                format!("{}-{}", r[0], r[r.len() - 1])
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The family of a policy's alone runs: `plan` and `plan-fair` share the full-pool plan.
fn alone_family(p: ClusterPolicy) -> ClusterPolicy {
    if p.plans() {
        ClusterPolicy::Plan
    } else {
        p
    }
}

struct Runner<'a> {
    c: &'a Cluster,
    out: &'a Path,
    /// (job, policy family) → its alone summary, slot peak and ns-3 iteration.
    alone: BTreeMap<(usize, ClusterPolicy), (Summary, u64, Option<u64>)>,
    /// The joint planner's candidates per job, made once for `plan` and `plan-fair`.
    candidates: Option<Vec<Vec<joint::Candidate>>>,
    glue: Option<std::path::PathBuf>,
}

impl Runner<'_> {
    /// Job `j`'s trace options at policy `p` before any plan: the fabric's INA settings.
    fn base(&self, j: usize, p: ClusterPolicy) -> Result<TraceOptions, ClusterError> {
        let s = &self.c.spec;
        let mut o = self.c.spec.jobs[j]
            .spec
            .trace_options()
            .map_err(|e| self.job_err(j, p, e))?;
        o.seed = s.seed;
        o.routing = s.routing;
        o.ina.slots = s.ina_slots;
        o.ina.classes = s.ina_classes.clone();
        o.ina.switches = s.ina_switches.clone();
        match p {
            ClusterPolicy::Ring => o.ina.mode = InaMode::Off,
            ClusterPolicy::Split => {
                o.ina.mode = s.ina;
                // a static split of every pool, whatever the mode's own policy
                o.ina.policy = Some(InaPolicy::Static);
            }
            ClusterPolicy::Atp => {
                o.ina.set_mode(InaMode::Atp);
            }
            ClusterPolicy::Plan | ClusterPolicy::PlanFair => {
                o.ina.set_mode(InaMode::Planned);
            }
        }
        Ok(o)
    }

    fn job_err(&self, j: usize, p: ClusterPolicy, e: PipelineError) -> ClusterError {
        ClusterError::Job {
            job: self.c.jobs[j].name.clone(),
            policy: p,
            source: Box::new(e),
        }
    }

    /// Every job's options at `p` (planner policies: the joint choice's plans), with the
    /// pool each chosen plan was made under and its predicted slowdown.
    #[allow(clippy::type_complexity)]
    fn options(
        &mut self,
        p: ClusterPolicy,
        rep: &mut dyn Reporter,
    ) -> Result<
        (
            Vec<TraceOptions>,
            Vec<(Option<u32>, Option<f64>)>,
            Option<joint::Choice>,
        ),
        ClusterError,
    > {
        let n = self.c.jobs.len();
        let bases = (0..n)
            .map(|j| self.base(j, p))
            .collect::<Result<Vec<_>, _>>()?;
        if !p.plans() {
            return Ok((bases, vec![(None, None); n], None));
        }
        if self.candidates.is_none() {
            let s = &self.c.spec;
            let d = PlanOptions::default();
            let po = PlanOptions {
                settings: crate::plan::model::Settings {
                    slots: s.ina_slots,
                    classes: s.ina_classes.clone(),
                    ..d.settings
                },
                solver: s.plan_solver,
                time_limit: std::time::Duration::from_secs_f64(s.plan_time_limit),
                // each job's candidates are plans that reserve slots of the shared pools
                fixed_policies: false,
                ..d
            };
            let mut all = Vec::new();
            for (j, base) in bases.iter().enumerate() {
                let c =
                    joint::candidates(&self.c.jobs[j].job, base, s.ina_slots, &po, s.rate_model)
                        .map_err(|e| self.job_err(j, p, e))?;
                rep.line(&format!(
                    "[{p}] job `{}`: candidate plans alone {}",
                    self.c.jobs[j].name,
                    c.iter()
                        .map(|x| format!(
                            "{} {:.3} ms",
                            x.level.map_or("host".into(), |l| format!("{l} slots")),
                            x.time_ns / 1e6
                        ))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
                all.push(c);
            }
            self.candidates = Some(all);
        }
        let cands = self.candidates.as_ref().expect("made above");
        let goal = match p {
            ClusterPolicy::PlanFair => joint::Goal::Fair(self.c.spec.fair_slowdown),
            _ => joint::Goal::Objective(self.c.spec.objective),
        };
        let choice = joint::choose(cands, self.c.spec.ina_slots, goal);
        let dir = self.out.join(p.as_str());
        let mut opts = Vec::new();
        let mut info = Vec::new();
        for (j, base) in bases.iter().enumerate() {
            let c = &cands[j][choice.pick[j]];
            if let Some(plan) = &c.plan {
                let f = dir.join(format!("{}.plan.json", self.c.jobs[j].name));
                crate::formats::plan_json::write(&f, plan)?;
            }
            opts.push(joint::lowering(base, c));
            let alone = cands[j].first().map_or(1.0, |x| x.time_ns.max(1.0));
            info.push((Some(c.level.unwrap_or(0)), Some(c.time_ns / alone)));
        }
        rep.line(&format!(
            "[{p}] joint choice ({}{}): {}",
            if choice.proven {
                "optimal among the candidates"
            } else {
                "search cut"
            },
            choice
                .note
                .as_ref()
                .map_or(String::new(), |n| format!("; {n}")),
            self.c
                .jobs
                .iter()
                .zip(&info)
                .map(|(j, (pool, s))| format!(
                    "{} {} (predicted slowdown {:.3})",
                    j.name,
                    match pool {
                        Some(0) | None => "host".to_string(),
                        Some(k) => format!("{k}-slot plan"),
                    },
                    s.unwrap_or(1.0)
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        Ok((opts, info, Some(choice)))
    }

    /// One policy: the merged trace, its replay, every job alone, the rows.
    fn policy(
        &mut self,
        p: ClusterPolicy,
        rep: &mut dyn Reporter,
    ) -> Result<(Vec<JobResult>, PolicyResult), ClusterError> {
        let (opts, info, choice) = self.options(p, rep)?;
        let dir = self.out.join(p.as_str());
        std::fs::create_dir_all(&dir).map_err(|e| ClusterError::Policy {
            policy: p,
            source: Box::new(PipelineError::io(&dir)(e)),
        })?;
        let (merged, h) = self.merged_trace(p, &opts, rep)?;
        let s = &self.c.spec;
        let name = self.write_merged(p, &dir, &h, &merged)?;
        let result = replay_records(
            &merged.records,
            &h,
            &self.c.fabric,
            s.seed,
            &name,
            rep.bars(),
            s.rate_model,
        )
        .map_err(|e| ClusterError::Policy {
            policy: p,
            source: Box::new(e),
        })?;
        crate::replay::write_outputs(&dir.join("replay"), &result)
            .map_err(|e| self.pol_err(p, e))?;
        let ns3 = if s.ns3 {
            Some(self.ns3(p, &merged, &h, &dir, &name, rep)?)
        } else {
            None
        };
        let rows = self.job_rows(p, &merged, &result, &info, ns3);
        let pr = PolicyResult {
            policy: p,
            utilisation: utilisation(&result, &self.c.fabric, &self.c.spec),
            fallbacks: result.ina_fallbacks,
            merged: result.summary,
            plan_proven: choice.as_ref().map(|c| c.proven),
            note: choice.and_then(|c| c.note),
        };
        rep.line(&table::policy_text(&pr, &rows));
        Ok((rows, pr))
    }

    /// Every job's trace under `opts` (each also replayed alone), merged at the jobs'
    /// starts, with the merged header: the cluster's slots and tenants, and under a
    /// planning policy the jobs' slot reservations.
    fn merged_trace(
        &mut self,
        p: ClusterPolicy,
        opts: &[TraceOptions],
        rep: &mut dyn Reporter,
    ) -> Result<(Merged, TraceHeader), ClusterError> {
        let mut merged = Merged::default();
        let mut first_header: Option<TraceHeader> = None;
        let mut reservations: Vec<Reservation> = Vec::new();
        for (j, o) in opts.iter().enumerate() {
            let pj = &self.c.jobs[j];
            let t = generate_trace(&pj.job, o, None, true, &mut |_| {})
                .map_err(|e| self.job_err(j, p, e))?;
            if let Some(v) = t.header.get(INA_RESERVATIONS_KEY) {
                reservations.extend(crate::trace::parse_reservations(v).map_err(|m| {
                    self.job_err(
                        j,
                        p,
                        PipelineError::Option {
                            option: INA_RESERVATIONS_KEY.into(),
                            msg: m,
                        },
                    )
                })?);
            }
            self.alone(j, p, &t.records, &t.header, rep)?;
            first_header.get_or_insert_with(|| t.header.clone());
            let mut a = merged.job(pj.start_ns);
            for r in t.records {
                a.push(r).map_err(|msg| {
                    self.job_err(
                        j,
                        p,
                        PipelineError::Option {
                            option: "start-ns".into(),
                            msg,
                        },
                    )
                })?;
            }
            a.finish();
        }
        let names: Vec<String> = self.c.jobs.iter().map(|j| j.name.clone()).collect();
        let mut h = merge::header(&first_header.expect("a cluster has a job"), &names, &merged);
        let s = &self.c.spec;
        h.set("ina_slots", s.ina_slots)
            .set(INA_TENANTS_KEY, format_tenants(&self.c.tenants()));
        if p.plans() {
            reservations.sort_unstable();
            h.set("ina_policy", InaPolicy::Planned)
                .set("ina", InaMode::Planned)
                .set(INA_RESERVATIONS_KEY, format_reservations(&reservations));
        }
        Ok((merged, h))
    }

    /// The merged trace written to `dir/trace.csv.gz` (when the cluster keeps traces):
    /// the name the replay reports it by.
    fn write_merged(
        &self,
        p: ClusterPolicy,
        dir: &Path,
        h: &TraceHeader,
        merged: &Merged,
    ) -> Result<String, ClusterError> {
        if !self.c.spec.traces {
            return Ok(format!("{} (in memory)", dir.join("trace").display()));
        }
        let f = dir.join("trace.csv.gz");
        let mut w = crate::trace::TraceWriter::create(&f, h).map_err(|e| self.pol_err(p, e))?;
        for r in &merged.records {
            w.write(r).map_err(|e| self.pol_err(p, e))?;
        }
        w.finish().map_err(|e| self.pol_err(p, e))?;
        Ok(f.display().to_string())
    }

    /// One row per job at policy `p`: shared (from the merged replay) beside alone, the
    /// slots each held, the planner's pool and prediction, ns-3's iterations.
    fn job_rows(
        &self,
        p: ClusterPolicy,
        merged: &Merged,
        result: &ReplayResult,
        info: &[(Option<u32>, Option<f64>)],
        ns3: Option<Vec<u64>>,
    ) -> Vec<JobResult> {
        let (start, end) = times(result);
        let mut rows = Vec::new();
        for (j, pj) in self.c.jobs.iter().enumerate() {
            let (alone, alone_slots, ns3_alone) = self.alone[&(j, alone_family(p))].clone();
            rows.push(JobResult {
                job: pj.name.clone(),
                policy: p,
                gpus: pj.gpus.len() as u32,
                placement: pj.placement.clone(),
                start_ns: pj.start_ns,
                shared: merged.job_summary(j, &start, &end),
                alone,
                slots: result.tenant_slots.get(j).copied().unwrap_or_default(),
                alone_slots,
                plan_pool: info[j].0,
                predicted_slowdown: info[j].1,
                ns3_iteration_ns: ns3.as_ref().map(|n| n[j]),
                ns3_alone_iteration_ns: ns3_alone,
            });
        }
        rows
    }

    fn pol_err(&self, p: ClusterPolicy, e: FormatError) -> ClusterError {
        ClusterError::Policy {
            policy: p,
            source: Box::new(PipelineError::from(e)),
        }
    }

    /// Job `j` alone at policy `p` (once per policy family): its own trace (the same
    /// records as in the merged trace, for every policy but the planner's, whose alone
    /// run is the job's full-pool plan), replayed on the fabric with the pool to itself.
    fn alone(
        &mut self,
        j: usize,
        p: ClusterPolicy,
        records: &[crate::record::FlowRecord],
        header: &TraceHeader,
        rep: &mut dyn Reporter,
    ) -> Result<(), ClusterError> {
        let key = (j, alone_family(p));
        if self.alone.contains_key(&key) {
            return Ok(());
        }
        let pj = &self.c.jobs[j];
        let name = format!("{} alone ({p})", pj.name);
        let replay = |recs: &[crate::record::FlowRecord], h: &TraceHeader| {
            replay_records(
                recs,
                h,
                &self.c.fabric,
                self.c.spec.seed,
                &name,
                false,
                self.c.spec.rate_model,
            )
        };
        let own = if p.plans() {
            let full = &self.candidates.as_ref().expect("planned first")[j][0];
            let o = joint::lowering(&self.base(j, p)?, full);
            let t = generate_trace(&pj.job, &o, None, true, &mut |_| {})
                .map_err(|e| self.job_err(j, p, e))?;
            Some((t.records, t.header))
        } else {
            None
        };
        let (records, header) = own.as_ref().map_or((records, header), |(r, h)| (&r[..], h));
        let r = replay(records, header).map_err(|e| self.job_err(j, p, e))?;
        let ns3 = if self.c.spec.ns3 {
            let dir = self.out.join(p.as_str()).join(format!("{}-alone", pj.name));
            let (rows, _) = self.ns3_rows(p, records, header, &dir, &name, rep)?;
            Some(rows.iter().map(|r| r.end_ns).max().unwrap_or(0))
        } else {
            None
        };
        rep.line(&format!(
            "[{p}] job `{}` alone: iteration {:.3} ms",
            pj.name,
            r.summary.iteration_time_ns as f64 / 1e6
        ));
        self.alone
            .insert(key, (r.summary.clone(), r.summary.ina_slot_peak, ns3));
        Ok(())
    }

    /// The merged trace on ns-3: each job's iteration from the glue's `fct.csv`.
    fn ns3(
        &mut self,
        p: ClusterPolicy,
        merged: &Merged,
        h: &TraceHeader,
        dir: &Path,
        name: &str,
        rep: &mut dyn Reporter,
    ) -> Result<Vec<u64>, ClusterError> {
        let (rows, n) = self.ns3_rows(p, &merged.records, h, &dir.join("ns3"), name, rep)?;
        let (mut start, mut end) = (vec![0u64; n], vec![0u64; n]);
        for row in rows {
            if let Some(i) = usize::try_from(row.flow_id).ok().filter(|&i| i < n) {
                start[i] = row.start_ns;
                end[i] = row.end_ns;
            }
        }
        Ok((0..self.c.jobs.len())
            .map(|j| merged.job_summary(j, &start, &end).iteration_time_ns)
            .collect())
    }

    /// `records` (under header `h`) emitted into `dir` and run on the ns-3 glue: the
    /// glue's `fct.csv` rows, and how many records there were.
    fn ns3_rows(
        &mut self,
        p: ClusterPolicy,
        records: &[crate::record::FlowRecord],
        h: &TraceHeader,
        dir: &Path,
        name: &str,
        rep: &mut dyn Reporter,
    ) -> Result<(Vec<crate::fct::FctRow>, usize), ClusterError> {
        let err = |e: PipelineError| ClusterError::Policy {
            policy: p,
            source: Box::new(e),
        };
        let model = crate::ns3::ina_model(h).map_err(|e| err(PipelineError::Ns3(Box::new(e))))?;
        let emit = crate::ns3::EmitOptions {
            seed: self.c.spec.seed,
            routing: self.c.spec.routing,
            gpu_type: "A100".into(),
            ..crate::ns3::EmitOptions::default()
        };
        crate::pipeline::emit_ns3(records, &model, &self.c.fabric, &emit, dir, name)
            .map_err(err)?;
        let bin = match &self.glue {
            Some(b) => b.clone(),
            None => self
                .glue
                .insert(crate::pipeline::glue().map_err(err)?)
                .clone(),
        };
        let run = crate::pipeline::run_ns3(&bin, dir, |_, _| {}).map_err(err)?;
        rep.line(&format!(
            "[{p}] {name}: {}",
            crate::pipeline::ns3_report(&run, dir)
        ));
        let rows = crate::formats::fct_csv::read(&dir.join("fct.csv"))
            .map_err(|e| err(PipelineError::from(e)))?;
        Ok((rows, records.len()))
    }
}

/// Each record's start and end in a replay, by position.
fn times(r: &ReplayResult) -> (Vec<u64>, Vec<u64>) {
    r.row_iter().map(|row| (row.start_ns, row.end_ns)).unzip()
}

/// Slot-time held over the whole pool of every aggregating switch for the makespan.
fn utilisation(r: &ReplayResult, fabric: &Topology, s: &ClusterSpec) -> f64 {
    let held: u64 = crate::fct::switch_slots(&r.slots)
        .iter()
        .map(|x| x.slot_time)
        .sum();
    let switches = crate::trace::aggregating_switches(fabric, &s.ina_switches)
        .map(|(can, _)| can.iter().filter(|&&c| c).count())
        .unwrap_or(0);
    let denom = f64::from(s.ina_slots) * switches as f64 * r.summary.iteration_time_ns as f64;
    if denom > 0.0 {
        held as f64 / denom
    } else {
        0.0
    }
}

/// What a cluster sweep produced: each point with its rows, as written to its tables.
#[derive(Debug)]
pub struct SweepOutcome {
    /// Per point (product order): the point, its `jobs.csv` rows, its `cluster.csv` rows.
    pub points: Vec<(SweepPoint, Vec<JobRow>, Vec<ClusterRow>)>,
}

/// Runs every point of `spec`'s `[sweep]` into `out/points/<label>/` (each written into
/// `<label>.tmp/` and renamed when complete, so a killed sweep leaves no half point and a
/// re-run skips the points already done), then `out/jobs.csv` and `out/cluster.csv`: every
/// point's rows, read back from its tables, with the axis columns first. Every point is
/// prepared (its jobs read and placed) before any runs.
pub fn run_sweep(
    spec: &ClusterSpec,
    out: &Path,
    rep: &mut dyn Reporter,
) -> Result<SweepOutcome, ClusterError> {
    let points = spec.points();
    let mut ready = Vec::new();
    for p in &points {
        let c = Cluster::prepare(p.spec.clone()).map_err(|e| match e {
            ClusterError::File(f) => ClusterError::File(FormatError::file(
                &spec.path,
                format!("sweep point {}: {f}", p.label),
            )),
            other => other,
        })?;
        ready.push(c);
    }
    let dir = out.join(POINTS_DIR);
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |e| ClusterError::File(FormatError::Io { path, source: e })
    };
    let set = begin_sweep_output(spec, &points, out, rep)?;
    let mut done = Vec::new();
    for (p, c) in points.into_iter().zip(&ready) {
        let fin = dir.join(&p.label);
        let tmp = dir.join(format!("{}.tmp", p.label));
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).map_err(io(&tmp))?;
        }
        // done before, and for this very cluster (not a point of the same label of an
        // edited file)
        if crate::formats::atomic::completed_by(&fin).as_deref() == Some(&run_name(&c.spec)) {
            rep.line(&format!("sweep point {}: done before", p.label));
        } else {
            rep.line(&format!("sweep point {}", p.label));
            run(c, &tmp, rep)?;
            if fin.exists() {
                std::fs::remove_dir_all(&fin).map_err(io(&fin))?;
            }
            std::fs::rename(&tmp, &fin).map_err(io(&fin))?;
        }
        let jobs = crate::formats::cluster_csv::read_jobs(&fin.join(table::JOBS_CSV))?;
        let cl = crate::formats::cluster_csv::read_cluster(&fin.join(table::CLUSTER_CSV))?;
        done.push((p, jobs, cl));
    }
    let axes: Vec<&str> = done
        .first()
        .map(|(p, _, _)| p.axes.iter().map(|a| a.0).collect())
        .unwrap_or_default();
    let mut jobs = Vec::new();
    let mut clusters = Vec::new();
    for (p, j, c) in &done {
        let vals: Vec<String> = p.axes.iter().map(|a| a.1.clone()).collect();
        jobs.extend(j.iter().map(|r| (vals.clone(), r)));
        clusters.extend(c.iter().map(|r| (vals.clone(), r)));
    }
    crate::formats::cluster_csv::write_with_axes(&out.join(table::JOBS_CSV), &axes, &jobs)?;
    crate::formats::cluster_csv::write_with_axes(&out.join(table::CLUSTER_CSV), &axes, &clusters)?;
    set.finish()?;
    Ok(SweepOutcome { points: done })
}

/// The directory of a cluster sweep's points.
pub const POINTS_DIR: &str = "points";

/// Marks a cluster sweep's `out` (its points and the two tables) and clears what is not
/// one of `points`: the directories of points an earlier sweep had and this one has not,
/// and the policy directories of a cluster run without a sweep. Points of this sweep stay,
/// to be resumed when their own marker says they were run for the same cluster.
fn begin_sweep_output(
    spec: &ClusterSpec,
    points: &[SweepPoint],
    out: &Path,
    rep: &mut dyn Reporter,
) -> Result<crate::formats::atomic::OutputSet, ClusterError> {
    let mut members: Vec<String> = points
        .iter()
        .map(|p| format!("{POINTS_DIR}/{}", p.label))
        .collect();
    members.extend([table::JOBS_CSV.to_string(), table::CLUSTER_CSV.to_string()]);
    let owned = |name: &str| name.parse::<ClusterPolicy>().is_ok();
    let set = crate::formats::atomic::OutputSet::resuming(
        out,
        &format!("ina3d cluster {} (sweep)", spec.path.display()),
        members.clone(),
        owned,
    )?;
    let dir = out.join(POINTS_DIR);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(set);
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let label = name.strip_suffix(".tmp").unwrap_or(&name);
        if !points.iter().any(|p| p.label == label) {
            rep.line(&format!(
                "removing {}: not a point of this sweep",
                e.path().display()
            ));
            let p = e.path();
            std::fs::remove_dir_all(&p)
                .or_else(|_| std::fs::remove_file(&p))
                .map_err(|source| ClusterError::File(FormatError::Io { path: p, source }))?;
        }
    }
    Ok(set)
}
