//! `ina3d replay <trace> --topology <SPEC|FILE> -o DIR [--seed N]`.

use anyhow::{bail, Context};
use ina3d::replay::{self, ReplayOptions};
use ina3d::topology::{Routing, Topology};
use std::io::IsTerminal;
use std::path::PathBuf;

/// Arguments of `ina3d replay`.
#[derive(clap::Args, Debug)]
#[command(after_long_help = ina3d::topology::Topology::SPEC_HELP)]
pub struct Args {
    /// Trace file (`.csv` or `.csv.gz`) written by `ina3d trace`.
    pub trace: PathBuf,
    /// Topology: a builder spec (`fat-tree:k=8`) or an HPCC `topology.txt`. Defaults to
    /// the topology named in the trace header; an error when both are given and differ.
    #[arg(long)]
    pub topology: Option<String>,
    /// Output directory (fct.csv, fct.txt, summary.csv, links.csv, switches.csv).
    #[arg(short, long)]
    pub out: PathBuf,
    /// ECMP seed. Defaults to the trace header's seed (the routes the trace was built on).
    #[arg(long)]
    pub seed: Option<u64>,
}

/// Run `ina3d replay`.
pub fn run(a: Args) -> anyhow::Result<()> {
    let trace = ina3d::trace::read(&a.trace)
        .with_context(|| format!("reading trace {}", a.trace.display()))?;
    let header_topo = trace
        .header
        .get("topology")
        .map(str::trim)
        .filter(|s| !s.is_empty());
    let spec = match (a.topology.as_deref().map(str::trim), header_topo) {
        (Some(cli), Some(h)) if cli != h => bail!(
            "--topology `{cli}` disagrees with the topology `{h}` the trace {} was generated for",
            a.trace.display()
        ),
        (Some(cli), _) => cli.to_string(),
        (None, Some(h)) => h.to_string(),
        (None, None) => bail!(
            "the trace {} names no topology: give --topology",
            a.trace.display()
        ),
    };
    let header_seed = match trace.header.get("seed") {
        Some(s) => Some(
            s.trim()
                .parse::<u64>()
                .with_context(|| format!("{}: header seed `{s}`", a.trace.display()))?,
        ),
        None => None,
    };
    if let (Some(cli), Some(h)) = (a.seed, header_seed) {
        if cli != h {
            eprintln!("warning: --seed {cli} differs from the trace's seed {h}: routes will differ from the generator's");
        }
    }
    let seed = a.seed.or(header_seed).unwrap_or(0);
    let topo = Topology::from_spec(&spec).with_context(|| format!("topology `{spec}`"))?;
    let routing = Routing::new(&topo, seed).with_context(|| format!("routing on `{spec}`"))?;
    let mut opts = ReplayOptions::from_header(&trace.header)
        .with_context(|| format!("{}", a.trace.display()))?;
    opts.progress = std::io::stderr().is_terminal();
    opts.trace_name = a.trace.display().to_string();
    let r = replay::simulate(&trace.records, &topo, &routing, &opts)
        .with_context(|| format!("replaying {}", a.trace.display()))?;
    replay::write_outputs(&a.out, &r)?;
    let s = &r.summary;
    println!(
        "{} records: iteration {:.3} ms, compute {:.3} ms, exposed tp {:.3} pp {:.3} dp {:.3} emb {:.3} ms, bubble {:.3} ms, INA slot peak {}, {} fallbacks; wall {:.2} s -> {}",
        s.records,
        s.iteration_time_ns as f64 / 1e6,
        s.compute_ns as f64 / 1e6,
        s.exposed_tp_ns as f64 / 1e6,
        s.exposed_pp_ns as f64 / 1e6,
        s.exposed_dp_ns as f64 / 1e6,
        s.exposed_emb_ns as f64 / 1e6,
        s.bubble_ns as f64 / 1e6,
        s.ina_slot_peak,
        r.ina_fallbacks,
        s.wall_time_ns as f64 / 1e9,
        a.out.display()
    );
    if let Some(p) = trace
        .header
        .get("plan_predicted_iteration_ns")
        .and_then(|v| v.trim().parse::<f64>().ok())
    {
        let t = s.iteration_time_ns as f64;
        println!(
            "plan ({}) predicted {:.3} ms: prediction error {:+.2} % against this replay",
            trace.header.get("plan_solver").unwrap_or("?"),
            p / 1e6,
            100.0 * (p - t) / t.max(1.0)
        );
    }
    Ok(())
}
