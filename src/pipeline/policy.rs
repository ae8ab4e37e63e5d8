//! The policies `ina3d run` compares: one trace per policy, all from the same job.
//!
//! A policy turns the run's base trace options into its own (which traffic may aggregate in
//! switches, and how). To add one: a variant, its name in the `keyword_enum!` line, and its
//! arm in [`Policy::trace_options`]; a policy that must compute something first (a plan)
//! does it there, with the prepared job and its own output directory at hand
//! ([`PolicyContext`]). `run`, `sweep` grids (`policies = [...]`) and `--policies` pick it
//! up from [`Policy::NAMES`].

use super::{Job, PipelineError};
use crate::keyword::keyword_enum;
use crate::record::Class;
use crate::trace::{InaMode, TraceOptions};
use std::path::Path;

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
}

keyword_enum!(Policy, "policy", Policy::Ring => "ring", Policy::InaDp => "ina-dp", Policy::InaTp => "ina-tp", Policy::InaTpDp => "ina-tp-dp");

/// The policies of `ina3d run` when none are named, ring first.
pub const DEFAULT_POLICIES: [Policy; 4] =
    [Policy::Ring, Policy::InaDp, Policy::InaTp, Policy::InaTpDp];

/// What a policy may use to make its trace options.
pub struct PolicyContext<'a> {
    /// The prepared job (config, topology, workload).
    pub job: &'a Job,
    /// The run's trace options for this seed; `ina.mode` is the INA algorithm the INA
    /// policies use.
    pub base: &'a TraceOptions,
    /// This policy's output directory (for artefacts such as a plan).
    pub dir: &'a Path,
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
