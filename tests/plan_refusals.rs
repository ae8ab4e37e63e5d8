//! Plans that cannot lie: `ina3d plan` calls a job infeasible only with a proof that names
//! the groups, the switches and the constraint, and `ina3d trace --plan` refuses a plan the
//! job, the topology or the switches cannot honour — over-reserved slot pools, trees for
//! groups that never reach the network, roots not above their members, another channel
//! count, another topology — naming the group, the switch and the constraint.

use ina3d::formats::plan_json::{self, Decision, PlanFile};
use ina3d::formats::topology_txt::Flavor;
use ina3d::megatron::{self, TrainingConfig};
use ina3d::plan::model::Settings;
use ina3d::plan::options::{Form, OptKind};
use ina3d::plan::{self, Objective, PlanError, PlanOptions, SolverKind};
use ina3d::record::Class;
use ina3d::schedule::{self, Workload};
use ina3d::topology::{NodeKind, Routing, Topology};
use ina3d::trace::{self, InaMode, InaSwitches, TraceOptions};
use ina3d::units::{BitsPerSec, NodeId, Rank};
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
        opts.ina.set_mode(InaMode::Planned);
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
            work: plan::Work::default(),
            auto_max_variables: 2000,
            replay_rounds: 0,
            fixed_policies: false,
        };
        plan::plan(
            &self.wl,
            &self.topo,
            &self.opts,
            &po,
            self.identity(&self.opts),
            None,
        )
    }

    /// A heuristic plan for the DP groups at whole windows.
    fn dp_plan(&self, slots: u32) -> PlanFile {
        self.plan(
            settings(slots, None, &[1.0], &[Class::Dp]),
            SolverKind::Heuristic,
            Objective::Iteration,
        )
        .unwrap()
    }

    /// Why the identity check refuses `p` for a trace of `topo` with `opts`.
    fn identity_refusal(&self, p: &PlanFile, topo: &Topology, opts: &TraceOptions) -> String {
        let h = trace::header(&self.cfg, &self.wl, topo, opts);
        trace::planned::check_plan_job(p, &h)
            .expect_err("a plan for another trace")
            .to_string()
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

/// Runs `ina3d ARGS`: (exit code, stderr).
fn ina3d(args: &[&str]) -> (Option<i32>, String) {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_ina3d"))
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
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

fn group_mut(p: &mut PlanFile, class: Class, first: u32) -> &mut plan_json::PlannedGroup {
    p.groups
        .iter_mut()
        .find(|g| g.class == class && g.members[0] == Rank(first))
        .unwrap_or_else(|| panic!("the plan has a {class} group of first rank {first}"))
}

/// A tree decision with `slots` on each of its switches.
fn tree(root: NodeId, edges: Vec<(NodeId, NodeId)>, slots: u32) -> (Decision, Vec<(NodeId, u32)>) {
    let mut sw: Vec<NodeId> = edges.iter().map(|e| e.1).collect();
    sw.sort_unstable();
    sw.dedup();
    (
        Decision::Tree {
            form: "hierarchical".into(),
            root,
            edges,
        },
        sw.into_iter().map(|s| (s, slots)).collect(),
    )
}

fn set_tree(
    g: &mut plan_json::PlannedGroup,
    root: NodeId,
    edges: Vec<(NodeId, NodeId)>,
    slots: u32,
) {
    let (d, r) = tree(root, edges, slots);
    g.decision = d;
    g.reservations = r;
    g.slots = slots;
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

/// The four DP groups of TP4·DP3 on three leaves of four GPUs (each group has a GPU under
/// every leaf), required to aggregate, only the `spines` spines aggregating, `slots` per
/// switch: the infeasibility message, and the spines.
fn four_required_groups_over_spines(
    spines: u32,
    slots: u32,
    quota: Option<u32>,
    levels: &[f64],
) -> (String, Vec<NodeId>) {
    let spec = format!("leaf-spine:leaves=3,spines={spines},hosts-per-leaf=4,nvlink=off");
    let topo = Topology::from_spec(&spec).unwrap();
    let ids = layer(&topo, 2);
    let j = Job::new(
        small(4, 1, 3, 12),
        topo,
        InaSwitches::Ids(ids.clone()),
        slots,
    );
    let mut st = settings(slots, quota, levels, &[Class::Dp]);
    st.required = vec![Class::Dp];
    let e = j
        .plan(st, SolverKind::Heuristic, Objective::Iteration)
        .unwrap_err();
    assert!(matches!(e, PlanError::Infeasible(_)), "{e}");
    (e.to_string(), ids)
}

/// `e` names every group of `wants`, every switch of `switches`.
fn assert_names(e: &str, wants: &[&str], switches: &[NodeId]) {
    for want in wants {
        assert!(e.contains(want), "`{want}` missing from: {e}");
    }
    for s in switches {
        assert!(e.contains(&s.to_string()), "switch {s} missing from: {e}");
    }
}

#[test]
fn four_required_groups_over_two_aggregating_spines_with_one_tree_each_are_refused_by_counting() {
    // every option of every group puts a tree on one of the two spines: four trees for
    // two places in the quota
    let (e, spines) = four_required_groups_over_spines(2, 8192, Some(1), &[1.0, 0.5]);
    assert_names(
        &e,
        &[
            "counting",
            "dp group of ranks 0,4,8",
            "dp group of ranks 3,7,11",
            "--tree-quota 1",
        ],
        &spines,
    );
}

#[test]
fn four_required_groups_over_three_spines_of_one_and_a_half_windows_are_proved_infeasible_by_the_exact_program(
) {
    // Three spines of 384 slots: a whole window (256, the only level) fits once per
    // spine. Counting cannot see it (4 × 256 = 1,024 slots ≤ 3 × 384), integrality can:
    // four trees, three spines.
    let (e, spines) = four_required_groups_over_spines(3, 384, None, &[1.0]);
    assert_names(
        &e,
        &[
            "exact program",
            "dp group of ranks 0,4,8",
            "dp group of ranks 1,5,9",
            "dp group of ranks 2,6,10",
            "dp group of ranks 3,7,11",
            "--ina-slots 384",
            "without any one of them the others fit",
        ],
        &spines,
    );
}

#[test]
fn plan_on_the_command_line_plans_what_fits_and_refuses_what_is_proved_not_to_with_exit_2() {
    // the instance: TP pairs two to a leaf, every TP group required, 256 slots
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("plan.json");
    let tiny = concat!(env!("CARGO_MANIFEST_DIR"), "/traces/example/tiny.toml");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "plan",
            tiny,
            "--topology",
            "leaf-spine:leaves=2,spines=2,hosts-per-leaf=4,nvlink=off",
            "--require",
            "tp",
            "--ina-classes",
            "tp",
            "--ina-slots",
            "256",
            "--solver",
            "ilp",
            "-o",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        ina3d(&args)
    };
    let (code, err) = run(&[]);
    assert_eq!(code, Some(0), "half a window a group fits: {err}");
    // whole windows only: two groups of 256 on each leaf's 256 slots
    let (code, err) = run(&["--slot-levels", "1"]);
    assert_eq!(code, Some(2), "{err}");
    let leaf = layer(
        &Topology::from_spec("leaf-spine:leaves=2,spines=2,hosts-per-leaf=4,nvlink=off").unwrap(),
        1,
    )[0];
    assert_names(
        &err,
        &[
            "infeasible: counting",
            "tp group of ranks 0,1",
            "tp group of ranks 2,3",
            "512 > --ina-slots 256",
            "--require tp",
        ],
        &[leaf],
    );
}

// ---------------------------------------------------------- trace --plan refuses lies

#[test]
fn a_plan_giving_two_groups_a_whole_pool_each_on_one_switch_is_refused_naming_switch_groups_and_slots(
) {
    let (j, spine) = two_groups_one_spine(256);
    let mut p = j
        .plan(
            settings(256, None, &[1.0], &[Class::Dp]),
            SolverKind::Heuristic,
            Objective::Exposed,
        )
        .unwrap();
    j.lower(&p).unwrap();
    // both DP groups straight to the spine with a whole 256-slot window: 512 in a 256 pool
    for first in [0u32, 1] {
        let members: Vec<NodeId> = group_mut(&mut p, Class::Dp, first)
            .members
            .iter()
            .map(|r| j.topo.gpu(*r))
            .collect();
        let edges = members.iter().map(|&m| (m, spine)).collect();
        set_tree(group_mut(&mut p, Class::Dp, first), spine, edges, 256);
    }
    let e = j.lower(&p).unwrap_err();
    for want in [
        format!("switch {spine}"),
        "dp group of ranks 0,2,4,6".into(),
        "dp group of ranks 1,3,5,7".into(),
        "512".into(),
        "256".into(),
    ] {
        assert!(e.contains(&want), "`{want}` missing from: {e}");
    }
}

#[test]
fn a_tree_for_a_tp_group_inside_one_nvlink_server_is_refused_not_ignored() {
    // the bundled example: TP pairs inside 2-GPU servers never reach the network
    let j = Job::new(
        bundled("megatron.log"),
        Topology::from_spec("fat-tree:k=4,gpus-per-server=2").unwrap(),
        InaSwitches::All,
        8192,
    );
    let mut p = j.dp_plan(8192);
    let (g0, g1) = (j.topo.gpu(Rank(0)), j.topo.gpu(Rank(1)));
    let tor = j
        .topo
        .neighbors(g0)
        .into_iter()
        .map(|x| x.1)
        .find(|&v| j.topo.kinds[v.idx()] == NodeKind::Switch)
        .unwrap();
    set_tree(
        group_mut(&mut p, Class::Tp, 0),
        tor,
        vec![(g0, tor), (g1, tor)],
        64,
    );
    let e = j.lower(&p).unwrap_err();
    assert!(
        e.contains("tp group of ranks 0,1") && e.contains("NVLink"),
        "{e}"
    );
}

#[test]
fn a_tree_whose_root_is_not_above_every_member_is_refused_naming_the_root_and_a_member() {
    let (j, _) = two_groups_one_spine(8192);
    let mut p = j.dp_plan(8192);
    // the DP group 0,2,4,6 has GPUs under both leaves; root it at the first leaf
    let leaf = layer(&j.topo, 1)[0];
    let hosts: Vec<NodeId> = [0u32, 2, 4, 6]
        .iter()
        .map(|&r| j.topo.gpu(Rank(r)))
        .collect();
    set_tree(
        group_mut(&mut p, Class::Dp, 0),
        leaf,
        hosts.iter().map(|&h| (h, leaf)).collect(),
        256,
    );
    let e = j.lower(&p).unwrap_err();
    assert!(
        e.contains("dp group of ranks 0,2,4,6")
            && e.contains(&format!("{leaf}"))
            && e.contains("above"),
        "{e}"
    );
}

#[test]
fn rina_for_a_group_without_an_all_reduce_is_neither_offered_nor_lowered() {
    // with the distributed optimizer a DP group reduce-scatters its gradients: Rina, which
    // reduces all-reduces only, would leave them on the host ring and hold slots for nothing
    let mut cfg = small(2, 1, 4, 16);
    cfg.set("use_distributed_optimizer", "true").unwrap();
    let topo =
        Topology::from_spec("leaf-spine:leaves=2,spines=2,hosts-per-leaf=4,nvlink=off").unwrap();
    let j = Job::new(cfg, topo, InaSwitches::All, 8192);
    let st = settings(8192, None, &[1.0], &[Class::Dp]);
    let m = plan::build_model(&j.wl, &j.topo, &j.opts, &st).unwrap();
    let dp = m.groups.iter().position(|g| g.class == Class::Dp).unwrap();
    assert!(m.opts[dp]
        .iter()
        .any(|o| matches!(o.kind, OptKind::Tree { .. })));
    assert!(!m.opts[dp]
        .iter()
        .any(|o| matches!(o.kind, OptKind::Rina { .. })));
    let mut p = j.dp_plan(8192);
    let leaves = layer(&j.topo, 1);
    let g = group_mut(&mut p, Class::Dp, 0);
    g.decision = Decision::Rina {
        tors: leaves.clone(),
    };
    g.slots = 256;
    g.reservations = leaves.iter().map(|&t| (t, 256)).collect();
    let e = j.lower(&p).unwrap_err();
    assert!(
        e.contains("dp group of ranks 0,2,4,6") && e.contains("Rina reduces all-reduces only"),
        "{e}"
    );
}

#[test]
fn windows_that_contradict_the_job_are_refused_so_slots_cannot_be_reused_by_fiat() {
    // Two DP groups of one stage that the plan says never meet could share the spine's
    // whole pool; one backward pass releases both, so the plan may not say so. Nor may a
    // TP group claim to be idle for part of the iteration.
    let (j, _) = two_groups_one_spine(256);
    let base = j.dp_plan(256);
    let mut p = base.clone();
    let g = group_mut(&mut p, Class::Dp, 1);
    g.active.from_ns = g.active.until_ns.unwrap() + 1.0;
    g.active.until_ns = Some(g.active.from_ns + 1.0);
    let e = j.lower(&p).unwrap_err();
    assert!(
        e.contains("dp group of ranks 1,3,5,7") && e.contains("active.from_ns"),
        "{e}"
    );
    let mut p = base;
    group_mut(&mut p, Class::Tp, 0).active.until_ns = Some(1000.0);
    let e = j.lower(&p).unwrap_err();
    assert!(
        e.contains("tp group of ranks 0,1") && e.contains("active"),
        "{e}"
    );
}

#[test]
fn a_plan_made_for_another_channel_count_is_refused() {
    let (j, _) = two_groups_one_spine(8192);
    let p = j.dp_plan(8192);
    let mut four = j.opts.clone();
    four.nccl_channels = Some(4);
    let e = j.identity_refusal(&p, &j.topo, &four);
    assert!(e.contains("nccl_channels"), "{e}");
}

#[test]
fn a_plan_made_on_a_topology_file_whose_link_rates_changed_since_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("topology.txt");
    let built =
        Topology::from_spec("leaf-spine:leaves=2,spines=2,hosts-per-leaf=4,nvlink=off").unwrap();
    std::fs::write(&file, built.to_text(Flavor::Hpcc)).unwrap();
    let spec = file.to_str().unwrap();
    let j = Job::new(
        small(2, 1, 4, 16),
        Topology::from_spec(spec).unwrap(),
        InaSwitches::All,
        8192,
    );
    let p = j.dp_plan(8192);
    // the same file, read again, lowers; the file with one link at half its rate does not
    let again = Topology::from_spec(spec).unwrap();
    let h = trace::header(&j.cfg, &j.wl, &again, &j.opts);
    trace::planned::check_plan_job(&p, &h).unwrap();
    let mut slower = built.clone();
    slower.links[0].rate = BitsPerSec(slower.links[0].rate.0 / 2);
    std::fs::write(&file, slower.to_text(Flavor::Hpcc)).unwrap();
    let changed = Topology::from_spec(spec).unwrap();
    assert_eq!(changed.source, again.source, "same file, same spec string");
    let e = j.identity_refusal(&p, &changed, &j.opts);
    assert!(e.contains("topology"), "{e}");
}

#[test]
fn trace_refuses_a_crafted_plan_file_with_exit_2_naming_file_group_switch_and_constraint() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("crafted.json");
    let topo = "leaf-spine:leaves=2,spines=2,hosts-per-leaf=4,nvlink=off";
    let tiny = concat!(env!("CARGO_MANIFEST_DIR"), "/traces/example/tiny.toml");
    let run = ina3d;
    let (code, err) = run(&[
        "plan",
        tiny,
        "--topology",
        topo,
        "--ina-slots",
        "256",
        "--ina-classes",
        "tp",
        "-o",
        plan.to_str().unwrap(),
        "--solver",
        "heuristic",
    ]);
    assert_eq!(code, Some(0), "{err}");
    // every TP pair on its leaf with a whole window: two groups of 256 on each leaf (the
    // crafted decisions are the plan, whichever candidate the planner's replays chose)
    let mut p = plan_json::read(&plan).unwrap();
    p.fixed_policy = None;
    let t = Topology::from_spec(topo).unwrap();
    let leaves = layer(&t, 1);
    for g in p.groups.iter_mut().filter(|g| g.class == Class::Tp) {
        let hosts: Vec<NodeId> = g.members.iter().map(|r| t.gpu(*r)).collect();
        let leaf = leaves[(g.members[0].0 / 4) as usize];
        set_tree(g, leaf, hosts.iter().map(|&h| (h, leaf)).collect(), 256);
    }
    plan_json::write(&plan, &p).unwrap();
    let out = dir.path().join("t.csv.gz");
    let (code, err) = run(&[
        "trace",
        tiny,
        "--topology",
        topo,
        "--ina-slots",
        "256",
        "--ina-classes",
        "tp",
        "--plan",
        plan.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2), "{err}");
    for want in [
        "crafted.json",
        "groups[",
        "tp group of ranks 0,1",
        "tp group of ranks 2,3",
        &format!("switch {}", leaves[0]),
        "--ina-slots",
    ] {
        assert!(err.contains(want), "`{want}` missing from: {err}");
    }
    assert!(!out.exists(), "nothing written on refusal");
}

// ------------------------------------------- every placement, and crafted plans, lowered

/// Slots per switch at every instant where a group becomes active (a maximal set of
/// closed windows always contains some window's start): the largest sum over groups whose
/// windows hold that instant. Independent of the planner's phases and of the check's sweep.
fn peak_reserved(p: &PlanFile) -> BTreeMap<NodeId, u64> {
    let win: Vec<(f64, f64)> = p.groups.iter().map(|g| g.active.interval()).collect();
    let mut peak: BTreeMap<NodeId, u64> = BTreeMap::new();
    for &(t, _) in &win {
        let mut now: BTreeMap<NodeId, u64> = BTreeMap::new();
        for (g, &(a, b)) in p.groups.iter().zip(&win) {
            if a <= t && t <= b {
                for &(s, k) in &g.reservations {
                    *now.entry(s).or_insert(0) += k as u64;
                }
            }
        }
        for (s, k) in now {
            let e = peak.entry(s).or_insert(0);
            *e = (*e).max(k);
        }
    }
    peak
}

#[test]
fn of_every_placement_of_two_groups_trace_accepts_exactly_those_whose_reservations_fit_the_pool() {
    // Two DP groups, each: host, a hierarchical or root-only tree at the spine, or Rina on
    // the two leaves, at 256 or 128 slots, in a 256-slot pool. Every placement is written
    // as the planner writes a plan and lowered.
    let (j, _) = two_groups_one_spine(256);
    let st = settings(256, None, &[1.0, 0.5], &[Class::Dp]);
    let m = plan::build_model(&j.wl, &j.topo, &j.opts, &st).unwrap();
    let po = PlanOptions {
        settings: st,
        objective: Objective::Iteration,
        solver: SolverKind::Heuristic,
        time_limit: Duration::from_secs(1),
        work: plan::Work::default(),
        auto_max_variables: 0,
        replay_rounds: 0,
        fixed_policies: false,
    };
    let free: Vec<usize> = (0..m.groups.len())
        .filter(|&g| m.opts[g].len() > 1)
        .collect();
    assert_eq!(free.len(), 2);
    let total: usize = free.iter().map(|&g| m.opts[g].len()).product();
    let mut scratch = vec![0.0; m.channels];
    let (mut accepted, mut over) = (0, 0);
    for k in 0..total {
        let mut a = vec![0usize; m.groups.len()];
        let mut r = k;
        for &g in &free {
            a[g] = r % m.opts[g].len();
            r /= m.opts[g].len();
        }
        let solved = plan::Solved {
            eval: m.evaluate(&a, &mut scratch),
            assign: a.clone(),
            used: SolverKind::Heuristic,
            status: "heuristic",
            bound: 0.0,
            size: (0, 0),
            note: None,
            windows: m.windows.clone(),
            other: None,
            hit_time_limit: false,
        };
        let p = plan::file(&m, &po, j.identity(&j.opts), solved, Duration::ZERO);
        let fits = peak_reserved(&p).values().all(|&k| k <= 256);
        assert_eq!(
            fits,
            m.feasible(&a),
            "placement {a:?}: the planner's own view"
        );
        match j.lower(&p) {
            Ok(()) => {
                assert!(fits, "placement {a:?} over the pool was accepted");
                accepted += 1;
            }
            Err(e) => {
                assert!(!fits, "placement {a:?} fits but was refused: {e}");
                assert!(
                    e.contains("plan reservations: switch") && e.contains("--ina-slots 256"),
                    "{e}"
                );
                over += 1;
            }
        }
    }
    assert!(
        accepted > 0 && over > 0,
        "{accepted} accepted, {over} over the pool"
    );
    eprintln!("{total} placements: {accepted} lowered, {over} refused (over the pool)");
}

/// What a crafted plan does to a valid one.
#[derive(Clone, Debug)]
enum Craft {
    Root(usize, u32),
    EdgeParent(usize, usize, u32),
    EdgeChild(usize, usize, u32),
    Slots(usize, u32),
    Reservation(usize, u32, u32),
    Member(usize, u32),
    Window(usize, f64, Option<f64>),
    Class(usize, u8),
    Stage(usize, Option<u32>),
    Rina(usize, Vec<u32>),
    HostWithSlots(usize, u32),
    Drop(usize),
    Quota(Option<u32>),
}

fn craft() -> impl proptest::strategy::Strategy<Value = Craft> {
    use proptest::prelude::*;
    let node = prop_oneof![0u32..24, any::<u32>()];
    let slots = prop_oneof![Just(0u32), Just(u32::MAX), 1u32..1024, any::<u32>()];
    let time = prop_oneof![Just(0.0f64), Just(-1.0), Just(f64::MAX), 0.0f64..1e7];
    prop_oneof![
        (0usize..16, node.clone()).prop_map(|(g, n)| Craft::Root(g, n)),
        (0usize..16, 0usize..8, node.clone()).prop_map(|(g, e, n)| Craft::EdgeParent(g, e, n)),
        (0usize..16, 0usize..8, node.clone()).prop_map(|(g, e, n)| Craft::EdgeChild(g, e, n)),
        (0usize..16, slots.clone()).prop_map(|(g, k)| Craft::Slots(g, k)),
        (0usize..16, node.clone(), slots.clone()).prop_map(|(g, n, k)| Craft::Reservation(g, n, k)),
        (0usize..16, prop_oneof![0u32..16, any::<u32>()]).prop_map(|(g, r)| Craft::Member(g, r)),
        (0usize..16, time.clone(), proptest::option::of(time))
            .prop_map(|(g, a, b)| Craft::Window(g, a, b)),
        (0usize..16, 0u8..3).prop_map(|(g, c)| Craft::Class(g, c)),
        (0usize..16, proptest::option::of(0u32..4)).prop_map(|(g, s)| Craft::Stage(g, s)),
        (0usize..16, proptest::collection::vec(node, 0..3)).prop_map(|(g, t)| Craft::Rina(g, t)),
        (0usize..16, slots).prop_map(|(g, k)| Craft::HostWithSlots(g, k)),
        (0usize..16).prop_map(Craft::Drop),
        proptest::option::of(0u32..3).prop_map(Craft::Quota),
    ]
}

fn apply(p: &mut PlanFile, c: &Craft) {
    let n = p.groups.len();
    let g = |i: usize| i % n;
    match c {
        Craft::Root(i, v) => {
            if let Decision::Tree { root, .. } = &mut p.groups[g(*i)].decision {
                *root = NodeId(*v);
            }
        }
        Craft::EdgeParent(i, e, v) | Craft::EdgeChild(i, e, v) => {
            if let Decision::Tree { edges, .. } = &mut p.groups[g(*i)].decision {
                let k = *e % edges.len().max(1);
                if let Some(x) = edges.get_mut(k) {
                    if matches!(c, Craft::EdgeParent(..)) {
                        x.1 = NodeId(*v);
                    } else {
                        x.0 = NodeId(*v);
                    }
                }
            }
        }
        Craft::Slots(i, k) => {
            let grp = &mut p.groups[g(*i)];
            grp.slots = *k;
            for r in &mut grp.reservations {
                r.1 = *k;
            }
        }
        Craft::Reservation(i, v, k) => p.groups[g(*i)].reservations.push((NodeId(*v), *k)),
        Craft::Member(i, r) => {
            let m = &mut p.groups[g(*i)].members;
            m.push(Rank(*r));
            m.sort_unstable();
            m.dedup();
        }
        Craft::Window(i, a, b) => {
            p.groups[g(*i)].active = plan_json::Activity {
                from_ns: *a,
                until_ns: *b,
            }
        }
        Craft::Class(i, c) => {
            p.groups[g(*i)].class = [Class::Tp, Class::Dp, Class::Emb][*c as usize]
        }
        Craft::Stage(i, s) => p.groups[g(*i)].stage = *s,
        Craft::Rina(i, t) => {
            let grp = &mut p.groups[g(*i)];
            let tors: Vec<NodeId> = t.iter().map(|&v| NodeId(v)).collect();
            grp.reservations = tors.iter().map(|&t| (t, grp.slots.max(1))).collect();
            grp.slots = grp.slots.max(1);
            grp.decision = Decision::Rina { tors };
        }
        Craft::HostWithSlots(i, k) => {
            let grp = &mut p.groups[g(*i)];
            grp.decision = Decision::Host;
            grp.slots = *k;
        }
        Craft::Drop(i) => {
            p.groups.remove(g(*i));
        }
        Craft::Quota(q) => p.settings.tree_quota = *q,
    }
}

fn base_plan() -> &'static (Job, PlanFile) {
    static BASE: std::sync::OnceLock<(Job, PlanFile)> = std::sync::OnceLock::new();
    BASE.get_or_init(|| {
        // TP pairs and DP groups on the network of a 2-leaf leaf-spine, 256 slots
        let topo = Topology::from_spec("leaf-spine:leaves=2,spines=2,hosts-per-leaf=4,nvlink=off")
            .unwrap();
        let j = Job::new(bundled("tiny.toml"), topo, InaSwitches::All, 256);
        let p = j
            .plan(
                settings(
                    256,
                    Some(2),
                    &[1.0, 0.5],
                    &[Class::Tp, Class::Dp, Class::Emb],
                ),
                SolverKind::Heuristic,
                Objective::Exposed,
            )
            .unwrap();
        assert!(p
            .groups
            .iter()
            .any(|g| matches!(g.decision, Decision::Tree { .. })));
        (j, p)
    })
}

proptest::proptest! {
    /// A crafted plan — node ids beyond the topology, 0 or 2³²−1 slots, windows reversed
    /// or negative, foreign members, classes and stages, Rina on any node, groups dropped —
    /// written, read and lowered: the reader and the lowering never panic; a refusal names
    /// the file's place (`groups[i]`, `job.*` or `plan reservations`); what is lowered
    /// keeps every switch within its pool at every instant.
    #[test]
    fn crafted_plans_are_read_and_lowered_or_refused_by_name_never_panicking(
        crafts in proptest::collection::vec(craft(), 1..4)
    ) {
        let (j, base) = base_plan();
        let mut p = base.clone();
        for c in &crafts {
            apply(&mut p, c);
        }
        let text = serde_json::to_string_pretty(&p).unwrap();
        let path = std::path::Path::new("crafted/plan.json");
        match plan_json::parse(path, &text) {
            Err(e) => {
                let e = e.to_string();
                proptest::prop_assert!(e.contains("crafted/plan.json"), "{e}");
            }
            Ok(read) => match j.lower(&read) {
                Ok(()) => {
                    for (s, k) in peak_reserved(&read) {
                        proptest::prop_assert!(k <= 256, "switch {s}: {k} slots lowered ({crafts:?})");
                    }
                }
                Err(e) => proptest::prop_assert!(
                    e.contains("groups[") || e.contains("job.") || e.contains("plan reservations") || e.contains("plan groups"),
                    "{e}"
                ),
            },
        }
    }
}
