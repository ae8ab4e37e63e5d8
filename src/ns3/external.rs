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
//! saying whether SimAI simulated the figure or computed it from a formula.

use super::Ns3Error;
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
fn read_meta(path: &Path) -> Result<Vec<(u64, u32, u32)>, Ns3Error> {
    let text = read_text(path)?;
    let mut out = Vec::new();
    for (no, l) in text.lines().enumerate() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() != 4 || !f[0].bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let bad = |field: &str| Ns3Error::Parse {
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
pub fn match_hpcc_fct(emit_dir: &Path, fct_txt: &Path) -> Result<ExternalFct, Ns3Error> {
    let (flows, _) = flow_txt::read(&emit_dir.join("flow.txt"))?;
    let meta = read_meta(&emit_dir.join("flow.meta.txt"))?;
    if meta.len() != flows.len() {
        return Err(Ns3Error::Parse {
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
}

/// Which replay figure goes with which SimAI columns. SimAI's `Expose DP comm` is the dense
/// gradients and `Expose DP_EP comm` the expert gradients; the replay's `dp` class holds
/// both, so they are compared as a sum.
fn end_to_end_pairs(s: &Summary) -> Vec<(&'static str, u64, Vec<Breakdown>, Basis)> {
    use Breakdown as B;
    let exposed_comm =
        s.exposed_tp_ns + s.exposed_dp_ns + s.exposed_ep_ns + s.exposed_emb_ns + s.exposed_cp_ns;
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
            Basis::Simulated,
        ),
        (
            "exposed_tp_ns",
            s.exposed_tp_ns,
            vec![B::ExposeTp],
            Basis::Simulated,
        ),
        (
            "exposed_dp_ns",
            s.exposed_dp_ns,
            vec![B::ExposeDp, B::ExposeDpEp],
            Basis::Simulated,
        ),
        (
            "exposed_ep_ns",
            s.exposed_ep_ns,
            vec![B::ExposeEp],
            Basis::Simulated,
        ),
        (
            "exposed_tp+dp+ep+emb+cp_ns",
            exposed_comm,
            vec![B::TotalExposedComm],
            Basis::Simulated,
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

/// Compares the replay summary `replay` with the SimAI result `e2e` read from `path`
/// (named in errors): see [`EndToEndComparison`]. A file with several runs is refused
/// (which one the replay matches is not knowable).
pub fn compare_end_to_end(
    replay: &Summary,
    e2e: &EndToEnd,
    path: &Path,
) -> Result<EndToEndComparison, Ns3Error> {
    if e2e.runs.len() > 1 {
        let names: Vec<&str> = e2e.runs.iter().map(|r| r.name.as_str()).collect();
        return Err(Ns3Error::Parse {
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
    let mut rows = Vec::new();
    let mut not_compared = Vec::new();
    for (metric, replay_ns, cols, basis) in end_to_end_pairs(replay) {
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
        not_compared.push(
            "exposed_cp_ns: SimAI has no context-parallel group (export aicb refuses CP jobs)"
                .into(),
        );
    }
    if replay.exposed_emb_ns > 0 {
        not_compared.push("exposed_emb_ns: the tied-embedding all-reduce is not in SimAI's workload (export aicb leaves it out); it is in the replay's exposed total".into());
    }
    not_compared.push(
        "per-flow FCTs: SimAI's EndToEnd.csv reports an iteration breakdown, no flows".into(),
    );
    not_compared.push("exposed_pp_ns, bubble_ns: SimAI computes them from a formula (p2p bytes over a pipeline bandwidth; (PP-1)/(GA*VPP) of a micro-batch), the replay schedules them".into());
    Ok(EndToEndComparison { rows, not_compared })
}
