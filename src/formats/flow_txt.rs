//! HPCC's open-loop flow list, `flow.txt`: the flow count on the first line, then
//! `src dst pg dport size start_s` per flow (`pg` 3 and `dport` 100 in every HPCC
//! example; `start_s` in seconds printed `%.9f`), sorted by start time. Parsimon's fork
//! puts a flow index first (7 fields). HPCC reads `size` into a `uint32`, so a writer must
//! split larger transfers ([`MAX_FLOW_BYTES`]).
//!
//! Real files are messy (HPCC's own `flow.txt` announces 2 flows, lists 256, then free
//! text): the reader takes every row that parses, stops at the first line that does not,
//! and returns what it skipped and any count mismatch as warnings.

use super::{numbered_lines, read_text};
use super::{FormatError, Warning};
use crate::units::{Bytes, Nanos, NodeId};
use std::fmt::Write as _;
use std::path::Path;

/// Largest `size` a flow row may carry (HPCC's `uint32_t`).
pub const MAX_FLOW_BYTES: u64 = u32::MAX as u64;

/// Which variant of the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// 6 fields.
    Hpcc,
    /// 7 fields, the flow index first (Parsimon's fork).
    Parsimon,
}

/// One flow row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowLine {
    /// Parsimon's leading id column, when present.
    pub id: Option<u64>,
    /// Source host.
    pub src: NodeId,
    /// Destination host.
    pub dst: NodeId,
    /// Priority group.
    pub pg: u32,
    /// Destination port.
    pub dport: u32,
    /// Bytes (at most [`MAX_FLOW_BYTES`] for HPCC to read it).
    pub size: Bytes,
    /// Start time.
    pub start: Nanos,
}

/// Parse seconds written as `%.9f` (or fewer digits) exactly into nanoseconds; digits
/// beyond the nanosecond are cut (only hand-written files have them).
pub fn parse_secs_exact(s: &str) -> Option<Nanos> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() && frac.is_empty()
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let whole: u64 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let digits = &frac[..frac.len().min(9)];
    let ns: u64 = if digits.is_empty() {
        0
    } else {
        digits.parse::<u64>().ok()? * 10u64.pow(9 - digits.len() as u32)
    };
    whole.checked_mul(1_000_000_000)?.checked_add(ns).map(Nanos)
}

/// Nanoseconds as HPCC's `%.9f` seconds.
pub fn format_secs(t: Nanos) -> String {
    format!("{}.{:09}", t.0 / 1_000_000_000, t.0 % 1_000_000_000)
}

/// The text of `flow.txt` for `flows` in the given order (Parsimon: the index in the
/// list as the id column).
pub fn to_string(flows: &[FlowLine], flavor: Flavor) -> String {
    let mut s = format!("{}\n", flows.len());
    for (k, f) in flows.iter().enumerate() {
        if flavor == Flavor::Parsimon {
            let _ = write!(s, "{} ", f.id.unwrap_or(k as u64));
        }
        let _ = writeln!(
            s,
            "{} {} {} {} {} {}",
            f.src,
            f.dst,
            f.pg,
            f.dport,
            f.size.0,
            format_secs(f.start)
        );
    }
    s
}

/// Read a `flow.txt` (HPCC: 6 fields; Parsimon: 7, id first).
pub fn read(path: &Path) -> Result<(Vec<FlowLine>, Vec<Warning>), FormatError> {
    parse(path, &read_text(path)?)
}

/// [`read`] of text already in memory; `path` names it in errors and warnings.
pub fn parse(path: &Path, text: &str) -> Result<(Vec<FlowLine>, Vec<Warning>), FormatError> {
    let mut lines = numbered_lines(text).map(|(n, l)| (n, l.trim()));
    let mut warnings = Vec::new();
    let (hline, header) = lines
        .find(|(_, l)| !l.is_empty())
        .ok_or_else(|| FormatError::syntax(path, 1, "count", "empty file"))?;
    let count: u64 = header.parse().map_err(|_| {
        FormatError::syntax(
            path,
            hline,
            "count",
            format!("expected the number of flows, found `{header}`"),
        )
    })?;
    let mut flows = Vec::new();
    for (no, l) in lines {
        if l.is_empty() {
            continue;
        }
        match row(l) {
            Ok(f) => flows.push(f),
            Err(why) => {
                warnings.push(Warning::new(
                    path,
                    no,
                    format!("{why}; ignoring it and the rest of the file: `{l}`"),
                ));
                break;
            }
        }
    }
    if flows.len() as u64 != count {
        warnings.push(Warning::new(
            path,
            hline,
            format!("header says {count} flows, file has {}", flows.len()),
        ));
    }
    Ok((flows, warnings))
}

fn row(l: &str) -> Result<FlowLine, String> {
    let t: Vec<&str> = l.split_whitespace().collect();
    let (id, rest) = match t.len() {
        6 => (None, &t[..]),
        7 => (
            Some(t[0].parse::<u64>().map_err(|_| "id: not an integer")?),
            &t[1..],
        ),
        n => return Err(format!("{n} fields, not a flow row (6, or 7 with an id)")),
    };
    let int = |i: usize, name: &str| -> Result<u64, String> {
        rest[i]
            .parse()
            .map_err(|_| format!("{name}: `{}` is not an integer", rest[i]))
    };
    let small = |i: usize, name: &str| -> Result<u32, String> {
        u32::try_from(int(i, name)?).map_err(|_| format!("{name}: `{}` is out of range", rest[i]))
    };
    Ok(FlowLine {
        id,
        src: NodeId(small(0, "src")?),
        dst: NodeId(small(1, "dst")?),
        pg: small(2, "pg")?,
        dport: small(3, "dport")?,
        size: Bytes(int(4, "size")?),
        start: parse_secs_exact(rest[5])
            .ok_or_else(|| format!("start: `{}` is not seconds like 2.000000100", rest[5]))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn seconds_parse_exactly_to_the_nanosecond() {
        assert_eq!(parse_secs_exact("2"), Some(Nanos(2_000_000_000)));
        assert_eq!(parse_secs_exact("0.000000100"), Some(Nanos(100)));
        assert_eq!(parse_secs_exact("1.5"), Some(Nanos(1_500_000_000)));
        assert_eq!(parse_secs_exact("0.1234567891"), Some(Nanos(123_456_789)));
        assert_eq!(parse_secs_exact("-1"), None);
        assert_eq!(parse_secs_exact("."), None);
        assert_eq!(parse_secs_exact("99999999999999999999"), None);
        assert_eq!(format_secs(Nanos(1_000_000_123)), "1.000000123");
    }

    #[test]
    fn both_flavours_round_trip() {
        let flows = vec![FlowLine {
            id: Some(0),
            src: NodeId(1),
            dst: NodeId(7),
            pg: 3,
            dport: 100,
            size: Bytes(4096),
            start: Nanos(2_000_000_100),
        }];
        let (back, w) = parse(Path::new("f"), &to_string(&flows, Flavor::Parsimon)).unwrap();
        assert!(w.is_empty());
        assert_eq!(back, flows);
        let (back, _) = parse(Path::new("f"), &to_string(&flows, Flavor::Hpcc)).unwrap();
        assert_eq!(back[0].id, None);
        assert_eq!(back[0].start, flows[0].start);
    }

    proptest! {
        #[test]
        fn formatted_seconds_read_back_unchanged(ns in 0u64..u64::MAX / 2) {
            prop_assert_eq!(parse_secs_exact(&format_secs(Nanos(ns))), Some(Nanos(ns)));
        }
    }
}
