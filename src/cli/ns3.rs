//! `ina3d ns3` (under construction).

/// Subcommands of `ina3d ns3`.
#[derive(clap::Subcommand, Debug)]
pub enum Command {}

/// Run `ina3d ns3`.
pub fn run(c: Command) -> anyhow::Result<()> {
    match c {}
}
