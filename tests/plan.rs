//! The planner: its cost model against hand formulas, the exact solver against brute force
//! on hand-solvable instances, the heuristic against the exact solver, infeasible settings,
//! and the lowered plans replayed against the ring and the fixed INA policies.

use ina3d::formats::plan_json::{Decision, PlanFile};
use ina3d::megatron::{self, TrainingConfig};
use ina3d::plan::model::{Model, Settings};
use ina3d::plan::options::{Form, OptKind};
use ina3d::plan::{self, Objective, PlanError, PlanOptions, SolverKind};
use ina3d::record::{AggGroup, Class};
use ina3d::replay::{self, RateModel, ReplayOptions};
use ina3d::schedule::{self, Workload};
use ina3d::topology::{NodeKind, Routing, Topology};
use ina3d::trace::{self, InaMode, InaPolicy, InaSwitches, TraceOptions};
use ina3d::units::NodeId;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// A small GPT (4 layers, h=1024, 16 heads, s=512) with the given parallel sizes.
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

struct Job {
    cfg: TrainingConfig,
    wl: Workload,
    topo: Topology,
    opts: TraceOptions,
}

fn job(cfg: TrainingConfig, spec: &str, switches: InaSwitches, slots: u32) -> Job {
    let topo = Topology::from_spec(spec).unwrap();
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

/// [`job`] with the flat compute model (every FLOP at peak · MFU). The planner's
/// predictions on these small jobs were measured under it; under the roofline default
/// (docs/compute.md) the ratio of compute to communication of such tiny shapes moves and
/// the model alone misses some of them by 26–39 % (CP2 tiny: −26 %; PP2 with TP on the
/// network: +31 %), which the planner's own issue re-measures.
fn job_flat(cfg: TrainingConfig, spec: &str, switches: InaSwitches, slots: u32) -> Job {
    flat(job(cfg, spec, switches, slots))
}

/// `j` under the flat compute model ([`job_flat`]).
fn flat(mut j: Job) -> Job {
    j.opts.schedule.compute = schedule::ComputeModel::Mfu;
    j.wl = schedule::build(&j.cfg, &j.opts.schedule).unwrap();
    j
}

fn example(spec: &str, slots: u32) -> Job {
    let cfg = megatron::load_input(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/traces/example/megatron.log"
    ))
    .unwrap();
    job(cfg, spec, InaSwitches::All, slots)
}

fn tiny(spec: &str, slots: u32) -> Job {
    let cfg = megatron::load_input(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/traces/example/tiny.toml"
    ))
    .unwrap();
    job(cfg, spec, InaSwitches::All, slots)
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

fn options(st: Settings, solver: SolverKind) -> PlanOptions {
    PlanOptions {
        settings: st,
        objective: Objective::Iteration,
        solver,
        time_limit: Duration::from_secs(20),
        work: plan::Work::default(),
        auto_max_variables: 2000,
        replay_rounds: 0,
        fixed_policies: true,
    }
}

fn model(j: &Job, st: &Settings) -> Model {
    plan::build_model(&j.wl, &j.topo, &j.opts, st).unwrap()
}

fn make_plan(j: &Job, po: &PlanOptions) -> PlanFile {
    let h = trace::header(&j.cfg, &j.wl, &j.topo, &j.opts);
    plan::plan(
        &j.wl,
        &j.topo,
        &j.opts,
        po,
        trace::planned::plan_job(&h),
        None,
    )
    .unwrap()
}

/// Every assignment of the groups that have a choice, evaluated by the model: the best
/// feasible iteration time (brute force, independent of both solvers).
fn brute_force(m: &Model) -> (f64, Vec<usize>) {
    let free: Vec<usize> = (0..m.groups.len())
        .filter(|&g| m.opts[g].len() > 1)
        .collect();
    let total: usize = free.iter().map(|&g| m.opts[g].len()).product();
    assert!(
        total <= 200_000,
        "instance too large to enumerate ({total})"
    );
    let mut a = vec![0usize; m.groups.len()];
    let mut scratch = vec![0.0; m.channels];
    let mut best = (f64::INFINITY, a.clone());
    for mut k in 0..total {
        for &g in &free {
            a[g] = k % m.opts[g].len();
            k /= m.opts[g].len();
        }
        let e = m.evaluate(&a, &mut scratch);
        if e.feasible && e.t < best.0 {
            best = (e.t, a.clone());
        }
    }
    best
}

/// Switches by layer (1 = leaf/ToR) of a topology.
fn layer(topo: &Topology, l: u16) -> Vec<NodeId> {
    let r = Routing::new(topo, 0).unwrap();
    (0..topo.node_count() as u32)
        .map(NodeId)
        .filter(|&v| topo.kinds[v.idx()] == NodeKind::Switch && r.level(v) == Some(l))
        .collect()
}

/// The DP group of `m` and its hierarchical tree option rooted at `spine`.
fn dp_tree_at(m: &Model, spine: NodeId) -> (usize, &ina3d::plan::options::Opt) {
    let g = m.groups.iter().position(|g| g.class == Class::Dp).unwrap();
    let o = m.opts[g]
        .iter()
        .find(|o| matches!(&o.kind, OptKind::Tree { form: Form::Hierarchical, root, .. } if *root == spine))
        .expect("a hierarchical tree at the spine");
    (g, o)
}

/// Two DP groups of four GPUs over two leaves (TP pairs on the network, no NVLink), INA
/// on both leaves and on ONE spine: their only root candidate is that spine, and with a
/// tree quota of 1 (or slots for one window) only one of them can aggregate.
fn two_groups_one_spine() -> (Job, NodeId) {
    let spec = "leaf-spine:leaves=2,spines=2,hosts-per-leaf=4,nvlink=off";
    let topo = Topology::from_spec(spec).unwrap();
    let mut ids = layer(&topo, 1);
    let spine = layer(&topo, 2)[0];
    ids.push(spine);
    (
        job(small(2, 1, 4, 16), spec, InaSwitches::Ids(ids), 8192),
        spine,
    )
}

#[test]
fn an_ina_tree_takes_its_wire_bytes_at_line_rate_plus_one_round_trip() {
    let (j, spine) = two_groups_one_spine();
    let m = model(&j, &settings(8192, None, &[1.0], &[Class::Dp]));
    let (g, o) = dp_tree_at(&m, spine);
    let coll = m.groups[g].colls()[0];
    // GPU → leaf → spine and back: 4 link delays; the NIC (100 Gb/s = 12.5 B/ns) is the
    // bottleneck and a 256-slot window of 256 B over that round trip is faster than it.
    let delay = j.topo.links[0].delay.0 as f64;
    let rtt = 4.0 * delay;
    assert!(
        256.0 * 256.0 / rtt > 12.5,
        "window must not bind in this instance"
    );
    let s = coll.bytes.0 as f64;
    let wire = s + (s / 256.0).ceil() * 48.0;
    let hand = (wire / 12.5).ceil() + rtt;
    assert_eq!(o.times[0], hand);
    // the host ring of 4 over the topology's 2 NCCL channels (one NIC port): each
    // channel's ring takes 6 steps of its half's quarter, S/8 (1,000 B packets), the two
    // channels' flows sharing each NIC (6.25 B/ns each)
    let h = &m.opts[g][0];
    assert!(matches!(
        h.kind,
        OptKind::Host(ina3d::trace::Algorithm::Ring)
    ));
    assert_eq!(trace::default_channels(&j.topo), 2);
    let chunk = ((s / 2.0).ceil() / 4.0).ceil();
    let step = ((chunk + (chunk / 1000.0).ceil() * 48.0) / 6.25).ceil();
    // a step crosses GPU → leaf (→ spine → leaf) → GPU: the longest path has 4 links
    assert_eq!(h.times[0], 6.0 * (step + 4.0 * delay));
}

#[test]
fn a_window_bound_tree_takes_whole_rounds_of_propagation_plus_one_store_and_forward_per_hop() {
    let (j, spine) = two_groups_one_spine();
    // a reservation of 1/64 of the 256-slot window: 4 slots
    let m = model(&j, &settings(8192, None, &[1.0 / 64.0], &[Class::Dp]));
    let (g, o) = dp_tree_at(&m, spine);
    let coll = m.groups[g].colls()[0];
    // GPU → leaf → spine and back; a 304-byte packet (256 payload + 48) is received whole
    // at every hop before it goes on: each edge adds its propagation and 304 B over its
    // link's rate (rounded up to the ns per edge)
    let link = |f: &dyn Fn(&ina3d::topology::Link) -> bool| {
        let l = j.topo.links.iter().find(|l| f(l)).unwrap();
        (l.delay.0 as f64, l.rate.0 as f64 / 8e9)
    };
    let host = |n: NodeId| j.topo.kinds[n.idx()] == NodeKind::Host;
    let (d_host, r_host) = link(&|l| host(l.a) || host(l.b));
    let (d_up, r_up) = link(&|l| l.a == spine || l.b == spine);
    let rtt = 2.0 * (d_host + (304.0 / r_host).ceil()) + 2.0 * (d_up + (304.0 / r_up).ceil());
    assert!(
        4.0 * 304.0 / rtt < r_host.min(r_up),
        "the window must bind in this instance"
    );
    // 4 packets a round trip; the last result is back at the end of the last round
    let packets = (coll.bytes.0 as f64 / 256.0).ceil();
    let hand = (packets / 4.0).ceil() * rtt;
    assert_eq!(o.times[0], hand);
}

#[test]
fn with_one_tree_per_switch_exactly_one_of_two_dp_groups_aggregates_and_the_exact_solver_finds_the_brute_force_optimum(
) {
    let (j, spine) = two_groups_one_spine();
    for (quota, slots) in [(Some(1), 8192), (None, 256)] {
        let st = settings(slots, quota, &[1.0], &[Class::Dp]);
        let m = model(&j, &st);
        // By hand: the two DP groups are alike, so a tree for one of them shortens the
        // iteration only by what the other gains from having the links to itself (the
        // iteration optimum is within 0.1 % of both on their best host algorithm: alone,
        // halving-doubling is 12 µs faster than the ring on 37.3 ms, replayed), but it
        // removes that group's exposed time: minimising exposed communication, exactly
        // one of them aggregates, at the spine.
        let (best, _) = brute_force(&m);
        let p = make_plan(&j, &options(st.clone(), SolverKind::Ilp));
        assert_eq!(
            (p.solver.used.as_str(), p.solver.status.as_str()),
            ("ilp", "optimal")
        );
        assert!(
            (p.prediction.iteration_ns - best).abs() <= 1e-6 * best,
            "{} vs {best}",
            p.prediction.iteration_ns
        );
        assert!(best <= p.prediction.host_iteration_ns * (1.0 + 1e-6));
        // the best plan with every group on a host algorithm (every combination)
        let best_host = {
            let mut scratch = vec![0.0; m.channels];
            let hosts: Vec<Vec<usize>> = m
                .opts
                .iter()
                .map(|o| {
                    (0..o.len())
                        .filter(|&i| matches!(o[i].kind, OptKind::Host(_) | OptKind::NvLink))
                        .collect()
                })
                .collect();
            let total: usize = hosts.iter().map(Vec::len).product();
            (0..total)
                .map(|mut k| {
                    let a: Vec<usize> = hosts
                        .iter()
                        .map(|h| {
                            let o = h[k % h.len()];
                            k /= h.len();
                            o
                        })
                        .collect();
                    m.evaluate(&a, &mut scratch).t
                })
                .fold(f64::INFINITY, f64::min)
        };
        assert!(
            best <= best_host * (1.0 + 1e-9) && best >= 0.999 * best_host,
            "{best} vs {best_host}"
        );
        assert_eq!(p.solver.gap, 0.0);
        let mut po = options(st.clone(), SolverKind::Ilp);
        po.objective = Objective::Exposed;
        let p = make_plan(&j, &po);
        assert_eq!(p.solver.status, "optimal");
        let trees: Vec<_> = p
            .groups
            .iter()
            .filter(|g| g.class == Class::Dp)
            .filter_map(|g| match &g.decision {
                Decision::Tree { root, .. } => Some(*root),
                _ => None,
            })
            .collect();
        assert_eq!(
            trees,
            vec![spine],
            "quota {quota:?}, slots {slots}: one tree, at the spine"
        );
        let dp: Vec<_> = p.groups.iter().filter(|g| g.class == Class::Dp).collect();
        let saving: f64 = dp
            .iter()
            .map(|g| g.host_collective_ns - g.collective_ns)
            .sum();
        let exposed_host: f64 = m
            .groups
            .iter()
            .enumerate()
            .map(|(g, grp)| m.vals[g][ina3d::plan::model::host_index(&m.opts[g], grp)].exposed)
            .sum();
        // one bucket per group: its exposed time drops by exactly the collective's saving
        assert!(saving > 0.0);
        assert!((p.prediction.exposed_ns - (exposed_host - saving)).abs() <= 1e-6 * exposed_host);
    }
}

#[test]
fn the_exact_solver_matches_brute_force_on_the_tiny_job_without_nvlink() {
    // TP pairs, DP pairs and embedding pairs all on the network of a k=4 fat-tree
    let j = tiny("fat-tree:k=4,nvlink=off", 512);
    let st = settings(512, Some(1), &[1.0], &[Class::Dp]);
    let m = model(&j, &st);
    let (best, _) = brute_force(&m);
    let p = make_plan(&j, &options(st, SolverKind::Ilp));
    assert_eq!(p.solver.status, "optimal");
    assert!((p.prediction.iteration_ns - best).abs() <= 1e-6 * best);
}

#[test]
fn the_heuristic_is_within_five_percent_of_the_exact_optimum_on_small_instances_and_replays_within_two(
) {
    let (two, _) = two_groups_one_spine();
    let cases: Vec<(&str, Job, Settings)> = vec![
        (
            "two groups, one spine",
            two,
            settings(8192, Some(1), &[1.0, 0.5], &[Class::Dp]),
        ),
        (
            "example",
            example("fat-tree:k=4,gpus-per-server=2", 8192),
            settings(
                8192,
                None,
                &[1.0, 0.5, 0.25],
                &[Class::Tp, Class::Dp, Class::Emb],
            ),
        ),
        (
            "example, 256 slots",
            example("fat-tree:k=4,gpus-per-server=2", 256),
            settings(256, None, &[1.0, 0.5, 0.25], &[Class::Dp, Class::Emb]),
        ),
        (
            "example, quota 1",
            example("fat-tree:k=4,gpus-per-server=2", 8192),
            settings(8192, Some(1), &[1.0], &[Class::Dp, Class::Emb]),
        ),
        (
            "tiny, no nvlink",
            tiny("fat-tree:k=4,nvlink=off", 8192),
            settings(8192, None, &[1.0, 0.5], &[Class::Tp, Class::Dp, Class::Emb]),
        ),
        (
            "tiny, leaf-spine 3:1",
            tiny(
                "leaf-spine:leaves=4,spines=2,hosts-per-leaf=2,oversub=2,nvlink=off",
                1024,
            ),
            settings(
                1024,
                Some(2),
                &[1.0, 0.5],
                &[Class::Tp, Class::Dp, Class::Emb],
            ),
        ),
    ];
    for (name, j, st) in cases {
        // repaired by replay (as `ina3d plan` runs them): the heuristic's plan replays
        // within 2 % of the exact solver's
        // the exact solver gets a generous node budget: the test checks optimality, and the
        // example at 256 slots needs more than the default 2,000 nodes to close
        let closing = plan::Work {
            nodes: 10_000_000,
            ..plan::Work::default()
        };
        let exact = PlanOptions {
            time_limit: Duration::from_secs(600),
            work: closing,
            ..options(st.clone(), SolverKind::Ilp)
        };
        let hr = repaired_plan(&j, &options(st.clone(), SolverKind::Heuristic));
        let xr = repaired_plan(&j, &exact);
        let (hv, xv) = (hr.verification.unwrap(), xr.verification.unwrap());
        assert!(
            hv.replayed_ns <= 1.02 * xv.replayed_ns,
            "{name}: the heuristic's plan replays {} against the exact plan's {}",
            hv.replayed_ns,
            xv.replayed_ns
        );
        let h = make_plan(&j, &options(st.clone(), SolverKind::Heuristic));
        // The exact solver gets a generous limit: these instances close in well under a
        // second on an idle machine, and a busy shared one must not turn that into a
        // "time-limit" status (the test checks optimality, not speed).
        let x = make_plan(
            &j,
            &PlanOptions {
                time_limit: Duration::from_secs(600),
                work: closing,
                ..options(st, SolverKind::Ilp)
            },
        );
        assert_eq!(
            x.solver.status, "optimal",
            "{name}: the exact solver must close this instance"
        );
        let (ht, xt) = (h.prediction.iteration_ns, x.prediction.iteration_ns);
        assert!(
            xt <= ht * (1.0 + 1e-9),
            "{name}: exact {xt} worse than heuristic {ht}"
        );
        assert!(
            ht <= 1.05 * xt,
            "{name}: heuristic {ht} more than 5 % above the optimum {xt}"
        );
        assert!(
            h.solver.bound_ns <= xt * (1.0 + 1e-9),
            "{name}: the heuristic's bound {} exceeds the optimum {xt}",
            h.solver.bound_ns
        );
    }
}

#[test]
fn infeasible_settings_name_the_constraint_and_the_group() {
    let (j, _) = two_groups_one_spine();
    let mut st = settings(8192, Some(0), &[1.0], &[Class::Dp]);
    st.required = vec![Class::Dp];
    let h = trace::header(&j.cfg, &j.wl, &j.topo, &j.opts);
    let run = |st: Settings| {
        plan::plan(
            &j.wl,
            &j.topo,
            &j.opts,
            &options(st, SolverKind::Auto),
            trace::planned::plan_job(&h),
            None,
        )
    };
    let e = run(st.clone()).unwrap_err().to_string();
    assert!(
        e.contains("tree quota 0") && e.contains("dp group of ranks 0,2,4,6"),
        "{e}"
    );
    st.quota = None;
    st.slots = 100; // a window is 256 slots
    let e = run(st.clone()).unwrap_err().to_string();
    assert!(
        e.contains("fewer slots") && e.contains("256") && e.contains("dp group of ranks 0,2,4,6"),
        "{e}"
    );
    // two groups that must aggregate at the one spine (trees only: Rina would fit one of
    // them on the leaves), room for one
    st.slots = 256;
    st.rina = false;
    let e = run(st.clone()).unwrap_err();
    assert!(matches!(e, PlanError::Infeasible(_)), "{e}");
    // ToR-only INA and groups spanning two leaves: no switch above them
    let tor = job(
        small(2, 1, 4, 16),
        "leaf-spine:leaves=2,spines=2,hosts-per-leaf=4,nvlink=off",
        InaSwitches::Tor,
        8192,
    );
    let h = trace::header(&tor.cfg, &tor.wl, &tor.topo, &tor.opts);
    let mut st = settings(8192, None, &[1.0], &[Class::Dp]);
    st.required = vec![Class::Dp];
    st.rina = false;
    let e = plan::plan(
        &tor.wl,
        &tor.topo,
        &tor.opts,
        &options(st, SolverKind::Auto),
        trace::planned::plan_job(&h),
        None,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("no aggregating switch") && e.contains("dp group of ranks 0,2,4,6"),
        "{e}"
    );
}

/// Replay a trace of `opts` for the job; iteration time (ns).
fn replayed(j: &Job, opts: &TraceOptions) -> f64 {
    replayed_under(j, opts, RateModel::default())
}

/// [`replayed`] under the rate model `model`.
fn replayed_under(j: &Job, opts: &TraceOptions, model: RateModel) -> f64 {
    let h = trace::header(&j.cfg, &j.wl, &j.topo, opts);
    let mut recs = Vec::new();
    trace::generate_workload(&j.wl, &j.topo, opts, &mut |r| {
        recs.push(r);
        Ok(())
    })
    .unwrap();
    let routing = Routing::new(&j.topo, opts.seed).unwrap();
    let ro = ReplayOptions {
        rate_model: model,
        ..ReplayOptions::from_header(&h).unwrap()
    };
    let r = replay::simulate(&recs, &j.topo, &routing, &ro).unwrap();
    r.summary.iteration_time_ns as f64
}

/// The job's trace options lowering the plan of assignment `a` (one option per group of
/// `m`), as `ina3d trace --plan` would.
fn assigned(j: &Job, m: &Model, po: &PlanOptions, a: &[usize]) -> TraceOptions {
    let h = trace::header(&j.cfg, &j.wl, &j.topo, &j.opts);
    let mut o = j.opts.clone();
    o.plan = Some(plan::assignment_file(
        m,
        po,
        trace::planned::plan_job(&h),
        a,
    ));
    o
}

/// The job's options with INA off: the ring every plan is measured against.
fn ring_options(j: &Job) -> TraceOptions {
    let mut ring = j.opts.clone();
    ring.ina.mode = InaMode::Off;
    ring.ina.policy = Some(InaPolicy::Static);
    ring
}

/// `j` planned (no repair) with `po`: the plan's replayed iteration, its prediction
/// error against that replay, and the ring's replayed iteration.
fn plan_against_ring(j: &Job, po: &PlanOptions) -> (f64, f64, f64) {
    let p = make_plan(j, po);
    let mut planned = j.opts.clone();
    planned.plan = Some(p.clone());
    let t = replayed(j, &planned);
    let err = (p.prediction.iteration_ns - t).abs() / t;
    (t, err, replayed(j, &ring_options(j)))
}

#[test]
fn a_replayed_plan_beats_the_ring_and_every_fixed_ina_policy_on_the_same_slots_within_its_prediction_error(
) {
    let cases = [
        example("fat-tree:k=4,gpus-per-server=2", 8192),
        tiny("fat-tree:k=4,nvlink=off", 8192),
        tiny(
            "leaf-spine:leaves=4,spines=2,hosts-per-leaf=2,oversub=2,nvlink=off",
            8192,
        ),
    ];
    for j in cases {
        let st = settings(
            j.opts.ina.slots,
            None,
            &[1.0, 0.5, 0.25],
            &[Class::Tp, Class::Dp, Class::Emb],
        );
        let (t, err, tr) = plan_against_ring(&j, &options(st, SolverKind::Auto));
        let name = &j.topo.source;
        // a plan is a prediction: it may lose to a configuration it can express by at
        // most its own measured error
        assert!(
            t <= tr * (1.0 + err),
            "{name}: plan {t} vs ring {tr} (error {err})"
        );
        let mut fixed = BTreeMap::new();
        for (mode, policy) in [
            (InaMode::Hierarchical, InaPolicy::Static),
            (InaMode::SwitchMl, InaPolicy::Static),
            (InaMode::Atp, InaPolicy::BestEffort),
            (InaMode::Rina, InaPolicy::Static),
        ] {
            for classes in [
                vec![Class::Dp],
                vec![Class::Tp, Class::Dp],
                vec![Class::Tp, Class::Dp, Class::Emb],
            ] {
                let mut o = j.opts.clone();
                o.ina.mode = mode;
                o.ina.policy = Some(policy);
                o.ina.classes = classes.clone();
                let tf = replayed(&j, &o);
                fixed.insert(format!("{mode}/{policy}/{classes:?}"), tf);
                assert!(t <= tf * (1.0 + err), "{name}: plan {t} slower than {mode} {policy} {classes:?} at {tf} (error {err})");
            }
        }
    }
}

#[test]
fn a_plan_for_another_seed_or_topology_is_refused_naming_what_differs() {
    let j = example("fat-tree:k=4,gpus-per-server=2", 8192);
    let p = make_plan(
        &j,
        &options(
            settings(8192, None, &[1.0], &[Class::Dp]),
            SolverKind::Heuristic,
        ),
    );
    let mut other = j.opts.clone();
    other.seed = 3;
    let e = trace::planned::check_plan_job(&p, &trace::header(&j.cfg, &j.wl, &j.topo, &other))
        .unwrap_err()
        .to_string();
    assert!(e.contains("seed: plan `0`, this trace `3`"), "{e}");
    let k8 = example("fat-tree:k=8,gpus-per-server=2", 8192);
    let e = trace::planned::check_plan_job(&p, &trace::header(&k8.cfg, &k8.wl, &k8.topo, &k8.opts))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("topology_hash: plan `")
            && e.contains("made on `fat-tree:k=4,gpus-per-server=2`"),
        "{e}"
    );
    // the same job lowers, and a tampered tree is refused naming the group
    trace::planned::check_plan_job(&p, &trace::header(&j.cfg, &j.wl, &j.topo, &j.opts)).unwrap();
    let mut bad = p.clone();
    let g = bad
        .groups
        .iter_mut()
        .find(|g| matches!(g.decision, Decision::Tree { .. }))
        .expect("a tree");
    if let Decision::Tree { edges, .. } = &mut g.decision {
        edges.remove(0);
    }
    let mut o = j.opts.clone();
    o.plan = Some(bad);
    let e = trace::generate_workload(&j.wl, &j.topo, &o, &mut |_| Ok(()))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("plan groups[")
            && e.contains("dp group of ranks")
            && e.contains("sends to no switch"),
        "{e}"
    );
}

#[test]
fn planning_is_deterministic() {
    let j = example("fat-tree:k=4,gpus-per-server=2", 8192);
    let po = options(
        settings(8192, None, &[1.0, 0.5], &[Class::Dp, Class::Emb]),
        SolverKind::Heuristic,
    );
    let strip = |mut p: PlanFile| {
        p.solver.solve_time_s = 0.0;
        p
    };
    assert_eq!(strip(make_plan(&j, &po)), strip(make_plan(&j, &po)));
}

/// The planner with its repair loop: the plan replayed as `ina3d plan` replays it.
fn repaired_plan(j: &Job, po: &PlanOptions) -> PlanFile {
    repaired_plan_under(j, po, RateModel::default())
}

/// [`repaired_plan`] with its candidates replayed under `model`.
fn repaired_plan_under(j: &Job, po: &PlanOptions, model: RateModel) -> PlanFile {
    let pj = ina3d::pipeline::Job {
        cfg: j.cfg.clone(),
        topology: j.topo.clone(),
        workload: j.wl.clone(),
        warnings: vec![],
    };
    let rp = ina3d::pipeline::PlanReplayer {
        job: &pj,
        opts: &j.opts,
        model,
    };
    let h = trace::header(&j.cfg, &j.wl, &j.topo, &j.opts);
    // a limit these small jobs' search and repair rounds never reach, even on a loaded
    // machine and with the DCQCN replays of an unoptimised test build (tens of seconds
    // each): what is asserted of the plan must not depend on the load
    let po = PlanOptions {
        replay_rounds: 3,
        time_limit: po.time_limit.max(Duration::from_secs(600)),
        ..po.clone()
    };
    plan::plan(
        &j.wl,
        &j.topo,
        &j.opts,
        &po,
        trace::planned::plan_job(&h),
        Some(&rp),
    )
    .unwrap()
}

/// Every feasible placement of the groups that have a choice, lowered and replayed under
/// `rm`: the replayed iteration time of each (brute force, independent of the model
/// and solvers).
fn replay_every_placement(j: &Job, po: &PlanOptions, rm: RateModel) -> Vec<(Vec<usize>, f64)> {
    let m = model(j, &po.settings);
    let free: Vec<usize> = (0..m.groups.len())
        .filter(|&g| m.opts[g].len() > 1)
        .collect();
    let total: usize = free.iter().map(|&g| m.opts[g].len()).product();
    assert!(
        total <= 256,
        "instance too large to replay every placement ({total})"
    );
    let mut out = Vec::new();
    let mut a = vec![0usize; m.groups.len()];
    for mut k in 0..total {
        for &g in &free {
            a[g] = k % m.opts[g].len();
            k /= m.opts[g].len();
        }
        if !m.feasible(&a) {
            continue;
        }
        out.push((a.clone(), replayed_under(j, &assigned(j, &m, po, &a), rm)));
    }
    out
}

#[test]
fn on_small_instances_the_exact_plan_is_the_best_replayed_placement_and_the_heuristic_within_two_percent(
) {
    // two DP groups over two leaves and one aggregating spine (PP 1); a pipeline of two
    // stages with TP on the network, its DP groups (then its TP groups) to place
    let (one_spine, _) = two_groups_one_spine();
    let pipe = || {
        job_flat(
            small(2, 2, 2, 8),
            "leaf-spine:leaves=2,spines=2,hosts-per-leaf=4,nvlink=off",
            InaSwitches::All,
            8192,
        )
    };
    for (name, j, classes) in [
        ("DP, one spine", one_spine, vec![Class::Dp]),
        ("DP, PP2 + TP on the network", pipe(), vec![Class::Dp]),
        ("TP on the network, PP2", pipe(), vec![Class::Tp]),
    ] {
        // The exact solver's optimum is the optimum of the model, whose rates are max-min
        // fair: it is judged against replays under the ideal rate model. Under DCQCN
        // (the RoCE default) placements within ~1 % of each other can swap order (PP2 + TP
        // on the network: the exact plan 36.33 ms, the best placement 35.94 ms), which the
        // repair loop does not search for.
        let m = RateModel::Ideal;
        let st = settings(8192, None, &[1.0], &classes);
        let brute = replay_every_placement(&j, &options(st.clone(), SolverKind::Ilp), m);
        let best = brute.iter().map(|b| b.1).fold(f64::INFINITY, f64::min);
        let exact = repaired_plan_under(&j, &options(st.clone(), SolverKind::Ilp), m);
        let heur = repaired_plan_under(&j, &options(st.clone(), SolverKind::Heuristic), m);
        let (ve, vh) = (
            exact.verification.clone().unwrap(),
            heur.verification.clone().unwrap(),
        );
        assert!(
            ve.replayed_ns <= best * (1.0 + 1e-9),
            "{name}: the exact plan replays {} but the best of {} placements {best}",
            ve.replayed_ns,
            brute.len()
        );
        assert!(
            vh.replayed_ns <= ve.replayed_ns * 1.02,
            "{name}: heuristic {} vs exact {}",
            vh.replayed_ns,
            ve.replayed_ns
        );
        for (solver, v) in [("exact", &ve), ("heuristic", &vh)] {
            assert!(
                v.error.abs() <= 0.05,
                "{name}: {solver} plan predicted {:+.2} % off its replay",
                100.0 * v.error
            );
        }
    }
}

#[test]
fn predictions_of_pipelined_jobs_and_tp_on_the_network_are_within_five_percent_of_the_replay() {
    // the 2:1 leaf-spine: the host TP rings' contention stretches the all-host replay's
    // pipeline, which trees shed (Model::tp_scale; +7.75 % before it)
    for j in [
        flat(tiny("fat-tree:k=4,nvlink=off", 8192)),
        flat(tiny(
            "leaf-spine:leaves=4,spines=2,hosts-per-leaf=2,oversub=2,nvlink=off",
            8192,
        )),
        job_flat(
            small(2, 2, 2, 8),
            "leaf-spine:leaves=2,spines=2,hosts-per-leaf=4,nvlink=off",
            InaSwitches::All,
            8192,
        ),
        job_flat(
            small(2, 4, 2, 16),
            "fat-tree:k=4,gpus-per-server=2",
            InaSwitches::All,
            8192,
        ),
    ] {
        let st = settings(
            8192,
            None,
            &[1.0, 0.5, 0.25],
            &[Class::Tp, Class::Dp, Class::Emb],
        );
        let p = repaired_plan(&j, &options(st, SolverKind::Auto));
        let v = p.verification.unwrap();
        assert!(
            v.error.abs() <= 0.05,
            "{}: predicted {} replayed {} ({:+.2} %)",
            j.topo.source,
            p.prediction.iteration_ns,
            v.replayed_ns,
            100.0 * v.error
        );
        // and never slower than the all-host plan it was repaired against
        assert!(v.replayed_ns <= v.host_replayed_ns, "{}", j.topo.source);
    }
}

#[test]
fn context_parallel_and_moe_jobs_are_planned_with_their_attention_and_all_to_all_traffic_priced() {
    let cp = {
        let mut c = megatron::load_input(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/traces/example/tiny.toml"
        ))
        .unwrap();
        c.set("context_parallel_size", "2").unwrap();
        c.set("data_parallel_size", "1").unwrap();
        c.set("global_batch_size", "4").unwrap();
        job_flat(c, "fat-tree:k=4,nvlink=off", InaSwitches::All, 8192)
    };
    let moe = {
        let mut c = megatron::preset("mixtral-8x7b").unwrap();
        for (k, v) in [
            ("num_layers", "2"),
            ("seq_length", "256"),
            ("tensor_model_parallel_size", "1"),
            ("pipeline_model_parallel_size", "2"),
            ("expert_model_parallel_size", "4"),
            ("data_parallel_size", "8"),
            ("global_batch_size", "16"),
        ] {
            c.set(k, v).unwrap();
        }
        job_flat(c, "fat-tree:k=4,nvlink=off", InaSwitches::All, 8192)
    };
    for (name, j) in [("CP2", cp), ("MoE EP4", moe)] {
        let st = settings(8192, None, &[1.0, 0.5], &[Class::Tp, Class::Dp, Class::Emb]);
        // the model's rates are max-min fair: its prediction is checked against the
        // replay under the ideal model (under DCQCN the MoE job's all-to-all incast
        // replays 7.1 % slower than predicted: docs/plan.md#measured)
        let p = repaired_plan_under(&j, &options(st, SolverKind::Auto), RateModel::Ideal);
        let v = p.verification.clone().unwrap();
        assert!(
            v.error.abs() <= 0.05,
            "{name}: predicted {} replayed {} ({:+.2} %)",
            p.prediction.iteration_ns,
            v.replayed_ns,
            100.0 * v.error
        );
        assert!(v.replayed_ns <= v.host_replayed_ns, "{name}");
        assert!(
            p.groups.iter().any(|g| g.decision != Decision::Host),
            "{name}: some group aggregates"
        );
    }
}

#[test]
fn every_host_algorithms_all_host_plan_is_predicted_within_five_percent_of_its_replay() {
    // Two DP groups of eight (TP pairs inside 4-GPU servers, so two members per server)
    // on a k=4 fat-tree: ring, double binary tree, halving-doubling and the hierarchical
    // algorithm all lower differently, and the two groups' flows meet on the fabric.
    // Priced alone on the wave rule, the double binary tree was predicted 10.95 % short
    // of its replay (the hierarchical algorithm 3.10 %).
    let j = job(
        small(2, 1, 8, 32),
        "fat-tree:k=4,gpus-per-server=4",
        InaSwitches::All,
        8192,
    );
    let st = settings(8192, None, &[1.0], &[]);
    let m = model(&j, &st);
    let po = options(st, SolverKind::Heuristic);
    let mut scratch = vec![0.0; m.channels];
    use ina3d::trace::Algorithm;
    for algo in Algorithm::ALL {
        // every group on `algo` where it is offered, the ring elsewhere
        let mut on = 0;
        let a: Vec<usize> = (0..m.groups.len())
            .map(
                |g| match m.opts[g].iter().position(|o| o.kind == OptKind::Host(algo)) {
                    Some(o) => {
                        on += (m.groups[g].class == Class::Dp) as usize;
                        o
                    }
                    None => ina3d::plan::model::host_index(&m.opts[g], &m.groups[g]),
                },
            )
            .collect();
        assert_eq!(on, 2, "{algo}: offered to both DP groups");
        let predicted = m.evaluate(&a, &mut scratch).t;
        let replayed = replayed_under(&j, &assigned(&j, &m, &po, &a), RateModel::Ideal);
        let err = (predicted - replayed) / replayed;
        assert!(
            err.abs() <= 0.05,
            "{algo}: predicted {predicted} replayed {replayed} ({:+.2} %)",
            100.0 * err
        );
    }
}

#[test]
fn the_host_option_is_the_best_host_algorithm_and_replays_no_slower_than_the_ring() {
    // DP groups of 8 single-GPU hosts: ring, double binary tree and halving-doubling all
    // lower differently
    let j = job(
        small(1, 1, 8, 16),
        "fat-tree:k=4,nvlink=off",
        InaSwitches::All,
        8192,
    );
    let st = settings(8192, None, &[1.0], &[]);
    let m = model(&j, &st);
    let dp = m.groups.iter().position(|g| g.class == Class::Dp).unwrap();
    let algos: Vec<_> = m.opts[dp]
        .iter()
        .filter_map(|o| match o.kind {
            OptKind::Host(a) => Some(a),
            _ => None,
        })
        .collect();
    use ina3d::trace::Algorithm::*;
    assert_eq!(algos, vec![Ring, Dbt, Hd]);
    let p = repaired_plan(&j, &options(st, SolverKind::Auto));
    let v = p.verification.unwrap();
    assert!(v.replayed_ns <= replayed(&j, &ring_options(&j)) * (1.0 + 1e-9));
}

#[test]
fn on_a_torus_the_planner_prices_shortest_path_and_steiner_trees_under_the_best_roots_and_its_plan_replays_within_its_error(
) {
    // no switch layer sits above a DP group of a torus: the candidates come from
    // Routing::candidate_trees (docs/plan.md#candidate-trees-on-general-graphs)
    let j = job(small(1, 2, 8, 16), "torus:dims=4x4", InaSwitches::All, 8192);
    let mut st = settings(8192, None, &[1.0], &[Class::Dp, Class::Emb]);
    st.forms = vec![Form::Hierarchical, Form::RootOnly, Form::Steiner];
    st.rina = false;
    let m = model(&j, &st);
    let g = m.groups.iter().position(|g| g.class == Class::Dp).unwrap();
    let mut roots = std::collections::BTreeSet::new();
    let mut forms = std::collections::BTreeSet::new();
    for o in &m.opts[g] {
        if let OptKind::Tree { form, root, .. } = &o.kind {
            roots.insert(*root);
            forms.insert(*form);
            assert_eq!(j.topo.kinds[root.idx()], NodeKind::Switch);
        }
    }
    assert!(
        (1..=ina3d::topology::MAX_ROOTS).contains(&roots.len()),
        "{} roots",
        roots.len()
    );
    assert!(
        forms.contains(&Form::Hierarchical) && forms.contains(&Form::Steiner),
        "{forms:?}"
    );
    let (t, err, tr) = plan_against_ring(&j, &options(st, SolverKind::Auto));
    assert!(t <= tr * (1.0 + err), "plan {t} vs ring {tr} (error {err})");
}

/// The real replayer, slowed down by `delay` per replay (a cluster-scale job's replay
/// cost on a small job), keeping what it replayed.
struct SlowReplayer<'a> {
    inner: ina3d::pipeline::PlanReplayer<'a>,
    delay: Duration,
    replayed: std::cell::RefCell<Vec<(PlanFile, f64)>>,
}

impl plan::Replayer for SlowReplayer<'_> {
    fn replay(
        &self,
        p: &PlanFile,
        deadline: Option<Instant>,
    ) -> Result<plan::Replayed, plan::ReplayFailure> {
        std::thread::sleep(self.delay);
        let r = self.inner.replay(p, deadline)?;
        self.replayed.borrow_mut().push((p.clone(), r.iteration_ns));
        Ok(r)
    }
}

/// The real replayer, but a plan with any group aggregating takes `ina_delay` before its
/// replay starts — a candidate whose replay is far dearer than the all-host plan's (as
/// DCQCN replays of INA plans can be) — stopping at the deadline it is given, as the real
/// replayer does; it keeps the deadlines it was given.
struct DearInaReplayer<'a> {
    inner: ina3d::pipeline::PlanReplayer<'a>,
    ina_delay: Duration,
    deadlines: std::cell::RefCell<Vec<Option<Instant>>>,
}

impl plan::Replayer for DearInaReplayer<'_> {
    fn replay(
        &self,
        p: &PlanFile,
        deadline: Option<Instant>,
    ) -> Result<plan::Replayed, plan::ReplayFailure> {
        self.deadlines.borrow_mut().push(deadline);
        if p.groups.iter().any(|g| g.decision != Decision::Host) {
            let wake = Instant::now() + self.ina_delay;
            let until = deadline.map_or(wake, |d| d.min(wake));
            std::thread::sleep(until.saturating_duration_since(Instant::now()));
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(plan::ReplayFailure::OutOfTime);
            }
        }
        self.inner.replay(p, deadline)
    }
}

#[test]
fn a_candidate_replay_that_would_outlast_the_time_limit_is_stopped_at_it_and_the_plan_comes_back_unverified(
) {
    let j = example("fat-tree:k=4,gpus-per-server=2", 8192);
    let pj = ina3d::pipeline::Job {
        cfg: j.cfg.clone(),
        topology: j.topo.clone(),
        workload: j.wl.clone(),
        warnings: vec![],
    };
    let dear = DearInaReplayer {
        inner: ina3d::pipeline::PlanReplayer {
            job: &pj,
            opts: &j.opts,
            model: RateModel::Ideal,
        },
        // far beyond the limit: without a deadline the plan would take a minute
        ina_delay: Duration::from_secs(60),
        deadlines: Default::default(),
    };
    let st = settings(
        8192,
        None,
        &[1.0, 0.5, 0.25],
        &[Class::Tp, Class::Dp, Class::Emb],
    );
    let limit = Duration::from_secs(4);
    let po = PlanOptions {
        time_limit: limit,
        replay_rounds: 3,
        ..options(st, SolverKind::Auto)
    };
    let h = trace::header(&j.cfg, &j.wl, &j.topo, &j.opts);
    let started = Instant::now();
    let p = plan::plan(
        &j.wl,
        &j.topo,
        &j.opts,
        &po,
        trace::planned::plan_job(&h),
        Some(&dear),
    )
    .unwrap();
    let note = p.solver.note.clone().unwrap_or_default();
    let deadlines = dear.deadlines.into_inner();
    assert!(deadlines.len() >= 2, "{note}");
    for d in &deadlines {
        let d = d.expect("every replay is given a deadline");
        assert!(d <= started + limit, "a replay may run past the time limit");
    }
    assert!(p.verification.is_none(), "{note}");
    assert!(note.contains("did not finish"), "{note}");
    assert!(
        p.groups.iter().any(|g| g.decision != Decision::Host),
        "the model's plan, not the all-host one: {note}"
    );
}

#[test]
fn when_the_all_host_replay_leaves_no_time_to_replay_a_plan_the_models_plan_is_returned_unverified_not_the_host_plan(
) {
    let j = example("fat-tree:k=4,gpus-per-server=2", 8192);
    let pj = ina3d::pipeline::Job {
        cfg: j.cfg.clone(),
        topology: j.topo.clone(),
        workload: j.wl.clone(),
        warnings: vec![],
    };
    let real = || ina3d::pipeline::PlanReplayer {
        job: &pj,
        opts: &j.opts,
        model: RateModel::Ideal,
    };
    // a replay of 4 s against a 10 s limit: the all-host replay fits in the half of the
    // limit it may take (with up to 0.9 s for the real replay on a loaded machine), and
    // after it less than a solve and a replay of the plan (1.5 × 1.2 × 4 s) is left
    let slow = SlowReplayer {
        inner: real(),
        delay: Duration::from_secs(4),
        replayed: Default::default(),
    };
    let st = settings(
        8192,
        None,
        &[1.0, 0.5, 0.25],
        &[Class::Tp, Class::Dp, Class::Emb],
    );
    let po = PlanOptions {
        time_limit: Duration::from_secs(10),
        replay_rounds: 3,
        ..options(st, SolverKind::Auto)
    };
    let h = trace::header(&j.cfg, &j.wl, &j.topo, &j.opts);
    let p = plan::plan(
        &j.wl,
        &j.topo,
        &j.opts,
        &po,
        trace::planned::plan_job(&h),
        Some(&slow),
    )
    .unwrap();
    let note = p.solver.note.clone().unwrap_or_default();
    let replayed = slow.replayed.into_inner();
    assert_eq!(
        replayed.len(),
        1,
        "only the all-host plan is replayed: {note}"
    );
    let (host, host_ns) = &replayed[0];
    assert!(host.groups.iter().all(|g| g.decision == Decision::Host));
    assert!(p.verification.is_none(), "{note}");
    assert!(note.contains("not replayed"), "{note}");
    assert!(
        p.groups.iter().any(|g| g.decision != Decision::Host),
        "{note}"
    );
    assert_eq!(p.prediction.host_iteration_ns, *host_ns);
    // and the plan returned replays faster than the all-host plan it was preferred to
    let planned = plan::Replayer::replay(&real(), &p, None).unwrap();
    assert!(
        planned.iteration_ns < *host_ns,
        "plan {} vs all-host {host_ns}",
        planned.iteration_ns
    );
}

#[test]
fn the_usage_map_judges_every_move_as_scanning_the_phases_does() {
    // 256 slots and a quota of 2: pools and quotas bind, so moves that do not fit exist
    let j = example("fat-tree:k=4,gpus-per-server=2", 256);
    let m = model(
        &j,
        &settings(256, Some(2), &[1.0, 0.5], &[Class::Dp, Class::Emb]),
    );
    let mut a: Vec<usize> = (0..m.groups.len())
        .map(|g| ina3d::plan::model::host_index(&m.opts[g], &m.groups[g]))
        .collect();
    let mut usage = m.usage(&a);
    let (mut fit, mut refused) = (0, 0);
    // walk: every group tries every option; the first that fits is taken
    for round in 0..3 {
        for g in 0..m.groups.len() {
            for o in 0..m.opts[g].len() {
                let scanned = m.fits_move(&a, g, o);
                assert_eq!(
                    usage.fits(&m, &a, g, o),
                    scanned,
                    "round {round}, group {g}, option {o}"
                );
                if scanned {
                    fit += 1;
                } else {
                    refused += 1;
                }
            }
            let take = (0..m.opts[g].len())
                .rev()
                .find(|&o| (o + round) % 2 == 0 && m.fits_move(&a, g, o));
            if let Some(o) = take {
                usage.apply(&m, &mut a, g, o);
                assert!(m.feasible(&a));
            }
        }
    }
    assert!(
        fit > 0 && refused > 0,
        "{fit} fitting, {refused} refused moves"
    );
}

#[test]
fn a_moe_jobs_dense_and_expert_dp_groups_of_the_same_members_aggregate_on_reservations_of_their_own(
) {
    // Mixtral with TP2 and EP2 over the same two ranks (expert TP 1): the expert-DP groups
    // have the dense DP groups' members ({0,2,4,6}, {1,3,5,7}) but sync other gradients.
    // Slots are reserved per (switch, class, group, first member): keyed without the
    // group, the two would share one key, so the model offered the expert groups no tree
    // and the Mixtral plans of the study at scale trailed the fixed INA policies.
    let mut c = megatron::preset("mixtral-8x7b").unwrap();
    for (k, v) in [
        ("num_layers", "2"),
        ("seq_length", "256"),
        ("hidden_size", "512"),
        ("ffn_hidden_size", "1024"),
        ("num_attention_heads", "8"),
        ("tensor_model_parallel_size", "2"),
        ("pipeline_model_parallel_size", "1"),
        ("expert_model_parallel_size", "2"),
        ("expert_tensor_parallel_size", "1"),
        ("sequence_parallel", "true"),
        ("data_parallel_size", "4"),
        ("global_batch_size", "8"),
    ] {
        c.set(k, v).unwrap();
    }
    let j = job(c, "fat-tree:k=4,nvlink=off", InaSwitches::All, 8192);
    let st = settings(8192, None, &[1.0, 0.5], &[Class::Dp]);
    let m = model(&j, &st);
    let po = options(st, SolverKind::Heuristic);
    let dense = (0..m.groups.len())
        .find(|&g| m.groups[g].class == Class::Dp && !m.groups[g].is_expert())
        .expect("a dense DP group");
    let expert = (0..m.groups.len())
        .find(|&g| m.groups[g].is_expert() && m.groups[g].members == m.groups[dense].members)
        .expect("an expert-DP group with the dense group's members");
    // a tree of `g` at `slots` per switch
    let tree = |g: usize, slots: u32| {
        m.opts[g]
            .iter()
            .position(|o| matches!(o.kind, OptKind::Tree { .. }) && o.slots == slots)
            .unwrap_or_else(|| panic!("{}: no tree at {slots} slots", m.groups[g].name()))
    };
    let full = m.opts[dense].iter().map(|o| o.slots).max().unwrap();
    let half = full / 2;
    // the dense group aggregates at the full window, its expert twin at half of it
    let mut a: Vec<usize> = (0..m.groups.len())
        .map(|g| plan::model::host_index(&m.opts[g], &m.groups[g]))
        .collect();
    a[dense] = tree(dense, full);
    a[expert] = tree(expert, half);
    let opts = assigned(&j, &m, &po, &a);
    let mut recs = Vec::new();
    trace::generate_workload(&j.wl, &j.topo, &opts, &mut |r| {
        recs.push(r);
        Ok(())
    })
    .unwrap();
    let ina = |g: AggGroup| {
        recs.iter()
            .filter(|r| r.agg.is_some_and(|a| a.group == g))
            .count()
    };
    assert!(
        ina(AggGroup::Dense) > 0,
        "the dense group's tree was not lowered"
    );
    assert!(
        ina(AggGroup::Expert) > 0,
        "the expert group's tree was not lowered"
    );

    // both back-ends find each aggregation's own reservation: the glue's
    // reservations.txt holds the expert aggregations at half the dense ones' slots
    let h = trace::header(&j.cfg, &j.wl, &j.topo, &opts);
    let sw = ina3d::ns3::ina_model(&h).unwrap();
    let text = ina3d::ns3::emit::reservations_text(&recs, &sw, &j.topo)
        .unwrap()
        .expect("the planned policy writes reservations");
    let group_of: BTreeMap<u64, AggGroup> = recs
        .iter()
        .filter_map(|r| r.agg.map(|a| (a.id, a.group)))
        .collect();
    let mut slots: BTreeMap<AggGroup, Vec<u32>> = BTreeMap::new();
    let lines =
        ina3d::formats::reservations_txt::parse(std::path::Path::new("reservations.txt"), &text)
            .unwrap();
    for (id, _switch, k) in lines {
        slots.entry(group_of[&id]).or_default().push(k);
    }
    assert!(
        slots[&AggGroup::Dense].iter().all(|&k| k == full)
            && slots[&AggGroup::Expert].iter().all(|&k| k == half),
        "reservations.txt: {slots:?}, want dense at {full}, expert at {half}"
    );
    // and so does `ina3d ns3 emit DIR/trace.txt`: the glue's files emitted again from
    // the glue's trace.txt, params.txt and reservations.txt (read back, not the records
    // in memory) reserve the same slots (before, the reservations were not read back at
    // all, and trace.txt did not carry the group: its expert aggregations read back
    // dense)
    let first = tempfile::tempdir().unwrap();
    let eo = ina3d::ns3::emit::EmitOptions::default();
    ina3d::ns3::emit::emit(&recs, &sw, &j.topo, &eo, first.path()).unwrap();
    let again = ina3d::pipeline::load_ns3_input(&first.path().join("trace.txt")).unwrap();
    let second = tempfile::tempdir().unwrap();
    let ina_again = again.ina_on(&j.topo).unwrap();
    ina3d::ns3::emit::emit(&again.records, &ina_again, &j.topo, &eo, second.path()).unwrap();
    let read =
        |d: &tempfile::TempDir| std::fs::read_to_string(d.path().join("reservations.txt")).unwrap();
    assert_eq!(
        read(&first),
        text,
        "emit writes the reservations computed above"
    );
    assert_eq!(read(&second), text, "emitted again from trace.txt");
    // a reservations.txt naming an aggregation trace.txt lacks is refused with its line
    std::fs::write(
        first.path().join("reservations.txt"),
        format!("{text}999999 16 8\n"),
    )
    .unwrap();
    let e = ina3d::pipeline::load_ns3_input(&first.path().join("trace.txt"))
        .unwrap()
        .ina_on(&j.topo)
        .unwrap_err()
        .to_string();
    let line = text.lines().count() + 1;
    assert!(
        e.contains(&format!(
            "reservations.txt:{line}: agg_id: aggregation 999999"
        )),
        "{e}"
    );
    assert!(
        replayed(&j, &opts) > 0.0,
        "the replayer resolves both groups' slots"
    );
}

#[test]
fn a_plan_records_the_activity_windows_it_was_solved_on_not_those_of_a_later_calibration() {
    // The repair loop calibrates the model on every replay, and a calibration moves the
    // groups' activity windows, so the phases that slot pools hold in. A plan solved
    // before a calibration must keep the windows its pools were checked in: written with
    // the later windows, GPT-3 175B on 1,024 GPUs of a 3:1 leaf-spine gave 33 groups of
    // 256 slots one 8,192-slot switch in one phase, and `trace --plan` refused the plan.
    let j = job(
        small(1, 4, 2, 16),
        "leaf-spine:leaves=8,spines=1,hosts-per-leaf=1,nvlink=off",
        InaSwitches::All,
        1024,
    );
    // the DP groups must aggregate: four trees of 256 slots meet on the one spine
    let st = Settings {
        required: vec![Class::Dp],
        ..settings(1024, None, &[1.0], &[Class::Dp, Class::Emb])
    };
    let po = options(st.clone(), SolverKind::Heuristic);
    let mut m = model(&j, &st);
    let solved = plan::solve(&m, &po, Instant::now()).unwrap();
    assert!(m.feasible(&solved.assign));
    let trees = (0..m.groups.len())
        .filter(|&g| !m.opts[g][solved.assign[g]].switches.is_empty())
        .count();
    assert!(
        trees > 0,
        "the plan aggregates no group: nothing to hold a pool"
    );
    let solved_on = m.windows.clone();
    // a replay whose pipeline stages ended up to 40 % later than the model's
    let stage_end: Vec<f64> = m
        .base
        .stage_end
        .iter()
        .enumerate()
        .map(|(s, e)| e * (1.0 + 0.1 * (s + 1) as f64))
        .collect();
    let iteration = m.evaluate(&solved.assign, &mut vec![0.0; m.channels]).t * 1.5;
    m.calibrate(
        &j.wl,
        &ina3d::plan::model::Measured {
            at: solved.assign.clone(),
            stage_end,
            iteration,
        },
    );
    assert_ne!(m.windows, solved_on, "the calibration moved no window");
    let h = trace::header(&j.cfg, &j.wl, &j.topo, &j.opts);
    let f = plan::file(
        &m,
        &po,
        trace::planned::plan_job(&h),
        solved,
        Duration::ZERO,
    );
    for (g, (p, w)) in f.groups.iter().zip(&solved_on).enumerate() {
        assert_eq!(p.active.interval(), *w, "group {g}'s window");
    }
    let mut o = j.opts.clone();
    o.plan = Some(f);
    trace::generate_workload(&j.wl, &j.topo, &o, &mut |_| Ok(())).unwrap();
}
