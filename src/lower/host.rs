//! Host algorithms (docs/model.md#collectives): ring, double binary tree, recursive
//! halving-doubling and the hierarchical algorithm, each split over the NCCL channels.

use super::{Algorithm, Lowering, Note, Sink, Xfer};
use crate::record::Mode;
use crate::schedule::CollKind;
use crate::units::{Bytes, Nanos, Rank};
use std::collections::BTreeMap;

/// Steps of a ring collective over `n` ranks: `2(n−1)` for an all-reduce (reduce-scatter
/// then all-gather), `n−1` for a reduce-scatter or an all-gather — the ring's and the
/// NVLink record's latency term (`nvlink_collective_time`) alike.
pub fn ring_steps(kind: CollKind, n: u64) -> u64 {
    let n = n.max(1);
    match kind {
        CollKind::AllReduce => 2 * (n - 1),
        _ => n - 1,
    }
}

impl Lowering<'_> {
    /// Point-to-point transfer between ranks: a network flow, or an NVLink record when
    /// both share a server (its duration `S·share / nvlink_rate + α`: inside a channel the
    /// GPU's NVLink is shared by every channel's transfer).
    #[allow(clippy::too_many_arguments)]
    pub fn p2p<S: Sink>(
        &self,
        sink: &mut S,
        a: Rank,
        b: Rank,
        bytes: Bytes,
        deps: Vec<S::Id>,
        gap: Nanos,
        coll: Option<u64>,
        step: Option<u32>,
    ) -> Result<S::Id, S::Error> {
        let ends = (self.topo.gpu(a), self.topo.gpu(b));
        let mut x = Xfer {
            step,
            ..Xfer::new(Mode::Net, ends, bytes, deps, gap, coll)
        };
        if self.topo.same_nvlink_domain(a, b) {
            let rate = self.topo.nvlink_rate.expect("nvlink domain has a rate");
            x.mode = Mode::NvLink;
            x.dur =
                rate.transmit_time(Bytes(bytes.0 * self.nvlink_share as u64)) + self.nvlink_alpha;
            x.group = Some(2);
        }
        sink.emit(self.on_channel(x))
    }

    /// A collective with host algorithm `algo`, split over the NCCL channels
    /// (docs/model.md#nccl-channels): each channel runs the algorithm on its slice of S.
    pub fn host<S: Sink>(
        &mut self,
        sink: &mut S,
        algo: Algorithm,
        kind: CollKind,
        bytes: Bytes,
        members: &[Rank],
        coll: u64,
    ) -> Result<(), S::Error> {
        let c = self.channels_for(bytes);
        if c <= 1 {
            return self.host_algorithm(sink, algo, kind, bytes, members, coll);
        }
        self.over_channels(sink, members, c, bytes, |lw, sink, slice| {
            lw.host_algorithm(sink, algo, kind, slice, members, coll)
        })
    }

    /// One channel's (or the only) run of `algo` over `members`.
    fn host_algorithm<S: Sink>(
        &mut self,
        sink: &mut S,
        algo: Algorithm,
        kind: CollKind,
        bytes: Bytes,
        members: &[Rank],
        coll: u64,
    ) -> Result<(), S::Error> {
        let n = members.len();
        match algo {
            Algorithm::Ring => self.ring(sink, kind, bytes, members, coll),
            Algorithm::Dbt if kind == CollKind::AllReduce => self.dbt(sink, bytes, members, coll),
            Algorithm::Dbt => self.ring(sink, kind, bytes, members, coll),
            Algorithm::Hd if n.is_power_of_two() => self.hd(sink, kind, bytes, members, coll),
            Algorithm::Hd => {
                sink.note(Note::HdFallback);
                self.ring(sink, kind, bytes, members, coll)
            }
            Algorithm::Hierarchical => self.hierarchical(sink, kind, bytes, members, coll),
        }
    }

    /// Ring: step k of rank i sends chunk `(i − k) mod n` to `i+1` after its step k−1 and the
    /// step k−1 it received from `i−1`. Chunks split S exactly (the first `S mod n` get a byte more).
    pub fn ring<S: Sink>(
        &self,
        sink: &mut S,
        kind: CollKind,
        bytes: Bytes,
        members: &[Rank],
        coll: u64,
    ) -> Result<(), S::Error> {
        let n = members.len();
        let steps = ring_steps(kind, n as u64) as usize;
        let prev = self.ring_schedule(
            sink,
            n,
            steps,
            bytes,
            &mut |sink, i| sink.start(members[i]),
            &mut |lw, sink, i, k, b, deps, gap| {
                let (from, to) = (members[i], members[(i + 1) % n]);
                lw.p2p(sink, from, to, b, deps, gap, Some(coll), Some(k))
            },
        )?;
        for i in 0..n {
            sink.set_tail(members[i], &[prev[i], prev[(i + n - 1) % n]]);
        }
        Ok(())
    }

    /// The steps of a ring over `n` workers: in step k worker i sends chunk `(i − k) mod n`
    /// of `bytes` to worker i+1 (`send(i, k, chunk, deps, gap)`), after its own step k−1 and
    /// the step k−1 it received from worker i−1; step 0 starts from `start(i)`. Returns the
    /// last step's transfers, by worker: worker i is done once `last[i]` and `last[i−1]` are.
    #[allow(clippy::type_complexity)]
    pub(super) fn ring_schedule<S: Sink>(
        &self,
        sink: &mut S,
        n: usize,
        steps: usize,
        bytes: Bytes,
        start: &mut dyn FnMut(&mut S, usize) -> Result<(Vec<S::Id>, Nanos), S::Error>,
        send: &mut dyn FnMut(
            &Self,
            &mut S,
            usize,
            u32,
            Bytes,
            Vec<S::Id>,
            Nanos,
        ) -> Result<S::Id, S::Error>,
    ) -> Result<Vec<S::Id>, S::Error> {
        let mut prev: Vec<S::Id> = Vec::with_capacity(n);
        let mut cur: Vec<S::Id> = Vec::with_capacity(n);
        for k in 0..steps {
            cur.clear();
            for i in 0..n {
                let (deps, gap) = if k == 0 {
                    start(sink, i)?
                } else {
                    (vec![prev[i], prev[(i + n - 1) % n]], Nanos(0))
                };
                let c = (i + 2 * n - k % n) % n;
                cur.push(send(
                    self,
                    sink,
                    i,
                    k as u32,
                    super::slice(bytes, n as u32, c as u32),
                    deps,
                    gap,
                )?);
            }
            std::mem::swap(&mut prev, &mut cur);
        }
        Ok(prev)
    }

    /// Double binary tree (approximation of NCCL's): two heap-shaped binary trees, over the
    /// members in order and in reverse, each reducing half of S to its root and
    /// broadcasting it back. Whole halves move per edge (no chunk pipelining), so deep
    /// trees are slower here than in NCCL.
    fn dbt<S: Sink>(
        &self,
        sink: &mut S,
        bytes: Bytes,
        members: &[Rank],
        coll: u64,
    ) -> Result<(), S::Error> {
        let n = members.len();
        let halves = [Bytes(bytes.0 - bytes.0 / 2), Bytes(bytes.0 / 2)];
        // Interior ranks wait for their children while computing: make pending compute explicit
        // (a record) so the children's partial sums do not wait behind it.
        let mut starts: Vec<Vec<S::Id>> = Vec::with_capacity(n);
        for &r in members {
            sink.flush(r)?;
            starts.push(std::mem::take(&mut sink.chain(r).tail));
        }
        let mut tails: Vec<Vec<S::Id>> = vec![Vec::new(); n];
        for (t, half) in halves.into_iter().enumerate() {
            let at = |pos: usize| if t == 0 { pos } else { n - 1 - pos };
            let mut up: Vec<Option<S::Id>> = vec![None; n];
            for pos in (1..n).rev() {
                let mut deps = starts[at(pos)].clone();
                for ch in [2 * pos + 1, 2 * pos + 2] {
                    if ch < n {
                        deps.push(up[ch].expect("children first"));
                    }
                }
                let id = self.p2p(
                    sink,
                    members[at(pos)],
                    members[at((pos - 1) / 2)],
                    half,
                    deps,
                    Nanos(0),
                    Some(coll),
                    Some(2 * t as u32),
                )?;
                up[pos] = Some(id);
            }
            let mut down: Vec<Option<S::Id>> = vec![None; n];
            for pos in 0..n {
                for ch in [2 * pos + 1, 2 * pos + 2] {
                    if ch >= n {
                        continue;
                    }
                    let deps = if pos == 0 {
                        let mut d = starts[at(0)].clone();
                        d.extend(
                            [1, 2]
                                .iter()
                                .filter(|&&c| c < n)
                                .map(|&c| up[c].expect("up")),
                        );
                        d
                    } else {
                        vec![down[pos].expect("parent first")]
                    };
                    let id = self.p2p(
                        sink,
                        members[at(pos)],
                        members[at(ch)],
                        half,
                        deps,
                        Nanos(0),
                        Some(coll),
                        Some(2 * t as u32 + 1),
                    )?;
                    down[ch] = Some(id);
                    tails[at(pos)].push(id);
                    tails[at(ch)].push(id);
                }
            }
        }
        for (i, &r) in members.iter().enumerate() {
            sink.chain(r).tail = std::mem::take(&mut tails[i]);
        }
        Ok(())
    }

    /// Recursive halving (reduce-scatter) then doubling (all-gather): log₂ n steps each,
    /// rank i exchanging S/2^(k+1) with i XOR n/2^(k+1) in halving step k.
    fn hd<S: Sink>(
        &self,
        sink: &mut S,
        kind: CollKind,
        bytes: Bytes,
        members: &[Rank],
        coll: u64,
    ) -> Result<(), S::Error> {
        let n = members.len();
        let lg = n.trailing_zeros() as usize;
        let mut phases: Vec<(usize, Bytes)> = Vec::new(); // (distance, bytes) per step
        if kind != CollKind::AllGather {
            for k in 0..lg {
                phases.push((n >> (k + 1), Bytes(bytes.0 >> (k + 1))));
            }
        }
        if kind != CollKind::ReduceScatter {
            for k in 0..lg {
                phases.push((1 << k, Bytes(bytes.0 >> (lg - k))));
            }
        }
        let mut prev: Vec<S::Id> = Vec::new();
        for (step, &(d, b)) in phases.iter().enumerate() {
            let mut cur = Vec::with_capacity(n);
            for i in 0..n {
                let (deps, gap) = if step == 0 {
                    sink.start(members[i])?
                } else {
                    (vec![prev[i], prev[i ^ phases[step - 1].0]], Nanos(0))
                };
                cur.push(self.p2p(
                    sink,
                    members[i],
                    members[i ^ d],
                    b,
                    deps,
                    gap,
                    Some(coll),
                    Some(step as u32),
                )?);
            }
            prev = cur;
        }
        let last = phases.last().expect("n ≥ 2").0;
        for i in 0..n {
            sink.set_tail(members[i], &[prev[i], prev[i ^ last]]);
        }
        Ok(())
    }

    /// NVLink reduce-scatter per server, one network ring per local index over S/g, NVLink all-gather.
    fn hierarchical<S: Sink>(
        &self,
        sink: &mut S,
        kind: CollKind,
        bytes: Bytes,
        members: &[Rank],
        coll: u64,
    ) -> Result<(), S::Error> {
        let mut by_server: BTreeMap<u32, Vec<Rank>> = BTreeMap::new();
        for &r in members {
            by_server.entry(self.topo.server_of(r)).or_default().push(r);
        }
        let g = by_server.values().next().map_or(0, Vec::len);
        if self.topo.nvlink_rate.is_none() || g <= 1 || by_server.values().any(|v| v.len() != g) {
            // One GPU per server (or uneven): nothing to do inside servers.
            return self.ring(sink, kind, bytes, members, coll);
        }
        let servers: Vec<Vec<Rank>> = by_server.into_values().collect();
        let shard = Bytes(bytes.0 / g as u64);
        if kind != CollKind::AllGather {
            for grp in &servers {
                self.nvlink(sink, CollKind::ReduceScatter, bytes, grp, coll)?;
            }
        }
        for j in 0..g {
            let ring: Vec<Rank> = servers.iter().map(|v| v[j]).collect();
            self.ring(sink, kind, shard, &ring, coll)?;
        }
        if kind != CollKind::ReduceScatter {
            for grp in &servers {
                self.nvlink(sink, CollKind::AllGather, bytes, grp, coll)?;
            }
        }
        Ok(())
    }
}
