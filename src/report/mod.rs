//! Stage 5: tables — replayer vs ns-3, policy vs policy.
//!
//! Entries:
//!
//! - `compare` (feature `tables`, polars): joins a replay output directory and an ns-3
//!   output directory of the **same** trace on `flow_id` and measures how far the
//!   replayer's flow completion times (FCT) and iteration summary are from ns-3's.
//!   Written as `fct_error.csv` ([`fct_error`]),
//!   `iteration.csv` and `flows.csv` by `Comparison::write`, and `switches.csv` (per
//!   switch: INA slot peak and slot-time as each back-end observed them, [`slots`]) when
//!   both directories have a `switches.csv`.
//! - [`results_table`] (no polars: the main job builds without it): one row per INA policy
//!   from the back-ends' [`crate::fct::Summary`] rows, with `speedup_vs_ring` on each
//!   back-end; written as `results.csv` by [`ResultsTable::write_csv`], over several seeds
//!   folded by [`seeds_table`]; [`text`] prints it for a person, [`plot`] draws it.
//!
//! Both inputs follow the results contract of [`crate::fct`]: `fct.csv` (one
//! [`crate::fct::FctRow`] per trace record) and `summary.csv` (one summary row).
//!
//! # Error statistics: definitions
//!
//! For a flow with replayer FCT `r` and ns-3 FCT `n` (both `fct_ns`), the relative error is
//! `(r − n) / n` (positive: the replayer is slower than ns-3). When `n = 0` the error is
//! `0` if `r = 0` too, otherwise undefined (`NaN` in `flows.csv`, counted in the
//! `undefined` column and left out of the statistics). Statistics are over `|error|`:
//!
//! - mean: arithmetic mean;
//! - median: the middle value of the sorted values, the mean of the two middle values when
//!   their number is even;
//! - pN (p95, p99): **nearest rank** — the value at 1-based rank `⌈N/100 · k⌉` of the `k`
//!   sorted values (so it is always one of the observed errors, never interpolated);
//! - max, and the mean of the *signed* error (bias).
//!
//! Only network records (`mode` `net` and `ina`) enter the FCT statistics. `compute` and
//! `nvlink` records are timers whose duration is fixed in the trace, so both back-ends give
//! them the same FCT by construction; they are reported on a separate `timers` row, which
//! is a consistency check (it must show zero error) rather than a measurement.

#[cfg(feature = "tables")]
mod compare;
pub mod fct_error;
pub mod links;
pub mod plot;
mod results;
mod seeds;
pub mod slots;
pub mod text;

pub use crate::fct::stats::{median, percentile_nearest_rank, rel_error, ErrorStats};
#[cfg(feature = "tables")]
pub use compare::{
    compare, compare_with, format_table, read_fct, read_summary, write_csv, CompareOptions,
    Comparison, MetricComparison,
};
pub use results::{
    ns3_speedups_vs_ring, results_table, speedups_vs_ring, Column, PlanFigures, PolicyResult,
    ResultsTable, Values, RESULTS_COLUMNS,
};
pub use seeds::{median_u64, seeds_table, SEED_COLUMNS};

use std::path::{Path, PathBuf};

/// Columns of `fct.csv`, in the contract's order.
pub use crate::formats::fct_csv::COLUMNS as FCT_COLUMNS;

/// The policy every other row's `speedup_vs_ring` is measured against.
pub const RING_POLICY: &str = "ring";

/// Why a comparison or a table could not be made. Every variant names the file at fault.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// An input file does not exist.
    #[error("{path}: missing ({what})")]
    MissingFile {
        /// The file that was expected.
        path: PathBuf,
        /// What it should have been and who writes it.
        what: &'static str,
    },
    /// An input file that cannot be read or does not follow its format.
    #[error(transparent)]
    File(#[from] crate::formats::FormatError),
    /// `fct.csv` must hold one row per trace record (the summary's `records`).
    #[error("{path}: {rows} rows but {summary} says the trace has {records} records")]
    RecordCount {
        /// The fct file.
        path: PathBuf,
        /// Its row count.
        rows: usize,
        /// The summary that disagrees.
        summary: PathBuf,
        /// The summary's `records`.
        records: u64,
    },
    /// The same flow id twice in one `fct.csv`.
    #[error("{path}: flow_id {flow_id} appears more than once")]
    DuplicateFlow {
        /// The file.
        path: PathBuf,
        /// The repeated id.
        flow_id: u64,
    },
    /// The two summaries describe different traces.
    #[error(
        "different traces: `{field}` is {replay:?} in {replay_file} but {ns3:?} in {ns3_file}"
    )]
    TraceMismatch {
        /// `trace` or `records`.
        field: &'static str,
        /// The replay summary's value.
        replay: String,
        /// The ns-3 summary's value.
        ns3: String,
        /// The replay summary file.
        replay_file: PathBuf,
        /// The ns-3 summary file.
        ns3_file: PathBuf,
    },
    /// The two fct files hold different flow ids.
    #[error(
        "different traces: {only_replay} flow id(s) only in {replay_file} (first: {first_replay}), \
         {only_ns3} only in {ns3_file} (first: {first_ns3})"
    )]
    FlowIdMismatch {
        /// How many ids only the replay has.
        only_replay: usize,
        /// The smallest of them, or `-`.
        first_replay: String,
        /// How many ids only ns-3 has.
        only_ns3: usize,
        /// The smallest of them, or `-`.
        first_ns3: String,
        /// The replay fct file.
        replay_file: PathBuf,
        /// The ns-3 fct file.
        ns3_file: PathBuf,
    },
    /// One flow id with different endpoints, size, mode or class on the two sides.
    #[error(
        "different traces: flow_id {flow_id} has {field} {replay} in {replay_file} but {ns3} in {ns3_file}"
    )]
    FlowMismatch {
        /// The flow.
        flow_id: u64,
        /// The column that differs.
        field: &'static str,
        /// Replay's value.
        replay: String,
        /// ns-3's value.
        ns3: String,
        /// The replay fct file.
        replay_file: PathBuf,
        /// The ns-3 fct file.
        ns3_file: PathBuf,
    },
    /// No `ring` row to measure speed-ups against.
    #[error("results table: no `{RING_POLICY}` row to compute speedup_vs_ring against (policies: {policies})")]
    NoRing {
        /// The policies that were given.
        policies: String,
    },
    /// A policy row whose iteration time is zero (speed-up undefined).
    #[error(
        "results table: policy `{policy}` has iteration_time_ns = 0; speedup_vs_ring is undefined"
    )]
    ZeroIteration {
        /// The policy.
        policy: String,
    },
    /// A policy name given twice.
    #[error("results table: policy `{policy}` appears twice")]
    DuplicatePolicy {
        /// The policy.
        policy: String,
    },
    /// The seeds of a run did not run the same policies.
    #[error("results over seeds: {}{msg}", seed.map(|s| format!("seed {s} ")).unwrap_or_default())]
    SeedPolicies {
        /// The seed at fault, if one.
        seed: Option<u64>,
        /// What differs.
        msg: String,
    },
    /// The picture could not be drawn.
    #[error("{path}: drawing the picture: {msg}")]
    Plot {
        /// The picture's file.
        path: PathBuf,
        /// What the drawing library said.
        msg: String,
    },
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// polars failed on a file.
    #[cfg(feature = "tables")]
    #[error("{path}: {source}")]
    Polars {
        /// The file (or output) concerned.
        path: PathBuf,
        /// polars' error.
        source: polars::prelude::PolarsError,
    },
}

pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ReportError + '_ {
    move |source| ReportError::Io {
        path: path.to_path_buf(),
        source,
    }
}
