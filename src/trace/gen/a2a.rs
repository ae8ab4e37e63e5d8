//! All-to-all lowering (docs/model.md#all-to-all): pairwise exchange, every pair at once
//! as NCCL's grouped send/receive runs it. Member `i` sends `size(i, j)` bytes to every
//! member `j ≠ i`. Pairs inside one NVLink domain are folded into one NVLink record per
//! server (its duration the busiest member's NVLink bytes at the NVLink rate plus one
//! step latency per local peer); every other pair is a `net` record per NCCL channel. A
//! member continues once all its sends and receives and its server's NVLink part are done.
//! All-to-alls are never aggregated in switches.

use super::channels::slice;
use super::{Gen, Stream, Tag, TraceError};
use crate::record::Mode;
use crate::units::{Bytes, FlowId, Nanos, Rank};
use std::collections::BTreeMap;

impl Gen<'_> {
    /// An all-to-all over `members` where member `i` sends `size(i, j)` bytes to member `j`.
    pub(super) fn all_to_all(
        &mut self,
        members: &[Rank],
        size: &dyn Fn(usize, usize) -> Bytes,
        s: Stream,
        tag: Tag,
    ) -> Result<(), TraceError> {
        let n = members.len();
        if n <= 1 {
            return Ok(());
        }
        self.stats.collectives += 1;
        let coll = self.next_coll;
        self.next_coll += 1;
        for &r in members {
            self.flush(s, r, tag)?;
        }
        let starts: Vec<Vec<FlowId>> = members
            .iter()
            .map(|&r| self.chain(s, r).tail.clone())
            .collect();
        let mut done: Vec<Vec<FlowId>> = vec![Vec::new(); n];
        self.a2a_nvlink_parts(members, size, &starts, &mut done, tag, coll)?;
        self.a2a_network_pairs(members, size, &starts, &mut done, tag, coll)?;
        for (i, &r) in members.iter().enumerate() {
            let mut t = std::mem::take(&mut done[i]);
            if t.is_empty() {
                t = starts[i].clone();
            }
            t.sort_unstable();
            t.dedup();
            self.chain(s, r).tail = t;
        }
        Ok(())
    }

    /// One NVLink record per server holding several members: the pairs inside it.
    fn a2a_nvlink_parts(
        &mut self,
        members: &[Rank],
        size: &dyn Fn(usize, usize) -> Bytes,
        starts: &[Vec<FlowId>],
        done: &mut [Vec<FlowId>],
        tag: Tag,
        coll: u64,
    ) -> Result<(), TraceError> {
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
            let mut deps: Vec<FlowId> = local.iter().flat_map(|&i| starts[i].clone()).collect();
            deps.sort_unstable();
            deps.dedup();
            let dur = rate.transmit_time(Bytes(busiest * self.nvlink_share as u64))
                + Nanos((local.len() as u64 - 1) * self.nvlink_alpha.0);
            let (a, b) = (
                self.topo.gpu(members[local[0]]),
                self.topo.gpu(members[*local.last().expect("two or more")]),
            );
            let id = self.emit(
                a,
                b,
                Bytes(total),
                deps,
                Nanos(0),
                dur,
                Mode::NvLink,
                tag.class,
                tag,
                Some(coll),
                None,
                Some(local.len() as u32),
                None,
            )?;
            for &i in local {
                done[i].push(id);
            }
        }
        Ok(())
    }

    /// A `net` record per channel for every pair not inside one NVLink domain; step `k`
    /// names the pair's offset `(j − i) mod n`, NCCL's order of peers.
    fn a2a_network_pairs(
        &mut self,
        members: &[Rank],
        size: &dyn Fn(usize, usize) -> Bytes,
        starts: &[Vec<FlowId>],
        done: &mut [Vec<FlowId>],
        tag: Tag,
        coll: u64,
    ) -> Result<(), TraceError> {
        let n = members.len();
        for i in 0..n {
            for k in 1..n {
                let j = (i + k) % n;
                let b = size(i, j);
                if b.0 == 0 || self.topo.same_nvlink_domain(members[i], members[j]) {
                    continue;
                }
                let c = self.channels_for(b, &[members[i], members[j]]);
                for ch in 0..c {
                    self.channel = ch;
                    let id = self.emit(
                        self.topo.gpu(members[i]),
                        self.topo.gpu(members[j]),
                        slice(b, c, ch),
                        starts[i].clone(),
                        Nanos(0),
                        Nanos(0),
                        Mode::Net,
                        tag.class,
                        tag,
                        Some(coll),
                        Some(k as u32),
                        Some(n as u32),
                        None,
                    );
                    self.channel = 0;
                    let id = id?;
                    done[i].push(id);
                    done[j].push(id);
                }
            }
        }
        Ok(())
    }
}
