//! The options of one group — host algorithm, an aggregation tree under each candidate
//! root (hierarchical or root-only), Rina — each at each slot level, with the time of one
//! collective and the bytes it puts on every channel, from the replayer's own formulas
//! ([`crate::netmodel`]).
//!
//! Times of one collective of S bytes, alone on the network:
//! - **INA tree**: `ina_time(wire(S), tree cap, k slots, packet, latency, RTT)` exactly as
//!   the replayer advances an aggregation (every edge routed as the replayer routes it,
//!   [`Routing::connection_path`]; latency = longest up chain + longest down chain of
//!   propagation, RTT = the same with each hop's store-and-forward of one packet,
//!   [`netmodel::window_round_trip`]).
//! - **Host ring** (the trace's ring: 2(n−1) steps of S/n for all-reduce, n−1 for
//!   reduce-scatter / all-gather, every step synchronised): per step, the slowest flow's
//!   fluid time when the step's flows share each channel equally (`count × wire(S/n) /
//!   capacity` on the busiest channel) plus the longest path's propagation.
//! - **Rina**: the racks' up aggregations (the slowest), the ring among ToRs and the
//!   other members, then the multicast down (no window: it sums nothing).
//! - **NVLink** (a group inside one server): the `nvlink` record's duration.

use super::groups::{Coll, Group};
use crate::netmodel::{self, EdgeDir};
use crate::record::{NET_PACKET_PAYLOAD, PACKET_HEADER};
use crate::schedule::CollKind;
use crate::topology::{Channel, Routing, Topology};
use crate::units::{Bytes, Nanos, NodeId};

/// Shape of an aggregation tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Form {
    /// Every aggregating switch on the members' upward paths sums (multi-level).
    Hierarchical,
    /// Members send straight to the root, which alone sums (SwitchML).
    RootOnly,
    /// On a general graph, members joined one by one to the nearest tree node
    /// ([`Routing::steiner_tree_at`]); on a Clos the hierarchical tree.
    Steiner,
}

impl Form {
    /// File name.
    pub fn as_str(self) -> &'static str {
        match self {
            Form::Hierarchical => "hierarchical",
            Form::RootOnly => "root-only",
            Form::Steiner => "steiner",
        }
    }
}

/// What an option does.
#[derive(Clone, Debug, PartialEq)]
pub enum OptKind {
    /// Host algorithm (ring).
    Host,
    /// The group never leaves one NVLink domain.
    NvLink,
    /// An aggregation tree: (child, parent) edges bottom-up, the last into `root`.
    Tree {
        /// Shape.
        form: Form,
        /// Top switch.
        root: NodeId,
        /// Edges.
        edges: Vec<(NodeId, NodeId)>,
    },
    /// Rina over these ToRs (each with ≥ 2 members).
    Rina {
        /// Aggregating ToRs, ascending.
        tors: Vec<NodeId>,
    },
}

/// One option of one group.
#[derive(Clone, Debug, PartialEq)]
pub struct Opt {
    /// What it does.
    pub kind: OptKind,
    /// Slots reserved on each switch of `switches`.
    pub slots: u32,
    /// Switches holding slots (and a tree), ascending.
    pub switches: Vec<NodeId>,
    /// Per collective of [`Group::colls`]: the time of one (ns).
    pub times: Vec<f64>,
    /// Channel occupancy per iteration: (channel, ns = wire bytes / capacity), ascending
    /// channel, of the collectives before the iteration's tail.
    pub loads: Vec<(u32, f64)>,
    /// The same for the tail's collectives ([`Group::in_tail`]).
    pub tail_loads: Vec<(u32, f64)>,
}

impl Opt {
    /// Uses the switches' aggregators.
    pub fn is_ina(&self) -> bool {
        matches!(self.kind, OptKind::Tree { .. } | OptKind::Rina { .. })
    }
}

/// Network facts the options need.
pub struct Net<'a> {
    /// Topology.
    pub topo: &'a Topology,
    /// The one router.
    pub routing: &'a Routing,
    /// Which switches may aggregate.
    pub can_agg: Vec<bool>,
    /// Each host's ToR.
    pub tor: Vec<Option<NodeId>>,
    /// INA payload per packet / slot.
    pub payload: Bytes,
    /// Window (slots per worker).
    pub window: u32,
    /// NVLink step latency α.
    pub nvlink_alpha: Nanos,
}

/// Which edges of a tree an aggregation streams over.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Dirs {
    /// Up and down: a whole aggregation.
    Both,
    /// Up only (Rina's racks into their ToR): sums, no multicast.
    Up,
    /// Down only (Rina's ToR back to its rack): a multicast with nothing to sum.
    Down,
}

/// An INA time function for an option: time of one collective, adding its loads.
type InaFn<'a> = &'a dyn Fn(&Coll, &mut Vec<(u32, f64)>) -> Result<f64, String>;

/// A transfer on the network: its channels, their per-channel capacity (B/ns), delay.
struct Path {
    chans: Vec<Channel>,
    delay: u64,
}

impl Net<'_> {
    fn cap(&self, c: Channel) -> f64 {
        netmodel::bytes_per_ns(self.routing.rate(c))
    }
    fn path(&self, a: NodeId, b: NodeId) -> Result<Path, String> {
        let chans = self
            .routing
            .connection_path(a, b)
            .map_err(|e| format!("no route from {a} to {b}: {e}"))?;
        let delay = self.routing.path_delay(&chans).0;
        Ok(Path { chans, delay })
    }

    /// Time and per-channel wire bytes of `steps` synchronised steps in which every
    /// `(src, dst)` of `flows` sends `chunk` bytes (host packets).
    fn ring_steps(
        &self,
        flows: &[(NodeId, NodeId)],
        chunk: Bytes,
        steps: u64,
        loads: &mut Vec<(u32, f64)>,
        times: u64,
    ) -> Result<f64, String> {
        let wire = chunk.with_headers(NET_PACKET_PAYLOAD, PACKET_HEADER).0 as f64;
        let mut per: Vec<u32> = Vec::new();
        let mut delay = 0u64;
        for &(a, b) in flows {
            let p = self.path(a, b)?;
            delay = delay.max(p.delay);
            per.extend(p.chans.iter().map(|c| c.0));
        }
        per.sort_unstable();
        let mut step = 0.0f64;
        for run in per.chunk_by(|a, b| a == b) {
            let cap = self.cap(Channel(run[0]));
            step = step.max(run.len() as f64 * wire / cap);
            loads.push((
                run[0],
                run.len() as f64 * wire / cap * (steps * times) as f64,
            ));
        }
        Ok(steps as f64 * (step.ceil() + delay as f64))
    }

    /// One host ring collective over `nodes` (ring order).
    fn ring(&self, c: &Coll, nodes: &[NodeId], loads: &mut Vec<(u32, f64)>) -> Result<f64, String> {
        let n = nodes.len();
        if n < 2 {
            return Ok(0.0);
        }
        let steps = match c.kind {
            CollKind::AllReduce => 2 * (n as u64 - 1),
            _ => n as u64 - 1,
        };
        let flows: Vec<(NodeId, NodeId)> = (0..n).map(|i| (nodes[i], nodes[(i + 1) % n])).collect();
        let chunk = Bytes(c.bytes.0.div_ceil(n as u64));
        self.ring_steps(&flows, chunk, steps, loads, c.count)
    }

    /// One INA aggregation over `edges` (child, parent) with `k` slots: its time, and the
    /// wire bytes of each edge on its channels (up S, down S or the reduce-scatter shard).
    fn tree(
        &self,
        c: &Coll,
        edges: &[(NodeId, NodeId)],
        members: &[NodeId],
        k: u32,
        dirs: Dirs,
        loads: &mut Vec<(u32, f64)>,
    ) -> Result<f64, String> {
        let (up, down) = (dirs != Dirs::Down, dirs != Dirs::Up);
        let n = members.len() as u64;
        let mut below: std::collections::HashMap<NodeId, u64> =
            members.iter().map(|&m| (m, 1)).collect();
        for &(ch, p) in edges {
            let b = below.get(&ch).copied().unwrap_or(0);
            *below.entry(p).or_default() += b;
        }
        let wire = |b: Bytes| b.with_headers(self.payload, PACKET_HEADER).0 as f64;
        let mut lat = Vec::new();
        // each edge's channels, for its store-and-forward time once the multiset is known
        let mut edge_chans: Vec<Vec<Channel>> = Vec::new();
        let mut chans: Vec<u32> = Vec::new();
        let mut s = Bytes(0);
        for &(ch, p) in edges {
            if up {
                let pu = self.path(ch, p)?;
                lat.push((ch, p, pu.delay, EdgeDir::Up));
                edge_chans.push(pu.chans.clone());
                for x in &pu.chans {
                    chans.push(x.0);
                    loads.push((x.0, wire(c.bytes) / self.cap(*x) * c.count as f64));
                }
                s = c.bytes;
            }
            if down {
                let pd = self.path(p, ch)?;
                lat.push((p, ch, pd.delay, EdgeDir::Down));
                edge_chans.push(pd.chans.clone());
                let b = match c.kind {
                    CollKind::ReduceScatter => {
                        Bytes(c.bytes.0 * below.get(&ch).copied().unwrap_or(1) / n)
                    }
                    _ => c.bytes,
                };
                if !up {
                    s = s.max(b);
                }
                for x in &pd.chans {
                    chans.push(x.0);
                    loads.push((x.0, wire(b) / self.cap(*x) * c.count as f64));
                }
            }
        }
        chans.sort_unstable();
        let cap = netmodel::multiset_cap(&chans, |x| self.cap(Channel(x)));
        let (u, d) = netmodel::tree_latency(&lat);
        let packet = self.payload.0 + PACKET_HEADER.0;
        let serialization: Vec<u64> = edge_chans
            .iter()
            .map(|path| {
                let share = |x: &Channel| netmodel::multiset_share(&chans, x.0, self.cap(*x));
                netmodel::store_and_forward(packet, path.iter().map(share))
            })
            .collect();
        let rtt = netmodel::window_round_trip(&lat, &serialization);
        Ok(netmodel::ina_time(
            s.with_headers(self.payload, PACKET_HEADER).0,
            cap,
            k,
            packet,
            u + d,
            rtt,
            up,
        ) as f64)
    }
}

/// Sum loads per channel (input: any order).
fn merge(mut loads: Vec<(u32, f64)>) -> Vec<(u32, f64)> {
    loads.sort_by_key(|l| l.0);
    let mut out: Vec<(u32, f64)> = Vec::with_capacity(loads.len());
    for (c, v) in loads {
        match out.last_mut() {
            Some(l) if l.0 == c => l.1 += v,
            _ => out.push((c, v)),
        }
    }
    out
}

/// The option's times for every collective of `g` and its loads, aggregatable
/// collectives through `ina` (None: host for everything).
fn build(
    net: &Net,
    g: &Group,
    kind: OptKind,
    slots: u32,
    switches: Vec<NodeId>,
    ina: Option<InaFn<'_>>,
) -> Result<Opt, String> {
    let mut loads = Vec::new();
    let mut tail = Vec::new();
    let mut times = Vec::new();
    for (i, c) in g.colls().into_iter().enumerate() {
        let l = if g.in_tail(i) { &mut tail } else { &mut loads };
        let t = match (ina, c.aggregatable()) {
            (Some(f), true) => f(&c, l)?,
            _ => net.ring(&c, &g.hosts, l)?,
        };
        times.push(t);
    }
    Ok(Opt {
        kind,
        slots,
        switches,
        times,
        loads: merge(loads),
        tail_loads: merge(tail),
    })
}

/// The host option (or the NVLink one for a group inside one server).
pub fn host(net: &Net, g: &Group) -> Result<Opt, String> {
    if g.nvlink {
        let n = g.members.len() as u32;
        let times = g
            .colls()
            .iter()
            .map(|c| {
                crate::trace::nvlink_collective_time(
                    net.topo,
                    net.nvlink_alpha,
                    c.kind,
                    c.bytes,
                    n,
                    1,
                )
                .map_or(0.0, |t| t.0 as f64)
            })
            .collect();
        return Ok(Opt {
            kind: OptKind::NvLink,
            slots: 0,
            switches: vec![],
            times,
            loads: vec![],
            tail_loads: vec![],
        });
    }
    build(net, g, OptKind::Host, 0, vec![], None)
}

/// Candidate roots of `g` (empty when no aggregating switch sits above all members).
pub fn roots(net: &Net, g: &Group) -> Vec<NodeId> {
    let can = |v: NodeId| net.can_agg[v.idx()];
    net.routing
        .aggregation_candidates(&g.hosts, &can)
        .unwrap_or_default()
}

/// The tree of `g` under `root` in `form`: (child, parent) edges bottom-up.
pub fn tree_edges(
    net: &Net,
    g: &Group,
    root: NodeId,
    form: Form,
    key: u64,
) -> Result<Vec<(NodeId, NodeId)>, String> {
    match form {
        Form::RootOnly => Ok(g.hosts.iter().map(|&h| (h, root)).collect()),
        Form::Hierarchical | Form::Steiner => {
            let can = |v: NodeId| net.can_agg[v.idx()];
            let t = if form == Form::Steiner {
                net.routing.steiner_tree_at(&g.hosts, &can, root, key)
            } else {
                net.routing.aggregation_tree_at(&g.hosts, &can, root, key)
            };
            let t = t.map_err(|e| e.to_string())?;
            Ok(t.edges.iter().map(|e| (e.child, e.parent)).collect())
        }
    }
}

/// A tree option at `k` slots.
pub fn tree(
    net: &Net,
    g: &Group,
    form: Form,
    root: NodeId,
    edges: Vec<(NodeId, NodeId)>,
    k: u32,
) -> Result<Opt, String> {
    let mut sw: Vec<NodeId> = edges.iter().map(|e| e.1).collect();
    sw.sort_unstable();
    sw.dedup();
    let f =
        |c: &Coll, loads: &mut Vec<(u32, f64)>| net.tree(c, &edges, &g.hosts, k, Dirs::Both, loads);
    build(
        net,
        g,
        OptKind::Tree {
            form,
            root,
            edges: edges.clone(),
        },
        k,
        sw,
        Some(&f),
    )
}

/// The racks of `g` whose aggregating ToR holds at least two members.
pub fn rina_racks(net: &Net, g: &Group) -> Vec<(NodeId, Vec<NodeId>)> {
    let mut racks: std::collections::BTreeMap<NodeId, Vec<NodeId>> = Default::default();
    for &h in &g.hosts {
        if let Some(t) = net.tor[h.idx()].filter(|t| net.can_agg[t.idx()]) {
            racks.entry(t).or_default().push(h);
        }
    }
    racks.into_iter().filter(|(_, v)| v.len() >= 2).collect()
}

/// The Rina option at `k` slots (None when no rack has two members).
pub fn rina(net: &Net, g: &Group, k: u32) -> Result<Option<Opt>, String> {
    let racks = rina_racks(net, g);
    if racks.is_empty() {
        return Ok(None);
    }
    // ring workers: each rack's ToR and the other members, by their first member
    let mut workers: Vec<(NodeId, NodeId)> = Vec::new();
    for &h in &g.hosts {
        match racks.iter().find(|(_, v)| v.contains(&h)) {
            Some((t, v)) if v[0] == h => workers.push((h, *t)),
            Some(_) => {}
            None => workers.push((h, h)),
        }
    }
    workers.sort_unstable();
    let nodes: Vec<NodeId> = workers.iter().map(|w| w.1).collect();
    let tors: Vec<NodeId> = racks.iter().map(|r| r.0).collect();
    let f = |c: &Coll, loads: &mut Vec<(u32, f64)>| -> Result<f64, String> {
        if c.kind != CollKind::AllReduce {
            return net.ring(c, &g.hosts, loads);
        }
        if let [(t, ms)] = racks.as_slice() {
            if nodes.len() == 1 {
                // one rack holds everyone: a plain single-switch aggregation
                let e: Vec<(NodeId, NodeId)> = ms.iter().map(|&m| (m, *t)).collect();
                return net.tree(c, &e, ms, k, Dirs::Both, loads);
            }
        }
        let mut up = 0.0f64;
        let mut down = 0.0f64;
        for (t, ms) in &racks {
            let e: Vec<(NodeId, NodeId)> = ms.iter().map(|&m| (m, *t)).collect();
            up = up.max(net.tree(c, &e, ms, k, Dirs::Up, loads)?);
            down = down.max(net.tree(c, &e, ms, k, Dirs::Down, loads)?);
        }
        let ring = if nodes.len() >= 2 {
            net.ring(c, &nodes, loads)?
        } else {
            0.0
        };
        Ok(up + ring + down)
    };
    Ok(Some(build(
        net,
        g,
        OptKind::Rina { tors: tors.clone() },
        k,
        tors,
        Some(&f),
    )?))
}
