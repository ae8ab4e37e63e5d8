//! Model presets: published shapes of well-known models, as Megatron arguments.
//!
//! Shapes: GPT-3 sizes from Brown et al. 2020 (Table 2.1) as Megatron runs them (1.3B
//! with 16 heads of 128, the Megatron/DeepSpeed examples' choice, since the paper's
//! 24 heads do not divide h = 2048 into its stated head size); global batch = the
//! paper's batch in tokens / 2048. Llama-2 from Touvron et al. 2023 and the model cards
//! (RMSNorm, SwiGLU, RoPE, untied output layer, GQA with 8 groups for 70B; 4M-token
//! batches = 1024 × 4096). BERT-large from Devlin et al. 2019 (batch 256, seq 512).
//! Mixture-of-experts models from their published Hugging Face `config.json`
//! (`mistralai/Mixtral-8x7B-v0.1`: 32 layers, h 4096, MLP 14336, 32 heads, 8 KV heads,
//! vocabulary 32000, 8 experts top-2, 32768 positions; `mistralai/Mixtral-8x22B-Instruct-v0.1`:
//! 56 layers, h 6144, MLP 16384, 48 heads, 8 KV heads, vocabulary 32768, 8 experts top-2,
//! 65536 positions), both SwiGLU, RMSNorm, RoPE, untied, without linear biases; their
//! training batch is not published, so sequence 4096, global batch 256 and the all-to-all
//! dispatcher are those of NVIDIA's Megatron-LM Mixtral example script.
//!
//! Llama-3 and Nemotron-4 shapes: see [`llama3`] and [`nemotron4`].
//!
//! Every preset runs on one GPU (TP1 PP1 DP1, EP1), micro-batch 1, in bf16: override the
//! parallel sizes and batch for the job you mean (`preset` then `set`).

use super::config::{Source, TrainingConfig};
use super::error::{Loc, MegatronError};

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
    "llama3-8b",
    "llama3-70b",
    "llama3-405b",
    "nemotron4-15b",
    "nemotron4-340b",
    "bert-large",
    "mixtral-8x7b",
    "mixtral-8x22b",
];

const COMMON: &[(&str, &str)] = &[
    ("tensor_model_parallel_size", "1"),
    ("pipeline_model_parallel_size", "1"),
    ("micro_batch_size", "1"),
    ("bf16", "True"),
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

/// A Llama-3 model (Meta's model cards and `config.json`: GQA with 8 KV heads, SwiGLU,
/// RMSNorm, RoPE, untied, no biases, the 128,256-token tiktoken vocabulary, 8,192-token
/// sequences as NeMo's pre-training recipes run them; batch 128 as those recipes).
fn llama3(l: &str, h: &str, heads: &str, ffn: &str) -> Vec<(&'static str, String)> {
    vec![
        ("num_layers", l.into()),
        ("hidden_size", h.into()),
        ("num_attention_heads", heads.into()),
        ("ffn_hidden_size", ffn.into()),
        ("group_query_attention", "True".into()),
        ("num_query_groups", "8".into()),
        ("seq_length", "8192".into()),
        ("max_position_embeddings", "8192".into()),
        ("global_batch_size", "128".into()),
        ("swiglu", "True".into()),
        ("untie_embeddings_and_output_weights", "True".into()),
        ("normalization", "RMSNorm".into()),
        ("position_embedding_type", "rope".into()),
        ("add_bias_linear", "False".into()),
        ("tokenizer_type", "HuggingFaceTokenizer".into()),
        ("tokenizer_model", "meta-llama/Meta-Llama-3-8B".into()),
    ]
}

/// A Nemotron-4 model (Parmar et al. 2024, "Nemotron-4 15B Technical Report", and the
/// 340B report: GQA with 8 KV heads, squared-ReLU MLP (not gated), RoPE, untied, no
/// biases, a 256,000-token SentencePiece vocabulary, 4,096-token sequences).
fn nemotron4(l: &str, h: &str, heads: &str, ffn: &str) -> Vec<(&'static str, String)> {
    vec![
        ("num_layers", l.into()),
        ("hidden_size", h.into()),
        ("num_attention_heads", heads.into()),
        ("ffn_hidden_size", ffn.into()),
        ("group_query_attention", "True".into()),
        ("num_query_groups", "8".into()),
        ("seq_length", "4096".into()),
        ("max_position_embeddings", "4096".into()),
        ("global_batch_size", "256".into()),
        ("untie_embeddings_and_output_weights", "True".into()),
        ("position_embedding_type", "rope".into()),
        ("add_bias_linear", "False".into()),
        ("tokenizer_type", "SentencePieceTokenizer".into()),
        ("tokenizer_model", "nemotron-4-tokenizer.model".into()),
    ]
}

/// A Mixtral-style MoE model: Llama-like attention (GQA 8), SwiGLU experts in every layer.
fn mixtral(
    l: &str,
    h: &str,
    heads: &str,
    ffn: &str,
    vocab: &str,
    positions: &str,
) -> Vec<(&'static str, String)> {
    vec![
        ("num_layers", l.into()),
        ("hidden_size", h.into()),
        ("num_attention_heads", heads.into()),
        ("ffn_hidden_size", ffn.into()),
        ("group_query_attention", "True".into()),
        ("num_query_groups", "8".into()),
        ("seq_length", "4096".into()),
        ("max_position_embeddings", positions.into()),
        ("vocab_size", vocab.into()),
        ("global_batch_size", "256".into()),
        ("swiglu", "True".into()),
        ("untie_embeddings_and_output_weights", "True".into()),
        ("normalization", "RMSNorm".into()),
        ("position_embedding_type", "rope".into()),
        ("add_bias_linear", "False".into()),
        ("num_experts", "8".into()),
        ("moe_router_topk", "2".into()),
        ("moe_token_dispatcher_type", "alltoall".into()),
        ("tokenizer_type", "Llama2Tokenizer".into()),
    ]
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
        "llama3-8b" => llama3("32", "4096", "32", "14336"),
        "llama3-70b" => llama3("80", "8192", "64", "28672"),
        "llama3-405b" => llama3("126", "16384", "128", "53248"),
        "nemotron4-15b" => nemotron4("32", "6144", "48", "24576"),
        "nemotron4-340b" => nemotron4("96", "18432", "96", "73728"),
        "mixtral-8x7b" => mixtral("32", "4096", "32", "14336", "32000", "32768"),
        "mixtral-8x22b" => mixtral("56", "6144", "48", "16384", "32768", "65536"),
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

/// Applies the preset's arguments onto `c` (recording [`Source::Preset`]); an error
/// names the unknown preset.
pub(crate) fn apply_preset(c: &mut TrainingConfig, name: &str) -> Result<(), MegatronError> {
    let name = preset_name(name);
    let loc = Loc::new(format!("preset:{name}"), 0, 0);
    let Some(args) = shape(&name) else {
        return Err(MegatronError::at(
            &loc,
            "preset",
            format!("expected one of {}, found `{name}`", PRESETS.join(", ")),
        ));
    };
    let src = || Source::Preset { name: name.clone() };
    for (k, v) in COMMON.iter().map(|(k, v)| (*k, v.to_string())).chain(args) {
        // The preset table is static and every preset is loaded by the tests.
        c.apply(k, &v, src(), &loc)?;
    }
    Ok(())
}

/// A known model on one GPU in bf16 (see the module doc for sources), or `None` for an
/// unknown name. Accepts `gpt3-13b` and `preset:gpt3-13b`.
pub fn preset(name: &str) -> Option<TrainingConfig> {
    let mut c = TrainingConfig::megatron_defaults();
    apply_preset(&mut c, name).ok()?;
    c.finalize().ok()?;
    Some(c)
}
