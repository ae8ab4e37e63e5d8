//! Swing all-reduce (De Sensi et al., "Swing: Short-cutting Rings for Higher Bandwidth
//! Allreduce", NSDI'24), bandwidth-optimal form: a reduce-scatter then an all-gather over
//! the same peers (docs/model.md#swing).
//!
//! **Peers.** At step `s = 0 … L−1` (`L = ⌈log₂ p⌉`) rank `r` pairs with
//! `π(r, s) = r + ρ(s) mod p` if r is even and `r − ρ(s) mod p` if odd, where
//! `ρ(s) = Σᵢ₌₀ˢ (−2)ⁱ = 1, −1, 3, −5, 11, …`. For even p the pairing is symmetric
//! (ρ is odd, so an even rank's peer is odd and pairs back).
//!
//! **Blocks.** S is cut into p blocks (the first `S mod p` one byte larger). In the
//! reduce-scatter, step s sends the peer the blocks whose reduction the peer's side of the
//! remaining steps is responsible for; the all-gather runs the steps in reverse order and
//! sends back exactly what the reduce-scatter step received. The sets come from the
//! all-gather view: running the steps `L−1 … 0`, each rank hands its peer every block it
//! holds that the peer lacks, starting from its own. For a power of two that is half of
//! the remaining blocks per step (`p/2^(s+1)` blocks at reduce-scatter step s), exactly
//! the paper's schedule. For an even p that is not a power of two a block can reach a
//! rank by two routes; handing over only what the peer lacks sends every block to every
//! rank once, so each rank still moves `(p−1)/p · S` per phase — the paper's
//! bandwidth-optimal volume — though which route a block takes may differ from the
//! authors' implementation (libswing picks by the negabinary form of the distance).
//!
//! **Odd p.** The parity rule needs an even count, so the last rank first sends its whole
//! vector to rank p−2 (which reduces it), the other p−1 run Swing, and rank p−2 sends the
//! result back: the standard fold for non-power-of-two counts the authors use for their
//! latency-optimal variant, one extra step of S each way.

use super::{LowerError, Lowering, Sink};
use crate::units::{Bytes, Nanos, Rank};

/// `ρ(s) = Σᵢ₌₀ˢ (−2)ⁱ`.
pub fn rho(s: u32) -> i64 {
    (0..=s).map(|i| (-2i64).pow(i)).sum()
}

/// Swing's peer of rank `r` at step `s` among `p` ranks (even p for a symmetric pairing).
pub fn peer(r: usize, s: u32, p: usize) -> usize {
    let d = if r.is_multiple_of(2) { rho(s) } else { -rho(s) };
    (r as i64 + d).rem_euclid(p as i64) as usize
}

/// One step of a Swing phase: per rank, its peer and the blocks it sends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// `peer[r]`: whom rank r exchanges with.
    pub peer: Vec<usize>,
    /// `blocks[r]`: the block indices rank r sends, ascending.
    pub blocks: Vec<Vec<usize>>,
}

/// The bandwidth-optimal Swing all-reduce of an even number `p ≥ 2` of ranks: the
/// reduce-scatter steps (`0 … L−1`) then the all-gather steps (`L−1 … 0`). `None` if the
/// all-gather view leaves some rank without some block (never for even p up to 2¹⁶,
/// checked by the tests).
pub fn schedule(p: usize) -> Option<(Vec<Step>, Vec<Step>)> {
    if p < 2 || !p.is_multiple_of(2) {
        return None;
    }
    let steps = p.next_power_of_two().trailing_zeros();
    // All-gather view: holds[r] = blocks rank r has, as a bitset.
    let words = p.div_ceil(64);
    let mut holds = vec![vec![0u64; words]; p];
    for (r, h) in holds.iter_mut().enumerate() {
        h[r / 64] |= 1 << (r % 64);
    }
    let mut ag = Vec::with_capacity(steps as usize);
    for s in (0..steps).rev() {
        let peers: Vec<usize> = (0..p).map(|r| peer(r, s, p)).collect();
        let mut blocks = Vec::with_capacity(p);
        for r in 0..p {
            let q = peers[r];
            let send: Vec<usize> = (0..p)
                .filter(|&b| holds[r][b / 64] >> (b % 64) & 1 == 1)
                .filter(|&b| holds[q][b / 64] >> (b % 64) & 1 == 0)
                .collect();
            blocks.push(send);
        }
        for r in 0..p {
            let q = peers[r];
            for &b in &blocks[q] {
                holds[r][b / 64] |= 1 << (b % 64);
            }
        }
        ag.push(Step {
            peer: peers,
            blocks,
        });
    }
    let full = holds
        .iter()
        .all(|h| (0..p).all(|b| h[b / 64] >> (b % 64) & 1 == 1));
    if !full {
        return None;
    }
    // The reduce-scatter mirrors the all-gather: at step s rank r sends the peer what the
    // peer sends r at all-gather step s.
    let rs = ag
        .iter()
        .rev()
        .map(|st| Step {
            peer: st.peer.clone(),
            blocks: (0..p).map(|r| st.blocks[st.peer[r]].clone()).collect(),
        })
        .collect();
    Some((rs, ag))
}

impl Lowering<'_> {
    /// Swing all-reduce over `members` (their order gives the ranks): an even count runs
    /// [`schedule`]; an odd one folds its last member into the one before first. One
    /// member moves nothing.
    pub(super) fn swing<S: Sink>(
        &self,
        sink: &mut S,
        bytes: Bytes,
        members: &[Rank],
        coll: u64,
    ) -> Result<(), S::Error> {
        let n = members.len();
        if n < 2 {
            return Ok(());
        }
        let (core, extra) = if n % 2 == 1 {
            (&members[..n - 1], Some(members[n - 1]))
        } else {
            (members, None)
        };
        let p = core.len();
        let (rs, ag) = schedule(p).ok_or(LowerError::NoSwingSchedule(p))?;
        let mut step_no = 0u32;
        // Odd count: the extra member's whole vector to the member before it.
        let mut fold_in: Option<S::Id> = None;
        if let Some(x) = extra {
            let (deps, gap) = sink.start(x)?;
            let to = core[p - 1];
            let id = self.p2p(sink, x, to, bytes, deps, gap, Some(coll), Some(step_no))?;
            fold_in = Some(id);
            step_no += 1;
        }
        let block =
            |b: usize| Bytes(bytes.0 / p as u64 + u64::from((b as u64) < bytes.0 % p as u64));
        let mut prev: Vec<S::Id> = Vec::new();
        for (k, st) in rs.iter().chain(ag.iter()).enumerate() {
            let mut cur = Vec::with_capacity(p);
            for r in 0..p {
                let (deps, gap) = if k == 0 {
                    match (r == p - 1, fold_in) {
                        // the folded vector arrives from another rank: pending compute
                        // becomes a record first so it does not wait behind the fold
                        (true, Some(f)) => {
                            sink.flush(core[r])?;
                            let (mut deps, gap) = sink.start(core[r])?;
                            deps.push(f);
                            (deps, gap)
                        }
                        _ => sink.start(core[r])?,
                    }
                } else {
                    // own previous send, and what the previous step's peer sent here
                    let before = if k <= rs.len() {
                        &rs[k - 1]
                    } else {
                        &ag[k - 1 - rs.len()]
                    };
                    (vec![prev[r], prev[before.peer[r]]], Nanos(0))
                };
                let b: Bytes = st.blocks[r].iter().map(|&i| block(i)).sum();
                let to = core[st.peer[r]];
                cur.push(self.p2p(sink, core[r], to, b, deps, gap, Some(coll), Some(step_no))?);
            }
            prev = cur;
            step_no += 1;
        }
        let last = ag.last().expect("p ≥ 2 has a step");
        for r in 0..p {
            sink.set_tail(core[r], &[prev[r], prev[last.peer[r]]]);
        }
        if let Some(x) = extra {
            let from = core[p - 1];
            let deps = std::mem::take(&mut sink.chain(from).tail);
            let id = self.p2p(
                sink,
                from,
                x,
                bytes,
                deps,
                Nanos(0),
                Some(coll),
                Some(step_no),
            )?;
            sink.set_tail(from, &[id]);
            sink.set_tail(x, &[id]);
        }
        Ok(())
    }
}
