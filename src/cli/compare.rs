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
    print_comparison(&c)?;
    for p in written {
        eprintln!("wrote {}", p.display());
    }
    Ok(())
}

/// Peak slots and slot-time per switch on both back-ends, or why there are none.
#[cfg(feature = "tables")]
fn print_slots(rows: Option<&[ina3d::report::slots::SlotComparison]>) {
    let Some(rows) = rows else {
        println!("INA slots: not compared (a directory has no switches.csv)");
        return;
    };
    if rows.is_empty() {
        return;
    }
    println!("INA slots per switch (peak replay/ns-3, slot-time replay/ns-3 in slot·ms):");
    for r in rows {
        println!(
            "  switch {}: peak {}/{}, slot-time {:.3}/{:.3}",
            r.switch,
            r.replay.peak,
            r.ns3.peak,
            r.replay.slot_time as f64 / 1e6,
            r.ns3.slot_time as f64 / 1e6
        );
    }
}

/// Prints the FCT-error table and the iteration/wall-time lines of a comparison.
#[cfg(feature = "tables")]
pub fn print_comparison(c: &ina3d::report::Comparison) -> anyhow::Result<()> {
    println!(
        "trace {} ({} records): replayer vs ns-3, relative FCT error (r-n)/n",
        c.trace, c.records
    );
    print!("{}", ina3d::report::format_table(&c.fct_error_table()?));
    println!(
        "iteration time: replay {} ns, ns-3 {} ns, error {:+.2} %",
        c.iteration.first().map_or(0, |m| m.replay),
        c.iteration.first().map_or(0, |m| m.ns3),
        100.0 * c.iteration_rel_error()
    );
    println!("wall time: ns-3 / replay = {:.1}x", c.wall_time_ratio());
    print_slots(c.slots.as_deref());
    Ok(())
}

/// Run `ina3d compare` (this build has no tables).
#[cfg(not(feature = "tables"))]
pub fn run(_a: Args) -> anyhow::Result<()> {
    anyhow::bail!(
        "`ina3d compare` needs the `tables` feature (polars); rebuild with default features"
    )
}
