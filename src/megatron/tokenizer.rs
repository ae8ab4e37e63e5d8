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
        names: &["nemotron-4", "nemotron4"],
        what: "Nemotron-4's SentencePiece model (256,000 tokens)",
        size: 256_000,
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
        "SentencePieceTokenizer" | "GPTSentencePieceTokenizer"
            if by_model(model).is_none() && sentencepiece_family(model).is_some() =>
        {
            let (n, how) = sentencepiece_family(model).unwrap_or_default();
            TokenizerVocab::Known(n, format!("{t}: {how}"))
        }
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

/// A SentencePiece model named only by its family: Llama (1 and 2 ship a 32,000-piece
/// SentencePiece model; Llama 3 ships tiktoken, not SentencePiece) and Mistral/Mixtral
/// (32,000 pieces up to v0.2; v0.3 and 8x22B name themselves and are matched earlier).
fn sentencepiece_family(model: Option<&str>) -> Option<(u64, String)> {
    let m = model?.to_ascii_lowercase();
    let fam = [
        ("llama", "Llama 1/2"),
        ("mistral", "Mistral"),
        ("mixtral", "Mixtral"),
    ]
    .into_iter()
    .find(|(f, _)| m.contains(f))?;
    Some((
        32_000,
        format!(
            "`{}`: a SentencePiece model of the {} family (32,000 pieces)",
            model.unwrap_or_default(),
            fam.1
        ),
    ))
}

/// Largest tokenizer file read (a SentencePiece model is a few MB, a `tokenizer.json`
/// tens of MB): anything larger is refused, not read.
const MAX_TOKENIZER_FILE: u64 = 256 << 20;

/// The size of the tokenizer stored at `path`, read from the file itself: a SentencePiece
/// `.model` (the `pieces` of its `ModelProto`), a Hugging Face `tokenizer.json` (the
/// largest token id of its vocabulary and added tokens, plus one: `len(tokenizer)`), or
/// a directory holding either. `Ok(None)` when `path` is neither; an error names what in
/// the file is wrong.
pub fn read_tokenizer_size(path: &std::path::Path) -> Result<Option<(u64, String)>, String> {
    let file = if path.is_dir() {
        match ["tokenizer.json", "tokenizer.model"]
            .iter()
            .map(|f| path.join(f))
            .find(|p| p.is_file())
        {
            Some(f) => f,
            None => return Ok(None),
        }
    } else if path.is_file() {
        path.to_path_buf()
    } else {
        return Ok(None);
    };
    let len = std::fs::metadata(&file).map_err(|e| e.to_string())?.len();
    if len > MAX_TOKENIZER_FILE {
        return Err(format!(
            "{}: {len} bytes, larger than any tokenizer ({MAX_TOKENIZER_FILE} bytes at most)",
            file.display()
        ));
    }
    let bytes = std::fs::read(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    let json = file.extension().is_some_and(|e| e == "json");
    let n = if json {
        hf_tokenizer_size(&bytes)
    } else {
        sentencepiece_pieces(&bytes)
    }
    .map_err(|e| format!("{}: {e}", file.display()))?;
    let what = if json {
        "Hugging Face tokenizer.json"
    } else {
        "SentencePiece model"
    };
    Ok(Some((
        n,
        format!("{what} `{}` read: {n} tokens", file.display()),
    )))
}

/// Reads a protobuf varint at `*at`.
fn varint(b: &[u8], at: &mut usize) -> Result<u64, String> {
    let mut v: u64 = 0;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*at).ok_or("cut short inside a varint")?;
        *at += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err("a varint longer than 10 bytes".into())
}

/// The number of `pieces` (field 1, length-delimited) of a SentencePiece `ModelProto`,
/// walking its top-level fields; anything that is not protobuf is an error.
fn sentencepiece_pieces(b: &[u8]) -> Result<u64, String> {
    let (mut at, mut pieces) = (0usize, 0u64);
    while at < b.len() {
        let key = varint(b, &mut at)?;
        let (field, wire) = (key >> 3, key & 7);
        match wire {
            0 => {
                varint(b, &mut at)?;
            }
            1 => at += 8,
            2 => {
                let n = varint(b, &mut at)?;
                let n = usize::try_from(n).map_err(|_| "a field longer than the file")?;
                at = at
                    .checked_add(n)
                    .filter(|e| *e <= b.len())
                    .ok_or("a field runs past the end of the file: not a SentencePiece model")?;
                if field == 1 {
                    pieces += 1;
                }
            }
            5 => at += 4,
            w => {
                return Err(format!(
                    "wire type {w} at byte {at}: not a SentencePiece model"
                ))
            }
        }
        if at > b.len() {
            return Err("cut short: not a SentencePiece model".into());
        }
    }
    if pieces == 0 {
        return Err("no pieces: not a SentencePiece model".into());
    }
    Ok(pieces)
}

/// `len(tokenizer)` of a Hugging Face `tokenizer.json`: one past the largest id of
/// `model.vocab` (a map, or a list of pairs for Unigram models) and `added_tokens`.
fn hf_tokenizer_size(b: &[u8]) -> Result<u64, String> {
    let v: serde_json::Value = serde_json::from_slice(b).map_err(|e| format!("not JSON ({e})"))?;
    let mut top: Option<u64> = None;
    let mut see = |id: Option<u64>| {
        if let Some(i) = id {
            top = Some(top.map_or(i, |t| t.max(i)));
        }
    };
    match v.pointer("/model/vocab") {
        Some(serde_json::Value::Object(m)) => m.values().for_each(|x| see(x.as_u64())),
        Some(serde_json::Value::Array(a)) => {
            (0..a.len() as u64).for_each(|i| see(Some(i)));
        }
        // a plain `vocab.json` (GPT-2 BPE's `--vocab-file`): token → id
        None if v
            .as_object()
            .is_some_and(|m| m.values().all(|x| x.is_u64())) =>
        {
            v.as_object()
                .into_iter()
                .flat_map(|m| m.values())
                .for_each(|x| see(x.as_u64()))
        }
        _ => return Err("no model.vocab: not a Hugging Face tokenizer.json".into()),
    }
    if let Some(serde_json::Value::Array(a)) = v.get("added_tokens") {
        a.iter()
            .for_each(|t| see(t.get("id").and_then(|i| i.as_u64())));
    }
    let top = top.ok_or("an empty vocabulary")?;
    if top >= 1 << 24 {
        return Err(format!("token id {top}: more than any vocabulary (2^24)"));
    }
    Ok(top + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A protobuf length-delimited field.
    fn field(n: u8, body: &[u8]) -> Vec<u8> {
        let mut v = vec![(n << 3) | 2, body.len() as u8];
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn a_sentencepiece_model_is_sized_by_its_pieces_and_damage_is_refused() {
        // three pieces (field 1), a trainer spec (field 2) between them
        let mut m = field(1, b"\x0a\x03<s>");
        m.extend(field(2, b"\x10\x01"));
        m.extend(field(1, b"\x0a\x01a"));
        m.extend(field(1, b"\x0a\x01b"));
        assert_eq!(sentencepiece_pieces(&m), Ok(3));
        assert!(sentencepiece_pieces(&m[..m.len() - 1]).is_err());
        assert!(sentencepiece_pieces(b"{\"model\": 1}").is_err());
        assert!(sentencepiece_pieces(&[0xff; 12]).is_err());
    }

    #[test]
    fn a_tokenizer_json_is_sized_by_its_largest_id_and_a_vocab_json_by_its_entries() {
        let j = br#"{"model": {"vocab": {"a": 0, "b": 1, "c": 2}}, "added_tokens": [{"id": 9, "content": "<x>"}]}"#;
        assert_eq!(hf_tokenizer_size(j), Ok(10));
        assert_eq!(hf_tokenizer_size(br#"{"a": 0, "b": 1}"#), Ok(2));
        assert!(hf_tokenizer_size(br#"{"model": {}}"#).is_err());
        assert!(hf_tokenizer_size(br#"{"model": {"vocab": {"a": 99999999}}}"#).is_err());
    }

    #[test]
    fn a_sentencepiece_model_named_by_its_family_gets_the_familys_size() {
        let k = |t, m| match tokenizer_vocab(Some(t), Some(m)) {
            TokenizerVocab::Known(n, _) => Some(n),
            _ => None,
        };
        assert_eq!(
            k("SentencePieceTokenizer", "/data/llama/tokenizer.model"),
            Some(32_000)
        );
        assert_eq!(
            k("GPTSentencePieceTokenizer", "/ckpt/mistral/tok.model"),
            Some(32_000)
        );
        assert_eq!(k("SentencePieceTokenizer", "/data/other/tok.model"), None);
        // Llama 3's tokenizer is tiktoken: a Hugging Face name, not a SentencePiece family
        assert_eq!(k("HuggingFaceTokenizer", "/data/llama/"), None);
    }

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
