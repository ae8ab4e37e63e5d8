//! AICB/SimAI's workload file (`HYBRID_TRANSFORMER_FWD_IN_BCKWD`), the format aliyun's
//! AICB writes and SimAI's `Workload.cc` reads (docs/model.md#aicb-workload).
//!
//! Layout: a header line — the workload kind, then `key: value` pairs
//! (`model_parallel_NPU_group: TP ep: EP pp: PP vpp: v ga: m all_gpus: W checkpoints: 0
//! checkpoint_initiates: 0 pp_comm: bytes`; older files stop after the checkpoint keys,
//! and a `checkpoints: n` count is followed by `n` layer ids) — the number of rows, then
//! one row per line of 12 whitespace-separated fields:
//!
//! ```text
//! name dep fwd_compute fwd_comm fwd_bytes ig_compute ig_comm ig_bytes wg_compute wg_comm wg_bytes update
//! ```
//!
//! Times are in SimAI ticks (nanoseconds), sizes in bytes. A comm is `NONE` or a
//! collective (`ALLREDUCE`, `ALLGATHER`, `REDUCESCATTER`, `ALLTOALL`, `ALLREDUCEALLTOALL`,
//! `BROADCAST`) with an optional group suffix: SimAI runs the forward and input-gradient
//! slots' collectives over the TP group and the weight-gradient slot's over the DP group,
//! unless the name ends in `_EP` (expert-parallel group) or `_DP_EP` (expert data-parallel
//! group).
//!
//! One reader ([`parse`], [`read`]) and one writer ([`to_text`], [`write`]).

use super::{numbered_lines, read_text};
use super::{write_atomic_bytes, FormatError};
use crate::keyword::keyword_enum;
use std::fmt::Write as _;
use std::path::Path;

/// The first token of the header this crate writes.
pub const KIND: &str = "HYBRID_TRANSFORMER_FWD_IN_BCKWD";

/// A collective primitive in a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Collective {
    /// No communication.
    None,
    /// All-reduce.
    AllReduce,
    /// All-gather.
    AllGather,
    /// Reduce-scatter.
    ReduceScatter,
    /// All-to-all.
    AllToAll,
    /// SimAI's combined all-reduce + all-to-all.
    AllReduceAllToAll,
    /// Broadcast (AICB's first row).
    Broadcast,
}

keyword_enum!(Collective, "AICB collective",
    Collective::None => "none",
    Collective::AllReduce => "allreduce",
    Collective::AllGather => "allgather",
    Collective::ReduceScatter => "reducescatter",
    Collective::AllToAll => "alltoall",
    Collective::AllReduceAllToAll => "allreducealltoall",
    Collective::Broadcast => "broadcast");

/// The group suffix of a comm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CommGroup {
    /// No suffix: TP in the forward and input-gradient slots, DP in the weight-gradient slot.
    Slot,
    /// `_EP`: the expert-parallel group.
    Ep,
    /// `_DP_EP`: the expert data-parallel group.
    DpEp,
    /// `_DP`: written by some AICB versions; SimAI's reader does not know it.
    Dp,
}

/// One slot's communication.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Comm {
    /// Primitive.
    pub kind: Collective,
    /// Group suffix.
    pub group: CommGroup,
}

impl Comm {
    /// No communication.
    pub const NONE: Comm = Comm {
        kind: Collective::None,
        group: CommGroup::Slot,
    };

    /// A collective over the slot's default group.
    pub fn slot(kind: Collective) -> Comm {
        Comm {
            kind,
            group: CommGroup::Slot,
        }
    }

    /// The file spelling (`ALLTOALL_EP`).
    pub fn spelling(&self) -> String {
        let base = self.kind.as_str().to_ascii_uppercase();
        match (self.kind, self.group) {
            (Collective::None, _) | (_, CommGroup::Slot) => base,
            (_, CommGroup::Ep) => format!("{base}_EP"),
            (_, CommGroup::DpEp) => format!("{base}_DP_EP"),
            (_, CommGroup::Dp) => format!("{base}_DP"),
        }
    }

    fn parse(s: &str) -> Result<Comm, String> {
        let s = s.to_ascii_uppercase();
        let (base, group) = if let Some(b) = s.strip_suffix("_DP_EP") {
            (b, CommGroup::DpEp)
        } else if let Some(b) = s.strip_suffix("_EP") {
            (b, CommGroup::Ep)
        } else if let Some(b) = s.strip_suffix("_DP") {
            (b, CommGroup::Dp)
        } else {
            (s.as_str(), CommGroup::Slot)
        };
        let kind: Collective = base.parse()?;
        Ok(Comm { kind, group })
    }
}

/// Compute then communication in one slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    /// Compute time (ns).
    pub compute: u64,
    /// Collective.
    pub comm: Comm,
    /// Collective size (bytes).
    pub bytes: u64,
}

impl Slot {
    /// Nothing to do.
    pub const EMPTY: Slot = Slot {
        compute: 0,
        comm: Comm::NONE,
        bytes: 0,
    };
}

/// One row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// Row name.
    pub name: String,
    /// Dependency (−1: none).
    pub dep: i64,
    /// Forward slot.
    pub fwd: Slot,
    /// Input-gradient slot.
    pub ig: Slot,
    /// Weight-gradient slot.
    pub wg: Slot,
    /// Weight-update time (ns).
    pub update: u64,
}

/// A workload file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workload {
    /// The workload kind (first header token).
    pub kind: String,
    /// Header `key:` → value tokens, in file order.
    pub header: Vec<(String, Vec<String>)>,
    /// Rows.
    pub rows: Vec<Row>,
}

impl Workload {
    /// The first value of header key `key` (without its colon).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.header
            .iter()
            .find(|(k, _)| k == key)
            .and_then(|(_, v)| v.first().map(String::as_str))
    }
}

/// Parse workload text; `path` names it in errors.
pub fn parse(path: &Path, text: &str) -> Result<Workload, FormatError> {
    let mut lines = numbered_lines(text).filter(|(_, l)| !l.trim().is_empty());
    let (hl, head) = lines
        .next()
        .ok_or_else(|| FormatError::file(path, "empty: expected the workload header line"))?;
    let (kind, header) = parse_header(path, hl, head)?;
    let (cl, count) = lines.next().ok_or_else(|| {
        FormatError::syntax(
            path,
            hl + 1,
            "rows",
            "missing the row count after the header",
        )
    })?;
    let n: u64 = count.trim().parse().map_err(|_| {
        FormatError::syntax(
            path,
            cl,
            "rows",
            format!("`{}` is not a row count", count.trim()),
        )
    })?;
    let mut rows = Vec::new();
    for (no, line) in lines {
        rows.push(parse_row(path, no, line)?);
    }
    if rows.len() as u64 != n {
        return Err(FormatError::syntax(
            path,
            cl,
            "rows",
            format!("the header announces {n} rows, the file has {}", rows.len()),
        ));
    }
    Ok(Workload { kind, header, rows })
}

/// Header `key:` → value tokens, in file order.
type Header = Vec<(String, Vec<String>)>;

fn parse_header(path: &Path, no: u64, line: &str) -> Result<(String, Header), FormatError> {
    let mut toks = line.split_whitespace();
    let kind = toks.next().unwrap_or_default().to_string();
    if !kind.chars().all(|c| c.is_ascii_uppercase() || c == '_') || kind.is_empty() {
        return Err(FormatError::syntax(
            path,
            no,
            "header",
            format!("expected a workload kind such as {KIND}, found `{kind}`"),
        ));
    }
    let mut header: Header = Vec::new();
    for t in toks {
        match t.strip_suffix(':') {
            Some(k) if !k.is_empty() && !k.bytes().all(|b| b.is_ascii_digit()) => {
                header.push((k.to_string(), Vec::new()))
            }
            _ => match header.last_mut() {
                Some((_, v)) => v.push(t.to_string()),
                None => {
                    return Err(FormatError::syntax(
                        path,
                        no,
                        "header",
                        format!("`{t}` before any `key:`"),
                    ))
                }
            },
        }
    }
    Ok((kind, header))
}

fn parse_row(path: &Path, no: u64, line: &str) -> Result<Row, FormatError> {
    const NAMES: [&str; 12] = [
        "name",
        "dep",
        "fwd_compute",
        "fwd_comm",
        "fwd_bytes",
        "ig_compute",
        "ig_comm",
        "ig_bytes",
        "wg_compute",
        "wg_comm",
        "wg_bytes",
        "update",
    ];
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() != 12 {
        return Err(FormatError::syntax(
            path,
            no,
            "row",
            format!("{} fields, expected 12 ({})", f.len(), NAMES.join(" ")),
        ));
    }
    let num = |i: usize| -> Result<u64, FormatError> {
        f[i].parse().map_err(|_| {
            FormatError::syntax(
                path,
                no,
                NAMES[i],
                format!("`{}` is not an unsigned integer", f[i]),
            )
        })
    };
    let comm = |i: usize| -> Result<Comm, FormatError> {
        Comm::parse(f[i]).map_err(|e| FormatError::syntax(path, no, NAMES[i], e))
    };
    let slot = |c: usize| -> Result<Slot, FormatError> {
        Ok(Slot {
            compute: num(c)?,
            comm: comm(c + 1)?,
            bytes: num(c + 2)?,
        })
    };
    let dep: i64 = f[1].parse().map_err(|_| {
        FormatError::syntax(path, no, "dep", format!("`{}` is not an integer", f[1]))
    })?;
    Ok(Row {
        name: f[0].to_string(),
        dep,
        fwd: slot(2)?,
        ig: slot(5)?,
        wg: slot(8)?,
        update: num(11)?,
    })
}

/// Read a workload file.
pub fn read(path: &Path) -> Result<Workload, FormatError> {
    parse(path, &read_text(path)?)
}

/// The file text: header (tab after the kind, then `key: value` pairs), the row count,
/// tab-separated rows.
pub fn to_text(w: &Workload) -> String {
    let mut s = w.kind.clone();
    for (i, (k, v)) in w.header.iter().enumerate() {
        s.push(if i == 0 { '\t' } else { ' ' });
        let _ = write!(s, "{k}:");
        for x in v {
            let _ = write!(s, " {x}");
        }
    }
    let _ = writeln!(s, "\n{}", w.rows.len());
    for r in &w.rows {
        let _ = write!(s, "{}\t{}", r.name, r.dep);
        for sl in [r.fwd, r.ig, r.wg] {
            let _ = write!(s, "\t{}\t{}\t{}", sl.compute, sl.comm.spelling(), sl.bytes);
        }
        let _ = writeln!(s, "\t{}", r.update);
    }
    s
}

/// Write a workload file atomically.
pub fn write(path: &Path, w: &Workload) -> Result<(), FormatError> {
    write_atomic_bytes(path, to_text(w).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workload_round_trips_through_its_text() {
        let w = Workload {
            kind: KIND.into(),
            header: vec![
                ("model_parallel_NPU_group".into(), vec!["2".into()]),
                ("ep".into(), vec!["4".into()]),
                ("checkpoints".into(), vec!["0".into()]),
            ],
            rows: vec![Row {
                name: "moe".into(),
                dep: -1,
                fwd: Slot {
                    compute: 5,
                    comm: Comm {
                        kind: Collective::AllToAll,
                        group: CommGroup::Ep,
                    },
                    bytes: 1 << 20,
                },
                ig: Slot::EMPTY,
                wg: Slot {
                    compute: 1,
                    comm: Comm {
                        kind: Collective::AllReduce,
                        group: CommGroup::DpEp,
                    },
                    bytes: 7,
                },
                update: 0,
            }],
        };
        let text = to_text(&w);
        assert!(text.contains("ALLTOALL_EP\t1048576") && text.contains("ALLREDUCE_DP_EP"));
        assert_eq!(parse(Path::new("w.txt"), &text).unwrap(), w);
    }
}
