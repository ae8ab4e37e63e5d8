//! Stage 4a: the ns-3 back-end.
//!
//! - [`emit()`]: writes, for one trace on one topology, the inputs of the HPCC simulator
//!   family (`topology.txt`, `flow.txt`, `config.txt` — HPCC, Parsimon's fork or SimAI's
//!   ns-3, see [`Flavor`]) and of our own `ns3-glue` (`trace.txt`, `routes.txt`,
//!   `params.txt`), which runs the trace **closed-loop** with INA switch applications on
//!   Debian's stock ns-3.37.
//! - [`run::run_glue`]: builds the glue when needed, runs it, checks the run is complete
//!   (every record finished, bytes conserved) and writes `summary.csv`; the glue runs as
//!   a [`child`] that never outlives ina3d.
//! - [`ingest`]: reads the simulators' outputs (HPCC `fct.txt` with 8 or 9 fields, `pfc`,
//!   `qlen`, SimAI `EndToEnd.csv`, the glue's `summary.csv`) into tidy CSV.
//!
//! The exports to other simulators (AICB/SimAI, Chakra) and the reading of their results
//! beside ours are [`crate::interop`]'s.
//!
//! ## Routing: the same path in the glue and the replayer
//! Both back-ends use ECMP **per connection**: every net record and INA edge from `src`
//! to `dst` takes the path [`crate::topology::Routing::connection_path`] gives, keyed by
//! [`crate::topology::pair_key`]`(src, dst)` (a fabric hashing the 5-tuple of NCCL's
//! persistent per-peer connections). [`emit()`] writes that path for every pair the glue
//! carries (and the reverse direction, for TCP ACKs and INA results) into `routes.txt`
//! ([`routes`]), and the glue's `Ina3dPairRouting` forwards by (source, destination) from
//! that table. What the glue really forwarded is counted per link direction and checked
//! against the replayer's `links.csv` by `ina3d compare` (not assumed from the table).
//!
//! ## INA for simulators without INA
//! HPCC-family simulators have no aggregating switch. [`emit()`] attaches one *aggregation
//! proxy host* to every switch that aggregates (host id `nodes + k`, k in switch-id order),
//! over a link as fast as all the switch's other ports together so the proxy port never is
//! the bottleneck; an INA up edge `child → switch` becomes the flow `child → proxy(switch)`
//! and a down edge `switch → child` the flow `proxy(switch) → child`. This keeps the bytes
//! on every worker link exactly those of INA (S up, S down) but adds one switch hop and
//! leaves the switch-to-proxy link's queueing to the simulator — an approximation.

pub mod child;
pub mod emit;
pub mod ingest;
pub mod routes;
pub mod run;

pub use emit::{emit, EmitOptions, EmitReport, Flavor, StartSource, TcpConnections, Transport};

use crate::units::{FlowId, NodeId};
use std::path::PathBuf;

/// The INA switch model of a trace (slots, payload, window, policy, classes), shared with
/// the replayer: both grant an aggregation's slots for its whole tree at once, and a
/// best-effort aggregation refused them runs a host ring among its workers in both (see
/// `ns3-glue/README.md`).
pub use crate::trace::{InaConfig, InaPolicy};

/// The INA model of a trace header, as an ns-3 back-end error when malformed.
///
/// A merged multi-job trace (`ina3d cluster`, header `ina_tenants`) under the `static`
/// policy splits every pool among the jobs first, which the glue does not model: refused
/// rather than run as one job's class split (a trace with INA off, header `ina = off`,
/// has nothing to split). Under the other policies the jobs only label the aggregations,
/// and the glue runs the trace as it is.
pub fn ina_model(h: &crate::trace::TraceHeader) -> Result<InaConfig, Ns3Error> {
    let m = InaConfig::from_header(h).map_err(|e| Ns3Error::BadTrace(e.to_string()))?;
    let aggregates = h.get("ina").is_none_or(|v| v.trim() != "off");
    if m.tenants.len() > 1 && m.policy() == crate::trace::InaPolicy::Static && aggregates {
        return Err(Ns3Error::BadTrace(format!(
            "`{}`: per-job slot pools (the static policy split among {} jobs) are not modelled by the ns-3 glue; replay this trace, or use the best-effort or planned policy",
            crate::trace::INA_TENANTS_KEY,
            m.tenants.len()
        )));
    }
    Ok(m)
}

/// Everything that can go wrong in the ns-3 back-end.
#[derive(Debug, thiserror::Error)]
pub enum Ns3Error {
    /// A record names a node the topology does not have.
    #[error("record {record}: node {node} is not in the topology ({nodes} nodes)")]
    UnknownNode {
        /// Record id.
        record: FlowId,
        /// The missing node.
        node: NodeId,
        /// Nodes in the topology.
        nodes: usize,
    },
    /// A link rate the HPCC family (or ns-3's DataRate) cannot take.
    #[error("link {a}-{b}: unsupported link rate {rate} bps (need a positive whole number of Mbps up to 10 Tbps)")]
    UnsupportedRate {
        /// One end.
        a: NodeId,
        /// Other end.
        b: NodeId,
        /// The rate.
        rate: u64,
    },
    /// The trace is not a DAG or is otherwise inconsistent.
    #[error("trace: {0}")]
    BadTrace(String),
    /// The topology cannot be routed (see [`crate::topology::Routing::new`]), or the
    /// routes written for the glue disagree with the replayer's.
    #[error("routing: {0}")]
    Routing(String),
    /// No route between two nodes that must exchange data.
    #[error("no route from node {src} to node {dst}")]
    NoRoute {
        /// Sender.
        src: NodeId,
        /// Receiver.
        dst: NodeId,
    },
    /// A file could not be parsed.
    #[error("{path}:{line}: {field}: {msg}")]
    Parse {
        /// File.
        path: PathBuf,
        /// 1-based line (0 when not line-bound).
        line: usize,
        /// Field or column.
        field: String,
        /// What was wrong.
        msg: String,
    },
    /// ns-3 is not installed.
    #[error("ns-3 is not installed ({0}); install with `apt-get install ns3 libns3-dev libgsl-dev` or `make ns3-deps`")]
    Ns3Missing(String),
    /// The glue failed to compile.
    #[error("building ns3-glue failed: {0}")]
    Build(String),
    /// The glue run did not finish every record, or its outputs disagree with the trace.
    #[error("ns-3 run incomplete: {0}")]
    Incomplete(String),
    /// The topology cannot be read or built.
    #[error(transparent)]
    Topology(#[from] crate::topology::TopologyError),
    /// A file could not be read, written or understood (names file, line and field).
    #[error(transparent)]
    File(#[from] crate::formats::FormatError),
    /// I/O on a named file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

impl Ns3Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Ns3Error::Io {
            path: path.into(),
            source,
        }
    }
    pub(crate) fn parse(
        path: &std::path::Path,
        line: usize,
        field: &str,
        msg: impl Into<String>,
    ) -> Self {
        Ns3Error::Parse {
            path: path.to_path_buf(),
            line,
            field: field.to_string(),
            msg: msg.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::Bytes;

    #[test]
    fn ina_params_come_from_the_trace_header_and_bad_values_name_the_key() {
        let mut h = crate::trace::TraceHeader::new();
        h.set("ina_slots", 512)
            .set("ina_payload_bytes", 256)
            .set("ina_window", 64)
            .set("ina_policy", "best-effort");
        let p = super::ina_model(&h).unwrap();
        assert_eq!(
            p,
            InaConfig {
                slots: 512,
                payload: Bytes(256),
                window: 64,
                policy: Some(InaPolicy::BestEffort),
                ..InaConfig::default()
            }
        );
        h.set("ina_classes", "dp,tp");
        assert_eq!(
            super::ina_model(&h).unwrap().classes,
            vec![crate::record::Class::Dp, crate::record::Class::Tp]
        );
        h.set("ina_window", "many");
        assert!(super::ina_model(&h)
            .unwrap_err()
            .to_string()
            .contains("ina_window"));
        assert_eq!(
            super::ina_model(&crate::trace::TraceHeader::new()).unwrap(),
            InaConfig::default()
        );
    }
}
