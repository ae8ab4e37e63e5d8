//! Slurm's part of a launch script: the `#SBATCH` directives of a batch script, which
//! Slurm turns into the job's environment (`SLURM_NNODES`, `SLURM_NTASKS_PER_NODE`, …),
//! and an `srun` that starts the ranks itself (one task per rank) instead of a launcher
//! such as `torchrun`.

use super::expand::Elem;
use crate::megatron::error::Loc;

/// What the `#SBATCH` lines ask for, each with its line.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Sbatch {
    pub nodes: Option<(u64, usize)>,
    pub ntasks_per_node: Option<(u64, usize)>,
    pub ntasks: Option<(u64, usize)>,
    pub gpus_per_node: Option<(u64, usize)>,
}

/// A count as Slurm writes it: `8`, or a node range `2-4` (its maximum, the most Slurm
/// allocates; bounded to keep crafted counts realistic).
fn count(v: &str) -> Option<u64> {
    let v = v.trim();
    let v = v.rsplit('-').next().unwrap_or(v);
    v.parse::<u64>().ok().filter(|n| (1..=1 << 20).contains(n))
}

/// `--gres=gpu:8`, `gpu:a100:8`, `--gpus-per-node=8` or `a100:8`: the GPU count.
fn gpus(v: &str) -> Option<u64> {
    let g = v.split(',').find(|g| g.trim_start().starts_with("gpu"))?;
    count(g.rsplit(':').next()?)
}

/// Reads the `#SBATCH` directives: Slurm reads them from the comment lines before the
/// script's first command.
pub(crate) fn sbatch(text: &str) -> Sbatch {
    let mut s = Sbatch::default();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if t.is_empty() || (t.starts_with('#') && !t.starts_with("#SBATCH")) {
            continue;
        }
        let Some(rest) = t.strip_prefix("#SBATCH") else {
            break;
        };
        // Options, then any trailing comment.
        let words: Vec<&str> = rest
            .split('#')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .collect();
        let ln = i + 1;
        options(&words, |k, v| {
            let slot = match k {
                "nodes" => &mut s.nodes,
                "ntasks-per-node" => &mut s.ntasks_per_node,
                "ntasks" => &mut s.ntasks,
                "gpus-per-node" | "gres" => {
                    let n = if k == "gres" {
                        gpus(v)
                    } else {
                        v.rsplit(':').next().and_then(count)
                    };
                    if let Some(n) = n {
                        s.gpus_per_node = Some((n, ln));
                    }
                    return;
                }
                _ => return,
            };
            if let Some(n) = count(v) {
                *slot = Some((n, ln));
            }
        });
    }
    s
}

/// Calls `f(long name, value)` for each option of `words` (`--nodes=2`, `--nodes 2`,
/// `-N 2`, `-N2`, `-n 16`), stopping at the first word that is not an option or its
/// value (the command `srun` runs).
fn options(words: &[&str], mut f: impl FnMut(&str, &str)) -> usize {
    const WITH_VALUE: &[&str] = &[
        "nodes",
        "ntasks-per-node",
        "ntasks",
        "gpus-per-node",
        "gres",
        "job-name",
        "partition",
        "account",
        "time",
        "output",
        "error",
        "cpus-per-task",
        "qos",
        "constraint",
        "reservation",
        "hint",
        "mem",
        "jobid",
        "nodelist",
        "exclude",
        "gpus",
        "wait",
        "mpi",
        "export",
        "distribution",
        "cpu-bind",
        "container-image",
        "container-mounts",
    ];
    let mut i = 0;
    while i < words.len() {
        let w = words[i];
        let (name, inline) = if let Some(l) = w.strip_prefix("--") {
            match l.split_once('=') {
                Some((n, v)) => (n.to_string(), Some(v)),
                None => (l.to_string(), None),
            }
        } else if let Some(s) = w.strip_prefix('-').filter(|s| !s.is_empty()) {
            let long = match &s[..1] {
                "N" => "nodes",
                "n" => "ntasks",
                "G" => "gpus",
                "J" => "job-name",
                "p" => "partition",
                "A" => "account",
                "t" => "time",
                "o" => "output",
                "e" => "error",
                "c" => "cpus-per-task",
                "w" => "nodelist",
                "x" => "exclude",
                _ => "",
            };
            (long.to_string(), (s.len() > 1).then(|| &s[1..]))
        } else {
            return i;
        };
        i += 1;
        let value = match inline {
            Some(v) => v,
            None if WITH_VALUE.contains(&name.as_str()) && i < words.len() => {
                i += 1;
                words[i - 1]
            }
            None => "",
        };
        f(&name, value);
    }
    i
}

impl Sbatch {
    /// The environment Slurm gives the batch script, for the variables the directives
    /// determine.
    pub(crate) fn env(&self) -> Vec<(&'static str, String)> {
        let mut v = Vec::new();
        if let Some((n, _)) = self.nodes {
            v.push(("SLURM_NNODES", n.to_string()));
            v.push(("SLURM_JOB_NUM_NODES", n.to_string()));
        }
        if let Some((n, _)) = self.ntasks_per_node {
            v.push(("SLURM_NTASKS_PER_NODE", n.to_string()));
        }
        let tasks = self.ntasks.map(|t| t.0).or_else(|| {
            let (n, _) = self.nodes?;
            n.checked_mul(self.ntasks_per_node?.0)
        });
        if let Some(t) = tasks {
            v.push(("SLURM_NTASKS", t.to_string()));
        }
        if let Some((g, _)) = self.gpus_per_node {
            v.push(("SLURM_GPUS_ON_NODE", g.to_string()));
            v.push(("SLURM_GPUS_PER_NODE", g.to_string()));
        }
        v
    }
}

/// The world size of a launch that `srun` starts directly (no `torchrun`): one rank per
/// task, `--ntasks`, else nodes × `--ntasks-per-node`; srun's own options first, then the
/// `#SBATCH` directives. `None` when the launcher has no `srun` or the count is unknown.
pub(crate) fn srun_world(launcher: &[Elem], sb: &Sbatch, path: &str) -> Option<(u64, Loc)> {
    let at = launcher.iter().position(|e| {
        e.text
            .as_ref()
            .is_ok_and(|t| t.rsplit('/').next() == Some("srun"))
    })?;
    let words: Vec<String> = launcher[at + 1..]
        .iter()
        .map(|e| e.text.clone().unwrap_or_default())
        .collect();
    let refs: Vec<&str> = words.iter().map(String::as_str).collect();
    let (mut nodes, mut per, mut tasks) = (None, None, None);
    options(&refs, |k, v| match k {
        "nodes" => nodes = count(v),
        "ntasks-per-node" => per = count(v),
        "ntasks" => tasks = count(v),
        _ => {}
    });
    let e = &launcher[at];
    let loc = Loc::new(path, e.line, e.col);
    if let Some(t) = tasks.or(sb.ntasks.map(|t| t.0)) {
        return Some((t, loc));
    }
    let nodes = nodes.or(sb.nodes.map(|n| n.0)).unwrap_or(1);
    let per = per.or(sb.ntasks_per_node.map(|n| n.0))?;
    Some((nodes.checked_mul(per)?, loc))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sbatch_directives_become_slurms_environment() {
        let s = sbatch("#!/bin/bash\n#SBATCH --job-name=x\n#SBATCH --nodes=24\n#SBATCH --ntasks-per-node=1   # one\n#SBATCH --gres=gpu:8\n\nset -x\n#SBATCH --nodes=99\n");
        assert_eq!(s.nodes, Some((24, 3)));
        assert_eq!(s.ntasks_per_node, Some((1, 4)));
        assert_eq!(s.gpus_per_node, Some((8, 5)));
        let env = s.env();
        assert!(env.contains(&("SLURM_NNODES", "24".into())));
        assert!(env.contains(&("SLURM_NTASKS", "24".into())));
        assert!(env.contains(&("SLURM_GPUS_ON_NODE", "8".into())));
        let s = sbatch("#SBATCH -N 2\n#SBATCH -n16\n#SBATCH --gpus-per-node=a100:4\n");
        assert_eq!(
            (s.nodes, s.ntasks, s.gpus_per_node),
            (Some((2, 1)), Some((16, 2)), Some((4, 3)))
        );
    }
}
