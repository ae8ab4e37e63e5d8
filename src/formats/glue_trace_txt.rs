//! The ns-3 glue's DAG, `trace.txt`: the trace's records in the whitespace-separated form
//! the C++ reader (`ns3-glue/model/ina3d-dag.cc`) takes, each with its standalone time.
//!
//! ```text
//! # ina3d-ns3 trace v3
//! RECORDS <n>
//! id src dst bytes gap_ns dur_ns mode class channel standalone_ns agg_id agg_switch agg_fanin agg_dir agg_group ndeps deps...
//! ```
//! `channel` is the record's NCCL channel (0 outside host collectives): the glue carries
//! each (src, dst, channel) on its own connection and routes it on that channel's path in
//! `routes.txt`. The five `agg_*` fields are `-` for records outside an aggregation;
//! `agg_group` is `dense` or `expert` (which gradients it reduces: a MoE job's dense and
//! expert-DP groups of the same members hold reservations of their own, so `ina3d ns3
//! emit` of this file finds each aggregation's planned slots again). Tags the glue does
//! not need (iteration, layer, …) are not written and read back as `None`.
//!
//! Versions: a version 2 file (no `agg_group` field; also a file without a version
//! comment, as version 2 was the last to allow) reads with every aggregation `dense`; a
//! version 1 file (no `channel` field) is refused naming its header comment.

use super::error::numbered_lines;
use super::trace_csv::MAX_RECORD_VALUE;
use super::FormatError;
use crate::record::{AggDir, AggGroup, AggTag, Class, FlowRecord, Mode};
use crate::units::{Bytes, FlowId, Nanos, NodeId};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

/// Fields before the dep list: version 3 (`agg_group`) and version 2.
const FIXED: usize = 16;
const FIXED_V2: usize = 15;

/// The comment line each version begins with.
const V1_HEADER: &str = "# ina3d-ns3 trace v1";
const V2_HEADER: &str = "# ina3d-ns3 trace v2";
const V3_HEADER: &str = "# ina3d-ns3 trace v3";

/// The text of `trace.txt` for `records`, each with its standalone time (same order).
pub fn to_string(records: &[FlowRecord], standalone: &[Nanos]) -> String {
    let mut s = String::from(
        "# ina3d-ns3 trace v3\n# id src dst bytes gap_ns dur_ns mode class channel standalone_ns agg_id agg_switch agg_fanin agg_dir agg_group ndeps deps...\n",
    );
    let _ = writeln!(s, "RECORDS {}", records.len());
    for (r, sa) in records.iter().zip(standalone) {
        let _ = write!(
            s,
            "{} {} {} {} {} {} {} {} {} {}",
            r.id, r.src, r.dst, r.bytes.0, r.gap.0, r.dur.0, r.mode, r.class, r.channel, sa.0
        );
        match r.agg {
            Some(a) => {
                let _ = write!(
                    s,
                    " {} {} {} {} {}",
                    a.id, a.switch, a.fanin, a.dir, a.group
                );
            }
            None => s.push_str(" - - - - -"),
        }
        let _ = write!(s, " {}", r.deps.len());
        for d in &r.deps {
            let _ = write!(s, " {d}");
        }
        s.push('\n');
    }
    s
}

/// Read `trace.txt` back: the records and each one's standalone time. Errors name the
/// file, line and field; counts are checked against the data, never trusted for sizing.
pub fn parse(path: &Path, text: &str) -> Result<(Vec<FlowRecord>, Vec<Nanos>), FormatError> {
    let mut records = Vec::new();
    let mut standalone = Vec::new();
    let mut expected: Option<(u64, u64)> = None;
    // the fields before the deps: version 2's unless the file says it is version 3
    let mut fixed = FIXED_V2;
    // each record's line, for the checks that span records
    let mut lines = Vec::new();
    for (no, raw) in numbered_lines(text) {
        let l = raw.trim();
        if expected.is_none() && l == V3_HEADER {
            fixed = FIXED;
        } else if expected.is_none() && l == V2_HEADER {
            fixed = FIXED_V2;
        }
        if l == V1_HEADER {
            return Err(FormatError::syntax(
                path,
                no,
                "header",
                "a version 1 glue trace (no NCCL channel field): emit it again with `ina3d ns3 emit`",
            ));
        }
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let t: Vec<&str> = l.split_whitespace().collect();
        if expected.is_none() {
            match (t.first(), t.get(1).and_then(|x| x.parse().ok())) {
                (Some(&"RECORDS"), Some(n)) if t.len() == 2 => expected = Some((n, no)),
                _ => {
                    return Err(FormatError::syntax(
                        path,
                        no,
                        "header",
                        "expected `RECORDS <count>`",
                    ))
                }
            }
            continue;
        }
        let (r, sa) = record(path, no, &t, fixed)?;
        records.push(r);
        standalone.push(sa);
        lines.push(no);
    }
    check_ids(path, &records, &lines)?;
    match expected {
        None => Err(FormatError::syntax(
            path,
            1,
            "header",
            "missing `RECORDS <count>`",
        )),
        Some((n, no)) if n != records.len() as u64 => Err(FormatError::syntax(
            path,
            no,
            "RECORDS",
            format!("says {n} records, file has {}", records.len()),
        )),
        _ => Ok((records, standalone)),
    }
}

/// Every record id once, and every dependency on a record of the file: refused at the
/// line (the second one for a repeated id), where the emit would refuse the whole trace
/// without saying where.
fn check_ids(path: &Path, records: &[FlowRecord], lines: &[u64]) -> Result<(), FormatError> {
    let mut first: HashMap<FlowId, u64> = HashMap::with_capacity(records.len());
    for (r, &no) in records.iter().zip(lines) {
        if let Some(was) = first.insert(r.id, no) {
            return Err(FormatError::syntax(
                path,
                no,
                "id",
                format!("record id {} given twice (first on line {was})", r.id),
            ));
        }
    }
    for (r, &no) in records.iter().zip(lines) {
        if let Some(d) = r.deps.iter().find(|d| !first.contains_key(d)) {
            return Err(FormatError::syntax(
                path,
                no,
                "dep",
                format!(
                    "record {} depends on record {d}, which the file does not have",
                    r.id
                ),
            ));
        }
    }
    Ok(())
}

/// One record line of a file whose records have `fixed` fields before their deps
/// (version 3: [`FIXED`], with `agg_group`; version 2: [`FIXED_V2`], without).
fn record(
    path: &Path,
    no: u64,
    t: &[&str],
    fixed: usize,
) -> Result<(FlowRecord, Nanos), FormatError> {
    let err = |field: &str, msg: String| FormatError::syntax(path, no, field, msg);
    if t.len() < fixed {
        return Err(err(
            "record",
            format!("expected at least {fixed} fields, found {}", t.len()),
        ));
    }
    let num = |k: usize, field: &str| -> Result<u64, FormatError> {
        t[k].parse()
            .map_err(|_| err(field, format!("`{}` is not an unsigned integer", t[k])))
    };
    // a size or a time: bounded as in a trace CSV, so sums over records stay exact
    let bounded = |k: usize, field: &str| -> Result<u64, FormatError> {
        let v = num(k, field)?;
        if v > MAX_RECORD_VALUE {
            return Err(err(
                field,
                format!("{v} is larger than any record's {field} can be (at most 2^50 = {MAX_RECORD_VALUE})"),
            ));
        }
        Ok(v)
    };
    let node = |k: usize, field: &str| -> Result<NodeId, FormatError> {
        u32::try_from(num(k, field)?)
            .map(NodeId)
            .map_err(|_| err(field, format!("node id `{}` does not fit 32 bits", t[k])))
    };
    let mode: Mode = t[6].parse().map_err(|e: String| err("mode", e))?;
    let class: Class = t[7].parse().map_err(|e: String| err("class", e))?;
    let channel = u32::try_from(num(8, "channel")?)
        .map_err(|_| err("channel", format!("`{}` does not fit 32 bits", t[8])))?;
    let agg = if t[10] == "-" {
        None
    } else {
        Some(AggTag {
            id: num(10, "agg_id")?,
            switch: node(11, "agg_switch")?,
            fanin: u32::try_from(num(12, "agg_fanin")?)
                .map_err(|_| err("agg_fanin", format!("`{}` does not fit 32 bits", t[12])))?,
            dir: t[13].parse::<AggDir>().map_err(|e| err("agg_dir", e))?,
            group: if fixed == FIXED {
                t[14].parse::<AggGroup>().map_err(|e| err("agg_group", e))?
            } else {
                AggGroup::Dense
            },
        })
    };
    if fixed == FIXED && agg.is_none() && t[14] != "-" {
        return Err(err(
            "agg_group",
            format!(
                "`{}` on a record outside an aggregation (expected `-`)",
                t[14]
            ),
        ));
    }
    let nd = num(fixed - 1, "ndeps")?;
    let listed = (t.len() - fixed) as u64;
    if nd != listed {
        return Err(err("ndeps", format!("says {nd} deps, line has {listed}")));
    }
    let deps = (fixed..t.len())
        .map(|k| num(k, "dep").map(FlowId))
        .collect::<Result<Vec<_>, _>>()?;
    let r = FlowRecord {
        id: FlowId(num(0, "id")?),
        src: node(1, "src")?,
        dst: node(2, "dst")?,
        bytes: Bytes(bounded(3, "bytes")?),
        deps,
        gap: Nanos(bounded(4, "gap_ns")?),
        dur: Nanos(bounded(5, "dur_ns")?),
        mode,
        class,
        agg,
        channel,
        ..Default::default()
    };
    Ok((r, Nanos(bounded(9, "standalone_ns")?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_with_their_channels_groups_and_standalone_times() {
        let recs = vec![
            FlowRecord {
                id: FlowId(0),
                src: NodeId(1),
                dst: NodeId(1),
                dur: Nanos(500),
                ..Default::default()
            },
            FlowRecord {
                id: FlowId(1),
                src: NodeId(1),
                dst: NodeId(9),
                bytes: Bytes(4096),
                deps: vec![FlowId(0)],
                gap: Nanos(7),
                mode: Mode::Ina,
                class: Class::Dp,
                agg: Some(AggTag {
                    id: 3,
                    switch: NodeId(9),
                    fanin: 2,
                    dir: AggDir::Up,
                    group: AggGroup::Expert,
                }),
                ..Default::default()
            },
            FlowRecord {
                id: FlowId(2),
                src: NodeId(1),
                dst: NodeId(4),
                bytes: Bytes(65536),
                mode: Mode::Net,
                class: Class::Dp,
                channel: 3,
                ..Default::default()
            },
        ];
        let sa = vec![Nanos(0), Nanos(123), Nanos(456)];
        let (back, bsa) = parse(Path::new("t"), &to_string(&recs, &sa)).unwrap();
        assert_eq!((back, bsa), (recs, sa));
    }

    #[test]
    fn a_crafted_dep_count_is_an_error_not_an_overflow() {
        let head = "RECORDS 1\n";
        for (line, want) in [
            (
                "0 1 1 0 0 0 compute compute 0 0 - - - - 18446744073709551615",
                "ndeps",
            ),
            ("0 1 1 0 0 0 compute compute 0 0 - - - - 2 5", "ndeps"),
            ("0 99999999999 1 0 0 0 compute compute 0 0 - - - - 0", "src"),
            (
                "0 1 1 0 0 0 compute compute 0 0 1 2 3 sideways 0",
                "agg_dir",
            ),
            ("0 1 2 9 0 0 net dp 4294967296 0 - - - - 0", "channel"),
            ("0 1 2 9 0 0 net dp x 0 - - - - 0", "channel"),
            // a version 1 line (no channel): the agg fields slide into standalone_ns
            ("0 1 2 9 0 0 net dp 0 - - - - 0", "record"),
        ] {
            let e = parse(Path::new("t.txt"), &format!("{head}{line}\n")).unwrap_err();
            assert!(
                e.to_string().starts_with(&format!("t.txt:2: {want}:")),
                "{line}: {e}"
            );
        }
    }

    #[test]
    fn a_version_2_file_reads_with_every_aggregation_dense() {
        let v2 = "# ina3d-ns3 trace v2\nRECORDS 1\n0 1 9 4096 0 0 ina dp 0 0 3 9 2 up 0\n";
        let (back, _) = parse(Path::new("t.txt"), v2).unwrap();
        let a = back[0].agg.unwrap();
        assert_eq!((a.id, a.switch, a.group), (3, NodeId(9), AggGroup::Dense));
    }

    #[test]
    fn a_version_3_files_aggregation_group_is_checked_and_named_in_errors() {
        let head = "# ina3d-ns3 trace v3\nRECORDS 1\n";
        for (line, want) in [
            ("0 1 9 4096 0 0 ina dp 0 0 3 9 2 up sparse 0", "agg_group"),
            ("0 1 2 9 0 0 net dp 0 0 - - - - expert 0", "agg_group"),
            // a version 2 line under a version 3 header: the dep count is read as the
            // group
            ("0 1 9 4096 0 0 ina dp 0 0 3 9 2 up 0", "record"),
            ("0 1 9 4096 0 0 ina dp 0 0 3 9 2 up 1 0", "agg_group"),
        ] {
            let e = parse(Path::new("t.txt"), &format!("{head}{line}\n")).unwrap_err();
            assert!(
                e.to_string().starts_with(&format!("t.txt:3: {want}:")),
                "{line}: {e}"
            );
        }
    }

    #[test]
    fn a_version_1_file_is_refused_naming_its_header() {
        let v1 = "# ina3d-ns3 trace v1\nRECORDS 1\n0 1 2 9 0 0 net dp 0 - - - - 0\n";
        let e = parse(Path::new("t.txt"), v1).unwrap_err().to_string();
        assert!(e.starts_with("t.txt:1: header: a version 1"), "{e}");
    }
}
