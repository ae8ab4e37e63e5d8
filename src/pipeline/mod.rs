//! The stages as library calls, and the main job on top of them.
//!
//! Every command of the CLI — `trace`, `replay`, `ns3 emit|run`, `compare`, `run`,
//! `sweep` — calls these entries in-process; nothing re-executes the binary.
//!
//! - [`JobSpec`] → [`Job::prepare`]: input + overrides → training config, topology,
//!   workload, once per job.
//! - [`generate_trace`]: one trace to a file and/or memory; [`trace_report`] its summary.
//! - [`replay_records`] / [`replay_file`]: the native replayer.
//! - [`load_ns3_input`], [`emit_ns3`], [`glue`], [`run_ns3`]: the ns-3 back-end.
//! - comparison and tables: [`crate::report`].
//! - [`RunSpec`] → [`run()`]: every [`Policy`] × every ECMP seed → `results.csv` (the
//!   main job, `ina3d run`; also what each sweep cell runs).

mod bench;
mod job;
mod policy;
pub mod reality;
mod run;
mod spec;
mod stages;
pub mod validate;

pub use bench::{
    bench_spec, emit_bench_header, generate_bench_trace, ns3_bench, write_bench, BENCH_CSV,
    BENCH_HEADER_FILE,
};
pub use job::{
    env_pairs, override_pairs, Job, JobSpec, ParallelSizes, DEFAULT_INPUT, DEFAULT_TOPOLOGY,
    MEGATRON_FLAGS,
};
pub use policy::{parse_policies, Policy, PolicyContext, DEFAULT_POLICIES};
pub use run::{run, RunOutcome};
pub use spec::{
    parse_seeds, plan_time_limit_ok, Ns3Choice, OptionError, OptionValue, RunOption, RunSpec,
    DEFAULT_PLAN_TIME_LIMIT, MAX_PLAN_TIME_LIMIT, RUN_OPTIONS,
};
pub use stages::{
    emit_ns3, emit_report, generate_trace, glue, header_routing, header_seed, header_topology,
    load_ns3_input, make_plan, ns3_bar, ns3_report, replay_file, replay_job, replay_job_timeline,
    replay_records, replay_records_timeline, replay_report, replay_table, replay_table_until,
    resolve_routing, resolve_seed, resolve_topology, run_ns3, trace_report, FileOptions,
    FileReplay, Ns3Input, PlanReplayer,
};

use std::path::PathBuf;

/// ns-3 runs on its own ([`Ns3Choice::Auto`]) only when it is installed and the trace moves
/// at most this many payload bytes over the network (net + INA records, all classes).
/// Packet-level cost grows with bytes, not records: measured here, the glue needs ≈ 0.1 s
/// per MB of TCP and ≈ 0.05 s per MB of INA traffic (256 B slots), so this bound keeps one
/// policy under about half a minute; the bundled 16-GPU example moves ≈ 10 GB and is
/// replay-only unless ns-3 is asked for (then expect tens of minutes).
pub const AUTO_NS3_MAX_NET_BYTES: u64 = 256 << 20;

/// A generated trace (what the trace stage and the collective bench give).
#[derive(Debug)]
pub struct GeneratedTrace {
    /// The header written to (or that would head) the file.
    pub header: crate::trace::TraceHeader,
    /// Counts of the generation.
    pub stats: crate::trace::TraceStats,
    /// The records, in dependency order, when asked to keep them in memory.
    pub records: Vec<crate::record::FlowRecord>,
    /// The file written, when one was asked for.
    pub path: Option<PathBuf>,
}

/// Where a run's stage messages go: the command line shows warnings and progress (and the
/// stage messages with `-v`), a sweep cell writes everything to its `log.txt`.
pub trait Reporter {
    /// One stage message (may hold several lines): what a stage did, in detail.
    fn line(&mut self, text: &str);
    /// Something the user should see even when stage messages are hidden.
    fn warn(&mut self, text: &str) {
        self.line(&format!("warning: {text}"));
    }
    /// The run is at step `done` of `total` (policies × seeds), doing `what`; called before
    /// each step and with `done == total` at the end.
    fn step(&mut self, _done: usize, _total: usize, _what: &str) {}
    /// Whether stages may draw their own progress bars on the terminal.
    fn bars(&self) -> bool {
        false
    }
}

/// Why a stage failed. Each variant says what was being done; its source says why (the
/// command line prints the chain `what: why: …`).
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// The Megatron input cannot be read.
    #[error("reading `{input}`")]
    Input {
        /// The input as given.
        input: String,
        /// Why.
        #[source]
        source: Box<crate::megatron::MegatronError>,
    },
    /// A Megatron override does not apply.
    #[error("override --{key} {value}")]
    Override {
        /// Megatron key (kebab-case).
        key: String,
        /// Value given.
        value: String,
        /// Why.
        #[source]
        source: Box<crate::megatron::MegatronError>,
    },
    /// The configuration after every override is inconsistent.
    #[error("the training configuration is inconsistent")]
    Inconsistent(#[source] Box<crate::megatron::MegatronError>),
    /// An option's value is not usable.
    #[error("{option}: {msg}")]
    Option {
        /// The option (flag or grid key), possibly with its value.
        option: String,
        /// What is wrong.
        msg: String,
    },
    /// The topology cannot be built or read.
    #[error("--topology `{spec}`")]
    Topology {
        /// The spec.
        spec: String,
        /// Why.
        #[source]
        source: Box<crate::topology::TopologyError>,
    },
    /// Routing cannot be set up on the topology.
    #[error("routing on `{spec}`")]
    Routing {
        /// The topology's spec.
        spec: String,
        /// Why.
        #[source]
        source: Box<crate::topology::TopologyError>,
    },
    /// The workload cannot be built.
    #[error("building the 3D-parallel workload")]
    Workload(#[source] Box<crate::schedule::ScheduleError>),
    /// The job does not fit the topology.
    #[error("the job does not fit the topology")]
    Fit(#[source] Box<crate::topology::TopologyError>),
    /// Trace generation failed.
    #[error("generating {what}")]
    Generate {
        /// The trace (file or "the trace").
        what: String,
        /// Why.
        #[source]
        source: Box<crate::trace::TraceError>,
    },
    /// A trace file cannot be read.
    #[error("reading trace {}", path.display())]
    ReadTrace {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: Box<crate::formats::FormatError>,
    },
    /// The topology given and the one a trace names differ.
    #[error("--topology `{given}` disagrees with the topology `{header}` the trace {} was generated for", trace.display())]
    TopologyMismatch {
        /// Given.
        given: String,
        /// In the header.
        header: String,
        /// The trace.
        trace: PathBuf,
    },
    /// `--routing` names another mode than the trace's header field `routing` (absent:
    /// `ecmp`): its INA trees and plan were built on the header's routes.
    #[error("--routing {given} contradicts the trace {}: its header field `routing` is {header} (absent means ecmp); replay it with --routing {header}, or generate the trace anew with `ina3d trace --routing {given}`", .trace.display())]
    RoutingMismatch {
        /// Given.
        given: crate::topology::RoutingMode,
        /// In the header.
        header: crate::topology::RoutingMode,
        /// The trace.
        trace: PathBuf,
    },
    /// Neither a topology given nor one in the trace.
    #[error("the trace {} names no topology: give --topology", .0.display())]
    NoTopology(PathBuf),
    /// The replayer failed.
    #[error("replaying {trace}")]
    Replay {
        /// The trace's name.
        trace: String,
        /// Why.
        #[source]
        source: Box<crate::replay::ReplayError>,
    },
    /// A trace's header does not describe an INA model ns-3 can take.
    #[error("trace {}", trace.display())]
    Ns3Trace {
        /// The trace.
        trace: PathBuf,
        /// Why.
        #[source]
        source: Box<crate::ns3::Ns3Error>,
    },
    /// Writing the ns-3 inputs failed.
    #[error("emitting into {}", dir.display())]
    Emit {
        /// The directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: Box<crate::ns3::Ns3Error>,
    },
    /// The glue run failed or is incomplete.
    #[error("running ns-3 on {}", dir.display())]
    Ns3Run {
        /// The emitted directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: Box<crate::ns3::Ns3Error>,
    },
    /// Other ns-3 back-end failures (glue build, input files).
    #[error(transparent)]
    Ns3(Box<crate::ns3::Ns3Error>),
    /// A file could not be written or read.
    #[error(transparent)]
    File(Box<crate::formats::FormatError>),
    /// I/O on a named path.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A run's times cannot be read as the bench its trace describes.
    #[error("{what}")]
    Bench {
        /// The run.
        what: String,
        /// Why.
        #[source]
        source: Box<crate::fct::bench::BenchError>,
    },
    /// Comparison or tables failed.
    #[error(transparent)]
    Report(Box<crate::report::ReportError>),
    /// The planner could not plan the job.
    #[error("planning")]
    Plan(#[source] Box<crate::plan::PlanError>),
    /// The timeline of a replay cannot be made.
    #[error("making the timeline")]
    Timeline(#[source] Box<crate::replay::timeline::TimelineError>),
    /// One policy (at one seed) of a run failed.
    #[error("policy `{policy}`, seed {seed}")]
    Policy {
        /// The policy.
        policy: Policy,
        /// The seed.
        seed: u64,
        /// Why.
        #[source]
        source: Box<PipelineError>,
    },
}

impl From<crate::formats::FormatError> for PipelineError {
    fn from(e: crate::formats::FormatError) -> Self {
        PipelineError::File(Box::new(e))
    }
}

impl From<crate::report::ReportError> for PipelineError {
    fn from(e: crate::report::ReportError) -> Self {
        PipelineError::Report(Box::new(e))
    }
}

impl PipelineError {
    /// `path: error` for an I/O error on `path`.
    pub fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> PipelineError + '_ {
        move |source| PipelineError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// An error and its sources as one line, `what: why: …` (as the command line prints them).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.ends_with(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s
}
