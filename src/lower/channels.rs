//! NCCL channels (docs/model.md#nccl-channels): NCCL runs each collective over several
//! channels in parallel, each an independent ring (or tree) over its slice of the buffer
//! with its own connections — its own queue pairs, so the fabric's ECMP hashes every
//! channel of a GPU pair separately. A network collective is lowered once per channel on
//! `S/C` bytes, and its `net` transfers carry the channel, which both back-ends (and the
//! planner's pricer) fold into the ECMP key ([`crate::topology::connection_key`]).

use super::{Chain, Lowering, Sink};
use crate::topology::{LinkKind, Topology};
use crate::units::{Bytes, Rank};

/// NCCL's channel count for a topology: 2 per NIC port of a GPU. NCCL's ring search
/// (`src/graph/search.cc`) finds the rings that fill each GPU's NICs — one ring channel
/// per NIC when a NIC is no faster than a ring — and `ncclTopoPostset`
/// (`src/graph/connect.cc`) then doubles the channels it found; a one-GPU-per-node job on
/// one NIC logs "2 coll channels". The faster-NIC and Hopper doublings of the search are
/// not modelled (docs/model.md#known-gaps).
pub fn default_channels(topo: &Topology) -> u32 {
    let Some(g0) = (topo.kinds.iter()).position(|k| *k == crate::topology::NodeKind::Host) else {
        return 2;
    };
    let ports = topo
        .links
        .iter()
        .filter(|l| l.kind == LinkKind::Nic && (l.a.idx() == g0 || l.b.idx() == g0))
        .count() as u32;
    2 * ports.max(1)
}

/// Slice `c` of `bytes` split over `n` channels (the first `bytes mod n` get a byte more).
pub fn slice(bytes: Bytes, n: u32, c: u32) -> Bytes {
    let n = n as u64;
    Bytes(bytes.0 / n + u64::from((c as u64) < bytes.0 % n))
}

impl Lowering<'_> {
    /// How many channels a network collective of `bytes` uses: the configured count, but
    /// never more channels than bytes.
    pub fn channels_for(&self, bytes: Bytes) -> u32 {
        self.channels
            .min(bytes.0.min(u32::MAX as u64) as u32)
            .max(1)
    }

    /// Run `f` once per channel on that channel's slice of `bytes`, every channel starting
    /// from the members' chains as they are now (pending compute made a record first) and
    /// the members continuing after every channel's last transfers.
    pub(super) fn over_channels<S: Sink>(
        &mut self,
        sink: &mut S,
        members: &[Rank],
        channels: u32,
        bytes: Bytes,
        mut f: impl FnMut(&mut Self, &mut S, Bytes) -> Result<(), S::Error>,
    ) -> Result<(), S::Error> {
        let starts = sink.flushed_tails(members)?;
        let mut ends: Vec<Vec<S::Id>> = vec![Vec::new(); members.len()];
        let share = std::mem::replace(&mut self.nvlink_share, channels);
        for c in 0..channels {
            self.channel = c;
            for (i, &r) in members.iter().enumerate() {
                *sink.chain(r) = Chain {
                    tail: starts[i].clone(),
                    pending: Default::default(),
                };
            }
            let res = f(self, sink, slice(bytes, channels, c));
            if let Err(e) = res {
                self.channel = 0;
                self.nvlink_share = share;
                return Err(e);
            }
            for (i, &r) in members.iter().enumerate() {
                ends[i].append(&mut sink.chain(r).tail);
            }
        }
        self.channel = 0;
        self.nvlink_share = share;
        for (i, &r) in members.iter().enumerate() {
            let mut t = std::mem::take(&mut ends[i]);
            t.sort_unstable();
            t.dedup();
            sink.chain(r).tail = t;
        }
        Ok(())
    }
}
