//! `validate.csv`: one row per case of the validation suite (`ina3d validate`), replayer
//! against ns-3 on the same trace. Errors are relative, `(replay − ns3) / ns3`; FCT
//! errors are the median and nearest-rank p95 of |error| over the class's network
//! records (empty when the class has none); `bench_busbw_error` is the busbw error of a
//! bench's largest size. Every figure is run 0's (the trace as generated) but the last
//! five, the case's ensemble over runs with jittered record starts.

use super::csv_rows::{read_rows, write_rows};
use super::{write_atomic, FormatError};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// One case's row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ValidateRow {
    /// Case name.
    pub case: String,
    /// GPUs of the job.
    pub gpus: u32,
    /// The glue's transport (`tcp`, `roce`).
    pub transport: String,
    /// Trace records.
    pub records: u64,
    /// Iteration (makespan) error.
    pub iteration_error: f64,
    /// Median |FCT error| of TP records.
    pub fct_median_error_tp: Option<f64>,
    /// p95 |FCT error| of TP records.
    pub fct_p95_error_tp: Option<f64>,
    /// Median |FCT error| of PP records.
    pub fct_median_error_pp: Option<f64>,
    /// p95 |FCT error| of PP records.
    pub fct_p95_error_pp: Option<f64>,
    /// Median |FCT error| of DP records.
    pub fct_median_error_dp: Option<f64>,
    /// p95 |FCT error| of DP records.
    pub fct_p95_error_dp: Option<f64>,
    /// INA slot peak on the replayer.
    pub slot_peak_replay: u64,
    /// INA slot peak on ns-3.
    pub slot_peak_ns3: u64,
    /// Switch bytes, replay − ns-3.
    pub switch_bytes_diff: i64,
    /// Bench cases: busbw error of the largest size.
    pub bench_busbw_error: Option<f64>,
    /// Replayer wall time, s.
    pub replay_wall_s: f64,
    /// ns-3 wall time, s.
    pub ns3_wall_s: f64,
    /// ns-3 wall / replay wall.
    pub speed_ratio: f64,
    /// Runs of the case's ensemble (run 0 on the trace as generated, the others on
    /// jittered copies); the figures above are run 0's.
    pub runs: u32,
    /// The largest start move of the jittered runs, ns.
    pub jitter_ns: u64,
    /// `(mean replay − mean ns-3) / mean ns-3` iteration time over the runs.
    pub iteration_error_mean: f64,
    /// ns-3's iteration `(max − min) / mean` over the runs.
    pub ns3_spread: f64,
    /// The replayer's iteration `(max − min) / mean` over the runs.
    pub replay_spread: f64,
}

/// The columns, in file order.
pub const COLUMNS: [&str; 23] = [
    "case",
    "gpus",
    "transport",
    "records",
    "iteration_error",
    "fct_median_error_tp",
    "fct_p95_error_tp",
    "fct_median_error_pp",
    "fct_p95_error_pp",
    "fct_median_error_dp",
    "fct_p95_error_dp",
    "slot_peak_replay",
    "slot_peak_ns3",
    "switch_bytes_diff",
    "bench_busbw_error",
    "replay_wall_s",
    "ns3_wall_s",
    "speed_ratio",
    "runs",
    "jitter_ns",
    "iteration_error_mean",
    "ns3_spread",
    "replay_spread",
];

/// Write `validate.csv` atomically (the header alone when no case ran).
pub fn write(path: &Path, rows: &[ValidateRow]) -> Result<(), FormatError> {
    write_atomic(path, |w| {
        if rows.is_empty() {
            writeln!(w, "{}", COLUMNS.join(","))
        } else {
            write_rows(w, rows)
        }
    })
}

/// Read `validate.csv`; errors name `path:line` and the field.
pub fn read(path: &Path) -> Result<Vec<ValidateRow>, FormatError> {
    read_rows(path, &COLUMNS, "validate.csv: one row per suite case")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_with_empty_class_errors() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("validate.csv");
        let rows = vec![ValidateRow {
            case: "c".into(),
            gpus: 16,
            transport: "tcp".into(),
            records: 10,
            iteration_error: -0.0625,
            fct_median_error_tp: None,
            fct_p95_error_tp: None,
            fct_median_error_pp: Some(0.5),
            fct_p95_error_pp: Some(0.75),
            fct_median_error_dp: Some(0.125),
            fct_p95_error_dp: Some(0.25),
            slot_peak_replay: 3,
            slot_peak_ns3: 4,
            switch_bytes_diff: -12,
            bench_busbw_error: None,
            replay_wall_s: 0.5,
            ns3_wall_s: 2.0,
            speed_ratio: 4.0,
            runs: 3,
            jitter_ns: 84,
            iteration_error_mean: 0.03125,
            ns3_spread: 0.046875,
            replay_spread: 0.0,
        }];
        write(&p, &rows).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.starts_with(&COLUMNS.join(",")), "{text}");
        assert_eq!(read(&p).unwrap(), rows);
    }
}
