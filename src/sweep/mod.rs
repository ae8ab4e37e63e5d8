//! Sweeps: a grid of runs (`ina3d sweep GRID.toml -o DIR`), each cell one in-process
//! [`crate::pipeline::run()`], locally on threads or on Slurm as a job array.
//!
//! - [`Grid`] ([`grid`]): the grid file — `[base]`, `[axes]`, `[[zip]]`, `filter` —
//!   checked with errors naming line and column, expanded into [`Cell`]s with stable ids
//!   ([`CellId`]).
//! - [`exec`]: each cell written into `DIR/cells/<id>.tmp/` and renamed to
//!   `DIR/cells/<id>/` when complete; done cells skipped, partial ones redone, failed
//!   ones recorded (`error.txt`) and retried on the next run.
//! - [`collect()`]: every done cell in `DIR/sweep.csv` (polars).
//! - [`slurm`]: the job-array script and its submission.
//!
//! Layout of DIR: `grid.toml` (the grid the cells were expanded from; Slurm tasks and
//! `collect` read it), `cells/<id>/` (`cell.toml`, `log.txt`, `results.csv` or
//! `error.txt`, and the run's outputs), `sweep.csv`, `timings.csv`, `cells.csv`,
//! `slurm/` (script and task logs).

pub mod cell;
#[cfg(feature = "tables")]
mod collect;
pub mod exec;
pub mod filter;
pub mod grid;
pub mod slurm;

pub use cell::{Cell, CellId};
#[cfg(feature = "tables")]
pub use collect::{collect, Collected};
pub use exec::{run_cells, state, CellState, Event, Outcome};
pub use grid::Grid;

use crate::formats::{write_atomic_bytes, FormatError};
use std::path::Path;

/// The copy of the grid in a sweep's directory.
pub const GRID_FILE: &str = "grid.toml";

/// Why a sweep could not go on.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// The grid, a cell file or a results table is malformed or unreadable.
    #[error(transparent)]
    File(#[from] FormatError),
    /// Building a table failed.
    #[cfg(feature = "tables")]
    #[error(transparent)]
    Report(#[from] crate::report::ReportError),
    /// `--cell` beyond the grid.
    #[error("--cell {index}: the grid has {cells} cells (indices 0 to {last})", last = cells.saturating_sub(1))]
    CellIndex {
        /// Index given.
        index: usize,
        /// Cells in the grid.
        cells: usize,
    },
    /// Slurm refused, or is missing (Slurm's own message included).
    #[error("slurm: {0}")]
    Slurm(String),
}

/// Reads and expands `grid`, creates `out` and keeps the grid there as `grid.toml` (what
/// Slurm tasks and `collect` read; rewritten only when it changed).
pub fn prepare(grid: &Path, out: &Path) -> Result<(Grid, Vec<Cell>), SweepError> {
    let g = Grid::read(grid)?;
    let cells = g.expand()?;
    std::fs::create_dir_all(out.join(exec::CELLS_DIR)).map_err(FormatError::io(out))?;
    let copy = out.join(GRID_FILE);
    let text = std::fs::read(grid).map_err(FormatError::io(grid))?;
    if std::fs::read(&copy).ok().as_deref() != Some(&text[..]) {
        write_atomic_bytes(&copy, &text)?;
    }
    Ok((g, cells))
}

/// The files of a sweep's directory besides its cells: the tables and picture `collect`
/// writes, and the Slurm scripts and logs.
const SWEEP_FILES: [&str; 5] = [
    "sweep.csv",
    "timings.csv",
    "cells.csv",
    "sweep.svg",
    "slurm",
];

/// Marks the sweep directory `out` as being written for `cells` (its markers list
/// `grid.toml`, every cell's directory and the tables), and removes the cell directories
/// (finished or `.tmp`) of cells that are not in `cells`: a cell of an earlier grid is
/// never read beside this one's. Cells of this grid stay, to be resumed. The set is
/// finished by [`collect()`] once every cell is done or failed.
pub fn mark(
    out: &Path,
    grid: &Path,
    cells: &[Cell],
) -> Result<crate::formats::atomic::OutputSet, SweepError> {
    let mut members = vec![GRID_FILE.to_string()];
    members.extend(
        cells
            .iter()
            .map(|c| format!("{}/{}", exec::CELLS_DIR, c.id)),
    );
    members.extend(SWEEP_FILES.iter().map(|f| f.to_string()));
    let set = crate::formats::atomic::OutputSet::resuming(
        out,
        &format!("ina3d sweep {}", grid.display()),
        members,
        |_| false,
    )?;
    let dir = out.join(exec::CELLS_DIR);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(set);
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let id = name.strip_suffix(".tmp").unwrap_or(&name);
        if !cells.iter().any(|c| c.id.as_str() == id) {
            let p = e.path();
            std::fs::remove_dir_all(&p)
                .or_else(|_| std::fs::remove_file(&p))
                .map_err(FormatError::io(&p))?;
        }
    }
    Ok(set)
}

/// Runs one cell's [`crate::pipeline::run()`] into `dir` (outputs named under `final_dir`);
/// the error as one line `what: why: …`. This is the [`exec::CellRunner`] of `ina3d sweep`.
#[cfg(feature = "tables")]
pub fn run_cell(
    cell: &Cell,
    dir: &Path,
    final_dir: &Path,
    log: &mut dyn crate::pipeline::Reporter,
) -> Result<(), String> {
    let out = crate::pipeline::run(&cell.spec, dir, final_dir, log)
        .map_err(|e| crate::pipeline::error_chain(&e))?;
    log.line(&crate::report::text::summary(&out.table));
    Ok(())
}
