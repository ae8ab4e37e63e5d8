//! `ina3d parse` (under construction).

/// Arguments of `ina3d parse`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Run `ina3d parse`.
pub fn run(_a: Args) -> anyhow::Result<()> {
    anyhow::bail!("`ina3d parse` is not implemented yet")
}
