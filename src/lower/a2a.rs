//! All-to-all lowering (docs/model.md#all-to-all): pairwise exchange, every pair at once
//! as NCCL's grouped send/receive runs it. Member `i` sends `size(i, j)` bytes to every
//! member `j ≠ i`. Pairs inside one NVLink domain are folded into one NVLink record per
//! server (its duration the busiest member's NVLink bytes at the NVLink rate plus one
//! step latency per local peer); every other pair is a `net` transfer per NCCL channel. A
//! member continues once all its sends and receives and its server's NVLink part are done.
//! All-to-alls are never aggregated in switches.

use super::channels::slice;
use super::{Lowering, Sink, Xfer};
use crate::record::Mode;
use crate::units::{Bytes, Nanos, Rank};
use std::collections::BTreeMap;

impl Lowering<'_> {
    /// An all-to-all over `members` where member `i` sends `size(i, j)` bytes to member `j`.
    pub fn all_to_all<S: Sink>(
        &mut self,
        sink: &mut S,
        members: &[Rank],
        size: &dyn Fn(usize, usize) -> Bytes,
    ) -> Result<(), S::Error> {
        let n = members.len();
        if n <= 1 {
            return Ok(());
        }
        let coll = sink.new_coll();
        let starts = sink.flushed_tails(members)?;
        let mut done: Vec<Vec<S::Id>> = vec![Vec::new(); n];
        self.a2a_nvlink_parts(sink, members, size, &starts, &mut done, coll)?;
        self.a2a_network_pairs(sink, members, size, &starts, &mut done, coll)?;
        for (i, &r) in members.iter().enumerate() {
            let mut t = std::mem::take(&mut done[i]);
            if t.is_empty() {
                t = starts[i].clone();
            }
            t.sort_unstable();
            t.dedup();
            sink.chain(r).tail = t;
        }
        Ok(())
    }

    /// One NVLink record per server holding several members: the pairs inside it.
    fn a2a_nvlink_parts<S: Sink>(
        &self,
        sink: &mut S,
        members: &[Rank],
        size: &dyn Fn(usize, usize) -> Bytes,
        starts: &[Vec<S::Id>],
        done: &mut [Vec<S::Id>],
        coll: u64,
    ) -> Result<(), S::Error> {
        let Some(rate) = self.topo.nvlink_rate else {
            return Ok(());
        };
        let mut by_server: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (i, &r) in members.iter().enumerate() {
            by_server.entry(self.topo.server_of(r)).or_default().push(i);
        }
        for local in by_server.values().filter(|l| l.len() > 1) {
            let sent = |i: usize| -> u64 {
                local
                    .iter()
                    .filter(|&&j| j != i)
                    .map(|&j| size(i, j).0)
                    .sum()
            };
            let busiest = local.iter().map(|&i| sent(i)).max().unwrap_or(0);
            let total: u64 = local.iter().map(|&i| sent(i)).sum();
            if total == 0 {
                continue;
            }
            let mut deps: Vec<S::Id> = local.iter().flat_map(|&i| starts[i].clone()).collect();
            deps.sort_unstable();
            deps.dedup();
            let dur = rate.transmit_time(Bytes(busiest * self.nvlink_share as u64))
                + Nanos((local.len() as u64 - 1) * self.nvlink_alpha.0);
            let (a, b) = (
                self.topo.gpu(members[local[0]]),
                self.topo.gpu(members[*local.last().expect("two or more")]),
            );
            let id = sink.emit(Xfer {
                dur,
                group: Some(local.len() as u32),
                ..Xfer::new(
                    Mode::NvLink,
                    (a, b),
                    Bytes(total),
                    deps,
                    Nanos(0),
                    Some(coll),
                )
            })?;
            for &i in local {
                done[i].push(id);
            }
        }
        Ok(())
    }

    /// A `net` transfer per channel for every pair not inside one NVLink domain; step `k`
    /// names the pair's offset `(j − i) mod n`, NCCL's order of peers.
    fn a2a_network_pairs<S: Sink>(
        &self,
        sink: &mut S,
        members: &[Rank],
        size: &dyn Fn(usize, usize) -> Bytes,
        starts: &[Vec<S::Id>],
        done: &mut [Vec<S::Id>],
        coll: u64,
    ) -> Result<(), S::Error> {
        let n = members.len();
        for i in 0..n {
            for k in 1..n {
                let j = (i + k) % n;
                let b = size(i, j);
                if b.0 == 0 || self.topo.same_nvlink_domain(members[i], members[j]) {
                    continue;
                }
                let c = self.channels_for(b);
                let ends = (self.topo.gpu(members[i]), self.topo.gpu(members[j]));
                for ch in 0..c {
                    let deps = starts[i].clone();
                    let id = sink.emit(Xfer {
                        step: Some(k as u32),
                        group: Some(n as u32),
                        channel: ch,
                        ..Xfer::new(Mode::Net, ends, slice(b, c, ch), deps, Nanos(0), Some(coll))
                    })?;
                    done[i].push(id);
                    done[j].push(id);
                }
            }
        }
        Ok(())
    }
}
