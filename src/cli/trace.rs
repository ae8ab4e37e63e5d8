//! `ina3d trace` (under construction).

/// Arguments of `ina3d trace`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Run `ina3d trace`.
pub fn run(_a: Args) -> anyhow::Result<()> {
    anyhow::bail!("`ina3d trace` is not implemented yet")
}
