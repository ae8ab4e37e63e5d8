//! Ring attention over a CP group (docs/model.md#context-parallelism), as Transformer
//! Engine's `AttnFuncWithCPAndKVP2P` runs it. The attention core is split into CP parts,
//! one per K/V block.
//!
//! - Forward: CP−1 steps; in step `i` every member forwards the K/V block it holds to the
//!   next member while computing part `i` with it; part `i+1` waits for the block from
//!   the previous member. A send waits only for the block it forwards (compute and
//!   communication run on separate streams).
//! - Backward: CP steps towards the previous member: K/V in step 0, K/V with the
//!   accumulated dK/dV in steps 1 … CP−2, dK/dV alone in step CP−1 (2·(CP−1) blocks of
//!   K/V size in all, twice the forward). A step's send waits for the previous part's
//!   compute, which updated the dK/dV it carries.
//!
//! Ring transfers are point-to-point: one connection each (no channel split).
//!
//! The schedule itself — who sends how much to whom in which step, and the core's parts —
//! is [`RingAttention`], rank-level: [`Lowering::cp_ring`] lowers it onto the cluster for
//! the trace and the planner, and the Chakra export (`crate::interop::chakra`) writes it
//! as send and receive nodes.

use super::{Lowering, Sink};
use crate::schedule::Pass;
use crate::units::{Bytes, Nanos, Rank};

/// Ring attention of one layer's pass over a ring of `n` members, rank-level.
#[derive(Clone, Debug, PartialEq)]
pub struct RingAttention {
    /// Forward or backward.
    pub pass: Pass,
    n: usize,
    core: Nanos,
    /// Bytes every member sends in step `i`.
    sizes: Vec<Bytes>,
}

impl RingAttention {
    /// The `pass` over `n` members with attention-core compute `core` per member and K/V
    /// blocks of `kv` bytes (Transformer Engine's `AttnFuncWithCPAndKVP2P`): forward CP−1
    /// steps of one block; backward CP steps, K/V in step 0, K/V and dK/dV in steps 1 …
    /// CP−2, dK/dV alone in step CP−1.
    pub fn new(pass: Pass, n: usize, core: Nanos, kv: Bytes) -> Self {
        let sizes = match pass {
            Pass::Fwd => vec![kv; n.saturating_sub(1)],
            Pass::Bwd => (0..n)
                .map(|i| {
                    if i == 0 || i + 1 == n {
                        kv
                    } else {
                        Bytes(2 * kv.0)
                    }
                })
                .collect(),
        };
        RingAttention {
            pass,
            n,
            core,
            sizes,
        }
    }

    /// Members of the ring: also the number of core parts (one per K/V block).
    pub fn members(&self) -> usize {
        self.n
    }

    /// Offsets in the ring of the member a member sends to and the one it receives from:
    /// forward passes K/V to the next member, backward to the previous one.
    pub fn offsets(&self) -> (usize, usize) {
        match self.pass {
            Pass::Fwd => (1, self.n.saturating_sub(1)),
            Pass::Bwd => (self.n.saturating_sub(1), 1),
        }
    }

    /// The bytes every member sends in step `i`; `None` for a step without a block (the
    /// forward's last part).
    pub fn step_bytes(&self, i: usize) -> Option<Bytes> {
        self.sizes.get(i).copied()
    }

    /// Part `i` of the attention core: `core / n`, the remainder spread over the first
    /// parts.
    pub fn part(&self, i: usize) -> Nanos {
        let n = self.n as u64;
        Nanos(self.core.0 / n + u64::from((i as u64) < self.core.0 % n))
    }
}

impl Lowering<'_> {
    /// Ring attention of one layer's `pass` over `members` (in CP-rank order) with
    /// attention-core compute `core` per member.
    pub fn cp_ring<S: Sink>(
        &self,
        sink: &mut S,
        members: &[Rank],
        pass: Pass,
        core: Nanos,
        kv: Bytes,
    ) -> Result<(), S::Error> {
        let n = members.len();
        if n <= 1 {
            for &r in members {
                sink.chain(r).pending += core;
            }
            return Ok(());
        }
        let coll = sink.new_coll();
        let ring = RingAttention::new(pass, n, core, kv);
        let (to, from) = ring.offsets();
        let mut prev: Vec<Option<S::Id>> = vec![None; n];
        for i in 0..n {
            if i >= 1 {
                // Part i computes with the block received in step i−1.
                for k in 0..n {
                    sink.flush(members[k])?;
                    if let Some(f) = prev[(k + from) % n] {
                        sink.chain(members[k]).tail.push(f);
                    }
                }
            }
            if let Some(bytes) = ring.step_bytes(i) {
                let mut cur = vec![None; n];
                for k in 0..n {
                    let deps = match (pass, i) {
                        (Pass::Fwd, 1..) => [prev[(k + from) % n], prev[k]]
                            .into_iter()
                            .flatten()
                            .collect(),
                        _ => {
                            sink.flush(members[k])?;
                            sink.chain(members[k]).tail.clone()
                        }
                    };
                    let id = self.p2p(
                        sink,
                        members[k],
                        members[(k + to) % n],
                        bytes,
                        deps,
                        Nanos(0),
                        Some(coll),
                        Some(i as u32),
                    )?;
                    cur[k] = Some(id);
                }
                prev = cur;
            }
            for &r in members {
                sink.chain(r).pending += ring.part(i);
            }
        }
        // The layer goes on once the last blocks have left and arrived.
        for k in 0..n {
            sink.flush(members[k])?;
            let t = &mut sink.chain(members[k]).tail;
            t.extend(prev[k]);
            t.extend(prev[(k + from) % n]);
            t.sort_unstable();
            t.dedup();
        }
        Ok(())
    }
}
