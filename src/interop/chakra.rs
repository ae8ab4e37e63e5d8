//! `ina3d export chakra`: the workload of one iteration as MLCommons Chakra execution
//! traces for ASTRA-sim (docs/model.md#chakra-execution-traces), one file per rank, plus
//! the communicator-group file ASTRA-sim's `--comm-group-configuration` reads.
//!
//! Each rank's program follows its stage's 1F1B order from the same
//! [`crate::schedule::Workload`] the trace is lowered from, at the level of collectives
//! (ASTRA-sim lowers collectives onto its network itself):
//! - compute steps → `COMP_NODE` (`duration_micros`, rounded to whole µs);
//! - TP, CP (Ulysses, K/V all-gather), EP and expert-TP collectives, DP gradient buckets,
//!   the sequence-parallel and tied-embedding all-reduces and the distributed optimizer's
//!   parameter all-gathers → `COMM_COLL_NODE` with `comm_type`, `comm_size` (the whole
//!   buffer S in bytes, nccl-tests' convention, as in the trace) and `pg_name` (the id of
//!   the group in the communicator-group file);
//! - pipeline activations and gradients, and ring attention's K/V blocks →
//!   `COMM_SEND_NODE` / `COMM_RECV_NODE` pairs with `comm_src`, `comm_dst`, `comm_tag`
//!   (equal on both sides) and `comm_size`.
//!
//! Dependencies: a rank's main stream is a chain (each node depends on the nodes before
//! it, as the trace's chains do; sends are synchronous); DP buckets run on their own
//! stream, each after the backward that completes it and the bucket before it; the end of
//! iteration waits for both. Ring attention overlaps its K/V exchanges with the attention
//! core as the trace does: the blocks, their sizes, peers and the core's parts are
//! [`crate::lower::RingAttention`]'s, the schedule the trace is lowered with; collective
//! sizes and all-to-all parts are the workload's ([`Workload::step_bytes`],
//! [`Workload::a2a_parts`]), as the trace reads them. All-to-alls are `ALL_TO_ALL` of the
//! rank's whole send buffer, which ASTRA-sim splits evenly: under skewed MoE routing
//! per-pair sizes are not expressible.

use crate::formats::chakra::{
    attribute_proto::Value, AttributeProto, CollectiveCommType, GlobalMetadata, Node, NodeType,
    SCHEMA_VERSION,
};
use crate::lower::RingAttention;
use crate::schedule::{
    A2aSizes, CollKind, GradGroup, GroupKind, LayerStep, Pass, PipeOp, StagePlan, Workload,
};
use crate::units::{Bytes, Nanos, Rank};
use std::collections::{BTreeMap, HashMap};

/// Why the export failed.
#[derive(Debug, thiserror::Error)]
pub enum ChakraError {
    /// A size or tag does not fit the schema's types.
    #[error("chakra export: {0}")]
    Range(String),
}

/// Every rank's nodes and the communicator groups they name.
#[derive(Clone, Debug, PartialEq)]
pub struct ChakraExport {
    /// Nodes of rank `r` at index `r`.
    pub ranks: Vec<Vec<Node>>,
    /// Communicator groups: id (the nodes' `pg_name`) → member ranks, ascending.
    pub comm_groups: BTreeMap<u32, Vec<u32>>,
}

impl ChakraExport {
    /// The metadata message every file starts with.
    pub fn metadata() -> GlobalMetadata {
        GlobalMetadata {
            version: SCHEMA_VERSION.into(),
            attr: vec![],
        }
    }

    /// The communicator-group file's JSON: `{"<id>": [ranks…], …}`.
    pub fn comm_group_json(&self) -> String {
        let body: Vec<String> = self
            .comm_groups
            .iter()
            .map(|(id, ranks)| {
                let r: Vec<String> = ranks.iter().map(u32::to_string).collect();
                format!("  \"{id}\": [{}]", r.join(", "))
            })
            .collect();
        format!("{{\n{}\n}}\n", body.join(",\n"))
    }
}

/// Communicator groups: every group of the job, numbered from 1 in a fixed order.
struct Groups {
    ids: BTreeMap<Vec<u32>, u32>,
    /// Members of each id (index `id − 1`).
    members: Vec<Vec<u32>>,
    /// (kind, rank) → group id.
    of: HashMap<(Kind, u32), u32>,
}

/// The groups a rank's collectives run over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    Step(GroupKind),
    Grad(GradGroup),
    Emb,
    /// The all-to-all groups of hierarchical CP.
    CpInner,
    /// The rings of ring attention (the CP group, or its strided subgroups).
    CpRing,
}

impl Groups {
    fn new(wl: &Workload) -> Self {
        let g = &wl.groups;
        let moe = wl.moe.is_some();
        let lists: Vec<(Kind, &Vec<Vec<Rank>>)> = vec![
            (Kind::Step(GroupKind::Tp), &g.tp_groups),
            (Kind::Step(GroupKind::Cp), &g.cp_groups),
            (Kind::Grad(GradGroup::DataContext), &g.dp_cp_groups),
            (Kind::Emb, &g.emb_groups),
            (Kind::Step(GroupKind::Ep), &g.ep_groups),
            (Kind::Step(GroupKind::ExpertTp), &g.etp_groups),
            (Kind::Step(GroupKind::ExpertTpEp), &g.etp_ep_groups),
            (Kind::Grad(GradGroup::ExpertData), &g.edp_groups),
        ];
        let mut s = Groups {
            ids: BTreeMap::new(),
            members: Vec::new(),
            of: HashMap::new(),
        };
        let (inner, rings): (Vec<Vec<Rank>>, Vec<Vec<Rank>>) = match &wl.cp {
            Some(p) => (
                g.cp_groups.iter().flat_map(|m| p.a2a_groups(m)).collect(),
                g.cp_groups.iter().flat_map(|m| p.rings(m)).collect(),
            ),
            None => (vec![], vec![]),
        };
        let mut lists = lists;
        lists.push((Kind::CpInner, &inner));
        lists.push((Kind::CpRing, &rings));
        for (kind, list) in lists {
            let expert = matches!(
                kind,
                Kind::Step(GroupKind::Ep | GroupKind::ExpertTp | GroupKind::ExpertTpEp)
                    | Kind::Grad(GradGroup::ExpertData)
            );
            if expert && !moe {
                continue;
            }
            // A group of one has no collective: no id.
            for members in list.iter().filter(|m| m.len() > 1) {
                let key: Vec<u32> = members.iter().map(|r| r.0).collect();
                let next = s.ids.len() as u32 + 1;
                let id = *s.ids.entry(key.clone()).or_insert(next);
                if id == next {
                    s.members.push(key);
                }
                for r in members {
                    s.of.insert((kind, r.0), id);
                }
            }
        }
        s
    }

    fn id(&self, kind: Kind, r: u32) -> u32 {
        self.of.get(&(kind, r)).copied().unwrap_or(0)
    }

    /// The members of group `id` (none for 0, no group).
    fn members(&self, id: u32) -> &[u32] {
        id.checked_sub(1)
            .and_then(|i| self.members.get(i as usize))
            .map_or(&[], Vec::as_slice)
    }

    fn size(&self, id: u32) -> usize {
        self.members(id).len().max(1)
    }
}

/// One rank's program being written.
struct Program {
    rank: u32,
    nodes: Vec<Node>,
    /// What the next main-stream node depends on.
    tail: Vec<u64>,
}

fn attr_i64(name: &str, v: u64) -> Result<AttributeProto, ChakraError> {
    let v = i64::try_from(v)
        .map_err(|_| ChakraError::Range(format!("{name} {v} does not fit an int64")))?;
    Ok(AttributeProto::new(name, Value::Int64Val(v)))
}

fn attr_i32(name: &str, v: u64) -> Result<AttributeProto, ChakraError> {
    let v = i32::try_from(v)
        .map_err(|_| ChakraError::Range(format!("{name} {v} does not fit an int32")))?;
    Ok(AttributeProto::new(name, Value::Int32Val(v)))
}

fn comm_type(k: CollKind) -> CollectiveCommType {
    match k {
        CollKind::AllReduce => CollectiveCommType::AllReduce,
        CollKind::AllGather => CollectiveCommType::AllGather,
        CollKind::ReduceScatter => CollectiveCommType::ReduceScatter,
        CollKind::AllToAll => CollectiveCommType::AllToAll,
    }
}

impl Program {
    fn new(rank: u32) -> Self {
        Program {
            rank,
            nodes: Vec::new(),
            tail: Vec::new(),
        }
    }

    /// Adds a node depending on `deps`; returns its id.
    fn push(
        &mut self,
        name: String,
        ty: NodeType,
        deps: Vec<u64>,
        attr: Vec<AttributeProto>,
    ) -> u64 {
        let id = self.nodes.len() as u64;
        let mut deps = deps;
        deps.sort_unstable();
        deps.dedup();
        let mut attr = attr;
        attr.insert(0, AttributeProto::new("is_cpu_op", Value::BoolVal(false)));
        self.nodes.push(Node {
            id,
            name,
            r#type: ty as i32,
            data_deps: deps,
            attr,
            ..Node::default()
        });
        id
    }

    /// A node on the main stream: after everything before it.
    fn main(&mut self, name: String, ty: NodeType, attr: Vec<AttributeProto>) -> u64 {
        let deps = std::mem::take(&mut self.tail);
        let id = self.push(name, ty, deps, attr);
        self.tail = vec![id];
        id
    }

    fn compute(&mut self, name: &str, t: Nanos) {
        if t.0 == 0 {
            return;
        }
        let id = self.main(name.into(), NodeType::CompNode, vec![]);
        self.nodes[id as usize].duration_micros = micros(t);
    }

    fn coll(
        &mut self,
        name: &str,
        kind: CollKind,
        bytes: Bytes,
        pg: u32,
    ) -> Result<Option<u64>, ChakraError> {
        if bytes.0 == 0 || pg == 0 {
            return Ok(None);
        }
        let attr = vec![
            attr_i64("comm_type", comm_type(kind) as u64)?,
            attr_i64("comm_size", bytes.0)?,
            AttributeProto::new("pg_name", Value::StringVal(pg.to_string())),
        ];
        Ok(Some(self.main(
            format!("{name}:{kind}"),
            NodeType::CommCollNode,
            attr,
        )))
    }

    fn p2p_attr(
        &self,
        peer: u32,
        send: bool,
        bytes: Bytes,
        tag: u64,
    ) -> Result<Vec<AttributeProto>, ChakraError> {
        let (src, dst) = if send {
            (self.rank, peer)
        } else {
            (peer, self.rank)
        };
        Ok(vec![
            attr_i64("comm_size", bytes.0)?,
            attr_i32("comm_src", u64::from(src))?,
            attr_i32("comm_dst", u64::from(dst))?,
            attr_i32("comm_tag", tag % (1 << 31))?,
        ])
    }
}

/// Chakra durations are whole µs; rounded to the nearest.
fn micros(t: Nanos) -> u64 {
    (t.0 + 500) / 1000
}

/// Tag of a pipeline message: unique per (micro-batch, receiving chunk, direction)
/// between two ranks, the same on both sides.
fn pp_tag(op: PipeOp, chunk: u32, v: u32) -> u64 {
    (u64::from(op.microbatch) * u64::from(v) + u64::from(chunk)) * 2
        + u64::from(op.pass == Pass::Bwd)
}

/// Tag of a ring-attention block: unique per (micro-batch, layer, pass, step).
fn ring_tag(mb: u32, layer: u32, pass: Pass, step: usize, layers: u32, n: usize) -> u64 {
    (((u64::from(mb) * u64::from(layers) + u64::from(layer)) * 2 + u64::from(pass == Pass::Bwd))
        * n as u64
        + step as u64)
        | (1 << 30)
}

/// What [`from_workload`] would hold in memory, estimated before it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChakraEstimate {
    /// Nodes over every rank.
    pub nodes: u64,
    /// Peak bytes: [`PEAK_PER_NODE_BYTES`] times the bytes of the nodes themselves (each
    /// node's struct, name, deps and attributes).
    pub bytes: u64,
}

/// The export's peak memory over its nodes' own bytes: measured 1.89 (GPT-3 175B at
/// DP 4096, 4,096 ranks: 1.07 GiB peak resident for 581 MiB of nodes; the rest is the
/// workload, vectors' spare capacity and the writer), rounded up to 2.
pub const PEAK_PER_NODE_BYTES: u64 = 2;

/// Heap and inline bytes of one node as [`from_workload`] holds it.
fn node_bytes(n: &Node) -> u64 {
    let attr = n
        .attr
        .iter()
        .map(|a| {
            std::mem::size_of::<AttributeProto>() + a.name.capacity() + a.doc_string.capacity()
        })
        .sum::<usize>();
    (std::mem::size_of::<Node>()
        + n.name.capacity()
        + 8 * (n.ctrl_deps.capacity() + n.data_deps.capacity())
        + attr) as u64
}

/// The nodes and bytes of [`from_workload`], from one rank's program per pipeline stage
/// (the stage's first rank) times the stage's ranks: every rank of a stage runs the same
/// ops, with other peers and tags. Costs one program per stage.
pub fn estimate(wl: &Workload) -> Result<ChakraEstimate, ChakraError> {
    let groups = Groups::new(wl);
    let per_stage = u64::from(wl.world() / wl.pp().max(1));
    let mut est = ChakraEstimate { nodes: 0, bytes: 0 };
    for stage in 0..wl.pp() {
        let Some(r) = (0..wl.world()).find(|&r| wl.groups.coords(Rank(r)).pp == stage) else {
            continue;
        };
        let nodes = rank_program(wl, &groups, r)?.nodes;
        let bytes: u64 = nodes.iter().map(node_bytes).sum();
        est.nodes = est
            .nodes
            .saturating_add((nodes.len() as u64).saturating_mul(per_stage));
        est.bytes = est.bytes.saturating_add(
            bytes
                .saturating_mul(per_stage)
                .saturating_mul(PEAK_PER_NODE_BYTES),
        );
    }
    Ok(est)
}

/// Builds every rank's program.
pub fn from_workload(wl: &Workload) -> Result<ChakraExport, ChakraError> {
    let groups = Groups::new(wl);
    let mut ranks = Vec::with_capacity(wl.world() as usize);
    for r in 0..wl.world() {
        ranks.push(rank_program(wl, &groups, r)?.nodes);
    }
    let comm_groups = groups
        .ids
        .iter()
        .map(|(members, id)| (*id, members.clone()))
        .collect();
    Ok(ChakraExport { ranks, comm_groups })
}

struct Ctx<'a> {
    wl: &'a Workload,
    groups: &'a Groups,
    r: u32,
    stage: u32,
    /// The rank's pipeline group, in stage order.
    pipe: Vec<u32>,
}

fn rank_program(wl: &Workload, groups: &Groups, r: u32) -> Result<Program, ChakraError> {
    let g = &wl.groups;
    let stage = g.coords(Rank(r)).pp;
    let pipe = g
        .pp_groups
        .iter()
        .find(|p| p.contains(&Rank(r)))
        .map(|p| p.iter().map(|x| x.0).collect())
        .unwrap_or_else(|| vec![r]);
    let cx = Ctx {
        wl,
        groups,
        r,
        stage,
        pipe,
    };
    let plan = &wl.stages[stage as usize];
    let mut p = Program::new(r);
    // Bucket index → the main-stream node after which it may start.
    let mut triggers: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
    for &op in &plan.order {
        cx.receive(&mut p, op)?;
        cx.run_op(&mut p, op, plan, &mut triggers)?;
        cx.send(&mut p, op)?;
    }
    // Buckets without overlap start after the stage's last backward; each stream's
    // buckets run one after the other.
    let end = p.tail.clone();
    let mut streams: HashMap<GradGroup, Vec<u64>> = HashMap::new();
    let kind = if wl.distributed_optimizer {
        CollKind::ReduceScatter
    } else {
        CollKind::AllReduce
    };
    for (b, bucket) in plan.buckets.iter().enumerate() {
        let mut deps = triggers.remove(&b).unwrap_or_else(|| end.clone());
        deps.extend(streams.get(&bucket.group).cloned().unwrap_or_default());
        let pg = groups.id(Kind::Grad(bucket.group), r);
        if pg == 0 || groups.size(pg) < 2 || bucket.grad_bytes.0 == 0 {
            continue;
        }
        let attr = vec![
            attr_i64("comm_type", comm_type(kind) as u64)?,
            attr_i64("comm_size", bucket.grad_bytes.0)?,
            AttributeProto::new("pg_name", Value::StringVal(pg.to_string())),
        ];
        let id = p.push(
            format!("grad_bucket{b}:{kind}"),
            NodeType::CommCollNode,
            deps,
            attr,
        );
        streams.insert(bucket.group, vec![id]);
    }
    for ids in streams.into_values() {
        p.tail.extend(ids);
    }
    cx.end_of_iteration(&mut p, plan)?;
    Ok(p)
}

impl Ctx<'_> {
    fn peer(&self, stage: u32) -> u32 {
        self.pipe[stage as usize]
    }

    fn receive(&self, p: &mut Program, op: PipeOp) -> Result<(), ChakraError> {
        let v = self.wl.vpp;
        let Some(fs) = self.wl.prev_hop(self.stage, op) else {
            return Ok(());
        };
        let tag = pp_tag(op, op.chunk, v);
        let attr = p.p2p_attr(self.peer(fs), false, self.wl.pp_bytes, tag)?;
        p.main(
            format!("pp_recv.{:?}.mb{}.c{}", op.pass, op.microbatch, op.chunk),
            NodeType::CommRecvNode,
            attr,
        );
        Ok(())
    }

    fn send(&self, p: &mut Program, op: PipeOp) -> Result<(), ChakraError> {
        let v = self.wl.vpp;
        let Some((ts, tc)) = self.wl.next_hop(self.stage, op) else {
            return Ok(());
        };
        let tag = pp_tag(op, tc, v);
        let attr = p.p2p_attr(self.peer(ts), true, self.wl.pp_bytes, tag)?;
        p.main(
            format!("pp_send.{:?}.mb{}.c{}", op.pass, op.microbatch, tc),
            NodeType::CommSendNode,
            attr,
        );
        Ok(())
    }

    fn run_op(
        &self,
        p: &mut Program,
        op: PipeOp,
        plan: &StagePlan,
        triggers: &mut BTreeMap<usize, Vec<u64>>,
    ) -> Result<(), ChakraError> {
        let wl = self.wl;
        let layers = plan.chunks[op.chunk as usize].clone();
        let last_chunk_here = self.stage == wl.pp() - 1 && op.chunk == wl.vpp - 1;
        let first_chunk_here = self.stage == 0 && op.chunk == 0;
        let mb = op.microbatch;
        match op.pass {
            Pass::Fwd => {
                if first_chunk_here {
                    self.steps(
                        p,
                        &plan.embedding_fwd,
                        &format!("embedding.mb{mb}"),
                        mb,
                        None,
                    )?;
                }
                for l in layers {
                    self.steps(
                        p,
                        wl.layer_steps(l, Pass::Fwd),
                        &format!("layer{l}.mb{mb}.fwd"),
                        mb,
                        Some(l),
                    )?;
                }
                if last_chunk_here {
                    self.steps(p, &plan.head_fwd, &format!("head.mb{mb}.fwd"), mb, None)?;
                }
            }
            Pass::Bwd => {
                if last_chunk_here {
                    self.steps(p, &plan.head_bwd, &format!("head.mb{mb}.bwd"), mb, None)?;
                }
                let last_mb = mb == wl.microbatches - 1;
                for l in layers.clone().rev() {
                    self.steps(
                        p,
                        wl.layer_steps(l, Pass::Bwd),
                        &format!("layer{l}.mb{mb}.bwd"),
                        mb,
                        Some(l),
                    )?;
                    if first_chunk_here && l == layers.start {
                        self.steps(
                            p,
                            &plan.embedding_bwd,
                            &format!("embedding.mb{mb}.bwd"),
                            mb,
                            None,
                        )?;
                    }
                    if last_mb {
                        for (b, bucket) in plan.buckets.iter().enumerate() {
                            if bucket.chunk == op.chunk && bucket.trigger_layer == Some(l) {
                                triggers.insert(b, p.tail.clone());
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn steps(
        &self,
        p: &mut Program,
        steps: &[LayerStep],
        name: &str,
        mb: u32,
        layer: Option<u32>,
    ) -> Result<(), ChakraError> {
        let wl = self.wl;
        let r = self.r;
        for st in steps {
            match *st {
                LayerStep::Compute(t) => p.compute(name, t),
                LayerStep::Tp(kind) => {
                    let pg = self.groups.id(Kind::Step(GroupKind::Tp), r);
                    if self.groups.size(pg) > 1 {
                        p.coll(name, kind, wl.tp_bytes, pg)?;
                    }
                }
                LayerStep::Coll { kind, group, bytes } => {
                    let pg = self.groups.id(Kind::Step(group), r);
                    if let Some(&first) = self.groups.members(pg).first() {
                        if self.groups.size(pg) > 1 {
                            // The size the trace gives this group (by its first member).
                            p.coll(name, kind, wl.step_bytes(bytes, Rank(first)), pg)?;
                        }
                    }
                }
                LayerStep::AllToAll { group, sizes } => self.all_to_all(p, name, group, sizes)?,
                LayerStep::CpRing { pass, core } => {
                    self.ring(p, name, pass, core, mb, layer.unwrap_or(0))?
                }
                LayerStep::Experts(pass) => {
                    if let Some(m) = &wl.moe {
                        let j = wl.groups.expert_coords(Rank(r)).ep as usize;
                        let t = match pass {
                            Pass::Fwd => m.expert_fwd.get(j),
                            Pass::Bwd => m.expert_bwd.get(j),
                        };
                        p.compute(&format!("{name}.experts"), t.copied().unwrap_or(Nanos(0)));
                    }
                }
            }
        }
        Ok(())
    }

    /// An all-to-all step: one `ALL_TO_ALL` node per all-to-all the trace lowers the step
    /// into ([`Workload::a2a_parts`]: the whole group, or with `a2a+p2p` the rank's CP
    /// all-to-all group), of the rank's whole send buffer there (its own share included,
    /// as S of an all-to-all in nccl-tests).
    fn all_to_all(
        &self,
        p: &mut Program,
        name: &str,
        group: GroupKind,
        sizes: A2aSizes,
    ) -> Result<(), ChakraError> {
        let me = Rank(self.r);
        let pg = self.groups.id(Kind::Step(group), self.r);
        let members: Vec<Rank> = self.groups.members(pg).iter().map(|&x| Rank(x)).collect();
        for part in self.wl.a2a_parts(sizes, &members) {
            let n = part.members.len();
            let Some(i) = part.members.iter().position(|&m| m == me) else {
                continue;
            };
            if n < 2 {
                continue;
            }
            let key: Vec<u32> = part.members.iter().map(|m| m.0).collect();
            let pg = self.groups.ids.get(&key).copied().unwrap_or(0);
            let buffer = Bytes((0..n).map(|j| part.size(i, j).0).sum());
            p.coll(name, CollKind::AllToAll, buffer, pg)?;
        }
        Ok(())
    }

    /// Ring attention of one layer's pass ([`RingAttention`]): the core in CP parts, part
    /// `i + 1` after the block received in step `i`; forward blocks go to the next CP rank,
    /// backward ones to the previous; a backward send waits for the part that updated its
    /// dK/dV.
    fn ring(
        &self,
        p: &mut Program,
        name: &str,
        pass: Pass,
        core: Nanos,
        mb: u32,
        layer: u32,
    ) -> Result<(), ChakraError> {
        let pg = self.groups.id(Kind::CpRing, self.r);
        let members = self.groups.members(pg).to_vec();
        let n = members.len();
        if n <= 1 {
            p.compute(name, core);
            return Ok(());
        }
        // CP groups list members in CP-rank order (ascending ranks), the ring's order.
        let k = members.iter().position(|x| *x == self.r).unwrap_or(0);
        let kv = self.wl.cp.as_ref().map_or(Bytes(0), |c| c.kv_bytes);
        let ring = RingAttention::new(pass, n, core, kv);
        let (to, from) = ring.offsets();
        let (to, from) = (members[(k + to) % n], members[(k + from) % n]);
        let layers = self.wl.num_layers;
        let start = std::mem::take(&mut p.tail);
        let mut compute_tail = start.clone();
        // Part `i` of the core, after the part before and the block received before it.
        let core_part = |p: &mut Program, i: usize, tail: &mut Vec<u64>, recv: Option<u64>| {
            let t = ring.part(i);
            if t.0 > 0 {
                let mut deps = tail.clone();
                deps.extend(recv);
                let c = p.push(format!("{name}.core{i}"), NodeType::CompNode, deps, vec![]);
                p.nodes[c as usize].duration_micros = micros(t);
                *tail = vec![c];
            }
        };
        let mut prev_recv: Option<u64> = None;
        let mut last_send: Option<u64> = None;
        for i in 0..n {
            if let Some(bytes) = ring.step_bytes(i) {
                let tag = ring_tag(mb, layer, pass, i, layers, n);
                // Forward passes on the block received in the step before; backward sends
                // what the last part updated.
                let send_deps = match (pass, prev_recv) {
                    (Pass::Fwd, Some(r)) => vec![r],
                    (Pass::Fwd, None) => start.clone(),
                    (Pass::Bwd, _) => compute_tail.clone(),
                };
                let attr = p.p2p_attr(to, true, bytes, tag)?;
                last_send = Some(p.push(
                    format!("{name}.ring_send{i}"),
                    NodeType::CommSendNode,
                    send_deps,
                    attr,
                ));
                let attr = p.p2p_attr(from, false, bytes, tag)?;
                let recv = p.push(
                    format!("{name}.ring_recv{i}"),
                    NodeType::CommRecvNode,
                    start.clone(),
                    attr,
                );
                core_part(p, i, &mut compute_tail, prev_recv);
                prev_recv = Some(recv);
            } else {
                core_part(p, i, &mut compute_tail, prev_recv);
            }
        }
        let mut tail = compute_tail;
        tail.extend(prev_recv);
        tail.extend(last_send);
        p.tail = tail;
        Ok(())
    }

    /// Sequence-parallel gradients over TP, the tied embedding over the embedding group,
    /// the distributed optimizer's parameter all-gathers (as `trace::gen` orders them).
    fn end_of_iteration(&self, p: &mut Program, plan: &StagePlan) -> Result<(), ChakraError> {
        let wl = self.wl;
        let r = self.r;
        if let Some(b) = plan.layernorm_bytes {
            let pg = self.groups.id(Kind::Step(GroupKind::Tp), r);
            if self.groups.size(pg) > 1 {
                p.coll("sp_grads", CollKind::AllReduce, b, pg)?;
            }
        }
        if let Some(b) = wl.emb_bytes {
            let pg = self.groups.id(Kind::Emb, r);
            if self.groups.size(pg) > 1 {
                p.coll("embedding_grads", CollKind::AllReduce, b, pg)?;
            }
        }
        if wl.distributed_optimizer {
            for which in [GradGroup::DataContext, GradGroup::ExpertData] {
                let pg = self.groups.id(Kind::Grad(which), r);
                if pg == 0 || self.groups.size(pg) < 2 {
                    continue;
                }
                for (b, bucket) in plan
                    .buckets
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| b.group == which)
                {
                    p.coll(
                        &format!("param_gather{b}"),
                        CollKind::AllGather,
                        bucket.param_bytes,
                        pg,
                    )?;
                }
            }
        }
        Ok(())
    }
}
