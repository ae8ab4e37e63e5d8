//! Real launch scripts (NVIDIA's Llama-3 and gpt-oss examples, bigscience's BLOOM) and the
//! semantics they need: the vocabulary from the tokenizer, flags decided in every branch
//! of an undecidable condition. Every expected number is derived by hand in the test.

use ina3d::megatron::{self, MegatronError, Source, TrainingConfig};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/megatron")
        .join(name)
        .display()
        .to_string()
}

fn load(inputs: &[String], overrides: &[(&str, &str)]) -> Result<TrainingConfig, MegatronError> {
    let o: Vec<(String, String)> = overrides
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    megatron::load_with_overrides(inputs, &o)
}

fn toml(dir: &tempfile::TempDir, text: &str) -> String {
    let p: PathBuf = dir.path().join("job.toml");
    std::fs::write(&p, format!("num_layers = 2\nhidden_size = 1024\nnum_attention_heads = 16\nseq_length = 512\nmicro_batch_size = 1\n{text}")).unwrap();
    p.display().to_string()
}

fn derived_how(c: &TrainingConfig, field: &str) -> String {
    match c.sources.get(field) {
        Some(Source::Derived { how }) => how.clone(),
        other => panic!("{field} not derived: {other:?}"),
    }
}

// ------------------------------------------------------------------ vocabulary

#[test]
fn a_published_tokenizer_gives_its_own_vocabulary_padded_to_128_tp() {
    let dir = tempfile::tempdir().unwrap();
    // Llama2Tokenizer: 32,000 tokens; TP 8 pads to a multiple of 128·8 = 1,024: 32,768.
    let c = load(
        &[toml(&dir, "tokenizer_type = \"Llama2Tokenizer\"\ntensor_model_parallel_size = 8\nworld_size = 8\n")],
        &[],
    )
    .unwrap();
    assert_eq!(
        (c.vocab_size, c.padded_vocab_size),
        (Some(32_000), Some(32_768))
    );
    assert!(derived_how(&c, "vocab_size").contains("Llama2Tokenizer"));
    // Llama 3 through Hugging Face: 128,256 tokens; TP 8: ⌈128256/1024⌉·1024 = 129,024.
    let c = load(
        &[toml(&dir, "tokenizer_type = \"HuggingFaceTokenizer\"\ntokenizer_model = \"meta-llama/Meta-Llama-3-70B\"\ntensor_model_parallel_size = 8\nworld_size = 8\n")],
        &[],
    )
    .unwrap();
    assert_eq!(
        (c.vocab_size, c.padded_vocab_size),
        (Some(128_256), Some(129_024))
    );
    let how = derived_how(&c, "padded_vocab_size");
    assert!(
        how.contains("Meta-Llama-3-70B") && how.contains("job.toml"),
        "{how}"
    );
    // Mixtral-8x7B's tokenizer: 32,000, TP 1: 32,000 (already a multiple of 128).
    let c = load(
        &[toml(&dir, "tokenizer_type = \"HuggingFaceTokenizer\"\ntokenizer_model = \"mistralai/Mixtral-8x7B-v0.1\"\n")],
        &[],
    )
    .unwrap();
    assert_eq!(c.padded_vocab_size, Some(32_000));
}

#[test]
fn an_unknown_tokenizer_falls_back_to_gpt2_with_a_warning_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let c = load(
        &[toml(&dir, "tokenizer_type = \"HuggingFaceTokenizer\"\ntokenizer_model = \"/data/our-own-tokenizer\"\n")],
        &[],
    )
    .unwrap();
    // GPT-2's 50,257 → 50,304 at TP 1.
    assert_eq!(
        (c.vocab_size, c.padded_vocab_size),
        (Some(50_257), Some(50_304))
    );
    let w = c
        .warnings
        .iter()
        .find(|w| w.field == "tokenizer_type")
        .expect("a warning");
    assert!(
        w.message.contains("/data/our-own-tokenizer") && w.message.contains("50257"),
        "{w}"
    );
    assert!(w.at.contains("job.toml:"), "{w}");
    // With --vocab-size the size is that, still with a warning.
    let c = load(
        &[toml(
            &dir,
            "tokenizer_type = \"SomethingNew\"\nvocab_size = 64000\n",
        )],
        &[],
    )
    .unwrap();
    assert_eq!(c.padded_vocab_size, Some(64_000));
    assert!(c
        .warnings
        .iter()
        .any(|w| w.message.contains("SomethingNew")));
    // NullTokenizer takes its size from --vocab-size, which it then needs.
    let e = load(&[toml(&dir, "tokenizer_type = \"NullTokenizer\"\n")], &[]).unwrap_err();
    assert!(e.to_string().contains("vocab_size"), "{e}");
}

/// A SentencePiece `ModelProto` of `n` pieces (field 1, each a `SentencePiece` message
/// with its piece string in field 1) and a trainer spec (field 2), as protobuf bytes.
fn sentencepiece_model(n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend([0x12, 0x02, 0x10, 0x01]); // trainer_spec { … }
    for i in 0..n {
        let piece = format!("p{i}");
        let body: Vec<u8> = [vec![0x0a, piece.len() as u8], piece.into_bytes()].concat();
        out.extend([0x0a, body.len() as u8]);
        out.extend(body);
    }
    out
}

#[test]
fn a_tokenizer_file_on_disk_is_read_for_its_size_and_a_llama_sentencepiece_path_is_llamas() {
    let dir = tempfile::tempdir().unwrap();
    // a SentencePiece model of 300 pieces next to the job file: 300 → 384 (128·TP 1)
    std::fs::write(dir.path().join("tok.model"), sentencepiece_model(300)).unwrap();
    let c = load(
        &[toml(
            &dir,
            "tokenizer_type = \"GPTSentencePieceTokenizer\"\ntokenizer_model = \"tok.model\"\n",
        )],
        &[],
    )
    .unwrap();
    assert_eq!((c.vocab_size, c.padded_vocab_size), (Some(300), Some(384)));
    assert!(c.warnings.iter().all(|w| w.field != "tokenizer_type"));
    // a Hugging Face directory: one past the largest id of its vocabulary and added tokens
    let hf = dir.path().join("hf");
    std::fs::create_dir(&hf).unwrap();
    std::fs::write(
        hf.join("tokenizer.json"),
        r#"{"model": {"vocab": {"a": 0, "b": 1, "c": 1999}}, "added_tokens": [{"id": 2049}]}"#,
    )
    .unwrap();
    let c = load(
        &[toml(
            &dir,
            &format!(
                "tokenizer_type = \"HuggingFaceTokenizer\"\ntokenizer_model = \"{}\"\n",
                hf.display()
            ),
        )],
        &[],
    )
    .unwrap();
    assert_eq!(c.vocab_size, Some(2050));
    // a file that is not a tokenizer is an error naming the argument, not a guess
    std::fs::write(dir.path().join("bad.model"), b"\xff\xff\xff").unwrap();
    let e = load(
        &[toml(
            &dir,
            "tokenizer_type = \"SentencePieceTokenizer\"\ntokenizer_model = \"bad.model\"\n",
        )],
        &[],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("tokenizer_model") && e.contains("bad.model"),
        "{e}"
    );
    // not on disk, but a Llama SentencePiece path: Llama 1/2's 32,000, not GPT-2's
    let c = load(
        &[toml(&dir, "tokenizer_type = \"SentencePieceTokenizer\"\ntokenizer_model = \"/ckpt/llama/tokenizer.model\"\n")],
        &[],
    )
    .unwrap();
    assert_eq!(c.vocab_size, Some(32_000));
}

#[test]
fn pad_vocab_size_to_sets_the_padded_vocabulary_as_megatron_deepspeed_does() {
    let dir = tempfile::tempdir().unwrap();
    // BLOOM: 250,880 rows whatever TP (Megatron-DeepSpeed's _vocab_size_with_padding).
    let c = load(
        &[toml(&dir, "tokenizer_type = \"GPT2BPETokenizer\"\npad_vocab_size_to = 250880\ntensor_model_parallel_size = 4\nworld_size = 4\n")],
        &[],
    )
    .unwrap();
    assert_eq!(c.padded_vocab_size, Some(250_880));
    assert!(derived_how(&c, "padded_vocab_size").contains("pad-vocab-size-to"));
    // Below the tokenizer's size, or not a multiple of make_vocab_size_divisible_by: refused.
    let e = load(
        &[toml(
            &dir,
            "tokenizer_type = \"GPT2BPETokenizer\"\npad_vocab_size_to = 50000\n",
        )],
        &[],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("pad_vocab_size_to") && e.contains("50257"),
        "{e}"
    );
    let e = load(
        &[toml(
            &dir,
            "tokenizer_type = \"GPT2BPETokenizer\"\npad_vocab_size_to = 50300\n",
        )],
        &[],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("multiple of make_vocab_size_divisible_by 128"),
        "{e}"
    );
}

// ------------------------------------------------------------------ NVIDIA's Llama-3 8B script

#[test]
fn nvidias_llama3_script_parses_with_the_flags_both_branches_give() {
    let c = load(&[fixture("nvidia_train_llama3_8b_h100_fp8.sh")], &[]).unwrap();
    // torchrun --nproc_per_node 8 --nnodes 1; TP 1, CP 1, PP 1.
    assert_eq!(c.world_size, 8);
    assert_eq!(c.data_parallel_size, 8);
    assert_eq!(
        (c.num_layers, c.hidden_size, c.ffn_hidden_size),
        (32, 4096, 14336)
    );
    assert_eq!(c.num_query_groups, Some(8));
    // `--vocab-size 128256` is in both branches of the undecidable `if` on `$3` (line 135).
    assert_eq!(c.vocab_size, Some(128_256));
    assert_eq!(c.padded_vocab_size, Some(128_256));
    assert!(matches!(
        c.sources.get("vocab_size"),
        Some(Source::File { line: 139, .. })
    ));
    // The tokenizer type differs between the branches: a warning naming it.
    assert!(c
        .warnings
        .iter()
        .any(|w| w.field == "tokenizer_type" && w.message.contains(":135:")));
}

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn script(dir: &tempfile::TempDir, text: &str) -> String {
    let p: PathBuf = dir.path().join("launch.sh");
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

const MODEL: &str = "--num-layers 4 --hidden-size 1024 --num-attention-heads 16 --seq-length 512 --micro-batch-size 1 --vocab-size 50257";

#[test]
fn env_sets_script_variables_and_positional_parameters_before_evaluation() {
    let dir = tempfile::tempdir().unwrap();
    let s = script(
        &dir,
        &format!("#!/bin/bash\nCP=${{CP:-1}}\nTP=2\ntorchrun --nproc_per_node 8 pretrain_gpt.py {MODEL} --tensor-model-parallel-size $TP --context-parallel-size $CP --global-batch-size ${{1:-4}}\n"),
    );
    // Without it, `$1` is the script's argument, which the file does not give.
    let e = megatron::load_with_env(std::slice::from_ref(&s), &[], &[]).unwrap_err();
    assert!(e.to_string().contains("`$1`"), "{e}");
    let c = megatron::load_with_env(std::slice::from_ref(&s), &env(&[("1", "4")]), &[]).unwrap();
    assert_eq!((c.context_parallel_size, c.global_batch_size), (1, 4));
    // CP=2 before the script runs: `${CP:-1}` takes it; TP=4 is overwritten by TP=2.
    let c = megatron::load_with_env(
        std::slice::from_ref(&s),
        &env(&[("CP", "2"), ("TP", "4"), ("1", "8")]),
        &[],
    )
    .unwrap();
    assert_eq!(c.context_parallel_size, 2);
    assert_eq!(c.tensor_model_parallel_size, 2);
    assert_eq!(c.global_batch_size, 8);
    assert_eq!(c.data_parallel_size, 2);
    let e = megatron::load_with_env(&[s], &env(&[("1X", "2")]), &[]).unwrap_err();
    assert!(e.to_string().contains("1X"), "{e}");
}

#[test]
fn brace_expansion_runs_loops_and_builds_flags() {
    let dir = tempfile::tempdir().unwrap();
    // `for i in {1..4}` runs four times; `{4,2}` and `{8..16..8}` expand into words.
    let s = script(
        &dir,
        &format!("#!/bin/bash\nN=0\nfor i in {{1..4}}; do N=$((N+2)); done\nfor t in {{4,2}}; do TP=$t; done\nfor g in {{8..16..8}}; do GB=$g; done\ntorchrun --nproc_per_node $N pretrain_gpt.py {MODEL} --tensor-model-parallel-size $TP --global-batch-size $GB\n"),
    );
    let c = load(&[s], &[]).unwrap();
    assert_eq!(c.world_size, 8);
    assert_eq!(c.tensor_model_parallel_size, 2);
    assert_eq!(c.global_batch_size, 16);
}

#[test]
fn world_size_comes_from_sbatch_and_srun_task_counts() {
    let dir = tempfile::tempdir().unwrap();
    // srun starts one rank per task: 2 nodes × 4 tasks per node (from #SBATCH).
    let s = script(
        &dir,
        &format!("#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=4\n#SBATCH --gres=gpu:4\nsrun python pretrain_gpt.py {MODEL}\n"),
    );
    let c = load(&[s], &[]).unwrap();
    assert_eq!(c.world_size, 8);
    // srun's own -n wins over the directives.
    let s = script(
        &dir,
        &format!("#!/bin/bash\n#SBATCH -N 4\n#SBATCH --ntasks-per-node=8\nsrun -n 16 python pretrain_gpt.py {MODEL}\n"),
    );
    assert_eq!(load(&[s], &[]).unwrap().world_size, 16);
    // torchrun's --nnodes from Slurm's SLURM_NNODES, which #SBATCH --nodes sets.
    let s = script(
        &dir,
        &format!("#!/bin/bash\n#SBATCH --nodes=3\nsrun torchrun --nproc-per-node=8 --nnodes=$SLURM_NNODES pretrain_gpt.py {MODEL}\n"),
    );
    assert_eq!(load(&[s], &[]).unwrap().world_size, 24);
    // python -m torch.distributed.run with the GPU count of the allocation.
    let s = script(
        &dir,
        &format!("#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --gpus-per-node=4\npython -m torch.distributed.run --nproc_per_node $SLURM_GPUS_ON_NODE --nnodes $SLURM_JOB_NUM_NODES pretrain_gpt.py {MODEL}\n"),
    );
    assert_eq!(load(&[s], &[]).unwrap().world_size, 8);
}

// ------------------------------------------------------------------ bigscience's BLOOM

#[test]
fn bloom_parses_with_its_real_stage_split_and_no_position_embedding() {
    use ina3d::schedule::{self, ScheduleOptions};
    let c = load(&[fixture("bigscience_tr11-176B-ml.slurm")], &[]).unwrap();
    // #SBATCH --nodes=24 → $SLURM_NNODES → torch.distributed.run --nnodes 24 × 8 GPUs.
    assert_eq!(c.world_size, 192);
    assert_eq!(
        (
            c.tensor_model_parallel_size,
            c.pipeline_model_parallel_size,
            c.data_parallel_size
        ),
        (4, 12, 4)
    );
    assert_eq!(c.padded_vocab_size, Some(250_880));
    assert_eq!(c.position_embedding_type.as_str(), "alibi");
    // --pp-partition-method 'type:transformer|embedding': 70 layers + the 2 embeddings
    // balanced over 12 stages = 6 each, the embeddings taking one slot on the first and
    // last stage.
    assert_eq!(
        c.stage_layers().unwrap(),
        [5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 5]
    );
    let wl = schedule::build(&c, &ScheduleOptions::default()).unwrap();
    let layers: Vec<u32> = wl.stages.iter().map(|s| s.chunks[0].len() as u32).collect();
    assert_eq!(layers, [5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 5]);
    assert_eq!(wl.stages[1].chunks[0], 5..11);
    // Stage 0 parameters per GPU (TP 4): 5 layers (QKV h·3h/4 + 3h/4, projection h²/4 +
    // h, fc1 h·4h/4 + 4h/4, fc2 4h·h/4 + h, two LayerNorms 4h), the word embedding
    // 250880/4 · h and the embedding LayerNorm 2h; ALiBi: no position table.
    let h: u64 = 14336;
    let layer =
        3 * h * h + 3 * h / 4 + h * h / 4 + h + 4 * h * h / 4 + h + 4 * h * h / 4 + h + 4 * h;
    let layer = layer - 3 * h * h + 3 * h * h; // h·3h/4 = 3h²/4: spelled out below
    let qkv = h * 3 * h / 4;
    let proj = h * h / 4;
    let fc1 = h * 4 * h / 4;
    let fc2 = 4 * h * h / 4;
    let biases = 3 * h / 4 + h + 4 * h / 4 + h;
    let per_layer = qkv + proj + fc1 + fc2 + biases + 4 * h;
    let _ = layer;
    assert_eq!(
        wl.stages[0].params_per_gpu,
        5 * per_layer + 250_880 / 4 * h + 2 * h
    );
}

#[test]
fn megatrons_uneven_first_and_last_stages_and_deepspeeds_default_split() {
    let dir = tempfile::tempdir().unwrap();
    let base = "pipeline_model_parallel_size = 4\nworld_size = 4\nnum_layers = 12\n";
    let cfg = |extra: &str| {
        let p: PathBuf = dir.path().join("u.toml");
        std::fs::write(&p, format!("hidden_size = 1024\nnum_attention_heads = 16\nseq_length = 512\nmicro_batch_size = 1\nvocab_size = 50257\n{base}{extra}")).unwrap();
        load(&[p.display().to_string()], &[])
    };
    // First stage 2, last 2: the middle two share 8.
    let c = cfg("decoder_first_pipeline_num_layers = 2\ndecoder_last_pipeline_num_layers = 2\n")
        .unwrap();
    assert_eq!(c.stage_layers().unwrap(), [2, 4, 4, 2]);
    // 12 − 1 = 11 over 3 stages does not divide: Megatron refuses, so do we.
    let e = cfg("decoder_first_pipeline_num_layers = 1\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("decoder_first_pipeline_num_layers") && e.contains("11"),
        "{e}"
    );
    // The embedding counted as a layer: (12 + 1)/… does not divide 4; with the loss too
    // (12 + 2 = 14) neither; both refused with the numbers.
    let e = cfg("account_for_embedding_in_pipeline_split = true\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("13"), "{e}");
    // Megatron-DeepSpeed's default 'type:transformer' on 14 layers over 4 stages:
    // DeepSpeed's balanced partition gives stages of 3 or 4 layers, 14 in all.
    let base2 =
        "pipeline_model_parallel_size = 4\nworld_size = 4\nnum_layers = 14\ndeepspeed = true\n";
    let p: PathBuf = dir.path().join("d.toml");
    std::fs::write(&p, format!("hidden_size = 1024\nnum_attention_heads = 16\nseq_length = 512\nmicro_batch_size = 1\nvocab_size = 50257\n{base2}")).unwrap();
    let c = load(&[p.display().to_string()], &[]).unwrap();
    let s = c.stage_layers().unwrap();
    assert_eq!(s.iter().sum::<u32>(), 14);
    assert!(s.iter().all(|n| *n == 3 || *n == 4), "{s:?}");
}

// ------------------------------------------------------------------ gpt-oss and FP8

#[test]
fn nvidias_gpt_oss_script_has_gated_gelu_experts_and_fp8_parameter_gathers() {
    use ina3d::schedule::{self, GradGroup, ScheduleOptions};
    // PP = WORLD_SIZE = 8 in the script, with 12 layers: Megatron refuses it as we do;
    // the example runs with fewer stages.
    let e = load(&[fixture("nvidia_gptoss_02_train.sh")], &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("12") && e.contains("8"), "{e}");
    let c = load(
        &[fixture("nvidia_gptoss_02_train.sh")],
        &[("pipeline_model_parallel_size", "4")],
    )
    .unwrap();
    assert!(
        c.gated_linear_unit() && !c.swiglu,
        "--quick-geglu gates the MLP"
    );
    assert!(c.fp8_param_gather() && c.use_distributed_optimizer);
    let wl = schedule::build(&c, &ScheduleOptions::default()).unwrap();
    // 3 layers per stage, 4 experts each (EP 1), gated fc1 2·h·ffn and fc2 ffn·h.
    let (h, ffn) = (512u64, 2048u64);
    assert_eq!(
        wl.stages[1].expert_params_per_gpu,
        3 * 4 * (2 * h * ffn + ffn * h)
    );
    // Expert buckets are all linear weights: gathered in FP8, 1 byte per element.
    let expert: Vec<_> = wl.stages[1]
        .buckets
        .iter()
        .filter(|b| b.group == GradGroup::ExpertData)
        .collect();
    assert!(!expert.is_empty());
    for b in expert {
        assert_eq!(b.param_bytes.0, b.params);
    }
}

#[test]
fn fp8_param_gather_sends_linear_weights_in_one_byte_and_the_rest_in_bf16() {
    use ina3d::schedule::{self, ScheduleOptions};
    let c = load(&[fixture("nvidia_train_llama3_8b_h100_fp8.sh")], &[]).unwrap();
    let wl = schedule::build(&c, &ScheduleOptions::default()).unwrap();
    // Llama 3 8B, TP 1, PP 1: per layer the linear weights QKV h·(h + 2·kv), projection
    // h², fc1 2·h·ffn (SwiGLU), fc2 ffn·h with kv = 8·128; RMSNorm weights 2h per layer,
    // the final norm h, word embedding and untied output layer V·h each.
    let (h, kv, ffn, l, v) = (4096u64, 1024u64, 14336u64, 32u64, 128_256u64);
    let linear = l * (h * (h + 2 * kv) + h * h + 2 * h * ffn + ffn * h);
    let other = l * 2 * h + h + 2 * v * h;
    let gathered: u64 = wl.stages[0].buckets.iter().map(|b| b.param_bytes.0).sum();
    assert_eq!(gathered, linear + 2 * other);
    let params: u64 = wl.stages[0].buckets.iter().map(|b| b.params).sum();
    assert_eq!(params, linear + other);
}

#[test]
fn argonne_key_value_iteration_lines_behind_a_logging_prefix_are_read() {
    let c = load(&["gpt3-13b".into(), fixture("argonne_iterations.log")], &[]).unwrap();
    let ms: Vec<f64> = c.iterations.iter().map(|i| i.elapsed_ms).collect();
    assert_eq!(ms, [9123.4, 2345.6, 2300.0]);
    assert_eq!(c.iterations[1].iteration, 2);
}

#[test]
fn newer_virtual_stage_spelling_and_unmodelled_options_are_read() {
    let dir = tempfile::tempdir().unwrap();
    // --num-virtual-stages-per-pipeline-rank 2 is v = 2 directly.
    let c = load(
        &[toml(&dir, "pipeline_model_parallel_size = 2\nworld_size = 2\nnum_virtual_stages_per_pipeline_rank = 2\nglobal_batch_size = 2\n")],
        &[("num_layers", "4")],
    )
    .unwrap();
    assert_eq!(c.virtual_pipeline_model_parallel_size, Some(2));
    // An option that changes the traffic without being modelled is a warning naming it.
    let c = load(&[fixture("bigscience_tr11-176B-ml.slurm")], &[]).unwrap();
    let w = c
        .warnings
        .iter()
        .find(|w| w.field == "sync_tp_duplicated_parameters")
        .expect("a warning");
    assert!(
        w.at.ends_with("tr11-176B-ml.slurm:219:1") && w.message.contains("not modelled"),
        "{w}"
    );
}

#[test]
fn hierarchical_context_parallel_sizes_take_several_values_in_a_script() {
    let dir = tempfile::tempdir().unwrap();
    // argparse nargs='+': `--hierarchical-context-parallel-sizes 2 4` is the list [2, 4].
    let s = script(
        &dir,
        &format!("#!/bin/bash\ntorchrun --nproc_per_node 8 pretrain_gpt.py {MODEL} --context-parallel-size 8 --cp-comm-type a2a+p2p --hierarchical-context-parallel-sizes 2 4 --global-batch-size 1\n"),
    );
    let c = load(&[s], &[]).unwrap();
    assert_eq!(c.hierarchical_cp_sizes(), Some(vec![2, 4]));
    // Sizes whose product is not CP are refused naming the argument.
    let e = ina3d::schedule::build(
        &{
            let mut c = c.clone();
            c.set("hierarchical_context_parallel_sizes", "[2, 2]")
                .unwrap();
            c
        },
        &ina3d::schedule::ScheduleOptions::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("hierarchical_context_parallel_sizes") && e.contains("8"),
        "{e}"
    );
}

#[test]
fn parse_v_says_where_the_vocabulary_came_from_and_env_reaches_the_script() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ina3d"))
        .args(["parse", "-v"])
        .arg(fixture("nvidia_train_llama3_8b_h100_fp8.sh"))
        .args([
            "--env",
            "3=meta-llama/Meta-Llama-3-8B",
            "--env",
            "4=/data/x",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let row = text.lines().find(|l| l.contains("vocab (padded)")).unwrap();
    // With $3 given, the real-data branch runs: HuggingFaceTokenizer on Llama 3's name.
    assert!(row.contains("128256 (128256)"), "{row}");
    assert!(
        row.contains("HuggingFaceTokenizer") && row.contains("Meta-Llama-3-8B"),
        "{row}"
    );
    assert!(
        row.contains("nvidia_train_llama3_8b_h100_fp8.sh:151"),
        "{row}"
    );
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_ina3d"))
        .args(["parse", "gpt3-13b", "--env", "NOEQUALS"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--env `NOEQUALS`"));
}
