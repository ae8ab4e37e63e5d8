//! The deterministic fuzz harness shared by `tests/fuzz_readers.rs` and
//! `tests/fuzz_flags.rs` (issue 37, item 7): a fixed-seed generator, the structure-aware
//! mutations of a valid corpus file, and the run of `ina3d` with a per-case time limit whose
//! outcome is judged by one rule — exit 0 with no infinite or NaN number in what it wrote,
//! or exit 2 with an `error:` naming the input (file, flag); never a panic, a signal, a
//! hang or another status.
//!
//! Cases per reader: `INA3D_FUZZ_CASES` (default: each target's own); the seed of case
//! `i` of reader `r` is fixed, so every run tries the same mutations, and a larger budget
//! tries the same ones first and then more. `INA3D_FUZZ_BIN` runs another build of the same
//! sources (a release binary) instead of the test's own.

#![allow(dead_code)] // each test binary uses a part

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The crate root, where the commands run (corpus files name inputs relative to it).
pub const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// How long one case may run before it counts as a hang (a debug build on a loaded
/// machine: a valid case of the slowest reader takes about a second).
pub const CASE_LIMIT: Duration = Duration::from_secs(30);

/// `INA3D_FUZZ_CASES`, else `default`.
pub fn cases(default: usize) -> usize {
    std::env::var("INA3D_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// SplitMix64: a fixed, dependency-free generator, so a case is the same on every run.
pub struct Rng(u64);

impl Rng {
    /// The generator of case `case` of the target named `name`.
    pub fn new(name: &str, case: usize) -> Rng {
        // FNV-1a of the name: the seed does not depend on the order targets run in
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in name.bytes() {
            h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
        Rng(h ^ (case as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

/// The values a field is set to: the ones that have wrapped, overflowed, blown up or been
/// read as absent somewhere before (issue 37).
pub const EXTREMES: [&str; 22] = [
    "0",
    "-1",
    "1",
    "4294967296",
    "1125899906842625", // 2^50 + 1
    "9007199254740992", // 2^53
    "9007199254740993",
    "18446744073709551615", // u64::MAX
    "18446744073709551616",
    "-9223372036854775809",
    "1e308",
    "-1e308",
    "1e-300",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "infinity",
    "",
    "0x10",
    "1.5",
    "\"\"",
];

/// One way a valid file is broken. `Field` is the structure-aware one: a value (a token
/// between separators, a number when the file has any) replaced by an extreme.
#[derive(Clone)]
pub enum Mutation {
    /// The file as committed: must be accepted.
    None,
    /// The `k`-th token (numeric ones first chosen) set to `value`.
    Field { token: usize, value: Vec<u8> },
    /// Cut after `at` bytes.
    Truncate(usize),
    /// Line `i` written twice (a key or a row given twice).
    DuplicateLine(usize),
    /// Line `i` left out.
    DropLine(usize),
    /// A UTF-8 byte-order mark before the first byte.
    Bom,
    /// CRLF line ends.
    Crlf,
    /// The whole file in UTF-16LE with its BOM.
    Utf16,
    /// A byte that is no UTF-8 (0xFF) or a NUL inserted at `at`.
    Byte { at: usize, byte: u8 },
    /// Line `i` repeated into one 64 KiB line.
    LongLine(usize),
}

impl Mutation {
    /// A mutation for case `rng` of a file of `len` bytes and `lines` lines; case 0 is
    /// always the file as it is.
    pub fn draw(rng: &mut Rng, case: usize, len: usize, lines: usize) -> Mutation {
        if case == 0 {
            return Mutation::None;
        }
        let lines = lines.max(1);
        match rng.below(20) {
            0..=9 => {
                let value = match rng.below(8) {
                    // a very long number or name
                    0 => "9".repeat(400).into_bytes(),
                    1 => b"\xff\xfe".to_vec(),
                    2 => b"1\x002".to_vec(),
                    _ => rng.pick(&EXTREMES).as_bytes().to_vec(),
                };
                Mutation::Field {
                    token: rng.below(1 << 16),
                    value,
                }
            }
            10 | 11 => Mutation::Truncate(rng.below(len.max(1))),
            12 | 13 => Mutation::DuplicateLine(rng.below(lines)),
            14 => Mutation::DropLine(rng.below(lines)),
            15 => Mutation::Bom,
            16 => Mutation::Crlf,
            17 => Mutation::Utf16,
            18 => Mutation::Byte {
                at: rng.below(len.max(1)),
                byte: *rng.pick(&[0u8, 0xff, 0xc3]),
            },
            _ => Mutation::LongLine(rng.below(lines)),
        }
    }

    /// `text` with the mutation applied.
    pub fn apply(&self, text: &[u8]) -> Vec<u8> {
        match self {
            Mutation::None => text.to_vec(),
            Mutation::Field { token, value } => {
                let spans = tokens(text);
                let numeric: Vec<&(usize, usize)> = spans
                    .iter()
                    .filter(|(a, b)| text[*a..*b].iter().any(u8::is_ascii_digit))
                    .collect();
                // three in four on a number: the fields that become sizes and times
                let pool: Vec<&(usize, usize)> = if !numeric.is_empty() && token % 4 != 0 {
                    numeric
                } else {
                    spans.iter().collect()
                };
                match pool.get(token / 4 % pool.len().max(1)) {
                    Some(&&(a, b)) => [&text[..a], value, &text[b..]].concat(),
                    None => text.to_vec(),
                }
            }
            Mutation::Truncate(at) => text[..(*at).min(text.len())].to_vec(),
            Mutation::DuplicateLine(i) | Mutation::DropLine(i) | Mutation::LongLine(i) => {
                let mut lines: Vec<Vec<u8>> = text
                    .split_inclusive(|b| *b == b'\n')
                    .map(<[u8]>::to_vec)
                    .collect();
                if lines.is_empty() {
                    return text.to_vec();
                }
                let i = i % lines.len();
                match self {
                    Mutation::DuplicateLine(_) => lines.insert(i, lines[i].clone()),
                    Mutation::DropLine(_) => {
                        lines.remove(i);
                    }
                    _ => {
                        let body: Vec<u8> =
                            lines[i].iter().copied().filter(|b| *b != b'\n').collect();
                        let mut long = body.repeat((65_536 / body.len().max(1)).max(1));
                        long.push(b'\n');
                        lines[i] = long;
                    }
                }
                lines.concat()
            }
            Mutation::Bom => [b"\xef\xbb\xbf".as_slice(), text].concat(),
            Mutation::Crlf => {
                let mut out = Vec::with_capacity(text.len() * 2);
                for &b in text {
                    if b == b'\n' {
                        out.push(b'\r');
                    }
                    out.push(b);
                }
                out
            }
            Mutation::Utf16 => {
                let mut out = vec![0xff, 0xfe];
                for u in String::from_utf8_lossy(text).encode_utf16() {
                    out.extend_from_slice(&u.to_le_bytes());
                }
                out
            }
            Mutation::Byte { at, byte } => {
                let at = (*at).min(text.len());
                [&text[..at], &[*byte][..], &text[at..]].concat()
            }
        }
    }

    /// Whether the mutated file must still be accepted (only the unmutated one).
    pub fn must_pass(&self) -> bool {
        matches!(self, Mutation::None)
    }
}

impl std::fmt::Debug for Mutation {
    /// Readable in a failure list: a field's value shown escaped and cut at 40 characters.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mutation::None => write!(f, "unmutated"),
            Mutation::Field { token, value } => {
                let v: String = value.escape_ascii().to_string().chars().take(40).collect();
                write!(f, "field {token} = \"{v}\"")
            }
            Mutation::Truncate(at) => write!(f, "cut at byte {at}"),
            Mutation::DuplicateLine(i) => write!(f, "line {i} doubled"),
            Mutation::DropLine(i) => write!(f, "line {i} dropped"),
            Mutation::Bom => write!(f, "BOM"),
            Mutation::Crlf => write!(f, "CRLF"),
            Mutation::Utf16 => write!(f, "UTF-16LE"),
            Mutation::Byte { at, byte } => write!(f, "byte {byte:#04x} inserted at {at}"),
            Mutation::LongLine(i) => write!(f, "line {i} made 64 KiB long"),
        }
    }
}

/// Byte spans of the tokens between separators (whitespace, `, ; : = " ' [ ] { } ( )`).
pub fn tokens(text: &[u8]) -> Vec<(usize, usize)> {
    let sep = |b: u8| b.is_ascii_whitespace() || b",;:=\"'[]{}()".contains(&b);
    let mut out = Vec::new();
    let mut start = None;
    for (i, &b) in text.iter().enumerate() {
        match (sep(b), start) {
            (true, Some(s)) => {
                out.push((s, i));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push((s, text.len()));
    }
    out
}

/// What one run of `ina3d` did.
#[derive(Debug)]
pub struct Outcome {
    /// Exit status; `None` when a signal ended it or it was killed at [`CASE_LIMIT`].
    pub code: Option<i32>,
    pub timed_out: bool,
    pub stdout: Vec<u8>,
    pub stderr: String,
    pub secs: f64,
}

/// Runs `ina3d ARGS` in the crate root, killing it (by its own pid) past `limit`.
pub fn ina3d(args: &[String], limit: Duration) -> Outcome {
    let t0 = Instant::now();
    // INA3D_FUZZ_BIN: another build of the same sources (a release binary, for long runs)
    let bin = std::env::var_os("INA3D_FUZZ_BIN")
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_ina3d")), PathBuf::from);
    let mut child = Command::new(bin)
        .args(args)
        .current_dir(ROOT)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ina3d");
    // drained on threads, so a chatty case cannot block on a full pipe
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let err_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let mut timed_out = false;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for ina3d") {
            break s;
        }
        if t0.elapsed() > limit {
            timed_out = true;
            let _ = child.kill();
            break child.wait().expect("wait for ina3d");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Outcome {
        code: if timed_out { None } else { status.code() },
        timed_out,
        stdout: out_t.join().unwrap(),
        stderr: String::from_utf8_lossy(&err_t.join().unwrap()).into_owned(),
        secs: t0.elapsed().as_secs_f64(),
    }
}

/// A non-finite number in written text: `inf`, `-inf`, `infinity` or `nan` as a whole
/// token (any case), with the line it is on.
pub fn non_finite(text: &str) -> Option<String> {
    for line in text.lines() {
        let hit = line
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '_'))
            .any(|t| {
                let t = t.to_ascii_lowercase();
                t == "inf" || t == "infinity" || t == "nan"
            });
        if hit {
            return Some(line.chars().take(200).collect());
        }
    }
    None
}

/// The text files under `dir` (recursively; gzip members and binary files skipped).
pub fn written_text(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(written_text(&p));
        } else if let Ok(t) = std::fs::read(&p) {
            if let Ok(s) = String::from_utf8(t) {
                out.push((p, s));
            }
        }
    }
    out
}

/// The judgement of one case: `None` when it is fine, else what is wrong.
///
/// - never a signal, a panic, a time-out, or a status other than 0 and 2;
/// - exit 2: one `error:` message naming one of `names` (the file, its directory or the
///   flag), without raw NUL or BOM bytes echoed;
/// - exit 0: no `inf`/`NaN` in stdout or in any text file under `out`; and exit 0 when
///   `must_pass`.
pub fn judge(o: &Outcome, names: &[&str], out: Option<&Path>, must_pass: bool) -> Option<String> {
    if o.timed_out {
        return Some(format!("no answer within its time limit ({:.0} s)", o.secs));
    }
    if o.stderr.contains("panicked") || o.code == Some(101) {
        return Some(format!("panic: {}", tail(&o.stderr)));
    }
    match o.code {
        Some(0) => {
            let stdout = String::from_utf8_lossy(&o.stdout);
            if let Some(l) = non_finite(&stdout) {
                return Some(format!("non-finite number on stdout: {l}"));
            }
            for (p, t) in out.map(written_text).unwrap_or_default() {
                if let Some(l) = non_finite(&t) {
                    return Some(format!("non-finite number in {}: {l}", p.display()));
                }
            }
            None
        }
        Some(2) if must_pass => Some(format!("valid input refused: {}", tail(&o.stderr))),
        Some(2) => {
            if !o.stderr.contains("error:") {
                return Some(format!(
                    "exit 2 without an error message: {}",
                    tail(&o.stderr)
                ));
            }
            if o.stderr.contains('\0') || o.stderr.contains('\u{feff}') {
                return Some(format!(
                    "raw NUL or BOM in the message: {}",
                    tail(&o.stderr)
                ));
            }
            if !names.iter().any(|n| o.stderr.contains(n)) {
                return Some(format!(
                    "the message names none of {names:?}: {}",
                    tail(&o.stderr)
                ));
            }
            None
        }
        c => Some(format!("exit {c:?}: {}", tail(&o.stderr))),
    }
}

fn tail(s: &str) -> String {
    let s = s.trim();
    let start = s.len().saturating_sub(600);
    let mut i = start;
    while !s.is_char_boundary(i) {
        i += 1;
    }
    s[i..].to_string()
}

/// Fails the test with every failed case listed (its target, number, mutation and what
/// went wrong), after all cases ran; failing inputs are kept under the target's temporary
/// directory for a look.
pub fn report(target: &str, failures: &[String], cases: usize, refused: usize, secs: f64) {
    eprintln!(
        "{target}: {cases} cases in {secs:.1} s ({refused} refused with exit 2), {} failed",
        failures.len()
    );
    if !failures.is_empty() {
        panic!(
            "{target}: {} of {cases} cases failed:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }
}

/// Where a failing input is kept: `<cargo tmp>/fuzz-failures/<target>-<case>-<name>`.
pub fn keep(target: &str, case: usize, name: &str, bytes: &[u8]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-failures");
    let _ = std::fs::create_dir_all(&dir);
    let p = dir.join(format!("{target}-{case}-{name}"));
    let _ = std::fs::write(&p, bytes);
    p
}
