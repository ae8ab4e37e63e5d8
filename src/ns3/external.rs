//! Outputs of the simulators users already run, back on trace records: an HPCC-family
//! `fct.txt` (HPCC's 8 fields, or Parsimon's 9 with the flow index first) produced from the
//! `flow.txt` that `ina3d ns3 emit` wrote. Each fct row is matched to its `flow.txt` row —
//! by index when the file carries one, else by (source, destination, size, start time),
//! identical rows taken in file order — then through `flow.meta.txt` (flow index → record,
//! piece, pieces) to its trace record; the pieces of a record split at HPCC's 4 GiB flow
//! limit are re-joined (start = first piece's start, end = last piece's end).
//!
//! What cannot be matched is said, not dropped: fct rows no `flow.txt` row explains, and
//! records with missing pieces. What such a run cannot give at all: compute and NVLink
//! records (HPCC-family simulators replay only network flows) and a closed-loop timeline —
//! `flow.txt` starts every flow at a fixed, open-loop time (emit's contention-free schedule
//! or a replay's starts), so an iteration time is not comparable; only per-flow FCTs are.

use super::Ns3Error;
use crate::fct::FctRow;
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
    /// Lines of fct.txt that are not fct rows (the reader's warnings).
    pub skipped_lines: usize,
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
        e.3 = e.3.max(l.start_ns + l.fct_ns);
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
    })
}
