//! Reading a trace against a topology, and whole-trace validation.

use super::TraceError;
use crate::formats::trace_csv::{RecordCheck, TraceReader};
use crate::record::{FlowRecord, Mode};
use crate::topology::{NodeKind, Topology};
use crate::units::Bytes;
use std::path::Path;

/// Endpoints of every record checked against a topology: both ends exist, compute runs on
/// a GPU host, an aggregation's switch is a packet switch.
impl RecordCheck for Topology {
    fn check(&self, rec: &FlowRecord) -> Result<(), (usize, String)> {
        let n = self.node_count() as u32;
        for (i, node) in [(1, rec.src), (2, rec.dst)] {
            if node.0 >= n {
                return Err((
                    i,
                    format!(
                        "node {} is not in the topology ({} nodes, from `{}`)",
                        node.0, n, self.source
                    ),
                ));
            }
        }
        if rec.mode == Mode::Compute && self.kinds[rec.src.idx()] != NodeKind::Host {
            return Err((
                1,
                format!(
                    "compute record on node {} which is not a GPU host",
                    rec.src.0
                ),
            ));
        }
        if rec.mode == Mode::NvLink {
            let (a, b) = (self.server_of_gpu(rec.src), self.server_of_gpu(rec.dst));
            if a.is_none() || a != b {
                let name = |s: Option<u32>| {
                    s.map_or("no server (not a GPU)".into(), |s| format!("server {s}"))
                };
                return Err((
                    2,
                    format!(
                        "nvlink record {}: node {} is on {} and node {} on {}: NVLink joins \
                         the GPUs of one server only",
                        rec.id,
                        rec.src.0,
                        name(a),
                        rec.dst.0,
                        name(b)
                    ),
                ));
            }
        }
        if let Some(a) = rec.agg {
            if a.switch.0 >= n || self.kinds[a.switch.idx()] != NodeKind::Switch {
                return Err((
                    17,
                    format!(
                        "aggregation switch {} is not a switch of the topology",
                        a.switch.0
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// The trace's `topology_hash` (when it has one) is `topo`'s: a trace replayed on another
/// fabric than it was made for (a topology file edited since, a `--topology` of the same
/// name) is refused naming both hashes.
pub fn check_topology_hash(
    header: &crate::formats::trace_csv::TraceHeader,
    topo: &Topology,
    path: &Path,
) -> Result<(), crate::formats::FormatError> {
    let Some(want) = header.get("topology_hash") else {
        return Ok(());
    };
    let have = super::planned::topology_hash(topo);
    if want.trim() == have {
        return Ok(());
    }
    let line = meta_line(path, "topology_hash").unwrap_or(1);
    Err(crate::formats::FormatError::syntax(
        path,
        line,
        "topology_hash",
        format!(
            "topology_hash: the trace was made on a topology of hash {} and is replayed on \
             `{}` of hash {have}: not the fabric its routes and placements assume; trace it \
             again on this topology",
            want.trim(),
            topo.source
        ),
    ))
}

/// The line of the trace file `path` (plain or gzip) holding the metadata `key`, for an
/// error about its value found after the header was read; `None` when it cannot be
/// read again or has no such line. Only the header's comment lines are read.
fn meta_line(path: &Path, key: &str) -> Option<u64> {
    use std::io::{BufRead, BufReader, Read};
    let f = std::fs::File::open(path).ok()?;
    let gz = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gz"));
    let input: Box<dyn Read> = if gz {
        Box::new(flate2::read::MultiGzDecoder::new(f))
    } else {
        Box::new(f)
    };
    let prefix = format!("{key}=");
    for (i, l) in BufReader::new(input).lines().enumerate() {
        let l = l.ok()?;
        let Some(kv) = l.strip_prefix('#') else {
            return None; // past the header
        };
        if kv.trim_start().starts_with(&prefix) {
            return Some(i as u64 + 1);
        }
    }
    None
}

/// What [`validate`] found in a valid trace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ValidationSummary {
    /// Records.
    pub records: u64,
    /// Dependency edges.
    pub deps: u64,
    /// Payload bytes of network (net + ina) records.
    pub network_bytes: Bytes,
}

/// Stream through a trace checking every invariant (and endpoints against `topo` when given).
pub fn validate(
    path: impl AsRef<Path>,
    topo: Option<&Topology>,
) -> Result<ValidationSummary, TraceError> {
    let mut rd = TraceReader::open(path)?;
    if let Some(t) = topo {
        rd = rd.with_check(t);
    }
    let mut s = ValidationSummary::default();
    for r in rd {
        let r = r?;
        s.records += 1;
        s.deps += r.deps.len() as u64;
        if matches!(r.mode, Mode::Net | Mode::Ina) {
            s.network_bytes += r.bytes;
        }
    }
    Ok(s)
}
