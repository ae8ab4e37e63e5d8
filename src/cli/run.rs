//! `ina3d run` (under construction).

/// Arguments of `ina3d run`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Run `ina3d run`.
pub fn run(_a: Args) -> anyhow::Result<()> {
    anyhow::bail!("`ina3d run` is not implemented yet")
}
