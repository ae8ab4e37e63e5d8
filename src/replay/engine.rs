//! The event loop, the incremental max-min solver and the INA slot pools.
//!
//! Data layout: records, units (active transfers) and channels live in flat vectors
//! indexed by `u32`; every path is a slice of one channel arena; each channel keeps the
//! list of units on it with each unit's position remembered, so adding or removing a
//! unit is O(path length).

use super::route::PathSource;
use super::{InaPolicy, ReplayError, ReplayOptions, ReplayResult};
use crate::fct::{self, FctRow, SummaryContext};
use crate::formats::links_csv::ChannelStat;
use crate::formats::switches_csv::SlotSample;
use crate::netmodel::{self, fluid_time, EdgeDir};
use crate::record::{AggDir, Class, FlowRecord, Mode};
use crate::topology::{NodeKind, Topology};
use crate::units::{BitsPerSec, Bytes, FlowId, LinkId, NodeId};
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap};

const NONE: u32 = u32::MAX;

// Event kinds, in processing order within one nanosecond (then by index, then version).
const EV_TXDONE: u8 = 0;
const EV_END: u8 = 1;
const EV_AGG_END: u8 = 2;
const EV_START: u8 = 3;
const EV_AGG_START: u8 = 4;

type Event = Reverse<(u64, u8, u32, u32)>;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Owner {
    Rec(u32),
    Agg(u32),
    Ring(u32),
}

struct Unit {
    off: u32,
    len: u32,
    remaining: f64,
    wire: f64,
    rate: f64,
    cap: f64,
    last: u64,
    ver: u32,
    latency: u64,
    owner: Owner,
}

struct Agg {
    class: Class,
    members: Vec<u32>,
    wire: f64,
    tree_off: u32,
    tree_len: u32,
    tree_cap: f64,
    switches: Vec<u32>,
    latency: u64,
    rtt: u64,
    standalone: u64,
    ring: Vec<(u32, u32)>,
    ring_wire: f64,
    ring_latency: u64,
    pending: u32,
    start_at: u64,
    started: u64,
    slots: u32,
    outstanding: u32,
    /// Slots its group reserves per switch (`planned` policy; 0 otherwise).
    reserved: u32,
}

fn class_idx(c: Class) -> usize {
    match c {
        Class::Tp => 0,
        Class::Pp => 1,
        Class::Dp => 2,
        Class::Emb | Class::Compute => 3,
        Class::Cp => 4,
        Class::Ep => 5,
    }
}

/// Slot pools of the aggregating switches.
struct Pools {
    policy: InaPolicy,
    total: u32,
    share: [u32; 6],
    used: Vec<[u32; 6]>,
    node_of: Vec<NodeId>,
    waiting: BTreeSet<(u8, u64, u32)>,
    /// Rank of each class in the priority order (`ina_classes` order; absent classes last).
    prio: [u8; 6],
    samples: Vec<SlotSample>,
    peak: u32,
}

enum Grant {
    Slots(u32),
    Wait,
    Fallback,
}

impl Pools {
    fn capacity(&self, class: usize) -> u32 {
        match self.policy {
            InaPolicy::Static => self.share[class],
            _ => self.total,
        }
    }
    fn free(&self, sw: u32, class: usize) -> u32 {
        let u = &self.used[sw as usize];
        let used = match self.policy {
            InaPolicy::Static => u[class],
            _ => u.iter().sum(),
        };
        self.capacity(class).saturating_sub(used)
    }
    fn ask(&self, agg: &Agg, window: u32) -> Grant {
        let c = class_idx(agg.class);
        if agg.switches.is_empty() {
            // a multicast-only aggregation (no up edge): nothing to sum, no slot, no window
            return Grant::Slots(0);
        }
        if self.capacity(c) == 0 || window == 0 {
            return Grant::Fallback;
        }
        if self.policy == InaPolicy::Planned {
            // the plan's reservation, once every switch's pool can hold it
            let need = agg.reserved.min(window);
            let fits = agg.switches.iter().all(|&s| self.free(s, c) >= need);
            return if need > 0 && fits {
                Grant::Slots(need)
            } else {
                Grant::Wait
            };
        }
        let free = agg
            .switches
            .iter()
            .map(|&s| self.free(s, c))
            .min()
            .unwrap_or(0);
        if free > 0 {
            Grant::Slots(free.min(window))
        } else if self.policy == InaPolicy::BestEffort {
            Grant::Fallback
        } else {
            Grant::Wait
        }
    }
    fn change(&mut self, agg: &Agg, slots: u32, take: bool, now: u64) {
        let c = class_idx(agg.class);
        for &s in &agg.switches {
            let u = &mut self.used[s as usize];
            if take {
                u[c] += slots;
            } else {
                u[c] -= slots;
            }
            let total: u32 = u.iter().sum();
            self.peak = self.peak.max(total);
            self.samples.push(SlotSample {
                time_ns: now,
                switch: self.node_of[s as usize],
                slots_in_use: total,
            });
        }
    }
    fn wait_key(&self, agg: &Agg, idx: u32, now: u64) -> (u8, u64, u32) {
        let prio = if self.policy == InaPolicy::Priority {
            self.prio[class_idx(agg.class)]
        } else {
            0
        };
        (prio, now, idx)
    }
}

/// Everything fixed before the first event.
struct Prepared {
    rec_agg: Vec<u32>,
    pending: Vec<u32>,
    dep_off: Vec<u32>,
    dependants: Vec<u32>,
    arena: Vec<u32>,
    rec_off: Vec<u32>,
    rec_len: Vec<u32>,
    rec_delay: Vec<u64>,
    ch_cap: Vec<f64>,
    ch_rate: Vec<u64>,
    aggs: Vec<Agg>,
    switch_nodes: Vec<NodeId>,
    switch_bytes: u64,
}

/// Wire bytes of a host transfer (network packet payload).
fn wire(bytes: Bytes, opts: &ReplayOptions) -> Bytes {
    bytes.with_headers(opts.payload, opts.header)
}

/// Wire bytes of an INA stream: one slot's payload per packet.
fn ina_wire(bytes: Bytes, opts: &ReplayOptions) -> Bytes {
    bytes.with_headers(opts.ina.payload, opts.header)
}

fn prepare<R: PathSource + ?Sized>(
    records: &[FlowRecord],
    topo: &Topology,
    routing: &R,
    opts: &ReplayOptions,
) -> Result<Prepared, ReplayError> {
    let n = records.len();
    let nodes = topo.node_count();
    // Ids 0..n in file order (the usual case) index themselves: no map to build.
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
    let index = |id: u64| -> Option<u32> {
        if dense {
            (id < n as u64).then_some(id as u32)
        } else {
            map.get(&id).copied()
        }
    };
    // aggregations, in order of first appearance
    let mut agg_of: HashMap<u64, u32> = HashMap::new();
    let mut rec_agg = vec![NONE; n];
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
    // dependants (CSR), external deps only
    let mut pending = vec![0u32; n];
    let mut count = vec![0u32; n + 1];
    let mut dep_pairs: Vec<(u32, u32)> = Vec::new();
    for (i, r) in records.iter().enumerate() {
        for d in &r.deps {
            let Some(di) = index(d.0) else {
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
            dep_pairs.push((di, i as u32));
        }
    }
    let mut dep_off = vec![0u32; n + 1];
    for i in 0..n {
        dep_off[i + 1] = dep_off[i] + count[i];
    }
    let mut fill = dep_off.clone();
    let mut dependants = vec![0u32; dep_pairs.len()];
    for (d, i) in dep_pairs {
        dependants[fill[d as usize] as usize] = i;
        fill[d as usize] += 1;
    }
    drop(fill);
    // cycle check: Kahn over records with each aggregation contracted to one node
    {
        let node = |i: usize| {
            if rec_agg[i] != NONE {
                n + rec_agg[i] as usize
            } else {
                i
            }
        };
        let mut indeg = vec![0u32; n + members.len()];
        for i in 0..n {
            indeg[node(i)] += pending[i];
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
                for &d in
                    &dependants[dep_off[r as usize] as usize..dep_off[r as usize + 1] as usize]
                {
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
    }
    // channels
    let nch = topo.links.len() * 2;
    let mut ch_cap = vec![0.0f64; nch];
    let mut ch_rate = vec![0u64; nch];
    let mut ch_delay = vec![0u64; nch];
    for (l, link) in topo.links.iter().enumerate() {
        for dir in 0..2 {
            let c = l * 2 + dir;
            ch_cap[c] = link.rate.0 as f64 / 8e9;
            ch_rate[c] = link.rate.0;
            ch_delay[c] = link.delay.0;
        }
    }
    let check = |id: FlowId, path: &[crate::topology::Channel]| -> Result<(), ReplayError> {
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
    };
    // record paths
    let mut arena: Vec<u32> = Vec::new();
    let mut rec_off = vec![0u32; n];
    let mut rec_len = vec![0u32; n];
    let mut rec_delay = vec![0u64; n];
    let mut switch_bytes = 0u64;
    for (i, r) in records.iter().enumerate() {
        if !matches!(r.mode, Mode::Net | Mode::Ina) || r.src == r.dst {
            continue;
        }
        let path = routing
            .channel_path(r.src, r.dst, r.channel)
            .map_err(|reason| ReplayError::NoRoute {
                id: r.id,
                src: r.src,
                dst: r.dst,
                reason,
            })?;
        check(r.id, &path)?;
        rec_off[i] = arena.len() as u32;
        rec_len[i] = path.len() as u32;
        let mut delay = 0;
        for c in &path {
            arena.push(c.0);
            delay += ch_delay[c.idx()];
        }
        switch_bytes += r.bytes.0 * fct::switch_hops(topo, r.src, &path);
        rec_delay[i] = delay;
    }
    // aggregations
    let mut switch_idx = vec![NONE; nodes];
    let mut switch_nodes = Vec::new();
    let mut aggs = Vec::with_capacity(members.len());
    for mem in members {
        let first = &records[mem[0] as usize];
        let id = first.agg.map(|a| a.id).unwrap_or(0);
        let class = first.class;
        let mut s = Bytes(0);
        let mut s_up = Bytes(0);
        let mut has_up = false;
        let mut tree: Vec<u32> = Vec::new();
        let mut switches = Vec::new();
        for &m in &mem {
            let r = &records[m as usize];
            if r.class != class {
                return Err(ReplayError::BadAggregation {
                    agg: id,
                    msg: format!(
                        "record {} is class {} but record {} is class {}",
                        r.id, r.class, first.id, class
                    ),
                });
            }
            if r.agg.map(|a| a.dir) == Some(AggDir::Up) {
                s_up = s_up.max(r.bytes);
            }
            s = s.max(r.bytes);
            let (o, l) = (rec_off[m as usize] as usize, rec_len[m as usize] as usize);
            tree.extend_from_slice(&arena[o..o + l]);
            let sw = r.agg.map(|a| a.switch).unwrap_or(r.dst);
            has_up |= r.agg.map(|a| a.dir) == Some(AggDir::Up);
            if topo.kinds.get(sw.idx()) != Some(&NodeKind::Switch) {
                return Err(ReplayError::BadAggregation {
                    agg: id,
                    msg: format!("record {}: node {sw} is not a switch", r.id),
                });
            }
            if switch_idx[sw.idx()] == NONE {
                switch_idx[sw.idx()] = switch_nodes.len() as u32;
                switch_nodes.push(sw);
            }
            switches.push(switch_idx[sw.idx()]);
        }
        // The stream size: what every worker sends up (down edges of a reduce-scatter
        // carry smaller shards, within the same time); S of the down edges if none go up.
        if has_up {
            s = s_up;
        } else {
            // multicast only: no aggregator slots are taken
            switches.clear();
        }
        // A channel crossed by k edges (children behind a switch that does not aggregate)
        // stays in the multiset k times: the unit then weighs k on it in the max-min
        // solve, as k streams of S do.
        tree.sort_unstable();
        switches.sort_unstable();
        switches.dedup();
        // the unit's own limit: capacity over multiplicity on its tightest channel
        let tree_cap = netmodel::multiset_cap(&tree, |c| ch_cap[c as usize]);
        // longest up chain and longest down chain
        let edges: Vec<(u32, u32, u64, EdgeDir)> = mem
            .iter()
            .filter_map(|&m| {
                let r = &records[m as usize];
                let dir = match r.agg?.dir {
                    AggDir::Up => EdgeDir::Up,
                    AggDir::Down => EdgeDir::Down,
                };
                Some((r.src.0, r.dst.0, rec_delay[m as usize], dir))
            })
            .collect();
        let (up_lat, down_lat) = netmodel::tree_latency(&edges);
        let latency = up_lat + down_lat;
        let wire_s = ina_wire(s, opts);
        let standalone = netmodel::ina_time(
            wire_s.0,
            tree_cap,
            opts.ina.window,
            opts.ina.payload.0,
            latency,
            !switches.is_empty(),
        );
        // host ring fallback over the worker hosts
        let mut hosts: Vec<(NodeId, FlowId)> = Vec::new();
        for &m in &mem {
            let r = &records[m as usize];
            if r.agg.map(|a| a.dir) == Some(AggDir::Up)
                && topo.kinds[r.src.idx()] == NodeKind::Host
                && !hosts.iter().any(|h| h.0 == r.src)
            {
                hosts.push((r.src, r.id));
            }
        }
        let hn = hosts.len();
        let mut ring = Vec::new();
        let mut ring_delay = 0;
        for k in 0..hn {
            if hn < 2 {
                break;
            }
            let (a, rid) = hosts[k];
            let b = hosts[(k + 1) % hn].0;
            let path = routing
                .connection_path(a, b)
                .map_err(|reason| ReplayError::NoRoute {
                    id: rid,
                    src: a,
                    dst: b,
                    reason,
                })?;
            check(rid, &path)?;
            ring.push((arena.len() as u32, path.len() as u32));
            let mut d = 0;
            for c in &path {
                arena.push(c.0);
                d += ch_delay[c.idx()];
            }
            ring_delay = ring_delay.max(d);
        }
        let (ring_wire, ring_latency) = if hn >= 2 {
            let chunk = Bytes(s.0.div_ceil(hn as u64));
            let steps = 2 * (hn as u64 - 1);
            ((steps * wire(chunk, opts).0) as f64, steps * ring_delay)
        } else {
            (0.0, 0)
        };
        let reserved = planned_reservation(
            records,
            &mem,
            topo,
            opts,
            &switches,
            &switch_nodes,
            id,
            class,
        )?;
        let tree_off = arena.len() as u32;
        arena.extend_from_slice(&tree);
        aggs.push(Agg {
            class,
            pending: mem.len() as u32,
            members: mem,
            wire: wire_s.0 as f64,
            tree_off,
            tree_len: tree.len() as u32,
            tree_cap,
            switches,
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
            reserved,
        });
    }
    Ok(Prepared {
        rec_agg,
        pending,
        dep_off,
        dependants,
        arena,
        rec_off,
        rec_len,
        rec_delay,
        ch_cap,
        ch_rate,
        aggs,
        switch_nodes,
        switch_bytes,
    })
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

/// Mutable simulation state.
struct Sim<'a> {
    p: Prepared,
    opts: &'a ReplayOptions,
    now: u64,
    heap: BinaryHeap<Event>,
    ready_at: Vec<u64>,
    start: Vec<u64>,
    end: Vec<u64>,
    done: usize,
    units: Vec<Unit>,
    pos: Vec<u32>,
    ch_units: Vec<Vec<(u32, u32)>>,
    ch_demand: Vec<f64>,
    ch_bytes: Vec<f64>,
    // solver scratch
    dirty: Vec<u32>,
    fresh: Vec<u32>,
    stamp: u32,
    ch_mark: Vec<u32>,
    ch_comp: Vec<u32>,
    ch_ver: Vec<u32>,
    rem: Vec<f64>,
    cnt: Vec<u32>,
    unit_mark: Vec<u32>,
    unit_frozen: Vec<u32>,
    new_rate: Vec<f64>,
    pools: Pools,
    fallbacks: u64,
    events: u64,
    resolves: u64,
}

impl Sim<'_> {
    fn push(&mut self, t: u64, kind: u8, idx: u32, ver: u32) {
        self.heap.push(Reverse((t, kind, idx, ver)));
    }

    fn tight(&self, c: usize) -> bool {
        self.ch_demand[c] > self.p.ch_cap[c] * (1.0 + 1e-9)
    }

    fn add_unit(&mut self, off: u32, len: u32, wire: f64, cap: f64, latency: u64, owner: Owner) {
        let u = self.units.len() as u32;
        self.units.push(Unit {
            off,
            len,
            remaining: wire,
            wire,
            rate: 0.0,
            cap,
            last: self.now,
            ver: 0,
            latency,
            owner,
        });
        self.unit_mark.push(0);
        self.unit_frozen.push(0);
        self.new_rate.push(0.0);
        for k in 0..len {
            let a = (off + k) as usize;
            let c = self.p.arena[a] as usize;
            let before = self.tight(c);
            self.pos[a] = self.ch_units[c].len() as u32;
            self.ch_units[c].push((u, k));
            self.ch_demand[c] += cap;
            if before || self.tight(c) {
                self.dirty.push(c as u32);
            }
        }
        self.fresh.push(u);
    }

    /// Take a finished unit off its channels; `account` adds its wire bytes to each
    /// (aggregations account per edge instead, see the event loop).
    fn remove_unit(&mut self, u: u32, account: bool) {
        let (off, len, cap, wire) = {
            let x = &self.units[u as usize];
            (x.off, x.len, x.cap, x.wire)
        };
        for k in 0..len {
            let a = (off + k) as usize;
            let c = self.p.arena[a] as usize;
            if self.tight(c) {
                self.dirty.push(c as u32);
            }
            let p = self.pos[a] as usize;
            self.ch_units[c].swap_remove(p);
            if let Some(&(u2, k2)) = self.ch_units[c].get(p) {
                self.pos[(self.units[u2 as usize].off + k2) as usize] = p as u32;
            }
            self.ch_demand[c] = if self.ch_units[c].is_empty() {
                0.0
            } else {
                self.ch_demand[c] - cap
            };
            if account {
                self.ch_bytes[c] += wire;
            }
        }
    }

    /// Re-solve max-min rates for the units connected (through tight channels) to what
    /// changed in this batch; units outside that component keep their rates.
    fn resolve(&mut self) {
        if self.dirty.is_empty() && self.fresh.is_empty() {
            return;
        }
        self.resolves += 1;
        self.stamp = self.stamp.wrapping_add(1);
        let st = self.stamp;
        let mut comp_units: Vec<u32> = Vec::new();
        let mut comp_ch: Vec<u32> = Vec::new();
        let mut stack: Vec<u32> = Vec::new();
        let dirty = std::mem::take(&mut self.dirty);
        for &c in &dirty {
            if self.ch_mark[c as usize] != st {
                self.ch_mark[c as usize] = st;
                stack.push(c);
            }
        }
        let fresh = std::mem::take(&mut self.fresh);
        let visit = |sim: &mut Self, u: u32, stack: &mut Vec<u32>, comp_units: &mut Vec<u32>| {
            if sim.unit_mark[u as usize] == st {
                return;
            }
            sim.unit_mark[u as usize] = st;
            comp_units.push(u);
            let (off, len) = (sim.units[u as usize].off, sim.units[u as usize].len);
            for k in off..off + len {
                let c = sim.p.arena[k as usize] as usize;
                if sim.ch_mark[c] != st && sim.tight(c) {
                    sim.ch_mark[c] = st;
                    stack.push(c as u32);
                }
            }
        };
        for &u in &fresh {
            visit(self, u, &mut stack, &mut comp_units);
        }
        while let Some(c) = stack.pop() {
            let cu = c as usize;
            if self.tight(cu) {
                comp_ch.push(c);
                self.ch_comp[cu] = st;
            }
            for i in 0..self.ch_units[cu].len() {
                let u = self.ch_units[cu][i].0;
                visit(self, u, &mut stack, &mut comp_units);
            }
        }
        self.dirty = dirty;
        self.dirty.clear();
        self.fresh = fresh;
        self.fresh.clear();

        // progressive filling: channels by fair share (min-heap), units by cap
        let mut heap: BinaryHeap<Reverse<(u64, u32, u32)>> =
            BinaryHeap::with_capacity(comp_ch.len());
        for &c in &comp_ch {
            let cu = c as usize;
            self.rem[cu] = self.p.ch_cap[cu];
            self.cnt[cu] = self.ch_units[cu].len() as u32;
            self.ch_ver[cu] = self.ch_ver[cu].wrapping_add(1);
            let share = self.rem[cu] / self.cnt[cu] as f64;
            heap.push(Reverse((share.to_bits(), c, self.ch_ver[cu])));
        }
        comp_units.sort_unstable_by(|&a, &b| {
            self.units[a as usize]
                .cap
                .total_cmp(&self.units[b as usize].cap)
                .then(a.cmp(&b))
        });
        let mut ui = 0;
        loop {
            while ui < comp_units.len() && self.unit_frozen[comp_units[ui] as usize] == st {
                ui += 1;
            }
            while let Some(&Reverse((_, c, v))) = heap.peek() {
                if self.ch_ver[c as usize] != v || self.cnt[c as usize] == 0 {
                    heap.pop();
                } else {
                    break;
                }
            }
            let top = heap
                .peek()
                .map(|&Reverse((s, c, _))| (f64::from_bits(s), c));
            let next_cap = comp_units.get(ui).map(|&u| self.units[u as usize].cap);
            match (top, next_cap) {
                (None, None) => break,
                (Some((share, c)), cap) if cap.is_none_or(|cap| share < cap) => {
                    heap.pop();
                    let cu = c as usize;
                    self.cnt[cu] = 0;
                    let share = share.max(1e-12);
                    for i in 0..self.ch_units[cu].len() {
                        let u = self.ch_units[cu][i].0;
                        if self.unit_frozen[u as usize] != st {
                            self.freeze(u, share, &mut heap);
                        }
                    }
                }
                (_, Some(cap)) => {
                    let u = comp_units[ui];
                    self.freeze(u, cap, &mut heap);
                }
                (Some(_), None) => unreachable!("guarded above"),
            }
        }
        // apply
        for &u in &comp_units {
            let r = self.new_rate[u as usize];
            let now = self.now;
            let x = &mut self.units[u as usize];
            if x.rate > 0.0 && (r - x.rate).abs() <= 1e-12 * r.max(x.rate) {
                continue;
            }
            if x.rate > 0.0 {
                x.remaining = (x.remaining - x.rate * (now - x.last) as f64).max(0.0);
            }
            x.last = now;
            x.rate = r;
            x.ver = x.ver.wrapping_add(1);
            let t = now + fluid_time(x.remaining, r);
            let ver = x.ver;
            self.push(t, EV_TXDONE, u, ver);
        }
    }

    fn freeze(&mut self, u: u32, rate: f64, heap: &mut BinaryHeap<Reverse<(u64, u32, u32)>>) {
        let st = self.stamp;
        self.unit_frozen[u as usize] = st;
        self.new_rate[u as usize] = rate;
        let (off, len) = (self.units[u as usize].off, self.units[u as usize].len);
        for k in off..off + len {
            let c = self.p.arena[k as usize] as usize;
            if self.ch_comp[c] != st || self.cnt[c] == 0 {
                continue;
            }
            self.rem[c] = (self.rem[c] - rate).max(0.0);
            self.cnt[c] -= 1;
            self.ch_ver[c] = self.ch_ver[c].wrapping_add(1);
            if self.cnt[c] > 0 {
                let share = self.rem[c] / self.cnt[c] as f64;
                heap.push(Reverse((share.to_bits(), c as u32, self.ch_ver[c])));
            }
        }
    }

    fn ready(&mut self, i: u32, records: &[FlowRecord]) {
        let t = self.ready_at[i as usize] + records[i as usize].gap.0;
        let a = self.p.rec_agg[i as usize];
        if a == NONE {
            self.push(t, EV_START, i, 0);
        } else {
            let agg = &mut self.p.aggs[a as usize];
            agg.start_at = agg.start_at.max(t);
            agg.pending -= 1;
            if agg.pending == 0 {
                let t = agg.start_at;
                self.push(t, EV_AGG_START, a, 0);
            }
        }
    }

    fn finish(&mut self, i: u32, records: &[FlowRecord]) {
        self.end[i as usize] = self.now;
        self.done += 1;
        let (a, b) = (
            self.p.dep_off[i as usize] as usize,
            self.p.dep_off[i as usize + 1] as usize,
        );
        for k in a..b {
            let d = self.p.dependants[k];
            let du = d as usize;
            self.ready_at[du] = self.ready_at[du].max(self.now);
            self.p.pending[du] -= 1;
            if self.p.pending[du] == 0 {
                self.ready(d, records);
            }
        }
    }

    fn start_record(&mut self, i: u32, records: &[FlowRecord]) {
        let r = &records[i as usize];
        let iu = i as usize;
        self.start[iu] = self.now;
        match r.mode {
            Mode::Compute | Mode::NvLink => self.push(self.now + r.dur.0, EV_END, i, 0),
            _ => {
                let (off, len) = (self.p.rec_off[iu], self.p.rec_len[iu]);
                let w = wire(r.bytes, self.opts).0 as f64;
                if len == 0 || w == 0.0 {
                    self.push(self.now + self.p.rec_delay[iu], EV_END, i, 0);
                } else {
                    let cap = (off..off + len)
                        .map(|k| self.p.ch_cap[self.p.arena[k as usize] as usize])
                        .fold(f64::INFINITY, f64::min);
                    self.add_unit(off, len, w, cap, self.p.rec_delay[iu], Owner::Rec(i));
                }
            }
        }
    }

    fn start_agg(&mut self, a: u32, slots: u32) {
        let now = self.now;
        let agg = &mut self.p.aggs[a as usize];
        agg.started = now;
        agg.slots = slots;
        if agg.wire == 0.0 || agg.tree_len == 0 {
            let t = now + agg.latency;
            self.push(t, EV_AGG_END, a, 0);
            return;
        }
        let window = if agg.switches.is_empty() {
            f64::INFINITY
        } else {
            netmodel::window_rate(slots, self.opts.ina.payload.0, agg.rtt)
        };
        let cap = agg.tree_cap.min(window);
        let (off, len, w, lat) = (agg.tree_off, agg.tree_len, agg.wire, agg.latency);
        self.add_unit(off, len, w, cap, lat, Owner::Agg(a));
    }

    fn fallback(&mut self, a: u32) {
        self.fallbacks += 1;
        let now = self.now;
        let agg = &mut self.p.aggs[a as usize];
        agg.started = now;
        agg.slots = 0;
        let ring = agg.ring.clone();
        let (w, lat) = (agg.ring_wire, agg.ring_latency);
        let usable: Vec<(u32, u32)> = ring.into_iter().filter(|r| r.1 > 0).collect();
        agg.outstanding = usable.len() as u32;
        if usable.is_empty() || w == 0.0 {
            agg.outstanding = 0;
            self.push(now + lat, EV_AGG_END, a, 0);
            return;
        }
        for (off, len) in usable {
            let cap = (off..off + len)
                .map(|k| self.p.ch_cap[self.p.arena[k as usize] as usize])
                .fold(f64::INFINITY, f64::min);
            self.add_unit(off, len, w, cap, lat, Owner::Ring(a));
        }
    }

    fn try_agg(&mut self, a: u32) {
        let agg = &self.p.aggs[a as usize];
        match self.pools.ask(agg, self.opts.ina.window) {
            Grant::Slots(k) => {
                if !agg.switches.is_empty() {
                    let now = self.now;
                    // split borrow: pools and aggs are distinct fields
                    let agg = &self.p.aggs[a as usize];
                    self.pools.change(agg, k, true, now);
                }
                self.start_agg(a, k);
            }
            Grant::Fallback => self.fallback(a),
            Grant::Wait => {
                let key = self.pools.wait_key(agg, a, self.now);
                self.pools.waiting.insert(key);
            }
        }
    }

    fn serve_waiting(&mut self) {
        if self.pools.waiting.is_empty() {
            return;
        }
        let keys: Vec<(u8, u64, u32)> = self.pools.waiting.iter().copied().collect();
        for key in keys {
            let a = key.2;
            let agg = &self.p.aggs[a as usize];
            if let Grant::Slots(k) = self.pools.ask(agg, self.opts.ina.window) {
                self.pools.waiting.remove(&key);
                let now = self.now;
                let agg = &self.p.aggs[a as usize];
                self.pools.change(agg, k, true, now);
                self.start_agg(a, k);
            }
        }
    }

    fn end_agg(&mut self, a: u32, records: &[FlowRecord]) {
        let now = self.now;
        let slots = self.p.aggs[a as usize].slots;
        if slots > 0 && !self.p.aggs[a as usize].switches.is_empty() {
            let agg = &self.p.aggs[a as usize];
            self.pools.change(agg, slots, false, now);
        }
        let started = self.p.aggs[a as usize].started;
        let members = std::mem::take(&mut self.p.aggs[a as usize].members);
        for &m in &members {
            self.start[m as usize] = started;
        }
        for &m in &members {
            self.finish(m, records);
        }
        self.p.aggs[a as usize].members = members;
        self.serve_waiting();
    }
}

/// Replay `records` on `topo`, routing every transfer with `routing`.
///
/// Validates the trace first (see the module docs), then runs the event loop to the
/// last record and returns one [`FctRow`] per record (trace order), the summary
/// (`fct::summarize`), per-channel and per-switch statistics.
pub fn simulate<R: PathSource + ?Sized>(
    records: &[FlowRecord],
    topo: &Topology,
    routing: &R,
    opts: &ReplayOptions,
) -> Result<ReplayResult, ReplayError> {
    let wall = std::time::Instant::now();
    let p = prepare(records, topo, routing, opts)?;
    let n = records.len();
    let nch = p.ch_cap.len();
    let nsw = p.switch_nodes.len();
    let ina = &opts.ina;
    let enabled: Vec<Class> = {
        let mut v: Vec<Class> = ina
            .classes
            .iter()
            .copied()
            .filter(|c| *c != Class::Compute)
            .collect();
        v.sort();
        v.dedup();
        v
    };
    let mut share = [0u32; 6];
    for c in &enabled {
        share[class_idx(*c)] = ina.slots / enabled.len() as u32;
    }
    let mut prio = [6u8, 7, 8, 9, 10, 11];
    for (rank, c) in ina
        .classes
        .iter()
        .filter(|c| **c != Class::Compute)
        .enumerate()
    {
        let p = &mut prio[class_idx(*c)];
        *p = (*p).min(rank as u8);
    }
    let pools = Pools {
        prio,
        policy: ina.policy,
        total: ina.slots,
        share,
        used: vec![[0; 6]; nsw],
        node_of: p.switch_nodes.clone(),
        waiting: BTreeSet::new(),
        samples: Vec::new(),
        peak: 0,
    };
    let arena_len = p.arena.len();
    let mut sim = Sim {
        opts,
        now: 0,
        heap: BinaryHeap::new(),
        ready_at: vec![0; n],
        start: vec![0; n],
        end: vec![u64::MAX; n],
        done: 0,
        units: Vec::new(),
        pos: vec![0; arena_len],
        ch_units: vec![Vec::new(); nch],
        ch_demand: vec![0.0; nch],
        ch_bytes: vec![0.0; nch],
        dirty: Vec::new(),
        fresh: Vec::new(),
        stamp: 0,
        ch_mark: vec![0; nch],
        ch_comp: vec![0; nch],
        ch_ver: vec![0; nch],
        rem: vec![0.0; nch],
        cnt: vec![0; nch],
        unit_mark: Vec::new(),
        unit_frozen: Vec::new(),
        new_rate: Vec::new(),
        pools,
        fallbacks: 0,
        events: 0,
        resolves: 0,
        p,
    };
    for i in 0..n as u32 {
        if sim.p.pending[i as usize] == 0 {
            sim.ready(i, records);
        }
    }
    let bar = if opts.progress {
        let b = indicatif::ProgressBar::new(n as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{elapsed_precise} [{bar:30}] {pos}/{len} records  sim {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        Some(b)
    } else {
        None
    };
    while let Some(&Reverse((t, ..))) = sim.heap.peek() {
        sim.now = t;
        while let Some(&Reverse((t2, kind, idx, ver))) = sim.heap.peek() {
            if t2 != t {
                break;
            }
            sim.heap.pop();
            sim.events += 1;
            match kind {
                EV_TXDONE => {
                    let u = &sim.units[idx as usize];
                    if u.ver != ver || u.rate == 0.0 {
                        continue;
                    }
                    let (owner, lat) = (u.owner, u.latency);
                    sim.units[idx as usize].rate = 0.0;
                    sim.remove_unit(idx, !matches!(owner, Owner::Agg(_)));
                    if let Owner::Agg(a) = owner {
                        // each edge's own bytes on its own path (reduce-scatter shards differ)
                        for &m in &sim.p.aggs[a as usize].members {
                            let w = ina_wire(records[m as usize].bytes, opts).0 as f64;
                            let (o, l) = (
                                sim.p.rec_off[m as usize] as usize,
                                sim.p.rec_len[m as usize] as usize,
                            );
                            for &c in &sim.p.arena[o..o + l] {
                                sim.ch_bytes[c as usize] += w;
                            }
                        }
                    }
                    match owner {
                        Owner::Rec(i) => sim.push(t + lat, EV_END, i, 0),
                        Owner::Agg(a) => sim.push(t + lat, EV_AGG_END, a, 0),
                        Owner::Ring(a) => {
                            let agg = &mut sim.p.aggs[a as usize];
                            agg.outstanding -= 1;
                            if agg.outstanding == 0 {
                                sim.push(t + lat, EV_AGG_END, a, 0);
                            }
                        }
                    }
                }
                EV_END => sim.finish(idx, records),
                EV_AGG_END => sim.end_agg(idx, records),
                EV_START => sim.start_record(idx, records),
                EV_AGG_START => sim.try_agg(idx),
                _ => unreachable!("event kinds are the five constants"),
            }
        }
        sim.resolve();
        if let Some(b) = &bar {
            if sim.events & 0x3fff == 0 || sim.heap.is_empty() {
                b.set_position(sim.done as u64);
                b.set_message(format!("{:.3} ms", t as f64 / 1e6));
            }
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if sim.done < n {
        let first = (0..n).find(|&i| sim.end[i] == u64::MAX).unwrap_or(0);
        return Err(ReplayError::Stalled(n - sim.done, records[first].id));
    }

    // results
    let mut rows = Vec::with_capacity(n);
    for (i, r) in records.iter().enumerate() {
        let standalone = match r.mode {
            Mode::Compute | Mode::NvLink => r.dur.0,
            Mode::Ina => sim.p.aggs[sim.p.rec_agg[i] as usize].standalone,
            Mode::Net => {
                let (off, len) = (sim.p.rec_off[i] as usize, sim.p.rec_len[i] as usize);
                let min_rate = sim.p.arena[off..off + len]
                    .iter()
                    .map(|&c| sim.p.ch_rate[c as usize])
                    .min();
                match min_rate {
                    Some(rate) => {
                        BitsPerSec(rate).transmit_time(wire(r.bytes, opts)).0 + sim.p.rec_delay[i]
                    }
                    None => sim.p.rec_delay[i],
                }
            }
        };
        rows.push(FctRow {
            flow_id: r.id.0,
            src: r.src.0,
            dst: r.dst.0,
            mode: r.mode,
            class: r.class,
            size_bytes: r.bytes.0,
            start_ns: sim.start[i],
            end_ns: sim.end[i],
            fct_ns: sim.end[i] - sim.start[i],
            standalone_fct_ns: standalone,
        });
    }
    let makespan = sim.end.iter().copied().max().unwrap_or(0);
    let mut channels = Vec::new();
    for c in 0..nch {
        let b = sim.ch_bytes[c].round() as u64;
        if b == 0 {
            continue;
        }
        let l = &topo.links[c / 2];
        let (from, to) = if c % 2 == 0 { (l.a, l.b) } else { (l.b, l.a) };
        let cap_bytes = l.rate.0 as f64 / 8e9 * makespan as f64;
        channels.push(ChannelStat {
            link: LinkId((c / 2) as u32),
            from,
            to,
            rate_bps: l.rate.0,
            bytes: b,
            utilisation: if cap_bytes > 0.0 {
                b as f64 / cap_bytes
            } else {
                0.0
            },
        });
    }
    let ctx = SummaryContext {
        backend: "replay".into(),
        trace: opts.trace_name.clone(),
        switch_bytes: sim.p.switch_bytes,
        ina_slot_peak: fct::slot_peak(&sim.pools.samples),
        wall_time_ns: wall.elapsed().as_nanos() as u64,
    };
    let summary = fct::summarize(records, &rows, &ctx)?;
    Ok(ReplayResult {
        rows,
        summary,
        channels,
        slots: std::mem::take(&mut sim.pools.samples),
        ina_fallbacks: sim.fallbacks,
        events: sim.events,
        resolves: sim.resolves,
    })
}
