//! `ina3d sweep collect DIR`: every finished cell's `results.csv` in one table.
//!
//! Writes, atomically, into DIR:
//!
//! - `sweep.csv`: one row per cell × policy — `cell` (the id), one column per axis (typed
//!   from the grid's values: integers, decimals, true/false or text), then the cell's
//!   `results.csv` columns except wall times (a column named like an axis, e.g. `seeds`, is
//!   left to the axis). Rows in grid order, then the cell's row order. Every value comes
//!   from deterministic simulation, so the same grid gives the same bytes wherever it ran;
//! - `timings.csv`: `cell`, `policy` and the wall-time columns (they vary run to run);
//! - `cells.csv`: every cell of the grid — `index`, `cell`, `state` (`done`, `failed`,
//!   `partial`, `missing`), `error` (first line of `error.txt`), the axes;
//! - `sweep.svg`: per policy, the speed-up over the ring (median and range over the done
//!   cells) and the median exposed time per class.
//!
//! The results columns are typed over all cells at once: unsigned integers when every
//! non-empty cell is one, else decimals when every one is a number, else text.

use super::exec::{cell_dir, state, CellState, RESULTS_FILE};
use super::filter::Value;
use super::grid::Grid;
use super::{SweepError, GRID_FILE};
use crate::formats::results_csv::{self, ResultsText};
use crate::report::write_csv;
use polars::prelude::*;
use std::path::{Path, PathBuf};

/// What [`collect`] found and wrote.
#[derive(Debug)]
pub struct Collected {
    /// Every cell of the grid: index, id, state.
    pub cells: Vec<(usize, String, CellState)>,
    /// Rows of `sweep.csv`.
    pub rows: usize,
    /// Files written.
    pub written: Vec<PathBuf>,
}

impl Collected {
    /// Cells not done.
    pub fn unfinished(&self) -> impl Iterator<Item = &(usize, String, CellState)> {
        self.cells.iter().filter(|c| c.2 != CellState::Done)
    }
}

/// The picture of the sweep: per policy, the speed-up's median and range over the cells
/// and the median exposed time per class ([`crate::report::plot::over_cells`]).
pub const SWEEP_PICTURE: &str = "sweep.svg";

fn is_wall_time(column: &str) -> bool {
    column.ends_with("wall_time_ns")
}

/// Collects the sweep in `out` (its `grid.toml` says which cells there should be).
pub fn collect(out: &Path) -> Result<Collected, SweepError> {
    let grid = Grid::read(&out.join(GRID_FILE))?;
    let cells = grid.expand()?;
    // this process writes the sweep's tables: marked until they are written, and left
    // marked when cells are still to run
    let set = super::mark(out, &out.join(GRID_FILE), &cells)?;
    let axes = grid.axis_names();
    let mut states = Vec::new();
    let mut tables: Vec<(usize, ResultsText)> = Vec::new();
    for (i, c) in cells.iter().enumerate() {
        let st = state(out, &c.id);
        if st == CellState::Done {
            tables.push((
                i,
                results_csv::read(&cell_dir(out, &c.id).join(RESULTS_FILE))?,
            ));
        }
        states.push((c.index, c.id.to_string(), st));
    }
    let mut columns: Vec<String> = Vec::new();
    for (_, t) in &tables {
        for c in &t.columns {
            if !columns.contains(c) && !axes.contains(c) {
                columns.push(c.clone());
            }
        }
    }
    let (wall, kept): (Vec<String>, Vec<String>) =
        columns.into_iter().partition(|c| is_wall_time(c));
    // One output row per (cell, results row).
    let rows: Vec<(usize, &ResultsText, usize)> = tables
        .iter()
        .flat_map(|(i, t)| (0..t.rows.len()).map(move |r| (*i, t, r)))
        .collect();
    let text = |col: &str| -> Vec<Option<String>> {
        rows.iter()
            .map(|(_, t, r)| {
                t.columns
                    .iter()
                    .position(|c| c == col)
                    .map(|j| t.rows[*r][j].clone())
                    .filter(|s| !s.is_empty())
            })
            .collect()
    };
    let ids: Vec<String> = rows
        .iter()
        .map(|(i, _, _)| cells[*i].id.to_string())
        .collect();
    let path = |n: &str| out.join(n);
    let mut sweep = vec![Column::new("cell".into(), ids.clone())];
    for a in &axes {
        let v: Vec<Value> = rows
            .iter()
            .map(|(i, _, _)| axis_value(&cells[*i].axes, a))
            .collect();
        sweep.push(typed_axis(a, &v));
    }
    for c in &kept {
        sweep.push(typed_text(c, &text(c)));
    }
    let mut timings = vec![
        Column::new("cell".into(), ids),
        typed_text("policy", &text("policy")),
    ];
    for c in &wall {
        timings.push(typed_text(c, &text(c)));
    }
    let mut written = Vec::new();
    for (name, cols) in [
        ("sweep.csv", sweep),
        ("timings.csv", timings),
        ("cells.csv", cells_table(&cells, &states, &axes)),
    ] {
        let p = path(name);
        let mut df = DataFrame::new_infer_height(cols).map_err(|source| {
            crate::report::ReportError::Polars {
                path: p.clone(),
                source,
            }
        })?;
        write_csv(&mut df, &p)?;
        written.push(p);
    }
    if !tables.is_empty() {
        let p = path(SWEEP_PICTURE);
        let cells: Vec<&ResultsText> = tables.iter().map(|(_, t)| t).collect();
        crate::report::plot::write_svg(
            &p,
            &format!("{} cells of {}", cells.len(), out.display()),
            "cells",
            &crate::report::plot::over_cells(&cells),
        )?;
        written.push(p);
    }
    if states
        .iter()
        .all(|(_, _, st)| matches!(st, CellState::Done | CellState::Failed(_)))
    {
        set.finish()?;
    }
    Ok(Collected {
        cells: states,
        rows: rows.len(),
        written,
    })
}

fn axis_value(axes: &[(String, super::cell::AxisValue)], name: &str) -> Value {
    axes.iter()
        .find(|(k, _)| k == name)
        .map_or(Value::Str(String::new()), |(_, v)| v.typed.clone())
}

/// An axis column: integers, decimals, booleans or text, from the grid's own values.
fn typed_axis(name: &str, v: &[Value]) -> Column {
    let name: PlSmallStr = name.into();
    if v.iter().all(|x| matches!(x, Value::Int(_))) {
        return Column::new(
            name,
            v.iter()
                .map(|x| if let Value::Int(i) = x { *i } else { 0 })
                .collect::<Vec<i64>>(),
        );
    }
    if v.iter()
        .all(|x| matches!(x, Value::Int(_) | Value::Float(_)))
    {
        let f = |x: &Value| match x {
            Value::Int(i) => *i as f64,
            Value::Float(f) => *f,
            _ => f64::NAN,
        };
        return Column::new(name, v.iter().map(f).collect::<Vec<f64>>());
    }
    if v.iter().all(|x| matches!(x, Value::Bool(_))) {
        return Column::new(
            name,
            v.iter()
                .map(|x| matches!(x, Value::Bool(true)))
                .collect::<Vec<bool>>(),
        );
    }
    let s = |x: &Value| match x {
        Value::Str(s) => s.clone(),
        other => other.to_string(),
    };
    Column::new(name, v.iter().map(s).collect::<Vec<String>>())
}

/// A results column from text: unsigned integers, else numbers, else text (empty = null).
fn typed_text(name: &str, v: &[Option<String>]) -> Column {
    let name: PlSmallStr = name.into();
    let ints: Option<Vec<Option<u64>>> = v
        .iter()
        .map(|x| match x {
            None => Some(None),
            Some(s) => s.parse::<u64>().ok().map(Some),
        })
        .collect();
    if let Some(i) = ints {
        return Column::new(name, i);
    }
    let floats: Option<Vec<Option<f64>>> = v
        .iter()
        .map(|x| match x {
            None => Some(None),
            Some(s) => s.parse::<f64>().ok().map(Some),
        })
        .collect();
    if let Some(f) = floats {
        return Column::new(name, f);
    }
    Column::new(name, v.to_vec())
}

fn cells_table(
    cells: &[super::cell::Cell],
    states: &[(usize, String, CellState)],
    axes: &[String],
) -> Vec<Column> {
    let mut cols = vec![
        Column::new(
            "index".into(),
            states.iter().map(|s| s.0 as u64).collect::<Vec<u64>>(),
        ),
        Column::new(
            "cell".into(),
            states.iter().map(|s| s.1.clone()).collect::<Vec<String>>(),
        ),
        Column::new(
            "state".into(),
            states.iter().map(|s| s.2.as_str()).collect::<Vec<&str>>(),
        ),
        Column::new(
            "error".into(),
            states
                .iter()
                .map(|s| match &s.2 {
                    CellState::Failed(e) => Some(e.clone()),
                    _ => None,
                })
                .collect::<Vec<Option<String>>>(),
        ),
    ];
    for a in axes {
        let v: Vec<Value> = cells.iter().map(|c| axis_value(&c.axes, a)).collect();
        cols.push(typed_axis(a, &v));
    }
    cols
}
