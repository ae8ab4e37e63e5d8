//! `replay --timeline` and `run --timeline`: the file read as a trace viewer reads it
//! (Chrome trace-event JSON), and its content against counts derived by hand from the job
//! and against the replay's own summary (computed by another code path, `fct::summarize`).
//!
//! The job is `traces/example/tiny.toml`: TP 2 · PP 2 · DP 2, 4 layers (2 per stage),
//! m = 8 / (1 · 2) = 4 micro-batches, no sequence parallelism; on a fat-tree with 2-GPU
//! servers TP stays on NVLink and PP and DP cross the network.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

const TINY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/traces/example/tiny.toml");
const TOPO: &str = "fat-tree:k=4,gpus-per-server=2";

/// Micro-batches, layers per stage, stages of the tiny job.
const M: usize = 4;
const LAYERS_PER_STAGE: usize = 2;

/// `ina3d replay --from tiny.toml` with `extra` flags into `dir`: its exit status and stderr.
fn replay(dir: &Path, extra: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ina3d"))
        .args([
            "replay",
            "--from",
            TINY,
            "--topology",
            TOPO,
            "--ina",
            "hierarchical",
        ])
        .arg("-o")
        .arg(dir.join("out"))
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Microseconds as written (three decimals) back to nanoseconds.
fn ns(v: &Value) -> u64 {
    let x = v.as_f64().expect("a number");
    assert!(x >= 0.0, "negative time {x}");
    (x * 1000.0).round() as u64
}

/// One column of the one-row `summary.csv`, read with a plain split.
fn summary(dir: &Path, column: &str) -> u64 {
    let text = std::fs::read_to_string(dir.join("out/summary.csv")).unwrap();
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    let k = head.iter().position(|h| *h == column).unwrap();
    row[k].parse().unwrap()
}

/// A complete event: (start ns, end ns, name, category).
type Span = (u64, u64, String, String);

/// What a viewer builds: the spans of each (pid, tid), in file order, after checking
/// every event's fields for its phase; and the thread names.
struct Parsed {
    threads: BTreeMap<(u64, u64), Vec<Span>>,
    thread_names: BTreeMap<(u64, u64), String>,
    counters: usize,
}

fn parse(v: &Value) -> Parsed {
    assert!(v["displayTimeUnit"].is_string());
    let events = v["traceEvents"]
        .as_array()
        .expect("traceEvents is an array");
    let mut threads: BTreeMap<(u64, u64), Vec<Span>> = BTreeMap::new();
    let mut thread_names = BTreeMap::new();
    let mut process_names = BTreeSet::new();
    let mut counter_pids = BTreeSet::new();
    let mut counters = 0;
    for e in events {
        let ph = e["ph"].as_str().expect("ph");
        let pid = e["pid"].as_u64().expect("integer pid");
        assert!(e["name"].is_string(), "{e}");
        match ph {
            "X" => {
                let tid = e["tid"].as_u64().expect("integer tid");
                let (t, d) = (ns(&e["ts"]), ns(&e["dur"]));
                assert!(e["args"].is_object() && e["cat"].is_string(), "{e}");
                threads.entry((pid, tid)).or_default().push((
                    t,
                    t + d,
                    e["name"].as_str().unwrap().to_string(),
                    e["cat"].as_str().unwrap().to_string(),
                ));
            }
            "C" => {
                ns(&e["ts"]);
                let args = e["args"].as_object().expect("counter args");
                assert!(
                    !args.is_empty() && args.values().all(Value::is_number),
                    "{e}"
                );
                counter_pids.insert(pid);
                counters += 1;
            }
            "M" => match e["name"].as_str().unwrap() {
                "process_name" => {
                    process_names.insert(pid);
                    assert!(e["args"]["name"].is_string());
                }
                "thread_name" => {
                    let tid = e["tid"].as_u64().expect("integer tid");
                    thread_names
                        .insert((pid, tid), e["args"]["name"].as_str().unwrap().to_string());
                }
                "process_sort_index" | "thread_sort_index" => {
                    assert!(e["args"]["sort_index"].is_u64(), "{e}")
                }
                other => panic!("unexpected metadata {other}"),
            },
            other => panic!("unexpected phase {other}"),
        }
    }
    for (pid, tid) in threads.keys() {
        assert!(process_names.contains(pid), "process {pid} has no name");
        assert!(
            thread_names.contains_key(&(*pid, *tid)),
            "thread {pid}/{tid} has no name"
        );
    }
    for pid in &counter_pids {
        assert!(
            process_names.contains(pid),
            "counter process {pid} has no name"
        );
    }
    Parsed {
        threads,
        thread_names,
        counters,
    }
}

/// Spans of one thread: in time order, and nested (each span inside the one it starts
/// in, or after it), as a viewer stacks complete events.
fn assert_nested(key: (u64, u64), spans: &[Span]) {
    let mut stack: Vec<(u64, u64)> = Vec::new();
    let mut last = 0;
    for (s, e, name, _) in spans {
        assert!(
            *s >= last,
            "thread {key:?}: `{name}` at {s} ns after a span at {last} ns"
        );
        last = *s;
        while stack.last().is_some_and(|&(_, pe)| pe <= *s) {
            stack.pop();
        }
        if let Some(&(ps, pe)) = stack.last() {
            assert!(
                *e <= pe,
                "thread {key:?}: `{name}` [{s}, {e}) overlaps [{ps}, {pe}) without nesting"
            );
        }
        stack.push((*s, *e));
    }
}

/// The rank a thread belongs to, from its name `rank R (…) compute|comm…`.
fn rank_of(name: &str) -> u32 {
    name.strip_prefix("rank ")
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn every_rank_s_timeline_matches_the_schedule_and_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.json");
    let (ok, err) = replay(
        dir.path(),
        &[
            "--timeline",
            file.to_str().unwrap(),
            "--timeline-ranks",
            "all",
        ],
    );
    assert!(ok, "{err}");
    let p = parse(&read_json(&file));
    for (k, spans) in &p.threads {
        assert_nested(*k, spans);
    }
    assert!(p.counters > 0, "INA slots and link utilisation tracks");
    // per rank: TP collectives, PP sends, compute time, last end
    let mut tp = BTreeMap::<u32, usize>::new();
    let mut pp = BTreeMap::<u32, usize>::new();
    let mut compute = BTreeMap::<u32, u64>::new();
    let mut last_end = 0;
    for (k, spans) in &p.threads {
        let name = &p.thread_names[k];
        let r = rank_of(name);
        for (s, e, n, cat) in spans {
            last_end = last_end.max(*e);
            if name.contains(" compute") {
                *compute.entry(r).or_default() += e - s;
            } else if cat == "tp" {
                *tp.entry(r).or_default() += 1;
            } else if cat == "pp" {
                assert!(n.starts_with("pp send"), "{n}");
                *pp.entry(r).or_default() += 1;
            }
        }
    }
    assert_eq!(tp.len(), 8, "every rank has TP collectives: {tp:?}");
    for (r, n) in &tp {
        // Megatron's TP all-reduces, no sequence parallelism: per micro-batch and layer
        // two forward (attention and MLP outputs) and two backward (their inputs); stage 0
        // adds the vocab-parallel embedding's forward all-reduce, the last stage the
        // cross-entropy's three (max, target logit, sum of exponentials) and the output
        // layer's backward all-reduce
        let stage = r / 4;
        let per_mb = 4 * LAYERS_PER_STAGE + if stage == 0 { 1 } else { 3 + 1 };
        assert_eq!(*n, M * per_mb, "rank {r}: TP collectives");
    }
    // 1F1B: stage 0 sends each micro-batch's activations forward, stage 1 each one's
    // gradients back; each TP rank sends its own
    assert_eq!(pp.len(), 8, "{pp:?}");
    assert!(pp.values().all(|&n| n == M), "{pp:?}");
    // the replay's summary: iteration time and the busiest GPU's compute
    assert_eq!(last_end, summary(dir.path(), "iteration_time_ns"));
    assert_eq!(
        compute.values().copied().max().unwrap(),
        summary(dir.path(), "compute_ns")
    );
}

#[test]
fn by_default_the_representative_ranks_have_tracks_and_the_file_is_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    for f in [&a, &b] {
        let (ok, err) = replay(dir.path(), &["--timeline", f.to_str().unwrap()]);
        assert!(ok, "{err}");
    }
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    let p = parse(&read_json(&a));
    let ranks: BTreeSet<u32> = p.thread_names.values().map(|n| rank_of(n)).collect();
    // rank = tp + 2·(dp + 2·pp): the stage-1 leader 4 and rank 0's DP peer 2
    assert_eq!(ranks, BTreeSet::from([0, 2, 4]));
    // stages are processes 1 and 2, named so; rank 4 is on stage 1
    for ((pid, _), name) in &p.thread_names {
        assert_eq!(*pid, if rank_of(name) == 4 { 2 } else { 1 }, "{name}");
    }
}

#[test]
fn the_timeline_leaves_the_replay_s_files_unchanged() {
    let with = tempfile::tempdir().unwrap();
    let without = tempfile::tempdir().unwrap();
    let file = with.path().join("t.json");
    assert!(replay(with.path(), &["--timeline", file.to_str().unwrap()]).0);
    assert!(replay(without.path(), &[]).0);
    for f in ["fct.csv", "fct.txt", "links.csv", "switches.csv"] {
        let read = |d: &Path| std::fs::read(d.join("out").join(f)).unwrap();
        assert_eq!(read(with.path()), read(without.path()), "{f}");
    }
    assert!(!without.path().join("t.json").exists());
}

#[test]
fn a_cap_truncates_with_a_warning_or_refuses_and_bad_ranks_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.json");
    let f = file.to_str().unwrap();
    // rank 4 alone: its records fit in 150 events, its spans and counters do not
    let (ok, err) = replay(
        dir.path(),
        &[
            "--timeline",
            f,
            "--timeline-ranks",
            "4",
            "--timeline-max-events",
            "150",
        ],
    );
    assert!(ok, "{err}");
    assert!(
        err.contains("timeline truncated") && err.contains("dropped"),
        "{err}"
    );
    let v = read_json(&file);
    let timed = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] != "M")
        .count();
    assert!(
        timed > 0 && timed <= 150,
        "{timed} spans and counter samples"
    );
    // every rank's records are more than 50: refused before the replay
    let (ok, err) = replay(
        dir.path(),
        &[
            "--timeline",
            f,
            "--timeline-ranks",
            "all",
            "--timeline-max-events",
            "50",
        ],
    );
    assert!(!ok && err.contains("more than 50 records"), "{err}");
    let (ok, err) = replay(dir.path(), &["--timeline", f, "--timeline-ranks", "0,9"]);
    assert!(
        !ok && err.contains("--timeline-ranks: rank 9 is not in the job (8 ranks)"),
        "{err}"
    );
    let (ok, err) = replay(dir.path(), &["--timeline-ranks", "0"]);
    assert!(!ok && err.contains("--timeline"), "{err}");
}

#[test]
fn run_writes_one_timeline_per_policy() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ina3d"))
        .args([
            "run",
            TINY,
            "--topology",
            TOPO,
            "--policies",
            "ring,ina-dp",
            "--no-ns3",
            "--timeline",
        ])
        .arg("-o")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for p in ["ring", "ina-dp"] {
        let v = read_json(&dir.path().join(p).join("timeline.json"));
        let parsed = parse(&v);
        for (k, spans) in &parsed.threads {
            assert_nested(*k, spans);
        }
        // the representative ranks need not hold the record that ends last
        let end = parsed
            .threads
            .values()
            .flatten()
            .map(|s| s.1)
            .max()
            .unwrap();
        let text = std::fs::read_to_string(dir.path().join(p).join("replay/summary.csv")).unwrap();
        let mut lines = text.lines();
        let k = lines
            .next()
            .unwrap()
            .split(',')
            .position(|h| h == "iteration_time_ns")
            .unwrap();
        let it: u64 = lines
            .next()
            .unwrap()
            .split(',')
            .nth(k)
            .unwrap()
            .parse()
            .unwrap();
        assert!(end > 0 && end <= it, "{p}: {end} > {it}");
        // DP gradients aggregate in the switches under ina-dp only
        let ina = parsed
            .threads
            .values()
            .flatten()
            .filter(|s| s.3 == "dp" && s.2.contains(" ina up to node "))
            .count();
        assert_eq!(ina > 0, p == "ina-dp", "{p}: {ina} INA up edges");
    }
}

#[test]
fn a_trace_file_gives_the_timeline_the_generator_gives_and_one_without_a_layout_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.csv");
    let st = Command::new(env!("CARGO_BIN_EXE_ina3d"))
        .args([
            "trace",
            TINY,
            "--topology",
            TOPO,
            "--ina",
            "hierarchical",
            "-o",
        ])
        .arg(&trace)
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let from_file = dir.path().join("file.json");
    let st = Command::new(env!("CARGO_BIN_EXE_ina3d"))
        .arg("replay")
        .arg(&trace)
        .arg("-o")
        .arg(dir.path().join("out-file"))
        .arg("--timeline")
        .arg(&from_file)
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let generated = dir.path().join("gen.json");
    let (ok, err) = replay(dir.path(), &["--timeline", generated.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert_eq!(
        std::fs::read(&from_file).unwrap(),
        std::fs::read(&generated).unwrap()
    );
    // the same trace without its `tp` line: no layout to place ranks on stages
    let text = std::fs::read_to_string(&trace).unwrap();
    let cut: String = text
        .lines()
        .filter(|l| !l.starts_with("# tp="))
        .map(|l| format!("{l}\n"))
        .collect();
    let bare = dir.path().join("bare.csv");
    std::fs::write(&bare, cut).unwrap();
    let st = Command::new(env!("CARGO_BIN_EXE_ina3d"))
        .arg("replay")
        .arg(&bare)
        .arg("-o")
        .arg(dir.path().join("out-bare"))
        .arg("--timeline")
        .arg(dir.path().join("bare.json"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&st.stderr);
    assert_eq!(st.status.code(), Some(2), "{err}");
    assert!(err.contains("the trace header's `tp` is missing"), "{err}");
    assert!(!dir.path().join("bare.json").exists());
}

#[test]
fn a_link_track_carries_the_bytes_links_csv_counts_for_that_link() {
    // no INA: every transfer is a host flow of 1,000 B packets with 48 B of headers each,
    // so a link's wire bytes in links.csv are its payload × 1.048 (up to each transfer's
    // last, partial packet)
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.json");
    let st = Command::new(env!("CARGO_BIN_EXE_ina3d"))
        .args(["replay", "--from", TINY, "--topology", TOPO, "-o"])
        .arg(dir.path().join("out"))
        .arg("--timeline")
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let v = read_json(&file);
    // per track: (time, utilisation) samples, each holding until the next
    let mut tracks: BTreeMap<String, Vec<(u64, f64)>> = BTreeMap::new();
    for e in v["traceEvents"].as_array().unwrap() {
        let name = e["name"].as_str().unwrap();
        if e["ph"] == "C" && name.starts_with("link ") {
            tracks
                .entry(name.to_string())
                .or_default()
                .push((ns(&e["ts"]), e["args"]["utilisation"].as_f64().unwrap()));
        }
    }
    assert_eq!(tracks.len(), 8, "the eight busiest link directions");
    let links = std::fs::read_to_string(dir.path().join("out/links.csv")).unwrap();
    let mut wire_of = BTreeMap::new();
    for row in links.lines().skip(1) {
        let f: Vec<&str> = row.split(',').collect();
        // link,from,to,rate_bps,bytes,utilisation
        let key = format!("link {} node {} to {} utilisation", f[0], f[1], f[2]);
        let rate: f64 = f[3].parse().unwrap();
        let bytes: f64 = f[4].parse().unwrap();
        wire_of.insert(key, (rate, bytes));
    }
    let mut busiest: Vec<f64> = wire_of.values().map(|v| v.1).collect();
    busiest.sort_by(|a, b| b.partial_cmp(a).unwrap());
    for (name, samples) in &tracks {
        let (rate, wire) = wire_of[name];
        assert!(wire >= busiest[7], "{name} is not among the eight busiest");
        let bits: f64 = samples
            .windows(2)
            .map(|w| w[0].1 * rate / 1e9 * (w[1].0 - w[0].0) as f64)
            .sum();
        let payload = bits / 8.0;
        let err = (payload * 1.048 - wire).abs() / wire;
        assert!(
            err < 0.01,
            "{name}: {payload} B payload against {wire} B on the wire"
        );
        assert_eq!(samples.last().unwrap().1, 0.0, "{name} ends idle");
    }
}
