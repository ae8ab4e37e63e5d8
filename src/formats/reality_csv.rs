//! `reality.csv`: one row per published run of the suite (`ina3d validate --reality`),
//! its published iteration time beside the prediction; `error` is
//! `(predicted − published) / published`.

use super::csv_rows::{read_rows, write_rows};
use super::{write_atomic, FormatError};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// One published run's row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RealityRow {
    /// The run's id in the suite.
    pub run: String,
    /// `fit` or `held-out`.
    pub group: String,
    /// GPU preset.
    pub gpu: String,
    /// GPUs.
    pub gpus: u32,
    /// Published iteration time, ms.
    pub published_ms: f64,
    /// Predicted iteration time, ms.
    pub predicted_ms: f64,
    /// Of which compute on the busiest rank, ms.
    pub compute_ms: f64,
    /// Relative error.
    pub error: f64,
}

const COLUMNS: [&str; 8] = [
    "run",
    "group",
    "gpu",
    "gpus",
    "published_ms",
    "predicted_ms",
    "compute_ms",
    "error",
];

/// Write `reality.csv` atomically (the header alone when no run was predicted).
pub fn write(path: &Path, rows: &[RealityRow]) -> Result<(), FormatError> {
    write_atomic(path, |w| {
        if rows.is_empty() {
            writeln!(w, "{}", COLUMNS.join(","))
        } else {
            write_rows(w, rows)
        }
    })
}

/// Read `reality.csv`; errors name `path:line` and the field.
pub fn read(path: &Path) -> Result<Vec<RealityRow>, FormatError> {
    read_rows(path, &COLUMNS, "reality.csv: one row per published run")
}
