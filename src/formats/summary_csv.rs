//! `summary.csv`: the one-row iteration [`Summary`] of a back-end run (both back-ends
//! compute it with [`crate::fct::summarize`]).

use super::csv_rows::{read_rows, write_rows};
use super::{write_atomic, FormatError};
use crate::fct::Summary;
use std::path::Path;

/// Write `summary.csv` (header + one row), atomically.
pub fn write(path: &Path, s: &Summary) -> Result<(), FormatError> {
    write_atomic(path, |w| write_rows(w, [s]))
}

/// Read `summary.csv`: exactly one [`Summary`] row (extra columns are ignored, missing
/// ones are errors naming the column).
pub fn read(path: &Path) -> Result<Summary, FormatError> {
    let mut rows: Vec<Summary> = read_rows(
        path,
        &["backend", "records", "iteration_time_ns"],
        "summary.csv: the back-end's one-row iteration summary",
    )?;
    match rows.len() {
        0 => Err(FormatError::file(
            path,
            "empty: header only, no summary row",
        )),
        1 => Ok(rows.pop().expect("one row")),
        n => Err(FormatError::file(
            path,
            format!("{n} summary rows; a summary has exactly one"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_round_trips_and_a_second_row_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("summary.csv");
        let s = Summary {
            backend: "replay".into(),
            trace: "t.csv.gz".into(),
            records: 7,
            iteration_time_ns: 123,
            switch_bytes: 9,
            ina_slot_peak: 4,
            ..Summary::default()
        };
        write(&p, &s).unwrap();
        assert_eq!(read(&p).unwrap(), s);
        let text = std::fs::read_to_string(&p).unwrap();
        let last = text.lines().last().unwrap().to_string();
        std::fs::write(&p, format!("{text}{last}\n")).unwrap();
        assert!(read(&p).unwrap_err().to_string().contains("2 summary rows"));
    }
}
