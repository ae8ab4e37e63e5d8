//! `ina3d replay <trace> --topology <SPEC|FILE> -o DIR [--seed N]`, or
//! `ina3d replay --from <INPUT> --topology <SPEC|FILE> -o DIR [job flags]` to replay a job
//! straight from the generator without writing its trace.

use super::job::JobArgs;
use anyhow::{bail, Context};
use ina3d::ns3::Transport;
use ina3d::pipeline::{replay_file, replay_job_timeline, replay_report, FileOptions};
use ina3d::progress::spinner;
use ina3d::replay::timeline::{RankSelection, TimelineOptions, DEFAULT_LINKS, DEFAULT_MAX_EVENTS};
use ina3d::replay::{PerRecord, RateModel};
use ina3d::trace::{parse_classes, InaMode};
use std::io::IsTerminal;
use std::path::PathBuf;

/// How the replayer rates shared links, as `replay` and `plan` take it.
#[derive(clap::Args, Debug)]
pub struct RateArgs {
    /// How transfers sharing links are rated: dcqcn (max-min fair rates capped by each
    /// queue pair's DCQCN rate, with fluid switch queues and ECN marking where ports are
    /// congested: what the RoCE glue and SimAI run) or ideal (max-min fair rates reached
    /// at once, what TCP approaches). Default: the model of `--transport`. See
    /// docs/model.md#dcqcn-rate-model and docs/validation.md's trust table for how far each is
    /// from ns-3. Cost: dcqcn follows every CNP and rate change where ports mark, tens of
    /// millions on large jobs (17× the ideal model's CPU on the 1,024-GPU GPT-3 job,
    /// 2.4–3.2× at 32,768 GPUs: docs/benchmarks.md's scale table); for a quick answer at that
    /// scale, ideal.
    #[arg(long, value_parser = super::keyword::<RateModel>(RateModel::NAMES))]
    pub rate_model: Option<RateModel>,
    /// The fabric's transport, which chooses the rate model unless `--rate-model` is
    /// given: roce (RoCE with DCQCN, as the ns-3 glue runs by default: dcqcn) or tcp
    /// (ideal).
    #[arg(long, value_parser = super::keyword::<Transport>(Transport::NAMES), default_value = "roce")]
    pub transport: Transport,
}

impl RateArgs {
    /// The model given, else the transport's ([`RateModel::chosen`]).
    pub fn model(&self) -> RateModel {
        RateModel::chosen(self.rate_model, self.transport)
    }
}

/// Arguments of `ina3d replay`.
#[derive(clap::Args, Debug)]
#[command(after_long_help = ina3d::topology::Topology::SPEC_HELP)]
pub struct Args {
    /// Trace file (`.csv` or `.csv.gz`) written by `ina3d trace`.
    #[arg(required_unless_present = "from", conflicts_with = "from")]
    pub trace: Option<PathBuf>,
    /// Instead of a trace file: the job (Megatron log, launch script, config file or
    /// preset name, as `ina3d trace` takes it), generated in memory and replayed without
    /// writing a trace — the job flags below (`--tp`, `--ina`, …) apply to it, and
    /// `--topology` is required.
    #[arg(long, value_name = "INPUT")]
    pub from: Option<String>,
    /// Topology: a builder spec (`fat-tree:k=8`) or an HPCC `topology.txt`. Defaults to
    /// the topology named in the trace header; an error when both are given and differ.
    #[arg(long)]
    pub topology: Option<String>,
    /// Output directory (fct.csv, fct.txt, summary.csv, links.csv, switches.csv).
    #[arg(short, long)]
    pub out: PathBuf,
    /// ECMP seed. Defaults to the trace header's seed (the routes the trace was built on);
    /// with `--from`, the seed the job is generated and routed with (default 0).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Do not write the per-record files, fct.csv and fct.txt (≈ 135 B per record: 4.6
    /// GB for the 34 M records of a 32,768-GPU ring job with two NCCL channels, 9 GB at
    /// 65,536 GPUs); summary.csv, links.csv and switches.csv are written as always, and
    /// an fct.csv or fct.txt left in the directory by an earlier replay is removed.
    #[arg(long)]
    pub no_fct: bool,
    /// The rate model (`--rate-model`, `--transport`).
    #[command(flatten)]
    pub rate: RateArgs,
    /// Also write the replay as a timeline to FILE (Chrome trace-event JSON): open it in
    /// ui.perfetto.dev or chrome://tracing, beside an Nsight Systems profile of the real
    /// run. One process per pipeline stage, per rank a compute and comm threads (each
    /// micro-batch's compute, every collective with its steps, pipeline sends), and a
    /// `network` process with counters for INA slots in use per switch and the
    /// utilisation of the busiest links. By default only representative ranks have tracks
    /// (`--timeline-ranks`). See docs/timeline.md.
    #[arg(long, value_name = "FILE")]
    pub timeline: Option<PathBuf>,
    /// With --timeline: the ranks with tracks. `representative` (every stage of the first
    /// pipeline, and the DP and CP groups of rank 0, 16 of each evenly spread when larger:
    /// a few dozen ranks even at tens of thousands of GPUs), `all`, or a list of ranks and ranges (`0,8,16-23`).
    #[arg(long, value_name = "RANKS", default_value = "representative", requires = "timeline", value_parser = RankSelection::from_str_arg)]
    pub timeline_ranks: RankSelection,
    /// With --timeline: the most spans and counter samples the file holds (≈ 150 B
    /// each). A selection with more records is refused before the replay; past the cap
    /// once the replay has run, the timeline stops at the time that keeps it under, with a
    /// warning saying from when.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_EVENTS, requires = "timeline")]
    pub timeline_max_events: usize,
    /// With --timeline: how many of the busiest link directions get a utilisation track.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_LINKS, requires = "timeline")]
    pub timeline_links: usize,
    /// With `--from`: in-network aggregation (off, switchml, hierarchical, atp, rina).
    #[arg(long, value_parser = super::keyword::<InaMode>(InaMode::NAMES), default_value = "off")]
    pub ina: InaMode,
    /// With `--from`: traffic classes allowed to aggregate, in priority order.
    #[arg(long, default_value = "tp,dp,emb")]
    pub ina_classes: String,
    /// With `--from`: the job's options (as `ina3d trace` takes them).
    #[command(flatten)]
    pub job: JobArgs,
}

/// The spec the job flags give when none is set (input, topology, INA mode, classes and
/// seed neutral): a trace-file replay refuses any other.
fn untouched_job_spec() -> ina3d::pipeline::JobSpec {
    ina3d::pipeline::JobSpec {
        input: String::new(),
        topology: String::new(),
        ina: ina3d::trace::InaConfig {
            mode: InaMode::Off,
            classes: Vec::new(),
            ..Default::default()
        },
        seed: 0,
        ..Default::default()
    }
}

/// Run `ina3d replay`.
pub fn run(a: Args) -> anyhow::Result<()> {
    let progress = std::io::stderr().is_terminal();
    let model = a.rate.model();
    let timeline = a.timeline.as_ref().map(|_| TimelineOptions {
        ranks: a.timeline_ranks.clone(),
        max_events: a.timeline_max_events,
        links: a.timeline_links,
    });
    let result = match (&a.trace, &a.from) {
        (Some(trace), None) => {
            let mut flags = a.job.spec("", "", InaMode::Off, Vec::new(), 0)?;
            flags.routing = Default::default(); // --routing is checked against the header
            if flags != untouched_job_spec()
                || a.ina != InaMode::Off
                || a.ina_classes != "tp,dp,emb"
            {
                bail!("job flags (--tp, --ina, --collective, --ina-slots, …) apply to `--from INPUT` only; a trace file carries its own");
            }
            let opts = FileOptions {
                topology: a.topology.as_deref(),
                seed: a.seed,
                routing: a.job.routing,
                progress,
                model,
                timeline: timeline.as_ref(),
            };
            let r = replay_file(trace, &opts)?;
            for w in &r.warnings {
                eprintln!("warning: {w}");
            }
            let plan = r.plan_report();
            (r.result, plan, r.bench, r.timeline)
        }
        (None, Some(input)) => {
            let Some(topology) = a.topology.as_deref() else {
                bail!("--from {input} needs --topology");
            };
            if a.ina == InaMode::Planned {
                bail!("--ina planned lowers a plan: use `ina3d trace --plan` and replay its file");
            }
            let classes = parse_classes(&a.ina_classes)
                .map_err(anyhow::Error::msg)
                .context("--ina-classes")?;
            let spec = a
                .job
                .spec(input, topology, a.ina, classes, a.seed.unwrap_or(0))?;
            let bar = progress.then(|| spinner("generating the trace"));
            let (job, result, t) = replay_job_timeline(
                &spec,
                progress,
                model,
                &mut |n| {
                    if let Some(b) = &bar {
                        b.set_message(format!("generating the trace: {n} records"));
                        b.tick();
                    }
                },
                timeline.as_ref(),
            )?;
            for w in &job.warnings {
                eprintln!("warning: {w}");
            }
            (result, None, None, t)
        }
        _ => bail!("give a trace file or `--from INPUT`, not both"),
    };
    let (result, plan, bench, made) = result;
    let (files, per_record) = if a.no_fct {
        ("summary.csv, links.csv, switches.csv", PerRecord::Skip)
    } else {
        (
            "fct.csv, fct.txt, links.csv, switches.csv",
            PerRecord::Write,
        )
    };
    let bar = progress.then(|| spinner(&format!("writing {files}")));
    ina3d::replay::write_outputs_with(&a.out, &result, per_record)?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    println!("{}", replay_report(&result, &a.out));
    if let Some((spec, records)) = &bench {
        let rows = ina3d::pipeline::write_bench(&a.out, spec, records, &result.rows())?;
        print!("{}", ina3d::fct::bench::bench_table(&rows));
    }
    if let Some(line) = plan {
        println!("{line}");
    }
    if let (Some(path), Some(t)) = (&a.timeline, made) {
        write_timeline(path, &t)?;
    }
    Ok(())
}

/// Write a replay's timeline to `path`, warning of what its cap dropped, and say so.
pub fn write_timeline(
    path: &std::path::Path,
    t: &ina3d::replay::timeline::Timeline,
) -> anyhow::Result<()> {
    if let Some(note) = &t.note {
        eprintln!("warning: {note}");
    }
    t.write(path)?;
    println!(
        "timeline: {} spans on {} ranks, {} events -> {}",
        t.spans(),
        t.ranks,
        t.events.len(),
        path.display()
    );
    Ok(())
}
