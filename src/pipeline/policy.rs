//! The policies `ina3d run` compares: one trace per policy, all from the same job.
//!
//! A policy turns the run's base trace options into its own (which traffic may aggregate in
//! switches, and how). To add one: a variant, its name in the `keyword_enum!` line, and its
//! arm in [`Policy::trace_options`]; a policy that must compute something first (a plan)
//! does it there, with the prepared job and its own output directory at hand
//! ([`PolicyContext`]). `run`, `sweep` grids (`policies = [...]`) and `--policies` pick it
//! up from [`Policy::NAMES`].
//!
//! The planner's policies (`plan`, `plan-exact`, `sharp`) plan for the run's ECMP seed:
//! with several seeds each seed is planned again for its own routes (a plan names the seed
//! it was made for, and the lowering refuses another), and written to
//! `<policy>/plan.json`. The host algorithms (the run's `--collective` and every other
//! one that lowers differently for a group) are always among the planner's options.

use super::{make_plan, Job, PipelineError};
use crate::keyword::keyword_enum;
use crate::plan::{PlanOptions, SolverKind};
use crate::record::Class;
use crate::trace::{InaMode, InaPolicy, TraceOptions};
use std::path::Path;
use std::time::Duration;

/// One INA policy of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Policy {
    /// No INA: every collective on the host algorithm. Every speed-up is measured against it.
    Ring,
    /// Data-parallel gradient reductions aggregate in switches.
    InaDp,
    /// Tensor-parallel reductions aggregate in switches.
    InaTp,
    /// Both, TP first in slot priority.
    InaTpDp,
    /// The planner's plan (`ina3d plan --solver heuristic`): per group a host algorithm, a
    /// tree at a chosen root, or Rina, with reserved slots.
    Plan,
    /// The planner's exact integer program (`ina3d plan --solver ilp`, warm-started from
    /// the heuristic; at the time limit the best plan found, with its gap).
    PlanExact,
    /// ATP-like baseline: hierarchical trees of every INA class under best-effort slot
    /// sharing; an aggregation that finds no slot falls back to the host ring.
    Atp,
    /// Rina baseline: racks reduce into their ToR, the ToRs run the ring across racks
    /// (every INA class).
    Rina,
    /// SHARP-like baseline: the planner (heuristic) under a quota of one aggregation tree
    /// per switch at a time, as SHARP hardware imposes.
    Sharp,
}

keyword_enum!(Policy, "policy", Policy::Ring => "ring", Policy::InaDp => "ina-dp", Policy::InaTp => "ina-tp", Policy::InaTpDp => "ina-tp-dp", Policy::Plan => "plan", Policy::PlanExact => "plan-exact", Policy::Atp => "atp", Policy::Rina => "rina", Policy::Sharp => "sharp");

/// The policies of `ina3d run` when none are named, ring first.
pub const DEFAULT_POLICIES: [Policy; 9] = [
    Policy::Ring,
    Policy::InaDp,
    Policy::InaTp,
    Policy::InaTpDp,
    Policy::Plan,
    Policy::PlanExact,
    Policy::Atp,
    Policy::Rina,
    Policy::Sharp,
];

/// What a policy may use to make its trace options.
pub struct PolicyContext<'a> {
    /// The prepared job (config, topology, workload).
    pub job: &'a Job,
    /// The run's trace options for this seed; `ina.mode` is the INA algorithm the INA
    /// policies use.
    pub base: &'a TraceOptions,
    /// This policy's output directory (for artefacts such as a plan).
    pub dir: &'a Path,
    /// Wall-time budget of a planner policy's solve.
    pub plan_time_limit: Duration,
    /// The rate model the run replays under, which a planner policy's candidates are
    /// verified under too.
    pub rate_model: crate::replay::RateModel,
}

impl Policy {
    /// The trace options of this policy.
    pub fn trace_options(self, ctx: &PolicyContext<'_>) -> Result<TraceOptions, PipelineError> {
        let mut o = ctx.base.clone();
        let classes: &[Class] = match self {
            Policy::Ring => {
                o.ina.mode = InaMode::Off;
                return Ok(o);
            }
            Policy::InaDp => &[Class::Dp],
            Policy::InaTp => &[Class::Tp],
            Policy::InaTpDp => &[Class::Tp, Class::Dp],
            Policy::Plan => return self.planned(ctx, SolverKind::Heuristic, None),
            Policy::PlanExact => return self.planned(ctx, SolverKind::Ilp, None),
            Policy::Sharp => return self.planned(ctx, SolverKind::Heuristic, Some(1)),
            Policy::Atp => {
                o.ina.set_mode(InaMode::Atp);
                return Ok(o);
            }
            Policy::Rina => {
                // Rina keeps the run's slot policy, but a plan's reservations need a plan:
                // then Rina's own
                if o.ina.policy() == InaPolicy::Planned {
                    o.ina.set_mode(InaMode::Rina);
                } else {
                    o.ina.mode = InaMode::Rina;
                }
                return Ok(o);
            }
        };
        if o.ina.mode == InaMode::Off {
            return Err(PipelineError::Option {
                option: format!("policy `{self}`"),
                msg: "needs an INA algorithm (--ina switchml|hierarchical|atp|rina), not `off`"
                    .into(),
            });
        }
        o.ina.classes = classes.to_vec();
        Ok(o)
    }

    /// Whether the policy runs the planner.
    pub fn plans(self) -> bool {
        matches!(self, Policy::Plan | Policy::PlanExact | Policy::Sharp)
    }

    /// A planner policy: plan the job for this seed's routes with the run's slots, INA
    /// switches and classes (`quota` trees per switch), write `plan.json`, lower it.
    fn planned(
        self,
        ctx: &PolicyContext<'_>,
        solver: SolverKind,
        quota: Option<u32>,
    ) -> Result<TraceOptions, PipelineError> {
        let mut o = ctx.base.clone();
        o.ina.set_mode(InaMode::Planned);
        let d = PlanOptions::default();
        let po = PlanOptions {
            settings: crate::plan::model::Settings {
                slots: o.ina.slots,
                quota,
                classes: o.ina.classes.clone(),
                ..d.settings
            },
            solver,
            time_limit: ctx.plan_time_limit,
            ..d
        };
        let p = make_plan(ctx.job, &o, &po, ctx.rate_model)?;
        std::fs::create_dir_all(ctx.dir).map_err(PipelineError::io(ctx.dir))?;
        crate::formats::plan_json::write(&ctx.dir.join("plan.json"), &p)?;
        Ok(crate::trace::planned::lowering_options(&o, &p))
    }
}

/// Parses a comma-separated policy list (`ring,ina-dp`): names known, none twice, `ring`
/// among them (the baseline every speed-up is measured against).
pub fn parse_policies(s: &str) -> Result<Vec<Policy>, String> {
    let mut v: Vec<Policy> = Vec::new();
    for p in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let p: Policy = p.parse()?;
        if v.contains(&p) {
            return Err(format!("policy `{p}` is named twice"));
        }
        v.push(p);
    }
    if !v.contains(&Policy::Ring) {
        return Err(format!(
            "the policies must include `ring`, the baseline of speedup_vs_ring (got `{s}`)"
        ));
    }
    Ok(v)
}
