//! Stage 1: read a Megatron-LM job (log, launch script, config file or preset) into a
//! [`TrainingConfig`].
//!
//! Every input kind reduces to Megatron `name = value` pairs with a [`Source`], applied
//! in a fixed order of trust — preset, config file, launch script, log (a log is what
//! Megatron actually ran with) — then the DeepSpeed config a job names is read, the
//! command-line overrides are applied, and only then are the derived fields computed
//! ([`TrainingConfig::finalize`]) and the sizes checked ([`TrainingConfig::validate`]):
//! an override can make a job valid that its files alone are not (a single-node example
//! script of a multi-node model). Iteration lines and timers are collected from every log.

pub mod cfgfile;
pub mod config;
pub mod deepspeed;
pub mod derive;
pub mod error;
pub mod fields;
pub mod pattern;
pub mod presets;
pub mod scan;
pub mod script;
pub mod source;
pub mod stages;
pub mod tokenizer;
pub mod validate;

pub use config::{
    CpCommType, Dtype, IterationRecord, MoeDispatcher, MoeLayerFreq, Normalization,
    PositionEmbedding, Recompute, Source, TimerStat, TrainingConfig,
};
pub use error::{Loc, MegatronError, Warning};
pub use presets::{preset, PRESETS};

use scan::{Assignment, LogScan};
use script::ScriptScan;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What an input turned out to be, in increasing order of trust.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum InputKind {
    /// A named model preset.
    Preset,
    /// A TOML config file.
    Toml,
    /// A JSON config file.
    Json,
    /// A bash launch script.
    Script,
    /// A Megatron log (arguments block and/or iteration lines and/or timers).
    Log,
}

enum Parsed {
    Preset(String),
    Config(cfgfile::FileConfig),
    Script(ScriptScan),
    Log(Box<LogScan>),
}

/// One input, read and classified.
struct Read {
    kind: InputKind,
    /// Path as given (or `preset:NAME`).
    label: String,
    parsed: Parsed,
}

fn looks_like_toml(text: &str) -> bool {
    let mut keys = 0;
    for l in text.lines() {
        let t = l.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        if t.starts_with('[') && t.ends_with(']') {
            continue;
        }
        match t.find('=') {
            Some(p) if !t[..p].trim().is_empty() && !t[..p].trim().contains(' ') => keys += 1,
            _ => return false,
        }
    }
    keys > 0
}

fn looks_like_script(text: &str) -> bool {
    text.starts_with("#!")
        || text.lines().any(|l| {
            let t = l.trim_start();
            !t.starts_with('#') && t.contains("pretrain_") && t.contains(".py")
        })
}

fn config(kind: InputKind, p: &str, text: &str) -> Result<(InputKind, Parsed), MegatronError> {
    let c = cfgfile::parse_config_file(p, text, kind == InputKind::Json)?;
    Ok((kind, Parsed::Config(c)))
}

fn script(
    p: &str,
    text: &str,
    env: &[(String, String)],
) -> Result<(InputKind, Parsed), MegatronError> {
    Ok((
        InputKind::Script,
        Parsed::Script(script::scan_script_with_env(p, text, env)?),
    ))
}

/// Reads and classifies one input file. Kind is decided by content (a `{` opens JSON;
/// an arguments block, iteration line or timer makes a log; a `pretrain_*.py` command or
/// a `#!` line a script; `key = value` lines TOML), the extension only breaking ties.
fn parse_file(path: &Path, env: &[(String, String)]) -> Result<(InputKind, Parsed), MegatronError> {
    let p = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| MegatronError::Io {
        path: p.clone(),
        source,
    })?;
    let text = String::from_utf8_lossy(&bytes);
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    if text.trim_start().starts_with('{') || ext == "json" {
        return config(InputKind::Json, &p, text);
    }
    if ext == "toml" {
        return config(InputKind::Toml, &p, text);
    }
    if matches!(ext.as_str(), "sh" | "bash") {
        return script(&p, text, env);
    }
    let log = scan::scan_log(&p, text)?;
    let found =
        log.args_header_line.is_some() || !log.iterations.is_empty() || !log.timers.is_empty();
    if !found && looks_like_script(text) {
        return script(&p, text, env);
    }
    if !found && looks_like_toml(text) {
        return config(InputKind::Toml, &p, text);
    }
    Ok((InputKind::Log, Parsed::Log(Box::new(log))))
}

/// An input named on the command line: an existing file, else a preset name (`gpt3-13b`,
/// or `preset:gpt3-13b`, which is never taken for a file).
fn read_input(input: &str, env: &[(String, String)]) -> Result<Read, MegatronError> {
    let path = Path::new(input);
    if !input.starts_with("preset:") && path.exists() {
        let (kind, parsed) = parse_file(path, env)?;
        return Ok(Read {
            kind,
            label: input.to_string(),
            parsed,
        });
    }
    let name = presets::preset_name(input);
    if presets::PRESETS.contains(&name.as_str()) {
        return Ok(Read {
            kind: InputKind::Preset,
            label: format!("preset:{name}"),
            parsed: Parsed::Preset(name),
        });
    }
    Err(MegatronError::Syntax {
        at: format!("{input}:0:0"),
        field: "input".into(),
        expected: format!(
            "an existing file or a preset name ({}), found neither",
            PRESETS.join(", ")
        ),
    })
}

fn apply_all(c: &mut TrainingConfig, args: &[Assignment]) -> Result<(), MegatronError> {
    for a in args {
        c.apply(
            &a.key,
            &a.value,
            Source::File {
                path: a.loc.path.clone(),
                line: a.loc.line,
            },
            &a.loc,
        )?;
    }
    Ok(())
}

/// Timer readings of every log, by name: (mins, maxes).
type TimerReadings = BTreeMap<String, (Vec<f64>, Vec<f64>)>;

/// A log's arguments block that names none of `--transformer-impl`, `--use-flash-attn`
/// and `--attention-backend` comes from Megatron before 2023, whose attention is its own
/// unfused softmax: recorded as the source [`TrainingConfig::LEGACY_ATTENTION`], which
/// the compute model reads (docs/compute.md#attention).
fn mark_legacy_attention(c: &mut TrainingConfig, path: &str, log: &LogScan) {
    let Some(line) = log.args_header_line else {
        return;
    };
    let names = ["transformer_impl", "use_flash_attn", "attention_backend"];
    if log.args.iter().any(|a| names.contains(&a.key.as_str())) {
        return;
    }
    c.sources.insert(
        TrainingConfig::LEGACY_ATTENTION.into(),
        Source::File {
            path: path.to_string(),
            line,
        },
    );
}

fn apply_log(
    c: &mut TrainingConfig,
    path: &str,
    log: &LogScan,
    timers: &mut TimerReadings,
) -> Result<(), MegatronError> {
    apply_all(c, &log.early)?;
    apply_all(c, &log.args)?;
    apply_all(c, &log.late)?;
    mark_legacy_attention(c, path, log);
    if !log.iterations.is_empty() {
        c.sources
            .entry("iterations".into())
            .or_insert(Source::File {
                path: path.to_string(),
                line: 0,
            });
    }
    for it in &log.iterations {
        if !c.iterations.contains(it) {
            c.iterations.push(it.clone());
        }
    }
    for t in &log.timers {
        let e = timers.entry(t.name.to_string()).or_default();
        e.0.push(t.min);
        e.1.push(t.max);
        c.sources.entry("timers".into()).or_insert(Source::File {
            path: path.to_string(),
            line: t.line,
        });
    }
    c.warnings.extend(log.warnings.iter().cloned());
    Ok(())
}

/// Applies every input, least trusted first (stable: input order within a kind). Returns
/// whether any input described the job's arguments (not only iterations or timers).
fn apply_inputs(c: &mut TrainingConfig, reads: &[Read]) -> Result<bool, MegatronError> {
    let mut order: Vec<&Read> = reads.iter().collect();
    order.sort_by_key(|r| r.kind);
    let mut has_args = false;
    let mut timers = TimerReadings::new();
    for r in order {
        match &r.parsed {
            Parsed::Preset(name) => {
                presets::apply_preset(c, name)?;
                has_args = true;
            }
            Parsed::Config(f) => {
                if let Some((name, loc)) = &f.preset {
                    if !presets::PRESETS.contains(&presets::preset_name(name).as_str()) {
                        return Err(MegatronError::at(
                            loc,
                            "preset",
                            format!("expected one of {}, found `{name}`", PRESETS.join(", ")),
                        ));
                    }
                    presets::apply_preset(c, name)?;
                }
                apply_all(c, &f.args)?;
                for it in &f.iterations {
                    if !c.iterations.contains(it) {
                        c.iterations.push(it.clone());
                    }
                }
                c.timers
                    .extend(f.timers.iter().map(|(k, v)| (k.clone(), *v)));
                c.warnings.extend(f.warnings.iter().cloned());
                has_args = true;
            }
            Parsed::Script(s) => {
                apply_all(c, &s.args)?;
                c.warnings.extend(s.warnings.iter().cloned());
                has_args = true;
            }
            Parsed::Log(log) => {
                apply_log(c, &r.label, log, &mut timers)?;
                has_args |= log.args_header_line.is_some();
            }
        }
    }
    for (name, (lo, hi)) in timers {
        c.timers.insert(
            name,
            TimerStat {
                min: median(lo).unwrap_or(0.0),
                max: median(hi).unwrap_or(0.0),
            },
        );
    }
    Ok(has_args)
}

/// Reads several inputs describing one job into one configuration, applies `overrides`
/// (Megatron names, snake- or kebab-case, in order) and validates the result.
///
/// Inputs are paths or preset names, mixed freely: Megatron logs (e.g. the start-up log
/// with the arguments block and a separate log of iteration lines), a launch script,
/// TOML/JSON config files, a preset (`ina3d parse gpt3-13b iterations.log` reads the
/// iteration times into the preset's job). Their kind is detected from content. Values
/// are applied by kind, least trusted first — presets, config files (their `preset`
/// before their keys), scripts, logs — so a log's arguments block wins; within a kind,
/// later inputs win; overrides win over everything. Iterations (exact duplicates
/// dropped) and timers are collected from every log; a timer read several times is
/// reported as the median of its readings' min and of their max (the median, not the
/// mean, so the warm-up interval does not skew compute calibration).
pub fn load_with_overrides(
    inputs: &[String],
    overrides: &[(String, String)],
) -> Result<TrainingConfig, MegatronError> {
    load_with_env(inputs, &[], overrides)
}

/// [`load_with_overrides`], with launch-script variables set before the scripts run
/// (`--env NAME=VALUE`; a name of digits is a positional parameter): a script's own
/// assignments still win, as they would over the environment.
pub fn load_with_env(
    inputs: &[String],
    env: &[(String, String)],
    overrides: &[(String, String)],
) -> Result<TrainingConfig, MegatronError> {
    if inputs.is_empty() {
        return Err(MegatronError::Missing {
            at: "inputs".into(),
            field: "arguments".into(),
            hint: "no input given".into(),
        });
    }
    let mut reads = inputs
        .iter()
        .map(|i| read_input(i, env))
        .collect::<Result<Vec<_>, _>>()?;
    let mut c = TrainingConfig::megatron_defaults();
    if !apply_inputs(&mut c, &reads)? {
        let first_log = reads
            .iter()
            .find(|r| r.kind == InputKind::Log)
            .map_or(inputs[0].as_str(), |r| r.label.as_str());
        return Err(MegatronError::Syntax {
            at: format!("{first_log}:1:1"),
            field: "arguments".into(),
            expected: "a `---- arguments ----` block (Megatron prints it at start-up on rank 0); \
                       none found in the inputs — add the start-up log, the launch script, a config file or a preset"
                .into(),
        });
    }
    deepspeed::resolve_zero_stage(&mut c, &script_files(&reads))?;
    for (k, v) in overrides {
        c.override_arg(k, v)?;
    }
    check_unresolved(&mut c, &mut reads)?;
    c.finalize().map_err(|e| match e {
        MegatronError::Missing { field, hint, .. } => MegatronError::Missing {
            at: inputs.join(", "),
            field,
            hint,
        },
        e => e,
    })?;
    c.validate()?;
    Ok(c)
}

/// A launch-script flag that matters but had no value the script alone gives is an
/// error — unless another input (a log's arguments block, a config file) or an override
/// sets that argument.
fn check_unresolved(c: &mut TrainingConfig, reads: &mut [Read]) -> Result<(), MegatronError> {
    for r in reads {
        let Parsed::Script(s) = &mut r.parsed else {
            continue;
        };
        for (key, err) in s.unresolved.drain(..) {
            let elsewhere = match c.sources.get(&key) {
                Some(Source::Override) => true,
                Some(Source::File { path, .. }) => *path != r.label,
                _ => false,
            };
            if elsewhere {
                continue;
            }
            if fields::TOKENIZER_ARGS.contains(&key.as_str()) {
                if c.warnings.iter().any(|w| w.field == key && w.at == r.label) {
                    continue;
                }
                // The vocabulary derivation warns again if it then has no size to use.
                c.warnings.push(Warning {
                    at: r.label.clone(),
                    field: key.clone(),
                    message: format!("not decided by the script ({err}); the vocabulary comes from --vocab-size or the other tokenizer arguments"),
                });
                continue;
            }
            return Err(err);
        }
    }
    Ok(())
}

/// Files the launch scripts wrote with here-documents (`cat <<EOF > ds_config.json`).
fn script_files(reads: &[Read]) -> BTreeMap<String, script::WrittenFile> {
    let mut out = BTreeMap::new();
    for r in reads {
        if let Parsed::Script(s) = &r.parsed {
            for (k, v) in &s.files {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    out
}

/// Reads several input files describing one job into one configuration, validated (no
/// overrides; see [`load_with_overrides`]).
pub fn load(inputs: &[PathBuf]) -> Result<TrainingConfig, MegatronError> {
    for p in inputs {
        // A path that does not exist is an I/O error here, never a preset name.
        if !p.exists() {
            let source = std::io::Error::from(std::io::ErrorKind::NotFound);
            return Err(MegatronError::Io {
                path: p.display().to_string(),
                source,
            });
        }
    }
    let names: Vec<String> = inputs.iter().map(|p| p.display().to_string()).collect();
    load_with_overrides(&names, &[])
}

pub(crate) fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// One input: a path, or a preset name (`gpt3-13b` or `preset:gpt3-13b`).
pub fn load_input(input: &str) -> Result<TrainingConfig, MegatronError> {
    load_with_overrides(&[input.to_string()], &[])
}
