//! Output directories are marked (issue 37, item 3): every command writing a directory
//! writes `.ina3d-complete` last, an interrupted one leaves `.ina3d-incomplete`, a re-run
//! clears what an earlier run left, and `inspect` and `compare` refuse a file of an
//! incomplete or mixed directory (exit 2, naming the directory and what is wrong).
//! Real commands, real signals (Linux).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const COMPLETE: &str = ".ina3d-complete";
const INCOMPLETE: &str = ".ina3d-incomplete";

/// `ina3d ARGS` in the crate root: (exit code, stderr).
fn ina3d(args: &[&str]) -> (Option<i32>, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_ina3d"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `ina3d run` of the tiny job (no ns-3) into `out`.
fn run_tiny(out: &Path, policies: &str, seeds: &str) -> (Option<i32>, String) {
    ina3d(&[
        "run",
        "traces/example/tiny.toml",
        "--policies",
        policies,
        "--seeds",
        seeds,
        "--no-ns3",
        "-o",
        out.to_str().unwrap(),
    ])
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// A directory holding another run's seeds (and no marker, as ina3d wrote before markers
/// existed, or with one): a re-run leaves exactly its own entries; the earlier seeds'
/// directories are gone, and inspect reads the new traces.
#[test]
fn a_rerun_clears_the_seeds_and_policies_of_the_earlier_run() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    // an older run's layout, unmarked: seeds 5 and 7 with a results table
    for s in ["seed-5/ring", "seed-7/ina-dp"] {
        std::fs::create_dir_all(out.join(s)).unwrap();
        std::fs::write(out.join(s).join("trace.csv.gz"), "stale").unwrap();
    }
    std::fs::write(out.join("results.csv"), "policy\nring\n").unwrap();
    std::fs::write(out.join("notes.txt"), "the user's own file").unwrap();
    let (code, err) = run_tiny(&out, "ring,ina-dp", "0,1");
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        names(&out),
        [
            COMPLETE,
            "notes.txt",
            "results.csv",
            "results.svg",
            "seed-0",
            "seed-1"
        ]
    );
    let marker = std::fs::read_to_string(out.join(COMPLETE)).unwrap();
    assert!(
        marker.contains("seeds 0 1") && marker.contains("member: seed-1"),
        "{marker}"
    );
    // now one seed into the same (marked) directory: the seed directories go
    let (code, err) = run_tiny(&out, "ring", "3");
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        names(&out),
        [COMPLETE, "notes.txt", "results.csv", "results.svg", "ring"]
    );
    let trace = out.join("ring/trace.csv.gz");
    let (code, err) = ina3d(&["inspect", trace.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
}

/// A leftover put back beside a complete run (copied in, or written by an older ina3d
/// after this one) is not part of the listed set: inspect refuses it, naming the
/// directory, the entry and the command that completed the directory.
#[test]
fn inspect_refuses_a_file_the_complete_set_does_not_list() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    let (code, err) = run_tiny(&out, "ring", "0,1");
    assert_eq!(code, Some(0), "{err}");
    let copy = out.join("seed-9/ring");
    std::fs::create_dir_all(&copy).unwrap();
    std::fs::copy(
        out.join("seed-0/ring/trace.csv.gz"),
        copy.join("trace.csv.gz"),
    )
    .unwrap();
    let (code, err) = ina3d(&["inspect", copy.join("trace.csv.gz").to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{} mixes runs",
            out.canonicalize().unwrap().display()
        )) && err.contains("`seed-9` is not part of what `ina3d run, seeds 0 1` completed"),
        "{err}"
    );
    // the listed seed is read
    let (code, err) = ina3d(&[
        "inspect",
        out.join("seed-0/ring/trace.csv.gz").to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{err}");
}

/// A run whose completion marker was replaced by the incompleteness marker (what a crash
/// between two files leaves): inspect and compare refuse its files with exit 2, naming
/// the directory and the marker.
#[test]
fn inspect_and_compare_refuse_a_directory_marked_incomplete() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    let (code, err) = run_tiny(&out, "ring", "0");
    assert_eq!(code, Some(0), "{err}");
    std::fs::remove_file(out.join(COMPLETE)).unwrap();
    std::fs::write(out.join(INCOMPLETE), "command: ina3d run, seeds 0\n").unwrap();
    let dir = out.canonicalize().unwrap().display().to_string();
    let (code, err) = ina3d(&["inspect", out.join("ring/trace.csv.gz").to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{dir} is marked incomplete ({INCOMPLETE}, by `ina3d run, seeds 0`)"
        )),
        "{err}"
    );
    // compare reads the replay's fct.csv with this reader (in-process here: the marker is
    // not this test's), and through the command where it is built (`tables`)
    let replay = out.join("ring/replay");
    let e = ina3d::formats::fct_csv::read(&replay.join("fct.csv")).unwrap_err();
    assert!(
        e.to_string()
            .contains(&format!("{dir} is marked incomplete")),
        "{e}"
    );
    #[cfg(feature = "tables")]
    {
        let (code, err) = ina3d(&[
            "compare",
            "--replay",
            replay.to_str().unwrap(),
            "--ns3",
            replay.to_str().unwrap(),
            "-o",
            d.path().join("cmp").to_str().unwrap(),
        ]);
        assert_eq!(code, Some(2), "{err}");
        assert!(
            err.contains(&format!("{dir} is marked incomplete")),
            "{err}"
        );
    }
}

/// SIGINT to `ina3d run` part way (its first trace written, more seeds to go) leaves the
/// directory marked incomplete, naming the run and its seeds, and no completion marker;
/// inspect refuses the trace that was written.
#[test]
fn an_interrupted_run_stays_marked_incomplete() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    // four seeds of ring and the planner: about 15 s in a debug build
    let mut child = Command::new(env!("CARGO_BIN_EXE_ina3d"))
        .args(["run", "traces/example/tiny.toml", "--policies", "ring,plan"])
        .args(["--seeds", "0,1,2,3", "--no-ns3", "-o"])
        .arg(&out)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let first = out.join("seed-0/ring/trace.csv.gz");
    let t0 = Instant::now();
    while !first.exists() {
        assert!(t0.elapsed() < Duration::from_secs(60), "no trace written");
        assert!(child.try_wait().unwrap().is_none(), "the run ended early");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill(2) on the pid of a child this test spawned and has not reaped
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(128 + libc::SIGINT), "{err}");
    assert!(!out.join(COMPLETE).exists());
    let marker = std::fs::read_to_string(out.join(INCOMPLETE)).unwrap();
    assert!(
        marker.contains("command: ina3d run, seeds 0 1 2 3"),
        "{marker}"
    );
    let (code, err) = ina3d(&["inspect", first.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("is marked incomplete"), "{err}");
}

/// A cluster run marks its directory complete with its policies and tables; a re-run with
/// fewer policies removes the policy directories it no longer writes; a run stopped by an
/// error part way (a policy directory that cannot be made) stays marked incomplete.
#[test]
fn a_cluster_run_is_marked_and_a_rerun_clears_dropped_policies() {
    let d = tempfile::tempdir().unwrap();
    let root = env!("CARGO_MANIFEST_DIR");
    let file = |policies: &str| {
        let p = d.path().join("c.toml");
        std::fs::write(
            &p,
            format!(
                "policies = [{policies}]\n[[job]]\nname = \"a\"\n\
                 input = \"{root}/traces/example/tiny.toml\"\n"
            ),
        )
        .unwrap();
        p
    };
    let out = d.path().join("out");
    let c = file("\"ring\", \"atp\"");
    let (code, err) = ina3d(&["cluster", c.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        names(&out),
        [COMPLETE, "atp", "cluster.csv", "jobs.csv", "ring"]
    );
    let c = file("\"ring\"");
    let (code, err) = ina3d(&["cluster", c.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(names(&out), [COMPLETE, "cluster.csv", "jobs.csv", "ring"]);
    // a file where `split`'s replay directory goes, in a directory no ina3d wrote (so
    // not cleared): ring runs, then split fails part way
    let c = file("\"ring\", \"split\"");
    let blocked = d.path().join("blocked");
    std::fs::create_dir_all(blocked.join("split")).unwrap();
    std::fs::write(
        blocked.join("split/replay"),
        "a file where a directory goes",
    )
    .unwrap();
    let (code, err) = ina3d(&[
        "cluster",
        c.to_str().unwrap(),
        "-o",
        blocked.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(!blocked.join(COMPLETE).exists(), "{err}");
    let marker = std::fs::read_to_string(blocked.join(INCOMPLETE)).unwrap();
    assert!(marker.contains("command: ina3d cluster"), "{marker}");
}

/// `sweep::mark` removes the cell directories of cells not in the grid (finished or
/// partial) and keeps this grid's, to be resumed.
#[test]
fn marking_a_sweep_removes_the_cells_of_another_grid() {
    let d = tempfile::tempdir().unwrap();
    let grid = d.path().join("g.toml");
    std::fs::write(
        &grid,
        format!(
            "[base]\ninput = \"{}/traces/example/tiny.toml\"\n[axes]\nseeds = [\"0\", \"1\"]\n",
            env!("CARGO_MANIFEST_DIR")
        ),
    )
    .unwrap();
    let out = d.path().join("sweep");
    let (_, cells) = ina3d::sweep::prepare(&grid, &out).unwrap();
    assert_eq!(cells.len(), 2);
    let keep = out.join("cells").join(cells[0].id.as_str());
    std::fs::create_dir_all(&keep).unwrap();
    std::fs::write(keep.join("results.csv"), "policy\nring\n").unwrap();
    for stale in ["0123456789abcdef", "fedcba9876543210.tmp"] {
        std::fs::create_dir_all(out.join("cells").join(stale)).unwrap();
    }
    let _set = ina3d::sweep::mark(&out, &out.join("grid.toml"), &cells).unwrap();
    assert_eq!(names(&out.join("cells")), [cells[0].id.as_str()]);
    let marker = std::fs::read_to_string(out.join(INCOMPLETE)).unwrap();
    assert!(
        marker.contains(&format!("member: cells/{}", cells[1].id)),
        "{marker}"
    );
}

/// `export chakra` and `validate` mark their directories like every other command that
/// writes one (issue 37 item 3): complete once the last file is written, and a re-run of
/// `export chakra` for fewer ranks removes the ranks the earlier one listed.
#[test]
fn export_chakra_and_validate_mark_their_directories() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("chakra");
    let o = out.to_str().unwrap();
    let (code, err) = ina3d(&["export", "chakra", "traces/example/tiny.toml", "-o", o]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.join(COMPLETE).is_file() && !out.join(INCOMPLETE).exists());
    assert!(out.join("workload.7.et").is_file());
    // half the ranks: the earlier export's ranks 4-7 are gone, not left beside the new set
    let (code, err) = ina3d(&[
        "export",
        "chakra",
        "traces/example/tiny.toml",
        "--dp",
        "1",
        "-o",
        o,
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.join("workload.3.et").is_file(), "{:?}", names(&out));
    assert!(!out.join("workload.4.et").exists(), "{:?}", names(&out));
    let v = d.path().join("validate");
    let (code, err) = ina3d(&[
        "validate",
        "--reality",
        "--runs-only",
        "mlm-a100-1.7b-32",
        "-o",
        v.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(v.join(COMPLETE).is_file() && v.join("reality.csv").is_file());
    assert!(!v.join(INCOMPLETE).exists());
}
