//! `ina3d sweep GRID.toml -o DIR` (cells on local threads, or a Slurm job array) and
//! `ina3d sweep collect DIR`. The grid format and the directory layout are documented in
//! `ina3d::sweep`.

use anyhow::Context;
use ina3d::sweep::{self, slurm, Cell, CellState, Event, Outcome};
use std::path::{Path, PathBuf};

const GRID_HELP: &str = "\
Grid file (TOML):
  filter = \"not (collective == 'hd' and tp > 1)\"   # optional, before the tables: cells to keep
  [base]                     # options every cell shares
  input = \"traces/example/tiny.toml\"
  ns3 = \"off\"
  [axes]                     # one axis per key: the cells are the cartesian product
  ina-slots = [256, 8192]
  collective = [\"ring\", \"hierarchical\"]
  [[zip]]                    # lists that go together, index by index (one axis of tuples)
  tp = [1, 2]
  dp = [4, 2]

Keys are `ina3d run`'s options without `--` (booleans by their positive name: calibrate,
traces, flows; ns3 = auto|on|off) and Megatron's own flag names (num-layers, …). Filters use
== != < <= > >= in [..] and or not + - * / % on option values (write `a - b` with spaces:
names may contain `-`).

Each cell is one `ina3d run` into DIR/cells/<id>/ (id: a hash of the cell's options, so
adding axis values keeps other cells' ids). Re-running skips done cells, redoes partial
ones and retries failed ones. When all cells have run, DIR/sweep.csv (one row per cell
and policy, axes as columns), timings.csv and cells.csv are written.

Exit status: 0 when every cell is done, 1 when some failed or are missing (their errors
are in cells.csv and DIR/cells/<id>/error.txt), 2 on bad input (grid errors name
file:line:column).";

/// Arguments of `ina3d sweep`.
#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true, after_long_help = GRID_HELP)]
pub struct Args {
    /// `collect DIR`: merge the cells of a sweep directory into sweep.csv.
    #[command(subcommand)]
    pub command: Option<Sub>,
    /// Grid file (TOML, see --help).
    #[arg(required = true)]
    pub grid: Option<PathBuf>,
    /// Sweep directory.
    #[arg(short, long, value_name = "DIR", required = true)]
    pub out: Option<PathBuf>,
    /// Cells run at once (threads; default: the machine's CPUs).
    #[arg(short, long, value_name = "N")]
    pub jobs: Option<usize>,
    /// Run only the cell with this index (what each Slurm array task runs).
    #[arg(long, value_name = "INDEX")]
    pub cell: Option<usize>,
    /// Submit the cells not yet done as a Slurm job array instead of running them here.
    #[arg(long, conflicts_with = "cell")]
    pub slurm: bool,
    /// Slurm partition.
    #[arg(long, requires = "slurm", value_name = "P")]
    pub partition: Option<String>,
    /// At most K array tasks at once.
    #[arg(long, requires = "slurm", value_name = "K")]
    pub array_limit: Option<u32>,
    /// Time limit per task (Slurm's format, e.g. 30 or 01:00:00).
    #[arg(long, requires = "slurm", value_name = "T")]
    pub time: Option<String>,
    /// CPUs per task.
    #[arg(long, requires = "slurm", value_name = "C")]
    pub cpus_per_task: Option<u32>,
    /// Wait for the job array to end, then collect.
    #[arg(long, requires = "slurm")]
    pub wait: bool,
    /// With --slurm: print the job script instead of submitting it. Without: list the cells
    /// (index, id, state, axes) and run nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// Subcommands of `ina3d sweep`.
#[derive(clap::Subcommand, Debug)]
pub enum Sub {
    /// Merge every done cell of DIR into DIR/sweep.csv; list failed and missing cells.
    Collect {
        /// Sweep directory (with its grid.toml).
        dir: PathBuf,
    },
}

/// Some cells failed or did not run: exit status 1 (the input itself was fine).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Incomplete(pub String);

/// Run `ina3d sweep`.
pub fn run(a: Args) -> anyhow::Result<()> {
    if let Some(Sub::Collect { dir }) = &a.command {
        return collect(dir);
    }
    let (Some(grid), Some(out)) = (a.grid.as_deref(), a.out.as_deref()) else {
        anyhow::bail!("give a grid file and -o DIR (or `collect DIR`)");
    };
    let (_, cells) = sweep::prepare(grid, out)?;
    let grid_copy = out.join(sweep::GRID_FILE);
    if a.slurm {
        if !a.dry_run {
            // the Slurm tasks write it: marked until `collect` finds every cell finished
            sweep::mark(out, &grid_copy, &cells)?;
        }
        return submit(&a, &grid_copy, out, &cells);
    }
    if a.dry_run {
        for c in &cells {
            println!(
                "{:>5}  {}  {:<8} {}",
                c.index,
                c.id,
                sweep::state(out, &c.id).as_str(),
                axes(c)
            );
        }
        return Ok(());
    }
    if let Some(i) = a.cell {
        let cell = cells.get(i).ok_or(sweep::SweepError::CellIndex {
            index: i,
            cells: cells.len(),
        })?;
        return one_cell(out, &grid_copy, cell);
    }
    let jobs = a
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    // marked until `collect` finds every cell finished; cells of another grid removed
    sweep::mark(out, &grid_copy, &cells)?;
    run_local(out, &grid_copy, &cells, jobs)?;
    collect(out)
}

fn axes(c: &Cell) -> String {
    c.axes
        .iter()
        .map(|(k, v)| format!("{k}={}", v.typed))
        .collect::<Vec<_>>()
        .join(" ")
}

fn status(o: &Outcome, secs: f64) -> String {
    match o {
        Outcome::Skipped => "done already".into(),
        Outcome::Done => format!("done in {secs:.1} s"),
        Outcome::Failed(e) => format!("FAILED: {}", e.lines().next().unwrap_or("")),
    }
}

#[cfg(feature = "tables")]
fn runner() -> &'static sweep::exec::CellRunner<'static> {
    &sweep::run_cell
}

#[cfg(not(feature = "tables"))]
fn runner() -> &'static sweep::exec::CellRunner<'static> {
    &|_, _, _, _| Err("running a cell needs the `tables` feature (polars)".into())
}

fn one_cell(out: &Path, grid: &Path, cell: &Cell) -> anyhow::Result<()> {
    let t0 = std::time::Instant::now();
    let o = sweep::exec::run_cell(out, grid, cell, runner())?;
    eprintln!(
        "cell {} {}: {}",
        cell.index,
        cell.id,
        status(&o, t0.elapsed().as_secs_f64())
    );
    match o {
        Outcome::Failed(e) => Err(Incomplete(format!("cell {} failed: {e}", cell.index)).into()),
        _ => Ok(()),
    }
}

fn run_local(out: &Path, grid: &Path, cells: &[Cell], jobs: usize) -> anyhow::Result<()> {
    let bar = ina3d::progress::bar(
        cells.len() as u64,
        "sweep {bar:40} {pos}/{len} cells ({elapsed}, eta {eta})",
    );
    let width = cells.len().to_string().len();
    let on = |e: Event<'_>| {
        if let Event::Finish(c, o, t) = e {
            let line = format!(
                "[{:>width$}/{}] {}  {}  {}",
                c.index + 1,
                cells.len(),
                c.id,
                status(o, t.as_secs_f64()),
                axes(c)
            );
            // A hidden bar (stderr not a terminal: logs, CI) drops its println.
            if bar.is_hidden() {
                eprintln!("{line}");
            } else {
                bar.println(line);
            }
            bar.inc(1);
        }
    };
    sweep::run_cells(out, grid, cells, jobs, runner(), &on);
    bar.finish_and_clear();
    Ok(())
}

fn submit(a: &Args, grid: &Path, out: &Path, cells: &[Cell]) -> anyhow::Result<()> {
    let pending: Vec<usize> = cells
        .iter()
        .filter(|c| sweep::state(out, &c.id) != CellState::Done)
        .map(|c| c.index)
        .collect();
    if pending.is_empty() {
        eprintln!("every cell is done: nothing to submit");
        return collect(out);
    }
    let abs =
        |p: &Path| std::path::absolute(p).with_context(|| format!("resolving {}", p.display()));
    let exe = std::env::current_exe().context("locating the ina3d binary")?;
    let opts = slurm::SlurmOptions {
        partition: a.partition.clone(),
        array_limit: a.array_limit,
        time: a.time.clone(),
        cpus_per_task: a.cpus_per_task,
    };
    let here = std::env::current_dir().context("the working directory")?;
    let text = slurm::script(&exe, &abs(grid)?, &abs(out)?, &here, &pending, &opts)?;
    if a.dry_run {
        print!("{text}");
        return Ok(());
    }
    let dir = out.join("slurm");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let script = dir.join("sweep.sbatch");
    ina3d::formats::write_atomic_bytes(&script, text.as_bytes())?;
    let s = slurm::submit(&slurm::sbatch(), &script, a.wait)?;
    eprintln!(
        "submitted Slurm job {} ({} tasks, script {}; task logs in {})",
        s.job_id,
        pending.len(),
        script.display(),
        dir.display()
    );
    if !a.wait {
        eprintln!("when it has ended: ina3d sweep collect {}", out.display());
        return Ok(());
    }
    if !s.all_ok {
        eprintln!("some array tasks failed (sbatch: {})", s.stderr);
    }
    collect(out)
}

#[cfg(feature = "tables")]
fn collect(dir: &Path) -> anyhow::Result<()> {
    let c = sweep::collect(dir)?;
    let bad: Vec<_> = c.unfinished().collect();
    eprintln!(
        "{} cells: {} done, {} not; {} rows → {}",
        c.cells.len(),
        c.cells.len() - bad.len(),
        bad.len(),
        c.rows,
        c.written
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    for (i, id, st) in bad.iter().take(20) {
        let why = match st {
            CellState::Failed(e) => format!(": {e}"),
            _ => String::new(),
        };
        eprintln!("  cell {i} {id}: {}{why}", st.as_str());
    }
    if bad.is_empty() {
        Ok(())
    } else {
        Err(Incomplete(format!(
            "{} of {} cells not done (see {})",
            bad.len(),
            c.cells.len(),
            dir.join("cells.csv").display()
        ))
        .into())
    }
}

#[cfg(not(feature = "tables"))]
fn collect(_dir: &Path) -> anyhow::Result<()> {
    anyhow::bail!(
        "`ina3d sweep collect` needs the `tables` feature (polars); rebuild with default features"
    )
}
