//! `ina3d compare` (under construction).

/// Arguments of `ina3d compare`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Run `ina3d compare`.
pub fn run(_a: Args) -> anyhow::Result<()> {
    anyhow::bail!("`ina3d compare` is not implemented yet")
}
