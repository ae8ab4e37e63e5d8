//! Every reader fuzzed through the command line (issue 37, item 7): a valid file from the
//! committed corpus (`tests/fuzz/corpus/<target>/`, made by `tests/fuzz/make-corpus.sh`)
//! with one field set to an extreme, cut, a line doubled or dropped, a BOM, CRLF, UTF-16,
//! a NUL or a non-UTF-8 byte — the same cases every run (`tests/fuzz/harness.rs`) — is
//! given to the command that reads it. Each case exits 0 with no infinite or NaN number in
//! what it wrote, or 2 with an error naming the file; never a panic, a signal or a hang.
//! The corpus file itself must be accepted. `INA3D_FUZZ_CASES` sets the cases per target.

#[path = "fuzz/harness.rs"]
mod harness;

use harness::{cases, ina3d, judge, keep, report, Mutation, Rng, CASE_LIMIT, ROOT};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The fabric the corpus traces and plans were made on.
const FABRIC: &str = "fat-tree:k=4,gpus-per-server=2";

/// A reader and the command that reads it.
struct Target {
    /// Its corpus directory under `tests/fuzz/corpus/`.
    name: &'static str,
    /// The corpus files one of which each case mutates (others are copied as they are).
    files: &'static [&'static str],
    /// The command: (case directory holding the corpus copy, the file mutated, output
    /// directory) → args.
    args: fn(&Path, &Path, &Path) -> Vec<String>,
    /// Cases in CI (`INA3D_FUZZ_CASES` overrides).
    cases: usize,
    /// Cases past the CI budget that found a defect (since fixed): always run.
    regressions: &'static [usize],
    /// A case running longer is a hang ([`CASE_LIMIT`] unless the command's valid runs
    /// take longer).
    limit: Duration,
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn strings(a: &[&str]) -> Vec<String> {
    a.iter().map(|x| x.to_string()).collect()
}

fn corpus(name: &str) -> PathBuf {
    Path::new(ROOT).join("tests/fuzz/corpus").join(name)
}

/// Copies the corpus directory `from` into `to` (one level of subdirectories).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

/// gzip of `text` as the trace writer writes it (marked members).
fn gzip(text: &[u8], path: &Path) {
    let f = std::fs::File::create(path).unwrap();
    let g = ina3d::formats::gz_members::GzMembers::new(f, 1);
    g.finish(text.to_vec()).unwrap();
}

fn gunzip(path: &Path) -> Vec<u8> {
    use std::io::Read;
    let mut v = Vec::new();
    flate2::read::MultiGzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_end(&mut v)
        .unwrap();
    v
}

/// Runs `t`'s cases; fails listing every case that broke the rule of `harness::judge`.
fn run(t: &Target) {
    let n = cases(t.cases);
    let t0 = Instant::now();
    let mut failures = Vec::new();
    let mut refused = 0;
    let extra: Vec<usize> = t.regressions.iter().copied().filter(|c| *c >= n).collect();
    let ran = n + extra.len();
    for case in (0..n).chain(extra) {
        let mut rng = Rng::new(t.name, case);
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("in");
        copy_dir(&corpus(t.name), &work);
        let file = *rng.pick(t.files);
        let path = work.join(file);
        let gz = file.ends_with(".gz");
        // a gzip trace is mutated in its text and compressed again as the writer does,
        // or (one case in three) in its compressed bytes
        let raw_gz = gz && case % 3 == 2;
        let valid = if gz && !raw_gz {
            gunzip(&path)
        } else {
            std::fs::read(&path).unwrap()
        };
        let lines = valid.iter().filter(|b| **b == b'\n').count();
        let m = Mutation::draw(&mut rng, case, valid.len(), lines);
        let bytes = m.apply(&valid);
        if gz && !raw_gz {
            gzip(&bytes, &path);
        } else {
            std::fs::write(&path, &bytes).unwrap();
        }
        let out = dir.path().join("out");
        let o = ina3d(&(t.args)(&work, &path, &out), t.limit);
        refused += usize::from(o.code == Some(2));
        let base = Path::new(file).file_name().unwrap().to_str().unwrap();
        if let Some(why) = judge(&o, &[base], Some(&out), m.must_pass()) {
            let kept = keep(t.name, case, base, &std::fs::read(&path).unwrap());
            failures.push(format!(
                "  case {case} ({file}, {m:?}, kept as {}): {why}",
                kept.display()
            ));
        }
    }
    report(t.name, &failures, ran, refused, t0.elapsed().as_secs_f64());
}

/// `ina3d trace` of the tiny job onto `fabric`, into `out/t.csv`.
fn trace_tiny(fabric: &str, out: &Path, extra: &[&str]) -> Vec<String> {
    let mut a = strings(&["trace", "traces/example/tiny.toml", "--topology", fabric]);
    a.extend(strings(extra));
    a.extend(["-o".into(), s(&out.join("t.csv"))]);
    a
}

#[test]
fn trace_csv_plain() {
    run(&Target {
        name: "trace",
        files: &["t.csv"],
        args: |d, _, out| {
            let t = s(&d.join("t.csv"));
            strings(&["replay", &t, "--rate-model", "ideal", "-o", &s(out)])
        },
        cases: 40,
        regressions: &[],
        limit: CASE_LIMIT,
    });
}

#[test]
fn trace_csv_gzip_and_inspect() {
    run(&Target {
        name: "trace-gz",
        files: &["t.csv.gz"],
        args: |d, _, _| strings(&["inspect", &s(&d.join("t.csv.gz")), "--json"]),
        cases: 30,
        regressions: &[],
        limit: CASE_LIMIT,
    });
}

#[test]
fn topology_files() {
    run(&Target {
        name: "topology",
        files: &["topology.txt"],
        args: |d, _, out| trace_tiny(&s(&d.join("topology.txt")), out, &[]),
        cases: 40,
        regressions: &[],
        limit: CASE_LIMIT,
    });
}

#[test]
fn megatron_logs_and_launch_scripts() {
    run(&Target {
        name: "megatron",
        files: &["megatron.log", "launch.sh", "keyvalue.log"],
        // the whole trace: log timers become compute times through the calibration
        args: |_, f, out| {
            let mut a = strings(&["trace", &s(f), "--topology", FABRIC]);
            a.extend(["-o".into(), s(&out.join("t.csv"))]);
            a
        },
        cases: 40,
        regressions: &[],
        limit: CASE_LIMIT,
    });
}

#[test]
fn job_toml_to_trace() {
    run(&Target {
        name: "job",
        files: &["job.toml"],
        args: |d, _, out| {
            let mut a = strings(&["trace", &s(&d.join("job.toml")), "--topology", FABRIC]);
            a.extend(["-o".into(), s(&out.join("t.csv"))]);
            a
        },
        cases: 30,
        regressions: &[],
        limit: CASE_LIMIT,
    });
}

#[test]
fn cluster_spec() {
    run(&Target {
        name: "cluster",
        files: &["cluster.toml"],
        args: |d, _, out| strings(&["cluster", &s(&d.join("cluster.toml")), "-o", &s(out)]),
        cases: 16,
        regressions: &[],
        // a file whose `policies` line is cut runs all five, the planner's among them: a
        // minute on a debug build
        limit: Duration::from_secs(180),
    });
}

#[test]
fn sweep_grid_and_filter() {
    run(&Target {
        name: "sweep",
        files: &["grid.toml"],
        args: |d, _, out| {
            let g = s(&d.join("grid.toml"));
            strings(&["sweep", &g, "-o", &s(out), "--dry-run"])
        },
        cases: 40,
        regressions: &[],
        limit: CASE_LIMIT,
    });
}

#[test]
fn plan_json() {
    run(&Target {
        name: "plan",
        files: &["plan.json"],
        args: |d, _, out| {
            let p = s(&d.join("plan.json"));
            trace_tiny(FABRIC, out, &["--plan", &p])
        },
        cases: 30,
        regressions: &[],
        limit: CASE_LIMIT,
    });
}

#[test]
fn ns3_outputs_read_by_ingest() {
    const FILES: [&str; 5] = [
        "fct.txt",
        "pfc.txt",
        "qlen.txt",
        "EndToEnd.csv",
        "summary.csv",
    ];
    run(&Target {
        name: "ingest",
        files: &FILES,
        args: |d, _, out| {
            let mut a = strings(&["ns3", "ingest"]);
            a.extend(FILES.iter().map(|f| s(&d.join(f))));
            a.extend(["-o".into(), s(out)]);
            a
        },
        cases: 40,
        regressions: &[],
        limit: CASE_LIMIT,
    });
}

#[test]
fn glue_trace_and_params_reemitted() {
    run(&Target {
        name: "glue",
        files: &["trace.txt", "params.txt"],
        args: |d, _, out| {
            let t = s(&d.join("trace.txt"));
            let topo = s(&d.join("topology.txt"));
            strings(&["ns3", "emit", &t, "--topology", &topo, "-o", &s(out)])
        },
        cases: 30,
        // a record id given twice, a dependency on no record, an INA payload of
        // u64::MAX and of 2^32: refused by the emit without naming the file (now at
        // file:line:field by the readers)
        regressions: &[91, 99, 132, 248, 299],
        limit: CASE_LIMIT,
    });
}

/// `compare` reads its tables with polars (the `tables` feature, on in `make test`).
/// Not yet run against a build with polars (none could be made in the session that wrote
/// it): run it with `--run-ignored all`, fix what it finds, then drop the `ignore`.
#[cfg(feature = "tables")]
#[test]
#[ignore = "not yet checked against a polars build"]
fn replay_and_ns3_outputs_read_by_compare() {
    run(&Target {
        name: "compare",
        files: &[
            "replay/fct.csv",
            "replay/summary.csv",
            "replay/links.csv",
            "ns3/fct.csv",
            "ns3/summary.csv",
            "ns3/switches.csv",
        ],
        args: |d, _, out| {
            strings(&[
                "compare",
                "--replay",
                &s(&d.join("replay")),
                "--ns3",
                &s(&d.join("ns3")),
                "-o",
                &s(out),
            ])
        },
        cases: 30,
        regressions: &[],
        limit: CASE_LIMIT,
    });
}

#[test]
fn replay_fct_csv_as_emit_starts() {
    run(&Target {
        name: "starts",
        files: &["fct.csv"],
        args: |d, _, out| {
            let t = s(&d.join("t.csv"));
            let f = s(&d.join("fct.csv"));
            strings(&["ns3", "emit", &t, "--starts", &f, "-o", &s(out)])
        },
        cases: 20,
        regressions: &[],
        limit: CASE_LIMIT,
    });
}

/// A reader the command line does not reach (AICB workloads and Chakra traces are
/// written, and read back only by the library): the same mutations in process, each read
/// returning a workload or an error naming the file, never a panic.
fn run_in_process(name: &'static str, file: &str, read: fn(&Path) -> Result<(), String>) {
    let n = cases(40);
    let t0 = Instant::now();
    let mut failures = Vec::new();
    let mut refused = 0;
    let valid = std::fs::read(corpus(name).join(file)).unwrap();
    for case in 0..n {
        let mut rng = Rng::new(name, case);
        let lines = valid.iter().filter(|b| **b == b'\n').count();
        let m = Mutation::draw(&mut rng, case, valid.len(), lines);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(file);
        std::fs::write(&p, m.apply(&valid)).unwrap();
        let r = std::panic::catch_unwind(|| read(&p));
        let why = match r {
            Err(_) => Some("panic".to_string()),
            Ok(Err(_)) if m.must_pass() => Some("the corpus file refused".to_string()),
            Ok(Err(e)) if !e.contains(file) => Some(format!("error names no file: {e}")),
            Ok(Err(_)) => {
                refused += 1;
                None
            }
            Ok(_) => None,
        };
        if let Some(why) = why {
            failures.push(format!("  case {case} ({m:?}): {why}"));
        }
    }
    report(name, &failures, n, refused, t0.elapsed().as_secs_f64());
}

#[test]
fn aicb_workload_in_process() {
    run_in_process("aicb", "workload.txt", |p| {
        ina3d::formats::aicb::read(p)
            .map(|_| ())
            .map_err(|e| e.to_string())
    });
}

#[test]
fn chakra_trace_in_process() {
    run_in_process("chakra", "workload.0.et", |p| {
        ina3d::formats::chakra::read(p)
            .map(|_| ())
            .map_err(|e| e.to_string())
    });
}
