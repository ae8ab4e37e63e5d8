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
        let r = ina3d::pipeline::replay_file(&p, None, None, false, RateModel::Ideal);
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

    /// An fct.txt row whose end (start + fct) passes 2^64 ns is not a row: a warning
    /// names its line, and the rows around it still read.
    #[test]
    fn an_fct_row_ending_past_64_bits_is_a_warned_line(start in crafted(), fct in crafted()) {
        let ok = "0b000001 0b000101 10000 100 1024 5 7 3";
        let text = format!("{ok}\n0b000001 0b000101 10001 100 1024 {start} {fct} 3\n{ok}\n");
        let (rows, warnings) = hpcc_fct::parse(Path::new("fct.txt"), &text);
        if start.checked_add(fct).is_some() {
            prop_assert_eq!(rows.len(), 3);
        } else {
            prop_assert_eq!(rows.len(), 2);
            prop_assert!(warnings[0].to_string().contains("fct.txt:2") && warnings[0].to_string().contains("fct_ns"));
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
    let e = ina3d::pipeline::replay_file(&p, None, None, false, RateModel::Ideal).unwrap_err();
    let e = ina3d::pipeline::error_chain(&e);
    assert!(e.contains("record 1") && e.contains("2^62 ns"), "{e}");
}
