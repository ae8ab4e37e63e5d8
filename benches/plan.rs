//! Planner benchmark: prints figures, asserts nothing about time.
//!
//! `cargo bench --no-default-features --bench plan` runs every section, the table under the
//! ideal rate model and the scale series up to 8,192 GPUs (`-- quick`: the exact series to
//! 64 GPUs, the scale series to 1,024). `-- table [dcqcn|ideal]`: the prediction table
//! only, under DCQCN unless `ideal`; `-- scale`: the scale series only, to 32,768 GPUs;
//! `-- hosts`: the host-algorithm section only; `-- case=TEXT`: only the jobs whose name
//! contains TEXT.
//!
//! 1. Prediction table: 22 jobs outside `notebooks/study.toml` (pipelines 1F1B and
//!    interleaved, TP on the network, CP, MoE, 1–4 NCCL channels, oversubscribed fabrics,
//!    several ECMP seeds), each planned as `ina3d plan` plans it (auto solver, the repair
//!    loop replaying the all-host plan and the candidates): GPUs, solver and status, plan
//!    wall time, groups aggregating, predicted and replayed iteration time of the plan
//!    returned, prediction error, all-host replayed time and the plan's speed-up; where
//!    the exact solver closed, the heuristic's plan (same repair loop) replayed against it.
//! 2. Scale: GPT-3 175B TP8·PP16 on 128 to 32,768 GPUs (fat-tree, 8-GPU servers): plan time
//!    against the time limit, groups aggregating, predicted and replayed iteration.
//! 3. The exact solver (integer program, `good_lp` + `microlp`) on GPT-3 13B, TP4 (one
//!    4-GPU server)·PP2·DP = GPUs/8 for 16–256 GPUs: instance size, solve time, status,
//!    bound and gap, and the heuristic's gap to it (the model alone).
//! 4. Host algorithms (`-- hosts` only): for each job and each host algorithm, the plan
//!    with every group on it where it is offered (the ring elsewhere), its uncalibrated
//!    prediction against its replay under the ideal and the DCQCN rate models.

use ina3d::megatron;
use ina3d::pipeline::{make_plan, Job, JobSpec, ParallelSizes};
use ina3d::plan::{self, model::Settings, options::Form, Objective, PlanOptions, SolverKind};
use ina3d::record::Class;
use ina3d::replay::RateModel;
use ina3d::schedule;
use ina3d::topology::Topology;
use ina3d::trace::InaConfig;
use ina3d::trace::{self, InaMode, TraceOptions};
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

/// One job of the prediction table.
struct Case {
    name: &'static str,
    input: &'static str,
    topology: &'static str,
    sizes: [u32; 6],
    set: &'static [&'static str],
    seed: u64,
    channels: Option<u32>,
    slots: u32,
}

const EX: &str = "traces/example/megatron.log";
const TINY: &str = "traces/example/tiny.toml";
const FT4: &str = "fat-tree:k=4,gpus-per-server=2";
const SMALL: &[&str] = &["num_layers=4", "global_batch_size=32", "seq_length=1024"];

fn case(
    name: &'static str,
    input: &'static str,
    topology: &'static str,
    sizes: [u32; 6],
    set: &'static [&'static str],
) -> Case {
    Case {
        name,
        input,
        topology,
        sizes,
        set,
        seed: 0,
        channels: None,
        slots: 8192,
    }
}

fn cases() -> Vec<Case> {
    // sizes: tp, pp, dp, vpp, cp, ep (0: the input's)
    let mut v = vec![
        case("example", EX, FT4, [0; 6], &[]),
        Case {
            seed: 3,
            ..case("example, seed 3", EX, FT4, [0; 6], &[])
        },
        Case {
            channels: Some(1),
            ..case("example, 1 channel", EX, FT4, [0; 6], &[])
        },
        Case {
            channels: Some(4),
            ..case("example, 4 channels", EX, FT4, [0; 6], &[])
        },
        Case {
            slots: 256,
            ..case("example, 256 slots", EX, FT4, [0; 6], &[])
        },
        Case {
            seed: 2,
            ..case(
                "example, leaf-spine 2:1",
                EX,
                "leaf-spine:leaves=4,spines=2,hosts-per-leaf=4,oversub=2,gpus-per-server=2",
                [0; 6],
                &[],
            )
        },
        case(
            "tiny, TP on the network, PP2",
            TINY,
            "fat-tree:k=4,nvlink=off",
            [0; 6],
            &[],
        ),
        case(
            "tiny, TP on the network, DP4",
            TINY,
            "fat-tree:k=4,nvlink=off",
            [0, 0, 4, 0, 0, 0],
            &["global_batch_size=16"],
        ),
        case(
            "tiny, TP-net, leaf-spine 2:1",
            TINY,
            "leaf-spine:leaves=4,spines=2,hosts-per-leaf=2,oversub=2,nvlink=off",
            [0; 6],
            &[],
        ),
        case(
            "GPT-3 1.3B TP2·PP4·DP2",
            "gpt3-1.3b",
            FT4,
            [2, 4, 2, 0, 0, 0],
            SMALL,
        ),
        case(
            "GPT-3 1.3B TP2·PP2·DP4, VPP2",
            "gpt3-1.3b",
            FT4,
            [2, 2, 4, 2, 0, 0],
            &["num_layers=8", "global_batch_size=32", "seq_length=1024"],
        ),
        case(
            "GPT-3 1.3B TP-net, leaf-spine 2:1",
            "gpt3-1.3b",
            "leaf-spine:leaves=4,spines=2,hosts-per-leaf=4,oversub=2,nvlink=off",
            [2, 2, 4, 0, 0, 0],
            SMALL,
        ),
        Case {
            seed: 1,
            channels: Some(2),
            ..case(
                "GPT-3 1.3B TP1·PP2·DP8, TP-net",
                "gpt3-1.3b",
                "fat-tree:k=4,nvlink=off",
                [1, 2, 8, 0, 0, 0],
                SMALL,
            )
        },
        case(
            "Llama-2 7B TP2·PP4·DP4, leaf-spine 4:1",
            "llama2-7b",
            "leaf-spine:leaves=4,spines=2,hosts-per-leaf=8,oversub=4,gpus-per-server=2",
            [2, 4, 4, 0, 0, 0],
            SMALL,
        ),
        Case {
            seed: 2,
            channels: Some(3),
            ..case(
                "Llama-2 7B TP4·PP2·DP4, 3 channels",
                "llama2-7b",
                "fat-tree:k=8,gpus-per-server=4",
                [4, 2, 4, 0, 0, 0],
                SMALL,
            )
        },
        case(
            "tiny CP2, TP on the network",
            TINY,
            "fat-tree:k=4,nvlink=off",
            [0, 0, 1, 0, 2, 0],
            &["global_batch_size=4"],
        ),
        case(
            "Llama-2 7B TP2·CP2·DP2·PP2",
            "llama2-7b",
            FT4,
            [2, 2, 2, 0, 2, 0],
            &["num_layers=4", "global_batch_size=8", "seq_length=2048"],
        ),
        case(
            "Mixtral 8x7B EP4·PP2·DP8",
            "mixtral-8x7b",
            "fat-tree:k=4,nvlink=off",
            [1, 2, 8, 0, 0, 4],
            &["num_layers=2", "global_batch_size=16", "seq_length=512"],
        ),
        Case {
            seed: 5,
            ..case(
                "BERT-large DP16",
                "bert-large",
                "fat-tree:k=4,nvlink=off",
                [1, 1, 16, 0, 0, 0],
                &["global_batch_size=64"],
            )
        },
        Case {
            seed: 7,
            ..case(
                "GPT-3 2.7B TP2·PP2·DP8, k=8",
                "gpt3-2.7b",
                "fat-tree:k=8,gpus-per-server=2",
                [2, 2, 8, 0, 0, 0],
                SMALL,
            )
        },
        case(
            "Llama-2 13B TP8·PP2·DP2, rail",
            "llama2-13b",
            "rail:servers=4,gpus-per-server=8",
            [8, 2, 2, 0, 0, 0],
            SMALL,
        ),
        case(
            "GPT-3 6.7B TP2·PP2·DP4, dual-plane",
            "gpt3-6.7b",
            "dual-plane:servers=4,gpus-per-server=4",
            [2, 2, 4, 0, 0, 0],
            SMALL,
        ),
    ];
    v.retain(|c| !c.name.is_empty());
    v
}

fn spec(c: &Case) -> JobSpec {
    let s = c.sizes;
    let nz = |x: u32| (x > 0).then_some(x);
    JobSpec {
        input: c.input.into(),
        topology: c.topology.into(),
        sizes: ParallelSizes {
            tp: nz(s[0]),
            pp: nz(s[1]),
            dp: nz(s[2]),
            vpp: nz(s[3]),
            cp: nz(s[4]),
            ep: nz(s[5]),
        },
        set: c.set.iter().map(|x| x.to_string()).collect(),
        seed: c.seed,
        nccl_channels: c.channels,
        ina: InaConfig {
            mode: InaMode::Planned,
            slots: c.slots,
            ..InaConfig::default()
        },
        ..JobSpec::default()
    }
}

/// Plan a job as `ina3d plan` does (the repair loop on) and print a row.
/// With `compare`, a plan the exact solver closed on is planned again by the heuristic
/// and the ratio of their replayed times printed (`heur/exact`).
fn table_row(
    name: &str,
    sp: &JobSpec,
    limit: f64,
    model: RateModel,
    compare: bool,
) -> Option<(f64, Option<f64>)> {
    let job = match Job::prepare(sp) {
        Ok(j) => j,
        Err(e) => {
            println!("   {name:<38} job refused: {e}");
            return None;
        }
    };
    let opts = sp.trace_options().expect("options");
    // `ina3d plan`'s defaults: every form, Rina, the three slot levels
    let defaults = PlanOptions::default();
    let po = PlanOptions {
        settings: Settings {
            slots: opts.ina.slots,
            ..defaults.settings.clone()
        },
        time_limit: Duration::from_secs_f64(limit),
        ..defaults
    };
    let t0 = Instant::now();
    let p = match make_plan(&job, &opts, &po, model) {
        Ok(p) => p,
        Err(e) => {
            println!("   {name:<38} plan failed: {e}");
            return None;
        }
    };
    let secs = t0.elapsed().as_secs_f64();
    let ina = p
        .groups
        .iter()
        .filter(|g| g.decision != ina3d::formats::plan_json::Decision::Host)
        .count();
    let ms = |x: f64| x / 1e6;
    // item 3: where the exact solver closed, the heuristic's plan (same repair loop),
    // replayed, against the exact one's
    let heuristic = match (&p.verification, p.solver.status.as_str()) {
        (Some(v), "optimal") if compare => {
            let hp = PlanOptions {
                solver: SolverKind::Heuristic,
                ..po.clone()
            };
            make_plan(&job, &opts, &hp, model)
                .ok()
                .and_then(|h| h.verification)
                .map(|h| h.replayed_ns / v.replayed_ns)
        }
        _ => None,
    };
    let heur = heuristic.map_or("-".to_string(), |r| format!("{r:.4}"));
    match &p.verification {
        Some(v) => {
            // no all-host replay when replays are dear: the model's all-host prediction
            // (marked) instead
            let (host, mark) = if v.host_replayed_ns > 0.0 {
                (v.host_replayed_ns, ' ')
            } else {
                (p.prediction.host_iteration_ns, '*')
            };
            println!(
                "   {name:<38} {:>6} {:<9} {:>6.2} {:>4}/{:<4} {:>11.3} {:>11.3} {:>+7.2} {:>11.3}{mark}{:>6.3}  {heur:>8}",
                job.workload.world(),
                p.solver.status,
                secs,
                ina,
                p.groups.len(),
                ms(p.prediction.iteration_ns),
                ms(v.replayed_ns),
                100.0 * v.error,
                ms(host),
                host / v.replayed_ns
            );
            if let Some(n) = &p.solver.note {
                println!("      note: {n}");
            }
            Some((v.error, heuristic))
        }
        None => {
            println!(
                "   {name:<38} {:>6} {:<9} {:>6.2} {:>4}/{:<4} {:>11.3} (not replayed: {})",
                job.workload.world(),
                p.solver.status,
                secs,
                ina,
                p.groups.len(),
                ms(p.prediction.iteration_ns),
                p.solver.note.clone().unwrap_or_default()
            );
            None
        }
    }
}

fn table(model: RateModel, only: &[String]) {
    println!("== 1. prediction table: {} jobs outside the study grid, planned as `ina3d plan` plans them (auto, repair loop), replayed under {model:?}", cases().len());
    println!("   job                                      GPUs status    plan s  INA/groups  predicted ms replayed ms  err %  all-host ms speed-up  heur/exact");
    let mut errs = Vec::new();
    let mut ratios = Vec::new();
    for c in cases() {
        if !only.is_empty() && !only.iter().any(|o| c.name.contains(o.as_str())) {
            continue;
        }
        if let Some((e, h)) = table_row(c.name, &spec(&c), 10.0, model, true) {
            errs.push(e.abs());
            ratios.extend(h);
        }
    }
    errs.sort_by(f64::total_cmp);
    let within = errs.iter().filter(|e| **e <= 0.05).count();
    println!(
        "   |error|: median {:.2} %, largest {:.2} %, {within} of {} within 5 %",
        100.0 * errs.get(errs.len() / 2).copied().unwrap_or(0.0),
        100.0 * errs.last().copied().unwrap_or(0.0),
        errs.len()
    );
    let worst = ratios.iter().copied().fold(0.0, f64::max);
    let within = ratios.iter().filter(|r| **r <= 1.02).count();
    println!(
        "   heuristic against exact (replayed), where the exact solver closed: largest ratio {worst:.4}, {within} of {} within 2 %",
        ratios.len()
    );
}

/// The scale series up to `max_gpus`.
fn scale(max_gpus: u32, only: &[String]) {
    println!("== 2. scale: GPT-3 175B TP8·PP16, fat-tree with 8-GPU servers, time limit 60 s (300 s at 32,768); verification and repair replays under the ideal rate model (DCQCN replays at this scale are being sped up); all-host marked * is the model's prediction (no all-host replay when replays are dear)");
    println!("   job                                      GPUs status    plan s  INA/groups  predicted ms replayed ms  err %  all-host ms speed-up");
    for (dp, k, limit) in [
        (1u32, 8u32, 60.0),
        (8, 16, 60.0),
        (64, 32, 60.0),
        (256, 64, 300.0),
    ] {
        if dp * 128 > max_gpus {
            break;
        }
        let sp = JobSpec {
            input: "gpt3-175b".into(),
            topology: format!("fat-tree:k={k},gpus-per-server=8"),
            sizes: ParallelSizes {
                tp: Some(8),
                pp: Some(16),
                dp: Some(dp),
                ..ParallelSizes::default()
            },
            ina: InaConfig {
                mode: InaMode::Planned,
                ..InaConfig::default()
            },
            ..JobSpec::default()
        };
        let name = format!("GPT-3 175B DP{dp} (limit {limit} s)");
        if !only.is_empty() && !only.iter().any(|o| name.contains(o.as_str())) {
            continue;
        }
        table_row(&name, &sp, limit, RateModel::Ideal, false);
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
    secs: f64,
    status: String,
    bound: f64,
    gap: f64,
    vars: u64,
    cons: u64,
    note: Option<String>,
}

fn run(c: &megatron::TrainingConfig, spec: &str, solver: SolverKind, limit: f64) -> (Run, usize) {
    let topo = Topology::from_spec(spec).expect("topology");
    let mut opts = TraceOptions::default();
    opts.ina.set_mode(InaMode::Planned);
    let wl = schedule::build(c, &opts.schedule).expect("workload");
    let po = PlanOptions {
        settings: settings(opts.ina.slots),
        objective: Objective::Iteration,
        solver,
        time_limit: Duration::from_secs_f64(limit),
        // the solvers' scaling under a wall-clock limit: no work budget before it
        work: plan::Work {
            evals: u64::MAX,
            nodes: u64::MAX,
        },
        auto_max_variables: u64::MAX,
        replay_rounds: 0,
        fixed_policies: false,
    };
    let t0 = Instant::now();
    let m = plan::build_model(&wl, &topo, &opts, &po.settings).expect("model");
    let groups = m.groups.len();
    let h = trace::header(c, &wl, &topo, &opts);
    let t1 = Instant::now();
    let s = plan::solve(&m, &po, t0).expect("solve");
    let secs = t1.elapsed().as_secs_f64();
    let f = plan::file(&m, &po, trace::planned::plan_job(&h), s, t1.elapsed());
    (
        Run {
            t: f.prediction.iteration_ns,
            secs,
            status: f.solver.status.clone(),
            bound: f.solver.bound_ns,
            gap: f.solver.gap,
            vars: f.solver.variables,
            cons: f.solver.constraints,
            note: f.solver.note.clone(),
        },
        groups,
    )
}

fn exact(quick: bool) {
    println!("== 3. exact solver (the model alone), GPT-3 13B TP4(·4-GPU servers)·PP2·DP=N/8, m=8, limit 60 s");
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
        let (x, groups) = run(&c, spec, SolverKind::Ilp, 60.0);
        let (h, _) = run(&c, spec, SolverKind::Heuristic, 10.0);
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

/// One job of the host-algorithm section.
struct HostCase {
    name: &'static str,
    input: &'static str,
    topology: &'static str,
    sizes: [u32; 6],
    set: &'static [&'static str],
    seed: u64,
    channels: Option<u32>,
}

fn host_cases() -> Vec<HostCase> {
    const LLAMA: &str = "fat-tree:k=8,gpus-per-server=4";
    let llama = |name, seed, channels| HostCase {
        name,
        input: "llama2-7b",
        topology: LLAMA,
        sizes: [4, 2, 4, 0, 0, 0],
        set: SMALL,
        seed,
        channels,
    };
    vec![
        llama("Llama-2 7B TP4·PP2·DP4, seed 0, 1 ch", 0, Some(1)),
        llama("Llama-2 7B TP4·PP2·DP4, seed 1, 1 ch", 1, Some(1)),
        llama("Llama-2 7B TP4·PP2·DP4, seed 0, 2 ch", 0, Some(2)),
        llama("Llama-2 7B TP4·PP2·DP4, seed 1, 2 ch", 1, Some(2)),
        HostCase {
            name: "BERT-large DP16, k=4",
            input: "bert-large",
            topology: "fat-tree:k=4,nvlink=off",
            sizes: [1, 1, 16, 0, 0, 0],
            set: &["global_batch_size=64"],
            seed: 5,
            channels: None,
        },
        HostCase {
            name: "GPT-3 1.3B TP2·PP2·DP4, leaf-spine 2:1",
            input: "gpt3-1.3b",
            topology: "leaf-spine:leaves=4,spines=2,hosts-per-leaf=4,oversub=2,gpus-per-server=4",
            sizes: [2, 2, 4, 0, 0, 0],
            set: SMALL,
            seed: 0,
            channels: None,
        },
        HostCase {
            name: "GPT-3 1.3B TP-net·PP2·DP4, ls 2:1",
            input: "gpt3-1.3b",
            topology: "leaf-spine:leaves=4,spines=2,hosts-per-leaf=4,oversub=2,nvlink=off",
            sizes: [2, 2, 4, 0, 0, 0],
            set: SMALL,
            seed: 0,
            channels: None,
        },
        HostCase {
            name: "tiny, TP on the network, PP2",
            input: TINY,
            topology: "fat-tree:k=4,nvlink=off",
            sizes: [0; 6],
            set: &[],
            seed: 0,
            channels: None,
        },
    ]
}

/// Section 4: every host algorithm's all-host plan (every group on that algorithm where
/// it lowers differently, the ring elsewhere), the uncalibrated model's prediction
/// against its replay under the ideal and the DCQCN rate models.
fn hosts(only: &[String]) {
    use ina3d::formats::plan_json::PlanFile;
    use ina3d::plan::options::OptKind;
    use ina3d::plan::Replayer;
    use ina3d::trace::Algorithm;
    println!("== 4. host algorithms: all-host plans, the uncalibrated model against the replay");
    println!("   job                                      algorithm     groups  predicted ms  ideal ms   err %  dcqcn ms   err %");
    let mut worst = [0.0f64; 2];
    for c in host_cases() {
        if !only.is_empty() && !only.iter().any(|o| c.name.contains(o.as_str())) {
            continue;
        }
        let s = c.sizes;
        let nz = |x: u32| (x > 0).then_some(x);
        let sp = JobSpec {
            input: c.input.into(),
            topology: c.topology.into(),
            sizes: ParallelSizes {
                tp: nz(s[0]),
                pp: nz(s[1]),
                dp: nz(s[2]),
                vpp: nz(s[3]),
                cp: nz(s[4]),
                ep: nz(s[5]),
            },
            set: c.set.iter().map(|x| x.to_string()).collect(),
            seed: c.seed,
            nccl_channels: c.channels,
            ina: InaConfig {
                mode: InaMode::Planned,
                ..InaConfig::default()
            },
            ..JobSpec::default()
        };
        let job = Job::prepare(&sp).expect("job");
        let opts = sp.trace_options().expect("options");
        let st = Settings {
            classes: vec![],
            ..settings(opts.ina.slots)
        };
        let m = plan::build_model(&job.workload, &job.topology, &opts, &st).expect("model");
        let po = PlanOptions {
            settings: st,
            ..PlanOptions::default()
        };
        let h = trace::header(&job.cfg, &job.workload, &job.topology, &opts);
        for algo in Algorithm::ALL {
            let mut on = 0;
            let a: Vec<usize> = (0..m.groups.len())
                .map(|g| {
                    let i = m.opts[g].iter().position(|o| o.kind == OptKind::Host(algo));
                    on += i.is_some() as usize;
                    i.unwrap_or_else(|| plan::model::host_index(&m.opts[g], &m.groups[g]))
                })
                .collect();
            if on == 0 {
                continue;
            }
            let mut scratch = vec![0.0; m.channels];
            let predicted = m.evaluate(&a, &mut scratch).t;
            let f: PlanFile = plan::assignment_file(&m, &po, trace::planned::plan_job(&h), &a);
            let mut cols = String::new();
            for (i, rm) in [RateModel::Ideal, RateModel::Dcqcn].into_iter().enumerate() {
                let rp = ina3d::pipeline::PlanReplayer {
                    job: &job,
                    opts: &opts,
                    model: rm,
                };
                let r = rp.replay(&f, None).expect("replay").iteration_ns;
                let err = (predicted - r) / r;
                worst[i] = worst[i].max(err.abs());
                cols += &format!(" {:>9.3} {:>+7.2}", r / 1e6, 100.0 * err);
            }
            println!(
                "   {:<40} {:<13} {:>6} {:>12.3}{cols}",
                c.name,
                algo.as_str(),
                on,
                predicted / 1e6
            );
        }
    }
    println!(
        "   largest |error|: ideal {:.2} %, dcqcn {:.2} %",
        100.0 * worst[0],
        100.0 * worst[1]
    );
}

fn main() {
    let arg = |x: &str| std::env::args().any(|a| a == x);
    let quick = arg("quick");
    // the rate model the table's plans are repaired and judged under: `dcqcn` (the
    // default under RoCE) or `ideal`. Without either: DCQCN for `-- table`, ideal when
    // every section runs (`make bench`), while DCQCN replays of all-to-all traffic take
    // minutes (the MoE row)
    let model = if arg("ideal") || !(arg("dcqcn") || arg("table")) {
        RateModel::Ideal
    } else {
        RateModel::Dcqcn
    };
    // `case=TEXT`: only the jobs whose name contains TEXT
    let only: Vec<String> = std::env::args()
        .filter_map(|a| a.strip_prefix("case=").map(str::to_string))
        .collect();
    if arg("hosts") {
        hosts(&only);
        return;
    }
    if arg("scale") {
        // the 32,768-GPU plan (5 minutes) only when asked for
        scale(if quick { 1_024 } else { 32_768 }, &only);
        return;
    }
    table(model, &only);
    if arg("table") {
        return;
    }
    scale(if quick { 1_024 } else { 8_192 }, &only);
    exact(quick);
}
