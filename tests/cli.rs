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
