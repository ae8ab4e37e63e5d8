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

mod build;
mod calibrate;
pub use build::{build, MAX_ROOTS};
pub use calibrate::Measured;

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

/// Index of the host (or NVLink) option, or the first option when the host is excluded.
pub fn host_index(opts: &[Opt], _g: &Group) -> usize {
    opts.iter()
        .position(|o| matches!(o.kind, OptKind::Host(_) | OptKind::NvLink))
        .unwrap_or(0)
}
