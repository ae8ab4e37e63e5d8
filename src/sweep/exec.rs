//! Running cells: each into `cells/<id>.tmp/`, renamed to `cells/<id>/` only when complete.
//!
//! A cell directory holds `cell.toml` (what it runs), `log.txt` (what its stages said), and
//! either `results.csv` and the run's outputs (done) or `error.txt` (failed). A run that is
//! killed leaves only `cells/<id>.tmp/`, which nothing reads: the next run removes and
//! redoes it. Done cells are skipped; failed cells are retried.

use super::cell::{Cell, CellId};
use crate::formats::{write_atomic_bytes, FormatError};
use crate::pipeline::Reporter;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The directory of the cells under a sweep's output directory.
pub const CELLS_DIR: &str = "cells";
/// A cell's error file.
pub const ERROR_FILE: &str = "error.txt";
/// A cell's results file.
pub const RESULTS_FILE: &str = "results.csv";

/// Where a cell stands on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CellState {
    /// Finished with `results.csv`.
    Done,
    /// Finished with an error (the first line of `error.txt`).
    Failed(String),
    /// Started and not finished (a `.tmp` directory: killed, or running now).
    Partial,
    /// Never started.
    Missing,
}

impl CellState {
    /// `done`, `failed`, `partial` or `missing`.
    pub fn as_str(&self) -> &'static str {
        match self {
            CellState::Done => "done",
            CellState::Failed(_) => "failed",
            CellState::Partial => "partial",
            CellState::Missing => "missing",
        }
    }
}

/// The finished directory of cell `id` under the sweep directory `out`.
pub fn cell_dir(out: &Path, id: &CellId) -> PathBuf {
    out.join(CELLS_DIR).join(id.as_str())
}

fn tmp_dir(out: &Path, id: &CellId) -> PathBuf {
    out.join(CELLS_DIR).join(format!("{id}.tmp"))
}

/// Where cell `id` stands.
pub fn state(out: &Path, id: &CellId) -> CellState {
    let d = cell_dir(out, id);
    if let Ok(e) = std::fs::read_to_string(d.join(ERROR_FILE)) {
        return CellState::Failed(e.lines().next().unwrap_or("").to_string());
    }
    if d.join(RESULTS_FILE).is_file() {
        return CellState::Done;
    }
    if tmp_dir(out, id).exists() {
        CellState::Partial
    } else {
        CellState::Missing
    }
}

/// What running a cell gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Already done; not run again.
    Skipped,
    /// Ran and wrote its results.
    Done,
    /// Ran and failed with this error (also in `error.txt`).
    Failed(String),
}

/// Runs one cell: `(cell, directory to write into, directory it will be renamed to, log)`.
/// It must write `results.csv` into the directory on success.
pub type CellRunner<'a> =
    dyn Fn(&Cell, &Path, &Path, &mut dyn Reporter) -> Result<(), String> + Sync + 'a;

/// A cell's log file as a [`Reporter`].
struct Log(std::io::BufWriter<std::fs::File>);

impl Reporter for Log {
    fn line(&mut self, text: &str) {
        // A log that cannot be written must not fail the cell; the results are what count.
        let _ = writeln!(self.0, "{text}");
        let _ = self.0.flush();
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> FormatError + '_ {
    FormatError::io(path)
}

/// Runs `cell` into `out` unless it is done (see the module docs).
pub fn run_cell(
    out: &Path,
    grid: &Path,
    cell: &Cell,
    runner: &CellRunner<'_>,
) -> Result<Outcome, FormatError> {
    if state(out, &cell.id) == CellState::Done {
        return Ok(Outcome::Skipped);
    }
    let (tmp, done) = (tmp_dir(out, &cell.id), cell_dir(out, &cell.id));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(io(&tmp))?;
    }
    std::fs::create_dir_all(&tmp).map_err(io(&tmp))?;
    write_atomic_bytes(&tmp.join("cell.toml"), cell.toml(grid).as_bytes())?;
    let log_path = tmp.join("log.txt");
    let mut log = Log(std::io::BufWriter::new(
        std::fs::File::create(&log_path).map_err(io(&log_path))?,
    ));
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        runner(cell, &tmp, &done, &mut log)
    }))
    .unwrap_or_else(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        Err(format!("internal error (panic): {msg}"))
    });
    let ran = ran.and_then(|()| {
        tmp.join(RESULTS_FILE)
            .is_file()
            .then_some(())
            .ok_or_else(|| "the run wrote no results.csv".to_string())
    });
    drop(log);
    let outcome = match ran {
        Ok(()) => Outcome::Done,
        Err(e) => {
            // A failed cell keeps its log and error, never a results table collect would read.
            let r = tmp.join(RESULTS_FILE);
            if r.exists() {
                std::fs::remove_file(&r).map_err(io(&r))?;
            }
            write_atomic_bytes(&tmp.join(ERROR_FILE), format!("{e}\n").as_bytes())?;
            Outcome::Failed(e)
        }
    };
    if done.exists() {
        std::fs::remove_dir_all(&done).map_err(io(&done))?;
    }
    std::fs::rename(&tmp, &done).map_err(io(&done))?;
    Ok(outcome)
}

/// What the caller hears while cells run.
pub enum Event<'a> {
    /// A cell starts (or is checked, if done).
    Start(&'a Cell),
    /// A cell finished.
    Finish(&'a Cell, &'a Outcome, Duration),
}

/// Runs `cells` into `out` on `jobs` threads (each takes the next cell not yet taken),
/// calling `on` as they start and finish. Returns each cell's outcome, in `cells` order; a
/// cell whose directory cannot be written is a failure of that cell, not of the sweep.
pub fn run_cells(
    out: &Path,
    grid: &Path,
    cells: &[Cell],
    jobs: usize,
    runner: &CellRunner<'_>,
    on: &(dyn Fn(Event<'_>) + Sync),
) -> Vec<Outcome> {
    let next = AtomicUsize::new(0);
    let outcomes: Mutex<Vec<Option<Outcome>>> = Mutex::new(vec![None; cells.len()]);
    std::thread::scope(|s| {
        for _ in 0..jobs.clamp(1, cells.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(cell) = cells.get(i) else { break };
                on(Event::Start(cell));
                let t0 = Instant::now();
                let o = run_cell(out, grid, cell, runner)
                    .unwrap_or_else(|e| Outcome::Failed(format!("cell directory: {e}")));
                on(Event::Finish(cell, &o, t0.elapsed()));
                outcomes.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(o);
            });
        }
    });
    outcomes
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|o| o.unwrap_or(Outcome::Failed("not run".into())))
        .collect()
}
