//! A cell of a sweep: one `ina3d run`, its stable id, and the `cell.toml` echoing it.

use super::filter::Value;
use crate::pipeline::{OptionValue, RunSpec};
use std::fmt;

/// One value of an axis (or of `[base]`): as the option takes it, and as the filter and
/// the collected table see it.
#[derive(Clone, Debug, PartialEq)]
pub struct AxisValue {
    /// What the option is set to.
    pub option: OptionValue,
    /// The value in filters and in `sweep.csv` (lists as comma-separated text).
    pub typed: Value,
}

/// A cell's id: 16 hex digits of the 64-bit FNV-1a hash of its canonical options
/// ([`RunSpec::canonical`]: every option that differs from its default, `name=value` per
/// line, sorted). It depends on what the cell runs, not on its place in the grid: adding
/// an axis value, reordering axes or fixing a key in `[base]` instead of an axis leaves
/// every other cell's id (and finished directory) as it was.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CellId(String);

impl CellId {
    /// The id of a run.
    pub fn of(spec: &RunSpec) -> CellId {
        CellId(format!("{:016x}", fnv1a64(canonical_text(spec).as_bytes())))
    }

    /// The id as text (also the cell's directory name).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for CellId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The canonical options of a run as hashed: `name=value\n` per non-default option.
pub fn canonical_text(spec: &RunSpec) -> String {
    spec.canonical()
        .iter()
        .map(|(k, v)| format!("{k}={v}\n"))
        .collect()
}

pub use crate::formats::fnv1a64;

/// One cell of an expanded grid.
#[derive(Clone, Debug)]
pub struct Cell {
    /// Position in the expansion (the Slurm array index), from 0.
    pub index: usize,
    /// Stable id (directory name).
    pub id: CellId,
    /// The axis values of this cell, in column order.
    pub axes: Vec<(String, AxisValue)>,
    /// What the cell runs.
    pub spec: RunSpec,
}

impl Cell {
    /// `cell.toml`: the cell's options as a grid of one cell (`[base]` only), so
    /// `ina3d sweep cell.toml -o DIR` re-runs exactly this cell (same id); the index, id
    /// and axis values as comments.
    pub fn toml(&self, grid: &std::path::Path) -> String {
        let mut s = format!(
            "# ina3d sweep cell {} (cell {} of {})\n",
            self.id,
            self.index,
            grid.display()
        );
        let axes: Vec<String> = self
            .axes
            .iter()
            .map(|(k, v)| format!("{k} = {}", v.typed))
            .collect();
        if !axes.is_empty() {
            s.push_str(&format!("# axes: {}\n", axes.join(", ")));
        }
        s.push_str("# options that differ from `ina3d run`'s defaults:\n[base]\n");
        for (k, v) in self.spec.canonical() {
            s.push_str(&format!("{k} = {}\n", toml_literal(&v)));
        }
        s
    }
}

/// An option's text as a TOML value: integers and booleans bare, anything else quoted.
fn toml_literal(v: &str) -> String {
    match v.parse::<i64>() {
        Ok(i) if i.to_string() == v => v.to_string(),
        _ if v == "true" || v == "false" => v.to_string(),
        _ => toml::Value::String(v.to_string()).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a64_matches_the_published_test_vectors() {
        // From the FNV reference test suite: "" and "a" and "foobar".
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn the_default_run_hashes_the_empty_text() {
        assert_eq!(canonical_text(&RunSpec::default()), "");
        assert_eq!(CellId::of(&RunSpec::default()).as_str(), "cbf29ce484222325");
    }
}
