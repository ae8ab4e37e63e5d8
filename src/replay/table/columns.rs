//! The columns of a [`RecordTable`] (module docs of `table`): explicit rows, the ring
//! blocks taken in as the records arrive, and each record's fields and deps by position.

use super::blocks::{Block, Candidate, MIN_BLOCK};
use super::fields::Fields;
use crate::fct::{FctRow, TraceView};
use crate::record::{AggTag, Class, FlowRecord, Mode};
use crate::replay::huge;
use crate::replay::ReplayError;
use crate::units::{Bytes, FlowId, NodeId};
use std::collections::HashMap;

/// A dep whose id no record has (yet): resolved by [`RecordTable::finish`] or reported as
/// dangling by the replayer's validation.
pub(in crate::replay) const UNRESOLVED: u32 = u32::MAX;

/// Positions per entry of the index [`RecordTable::locate`] starts from.
const CHUNK_SHIFT: u32 = 12;

/// "No aggregation tag" in `tag_of`.
const NO_TAG: u32 = u32::MAX;

/// The records of one trace, by position (trace order): explicit rows as columns, and
/// ring blocks (see the module docs).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecordTable {
    /// Records (positions), explicit or in blocks.
    len: usize,
    /// Each record's id, by position; empty while the ids are 0, 1, 2, … in order (what
    /// the generator writes), so the position is the id.
    ids: Vec<u64>,
    /// Id → position, built only once the ids stop being dense.
    map: HashMap<u64, u32>,
    // The explicit rows, in position order (row `r` is the `r`-th record outside blocks).
    src: Vec<NodeId>,
    dst: Vec<NodeId>,
    bytes: Vec<u64>,
    gap: Vec<u64>,
    dur: Vec<u64>,
    mode: Vec<Mode>,
    class: Vec<Class>,
    channel: Vec<u32>,
    /// Deps of row `r`: `deps[dep_off[r]..dep_off[r + 1]]`.
    dep_off: Vec<u32>,
    /// Dep positions ([`UNRESOLVED`]: not found).
    deps: Vec<u32>,
    /// Deps not resolved when pushed: (slot in `deps`, id), in push order. After
    /// [`RecordTable::finish`], only the dangling ones remain.
    unresolved: Vec<(u32, u64)>,
    /// Index into `tags` of each row, [`NO_TAG`] for none; empty while no row has one.
    tag_of: Vec<u32>,
    tags: Vec<AggTag>,
    /// The first id pushed twice.
    duplicate: Option<FlowId>,
    /// The ring blocks, in position order.
    blocks: Vec<Block>,
    /// For each run of `2^CHUNK_SHIFT` positions, the first block ending after its start
    /// (built by [`RecordTable::finish`]).
    chunk: Vec<u32>,
    /// The first row of a possible block, still being read (it holds the last positions).
    cand: Option<Box<Candidate>>,
    /// The last block is still taking records (it holds the last positions).
    open: bool,
    /// The dep positions of the record being pushed.
    scratch: Vec<u32>,
    /// Keep every record as an explicit row (no blocks).
    explicit_only: bool,
}

/// Where a position's record is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::replay) enum Loc {
    /// Explicit row.
    Row(u32),
    /// Record (k, col) of block `b`.
    Block { b: u32, k: u32, col: u32 },
}

/// A run of positions held one way: explicit rows from `row` on, or a block.
pub(in crate::replay) enum Segment<'a> {
    /// Positions `pos..pos + len`, explicit rows `row..row + len`.
    Rows { pos: u32, row: u32, len: u32 },
    /// Block `.0`.
    Block(u32, &'a Block),
}

/// A record's deps: a row's slice, or a block record's two.
pub(in crate::replay) enum DepList<'a> {
    Row(&'a [u32]),
    Pair([u32; 2]),
}

impl std::ops::Deref for DepList<'_> {
    type Target = [u32];
    fn deref(&self) -> &[u32] {
        match self {
            DepList::Row(s) => s,
            DepList::Pair(p) => p,
        }
    }
}

impl RecordTable {
    /// An empty table.
    pub fn new() -> RecordTable {
        RecordTable {
            dep_off: vec![0],
            ..RecordTable::default()
        }
    }

    /// An empty table that keeps every record as an explicit row, never in a ring block:
    /// the reference the blocks are tested against.
    pub fn new_explicit() -> RecordTable {
        RecordTable {
            explicit_only: true,
            ..RecordTable::new()
        }
    }

    /// The table of `records` (what [`crate::replay::simulate`] replays).
    pub fn from_records(records: &[FlowRecord]) -> Result<RecordTable, ReplayError> {
        RecordTable::new().with_records(records)
    }

    /// `self` with `records` pushed and finished.
    pub fn with_records(mut self, records: &[FlowRecord]) -> Result<RecordTable, ReplayError> {
        for r in records {
            self.push(r)?;
        }
        self.finish();
        Ok(self)
    }

    /// Append one record. Its deps are resolved to positions when their ids are already
    /// in the table, else by [`RecordTable::finish`]. An error only when the table is
    /// full (positions and dep offsets are `u32`).
    pub fn push(&mut self, r: &FlowRecord) -> Result<(), ReplayError> {
        let n = self.len;
        // a block record may become an explicit row of two deps when its block ends
        let held = (n - self.src.len()) as u64;
        let deps_after = self.deps.len() as u64 + r.deps.len() as u64 + 2 * held;
        if n as u64 >= UNRESOLVED as u64 - 1 || deps_after >= u32::MAX as u64 {
            return Err(ReplayError::TooLarge(n));
        }
        self.index_id(r.id.0, n as u32);
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        scratch.extend(
            r.deps
                .iter()
                .map(|d| self.position(d.0).unwrap_or(UNRESOLVED)),
        );
        let p = n as u32;
        let ring_like = !self.explicit_only
            && r.mode == Mode::Net
            && r.gap.0 == 0
            && r.dur.0 == 0
            && r.agg.is_none()
            && scratch.len() == 2
            && scratch.iter().all(|&d| d < p);
        if !(ring_like && self.take(p, r, [scratch[0], scratch[1]])) {
            self.settle();
            self.push_record(r, &scratch);
        }
        self.scratch = scratch;
        self.len += 1;
        Ok(())
    }

    /// Record `r` as an explicit row, its deps at `deps` (positions, [`UNRESOLVED`] for
    /// ids not seen yet).
    fn push_record(&mut self, r: &FlowRecord, deps: &[u32]) {
        let f = Fields {
            src: r.src,
            dst: r.dst,
            bytes: r.bytes.0,
            gap: r.gap.0,
            dur: r.dur.0,
            mode: r.mode,
            class: r.class,
            channel: r.channel,
        };
        self.push_row(f, r.agg, deps, &r.deps);
    }

    /// Append an explicit row; `ids` names the deps for those [`UNRESOLVED`] (empty when
    /// every dep is resolved).
    fn push_row(&mut self, f: Fields, agg: Option<AggTag>, deps: &[u32], ids: &[FlowId]) {
        let row = self.src.len();
        for (k, &d) in deps.iter().enumerate() {
            if d == UNRESOLVED {
                self.unresolved.push((self.deps.len() as u32, ids[k].0));
            }
            self.deps.push(d);
        }
        self.dep_off.push(self.deps.len() as u32);
        self.src.push(f.src);
        self.dst.push(f.dst);
        self.bytes.push(f.bytes);
        self.gap.push(f.gap);
        self.dur.push(f.dur);
        self.mode.push(f.mode);
        self.class.push(f.class);
        self.channel.push(f.channel);
        match agg {
            Some(tag) => {
                if self.tag_of.len() < row {
                    self.tag_of.resize(row, NO_TAG);
                }
                self.tag_of.push(self.tags.len() as u32);
                self.tags.push(tag);
            }
            None if !self.tag_of.is_empty() => self.tag_of.push(NO_TAG),
            None => {}
        }
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
            (id < self.len as u64).then_some(id as u32)
        } else {
            self.map.get(&id).copied()
        }
    }

    /// Resolve the deps that named records pushed after them; those naming no record stay
    /// [`UNRESOLVED`] (the replayer reports them). The id map is freed, and the blocks
    /// indexed for [`RecordTable::locate`].
    pub fn finish(&mut self) {
        self.settle();
        let pending = std::mem::take(&mut self.unresolved);
        for (slot, id) in pending {
            match self.position(id) {
                Some(p) => self.deps[slot as usize] = p,
                None => self.unresolved.push((slot, id)),
            }
        }
        if !self.tag_of.is_empty() && self.tag_of.len() < self.src.len() {
            self.tag_of.resize(self.src.len(), NO_TAG);
        }
        self.map = HashMap::new();
        self.scratch = Vec::new();
        self.index_blocks();
    }

    /// For each chunk of positions, the first block that ends after its start.
    fn index_blocks(&mut self) {
        let chunks = (self.len >> CHUNK_SHIFT) + 1;
        let mut chunk = Vec::with_capacity(chunks);
        let mut b = 0;
        for c in 0..chunks {
            let start = c << CHUNK_SHIFT;
            while b < self.blocks.len() && self.blocks[b].hi as usize <= start {
                b += 1;
            }
            chunk.push(b as u32);
        }
        self.chunk = chunk;
    }

    /// Where the record at position `p` is held.
    #[inline]
    pub(in crate::replay) fn locate(&self, p: usize) -> Loc {
        if self.blocks.is_empty() {
            return Loc::Row(p as u32);
        }
        let c = p >> CHUNK_SHIFT;
        let all = self.blocks.len();
        let (from, to) = match (self.chunk.get(c), self.chunk.get(c + 1)) {
            (Some(&a), Some(&z)) => (a as usize, (z as usize + 1).min(all)),
            (Some(&a), None) => (a as usize, all),
            _ => (0, all),
        };
        let b = from + self.blocks[from..to].partition_point(|x| x.hi as usize <= p);
        match self.blocks.get(b) {
            Some(x) if x.lo as usize <= p => {
                let j = p as u32 - x.lo;
                Loc::Block {
                    b: b as u32,
                    k: j / x.n + 1,
                    col: j % x.n,
                }
            }
            Some(x) => Loc::Row(p as u32 - x.before),
            None => Loc::Row(p as u32 - self.held()),
        }
    }

    /// Records held in blocks.
    fn held(&self) -> u32 {
        self.blocks.last().map_or(0, |x| x.before + (x.hi - x.lo))
    }

    /// The ring blocks, in position order.
    pub(in crate::replay) fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// Explicit rows (records not held in ring blocks; while records are still pushed,
    /// the last few, which may yet join a block, are not counted).
    pub fn rows(&self) -> usize {
        self.src.len()
    }

    /// The positions in order, as runs of explicit rows and blocks.
    pub(in crate::replay) fn segments(&self) -> Vec<Segment<'_>> {
        let mut out = Vec::with_capacity(2 * self.blocks.len() + 1);
        let (mut pos, mut row) = (0u32, 0u32);
        for (b, x) in self.blocks.iter().enumerate() {
            if x.lo > pos {
                out.push(Segment::Rows {
                    pos,
                    row,
                    len: x.lo - pos,
                });
                row += x.lo - pos;
            }
            out.push(Segment::Block(b as u32, x));
            pos = x.hi;
        }
        if self.len as u32 > pos {
            out.push(Segment::Rows {
                pos,
                row,
                len: self.len as u32 - pos,
            });
        }
        out
    }

    /// Back the columns the event loop reads at random with huge pages now (see `huge`):
    /// the kernel copies them into 2 MiB pages (≈ 2 s for the 17.7 M rows of a
    /// 32,768-GPU ring trace; a few hundred ms now that ring blocks hold 94 % of them).
    /// Contents never change.
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
        self.len
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Records held in ring blocks (the rest are explicit rows).
    pub fn in_blocks(&self) -> usize {
        self.held() as usize
    }

    /// The first id that appears twice.
    pub(in crate::replay) fn duplicate(&self) -> Option<FlowId> {
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

    /// The fields of record `i` the replay reads.
    #[inline]
    pub(in crate::replay) fn fields(&self, i: usize) -> Fields {
        match self.locate(i) {
            Loc::Row(r) => self.row_fields(r),
            Loc::Block { b, k, col } => self.block_fields(b, k, col),
        }
    }

    /// The fields of explicit row `r`.
    #[inline]
    pub(in crate::replay) fn row_fields(&self, r: u32) -> Fields {
        let r = r as usize;
        Fields {
            src: self.src[r],
            dst: self.dst[r],
            bytes: self.bytes[r],
            gap: self.gap[r],
            dur: self.dur[r],
            mode: self.mode[r],
            class: self.class[r],
            channel: self.channel[r],
        }
    }

    /// The fields of record (k, col) of block `b`.
    #[inline]
    pub(in crate::replay) fn block_fields(&self, b: u32, k: u32, col: u32) -> Fields {
        self.blocks[b as usize].fields(k, col)
    }

    /// Sender.
    pub fn src(&self, i: usize) -> NodeId {
        self.fields(i).src
    }
    /// Receiver.
    pub fn dst(&self, i: usize) -> NodeId {
        self.fields(i).dst
    }
    /// Payload bytes.
    pub fn bytes(&self, i: usize) -> Bytes {
        Bytes(self.fields(i).bytes)
    }
    /// Gap, ns.
    pub fn gap(&self, i: usize) -> u64 {
        self.fields(i).gap
    }
    /// Duration, ns.
    pub fn dur(&self, i: usize) -> u64 {
        self.fields(i).dur
    }
    /// Mode.
    pub fn mode(&self, i: usize) -> Mode {
        self.fields(i).mode
    }
    /// Class.
    pub fn class(&self, i: usize) -> Class {
        self.fields(i).class
    }
    /// NCCL channel.
    pub fn channel(&self, i: usize) -> u32 {
        self.fields(i).channel
    }
    /// Aggregation tag.
    pub fn agg(&self, i: usize) -> Option<AggTag> {
        match self.locate(i) {
            Loc::Row(r) => self.row_agg(r),
            Loc::Block { .. } => None,
        }
    }
    /// Aggregation tag of explicit row `r`.
    pub(in crate::replay) fn row_agg(&self, r: u32) -> Option<AggTag> {
        match self.tag_of.get(r as usize) {
            Some(&t) if t != NO_TAG => Some(self.tags[t as usize]),
            _ => None,
        }
    }
    /// Mode of explicit row `r`.
    pub(in crate::replay) fn row_mode(&self, r: u32) -> Mode {
        self.mode[r as usize]
    }
    /// True when some record carries an aggregation tag.
    pub(in crate::replay) fn has_tags(&self) -> bool {
        !self.tags.is_empty()
    }
    /// Dep positions of record `i` ([`UNRESOLVED`] for a dangling dep).
    pub(in crate::replay) fn deps_of(&self, i: usize) -> DepList<'_> {
        match self.locate(i) {
            Loc::Row(r) => DepList::Row(self.row_deps(r)),
            Loc::Block { b, k, col } => DepList::Pair(self.blocks[b as usize].deps(k, col)),
        }
    }
    /// Dep positions of explicit row `r`.
    pub(in crate::replay) fn row_deps(&self, r: u32) -> &[u32] {
        let r = r as usize;
        &self.deps[self.dep_off[r] as usize..self.dep_off[r + 1] as usize]
    }
    /// The id a dangling dep slot of record `i` named (`k`-th dep).
    pub(in crate::replay) fn dangling_id(&self, i: usize, k: usize) -> FlowId {
        let Loc::Row(r) = self.locate(i) else {
            return FlowId(u64::MAX);
        };
        let slot = self.dep_off[r as usize] + k as u32;
        let at = self.unresolved.partition_point(|&(s, _)| s < slot);
        FlowId(self.unresolved.get(at).map_or(u64::MAX, |u| u.1))
    }

    /// The `fct.csv` row of record `i` ([`FctRow::of_record`] of the fields a row holds;
    /// the rest — timing, channel, INA tag — are not looked up for each of the rows).
    pub fn row(&self, i: usize, start_ns: u64, end_ns: u64, standalone_ns: u64) -> FctRow {
        let f = self.fields(i);
        let r = FlowRecord {
            id: self.id(i),
            src: f.src,
            dst: f.dst,
            bytes: Bytes(f.bytes),
            mode: f.mode,
            class: f.class,
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
        RecordTable::src(self, i)
    }
    fn mode(&self, i: usize) -> Mode {
        RecordTable::mode(self, i)
    }
    fn class(&self, i: usize) -> Class {
        RecordTable::class(self, i)
    }
    fn gap(&self, i: usize) -> u64 {
        RecordTable::gap(self, i)
    }
    fn dur(&self, i: usize) -> u64 {
        RecordTable::dur(self, i)
    }
    fn bytes(&self, i: usize) -> u64 {
        RecordTable::bytes(self, i).0
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

impl RecordTable {
    /// Take ring-like record `r` (deps `d`) at position `p` into the open block, the
    /// candidate row, or a new candidate row; false when it must be an explicit row.
    fn take(&mut self, p: u32, r: &FlowRecord, d: [u32; 2]) -> bool {
        if self.open {
            if self.block_takes(p, r, d) {
                return true;
            }
            self.close_block();
        }
        if let Some(c) = self.cand.as_deref() {
            if c.closes(d) {
                self.establish();
                if self.block_takes(p, r, d) {
                    return true;
                }
                self.close_block();
            } else if c.continues(r, d) {
                if let Some(c) = self.cand.as_deref_mut() {
                    c.add(r, d);
                }
                return true;
            } else {
                self.flush_candidate();
            }
        }
        self.cand = Some(Box::new(Candidate::new(p, r, d)));
        true
    }

    /// Whether the open block's next record is `r` with deps `d`; if so it is taken.
    fn block_takes(&mut self, p: u32, r: &FlowRecord, d: [u32; 2]) -> bool {
        let Some(x) = self.blocks.last_mut() else {
            return false;
        };
        let j = p - x.lo;
        let (k, i) = (j / x.n + 1, j % x.n);
        let ok = p == x.hi
            && d == x.deps(k, i)
            && r.src == x.src[i as usize]
            && r.dst == x.dst[i as usize]
            && r.bytes.0 == x.bytes_at(k, i)
            && r.class == x.class
            && r.channel == x.channel;
        if ok {
            x.hi = p + 1;
        }
        ok
    }

    /// The candidate row becomes an open block of one row.
    fn establish(&mut self) {
        let Some(c) = self.cand.take() else { return };
        let n = c.a.len() as u32;
        let mut bytes = vec![0; n as usize];
        for (i, &b) in c.bytes.iter().enumerate() {
            bytes[(i + n as usize - 1) % n as usize] = b;
        }
        let before = self.blocks.last().map_or(0, |x| x.before + (x.hi - x.lo));
        self.blocks.push(Block {
            lo: c.lo,
            hi: c.lo + n,
            n,
            before,
            first: c.a,
            src: c.src,
            dst: c.dst,
            bytes,
            class: c.class,
            channel: c.channel,
        });
        self.open = true;
    }

    /// End the open block: a partial last row, or the whole block when it is shorter than
    /// [`MIN_BLOCK`], becomes explicit rows.
    fn close_block(&mut self) {
        if !std::mem::take(&mut self.open) {
            return;
        }
        let Some(mut x) = self.blocks.pop() else {
            return;
        };
        let full = x.lo + x.rows() * x.n;
        let keep = full - x.lo >= MIN_BLOCK;
        let from = if keep { full } else { x.lo };
        for p in from..x.hi {
            let j = p - x.lo;
            let (k, i) = (j / x.n + 1, j % x.n);
            self.push_row(x.fields(k, i), None, &x.deps(k, i), &[]);
        }
        if keep {
            x.hi = full;
            self.blocks.push(x);
        }
    }

    /// The candidate row's records become explicit rows.
    fn flush_candidate(&mut self) {
        let Some(c) = self.cand.take() else { return };
        for i in 0..c.a.len() {
            let f = Fields {
                src: c.src[i],
                dst: c.dst[i],
                bytes: c.bytes[i],
                gap: 0,
                dur: 0,
                mode: Mode::Net,
                class: c.class,
                channel: c.channel,
            };
            self.push_row(f, None, &[c.a[i], c.b[i]], &[]);
        }
    }

    /// Every record pushed so far is final: the open block ends, the candidate row
    /// becomes rows.
    fn settle(&mut self) {
        self.close_block();
        self.flush_candidate();
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

    /// A ring all-reduce over `n` members (nodes `10 + i`) after one compute record per
    /// member, as `Lowering::ring_schedule` writes it: ids from `base`, chunk `c` of
    /// `1000 + c` bytes, then one record waiting for the last step of member 0.
    fn ring(base: u64, n: u64, steps: u64) -> Vec<FlowRecord> {
        let mut out: Vec<FlowRecord> = (0..n)
            .map(|i| FlowRecord {
                src: NodeId(10 + i as u32),
                dst: NodeId(10 + i as u32),
                dur: crate::units::Nanos(5),
                ..rec(base + i, &[])
            })
            .collect();
        let mut prev: Vec<u64> = (base..base + n).collect();
        let mut id = base + n;
        for k in 0..steps {
            let mut cur = Vec::new();
            for i in 0..n {
                let deps = if k == 0 {
                    vec![prev[i as usize]]
                } else {
                    vec![prev[i as usize], prev[((i + n - 1) % n) as usize]]
                };
                out.push(FlowRecord {
                    src: NodeId(10 + i as u32),
                    dst: NodeId(10 + ((i + 1) % n) as u32),
                    bytes: Bytes(1000 + (i + 2 * n - k % n) % n),
                    mode: Mode::Net,
                    class: Class::Dp,
                    channel: 1,
                    ..rec(id, &deps)
                });
                cur.push(id);
                id += 1;
            }
            prev = cur;
        }
        out.push(rec(id, &[prev[0], prev[n as usize - 1]]));
        out
    }

    /// Every field of every record, as the table gives it back.
    fn fields(t: &RecordTable) -> Vec<(FlowId, Fields, Option<AggTag>, Vec<u32>)> {
        (0..t.len())
            .map(|i| (t.id(i), t.fields(i), t.agg(i), t.deps_of(i).to_vec()))
            .collect()
    }

    #[test]
    fn dense_ids_are_positions_and_deps_resolve_backwards_and_forwards() {
        let recs = [rec(0, &[2]), rec(1, &[0]), rec(2, &[1, 0])];
        let t = RecordTable::from_records(&recs).unwrap();
        assert_eq!(&*t.deps_of(0), &[2]);
        assert_eq!(&*t.deps_of(1), &[0]);
        assert_eq!(&*t.deps_of(2), &[1, 0]);
        assert_eq!(t.id(2), FlowId(2));
        assert!(t.ids.is_empty(), "dense ids need no id column");
    }

    #[test]
    fn sparse_ids_are_mapped_and_a_missing_dep_stays_dangling_with_its_id() {
        let recs = [rec(10, &[]), rec(7, &[10, 99]), rec(3, &[7])];
        let t = RecordTable::from_records(&recs).unwrap();
        assert_eq!(t.id(0), FlowId(10));
        assert_eq!(t.id(1), FlowId(7));
        assert_eq!(&*t.deps_of(1), &[0, UNRESOLVED]);
        assert_eq!(t.dangling_id(1, 1), FlowId(99));
        assert_eq!(&*t.deps_of(2), &[1]);
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

    #[test]
    fn a_ring_s_steps_after_the_first_are_held_as_a_block_and_read_back_exactly() {
        // two rings back to back: 8 members × 14 steps, then 12 × 22
        let mut recs = ring(0, 8, 14);
        let next = recs.len() as u64;
        recs.extend(ring(next, 12, 22));
        let t = RecordTable::from_records(&recs).unwrap();
        let x = RecordTable::new_explicit().with_records(&recs).unwrap();
        assert_eq!(x.in_blocks(), 0);
        assert_eq!(t.blocks().len(), 2);
        assert_eq!(t.in_blocks(), 8 * 13 + 12 * 21, "steps 1.. of both rings");
        assert_eq!(t.rows(), recs.len() - t.in_blocks());
        assert_eq!(fields(&t), fields(&x));
        for (i, r) in recs.iter().enumerate() {
            assert_eq!(t.row(i, 1, 2, 3), x.row(i, 1, 2, 3));
            assert_eq!(t.bytes(i), r.bytes, "record {i}");
        }
    }

    #[test]
    fn a_record_that_breaks_the_pattern_ends_the_block_and_stays_a_row() {
        let mut recs = ring(0, 8, 14);
        // step 9 of member 3 carries another size: steps 1..8 stay a block (64 records),
        // the rest of the ring is explicit
        let at = 8 + 9 * 8 + 3;
        recs[at].bytes = Bytes(1);
        let t = RecordTable::from_records(&recs).unwrap();
        let x = RecordTable::new_explicit().with_records(&recs).unwrap();
        assert_eq!(t.blocks().len(), 1);
        assert_eq!(t.in_blocks(), 64);
        assert_eq!(fields(&t), fields(&x));
    }

    #[test]
    fn short_rings_and_lookalikes_stay_rows() {
        // 4 members × 6 steps: 20 records past the first step, under the minimum block
        let recs = ring(0, 4, 6);
        let t = RecordTable::from_records(&recs).unwrap();
        assert_eq!(t.in_blocks(), 0);
        // a chain of two-dep records that never closes into a ring
        let mut chain = vec![rec(0, &[]), rec(1, &[])];
        for i in 2..200 {
            chain.push(FlowRecord {
                mode: Mode::Net,
                ..rec(i, &[i - 1, i - 2])
            });
        }
        let t = RecordTable::from_records(&chain).unwrap();
        let x = RecordTable::new_explicit().with_records(&chain).unwrap();
        assert_eq!(t.in_blocks(), 0);
        assert_eq!(fields(&t), fields(&x));
    }

    #[test]
    fn positions_are_located_in_blocks_and_rows_across_chunks() {
        // enough rings that blocks cross several index chunks
        let mut recs = Vec::new();
        for _ in 0..40 {
            let next = recs.len() as u64;
            recs.extend(ring(next, 16, 30));
        }
        let t = RecordTable::from_records(&recs).unwrap();
        let x = RecordTable::new_explicit().with_records(&recs).unwrap();
        assert!(t.len() > 3 << CHUNK_SHIFT);
        assert_eq!(t.blocks().len(), 40);
        assert_eq!(fields(&t), fields(&x));
        let mut pos = 0;
        for s in t.segments() {
            match s {
                Segment::Rows { pos: p, row, len } => {
                    assert_eq!(p, pos);
                    assert_eq!(t.locate(p as usize), Loc::Row(row));
                    pos += len;
                }
                Segment::Block(b, blk) => {
                    assert_eq!(blk.lo, pos);
                    assert_eq!(t.locate(pos as usize), Loc::Block { b, k: 1, col: 0 });
                    pos = blk.hi;
                }
            }
        }
        assert_eq!(pos as usize, t.len());
    }
}
