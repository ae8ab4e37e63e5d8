//! Specification of the Megatron front-end: every input variant, the real fixtures, the
//! error paths, merging, overrides and presets.

use ina3d::megatron::{
    self, CpCommType, Dtype, MegatronError, MoeDispatcher, MoeLayerFreq, Normalization, Recompute,
    Source, TrainingConfig,
};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/megatron")
        .join(name)
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn real_2024_arguments_block_gives_the_gpt2_345m_job() {
    let c = megatron::load(&[fixture("args_block_2024.log")]).unwrap();
    assert_eq!(c.tensor_model_parallel_size, 1);
    assert_eq!(c.pipeline_model_parallel_size, 1);
    assert_eq!(c.data_parallel_size, 1);
    assert_eq!(c.world_size, 1);
    assert_eq!(c.num_layers, 24);
    assert_eq!(c.hidden_size, 1024);
    assert_eq!(c.ffn_hidden_size, 4096);
    assert_eq!(c.num_attention_heads, 16);
    assert_eq!(
        c.num_query_groups, None,
        "group_query_attention is False in the log"
    );
    assert_eq!(c.seq_length, 1024);
    assert_eq!(c.micro_batch_size, 4);
    assert_eq!(c.global_batch_size, 8);
    assert_eq!(
        c.num_microbatches(),
        2,
        "the log says: setting number of micro-batches to constant 2"
    );
    assert_eq!(c.params_dtype, Dtype::Fp16);
    assert_eq!(c.recompute_granularity, Recompute::Selective);
    assert_eq!(c.vocab_size, Some(50257));
    assert_eq!(c.padded_vocab_size, Some(50304));
    assert_eq!(c.padded_vocab(), 50304);
    assert_eq!(c.log_interval, 10);
    assert_eq!(c.extra.get("wandb_project").map(String::as_str), Some(""));
    assert_eq!(c.extra.get("adam_eps").map(String::as_str), Some("1e-08"));
    let path = fixture("args_block_2024.log").display().to_string();
    assert_eq!(
        c.sources["num_layers"],
        Source::File {
            path: path.clone(),
            line: 158
        }
    );
    assert!(matches!(
        c.sources["padded_vocab_size"],
        Source::File { line: 270, .. }
    ));
}

#[test]
fn bundled_example_is_the_16_gpu_tp2_pp2_dp4_run_with_iterations_and_level2_timers() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("traces/example/megatron.log");
    let c = megatron::load(&[p]).unwrap();
    assert_eq!(
        (
            c.tensor_model_parallel_size,
            c.pipeline_model_parallel_size,
            c.data_parallel_size
        ),
        (2, 2, 4)
    );
    assert_eq!(c.world_size, 16);
    assert_eq!(
        (
            c.micro_batch_size,
            c.global_batch_size,
            c.num_microbatches()
        ),
        (4, 64, 4)
    );
    assert_eq!(c.params_dtype, Dtype::Bf16);
    assert!(!c.use_distributed_optimizer);
    assert_eq!(
        c.padded_vocab(),
        50432,
        "50257 rounded up to a multiple of 128·2"
    );
    assert_eq!(c.iterations.len(), 10);
    assert_eq!(c.iterations[0].iteration, 1);
    assert_eq!(
        c.iterations[0].fields.get("timestamp").map(String::as_str),
        Some("2024-01-24 11:10:40")
    );
    let median = c.median_iteration_ms().unwrap();
    assert!((300.0..360.0).contains(&median), "median {median}");
    assert!(
        c.mean_iteration_ms().unwrap() > median,
        "the warm-up iteration pulls the mean up"
    );
    for t in [
        "forward-compute",
        "backward-compute",
        "forward-recv",
        "backward-send",
        "all-grads-sync",
        "optimizer",
    ] {
        assert!(c.timers.contains_key(t), "timer {t} missing");
    }
    let fc = c.timers["forward-compute"];
    assert!(
        fc.min <= fc.max && (70.0..90.0).contains(&fc.min),
        "median of readings ignores warm-up: {fc:?}"
    );
}

#[test]
fn setup_timers_fixture_keeps_every_timer_name_and_repeated_readings_are_summarised() {
    let c = megatron::load(&[
        fixture("args_block_2024.log"),
        fixture("setup_timers_2024.log"),
    ])
    .unwrap();
    assert_eq!(c.timers["load-checkpoint"].max, 0.19);
    assert_eq!(
        c.timers["train/valid/test-data-iterators-setup"].min,
        596.36
    );
    // evaluate: 2101.26 and 1795.46 → median of two = mean.
    assert!((c.timers["evaluate"].min - (2101.26 + 1795.46) / 2.0).abs() < 1e-9);
}

#[test]
fn rank_prefixed_crlf_log_with_trailing_blanks_parses_like_a_clean_one() {
    let c = megatron::load(&[fixture("rank_prefix_crlf_2024.log")]).unwrap();
    assert_eq!(
        (c.tensor_model_parallel_size, c.pipeline_model_parallel_size),
        (2, 4)
    );
    assert_eq!(c.data_parallel_size, 4, "derived: 32 / (2·4)");
    assert!(matches!(
        &c.sources["data_parallel_size"],
        Source::Derived { .. }
    ));
    assert_eq!(c.global_batch_size, 512);
    assert_eq!(c.extra["wandb_project"], "");
    assert_eq!(
        c.extra["zz_site_specific_knob"], "[0.9, 0.95]",
        "unknown keys are kept verbatim"
    );
    assert_eq!(c.iterations.len(), 2);
    assert_eq!(c.iterations[1].elapsed_ms, 3990.1);
    assert_eq!(
        c.iterations[0].fields["throughput per GPU (TFLOP/s/GPU)"],
        "120.2"
    );
    assert_eq!(
        c.params_dtype,
        Dtype::Fp32,
        "no bf16/fp16 flag: Megatron's fp32 default"
    );
    assert_eq!(c.sources["params_dtype"], Source::Default);
}

#[test]
fn megatron_deepspeed_log_with_default0_prefixes_and_one_line_timers() {
    let c = megatron::load(&[fixture("deepspeed_2022.log")]).unwrap();
    assert_eq!(
        (
            c.tensor_model_parallel_size,
            c.pipeline_model_parallel_size,
            c.data_parallel_size
        ),
        (4, 2, 8)
    );
    assert_eq!(
        c.recompute_granularity,
        Recompute::Full,
        "checkpoint_activations is the 2021 name of full recompute"
    );
    assert_eq!(
        c.zero_stage,
        Some(1),
        "DeepSpeed on; its config is not beside the log, so the zero_stage argument stands (with a warning)"
    );
    assert!(
        c.use_distributed_optimizer,
        "ZeRO-1 shards the optimizer as the distributed optimizer does"
    );
    assert!(
        c.warnings.iter().any(|w| w.field == "deepspeed_config"
            && w.message
                .contains("ZeRO stage 1 taken from the zero_stage argument")),
        "{:?}",
        c.warnings
    );
    assert_eq!(c.padded_vocab(), 50688);
    assert_eq!(c.iterations.len(), 2);
    assert_eq!(c.iterations[0].fields["TFLOPs"], "101.23");
    assert_eq!(
        c.timers["backward-params-all-reduce"].min,
        (120.50 + 119.90) / 2.0
    );
    assert_eq!(c.timers["batch-generator"].max, (2.31 + 2.29) / 2.0);
}

#[test]
fn old_2021_log_derives_virtual_pipeline_from_layers_per_virtual_stage() {
    let c = megatron::load(&[fixture("old_2021.log")]).unwrap();
    assert_eq!(
        c.virtual_pipeline_model_parallel_size,
        Some(2),
        "24 / 2 / 6"
    );
    assert_eq!(
        c.data_parallel_size, 2,
        "from the `using world size` line (data-parallel-size: 2)"
    );
    assert_eq!(c.world_size, 16);
    assert_eq!(
        c.iterations.iter().map(|i| i.iteration).collect::<Vec<_>>(),
        vec![100, 200]
    );
    assert_eq!(c.timers["forward-compute"].min, (221.08 + 220.50) / 2.0);
    assert_eq!(
        c.timers["optimizer-unscale-and-check-inf"].max,
        (1.20 + 1.18) / 2.0
    );
}

#[test]
fn old_ddp_impl_torch_overlaps_the_gradient_reduction_and_local_does_not() {
    // Megatron before 2022 prints `DDP_impl` (`--DDP-impl`): PyTorch's DDP all-reduces
    // gradient buckets during the backward, Megatron's `local` one after it.
    let dir = tempfile::tempdir().unwrap();
    let log = |ddp: &str| {
        format!(
            "------------------------ arguments ------------------------\n  DDP_impl ........ {ddp}\n  global_batch_size ..... 64\n  hidden_size ..... 1024\n  micro_batch_size ..... 4\n  num_attention_heads ..... 16\n  num_layers ..... 8\n  seq_length ..... 1024\n  max_position_embeddings ..... 1024\n-------------------- end of arguments ---------------------\n"
        )
    };
    let torch = write(&dir, "torch.log", &log("torch"));
    let local = write(&dir, "local.log", &log("local"));
    let bad = write(&dir, "bad.log", &log("apex"));
    assert!(megatron::load(&[torch]).unwrap().overlap_grad_reduce);
    assert!(!megatron::load(&[local]).unwrap().overlap_grad_reduce);
    let e = megatron::load(std::slice::from_ref(&bad))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(&format!("{}:2:", bad.display()))
            && e.contains("DDP_impl: expected local or torch, found `apex`"),
        "{e}"
    );
}

#[test]
fn key_value_fork_lines_without_spaces_and_lm_loss_dash_are_iterations() {
    use ina3d::megatron::scan::scan_log;
    let text = std::fs::read_to_string(fixture("keyvalue_fork.log")).unwrap();
    let s = scan_log("k.log", &text).unwrap();
    let ms: Vec<f64> = s.iterations.iter().map(|i| i.elapsed_ms).collect();
    assert_eq!(ms, vec![2345.6, 2301.2, 2299.9]);
    assert_eq!(s.iterations[0].fields["lm-loss"], "1.05E+01");
    assert_eq!(s.iterations[1].fields["learning_rate"], "4.5E-06");
    assert_eq!(
        s.iterations[2].fields["current time"],
        "2024-11-05 12:00:06"
    );
    assert_eq!(s.iterations[2].iteration, 4);
}

#[test]
fn max_only_and_all_ranks_timer_blocks_give_min_and_max() {
    use ina3d::megatron::scan::scan_log;
    let text = std::fs::read_to_string(fixture("timer_variants.log")).unwrap();
    let s = scan_log("t.log", &text).unwrap();
    let get = |n: &str| {
        s.timers
            .iter()
            .find(|t| &*t.name == n)
            .map(|t| (t.min, t.max))
            .unwrap()
    };
    assert_eq!(get("forward-backward"), (812.40, 812.40));
    assert_eq!(get("all-grads-sync"), (30.25, 30.25));
    assert_eq!(get("forward-compute"), (220.10, 230.50));
    assert_eq!(get("backward-compute"), (450.00, 470.25));
    assert_eq!(s.timers.len(), 4);
}

#[test]
fn separate_args_log_and_iterations_log_merge_into_one_config() {
    let dir = tempfile::tempdir().unwrap();
    let iters = write(
        &dir,
        "iters.log",
        " iteration       10/ 1000 | elapsed time per iteration (ms): 500.0 |\n iteration       20/ 1000 | elapsed time per iteration (ms): 700.0 |\n",
    );
    let c = megatron::load(&[fixture("args_block_2024.log"), iters.clone()]).unwrap();
    assert_eq!(c.num_layers, 24);
    assert_eq!(c.iterations.len(), 2);
    assert_eq!(c.mean_iteration_ms(), Some(600.0));
    assert_eq!(c.median_iteration_ms(), Some(600.0));
    // Alone, the iterations log has no arguments: a clear error naming it.
    let e = megatron::load(std::slice::from_ref(&iters))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(&format!("{}:1:1: arguments:", iters.display())),
        "{e}"
    );
}

#[test]
fn launch_script_arrays_defaults_arithmetic_and_flag_styles_resolve() {
    let c = megatron::load(&[fixture("launch_arrays.sh")]).unwrap();
    assert_eq!(
        c.world_size, 32,
        "--nproc_per_node 8 × --nnodes ${{NNODES:-4}}"
    );
    assert_eq!(
        (
            c.tensor_model_parallel_size,
            c.pipeline_model_parallel_size,
            c.data_parallel_size
        ),
        (4, 2, 4)
    );
    assert_eq!(
        c.virtual_pipeline_model_parallel_size,
        Some(2),
        "32 / 2 / 8"
    );
    assert_eq!(c.hidden_size, 4096, "--hidden-size=4096");
    assert_eq!(c.ffn_hidden_size, 11008);
    assert_eq!(c.num_query_groups, Some(8));
    assert_eq!(c.global_batch_size, 64, "$((MBS*DP*16))");
    assert!(c.swiglu && c.untie_embeddings_and_output_weights && c.sequence_parallel);
    assert!(c.use_distributed_optimizer && c.overlap_grad_reduce);
    assert_eq!(c.params_dtype, Dtype::Bf16);
    assert_eq!(
        c.normalization,
        Normalization::RMSNorm,
        "+= appends to an array"
    );
    assert_eq!(c.extra["no_masked_softmax_fusion"], "True");
    assert_eq!(
        c.extra["data_path"], "$DATA_PATH",
        "an unresolved value we do not need is kept verbatim"
    );
    let p = fixture("launch_arrays.sh").display().to_string();
    assert_eq!(
        c.sources["tensor_model_parallel_size"],
        Source::File { path: p, line: 29 }
    );
}

#[test]
fn bundled_launch_script_describes_the_same_job_as_the_bundled_log() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("traces/example");
    let s = megatron::load(&[root.join("pretrain_gpt_16gpu.sh")]).unwrap();
    let l = megatron::load(&[root.join("megatron.log")]).unwrap();
    for (a, b) in [
        (s.tensor_model_parallel_size, l.tensor_model_parallel_size),
        (
            s.pipeline_model_parallel_size,
            l.pipeline_model_parallel_size,
        ),
        (s.data_parallel_size, l.data_parallel_size),
        (s.world_size, l.world_size),
        (s.num_layers, l.num_layers),
        (s.num_attention_heads, l.num_attention_heads),
    ] {
        assert_eq!(a, b);
    }
    assert_eq!(
        (s.hidden_size, s.seq_length, s.global_batch_size),
        (l.hidden_size, l.seq_length, l.global_batch_size)
    );
    assert_eq!(s.padded_vocab(), l.padded_vocab());
    assert_eq!(s.params_dtype, l.params_dtype);
}

#[test]
fn unresolved_script_variable_names_file_line_and_flag() {
    let e = megatron::load(&[fixture("launch_unresolved.sh")]).unwrap_err();
    assert!(matches!(e, MegatronError::Unresolved { .. }));
    let s = e.to_string();
    assert!(s.contains("launch_unresolved.sh:6:"), "{s}");
    assert!(s.contains("--tensor-model-parallel-size"), "{s}");
    assert!(s.contains("TP_SIZE"), "{s}");
}

#[test]
fn json_config_applies_its_preset_then_its_keys() {
    let c = megatron::load(&[fixture("gpt3_13b_tp8.json")]).unwrap();
    assert_eq!(
        (c.num_layers, c.hidden_size, c.num_attention_heads),
        (40, 5120, 40)
    );
    assert_eq!(c.tensor_model_parallel_size, 8);
    assert_eq!(c.data_parallel_size, 4, "64 / (8·2)");
    assert_eq!(c.recompute_granularity, Recompute::None);
    assert_eq!(c.extra["my_note"], "kept in extra");
    assert_eq!(
        c.sources["num_layers"],
        Source::Preset {
            name: "gpt3-13b".into()
        }
    );
    assert!(matches!(
        c.sources["tensor_model_parallel_size"],
        Source::File { line: 3, .. }
    ));
}

#[test]
fn tiny_toml_is_8_gpus_tp2_pp2_dp2() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("traces/example/tiny.toml");
    let c = megatron::load_input(p.to_str().unwrap()).unwrap();
    assert_eq!(
        (
            c.tensor_model_parallel_size,
            c.pipeline_model_parallel_size,
            c.data_parallel_size,
            c.world_size
        ),
        (2, 2, 2, 8)
    );
    assert_eq!(
        (
            c.num_layers,
            c.hidden_size,
            c.num_attention_heads,
            c.seq_length
        ),
        (4, 256, 4, 256)
    );
    assert_eq!(
        (
            c.micro_batch_size,
            c.global_batch_size,
            c.num_microbatches()
        ),
        (1, 8, 4)
    );
    assert_eq!(c.padded_vocab(), 1024);
}

#[test]
fn toml_without_extension_is_detected_by_content() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        &dir,
        "job.cfg",
        "preset = \"llama2-70b\"\npipeline-model-parallel-size = 8\nworld_size = 512\n",
    );
    let c = megatron::load(&[p]).unwrap();
    assert_eq!(c.num_query_groups, Some(8));
    assert_eq!(c.data_parallel_size, 64);
}

#[test]
fn every_preset_loads_validates_and_matches_published_shapes() {
    for name in megatron::PRESETS {
        let c = megatron::preset(name).unwrap_or_else(|| panic!("{name}"));
        c.validate().unwrap();
        assert_eq!(
            (
                c.tensor_model_parallel_size,
                c.pipeline_model_parallel_size,
                c.data_parallel_size
            ),
            (1, 1, 1)
        );
        assert_eq!(c.params_dtype, Dtype::Bf16, "{name}");
        assert!(megatron::load_input(&format!("preset:{name}")).is_ok());
    }
    let g = megatron::preset("gpt3-175b").unwrap();
    assert_eq!(
        (
            g.num_layers,
            g.hidden_size,
            g.num_attention_heads,
            g.seq_length
        ),
        (96, 12288, 96, 2048)
    );
    let l = megatron::preset("llama2-7b").unwrap();
    assert_eq!(
        (
            l.num_layers,
            l.hidden_size,
            l.ffn_hidden_size,
            l.vocab_size,
            l.seq_length
        ),
        (32, 4096, 11008, Some(32000), 4096)
    );
    assert_eq!(l.num_query_groups, None);
    let l70 = megatron::preset("llama2-70b").unwrap();
    assert_eq!(
        (
            l70.num_layers,
            l70.hidden_size,
            l70.num_attention_heads,
            l70.num_query_groups,
            l70.ffn_hidden_size
        ),
        (80, 8192, 64, Some(8), 28672)
    );
    let b = megatron::preset("bert-large").unwrap();
    assert_eq!(
        (
            b.num_layers,
            b.hidden_size,
            b.num_attention_heads,
            b.seq_length
        ),
        (24, 1024, 16, 512)
    );
    let g13 = megatron::preset("gpt3-13b").unwrap();
    assert_eq!(
        (g13.num_layers, g13.hidden_size, g13.num_attention_heads),
        (40, 5120, 40)
    );
    let m = megatron::preset("mixtral-8x7b").unwrap();
    assert_eq!(
        (
            m.num_layers,
            m.hidden_size,
            m.ffn_hidden_size,
            m.num_attention_heads,
            m.num_query_groups,
            m.vocab_size
        ),
        (32, 4096, 14336, 32, Some(8), Some(32000)),
        "mistralai/Mixtral-8x7B-v0.1 config.json"
    );
    assert_eq!(
        (m.num_experts, m.moe_router_topk, m.moe_ffn_hidden_size),
        (Some(8), 2, Some(14336))
    );
    assert!(m.swiglu && m.untie_embeddings_and_output_weights && !m.add_bias_linear);
    assert_eq!(m.normalization, Normalization::RMSNorm);
    assert_eq!(m.position_embedding_type, megatron::PositionEmbedding::Rope);
    assert!(
        (0..32).all(|i| m.moe_layer_freq.is_moe_layer(i)),
        "every layer is MoE"
    );
    let m = megatron::preset("mixtral-8x22b").unwrap();
    assert_eq!(
        (
            m.num_layers,
            m.hidden_size,
            m.ffn_hidden_size,
            m.num_attention_heads,
            m.num_query_groups,
            m.vocab_size
        ),
        (56, 6144, 16384, 48, Some(8), Some(32768)),
        "mistralai/Mixtral-8x22B-Instruct-v0.1 config.json"
    );
    assert_eq!((m.num_experts, m.moe_router_topk), (Some(8), 2));
    assert!(megatron::preset("gpt5").is_none());
    assert!(megatron::load_input("gpt5")
        .unwrap_err()
        .to_string()
        .contains("gpt3-13b"));
}

#[test]
fn overrides_accept_kebab_case_and_rederive_dependent_sizes() {
    let mut c = megatron::preset("gpt3-175b").unwrap();
    c.set("tensor-model-parallel-size", "8").unwrap();
    c.set("pipeline_model_parallel_size", "16").unwrap();
    c.set("data-parallel-size", "8").unwrap();
    assert_eq!(c.world_size, 1024, "world re-derived from TP·PP·DP");
    assert_eq!(c.num_microbatches(), 1536 / 8);
    assert_eq!(c.sources["tensor_model_parallel_size"], Source::Override);
    assert_eq!(c.padded_vocab(), 51200, "50257 rounded up to 128·8");
    c.validate().unwrap();
    // Now fix the world size: DP follows.
    c.set("world_size", "512").unwrap();
    assert_eq!(c.data_parallel_size, 4);
    c.set("hidden_size", "1024").unwrap();
    assert_eq!(
        c.ffn_hidden_size, 4096,
        "ffn re-derived from the new hidden size"
    );
    assert!(c
        .set("num-layers", "many")
        .unwrap_err()
        .to_string()
        .starts_with("override (--num-layers or --set num_layers): num_layers: expected a positive integer, found `many`"));
}

#[test]
fn validate_names_the_numbers_that_disagree() {
    let mut c = megatron::preset("gpt3-13b").unwrap();
    c.set("tensor_model_parallel_size", "3").unwrap();
    let e = c.validate().unwrap_err().to_string();
    assert!(
        e.contains("num_attention_heads 40 is not divisible by tensor_model_parallel_size 3"),
        "{e}"
    );
    let mut c = megatron::preset("gpt3-13b").unwrap();
    c.set("pipeline_model_parallel_size", "3").unwrap();
    assert!(c
        .validate()
        .unwrap_err()
        .to_string()
        .contains("num_layers 40 is not divisible by pipeline_model_parallel_size 3"));
    let mut c = megatron::preset("gpt3-13b").unwrap();
    c.set("data_parallel_size", "3").unwrap();
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("global_batch_size 1024 is not a positive multiple of micro_batch_size·data_parallel_size = 1·3 = 3"), "{e}");
    let mut c = megatron::preset("llama2-70b").unwrap();
    c.set("tensor_model_parallel_size", "16").unwrap();
    assert!(c
        .validate()
        .unwrap_err()
        .to_string()
        .contains("num_query_groups 8 is not divisible by tensor_model_parallel_size 16"));
    let mut c = megatron::preset("gpt3-13b").unwrap();
    c.set("pipeline_model_parallel_size", "4").unwrap();
    c.set("virtual_pipeline_model_parallel_size", "3").unwrap();
    assert!(c.validate().unwrap_err().to_string().contains("num_layers 40 is not divisible by pipeline_model_parallel_size·virtual_pipeline_model_parallel_size = 4·3 = 12"));
    let mut c = megatron::preset("gpt3-13b").unwrap();
    c.world_size = 7;
    assert!(c
        .validate()
        .unwrap_err()
        .to_string()
        .contains("world_size 7 ≠ TP·CP·PP·DP = 1·1·1·1 = 1"));
}

#[test]
fn log_world_size_and_data_parallel_size_that_disagree_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        &dir,
        "bad.log",
        "---- arguments ----\n  num_layers ..... 2\n  hidden_size .... 8\n  num_attention_heads ... 2\n  seq_length ... 8\n  micro_batch_size ... 1\n  data_parallel_size ... 2\n  world_size ... 3\n---- end of arguments ----\n",
    );
    let e = megatron::load(&[p]).unwrap_err().to_string();
    assert!(
        e.contains("bad.log:8:1: world_size: world_size 3 ≠ TP·CP·PP·DP = 1·1·1·2 = 2"),
        "{e}"
    );
}

#[test]
fn truncated_arguments_block_is_an_error_at_its_header() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(&dir, "cut.log", "noise\n------------------------ arguments ------------------------\n  num_layers ..... 24\n  hidden_size ....");
    let e = megatron::load(std::slice::from_ref(&p))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        format!("{}:2:1: arguments: the arguments block starting here is truncated: no `end of arguments` line follows", p.display())
    );
}

#[test]
fn non_numeric_size_is_an_error_at_its_column() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        &dir,
        "nan.log",
        "---- arguments ----\r\n[default0]:  tensor_model_parallel_size ...... two\r\n---- end of arguments ----\r\n",
    );
    let e = megatron::load(std::slice::from_ref(&p))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        format!(
            "{}:2:48: tensor_model_parallel_size: expected a positive integer, found `two`",
            p.display()
        )
    );
}

#[test]
fn missing_required_argument_names_the_argument() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        &dir,
        "few.log",
        "---- arguments ----\n  num_layers ..... 24\n---- end of arguments ----\n",
    );
    let e = megatron::load(&[p]).unwrap_err();
    assert!(
        matches!(&e, MegatronError::Missing { field, .. } if field == "hidden_size"),
        "{e}"
    );
}

#[test]
fn iteration_line_with_garbage_elapsed_time_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        &dir,
        "it.log",
        "x\n iteration 5/10 | elapsed time per iteration (ms): fast |\n",
    );
    let e = megatron::load(&[fixture("args_block_2024.log"), p.clone()])
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(&format!("{}:2:", p.display())) && e.contains("found `fast`"),
        "{e}"
    );
}

#[test]
fn malformed_timer_value_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        &dir,
        "tm.log",
        "(min, max) time across ranks (ms):\n    forward-compute ........: (1.0, abc)\n",
    );
    let e = megatron::load(std::slice::from_ref(&p))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(&format!("{}:2:", p.display())) && e.contains("timer forward-compute"),
        "{e}"
    );
}

#[test]
fn unreadable_file_is_an_error_naming_it() {
    let e = megatron::load(&[PathBuf::from("/nonexistent/ina3d.log")])
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("/nonexistent/ina3d.log:0:0: file: cannot be read"),
        "{e}"
    );
}

#[test]
fn log_arguments_win_over_a_script_of_the_same_run() {
    let dir = tempfile::tempdir().unwrap();
    let sh = write(
        &dir,
        "run.sh",
        "torchrun --nproc_per_node 1 pretrain_gpt.py --num-layers 12 --micro-batch-size 4\n",
    );
    let c = megatron::load(&[fixture("args_block_2024.log"), sh]).unwrap();
    assert_eq!(c.num_layers, 24, "the log is what Megatron ran with");
}

#[test]
fn json_keys_are_megatron_argument_names() {
    let c =
        megatron::load(
            &[Path::new(env!("CARGO_MANIFEST_DIR")).join("traces/example/megatron.log")],
        )
        .unwrap();
    let v = serde_json::to_value(&c).unwrap();
    for k in [
        "tensor_model_parallel_size",
        "pipeline_model_parallel_size",
        "data_parallel_size",
        "num_layers",
        "hidden_size",
        "seq_length",
        "micro_batch_size",
        "global_batch_size",
    ] {
        assert!(v.get(k).is_some_and(|x| x.is_u64()), "{k}");
    }
    assert_eq!(v["iterations"][0]["iteration"], 1);
    assert!(v["iterations"][0]["elapsed_ms"].is_f64());
    assert!(v["timers"]["optimizer"]["min"].is_f64());
    let back: TrainingConfig = serde_json::from_value(v).unwrap();
    assert_eq!(back, c);
}

// ---------------------------------------------------------------- launch scripts as bash runs them

fn load_with(inputs: &[&str], overrides: &[(&str, &str)]) -> Result<TrainingConfig, MegatronError> {
    let inputs: Vec<String> = inputs.iter().map(|s| s.to_string()).collect();
    let overrides: Vec<(String, String)> = overrides
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    megatron::load_with_overrides(&inputs, &overrides)
}

fn fx(name: &str) -> String {
    fixture(name).display().to_string()
}

#[test]
fn launch_script_branches_case_functions_and_lists_are_decided_as_bash_decides_them() {
    let c = megatron::load(&[fixture("launch_branches.sh")]).unwrap();
    assert_eq!(
        (c.num_layers, c.hidden_size, c.num_attention_heads),
        (40, 5120, 40),
        "case ${{MODEL_SIZE}} with the default 13B takes the `13B|13b)` arm"
    );
    assert_eq!(
        c.recompute_granularity,
        Recompute::None,
        "USE_RECOMPUTE is \"false\": the `--recompute-granularity full` branch is not taken, nor the elif (40 layers)"
    );
    assert_eq!(
        c.params_dtype,
        Dtype::Bf16,
        "test \"$PRECISION\" == fp16 is false"
    );
    assert!(!c.fp16 && c.bf16);
    assert_eq!(
        c.tensor_model_parallel_size, 4,
        "[ -z \"${{TP:-}}\" ] && TP=4"
    );
    assert_eq!(c.pipeline_model_parallel_size, 2, "(( 2 * 8 >= 16 ))");
    assert!(
        c.sequence_parallel,
        "[ -n 1 ] && [ 1 -eq 1 ] && SP_ARGS=--sequence-parallel"
    );
    assert!(
        c.use_distributed_optimizer && c.overlap_grad_reduce,
        "the for loop appends both flags"
    );
    assert_eq!(
        (c.world_size, c.data_parallel_size),
        (16, 2),
        "the echo naming pretrain_gpt.py inside the function is not the launch"
    );
    let path = fx("launch_branches.sh");
    assert_eq!(
        c.sources["tensor_model_parallel_size"],
        Source::File { path, line: 60 },
        "a flag from a variable set in a function points at the launch word expanding it"
    );
}

#[test]
fn flags_in_a_branch_not_taken_do_not_apply() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        &dir,
        "run.sh",
        "x=false\nARGS=(--num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 128 --micro-batch-size 1)\n\
         if [ \"$x\" = \"true\" ]; then\n  ARGS+=(--recompute-granularity full)\nelif [[ $x == f* ]]; then\n  ARGS+=(--sequence-parallel)\nelse\n  ARGS+=(--swiglu)\nfi\n\
         [[ -n \"$x\" && ! -z $x ]] || exit 1\n\
         python pretrain_gpt.py \"${ARGS[@]}\"\n",
    );
    let c = megatron::load(&[p]).unwrap();
    assert_eq!(c.recompute_granularity, Recompute::None);
    assert!(c.sequence_parallel, "the elif's pattern f* matches false");
    assert!(!c.swiglu, "the else branch is not taken");
}

#[test]
fn a_flag_that_matters_under_an_undecidable_condition_is_an_error_naming_both_lines() {
    let e = megatron::load(&[fixture("launch_undecided.sh")]).unwrap_err();
    assert!(matches!(e, MegatronError::Undecidable { .. }), "{e}");
    let s = e.to_string();
    let p = fx("launch_undecided.sh");
    assert!(
        s.starts_with(&format!("{p}:12:36: --recompute-granularity:")),
        "{s}"
    );
    assert!(
        s.contains(&format!("the condition at {p}:11:4"))
            && s.contains("`$FULL_RECOMPUTE` is not set"),
        "{s}"
    );
    assert!(s.contains("override"), "says how to decide it: {s}");
    // An override decides it; the wandb flags, which do not matter, are a warning.
    let c = load_with(&[&p], &[("recompute_granularity", "full")]).unwrap();
    assert_eq!(c.recompute_granularity, Recompute::Full);
    assert!(
        c.warnings.iter().any(|w| w
            .message
            .contains("--wandb-project, --wandb-exp-name not applied")
            && w.message.contains(&format!("{p}:7:4"))),
        "{:?}",
        c.warnings
    );
}

#[test]
fn an_unset_variable_is_resolved_by_an_override_of_its_flag() {
    let p = fx("launch_unresolved.sh");
    let c = load_with(&[&p], &[("tensor_model_parallel_size", "2")]).unwrap();
    assert_eq!(c.tensor_model_parallel_size, 2);
    assert_eq!(c.world_size, 8, "--nproc_per_node 8 × --nnodes 1");
}

#[test]
fn megatron_deepspeed_script_with_a_heredoc_config_and_eval_reads_gqa_and_zero_stage_2() {
    let c = megatron::load(&[fixture("ds_zero2_heredoc.sh")]).unwrap();
    assert_eq!(
        c.num_query_groups,
        Some(8),
        "--num-key-value-heads 8 is GQA"
    );
    assert!(c.group_query_attention);
    assert_eq!(
        c.zero_stage,
        Some(2),
        "from the config the script writes with cat <<EOT"
    );
    let p = fx("ds_zero2_heredoc.sh");
    assert_eq!(
        c.sources["zero_stage"],
        Source::File { path: p, line: 18 },
        "the line of \"stage\" inside the here-document"
    );
    assert!(
        c.use_distributed_optimizer,
        "ZeRO-2 behaves as the distributed optimizer"
    );
    assert_eq!(
        (
            c.world_size,
            c.tensor_model_parallel_size,
            c.pipeline_model_parallel_size,
            c.data_parallel_size
        ),
        (16, 2, 2, 4),
        "deepspeed --num_nodes 2 --num_gpus 8"
    );
    assert_eq!(
        c.normalization,
        Normalization::RMSNorm,
        "Megatron-DeepSpeed's lower-case rmsnorm"
    );
    assert_eq!(c.position_embedding_type, megatron::PositionEmbedding::Rope);
    assert!(!c.add_bias_linear, "--disable-bias-linear");
    assert_eq!(c.ffn_hidden_size, 11008);
}

#[test]
fn zero_stage_3_is_refused_naming_the_line_of_the_stage() {
    let e = megatron::load(&[fixture("ds_zero3.sh")])
        .unwrap_err()
        .to_string();
    let p = fx("ds_zero3.sh");
    assert!(
        e.starts_with(&format!(
            "{p}:6:1: zero_stage: DeepSpeed ZeRO stage 3 is not modelled"
        )),
        "{e}"
    );
    assert!(e.contains("stages 0–2 are supported"), "{e}");
}

#[test]
fn the_deepspeed_config_beside_a_log_decides_the_stage_over_the_zero_stage_argument() {
    let c = megatron::load(&[fixture("deepspeed_config_beside.log")]).unwrap();
    assert_eq!(
        c.zero_stage,
        Some(1),
        "ds_config_zero1.json says 1; the argument says 3"
    );
    assert_eq!(
        c.sources["zero_stage"],
        Source::File {
            path: fixture("ds_config_zero1.json").display().to_string(),
            line: 5
        }
    );
    assert!(c
        .warnings
        .iter()
        .any(|w| w.field == "zero_stage" && w.message.contains("DeepSpeed uses the config's")));
    assert!(
        c.use_distributed_optimizer,
        "the log prints use_distributed_optimizer False, but ZeRO-1 shards the optimizer"
    );
    assert_eq!(c.num_query_groups, Some(4), "num_key_value_heads 4");
    assert_eq!(c.params_dtype, Dtype::Fp16);
}

#[test]
fn a_config_written_to_a_partly_unknown_path_is_found_through_the_same_variable() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        &dir,
        "ds.sh",
        "DIR=$(pwd)\ncfg=\"$DIR/ds_${USER}.json\"\ncat <<EOT > $cfg\n{\"zero_optimization\": {\"stage\": 2}}\nEOT\n\
         deepspeed --num_gpus 8 $DIR/pretrain_gpt.py --num-layers 2 --hidden-size 64 --num-attention-heads 4 \\\n\
         --seq-length 16 --micro-batch-size 1 --deepspeed --deepspeed_config $cfg\n",
    );
    let c = megatron::load(std::slice::from_ref(&p)).unwrap();
    assert_eq!(c.zero_stage, Some(2));
    assert_eq!(
        c.sources["zero_stage"],
        Source::File {
            path: p.display().to_string(),
            line: 4
        }
    );
    assert_eq!(
        c.extra["deepspeed_config"], "$(pwd)/ds_${USER}.json",
        "shown as the script writes it"
    );
}

#[test]
fn a_deepspeed_config_naming_a_device_is_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        &dir,
        "dev.log",
        "---- arguments ----\n  num_layers ..... 2\n  hidden_size .... 8\n  num_attention_heads ... 2\n  seq_length ... 8\n  micro_batch_size ... 1\n  deepspeed ... True\n  deepspeed_config ... /dev/zero\n  zero_stage ... 1\n---- end of arguments ----\n",
    );
    let c = megatron::load(&[p]).unwrap();
    assert_eq!(c.zero_stage, Some(1), "the argument stands");
    assert!(
        c.warnings
            .iter()
            .any(|w| w.message.contains("`/dev/zero` could not be read")),
        "{:?}",
        c.warnings
    );
}

#[test]
fn deepspeed_off_means_no_zero_stage_whatever_the_argument_says() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        &dir,
        "plain.log",
        "---- arguments ----\n  num_layers ..... 2\n  hidden_size .... 8\n  num_attention_heads ... 2\n  seq_length ... 8\n  micro_batch_size ... 1\n  zero_stage ... 1\n  deepspeed ... False\n---- end of arguments ----\n",
    );
    let c = megatron::load(&[p]).unwrap();
    assert_eq!(c.zero_stage, None);
    assert!(!c.use_distributed_optimizer);
}

// ---------------------------------------------------------------- overrides before validation

#[test]
fn a_single_node_example_of_a_multi_node_model_names_the_override_that_makes_it_valid() {
    let p = fx("single_node_175b.sh");
    let e = load_with(&[&p], &[]).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("{p}:8:1: world_size: world_size 8 is not divisible by tensor·context·pipeline = 8·1·16 = 128")),
        "{e}"
    );
    assert!(e.contains("`--dp 1` or `--set world_size=128`"), "{e}");
    for ov in [("data_parallel_size", "8"), ("world_size", "1024")] {
        let c = load_with(&[&p], &[ov]).unwrap();
        assert_eq!(
            (c.world_size, c.data_parallel_size, c.num_microbatches()),
            (1024, 8, 1536 / 8),
            "{ov:?}"
        );
    }
}

#[test]
fn a_preset_merges_with_an_iterations_log_and_overrides() {
    let log = fx("iterations_keyvalue_and_pasted_timers.log");
    let c = load_with(
        &["gpt3-13b", &log],
        &[
            ("tensor_model_parallel_size", "8"),
            ("data_parallel_size", "4"),
        ],
    )
    .unwrap();
    assert_eq!((c.num_layers, c.hidden_size), (40, 5120));
    assert_eq!(
        c.sources["num_layers"],
        Source::Preset {
            name: "gpt3-13b".into()
        }
    );
    assert_eq!(c.world_size, 32);
    assert_eq!(c.iterations.len(), 3);
    assert_eq!(c.timers["backward-compute"].max, 495.0);
    // `preset:` is never taken for a file; an unknown name says what exists.
    assert!(load_with(&["preset:gpt3-13b", &log], &[]).is_ok());
    let e = load_with(&["gpt5", &log], &[]).unwrap_err().to_string();
    assert!(
        e.contains("mixtral-8x7b") && e.contains("found neither"),
        "{e}"
    );
}

// ---------------------------------------------------------------- config files

#[test]
fn toml_fp16_turns_off_the_presets_bf16_and_an_unknown_key_is_a_warning_naming_its_line() {
    let c = megatron::load(&[fixture("preset_fp16.toml")]).unwrap();
    assert!(c.fp16 && !c.bf16);
    assert_eq!(c.params_dtype, Dtype::Fp16);
    assert!(
        matches!(&c.sources["bf16"], Source::Derived { how } if how.contains("turned off by fp16"))
    );
    assert_eq!((c.tensor_model_parallel_size, c.data_parallel_size), (2, 8));
    let w: Vec<String> = c.warnings.iter().map(|w| w.to_string()).collect();
    assert!(
        w.iter().any(|w| w.starts_with(&format!(
            "{}:6:1: sequence_paralel:",
            fx("preset_fp16.toml")
        )) && w.contains("did you mean `sequence_parallel`")),
        "{w:?}"
    );
    assert!(!c.sequence_parallel, "a misspelt key does not take effect");
}

#[test]
fn fp16_and_bf16_in_one_file_are_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        &dir,
        "both.toml",
        "preset = \"gpt3-1.3b\"\nfp16 = true\nbf16 = true\n",
    );
    let e = megatron::load(&[p]).unwrap_err().to_string();
    assert!(
        e.contains("fp16: fp16 and bf16 are both set by the same input"),
        "{e}"
    );
}

#[test]
fn duplicate_json_keys_and_tables_of_unknown_keys_are_errors_with_their_position() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        &dir,
        "dup.json",
        "{\n  \"num_layers\": 2,\n  \"num_layers\": 4\n}\n",
    );
    let e = megatron::load(std::slice::from_ref(&p))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(&format!("{}:3:", p.display())) && e.contains("duplicate key `num_layers`"),
        "{e}"
    );
    let p = write(
        &dir,
        "nested.toml",
        "num_layers = 2\n[model]\nhidden_size = 8\n",
    );
    let e = megatron::load(std::slice::from_ref(&p))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(&format!("{}:2:", p.display()))
            && e.contains("model: expected a plain value"),
        "{e}"
    );
}

#[test]
fn num_query_groups_in_a_config_file_means_gqa_but_in_a_script_needs_the_switch() {
    let dir = tempfile::tempdir().unwrap();
    let t = write(
        &dir,
        "gqa.toml",
        "preset = \"llama2-7b\"\nnum_query_groups = 8\n",
    );
    assert_eq!(megatron::load(&[t]).unwrap().num_query_groups, Some(8));
    let s = write(
        &dir,
        "mha.sh",
        "python pretrain_gpt.py --num-layers 2 --hidden-size 64 --num-attention-heads 8 --num-query-groups 2 --seq-length 16 --micro-batch-size 1\n",
    );
    let c = megatron::load(&[s]).unwrap();
    assert_eq!(
        c.num_query_groups, None,
        "Megatron ignores --num-query-groups without --group-query-attention"
    );
    assert!(c
        .warnings
        .iter()
        .any(|w| w.field == "num_query_groups" && w.message.contains("multi-head")));
}

// ---------------------------------------------------------------- logs

#[test]
fn key_value_iterations_and_a_timer_block_pasted_without_its_header_are_read() {
    let c = load_with(
        &[
            "gpt3-1.3b",
            &fx("iterations_keyvalue_and_pasted_timers.log"),
        ],
        &[],
    )
    .unwrap();
    let ms: Vec<f64> = c.iterations.iter().map(|i| i.elapsed_ms).collect();
    assert_eq!(
        ms,
        vec![812.5, 799.0, 810.5],
        "elapsed_time_per_iteration_s=0.8105 is 810.5 ms"
    );
    assert_eq!(c.iterations[0].fields["lm_loss"], "7.1E+00");
    assert_eq!(
        c.timers["forward-backward"].min, 780.10,
        "the `<---` annotation is ignored"
    );
    assert_eq!(c.timers["backward-compute"].max, 495.00);
    assert_eq!(
        c.timers["all-grads-sync"].max, 14.00,
        "a `# DP` annotation is ignored"
    );
    assert_eq!(
        c.timers.len(),
        5,
        "the prose lines above the iterations are not timers"
    );
}

#[test]
fn a_malformed_entry_inside_a_headerless_timer_block_is_an_error_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        &dir,
        "t.log",
        "    forward-compute ......: (1.0, 2.0)\n    backward-compute .....: (3.0, lots)\n",
    );
    let e = load_with(&["gpt3-1.3b", &p.display().to_string()], &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(&format!("{}:2:", p.display())) && e.contains("timer backward-compute"),
        "{e}"
    );
}

// ---------------------------------------------------------------- MoE and CP fields

#[test]
fn moe_and_context_parallel_flags_are_read_with_their_megatron_meaning() {
    let c = megatron::load(&[fixture("moe_cp.sh")]).unwrap();
    assert_eq!(c.num_experts, Some(16));
    assert_eq!(c.moe_router_topk, 2);
    let pattern: Vec<bool> = (0..16).map(|i| i >= 2).collect();
    assert_eq!(
        c.moe_layer_freq,
        MoeLayerFreq::Pattern(pattern),
        "([0]*2+[1]*14)"
    );
    assert!(!c.moe_layer_freq.is_moe_layer(1) && c.moe_layer_freq.is_moe_layer(2));
    assert_eq!(c.moe_token_dispatcher_type, MoeDispatcher::AllToAll);
    assert_eq!(c.moe_expert_capacity_factor, Some(1.25));
    assert_eq!(c.moe_ffn_hidden_size, Some(2048));
    assert_eq!(c.moe_shared_expert_intermediate_size, Some(4096));
    assert_eq!(
        (c.expert_model_parallel_size, c.expert_tensor_parallel_size),
        (4, 1)
    );
    assert_eq!(
        (c.context_parallel_size, c.cp_comm_type),
        (2, CpCommType::A2a)
    );
    assert_eq!(c.world_size, 64);
    assert_eq!(c.data_parallel_size, 8, "64 / (TP2·CP2·PP2)");
    assert_eq!(c.expert_data_parallel_size(), 8, "64 / (ETP1·EP4·PP2)");
    assert_eq!(c.num_query_groups, Some(4));
    assert!(
        c.grad_reduce_in_bf16 && !c.accumulate_allreduce_grads_in_fp32,
        "bf16 with --grad-reduce-in-bf16"
    );
}

#[test]
fn a_moe_arguments_block_carries_every_expert_field_with_its_line() {
    let c = megatron::load(&[fixture("moe_args_2025.log")]).unwrap();
    assert_eq!(c.num_experts, Some(60));
    assert_eq!(c.moe_router_topk, 4);
    assert_eq!(
        c.cp_comm_type,
        CpCommType::P2p,
        "Megatron prints the list ['p2p']"
    );
    assert_eq!(c.expert_tensor_parallel_size, 2);
    assert_eq!(c.expert_data_parallel_size(), 2);
    assert_eq!(c.moe_expert_capacity_factor, None, "None: dropless");
    assert_eq!(c.moe_ffn_hidden_size, Some(1408));
    assert_eq!(
        c.moe_layer_freq,
        MoeLayerFreq::Pattern(vec![false, true, true, true, true, true, true, true])
    );
    assert_eq!(c.position_embedding_type, megatron::PositionEmbedding::Rope);
    assert_eq!(c.padded_vocab(), 152064, "151936 rounded up to 128·2");
    let p = fx("moe_args_2025.log");
    assert_eq!(
        c.sources["num_experts"],
        Source::File {
            path: p.clone(),
            line: 28
        }
    );
    assert_eq!(
        c.sources["moe_layer_freq"],
        Source::File { path: p, line: 22 }
    );
}

#[test]
fn megatron_deepspeed_moe_spellings_map_onto_the_expert_fields() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        &dir,
        "dsmoe.log",
        "---- arguments ----\n  num_layers ..... 4\n  hidden_size .... 64\n  num_attention_heads ... 4\n  seq_length ... 16\n  micro_batch_size ... 1\n  world_size ... 4\n  num_experts ... [8]\n  topk ... 1\n  expert_interval ... 2\n  moe_expert_parallel_size ... 2\n  disable_bias_linear ... True\n---- end of arguments ----\n",
    );
    let c = megatron::load(&[p]).unwrap();
    assert_eq!(
        (
            c.num_experts,
            c.moe_router_topk,
            c.expert_model_parallel_size
        ),
        (Some(8), 1, 2)
    );
    assert_eq!(
        c.moe_layer_freq,
        MoeLayerFreq::Pattern(vec![false, true, false, true]),
        "Megatron-DeepSpeed: layer n (1-based) is MoE when n % expert_interval == 0"
    );
    let p = write(
        &dir,
        "dense.log",
        "---- arguments ----\n  num_layers ..... 4\n  hidden_size .... 64\n  num_attention_heads ... 4\n  seq_length ... 16\n  micro_batch_size ... 1\n  num_experts ... [1]\n  topk ... 1\n---- end of arguments ----\n",
    );
    assert_eq!(
        megatron::load(&[p]).unwrap().num_experts,
        None,
        "[1] is Megatron-DeepSpeed's dense default"
    );
}

#[test]
fn expert_tp_defaults_to_tp_and_moe_ffn_to_ffn_as_megatron_does() {
    let mut c = megatron::preset("mixtral-8x7b").unwrap();
    c.set("tensor_model_parallel_size", "4").unwrap();
    assert_eq!(c.expert_tensor_parallel_size, 4);
    assert!(matches!(
        &c.sources["expert_tensor_parallel_size"],
        Source::Derived { .. }
    ));
    assert_eq!(c.moe_ffn_hidden_size, Some(14336));
}

fn moe_job(extra: &[(&str, &str)]) -> Result<TrainingConfig, MegatronError> {
    let mut ov = vec![("world_size", "64")];
    ov.extend_from_slice(extra);
    load_with(&["mixtral-8x7b"], &ov)
}

#[test]
fn inconsistent_expert_and_context_sizes_say_what_would_make_them_valid() {
    let e = moe_job(&[("expert_model_parallel_size", "3")])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("expert_model_parallel_size: num_experts 8 is not divisible by expert_model_parallel_size 3: use an EP that divides 8 (1, 2, 4, 8)"),
        "{e}"
    );
    let e = moe_job(&[("context_parallel_size", "4"), ("seq_length", "4100")])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("seq_length: seq_length 4100 is not divisible by 2·context_parallel_size = 8")
            && e.contains("e.g. 4104"),
        "{e}"
    );
    let e = moe_job(&[
        ("tensor_model_parallel_size", "2"),
        ("expert_tensor_parallel_size", "1"),
        ("moe_token_dispatcher_type", "alltoall_seq"),
    ])
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("expert_tensor_parallel_size: expert_tensor_parallel_size 1 ≠ tensor_model_parallel_size 2 is not supported by the alltoall_seq dispatcher"),
        "{e}"
    );
    let e = load_with(
        &["mixtral-8x7b"],
        &[
            ("world_size", "12"),
            ("global_batch_size", "12"),
            ("expert_model_parallel_size", "8"),
        ],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("world_size 12 is not divisible by expert_tensor_parallel_size·expert_model_parallel_size·pipeline_model_parallel_size = 1·8·1 = 8")
            && e.contains("`--dp 16` (world_size 16)"),
        "{e}"
    );
    let e = moe_job(&[
        ("add_bias_linear", "true"),
        ("expert_tensor_parallel_size", "2"),
        ("tensor_model_parallel_size", "2"),
    ])
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("biases in expert layers only with expert_tensor_parallel_size 1"),
        "{e}"
    );
    let e = load_with(&["gpt3-1.3b"], &[("expert_model_parallel_size", "2")])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("expert_model_parallel_size 2 needs a MoE model"),
        "{e}"
    );
}

#[test]
fn bad_moe_layer_patterns_and_mixed_cp_comm_types_are_errors() {
    let e = moe_job(&[("moe_layer_freq", "[1,0]*8")])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("moe_layer_freq: the layer pattern has 16 entries but num_layers is 32"),
        "{e}"
    );
    let e = moe_job(&[("moe_layer_freq", "([0]*3+[2]*29)")])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("override (--moe-layer-freq or --set moe_layer_freq): moe_layer_freq: bad layer pattern")
            && e.contains("0 (dense layer) or 1"),
        "{e}"
    );
    let e = moe_job(&[("moe_layer_freq", "[1]*100000000000")])
        .unwrap_err()
        .to_string();
    assert!(e.contains("more than 65536 entries"), "{e}");
    let e = moe_job(&[("cp_comm_type", "['p2p', 'a2a']")])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("cp_comm_type: per-layer types that differ"),
        "{e}"
    );
    let c = moe_job(&[
        ("moe_layer_freq", "([0]*4+[1]*28)"),
        ("cp_comm_type", "['a2a', 'a2a']"),
    ])
    .unwrap();
    assert_eq!(c.cp_comm_type, CpCommType::A2a);
    assert!(!c.moe_layer_freq.is_moe_layer(3) && c.moe_layer_freq.is_moe_layer(4));
    let c = moe_job(&[("moe_layer_freq", "2")]).unwrap();
    assert!(
        c.moe_layer_freq.is_moe_layer(0) && !c.moe_layer_freq.is_moe_layer(1),
        "Megatron: i % 2 == 0"
    );
}

// ---------------------------------------------------------------- crafted sizes

#[test]
fn crafted_sizes_that_would_overflow_are_errors_naming_the_field() {
    let e = load_with(&["gpt3-1.3b"], &[("hidden_size", "18446744073709551615")])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("hidden_size") && e.contains("does not fit in 64 bits"),
        "{e}"
    );
    let e = load_with(
        &["gpt3-1.3b"],
        &[
            ("micro_batch_size", "18446744073709551615"),
            ("data_parallel_size", "4"),
        ],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("micro_batch_size") && e.contains("64 bits"),
        "{e}"
    );
    let e = load_with(
        &["gpt3-1.3b"],
        &[
            ("make_vocab_size_divisible_by", "18446744073709551615"),
            ("tensor_model_parallel_size", "2"),
        ],
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("make_vocab_size_divisible_by"), "{e}");
    let e = load_with(
        &["gpt3-1.3b"],
        &[
            ("tensor_model_parallel_size", "4294967295"),
            ("pipeline_model_parallel_size", "4294967295"),
            ("data_parallel_size", "4294967295"),
        ],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("world_size") && e.contains("does not fit"),
        "{e}"
    );
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        &dir,
        "big.sh",
        "torchrun --nproc_per_node 4294967296 --nnodes 4294967296 pretrain_gpt.py --num-layers 2\n",
    );
    let e = megatron::load(std::slice::from_ref(&p))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(&format!("{}:1:", p.display())) && e.contains("world_size"),
        "{e}"
    );
    let p = write(
        &dir,
        "arith.sh",
        "TP=$((9223372036854775807 + 1))\npython pretrain_gpt.py --tensor-model-parallel-size $TP --num-layers 2\n",
    );
    let e = megatron::load(std::slice::from_ref(&p))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("--tensor-model-parallel-size") && e.contains("integer overflow"),
        "{e}"
    );
}

// ---------------------------------------------------------------- parse --json round trip

/// `ina3d parse INPUT --json`, run as a user runs it.
fn parse_json(inputs: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ina3d"))
        .arg("parse")
        .args(inputs)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn parse_json_output_reads_back_as_a_config_file_giving_the_same_job() {
    let dir = tempfile::tempdir().unwrap();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("traces/example/megatron.log");
    let cases: Vec<Vec<String>> = vec![
        vec![example.display().to_string()],
        vec![fx("moe_args_2025.log")],
        vec![fx("moe_cp.sh")],
        vec![fx("deepspeed_2022.log")],
        vec![fx("launch_arrays.sh")],
        vec![
            "llama2-70b".into(),
            fx("iterations_keyvalue_and_pasted_timers.log"),
        ],
    ];
    for (i, inputs) in cases.iter().enumerate() {
        let refs: Vec<&str> = inputs.iter().map(String::as_str).collect();
        let original = megatron::load_with_overrides(inputs, &[]).unwrap();
        let json = parse_json(&refs);
        let p = write(&dir, &format!("job{i}.json"), &json);
        let back = megatron::load(&[p]).unwrap_or_else(|e| panic!("{inputs:?}: {e}"));
        let strip = |c: &TrainingConfig| {
            let mut v = serde_json::to_value(c).unwrap();
            v.as_object_mut().unwrap().remove("sources");
            v
        };
        assert_eq!(strip(&back), strip(&original), "{inputs:?}");
        assert!(
            matches!(back.sources["num_layers"], Source::File { line, .. } if line > 0),
            "provenance points into the JSON file"
        );
    }
}

mod never_panics {
    use ina3d::megatron::{cfgfile, preset, scan, script};
    use proptest::prelude::*;

    /// Lines built from the vocabulary of real logs and scripts, so the generator
    /// reaches the parsers' inner states rather than only their first rejection.
    fn loggy() -> impl Strategy<Value = String> {
        let atoms = prop::sample::select(vec![
            "------------------------ arguments ------------------------",
            "-------------------- end of arguments ---------------------",
            "  num_layers ........ ",
            "  tensor_model_parallel_size .... ",
            " iteration ",
            "iteration=",
            "/",
            " | ",
            "|",
            ": ",
            "=",
            "elapsed time per iteration (ms): ",
            "(min, max) time across ranks (ms):",
            "times across ranks (ms):",
            "max time across ranks (ms):",
            "  forward-compute:",
            "     rank  3: ",
            "    forward-backward .......: ",
            "(",
            ")",
            ", ",
            "time (ms) | ",
            " > padded vocab (size: ",
            "(new size: ",
            "using world size: ",
            "[default0]:",
            "3: ",
            "[2024-01-01 00:00:00] ",
            "\r\n",
            "\n",
            "12",
            "3.5",
            "-1",
            "1e308",
            "nan",
            "None",
            "True",
            "é",
            "\u{1}",
            "${",
            "}",
            "$((",
            "))",
            "$(",
            "\"",
            "'",
            "\\\n",
            "pretrain_gpt.py",
            "--tp",
            "--num-layers",
            "X=(",
            "#",
            "${A:-${B:-",
            "[@]",
            " ",
        ]);
        prop::collection::vec(atoms, 0..60).prop_map(|v| v.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 600, ..ProptestConfig::default() })]

        #[test]
        fn log_scanner_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
            let text = String::from_utf8_lossy(&bytes);
            let _ = scan::scan_log("fuzz.log", &text);
            let _ = script::scan_script("fuzz.sh", &text);
            let _ = cfgfile::parse_config_file("fuzz.toml", &text, false);
            let _ = cfgfile::parse_config_file("fuzz.json", &text, true);
        }

        #[test]
        fn every_parser_survives_log_and_script_shaped_garbage(text in loggy()) {
            let _ = scan::scan_log("fuzz.log", &text);
            let _ = script::scan_script("fuzz.sh", &text);
            let _ = cfgfile::parse_config_file("fuzz.toml", &text, false);
            for line in text.lines() {
                let (s, _) = scan::strip_prefixes(line);
                let _ = scan::args_line(s);
                let _ = scan::iteration_head(s);
                let _ = scan::timer_values(s);
            }
        }

        #[test]
        fn overrides_never_panic(key in "[a-z_-]{0,40}", value in ".{0,20}") {
            let mut c = preset("gpt3-1.3b").unwrap();
            let _ = c.set(&key, &value);
            let _ = c.validate();
            let _ = (c.num_microbatches(), c.padded_vocab(), c.mean_iteration_ms());
        }

        #[test]
        fn any_valid_parallel_override_validates_and_keeps_the_identity(tp in 0u32..4, pp in 0u32..4, dp in 1u32..9) {
            let (tp, pp) = (1 << tp, 1 << pp);
            let mut c = preset("gpt3-13b").unwrap();
            c.set("tensor_model_parallel_size", &tp.to_string()).unwrap();
            c.set("pipeline_model_parallel_size", &pp.to_string()).unwrap();
            c.set("data_parallel_size", &dp.to_string()).unwrap();
            c.set("global_batch_size", &(dp * 8).to_string()).unwrap();
            prop_assert_eq!(c.world_size, tp * pp * dp);
            prop_assert_eq!(c.num_microbatches(), 8);
            prop_assert_eq!(c.padded_vocab() % (128 * tp as u64), 0);
            // 40 layers and 40 heads: only PP/TP dividing 40 validate.
            prop_assert_eq!(c.validate().is_ok(), 40 % pp == 0 && 40 % tp == 0);
        }
    }
}

#[test]
fn a_timer_header_behind_a_python_logging_prefix_opens_its_block() {
    // Megatron logging through Python's `logging` module: `LEVEL:logger:` before the
    // header line only (one log call prints the whole block).
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        &dir,
        "t.log",
        "INFO:megatron.core.timers:times across ranks (ms):\n  forward-compute:\n     rank  0: 10.00\n     rank  1: 12.50\n  backward-compute:\n     rank  0: 20.00\n     rank  1: 21.00\nINFO:megatron.training.training: iteration        2/      10 | elapsed time per iteration (ms): 40.0 |\n",
    );
    let c = load_with(&["gpt3-1.3b", &p.display().to_string()], &[]).unwrap();
    assert_eq!(c.timers["forward-compute"].min, 10.0);
    assert_eq!(c.timers["forward-compute"].max, 12.5);
    assert_eq!(c.timers["backward-compute"].max, 21.0);
    assert_eq!(
        c.iterations.len(),
        1,
        "the iteration line behind the prefix too"
    );
    assert_eq!(c.iterations[0].elapsed_ms, 40.0);
}

/// A mistyped override is not silently dropped: it is named in a warning, with the
/// closest argument ina3d models; a known one warns about nothing.
#[test]
fn an_override_of_an_unknown_argument_is_named_in_a_warning_with_a_suggestion() {
    let load = |k: &str, v: &str| {
        megatron::load_with_overrides(&["gpt3-13b".to_string()], &[(k.into(), v.into())]).unwrap()
    };
    let c = load("num_layer", "4");
    let w: Vec<String> = c.warnings.iter().map(ToString::to_string).collect();
    assert!(
        w.iter()
            .any(|w| w.contains("num_layer") && w.contains("did you mean `num_layers`")),
        "{w:?}"
    );
    assert_ne!(c.num_layers, 4);
    let c = load("num-layers", "4");
    assert_eq!(c.num_layers, 4);
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
}
