//! The options of one group — host algorithm, an aggregation tree under each candidate
//! root (hierarchical or root-only), Rina — each at each slot level, with the time of one
//! collective and the time it occupies every channel: each collective lowered exactly as
//! the trace of the plan lowers it ([`crate::lower`]) and priced on the replay's routes
//! ([`super::price`]): a host algorithm alone and beside its cohort ([`hosts`]), an
//! aggregation alone. A group inside one NVLink domain has one option, its `nvlink`
//! records.

use super::price::{PriceNet, Priced, Recorder};
use crate::lower::Sink;
use crate::lower::{Algorithm, Lowering, RinaRacks};
use crate::schedule::{CollKind, GroupKind, LayerStep, Workload};
use crate::topology::{Routing, Topology};
use crate::trace::groups::{Coll, Group};
use crate::units::{Bytes, Nanos, NodeId, Rank};
use std::collections::HashMap;

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
    /// A host algorithm for the collectives it may aggregate (all-gathers stay on the
    /// trace's `--collective`).
    Host(Algorithm),
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
    /// Per collective: the time of one when every group of the group's cohort runs it on
    /// the same host algorithm ([`hosts`]); `times` for the options that are not a host
    /// algorithm.
    pub joint: Vec<f64>,
    /// Channel occupancy per iteration: (channel, ns = wire bytes / capacity), ascending
    /// channel, of the collectives before the iteration's tail.
    pub loads: Vec<(u32, f64)>,
    /// The same for the tail's collectives ([`Group::in_tail`]).
    pub tail_loads: Vec<(u32, f64)>,
    /// Trace records the group's collectives lower to per iteration.
    pub records: f64,
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
    /// The lowering context the trace uses (NVLink step latency, NCCL channels).
    pub lw: Lowering<'a>,
    /// The host algorithm of collectives that do not aggregate.
    pub host: Algorithm,
}

/// How an option lowers a group's collectives that it may aggregate.
enum How<'a> {
    /// The host algorithm.
    Host(Algorithm),
    /// An aggregation tree: (child, parent, fan-in at parent), bottom-up.
    Tree(&'a [(NodeId, NodeId, u32)]),
    /// Rina over these racks.
    Rina(&'a RinaRacks),
}

impl Net<'_> {
    /// One collective of `g` lowered as `how` says (all-gathers, and reduce-scatters under
    /// Rina, on the host algorithm as the trace lowers them), priced alone with `slots`
    /// packets outstanding per aggregation.
    fn priced(&self, how: &How, c: &Coll, g: &Group, slots: u32) -> Result<Priced, String> {
        let mut rec = Recorder::new(self.topo);
        let mut lw = self.lw;
        let (kind, bytes, m) = (c.kind, c.bytes, &g.members);
        let r = if g.nvlink {
            lw.nvlink(&mut rec, kind, bytes, m, 0)
        } else {
            match how {
                How::Tree(e) if c.aggregatable() => lw.tree(&mut rec, kind, bytes, m, 0, e),
                How::Rina(r) if kind == CollKind::AllReduce => lw.rina(&mut rec, bytes, m, 0, r),
                How::Host(a) if c.aggregatable() => lw.host(&mut rec, *a, kind, bytes, m, 0),
                _ => lw.host(&mut rec, self.host, kind, bytes, m, 0),
            }
        };
        r.map_err(|e| e.to_string())?;
        let p = PriceNet {
            topo: self.topo,
            routing: self.routing,
            payload: self.payload,
        };
        p.price(&rec.xfers, slots)
    }
}

impl Net<'_> {
    /// Time of one pipeline hop: every pair of `pairs` (each rank of a stage sending to
    /// its counterpart in the next one, as the trace sends activations and gradients from
    /// every TP rank of every replica at once) moves `bytes` at the same time, lowered as
    /// the trace lowers a pipeline send (an NVLink record inside a server) and replayed
    /// together ([`PriceNet::price_together`]): the slowest transfer's time, which the
    /// replicas' gradient syncs wait for.
    pub fn p2p_time(&self, pairs: &[(Rank, Rank)], bytes: Bytes) -> Result<f64, String> {
        let mut rec = Recorder::new(self.topo);
        for &(a, b) in pairs {
            self.lw
                .p2p(&mut rec, a, b, bytes, vec![], Nanos(0), None, None)
                .map_err(|e| e.to_string())?;
        }
        let p = PriceNet {
            topo: self.topo,
            routing: self.routing,
            payload: self.payload,
        };
        let all = 0..rec.xfers.len();
        Ok(p.price_together(&rec.xfers, std::slice::from_ref(&all))?[0].time)
    }
}

impl Net<'_> {
    /// Time of one layer step on stage `s` without its TP collectives (those are the TP
    /// group's options): compute as given; a collective over the stage's first group of
    /// its kind lowered as the trace lowers it (an NVLink record inside a server, else the
    /// host algorithm); an all-to-all, each of its parts (run side by side: the slowest);
    /// ring attention, each of its rings (the slowest), its attention core included; the
    /// experts, the slowest EP rank's.
    pub fn layer_step_time(&self, wl: &Workload, s: u32, st: &LayerStep) -> Result<f64, String> {
        let price = |rec: Recorder| {
            PriceNet {
                topo: self.topo,
                routing: self.routing,
                payload: self.payload,
            }
            .price(&rec.xfers, 1)
            .map(|p| p.time)
        };
        let group = |kind: GroupKind| wl.groups.first_of(kind, s);
        let mut lw = self.lw;
        let err = |e: crate::lower::LowerError| e.to_string();
        Ok(match *st {
            LayerStep::Compute(t) => t.0 as f64,
            LayerStep::Tp(_) => 0.0,
            LayerStep::Coll {
                kind,
                group: k,
                bytes,
            } => {
                let Some(g) = group(k) else { return Ok(0.0) };
                let b = wl.step_bytes(bytes, g[0]);
                if g.len() < 2 || b.0 == 0 {
                    return Ok(0.0);
                }
                let mut rec = Recorder::new(self.topo);
                if self.topo.one_nvlink_domain(g) {
                    lw.nvlink(&mut rec, kind, b, g, 0).map_err(err)?;
                } else {
                    lw.host(&mut rec, self.host, kind, b, g, 0).map_err(err)?;
                }
                price(rec)?
            }
            LayerStep::AllToAll { group: k, sizes } => {
                let Some(g) = group(k) else { return Ok(0.0) };
                let mut t = 0.0f64;
                for part in wl.a2a_parts(sizes, g) {
                    let mut rec = Recorder::new(self.topo);
                    let size = |i, j| part.size(i, j);
                    lw.all_to_all(&mut rec, &part.members, &size).map_err(err)?;
                    t = t.max(price(rec)?);
                }
                t
            }
            LayerStep::CpRing { pass, core } => {
                let Some(g) = group(GroupKind::Cp) else {
                    return Ok(core.0 as f64);
                };
                let Some(cp) = wl.cp.as_ref() else {
                    return Ok(core.0 as f64);
                };
                let mut t = 0.0f64;
                for ring in cp.rings(g) {
                    let mut rec = Recorder::new(self.topo);
                    lw.cp_ring(&mut rec, &ring, pass, core, cp.kv_bytes)
                        .map_err(err)?;
                    for &r in &ring {
                        rec.flush(r).map_err(err)?;
                    }
                    t = t.max(price(rec)?);
                }
                t
            }
            LayerStep::Experts(pass) => wl.moe.as_ref().map_or(0.0, |m| {
                let per_ep = match pass {
                    crate::schedule::Pass::Fwd => &m.expert_fwd,
                    crate::schedule::Pass::Bwd => &m.expert_bwd,
                };
                per_ep.iter().map(|t| t.0 as f64).fold(0.0, f64::max)
            }),
        })
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

/// The option's times for every collective of `g` and its loads (per iteration: each
/// collective's loads times its count), every collective lowered as `how` says.
fn build(
    net: &Net,
    g: &Group,
    kind: OptKind,
    slots: u32,
    switches: Vec<NodeId>,
    how: &How,
) -> Result<Opt, String> {
    let mut loads = Vec::new();
    let mut tail = Vec::new();
    let mut times = Vec::new();
    let mut records = 0.0;
    // a stage's buckets are mostly of one size: price each (kind, size) once
    let mut seen: HashMap<(CollKind, Bytes), Priced> = HashMap::new();
    for (i, c) in g.colls().into_iter().enumerate() {
        let p = match seen.get(&(c.kind, c.bytes)) {
            Some(p) => p.clone(),
            None => {
                let p = net.priced(how, &c, g, slots)?;
                seen.insert((c.kind, c.bytes), p.clone());
                p
            }
        };
        let l = if g.in_tail(i) { &mut tail } else { &mut loads };
        l.extend(p.loads.iter().map(|&(ch, v)| (ch, v * c.count as f64)));
        times.push(p.time);
        records += p.records as f64 * c.count as f64;
    }
    Ok(Opt {
        kind,
        slots,
        switches,
        joint: times.clone(),
        times,
        loads: merge(loads),
        tail_loads: merge(tail),
        records,
    })
}

/// The host algorithms offered to `g`: the trace's `--collective` first, then every other
/// host algorithm that lowers differently for this group (double binary tree: all-reduces
/// of three or more; halving-doubling: a power of two from four; hierarchical: several
/// servers with the same number of members, more than one each) — so "INA against the
/// host" is against the best host algorithm.
pub fn host_algorithms(net: &Net, g: &Group) -> Vec<Algorithm> {
    let n = g.members.len();
    let mut per_server: std::collections::BTreeMap<u32, usize> = Default::default();
    for &r in &g.members {
        *per_server.entry(net.topo.server_of(r)).or_default() += 1;
    }
    let even = per_server
        .values()
        .all(|&c| Some(&c) == per_server.values().next());
    let differs = |a: Algorithm| match a {
        Algorithm::Ring => true,
        Algorithm::Dbt => n >= 3 && g.colls().iter().any(|c| c.kind == CollKind::AllReduce),
        Algorithm::Hd => n >= 4 && n.is_power_of_two(),
        Algorithm::Hierarchical => {
            net.topo.nvlink_rate.is_some()
                && per_server.len() > 1
                && even
                && per_server.values().all(|&c| c > 1)
        }
        // offered only as --collective (not in Algorithm::ALL)
        Algorithm::Swing => false,
    };
    let mut algos = vec![net.host];
    algos.extend(
        Algorithm::ALL
            .into_iter()
            .filter(|&a| a != net.host && differs(a)),
    );
    algos
}

/// The host options of a *cohort*: groups that run the same collectives at the same time
/// (a stage's TP groups, a stage's DP groups, the embedding groups). Every collective of
/// every option ([`host_algorithms`]) is lowered as the trace lowers it and replayed
/// ([`PriceNet::price_together`]) twice: alone, and with every group of the cohort
/// running the same collective on the same algorithm (where the group is offered it;
/// all-gathers, and groups it is not offered to, on `--collective`), all started
/// together — its time in the all-host plan of that algorithm, where the cohort's
/// collectives share NICs and fabric links as the replay shares them ([`Opt::joint`]).
/// A TP group's `times` are the joint ones (its replicas' layers run in step, and the
/// slowest sets the pipeline's pace); a DP or embedding group's are its own, the model
/// adding the cohort's contention as a load ([`super::model`]). A group inside one NVLink
/// domain has the NVLink option only (its records are timers: nothing to share).
pub fn hosts(net: &Net, cohort: &[&Group]) -> Result<Vec<Vec<Opt>>, String> {
    let mut out: Vec<Vec<Opt>> = vec![Vec::new(); cohort.len()];
    let mut shared: Vec<usize> = Vec::new();
    for (i, g) in cohort.iter().enumerate() {
        if g.nvlink {
            let how = How::Host(net.host);
            out[i].push(build(net, g, OptKind::NvLink, 0, vec![], &how)?);
        } else {
            shared.push(i);
        }
    }
    let algos: Vec<Vec<Algorithm>> = cohort.iter().map(|g| host_algorithms(net, g)).collect();
    let mut offered = vec![net.host];
    offered.extend(
        Algorithm::ALL
            .into_iter()
            .filter(|&a| a != net.host && shared.iter().any(|&i| algos[i].contains(&a))),
    );
    let mut pricer = CohortPricer {
        net,
        cohort,
        joint: HashMap::new(),
        alone: HashMap::new(),
    };
    for &a in &offered {
        // under `a`, a group's algorithm for a collective of `kind`
        let algo = |i: usize, kind: CollKind| {
            if kind != CollKind::AllGather && algos[i].contains(&a) {
                a
            } else {
                net.host
            }
        };
        for &i in shared.iter().filter(|&&i| algos[i].contains(&a)) {
            let g = cohort[i];
            let own = !matches!(g.role, crate::trace::groups::Role::Tp { .. });
            let mut opt = Opt {
                kind: OptKind::Host(a),
                slots: 0,
                switches: vec![],
                times: Vec::new(),
                joint: Vec::new(),
                loads: Vec::new(),
                tail_loads: Vec::new(),
                records: 0.0,
            };
            let mut loads = Vec::new();
            let mut tail = Vec::new();
            for (ci, c) in g.colls().into_iter().enumerate() {
                // the groups running this collective, each on its algorithm under `a`
                let runs: Vec<(usize, Algorithm)> = shared
                    .iter()
                    .filter(|&&j| cohort[j].colls().iter().any(|d| d.same(&c)))
                    .map(|&j| (j, algo(j, c.kind)))
                    .collect();
                let joint = pricer.joint(&runs, c.kind, c.bytes, i)?;
                let time = if own && runs.len() > 1 {
                    pricer.alone(i, algo(i, c.kind), c.kind, c.bytes)?.time
                } else {
                    joint.time
                };
                let l = if g.in_tail(ci) { &mut tail } else { &mut loads };
                l.extend(joint.loads.iter().map(|&(ch, v)| (ch, v * c.count as f64)));
                opt.times.push(time);
                opt.joint.push(joint.time);
                opt.records += joint.records as f64 * c.count as f64;
            }
            opt.loads = merge(loads);
            opt.tail_loads = merge(tail);
            out[i].push(opt);
        }
    }
    Ok(out)
}

/// A joint run: the collective (primitive, size) and each running group's algorithm.
type JointKey = (CollKind, Bytes, Vec<(usize, Algorithm)>);

/// Replays a cohort's host collectives, each (collective, algorithm of every group) once.
struct CohortPricer<'n, 'g> {
    net: &'n Net<'n>,
    cohort: &'g [&'g Group],
    /// (kind, size, each running group's algorithm) → per group, its joint price.
    joint: HashMap<JointKey, HashMap<usize, Priced>>,
    /// (group, algorithm, kind, size) → its price alone.
    alone: HashMap<(usize, Algorithm, CollKind, Bytes), Priced>,
}

impl CohortPricer<'_, '_> {
    /// `runs` (group, algorithm) lowered together and priced
    /// ([`PriceNet::price_together`]; a ring alone by the wave rule, which it follows step
    /// for step: its steps' flows start together and share equally, and a replay costs
    /// more).
    fn price(
        &self,
        runs: &[(usize, Algorithm)],
        kind: CollKind,
        b: Bytes,
    ) -> Result<Vec<Priced>, String> {
        let mut rec = Recorder::new(self.net.topo);
        let mut lw = self.net.lw;
        let mut parts = Vec::with_capacity(runs.len());
        for &(i, algo) in runs {
            let from = rec.xfers.len();
            lw.host(&mut rec, algo, kind, b, &self.cohort[i].members, i as u64)
                .map_err(|e| e.to_string())?;
            parts.push(from..rec.xfers.len());
        }
        let p = PriceNet {
            topo: self.net.topo,
            routing: self.net.routing,
            payload: self.net.payload,
        };
        match runs {
            [(_, Algorithm::Ring)] => Ok(vec![p.price(&rec.xfers, 1)?]),
            _ => p.price_together(&rec.xfers, &parts),
        }
    }

    /// Group `i`'s price when `runs` run the collective together.
    fn joint(
        &mut self,
        runs: &[(usize, Algorithm)],
        kind: CollKind,
        b: Bytes,
        i: usize,
    ) -> Result<Priced, String> {
        let key = (kind, b, runs.to_vec());
        if !self.joint.contains_key(&key) {
            let priced = self.price(runs, kind, b)?;
            let by_group = runs.iter().map(|r| r.0).zip(priced).collect();
            self.joint.insert(key.clone(), by_group);
        }
        Ok(self.joint[&key][&i].clone())
    }

    /// Group `i`'s price alone on `algo`.
    fn alone(
        &mut self,
        i: usize,
        algo: Algorithm,
        kind: CollKind,
        b: Bytes,
    ) -> Result<Priced, String> {
        let key = (i, algo, kind, b);
        if !self.alone.contains_key(&key) {
            let p = self.price(&[(i, algo)], kind, b)?.remove(0);
            self.alone.insert(key, p);
        }
        Ok(self.alone[&key].clone())
    }
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
    // the fan-in at each parent, as the trace of a plan counts it
    let mut fanin: HashMap<NodeId, u32> = HashMap::new();
    for e in &edges {
        *fanin.entry(e.1).or_default() += 1;
    }
    let with_fanin: Vec<(NodeId, NodeId, u32)> =
        edges.iter().map(|&(c, p)| (c, p, fanin[&p])).collect();
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
        &How::Tree(&with_fanin),
    )
}

/// The racks of `g` whose aggregating ToR holds at least two members.
pub fn rina_racks(net: &Net, g: &Group) -> RinaRacks {
    crate::lower::rina_racks(net.topo, &g.members, &net.tor, |t| net.can_agg[t.idx()])
}

/// The Rina option at `k` slots (None when no rack has two members).
pub fn rina(net: &Net, g: &Group, k: u32) -> Result<Option<Opt>, String> {
    let racks = rina_racks(net, g);
    if racks.racks.is_empty() {
        return Ok(None);
    }
    let tors: Vec<NodeId> = racks.racks.keys().copied().collect();
    Ok(Some(build(
        net,
        g,
        OptKind::Rina { tors: tors.clone() },
        k,
        tors,
        &How::Rina(&racks),
    )?))
}
