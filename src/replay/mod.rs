//! Stage 4b: the native flow-level replayer with INA-enabled switches (`ina3d replay`).
//!
//! One public entry, [`simulate`]: the trace DAG on a topology, event by event.
//!
//! **Model.** A record becomes ready when all its deps have ended and starts `gap` later.
//! `Compute` and `NvLink` records are timers of `dur`. A `Net` record is a fluid flow of
//! `bytes + ceil(bytes/payload)·48` wire bytes over its routed channels (each direction
//! of a link is one channel with the link's rate); rates are max-min fair over channels,
//! recomputed at every arrival and completion, but only for the flows connected to the
//! change through *tight* channels (channels whose flows' rate caps sum above the
//! capacity — a channel that cannot be saturated constrains nobody, so skipping it is
//! exact). Events of one nanosecond are processed as a batch before rates are re-solved,
//! so a collective whose flows finish together costs one re-solve, not one per flow. A
//! flow's record ends when its last byte has left (fluid completion, rounded up to the
//! nanosecond) plus the propagation delay of its path (store-and-forward of the last
//! packet is not modelled: an approximation of one packet time per hop).
//!
//! **INA.** All `Ina` records sharing an aggregation id form one unit: it starts when every
//! edge is ready (deps outside the aggregation only) plus that edge's gap, and streams
//! `S` bytes (the largest edge) as one flow occupying every channel of its tree once (up
//! and down); its rate is its max-min share, capped by its window, `slots × payload /
//! RTT` with RTT = the tree's up + down propagation latency. It ends at
//! `S_wire/rate + up latency + down latency`; all its edges share its start and end.
//! `S` is the largest up edge (down edges of a reduce-scatter carry smaller shards within
//! the same time; each edge's own bytes are what `links.csv` counts). A channel crossed by
//! `k` edges of one tree (children behind a switch that does not aggregate) weighs `k` for
//! the unit in the max-min solve. An aggregation with only down edges (Rina's multicast
//! back to the racks) sums nothing: it takes no slots and has no window limit.
//! Aggregator slots come from per-switch pools (see [`InaPolicy`]); an aggregation needs
//! slots on every switch of its tree and takes `min(window, free)` on all of them.
//! When an aggregation gets no slot and is not allowed to wait, it **falls back to the
//! host ring all-reduce** over its worker hosts: `n` flows, member i → member i+1, each of
//! `2(n−1)` chunks of `ceil(S/n)` bytes (headers per chunk), started together and
//! finishing when the last finishes plus `2(n−1)` path latencies — the ring's pipelined
//! steps as one fluid stream (per-step synchronisation is not modelled).
//!
//! Before anything runs the input is validated (unique ids, deps exist, no cycle once
//! each aggregation is contracted to one node, endpoints exist, every transfer has a route
//! whose links have non-zero rates): a bad trace is an error, never a hang.

mod engine;
mod output;
mod route;

pub use engine::simulate;
pub use output::write_outputs;
pub use route::{PathSource, SharedRoutes, ShortestPaths};

use crate::fct::{FctRow, Summary};
use crate::trace::Class;
use crate::units::{Bytes, FlowId, LinkId, NodeId};

/// How switches share their aggregator slots among concurrent aggregations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InaPolicy {
    /// The pool is partitioned equally among the enabled classes; within its class's
    /// share an aggregation takes `min(window, free)` slots or waits (FIFO) for some;
    /// a class with no share falls back to the host ring.
    Static,
    /// First come, first served on the whole pool: `min(window, free)` slots, and with no
    /// free slot the aggregation falls back to the host ring at once (ATP-style).
    BestEffort,
    /// Like best-effort, but an aggregation with no free slot waits; freed slots go to the
    /// waiting aggregations by class in the order of [`InaConfig::classes`] (the trace's
    /// `ina_classes`, e.g. `tp,dp`: TP first; classes not listed come last, TP > PP > DP >
    /// EMB among them), then by arrival, then by id.
    Priority,
}

impl std::str::FromStr for InaPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "static" => Ok(Self::Static),
            "best-effort" | "besteffort" | "best_effort" => Ok(Self::BestEffort),
            "priority" => Ok(Self::Priority),
            o => Err(format!("unknown INA policy `{o}` (expected static, best-effort or priority)")),
        }
    }
}

/// The INA switch configuration (from the trace header).
#[derive(Clone, Debug, PartialEq)]
pub struct InaConfig {
    /// Aggregator slots per switch.
    pub slots_per_switch: u32,
    /// Payload bytes per slot / packet.
    pub payload: Bytes,
    /// Slots one aggregation keeps outstanding (its window, in packets).
    pub window: u32,
    /// Pool sharing policy.
    pub policy: InaPolicy,
    /// Classes INA is enabled for (static partition shares).
    pub classes: Vec<Class>,
}

impl Default for InaConfig {
    /// SwitchML-like: 8,192 slots of 1,000 B payload, window 256, best-effort, DP and TP.
    fn default() -> Self {
        InaConfig {
            slots_per_switch: 8192,
            payload: Bytes(1000),
            window: 256,
            policy: InaPolicy::BestEffort,
            classes: vec![Class::Tp, Class::Dp],
        }
    }
}

/// Options of one replay.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayOptions {
    /// Packet payload for the header overhead (`size + ceil(size/payload)·48`).
    pub payload: Bytes,
    /// Header bytes per packet.
    pub header: Bytes,
    /// INA switches.
    pub ina: InaConfig,
    /// Show a progress bar on stderr.
    pub progress: bool,
    /// Trace name written into the summary.
    pub trace_name: String,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            payload: Bytes(1000),
            header: Bytes(48),
            ina: InaConfig::default(),
            progress: false,
            trace_name: String::new(),
        }
    }
}

/// Bytes and utilisation of one channel (one direction of a link).
#[derive(Clone, Debug, PartialEq)]
pub struct ChannelStat {
    /// The link.
    pub link: LinkId,
    /// Sending end.
    pub from: NodeId,
    /// Receiving end.
    pub to: NodeId,
    /// Rate in bits per second.
    pub rate_bps: u64,
    /// Wire bytes carried.
    pub bytes: u64,
    /// `bytes·8 / (rate · iteration time)`.
    pub utilisation: f64,
}

/// One change of a switch's slot occupancy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotSample {
    /// When, ns.
    pub time_ns: u64,
    /// The switch.
    pub switch: NodeId,
    /// Slots in use from then on.
    pub slots_in_use: u32,
}

/// Everything one replay produced.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayResult {
    /// One row per record, in trace order.
    pub rows: Vec<FctRow>,
    /// The iteration summary (`fct::summarize`).
    pub summary: Summary,
    /// Per-channel statistics, channels that carried bytes, in channel order.
    pub channels: Vec<ChannelStat>,
    /// Slot occupancy changes, in time order.
    pub slots: Vec<SlotSample>,
    /// Aggregations that fell back to the host ring.
    pub ina_fallbacks: u64,
    /// Events processed.
    pub events: u64,
    /// Max-min re-solves (batches with a rate change).
    pub resolves: u64,
}

/// Why a replay could not run. Every variant names the record, node or link at fault.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// Two records with one id.
    #[error("record id {0} appears more than once")]
    DuplicateId(FlowId),
    /// A dep that is not in the trace.
    #[error("record {id}: dep {dep} is not in the trace")]
    DanglingDep {
        /// Record.
        id: FlowId,
        /// Missing dep.
        dep: FlowId,
    },
    /// The DAG has a cycle (aggregations counted as one node).
    #[error("the trace has a dependency cycle through record {0} ({1} records can never start)")]
    Cycle(FlowId, usize),
    /// An endpoint the topology does not have.
    #[error("record {id}: node {node} is not in the topology ({nodes} nodes)")]
    UnknownNode {
        /// Record.
        id: FlowId,
        /// Node.
        node: NodeId,
        /// Topology size.
        nodes: usize,
    },
    /// No route between the endpoints.
    #[error("record {id}: no route from {src} to {dst}: {reason}")]
    NoRoute {
        /// Record.
        id: FlowId,
        /// Sender.
        src: NodeId,
        /// Receiver.
        dst: NodeId,
        /// What the router said.
        reason: String,
    },
    /// A path crosses a link of rate 0.
    #[error("record {id}: its path crosses link {link} ({a}–{b}) whose rate is 0")]
    ZeroCapacity {
        /// Record.
        id: FlowId,
        /// Link.
        link: LinkId,
        /// One end.
        a: NodeId,
        /// Other end.
        b: NodeId,
    },
    /// An inconsistent aggregation.
    #[error("aggregation {agg}: {msg}")]
    BadAggregation {
        /// Aggregation id.
        agg: u64,
        /// What is wrong.
        msg: String,
    },
    /// Records left unfinished when no event remained (cannot happen on a validated
    /// trace; reported rather than hidden).
    #[error("simulation stopped with {0} records unfinished (first: {1})")]
    Stalled(usize, FlowId),
    /// Summary computation failed.
    #[error(transparent)]
    Summary(#[from] crate::fct::FctError),
    /// A trace header value the replayer needs is malformed.
    #[error("trace header `{key}`: {msg}")]
    Header {
        /// Metadata key.
        key: String,
        /// What was wrong.
        msg: String,
    },
}

/// Trace header keys the replayer reads (first present alias wins).
pub const HEADER_KEYS: [(&str, &[&str]); 5] = [
    ("slots per switch", &["ina_slots_per_switch", "ina_slots", "ina.slots_per_switch", "ina.slots"]),
    ("payload bytes", &["ina_payload_bytes", "ina_payload", "ina.payload_bytes", "ina.payload"]),
    ("window", &["ina_window", "ina.window"]),
    ("policy", &["ina_policy", "ina.policy"]),
    ("classes", &["ina_classes", "ina.classes"]),
];

fn header_value(h: &crate::trace::TraceHeader, which: usize) -> Option<(&'static str, &str)> {
    HEADER_KEYS[which].1.iter().find_map(|k| h.get(k).map(|v| (*k, v.trim())))
}

impl ReplayOptions {
    /// Options with the INA configuration of a trace header (keys in [`HEADER_KEYS`]);
    /// absent keys keep the defaults of [`InaConfig::default`]. The packet payload used
    /// for header overhead follows the INA payload when one is given.
    pub fn from_header(h: &crate::trace::TraceHeader) -> Result<ReplayOptions, ReplayError> {
        let mut o = ReplayOptions::default();
        let num = |which: usize| -> Result<Option<u64>, ReplayError> {
            match header_value(h, which) {
                None => Ok(None),
                Some((k, v)) => v.parse::<u64>().map(Some).map_err(|_| ReplayError::Header {
                    key: k.into(),
                    msg: format!("`{v}` is not a non-negative integer ({})", HEADER_KEYS[which].0),
                }),
            }
        };
        if let Some(v) = num(0)? {
            o.ina.slots_per_switch = u32::try_from(v).map_err(|_| ReplayError::Header { key: "ina_slots_per_switch".into(), msg: format!("{v} is too large") })?;
        }
        if let Some(v) = num(1)? {
            if v == 0 {
                return Err(ReplayError::Header { key: "ina_payload_bytes".into(), msg: "payload must be positive".into() });
            }
            o.ina.payload = Bytes(v);
            o.payload = Bytes(v);
        }
        if let Some(v) = num(2)? {
            o.ina.window = u32::try_from(v).map_err(|_| ReplayError::Header { key: "ina_window".into(), msg: format!("{v} is too large") })?;
        }
        if let Some((k, v)) = header_value(h, 3) {
            o.ina.policy = v.parse().map_err(|msg| ReplayError::Header { key: k.into(), msg })?;
        }
        if let Some((k, v)) = header_value(h, 4) {
            let mut cls = Vec::new();
            for part in v.split([',', ';', '+', ' ']).filter(|p| !p.is_empty() && *p != "none") {
                cls.push(part.parse::<Class>().map_err(|msg| ReplayError::Header { key: k.into(), msg })?);
            }
            o.ina.classes = cls;
        }
        Ok(o)
    }
}
