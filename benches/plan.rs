//! Planner benchmark: prints figures, asserts nothing about time.
//!
//! `cargo bench --no-default-features --bench plan` (add `-- quick` to skip the exact
//! series above 64 GPUs).
//!
//! 1. The heuristic on GPT-3 175B, TP8·PP16·DP8 (1,024 GPUs, fat-tree k=16, 8 GPUs per
//!    server), m = 192: model build time, solve time (target: the whole plan within 10 s),
//!    groups and options, predicted iteration time against all-host.
//! 2. The exact solver (integer program, `good_lp` + `microlp`) on GPT-3 13B, TP4 (one
//!    4-GPU server)·PP2·DP = GPUs/8 for 16–256 GPUs: instance size (binary variables,
//!    constraints), solve time, status, bound and gap, and the heuristic's gap to it.

use ina3d::megatron;
use ina3d::plan::{self, model::Settings, options::Form, Objective, PlanOptions, SolverKind};
use ina3d::record::Class;
use ina3d::schedule;
use ina3d::topology::Topology;
use ina3d::trace::{self, InaMode, InaPolicy, TraceOptions};
use std::time::{Duration, Instant};

fn settings(slots: u32) -> Settings {
    Settings {
        slots,
        quota: None,
        levels: vec![1.0, 0.5, 0.25],
        classes: vec![Class::Tp, Class::Dp, Class::Emb],
        required: vec![],
        forms: vec![Form::Hierarchical, Form::RootOnly],
        rina: true,
    }
}

fn cfg(preset: &str, tp: u32, pp: u32, dp: u32, m: u32) -> megatron::TrainingConfig {
    let mut c = megatron::preset(preset).expect("preset");
    for (k, v) in [
        ("tensor_model_parallel_size", tp),
        ("pipeline_model_parallel_size", pp),
        ("data_parallel_size", dp),
        ("micro_batch_size", 1),
        ("global_batch_size", dp * m),
    ] {
        c.set(k, &v.to_string()).expect("set");
    }
    c.set("world_size", &(tp * pp * dp).to_string())
        .expect("world");
    c.validate().expect("valid config");
    c
}

struct Run {
    t: f64,
    host: f64,
    secs: f64,
    status: String,
    bound: f64,
    gap: f64,
    vars: u64,
    cons: u64,
    note: Option<String>,
}

fn run(
    c: &megatron::TrainingConfig,
    spec: &str,
    solver: SolverKind,
    limit: f64,
) -> (Run, usize, usize, f64) {
    let topo = Topology::from_spec(spec).expect("topology");
    let mut opts = TraceOptions::default();
    opts.ina.mode = InaMode::Planned;
    opts.ina.policy = InaPolicy::Planned;
    let wl = schedule::build(c, &opts.schedule).expect("workload");
    let po = PlanOptions {
        settings: settings(opts.ina.slots),
        objective: Objective::Iteration,
        solver,
        time_limit: Duration::from_secs_f64(limit),
        auto_max_variables: u64::MAX,
        replay_rounds: 0,
    };
    let t0 = Instant::now();
    let m = plan::build_model(&wl, &topo, &opts, &po.settings).expect("model");
    let build = t0.elapsed().as_secs_f64();
    let groups = m.groups.len();
    let options: usize = m.opts.iter().map(Vec::len).sum();
    let h = trace::header(c, &wl, &topo, &opts);
    let t1 = Instant::now();
    let s = plan::solve(&m, &po, t0).expect("solve");
    let secs = t1.elapsed().as_secs_f64();
    let f = plan::file(&m, &po, trace::planned::plan_job(&h), s, t1.elapsed());
    (
        Run {
            t: f.prediction.iteration_ns,
            host: f.prediction.host_iteration_ns,
            secs,
            status: f.solver.status.clone(),
            bound: f.solver.bound_ns,
            gap: f.solver.gap,
            vars: f.solver.variables,
            cons: f.solver.constraints,
            note: f.solver.note.clone(),
        },
        groups,
        options,
        build,
    )
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    println!("== 1. heuristic, GPT-3 175B TP8·PP16·DP8 on 1,024 GPUs (fat-tree k=16), m=192");
    let c = cfg("gpt3-175b", 8, 16, 8, 192);
    let (r, groups, options, build) = run(
        &c,
        "fat-tree:k=16,gpus-per-server=8",
        SolverKind::Heuristic,
        10.0,
    );
    println!(
        "   {groups} groups, {options} options; model {build:.2} s + heuristic {:.2} s = {:.2} s (target ≤ 10 s: ratio {:.2})",
        r.secs,
        build + r.secs,
        (build + r.secs) / 10.0
    );
    println!(
        "   predicted iteration {:.1} ms vs all-host {:.1} ms ({:+.2} %), relaxation bound {:.1} ms (gap ≤ {:.2} %)",
        r.t / 1e6,
        r.host / 1e6,
        100.0 * (r.t - r.host) / r.host,
        r.bound / 1e6,
        100.0 * r.gap
    );
    let (r2, ..) = run(
        &c,
        "fat-tree:k=16,gpus-per-server=8",
        SolverKind::Heuristic,
        2.0,
    );
    println!(
        "   with a 2 s limit instead: predicted {:.1} ms ({:+.3} % against the 10 s plan)",
        r2.t / 1e6,
        100.0 * (r2.t - r.t) / r.t
    );
    println!("== 2. exact solver, GPT-3 13B TP4(·4-GPU servers)·PP2·DP=N/8, m=8, limit 60 s");
    println!("   GPUs  groups  binaries  constraints  status      exact s   objective ms  bound ms  gap %   heuristic ms  heur s  heur/exact");
    for (n, spec) in [
        (16, "fat-tree:k=4,gpus-per-server=4"),
        (32, "fat-tree:k=8,gpus-per-server=4"),
        (64, "fat-tree:k=8,gpus-per-server=4"),
        (128, "fat-tree:k=8,gpus-per-server=4"),
        (256, "fat-tree:k=12,gpus-per-server=4"),
    ] {
        if quick && n > 64 {
            break;
        }
        let c = cfg("gpt3-13b", 4, 2, n / 8, 8);
        let (x, groups, _, _) = run(&c, spec, SolverKind::Ilp, 60.0);
        let (h, _, _, _) = run(&c, spec, SolverKind::Heuristic, 10.0);
        println!(
            "   {n:>4}  {groups:>6}  {:>8}  {:>11}  {:<10}  {:>7.2}  {:>12.3}  {:>8.3}  {:>5.2}  {:>12.3}  {:>6.2}  {:>9.4}",
            x.vars,
            x.cons,
            x.status,
            x.secs,
            x.t / 1e6,
            x.bound / 1e6,
            100.0 * x.gap,
            h.t / 1e6,
            h.secs,
            h.t / x.t
        );
        if let Some(n) = &x.note {
            println!("         note: {n}");
        }
    }
}
