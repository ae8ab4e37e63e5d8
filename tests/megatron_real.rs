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
