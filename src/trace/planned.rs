//! Lowering a plan (`ina3d trace --plan`): is the plan for this job, is every tree a tree
//! of its group on this topology, and what slots it reserves (the `ina_reservations`
//! header both back-ends read). The generator ([`super::gen`]) asks [`PlanIndex`] for the
//! decision of each collective's group.

use super::options::Reservation;
use super::{TraceError, TraceHeader};
use crate::formats::plan_json::{Decision, PlanFile, PlannedGroup};
use crate::record::Class;
use crate::topology::{NodeKind, Topology};
use crate::units::{NodeId, Rank};
use std::collections::{BTreeMap, HashMap};

/// Trace-header keys that identify what a plan was made for: the job's layout and sizes,
/// the compute model, the topology and ECMP seed (trees are built on its routes), and the
/// INA switch model (slot pool, payload, window, aggregating switches).
pub const PLAN_JOB_KEYS: &[&str] = &[
    "topology",
    "seed",
    "collective",
    "ina_switches",
    "ina_slots",
    "ina_payload_bytes",
    "ina_window",
    "tp",
    "pp",
    "dp",
    "cp",
    "vpp",
    "world",
    "rank_order",
    "microbatches",
    "num_layers",
    "hidden_size",
    "ffn_hidden_size",
    "num_attention_heads",
    "seq_length",
    "micro_batch_size",
    "global_batch_size",
    "padded_vocab_size",
    "sequence_parallel",
    "distributed_optimizer",
    "overlap_grad_reduce",
    "tp_op_bytes",
    "pp_p2p_bytes",
    "gpu",
    "mfu",
    "calibration_factor",
    "gpus_per_server",
    "nvlink_rate_bps",
    "nvlink_step_latency_ns",
];

/// The identity entries of a trace header (what [`PlanFile::job`] records).
pub fn plan_job(h: &TraceHeader) -> BTreeMap<String, String> {
    PLAN_JOB_KEYS
        .iter()
        .filter_map(|k| h.get(k).map(|v| (k.to_string(), v.to_string())))
        .collect()
}

/// Refuse a plan made for another job, topology, seed or switch model, naming every key
/// that differs.
pub fn check_plan_job(plan: &PlanFile, h: &TraceHeader) -> Result<(), TraceError> {
    let mine = plan_job(h);
    let mut diffs = Vec::new();
    for k in PLAN_JOB_KEYS {
        let (a, b) = (plan.job.get(*k), mine.get(*k));
        if a != b {
            diffs.push(format!(
                "{k}: plan `{}`, this trace `{}`",
                a.map_or("(absent)", String::as_str),
                b.map_or("(absent)", String::as_str)
            ));
        }
    }
    if diffs.is_empty() {
        Ok(())
    } else {
        Err(TraceError::Generate(format!(
            "the plan was made for another job or topology ({}); re-run `ina3d plan` with this trace's options or pass the plan's",
            diffs.join("; ")
        )))
    }
}

/// The plan's groups by (class, lowest rank), checked against the topology.
pub(super) struct PlanIndex {
    by_first: HashMap<(Class, Rank), usize>,
}

impl PlanIndex {
    /// Check every group of `plan` on `topo` and index it.
    pub(super) fn new(plan: &PlanFile, topo: &Topology) -> Result<PlanIndex, TraceError> {
        let mut by_first = HashMap::new();
        for (i, g) in plan.groups.iter().enumerate() {
            check_group(g, topo)
                .map_err(|m| TraceError::Generate(format!("plan {}: {m}", name(g))))?;
            by_first.insert((g.class, g.members[0]), i);
        }
        Ok(PlanIndex { by_first })
    }

    /// The plan's group for a collective of `class` over `members`.
    pub(super) fn group<'p>(
        &self,
        plan: &'p PlanFile,
        class: Class,
        members: &[Rank],
    ) -> Result<&'p PlannedGroup, TraceError> {
        let mut m = members.to_vec();
        m.sort_unstable();
        let g = self
            .by_first
            .get(&(class, m[0]))
            .map(|&i| &plan.groups[i])
            .filter(|g| g.members == m);
        g.ok_or_else(|| {
            TraceError::Generate(format!(
                "the plan has no {class} group of ranks {} (was it made for this job?)",
                m.iter()
                    .map(|r| r.0.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            ))
        })
    }
}

fn name(g: &PlannedGroup) -> String {
    format!(
        "{} group of ranks {}",
        g.class,
        g.members
            .iter()
            .map(|r| r.0.to_string())
            .collect::<Vec<_>>()
            .join(",")
    )
}

/// Each host's ToR (first switch its NIC attaches to).
fn tors(topo: &Topology) -> Vec<Option<NodeId>> {
    super::aggregating_switches(topo, &super::InaSwitches::All)
        .map(|x| x.1)
        .unwrap_or_default()
}

fn check_group(g: &PlannedGroup, topo: &Topology) -> Result<(), String> {
    let n = topo.node_count();
    let world = topo.gpus.len() as u32;
    if let Some(r) = g.members.iter().find(|r| r.0 >= world) {
        return Err(format!("rank {r} is beyond the topology's {world} GPUs"));
    }
    let hosts: Vec<NodeId> = g.members.iter().map(|r| topo.gpu(*r)).collect();
    let switch = |v: NodeId| v.idx() < n && topo.kinds[v.idx()] == NodeKind::Switch;
    let ina = !matches!(g.decision, Decision::Host);
    if ina && g.slots == 0 {
        return Err("an aggregating decision reserves 0 slots".into());
    }
    match &g.decision {
        Decision::Host => Ok(()),
        Decision::Tree { root, edges, .. } => {
            check_tree(&hosts, *root, edges, &switch)?;
            let mut parents: Vec<NodeId> = edges.iter().map(|e| e.1).collect();
            parents.sort_unstable();
            parents.dedup();
            let reserved: Vec<NodeId> = g.reservations.iter().map(|r| r.0).collect();
            if reserved != parents || g.reservations.iter().any(|r| r.1 != g.slots) {
                return Err(format!(
                    "reservations ({}) must be the tree's aggregating switches ({}) at {} slots each",
                    words(&g.reservations),
                    crate::units::list(&parents),
                    g.slots
                ));
            }
            Ok(())
        }
        Decision::Rina { tors: ts } => {
            let tor = tors(topo);
            for t in ts {
                let under = hosts
                    .iter()
                    .filter(|h| tor.get(h.idx()).copied().flatten() == Some(*t))
                    .count();
                if !switch(*t) || under < 2 {
                    return Err(format!(
                        "Rina ToR {t} is not the ToR of two or more members"
                    ));
                }
            }
            let reserved: Vec<NodeId> = g.reservations.iter().map(|r| r.0).collect();
            if &reserved != ts {
                return Err(format!(
                    "reservations ({}) must be the Rina ToRs ({})",
                    words(&g.reservations),
                    crate::units::list(ts)
                ));
            }
            Ok(())
        }
    }
}

/// A tree over `hosts`: every member sends up exactly once, every other child is an
/// aggregating switch that is itself a parent, parents are switches, the last edge ends
/// at `root` which sends nowhere, and edges come bottom-up (all edges into a node before
/// the node's own edge).
fn check_tree(
    hosts: &[NodeId],
    root: NodeId,
    edges: &[(NodeId, NodeId)],
    switch: &dyn Fn(NodeId) -> bool,
) -> Result<(), String> {
    let mut up: HashMap<NodeId, usize> = HashMap::new();
    for (i, &(c, p)) in edges.iter().enumerate() {
        if !switch(p) {
            return Err(format!(
                "tree edge {c} → {p}: {p} is not a switch of the topology"
            ));
        }
        if up.insert(c, i).is_some() {
            return Err(format!("tree node {c} has two parents"));
        }
        if c == root {
            return Err(format!("the root {root} has a parent"));
        }
    }
    if edges.last().map(|e| e.1) != Some(root) {
        return Err(format!("the last tree edge must end at the root {root}"));
    }
    for h in hosts {
        if !up.contains_key(h) {
            return Err(format!("member GPU {h} sends to no switch"));
        }
    }
    for (i, &(c, p)) in edges.iter().enumerate() {
        if !hosts.contains(&c) && !edges.iter().any(|e| e.1 == c) {
            return Err(format!(
                "tree node {c} is neither a member nor an aggregating switch"
            ));
        }
        if p != root {
            match up.get(&p) {
                Some(&j) if j > i => {}
                Some(_) => {
                    return Err(format!(
                        "tree edge {c} → {p} comes after {p}'s own edge (edges must go bottom-up)"
                    ))
                }
                None => return Err(format!("switch {p} aggregates but sends its sum nowhere")),
            }
        }
    }
    Ok(())
}

/// The slots `plan` reserves, keyed as the back-ends match aggregations
/// ([`Reservation`]): a tree's switches for the group's first GPU, a Rina ToR for the
/// first GPU of its rack.
pub fn reservations(plan: &PlanFile, topo: &Topology) -> Vec<Reservation> {
    let tor = tors(topo);
    let mut out = Vec::new();
    for g in &plan.groups {
        let hosts: Vec<NodeId> = g
            .members
            .iter()
            .filter(|r| (r.0 as usize) < topo.gpus.len())
            .map(|r| topo.gpu(*r))
            .collect();
        match &g.decision {
            Decision::Host => {}
            Decision::Tree { .. } => {
                let first = hosts.iter().copied().min().unwrap_or(NodeId(0));
                out.extend(g.reservations.iter().map(|&(switch, slots)| Reservation {
                    switch,
                    class: g.class,
                    first,
                    slots,
                }));
            }
            Decision::Rina { .. } => {
                for &(switch, slots) in &g.reservations {
                    if let Some(first) = hosts
                        .iter()
                        .copied()
                        .filter(|h| tor.get(h.idx()).copied().flatten() == Some(switch))
                        .min()
                    {
                        out.push(Reservation {
                            switch,
                            class: g.class,
                            first,
                            slots,
                        });
                    }
                }
            }
        }
    }
    out.sort_unstable();
    out
}

/// Slot reservations in words: `switch 26: 4000000000 slots, switch 27: …`.
fn words(reservations: &[(NodeId, u32)]) -> String {
    if reservations.is_empty() {
        return "none".into();
    }
    reservations
        .iter()
        .map(|(s, n)| format!("switch {s}: {n} slots"))
        .collect::<Vec<_>>()
        .join(", ")
}
