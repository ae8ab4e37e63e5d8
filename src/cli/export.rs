//! `ina3d export aicb`.

use super::job::ModelArgs;
use anyhow::{Context, Result};
use ina3d::formats::aicb;
use ina3d::ns3::aicb::from_workload;
use ina3d::pipeline::JobSpec;
use ina3d::schedule;
use std::path::PathBuf;

/// Subcommands of `ina3d export`.
#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// The AICB/SimAI workload (HYBRID_TRANSFORMER_FWD_IN_BCKWD) of a job, from the same
    /// workload model the trace is built from; takes the same model flags as `ina3d trace`.
    Aicb(Box<AicbArgs>),
}

/// `ina3d export aicb`.
#[derive(clap::Args, Debug)]
pub struct AicbArgs {
    /// Megatron log, launch script, config file (TOML/JSON) or preset name (e.g. gpt3-13b).
    pub input: String,
    /// The model and its compute, as for `ina3d trace`.
    #[command(flatten)]
    pub model: ModelArgs,
    /// Output file.
    #[arg(short, long)]
    pub out: PathBuf,
}

/// Run `ina3d export`.
pub fn run(c: Command) -> Result<()> {
    match c {
        Command::Aicb(a) => {
            let mut spec = JobSpec {
                input: a.input.clone(),
                ..JobSpec::default()
            };
            a.model.apply(&mut spec)?;
            let cfg = spec.config()?;
            for w in &cfg.warnings {
                eprintln!("warning: {w}");
            }
            let opts = spec.trace_options()?;
            let wl = schedule::build(&cfg, &opts.schedule).context("building the workload")?;
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
