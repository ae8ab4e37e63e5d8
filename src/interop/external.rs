//! Outputs of the simulators users already run, beside ours. An HPCC-family `fct.txt`
//! (HPCC's 8 fields, or Parsimon's 9 with the flow index first), produced from the
//! `flow.txt` that `ina3d ns3 emit` wrote, is mapped back onto trace records: each fct
//! row is matched to its `flow.txt` row — by index when the file carries one, else by
//! (source, destination, size, start time), identical rows taken in file order — then through `flow.meta.txt` (flow index → record,
//! piece, pieces) to its trace record; the pieces of a record split at HPCC's 4 GiB flow
//! limit are re-joined (start = first piece's start, end = last piece's end).
//!
//! What cannot be matched is said, not dropped: fct rows no `flow.txt` row explains, and
//! records with missing pieces. What such a run cannot give at all: compute and NVLink
//! records (HPCC-family simulators replay only network flows) and a closed-loop timeline —
//! `flow.txt` starts every flow at a fixed, open-loop time (emit's contention-free schedule
//! or a replay's starts), so an iteration time is not comparable; only per-flow FCTs are.
//!
//! SimAI's `EndToEnd.csv` is the opposite: SimAI runs the workload closed-loop (the one
//! `ina3d export aicb` wrote) and reports only the iteration's breakdown, so it is
//! compared per iteration and per collective class ([`compare_end_to_end`]), each row
//! saying how SimAI got the figure (its ns-3 simulation, its analytical bus-bandwidth
//! model, the workload's compute times, a formula, a sum), after checking the file is of
//! the replay's job.

use super::InteropError;
use crate::fct::{FctRow, Summary};
use crate::formats::simai_end_to_end::{self, Basis, Breakdown, EndToEnd};
use crate::formats::{flow_txt, glue_trace_txt, hpcc_fct, read_text};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::Path;

/// An external fct.txt mapped onto the emitted trace's records.
#[derive(Clone, Debug, PartialEq)]
pub struct ExternalFct {
    /// One row per network record whose every piece was matched (start and end re-joined),
    /// by record id.
    pub rows: Vec<FctRow>,
    /// Network records in the emitted trace (flows of `flow.txt`, re-joined).
    pub network_records: usize,
    /// fct.txt rows that no `flow.txt` row explains, with their line text.
    pub unmatched_lines: Vec<String>,
    /// Records some of whose pieces have no fct.txt row.
    pub incomplete_records: Vec<u64>,
    /// Lines of fct.txt that are not fct rows.
    pub skipped_lines: usize,
    /// What the reader said of those lines, each naming file and line.
    pub warnings: Vec<crate::formats::Warning>,
}

/// Reads `flow.meta.txt`'s `flow_index record_id piece pieces` lines (the other lines say
/// where start times came from and list proxies).
fn read_meta(path: &Path) -> Result<Vec<(u64, u32, u32)>, InteropError> {
    let text = read_text(path)?;
    let mut out = Vec::new();
    for (no, l) in text.lines().enumerate() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() != 4 || !f[0].bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let bad = |field: &str| InteropError::Parse {
            path: path.to_path_buf(),
            line: no + 1,
            field: field.into(),
            msg: format!("`{l}` is not `flow_index record_id piece pieces`"),
        };
        let k: usize = f[0].parse().map_err(|_| bad("flow_index"))?;
        if k != out.len() {
            return Err(bad("flow_index"));
        }
        out.push((
            f[1].parse().map_err(|_| bad("record_id"))?,
            f[2].parse().map_err(|_| bad("piece"))?,
            f[3].parse().map_err(|_| bad("pieces"))?,
        ));
    }
    Ok(out)
}

/// Maps `fct_txt` onto the records of the emit directory `emit_dir` (its `flow.txt`,
/// `flow.meta.txt` and `trace.txt`); see the module docs.
pub fn match_hpcc_fct(emit_dir: &Path, fct_txt: &Path) -> Result<ExternalFct, InteropError> {
    let (flows, _) = flow_txt::read(&emit_dir.join("flow.txt"))?;
    let meta = read_meta(&emit_dir.join("flow.meta.txt"))?;
    if meta.len() != flows.len() {
        return Err(InteropError::Parse {
            path: emit_dir.join("flow.meta.txt"),
            line: 0,
            field: "flow_index".into(),
            msg: format!("{} flows but flow.txt has {}", meta.len(), flows.len()),
        });
    }
    let tp = emit_dir.join("trace.txt");
    let (records, _) = glue_trace_txt::parse(&tp, &read_text(&tp)?)?;
    let (lines, warnings) = hpcc_fct::read(fct_txt)?;
    let mut by_key: HashMap<(u32, u32, u64, u64), VecDeque<usize>> = HashMap::new();
    for (k, f) in flows.iter().enumerate() {
        by_key
            .entry((f.src.0, f.dst.0, f.size.0, f.start.0))
            .or_default()
            .push_back(k);
    }
    // per record: (pieces seen, pieces, start, end)
    let mut seen: BTreeMap<u64, (u32, u32, u64, u64)> = BTreeMap::new();
    let mut unmatched = Vec::new();
    for l in &lines {
        let key = (l.src, l.dst, l.size, l.start_ns);
        let k = match l.id {
            Some(id) => usize::try_from(id).ok().filter(|&k| k < flows.len()),
            None => by_key.get_mut(&key).and_then(VecDeque::pop_front),
        };
        let Some(k) = k else {
            unmatched.push(format!(
                "{} -> {}, {} B, start {} ns",
                l.src, l.dst, l.size, l.start_ns
            ));
            continue;
        };
        let (rec, _, pieces) = meta[k];
        let e = seen.entry(rec).or_insert((0, pieces, u64::MAX, 0));
        e.0 += 1;
        e.2 = e.2.min(l.start_ns);
        // the reader refuses rows whose end overflows (hpcc_fct::read)
        e.3 = e.3.max(l.start_ns.saturating_add(l.fct_ns));
    }
    let index: HashMap<u64, usize> = records
        .iter()
        .enumerate()
        .map(|(i, r)| (r.id.0, i))
        .collect();
    let mut all: Vec<u64> = meta.iter().map(|m| m.0).collect();
    all.dedup();
    let mut rows = Vec::new();
    let mut incomplete = Vec::new();
    for rec in &all {
        match (seen.get(rec), index.get(rec)) {
            (Some(&(n, pieces, start, end)), Some(&i)) if n == pieces => {
                let r = &records[i];
                rows.push(FctRow::of_record(r, start, end, 0))
            }
            _ => incomplete.push(*rec),
        }
    }
    rows.sort_by_key(|r| r.flow_id);
    Ok(ExternalFct {
        rows,
        network_records: all.len(),
        unmatched_lines: unmatched,
        incomplete_records: incomplete,
        skipped_lines: warnings.len(),
        warnings,
    })
}

/// The replay's `summary.csv` beside a SimAI `EndToEnd.csv` of the same job (SimAI run on
/// the workload `ina3d export aicb` wrote). SimAI reports only an iteration breakdown, so
/// the comparison is per iteration and per collective class, never per flow.
#[derive(Clone, Debug, PartialEq)]
pub struct EndToEndComparison {
    /// One row per compared figure, the iteration first.
    pub rows: Vec<simai_end_to_end::ComparisonRow>,
    /// What could not be compared and why, one sentence each.
    pub not_compared: Vec<String>,
    /// Which SimAI front-end wrote the file.
    pub backend: simai_end_to_end::Backend,
}

/// Which replay figure goes with which SimAI columns, and how SimAI got each
/// (`comm`: its front-end's communication basis). SimAI's `Expose DP comm` is the dense
/// gradients and `Expose DP_EP comm` the expert gradients; the replay's `dp` class holds
/// both, so they are compared as a sum. SimAI's `total exposed comm` is the exposed TP,
/// DP and EP communication of its workload, which has neither the tied-embedding
/// all-reduce nor CP: the replay's `emb` and `cp` classes are left out of that sum.
fn end_to_end_pairs(s: &Summary, comm: Basis) -> Vec<(&'static str, u64, Vec<Breakdown>, Basis)> {
    use Breakdown as B;
    let exposed_comm = s.exposed_tp_ns + s.exposed_dp_ns + s.exposed_ep_ns;
    vec![
        (
            "iteration_time_ns",
            s.iteration_time_ns,
            vec![B::TotalTime],
            Basis::Sum,
        ),
        (
            "compute_ns",
            s.compute_ns,
            vec![B::TotalComp],
            Basis::Workload,
        ),
        ("exposed_tp_ns", s.exposed_tp_ns, vec![B::ExposeTp], comm),
        (
            "exposed_dp_ns",
            s.exposed_dp_ns,
            vec![B::ExposeDp, B::ExposeDpEp],
            comm,
        ),
        ("exposed_ep_ns", s.exposed_ep_ns, vec![B::ExposeEp], comm),
        (
            "exposed_tp+dp+ep_ns",
            exposed_comm,
            vec![B::TotalExposedComm],
            comm,
        ),
        (
            "exposed_pp_ns",
            s.exposed_pp_ns,
            vec![B::ExposePp],
            Basis::Formula,
        ),
        ("bubble_ns", s.bubble_ns, vec![B::Bubble], Basis::Formula),
    ]
}

/// SimAI's value of `cols` summed, ns: the totals line's unrounded figure where it has
/// one, else the run row's; `None` when a column is missing.
fn simai_ns(e2e: &EndToEnd, cols: &[Breakdown]) -> Option<f64> {
    let run = e2e.runs.first();
    let precise = |b: Breakdown| -> Option<f64> {
        let t = e2e.totals?;
        match b {
            Breakdown::TotalTime => t.time_us,
            Breakdown::TotalComp => t.comp_us,
            Breakdown::TotalExposedComm => t.exposed_comm_us,
            _ => None,
        }
    };
    cols.iter()
        .map(|&b| precise(b).or_else(|| run?.us.get(&b).copied()))
        .sum::<Option<f64>>()
        .map(|us| us * 1000.0)
}

/// Refuses a SimAI file of another job than the replay's trace (`job`: the trace header's
/// keys), naming every size that differs and the line of the file that shows it.
fn check_same_job(
    e2e: &EndToEnd,
    job: &std::collections::BTreeMap<String, String>,
    path: &Path,
) -> Result<(), InteropError> {
    let want = |k: &str| job.get(k).and_then(|v| v.parse::<u32>().ok());
    let s = e2e.job();
    let mut differs = Vec::new();
    let mut line = 0;
    // SimAI's DP is the data-parallel group of its workload; CP jobs are never exported.
    let tp_pp = (want("tp"), want("pp"));
    if let (Some((n, l)), Some(tp)) = (s.tp, tp_pp.0) {
        // A 1-rank group has no collective, so SimAI shows no TP row for TP 1.
        if n != tp {
            differs.push(format!(
                "TP {n} in SimAI's file (line {l}), {tp} in the trace"
            ));
            line = l;
        }
    }
    if let (Some((n, l)), Some(dp)) = (s.dp, want("dp")) {
        if n != dp {
            differs.push(format!(
                "DP {n} in SimAI's file (line {l}: the weight-gradient collectives' bus/algorithm bandwidth), {dp} in the trace"
            ));
            line = l;
        }
    }
    if let (Some(m), Some(tm)) = (s.microbatches, want("microbatches")) {
        if m != tm {
            differs.push(format!(
                "{m} micro-batches in SimAI's rows, {tm} in the trace"
            ));
        }
    }
    if let (Some(l), Some(tl), Some(pp)) = (s.layers, want("num_layers"), tp_pp.1) {
        // The export carries the first stage's layers.
        if pp > 0 && l != tl / pp && l != tl {
            differs.push(format!(
                "{l} layers in SimAI's rows, {} per stage ({tl} over PP {pp}) in the trace",
                tl / pp
            ));
        }
    }
    if differs.is_empty() {
        return Ok(());
    }
    Err(InteropError::Parse {
        path: path.to_path_buf(),
        line: line as usize,
        field: "job".into(),
        msg: format!(
            "this SimAI result is of another job than the replay's trace: {}; compare it with a replay of the job `export aicb` wrote",
            differs.join("; ")
        ),
    })
}

/// Compares the replay summary `replay` with the SimAI result `e2e` read from `path`
/// (named in errors): see [`EndToEndComparison`]. `job` is the replay trace's header: a
/// SimAI file whose group sizes, micro-batches or layers differ from it is refused. A file
/// with several runs is refused (which one the replay matches is not knowable).
pub fn compare_end_to_end(
    replay: &Summary,
    e2e: &EndToEnd,
    job: Option<&std::collections::BTreeMap<String, String>>,
    path: &Path,
) -> Result<EndToEndComparison, InteropError> {
    if e2e.runs.len() > 1 {
        let names: Vec<&str> = e2e.runs.iter().map(|r| r.name.as_str()).collect();
        return Err(InteropError::Parse {
            path: path.to_path_buf(),
            line: e2e.runs[1].line as usize,
            field: "File name".into(),
            msg: format!(
                "{} runs ({}) in one file: split it so each holds the run of this replay",
                names.len(),
                names.join(", ")
            ),
        });
    }
    let mut not_compared = Vec::new();
    match job {
        Some(j) => check_same_job(e2e, j, path)?,
        None => not_compared.push(
            "the job: the replay's trace header was not readable, so SimAI's group sizes and micro-batches were not checked against it".into(),
        ),
    }
    let backend = e2e.backend();
    let mut rows = Vec::new();
    for (metric, replay_ns, cols, basis) in end_to_end_pairs(replay, backend.comm_basis()) {
        let simai = simai_ns(e2e, &cols);
        let names: Vec<&str> = cols.iter().map(|b| b.as_str()).collect();
        if simai.is_none() {
            not_compared.push(format!(
                "{metric}: the file has no {} column",
                names.join(" or ")
            ));
        }
        let rel_error = simai
            .filter(|&v| v > 0.0)
            .map(|v| (replay_ns as f64 - v) / v);
        rows.push(simai_end_to_end::ComparisonRow {
            metric: metric.into(),
            simai_columns: names.join("+"),
            replay_ns,
            simai_ns: simai,
            rel_error,
            simai_basis: basis,
        });
    }
    if replay.exposed_cp_ns > 0 {
        not_compared.push(format!(
            "exposed_cp_ns ({} ns): SimAI has no context-parallel group (export aicb refuses CP jobs); it is in the replay's iteration time",
            replay.exposed_cp_ns
        ));
    }
    if replay.exposed_emb_ns > 0 {
        not_compared.push(format!(
            "exposed_emb_ns ({} ns): the tied-embedding all-reduce between the first and last stage is not in SimAI's workload (export aicb leaves it out); it is in the replay's iteration time, not in exposed_tp+dp+ep_ns",
            replay.exposed_emb_ns
        ));
    }
    not_compared.push(
        "per-flow FCTs: SimAI's EndToEnd.csv reports an iteration breakdown, no flows".into(),
    );
    Ok(EndToEndComparison {
        rows,
        not_compared,
        backend,
    })
}
