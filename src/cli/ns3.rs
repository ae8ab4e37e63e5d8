//! `ina3d ns3 emit|run|ingest`.

use anyhow::{bail, Context, Result};
use ina3d::ns3::{
    self, emit::read_trace_txt, EmitOptions, Flavor, InaPolicy, InaSwitchModel, StartSource,
};
use ina3d::topology::Topology;
use ina3d::trace::FlowRecord;
use ina3d::units::Bytes;
use std::path::{Path, PathBuf};

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
    /// The trace (`ina3d trace` output, CSV or .csv.gz; or a glue trace.txt to re-emit).
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
    #[arg(long, value_enum, default_value_t = Flavor::Hpcc)]
    pub flavor: Flavor,
    /// Take flow.txt start times from a replay's fct.csv instead of a contention-free schedule.
    #[arg(long)]
    pub starts: Option<PathBuf>,
    /// ECMP seed of the glue's routes. Defaults to the trace header's seed, the one
    /// `ina3d replay` uses, so both back-ends take the same paths.
    #[arg(long)]
    pub seed: Option<u64>,
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
    #[arg(long)]
    pub policy: Option<String>,
    /// How the glue carries net records: `roce` (RoCE-like queue pairs with DCQCN and
    /// ECN-marking switches, parameters from config.txt, as HPCC's and SimAI's ns-3) or
    /// `tcp` (TCP NewReno over deep drop-tail queues).
    #[arg(long, default_value_t = ns3::Transport::Roce)]
    pub transport: ns3::Transport,
    /// TCP connections of the glue (with `--transport tcp`): persistent per (src, dst)
    /// pair, or one per record.
    #[arg(long, value_enum, default_value_t = ns3::TcpConnections::Persistent)]
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

/// The records and the INA parameters of a trace file.
/// The records, INA parameters, topology spec and ECMP seed a trace names.
type Loaded = (Vec<FlowRecord>, InaSwitchModel, Option<String>, Option<u64>);

fn load_trace(p: &Path) -> Result<Loaded> {
    if p.extension().is_some_and(|e| e == "txt") {
        let text =
            std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
        if text.starts_with("# ina3d-ns3 trace") || text.trim_start().starts_with("RECORDS") {
            let params = p.with_file_name("params.txt");
            let mut ina = InaSwitchModel::default();
            let mut seed = None;
            if let Ok(t) = std::fs::read_to_string(&params) {
                for l in t.lines() {
                    let mut it = l.split_whitespace();
                    match (it.next(), it.next()) {
                        (Some("INA_SLOTS"), Some(v)) => {
                            ina.slots = v
                                .parse()
                                .with_context(|| format!("{}: INA_SLOTS", params.display()))?
                        }
                        (Some("INA_PAYLOAD"), Some(v)) => {
                            ina.payload =
                                Bytes(v.parse().with_context(|| {
                                    format!("{}: INA_PAYLOAD", params.display())
                                })?)
                        }
                        (Some("INA_WINDOW"), Some(v)) => {
                            ina.window = v
                                .parse()
                                .with_context(|| format!("{}: INA_WINDOW", params.display()))?
                        }
                        (Some("INA_POLICY"), Some(v)) => ina.policy = policy(v)?,
                        (Some("SEED"), Some(v)) => {
                            seed = Some(
                                v.parse()
                                    .with_context(|| format!("{}: SEED", params.display()))?,
                            )
                        }
                        (Some("INA_CLASSES"), Some(v)) => {
                            ina.classes = v
                                .split(',')
                                .map(|c| c.parse().map_err(anyhow::Error::msg))
                                .collect::<Result<_>>()?
                        }
                        _ => {}
                    }
                }
            }
            return Ok((read_trace_txt(p, &text)?.0, ina, None, seed));
        }
    }
    let t = ina3d::trace::read(p).with_context(|| format!("reading trace {}", p.display()))?;
    let ina = ns3::ina_model(&t.header).with_context(|| format!("trace {}", p.display()))?;
    let topo = t
        .header
        .get("topology")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from);
    let seed = match t.header.get("seed") {
        Some(s) => Some(
            s.trim()
                .parse::<u64>()
                .with_context(|| format!("{}: header seed `{s}`", p.display()))?,
        ),
        None => None,
    };
    Ok((t.records, ina, topo, seed))
}

/// The topology to emit for: `--topology` when given, else the one the trace names.
fn topology_spec(cli: Option<&str>, header: Option<&str>, trace: &Path) -> Result<String> {
    match (cli.map(str::trim), header) {
        (Some(c), Some(h)) if c != h => bail!(
            "--topology `{c}` disagrees with the topology `{h}` the trace {} was generated for",
            trace.display()
        ),
        (Some(c), _) => Ok(c.to_string()),
        (None, Some(h)) => Ok(h.to_string()),
        (None, None) => bail!(
            "the trace {} names no topology: give --topology",
            trace.display()
        ),
    }
}

fn load_topology(spec: &str) -> Result<Topology> {
    let (t, warnings) =
        Topology::from_spec_with_warnings(spec).with_context(|| format!("topology `{spec}`"))?;
    for w in warnings {
        eprintln!("warning: {w}");
    }
    Ok(t)
}

fn policy(s: &str) -> Result<InaPolicy> {
    s.parse()
        .map_err(|e: String| anyhow::anyhow!("--policy: {e}"))
}

/// Run `ina3d ns3`.
pub fn run(c: Command) -> Result<()> {
    match c {
        Command::Emit(a) => {
            let (records, mut ina, header_topo, header_seed) = load_trace(&a.trace)?;
            if let (Some(cli), Some(h)) = (a.seed, header_seed) {
                if cli != h {
                    eprintln!("warning: --seed {cli} differs from the trace's seed {h}: the glue's routes will differ from `ina3d replay`'s");
                }
            }
            let seed = a.seed.or(header_seed).unwrap_or(0);
            let spec = topology_spec(a.topology.as_deref(), header_topo.as_deref(), &a.trace)?;
            let topo = load_topology(&spec)?;
            if let Some(v) = a.slots {
                ina.slots = v;
            }
            if let Some(v) = a.payload {
                ina.payload = Bytes(v);
            }
            if let Some(v) = a.window {
                ina.window = v;
            }
            if let Some(v) = &a.policy {
                ina.policy = policy(v)?;
            }
            let opts = EmitOptions {
                flavor: a.flavor,
                seed,
                start: a.starts.map(StartSource::Replay).unwrap_or_default(),
                gpu_type: a.gpu_type,
                tcp: a.tcp_connections,
                transport: a.transport,
            };
            let r = ns3::emit(&records, &ina, &topo, &opts, &a.out)
                .with_context(|| format!("emitting into {}", a.out.display()))?;
            let src = a.out.join(ns3::run::SOURCE_TRACE_FILE);
            ina3d::fct::write_atomic(&src, |w| writeln!(w, "{}", a.trace.display()))
                .with_context(|| format!("writing {}", src.display()))?;
            eprintln!(
                "wrote {} files into {}: {} flows ({} records split), {} INA proxies, starts from {}, contention-free makespan {} ns",
                r.files.len(),
                a.out.display(),
                r.flows,
                r.split_records,
                r.proxies.len(),
                r.start_source,
                r.schedule_makespan.0
            );
            eprintln!(
                "glue routes are per (src, dst) connection, as the replayer's: all {} net/ina records checked on the replayer's path ({} pairs routed, seed {})",
                r.paths_checked, r.routes, seed
            );
            Ok(())
        }
        Command::Run(a) => {
            let bin = match a.glue {
                Some(b) => b,
                None => {
                    let out = ns3::run::glue_binary();
                    eprintln!("building ns3-glue if needed → {}", out.display());
                    ns3::run::build_glue(&ns3::run::glue_source_dir(), &out)?
                }
            };
            let bar = indicatif::ProgressBar::new(0);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "ns-3 {bar:40} {pos}/{len} records ({elapsed})",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            let r = ns3::run::run_glue(&bin, &a.dir, |done, total| {
                bar.set_length(total);
                bar.set_position(done);
            });
            bar.finish_and_clear();
            let r = r.with_context(|| format!("running ns-3 on {}", a.dir.display()))?;
            for w in &r.warnings {
                eprintln!("warning: {w}");
            }
            eprintln!(
                "ns-3: {} records, iteration {} ns, INA slot peak {}, wall {:.2} s; outputs in {}",
                r.summary.records,
                r.summary.iteration_time_ns,
                r.summary.ina_slot_peak,
                r.summary.wall_time_ns as f64 / 1e9,
                a.dir.display()
            );
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
