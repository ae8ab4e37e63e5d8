//! The channel tables and the routed paths of a trace: each connection (sender,
//! receiver, NCCL channel) routed once, checked and interned, with its delay, bottleneck
//! and switch hops (`--routing spray`: its strands).

use crate::netmodel;
use crate::record::Mode;
use crate::replay::huge;
use crate::replay::route::PathSource;
use crate::replay::table::{Loc, RecordTable, Segment};
use crate::replay::ReplayError;
use crate::topology::{Channel, Topology};
use crate::units::{FlowId, NodeId};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// "No index": a record outside any aggregation, an unassigned switch.
pub(in crate::replay) const NONE: u32 = u32::MAX;

/// Per-channel constants (channel `2l` is link `l` from `a` to `b`, `2l+1` the reverse).
pub(in crate::replay) struct Channels {
    /// Capacity in bytes per ns.
    pub cap: Vec<f64>,
    /// Rate in bits per second.
    pub rate: Vec<u64>,
    /// Propagation delay, ns.
    pub delay: Vec<u64>,
}

impl Channels {
    pub(super) fn new(topo: &Topology) -> Channels {
        let nch = topo.links.len() * 2;
        let mut ch = Channels {
            cap: huge::filled(nch, 0.0),
            rate: vec![0; nch],
            delay: vec![0; nch],
        };
        for (l, link) in topo.links.iter().enumerate() {
            for dir in 0..2 {
                let c = l * 2 + dir;
                ch.cap[c] = link.rate.0 as f64 / 8e9;
                ch.rate[c] = link.rate.0;
                ch.delay[c] = link.delay.0;
            }
        }
        ch
    }

    /// Every channel of `path` exists in `topo` and has a non-zero rate.
    pub(super) fn check(
        &self,
        topo: &Topology,
        id: FlowId,
        path: &[Channel],
    ) -> Result<(), ReplayError> {
        for c in path {
            let Some(link) = topo.links.get(c.link().idx()) else {
                return Err(ReplayError::NoRoute {
                    id,
                    src: NodeId(0),
                    dst: NodeId(0),
                    reason: format!(
                        "router returned channel {} of a link the topology lacks",
                        c.0
                    ),
                });
            };
            if link.rate.0 == 0 {
                return Err(ReplayError::ZeroCapacity {
                    id,
                    link: c.link(),
                    a: link.a,
                    b: link.b,
                });
            }
        }
        Ok(())
    }

    /// Route `src → dst` on NCCL channel `channel` (0: the connection path) for record
    /// `id`, check it, append it to `arena`: (offset, length, propagation delay, the path).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn route<R: PathSource + ?Sized>(
        &self,
        topo: &Topology,
        routing: &R,
        id: FlowId,
        src: NodeId,
        dst: NodeId,
        channel: u32,
        arena: &mut Vec<u32>,
    ) -> Result<(u32, u32, u64, Vec<Channel>), ReplayError> {
        let path =
            routing
                .channel_path(src, dst, channel)
                .map_err(|reason| ReplayError::NoRoute {
                    id,
                    src,
                    dst,
                    reason,
                })?;
        self.check(topo, id, &path)?;
        let off = arena.len() as u32;
        let mut delay = 0;
        for c in &path {
            arena.push(c.0);
            delay += self.delay[c.idx()];
        }
        Ok((off, path.len() as u32, delay, path))
    }
}

/// The distinct routed paths of a trace: path `p` is `channels[off[p]..off[p] + len[p]]`.
/// Records share a path when they share (sender, receiver, NCCL channel): the router's
/// answer depends on nothing else, so one routing and one copy serve them all.
#[derive(Default)]
pub(in crate::replay) struct Paths {
    pub off: Vec<u32>,
    pub len: Vec<u32>,
    /// Propagation delay, ns.
    pub delay: Vec<u64>,
    /// The smallest channel rate, bits per second.
    pub min_rate: Vec<u64>,
    /// The smallest channel capacity, bytes per ns (a lone transfer's own rate limit;
    /// per strand for a sprayed path: capacity over the strands crossing the channel).
    pub bottleneck: Vec<f64>,
    /// Equal strands a transfer on the path is cut into: 1, or under `--routing spray`
    /// the denominator of its even split, the path then listing each channel once per
    /// strand crossing it (the solver's multiplicity, as for an INA tree).
    pub strands: Vec<u32>,
    pub channels: Vec<u32>,
}

impl Paths {
    /// The channels of path `p`.
    pub fn of(&self, p: u32) -> &[u32] {
        let o = self.off[p as usize] as usize;
        &self.channels[o..o + self.len[p as usize] as usize]
    }
}

/// A multiplicative hash for the path keys (small integers): the default SipHash costs more
/// than the rest of a lookup, and the keys are not attacker-chosen hash-flooding material
/// beyond what the trace's length already bounds. The DCQCN model's queue pairs are keyed
/// by connection with it too (`dcqcn::State::index`).
#[derive(Default)]
pub(in crate::replay) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(v as u64);
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// The routed path of every `Net` and `Ina` record between distinct nodes (an index into
/// the interned [`Paths`]): per explicit row, and per column of each ring block (its rows
/// repeat the columns' connections); and the trace's switch bytes.
pub(in crate::replay) struct RecordPaths {
    pub(super) of: Vec<u32>,
    pub(super) blocks: Vec<Vec<u32>>,
    pub(super) paths: Paths,
    pub(super) switch_bytes: u64,
}

/// The interned paths while they are found, in order of first use.
pub(super) struct Interner<'a, R: PathSource + ?Sized> {
    pub(super) topo: &'a Topology,
    pub(super) routing: &'a R,
    pub(super) channels: &'a Channels,
    pub(super) paths: Paths,
    pub(super) keys: HashMap<(NodeId, NodeId, u32), u32, BuildHasherDefault<KeyHasher>>,
    /// Switch hops of each path (`Topology::switch_hops` of its sender and channels).
    pub(super) hops: Vec<u64>,
}

impl<R: PathSource + ?Sized> Interner<'_, R> {
    /// The path of a transfer `src → dst` on NCCL channel `channel` ([`NONE`] when it
    /// moves nothing on the network), routed for record `id` the first time.
    pub(super) fn path(
        &mut self,
        mode: Mode,
        src: NodeId,
        dst: NodeId,
        channel: u32,
        id: impl FnOnce() -> FlowId,
    ) -> Result<u32, ReplayError> {
        if !matches!(mode, Mode::Net | Mode::Ina) || src == dst {
            return Ok(NONE);
        }
        let key = (src, dst, channel);
        if let Some(&k) = self.keys.get(&key) {
            return Ok(k);
        }
        let k = self.paths.off.len() as u32;
        let id_of = id();
        let (off, len, delay, route) = self.channels.route(
            self.topo,
            self.routing,
            id_of,
            src,
            dst,
            channel,
            &mut self.paths.channels,
        )?;
        let (len, strands) = self.spray(mode, src, dst, id_of, off, len)?;
        let ps = &mut self.paths;
        ps.off.push(off);
        ps.len.push(len);
        ps.strands.push(strands);
        ps.delay.push(delay);
        ps.min_rate.push(
            route
                .iter()
                .map(|c| self.channels.rate[c.idx()])
                .min()
                .unwrap_or(0),
        );
        ps.bottleneck
            .push(netmodel::multiset_cap(&ps.channels[off as usize..], |c| {
                self.channels.cap[c as usize]
            }));
        self.hops.push(self.topo.switch_hops(src, &route));
        self.keys.insert(key, k);
        Ok(k)
    }

    /// Under `--routing spray`, replace a network transfer's routed path (at `off`, `len`
    /// channels in the arena) by its strands: each channel once per strand crossing it,
    /// ascending. The routed path stays the one its delay and switch hops are taken
    /// from (every equal-cost path of a Clos has the same length). (length, strands).
    pub(super) fn spray(
        &mut self,
        mode: Mode,
        src: NodeId,
        dst: NodeId,
        id: FlowId,
        off: u32,
        len: u32,
    ) -> Result<(u32, u32), ReplayError> {
        if mode != Mode::Net {
            return Ok((len, 1));
        }
        let split = self
            .routing
            .spray(src, dst)
            .map_err(|reason| ReplayError::NoRoute {
                id,
                src,
                dst,
                reason,
            })?;
        let Some(split) = split.filter(|s| s.strands > 1) else {
            return Ok((len, 1));
        };
        let arena = &mut self.paths.channels;
        arena.truncate(off as usize);
        for (c, n) in &split.load {
            arena.extend(std::iter::repeat_n(c.0, *n as usize));
        }
        Ok(((arena.len() - off as usize) as u32, split.strands))
    }

    /// Switch bytes of `bytes` on path `p`.
    pub(super) fn switch_bytes(&self, bytes: u64, p: u32) -> u64 {
        match p {
            NONE => 0,
            p => bytes * self.hops[p as usize],
        }
    }
}

impl RecordPaths {
    pub(super) fn route<R: PathSource + ?Sized>(
        records: &RecordTable,
        topo: &Topology,
        routing: &R,
        channels: &Channels,
    ) -> Result<RecordPaths, ReplayError> {
        let mut of = huge::filled(records.rows(), NONE);
        let mut blocks = Vec::with_capacity(records.blocks().len());
        let mut switch_bytes = 0u64;
        let mut paths = Interner {
            topo,
            routing,
            channels,
            paths: Paths::default(),
            keys: HashMap::default(),
            hops: Vec::new(),
        };
        // in position order, so paths are routed (and numbered) at their first record
        for seg in records.segments() {
            match seg {
                Segment::Rows { pos, row, len } => {
                    for j in 0..len {
                        let f = records.row_fields(row + j);
                        let id = || records.id((pos + j) as usize);
                        let p = paths.path(f.mode, f.src, f.dst, f.channel, id)?;
                        of[(row + j) as usize] = p;
                        switch_bytes += paths.switch_bytes(f.bytes, p);
                    }
                }
                Segment::Block(b, x) => {
                    let mut cols = Vec::with_capacity(x.n as usize);
                    for c in 0..x.n {
                        let f = records.block_fields(b, 1, c);
                        let id = || records.id((x.lo + c) as usize);
                        cols.push(paths.path(f.mode, f.src, f.dst, f.channel, id)?);
                    }
                    for k in 1..=x.rows() {
                        for (c, &p) in cols.iter().enumerate() {
                            switch_bytes += paths.switch_bytes(x.bytes_at(k, c as u32), p);
                        }
                    }
                    blocks.push(cols);
                }
            }
        }
        Ok(RecordPaths {
            of,
            blocks,
            paths: paths.paths,
            switch_bytes,
        })
    }

    /// The path of record `i` (an explicit row or a block record).
    pub(super) fn of_record(&self, records: &RecordTable, i: u32) -> u32 {
        match records.locate(i as usize) {
            Loc::Row(r) => self.of[r as usize],
            Loc::Block { b, col, .. } => self.blocks[b as usize][col as usize],
        }
    }
}
