//! The planner's pricer: collectives lowered exactly as the trace lowers them
//! ([`crate::lower`], into a [`Recorder`]), then timed on the network, every transfer on
//! the path the replay routes it on — its NCCL channel's ECMP path
//! ([`Routing::channel_path`]) for a network flow, the connection's path for an INA edge.
//! Two timings:
//!
//! **Replayed** ([`PriceNet::price_together`]): host transfers — one collective, or the
//! same collective of every group of a cohort started together — replayed by the
//! replayer itself under the ideal rate model, so the time is the replay's (max-min fair
//! rates re-solved at every start and end) wherever nothing else runs. Used for host
//! algorithms (but a ring alone, which the wave rule times exactly) and pipeline sends,
//! up to [`REPLAY_WAVE_LIMIT`] flows of one dependency depth.
//!
//! **The wave rule** (a DAG walk, [`PriceNet::price`]): a transfer starts when its
//! dependencies have ended plus its gap. A network flow then takes `wire / rate` plus its
//! path's propagation, its rate the smallest `capacity / k` over its channels, `k` the
//! flows of the same *wave* (dependency depth) crossing that channel: the flows of one
//! ring step, of one channel's step of every channel, share the NICs and the fabric links
//! their ECMP paths collide on. An INA aggregation (every edge of one aggregation id)
//! starts when all its edges may and ends as the replayer's unit does alone: its wire
//! bytes at the smaller of its tree's cap and its window, then its tail
//! ([`netmodel::ina_time`]). NVLink and compute records take their duration. Exact for a
//! ring alone (its steps start together) and for an aggregation alone; its
//! approximations (a wave's flows share equally, with no max-min redistribution of what a
//! bottlenecked flow leaves, and waves do not overlap) misprice a double binary tree of
//! 16 by +14 % and halving-doubling of 16 by −8 % (BERT-large DP16 on a k=4 fat-tree,
//! before host algorithms were replayed), so it prices only INA options, Rina's rings,
//! layer steps (all-to-alls, ring attention) and the cohorts too wide to replay.
//!
//! **Loads**: per channel, the time its capacity needs for the collective's wire bytes —
//! what the model's link rows add up over groups.

use crate::lower::{Chain, LowerError, Sink, Xfer};
use crate::netmodel::{self, EdgeDir};
use crate::record::{AggDir, Class, FlowRecord, Mode, NET_PACKET_PAYLOAD, PACKET_HEADER};
use crate::replay::{RateModel, ReplayOptions};
use crate::topology::{Channel, Routing, Topology};
use crate::units::{Bytes, FlowId, NodeId, Rank};
use std::collections::HashMap;

/// A sink that keeps a collective's transfers (ids are positions), every member starting
/// from an empty chain.
pub struct Recorder<'t> {
    topo: &'t Topology,
    /// The transfers in emission order (every dependency before its dependant).
    pub xfers: Vec<Xfer<u32>>,
    chains: HashMap<Rank, Chain<u32>>,
    next_agg: u64,
}

impl<'t> Recorder<'t> {
    /// An empty recorder.
    pub fn new(topo: &'t Topology) -> Self {
        Recorder {
            topo,
            xfers: Vec::new(),
            chains: HashMap::new(),
            next_agg: 0,
        }
    }
}

impl Sink for Recorder<'_> {
    type Id = u32;
    type Error = LowerError;
    fn chain(&mut self, r: Rank) -> &mut Chain<u32> {
        self.chains.entry(r).or_default()
    }
    fn flush(&mut self, r: Rank) -> Result<(), LowerError> {
        let node = self.topo.gpu(r);
        let c = self.chains.entry(r).or_default();
        if c.pending.0 == 0 {
            return Ok(());
        }
        let (deps, dur) = (std::mem::take(&mut c.tail), std::mem::take(&mut c.pending));
        let x = Xfer::compute(node, deps, dur);
        let id = self.emit(x)?;
        self.chains.entry(r).or_default().tail = vec![id];
        Ok(())
    }
    fn emit(&mut self, x: Xfer<u32>) -> Result<u32, LowerError> {
        self.xfers.push(x);
        Ok(self.xfers.len() as u32 - 1)
    }
    fn new_coll(&mut self) -> u64 {
        0
    }
    fn new_agg(&mut self) -> u64 {
        self.next_agg += 1;
        self.next_agg - 1
    }
}

/// The most network flows of one dependency depth that [`PriceNet::price_together`]
/// replays; wider sets are priced by the wave rule.
pub const REPLAY_WAVE_LIMIT: usize = 256;

/// Each transfer's dependency depth (its *wave*): 0 without dependencies, else one more
/// than its deepest dependency's.
fn depths(xfers: &[Xfer<u32>]) -> Vec<u32> {
    let mut depth = vec![0u32; xfers.len()];
    for (i, x) in xfers.iter().enumerate() {
        depth[i] = x
            .deps
            .iter()
            .map(|&j| depth[j as usize] + 1)
            .max()
            .unwrap_or(0);
    }
    depth
}

/// What the pricer needs of the network.
pub struct PriceNet<'a> {
    /// The topology.
    pub topo: &'a Topology,
    /// The one router (the replay's ECMP choices).
    pub routing: &'a Routing,
    /// INA payload per packet.
    pub payload: Bytes,
}

/// A collective priced alone.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Priced {
    /// When its last transfer ends (ns from its start).
    pub time: f64,
    /// Per channel (ascending), the ns its capacity needs for the collective's wire bytes.
    pub loads: Vec<(u32, f64)>,
    /// Transfers (trace records) it lowers to.
    pub records: usize,
}

impl PriceNet<'_> {
    fn cap(&self, c: Channel) -> f64 {
        netmodel::bytes_per_ns(self.routing.rate(c))
    }

    fn path(&self, x: &Xfer<u32>) -> Result<Vec<Channel>, String> {
        let p = match x.mode {
            Mode::Net => self.routing.channel_path(x.src, x.dst, x.channel),
            _ => self.routing.connection_path(x.src, x.dst),
        };
        p.map_err(|e| format!("no route from {} to {}: {e}", x.src, x.dst))
    }

    /// The channels each transfer crosses (none for NVLink and compute records); a
    /// ring's steps repeat their connections, so each is routed once.
    fn paths(&self, xfers: &[Xfer<u32>]) -> Result<Vec<Vec<Channel>>, String> {
        let mut routed: HashMap<(NodeId, NodeId, u32, bool), Vec<Channel>> = HashMap::new();
        let mut paths: Vec<Vec<Channel>> = Vec::with_capacity(xfers.len());
        for x in xfers {
            let p = match x.mode {
                Mode::Net | Mode::Ina => {
                    let key = (x.src, x.dst, x.channel, x.mode == Mode::Ina);
                    match routed.get(&key) {
                        Some(p) => p.clone(),
                        None => {
                            let p = self.path(x)?;
                            routed.insert(key, p.clone());
                            p
                        }
                    }
                }
                _ => Vec::new(),
            };
            paths.push(p);
        }
        Ok(paths)
    }

    /// Wire bytes of a transfer (payload and headers).
    fn wire(&self, x: &Xfer<u32>) -> f64 {
        let payload = if x.mode == Mode::Ina {
            self.payload
        } else {
            NET_PACKET_PAYLOAD
        };
        x.bytes.with_headers(payload, PACKET_HEADER).0 as f64
    }

    /// Per channel (ascending), the ns its capacity needs for the wire bytes of `xfers`
    /// crossing it on `paths`.
    fn loads<'x>(
        &self,
        xfers: impl Iterator<Item = (&'x Xfer<u32>, &'x Vec<Channel>)>,
    ) -> Vec<(u32, f64)> {
        let mut loads: HashMap<u32, f64> = HashMap::new();
        for (x, path) in xfers {
            for c in path {
                *loads.entry(c.0).or_default() += self.wire(x) / self.cap(*c);
            }
        }
        let mut loads: Vec<(u32, f64)> = loads.into_iter().collect();
        loads.sort_by_key(|l| l.0);
        loads
    }

    /// Price `xfers` (one collective, as a [`Recorder`] holds it) by the wave rule; INA
    /// aggregations keep `slots` packets outstanding.
    pub fn price(&self, xfers: &[Xfer<u32>], slots: u32) -> Result<Priced, String> {
        let paths = self.paths(xfers)?;
        let end = self.wave_ends(xfers, &paths, slots);
        Ok(Priced {
            time: end.iter().copied().fold(0.0, f64::max),
            loads: self.loads(xfers.iter().zip(&paths)),
            records: xfers.len(),
        })
    }

    /// Each transfer's end by the wave rule (module docs).
    fn wave_ends(&self, xfers: &[Xfer<u32>], paths: &[Vec<Channel>], slots: u32) -> Vec<f64> {
        let n = xfers.len();
        let wire = |x: &Xfer<u32>| self.wire(x);
        let depth = depths(xfers);
        let mut per_wave: HashMap<(u32, u32), u32> = HashMap::new();
        for (i, x) in xfers.iter().enumerate() {
            for c in &paths[i] {
                if x.mode == Mode::Net {
                    *per_wave.entry((depth[i], c.0)).or_default() += 1;
                }
            }
        }
        let mut units: HashMap<u64, Vec<usize>> = HashMap::new();
        for (i, x) in xfers.iter().enumerate() {
            if let Some(a) = x.agg {
                units.entry(a.id).or_default().push(i);
            }
        }
        let mut end = vec![0.0f64; n];
        let mut unit_end: HashMap<u64, f64> = HashMap::new();
        let ready = |end: &[f64], x: &Xfer<u32>| {
            x.deps.iter().map(|&j| end[j as usize]).fold(0.0, f64::max) + x.gap.0 as f64
        };
        for i in 0..n {
            let x = &xfers[i];
            end[i] = match (x.mode, x.agg) {
                (Mode::Ina, Some(a)) => match unit_end.get(&a.id) {
                    Some(&e) => e,
                    None => {
                        let edges = &units[&a.id];
                        // external deps only: an edge's deps inside the unit end with it
                        let start = edges
                            .iter()
                            .map(|&k| {
                                let xk = &xfers[k];
                                xk.deps
                                    .iter()
                                    .filter(|&&j| xfers[j as usize].agg.map(|t| t.id) != Some(a.id))
                                    .map(|&j| end[j as usize])
                                    .fold(0.0, f64::max)
                                    + xk.gap.0 as f64
                            })
                            .fold(0.0, f64::max);
                        let e = start + self.unit_time(xfers, edges, paths, slots) as f64;
                        unit_end.insert(a.id, e);
                        e
                    }
                },
                (Mode::Net, _) => {
                    let rate = paths[i]
                        .iter()
                        .map(|c| self.cap(*c) / per_wave[&(depth[i], c.0)] as f64)
                        .fold(f64::INFINITY, f64::min);
                    let delay = self.routing.path_delay(&paths[i]).0 as f64;
                    ready(&end, x) + netmodel::fluid_time(wire(x), rate) as f64 + delay
                }
                _ => ready(&end, x) + x.dur.0 as f64,
            };
        }
        end
    }

    /// Price transfers that run together — several groups' collectives lowered into one
    /// [`Recorder`], `parts[i]` the range of group i's — each part's time being when its
    /// last transfer ends, every part starting at 0, so flows of different parts share
    /// the NICs and links their paths meet on. Host transfers only (no INA edges).
    ///
    /// They are replayed by the replayer itself ([`crate::replay::simulate`], max-min fair
    /// rates under the ideal model: the replay of the iteration to the nanosecond when
    /// nothing else runs) when no dependency depth holds more than [`REPLAY_WAVE_LIMIT`]
    /// network flows; beyond, by the wave rule (module docs), whose cost does not grow
    /// with the contention: a replay's re-solves do (halving-doubling over eight DP
    /// groups of 64 on a k=32 fat-tree, 12,288 transfers, replays in ≈ 6 s).
    pub fn price_together(
        &self,
        xfers: &[Xfer<u32>],
        parts: &[std::ops::Range<usize>],
    ) -> Result<Vec<Priced>, String> {
        let paths = self.paths(xfers)?;
        let depth = depths(xfers);
        let mut wave: HashMap<u32, usize> = HashMap::new();
        for (x, d) in xfers.iter().zip(&depth) {
            if x.mode == Mode::Net {
                *wave.entry(*d).or_default() += 1;
            }
        }
        let widest = wave.values().copied().max().unwrap_or(0);
        let end = if widest <= REPLAY_WAVE_LIMIT {
            self.replay_ends(xfers)?
        } else {
            self.wave_ends(xfers, &paths, 1)
        };
        Ok(parts
            .iter()
            .map(|p| Priced {
                time: end[p.clone()].iter().copied().fold(0.0, f64::max),
                loads: self.loads(xfers[p.clone()].iter().zip(&paths[p.clone()])),
                records: p.len(),
            })
            .collect())
    }

    /// Each transfer's end as the replayer replays them alone (ideal rate model).
    fn replay_ends(&self, xfers: &[Xfer<u32>]) -> Result<Vec<f64>, String> {
        let records: Vec<FlowRecord> = xfers
            .iter()
            .enumerate()
            .map(|(i, x)| FlowRecord {
                id: FlowId(i as u64),
                src: x.src,
                dst: x.dst,
                bytes: x.bytes,
                deps: x.deps.iter().map(|&d| FlowId(d as u64)).collect(),
                gap: x.gap,
                dur: x.dur,
                mode: x.mode,
                class: Class::Dp,
                collective: x.coll,
                step: x.step,
                group_size: x.group,
                agg: x.agg,
                channel: x.channel,
                ..FlowRecord::default()
            })
            .collect();
        let opts = ReplayOptions {
            rate_model: RateModel::Ideal,
            ..ReplayOptions::default()
        };
        let r = crate::replay::simulate(&records, self.topo, self.routing, &opts)
            .map_err(|e| format!("pricing by replay: {e}"))?;
        Ok(r.row_iter().map(|row| row.end_ns as f64).collect())
    }

    /// One aggregation alone, as the replayer advances it: its wire bytes at the smaller
    /// of its tree's cap (a channel crossed by k edges shared k ways) and its window, then
    /// its tail; an aggregation without up edges (a multicast) has no window.
    fn unit_time(
        &self,
        xfers: &[Xfer<u32>],
        edges: &[usize],
        paths: &[Vec<Channel>],
        slots: u32,
    ) -> u64 {
        let mut chans: Vec<u32> = edges
            .iter()
            .flat_map(|&i| paths[i].iter().map(|c| c.0))
            .collect();
        chans.sort_unstable();
        let cap = netmodel::multiset_cap(&chans, |x| self.cap(Channel(x)));
        let lat: Vec<(NodeId, NodeId, u64, EdgeDir)> = edges
            .iter()
            .map(|&i| {
                let x = &xfers[i];
                let dir = match x.agg.map(|a| a.dir) {
                    Some(AggDir::Down) => EdgeDir::Down,
                    _ => EdgeDir::Up,
                };
                (x.src, x.dst, self.routing.path_delay(&paths[i]).0, dir)
            })
            .collect();
        let up = lat.iter().any(|e| e.3 == EdgeDir::Up);
        let (u, d) = netmodel::tree_latency(&lat);
        let packet = self.payload.0 + PACKET_HEADER.0;
        let serialization: Vec<u64> = edges
            .iter()
            .map(|&i| {
                let share = |c: &Channel| netmodel::multiset_share(&chans, c.0, self.cap(*c));
                netmodel::store_and_forward(packet, paths[i].iter().map(share))
            })
            .collect();
        let rtt = netmodel::window_round_trip(&lat, &serialization);
        // the stream's size: its largest up edge (down edges of a reduce-scatter carry
        // shards), or its largest edge when it only multicasts
        let s = edges
            .iter()
            .filter(|&&i| !up || xfers[i].agg.is_some_and(|a| a.dir == AggDir::Up))
            .map(|&i| xfers[i].bytes)
            .max()
            .unwrap_or(Bytes(0));
        netmodel::ina_time(
            s.with_headers(self.payload, PACKET_HEADER).0,
            cap,
            slots,
            packet,
            u + d,
            rtt,
            up,
        )
    }
}
