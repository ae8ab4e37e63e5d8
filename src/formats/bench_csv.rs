//! `bench.csv`: algbw/busbw per size of a collective-bench run ([`crate::fct::bench`]),
//! written beside `fct.csv` by `ina3d replay` and `ina3d ns3 run` when the trace is a
//! bench, and read back by `ina3d compare`.
//!
//! Columns: `collective,group,group_size,size_bytes,time_ns,algbw_gbs,busbw_gbs`.

use super::csv_rows::{read_rows, write_rows};
use super::{write_atomic, FormatError};
use crate::fct::bench::{BenchComparison, BenchRow};
use std::path::Path;

/// The columns, in file order.
pub const COLUMNS: [&str; 7] = [
    "collective",
    "group",
    "group_size",
    "size_bytes",
    "time_ns",
    "algbw_gbs",
    "busbw_gbs",
];

/// Write `bench.csv` atomically.
pub fn write(path: &Path, rows: &[BenchRow]) -> Result<(), FormatError> {
    write_atomic(path, |w| write_rows(w, rows))
}

/// Read `bench.csv`; errors name `path:line` and the field (an empty file is one).
pub fn read(path: &Path) -> Result<Vec<BenchRow>, FormatError> {
    let rows: Vec<BenchRow> = read_rows(path, &COLUMNS, "bench.csv: one row per size")?;
    if rows.is_empty() {
        return Err(FormatError::file(path, "empty: header only, no sizes"));
    }
    Ok(rows)
}

/// Write `ina3d compare`'s `bench.csv` (both back-ends side by side) atomically: columns
/// `size_bytes,replay_time_ns,ns3_time_ns,replay_busbw_gbs,ns3_busbw_gbs,busbw_rel_error`.
pub fn write_comparison(path: &Path, rows: &[BenchComparison]) -> Result<(), FormatError> {
    write_atomic(path, |w| write_rows(w, rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_and_a_bad_field_is_named() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("bench.csv");
        let rows = vec![BenchRow {
            collective: "all-gather".into(),
            group: "dp".into(),
            group_size: 8,
            size_bytes: 1 << 20,
            time_ns: 123_456,
            algbw_gbs: 8.493_639_9,
            busbw_gbs: 7.431_934_9,
        }];
        write(&p, &rows).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.starts_with(&COLUMNS.join(",")), "{text}");
        assert_eq!(read(&p).unwrap(), rows);
        std::fs::write(&p, text.replace("123456", "x")).unwrap();
        let e = read(&p).unwrap_err().to_string();
        assert!(e.contains("bench.csv:2"), "{e}");
    }
}
