//! `plan.json`: an INA plan — for every aggregation group of one job on one topology, the
//! host algorithm or the aggregation tree and the slots reserved per switch — written by
//! `ina3d plan`, read by `ina3d trace --plan`. The one reader ([`read`]) and writer
//! ([`write`]); the planner (`crate::plan`) fills it, the trace generator lowers it.
//!
//! The reader checks the file's *shape* (JSON syntax with line and column, schema version,
//! every tree edge naming a parent, no group twice); whether the plan fits a job and a
//! topology is the trace generator's check, which names the group and the field at fault.

use super::FormatError;
use crate::record::Class;
use crate::units::{NodeId, Rank};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The schema version this build reads and writes (2: every group's `active` window; the
/// job's `topology_hash` and `nccl_channels`).
pub const PLAN_SCHEMA: u32 = 2;

/// A whole plan file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanFile {
    /// File schema version ([`PLAN_SCHEMA`]).
    pub schema: u32,
    /// What the plan was made for: the trace-header entries that identify the job, the
    /// topology, the ECMP seed and the INA switch model (`ina3d trace --plan` refuses a
    /// trace whose header differs in any of them, naming the key).
    pub job: BTreeMap<String, String>,
    /// Planner settings.
    pub settings: PlanSettings,
    /// How the plan was found, and how good it is known to be.
    pub solver: SolverReport,
    /// What the cost model predicts for the plan and for the all-host baseline.
    pub prediction: Prediction,
    /// One entry per aggregation group, in group order.
    pub groups: Vec<PlannedGroup>,
    /// The plan lowered and replayed (filled by `ina3d plan --verify`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<Verification>,
    /// When a fixed policy replayed faster than every plan the planner found, that policy:
    /// the answer is the policy, and `ina3d trace --plan` lowers it as `ina3d run` lowers
    /// the policy (its INA algorithm, classes and slot policy, or its host algorithm);
    /// `groups` then hold the all-host decisions and are not lowered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_policy: Option<FixedPolicy>,
    /// Every candidate the repair loop replayed (the plans of each solver, the fixed
    /// policies), with its replayed iteration time: what the answer was chosen among.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidates: Vec<CandidateReplay>,
}

/// A fixed policy of `ina3d run`, as a candidate of the planner (and, when it replays
/// fastest, its answer: [`PlanFile::fixed_policy`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "name", deny_unknown_fields)]
pub enum FixedPolicy {
    /// No INA: every collective on one host algorithm (`--ina off --collective A`).
    AllHost {
        /// The host algorithm of every network collective.
        algorithm: crate::collective::Algorithm,
    },
    /// DP gradients on hierarchical trees (hash-placed roots), slots split evenly.
    InaDp,
    /// TP collectives on hierarchical trees, slots split evenly.
    InaTp,
    /// TP and DP on hierarchical trees, slots split evenly.
    InaTpDp,
    /// Hierarchical trees of every class the plan may aggregate, best-effort slots with
    /// fallback to the host ring.
    Atp,
    /// Rina over every class the plan may aggregate, slots split evenly.
    Rina,
}

impl std::fmt::Display for FixedPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FixedPolicy::AllHost { algorithm } => write!(f, "all-host {algorithm}"),
            FixedPolicy::InaDp => f.write_str("ina-dp"),
            FixedPolicy::InaTp => f.write_str("ina-tp"),
            FixedPolicy::InaTpDp => f.write_str("ina-tp-dp"),
            FixedPolicy::Atp => f.write_str("atp"),
            FixedPolicy::Rina => f.write_str("rina"),
        }
    }
}

/// What a candidate of the repair loop is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind", deny_unknown_fields)]
pub enum Candidate {
    /// A plan of the cost model, solved by `solver` (`heuristic` or `ilp`) in `round`
    /// (0: the all-host plan).
    Plan {
        /// The solver whose plan it is.
        solver: String,
        /// The repair loop's round.
        round: u32,
    },
    /// A fixed policy.
    Fixed {
        /// Which.
        policy: FixedPolicy,
    },
}

/// One candidate the repair loop replayed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CandidateReplay {
    /// What was replayed.
    pub candidate: Candidate,
    /// Its replayed iteration time (ns), or `None` when its lowering or replay failed
    /// (`failed` says why).
    pub replayed_ns: Option<f64>,
    /// Why it has no time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
}

/// Planner settings recorded with the plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanSettings {
    /// Aggregator slots per switch.
    pub slots: u32,
    /// Concurrent trees per switch (`None`: unlimited).
    pub tree_quota: Option<u32>,
    /// Reservation levels as fractions of a window.
    pub slot_levels: Vec<f64>,
    /// Objective minimised: `iteration` or `exposed`.
    pub objective: String,
    /// Classes the planner may aggregate.
    pub classes: Vec<Class>,
    /// Classes that must aggregate.
    pub required: Vec<Class>,
}

/// How a plan was found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SolverReport {
    /// `ilp`, `heuristic` or `auto` as asked.
    pub requested: String,
    /// The solver whose plan this is.
    pub used: String,
    /// `optimal` (proved, gap 0), `time-limit` (best plan found when the limit hit: not
    /// proved optimal), or `heuristic` (no optimality claim).
    pub status: String,
    /// Objective value of the plan under the cost model (ns).
    pub objective_ns: f64,
    /// A proven lower bound on the objective (ns).
    pub bound_ns: f64,
    /// `(objective − bound) / objective`.
    pub gap: f64,
    /// Wall time of the solve (s). Not written: the file is byte-identical for the same
    /// inputs however loaded the machine (`ina3d plan` prints the wall time). Read when
    /// present: plan files written before it was dropped carry it.
    #[serde(default, skip_serializing)]
    pub solve_time_s: f64,
    /// The time limit (s).
    pub time_limit_s: f64,
    /// Binary decision variables (options × slot levels) of the instance.
    pub variables: u64,
    /// Constraints of the instance (after pruning those that cannot bind).
    pub constraints: u64,
    /// Why another solver's answer is not the one kept, if so (e.g. `auto` fell back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The solve or the repair loop stopped at `--time-limit` rather than at its work
    /// budget: then, and only then, the plan may depend on the machine's speed and load.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hit_time_limit: bool,
    /// With `ilp` or `auto` and a replayer: the heuristic's plan and the exact solver's
    /// replayed, `(heuristic − exact) / exact` of their replayed iterations (positive:
    /// the exact plan was faster). Absent when only one of them was replayed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exact_gain: Option<f64>,
}

/// Predicted times (cost model, ns).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prediction {
    /// Iteration time of the plan.
    pub iteration_ns: f64,
    /// Exposed communication of the plan (Σ over groups of what is not hidden).
    pub exposed_ns: f64,
    /// Iteration time with every group on its host algorithm.
    pub host_iteration_ns: f64,
}

/// The decision for one group.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind", deny_unknown_fields)]
pub enum Decision {
    /// The host algorithm of the trace (`--collective`).
    Host,
    /// An aggregation tree: `edges` (child → parent) bottom-up, the last into `root`.
    Tree {
        /// `hierarchical` (every aggregating switch on the way sums), `root-only`
        /// (members send straight to the root, SwitchML-style) or `steiner` (general
        /// graphs: members joined to the nearest tree node).
        form: String,
        /// The top switch.
        root: NodeId,
        /// (child, parent): a member or switch sends its partial sum to `parent`.
        edges: Vec<(NodeId, NodeId)>,
    },
    /// Rina: members under each listed ToR reduce into it; those ToRs and the other members
    /// run the host ring.
    Rina {
        /// The aggregating ToRs.
        tors: Vec<NodeId>,
    },
}

/// One aggregation group and what the plan does with it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlannedGroup {
    /// Traffic class (`tp`, `dp`, `emb`).
    pub class: Class,
    /// Pipeline stage of the group (`None` for embedding groups, which span two).
    pub stage: Option<u32>,
    /// Member ranks, ascending.
    pub members: Vec<Rank>,
    /// The expert-DP group of a MoE model (its expert gradients), not the dense DP×CP
    /// group: with the experts spread over the tensor-parallel ranks (expert TP 1) the two
    /// have the same members, and only this tells their decisions apart. Written only
    /// when true.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub expert: bool,
    /// What to do.
    pub decision: Decision,
    /// Slots reserved per aggregating switch (0 for host).
    pub slots: u32,
    /// (switch, slots) reserved, ascending switch.
    pub reservations: Vec<(NodeId, u32)>,
    /// Network collectives of the group per iteration that the decision applies to.
    pub collectives: u64,
    /// Predicted time of one collective of the group's largest size under the decision (ns).
    pub collective_ns: f64,
    /// The same on the host algorithm (ns).
    pub host_collective_ns: f64,
    /// The host algorithm of a `host` decision's collectives (`ring`, `dbt`, `hd`,
    /// `hierarchical`; all-gathers stay on the trace's `--collective`); absent: the
    /// trace's `--collective`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_algorithm: Option<crate::collective::Algorithm>,
    /// The group's exposed communication under the decision (ns): DP, the gradient stream
    /// past the end of the stage's backward; TP, its collectives on the pipeline's critical
    /// path; embedding, its all-reduce.
    pub exposed_ns: f64,
    /// When the planner takes the group to be active, holding its reservations: the
    /// rule by which groups reuse a switch's slots (see [`Activity`]).
    pub active: Activity,
}

/// A group's activity window in the iteration, as the planner predicts it (the earliest
/// start to the latest end over all its options; TP groups the whole iteration).
///
/// **The reuse rule.** Groups whose windows meet (closed intervals: touching counts) may be
/// active together, so on every switch their reservations must fit the slot pool and their
/// trees the tree quota together; groups whose windows do not meet never run at once and
/// may reuse the same slots. `ina3d plan` plans by this rule and `ina3d trace --plan`
/// checks exactly it (`crate::trace::planned::concurrent_sets`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Activity {
    /// Start (ns from the iteration's start).
    pub from_ns: f64,
    /// End (ns); `None`: to the end of the iteration.
    pub until_ns: Option<f64>,
}

impl Activity {
    /// The window as a closed interval (an open end is +∞).
    pub fn interval(&self) -> (f64, f64) {
        (self.from_ns, self.until_ns.unwrap_or(f64::INFINITY))
    }
}

/// A plan lowered by `ina3d trace --plan` and replayed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Verification {
    /// Replayed iteration time (ns).
    pub replayed_ns: f64,
    /// `(predicted − replayed) / replayed`.
    pub error: f64,
    /// Replayed iteration time of the all-host trace (ns).
    pub host_replayed_ns: f64,
}

/// Read and check the shape of a plan file.
pub fn read(path: &Path) -> Result<PlanFile, FormatError> {
    let text = super::read_text(path)?;
    parse(path, &text)
}

/// Parse plan JSON (`path` names it in errors).
pub fn parse(path: &Path, text: &str) -> Result<PlanFile, FormatError> {
    let p: PlanFile = serde_json::from_str(text).map_err(|e| FormatError::Syntax {
        path: path.to_path_buf(),
        line: e.line() as u64,
        column: Some(e.column() as u64),
        field: "plan".into(),
        msg: e.to_string(),
    })?;
    let file = |msg: String| FormatError::File {
        path: path.to_path_buf(),
        msg,
    };
    if p.schema != PLAN_SCHEMA {
        return Err(file(format!(
            "plan schema {} is not the {PLAN_SCHEMA} this build reads",
            p.schema
        )));
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, g) in p.groups.iter().enumerate() {
        let first = g
            .members
            .first()
            .ok_or_else(|| file(format!("groups[{i}]: no members")))?;
        if !g.members.windows(2).all(|w| w[0] < w[1]) {
            return Err(file(format!(
                "groups[{i}] ({} group of rank {first}): members must be ascending and distinct",
                g.class
            )));
        }
        let (from, until) = g.active.interval();
        if !(from >= 0.0 && from <= until) {
            return Err(file(format!(
                "groups[{i}] ({} group of rank {first}): active: from_ns {from} and until_ns {until} are not a window (0 ≤ from_ns ≤ until_ns)",
                g.class
            )));
        }
        if !seen.insert((g.class, *first)) {
            return Err(file(format!(
                "groups[{i}]: a second {} group whose lowest rank is {first}",
                g.class
            )));
        }
        if let Decision::Tree { root, edges, form } = &g.decision {
            if !["hierarchical", "root-only", "steiner"].contains(&form.as_str()) {
                return Err(file(format!(
                    "groups[{i}] ({} group of rank {first}): tree form `{form}` (expected hierarchical, root-only or steiner)",
                    g.class
                )));
            }
            if edges.last().map(|e| e.1) != Some(*root) {
                return Err(file(format!(
                    "groups[{i}] ({} group of rank {first}): the last tree edge must end at the root {root}",
                    g.class
                )));
            }
        }
    }
    Ok(p)
}

/// Write a plan atomically (pretty JSON, one trailing newline).
pub fn write(path: &Path, plan: &PlanFile) -> Result<(), FormatError> {
    let mut text = serde_json::to_string_pretty(plan).map_err(|e| FormatError::File {
        path: path.to_path_buf(),
        msg: format!("cannot serialise the plan: {e}"),
    })?;
    text.push('\n');
    super::write_atomic_bytes(path, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> PlanFile {
        PlanFile {
            schema: PLAN_SCHEMA,
            job: [("dp".to_string(), "4".to_string())].into_iter().collect(),
            settings: PlanSettings {
                slots: 8192,
                tree_quota: Some(1),
                slot_levels: vec![1.0, 0.5],
                objective: "iteration".into(),
                classes: vec![Class::Dp],
                required: vec![],
            },
            solver: SolverReport {
                requested: "auto".into(),
                used: "ilp".into(),
                status: "optimal".into(),
                objective_ns: 1e6,
                bound_ns: 1e6,
                gap: 0.0,
                solve_time_s: 0.0,
                time_limit_s: 10.0,
                variables: 12,
                constraints: 30,
                note: None,
                hit_time_limit: false,
                exact_gain: None,
            },
            prediction: Prediction {
                iteration_ns: 1e6,
                exposed_ns: 2e5,
                host_iteration_ns: 1.2e6,
            },
            groups: vec![
                PlannedGroup {
                    class: Class::Dp,
                    stage: Some(0),
                    members: vec![Rank(0), Rank(2)],
                    expert: false,
                    decision: Decision::Tree {
                        form: "hierarchical".into(),
                        root: NodeId(20),
                        edges: vec![(NodeId(0), NodeId(20)), (NodeId(2), NodeId(20))],
                    },
                    slots: 256,
                    reservations: vec![(NodeId(20), 256)],
                    collectives: 3,
                    collective_ns: 1.5e5,
                    host_collective_ns: 2e5,
                    exposed_ns: 9e5,
                    host_algorithm: None,
                    active: Activity {
                        from_ns: 1e5,
                        until_ns: Some(8e5),
                    },
                },
                PlannedGroup {
                    class: Class::Emb,
                    stage: None,
                    members: vec![Rank(0), Rank(8)],
                    expert: false,
                    decision: Decision::Host,
                    slots: 0,
                    reservations: vec![],
                    collectives: 1,
                    collective_ns: 1e5,
                    host_collective_ns: 1e5,
                    exposed_ns: 1e6,
                    host_algorithm: None,
                    active: Activity {
                        from_ns: 9e5,
                        until_ns: None,
                    },
                },
            ],
            verification: None,
            fixed_policy: None,
            candidates: vec![],
        }
    }

    #[test]
    fn a_plan_round_trips_through_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("plan.json");
        let plan = sample();
        write(&p, &plan).unwrap();
        assert_eq!(read(&p).unwrap(), plan);
    }

    #[test]
    fn a_syntax_error_names_line_and_column() {
        let e = parse(Path::new("p.json"), "{\n  \"schema\": 1,\n  oops\n}").unwrap_err();
        let s = e.to_string();
        assert!(s.starts_with("p.json:3:"), "{s}");
    }

    #[test]
    fn unknown_fields_a_foreign_schema_and_bad_trees_are_refused() {
        let good = serde_json::to_string(&sample()).unwrap();
        let extra = good.replacen("\"schema\":2", "\"schema\":2,\"extra\":0", 1);
        assert!(parse(Path::new("p"), &extra)
            .unwrap_err()
            .to_string()
            .contains("extra"));
        let v1 = good.replacen("\"schema\":2", "\"schema\":1", 1);
        assert!(parse(Path::new("p"), &v1)
            .unwrap_err()
            .to_string()
            .contains("schema 1"));
        let mut bad = sample();
        if let Decision::Tree { edges, .. } = &mut bad.groups[0].decision {
            edges.pop();
            edges.push((NodeId(2), NodeId(7)));
        }
        let s = serde_json::to_string(&bad).unwrap();
        let e = parse(Path::new("p"), &s).unwrap_err().to_string();
        assert!(e.contains("groups[0]") && e.contains("root 20"), "{e}");
        let mut late = sample();
        late.groups[0].active.until_ns = Some(1.0);
        let s = serde_json::to_string(&late).unwrap();
        let e = parse(Path::new("p"), &s).unwrap_err().to_string();
        assert!(e.contains("groups[0]") && e.contains("active"), "{e}");
        let mut twice = sample();
        twice.groups[1].class = Class::Dp;
        let s = serde_json::to_string(&twice).unwrap();
        assert!(parse(Path::new("p"), &s)
            .unwrap_err()
            .to_string()
            .contains("second dp group"));
    }
}
