//! `ina3d compare`: join a replay directory and an ns-3 directory of the same trace on
//! `flow_id` and write the FCT-error and iteration tables (see `ina3d::report`).

use std::path::PathBuf;

/// Arguments of `ina3d compare`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Replayer output directory (`fct.csv`, `summary.csv`), e.g. from `ina3d replay -o`.
    #[arg(long, value_name = "DIR")]
    pub replay: PathBuf,
    /// ns-3 output directory of the same trace (`fct.csv`, `summary.csv`), e.g. from
    /// `ina3d ns3 run`.
    #[arg(long, value_name = "DIR")]
    pub ns3: PathBuf,
    /// Where to write `fct_error.csv`, `iteration.csv`, `flows.csv` and (when both
    /// directories have one) `switches.csv`: INA slot peak and slot-time per switch on
    /// both back-ends with their differences.
    #[arg(short, long, value_name = "DIR")]
    pub output: PathBuf,
    /// Accept summaries naming different trace paths (e.g. the ns-3 run read a copy);
    /// record counts and every flow's id, endpoints, size, mode and class must still agree.
    #[arg(long)]
    pub ignore_trace_name: bool,
}

/// Run `ina3d compare`.
#[cfg(feature = "tables")]
pub fn run(a: Args) -> anyhow::Result<()> {
    use anyhow::Context;
    use ina3d::report;
    let opts = report::CompareOptions {
        ignore_trace_name: a.ignore_trace_name,
    };
    let c = report::compare_with(&a.replay, &a.ns3, &opts)
        .with_context(|| format!("comparing {} with {}", a.replay.display(), a.ns3.display()))?;
    let written = c.write(&a.output)?;
    print!("{}", c.summary_text()?);
    for p in written {
        eprintln!("wrote {}", p.display());
    }
    Ok(())
}

/// Run `ina3d compare` (this build has no tables).
#[cfg(not(feature = "tables"))]
pub fn run(_a: Args) -> anyhow::Result<()> {
    anyhow::bail!(
        "`ina3d compare` needs the `tables` feature (polars); rebuild with default features"
    )
}
