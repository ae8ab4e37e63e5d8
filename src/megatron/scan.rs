//! One pass over a Megatron log: the arguments block, iteration lines, timers, and the
//! few start-up lines that carry sizes (`using world size: …`, `> padded vocab …`).
//!
//! Lines are classified by their first significant bytes (after launcher prefixes such
//! as `[default0]:`, `3: `, `node7: ` and bracketed timestamps) before any nom parser
//! runs, so noise costs one short look; only candidate lines are parsed, by structure
//! (names, dots, separators), never by column.

use super::config::IterationRecord;
use super::error::{Loc, MegatronError, Warning};
use nom::{
    branch::alt,
    bytes::complete::{tag, take_while, take_while1},
    character::complete::{char, digit1, one_of, space0, space1},
    combinator::{map_res, opt},
    multi::separated_list1,
    number::complete::double,
    sequence::{delimited, tuple},
    IResult,
};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Hands out one shared copy of each timer name.
#[derive(Default)]
struct Names(Vec<Arc<str>>);

impl Names {
    fn get(&mut self, name: &str) -> Arc<str> {
        if let Some(n) = self.0.iter().find(|n| &***n == name) {
            return n.clone();
        }
        let n: Arc<str> = Arc::from(name);
        self.0.push(n.clone());
        n
    }
}

/// A `name = value` pair found in an input, with where its value starts.
#[derive(Clone, Debug, PartialEq)]
pub struct Assignment {
    /// Megatron argument name as written.
    pub key: String,
    /// Python `str()` of the value, as written.
    pub value: String,
    /// Position of the value.
    pub loc: Loc,
}

/// One timer reading (ms), as printed.
#[derive(Clone, Debug, PartialEq)]
pub struct TimerReading {
    /// Megatron's timer name (shared between readings: a log repeats the same few names).
    pub name: Arc<str>,
    /// Minimum across ranks (ms).
    pub min: f64,
    /// Maximum across ranks (ms).
    pub max: f64,
    /// 1-based line.
    pub line: usize,
}

/// What one log contains.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LogScan {
    /// Arguments of the last complete arguments block, in file order.
    pub args: Vec<Assignment>,
    /// Line of the header of the block kept, if any.
    pub args_header_line: Option<usize>,
    /// Sizes from `using world size: …` (applied before the block, which wins).
    pub early: Vec<Assignment>,
    /// Sizes from `> padded vocab (size: V) … (new size: P)` (applied after the block).
    pub late: Vec<Assignment>,
    /// Iteration lines.
    pub iterations: Vec<IterationRecord>,
    /// Every timer reading, in file order.
    pub timers: Vec<TimerReading>,
    /// What was read with doubt (a cut-short arguments block).
    pub warnings: Vec<Warning>,
}

/// Bytes a launcher prefix token (`node7`, `worker-0`, `host.domain@1`) is made of.
static PREFIX_TOKEN: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        t[c] = b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'@');
        c += 1;
    }
    t
};

/// Strips launcher prefixes and bracketed groups from the start of a line. Returns the
/// rest and the last bracketed group that looked like a timestamp (starts with a digit).
///
/// A bare `token:` counts as a prefix only when the token holds a digit (`3:`,
/// `node7:`, `worker-0:`) so timer names such as `forward-backward:` survive.
pub fn strip_prefixes(line: &str) -> (&str, Option<&str>) {
    let mut s = trim_start_fast(line);
    let mut stamp = None;
    for _ in 0..6 {
        if let Some(rest) = strip_logging_prefix(s) {
            s = trim_start_fast(rest);
            continue;
        }
        let b = s.as_bytes();
        match b.first() {
            Some(b'[') => match b.iter().position(|c| *c == b']') {
                Some(end) => {
                    let inner = &s[1..end];
                    if inner.as_bytes().first().is_some_and(|c| c.is_ascii_digit()) {
                        stamp = Some(inner);
                    }
                    s = s[end + 1..].strip_prefix(':').unwrap_or(&s[end + 1..]);
                    s = trim_start_fast(s);
                    // `[time][LEVEL][file:line] - message` (Argonne's Megatron-DeepSpeed,
                    // ezpz logging): the ` - ` after the last group separates the message.
                    if !s.starts_with('[') {
                        if let Some(rest) = s.strip_prefix("- ") {
                            s = trim_start_fast(rest);
                        }
                    }
                }
                None => break,
            },
            Some(c) if c.is_ascii_alphanumeric() => {
                let n = b[..b.len().min(48)]
                    .iter()
                    .position(|c| !PREFIX_TOKEN[*c as usize]);
                match n {
                    Some(n)
                        if b[n] == b':'
                            && b[..n].iter().any(u8::is_ascii_digit)
                            && b.get(n + 1)
                                .is_none_or(|c| *c == b' ' || *c == b'\t' || *c == b'[') =>
                    {
                        s = trim_start_fast(&s[n + 1..]);
                    }
                    _ => break,
                }
            }
            _ => break,
        }
    }
    (s, stamp)
}

/// Python `logging`'s default prefix `LEVEL:logger.name:` (e.g.
/// `INFO:megatron.core.timers:`), which Megatron's logger puts before its messages; the
/// rest of the line, or `None` when the line has no such prefix.
fn strip_logging_prefix(s: &str) -> Option<&str> {
    const LEVELS: [&str; 6] = [
        "DEBUG:",
        "INFO:",
        "WARNING:",
        "WARN:",
        "ERROR:",
        "CRITICAL:",
    ];
    let rest = LEVELS.iter().find_map(|l| s.strip_prefix(l))?;
    let name_len = rest
        .bytes()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
        .count();
    match rest.as_bytes().get(name_len) {
        Some(b':') if name_len > 0 => Some(&rest[name_len + 1..]),
        _ => Some(rest),
    }
}

fn col(line: &str, part: &str) -> usize {
    (part.as_ptr() as usize).saturating_sub(line.as_ptr() as usize) + 1
}

/// `  name ....... value` (dots may be absent for names of 48+ characters).
pub fn args_line(s: &str) -> IResult<&str, (&str, &str)> {
    let (r, name) = take_while1(|c: char| c.is_ascii_alphanumeric() || c == '_')(s.trim_start())?;
    let (r, sp) = space1(r)?;
    let (r, dots) = take_while(|c| c == '.')(r)?;
    if dots.is_empty() && sp.len() < 2 {
        return Err(nom::Err::Error(nom::error::Error::new(
            r,
            nom::error::ErrorKind::Tag,
        )));
    }
    let (r, _) = space0(r)?;
    Ok(("", (name, r.trim_end())))
}

fn is_args_header(s: &str) -> bool {
    s.starts_with('-') && s.contains(" arguments ") && !s.contains("end of arguments")
}

/// `iteration  12/ 5000`, `iteration=12/5000`, `iteration: 12 / 5000`.
pub fn iteration_head(s: &str) -> IResult<&str, (u64, u64)> {
    let num = |i| map_res(digit1, str::parse::<u64>)(i);
    let (r, (_, _, _, _, it, _, _, _, total)) = tuple((
        tag("iteration"),
        space0,
        opt(one_of(":=")),
        space0,
        num,
        space0,
        char('/'),
        space0,
        num,
    ))(s)?;
    Ok((r, (it, total)))
}

fn first_number(v: &str) -> Option<f64> {
    let t = v.trim();
    let end = t
        .find(|c: char| c.is_whitespace() || c == ',')
        .unwrap_or(t.len());
    t[..end].parse::<f64>().ok().filter(|x| x.is_finite())
}

/// The longest timer reading or iteration time a log may give, ms: 10^9 ms (about 11.6
/// days), far above any real iteration and low enough that the calibration and every
/// compute time derived from it stay finite and fit in nanoseconds.
pub const MAX_LOG_MS: f64 = 1e9;

/// `Err` with what is wrong unless every one of `xs` is a time in [0, [`MAX_LOG_MS`]] ms.
pub fn check_log_ms(xs: &[f64]) -> Result<(), String> {
    match xs.iter().find(|x| !(0.0..=MAX_LOG_MS).contains(*x)) {
        None => Ok(()),
        Some(x) => Err(format!(
            "`{x:?}` ms is not a time in [0, {MAX_LOG_MS:e}] ms (0 to about 11.6 days)"
        )),
    }
}

/// Parses an iteration line starting at `iteration` (prefixes already stripped).
/// `Ok(None)` when the line is not an iteration line; `Err` when it is one but its
/// elapsed time is missing or not a number.
pub fn iteration_line(
    s: &str,
    stamp: Option<&str>,
    loc: &Loc,
) -> Result<Option<IterationRecord>, MegatronError> {
    let Ok((rest, (iteration, total))) = iteration_head(s) else {
        return Ok(None);
    };
    let mut elapsed = None;
    // Fields are gathered as borrowed pairs, in the order a map insertion would see them
    // (later duplicates win), and copied once into the map below.
    let mut digits = [0u8; 20];
    let total_text = format_u64(total, &mut digits);
    let mut pairs: Vec<(&str, &str)> = Vec::with_capacity(16);
    pairs.push(("train_iters", total_text));
    if let Some(t) = stamp {
        pairs.push(("timestamp", t));
    }
    let mut segs = rest;
    loop {
        let (seg, more) = match segs.as_bytes().iter().position(|c| *c == b'|') {
            Some(p) => (&segs[..p], Some(&segs[p + 1..])),
            None => (segs, None),
        };
        let seg = trim_fast(seg);
        if !seg.is_empty() {
            let (k, v) = match seg.as_bytes().iter().position(|c| *c == b':' || *c == b'=') {
                Some(p) => (trim_fast(&seg[..p]), trim_fast(&seg[p + 1..])),
                None => (seg, ""),
            };
            // Only `elapsed…` keys pay for normalisation.
            let is_elapsed = k.len() >= 26 && k.as_bytes()[0].eq_ignore_ascii_case(&b'e') && {
                let norm = k.to_ascii_lowercase().replace(['_', '-'], " ");
                norm.starts_with("elapsed time per iteration")
            };
            if is_elapsed {
                // `(ms)`, `_ms`, `(s)`, `_s`: seconds are scaled to milliseconds.
                let norm = k.to_ascii_lowercase().replace(['_', '-'], " ");
                let scale = if norm.contains("(s)") || norm.ends_with(" s") {
                    1000.0
                } else {
                    1.0
                };
                match first_number(v) {
                    Some(x) => elapsed = Some(x * scale),
                    None => {
                        let c = loc.col + (v.as_ptr() as usize).saturating_sub(s.as_ptr() as usize);
                        return Err(MegatronError::at(
                            &Loc::new(loc.path.clone(), loc.line, c),
                            "elapsed time per iteration (ms)",
                            format!("expected a number of milliseconds, found `{v}`"),
                        ));
                    }
                }
            } else {
                pairs.push((k, v));
            }
        }
        match more {
            Some(m) => segs = m,
            None => break,
        }
    }
    if let Some(e) = elapsed {
        check_log_ms(&[e])
            .map_err(|m| MegatronError::at(loc, "elapsed time per iteration (ms)", m))?;
    }
    match elapsed {
        Some(elapsed_ms) => Ok(Some(IterationRecord {
            iteration,
            elapsed_ms,
            fields: fields_map(pairs),
        })),
        None => Err(MegatronError::at(
            loc,
            "elapsed time per iteration (ms)",
            format!("iteration line {iteration}/{total} has no `elapsed time per iteration` field"),
        )),
    }
}

/// The map that inserting `pairs` in order would build (a later duplicate key replacing
/// an earlier one), built in one sorted pass instead of one tree search per field.
fn fields_map(mut pairs: Vec<(&str, &str)>) -> BTreeMap<String, String> {
    // Stable: equal keys stay in insertion order, so the last of each run is the winner.
    pairs.sort_by(|a, b| a.0.cmp(b.0));
    let n = pairs.len();
    let mut owned: Vec<(String, String)> = Vec::with_capacity(n);
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i + 1 == n || pairs[i + 1].0 != *k {
            owned.push(((*k).to_owned(), (*v).to_owned()));
        }
    }
    // Sorted and unique already: the map is bulk-built from this vector in place.
    owned.into_iter().collect()
}

/// Decimal text of `n` in `buf`, as `n.to_string()` would write it.
fn format_u64(mut n: u64, buf: &mut [u8; 20]) -> &str {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    std::str::from_utf8(&buf[i..]).unwrap_or("")
}

/// True for the bytes `char::is_whitespace` accepts below 0x80.
fn is_ascii_ws(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// `str::trim_start` without decoding characters when the text starts in ASCII (nearly
/// every log line); a non-ASCII first character takes the general path.
fn trim_start_fast(s: &str) -> &str {
    let b = s.as_bytes();
    let i = b.iter().position(|c| !is_ascii_ws(*c)).unwrap_or(b.len());
    if b.get(i).is_some_and(|c| *c >= 0x80) {
        return s[i..].trim_start();
    }
    &s[i..]
}

/// `str::trim`, ASCII fast path as in [`trim_start_fast`].
fn trim_fast(s: &str) -> &str {
    let s = trim_start_fast(s);
    let b = s.as_bytes();
    let j = b
        .iter()
        .rposition(|c| !is_ascii_ws(*c))
        .map_or(0, |j| j + 1);
    if j > 0 && b[j - 1] >= 0x80 {
        return s[..j].trim_end();
    }
    &s[..j]
}

/// Position of the first `\n`, eight bytes at a time: log lines are short, so the set-up
/// of a general `memchr` per line costs more than the search itself.
fn find_newline(b: &[u8]) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    const NL: u64 = LO * b'\n' as u64;
    let mut chunks = b.chunks_exact(8);
    let mut base = 0;
    for c in &mut chunks {
        let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]) ^ NL;
        // Lowest flagged byte is exact (borrows only flag bytes above a real zero).
        let m = w.wrapping_sub(LO) & !w & HI;
        if m != 0 {
            return Some(base + (m.trailing_zeros() / 8) as usize);
        }
        base += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|c| *c == b'\n')
        .map(|p| base + p)
}

/// The pieces of `text` between `\n`s, exactly as `text.split('\n')` yields them.
struct Lines<'a>(Option<&'a str>);

impl<'a> Iterator for Lines<'a> {
    type Item = &'a str;
    fn next(&mut self) -> Option<&'a str> {
        let r = self.0?;
        match find_newline(r.as_bytes()) {
            Some(i) => {
                self.0 = Some(&r[i + 1..]);
                Some(&r[..i])
            }
            None => {
                self.0 = None;
                Some(r)
            }
        }
    }
}

/// `[+-]?digits(.digits*)?([eE][+-]?digits)?`: a number nom's `double` reads whole and
/// hands to `str::parse`, so parsing it directly gives the same value.
fn is_plain_decimal(t: &[u8]) -> bool {
    let mut i = usize::from(matches!(t.first(), Some(b'+' | b'-')));
    let d0 = i;
    while t.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    if i == d0 {
        return false;
    }
    if t.get(i) == Some(&b'.') {
        i += 1;
        while t.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
    }
    if matches!(t.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(t.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let e0 = i;
        while t.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == e0 {
            return false;
        }
    }
    i == t.len()
}

/// The common timer value — `(1.0, 2.0)` or `1.0` of plain decimals, complete — read
/// without nom; `None` for anything else, which [`timer_values`] then parses in full.
fn timer_values_plain(s: &str) -> Option<(f64, f64)> {
    let t = s.as_bytes();
    let inner = match t.first() {
        Some(b'(') => &s[1..s.len() - usize::from(t.last() == Some(&b')'))],
        _ => s,
    };
    if t.first() == Some(&b'(') && (t.len() < 2 || t.last() != Some(&b')')) {
        return None;
    }
    let (mut min, mut max) = (f64::INFINITY, f64::NEG_INFINITY);
    let mut rest = Some(inner);
    while let Some(r) = rest {
        let piece = match r.as_bytes().iter().position(|c| *c == b',') {
            Some(p) => {
                rest = Some(&r[p + 1..]);
                &r[..p]
            }
            None => {
                rest = None;
                r
            }
        };
        let b = piece.as_bytes();
        let i = b
            .iter()
            .position(|c| !matches!(c, b' ' | b'\t'))
            .unwrap_or(b.len());
        let j = b
            .iter()
            .rposition(|c| !matches!(c, b' ' | b'\t'))
            .map_or(i, |j| j + 1);
        let piece = &piece[i..j.max(i)];
        if !is_plain_decimal(piece.as_bytes()) {
            return None;
        }
        let x: f64 = piece.parse().ok()?;
        min = min.min(x);
        max = max.max(x);
    }
    Some((min, max))
}

/// The value without a trailing annotation someone added to a pasted log
/// (`(1.0, 2.0)   <--- slow`, `12.5  # warm-up`, `3.0 ← here`).
fn strip_annotation(s: &str) -> &str {
    let cut = ["<-", "#", "←", "//"]
        .iter()
        .filter_map(|m| s.find(m))
        .min()
        .unwrap_or(s.len());
    trim_fast(&s[..cut])
}

/// `(1.0, 2.0)`, `1.0`, `(1.0, 2.0, 3.0)` → (min, max); a trailing annotation
/// (`<--- note`, `# note`) is ignored.
pub fn timer_values(s: &str) -> IResult<&str, (f64, f64)> {
    let s = trim_fast(s);
    if let Some(v) = timer_values_plain(s) {
        return Ok(("", v));
    }
    let s = strip_annotation(s);
    if let Some(v) = timer_values_plain(s) {
        return Ok(("", v));
    }
    let list = |i| separated_list1(tuple((space0, char(','), space0)), double)(i);
    let (r, v) = alt((
        delimited(tuple((char('('), space0)), list, tuple((space0, char(')')))),
        list,
    ))(s.trim())?;
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Ok((r, (min, max)))
}

enum TimerLine<'a> {
    /// `name ....: values` with the values text.
    Entry(&'a str, &'a str),
    /// `name:` opening an all-ranks list.
    Name(&'a str),
    /// `rank  3: value`.
    Rank(&'a str),
    /// Not part of a timer block.
    Other,
}

fn timer_line(s: &str) -> TimerLine<'_> {
    let t = trim_fast(s);
    if let Some(r) = t.strip_prefix("rank") {
        let r = r.trim_start();
        let d = r.bytes().take_while(u8::is_ascii_digit).count();
        if d > 0 && r[d..].starts_with(':') {
            return TimerLine::Rank(r[d + 1..].trim());
        }
    }
    let Some(p) = t.as_bytes().iter().position(|c| *c == b':') else {
        return TimerLine::Other;
    };
    let (lhs, value) = (&t[..p], t[p + 1..].trim());
    let name = lhs.trim_end_matches('.').trim_end();
    if name.is_empty() || name.contains(char::is_whitespace) {
        return TimerLine::Other;
    }
    if lhs.ends_with('.') && !value.is_empty() {
        TimerLine::Entry(name, value)
    } else if value.is_empty() && lhs == name {
        TimerLine::Name(name)
    } else {
        TimerLine::Other
    }
}

/// A timer reading that is a number but not a time a log can mean (negative, infinite,
/// NaN, beyond [`MAX_LOG_MS`]), at its place in the line.
fn timer_range(
    path: &str,
    line_no: usize,
    line: &str,
    part: &str,
    name: &str,
    xs: &[f64],
) -> Result<(), MegatronError> {
    check_log_ms(xs).map_err(|_| {
        MegatronError::at(
            &Loc::new(path, line_no, col(line, part)),
            format!("timer {name}"),
            format!(
                "expected milliseconds in [0, {MAX_LOG_MS:e}] (0 to about 11.6 days), found `{}`",
                part.trim()
            ),
        )
    })
}

fn timer_error(path: &str, line_no: usize, line: &str, part: &str, name: &str) -> MegatronError {
    MegatronError::at(
        &Loc::new(path, line_no, col(line, part)),
        format!("timer {name}"),
        format!(
            "expected `(min, max)` or a number of milliseconds, found `{}`",
            part.trim()
        ),
    )
}

fn push_numbers(
    out: &mut Vec<Assignment>,
    text: &str,
    line: &str,
    path: &str,
    line_no: usize,
    keys: &[(&str, &str)],
) {
    for (pat, key) in keys {
        if let Some(p) = text.find(pat) {
            let after = text[p + pat.len()..].trim_start();
            let d = after.bytes().take_while(u8::is_ascii_digit).count();
            if d > 0 {
                out.push(Assignment {
                    key: (*key).into(),
                    value: after[..d].into(),
                    loc: Loc::new(path, line_no, col(line, after)),
                });
            }
        }
    }
}

#[derive(PartialEq)]
enum State {
    Normal,
    Args { header: usize },
    Timers,
}

/// An all-ranks timer being read: name, min, max, readings seen.
type RankTimer = (Arc<str>, f64, f64, usize);

/// The state of one pass over a log.
struct Scanner<'a> {
    path: &'a str,
    out: LogScan,
    state: State,
    block: Vec<Assignment>,
    ranks: Option<RankTimer>,
    names: Names,
}

const WORLD_KEYS: &[(&str, &str)] = &[
    ("world size:", "world_size"),
    ("data-parallel size:", "data_parallel_size"),
    ("data-parallel-size:", "data_parallel_size"),
    ("context-parallel size:", "context_parallel_size"),
    ("tensor-model-parallel size:", "tensor_model_parallel_size"),
    (
        "pipeline-model-parallel size:",
        "pipeline_model_parallel_size",
    ),
];

impl Scanner<'_> {
    /// Ends an all-ranks timer: its readings become one (min, max) reading.
    fn flush_ranks(&mut self, line_no: usize) {
        if let Some((name, min, max, k)) = self.ranks.take() {
            if k > 0 {
                self.out.timers.push(TimerReading {
                    name,
                    min,
                    max,
                    line: line_no,
                });
            }
        }
    }

    /// A line inside the arguments block.
    fn args_line(&mut self, line_no: usize, line: &str, s: &str) -> Result<(), MegatronError> {
        if s.contains("end of arguments") {
            let block = std::mem::take(&mut self.block);
            if let Some(earlier) = self.out.args_header_line {
                same_job(&self.out.args, earlier, &block)?;
            }
            self.out.args = block;
            if let State::Args { header } = self.state {
                self.out.args_header_line = Some(header);
            }
            self.state = State::Normal;
        } else if is_args_header(s) {
            // A restarted job: the earlier block was cut short; keep the new one.
            if let State::Args { header } = self.state {
                self.out.warnings.push(Warning::at(
                    &Loc::new(self.path, header, 1),
                    "arguments",
                    format!("this arguments block is cut short by another at line {line_no}, which is used instead"),
                ));
            }
            self.block.clear();
            self.state = State::Args { header: line_no };
        } else if let Ok((_, (k, v))) = args_line(s) {
            self.block.push(Assignment {
                key: k.into(),
                value: v.into(),
                loc: Loc::new(self.path, line_no, col(line, v)),
            });
        }
        Ok(())
    }

    /// One `name ....: values` entry. `strict`: inside a block (after its header), where
    /// a value that is not a number is an error; a headerless entry that does not parse
    /// is simply not a timer.
    fn timer_entry(
        &mut self,
        line_no: usize,
        line: &str,
        name: &str,
        v: &str,
        strict: bool,
    ) -> Result<bool, MegatronError> {
        match timer_values(v) {
            Ok((r, (min, max))) if r.trim().is_empty() => {
                timer_range(self.path, line_no, line, v, name, &[min, max])?;
                self.out.timers.push(TimerReading {
                    name: self.names.get(name),
                    min,
                    max,
                    line: line_no,
                });
                Ok(true)
            }
            _ if strict => Err(timer_error(self.path, line_no, line, v, name)),
            _ => Ok(false),
        }
    }

    /// A line while in a timer block. `Ok(true)` when consumed; otherwise the block has
    /// ended and the line is read as a normal one.
    fn timer_block_line(
        &mut self,
        line_no: usize,
        line: &str,
        s: &str,
    ) -> Result<bool, MegatronError> {
        match timer_line(s) {
            TimerLine::Entry(name, v) => {
                self.flush_ranks(line_no);
                self.timer_entry(line_no, line, name, v, true)?;
                return Ok(true);
            }
            TimerLine::Name(name) => {
                self.flush_ranks(line_no);
                self.ranks = Some((self.names.get(name), f64::INFINITY, f64::NEG_INFINITY, 0));
                return Ok(true);
            }
            TimerLine::Rank(v) => {
                if let Some((n, lo, hi, k)) = self.ranks.as_mut() {
                    match first_number(v) {
                        Some(x) => {
                            timer_range(self.path, line_no, line, v, n, &[x])?;
                            *lo = lo.min(x);
                            *hi = hi.max(x);
                            *k += 1;
                        }
                        None => return Err(timer_error(self.path, line_no, line, v, n)),
                    }
                    return Ok(true);
                }
            }
            TimerLine::Other => {}
        }
        self.state = State::Normal;
        self.flush_ranks(line_no);
        Ok(false)
    }

    /// The old one-line style: ` time (ms) | forward-compute: 1234.56 | …`.
    fn one_line_timers(
        &mut self,
        line_no: usize,
        line: &str,
        s: &str,
    ) -> Result<(), MegatronError> {
        for seg in s["time (ms)".len()..].split('|') {
            let seg = seg.trim();
            if seg.is_empty() {
                continue;
            }
            let Some(p) = seg.rfind(':') else { continue };
            let (name, v) = (seg[..p].trim(), seg[p + 1..].trim());
            match first_number(v) {
                Some(x) => {
                    timer_range(self.path, line_no, line, v, name, &[x])?;
                    self.out.timers.push(TimerReading {
                        name: self.names.get(name),
                        min: x,
                        max: x,
                        line: line_no,
                    })
                }
                None => return Err(timer_error(self.path, line_no, line, v, name)),
            }
        }
        Ok(())
    }

    /// A line outside any block, classified by its first byte.
    fn normal_line(
        &mut self,
        line_no: usize,
        line: &str,
        s: &str,
        stamp: Option<&str>,
    ) -> Result<(), MegatronError> {
        let Some(&first) = s.as_bytes().first() else {
            return Ok(());
        };
        match first {
            b'i' if s.starts_with("iteration") => {
                let loc = Loc::new(self.path, line_no, col(line, s));
                if let Some(rec) = iteration_line(s, stamp, &loc)? {
                    self.out.iterations.push(rec);
                }
            }
            b'(' | b'm' | b't' if s.trim_end().ends_with("across ranks (ms):") => {
                self.state = State::Timers;
            }
            b't' if s.starts_with("time (ms)") => self.one_line_timers(line_no, line, s)?,
            b'-' if is_args_header(s) => {
                self.block.clear();
                self.state = State::Args { header: line_no };
            }
            b'>' => {
                let t = s.trim_start_matches('>').trim_start();
                if let Some(r) = t.strip_prefix("padded vocab") {
                    let keys = [
                        ("(size:", "vocab_size"),
                        ("(new size:", "padded_vocab_size"),
                    ];
                    push_numbers(&mut self.out.late, r, line, self.path, line_no, &keys);
                }
            }
            b'u' if s.starts_with("using world size:") => {
                push_numbers(&mut self.out.early, s, line, self.path, line_no, WORLD_KEYS)
            }
            // A timer block pasted without its header: entries with a dotted leader
            // whose values are numbers open the block.
            b'a'..=b'z' if s.contains(".:") => {
                if let TimerLine::Entry(name, v) = timer_line(s) {
                    if self.timer_entry(line_no, line, name, v, false)? {
                        self.state = State::Timers;
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn line(&mut self, line_no: usize, raw: &str) -> Result<(), MegatronError> {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let (s, stamp) = strip_prefixes(line);
        if let State::Args { .. } = self.state {
            return self.args_line(line_no, line, s);
        }
        if self.state == State::Timers && self.timer_block_line(line_no, line, s)? {
            return Ok(());
        }
        self.normal_line(line_no, line, s, stamp)
    }

    fn finish(mut self) -> Result<LogScan, MegatronError> {
        self.flush_ranks(0);
        if let State::Args { header } = self.state {
            return Err(MegatronError::at(
                &Loc::new(self.path, header, 1),
                "arguments",
                "the arguments block starting here is truncated: no `end of arguments` line follows",
            ));
        }
        Ok(self.out)
    }
}

/// Two complete arguments blocks in one log are one job restarted (its log appended) only
/// when they agree: the later block is kept when every argument both print has the same
/// value, and a value that differs is an error naming both lines (two jobs in one log
/// cannot be told apart from here). Arguments only one block prints are taken as they
/// are (a newer Megatron prints more).
fn same_job(
    earlier: &[Assignment],
    earlier_header: usize,
    later: &[Assignment],
) -> Result<(), MegatronError> {
    let before: std::collections::HashMap<&str, &Assignment> =
        earlier.iter().map(|a| (a.key.as_str(), a)).collect();
    for a in later {
        if let Some(b) = before.get(a.key.as_str()) {
            if b.value.trim() != a.value.trim() {
                return Err(MegatronError::at(
                    &a.loc,
                    &a.key,
                    format!(
                        "`{}` here but `{}` in the arguments block of line {earlier_header} \
                         (line {}): two different jobs in one log; split the log",
                        a.value.trim(),
                        b.value.trim(),
                        b.loc.line
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Scans a whole log. Fails on an arguments block that never ends, an iteration line
/// without a numeric elapsed time, or a timer entry whose value is not a number.
pub fn scan_log(path: &str, text: &str) -> Result<LogScan, MegatronError> {
    let mut sc = Scanner {
        path,
        out: LogScan::default(),
        state: State::Normal,
        block: Vec::new(),
        ranks: None,
        names: Names::default(),
    };
    for (idx, raw) in Lines(Some(text)).enumerate() {
        sc.line(idx + 1, raw)?;
    }
    sc.finish()
}
