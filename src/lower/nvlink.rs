//! Collectives confined to one NVLink domain: one `nvlink` record each, with an analytical
//! duration (docs/model.md#nvlink-records), instead of a record per ring step.

use super::{ring_steps, Lowering, Sink, Xfer};
use crate::record::Mode;
use crate::schedule::CollKind;
use crate::topology::Topology;
use crate::units::{Bytes, Nanos, Rank};

/// NCCL's own latency estimate for one step of a ring over NVLink with its Simple
/// protocol (the one it picks for the large buffers of training): 3.4 µs
/// (`hwLatencies[NCCL_HW_NVLINK][NCCL_ALGO_RING][NCCL_PROTO_SIMPLE]` in NCCL's
/// `src/graph/tuning.cc`, docs/model.md#nvlink-records).
pub const NCCL_NVLINK_RING_STEP: Nanos = Nanos(3_400);

/// Duration of a collective confined to one NVLink domain (the `nvlink` record's `dur`):
/// `busbw_factor · S / (nvlink_rate / share) + steps · α` (ring model, [`ring_steps`];
/// `share` channels use the NVLink at once, 1 outside channels). `None` when the topology
/// has no NVLink rate.
pub fn nvlink_collective_time(
    topo: &Topology,
    alpha: Nanos,
    kind: CollKind,
    bytes: Bytes,
    n: u32,
    share: u32,
) -> Option<Nanos> {
    let rate = topo.nvlink_rate?;
    let moved = Bytes((kind.busbw_factor(n) * bytes.0 as f64).round() as u64);
    let steps = ring_steps(kind, n as u64);
    Some(rate.transmit_time(Bytes(moved.0 * share as u64)) + Nanos(steps * alpha.0))
}

impl Lowering<'_> {
    /// The collective over `members` (all in one NVLink domain) as one `nvlink` record
    /// from the first member to the last, waiting for every member's chain. When the
    /// members' pending compute differs it becomes records first (the record's gap can
    /// hold only one).
    pub fn nvlink<S: Sink>(
        &self,
        sink: &mut S,
        kind: CollKind,
        bytes: Bytes,
        members: &[Rank],
        coll: u64,
    ) -> Result<(), S::Error> {
        let p0 = sink.chain(members[0]).pending;
        let same = members.iter().all(|r| sink.chain(*r).pending == p0);
        if !same {
            for &r in members {
                sink.flush(r)?;
            }
        }
        let mut deps = Vec::new();
        let mut gap = Nanos(0);
        for &r in members {
            let c = sink.chain(r);
            deps.append(&mut c.tail);
            gap = std::mem::take(&mut c.pending);
        }
        deps.sort_unstable();
        deps.dedup();
        let n = members.len() as u32;
        let dur = nvlink_collective_time(
            self.topo,
            self.nvlink_alpha,
            kind,
            bytes,
            n,
            self.nvlink_share,
        )
        .expect("an NVLink domain has a rate");
        let (a, b) = (
            self.topo.gpu(members[0]),
            self.topo.gpu(*members.last().expect("n>1")),
        );
        let id = sink.emit(Xfer {
            dur,
            group: Some(n),
            ..Xfer::new(Mode::NvLink, (a, b), bytes, deps, gap, Some(coll))
        })?;
        for &r in members {
            sink.set_tail(r, &[id]);
        }
        Ok(())
    }
}
