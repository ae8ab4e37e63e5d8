//! `fct_error.csv`: the FCT-error statistics of a comparison, one row per group (the
//! definitions are in [`super`]'s docs). Written by `ina3d compare` for both a back-end
//! directory and an external simulator's `fct.txt`, and by `ina3d run` per policy.

use super::ReportError;
use crate::fct::stats::ErrorStats;
use std::fmt::Write as _;
use std::path::Path;

/// Columns of `fct_error.csv`.
pub const COLUMNS: [&str; 10] = [
    "scope",
    "group",
    "flows",
    "undefined",
    "mean_abs_rel_error",
    "median_abs_rel_error",
    "p95_abs_rel_error",
    "p99_abs_rel_error",
    "max_abs_rel_error",
    "mean_signed_rel_error",
];

/// The rows as CSV text (floats in Rust's shortest round-trip form, `NaN` when undefined).
pub fn to_csv(stats: &[ErrorStats]) -> String {
    let mut s = COLUMNS.join(",");
    s.push('\n');
    for x in stats {
        let _ = writeln!(
            s,
            "{},{},{},{},{:?},{:?},{:?},{:?},{:?},{:?}",
            x.scope,
            x.group,
            x.flows,
            x.undefined,
            x.mean_abs,
            x.median_abs,
            x.p95_abs,
            x.p99_abs,
            x.max_abs,
            x.mean_signed
        );
    }
    s
}

/// Writes [`to_csv`] to `path` atomically.
pub fn write(path: &Path, stats: &[ErrorStats]) -> Result<(), ReportError> {
    Ok(crate::formats::write_atomic_bytes(
        path,
        to_csv(stats).as_bytes(),
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_row_per_group_under_the_documented_header() {
        let s = ErrorStats::of("class", "dp", &[0.25, -0.75, f64::NAN]).unwrap();
        let text = to_csv(&[s]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0].split(',').count(), 10);
        // two defined errors |0.25|, |0.75|: mean and median 0.5, p95 = p99 = max 0.75,
        // signed mean -0.25
        assert_eq!(lines[1], "class,dp,3,1,0.5,0.5,0.75,0.75,0.75,-0.25");
    }
}
