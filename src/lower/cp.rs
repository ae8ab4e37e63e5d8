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

use super::{Lowering, Sink};
use crate::schedule::{ring_step_bytes, Pass};
use crate::units::{Bytes, Nanos, Rank};

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
        let part = |i: usize| Nanos(core.0 / n as u64 + u64::from((i as u64) < core.0 % n as u64));
        // Forward passes K/V to the next member, backward to the previous one.
        let (to, from) = match pass {
            Pass::Fwd => (1, n - 1),
            Pass::Bwd => (n - 1, 1),
        };
        let sizes = ring_step_bytes(pass, n, kv);
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
            if let Some(&bytes) = sizes.get(i) {
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
                sink.chain(r).pending += part(i);
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
