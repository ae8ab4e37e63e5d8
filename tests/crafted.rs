//! Crafted values at every reading edge (issue 24): not random bytes, but the numbers that
//! overflow, wrap or stall — 0, 2^32, 2^50 ± 1, 2^62, u64::MAX, NaN — placed in the fields
//! that flow into a time or a size, and the shapes that exhaust a parser (duplicate keys,
//! deep nesting, long lists). Each input is either refused with exit-2 material (an error
//! naming file, line and field) or accepted and then simulated without a wrapped number:
//! an accepted time shows up in the iteration, never a shorter one. proptest's case budget
//! (`PROPTEST_CASES`, default 256) bounds the run in CI.

use ina3d::formats::trace_csv::{self, TraceHeader, MAX_RECORD_VALUE};
use ina3d::formats::{hpcc_fct, topology_txt};
use ina3d::record::{Class, FlowRecord, Mode};
use ina3d::replay::RateModel;
use ina3d::units::{Bytes, FlowId, Nanos, NodeId, LINK_RATES, MAX_LINK_DELAY};
use proptest::prelude::*;
use std::path::Path;

/// Values that have wrapped, truncated or overflowed somewhere before.
const CRAFTED: [u64; 12] = [
    0,
    1,
    u32::MAX as u64,
    1 << 32,
    (1 << 50) - 1,
    1 << 50,
    (1 << 50) + 1,
    1 << 53,
    1 << 62,
    1 << 63,
    u64::MAX - 1,
    u64::MAX,
];

fn crafted() -> impl Strategy<Value = u64> {
    proptest::sample::select(&CRAFTED[..])
}

/// compute on host 0 → 1 MiB from host 0 to host 1 → compute on host 1.
fn chain() -> Vec<FlowRecord> {
    let compute = |id: u64, node: u32, deps: Vec<FlowId>| FlowRecord {
        id: FlowId(id),
        src: NodeId(node),
        dst: NodeId(node),
        deps,
        dur: Nanos(1000),
        mode: Mode::Compute,
        class: Class::Compute,
        ..Default::default()
    };
    vec![
        compute(0, 0, vec![]),
        FlowRecord {
            id: FlowId(1),
            src: NodeId(0),
            dst: NodeId(1),
            bytes: Bytes(1 << 20),
            deps: vec![FlowId(0)],
            mode: Mode::Net,
            class: Class::Dp,
            ..Default::default()
        },
        compute(2, 1, vec![FlowId(1)]),
    ]
}

/// The field a crafted value goes into: (record, column, its 1-based line in the file).
const FIELDS: [(usize, &str); 4] = [(0, "dur_ns"), (1, "bytes"), (1, "gap_ns"), (2, "gap_ns")];

fn write_trace(dir: &Path, recs: &[FlowRecord]) -> std::path::PathBuf {
    let p = dir.join("t.csv");
    let mut h = TraceHeader::new();
    h.set("topology", "fat-tree:k=4");
    h.set("seed", 0);
    trace_csv::write(&p, &h, recs).unwrap();
    p
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// A size or time beyond 2^50 is refused where it is written (file:line:column:
    /// field); one within is simulated, and the iteration is at least that long.
    #[test]
    fn a_crafted_size_or_time_is_refused_by_name_or_fully_simulated(v in crafted(), k in 0usize..4) {
        let (rec, field) = FIELDS[k];
        let mut recs = chain();
        match field {
            "dur_ns" => recs[rec].dur = Nanos(v),
            "bytes" => recs[rec].bytes = Bytes(v),
            _ => recs[rec].gap = Nanos(v),
        }
        let dir = tempfile::tempdir().unwrap();
        let p = write_trace(dir.path(), &recs);
        let text = std::fs::read_to_string(&p).unwrap();
        let line = text.lines().position(|l| l.starts_with(&format!("{rec},"))).unwrap() + 1;
        let r = ina3d::pipeline::replay_file(&p, &ideal());
        if v > MAX_RECORD_VALUE {
            let e = ina3d::pipeline::error_chain(&r.expect_err("refused"));
            prop_assert!(e.contains(&format!("t.csv:{line}:")) && e.contains(field), "{e}");
        } else {
            let it = r.map_err(|e| ina3d::pipeline::error_chain(&e)).unwrap().result.summary.iteration_time_ns;
            // a byte takes 80 ps at 100 Gb/s: the transfer alone is bytes × 0.08 ns
            let floor = if field == "bytes" { v / 13 } else { v };
            prop_assert!(it >= floor, "{field} = {v}: iteration {it} ns");
        }
    }

    /// A metadata key given twice, or a size key out of its range, is refused naming the
    /// line; nothing falls back to a default.
    #[test]
    fn crafted_header_keys_are_refused_by_line(v in crafted(), twice in any::<bool>()) {
        let dir = tempfile::tempdir().unwrap();
        let p = write_trace(dir.path(), &chain());
        let text = std::fs::read_to_string(&p).unwrap();
        let extra = if twice { "# seed=7\n".to_string() } else { format!("# world={v}\n") };
        let crafted = text.replacen('\n', &format!("\n{extra}"), 1);
        std::fs::write(&p, &crafted).unwrap();
        let r = trace_csv::read(&p);
        if twice {
            let e = r.unwrap_err().to_string();
            prop_assert!(e.contains("`seed` given twice (first on line 2)"), "{e}");
        } else if v == 0 || v > u32::MAX as u64 {
            let e = r.unwrap_err().to_string();
            prop_assert!(e.contains("t.csv:2:") && e.contains("world"), "{e}");
        } else {
            let t = r.unwrap();
            let want = v.to_string();
            prop_assert_eq!(t.header.get("world"), Some(want.as_str()));
        }
    }

    /// Link rates outside 1 Mb/s – 1 Pb/s and delays over 1 s are refused naming the line
    /// and the field, in a topology file and in a builder spec alike.
    #[test]
    fn crafted_link_rates_and_delays_are_refused_by_line(rate in crafted(), delay in crafted()) {
        let delay = delay.min(u64::MAX / 1000); // written in ns; the reader parses f64
        let text = format!("3 1 2\n2\n0 2 {rate}bps {delay}ns 0\n1 2 100Gbps 1000ns 0\n");
        let r = topology_txt::parse(Path::new("topo.txt"), &text);
        let rate_ok = LINK_RATES.contains(&rate);
        let delay_ok = delay <= MAX_LINK_DELAY.0;
        match r {
            Ok((t, _)) => {
                prop_assert!(rate_ok && delay_ok, "rate {rate}, delay {delay} accepted");
                prop_assert_eq!(t.links[0].delay, Nanos(delay));
            }
            Err(e) => {
                let e = e.to_string();
                prop_assert!(!(rate_ok && delay_ok), "{e}");
                let field = if rate_ok { "delay" } else { "rate" };
                prop_assert!(e.contains("topo.txt:3") && e.contains(field), "{e}");
            }
        }
        let spec = format!("fat-tree:k=4,nic={rate}bps,latency={delay}ns");
        let b = ina3d::topology::Topology::from_spec(&spec);
        prop_assert_eq!(b.is_ok(), rate_ok && delay_ok, "{}", spec);
    }

    /// An fct.txt row whose start or fct passes 2^50 ns (so also one whose end passes 2^64
    /// ns) is not a row: a warning names its line and field, and the rows around it still
    /// read.
    #[test]
    fn an_fct_row_ending_past_64_bits_is_a_warned_line(start in crafted(), fct in crafted()) {
        let ok = "0b000001 0b000101 10000 100 1024 5 7 3";
        let text = format!("{ok}\n0b000001 0b000101 10001 100 1024 {start} {fct} 3\n{ok}\n");
        let (rows, warnings) = hpcc_fct::parse(Path::new("fct.txt"), &text);
        // a time past the trace's record bound (2^50) is no flow's either (issue 37 item 5)
        let bound = MAX_RECORD_VALUE;
        if start <= bound && fct <= bound {
            prop_assert_eq!(rows.len(), 3);
        } else {
            prop_assert_eq!(rows.len(), 2);
            let w = warnings[0].to_string();
            let field = if start > bound { "start_ns" } else { "fct_ns" };
            prop_assert!(w.contains("fct.txt:2") && w.contains(field), "{}", w);
        }
    }

    /// Filters nested by parentheses, `not` and minus, to any depth: parsed or refused,
    /// never a stack overflow; past 32 levels always refused.
    #[test]
    fn a_filter_nested_to_any_depth_is_parsed_or_refused(kinds in proptest::collection::vec(0u8..3, 0..200)) {
        let mut src = String::new();
        for k in &kinds {
            src.push_str(["(", "not ", "- "][*k as usize]);
        }
        src.push_str("tp");
        for k in kinds.iter().rev() {
            if *k == 0 {
                src.push(')');
            }
        }
        let r = ina3d::sweep::filter::Filter::parse(&src);
        if kinds.len() > ina3d::sweep::filter::MAX_DEPTH {
            prop_assert!(r.is_err(), "{src}");
        }
    }
}

/// Grid values that cannot run stop the grid before any cell does, naming file:line.
#[test]
fn grid_values_that_cannot_run_are_refused_by_line() {
    for bad in ["nan", "inf", "-inf", "-0.5", "0.0", "1.0000001", "1e308"] {
        let text = format!(
            "[base]\ninput = \"{}/traces/example/tiny.toml\"\nns3 = \"off\"\n[axes]\nmfu = [0.45, {bad}]\n",
            env!("CARGO_MANIFEST_DIR")
        );
        let e = ina3d::sweep::Grid::parse(Path::new("g.toml"), &text)
            .and_then(|g| g.expand())
            .unwrap_err()
            .to_string();
        assert!(e.contains("g.toml:5:") && e.contains("MFU"), "{bad}: {e}");
    }
}

/// A `seeds` list of 10^5 is checked in linear time (a quadratic check took over a
/// minute for 10^6), and a repeat is named however far down the list it is.
#[test]
fn a_long_seed_list_is_checked_in_one_pass_and_a_repeat_named() {
    let many: Vec<String> = (0..100_000u64).map(|s| s.to_string()).collect();
    let seeds = ina3d::pipeline::parse_seeds(&many.join(",")).unwrap();
    assert_eq!(seeds.len(), 100_000);
    let repeated = format!("{},99999", many.join(","));
    assert_eq!(
        ina3d::pipeline::parse_seeds(&repeated),
        Err("seed 99999 is named twice".to_string())
    );
}

/// A record whose times are each within bounds but whose sum passes the replayer's horizon
/// (2^50 bytes on 1 Mb/s links: 2^53 s) stops the replay naming the record, instead of
/// wrapping round to a short iteration.
#[test]
fn times_summing_past_the_horizon_stop_the_replay_naming_the_record() {
    let mut recs = chain();
    recs[1].bytes = Bytes(MAX_RECORD_VALUE);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.csv");
    let mut h = TraceHeader::new();
    h.set("topology", "fat-tree:k=4,nic=1Mbps,fabric=1Mbps");
    h.set("seed", 0);
    trace_csv::write(&p, &h, &recs).unwrap();
    let e = ina3d::pipeline::replay_file(&p, &ideal()).unwrap_err();
    let e = ina3d::pipeline::error_chain(&e);
    assert!(e.contains("record 1") && e.contains("2^62 ns"), "{e}");
}

// ------------------------------------------------ the CLI at its edges (issue 37, item 1)

/// Runs `ina3d ARGS` in the crate root: (exit code, stderr).
fn ina3d(args: &[&str]) -> (Option<i32>, String) {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_ina3d"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `ina3d trace` of the tiny job with `extra` flags, into `dir`: (exit code, stderr).
fn trace_tiny(dir: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let out = dir.join("t.csv");
    let mut args = vec![
        "trace",
        "traces/example/tiny.toml",
        "--topology",
        // two GPUs per server: TP runs over NVLink, so its step latency is used
        "leaf-spine:leaves=2,spines=2,hosts-per-leaf=4,gpus-per-server=2",
        "-o",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    ina3d(&args)
}

/// Each flag value that wrapped, became infinite or was accepted out of range is refused
/// with exit 2, naming the flag and the range; the bounds themselves are accepted.
#[test]
fn flags_out_of_range_are_refused_naming_the_flag_and_the_range() {
    let d = tempfile::tempdir().unwrap();
    let refused: [(&[&str], &[&str]); 9] = [
        (
            &["--nvlink-step-latency", "18446744073709551615"],
            &["--nvlink-step-latency", "[0, 1000000000] ns"],
        ),
        (
            &["--calibration-factor", "1e20"],
            &["--calibration-factor", "1e20", "(0, 1000]"],
        ),
        (
            &["--calibration-factor", "NaN"],
            &["--calibration-factor", "(0, 1000]"],
        ),
        (
            &["--calibration-factor=-1"],
            &["--calibration-factor", "(0, 1000]"],
        ),
        (&["--mfu", "0"], &["--mfu", "(0, 1]"]),
        // a positive MFU so small that compute would take 10^297 ms
        (&["--mfu", "1e-300"], &["--mfu", "more than a day"]),
        (&["--gpu", "x:1e-300"], &["--gpu", "more than a day"]),
        (
            &["--nccl-channels", "100000"],
            &["--nccl-channels", "[1, 64]"],
        ),
        (
            &["--iterations", "4294967295"],
            &["--iterations", "[1, 1000]"],
        ),
    ];
    for (flags, words) in refused {
        let (code, e) = trace_tiny(d.path(), flags);
        assert_eq!(code, Some(2), "{flags:?}: {e}");
        for w in words {
            assert!(e.contains(w), "{flags:?}: `{w}` not in {e}");
        }
        assert!(!e.contains("panicked"), "{flags:?}: {e}");
    }
    for flags in [
        &["--nvlink-step-latency", "1000000000"][..],
        &["--calibration-factor", "1000"],
        &["--nccl-channels", "64"],
    ] {
        let (code, e) = trace_tiny(d.path(), flags);
        assert_eq!(code, Some(0), "{flags:?}: {e}");
    }
}

/// The example log with its `forward-compute` timer lines' values replaced by `value`.
fn log_with_timer(dir: &Path, value: &str) -> (std::path::PathBuf, usize) {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("traces/example/megatron.log"),
    )
    .unwrap();
    let mut first = None;
    let lines: Vec<String> = text
        .lines()
        .enumerate()
        .map(|(i, l)| match l.split_once("forward-compute ") {
            Some((head, rest)) if rest.starts_with('.') => {
                first.get_or_insert(i + 1);
                let dots = rest.split_once(':').unwrap().0;
                format!("{head}forward-compute {dots}: {value}")
            }
            _ => l.to_string(),
        })
        .collect();
    let p = dir.join("m.log");
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    (
        p,
        first.expect("the example log has forward-compute timers"),
    )
}

/// A Megatron timer of inf, NaN, 10^308 or below zero made the calibration infinite (and
/// gaps u64::MAX) or silently disabled it: refused at its file:line, naming the timer and
/// the range. A timer in range that calibrates compute 10^7× slower than the model is
/// refused too, naming the factor and its range.
#[test]
fn log_timers_out_of_range_are_refused_at_their_line() {
    let d = tempfile::tempdir().unwrap();
    for v in [
        "(inf, inf)",
        "(nan, nan)",
        "(1e308, 1e308)",
        "(-5.0, -5.0)",
        "inf",
    ] {
        let (log, line) = log_with_timer(d.path(), v);
        let out = d.path().join("t.csv");
        let (code, e) = ina3d(&[
            "trace",
            log.to_str().unwrap(),
            "--topology",
            "fat-tree:k=4,gpus-per-server=2",
            "-o",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, Some(2), "{v}: {e}");
        assert!(
            e.contains(&format!("m.log:{line}:")) && e.contains("timer forward-compute"),
            "{v}: {e}"
        );
        assert!(e.contains("[0, 1e9]") && e.contains(v), "{v}: {e}");
    }
    let (log, _) = log_with_timer(d.path(), "(900000000, 900000000)");
    let out = d.path().join("t.csv");
    let (code, e) = ina3d(&[
        "trace",
        log.to_str().unwrap(),
        "--topology",
        "fat-tree:k=4,gpus-per-server=2",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2), "{e}");
    assert!(
        e.contains("calibration factor") && e.contains("(0, 1000]") && e.contains("timers"),
        "{e}"
    );
}

/// An iteration time of 10^308 ms is refused at its line.
#[test]
fn an_absurd_iteration_time_is_refused_at_its_line() {
    let d = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("traces/example/megatron.log"),
    )
    .unwrap();
    let (n, line) = text
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains("elapsed time per iteration (ms): "))
        .unwrap();
    let (head, rest) = line
        .split_once("elapsed time per iteration (ms): ")
        .unwrap();
    let tail = rest.split_once(' ').unwrap().1;
    let bad = format!("{head}elapsed time per iteration (ms): 1e308 {tail}");
    let log = d.path().join("m.log");
    std::fs::write(&log, text.replacen(line, &bad, 1)).unwrap();
    let (code, e) = ina3d(&["parse", log.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{e}");
    assert!(
        e.contains(&format!("m.log:{}:", n + 1)) && e.contains("elapsed time per iteration"),
        "{e}"
    );
    assert!(e.contains("1e308") && e.contains("[0, 1e9]"), "{e}");
}

/// A cluster job starting at 2^50 + 1 ns ran into a merged trace its own reader refuses:
/// now refused at the field's file:line, with the range.
#[test]
fn a_cluster_job_starting_past_a_day_is_refused_at_its_field() {
    let d = tempfile::tempdir().unwrap();
    let spec = d.path().join("c.toml");
    let tiny = Path::new(env!("CARGO_MANIFEST_DIR")).join("traces/example/tiny.toml");
    std::fs::write(
        &spec,
        format!(
            "policies = [\"ring\"]\n[[job]]\nname = \"a\"\ninput = \"{0}\"\n[[job]]\nname = \"b\"\ninput = \"{0}\"\nstart-ns = {1}\n",
            tiny.display(),
            (1u64 << 50) + 1
        ),
    )
    .unwrap();
    let out = d.path().join("out");
    let (code, e) = ina3d(&[
        "cluster",
        spec.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2), "{e}");
    assert!(
        e.contains("c.toml:8:") && e.contains("b.start-ns") && e.contains("[0, 86400000000000]"),
        "{e}"
    );
}

/// Integers past i64 in a grid filter were read as inexact decimals (so `2^63 > 2^63 − 1`
/// was false), and decimal arithmetic overflowed to infinity silently: both are refused,
/// naming the filter's place.
#[test]
fn a_filter_number_past_its_type_is_refused_naming_its_place() {
    let d = tempfile::tempdir().unwrap();
    for (filter, words) in [
        (
            "9223372036854775808 > 9223372036854775807",
            &["g.toml:1:11", "9223372036854775808 is out of range"][..],
        ),
        ("1e308 * 1e308 > 0", &["g.toml:1:", "overflows"][..]),
    ] {
        let grid = d.path().join("g.toml");
        std::fs::write(
            &grid,
            format!(
                "filter = '{filter}'\n[base]\ninput = '{}/traces/example/tiny.toml'\n[axes]\nhidden-size = [512, 1024]\n",
                env!("CARGO_MANIFEST_DIR")
            ),
        )
        .unwrap();
        let out = d.path().join("sw");
        let (code, e) = ina3d(&[
            "sweep",
            grid.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--dry-run",
        ]);
        assert_eq!(code, Some(2), "{filter}: {e}");
        for w in words {
            assert!(e.contains(w), "{filter}: `{w}` not in {e}");
        }
    }
}

// -------------------------------- resources estimated before they are spent (item 2)

/// Topology specs whose host count is within the cap but whose nodes or links are not
/// (`bcube:n=2,k=21`: 2^22 hosts, 92 M links, aborted allocating 5 GB) are refused
/// before anything is allocated, naming the key and both caps; the host cap alone is
/// no longer the only bound.
#[test]
fn topologies_past_the_node_or_link_cap_are_refused_before_allocating() {
    let d = tempfile::tempdir().unwrap();
    for (spec, key, numbers) in [
        ("bcube:n=2,k=21", "k:", "50331648 nodes and 92274688 links"),
        (
            "leaf-spine:leaves=4194304,spines=4194304,hosts-per-leaf=1,gpus-per-server=1",
            "spines:",
            "17592194433024 links",
        ),
        (
            "jellyfish:switches=4000000,ports=3000000,hosts-per-switch=1",
            "ports:",
            "6000002000000 links",
        ),
        (
            "topoopt:servers=4000000,degree=3999998",
            "degree:",
            "7999996000000 links",
        ),
    ] {
        let t0 = std::time::Instant::now();
        let out = d.path().join("t.csv");
        let (code, e) = ina3d(&[
            "trace",
            "traces/example/tiny.toml",
            "--topology",
            spec,
            "-o",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, Some(2), "{spec}: {e}");
        assert!(e.contains(key) && e.contains(numbers), "{spec}: {e}");
        assert!(
            e.contains("16777216 nodes and 33554432 links supported"),
            "{spec}: {e}"
        );
        // refused from the spec's numbers, not after building
        assert!(t0.elapsed().as_secs() < 30, "{spec}: {:?}", t0.elapsed());
    }
}

/// A topology file whose header declares 3 nodes but whose link names node 16777215 built
/// a 16 M-node topology with a warning: refused at the id's line and field.
#[test]
fn a_topology_file_id_past_its_declared_count_is_refused_at_its_line() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("topo.txt");
    std::fs::write(
        &p,
        "3 1 2\n2\n0 2 100Gbps 0.001ms 0\n1 16777215 100Gbps 0.001ms 0\n",
    )
    .unwrap();
    let e = topology_txt::read_file(&p).unwrap_err().to_string();
    assert!(
        e.contains("topo.txt:4: dst") && e.contains("beyond the 3 node(s) the header declares"),
        "{e}"
    );
    let out = d.path().join("t.csv");
    let (code, e) = ina3d(&[
        "trace",
        "traces/example/tiny.toml",
        "--topology",
        p.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2), "{e}");
    assert!(
        e.contains("topo.txt:4: dst") && e.contains("16777215"),
        "{e}"
    );
    // the same file with ids inside its count still reads
    std::fs::write(
        &p,
        "3 1 2\n2\n0 2 100Gbps 0.001ms 0\n1 2 100Gbps 0.001ms 0\n",
    )
    .unwrap();
    let (f, warnings) = topology_txt::read_file(&p).unwrap();
    assert_eq!((f.nodes, f.links.len(), warnings.len()), (3, 2, 0));
}

/// `export chakra` of GPT-3 175B at DP 16384 holds 6.3 M nodes (4.5 GiB): under a 1 GiB
/// address-space limit (`ulimit -v`) it aborted out of memory; now it is refused up front,
/// with the estimate, the limit and where the limit came from (RLIMIT_AS, which the
/// budget used to ignore) — and `INA3D_MEMORY_LIMIT` is the override it names.
#[test]
fn a_chakra_export_over_the_address_space_limit_is_refused_with_its_estimate() {
    use std::os::unix::process::CommandExt;
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("ch");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_ina3d"));
    cmd.args(["export", "chakra", "gpt3-175b", "--dp", "16384"])
        .args(["--set", "global_batch_size=16384", "-o"])
        .arg(&out)
        .env_remove("INA3D_MEMORY_LIMIT");
    // SAFETY: setrlimit is async-signal-safe and only changes the child's own limit.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 1 << 30,
                rlim_max: 1 << 30,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let o = cmd.output().unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("6340608 nodes over 16384 ranks") && e.contains("RLIMIT_AS"),
        "{e}"
    );
    assert!(e.contains("INA3D_MEMORY_LIMIT sets another"), "{e}");
    assert!(!out.join("workload.0.et").exists(), "nothing written");
}

/// The file options of these tests: the ideal model, everything else from the header.
fn ideal() -> ina3d::pipeline::FileOptions<'static> {
    ina3d::pipeline::FileOptions {
        model: RateModel::Ideal,
        ..Default::default()
    }
}
