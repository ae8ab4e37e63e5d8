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
