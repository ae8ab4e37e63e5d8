//! Errors and warnings of the topology module.

use crate::units::NodeId;

/// Why a topology could not be built, read, routed or checked.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// A builder spec (`fat-tree:k=8`, …) with a bad kind, key or value.
    #[error("topology spec `{spec}`: {key}: {msg}")]
    Spec {
        /// The whole spec as given.
        spec: String,
        /// The offending key (or `kind` for the part before `:`).
        key: String,
        /// What is wrong and what was expected.
        msg: String,
    },
    /// A topology file that cannot be read or understood (names file, line and field).
    #[error(transparent)]
    File(#[from] crate::formats::FormatError),
    /// The job does not fit the topology (which numbers disagree is in the message).
    #[error("{0}")]
    World(String),
    /// A link with a zero rate: nothing could ever cross it.
    #[error("link {link} ({a}–{b}) has a zero rate; every link needs a positive rate")]
    ZeroRate {
        /// Index of the link.
        link: u32,
        /// One end.
        a: NodeId,
        /// Other end.
        b: NodeId,
    },
    /// Two hosts with no network path between them.
    #[error("host {from} cannot reach host {to} over network links (hosts do not forward, NVLink is not a network path)")]
    Disconnected {
        /// Source host.
        from: NodeId,
        /// Destination host.
        to: NodeId,
    },
    /// A node id that is not a host where a host was required.
    #[error("node {node} is {what}, not a host")]
    NotAHost {
        /// The node.
        node: NodeId,
        /// What it is instead.
        what: String,
    },
    /// No switch that may aggregate sits above all members of an aggregation.
    #[error("no aggregating switch covers all {members} members of the aggregation (first member {first})")]
    NoAggregator {
        /// Number of members.
        members: usize,
        /// The lowest member id, to find the group.
        first: NodeId,
    },
    /// An aggregation with no members or a member listed twice.
    #[error("aggregation members: {0}")]
    Members(String),
}
