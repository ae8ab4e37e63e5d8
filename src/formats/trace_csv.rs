//! Trace files: CSV (gzip when the name ends in `.gz`) with metadata comment lines.
//!
//! Layout (schema 3, documented for users in `traces/README.md`):
//!
//! ```text
//! # ina3d-trace schema=3
//! # key=value            (any number, keys sorted; topology, seed, INA config, model, ...)
//! id,src,dst,bytes,deps,gap_ns,dur_ns,mode,class,iteration,collective,step,microbatch,layer,stage,group_size,agg_id,agg_switch,agg_fanin,agg_dir,channel,agg_group
//! 0,3,3,0,,0,1200,compute,compute,0,,,,,,,,,,,,
//! ```
//!
//! Schema 2 added `channel` (the NCCL channel of a `net` record, empty for 0); schema 3
//! added `agg_group` (`dense` or `expert`: which gradients an aggregation reduces, given
//! exactly when the other `agg_*` fields are). Older files are still read: schema 1
//! records are on channel 0, and every aggregation of schema 1 and 2 is `dense`.
//!
//! Every field is an unsigned integer, a `;`-separated list of them (`deps`), a lower-case
//! keyword or empty (absent optional). No field needs quoting, so rows are formatted and
//! parsed by hand: the generator writes millions of rows per second, formatted in place
//! into 1 MiB chunks that become gzip members compressed in parallel
//! ([`super::gz_members`]; the reader checks their marks), and nothing here holds more
//! than a few chunks in memory.
//!
//! Validation happens while reading ([`TraceReader`]): ids unique, every dep already seen
//! (so the file order is a topological order and the DAG is acyclic), mode/field
//! consistency, and any further per-record check the caller plugs in ([`RecordCheck`]; the
//! trace stage checks endpoints against a topology). Errors name `file:line:column` and
//! the column's name.

use super::digits::{put_u64, put_word, FIELD_MAX};
use super::FormatError;
use crate::record::{AggDir, Class, FlowRecord, Mode};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

mod blocks;
mod read;
mod row;
pub use read::TraceReader;
pub use row::MAX_RECORD_VALUE;

/// Version of the file layout written in the first line. Bump on any column change.
pub const SCHEMA_VERSION: u32 = 3;

/// The oldest schema this build still reads (schema 1: no `channel` column; schema 2: no
/// `agg_group`).
pub const OLDEST_SCHEMA: u32 = 1;

/// First line of every trace file (followed by ` schema=N`).
pub const MAGIC: &str = "# ina3d-trace";

/// The last line of a trace this build writes, followed by the number of records: a
/// file cut at a line boundary lacks it, or counts more records than it holds. Readers
/// that do not know it skip it as a comment.
pub const END_MARKER: &str = "# end records=";

/// The header key promising the end line ([`END_MARKER`]): a file whose header has it
/// and that ends without the line was cut. Files written before it have neither and are
/// read as they were (a plain one cut at a line boundary cannot be told from a whole one;
/// gzip's own end checks still catch a cut `.gz`).
pub const END_MARKER_KEY: &str = "end_marker";

/// The column header row of the current schema (schema 1 is the first 20, schema 2 the
/// first 21).
pub const COLUMNS: [&str; 22] = [
    "id",
    "src",
    "dst",
    "bytes",
    "deps",
    "gap_ns",
    "dur_ns",
    "mode",
    "class",
    "iteration",
    "collective",
    "step",
    "microbatch",
    "layer",
    "stage",
    "group_size",
    "agg_id",
    "agg_switch",
    "agg_fanin",
    "agg_dir",
    "channel",
    "agg_group",
];

/// Columns of a file of schema `schema` (schema 1 has no `channel`, schema 2 no
/// `agg_group`).
fn columns_of(schema: u32) -> &'static [&'static str] {
    match schema {
        1 => &COLUMNS[..20],
        2 => &COLUMNS[..21],
        _ => &COLUMNS,
    }
}

/// A per-record check the reader runs after its own (the trace stage checks endpoints
/// against a topology): on failure the index of the offending column in [`COLUMNS`] and
/// what is wrong.
pub trait RecordCheck {
    /// Check one record.
    fn check(&self, r: &FlowRecord) -> Result<(), (usize, String)>;
}

/// The metadata lines of a trace: schema version and `key=value` pairs (sorted by key).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TraceHeader {
    /// Schema version (see [`SCHEMA_VERSION`]).
    pub schema: u32,
    /// Metadata: topology spec, seed, INA configuration, parallel sizes, model, calibration.
    pub meta: BTreeMap<String, String>,
}

impl TraceHeader {
    /// An empty header of the current schema.
    pub fn new() -> Self {
        Self {
            schema: SCHEMA_VERSION,
            meta: BTreeMap::new(),
        }
    }
    /// Set one metadata entry.
    pub fn set(&mut self, key: impl Into<String>, value: impl ToString) -> &mut Self {
        self.meta.insert(key.into(), value.to_string());
        self
    }
    /// One metadata value.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.meta.get(key).map(String::as_str)
    }
}

/// A whole trace in memory (small traces, tests, inspection of small files).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trace {
    /// Metadata.
    pub header: TraceHeader,
    /// Records in file (dependency) order.
    pub records: Vec<FlowRecord>,
}

fn is_gz(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gz"))
}

fn io_err(path: &Path, source: std::io::Error) -> FormatError {
    FormatError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Streaming trace writer: rows are formatted straight into 1 MiB chunks that go to
/// `NAME.tmp` (for `.gz`, each chunk compressed in parallel into one gzip member:
/// [`super::gz_members`]), renamed to `NAME` by [`TraceWriter::finish`]. Dropping it
/// unfinished removes the temp file, so a half-written trace is never presented under the
/// final name.
pub struct TraceWriter {
    sink: Option<Sink>,
    /// Rows not yet handed to the sink.
    rows: RowBuf,
    tmp: PathBuf,
    path: PathBuf,
    count: u64,
}

/// Bytes of formatted rows per chunk (and per gzip member). A chunk ends after the first
/// row that reaches this size, so the cut points depend only on the rows.
const CHUNK: usize = 1 << 20;

enum Sink {
    Plain(File),
    Gz(super::gz_members::GzMembers),
}

/// Rows formatted in place: `buf` is kept at its full length (zero-filled once), rows are
/// written at `fill` with plain indexing, so a field costs neither a capacity check nor a
/// length update nor a `memcpy` call. Before each row the buffer is grown, if need be, to
/// hold the longest row that record could make ([`row_bound`]).
struct RowBuf {
    buf: Vec<u8>,
    fill: usize,
}

impl RowBuf {
    fn new() -> Self {
        RowBuf {
            buf: vec![0; CHUNK + ROW_FIXED_MAX],
            fill: 0,
        }
    }
    /// Make room for `n` more bytes at `fill`.
    #[inline]
    fn room(&mut self, n: usize) {
        if self.buf.len() < self.fill + n {
            self.buf.resize(self.fill + n, 0);
        }
    }
    fn push_bytes(&mut self, b: &[u8]) {
        self.room(b.len());
        self.buf[self.fill..self.fill + b.len()].copy_from_slice(b);
        self.fill += b.len();
    }
    #[inline]
    fn push_record(&mut self, r: &FlowRecord) {
        self.room(row_bound(r));
        self.fill = format_row(&mut self.buf, self.fill, r);
    }
    /// The formatted bytes, handing the buffer over; [`RowBuf::refill`] gives it a new one.
    fn take(&mut self) -> Vec<u8> {
        let mut b = std::mem::take(&mut self.buf);
        b.truncate(self.fill);
        self.fill = 0;
        b
    }
    /// Continue in `buf` (a chunk buffer coming back with stale rows, or a new one): only
    /// what it lacks of the full length is zeroed, the rest is overwritten row by row.
    fn refill(&mut self, mut buf: Vec<u8>) {
        if buf.len() < CHUNK + ROW_FIXED_MAX {
            buf.resize(CHUNK + ROW_FIXED_MAX, 0);
        }
        self.buf = buf;
        self.fill = 0;
    }
}

impl TraceWriter {
    /// Create `path` (via `path.tmp`) and write the metadata and the column header. A
    /// `.gz` name is compressed on [`super::gz_members::default_threads`] threads.
    pub fn create(path: impl AsRef<Path>, header: &TraceHeader) -> Result<Self, FormatError> {
        Self::create_with_threads(path, header, super::gz_members::default_threads())
    }

    /// [`TraceWriter::create`] with `threads` gzip compression threads (at least 1). The
    /// file's bytes do not depend on it.
    pub fn create_with_threads(
        path: impl AsRef<Path>,
        header: &TraceHeader,
        threads: usize,
    ) -> Result<Self, FormatError> {
        let path = path.as_ref().to_path_buf();
        check_metadata(&path, header)?;
        let tmp = super::atomic::temp_path(&path);
        let file = super::atomic::create_temp(&tmp).map_err(|e| io_err(&path, e))?;
        let sink = if is_gz(&path) {
            Sink::Gz(super::gz_members::GzMembers::new(file, threads))
        } else {
            Sink::Plain(file)
        };
        let mut w = TraceWriter {
            sink: Some(sink),
            rows: RowBuf::new(),
            tmp,
            path,
            count: 0,
        };
        // Rows are always written in the current layout, whatever schema the header was read with.
        w.rows
            .push_bytes(format!("{MAGIC} schema={SCHEMA_VERSION}\n").as_bytes());
        let mut meta = header.meta.clone();
        meta.insert(END_MARKER_KEY.to_string(), "records".to_string());
        for (k, v) in &meta {
            w.rows.push_bytes(format!("# {k}={v}\n").as_bytes());
        }
        w.rows.push_bytes(COLUMNS.join(",").as_bytes());
        w.rows.push_bytes(b"\n");
        Ok(w)
    }

    /// Append one record.
    #[inline]
    pub fn write(&mut self, r: &FlowRecord) -> Result<(), FormatError> {
        self.rows.push_record(r);
        self.count += 1;
        if self.rows.fill >= CHUNK {
            self.flush_chunk()?;
        }
        Ok(())
    }

    /// Hand the collected rows to the sink.
    fn flush_chunk(&mut self) -> Result<(), FormatError> {
        let res = match self.sink.as_mut() {
            Some(Sink::Plain(f)) => {
                let r = f.write_all(&self.rows.buf[..self.rows.fill]);
                self.rows.fill = 0;
                r
            }
            Some(Sink::Gz(g)) => {
                let full = self.rows.take();
                g.send(full).map(|empty| self.rows.refill(empty))
            }
            None => Err(std::io::Error::other("trace writer used after finish")),
        };
        res.map_err(|e| io_err(&self.tmp, e))
    }

    /// Records written so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Flush, finish the gzip stream (its last member, marked last, holds the rows not yet
    /// sent, possibly none), and rename the temp file to the final name.
    pub fn finish(mut self) -> Result<PathBuf, FormatError> {
        let end = format!("{END_MARKER}{}\n", self.count);
        self.rows.push_bytes(end.as_bytes());
        let file = match self.sink.take() {
            Some(Sink::Plain(mut f)) => f.write_all(&self.rows.buf[..self.rows.fill]).map(|_| f),
            Some(Sink::Gz(g)) => g.finish(self.rows.take()),
            None => Err(std::io::Error::other("finished twice")),
        };
        let res = file
            .and_then(|f| f.sync_all())
            .map_err(|e| io_err(&self.tmp, e));
        let res = res.and_then(|_| {
            std::fs::rename(&self.tmp, &self.path).map_err(|e| io_err(&self.path, e))
        });
        if res.is_err() {
            // Nothing half-written stays behind (the sink is gone, so Drop would not do it).
            let _ = std::fs::remove_file(&self.tmp);
        }
        super::atomic::settled(&self.tmp);
        res.map(|_| self.path.clone())
    }
}

/// Metadata keys and values must fit a `# key=value` line.
fn check_metadata(path: &Path, header: &TraceHeader) -> Result<(), FormatError> {
    for (k, v) in &header.meta {
        if k.is_empty() || k.contains(['=', '\n', '\r']) || k.trim() != k {
            return Err(FormatError::file(
                path,
                format!("metadata key `{k}`: keys must be non-empty, without `=`, newlines or surrounding blanks"),
            ));
        }
        if v.contains(['\n', '\r']) {
            return Err(FormatError::file(
                path,
                format!("metadata `{k}`: values must not contain newlines"),
            ));
        }
    }
    Ok(())
}

impl Drop for TraceWriter {
    fn drop(&mut self) {
        if self.sink.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
            super::atomic::settled(&self.tmp);
        }
    }
}

/// The longest row without its deps: every column at [`FIELD_MAX`] (and the newline).
const ROW_FIXED_MAX: usize = COLUMNS.len() * FIELD_MAX + 1;

/// The most bytes `r`'s row can take (each dep is at most 20 digits and a `;`).
#[inline]
fn row_bound(r: &FlowRecord) -> usize {
    ROW_FIXED_MAX + r.deps.len() * FIELD_MAX
}

/// `v` (if any) and the comma after it.
#[inline(always)]
fn put_opt(b: &mut [u8], at: usize, v: Option<u64>) -> usize {
    let at = v.map_or(at, |v| put_u64(b, at, v));
    b[at] = b',';
    at + 1
}

/// Write `r`'s row (with its newline) at `b[at..]`, which must have [`row_bound`] bytes;
/// the position after it.
fn format_row(b: &mut [u8], at: usize, r: &FlowRecord) -> usize {
    fn num(b: &mut [u8], p: &mut usize, v: u64) {
        *p = put_u64(b, *p, v);
        b[*p] = b',';
        *p += 1;
    }
    let mut p = at;
    num(b, &mut p, r.id.0);
    num(b, &mut p, r.src.0 as u64);
    num(b, &mut p, r.dst.0 as u64);
    num(b, &mut p, r.bytes.0);
    for (i, d) in r.deps.iter().enumerate() {
        if i > 0 {
            b[p] = b';';
            p += 1;
        }
        p = put_u64(b, p, d.0);
    }
    b[p] = b',';
    p += 1;
    num(b, &mut p, r.gap.0);
    num(b, &mut p, r.dur.0);
    p = put_word(b, p, r.mode.as_str());
    b[p] = b',';
    p = put_word(b, p + 1, r.class.as_str());
    b[p] = b',';
    p += 1;
    num(b, &mut p, r.iteration as u64);
    p = put_opt(b, p, r.collective);
    p = put_opt(b, p, r.step.map(u64::from));
    p = put_opt(b, p, r.microbatch.map(u64::from));
    p = put_opt(b, p, r.layer.map(u64::from));
    p = put_opt(b, p, r.stage.map(u64::from));
    p = put_opt(b, p, r.group_size.map(u64::from));
    match &r.agg {
        Some(a) => {
            num(b, &mut p, a.id);
            num(b, &mut p, a.switch.0 as u64);
            num(b, &mut p, a.fanin as u64);
            p = put_word(b, p, a.dir.as_str());
        }
        None => {
            b[p..p + 3].copy_from_slice(b",,,");
            p += 3;
        }
    }
    b[p] = b',';
    p += 1;
    if r.channel != 0 {
        p = put_u64(b, p, r.channel as u64);
    }
    b[p] = b',';
    p += 1;
    if let Some(a) = &r.agg {
        p = put_word(b, p, a.group.as_str());
    }
    b[p] = b'\n';
    p + 1
}

/// Format one record as a CSV row (with the trailing newline), appended to `out`.
pub fn format_record(out: &mut Vec<u8>, r: &FlowRecord) {
    let at = out.len();
    out.resize(at + row_bound(r), 0);
    let end = format_row(out, at, r);
    out.truncate(end);
}

/// Write a whole trace (atomically, gzip by name).
pub fn write(
    path: impl AsRef<Path>,
    header: &TraceHeader,
    records: &[FlowRecord],
) -> Result<(), FormatError> {
    let mut w = TraceWriter::create(path, header)?;
    for r in records {
        w.write(r)?;
    }
    w.finish()?;
    Ok(())
}

/// Read and validate a whole trace. Use [`TraceReader`] for large files.
pub fn read(path: impl AsRef<Path>) -> Result<Trace, FormatError> {
    let mut rd = TraceReader::open(path)?;
    let mut records = Vec::new();
    for r in rd.by_ref() {
        records.push(r?);
    }
    Ok(Trace {
        header: rd.header().clone(),
        records,
    })
}

/// Check that a record's fields agree with its mode; on error the column index and message.
pub fn check_consistency(r: &FlowRecord) -> Result<(), (usize, String)> {
    match r.mode {
        Mode::Compute => {
            if r.src != r.dst {
                return Err((
                    2,
                    format!(
                        "compute record {}: src {} and dst {} must be the same GPU",
                        r.id, r.src, r.dst
                    ),
                ));
            }
            if r.bytes.0 != 0 {
                return Err((
                    3,
                    format!(
                        "compute record {} must carry 0 bytes, not {}",
                        r.id, r.bytes.0
                    ),
                ));
            }
            if r.class != Class::Compute {
                return Err((
                    8,
                    format!(
                        "compute record {} must have class `compute`, not `{}`",
                        r.id, r.class
                    ),
                ));
            }
        }
        Mode::Net | Mode::Ina | Mode::NvLink => {
            if r.class == Class::Compute {
                return Err((
                    8,
                    format!(
                        "{} record {} needs a traffic class (tp, pp, dp, emb, cp, ep), not `compute`",
                        r.mode, r.id
                    ),
                ));
            }
        }
    }
    match r.mode {
        Mode::Net | Mode::Ina => {
            if r.dur.0 != 0 {
                return Err((
                    6,
                    format!(
                        "{} record {} must have dur_ns 0 (its duration is simulated), not {}",
                        r.mode, r.id, r.dur.0
                    ),
                ));
            }
            if r.src == r.dst {
                return Err((
                    2,
                    format!(
                        "{} record {} sends from node {} to itself",
                        r.mode, r.id, r.src
                    ),
                ));
            }
        }
        _ => {}
    }
    match (r.mode, r.agg) {
        (Mode::Ina, None) => {
            return Err((
                16,
                format!(
                    "ina record {} needs agg_id, agg_switch, agg_fanin and agg_dir",
                    r.id
                ),
            ))
        }
        (Mode::Ina, Some(a)) => {
            if a.fanin == 0 {
                return Err((
                    18,
                    format!("ina record {}: agg_fanin must be at least 1", r.id),
                ));
            }
            match a.dir {
                AggDir::Up if r.dst != a.switch => {
                    return Err((
                        17,
                        format!(
                            "ina up edge {} must end at its aggregation switch {} (dst is {})",
                            r.id, a.switch, r.dst
                        ),
                    ))
                }
                AggDir::Down if r.src != a.switch => {
                    return Err((
                        17,
                        format!(
                            "ina down edge {} must start at its aggregation switch {} (src is {})",
                            r.id, a.switch, r.src
                        ),
                    ))
                }
                _ => {}
            }
        }
        (m, Some(_)) => {
            return Err((
                16,
                format!("{m} record {} must not carry aggregation fields", r.id),
            ))
        }
        _ => {}
    }
    check_channel(r)
}

/// Only `net` records travel on NCCL channels.
fn check_channel(r: &FlowRecord) -> Result<(), (usize, String)> {
    if r.channel != 0 && r.mode != Mode::Net {
        return Err((
            20,
            format!(
                "{} record {} has channel {}: only net records travel on NCCL channels",
                r.mode, r.id, r.channel
            ),
        ));
    }
    Ok(())
}

/// Read a trace from an in-memory string (tests, fuzzing).
pub fn read_str(text: &str, name: &str) -> Result<Trace, FormatError> {
    let input: Box<dyn BufRead + Send> = Box::new(std::io::Cursor::new(text.as_bytes().to_vec()));
    let mut rd = TraceReader::from_reader(input, name.to_string())?;
    let mut records = Vec::new();
    for r in rd.by_ref() {
        records.push(r?);
    }
    Ok(Trace {
        header: rd.header().clone(),
        records,
    })
}
