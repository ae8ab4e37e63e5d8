//! `ina3d ns3 run DIR`: build the glue if needed, run it on an emitted directory, check the
//! run is complete and write `summary.csv`.
//!
//! Completeness is checked, not assumed: the glue writes `done` last, and only when every
//! record finished and every INA sum was right; then every trace record must have exactly
//! one `fct.csv` row carrying all its bytes, starting no earlier than its deps' ends plus
//! its gap. Anything else is [`Ns3Error::Incomplete`] and `summary.csv` is not written.

use super::Ns3Error;
use crate::fct::{self, FctRow, Summary, SummaryContext};
use crate::formats::{fct_csv, glue_trace_txt, routes_txt, summary_csv};
use crate::record::{FlowRecord, Mode};
use crate::topology::{Channel, NodeKind, Topology};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::SystemTime;

/// ns-3 modules the glue links.
pub const NS3_MODULES: [&str; 6] = [
    "core",
    "network",
    "internet",
    "point-to-point",
    "applications",
    "traffic-control",
];
/// The header whose presence means Debian's ns-3 dev package is installed.
pub const NS3_HEADER: &str = "/usr/include/ns3/core-module.h";
/// Glue sources, relative to the crate root.
pub const GLUE_SOURCES: [&str; 8] = [
    "scenario/ina3d-ns3.cc",
    "helper/ina3d-helper.cc",
    "model/dcqcn.cc",
    "model/ina-apps.cc",
    "model/ina3d-dag.cc",
    "model/ina3d-link-monitor.cc",
    "model/ina3d-pair-routing.cc",
    "model/ina3d-roce.cc",
];

/// Where the glue sources are (the crate's `ns3-glue/`).
pub fn glue_source_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("ns3-glue")
}

/// Where the built glue goes: `$INA3D_NS3_GLUE` or `<crate>/target/ns3-glue/ina3d-ns3`
/// (where `make glue` puts it).
pub fn glue_binary() -> PathBuf {
    std::env::var_os("INA3D_NS3_GLUE")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/ns3-glue/ina3d-ns3"))
}

/// Name of the file `emit` recorded in `source_trace.txt` (the trace the user gave), so the
/// ns-3 summary names the same trace as the replayer's and `ina3d compare` can check it.
pub fn source_trace(dir: &Path) -> Option<String> {
    let t = std::fs::read_to_string(dir.join(SOURCE_TRACE_FILE)).ok()?;
    let t = t.trim();
    (!t.is_empty()).then(|| t.to_string())
}

/// The file in an emit directory that names the trace it was emitted from.
pub const SOURCE_TRACE_FILE: &str = "source_trace.txt";

fn mtime(p: &Path) -> Option<SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

/// Compiler flags for ns-3: pkg-config when it knows ns-3, else the plain `-l` list.
fn ns3_flags() -> Vec<String> {
    let names: Vec<String> = NS3_MODULES.iter().map(|m| format!("ns3-{m}")).collect();
    let out = Command::new("pkg-config")
        .arg("--cflags")
        .arg("--libs")
        .args(&names)
        .output();
    match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .map(String::from)
            .collect(),
        _ => NS3_MODULES.iter().map(|m| format!("-lns3-{m}")).collect(),
    }
}

/// Build the glue into `out` unless it is newer than every source. Fails with
/// [`Ns3Error::Ns3Missing`] when ns-3's headers are not installed.
pub fn build_glue(src: &Path, out: &Path) -> Result<PathBuf, Ns3Error> {
    build_glue_checking(src, out, Path::new(NS3_HEADER))
}

/// [`build_glue`] with the ns-3 header to look for given (tests point it elsewhere to
/// check the missing-install message).
pub fn build_glue_checking(src: &Path, out: &Path, ns3_header: &Path) -> Result<PathBuf, Ns3Error> {
    if !ns3_header.exists() {
        return Err(Ns3Error::Ns3Missing(format!(
            "{} not found",
            ns3_header.display()
        )));
    }
    let mut newest = None;
    for entry in ["scenario", "helper", "model"].iter().flat_map(|d| {
        std::fs::read_dir(src.join(d))
            .into_iter()
            .flatten()
            .flatten()
    }) {
        newest = newest.max(mtime(&entry.path()));
    }
    if newest.is_none() {
        return Err(Ns3Error::Build(format!(
            "no glue sources under {}",
            src.display()
        )));
    }
    if let (Some(b), Some(n)) = (mtime(out), newest) {
        if b >= n {
            return Ok(out.to_path_buf());
        }
    }
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Ns3Error::io(parent, e))?;
    }
    let tmp = out.with_extension(format!("tmp{}", std::process::id()));
    let o = Command::new("g++")
        .args(["-std=c++17", "-O2", "-o"])
        .arg(&tmp)
        .args(GLUE_SOURCES.iter().map(|s| src.join(s)))
        .args(ns3_flags())
        .output()
        .map_err(|e| Ns3Error::Build(format!("cannot run g++: {e}")))?;
    if !o.status.success() {
        let _ = std::fs::remove_file(&tmp);
        let err = String::from_utf8_lossy(&o.stderr);
        let first: String = err
            .lines()
            .filter(|l| l.contains("error"))
            .take(5)
            .collect::<Vec<_>>()
            .join("\n");
        if err.contains("ns3/") && err.contains("No such file") {
            return Err(Ns3Error::Ns3Missing(first));
        }
        return Err(Ns3Error::Build(first));
    }
    std::fs::rename(&tmp, out).map_err(|e| Ns3Error::io(out, e))?;
    Ok(out.to_path_buf())
}

/// Outcome of a complete glue run.
#[derive(Clone, Debug, PartialEq)]
pub struct RunReport {
    /// The summary written to `summary.csv`.
    pub summary: Summary,
    /// Per-record outcomes (`fct.csv`).
    pub rows: Vec<FctRow>,
    /// The glue's `stats.txt`, key → value.
    pub stats: BTreeMap<String, u64>,
    /// What the glue warned about (e.g. a DCQCN key missing from `config.txt` and the
    /// default it used instead), without the `warning: ` prefix.
    pub warnings: Vec<String>,
}

/// Output files of a run, removed before a new run so nothing stale is taken as its result.
pub const OUTPUTS: [&str; 10] = [
    "done",
    "fct.csv",
    "fct.txt",
    "stats.txt",
    "summary.csv",
    "fct.partial.csv",
    "links.csv",
    "links_control.csv",
    "switches.csv",
    "rates.csv",
];

/// Run the glue binary on `dir`; `progress(done, total)` is called for each progress line.
pub fn run_glue(
    binary: &Path,
    dir: &Path,
    mut progress: impl FnMut(u64, u64),
) -> Result<RunReport, Ns3Error> {
    let trace_path = dir.join("trace.txt");
    let text = std::fs::read_to_string(&trace_path).map_err(|e| Ns3Error::io(&trace_path, e))?;
    let (records, _) = glue_trace_txt::parse(&trace_path, &text)?;
    for f in OUTPUTS {
        let _ = std::fs::remove_file(dir.join(f));
    }
    let wall0 = std::time::Instant::now();
    // its own process group, killed with ina3d (super::child)
    let mut child = super::child::spawn(
        Command::new(binary)
            .arg(format!("--dir={}", dir.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
    )
    .map_err(|e| Ns3Error::io(binary, e))?;
    let mut messages = Vec::new();
    if let Some(err) = child.inner().stderr.take() {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            let t: Vec<&str> = line.split_whitespace().collect();
            match (
                t.first(),
                t.get(1).and_then(|x| x.parse().ok()),
                t.get(2).and_then(|x| x.parse().ok()),
            ) {
                (Some(&"progress"), Some(d), Some(n)) => progress(d, n),
                _ => messages.push(line),
            }
        }
    }
    let status = child.wait().map_err(|e| Ns3Error::io(binary, e))?;
    let wall = wall0.elapsed();
    let msg = messages.join("\n");
    if !status.success() || !dir.join("done").exists() {
        let how = match status.code() {
            Some(2) => "the glue rejected its input".to_string(),
            Some(3) => "records left unfinished when the simulation ended".to_string(),
            Some(c) => format!("the glue exited with status {c}"),
            None => "the glue was killed before it finished".to_string(),
        };
        return Err(Ns3Error::Incomplete(format!(
            "{how}; no `done` marker in {}. {msg}",
            dir.display()
        )));
    }
    let topo_path = dir.join("topology.txt");
    let (topo, _) = Topology::read_file(&topo_path)?;
    let rows = fct_csv::read(&dir.join("fct.csv"))?;
    check_complete(&records, &rows, &topo)?;
    let stats = read_stats(&dir.join("stats.txt"))?;
    let ctx = SummaryContext {
        backend: "ns3".into(),
        trace: source_trace(dir).unwrap_or_else(|| trace_path.display().to_string()),
        switch_bytes: switch_bytes(&records, &topo, &dir.join("routes.txt"))?,
        ina_slot_peak: stats.get("ina_slot_peak").copied().unwrap_or(0),
        wall_time_ns: wall.as_nanos() as u64,
    };
    let summary =
        fct::summarize(&records, &rows, &ctx).map_err(|e| Ns3Error::Incomplete(e.to_string()))?;
    summary_csv::write(&dir.join("summary.csv"), &summary)?;
    let warnings = messages
        .iter()
        .filter_map(|m| m.strip_prefix("warning: ").map(str::to_string))
        .collect();
    Ok(RunReport {
        summary,
        rows,
        stats,
        warnings,
    })
}

/// Read the glue's `stats.txt` (`key value` lines, unsigned values).
pub fn read_stats(path: &Path) -> Result<BTreeMap<String, u64>, Ns3Error> {
    let text = std::fs::read_to_string(path).map_err(|e| Ns3Error::io(path, e))?;
    let mut m = BTreeMap::new();
    for (i, l) in text.lines().enumerate() {
        let mut t = l.split_whitespace();
        if let (Some(k), Some(v)) = (t.next(), t.next()) {
            let v = v.parse().map_err(|_| {
                Ns3Error::parse(path, i + 1, k, format!("`{v}` is not an unsigned integer"))
            })?;
            m.insert(k.to_string(), v);
        }
    }
    Ok(m)
}

/// Every record has exactly one row with all its bytes, and starts after its deps + gap.
pub fn check_complete(
    records: &[FlowRecord],
    rows: &[FctRow],
    topo: &Topology,
) -> Result<(), Ns3Error> {
    let mut by_id: BTreeMap<u64, &FctRow> = BTreeMap::new();
    for r in rows {
        if by_id.insert(r.flow_id, r).is_some() {
            return Err(Ns3Error::Incomplete(format!(
                "record {} has two fct rows",
                r.flow_id
            )));
        }
    }
    let known: BTreeSet<u64> = records.iter().map(|r| r.id.0).collect();
    if let Some(extra) = by_id.keys().find(|k| !known.contains(k)) {
        return Err(Ns3Error::Incomplete(format!(
            "fct row {extra} joins to no trace record"
        )));
    }
    for r in records {
        let row = by_id
            .get(&r.id.0)
            .ok_or_else(|| Ns3Error::Incomplete(format!("record {} has no fct row", r.id)))?;
        if row.size_bytes != r.bytes.0 {
            return Err(Ns3Error::Incomplete(format!(
                "record {}: {} of {} bytes delivered",
                r.id, row.size_bytes, r.bytes.0
            )));
        }
        if row.end_ns < row.start_ns {
            return Err(Ns3Error::Incomplete(format!(
                "record {} ends before it starts",
                r.id
            )));
        }
        // Coupled INA edges (sent by a switch) move as their aggregation produces data, so
        // only records that start by themselves are held to their deps.
        let coupled = r.mode == Mode::Ina
            && topo
                .kinds
                .get(r.src.idx())
                .is_some_and(|k| *k != NodeKind::Host);
        if !coupled {
            let ready = r
                .deps
                .iter()
                .filter_map(|d| by_id.get(&d.0))
                .map(|d| d.end_ns)
                .max()
                .unwrap_or(0);
            if row.start_ns < ready + r.gap.0 {
                return Err(Ns3Error::Incomplete(format!(
                    "record {} started at {} ns, before its deps ended + gap ({} ns)",
                    r.id,
                    row.start_ns,
                    ready + r.gap.0
                )));
            }
        }
    }
    Ok(())
}

/// Payload bytes × [`Topology::switch_hops`], summed over network records, each on its
/// channel's path in the glue's `routes.txt` (the `switch_bytes` of [`Summary`]).
pub fn switch_bytes(
    records: &[FlowRecord],
    topo: &Topology,
    routes_path: &Path,
) -> Result<u64, Ns3Error> {
    let text = std::fs::read_to_string(routes_path).map_err(|e| Ns3Error::io(routes_path, e))?;
    let routes = routes_txt::parse(routes_path, &text)?.paths;
    let mut total = 0;
    for r in records
        .iter()
        .filter(|r| matches!(r.mode, Mode::Net | Mode::Ina) && r.src != r.dst)
    {
        let path = routes
            .get(&(r.src, r.dst, r.channel))
            .ok_or(Ns3Error::NoRoute {
                src: r.src,
                dst: r.dst,
            })?;
        let chans: Vec<Channel> = path
            .iter()
            .scan(r.src, |from, &(to, link)| {
                let c = Channel::of(link, topo.links[link.idx()].a == *from);
                *from = to;
                Some(c)
            })
            .collect();
        let switches = topo.switch_hops(r.src, &chans);
        total += r.bytes.0 * switches;
    }
    Ok(total)
}
