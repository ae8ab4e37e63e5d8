//! `results.csv` over several ECMP seeds: per policy, the median of every number over the
//! seeds, the range of the two headline numbers, and the seeds.
//!
//! Each seed's own table is [`super::results_table`] (so `speedup_vs_ring` pairs each
//! policy with the ring *of the same seed*: same routes, same hashes); this table folds the
//! per-seed tables column by column:
//!
//! - every numeric column is the **median** over the seeds (for an even number of seeds the
//!   mean of the two middle values; integer columns round that mean half up, so they stay
//!   integers). Empty cells (ns-3 not run at a seed) are left out; a column empty at every
//!   seed stays empty;
//! - then `seeds` (the seeds, `;`-separated, in run order), `iteration_time_ns_min`,
//!   `iteration_time_ns_max`, `speedup_vs_ring_min`, `speedup_vs_ring_max`.
//!
//! The median of the per-seed speed-ups is not the ratio of the median iteration times.

use super::{median, pol, results_table, PolicyResult, ReportError};
use polars::prelude::*;
use std::path::Path;

/// The columns [`seeds_table`] appends after the [`super::RESULTS_COLUMNS`].
pub const SEED_COLUMNS: [&str; 5] = [
    "seeds",
    "iteration_time_ns_min",
    "iteration_time_ns_max",
    "speedup_vs_ring_min",
    "speedup_vs_ring_max",
];

/// The median of integers: the middle value, or the mean of the two middle values rounded
/// half up. `None` for no values.
pub fn median_u64(values: &[u64]) -> Option<u64> {
    let mut v = values.to_vec();
    v.sort_unstable();
    let k = v.len();
    match k {
        0 => None,
        _ if k % 2 == 1 => Some(v[k / 2]),
        _ => Some((u128::from(v[k / 2 - 1]) + u128::from(v[k / 2])).div_ceil(2) as u64),
    }
}

fn median_f64(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    median(&v)
}

/// The table of a run over several seeds (see the module docs). Every seed must have run
/// the same policies in the same order.
pub fn seeds_table(per_seed: &[(u64, Vec<PolicyResult>)]) -> Result<DataFrame, ReportError> {
    let name = Path::new("results.csv");
    let tables = per_seed
        .iter()
        .map(|(_, rows)| results_table(rows))
        .collect::<Result<Vec<_>, _>>()?;
    let Some(first) = tables.first() else {
        return Err(ReportError::SeedPolicies {
            seed: None,
            msg: "no seed ran".into(),
        });
    };
    let policies =
        |rows: &[PolicyResult]| rows.iter().map(|r| r.policy.clone()).collect::<Vec<_>>();
    let expected = policies(&per_seed[0].1);
    for (seed, rows) in per_seed {
        if policies(rows) != expected {
            return Err(ReportError::SeedPolicies {
                seed: Some(*seed),
                msg: format!(
                    "ran {:?}, seed {} ran {expected:?}",
                    policies(rows),
                    per_seed[0].0
                ),
            });
        }
    }
    let mut cols = Vec::new();
    for c in first.columns() {
        let across = tables
            .iter()
            .map(|t| t.column(c.name()).cloned())
            .collect::<PolarsResult<Vec<Column>>>()
            .map_err(pol(name))?;
        cols.push(fold(c, &across).map_err(pol(name))?);
    }
    let seeds = per_seed
        .iter()
        .map(|(s, _)| s.to_string())
        .collect::<Vec<_>>()
        .join(";");
    cols.push(Column::new("seeds".into(), vec![seeds; first.height()]));
    for metric in ["iteration_time_ns", "speedup_vs_ring"] {
        let across = tables
            .iter()
            .map(|t| t.column(metric)?.cast(&DataType::Float64))
            .collect::<PolarsResult<Vec<Column>>>()
            .map_err(pol(name))?;
        let values =
            |i: usize| -> Vec<f64> { across.iter().filter_map(|c| c.f64().ok()?.get(i)).collect() };
        let range = |pick: fn(f64, f64) -> f64| -> Vec<f64> {
            (0..first.height())
                .map(|i| values(i).into_iter().reduce(pick).unwrap_or(f64::NAN))
                .collect()
        };
        let (lo, hi) = (range(f64::min), range(f64::max));
        if metric == "iteration_time_ns" {
            let int = |v: Vec<f64>| v.into_iter().map(|x| x as u64).collect::<Vec<u64>>();
            cols.push(Column::new(format!("{metric}_min").into(), int(lo)));
            cols.push(Column::new(format!("{metric}_max").into(), int(hi)));
        } else {
            cols.push(Column::new(format!("{metric}_min").into(), lo));
            cols.push(Column::new(format!("{metric}_max").into(), hi));
        }
    }
    DataFrame::new_infer_height(cols).map_err(pol(name))
}

/// One column over the seeds: text must agree; numbers fold to their median.
fn fold(first: &Column, across: &[Column]) -> PolarsResult<Column> {
    let n = first.len();
    let name = first.name().clone();
    Ok(match first.dtype() {
        DataType::String => {
            for c in across {
                if !c
                    .as_materialized_series()
                    .equals(first.as_materialized_series())
                {
                    return Err(PolarsError::ComputeError(
                        format!("column `{name}` differs between seeds").into(),
                    ));
                }
            }
            first.clone()
        }
        DataType::Float64 => {
            let cs = across
                .iter()
                .map(|c| c.f64().cloned())
                .collect::<PolarsResult<Vec<_>>>()?;
            let v: Vec<Option<f64>> = (0..n)
                .map(|i| median_f64(&cs.iter().filter_map(|c| c.get(i)).collect::<Vec<_>>()))
                .collect();
            Column::new(name, v)
        }
        _ => {
            let cs = across
                .iter()
                .map(|c| c.cast(&DataType::UInt64))
                .collect::<PolarsResult<Vec<_>>>()?;
            let cs = cs
                .iter()
                .map(|c| c.u64().cloned())
                .collect::<PolarsResult<Vec<_>>>()?;
            let v: Vec<Option<u64>> = (0..n)
                .map(|i| median_u64(&cs.iter().filter_map(|c| c.get(i)).collect::<Vec<_>>()))
                .collect();
            Column::new(name, v)
        }
    })
}
