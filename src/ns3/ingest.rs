//! `ina3d ns3 ingest`: simulator outputs → tidy CSV with named columns and units.
//!
//! | input | detected by | output columns |
//! |---|---|---|
//! | HPCC `fct.txt` (8 fields; Parsimon 9, id first) | hex IPs | `flow_id,src_node,dst_node,src_ip,dst_ip,sport,dport,size_bytes,start_ns,fct_ns,standalone_fct_ns,slowdown` |
//! | HPCC `pfc.txt` (`time_ns node_id node_type if_index type`) | 5 integers / name `pfc` | `time_ns,node,node_type,if_index,pause` |
//! | `qlen.txt` (SimAI monitor: `time_ns node_id if_index qlen_bytes`) | 4 integers / name `qlen` | `time_ns,node,if_index,qlen_bytes` |
//! | SimAI `EndToEnd.csv` | `File name,` first | `section,layer,row,metric,value,unit` (long form; `nan`/`NONE` → empty) |
//! | our `summary.csv` | `backend,` first | the summary columns (units in their names) |
//!
//! Node ids are recovered from HPCC IPs by `(ip >> 8) & 0xffff` (docs/model.md#hpcc-host-ips). CRLF input is
//! accepted; lines that do not parse are reported as warnings with file and line, and
//! the rest of the file is still read.

use super::Ns3Error;
use crate::fct::Summary;
use crate::formats::hpcc_fct::{self, parse_hex_ip};
use crate::formats::simai_end_to_end;
use crate::formats::{write_atomic_bytes, FormatError};
use std::path::{Path, PathBuf};

/// What an input file is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// HPCC fct (8 or 9 fields).
    Fct,
    /// HPCC pfc events.
    Pfc,
    /// Queue length samples.
    Qlen,
    /// SimAI EndToEnd.csv.
    EndToEnd,
    /// Our summary.csv.
    Summary,
}

impl Kind {
    /// Short name used in output file names.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Fct => "fct",
            Kind::Pfc => "pfc",
            Kind::Qlen => "qlen",
            Kind::EndToEnd => "end_to_end",
            Kind::Summary => "summary",
        }
    }
}

/// One ingested file.
#[derive(Clone, Debug, PartialEq)]
pub struct Ingested {
    /// Input.
    pub input: PathBuf,
    /// What it was.
    pub kind: Kind,
    /// Output written.
    pub output: PathBuf,
    /// Data rows written.
    pub rows: usize,
    /// Lines skipped, with file:line and why.
    pub warnings: Vec<String>,
}

/// A tidy table: header and rows of cells.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    /// Column names.
    pub header: Vec<String>,
    /// Rows.
    pub rows: Vec<Vec<String>>,
    /// Skipped lines.
    pub warnings: Vec<String>,
}

fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim_end_matches('\r').trim()))
}

/// Node id of an HPCC host IP written as 8 hex digits.
fn hpcc_ip_node(hex: &str) -> Option<u32> {
    parse_hex_ip(hex).map(hpcc_fct::ip_node)
}

/// Guess the kind of a file from its name and first line.
pub fn detect(path: &Path, text: &str) -> Option<Kind> {
    let first = lines(text).find(|(_, l)| !l.is_empty()).map(|(_, l)| l)?;
    if first.starts_with("File name,") {
        return Some(Kind::EndToEnd);
    }
    if first.starts_with("backend,") {
        return Some(Kind::Summary);
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    if name.contains("pfc") {
        return Some(Kind::Pfc);
    }
    if name.contains("qlen") {
        return Some(Kind::Qlen);
    }
    let t: Vec<&str> = first.split_whitespace().collect();
    match t.len() {
        8 if hpcc_ip_node(t[0]).is_some() => Some(Kind::Fct),
        9 if hpcc_ip_node(t[1]).is_some() => Some(Kind::Fct),
        5 => Some(Kind::Pfc),
        4 => Some(Kind::Qlen),
        _ => None,
    }
}

/// The start of a line reader's error for a line that is a row of its kind but holds a
/// value no simulator wrote (a size past 2^50): the file is refused, naming the line,
/// where a line that is no row at all (free text a simulator appended) is a warning.
const REFUSE: &str = "refused: ";

fn warn(path: &Path, no: usize, msg: &str, line: &str) -> String {
    format!(
        "{}:{no}: {msg}: `{}`",
        path.display(),
        crate::formats::escape_input(line)
    )
}

/// Columns of the tidy fct table.
const FCT_COLUMNS: [&str; 12] = [
    "flow_id",
    "src_node",
    "dst_node",
    "src_ip",
    "dst_ip",
    "sport",
    "dport",
    "size_bytes",
    "start_ns",
    "fct_ns",
    "standalone_fct_ns",
    "slowdown",
];
const PFC_COLUMNS: [&str; 5] = ["time_ns", "node", "node_type", "if_index", "pause"];
const QLEN_COLUMNS: [&str; 4] = ["time_ns", "node", "if_index", "qlen_bytes"];

/// One HPCC fct line (trimmed, not blank) as tidy cells, or why it is not an fct row.
fn fct_cells(l: &str) -> Result<Vec<String>, String> {
    let r = hpcc_fct::parse_line(l)?;
    if let Some(why) = hpcc_fct::out_of_range(&r) {
        return Err(format!("{REFUSE}{why}"));
    }
    let slowdown = if r.standalone_fct_ns > 0 {
        format!("{:.6}", r.fct_ns as f64 / r.standalone_fct_ns as f64)
    } else {
        String::new()
    };
    Ok(vec![
        r.id.map(|i| i.to_string()).unwrap_or_default(),
        r.src.to_string(),
        r.dst.to_string(),
        format!("{:08x}", r.sip),
        format!("{:08x}", r.dip),
        r.sport.to_string(),
        r.dport.to_string(),
        r.size.to_string(),
        r.start_ns.to_string(),
        r.fct_ns.to_string(),
        r.standalone_fct_ns.to_string(),
        slowdown,
    ])
}

/// One line of `n` unsigned integers as cells, or what it should have been.
fn int_cells(l: &str, n: usize, what: &str) -> Result<Vec<String>, String> {
    let f: Vec<&str> = l.split_whitespace().collect();
    if f.len() != n || f.iter().any(|x| x.parse::<u64>().is_err()) {
        return Err(format!("expected {what}"));
    }
    Ok(f.iter().map(|s| s.to_string()).collect())
}

fn pfc_cells(l: &str) -> Result<Vec<String>, String> {
    int_cells(l, 5, "`time_ns node_id node_type if_index type`")
}

fn qlen_cells(l: &str) -> Result<Vec<String>, String> {
    int_cells(l, 4, "`time_ns node_id if_index qlen_bytes`")
}

/// How a line-based kind is read: its tidy columns and its line reader.
type LineKind = (
    &'static [&'static str],
    fn(&str) -> Result<Vec<String>, String>,
);

/// The tidy columns and line reader of a line-based kind (fct, pfc, qlen).
fn line_kind(kind: Kind) -> Option<LineKind> {
    match kind {
        Kind::Fct => Some((&FCT_COLUMNS, fct_cells)),
        Kind::Pfc => Some((&PFC_COLUMNS, pfc_cells)),
        Kind::Qlen => Some((&QLEN_COLUMNS, qlen_cells)),
        Kind::EndToEnd | Kind::Summary => None,
    }
}

/// A line-based file in memory as a table (the streaming [`ingest`] reads it the same way).
fn line_table(path: &Path, text: &str, (header, cells): LineKind) -> Table {
    let mut t = Table {
        header: header.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    };
    for (no, l) in lines(text) {
        if l.is_empty() {
            continue;
        }
        match cells(l) {
            Ok(c) => t.rows.push(c),
            Err(why) => t
                .warnings
                .push(warn(path, no, why.trim_start_matches(REFUSE), l)),
        }
    }
    t
}

/// HPCC fct → tidy rows.
pub fn parse_fct(path: &Path, text: &str) -> Table {
    line_table(path, text, (&FCT_COLUMNS, fct_cells))
}

/// HPCC pfc → tidy rows (`pause` is HPCC's type: 1 pause, 0 resume).
pub fn parse_pfc(path: &Path, text: &str) -> Table {
    line_table(path, text, (&PFC_COLUMNS, pfc_cells))
}

/// Queue-length samples → tidy rows.
pub fn parse_qlen(path: &Path, text: &str) -> Table {
    line_table(path, text, (&QLEN_COLUMNS, qlen_cells))
}

/// SimAI EndToEnd.csv → long-form rows ([`crate::interop::simai::long_form`]), read by
/// the one reader of the format ([`simai_end_to_end`]).
pub fn parse_end_to_end(path: &Path, text: &str) -> Result<Table, Ns3Error> {
    let (e2e, warnings) = simai_end_to_end::parse(path, text)?;
    Ok(Table {
        header: crate::interop::simai::LONG_FORM_COLUMNS
            .map(String::from)
            .to_vec(),
        rows: crate::interop::simai::long_form(&e2e),
        warnings: warnings.iter().map(ToString::to_string).collect(),
    })
}

/// Our summary.csv → the same columns, checked against the [`Summary`] schema.
pub fn parse_summary(path: &Path, text: &str) -> Result<Table, Ns3Error> {
    let mut rdr = csv::Reader::from_reader(text.as_bytes());
    let header: Vec<String> = rdr
        .headers()
        .map_err(|e| Ns3Error::parse(path, 1, "header", e.to_string()))?
        .iter()
        .map(String::from)
        .collect();
    let mut t = Table {
        header,
        ..Default::default()
    };
    for (i, rec) in rdr.records().enumerate() {
        let rec = rec.map_err(|e| Ns3Error::parse(path, i + 2, "row", e.to_string()))?;
        let _: Summary = rec
            .deserialize(Some(&csv::StringRecord::from(t.header.clone())))
            .map_err(|e| Ns3Error::parse(path, i + 2, "row", e.to_string()))?;
        t.rows.push(rec.iter().map(String::from).collect());
    }
    Ok(t)
}

/// Parse one file of a known kind.
pub fn parse(kind: Kind, path: &Path, text: &str) -> Result<Table, Ns3Error> {
    Ok(match kind {
        Kind::Fct => parse_fct(path, text),
        Kind::Pfc => parse_pfc(path, text),
        Kind::Qlen => parse_qlen(path, text),
        Kind::EndToEnd => parse_end_to_end(path, text)?,
        Kind::Summary => parse_summary(path, text)?,
    })
}

/// CSV text of a table.
pub fn to_csv(t: &Table) -> Result<Vec<u8>, Ns3Error> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let e = |e: csv::Error| Ns3Error::Incomplete(format!("csv: {e}"));
    w.write_record(&t.header).map_err(e)?;
    for r in &t.rows {
        w.write_record(r).map_err(e)?;
    }
    w.into_inner()
        .map_err(|e| Ns3Error::Incomplete(format!("csv: {e}")))
}

/// Warnings kept per file; the rest are counted (a file of garbage must not fill memory
/// with messages).
pub const MAX_WARNINGS: usize = 100;

/// Bytes read to tell a file's kind (its first lines).
const DETECT_BYTES: u64 = 64 << 10;

/// Ingest every file into `out` as `<stem>.<kind>.csv`. Line-based files (fct, pfc, qlen)
/// are streamed — read a line at a time and written as they are read — so memory stays
/// flat whatever their size; SimAI's `EndToEnd.csv` and `summary.csv` (a few kilobytes)
/// are read whole.
pub fn ingest(files: &[PathBuf], out: &Path) -> Result<Vec<Ingested>, Ns3Error> {
    std::fs::create_dir_all(out).map_err(|e| Ns3Error::io(out, e))?;
    let mut done = Vec::new();
    for f in files {
        crate::formats::atomic::check_complete(f)?;
        let head = read_head(f)?;
        let kind = detect(f, &head).ok_or_else(|| {
            Ns3Error::parse(
                f,
                1,
                "format",
                "not an HPCC fct/pfc/qlen file, a SimAI EndToEnd.csv or an ina3d summary.csv",
            )
        })?;
        let stem = f
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_else(|| "input".into());
        let output = out.join(format!("{stem}.{}.csv", kind.as_str()));
        let (rows, warnings) = match line_kind(kind) {
            Some(how) => stream_lines(f, &output, how)?,
            None => {
                let bytes = std::fs::read(f).map_err(|e| Ns3Error::io(f, e))?;
                let table = parse(kind, f, &String::from_utf8_lossy(&bytes))?;
                write_atomic_bytes(&output, &to_csv(&table)?)?;
                (table.rows.len(), table.warnings)
            }
        };
        done.push(Ingested {
            input: f.clone(),
            kind,
            output,
            rows,
            warnings,
        });
    }
    Ok(done)
}

/// The first [`DETECT_BYTES`] of `f` as text (enough for [`detect`]'s first line).
fn read_head(f: &Path) -> Result<String, Ns3Error> {
    use std::io::Read;
    let mut head = Vec::new();
    std::fs::File::open(f)
        .and_then(|file| file.take(DETECT_BYTES).read_to_end(&mut head))
        .map_err(|e| Ns3Error::io(f, e))?;
    Ok(String::from_utf8_lossy(&head).into_owned())
}

/// Reads `f` line by line, writing each line's tidy cells to `output` (atomically) as it
/// goes: the rows written and the warnings (at most [`MAX_WARNINGS`], then a count).
fn stream_lines(
    f: &Path,
    output: &Path,
    (header, cells): LineKind,
) -> Result<(usize, Vec<String>), Ns3Error> {
    use std::io::BufRead;
    let file = std::fs::File::open(f).map_err(|e| Ns3Error::io(f, e))?;
    let mut input = std::io::BufReader::with_capacity(1 << 16, file);
    let (mut rows, mut warnings, mut more) = (0usize, Vec::new(), 0usize);
    let mut read_error = None;
    let mut refused = None;
    let written = crate::formats::write_atomic(output, |w| {
        let mut csv = csv::Writer::from_writer(w);
        csv.write_record(header)?;
        let mut buf = Vec::new();
        let mut no = 0usize;
        loop {
            buf.clear();
            match input.read_until(b'\n', &mut buf) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => {
                    read_error = Some(e);
                    return Err(std::io::Error::other("reading the input failed"));
                }
            }
            no += 1;
            let text = String::from_utf8_lossy(&buf);
            let l = text.trim_end_matches(['\n', '\r']).trim();
            if l.is_empty() {
                continue;
            }
            match cells(l) {
                Ok(c) => {
                    csv.write_record(&c)?;
                    rows += 1;
                }
                Err(why) if why.starts_with(REFUSE) => {
                    let why = &why[REFUSE.len()..];
                    let (field, msg) = why.split_once(": ").unwrap_or(("row", why));
                    refused = Some(FormatError::syntax(
                        f,
                        no as u64,
                        field,
                        format!("{msg}: `{l}`"),
                    ));
                    return Err(std::io::Error::other("a row out of range"));
                }
                Err(why) if warnings.len() < MAX_WARNINGS => warnings.push(warn(f, no, &why, l)),
                Err(_) => more += 1,
            }
        }
        csv.flush()
    });
    if let Some(source) = read_error {
        return Err(Ns3Error::io(f, source));
    }
    if let Some(e) = refused {
        return Err(e.into());
    }
    written?;
    if more > 0 {
        warnings.push(format!(
            "{}: {more} more lines that are not rows (not listed)",
            f.display()
        ));
    }
    Ok((rows, warnings))
}
