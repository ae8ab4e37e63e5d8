//! `ina3d inspect` (under construction).

/// Arguments of `ina3d inspect`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Run `ina3d inspect`.
pub fn run(_a: Args) -> anyhow::Result<()> {
    anyhow::bail!("`ina3d inspect` is not implemented yet")
}
