//! Trace file format: lossless round trip, validation errors naming file:line:column.

use ina3d::formats::FormatError;
use ina3d::record::{AggDir, AggGroup, AggTag, Class, FlowRecord, Mode};
use ina3d::trace::{self, TraceHeader};
use ina3d::units::{Bytes, FlowId, Nanos, NodeId};
use proptest::prelude::*;

fn header() -> TraceHeader {
    let mut h = TraceHeader::new();
    h.set("topology", "fat-tree:k=4")
        .set("seed", 7)
        .set("ina", "off");
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
        ..Default::default()
    }
}

/// Records that satisfy every invariant: ids increasing, deps on earlier ids, fields per mode.
fn arb_records() -> impl Strategy<Value = Vec<FlowRecord>> {
    prop::collection::vec(
        (
            (
                0u8..4,
                0u32..50,
                0u32..50,
                // sizes and times up to the format's bound (refused beyond: tests/crafted.rs)
                0u64..=ina3d::formats::trace_csv::MAX_RECORD_VALUE,
                prop::collection::vec(any::<prop::sample::Index>(), 0..4),
            ),
            0u64..=ina3d::formats::trace_csv::MAX_RECORD_VALUE,
            0u64..=ina3d::formats::trace_csv::MAX_RECORD_VALUE,
            0u8..6,
            any::<u32>(),
            prop::option::of(any::<u64>()),
            prop::option::of(any::<u32>()),
            prop::option::of(any::<u32>()),
            (
                prop::option::of(any::<u32>()),
                prop::option::of(any::<u32>()),
                prop::option::of(any::<u32>()),
                any::<u64>(),
                1u32..64,
                any::<bool>(),
            ),
        ),
        0..40,
    )
    .prop_map(|rows| {
        let mut out: Vec<FlowRecord> = Vec::new();
        let mut next_id = 0u64;
        for (
            (m, a, b, bytes, deps),
            gap,
            dur,
            cls,
            it,
            coll,
            step,
            mb,
            (layer, stage, gs, aid, fanin, up),
        ) in rows
        {
            next_id += 1 + (bytes % 3);
            let mode = [Mode::Net, Mode::Ina, Mode::NvLink, Mode::Compute][m as usize];
            let dst = if a == b { b + 1 } else { b };
            let mut deps: Vec<FlowId> = if out.is_empty() {
                vec![]
            } else {
                deps.iter().map(|i| out[i.index(out.len())].id).collect()
            };
            deps.dedup();
            let class = if mode == Mode::Compute {
                Class::Compute
            } else {
                Class::TRAFFIC[cls as usize]
            };
            let agg = (mode == Mode::Ina).then_some(AggTag {
                id: aid,
                switch: NodeId(if up { dst } else { a }),
                fanin,
                dir: if up { AggDir::Up } else { AggDir::Down },
                group: if aid % 2 == 1 {
                    AggGroup::Expert
                } else {
                    AggGroup::Dense
                },
            });
            out.push(FlowRecord {
                id: FlowId(next_id),
                src: NodeId(a),
                dst: NodeId(if mode == Mode::Compute { a } else { dst }),
                bytes: Bytes(if mode == Mode::Compute { 0 } else { bytes }),
                deps,
                gap: Nanos(gap),
                dur: Nanos(if matches!(mode, Mode::Net | Mode::Ina) {
                    0
                } else {
                    dur
                }),
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
                // Only net records travel on channels; reuse a field for variety.
                channel: if mode == Mode::Net {
                    (bytes % 5) as u32
                } else {
                    0
                },
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
    // the header promises the end line (`end_marker`, sorted among the keys)
    assert!(txt.starts_with(
        "# ina3d-trace schema=3\n# end_marker=records\n# ina=off\n# seed=7\n# topology=fat-tree:k=4\nid,src,dst,"
    ));
    assert!(txt.ends_with("\n# end records=2\n"), "{txt}");
    assert!(
        txt.contains("\n1,2,1,100,0,0,0,net,dp,0,,,,,,,,,,,,\n"),
        "{txt}"
    );
    assert!(!dir.path().join("a.csv.tmp").exists());
}

fn expect_invalid(text: &str) -> (u64, u64, String) {
    match trace::read_str(text, "bad.csv") {
        Err(FormatError::Syntax {
            line,
            column: Some(column),
            msg,
            path,
            ..
        }) => {
            assert_eq!(path, std::path::Path::new("bad.csv"));
            (line, column, msg)
        }
        other => panic!("expected a validation error, got {other:?}"),
    }
}

const HEAD: &str = "# ina3d-trace schema=1\nid,src,dst,bytes,deps,gap_ns,dur_ns,mode,class,iteration,collective,step,microbatch,layer,stage,group_size,agg_id,agg_switch,agg_fanin,agg_dir\n";

#[test]
fn a_dep_on_a_later_or_missing_record_is_rejected_with_its_position() {
    let text =
        format!("{HEAD}0,1,2,10,,0,0,net,dp,0,,,,,,,,,,\n1,1,2,10,0;5,0,0,net,dp,0,,,,,,,,,,\n");
    let (line, col, msg) = expect_invalid(&text);
    assert_eq!(line, 4);
    assert_eq!(col, 12, "the second dep starts at column 12");
    assert!(msg.contains("dep 5"), "{msg}");
}

#[test]
fn duplicate_ids_are_rejected() {
    let text =
        format!("{HEAD}0,1,2,10,,0,0,net,dp,0,,,,,,,,,,\n0,1,2,10,,0,0,net,dp,0,,,,,,,,,,\n");
    let (line, col, msg) = expect_invalid(&text);
    assert_eq!((line, col), (4, 1));
    assert!(msg.contains("duplicate"), "{msg}");
}

#[test]
fn a_cycle_cannot_be_written_down_because_deps_must_precede() {
    // 0 -> 1 -> 0: the first line already names a dep it has not seen.
    let text =
        format!("{HEAD}0,1,2,10,1,0,0,net,dp,0,,,,,,,,,,\n1,1,2,10,0,0,0,net,dp,0,,,,,,,,,,\n");
    let (line, _, msg) = expect_invalid(&text);
    assert_eq!(line, 3);
    assert!(msg.contains("does not appear on an earlier line"), "{msg}");
}

#[test]
fn mode_and_field_mismatches_name_the_column() {
    let (_, col, msg) =
        expect_invalid(&format!("{HEAD}0,1,2,0,,0,5,compute,compute,0,,,,,,,,,,\n"));
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
fn an_aggregations_group_is_written_read_back_and_dense_in_files_of_older_schemas() {
    let cols2 = "id,src,dst,bytes,deps,gap_ns,dur_ns,mode,class,iteration,collective,step,microbatch,layer,stage,group_size,agg_id,agg_switch,agg_fanin,agg_dir,channel";
    let up = "0,1,9,8,,0,0,ina,dp,0,,,,,,,4,9,2,up,";
    // schema 2 has no agg_group: every aggregation is dense
    let t = trace::read_str(
        &format!("# ina3d-trace schema=2\n{cols2}\n{up}\n"),
        "old.csv",
    )
    .unwrap();
    assert_eq!(t.records[0].agg.unwrap().group, AggGroup::Dense);
    // schema 3 names it, and a written expert aggregation reads back as one
    let head3 = format!("# ina3d-trace schema=3\n{cols2},agg_group\n");
    let t = trace::read_str(&format!("{head3}{up},expert\n"), "new.csv").unwrap();
    assert_eq!(t.records[0].agg.unwrap().group, AggGroup::Expert);
    let dir = tempfile::tempdir().unwrap();
    trace::write(dir.path().join("t.csv"), &t.header, &t.records).unwrap();
    let text = std::fs::read_to_string(dir.path().join("t.csv")).unwrap();
    // the record as written, then the end line counting it
    assert!(
        text.ends_with("\n0,1,9,8,,0,0,ina,dp,0,,,,,,,4,9,2,up,,expert\n# end records=1\n"),
        "{text}"
    );
    // an unknown group, a missing one and one without an aggregation name the column
    for (row, want) in [
        (format!("{up},sparse"), "`dense` or `expert`"),
        (format!("{up},"), "`dense` or `expert`"),
        (
            "0,1,9,8,,0,0,net,dp,0,,,,,,,,,,,,expert".to_string(),
            "agg_id",
        ),
    ] {
        let e = trace::read_str(&format!("{head3}{row}\n"), "bad.csv").unwrap_err();
        let FormatError::Syntax {
            line,
            column: Some(column),
            msg,
            ..
        } = &e
        else {
            panic!("{e:?}")
        };
        assert_eq!(*line, 3, "{e}");
        assert!(msg.contains(want), "{row}: {msg}");
        assert_eq!(
            *column,
            (row.rfind(',').unwrap() + 2) as u64,
            "{row}: agg_group's column"
        );
        assert!(e.to_string().contains("agg_group"), "{e}");
    }
}

#[test]
fn wrong_magic_or_schema_is_refused() {
    assert!(matches!(
        trace::read_str("id,src\n", "x"),
        Err(FormatError::Syntax { line: 1, .. })
    ));
    let e = trace::read_str("# ina3d-trace schema=9\n", "x")
        .unwrap_err()
        .to_string();
    assert!(e.contains("schema 9"), "{e}");
}

#[test]
fn metadata_with_newlines_is_refused_on_write() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = header();
    h.set("model", "a\nb");
    assert!(matches!(
        trace::write(dir.path().join("x.csv"), &h, &[]),
        Err(FormatError::File { .. })
    ));
    assert!(!dir.path().join("x.csv").exists());
}

// ---------------------------------------------------------------- generation

pub mod gen {
    use ina3d::megatron::{self, TrainingConfig};
    use ina3d::record::{Class, FlowRecord, Mode};
    use ina3d::schedule::{self, ScheduleOptions};
    use ina3d::topology::Topology;
    use ina3d::trace::{self, Algorithm, InaMode, TraceOptions};
    use ina3d::units::Bytes;
    use std::collections::BTreeMap;

    /// A small GPT (4 layers, h=1024, 16 heads, s=512) with the given parallel sizes.
    pub fn small(tp: u32, pp: u32, dp: u32, gb: u64) -> TrainingConfig {
        let mut c = megatron::preset("gpt3-13b").unwrap();
        for (k, v) in [
            ("num_layers", "4"),
            ("hidden_size", "1024"),
            ("num_attention_heads", "16"),
            ("seq_length", "512"),
        ] {
            c.set(k, v).unwrap();
        }
        c.set("tensor_model_parallel_size", &tp.to_string())
            .unwrap();
        c.set("pipeline_model_parallel_size", &pp.to_string())
            .unwrap();
        c.set("data_parallel_size", &dp.to_string()).unwrap();
        c.set("global_batch_size", &gb.to_string()).unwrap();
        c
    }

    pub fn collect(cfg: &TrainingConfig, topo: &Topology, opts: &TraceOptions) -> Vec<FlowRecord> {
        let mut out = Vec::new();
        trace::generate(cfg, topo, opts, &mut |r| {
            out.push(r);
            Ok(())
        })
        .unwrap();
        out
    }

    #[test]
    fn scatter_gather_sends_one_tp_share_between_stages_and_all_gathers_it_on_arrival() {
        // TP2·PP2·DP1, global batch 4 (m = 4), on 2-GPU NVLink servers: each boundary
        // crossing is a p2p per TP rank, stage 0 → 1 forward and 1 → 0 backward.
        let topo = Topology::from_spec("fat-tree:k=4,gpus-per-server=2").unwrap();
        let opts = TraceOptions::default();
        let whole = 512 * 1024 * 2; // s·b·h, bf16
        let mut c = small(2, 2, 1, 4);
        let pp = |recs: &[FlowRecord]| -> Vec<u64> {
            recs.iter()
                .filter(|r| r.class == Class::Pp && r.mode != Mode::Compute)
                .map(|r| r.bytes.0)
                .collect()
        };
        let tp_nvlink = |recs: &[FlowRecord]| -> usize {
            recs.iter()
                .filter(|r| r.class == Class::Tp && r.mode == Mode::NvLink)
                .count()
        };
        let plain = collect(&c, &topo, &opts);
        // 4 micro-batches × 2 directions × 2 TP ranks, each the whole activation
        assert_eq!(pp(&plain), vec![whole; 16]);
        c.set("scatter_gather_tensors_in_pipeline", "True").unwrap();
        let sg = collect(&c, &topo, &opts);
        assert_eq!(pp(&sg), vec![whole / 2; 16]);
        // every received activation and gradient (4 + 4) is all-gathered once by the
        // receiving TP pair, inside its server
        let added = tp_nvlink(&sg) - tp_nvlink(&plain);
        assert_eq!(added % 8, 0);
        assert!(added > 0);
        let wl = schedule::build(&c, &opts.schedule).unwrap();
        let h = trace::header(&c, &wl, &topo, &opts);
        assert_eq!(h.get("pp_scatter_gather"), Some("true"));
    }

    /// Network bytes (net + ina) sent and received per node for one class.
    fn per_node(recs: &[FlowRecord], class: Class) -> (BTreeMap<u32, u64>, BTreeMap<u32, u64>) {
        let (mut tx, mut rx) = (BTreeMap::new(), BTreeMap::new());
        for r in recs
            .iter()
            .filter(|r| r.class == class && matches!(r.mode, Mode::Net | Mode::Ina))
        {
            *tx.entry(r.src.0).or_default() += r.bytes.0;
            *rx.entry(r.dst.0).or_default() += r.bytes.0;
        }
        (tx, rx)
    }

    fn dp_bucket(cfg: &TrainingConfig) -> Bytes {
        let wl = schedule::build(cfg, &ScheduleOptions::default()).unwrap();
        assert_eq!(wl.stages[0].buckets.len(), 1);
        wl.stages[0].buckets[0].grad_bytes
    }

    #[test]
    fn ring_allreduce_sends_2s_n_minus_1_over_n_per_rank() {
        let topo = Topology::from_spec("fat-tree:k=4,nvlink=off").unwrap();
        let cfg = small(1, 1, 8, 8);
        let s = dp_bucket(&cfg).0;
        assert_eq!(
            s % 8,
            0,
            "bucket divisible by n so the closed form is exact"
        );
        for algo in [Algorithm::Ring, Algorithm::Hd] {
            let recs = collect(
                &cfg,
                &topo,
                &TraceOptions {
                    collective: algo,
                    ..Default::default()
                },
            );
            let (tx, rx) = per_node(&recs, Class::Dp);
            assert_eq!(tx.len(), 8);
            for (node, sent) in &tx {
                assert_eq!(*sent, 2 * s * 7 / 8, "{algo:?} node {node}");
                assert_eq!(rx[node], *sent, "bytes sent = bytes received");
            }
        }
    }

    #[test]
    fn ina_sends_s_up_and_s_down_per_worker() {
        let topo = Topology::from_spec("fat-tree:k=4,nvlink=off").unwrap();
        let cfg = small(1, 1, 8, 8);
        let s = dp_bucket(&cfg).0;
        for mode in [InaMode::SwitchMl, InaMode::Hierarchical, InaMode::Atp] {
            let mut opts = TraceOptions::default();
            opts.ina.mode = mode;
            opts.ina.switches = "all".parse().unwrap();
            let recs = collect(&cfg, &topo, &opts);
            let gpus: Vec<u32> = topo.gpus[..8].iter().map(|n| n.0).collect();
            for g in &gpus {
                let up: u64 = recs
                    .iter()
                    .filter(|r| r.mode == Mode::Ina && r.src.0 == *g)
                    .map(|r| r.bytes.0)
                    .sum();
                let down: u64 = recs
                    .iter()
                    .filter(|r| r.mode == Mode::Ina && r.dst.0 == *g)
                    .map(|r| r.bytes.0)
                    .sum();
                assert_eq!((up, down), (s, s), "{mode:?} worker {g}");
            }
            // one aggregation id per collective, up and down edges share it
            let ids: std::collections::BTreeSet<u64> =
                recs.iter().filter_map(|r| r.agg.map(|a| a.id)).collect();
            assert_eq!(ids.len(), 1, "{mode:?}");
            assert!(
                recs.iter()
                    .all(|r| r.mode != Mode::Net || r.class != Class::Dp),
                "no host ring left for dp"
            );
        }
    }

    #[test]
    fn rina_turns_full_racks_into_one_ring_worker() {
        // 16 hosts, 2 per ToR: DP=8 over ranks 0..8 → 4 racks, each an abstracted worker.
        let topo = Topology::from_spec("fat-tree:k=4,nvlink=off").unwrap();
        let cfg = small(1, 1, 8, 8);
        let s = dp_bucket(&cfg).0;
        let mut opts = TraceOptions::default();
        opts.ina.mode = InaMode::Rina;
        opts.ina.switches = "tor".parse().unwrap();
        let recs = collect(&cfg, &topo, &opts);
        let ring: Vec<&FlowRecord> = recs
            .iter()
            .filter(|r| r.mode == Mode::Net && r.class == Class::Dp)
            .collect();
        assert_eq!(ring.len(), 4 * 2 * 3, "4 workers × 2(n−1) steps");
        assert!(ring
            .iter()
            .all(|r| topo.kinds[r.src.idx()] == ina3d::topology::NodeKind::Switch));
        for g in &topo.gpus[..8] {
            let up: u64 = recs
                .iter()
                .filter(|r| r.mode == Mode::Ina && r.src == *g)
                .map(|r| r.bytes.0)
                .sum();
            let down: u64 = recs
                .iter()
                .filter(|r| r.mode == Mode::Ina && r.dst == *g)
                .map(|r| r.bytes.0)
                .sum();
            assert_eq!((up, down), (s, s));
        }
    }

    #[test]
    fn tp_inside_a_server_is_one_nvlink_record_per_collective() {
        let topo = Topology::from_spec("fat-tree:k=4").unwrap();
        let cfg = small(8, 2, 1, 4); // m = 4
        let recs = collect(&cfg, &topo, &TraceOptions::default());
        let tp: Vec<&FlowRecord> = recs.iter().filter(|r| r.class == Class::Tp).collect();
        assert!(tp
            .iter()
            .all(|r| r.mode == Mode::NvLink && r.group_size == Some(8)));
        let s_act = Bytes(512 * 1024 * 2); // b·s·h in bf16
        let (act, ce): (Vec<&&FlowRecord>, Vec<&&FlowRecord>) =
            tp.iter().partition(|r| r.bytes == s_act);
        // Per micro-batch: 2 stages × 2 layers × (2 fwd + 2 bwd all-reduces), the embedding's
        // forward all-reduce (stage 0) and the LM head's input-gradient all-reduce (stage 1).
        assert_eq!(act.len(), 4 * (2 * 2 * 4 + 2));
        // The vocabulary-parallel cross-entropy: 3 all-reduces of b·s fp32 values.
        assert_eq!(ce.len(), 4 * 3);
        assert!(ce.iter().all(|r| r.bytes == Bytes(512 * 4)));
        // dur = 2(n−1)/n · S / 2400 Gbps + 2(n−1) · 3.4 µs (NCCL's ring step on NVLink)
        let expect = (2.0 * 7.0 / 8.0 * (512.0 * 1024.0 * 2.0) * 8.0 / 2400e9 * 1e9_f64).ceil()
            as u64
            + 14 * 3400;
        assert_eq!(act[0].dur.0, expect);
        // PP p2p: 8 TP ranks × 2 directions × 1 boundary × 4 micro-batches, full activation
        let pp: Vec<&FlowRecord> = recs.iter().filter(|r| r.class == Class::Pp).collect();
        assert_eq!(pp.len(), 8 * 2 * 4);
        assert!(pp
            .iter()
            .all(|r| r.mode == Mode::Net && r.bytes == Bytes(512 * 1024 * 2)));
    }

    #[test]
    fn every_generated_trace_is_a_valid_dag_on_its_topology() {
        let topo = Topology::from_spec("fat-tree:k=4").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut cases = Vec::new();
        for (tp, pp, dp) in [(2, 2, 4), (4, 4, 1), (1, 2, 8)] {
            for algo in [
                Algorithm::Ring,
                Algorithm::Dbt,
                Algorithm::Hd,
                Algorithm::Hierarchical,
            ] {
                for ina in [
                    InaMode::Off,
                    InaMode::SwitchMl,
                    InaMode::Hierarchical,
                    InaMode::Rina,
                ] {
                    cases.push((tp, pp, dp, algo, ina));
                }
            }
        }
        for (i, (tp, pp, dp, algo, ina)) in cases.into_iter().enumerate() {
            let mut cfg = small(tp, pp, dp, 8 * dp as u64);
            cfg.sequence_parallel = i % 2 == 0;
            cfg.overlap_grad_reduce = i % 3 == 0;
            cfg.use_distributed_optimizer = i % 5 == 0;
            if pp == 4 {
                cfg.set("num_layers", "8").unwrap();
                cfg.virtual_pipeline_model_parallel_size = Some(2);
            }
            let mut opts = TraceOptions {
                collective: algo,
                iterations: 2,
                ..Default::default()
            };
            opts.ina.mode = ina;
            opts.ina.switches = "all".parse().unwrap();
            let wl = schedule::build(&cfg, &opts.schedule).unwrap();
            let path = dir.path().join(format!("t{i}.csv"));
            let mut w =
                trace::TraceWriter::create(&path, &trace::header(&cfg, &wl, &topo, &opts)).unwrap();
            let stats = trace::generate(&cfg, &topo, &opts, &mut |r| Ok(w.write(&r)?)).unwrap();
            w.finish().unwrap();
            let v = trace::validate(&path, Some(&topo)).unwrap_or_else(|e| panic!("case {i}: {e}"));
            assert_eq!(v.records, stats.records);
            assert!(stats.records > 0);
        }
    }

    #[test]
    fn same_seed_gives_byte_identical_files() {
        let topo = Topology::from_spec("fat-tree:k=4").unwrap();
        let cfg = small(2, 2, 4, 16);
        let dir = tempfile::tempdir().unwrap();
        let mut files = Vec::new();
        for i in 0..2 {
            let mut opts = TraceOptions {
                seed: 42,
                ..Default::default()
            };
            opts.ina.mode = InaMode::Hierarchical;
            opts.ina.switches = "all".parse().unwrap();
            let wl = schedule::build(&cfg, &opts.schedule).unwrap();
            let path = dir.path().join(format!("t{i}.csv.gz"));
            let mut w =
                trace::TraceWriter::create(&path, &trace::header(&cfg, &wl, &topo, &opts)).unwrap();
            trace::generate(&cfg, &topo, &opts, &mut |r| Ok(w.write(&r)?)).unwrap();
            w.finish().unwrap();
            files.push(std::fs::read(&path).unwrap());
        }
        assert!(files[0].len() > 100);
        assert_eq!(files[0], files[1]);
    }

    #[test]
    fn tor_only_ina_falls_back_to_the_host_ring_for_groups_spanning_racks_and_counts_it() {
        let topo = Topology::from_spec("fat-tree:k=4,nvlink=off").unwrap(); // 2 hosts per ToR
        let mut opts = TraceOptions::default();
        opts.ina.mode = InaMode::Hierarchical;
        opts.ina.switches = "tor".parse().unwrap();
        let mut stats = None;
        let mut recs = Vec::new();
        let cfg = small(1, 1, 8, 8);
        stats.replace(
            trace::generate(&cfg, &topo, &opts, &mut |r| {
                recs.push(r);
                Ok(())
            })
            .unwrap(),
        );
        let stats = stats.unwrap();
        assert_eq!(stats.ina_fallbacks, 1);
        assert_eq!(stats.aggregations, 0);
        assert!(recs
            .iter()
            .any(|r| r.class == Class::Dp && r.mode == Mode::Net));
        // DP=2 inside one rack: the ToR aggregates
        let cfg = small(1, 1, 2, 2);
        let recs = collect(&cfg, &topo, &opts);
        assert!(recs.iter().any(|r| r.mode == Mode::Ina));
    }

    #[test]
    fn interleaved_micro_batches_cross_pp_times_v_minus_1_boundaries_each_way() {
        let topo = Topology::from_spec("fat-tree:k=4,nvlink=off").unwrap();
        let mut cfg = small(1, 4, 1, 8); // m = 8
        cfg.set("num_layers", "8").unwrap();
        cfg.virtual_pipeline_model_parallel_size = Some(2);
        let recs = collect(&cfg, &topo, &TraceOptions::default());
        let pp = recs.iter().filter(|r| r.class == Class::Pp).count();
        assert_eq!(pp, 8 * 2 * (4 * 2 - 1));
        // stage 3 → stage 0 carries chunk 0's output into chunk 1
        assert!(recs
            .iter()
            .any(|r| r.class == Class::Pp && r.src == topo.gpus[3] && r.dst == topo.gpus[0]));
    }

    #[test]
    fn hierarchical_all_reduce_rings_shards_between_servers_and_uses_nvlink_inside() {
        // DP=16 over 2 servers of 8: NVLink RS, 8 two-member rings of S/8, NVLink AG.
        let topo = Topology::from_spec("fat-tree:k=4").unwrap();
        let cfg = small(1, 1, 16, 16);
        let s = dp_bucket(&cfg).0;
        assert_eq!(s % 16, 0);
        let recs = collect(
            &cfg,
            &topo,
            &TraceOptions {
                collective: Algorithm::Hierarchical,
                nccl_channels: Some(1),
                ..Default::default()
            },
        );
        let nv: Vec<&FlowRecord> = recs
            .iter()
            .filter(|r| r.class == Class::Dp && r.mode == Mode::NvLink)
            .collect();
        assert_eq!(nv.len(), 4, "RS and AG in each of 2 servers");
        assert!(nv.iter().all(|r| r.group_size == Some(8) && r.bytes.0 == s));
        let (tx, rx) = per_node(&recs, Class::Dp);
        assert_eq!(tx.len(), 16);
        for (n, b) in &tx {
            assert_eq!(
                *b,
                2 * (s / 8) / 2,
                "node {n}: ring of 2 over S/8 sends 2·(S/8)·(1/2)"
            );
            assert_eq!(rx[n], *b);
        }
    }

    #[test]
    fn more_gpus_than_hosts_is_a_clear_error() {
        let topo = Topology::from_spec("fat-tree:k=4").unwrap(); // 16 hosts
        let cfg = small(8, 1, 4, 4);
        let e = trace::generate(&cfg, &topo, &TraceOptions::default(), &mut |_| Ok(()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("32") && e.contains("16"), "{e}");
    }

    #[test]
    fn compute_sits_in_gaps_and_compute_records() {
        let topo = Topology::from_spec("fat-tree:k=4").unwrap();
        let cfg = small(8, 2, 1, 4);
        let wl = schedule::build(&cfg, &ScheduleOptions::default()).unwrap();
        let recs = collect(&cfg, &topo, &TraceOptions::default());
        let compute: u64 = recs
            .iter()
            .map(|r| {
                if r.mode == Mode::Compute {
                    r.dur.0
                } else {
                    r.gap.0
                }
            })
            .sum();
        assert!(compute > 0);
        // Stage 0's forward of micro-batch 0 starts with the embedding's all-reduce (no
        // compute before it); the first layer's first all-reduce waits for its attention.
        let first = &recs[0];
        assert!(first.deps.is_empty() && first.gap.0 == 0 && first.layer.is_none());
        let attn = recs
            .iter()
            .find(|r| r.class == Class::Tp && r.layer == Some(0))
            .unwrap();
        assert_eq!(attn.deps, vec![first.id]);
        assert!(attn.gap.0 > 0);
        let _ = wl;
    }
}

mod cli {
    use std::process::Command;

    fn ina3d() -> Command {
        Command::new(env!("CARGO_BIN_EXE_ina3d"))
    }

    #[test]
    fn trace_then_inspect_reports_groups_warmups_and_calibration() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("t.csv.gz");
        let st = ina3d()
            .args([
                "trace",
                "gpt3-13b",
                "--topology",
                "fat-tree:k=4",
                "--tp",
                "2",
                "--pp",
                "4",
                "--dp",
                "2",
                "--num-layers",
                "8",
                "--hidden-size",
                "1024",
                "--num-attention-heads",
                "16",
                "--seq-length",
                "512",
                "--global-batch-size",
                "16",
                "--sequence-parallel",
                "--ina",
                "atp",
                "--ina-switches",
                "all",
                "--ina-classes",
                "dp,emb",
                "-o",
            ])
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            st.status.success(),
            "{}",
            String::from_utf8_lossy(&st.stderr)
        );
        let js = ina3d()
            .arg("inspect")
            .arg(&out)
            .arg("--json")
            .output()
            .unwrap();
        assert!(
            js.status.success(),
            "{}",
            String::from_utf8_lossy(&js.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&js.stdout).unwrap();
        // m = 16 / (1·2) = 8, PP = 4 → warm-ups 3,2,1,0
        assert_eq!(v["warmup_per_stage"], "3,2,1,0");
        assert_eq!(
            v["groups"]["warmup_recomputed"],
            serde_json::json!([3, 2, 1, 0])
        );
        assert_eq!(v["groups"]["tp"][0], serde_json::json!([0, 1]));
        assert_eq!(v["groups"]["dp"][0], serde_json::json!([0, 2]));
        assert_eq!(v["groups"]["pp"][0], serde_json::json!([0, 4, 8, 12]));
        assert_eq!(
            v["metadata"]["ina_policy"], "best-effort",
            "ATP defaults to best-effort slots"
        );
        assert_eq!(v["metadata"]["sequence_parallel"], "true");
        assert_eq!(v["calibration_source"], "none");
        // DP groups ([0, 2], …) sit inside one 8-GPU server: NVLink, not INA
        assert!(v["by_class_mode"]["dp/nvlink"]["records"].as_u64().unwrap() > 0);
        assert!(v["by_class_mode"].get("dp/ina").is_none());
        assert!(v["by_class_mode"]["emb/ina"]["records"].as_u64().unwrap() > 0);
    }

    /// `ina3d inspect --json` of a freshly generated trace: the per-rank network bytes of
    /// the class named.
    fn inspect_sent(args: &[&str], class: &str) -> Vec<(u64, u64)> {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("t.csv.gz");
        let st = ina3d()
            .arg("trace")
            .args(args)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            st.status.success(),
            "{}",
            String::from_utf8_lossy(&st.stderr)
        );
        let js = ina3d()
            .arg("inspect")
            .arg(&out)
            .arg("--json")
            .output()
            .unwrap();
        assert!(
            js.status.success(),
            "{}",
            String::from_utf8_lossy(&js.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&js.stdout).unwrap();
        v["per_rank"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["rank"].is_u64())
            .map(|r| {
                (
                    r["sent"][class].as_u64().unwrap(),
                    r["received"][class].as_u64().unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn inspect_counts_context_parallel_bytes_per_rank() {
        // Llama-2 7B shape, 2 layers, TP2 · CP2 · DP2, m = 1, ring attention. One K/V block
        // is 2·b·(s/CP)·(h/TP)·2 B = 2·1·2048·2048·2 = 16,777,216 B; each rank sends
        // CP−1 = 1 block forward and 2(CP−1) = 2 backward per layer: 3 blocks × 2 layers.
        let per_rank = inspect_sent(
            &[
                "llama2-7b",
                "--topology",
                "fat-tree:k=4,nvlink=off",
                "--tp",
                "2",
                "--cp",
                "2",
                "--dp",
                "2",
                "--num-layers",
                "2",
                "--global-batch-size",
                "2",
                "--sequence-parallel",
            ],
            "cp",
        );
        assert_eq!(per_rank.len(), 8);
        for (sent, received) in per_rank {
            assert_eq!(sent, 6 * 16_777_216);
            assert_eq!(received, 6 * 16_777_216);
        }
    }

    #[test]
    fn inspect_counts_expert_parallel_bytes_per_rank() {
        // Mixtral-8x7B shape, 1 layer, EP8 · DP8, m = 1, alltoall dispatcher, uniform
        // routing: a rank routes s·topk = 4096·2 token copies, h·2 B each, 1/8 to each EP
        // rank; 4 all-to-alls (dispatch, combine, forward and backward) send 7/8 of them
        // to the other ranks: 4 · 7 · 4096·2·4096·2/8 B.
        let per_rank = inspect_sent(
            &[
                "mixtral-8x7b",
                "--topology",
                "fat-tree:k=4,nvlink=off",
                "--ep",
                "8",
                "--dp",
                "8",
                "--num-layers",
                "1",
                "--global-batch-size",
                "8",
            ],
            "ep",
        );
        assert_eq!(per_rank.len(), 8);
        for (sent, received) in per_rank {
            assert_eq!(sent, 4 * 7 * 4096 * 2 * 4096 * 2 / 8);
            assert_eq!(received, sent);
        }
    }

    #[test]
    fn inconsistent_sizes_fail_with_the_numbers_that_disagree() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("t.csv");
        let run = |args: &[&str]| {
            let o = ina3d()
                .args(["trace", "gpt3-13b", "--topology", "fat-tree:k=4"])
                .args(args)
                .arg("-o")
                .arg(&out)
                .output()
                .unwrap();
            assert!(!o.status.success());
            String::from_utf8_lossy(&o.stderr).to_string()
        };
        let e = run(&["--tp", "8", "--dp", "4"]);
        assert!(e.contains("32") && e.contains("16 hosts"), "{e}");
        let e = run(&["--tp", "8", "--dp", "2", "--global-batch-size", "9"]);
        assert!(e.contains("9") && e.contains("global_batch_size"), "{e}");
        // 16-way TP on servers of 8 GPUs with NVLink
        let e = run(&[
            "--tp",
            "16",
            "--num-attention-heads",
            "32",
            "--hidden-size",
            "4096",
            "--global-batch-size",
            "1",
        ]);
        assert!(e.contains("16") && e.contains("8 GPUs"), "{e}");
        assert!(!out.exists(), "no partial output");
    }
}

mod gen_props {
    use super::gen::small;
    use ina3d::record::Mode;
    use ina3d::topology::Topology;
    use ina3d::trace::{self, Algorithm, InaMode, TraceOptions};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Random small jobs, algorithms and INA modes: the trace always reads back as a valid
        /// DAG on its topology, identical record by record, and every net/ina byte sent is received.
        #[test]
        fn random_jobs_give_valid_round_tripping_traces(
            tp in prop::sample::select(vec![1u32, 2, 4]), pp in prop::sample::select(vec![1u32, 2, 4]),
            dp in prop::sample::select(vec![1u32, 2]), groups in 1u64..3, v2 in any::<bool>(),
            flags in 0u8..16, algo in 0usize..4, ina in 0usize..5, nvlink in any::<bool>(), seed in 0u64..4,
        ) {
            let topo = Topology::from_spec(if nvlink { "leaf-spine:leaves=4,spines=2,hosts-per-leaf=8" } else { "leaf-spine:leaves=4,spines=2,hosts-per-leaf=8,nvlink=off" }).unwrap();
            let mut cfg = small(tp, pp, dp, groups * pp as u64 * dp as u64);
            if v2 && pp > 1 {
                cfg.set("num_layers", "8").unwrap();
                cfg.virtual_pipeline_model_parallel_size = Some(2);
            }
            cfg.sequence_parallel = flags & 1 != 0;
            cfg.overlap_grad_reduce = flags & 2 != 0;
            cfg.use_distributed_optimizer = flags & 4 != 0;
            cfg.untie_embeddings_and_output_weights = flags & 8 != 0;
            let mut opts = TraceOptions { collective: [Algorithm::Ring, Algorithm::Dbt, Algorithm::Hd, Algorithm::Hierarchical][algo], seed, ..Default::default() };
            opts.ina.mode = [InaMode::Off, InaMode::SwitchMl, InaMode::Hierarchical, InaMode::Atp, InaMode::Rina][ina];
            let mut recs = Vec::new();
            trace::generate(&cfg, &topo, &opts, &mut |r| { recs.push(r); Ok(()) }).unwrap();
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("p.csv.gz");
            trace::write(&path, &trace::TraceHeader::new(), &recs).unwrap();
            let back: Vec<_> = trace::TraceReader::open(&path).unwrap().with_check(&topo).collect::<Result<_, _>>().unwrap();
            prop_assert_eq!(&back, &recs);
            let net = |f: &dyn Fn(&ina3d::record::FlowRecord) -> bool| recs.iter().filter(|r| matches!(r.mode, Mode::Net | Mode::Ina) && f(r)).map(|r| r.bytes.0).sum::<u64>();
            // Per GPU of the job, class by class: collectives are symmetric, and PP sends
            // to a neighbour exactly what that neighbour sends back (activations ↔ gradients).
            for g in &topo.gpus[..(tp * pp * dp) as usize] {
                for c in [ina3d::record::Class::Tp, ina3d::record::Class::Dp, ina3d::record::Class::Emb] {
                    if opts.ina.mode == InaMode::Off || !opts.ina.classes.contains(&c) {
                        prop_assert_eq!(net(&|r| r.src == *g && r.class == c), net(&|r| r.dst == *g && r.class == c), "{:?} {}", c, g);
                    }
                }
            }
        }
    }
}

/// The row layout spelled out field by field with `format!` (slow and obvious), against
/// which the writer's hand-rolled formatting is checked.
fn row_by_format(r: &FlowRecord) -> String {
    let opt = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_default();
    let deps: Vec<String> = r.deps.iter().map(|d| d.0.to_string()).collect();
    let (agg, group) = match r.agg {
        Some(a) => (
            format!("{},{},{},{}", a.id, a.switch.0, a.fanin, a.dir),
            a.group.to_string(),
        ),
        None => (",,,".into(), String::new()),
    };
    let channel = if r.channel == 0 {
        String::new()
    } else {
        r.channel.to_string()
    };
    format!(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{agg},{channel},{group}\n",
        r.id.0,
        r.src.0,
        r.dst.0,
        r.bytes.0,
        deps.join(";"),
        r.gap.0,
        r.dur.0,
        r.mode,
        r.class,
        r.iteration,
        opt(r.collective),
        opt(r.step.map(u64::from)),
        opt(r.microbatch.map(u64::from)),
        opt(r.layer.map(u64::from)),
        opt(r.stage.map(u64::from)),
        opt(r.group_size.map(u64::from)),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn rows_are_written_exactly_as_the_layout_spells_them(records in arb_records()) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv");
        trace::write(&path, &header(), &records).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let rows: String = records.iter().map(row_by_format).collect();
        let head = "# ina3d-trace schema=3\n# end_marker=records\n# ina=off\n# seed=7\n# topology=fat-tree:k=4\n";
        let end = format!("# end records={}\n", records.len());
        prop_assert_eq!(text, format!("{head}{}\n{rows}{end}", trace::COLUMNS.join(",")));
    }
}

/// Multi-member gzip: what the writer produces (one member per 1 MiB of rows, compressed
/// in parallel) and what any gzip reader, the trace reader included, must accept.
mod multi_member {
    use super::*;
    use flate2::write::GzEncoder;
    use std::io::Write;
    use std::path::Path;

    /// Enough rows (about 4.5 MiB of text) for several 1 MiB members.
    fn many_records() -> Vec<FlowRecord> {
        (0..120_000u64)
            .map(|i| {
                let deps: Vec<u64> = if i == 0 { vec![] } else { vec![i - 1, i / 2] };
                let mut r = net(i, (i % 40) as u32, (i % 40 + 1) as u32, 1 << 20, &deps);
                r.deps.dedup();
                r.collective = Some(i / 7);
                r.step = Some((i % 14) as u32);
                r.channel = (i % 2) as u32;
                r
            })
            .collect()
    }

    /// gzip members of `text` cut at `cuts` (any byte, mid-row included), each made by
    /// flate2's own gzip encoder: a multi-member file our writer did not make.
    fn members_cut_at(text: &[u8], cuts: &[usize]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut from = 0;
        for &c in cuts.iter().chain([text.len()].iter()) {
            let c = c.clamp(from, text.len());
            let mut e = GzEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(&text[from..c]).unwrap();
            out.extend(e.finish().unwrap());
            from = c;
        }
        out
    }

    /// `text` cut at `cuts` into members framed as the trace writer frames its 1 MiB chunks.
    fn marked_members_cut_at(text: &[u8], cuts: &[usize]) -> Vec<u8> {
        use ina3d::formats::gz_members::{encode_member, level};
        let mut z = flate2::Compress::new(level(), false);
        let mut out = Vec::new();
        let mut from = 0;
        let ends: Vec<usize> = cuts.iter().chain([text.len()].iter()).copied().collect();
        for (i, &c) in ends.iter().enumerate() {
            let c = c.clamp(from, text.len());
            encode_member(
                &mut z,
                &text[from..c],
                i as u64,
                i + 1 == ends.len(),
                &mut out,
            )
            .unwrap();
            from = c;
        }
        out
    }

    /// The number of gzip members of `bytes`, decoding one member at a time.
    fn member_count(bytes: &[u8]) -> usize {
        let mut rest = bytes;
        let mut n = 0;
        while !rest.is_empty() {
            let mut d = flate2::bufread::GzDecoder::new(rest);
            std::io::copy(&mut d, &mut std::io::sink()).unwrap();
            rest = d.into_inner();
            n += 1;
        }
        n
    }

    fn write_with_threads(dir: &Path, name: &str, recs: &[FlowRecord], threads: usize) -> Vec<u8> {
        let path = dir.join(name);
        let mut w = trace::TraceWriter::create_with_threads(&path, &header(), threads).unwrap();
        for r in recs {
            w.write(r).unwrap();
        }
        w.finish().unwrap();
        std::fs::read(&path).unwrap()
    }

    #[test]
    fn the_gz_file_is_byte_identical_whatever_the_number_of_compression_threads() {
        let dir = tempfile::tempdir().unwrap();
        let recs = many_records();
        let one = write_with_threads(dir.path(), "1.csv.gz", &recs, 1);
        assert!(member_count(&one) >= 4, "{} members", member_count(&one));
        for k in [2, 3, 8] {
            let other = write_with_threads(dir.path(), &format!("{k}.csv.gz"), &recs, k);
            assert!(one == other, "{k} threads wrote other bytes than 1 thread");
        }
    }

    #[test]
    fn the_system_gzip_decompresses_the_writer_s_file_to_the_plain_file() {
        let dir = tempfile::tempdir().unwrap();
        let recs = many_records();
        trace::write(dir.path().join("t.csv"), &header(), &recs).unwrap();
        trace::write(dir.path().join("t.csv.gz"), &header(), &recs).unwrap();
        // gzip(1) is an independent reader: -t checks every member's CRC and length.
        let gz = |args: &[&str]| {
            std::process::Command::new("gzip")
                .args(args)
                .arg(dir.path().join("t.csv.gz"))
                .output()
                .expect("gzip(1) must be installed for this test")
        };
        let t = gz(&["-t"]);
        assert!(
            t.status.success(),
            "gzip -t: {}",
            String::from_utf8_lossy(&t.stderr)
        );
        let text = gz(&["-dc"]);
        assert!(text.status.success());
        assert!(text.stdout == std::fs::read(dir.path().join("t.csv")).unwrap());
    }

    #[test]
    fn members_cut_anywhere_by_another_encoder_read_as_one_trace() {
        let dir = tempfile::tempdir().unwrap();
        let recs = many_records()[..3000].to_vec();
        let plain = dir.path().join("t.csv");
        trace::write(&plain, &header(), &recs).unwrap();
        let text = std::fs::read(&plain).unwrap();
        // cuts inside the magic line, mid-row, mid-number, an empty member, the very end
        let cuts = [5, 200, 200, 1001, 50_000, 77_777, text.len() - 1];
        let path = dir.path().join("m.csv.gz");
        std::fs::write(&path, members_cut_at(&text, &cuts)).unwrap();
        let back = trace::read(&path).unwrap();
        assert_eq!(back.header, header());
        assert_eq!(back.records, recs);
    }

    #[test]
    fn damage_in_a_later_member_is_an_error_naming_the_file_and_the_line_reached() {
        let dir = tempfile::tempdir().unwrap();
        let recs = many_records();
        let good = write_with_threads(dir.path(), "good.csv.gz", &recs, 2);
        // the second member starts after the first: find it by decoding the first alone
        let mut d = flate2::bufread::GzDecoder::new(&good[..]);
        let mut first = Vec::new();
        std::io::Read::read_to_end(&mut d, &mut first).unwrap();
        let second = good.len() - d.into_inner().len();
        let first_lines = first.iter().filter(|&&c| c == b'\n').count() as u64;
        let cases: [(&str, Vec<u8>); 3] = [
            ("truncated", good[..second + 5000].to_vec()),
            ("flipped", {
                let mut b = good.clone();
                b[second + 3000] ^= 0x55;
                b
            }),
            ("garbage", {
                let mut b = good.clone();
                b.extend_from_slice(b"not gzip at all");
                b
            }),
        ];
        for (name, bytes) in cases {
            let path = dir.path().join(format!("{name}.csv.gz"));
            std::fs::write(&path, bytes).unwrap();
            let e = trace::read(&path).expect_err(name);
            let msg = e.to_string();
            assert!(msg.contains(&format!("{name}.csv.gz:")), "{name}: {msg}");
            assert!(
                msg.contains("gzip") && msg.contains("damaged or truncated"),
                "{name}: {msg}"
            );
            // the first member (1 MiB of rows) was read: the error names a line past it
            let FormatError::Syntax { line, .. } = e else {
                panic!("{name}: not a line-numbered error: {msg}")
            };
            assert!(
                line > first_lines,
                "{name}: line {line}, first member {first_lines} lines"
            );
        }
    }

    /// The text of `recs` as the writer writes it, and the line number of record `i`
    /// (the header takes the lines before the first record).
    fn text_and_first_row(recs: &[FlowRecord]) -> (String, usize) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.csv");
        trace::write(&p, &header(), recs).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        let header_lines = text.lines().take_while(|l| !l.starts_with("0,")).count();
        (text, header_lines + 1)
    }

    /// Write `text` gzip-compressed (members as the writer frames them) and read it back
    /// from the file (blocks parsed on worker threads) and from memory (on this thread).
    fn read_both(text: &str) -> [Result<trace::Trace, String>; 2] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv.gz");
        let cuts: Vec<usize> = (1..)
            .map(|k| k * (1 << 20))
            .take_while(|&c| c < text.len())
            .collect();
        std::fs::write(&path, marked_members_cut_at(text.as_bytes(), &cuts)).unwrap();
        let show = |r: Result<trace::Trace, FormatError>| {
            r.map_err(|e| {
                e.to_string()
                    .replace(&path.display().to_string(), "t.csv.gz")
            })
        };
        [
            show(trace::read(&path)),
            show(trace::read_str(text, "t.csv.gz")),
        ]
    }

    /// The body is read in blocks of about 1 MiB parsed on several threads; the records
    /// and errors must be those of reading line by line, with the file's own line numbers
    /// and columns, wherever in the file the line is.
    #[test]
    fn errors_deep_in_a_file_name_their_own_line_and_column_whichever_thread_parsed_them() {
        let recs = many_records();
        let (text, first_row) = text_and_first_row(&recs);
        assert!(text.len() > 4 << 20, "the file spans several blocks");
        for r in read_both(&text) {
            assert_eq!(r.expect("the clean file reads").records, recs);
        }
        // record 100,000 (deep in the fourth block): deps `99999;50000`
        let i = 100_000;
        let line_no = first_row + i;
        let edit = |f: &dyn Fn(&str) -> String| -> String {
            text.lines()
                .enumerate()
                .map(|(k, l)| if k + 1 == line_no { f(l) } else { l.to_string() } + "\n")
                .collect()
        };
        let line_of = |t: &str| t.lines().nth(line_no - 1).unwrap().to_string();
        let bad_bytes = |l: &str| {
            let mut f: Vec<&str> = l.split(',').collect();
            f[3] = "12x";
            f.join(",")
        };
        let cases: [(&str, String, &str, &str); 3] = [
            // a dep on a later record: found only when the row is admitted in order
            (
                "later dep",
                edit(&|l| l.replacen(";50000,", ";100001,", 1)),
                ";100001",
                "dep 100001 of record 100000 does not appear on an earlier line",
            ),
            // an id already seen
            (
                "duplicate",
                edit(&|l| l.replacen("100000,", "7,", 1)),
                "7,",
                "duplicate record id 7",
            ),
            // a bad number
            (
                "bad bytes",
                edit(&bad_bytes),
                ",12x",
                "`bytes` must be an unsigned integer, found `12x`",
            ),
        ];
        for (what, bad, mark, says) in cases {
            // the column: where `mark` (less a leading separator) starts on the line
            let l = line_of(&bad);
            let column = l.find(mark).unwrap() + 1 + usize::from(mark.starts_with([',', ';']));
            let errs: Vec<String> = read_both(&bad)
                .into_iter()
                .map(|r| {
                    r.map(|t| format!("read {} records", t.records.len()))
                        .expect_err(what)
                })
                .collect();
            assert_eq!(errs[0], errs[1], "{what}: file and memory readers disagree");
            let at = format!("t.csv.gz:{line_no}:{column}:");
            assert!(
                errs[0].starts_with(&at),
                "{what}: expected {at}…, got {}",
                errs[0]
            );
            assert!(errs[0].contains(says), "{what}: {}", errs[0]);
        }
    }

    /// A reader dropped after a few records stops its reader and parser threads (they
    /// would otherwise wait forever for buffers or for a consumer): dropping returns, and
    /// a second reader of the same file reads it whole.
    #[test]
    fn a_reader_dropped_early_stops_its_threads() {
        let dir = tempfile::tempdir().unwrap();
        let recs = many_records();
        write_with_threads(dir.path(), "t.csv.gz", &recs, 2);
        let path = dir.path().join("t.csv.gz");
        for n in [0, 3, 50_000] {
            let rd = trace::TraceReader::open(&path).unwrap();
            let got: Vec<FlowRecord> = rd.take(n).map(Result::unwrap).collect();
            assert_eq!(got, recs[..n], "first {n}");
        }
        assert_eq!(trace::read(&path).unwrap().records, recs);
    }

    /// Bytes that are not UTF-8 deep in a file: in a plain file a `text` error, in a
    /// gzip file damage to the compressed data; either way at their own line and column.
    #[test]
    fn bytes_that_are_not_text_deep_in_a_file_are_an_error_at_their_line() {
        let recs = many_records();
        let (text, first_row) = text_and_first_row(&recs);
        let line_no = first_row + 90_000;
        let start: usize = text.lines().take(line_no - 1).map(|l| l.len() + 1).sum();
        let mut bytes = text.into_bytes();
        bytes[start + 4] = 0x80; // a lone continuation byte at column 5
        let dir = tempfile::tempdir().unwrap();
        for (name, file) in [
            ("t.csv", bytes.clone()),
            (
                "t.csv.gz",
                marked_members_cut_at(&bytes, &[1 << 20, 3 << 20]),
            ),
        ] {
            let path = dir.path().join(name);
            std::fs::write(&path, file).unwrap();
            let e = trace::read(&path).expect_err(name).to_string();
            let at = format!("{}:{line_no}:5:", path.display());
            assert!(e.starts_with(&at), "{name}: expected {at}…, got {e}");
            let field = if name.ends_with(".gz") {
                "gzip"
            } else {
                "text"
            };
            assert!(
                e.contains(&format!(" {field}: ")) && e.contains("not UTF-8"),
                "{name}: {e}"
            );
        }
    }

    /// A file without line breaks is refused once its first line passes 16 MiB, without
    /// holding more of it.
    #[test]
    fn a_body_without_line_breaks_is_an_error_not_a_line_the_size_of_the_file() {
        let (text, first_row) = text_and_first_row(&many_records()[..3]);
        let head: String = text
            .lines()
            .take(first_row - 1)
            .map(|l| format!("{l}\n"))
            .collect();
        let mut body = head.into_bytes();
        body.resize(body.len() + (17 << 20), b'7');
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("long.csv.gz");
        std::fs::write(&path, marked_members_cut_at(&body, &[])).unwrap();
        let e = trace::read(&path).expect_err("a 17 MiB line").to_string();
        assert!(
            e.contains(&format!("long.csv.gz:{first_row}:")) && e.contains("longer than 16 MiB"),
            "{e}"
        );
    }

    /// The 16 MiB line limit is exact and the same whatever the input's buffering: a
    /// line one byte over it (a comment, which the body may hold) is refused when the
    /// file is read on worker threads and when a string is read on this thread.
    #[test]
    fn a_line_one_byte_over_16_mib_is_refused_by_both_readers() {
        let (text, first_row) = text_and_first_row(&many_records()[..3]);
        let mut lines: Vec<String> = text.lines().map(|l| format!("{l}\n")).collect();
        lines.insert(first_row, format!("#{}\n", "c".repeat(16 << 20)));
        let errs = read_both(&lines.concat()).map(|r| r.expect_err("a line over 16 MiB"));
        assert_eq!(errs[0], errs[1], "file and memory readers disagree");
        let at = format!("t.csv.gz:{}:", first_row + 1);
        assert!(
            errs[0].starts_with(&at) && errs[0].contains("longer than 16 MiB"),
            "{}",
            errs[0]
        );
    }

    /// The header is read line by line, before the blocks: a metadata line without a
    /// break (a few KiB of gzip inflate to 17 MiB) is refused once the header passes 16 MiB
    /// instead of being held whole.
    #[test]
    fn a_header_without_line_breaks_is_an_error_not_a_string_the_size_of_the_file() {
        let mut body = b"# ina3d-trace schema=2\n# k=".to_vec();
        body.resize(body.len() + (17 << 20), b'v');
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("head.csv.gz");
        std::fs::write(&path, marked_members_cut_at(&body, &[])).unwrap();
        let e = trace::read(&path).expect_err("a 17 MiB header").to_string();
        assert!(
            e.contains("head.csv.gz:2:") && e.contains("header longer than 16 MiB"),
            "{e}"
        );
    }

    /// Read line by line, each dep is checked to be on an earlier line as it is read: on
    /// a line with several faults that is the error reported, whichever thread parsed it.
    #[test]
    fn an_unseen_dep_is_a_line_s_first_error_as_read_line_by_line() {
        let recs = many_records()[..2000].to_vec();
        let (text, first_row) = text_and_first_row(&recs);
        let line_no = first_row + 1500;
        let bad: String = text
            .lines()
            .enumerate()
            .map(|(k, l)| {
                let l = if k + 1 == line_no {
                    // deps `1499;750` become `9999;1499;750;1500` (1500 is the record
                    // itself) and gap_ns is not a number: dep 9999 comes first
                    l.replacen(",1499;750,0,", ",9999;1499;750;1500,x,", 1)
                } else {
                    l.to_string()
                };
                l + "\n"
            })
            .collect();
        let line = bad.lines().nth(line_no - 1).unwrap();
        assert!(line.contains(",9999;"), "edited: {line}");
        let column = line.find(",9999;").unwrap() + 2;
        for r in read_both(&bad) {
            let e = r.expect_err("a line with three faults");
            let at = format!("t.csv.gz:{line_no}:{column}: deps: dep 9999 of record 1500");
            assert!(e.starts_with(&at), "expected {at}…, got {e}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Any single damage to a multi-member file as the writer frames it (members
        /// marked with their index and the last one): a clear error naming the file, or
        /// (harmless damage such as a member's mtime) exactly the original records; never
        /// a shorter or altered trace.
        #[test]
        fn a_damaged_multi_member_file_never_reads_as_other_records(
            cuts in prop::collection::vec(0usize..40_000, 0..6),
            at in any::<prop::sample::Index>(),
            how in 0u8..3,
            byte in 1u8..=255,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let recs = many_records()[..1500].to_vec();
            let plain = dir.path().join("t.csv");
            trace::write(&plain, &header(), &recs).unwrap();
            let mut cuts = cuts;
            cuts.sort_unstable();
            let mut bytes = marked_members_cut_at(&std::fs::read(&plain).unwrap(), &cuts);
            let i = at.index(bytes.len());
            match how {
                0 => bytes[i] ^= byte,
                1 => bytes.truncate(i),
                _ => bytes.insert(i, byte),
            }
            let path = dir.path().join("d.csv.gz");
            std::fs::write(&path, &bytes).unwrap();
            match trace::read(&path) {
                Ok(t) => prop_assert_eq!(t.records, recs),
                Err(e) => prop_assert!(e.to_string().contains("d.csv.gz"), "{}", e),
            }
        }
    }
}
