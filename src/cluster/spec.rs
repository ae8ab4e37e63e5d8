//! The cluster file (`ina3d cluster CLUSTER.toml`): the fabric, its slot pools, the
//! policies to compare and one `[[job]]` table per job.
//!
//! ```toml
//! topology = "fat-tree:k=4,gpus-per-server=2"
//! ina-slots = 1024
//! policies = ["ring", "atp", "plan"]
//! [[job]]
//! name = "a"
//! input = "traces/example/tiny.toml"
//! placement = "interleaved"
//! [[job]]
//! name = "b"
//! input = "traces/example/tiny.toml"
//! set = { hidden_size = 512 }
//! placement = "interleaved"
//! ```
//!
//! Every error names the file, line, column and field (`job[1] b.input`), and the jobs'
//! inputs are read here, so a typo stops the run before anything is written.

use super::place::Placement;
use super::ClusterPolicy;
use crate::formats::FormatError;
use crate::pipeline::{error_chain, JobSpec, DEFAULT_TOPOLOGY};
use crate::plan::SolverKind;
use crate::record::Class;
use crate::sweep::grid::line_col;
use crate::trace::{InaMode, InaSwitches};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// What the joint planner (`plan`) minimises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Objective {
    /// The slowest job's iteration time (ties: the sum of slowdowns).
    Slowest,
    /// The sum over jobs of slowdown against running alone.
    SumSlowdown,
}

crate::keyword::keyword_enum!(Objective, "objective", Objective::Slowest => "slowest", Objective::SumSlowdown => "sum-slowdown");

/// The policies run when the file names none.
pub const DEFAULT_CLUSTER_POLICIES: [ClusterPolicy; 5] = [
    ClusterPolicy::Ring,
    ClusterPolicy::Split,
    ClusterPolicy::Atp,
    ClusterPolicy::Plan,
    ClusterPolicy::PlanFair,
];

/// A checked cluster file.
#[derive(Clone, Debug)]
pub struct ClusterSpec {
    /// The file (errors name it).
    pub path: PathBuf,
    text: String,
    /// Topology spec or HPCC topology file of the shared fabric.
    pub topology: String,
    /// Aggregator slots per switch (one pool per switch, shared by every job).
    pub ina_slots: u32,
    /// Policies to compare, `ring` first.
    pub policies: Vec<ClusterPolicy>,
    /// Classes that may aggregate (every INA policy).
    pub ina_classes: Vec<Class>,
    /// Switches that can aggregate.
    pub ina_switches: InaSwitches,
    /// The tree algorithm of `split` and `atp`.
    pub ina: InaMode,
    /// ECMP seed (every job's routes and trees).
    pub seed: u64,
    /// How the fabric chooses among equal-cost paths (`routing`, every job).
    pub routing: crate::topology::RoutingMode,
    /// The joint planner's objective.
    pub objective: Objective,
    /// `plan-fair`: the largest predicted slowdown a job may get.
    pub fair_slowdown: f64,
    /// Wall-time budget of each of the planner's solves, seconds.
    pub plan_time_limit: f64,
    /// The planner's solver for each job's candidate plans.
    pub plan_solver: SolverKind,
    /// Also run each policy's merged trace on ns-3.
    pub ns3: bool,
    /// Write each policy's merged trace (`DIR/<policy>/trace.csv.gz`).
    pub traces: bool,
    /// The replayer's rate model (`ideal` or `dcqcn`, as `ina3d replay --rate-model`).
    pub rate_model: crate::replay::RateModel,
    /// The jobs, in file order.
    pub jobs: Vec<ClusterJob>,
    /// The `[sweep]` table, if any.
    pub sweep: Option<Sweep>,
}

/// The latest a job may start after the common start (`start-ns`): a day, in ns. Far
/// beyond any study of jobs sharing a fabric, and low enough that a start plus any time
/// of a trace stays inside the trace format's 2^50 ns.
pub const MAX_START_NS: u64 = 86_400_000_000_000;

/// One `[[job]]`.
#[derive(Clone, Debug)]
pub struct ClusterJob {
    /// Its name (a column of `jobs.csv`).
    pub name: String,
    /// The job as `ina3d trace` would take it (input, Megatron overrides, the fabric).
    pub spec: JobSpec,
    /// Where its ranks go.
    pub placement: Placement,
    /// When it starts, ns after the others' common start (at most [`MAX_START_NS`]).
    pub start_ns: u64,
    spans: BTreeMap<&'static str, Range<usize>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawCluster {
    topology: Option<Spanned<String>>,
    ina_slots: Option<Spanned<i64>>,
    policies: Option<Spanned<Vec<Spanned<String>>>>,
    ina_classes: Option<Spanned<Vec<Spanned<String>>>>,
    ina_switches: Option<Spanned<String>>,
    ina: Option<Spanned<String>>,
    seed: Option<Spanned<i64>>,
    routing: Option<Spanned<String>>,
    objective: Option<Spanned<String>>,
    fair_slowdown: Option<Spanned<f64>>,
    plan_time_limit: Option<Spanned<f64>>,
    plan_solver: Option<Spanned<String>>,
    ns3: Option<Spanned<bool>>,
    traces: Option<Spanned<bool>>,
    rate_model: Option<Spanned<String>>,
    sweep: Option<Spanned<RawSweep>>,
    #[serde(default)]
    job: Vec<Spanned<RawJob>>,
}

/// A list of job names, as written.
type Names = Vec<Spanned<String>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawSweep {
    ina_slots: Option<Spanned<Vec<Spanned<i64>>>>,
    placement: Option<Spanned<Vec<Spanned<String>>>>,
    mix: Option<Spanned<Vec<Spanned<Names>>>>,
}

/// A `[sweep]` table: axes over which the cluster is run again, their product in the
/// order slots, placement, mix (the first slowest).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sweep {
    /// Slots per switch.
    pub ina_slots: Vec<u32>,
    /// A placement every job takes (`contiguous`, `interleaved`, `random:SEED`).
    pub placement: Vec<Placement>,
    /// Which jobs run together, by name.
    pub mix: Vec<Vec<String>>,
}

/// One point of a sweep: its label (a directory name), its axis values, its cluster.
#[derive(Clone, Debug)]
pub struct SweepPoint {
    /// `ina_slots-256_placement-interleaved_mix-a+b` (only the swept axes).
    pub label: String,
    /// (column, value) pairs, in column order: `sweep_ina_slots`, `sweep_placement`,
    /// `sweep_mix` (those swept).
    pub axes: Vec<(&'static str, String)>,
    /// The cluster at this point.
    pub spec: ClusterSpec,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawJob {
    name: Spanned<String>,
    input: Spanned<String>,
    set: Option<Spanned<BTreeMap<String, Spanned<toml::Value>>>>,
    placement: Option<Spanned<toml::Value>>,
    placement_seed: Option<Spanned<i64>>,
    start_ns: Option<Spanned<i64>>,
}

/// Makes the error at a byte offset of the cluster text, naming a field.
type At<'a> = dyn Fn(usize, &str, String) -> FormatError + 'a;

impl ClusterSpec {
    /// Reads and checks the cluster file `path` (every job's input read and checked).
    pub fn read(path: &Path) -> Result<ClusterSpec, FormatError> {
        let text = std::fs::read_to_string(path).map_err(FormatError::io(path))?;
        ClusterSpec::parse(path, &text)
    }

    /// Parses and checks cluster text; `path` names it in errors and anchors relative
    /// inputs that are not found from the working directory.
    pub fn parse(path: &Path, text: &str) -> Result<ClusterSpec, FormatError> {
        let at = |off: usize, field: &str, msg: String| at_offset(path, text, off, field, msg);
        let raw: RawCluster = toml::from_str(text).map_err(|e| {
            let off = e.span().map_or(0, |s| s.start);
            // the key on the error's line names the field (serde's message names a type)
            let field = Self::key_at(text, off).unwrap_or_else(|| "cluster".to_string());
            at(off, &field, e.message().trim().replace('\n', "; "))
        })?;
        let mut s = ClusterSpec::defaults(path, text);
        s.fabric_keys(&raw, &at)?;
        s.run_keys(&raw, &at)?;
        s.jobs_of(&raw, text.len(), &at)?;
        if let Some(sw) = &raw.sweep {
            s.sweep = Some(s.sweep_table(sw.get_ref(), sw.span())?);
        }
        Ok(s)
    }

    /// A cluster of `text` read from `path` with every key at its default and no job.
    fn defaults(path: &Path, text: &str) -> ClusterSpec {
        let d = crate::trace::InaConfig::default();
        ClusterSpec {
            path: path.to_path_buf(),
            text: text.to_string(),
            topology: DEFAULT_TOPOLOGY.into(),
            ina_slots: d.slots,
            policies: DEFAULT_CLUSTER_POLICIES.to_vec(),
            ina_classes: d.classes.clone(),
            ina_switches: InaSwitches::All,
            ina: InaMode::Hierarchical,
            seed: 0,
            routing: Default::default(),
            objective: Objective::Slowest,
            fair_slowdown: 1.2,
            plan_time_limit: 10.0,
            plan_solver: SolverKind::Heuristic,
            ns3: false,
            traces: true,
            rate_model: crate::replay::RateModel::default(),
            jobs: Vec::new(),
            sweep: None,
        }
    }

    /// The fabric's keys: topology, INA slots, policies, classes, switches and mode.
    fn fabric_keys(&mut self, raw: &RawCluster, at: &At) -> Result<(), FormatError> {
        if let Some(t) = &raw.topology {
            crate::topology::Topology::from_spec(t.get_ref())
                .map_err(|e| at(t.span().start, "topology", error_chain(&e)))?;
            self.topology = t.get_ref().clone();
        }
        if let Some(n) = &raw.ina_slots {
            self.ina_slots = u32::try_from(*n.get_ref())
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| {
                    at(
                        n.span().start,
                        "ina-slots",
                        format!("{} is not a slot count (1 to 4294967295)", n.get_ref()),
                    )
                })?;
        }
        if let Some(p) = &raw.policies {
            let mut v: Vec<ClusterPolicy> = Vec::new();
            for x in p.get_ref() {
                let pol: ClusterPolicy = x
                    .get_ref()
                    .parse()
                    .map_err(|e: String| at(x.span().start, "policies", e))?;
                if v.contains(&pol) {
                    return Err(at(
                        x.span().start,
                        "policies",
                        format!("`{pol}` is named twice"),
                    ));
                }
                v.push(pol);
            }
            if v.is_empty() {
                return Err(at(p.span().start, "policies", "no policy named".into()));
            }
            self.policies = v;
        }
        if let Some(c) = &raw.ina_classes {
            let list: Vec<&str> = c.get_ref().iter().map(|x| x.get_ref().as_str()).collect();
            self.ina_classes = crate::trace::parse_classes(&list.join(","))
                .map_err(|e| at(c.span().start, "ina-classes", e))?;
            if self.ina_classes.is_empty() {
                return Err(at(c.span().start, "ina-classes", "no class named".into()));
            }
        }
        if let Some(w) = &raw.ina_switches {
            self.ina_switches = w
                .get_ref()
                .parse()
                .map_err(|e: String| at(w.span().start, "ina-switches", e))?;
        }
        if let Some(m) = &raw.ina {
            self.ina = match m.get_ref().parse::<InaMode>() {
                Ok(x @ (InaMode::SwitchMl | InaMode::Hierarchical)) => x,
                Ok(_) | Err(_) => {
                    return Err(at(
                        m.span().start,
                        "ina",
                        format!(
                            "`{}`: the fixed policies build switchml or hierarchical trees",
                            m.get_ref()
                        ),
                    ))
                }
            };
        }
        Ok(())
    }

    /// The run's keys: seed, routing, the planner's objective and limits, the rate model,
    /// ns-3 and traces.
    fn run_keys(&mut self, raw: &RawCluster, at: &At) -> Result<(), FormatError> {
        if let Some(n) = &raw.seed {
            self.seed = u64::try_from(*n.get_ref()).map_err(|_| {
                at(
                    n.span().start,
                    "seed",
                    "a seed is a non-negative integer".into(),
                )
            })?;
        }
        if let Some(r) = &raw.routing {
            self.routing = r
                .get_ref()
                .parse()
                .map_err(|e: String| at(r.span().start, "routing", e))?;
        }
        if let Some(o) = &raw.objective {
            self.objective = o
                .get_ref()
                .parse()
                .map_err(|e: String| at(o.span().start, "objective", e))?;
        }
        if let Some(f) = &raw.fair_slowdown {
            if !(f.get_ref().is_finite() && *f.get_ref() >= 1.0) {
                return Err(at(
                    f.span().start,
                    "fair-slowdown",
                    format!("{} is not a slowdown bound (a number ≥ 1)", f.get_ref()),
                ));
            }
            self.fair_slowdown = *f.get_ref();
        }
        if let Some(f) = &raw.plan_time_limit {
            if !crate::pipeline::plan_time_limit_ok(*f.get_ref()) {
                return Err(at(
                    f.span().start,
                    "plan-time-limit",
                    "seconds, above 0 and at most a day".into(),
                ));
            }
            self.plan_time_limit = *f.get_ref();
        }
        if let Some(x) = &raw.plan_solver {
            self.plan_solver = x
                .get_ref()
                .parse()
                .map_err(|e: String| at(x.span().start, "plan-solver", e))?;
        }
        if let Some(x) = &raw.rate_model {
            self.rate_model = x
                .get_ref()
                .parse()
                .map_err(|e: String| at(x.span().start, "rate-model", e))?;
        }
        self.ns3 = raw.ns3.as_ref().is_some_and(|b| *b.get_ref());
        self.traces = raw.traces.as_ref().is_none_or(|b| *b.get_ref());
        Ok(())
    }

    /// Every `[[job]]`, checked, names unique; `end` is the offset an error about a
    /// missing job points at (the end of the text).
    fn jobs_of(&mut self, raw: &RawCluster, end: usize, at: &At) -> Result<(), FormatError> {
        if raw.job.is_empty() {
            return Err(at(
                end,
                "job",
                "no [[job]] table: a cluster needs at least one job".into(),
            ));
        }
        for (i, j) in raw.job.iter().enumerate() {
            let job = self.job(i, j.get_ref())?;
            if let Some(o) = self.jobs.iter().position(|x| x.name == job.name) {
                return Err(self.error(
                    &job,
                    i,
                    "name",
                    format!("`{}` is also the name of job[{o}]", job.name),
                ));
            }
            self.jobs.push(job);
        }
        Ok(())
    }

    /// The `[sweep]` table, checked against the jobs.
    fn sweep_table(&self, sw: &RawSweep, span: Range<usize>) -> Result<Sweep, FormatError> {
        let at = |off: usize, field: &str, msg: String| {
            at_offset(&self.path, &self.text, off, &format!("sweep.{field}"), msg)
        };
        let mut out = Sweep::default();
        let empty = |v: &Range<usize>, f: &str| at(v.start, f, "no values".into());
        if let Some(v) = &sw.ina_slots {
            if v.get_ref().is_empty() {
                return Err(empty(&v.span(), "ina-slots"));
            }
            for n in v.get_ref() {
                out.ina_slots.push(
                    u32::try_from(*n.get_ref())
                        .ok()
                        .filter(|&k| k > 0)
                        .ok_or_else(|| {
                            at(
                                n.span().start,
                                "ina-slots",
                                format!("{} is not a slot count", n.get_ref()),
                            )
                        })?,
                );
            }
        }
        if let Some(v) = &sw.placement {
            if v.get_ref().is_empty() {
                return Err(empty(&v.span(), "placement"));
            }
            for p in v.get_ref() {
                out.placement.push(
                    Placement::parse(&toml::Value::String(p.get_ref().clone()), None)
                        .map_err(|e| at(p.span().start, "placement", e))?,
                );
            }
        }
        if let Some(v) = &sw.mix {
            if v.get_ref().is_empty() {
                return Err(empty(&v.span(), "mix"));
            }
            for m in v.get_ref() {
                if m.get_ref().is_empty() {
                    return Err(at(
                        m.span().start,
                        "mix",
                        "a mix names at least one job".into(),
                    ));
                }
                let mut names = Vec::new();
                for n in m.get_ref() {
                    if !self.jobs.iter().any(|j| &j.name == n.get_ref())
                        || names.contains(n.get_ref())
                    {
                        return Err(at(
                            n.span().start,
                            "mix",
                            format!(
                                "`{}` is not a job of the file, or is named twice",
                                n.get_ref()
                            ),
                        ));
                    }
                    names.push(n.get_ref().clone());
                }
                out.mix.push(names);
            }
        }
        if out == Sweep::default() {
            return Err(at(
                span.start,
                "sweep",
                "a [sweep] table needs an axis: ina-slots, placement or mix".into(),
            ));
        }
        Ok(out)
    }

    /// The points of the `[sweep]` (none without one).
    pub fn points(&self) -> Vec<SweepPoint> {
        let Some(sw) = &self.sweep else {
            return Vec::new();
        };
        let slots: Vec<Option<u32>> = opt_axis(&sw.ina_slots);
        let places: Vec<Option<Placement>> = opt_axis(&sw.placement);
        let mixes: Vec<Option<Vec<String>>> = opt_axis(&sw.mix);
        let mut out = Vec::new();
        for k in &slots {
            for p in &places {
                for m in &mixes {
                    let mut spec = self.clone();
                    spec.sweep = None;
                    let mut axes = Vec::new();
                    if let Some(k) = k {
                        spec.ina_slots = *k;
                        axes.push(("sweep_ina_slots", k.to_string()));
                    }
                    if let Some(p) = p {
                        for j in &mut spec.jobs {
                            j.placement = p.clone();
                        }
                        axes.push(("sweep_placement", p.label()));
                    }
                    if let Some(m) = m {
                        spec.jobs.retain(|j| m.contains(&j.name));
                        axes.push(("sweep_mix", m.join("+")));
                    }
                    let label = axes
                        .iter()
                        .map(|(k, v)| {
                            let k = k.trim_start_matches("sweep_");
                            format!("{k}-{}", v.replace(':', "-"))
                        })
                        .collect::<Vec<_>>()
                        .join("_");
                    out.push(SweepPoint { label, axes, spec });
                }
            }
        }
        out
    }

    /// The key of the `key = value` line holding byte `off` of `text` (its table's name
    /// first when it is under `[sweep]`, `[[job]]`…), if that line has one.
    fn key_at(text: &str, off: usize) -> Option<String> {
        let start = text.get(..off)?.rfind('\n').map_or(0, |p| p + 1);
        let line = text[start..].lines().next()?;
        let (key, _) = line.split_once('=')?;
        let key = key.trim().trim_matches(['"', '\'']);
        if key.is_empty() || key.contains(char::is_whitespace) {
            return None;
        }
        let table = text[..start]
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| l.starts_with('['))
            .map(|l| l.trim_matches(['[', ']']).trim().to_string());
        Some(match table {
            Some(t) => format!("{t}.{key}"),
            None => key.to_string(),
        })
    }

    /// One `[[job]]` table, its input read.
    fn job(&self, i: usize, j: &RawJob) -> Result<ClusterJob, FormatError> {
        let name = j.name.get_ref().trim().to_string();
        let mut spans = BTreeMap::new();
        spans.insert("name", j.name.span());
        spans.insert("input", j.input.span());
        let mut job = ClusterJob {
            name: name.clone(),
            spec: JobSpec {
                input: self.resolve_input(j.input.get_ref()),
                topology: self.topology.clone(),
                seed: self.seed,
                routing: self.routing,
                ..JobSpec::default()
            },
            placement: Placement::Contiguous,
            start_ns: 0,
            spans,
        };
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
        {
            return Err(self.error(
                &job,
                i,
                "name",
                format!("`{name}`: a job name is letters, digits, `_`, `.` or `-`"),
            ));
        }
        if let Some(set) = &j.set {
            job.spans.insert("set", set.span());
            for (k, v) in set.get_ref() {
                let text = match v.get_ref() {
                    toml::Value::String(s) => s.clone(),
                    toml::Value::Integer(n) => n.to_string(),
                    toml::Value::Float(f) => f.to_string(),
                    toml::Value::Boolean(b) => if *b { "True" } else { "False" }.to_string(),
                    _ => {
                        return Err(at_offset(
                            &self.path,
                            &self.text,
                            v.span().start,
                            &format!("{}.set.{k}", job_field(i, &name)),
                            "a Megatron value is text, a number or true/false".into(),
                        ))
                    }
                };
                job.spec.set.push(format!("{k}={text}"));
            }
        }
        if let Some(p) = &j.placement {
            job.spans.insert("placement", p.span());
            let seed = j.placement_seed.as_ref().map(|x| *x.get_ref());
            job.placement = Placement::parse(p.get_ref(), seed)
                .map_err(|e| self.error(&job, i, "placement", e))?;
        } else if let Some(x) = &j.placement_seed {
            job.spans.insert("placement-seed", x.span());
            return Err(self.error(
                &job,
                i,
                "placement-seed",
                "a placement seed goes with placement = \"random\"".into(),
            ));
        }
        if let Some(x) = &j.start_ns {
            job.spans.insert("start-ns", x.span());
            job.start_ns = u64::try_from(*x.get_ref())
                .ok()
                .filter(|s| *s <= MAX_START_NS)
                .ok_or_else(|| {
                    self.error(
                        &job,
                        i,
                        "start-ns",
                        format!(
                            "{} must be in [0, {MAX_START_NS}] ns (up to a day)",
                            x.get_ref()
                        ),
                    )
                })?;
        }
        // the input (and its overrides) must make a valid job: read it now
        if let Err(e) = job.spec.config() {
            // the overrides are at fault when the input alone reads
            let alone = crate::megatron::load_input(&job.spec.input).is_ok();
            let field = if alone && !job.spec.set.is_empty() {
                "set"
            } else {
                "input"
            };
            return Err(self.error(&job, i, field, error_chain(&e)));
        }
        Ok(job)
    }

    /// An input as given, or anchored at the cluster file's directory when only that
    /// path exists (so a cluster file and its job files can move together).
    fn resolve_input(&self, input: &str) -> String {
        let p = Path::new(input);
        if p.is_relative() && !p.exists() {
            if let Some(dir) = self.path.parent() {
                let q = dir.join(p);
                if q.exists() {
                    return q.display().to_string();
                }
            }
        }
        input.to_string()
    }

    /// The error `msg` at field `field` of job `i` (`job[i] NAME.field`), at that field's
    /// place in the file (else the job's name).
    pub fn error(&self, job: &ClusterJob, i: usize, field: &str, msg: String) -> FormatError {
        let at = job
            .spans
            .get(field)
            .or_else(|| job.spans.get("name"))
            .map_or(0, |r| r.start);
        at_offset(
            &self.path,
            &self.text,
            at,
            &format!("{}.{field}", job_field(i, &job.name)),
            msg,
        )
    }

    /// The error of job `i` at `field`, by index.
    pub fn job_error(&self, i: usize, field: &str, msg: String) -> FormatError {
        self.error(&self.jobs[i], i, field, msg)
    }
}

/// `job[i] NAME`, how errors name a job.
fn job_field(i: usize, name: &str) -> String {
    format!("job[{i}] {name}")
}

fn at_offset(path: &Path, text: &str, at: usize, field: &str, msg: String) -> FormatError {
    let (line, col) = line_col(text, at);
    FormatError::at(path, line, col, field, msg)
}

/// An axis's values as options, or one `None` when the axis is not swept.
fn opt_axis<T: Clone>(v: &[T]) -> Vec<Option<T>> {
    if v.is_empty() {
        vec![None]
    } else {
        v.iter().cloned().map(Some).collect()
    }
}
