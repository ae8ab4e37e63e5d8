//! The planner's pricer: one collective lowered exactly as the trace lowers it
//! ([`crate::lower`], into a [`Recorder`]), then timed alone on the network from the
//! replayer's own formulas ([`crate::netmodel`]), every transfer on the path the replay
//! routes it on — its NCCL channel's ECMP path ([`Routing::channel_path`]) for a network
//! flow, the connection's path for an INA edge.
//!
//! **Timing** (a DAG walk): a transfer starts when its dependencies have ended plus its
//! gap. A network flow then takes `wire / rate` plus its path's propagation, its rate the
//! smallest `capacity / k` over its channels, `k` the flows of the same *wave* (dependency
//! depth) crossing that channel: the flows of one ring step, of one channel's step of
//! every channel, share the NICs and the fabric links their ECMP paths collide on. An INA
//! aggregation (every edge of one aggregation id) starts when all its edges may and ends
//! as the replayer's unit does alone: its wire bytes at the smaller of its tree's cap and
//! its window, then its tail ([`netmodel::ina_time`]). NVLink and compute records take
//! their duration.
//!
//! **Loads**: per channel, the time its capacity needs for the collective's wire bytes —
//! what the model's link rows add up over groups.
//!
//! Approximations (the replay measures them): a wave's flows share equally (no max-min
//! redistribution of what a bottlenecked flow leaves), waves do not overlap, and an
//! aggregation is timed alone.

use crate::lower::{Chain, LowerError, Sink, Xfer};
use crate::netmodel::{self, EdgeDir};
use crate::record::{AggDir, Mode, NET_PACKET_PAYLOAD, PACKET_HEADER};
use crate::topology::{Channel, Routing, Topology};
use crate::units::{Bytes, NodeId, Rank};
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

/// What the pricer needs of the network.
pub struct PriceNet<'a> {
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

    /// Price `xfers` (one collective, as a [`Recorder`] holds it); INA aggregations keep
    /// `slots` packets outstanding.
    pub fn price(&self, xfers: &[Xfer<u32>], slots: u32) -> Result<Priced, String> {
        let n = xfers.len();
        // a ring's steps repeat their connections: route each once
        let mut routed: HashMap<(NodeId, NodeId, u32, bool), Vec<Channel>> = HashMap::new();
        let mut paths: Vec<Vec<Channel>> = Vec::with_capacity(n);
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
        let wire = |x: &Xfer<u32>| -> f64 {
            let payload = if x.mode == Mode::Ina {
                self.payload
            } else {
                NET_PACKET_PAYLOAD
            };
            x.bytes.with_headers(payload, PACKET_HEADER).0 as f64
        };
        // waves: dependency depth
        let mut depth = vec![0u32; n];
        for (i, x) in xfers.iter().enumerate() {
            depth[i] = x
                .deps
                .iter()
                .map(|&j| depth[j as usize] + 1)
                .max()
                .unwrap_or(0);
        }
        let mut per_wave: HashMap<(u32, u32), u32> = HashMap::new();
        let mut loads: HashMap<u32, f64> = HashMap::new();
        for (i, x) in xfers.iter().enumerate() {
            for c in &paths[i] {
                if x.mode == Mode::Net {
                    *per_wave.entry((depth[i], c.0)).or_default() += 1;
                }
                *loads.entry(c.0).or_default() += wire(x) / self.cap(*c);
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
                        let e = start + self.unit_time(xfers, edges, &paths, slots) as f64;
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
        let mut loads: Vec<(u32, f64)> = loads.into_iter().collect();
        loads.sort_by_key(|l| l.0);
        Ok(Priced {
            time: end.iter().copied().fold(0.0, f64::max),
            loads,
            records: n,
        })
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
