//! The aggregation groups of one iteration: which ranks reduce together, how often, how
//! much, and whether their traffic crosses the network at all.

use crate::record::Class;
use crate::schedule::{CollKind, GradGroup, LayerStep, Workload};
use crate::topology::Topology;
use crate::units::{Bytes, NodeId, Rank};

/// One kind of collective a group runs, `count` times per iteration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Coll {
    /// Primitive.
    pub kind: CollKind,
    /// Size S.
    pub bytes: Bytes,
    /// How many per iteration.
    pub count: u64,
}

impl Coll {
    /// The same collective (primitive and size), whatever its count.
    pub fn same(&self, other: &Coll) -> bool {
        (self.kind, self.bytes) == (other.kind, other.bytes)
    }

    /// INA can sum it (all-reduce, reduce-scatter); all-gathers stay on the hosts.
    pub fn aggregatable(&self) -> bool {
        matches!(self.kind, CollKind::AllReduce | CollKind::ReduceScatter)
    }
}

/// Where in the iteration a group's collectives run.
#[derive(Clone, Debug, PartialEq)]
pub enum Role {
    /// A TP group: `per_layer` collectives in every layer of every micro-batch of its
    /// stage (on the pipeline's critical path), plus the layer-norm all-reduce after the
    /// gradient sync (`layernorm`, sequence parallel only).
    Tp {
        /// Pipeline replica (index into the workload's replicas, dp·CP + cp).
        replica: usize,
        /// Per layer and micro-batch (forward then backward).
        per_layer: Vec<Coll>,
        /// Layer-norm all-reduce after the DP sync.
        layernorm: Option<Coll>,
    },
    /// A DP (×CP) group: one collective per gradient bucket of its stage, in order, then
    /// (distributed optimizer) one parameter all-gather per bucket at the very end.
    Dp {
        /// Per bucket: the reduction.
        buckets: Vec<Coll>,
        /// Per bucket: the parameter all-gather (distributed optimizer), host only.
        gathers: Vec<Coll>,
        /// Per bucket: its index in the stage's bucket list (its trigger).
        index: Vec<usize>,
        /// The expert-DP group of a MoE model (expert gradients), not the dense DP×CP one.
        expert: bool,
    },
    /// An embedding group (first and last stage of one pipeline): one all-reduce after
    /// the gradient sync.
    Emb(Coll),
}

/// An aggregation group.
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    /// Traffic class.
    pub class: Class,
    /// Pipeline stage (`None` for embedding groups).
    pub stage: Option<u32>,
    /// Member ranks in the order the trace's ring visits them (ascending).
    pub members: Vec<Rank>,
    /// Their GPUs.
    pub hosts: Vec<NodeId>,
    /// The group's traffic stays inside one NVLink domain (no network decision).
    pub nvlink: bool,
    /// What it runs and when.
    pub role: Role,
}

impl Group {
    /// Whether this is a MoE model's expert-DP group (its key beside class and members:
    /// [`crate::formats::plan_json::PlannedGroup::expert`]).
    pub fn is_expert(&self) -> bool {
        matches!(self.role, Role::Dp { expert: true, .. })
    }

    /// Every collective of the group with its count.
    pub fn colls(&self) -> Vec<Coll> {
        match &self.role {
            Role::Tp {
                per_layer,
                layernorm,
                ..
            } => per_layer.iter().chain(layernorm).copied().collect(),
            Role::Dp {
                buckets, gathers, ..
            } => buckets.iter().chain(gathers).copied().collect(),
            Role::Emb(c) => vec![*c],
        }
    }
    /// Collective `i` of [`Group::colls`] runs in the iteration's tail, after the gradient
    /// sync (layer-norm, embedding, parameter all-gathers).
    pub fn in_tail(&self, i: usize) -> bool {
        match &self.role {
            Role::Tp { per_layer, .. } => i >= per_layer.len(),
            Role::Dp { buckets, .. } => i >= buckets.len(),
            Role::Emb(_) => true,
        }
    }
    /// A short name for messages: `dp group of ranks 0,2,4,6 (stage 0)`.
    pub fn name(&self) -> String {
        let ranks: Vec<String> = self.members.iter().map(|r| r.0.to_string()).collect();
        match self.stage {
            Some(s) => format!(
                "{} group of ranks {} (stage {s})",
                self.class,
                ranks.join(",")
            ),
            None => format!("{} group of ranks {}", self.class, ranks.join(",")),
        }
    }
}

/// Every group of `wl` with at least two members, TP groups first (by replica, stage),
/// then DP (by stage, lowest rank), then embedding groups.
pub fn groups(wl: &Workload, topo: &Topology) -> Vec<Group> {
    let mut out = tp_groups(wl, topo);
    out.extend(gradient_groups(wl, topo));
    out.extend(embedding_groups(wl, topo));
    out
}

/// A group of `members` of `class` on `topo`: its GPUs' nodes, and whether it runs
/// inside one server's NVLink.
fn group(topo: &Topology, class: Class, stage: Option<u32>, members: &[Rank], role: Role) -> Group {
    Group {
        class,
        stage,
        members: members.to_vec(),
        hosts: members.iter().map(|r| topo.gpu(*r)).collect(),
        nvlink: topo.one_nvlink_domain(members),
        role,
    }
}

/// The TP collectives of one stage's layers over the iteration: each kind of a dense
/// layer's steps, `microbatches × layers per stage` times.
fn tp_per_layer(wl: &Workload) -> Vec<Coll> {
    let layers = wl.num_layers / wl.pp().max(1);
    let count = wl.microbatches as u64 * layers as u64;
    let mut out: Vec<Coll> = Vec::new();
    for st in wl.fwd_steps.iter().chain(&wl.bwd_steps) {
        if let LayerStep::Tp(kind) = *st {
            match out.iter_mut().find(|c| c.kind == kind) {
                Some(c) => c.count += count,
                None => out.push(Coll {
                    kind,
                    bytes: wl.tp_bytes,
                    count,
                }),
            }
        }
    }
    out
}

/// The TP groups, by replica and stage, with their stage's layer-norm all-reduce.
fn tp_groups(wl: &Workload, topo: &Topology) -> Vec<Group> {
    let g = &wl.groups;
    let tp_colls = tp_per_layer(wl);
    let mut out = Vec::new();
    for tpg in &g.tp_groups {
        if tpg.len() < 2 || wl.tp_bytes.0 == 0 {
            continue;
        }
        let c = g.coords(tpg[0]);
        let stage = c.pp;
        let layernorm = wl.stages[stage as usize].layernorm_bytes.map(|b| Coll {
            kind: CollKind::AllReduce,
            bytes: b,
            count: 1,
        });
        let role = Role::Tp {
            replica: (c.dp * g.cp + c.cp) as usize,
            per_layer: tp_colls.clone(),
            layernorm,
        };
        out.push(group(topo, Class::Tp, Some(stage), tpg, role));
    }
    out
}

/// Dense gradients over each DP×CP group, then expert gradients over each expert-DP group:
/// their buckets' reductions and (distributed optimizer) parameter all-gathers.
fn gradient_groups(wl: &Workload, topo: &Topology) -> Vec<Group> {
    let g = &wl.groups;
    let expert: &[Vec<Rank>] = if wl.moe.is_some() { &g.edp_groups } else { &[] };
    let lists = [
        (GradGroup::DataContext, &g.dp_cp_groups[..]),
        (GradGroup::ExpertData, expert),
    ];
    let mut out = Vec::new();
    for (which, list) in lists {
        for grp in list.iter().filter(|grp| grp.len() >= 2) {
            let stage = match which {
                GradGroup::DataContext => g.coords(grp[0]).pp,
                GradGroup::ExpertData => g.expert_coords(grp[0]).pp,
            };
            let role = gradient_role(wl, stage, which);
            out.push(group(topo, Class::Dp, Some(stage), grp, role));
        }
    }
    out
}

/// The buckets of `which` gradients of stage `stage`: each non-empty one's reduction (by
/// bucket index), and the parameter all-gathers of the distributed optimizer.
fn gradient_role(wl: &Workload, stage: u32, which: GradGroup) -> Role {
    let kind = if wl.distributed_optimizer {
        CollKind::ReduceScatter
    } else {
        CollKind::AllReduce
    };
    let plan = &wl.stages[stage as usize];
    let mine = || {
        plan.buckets
            .iter()
            .enumerate()
            .filter(move |(_, b)| b.group == which)
    };
    let reduced: Vec<(usize, Coll)> = mine()
        .filter(|(_, b)| b.grad_bytes.0 > 0)
        .map(|(i, b)| {
            let c = Coll {
                kind,
                bytes: b.grad_bytes,
                count: 1,
            };
            (i, c)
        })
        .collect();
    let gathers = if wl.distributed_optimizer {
        mine()
            .filter(|(_, b)| b.param_bytes.0 > 0)
            .map(|(_, b)| Coll {
                kind: CollKind::AllGather,
                bytes: b.param_bytes,
                count: 1,
            })
            .collect()
    } else {
        Vec::new()
    };
    Role::Dp {
        index: reduced.iter().map(|x| x.0).collect(),
        buckets: reduced.into_iter().map(|x| x.1).collect(),
        gathers,
        expert: which == GradGroup::ExpertData,
    }
}

/// The tied embedding's all-reduce over each embedding group.
fn embedding_groups(wl: &Workload, topo: &Topology) -> Vec<Group> {
    let Some(b) = wl.emb_bytes.filter(|b| b.0 > 0) else {
        return Vec::new();
    };
    let coll = Coll {
        kind: CollKind::AllReduce,
        bytes: b,
        count: 1,
    };
    wl.groups
        .emb_groups
        .iter()
        .filter(|eg| eg.len() >= 2)
        .map(|eg| group(topo, Class::Emb, None, eg, Role::Emb(coll)))
        .collect()
}
