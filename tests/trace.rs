//! Trace file format: lossless round trip, validation errors naming file:line:column.

use ina3d::trace::{self, AggDir, AggTag, Class, FlowRecord, Mode, TraceError, TraceHeader};
use ina3d::units::{Bytes, FlowId, Nanos, NodeId};
use proptest::prelude::*;

fn header() -> TraceHeader {
    let mut h = TraceHeader::new();
    h.set("topology", "fat-tree:k=4").set("seed", 7).set("ina", "off");
    h
}

fn net(id: u64, src: u32, dst: u32, bytes: u64, deps: &[u64]) -> FlowRecord {
    FlowRecord {
        id: FlowId(id),
        src: NodeId(src),
        dst: NodeId(dst),
        bytes: Bytes(bytes),
        deps: deps.iter().map(|&d| FlowId(d)).collect(),
        gap: Nanos(0),
        dur: Nanos(0),
        mode: Mode::Net,
        class: Class::Dp,
        iteration: 0,
        collective: None,
        step: None,
        microbatch: None,
        layer: None,
        stage: None,
        group_size: None,
        agg: None,
    }
}

/// Records that satisfy every invariant: ids increasing, deps on earlier ids, fields per mode.
fn arb_records() -> impl Strategy<Value = Vec<FlowRecord>> {
    prop::collection::vec(
        (
            (0u8..4, 0u32..50, 0u32..50, any::<u64>(), prop::collection::vec(any::<prop::sample::Index>(), 0..4)),
            any::<u64>(),
            any::<u64>(),
            0u8..4,
            any::<u32>(),
            prop::option::of(any::<u64>()),
            prop::option::of(any::<u32>()),
            prop::option::of(any::<u32>()),
            (prop::option::of(any::<u32>()), prop::option::of(any::<u32>()), prop::option::of(any::<u32>()), any::<u64>(), 1u32..64, any::<bool>()),
        ),
        0..40,
    )
    .prop_map(|rows| {
        let mut out: Vec<FlowRecord> = Vec::new();
        let mut next_id = 0u64;
        for ((m, a, b, bytes, deps), gap, dur, cls, it, coll, step, mb, (layer, stage, gs, aid, fanin, up)) in rows {
            next_id += 1 + (bytes % 3);
            let mode = [Mode::Net, Mode::Ina, Mode::NvLink, Mode::Compute][m as usize];
            let dst = if a == b { b + 1 } else { b };
            let mut deps: Vec<FlowId> = if out.is_empty() { vec![] } else { deps.iter().map(|i| out[i.index(out.len())].id).collect() };
            deps.dedup();
            let class = if mode == Mode::Compute { Class::Compute } else { Class::TRAFFIC[cls as usize] };
            let agg = (mode == Mode::Ina).then(|| AggTag { id: aid, switch: NodeId(if up { dst } else { a }), fanin, dir: if up { AggDir::Up } else { AggDir::Down } });
            out.push(FlowRecord {
                id: FlowId(next_id),
                src: NodeId(a),
                dst: NodeId(if mode == Mode::Compute { a } else { dst }),
                bytes: Bytes(if mode == Mode::Compute { 0 } else { bytes }),
                deps,
                gap: Nanos(gap),
                dur: Nanos(if matches!(mode, Mode::Net | Mode::Ina) { 0 } else { dur }),
                mode,
                class,
                iteration: it,
                collective: coll,
                step,
                microbatch: mb,
                layer,
                stage,
                group_size: gs,
                agg,
            });
        }
        out
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn write_then_read_round_trips_every_field(records in arb_records(), gz in any::<bool>()) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(if gz { "t.csv.gz" } else { "t.csv" });
        trace::write(&path, &header(), &records).unwrap();
        let back = trace::read(&path).unwrap();
        prop_assert_eq!(back.header, header());
        prop_assert_eq!(back.records, records);
    }

    #[test]
    fn arbitrary_text_never_panics_the_reader(text in "(# ina3d-trace schema=1\n)?(# [a-z]{1,5}=[a-z0-9]{0,5}\n){0,2}(id,src,dst,bytes,deps,gap_ns,dur_ns,mode,class,iteration,collective,step,microbatch,layer,stage,group_size,agg_id,agg_switch,agg_fanin,agg_dir\n)?([0-9a-z;,]{0,60}\n){0,5}") {
        let _ = trace::read_str(&text, "fuzz.csv");
    }
}

#[test]
fn gz_files_are_gzip_and_plain_files_are_text() {
    let dir = tempfile::tempdir().unwrap();
    let recs = vec![net(0, 1, 2, 100, &[]), net(1, 2, 1, 100, &[0])];
    trace::write(dir.path().join("a.csv.gz"), &header(), &recs).unwrap();
    trace::write(dir.path().join("a.csv"), &header(), &recs).unwrap();
    let gz = std::fs::read(dir.path().join("a.csv.gz")).unwrap();
    assert_eq!(&gz[..2], &[0x1f, 0x8b]);
    let txt = std::fs::read_to_string(dir.path().join("a.csv")).unwrap();
    assert!(txt.starts_with("# ina3d-trace schema=1\n# ina=off\n# seed=7\n# topology=fat-tree:k=4\nid,src,dst,"));
    assert!(txt.contains("\n1,2,1,100,0,0,0,net,dp,0,,,,,,,,,,\n"), "{txt}");
    assert!(!dir.path().join("a.csv.tmp").exists());
}

fn expect_invalid(text: &str) -> (u64, usize, String) {
    match trace::read_str(text, "bad.csv") {
        Err(TraceError::Invalid { line, column, msg, path }) => {
            assert_eq!(path, "bad.csv");
            (line, column, msg)
        }
        other => panic!("expected a validation error, got {other:?}"),
    }
}

const HEAD: &str = "# ina3d-trace schema=1\nid,src,dst,bytes,deps,gap_ns,dur_ns,mode,class,iteration,collective,step,microbatch,layer,stage,group_size,agg_id,agg_switch,agg_fanin,agg_dir\n";

#[test]
fn a_dep_on_a_later_or_missing_record_is_rejected_with_its_position() {
    let text = format!("{HEAD}0,1,2,10,,0,0,net,dp,0,,,,,,,,,,\n1,1,2,10,0;5,0,0,net,dp,0,,,,,,,,,,\n");
    let (line, col, msg) = expect_invalid(&text);
    assert_eq!(line, 4);
    assert_eq!(col, 12, "the second dep starts at column 12");
    assert!(msg.contains("dep 5"), "{msg}");
}

#[test]
fn duplicate_ids_are_rejected() {
    let text = format!("{HEAD}0,1,2,10,,0,0,net,dp,0,,,,,,,,,,\n0,1,2,10,,0,0,net,dp,0,,,,,,,,,,\n");
    let (line, col, msg) = expect_invalid(&text);
    assert_eq!((line, col), (4, 1));
    assert!(msg.contains("duplicate"), "{msg}");
}

#[test]
fn a_cycle_cannot_be_written_down_because_deps_must_precede() {
    // 0 -> 1 -> 0: the first line already names a dep it has not seen.
    let text = format!("{HEAD}0,1,2,10,1,0,0,net,dp,0,,,,,,,,,,\n1,1,2,10,0,0,0,net,dp,0,,,,,,,,,,\n");
    let (line, _, msg) = expect_invalid(&text);
    assert_eq!(line, 3);
    assert!(msg.contains("does not appear on an earlier line"), "{msg}");
}

#[test]
fn mode_and_field_mismatches_name_the_column() {
    let (_, col, msg) = expect_invalid(&format!("{HEAD}0,1,2,0,,0,5,compute,compute,0,,,,,,,,,,\n"));
    assert_eq!(col, 5, "dst starts at character 5: {msg}");
    let (_, _, msg) = expect_invalid(&format!("{HEAD}0,1,2,8,,0,0,ina,dp,0,,,,,,,,,,\n"));
    assert!(msg.contains("agg_id"), "{msg}");
    let (_, col, msg) = expect_invalid(&format!("{HEAD}0,1,2,8,,0,0,warp,dp,0,,,,,,,,,,\n"));
    assert_eq!(col, 14);
    assert!(msg.contains("unknown mode"), "{msg}");
    let (_, _, msg) = expect_invalid(&format!("{HEAD}0,1,2,8,,0,0,net,dp,0\n"));
    assert!(msg.contains("10 fields"), "{msg}");
}

#[test]
fn wrong_magic_or_schema_is_refused() {
    assert!(matches!(trace::read_str("id,src\n", "x"), Err(TraceError::Invalid { line: 1, .. })));
    let e = trace::read_str("# ina3d-trace schema=9\n", "x").unwrap_err().to_string();
    assert!(e.contains("schema 9"), "{e}");
}

#[test]
fn metadata_with_newlines_is_refused_on_write() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = header();
    h.set("model", "a\nb");
    assert!(matches!(trace::write(dir.path().join("x.csv"), &h, &[]), Err(TraceError::Metadata { .. })));
    assert!(!dir.path().join("x.csv").exists());
}
