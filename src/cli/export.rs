//! `ina3d export aicb`.

use anyhow::{bail, Context, Result};
use ina3d::megatron::config::TrainingConfig;
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
    /// A training config as JSON (`ina3d parse --json` output) or TOML.
    pub input: PathBuf,
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
            let text = std::fs::read_to_string(&a.input).with_context(|| format!("reading {}", a.input.display()))?;
            let cfg: TrainingConfig = match a.input.extension().and_then(|e| e.to_str()) {
                Some("json") => serde_json::from_str(&text).with_context(|| format!("{}: not a training config", a.input.display()))?,
                Some("toml") => toml::from_str(&text).with_context(|| format!("{}: not a training config", a.input.display()))?,
                _ => bail!("{}: expected a .json or .toml training config (Megatron logs: run `ina3d parse --json` first)", a.input.display()),
            };
            let w = workload_text(&cfg, &GpuModel { peak_flops: a.peak_tflops * 1e12, mfu: a.mfu })?;
            ina3d::ns3::write_atomic(&a.out, w.as_bytes())?;
            eprintln!("wrote {} ({} layer lines)", a.out.display(), w.lines().count() - 2);
            Ok(())
        }
    }
}
