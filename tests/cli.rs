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
