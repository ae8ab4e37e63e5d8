//! `ina3d ns3 emit|run|ingest`.

use anyhow::{Context, Result};
use ina3d::ns3::{self, EmitOptions, Flavor, InaPolicy, StartSource};
use ina3d::pipeline;
use ina3d::topology::{RoutingMode, Topology};
use ina3d::units::Bytes;
use std::path::PathBuf;

/// Subcommands of `ina3d ns3`.
#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Write HPCC/Parsimon/SimAI inputs and the ns3-glue inputs for a trace.
    Emit(EmitArgs),
    /// Build (if needed) and run ns3-glue on an emitted directory; writes fct.csv, fct.txt, summary.csv.
    Run(RunArgs),
    /// Read HPCC fct/pfc/qlen, SimAI EndToEnd.csv or a summary.csv into tidy CSV.
    Ingest(IngestArgs),
}

/// `ina3d ns3 emit`.
#[derive(clap::Args, Debug)]
pub struct EmitArgs {
    /// The trace (`ina3d trace` output, CSV or .csv.gz; or a glue trace.txt to re-emit,
    /// with the params.txt and, under the planned slot policy, the reservations.txt
    /// beside it).
    pub trace: PathBuf,
    /// Topology: a builder spec (`fat-tree:k=4`, `leaf-spine:…`) or an HPCC/SimAI topology
    /// file. Defaults to the topology named in the trace header; an error when both are
    /// given and differ.
    #[arg(long)]
    pub topology: Option<String>,
    /// Output directory.
    #[arg(short, long)]
    pub out: PathBuf,
    /// Simulator dialect.
    #[arg(long, value_parser = super::keyword::<Flavor>(Flavor::NAMES), default_value_t = Flavor::Hpcc)]
    pub flavor: Flavor,
    /// Take flow.txt start times from a replay's fct.csv instead of a contention-free schedule.
    #[arg(long)]
    pub starts: Option<PathBuf>,
    /// ECMP seed of the glue's routes. Defaults to the trace header's seed, the one
    /// `ina3d replay` uses, so both back-ends take the same paths.
    #[arg(long)]
    pub seed: Option<u64>,
    /// How the glue's routes choose among equal-cost paths (ecmp, dmodk; spray is not
    /// forwarded by the glue yet). Must agree with the trace header's `routing` (absent:
    /// ecmp).
    #[arg(long, value_parser = super::keyword::<RoutingMode>(RoutingMode::NAMES))]
    pub routing: Option<RoutingMode>,
    /// Aggregator slots per switch (default: the trace header's).
    #[arg(long)]
    pub slots: Option<u32>,
    /// Payload bytes per slot, one packet (default: the trace header's).
    #[arg(long)]
    pub payload: Option<u64>,
    /// Outstanding slots per worker (default: the trace header's).
    #[arg(long)]
    pub window: Option<u32>,
    /// Slot exhaustion policy: static, best-effort, priority (default: the trace header's).
    #[arg(long, value_parser = super::keyword::<InaPolicy>(InaPolicy::NAMES))]
    pub policy: Option<InaPolicy>,
    /// How the glue carries net records: `roce` (RoCE-like queue pairs with DCQCN and
    /// ECN-marking switches, parameters from config.txt, as HPCC's and SimAI's ns-3) or
    /// `tcp` (TCP NewReno over deep drop-tail queues, windows of a few bandwidth-delay
    /// products).
    #[arg(long, value_parser = super::keyword::<ns3::Transport>(ns3::Transport::NAMES), default_value_t = ns3::Transport::Roce)]
    pub transport: ns3::Transport,
    /// TCP connections of the glue (with `--transport tcp`): persistent per (src, dst)
    /// pair, or one per record.
    #[arg(long, value_parser = super::keyword::<ns3::TcpConnections>(ns3::TcpConnections::NAMES), default_value_t = ns3::TcpConnections::Persistent)]
    pub tcp_connections: ns3::TcpConnections,
    /// SimAI GPU type field.
    #[arg(long, default_value = "A100")]
    pub gpu_type: String,
}

/// `ina3d ns3 run`.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// Directory written by `ina3d ns3 emit`.
    pub dir: PathBuf,
    /// Glue binary (built from ns3-glue/ when missing or older than its sources).
    #[arg(long)]
    pub glue: Option<PathBuf>,
}

/// `ina3d ns3 ingest`.
#[derive(clap::Args, Debug)]
pub struct IngestArgs {
    /// Files to read.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Output directory.
    #[arg(short, long)]
    pub out: PathBuf,
}

/// Run `ina3d ns3`.
pub fn run(c: Command) -> Result<()> {
    match c {
        Command::Emit(a) => {
            let input = pipeline::load_ns3_input(&a.trace)?;
            let mut warnings = Vec::new();
            let seed =
                pipeline::resolve_seed(a.seed, input.seed, "the glue's routes", &mut warnings);
            let routing = match (a.routing, input.routing) {
                (Some(g), Some(h)) if g != h => {
                    return Err(pipeline::PipelineError::RoutingMismatch {
                        given: g,
                        header: h,
                        trace: a.trace.clone(),
                    }
                    .into())
                }
                (g, h) => g.or(h).unwrap_or_default(),
            };
            let spec = pipeline::resolve_topology(
                a.topology.as_deref(),
                input.topology.as_deref(),
                &a.trace,
            )?;
            let (topo, topo_warnings) = Topology::from_spec_with_warnings(&spec)
                .with_context(|| format!("topology `{spec}`"))?;
            for w in &warnings {
                eprintln!("warning: {w}");
            }
            for w in &topo_warnings {
                eprintln!("warning: {w}");
            }
            let mut ina = input.ina_on(&topo)?;
            if let Some(v) = a.slots {
                ina.slots = v;
            }
            if let Some(v) = a.payload {
                ina.payload = Bytes(v);
            }
            if let Some(v) = a.window {
                ina.window = v;
            }
            if let Some(v) = a.policy {
                ina.policy = Some(v);
            }
            let opts = EmitOptions {
                flavor: a.flavor,
                seed,
                routing,
                start: a.starts.map(StartSource::Replay).unwrap_or_default(),
                gpu_type: a.gpu_type,
                tcp: a.tcp_connections,
                transport: a.transport,
            };
            let name = a.trace.display().to_string();
            let r = pipeline::emit_ns3(&input.records, &ina, &topo, &opts, &a.out, &name)?;
            if let Some(b) = &input.bench {
                pipeline::emit_bench_header(&a.out, b)?;
            }
            eprintln!("{}", pipeline::emit_report(&r, &a.out, seed));
            Ok(())
        }
        Command::Run(a) => {
            let bin = match a.glue {
                Some(b) => b,
                None => {
                    eprintln!(
                        "building ns3-glue if needed → {}",
                        ns3::run::glue_binary().display()
                    );
                    pipeline::glue()?
                }
            };
            let bar = pipeline::ns3_bar();
            let r = pipeline::run_ns3(&bin, &a.dir, |done, total| {
                bar.set_length(total);
                bar.set_position(done);
            });
            bar.finish_and_clear();
            eprintln!("{}", pipeline::ns3_report(&r?, &a.dir));
            if let Some(rows) = pipeline::ns3_bench(&a.dir)? {
                print!("{}", ina3d::fct::bench::bench_table(&rows));
            }
            Ok(())
        }
        Command::Ingest(a) => {
            let done = ns3::ingest::ingest(&a.files, &a.out)?;
            for d in done {
                for w in &d.warnings {
                    eprintln!("warning: {w}");
                }
                eprintln!(
                    "{} ({}) → {}: {} rows",
                    d.input.display(),
                    d.kind.as_str(),
                    d.output.display(),
                    d.rows
                );
            }
            Ok(())
        }
    }
}
