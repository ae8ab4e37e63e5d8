//! The aggregation units: each aggregation's members checked, its stream size, its
//! aggregating switches and tree channels, its latency, window round trip and slot
//! holding times, its fallback host ring and its slot reservation.

use super::paths::{Channels, RecordPaths, NONE};
use crate::netmodel::{self, EdgeDir};
use crate::record::{AggDir, AggGroup, Class};
use crate::replay::route::PathSource;
use crate::replay::table::RecordTable;
use crate::replay::{InaPolicy, ReplayError, ReplayOptions};
use crate::topology::{NodeKind, Topology};
use crate::units::{Bytes, FlowId, NodeId};

/// One aggregation unit: its members, its tree, its fallback ring and its run-time state.
pub(in crate::replay) struct Agg {
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
    /// The job it belongs to in a merged multi-job trace (`InaConfig::tenants`; 0
    /// when the trace is one job's).
    pub tenant: u32,
    /// Slots the stream occupies on each of its switches, `w = min(window, packets)`
    /// (0 for multicast only or an empty stream).
    pub want: u32,
    /// When each aggregating switch holds the `w` slots (same order as `switches`).
    pub holds: Vec<SlotHold>,
    /// Up + down tree latency (propagation).
    pub latency: u64,
    /// The window's round trip: the same chains with one packet's store-and-forward per
    /// hop ([`netmodel::window_round_trip`]).
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
    /// The granted stream's window rate (infinite: no window) and its rounds
    /// ([`netmodel::window_rounds`]), set when it starts: its end's tail reads them.
    pub window: f64,
    pub rounds: u64,
}

/// When one aggregating switch physically holds an aggregation's slots: from the arrival
/// of the stream's first packet, `acquire` ns after the unit starts (the shortest up
/// chain from a worker to the switch), until its last result packet leaves the switch,
/// `release` ns after the unit's last byte left the workers — for a switch that sends
/// results down, the longest up chain (the last packet reaching the root) plus the down
/// chain from the root to this switch; for one that only sums upwards (Rina's rack
/// reduction), the longest up chain to it (its last partial sum leaves upwards then).
#[derive(Clone, Copy, Debug)]
pub(in crate::replay) struct SlotHold {
    /// Dense switch index.
    pub switch: u32,
    /// Offset from the unit's start, ns.
    pub acquire: u64,
    /// Offset from the unit's transmission end (its end minus the tree latency), ns.
    pub release: u64,
}

/// Wire bytes of a host transfer (network packet payload).
pub(in crate::replay) fn wire(bytes: Bytes, opts: &ReplayOptions) -> Bytes {
    bytes.with_headers(opts.payload, opts.header)
}

/// Wire bytes of an INA stream: one slot's payload per packet.
pub(in crate::replay) fn ina_wire(bytes: Bytes, opts: &ReplayOptions) -> Bytes {
    bytes.with_headers(opts.ina.payload, opts.header)
}

/// Slots a stream of `s` bytes occupies on each aggregating switch: SwitchML's worker
/// pool, `min(window, packets)` slot indices reused round-robin (a stream shorter than a
/// window never uses more slots than it has packets).
pub(in crate::replay) fn slots_wanted(s: Bytes, opts: &ReplayOptions) -> u32 {
    if opts.ina.payload.0 == 0 {
        return opts.ina.window;
    }
    let packets = s.0.div_ceil(opts.ina.payload.0);
    packets.min(opts.ina.window as u64) as u32
}

/// Dense indices of the aggregating switches, in order of first use.
pub(in crate::replay) struct SwitchIndex {
    pub(super) idx: Vec<u32>,
    pub(super) nodes: Vec<NodeId>,
}

impl SwitchIndex {
    pub(super) fn new(nodes: usize) -> SwitchIndex {
        SwitchIndex {
            idx: vec![NONE; nodes],
            nodes: Vec::new(),
        }
    }
    pub(super) fn of(&mut self, sw: NodeId) -> u32 {
        if self.idx[sw.idx()] == NONE {
            self.idx[sw.idx()] = self.nodes.len() as u32;
            self.nodes.push(sw);
        }
        self.idx[sw.idx()]
    }
}

/// What building one aggregation unit reads.
pub(in crate::replay) struct AggContext<'a, R: PathSource + ?Sized> {
    pub(super) records: &'a RecordTable,
    pub(super) topo: &'a Topology,
    pub(super) routing: &'a R,
    pub(super) opts: &'a ReplayOptions,
    pub(super) channels: &'a Channels,
    pub(super) paths: &'a RecordPaths,
}

impl<R: PathSource + ?Sized> AggContext<'_, R> {
    /// The channels of member record `m` (none when it crosses no channel).
    pub(super) fn path_of(&self, m: u32) -> &[u32] {
        match self.paths.of_record(self.records, m) {
            NONE => &[],
            p => self.paths.paths.of(p),
        }
    }

    /// The propagation delay of member record `m`'s path.
    pub(super) fn delay_of(&self, m: u32) -> u64 {
        match self.paths.of_record(self.records, m) {
            NONE => 0,
            p => self.paths.paths.delay[p as usize],
        }
    }
}

/// An aggregation's tree latency, window round trip and slot holding times.
pub(super) struct TreeTiming {
    pub(super) latency: u64,
    pub(super) rtt: u64,
    pub(super) holds: Vec<SlotHold>,
}

/// The stream size, aggregating switches and tree channels of one aggregation.
pub(super) struct Tree {
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
    pub(super) fn build(
        &self,
        mem: Vec<u32>,
        arena: &mut Vec<u32>,
        switches: &mut SwitchIndex,
    ) -> Result<Agg, ReplayError> {
        let tree = self.tree(&mem, switches)?;
        // the unit's own limit: capacity over multiplicity on its tightest channel
        let tree_cap = netmodel::multiset_cap(&tree.channels, |c| self.channels.cap[c as usize]);
        let nodes: Vec<(u32, NodeId)> = tree
            .switches
            .iter()
            .map(|&i| (i, switches.nodes[i as usize]))
            .collect();
        let packet = self.opts.ina.payload.0 + self.opts.header.0;
        let TreeTiming {
            latency,
            rtt,
            holds,
        } = self.tree_timing(&mem, &nodes, &tree.channels, packet);
        let wire_s = ina_wire(tree.s, self.opts);
        let standalone = netmodel::ina_time(
            wire_s.0,
            tree_cap,
            self.opts.ina.window,
            packet,
            latency,
            rtt,
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
            self.records.agg(mem[0] as usize).map_or(0, |a| a.id),
            tree.class,
        )?;
        let tenant = tenant_of(
            self.records,
            &mem,
            self.topo,
            self.opts,
            self.records.agg(mem[0] as usize).map_or(0, |a| a.id),
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
            tenant,
            latency,
            rtt,
            standalone,
            ring,
            ring_wire,
            ring_latency,
            start_at: 0,
            started: 0,
            slots: 0,
            outstanding: 0,
            window: f64::INFINITY,
            rounds: 0,
        })
    }

    /// Check the members' classes and switches; collect the stream size, the aggregating
    /// switches and the channel multiset.
    pub(super) fn tree(
        &self,
        mem: &[u32],
        switches: &mut SwitchIndex,
    ) -> Result<Tree, ReplayError> {
        let t = self.records;
        let first = mem[0] as usize;
        let id = t.agg(first).map(|a| a.id).unwrap_or(0);
        let class = t.class(first);
        let mut s = Bytes(0);
        let mut s_up = Bytes(0);
        let mut has_up = false;
        let mut channels: Vec<u32> = Vec::new();
        let mut sw_list = Vec::new();
        for &m in mem {
            let i = m as usize;
            if t.class(i) != class {
                return Err(ReplayError::BadAggregation {
                    agg: id,
                    msg: format!(
                        "record {} is class {} but record {} is class {}",
                        t.id(i),
                        t.class(i),
                        t.id(first),
                        class
                    ),
                });
            }
            let tag = t.agg(i);
            let up = tag.map(|a| a.dir) == Some(AggDir::Up);
            if up {
                s_up = s_up.max(t.bytes(i));
            }
            s = s.max(t.bytes(i));
            channels.extend_from_slice(self.path_of(m));
            let sw = tag.map(|a| a.switch).unwrap_or(t.dst(i));
            has_up |= up;
            if self.topo.kinds.get(sw.idx()) != Some(&NodeKind::Switch) {
                return Err(ReplayError::BadAggregation {
                    agg: id,
                    msg: format!("record {}: node {sw} is not a switch", t.id(i)),
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

    /// The tree's latency (longest up chain plus longest down chain of propagation), its
    /// window round trip (the same chains with one `packet` of wire bytes
    /// store-and-forwarded per hop, at each channel's share of the tree multiset
    /// `channels`: [`netmodel::window_round_trip`]) and, for each aggregating switch, when
    /// it holds slots relative to the stream (see [`SlotHold`] and
    /// [`netmodel::TreeChains`]).
    pub(super) fn tree_timing(
        &self,
        mem: &[u32],
        switches: &[(u32, NodeId)],
        channels: &[u32],
        packet: u64,
    ) -> TreeTiming {
        let edges: Vec<(u32, u32, u64, EdgeDir)> = mem
            .iter()
            .filter_map(|&m| {
                let i = m as usize;
                let dir = match self.records.agg(i)?.dir {
                    AggDir::Up => EdgeDir::Up,
                    AggDir::Down => EdgeDir::Down,
                };
                let (src, dst) = (self.records.src(i), self.records.dst(i));
                Some((src.0, dst.0, self.delay_of(m), dir))
            })
            .collect();
        let serialization: Vec<u64> = mem
            .iter()
            .filter(|&&m| self.records.agg(m as usize).is_some())
            .map(|&m| {
                let share =
                    |&c: &u32| netmodel::multiset_share(channels, c, self.channels.cap[c as usize]);
                netmodel::store_and_forward(packet, self.path_of(m).iter().map(share))
            })
            .collect();
        let rtt = netmodel::window_round_trip(&edges, &serialization);
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
            rtt,
            holds,
        }
    }

    /// The host ring the aggregation falls back to: one flow per worker host (member i →
    /// member i+1) as (arena offset, length), the wire bytes each carries (`2(n−1)`
    /// chunks of `ceil(S/n)`) and the ring's latency (`2(n−1)` longest hops).
    #[allow(clippy::type_complexity)]
    pub(super) fn fallback_ring(
        &self,
        mem: &[u32],
        s: Bytes,
        arena: &mut Vec<u32>,
    ) -> Result<(Vec<(u32, u32)>, f64, u64), ReplayError> {
        let mut hosts: Vec<(NodeId, FlowId)> = Vec::new();
        for &m in mem {
            let (i, t) = (m as usize, self.records);
            let src = t.src(i);
            if t.agg(i).map(|a| a.dir) == Some(AggDir::Up)
                && self.topo.kinds[src.idx()] == NodeKind::Host
                && !hosts.iter().any(|h| h.0 == src)
            {
                hosts.push((src, t.id(i)));
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
/// policy (the smallest, should they differ): matched by class, group (dense or expert)
/// and first member (the lowest host sending an up edge), see
/// [`crate::trace::Reservation`]. 0 for other policies
/// and for multicast-only aggregations; an error when a switch has no reservation for it
/// or one larger than the pool.
#[allow(clippy::too_many_arguments)]
pub(super) fn planned_reservation(
    records: &RecordTable,
    mem: &[u32],
    topo: &Topology,
    opts: &ReplayOptions,
    switches: &[u32],
    switch_nodes: &[NodeId],
    id: u64,
    class: Class,
) -> Result<u32, ReplayError> {
    if opts.ina.policy() != InaPolicy::Planned || switches.is_empty() {
        return Ok(0);
    }
    let first = first_member(records, mem, topo);
    let group = mem
        .first()
        .and_then(|&m| records.agg(m as usize))
        .map_or(AggGroup::Dense, |a| a.group);
    let kind = group.prefix();
    let mut k = u32::MAX;
    for &sw in switches {
        let node = switch_nodes[sw as usize];
        let r = first.and_then(|f| opts.ina.reservation(node, class, group, f));
        let msg = match (r, first) {
            (Some(x), _) if x <= opts.ina.slots => {
                k = k.min(x);
                continue;
            }
            (Some(x), _) => format!("reserves {x} slots on switch {node} but its pool holds {}", opts.ina.slots),
            (None, Some(f)) => format!("the planned slot policy has no reservation on switch {node} for the {kind}{class} aggregation of first member {f}"),
            (None, None) => "the planned slot policy needs a host among its up-edge senders".into(),
        };
        return Err(ReplayError::BadAggregation { agg: id, msg });
    }
    Ok(k)
}

/// An aggregation's first member: the lowest host sending one of its up edges (none for a
/// multicast-only aggregation).
pub(super) fn first_member(records: &RecordTable, mem: &[u32], topo: &Topology) -> Option<NodeId> {
    mem.iter()
        .map(|&m| m as usize)
        .filter(|&i| {
            records.agg(i).map(|a| a.dir) == Some(AggDir::Up)
                && topo.kinds[records.src(i).idx()] == NodeKind::Host
        })
        .map(|i| records.src(i))
        .min()
}

/// The job (tenant) an aggregation belongs to in a merged multi-job trace: the job of its
/// first member. 0 for a one-job trace and for a multicast-only aggregation (it holds no
/// slots); an error when the member is in no job of the header's `ina_tenants`.
pub(super) fn tenant_of(
    records: &RecordTable,
    mem: &[u32],
    topo: &Topology,
    opts: &ReplayOptions,
    id: u64,
) -> Result<u32, ReplayError> {
    if opts.ina.tenants.is_empty() {
        return Ok(0);
    }
    let Some(first) = first_member(records, mem, topo) else {
        return Ok(0);
    };
    opts.ina
        .tenant_of(first)
        .ok_or_else(|| ReplayError::BadAggregation {
            agg: id,
            msg: format!(
                "its first member, host {first}, is in no job of the trace's `{}`",
                crate::trace::INA_TENANTS_KEY
            ),
        })
}
