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

use super::results::{results_table, Column, PolicyResult, ResultsTable, Values};
use super::{median, ReportError};

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
pub fn seeds_table(per_seed: &[(u64, Vec<PolicyResult>)]) -> Result<ResultsTable, ReportError> {
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
    let policies = |t: &ResultsTable| t.policies().join(", ");
    for ((seed, _), t) in per_seed.iter().zip(&tables) {
        if t.policies() != first.policies() {
            return Err(ReportError::SeedPolicies {
                seed: Some(*seed),
                msg: format!(
                    "ran {}, seed {} ran {}",
                    policies(t),
                    per_seed[0].0,
                    policies(first)
                ),
            });
        }
    }
    let height = first.height();
    let mut cols = Vec::new();
    for (k, c) in first.columns.iter().enumerate() {
        let across: Vec<&Values> = tables.iter().map(|t| &t.columns[k].values).collect();
        cols.push(Column {
            name: c.name.clone(),
            values: fold(&c.name, height, &across)?,
        });
    }
    let seeds = per_seed
        .iter()
        .map(|(s, _)| s.to_string())
        .collect::<Vec<_>>()
        .join(";");
    cols.push(Column::text("seeds", vec![seeds; height]));
    for metric in ["iteration_time_ns", "speedup_vs_ring"] {
        let values =
            |i: usize| -> Vec<f64> { tables.iter().filter_map(|t| t.f64_at(metric, i)).collect() };
        let range = |pick: fn(f64, f64) -> f64| -> Vec<Option<f64>> {
            (0..height)
                .map(|i| values(i).into_iter().reduce(pick))
                .collect()
        };
        let (lo, hi) = (range(f64::min), range(f64::max));
        let (lo_name, hi_name) = (format!("{metric}_min"), format!("{metric}_max"));
        if metric == "iteration_time_ns" {
            let int = |v: Vec<Option<f64>>| v.into_iter().map(|x| x.map(|x| x as u64)).collect();
            cols.push(Column::int(&lo_name, int(lo)));
            cols.push(Column::int(&hi_name, int(hi)));
        } else {
            cols.push(Column::float(&lo_name, lo));
            cols.push(Column::float(&hi_name, hi));
        }
    }
    Ok(ResultsTable { columns: cols })
}

/// One column over the seeds: text must agree; numbers fold to their median (empty cells
/// left out; empty at every seed stays empty).
fn fold(name: &str, height: usize, across: &[&Values]) -> Result<Values, ReportError> {
    Ok(match across[0] {
        Values::Text(first) => {
            if across
                .iter()
                .any(|v| !matches!(v, Values::Text(t) if t == first))
            {
                return Err(ReportError::SeedPolicies {
                    seed: None,
                    msg: format!("column `{name}` differs between seeds"),
                });
            }
            Values::Text(first.clone())
        }
        Values::Float(_) => Values::Float(
            (0..height)
                .map(|i| {
                    median_f64(
                        &across
                            .iter()
                            .filter_map(|v| v.f64_at(i))
                            .collect::<Vec<_>>(),
                    )
                })
                .collect(),
        ),
        Values::Int(_) => Values::Int(
            (0..height)
                .map(|i| {
                    let cells: Vec<u64> = across
                        .iter()
                        .filter_map(|v| match v {
                            Values::Int(x) => x[i],
                            _ => None,
                        })
                        .collect();
                    median_u64(&cells)
                })
                .collect(),
        ),
    })
}
