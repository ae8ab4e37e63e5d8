//! Everything fixed before the first event, built in named phases: id index, aggregation
//! grouping (with endpoint and tag validation), the dependants CSR, the cycle check, the
//! channel tables, the record paths and the aggregation units.
//!
//! Every phase either succeeds or names the record, node, link or aggregation at fault
//! ([`ReplayError`]); a trace that passes all of them cannot hang the event loop.

use super::route::PathSource;
use super::{InaPolicy, ReplayError, ReplayOptions};
use crate::fct;
use crate::netmodel::{self, EdgeDir};
use crate::record::{AggDir, Class, FlowRecord, Mode};
use crate::topology::{Channel, NodeKind, Topology};
use crate::units::{Bytes, FlowId, NodeId};
use std::collections::HashMap;

/// "No index": a record outside any aggregation, an unassigned switch.
pub(super) const NONE: u32 = u32::MAX;

/// One aggregation unit: its members, its tree, its fallback ring and its run-time state.
pub(super) struct Agg {
    pub class: Class,
    pub members: Vec<u32>,
    /// Wire bytes of the stream (the largest up edge, INA packet headers).
    pub wire: f64,
    pub tree_off: u32,
    pub tree_len: u32,
    /// The unit's own rate limit: capacity over multiplicity on its tightest channel.
    pub tree_cap: f64,
    /// Dense indices of the switches that aggregate (empty: multicast only, no slots).
    pub switches: Vec<u32>,
    /// Slots its group reserves per switch (`planned` policy; 0 otherwise).
    pub reserved: u32,
    /// Slots the stream occupies on each of its switches, `w = min(window, packets)`
    /// (0 for multicast only or an empty stream).
    pub want: u32,
    /// When each aggregating switch holds the `w` slots (same order as `switches`).
    pub holds: Vec<SlotHold>,
    /// Up + down tree latency.
    pub latency: u64,
    pub rtt: u64,
    pub standalone: u64,
    /// Fallback ring flows as (arena offset, length).
    pub ring: Vec<(u32, u32)>,
    pub ring_wire: f64,
    pub ring_latency: u64,
    // run-time state
    pub pending: u32,
    pub start_at: u64,
    pub started: u64,
    pub slots: u32,
    pub outstanding: u32,
}

/// When one aggregating switch physically holds an aggregation's slots: from the arrival
/// of the stream's first packet, `acquire` ns after the unit starts (the shortest up
/// chain from a worker to the switch), until its last result packet leaves the switch,
/// `release` ns after the unit's last byte left the workers — for a switch that sends
/// results down, the longest up chain (the last packet reaching the root) plus the down
/// chain from the root to this switch; for one that only sums upwards (Rina's rack
/// reduction), the longest up chain to it (its last partial sum leaves upwards then).
#[derive(Clone, Copy, Debug)]
pub(super) struct SlotHold {
    /// Dense switch index.
    pub switch: u32,
    /// Offset from the unit's start, ns.
    pub acquire: u64,
    /// Offset from the unit's transmission end (its end minus the tree latency), ns.
    pub release: u64,
}

/// Per-channel constants (channel `2l` is link `l` from `a` to `b`, `2l+1` the reverse).
pub(super) struct Channels {
    /// Capacity in bytes per ns.
    pub cap: Vec<f64>,
    /// Rate in bits per second.
    pub rate: Vec<u64>,
    /// Propagation delay, ns.
    pub delay: Vec<u64>,
}

/// Everything fixed before the first event.
pub(super) struct Prepared {
    pub rec_agg: Vec<u32>,
    pub pending: Vec<u32>,
    pub dep_off: Vec<u32>,
    pub dependants: Vec<u32>,
    pub arena: Vec<u32>,
    pub rec_off: Vec<u32>,
    pub rec_len: Vec<u32>,
    pub rec_delay: Vec<u64>,
    pub ch_cap: Vec<f64>,
    pub ch_rate: Vec<u64>,
    pub aggs: Vec<Agg>,
    pub switch_nodes: Vec<NodeId>,
    pub switch_bytes: u64,
}

/// Wire bytes of a host transfer (network packet payload).
pub(super) fn wire(bytes: Bytes, opts: &ReplayOptions) -> Bytes {
    bytes.with_headers(opts.payload, opts.header)
}

/// Wire bytes of an INA stream: one slot's payload per packet.
pub(super) fn ina_wire(bytes: Bytes, opts: &ReplayOptions) -> Bytes {
    bytes.with_headers(opts.ina.payload, opts.header)
}

/// Slots a stream of `s` bytes occupies on each aggregating switch: SwitchML's worker
/// pool, `min(window, packets)` slot indices reused round-robin (a stream shorter than a
/// window never uses more slots than it has packets).
pub(super) fn slots_wanted(s: Bytes, opts: &ReplayOptions) -> u32 {
    if opts.ina.payload.0 == 0 {
        return opts.ina.window;
    }
    let packets = s.0.div_ceil(opts.ina.payload.0);
    packets.min(opts.ina.window as u64) as u32
}

/// Validate `records` against `topo` and `routing` and build the tables the event loop runs on.
pub(super) fn prepare<R: PathSource + ?Sized>(
    records: &[FlowRecord],
    topo: &Topology,
    routing: &R,
    opts: &ReplayOptions,
) -> Result<Prepared, ReplayError> {
    let index = IdIndex::new(records)?;
    let (rec_agg, members) = group_aggregations(records, topo.node_count())?;
    let deps = Dependants::build(records, &index, &rec_agg)?;
    check_acyclic(records, &rec_agg, &members, &deps)?;
    let channels = Channels::new(topo);
    let mut arena = Vec::new();
    let paths = RecordPaths::route(records, topo, routing, &channels, &mut arena)?;
    let mut switches = SwitchIndex::new(topo.node_count());
    let mut aggs = Vec::with_capacity(members.len());
    for mem in members {
        let ctx = AggContext {
            records,
            topo,
            routing,
            opts,
            channels: &channels,
            paths: &paths,
        };
        aggs.push(ctx.build(mem, &mut arena, &mut switches)?);
    }
    Ok(Prepared {
        rec_agg,
        pending: deps.pending,
        dep_off: deps.off,
        dependants: deps.list,
        arena,
        rec_off: paths.off,
        rec_len: paths.len,
        rec_delay: paths.delay,
        ch_cap: channels.cap,
        ch_rate: channels.rate,
        aggs,
        switch_nodes: switches.nodes,
        switch_bytes: paths.switch_bytes,
    })
}

/// Record id → index. Ids 0..n in file order (the usual case) index themselves: no map to build.
struct IdIndex {
    n: usize,
    dense: bool,
    map: HashMap<u64, u32>,
}

impl IdIndex {
    /// Errors on a duplicate id.
    fn new(records: &[FlowRecord]) -> Result<IdIndex, ReplayError> {
        let n = records.len();
        let dense = records.iter().enumerate().all(|(i, r)| r.id.0 == i as u64);
        let mut map: HashMap<u64, u32> = HashMap::new();
        if !dense {
            map.reserve(n);
            for (i, r) in records.iter().enumerate() {
                if map.insert(r.id.0, i as u32).is_some() {
                    return Err(ReplayError::DuplicateId(r.id));
                }
            }
        }
        Ok(IdIndex { n, dense, map })
    }

    fn get(&self, id: u64) -> Option<u32> {
        if self.dense {
            (id < self.n as u64).then_some(id as u32)
        } else {
            self.map.get(&id).copied()
        }
    }
}

/// Check every record's endpoints and aggregation tag, and group the `Ina` records by
/// aggregation id in order of first appearance: (aggregation of each record or [`NONE`],
/// members of each aggregation).
fn group_aggregations(
    records: &[FlowRecord],
    nodes: usize,
) -> Result<(Vec<u32>, Vec<Vec<u32>>), ReplayError> {
    let mut agg_of: HashMap<u64, u32> = HashMap::new();
    let mut rec_agg = vec![NONE; records.len()];
    let mut members: Vec<Vec<u32>> = Vec::new();
    for (i, r) in records.iter().enumerate() {
        for node in [r.src, r.dst] {
            if node.idx() >= nodes {
                return Err(ReplayError::UnknownNode {
                    id: r.id,
                    node,
                    nodes,
                });
            }
        }
        match (r.mode, &r.agg) {
            (Mode::Ina, Some(a)) => {
                if r.class == Class::Compute {
                    return Err(ReplayError::BadAggregation {
                        agg: a.id,
                        msg: format!("record {} has class compute", r.id),
                    });
                }
                let next = members.len() as u32;
                let ai = *agg_of.entry(a.id).or_insert(next);
                if ai == next {
                    members.push(Vec::new());
                }
                rec_agg[i] = ai;
                members[ai as usize].push(i as u32);
            }
            (Mode::Ina, None) => {
                return Err(ReplayError::BadAggregation {
                    agg: u64::MAX,
                    msg: format!("record {} has mode ina but no aggregation tag", r.id),
                })
            }
            (_, Some(a)) => {
                return Err(ReplayError::BadAggregation {
                    agg: a.id,
                    msg: format!(
                        "record {} carries an aggregation tag but its mode is {}",
                        r.id, r.mode
                    ),
                })
            }
            _ => {}
        }
    }
    Ok((rec_agg, members))
}

/// Who waits for whom, as CSR: the dependants of record `d` are
/// `list[off[d]..off[d+1]]`; `pending[i]` counts `i`'s deps. Deps between members of one
/// aggregation are internal to the unit and left out.
struct Dependants {
    pending: Vec<u32>,
    off: Vec<u32>,
    list: Vec<u32>,
}

impl Dependants {
    fn build(
        records: &[FlowRecord],
        index: &IdIndex,
        rec_agg: &[u32],
    ) -> Result<Dependants, ReplayError> {
        let n = records.len();
        let mut pending = vec![0u32; n];
        let mut count = vec![0u32; n + 1];
        let mut pairs: Vec<(u32, u32)> = Vec::new();
        for (i, r) in records.iter().enumerate() {
            for d in &r.deps {
                let Some(di) = index.get(d.0) else {
                    return Err(ReplayError::DanglingDep { id: r.id, dep: *d });
                };
                if rec_agg[i] != NONE && rec_agg[i] == rec_agg[di as usize] {
                    continue;
                }
                if di as usize == i {
                    return Err(ReplayError::Cycle(r.id, 1));
                }
                pending[i] += 1;
                count[di as usize] += 1;
                pairs.push((di, i as u32));
            }
        }
        let mut off = vec![0u32; n + 1];
        for i in 0..n {
            off[i + 1] = off[i] + count[i];
        }
        let mut fill = off.clone();
        let mut list = vec![0u32; pairs.len()];
        for (d, i) in pairs {
            list[fill[d as usize] as usize] = i;
            fill[d as usize] += 1;
        }
        Ok(Dependants { pending, off, list })
    }

    fn of(&self, r: u32) -> &[u32] {
        &self.list[self.off[r as usize] as usize..self.off[r as usize + 1] as usize]
    }
}

/// Kahn's algorithm over records with each aggregation contracted to one node: an error
/// naming a record that can never start, and how many cannot, when there is a cycle.
fn check_acyclic(
    records: &[FlowRecord],
    rec_agg: &[u32],
    members: &[Vec<u32>],
    deps: &Dependants,
) -> Result<(), ReplayError> {
    let n = records.len();
    let node = |i: usize| {
        if rec_agg[i] != NONE {
            n + rec_agg[i] as usize
        } else {
            i
        }
    };
    let mut indeg = vec![0u32; n + members.len()];
    for i in 0..n {
        indeg[node(i)] += deps.pending[i];
    }
    // a member record is not a node of its own: its aggregation is
    let is_node = |v: usize| v >= n || rec_agg[v] == NONE;
    let mut stack: Vec<usize> = (0..n + members.len())
        .filter(|&v| is_node(v) && indeg[v] == 0)
        .collect();
    let mut seen = 0usize;
    let mut one = [0u32];
    while let Some(v) = stack.pop() {
        seen += 1;
        let recs: &[u32] = if v >= n {
            &members[v - n]
        } else {
            one[0] = v as u32;
            &one
        };
        for &r in recs {
            for &d in deps.of(r) {
                let t = node(d as usize);
                indeg[t] -= 1;
                if indeg[t] == 0 {
                    stack.push(t);
                }
            }
        }
    }
    let total = (0..n + members.len()).filter(|&v| is_node(v)).count();
    if seen < total {
        let stuck = (0..n).find(|&i| indeg[node(i)] > 0).unwrap_or(0);
        // count records (not contracted nodes) that can never start
        let left = (0..n).filter(|&i| indeg[node(i)] > 0).count();
        return Err(ReplayError::Cycle(records[stuck].id, left));
    }
    Ok(())
}

impl Channels {
    fn new(topo: &Topology) -> Channels {
        let nch = topo.links.len() * 2;
        let mut ch = Channels {
            cap: vec![0.0; nch],
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
    fn check(&self, topo: &Topology, id: FlowId, path: &[Channel]) -> Result<(), ReplayError> {
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
    fn route<R: PathSource + ?Sized>(
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

/// The routed path of every `Net` and `Ina` record between distinct nodes (a slice of the
/// channel arena and its propagation delay), and the trace's switch bytes.
struct RecordPaths {
    off: Vec<u32>,
    len: Vec<u32>,
    delay: Vec<u64>,
    switch_bytes: u64,
}

impl RecordPaths {
    fn route<R: PathSource + ?Sized>(
        records: &[FlowRecord],
        topo: &Topology,
        routing: &R,
        channels: &Channels,
        arena: &mut Vec<u32>,
    ) -> Result<RecordPaths, ReplayError> {
        let n = records.len();
        let mut p = RecordPaths {
            off: vec![0; n],
            len: vec![0; n],
            delay: vec![0; n],
            switch_bytes: 0,
        };
        for (i, r) in records.iter().enumerate() {
            if !matches!(r.mode, Mode::Net | Mode::Ina) || r.src == r.dst {
                continue;
            }
            let (off, len, delay, path) =
                channels.route(topo, routing, r.id, r.src, r.dst, r.channel, arena)?;
            p.off[i] = off;
            p.len[i] = len;
            p.delay[i] = delay;
            p.switch_bytes += r.bytes.0 * fct::switch_hops(topo, r.src, &path);
        }
        Ok(p)
    }
}

/// Dense indices of the aggregating switches, in order of first use.
struct SwitchIndex {
    idx: Vec<u32>,
    nodes: Vec<NodeId>,
}

impl SwitchIndex {
    fn new(nodes: usize) -> SwitchIndex {
        SwitchIndex {
            idx: vec![NONE; nodes],
            nodes: Vec::new(),
        }
    }
    fn of(&mut self, sw: NodeId) -> u32 {
        if self.idx[sw.idx()] == NONE {
            self.idx[sw.idx()] = self.nodes.len() as u32;
            self.nodes.push(sw);
        }
        self.idx[sw.idx()]
    }
}

/// What building one aggregation unit reads.
struct AggContext<'a, R: PathSource + ?Sized> {
    records: &'a [FlowRecord],
    topo: &'a Topology,
    routing: &'a R,
    opts: &'a ReplayOptions,
    channels: &'a Channels,
    paths: &'a RecordPaths,
}

/// An aggregation's tree latency and slot holding times.
struct TreeTiming {
    latency: u64,
    holds: Vec<SlotHold>,
}

/// The stream size, aggregating switches and tree channels of one aggregation.
struct Tree {
    class: Class,
    /// Largest up edge (largest edge when there is none).
    s: Bytes,
    /// Dense switch indices (empty when nothing goes up: multicast only).
    switches: Vec<u32>,
    /// Channel multiset of every edge's path, sorted.
    channels: Vec<u32>,
}

impl<R: PathSource + ?Sized> AggContext<'_, R> {
    /// One aggregation unit from its member records; the fallback ring's paths and the
    /// tree's channel multiset are appended to `arena`.
    fn build(
        &self,
        mem: Vec<u32>,
        arena: &mut Vec<u32>,
        switches: &mut SwitchIndex,
    ) -> Result<Agg, ReplayError> {
        let tree = self.tree(&mem, arena, switches)?;
        // the unit's own limit: capacity over multiplicity on its tightest channel
        let tree_cap = netmodel::multiset_cap(&tree.channels, |c| self.channels.cap[c as usize]);
        let nodes: Vec<(u32, NodeId)> = tree
            .switches
            .iter()
            .map(|&i| (i, switches.nodes[i as usize]))
            .collect();
        let TreeTiming { latency, holds } = self.tree_timing(&mem, &nodes);
        let wire_s = ina_wire(tree.s, self.opts);
        let standalone = netmodel::ina_time(
            wire_s.0,
            tree_cap,
            self.opts.ina.window,
            self.opts.ina.payload.0 + self.opts.header.0,
            latency,
            !tree.switches.is_empty(),
        );
        let (ring, ring_wire, ring_latency) = self.fallback_ring(&mem, tree.s, arena)?;
        let reserved = planned_reservation(
            self.records,
            &mem,
            self.topo,
            self.opts,
            &tree.switches,
            &switches.nodes,
            self.records[mem[0] as usize].agg.map_or(0, |a| a.id),
            tree.class,
        )?;
        let tree_off = arena.len() as u32;
        arena.extend_from_slice(&tree.channels);
        Ok(Agg {
            class: tree.class,
            pending: mem.len() as u32,
            members: mem,
            wire: wire_s.0 as f64,
            tree_off,
            tree_len: tree.channels.len() as u32,
            tree_cap,
            want: if tree.switches.is_empty() {
                0
            } else {
                slots_wanted(tree.s, self.opts)
            },
            holds,
            switches: tree.switches,
            reserved,
            latency,
            rtt: latency,
            standalone,
            ring,
            ring_wire,
            ring_latency,
            start_at: 0,
            started: 0,
            slots: 0,
            outstanding: 0,
        })
    }

    /// Check the members' classes and switches; collect the stream size, the aggregating
    /// switches and the channel multiset.
    fn tree(
        &self,
        mem: &[u32],
        arena: &[u32],
        switches: &mut SwitchIndex,
    ) -> Result<Tree, ReplayError> {
        let first = &self.records[mem[0] as usize];
        let id = first.agg.map(|a| a.id).unwrap_or(0);
        let class = first.class;
        let mut s = Bytes(0);
        let mut s_up = Bytes(0);
        let mut has_up = false;
        let mut channels: Vec<u32> = Vec::new();
        let mut sw_list = Vec::new();
        for &m in mem {
            let r = &self.records[m as usize];
            if r.class != class {
                return Err(ReplayError::BadAggregation {
                    agg: id,
                    msg: format!(
                        "record {} is class {} but record {} is class {}",
                        r.id, r.class, first.id, class
                    ),
                });
            }
            let up = r.agg.map(|a| a.dir) == Some(AggDir::Up);
            if up {
                s_up = s_up.max(r.bytes);
            }
            s = s.max(r.bytes);
            let (o, l) = (
                self.paths.off[m as usize] as usize,
                self.paths.len[m as usize] as usize,
            );
            channels.extend_from_slice(&arena[o..o + l]);
            let sw = r.agg.map(|a| a.switch).unwrap_or(r.dst);
            has_up |= up;
            if self.topo.kinds.get(sw.idx()) != Some(&NodeKind::Switch) {
                return Err(ReplayError::BadAggregation {
                    agg: id,
                    msg: format!("record {}: node {sw} is not a switch", r.id),
                });
            }
            sw_list.push(switches.of(sw));
        }
        // The stream size: what every worker sends up (down edges of a reduce-scatter
        // carry smaller shards, within the same time); S of the down edges if none go up.
        if has_up {
            s = s_up;
        } else {
            // multicast only: no aggregator slots are taken
            sw_list.clear();
        }
        // A channel crossed by k edges (children behind a switch that does not aggregate)
        // stays in the multiset k times: the unit then weighs k on it in the max-min
        // solve, as k streams of S do.
        channels.sort_unstable();
        sw_list.sort_unstable();
        sw_list.dedup();
        Ok(Tree {
            class,
            s,
            switches: sw_list,
            channels,
        })
    }

    /// The tree's latency (longest up chain plus longest down chain) and, for each
    /// aggregating switch, when it holds slots relative to the stream (see [`SlotHold`]
    /// and [`netmodel::TreeChains`]).
    fn tree_timing(&self, mem: &[u32], switches: &[(u32, NodeId)]) -> TreeTiming {
        let edges: Vec<(u32, u32, u64, EdgeDir)> = mem
            .iter()
            .filter_map(|&m| {
                let r = &self.records[m as usize];
                let dir = match r.agg?.dir {
                    AggDir::Up => EdgeDir::Up,
                    AggDir::Down => EdgeDir::Down,
                };
                Some((r.src.0, r.dst.0, self.paths.delay[m as usize], dir))
            })
            .collect();
        let chains = netmodel::TreeChains::new(&edges);
        let holds = switches
            .iter()
            .map(|&(switch, node)| {
                let (acquire, release) = chains.slot_hold(node.0);
                SlotHold {
                    switch,
                    acquire,
                    release,
                }
            })
            .collect();
        TreeTiming {
            latency: chains.up_latency() + chains.down_latency(),
            holds,
        }
    }

    /// The host ring the aggregation falls back to: one flow per worker host (member i →
    /// member i+1) as (arena offset, length), the wire bytes each carries (`2(n−1)`
    /// chunks of `ceil(S/n)`) and the ring's latency (`2(n−1)` longest hops).
    #[allow(clippy::type_complexity)]
    fn fallback_ring(
        &self,
        mem: &[u32],
        s: Bytes,
        arena: &mut Vec<u32>,
    ) -> Result<(Vec<(u32, u32)>, f64, u64), ReplayError> {
        let mut hosts: Vec<(NodeId, FlowId)> = Vec::new();
        for &m in mem {
            let r = &self.records[m as usize];
            if r.agg.map(|a| a.dir) == Some(AggDir::Up)
                && self.topo.kinds[r.src.idx()] == NodeKind::Host
                && !hosts.iter().any(|h| h.0 == r.src)
            {
                hosts.push((r.src, r.id));
            }
        }
        let hn = hosts.len();
        if hn < 2 {
            return Ok((Vec::new(), 0.0, 0));
        }
        let mut ring = Vec::with_capacity(hn);
        let mut ring_delay = 0;
        for k in 0..hn {
            let (a, rid) = hosts[k];
            let b = hosts[(k + 1) % hn].0;
            let (off, len, d, _) =
                self.channels
                    .route(self.topo, self.routing, rid, a, b, 0, arena)?;
            ring.push((off, len));
            ring_delay = ring_delay.max(d);
        }
        let chunk = Bytes(s.0.div_ceil(hn as u64));
        let steps = 2 * (hn as u64 - 1);
        Ok((
            ring,
            (steps * wire(chunk, self.opts).0) as f64,
            steps * ring_delay,
        ))
    }
}

/// The slots an aggregation's group reserves on each of its switches under the `planned`
/// policy (the smallest, should they differ): matched by class and first member (the
/// lowest host sending an up edge), see [`crate::trace::Reservation`]. 0 for other policies
/// and for multicast-only aggregations; an error when a switch has no reservation for it
/// or one larger than the pool.
#[allow(clippy::too_many_arguments)]
fn planned_reservation(
    records: &[FlowRecord],
    mem: &[u32],
    topo: &Topology,
    opts: &ReplayOptions,
    switches: &[u32],
    switch_nodes: &[NodeId],
    id: u64,
    class: Class,
) -> Result<u32, ReplayError> {
    if opts.ina.policy != InaPolicy::Planned || switches.is_empty() {
        return Ok(0);
    }
    let first = mem
        .iter()
        .map(|&m| &records[m as usize])
        .filter(|r| {
            r.agg.map(|a| a.dir) == Some(AggDir::Up) && topo.kinds[r.src.idx()] == NodeKind::Host
        })
        .map(|r| r.src)
        .min();
    let mut k = u32::MAX;
    for &sw in switches {
        let node = switch_nodes[sw as usize];
        let r = first.and_then(|f| opts.ina.reservation(node, class, f));
        let msg = match (r, first) {
            (Some(x), _) if x <= opts.ina.slots => {
                k = k.min(x);
                continue;
            }
            (Some(x), _) => format!("reserves {x} slots on switch {node} but its pool holds {}", opts.ina.slots),
            (None, Some(f)) => format!("the planned slot policy has no reservation on switch {node} for the {class} aggregation of first member {f}"),
            (None, None) => "the planned slot policy needs a host among its up-edge senders".into(),
        };
        return Err(ReplayError::BadAggregation { agg: id, msg });
    }
    Ok(k)
}
