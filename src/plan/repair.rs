//! The repair loop: the planner's plans verified and repaired by replaying them, beside
//! every fixed policy of `ina3d run`, so the plan returned is the fastest *replayed*.
//!
//! Phases ([`repair`]): the all-host plan is replayed and the model calibrated on it
//! ([`Loop::host`]); `replay_rounds` times the model is solved, its plan (and, with the
//! exact solver, the other solver's plan when it differs) replayed, and the model
//! calibrated on that replay ([`Loop::rounds`]); every fixed policy the settings admit is
//! replayed ([`Loop::fixed_policies`]); the fastest replay is the answer ([`Loop::answer`]).
//! Every bound is counted in work (rounds, replays, the solvers' evaluations and nodes);
//! `--time-limit` is a safety net, and a plan it cut says so (`solver.hit_time_limit`).

use super::model::{self, Model};
use super::{
    file, fixed, solve, PlanError, PlanOptions, ReplayFailure, Replayed, Replayer, Solved,
    SolverKind,
};
use crate::collective::Algorithm;
use crate::formats::plan_json::{Candidate, CandidateReplay, FixedPolicy, PlanFile, Verification};
use crate::record::Class;
use crate::schedule::Workload;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Measured: GPT-3 175B TP8·PP16·DP64 on fat-tree k=32 generates and replays in ≈ 32 s
/// on this project's 2-core machine (`cargo bench --bench plan`, scale section).
pub const REPLAY_NS_PER_RECORD: f64 = 1500.0;

/// A candidate the loop replayed.
struct Tried {
    /// The plan's assignment, `None` for a fixed policy.
    assign: Option<Vec<usize>>,
    /// The solve it came from (`None`: the all-host plan or a fixed policy).
    solved: Option<Solved>,
    /// What it is.
    what: Candidate,
    /// The model's prediction before its replay (a fixed policy: its replay).
    predicted: f64,
    /// Its replay (`Err`: why it has none).
    replayed: Result<Replayed, String>,
}

impl Tried {
    fn time(&self) -> Option<f64> {
        self.replayed.as_ref().ok().map(|r| r.iteration_ns)
    }
}

/// The loop's state.
struct Loop<'a> {
    m: &'a mut Model,
    wl: &'a Workload,
    po: &'a PlanOptions,
    job: BTreeMap<String, String>,
    rp: &'a dyn Replayer,
    started: Instant,
    tried: Vec<Tried>,
    /// The time limit cut a solve or a replay.
    hit: bool,
    note: Option<String>,
}

/// Solve, replay, calibrate, repeat, then replay the fixed policies; return the fastest
/// replayed candidate. When replays are dear (an estimate from the records the host
/// options lower to, against the time limit), the uncalibrated model's plan is replayed
/// alone ([`tight`]).
pub(super) fn repair(
    m: &mut Model,
    wl: &Workload,
    po: &PlanOptions,
    job: BTreeMap<String, String>,
    rp: &dyn Replayer,
    started: Instant,
) -> Result<PlanFile, PlanError> {
    let host = super::baseline(m, po)?;
    let mut scratch = vec![0.0; m.channels];
    let host_predicted = m.evaluate(&host, &mut scratch).t;
    // deterministic: the estimate counts records, the limit is an input
    let estimate = replay_estimate(m, wl);
    if estimate * 3 > po.time_limit {
        return tight(m, po, job, rp, started, estimate, host_predicted);
    }
    let host_windows = m.windows.clone();
    let mut lp = Loop {
        m,
        wl,
        po,
        job,
        rp,
        started,
        tried: Vec::new(),
        hit: false,
        note: None,
    };
    if !lp.host(&host, host_predicted)? {
        return tight(lp.m, po, lp.job, rp, started, estimate, host_predicted);
    }
    lp.rounds()?;
    if po.fixed_policies {
        lp.fixed_policies()?;
    }
    lp.answer(host_windows)
}

impl Loop<'_> {
    /// A plan file of assignment `a` (or of the fixed policy `f` over the all-host groups).
    fn plan_of(&self, a: &[usize], f: Option<FixedPolicy>) -> PlanFile {
        let mut p = file(
            self.m,
            self.po,
            self.job.clone(),
            fixed(self.m, a),
            Duration::ZERO,
        );
        p.fixed_policy = f;
        p
    }

    /// Replay `p`: `Ok(None)` when the time limit cut it (recorded).
    fn replay(&mut self, p: &PlanFile) -> Result<Option<Result<Replayed, String>>, PlanError> {
        let until = self.started + self.po.time_limit.mul_f64(0.98);
        match self.rp.replay(p, Some(until)) {
            Ok(r) => Ok(Some(Ok(r))),
            Err(ReplayFailure::OutOfTime) => {
                self.hit = true;
                Ok(None)
            }
            // listed in plan.json with its reason (`candidates[].failed`), not fatal: the
            // answer is the fastest candidate that did replay
            Err(ReplayFailure::Failed(e)) => Ok(Some(Err(e))),
        }
    }

    fn calibrate(&mut self, a: &[usize], r: &Replayed) {
        self.m.calibrate(
            self.wl,
            &model::Measured {
                at: a.to_vec(),
                stage_end: r.stage_end.clone(),
                iteration: r.iteration_ns,
            },
        );
    }

    /// The all-host plan replayed and the model calibrated on it; false when the time
    /// limit cut its replay.
    fn host(&mut self, host: &[usize], predicted: f64) -> Result<bool, PlanError> {
        let p = self.plan_of(host, None);
        let Some(r) = self.replay(&p)? else {
            return Ok(false);
        };
        let r = r.map_err(|e| PlanError::Model(format!("replaying the all-host plan: {e}")))?;
        self.calibrate(host, &r);
        self.tried.push(Tried {
            assign: Some(host.to_vec()),
            solved: None,
            what: Candidate::Plan {
                solver: "all-host".into(),
                round: 0,
            },
            predicted,
            replayed: Ok(r),
        });
        Ok(true)
    }

    fn seen(&self, a: &[usize]) -> bool {
        self.tried.iter().any(|t| t.assign.as_deref() == Some(a))
    }

    /// Up to `replay_rounds` solves, each plan replayed (the other solver's too when it
    /// differs) and the model calibrated on it, until a plan comes back a second time or
    /// its prediction is within 2 % of its replay.
    fn rounds(&mut self) -> Result<(), PlanError> {
        for round in 1..=self.po.replay_rounds {
            let mut solved = solve(self.m, self.po, self.started)?;
            self.hit |= solved.hit_time_limit;
            if self.seen(&solved.assign) {
                break;
            }
            let predicted = solved.eval.t;
            let other = solved.other.take();
            let a = solved.assign.clone();
            let solver = solved.used.as_str().to_string();
            let p = self.plan_of(&a, None);
            let Some(r) = self.replay(&p)? else {
                self.note = Some(format!(
                    "time limit: the replay of round {round}'s plan did not finish"
                ));
                if self.tried.len() == 1 {
                    self.tried.push(Tried {
                        assign: Some(a),
                        solved: Some(solved),
                        what: Candidate::Plan { solver, round },
                        predicted,
                        replayed: Err("its replay did not finish before the time limit".into()),
                    });
                }
                return Ok(());
            };
            let r = match r {
                Ok(r) => r,
                Err(e) => {
                    self.tried.push(Tried {
                        assign: Some(a),
                        solved: None,
                        what: Candidate::Plan { solver, round },
                        predicted,
                        replayed: Err(e),
                    });
                    break;
                }
            };
            let close = (predicted - r.iteration_ns).abs() <= 0.02 * r.iteration_ns;
            // the other solver's plan, predicted by the same model, before calibrating
            // (its file too: the windows of this model, which the calibration below moves)
            let other = other
                .filter(|(b, _)| !self.seen(b) && *b != a)
                .map(|(b, k)| {
                    let e = fixed(self.m, &b);
                    let p = self.plan_of(&b, None);
                    (b, k, e, p)
                });
            self.calibrate(&a, &r);
            self.tried.push(Tried {
                assign: Some(a),
                solved: Some(solved),
                what: Candidate::Plan { solver, round },
                predicted,
                replayed: Ok(r),
            });
            if let Some((b, k, e, p)) = other {
                let Some(r) = self.replay(&p)? else {
                    return Ok(());
                };
                let predicted = e.eval.t;
                let mut s = e;
                s.used = k;
                s.status = if k == SolverKind::Ilp {
                    "node-limit"
                } else {
                    "heuristic"
                };
                let ok = r.is_ok();
                self.tried.push(Tried {
                    assign: Some(b),
                    solved: ok.then_some(s),
                    what: Candidate::Plan {
                        solver: k.as_str().into(),
                        round,
                    },
                    predicted,
                    replayed: r,
                });
            }
            if close {
                break;
            }
        }
        Ok(())
    }

    /// Every fixed policy of `ina3d run` the settings admit, replayed.
    fn fixed_policies(&mut self) -> Result<(), PlanError> {
        let host = self.tried[0].assign.clone().expect("the all-host plan");
        for f in fixed_candidates(self.po) {
            if self.hit {
                break;
            }
            let p = self.plan_of(&host, Some(f));
            let Some(r) = self.replay(&p)? else { break };
            let predicted = r.as_ref().map_or(0.0, |r| r.iteration_ns);
            self.tried.push(Tried {
                assign: None,
                solved: None,
                what: Candidate::Fixed { policy: f },
                predicted,
                replayed: r,
            });
        }
        Ok(())
    }

    /// The fastest replayed candidate as the plan file (ties: the earlier, so a plan of
    /// the model before a fixed policy).
    fn answer(mut self, host_windows: Vec<(f64, f64)>) -> Result<PlanFile, PlanError> {
        let host = self.tried[0].assign.clone().expect("the all-host plan");
        let host_replayed = self.tried[0]
            .time()
            .expect("the all-host plan was replayed");
        // the host plan's prediction: by the model calibrated on the last plan replayed
        let last = self
            .tried
            .iter()
            .rev()
            .find(|t| t.assign.is_some() && t.solved.is_some() && t.replayed.is_ok());
        if let Some((a, r)) = last.map(|t| {
            (
                t.assign.clone().expect("plan"),
                t.replayed.clone().expect("ok"),
            )
        }) {
            self.calibrate(&a, &r);
            let mut scratch = vec![0.0; self.m.channels];
            self.tried[0].predicted = self.m.evaluate(&host, &mut scratch).t;
        }
        let candidates: Vec<CandidateReplay> = self
            .tried
            .iter()
            .map(|t| CandidateReplay {
                candidate: t.what.clone(),
                replayed_ns: t.time(),
                failed: t.replayed.as_ref().err().cloned(),
            })
            .collect();
        let exact_gain = solver_gain(&self.tried);
        let plans_replayed = self
            .tried
            .iter()
            .filter(|t| t.assign.is_some() && t.time().is_some())
            .count();
        let cut = self
            .tried
            .iter()
            .position(|t| t.solved.is_some() && t.replayed.is_err())
            .filter(|&i| plans_replayed == 1 && self.tried[i].predicted < host_replayed);
        if let Some(i) = cut {
            // the first round's plan, cut by the limit, predicts better: returned unverified
            let t = self.tried.swap_remove(i);
            let mut s = t.solved.expect("solved");
            s.hit_time_limit = true;
            let mut f = file(self.m, self.po, self.job, s, self.started.elapsed());
            f.prediction.host_iteration_ns = host_replayed;
            super::append_note(&mut f.solver.note, format!(
                "time limit: the all-host plan replayed {:.3} ms; this plan was solved on the model calibrated on that replay, and is not replayed (its replay did not finish before the time limit)",
                host_replayed / 1e6
            ));
            f.candidates = candidates;
            return Ok(f);
        }
        let best = (0..self.tried.len())
            .filter(|&i| self.tried[i].time().is_some())
            .min_by(|&a, &b| {
                let (x, y) = (self.tried[a].time(), self.tried[b].time());
                x.expect("timed")
                    .total_cmp(&y.expect("timed"))
                    .then(a.cmp(&b))
            })
            .expect("the host plan was replayed");
        let plans = self.tried.iter().filter(|t| t.assign.is_some()).count();
        let t = self.tried.swap_remove(best);
        let host_pred = self
            .tried
            .first()
            .filter(|_| best != 0)
            .map(|h| h.predicted);
        let fixed_answer = matches!(t.what, Candidate::Fixed { .. });
        let mut solved = t.solved.unwrap_or_else(|| Solved {
            windows: host_windows,
            ..fixed(self.m, &host)
        });
        if let Candidate::Fixed { policy } = t.what {
            solved.note = Some(format!(
                "the answer is the fixed policy {policy}: it replayed faster than every plan of the model ({} replayed); its prediction is its replay",
                plans
            ));
        } else if best == 0 && plans > 1 {
            solved.note = Some(format!(
                "no plan replayed faster than the all-host plan ({} tried)",
                plans
            ));
        } else if let Some(n) = self.note.take() {
            solved.note = Some(n);
        }
        solved.hit_time_limit |= self.hit;
        let mut f = file(self.m, self.po, self.job, solved, self.started.elapsed());
        let r = t.replayed.expect("timed");
        f.prediction.iteration_ns = t.predicted;
        f.prediction.host_iteration_ns = host_pred.unwrap_or(t.predicted);
        if fixed_answer {
            f.fixed_policy = match t.what {
                Candidate::Fixed { policy } => Some(policy),
                Candidate::Plan { .. } => None,
            };
        }
        f.verification = Some(Verification {
            replayed_ns: r.iteration_ns,
            error: (t.predicted - r.iteration_ns) / r.iteration_ns,
            host_replayed_ns: host_replayed,
        });
        f.solver.exact_gain = exact_gain;
        f.candidates = candidates;
        Ok(f)
    }
}

/// `(best heuristic − best exact) / best exact` over the replayed plans of each solver,
/// when both were replayed.
fn solver_gain(tried: &[Tried]) -> Option<f64> {
    let best = |s: &str| {
        tried
            .iter()
            .filter(|t| matches!(&t.what, Candidate::Plan { solver, .. } if solver == s))
            .filter_map(Tried::time)
            .min_by(f64::total_cmp)
    };
    let (h, e) = (best("heuristic")?, best("ilp")?);
    Some((h - e) / e)
}

/// The fixed policies of `ina3d run` a plan of `po`'s settings competes with: all-host on
/// every host algorithm (when no class must aggregate), and — without a tree quota, which
/// they do not honour — `ina-dp`, `ina-tp`, `ina-tp-dp` (those of their classes the plan
/// may aggregate, covering the classes it must), `atp` and `rina` (over the plan's
/// classes), in this order.
pub fn fixed_candidates(po: &PlanOptions) -> Vec<FixedPolicy> {
    let st = &po.settings;
    let mut v = Vec::new();
    if st.required.is_empty() {
        for algorithm in [
            Algorithm::Ring,
            Algorithm::Dbt,
            Algorithm::Hd,
            Algorithm::Hierarchical,
            Algorithm::Swing,
        ] {
            v.push(FixedPolicy::AllHost { algorithm });
        }
    }
    if st.quota.is_some() {
        return v;
    }
    let admits = |cs: &[Class]| {
        cs.iter().all(|c| st.classes.contains(c)) && st.required.iter().all(|r| cs.contains(r))
    };
    for (f, cs) in [
        (FixedPolicy::InaDp, &[Class::Dp][..]),
        (FixedPolicy::InaTp, &[Class::Tp][..]),
        (FixedPolicy::InaTpDp, &[Class::Tp, Class::Dp][..]),
        (FixedPolicy::Atp, &st.classes[..]),
        (FixedPolicy::Rina, &st.classes[..]),
    ] {
        if !cs.is_empty() && admits(cs) {
            v.push(f);
        }
    }
    v
}

/// Wall time one replay (trace generation included) is expected to take before any was
/// measured: the records the groups' collectives lower to on their host option, and as
/// many again for compute and pipeline records per collective step of a stage, at
/// [`REPLAY_NS_PER_RECORD`] each. An estimate that errs long: it only decides whether
/// the all-host plan is replayed before the plan.
fn replay_estimate(m: &Model, wl: &Workload) -> Duration {
    let colls: f64 = (0..m.groups.len())
        .map(|g| m.opts[g][model::host_index(&m.opts[g], &m.groups[g])].records)
        .sum();
    let ops = wl.world() as f64 * wl.microbatches as f64 * 2.0;
    Duration::from_secs_f64((2.0 * colls + ops) * REPLAY_NS_PER_RECORD * 1e-9)
}

/// The plan when replays are dear: solve the uncalibrated model, then replay the plan if
/// the estimate fits the time limit. The plan returned is the model's (the all-host plan
/// only when the model predicts nothing better); its verification, when it was replayed,
/// has no all-host replay to compare with (0).
fn tight(
    m: &Model,
    po: &PlanOptions,
    job: BTreeMap<String, String>,
    rp: &dyn Replayer,
    started: Instant,
    estimate: Duration,
    host_predicted: f64,
) -> Result<PlanFile, PlanError> {
    let replay_fits = estimate.mul_f64(1.2) < po.time_limit.mul_f64(0.8);
    let solved = solve(m, po, started)?;
    let predicted = solved.eval.t;
    let mut f = file(m, po, job, solved, started.elapsed());
    f.prediction.host_iteration_ns = host_predicted;
    let mut cut = false;
    if replay_fits {
        let until = started + po.time_limit.mul_f64(0.98);
        match rp.replay(&f, Some(until)) {
            Ok(r) => {
                f.verification = Some(Verification {
                    replayed_ns: r.iteration_ns,
                    error: (predicted - r.iteration_ns) / r.iteration_ns,
                    host_replayed_ns: 0.0,
                });
            }
            Err(ReplayFailure::OutOfTime) => cut = true,
            Err(ReplayFailure::Failed(e)) => {
                return Err(PlanError::Model(format!("replaying a candidate plan: {e}")))
            }
        }
        f.solver.solve_time_s = started.elapsed().as_secs_f64();
    }
    f.solver.hit_time_limit |= cut;
    let why = format!(
        "replays are dear here (~{:.0} s each, estimated from its records): the plan was solved on the uncalibrated model{}; no fixed policy was replayed",
        estimate.as_secs_f64(),
        if f.verification.is_some() {
            " and replayed alone"
        } else if cut {
            " and not replayed (its replay did not finish before the time limit)"
        } else {
            " and not replayed (the estimate does not fit the time limit)"
        }
    );
    super::append_note(&mut f.solver.note, why);
    Ok(f)
}
