//! algbw and busbw per size of a collective-bench trace ([`crate::trace::bench`]), as
//! nccl-tests defines them: `algbw = S / t` and `busbw = algbw × factor`, the factor
//! `2(n−1)/n` for all-reduce and `(n−1)/n` for reduce-scatter, all-gather and all-to-all
//! ([`crate::schedule::CollKind::busbw_factor`]).
//!
//! `t` of size k is the time from the end of the barrier before it (0 for the first size)
//! to the end of the barrier after it: every group's collective of that size, from the
//! moment all ranks could start to the moment the last rank finished. nccl-tests times
//! each rank from its own launch and averages many repetitions; here each size runs once,
//! so `t` includes the first step's latency and the slowest group's finish.

use super::{FctError, FctRow};
use crate::record::{FlowRecord, Mode};
use crate::units::Bytes;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// One size of a bench run, as `bench.csv` holds it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchRow {
    /// The collective (`all-reduce`, …).
    pub collective: String,
    /// Which groups ran it (`tp`, `dp`, `all`).
    pub group: String,
    /// Members per group (n).
    pub group_size: u32,
    /// Size S in bytes.
    pub size_bytes: u64,
    /// Time of this size, ns (see the module docs).
    pub time_ns: u64,
    /// `S / t`, GB/s (10⁹ bytes per second).
    pub algbw_gbs: f64,
    /// `algbw × factor`, GB/s.
    pub busbw_gbs: f64,
}

/// Why a run's times cannot be read as a bench.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The records do not have one barrier per size.
    #[error("not a collective-bench run: {0}")]
    NotABench(String),
    /// The times themselves are unusable.
    #[error(transparent)]
    Fct(#[from] FctError),
}

/// What identifies the bench in each row.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchLabels {
    /// The collective's name.
    pub collective: String,
    /// The group kind's name.
    pub group: String,
    /// Members per group.
    pub group_size: u32,
    /// nccl-tests' busbw factor for this collective and n.
    pub busbw_factor: f64,
}

/// algbw/busbw per size from a run of a bench trace: `records` (any order; a bench's
/// compute records are its barriers, one per size) and the run's `rows`.
pub fn bench_rows(
    labels: &BenchLabels,
    sizes: &[Bytes],
    records: &[FlowRecord],
    rows: &[FctRow],
) -> Result<Vec<BenchRow>, BenchError> {
    let mut barriers: Vec<u64> = records
        .iter()
        .filter(|r| r.mode == Mode::Compute)
        .map(|r| r.id.0)
        .collect();
    barriers.sort_unstable();
    if barriers.len() != sizes.len() {
        return Err(BenchError::NotABench(format!(
            "{} sizes but {} barrier (compute) records",
            sizes.len(),
            barriers.len()
        )));
    }
    let end: HashMap<u64, &FctRow> = rows.iter().map(|r| (r.flow_id, r)).collect();
    let mut out = Vec::with_capacity(sizes.len());
    let mut prev = 0u64;
    for (k, (&b, &size)) in barriers.iter().zip(sizes).enumerate() {
        let row = end.get(&b).ok_or(FctError::MissingRow(b))?;
        let t = row
            .end_ns
            .checked_sub(prev)
            .filter(|&t| t > 0)
            .ok_or_else(|| {
                BenchError::NotABench(format!(
                    "size {} ({} B) ends at {} ns, not after the previous size ({prev} ns)",
                    k + 1,
                    size.0,
                    row.end_ns
                ))
            })?;
        prev = row.end_ns;
        let algbw = size.0 as f64 / t as f64;
        out.push(BenchRow {
            collective: labels.collective.clone(),
            group: labels.group.clone(),
            group_size: labels.group_size,
            size_bytes: size.0,
            time_ns: t,
            algbw_gbs: algbw,
            busbw_gbs: algbw * labels.busbw_factor,
        });
    }
    Ok(out)
}

/// One size of a bench on both back-ends (`compare/bench.csv`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchComparison {
    /// Size S in bytes.
    pub size_bytes: u64,
    /// Replayer time, ns.
    pub replay_time_ns: u64,
    /// ns-3 time, ns.
    pub ns3_time_ns: u64,
    /// Replayer busbw, GB/s.
    pub replay_busbw_gbs: f64,
    /// ns-3 busbw, GB/s.
    pub ns3_busbw_gbs: f64,
    /// `(replay − ns3) / ns3` of the busbw (positive: the replayer is faster).
    pub busbw_rel_error: f64,
}

/// Joins two runs' `bench.csv` rows size by size; an error when they are not runs of the
/// same bench (collective, group or sizes differ).
pub fn compare_bench(
    replay: &[BenchRow],
    ns3: &[BenchRow],
) -> Result<Vec<BenchComparison>, BenchError> {
    let key = |r: &BenchRow| {
        (
            r.collective.clone(),
            r.group.clone(),
            r.group_size,
            r.size_bytes,
        )
    };
    if replay.len() != ns3.len() || replay.iter().zip(ns3).any(|(a, b)| key(a) != key(b)) {
        return Err(BenchError::NotABench(
            "the two bench.csv files are not runs of the same bench (collective, group or sizes differ)".into(),
        ));
    }
    Ok(replay
        .iter()
        .zip(ns3)
        .map(|(r, n)| BenchComparison {
            size_bytes: r.size_bytes,
            replay_time_ns: r.time_ns,
            ns3_time_ns: n.time_ns,
            replay_busbw_gbs: r.busbw_gbs,
            ns3_busbw_gbs: n.busbw_gbs,
            busbw_rel_error: (r.busbw_gbs - n.busbw_gbs) / n.busbw_gbs,
        })
        .collect())
}

/// The table nccl-tests prints, one line per size: size, time (µs), algbw, busbw (GB/s).
pub fn bench_table(rows: &[BenchRow]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    if let Some(r) = rows.first() {
        let _ = writeln!(
            s,
            "# {} over {} groups of {} GPUs (busbw = algbw x nccl-tests factor)",
            r.collective, r.group, r.group_size
        );
    }
    let _ = writeln!(
        s,
        "# {:>14} {:>12} {:>10} {:>10}",
        "size (B)", "time (us)", "algbw", "busbw"
    );
    let _ = writeln!(
        s,
        "# {:>14} {:>12} {:>10} {:>10}",
        "", "", "(GB/s)", "(GB/s)"
    );
    for r in rows {
        let _ = writeln!(
            s,
            "  {:>14} {:>12.2} {:>10.3} {:>10.3}",
            r.size_bytes,
            r.time_ns as f64 / 1e3,
            r.algbw_gbs,
            r.busbw_gbs
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Class;
    use crate::units::{FlowId, NodeId};

    fn rec(id: u64, mode: Mode) -> FlowRecord {
        FlowRecord {
            id: FlowId(id),
            src: NodeId(0),
            dst: NodeId(if mode == Mode::Compute { 0 } else { 1 }),
            bytes: Bytes(if mode == Mode::Compute { 0 } else { 10 }),
            mode,
            class: if mode == Mode::Compute {
                Class::Compute
            } else {
                Class::Dp
            },
            ..FlowRecord::default()
        }
    }

    fn row(id: u64, end: u64) -> FctRow {
        FctRow {
            flow_id: id,
            src: 0,
            dst: 0,
            mode: Mode::Compute,
            class: Class::Compute,
            size_bytes: 0,
            start_ns: end,
            end_ns: end,
            fct_ns: 0,
            standalone_fct_ns: 0,
        }
    }

    #[test]
    fn each_size_lasts_from_the_barrier_before_it_to_the_barrier_after_it() {
        let labels = BenchLabels {
            collective: "all-reduce".into(),
            group: "all".into(),
            group_size: 4,
            busbw_factor: 1.5,
        };
        let recs = [
            rec(0, Mode::Net),
            rec(1, Mode::Compute),
            rec(2, Mode::Net),
            rec(3, Mode::Compute),
        ];
        let rows = [row(1, 1_000), row(3, 5_000)];
        let b = bench_rows(&labels, &[Bytes(2_000), Bytes(8_000)], &recs, &rows).unwrap();
        assert_eq!((b[0].time_ns, b[1].time_ns), (1_000, 4_000));
        // 2,000 B in 1 µs = 2 GB/s; busbw × 1.5
        assert_eq!((b[0].algbw_gbs, b[0].busbw_gbs), (2.0, 3.0));
        assert_eq!((b[1].algbw_gbs, b[1].busbw_gbs), (2.0, 3.0));
        assert!(bench_table(&b).contains("all-reduce over all groups of 4 GPUs"));
        // one barrier short of the sizes, or a barrier without its time: named errors
        let e = bench_rows(&labels, &[Bytes(1); 3], &recs, &rows).unwrap_err();
        assert!(e.to_string().contains("3 sizes but 2 barrier"), "{e}");
        let e = bench_rows(&labels, &[Bytes(1); 2], &recs, &rows[..1]).unwrap_err();
        assert!(e.to_string().contains("record 3 has no result row"), "{e}");
    }

    #[test]
    fn two_runs_of_one_bench_join_size_by_size_and_different_benches_do_not() {
        let r = |size, t, busbw| BenchRow {
            collective: "all-gather".into(),
            group: "tp".into(),
            group_size: 4,
            size_bytes: size,
            time_ns: t,
            algbw_gbs: busbw / 0.75,
            busbw_gbs: busbw,
        };
        let replay = [r(1024, 100, 6.0), r(2048, 150, 8.0)];
        let ns3 = [r(1024, 120, 5.0), r(2048, 200, 10.0)];
        let c = compare_bench(&replay, &ns3).unwrap();
        assert_eq!((c[0].replay_time_ns, c[0].ns3_time_ns), (100, 120));
        assert!((c[0].busbw_rel_error - 0.2).abs() < 1e-12);
        assert!((c[1].busbw_rel_error + 0.2).abs() < 1e-12);
        assert!(compare_bench(&replay, &ns3[..1]).is_err());
        let other = [r(1024, 120, 5.0), r(4096, 200, 10.0)];
        let e = compare_bench(&replay, &other).unwrap_err().to_string();
        assert!(e.contains("not runs of the same bench"), "{e}");
    }
}
