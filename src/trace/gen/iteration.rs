//! One training iteration: every pipeline's 1F1B order with its layers' steps, then the
//! gradient synchronisation and the end-of-iteration collectives.
//!
//! Pipelines whose ranks share a CP or EP group must reach each layer together, so they
//! are generated in lockstep as one *cohort*: the CP replicas of one data-parallel index
//! when CP > 1, every replica of a MoE model (its expert groups cut across data and
//! context parallelism). Dense jobs without CP generate one pipeline after the other.

use super::{class_of, Chain, Gen, Stream, Tag, TraceError};
use crate::record::Class;
use crate::schedule::{
    A2aSizes, Bucket, CollKind, Coords, GradGroup, GroupKind, LayerStep, Pass, PipeOp, StagePlan,
};
use crate::units::{Bytes, FlowId, Rank};
use std::collections::HashMap;

/// Bucket triggers: (rank, bucket index in its stage's list) → the records that complete
/// the bucket's gradients.
type Triggers = HashMap<(Rank, usize), Vec<FlowId>>;

/// In-flight pipeline messages: (replica of the cohort, receiving stage, pass, chunk,
/// micro-batch) → one flow per TP rank.
type Inbox = HashMap<(usize, u32, Pass, u32, u32), Vec<FlowId>>;

/// The groups a cohort's layer steps run over, per stage.
#[derive(Default)]
struct CohortGroups {
    /// TP groups of each replica, per stage.
    tp: Vec<Vec<Vec<Rank>>>,
    /// CP groups inside the cohort, per stage.
    cp: Vec<Vec<Vec<Rank>>>,
    /// Expert groups per stage (every replica is in the cohort of a MoE model).
    ep: Vec<Vec<Vec<Rank>>>,
    etp: Vec<Vec<Vec<Rank>>>,
    etp_ep: Vec<Vec<Vec<Rank>>>,
}

impl CohortGroups {
    fn of(&self, kind: GroupKind, stage: u32) -> &[Vec<Rank>] {
        let per_stage = match kind {
            GroupKind::Tp => &self.tp,
            GroupKind::Cp => &self.cp,
            GroupKind::Ep => &self.ep,
            GroupKind::ExpertTp => &self.etp,
            GroupKind::ExpertTpEp => &self.etp_ep,
        };
        per_stage.get(stage as usize).map_or(&[], |v| v.as_slice())
    }
}

impl Gen<'_> {
    /// Every record of one iteration.
    pub(super) fn iteration_records(&mut self) -> Result<(), TraceError> {
        let mut triggers = Triggers::new();
        for cohort in self.cohorts() {
            self.run_cohort(&cohort, &mut triggers)?;
        }
        self.end_of_backward(&mut triggers)?;
        self.gradient_sync(&mut triggers)?;
        self.join_gradient_streams();
        self.end_of_iteration()
    }

    /// The replicas `(dp, cp)` generated together, in data-parallel then CP order.
    fn cohorts(&self) -> Vec<Vec<(u32, u32)>> {
        let g = &self.wl.groups;
        let all: Vec<(u32, u32)> = (0..g.dp)
            .flat_map(|dp| (0..g.cp).map(move |cp| (dp, cp)))
            .collect();
        if self.wl.moe.is_some() {
            vec![all]
        } else if g.cp > 1 {
            all.chunks(g.cp as usize).map(<[_]>::to_vec).collect()
        } else {
            all.into_iter().map(|r| vec![r]).collect()
        }
    }

    fn tp_ranks(&self, stage: u32, dp: u32, cp: u32) -> Vec<Rank> {
        let g = &self.wl.groups;
        (0..g.tp)
            .map(|tp| {
                g.rank(Coords {
                    tp,
                    cp,
                    dp,
                    pp: stage,
                })
            })
            .collect()
    }

    /// The groups of `cohort` per stage: its replicas' TP groups, its CP groups, and (MoE)
    /// the expert groups of each stage.
    fn cohort_groups(&self, cohort: &[(u32, u32)]) -> CohortGroups {
        let g = &self.wl.groups;
        let mut cg = CohortGroups::default();
        for stage in 0..g.pp {
            cg.tp.push(
                cohort
                    .iter()
                    .map(|&(dp, cp)| self.tp_ranks(stage, dp, cp))
                    .collect(),
            );
            let mut cps: Vec<Vec<Rank>> = Vec::new();
            if self.wl.cp.is_some() {
                let mut dps: Vec<u32> = cohort.iter().map(|r| r.0).collect();
                dps.dedup();
                for dp in dps {
                    for tp in 0..g.tp {
                        cps.push(
                            (0..g.cp)
                                .map(|cp| {
                                    g.rank(Coords {
                                        tp,
                                        cp,
                                        dp,
                                        pp: stage,
                                    })
                                })
                                .collect(),
                        );
                    }
                }
                cps.sort_by_key(|x| x[0]);
            }
            cg.cp.push(cps);
            let at_stage = |groups: &[Vec<Rank>]| -> Vec<Vec<Rank>> {
                if self.wl.moe.is_none() {
                    return vec![];
                }
                groups
                    .iter()
                    .filter(|x| g.expert_coords(x[0]).pp == stage)
                    .cloned()
                    .collect()
            };
            cg.ep.push(at_stage(&g.ep_groups));
            cg.etp.push(at_stage(&g.etp_groups));
            cg.etp_ep.push(at_stage(&g.etp_ep_groups));
        }
        cg
    }

    /// The pipelines of one cohort, stage by stage in an order that respects their p2p
    /// dependencies, every replica taking each op together.
    fn run_cohort(
        &mut self,
        cohort: &[(u32, u32)],
        triggers: &mut Triggers,
    ) -> Result<(), TraceError> {
        let wl = self.wl;
        let pp = wl.pp();
        let groups = self.cohort_groups(cohort);
        let mut cursor = vec![0usize; pp as usize];
        let mut inbox = Inbox::new();
        loop {
            let mut progress = false;
            let mut all_done = true;
            for s in 0..pp {
                let plan = &wl.stages[s as usize];
                while cursor[s as usize] < plan.order.len() {
                    let op = plan.order[cursor[s as usize]];
                    if !self.receive(s, op, &groups, &mut inbox)? {
                        break;
                    }
                    self.run_op(s, op, &groups, plan, triggers)?;
                    self.send(s, op, &groups, &mut inbox)?;
                    cursor[s as usize] += 1;
                    progress = true;
                }
                if cursor[s as usize] < plan.order.len() {
                    all_done = false;
                }
            }
            if all_done {
                return Ok(());
            }
            if !progress {
                return Err(TraceError::Generate(format!(
                    "pipeline schedule of replicas {cohort:?} cannot progress (internal error: cursors {cursor:?})"
                )));
            }
        }
    }

    fn pp_tag(s: u32, op: PipeOp) -> Tag {
        Tag {
            class: Class::Pp,
            microbatch: Some(op.microbatch),
            layer: None,
            stage: Some(s),
        }
    }

    /// Attach the activations (forward) or gradients (backward) `op` needs; false when
    /// they have not been sent yet.
    fn receive(
        &mut self,
        s: u32,
        op: PipeOp,
        groups: &CohortGroups,
        inbox: &mut Inbox,
    ) -> Result<bool, TraceError> {
        if !self.wl.receives(s, op) {
            return Ok(true);
        }
        let key = |rep: usize| (rep, s, op.pass, op.chunk, op.microbatch);
        if !inbox.contains_key(&key(0)) {
            return Ok(false);
        }
        let tag = Self::pp_tag(s, op);
        for (rep, ranks) in groups.of(GroupKind::Tp, s).iter().enumerate() {
            let flows = inbox.remove(&key(rep)).ok_or_else(|| {
                TraceError::Generate(format!(
                    "internal: replica {rep} of stage {s} has no input for {op:?}"
                ))
            })?;
            for (i, &r) in ranks.iter().enumerate() {
                self.flush(Stream::Main, r, tag)?;
                self.main[r.idx()].tail.push(flows[i]);
            }
            if self.wl.pp_gather {
                // Megatron's scatter/gather: the TP group reassembles the activation its
                // ranks received in parts (`gather_split_1d_tensor` over TP).
                let whole = Bytes(self.wl.pp_bytes.0 * ranks.len() as u64);
                let tp_tag = Tag {
                    class: Class::Tp,
                    ..tag
                };
                self.collective(CollKind::AllGather, whole, ranks, Stream::Main, tp_tag)?;
            }
        }
        Ok(true)
    }

    /// Send `op`'s result on to the stage (and chunk) that needs it next.
    fn send(
        &mut self,
        s: u32,
        op: PipeOp,
        groups: &CohortGroups,
        inbox: &mut Inbox,
    ) -> Result<(), TraceError> {
        let Some((ts, tc)) = self.wl.next_hop(s, op) else {
            return Ok(());
        };
        let tag = Self::pp_tag(s, op);
        let (from, to) = (groups.of(GroupKind::Tp, s), groups.of(GroupKind::Tp, ts));
        for (rep, ranks) in from.iter().enumerate() {
            let mut flows = Vec::with_capacity(ranks.len());
            for (i, &r) in ranks.iter().enumerate() {
                let (deps, gap) = self.start(Stream::Main, r);
                let lw = self.lw;
                let bytes = self.wl.pp_bytes;
                let at = &mut self.at(Stream::Main, tag);
                let id = lw.p2p(at, r, to[rep][i], bytes, deps, gap, None, None)?;
                self.set_tail(Stream::Main, r, &[id]);
                flows.push(id);
            }
            inbox.insert((rep, ts, op.pass, tc, op.microbatch), flows);
        }
        Ok(())
    }

    /// One pipeline op on every replica of the cohort: the embedding (first stage), the
    /// chunk's layers, the LM head (last stage); in the last micro-batch's backward, the
    /// gradient buckets its layers complete.
    fn run_op(
        &mut self,
        s: u32,
        op: PipeOp,
        groups: &CohortGroups,
        plan: &StagePlan,
        triggers: &mut Triggers,
    ) -> Result<(), TraceError> {
        let wl = self.wl;
        let layers = plan.chunks[op.chunk as usize].clone();
        let last_chunk_here = wl.is_last_chunk(s, op.chunk);
        let first_chunk_here = wl.is_first_chunk(s, op.chunk);
        let base = Tag {
            class: Class::Tp,
            microbatch: Some(op.microbatch),
            layer: None,
            stage: Some(s),
        };
        let at = |l: u32| Tag {
            layer: Some(l),
            ..base
        };
        match op.pass {
            Pass::Fwd => {
                if first_chunk_here {
                    self.run_steps(&plan.embedding_fwd, s, groups, base)?;
                }
                for l in layers {
                    self.run_steps(wl.layer_steps(l, Pass::Fwd), s, groups, at(l))?;
                }
                if last_chunk_here {
                    self.run_steps(&plan.head_fwd, s, groups, base)?;
                }
            }
            Pass::Bwd => {
                if last_chunk_here {
                    self.run_steps(&plan.head_bwd, s, groups, base)?;
                }
                let last_mb = op.microbatch == wl.microbatches - 1;
                for l in layers.clone().rev() {
                    self.run_steps(wl.layer_steps(l, Pass::Bwd), s, groups, at(l))?;
                    if first_chunk_here && l == layers.start {
                        self.run_steps(&plan.embedding_bwd, s, groups, base)?;
                    }
                    if last_mb {
                        self.trigger_buckets(
                            &plan.buckets,
                            op.chunk,
                            l,
                            s,
                            groups,
                            at(l),
                            triggers,
                        )?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Buckets of `chunk` that layer `l`'s backward completes: each rank's chain so far.
    #[allow(clippy::too_many_arguments)]
    fn trigger_buckets(
        &mut self,
        buckets: &[Bucket],
        chunk: u32,
        l: u32,
        s: u32,
        groups: &CohortGroups,
        tag: Tag,
        triggers: &mut Triggers,
    ) -> Result<(), TraceError> {
        for (b, bucket) in buckets.iter().enumerate() {
            if bucket.chunk != chunk || bucket.trigger_layer != Some(l) {
                continue;
            }
            for ranks in groups.of(GroupKind::Tp, s) {
                for &r in ranks {
                    self.flush(
                        Stream::Main,
                        r,
                        Tag {
                            class: Class::Dp,
                            ..tag
                        },
                    )?;
                    triggers.insert((r, b), self.main[r.idx()].tail.clone());
                }
            }
        }
        Ok(())
    }

    /// Run op steps on every group of the cohort at stage `s`.
    fn run_steps(
        &mut self,
        steps: &[LayerStep],
        s: u32,
        groups: &CohortGroups,
        tag: Tag,
    ) -> Result<(), TraceError> {
        for st in steps {
            match *st {
                LayerStep::Compute(t) => {
                    for ranks in groups.of(GroupKind::Tp, s) {
                        for &r in ranks {
                            self.main[r.idx()].pending += t;
                        }
                    }
                }
                LayerStep::Tp(kind) => {
                    for ranks in groups.of(GroupKind::Tp, s) {
                        self.collective(kind, self.wl.tp_bytes, ranks, Stream::Main, tag)?;
                    }
                }
                LayerStep::Coll { kind, group, bytes } => {
                    let tag = Tag {
                        class: class_of(group),
                        ..tag
                    };
                    for g in groups.of(group, s) {
                        let b = self.wl.step_bytes(bytes, g[0]);
                        self.collective(kind, b, g, Stream::Main, tag)?;
                    }
                }
                LayerStep::AllToAll { group, sizes } => {
                    let tag = Tag {
                        class: class_of(group),
                        ..tag
                    };
                    for g in groups.of(group, s) {
                        self.a2a_step(g, sizes, tag)?;
                    }
                }
                LayerStep::CpRing { pass, core } => {
                    let kv = self.wl.cp.as_ref().map_or(Bytes(0), |c| c.kv_bytes);
                    let tag = Tag {
                        class: Class::Cp,
                        ..tag
                    };
                    for g in groups.of(GroupKind::Cp, s) {
                        // one ring, or with `a2a+p2p` one ring over each set of members
                        // the all-to-all size apart (crate::schedule::CpPlan::rings)
                        let rings = match self.wl.cp.as_ref() {
                            Some(p) => p.rings(g),
                            None => vec![g.to_vec()],
                        };
                        let lw = self.lw;
                        for ring in &rings {
                            lw.cp_ring(&mut self.at(Stream::Main, tag), ring, pass, core, kv)?;
                        }
                    }
                }
                LayerStep::Experts(pass) => self.expert_compute(pass, s, groups),
            }
        }
        Ok(())
    }

    fn a2a_step(&mut self, g: &[Rank], sizes: A2aSizes, tag: Tag) -> Result<(), TraceError> {
        let mut lw = self.lw;
        for part in self.wl.a2a_parts(sizes, g) {
            let size = |i, j| part.size(i, j);
            lw.all_to_all(&mut self.at(Stream::Main, tag), &part.members, &size)?;
        }
        Ok(())
    }

    /// The experts' compute on every rank of the stage, by its EP index.
    fn expert_compute(&mut self, pass: Pass, s: u32, groups: &CohortGroups) {
        let Some(m) = &self.wl.moe else { return };
        let per_ep = match pass {
            Pass::Fwd => &m.expert_fwd,
            Pass::Bwd => &m.expert_bwd,
        };
        for ranks in groups.of(GroupKind::Tp, s) {
            for &r in ranks {
                let j = self.wl.groups.expert_coords(r).ep as usize;
                if let Some(t) = per_ep.get(j) {
                    self.main[r.idx()].pending += *t;
                }
            }
        }
    }

    /// End of backward: buckets without overlap trigger on each rank's final chain.
    fn end_of_backward(&mut self, triggers: &mut Triggers) -> Result<(), TraceError> {
        let wl = self.wl;
        for r in 0..wl.world() {
            let r = Rank(r);
            let stage = wl.groups.coords(r).pp;
            let tag = Tag::of_stage(Class::Dp, Some(stage));
            self.flush(Stream::Main, r, tag)?;
            for (b, bucket) in wl.stages[stage as usize].buckets.iter().enumerate() {
                if bucket.trigger_layer.is_none() {
                    triggers.insert((r, b), self.main[r.idx()].tail.clone());
                }
            }
        }
        Ok(())
    }

    /// Gradient reduction per stage and bucket: dense buckets over each DP×CP group on the
    /// rank's DP stream, expert buckets over each expert-DP group on its expert-DP stream.
    fn gradient_sync(&mut self, triggers: &mut Triggers) -> Result<(), TraceError> {
        let g = &self.wl.groups;
        let dense: Vec<(u32, Vec<Rank>)> = g
            .dp_cp_groups
            .iter()
            .map(|x| (g.coords(x[0]).pp, x.clone()))
            .collect();
        let expert: Vec<(u32, Vec<Rank>)> = if self.wl.moe.is_some() {
            g.edp_groups
                .iter()
                .map(|x| (g.expert_coords(x[0]).pp, x.clone()))
                .collect()
        } else {
            vec![]
        };
        for (which, stream, list) in [
            (GradGroup::DataContext, Stream::Dp, dense),
            (GradGroup::ExpertData, Stream::ExpertDp, expert),
        ] {
            for (stage, group) in list {
                self.reduce_buckets(which, stream, stage, &group, triggers)?;
            }
        }
        Ok(())
    }

    fn reduce_buckets(
        &mut self,
        which: GradGroup,
        stream: Stream,
        stage: u32,
        group: &[Rank],
        triggers: &mut Triggers,
    ) -> Result<(), TraceError> {
        let wl = self.wl;
        let tag = Tag::of_stage(Class::Dp, Some(stage));
        for (b, bucket) in wl.stages[stage as usize].buckets.iter().enumerate() {
            if bucket.group != which {
                continue;
            }
            for &r in group {
                let t = triggers.remove(&(r, b)).ok_or_else(|| {
                    TraceError::Generate(format!(
                        "internal: DP bucket {b} of stage {stage} never triggered on rank {r}"
                    ))
                })?;
                let c = self.chain(stream, r);
                c.tail.extend(t);
                c.tail.sort_unstable();
                c.tail.dedup();
            }
            let kind = if wl.distributed_optimizer {
                CollKind::ReduceScatter
            } else {
                CollKind::AllReduce
            };
            self.collective(kind, bucket.grad_bytes, group, stream, tag)?;
        }
        Ok(())
    }

    /// Join the gradient streams back into each rank's chain.
    fn join_gradient_streams(&mut self) {
        for r in 0..self.main.len() {
            let mut t = std::mem::take(&mut self.dp[r].tail);
            t.append(&mut self.edp[r].tail);
            let m: &mut Chain = &mut self.main[r];
            m.tail.extend(t);
            m.tail.sort_unstable();
            m.tail.dedup();
        }
    }

    /// Each rank's optimizer step after its gradients are reduced, as a compute record
    /// (the iteration ends with it; the distributed optimizer's all-gathers follow it).
    fn optimizer_step(&mut self) -> Result<(), TraceError> {
        let wl = self.wl;
        for r in 0..wl.world() {
            let r = Rank(r);
            let stage = wl.groups.coords(r).pp;
            let t = wl.stages[stage as usize].optimizer;
            if t.0 == 0 {
                continue;
            }
            self.main[r.idx()].pending += t;
            let tag = Tag::of_stage(Class::Dp, Some(stage));
            self.flush(Stream::Main, r, tag)?;
        }
        Ok(())
    }

    /// Sequence-parallel gradients over TP, the tied embedding over the embedding group,
    /// the optimizer step, and the distributed optimizer's parameter all-gathers.
    fn end_of_iteration(&mut self) -> Result<(), TraceError> {
        let wl = self.wl;
        let g = &wl.groups;
        for tpg in &g.tp_groups {
            let stage = g.coords(tpg[0]).pp;
            if let Some(b) = wl.stages[stage as usize].layernorm_bytes {
                let tag = Tag::of_stage(Class::Tp, Some(stage));
                self.collective(CollKind::AllReduce, b, tpg, Stream::Main, tag)?;
            }
        }
        if let Some(b) = wl.emb_bytes {
            for eg in &g.emb_groups {
                let tag = Tag::of_stage(Class::Emb, None);
                self.collective(CollKind::AllReduce, b, eg, Stream::Main, tag)?;
            }
        }
        self.optimizer_step()?;
        if !wl.distributed_optimizer {
            return Ok(());
        }
        for (which, list) in [
            (GradGroup::DataContext, &g.dp_cp_groups),
            (GradGroup::ExpertData, &g.edp_groups),
        ] {
            if which == GradGroup::ExpertData && wl.moe.is_none() {
                continue;
            }
            for group in list {
                let stage = match which {
                    GradGroup::DataContext => g.coords(group[0]).pp,
                    GradGroup::ExpertData => g.expert_coords(group[0]).pp,
                };
                for bucket in wl.stages[stage as usize]
                    .buckets
                    .iter()
                    .filter(|b| b.group == which)
                {
                    let tag = Tag::of_stage(Class::Dp, Some(stage));
                    self.collective(
                        CollKind::AllGather,
                        bucket.param_bytes,
                        group,
                        Stream::Main,
                        tag,
                    )?;
                }
            }
        }
        Ok(())
    }
}
