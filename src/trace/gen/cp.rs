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

use super::{Gen, Stream, Tag, TraceError};
use crate::schedule::{ring_step_bytes, Pass};
use crate::units::{Bytes, FlowId, Nanos, Rank};

impl Gen<'_> {
    /// Hierarchical CP's all-to-all: an even all-to-all of `total` inside each of the CP
    /// group's all-to-all groups ([`crate::schedule::CpPlan::a2a_groups`]).
    pub(super) fn cp_inner_a2a(
        &mut self,
        members: &[Rank],
        total: Bytes,
        tag: Tag,
    ) -> Result<(), TraceError> {
        let Some(plan) = self.wl.cp.as_ref() else {
            return Ok(());
        };
        for g in plan.a2a_groups(members) {
            let n = g.len() as u32;
            if n > 1 {
                self.all_to_all(
                    &g,
                    &|_, j| super::channels::slice(total, n, j as u32),
                    Stream::Main,
                    tag,
                )?;
            }
        }
        Ok(())
    }

    /// Ring attention of one layer's `pass` over the CP group `members` (in CP-rank
    /// order): one ring, or with `a2a+p2p` one ring over each set of members the
    /// all-to-all size apart ([`crate::schedule::CpPlan::rings`]).
    pub(super) fn cp_ring(
        &mut self,
        members: &[Rank],
        pass: Pass,
        core: Nanos,
        kv: Bytes,
        tag: Tag,
    ) -> Result<(), TraceError> {
        let rings = match self.wl.cp.as_ref() {
            Some(p) => p.rings(members),
            None => vec![members.to_vec()],
        };
        for ring in rings {
            self.one_ring(&ring, pass, core, kv, tag)?;
        }
        Ok(())
    }

    /// One ring of ring attention over `members` with attention-core compute `core` per
    /// member.
    fn one_ring(
        &mut self,
        members: &[Rank],
        pass: Pass,
        core: Nanos,
        kv: Bytes,
        tag: Tag,
    ) -> Result<(), TraceError> {
        let n = members.len();
        let s = Stream::Main;
        if n <= 1 {
            for &r in members {
                self.chain(s, r).pending += core;
            }
            return Ok(());
        }
        self.stats.collectives += 1;
        let coll = self.next_coll;
        self.next_coll += 1;
        let part = |i: usize| Nanos(core.0 / n as u64 + u64::from((i as u64) < core.0 % n as u64));
        // Forward passes K/V to the next member, backward to the previous one.
        let (to, from) = match pass {
            Pass::Fwd => (1, n - 1),
            Pass::Bwd => (n - 1, 1),
        };
        let sizes = ring_step_bytes(pass, n, kv);
        let mut prev: Vec<Option<FlowId>> = vec![None; n];
        for i in 0..n {
            if i >= 1 {
                // Part i computes with the block received in step i−1.
                for k in 0..n {
                    self.flush(s, members[k], tag)?;
                    if let Some(f) = prev[(k + from) % n] {
                        self.chain(s, members[k]).tail.push(f);
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
                            self.flush(s, members[k], tag)?;
                            self.chain(s, members[k]).tail.clone()
                        }
                    };
                    let id = self.p2p(
                        members[k],
                        members[(k + to) % n],
                        bytes,
                        deps,
                        Nanos(0),
                        tag,
                        Some(coll),
                        Some(i as u32),
                    )?;
                    cur[k] = Some(id);
                }
                prev = cur;
            }
            for &r in members {
                self.chain(s, r).pending += part(i);
            }
        }
        // The layer goes on once the last blocks have left and arrived.
        for k in 0..n {
            self.flush(s, members[k], tag)?;
            let t = &mut self.chain(s, members[k]).tail;
            t.extend(prev[k]);
            t.extend(prev[(k + from) % n]);
            t.sort_unstable();
            t.dedup();
        }
        Ok(())
    }
}
