//! Building the cost model: every group's options priced ([`super::options`]), the
//! layer and pipeline-hop times, the timeline and the rows derived from it.

use super::*;
/// Per stage, the time of one layer's forward and backward without its TP collectives
/// (averaged over the stage's layers, dense and MoE alike): compute, and every other
/// communication step (ring attention, all-to-alls, expert collectives) lowered as the
/// trace lowers it over the stage's first group of its kind and priced alone
/// ([`Net::layer_step_time`]); and beside it the network part of that time, forward and
/// backward together ([`Model::other_comm`]: those steps alone, ring attention without
/// the compute it overlaps).
#[allow(clippy::type_complexity)]
pub(super) fn layer_compute(
    wl: &Workload,
    net: &Net,
) -> Result<(Vec<(f64, f64)>, Vec<f64>), PlanError> {
    let mut out = Vec::with_capacity(wl.pp() as usize);
    let mut comm_out = Vec::with_capacity(wl.pp() as usize);
    for (s, plan) in wl.stages.iter().enumerate() {
        let layers: Vec<u32> = plan.chunks.iter().flat_map(|c| c.clone()).collect();
        // (time, its network part) per step list
        let mut cache: HashMap<(bool, usize), (f64, f64)> = HashMap::new();
        let mut sum = (0.0, 0.0);
        let mut comm = 0.0;
        for &l in &layers {
            for (fwd, pass) in [(true, Pass::Fwd), (false, Pass::Bwd)] {
                let steps = wl.layer_steps(l, pass);
                // dense and MoE layers have their own step lists: price each list once
                let key = (fwd, steps.as_ptr() as usize);
                let (t, c) = match cache.get(&key) {
                    Some(&tc) => tc,
                    None => {
                        let tc = price_steps(wl, net, s as u32, steps)?;
                        cache.insert(key, tc);
                        tc
                    }
                };
                if fwd {
                    sum.0 += t;
                } else {
                    sum.1 += t;
                }
                comm += c;
            }
        }
        let n = layers.len().max(1) as f64;
        out.push((sum.0 / n, sum.1 / n));
        comm_out.push(comm / n);
    }
    Ok((out, comm_out))
}

/// One layer pass's steps on stage `s`: their time, and its network part (collectives
/// and all-to-alls as priced, ring attention's exchanges priced without their compute).
pub(super) fn price_steps(
    wl: &Workload,
    net: &Net,
    s: u32,
    steps: &[LayerStep],
) -> Result<(f64, f64), PlanError> {
    let price = |st: &LayerStep| net.layer_step_time(wl, s, st).map_err(PlanError::Model);
    let (mut t, mut comm) = (0.0, 0.0);
    for st in steps {
        let x = price(st)?;
        t += x;
        comm += match *st {
            LayerStep::Coll { .. } | LayerStep::AllToAll { .. } => x,
            LayerStep::CpRing { pass, .. } => price(&LayerStep::CpRing {
                pass,
                core: crate::units::Nanos(0),
            })?,
            _ => 0.0,
        };
    }
    Ok((t, comm))
}

/// Per stage, the embedding's and the LM head's steps (per micro-batch): compute, the TP
/// steps at the time of the stage's TP group's host option (replica 0; those steps are
/// not among the group's decided collectives), the loss's all-reduces as
/// [`Net::layer_step_time`] prices them.
pub(super) fn edge_times(
    wl: &Workload,
    net: &Net,
    groups: &[Group],
    opts: &[Vec<Opt>],
    tp_of: &HashMap<(usize, u32), usize>,
) -> Result<Vec<EdgeTimes>, PlanError> {
    let mut out = Vec::with_capacity(wl.pp() as usize);
    for (s, plan) in wl.stages.iter().enumerate() {
        let s = s as u32;
        let tp = tp_of.get(&(0, s)).copied();
        let time = |steps: &[LayerStep]| -> Result<f64, PlanError> {
            let mut t = 0.0;
            for st in steps {
                t += match (st, tp) {
                    (LayerStep::Tp(kind), Some(g)) => {
                        let Role::Tp { per_layer, .. } = &groups[g].role else {
                            continue;
                        };
                        let host = &opts[g][host_index(&opts[g], &groups[g])];
                        per_layer
                            .iter()
                            .position(|c| c.kind == *kind)
                            .map_or(0.0, |i| host.times[i])
                    }
                    _ => net.layer_step_time(wl, s, st).map_err(PlanError::Model)?,
                };
            }
            Ok(t)
        };
        out.push(EdgeTimes {
            emb_fwd: time(&plan.embedding_fwd)?,
            emb_bwd: time(&plan.embedding_bwd)?,
            head_fwd: time(&plan.head_fwd)?,
            head_bwd: time(&plan.head_bwd)?,
        });
    }
    Ok(out)
}

/// TP time per layer (forward, backward) of a TP group under option `o`: each TP step's
/// collective at the option's time for its kind.
pub(super) fn tp_layer(wl: &Workload, g: &Group, o: &Opt) -> (f64, f64) {
    let Role::Tp { per_layer, .. } = &g.role else {
        return (0.0, 0.0);
    };
    let t = |steps: &[LayerStep]| {
        steps
            .iter()
            .filter_map(|s| match s {
                LayerStep::Tp(k) => per_layer
                    .iter()
                    .position(|c| c.kind == *k)
                    .map(|i| o.times[i]),
                _ => None,
            })
            .sum::<f64>()
    };
    (t(&wl.fwd_steps), t(&wl.bwd_steps))
}

/// Build every option of every group.
pub(super) fn build_options(
    net: &Net,
    groups: &[Group],
    st: &Settings,
) -> Result<Vec<Vec<Opt>>, PlanError> {
    let levels: Vec<u32> = {
        let mut v: Vec<u32> = st
            .levels
            .iter()
            .map(|f| ((f * net.window as f64).round() as u32).max(1))
            .collect();
        v.sort_unstable_by(|a, b| b.cmp(a));
        v.dedup();
        v
    };
    let mut hosts = cohort_hosts(net, groups)?;
    let mut all = Vec::with_capacity(groups.len());
    for (gi, g) in groups.iter().enumerate() {
        let err = |msg: String| PlanError::Model(format!("{}: {msg}", g.name()));
        let mut opts = Vec::new();
        let required = st.required.contains(&g.class) && !g.nvlink;
        if !required {
            opts.append(&mut hosts[gi]);
        }
        let aggregatable = g.colls().iter().any(|c| c.aggregatable());
        if !g.nvlink && aggregatable && st.classes.contains(&g.class) {
            let fits = levels.iter().copied().filter(|&k| k <= st.slots);
            let fits: Vec<u32> = fits.collect();
            for root in candidate_roots(options::roots(net, g), gi) {
                let mut seen: Vec<Vec<(NodeId, NodeId)>> = Vec::new();
                for &form in &st.forms {
                    let edges = options::tree_edges(net, g, root, form, gi as u64).map_err(err)?;
                    if seen.contains(&edges) {
                        continue; // root-only equals the hierarchical tree here
                    }
                    seen.push(edges.clone());
                    for &k in &fits {
                        opts.push(
                            options::tree(net, g, form, root, edges.clone(), k).map_err(err)?,
                        );
                    }
                }
            }
            // Rina reduces all-reduces only (the lowering leaves reduce-scatters on the
            // host ring): for a group without one it would reserve slots for nothing
            let all_reduce = g.colls().iter().any(|c| c.kind == CollKind::AllReduce);
            if st.rina && all_reduce {
                for &k in &fits {
                    if let Some(o) = options::rina(net, g, k).map_err(err)? {
                        opts.push(o);
                    }
                }
            }
        }
        if required && opts.is_empty() {
            return Err(infeasible_required(net, g, st, &levels));
        }
        if st.quota == Some(0) && required {
            return Err(PlanError::Infeasible(format!(
                "tree quota 0: the {} must aggregate (--require {}) but no switch may hold a tree",
                g.name(),
                g.class
            )));
        }
        all.push(opts);
    }
    Ok(all)
}

/// What the groups of a cohort do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum CohortRole {
    Tp,
    Dp,
    ExpertDp,
    Emb,
}

/// The cohorts of `groups`: the groups of one role on one stage (embedding groups: one
/// cohort), which run the same collectives at the same time.
pub(super) fn cohorts(groups: &[Group]) -> BTreeMap<(CohortRole, Option<u32>), Vec<usize>> {
    let mut out: BTreeMap<(CohortRole, Option<u32>), Vec<usize>> = BTreeMap::new();
    for (i, g) in groups.iter().enumerate() {
        let role = match g.role {
            Role::Tp { .. } => CohortRole::Tp,
            Role::Dp { expert: false, .. } => CohortRole::Dp,
            Role::Dp { expert: true, .. } => CohortRole::ExpertDp,
            Role::Emb(_) => CohortRole::Emb,
        };
        out.entry((role, g.stage)).or_default().push(i);
    }
    out
}

/// Every group's host options, priced per cohort ([`options::hosts`]): the groups of one
/// role (TP, dense DP, expert DP, embedding) on one stage run the same collectives at
/// the same time.
pub(super) fn cohort_hosts(net: &Net, groups: &[Group]) -> Result<Vec<Vec<Opt>>, PlanError> {
    let mut out = vec![Vec::new(); groups.len()];
    for members in cohorts(groups).values() {
        let cohort: Vec<&Group> = members.iter().map(|&i| &groups[i]).collect();
        let priced = options::hosts(net, &cohort).map_err(|e| {
            PlanError::Model(format!("the host options of the {}: {e}", cohort[0].name()))
        })?;
        for (&i, o) in members.iter().zip(priced) {
            out[i] = o;
        }
    }
    Ok(out)
}

/// Roots offered to one group at most: a k=32 fat-tree has 256 cores above a group that
/// spans pods, and every root is a tree priced per bucket size and an option the search
/// visits (MINA offers at most five per job). Beyond this many, an evenly spaced subset
/// offset by the group's index, so different groups see different roots and trees can
/// still spread over every candidate switch.
pub const MAX_ROOTS: usize = 16;

pub(super) fn candidate_roots(roots: Vec<NodeId>, gi: usize) -> Vec<NodeId> {
    let n = roots.len();
    if n <= MAX_ROOTS {
        return roots;
    }
    let mut picked: Vec<NodeId> = (0..MAX_ROOTS)
        .map(|i| roots[(gi + i * n / MAX_ROOTS) % n])
        .collect();
    picked.sort_unstable();
    picked.dedup();
    picked
}

/// Why a group that must aggregate has no option.
pub(super) fn infeasible_required(
    net: &Net,
    g: &Group,
    st: &Settings,
    levels: &[u32],
) -> PlanError {
    if g.colls().iter().all(|c| !c.aggregatable()) || !st.classes.contains(&g.class) {
        return PlanError::Infeasible(format!(
            "the {} must aggregate (--require {}) but its class is not in --ina-classes or it has no all-reduce / reduce-scatter",
            g.name(),
            g.class
        ));
    }
    let all_reduce = g.colls().iter().any(|c| c.kind == CollKind::AllReduce);
    let rina = st.rina && all_reduce && !options::rina_racks(net, g).racks.is_empty();
    if options::roots(net, g).is_empty() && !rina {
        return PlanError::Infeasible(format!(
            "no aggregating switch sits above every member of the {} (--ina-switches), and Rina, which reduces all-reduces only, has no rack of two members to reduce{}, so it cannot aggregate as --require {} demands",
            g.name(),
            if all_reduce { "" } else { " nor an all-reduce" },
            g.class
        ));
    }
    let least = levels.iter().copied().min().unwrap_or(net.window);
    PlanError::Infeasible(format!(
        "--ina-slots {}: fewer slots than one reservation ({least} slots, the smallest --slot-levels fraction of a {}-slot window) for the {}, which must aggregate (--require {})",
        st.slots,
        net.window,
        g.name(),
        g.class
    ))
}

/// Build the model of `wl` on the network.
pub fn build(wl: &Workload, net: &Net, st: &Settings) -> Result<Model, PlanError> {
    let groups = crate::trace::groups::groups(wl, net.topo);
    let opts = build_options(net, &groups, st)?;
    let pp = wl.pp() as usize;
    let (compute, other_comm) = layer_compute(wl, net)?;
    // base per-stage layer times: the host option of each stage's TP group (replica 0)
    let mut base: Vec<LayerTimes> = compute
        .iter()
        .map(|&(fwd, bwd)| LayerTimes { fwd, bwd })
        .collect();
    let mut tp_of: HashMap<(usize, u32), usize> = HashMap::new();
    for (i, g) in groups.iter().enumerate() {
        if let Role::Tp { replica, .. } = g.role {
            let s = g.stage.unwrap_or(0);
            tp_of.insert((replica, s), i);
            if replica == 0 {
                let host = host_index(&opts[i], &groups[i]);
                let (f, b) = tp_layer(wl, g, &opts[i][host]);
                let (cfwd, cbwd) = compute[s as usize];
                base[s as usize] = LayerTimes {
                    fwd: cfwd + f,
                    bwd: cbwd + b,
                };
            }
        }
    }
    let edge = edge_times(wl, net, &groups, &opts, &tp_of)?;
    let p2p = p2p_times(wl, net);
    let p2p_fn = |a: u32, b: u32| p2p.get(&(a, b)).copied().unwrap_or(0.0);
    let tl = timeline::run(wl, &base, &edge, &p2p_fn)
        .ok_or_else(|| PlanError::Model("the pipeline schedule cannot progress".into()))?;
    // sensitivities of each stage end to each stage's per-layer TP time
    let delta = 1000.0;
    let mut cf = vec![vec![0.0; pp]; pp];
    let mut cb = vec![vec![0.0; pp]; pp];
    for s in 0..pp {
        for (fwd, c) in [(true, &mut cf), (false, &mut cb)] {
            let mut lt = base.clone();
            if fwd {
                lt[s].fwd += delta;
            } else {
                lt[s].bwd += delta;
            }
            let t2 = timeline::run(wl, &lt, &edge, &p2p_fn)
                .ok_or_else(|| PlanError::Model("the pipeline schedule cannot progress".into()))?;
            for (sp, row) in c.iter_mut().enumerate() {
                row[s] = (t2.stage_end[sp] - tl.stage_end[sp]) / delta;
            }
        }
    }
    let pend_stage = (0..pp).fold(0, |b, s| {
        if tl.stage_end[s] > tl.stage_end[b] {
            s
        } else {
            b
        }
    });
    let replicas = replica_table(wl, &opts, &tp_of);
    let contention: Vec<(Vec<usize>, bool)> = cohorts(&groups)
        .into_iter()
        .filter(|((role, _), _)| *role != CohortRole::Tp)
        .map(|((role, _), members)| {
            let net_members: Vec<usize> =
                members.into_iter().filter(|&g| !groups[g].nvlink).collect();
            (net_members, role == CohortRole::Emb)
        })
        .filter(|(members, _)| members.len() > 1)
        .collect();
    let mut m = Model {
        windows: Vec::new(),
        phases_of: Vec::new(),
        releases: Vec::new(),
        dp: Vec::new(),
        tail: Vec::new(),
        pipe: Vec::new(),
        groups,
        opts,
        vals: Vec::new(),
        rows: Vec::new(),
        cf,
        cb,
        replicas,
        phases: Vec::new(),
        slots: st.slots,
        quota: st.quota,
        channels: net.topo.links.len() * 2 + contention.len(),
        contention,
        timeline: tl.clone(),
        base: tl,
        pend_stage,
        offset: 0.0,
        host_scale: 1.0,
        tp_scale: 1.0,
        other_comm,
    };
    m.assemble(wl, &vec![0.0; pp]);
    Ok(m)
}

/// Time of one PP hop between the stages that send to each other: every rank of the
/// sending stage to its counterpart at once ([`Net::p2p_time`]).
pub(super) fn p2p_times(wl: &Workload, net: &Net) -> HashMap<(u32, u32), f64> {
    let g = &wl.groups;
    let mut out = HashMap::new();
    let pp = wl.pp();
    for s in 0..pp {
        for t in [s + 1, s.wrapping_sub(1), 0, pp - 1] {
            if t >= pp || t == s || out.contains_key(&(s, t)) {
                continue;
            }
            let pairs: Vec<(Rank, Rank)> = (0..wl.world())
                .map(Rank)
                .filter(|&r| g.coords(r).pp == s)
                .map(|r| {
                    let to = crate::schedule::Coords {
                        pp: t,
                        ..g.coords(r)
                    };
                    (r, g.rank(to))
                })
                .collect();
            let time = net.p2p_time(&pairs, wl.pp_bytes).unwrap_or(0.0);
            out.insert((s, t), time);
        }
    }
    out
}

/// Values of every option, the sync's host collectives' times scaled by `host_scale`
/// ([`Model::host_scale`]).
pub(super) fn values(
    wl: &Workload,
    groups: &[Group],
    opts: &[Vec<Opt>],
    tl: &Timeline,
    (cf, cb): (&[Vec<f64>], &[Vec<f64>]),
    pend_stage: usize,
    (host_scale, tp_scale): (f64, f64),
) -> Vec<Vec<Vals>> {
    let mut out = Vec::with_capacity(groups.len());
    for (i, g) in groups.iter().enumerate() {
        let host = host_index(&opts[i], g);
        let mut v = Vec::with_capacity(opts[i].len());
        for (oi, o) in opts[i].iter().enumerate() {
            v.push(match &g.role {
                Role::Tp {
                    per_layer,
                    layernorm,
                    ..
                } => {
                    let s = g.stage.unwrap_or(0) as usize;
                    let (f, b) = tp_layer(wl, g, o);
                    // the host option's own shift is 0 whatever its scale
                    let k = if oi == host { 1.0 } else { tp_scale };
                    let (hf, hb) = tp_layer(wl, g, &opts[i][host]);
                    let ln = if layernorm.is_some() {
                        o.times[per_layer.len()]
                    } else {
                        0.0
                    };
                    Vals {
                        dfwd: f - k * hf,
                        dbwd: b - k * hb,
                        ln,
                        exposed: cf[pend_stage][s] * f + cb[pend_stage][s] * b + ln,
                        ..Vals::default()
                    }
                }
                Role::Dp {
                    buckets,
                    gathers,
                    index,
                    ..
                } => {
                    let s = g.stage.unwrap_or(0) as usize;
                    let scale = sync_scale(o, host_scale);
                    // the buckets one after the other, each from its trigger
                    let stream = |times: &[f64]| {
                        let mut e = 0.0f64;
                        for (b, t) in times[..buckets.len()].iter().enumerate() {
                            let at = index.get(b).copied().unwrap_or(b);
                            let trig = tl.triggers[s].get(at).copied().unwrap_or(tl.stage_end[s]);
                            e = e.max(trig) + t * scale;
                        }
                        e
                    };
                    let e = stream(&o.times);
                    // every group's parameter all-gathers run on the hosts together
                    let gather: f64 = o.joint[buckets.len()..buckets.len() + gathers.len()]
                        .iter()
                        .sum();
                    Vals {
                        end: e,
                        end_joint: stream(&o.joint),
                        gather,
                        exposed: (e - tl.stage_end[s]).max(0.0),
                        ..Vals::default()
                    }
                }
                Role::Emb(_) => Vals {
                    end: o.times[0] * sync_scale(o, host_scale),
                    end_joint: o.joint[0] * sync_scale(o, host_scale),
                    exposed: o.times[0] * sync_scale(o, host_scale),
                    ..Vals::default()
                },
            });
        }
        out.push(v);
    }
    out
}

/// The factor on a sync collective's time under option `o`: `host_scale` on a host
/// algorithm, 1 on NVLink and INA.
pub(super) fn sync_scale(o: &Opt, host_scale: f64) -> f64 {
    if matches!(o.kind, OptKind::Host(_)) {
        host_scale
    } else {
        1.0
    }
}

/// Per replica, per stage: the TP group that has a choice (more than one option).
pub(super) fn replica_table(
    wl: &Workload,
    opts: &[Vec<Opt>],
    tp_of: &HashMap<(usize, u32), usize>,
) -> Vec<Vec<Option<usize>>> {
    let reps = (wl.dp() * wl.groups.cp) as usize;
    (0..reps)
        .map(|r| {
            (0..wl.pp())
                .map(|s| tp_of.get(&(r, s)).copied().filter(|&g| opts[g].len() > 1))
                .collect()
        })
        .collect()
}

/// The chain rows (deduplicated).
pub(super) fn chain_rows(
    wl: &Workload,
    groups: &[Group],
    opts: &[Vec<Opt>],
    vals: &[Vec<Vals>],
    tl: &Timeline,
) -> Vec<Row> {
    let world = wl.world();
    let mut tp_of = vec![None; world as usize];
    let mut dp_of = vec![None; world as usize];
    let mut emb_of = vec![None; world as usize];
    for (i, g) in groups.iter().enumerate() {
        let slot = match g.role {
            Role::Tp { .. } => &mut tp_of,
            Role::Dp { .. } => &mut dp_of,
            Role::Emb(_) => &mut emb_of,
        };
        for r in &g.members {
            slot[r.idx()] = Some(i);
        }
    }
    // a group with one option is a constant
    let fixed = |g: Option<usize>| g.filter(|&g| opts[g].len() <= 1);
    let var = |g: Option<usize>| g.filter(|&g| opts[g].len() > 1);
    let mut seen = std::collections::BTreeSet::new();
    let mut rows = Vec::new();
    for r in 0..world {
        let rank = Rank(r);
        let s = wl.groups.coords(rank).pp as usize;
        let peers: Vec<Rank> = match tp_of[r as usize] {
            Some(t) => groups[t].members.clone(),
            None => vec![rank],
        };
        let tp = tp_of[r as usize];
        let e = emb_of[r as usize];
        let ag_from: Vec<Option<usize>> = match e {
            Some(e) if wl.distributed_optimizer => {
                groups[e].members.iter().map(|m| dp_of[m.idx()]).collect()
            }
            _ if wl.distributed_optimizer => vec![dp_of[r as usize]],
            _ => vec![None],
        };
        for p in peers {
            let dp = dp_of[p.idx()];
            for &ag in &ag_from {
                let mut c = 0.0;
                if dp.is_none() {
                    c += tl.stage_end[s];
                }
                let konst = |g: Option<usize>, f: fn(&Vals) -> f64| {
                    fixed(g).map_or(0.0, |g| f(&vals[g][0]))
                };
                // the optimizer step runs after the embedding all-reduce, before the
                // parameter all-gathers: a constant of the chain
                c += konst(dp, |x| x.end)
                    + konst(tp, |x| x.ln)
                    + konst(e, |x| x.end)
                    + wl.stages[s].optimizer.0 as f64
                    + konst(ag, |x| x.gather);
                let row = Row {
                    c,
                    stage: s,
                    dp: var(dp),
                    tp: var(tp),
                    emb: var(e),
                    ag: var(ag),
                };
                if seen.insert((c.to_bits(), s, row.dp, row.tp, row.emb, row.ag)) {
                    rows.push(row);
                }
            }
        }
    }
    rows
}

/// Release times of the DP groups' traffic and the DP, tail and pipeline group lists.
#[allow(clippy::type_complexity)]
pub(super) fn link_sets(
    groups: &[Group],
    opts: &[Vec<Opt>],
    tl: &Timeline,
) -> (
    Vec<(f64, usize, Vec<usize>)>,
    Vec<usize>,
    Vec<usize>,
    Vec<usize>,
) {
    let mut dp = Vec::new();
    let mut tail = Vec::new();
    let mut pipe = Vec::new();
    let mut starts: Vec<(f64, usize, usize)> = Vec::new();
    for (i, g) in groups.iter().enumerate() {
        let has = |f: fn(&Opt) -> bool| opts[i].iter().any(f);
        match g.role {
            Role::Dp { .. } => {
                dp.push(i);
                if has(|o| !o.loads.is_empty()) {
                    let s = g.stage.unwrap_or(0) as usize;
                    let first = tl.triggers[s]
                        .iter()
                        .copied()
                        .fold(tl.stage_end[s], f64::min);
                    starts.push((first, s, i));
                }
            }
            Role::Tp { .. } if has(|o| !o.loads.is_empty()) => pipe.push(i),
            _ => {}
        }
        if has(|o| !o.tail_loads.is_empty()) {
            tail.push(i);
        }
    }
    starts.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.2.cmp(&b.2)));
    let mut releases = Vec::new();
    let mut k = 0;
    while k < starts.len() {
        let (r, s, _) = starts[k];
        let later: Vec<usize> = starts[k..].iter().map(|x| x.2).collect();
        releases.push((r, s, later));
        while k < starts.len() && starts[k].0 == r {
            k += 1;
        }
    }
    (releases, dp, tail, pipe)
}

/// Activity windows (closed intervals, TP groups the whole iteration) and the maximal sets
/// of groups that may be active together by the reuse rule of
/// [`crate::formats::plan_json::Activity`].
pub(super) fn phases(
    groups: &[Group],
    vals: &[Vec<Vals>],
    tl: &Timeline,
) -> (Vec<Phase>, Vec<(f64, f64)>) {
    let inf = f64::INFINITY;
    let mut win: Vec<(f64, f64)> = vec![(0.0, inf); groups.len()];
    let max_end = |g: usize| vals[g].iter().map(|v| v.end).fold(0.0, f64::max);
    let min_end = |g: usize| vals[g].iter().map(|v| v.end).fold(inf, f64::min);
    let mut dp_of: HashMap<Rank, usize> = HashMap::new();
    for (i, g) in groups.iter().enumerate() {
        if let Role::Dp { .. } = g.role {
            let s = g.stage.unwrap_or(0) as usize;
            let first = tl.triggers[s]
                .iter()
                .copied()
                .fold(tl.stage_end[s], f64::min);
            win[i] = (first, max_end(i));
            for r in &g.members {
                dp_of.insert(*r, i);
            }
        }
    }
    let ln_max = groups
        .iter()
        .enumerate()
        .filter(|(_, g)| matches!(g.role, Role::Tp { .. }))
        .map(|(i, _)| vals[i].iter().map(|v| v.ln).fold(0.0, f64::max))
        .fold(0.0, f64::max);
    for (i, g) in groups.iter().enumerate() {
        if let Role::Emb(_) = g.role {
            let mut start = 0.0f64;
            let mut end = 0.0f64;
            for r in &g.members {
                match dp_of.get(r) {
                    Some(&d) => {
                        start = start.max(min_end(d));
                        end = end.max(max_end(d));
                    }
                    None => {
                        // no DP group: the rank joins after the pipeline
                        start = start.max(tl.stage_end.iter().copied().fold(inf, f64::min));
                        end = end.max(tl.end());
                    }
                }
            }
            win[i] = (start, end + ln_max + max_end(i));
        }
    }
    // the one reuse rule, which `ina3d trace --plan` checks plans against
    let phases = crate::trace::planned::concurrent_sets(&win)
        .into_iter()
        .map(|groups| Phase {
            start: groups.iter().map(|&g| win[g].0).fold(inf, f64::min),
            groups,
        })
        .collect();
    (phases, win)
}
