//! The trace records as the replayer keeps them: one column per field it reads, deps as
//! positions in one flat list. A [`FlowRecord`] is ≈ 170 B plus a heap block for its
//! deps; a row here is ≈ 42 B plus 4 B per dep, so a 68-million-record trace fits in
//! memory. The columns are filled one record at a time ([`RecordTable::push`]) straight
//! from the generator or the trace reader; no `Vec<FlowRecord>` is needed.
//!
//! The fields the replayer never reads (iteration, collective, step, micro-batch, layer,
//! stage, group size) are not kept.

use super::huge;
use super::ReplayError;
use crate::fct::{FctRow, TraceView};
use crate::record::{AggTag, Class, FlowRecord, Mode};
use crate::units::{Bytes, FlowId, NodeId};
use std::collections::HashMap;

/// A dep whose id no record has (yet): resolved by [`RecordTable::finish`] or reported as
/// dangling by the replayer's validation.
pub(super) const UNRESOLVED: u32 = u32::MAX;

/// The records of one trace, by position (trace order), as columns.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecordTable {
    /// Each record's id; empty while the ids are 0, 1, 2, … in order (what the
    /// generator writes), so the position is the id.
    ids: Vec<u64>,
    /// Id → position, built only once the ids stop being dense.
    map: HashMap<u64, u32>,
    src: Vec<NodeId>,
    dst: Vec<NodeId>,
    bytes: Vec<u64>,
    gap: Vec<u64>,
    dur: Vec<u64>,
    mode: Vec<Mode>,
    class: Vec<Class>,
    channel: Vec<u32>,
    /// Deps of record `i`: `deps[dep_off[i]..dep_off[i + 1]]`.
    dep_off: Vec<u32>,
    /// Dep positions ([`UNRESOLVED`]: not found).
    deps: Vec<u32>,
    /// Deps not resolved when pushed: (slot in `deps`, id), in push order. After
    /// [`RecordTable::finish`], only the dangling ones remain.
    unresolved: Vec<(u32, u64)>,
    /// Index into `tags` of each record, [`NO_TAG`] for none; empty while no record has one.
    tag_of: Vec<u32>,
    tags: Vec<AggTag>,
    /// The first id pushed twice.
    duplicate: Option<FlowId>,
}

/// "No aggregation tag" in `tag_of`.
const NO_TAG: u32 = u32::MAX;

impl RecordTable {
    /// An empty table.
    pub fn new() -> RecordTable {
        RecordTable {
            dep_off: vec![0],
            ..RecordTable::default()
        }
    }

    /// The table of `records` (what [`super::simulate`] replays).
    pub fn from_records(records: &[FlowRecord]) -> Result<RecordTable, ReplayError> {
        let mut t = RecordTable::new();
        for r in records {
            t.push(r)?;
        }
        t.finish();
        Ok(t)
    }

    /// Append one record. Its deps are resolved to positions when their ids are already
    /// in the table, else by [`RecordTable::finish`]. An error only when the table is
    /// full (positions and dep offsets are `u32`).
    pub fn push(&mut self, r: &FlowRecord) -> Result<(), ReplayError> {
        let n = self.len();
        let deps_after = self.deps.len() as u64 + r.deps.len() as u64;
        if n as u64 >= UNRESOLVED as u64 - 1 || deps_after >= u32::MAX as u64 {
            return Err(ReplayError::TooLarge(n));
        }
        self.index_id(r.id.0, n as u32);
        for d in &r.deps {
            let slot = self.deps.len() as u32;
            match self.position(d.0) {
                Some(p) => self.deps.push(p),
                None => {
                    self.deps.push(UNRESOLVED);
                    self.unresolved.push((slot, d.0));
                }
            }
        }
        self.dep_off.push(self.deps.len() as u32);
        self.src.push(r.src);
        self.dst.push(r.dst);
        self.bytes.push(r.bytes.0);
        self.gap.push(r.gap.0);
        self.dur.push(r.dur.0);
        self.mode.push(r.mode);
        self.class.push(r.class);
        self.channel.push(r.channel);
        match r.agg {
            Some(tag) => {
                if self.tag_of.len() < n {
                    self.tag_of.resize(n, NO_TAG);
                }
                self.tag_of.push(self.tags.len() as u32);
                self.tags.push(tag);
            }
            None if !self.tag_of.is_empty() => self.tag_of.push(NO_TAG),
            None => {}
        }
        Ok(())
    }

    /// Record that id `id` is at position `pos` (the map only once ids stop being dense).
    fn index_id(&mut self, id: u64, pos: u32) {
        let dense = self.map.is_empty() && self.ids.is_empty();
        if dense && id == pos as u64 {
            return;
        }
        if dense {
            self.ids = (0..pos as u64).collect();
            self.map = (0..pos).map(|i| (i as u64, i)).collect();
        }
        self.ids.push(id);
        if self.map.insert(id, pos).is_some() && self.duplicate.is_none() {
            self.duplicate = Some(FlowId(id));
        }
    }

    /// The position of the record with id `id`, if pushed.
    fn position(&self, id: u64) -> Option<u32> {
        if self.ids.is_empty() {
            (id < self.len() as u64).then_some(id as u32)
        } else {
            self.map.get(&id).copied()
        }
    }

    /// Resolve the deps that named records pushed after them; those naming no record stay
    /// [`UNRESOLVED`] (the replayer reports them). The id map is freed.
    pub fn finish(&mut self) {
        let pending = std::mem::take(&mut self.unresolved);
        for (slot, id) in pending {
            match self.position(id) {
                Some(p) => self.deps[slot as usize] = p,
                None => self.unresolved.push((slot, id)),
            }
        }
        if !self.tag_of.is_empty() && self.tag_of.len() < self.len() {
            self.tag_of.resize(self.len(), NO_TAG);
        }
        self.map = HashMap::new();
    }

    /// Back the columns the event loop reads at random with huge pages now (see `huge`):
    /// the kernel copies them into 2 MiB pages, ≈ 2 s for a 32,768-GPU trace, so callers
    /// at that scale run it beside other work ([`crate::pipeline`] does, while routes
    /// are computed). Contents never change.
    pub fn use_huge_pages(&self) {
        huge::advise(&self.deps, true);
        huge::advise(&self.dep_off, true);
        huge::advise(&self.gap, true);
        huge::advise(&self.dur, true);
        huge::advise(&self.bytes, true);
        huge::advise(&self.mode, true);
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.src.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.src.is_empty()
    }

    /// The first id that appears twice.
    pub(super) fn duplicate(&self) -> Option<FlowId> {
        self.duplicate
    }

    /// Id of record `i`.
    pub fn id(&self, i: usize) -> FlowId {
        FlowId(if self.ids.is_empty() {
            i as u64
        } else {
            self.ids[i]
        })
    }
    /// Sender.
    pub fn src(&self, i: usize) -> NodeId {
        self.src[i]
    }
    /// Receiver.
    pub fn dst(&self, i: usize) -> NodeId {
        self.dst[i]
    }
    /// Payload bytes.
    pub fn bytes(&self, i: usize) -> Bytes {
        Bytes(self.bytes[i])
    }
    /// Gap, ns.
    pub fn gap(&self, i: usize) -> u64 {
        self.gap[i]
    }
    /// Duration, ns.
    pub fn dur(&self, i: usize) -> u64 {
        self.dur[i]
    }
    /// Mode.
    pub fn mode(&self, i: usize) -> Mode {
        self.mode[i]
    }
    /// Class.
    pub fn class(&self, i: usize) -> Class {
        self.class[i]
    }
    /// NCCL channel.
    pub fn channel(&self, i: usize) -> u32 {
        self.channel[i]
    }
    /// Aggregation tag.
    pub fn agg(&self, i: usize) -> Option<AggTag> {
        match self.tag_of.get(i) {
            Some(&t) if t != NO_TAG => Some(self.tags[t as usize]),
            _ => None,
        }
    }
    /// True when some record carries an aggregation tag.
    pub(super) fn has_tags(&self) -> bool {
        !self.tags.is_empty()
    }
    /// Dep positions of record `i` ([`UNRESOLVED`] for a dangling dep).
    pub(super) fn deps_of(&self, i: usize) -> &[u32] {
        &self.deps[self.dep_off[i] as usize..self.dep_off[i + 1] as usize]
    }
    /// The id a dangling dep slot of record `i` named (`k`-th dep).
    pub(super) fn dangling_id(&self, i: usize, k: usize) -> FlowId {
        let slot = self.dep_off[i] + k as u32;
        let at = self.unresolved.partition_point(|&(s, _)| s < slot);
        FlowId(self.unresolved.get(at).map_or(u64::MAX, |u| u.1))
    }

    /// The `fct.csv` row of record `i` ([`FctRow::of_record`] of the fields a row holds;
    /// the rest — timing, channel, INA tag — are not looked up for each of the rows).
    pub fn row(&self, i: usize, start_ns: u64, end_ns: u64, standalone_ns: u64) -> FctRow {
        let r = FlowRecord {
            id: self.id(i),
            src: self.src[i],
            dst: self.dst[i],
            bytes: Bytes(self.bytes[i]),
            mode: self.mode[i],
            class: self.class[i],
            ..FlowRecord::default()
        };
        FctRow::of_record(&r, start_ns, end_ns, standalone_ns)
    }
}

impl TraceView for RecordTable {
    fn len(&self) -> usize {
        RecordTable::len(self)
    }
    fn id(&self, i: usize) -> u64 {
        RecordTable::id(self, i).0
    }
    fn src(&self, i: usize) -> NodeId {
        self.src[i]
    }
    fn mode(&self, i: usize) -> Mode {
        self.mode[i]
    }
    fn class(&self, i: usize) -> Class {
        self.class[i]
    }
    fn gap(&self, i: usize) -> u64 {
        self.gap[i]
    }
    fn dur(&self, i: usize) -> u64 {
        self.dur[i]
    }
    fn bytes(&self, i: usize) -> u64 {
        self.bytes[i]
    }
    fn agg(&self, i: usize) -> Option<AggTag> {
        RecordTable::agg(self, i)
    }
    fn deps(&self, i: usize, out: &mut Vec<usize>) {
        out.clear();
        out.extend(
            self.deps_of(i)
                .iter()
                .filter(|&&d| d != UNRESOLVED)
                .map(|&d| d as usize),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(id: u64, deps: &[u64]) -> FlowRecord {
        FlowRecord {
            id: FlowId(id),
            deps: deps.iter().map(|&d| FlowId(d)).collect(),
            ..FlowRecord::default()
        }
    }

    #[test]
    fn dense_ids_are_positions_and_deps_resolve_backwards_and_forwards() {
        let recs = [rec(0, &[2]), rec(1, &[0]), rec(2, &[1, 0])];
        let t = RecordTable::from_records(&recs).unwrap();
        assert_eq!(t.deps_of(0), &[2]);
        assert_eq!(t.deps_of(1), &[0]);
        assert_eq!(t.deps_of(2), &[1, 0]);
        assert_eq!(t.id(2), FlowId(2));
        assert!(t.ids.is_empty(), "dense ids need no id column");
    }

    #[test]
    fn sparse_ids_are_mapped_and_a_missing_dep_stays_dangling_with_its_id() {
        let recs = [rec(10, &[]), rec(7, &[10, 99]), rec(3, &[7])];
        let t = RecordTable::from_records(&recs).unwrap();
        assert_eq!(t.id(0), FlowId(10));
        assert_eq!(t.id(1), FlowId(7));
        assert_eq!(t.deps_of(1), &[0, UNRESOLVED]);
        assert_eq!(t.dangling_id(1, 1), FlowId(99));
        assert_eq!(t.deps_of(2), &[1]);
        assert_eq!(t.duplicate(), None);
    }

    #[test]
    fn a_repeated_id_is_remembered_even_where_ids_were_dense_before() {
        let recs = [rec(0, &[]), rec(1, &[]), rec(1, &[])];
        let t = RecordTable::from_records(&recs).unwrap();
        assert_eq!(t.duplicate(), Some(FlowId(1)));
    }

    #[test]
    fn rows_carry_the_record_fields_the_fct_schema_names() {
        let r = FlowRecord {
            id: FlowId(0),
            src: NodeId(3),
            dst: NodeId(5),
            bytes: Bytes(4096),
            mode: Mode::Net,
            class: Class::Dp,
            ..FlowRecord::default()
        };
        let t = RecordTable::from_records(std::slice::from_ref(&r)).unwrap();
        assert_eq!(t.row(0, 10, 25, 7), FctRow::of_record(&r, 10, 25, 7));
    }
}
