//! Lowering a plan (`ina3d trace --plan`): is the plan for this job, topology and switch
//! model, can every decision be honoured, and what slots it reserves (the
//! `ina_reservations` header both back-ends read). The generator ([`super::gen`]) asks
//! [`PlanIndex`] for the decision of each collective's group.
//!
//! A plan is refused — every message naming `groups[i]`, the group, the field and the
//! constraint — when
//! - it was made for another job, seed, switch model, channel count or topology (the
//!   topology by a hash of its content, [`topology_hash`], not by its spec string);
//! - a group is not one of the job's, or a decision other than `host` is given to a group
//!   whose collectives never reach the network (inside one NVLink server);
//! - a tree is not a tree of its members: edges bottom-up into the root, every parent an
//!   aggregating switch (`--ina-switches`) *above* every member below it;
//! - a switch's reservations exceed its pool (`--ina-slots`) or its trees the plan's tree
//!   quota among groups that may be active together, by the reuse rule of
//!   [`crate::formats::plan_json::Activity`] ([`concurrent_sets`]).

use super::options::Reservation;
use super::{TraceError, TraceHeader, TraceOptions};
use crate::formats::plan_json::{Decision, PlanFile, PlannedGroup};
use crate::formats::topology_txt::Flavor;
use crate::record::{AggGroup, Class};
use crate::schedule::{CollKind, Workload};
use crate::topology::{NodeKind, Routing, Topology};
use crate::units::{NodeId, Rank};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Trace-header keys that identify what a plan was made for: the job's layout and sizes,
/// the compute model, the topology (by content: `topology_hash`; the spec string is
/// recorded for people and not compared) and ECMP seed (trees are built on its routes),
/// the NCCL channels a collective is split over, and the INA switch model (slot pool,
/// payload, window, aggregating switches).
pub const PLAN_JOB_KEYS: &[&str] = &[
    "topology",
    "topology_hash",
    "nccl_channels",
    "seed",
    "routing",
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
    "gpu_peak_tflops",
    "mfu",
    "calibration_factor",
    "gpus_per_server",
    "nvlink_rate_bps",
    "nvlink_step_latency_ns",
    "grad_dtype_bytes",
];

/// The entry of [`PLAN_JOB_KEYS`] recorded but not compared: a topology is matched by its
/// content, so a file moved or a builder spec spelt otherwise still matches.
const INFORMATIONAL: &str = "topology";

/// A hash of a topology's content, as 16 hex digits: FNV-1a over its SimAI `topology.txt`
/// text (nodes and their kinds, every link's ends, rate, delay and error rate, GPUs per
/// server; not its spec string or file name). A topology file whose link rates changed
/// since a plan was made hashes differently.
pub fn topology_hash(topo: &Topology) -> String {
    let text = topo.to_text(Flavor::Simai {
        gpus_per_server: topo.gpus_per_server,
        gpu_type: String::new(),
    });
    format!("{:016x}", crate::formats::fnv1a64(text.as_bytes()))
}

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
    for k in PLAN_JOB_KEYS.iter().filter(|k| **k != INFORMATIONAL) {
        let (a, b) = (plan.job.get(*k), mine.get(*k));
        if a != b && *k == "topology_hash" {
            let spec =
                |m: &BTreeMap<String, String>| m.get(INFORMATIONAL).cloned().unwrap_or_default();
            diffs.push(format!(
                "job.topology_hash: plan `{}` (made on `{}`), this trace `{}` (`{}`): the topology's nodes, links, rates or delays differ",
                a.map_or("(absent)", String::as_str),
                spec(&plan.job),
                b.map_or("(absent)", String::as_str),
                spec(&mine)
            ));
        } else if a != b {
            diffs.push(format!(
                "job.{k}: plan `{}`, this trace `{}`",
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

/// The plan's groups by (class, members), checked against the job and topology.
pub(super) struct PlanIndex {
    by_members: HashMap<GroupKey, usize>,
}

/// A group's identity in a plan: class, whether it is a MoE model's expert-DP group (the
/// dense and the expert DP groups can have the same members), members ascending.
type GroupKey = (Class, bool, Vec<Rank>);

impl PlanIndex {
    /// Check `plan` for lowering `wl` on `topo` with `opts` ([`check_plan`]) and index it.
    pub(super) fn new(
        plan: &PlanFile,
        wl: &Workload,
        topo: &Topology,
        opts: &TraceOptions,
    ) -> Result<PlanIndex, TraceError> {
        check_plan(plan, wl, topo, opts)?;
        let by_members = plan
            .groups
            .iter()
            .enumerate()
            .map(|(i, g)| ((g.class, g.expert, g.members.clone()), i))
            .collect();
        Ok(PlanIndex { by_members })
    }

    /// The plan's group for a collective of `class` over `members` (`expert`: a MoE
    /// model's expert gradients).
    pub(super) fn group<'p>(
        &self,
        plan: &'p PlanFile,
        class: Class,
        expert: bool,
        members: &[Rank],
    ) -> Result<&'p PlannedGroup, TraceError> {
        let mut m = members.to_vec();
        m.sort_unstable();
        let g = self
            .by_members
            .get(&(class, expert, m.clone()))
            .map(|&i| &plan.groups[i]);
        g.ok_or_else(|| {
            TraceError::Generate(format!(
                "the plan has no {}{class} group of ranks {} (was it made for this job?)",
                AggGroup::of_expert(expert).prefix(),
                ranks(&m)
            ))
        })
    }
}

fn ranks(m: &[Rank]) -> String {
    m.iter()
        .map(|r| r.0.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

fn stage(s: Option<u32>) -> String {
    s.map_or("no stage (null)".into(), |s| format!("stage {s}"))
}

/// Reservations as `switch:slots` entries.
fn listed(r: &[(NodeId, u32)]) -> String {
    r.iter()
        .map(|(s, k)| format!("{s}:{k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn switches(s: &[NodeId]) -> String {
    let v: Vec<String> = s.iter().map(|x| x.to_string()).collect();
    format!("[{}]", v.join(", "))
}

/// `groups[i] (dp group of ranks 0,2,4,6, stage 0)`: where a refusal points in the file.
fn at(i: usize, g: &PlannedGroup) -> String {
    let stage = g.stage.map_or(String::new(), |s| format!(", stage {s}"));
    format!(
        "groups[{i}] ({} group of ranks {}{stage})",
        g.class,
        ranks(&g.members)
    )
}

/// A refusal of group `i`'s `field`.
fn refuse(plan_group: (usize, &PlannedGroup), field: &str, msg: String) -> TraceError {
    TraceError::Generate(format!(
        "plan {}: {field}: {msg}",
        at(plan_group.0, plan_group.1)
    ))
}

/// Everything that lowering `plan` for `wl` on `topo` with `opts` relies on (the module
/// docs list it; [`check_plan_job`] is the identity part, which needs the trace header):
/// the groups are the job's, decisions only where traffic reaches the network, trees of
/// their members above them on aggregating switches, reservations within the pools by the
/// reuse rule. The first refusal is returned.
pub fn check_plan(
    plan: &PlanFile,
    wl: &Workload,
    topo: &Topology,
    opts: &TraceOptions,
) -> Result<(), TraceError> {
    let routing = Routing::with_mode(topo, opts.seed, opts.routing)?;
    let (can_agg, tor) = super::aggregating_switches(topo, &opts.ina.switches)?;
    let net = Net {
        topo,
        routing: &routing,
        can_agg: &can_agg,
        tor: &tor,
    };
    let job: HashMap<GroupKey, super::groups::Group> = super::groups::groups(wl, topo)
        .into_iter()
        .map(|g| ((g.class, g.is_expert(), g.members.clone()), g))
        .collect();
    let mut planned: BTreeSet<(Class, bool, &[Rank])> = BTreeSet::new();
    for (i, g) in plan.groups.iter().enumerate() {
        let here = (i, g);
        let Some(jg) = job.get(&(g.class, g.expert, g.members.clone())) else {
            return Err(refuse(
                here,
                "members",
                format!(
                    "the job has no {}{} group of these ranks (was the plan made for this job?)",
                    AggGroup::of_expert(g.expert).prefix(),
                    g.class
                ),
            ));
        };
        planned.insert((g.class, g.expert, &g.members));
        if jg.stage != g.stage {
            return Err(refuse(
                here,
                "stage",
                format!(
                    "{}, the job's group is at {}",
                    stage(g.stage),
                    stage(jg.stage)
                ),
            ));
        }
        if matches!(g.decision, Decision::Host) {
            if !g.reservations.is_empty() || g.slots != 0 {
                return Err(refuse(
                    here,
                    "reservations",
                    format!(
                        "a host decision reserves nothing (slots 0, no reservations), not {} slots on [{}]",
                        g.slots,
                        listed(&g.reservations)
                    ),
                ));
            }
            continue;
        }
        if jg.nvlink {
            return Err(refuse(
                here,
                "decision",
                format!(
                    "a {} for a group inside one NVLink server (server {}): its collectives never reach the network, so no switch can aggregate them (give it `host`)",
                    kind(&g.decision),
                    topo.server_of(g.members[0])
                ),
            ));
        }
        if !plan.settings.classes.contains(&g.class) {
            return Err(refuse(
                here,
                "decision",
                format!(
                    "a {} for a {} group, a class the plan's settings.classes do not allow",
                    kind(&g.decision),
                    g.class
                ),
            ));
        }
        if matches!(g.decision, Decision::Rina { .. })
            && !jg.colls().iter().any(|c| c.kind == CollKind::AllReduce)
        {
            return Err(refuse(
                here,
                "decision",
                "Rina reduces all-reduces only, and this group has none (its reduce-scatters stay on the host ring): its reservations would hold slots for nothing".into(),
            ));
        }
        check_decision(g, &jg.hosts, &net).map_err(|(f, m)| refuse(here, f, m))?;
    }
    if let Some(missing) = job
        .values()
        .filter(|g| !g.nvlink && !planned.contains(&(g.class, g.is_expert(), &g.members[..])))
        .min_by_key(|g| (g.class, g.members[0]))
    {
        return Err(TraceError::Generate(format!(
            "plan groups: the job's {} has no entry (was the plan made for this job?)",
            missing.name()
        )));
    }
    check_windows(plan)?;
    check_pools(plan, opts.ina.slots)
}

/// What the checks of one decision need of the network.
struct Net<'a> {
    topo: &'a Topology,
    routing: &'a Routing,
    can_agg: &'a [bool],
    tor: &'a [Option<NodeId>],
}

impl Net<'_> {
    fn aggregating(&self, v: NodeId) -> bool {
        self.can_agg.get(v.idx()).copied().unwrap_or(false)
            && self.topo.kinds[v.idx()] == NodeKind::Switch
    }
    fn is_switch(&self, v: NodeId) -> bool {
        v.idx() < self.topo.node_count() && self.topo.kinds[v.idx()] == NodeKind::Switch
    }
    /// `s` is above every host of `hosts`: reached from each by a strictly upward shortest
    /// path ([`Routing::aggregation_tree_at`]'s rule).
    fn above(&self, s: NodeId, hosts: &[NodeId]) -> bool {
        let can = |v: NodeId| self.aggregating(v);
        self.routing.aggregation_tree_at(hosts, &can, s, 0).is_ok()
    }
}

fn kind(d: &Decision) -> &'static str {
    match d {
        Decision::Host => "host decision",
        Decision::Tree { .. } => "tree",
        Decision::Rina { .. } => "Rina decision",
    }
}

/// One group's tree or Rina decision on the network: `Err((field, why))`.
fn check_decision(
    g: &PlannedGroup,
    hosts: &[NodeId],
    net: &Net,
) -> Result<(), (&'static str, String)> {
    if g.slots == 0 {
        return Err(("slots", "an aggregating decision reserves 0 slots".into()));
    }
    match &g.decision {
        Decision::Host => Ok(()),
        Decision::Tree { root, edges, .. } => {
            check_tree(hosts, *root, edges, &|v| net.is_switch(v))
                .map_err(|m| ("decision.edges", m))?;
            check_tree_above(hosts, *root, edges, net)?;
            let mut parents: Vec<NodeId> = edges.iter().map(|e| e.1).collect();
            parents.sort_unstable();
            parents.dedup();
            let reserved: Vec<NodeId> = g.reservations.iter().map(|r| r.0).collect();
            if reserved != parents || g.reservations.iter().any(|r| r.1 != g.slots) {
                return Err((
                    "reservations",
                    format!(
                        "[{}] must be the tree's aggregating switches {} at {} slots each",
                        listed(&g.reservations),
                        switches(&parents),
                        g.slots
                    ),
                ));
            }
            Ok(())
        }
        Decision::Rina { tors: ts } => {
            for t in ts {
                let under = hosts
                    .iter()
                    .filter(|h| net.tor.get(h.idx()).copied().flatten() == Some(*t))
                    .count();
                if !net.aggregating(*t) {
                    return Err((
                        "decision.tors",
                        format!("Rina ToR {t} is not an aggregating switch (--ina-switches)"),
                    ));
                }
                if under < 2 {
                    return Err((
                        "decision.tors",
                        format!("Rina ToR {t} is not the ToR of two or more members"),
                    ));
                }
            }
            let reserved: Vec<NodeId> = g.reservations.iter().map(|r| r.0).collect();
            if &reserved != ts || g.reservations.iter().any(|r| r.1 != g.slots) {
                return Err((
                    "reservations",
                    format!(
                        "[{}] must be the Rina ToRs {} at {} slots each",
                        listed(&g.reservations),
                        switches(ts),
                        g.slots
                    ),
                ));
            }
            Ok(())
        }
    }
}

/// Every parent of a tree (which [`check_tree`] found well formed) is an aggregating
/// switch above every member below it — the root above all members.
fn check_tree_above(
    hosts: &[NodeId],
    root: NodeId,
    edges: &[(NodeId, NodeId)],
    net: &Net,
) -> Result<(), (&'static str, String)> {
    // members below each node, bottom-up (edges come bottom-up)
    let mut below: HashMap<NodeId, Vec<NodeId>> = hosts.iter().map(|&h| (h, vec![h])).collect();
    for &(c, p) in edges {
        let b = below.get(&c).cloned().unwrap_or_default();
        below.entry(p).or_default().extend(b);
    }
    let mut parents: Vec<NodeId> = edges.iter().map(|e| e.1).collect();
    parents.sort_unstable();
    parents.dedup();
    for p in parents {
        let field = if p == root {
            "decision.root"
        } else {
            "decision.edges"
        };
        if !net.aggregating(p) {
            return Err((
                field,
                format!("switch {p} aggregates but is not an aggregating switch (--ina-switches)"),
            ));
        }
        let mut ms = below.get(&p).cloned().unwrap_or_default();
        ms.sort_unstable();
        if !net.above(p, &ms) {
            let far = ms
                .iter()
                .find(|&&m| !net.above(p, &[m]))
                .map_or(String::new(), |m| {
                    format!(" (member GPU {m} is not below it)")
                });
            return Err((
                field,
                format!(
                    "switch {p} is not above every member it aggregates{far}: a tree's switches sit on the members' upward paths"
                ),
            ));
        }
    }
    Ok(())
}

/// What the job's structure fixes about the windows (the reader checked that they are
/// windows): every TP group is active over the whole iteration (its collectives run in
/// every layer's forward and backward), and the DP groups of one stage start together
/// (one backward pass releases their first buckets). The rest of a window is the
/// planner's prediction, which only its cost model could re-derive.
fn check_windows(plan: &PlanFile) -> Result<(), TraceError> {
    let mut dp_start: BTreeMap<Option<u32>, usize> = BTreeMap::new();
    for (i, g) in plan.groups.iter().enumerate() {
        if g.class == Class::Dp {
            let first = *dp_start.entry(g.stage).or_insert(i);
            let f = &plan.groups[first];
            if f.active.from_ns != g.active.from_ns {
                return Err(refuse(
                    (i, g),
                    "active.from_ns",
                    format!(
                        "{}, but {} of the same stage starts at {}: one backward pass releases the first buckets of every DP group of a stage",
                        g.active.from_ns,
                        at(first, f),
                        f.active.from_ns
                    ),
                ));
            }
        }
        if g.class == Class::Tp && g.active.interval() != (0.0, f64::INFINITY) {
            return Err(refuse(
                (i, g),
                "active",
                format!(
                    "a TP group is active from the iteration's start to its end (from_ns 0, until_ns null), not from {} to {}",
                    g.active.from_ns,
                    g.active.until_ns.map_or("null".into(), |u| u.to_string())
                ),
            ));
        }
    }
    Ok(())
}

/// The reuse rule of [`crate::formats::plan_json::Activity`]: the maximal sets of windows
/// (closed intervals `(from, until)`, `until` may be +∞) that share an instant, each
/// ascending, in order of their instant. Groups of one set may be active together; groups
/// in no common set never are. One rule for the planner (its phases) and for this check.
pub fn concurrent_sets(windows: &[(f64, f64)]) -> Vec<Vec<usize>> {
    // starts before ends at one instant: touching windows meet
    let mut ev: Vec<(f64, bool, usize)> = Vec::with_capacity(2 * windows.len());
    for (i, &(a, b)) in windows.iter().enumerate() {
        ev.push((a, false, i));
        ev.push((b.max(a), true, i));
    }
    ev.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)).then(x.2.cmp(&y.2)));
    let mut active: BTreeSet<usize> = BTreeSet::new();
    let mut out = Vec::new();
    let mut grew = false;
    for (_, end, i) in ev {
        if end {
            // the set before the first end after a start is maximal
            if grew {
                out.push(active.iter().copied().collect());
                grew = false;
            }
            active.remove(&i);
        } else {
            active.insert(i);
            grew = true;
        }
    }
    out
}

/// Per set of groups that may be active together and per switch: reservations within
/// `pool` slots, trees within the plan's tree quota.
fn check_pools(plan: &PlanFile, pool: u32) -> Result<(), TraceError> {
    let windows: Vec<(f64, f64)> = plan.groups.iter().map(|g| g.active.interval()).collect();
    for set in concurrent_sets(&windows) {
        let mut on: BTreeMap<NodeId, Vec<(usize, u32)>> = BTreeMap::new();
        for &i in &set {
            for &(s, k) in &plan.groups[i].reservations {
                on.entry(s).or_default().push((i, k));
            }
        }
        for (s, uses) in on {
            let slots: u64 = uses.iter().map(|u| u.1 as u64).sum();
            let over_quota = plan
                .settings
                .tree_quota
                .filter(|&q| uses.len() as u64 > q as u64);
            if slots <= pool as u64 && over_quota.is_none() {
                continue;
            }
            let who: Vec<String> = uses
                .iter()
                .map(|&(i, k)| format!("{} {k} slots", at(i, &plan.groups[i])))
                .collect();
            let from = uses
                .iter()
                .map(|u| plan.groups[u.0].active.from_ns)
                .fold(0.0, f64::max);
            let (what, limit) = match over_quota {
                Some(q) if slots <= pool as u64 => (
                    format!("{} trees", uses.len()),
                    format!("the plan's tree quota {q} (settings.tree_quota)"),
                ),
                _ => (
                    format!("{slots} slots"),
                    format!("the pool of {pool} (--ina-slots {pool})"),
                ),
            };
            return Err(TraceError::Generate(format!(
                "plan reservations: switch {s}: {} = {what} > {limit}, and their `active` windows meet at {from:.0} ns, so they may run together",
                who.join(" + ")
            )));
        }
    }
    Ok(())
}

/// Each host's ToR (first switch its NIC attaches to).
fn tors(topo: &Topology) -> Vec<Option<NodeId>> {
    super::aggregating_switches(topo, &super::InaSwitches::All)
        .map(|x| x.1)
        .unwrap_or_default()
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
/// first GPU of its rack; an expert-DP group's apart from the dense group's.
pub fn reservations(plan: &PlanFile, topo: &Topology) -> Vec<Reservation> {
    let tor = tors(topo);
    let mut out = Vec::new();
    for g in &plan.groups {
        let group = AggGroup::of_expert(g.expert);
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
                    group,
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
                            group,
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

/// The trace options that lower `plan` from `base`, the job's options the plan was made
/// for. A plan of groups is lowered in INA mode and slot policy `planned`; a plan whose
/// answer is a fixed policy ([`PlanFile::fixed_policy`]) as `ina3d run` lowers that policy
/// (the plan's groups are not consulted, and no reservations are written). The plan is
/// kept in both, so the trace header records its prediction.
pub fn lowering_options(base: &TraceOptions, plan: &PlanFile) -> TraceOptions {
    use crate::collective::InaMode;
    use crate::formats::plan_json::FixedPolicy;
    let mut o = base.clone();
    o.plan = Some(plan.clone());
    // The mode names its slot policy (`InaConfig::set_mode`), as `ina3d run`'s policies do.
    let ina = |o: &mut TraceOptions, mode: InaMode, classes: &[Class]| {
        o.ina.set_mode(mode);
        o.ina.classes = classes.to_vec();
    };
    let classes = plan.settings.classes.clone();
    match plan.fixed_policy {
        None => ina(&mut o, InaMode::Planned, &classes),
        Some(FixedPolicy::AllHost { algorithm }) => {
            ina(&mut o, InaMode::Off, &classes);
            o.collective = algorithm;
        }
        Some(FixedPolicy::InaDp) => ina(&mut o, InaMode::Hierarchical, &[Class::Dp]),
        Some(FixedPolicy::InaTp) => ina(&mut o, InaMode::Hierarchical, &[Class::Tp]),
        Some(FixedPolicy::InaTpDp) => ina(&mut o, InaMode::Hierarchical, &[Class::Tp, Class::Dp]),
        Some(FixedPolicy::Atp) => ina(&mut o, InaMode::Atp, &classes),
        Some(FixedPolicy::Rina) => ina(&mut o, InaMode::Rina, &classes),
    }
    o
}

#[cfg(test)]
mod tests {
    use super::concurrent_sets;

    const FOREVER: f64 = f64::INFINITY;

    #[test]
    fn windows_that_touch_meet_and_only_the_maximal_sets_are_kept() {
        // a [0,10] and b [10,20] touch at 10; c [21,30] meets neither; d runs throughout
        let sets = concurrent_sets(&[(0.0, 10.0), (10.0, 20.0), (21.0, 30.0), (0.0, FOREVER)]);
        assert_eq!(sets, vec![vec![0, 1, 3], vec![2, 3]]);
    }

    #[test]
    fn windows_that_never_meet_are_never_in_one_set() {
        let sets = concurrent_sets(&[(0.0, 1.0), (2.0, 3.0), (4.0, 5.0)]);
        assert_eq!(sets, vec![vec![0], vec![1], vec![2]]);
    }

    #[test]
    fn an_instant_and_a_reversed_window_still_meet_what_runs_at_their_start() {
        // (5, 5) is an instant; (7, 6) counts from 7 to 7, never as active forever
        let sets = concurrent_sets(&[(5.0, 5.0), (0.0, 10.0), (7.0, 6.0), (20.0, 30.0)]);
        assert_eq!(sets, vec![vec![0, 1], vec![1, 2], vec![3]]);
    }
}
