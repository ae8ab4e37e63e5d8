//! `ina3d parse`: read Megatron logs, launch scripts, config files and presets into one
//! training configuration and print it (readable, or JSON keyed by Megatron's argument
//! names — which reads back as a config file).

use ina3d::megatron::{self, MoeLayerFreq, Source, TrainingConfig};
use std::fmt::Write;

/// Arguments of `ina3d parse`.
#[derive(clap::Args, Debug)]
#[command(after_long_help = "\
Inputs merge into one job, least trusted first: presets, config files (TOML/JSON), launch
scripts, logs; overrides (--tp … --set) win over all, and the job is checked only after
them, so a single-node example script of a multi-node model becomes valid with `--dp 8`.

More examples:
  ina3d parse gpt3-13b iterations.log --tp 8 --pp 2 --dp 4     # a preset with measured iterations
  ina3d parse train_gpt3_175b.sh --dp 8 --json > job.json      # the JSON reads back as a config
  ina3d parse job.json --set sequence_parallel=true")]
pub struct Args {
    /// Megatron log(s), launch script, TOML/JSON config file and/or preset names
    /// (e.g. `gpt3-13b`, `preset:mixtral-8x7b`), merged into one job.
    #[arg(required = true, value_name = "FILE|PRESET")]
    pub inputs: Vec<String>,
    /// Print one JSON object keyed by Megatron's argument names, plus `iterations` and
    /// `timers`; it reads back as a config file.
    #[arg(long)]
    pub json: bool,
    /// Also print where every value came from (file:line, preset, default, derived).
    #[arg(long, short)]
    pub verbose: bool,
    /// Parallel sizes and `--set` (applied in that order, after the inputs).
    #[command(flatten)]
    pub sizes: super::job::SizeArgs,
}

/// Loads the inputs (files and preset names) with the overrides applied before the
/// consistency check; the reader's warnings go to stderr.
pub fn load_with_overrides(
    inputs: &[String],
    env: &[(String, String)],
    overrides: &[(String, String)],
) -> anyhow::Result<TrainingConfig> {
    let c = megatron::load_with_env(inputs, env, overrides)?;
    for w in &c.warnings {
        eprintln!("warning: {w}");
    }
    Ok(c)
}

fn src(c: &TrainingConfig, f: &str) -> String {
    match c.sources.get(f) {
        Some(Source::File { path, line }) if *line > 0 => format!("{path}:{line}"),
        Some(Source::File { path, .. }) => path.clone(),
        Some(Source::Preset { name }) => format!("preset {name}"),
        Some(Source::Override) => "override".into(),
        Some(Source::Derived { how }) => format!("derived: {how}"),
        Some(Source::Default) | None => "Megatron default".into(),
    }
}

/// The readable summary, one section per aspect of the job.
struct Summary<'a> {
    c: &'a TrainingConfig,
    verbose: bool,
    o: String,
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or("-".into(), |x| x.to_string())
}

impl Summary<'_> {
    fn row(&mut self, label: &str, value: String, fields: &[&str]) {
        let _ = write!(self.o, "  {label:<30} {value}");
        if self.verbose {
            let w: Vec<String> = fields
                .iter()
                .map(|f| format!("{f} ← {}", src(self.c, f)))
                .collect();
            let _ = write!(self.o, "    [{}]", w.join("; "));
        }
        self.o.push('\n');
    }

    fn layout(&mut self) {
        let c = self.c;
        self.o.push_str("parallel layout\n");
        self.row(
            "TP × CP × PP × DP = world",
            format!(
                "{} × {} × {} × {} = {} GPUs",
                c.tensor_model_parallel_size,
                c.context_parallel_size,
                c.pipeline_model_parallel_size,
                c.data_parallel_size,
                c.world_size
            ),
            &[
                "tensor_model_parallel_size",
                "context_parallel_size",
                "pipeline_model_parallel_size",
                "data_parallel_size",
                "world_size",
            ],
        );
        self.row(
            "virtual pipeline",
            opt(c.virtual_pipeline_model_parallel_size),
            &["virtual_pipeline_model_parallel_size"],
        );
        self.row(
            "CP communication",
            c.cp_comm_type.as_str().into(),
            &["cp_comm_type"],
        );
        self.row(
            "expert TP × EP × expert DP",
            format!(
                "{} × {} × {}",
                c.expert_tensor_parallel_size,
                c.expert_model_parallel_size,
                c.expert_data_parallel_size()
            ),
            &["expert_tensor_parallel_size", "expert_model_parallel_size"],
        );
    }

    fn model(&mut self) {
        let c = self.c;
        self.o.push_str("model\n");
        self.row("layers", c.num_layers.to_string(), &["num_layers"]);
        self.row(
            "hidden / ffn",
            format!("{} / {}", c.hidden_size, c.ffn_hidden_size),
            &["hidden_size", "ffn_hidden_size"],
        );
        let gqa = c
            .num_query_groups
            .map_or("MHA".into(), |g| format!("{g} query groups"));
        self.row(
            "attention heads",
            format!("{} ({gqa})", c.num_attention_heads),
            &[
                "num_attention_heads",
                "group_query_attention",
                "num_query_groups",
            ],
        );
        self.row(
            "seq length / max positions",
            format!("{} / {}", c.seq_length, c.max_position_embeddings),
            &["seq_length", "max_position_embeddings"],
        );
        self.row(
            "norm / positions / biases",
            format!(
                "{} / {} / {}",
                c.normalization.as_str(),
                c.position_embedding_type.as_str(),
                c.add_bias_linear
            ),
            &[
                "normalization",
                "position_embedding_type",
                "add_bias_linear",
            ],
        );
        self.row(
            "vocab (padded)",
            format!("{} ({})", opt(c.vocab_size), c.padded_vocab()),
            &[
                "tokenizer_type",
                "vocab_size",
                "make_vocab_size_divisible_by",
                "padded_vocab_size",
            ],
        );
        self.row(
            "precision",
            format!(
                "params {:?}, fp16 {}, bf16 {}",
                c.params_dtype, c.fp16, c.bf16
            )
            .to_lowercase(),
            &["params_dtype", "fp16", "bf16"],
        );
    }

    fn experts(&mut self) {
        let c = self.c;
        let Some(n) = c.num_experts else {
            return;
        };
        self.o.push_str("mixture of experts\n");
        self.row(
            "experts / top-k",
            format!("{n} / {}", c.moe_router_topk),
            &["num_experts", "moe_router_topk"],
        );
        let freq = match &c.moe_layer_freq {
            MoeLayerFreq::Every(k) => format!("every {k} layer(s)"),
            MoeLayerFreq::Pattern(p) => format!(
                "pattern: {} of {} layers",
                p.iter().filter(|b| **b).count(),
                p.len()
            ),
        };
        self.row("MoE layers", freq, &["moe_layer_freq"]);
        self.row(
            "dispatcher",
            c.moe_token_dispatcher_type.as_str().into(),
            &["moe_token_dispatcher_type"],
        );
        self.row(
            "expert ffn / shared ffn",
            format!(
                "{} / {}",
                opt(c.moe_ffn_hidden_size),
                opt(c.moe_shared_expert_intermediate_size)
            ),
            &["moe_ffn_hidden_size", "moe_shared_expert_intermediate_size"],
        );
        self.row(
            "capacity factor",
            c.moe_expert_capacity_factor
                .map_or("dropless".into(), |f| f.to_string()),
            &["moe_expert_capacity_factor"],
        );
    }

    fn batch_and_flags(&mut self) {
        let c = self.c;
        self.o.push_str("batch\n");
        self.row(
            "micro / global / microbatches",
            format!(
                "{} / {} / {}",
                c.micro_batch_size,
                c.global_batch_size,
                c.num_microbatches()
            ),
            &["micro_batch_size", "global_batch_size"],
        );
        self.o.push_str("flags\n");
        for (f, v) in [
            ("sequence_parallel", c.sequence_parallel),
            ("use_distributed_optimizer", c.use_distributed_optimizer),
            ("overlap_grad_reduce", c.overlap_grad_reduce),
            ("overlap_param_gather", c.overlap_param_gather),
            (
                "accumulate_allreduce_grads_in_fp32",
                c.accumulate_allreduce_grads_in_fp32,
            ),
            ("grad_reduce_in_bf16", c.grad_reduce_in_bf16),
            (
                "untie_embeddings_and_output_weights",
                c.untie_embeddings_and_output_weights,
            ),
            ("swiglu", c.swiglu),
            ("use_tp_pp_dp_mapping", c.use_tp_pp_dp_mapping),
        ] {
            self.row(f, v.to_string(), &[f]);
        }
        if c.zero_stage.is_some() {
            self.row("DeepSpeed ZeRO stage", opt(c.zero_stage), &["zero_stage"]);
        }
        self.row(
            "recompute_granularity",
            format!("{:?}", c.recompute_granularity).to_lowercase(),
            &["recompute_granularity"],
        );
        self.row(
            "log_interval / timing level",
            format!("{} / {}", c.log_interval, c.timing_log_level),
            &["log_interval", "timing_log_level"],
        );
    }

    fn measured(&mut self) {
        let c = self.c;
        self.o.push_str("measured\n");
        match (c.mean_iteration_ms(), c.median_iteration_ms()) {
            (Some(mean), Some(median)) => {
                let _ = writeln!(
                    self.o,
                    "  {:<30} {} logged, mean {mean:.1} ms, median {median:.1} ms",
                    "iterations",
                    c.iterations.len()
                );
            }
            _ => {
                let _ = writeln!(self.o, "  {:<30} none logged", "iterations");
            }
        }
        if c.timers.is_empty() {
            let _ = writeln!(self.o, "  {:<30} none logged", "timers (ms, min–max)");
        } else {
            let _ = writeln!(self.o, "  timers (ms per iteration, min–max across ranks)");
            for (name, t) in &c.timers {
                let _ = writeln!(self.o, "    {name:<44} {:>10.2} – {:<10.2}", t.min, t.max);
            }
        }
        if self.verbose && !c.extra.is_empty() {
            let _ = writeln!(self.o, "other arguments ({})", c.extra.len());
            for (k, v) in &c.extra {
                let _ = writeln!(self.o, "  {k:<44} {v}");
            }
        }
    }
}

fn summary(c: &TrainingConfig, verbose: bool) -> String {
    let mut s = Summary {
        c,
        verbose,
        o: String::new(),
    };
    s.layout();
    s.model();
    s.experts();
    s.batch_and_flags();
    s.measured();
    s.o
}

/// The JSON `--json` prints: the configuration plus the computed batch and iteration
/// figures (which a config reader recomputes rather than reads).
pub fn json(c: &TrainingConfig) -> anyhow::Result<String> {
    let mut v = serde_json::to_value(c)?;
    if let Some(m) = v.as_object_mut() {
        m.insert("num_microbatches".into(), c.num_microbatches().into());
        m.insert("mean_iteration_ms".into(), c.mean_iteration_ms().into());
        m.insert("median_iteration_ms".into(), c.median_iteration_ms().into());
    }
    Ok(serde_json::to_string_pretty(&v)?)
}

/// Run `ina3d parse`.
pub fn run(a: Args) -> anyhow::Result<()> {
    let pairs = ina3d::pipeline::override_pairs(&[], &a.sizes.sizes(), &a.sizes.set)?;
    let env = ina3d::pipeline::env_pairs(&a.sizes.env)?;
    let c = load_with_overrides(&a.inputs, &env, &pairs)?;
    let text = if a.json {
        json(&c)? + "\n"
    } else {
        summary(&c, a.verbose)
    };
    use std::io::Write as _;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        // `ina3d parse … | head`: the reader went away; nothing is wrong.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}
