//! Ring blocks (module docs of `table`): the pattern of a ring collective's steps
//! recognised in the records as they arrive ([`Candidate`]: a row that may start a block;
//! the open block taking the records that continue it), and a block's records computed
//! from their position ([`Block`]).

use super::fields::Fields;
use crate::record::{Class, FlowRecord, Mode};
use crate::units::NodeId;

/// The fewest records a ring block holds; a shorter run of the pattern stays explicit
/// rows (its rows would save less than the block's own columns cost).
pub(super) const MIN_BLOCK: u32 = 64;

/// The most members a ring block may have: the first row is buffered while the members
/// are counted.
const MAX_MEMBERS: usize = 1 << 16;

/// Rows `1..` of a ring collective's records, held by their pattern (module docs).
#[derive(Clone, Debug, PartialEq)]
pub(in crate::replay) struct Block {
    /// Position of record (1, 0).
    pub lo: u32,
    /// One past the last position (while open: the records taken so far).
    pub hi: u32,
    /// Members (columns).
    pub n: u32,
    /// Records in the blocks before this one.
    pub before: u32,
    /// The records row 1 waits for: record (1, i) waits for `first[i]` and `first[i−1]`.
    pub first: Vec<u32>,
    /// Sender of column `i`.
    pub src: Vec<NodeId>,
    /// Receiver of column `i`.
    pub dst: Vec<NodeId>,
    /// Size of chunk `c`: record (k, i) carries chunk `(i − k) mod n`.
    pub bytes: Vec<u64>,
    pub class: Class,
    pub channel: u32,
}

impl Block {
    /// Complete rows.
    pub fn rows(&self) -> u32 {
        (self.hi - self.lo) / self.n
    }

    /// Position of record (k, i), k ≥ 1.
    pub fn pos(&self, k: u32, i: u32) -> u32 {
        self.lo + (k - 1) * self.n + i
    }

    /// Position of record (k, i) with row 0 the records before the block.
    fn at(&self, k: u32, i: u32) -> u32 {
        if k == 0 {
            self.first[i as usize]
        } else {
            self.pos(k, i)
        }
    }

    /// Deps of record (k, i), in their trace order.
    pub fn deps(&self, k: u32, i: u32) -> [u32; 2] {
        [self.at(k - 1, i), self.at(k - 1, (i + self.n - 1) % self.n)]
    }

    /// Payload bytes of record (k, i).
    pub fn bytes_at(&self, k: u32, i: u32) -> u64 {
        self.bytes[((i + self.n - k % self.n) % self.n) as usize]
    }

    /// The fields of record (k, i): a network record of the block's class and channel,
    /// no gap, no duration.
    pub fn fields(&self, k: u32, i: u32) -> Fields {
        Fields {
            src: self.src[i as usize],
            dst: self.dst[i as usize],
            bytes: self.bytes_at(k, i),
            gap: 0,
            dur: 0,
            mode: Mode::Net,
            class: self.class,
            channel: self.channel,
        }
    }
}

/// The first row of a possible block: records whose second dep is the previous one's
/// first (module docs), read until a record waits for the row's first record.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Candidate {
    pub(super) lo: u32,
    pub(super) a: Vec<u32>,
    pub(super) b: Vec<u32>,
    pub(super) src: Vec<NodeId>,
    pub(super) dst: Vec<NodeId>,
    pub(super) bytes: Vec<u64>,
    pub(super) class: Class,
    pub(super) channel: u32,
}

impl Candidate {
    pub(super) fn new(p: u32, r: &FlowRecord, d: [u32; 2]) -> Candidate {
        Candidate {
            lo: p,
            a: vec![d[0]],
            b: vec![d[1]],
            src: vec![r.src],
            dst: vec![r.dst],
            bytes: vec![r.bytes.0],
            class: r.class,
            channel: r.channel,
        }
    }

    pub(super) fn add(&mut self, r: &FlowRecord, d: [u32; 2]) {
        self.a.push(d[0]);
        self.b.push(d[1]);
        self.src.push(r.src);
        self.dst.push(r.dst);
        self.bytes.push(r.bytes.0);
    }

    /// The members, if record `d` (the deps of the record after the row) closes the ring.
    pub(super) fn closes(&self, d: [u32; 2]) -> bool {
        let n = self.a.len();
        n >= 2 && d[0] == self.lo && d[1] == self.lo + n as u32 - 1 && self.b[0] == self.a[n - 1]
    }

    /// Whether `r` with deps `d` is the row's next record.
    pub(super) fn continues(&self, r: &FlowRecord, d: [u32; 2]) -> bool {
        let n = self.a.len();
        n < MAX_MEMBERS
            && d[1] == self.a[n - 1]
            && r.class == self.class
            && r.channel == self.channel
    }
}
