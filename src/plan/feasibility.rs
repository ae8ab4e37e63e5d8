//! Groups that must aggregate (`--require`): a feasible start for the solvers, or the
//! proof that none exists. A plan is called infeasible only with a proof, and the proof
//! names the groups, the switches and the constraint (slot pool or tree quota):
//!
//! 1. **Counting.** In a phase (groups that may be active together), a set of switches S
//!    holds at most `|S| × --ina-slots` slots and `|S| × --tree-quota` trees; a required
//!    group needs at least the least, over its options, of what the option reserves on S.
//!    When the groups' least needs exceed what S holds, no assignment fits. Tried for every
//!    single switch (the switches every option of a group uses) and for every group's
//!    reach (the union of its options' switches).
//! 2. **The exact program.** Otherwise the resource rows of the integer program
//!    ([`super::ilp::feasible`]) over the required groups: an integer point is the start;
//!    a closed branch and bound is the proof. The groups named are an irreducible core
//!    (dropping any one of them makes the rest fit, found by deletion within the first
//!    infeasible component of groups that compete for a switch), the switches those where
//!    the core's options meet, the constraint the one whose lifting makes the core fit.
//!
//! When the solver stops at the time limit before either, the answer is
//! [`PlanError::Unproved`], never "infeasible".

use super::ilp::{self, Limits};
use super::model::Model;
use super::options::OptKind;
use super::PlanError;
use crate::record::Class;
use crate::units::NodeId;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

/// Groups without a host option: they must aggregate.
pub(super) fn required(m: &Model) -> Vec<bool> {
    m.opts
        .iter()
        .map(|o| {
            !o.iter()
                .any(|o| matches!(o.kind, OptKind::Host(_) | OptKind::NvLink))
        })
        .collect()
}

/// Branch-and-bound nodes a feasibility program may take: a budget of work, so a proof
/// (or a start) does not depend on the machine's load; the deadline is a safety net.
const FEASIBILITY_NODES: u64 = 20_000;

fn limit(deadline: Instant) -> super::lp::Limit {
    super::lp::Limit {
        nodes: FEASIBILITY_NODES,
        time: deadline.saturating_duration_since(Instant::now()),
    }
}

/// Options for the required groups that fit (every other group on its host option), or
/// why none do.
pub(super) fn start_or_proof(m: &Model, deadline: Instant) -> Result<Vec<usize>, PlanError> {
    let req = required(m);
    if let Some(proof) = counting(m, &req) {
        return Err(PlanError::Infeasible(proof));
    }
    match ilp::feasible(m, &req, Limits::of(m), limit(deadline)) {
        Ok(Some(a)) => Ok(a),
        Ok(None) => Err(PlanError::Infeasible(exact_proof(m, &req, deadline))),
        Err(e) => Err(unproved(m, &req, &e)),
    }
}

fn unproved(m: &Model, req: &[bool], why: &str) -> PlanError {
    let n = req.iter().filter(|&&r| r).count();
    PlanError::Unproved(format!(
        "the heuristic found no way to fit the {n} groups that must aggregate ({}) and the exact program stopped before finding one or proving there is none ({why}); raise --time-limit",
        required_flag(m, req)
    ))
}

/// `--require dp,emb` for the classes of the required groups.
fn required_flag(m: &Model, req: &[bool]) -> String {
    let classes: BTreeSet<Class> = (0..m.groups.len())
        .filter(|&g| req[g])
        .map(|g| m.groups[g].class)
        .collect();
    let names: Vec<&str> = classes.iter().map(|c| c.as_str()).collect();
    format!("--require {}", names.join(","))
}

/// Group names for a message: every one up to eight, then how many more.
fn names(m: &Model, gs: &[usize]) -> String {
    let mut parts: Vec<String> = gs.iter().take(8).map(|&g| m.groups[g].name()).collect();
    if gs.len() > 8 {
        parts.push(format!("{} more", gs.len() - 8));
    }
    match parts.len() {
        0 => String::new(),
        1 => parts.remove(0),
        n => format!("{} and {}", parts[..n - 1].join(", "), parts[n - 1]),
    }
}

fn switch_list(s: &BTreeSet<NodeId>) -> String {
    let v: Vec<String> = s.iter().map(|x| x.to_string()).collect();
    if v.len() == 1 {
        format!("switch {}", v[0])
    } else {
        format!("switches {}", v.join(", "))
    }
}

/// The counting argument over every phase and candidate switch set.
fn counting(m: &Model, req: &[bool]) -> Option<String> {
    for p in &m.phases {
        let gs: Vec<usize> = p.groups.iter().copied().filter(|&g| req[g]).collect();
        if gs.is_empty() {
            continue;
        }
        let mut sets: BTreeSet<BTreeSet<NodeId>> = BTreeSet::new();
        for &g in &gs {
            let opts = &m.opts[g];
            let Some(first) = opts.first() else { continue };
            // switches every option of g uses, one at a time
            for s in &first.switches {
                if opts.iter().all(|o| o.switches.binary_search(s).is_ok()) {
                    sets.insert([*s].into_iter().collect());
                }
            }
            // and g's whole reach
            sets.insert(
                opts.iter()
                    .flat_map(|o| o.switches.iter().copied())
                    .collect(),
            );
        }
        for s in sets {
            if let Some(proof) = count_over(m, &gs, &s, &required_flag(m, req)) {
                return Some(proof);
            }
        }
    }
    None
}

/// The counting argument on one switch set `s` for groups `gs` active together.
fn count_over(m: &Model, gs: &[usize], s: &BTreeSet<NodeId>, flag: &str) -> Option<String> {
    let k = s.len() as u64;
    // per group: least slots and least trees any option puts on `s`
    let need: Vec<(usize, u64, u64)> = gs
        .iter()
        .map(|&g| {
            let (slots, trees) = m.opts[g].iter().fold((u64::MAX, u64::MAX), |acc, o| {
                let on = o.switches.iter().filter(|x| s.contains(x)).count() as u64;
                (acc.0.min(on * o.slots as u64), acc.1.min(on))
            });
            (g, slots, trees)
        })
        .filter(|n| n.2 > 0)
        .collect();
    let who: Vec<usize> = need.iter().map(|n| n.0).collect();
    let slots: u64 = need.iter().map(|n| n.1).sum();
    let trees: u64 = need.iter().map(|n| n.2).sum();
    let times = |x: &str| {
        if k == 1 {
            x.to_string()
        } else {
            format!("{k} switches × {x}")
        }
    };
    let proof = |what: &str, each: Vec<u64>, total: u64, limit: String| {
        let each: Vec<String> = each.iter().map(u64::to_string).collect();
        format!(
            "counting on {}: the {}, which must aggregate ({flag}) and may be active together, {what} there under every option (at least {} respectively): {total} > {}",
            switch_list(s),
            names(m, &who),
            each.join(", "),
            times(&limit)
        )
    };
    if slots > k * m.slots as u64 {
        let each = need.iter().map(|n| n.1).collect();
        return Some(proof(
            "reserve slots",
            each,
            slots,
            format!("--ina-slots {}", m.slots),
        ));
    }
    if let Some(q) = m.quota.filter(|&q| trees > k * q as u64) {
        let each = need.iter().map(|n| n.2).collect();
        return Some(proof("put trees", each, trees, format!("--tree-quota {q}")));
    }
    None
}

/// The required groups that compete for a switch in some phase, by connected component
/// (ascending first group).
fn components(m: &Model, req: &[bool]) -> Vec<Vec<usize>> {
    let n = m.groups.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn find(p: &mut [usize], x: usize) -> usize {
        let mut r = x;
        while p[r] != r {
            r = p[r];
        }
        let mut y = x;
        while p[y] != r {
            let next = p[y];
            p[y] = r;
            y = next;
        }
        r
    }
    for ph in &m.phases {
        let mut first_on: BTreeMap<NodeId, usize> = BTreeMap::new();
        for &g in ph.groups.iter().filter(|&&g| req[g]) {
            for o in &m.opts[g] {
                for s in &o.switches {
                    let h = *first_on.entry(*s).or_insert(g);
                    let (a, b) = (find(&mut parent, g), find(&mut parent, h));
                    parent[a.max(b)] = a.min(b);
                }
            }
        }
    }
    let mut comps: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for g in (0..n).filter(|&g| req[g]) {
        let r = find(&mut parent, g);
        comps.entry(r).or_default().push(g);
    }
    comps.into_values().collect()
}

/// The proof message once the exact program found no integer point for all required
/// groups: an irreducible core, its switches and the constraint (as far as the time
/// limit lets the deletion go; a core not reduced to the end is said so).
fn exact_proof(m: &Model, req: &[bool], deadline: Instant) -> String {
    let only = |gs: &[usize]| {
        let mut keep = vec![false; m.groups.len()];
        for &g in gs {
            keep[g] = true;
        }
        keep
    };
    let fits = |gs: &[usize], limits: Limits| ilp::feasible(m, &only(gs), limits, limit(deadline));
    let all: Vec<usize> = (0..m.groups.len()).filter(|&g| req[g]).collect();
    // the first component the program proves infeasible on its own
    let mut core = all.clone();
    for c in components(m, req) {
        if matches!(fits(&c, Limits::of(m)), Ok(None)) {
            core = c;
            break;
        }
    }
    // deletion: drop every group without which the rest still cannot fit
    let mut minimal = true;
    let mut i = 0;
    while i < core.len() {
        let mut rest = core.clone();
        rest.remove(i);
        match fits(&rest, Limits::of(m)) {
            Ok(None) => core = rest,
            Ok(Some(_)) => i += 1,
            Err(_) => {
                minimal = false;
                break;
            }
        }
    }
    // the switches where the core's options meet
    let mut seen: BTreeMap<NodeId, BTreeSet<usize>> = BTreeMap::new();
    for &g in &core {
        for o in &m.opts[g] {
            for s in &o.switches {
                seen.entry(*s).or_default().insert(g);
            }
        }
    }
    let shared: BTreeSet<NodeId> = seen
        .into_iter()
        .filter(|(_, gs)| gs.len() > 1)
        .map(|(s, _)| s)
        .collect();
    let slots = format!("--ina-slots {}", m.slots);
    let quota = m.quota.map(|q| format!("--tree-quota {q}"));
    let constraint = match &quota {
        None => slots,
        Some(q) => {
            let lift_quota = Limits {
                quota: None,
                ..Limits::of(m)
            };
            let lift_slots = Limits {
                slots: None,
                ..Limits::of(m)
            };
            match (fits(&core, lift_quota), fits(&core, lift_slots)) {
                (Ok(Some(_)), Ok(None)) => q.clone(),
                (Ok(None), Ok(Some(_))) => slots,
                (Ok(Some(_)), Ok(Some(_))) => {
                    format!("{slots} and {q} together (either lifted, they fit)")
                }
                (Ok(None), Ok(None)) => format!("{slots}, nor within {q}"),
                _ => format!("{slots} and {q} (the time limit ended before telling which binds)"),
            }
        }
    };
    format!(
        "proved by the exact program (its branch and bound over every combination of their options closed without one that fits): the {} cannot all aggregate within {constraint} on {}{} ({})",
        names(m, &core),
        switch_list(&shared),
        if minimal {
            "; without any one of them the others fit"
        } else {
            ""
        },
        required_flag(m, req)
    )
}
