//! `ina3d trace`: Megatron job + topology → per-flow DAG trace file.

use anyhow::{bail, Context};
use clap::{Arg, ArgAction, ArgMatches, Command};
use ina3d::megatron::{self, TrainingConfig};
use ina3d::schedule::{self, Gpu, MoeRouting, ScheduleOptions, WarmupRule};
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
    ("cp-comm-type", false),
    ("num-experts", false),
    ("moe-router-topk", false),
    ("expert-model-parallel-size", false),
    ("expert-tensor-parallel-size", false),
    ("moe-layer-freq", false),
    ("moe-token-dispatcher-type", false),
    ("moe-expert-capacity-factor", false),
    ("moe-ffn-hidden-size", false),
    ("moe-shared-expert-intermediate-size", false),
    ("normalization", false),
    ("disable-bias-linear", true),
    ("position-embedding-type", false),
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

/// The job and how to model it: the input, Megatron overrides, the compute model and the
/// modelling choices. Shared by `ina3d trace` and `ina3d export aicb`, so both read a job
/// the same way.
#[derive(clap::Args, Debug)]
pub struct JobArgs {
    /// Megatron log, launch script, config file (TOML/JSON) or preset name (e.g. gpt3-13b).
    pub input: String,
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
    /// How MoE tokens spread over the experts: `uniform`, or `zipf:S` (expert e gets a
    /// share ∝ (e+1)^-S, so the first EP rank is the straggler).
    #[arg(long, default_value = "uniform", value_name = "ROUTING")]
    pub moe_routing: String,
    /// Interleaved 1F1B as Megatron before November 2024: with as many micro-batches as
    /// pipeline stages, every step is a warm-up step.
    #[arg(long)]
    pub legacy_interleaved_warmup: bool,
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
    /// Expert-parallel size (= --expert-model-parallel-size).
    #[arg(long)]
    pub ep: Option<u32>,
    /// Any Megatron argument, `key=value` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Megatron-named overrides.
    #[command(flatten)]
    pub overrides: Overrides,
}

/// Arguments of `ina3d trace`.
#[derive(clap::Args, Debug)]
#[command(after_long_help = ina3d::topology::Topology::SPEC_HELP)]
pub struct Args {
    /// The job.
    #[command(flatten)]
    pub job: JobArgs,
    /// Topology: a builder spec (`fat-tree:k=8`, `leaf-spine:leaves=4,spines=2,hosts-per-leaf=8`, …) or an HPCC topology.txt.
    #[arg(long)]
    pub topology: String,
    /// Output trace (CSV; gzip when the name ends in .gz).
    #[arg(short = 'o', long)]
    pub output: PathBuf,
    /// Host algorithm for collectives that cross the network: ring, dbt, hd, hierarchical.
    #[arg(long, default_value = "ring")]
    pub collective: String,
    /// In-network aggregation: off, switchml, hierarchical, atp, rina.
    #[arg(long, default_value = "off")]
    pub ina: String,
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
    /// Slot policy: static, best-effort, priority (default: best-effort for atp, else static).
    #[arg(long)]
    pub ina_policy: Option<String>,
    /// Traffic classes allowed to aggregate, in priority order (tp, pp, dp, emb, cp, ep;
    /// all-to-alls and point-to-point transfers are never aggregated).
    #[arg(long, default_value = "tp,dp,emb")]
    pub ina_classes: String,
    /// ECMP / tie-break seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Iterations to generate.
    #[arg(long, default_value_t = 1)]
    pub iterations: u32,
    /// Latency α (ns) per algorithm step of collectives inside an NVLink domain
    /// (default 3400: NCCL's own estimate for a ring step over NVLink with its Simple
    /// protocol, `src/graph/tuning.cc`).
    #[arg(long, value_name = "NS")]
    pub nvlink_step_latency: Option<u64>,
    /// NCCL channels each network collective is split over, each its own connection with
    /// its own ECMP path (default: NCCL's rule, 2 per NIC port of a GPU).
    #[arg(long, value_name = "N")]
    pub nccl_channels: Option<u32>,
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
        ("expert_model_parallel_size", a.ep),
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

/// The compute model and modelling choices from the flags.
pub fn schedule_options(a: &JobArgs) -> anyhow::Result<ScheduleOptions> {
    Ok(ScheduleOptions {
        gpu: Gpu::preset(&a.gpu).with_context(|| {
            format!(
                "--gpu `{}`: expected a100, h100, h800, h20 or NAME:TFLOPS",
                a.gpu
            )
        })?,
        mfu: a.mfu,
        calibrate: !a.no_calibrate,
        factor: a.calibration_factor,
        moe_routing: a
            .moe_routing
            .parse::<MoeRouting>()
            .map_err(anyhow::Error::msg)
            .context("--moe-routing")?,
        warmup_rule: if a.legacy_interleaved_warmup {
            WarmupRule::AllWarmupWhenMEqualsPp
        } else {
            WarmupRule::Current
        },
    })
}

/// Trace options from the flags.
pub fn options(a: &Args) -> anyhow::Result<TraceOptions> {
    if a.ina_payload == 0 || a.ina_window == 0 || a.ina_slots == 0 {
        bail!("--ina-slots, --ina-payload and --ina-window must be positive");
    }
    let mode = a
        .ina
        .parse::<InaMode>()
        .map_err(anyhow::Error::msg)
        .context("--ina")?;
    let ina = InaConfig {
        mode,
        switches: a
            .ina_switches
            .parse::<InaSwitches>()
            .map_err(anyhow::Error::msg)
            .context("--ina-switches")?,
        slots: a.ina_slots,
        payload: Bytes(a.ina_payload),
        window: a.ina_window,
        policy: match &a.ina_policy {
            Some(p) => p
                .parse::<InaPolicy>()
                .map_err(anyhow::Error::msg)
                .context("--ina-policy")?,
            None if mode == InaMode::Atp => InaPolicy::BestEffort,
            None => InaPolicy::Static,
        },
        classes: parse_classes(&a.ina_classes)
            .map_err(anyhow::Error::msg)
            .context("--ina-classes")?,
    };
    let schedule = schedule_options(&a.job)?;
    if a.nccl_channels == Some(0) {
        bail!("--nccl-channels must be at least 1");
    }
    Ok(TraceOptions {
        schedule,
        collective: a
            .collective
            .parse::<Algorithm>()
            .map_err(anyhow::Error::msg)
            .context("--collective")?,
        ina,
        seed: a.seed,
        iterations: a.iterations,
        nvlink_step_latency: a.nvlink_step_latency.map(ina3d::units::Nanos),
        nccl_channels: a.nccl_channels,
    })
}

/// Run `ina3d trace`.
pub fn run(a: Args) -> anyhow::Result<()> {
    let cfg = load_config(&a.job)?;
    let opts = options(&a)?;
    let topo =
        Topology::from_spec(&a.topology).with_context(|| format!("--topology `{}`", a.topology))?;
    let wl = schedule::build(&cfg, &opts.schedule).context("building the 3D-parallel workload")?;
    topo.check_world(wl.world(), wl.tp())
        .context("the job does not fit the topology")?;
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
    if let Some(m) = &wl.moe {
        println!(
            "  MoE: {} experts, top-{}, EP{} expert-TP{} expert-DP{}, {} dispatcher, {} routing, {:.2} % of token copies dropped",
            m.num_experts,
            m.topk,
            wl.groups.ep,
            wl.groups.etp,
            wl.groups.edp,
            m.dispatcher.as_str(),
            m.routing,
            100.0 * m.dropped
        );
    }
    println!("  NCCL channels per network collective: {}", stats.channels);
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
            stats.ina_fallbacks, a.ina_switches
        );
    }
    if stats.hd_fallbacks > 0 {
        println!("  note: {} halving-doubling collectives had a non-power-of-two group and used the ring", stats.hd_fallbacks);
    }
    Ok(())
}
