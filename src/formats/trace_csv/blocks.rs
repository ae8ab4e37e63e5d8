//! A trace's body in blocks of whole lines, read and parsed off the caller's thread.
//!
//! Reading a 32,768-GPU trace line by line costs ≈ 10 s on one core: inflating 1.4 GB
//! and parsing 17.7 M rows. Rows are independent until they are admitted (ids unique,
//! deps on earlier lines: [`super::read::TraceReader`]), so the body is cut into blocks
//! of ≈ 1 MiB of whole lines: one thread reads and inflates them, workers parse them
//! ([`parse_block`]), and the reader's thread takes them back in file order and admits
//! their rows. Line numbers count from each block's first line and are made absolute
//! there, so a worker never needs to know what came before its block.
//!
//! At most [`DEPTH`] blocks per worker are in flight (their buffers circulate), each of
//! ≈ 1 MiB of lines, or one line of at most [`LINE_MAX`]: memory stays a few tens of MB
//! whatever the file's size. Dropping the reader early stops the
//! threads: every channel they wait on hangs up.

use super::row::{LineCtx, ParsedRow, RowError, RowParser};
use std::collections::BTreeMap;
use std::io::BufRead;
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Bytes of text a block holds at least (≈ 12,000 rows), except the last.
const BLOCK: usize = 1 << 20;

/// The longest line read (and the longest header). The longest row a generator writes
/// is a collective bench's barrier, one dep per rank and NCCL channel (≈ 11 B each:
/// ≈ 3 MB at 65,536 GPUs on 4 channels), so this holds ≈ 1.5 M deps; short enough that
/// the blocks in flight of a crafted file (lines just under it) hold at most ≈ 120 MB
/// with 2 workers, 220 MB with 4.
pub(super) const LINE_MAX: usize = 16 << 20;

/// The most bytes taken from the input at a time.
const FILL: usize = 1 << 18;

/// Blocks in flight per worker.
const DEPTH: usize = 3;

/// How a block ends.
#[derive(Debug)]
pub(super) enum ParsedEnd {
    /// More blocks follow.
    More,
    /// The file ends with this block.
    Eof,
    /// A line of the block is bad: its rows before it are valid.
    Row(RowError),
    /// Reading failed after the block's (whole) lines.
    Read(std::io::Error),
    /// The line after the block's is longer than [`LINE_MAX`].
    LineTooLong,
    /// A reader or parser thread stopped before the end (a bug, reported, never a
    /// shorter trace).
    Stopped(String),
}

/// One block: its text, the rows parsed from it and how it ends.
#[derive(Debug)]
pub(super) struct Parsed {
    /// Position in the file (0 = first block).
    pub seq: u64,
    pub text: Vec<u8>,
    pub rows: Vec<ParsedRow>,
    /// Lines the block holds (each ending in `\n`, but for the file's last).
    pub lines: u64,
    pub end: ParsedEnd,
    /// The end line (`# end records=N`) if the block holds it: N and its line in the block.
    pub marker: Option<(u64, u32)>,
}

impl Parsed {
    /// Block `seq` as a thread that stopped (a bug) leaves it: no rows, the error `msg`.
    fn stopped(seq: u64, msg: String) -> Parsed {
        Parsed {
            seq,
            text: Vec::new(),
            rows: Vec::new(),
            lines: 0,
            end: ParsedEnd::Stopped(msg),
            marker: None,
        }
    }
}

/// A block as read, not yet parsed.
struct Chunk {
    seq: u64,
    text: Vec<u8>,
    /// `More`, `Eof`, `Read` or `LineTooLong`.
    end: ParsedEnd,
}

/// Cuts the body into blocks of whole lines.
pub(super) struct LineSource {
    input: Box<dyn BufRead + Send>,
    /// The start of the next block's first line (read past the last block's end).
    carry: Vec<u8>,
    seq: u64,
}

impl LineSource {
    /// The blocks of `input`, from where it stands (after the header).
    fn new(input: Box<dyn BufRead + Send>) -> LineSource {
        LineSource {
            input,
            carry: Vec::new(),
            seq: 0,
        }
    }

    /// The next block, in `text`'s buffer: whole lines, [`BLOCK`] bytes or more unless
    /// the file ends.
    fn next_chunk(&mut self, mut text: Vec<u8>) -> Chunk {
        text.clear();
        text.append(&mut self.carry);
        // the end of the last line break in `text` (one past it), if any
        let mut cut = text.iter().rposition(|&c| c == b'\n').map(|p| p + 1);
        let end = loop {
            if text.len() >= BLOCK {
                if let Some(c) = cut {
                    self.carry.extend_from_slice(&text[c..]);
                    text.truncate(c);
                    break ParsedEnd::More;
                }
                if text.len() > LINE_MAX {
                    text.clear();
                    break ParsedEnd::LineTooLong;
                }
            }
            match self.input.fill_buf() {
                Ok([]) => break ParsedEnd::Eof,
                Ok(b) => {
                    // at most FILL bytes at a time, whatever the stream buffers (a
                    // `Cursor` hands over all it holds): blocks stay ≈ BLOCK long
                    let b = &b[..b.len().min(FILL)];
                    let n = b.len();
                    if let Some(p) = b.iter().rposition(|&c| c == b'\n') {
                        cut = Some(text.len() + p + 1);
                    }
                    text.extend_from_slice(b);
                    self.input.consume(n);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // the whole lines before the failure are the file's; the rest is lost
                    text.truncate(cut.unwrap_or(0));
                    break ParsedEnd::Read(e);
                }
            }
        };
        let seq = self.seq;
        self.seq += 1;
        Chunk { seq, text, end }
    }
}

/// Parse every data line of `chunk` (blank and `#` lines are skipped), up to the first
/// bad one.
fn parse_block(chunk: Chunk, ctx: &LineCtx) -> Parsed {
    let Chunk { seq, text, mut end } = chunk;
    let mut rows = Vec::with_capacity(text.len() / 64);
    // one UTF-8 check for the block; a bad byte ends it at the line holding it
    let (valid, bad) = match std::str::from_utf8(&text) {
        Ok(s) => (s, false),
        Err(e) => (
            std::str::from_utf8(&text[..e.valid_up_to()]).unwrap_or_default(),
            true,
        ),
    };
    let mut lines = 0u64;
    let mut start = 0;
    let mut marker: Option<(u64, u32)> = None;
    while start < valid.len() || (bad && start == valid.len()) {
        let stop = valid[start..].find('\n').map(|p| start + p);
        let line = lines as u32;
        lines += 1;
        if bad && stop.is_none() {
            end = ParsedEnd::Row(not_text(line, valid.len() - start + 1, ctx.gz));
            break;
        }
        let stop = stop.unwrap_or(valid.len());
        if stop - start > LINE_MAX {
            // the reader cuts blocks only when a line passes LINE_MAX by a read's
            // length: the limit is exact here, the same whatever the input's buffering
            end = ParsedEnd::Row(RowError {
                line,
                column: None,
                field: "row",
                msg: format!("line longer than {} MiB: not a trace row", LINE_MAX >> 20),
                at: start as u32,
                before: None,
            });
            break;
        }
        let s = valid[start..stop].trim_end_matches('\r');
        let at = start as u32;
        start = stop + 1;
        if let Some(n) = s.strip_prefix(super::END_MARKER) {
            match n.trim().parse::<u64>() {
                Ok(n) if marker.is_none() => marker = Some((n, line)),
                r => {
                    let msg = match r {
                        Ok(_) => "a second end line".to_string(),
                        Err(_) => format!("`{}` is not a record count", n.trim()),
                    };
                    end = ParsedEnd::Row(end_line_error(line, at, msg));
                    break;
                }
            }
            continue;
        }
        if s.trim().is_empty() || s.starts_with('#') {
            continue;
        }
        if let Some((_, m)) = marker {
            let msg = format!("a record {} line(s) after the end line", line - m);
            end = ParsedEnd::Row(end_line_error(line, at, msg));
            break;
        }
        match (RowParser { ctx, line }).parse(s) {
            Ok(rec) => rows.push(ParsedRow { rec, line, at }),
            Err(mut e) => {
                // in gzip input whose inflating failed later in this block, the damage
                // explains the bad row: the read error is what the file gets
                if !(ctx.gz && matches!(end, ParsedEnd::Read(_))) {
                    e.at = at;
                    end = ParsedEnd::Row(e);
                }
                break;
            }
        }
    }
    Parsed {
        seq,
        text,
        rows,
        lines,
        end,
        marker,
    }
}

/// An error about the end line (or a line after it) on the block's line `line`.
fn end_line_error(line: u32, at: u32, msg: String) -> RowError {
    RowError {
        line,
        column: Some(1),
        field: "end",
        msg,
        at,
        before: None,
    }
}

/// A line that is not UTF-8: in decompressed gzip, damage to the compressed data (what
/// inflating a damaged member gives before its checksum fails) more likely than a text
/// file that is not one.
fn not_text(line: u32, column: usize, gz: bool) -> RowError {
    let what = "the line is not UTF-8 text".to_string();
    let (field, msg) = if gz {
        (
            "gzip",
            format!("{what}: the compressed data is damaged or truncated"),
        )
    } else {
        ("text", what)
    };
    RowError {
        line,
        column: Some(column),
        field,
        msg,
        at: 0,
        before: None,
    }
}

/// Where a reader's blocks come from.
pub(super) enum Body {
    /// Read and parsed on the caller's thread.
    Inline {
        source: LineSource,
        ctx: Arc<LineCtx>,
        spare: Vec<u8>,
    },
    /// Read on one thread, parsed on workers, taken back in order.
    Threads(Pipeline),
}

impl Body {
    /// Blocks read and parsed when asked, on this thread.
    pub(super) fn inline(input: Box<dyn BufRead + Send>, ctx: Arc<LineCtx>) -> Body {
        Body::Inline {
            source: LineSource::new(input),
            ctx,
            spare: Vec::new(),
        }
    }

    /// Blocks read ahead on a thread and parsed on `workers` others.
    pub(super) fn threads(
        input: Box<dyn BufRead + Send>,
        ctx: Arc<LineCtx>,
        workers: usize,
    ) -> std::io::Result<Body> {
        Pipeline::start(LineSource::new(input), ctx, workers.max(1)).map(Body::Threads)
    }

    /// The next block in file order. Not called again after one that does not end in
    /// [`ParsedEnd::More`].
    pub(super) fn next_block(&mut self) -> Parsed {
        match self {
            Body::Inline { source, ctx, spare } => {
                parse_block(source.next_chunk(std::mem::take(spare)), ctx)
            }
            Body::Threads(p) => p.next_block(),
        }
    }

    /// Give back a finished block's buffer.
    pub(super) fn recycle(&mut self, text: Vec<u8>) {
        match self {
            Body::Inline { spare, .. } => *spare = text,
            Body::Threads(p) => p.recycle(text),
        }
    }
}

/// The reader thread, the parser threads and the blocks they finished out of order.
pub(super) struct Pipeline {
    parsed: Option<Receiver<Parsed>>,
    /// Buffers for the reader thread: one per block in flight.
    free: Option<Sender<Vec<u8>>>,
    /// Blocks parsed ahead of the one wanted next.
    pending: BTreeMap<u64, Parsed>,
    next: u64,
    threads: Vec<JoinHandle<()>>,
}

impl Pipeline {
    /// Start the reader thread and `workers` parser threads. An error when the system
    /// refuses a thread (those started are stopped again).
    fn start(
        mut source: LineSource,
        ctx: Arc<LineCtx>,
        workers: usize,
    ) -> std::io::Result<Pipeline> {
        let depth = DEPTH * workers + 1;
        let (free_tx, free_rx) = mpsc::channel::<Vec<u8>>();
        for _ in 0..depth {
            let _ = free_tx.send(Vec::new());
        }
        let (work_tx, work_rx) = mpsc::sync_channel::<Chunk>(depth);
        let (done_tx, done_rx) = mpsc::sync_channel::<Parsed>(depth);
        // built first, so that a failed spawn drops it and its Drop stops what started
        let mut p = Pipeline {
            parsed: Some(done_rx),
            free: Some(free_tx),
            pending: BTreeMap::new(),
            next: 0,
            threads: Vec::with_capacity(workers + 1),
        };
        let named = |what: &str| std::thread::Builder::new().name(format!("trace-{what}"));
        p.threads
            .push(named("read").spawn(move || read_blocks(&mut source, &free_rx, &work_tx))?);
        let work_rx = Arc::new(Mutex::new(work_rx));
        for _ in 0..workers {
            let (work_rx, done_tx, ctx) = (work_rx.clone(), done_tx.clone(), ctx.clone());
            p.threads
                .push(named("parse").spawn(move || parse_blocks(&work_rx, &done_tx, &ctx))?);
        }
        Ok(p)
    }

    fn next_block(&mut self) -> Parsed {
        let seq = self.next;
        loop {
            if let Some(p) = self.pending.remove(&seq) {
                self.next += 1;
                return p;
            }
            match self.parsed.as_ref().map(Receiver::recv) {
                Some(Ok(p)) => {
                    self.pending.insert(p.seq, p);
                }
                _ => {
                    let msg = format!("the trace reader's threads stopped before block {seq}");
                    return Parsed::stopped(seq, msg);
                }
            }
        }
    }

    fn recycle(&mut self, text: Vec<u8>) {
        if let Some(free) = &self.free {
            let _ = free.send(text);
        }
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        // hang up first: each thread then stops at its next send or receive
        self.parsed = None;
        self.free = None;
        self.pending.clear();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// The reader thread: a block per free buffer, until the file ends or fails.
fn read_blocks(source: &mut LineSource, free: &Receiver<Vec<u8>>, work: &SyncSender<Chunk>) {
    while let Ok(buf) = free.recv() {
        let chunk = source.next_chunk(buf);
        let last = !matches!(chunk.end, ParsedEnd::More);
        if work.send(chunk).is_err() || last {
            return;
        }
    }
}

/// A parser thread: parse blocks until the reader or the consumer hangs up. A panic in
/// the parser (a bug) ends that block with an error instead of losing it.
fn parse_blocks(work: &Mutex<Receiver<Chunk>>, done: &SyncSender<Parsed>, ctx: &LineCtx) {
    loop {
        let chunk = match work.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        let Ok(chunk) = chunk else { return };
        let seq = chunk.seq;
        let parsed =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| parse_block(chunk, ctx)))
                .unwrap_or_else(|_| Parsed::stopped(seq, format!("parsing block {seq} failed")));
        if done.send(parsed).is_err() {
            return;
        }
    }
}
