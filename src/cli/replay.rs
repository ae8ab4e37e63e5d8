//! `ina3d replay` (under construction).

/// Arguments of `ina3d replay`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Run `ina3d replay`.
pub fn run(_a: Args) -> anyhow::Result<()> {
    anyhow::bail!("`ina3d replay` is not implemented yet")
}
