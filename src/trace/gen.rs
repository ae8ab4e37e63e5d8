//! Lowering a [`Workload`] onto a topology: a DAG of records streamed in dependency order.
//!
//! Every rank carries an *op chain*: the records its next action must wait for (`tail`)
//! and compute not yet attached to a record (`pending`). A record that only waits for its
//! own rank's chain takes the pending compute as its `gap`; one that must also wait for
//! another rank (a received message, a peer's collective step) first turns the pending
//! compute into a [`Mode::Compute`] record, because `gap` counts from the *last* dependency
//! and would otherwise serialise compute after communication it overlaps with.
//!
//! Pipelines (one per DP×CP replica) are generated stage by stage in an order that
//! respects their p2p dependencies, replicas that share CP or EP groups in lockstep
//! ([`iteration`]); DP buckets, layer-norm and embedding all-reduces follow once every
//! replica's backward has been emitted. Memory is O(ranks + buckets + in-flight p2p
//! messages), independent of the number of records.
//!
//! Submodules lower what is not a plain collective: [`a2a`] (all-to-alls), [`cp`] (ring
//! attention), [`channels`] (NCCL channels), [`iteration`] (one training iteration).

mod a2a;
mod bench;
mod channels;
mod cp;
mod iteration;
mod swing;

use super::options::{Algorithm, InaConfig, InaMode, InaSwitches, TraceOptions};
use super::TraceError;
use crate::megatron::TrainingConfig;
use crate::record::{AggDir, AggTag, Class, FlowRecord, Mode};
use crate::schedule::{self, CollKind, GroupKind, Workload};
use crate::topology::{LinkKind, NodeKind, Routing, Topology, TopologyError};
use crate::units::{Bytes, FlowId, Nanos, NodeId, Rank};
use std::collections::{BTreeMap, HashMap};

pub use bench::{bench_groups, generate_bench};
pub use channels::default_channels;
pub use swing::{
    peer as swing_peer, rho as swing_rho, schedule as swing_schedule, Step as SwingStep,
};

/// Counts of a generated trace.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct TraceStats {
    /// Records emitted.
    pub records: u64,
    /// Records and payload bytes by (class, mode).
    pub by_class_mode: BTreeMap<(Class, Mode), (u64, Bytes)>,
    /// Collective instances.
    pub collectives: u64,
    /// INA aggregations.
    pub aggregations: u64,
    /// Collectives that asked for halving-doubling on a non-power-of-two group and used the ring.
    pub hd_fallbacks: u64,
    /// INA-eligible collectives whose members no aggregating switch covers (e.g. ToR-only
    /// INA and a group spanning racks): lowered with the host algorithm instead.
    pub ina_fallbacks: u64,
    /// NCCL channels each network collective was split over.
    pub channels: u32,
}

#[derive(Clone, Default)]
struct Chain {
    tail: Vec<FlowId>,
    pending: Nanos,
}

#[derive(Clone, Copy)]
struct Tag {
    class: Class,
    microbatch: Option<u32>,
    layer: Option<u32>,
    stage: Option<u32>,
}

/// A rank's independent streams of work: the main one (compute, TP/CP/EP/PP traffic), and
/// one per gradient-reduction group, since dense and expert buckets go through different
/// NCCL communicators and overlap each other and the backward.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stream {
    Main,
    Dp,
    ExpertDp,
}

/// The traffic class of a layer step's group.
fn class_of(g: GroupKind) -> Class {
    match g {
        GroupKind::Tp => Class::Tp,
        GroupKind::Cp => Class::Cp,
        GroupKind::Ep | GroupKind::ExpertTp | GroupKind::ExpertTpEp => Class::Ep,
    }
}

struct Gen<'a> {
    topo: &'a Topology,
    routing: Option<Routing>,
    opts: &'a TraceOptions,
    wl: &'a Workload,
    sink: &'a mut dyn FnMut(FlowRecord) -> Result<(), TraceError>,
    stats: TraceStats,
    next_id: u64,
    next_coll: u64,
    next_agg: u64,
    iteration: u32,
    main: Vec<Chain>,
    dp: Vec<Chain>,
    edp: Vec<Chain>,
    can_agg: Vec<bool>,
    tor: Vec<Option<NodeId>>,
    nvlink_alpha: Nanos,
    /// NCCL channels per network collective.
    channels: u32,
    /// The channel records are being emitted on (inside [`Gen::over_channels`]).
    channel: u32,
    /// How many channels share each GPU's NVLink right now: NVLink records made inside
    /// a channel get `1/share` of the NVLink rate.
    nvlink_share: u32,
    /// The plan's groups (`InaMode::Planned`).
    plan: Option<super::planned::PlanIndex>,
    /// Records and bytes per (class, mode), folded into `stats` at the end (a map per record is slow).
    counts: [[(u64, u64); 4]; 7],
}

/// Generate the trace of `cfg` on `topo`, streaming records (dependencies first) to `sink`.
pub fn generate(
    cfg: &TrainingConfig,
    topo: &Topology,
    opts: &TraceOptions,
    sink: &mut dyn FnMut(FlowRecord) -> Result<(), TraceError>,
) -> Result<TraceStats, TraceError> {
    let wl = schedule::build(cfg, &opts.schedule)?;
    generate_workload(&wl, topo, opts, sink)
}

/// Generate the trace of an already built workload.
pub fn generate_workload(
    wl: &Workload,
    topo: &Topology,
    opts: &TraceOptions,
    sink: &mut dyn FnMut(FlowRecord) -> Result<(), TraceError>,
) -> Result<TraceStats, TraceError> {
    let mut g = Gen::new(wl, topo, opts, sink)?;
    for it in 0..opts.iterations {
        g.iteration = it;
        g.iteration_records()?;
    }
    Ok(g.finish())
}

impl<'a> Gen<'a> {
    /// A generator for `wl` on `topo`: options checked, INA switches and routing set up,
    /// every rank's chains empty.
    fn new(
        wl: &'a Workload,
        topo: &'a Topology,
        opts: &'a TraceOptions,
        sink: &'a mut dyn FnMut(FlowRecord) -> Result<(), TraceError>,
    ) -> Result<Self, TraceError> {
        topo.check_world(wl.world(), wl.tp())?;
        if opts.iterations == 0 {
            return Err(TraceError::Generate(
                "--iterations must be at least 1".into(),
            ));
        }
        let channels = match opts.nccl_channels {
            Some(0) => {
                return Err(TraceError::Generate(
                    "--nccl-channels must be at least 1".into(),
                ))
            }
            Some(c) => c,
            None => default_channels(topo),
        };
        let (can_agg, tor) = if opts.ina.mode != InaMode::Off {
            aggregating_switches(topo, &opts.ina.switches)?
        } else {
            (
                vec![false; topo.node_count()],
                vec![None; topo.node_count()],
            )
        };
        let routing = if opts.ina.mode != InaMode::Off {
            Some(Routing::new(topo, opts.seed)?)
        } else {
            None
        };
        let plan = match (opts.ina.mode, &opts.plan) {
            (InaMode::Planned, Some(p)) => Some(super::planned::PlanIndex::new(p, topo)?),
            (InaMode::Planned, None) => {
                return Err(TraceError::Generate(
                    "INA mode `planned` needs a plan (ina3d trace --plan FILE)".into(),
                ))
            }
            _ => None,
        };
        let w = wl.world() as usize;
        Ok(Gen {
            topo,
            routing,
            opts,
            wl,
            sink,
            stats: TraceStats {
                channels,
                ..TraceStats::default()
            },
            next_id: 0,
            next_coll: 0,
            next_agg: 0,
            iteration: 0,
            main: vec![Chain::default(); w],
            dp: vec![Chain::default(); w],
            edp: vec![Chain::default(); w],
            can_agg,
            tor,
            nvlink_alpha: nvlink_step_latency(topo, opts),
            channels,
            channel: 0,
            nvlink_share: 1,
            plan,
            counts: [[(0, 0); 4]; 7],
        })
    }

    /// The counts of everything emitted.
    fn finish(mut self) -> TraceStats {
        for c in Class::ALL {
            for m in [Mode::Net, Mode::Ina, Mode::NvLink, Mode::Compute] {
                let (n, b) = self.counts[c as usize][m as usize];
                if n > 0 {
                    self.stats.by_class_mode.insert((c, m), (n, Bytes(b)));
                }
            }
        }
        self.stats
    }
}

/// Which switches may aggregate (`can[node]`) under `switches`, and each host's ToR (the
/// first switch its NIC attaches to). Errors: an id that is not a switch of `topo`.
pub fn aggregating_switches(
    topo: &Topology,
    switches: &InaSwitches,
) -> Result<(Vec<bool>, Vec<Option<NodeId>>), TraceError> {
    if topo.fabric == crate::topology::Fabric::Direct {
        return Err(TraceError::Generate(format!(
            "topology `{}` is switchless direct connect (TopoOpt): no switch can aggregate, so INA options do not apply; use a host algorithm (--ina off, --collective ring|hd|dbt|swing)",
            topo.source
        )));
    }
    let n = topo.node_count();
    let mut can_agg = vec![false; n];
    let mut tor = vec![None; n];
    for l in topo.links.iter().filter(|l| l.kind == LinkKind::Nic) {
        let (h, s) = if topo.kinds[l.a.idx()] == NodeKind::Host {
            (l.a, l.b)
        } else {
            (l.b, l.a)
        };
        if topo.kinds[s.idx()] == NodeKind::Switch && tor[h.idx()].is_none() {
            tor[h.idx()] = Some(s);
        }
    }
    match switches {
        InaSwitches::All => {
            for (i, k) in topo.kinds.iter().enumerate() {
                can_agg[i] = *k == NodeKind::Switch;
            }
        }
        InaSwitches::Tor => {
            for t in tor.iter().flatten() {
                can_agg[t.idx()] = true;
            }
        }
        InaSwitches::Ids(ids) => {
            for id in ids {
                if topo.kind(*id) != Some(NodeKind::Switch) {
                    return Err(TraceError::Generate(format!(
                        "--ina-switches: node {id} is not a switch of topology `{}`",
                        topo.source
                    )));
                }
                can_agg[id.idx()] = true;
            }
        }
    }
    Ok((can_agg, tor))
}

/// NCCL's own latency estimate for one step of a ring over NVLink with its Simple
/// protocol (the one it picks for the large buffers of training): 3.4 µs
/// (`hwLatencies[NCCL_HW_NVLINK][NCCL_ALGO_RING][NCCL_PROTO_SIMPLE]` in NCCL's
/// `src/graph/tuning.cc`, docs/model.md#nvlink-records).
pub const NCCL_NVLINK_RING_STEP: Nanos = Nanos(3_400);

/// Latency α per algorithm step of an NVLink record: the option, else
/// [`NCCL_NVLINK_RING_STEP`].
pub fn nvlink_step_latency(_topo: &Topology, opts: &TraceOptions) -> Nanos {
    opts.nvlink_step_latency.unwrap_or(NCCL_NVLINK_RING_STEP)
}

/// Duration of a collective confined to one NVLink domain (the `nvlink` record's `dur`):
/// `busbw_factor · S / (nvlink_rate / share) + steps · α` (ring model; `share` channels
/// use the NVLink at once, 1 outside channels), α from [`nvlink_step_latency`]. `None`
/// when the topology has no NVLink rate. The generator and the planner both call this.
pub fn nvlink_collective_time(
    topo: &Topology,
    alpha: Nanos,
    kind: CollKind,
    bytes: Bytes,
    n: u32,
    share: u32,
) -> Option<Nanos> {
    let rate = topo.nvlink_rate?;
    let moved = Bytes((kind.busbw_factor(n) * bytes.0 as f64).round() as u64);
    let steps = match kind {
        CollKind::AllReduce => 2 * (n as u64 - 1),
        _ => n as u64 - 1,
    };
    Some(rate.transmit_time(Bytes(moved.0 * share as u64)) + Nanos(steps * alpha.0))
}

fn is_pow2(n: usize) -> bool {
    n.is_power_of_two()
}

impl Gen<'_> {
    fn chain(&mut self, s: Stream, r: Rank) -> &mut Chain {
        match s {
            Stream::Main => &mut self.main[r.idx()],
            Stream::Dp => &mut self.dp[r.idx()],
            Stream::ExpertDp => &mut self.edp[r.idx()],
        }
    }

    /// One edge of an INA aggregation: a `Mode::Ina` record of step `step` of collective
    /// `coll` over `group` members, aggregated as `agg` says (no fixed duration: the
    /// back-ends stream it with the other edges of its aggregation).
    #[allow(clippy::too_many_arguments)]
    fn emit_ina(
        &mut self,
        src: NodeId,
        dst: NodeId,
        bytes: Bytes,
        deps: Vec<FlowId>,
        gap: Nanos,
        tag: Tag,
        coll: u64,
        step: u32,
        group: u32,
        agg: AggTag,
    ) -> Result<FlowId, TraceError> {
        let class = tag.class;
        self.emit(
            src,
            dst,
            bytes,
            deps,
            gap,
            Nanos(0),
            Mode::Ina,
            class,
            tag,
            Some(coll),
            Some(step),
            Some(group),
            Some(agg),
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn emit(
        &mut self,
        src: NodeId,
        dst: NodeId,
        bytes: Bytes,
        deps: Vec<FlowId>,
        gap: Nanos,
        dur: Nanos,
        mode: Mode,
        class: Class,
        tag: Tag,
        coll: Option<u64>,
        step: Option<u32>,
        group: Option<u32>,
        agg: Option<AggTag>,
    ) -> Result<FlowId, TraceError> {
        let id = FlowId(self.next_id);
        self.next_id += 1;
        self.stats.records += 1;
        let e = &mut self.counts[class as usize][mode as usize];
        e.0 += 1;
        e.1 += bytes.0;
        (self.sink)(FlowRecord {
            id,
            src,
            dst,
            bytes,
            deps,
            gap,
            dur,
            mode,
            class,
            iteration: self.iteration,
            collective: coll,
            step,
            microbatch: tag.microbatch,
            layer: tag.layer,
            stage: tag.stage,
            group_size: group,
            agg,
            channel: if mode == Mode::Net { self.channel } else { 0 },
        })?;
        Ok(id)
    }

    /// Replace a rank's chain tail, reusing its allocation (this runs for every record).
    fn set_tail(&mut self, s: Stream, r: Rank, ids: &[FlowId]) {
        let t = &mut self.chain(s, r).tail;
        t.clear();
        t.extend_from_slice(ids);
    }

    /// Turn a rank's pending compute into a record so an external dependency can join.
    fn flush(&mut self, s: Stream, r: Rank, tag: Tag) -> Result<(), TraceError> {
        let c = self.chain(s, r).clone();
        if c.pending.0 == 0 {
            return Ok(());
        }
        let node = self.topo.gpu(r);
        let id = self.emit(
            node,
            node,
            Bytes(0),
            c.tail,
            Nanos(0),
            c.pending,
            Mode::Compute,
            Class::Compute,
            Tag {
                class: Class::Compute,
                ..tag
            },
            None,
            None,
            None,
            None,
        )?;
        *self.chain(s, r) = Chain {
            tail: vec![id],
            pending: Nanos(0),
        };
        Ok(())
    }

    /// Deps and gap for a record sent by `r` that also waits for `external`.
    fn start(
        &mut self,
        s: Stream,
        r: Rank,
        external: &[FlowId],
        tag: Tag,
    ) -> Result<(Vec<FlowId>, Nanos), TraceError> {
        if !external.is_empty() {
            self.flush(s, r, tag)?;
        }
        let c = self.chain(s, r);
        let mut deps = std::mem::take(&mut c.tail);
        let gap = std::mem::take(&mut c.pending);
        deps.extend_from_slice(external);
        Ok((deps, gap))
    }

    /// Point-to-point transfer between ranks: a network flow, or an NVLink record when both share a server.
    #[allow(clippy::too_many_arguments)]
    fn p2p(
        &mut self,
        a: Rank,
        b: Rank,
        bytes: Bytes,
        deps: Vec<FlowId>,
        gap: Nanos,
        tag: Tag,
        coll: Option<u64>,
        step: Option<u32>,
    ) -> Result<FlowId, TraceError> {
        let (na, nb) = (self.topo.gpu(a), self.topo.gpu(b));
        if self.topo.same_nvlink_domain(a, b) {
            let rate = self.topo.nvlink_rate.expect("nvlink domain has a rate");
            // Inside a channel the GPU's NVLink is shared by every channel's transfer.
            let dur =
                rate.transmit_time(Bytes(bytes.0 * self.nvlink_share as u64)) + self.nvlink_alpha;
            self.emit(
                na,
                nb,
                bytes,
                deps,
                gap,
                dur,
                Mode::NvLink,
                tag.class,
                tag,
                coll,
                step,
                Some(2),
                None,
            )
        } else {
            self.emit(
                na,
                nb,
                bytes,
                deps,
                gap,
                Nanos(0),
                Mode::Net,
                tag.class,
                tag,
                coll,
                step,
                None,
                None,
            )
        }
    }

    fn ina_enabled(&self, class: Class) -> bool {
        self.opts.ina.mode != InaMode::Off && self.opts.ina.classes.contains(&class)
    }

    /// One collective over `members` (in ring order) of size `bytes`; updates their chains.
    fn collective(
        &mut self,
        kind: CollKind,
        bytes: Bytes,
        members: &[Rank],
        s: Stream,
        tag: Tag,
    ) -> Result<(), TraceError> {
        let n = members.len();
        if n <= 1 || bytes.0 == 0 {
            return Ok(());
        }
        if kind == CollKind::AllToAll {
            // Never aggregated in switches; lowered pairwise (uniform split).
            let m = n as u32;
            return self.all_to_all(members, &|_, j| channels::slice(bytes, m, j as u32), s, tag);
        }
        self.stats.collectives += 1;
        let coll = self.next_coll;
        self.next_coll += 1;
        let server = self.topo.server_of(members[0]);
        if self.topo.nvlink_rate.is_some()
            && members.iter().all(|r| self.topo.server_of(*r) == server)
        {
            return self.nvlink_collective(kind, bytes, members, s, tag, coll);
        }
        if self.plan.is_some() && matches!(kind, CollKind::AllReduce | CollKind::ReduceScatter) {
            return self.planned(kind, bytes, members, s, tag, coll);
        }
        if self.ina_enabled(tag.class)
            && matches!(kind, CollKind::AllReduce | CollKind::ReduceScatter)
        {
            if self.opts.ina.mode == InaMode::Rina && kind == CollKind::AllReduce {
                return self.rina(bytes, members, s, tag, coll, None);
            }
            if self.opts.ina.mode != InaMode::Rina {
                return self.ina_tree(kind, bytes, members, s, tag, coll);
            }
        }
        self.host_collective(kind, bytes, members, s, tag, coll)
    }

    /// A collective with a host algorithm, split over the NCCL channels
    /// (docs/model.md#nccl-channels): each channel runs the algorithm on its slice of S.
    fn host_collective(
        &mut self,
        kind: CollKind,
        bytes: Bytes,
        members: &[Rank],
        s: Stream,
        tag: Tag,
        coll: u64,
    ) -> Result<(), TraceError> {
        let c = self.channels_for(bytes, members);
        if c <= 1 {
            return self.host_algorithm(kind, bytes, members, s, tag, coll);
        }
        self.over_channels(members, s, tag, c, bytes, |g, slice| {
            g.host_algorithm(kind, slice, members, s, tag, coll)
        })
    }

    /// One channel's (or the only) run of `--collective` over `members`.
    fn host_algorithm(
        &mut self,
        kind: CollKind,
        bytes: Bytes,
        members: &[Rank],
        s: Stream,
        tag: Tag,
        coll: u64,
    ) -> Result<(), TraceError> {
        let n = members.len();
        match self.opts.collective {
            Algorithm::Ring => self.ring(kind, bytes, members, s, tag, coll),
            Algorithm::Dbt if kind == CollKind::AllReduce => self.dbt(bytes, members, s, tag, coll),
            Algorithm::Dbt => self.ring(kind, bytes, members, s, tag, coll),
            Algorithm::Hd if is_pow2(n) => self.hd(kind, bytes, members, s, tag, coll),
            Algorithm::Hd => {
                self.stats.hd_fallbacks += 1;
                self.ring(kind, bytes, members, s, tag, coll)
            }
            Algorithm::Hierarchical => self.hierarchical(kind, bytes, members, s, tag, coll),
            Algorithm::Swing if kind == CollKind::AllReduce => {
                self.swing(bytes, members, s, tag, coll)
            }
            Algorithm::Swing => self.ring(kind, bytes, members, s, tag, coll),
        }
    }

    /// Analytical NVLink collective: `busbw_factor · S / rate + steps · α` (ring model;
    /// `rate/share` inside a channel).
    fn nvlink_duration(&self, kind: CollKind, bytes: Bytes, n: u32) -> Nanos {
        nvlink_collective_time(
            self.topo,
            self.nvlink_alpha,
            kind,
            bytes,
            n,
            self.nvlink_share,
        )
        .expect("nvlink")
    }

    fn nvlink_collective(
        &mut self,
        kind: CollKind,
        bytes: Bytes,
        members: &[Rank],
        s: Stream,
        tag: Tag,
        coll: u64,
    ) -> Result<(), TraceError> {
        let p0 = self.chain(s, members[0]).pending;
        let same = members.iter().all(|r| self.chain(s, *r).pending == p0);
        if !same {
            for &r in members {
                self.flush(s, r, tag)?;
            }
        }
        let mut deps = Vec::new();
        let mut gap = Nanos(0);
        for &r in members {
            let c = self.chain(s, r);
            deps.append(&mut c.tail);
            gap = std::mem::take(&mut c.pending);
        }
        deps.sort_unstable();
        deps.dedup();
        let dur = self.nvlink_duration(kind, bytes, members.len() as u32);
        let (a, b) = (
            self.topo.gpu(members[0]),
            self.topo.gpu(*members.last().expect("n>1")),
        );
        let id = self.emit(
            a,
            b,
            bytes,
            deps,
            gap,
            dur,
            Mode::NvLink,
            tag.class,
            tag,
            Some(coll),
            None,
            Some(members.len() as u32),
            None,
        )?;
        for &r in members {
            self.set_tail(s, r, &[id]);
        }
        Ok(())
    }

    /// Ring: step k of rank i sends chunk `(i − k) mod n` to `i+1` after its step k−1 and the
    /// step k−1 it received from `i−1`. Chunks split S exactly (the first `S mod n` get a byte more).
    fn ring(
        &mut self,
        kind: CollKind,
        bytes: Bytes,
        members: &[Rank],
        s: Stream,
        tag: Tag,
        coll: u64,
    ) -> Result<(), TraceError> {
        let order = channels::ring_order(self.topo, members, self.channel);
        let members = &order[..];
        let n = members.len();
        let steps = match kind {
            CollKind::AllReduce => 2 * (n - 1),
            _ => n - 1,
        };
        let chunk =
            |c: usize| Bytes(bytes.0 / n as u64 + u64::from((c as u64) < bytes.0 % n as u64));
        let mut prev: Vec<FlowId> = Vec::with_capacity(n);
        let mut cur: Vec<FlowId> = Vec::with_capacity(n);
        for k in 0..steps {
            cur.clear();
            for i in 0..n {
                let (deps, gap) = if k == 0 {
                    self.start(s, members[i], &[], tag)?
                } else {
                    (vec![prev[i], prev[(i + n - 1) % n]], Nanos(0))
                };
                let c = (i + 2 * n - k % n) % n;
                let id = self.p2p(
                    members[i],
                    members[(i + 1) % n],
                    chunk(c),
                    deps,
                    gap,
                    tag,
                    Some(coll),
                    Some(k as u32),
                )?;
                cur.push(id);
            }
            std::mem::swap(&mut prev, &mut cur);
        }
        for i in 0..n {
            self.set_tail(s, members[i], &[prev[i], prev[(i + n - 1) % n]]);
        }
        Ok(())
    }

    /// Double binary tree (approximation of NCCL's): two heap-shaped binary trees, over the
    /// members in order and in reverse, each reducing half of S to its root and
    /// broadcasting it back. Whole halves move per edge (no chunk pipelining), so deep
    /// trees are slower here than in NCCL.
    fn dbt(
        &mut self,
        bytes: Bytes,
        members: &[Rank],
        s: Stream,
        tag: Tag,
        coll: u64,
    ) -> Result<(), TraceError> {
        let n = members.len();
        let halves = [Bytes(bytes.0 - bytes.0 / 2), Bytes(bytes.0 / 2)];
        // Interior ranks wait for their children while computing: make pending compute explicit
        // (a record) so the children's partial sums do not wait behind it.
        let mut starts: Vec<Vec<FlowId>> = Vec::with_capacity(n);
        for &r in members {
            self.flush(s, r, tag)?;
            starts.push(std::mem::take(&mut self.chain(s, r).tail));
        }
        let mut tails: Vec<Vec<FlowId>> = vec![Vec::new(); n];
        for (t, half) in halves.into_iter().enumerate() {
            let at = |pos: usize| if t == 0 { pos } else { n - 1 - pos };
            let mut up: Vec<Option<FlowId>> = vec![None; n];
            for pos in (1..n).rev() {
                let mut deps = starts[at(pos)].clone();
                for ch in [2 * pos + 1, 2 * pos + 2] {
                    if ch < n {
                        deps.push(up[ch].expect("children first"));
                    }
                }
                let id = self.p2p(
                    members[at(pos)],
                    members[at((pos - 1) / 2)],
                    half,
                    deps,
                    Nanos(0),
                    tag,
                    Some(coll),
                    Some(2 * t as u32),
                )?;
                up[pos] = Some(id);
            }
            let mut down: Vec<Option<FlowId>> = vec![None; n];
            for pos in 0..n {
                for ch in [2 * pos + 1, 2 * pos + 2] {
                    if ch >= n {
                        continue;
                    }
                    let deps = if pos == 0 {
                        let mut d = starts[at(0)].clone();
                        d.extend(
                            [1, 2]
                                .iter()
                                .filter(|&&c| c < n)
                                .map(|&c| up[c].expect("up")),
                        );
                        d
                    } else {
                        vec![down[pos].expect("parent first")]
                    };
                    let id = self.p2p(
                        members[at(pos)],
                        members[at(ch)],
                        half,
                        deps,
                        Nanos(0),
                        tag,
                        Some(coll),
                        Some(2 * t as u32 + 1),
                    )?;
                    down[ch] = Some(id);
                    tails[at(pos)].push(id);
                    tails[at(ch)].push(id);
                }
            }
        }
        for (i, &r) in members.iter().enumerate() {
            self.chain(s, r).tail = std::mem::take(&mut tails[i]);
        }
        Ok(())
    }

    /// Recursive halving (reduce-scatter) then doubling (all-gather): log₂ n steps each,
    /// rank i exchanging S/2^(k+1) with i XOR n/2^(k+1) in halving step k.
    fn hd(
        &mut self,
        kind: CollKind,
        bytes: Bytes,
        members: &[Rank],
        s: Stream,
        tag: Tag,
        coll: u64,
    ) -> Result<(), TraceError> {
        let n = members.len();
        let lg = n.trailing_zeros() as usize;
        let mut phases: Vec<(usize, Bytes)> = Vec::new(); // (distance, bytes) per step
        if kind != CollKind::AllGather {
            for k in 0..lg {
                phases.push((n >> (k + 1), Bytes(bytes.0 >> (k + 1))));
            }
        }
        if kind != CollKind::ReduceScatter {
            for k in 0..lg {
                phases.push((1 << k, Bytes(bytes.0 >> (lg - k))));
            }
        }
        let mut prev: Vec<FlowId> = Vec::new();
        for (step, &(d, b)) in phases.iter().enumerate() {
            let mut cur = Vec::with_capacity(n);
            for i in 0..n {
                let (deps, gap) = if step == 0 {
                    self.start(s, members[i], &[], tag)?
                } else {
                    (vec![prev[i], prev[i ^ phases[step - 1].0]], Nanos(0))
                };
                cur.push(self.p2p(
                    members[i],
                    members[i ^ d],
                    b,
                    deps,
                    gap,
                    tag,
                    Some(coll),
                    Some(step as u32),
                )?);
            }
            prev = cur;
        }
        let last = phases.last().expect("n ≥ 2").0;
        for i in 0..n {
            self.set_tail(s, members[i], &[prev[i], prev[i ^ last]]);
        }
        Ok(())
    }

    /// NVLink reduce-scatter per server, one network ring per local index over S/g, NVLink all-gather.
    fn hierarchical(
        &mut self,
        kind: CollKind,
        bytes: Bytes,
        members: &[Rank],
        s: Stream,
        tag: Tag,
        coll: u64,
    ) -> Result<(), TraceError> {
        let mut by_server: BTreeMap<u32, Vec<Rank>> = BTreeMap::new();
        for &r in members {
            by_server.entry(self.topo.server_of(r)).or_default().push(r);
        }
        let g = by_server.values().next().map_or(0, Vec::len);
        if self.topo.nvlink_rate.is_none() || g <= 1 || by_server.values().any(|v| v.len() != g) {
            // One GPU per server (or uneven): nothing to do inside servers.
            return self.ring(kind, bytes, members, s, tag, coll);
        }
        let servers: Vec<Vec<Rank>> = by_server.into_values().collect();
        let shard = Bytes(bytes.0 / g as u64);
        if kind != CollKind::AllGather {
            for grp in &servers {
                self.nvlink_collective(CollKind::ReduceScatter, bytes, grp, s, tag, coll)?;
            }
        }
        let inter = kind;
        for j in 0..g {
            let ring: Vec<Rank> = servers.iter().map(|v| v[j]).collect();
            self.ring(inter, shard, &ring, s, tag, coll)?;
        }
        if kind != CollKind::ReduceScatter {
            for grp in &servers {
                self.nvlink_collective(CollKind::AllGather, bytes, grp, s, tag, coll)?;
            }
        }
        Ok(())
    }

    fn new_agg(&mut self) -> u64 {
        self.stats.aggregations += 1;
        let a = self.next_agg;
        self.next_agg += 1;
        a
    }

    /// INA all-reduce (or reduce-scatter) over the topology's aggregation tree (SwitchML: the
    /// tree's root alone). Every edge carries S up; down edges carry S (all-reduce) or the
    /// members' shards below them (reduce-scatter).
    fn ina_tree(
        &mut self,
        kind: CollKind,
        bytes: Bytes,
        members: &[Rank],
        s: Stream,
        tag: Tag,
        coll: u64,
    ) -> Result<(), TraceError> {
        let nodes: Vec<NodeId> = members.iter().map(|r| self.topo.gpu(*r)).collect();
        let routing = self.routing.as_ref().expect("routing built when INA is on");
        let can = &self.can_agg;
        let tree = match routing.aggregation_tree(&nodes, &|v: NodeId| can[v.idx()], coll) {
            Ok(t) => t,
            Err(TopologyError::NoAggregator { .. }) => {
                // No aggregating switch sits above every member (e.g. `--ina-switches tor` and a
                // group spanning racks): this collective uses the host algorithm, counted.
                self.stats.ina_fallbacks += 1;
                return self.host_collective(kind, bytes, members, s, tag, coll);
            }
            Err(e) => return Err(e.into()),
        };
        let edges: Vec<(NodeId, NodeId, u32)> = if self.opts.ina.mode == InaMode::SwitchMl {
            nodes
                .iter()
                .map(|&m| (m, tree.root, nodes.len() as u32))
                .collect()
        } else {
            tree.edges
                .iter()
                .map(|e| (e.child, e.parent, e.fanin_at_parent))
                .collect()
        };
        self.emit_tree(kind, bytes, members, s, tag, coll, edges)
    }

    /// A collective as the plan decides for its group: host algorithm, the plan's tree,
    /// or Rina over the plan's ToRs.
    fn planned(
        &mut self,
        kind: CollKind,
        bytes: Bytes,
        members: &[Rank],
        s: Stream,
        tag: Tag,
        coll: u64,
    ) -> Result<(), TraceError> {
        use crate::formats::plan_json::Decision;
        let opts = self.opts;
        let plan = opts.plan.as_ref().expect("planned mode has a plan");
        let index = self.plan.as_ref().expect("planned mode has an index");
        let g = index.group(plan, tag.class, members)?;
        match &g.decision {
            Decision::Host => self.host_collective(kind, bytes, members, s, tag, coll),
            Decision::Rina { tors } if kind == CollKind::AllReduce => {
                self.rina(bytes, members, s, tag, coll, Some(tors))
            }
            Decision::Rina { .. } => self.host_collective(kind, bytes, members, s, tag, coll),
            Decision::Tree { edges, .. } => {
                let mut fanin: HashMap<NodeId, u32> = HashMap::new();
                for e in edges {
                    *fanin.entry(e.1).or_default() += 1;
                }
                let edges = edges.iter().map(|&(c, p)| (c, p, fanin[&p])).collect();
                self.emit_tree(kind, bytes, members, s, tag, coll, edges)
            }
        }
    }

    /// Emit an INA all-reduce (or reduce-scatter) over `edges` (child, parent, fan-in at
    /// parent), bottom-up with the root's edges last.
    #[allow(clippy::too_many_arguments)]
    fn emit_tree(
        &mut self,
        kind: CollKind,
        bytes: Bytes,
        members: &[Rank],
        s: Stream,
        tag: Tag,
        coll: u64,
        mut edges: Vec<(NodeId, NodeId, u32)>,
    ) -> Result<(), TraceError> {
        let nodes: Vec<NodeId> = members.iter().map(|r| self.topo.gpu(*r)).collect();
        if edges.is_empty() {
            return Err(TraceError::Generate(format!(
                "aggregation tree of {} members has no edges",
                nodes.len()
            )));
        }
        // Bottom-up order is given by the tree; keep it stable for determinism.
        let rank_of: HashMap<NodeId, Rank> =
            nodes.iter().copied().zip(members.iter().copied()).collect();
        let n = members.len() as u64;
        // Leaves below each node (for reduce-scatter shard sizes).
        let mut below: HashMap<NodeId, u64> = nodes.iter().map(|&m| (m, 1)).collect();
        for &(c, p, _) in &edges {
            let b = below.get(&c).copied().unwrap_or(0);
            *below.entry(p).or_default() += b;
        }
        let agg = self.new_agg();
        let mut up_into: HashMap<NodeId, Vec<FlowId>> = HashMap::new();
        let edges_ref = std::mem::take(&mut edges);
        for &(c, p, fanin) in &edges_ref {
            let (deps, gap) = match rank_of.get(&c) {
                Some(&r) => self.start(s, r, &[], tag)?,
                None => (up_into.remove(&c).unwrap_or_default(), Nanos(0)),
            };
            let id = self.emit_ina(
                c,
                p,
                bytes,
                deps,
                gap,
                tag,
                coll,
                0,
                members.len() as u32,
                AggTag {
                    id: agg,
                    switch: p,
                    fanin,
                    dir: AggDir::Up,
                },
            )?;
            up_into.entry(p).or_default().push(id);
        }
        let root = edges_ref.last().map(|e| e.1).expect("edges");
        let root_in = up_into.remove(&root).unwrap_or_default();
        let mut down_into: HashMap<NodeId, FlowId> = HashMap::new();
        for &(c, p, fanin) in edges_ref.iter().rev() {
            let deps = if p == root {
                root_in.clone()
            } else {
                vec![*down_into.get(&p).expect("parents before children top-down")]
            };
            let b = match kind {
                CollKind::ReduceScatter => Bytes(bytes.0 * below.get(&c).copied().unwrap_or(1) / n),
                _ => bytes,
            };
            let id = self.emit_ina(
                p,
                c,
                b,
                deps,
                Nanos(0),
                tag,
                coll,
                1,
                members.len() as u32,
                AggTag {
                    id: agg,
                    switch: p,
                    fanin,
                    dir: AggDir::Down,
                },
            )?;
            down_into.insert(c, id);
            if let Some(&r) = rank_of.get(&c) {
                self.set_tail(s, r, &[id]);
            }
        }
        Ok(())
    }

    /// Rina: members under an aggregating ToR with at least two members reduce into the ToR
    /// (an up-only aggregation), the ToRs and the remaining members run a ring all-reduce of
    /// S as equal workers, then each ToR multicasts the result (a down-only aggregation).
    /// `only`: the ToRs that may aggregate (a plan's), else every aggregating ToR.
    fn rina(
        &mut self,
        bytes: Bytes,
        members: &[Rank],
        s: Stream,
        tag: Tag,
        coll: u64,
        only: Option<&[NodeId]>,
    ) -> Result<(), TraceError> {
        let (racks, plain) = self.rina_racks(members, only);
        if racks.is_empty() {
            return self.ring(CollKind::AllReduce, bytes, members, s, tag, coll);
        }
        let n_members = members.len() as u32;
        // Ring workers in rank order of their first member.
        let mut workers: Vec<(Rank, RinaWorker)> =
            plain.iter().map(|&r| (r, RinaWorker::Gpu(r))).collect();
        let mut rack_agg: BTreeMap<NodeId, u64> = BTreeMap::new();
        for (tor, rs) in &racks {
            let (agg, ups) = self.rina_reduce_into_tor(*tor, rs, bytes, n_members, s, tag, coll)?;
            rack_agg.insert(*tor, agg);
            workers.push((rs[0], RinaWorker::Tor(*tor, ups)));
        }
        workers.sort_by_key(|w| w.0);
        if workers.len() == 1 {
            // One rack holds everyone: plain single-switch aggregation.
            if let (_, RinaWorker::Tor(tor, ups)) = &workers[0] {
                let down = RinaDown {
                    tor: *tor,
                    agg: rack_agg[tor],
                    deps: ups.clone(),
                    step: 1,
                };
                self.rina_multicast(&racks[tor], &down, bytes, n_members, s, tag, coll)?;
            }
            return Ok(());
        }
        let done = self.rina_ring(&workers, bytes, s, tag, coll)?;
        let steps = 2 * (workers.len() as u32 - 1);
        for (i, (_, w)) in workers.iter().enumerate() {
            match w {
                RinaWorker::Gpu(r) => self.chain(s, *r).tail = done[i].clone(),
                RinaWorker::Tor(tor, _) => {
                    let down = RinaDown {
                        tor: *tor,
                        agg: self.new_agg(),
                        deps: done[i].clone(),
                        step: steps + 1,
                    };
                    self.rina_multicast(&racks[tor], &down, bytes, n_members, s, tag, coll)?;
                }
            }
        }
        Ok(())
    }

    /// Rina's racks: members under an aggregating ToR, when at least two share it; the
    /// other members stay plain ring workers. `only`: the ToRs that may aggregate.
    fn rina_racks(
        &self,
        members: &[Rank],
        only: Option<&[NodeId]>,
    ) -> (BTreeMap<NodeId, Vec<Rank>>, Vec<Rank>) {
        let mut racks: BTreeMap<NodeId, Vec<Rank>> = BTreeMap::new();
        let mut plain: Vec<Rank> = Vec::new();
        for &r in members {
            let node = self.topo.gpu(r);
            match self.tor[node.idx()] {
                Some(t) if only.map_or(self.can_agg[t.idx()], |o| o.contains(&t)) => {
                    racks.entry(t).or_default().push(r)
                }
                _ => plain.push(r),
            }
        }
        racks.retain(|_, v| {
            if v.len() < 2 {
                plain.extend(v.iter().copied());
                false
            } else {
                true
            }
        });
        (racks, plain)
    }

    /// The rack's members reduce S into their ToR: an up-only aggregation. Returns its id
    /// and the up edges (what the ToR's ring steps wait for).
    #[allow(clippy::too_many_arguments)]
    fn rina_reduce_into_tor(
        &mut self,
        tor: NodeId,
        rs: &[Rank],
        bytes: Bytes,
        n_members: u32,
        s: Stream,
        tag: Tag,
        coll: u64,
    ) -> Result<(u64, Vec<FlowId>), TraceError> {
        let agg = self.new_agg();
        let mut ups = Vec::new();
        for &r in rs {
            let (deps, gap) = self.start(s, r, &[], tag)?;
            ups.push(self.emit_ina(
                self.topo.gpu(r),
                tor,
                bytes,
                deps,
                gap,
                tag,
                coll,
                0,
                n_members,
                AggTag {
                    id: agg,
                    switch: tor,
                    fanin: rs.len() as u32,
                    dir: AggDir::Up,
                },
            )?);
        }
        Ok((agg, ups))
    }

    /// The ring all-reduce of S among Rina's workers (`net` records whose ends may be
    /// ToRs); returns, per worker, the records its completion waits for.
    fn rina_ring(
        &mut self,
        workers: &[(Rank, RinaWorker)],
        bytes: Bytes,
        s: Stream,
        tag: Tag,
        coll: u64,
    ) -> Result<Vec<Vec<FlowId>>, TraceError> {
        let n = workers.len();
        let node_of = |w: &RinaWorker, topo: &Topology| match w {
            RinaWorker::Tor(t, _) => *t,
            RinaWorker::Gpu(r) => topo.gpu(*r),
        };
        let chunk =
            |c: usize| Bytes(bytes.0 / n as u64 + u64::from((c as u64) < bytes.0 % n as u64));
        let steps = 2 * (n - 1);
        let mut prev: Vec<FlowId> = Vec::new();
        for k in 0..steps {
            let mut cur = Vec::with_capacity(n);
            for i in 0..n {
                let (deps, gap) = if k == 0 {
                    match &workers[i].1 {
                        RinaWorker::Tor(_, ups) => (ups.clone(), Nanos(0)),
                        RinaWorker::Gpu(r) => self.start(s, *r, &[], tag)?,
                    }
                } else {
                    (vec![prev[i], prev[(i + n - 1) % n]], Nanos(0))
                };
                let (a, b) = (
                    node_of(&workers[i].1, self.topo),
                    node_of(&workers[(i + 1) % n].1, self.topo),
                );
                let c = (i + 2 * n - k % n) % n;
                cur.push(self.emit(
                    a,
                    b,
                    chunk(c),
                    deps,
                    gap,
                    Nanos(0),
                    Mode::Net,
                    tag.class,
                    tag,
                    Some(coll),
                    Some(k as u32 + 1),
                    None,
                    None,
                )?);
            }
            prev = cur;
        }
        Ok((0..n)
            .map(|i| vec![prev[i], prev[(i + n - 1) % n]])
            .collect())
    }

    /// The ToR sends the result down to its rack: a down-only aggregation `down.agg`.
    #[allow(clippy::too_many_arguments)]
    fn rina_multicast(
        &mut self,
        rs: &[Rank],
        down: &RinaDown,
        bytes: Bytes,
        n_members: u32,
        s: Stream,
        tag: Tag,
        coll: u64,
    ) -> Result<(), TraceError> {
        for &r in rs {
            let id = self.emit_ina(
                down.tor,
                self.topo.gpu(r),
                bytes,
                down.deps.clone(),
                Nanos(0),
                tag,
                coll,
                down.step,
                n_members,
                AggTag {
                    id: down.agg,
                    switch: down.tor,
                    fanin: rs.len() as u32,
                    dir: AggDir::Down,
                },
            )?;
            self.set_tail(s, r, &[id]);
        }
        Ok(())
    }
}

/// A worker of Rina's ring: a ToR standing for its rack (with the up edges into it), or a
/// plain GPU.
enum RinaWorker {
    Tor(NodeId, Vec<FlowId>),
    Gpu(Rank),
}

/// A ToR's multicast of the result to its rack.
struct RinaDown {
    tor: NodeId,
    agg: u64,
    deps: Vec<FlowId>,
    step: u32,
}

/// Metadata lines describing how a trace was generated.
pub fn header(
    cfg: &TrainingConfig,
    wl: &Workload,
    topo: &Topology,
    opts: &TraceOptions,
) -> super::TraceHeader {
    let mut h = super::TraceHeader::new();
    let ina: &InaConfig = &opts.ina;
    h.set("topology", &topo.source)
        .set("seed", opts.seed)
        .set("iterations", opts.iterations)
        .set("collective", opts.collective)
        .set("ina", ina.mode)
        .set("ina_switches", &ina.switches)
        .set("ina_slots", ina.slots)
        .set("ina_payload_bytes", ina.payload.0)
        .set("ina_window", ina.window)
        .set("ina_policy", ina.policy)
        .set("ina_classes", ina.classes.iter().map(|c| c.as_str()).collect::<Vec<_>>().join(","))
        .set("tp", wl.tp())
        .set("pp", wl.pp())
        .set("dp", wl.dp())
        .set("cp", wl.groups.cp)
        .set("vpp", wl.vpp)
        .set("world", wl.world())
        .set("rank_order", wl.groups.order.as_str())
        .set("microbatches", wl.microbatches)
        .set("warmup", wl.stages.iter().map(|s| s.warmup.to_string()).collect::<Vec<_>>().join(","))
        .set("num_layers", cfg.num_layers)
        .set("hidden_size", cfg.hidden_size)
        .set("ffn_hidden_size", cfg.ffn_hidden_size)
        .set("num_attention_heads", cfg.num_attention_heads)
        .set("seq_length", cfg.seq_length)
        .set("micro_batch_size", cfg.micro_batch_size)
        .set("global_batch_size", cfg.global_batch_size)
        .set("padded_vocab_size", wl.padded_vocab)
        .set("sequence_parallel", cfg.sequence_parallel)
        .set("distributed_optimizer", cfg.use_distributed_optimizer)
        .set("overlap_grad_reduce", cfg.overlap_grad_reduce)
        .set("tp_op_bytes", wl.tp_bytes.0)
        .set("pp_p2p_bytes", wl.pp_bytes.0)
        .set("gpu", &wl.calibration.gpu.name)
        .set("gpu_peak_tflops", wl.calibration.gpu.peak_tflops)
        .set("mfu", wl.calibration.mfu)
        .set("calibration_factor", format!("{:.6}", wl.calibration.factor))
        .set("calibration_source", wl.calibration.source.as_str())
        .set("gpus_per_server", topo.gpus_per_server)
        .set("nvlink_rate_bps", topo.nvlink_rate.map_or(0, |r| r.0))
        .set("nvlink_step_latency_ns", nvlink_step_latency(topo, opts).0)
        .set("nvlink_model", "one nvlink record per intra-server collective; dur = busbw_factor*S/nvlink_rate + steps*alpha")
        .set("nccl_channels", opts.nccl_channels.unwrap_or_else(|| default_channels(topo)))
        .set("grad_dtype_bytes", wl.grad_dtype_bytes);
    if let Some(ms) = wl.calibration.measured_ms {
        h.set("calibration_measured_ms", ms);
    }
    if let Some(c) = &wl.cp {
        h.set("cp_comm_type", c.comm.as_str())
            .set("cp_kv_bytes", c.kv_bytes.0);
    }
    if let Some(m) = &wl.moe {
        h.set("ep", wl.groups.ep)
            .set("expert_tp", wl.groups.etp)
            .set("expert_dp", wl.groups.edp)
            .set("num_experts", m.num_experts)
            .set("moe_router_topk", m.topk)
            .set("moe_token_dispatcher_type", m.dispatcher.as_str())
            .set("moe_routing", m.routing)
            .set("moe_dropped_fraction", format!("{:.6}", m.dropped))
            .set(
                "moe_dispatch_bytes",
                m.dispatch_bytes
                    .iter()
                    .map(|b| b.0.to_string())
                    .collect::<Vec<_>>()
                    .join(";"),
            );
    }
    if let Some(p) = &opts.plan {
        h.set(
            super::INA_RESERVATIONS_KEY,
            super::format_reservations(&super::planned::reservations(p, topo)),
        )
        .set(
            "plan_predicted_iteration_ns",
            format!("{:.0}", p.prediction.iteration_ns),
        )
        .set(
            "plan_solver",
            format!("{} ({})", p.solver.used, p.solver.status),
        );
    }
    h
}
