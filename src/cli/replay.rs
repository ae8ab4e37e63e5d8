//! `ina3d replay <trace> --topology <SPEC|FILE> -o DIR [--seed N]`.

use ina3d::pipeline::{replay_file, replay_report};
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
    let r = replay_file(
        &a.trace,
        a.topology.as_deref(),
        a.seed,
        std::io::stderr().is_terminal(),
    )?;
    for w in &r.warnings {
        eprintln!("warning: {w}");
    }
    ina3d::replay::write_outputs(&a.out, &r.result)?;
    println!("{}", replay_report(&r.result, &a.out));
    if let Some(line) = r.plan_report() {
        println!("{line}");
    }
    Ok(())
}
