//! Structure-aware fuzzing of every Megatron reader: the arguments block, iteration lines
//! and timer blocks of a log, a launch script, TOML and JSON configs.
//!
//! Each case generates a consistent job, renders it in one input format (with the
//! variations real files have: rank prefixes, CRLF, dotted or dot-less names, arrays,
//! arithmetic, decided branches) and checks that the reader gives back exactly the
//! generated values; then it mutates the rendering (a value replaced by garbage, a huge
//! or negative number, a truncated file, a duplicated or deleted line, stray bytes) and
//! checks that the reader never panics and that every error names where it is — a
//! file, a line ≥ 1 when it points into the file, and the field. The case counts are
//! fixed so the whole run stays within seconds in a debug build.

use ina3d::megatron::{self, Dtype, MegatronError, Source, TrainingConfig};
use proptest::prelude::*;
use std::path::Path;

/// A consistent job.
#[derive(Clone, Debug)]
struct Job {
    tp: u32,
    pp: u32,
    dp: u32,
    layers: u32,
    heads: u32,
    hidden: u64,
    seq: u64,
    mbs: u64,
    gbs: u64,
    bf16: bool,
    sp: bool,
    /// (experts, EP).
    moe: Option<(u32, u32)>,
    /// Logged elapsed times, ms.
    iters: Vec<f64>,
    /// Timers: (name, min, max).
    timers: Vec<(String, f64, f64)>,
}

fn job() -> impl Strategy<Value = Job> {
    (
        (
            0u32..4,
            1u32..4,
            1u32..9,
            1u32..5,
            1u32..5,
            1u64..17,
            1u64..5,
            1u64..9,
        ),
        (
            any::<bool>(),
            any::<bool>(),
            prop::option::of((0u32..3, 1u32..3)),
        ),
        prop::collection::vec(1u32..100_000, 0..4),
        prop::collection::vec((0usize..4, 1u32..50_000, 0u32..5_000), 0..4),
    )
        .prop_map(
            |((tp, pp, dp, lps, hpt, s128, mbs, m), (bf16, sp, moe), iters, timers)| {
                let tp = 1 << tp;
                let heads = tp * hpt;
                let names = [
                    "forward-compute",
                    "backward-compute",
                    "all-grads-sync",
                    "optimizer",
                ];
                let mut seen = std::collections::BTreeSet::new();
                Job {
                    tp,
                    pp,
                    dp,
                    layers: pp * lps,
                    heads,
                    hidden: u64::from(heads) * 64,
                    seq: s128 * 128,
                    mbs,
                    gbs: mbs * u64::from(dp) * m,
                    bf16,
                    sp,
                    // EP divides DP·TP·... keep it simple: EP ∈ {1, 2} when DP is even.
                    moe: moe.map(|(e, ep)| (8 << e, if dp % 2 == 0 { ep } else { 1 })),
                    iters: iters.into_iter().map(|x| f64::from(x) / 10.0).collect(),
                    timers: timers
                        .into_iter()
                        .filter(|(i, _, _)| seen.insert(*i))
                        .map(|(i, lo, d)| {
                            (
                                names[i].to_string(),
                                f64::from(lo) / 100.0,
                                f64::from(lo + d) / 100.0,
                            )
                        })
                        .collect(),
                }
            },
        )
}

impl Job {
    /// Megatron argument name → Python `str()` of the value.
    fn args(&self) -> Vec<(&'static str, String)> {
        let b = |x: bool| if x { "True" } else { "False" }.to_string();
        let mut v = vec![
            ("tensor_model_parallel_size", self.tp.to_string()),
            ("pipeline_model_parallel_size", self.pp.to_string()),
            ("data_parallel_size", self.dp.to_string()),
            ("world_size", (self.tp * self.pp * self.dp).to_string()),
            ("num_layers", self.layers.to_string()),
            ("hidden_size", self.hidden.to_string()),
            ("num_attention_heads", self.heads.to_string()),
            ("seq_length", self.seq.to_string()),
            ("max_position_embeddings", self.seq.to_string()),
            ("micro_batch_size", self.mbs.to_string()),
            ("global_batch_size", self.gbs.to_string()),
            ("bf16", b(self.bf16)),
            ("fp16", b(false)),
            ("sequence_parallel", b(self.sp)),
        ];
        if let Some((e, ep)) = self.moe {
            v.push(("num_experts", e.to_string()));
            v.push(("expert_model_parallel_size", ep.to_string()));
            v.push(("moe_router_topk", "2".into()));
            v.push(("add_bias_linear", "False".into()));
        }
        v
    }

    fn check(&self, c: &TrainingConfig) -> Result<(), TestCaseError> {
        prop_assert_eq!(
            (
                c.tensor_model_parallel_size,
                c.pipeline_model_parallel_size,
                c.data_parallel_size
            ),
            (self.tp, self.pp, self.dp)
        );
        prop_assert_eq!(c.world_size, self.tp * self.pp * self.dp);
        prop_assert_eq!(
            (c.num_layers, c.num_attention_heads, c.hidden_size),
            (self.layers, self.heads, self.hidden)
        );
        prop_assert_eq!(
            (c.seq_length, c.micro_batch_size, c.global_batch_size),
            (self.seq, self.mbs, self.gbs)
        );
        prop_assert_eq!(
            c.params_dtype,
            if self.bf16 { Dtype::Bf16 } else { Dtype::Fp32 }
        );
        prop_assert_eq!(c.sequence_parallel, self.sp);
        prop_assert_eq!(c.num_experts, self.moe.map(|m| m.0));
        prop_assert_eq!(c.expert_model_parallel_size, self.moe.map_or(1, |m| m.1));
        Ok(())
    }

    fn check_measured(&self, c: &TrainingConfig) -> Result<(), TestCaseError> {
        let ms: Vec<f64> = c.iterations.iter().map(|i| i.elapsed_ms).collect();
        prop_assert_eq!(ms, self.iters.clone());
        prop_assert_eq!(c.timers.len(), self.timers.len());
        for (n, lo, hi) in &self.timers {
            prop_assert_eq!((c.timers[n].min, c.timers[n].max), (*lo, *hi), "{}", n);
        }
        Ok(())
    }
}

/// Variations of a log's layout.
#[derive(Clone, Debug)]
struct LogStyle {
    prefix: &'static str,
    crlf: bool,
    timer_header: bool,
    iteration_kv: bool,
}

fn log_style() -> impl Strategy<Value = LogStyle> {
    (
        prop::sample::select(vec!["", "[default0]:", "3: ", "[rank0]:", "node7: "]),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(prefix, crlf, timer_header, iteration_kv)| LogStyle {
            prefix,
            crlf,
            timer_header,
            iteration_kv,
        })
}

fn render_log(j: &Job, st: &LogStyle) -> String {
    let p = st.prefix;
    let mut s = format!("{p}Zarr-based strategies will not be registered\n{p}------------------------ arguments ------------------------\n");
    for (k, v) in j.args() {
        let dots = ".".repeat(48usize.saturating_sub(k.len() + 3).max(1));
        s.push_str(&format!("{p}  {k} {dots} {v}\n"));
    }
    s.push_str(&format!(
        "{p}-------------------- end of arguments ---------------------\n"
    ));
    for (i, ms) in j.iters.iter().enumerate() {
        if st.iteration_kv {
            s.push_str(&format!("{p} iteration={:8}/ 1000 | elapsed_time_per_iteration_ms={ms} | lm_loss=1.0E+00 |\n", i + 1));
        } else {
            s.push_str(&format!(
                "{p} iteration {:8}/    1000 | consumed samples: 64 | elapsed time per iteration (ms): {ms} | lm loss: 1.0E+00 |\n",
                i + 1
            ));
        }
    }
    if !j.timers.is_empty() {
        if st.timer_header {
            s.push_str(&format!("{p}(min, max) time across ranks (ms):\n"));
        }
        for (n, lo, hi) in &j.timers {
            s.push_str(&format!(
                "{p}    {n} {}: ({lo}, {hi})\n",
                ".".repeat(40 - n.len())
            ));
        }
    }
    if st.crlf {
        s = s.replace('\n', "\r\n");
    }
    s
}

fn render_script(j: &Job, alt: bool) -> String {
    let flag = |k: &str| format!("--{}", k.replace('_', "-"));
    let mut s = String::from("#!/bin/bash\nGPUS_PER_NODE=");
    s.push_str(&format!(
        "{}\nNNODES=1\nTP={}\nPP=${{PP:-{}}}\n",
        j.tp * j.pp * j.dp,
        j.tp,
        j.pp
    ));
    s.push_str(&format!(
        "MBS={}\nGBS=$(( MBS * {} ))\n",
        j.mbs,
        j.gbs / j.mbs
    ));
    s.push_str(&format!("USE_SP={}\n", if j.sp { "yes" } else { "no" }));
    s.push_str("MODEL_ARGS=(\n");
    s.push_str(&format!("    {} {}\n", flag("num_layers"), j.layers));
    s.push_str(&format!("    {}={}\n", flag("hidden_size"), j.hidden));
    s.push_str(&format!(
        "    {} {}\n    --seq-length {}\n)\n",
        flag("num_attention_heads"),
        j.heads,
        j.seq
    ));
    if j.sp {
        s.push_str("if [ \"$USE_SP\" = \"yes\" ]; then\n    MODEL_ARGS+=(--sequence-parallel)\nelse\n    MODEL_ARGS+=(--recompute-granularity full)\nfi\n");
    } else {
        s.push_str("if [[ $USE_SP == y* ]]; then MODEL_ARGS+=(--sequence-parallel); fi\n");
    }
    if let Some((e, ep)) = j.moe {
        s.push_str(&format!(
            "MOE=\"--num-experts {e} --expert-model-parallel-size {ep} --disable-bias-linear\"\n"
        ));
    } else {
        s.push_str("MOE=\"\"\n");
    }
    let prec = if j.bf16 { "--bf16" } else { "" };
    let launch = if alt {
        "python -m torch.distributed.launch"
    } else {
        "torchrun"
    };
    s.push_str(&format!(
        "{launch} --nproc_per_node $GPUS_PER_NODE --nnodes $NNODES /opt/megatron/pretrain_gpt.py \\\n    \"${{MODEL_ARGS[@]}}\" $MOE \\\n    --tensor-model-parallel-size ${{TP}} --pipeline-model-parallel-size=$PP \\\n    --micro-batch-size $MBS --global-batch-size $GBS {prec}\n"
    ));
    s
}

fn render_toml(j: &Job) -> String {
    let mut s = String::from("# generated job\n");
    for (k, v) in j.args() {
        let v = match v.as_str() {
            "True" => "true".to_string(),
            "False" => "false".to_string(),
            n => n.to_string(),
        };
        s.push_str(&format!("{} = {v}\n", k.replace('_', "-")));
    }
    s
}

fn render_json(j: &Job) -> String {
    let items: Vec<String> = j
        .args()
        .into_iter()
        .map(|(k, v)| {
            let v = match v.as_str() {
                "True" => "true".to_string(),
                "False" => "false".to_string(),
                n => n.to_string(),
            };
            format!("  \"{k}\": {v}")
        })
        .collect();
    format!("{{\n{}\n}}\n", items.join(",\n"))
}

/// One way of breaking a file.
#[derive(Clone, Debug)]
enum Mutation {
    /// Replace the value at the end of line `n` (modulo the line count) with this text.
    Value(usize, &'static str),
    Truncate(usize),
    Duplicate(usize),
    Delete(usize),
    Insert(usize, &'static str),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let garbage = prop::sample::select(vec![
        "-1",
        "0",
        "18446744073709551616",
        "99999999999999999999999999",
        "4294967296",
        "nan",
        "",
        "1e309",
        "abc",
        "\u{0}",
        "${X",
        "$((1/0))",
        "$((9223372036854775807*2))",
        "[1]*99999999999",
        "(1.0, x)",
        "True",
        "None",
        "\"",
        "é",
    ]);
    let stray = prop::sample::select(vec![
        "------------------------ arguments ------------------------\n",
        "(min, max) time across ranks (ms):\n",
        "if [ x ]; then\n",
        "fi\n",
        "}\n",
        "[[\n",
        "<<EOF\n",
        "$(\n",
        "num_layers = 3\n",
        "\"num_layers\": 3,\n",
        " iteration 1/2 | elapsed time per iteration (ms): \n",
        "    forward-compute ....: (1, 2)   <--- x\n",
        "\u{1}0\u{1}",
    ]);
    prop_oneof![
        (any::<usize>(), garbage).prop_map(|(n, g)| Mutation::Value(n, g)),
        any::<usize>().prop_map(Mutation::Truncate),
        any::<usize>().prop_map(Mutation::Duplicate),
        any::<usize>().prop_map(Mutation::Delete),
        (any::<usize>(), stray).prop_map(|(n, s)| Mutation::Insert(n, s)),
    ]
}

fn mutate(text: &str, m: &Mutation) -> String {
    let mut lines: Vec<String> = text.split_inclusive('\n').map(str::to_string).collect();
    if lines.is_empty() {
        return text.to_string();
    }
    let n = lines.len();
    match m {
        Mutation::Value(i, g) => {
            let l = &mut lines[i % n];
            let eol = if l.ends_with("\r\n") {
                "\r\n"
            } else if l.ends_with('\n') {
                "\n"
            } else {
                ""
            };
            let body = l.trim_end_matches(['\r', '\n']);
            let cut = body.rfind([' ', '=', ':']).map_or(0, |p| p + 1);
            *l = format!("{}{g}{eol}", &body[..cut]);
        }
        Mutation::Truncate(i) => {
            let mut k = i % (text.len() + 1);
            while !text.is_char_boundary(k) {
                k -= 1;
            }
            return text[..k].to_string();
        }
        Mutation::Duplicate(i) => {
            let l = lines[i % n].clone();
            lines.insert(i % n, l);
        }
        Mutation::Delete(i) => {
            lines.remove(i % n);
        }
        Mutation::Insert(i, s) => lines.insert(i % n, (*s).to_string()),
    }
    lines.concat()
}

/// Every error names where it is and what: a position inside the file has a line ≥ 1.
fn check_error(e: &MegatronError, path: &str) -> Result<(), TestCaseError> {
    let in_file = |at: &str| -> Result<(), TestCaseError> {
        if let Some(rest) = at.strip_prefix(path) {
            let line: usize = rest
                .trim_start_matches(':')
                .split(':')
                .next()
                .and_then(|l| l.parse().ok())
                .ok_or_else(|| TestCaseError::fail(format!("no line in `{at}`")))?;
            prop_assert!(line >= 1, "line 0 in `{}`", at);
        }
        Ok(())
    };
    match e {
        MegatronError::Syntax { at, field, .. }
        | MegatronError::Unresolved { at, field, .. }
        | MegatronError::Undecidable { at, field, .. } => {
            prop_assert!(at.starts_with(path), "{e}");
            in_file(at)?;
            prop_assert!(!field.is_empty(), "{e}");
        }
        MegatronError::Inconsistent { at, field, .. } => {
            in_file(at)?;
            prop_assert!(!field.is_empty(), "{e}");
        }
        MegatronError::Missing { field, .. } => prop_assert!(!field.is_empty(), "{e}"),
        MegatronError::Io { .. } => prop_assert!(false, "unexpected I/O error {e}"),
    }
    Ok(())
}

fn load(
    dir: &Path,
    name: &str,
    text: &str,
    with: &[&str],
) -> (String, Result<TrainingConfig, MegatronError>) {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    let path = p.display().to_string();
    let mut inputs: Vec<String> = with.iter().map(|s| s.to_string()).collect();
    inputs.push(path.clone());
    (path, megatron::load_with_overrides(&inputs, &[]))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 120, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn a_generated_log_reads_back_its_arguments_iterations_and_timers(j in job(), st in log_style()) {
        let dir = tempfile::tempdir().unwrap();
        let (path, r) = load(dir.path(), "run.log", &render_log(&j, &st), &[]);
        let c = r.map_err(|e| TestCaseError::fail(format!("{e}")))?;
        j.check(&c)?;
        j.check_measured(&c)?;
        let at_line = matches!(&c.sources["num_layers"], Source::File { path: p, line } if *p == path && *line > 2);
        prop_assert!(at_line, "{:?}", c.sources["num_layers"]);
    }

    #[test]
    fn a_mutated_log_is_read_or_refused_with_its_position(j in job(), st in log_style(), m in mutation()) {
        let dir = tempfile::tempdir().unwrap();
        let text = mutate(&render_log(&j, &st), &m);
        let (path, r) = load(dir.path(), "run.log", &text, &[]);
        if let Err(e) = r {
            check_error(&e, &path)?;
        }
    }

    #[test]
    fn a_generated_launch_script_reads_back_its_job(j in job(), alt in any::<bool>()) {
        let dir = tempfile::tempdir().unwrap();
        let (_, r) = load(dir.path(), "run.sh", &render_script(&j, alt), &[]);
        let c = r.map_err(|e| TestCaseError::fail(format!("{e}")))?;
        j.check(&c)?;
        prop_assert_eq!(c.recompute_granularity, megatron::Recompute::None, "the else branch is never taken");
    }

    #[test]
    fn a_mutated_launch_script_is_read_or_refused_with_its_position(j in job(), m in mutation()) {
        let dir = tempfile::tempdir().unwrap();
        let text = mutate(&render_script(&j, false), &m);
        let (path, r) = load(dir.path(), "run.sh", &text, &[]);
        if let Err(e) = r {
            check_error(&e, &path)?;
        }
    }

    #[test]
    fn generated_toml_and_json_read_back_their_job(j in job()) {
        let dir = tempfile::tempdir().unwrap();
        let (_, r) = load(dir.path(), "job.toml", &render_toml(&j), &[]);
        j.check(&r.map_err(|e| TestCaseError::fail(format!("{e}")))?)?;
        let (_, r) = load(dir.path(), "job.json", &render_json(&j), &[]);
        j.check(&r.map_err(|e| TestCaseError::fail(format!("{e}")))?)?;
    }

    #[test]
    fn mutated_toml_and_json_are_read_or_refused_with_their_position(j in job(), m in mutation()) {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in [("job.toml", render_toml(&j)), ("job.json", render_json(&j))] {
            let (path, r) = load(dir.path(), name, &mutate(&text, &m), &[]);
            if let Err(e) = r {
                check_error(&e, &path)?;
            }
        }
    }

    #[test]
    fn a_mutated_log_merged_with_a_preset_and_overrides_never_panics(j in job(), m in mutation(), tp in 0u32..6, set in "[a-z_]{1,30}", v in ".{0,12}") {
        let dir = tempfile::tempdir().unwrap();
        let text = mutate(&render_log(&j, &LogStyle { prefix: "", crlf: false, timer_header: true, iteration_kv: true }), &m);
        let p = dir.path().join("it.log");
        std::fs::write(&p, text).unwrap();
        let inputs = vec!["mixtral-8x7b".to_string(), p.display().to_string()];
        let ov = vec![("tensor_model_parallel_size".to_string(), (1u32 << tp).to_string()), (set, v)];
        if let Err(e) = megatron::load_with_overrides(&inputs, &ov) {
            prop_assert!(!e.to_string().is_empty());
        }
    }
}
