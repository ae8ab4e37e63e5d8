//! Single collectives as nccl-tests measures them (`ina3d trace --collective-bench`): one
//! collective per size over every group of a kind, each size after the previous one has
//! finished everywhere. The collectives go through the generator's own lowering (host
//! algorithm, NCCL channels, NVLink records, INA trees), so a bench measures exactly what a
//! model's collectives would do; [`crate::fct::bench`] turns a run's per-record times into
//! algbw/busbw per size.
//!
//! A bench trace is an ordinary trace whose header carries the keys of [`BenchSpec`]
//! (`collective_bench`, `bench_group`, `bench_group_size`, `bench_groups`, `bench_sizes`).
//! Between two sizes it holds one *barrier*: a zero-length compute record on the first
//! GPU that waits for every rank's last record; a bench has no other compute, so the
//! barriers delimit the sizes in any copy of the records (a glue `trace.txt` included).

use super::{TraceError, TraceHeader};
use crate::keyword::keyword_enum;
use crate::schedule::CollKind;
use crate::units::Bytes;

/// Which groups of the job's layout run the collective (all of a kind at once, as in a
/// training step).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BenchGroup {
    /// Every tensor-parallel group (class `tp`).
    Tp,
    /// Every data-parallel group (class `dp`).
    Dp,
    /// One group of every rank, in rank order (class `dp`).
    All,
}

keyword_enum!(BenchGroup, "bench group", BenchGroup::Tp => "tp", BenchGroup::Dp => "dp", BenchGroup::All => "all");

/// What to measure: a collective, its sizes, the groups that run it.
#[derive(Clone, Debug, PartialEq)]
pub struct CollectiveBench {
    /// The collective.
    pub kind: CollKind,
    /// Sizes S in nccl-tests' sense (the all-reduce buffer, the all-gather output, the
    /// reduce-scatter input, each rank's all-to-all buffer), in run order.
    pub sizes: Vec<Bytes>,
    /// The groups.
    pub group: BenchGroup,
}

/// A bench as its trace header records it: the request and the layout it ran on.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchSpec {
    /// The collective.
    pub kind: CollKind,
    /// Which groups.
    pub group: BenchGroup,
    /// Members per group (n of the busbw factor).
    pub group_size: u32,
    /// Groups running at once.
    pub groups: u32,
    /// Sizes, in run order.
    pub sizes: Vec<Bytes>,
}

/// Header key that marks a bench trace (its value: the collective).
pub const BENCH_HEADER_KEY: &str = "collective_bench";

/// The most sizes one bench takes (a `..` range of doublings has at most 64).
pub const MAX_BENCH_SIZES: usize = 64;

impl BenchSpec {
    /// nccl-tests' bus-bandwidth factor for this collective and group size.
    pub fn busbw_factor(&self) -> f64 {
        self.kind.busbw_factor(self.group_size)
    }

    /// Writes the spec into a trace header.
    pub fn write_header(&self, h: &mut TraceHeader) {
        h.set(BENCH_HEADER_KEY, self.kind)
            .set("bench_group", self.group)
            .set("bench_group_size", self.group_size)
            .set("bench_groups", self.groups)
            .set(
                "bench_sizes",
                self.sizes
                    .iter()
                    .map(|b| b.0.to_string())
                    .collect::<Vec<_>>()
                    .join(";"),
            );
    }

    /// The spec of a bench trace's header; `None` when the header does not mark a bench.
    /// Errors name the key at fault.
    pub fn from_header(h: &TraceHeader) -> Result<Option<BenchSpec>, TraceError> {
        let Some(kind) = h.get(BENCH_HEADER_KEY) else {
            return Ok(None);
        };
        let bad = |key: &str, msg: String| TraceError::Metadata {
            key: key.into(),
            msg,
        };
        let get = |key: &str| h.get(key).ok_or_else(|| bad(key, "missing".into()));
        let count = |key: &str| -> Result<u32, TraceError> {
            let v = get(key)?;
            match v.trim().parse::<u32>() {
                Ok(n) if n >= 1 => Ok(n),
                _ => Err(bad(key, format!("`{v}` is not a positive integer"))),
            }
        };
        let kind: CollKind = kind.parse().map_err(|e| bad(BENCH_HEADER_KEY, e))?;
        let group: BenchGroup = get("bench_group")?
            .parse()
            .map_err(|e| bad("bench_group", e))?;
        let mut sizes = Vec::new();
        for v in get("bench_sizes")?.split(';').map(str::trim) {
            if sizes.len() == MAX_BENCH_SIZES {
                return Err(bad(
                    "bench_sizes",
                    format!("more than {MAX_BENCH_SIZES} sizes"),
                ));
            }
            match v.parse::<u64>() {
                Ok(b) if b > 0 => sizes.push(Bytes(b)),
                _ => return Err(bad("bench_sizes", format!("`{v}` is not a positive size"))),
            }
        }
        Ok(Some(BenchSpec {
            kind,
            group,
            group_size: count("bench_group_size")?,
            groups: count("bench_groups")?,
            sizes,
        }))
    }
}

/// Parse `--sizes`: a range `A..B` of powers of two (A, 2A, 4A, … up to B, as nccl-tests'
/// `-b A -e B -f 2`), or a comma-separated list in run order. Each size is a whole number
/// with an optional binary unit ([`Bytes::parse_size`]).
pub fn parse_sizes(s: &str) -> Result<Vec<Bytes>, String> {
    // every size names the flag, and stays within the largest message a trace holds (a
    // record past 2^50 B is one its reader refuses, and one the lowering overflows on)
    let size = |p: &str| -> Result<Bytes, String> {
        let b = Bytes::parse_size(p).map_err(|e| format!("--sizes `{s}`: {e}"))?;
        if u128::from(b.0) > crate::schedule::MAX_MESSAGE_BYTES {
            return Err(format!(
                "--sizes `{s}`: {} B is past the largest message modelled (2^50 B)",
                b.0
            ));
        }
        Ok(b)
    };
    let sizes = if let Some((a, b)) = s.split_once("..") {
        let (lo, hi) = (size(a)?, size(b)?);
        if lo.0 == 0 {
            return Err(format!("--sizes `{s}`: a range starts at a positive size"));
        }
        if hi < lo {
            return Err(format!(
                "--sizes `{s}`: the range ends ({} B) below where it starts ({} B)",
                hi.0, lo.0
            ));
        }
        let mut v = vec![lo];
        while let Some(next) = v.last().and_then(|x| x.0.checked_mul(2)) {
            if next > hi.0 {
                break;
            }
            v.push(Bytes(next));
        }
        v
    } else {
        let v = s
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(size)
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(p) = v.iter().position(|b| b.0 == 0) {
            return Err(format!("--sizes `{s}`: size {} is zero", p + 1));
        }
        v
    };
    if sizes.is_empty() {
        return Err(format!(
            "--sizes `{s}`: no size (expected A..B, e.g. 1MiB..1GiB, or a list, e.g. 1MiB,8MiB)"
        ));
    }
    if sizes.len() > MAX_BENCH_SIZES {
        return Err(format!(
            "--sizes `{s}`: {} sizes, at most {MAX_BENCH_SIZES}",
            sizes.len()
        ));
    }
    Ok(sizes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_doubles_from_its_start_to_its_end() {
        let v = parse_sizes("1MiB..8MiB").unwrap();
        assert_eq!(
            v,
            vec![
                Bytes(1 << 20),
                Bytes(2 << 20),
                Bytes(4 << 20),
                Bytes(8 << 20)
            ]
        );
        // an end that is not reached by doubling stops below it
        assert_eq!(
            parse_sizes("3..13").unwrap(),
            vec![Bytes(3), Bytes(6), Bytes(12)]
        );
        assert_eq!(parse_sizes("1GiB..1GiB").unwrap(), vec![Bytes(1 << 30)]);
    }

    #[test]
    fn a_list_keeps_its_order() {
        assert_eq!(
            parse_sizes("8M, 1K ,65536").unwrap(),
            vec![Bytes(8 << 20), Bytes(1024), Bytes(65536)]
        );
    }

    #[test]
    fn bad_sizes_are_named() {
        let e = parse_sizes("1MB..1GiB").unwrap_err();
        assert!(e.contains("unknown unit `mb`"), "{e}");
        let e = parse_sizes("1GiB..1MiB").unwrap_err();
        assert!(e.contains("ends (1048576 B) below where it starts"), "{e}");
        assert!(parse_sizes("").unwrap_err().contains("no size"));
        assert!(parse_sizes("0..4").unwrap_err().contains("positive"));
        assert!(parse_sizes("4,0").unwrap_err().contains("size 2 is zero"));
        assert!(parse_sizes("MiB").unwrap_err().contains("whole number"));
        assert!(parse_sizes("99999999999999999999")
            .unwrap_err()
            .contains("too large"));
        assert!(parse_sizes("20000000TiB").unwrap_err().contains("64 bits"));
        let many = (1..=65)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(",");
        assert!(parse_sizes(&many).unwrap_err().contains("at most 64"));
    }

    #[test]
    fn the_spec_round_trips_through_a_header_and_bad_keys_are_named() {
        let spec = BenchSpec {
            kind: CollKind::ReduceScatter,
            group: BenchGroup::Dp,
            group_size: 8,
            groups: 2,
            sizes: vec![Bytes(1024), Bytes(4096)],
        };
        let mut h = TraceHeader::new();
        assert_eq!(BenchSpec::from_header(&h).unwrap(), None);
        spec.write_header(&mut h);
        assert_eq!(BenchSpec::from_header(&h).unwrap(), Some(spec));
        h.set("bench_sizes", "1024;x");
        let e = BenchSpec::from_header(&h).unwrap_err().to_string();
        assert!(e.contains("bench_sizes") && e.contains("`x`"), "{e}");
        h.set("bench_sizes", "1024").set("bench_group_size", "0");
        let e = BenchSpec::from_header(&h).unwrap_err().to_string();
        assert!(e.contains("bench_group_size"), "{e}");
        h.set(BENCH_HEADER_KEY, "broadcast");
        let e = BenchSpec::from_header(&h).unwrap_err().to_string();
        assert!(
            e.contains("collective_bench") && e.contains("broadcast"),
            "{e}"
        );
    }
}
