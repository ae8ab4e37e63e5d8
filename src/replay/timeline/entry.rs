//! What the timeline keeps of one record for one selected rank, as the records go into
//! the replayer's table.

use crate::record::{AggDir, Class, Mode};
use crate::units::{NodeId, Rank};

/// What the timeline keeps of one record for one selected rank.
#[derive(Clone, Debug)]
pub(super) struct Entry {
    /// Position in the replayer's table.
    pub(super) pos: u32,
    /// The rank whose track it goes on.
    pub(super) rank: Rank,
    pub(super) mode: Mode,
    pub(super) class: Class,
    pub(super) bytes: u64,
    pub(super) gap: u64,
    pub(super) collective: Option<u64>,
    pub(super) step: Option<u32>,
    pub(super) microbatch: Option<u32>,
    pub(super) layer: Option<u32>,
    pub(super) group: Option<u32>,
    /// The other end: the receiver of a send, the switch of an INA edge.
    pub(super) peer: NodeId,
    /// INA edge direction.
    pub(super) dir: Option<AggDir>,
    pub(super) channel: u32,
}
