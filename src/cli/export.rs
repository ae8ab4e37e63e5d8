//! `ina3d export` (under construction).

/// Subcommands of `ina3d export`.
#[derive(clap::Subcommand, Debug)]
pub enum Command {}

/// Run `ina3d export`.
pub fn run(c: Command) -> anyhow::Result<()> {
    match c {}
}
