//! Why a replay could not run.

use super::memory::{BYTES_PER_RECORD, BYTES_PER_ROW, LIMIT_VAR};
use crate::units::{binary_size, FlowId, LinkId, NodeId};

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
    /// An event fell past the replayer's horizon ([`TIME_HORIZON_NS`](crate::replay::TIME_HORIZON_NS)): some size, time,
    /// rate or delay in the input is far outside any real job (the readers bound each one;
    /// this catches their sums).
    #[error(
        "{what}: the simulated time passes 2^62 ns (146 years); a size, gap, duration, rate \
         or delay of the trace or topology is out of any real range"
    )]
    PastHorizon {
        /// The record or aggregation concerned.
        what: String,
    },
    /// The replay passed [`ReplayOptions::deadline`](crate::replay::ReplayOptions::deadline) before its last record ended.
    #[error("out of time: the replay was stopped at its deadline, {done} of {total} records done, {simulated_ns} ns simulated")]
    OutOfTime {
        /// Records ended.
        done: usize,
        /// Records in the trace.
        total: usize,
        /// Simulated time reached (ns).
        simulated_ns: u64,
    },
    /// Records left unfinished when no event remained (cannot happen on a validated
    /// trace; reported rather than hidden).
    #[error("simulation stopped with {0} records unfinished (first: {1})")]
    Stalled(usize, FlowId),
    /// More records (or deps) than the replayer's `u32` positions hold.
    #[error("the trace is too large to replay: {0} records (at most 4,294,967,293 records and as many deps)")]
    TooLarge(usize),
    /// The memory limit's variable ([`LIMIT_VAR`](crate::replay::budget::LIMIT_VAR)) is not a size.
    #[error("{var}=`{0}` is not a size in bytes (e.g. 8G, 512M, 1073741824)", var = LIMIT_VAR)]
    BadLimit(String),
    /// The replay would not fit in memory ([`budget`](crate::replay::budget)).
    #[error("the replay would need about {} ({records} records, {rows} of them rows outside ring blocks: {} B per record, {} B more per row; {how}), more than the limit of {} ({origin})", binary_size(*need), BYTES_PER_RECORD, BYTES_PER_ROW, binary_size(*limit))]
    OverBudget {
        /// Records, estimated.
        records: u64,
        /// Of them, explicit rows (not in ring blocks), estimated.
        rows: u64,
        /// How the estimate was made.
        how: String,
        /// Bytes needed, estimated.
        need: u64,
        /// The limit, bytes.
        limit: u64,
        /// Where the limit came from.
        origin: String,
    },
    /// A trace header value the replayer needs is malformed.
    #[error("trace header `{key}`: {msg}")]
    Header {
        /// Metadata key.
        key: String,
        /// What was wrong.
        msg: String,
    },
}
