//! Plans that cannot lie: `ina3d plan` calls a job infeasible only with a proof that names
//! the groups, the switches and the constraint, and `ina3d trace --plan` refuses a plan the
//! job, the topology or the switches cannot honour — over-reserved slot pools, trees for
//! groups that never reach the network, roots not above their members, another channel
//! count, another topology — naming the group, the switch and the constraint.

use ina3d::formats::plan_json::{Decision, PlanFile};
use ina3d::megatron::{self, TrainingConfig};
use ina3d::plan::model::Settings;
use ina3d::plan::options::Form;
use ina3d::plan::{self, Objective, PlanError, PlanOptions, SolverKind};
use ina3d::record::Class;
use ina3d::schedule::{self, Workload};
use ina3d::topology::{NodeKind, Routing, Topology};
use ina3d::trace::{self, InaMode, InaPolicy, InaSwitches, TraceOptions};
use ina3d::units::NodeId;
use std::collections::BTreeMap;
use std::time::Duration;

/// A job on a topology, with the INA switch model of `ina3d plan`.
struct Job {
    cfg: TrainingConfig,
    wl: Workload,
    topo: Topology,
    opts: TraceOptions,
}

impl Job {
    fn new(cfg: TrainingConfig, topo: Topology, switches: InaSwitches, slots: u32) -> Job {
        let mut opts = TraceOptions::default();
        opts.ina.mode = InaMode::Planned;
        opts.ina.policy = InaPolicy::Planned;
        opts.ina.switches = switches;
        opts.ina.slots = slots;
        let wl = schedule::build(&cfg, &opts.schedule).unwrap();
        Job {
            cfg,
            wl,
            topo,
            opts,
        }
    }

    fn identity(&self, opts: &TraceOptions) -> BTreeMap<String, String> {
        trace::planned::plan_job(&trace::header(&self.cfg, &self.wl, &self.topo, opts))
    }

    fn plan(
        &self,
        st: Settings,
        solver: SolverKind,
        objective: Objective,
    ) -> Result<PlanFile, PlanError> {
        let po = PlanOptions {
            settings: st,
            objective,
            solver,
            time_limit: Duration::from_secs(60),
            auto_max_variables: 2000,
        };
        plan::plan(
            &self.wl,
            &self.topo,
            &self.opts,
            &po,
            self.identity(&self.opts),
        )
    }

    /// Lower `p` as `ina3d trace --plan` does (identity, then the generator's checks).
    fn lower(&self, p: &PlanFile) -> Result<(), String> {
        let h = trace::header(&self.cfg, &self.wl, &self.topo, &self.opts);
        trace::planned::check_plan_job(p, &h).map_err(|e| e.to_string())?;
        let mut o = self.opts.clone();
        o.plan = Some(p.clone());
        trace::generate_workload(&self.wl, &self.topo, &o, &mut |_| Ok(()))
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

/// A 4-layer GPT (h=1024, 16 heads, s=512) in the given layout.
fn small(tp: u32, pp: u32, dp: u32, gb: u64) -> TrainingConfig {
    let mut c = megatron::preset("gpt3-13b").unwrap();
    for (k, v) in [
        ("num_layers", "4"),
        ("hidden_size", "1024"),
        ("num_attention_heads", "16"),
        ("seq_length", "512"),
        ("tensor_model_parallel_size", &tp.to_string()),
        ("pipeline_model_parallel_size", &pp.to_string()),
        ("data_parallel_size", &dp.to_string()),
        ("global_batch_size", &gb.to_string()),
    ] {
        c.set(k, v).unwrap();
    }
    c
}

fn bundled(name: &str) -> TrainingConfig {
    megatron::load_input(&format!(
        "{}/traces/example/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn settings(slots: u32, quota: Option<u32>, levels: &[f64], classes: &[Class]) -> Settings {
    Settings {
        slots,
        quota,
        levels: levels.to_vec(),
        classes: classes.to_vec(),
        required: vec![],
        forms: vec![Form::Hierarchical, Form::RootOnly],
        rina: true,
    }
}

/// Switches of layer `l` (1 = leaf) of a topology, ascending.
fn layer(topo: &Topology, l: u16) -> Vec<NodeId> {
    let r = Routing::new(topo, 0).unwrap();
    (0..topo.node_count() as u32)
        .map(NodeId)
        .filter(|&v| topo.kinds[v.idx()] == NodeKind::Switch && r.level(v) == Some(l))
        .collect()
}

/// Two DP groups of four GPUs, each over both leaves of a 2-leaf leaf-spine (TP pairs on
/// the network), INA on the leaves and on one spine: that spine is the only root either
/// group has.
fn two_groups_one_spine(slots: u32) -> (Job, NodeId) {
    let topo =
        Topology::from_spec("leaf-spine:leaves=2,spines=2,hosts-per-leaf=4,nvlink=off").unwrap();
    let mut ids = layer(&topo, 1);
    let spine = layer(&topo, 2)[0];
    ids.push(spine);
    (
        Job::new(small(2, 1, 4, 16), topo, InaSwitches::Ids(ids), slots),
        spine,
    )
}

fn total_reserved(p: &PlanFile) -> BTreeMap<NodeId, u64> {
    let mut per = BTreeMap::new();
    for g in &p.groups {
        for &(s, k) in &g.reservations {
            *per.entry(s).or_insert(0) += k as u64;
        }
    }
    per
}

// ------------------------------------------------------------- infeasible only when proved

#[test]
fn a_tp_instance_that_fits_at_half_a_window_is_planned_rather_than_called_infeasible() {
    // Four TP pairs on a 2-leaf leaf-spine, two pairs under each leaf, every TP group
    // required to aggregate in a 256-slot pool. A full window (256 slots) per group does
    // not fit two groups on one leaf; half a window (a default slot level) does.
    let topo =
        Topology::from_spec("leaf-spine:leaves=2,spines=2,hosts-per-leaf=4,nvlink=off").unwrap();
    let j = Job::new(bundled("tiny.toml"), topo, InaSwitches::All, 256);
    let mut st = settings(256, None, &[1.0, 0.5, 0.25], &[Class::Tp]);
    st.required = vec![Class::Tp];
    for solver in [SolverKind::Ilp, SolverKind::Heuristic, SolverKind::Auto] {
        let p = j
            .plan(st.clone(), solver, Objective::Iteration)
            .unwrap_or_else(|e| panic!("{solver:?}: a plan exists (128 slots a group), got: {e}"));
        let tp: Vec<_> = p.groups.iter().filter(|g| g.class == Class::Tp).collect();
        assert_eq!(tp.len(), 4);
        assert!(tp
            .iter()
            .all(|g| matches!(g.decision, Decision::Tree { .. } | Decision::Rina { .. })));
        for (s, k) in total_reserved(&p) {
            assert!(
                k <= 256,
                "{solver:?}: switch {s} holds {k} reserved slots of 256"
            );
        }
        j.lower(&p).unwrap();
    }
}

#[test]
fn two_required_groups_with_one_possible_root_are_refused_naming_both_groups_the_switch_and_the_slots(
) {
    let (j, spine) = two_groups_one_spine(256);
    let mut st = settings(256, None, &[1.0], &[Class::Dp]);
    st.required = vec![Class::Dp];
    // with Rina one group could reduce into the two leaves instead: it fits
    let p = j
        .plan(st.clone(), SolverKind::Auto, Objective::Iteration)
        .unwrap();
    let kinds: Vec<&Decision> = p
        .groups
        .iter()
        .filter(|g| g.class == Class::Dp)
        .map(|g| &g.decision)
        .collect();
    assert!(
        kinds.iter().any(|d| matches!(d, Decision::Rina { .. })),
        "{kinds:?}"
    );
    // trees only: both need the spine, a whole window each
    st.rina = false;
    let e = j
        .plan(st.clone(), SolverKind::Auto, Objective::Iteration)
        .unwrap_err();
    assert!(matches!(e, PlanError::Infeasible(_)), "{e}");
    let e = e.to_string();
    for want in [
        "dp group of ranks 0,2,4,6".to_string(),
        "dp group of ranks 1,3,5,7".to_string(),
        format!("switch {spine}"),
        "512 > --ina-slots 256".to_string(),
        "--ina-slots 256".to_string(),
    ] {
        assert!(e.contains(&want), "`{want}` missing from: {e}");
    }
    // the same with room for the slots but one tree per switch
    st.slots = 8192;
    st.quota = Some(1);
    let e = j
        .plan(st, SolverKind::Heuristic, Objective::Iteration)
        .unwrap_err()
        .to_string();
    for want in [
        "dp group of ranks 0,2,4,6".to_string(),
        "dp group of ranks 1,3,5,7".to_string(),
        format!("switch {spine}"),
        "--tree-quota 1".to_string(),
    ] {
        assert!(e.contains(&want), "`{want}` missing from: {e}");
    }
}

#[test]
fn four_required_groups_over_two_aggregating_spines_with_one_tree_each_are_refused_by_counting() {
    // TP4·DP3 on three leaves of four GPUs: each of the four DP groups has a GPU under
    // every leaf, and only the two spines aggregate: every option of every group puts a
    // tree on one of them, four trees for two slots of the quota.
    let topo =
        Topology::from_spec("leaf-spine:leaves=3,spines=2,hosts-per-leaf=4,nvlink=off").unwrap();
    let spines = layer(&topo, 2);
    let j = Job::new(
        small(4, 1, 3, 12),
        topo,
        InaSwitches::Ids(spines.clone()),
        8192,
    );
    let mut st = settings(8192, Some(1), &[1.0, 0.5], &[Class::Dp]);
    st.required = vec![Class::Dp];
    let e = j
        .plan(st, SolverKind::Auto, Objective::Iteration)
        .unwrap_err();
    assert!(matches!(e, PlanError::Infeasible(_)), "{e}");
    let e = e.to_string();
    for want in [
        "dp group of ranks 0,4,8",
        "dp group of ranks 3,7,11",
        "--tree-quota 1",
    ] {
        assert!(e.contains(want), "`{want}` missing from: {e}");
    }
    for s in spines {
        assert!(e.contains(&s.to_string()), "spine {s} missing from: {e}");
    }
}

#[test]
fn four_required_groups_over_three_spines_of_one_and_a_half_windows_are_proved_infeasible_by_the_exact_program(
) {
    // The same four DP groups, now three aggregating spines of 384 slots: a whole window
    // (256, the only level) fits once per spine. Counting cannot see it (4 × 256 = 1,024
    // slots ≤ 3 × 384), integrality can: four trees, three spines.
    let topo =
        Topology::from_spec("leaf-spine:leaves=3,spines=3,hosts-per-leaf=4,nvlink=off").unwrap();
    let spines = layer(&topo, 2);
    let j = Job::new(
        small(4, 1, 3, 12),
        topo,
        InaSwitches::Ids(spines.clone()),
        384,
    );
    let mut st = settings(384, None, &[1.0], &[Class::Dp]);
    st.required = vec![Class::Dp];
    let e = j
        .plan(st, SolverKind::Heuristic, Objective::Iteration)
        .unwrap_err();
    assert!(matches!(e, PlanError::Infeasible(_)), "{e}");
    let e = e.to_string();
    for want in [
        "exact program",
        "dp group of ranks 0,4,8",
        "dp group of ranks 1,5,9",
        "dp group of ranks 2,6,10",
        "dp group of ranks 3,7,11",
        "--ina-slots 384",
        "without any one of them the others fit",
    ] {
        assert!(e.contains(want), "`{want}` missing from: {e}");
    }
    for s in spines {
        assert!(e.contains(&s.to_string()), "spine {s} missing from: {e}");
    }
}
