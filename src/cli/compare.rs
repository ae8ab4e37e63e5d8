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
    /// Where to write `fct_error.csv`, `iteration.csv`, `flows.csv`, `links.csv` and
    /// `switches.csv` (INA slot peak and slot-time per switch on both back-ends).
    #[arg(short, long, value_name = "DIR")]
    pub output: PathBuf,
    /// Accept summaries naming different trace paths (e.g. the ns-3 run read a copy);
    /// record counts and every flow's id, endpoints, size, mode and class must still agree.
    #[arg(long)]
    pub ignore_trace_name: bool,
    /// Relative difference of a channel's bytes the link check allows (0 = byte-exact).
    /// Default: exact, or 0.01 when the ns-3 run's net records carried TCP headers (54 B
    /// per packet where the replayer counts 48). The check compares every channel's wire
    /// bytes of trace data in both directories' `links.csv`; any channel beyond the
    /// tolerance makes `compare` fail (exit 2) after writing its tables.
    #[arg(long, value_name = "FRACTION")]
    pub link_tolerance: Option<f64>,
}

/// Run `ina3d compare`.
#[cfg(feature = "tables")]
pub fn run(a: Args) -> anyhow::Result<()> {
    use anyhow::Context;
    use ina3d::report;
    if let Some(t) = a.link_tolerance {
        if !(0.0..=1.0).contains(&t) {
            anyhow::bail!("--link-tolerance {t}: expected a fraction between 0 and 1");
        }
    }
    let opts = report::CompareOptions {
        ignore_trace_name: a.ignore_trace_name,
        link_tolerance: a.link_tolerance,
    };
    let c = report::compare_with(&a.replay, &a.ns3, &opts)
        .with_context(|| format!("comparing {} with {}", a.replay.display(), a.ns3.display()))?;
    let written = c.write(&a.output)?;
    print!("{}", c.summary_text()?);
    for p in written {
        eprintln!("wrote {}", p.display());
    }
    if let report::links::LinkOutcome::Checked(l) = &c.links {
        let n = l.differing().len();
        if n > 0 {
            anyhow::bail!(
                "link check failed: {n} channel(s) carried different bytes on ns-3 than in the replay (see {})",
                a.output.join("links.csv").display()
            );
        }
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
