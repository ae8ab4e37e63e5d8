//! `ina3d export aicb`.

use anyhow::{Context, Result};
use ina3d::megatron::{self, TrainingConfig};
use ina3d::ns3::aicb::{workload_text, GpuModel};
use std::path::PathBuf;

/// Subcommands of `ina3d export`.
#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// The AICB/SimAI workload text (HYBRID_TRANSFORMER_FWD_IN_BCKWD) for a training config.
    Aicb(AicbArgs),
}

/// `ina3d export aicb`.
#[derive(clap::Args, Debug)]
pub struct AicbArgs {
    /// Megatron log, launch script, config file (TOML/JSON) or preset name (e.g. gpt3-13b).
    pub input: String,
    /// Output file.
    #[arg(short, long)]
    pub out: PathBuf,
    /// Peak dense bf16 TFLOP/s of the GPU.
    #[arg(long, default_value_t = 312.0)]
    pub peak_tflops: f64,
    /// Model FLOPs utilisation.
    #[arg(long, default_value_t = 0.45)]
    pub mfu: f64,
}

/// Run `ina3d export`.
pub fn run(c: Command) -> Result<()> {
    match c {
        Command::Aicb(a) => {
            let cfg: TrainingConfig = megatron::load_input(&a.input)
                .with_context(|| format!("reading the training config `{}`", a.input))?;
            let w = workload_text(
                &cfg,
                &GpuModel {
                    peak_flops: a.peak_tflops * 1e12,
                    mfu: a.mfu,
                },
            )?;
            ina3d::formats::write_atomic_bytes(&a.out, w.as_bytes())?;
            eprintln!(
                "wrote {} ({} layer lines)",
                a.out.display(),
                w.lines().count() - 2
            );
            Ok(())
        }
    }
}
