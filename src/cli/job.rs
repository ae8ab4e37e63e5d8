//! The job options `ina3d trace` and `ina3d run` share (model overrides, compute model,
//! collectives, INA switch options), defined once and turned into the library's
//! [`JobSpec`].

use clap::{Arg, ArgAction, ArgMatches, Command};
use ina3d::pipeline::{JobSpec, ParallelSizes, MEGATRON_FLAGS};
use ina3d::schedule::{ComputeModel, WarmupRule};
use ina3d::topology::RoutingMode;
use ina3d::trace::{Algorithm, InaConfig, InaMode, InaPolicy, InaSwitches, DEFAULT_INA_SLOTS};

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
                .help(megatron_help(name))
                // `-h` stays short; `--help` lists them
                .hide_short_help(true)
                .help_heading("Megatron arguments (override the input; listed by --help)");
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

/// What Megatron's flag `name` sets, as `--help` describes it (Megatron-LM's own
/// `arguments.py` meaning; the value overrides what the input says).
pub fn megatron_help(name: &str) -> &'static str {
    match name {
        "tensor-model-parallel-size" => "Tensor-parallel size (= --tp)",
        "pipeline-model-parallel-size" => "Pipeline-parallel size (= --pp)",
        "virtual-pipeline-model-parallel-size" => {
            "Model chunks per pipeline stage (interleaved 1F1B; = --vpp)"
        }
        "num-layers-per-virtual-pipeline-stage" => {
            "Layers per virtual stage (the older way to set interleaving)"
        }
        "context-parallel-size" => "Context-parallel size (= --cp)",
        "data-parallel-size" => "Data-parallel size (= --dp; Megatron derives it from the world)",
        "world-size" => "GPUs in the job (= TP × PP × CP × DP)",
        "num-layers" => "Transformer layers",
        "hidden-size" => "Hidden size (model width)",
        "ffn-hidden-size" => "MLP hidden size (default 4 × hidden; SwiGLU: 8/3 × hidden, rounded)",
        "num-attention-heads" => "Attention heads",
        "num-query-groups" => "Key/value groups of grouped-query attention",
        "group-query-attention" => "Grouped-query attention (with --num-query-groups)",
        "seq-length" => "Sequence length, tokens",
        "max-position-embeddings" => "Largest sequence the position embedding covers",
        "micro-batch-size" => "Sequences per micro-batch",
        "global-batch-size" => "Sequences per iteration (micro-batches = global / (micro × DP))",
        "vocab-size" => "Vocabulary size before padding",
        "make-vocab-size-divisible-by" => "Pad the vocabulary to a multiple of this × TP",
        "sequence-parallel" => {
            "Sequence parallelism: TP all-reduces become reduce-scatter + all-gather"
        }
        "use-distributed-optimizer" => {
            "Distributed optimizer: DP reduce-scatters gradients and all-gathers parameters"
        }
        "overlap-grad-reduce" => "Overlap DP gradient reduction with the backward pass",
        "overlap-param-gather" => "Overlap the parameter all-gather with the next forward pass",
        "accumulate-allreduce-grads-in-fp32" => "Reduce gradients in fp32 (4 bytes per value)",
        "grad-reduce-in-bf16" => "Reduce gradients in bf16 (2 bytes per value)",
        "bf16" => "Train in bf16 (2-byte activations and parameters)",
        "fp16" => "Train in fp16 (2-byte activations and parameters)",
        "untie-embeddings-and-output-weights" => {
            "Separate input embedding and output layer (no embedding all-reduce)"
        }
        "swiglu" => "SwiGLU MLP (three weight matrices)",
        "recompute-granularity" => "Activation recomputation: full or selective",
        "use-tp-pp-dp-mapping" => "Rank order TP-PP-DP instead of Megatron's default TP-DP-PP",
        "cp-comm-type" => "Context-parallel exchange: p2p (ring attention), a2a (Ulysses), …",
        "num-experts" => "MoE experts per MoE layer",
        "moe-router-topk" => "Experts each token is routed to",
        "expert-model-parallel-size" => "Expert-parallel size (= --ep)",
        "expert-tensor-parallel-size" => "Tensor-parallel size inside each expert",
        "moe-layer-freq" => "Which layers are MoE: every Nth, or a pattern like [1,0]*12",
        "moe-token-dispatcher-type" => "MoE token dispatch: allgather or alltoall",
        "moe-expert-capacity-factor" => "Tokens an expert takes, as a multiple of its even share",
        "moe-ffn-hidden-size" => "MLP hidden size of each expert",
        "moe-shared-expert-intermediate-size" => "MLP hidden size of the shared experts",
        "normalization" => "LayerNorm or RMSNorm",
        "disable-bias-linear" => "Linear layers without bias",
        "position-embedding-type" => "learned_absolute, rope or none",
        _ => "",
    }
}

/// Parallel sizes and free-form Megatron overrides, shared by every command that reads a
/// job (`parse` included).
#[derive(clap::Args, Debug, Clone)]
pub struct SizeArgs {
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
    /// A launch-script variable set before the script runs, as the environment would
    /// (`--env CP=2`; the script's own assignments still win, `${CP:-1}` takes it); a
    /// name of digits is a positional parameter (`--env 3=MOCK` is the script's `$3`).
    /// Repeatable.
    #[arg(long = "env", value_name = "NAME=VALUE")]
    pub env: Vec<String>,
}

impl SizeArgs {
    /// The sizes as the library takes them.
    pub fn sizes(&self) -> ParallelSizes {
        ParallelSizes {
            tp: self.tp,
            pp: self.pp,
            dp: self.dp,
            vpp: self.vpp,
            cp: self.cp,
            ep: self.ep,
        }
    }
}

/// The model and its compute: Megatron overrides, parallel sizes, GPU and calibration.
/// Shared by every command that builds the workload (`trace`, `run`, `plan`, `export aicb`).
#[derive(clap::Args, Debug, Clone)]
pub struct ModelArgs {
    /// The GPU compute is priced on: a100-40gb, a100-80gb (alias a100), h100-sxm (alias
    /// h100), h800, h20, h200, b200, gb200 (dense peak per precision, HBM and NVLink
    /// bandwidth from the datasheets: docs/compute.md), or NAME:TFLOPS[:HBM_GBPS].
    #[arg(long, default_value = "a100")]
    pub gpu: String,
    /// How compute is priced: `roofline` (each GEMM by its shape on the GPU, memory-bound
    /// element-wise work, attention by kernel, the optimizer step; efficiencies fitted per
    /// GPU generation on published runs) or `mfu` (every matmul FLOP at peak·MFU).
    /// Calibration from a log's timers scales either.
    #[arg(long, value_parser = super::keyword::<ComputeModel>(ComputeModel::NAMES))]
    pub compute_model: Option<ComputeModel>,
    /// Model FLOPs utilisation of the flat model; giving it selects `--compute-model mfu`
    /// (default 0.45 there).
    #[arg(long)]
    pub mfu: Option<f64>,
    /// Do not calibrate compute against the log's timers / iteration time.
    #[arg(long)]
    pub no_calibrate: bool,
    /// Use this compute scale factor instead of calibrating, in (0, 1000].
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
    /// Parallel sizes and `--set`.
    #[command(flatten)]
    pub sizes: SizeArgs,
    /// Megatron-named overrides.
    #[command(flatten)]
    pub overrides: Overrides,
}

/// Options of the job and its trace, shared by `trace` and `run`.
#[derive(clap::Args, Debug, Clone)]
pub struct JobArgs {
    /// Host algorithm for collectives that cross the network: ring, dbt (double binary
    /// tree), hd (halving-doubling), hierarchical (NVLink + per-GPU-index rings), swing
    /// (NSDI'24: log₂ n steps with peers r ± ρ(s); all-reduce only).
    #[arg(long, value_parser = super::keyword::<Algorithm>(Algorithm::NAMES), default_value = "ring")]
    pub collective: Algorithm,
    /// Switches that can aggregate: all (default: a multi-switch tree can form over any
    /// group), tor (only switches with GPUs attached), or comma-separated node ids.
    #[arg(long, default_value = "all")]
    pub ina_switches: String,
    /// Aggregator slots per switch.
    #[arg(long, default_value_t = DEFAULT_INA_SLOTS, value_name = "N")]
    pub ina_slots: u32,
    /// Payload bytes per slot (one packet).
    #[arg(long, default_value_t = 256)]
    pub ina_payload: u64,
    /// Outstanding packets per worker.
    #[arg(long, default_value_t = 256)]
    pub ina_window: u32,
    /// Slot policy: static, best-effort, priority (default: best-effort for atp, else static).
    #[arg(long, value_parser = super::keyword::<InaPolicy>(InaPolicy::NAMES))]
    pub ina_policy: Option<InaPolicy>,
    /// Iterations to generate (1 to 1000).
    #[arg(long, default_value_t = 1)]
    pub iterations: u32,
    /// Latency α (ns) per algorithm step of collectives inside an NVLink domain
    /// (default 3400: NCCL's own estimate for a ring step over NVLink with its Simple
    /// protocol, `src/graph/tuning.cc`; at most 1 s).
    #[arg(long, value_name = "NS")]
    pub nvlink_step_latency: Option<u64>,
    /// NCCL channels each network collective is split over, each its own connection with
    /// its own ECMP path (default: NCCL's rule, 2 per NIC port of a GPU; at most 64, NCCL's
    /// own limit).
    #[arg(long, value_name = "N")]
    pub nccl_channels: Option<u32>,
    /// How equal-cost paths are chosen: ecmp (per-connection hash, RoCE/Ethernet; the
    /// default), dmodk (InfiniBand's static destination-mod-k tables), spray (adaptive
    /// routing / packet spraying: each transfer split evenly over its equal-cost next
    /// hops). Recorded in the trace header.
    #[arg(long, value_parser = super::keyword::<RoutingMode>(RoutingMode::NAMES))]
    pub routing: Option<RoutingMode>,
    /// The model and its compute.
    #[command(flatten)]
    pub model: ModelArgs,
}

impl ModelArgs {
    /// Writes these options into `spec` (the model, compute and MoE fields).
    pub fn apply(&self, spec: &mut JobSpec) -> anyhow::Result<()> {
        use anyhow::Context;
        spec.megatron = self.overrides.pairs.clone();
        spec.sizes = self.sizes.sizes();
        spec.set = self.sizes.set.clone();
        spec.env = ina3d::pipeline::env_pairs(&self.sizes.env)?;
        spec.gpu = self.gpu.clone();
        spec.compute = match (self.compute_model, self.mfu) {
            (Some(c), _) => c,
            (None, Some(_)) => ComputeModel::Mfu,
            (None, None) => ComputeModel::Roofline,
        };
        if let Some(m) = self.mfu {
            spec.mfu = m;
        }
        spec.calibrate = !self.no_calibrate;
        spec.calibration_factor = self.calibration_factor;
        spec.moe_routing = self
            .moe_routing
            .parse()
            .map_err(anyhow::Error::msg)
            .context("--moe-routing")?;
        spec.warmup_rule = if self.legacy_interleaved_warmup {
            WarmupRule::AllWarmupWhenMEqualsPp
        } else {
            WarmupRule::Current
        };
        Ok(())
    }
}

impl JobArgs {
    /// The library's job spec for `input` on `topology`, with the INA algorithm `ina`,
    /// the classes allowed to aggregate and the seed (which the two commands take
    /// differently).
    pub fn spec(
        &self,
        input: &str,
        topology: &str,
        ina: InaMode,
        classes: Vec<ina3d::record::Class>,
        seed: u64,
    ) -> anyhow::Result<JobSpec> {
        use anyhow::Context;
        let mut spec = JobSpec {
            input: input.to_string(),
            topology: topology.to_string(),
            collective: self.collective,
            ina: InaConfig {
                mode: ina,
                switches: self
                    .ina_switches
                    .parse::<InaSwitches>()
                    .map_err(anyhow::Error::msg)
                    .context("--ina-switches")?,
                slots: self.ina_slots,
                payload: ina3d::units::Bytes(self.ina_payload),
                window: self.ina_window,
                policy: self.ina_policy,
                classes,
                ..InaConfig::default()
            },
            seed,
            routing: self.routing.unwrap_or_default(),
            iterations: self.iterations,
            nvlink_step_latency: self.nvlink_step_latency,
            nccl_channels: self.nccl_channels,
            ..JobSpec::default()
        };
        self.model.apply(&mut spec)?;
        Ok(spec)
    }
}
