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
//! How each collective lowers (ring, trees, Rina, NVLink, channels, all-to-all, ring
//! attention) is [`crate::lower`]'s: the generator decides which lowering a collective
//! gets and is the lowering's [`Sink`], turning its transfers into records on the ranks'
//! chains. [`iteration`] walks one training iteration; [`bench`] a collective bench.

mod bench;
mod iteration;

use super::options::{aggregating_switches, InaConfig, InaMode, TraceOptions};
use super::TraceError;
use crate::lower::{Lowering, Note, RinaRacks, Sink, Xfer};
use crate::megatron::TrainingConfig;
use crate::record::{Class, FlowRecord, Mode};
use crate::schedule::{self, CollKind, GroupKind, Workload};
use crate::topology::{Routing, Topology, TopologyError};
use crate::units::{Bytes, FlowId, Nanos, NodeId, Rank};
use std::collections::{BTreeMap, HashMap};

pub use crate::lower::{
    default_channels, nvlink_collective_time, swing_peer, swing_rho, swing_schedule, SwingStep,
    NCCL_NVLINK_RING_STEP,
};
pub use bench::{bench_groups, generate_bench};

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

/// A rank's chain in the generator: record ids.
type Chain = crate::lower::Chain<FlowId>;

#[derive(Clone, Copy)]
struct Tag {
    class: Class,
    microbatch: Option<u32>,
    layer: Option<u32>,
    stage: Option<u32>,
}

impl Tag {
    /// A tag of no micro-batch and no layer: the iteration-level work of `stage` (or of
    /// no stage).
    fn of_stage(class: Class, stage: Option<u32>) -> Tag {
        Tag {
            class,
            microbatch: None,
            layer: None,
            stage,
        }
    }
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
    /// The lowering context (NVLink step latency, NCCL channels).
    lw: Lowering<'a>,
    /// The plan's groups (`InaMode::Planned`).
    plan: Option<super::planned::PlanIndex>,
    /// Records and bytes per (class, mode), folded into `stats` at the end (a map per record is slow).
    counts: [[(u64, u64); 4]; 7],
}

/// The generator as the sink of a lowering: records of stream `s`, tagged `tag`.
struct At<'g, 'a> {
    g: &'g mut Gen<'a>,
    s: Stream,
    tag: Tag,
}

impl Sink for At<'_, '_> {
    type Id = FlowId;
    type Error = TraceError;
    fn chain(&mut self, r: Rank) -> &mut Chain {
        self.g.chain(self.s, r)
    }
    fn flush(&mut self, r: Rank) -> Result<(), TraceError> {
        self.g.flush(self.s, r, self.tag)
    }
    fn emit(&mut self, x: Xfer<FlowId>) -> Result<FlowId, TraceError> {
        let class = self.tag.class;
        self.g.emit(x, class, self.tag)
    }
    fn new_coll(&mut self) -> u64 {
        self.g.stats.collectives += 1;
        let c = self.g.next_coll;
        self.g.next_coll += 1;
        c
    }
    fn new_agg(&mut self) -> u64 {
        self.g.stats.aggregations += 1;
        let a = self.g.next_agg;
        self.g.next_agg += 1;
        a
    }
    fn agg_group(&self) -> crate::record::AggGroup {
        crate::record::AggGroup::of_expert(matches!(self.s, Stream::ExpertDp))
    }
    fn note(&mut self, n: Note) {
        match n {
            Note::HdFallback => self.g.stats.hd_fallbacks += 1,
        }
    }
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
        opts.check()
            .map_err(|(flag, msg)| TraceError::Generate(format!("{flag} {msg}")))?;
        let channels = opts.nccl_channels.unwrap_or_else(|| default_channels(topo));
        let (can_agg, tor) = if opts.ina.mode != InaMode::Off {
            aggregating_switches(topo, &opts.ina.switches)?
        } else {
            (
                vec![false; topo.node_count()],
                vec![None; topo.node_count()],
            )
        };
        let routing = if opts.ina.mode != InaMode::Off {
            Some(Routing::with_mode(topo, opts.seed, opts.routing)?)
        } else {
            None
        };
        let plan = match (opts.ina.mode, &opts.plan) {
            (InaMode::Planned, Some(p)) => Some(super::planned::PlanIndex::new(p, wl, topo, opts)?),
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
            lw: Lowering::with_channels(topo, nvlink_step_latency(topo, opts), opts.nccl_channels),
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

/// Latency α per algorithm step of an NVLink record: the option, else
/// [`NCCL_NVLINK_RING_STEP`].
pub fn nvlink_step_latency(_topo: &Topology, opts: &TraceOptions) -> Nanos {
    opts.nvlink_step_latency.unwrap_or(NCCL_NVLINK_RING_STEP)
}

impl<'a> Gen<'a> {
    fn chain(&mut self, s: Stream, r: Rank) -> &mut Chain {
        match s {
            Stream::Main => &mut self.main[r.idx()],
            Stream::Dp => &mut self.dp[r.idx()],
            Stream::ExpertDp => &mut self.edp[r.idx()],
        }
    }

    /// The generator as a lowering's sink for stream `s`, records tagged `tag`.
    fn at(&mut self, s: Stream, tag: Tag) -> At<'_, 'a> {
        At { g: self, s, tag }
    }

    /// Emit one record of class `class`.
    fn emit(&mut self, x: Xfer<FlowId>, class: Class, tag: Tag) -> Result<FlowId, TraceError> {
        let id = FlowId(self.next_id);
        self.next_id += 1;
        self.stats.records += 1;
        let e = &mut self.counts[class as usize][x.mode as usize];
        e.0 += 1;
        e.1 += x.bytes.0;
        (self.sink)(FlowRecord {
            id,
            src: x.src,
            dst: x.dst,
            bytes: x.bytes,
            deps: x.deps,
            gap: x.gap,
            dur: x.dur,
            mode: x.mode,
            class,
            iteration: self.iteration,
            collective: x.coll,
            step: x.step,
            microbatch: tag.microbatch,
            layer: tag.layer,
            stage: tag.stage,
            group_size: x.group,
            agg: x.agg,
            channel: x.channel,
        })?;
        Ok(id)
    }

    /// A compute record of `dur` on `node` after `deps`.
    fn compute(
        &mut self,
        node: NodeId,
        deps: Vec<FlowId>,
        dur: Nanos,
        tag: Tag,
    ) -> Result<FlowId, TraceError> {
        let x = Xfer::compute(node, deps, dur);
        let tag = Tag {
            class: Class::Compute,
            ..tag
        };
        self.emit(x, Class::Compute, tag)
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
        let id = self.compute(node, c.tail, c.pending, tag)?;
        *self.chain(s, r) = Chain {
            tail: vec![id],
            pending: Nanos(0),
        };
        Ok(())
    }

    /// Deps and gap for a record sent by `r` that waits for nothing else.
    fn start(&mut self, s: Stream, r: Rank) -> (Vec<FlowId>, Nanos) {
        let c = self.chain(s, r);
        (std::mem::take(&mut c.tail), std::mem::take(&mut c.pending))
    }

    fn ina_enabled(&self, class: Class) -> bool {
        self.opts.ina.mode != InaMode::Off && self.opts.ina.classes.contains(&class)
    }

    /// One collective over `members` (in ring order) of size `bytes`; updates their chains.
    /// Which lowering it gets — NVLink record, the plan's decision, an INA tree or Rina, or
    /// the host algorithm — is decided here; how each lowers is [`crate::lower`]'s.
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
        let mut lw = self.lw;
        if kind == CollKind::AllToAll {
            // Never aggregated in switches; lowered pairwise (uniform split).
            let m = n as u32;
            let size = |_, j: usize| crate::lower::slice(bytes, m, j as u32);
            return lw.all_to_all(&mut self.at(s, tag), members, &size);
        }
        let coll = self.at(s, tag).new_coll();
        if self.topo.one_nvlink_domain(members) {
            return lw.nvlink(&mut self.at(s, tag), kind, bytes, members, coll);
        }
        // a plan decides for TP, DP and embedding groups; CP and expert-parallel collectives
        // stay on the host algorithm
        if self.plan.is_some()
            && matches!(kind, CollKind::AllReduce | CollKind::ReduceScatter)
            && matches!(tag.class, Class::Tp | Class::Dp | Class::Emb)
        {
            return self.planned(kind, bytes, members, s, tag, coll);
        }
        if self.ina_enabled(tag.class)
            && matches!(kind, CollKind::AllReduce | CollKind::ReduceScatter)
        {
            if self.opts.ina.mode == InaMode::Rina && kind == CollKind::AllReduce {
                let racks = self.rina_racks(members, None);
                return lw.rina(&mut self.at(s, tag), bytes, members, coll, &racks);
            }
            if self.opts.ina.mode != InaMode::Rina {
                return self.ina_tree(kind, bytes, members, s, tag, coll);
            }
        }
        self.host_collective(kind, bytes, members, s, tag, coll)
    }

    /// A collective with the host algorithm (`--collective`), over the NCCL channels.
    fn host_collective(
        &mut self,
        kind: CollKind,
        bytes: Bytes,
        members: &[Rank],
        s: Stream,
        tag: Tag,
        coll: u64,
    ) -> Result<(), TraceError> {
        let mut lw = self.lw;
        let algo = self.opts.collective;
        lw.host(&mut self.at(s, tag), algo, kind, bytes, members, coll)
    }

    /// Rina's racks of `members`: under aggregating ToRs (`only`: the plan's ToRs).
    fn rina_racks(&self, members: &[Rank], only: Option<&[NodeId]>) -> RinaRacks {
        let may = |t: NodeId| only.map_or(self.can_agg[t.idx()], |o| o.contains(&t));
        crate::lower::rina_racks(self.topo, members, &self.tor, may)
    }

    /// INA all-reduce (or reduce-scatter) over the topology's aggregation tree (SwitchML: the
    /// tree's root alone), the root placed by the collective's hash.
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
        let lw = self.lw;
        lw.tree(&mut self.at(s, tag), kind, bytes, members, coll, &edges)
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
        let g = index.group(plan, tag.class, matches!(s, Stream::ExpertDp), members)?;
        let lw = self.lw;
        match &g.decision {
            Decision::Host => {
                let algo = g.host_algorithm.unwrap_or(opts.collective);
                let mut lw = self.lw;
                lw.host(&mut self.at(s, tag), algo, kind, bytes, members, coll)
            }
            Decision::Rina { tors } if kind == CollKind::AllReduce => {
                let racks = self.rina_racks(members, Some(tors));
                lw.rina(&mut self.at(s, tag), bytes, members, coll, &racks)
            }
            Decision::Rina { .. } => self.host_collective(kind, bytes, members, s, tag, coll),
            Decision::Tree { edges, .. } => {
                let mut fanin: HashMap<NodeId, u32> = HashMap::new();
                for e in edges {
                    *fanin.entry(e.1).or_default() += 1;
                }
                let edges: Vec<_> = edges.iter().map(|&(c, p)| (c, p, fanin[&p])).collect();
                lw.tree(&mut self.at(s, tag), kind, bytes, members, coll, &edges)
            }
        }
    }
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
    if opts.routing != crate::topology::RoutingMode::Ecmp {
        // absent means ecmp, so the default's header (and file) is what it always was
        h.set("routing", opts.routing);
    }
    h.set("topology", &topo.source)
        .set("topology_hash", super::planned::topology_hash(topo))
        .set("seed", opts.seed)
        .set("iterations", opts.iterations)
        .set("collective", opts.collective)
        .set("ina", ina.mode)
        .set("ina_switches", &ina.switches)
        .set("ina_slots", ina.slots)
        .set("ina_payload_bytes", ina.payload.0)
        .set("ina_window", ina.window)
        .set("ina_policy", ina.policy())
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
        .set("pp_scatter_gather", wl.pp_gather)
        .set("gpu", &wl.calibration.gpu.name)
        .set("gpu_peak_tflops", wl.calibration.gpu.peak_tflops)
        .set("compute_model", wl.calibration.compute.as_str())
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
        if p.fixed_policy.is_none() {
            h.set(
                super::INA_RESERVATIONS_KEY,
                super::format_reservations(&super::planned::reservations(p, topo)),
            );
        }
        h.set(
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
