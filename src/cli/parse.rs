//! `ina3d parse`: read Megatron logs, launch scripts, config files or a preset into one
//! training configuration and print it (readable, or JSON keyed by Megatron's argument
//! names).

use anyhow::Context;
use ina3d::megatron::{self, Source, TrainingConfig};
use std::path::PathBuf;

/// Arguments of `ina3d parse`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Megatron log(s), launch script, TOML/JSON config file, or one preset name
    /// (e.g. `gpt3-13b`, `preset:llama2-70b`). Several files of one run merge.
    #[arg(required = true, value_name = "FILE")]
    pub inputs: Vec<String>,
    /// Print one JSON object keyed by Megatron's argument names, plus `iterations` and
    /// `timers`.
    #[arg(long)]
    pub json: bool,
    /// Also print where every value came from (file:line, preset, default, derived).
    #[arg(long, short)]
    pub verbose: bool,
    /// Override an argument, Megatron name in snake- or kebab-case (repeatable):
    /// `--set tensor-model-parallel-size=4`.
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub overrides: Vec<String>,
}

/// Loads the inputs (files, or a single preset name) and applies `--set` overrides.
pub fn load_with_overrides(
    inputs: &[String],
    overrides: &[String],
) -> anyhow::Result<TrainingConfig> {
    let mut c = if inputs.len() == 1 {
        megatron::load_input(&inputs[0])?
    } else {
        megatron::load(&inputs.iter().map(PathBuf::from).collect::<Vec<_>>())?
    };
    for o in overrides {
        let (k, v) = o
            .split_once('=')
            .with_context(|| format!("--set {o}: expected NAME=VALUE"))?;
        c.set(k, v)?;
    }
    if !overrides.is_empty() {
        c.validate()?;
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

fn summary(c: &TrainingConfig, verbose: bool) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let row = |o: &mut String, label: &str, value: String, fields: &[&str]| {
        let _ = write!(o, "  {label:<28} {value}");
        if verbose {
            let w: Vec<String> = fields
                .iter()
                .map(|f| format!("{f} ← {}", src(c, f)))
                .collect();
            let _ = write!(o, "    [{}]", w.join("; "));
        }
        o.push('\n');
    };
    o.push_str("parallel layout\n");
    let vpp = c
        .virtual_pipeline_model_parallel_size
        .map_or("-".into(), |v| v.to_string());
    row(
        &mut o,
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
    row(
        &mut o,
        "virtual pipeline / EP",
        format!("{vpp} / {}", c.expert_model_parallel_size),
        &[
            "virtual_pipeline_model_parallel_size",
            "expert_model_parallel_size",
        ],
    );
    o.push_str("model\n");
    row(&mut o, "layers", c.num_layers.to_string(), &["num_layers"]);
    row(
        &mut o,
        "hidden / ffn",
        format!("{} / {}", c.hidden_size, c.ffn_hidden_size),
        &["hidden_size", "ffn_hidden_size"],
    );
    let gqa = c
        .num_query_groups
        .map_or("MHA".into(), |g| format!("{g} query groups"));
    row(
        &mut o,
        "attention heads",
        format!("{} ({gqa})", c.num_attention_heads),
        &["num_attention_heads", "num_query_groups"],
    );
    row(
        &mut o,
        "seq length / max positions",
        format!("{} / {}", c.seq_length, c.max_position_embeddings),
        &["seq_length", "max_position_embeddings"],
    );
    row(
        &mut o,
        "vocab (padded)",
        format!(
            "{} ({})",
            c.vocab_size.map_or("?".into(), |v| v.to_string()),
            c.padded_vocab()
        ),
        &["vocab_size", "padded_vocab_size"],
    );
    row(
        &mut o,
        "params dtype",
        format!("{:?}", c.params_dtype).to_lowercase(),
        &["params_dtype"],
    );
    o.push_str("batch\n");
    row(
        &mut o,
        "micro / global / microbatches",
        format!(
            "{} / {} / {}",
            c.micro_batch_size,
            c.global_batch_size,
            c.num_microbatches()
        ),
        &["micro_batch_size", "global_batch_size"],
    );
    o.push_str("flags\n");
    let flags: Vec<(&str, bool)> = vec![
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
    ];
    for (f, v) in flags {
        row(&mut o, f, v.to_string(), &[f]);
    }
    row(
        &mut o,
        "recompute_granularity",
        format!("{:?}", c.recompute_granularity).to_lowercase(),
        &["recompute_granularity"],
    );
    row(
        &mut o,
        "log_interval / timing level",
        format!("{} / {}", c.log_interval, c.timing_log_level),
        &["log_interval", "timing_log_level"],
    );
    o.push_str("measured\n");
    match (c.mean_iteration_ms(), c.median_iteration_ms()) {
        (Some(mean), Some(median)) => {
            let _ = writeln!(
                o,
                "  {:<28} {} logged, mean {mean:.1} ms, median {median:.1} ms",
                "iterations",
                c.iterations.len()
            );
        }
        _ => {
            let _ = writeln!(o, "  {:<28} none logged", "iterations");
        }
    }
    if c.timers.is_empty() {
        let _ = writeln!(o, "  {:<28} none logged", "timers (ms, min–max)");
    } else {
        let _ = writeln!(o, "  timers (ms per iteration, min–max across ranks)");
        for (name, t) in &c.timers {
            let _ = writeln!(o, "    {name:<44} {:>10.2} – {:<10.2}", t.min, t.max);
        }
    }
    if verbose && !c.extra.is_empty() {
        let _ = writeln!(o, "other arguments ({})", c.extra.len());
        for (k, v) in &c.extra {
            let _ = writeln!(o, "  {k:<44} {v}");
        }
    }
    o
}

/// Run `ina3d parse`.
pub fn run(a: Args) -> anyhow::Result<()> {
    let c = load_with_overrides(&a.inputs, &a.overrides)?;
    if a.json {
        let mut v = serde_json::to_value(&c)?;
        if let Some(m) = v.as_object_mut() {
            m.insert("num_microbatches".into(), c.num_microbatches().into());
            m.insert("mean_iteration_ms".into(), c.mean_iteration_ms().into());
            m.insert("median_iteration_ms".into(), c.median_iteration_ms().into());
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{}", summary(&c, a.verbose));
    }
    Ok(())
}
