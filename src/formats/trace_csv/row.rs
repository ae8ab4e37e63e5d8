//! One data line of a trace's body: what every parser of a file's rows shares
//! ([`LineCtx`]), the parse of one line with every check that needs only the line itself
//! ([`RowParser`]), and what it gives ([`ParsedRow`], [`RowError`]). The blocks
//! ([`super::blocks`]) run it on worker threads, the reader ([`super::read`]) admits its
//! rows.

use super::{check_consistency, columns_of, io_err, COLUMNS};
use crate::formats::FormatError;
use crate::record::{AggDir, AggGroup, AggTag, FlowRecord};
use crate::units::{Bytes, FlowId, Nanos, NodeId};
use std::path::PathBuf;

/// What every parser of one file's rows shares: where errors point and the layout.
#[derive(Debug)]
pub(super) struct LineCtx {
    /// The file (or the name given for a stream), for error messages.
    pub path: PathBuf,
    /// The header's schema: which columns a row has.
    pub schema: u32,
    /// The input is decompressed gzip (read errors are then damaged or truncated data).
    pub gz: bool,
}

impl LineCtx {
    /// The error a failed read after line `after` (the last whole line) becomes: damaged
    /// or truncated gzip data and text that is not UTF-8 name the line reached; other
    /// errors are the OS's.
    pub(super) fn read_error(&self, after: u64, e: std::io::Error) -> FormatError {
        use std::io::ErrorKind::InvalidData;
        let line = after + 1;
        match e.kind() {
            _ if self.damaged_gzip(&e) => FormatError::syntax(
                &self.path,
                line,
                "gzip",
                format!("after line {after}: {e} (the compressed data is damaged or truncated)"),
            ),
            InvalidData => FormatError::syntax(&self.path, line, "text", format!("{e}")),
            _ => io_err(&self.path, e),
        }
    }

    /// A read error that is damaged or truncated gzip data (not the OS's).
    pub(super) fn damaged_gzip(&self, e: &std::io::Error) -> bool {
        use std::io::ErrorKind::{InvalidData, InvalidInput, UnexpectedEof};
        self.gz && matches!(e.kind(), InvalidData | InvalidInput | UnexpectedEof)
    }
}

/// The largest `bytes`, `gap_ns` or `dur_ns` a record may have: 2^50 (a pebibyte; 13 days
/// in nanoseconds), far above any real collective or compute step, and far enough below
/// 2^64 that the times the back-ends add up from many records stay exact (the replayer
/// also refuses any event past its horizon, `replay::TIME_HORIZON_NS`).
pub const MAX_RECORD_VALUE: u64 = 1 << 50;

/// A parse error in a block: its line counted from the block's first (0).
#[derive(Debug)]
pub(super) struct RowError {
    pub line: u32,
    pub column: Option<usize>,
    pub field: &'static str,
    pub msg: String,
    /// The byte the line starts at in the block.
    pub at: u32,
    /// For an error after the deps field or in it: the record's id and the deps read
    /// before the error (an unseen one among them is the line's first error).
    pub before: Option<Box<(u64, Vec<crate::units::FlowId>)>>,
}

/// One parsed data row: the record, its line (from the block's first, 0) and the byte
/// its text starts at in the block (to name columns in errors found on admission).
#[derive(Debug)]
pub(super) struct ParsedRow {
    pub rec: FlowRecord,
    pub line: u32,
    pub at: u32,
}

/// The fields of one data line with the 1-based column each starts at.
type Row<'l> = [(&'l str, usize); 22];

/// Parses the data lines of one block: every check that needs only the line itself.
pub(super) struct RowParser<'a> {
    pub ctx: &'a LineCtx,
    /// The line's index in its block (errors are numbered from the block's first line).
    pub line: u32,
}

impl RowParser<'_> {
    /// An error at `column` in the field named `field`.
    fn err_in(&self, field: &'static str, column: usize, msg: impl Into<String>) -> RowError {
        RowError {
            line: self.line,
            column: Some(column),
            field,
            msg: msg.into(),
            at: 0,
            before: None,
        }
    }

    /// An error in field `i` of [`COLUMNS`], starting at `column`.
    fn err(&self, i: usize, column: usize, msg: impl Into<String>) -> RowError {
        self.err_in(COLUMNS.get(i).copied().unwrap_or("row"), column, msg)
    }

    /// One data line: the fields, each parsed and typed, then the record-level checks.
    /// An error after the deps field (or within it) carries the record's id and the deps
    /// read before it: read line by line, each dep is checked to be seen as it is read, so
    /// an unseen one is the line's first error ([`TraceReader`] checks them on admission).
    pub(super) fn parse(&self, line: &str) -> Result<FlowRecord, RowError> {
        let f = self.split_row(line)?;
        let id = self.num(&f, 0)?;
        let (src, dst, bytes) = (self.num32(&f, 1)?, self.num32(&f, 2)?, self.bounded(&f, 3)?);
        let mut deps = Vec::new();
        let rec = self
            .deps(&f, id, &mut deps)
            .and_then(|()| self.rest(&f, id, (src, dst, bytes)));
        match rec {
            Ok(mut rec) => {
                rec.deps = deps;
                Ok(rec)
            }
            Err(mut e) => {
                e.before = Some(Box::new((id, deps)));
                Err(e)
            }
        }
    }

    /// The fields after the deps (deps left empty), then the record-level checks.
    fn rest(
        &self,
        f: &Row<'_>,
        id: u64,
        (src, dst, bytes): (u32, u32, u64),
    ) -> Result<FlowRecord, RowError> {
        let rec = FlowRecord {
            id: FlowId(id),
            src: NodeId(src),
            dst: NodeId(dst),
            bytes: Bytes(bytes),
            deps: Vec::new(),
            gap: Nanos(self.bounded(f, 5)?),
            dur: Nanos(self.bounded(f, 6)?),
            mode: f[7].0.parse().map_err(|e: String| self.err(7, f[7].1, e))?,
            class: f[8].0.parse().map_err(|e: String| self.err(8, f[8].1, e))?,
            iteration: self.num32(f, 9)?,
            collective: self.opt(f, 10)?,
            step: self.opt32(f, 11)?,
            microbatch: self.opt32(f, 12)?,
            layer: self.opt32(f, 13)?,
            stage: self.opt32(f, 14)?,
            group_size: self.opt32(f, 15)?,
            agg: self.agg(f)?,
            channel: self.opt32(f, 20)?.unwrap_or(0),
        };
        if let Err((i, msg)) = check_consistency(&rec) {
            return Err(self.err(i, f[i].1, msg));
        }
        Ok(rec)
    }

    /// The line's fields with the column each starts at: exactly the schema's columns
    /// (an older schema's row leaves the columns it lacks empty: `channel`, `agg_group`).
    fn split_row<'l>(&self, line: &'l str) -> Result<Row<'l>, RowError> {
        let want = columns_of(self.ctx.schema);
        let mut fields: Row<'l> = [("", 0); 22];
        let mut n = 0;
        let mut start = 0;
        // a byte loop: fields are a few bytes, too short for `str::split`'s searcher
        for (i, c) in line.bytes().chain([b',']).enumerate() {
            if c != b',' {
                continue;
            }
            if n == want.len() {
                return Err(self.err_in(
                    "row",
                    start + 1,
                    format!("more than {} fields", want.len()),
                ));
            }
            fields[n] = (&line[start..i], start + 1);
            n += 1;
            start = i + 1;
        }
        let col = start + 1;
        if n != want.len() {
            return Err(self.err_in(
                "row",
                col,
                format!("{n} fields, expected {} ({})", want.len(), want.join(",")),
            ));
        }
        Ok(fields)
    }

    /// Field `i`, a size or a time, at most [`MAX_RECORD_VALUE`].
    fn bounded(&self, f: &Row<'_>, i: usize) -> Result<u64, RowError> {
        let v = self.num(f, i)?;
        if v > MAX_RECORD_VALUE {
            return Err(self.err(
                i,
                f[i].1,
                format!(
                    "{v} is larger than any record's {} can be (at most 2^50 = {MAX_RECORD_VALUE}: \
                     a pebibyte, or 13 days in ns)",
                    COLUMNS[i]
                ),
            ));
        }
        Ok(v)
    }

    /// Field `i` as an unsigned integer.
    #[inline]
    fn num(&self, f: &Row<'_>, i: usize) -> Result<u64, RowError> {
        let (v, c) = f[i];
        parse_u64(v).ok_or_else(|| {
            self.err(
                i,
                c,
                format!("`{}` must be an unsigned integer, found `{v}`", COLUMNS[i]),
            )
        })
    }

    /// Field `i` as an unsigned 32-bit integer.
    #[inline]
    fn num32(&self, f: &Row<'_>, i: usize) -> Result<u32, RowError> {
        let v = self.num(f, i)?;
        u32::try_from(v).map_err(|_| {
            self.err(
                i,
                f[i].1,
                format!("`{}` = {v} does not fit 32 bits", COLUMNS[i]),
            )
        })
    }

    /// Field `i`, empty for absent.
    #[inline]
    fn opt(&self, f: &Row<'_>, i: usize) -> Result<Option<u64>, RowError> {
        if f[i].0.is_empty() {
            Ok(None)
        } else {
            self.num(f, i).map(Some)
        }
    }

    /// Field `i` as a 32-bit integer, empty for absent.
    #[inline]
    fn opt32(&self, f: &Row<'_>, i: usize) -> Result<Option<u32>, RowError> {
        if f[i].0.is_empty() {
            Ok(None)
        } else {
            self.num32(f, i).map(Some)
        }
    }

    /// The `;`-separated deps of record `id`, none itself (that each precedes it is
    /// checked when the row is admitted, in file order).
    fn deps(&self, f: &Row<'_>, id: u64, deps: &mut Vec<FlowId>) -> Result<(), RowError> {
        let (text, mut c) = f[4];
        if text.is_empty() {
            return Ok(());
        }
        for d in text.split(';') {
            let v = parse_u64(d).ok_or_else(|| {
                self.err(
                    4,
                    c,
                    format!("deps must be `;`-separated record ids, found `{d}`"),
                )
            })?;
            if v == id {
                return Err(self.err(4, c, format!("record {id} depends on itself")));
            }
            deps.push(FlowId(v));
            c += d.len() + 1;
        }
        Ok(())
    }

    /// The aggregation fields (`agg_id` … `agg_dir`, and `agg_group` from schema 3): all
    /// empty (no aggregation) or all given. Before schema 3 every aggregation is dense.
    fn agg(&self, f: &Row<'_>) -> Result<Option<AggTag>, RowError> {
        const GROUP: usize = 21;
        let has_group = self.ctx.schema >= 3;
        if (16..20).all(|i| f[i].0.is_empty()) {
            if has_group && !f[GROUP].0.is_empty() {
                return Err(self.err(
                    GROUP,
                    f[GROUP].1,
                    "agg_group is given but agg_id, agg_switch, agg_fanin and agg_dir are empty",
                ));
            }
            return Ok(None);
        }
        let (id, switch, fanin) = (self.num(f, 16)?, self.num32(f, 17)?, self.num32(f, 18)?);
        let dir = match f[19].0 {
            "up" => AggDir::Up,
            "down" => AggDir::Down,
            other => {
                return Err(self.err(
                    19,
                    f[19].1,
                    format!("agg_dir must be `up` or `down`, found `{other}`"),
                ))
            }
        };
        let group = match (has_group, f[GROUP].0) {
            (false, _) | (true, "dense") => AggGroup::Dense,
            (true, "expert") => AggGroup::Expert,
            (true, other) => {
                return Err(self.err(
                    GROUP,
                    f[GROUP].1,
                    format!("agg_group must be `dense` or `expert`, found `{other}`"),
                ))
            }
        };
        Ok(Some(AggTag {
            id,
            switch: NodeId(switch),
            fanin,
            dir,
            group,
        }))
    }
}

#[inline]
fn parse_u64(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for b in s.bytes() {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((b - b'0') as u64)?;
    }
    Some(v)
}
