//! Errors and warnings of the topology module.

use crate::units::NodeId;
use std::fmt;
use std::path::PathBuf;

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
    /// A topology file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A topology file line that cannot be understood.
    #[error("{path}:{line}: {field}: {msg}")]
    Parse {
        /// The file (or `<string>` for text parsed from memory).
        path: String,
        /// 1-based line number.
        line: usize,
        /// The field of the line (`header`, `switch id`, `src`, `rate`, …).
        field: String,
        /// What is wrong and what was expected.
        msg: String,
    },
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

/// Something odd but survivable in a topology file, reported instead of dying: header
/// counts that disagree with the rows, free text after the links, …
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopologyWarning {
    /// The file.
    pub path: String,
    /// 1-based line number the warning is about.
    pub line: usize,
    /// What was odd and what was done about it.
    pub msg: String,
}

impl fmt::Display for TopologyWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: warning: {}", self.path, self.line, self.msg)
    }
}
