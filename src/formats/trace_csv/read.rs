//! The trace reader. The header is read line by line; the body in blocks of whole lines
//! ([`super::blocks`]), each parsed by [`super::row::RowParser`] — on worker threads when reading a
//! file — and then admitted in file order by [`TraceReader`], where the checks that need
//! the lines before run: ids unique, every dep on an earlier line, the caller's
//! [`RecordCheck`]. Whatever thread parsed a block, the records and the first error are
//! those of reading the file line by line.

use super::blocks::{Body, Parsed, ParsedEnd, LINE_MAX};
use super::row::{LineCtx, ParsedRow, RowError};
use whole::{check_meta_value, check_world};

mod whole;
use super::{columns_of, io_err, is_gz, RecordCheck, TraceHeader, COLUMNS, MAGIC};
use super::{OLDEST_SCHEMA, SCHEMA_VERSION};
use crate::formats::gz_members::MemberReader;
use crate::formats::FormatError;
use crate::record::{AggDir, FlowRecord};
use crate::units::FlowId;
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// How much text past a row error in gzip input [`TraceReader`] inflates to find damage:
/// the writer's gzip members hold 1 MiB of rows each, so the member holding the row ends
/// (and its checksum is checked) within it.
const DAMAGE_PROBE: usize = 4 << 20;

/// Set of seen ids: a bitmap for the dense ids generators produce, a hash set for the
/// rest. The bitmap only grows to cover ids up to twice the number of records seen (plus a
/// small floor), so its size follows the input's length: one crafted line with a huge id
/// lands in the hash set instead of allocating gigabytes.
#[derive(Default)]
struct IdSet {
    bits: Vec<u64>,
    sparse: HashSet<u64>,
    len: u64,
}

impl IdSet {
    /// Ids below this always fit the bitmap (8 KiB).
    const FLOOR: u64 = 1 << 16;
    fn dense_bound(&self) -> u64 {
        Self::FLOOR.max(2 * self.len)
    }
    fn bit(&self, id: u64) -> bool {
        let w = (id / 64) as usize;
        w < self.bits.len() && self.bits[w] & (1 << (id % 64)) != 0
    }
    fn contains(&self, id: u64) -> bool {
        self.bit(id) || self.sparse.contains(&id)
    }
    /// Insert; false when already present.
    fn insert(&mut self, id: u64) -> bool {
        if self.contains(id) {
            return false;
        }
        if id < self.dense_bound() {
            let w = (id / 64) as usize;
            if w >= self.bits.len() {
                let want = (w + 1).max(self.bits.len() * 2);
                let cap = (self.dense_bound() / 64 + 1) as usize;
                self.bits.resize(want.min(cap).max(w + 1), 0);
            }
            self.bits[w] |= 1 << (id % 64);
        } else {
            self.sparse.insert(id);
        }
        self.len += 1;
        true
    }
}

/// Streaming, validating reader. Iterate it for records (each an `Err` at the first bad line,
/// after which iteration stops).
pub struct TraceReader<'t> {
    header: TraceHeader,
    ctx: Arc<LineCtx>,
    /// Where the body's blocks come from (this thread, or reader and parser threads).
    body: Body,
    /// The block being admitted: its text (for error columns), its rows not yet
    /// returned, and how it ends.
    text: Vec<u8>,
    rows: std::vec::IntoIter<ParsedRow>,
    end: Option<ParsedEnd>,
    /// The line number of the block's first line, and the lines it holds.
    base: u64,
    lines: u64,
    seen: IdSet,
    check: Option<&'t dyn RecordCheck>,
    done: bool,
    /// Bytes of the file read so far, and its size (a reader of a file).
    file_read: Option<(Arc<AtomicU64>, u64)>,
    /// Records admitted so far, and the end line once read: its count and line number.
    admitted: u64,
    marker: Option<(u64, u64)>,
    /// Whether the header promises the end line.
    promised: bool,
    /// With [`TraceReader::checking_aggregations`]: per aggregation edge set (agg id,
    /// switch, up), the fan-in its records declare, how many there are, and the first
    /// one's line; checked at the end of the file.
    fanins: Option<Fanins>,
}

/// Per aggregation edge set (agg id, switch, up): declared fan-in, edges seen, first line.
type Fanins = std::collections::HashMap<(u64, u32, bool), (u32, u32, u64)>;

/// A file that counts the bytes read from it (for progress).
struct Counted {
    inner: File,
    n: Arc<AtomicU64>,
}

impl Read for Counted {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let k = self.inner.read(buf)?;
        self.n.fetch_add(k as u64, Ordering::Relaxed);
        Ok(k)
    }
}

impl<'t> TraceReader<'t> {
    /// Open a trace (gzip detected from the `.gz` name or the gzip magic bytes) and read
    /// its header. The body is decompressed on one thread and parsed on others (as many
    /// as the machine has cores, up to 4); the records come back in file order.
    pub fn open(path: impl AsRef<Path>) -> Result<TraceReader<'static>, FormatError> {
        let p = path.as_ref();
        crate::formats::atomic::check_complete(p)?;
        let file = File::open(p).map_err(|e| io_err(p, e))?;
        let size = file.metadata().map_err(|e| io_err(p, e))?.len();
        let counter = Arc::new(AtomicU64::new(0));
        let counted = Counted {
            inner: file,
            n: counter.clone(),
        };
        let mut file = BufReader::with_capacity(1 << 16, counted);
        let magic = file.fill_buf().map_err(|e| io_err(p, e))?;
        let gz = is_gz(p) || magic.starts_with(&[0x1f, 0x8b]);
        let input: Box<dyn BufRead + Send> = if gz {
            Box::new(BufReader::with_capacity(1 << 18, MemberReader::new(file)))
        } else {
            Box::new(file)
        };
        let workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
        let mut rd = Self::start(input, p.to_path_buf(), gz, Some(workers))?;
        rd.file_read = Some((counter, size));
        Ok(rd)
    }

    /// For a reader of a file: the bytes of the file read so far (compressed, for a
    /// `.gz`; read ahead of the records returned by up to a few blocks) and its size.
    pub fn file_progress(&self) -> Option<(u64, u64)> {
        let (n, size) = self.file_read.as_ref()?;
        Some((n.load(Ordering::Relaxed), *size))
    }

    /// Read from any buffered stream, on this thread; `name` is used in error messages.
    pub fn from_reader(
        input: Box<dyn BufRead + Send>,
        name: String,
    ) -> Result<TraceReader<'static>, FormatError> {
        Self::start(input, PathBuf::from(name), false, None)
    }

    /// Read the header of `input` (decompressed gzip when `gz`), then the body on this
    /// thread or, with `workers`, on a reader thread and that many parser threads.
    fn start(
        mut input: Box<dyn BufRead + Send>,
        path: PathBuf,
        gz: bool,
        workers: Option<usize>,
    ) -> Result<TraceReader<'static>, FormatError> {
        let mut ctx = LineCtx {
            path,
            schema: SCHEMA_VERSION,
            gz,
        };
        let (mut header, header_lines) = read_header(&mut *input, &mut ctx)?;
        // the writer's promise, not the trace's metadata: a trace read and written again
        // keeps its header as it was
        let promised = header.meta.remove(super::END_MARKER_KEY).is_some();
        let ctx = Arc::new(ctx);
        let first_line = header_lines + 1;
        let body = match workers {
            Some(n) => Body::threads(input, ctx.clone(), n).map_err(|e| {
                io_err(
                    &ctx.path,
                    std::io::Error::new(e.kind(), format!("could not start a reader thread: {e}")),
                )
            })?,
            None => Body::inline(input, ctx.clone()),
        };
        Ok(TraceReader {
            header,
            ctx,
            body,
            text: Vec::new(),
            rows: Vec::new().into_iter(),
            end: None,
            base: first_line,
            lines: 0,
            seen: IdSet::default(),
            check: None,
            done: false,
            file_read: None,
            admitted: 0,
            marker: None,
            promised,
            fanins: None,
        })
    }

    /// Also run `check` on every record (after the format's own checks).
    pub fn with_check<'u>(self, check: &'u dyn RecordCheck) -> TraceReader<'u> {
        TraceReader {
            header: self.header,
            ctx: self.ctx,
            body: self.body,
            text: self.text,
            rows: self.rows,
            end: self.end,
            base: self.base,
            lines: self.lines,
            seen: self.seen,
            check: Some(check),
            done: self.done,
            file_read: self.file_read,
            admitted: self.admitted,
            marker: self.marker,
            promised: self.promised,
            fanins: self.fanins,
        }
    }

    /// Also check the aggregations as a whole (what a simulator relies on, beyond each
    /// record's own fields): every aggregation has at least two members, and each switch
    /// of it has as many edges in each direction as their `agg_fanin` says — checked when
    /// the file ends. The replayer and the ns-3 emitter read traces this way.
    pub fn checking_aggregations(mut self) -> Self {
        self.fanins = Some(Default::default());
        self
    }

    /// The metadata read from the file.
    pub fn header(&self) -> &TraceHeader {
        &self.header
    }

    /// The checks that need the lines before `row`: each dep seen, the caller's check,
    /// the id new.
    fn admit(&mut self, row: ParsedRow) -> Result<FlowRecord, FormatError> {
        let r = row.rec;
        let id = r.id.0;
        if let Some(e) = self.unseen_dep(id, &r.deps, row.line, row.at) {
            return Err(e);
        }
        if let Some(check) = self.check {
            if let Err((i, msg)) = check.check(&r) {
                let column = field_column(row_text(&self.text, row.at), i);
                return Err(self.row_error(row.line, i, column, msg));
            }
        }
        if !self.seen.insert(id) {
            return Err(self.row_error(row.line, 0, 1, format!("duplicate record id {id}")));
        }
        if let (Some(a), Some(fanins)) = (r.agg, self.fanins.as_mut()) {
            if r.group_size.is_some_and(|g| g < 2) {
                let msg = format!(
                    "ina record {id}: an aggregation needs at least 2 members, group_size is {}",
                    r.group_size.unwrap_or(0)
                );
                let column = field_column(row_text(&self.text, row.at), 15);
                return Err(self.row_error(row.line, 15, column, msg));
            }
            let line = self.base + row.line as u64;
            let e = fanins
                .entry((a.id, a.switch.0, a.dir == AggDir::Up))
                .or_insert((a.fanin, 0, line));
            e.1 = e.1.saturating_add(1);
        }
        self.admitted += 1;
        Ok(r)
    }

    /// The error of the first of `deps` (of record `id`, on the block's line `line`
    /// starting at byte `at`) not seen on an earlier line, if any.
    fn unseen_dep(&self, id: u64, deps: &[FlowId], line: u32, at: u32) -> Option<FormatError> {
        let k = deps.iter().position(|d| !self.seen.contains(d.0))?;
        Some(self.row_error(
            line,
            4,
            dep_column(row_text(&self.text, at), k),
            format!("dep {} of record {id} does not appear on an earlier line (deps must exist and precede their dependant)", deps[k].0),
        ))
    }

    /// An error in field `i` of [`COLUMNS`] at `column` of the block's line `line`.
    fn row_error(&self, line: u32, i: usize, column: usize, msg: String) -> FormatError {
        let e = RowError {
            line,
            column: Some(column),
            field: COLUMNS.get(i).copied().unwrap_or("row"),
            msg,
            at: 0,
            before: None,
        };
        in_file(&self.ctx.path, self.base, e)
    }

    /// The error a block ends with, numbered from the block's first line.
    fn end_error(&self, end: ParsedEnd) -> Option<FormatError> {
        let path = &self.ctx.path;
        match end {
            ParsedEnd::More | ParsedEnd::Eof => None,
            ParsedEnd::Row(e) => {
                let unseen = e
                    .before
                    .as_ref()
                    .and_then(|b| self.unseen_dep(b.0, &b.1, e.line, e.at));
                Some(unseen.unwrap_or_else(|| in_file(path, self.base, e)))
            }
            ParsedEnd::Read(e) => Some(self.ctx.read_error(self.base + self.lines - 1, e)),
            ParsedEnd::LineTooLong => Some(FormatError::syntax(
                path,
                self.base + self.lines,
                "row",
                format!("line longer than {} MiB: not a trace row", LINE_MAX >> 20),
            )),
            ParsedEnd::Stopped(msg) => Some(FormatError::syntax(
                path,
                self.base + self.lines,
                "row",
                format!("internal error: {msg}"),
            )),
        }
    }

    /// A row error in gzip input may be damage to the compressed data that inflated to
    /// text (a flipped bit often does) and whose checksum fails only at the member's end:
    /// the text up to [`DAMAGE_PROBE`] past the block is inflated, and if it fails, the
    /// error names the damage at the row's line instead. Otherwise the row error stands.
    fn damage_behind(&mut self, row: FormatError) -> FormatError {
        let Some(line) = row.line() else { return row };
        self.body.recycle(std::mem::take(&mut self.text));
        let mut seen = 0;
        while seen < DAMAGE_PROBE {
            let p = self.body.next_block();
            seen += p.text.len();
            match p.end {
                ParsedEnd::More | ParsedEnd::Row(_) => self.body.recycle(p.text),
                ParsedEnd::Read(e) => {
                    if !self.ctx.damaged_gzip(&e) {
                        break; // the OS's error, not the data's
                    }
                    let why = match &row {
                        FormatError::Syntax { field, msg, .. } => format!("{field}: {msg}"),
                        other => other.to_string(),
                    };
                    return FormatError::syntax(
                        &self.ctx.path,
                        line,
                        "gzip",
                        format!("the compressed data is damaged or truncated (its checksum or stream fails further on), so this line is not what was written: {why}"),
                    );
                }
                _ => break,
            }
        }
        row
    }

    /// Move on to the next block (`None` at the end of the file, `Some(Err)` at an error).
    fn next_block(&mut self) -> Option<Result<(), FormatError>> {
        match self.end.take() {
            None => {}
            Some(ParsedEnd::More) => {
                self.base += self.lines;
                self.body.recycle(std::mem::take(&mut self.text));
            }
            Some(ParsedEnd::Eof) => return self.check_end().map(Err),
            Some(end) => {
                let row = matches!(end, ParsedEnd::Row(_));
                let e = self.end_error(end)?;
                return Some(Err(if row && self.ctx.gz {
                    self.damage_behind(e)
                } else {
                    e
                }));
            }
        }
        let Parsed {
            text,
            rows,
            lines,
            end,
            marker,
            ..
        } = self.body.next_block();
        if let (Some((_, at)), Some(r)) = (self.marker, rows.first()) {
            let line = self.base + r.line as u64;
            return Some(Err(FormatError::at(
                &self.ctx.path,
                line,
                1,
                "end",
                format!("a record after the end line (line {at})"),
            )));
        }
        if let Some((n, l)) = marker {
            self.marker = Some((n, self.base + l as u64));
        }
        self.text = text;
        self.rows = rows.into_iter();
        self.lines = lines;
        self.end = Some(end);
        Some(Ok(()))
    }
}

/// An error of a block's line (numbered within it) as the file's error, the block's first
/// line being line `base`.
fn in_file(path: &Path, base: u64, e: RowError) -> FormatError {
    let line = base + e.line as u64;
    match e.column {
        Some(c) => FormatError::at(path, line, c as u64, e.field, e.msg),
        None => FormatError::syntax(path, line, e.field, e.msg),
    }
}

impl Iterator for TraceReader<'_> {
    type Item = Result<FlowRecord, FormatError>;
    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            if let Some(row) = self.rows.next() {
                let r = self.admit(row);
                self.done = r.is_err();
                return Some(r);
            }
            match self.next_block() {
                Some(Ok(())) => {}
                Some(Err(e)) => {
                    self.done = true;
                    return Some(Err(e));
                }
                None => self.done = true,
            }
        }
        None
    }
}

/// The line of `text` starting at byte `at`, without its line ending (parsed, so UTF-8).
fn row_text(text: &[u8], at: u32) -> &str {
    let rest = text.get(at as usize..).unwrap_or_default();
    let end = rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len());
    std::str::from_utf8(&rest[..end])
        .unwrap_or_default()
        .trim_end_matches('\r')
}

/// The 1-based column field `i` of `line` starts at.
fn field_column(line: &str, i: usize) -> usize {
    1 + line.split(',').take(i).map(|f| f.len() + 1).sum::<usize>()
}

/// The 1-based column the `k`-th dep of `line` starts at.
fn dep_column(line: &str, k: usize) -> usize {
    let deps = line.split(',').nth(4).unwrap_or_default();
    field_column(line, 4) + deps.split(';').take(k).map(|d| d.len() + 1).sum::<usize>()
}

/// Read the header lines (magic, metadata, column row): the header and the number of
/// lines it took. Sets `ctx.schema`.
/// The header's lines, one at a time: bounded as a whole (the body's blocks are bounded
/// by LINE_MAX), so a line without a break cannot grow a string to the file's size.
struct HeaderLines<'a> {
    input: &'a mut dyn BufRead,
    /// Bytes read so far.
    used: usize,
    /// Number of the line in `buf` (1-based; 0 before the first).
    line_no: u64,
    /// The last line read, without its line break.
    buf: String,
}

impl HeaderLines<'_> {
    /// Reads the next line into `buf`; false at the end of the input.
    fn next(&mut self, ctx: &LineCtx) -> Result<bool, FormatError> {
        self.buf.clear();
        let limit = (LINE_MAX - self.used) as u64 + 1;
        let n = Read::take(&mut *self.input, limit)
            .read_line(&mut self.buf)
            .map_err(|e| ctx.read_error(self.line_no, e))?;
        if n == 0 {
            return Ok(false);
        }
        self.used += n;
        if self.used > LINE_MAX {
            return Err(FormatError::syntax(
                &ctx.path,
                self.line_no + 1,
                "header",
                format!("header longer than {} MiB: not a trace", LINE_MAX >> 20),
            ));
        }
        self.line_no += 1;
        while self.buf.ends_with(['\n', '\r']) {
            self.buf.pop();
        }
        Ok(true)
    }
}

/// The trace header: the magic line with its schema, the `# key=value` metadata lines,
/// the column header row; returns the header and the number of lines it took.
fn read_header(
    input: &mut dyn BufRead,
    ctx: &mut LineCtx,
) -> Result<(TraceHeader, u64), FormatError> {
    let mut header = TraceHeader::new();
    let mut key_lines: HashMap<String, u64> = HashMap::new();
    let mut lines = HeaderLines {
        input,
        used: 0,
        line_no: 0,
        buf: String::new(),
    };
    if !lines.next(ctx)? {
        return Err(FormatError::at(
            &ctx.path,
            1,
            1,
            "header",
            format!("empty file: expected `{MAGIC} schema={SCHEMA_VERSION}`"),
        ));
    }
    header.schema = schema_of(&ctx.path, &lines.buf)?;
    loop {
        if !lines.next(ctx)? {
            return Err(FormatError::at(
                &ctx.path,
                lines.line_no,
                1,
                "header",
                "missing column header row".to_string(),
            ));
        }
        let (line_no, buf) = (lines.line_no, lines.buf.as_str());
        if let Some(kv) = buf.strip_prefix('#') {
            metadata_line(&ctx.path, line_no, buf, kv, &mut header, &mut key_lines)?;
            continue;
        }
        column_row(&ctx.path, line_no, buf, &header, &key_lines)?;
        ctx.schema = header.schema;
        return Ok((header, line_no));
    }
}

/// The schema of the magic line `first` (line 1).
fn schema_of(path: &Path, first: &str) -> Result<u32, FormatError> {
    let err = |column: usize, msg: String| FormatError::at(path, 1, column as u64, "header", msg);
    let first = first.trim();
    let Some(rest) = first.strip_prefix(MAGIC) else {
        return Err(err(
            1,
            format!(
                "not an ina3d trace: expected `{MAGIC} schema={SCHEMA_VERSION}`, found `{}`",
                first.chars().take(60).collect::<String>()
            ),
        ));
    };
    let v = rest
        .trim()
        .strip_prefix("schema=")
        .and_then(|v| v.trim().parse::<u32>().ok());
    match v {
        Some(v) if (OLDEST_SCHEMA..=SCHEMA_VERSION).contains(&v) => Ok(v),
        Some(v) => Err(err(
            MAGIC.len() + 2,
            format!(
                "schema {v} is not supported (this build reads schemas {OLDEST_SCHEMA} to {SCHEMA_VERSION}; a newer ina3d wrote this file)"
            ),
        )),
        None => Err(err(
            MAGIC.len() + 2,
            "expected `schema=<number>` after the magic".into(),
        )),
    }
}

/// One `# key=value` metadata line (`buf`, `kv` after its `#`), checked and added to
/// `header`; a key given twice is refused, naming the line of the first.
fn metadata_line(
    path: &Path,
    line_no: u64,
    buf: &str,
    kv: &str,
    header: &mut TraceHeader,
    key_lines: &mut HashMap<String, u64>,
) -> Result<(), FormatError> {
    let err =
        |column: usize, msg: String| FormatError::at(path, line_no, column as u64, "metadata", msg);
    let kv = kv.trim_start();
    if kv.is_empty() {
        return Ok(());
    }
    let Some((k, v)) = kv.split_once('=') else {
        return Err(err(3, "metadata lines must be `# key=value`".into()));
    };
    let key = k.trim();
    if let Some(&first) = key_lines.get(key) {
        return Err(err(
            3,
            format!("key `{key}` given twice (first on line {first}); which one holds?"),
        ));
    }
    check_meta_value(key, v.trim())
        .map_err(|msg| err(buf.len() - v.len() + 1, format!("{key}: {msg}")))?;
    key_lines.insert(key.to_string(), line_no);
    header.meta.insert(key.to_string(), v.to_string());
    Ok(())
}

/// The column header row `buf`: the columns of the header's schema; then the world the
/// metadata gives is checked.
fn column_row(
    path: &Path,
    line_no: u64,
    buf: &str,
    header: &TraceHeader,
    key_lines: &HashMap<String, u64>,
) -> Result<(), FormatError> {
    let cols: Vec<&str> = buf.split(',').map(str::trim).collect();
    let want = columns_of(header.schema);
    if cols != want {
        return Err(FormatError::at(
            path,
            line_no,
            1,
            "header",
            format!(
                "column header of schema {} must be `{}`",
                header.schema,
                want.join(",")
            ),
        ));
    }
    check_world(header, key_lines)
        .map_err(|(line, msg)| FormatError::at(path, line, 3, "metadata", msg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_of_fields_and_deps_count_from_one() {
        let line = "7,1,2,30,3;45;6,0,0,net,dp";
        assert_eq!(field_column(line, 0), 1);
        assert_eq!(field_column(line, 1), 3);
        assert_eq!(field_column(line, 4), 10);
        assert_eq!(dep_column(line, 0), 10);
        assert_eq!(dep_column(line, 1), 12);
        assert_eq!(dep_column(line, 2), 15);
    }

    #[test]
    fn a_huge_record_id_is_remembered_without_a_huge_bitmap() {
        let mut s = IdSet::default();
        assert!(s.insert(1 << 33));
        assert!(s.bits.len() * 8 <= 16 << 10, "{} words", s.bits.len());
        assert!(!s.insert(1 << 33), "a duplicate is still caught");
        for id in 0..100_000 {
            assert!(s.insert(id));
        }
        assert!(s.contains(1 << 33) && s.contains(99_999) && !s.contains(100_000));
        assert!(s.bits.len() * 64 <= 4 * 100_000 + (1 << 16));
    }

    #[test]
    fn ids_first_seen_sparse_stay_found_once_the_bitmap_grows_over_them() {
        let mut s = IdSet::default();
        assert!(s.insert(200_000));
        for id in 0..150_000 {
            s.insert(id);
        }
        assert!(!s.insert(200_000));
    }
}
