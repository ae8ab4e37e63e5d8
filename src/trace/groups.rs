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
    let g = &wl.groups;
    let hosts = |m: &[Rank]| m.iter().map(|r| topo.gpu(*r)).collect::<Vec<_>>();
    let mut out = Vec::new();
    let layers = wl.num_layers / wl.pp().max(1);
    let m = wl.microbatches as u64;
    let per_layer = |steps: &[LayerStep], out: &mut Vec<Coll>| {
        for st in steps {
            if let LayerStep::Tp(kind) = *st {
                match out.iter_mut().find(|c| c.kind == kind) {
                    Some(c) => c.count += m * layers as u64,
                    None => out.push(Coll {
                        kind,
                        bytes: wl.tp_bytes,
                        count: m * layers as u64,
                    }),
                }
            }
        }
    };
    let mut tp_colls = Vec::new();
    per_layer(&wl.fwd_steps, &mut tp_colls);
    per_layer(&wl.bwd_steps, &mut tp_colls);
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
        out.push(Group {
            class: Class::Tp,
            stage: Some(stage),
            members: tpg.clone(),
            hosts: hosts(tpg),
            nvlink: topo.one_nvlink_domain(tpg),
            role: Role::Tp {
                replica: (c.dp * g.cp + c.cp) as usize,
                per_layer: tp_colls.clone(),
                layernorm,
            },
        });
    }
    let kind = if wl.distributed_optimizer {
        CollKind::ReduceScatter
    } else {
        CollKind::AllReduce
    };
    // dense gradients over each DP×CP group, expert gradients over each expert-DP group
    let expert: &[Vec<Rank>] = if wl.moe.is_some() { &g.edp_groups } else { &[] };
    let lists = [
        (GradGroup::DataContext, &g.dp_cp_groups[..]),
        (GradGroup::ExpertData, expert),
    ];
    for (which, list) in lists {
        for grp in list {
            if grp.len() < 2 {
                continue;
            }
            let stage = match which {
                GradGroup::DataContext => g.coords(grp[0]).pp,
                GradGroup::ExpertData => g.expert_coords(grp[0]).pp,
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
            out.push(Group {
                class: Class::Dp,
                stage: Some(stage),
                members: grp.clone(),
                hosts: hosts(grp),
                nvlink: topo.one_nvlink_domain(grp),
                role: Role::Dp {
                    index: reduced.iter().map(|x| x.0).collect(),
                    buckets: reduced.into_iter().map(|x| x.1).collect(),
                    gathers,
                    expert: which == GradGroup::ExpertData,
                },
            });
        }
    }
    if let Some(b) = wl.emb_bytes.filter(|b| b.0 > 0) {
        for eg in &g.emb_groups {
            if eg.len() < 2 {
                continue;
            }
            out.push(Group {
                class: Class::Emb,
                stage: None,
                members: eg.clone(),
                hosts: hosts(eg),
                nvlink: topo.one_nvlink_domain(eg),
                role: Role::Emb(Coll {
                    kind: CollKind::AllReduce,
                    bytes: b,
                    count: 1,
                }),
            });
        }
    }
    out
}
