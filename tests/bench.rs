//! `ina3d trace --collective-bench`: single collectives through the model's lowering, and
//! algbw/busbw per size as nccl-tests defines them.

use ina3d::pipeline::{
    generate_bench_trace, replay_records, write_bench, Job, JobSpec, ParallelSizes,
};
use ina3d::record::{Mode, NET_PACKET_PAYLOAD, PACKET_HEADER};
use ina3d::schedule::CollKind;
use ina3d::trace::{BenchGroup, CollectiveBench};
use ina3d::units::Bytes;
use std::process::Command;

const TINY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/traces/example/tiny.toml");
/// 8 single-GPU servers under 2 leaves, non-blocking towards 2 spines, 100 Gb/s, 1 µs links.
const LEAF_SPINE_8: &str = "leaf-spine:leaves=2,spines=2,hosts-per-leaf=4,gpus-per-server=1";

fn job(topology: &str, tp: u32, dp: u32) -> (Job, JobSpec) {
    let spec = JobSpec {
        input: TINY.into(),
        topology: topology.into(),
        sizes: ParallelSizes {
            tp: Some(tp),
            pp: Some(1),
            dp: Some(dp),
            ..Default::default()
        },
        ..JobSpec::default()
    };
    (Job::prepare(&spec).unwrap(), spec)
}

#[test]
fn a_ring_all_reduce_on_an_uncontended_fabric_reaches_the_link_rate_less_wire_headers() {
    let (job, spec) = job(LEAF_SPINE_8, 1, 8);
    let opts = spec.trace_options().unwrap();
    let s = Bytes::mib(64);
    let bench = CollectiveBench {
        kind: CollKind::AllReduce,
        sizes: vec![s],
        group: BenchGroup::All,
    };
    let t = generate_bench_trace(&job, &opts, &bench, None, true).unwrap();
    let r = replay_records(
        &t.records,
        &t.header,
        &job.topology,
        0,
        "bench",
        false,
        Default::default(),
    )
    .unwrap();
    let d = tempfile::tempdir().unwrap();
    let spec = ina3d::trace::BenchSpec::from_header(&t.header)
        .unwrap()
        .unwrap();
    let rows = write_bench(d.path(), &spec, &t.records, &r.rows()).unwrap();
    assert!(d.path().join("bench.csv").exists());
    // Hand formula (docs/model.md#wire-bytes): a ring all-reduce of S over n ranks is
    // 2(n−1) steps; in each, every NIC sends S/n payload plus 48 B of headers per 1,000 B
    // at B = 100 Gb/s, and the slowest hop of the ring crosses 4 links of 1 µs.
    let (n, rate) = (8.0, 100e9 / 8.0);
    let wire = (NET_PACKET_PAYLOAD.0 + PACKET_HEADER.0) as f64 / NET_PACKET_PAYLOAD.0 as f64;
    let step = s.0 as f64 * wire / (n * rate) + 4e-6;
    let t_hand = 2.0 * (n - 1.0) * step;
    let busbw_hand = 2.0 * (n - 1.0) / n * s.0 as f64 / t_hand / 1e9;
    let got = rows[0].busbw_gbs;
    assert!(
        (got - busbw_hand).abs() / busbw_hand < 0.005,
        "busbw {got:.3} GB/s, hand formula {busbw_hand:.3} GB/s"
    );
    // and it is the link rate less the headers within the latency term (< 1 %)
    let line = rate / wire / 1e9;
    assert!(
        got < line && got > 0.99 * line,
        "busbw {got:.3}, line {line:.3}"
    );
}

#[test]
fn a_bench_is_the_model_s_lowering_size_after_size_with_one_barrier_each() {
    let (job, spec) = job(LEAF_SPINE_8, 1, 8);
    let mut opts = spec.trace_options().unwrap();
    opts.nccl_channels = Some(2);
    let bench = CollectiveBench {
        kind: CollKind::ReduceScatter,
        sizes: vec![Bytes::kib(64), Bytes::kib(128)],
        group: BenchGroup::All,
    };
    let t = generate_bench_trace(&job, &opts, &bench, None, true).unwrap();
    // ring reduce-scatter: n−1 steps × n senders, per channel, per size; plus barriers
    let net: Vec<_> = t.records.iter().filter(|r| r.mode == Mode::Net).collect();
    assert_eq!(net.len(), 2 * 2 * 7 * 8);
    let compute = t.records.iter().filter(|r| r.mode == Mode::Compute).count();
    assert_eq!(compute, 2);
    // each size moves (n−1)/n · S from every rank, and its records carry its index
    for (k, s) in [(0u32, 65536u64), (1, 131072)] {
        let bytes: u64 = net
            .iter()
            .filter(|r| r.iteration == k)
            .map(|r| r.bytes.0)
            .sum();
        assert_eq!(bytes, 7 * s);
    }
    // the second size's first steps wait for the barrier after the first
    let barrier = t.records.iter().find(|r| r.mode == Mode::Compute).unwrap();
    assert!(net
        .iter()
        .filter(|r| r.iteration == 1 && r.step == Some(0))
        .all(|r| r.deps == vec![barrier.id]));
}

#[test]
fn a_tp_bench_inside_a_server_is_one_nvlink_record_per_group_and_size() {
    let (job, spec) = job(
        "leaf-spine:leaves=2,spines=2,hosts-per-leaf=4,gpus-per-server=4",
        4,
        2,
    );
    let bench = CollectiveBench {
        kind: CollKind::AllGather,
        sizes: vec![Bytes::mib(1)],
        group: BenchGroup::Tp,
    };
    let t = generate_bench_trace(&job, &spec.trace_options().unwrap(), &bench, None, true).unwrap();
    let nv: Vec<_> = t
        .records
        .iter()
        .filter(|r| r.mode == Mode::NvLink)
        .collect();
    assert_eq!(nv.len(), 2);
    assert!(t.records.iter().all(|r| r.mode != Mode::Net));
}

#[test]
fn a_group_of_one_is_refused_with_the_layout_named() {
    let (job, spec) = job(LEAF_SPINE_8, 1, 8);
    let bench = CollectiveBench {
        kind: CollKind::AllReduce,
        sizes: vec![Bytes(1024)],
        group: BenchGroup::Tp,
    };
    let e =
        generate_bench_trace(&job, &spec.trace_options().unwrap(), &bench, None, true).unwrap_err();
    let msg = ina3d::pipeline::error_chain(&e);
    assert!(
        msg.contains("--group tp") && msg.contains("TP1 PP1 DP8"),
        "{msg}"
    );
}

#[test]
fn the_command_line_names_a_bad_size_and_exits_2() {
    let d = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ina3d"))
        .args([
            "trace",
            TINY,
            "--topology",
            LEAF_SPINE_8,
            "--tp",
            "1",
            "--pp",
            "1",
            "--dp",
            "8",
        ])
        .args([
            "--collective-bench",
            "all-reduce",
            "--sizes",
            "1MB..1GiB",
            "-o",
        ])
        .arg(d.path().join("b.csv"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("size `1MB`: unknown unit `mb`"), "{err}");
    assert!(!d.path().join("b.csv").exists());
}
