//! Stage 1: read a Megatron-LM job (log, launch script, config file or preset) into a
//! [`TrainingConfig`].
//!
//! Every input kind reduces to Megatron `name = value` pairs with a [`Source`], applied
//! in a fixed order of trust — preset, config file, launch script, log (a log is what
//! Megatron actually ran with) — then the derived fields are computed
//! ([`TrainingConfig::finalize`]) and the sizes checked ([`TrainingConfig::validate`]).
//! Iteration lines and timers are collected from every log given.

pub mod cfgfile;
pub mod config;
pub mod error;
pub mod fields;
pub mod presets;
pub mod scan;
pub mod script;

pub use config::{Dtype, IterationRecord, Recompute, Source, TimerStat, TrainingConfig};
pub use error::{Loc, MegatronError};
pub use presets::{preset, PRESETS};

use scan::{Assignment, LogScan};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What an input file turned out to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum InputKind {
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
    Config {
        preset: Option<(String, Loc)>,
        args: Vec<Assignment>,
    },
    Script(Vec<Assignment>),
    Log(Box<LogScan>),
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

/// Reads and classifies one input file. Kind is decided by content (a `{` opens JSON;
/// an arguments block, iteration line or timer makes a log; a `pretrain_*.py` command or
/// a `#!` line a script; `key = value` lines TOML), the extension only breaking ties.
fn parse_file(path: &Path) -> Result<(InputKind, Parsed), MegatronError> {
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
        let c = cfgfile::parse_config_file(&p, text, true)?;
        return Ok((
            InputKind::Json,
            Parsed::Config {
                preset: c.preset,
                args: c.args,
            },
        ));
    }
    if ext == "toml" {
        let c = cfgfile::parse_config_file(&p, text, false)?;
        return Ok((
            InputKind::Toml,
            Parsed::Config {
                preset: c.preset,
                args: c.args,
            },
        ));
    }
    if matches!(ext.as_str(), "sh" | "bash") {
        return Ok((
            InputKind::Script,
            Parsed::Script(script::scan_script(&p, text)?),
        ));
    }
    let log = scan::scan_log(&p, text)?;
    let found =
        log.args_header_line.is_some() || !log.iterations.is_empty() || !log.timers.is_empty();
    if !found && looks_like_script(text) {
        return Ok((
            InputKind::Script,
            Parsed::Script(script::scan_script(&p, text)?),
        ));
    }
    if !found && looks_like_toml(text) {
        let c = cfgfile::parse_config_file(&p, text, false)?;
        return Ok((
            InputKind::Toml,
            Parsed::Config {
                preset: c.preset,
                args: c.args,
            },
        ));
    }
    Ok((InputKind::Log, Parsed::Log(Box::new(log))))
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

/// Reads several inputs describing one job into one configuration, validated.
///
/// Inputs may be any mix of Megatron logs (e.g. the start-up log with the arguments
/// block and a separate log of iteration lines), a launch script, and TOML/JSON config
/// files; their kind is detected from content. Values are applied by kind, least
/// trusted first — config files (their `preset` before their keys), then scripts, then
/// logs — so a log's arguments block wins; within a kind, later files win. Iterations
/// (exact duplicates dropped) and timers are collected from every log; a timer read
/// several times is reported as the median of its readings' min and of their max (the
/// median, not the mean, so the warm-up interval does not skew compute calibration).
pub fn load(inputs: &[PathBuf]) -> Result<TrainingConfig, MegatronError> {
    if inputs.is_empty() {
        return Err(MegatronError::Missing {
            at: "inputs".into(),
            field: "arguments".into(),
            hint: "no input given".into(),
        });
    }
    let mut parsed = Vec::new();
    for p in inputs {
        parsed.push(parse_file(p)?);
    }
    // Stable sort: by kind, then input order.
    let mut order: Vec<usize> = (0..parsed.len()).collect();
    order.sort_by_key(|&i| parsed[i].0);
    let mut c = TrainingConfig::megatron_defaults();
    let mut has_args = false;
    let mut timers: BTreeMap<String, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    let mut first_log: Option<String> = None;
    for &i in &order {
        let path = inputs[i].display().to_string();
        match &parsed[i].1 {
            Parsed::Config { preset, args } => {
                if let Some((name, loc)) = preset {
                    if !presets::apply_preset(&mut c, name) {
                        return Err(MegatronError::at(
                            loc,
                            "preset",
                            format!("expected one of {}, found `{name}`", PRESETS.join(", ")),
                        ));
                    }
                }
                apply_all(&mut c, args)?;
                has_args = true;
            }
            Parsed::Script(args) => {
                apply_all(&mut c, args)?;
                has_args = true;
            }
            Parsed::Log(log) => {
                first_log.get_or_insert(path.clone());
                apply_all(&mut c, &log.early)?;
                apply_all(&mut c, &log.args)?;
                apply_all(&mut c, &log.late)?;
                has_args |= log.args_header_line.is_some();
                if !log.iterations.is_empty() {
                    c.sources
                        .entry("iterations".into())
                        .or_insert(Source::File {
                            path: path.clone(),
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
                        path: path.clone(),
                        line: t.line,
                    });
                }
            }
        }
    }
    if !has_args {
        return Err(MegatronError::Syntax {
            at: format!("{}:1:1", first_log.unwrap_or_else(|| inputs[0].display().to_string())),
            field: "arguments".into(),
            expected: "a `---- arguments ----` block (Megatron prints it at start-up on rank 0); \
                       none found in the inputs — add the start-up log, the launch script or a config file"
                .into(),
        });
    }
    for (name, (lo, hi)) in timers {
        c.timers.insert(
            name,
            TimerStat {
                min: median(lo),
                max: median(hi),
            },
        );
    }
    c.finalize().map_err(|e| match e {
        MegatronError::Missing { field, hint, .. } => MegatronError::Missing {
            at: inputs
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            field,
            hint,
        },
        e => e,
    })?;
    c.validate()?;
    Ok(c)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// One input: a path, or a preset name (`gpt3-13b` or `preset:gpt3-13b`).
pub fn load_input(input: &str) -> Result<TrainingConfig, MegatronError> {
    let path = Path::new(input);
    if !input.starts_with("preset:") && path.exists() {
        return load(&[path.to_path_buf()]);
    }
    preset(input).ok_or_else(|| MegatronError::Syntax {
        at: format!("{input}:0:0"),
        field: "input".into(),
        expected: format!(
            "an existing file or a preset name ({}), found neither",
            PRESETS.join(", ")
        ),
    })
}
