//! The command line as a user meets it: pipes, exit codes.

use std::io::Read;
use std::process::{Command, Stdio};

#[test]
fn output_into_a_closed_pipe_ends_quietly_instead_of_panicking() {
    // `ina3d parse big.log --json | head -c 10`: the reader stops after a few bytes while
    // the JSON (about 1 MB: every iteration line) is far larger than a pipe's buffer.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("big.log");
    let mut text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/traces/example/megatron.log"
    ))
    .unwrap();
    for i in 1..=5000 {
        text.push_str(&format!(
            " iteration {i:8}/ 9999 | consumed samples: {} | elapsed time per iteration (ms): 330.0 | learning rate: 1.0E-05 | global batch size:    64 | lm loss: 1.0E+01 | loss scale: 1.0 |\n",
            64 * i
        ));
    }
    std::fs::write(&log, text).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ina3d"))
        .args(["parse", log.to_str().unwrap(), "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut first = [0u8; 10];
    out.read_exact(&mut first).unwrap();
    drop(out);
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(!err.contains("panicked"), "{err}");
    assert!(!err.contains("Broken pipe"), "{err}");
    // SIGPIPE ends it (no exit code), as it ends `cat`; never a panic (101).
    assert_ne!(status.code(), Some(101), "{err}");
    assert!(
        !status.success(),
        "the pipe closed long before the output ended"
    );
}

/// Runs `ina3d ARGS`: (exit code, stderr).
fn ina3d(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ina3d"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_missing_file_is_named_with_what_the_os_said_once_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.csv");
    let (code, err) = ina3d(&["replay", missing.to_str().unwrap(), "-o", "x"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("nope.csv"), "{err}");
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
}

#[test]
fn validate_refuses_a_jitter_that_would_change_the_schedule_rather_than_its_timing() {
    let (code, err) = ina3d(&["validate", "--jitter", "5000000", "--list"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--jitter") && err.contains("1000000"), "{err}");
    let (code, err) = ina3d(&["validate", "--runs", "0", "--list"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--runs"), "{err}");
}

fn tiny() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/traces/example/tiny.toml").to_string()
}

/// `summary.csv`'s `iteration_time_ns`, read with a plain string scan.
fn iteration_ns(summary: &std::path::Path) -> f64 {
    let text = std::fs::read_to_string(summary).unwrap();
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    let k = head.iter().position(|c| *c == "iteration_time_ns").unwrap();
    row[k].parse().unwrap()
}

#[test]
fn run_with_ns3_prints_both_back_ends_speedups_in_a_table_a_person_reads() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("tiny");
    let o = Command::new(env!("CARGO_BIN_EXE_ina3d"))
        .args(["run", &tiny(), "--ns3", "--policies", "ring,ina-dp", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    // one line per policy, in ms, at most 100 characters; stage messages stay hidden
    assert!(stdout.lines().all(|l| l.chars().count() <= 100), "{stdout}");
    assert!(
        stdout.starts_with("policy") && stdout.contains("ns-3 speed-up"),
        "{stdout}"
    );
    assert!(
        stdout.lines().nth(1).unwrap().starts_with("ring "),
        "{stdout}"
    );
    assert!(stdout.contains("best: "), "{stdout}");
    assert!(
        stderr.lines().count() < 10,
        "stage messages leaked: {stderr}"
    );
    // results.csv's ns-3 speed-up is ns-3's own ring iteration over its ina-dp iteration,
    // as the glue's two summary.csv files say
    let ring = iteration_ns(&out.join("ring/ns3/summary.csv"));
    let ina = iteration_ns(&out.join("ina-dp/ns3/summary.csv"));
    let results = std::fs::read_to_string(out.join("results.csv")).unwrap();
    let mut lines = results.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let k = head
        .iter()
        .position(|c| *c == "ns3_speedup_vs_ring")
        .unwrap();
    let row: Vec<&str> = lines.nth(1).unwrap().split(',').collect();
    let got: f64 = row[k].parse().unwrap();
    assert!((got - ring / ina).abs() < 1e-12, "{got} vs {}", ring / ina);
    // and the table prints it with three decimals
    assert!(stdout.contains(&format!("{:.3}", ring / ina)), "{stdout}");
    assert!(out.join("results.svg").is_file());
}

#[test]
fn an_interrupted_run_leaves_no_temporaries_and_a_marker_every_reader_refuses() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ina3d"))
        .args([
            "run",
            "--no-ns3",
            "--seeds",
            "0,1,2,3,4,5,6,7,8,9,10,11",
            "-o",
        ])
        .arg(&out)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // wait until the first seed's ring replay is whole, then interrupt
    let first = out.join("seed-0/ring/replay/summary.csv");
    let t0 = std::time::Instant::now();
    while !first.exists() {
        assert!(t0.elapsed().as_secs() < 600, "the run never started");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // SAFETY: the child's pid, a plain signal.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    if status.code() == Some(0) {
        return; // it finished before the signal: nothing to check (a very fast machine)
    }
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    let tmp: Vec<_> = walk(&out)
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(tmp.is_empty(), "temporaries left: {tmp:?}");
    assert!(out.join(ina3d::formats::atomic::INCOMPLETE).is_file());
    // a reader in another process refuses the half set, naming the marked directory
    let (code, e) = ina3d(&[
        "inspect",
        out.join("seed-0/ring/trace.csv.gz").to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2), "{e}");
    assert!(e.contains("marked incomplete"), "{e}");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        }
        out.push(p);
    }
    out
}

#[test]
fn compare_against_a_garbage_fct_txt_exits_2_and_a_valid_one_writes_its_tables() {
    let d = tempfile::tempdir().unwrap();
    let p = |s: &str| d.path().join(s).to_str().unwrap().to_string();
    let ok = |args: &[&str]| {
        let (code, e) = ina3d(args);
        assert_eq!(code, Some(0), "{args:?}: {e}");
    };
    let trace = p("t.csv.gz");
    ok(&[
        "trace",
        &tiny(),
        "--topology",
        "fat-tree:k=4,nvlink=off",
        "-o",
        &trace,
    ]);
    ok(&["replay", &trace, "-o", &p("replay")]);
    ok(&["ns3", "emit", &trace, "-o", &p("emit")]);
    std::fs::write(d.path().join("garbage.txt"), "x y z\nnot an fct row\n").unwrap();
    let (code, e) = ina3d(&[
        "compare",
        "--replay",
        &p("replay"),
        "--ns3",
        &p("garbage.txt"),
        "--emit",
        &p("emit"),
        "-o",
        &p("cmp"),
    ]);
    assert_eq!(code, Some(2), "{e}");
    assert!(
        e.contains("garbage.txt") && e.contains("not an fct.txt"),
        "{e}"
    );
    // the replay's own fct.txt rows are fct rows of those flows (matched where the
    // open-loop starts agree): the tables are written to -o
    let (code, e) = ina3d(&[
        "compare",
        "--replay",
        &p("replay"),
        "--ns3",
        &p("replay/fct.txt"),
        "--emit",
        &p("emit"),
        "-o",
        &p("cmp"),
    ]);
    assert_eq!(code, Some(0), "{e}");
    for f in ["fct.csv", "fct_error.csv"] {
        assert!(d.path().join("cmp").join(f).is_file(), "{f}: {e}");
    }
}

/// `ina3d replay` under a memory limit that cannot hold the job: refused with exit 2,
/// the estimate and the limit, and no outputs half written; from the generator and
/// from a trace file alike.
#[test]
fn a_replay_that_would_not_fit_in_memory_is_refused_with_the_estimate_and_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let tiny = concat!(env!("CARGO_MANIFEST_DIR"), "/traces/example/tiny.toml");
    let trace = dir.path().join("t.csv");
    let st = Command::new(env!("CARGO_BIN_EXE_ina3d"))
        .args([
            "trace",
            tiny,
            "--topology",
            "fat-tree:k=4,gpus-per-server=2",
            "-o",
        ])
        .arg(&trace)
        .output()
        .unwrap();
    assert!(st.status.success());
    let refused = |source: &[&str]| {
        let out = dir.path().join("out");
        let o = Command::new(env!("CARGO_BIN_EXE_ina3d"))
            .arg("replay")
            .args(source)
            .arg("-o")
            .arg(&out)
            .env("INA3D_MEMORY_LIMIT", "4K")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(
            err.contains("would need about") && err.contains("more than the limit of"),
            "{err}"
        );
        assert!(err.contains("INA3D_MEMORY_LIMIT"), "{err}");
        assert!(!out.join("fct.csv").exists());
    };
    refused(&[trace.to_str().unwrap()]);
    refused(&[
        "--from",
        tiny,
        "--topology",
        "fat-tree:k=4,gpus-per-server=2",
    ]);
    // a malformed limit is named
    let o = Command::new(env!("CARGO_BIN_EXE_ina3d"))
        .args(["replay", trace.to_str().unwrap(), "-o"])
        .arg(dir.path().join("o2"))
        .env("INA3D_MEMORY_LIMIT", "lots")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("INA3D_MEMORY_LIMIT"));
}

/// `ina3d replay --no-fct` writes the summary, links and switch slots of the same replay
/// and neither per-record file, removing those an earlier replay left in the directory.
#[test]
fn a_replay_without_per_record_files_writes_the_same_summary_and_removes_stale_ones() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let tiny = concat!(env!("CARGO_MANIFEST_DIR"), "/traces/example/tiny.toml");
    let replay = |extra: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_ina3d"))
            .args([
                "replay",
                "--from",
                tiny,
                "--topology",
                "fat-tree:k=4,gpus-per-server=2",
            ])
            .args(extra)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let read = |f: &str| std::fs::read_to_string(out.join(f)).unwrap();
        // the summary without its wall time (its last column)
        let summary = read("summary.csv")
            .lines()
            .map(|l| l.rsplit_once(',').unwrap().0.to_string())
            .collect::<Vec<_>>();
        (summary, read("links.csv"), read("switches.csv"))
    };
    let with = replay(&[]);
    assert!(out.join("fct.csv").exists() && out.join("fct.txt").exists());
    let without = replay(&["--no-fct"]);
    assert_eq!(with, without);
    assert!(
        !out.join("fct.csv").exists(),
        "the earlier replay's fct.csv is gone"
    );
    assert!(!out.join("fct.txt").exists());
}
