//! `ina3d export aicb`.

use super::trace::{load_config, schedule_options, JobArgs};
use anyhow::{Context, Result};
use ina3d::formats::aicb;
use ina3d::ns3::aicb::from_workload;
use ina3d::schedule;
use std::path::PathBuf;

/// Subcommands of `ina3d export`.
#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// The AICB/SimAI workload (HYBRID_TRANSFORMER_FWD_IN_BCKWD) of a job, from the same
    /// workload model the trace is built from; takes the same job flags as `ina3d trace`.
    Aicb(Box<AicbArgs>),
}

/// `ina3d export aicb`.
#[derive(clap::Args, Debug)]
pub struct AicbArgs {
    /// The job (input, overrides, compute model), as for `ina3d trace`.
    #[command(flatten)]
    pub job: JobArgs,
    /// Output file.
    #[arg(short, long)]
    pub out: PathBuf,
}

/// Run `ina3d export`.
pub fn run(c: Command) -> Result<()> {
    match c {
        Command::Aicb(a) => {
            let cfg = load_config(&a.job)?;
            let wl = schedule::build(&cfg, &schedule_options(&a.job)?)
                .context("building the workload")?;
            let w = from_workload(&wl)?;
            aicb::write(&a.out, &w)?;
            eprintln!(
                "wrote {} ({} rows: {} micro-batches of one stage's layers, embedding and LM head)",
                a.out.display(),
                w.rows.len(),
                wl.microbatches
            );
            Ok(())
        }
    }
}
