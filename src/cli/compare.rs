//! `ina3d compare`: join a replay directory and an ns-3 directory of the same trace on
//! `flow_id` and write the FCT-error and iteration tables (see `ina3d::report`).

use std::path::PathBuf;

/// Arguments of `ina3d compare`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Replayer output directory (`fct.csv`, `summary.csv`), e.g. from `ina3d replay -o`.
    #[arg(long, value_name = "DIR")]
    pub replay: PathBuf,
    /// ns-3 output directory of the same trace (`fct.csv`, `summary.csv`), e.g. from
    /// `ina3d ns3 run`. Or another simulator's output: an HPCC-family `fct.txt` of the
    /// `flow.txt` that `ns3 emit` wrote (compared per flow; see `--emit`), or SimAI's
    /// `EndToEnd.csv` of the workload `export aicb` wrote (compared per iteration and
    /// class: SimAI reports no flows) — the file, or a directory holding it and no
    /// `summary.csv`.
    #[arg(long, value_name = "DIR|FILE")]
    pub ns3: PathBuf,
    /// Where to write `fct_error.csv`, `iteration.csv`, `flows.csv`, `links.csv` and (when
    /// both directories have one) `switches.csv`: INA slot peak and slot-time per switch on
    /// both back-ends with their differences. Against an external `fct.txt`: `fct.csv`
    /// (its rows mapped onto the trace's records) and `fct_error.csv` (per class); against
    /// SimAI's `EndToEnd.csv`: `end_to_end.csv`.
    #[arg(short, long, value_name = "DIR")]
    pub output: PathBuf,
    /// The `ina3d ns3 emit` directory an external `fct.txt` (`--ns3` pointing at an
    /// HPCC-family fct.txt, or a directory holding one and no summary.csv) was produced
    /// from; default: the fct.txt's own directory.
    #[arg(long, value_name = "DIR")]
    pub emit: Option<PathBuf>,
    /// Accept summaries naming different trace paths (e.g. the ns-3 run read a copy);
    /// record counts and every flow's id, endpoints, size, mode and class must still agree.
    #[arg(long)]
    pub ignore_trace_name: bool,
    /// Relative difference of a channel's bytes the link check allows (0 = byte-exact).
    /// Default: exact, or 0.01 when the ns-3 run's net records carried TCP headers (54 B
    /// per packet where the replayer counts 48). The check compares every channel's wire
    /// bytes of trace data in both directories' `links.csv`; any channel beyond the
    /// tolerance makes `compare` fail (exit 2) after writing its tables.
    #[arg(long, value_name = "FRACTION")]
    pub link_tolerance: Option<f64>,
}

/// What `--ns3` names.
enum Other {
    /// An HPCC-family fct.txt.
    HpccFct(PathBuf),
    /// A SimAI EndToEnd.csv.
    SimaiEndToEnd(PathBuf),
    /// An ns-3 (glue) output directory.
    Ns3Dir,
}

/// Classifies `--ns3`: a file is an EndToEnd.csv when its first line is SimAI's
/// `File name,` header, else an fct.txt; a directory without `summary.csv` holding one
/// `*EndToEnd.csv` (SimAI names it `<-r prefix>EndToEnd.csv`) or `fct.txt` stands for that
/// file.
fn classify(ns3: &std::path::Path) -> anyhow::Result<Other> {
    use anyhow::Context;
    let of_file = |f: PathBuf| -> anyhow::Result<Other> {
        let text =
            ina3d::formats::read_text(&f).with_context(|| format!("reading {}", f.display()))?;
        Ok(match ina3d::ns3::ingest::detect(&f, &text) {
            Some(ina3d::ns3::ingest::Kind::EndToEnd) => Other::SimaiEndToEnd(f),
            _ => Other::HpccFct(f),
        })
    };
    if ns3.is_file() {
        return of_file(ns3.to_path_buf());
    }
    if !ns3.join("summary.csv").exists() && ns3.is_dir() {
        let mut e2e: Vec<PathBuf> = std::fs::read_dir(ns3)
            .with_context(|| format!("listing {}", ns3.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.is_file()
                    && p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.ends_with("EndToEnd.csv"))
            })
            .collect();
        e2e.sort();
        match e2e.len() {
            0 => {}
            1 => return of_file(e2e.remove(0)),
            _ => anyhow::bail!(
                "{} holds several SimAI results ({}): name the one of this replay with --ns3 FILE",
                ns3.display(),
                e2e.iter()
                    .filter_map(|p| p.file_name()?.to_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
        if ns3.join("fct.txt").is_file() {
            return of_file(ns3.join("fct.txt"));
        }
    }
    Ok(Other::Ns3Dir)
}

/// The header keys of the trace a replay ran (its `summary.csv` names it: as given, or
/// relative to the replay directory or its parent); `None` when it cannot be read.
fn trace_header(
    replay: &std::path::Path,
    trace: &str,
) -> Option<std::collections::BTreeMap<String, String>> {
    let t = std::path::Path::new(trace);
    let candidates = [
        t.to_path_buf(),
        replay.join(t),
        replay.parent().map(|p| p.join(t)).unwrap_or_default(),
    ];
    candidates
        .iter()
        .filter(|p| p.is_file())
        .find_map(|p| ina3d::trace::TraceReader::open(p).ok())
        .map(|r| r.header().meta.clone())
}

/// Run `ina3d compare`: against another simulator's output when `--ns3` names one, else
/// two back-end directories.
pub fn run(a: Args) -> anyhow::Result<()> {
    match classify(&a.ns3)? {
        Other::HpccFct(f) => run_external(&a, &f),
        Other::SimaiEndToEnd(f) => run_end_to_end(&a, &f),
        Other::Ns3Dir => run_tables(a),
    }
}

/// The replay's iteration breakdown against SimAI's `EndToEnd.csv`
/// (`ina3d::interop::external::compare_end_to_end`): printed, and written to
/// `end_to_end.csv` in the output directory.
fn run_end_to_end(a: &Args, e2e_path: &std::path::Path) -> anyhow::Result<()> {
    use anyhow::Context;
    use ina3d::formats::{simai_end_to_end, summary_csv};
    let summary = summary_csv::read(&a.replay.join("summary.csv"))?;
    let (e2e, warnings) = simai_end_to_end::read(e2e_path)?;
    for w in &warnings {
        eprintln!("{w}");
    }
    let job = trace_header(&a.replay, &summary.trace);
    let c = ina3d::interop::external::compare_end_to_end(&summary, &e2e, job.as_ref(), e2e_path)
        .with_context(|| {
            format!(
                "comparing {} with {}",
                a.replay.display(),
                e2e_path.display()
            )
        })?;
    let front = match c.backend {
        simai_end_to_end::Backend::Analytical => {
            "SimAI analytical: communication from bus-bandwidth formulas, not simulated"
        }
        simai_end_to_end::Backend::Ns3 => "SimAI on ns-3: communication simulated",
        simai_end_to_end::Backend::Unknown => {
            "SimAI, front-end not named in the file: simulated or analytical"
        }
    };
    println!(
        "replayer ({}) vs {} ({front}): iteration breakdown, (r-s)/s",
        a.replay.display(),
        e2e_path.display()
    );
    let ms = |ns: f64| ns / 1e6;
    for r in &c.rows {
        let simai = r
            .simai_ns
            .map_or("—".to_string(), |v| format!("{:.3} ms", ms(v)));
        let err = r
            .rel_error
            .map_or("—".to_string(), |e| format!("{:+.2} %", 100.0 * e));
        println!(
            "  {:<28} {:>12.3} ms {:>14} {:>10}  ({}: {})",
            r.metric,
            ms(r.replay_ns as f64),
            simai,
            err,
            r.simai_columns,
            r.simai_basis
        );
    }
    for n in &c.not_compared {
        println!("not compared: {n}");
    }
    std::fs::create_dir_all(&a.output)
        .with_context(|| format!("creating {}", a.output.display()))?;
    let out = a.output.join("end_to_end.csv");
    simai_end_to_end::write_comparison(&out, &c.rows)?;
    eprintln!("wrote {}", out.display());
    Ok(())
}

/// Per-flow errors of the replay against an HPCC-family fct.txt mapped back to records
/// (`ina3d::interop::external`), with what could not be matched; written to the output
/// directory as `fct.csv` (the external run in the results schema, matched records only)
/// and `fct_error.csv` (per class). A file none of whose rows matches a record of the
/// emitted flows is refused: it is not an fct.txt of that `flow.txt`.
fn run_external(a: &Args, fct_txt: &std::path::Path) -> anyhow::Result<()> {
    use anyhow::Context;
    let emit = a
        .emit
        .clone()
        .or_else(|| fct_txt.parent().map(std::path::Path::to_path_buf))
        .unwrap_or_default();
    let ext = ina3d::interop::external::match_hpcc_fct(&emit, fct_txt).with_context(|| {
        format!(
            "mapping {} onto the flows emitted in {}",
            fct_txt.display(),
            emit.display()
        )
    })?;
    for w in ext.warnings.iter().take(5) {
        eprintln!("{w}");
    }
    if ext.warnings.len() > 5 {
        eprintln!(
            "warning: … and {} more lines that are not fct rows",
            ext.warnings.len() - 5
        );
    }
    if ext.rows.is_empty() {
        anyhow::bail!(
            "{}: no row matches a network record emitted in {} ({} fct rows, {} lines that are \
             not fct rows, {} network records expected): not an fct.txt of that flow.txt{}",
            fct_txt.display(),
            emit.display(),
            ext.unmatched_lines.len(),
            ext.skipped_lines,
            ext.network_records,
            ext.warnings
                .first()
                .map_or(String::new(), |w| format!("; line {}: {}", w.line, w.msg))
        );
    }
    let replay = ina3d::formats::fct_csv::read(&a.replay.join("fct.csv"))?;
    let stats = ina3d::fct::stats::class_errors(&replay, &ext.rows);
    println!(
        "{}: {} of {} network records matched ({} records with pieces missing, {} fct rows unmatched, {} lines not fct rows)",
        fct_txt.display(),
        ext.rows.len(),
        ext.network_records,
        ext.incomplete_records.len(),
        ext.unmatched_lines.len(),
        ext.skipped_lines
    );
    println!("not comparable: compute and NVLink records (not simulated), iteration time (flow.txt starts are open-loop)");
    println!("replayer vs external, relative FCT error (r-n)/n per class: flows, median |e|, p95 |e|, mean signed");
    for (c, s) in &stats {
        println!(
            "  {:<6} {:>8} {:>9.2} % {:>9.2} % {:>+9.2} %",
            c.as_str(),
            s.flows,
            100.0 * s.median_abs,
            100.0 * s.p95_abs,
            100.0 * s.mean_signed
        );
    }
    for l in ext.unmatched_lines.iter().take(5) {
        eprintln!("unmatched fct row: {l}");
    }
    std::fs::create_dir_all(&a.output)
        .with_context(|| format!("creating {}", a.output.display()))?;
    let fct = a.output.join("fct.csv");
    ina3d::formats::fct_csv::write(&fct, &ext.rows)?;
    let errors = a.output.join("fct_error.csv");
    let rows: Vec<_> = stats.into_values().collect();
    ina3d::report::fct_error::write(&errors, &rows)?;
    eprintln!("wrote {} and {}", fct.display(), errors.display());
    Ok(())
}

/// Run `ina3d compare` on two back-end directories.
#[cfg(feature = "tables")]
fn run_tables(a: Args) -> anyhow::Result<()> {
    use anyhow::Context;
    use ina3d::report;
    if let Some(t) = a.link_tolerance {
        if !(0.0..=1.0).contains(&t) {
            anyhow::bail!("--link-tolerance {t}: expected a fraction between 0 and 1");
        }
    }
    let opts = report::CompareOptions {
        ignore_trace_name: a.ignore_trace_name,
        link_tolerance: a.link_tolerance,
    };
    let c = report::compare_with(&a.replay, &a.ns3, &opts)
        .with_context(|| format!("comparing {} with {}", a.replay.display(), a.ns3.display()))?;
    let mut written = c.write(&a.output)?;
    let (rb, nb) = (a.replay.join("bench.csv"), a.ns3.join("bench.csv"));
    if rb.exists() && nb.exists() {
        use ina3d::formats::bench_csv;
        let both = ina3d::fct::bench::compare_bench(&bench_csv::read(&rb)?, &bench_csv::read(&nb)?)
            .with_context(|| format!("{} and {}", rb.display(), nb.display()))?;
        let p = a.output.join("bench.csv");
        bench_csv::write_comparison(&p, &both)?;
        println!("collective bench, busbw (GB/s): size, replay, ns-3, error");
        for r in &both {
            println!(
                "  {:>12} {:>9.3} {:>9.3} {:>+8.2} %",
                r.size_bytes,
                r.replay_busbw_gbs,
                r.ns3_busbw_gbs,
                100.0 * r.busbw_rel_error
            );
        }
        written.push(p);
    }
    print!("{}", c.summary_text()?);
    for p in written {
        eprintln!("wrote {}", p.display());
    }
    if let report::links::LinkOutcome::Checked(l) = &c.links {
        let n = l.differing().len();
        if n > 0 {
            anyhow::bail!(
                "link check failed: {n} channel(s) carried different bytes on ns-3 than in the replay (see {})",
                a.output.join("links.csv").display()
            );
        }
    }
    Ok(())
}

/// Run `ina3d compare` on two back-end directories (this build has no tables).
#[cfg(not(feature = "tables"))]
fn run_tables(_a: Args) -> anyhow::Result<()> {
    anyhow::bail!(
        "`ina3d compare` needs the `tables` feature (polars); rebuild with default features"
    )
}
