//! `fct.csv`: one [`FctRow`] per trace record, written by both back-ends (the replayer
//! and `ina3d ns3 run` for the glue) and joined on `flow_id` by `ina3d compare`.
//!
//! Columns: `flow_id,src,dst,mode,class,size_bytes,start_ns,end_ns,fct_ns,standalone_fct_ns`
//! (README "Outputs and their columns"). A row must satisfy `fct_ns = end_ns − start_ns`.

use super::csv_rows::{read_rows, write_rows};
use super::{write_atomic, FormatError};
use crate::fct::FctRow;
use std::borrow::Borrow;
use std::path::Path;

/// The columns, in file order.
pub const COLUMNS: [&str; 10] = [
    "flow_id",
    "src",
    "dst",
    "mode",
    "class",
    "size_bytes",
    "start_ns",
    "end_ns",
    "fct_ns",
    "standalone_fct_ns",
];

/// Write `fct.csv` (header + one row per record, in the given order), atomically. The rows
/// may be made one at a time as they are written (a large replay never holds them all).
pub fn write<T: Borrow<FctRow>>(
    path: &Path,
    rows: impl IntoIterator<Item = T>,
) -> Result<(), FormatError> {
    write_atomic(path, |w| write_rows(w, rows.into_iter().map(Row)))
}

/// A row as it serializes, whether owned or borrowed.
struct Row<T>(T);

impl<T: Borrow<FctRow>> serde::Serialize for Row<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.borrow().serialize(s)
    }
}

/// Read `fct.csv`. Errors name `path:line` and the field: a missing column, a value that
/// is not of its column's type (an unknown `mode` or `class` among them), times that are
/// inconsistent (`fct_ns ≠ end_ns − start_ns`), or a file with no rows.
pub fn read(path: &Path) -> Result<Vec<FctRow>, FormatError> {
    let rows: Vec<FctRow> = read_rows(path, &COLUMNS, "fct.csv: one row per trace record")?;
    if rows.is_empty() {
        return Err(FormatError::file(
            path,
            "empty: header only, no records (did the run stop before writing any?)",
        ));
    }
    for (i, r) in rows.iter().enumerate() {
        if r.end_ns < r.start_ns || r.fct_ns != r.end_ns - r.start_ns {
            return Err(FormatError::syntax(
                path,
                i as u64 + 2,
                "fct_ns",
                format!(
                    "flow {}: start_ns {} end_ns {} fct_ns {} are inconsistent (need fct = end - start >= 0)",
                    r.flow_id, r.start_ns, r.end_ns, r.fct_ns
                ),
            ));
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Class, Mode};

    fn row(id: u64, mode: Mode, class: Class) -> FctRow {
        FctRow {
            flow_id: id,
            src: 1,
            dst: 2,
            mode,
            class,
            size_bytes: 1000,
            start_ns: 5,
            end_ns: 25,
            fct_ns: 20,
            standalone_fct_ns: 10,
        }
    }

    #[test]
    fn rows_round_trip_and_the_header_is_the_contract() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("fct.csv");
        let rows = vec![
            row(0, Mode::Net, Class::Dp),
            row(1, Mode::NvLink, Class::Tp),
        ];
        write(&p, &rows).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(text.lines().next().unwrap(), COLUMNS.join(","));
        assert!(text.contains(",nvlink,tp,"), "{text}");
        assert_eq!(read(&p).unwrap(), rows);
    }

    #[test]
    fn bad_rows_name_their_line_and_field() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("fct.csv");
        let head = COLUMNS.join(",");
        for (body, want) in [
            (
                "0,1,2,net,dp,10,5,25,20,1\n1,1,2,warp,dp,10,5,25,20,1\n",
                ":3: mode:",
            ),
            ("0,1,2,net,dp,10,5,25,19,1\n", ":2: fct_ns:"),
            ("0,1,2,net,dp,x,5,25,20,1\n", ":2: size_bytes:"),
            ("", "no records"),
        ] {
            std::fs::write(&p, format!("{head}\n{body}")).unwrap();
            let e = read(&p).unwrap_err().to_string();
            assert!(e.contains(want), "{body:?}: {e}");
        }
        std::fs::write(&p, "flow_id,src\n0,1\n").unwrap();
        let e = read(&p).unwrap_err().to_string();
        assert!(e.contains(":1: dst: missing column"), "{e}");
    }
}
