//! Hand-written configuration files, for users who have no Megatron log — and the
//! `ina3d parse --json` output, which reads back as one.
//!
//! # Schema
//!
//! One table (TOML) or object (JSON). Keys are Megatron argument names, snake_case or
//! kebab-case (`num_layers`, `num-layers`); values are what the flag takes: integers,
//! booleans, strings (`"torch.bfloat16"`, `"selective"`), lists, or `null`/absent for
//! `None`. Every key ina3d models takes effect exactly as the flag would (`fp16 = true`
//! makes an fp16 job, turning off a preset's bf16). The optional key `preset` names a
//! model preset applied first (so `preset = "gpt3-13b"` plus
//! `tensor_model_parallel_size = 8` is GPT-3 13B on TP8). `num_query_groups` without
//! `group_query_attention` turns GQA on (a file says what it means; Megatron's flag
//! needs both). A key ina3d does not model is kept in `extra` with a warning naming its
//! line (and the modelled name it resembles, if any); duplicate keys are an error.
//!
//! The sections `parse --json` writes are read back: `extra` (arguments kept verbatim,
//! applied before the top-level keys), `iterations`, `timers`; `sources` and the computed
//! `num_microbatches`, `mean_iteration_ms`, `median_iteration_ms` are recomputed, not read.
//! Example (TOML):
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

use super::config::{IterationRecord, TimerStat};
use super::error::{Loc, MegatronError, Warning};
use super::fields::{canonical_key, is_modelled};
use super::scan::Assignment;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Keys and values of a config file, each with its line, plus the preset if any.
#[derive(Debug, Default)]
pub struct FileConfig {
    /// `preset = "…"`, with where it was written.
    pub preset: Option<(String, Loc)>,
    /// Every argument: the `extra` section's first, then the top-level keys in file order.
    pub args: Vec<Assignment>,
    /// Iterations of a `parse --json` output.
    pub iterations: Vec<IterationRecord>,
    /// Timers of a `parse --json` output.
    pub timers: BTreeMap<String, TimerStat>,
    /// Keys kept without being modelled, and similar notes.
    pub warnings: Vec<Warning>,
}

/// Keys of `parse --json` output that are computed from the rest, hence not read.
const COMPUTED: &[&str] = &[
    "sources",
    "num_microbatches",
    "mean_iteration_ms",
    "median_iteration_ms",
];

/// A JSON value whose objects have no duplicate keys (serde_json keeps the last silently).
struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Strict;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Strict, E> {
        Ok(Strict(Value::Bool(v)))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Strict, E> {
        Ok(Strict(Value::from(v)))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Strict, E> {
        Ok(Strict(Value::from(v)))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Strict, E> {
        // TOML's nan and inf have no JSON number: refused, never read as an absent key
        // (which would give the argument its default)
        serde_json::Number::from_f64(v)
            .map(|n| Strict(Value::Number(n)))
            .ok_or_else(|| E::custom(format!("`{v}` is not a finite number")))
    }
    fn visit_str<E>(self, v: &str) -> Result<Strict, E> {
        Ok(Strict(Value::String(v.to_string())))
    }
    fn visit_string<E>(self, v: String) -> Result<Strict, E> {
        Ok(Strict(Value::String(v)))
    }
    fn visit_unit<E>(self) -> Result<Strict, E> {
        Ok(Strict(Value::Null))
    }
    fn visit_none<E>(self) -> Result<Strict, E> {
        Ok(Strict(Value::Null))
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Strict, D::Error> {
        Strict::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Strict, A::Error> {
        let mut v = Vec::new();
        while let Some(Strict(x)) = a.next_element()? {
            v.push(x);
        }
        Ok(Strict(Value::Array(v)))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Strict, A::Error> {
        let mut m = Map::new();
        while let Some(k) = a.next_key::<String>()? {
            let Strict(v) = a.next_value()?;
            if m.insert(k.clone(), v).is_some() {
                return Err(de::Error::custom(format!("duplicate key `{k}`")));
            }
        }
        Ok(Strict(Value::Object(m)))
    }
}

/// Line and column of the first line at or after `from` that starts (after blanks and a
/// quote) with `key` followed by `=` or `:`, or is the TOML table header `[key]`.
fn line_of(text: &str, key: &str, from: usize) -> (usize, usize) {
    for (i, l) in text.lines().enumerate().skip(from.saturating_sub(1)) {
        let t = l.trim_start();
        if t.trim_end() == format!("[{key}]") {
            return (i + 1, l.len() - t.len() + 1);
        }
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

/// Python's `str()` of a plain value; `None` for an object.
fn python_str(v: &Value) -> Option<String> {
    Some(match v {
        Value::Null => "None".into(),
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => if *b { "True" } else { "False" }.into(),
        Value::Array(a) => {
            let items: Option<Vec<String>> = a.iter().map(python_str).collect();
            format!("[{}]", items?.join(", "))
        }
        Value::Object(_) => return None,
    })
}

/// Where a duplicate key is written the second time (serde reports the end of its
/// object instead).
fn duplicate_position(text: &str, msg: &str) -> Option<(usize, usize)> {
    let key = msg.strip_prefix("duplicate key `")?.split('`').next()?;
    let quoted = format!("\"{key}\"");
    let mut seen = 0;
    for (i, l) in text.lines().enumerate() {
        let mut from = 0;
        while let Some(p) = l[from..].find(&quoted) {
            let at = from + p;
            from = at + quoted.len();
            if l[from..].trim_start().starts_with(':') {
                seen += 1;
                if seen == 2 {
                    return Some((i + 1, at + 1));
                }
            }
        }
    }
    None
}

fn read_json(path: &str, text: &str) -> Result<Map<String, Value>, MegatronError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let v = Strict::deserialize(&mut de)
        .and_then(|v| de.end().map(|_| v))
        .map_err(|e| {
            let (line, col) =
                duplicate_position(text, &e.to_string()).unwrap_or((e.line(), e.column()));
            MegatronError::at(
                &Loc::new(path, line, col),
                "json",
                format!("expected one JSON object of Megatron arguments ({e})"),
            )
        })?;
    match v.0 {
        Value::Object(m) => Ok(m),
        _ => Err(MegatronError::at(
            &Loc::new(path, 1, 1),
            "json",
            "expected one JSON object of Megatron arguments",
        )),
    }
}

fn read_toml(path: &str, text: &str) -> Result<Map<String, Value>, MegatronError> {
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
    // TOML's nan and inf have no JSON number: the conversion would make them absent keys
    // (which take the argument's default); refused where they stand instead
    if let Some((key, v)) = t.iter().find_map(|(k, v)| non_finite(k, v)) {
        let last = key.rsplit('.').next().unwrap_or(&key);
        let (line, col) = line_of(text, last, 1);
        return Err(MegatronError::at(
            &Loc::new(path, line, col),
            key.as_str(),
            format!("`{v}` is not a finite number"),
        ));
    }
    match serde_json::to_value(t) {
        Ok(Value::Object(m)) => Ok(m),
        _ => Err(MegatronError::at(
            &Loc::new(path, 1, 1),
            "toml",
            "expected a TOML table",
        )),
    }
}

/// The first float of `v` (under `key`, dotted into tables) that is NaN or infinite.
fn non_finite(key: &str, v: &toml::Value) -> Option<(String, f64)> {
    match v {
        toml::Value::Float(x) if !x.is_finite() => Some((key.to_string(), *x)),
        toml::Value::Table(t) => t
            .iter()
            .find_map(|(k, v)| non_finite(&format!("{key}.{k}"), v)),
        toml::Value::Array(a) => a.iter().find_map(|v| non_finite(key, v)),
        _ => None,
    }
}

/// Edit distance, to suggest the modelled key a misspelt one resembles.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

pub(crate) fn unknown_key_warning(loc: &Loc, key: &str) -> Warning {
    let near = super::fields::FIELDS
        .iter()
        .chain(super::fields::TYPED_EXTRA)
        .map(|f| (distance(key, f), *f))
        .filter(|(d, _)| *d <= 2)
        .min();
    let hint = near.map_or(String::new(), |(_, f)| format!(" — did you mean `{f}`?"));
    Warning::at(
        loc,
        key,
        format!("not an argument ina3d models: kept in extra, it does not change the job{hint}"),
    )
}

/// The `iterations` section of `parse --json` output.
fn read_iterations(
    path: &str,
    loc: &Loc,
    v: &Value,
) -> Result<Vec<IterationRecord>, MegatronError> {
    let its: Vec<IterationRecord> = serde_json::from_value(v.clone()).map_err(|e| {
        MegatronError::at(
            loc,
            "iterations",
            format!("expected a list of {{iteration, elapsed_ms, fields}} ({e}) in {path}"),
        )
    })?;
    for it in &its {
        super::scan::check_log_ms(&[it.elapsed_ms]).map_err(|m| {
            MegatronError::at(
                loc,
                "iterations",
                format!("iteration {}: elapsed_ms {m}", it.iteration),
            )
        })?;
    }
    Ok(its)
}

/// The `timers` section: `{name: {min, max}}`.
fn read_timers(loc: &Loc, v: &Value) -> Result<BTreeMap<String, TimerStat>, MegatronError> {
    let t: BTreeMap<String, TimerStat> = serde_json::from_value(v.clone()).map_err(|e| {
        MegatronError::at(
            loc,
            "timers",
            format!("expected {{name: {{min, max}}}} ({e})"),
        )
    })?;
    for (n, s) in &t {
        super::scan::check_log_ms(&[s.min, s.max])
            .map_err(|m| MegatronError::at(loc, "timers", format!("timer {n}: {m}")))?;
    }
    Ok(t)
}

/// One argument (top level or in `extra`), as an assignment, with a warning when ina3d
/// does not model it.
fn argument(
    out: &mut FileConfig,
    loc: Loc,
    k: &str,
    v: &Value,
    warn_unknown: bool,
) -> Result<(), MegatronError> {
    let Some(s) = python_str(v) else {
        return Err(MegatronError::at(
            &loc,
            k,
            "expected a plain value (number, boolean, string or list), found a table",
        ));
    };
    let ck = canonical_key(k);
    if warn_unknown && !is_modelled(&ck) {
        out.warnings.push(unknown_key_warning(&loc, k));
    }
    out.args.push(Assignment {
        key: k.to_string(),
        value: s,
        loc,
    });
    Ok(())
}

/// Reads a TOML (`json = false`) or JSON config file.
pub fn parse_config_file(path: &str, text: &str, json: bool) -> Result<FileConfig, MegatronError> {
    let map = if json {
        read_json(path, text)?
    } else {
        read_toml(path, text)?
    };
    let mut out = FileConfig::default();
    let mut extras = Vec::new();
    for (k, v) in &map {
        let (line, col) = line_of(text, k, 1);
        let loc = Loc::new(path, line, col);
        match k.as_str() {
            "preset" => match v {
                Value::String(s) => out.preset = Some((s.clone(), loc)),
                _ => {
                    return Err(MegatronError::at(
                        &loc,
                        "preset",
                        format!("expected a preset name, found `{v}`"),
                    ))
                }
            },
            "extra" => {
                let Value::Object(m) = v else {
                    return Err(MegatronError::at(
                        &loc,
                        "extra",
                        "expected a table of arguments",
                    ));
                };
                for (ek, ev) in m {
                    let (l, c) = line_of(text, ek, line);
                    extras.push((Loc::new(path, l, c), ek.clone(), ev.clone()));
                }
            }
            "iterations" => out.iterations = read_iterations(path, &loc, v)?,
            "timers" => out.timers = read_timers(&loc, v)?,
            k if COMPUTED.contains(&k) => {}
            _ => argument(&mut out, loc, k, v, true)?,
        }
    }
    // Arguments in file order for provenance; the `extra` section's first, so the
    // top-level (modelled) values win over their verbatim copies.
    out.args.sort_by_key(|a| a.loc.line);
    let top = std::mem::take(&mut out.args);
    for (loc, k, v) in extras {
        argument(&mut out, loc, &k, &v, false)?;
    }
    out.args.extend(top);
    imply_gqa(&mut out);
    Ok(out)
}

/// `num_query_groups` without `group_query_attention` in a file means GQA.
fn imply_gqa(out: &mut FileConfig) {
    let has = |key: &str| out.args.iter().any(|a| canonical_key(&a.key) == key);
    if has("group_query_attention") {
        return;
    }
    let groups = out
        .args
        .iter()
        .find(|a| canonical_key(&a.key) == "num_query_groups" && a.value != "None");
    if let Some(g) = groups {
        let a = Assignment {
            key: "group_query_attention".into(),
            value: "True".into(),
            loc: g.loc.clone(),
        };
        out.args.push(a);
    }
}
