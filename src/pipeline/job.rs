//! What defines one job — the model (input + Megatron overrides), the cluster, the compute
//! model and the trace options — and the job prepared once for every stage that follows.

use super::PipelineError;
use crate::megatron::{self, TrainingConfig};
use crate::schedule::{
    self, ComputeModel, Efficiency, EngineCost, Gpu, MoeRouting, ScheduleOptions, WarmupRule,
    Workload,
};
use crate::topology::Topology;
use crate::trace::{Algorithm, InaConfig, TraceOptions};
use crate::units::Nanos;

/// The input used when none is given: the bundled example log (16 GPUs, TP2·PP2·DP4).
pub const DEFAULT_INPUT: &str = "traces/example/megatron.log";

/// The topology used when none is given: a k=4 fat-tree (16 hosts, 2 per ToR) with
/// 2-GPU NVLink servers, so one server sits under each ToR. For the example's rank
/// order this keeps each TP pair inside its server's NVLink (as Megatron deployments do)
/// and spreads every DP group over four ToRs in two pods, so DP traffic crosses the
/// switches INA can use; pipeline traffic crosses the pods too.
pub const DEFAULT_TOPOLOGY: &str = "fat-tree:k=4,gpus-per-server=2";

/// Megatron arguments that can be overridden by their own (kebab-case) flag names, in the
/// order they are applied (`true`: a boolean flag, given bare on the command line).
pub const MEGATRON_FLAGS: &[(&str, bool)] = &[
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

/// Every option that defines a job and its trace: what `ina3d trace` takes, and what each
/// policy of `ina3d run` starts from. The command line, a sweep grid and the library all
/// build this one type.
#[derive(Clone, Debug, PartialEq)]
pub struct JobSpec {
    /// Megatron log, launch script, TOML/JSON config or preset name.
    pub input: String,
    /// Topology spec or HPCC topology file.
    pub topology: String,
    /// Megatron-named overrides (`num-layers` → `40`; boolean flags → `True`), applied in
    /// [`MEGATRON_FLAGS`] order.
    pub megatron: Vec<(String, String)>,
    /// Parallel sizes (`--tp`, `--pp`, …).
    pub sizes: ParallelSizes,
    /// Any Megatron argument, `key=value`, applied last, in order.
    pub set: Vec<String>,
    /// Launch-script variables set before the script runs (`--env NAME=VALUE`).
    pub env: Vec<(String, String)>,
    /// GPU preset (`a100`, `h100`, … or `NAME:TFLOPS`).
    pub gpu: String,
    /// How compute is priced.
    pub compute: ComputeModel,
    /// Efficiencies instead of the GPU generation's fitted ones (the suite's fit; not an
    /// option of the command line).
    pub efficiency: Option<Efficiency>,
    /// The training engine's cost instead of the fitted one (the suite's fit; not an
    /// option of the command line).
    pub engine_cost: Option<EngineCost>,
    /// Model FLOPs utilisation of the flat compute model.
    pub mfu: f64,
    /// Calibrate compute against the log's timers / iteration time.
    pub calibrate: bool,
    /// Use this compute scale factor instead of calibrating.
    pub calibration_factor: Option<f64>,
    /// How MoE tokens spread over the experts.
    pub moe_routing: MoeRouting,
    /// Which Megatron release's interleaved-1F1B warm-up to follow.
    pub warmup_rule: WarmupRule,
    /// Host algorithm for collectives that cross the network.
    pub collective: Algorithm,
    /// In-network aggregation.
    pub ina: InaConfig,
    /// ECMP / tie-break seed.
    pub seed: u64,
    /// How equal-cost paths are chosen (`--routing`).
    pub routing: crate::topology::RoutingMode,
    /// Iterations to generate.
    pub iterations: u32,
    /// Latency α (ns) per algorithm step inside an NVLink domain (`None`: from the topology).
    pub nvlink_step_latency: Option<u64>,
    /// NCCL channels per network collective (`None`: NCCL's rule for the topology).
    pub nccl_channels: Option<u32>,
}

impl Default for JobSpec {
    /// The bundled example on the default topology, with `ina3d trace`'s defaults.
    fn default() -> Self {
        let t = TraceOptions::default();
        JobSpec {
            input: DEFAULT_INPUT.into(),
            topology: DEFAULT_TOPOLOGY.into(),
            megatron: Vec::new(),
            sizes: ParallelSizes::default(),
            set: Vec::new(),
            env: Vec::new(),
            gpu: t.schedule.gpu.name.clone(),
            compute: t.schedule.compute,
            efficiency: t.schedule.efficiency,
            engine_cost: t.schedule.engine_cost,
            mfu: t.schedule.mfu,
            calibrate: t.schedule.calibrate,
            calibration_factor: t.schedule.factor,
            moe_routing: t.schedule.moe_routing,
            warmup_rule: t.schedule.warmup_rule,
            collective: t.collective,
            ina: InaConfig::default(),
            seed: t.seed,
            routing: t.routing,
            iterations: t.iterations,
            nvlink_step_latency: None,
            nccl_channels: t.nccl_channels,
        }
    }
}

/// Parallel sizes given as options (`--tp`, `--pp`, …): Megatron overrides under
/// friendlier names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ParallelSizes {
    /// Tensor-parallel size.
    pub tp: Option<u32>,
    /// Pipeline-parallel size.
    pub pp: Option<u32>,
    /// Data-parallel size.
    pub dp: Option<u32>,
    /// Virtual pipeline chunks per stage.
    pub vpp: Option<u32>,
    /// Context-parallel size.
    pub cp: Option<u32>,
    /// Expert-parallel size.
    pub ep: Option<u32>,
}

/// The Megatron overrides of a job, in the order they apply: Megatron-named ones
/// (`named`), then the parallel sizes, then `set` (`KEY=VALUE` each, applied last). Every
/// command that reads a job (`parse`, `trace`, `run`, `plan`, `export`) goes through this.
pub fn override_pairs(
    named: &[(String, String)],
    sizes: &ParallelSizes,
    set: &[String],
) -> Result<Vec<(String, String)>, PipelineError> {
    let mut pairs: Vec<(String, String)> = named.to_vec();
    for (k, v) in [
        ("tensor_model_parallel_size", sizes.tp),
        ("pipeline_model_parallel_size", sizes.pp),
        ("context_parallel_size", sizes.cp),
        ("data_parallel_size", sizes.dp),
        ("virtual_pipeline_model_parallel_size", sizes.vpp),
        ("expert_model_parallel_size", sizes.ep),
    ] {
        if let Some(v) = v {
            pairs.push((k.to_string(), v.to_string()));
        }
    }
    for kv in set {
        let Some((k, v)) = kv.split_once('=') else {
            return Err(PipelineError::Option {
                option: format!("--set `{kv}`"),
                msg: "expected KEY=VALUE".into(),
            });
        };
        pairs.push((k.trim().to_string(), v.trim().to_string()));
    }
    Ok(pairs)
}

/// `--env NAME=VALUE` options as (name, value) pairs.
pub fn env_pairs(env: &[String]) -> Result<Vec<(String, String)>, PipelineError> {
    env.iter()
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
            _ => Err(PipelineError::Option {
                option: format!("--env `{kv}`"),
                msg: "expected NAME=VALUE".into(),
            }),
        })
        .collect()
}

impl JobSpec {
    /// The training config after every override, validated: the overrides apply before
    /// the check, so they can make valid a job its input alone is not (warnings about the
    /// input are in [`TrainingConfig::warnings`]).
    pub fn config(&self) -> Result<TrainingConfig, PipelineError> {
        let pairs = override_pairs(&self.megatron, &self.sizes, &self.set)?;
        megatron::load_with_env(std::slice::from_ref(&self.input), &self.env, &pairs).map_err(
            |source| PipelineError::Input {
                input: self.input.clone(),
                source: Box::new(source),
            },
        )
    }

    /// The generator's options. Errors name the flag at fault.
    pub fn trace_options(&self) -> Result<TraceOptions, PipelineError> {
        self.ina
            .check()
            .map_err(|(option, msg)| PipelineError::Option {
                option: option.into(),
                msg,
            })?;
        let ina = InaConfig {
            policy: Some(self.ina.policy()),
            ..self.ina.clone()
        };
        let gpu = Gpu::preset(&self.gpu).ok_or_else(|| PipelineError::Option {
            option: format!("--gpu `{}`", self.gpu),
            msg: format!("expected {} or NAME:TFLOPS[:HBM_GBPS]", Gpu::NAMES),
        })?;
        let schedule = ScheduleOptions {
            gpu,
            compute: self.compute,
            efficiency: self.efficiency,
            engine_cost: self.engine_cost,
            mfu: self.mfu,
            calibrate: self.calibrate,
            factor: self.calibration_factor,
            moe_routing: self.moe_routing,
            warmup_rule: self.warmup_rule,
        };
        schedule.check().map_err(|e| PipelineError::Option {
            option: "--mfu / --calibration-factor".into(),
            msg: e.to_string(),
        })?;
        let opts = TraceOptions {
            schedule,
            collective: self.collective,
            ina,
            seed: self.seed,
            routing: self.routing,
            iterations: self.iterations,
            nvlink_step_latency: self.nvlink_step_latency.map(Nanos),
            nccl_channels: self.nccl_channels,
            plan: None,
        };
        opts.check().map_err(|(flag, msg)| PipelineError::Option {
            option: flag.into(),
            msg,
        })?;
        Ok(opts)
    }
}

/// A job read, scheduled and placed once: every trace of a run (each policy, each seed)
/// lowers this same workload onto this same topology.
#[derive(Debug)]
pub struct Job {
    /// The training configuration after every override.
    pub cfg: TrainingConfig,
    /// The cluster.
    pub topology: Topology,
    /// The 3D-parallel workload of one iteration.
    pub workload: Workload,
    /// What the input and topology readers warned about (printed by the caller).
    pub warnings: Vec<String>,
}

impl Job {
    /// Reads the input, applies the overrides, loads the topology and builds the workload.
    /// Errors come in the order a user fixes them: input, options, topology, fit.
    pub fn prepare(spec: &JobSpec) -> Result<Job, PipelineError> {
        let cfg = spec.config()?;
        let opts = spec.trace_options()?;
        let (topology, warnings) =
            Topology::from_spec_with_warnings(&spec.topology).map_err(|source| {
                PipelineError::Topology {
                    spec: spec.topology.clone(),
                    source: Box::new(source),
                }
            })?;
        let workload = schedule::build(&cfg, &opts.schedule)
            .map_err(|e| PipelineError::Workload(Box::new(e)))?;
        topology
            .check_world(workload.world(), workload.tp())
            .map_err(|e| PipelineError::Fit(Box::new(e)))?;
        Ok(Job {
            topology,
            workload,
            warnings: cfg
                .warnings
                .iter()
                .map(ToString::to_string)
                .chain(warnings.iter().map(ToString::to_string))
                .collect(),
            cfg,
        })
    }
}
