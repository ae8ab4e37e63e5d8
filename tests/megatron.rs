//! Specification of the Megatron front-end: every input variant, the real fixtures, the
//! error paths, merging, overrides and presets.

use ina3d::megatron::{self, Dtype, MegatronError, Recompute, Source, TrainingConfig};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/megatron").join(name)
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
    assert_eq!(c.num_query_groups, None, "group_query_attention is False in the log");
    assert_eq!(c.seq_length, 1024);
    assert_eq!(c.micro_batch_size, 4);
    assert_eq!(c.global_batch_size, 8);
    assert_eq!(c.num_microbatches(), 2, "the log says: setting number of micro-batches to constant 2");
    assert_eq!(c.params_dtype, Dtype::Fp16);
    assert_eq!(c.recompute_granularity, Recompute::Selective);
    assert_eq!(c.vocab_size, Some(50257));
    assert_eq!(c.padded_vocab_size, Some(50304));
    assert_eq!(c.padded_vocab(), 50304);
    assert_eq!(c.log_interval, 10);
    assert_eq!(c.extra.get("wandb_project").map(String::as_str), Some(""));
    assert_eq!(c.extra.get("adam_eps").map(String::as_str), Some("1e-08"));
    let path = fixture("args_block_2024.log").display().to_string();
    assert_eq!(c.sources["num_layers"], Source::File { path: path.clone(), line: 158 });
    assert!(matches!(c.sources["padded_vocab_size"], Source::File { line: 270, .. }));
}
