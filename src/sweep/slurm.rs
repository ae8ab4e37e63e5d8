//! Slurm: a sweep as one job array, one task per cell (`ina3d sweep GRID -o DIR --cell
//! $SLURM_ARRAY_TASK_ID`), submitted with `sbatch`.
//!
//! The script runs the same binary (by absolute path; on a cluster it must sit on a file
//! system the compute nodes share, as must DIR and the grid's inputs) from the directory
//! the sweep was started in, so the grid's relative paths mean the same in every task.
//! Only cells not yet done are submitted. Slurm's `MaxArraySize` (1001 by default) bounds
//! the largest array index, so grids beyond it need the cluster's limit raised.

use super::SweepError;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Options of the job array.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlurmOptions {
    /// `--partition`.
    pub partition: Option<String>,
    /// At most this many tasks at once (`%K` of `--array`).
    pub array_limit: Option<u32>,
    /// `--time` (Slurm's formats: `MM`, `HH:MM:SS`, `D-HH`, …).
    pub time: Option<String>,
    /// `--cpus-per-task`.
    pub cpus_per_task: Option<u32>,
}

/// `--array` of the indices: ranges folded (`0-3,7,9-10`), then `%K`.
pub fn array_spec(indices: &[usize], limit: Option<u32>) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < indices.len() {
        let mut j = i;
        while j + 1 < indices.len() && indices[j + 1] == indices[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            indices[i].to_string()
        } else {
            format!("{}-{}", indices[i], indices[j])
        });
        i = j + 1;
    }
    let mut s = parts.join(",");
    if let Some(k) = limit {
        s.push_str(&format!("%{k}"));
    }
    s
}

/// `s` quoted for bash (single quotes; a quote inside becomes `'\''`).
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A value going into an `#SBATCH` line: one line, no control characters.
fn directive_value(what: &str, v: &str) -> Result<String, SweepError> {
    if v.is_empty() || v.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(SweepError::Slurm(format!(
            "--{what} `{}`: expected one word without spaces or control characters",
            v.escape_debug()
        )));
    }
    Ok(v.to_string())
}

/// The job-array script: every task runs its cell of `grid` into `out` from `workdir`.
pub fn script(
    exe: &Path,
    grid: &Path,
    out: &Path,
    workdir: &Path,
    indices: &[usize],
    o: &SlurmOptions,
) -> Result<String, SweepError> {
    let mut s = String::from("#!/bin/bash\n");
    let line = |s: &mut String, d: String| s.push_str(&format!("#SBATCH {d}\n"));
    line(&mut s, "--job-name=ina3d-sweep".into());
    line(
        &mut s,
        format!("--array={}", array_spec(indices, o.array_limit)),
    );
    let log = out.join("slurm").join("%A_%a.out");
    line(
        &mut s,
        format!(
            "--output={}",
            directive_value("output", &log.display().to_string())?
        ),
    );
    if let Some(p) = &o.partition {
        line(
            &mut s,
            format!("--partition={}", directive_value("partition", p)?),
        );
    }
    if let Some(t) = &o.time {
        line(&mut s, format!("--time={}", directive_value("time", t)?));
    }
    if let Some(c) = o.cpus_per_task {
        line(&mut s, format!("--cpus-per-task={c}"));
    }
    s.push_str(&format!(
        "# one task per sweep cell; the cell's own log is DIR/cells/<id>/log.txt\n\
         cd {} || exit 1\n\
         exec {} sweep {} -o {} --cell \"$SLURM_ARRAY_TASK_ID\"\n",
        shell_quote(&workdir.display().to_string()),
        shell_quote(&exe.display().to_string()),
        shell_quote(&grid.display().to_string()),
        shell_quote(&out.display().to_string()),
    ));
    Ok(s)
}

/// A submitted job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Submitted {
    /// Slurm's job id.
    pub job_id: String,
    /// With `wait`: whether every task succeeded (sbatch's exit status).
    pub all_ok: bool,
    /// What sbatch printed on stderr.
    pub stderr: String,
}

/// Submits `script` with `sbatch --parsable` (and `--wait`: return only when every task
/// has ended). A missing `sbatch` or a refused job is an error carrying Slurm's own words.
pub fn submit(sbatch: &Path, script: &Path, wait: bool) -> Result<Submitted, SweepError> {
    let mut c = Command::new(sbatch);
    c.arg("--parsable");
    if wait {
        c.arg("--wait");
    }
    let o = c.arg(script).output().map_err(|e| {
        SweepError::Slurm(if e.kind() == std::io::ErrorKind::NotFound {
            format!(
                "`{}` not found: is Slurm installed and on PATH? ({e})",
                sbatch.display()
            )
        } else {
            format!("cannot run `{}`: {e}", sbatch.display())
        })
    })?;
    let stdout = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let stderr = String::from_utf8_lossy(&o.stderr).trim().to_string();
    // --parsable prints "jobid" or "jobid;cluster" once the job is accepted.
    let job_id = stdout
        .lines()
        .next()
        .map(|l| l.split(';').next().unwrap_or("").trim().to_string())
        .filter(|id| !id.is_empty() && id.chars().all(|c| c.is_ascii_digit()));
    match job_id {
        Some(job_id) => Ok(Submitted {
            job_id,
            all_ok: o.status.success(),
            stderr,
        }),
        None => Err(SweepError::Slurm(format!(
            "sbatch refused the job ({}): {}",
            o.status,
            if stderr.is_empty() { &stdout } else { &stderr }
        ))),
    }
}

/// `sbatch` as found on PATH (or `$INA3D_SBATCH`, for tests and unusual installs).
pub fn sbatch() -> PathBuf {
    std::env::var_os("INA3D_SBATCH").map_or_else(|| PathBuf::from("sbatch"), PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn array_specs_fold_runs_of_indices_into_ranges() {
        assert_eq!(array_spec(&[0, 1, 2, 3], Some(2)), "0-3%2");
        assert_eq!(array_spec(&[0, 2, 3, 4, 7, 9, 10], None), "0,2-4,7,9-10");
        assert_eq!(array_spec(&[5], None), "5");
    }

    #[test]
    fn the_script_runs_each_task_s_cell_from_the_start_directory() {
        let o = SlurmOptions {
            partition: Some("gpu".into()),
            array_limit: Some(4),
            time: Some("01:00:00".into()),
            cpus_per_task: Some(2),
        };
        let s = script(
            Path::new("/opt/ina3d"),
            Path::new("out/grid.toml"),
            Path::new("out"),
            Path::new("/home/me/it's"),
            &[0, 1, 2],
            &o,
        )
        .unwrap();
        for want in [
            "#SBATCH --array=0-2%4\n",
            "#SBATCH --partition=gpu\n",
            "#SBATCH --time=01:00:00\n",
            "#SBATCH --cpus-per-task=2\n",
            "#SBATCH --output=out/slurm/%A_%a.out\n",
            "cd '/home/me/it'\\''s' || exit 1\n",
            "exec '/opt/ina3d' sweep 'out/grid.toml' -o 'out' --cell \"$SLURM_ARRAY_TASK_ID\"\n",
        ] {
            assert!(s.contains(want), "{want:?} not in\n{s}");
        }
    }

    #[test]
    fn a_directive_value_with_a_newline_is_refused() {
        let o = SlurmOptions {
            partition: Some("a\n#SBATCH --x".into()),
            ..SlurmOptions::default()
        };
        let e = script(
            Path::new("x"),
            Path::new("g"),
            Path::new("o"),
            Path::new("."),
            &[0],
            &o,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("--partition"), "{e}");
    }

    #[test]
    fn a_missing_sbatch_is_named_and_a_refusal_carries_slurm_s_text() {
        let d = tempfile::tempdir().unwrap();
        let e = submit(&d.path().join("no-sbatch"), Path::new("job.sh"), false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no-sbatch") && e.contains("not found"), "{e}");
        // A stand-in sbatch that refuses as Slurm does.
        let fake = d.path().join("sbatch");
        std::fs::write(
            &fake,
            "#!/bin/sh\necho 'sbatch: error: invalid partition specified: nope' >&2\nexit 1\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let e = submit(&fake, Path::new("job.sh"), false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("invalid partition specified: nope"), "{e}");
    }
}
