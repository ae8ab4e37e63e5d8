//! Model presets: published shapes of well-known models, as Megatron arguments.
//!
//! Shapes: GPT-3 sizes from Brown et al. 2020 (Table 2.1) as Megatron runs them (1.3B
//! with 16 heads of 128, the Megatron/DeepSpeed examples' choice, since the paper's
//! 24 heads do not divide h = 2048 into its stated head size); global batch = the
//! paper's batch in tokens / 2048. Llama-2 from Touvron et al. 2023 and the model cards
//! (RMSNorm, SwiGLU, RoPE, untied output layer, GQA with 8 groups for 70B; 4M-token
//! batches = 1024 × 4096). BERT-large from Devlin et al. 2019 (batch 256, seq 512).
//!
//! Every preset runs on one GPU (TP1 PP1 DP1), micro-batch 1, in bf16: override the
//! parallel sizes and batch for the job you mean (`preset` then `set`).

use super::config::{Source, TrainingConfig};
use super::error::Loc;

/// Names accepted by [`preset`].
pub const PRESETS: &[&str] = &[
    "gpt3-1.3b",
    "gpt3-2.7b",
    "gpt3-6.7b",
    "gpt3-13b",
    "gpt3-175b",
    "llama2-7b",
    "llama2-13b",
    "llama2-70b",
    "bert-large",
];

const COMMON: &[(&str, &str)] = &[
    ("tensor_model_parallel_size", "1"),
    ("pipeline_model_parallel_size", "1"),
    ("micro_batch_size", "1"),
    ("bf16", "True"),
    ("params_dtype", "torch.bfloat16"),
    ("make_vocab_size_divisible_by", "128"),
];

fn gpt3(l: &str, h: &str, heads: &str, gbs: &str) -> Vec<(&'static str, String)> {
    vec![
        ("num_layers", l.into()),
        ("hidden_size", h.into()),
        ("num_attention_heads", heads.into()),
        ("seq_length", "2048".into()),
        ("max_position_embeddings", "2048".into()),
        ("vocab_size", "50257".into()),
        ("global_batch_size", gbs.into()),
        ("tokenizer_type", "GPT2BPETokenizer".into()),
    ]
}

fn llama2(
    l: &str,
    h: &str,
    heads: &str,
    ffn: &str,
    groups: Option<&str>,
) -> Vec<(&'static str, String)> {
    let mut v = vec![
        ("num_layers", l.into()),
        ("hidden_size", h.into()),
        ("num_attention_heads", heads.into()),
        ("ffn_hidden_size", ffn.into()),
        ("seq_length", "4096".into()),
        ("max_position_embeddings", "4096".into()),
        ("vocab_size", "32000".into()),
        ("global_batch_size", "1024".into()),
        ("swiglu", "True".into()),
        ("untie_embeddings_and_output_weights", "True".into()),
        ("normalization", "RMSNorm".into()),
        ("position_embedding_type", "rope".into()),
        ("add_bias_linear", "False".into()),
        ("tokenizer_type", "Llama2Tokenizer".into()),
    ];
    match groups {
        Some(g) => {
            v.push(("group_query_attention", "True".into()));
            v.push(("num_query_groups", g.into()));
        }
        None => v.push(("group_query_attention", "False".into())),
    }
    v
}

fn shape(name: &str) -> Option<Vec<(&'static str, String)>> {
    Some(match name {
        "gpt3-1.3b" => gpt3("24", "2048", "16", "512"),
        "gpt3-2.7b" => gpt3("32", "2560", "32", "512"),
        "gpt3-6.7b" => gpt3("32", "4096", "32", "1024"),
        "gpt3-13b" => gpt3("40", "5120", "40", "1024"),
        "gpt3-175b" => gpt3("96", "12288", "96", "1536"),
        "llama2-7b" => llama2("32", "4096", "32", "11008", None),
        "llama2-13b" => llama2("40", "5120", "40", "13824", None),
        "llama2-70b" => llama2("80", "8192", "64", "28672", Some("8")),
        "bert-large" => vec![
            ("num_layers", "24".into()),
            ("hidden_size", "1024".into()),
            ("num_attention_heads", "16".into()),
            ("seq_length", "512".into()),
            ("max_position_embeddings", "512".into()),
            ("vocab_size", "30522".into()),
            ("global_batch_size", "256".into()),
            ("tokenizer_type", "BertWordPieceLowerCase".into()),
        ],
        _ => return None,
    })
}

/// Strips an optional `preset:` prefix and normalises case.
pub(crate) fn preset_name(s: &str) -> String {
    s.trim()
        .strip_prefix("preset:")
        .unwrap_or(s.trim())
        .to_ascii_lowercase()
}

/// Applies the preset's arguments onto `c` (recording [`Source::Preset`]); false if the
/// name is unknown.
pub(crate) fn apply_preset(c: &mut TrainingConfig, name: &str) -> bool {
    let name = preset_name(name);
    let Some(args) = shape(&name) else {
        return false;
    };
    let loc = Loc::new(format!("preset:{name}"), 0, 0);
    let src = || Source::Preset { name: name.clone() };
    for (k, v) in COMMON.iter().map(|(k, v)| (*k, v.to_string())).chain(args) {
        // The preset table is static and every preset is loaded by the tests, so this
        // cannot fail in practice; an unknown preset is still never a panic.
        if c.apply(k, &v, src(), &loc).is_err() {
            return false;
        }
    }
    true
}

/// A known model on one GPU in bf16 (see the module doc for sources), or `None` for an
/// unknown name. Accepts `gpt3-13b` and `preset:gpt3-13b`.
pub fn preset(name: &str) -> Option<TrainingConfig> {
    let mut c = TrainingConfig::megatron_defaults();
    if !apply_preset(&mut c, name) {
        return None;
    }
    c.finalize().ok()?;
    Some(c)
}
