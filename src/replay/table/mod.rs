//! The trace records as the replayer keeps them: one column per field it reads, deps as
//! positions in one flat list, and the steps of ring collectives as *ring blocks*, held by
//! their pattern instead of a row each. A [`FlowRecord`] is ≈ 170 B plus a heap block for
//! its deps; an explicit row here is ≈ 42 B plus 4 B per dep, and a record of a ring block
//! takes nothing here. The columns are filled one record at a time
//! ([`RecordTable::push`]) straight from the generator or the trace reader; no
//! `Vec<FlowRecord>` is needed.
//!
//! **Ring blocks.** A ring collective over `n` members sends, in step `k`, member `i`'s
//! chunk to member `i+1` after its own step `k−1` and the step `k−1` it received from
//! `i−1` (`lower::host`, `Lowering::ring_schedule`): `2(n−1)` rows of `n` records whose
//! deps, endpoints and sizes repeat, and whose count grows with `n²` (a data-parallel ring
//! of 1,024 ranks: 2 M records per bucket). The table recognises that pattern in the
//! records as they arrive, whoever wrote them, and keeps rows `1…` of it as one [`Block`]:
//! from row 1 on, record `(k, i)` is a `net` record at position `lo + (k−1)·n + i` with
//! no gap, duration or aggregation tag, whose deps are exactly `[(k−1, i), (k−1, i−1 mod
//! n)]` (row 0 being the explicit records `first[i]`), whose sender and receiver are
//! column `i`'s, whose size is `bytes[(i − k) mod n]` (each chunk moves one member on per
//! step), and whose class and NCCL channel are the block's. Every field of every record is
//! recovered exactly from the block, so the replay is the same whichever way a record is
//! held (`tests/replay_sources.rs` replays jobs both ways and compares every output); a
//! record that breaks the pattern ends the block and is kept as an explicit row, as are
//! the rows of a block shorter than [`MIN_BLOCK`](blocks::MIN_BLOCK) records. Only what the trace says is
//! used: nothing depends on the generator having written the records.
//!
//! The fields the replayer never reads (iteration, collective, step, micro-batch, layer,
//! stage, group size) are not kept.

mod blocks;
mod columns;
mod fields;

pub use columns::RecordTable;
pub(in crate::replay) use columns::{Loc, Segment, UNRESOLVED};
