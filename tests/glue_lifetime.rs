//! The ns-3 glue never outlives `ina3d ns3 run` (issue 37, item 4): SIGTERM to ina3d,
//! Ctrl-C (SIGINT) to its process group and SIGKILL to ina3d each leave no `ina3d-ns3`
//! running. Real glue, real signals; Linux only (`/proc`, parent-death signal).
//!
//! The run is one large flow, so the glue prints no progress between its first line and
//! the flow's end (progress comes per finished record): a glue that missed the signal
//! would run on for the whole flow, as an orphan would, instead of dying on its next write
//! into ina3d's closed pipe.

use ina3d::formats::trace_csv::{self, TraceHeader};
use ina3d::ns3::run::{build_glue, glue_binary, glue_source_dir};
use ina3d::record::{Class, FlowRecord, Mode};
use ina3d::units::{Bytes, FlowId, NodeId};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Two hosts under one 100 Gbps leaf, and 2 GiB from host 0 to host 1: about 1.5 M
/// packets, tens of seconds of ns-3 wall time, with no progress line until the end.
/// Emitted through the CLI (`ina3d ns3 emit`), as a user prepares a run.
fn emit_long_run(dir: &Path) {
    let trace = dir.with_extension("csv");
    let flow = FlowRecord {
        id: FlowId(0),
        src: NodeId(0),
        dst: NodeId(1),
        bytes: Bytes(2 << 30),
        mode: Mode::Net,
        class: Class::Dp,
        ..Default::default()
    };
    let mut h = TraceHeader::new();
    h.set(
        "topology",
        "leaf-spine:leaves=1,spines=1,hosts-per-leaf=2,gpus-per-server=1,nvlink=off",
    );
    h.set("seed", 0);
    trace_csv::write(&trace, &h, &[flow]).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_ina3d"))
        .args(["ns3", "emit"])
        .arg(&trace)
        .arg("-o")
        .arg(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

fn glue() -> std::path::PathBuf {
    build_glue(&glue_source_dir(), &glue_binary())
        .unwrap_or_else(|e| panic!("ns-3 glue unavailable — this test needs ns-3: {e}"))
}

/// `/proc/PID/stat`: (command name, state, parent pid); `None` once the process is gone.
fn stat(pid: i32) -> Option<(String, char, i32)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (open, close) = (s.find('(')?, s.rfind(')')?);
    let comm = s[open + 1..close].to_string();
    let mut rest = s[close + 1..].split_whitespace();
    let state = rest.next()?.chars().next()?;
    let ppid = rest.next()?.parse().ok()?;
    Some((comm, state, ppid))
}

/// The `ina3d-ns3` child of `ina3d`, waiting for it up to a minute; `log` is where
/// ina3d's messages go, shown if it ends first.
fn glue_child_of(ina3d: &mut Child, log: &Path) -> i32 {
    let parent = ina3d.id() as i32;
    let t0 = Instant::now();
    loop {
        if let Some(status) = ina3d.try_wait().unwrap() {
            let err = std::fs::read_to_string(log).unwrap_or_default();
            panic!("ina3d ended ({status}) before its glue was seen: {err}");
        }
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse().ok()) else {
                continue;
            };
            if let Some((comm, _, ppid)) = stat(pid) {
                if ppid == parent && comm == "ina3d-ns3" {
                    return pid;
                }
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no glue started under ina3d {parent}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether `pid` is still a live `ina3d-ns3` (not gone, not a zombie waiting for a reaper).
fn glue_alive(pid: i32) -> bool {
    stat(pid).is_some_and(|(comm, state, _)| comm == "ina3d-ns3" && state != 'Z')
}

/// `ina3d ns3 run DIR` in a process group of its own (as a shell runs a job), so a
/// signal to that group reaches nothing of the test runner.
fn start(dir: &Path, glue: &Path, log: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_ina3d"))
        .args(["ns3", "run"])
        .arg(dir)
        .arg("--glue")
        .arg(glue)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .process_group(0)
        .spawn()
        .unwrap()
}

/// Signals a running `ina3d ns3 run` with `send`, then gives its glue 5 s to be gone.
fn glue_outlives(dir: &Path, glue: &Path, what: &str, send: impl Fn(i32)) {
    let log = dir.with_extension("log");
    let mut ina3d = start(dir, glue, &log);
    let pid = ina3d.id() as i32;
    let g = glue_child_of(&mut ina3d, &log);
    // the glue is past its start-up and into the flow
    std::thread::sleep(Duration::from_millis(300));
    assert!(glue_alive(g), "{what}: the glue ended before the signal");
    send(pid);
    let status = ina3d.wait().unwrap();
    let t0 = Instant::now();
    while glue_alive(g) && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left = glue_alive(g);
    if left {
        // SAFETY: the orphan's pid, checked above to be the glue; a plain signal.
        unsafe { libc::kill(g, libc::SIGKILL) };
    }
    assert!(
        !left,
        "{what}: ina3d ended ({status}) and its glue {g} was still running 5 s later"
    );
}

#[test]
fn no_glue_is_left_running_when_ns3_run_is_terminated_interrupted_or_killed() {
    let d = tempfile::tempdir().unwrap();
    let glue = glue();
    // a directory each: an interrupted run leaves its directory marked incomplete
    let run = |name: &str| {
        let dir = d.path().join(name);
        emit_long_run(&dir);
        dir
    };
    glue_outlives(&run("term"), &glue, "SIGTERM to ina3d", |pid| {
        // SAFETY: the child's pid, a plain signal.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    });
    glue_outlives(
        &run("int"),
        &glue,
        "SIGINT to ina3d's process group",
        |pid| {
            // SAFETY: the group the child leads (process_group(0)), a plain signal.
            unsafe { libc::killpg(pid, libc::SIGINT) };
        },
    );
    glue_outlives(&run("kill"), &glue, "SIGKILL to ina3d", |pid| {
        // SAFETY: the child's pid, a plain signal.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    });
}
