//! The ZeRO stage of a Megatron-DeepSpeed job, from the DeepSpeed config it names.
//!
//! Megatron-DeepSpeed passes `--deepspeed --deepspeed_config ds_config.json`; DeepSpeed
//! reads the stage from that JSON (`"zero_optimization": {"stage": N}`), while Megatron's
//! own `--zero-stage` argument (default 1) is only what the launch script meant to write
//! there. So the JSON decides when it can be read — a file written by the launch script
//! itself (`cat <<EOF > $config_json`), else the file on disk next to the input that names
//! it — and the argument is a fallback, said in a warning, when it cannot.

use super::config::{Source, TrainingConfig};
use super::error::{Loc, MegatronError, Warning};
use super::script::WrittenFile;
use std::collections::BTreeMap;
use std::path::Path;

/// `zero_optimization.stage` of a DeepSpeed config, with the line it is on; `Ok(None)`
/// when the config has no ZeRO section (stage 0).
pub fn zero_stage_of(
    path: &str,
    text: &str,
    first_line: usize,
) -> Result<Option<(u32, usize)>, MegatronError> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        MegatronError::at(
            &Loc::new(path, first_line + e.line().saturating_sub(1), e.column()),
            "deepspeed_config",
            format!("expected a DeepSpeed JSON config ({e})"),
        )
    })?;
    let Some(stage) = v.get("zero_optimization").and_then(|z| z.get("stage")) else {
        return Ok(None);
    };
    let line = text
        .lines()
        .position(|l| l.contains("\"stage\""))
        .map_or(first_line, |i| first_line + i);
    let n = stage
        .as_u64()
        .or_else(|| stage.as_str().and_then(|s| s.trim().parse().ok()))
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| {
            MegatronError::at(
                &Loc::new(path, line, 1),
                "zero_optimization.stage",
                format!("expected a ZeRO stage 0–3, found `{stage}`"),
            )
        })?;
    Ok(Some((n, line)))
}

fn is_true(c: &TrainingConfig, key: &str) -> bool {
    c.extra
        .get(key)
        .is_some_and(|v| matches!(v.trim(), "True" | "true" | "1"))
}

/// Where the input that named the config lives, for a relative path.
fn base_dir(c: &TrainingConfig) -> Option<&Path> {
    match c.sources.get("deepspeed_config")? {
        Source::File { path, .. } => Path::new(path).parent(),
        _ => None,
    }
}

fn place(c: &TrainingConfig, field: &str) -> String {
    c.sources
        .get(field)
        .map(super::error::source_place)
        .unwrap_or_else(|| "inputs".into())
}

/// Largest DeepSpeed config read (real ones are a few kB).
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// A regular file of at most [`MAX_CONFIG_BYTES`]: an input naming `/dev/zero` or a FIFO
/// as its DeepSpeed config cannot make the reader block or allocate without bound.
fn read_bounded(p: &Path) -> Option<String> {
    let m = std::fs::metadata(p).ok()?;
    if !m.is_file() || m.len() > MAX_CONFIG_BYTES {
        return None;
    }
    use std::io::Read;
    let mut t = String::new();
    std::fs::File::open(p)
        .ok()?
        .take(MAX_CONFIG_BYTES)
        .read_to_string(&mut t)
        .ok()?;
    Some(t)
}

/// What the fallback is when the config cannot be read.
fn assumed(c: &TrainingConfig) -> String {
    match c.zero_stage {
        Some(s) => format!(
            "ZeRO stage {s} taken from the zero_stage argument ({})",
            place(c, "zero_stage")
        ),
        None => "no ZeRO stage assumed (pass --set zero_stage=N)".into(),
    }
}

/// The config's text: written by a launch script, else read from disk next to the input
/// that names it, else as given. `Err` holds the warning saying why it cannot be had.
fn config_text(
    c: &TrainingConfig,
    written: &BTreeMap<String, WrittenFile>,
    name: &str,
) -> Result<(String, String, usize), Warning> {
    if let Some(w) = written.get(name) {
        return match &w.text {
            Ok(t) => Ok((w.path.clone(), t.clone(), w.line)),
            Err(why) => Err(Warning {
                at: format!("{}:{}:1", w.path, w.line),
                field: "deepspeed_config".into(),
                message: format!(
                    "the script writes `{name}` with content the reader cannot know ({why}): {}",
                    assumed(c)
                ),
            }),
        };
    }
    let candidates = [
        base_dir(c).map(|d| d.join(name)),
        Some(Path::new(name).to_path_buf()),
    ];
    candidates
        .into_iter()
        .flatten()
        .find_map(|p| read_bounded(&p).map(|t| (p.display().to_string(), t, 1)))
        .ok_or_else(|| Warning {
            at: place(c, "deepspeed_config"),
            field: "deepspeed_config".into(),
            message: format!(
                "`{name}` could not be read (written by no script, and not a regular file of at most 1 MiB next to the input or as given): {}",
                assumed(c)
            ),
        })
}

/// Reads the DeepSpeed config a job names and sets `zero_stage` from it (a file the
/// launch script wrote first, then the file on disk relative to the naming input, then
/// as given). When it cannot be read, the `zero_stage` argument stands and a warning says
/// so. Nothing happens for a job that does not run DeepSpeed.
pub(crate) fn resolve_zero_stage(
    c: &mut TrainingConfig,
    written: &BTreeMap<String, WrittenFile>,
) -> Result<(), MegatronError> {
    let Some(name) = c
        .extra
        .get("deepspeed_config")
        .map(|s| s.trim().to_string())
    else {
        return Ok(());
    };
    if !is_true(c, "deepspeed") {
        c.warnings.push(Warning {
            at: place(c, "deepspeed_config"),
            field: "deepspeed_config".into(),
            message: "a DeepSpeed config is named but --deepspeed is not set: DeepSpeed (and its ZeRO stage) is off".into(),
        });
        return Ok(());
    }
    let (path, text, first) = match config_text(c, written, &name) {
        Ok(found) => found,
        Err(w) => {
            c.warnings.push(w);
            return Ok(());
        }
    };
    let (stage, line) = zero_stage_of(&path, &text, first)?.map_or((0, first), |x| x);
    if let Some(arg) = c.zero_stage.filter(|a| *a != stage) {
        c.warnings.push(Warning {
            at: format!("{path}:{line}:1"),
            field: "zero_stage".into(),
            message: format!(
                "the DeepSpeed config says stage {stage}, the zero_stage argument ({}) {arg}: DeepSpeed uses the config's",
                place(c, "zero_stage")
            ),
        });
    }
    c.zero_stage = Some(stage);
    c.sources
        .insert("zero_stage".into(), Source::File { path, line });
    Ok(())
}
