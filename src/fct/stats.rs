//! Relative-error statistics shared by `ina3d compare` ([`crate::report`], which defines
//! them for users) and the validation suite: nearest-rank percentiles, medians, the
//! relative error `(r − n) / n` and [`ErrorStats`]. Kept free of polars so the suite and
//! the tables compute the same numbers with the same code.

use super::FctRow;
use crate::record::{Class, Mode};
use std::collections::{BTreeMap, HashMap};

/// Nearest-rank percentile of ascending-sorted `v`: the value at 1-based rank
/// `⌈p/100 · k⌉` (at least 1). `None` when `v` is empty.
pub fn percentile_nearest_rank(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let k = sorted.len() as f64;
    let rank = ((p / 100.0) * k).ceil().max(1.0) as usize;
    Some(sorted[rank.min(sorted.len()) - 1])
}

/// Median of ascending-sorted `v` (mean of the two middle values for an even count).
pub fn median(sorted: &[f64]) -> Option<f64> {
    let k = sorted.len();
    match k {
        0 => None,
        _ if k % 2 == 1 => Some(sorted[k / 2]),
        _ => Some((sorted[k / 2 - 1] + sorted[k / 2]) / 2.0),
    }
}

/// Relative-error statistics of one group of flows (definitions: [`crate::report`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ErrorStats {
    /// `all`, `class`, `mode` or `timers`.
    pub scope: String,
    /// The group within the scope: `net+ina`, a class (`tp`...), a mode (`net`, `ina`),
    /// or `compute+nvlink`.
    pub group: String,
    /// Flows in the group.
    pub flows: u64,
    /// Flows whose error is undefined (ns-3 FCT 0, replay FCT > 0), left out of the rest.
    pub undefined: u64,
    /// Mean of |error|.
    pub mean_abs: f64,
    /// Median of |error|.
    pub median_abs: f64,
    /// Nearest-rank 95th percentile of |error|.
    pub p95_abs: f64,
    /// Nearest-rank 99th percentile of |error|.
    pub p99_abs: f64,
    /// Largest |error|.
    pub max_abs: f64,
    /// Mean signed error (positive: replayer slower than ns-3).
    pub mean_signed: f64,
}

impl ErrorStats {
    /// Statistics of the signed relative errors `errors` (NaN = undefined). `None` when
    /// the group has no flows at all.
    pub fn of(scope: &str, group: &str, errors: &[f64]) -> Option<Self> {
        if errors.is_empty() {
            return None;
        }
        let defined: Vec<f64> = errors.iter().copied().filter(|e| !e.is_nan()).collect();
        let mut abs: Vec<f64> = defined.iter().map(|e| e.abs()).collect();
        abs.sort_by(f64::total_cmp);
        let k = abs.len() as f64;
        let nan = f64::NAN;
        Some(ErrorStats {
            scope: scope.into(),
            group: group.into(),
            flows: errors.len() as u64,
            undefined: (errors.len() - defined.len()) as u64,
            mean_abs: if abs.is_empty() {
                nan
            } else {
                abs.iter().sum::<f64>() / k
            },
            median_abs: median(&abs).unwrap_or(nan),
            p95_abs: percentile_nearest_rank(&abs, 95.0).unwrap_or(nan),
            p99_abs: percentile_nearest_rank(&abs, 99.0).unwrap_or(nan),
            max_abs: abs.last().copied().unwrap_or(nan),
            mean_signed: if defined.is_empty() {
                nan
            } else {
                defined.iter().sum::<f64>() / k
            },
        })
    }
}

/// `(r − n) / n`, 0 when both are 0, NaN when only `n` is.
pub fn rel_error(r: u64, n: u64) -> f64 {
    match (r, n) {
        (0, 0) => 0.0,
        (_, 0) => f64::NAN,
        _ => (r as f64 - n as f64) / n as f64,
    }
}

/// FCT error statistics per traffic class over the network records (`net`, `ina`), as
/// `ina3d compare` defines them ([`crate::report`]): `(replay − ns3) / ns3` per record
/// present in both (`ns3`: any other run of the same trace).
pub fn class_errors(replay: &[FctRow], ns3: &[FctRow]) -> BTreeMap<Class, ErrorStats> {
    let theirs: HashMap<u64, u64> = ns3.iter().map(|r| (r.flow_id, r.fct_ns)).collect();
    let mut by: BTreeMap<Class, Vec<f64>> = BTreeMap::new();
    for r in replay
        .iter()
        .filter(|r| matches!(r.mode, Mode::Net | Mode::Ina))
    {
        if let Some(&n) = theirs.get(&r.flow_id) {
            by.entry(r.class).or_default().push(rel_error(r.fct_ns, n));
        }
    }
    by.into_iter()
        .filter_map(|(c, v)| ErrorStats::of("class", c.as_str(), &v).map(|s| (c, s)))
        .collect()
}
