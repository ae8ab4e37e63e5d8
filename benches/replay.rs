//! Replayer benchmark: prints figures, asserts nothing about time.
//!
//! `cargo bench --no-default-features --bench replay` (add `-- quick` for the growth
//! series and the ns-3 comparison only, `-- ns3` for the ns-3 comparison only, `-- scale`
//! for the cluster-scale cases only; the full run ends with them; `-- models` for the
//! 1,024-GPU synthetic traces under each rate model, ideal and dcqcn).
//!
//! Figure 1 uses the project's own generator (`megatron` preset → `schedule::build` →
//! `trace::generate_workload`, what `ina3d trace` runs). The growth series and a second
//! large case use a **synthetic trace of the same shape** built here ([`synth`], written
//! before the generator was merged, kept because its DP ring has one flow per bucket
//! and step — ≈ 0.9 M network flows, the heavier case): Megatron 1F1B on TP·PP·DP ranks in rank order on a fat-tree; per rank and
//! micro-batch one forward and one backward `Compute` record; per TP group, micro-batch
//! and phase `2·layers_per_stage` chained `NvLink` TP all-reduce records (one record per
//! collective, docs/model.md#nvlink-records); per boundary crossing one `Net` p2p flow per TP rank
//! (activations forward, gradients backward, sequence-parallel size `s·b·h·2/TP`); after
//! the last backward, DP gradient buckets of 40 M parameters (fp32) in sequence — as ring
//! all-reduce step flows (INA off) or as one INA aggregation per bucket and DP group on
//! the tree `Routing::aggregation_tree` builds (INA on).
//!
//! Figures:
//! 1. GPT-3 175B, TP8·PP16·DP8 (1,024 GPUs, fat-tree k=16, 100 Gb/s), m=192, INA on
//!    (hierarchical, every switch aggregates), from the project's generator: records,
//!    network flows, wall time of the replay, peak RSS (VmHWM of the process, trace
//!    included). Then the synthetic trace, INA on and off (ring, ≈ 0.9 M network flows).
//! 2. Growth: 1×, 4×, 16× GPUs (TP8·PP4, DP 2/8/32, m=32): wall time per F·log₂F, F =
//!    network flows (ring DP flows grow as DP², so F grows faster than the GPU count).
//! 3. [`ns3_vs_replayer_ratio`]: the project's generator on `traces/example/tiny.toml`
//!    (8 and 16 GPUs), ring and hierarchical INA, through the ns-3 glue (under both of its
//!    transports, `roce` and `tcp`) and the replayer:
//!    speed ratio, iteration-time error, per-flow FCT error (builds the glue if needed).

use ina3d::record::{AggDir, AggGroup, AggTag, Class, FlowRecord, Mode};
use ina3d::replay::{self, InaConfig, InaPolicy, ReplayOptions};
use ina3d::topology::{Routing, Topology};
use ina3d::units::{Bytes, FlowId, Nanos, NodeId};
use std::time::Instant;

mod procfs;
use procfs::vm_hwm_kib;

struct Shape {
    tp: u32,
    pp: u32,
    dp: u32,
    m: u32,
    layers: u32,
    hidden: u64,
    seq: u64,
    params: f64,
    ina: bool,
}

struct Gen {
    recs: Vec<FlowRecord>,
}

impl Gen {
    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        src: NodeId,
        dst: NodeId,
        bytes: u64,
        deps: Vec<u64>,
        dur: u64,
        mode: Mode,
        class: Class,
    ) -> u64 {
        let id = self.recs.len() as u64;
        self.recs.push(FlowRecord {
            id: FlowId(id),
            src,
            dst,
            bytes: Bytes(bytes),
            deps: deps.into_iter().map(FlowId).collect(),
            gap: Nanos(0),
            dur: Nanos(dur),
            mode,
            class,
            ..Default::default()
        });
        id
    }
}

/// The synthetic Megatron-shaped trace (see the module docs).
fn synth(s: &Shape, topo: &Topology, routing: &Routing) -> Vec<FlowRecord> {
    let (tp, pp, dp, m) = (s.tp, s.pp, s.dp, s.m);
    let lps = s.layers / pp;
    let h = s.hidden;
    let flops_fwd = (24 * s.seq * h * h + 4 * s.seq * s.seq * h) as f64 * lps as f64 / tp as f64;
    let fwd_ns = (flops_fwd / (312e12 * 0.45) * 1e9) as u64;
    let bwd_ns = 2 * fwd_ns;
    let tp_bytes = s.seq * h * 2;
    let nvlink_bps = 2400e9 / 8.0;
    let ar_ns = (2.0 * (tp as f64 - 1.0) / tp as f64 * tp_bytes as f64 / nvlink_bps * 1e9) as u64;
    let p2p = s.seq * h * 2 / tp as u64;
    let gpu = |t: u32, d: u32, p: u32| topo.gpus[(t + tp * (d + dp * p)) as usize];
    let mut g = Gen { recs: Vec::new() };
    // last record of each TP group (d, p) and the p2p flows waiting for each rank
    let groups = (dp * pp) as usize;
    let gi = |d: u32, p: u32| (d + dp * p) as usize;
    let mut last: Vec<Option<u64>> = vec![None; groups];
    // recv[(d,p)][mb][phase] = ids of incoming flows, per tp rank
    let mut recv: Vec<Vec<[Vec<u64>; 2]>> =
        vec![vec![[Vec::new(), Vec::new()]; m as usize]; groups];
    // op order per stage (1F1B): (mb, phase 0 = F / 1 = B)
    let order = |p: u32| {
        let w = (pp - p - 1).min(m);
        let mut o = Vec::new();
        for k in 0..w {
            o.push((k, 0));
        }
        for k in 0..m - w {
            o.push((w + k, 0));
            o.push((k, 1));
        }
        for k in m - w..m {
            o.push((k, 1));
        }
        o
    };
    let orders: Vec<Vec<(u32, u8)>> = (0..pp).map(order).collect();
    let mut cursor = vec![0usize; pp as usize];
    // Emit ops in a global order where every dep is emitted first: sweep the stages,
    // advancing each while its next op's inputs are there.
    let mut remaining: usize = orders.iter().map(Vec::len).sum::<usize>() * dp as usize;
    while remaining > 0 {
        let mut progressed = false;
        for p in 0..pp {
            while cursor[p as usize] < orders[p as usize].len() {
                let (mb, ph) = orders[p as usize][cursor[p as usize]];
                let needs_input = (ph == 0 && p > 0) || (ph == 1 && p < pp - 1);
                if needs_input && recv[gi(0, p)][mb as usize][ph as usize].is_empty() {
                    break;
                }
                for d in 0..dp {
                    let inputs = std::mem::take(&mut recv[gi(d, p)][mb as usize][ph as usize]);
                    let mut comp = Vec::with_capacity(tp as usize);
                    for t in 0..tp {
                        let mut deps: Vec<u64> = last[gi(d, p)].into_iter().collect();
                        if !inputs.is_empty() {
                            deps.push(inputs[t as usize]);
                        }
                        let dur = if ph == 0 { fwd_ns } else { bwd_ns };
                        comp.push(g.push(
                            gpu(t, d, p),
                            gpu(t, d, p),
                            0,
                            deps,
                            dur,
                            Mode::Compute,
                            Class::Compute,
                        ));
                    }
                    let mut prev = comp;
                    for _ in 0..2 * lps {
                        let id = g.push(
                            gpu(0, d, p),
                            gpu(tp - 1, d, p),
                            tp_bytes,
                            prev,
                            ar_ns,
                            Mode::NvLink,
                            Class::Tp,
                        );
                        prev = vec![id];
                    }
                    last[gi(d, p)] = Some(prev[0]);
                    // send to the next stage (F) or the previous one (B)
                    let to = if ph == 0 && p + 1 < pp {
                        Some(p + 1)
                    } else if ph == 1 && p > 0 {
                        Some(p - 1)
                    } else {
                        None
                    };
                    if let Some(q) = to {
                        let ids: Vec<u64> = (0..tp)
                            .map(|t| {
                                g.push(
                                    gpu(t, d, p),
                                    gpu(t, d, q),
                                    p2p,
                                    prev.clone(),
                                    0,
                                    Mode::Net,
                                    Class::Pp,
                                )
                            })
                            .collect();
                        recv[gi(d, q)][mb as usize][ph as usize] = ids;
                    }
                }
                cursor[p as usize] += 1;
                remaining -= dp as usize;
                progressed = true;
            }
        }
        assert!(progressed, "1F1B emission stalled");
    }
    // DP gradient sync per (tp rank, stage) group over dp ranks, bucket after bucket
    let params_per_gpu = s.params / (pp as f64 * tp as f64);
    let bucket_params = 40e6f64.max(1e6 * dp as f64);
    let buckets = (params_per_gpu / bucket_params).ceil() as u32;
    let bucket_bytes = (bucket_params * 4.0) as u64;
    if dp > 1 {
        let mut agg_id = 0u64;
        for p in 0..pp {
            for t in 0..tp {
                let members: Vec<NodeId> = (0..dp).map(|d| gpu(t, d, p)).collect();
                // dependency of member d: its TP group's last record
                let mut before: Vec<u64> = (0..dp)
                    .map(|d| last[gi(d, p)].expect("every group ran"))
                    .collect();
                for _ in 0..buckets {
                    if s.ina {
                        let tree = routing
                            .aggregation_tree(&members, &|_| true, agg_id)
                            .expect("aggregation tree");
                        let mut up_of: std::collections::HashMap<NodeId, Vec<u64>> =
                            Default::default();
                        let mut ups = Vec::new();
                        for e in &tree.edges {
                            let deps = match members.iter().position(|&x| x == e.child) {
                                Some(d) => vec![before[d]],
                                None => up_of.get(&e.child).cloned().unwrap_or_default(),
                            };
                            let id = g.push(
                                e.child,
                                e.parent,
                                bucket_bytes,
                                deps,
                                0,
                                Mode::Ina,
                                Class::Dp,
                            );
                            g.recs[id as usize].agg = Some(AggTag {
                                id: agg_id,
                                switch: e.parent,
                                fanin: e.fanin_at_parent,
                                dir: AggDir::Up,
                                group: AggGroup::Dense,
                            });
                            up_of.entry(e.parent).or_default().push(id);
                            ups.push(id);
                        }
                        let mut down_to = vec![0u64; dp as usize];
                        for e in tree.edges.iter().rev() {
                            let id = g.push(
                                e.parent,
                                e.child,
                                bucket_bytes,
                                ups.clone(),
                                0,
                                Mode::Ina,
                                Class::Dp,
                            );
                            g.recs[id as usize].agg = Some(AggTag {
                                id: agg_id,
                                switch: e.parent,
                                fanin: e.fanin_at_parent,
                                dir: AggDir::Down,
                                group: AggGroup::Dense,
                            });
                            if let Some(d) = members.iter().position(|&x| x == e.child) {
                                down_to[d] = id;
                            }
                        }
                        before = down_to;
                        agg_id += 1;
                    } else {
                        let chunk = bucket_bytes.div_ceil(dp as u64);
                        let mut prev = before.clone();
                        for _step in 0..2 * (dp - 1) {
                            let cur: Vec<u64> = (0..dp)
                                .map(|d| {
                                    let pred = ((d + dp - 1) % dp) as usize;
                                    let mut deps = vec![prev[d as usize]];
                                    if prev[pred] != prev[d as usize] {
                                        deps.push(prev[pred]);
                                    }
                                    g.push(
                                        members[d as usize],
                                        members[((d + 1) % dp) as usize],
                                        chunk,
                                        deps,
                                        0,
                                        Mode::Net,
                                        Class::Dp,
                                    )
                                })
                                .collect();
                            prev = cur;
                        }
                        before = prev;
                    }
                }
            }
        }
    }
    g.recs
}

/// `MemAvailable` of the machine, bytes.
fn mem_available_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let l = s.lines().find(|l| l.starts_with("MemAvailable:"))?;
    l.split_whitespace()
        .nth(1)?
        .parse::<u64>()
        .ok()
        .map(|k| k * 1024)
}

fn opts() -> ReplayOptions {
    ReplayOptions {
        ina: InaConfig {
            slots: 8192,
            payload: Bytes(1000),
            window: 256,
            policy: Some(InaPolicy::BestEffort),
            classes: vec![Class::Dp],
            ..InaConfig::default()
        },
        ..ReplayOptions::default()
    }
}

struct Run {
    records: usize,
    flows: usize,
    gen_s: f64,
    sim_s: f64,
    iter_ms: f64,
    events: u64,
    resolves: u64,
    fallbacks: u64,
}

fn run(s: &Shape, spec: &str) -> Run {
    run_as(s, spec, replay::RateModel::Ideal)
}

/// [`run`] under the rate model `model`.
fn run_as(s: &Shape, spec: &str, model: replay::RateModel) -> Run {
    let topo = Topology::from_spec(spec).expect("topology");
    let routing = Routing::new(&topo, 1).expect("routing");
    let t0 = Instant::now();
    let recs = synth(s, &topo, &routing);
    let gen_s = t0.elapsed().as_secs_f64();
    let flows = recs
        .iter()
        .filter(|r| matches!(r.mode, Mode::Net | Mode::Ina))
        .count();
    let t1 = Instant::now();
    let o = ReplayOptions {
        rate_model: model,
        ..opts()
    };
    let r = replay::simulate(&recs, &topo, &routing, &o).expect("replay");
    let sim_s = t1.elapsed().as_secs_f64();
    Run {
        records: recs.len(),
        flows,
        gen_s,
        sim_s,
        iter_ms: r.summary.iteration_time_ns as f64 / 1e6,
        events: r.events,
        resolves: r.resolves,
        fallbacks: r.ina_fallbacks,
    }
}

/// One case of the ns-3 comparison: a training config with overrides, a topology, INA on/off.
struct Ns3Case {
    name: &'static str,
    /// Megatron overrides on top of `traces/example/tiny.toml`.
    set: &'static [(&'static str, &'static str)],
    topology: &'static str,
    /// `None`: INA off (ring); `Some(mode)`: e.g. `hierarchical`, every switch aggregating.
    ina: Option<&'static str>,
    /// How the glue carries net records.
    transport: ina3d::ns3::Transport,
}

/// Replays per case; the replay wall reported is their median (a run takes well under a
/// millisecond on these traces, so one sample is mostly scheduler noise). ns-3 runs once.
const REPLAY_REPEATS: usize = 5;

/// `xs` sorted in place, value at quantile `q` (nearest rank); `NaN` when empty.
fn quantile(xs: &mut [f64], q: f64) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.sort_by(f64::total_cmp);
    let i = ((q * xs.len() as f64).ceil() as usize).clamp(1, xs.len()) - 1;
    xs[i]
}

fn met(ok: bool) -> &'static str {
    if ok {
        "target met"
    } else {
        "target missed"
    }
}

/// One row of the comparison table.
struct Ns3Row {
    /// The glue's transport (`roce`, `tcp`).
    transport: &'static str,
    case: String,
    records: usize,
    net_flows: usize,
    replay_wall_s: f64,
    ns3_wall_s: f64,
    replay_iter_ns: u64,
    ns3_iter_ns: u64,
    /// Per-flow |FCT_replay − FCT_ns3| / FCT_ns3 over net+ina records (joined on flow id).
    fct_err: Vec<f64>,
    /// The same, per (mode, class), e.g. `net/pp`.
    fct_err_by: std::collections::BTreeMap<String, Vec<f64>>,
    /// The same, signed (FCT_replay / FCT_ns3 − 1), per (mode, class): which way it errs.
    fct_signed_by: std::collections::BTreeMap<String, Vec<f64>>,
    /// INA aggregations the replayer ran on the host ring instead (slot exhaustion).
    replay_fallbacks: u64,
    /// Exposed (critical-path) ns per class tp/pp/dp/emb: replayer, ns-3.
    exposed: [(u64, u64); 4],
}

/// Trace → replay (timed) → ns-3 emit → glue run (timed) → both summaries, for one case.
fn ns3_case(
    c: &Ns3Case,
    glue: &std::path::Path,
    work: &std::path::Path,
) -> Result<Ns3Row, Box<dyn std::error::Error>> {
    use ina3d::trace::{InaMode, InaSwitches, TraceOptions};
    let tiny = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("traces/example/tiny.toml");
    let mut cfg = ina3d::megatron::load_input(&tiny.display().to_string())?;
    for (k, v) in c.set {
        cfg.set(k, v)?;
    }
    cfg.validate()?;
    let mut o = TraceOptions::default();
    if let Some(mode) = c.ina {
        o.ina.mode = mode.parse::<InaMode>()?;
        o.ina.switches = "all".parse::<InaSwitches>()?;
    }
    let topo = Topology::from_spec(c.topology)?;
    let wl = ina3d::schedule::build(&cfg, &o.schedule)?;
    topo.check_world(wl.world(), wl.tp())?;
    let header = ina3d::trace::header(&cfg, &wl, &topo, &o);
    let mut recs = Vec::new();
    ina3d::trace::generate_workload(&wl, &topo, &o, &mut |r| {
        recs.push(r);
        Ok(())
    })?;
    let net_flows = recs
        .iter()
        .filter(|r| matches!(r.mode, Mode::Net | Mode::Ina))
        .count();

    // Replay: routing set-up + simulation, as `ina3d replay` does after reading the trace.
    let ropts = ReplayOptions::from_header(&header)?;
    let mut walls = Vec::with_capacity(REPLAY_REPEATS);
    let mut replayed = None;
    for _ in 0..REPLAY_REPEATS {
        let t0 = Instant::now();
        let routing = Routing::new(&topo, o.seed)?;
        let r = replay::simulate(&recs, &topo, &routing, &ropts)?;
        walls.push(t0.elapsed().as_secs_f64());
        replayed = Some(r);
    }
    let replayed = replayed.expect("REPLAY_REPEATS > 0");
    let replay_wall_s = quantile(&mut walls, 0.5);

    // ns-3: emit the glue inputs, run the glue (its wall time is measured by run_glue:
    // process start to exit, ns-3 set-up included).
    let dir = work.join(format!("{}-{}", c.name, c.transport));
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    let ina = ina3d::ns3::ina_model(&header)?;
    let eopts = ina3d::ns3::EmitOptions {
        seed: o.seed,
        transport: c.transport,
        ..Default::default()
    };
    ina3d::ns3::emit(&recs, &ina, &topo, &eopts, &dir)?;
    let ns3 = ina3d::ns3::run::run_glue(glue, &dir, |_, _| {})?;
    // run_glue wrote summary.csv with fct::summarize; read it back as the result.
    let ns3_summary = ina3d::formats::summary_csv::read(&dir.join("summary.csv"))?;

    let ns3_rows: std::collections::HashMap<u64, &ina3d::fct::FctRow> =
        ns3.rows.iter().map(|r| (r.flow_id, r)).collect();
    let mut fct_err = Vec::new();
    let mut fct_err_by: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
    let mut fct_signed_by: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
    for r in replayed
        .row_iter()
        .filter(|r| matches!(r.mode, Mode::Net | Mode::Ina))
    {
        let n = ns3_rows
            .get(&r.flow_id)
            .ok_or_else(|| format!("{}: record {} has no ns-3 fct row", c.name, r.flow_id))?;
        let e = (r.fct_ns as f64 - n.fct_ns as f64).abs() / (n.fct_ns as f64).max(1.0);
        fct_err.push(e);
        fct_err_by
            .entry(format!("{}/{}", r.mode, r.class))
            .or_default()
            .push(e);
        fct_signed_by
            .entry(format!("{}/{}", r.mode, r.class))
            .or_default()
            .push(r.fct_ns as f64 / (n.fct_ns as f64).max(1.0) - 1.0);
    }
    let (a, b) = (&replayed.summary, &ns3_summary);
    Ok(Ns3Row {
        case: c.name.to_string(),
        transport: c.transport.as_str(),
        records: recs.len(),
        net_flows,
        replay_wall_s,
        ns3_wall_s: ns3_summary.wall_time_ns as f64 / 1e9,
        replay_iter_ns: replayed.summary.iteration_time_ns,
        ns3_iter_ns: ns3_summary.iteration_time_ns,
        fct_err,
        fct_err_by,
        fct_signed_by,
        replay_fallbacks: replayed.ina_fallbacks,
        exposed: [
            (a.exposed_tp_ns, b.exposed_tp_ns),
            (a.exposed_pp_ns, b.exposed_pp_ns),
            (a.exposed_dp_ns, b.exposed_dp_ns),
            (a.exposed_emb_ns, b.exposed_emb_ns),
        ],
    })
}

/// The same small traces through the ns-3 glue and through the replayer, in one run: speed
/// ratio (ns-3 wall / replay wall, target ≥ 1,000×), iteration-time error (target ≤ 5 %)
/// and per-flow FCT error, for ring and INA. Prints figures, asserts nothing about time.
fn ns3_vs_replayer_ratio() {
    println!("ns-3 glue vs replayer (traces/example/tiny.toml; replay wall = median of {REPLAY_REPEATS} runs, routing set-up included; ns-3 wall = one glue process, start to exit):");
    let glue = match ina3d::ns3::run::build_glue(
        &ina3d::ns3::run::glue_source_dir(),
        &ina3d::ns3::run::glue_binary(),
    ) {
        Ok(g) => g,
        Err(e) => {
            println!("  could not build the ns-3 glue ({e}); run `make glue` (installs Debian's ns-3 when missing)");
            return;
        }
    };
    let work = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-ns3");
    if let Err(e) = std::fs::create_dir_all(&work) {
        println!("  cannot create {}: {e}", work.display());
        return;
    }
    let ls = "leaf-spine:leaves=2,spines=2,hosts-per-leaf=4,gpus-per-server=2";
    let shapes = [
        ("ring-8", &[][..], ls, None),
        ("ina-hier-8", &[][..], ls, Some("hierarchical")),
        (
            "ring-16-ft4",
            &[("data_parallel_size", "4")][..],
            "fat-tree:k=4,gpus-per-server=2",
            None,
        ),
        (
            "ina-hier-16-ft4",
            &[("data_parallel_size", "4")][..],
            "fat-tree:k=4,gpus-per-server=2",
            Some("hierarchical"),
        ),
    ];
    let cases: Vec<Ns3Case> = [ina3d::ns3::Transport::Roce, ina3d::ns3::Transport::Tcp]
        .into_iter()
        .flat_map(|transport| {
            shapes
                .iter()
                .map(move |&(name, set, topology, ina)| Ns3Case {
                    name,
                    set,
                    topology,
                    ina,
                    transport,
                })
        })
        .collect();
    println!(
        "  {:<16} {:>5} {:>7} {:>9} {:>11} {:>9} {:>9} {:>12} {:>12} {:>8} {:>15}",
        "case",
        "glue",
        "records",
        "net flows",
        "replay wall",
        "ns-3 wall",
        "ratio",
        "replay iter",
        "ns-3 iter",
        "iter err",
        "FCT err med/p95"
    );
    let mut rows = Vec::new();
    for c in &cases {
        match ns3_case(c, &glue, &work) {
            Ok(r) => {
                let ratio = r.ns3_wall_s / r.replay_wall_s;
                let iter_err =
                    (r.replay_iter_ns as f64 - r.ns3_iter_ns as f64).abs() / r.ns3_iter_ns as f64;
                let mut all = r.fct_err.clone();
                let (med, p95) = (quantile(&mut all, 0.5), quantile(&mut all, 0.95));
                println!(
                    "  {:<16} {:>5} {:>7} {:>9} {:>9.3}ms {:>8.2}s {:>8.0}× {:>10.3}ms {:>10.3}ms {:>7.2}% {:>6.1}%/{:>6.1}%",
                    r.case,
                    c.transport.as_str(),
                    r.records,
                    r.net_flows,
                    r.replay_wall_s * 1e3,
                    r.ns3_wall_s,
                    ratio,
                    r.replay_iter_ns as f64 / 1e6,
                    r.ns3_iter_ns as f64 / 1e6,
                    iter_err * 100.0,
                    med * 100.0,
                    p95 * 100.0
                );
                rows.push((r, ratio, iter_err));
            }
            Err(e) => println!("  {:<16} could not run: {e}", c.name),
        }
    }
    for (r, ratio, iter_err) in &rows {
        println!(
            "  {} ({}): speed ratio {:.0}× ({} ≥ 1,000×); iteration-time error {:.2} % ({} ≤ 5 %){}",
            r.case,
            r.transport,
            ratio,
            met(*ratio >= 1000.0),
            iter_err * 100.0,
            met(*iter_err <= 0.05),
            if r.replay_fallbacks > 0 {
                format!("; {} replayer INA fallbacks", r.replay_fallbacks)
            } else {
                String::new()
            }
        );
        let by: Vec<String> = r
            .fct_err_by
            .iter()
            .map(|(k, v)| {
                let mut v = v.clone();
                let mut sg = r.fct_signed_by[k].clone();
                format!(
                    "{k} n={} med {:.1}% p95 {:.1}% (signed med {:+.1}%)",
                    v.len(),
                    quantile(&mut v, 0.5) * 100.0,
                    quantile(&mut v, 0.95) * 100.0,
                    quantile(&mut sg, 0.5) * 100.0
                )
            })
            .collect();
        println!(
            "    per-class FCT error (signed: replay − ns-3, over ns-3): {}",
            by.join("; ")
        );
        let ex: Vec<String> = ["tp", "pp", "dp", "emb"]
            .iter()
            .zip(r.exposed)
            .map(|(c, (a, b))| format!("{c} {:.3}/{:.3}", a as f64 / 1e6, b as f64 / 1e6))
            .collect();
        println!("    exposed ms replay/ns-3: {}", ex.join(", "));
    }
    println!(
        "  outputs (both back-ends' inputs, ns-3 fct.csv and summary.csv) in {}",
        work.display()
    );
}

/// GPT-3 175B from the project's generator (as `ina3d trace gpt3-175b --tp 8 --pp 16
/// --dp 8 --set global_batch_size=1536 --ina hierarchical --ina-switches all`).
fn generated(ina: bool) -> Result<(), Box<dyn std::error::Error>> {
    use ina3d::trace::{InaMode, InaSwitches, TraceOptions};
    let mut cfg = ina3d::megatron::load_input("gpt3-175b")?;
    for (k, v) in [
        ("tensor_model_parallel_size", "8"),
        ("pipeline_model_parallel_size", "16"),
        ("data_parallel_size", "8"),
        ("global_batch_size", "1536"),
    ] {
        cfg.set(k, v)?;
    }
    cfg.validate()?;
    let mut o = TraceOptions::default();
    if ina {
        o.ina.mode = "hierarchical".parse::<InaMode>()?;
        o.ina.switches = "all".parse::<InaSwitches>()?;
    }
    let topo = Topology::from_spec("fat-tree:k=16")?;
    let t0 = Instant::now();
    let wl = ina3d::schedule::build(&cfg, &o.schedule)?;
    let header = ina3d::trace::header(&cfg, &wl, &topo, &o);
    let mut recs = Vec::new();
    ina3d::trace::generate_workload(&wl, &topo, &o, &mut |r| {
        recs.push(r);
        Ok(())
    })?;
    let gen_s = t0.elapsed().as_secs_f64();
    let flows = recs
        .iter()
        .filter(|r| matches!(r.mode, Mode::Net | Mode::Ina))
        .count();
    let routing = Routing::new(&topo, o.seed)?;
    // the ideal model, as the figures of this table were set (`-- models` prices DCQCN)
    let opts = ReplayOptions {
        rate_model: replay::RateModel::Ideal,
        ..ReplayOptions::from_header(&header)?
    };
    let t1 = Instant::now();
    let r = replay::simulate(&recs, &topo, &routing, &opts)?;
    let sim_s = t1.elapsed().as_secs_f64();
    println!(
        "GPT-3 175B TP8·PP16·DP8 m=192 INA {} [generator]: {} records, {} network flows; generated in {:.1} s; \
         replay wall {:.2} s (target ≤ 60 s), {} events, {} re-solves, {} INA fallbacks; iteration {:.1} ms; \
         peak RSS so far {:.2} GiB (target ≤ 4 GiB)",
        if ina { "on" } else { "off" },
        recs.len(),
        flows,
        gen_s,
        sim_s,
        r.events,
        r.resolves,
        r.ina_fallbacks,
        r.summary.iteration_time_ns as f64 / 1e6,
        vm_hwm_kib().unwrap_or(0) as f64 / (1024.0 * 1024.0)
    );
    Ok(())
}

/// Cluster scale (issue 13), under the ideal rate model (the DCQCN model, the default
/// for RoCE, is priced at 1,024 GPUs by `-- models`): GPT-3 175B TP8·PP16 on fat-tree
/// k=64 at DP 256 (32,768 GPUs, ring and hierarchical INA) and DP 512 (65,536 GPUs,
/// ring), one NCCL channel (the
/// ≈ 17.7 M-record trace the 60 s / 4 GiB target was set on): generated in memory and
/// replayed as `ina3d replay --from` does, and the 32,768-GPU ring also from a trace file
/// (`ina3d trace` then `ina3d replay FILE`; writing the file is not timed). Each case runs
/// in a child process of this bench so that its peak RSS (VmHWM) and CPU time are its own;
/// the load average is printed beside them (the machine is shared: wall time alone says
/// little when other work holds the cores).
fn scale() {
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return println!("cluster scale: cannot re-run this bench: {e}"),
    };
    println!(
        "cluster scale (GPT-3 175B TP8·PP16, fat-tree k=64, one NCCL channel; one process per case):"
    );
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-scale");
    // (DP, INA, source, records): the record counts of these traces, for the memory check
    for (dp, ina, source, records) in [
        (256, "off", "generator", 17_686_016u64),
        (256, "hierarchical", "generator", 1_073_152),
        (256, "off", "file", 17_686_016),
        (512, "off", "generator", 67_960_320),
    ] {
        // at the ≈ 108 B/record measured at 32,768 GPUs (101 B at 65,536; 30 Nov 2026, was
        // ≈ 300 B before the record table), a case that does not fit the memory available now would push
        // the shared machine into the OOM killer: say so instead of starting it
        let need = records * SCALE_BYTES_PER_RECORD;
        let avail = mem_available_bytes().unwrap_or(0);
        if need > avail {
            println!(
                "  {} GPUs DP{dp} INA {ina} [{source}]: NOT RUN: needs ≈ {:.1} GiB ({records} records × {SCALE_BYTES_PER_RECORD} B), {:.1} GiB available",
                8 * 16 * dp,
                need as f64 / (1u64 << 30) as f64,
                avail as f64 / (1u64 << 30) as f64
            );
            continue;
        }
        let mut args = vec!["scale-case".to_string(), dp.to_string(), ina.to_string()];
        if source == "file" {
            let trace = dir.join(format!("gpt3-dp{dp}-{ina}.csv.gz"));
            if let Err(e) = scale_trace_file(dp, ina, &trace) {
                println!("  DP{dp} INA {ina} [file]: could not write the trace: {e}");
                continue;
            }
            args.push(trace.display().to_string());
        }
        let out = std::process::Command::new(&exe).args(&args).output();
        match out {
            Ok(o) => {
                print!("{}", String::from_utf8_lossy(&o.stdout));
                if !o.status.success() {
                    println!(
                        "  DP{dp} INA {ina} [{source}]: failed: {}",
                        String::from_utf8_lossy(&o.stderr)
                    );
                }
            }
            Err(e) => println!("  DP{dp} INA {ina} [{source}]: could not start: {e}"),
        }
    }
}

/// Peak bytes per record of the cluster-scale replays (measured, rounded up): what the
/// memory check before each case assumes.
const SCALE_BYTES_PER_RECORD: u64 = 120;

/// The job of a cluster-scale case.
fn scale_spec(dp: u32, ina: &str) -> Result<ina3d::pipeline::JobSpec, Box<dyn std::error::Error>> {
    use ina3d::pipeline::ParallelSizes;
    Ok(ina3d::pipeline::JobSpec {
        input: "gpt3-175b".into(),
        topology: "fat-tree:k=64".into(),
        sizes: ParallelSizes {
            tp: Some(8),
            pp: Some(16),
            dp: Some(dp),
            ..Default::default()
        },
        nccl_channels: Some(1),
        ina: ina3d::trace::InaConfig {
            mode: ina.parse()?,
            ..Default::default()
        },
        ..Default::default()
    })
}

/// Write the trace of a cluster-scale case to `path` (as `ina3d trace` does), unless a
/// previous run left it there.
fn scale_trace_file(
    dp: u32,
    ina: &str,
    path: &std::path::Path,
) -> Result<(), Box<dyn std::error::Error>> {
    if path.exists() {
        return Ok(());
    }
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d)?;
    }
    let spec = scale_spec(dp, ina)?;
    let job = ina3d::pipeline::Job::prepare(&spec)?;
    let opts = spec.trace_options()?;
    ina3d::pipeline::generate_trace(&job, &opts, Some(path), false, &mut |_| {})?;
    Ok(())
}

/// User + system CPU seconds of this process so far.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return f64::NAN;
    }
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

/// One cluster-scale case, in this process: replays from the generator or, given one,
/// from a trace file; prints wall, CPU, peak RSS and bytes per record beside the targets
/// (60 s and 4 GiB at 32,768 GPUs; 150 s and 8 GiB at 65,536).
fn scale_case(dp: u32, ina: &str, file: Option<&str>) -> Result<(), Box<dyn std::error::Error>> {
    let spec = scale_spec(dp, ina)?;
    let (load0, cpu0) = (procfs::load_average(), cpu_seconds());
    let t0 = Instant::now();
    let r = match file {
        None => {
            ina3d::pipeline::replay_job(&spec, false, ina3d::replay::RateModel::Ideal, &mut |_| {})?
                .1
        }
        Some(f) => {
            let o = ina3d::pipeline::FileOptions {
                model: ina3d::replay::RateModel::Ideal,
                ..Default::default()
            };
            ina3d::pipeline::replay_file(std::path::Path::new(f), &o)?.result
        }
    };
    // the outputs are part of a replay: write them as `ina3d replay -o` does; at 65,536
    // GPUs as `--no-fct` does (the per-record files would be 9 GB)
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("target/bench-scale/out-dp{dp}-{ina}"));
    let per_record = if dp >= 512 {
        ina3d::replay::PerRecord::Skip
    } else {
        ina3d::replay::PerRecord::Write
    };
    ina3d::replay::write_outputs_with(&out, &r, per_record)?;
    let wall = t0.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    let _ = std::fs::remove_dir_all(&out);
    let hwm = vm_hwm_kib().unwrap_or(0) as f64 * 1024.0;
    let gib = hwm / (1u64 << 30) as f64;
    let records = r.summary.records.max(1);
    let targets = if dp == 256 {
        format!(
            " (target ≤ 60 s: {:.2}× wall, {:.2}× CPU; ≤ 4 GiB: {:.2}×)",
            wall / 60.0,
            cpu / 60.0,
            gib / 4.0
        )
    } else {
        format!(
            " (no fct.csv, fct.txt; target ≤ 150 s: {:.2}× wall, {:.2}× CPU; ≤ 8 GiB: {:.2}×)",
            wall / 150.0,
            cpu / 150.0,
            gib / 8.0
        )
    };
    println!(
        "  {} GPUs DP{dp} INA {ina} [{}]: {records} records, {} + replay + outputs: wall {wall:.1} s, CPU {cpu:.1} s (load average {load0} → {}), peak RSS {gib:.2} GiB, {:.0} B/record{targets}; iteration {:.1} ms",
        8 * 16 * dp,
        if file.is_some() { "file" } else { "generator" },
        if file.is_some() { "read" } else { "generate" },
        procfs::load_average(),
        hwm / records as f64,
        r.summary.iteration_time_ns as f64 / 1e6
    );
    Ok(())
}

fn gpt3(ina: bool, pp: u32, dp: u32, m: u32) -> Shape {
    Shape {
        tp: 8,
        pp,
        dp,
        m,
        layers: 96,
        hidden: 12288,
        seq: 2048,
        params: 175e9 * pp as f64 / 16.0,
        ina,
    }
}

/// The 1,024-GPU synthetic GPT-3 traces (INA on, and ring) under each rate model: what
/// the DCQCN model costs over ideal max-min rates (`-- models`).
fn rate_models() {
    println!("rate models, GPT-3 175B TP8·PP16·DP8 m=192 [synthetic], fat-tree k=16:");
    for ina in [true, false] {
        let mut base = None;
        for model in [replay::RateModel::Ideal, replay::RateModel::Dcqcn] {
            let r = run_as(&gpt3(ina, 16, 8, 192), "fat-tree:k=16", model);
            let b = *base.get_or_insert(r.sim_s);
            println!(
                "  INA {:<10} {model:<6}: {} network flows, replay wall {:.2} s ({:.2}× of ideal), {} events, {} re-solves, iteration {:.3} ms",
                if ina { "on" } else { "off (ring)" },
                r.flows,
                r.sim_s,
                r.sim_s / b,
                r.events,
                r.resolves,
                r.iter_ms
            );
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(k) = args.iter().position(|a| a == "scale-case") {
        let dp = args.get(k + 1).and_then(|d| d.parse().ok()).unwrap_or(256);
        let ina = args.get(k + 2).map_or("off", String::as_str);
        let file = args.get(k + 3).map(String::as_str);
        if let Err(e) = scale_case(dp, ina, file) {
            eprintln!("{e}");
            std::process::exit(1);
        }
        return;
    }
    if args.iter().any(|a| a == "scale") {
        scale();
        return;
    }
    let quick = std::env::args().any(|a| a == "quick");
    if std::env::args().any(|a| a == "ns3") {
        ns3_vs_replayer_ratio();
        return;
    }
    if std::env::args().any(|a| a == "models") {
        rate_models();
        return;
    }
    println!("== replay benchmark (synthetic Megatron-shaped traces; see benches/replay.rs) ==");
    if !quick {
        if let Err(e) = generated(true) {
            println!("GPT-3 175B [generator]: could not run: {e}");
        }
        for ina in [true, false] {
            let r = run(&gpt3(ina, 16, 8, 192), "fat-tree:k=16");
            println!(
                "GPT-3 175B TP8·PP16·DP8 m=192 INA {} [synthetic]: {} records, {} network flows; generated in {:.1} s; \
                 replay wall {:.1} s (target ≤ 60 s), {} events, {} re-solves, {} INA fallbacks; \
                 iteration {:.1} ms; peak RSS so far {:.2} GiB (target ≤ 4 GiB)",
                if ina { "on" } else { "off (ring)" },
                r.records,
                r.flows,
                r.gen_s,
                r.sim_s,
                r.events,
                r.resolves,
                r.fallbacks,
                r.iter_ms,
                vm_hwm_kib().unwrap_or(0) as f64 / (1024.0 * 1024.0)
            );
        }
    }
    println!("growth (TP8·PP4, m=32, ring DP; F = network flows; replay wall / (F·log2 F) relative to 1×):");
    let mut base = None;
    for (mult, dp, spec) in [
        (1, 2, "fat-tree:k=8"),
        (4, 8, "fat-tree:k=16"),
        (16, 32, "fat-tree:k=16"),
    ] {
        let s = Shape {
            tp: 8,
            pp: 4,
            dp,
            m: 32,
            layers: 96,
            hidden: 12288,
            seq: 2048,
            params: 175e9 / 4.0,
            ina: false,
        };
        let r = run(&s, spec);
        let f = r.flows as f64;
        let per = r.sim_s / (f * f.log2());
        let b = *base.get_or_insert(per);
        println!(
            "  {mult:>2}× ({} GPUs): {} records, {} flows, replay {:.2} s, {:.0} ns/record, cost/(F log F) = {:.2}× of 1×",
            8 * 4 * dp,
            r.records,
            r.flows,
            r.sim_s,
            r.sim_s * 1e9 / r.records as f64,
            per / b
        );
    }
    ns3_vs_replayer_ratio();
    if !quick {
        scale();
    }
}
