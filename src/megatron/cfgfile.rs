//! Hand-written configuration files, for users who have no Megatron log.
//!
//! # Schema
//!
//! One flat table (TOML) or object (JSON). Keys are Megatron argument names, snake_case
//! or kebab-case (`num_layers`, `num-layers`); values are what the flag takes: integers,
//! booleans, strings (`"torch.bfloat16"`, `"selective"`), or `null`/absent for `None`.
//! The optional key `preset` names a model preset applied first (so `preset =
//! "gpt3-13b"` plus `tensor_model_parallel_size = 8` is GPT-3 13B on TP8). Keys we do not
//! model are kept in `extra`. Example (TOML):
//!
//! ```toml
//! preset = "llama2-7b"
//! tensor_model_parallel_size = 2
//! pipeline_model_parallel_size = 2
//! world_size = 16              # DP derived: 16 / (2·2) = 4
//! micro_batch_size = 1
//! global_batch_size = 64
//! sequence_parallel = true
//! ```

use super::error::{Loc, MegatronError};
use super::scan::Assignment;

/// Keys and values of a config file, each with its line, plus the preset if any.
pub struct FileConfig {
    /// `preset = "…"`, with where it was written.
    pub preset: Option<(String, Loc)>,
    /// Every other key, in file order (TOML) or key order (JSON).
    pub args: Vec<Assignment>,
}

/// Line of the first line of `text` that starts (after blanks and a quote) with `key`.
fn line_of(text: &str, key: &str) -> (usize, usize) {
    for (i, l) in text.lines().enumerate() {
        let t = l.trim_start();
        let t2 = t.trim_start_matches(['"', '\'']);
        if t2.starts_with(key)
            && t2[key.len()..]
                .trim_start_matches(['"', '\''])
                .trim_start()
                .starts_with(['=', ':'])
        {
            return (i + 1, l.len() - t.len() + 1);
        }
    }
    (0, 0)
}

fn python_str_toml(v: &toml::Value) -> Option<String> {
    Some(match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => f.to_string(),
        toml::Value::Boolean(b) => if *b { "True" } else { "False" }.into(),
        toml::Value::Array(a) => format!(
            "[{}]",
            a.iter()
                .filter_map(python_str_toml)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        toml::Value::Datetime(d) => d.to_string(),
        toml::Value::Table(_) => return None,
    })
}

fn python_str_json(v: &serde_json::Value) -> Option<String> {
    Some(match v {
        serde_json::Value::Null => "None".into(),
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Number(n) => n.to_string(),
        serde_json::Value::Bool(b) => if *b { "True" } else { "False" }.into(),
        serde_json::Value::Array(a) => format!(
            "[{}]",
            a.iter()
                .filter_map(python_str_json)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        serde_json::Value::Object(_) => return None,
    })
}

/// Reads a TOML (`json = false`) or JSON config file.
pub fn parse_config_file(path: &str, text: &str, json: bool) -> Result<FileConfig, MegatronError> {
    let pairs: Vec<(String, Option<String>)> = if json {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| {
            MegatronError::at(
                &Loc::new(path, e.line(), e.column()),
                "json",
                format!("expected a JSON object ({e})"),
            )
        })?;
        let serde_json::Value::Object(m) = v else {
            return Err(MegatronError::at(
                &Loc::new(path, 1, 1),
                "json",
                "expected one JSON object of Megatron arguments",
            ));
        };
        m.iter()
            .map(|(k, v)| (k.clone(), python_str_json(v)))
            .collect()
    } else {
        let t: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            let (line, col) = e
                .span()
                .map(|sp| {
                    let before = text.get(..sp.start).unwrap_or(text);
                    (
                        before.matches('\n').count() + 1,
                        before.len() - before.rfind('\n').map_or(0, |p| p + 1) + 1,
                    )
                })
                .unwrap_or((0, 0));
            MegatronError::at(
                &Loc::new(path, line, col),
                "toml",
                format!("expected TOML `key = value` lines ({})", e.message()),
            )
        })?;
        t.iter()
            .map(|(k, v)| (k.clone(), python_str_toml(v)))
            .collect()
    };
    let mut out = FileConfig {
        preset: None,
        args: Vec::new(),
    };
    for (k, v) in pairs {
        let (line, col) = line_of(text, &k);
        let loc = Loc::new(path, line, col);
        let Some(v) = v else {
            return Err(MegatronError::at(
                &loc,
                &k,
                "expected a plain value (number, boolean, string or list), found a table",
            ));
        };
        if k == "preset" {
            out.preset = Some((v, loc));
        } else {
            out.args.push(Assignment {
                key: k,
                value: v,
                loc,
            });
        }
    }
    // TOML tables iterate in key order; put arguments back in file order for provenance.
    out.args.sort_by_key(|a| a.loc.line);
    Ok(out)
}
