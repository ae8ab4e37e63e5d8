//! `ina3d compare`: a replay directory and an ns-3 directory of the same trace joined on
//! `flow_id` (polars), with the error statistics the module docs of [`super`] define; and
//! the text and CSV forms of polars tables.

use super::{io, links, slots, ReportError};
use crate::fct::stats::{rel_error, ErrorStats};
use crate::fct::{FctRow, Summary};
use crate::formats::{fct_csv, summary_csv};
use polars::prelude::*;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn pol(path: &Path) -> impl FnOnce(PolarsError) -> ReportError + '_ {
    move |source| ReportError::Polars {
        path: path.to_path_buf(),
        source,
    }
}

// ---------------------------------------------------------------------------------------
// Reading the results contract
// ---------------------------------------------------------------------------------------

fn require_file(path: &Path, what: &'static str) -> Result<(), ReportError> {
    if path.is_file() {
        Ok(())
    } else {
        Err(ReportError::MissingFile {
            path: path.to_path_buf(),
            what,
        })
    }
}

/// Reads a `summary.csv` (exactly one [`Summary`] row; extra columns are ignored).
pub fn read_summary(path: &Path) -> Result<Summary, ReportError> {
    require_file(
        path,
        "summary.csv: the back-end's one-row iteration summary (src/formats/summary_csv.rs)",
    )?;
    Ok(summary_csv::read(path)?)
}

/// Reads an `fct.csv` into a DataFrame with the contract's columns and types (extra
/// columns are dropped); the first bad row is reported with its line and field.
pub fn read_fct(path: &Path) -> Result<DataFrame, ReportError> {
    require_file(
        path,
        "fct.csv: one row per trace record (src/formats/fct_csv.rs)",
    )?;
    // The csv crate parses and types every row (errors name line and field); polars only
    // receives typed columns. Arbitrary bytes made polars' own CSV reader panic inside its
    // worker threads (found by the property test), so it never sees raw input here.
    let rows = fct_csv::read(path)?;
    fct_frame(&rows).map_err(pol(path))
}

/// Typed columns of the fct contract, in [`super::FCT_COLUMNS`] order.
fn fct_frame(rows: &[FctRow]) -> PolarsResult<DataFrame> {
    let u64s = |f: fn(&FctRow) -> u64| rows.iter().map(f).collect::<Vec<u64>>();
    let u32s = |f: fn(&FctRow) -> u32| rows.iter().map(f).collect::<Vec<u32>>();
    let strs = |f: fn(&FctRow) -> &str| rows.iter().map(f).collect::<Vec<&str>>();
    DataFrame::new_infer_height(vec![
        Column::new("flow_id".into(), u64s(|r| r.flow_id)),
        Column::new("src".into(), u32s(|r| r.src)),
        Column::new("dst".into(), u32s(|r| r.dst)),
        Column::new("mode".into(), strs(|r| r.mode.as_str())),
        Column::new("class".into(), strs(|r| r.class.as_str())),
        Column::new("size_bytes".into(), u64s(|r| r.size_bytes)),
        Column::new("start_ns".into(), u64s(|r| r.start_ns)),
        Column::new("end_ns".into(), u64s(|r| r.end_ns)),
        Column::new("fct_ns".into(), u64s(|r| r.fct_ns)),
        Column::new("standalone_fct_ns".into(), u64s(|r| r.standalone_fct_ns)),
    ])
}

// ---------------------------------------------------------------------------------------
// compare
// ---------------------------------------------------------------------------------------

/// One summary metric on both back-ends.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricComparison {
    /// The `summary.csv` column (`iteration_time_ns`, `wall_time_ns`, ...).
    pub metric: &'static str,
    /// Replayer value.
    pub replay: u64,
    /// ns-3 value.
    pub ns3: u64,
    /// `(replay − ns3) / ns3`; NaN when ns-3's value is 0 and the replay's is not.
    pub rel_error: f64,
    /// `ns3 / replay`; 1 when both are 0, NaN when only the replay's is. For `wall_time_ns` this is the
    /// speed ratio of the replayer over ns-3.
    pub ns3_over_replay: f64,
}

/// The outcome of [`compare`].
#[derive(Clone, Debug)]
pub struct Comparison {
    /// The replay directory.
    pub replay_dir: PathBuf,
    /// The ns-3 directory.
    pub ns3_dir: PathBuf,
    /// The trace both ran (the replay summary's `trace`).
    pub trace: String,
    /// Records in the trace.
    pub records: u64,
    /// FCT error groups, in output order: all, per class, per mode, timers.
    pub fct_error: Vec<ErrorStats>,
    /// Summary metrics side by side (iteration time first, wall time last).
    pub iteration: Vec<MetricComparison>,
    /// Per-flow join: `flow_id, src, dst, mode, class, size_bytes, replay_fct_ns,
    /// ns3_fct_ns, rel_error`, sorted by `flow_id`.
    pub flows: DataFrame,
    /// Observed paths: both back-ends' bytes per channel, link by link ([`links`]).
    pub links: links::LinkOutcome,
    /// Aggregator slots per switch on both back-ends ([`slots`]); `None` when either
    /// directory has no `switches.csv`.
    pub slots: Option<Vec<slots::SlotComparison>>,
}

impl Comparison {
    /// Relative error of the iteration time, `(replay − ns3) / ns3`.
    pub fn iteration_rel_error(&self) -> f64 {
        self.metric("iteration_time_ns")
            .map_or(f64::NAN, |m| m.rel_error)
    }
    /// ns-3 wall time / replay wall time (how many times faster the replayer ran).
    pub fn wall_time_ratio(&self) -> f64 {
        self.metric("wall_time_ns")
            .map_or(f64::NAN, |m| m.ns3_over_replay)
    }
    /// The statistics of one group, e.g. `("class", "dp")`.
    pub fn stats(&self, scope: &str, group: &str) -> Option<&ErrorStats> {
        self.fct_error
            .iter()
            .find(|s| s.scope == scope && s.group == group)
    }
    fn metric(&self, name: &str) -> Option<&MetricComparison> {
        self.iteration.iter().find(|m| m.metric == name)
    }

    /// What `ina3d compare` prints: the FCT-error table, the iteration and wall-time
    /// lines, the link check and the slots per switch.
    pub fn summary_text(&self) -> Result<String, ReportError> {
        Ok(format!(
            "trace {} ({} records): replayer vs ns-3, relative FCT error (r-n)/n\n{}\
             iteration time: replay {} ns, ns-3 {} ns, error {:+.2} %\n\
             wall time: ns-3 / replay = {:.1}x\n",
            self.trace,
            self.records,
            format_table(&self.fct_error_table()?),
            self.metric("iteration_time_ns").map_or(0, |m| m.replay),
            self.metric("iteration_time_ns").map_or(0, |m| m.ns3),
            100.0 * self.iteration_rel_error(),
            self.wall_time_ratio()
        ) + &links_text(&self.links)
            + &slots::summary_text(self.slots.as_deref()))
    }

    /// `fct_error.csv` as a DataFrame.
    pub fn fct_error_table(&self) -> Result<DataFrame, ReportError> {
        let s = &self.fct_error;
        let f = |g: fn(&ErrorStats) -> f64| s.iter().map(g).collect::<Vec<f64>>();
        DataFrame::new_infer_height(vec![
            Column::new(
                "scope".into(),
                s.iter().map(|x| x.scope.as_str()).collect::<Vec<_>>(),
            ),
            Column::new(
                "group".into(),
                s.iter().map(|x| x.group.as_str()).collect::<Vec<_>>(),
            ),
            Column::new(
                "flows".into(),
                s.iter().map(|x| x.flows).collect::<Vec<_>>(),
            ),
            Column::new(
                "undefined".into(),
                s.iter().map(|x| x.undefined).collect::<Vec<_>>(),
            ),
            Column::new("mean_abs_rel_error".into(), f(|x| x.mean_abs)),
            Column::new("median_abs_rel_error".into(), f(|x| x.median_abs)),
            Column::new("p95_abs_rel_error".into(), f(|x| x.p95_abs)),
            Column::new("p99_abs_rel_error".into(), f(|x| x.p99_abs)),
            Column::new("max_abs_rel_error".into(), f(|x| x.max_abs)),
            Column::new("mean_signed_rel_error".into(), f(|x| x.mean_signed)),
        ])
        .map_err(pol(Path::new("fct_error.csv")))
    }

    /// `iteration.csv` as a DataFrame.
    pub fn iteration_table(&self) -> Result<DataFrame, ReportError> {
        let m = &self.iteration;
        DataFrame::new_infer_height(vec![
            Column::new(
                "metric".into(),
                m.iter().map(|x| x.metric).collect::<Vec<_>>(),
            ),
            Column::new(
                "replay".into(),
                m.iter().map(|x| x.replay).collect::<Vec<_>>(),
            ),
            Column::new("ns3".into(), m.iter().map(|x| x.ns3).collect::<Vec<_>>()),
            Column::new(
                "difference".into(),
                m.iter()
                    .map(|x| x.replay as i128 - x.ns3 as i128)
                    .map(|d| d.clamp(i64::MIN as i128, i64::MAX as i128) as i64)
                    .collect::<Vec<_>>(),
            ),
            Column::new(
                "rel_error".into(),
                m.iter().map(|x| x.rel_error).collect::<Vec<_>>(),
            ),
            Column::new(
                "ns3_over_replay".into(),
                m.iter().map(|x| x.ns3_over_replay).collect::<Vec<_>>(),
            ),
        ])
        .map_err(pol(Path::new("iteration.csv")))
    }

    /// Writes `fct_error.csv`, `iteration.csv`, `flows.csv` and, when both back-ends wrote
    /// them, `links.csv` ([`links::LinkCheck::write`]) and `switches.csv`
    /// ([`slots::write_comparison`]) into `dir` (created when missing), each atomically.
    /// Returns the paths written.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
        let set = crate::formats::atomic::OutputSet::begin(dir, "ina3d compare")?;
        let mut out = Vec::new();
        let p = dir.join("fct_error.csv");
        super::fct_error::write(&p, &self.fct_error)?;
        out.push(p);
        for (name, mut df) in [
            ("iteration.csv", self.iteration_table()?),
            ("flows.csv", self.flows.clone()),
        ] {
            let p = dir.join(name);
            write_csv(&mut df, &p)?;
            out.push(p);
        }
        if let links::LinkOutcome::Checked(l) = &self.links {
            let p = dir.join("links.csv");
            l.write(&p)?;
            out.push(p);
        }
        if let Some(rows) = &self.slots {
            let p = dir.join("switches.csv");
            slots::write_comparison(&p, rows)?;
            out.push(p);
        }
        set.finish()?;
        Ok(out)
    }
}

/// How many channels the link check compared and every one that differs.
fn links_text(links: &links::LinkOutcome) -> String {
    let l = match links {
        links::LinkOutcome::NotChecked(why) => return format!("links: not checked ({why})\n"),
        links::LinkOutcome::Checked(l) => l,
    };
    let d = l.differing();
    let how = if l.tolerance > 0.0 {
        format!("within {:.2} %", 100.0 * l.tolerance)
    } else {
        "byte-exact".to_string()
    };
    if d.is_empty() {
        return format!(
            "links: all {} channels carried the same bytes on both ({how})\n",
            l.channels.len()
        );
    }
    let mut s = format!(
        "links: LINK CHECK FAILED — {} of {} channels differ ({how}):\n",
        d.len(),
        l.channels.len()
    );
    for x in &d {
        let _ = writeln!(
            s,
            "  link {} {} -> {}: replay {} B, ns-3 {} B",
            x.link, x.from, x.to, x.replay_bytes, x.ns3_bytes
        );
    }
    s
}

/// Options of [`compare_with`].
#[derive(Clone, Debug, Default)]
pub struct CompareOptions {
    /// Accept summaries whose `trace` paths differ (e.g. the ns-3 run read a copy of the
    /// trace). The record count, flow ids and every flow's endpoints, size, mode and class
    /// are still required to agree.
    pub ignore_trace_name: bool,
    /// Relative per-channel difference the link check allows; `None`: byte-exact unless
    /// the ns-3 run says its net records carried other headers than the replayer's
    /// ([`links::tolerance_for`]).
    pub link_tolerance: Option<f64>,
}

/// [`compare_with`] with default options.
pub fn compare(replay_dir: &Path, ns3_dir: &Path) -> Result<Comparison, ReportError> {
    compare_with(replay_dir, ns3_dir, &CompareOptions::default())
}

/// Whether two `trace` strings of summaries in `dir_a`, `dir_b` name the same file: the
/// same text, or the same existing file once resolved (relative paths are tried against
/// the working directory and against the summary's directory).
fn same_trace(a: &str, dir_a: &Path, b: &str, dir_b: &Path) -> bool {
    if a == b {
        return true;
    }
    let resolve = |s: &str, d: &Path| -> Vec<PathBuf> {
        let p = Path::new(s);
        [p.to_path_buf(), d.join(p)]
            .into_iter()
            .filter_map(|c| c.canonicalize().ok())
            .collect()
    };
    let ra = resolve(a, dir_a);
    let rb = resolve(b, dir_b);
    ra.iter().any(|x| rb.contains(x))
}

/// Joins a replay directory and an ns-3 directory (each with `fct.csv` and `summary.csv`)
/// of the same trace; see the module docs for the statistics.
///
/// Errors, each naming the file: a missing file, an empty one (no header, or header
/// only), a malformed value (line and field), directories of different traces (the
/// summaries' `trace` or `records` disagree, the flow ids differ, or a flow's endpoints,
/// size, mode or class differ), and an `fct.csv` whose row count is not the summary's
/// `records`.
pub fn compare_with(
    replay_dir: &Path,
    ns3_dir: &Path,
    opts: &CompareOptions,
) -> Result<Comparison, ReportError> {
    for d in [replay_dir, ns3_dir] {
        if !d.is_dir() {
            return Err(ReportError::MissingFile {
                path: d.to_path_buf(),
                what: "output directory with fct.csv and summary.csv",
            });
        }
    }
    let (rs_path, ns_path) = (replay_dir.join("summary.csv"), ns3_dir.join("summary.csv"));
    let (rf_path, nf_path) = (replay_dir.join("fct.csv"), ns3_dir.join("fct.csv"));
    let rs = read_summary(&rs_path)?;
    let ns = read_summary(&ns_path)?;
    let mismatch = |field, r: String, n: String| ReportError::TraceMismatch {
        field,
        replay: r,
        ns3: n,
        replay_file: rs_path.clone(),
        ns3_file: ns_path.clone(),
    };
    if rs.records != ns.records {
        return Err(mismatch(
            "records",
            rs.records.to_string(),
            ns.records.to_string(),
        ));
    }
    if !opts.ignore_trace_name && !same_trace(&rs.trace, replay_dir, &ns.trace, ns3_dir) {
        return Err(mismatch("trace", rs.trace.clone(), ns.trace.clone()));
    }
    let rf = read_fct(&rf_path)?;
    let nf = read_fct(&nf_path)?;
    for (df, p, s) in [(&rf, &rf_path, &rs_path), (&nf, &nf_path, &ns_path)] {
        if df.height() as u64 != rs.records {
            return Err(ReportError::RecordCount {
                path: p.clone(),
                rows: df.height(),
                summary: s.clone(),
                records: rs.records,
            });
        }
    }
    check_flow_ids(&rf, &rf_path, &nf, &nf_path)?;

    let ns3_side = nf.clone().lazy().select([
        col("flow_id"),
        col("src").alias("ns3_src"),
        col("dst").alias("ns3_dst"),
        col("mode").alias("ns3_mode"),
        col("class").alias("ns3_class"),
        col("size_bytes").alias("ns3_size_bytes"),
        col("fct_ns").alias("ns3_fct_ns"),
    ]);
    let r = col("replay_fct_ns").cast(DataType::Float64);
    let n = col("ns3_fct_ns").cast(DataType::Float64);
    let rel = when(col("ns3_fct_ns").eq(lit(0u64)))
        .then(
            when(col("replay_fct_ns").eq(lit(0u64)))
                .then(lit(0.0f64))
                .otherwise(lit(f64::NAN)),
        )
        .otherwise((r - n.clone()) / n)
        .alias("rel_error");
    let joined = rf
        .clone()
        .lazy()
        .select([
            col("flow_id"),
            col("src"),
            col("dst"),
            col("mode"),
            col("class"),
            col("size_bytes"),
            col("fct_ns").alias("replay_fct_ns"),
        ])
        .join(
            ns3_side,
            [col("flow_id")],
            [col("flow_id")],
            JoinArgs::new(JoinType::Inner),
        )
        .sort(["flow_id"], Default::default())
        .with_column(rel)
        .collect()
        .map_err(pol(&nf_path))?;
    check_flow_fields(&joined, &rf_path, &nf_path)?;
    let flows = joined
        .select([
            "flow_id",
            "src",
            "dst",
            "mode",
            "class",
            "size_bytes",
            "replay_fct_ns",
            "ns3_fct_ns",
            "rel_error",
        ])
        .map_err(pol(&nf_path))?;

    let fct_error = group_stats(&flows).map_err(pol(&nf_path))?;
    let iteration = metric_rows(&rs, &ns);
    let links = links::compare_dirs(replay_dir, ns3_dir, opts.link_tolerance)?;
    let slots = slots::compare_dirs(replay_dir, ns3_dir)?;
    Ok(Comparison {
        replay_dir: replay_dir.to_path_buf(),
        ns3_dir: ns3_dir.to_path_buf(),
        trace: rs.trace.clone(),
        records: rs.records,
        fct_error,
        iteration,
        flows,
        links,
        slots,
    })
}

fn u64s(df: &DataFrame, c: &str) -> PolarsResult<Vec<u64>> {
    Ok(df.column(c)?.u64()?.into_no_null_iter().collect())
}

fn strs(df: &DataFrame, c: &str) -> PolarsResult<Vec<String>> {
    Ok(df
        .column(c)?
        .str()?
        .iter()
        .map(|s| s.unwrap_or("").to_string())
        .collect())
}

fn check_flow_ids(rf: &DataFrame, rp: &Path, nf: &DataFrame, np: &Path) -> Result<(), ReportError> {
    let sorted_unique = |df: &DataFrame, p: &Path| -> Result<Vec<u64>, ReportError> {
        let mut v = u64s(df, "flow_id").map_err(pol(p))?;
        v.sort_unstable();
        if let Some(w) = v.windows(2).find(|w| w[0] == w[1]) {
            return Err(ReportError::DuplicateFlow {
                path: p.to_path_buf(),
                flow_id: w[0],
            });
        }
        Ok(v)
    };
    let r = sorted_unique(rf, rp)?;
    let n = sorted_unique(nf, np)?;
    if r == n {
        return Ok(());
    }
    let rset: std::collections::BTreeSet<u64> = r.iter().copied().collect();
    let nset: std::collections::BTreeSet<u64> = n.iter().copied().collect();
    let only_r: Vec<u64> = rset.difference(&nset).copied().collect();
    let only_n: Vec<u64> = nset.difference(&rset).copied().collect();
    let first = |v: &[u64]| v.first().map_or("-".to_string(), u64::to_string);
    Err(ReportError::FlowIdMismatch {
        only_replay: only_r.len(),
        first_replay: first(&only_r),
        only_ns3: only_n.len(),
        first_ns3: first(&only_n),
        replay_file: rp.to_path_buf(),
        ns3_file: np.to_path_buf(),
    })
}

/// Every joined flow must describe the same transfer on both sides.
fn check_flow_fields(j: &DataFrame, rp: &Path, np: &Path) -> Result<(), ReportError> {
    let e = pol(np);
    let ids = u64s(j, "flow_id").map_err(e)?;
    let num = |a: &str, b: &str| -> PolarsResult<(Vec<u64>, Vec<u64>)> {
        let x = j.column(a)?.cast(&DataType::UInt64)?;
        let y = j.column(b)?.cast(&DataType::UInt64)?;
        Ok((
            x.u64()?.into_no_null_iter().collect(),
            y.u64()?.into_no_null_iter().collect(),
        ))
    };
    let mut first: Option<(usize, &'static str, String, String)> = None;
    let mut note = |i: usize, f: &'static str, a: String, b: String| {
        if first.as_ref().is_none_or(|x| i < x.0) {
            first = Some((i, f, a, b));
        }
    };
    for (f, a, b) in [
        ("src", "src", "ns3_src"),
        ("dst", "dst", "ns3_dst"),
        ("size_bytes", "size_bytes", "ns3_size_bytes"),
    ] {
        let (x, y) = num(a, b).map_err(pol(np))?;
        if let Some(i) = (0..x.len()).find(|&i| x[i] != y[i]) {
            note(i, f, x[i].to_string(), y[i].to_string());
        }
    }
    for (f, a, b) in [
        ("mode", "mode", "ns3_mode"),
        ("class", "class", "ns3_class"),
    ] {
        let x = strs(j, a).map_err(pol(np))?;
        let y = strs(j, b).map_err(pol(np))?;
        if let Some(i) = (0..x.len()).find(|&i| x[i] != y[i]) {
            note(i, f, x[i].clone(), y[i].clone());
        }
    }
    match first {
        None => Ok(()),
        Some((i, field, replay, ns3)) => Err(ReportError::FlowMismatch {
            flow_id: ids[i],
            field,
            replay,
            ns3,
            replay_file: rp.to_path_buf(),
            ns3_file: np.to_path_buf(),
        }),
    }
}

fn is_network(mode: &str) -> bool {
    matches!(mode, "net" | "ina")
}

/// Order classes as the trace contract does (tp, pp, dp, emb), then any other name.
fn class_rank(c: &str) -> (usize, String) {
    let pos = ["tp", "pp", "dp", "emb"]
        .iter()
        .position(|&x| x == c)
        .unwrap_or(usize::MAX);
    (pos, c.to_string())
}

fn group_stats(flows: &DataFrame) -> PolarsResult<Vec<ErrorStats>> {
    let modes = strs(flows, "mode")?;
    let classes = strs(flows, "class")?;
    let errs: Vec<f64> = flows
        .column("rel_error")?
        .f64()?
        .into_no_null_iter()
        .collect();
    let mut all = Vec::new();
    let mut by_class: BTreeMap<(usize, String), Vec<f64>> = BTreeMap::new();
    let mut by_mode: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut timers = Vec::new();
    for i in 0..errs.len() {
        if is_network(&modes[i]) {
            all.push(errs[i]);
            by_class
                .entry(class_rank(&classes[i]))
                .or_default()
                .push(errs[i]);
            by_mode.entry(modes[i].clone()).or_default().push(errs[i]);
        } else {
            timers.push(errs[i]);
        }
    }
    let mut out = Vec::new();
    out.extend(ErrorStats::of("all", "net+ina", &all));
    for ((_, c), v) in &by_class {
        out.extend(ErrorStats::of("class", c, v));
    }
    for (m, v) in &by_mode {
        out.extend(ErrorStats::of("mode", m, v));
    }
    out.extend(ErrorStats::of("timers", "compute+nvlink", &timers));
    Ok(out)
}

fn metric_rows(r: &Summary, n: &Summary) -> Vec<MetricComparison> {
    let pairs = r
        .metrics()
        .into_iter()
        .zip(n.metrics())
        .map(|((name, a), (_, b))| (name, a, b));
    pairs
        .into_iter()
        .map(|(metric, a, b)| MetricComparison {
            metric,
            replay: a,
            ns3: b,
            rel_error: rel_error(a, b),
            ns3_over_replay: match (a, b) {
                (0, 0) => 1.0,
                (0, _) => f64::NAN,
                _ => b as f64 / a as f64,
            },
        })
        .collect()
}

/// Writes `df` as CSV to `path` atomically (`path.tmp`, then rename). Floats are written
/// in polars' shortest round-trip form, nulls as empty fields.
pub fn write_csv(df: &mut DataFrame, path: &Path) -> Result<(), ReportError> {
    if let Some(d) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(d).map_err(io(d))?;
    }
    let mut bytes = Vec::new();
    CsvWriter::new(&mut bytes)
        .include_header(true)
        .finish(df)
        .map_err(pol(path))?;
    Ok(crate::formats::write_atomic_bytes(path, &bytes)?)
}

fn cell(c: &Column, i: usize) -> String {
    match c.dtype() {
        DataType::String => c
            .str()
            .ok()
            .and_then(|s| s.get(i))
            .unwrap_or("")
            .to_string(),
        DataType::Float64 => match c.f64().ok().and_then(|s| s.get(i)) {
            Some(x) if x.is_nan() => "NaN".into(),
            Some(x) if x != 0.0 && x.abs() < 1e-3 => format!("{x:.3e}"),
            Some(x) => format!("{x:.4}"),
            None => String::new(),
        },
        _ => match c
            .cast(&DataType::UInt64)
            .ok()
            .and_then(|s| s.u64().ok().and_then(|s| s.get(i)))
        {
            Some(x) => x.to_string(),
            None => String::new(),
        },
    }
}

/// `df` as an aligned text table (text left-aligned, numbers right-aligned, floats with 4
/// decimals), laid out by [`super::text::layout`] like every table the project prints.
pub fn format_table(df: &DataFrame) -> String {
    let cols: Vec<super::text::Cells> = df
        .columns()
        .iter()
        .map(|c| super::text::Cells {
            header: c.name().to_string(),
            cells: (0..df.height()).map(|i| cell(c, i)).collect(),
            right: c.dtype() != &DataType::String,
        })
        .collect();
    super::text::layout(&cols)
}
