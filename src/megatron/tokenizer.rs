//! The vocabulary a job's tokenizer gives (docs/model.md#vocabulary).
//!
//! Megatron sizes the embedding, the LM head and the logits from the tokenizer it builds
//! (`build_tokenizer`, then `_vocab_size_with_padding`): the tokenizer's own size for
//! file-based tokenizers (GPT-2 BPE, SentencePiece, Hugging Face), `--vocab-size` for
//! `NullTokenizer` and `TikTokenizer`. A launch script names the tokenizer, not its size,
//! so the reader knows the sizes of published tokenizers; anything else is reported, never
//! silently replaced.

/// A published tokenizer recognised by name: the size Megatron's tokenizer reports.
struct Known {
    /// Lower-case fragments of a `--tokenizer-model` / `--tokenizer-name-or-path` (a
    /// Hugging Face name or a local directory named after it); any one matches.
    names: &'static [&'static str],
    /// What it is.
    what: &'static str,
    /// `len(tokenizer)`: the size Megatron's Hugging Face and SentencePiece wrappers give.
    size: u64,
}

/// Published tokenizers by model name, most specific first.
const KNOWN_MODELS: &[Known] = &[
    Known {
        names: &["meta-llama-3", "llama-3.", "llama-3-", "llama3"],
        what: "Llama 3's tiktoken BPE (128,000 tokens + 256 reserved special tokens)",
        size: 128_256,
    },
    Known {
        names: &["llama-2", "llama2"],
        what: "Llama 2's SentencePiece model",
        size: 32_000,
    },
    Known {
        names: &["mixtral-8x22b"],
        what: "Mixtral-8x22B's SentencePiece model (Mistral v3 tokenizer)",
        size: 32_768,
    },
    Known {
        names: &["mixtral-8x7b", "mistral-7b-v0.1"],
        what: "Mistral 7B / Mixtral-8x7B's SentencePiece model",
        size: 32_000,
    },
    Known {
        names: &["bloom"],
        what: "BLOOM's byte-level BPE",
        size: 250_680,
    },
    Known {
        names: &["gpt2"],
        what: "GPT-2's BPE",
        size: 50_257,
    },
];

/// `TikTokenizer`'s `--vocab-size` default (Megatron-core's `DEFAULT_TIKTOKEN_MAX_VOCAB`).
pub const TIKTOKEN_DEFAULT_VOCAB: u64 = 1 << 17;

/// What the tokenizer arguments of a job say about its vocabulary.
#[derive(Clone, Debug, PartialEq)]
pub enum TokenizerVocab {
    /// The tokenizer's own size, known: the size and how it was recognised.
    Known(u64, String),
    /// The size is `--vocab-size` (`NullTokenizer`, `TikTokenizer`); the default when
    /// `--vocab-size` is absent, if the tokenizer has one.
    FromVocabSize(Option<u64>, String),
    /// A tokenizer whose size the reader does not know: what it is, for the warning.
    Unknown(String),
    /// No tokenizer named.
    None,
}

/// The vocabulary of `tokenizer_type` loading `model` (`--tokenizer-model`,
/// `--tokenizer-name-or-path`, or `--vocab-file`).
pub fn tokenizer_vocab(tokenizer_type: Option<&str>, model: Option<&str>) -> TokenizerVocab {
    let by_model = |m: Option<&str>| -> Option<(u64, String)> {
        let m = m?;
        let lower = m.to_ascii_lowercase();
        KNOWN_MODELS
            .iter()
            .find(|k| k.names.iter().any(|n| lower.contains(n)))
            .map(|k| (k.size, format!("`{m}` recognised as {}", k.what)))
    };
    let Some(t) = tokenizer_type.map(str::trim).filter(|t| !t.is_empty()) else {
        return match by_model(model) {
            Some((n, how)) => TokenizerVocab::Known(n, how),
            None => TokenizerVocab::None,
        };
    };
    match t {
        "GPT2BPETokenizer" => TokenizerVocab::Known(
            50_257,
            "GPT2BPETokenizer: GPT-2's BPE vocabulary (gpt2-vocab.json)".into(),
        ),
        // The size of the SentencePiece model it loads: a recognised model's, else
        // `--vocab-size` when given, else Llama 2's (the model it was written for).
        "Llama2Tokenizer" => match by_model(model) {
            Some((n, how)) => TokenizerVocab::Known(n, format!("{t}: {how}")),
            None => TokenizerVocab::FromVocabSize(
                Some(32_000),
                "Llama2Tokenizer: its SentencePiece model's size, Llama 2's 32,000 unless --vocab-size gives another".into(),
            ),
        },
        "BertWordPieceLowerCase" => TokenizerVocab::Known(
            30_524,
            "BertWordPieceLowerCase: bert-large-uncased's 30,522 WordPiece entries + the [BOS] and [EOS] Megatron adds".into(),
        ),
        "NullTokenizer" => TokenizerVocab::FromVocabSize(
            None,
            "NullTokenizer: its size is --vocab-size (Megatron-core's tokenizers; the legacy one added 1 for its EOD token)".into(),
        ),
        "TikTokenizer" => TokenizerVocab::FromVocabSize(
            Some(TIKTOKEN_DEFAULT_VOCAB),
            format!("TikTokenizer: its size is --vocab-size (default {TIKTOKEN_DEFAULT_VOCAB})"),
        ),
        "HuggingFaceTokenizer"
        | "PretrainedFromHF"
        | "SentencePieceTokenizer"
        | "GPTSentencePieceTokenizer" => match by_model(model) {
            Some((n, how)) => TokenizerVocab::Known(n, format!("{t}: {how}")),
            None => TokenizerVocab::Unknown(match model {
                Some(m) => format!("{t} loading `{m}`, a tokenizer whose size the reader does not know"),
                None => format!("{t} without --tokenizer-model"),
            }),
        },
        other => TokenizerVocab::Unknown(format!("tokenizer type `{other}`, unknown to the reader")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_tokenizers_have_their_sizes() {
        let k = |t, m| match tokenizer_vocab(t, m) {
            TokenizerVocab::Known(n, _) => Some(n),
            _ => None,
        };
        assert!(matches!(
            tokenizer_vocab(Some("Llama2Tokenizer"), None),
            TokenizerVocab::FromVocabSize(Some(32_000), _)
        ));
        assert_eq!(
            k(
                Some("Llama2Tokenizer"),
                Some("/m/Llama-2-7b/tokenizer.model")
            ),
            Some(32_000)
        );
        assert_eq!(
            k(Some("GPT2BPETokenizer"), Some("gpt2-vocab.json")),
            Some(50_257)
        );
        assert_eq!(
            k(
                Some("HuggingFaceTokenizer"),
                Some("meta-llama/Meta-Llama-3-8B")
            ),
            Some(128_256)
        );
        assert_eq!(
            k(Some("HuggingFaceTokenizer"), Some("/models/Llama-3.1-70B/")),
            Some(128_256)
        );
        assert_eq!(
            k(
                Some("HuggingFaceTokenizer"),
                Some("mistralai/Mixtral-8x7B-v0.1")
            ),
            Some(32_000)
        );
        assert_eq!(
            k(
                Some("PretrainedFromHF"),
                Some("mistralai/Mixtral-8x22B-v0.1")
            ),
            Some(32_768)
        );
        assert!(matches!(
            tokenizer_vocab(Some("HuggingFaceTokenizer"), Some("/data/my-tok")),
            TokenizerVocab::Unknown(_)
        ));
        assert!(matches!(
            tokenizer_vocab(Some("NullTokenizer"), None),
            TokenizerVocab::FromVocabSize(None, _)
        ));
        assert!(matches!(
            tokenizer_vocab(Some("Frobnicator"), None),
            TokenizerVocab::Unknown(_)
        ));
        assert_eq!(tokenizer_vocab(None, None), TokenizerVocab::None);
    }
}
