//! `ina3d validate`: the validation suite, replayer against ns-3 on contended fabrics from
//! 8 to 128 GPUs (see `ina3d::pipeline::validate`).

use ina3d::ns3::Transport;
use ina3d::pipeline::validate::Ensemble;
use ina3d::replay::RateModel;
use ina3d::units::Nanos;
use std::path::PathBuf;

/// Arguments of `ina3d validate`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Where each case's trace, replay and ns-3 outputs go, and `validate.csv`.
    #[arg(short, long, default_value = "out/validate")]
    pub out: PathBuf,
    /// How the ns-3 glue carries host traffic: roce (RoCE-like queue pairs with DCQCN, the
    /// reference LLM clusters run) or tcp (NewReno with bounded windows).
    #[arg(long, value_parser = super::keyword::<Transport>(Transport::NAMES), default_value = "roce")]
    pub transport: Transport,
    /// The replayer's rate model (ideal: max-min fair rates; dcqcn: capped by each queue
    /// pair's DCQCN rate with fluid switch queues and ECN marking). Default: dcqcn against
    /// roce, ideal against tcp.
    #[arg(long, value_parser = super::keyword::<RateModel>(RateModel::NAMES))]
    pub rate_model: Option<RateModel>,
    /// Run only these cases (comma-separated names; `--list` shows them).
    #[arg(long, value_delimiter = ',')]
    pub cases: Vec<String>,
    /// Run the CI subset only.
    #[arg(long, conflicts_with = "cases")]
    pub ci: bool,
    /// Instead of the suite: validate this trace (`ina3d trace` output, `.csv` or
    /// `.csv.gz`; e.g. your own job on your own fabric) the same way, as one case named by
    /// the file's stem, into `OUT/<stem>/` and `OUT/validate.csv`.
    #[arg(long, value_name = "TRACE", conflicts_with_all = ["cases", "ci", "list"])]
    pub trace: Option<PathBuf>,
    /// With `--trace`: the topology (a builder spec or an HPCC `topology.txt`). Defaults
    /// to the one named in the trace header; an error when both are given and differ.
    #[arg(long, requires = "trace")]
    pub topology: Option<String>,
    /// Runs per case: run 0 on the trace as generated, the others on copies with every
    /// record's start moved by up to `--jitter` ns. One packet-level run of a contended
    /// fabric is one sample (sub-packet timing moves it by several %), so the table's
    /// `iteration_error_mean` compares the means and gives each back-end's spread
    /// (docs/model.md#validation-ensemble). 1: run 0 only.
    #[arg(long, default_value_t = Ensemble::default().runs, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub runs: u32,
    /// Largest start move of the jittered runs, ns (at most 1,000,000: the point is timing
    /// below a packet, not a different schedule). Default: one network packet's time on
    /// the case's fastest NIC (84 ns at 100 Gb/s).
    #[arg(long, value_name = "NS", value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub jitter: Option<u64>,
    /// List the cases and exit.
    #[arg(long)]
    pub list: bool,
    /// Instead of the ns-3 suite: predict the published real runs of `--suite`
    /// (iteration times of Megatron-LM and NeMo runs on A100, H100, H200 and B200
    /// clusters, each on its own fabric) with the compute model and the replayer, and
    /// print them beside the published figures, fit and held-out rows apart; writes
    /// `OUT/reality.csv`. No ns-3 is needed (`make reality`).
    #[arg(long, conflicts_with_all = ["cases", "ci", "trace"])]
    pub reality: bool,
    /// The published-run suite (TOML; docs/compute.md#the-published-run-suite).
    #[arg(long, default_value = ina3d::pipeline::reality::SUITE, requires = "reality")]
    pub suite: PathBuf,
    /// With `--reality`: refit these constants on their fit rows and print them (the
    /// constants in the code; docs/compute.md#fit): a GPU generation's efficiencies
    /// (ampere, hopper, blackwell: its rows that Megatron's own schedule runs) or the
    /// DeepSpeed pipeline engine's cost (deepspeed-pipeline: the rows that engine runs).
    #[arg(long, requires = "reality", value_parser = super::keyword::<ina3d::pipeline::reality::FitTarget>(ina3d::pipeline::reality::FitTarget::NAMES))]
    pub fit: Option<ina3d::pipeline::reality::FitTarget>,
    /// With `--reality`: route every row this way instead of as its fabric did (the
    /// row's `routing`), to see what the routing changes.
    #[arg(long, requires = "reality", value_parser = super::keyword::<ina3d::topology::RoutingMode>(ina3d::topology::RoutingMode::NAMES))]
    pub routing: Option<ina3d::topology::RoutingMode>,
    /// With `--reality`: only these runs (comma-separated ids).
    #[arg(long, value_delimiter = ',', requires = "reality")]
    pub runs_only: Vec<String>,
}

/// `ina3d validate --reality`.
fn reality(a: &Args) -> anyhow::Result<()> {
    use anyhow::Context;
    use ina3d::formats::reality_csv::{self, RealityRow};
    use ina3d::pipeline::reality as r;
    let mut runs = r::load_suite(&a.suite)?;
    if let Some(routing) = a.routing {
        for run in &mut runs {
            run.routing = routing;
        }
    }
    let base = a.suite.parent().unwrap_or(std::path::Path::new("."));
    if let Some(gen) = a.fit {
        let (fitted, preds) = r::fit(&runs, base, gen, &mut |s| eprintln!("{s}"))?;
        print!("{}", r::table(&preds));
        if let Some(e) = fitted.efficiency {
            println!("fitted {gen}: {e:?}");
        }
        if let Some(e) = fitted.engine {
            println!("fitted {gen}: {e:?}");
        }
        return Ok(());
    }
    if let Some(u) = a
        .runs_only
        .iter()
        .find(|w| !runs.iter().any(|x| &x.id == *w))
    {
        anyhow::bail!("--runs-only: no run `{u}` in {}", a.suite.display());
    }
    let chosen: Vec<_> = runs
        .iter()
        .filter(|x| a.runs_only.is_empty() || a.runs_only.contains(&x.id))
        .collect();
    let bar = ina3d::progress::bar(
        chosen.len() as u64,
        "published runs {bar:30} {pos}/{len} {msg} [{elapsed}]",
    );
    let mut preds = Vec::with_capacity(chosen.len());
    let mut failed = Vec::new();
    for run in chosen {
        bar.set_message(run.id.clone());
        match r::predict(run, base, r::Constants::default()) {
            Ok(p) => preds.push(p),
            Err(e) => {
                bar.suspend(|| eprintln!("{}", ina3d::pipeline::error_chain(&e)));
                failed.push(run.id.clone());
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    print!("{}", r::table(&preds));
    let rows: Vec<RealityRow> = preds
        .iter()
        .map(|p| RealityRow {
            run: p.id.clone(),
            group: p.group.as_str().into(),
            gpu: p.gpu.clone(),
            gpus: p.gpus,
            published_ms: p.published_ms,
            predicted_ms: p.predicted_ms,
            compute_ms: p.compute_ms,
            error: p.error(),
        })
        .collect();
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let path = a.out.join("reality.csv");
    reality_csv::write(&path, &rows)?;
    println!("wrote {}", path.display());
    if !failed.is_empty() {
        anyhow::bail!(
            "{} run(s) could not be predicted: {}",
            failed.len(),
            failed.join(", ")
        );
    }
    Ok(())
}

/// Run `ina3d validate`: the output directory is marked incomplete until every case (or
/// published run) has been written, then complete (`ina3d::formats::atomic`); `--list`
/// writes nothing.
pub fn run(a: Args) -> anyhow::Result<()> {
    if a.list {
        return run_unmarked(a);
    }
    let set = ina3d::formats::atomic::OutputSet::begin(&a.out, "ina3d validate")?;
    run_unmarked(a)?;
    set.finish()?;
    Ok(())
}

fn run_unmarked(a: Args) -> anyhow::Result<()> {
    use anyhow::bail;
    use ina3d::pipeline::validate::{self, CI_CASES};
    if a.reality {
        return reality(&a);
    }
    let all = validate::cases();
    if a.list {
        for c in &all {
            println!("{:<20} {}", c.name, c.about);
        }
        return Ok(());
    }
    let transport = a.transport;
    let model = ina3d::replay::RateModel::chosen(a.rate_model, transport);
    let ensemble = Ensemble {
        runs: a.runs,
        jitter: a.jitter.map(Nanos),
    };
    if let Some(trace) = &a.trace {
        let t0 = std::time::Instant::now();
        let row = validate::run_trace_file(
            trace,
            a.topology.as_deref(),
            transport,
            model,
            ensemble,
            &a.out,
        )?;
        print_row(&row, t0.elapsed().as_secs_f64());
        println!("wrote {}", a.out.join("validate.csv").display());
        return Ok(());
    }
    let wanted: Vec<String> = if a.ci {
        CI_CASES.iter().map(|s| s.to_string()).collect()
    } else {
        a.cases.clone()
    };
    if let Some(u) = wanted
        .iter()
        .find(|w| !all.iter().any(|c| c.name == w.as_str()))
    {
        bail!("--cases: unknown case `{u}` (ina3d validate --list shows them)");
    }
    let cases: Vec<_> = all
        .into_iter()
        .filter(|c| wanted.is_empty() || wanted.iter().any(|w| w == c.name))
        .collect();
    let ina3d::pipeline::validate::SuiteOutcome { rows, failed } = validate::run_suite(
        &cases,
        transport,
        model,
        ensemble,
        &a.out,
        &mut |c, r, secs| match r {
            Ok(row) => print_row(row, secs),
            Err(e) => eprintln!("{:<20} FAILED: {}", c.name, ina3d::pipeline::error_chain(e)),
        },
    )?;
    println!(
        "wrote {} ({} cases)",
        a.out.join("validate.csv").display(),
        rows.len()
    );
    if !failed.is_empty() {
        bail!(
            "{} case(s) failed: {}",
            failed.len(),
            failed
                .iter()
                .map(|f| f.0.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(())
}

/// One case's line on stderr: run 0's error, the ensemble's, and the walls.
fn print_row(row: &ina3d::formats::validate_csv::ValidateRow, secs: f64) {
    eprintln!(
        "{:<20} {:>4} GPUs  iteration error {:+6.2} %, mean of {} runs {:+6.2} % (spread ns-3 {:.2} %, replay {:.2} %)  run 0: replay {:.1} ms, ns-3 {:.2} s ({secs:.1} s for all runs)",
        row.case,
        row.gpus,
        100.0 * row.iteration_error,
        row.runs,
        100.0 * row.iteration_error_mean,
        100.0 * row.ns3_spread,
        100.0 * row.replay_spread,
        1e3 * row.replay_wall_s,
        row.ns3_wall_s
    );
}
