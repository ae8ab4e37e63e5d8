//! `fct.csv`: one [`FctRow`] per trace record, written by both back-ends (the replayer
//! and `ina3d ns3 run` for the glue) and joined on `flow_id` by `ina3d compare`.
//!
//! Columns: `flow_id,src,dst,mode,class,size_bytes,start_ns,end_ns,fct_ns,standalone_fct_ns`
//! (docs/outputs.md, "Outputs and their columns"). A row must satisfy `fct_ns = end_ns − start_ns`.

use super::csv_rows::read_rows;
use super::digits::{put_u64, put_word, FIELD_MAX};
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

/// Write `fct.csv` (header + one row per record, in the given order; nothing at all
/// without rows), atomically. The rows may be made one at a time as they are written (a
/// large replay never holds them all); each is formatted straight into a buffer
/// ([`super::digits`]: a 68-million-row file is a few seconds of formatting, not a minute).
pub fn write<T: Borrow<FctRow>>(
    path: &Path,
    rows: impl IntoIterator<Item = T>,
) -> Result<(), FormatError> {
    write_atomic(path, |w| {
        let mut rows = rows.into_iter().peekable();
        if rows.peek().is_none() {
            return Ok(());
        }
        let mut buf = vec![0u8; CHUNK + ROW_MAX];
        let head = COLUMNS.join(",");
        buf[..head.len()].copy_from_slice(head.as_bytes());
        buf[head.len()] = b'\n';
        let mut at = head.len() + 1;
        for r in rows {
            at = format_row(&mut buf, at, r.borrow());
            if at >= CHUNK {
                w.write_all(&buf[..at])?;
                at = 0;
            }
        }
        w.write_all(&buf[..at])
    })
}

/// Bytes formatted before they are handed to the file.
const CHUNK: usize = 1 << 20;

/// The longest row: eight numbers and two keywords at [`FIELD_MAX`] each, and the newline.
const ROW_MAX: usize = COLUMNS.len() * FIELD_MAX + 1;

/// Write `r` as a row (with its newline) at `b[at..]`, which has [`ROW_MAX`] bytes of
/// room; the position after it. The columns are [`COLUMNS`], as serde writes them.
fn format_row(b: &mut [u8], at: usize, r: &FctRow) -> usize {
    let mut p = at;
    for v in [r.flow_id, r.src as u64, r.dst as u64] {
        p = put_u64(b, p, v);
        b[p] = b',';
        p += 1;
    }
    for w in [r.mode.as_str(), r.class.as_str()] {
        p = put_word(b, p, w);
        b[p] = b',';
        p += 1;
    }
    for v in [r.size_bytes, r.start_ns, r.end_ns, r.fct_ns] {
        p = put_u64(b, p, v);
        b[p] = b',';
        p += 1;
    }
    p = put_u64(b, p, r.standalone_fct_ns);
    b[p] = b'\n';
    p + 1
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
    fn rows_are_written_as_the_csv_serializer_writes_them() {
        let rows: Vec<FctRow> = [Mode::Net, Mode::Ina, Mode::NvLink, Mode::Compute]
            .into_iter()
            .zip(Class::ALL)
            .enumerate()
            .map(|(i, (mode, class))| FctRow {
                flow_id: u64::MAX - i as u64,
                src: u32::MAX,
                dst: i as u32,
                size_bytes: 10u64.pow(i as u32 * 5),
                start_ns: 0,
                end_ns: 123_456_789_012,
                fct_ns: 123_456_789_012,
                standalone_fct_ns: 99_999_999,
                ..row(0, mode, class)
            })
            .collect();
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("fct.csv");
        write(&p, &rows).unwrap();
        let mut want = Vec::new();
        super::super::csv_rows::write_rows(&mut want, &rows).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), want);
        write(&p, Vec::<FctRow>::new()).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"", "no rows, no header");
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
