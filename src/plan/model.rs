//! The planner's cost model: every group's options with their values, and the linear
//! rows whose maximum is the predicted iteration time. The exact solver ([`super::ilp`])
//! optimises exactly this model; the heuristic ([`super::heuristic`]) evaluates it with
//! [`Model::evaluate`]. The model is documented for users in `docs/plan.md`.
//!
//! **Iteration time** `T` is the largest of:
//! - *chain rows*, one per path through the end of the iteration a rank waits on: the
//!   end of a DP group's gradient stream (its buckets in order, each starting at its
//!   trigger from the [`super::timeline`] or when the previous bucket ends, each taking
//!   its option's time), then the layer-norm all-reduce of the rank's TP group (sequence
//!   parallel), the embedding all-reduce of the rank's embedding group, the parameter
//!   all-gathers (distributed optimizer), with the stage's optimizer step between the
//!   last two. Every stage end is shifted by `ΔE[s]`, the
//!   change of the pipeline that TP decisions cause, linearised: `ΔE[s] = max over
//!   replicas of Σ_stage ∂E[s]/∂(TP time per layer) · Δ(TP time per layer)`, the
//!   derivatives by finite differences on the timeline;
//! - *link rows*, from the bytes every option puts on every channel (the time the
//!   channel needs for them): the gradient sync cannot end before `D`, the largest of
//!   every DP stream's end and, per channel and per release time `r` (a stage's first
//!   bucket trigger), `r + ΔE` plus the load of the DP groups released at or after `r`
//!   (groups sharing a link cannot beat the link); the tail's collectives (layer-norm,
//!   embedding, parameter all-gathers) then need at least the largest load they put on
//!   one channel, `T ≥ D + L_tail`; and the TP traffic of the whole pipeline bounds `T` by
//!   its largest channel load;
//! - *contention rows*, one per cohort of DP (or embedding) groups that run together: the
//!   chain rows take each group's collectives at their time alone, the link rows take a
//!   channel's load as perfectly packed, but the all-host plan replays slower than both
//!   (a double binary tree's dependent steps wait behind the other groups' flows); each
//!   group on a host algorithm adds its share of the cohort's all-host sync, replayed
//!   ([`Model::contention`]).
//!
//! **Phases.** A group is active from its earliest possible start to its latest possible
//! end over all its options (TP groups for the whole iteration); groups whose windows
//! overlap form a phase (the maximal sets of simultaneously active groups). Slot pools
//! and the tree quota hold per switch and phase: groups never active together reuse slots.

use super::options::{self, Form, Net, Opt, OptKind};
use super::timeline::{self, EdgeTimes, LayerTimes, Timeline};
use super::PlanError;
use crate::lower::Algorithm;
use crate::record::Class;
use crate::schedule::{CollKind, LayerStep, Pass, Workload};
use crate::trace::groups::{Group, Role};
use crate::units::{NodeId, Rank};
use std::collections::{BTreeMap, HashMap};

/// What the planner may do.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// Slots per switch.
    pub slots: u32,
    /// Concurrent trees per switch (`None`: unlimited).
    pub quota: Option<u32>,
    /// Reservation levels, fractions of a window.
    pub levels: Vec<f64>,
    /// Classes that may aggregate.
    pub classes: Vec<Class>,
    /// Classes that must aggregate (no host option).
    pub required: Vec<Class>,
    /// Tree forms offered.
    pub forms: Vec<Form>,
    /// Offer Rina.
    pub rina: bool,
}

/// Values of one option that the rows use (ns).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Vals {
    /// DP: end of the gradient stream; embedding: its all-reduce.
    pub end: f64,
    /// The same with every collective at its time in the all-host plan of the option's
    /// algorithm ([`Opt::joint`]): what the cohort's contention load derives from.
    pub end_joint: f64,
    /// TP: change of the forward TP time per layer against the host option.
    pub dfwd: f64,
    /// TP: the same for backward.
    pub dbwd: f64,
    /// TP: the layer-norm all-reduce.
    pub ln: f64,
    /// DP: the parameter all-gathers (host in every option).
    pub gather: f64,
    /// Exposed communication of the group under this option.
    pub exposed: f64,
}

/// A chain row: `c + ΔE[stage] + end(dp) + ln(tp) + end(emb) + gather(ag)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Row {
    /// Constant part.
    pub c: f64,
    /// Stage whose shift applies.
    pub stage: usize,
    /// DP group whose stream end counts.
    pub dp: Option<usize>,
    /// TP group whose layer-norm counts.
    pub tp: Option<usize>,
    /// Embedding group.
    pub emb: Option<usize>,
    /// DP group whose all-gathers close the chain.
    pub ag: Option<usize>,
}

/// Slots and trees held per (phase, switch) under an assignment, kept as groups move
/// ([`Model::usage`]).
#[derive(Clone, Debug, Default)]
pub struct Usage {
    held: HashMap<(usize, NodeId), (u64, u32)>,
}

impl Usage {
    /// Group `g` on option `o` adds (`sign` 1) or gives back (`sign` −1) its slots and
    /// tree on each of its switches, in each of its phases.
    fn add(&mut self, m: &Model, g: usize, o: usize, sign: i64) {
        let opt = &m.opts[g][o];
        for &p in &m.phases_of[g] {
            for &s in &opt.switches {
                let e = self.held.entry((p, s)).or_default();
                e.0 = (e.0 as i64 + sign * opt.slots as i64) as u64;
                e.1 = (e.1 as i64 + sign) as u32;
            }
        }
    }

    /// [`Model::fits_move`] against this usage of `a`.
    pub fn fits(&self, m: &Model, a: &[usize], g: usize, o: usize) -> bool {
        let (new, cur) = (&m.opts[g][o], &m.opts[g][a[g]]);
        m.phases_of[g].iter().all(|&p| {
            new.switches.iter().all(|s| {
                let (mut slots, mut trees) = self.held.get(&(p, *s)).copied().unwrap_or((0, 0));
                if cur.switches.binary_search(s).is_ok() {
                    slots -= cur.slots as u64;
                    trees -= 1;
                }
                slots + new.slots as u64 <= m.slots as u64 && m.quota.is_none_or(|q| trees < q)
            })
        })
    }

    /// Group `g` moves from `a[g]` to `o` (and `a` with it).
    pub fn apply(&mut self, m: &Model, a: &mut [usize], g: usize, o: usize) {
        self.add(m, g, a[g], -1);
        self.add(m, g, o, 1);
        a[g] = o;
    }
}

/// A phase: groups that may be active together, from `start`.
#[derive(Clone, Debug, PartialEq)]
pub struct Phase {
    /// Group indices, ascending.
    pub groups: Vec<usize>,
    /// Earliest start of any of them (ns).
    pub start: f64,
}

/// The model.
pub struct Model {
    /// Groups.
    pub groups: Vec<Group>,
    /// Options per group (the host / NVLink option first when allowed).
    pub opts: Vec<Vec<Opt>>,
    /// Values per group and option.
    pub vals: Vec<Vec<Vals>>,
    /// Chain rows.
    pub rows: Vec<Row>,
    /// `∂E[s']/∂fwd[s]` and `∂E[s']/∂bwd[s]`.
    pub cf: Vec<Vec<f64>>,
    /// See `cf`.
    pub cb: Vec<Vec<f64>>,
    /// Per replica, per stage: its TP group with options, if any.
    pub replicas: Vec<Vec<Option<usize>>>,
    /// Phases.
    pub phases: Vec<Phase>,
    /// Per group, the phases it belongs to.
    pub phases_of: Vec<Vec<usize>>,
    /// Per group, its activity window (ns; TP groups to +∞): what the phases derive from,
    /// recorded in the plan as each group's `active`.
    pub windows: Vec<(f64, f64)>,
    /// Release times of DP traffic: (time, stage whose shift applies, DP groups released
    /// at or after it).
    pub releases: Vec<(f64, usize, Vec<usize>)>,
    /// DP groups (their stream ends bound `D`).
    pub dp: Vec<usize>,
    /// Groups with traffic in the tail.
    pub tail: Vec<usize>,
    /// TP groups with network traffic in the pipeline.
    pub pipe: Vec<usize>,
    /// Slots per switch.
    pub slots: u32,
    /// Tree quota.
    pub quota: Option<u32>,
    /// Channels of the topology, then one *contention channel* per cohort of DP or
    /// embedding groups ([`Model::contention`]).
    pub channels: usize,
    /// The contention channels, from channel `channels − contention.len()` on: per
    /// channel, its cohort (groups that run the same collectives at the same time, more
    /// than one) and whether it bounds the tail (embedding) or the gradient sync (DP).
    ///
    /// A group's own time (`Opt::times`) leaves out its cohort's traffic, which the
    /// all-host plan shares NICs and links with; the link rows add loads but take a
    /// channel's load as perfectly packed. The contention channel closes the gap: each
    /// group on host algorithm A puts `(E_A − r) / K` on it, `E_A` the latest end of the
    /// cohort's streams with every collective at its all-host time (`Opt::joint`), `r`
    /// the cohort's release, `K` its size: with every group on A the row is `r + E_A`,
    /// the all-host plan replayed; with fewer on the hosts, proportionally less (the
    /// cohort's traffic shrinks as groups move to switches).
    pub contention: Vec<(Vec<usize>, bool)>,
    /// The timeline the rows use: the base one, calibrated ([`Model::calibrate`]).
    pub timeline: Timeline,
    /// The contention-free timeline (host TP) of the workload.
    pub base: Timeline,
    /// The stage whose end is the pipeline's (for exposed TP time).
    pub pend_stage: usize,
    /// Added to every predicted iteration time: what a calibration left between the
    /// model and the replay (0 uncalibrated).
    pub offset: f64,
    /// Factor on the times of the gradient sync's host collectives (DP buckets and
    /// embedding all-reduces on a host algorithm): what a calibration on a replay with
    /// such groups measured them at against the model (1 uncalibrated).
    pub host_scale: f64,
    /// Factor on the host algorithm's TP time per layer where TP crosses the network,
    /// against which the other TP options' shifts are taken (`dfwd = f − tp_scale·f_host`;
    /// 1 uncalibrated): what the first replay with every such TP group on its host
    /// algorithm measured the pipeline's end at against the contention-free timeline
    /// ([`Model::calibrate`]). Host TP rings share the fabric with each other and with the
    /// pipeline's sends; a tree takes its traffic off the links, so the pipeline the
    /// replay stretched does not stretch under it.
    pub tp_scale: f64,
    /// Per stage, the network time per layer (forward and backward) of every
    /// communication step but TP's, each priced alone (ring attention's exchanges
    /// without the compute they overlap, all-to-alls, expert collectives): the traffic
    /// that contends with host TP in the pipeline and stays when TP moves to switches
    /// ([`Model::tp_scale`] takes only TP's share of the contention).
    pub other_comm: Vec<f64>,
}

/// The model's verdict on one assignment (one option index per group).
#[derive(Clone, Debug, PartialEq)]
pub struct Eval {
    /// Predicted iteration time (ns).
    pub t: f64,
    /// Σ exposed communication (ns).
    pub exposed: f64,
    /// Slots and quota hold.
    pub feasible: bool,
    /// `Σ (term / t)^8` over every term whose maximum is `t` (chain rows, link loads):
    /// a smooth measure of how many terms are near-critical. The heuristic compares plans
    /// by `t`, then by this, so shortening one of several critical chains counts as
    /// progress even while another still sets `t`.
    pub pressure: f64,
}

/// The terms of an evaluation, folded as they come: their maximum (at least 0) and the
/// sum of their 8th powers.
#[derive(Default)]
struct Terms {
    max: f64,
    pow8: f64,
}

impl Terms {
    fn add(&mut self, x: f64) {
        self.max = self.max.max(x);
        self.pow8 += x.powi(8);
    }

    /// `T` and the pressure `Σ (term / T)^8` ([`Eval::pressure`]).
    fn finish(&self) -> (f64, f64) {
        let p = if self.max > 0.0 {
            self.pow8 / self.max.powi(8)
        } else {
            0.0
        };
        (self.max, p)
    }
}

impl Model {
    /// Shift of each stage's end under `a`.
    pub fn shifts(&self, a: &[usize]) -> Vec<f64> {
        let pp = self.cf.len();
        let mut de = vec![f64::NEG_INFINITY; pp];
        if self.replicas.iter().all(|r| r.iter().all(Option::is_none)) {
            return vec![0.0; pp];
        }
        for rep in &self.replicas {
            for (sp, d) in de.iter_mut().enumerate() {
                let mut v = 0.0;
                for (s, g) in rep.iter().enumerate() {
                    if let Some(g) = g {
                        let x = &self.vals[*g][a[*g]];
                        v += self.cf[sp][s] * x.dfwd + self.cb[sp][s] * x.dbwd;
                    }
                }
                *d = d.max(v);
            }
        }
        de
    }

    /// Value of a chain row under `a` with stage shifts `de`.
    pub fn row_value(&self, r: &Row, a: &[usize], de: &[f64]) -> f64 {
        let v = |g: Option<usize>, f: fn(&Vals) -> f64| g.map_or(0.0, |g| f(&self.vals[g][a[g]]));
        r.c + de[r.stage]
            + v(r.dp, |x| x.end)
            + v(r.tp, |x| x.ln)
            + v(r.emb, |x| x.end)
            + v(r.ag, |x| x.gather)
    }

    /// The largest channel load of `groups` under `a` (`tail`: their tail loads), using
    /// `scratch` (len = channels, all zero; left zero).
    pub fn load_max(&self, groups: &[usize], a: &[usize], tail: bool, scratch: &mut [f64]) -> f64 {
        let mut touched: Vec<u32> = Vec::new();
        for &g in groups {
            let o = &self.opts[g][a[g]];
            for &(c, l) in if tail { &o.tail_loads } else { &o.loads } {
                if scratch[c as usize] == 0.0 {
                    touched.push(c);
                }
                scratch[c as usize] += l;
            }
        }
        let mut best = 0.0f64;
        for &c in &touched {
            best = best.max(scratch[c as usize]);
            scratch[c as usize] = 0.0;
        }
        best
    }

    /// What `D` is at least before any DP group: without DP groups, the pipeline's end.
    fn sync_floor(&self, de: &[f64]) -> f64 {
        if self.dp.is_empty() {
            (0..de.len())
                .map(|s| self.timeline.stage_end[s] + de[s])
                .fold(0.0, f64::max)
        } else {
            0.0
        }
    }

    /// End of the gradient sync `D` under `a` with shifts `de`.
    pub fn dp_end(&self, a: &[usize], de: &[f64], scratch: &mut [f64]) -> f64 {
        let mut d = self.sync_floor(de);
        for &g in &self.dp {
            let s = self.groups[g].stage.unwrap_or(0) as usize;
            d = d.max(de[s] + self.vals[g][a[g]].end);
        }
        for (r, s, gs) in &self.releases {
            d = d.max(r + de[*s] + self.load_max(gs, a, false, scratch));
        }
        d
    }

    /// Slots and quota still hold when group `g` takes option `o` (every other group as
    /// in `a`, which must already fit): only `g`'s phases and the new option's switches
    /// are checked.
    pub fn fits_move(&self, a: &[usize], g: usize, o: usize) -> bool {
        let new = &self.opts[g][o];
        if new.switches.is_empty() {
            return true;
        }
        for &p in &self.phases_of[g] {
            for s in &new.switches {
                let (mut slots, mut trees) = (new.slots as u64, 1u32);
                for &h in &self.phases[p].groups {
                    let oh = &self.opts[h][a[h]];
                    if h != g && oh.switches.binary_search(s).is_ok() {
                        slots += oh.slots as u64;
                        trees += 1;
                    }
                }
                if slots > self.slots as u64 || self.quota.is_some_and(|q| trees > q) {
                    return false;
                }
            }
        }
        true
    }

    /// Slots and trees each phase holds on each switch under `a`: what
    /// [`Usage::fits`] checks a move against without scanning the phase's groups
    /// ([`Model::fits_move`] scans them: at 32,768 GPUs a phase holds thousands).
    pub fn usage(&self, a: &[usize]) -> Usage {
        let mut u = Usage::default();
        for (g, &o) in a.iter().enumerate() {
            u.add(self, g, o, 1);
        }
        u
    }

    /// Slots and quota hold in every phase.
    pub fn feasible(&self, a: &[usize]) -> bool {
        let mut used: HashMap<NodeId, (u64, u32)> = HashMap::new();
        for p in &self.phases {
            used.clear();
            for &g in &p.groups {
                let o = &self.opts[g][a[g]];
                for &s in &o.switches {
                    let e = used.entry(s).or_default();
                    e.0 += o.slots as u64;
                    e.1 += 1;
                    if e.0 > self.slots as u64 || self.quota.is_some_and(|q| e.1 > q) {
                        return false;
                    }
                }
            }
        }
        true
    }

    /// Evaluate an assignment.
    ///
    /// `T` is the largest of the terms below; the pressure `Σ (term / T)^8` is kept as
    /// `Σ term^8 / T^8`, so no term is stored. The DP release sets are nested (each
    /// holds the groups released at or after its time: [`Model::releases`]), so their
    /// channel loads are summed once, from the latest release to the earliest.
    pub fn evaluate(&self, a: &[usize], scratch: &mut [f64]) -> Eval {
        let de = self.shifts(a);
        let mut acc = Terms::default();
        for r in &self.rows {
            acc.add(self.row_value(r, a, &de));
        }
        // T ≥ d + L_tail for every term d of D, and ≥ D + load for every tail channel
        let mut tail: Vec<f64> = Vec::new();
        self.loads_each(&self.tail, a, true, scratch, &mut |l| tail.push(l));
        let lt = tail.iter().copied().fold(0.0, f64::max);
        let mut d = self.sync_floor(&de);
        for &g in &self.dp {
            let s = self.groups[g].stage.unwrap_or(0) as usize;
            let end = de[s] + self.vals[g][a[g]].end;
            d = d.max(end);
            acc.add(end + lt);
        }
        let mut touched: Vec<u32> = Vec::new();
        let mut later = 0;
        for (r, s, gs) in self.releases.iter().rev() {
            debug_assert!(gs.len() >= later, "release sets are nested");
            for &g in &gs[..gs.len() - later] {
                for &(c, l) in &self.opts[g][a[g]].loads {
                    if scratch[c as usize] == 0.0 {
                        touched.push(c);
                    }
                    scratch[c as usize] += l;
                }
            }
            later = gs.len();
            let at = r + de[*s];
            let mut most = 0.0f64;
            for &c in &touched {
                let l = scratch[c as usize];
                most = most.max(l);
                acc.add(at + l + lt);
            }
            d = d.max(at + most);
        }
        for &c in &touched {
            scratch[c as usize] = 0.0;
        }
        for l in tail {
            acc.add(d + l);
        }
        self.loads_each(&self.pipe, a, false, scratch, &mut |l| acc.add(l));
        acc.add(d + lt);
        let (t, pressure) = acc.finish();
        let t = t + self.offset;
        let exposed = a
            .iter()
            .enumerate()
            .map(|(g, &o)| self.vals[g][o].exposed)
            .sum();
        Eval {
            t,
            exposed,
            feasible: self.feasible(a),
            pressure,
        }
    }

    /// Call `f` with every channel's load of `groups` under `a`.
    fn loads_each(
        &self,
        groups: &[usize],
        a: &[usize],
        tail: bool,
        scratch: &mut [f64],
        f: &mut dyn FnMut(f64),
    ) {
        let mut touched: Vec<u32> = Vec::new();
        for &g in groups {
            let o = &self.opts[g][a[g]];
            for &(c, l) in if tail { &o.tail_loads } else { &o.loads } {
                if scratch[c as usize] == 0.0 {
                    touched.push(c);
                }
                scratch[c as usize] += l;
            }
        }
        for &c in &touched {
            f(scratch[c as usize]);
            scratch[c as usize] = 0.0;
        }
    }

    /// A lower bound on `T` over every assignment: each row and link with every group at
    /// its best value (a relaxation that ignores slots, quota and interactions).
    pub fn lower_bound(&self) -> f64 {
        let best = |g: usize, f: fn(&Vals) -> f64| {
            self.vals[g].iter().map(f).fold(f64::INFINITY, f64::min)
        };
        let pp = self.cf.len();
        let mut de = vec![0.0f64; pp];
        if !self.replicas.iter().all(|r| r.iter().all(Option::is_none)) {
            for (sp, d) in de.iter_mut().enumerate() {
                *d = f64::NEG_INFINITY;
                for rep in &self.replicas {
                    let mut v = 0.0;
                    for (s, g) in rep.iter().enumerate() {
                        if let Some(g) = g {
                            v += self.vals[*g]
                                .iter()
                                .map(|x| self.cf[sp][s] * x.dfwd + self.cb[sp][s] * x.dbwd)
                                .fold(f64::INFINITY, f64::min);
                        }
                    }
                    *d = d.max(v);
                }
            }
        }
        let v = |g: Option<usize>, f: fn(&Vals) -> f64| g.map_or(0.0, |g| best(g, f));
        let rows = self
            .rows
            .iter()
            .map(|r| {
                r.c + de[r.stage]
                    + v(r.dp, |x| x.end)
                    + v(r.tp, |x| x.ln)
                    + v(r.emb, |x| x.end)
                    + v(r.ag, |x| x.gather)
            })
            .fold(0.0f64, f64::max);
        let least = |gs: &[usize], tail: bool| -> f64 {
            let mut load: BTreeMap<u32, f64> = BTreeMap::new();
            for &g in gs {
                for (c, l) in least_loads(&self.opts[g], tail) {
                    *load.entry(c).or_default() += l;
                }
            }
            load.values().copied().fold(0.0, f64::max)
        };
        let mut d = if self.dp.is_empty() {
            (0..pp)
                .map(|s| self.timeline.stage_end[s] + de[s])
                .fold(0.0, f64::max)
        } else {
            0.0
        };
        for &g in &self.dp {
            let s = self.groups[g].stage.unwrap_or(0) as usize;
            d = d.max(de[s] + best(g, |x| x.end));
        }
        for (r, s, gs) in &self.releases {
            d = d.max(r + de[*s] + least(gs, false));
        }
        let links = (d + least(&self.tail, true)).max(least(&self.pipe, false));
        rows.max(links) + self.offset
    }
}

/// Per channel, the least load a group puts on it over all its options (channels some
/// option avoids get none).
pub fn least_loads(opts: &[Opt], tail: bool) -> Vec<(u32, f64)> {
    let pick = |o: &Opt| {
        if tail {
            o.tail_loads.clone()
        } else {
            o.loads.clone()
        }
    };
    let Some(first) = opts.first() else {
        return Vec::new();
    };
    let mut least: BTreeMap<u32, f64> = pick(first).into_iter().collect();
    for o in &opts[1..] {
        let mine: BTreeMap<u32, f64> = pick(o).into_iter().collect();
        least.retain(|c, v| match mine.get(c) {
            Some(m) => {
                *v = v.min(*m);
                true
            }
            None => false,
        });
    }
    least.into_iter().collect()
}

/// Per stage, the time of one layer's forward and backward without its TP collectives
/// (averaged over the stage's layers, dense and MoE alike): compute, and every other
/// communication step (ring attention, all-to-alls, expert collectives) lowered as the
/// trace lowers it over the stage's first group of its kind and priced alone
/// ([`Net::layer_step_time`]); and beside it the network part of that time, forward and
/// backward together ([`Model::other_comm`]: those steps alone, ring attention without
/// the compute it overlaps).
#[allow(clippy::type_complexity)]
fn layer_compute(wl: &Workload, net: &Net) -> Result<(Vec<(f64, f64)>, Vec<f64>), PlanError> {
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
fn price_steps(
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
fn edge_times(
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
fn tp_layer(wl: &Workload, g: &Group, o: &Opt) -> (f64, f64) {
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
fn build_options(net: &Net, groups: &[Group], st: &Settings) -> Result<Vec<Vec<Opt>>, PlanError> {
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
enum CohortRole {
    Tp,
    Dp,
    ExpertDp,
    Emb,
}

/// The cohorts of `groups`: the groups of one role on one stage (embedding groups: one
/// cohort), which run the same collectives at the same time.
fn cohorts(groups: &[Group]) -> BTreeMap<(CohortRole, Option<u32>), Vec<usize>> {
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
fn cohort_hosts(net: &Net, groups: &[Group]) -> Result<Vec<Vec<Opt>>, PlanError> {
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

fn candidate_roots(roots: Vec<NodeId>, gi: usize) -> Vec<NodeId> {
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
fn infeasible_required(net: &Net, g: &Group, st: &Settings, levels: &[u32]) -> PlanError {
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

/// What a replay of one assignment measured: what [`Model::calibrate`] fits the model to.
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    /// The assignment replayed (an option per group).
    pub at: Vec<usize>,
    /// Per stage, when the pipeline's last op (and its send) ended.
    pub stage_end: Vec<f64>,
    /// The iteration time.
    pub iteration: f64,
}

impl Model {
    /// The timeline-derived parts (values, chain rows, phases, link sets) from the base
    /// timeline with each stage's end and bucket triggers shifted by `off[s]`.
    fn assemble(&mut self, wl: &Workload, off: &[f64]) {
        let mut tl = self.base.clone();
        for (s, o) in off.iter().enumerate() {
            tl.stage_end[s] += o;
            for t in &mut tl.triggers[s] {
                *t += o;
            }
        }
        let (groups, opts) = (&self.groups, &self.opts);
        self.vals = values(
            wl,
            groups,
            opts,
            &tl,
            (&self.cf, &self.cb),
            self.pend_stage,
            (self.host_scale, self.tp_scale),
        );
        self.contention_loads(&tl);
        let (groups, opts) = (&self.groups, &self.opts);
        self.rows = chain_rows(wl, groups, opts, &self.vals, &tl);
        (self.phases, self.windows) = phases(groups, &self.vals, &tl);
        (self.releases, self.dp, self.tail, self.pipe) = link_sets(groups, opts, &tl);
        self.phases_of = vec![Vec::new(); groups.len()];
        for (p, ph) in self.phases.iter().enumerate() {
            for &g in &ph.groups {
                self.phases_of[g].push(p);
            }
        }
        self.timeline = tl;
    }

    /// Each host option's load on its cohort's contention channel ([`Model::contention`]),
    /// from the values on the timeline `tl`.
    fn contention_loads(&mut self, tl: &Timeline) {
        let first = (self.channels - self.contention.len()) as u32;
        for (k, (members, tail)) in self.contention.iter().enumerate() {
            let ch = first + k as u32;
            let release = match (*tail, self.groups[members[0]].stage) {
                (false, Some(s)) => {
                    let s = s as usize;
                    tl.triggers[s]
                        .iter()
                        .copied()
                        .fold(tl.stage_end[s], f64::min)
                }
                _ => 0.0,
            };
            // per host algorithm, the cohort's latest stream end in its all-host plan
            let mut latest: BTreeMap<Algorithm, f64> = BTreeMap::new();
            for &g in members {
                for (o, opt) in self.opts[g].iter().enumerate() {
                    if let OptKind::Host(a) = opt.kind {
                        let e = latest.entry(a).or_insert(0.0);
                        *e = e.max(self.vals[g][o].end_joint);
                    }
                }
            }
            let size = members.len() as f64;
            for &g in members {
                for opt in &mut self.opts[g] {
                    let loads = if *tail {
                        &mut opt.tail_loads
                    } else {
                        &mut opt.loads
                    };
                    loads.retain(|l| l.0 != ch);
                    if let OptKind::Host(a) = opt.kind {
                        let v = (latest[&a] - release) / size;
                        if v > 0.0 {
                            // after every link's channel: the order stays ascending
                            loads.push((ch, v));
                        }
                    }
                }
            }
        }
    }

    /// Fit the model to a replay: each stage's pipeline end (and its buckets' triggers)
    /// moves to where the replay measured it under the replayed assignment's TP options
    /// (other TP options shift it by the model's sensitivities), and what remains between
    /// the model and the replayed iteration becomes a constant [`Model::offset`]. The
    /// model then predicts the replayed assignment exactly and its neighbours by the
    /// model's differences: contention the model leaves out (between replicas, with
    /// pipeline and gradient traffic) is measured once instead of estimated.
    pub fn calibrate(&mut self, wl: &Workload, m: &Measured) {
        self.fit_tp_scale(wl, m);
        let de = self.shifts(&m.at);
        let off: Vec<f64> = (0..self.base.stage_end.len())
            .map(|s| {
                m.stage_end
                    .get(s)
                    .map_or(0.0, |e| e - (self.base.stage_end[s] + de[s]))
            })
            .collect();
        self.offset = 0.0;
        self.host_scale = 1.0;
        self.assemble(wl, &off);
        self.fit_host_scale(wl, &off, m);
        let mut scratch = vec![0.0; self.channels];
        let t = self.evaluate(&m.at, &mut scratch).t;
        self.offset = m.iteration - t;
    }

    /// When the replayed assignment runs every TP group that crosses the network on its
    /// host algorithm and its pipeline ended later than the contention-free timeline
    /// says, that excess is the host TP traffic's contention ([`Model::tp_scale`]): the
    /// factor makes the shift of moving every such group off its host algorithm, at the
    /// pipeline's end stage, include TP's share of it — the host TP time per layer over
    /// that plus every other communication step's ([`Model::other_comm`]), which keeps
    /// its contention — (at most 4×). Fitted once, on the first such replay (the
    /// all-host plan's); later calibrations keep it and measure the rest as each stage's
    /// offset.
    ///
    /// Measured on the tiny job with TP on the network on a 2:1 leaf-spine
    /// (docs/plan.md#measured): the planned INA TP trees' pipeline ended 118 µs before the
    /// all-host one in the replay; without the factor the model foresaw 22 µs of it.
    fn fit_tp_scale(&mut self, wl: &Workload, m: &Measured) {
        let on_host = |g: usize| m.at[g] == host_index(&self.opts[g], &self.groups[g]);
        let net_tp: Vec<usize> = self.replicas.iter().flatten().flatten().copied().collect();
        if self.tp_scale != 1.0 || net_tp.is_empty() || !net_tp.iter().all(|&g| on_host(g)) {
            return;
        }
        let s = self.pend_stage;
        let Some(&ended) = m.stage_end.get(s) else {
            return;
        };
        let excess = ended - self.base.stage_end[s];
        // TP's share of the pipeline's network time per layer, replica 0's groups
        let (mut tp_layer_ns, mut other_ns) = (0.0, 0.0);
        for (st, g) in self.replicas[0].iter().enumerate() {
            if let Some(g) = *g {
                let (f, b) = tp_layer(wl, &self.groups[g], &self.opts[g][m.at[g]]);
                tp_layer_ns += f + b;
                other_ns += self.other_comm[st];
            }
        }
        let share = tp_layer_ns / (tp_layer_ns + other_ns).max(f64::MIN_POSITIVE);
        // the pipeline's end stage's shift if every such group's TP time vanished
        let host_tp = self
            .replicas
            .iter()
            .map(|rep| {
                rep.iter()
                    .enumerate()
                    .filter_map(|(st, g)| g.map(|g| (st, g)))
                    .map(|(st, g)| {
                        let (f, b) = tp_layer(wl, &self.groups[g], &self.opts[g][m.at[g]]);
                        self.cf[s][st] * f + self.cb[s][st] * b
                    })
                    .sum::<f64>()
            })
            .fold(0.0, f64::max);
        if excess > 0.0 && host_tp > 0.0 {
            self.tp_scale = 1.0 + (share * excess / host_tp).min(3.0);
        }
    }

    /// When the replayed assignment syncs gradients on host algorithms, the difference
    /// left after the stages' ends moved goes to those collectives' times first
    /// ([`Model::host_scale`], by bisection within ¼–4×): a slower replayed ring (DCQCN's
    /// cuts) then slows the plans that keep groups on the ring, not the INA trees, which
    /// a constant offset would.
    fn fit_host_scale(&mut self, wl: &Workload, off: &[f64], m: &Measured) {
        let synced = m.at.iter().enumerate().any(|(g, &o)| {
            matches!(self.groups[g].role, Role::Dp { .. } | Role::Emb(_))
                && matches!(self.opts[g][o].kind, OptKind::Host(_))
        });
        let mut scratch = vec![0.0; self.channels];
        let t1 = self.evaluate(&m.at, &mut scratch).t;
        if !synced || (m.iteration - t1).abs() <= 0.005 * m.iteration {
            return;
        }
        let mut at = |model: &mut Model, f: f64| {
            model.host_scale = f;
            model.assemble(wl, off);
            model.evaluate(&m.at, &mut scratch).t
        };
        let (mut lo, mut hi) = if m.iteration > t1 {
            (1.0, 4.0)
        } else {
            (0.25, 1.0)
        };
        for _ in 0..12 {
            let mid = 0.5 * (lo + hi);
            if at(self, mid) < m.iteration {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let f = 0.5 * (lo + hi);
        // a factor at the bound of its range fits nothing (the sync does not set T)
        let f = if (0.251..=3.99).contains(&f) { f } else { 1.0 };
        self.host_scale = f;
        self.assemble(wl, off);
    }
}

/// Index of the host (or NVLink) option, or the first option when the host is excluded.
pub fn host_index(opts: &[Opt], _g: &Group) -> usize {
    opts.iter()
        .position(|o| matches!(o.kind, OptKind::Host(_) | OptKind::NvLink))
        .unwrap_or(0)
}

/// Time of one PP hop between the stages that send to each other: every rank of the
/// sending stage to its counterpart at once ([`Net::p2p_time`]).
fn p2p_times(wl: &Workload, net: &Net) -> HashMap<(u32, u32), f64> {
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
fn values(
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
fn sync_scale(o: &Opt, host_scale: f64) -> f64 {
    if matches!(o.kind, OptKind::Host(_)) {
        host_scale
    } else {
        1.0
    }
}

/// Per replica, per stage: the TP group that has a choice (more than one option).
fn replica_table(
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
fn chain_rows(
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
fn link_sets(
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
fn phases(groups: &[Group], vals: &[Vec<Vals>], tl: &Timeline) -> (Vec<Phase>, Vec<(f64, f64)>) {
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
