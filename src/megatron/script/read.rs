//! The reader's entry: a launch script evaluated (`exec`, `expand`), its `#SBATCH` lines and
//! `srun` read (`slurm`), and the flags of the launch it reaches gathered into a
//! [`ScriptScan`] (module docs of `script`).

use super::expand::{Blocker, Elem, Launch, Shell, WrittenFile, MARK};
use super::{ast, expand, lex, slurm};
use crate::megatron::error::{Loc, MegatronError, Warning};
use crate::megatron::fields::{canonical_key, is_modelled};
use crate::megatron::scan::Assignment;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

/// What a launch script tells about the job.
#[derive(Debug, Default)]
pub struct ScriptScan {
    /// The launch's Megatron flags (and the launcher's GPU count as `world_size`).
    pub args: Vec<Assignment>,
    /// Files the script writes, by the path it writes them to.
    pub files: BTreeMap<String, WrittenFile>,
    /// What the reader could not decide.
    pub warnings: Vec<Warning>,
    /// Flags that matter whose value the script alone does not give, by argument name:
    /// each is an error unless another input or an override sets the argument.
    pub unresolved: Vec<(String, MegatronError)>,
}

/// Megatron flags that take several values (argparse `nargs='+'`) the model reads.
const NARGS_PLUS: &[&str] = &["hierarchical_context_parallel_sizes"];

/// Evaluation steps allowed: far beyond any real launch script, a bound for crafted ones.
const BUDGET: u64 = 300_000;

/// Flags whose value the configuration needs: an unresolved value for these is an error.
fn needed(key: &str) -> bool {
    is_modelled(key) && key != "deepspeed_config"
}

fn blocker_error(loc: &Loc, field: &str, b: &Blocker) -> MegatronError {
    match b {
        Blocker::Unset(var) => MegatronError::Unresolved {
            at: loc.to_string(),
            field: field.to_string(),
            var: var.clone(),
        },
        Blocker::Why(w) => MegatronError::Undecidable {
            at: loc.to_string(),
            field: field.to_string(),
            why: w.to_string(),
        },
    }
}

/// Reads the Megatron flags (and the launcher's GPU count) of the first `pretrain_*.py`
/// command a bash script runs.
pub fn scan_script(path: &str, text: &str) -> Result<ScriptScan, MegatronError> {
    scan_script_with_env(path, text, &[])
}

/// [`scan_script`] with variables set before the script runs, as the environment (or the
/// command line, for the positional parameters `1`, `2`, …) would set them: the script's
/// own assignments still win, `${NAME:-default}` takes the value given.
pub fn scan_script_with_env(
    path: &str,
    text: &str,
    env: &[(String, String)],
) -> Result<ScriptScan, MegatronError> {
    // A marker byte in the input would forge an unknown value: it is replaced first.
    let text = text.replace(MARK, "\u{FFFD}");
    let nodes = ast::parse(lex::tokens(&text)).map_err(|(l, c, m)| MegatronError::Syntax {
        at: format!("{path}:{l}:{c}"),
        field: "script".into(),
        expected: m,
    })?;
    let mut sh = Shell {
        path: path.to_string(),
        vars: BTreeMap::new(),
        funcs: BTreeMap::new(),
        positional: None,
        launch: None,
        files: BTreeMap::new(),
        warnings: Vec::new(),
        budget: Rc::new(Cell::new(BUDGET)),
        marks: Rc::new(RefCell::new(vec![(
            Blocker::why("too many unknown values in the script"),
            "?".into(),
        )])),
        depth: 0,
        calls: 0,
    };
    // Slurm's environment from the #SBATCH lines first, so --env wins over it.
    let sb = slurm::sbatch(&text);
    for (k, v) in sb.env() {
        sh.set_var(k, expand::Val::Scalar(v), 0);
    }
    set_env(&mut sh, env)?;
    sh.run(&nodes)?;
    let Some(launch) = sh.launch.take() else {
        return Err(MegatronError::at(
            &Loc::new(path, 1, 1),
            "pretrain_*.py",
            "a launch script running pretrain_gpt.py (or another pretrain_*.py); none found",
        ));
    };
    let mut out = ScriptScan {
        files: std::mem::take(&mut sh.files),
        warnings: std::mem::take(&mut sh.warnings),
        ..ScriptScan::default()
    };
    if let Some(why) = &launch.cond {
        out.warnings.push(Warning::at(
            &Loc::new(path, launch.line, launch.col),
            "pretrain_*.py",
            format!("this launch runs only on one side of a branch: {why}; read as if it runs"),
        ));
    }
    let mut reader = FlagReader {
        path,
        needed: &|k: &str| matches!(k, "nproc_per_node" | "nnodes" | "num_gpus" | "num_nodes"),
        out: Vec::new(),
        dropped: Vec::new(),
        unknown: Vec::new(),
        unresolved: Vec::new(),
        pending: Vec::new(),
    };
    let launcher = marked_as_unknown(&sh, &launch.launcher);
    let args = marked_as_unknown(&sh, &launch.args);
    reader.read(&launcher)?;
    let gpus_unknown = !reader.unresolved.is_empty();
    for (_, e) in reader.unresolved.drain(..) {
        out.warnings.push(Warning {
            at: format!("{path}:{}:{}", launch.line, launch.col),
            field: "world_size".into(),
            message: format!(
                "the launcher's GPU count is unknown ({e}): pass --set world_size=N or --dp N"
            ),
        });
    }
    let lflags = std::mem::take(&mut reader.out);
    if !gpus_unknown {
        match world_size(&lflags)? {
            Some(w) => out.args.push(w),
            // `srun python pretrain_gpt.py …`: one rank per Slurm task.
            None => out
                .args
                .extend(
                    slurm::srun_world(&launcher, &sb, path).map(|(w, loc)| Assignment {
                        key: "world_size".into(),
                        value: w.to_string(),
                        loc,
                    }),
                ),
        }
    }
    reader.needed = &needed;
    reader.read(&args)?;
    out.args.append(&mut reader.out);
    reader.warnings(&launch, &mut out.warnings);
    out.unresolved = reader.unresolved;
    Ok(out)
}

/// Variables given before the script runs; names of digits are positional parameters
/// (`3=MOCK` makes `$3` MOCK and `$1`, `$2` empty).
fn set_env(sh: &mut Shell, env: &[(String, String)]) -> Result<(), MegatronError> {
    let mut positional: Vec<String> = Vec::new();
    for (name, value) in env {
        let bad = |what: &str| {
            MegatronError::at(
                &Loc::new("--env", 0, 0),
                name,
                format!("expected NAME=VALUE with {what}, found `{name}`"),
            )
        };
        if !name.is_empty() && name.bytes().all(|c| c.is_ascii_digit()) {
            let i: usize = name.parse().map_err(|_| bad("a small positional index"))?;
            if i == 0 || i > 64 {
                return Err(bad("a positional index from 1 to 64"));
            }
            if positional.len() < i {
                positional.resize(i, String::new());
            }
            positional[i - 1] = value.clone();
        } else if name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            sh.set_var(
                name,
                expand::Val::Scalar(value.replace(MARK, "\u{FFFD}")),
                0,
            );
        } else {
            return Err(bad("a shell variable name"));
        }
    }
    if !positional.is_empty() {
        sh.positional = Some(positional);
    }
    Ok(())
}

/// Launch arguments with a marked (partly unknown) text become unknown elements, shown
/// as the script wrote them.
fn marked_as_unknown(sh: &Shell, elems: &[Elem]) -> Vec<Elem> {
    elems
        .iter()
        .map(|e| match &e.text {
            Ok(t) if t.contains(MARK) => Elem {
                text: Err(sh
                    .blocker_in(t)
                    .unwrap_or_else(|| Blocker::why("an unknown value"))),
                raw: e
                    .raw
                    .clone()
                    .or_else(|| Some(Rc::from(sh.shown(t).as_str()))),
                shown: Some(Rc::from(sh.shown(t).as_str())),
                ..e.clone()
            },
            _ => e.clone(),
        })
        .collect()
}

/// World size from the launcher: torchrun / `torch.distributed.launch` `--nproc_per_node`
/// × `--nnodes` (the maximum of an elastic `1:4`); deepspeed `--num_gpus` × `--num_nodes`.
fn world_size(lflags: &[Assignment]) -> Result<Option<Assignment>, MegatronError> {
    let get = |k: &str| lflags.iter().find(|a| canonical_key(&a.key) == k);
    let Some(p) = get("nproc_per_node").or_else(|| get("num_gpus")) else {
        return Ok(None);
    };
    let nodes = get("nnodes").or_else(|| get("num_nodes"));
    let n_nodes = match nodes {
        Some(n) => n
            .value
            .rsplit(':')
            .next()
            .and_then(|v| v.trim().parse::<u64>().ok()),
        None => Some(1),
    };
    let (Ok(per), Some(n)) = (p.value.trim().parse::<u64>(), n_nodes) else {
        return Ok(None);
    };
    let w = per.checked_mul(n).ok_or_else(|| {
        MegatronError::at(
            &p.loc,
            "world_size",
            format!("GPUs per node {per} × nodes {n} does not fit in 64 bits: expected a realistic GPU count"),
        )
    })?;
    Ok(Some(Assignment {
        key: "world_size".into(),
        value: w.to_string(),
        loc: p.loc.clone(),
    }))
}

/// A word as written, without its outer quotes (`"--flag $X"` → `--flag $X`).
fn unquoted(raw: &str) -> &str {
    raw.trim_start_matches(['"', '\''])
}

/// Reads `--flag value`, `--flag=value` and bare `--flag` pairs from expanded arguments.
struct FlagReader<'a> {
    path: &'a str,
    needed: &'a dyn Fn(&str) -> bool,
    out: Vec<Assignment>,
    /// Flags present on one side of an undecided condition only, which do not matter.
    dropped: Vec<(String, Rc<str>)>,
    /// Words that could not be expanded and may add flags (`"$@"`).
    unknown: Vec<(String, Loc, String)>,
    /// Flags that matter without a value: (argument, the error).
    unresolved: Vec<(String, MegatronError)>,
    /// Flags that matter present on one side of an undecided condition, decided once the
    /// whole command line is read ([`FlagReader::decide_branches`]).
    pending: Vec<Pending>,
}

/// A flag that matters, present on one side of an undecided condition.
struct Pending {
    /// The argument (`foo` for `--no-foo`).
    arg: String,
    /// The flag as written.
    key: String,
    value: Elem,
    why: Rc<str>,
    side: bool,
}

impl FlagReader<'_> {
    fn is_flag(e: &Elem) -> bool {
        e.text.as_ref().is_ok_and(|t| t.starts_with("--"))
            || e.raw
                .as_deref()
                .is_some_and(|r| unquoted(r).starts_with("--"))
    }

    fn read(&mut self, args: &[Elem]) -> Result<(), MegatronError> {
        let mut i = 0;
        while i < args.len() {
            let a = &args[i];
            i += 1;
            let loc = Loc::new(self.path, a.line, a.col);
            let text = match &a.text {
                Ok(t) => t.clone(),
                Err(b) => {
                    self.unexpandable(a, &loc, b)?;
                    continue;
                }
            };
            let Some(flag) = text.strip_prefix("--").filter(|f| !f.is_empty()) else {
                continue;
            };
            let (key, value) = if let Some(p) = flag.find('=') {
                (
                    flag[..p].to_string(),
                    Elem {
                        text: Ok(flag[p + 1..].to_string()),
                        ..a.clone()
                    },
                )
            } else if i < args.len() && !Self::is_flag(&args[i]) {
                i += 1;
                let mut value = args[i - 1].clone();
                // argparse `nargs='+'`: every word up to the next flag.
                if NARGS_PLUS.contains(&canonical_key(flag).as_str()) {
                    while i < args.len() && !Self::is_flag(&args[i]) {
                        if let (Ok(t), Ok(more)) = (&mut value.text, &args[i].text) {
                            t.push(' ');
                            t.push_str(more);
                        }
                        i += 1;
                    }
                }
                (flag.to_string(), value)
            } else {
                (
                    flag.to_string(),
                    Elem {
                        text: Ok("True".into()),
                        ..a.clone()
                    },
                )
            };
            self.flag(&key, value, a.cond.clone().map(|c| (c, a.side)))?;
        }
        self.decide_branches()
    }

    /// A flag that matters given in both branches of an undecided condition with the
    /// same value is decided: whichever way the condition goes, it has that value. Any
    /// other is unresolved (an error unless another input sets the argument).
    fn decide_branches(&mut self) -> Result<(), MegatronError> {
        let pending = std::mem::take(&mut self.pending);
        let mut groups: BTreeMap<(String, Rc<str>), Vec<&Pending>> = BTreeMap::new();
        for p in &pending {
            groups
                .entry((p.arg.clone(), p.why.clone()))
                .or_default()
                .push(p);
        }
        for ((arg, why), ps) in groups {
            let texts: Vec<Option<&String>> =
                ps.iter().map(|p| p.value.text.as_ref().ok()).collect();
            let both_sides = ps.iter().any(|p| p.side) && ps.iter().any(|p| !p.side);
            let one_value = texts.iter().all(|t| t.is_some() && *t == texts[0]);
            // One occurrence per side: a flag given twice on one side is not the same job.
            let once_each = ps.iter().filter(|p| p.side).count() == 1
                && ps.iter().filter(|p| !p.side).count() == 1;
            let first = ps[0];
            if both_sides && one_value && once_each {
                let value = Elem {
                    cond: None,
                    ..first.value.clone()
                };
                self.flag(&first.key, value, None)?;
            } else {
                let vloc = Loc::new(self.path, first.value.line, first.value.col);
                let e = MegatronError::Undecidable {
                    at: vloc.to_string(),
                    field: format!("--{}", first.key),
                    why: if both_sides {
                        format!("{why}, and its branches give it different values")
                    } else {
                        why.to_string()
                    },
                };
                self.unresolved.push((arg, e));
            }
        }
        Ok(())
    }

    /// A word that could not be expanded at all.
    fn unexpandable(&mut self, a: &Elem, loc: &Loc, b: &Blocker) -> Result<(), MegatronError> {
        let raw = unquoted(a.raw.as_deref().unwrap_or(""));
        if let Some(flag) = raw.strip_prefix("--") {
            let shown = unquoted(a.shown.as_deref().unwrap_or(raw));
            let flag =
                if canonical_key(flag.split('=').next().unwrap_or(flag)) == "deepspeed_config" {
                    shown.strip_prefix("--").unwrap_or(flag)
                } else {
                    flag
                };
            // `"--data-path $X"`: the name ends at `=` or at the first blank.
            let flag = flag.trim_end_matches(['"', '\'']);
            let (name, value) = match flag.split_once(char::is_whitespace) {
                Some((n, v)) if !n.contains('=') => (n, v.trim()),
                _ => flag.split_once('=').unwrap_or((flag, "True")),
            };
            let ck = canonical_key(name);
            if (self.needed)(&ck) {
                self.unresolved
                    .push((ck, blocker_error(loc, &format!("--{name}"), b)));
            } else {
                // Kept as written (`--save=$(pwd)/ckpt`): it does not change the job.
                self.out.push(Assignment {
                    key: name.to_string(),
                    value: value.to_string(),
                    loc: loc.clone(),
                });
            }
            return Ok(());
        }
        // A text that may be one of several (`` `--bf16` or `` ``): a flag that matters
        // among them is undecided.
        let shown = a.shown.as_deref().unwrap_or(raw);
        for w in shown.split(|c: char| c.is_whitespace() || c == '`') {
            let Some(name) = w.strip_prefix("--") else {
                continue;
            };
            let ck = canonical_key(name.split('=').next().unwrap_or(name));
            if (self.needed)(&ck) && !self.unresolved.iter().any(|(k, _)| *k == ck) {
                let e = MegatronError::Undecidable {
                    at: loc.to_string(),
                    field: format!("--{name}"),
                    why: b.describe(),
                };
                self.unresolved.push((ck, e));
            }
        }
        let u = (raw.to_string(), loc.clone(), b.describe());
        if !self.unknown.contains(&u) {
            self.unknown.push(u);
        }
        Ok(())
    }

    fn flag(
        &mut self,
        key: &str,
        value: Elem,
        cond: Option<(Rc<str>, bool)>,
    ) -> Result<(), MegatronError> {
        let ck = canonical_key(key);
        let vloc = Loc::new(self.path, value.line, value.col);
        let needed = (self.needed)(&ck) || ck.strip_prefix("no_").is_some_and(|b| (self.needed)(b));
        let arg = ck
            .strip_prefix("no_")
            .filter(|b| (self.needed)(b))
            .unwrap_or(&ck)
            .to_string();
        if let Some((why, side)) = cond.or_else(|| value.cond.clone().map(|c| (c, value.side))) {
            if needed {
                self.pending.push(Pending {
                    arg,
                    key: key.to_string(),
                    value,
                    why,
                    side,
                });
            } else {
                let d = (format!("--{key}"), why);
                if !self.dropped.contains(&d) {
                    self.dropped.push(d);
                }
            }
            return Ok(());
        }
        let value = match value.text {
            Ok(v) => v,
            Err(b) if needed => {
                self.unresolved
                    .push((arg, blocker_error(&vloc, &format!("--{key}"), &b)));
                return Ok(());
            }
            // The DeepSpeed config's path as shown, to match a file the script writes.
            Err(_) if ck == "deepspeed_config" => value
                .shown
                .as_deref()
                .or(value.raw.as_deref())
                .unwrap_or("")
                .to_string(),
            Err(_) => value.raw.as_deref().unwrap_or("").to_string(),
        };
        // `--no-foo` (store_false): foo = False when foo is modelled.
        if let Some(base) = ck.strip_prefix("no_") {
            if (self.needed)(base) && value == "True" {
                self.out.push(Assignment {
                    key: base.into(),
                    value: "False".into(),
                    loc: vloc,
                });
                return Ok(());
            }
        }
        self.out.push(Assignment {
            key: key.to_string(),
            value,
            loc: vloc,
        });
        Ok(())
    }

    fn warnings(&self, launch: &Launch, out: &mut Vec<Warning>) {
        let mut by_cond: BTreeMap<String, Vec<&str>> = BTreeMap::new();
        for (f, why) in &self.dropped {
            by_cond.entry(why.to_string()).or_default().push(f);
        }
        for (why, flags) in by_cond {
            out.push(Warning::at(
                &Loc::new(self.path, launch.line, launch.col),
                "flags",
                format!(
                    "{} not applied: {why}; they do not change the modelled job",
                    flags.join(", ")
                ),
            ));
        }
        for (raw, loc, why) in &self.unknown {
            out.push(Warning::at(
                loc,
                raw,
                format!("may add flags the reader cannot see ({why}); pass any that matter as overrides"),
            ));
        }
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
