//! The fields of one record the replay reads, wherever the table holds it.

use crate::record::{Class, Mode};
use crate::units::NodeId;

/// The fields of one record the replay reads.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(in crate::replay) struct Fields {
    pub src: NodeId,
    pub dst: NodeId,
    pub bytes: u64,
    pub gap: u64,
    pub dur: u64,
    pub mode: Mode,
    pub class: Class,
    pub channel: u32,
}
