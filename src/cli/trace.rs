//! `ina3d trace`: Megatron job + topology → per-flow DAG trace file.

use anyhow::{bail, Context};
use clap::{Arg, ArgAction, ArgMatches, Command};
use ina3d::megatron::{self, TrainingConfig};
use ina3d::schedule::{self, Gpu, ScheduleOptions};
use ina3d::topology::Topology;
use ina3d::trace::{
    self, parse_classes, Algorithm, InaConfig, InaMode, InaPolicy, InaSwitches, TraceOptions,
    TraceWriter,
};
use ina3d::units::Bytes;
use std::path::PathBuf;

/// Megatron arguments that can be overridden on the command line with Megatron's own flag
/// names (`true`: a bare boolean flag).
const MEGATRON_FLAGS: &[(&str, bool)] = &[
    ("tensor-model-parallel-size", false),
    ("pipeline-model-parallel-size", false),
    ("virtual-pipeline-model-parallel-size", false),
    ("num-layers-per-virtual-pipeline-stage", false),
    ("context-parallel-size", false),
    ("data-parallel-size", false),
    ("world-size", false),
    ("num-layers", false),
    ("hidden-size", false),
    ("ffn-hidden-size", false),
    ("num-attention-heads", false),
    ("num-query-groups", false),
    ("group-query-attention", true),
    ("seq-length", false),
    ("max-position-embeddings", false),
    ("micro-batch-size", false),
    ("global-batch-size", false),
    ("vocab-size", false),
    ("make-vocab-size-divisible-by", false),
    ("sequence-parallel", true),
    ("use-distributed-optimizer", true),
    ("overlap-grad-reduce", true),
    ("overlap-param-gather", true),
    ("accumulate-allreduce-grads-in-fp32", true),
    ("grad-reduce-in-bf16", true),
    ("bf16", true),
    ("fp16", true),
    ("untie-embeddings-and-output-weights", true),
    ("swiglu", true),
    ("recompute-granularity", false),
    ("use-tp-pp-dp-mapping", true),
];

/// Megatron-named overrides (`--num-layers 40`, `--sequence-parallel`, …), in table order.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// (Megatron key, value).
    pub pairs: Vec<(String, String)>,
}

impl clap::FromArgMatches for Overrides {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut pairs = Vec::new();
        for &(name, is_bool) in MEGATRON_FLAGS {
            if is_bool {
                if m.get_flag(name) {
                    pairs.push((name.to_string(), "True".to_string()));
                }
            } else if let Some(v) = m.get_one::<String>(name) {
                pairs.push((name.to_string(), v.clone()));
            }
        }
        Ok(Overrides { pairs })
    }
    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl clap::Args for Overrides {
    fn augment_args(mut cmd: Command) -> Command {
        for &(name, is_bool) in MEGATRON_FLAGS {
            let a = Arg::new(name)
                .long(name)
                .help_heading("Megatron arguments (override the input)");
            cmd = cmd.arg(if is_bool {
                a.action(ArgAction::SetTrue)
            } else {
                a.value_name("VALUE").num_args(1)
            });
        }
        cmd
    }
    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

/// The job: Megatron input and overrides, topology, compute model, ECMP seed and host
/// algorithm (shared by `ina3d trace` and `ina3d plan`).
#[derive(clap::Args, Debug)]
pub struct JobArgs {
    /// Megatron log, launch script, config file (TOML/JSON) or preset name (e.g. gpt3-13b).
    pub input: String,
    /// Topology: a builder spec (`fat-tree:k=8`, `leaf-spine:leaves=4,spines=2,hosts-per-leaf=8`, …) or an HPCC topology.txt.
    #[arg(long)]
    pub topology: String,
    /// Host algorithm for collectives that cross the network: ring, dbt, hd, hierarchical.
    #[arg(long, default_value = "ring")]
    pub collective: String,
    /// GPU preset for compute time: a100 (312 TF), h100 (989), h800 (989), h20 (148), or NAME:TFLOPS.
    #[arg(long, default_value = "a100")]
    pub gpu: String,
    /// Model FLOPs utilisation before calibration.
    #[arg(long, default_value_t = 0.45)]
    pub mfu: f64,
    /// Do not calibrate compute against the log's timers / iteration time.
    #[arg(long)]
    pub no_calibrate: bool,
    /// Use this compute scale factor instead of calibrating.
    #[arg(long)]
    pub calibration_factor: Option<f64>,
    /// ECMP / tie-break seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Iterations to generate.
    #[arg(long, default_value_t = 1)]
    pub iterations: u32,
    /// Latency α (ns) per algorithm step of collectives inside an NVLink domain
    /// (default: twice the topology's NVLink link delay, or 1000 without NVLink links).
    #[arg(long, value_name = "NS")]
    pub nvlink_step_latency: Option<u64>,
    /// Tensor-parallel size (= --tensor-model-parallel-size).
    #[arg(long)]
    pub tp: Option<u32>,
    /// Pipeline-parallel size.
    #[arg(long)]
    pub pp: Option<u32>,
    /// Data-parallel size.
    #[arg(long)]
    pub dp: Option<u32>,
    /// Virtual pipeline chunks per stage (interleaved 1F1B).
    #[arg(long)]
    pub vpp: Option<u32>,
    /// Context-parallel size.
    #[arg(long)]
    pub cp: Option<u32>,
    /// Any Megatron argument, `key=value` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Megatron-named overrides.
    #[command(flatten)]
    pub overrides: Overrides,
}

/// The INA switch model: which switches aggregate, their slot pools, packets and windows
/// (shared by `ina3d trace` and `ina3d plan`).
#[derive(clap::Args, Debug)]
pub struct InaModelArgs {
    /// Switches that can aggregate: all (default: a multi-switch tree can form over any
    /// group), tor (only switches with GPUs attached), or comma-separated node ids.
    #[arg(long, default_value = "all")]
    pub ina_switches: String,
    /// Aggregator slots per switch.
    #[arg(long, default_value_t = 8192)]
    pub ina_slots: u32,
    /// Payload bytes per slot (one packet).
    #[arg(long, default_value_t = 256)]
    pub ina_payload: u64,
    /// Outstanding packets per worker.
    #[arg(long, default_value_t = 256)]
    pub ina_window: u32,
    /// Traffic classes allowed to aggregate, in priority order.
    #[arg(long, default_value = "tp,dp,emb")]
    pub ina_classes: String,
}

/// Arguments of `ina3d trace`.
#[derive(clap::Args, Debug)]
#[command(after_long_help = ina3d::topology::Topology::SPEC_HELP)]
pub struct Args {
    /// The job.
    #[command(flatten)]
    pub job: JobArgs,
    /// Output trace (CSV; gzip when the name ends in .gz).
    #[arg(short = 'o', long)]
    pub output: PathBuf,
    /// In-network aggregation: off, switchml, hierarchical, atp, rina (planned: use --plan).
    #[arg(long, default_value = "off")]
    pub ina: String,
    /// Slot policy: static, best-effort, priority (default: best-effort for atp, planned
    /// with --plan, else static).
    #[arg(long)]
    pub ina_policy: Option<String>,
    /// The INA switch model.
    #[command(flatten)]
    pub model: InaModelArgs,
    /// Lower this plan (`ina3d plan`): each group's host algorithm or tree and its slot
    /// reservations (INA mode and slot policy `planned`). The plan must have been made
    /// for the same job, topology, seed and INA switch options; what differs is named.
    #[arg(long, value_name = "PLAN.json", conflicts_with_all = ["ina", "ina_policy"])]
    pub plan: Option<PathBuf>,
}

/// The training config after every override, validated (the overrides apply before the
/// check, so they can make a job valid that its input alone is not).
pub fn load_config(a: &JobArgs) -> anyhow::Result<TrainingConfig> {
    let mut pairs: Vec<(String, String)> = a.overrides.pairs.clone();
    for (k, v) in [
        ("tensor_model_parallel_size", a.tp),
        ("pipeline_model_parallel_size", a.pp),
        ("context_parallel_size", a.cp),
        ("data_parallel_size", a.dp),
        ("virtual_pipeline_model_parallel_size", a.vpp),
    ] {
        if let Some(v) = v {
            pairs.push((k.to_string(), v.to_string()));
        }
    }
    for kv in &a.set {
        let Some((k, v)) = kv.split_once('=') else {
            bail!("--set `{kv}`: expected KEY=VALUE")
        };
        pairs.push((k.trim().to_string(), v.trim().to_string()));
    }
    let cfg = megatron::load_with_overrides(std::slice::from_ref(&a.input), &pairs)
        .with_context(|| format!("reading `{}` with the overrides", a.input))?;
    for w in &cfg.warnings {
        eprintln!("warning: {w}");
    }
    Ok(cfg)
}

/// Trace options from the job and INA model flags, INA `mode` with slot `policy`
/// (`None`: best-effort for atp, planned for planned, else static).
pub fn options(
    j: &JobArgs,
    m: &InaModelArgs,
    mode: InaMode,
    policy: Option<&str>,
) -> anyhow::Result<TraceOptions> {
    if m.ina_payload == 0 || m.ina_window == 0 || m.ina_slots == 0 {
        bail!("--ina-slots, --ina-payload and --ina-window must be positive");
    }
    let ina = InaConfig {
        mode,
        switches: m
            .ina_switches
            .parse::<InaSwitches>()
            .map_err(anyhow::Error::msg)
            .context("--ina-switches")?,
        slots: m.ina_slots,
        payload: Bytes(m.ina_payload),
        window: m.ina_window,
        policy: match policy {
            Some(p) => p
                .parse::<InaPolicy>()
                .map_err(anyhow::Error::msg)
                .context("--ina-policy")?,
            None if mode == InaMode::Atp => InaPolicy::BestEffort,
            None if mode == InaMode::Planned => InaPolicy::Planned,
            None => InaPolicy::Static,
        },
        classes: parse_classes(&m.ina_classes)
            .map_err(anyhow::Error::msg)
            .context("--ina-classes")?,
    };
    if (ina.policy == InaPolicy::Planned) != (mode == InaMode::Planned) {
        bail!("the `planned` INA mode and slot policy go together, from --plan");
    }
    let schedule = ScheduleOptions {
        gpu: Gpu::preset(&j.gpu).with_context(|| {
            format!(
                "--gpu `{}`: expected a100, h100, h800, h20 or NAME:TFLOPS",
                j.gpu
            )
        })?,
        mfu: j.mfu,
        calibrate: !j.no_calibrate,
        factor: j.calibration_factor,
    };
    Ok(TraceOptions {
        schedule,
        collective: j
            .collective
            .parse::<Algorithm>()
            .map_err(anyhow::Error::msg)
            .context("--collective")?,
        ina,
        seed: j.seed,
        plan: None,
        iterations: j.iterations,
        nvlink_step_latency: j.nvlink_step_latency.map(ina3d::units::Nanos),
    })
}

/// Run `ina3d trace`.
pub fn run(a: Args) -> anyhow::Result<()> {
    let cfg = load_config(&a.job)?;
    let mode = match &a.plan {
        Some(_) => InaMode::Planned,
        None => a
            .ina
            .parse::<InaMode>()
            .map_err(anyhow::Error::msg)
            .context("--ina")?,
    };
    if mode == InaMode::Planned && a.plan.is_none() {
        bail!("--ina planned lowers a plan: give --plan PLAN.json (made by `ina3d plan`)");
    }
    let mut opts = options(&a.job, &a.model, mode, a.ina_policy.as_deref())?;
    let topo = Topology::from_spec(&a.job.topology)
        .with_context(|| format!("--topology `{}`", a.job.topology))?;
    let wl = schedule::build(&cfg, &opts.schedule).context("building the 3D-parallel workload")?;
    topo.check_world(wl.world(), wl.tp())
        .context("the job does not fit the topology")?;
    if let Some(p) = &a.plan {
        let plan = ina3d::formats::plan_json::read(p)?;
        trace::planned::check_plan_job(&plan, &trace::header(&cfg, &wl, &topo, &opts))
            .with_context(|| format!("--plan {}", p.display()))?;
        opts.plan = Some(plan);
    }
    let header = trace::header(&cfg, &wl, &topo, &opts);
    let mut w = TraceWriter::create(&a.output, &header)?;
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg} [{elapsed}]")
            .expect("static template"),
    );
    bar.set_message("generating trace");
    let mut n = 0u64;
    let stats = trace::generate_workload(&wl, &topo, &opts, &mut |r| {
        n += 1;
        if n.is_multiple_of(1 << 16) {
            bar.set_message(format!("{n} records"));
            bar.tick();
        }
        Ok(w.write(&r)?)
    })
    .with_context(|| format!("generating `{}`", a.output.display()))?;
    let path = w.finish()?;
    bar.finish_and_clear();
    let c = &wl.calibration;
    println!("wrote {} ({} records)", path.display(), stats.records);
    if let Some(p) = &opts.plan {
        println!(
            "  lowered plan ({} {}): predicted iteration {:.3} ms; `ina3d replay` prints its error",
            p.solver.used,
            p.solver.status,
            p.prediction.iteration_ns / 1e6
        );
    }
    println!(
        "  TP{} PP{} DP{} CP{} v{} on {} GPUs, m = {} micro-batches, warm-up per stage {:?}",
        wl.tp(),
        wl.pp(),
        wl.dp(),
        wl.groups.cp,
        wl.vpp,
        wl.world(),
        wl.microbatches,
        wl.stages.iter().map(|s| s.warmup).collect::<Vec<_>>()
    );
    println!(
        "  compute: {} at {} TF × MFU {} × calibration {:.4} ({})",
        c.gpu.name,
        c.gpu.peak_tflops,
        c.mfu,
        c.factor,
        c.source.as_str()
    );
    for ((class, mode), (count, bytes)) in &stats.by_class_mode {
        println!(
            "  {:<8} {:<8} {:>10} records {:>20} B",
            class.as_str(),
            mode.as_str(),
            count,
            bytes.0
        );
    }
    if stats.ina_fallbacks > 0 {
        println!(
            "  note: {} INA-eligible collectives had no aggregating switch above all their members (--ina-switches {}) and use the host algorithm",
            stats.ina_fallbacks, a.model.ina_switches
        );
    }
    if stats.hd_fallbacks > 0 {
        println!("  note: {} halving-doubling collectives had a non-power-of-two group and used the ring", stats.hd_fallbacks);
    }
    Ok(())
}
