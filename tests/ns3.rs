//! The ns-3 back-end: emitted files, reference files, and real ns-3 runs of small traces.
//!
//! The end-to-end tests run Debian's ns-3 unconditionally (`make test` installs it): when
//! it is missing they fail with the install hint, they never skip.

use ina3d::fct::FctRow;
use ina3d::formats::flow_txt::{self, MAX_FLOW_BYTES};
use ina3d::formats::glue_trace_txt;
use ina3d::formats::topology_txt::{self, Flavor as TopoFlavor};
use ina3d::ns3::emit::with_proxies;
use ina3d::ns3::ingest::{self, parse_end_to_end, parse_fct, Kind};
use ina3d::ns3::run::{
    build_glue, build_glue_checking, glue_binary, glue_source_dir, run_glue, RunReport,
};
use ina3d::ns3::{emit, EmitOptions, Flavor, InaConfig, InaPolicy, Ns3Error, StartSource};
use ina3d::record::{AggDir, AggGroup, AggTag, Class, FlowRecord, Mode};
use ina3d::topology::{Link, LinkKind, NodeKind, Topology};
use ina3d::units::{BitsPerSec, Bytes, FlowId, Nanos, NodeId};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

fn fixture(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(p)
}

fn link(a: u32, b: u32, gbps: u64, kind: LinkKind) -> Link {
    Link {
        a: NodeId(a),
        b: NodeId(b),
        rate: BitsPerSec::gbps(gbps),
        delay: Nanos(1000),
        error_rate: 0.0,
        kind,
    }
}

/// `hosts` hosts on one switch (node id `hosts`).
fn star(hosts: u32) -> Topology {
    let mut kinds = vec![NodeKind::Host; hosts as usize];
    kinds.push(NodeKind::Switch);
    Topology {
        kinds,
        links: (0..hosts)
            .map(|h| link(h, hosts, 100, LinkKind::Nic))
            .collect(),
        gpus: (0..hosts).map(NodeId).collect(),
        gpus_per_server: 1,
        nvlink_rate: None,
        source: "test:star".into(),
        fabric: Default::default(),
    }
}

/// 8 hosts, leaves 8 and 9 (4 hosts each), spines 10 and 11; all links 100 Gbps, 1 µs.
fn leaf_spine() -> Topology {
    let mut kinds = vec![NodeKind::Host; 8];
    kinds.extend([NodeKind::Switch; 4]);
    let mut links: Vec<Link> = (0..8)
        .map(|h| link(h, 8 + h / 4, 100, LinkKind::Nic))
        .collect();
    for leaf in [8, 9] {
        for spine in [10, 11] {
            links.push(link(leaf, spine, 100, LinkKind::Fabric));
        }
    }
    Topology {
        kinds,
        links,
        gpus: (0..8).map(NodeId).collect(),
        gpus_per_server: 1,
        nvlink_rate: None,
        source: "test:leaf-spine".into(),
        fabric: Default::default(),
    }
}

fn rec(
    id: u64,
    src: u32,
    dst: u32,
    bytes: u64,
    deps: &[u64],
    mode: Mode,
    class: Class,
) -> FlowRecord {
    FlowRecord {
        id: FlowId(id),
        src: NodeId(src),
        dst: NodeId(dst),
        bytes: Bytes(bytes),
        deps: deps.iter().map(|&d| FlowId(d)).collect(),
        gap: Nanos::ZERO,
        dur: Nanos::ZERO,
        mode,
        class,
        ..Default::default()
    }
}

#[allow(clippy::too_many_arguments)]
fn ina_edge(
    id: u64,
    src: u32,
    dst: u32,
    bytes: u64,
    deps: &[u64],
    agg: u64,
    switch: u32,
    fanin: u32,
    dir: AggDir,
) -> FlowRecord {
    let mut r = rec(id, src, dst, bytes, deps, Mode::Ina, Class::Dp);
    r.agg = Some(AggTag {
        id: agg,
        switch: NodeId(switch),
        fanin,
        dir,
        group: AggGroup::Dense,
    });
    r
}

/// Ring all-reduce of `s` bytes over hosts 0..n: 2(n−1) steps of s/n; step k of rank r
/// waits for its own step k−1 send and for step k−1 received from its predecessor.
fn ring_allreduce(n: u32, s: u64, first_id: u64) -> Vec<FlowRecord> {
    let mut v = Vec::new();
    for k in 0..2 * (n as u64 - 1) {
        for r in 0..n {
            let id = first_id + k * n as u64 + r as u64;
            let deps: Vec<u64> = if k == 0 {
                vec![]
            } else {
                vec![
                    id - n as u64,
                    first_id + (k - 1) * n as u64 + ((r + n - 1) % n) as u64,
                ]
            };
            let mut f = rec(
                id,
                r,
                (r + 1) % n,
                s / n as u64,
                &deps,
                Mode::Net,
                Class::Dp,
            );
            f.step = Some(k as u32);
            v.push(f);
        }
    }
    v
}

/// Hierarchical INA all-reduce of `s` bytes on the leaf-spine: leaves sum their 4 workers,
/// spine 10 sums the 2 leaves and sends the result down; then each worker computes 2 µs.
fn ina_allreduce(s: u64) -> Vec<FlowRecord> {
    ina_allreduce_staggered(s, 0)
}

/// [`ina_allreduce`] with worker `w` starting `w·stagger_ns` late, so switches must hold
/// early workers' packets in slots until the late ones arrive.
fn ina_allreduce_staggered(s: u64, stagger_ns: u64) -> Vec<FlowRecord> {
    let mut v = Vec::new();
    let mut id = 0;
    let mut ups = Vec::new();
    for w in 0..8u32 {
        let mut up = ina_edge(id, w, 8 + w / 4, s, &[], 1, 8 + w / 4, 4, AggDir::Up);
        up.gap = Nanos(u64::from(w) * stagger_ns);
        v.push(up);
        ups.push(id);
        id += 1;
    }
    for leaf in [8u32, 9] {
        v.push(ina_edge(id, leaf, 10, s, &ups, 1, 10, 2, AggDir::Up));
        id += 1;
    }
    let mut downs = Vec::new();
    for leaf in [8u32, 9] {
        v.push(ina_edge(id, 10, leaf, s, &[8, 9], 1, 10, 2, AggDir::Down));
        id += 1;
    }
    for w in 0..8u32 {
        v.push(ina_edge(
            id,
            8 + w / 4,
            w,
            s,
            &[10, 11],
            1,
            8 + w / 4,
            4,
            AggDir::Down,
        ));
        downs.push(id);
        id += 1;
    }
    for (w, d) in downs.iter().enumerate() {
        let mut c = rec(
            id,
            w as u32,
            w as u32,
            0,
            &[*d],
            Mode::Compute,
            Class::Compute,
        );
        c.dur = Nanos(2000);
        v.push(c);
        id += 1;
    }
    v
}

/// The hand-made trace of the snapshot tests: a TP flow, a compute step, a 5 GiB DP flow
/// (split for HPCC), an INA all-reduce on the switch, an NVLink collective.
fn snapshot_trace() -> Vec<FlowRecord> {
    let mut v = vec![rec(0, 0, 1, 1_048_576, &[], Mode::Net, Class::Tp)];
    let mut c = rec(1, 1, 1, 0, &[0], Mode::Compute, Class::Compute);
    c.dur = Nanos(5000);
    v.push(c);
    let mut big = rec(2, 2, 3, 5 << 30, &[], Mode::Net, Class::Dp);
    big.gap = Nanos(100);
    v.push(big);
    for w in 0..4 {
        v.push(ina_edge(
            3 + w,
            w as u32,
            4,
            65536,
            &[1],
            9,
            4,
            4,
            AggDir::Up,
        ));
    }
    for w in 0..4 {
        v.push(ina_edge(
            7 + w,
            4,
            w as u32,
            65536,
            &[3, 4, 5, 6],
            9,
            4,
            4,
            AggDir::Down,
        ));
    }
    let mut nv = rec(11, 0, 0, 0, &[7], Mode::NvLink, Class::Tp);
    nv.dur = Nanos(1234);
    v.push(nv);
    v
}

fn ina_params(policy: InaPolicy) -> InaConfig {
    InaConfig {
        slots: 64,
        payload: Bytes(1024),
        window: 32,
        policy: Some(policy),
        ..InaConfig::default()
    }
}

/// A DP-only pool of exactly one stream's window: 64 slots, 64-packet windows of 1 KiB.
fn pool_of_one_window(policy: InaPolicy) -> InaConfig {
    InaConfig {
        slots: 64,
        payload: Bytes(1024),
        window: 64,
        policy: Some(policy),
        classes: vec![Class::Dp],
        ..InaConfig::default()
    }
}

/// Compares one emitted file with its reviewed snapshot,
/// `tests/snapshots/ns3__emit_<flavor>_<file>.snap` (insta). A difference fails the test;
/// outside CI insta also leaves the new output beside it as `.snap.new`, to be accepted
/// or rejected with `cargo insta review` (docs/testing.md). CI runs with
/// `INSTA_UPDATE=no`, so it never writes a snapshot.
///
/// insta compares text with line endings normalised and trailing newlines trimmed, so
/// those two properties of the emitted files are asserted here instead.
fn check_snapshot(flavor: Flavor, file: &str, got: &str) {
    assert!(
        !got.contains('\r'),
        "emitted {file} must use LF line endings"
    );
    assert!(
        got.ends_with('\n') && !got.ends_with("\n\n"),
        "emitted {file} must end in exactly one newline"
    );
    let flavor = flavor.as_str();
    insta::with_settings!({
        omit_expression => true,
        description => format!("`ina3d ns3 emit --flavor {flavor}`: {file} of the snapshot trace on a 4-host star"),
    }, {
        insta::assert_snapshot!(format!("emit_{flavor}_{file}"), got);
    });
}

#[test]
fn emitted_files_match_their_snapshots_for_every_flavor() {
    for flavor in [Flavor::Hpcc, Flavor::Parsimon, Flavor::Simai] {
        let dir = tempfile::tempdir().unwrap();
        let opts = EmitOptions {
            flavor,
            ..Default::default()
        };
        emit(
            &snapshot_trace(),
            &ina_params(InaPolicy::BestEffort),
            &star(4),
            &opts,
            dir.path(),
        )
        .unwrap();
        for f in [
            "topology.txt",
            "flow.txt",
            "flow.meta.txt",
            "config.txt",
            "trace.txt",
            "routes.txt",
            "params.txt",
        ] {
            let got = std::fs::read_to_string(dir.path().join(f)).unwrap();
            check_snapshot(flavor, f, &got);
        }
    }
}

#[test]
fn emit_is_deterministic_and_leaves_no_temporary_files() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    for d in [&a, &b] {
        emit(
            &ina_allreduce(65536),
            &ina_params(InaPolicy::Static),
            &leaf_spine(),
            &EmitOptions {
                seed: 7,
                routing: Default::default(),
                ..Default::default()
            },
            d.path(),
        )
        .unwrap();
    }
    let mut names: Vec<String> = std::fs::read_dir(a.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
    for n in names {
        assert_eq!(
            std::fs::read(a.path().join(&n)).unwrap(),
            std::fs::read(b.path().join(&n)).unwrap(),
            "{n}"
        );
    }
}

#[test]
fn emitted_topology_reads_back_as_the_same_links_with_one_proxy_per_aggregating_switch() {
    let dir = tempfile::tempdir().unwrap();
    let topo = leaf_spine();
    let trace = ina_allreduce(65536);
    let r = emit(
        &trace,
        &ina_params(InaPolicy::BestEffort),
        &topo,
        &EmitOptions::default(),
        dir.path(),
    )
    .unwrap();
    let (ext, pairs) = with_proxies(&topo, &trace);
    assert_eq!(r.proxies, pairs);
    assert_eq!(
        pairs.iter().map(|p| p.0 .0).collect::<Vec<_>>(),
        vec![8, 9, 10],
        "leaves and the spine aggregate"
    );
    let p = dir.path().join("topology.txt");
    let (back, warnings) = topology_txt::read_file(&p).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(back, ext.to_file(TopoFlavor::Hpcc));
    // the proxy port of a leaf is as fast as its 6 other ports together
    assert_eq!(ext.links[ext.links.len() - 3].rate, BitsPerSec::gbps(600));
    // and the topology module's own reader agrees
    let (theirs, _) = Topology::read_file(&p).unwrap();
    assert_eq!(theirs.kinds, ext.kinds);
    assert_eq!(
        theirs
            .links
            .iter()
            .map(|l| (l.a, l.b, l.rate, l.delay))
            .collect::<Vec<_>>(),
        ext.links
            .iter()
            .map(|l| (l.a, l.b, l.rate, l.delay))
            .collect::<Vec<_>>()
    );
}

#[test]
fn glue_routes_give_each_connection_one_path_its_reverse_and_the_replayers_choice() {
    let dir = tempfile::tempdir().unwrap();
    // a ring on the leaf-spine (14 records per pair) plus flows from each host to its
    // opposite on NCCL channels 0, 1 and 2: the leaf-crossing connections have a choice of
    // spine, each channel its own
    let mut trace = ring_allreduce(8, 8192, 0);
    trace.extend((0..24).map(|k| {
        let h = k % 8;
        FlowRecord {
            channel: k / 8,
            ..rec(
                1000 + k as u64,
                h,
                (h + 4) % 8,
                4096,
                &[],
                Mode::Net,
                Class::Tp,
            )
        }
    }));
    let r = emit(
        &trace,
        &InaConfig::default(),
        &leaf_spine(),
        &EmitOptions {
            seed: 3,
            routing: Default::default(),
            ..Default::default()
        },
        dir.path(),
    )
    .unwrap();
    assert!(r.routes > 0);
    let p = dir.path().join("routes.txt");
    let text = std::fs::read_to_string(&p).unwrap();
    let routes = ina3d::formats::routes_txt::parse(&p, &text).unwrap().paths;
    let pairs: std::collections::BTreeSet<(NodeId, NodeId, u32)> = trace
        .iter()
        .flat_map(|f| [(f.src, f.dst, f.channel), (f.dst, f.src, f.channel)])
        .collect();
    assert_eq!(
        routes
            .keys()
            .copied()
            .collect::<std::collections::BTreeSet<_>>(),
        pairs,
        "trace connections and their reverses, nothing else"
    );
    assert_eq!(r.routes, pairs.len());
    // a crossing connection goes host → leaf → spine → leaf → host, on the spine the hash
    // of (src, dst, channel) picks
    let routing = ina3d::topology::Routing::new(&leaf_spine(), 3).unwrap();
    let mut spines = std::collections::BTreeSet::new();
    let mut channels_apart = 0;
    for (&(s, d, c), hops) in &routes {
        let want = routing
            .path(s, d, ina3d::topology::connection_key(s, d, c))
            .unwrap();
        assert_eq!(
            hops.iter().map(|h| h.1).collect::<Vec<_>>(),
            want.iter().map(|c| c.link()).collect::<Vec<_>>(),
            "{s}->{d} channel {c}"
        );
        if hops.len() == 4 {
            spines.insert(hops[1].0);
            if c > 0 && routes[&(s, d, 0)] != *hops {
                channels_apart += 1;
            }
        }
    }
    assert_eq!(
        spines.len(),
        2,
        "crossing connections spread over both spines"
    );
    assert!(
        channels_apart > 0,
        "no channel of a crossing pair left its channel-0 spine"
    );
    let meta = std::fs::read_to_string(dir.path().join("flow.meta.txt")).unwrap();
    assert!(
        meta.contains(&format!("{} connections routed", pairs.len())),
        "{meta}"
    );
}

#[test]
fn emitted_flows_read_back_exactly_sorted_by_start_with_big_flows_split_under_u32() {
    for flavor in [Flavor::Hpcc, Flavor::Parsimon] {
        let dir = tempfile::tempdir().unwrap();
        let trace = snapshot_trace();
        let r = emit(
            &trace,
            &ina_params(InaPolicy::BestEffort),
            &star(4),
            &EmitOptions {
                flavor,
                ..Default::default()
            },
            dir.path(),
        )
        .unwrap();
        let p = dir.path().join("flow.txt");
        let (flows, warnings) = flow_txt::read(&p).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(flows.len(), r.flows);
        assert_eq!(r.split_records, 1);
        assert!(flows
            .iter()
            .all(|f| f.size.0 <= MAX_FLOW_BYTES && f.pg == 3));
        assert!(
            flows.windows(2).all(|w| w[0].start <= w[1].start),
            "sorted by start"
        );
        let net_ina: u64 = trace
            .iter()
            .filter(|r| matches!(r.mode, Mode::Net | Mode::Ina))
            .map(|r| r.bytes.0)
            .sum();
        assert_eq!(
            flows.iter().map(|f| f.size.0).sum::<u64>(),
            net_ina,
            "bytes conserved through splitting"
        );
        assert_eq!(
            flows.iter().all(|f| f.id.is_some()),
            flavor == Flavor::Parsimon
        );
        // the gap of the 5 GiB flow shows up as its start: 100 ns
        let big: Vec<_> = flows
            .iter()
            .filter(|f| f.src == NodeId(2) && f.dst == NodeId(3))
            .collect();
        assert_eq!(big.len(), 2);
        assert!(big.iter().all(|f| f.start == Nanos(100)));
    }
}

#[test]
fn flow_start_times_come_from_a_replay_fct_csv_when_given_and_meta_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let trace = snapshot_trace();
    let fct = dir.path().join("replay_fct.csv");
    let mut w = csv::Writer::from_path(&fct).unwrap();
    for r in &trace {
        // only the start times matter to emit; fct_ns is left 0 as a user's file may have it
        w.serialize(FctRow {
            fct_ns: 0,
            ..FctRow::of_record(r, 1000 + r.id.0 * 7, 999_999, 0)
        })
        .unwrap();
    }
    w.flush().unwrap();
    let out = dir.path().join("out");
    let r = emit(
        &trace,
        &ina_params(InaPolicy::BestEffort),
        &star(4),
        &EmitOptions {
            start: StartSource::Replay(fct.clone()),
            ..Default::default()
        },
        &out,
    )
    .unwrap();
    assert!(r.start_source.starts_with("replay:"));
    let meta = std::fs::read_to_string(out.join("flow.meta.txt")).unwrap();
    assert!(meta.contains("start_times replay:"), "{meta}");
    let p = out.join("flow.txt");
    let (flows, _) = flow_txt::read(&p).unwrap();
    assert_eq!(
        flows[0].start,
        Nanos(1000),
        "record 0 starts at 1000 ns in the replay"
    );
    // flow.txt never carries the provenance
    assert!(!std::fs::read_to_string(&p).unwrap().contains("replay"));
}

#[test]
fn config_has_red_maps_for_every_link_rate_including_proxy_ports() {
    let dir = tempfile::tempdir().unwrap();
    emit(
        &ina_allreduce(65536),
        &ina_params(InaPolicy::BestEffort),
        &leaf_spine(),
        &EmitOptions::default(),
        dir.path(),
    )
    .unwrap();
    let cfg = std::fs::read_to_string(dir.path().join("config.txt")).unwrap();
    for key in ["KMAX_MAP", "KMIN_MAP", "PMAX_MAP"] {
        let line = cfg.lines().find(|l| l.starts_with(key)).unwrap();
        let t: Vec<&str> = line.split_whitespace().collect();
        // 100G links, 600G leaf proxy ports, 200G spine proxy port
        assert_eq!(t[1], "3", "{line}");
        for rate in ["100000000000", "200000000000", "600000000000"] {
            assert!(t.contains(&rate), "{key} lacks {rate}");
        }
    }
    let reference = std::fs::read_to_string(fixture("simai/SimAI.conf")).unwrap();
    for line in reference.lines().filter(|l| !l.trim().is_empty()) {
        let key = line.split_whitespace().next().unwrap();
        if key == "TRACE_NODE" {
            continue; // SimAI-only debug key
        }
        assert!(
            cfg.lines()
                .any(|l| l.split_whitespace().next() == Some(key)),
            "config.txt lacks {key}"
        );
    }
}

/// `trace` emitted for the glue on a 4-host star under the best-effort slot policy.
fn emitted_best_effort_on_star(trace: &[FlowRecord]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    emit(
        trace,
        &ina_params(InaPolicy::BestEffort),
        &star(4),
        &EmitOptions::default(),
        dir.path(),
    )
    .unwrap();
    dir
}

#[test]
fn glue_trace_text_reads_back_into_the_same_records() {
    let trace = snapshot_trace();
    let dir = emitted_best_effort_on_star(&trace);
    let p = dir.path().join("trace.txt");
    let (back, _) = glue_trace_txt::parse(&p, &std::fs::read_to_string(&p).unwrap()).unwrap();
    assert_eq!(back, trace);
}

#[test]
fn a_glue_trace_to_emit_again_takes_its_params_txt_the_defaults_without_one_and_an_unreadable_one_is_an_error(
) {
    let trace = snapshot_trace();
    let dir = emitted_best_effort_on_star(&trace);
    let tp = dir.path().join("trace.txt");
    let params = dir.path().join("params.txt");
    let read = ina3d::pipeline::load_ns3_input(&tp).unwrap();
    assert_eq!(
        read.ina.policy(),
        InaPolicy::BestEffort,
        "params.txt's policy"
    );
    assert!(read.reservations.is_none(), "not the planned policy");
    std::fs::remove_file(&params).unwrap();
    let read = ina3d::pipeline::load_ns3_input(&tp).unwrap();
    assert_eq!(
        read.ina,
        InaConfig::default(),
        "no params.txt: the defaults"
    );
    // a params.txt that is there but cannot be read is not taken for a missing one
    std::fs::create_dir(&params).unwrap();
    let e = ina3d::pipeline::load_ns3_input(&tp)
        .unwrap_err()
        .to_string();
    assert!(e.contains("params.txt"), "{e}");
}

#[test]
fn the_glue_checks_an_aggregations_group_and_reads_version_2_files_without_one() {
    // the snapshot trace without its 5 GB transfer (seconds of ns-3 per run)
    let trace: Vec<FlowRecord> = snapshot_trace()
        .into_iter()
        .filter(|r| r.bytes.0 < 1 << 30)
        .collect();
    let dir = emitted_best_effort_on_star(&trace);
    let p = dir.path().join("trace.txt");
    let v3 = std::fs::read_to_string(&p).unwrap();
    let glue_run = || {
        std::process::Command::new(glue())
            .arg(format!("--dir={}", dir.path().display()))
            .output()
            .unwrap()
    };
    // the glue binary itself, on a group it does not know
    std::fs::write(&p, v3.replacen(" up dense ", " up sparse ", 1)).unwrap();
    let o = glue_run();
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("trace.txt:") && e.contains("field agg_group"),
        "{e}"
    );
    // the same file as version 2 wrote it (no group field) runs, to the same fct.csv
    std::fs::write(&p, &v3).unwrap();
    assert!(glue_run().status.success());
    let fct3 = std::fs::read_to_string(dir.path().join("fct.csv")).unwrap();
    assert!(fct3.lines().count() > 8, "fct.csv: {fct3}");
    let v2: String = v3
        .lines()
        .map(|l| {
            if l.starts_with("# ina3d-ns3 trace v3") {
                return "# ina3d-ns3 trace v2".to_string();
            }
            let t: Vec<&str> = l.split_whitespace().collect();
            if l.starts_with('#') || t.len() < 16 {
                return l.to_string();
            }
            let mut t = t;
            t.remove(14);
            t.join(" ")
        })
        .map(|l| l + "\n")
        .collect();
    std::fs::write(&p, v2).unwrap();
    let o = glue_run();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let fct2 = std::fs::read_to_string(dir.path().join("fct.csv")).unwrap();
    assert_eq!(fct2, fct3);
}

#[test]
fn a_trace_naming_a_node_the_topology_lacks_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let trace = vec![rec(0, 0, 99, 10, &[], Mode::Net, Class::Tp)];
    let e = emit(
        &trace,
        &InaConfig::default(),
        &star(4),
        &EmitOptions::default(),
        dir.path(),
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            Ns3Error::UnknownNode {
                node: NodeId(99),
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("node 99"), "{e}");
    assert!(
        !dir.path().join("flow.txt").exists(),
        "nothing written on bad input"
    );
}

#[test]
fn an_unsupported_link_rate_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = star(2);
    t.links[1].rate = BitsPerSec(1500);
    let e = emit(
        &[rec(0, 0, 1, 10, &[], Mode::Net, Class::Tp)],
        &InaConfig::default(),
        &t,
        &EmitOptions::default(),
        dir.path(),
    )
    .unwrap_err();
    assert!(
        matches!(e, Ns3Error::UnsupportedRate { rate: 1500, .. }),
        "{e}"
    );
}

#[test]
fn cycles_and_dangling_deps_are_rejected_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let cyc = vec![
        rec(0, 0, 1, 10, &[1], Mode::Net, Class::Tp),
        rec(1, 1, 0, 10, &[0], Mode::Net, Class::Tp),
    ];
    let e = emit(
        &cyc,
        &InaConfig::default(),
        &star(2),
        &EmitOptions::default(),
        dir.path(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("cycle"), "{e}");
    let dangling = vec![rec(0, 0, 1, 10, &[42], Mode::Net, Class::Tp)];
    let e = emit(
        &dangling,
        &InaConfig::default(),
        &star(2),
        &EmitOptions::default(),
        dir.path(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("unknown record 42"), "{e}");
}

// ---------------------------------------------------------------- reference files

#[test]
fn reference_hpcc_flow_file_parses_with_warnings_for_its_count_and_free_text() {
    let p = fixture("hpcc/flow.txt");
    let text = std::fs::read_to_string(&p).unwrap();
    let (flows, warnings) = flow_txt::parse(&p, &text).unwrap();
    assert!(
        flows.len() > 2,
        "all valid rows are read despite the header count of 2"
    );
    assert_eq!(flows[0].src, NodeId(2));
    assert_eq!(flows[0].size, Bytes(200_000_000));
    assert_eq!(flows[0].start, Nanos(2_000_000_000));
    assert!(
        warnings
            .iter()
            .any(|w| w.msg.contains("header says 2 flows")),
        "{warnings:?}"
    );
    assert!(
        warnings.iter().any(|w| w.msg.contains("not a flow row")),
        "{warnings:?}"
    );
    // CRLF gives the same answer
    let crlf = text.replace('\n', "\r\n");
    assert_eq!(flow_txt::parse(&p, &crlf).unwrap().0, flows);
}

#[test]
fn reference_topologies_parse_hpcc_fat_tree_and_simai_six_field_header() {
    let p = fixture("hpcc/fat.txt");
    let text = std::fs::read_to_string(&p).unwrap();
    let (t, warnings) = topology_txt::parse(&p, &text).unwrap();
    assert_eq!((t.nodes, t.switches.len(), t.links.len()), (376, 56, 480));
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(
        topology_txt::parse(&p, &text.replace('\n', "\r\n"))
            .unwrap()
            .0,
        t
    );
    let p = fixture("simai/Spectrum-X_16g_8gps_100Gbps_A100.txt");
    let (t, _) = topology_txt::read_file(&p).unwrap();
    assert_eq!(
        (
            t.nodes,
            t.nvswitches.len(),
            t.switches.len(),
            t.flavor.clone()
        ),
        (
            90,
            2,
            72,
            TopoFlavor::Simai {
                gpus_per_server: 8,
                gpu_type: "A100".into()
            }
        )
    );
    assert_eq!(t.links[0].rate, BitsPerSec::gbps(2400));
}

#[test]
fn reference_simai_fct_parses_every_row_into_node_ids() {
    let p = fixture("simai/fct.head40.txt");
    let text = std::fs::read_to_string(&p).unwrap();
    assert_eq!(ingest::detect(&p, &text), Some(Kind::Fct));
    let t = parse_fct(&p, &text);
    assert_eq!(t.rows.len(), 40);
    assert!(t.warnings.is_empty(), "{:?}", t.warnings);
    // 0b001f01 is node 0x1f = 31
    assert_eq!(t.rows[0][1], "31");
    assert_eq!(t.rows[0][2], "28");
    assert_eq!(t.rows[0][7], "1048576");
    assert_eq!(parse_fct(&p, &text.replace('\n', "\r\n")).rows, t.rows);
}

#[test]
fn simai_analytical_end_to_end_csv_ingests_with_its_minus_nan_cells_empty() {
    // SimAI 1.6's analytical front-end prints `-nan` for the bandwidth of a collective
    // that took no time; `ns3 ingest` used to reject the whole file.
    let p = fixture("simai/new-dp4-EndToEnd.csv");
    let text = std::fs::read_to_string(&p).unwrap();
    assert_eq!(ingest::detect(&p, &text), Some(Kind::EndToEnd));
    let t = parse_end_to_end(&p, &text).unwrap();
    let grad = |metric: &str| {
        t.rows
            .iter()
            .find(|r| r[1] == "grad_all_reduce" && r[3] == metric)
            .map(|r| r[4].clone())
    };
    assert_eq!(grad("fwd_algbw").as_deref(), Some(""));
    assert_eq!(grad("wg_total_comm").as_deref(), Some("96332"));
    assert_eq!(grad("wg_busbw").as_deref(), Some("11.64"));
}

#[test]
fn reference_end_to_end_csv_parses_with_nan_and_none_as_empty_values() {
    let p = fixture("simai/EndToEnd.csv");
    let text = std::fs::read_to_string(&p).unwrap();
    assert_eq!(ingest::detect(&p, &text), Some(Kind::EndToEnd));
    let t = parse_end_to_end(&p, &text).unwrap();
    assert!(t.warnings.is_empty(), "{:?}", t.warnings);
    let get = |section: &str, metric: &str| {
        t.rows
            .iter()
            .find(|r| r[0] == section && r[3] == metric)
            .map(|r| r[4].clone())
    };
    assert_eq!(get("summary", "expose_tp_comm").as_deref(), Some("633"));
    assert_eq!(get("total", "total_time").as_deref(), Some("1745.246"));
    assert_eq!(get("layer", "fwd_compute").as_deref(), Some("556"));
    // `nan` algbw of the wg comm and `NONE` in the SUM row are empty, not zero
    assert_eq!(get("layer", "wg_algbw").as_deref(), Some(""));
    assert_eq!(get("sum", "fwd_algbw").as_deref(), Some(""));
    assert!(t.rows.iter().all(|r| r[5] == "us" || r[5] == "GB/s"));
}

#[test]
fn pfc_and_qlen_lines_become_named_columns_and_bad_lines_are_warned() {
    let dir = tempfile::tempdir().unwrap();
    let pfc = dir.path().join("pfc.txt");
    std::fs::write(
        &pfc,
        "2000000123 320 1 3 1\r\n2000000999 320 1 3 0\r\ngarbage\n",
    )
    .unwrap();
    let qlen = dir.path().join("qlen.txt");
    std::fs::write(&qlen, "1000 320 2 9000\n").unwrap();
    let out = dir.path().join("tidy");
    let done = ingest::ingest(&[pfc, qlen], &out).unwrap();
    assert_eq!(done[0].kind, Kind::Pfc);
    assert_eq!(done[0].rows, 2);
    assert!(
        done[0].warnings[0].contains("pfc.txt:3"),
        "{:?}",
        done[0].warnings
    );
    let csv = std::fs::read_to_string(&done[0].output).unwrap();
    assert!(
        csv.starts_with("time_ns,node,node_type,if_index,pause\n2000000123,320,1,3,1\n"),
        "{csv}"
    );
    assert_eq!(
        std::fs::read_to_string(&done[1].output).unwrap(),
        "time_ns,node,if_index,qlen_bytes\n1000,320,2,9000\n"
    );
}

// ---------------------------------------------------------------- AICB

// ---------------------------------------------------------------- real ns-3

fn glue() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| match build_glue(&glue_source_dir(), &glue_binary()) {
        Ok(b) => b,
        Err(e) => panic!("ns-3 glue unavailable — these tests need ns-3, they do not skip: {e}"),
    })
}

fn run(trace: &[FlowRecord], topo: &Topology, ina: &InaConfig, dir: &Path) -> RunReport {
    emit(trace, ina, topo, &EmitOptions::default(), dir).unwrap();
    run_glue(glue(), dir, |_, _| {}).unwrap_or_else(|e| panic!("{e}"))
}

/// Every fct.txt line joins to exactly one network record of the trace, with its bytes.
fn assert_fct_txt_joins(dir: &Path, trace: &[FlowRecord], rows: &[FctRow]) {
    let p = dir.join("fct.txt");
    let t = parse_fct(&p, &std::fs::read_to_string(&p).unwrap());
    assert!(t.warnings.is_empty());
    let net: Vec<&FlowRecord> = trace
        .iter()
        .filter(|r| matches!(r.mode, Mode::Net | Mode::Ina))
        .collect();
    assert_eq!(t.rows.len(), net.len());
    let by_id: BTreeMap<u64, &FctRow> = rows.iter().map(|r| (r.flow_id, r)).collect();
    for (line, r) in t.rows.iter().zip(&net) {
        let row = by_id[&r.id.0];
        assert_eq!(
            (line[1].as_str(), line[2].as_str()),
            (r.src.0.to_string().as_str(), r.dst.0.to_string().as_str())
        );
        assert_eq!(line[7], r.bytes.0.to_string());
        assert_eq!(line[8], row.start_ns.to_string());
        assert_eq!(line[9], row.fct_ns.to_string());
    }
}

#[test]
fn ns3_ring_allreduce_completes_every_flow_with_all_bytes_and_respects_deps() {
    let dir = tempfile::tempdir().unwrap();
    let s = 1 << 20;
    let trace = ring_allreduce(8, s, 0);
    let r = run(&trace, &leaf_spine(), &InaConfig::default(), dir.path());
    assert_eq!(r.rows.len(), trace.len());
    assert_eq!(r.stats["finished"], trace.len() as u64);
    // per rank 2S(n−1)/n bytes sent
    let sent0: u64 = r
        .rows
        .iter()
        .filter(|x| x.src == 0)
        .map(|x| x.size_bytes)
        .sum();
    assert_eq!(sent0, 2 * s * 7 / 8);
    // no faster than the bandwidth bound 2(n−1)/n · S / B
    let bound = BitsPerSec::gbps(100).transmit_time(Bytes(2 * s * 7 / 8)).0;
    assert!(
        r.summary.iteration_time_ns > bound,
        "{} ns vs bound {bound}",
        r.summary.iteration_time_ns
    );
    assert_eq!(
        r.summary.dp_bytes,
        trace.iter().map(|x| x.bytes.0).sum::<u64>()
    );
    assert_fct_txt_joins(dir.path(), &trace, &r.rows);
    assert!(dir.path().join("summary.csv").exists());
}

#[test]
fn ns3_ina_allreduce_sums_correctly_and_beats_the_ring_as_the_model_says() {
    let s = 1 << 20;
    let topo = leaf_spine();
    let dir = tempfile::tempdir().unwrap();
    let trace = ina_allreduce(s);
    let ina = ina_params(InaPolicy::BestEffort);
    let r = run(
        &trace,
        &topo,
        &InaConfig {
            window: 256,
            slots: 8192,
            ..ina.clone()
        },
        dir.path(),
    );
    assert_eq!(r.stats["ina_sum_errors"], 0);
    assert_eq!(
        r.stats["ina_fallback_packets"], 0,
        "8192 slots never run out"
    );
    assert!(r.summary.ina_slot_peak >= 1);
    // each worker sends S up and receives S down
    for w in 0..8 {
        assert_eq!(
            r.rows
                .iter()
                .filter(|x| x.mode == Mode::Ina && x.src == w)
                .map(|x| x.size_bytes)
                .sum::<u64>(),
            s
        );
        assert_eq!(
            r.rows
                .iter()
                .filter(|x| x.mode == Mode::Ina && x.dst == w)
                .map(|x| x.size_bytes)
                .sum::<u64>(),
            s
        );
    }
    assert_fct_txt_joins(dir.path(), &trace, &r.rows);
    let ring_dir = tempfile::tempdir().unwrap();
    let ring = run(
        &ring_allreduce(8, s, 0),
        &topo,
        &InaConfig::default(),
        ring_dir.path(),
    );
    let ina_t = r.summary.iteration_time_ns - 2000; // minus the final compute
    let s_over_b = BitsPerSec::gbps(100).transmit_time(Bytes(s)).0;
    assert!(
        ina_t >= s_over_b,
        "INA cannot beat S/B: {ina_t} < {s_over_b}"
    );
    assert!(
        ina_t < ring.summary.iteration_time_ns,
        "INA {ina_t} ns should beat ring {} ns",
        ring.summary.iteration_time_ns
    );
    eprintln!(
        "INA {ina_t} ns, ring {} ns, S/B {s_over_b} ns",
        ring.summary.iteration_time_ns
    );
}

/// One hierarchical INA all-reduce of `s` bytes on the leaf-spine (aggregation `agg`, ids
/// from `first`): each worker's up edge to its leaf, each leaf's to spine 10, spine 10's
/// down edges to the leaves and the leaves' to the workers. The workers start `lag_ns` late.
fn hier_ina(first: u64, agg: u64, s: u64, lag_ns: u64) -> Vec<FlowRecord> {
    hier_ina_lagged(first, agg, s, [lag_ns, lag_ns])
}

/// [`hier_ina`] with the workers under leaf 8 starting `lag_ns[0]` late and those under
/// leaf 9 `lag_ns[1]` late.
fn hier_ina_lagged(first: u64, agg: u64, s: u64, lag_ns: [u64; 2]) -> Vec<FlowRecord> {
    let mut v = Vec::new();
    let ups: Vec<u64> = (first..first + 8).collect();
    for w in 0..8u32 {
        let mut up = ina_edge(
            first + u64::from(w),
            w,
            8 + w / 4,
            s,
            &[],
            agg,
            8 + w / 4,
            4,
            AggDir::Up,
        );
        up.gap = Nanos(lag_ns[w as usize / 4]);
        v.push(up);
    }
    for (k, leaf) in [8u32, 9].into_iter().enumerate() {
        v.push(ina_edge(
            first + 8 + k as u64,
            leaf,
            10,
            s,
            &ups,
            agg,
            10,
            2,
            AggDir::Up,
        ));
    }
    let spine_ups = [first + 8, first + 9];
    for (k, leaf) in [8u32, 9].into_iter().enumerate() {
        v.push(ina_edge(
            first + 10 + k as u64,
            10,
            leaf,
            s,
            &spine_ups,
            agg,
            10,
            2,
            AggDir::Down,
        ));
    }
    for w in 0..8u32 {
        let from_spine = first + 10 + u64::from(w / 4);
        v.push(ina_edge(
            first + 12 + u64::from(w),
            8 + w / 4,
            w,
            s,
            &[from_spine],
            agg,
            8 + w / 4,
            4,
            AggDir::Down,
        ));
    }
    v
}

#[test]
fn ns3_ina_slot_exhaustion_waits_under_static_and_falls_back_under_best_effort() {
    // A pool of one stream's window: while aggregation 1 (1 MiB) holds a switch's 64 slots,
    // aggregation 2 (64 KiB = 64 packets, its workers 2 µs later) cannot have them there.
    let topo = leaf_spine();
    let pool = pool_of_one_window;
    let mut trace = hier_ina(0, 1, 1 << 20, 0);
    trace.extend(hier_ina(100, 2, 64 * 1024, 2000));
    let mut end = BTreeMap::new();
    for policy in [
        InaPolicy::Static,
        InaPolicy::BestEffort,
        InaPolicy::Priority,
    ] {
        let d = tempfile::tempdir().unwrap();
        let r = run(&trace, &topo, &pool(policy), d.path());
        assert_eq!(r.stats["ina_sum_errors"], 0, "{policy:?}");
        assert_eq!(
            r.summary.ina_slot_peak, 64,
            "{policy:?}: one stream at a time"
        );
        let last = |agg_first: u64| {
            r.rows
                .iter()
                .filter(|x| (agg_first..agg_first + 20).contains(&x.flow_id))
                .map(|x| x.end_ns)
                .max()
                .unwrap()
        };
        end.insert(policy.as_str(), (last(0), last(100)));
        if policy == InaPolicy::BestEffort {
            // refused (aggregation 1 holds its tree for ~90 µs): its 8 workers run the host
            // ring instead, 2·(8−1) = 14 steps of a 8,192-byte chunk each, in 1,000-byte
            // packets: 9 per step, 126 per worker
            assert_eq!(r.stats["ina_fallback_packets"], 8 * 14 * 9);
        } else {
            assert_eq!(r.stats["ina_fallback_packets"], 0, "{policy:?} waits");
        }
    }
    // waiting for the slots puts aggregation 2 behind aggregation 1; falling back does not
    assert!(end["static"].1 > end["static"].0, "{end:?}");
    assert!(end["priority"].1 > end["priority"].0, "{end:?}");
    assert!(end["best-effort"].1 < end["best-effort"].0, "{end:?}");
}

#[test]
fn too_few_slots_are_granted_for_the_whole_tree_so_streams_crossing_at_two_leaves_complete() {
    // Two aggregations over the same tree (leaves 8 and 9, spine 10) and a pool of one
    // stream's window (64 slots, 64 packets each): aggregation 1's workers under leaf 8
    // start at once and those under leaf 9 20 µs later, aggregation 2's the other way
    // round. Granting switch by switch at the first packet, each would hold one leaf and
    // wait for the other forever; granted for the whole tree once all workers have
    // started, aggregation 1 runs (same instant: lower id first) and aggregation 2 waits
    // for all of its tree.
    let topo = leaf_spine();
    let ina = pool_of_one_window(InaPolicy::Static);
    let mut trace = hier_ina_lagged(0, 1, 64 * 1024, [0, 20_000]);
    trace.extend(hier_ina_lagged(100, 2, 64 * 1024, [20_000, 0]));
    let d = tempfile::tempdir().unwrap();
    let r = run(&trace, &topo, &ina, d.path());
    // complete, every byte delivered, the sums right, nothing fell back
    assert_eq!(r.rows.len(), trace.len());
    for t in &trace {
        let row = r.rows.iter().find(|x| x.flow_id == t.id.0).unwrap();
        assert_eq!(row.size_bytes, t.bytes.0, "record {}", t.id.0);
    }
    assert_eq!(r.stats["ina_sum_errors"], 0);
    assert_eq!(r.stats["ina_fallback_packets"], 0);
    // what the switches held (switches.csv): never more than the pool, one stream at a time
    let changes = ina3d::formats::switches_csv::read(&d.path().join("switches.csv")).unwrap();
    assert!(changes.iter().all(|c| c.slots_in_use <= 64), "{changes:?}");
    assert_eq!(r.summary.ina_slot_peak, 64);
    for sw in [8u32, 9, 10] {
        let held: Vec<u32> = changes
            .iter()
            .filter(|c| c.switch.0 == sw)
            .map(|c| c.slots_in_use)
            .collect();
        assert_eq!(
            held,
            vec![64, 0, 64, 0],
            "switch {sw}: one stream, then the other"
        );
    }
    // aggregation 2 is granted the instant aggregation 1 ends (fct.csv times its up edges
    // from the grant), after every switch gave aggregation 1's slots back (switches.csv)
    let last_release = [8u32, 9, 10]
        .iter()
        .map(|&sw| {
            changes
                .iter()
                .find(|c| c.switch.0 == sw && c.slots_in_use == 0)
                .unwrap()
                .time_ns
        })
        .max()
        .unwrap();
    let grant2 = r
        .rows
        .iter()
        .filter(|x| (100..108).contains(&x.flow_id))
        .map(|x| x.start_ns)
        .min()
        .unwrap();
    let end1 = r
        .rows
        .iter()
        .filter(|x| x.flow_id < 100)
        .map(|x| x.end_ns)
        .max()
        .unwrap();
    assert_eq!(grant2, end1);
    assert!(last_release < end1, "{last_release} {end1}");
    // the replayer grants the same way: one aggregation after the other
    let rep = tempfile::tempdir().unwrap();
    replay_into(&trace, &topo, &ina, rep.path());
    let replayed = ina3d::formats::switches_csv::read(&rep.path().join("switches.csv")).unwrap();
    for sw in [8u32, 9, 10] {
        let held: Vec<u32> = replayed
            .iter()
            .filter(|c| c.switch.0 == sw)
            .map(|c| c.slots_in_use)
            .collect();
        assert_eq!(held, vec![64, 0, 64, 0], "replayer, switch {sw}");
    }
}

#[test]
fn both_back_ends_break_a_tie_between_asks_by_aggregation_id() {
    // A pool of one stream's window on the leaf-spine tree (64 slots, 64-packet streams).
    // Aggregation 9 is written before aggregation 7 and both ask at 2 µs. With the tree
    // free, 7 is granted at once and 9 when 7 ends; with aggregation 5 holding the tree,
    // both wait with the same arrival and 5's end grants 7 first. The glue answers an
    // instant's asks and orders equal arrivals by id (InaSlotAdmission); the replayer must
    // do the same whatever order the trace lists them in (docs/model.md#slot-policies).
    let topo = leaf_spine();
    let ina = pool_of_one_window(InaPolicy::Static);
    let s = 64 * 1024;
    for blocked in [false, true] {
        let mut trace = if blocked {
            hier_ina(0, 5, s, 0)
        } else {
            Vec::new()
        };
        trace.extend(hier_ina(100, 9, s, 2000));
        trace.extend(hier_ina(200, 7, s, 2000));
        let d = tempfile::tempdir().unwrap();
        let glue_rows = run(&trace, &topo, &ina, d.path()).rows;
        let routing = ina3d::topology::Routing::new(&topo, 0).unwrap();
        let opts = ina3d::replay::ReplayOptions {
            ina: ina.clone(),
            ..Default::default()
        };
        let replayed = ina3d::replay::simulate(&trace, &topo, &routing, &opts).unwrap();
        for (side, rows) in [("glue", glue_rows), ("replayer", replayed.rows())] {
            // the grant: the up edges start when their aggregation is granted
            let grant = |first: u64| {
                rows.iter()
                    .filter(|x| (first..first + 8).contains(&x.flow_id))
                    .map(|x| x.start_ns)
                    .min()
                    .unwrap()
            };
            let end = |first: u64| {
                rows.iter()
                    .filter(|x| (first..first + 20).contains(&x.flow_id))
                    .map(|x| x.end_ns)
                    .max()
                    .unwrap()
            };
            let first_grant = if blocked { end(0) } else { 2000 };
            assert_eq!(
                grant(200),
                first_grant,
                "{side}, blocked {blocked}: 7 first"
            );
            assert_eq!(grant(100), end(200), "{side}, blocked {blocked}: 9 after 7");
        }
    }
}

#[test]
fn an_aggregation_refused_under_best_effort_runs_the_same_host_ring_in_both_back_ends() {
    // Aggregation 1 (1 MiB) holds the whole pool of every switch of the tree when
    // aggregation 2 (64 KiB, its workers 2 µs later) asks: refused, aggregation 2 runs the
    // replayer's fallback, a ring all-reduce over its 8 workers, in both back-ends.
    let topo = leaf_spine();
    let ina = pool_of_one_window(InaPolicy::BestEffort);
    let mut trace = hier_ina(0, 1, 1 << 20, 0);
    trace.extend(hier_ina(100, 2, 64 * 1024, 2000));
    let (ns, rep) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let r = run(&trace, &topo, &ina, ns.path());
    replay_into(&trace, &topo, &ina, rep.path());
    let replayed = ina3d::formats::fct_csv::read(&rep.path().join("fct.csv")).unwrap();
    let span = |rows: &[FctRow]| {
        let mine: Vec<&FctRow> = rows.iter().filter(|x| x.flow_id >= 100).collect();
        let start = mine.iter().map(|x| x.start_ns).min().unwrap();
        let end = mine.iter().map(|x| x.end_ns).max().unwrap();
        (start, end - start)
    };
    let (glue_start, glue_ring) = span(&r.rows);
    let (rep_start, rep_ring) = span(&replayed);
    eprintln!(
        "ring: glue {glue_ring} ns from {glue_start}, replayer {rep_ring} ns from {rep_start}"
    );
    assert_eq!(
        glue_start, rep_start,
        "both answer when the last worker is ready"
    );
    let err = (rep_ring as f64 - glue_ring as f64) / glue_ring as f64;
    assert!(
        err.abs() < 0.05,
        "ring: replayer {rep_ring} ns, glue {glue_ring} ns"
    );
    // every edge of the refused aggregation ends with the ring, with all its bytes
    let ends: std::collections::BTreeSet<u64> = r
        .rows
        .iter()
        .filter(|x| x.flow_id >= 100)
        .map(|x| x.end_ns)
        .collect();
    assert_eq!(ends.len(), 1);
    assert!(r
        .rows
        .iter()
        .filter(|x| x.flow_id >= 100)
        .all(|x| x.size_bytes == 64 * 1024));
}

#[test]
fn a_pool_smaller_than_the_window_keeps_w_packets_in_flight_per_round_trip() {
    // Slots 8 < window 256: w = 8, and the workers keep 8 packets unanswered (not 256
    // queued at the switches). A sequence number's round trip is 4 hops of 1 µs, each
    // also serialising its 1,072-byte packet at 100 Gb/s (85.76 ns): 4,343.04 ns; 1 MiB
    // is 1,024 packets, 128 rounds of 8.
    let ina = InaConfig {
        slots: 8,
        payload: Bytes(1024),
        window: 256,
        policy: Some(InaPolicy::BestEffort),
        classes: vec![Class::Dp],
        ..Default::default()
    };
    let trace = hier_ina(0, 1, 1 << 20, 0);
    let d = tempfile::tempdir().unwrap();
    let r = run(&trace, &leaf_spine(), &ina, d.path());
    assert_eq!(r.stats["ina_sum_errors"], 0);
    assert_eq!(r.stats["ina_fallback_packets"], 0);
    assert_eq!(r.summary.ina_slot_peak, 8);
    let want = 128.0 * 4.0 * (1000.0 + 1072.0 * 8.0 / 100.0);
    let got = r.summary.iteration_time_ns as f64;
    assert!(
        (got - want).abs() / want < 0.01,
        "{got} ns, w packets per round trip gives {want} ns"
    );
    // the replayer's window round trip has the same store-and-forward per hop and its
    // stream ends with its last round (netmodel::window_round_trip, ina_tail): it agrees
    // with the glue's packets (with a propagation-only round trip and a latency after
    // the fluid's last byte it gave 1,097,728 B / (8 × 1072 B / 4 µs) + 4 µs = 516 µs,
    // 7.3 % short)
    let rep = tempfile::tempdir().unwrap();
    replay_into(&trace, &leaf_spine(), &ina, rep.path());
    let replayed = ina3d::formats::fct_csv::read(&rep.path().join("fct.csv")).unwrap();
    let rep_end = replayed.iter().map(|x| x.end_ns).max().unwrap() as f64;
    eprintln!("window-bound stream: glue {got} ns, replayer {rep_end} ns");
    assert!(
        (rep_end - got).abs() / got < 0.005,
        "replayer {rep_end} ns, glue {got} ns"
    );
}

#[test]
fn a_stream_holds_w_slots_from_its_first_packet_to_its_last_result_leaving_the_switch() {
    use ina3d::fct::switch_slots;
    use ina3d::formats::switches_csv;
    // w = min(window, packets of the stream, pool): bound by each in turn
    for (s, window, slots, w) in [
        (64 * 1024, 256, 8192, 64), // 64 packets
        (1 << 20, 256, 8192, 256),  // the window
        (1 << 20, 256, 32, 32),     // the pool (best-effort draws from the whole pool)
    ] {
        let d = tempfile::tempdir().unwrap();
        let ina = InaConfig {
            slots,
            payload: Bytes(1024),
            window,
            policy: Some(InaPolicy::BestEffort),
            classes: vec![Class::Dp],
            ..Default::default()
        };
        let trace = hier_ina(0, 1, s, 0);
        let r = run(&trace, &leaf_spine(), &ina, d.path());
        assert_eq!(r.stats["ina_sum_errors"], 0);
        assert_eq!(r.stats["ina_fallback_packets"], 0);
        assert_eq!(r.summary.ina_slot_peak, w);
        let changes = switches_csv::read(&d.path().join("switches.csv")).unwrap();
        let usage: std::collections::BTreeMap<u32, ina3d::fct::SwitchSlots> =
            switch_slots(&changes)
                .into_iter()
                .map(|u| (u.switch.0, u))
                .collect();
        assert_eq!(usage.keys().copied().collect::<Vec<_>>(), vec![8, 9, 10]);
        // one packet's hop: 1,072 wire bytes at 100 Gb/s (85.76 ns) plus 1 µs of wire
        let hop = 1086;
        for sw in [8u32, 9, 10] {
            let mine: Vec<_> = changes.iter().filter(|c| c.switch.0 == sw).collect();
            assert_eq!(
                mine.iter().map(|c| c.slots_in_use).collect::<Vec<_>>(),
                vec![w as u32, 0],
                "switch {sw}: taken once, given back once"
            );
            // taken when the first packet arrives: the first edge into the switch starts
            // one hop earlier; given back when the last result leaves: the edges out of
            // it end one hop later (fct.csv, timed by the records, not by the slots)
            let edges = |up: bool| -> Vec<&FctRow> {
                trace
                    .iter()
                    .filter(|t| {
                        let a = t.agg.unwrap();
                        (a.dir == AggDir::Up) == up
                            && if up { t.dst.0 == sw } else { t.src.0 == sw }
                    })
                    .map(|t| r.rows.iter().find(|x| x.flow_id == t.id.0).unwrap())
                    .collect()
            };
            let first_in = edges(true).iter().map(|x| x.start_ns).min().unwrap();
            let last_out = edges(false).iter().map(|x| x.end_ns).min().unwrap();
            let (taken, freed) = (mine[0].time_ns, mine[1].time_ns);
            assert!(
                taken.abs_diff(first_in + hop) <= 2,
                "switch {sw}: taken {taken}, first packet in at {}",
                first_in + hop
            );
            assert!(
                freed.abs_diff(last_out - hop) <= 2,
                "switch {sw}: freed {freed}, last result out at {}",
                last_out - hop
            );
            assert_eq!(usage[&sw].slot_time, w * (freed - taken));
        }
    }
}

/// A directory holding `ns3 emit` output for a 4-rank ring all-reduce of `bytes` on a
/// 4-host star, ready for the glue (or for a test to break one of its files first).
fn emitted_ring_on_star(bytes: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    emit(
        &ring_allreduce(4, bytes, 0),
        &InaConfig::default(),
        &star(4),
        &EmitOptions::default(),
        dir.path(),
    )
    .unwrap();
    dir
}

#[test]
fn a_glue_run_that_stops_early_is_an_error_and_leaves_no_complete_looking_outputs() {
    let dir = emitted_ring_on_star(1 << 20);
    // stop the simulation after 10 µs: the ring needs far longer
    let params = std::fs::read_to_string(dir.path().join("params.txt")).unwrap();
    let cut: String = params
        .lines()
        .map(|l| {
            if l.starts_with("STOP_TIME_S") {
                "STOP_TIME_S 0.00001".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(dir.path().join("params.txt"), cut).unwrap();
    let e = run_glue(glue(), dir.path(), |_, _| {}).unwrap_err();
    assert!(matches!(e, Ns3Error::Incomplete(_)), "{e}");
    assert!(e.to_string().contains("unfinished"), "{e}");
    for f in ["done", "fct.csv", "fct.txt", "summary.csv"] {
        assert!(
            !dir.path().join(f).exists(),
            "{f} must not exist after an incomplete run"
        );
    }
    assert!(dir.path().join("fct.partial.csv").exists());
}

#[test]
fn a_trace_the_glue_rejects_is_reported_with_file_and_line() {
    let dir = emitted_ring_on_star(4096);
    let t = std::fs::read_to_string(dir.path().join("trace.txt")).unwrap();
    std::fs::write(
        dir.path().join("trace.txt"),
        t.replace("0 0 1 1024", "0 0 77 1024"),
    )
    .unwrap();
    let e = run_glue(glue(), dir.path(), |_, _| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("trace.txt:4") && e.contains("node 77"), "{e}");
}

#[test]
fn ids_and_counts_beyond_32_bits_in_trace_txt_are_refused_by_the_glue_not_truncated() {
    // 2^32 + 1 would become node 1 (a valid node of the star) if read into 32 bits
    let dir = emitted_ring_on_star(4096);
    let p = dir.path().join("trace.txt");
    let t = std::fs::read_to_string(&p).unwrap();
    for (from, to, field) in [
        (
            "0 0 1 1024",
            "0 0 4294967297 1024",
            "field dst: node 4294967297",
        ),
        (
            "0 0 1 1024",
            "0 4294967296 1 1024",
            "field src: node 4294967296",
        ),
        // a gap beyond the simulator's picosecond clock
        (
            "0 0 1 1024 0",
            "0 0 1 1024 18446744073709551615",
            "field gap_ns",
        ),
        // u64::MAX bytes: refused at once, not 400 s of silence (issue 24)
        (
            "0 0 1 1024",
            "0 0 1 18446744073709551615",
            "field bytes: 18446744073709551615 bytes",
        ),
    ] {
        assert!(t.contains(from), "{t}");
        std::fs::write(&p, t.replacen(from, to, 1)).unwrap();
        // the glue binary itself (`ns3 run` refuses such a file before starting it)
        let o = std::process::Command::new(glue())
            .arg(format!("--dir={}", dir.path().display()))
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{to}: {e}");
        assert!(e.contains("trace.txt:4") && e.contains(field), "{to}: {e}");
    }
}

#[test]
fn a_pair_missing_from_routes_txt_makes_the_glue_run_fail_naming_the_pair() {
    // the glue has no static or global routing to fall back on: routes.txt is the only table
    let dir = emitted_ring_on_star(65536);
    let p = dir.path().join("routes.txt");
    let t = std::fs::read_to_string(&p).unwrap();
    assert!(t.contains("PATH 1 2 0 4:1 2:2\n"), "{t}");
    std::fs::write(&p, t.replace("PATH 1 2 0 4:1 2:2\n", "")).unwrap();
    let e = run_glue(glue(), dir.path(), |_, _| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("unfinished"), "{e}");
    assert!(
        e.contains("no route for packets from node 1 to node 2 on channel 0"),
        "{e}"
    );
}

#[test]
fn a_routes_txt_hop_over_a_link_that_does_not_join_its_nodes_is_rejected_with_file_and_line() {
    let dir = emitted_ring_on_star(4096);
    let p = dir.path().join("routes.txt");
    let t = std::fs::read_to_string(&p).unwrap();
    let line = t.lines().position(|l| l == "PATH 1 2 0 4:1 2:2").unwrap() + 1;
    std::fs::write(&p, t.replace("PATH 1 2 0 4:1 2:2", "PATH 1 2 0 4:3 2:2")).unwrap();
    let e = run_glue(glue(), dir.path(), |_, _| {})
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!("routes.txt:{line}"))
            && e.contains("link 3 does not join node 1 and node 4"),
        "{e}"
    );
}

#[test]
fn a_missing_ns3_install_gives_the_install_hint() {
    let e = build_glue_checking(
        &glue_source_dir(),
        Path::new("/nonexistent/ina3d-ns3"),
        Path::new("/nonexistent/ns3/core-module.h"),
    )
    .unwrap_err();
    assert!(matches!(e, Ns3Error::Ns3Missing(_)));
    assert!(
        e.to_string()
            .contains("apt-get install ns3 libns3-dev libgsl-dev")
            && e.to_string().contains("make ns3-deps"),
        "{e}"
    );
}

#[test]
fn glue_summary_csv_ingests_with_its_named_columns() {
    let dir = tempfile::tempdir().unwrap();
    let r = run(
        &ring_allreduce(4, 65536, 0),
        &star(4),
        &InaConfig::default(),
        dir.path(),
    );
    let out = dir.path().join("tidy");
    let done = ingest::ingest(
        &[dir.path().join("summary.csv"), dir.path().join("fct.txt")],
        &out,
    )
    .unwrap();
    assert_eq!(done[0].kind, Kind::Summary);
    let csv = std::fs::read_to_string(&done[0].output).unwrap();
    assert!(csv.lines().next().unwrap().contains("iteration_time_ns"));
    assert!(csv.contains(&r.summary.iteration_time_ns.to_string()));
    assert_eq!(done[1].kind, Kind::Fct);
    assert_eq!(done[1].rows, 4 * 6);
}

mod parsers_never_panic {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn on_arbitrary_text(s in "(?s).{0,400}") {
            let p = Path::new("x.txt");
            let _ = flow_txt::parse(p, &s);
            let _ = topology_txt::parse(p, &s);
            let _ = glue_trace_txt::parse(p, &s);
            let _ = parse_fct(p, &s);
            let _ = parse_end_to_end(p, &s);
            let _ = ingest::parse_pfc(p, &s);
            let _ = ingest::parse_summary(p, &s);
        }

        #[test]
        fn on_number_soup(lines in proptest::collection::vec("[0-9a-f .,\\-]{0,40}", 0..12)) {
            let s = lines.join("\n");
            let p = Path::new("x.txt");
            let _ = flow_txt::parse(p, &s);
            let _ = topology_txt::parse(p, &s);
            let _ = glue_trace_txt::parse(p, &s);
            let _ = parse_fct(p, &s);
            let _ = parse_end_to_end(p, &s);
        }
    }
}

/// The whole CLI path on a generated trace: `ina3d trace` (tiny.toml: TP2·PP2·DP2, 4
/// layers) → `ina3d ns3 emit` → `ina3d ns3 run`, with host rings and with hierarchical INA.
#[test]
fn generated_tiny_job_runs_on_ns3_through_the_cli_and_ina_shortens_the_iteration() {
    let bin = env!("CARGO_BIN_EXE_ina3d");
    let dir = tempfile::tempdir().unwrap();
    let topo = "leaf-spine:leaves=2,spines=2,hosts-per-leaf=4,gpus-per-server=1,nvlink=off";
    let tiny = Path::new(env!("CARGO_MANIFEST_DIR")).join("traces/example/tiny.toml");
    let sh = |args: &[&str]| {
        let o = std::process::Command::new(bin).args(args).output().unwrap();
        assert!(
            o.status.success(),
            "ina3d {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let mut iteration = BTreeMap::new();
    for (name, extra) in [
        ("ring", &[][..]),
        (
            "ina",
            &[
                "--ina",
                "hierarchical",
                "--ina-switches",
                "all",
                "--ina-payload",
                "1024",
            ][..],
        ),
    ] {
        let trace = dir.path().join(format!("{name}.csv"));
        let out = dir.path().join(name);
        let mut args = vec![
            "trace",
            tiny.to_str().unwrap(),
            "--topology",
            topo,
            "-o",
            trace.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        sh(&args);
        sh(&[
            "ns3",
            "emit",
            trace.to_str().unwrap(),
            "--topology",
            topo,
            "-o",
            out.to_str().unwrap(),
        ]);
        let log = sh(&[
            "ns3",
            "run",
            out.to_str().unwrap(),
            "--glue",
            glue().to_str().unwrap(),
        ]);
        assert!(log.contains("ns-3:"), "{log}");
        let s: ina3d::fct::Summary = csv::Reader::from_path(out.join("summary.csv"))
            .unwrap()
            .deserialize()
            .next()
            .unwrap()
            .unwrap();
        let records = ina3d::trace::read(&trace).unwrap().records;
        assert_eq!(s.records, records.len() as u64);
        assert_eq!(s.backend, "ns3");
        iteration.insert(name, s.iteration_time_ns);
    }
    assert!(iteration["ina"] < iteration["ring"], "{iteration:?}");
}

/// The tiny job (tiny.toml, host rings) through `ina3d trace` → `ns3 emit --transport T` →
/// `ns3 run`, under both transports: every record finishes with its bytes, nothing is
/// dropped, and every host NIC carried exactly the wire bytes of the records it sent —
/// to the byte under `roce` (a packet holds one record's bytes: payload + 48 per 1,000),
/// at least that plus TCP's 54 bytes a segment (and within 1 % of it) under `tcp`.
#[test]
fn the_tiny_job_completes_under_both_transports_with_every_byte_on_its_nic_and_no_drop() {
    let bin = env!("CARGO_BIN_EXE_ina3d");
    let dir = tempfile::tempdir().unwrap();
    let topo = "leaf-spine:leaves=2,spines=2,hosts-per-leaf=4,gpus-per-server=1,nvlink=off";
    let tiny = Path::new(env!("CARGO_MANIFEST_DIR")).join("traces/example/tiny.toml");
    let sh = |args: &[&str]| {
        let o = std::process::Command::new(bin).args(args).output().unwrap();
        assert!(
            o.status.success(),
            "ina3d {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    let trace = dir.path().join("ring.csv");
    let t = trace.to_str().unwrap();
    sh(&["trace", tiny.to_str().unwrap(), "--topology", topo, "-o", t]);
    let records = ina3d::trace::read(&trace).unwrap().records;
    // payload each host sends over the network, and the records it sends
    let mut sent: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for r in records.iter().filter(|r| r.mode == Mode::Net) {
        sent.entry(r.src.0).or_default().push(r.bytes.0);
    }
    assert!(sent.len() >= 4, "the tiny job's rings cross the network");
    for transport in [Transport::Roce, Transport::Tcp] {
        let out = dir.path().join(transport.as_str());
        let o = out.to_str().unwrap();
        sh(&[
            "ns3",
            "emit",
            t,
            "--topology",
            topo,
            "--transport",
            transport.as_str(),
            "-o",
            o,
        ]);
        let params = std::fs::read_to_string(out.join("params.txt")).unwrap();
        assert!(
            params.contains(&format!("\nTRANSPORT {transport}\n")),
            "{params}"
        );
        sh(&["ns3", "run", o, "--glue", glue().to_str().unwrap()]);
        let rows = ina3d::formats::fct_csv::read(&out.join("fct.csv")).unwrap();
        assert_eq!(
            rows.len(),
            records.len(),
            "{transport}: every record has a row"
        );
        for (row, r) in rows.iter().zip(&records) {
            assert_eq!((row.flow_id, row.size_bytes), (r.id.0, r.bytes.0));
            assert!(row.end_ns >= row.start_ns, "{transport}: {row:?}");
        }
        let stats = ina3d::ns3::run::read_stats(&out.join("stats.txt")).unwrap();
        assert_eq!(stats["dropped_packets"], 0, "{transport}");
        let links = ina3d::formats::links_csv::read(&out.join("links.csv")).unwrap();
        for (host, sizes) in &sent {
            let nic: u64 = links
                .iter()
                .filter(|c| c.from.0 == *host)
                .map(|c| c.bytes)
                .sum();
            let header = if transport == Transport::Roce { 48 } else { 54 };
            let exact: u64 = sizes
                .iter()
                .map(|b| Bytes(*b).with_headers(Bytes(1000), Bytes(header)).0)
                .sum();
            if transport == Transport::Roce {
                assert_eq!(nic, exact, "roce: host {host}'s NIC");
            } else {
                // segments may carry less than 1,000 bytes when the socket had less
                // queued: never fewer headers than full segments need
                let payload: u64 = sizes.iter().sum();
                let fewest = Bytes(payload).with_headers(Bytes(1000), Bytes(54)).0;
                assert!(
                    nic >= fewest && nic <= fewest + fewest / 100,
                    "tcp: host {host}'s NIC carried {nic} B, full segments {fewest} B"
                );
            }
        }
    }
}

#[test]
fn ns3_per_flow_tcp_connections_complete_too_and_pay_a_handshake_per_step() {
    let trace = ring_allreduce(4, 1 << 18, 0);
    let mut t = BTreeMap::new();
    for tcp in [
        ina3d::ns3::TcpConnections::Persistent,
        ina3d::ns3::TcpConnections::PerFlow,
    ] {
        let dir = tempfile::tempdir().unwrap();
        emit(
            &trace,
            &InaConfig::default(),
            &star(4),
            &EmitOptions {
                tcp,
                transport: ina3d::ns3::Transport::Tcp,
                ..Default::default()
            },
            dir.path(),
        )
        .unwrap();
        let r = run_glue(glue(), dir.path(), |_, _| {}).unwrap();
        assert_eq!(r.rows.len(), trace.len());
        t.insert(tcp.as_str(), r.summary.iteration_time_ns);
    }
    // 6 dependent steps; with a connection per record each waits for a handshake (SYN out
    // and SYN-ACK back: 4 hops of 1 µs) before its data, which then needs one way (2 µs)
    // plus its serialization (64 KiB in 1,000-byte segments of 54 header bytes)
    let ser = BitsPerSec::gbps(100)
        .transmit_time(Bytes(65536).with_headers(Bytes(1000), Bytes(54)))
        .0;
    let handshakes = 6 * (4_000 + 2_000 + ser);
    assert!(t["per-flow"] >= handshakes, "{t:?} vs {handshakes} ns");
    // a persistent connection pays no handshake
    assert!(t["persistent"] < handshakes - 6 * 2_000, "{t:?}");
}

#[test]
fn ns3_runs_are_deterministic_and_parsimon_fct_puts_the_record_id_first() {
    let trace = ring_allreduce(4, 1 << 16, 100);
    let mut outputs = Vec::new();
    for _ in 0..2 {
        let dir = tempfile::tempdir().unwrap();
        emit(
            &trace,
            &InaConfig::default(),
            &star(4),
            &EmitOptions {
                flavor: Flavor::Parsimon,
                ..Default::default()
            },
            dir.path(),
        )
        .unwrap();
        run_glue(glue(), dir.path(), |_, _| {}).unwrap();
        outputs.push((
            std::fs::read(dir.path().join("fct.csv")).unwrap(),
            std::fs::read_to_string(dir.path().join("fct.txt")).unwrap(),
        ));
    }
    assert_eq!(outputs[0], outputs[1], "same input, byte-identical outputs");
    let p = Path::new("fct.txt");
    let t = parse_fct(p, &outputs[0].1);
    assert!(t.warnings.is_empty());
    let ids: Vec<String> = t.rows.iter().map(|r| r[0].clone()).collect();
    assert_eq!(
        ids,
        trace.iter().map(|r| r.id.0.to_string()).collect::<Vec<_>>()
    );
}

#[test]
fn simai_files_warn_about_link_speeds_simais_stock_config_lacks() {
    let odd =
        Topology::from_spec("leaf-spine:leaves=2,spines=1,hosts-per-leaf=2,nic=10Gbps,nvlink=off")
            .unwrap();
    let w = ina3d::ns3::emit::simai_rate_warnings(&odd);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains("10Gbps") && w[0].contains("config.txt"),
        "{w:?}"
    );
    // the stock speeds are those of SimAI's own configuration file
    let conf = std::fs::read_to_string(fixture("simai/SimAI.conf")).unwrap();
    let kmax: Vec<u64> = conf
        .lines()
        .find_map(|l| l.strip_prefix("KMAX_MAP "))
        .unwrap()
        .split_whitespace()
        .skip(1)
        .step_by(2)
        .map(|r| r.parse::<u64>().unwrap() / 1_000_000_000)
        .collect();
    assert_eq!(kmax, ina3d::ns3::emit::SIMAI_STOCK_RATES_GBPS);
    // stock speeds, NVLink ignored: nothing to say
    let ok = Topology::from_spec("fat-tree:k=4").unwrap();
    assert!(ina3d::ns3::emit::simai_rate_warnings(&ok).is_empty());
}

// ---------------------------------------------------------------- observed paths

/// Replays `trace` on `topo` with the routes `ns3 emit` gives the glue (seed 0) and writes
/// the replayer's outputs (fct.csv, summary.csv, links.csv, switches.csv) into `dir`.
fn replay_into(trace: &[FlowRecord], topo: &Topology, ina: &InaConfig, dir: &Path) {
    use ina3d::replay::{self, ReplayOptions};
    let routing = ina3d::topology::Routing::new(topo, 0).unwrap();
    let opts = ReplayOptions {
        ina: ina.clone(),
        trace_name: "test".into(),
        ..ReplayOptions::default()
    };
    let r = replay::simulate(trace, topo, &routing, &opts).unwrap();
    replay::write_outputs(dir, &r).unwrap();
}

#[cfg(feature = "tables")]
/// The glue's and the replayer's links.csv rows of one trace.
fn both_links(
    trace: &[FlowRecord],
    topo: &Topology,
    ina: &InaConfig,
) -> (tempfile::TempDir, tempfile::TempDir) {
    let (rep, ns) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    replay_into(trace, topo, ina, rep.path());
    run(trace, topo, ina, ns.path());
    (rep, ns)
}

#[cfg(feature = "tables")]
#[test]
fn ns3_forwards_exactly_the_bytes_the_replayer_puts_on_every_channel_for_ina() {
    use ina3d::report::links::{check_links, read_links_csv};
    // INA packets carry the replayer's 48 header bytes: the counts are byte-exact.
    let ina = InaConfig {
        slots: 8192,
        window: 256,
        ..ina_params(InaPolicy::BestEffort)
    };
    let (rep, ns) = both_links(&ina_allreduce(1 << 18), &leaf_spine(), &ina);
    let r = read_links_csv(&rep.path().join("links.csv")).unwrap();
    let n = read_links_csv(&ns.path().join("links.csv")).unwrap();
    // every worker link carries S up and S down, each 1,024-B packet with 48 B of headers
    let wire = (1u64 << 18) + (1u64 << 18).div_ceil(1024) * 48;
    assert_eq!(
        n.iter()
            .filter(|c| c.link < 8)
            .map(|c| c.bytes)
            .collect::<Vec<_>>(),
        vec![wire; 16]
    );
    assert_eq!(
        n.len(),
        16 + 4,
        "8 host links and 2 leaf-spine links, both ways"
    );
    assert_eq!(check_links(&r, &n, 0.0), vec![]);
}

#[cfg(feature = "tables")]
#[test]
fn ns3_link_counts_agree_with_the_replayer_to_the_byte_on_every_channel_of_an_unaltered_ring() {
    use ina3d::report::links::{compare_dirs, LinkOutcome};
    let trace = ring_allreduce(8, 1 << 20, 0);
    let (rep, ns) = both_links(&trace, &leaf_spine(), &InaConfig::default());
    let LinkOutcome::Checked(l) = compare_dirs(rep.path(), ns.path(), None).unwrap() else {
        panic!("both directories have links.csv")
    };
    // RoCE packets carry the replayer's 48 header bytes, one record's bytes each
    assert_eq!(l.tolerance, 0.0);
    assert_eq!(l.differing(), vec![]);
    // 8 host links both ways, plus the fabric channels the ring's two rack crossings use
    assert!(l.channels.len() >= 16 + 4, "{}", l.channels.len());
    // control frames are counted apart, never as data
    let control = std::fs::read_to_string(ns.path().join("links_control.csv")).unwrap();
    assert!(control.starts_with("link,from,to,rate_bps,bytes,utilisation\n"));
}

#[cfg(feature = "tables")]
#[test]
fn under_tcp_link_counts_agree_within_the_header_tolerance_the_run_declares() {
    use ina3d::report::links::{compare_dirs, LinkOutcome, TCP_LINK_TOLERANCE};
    let trace = ring_allreduce(8, 1 << 20, 0);
    let topo = leaf_spine();
    let (rep, ns) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    replay_into(&trace, &topo, &InaConfig::default(), rep.path());
    let opts = EmitOptions {
        transport: Transport::Tcp,
        ..Default::default()
    };
    emit(&trace, &InaConfig::default(), &topo, &opts, ns.path()).unwrap();
    let r = run_glue(glue(), ns.path(), |_, _| {}).unwrap();
    assert_eq!(r.stats["net_header_bytes"], 54);
    let LinkOutcome::Checked(l) = compare_dirs(rep.path(), ns.path(), None).unwrap() else {
        panic!("both directories have links.csv")
    };
    assert_eq!(l.tolerance, TCP_LINK_TOLERANCE);
    assert_eq!(l.differing(), vec![]);
    // TCP's 54-byte headers against the replayer's 48: ns-3 carries slightly more
    for (c, _) in &l.channels {
        assert!(c.ns3_bytes > c.replay_bytes, "{c:?}");
    }
}

#[cfg(feature = "tables")]
/// The other spine's path for `PATH src dst channel` of the leaf-spine's routes.txt: hosts under
/// leaf 8 and leaf 9 reach each other over spine 10 or spine 11 (rows 8–11).
fn other_spine(line: &str) -> String {
    let t: Vec<&str> = line.split_whitespace().collect();
    let (src, dst, channel) = (t[1], t[2], t[3]);
    let leaf_of = |h: u32| 8 + h / 4;
    let (s, d): (u32, u32) = (src.parse().unwrap(), dst.parse().unwrap());
    let (ls, ld) = (leaf_of(s), leaf_of(d));
    let spine: u32 = t[5].split(':').next().unwrap().parse().unwrap();
    let other = if spine == 10 { 11 } else { 10 };
    let row = |leaf: u32, spine: u32| 8 + (leaf - 8) * 2 + (spine - 10);
    format!(
        "PATH {src} {dst} {channel} {ls}:{s} {other}:{} {ld}:{} {dst}:{d}",
        row(ls, other),
        row(ld, other)
    )
}

#[cfg(feature = "tables")]
#[test]
fn moving_one_pair_to_the_other_spine_makes_compare_name_exactly_the_four_channels_it_changed() {
    use ina3d::report::{compare_with, links::LinkOutcome, CompareOptions};
    let trace = ring_allreduce(8, 1 << 20, 0);
    let topo = leaf_spine();
    let rep = tempfile::tempdir().unwrap();
    replay_into(&trace, &topo, &InaConfig::default(), rep.path());
    let ns = tempfile::tempdir().unwrap();
    emit(
        &trace,
        &InaConfig::default(),
        &topo,
        &EmitOptions::default(),
        ns.path(),
    )
    .unwrap();
    // ring step 3 → 4 crosses from leaf 8 to leaf 9; send it over the other spine
    let p = ns.path().join("routes.txt");
    let routes = std::fs::read_to_string(&p).unwrap();
    let old = routes
        .lines()
        .find(|l| l.starts_with("PATH 3 4 0 "))
        .unwrap();
    let new = other_spine(old);
    std::fs::write(&p, routes.replace(old, &new)).unwrap();
    run_glue(glue(), ns.path(), |_, _| {}).unwrap();
    let c = compare_with(
        rep.path(),
        ns.path(),
        &CompareOptions {
            ignore_trace_name: true,
            ..Default::default()
        },
    )
    .unwrap();
    let LinkOutcome::Checked(l) = &c.links else {
        panic!("both directories have links.csv")
    };
    // the fabric hops of the old and the new path (the host links are common to both)
    let hops = |line: &str| -> Vec<(u32, u32, u32)> {
        let t: Vec<&str> = line.split_whitespace().skip(4).collect();
        let mut prev = 3;
        let mut v = Vec::new();
        for h in t {
            let (n, link) = h.split_once(':').unwrap();
            let (n, link): (u32, u32) = (n.parse().unwrap(), link.parse().unwrap());
            if link >= 8 {
                v.push((link, prev, n));
            }
            prev = n;
        }
        v
    };
    let mut want: Vec<(u32, u32, u32)> = hops(old).into_iter().chain(hops(&new)).collect();
    want.sort();
    let got: Vec<(u32, u32, u32)> = l
        .differing()
        .iter()
        .map(|d| (d.link, d.from, d.to))
        .collect();
    assert_eq!(got, want, "{old} → {new}");
    // the old path's channels lost the pair's wire bytes, the new path's gained them
    let moved: u64 = trace
        .iter()
        .filter(|r| (r.src.0, r.dst.0) == (3, 4))
        .map(|r| r.bytes.with_headers(Bytes(1000), Bytes(48)).0)
        .sum();
    let old_hops = hops(old);
    for d in l.differing() {
        let lost = old_hops.contains(&(d.link, d.from, d.to));
        let change = d.ns3_bytes as i128 - d.replay_bytes as i128;
        assert_eq!(change < 0, lost, "{d:?}");
        let slack = (l.tolerance * d.replay_bytes.max(d.ns3_bytes) as f64) as u64;
        assert!(
            change.unsigned_abs() as u64 >= moved - slack,
            "{d:?}: moved {moved}"
        );
    }
    let out = tempfile::tempdir().unwrap();
    c.write(out.path()).unwrap();
    let csv = std::fs::read_to_string(out.path().join("links.csv")).unwrap();
    assert_eq!(csv.matches(",differs\n").count(), 4, "{csv}");
}

#[test]
fn with_two_nccl_channels_ns3_forwards_exactly_the_replayers_bytes_on_every_link() {
    use ina3d::formats::{links_csv, routes_txt};
    use ina3d::pipeline::{generate_trace, Job, JobSpec};
    // the tiny job on a k=4 fat-tree of 2-GPU servers, host collectives over 2 channels
    let spec = JobSpec {
        input: concat!(env!("CARGO_MANIFEST_DIR"), "/traces/example/tiny.toml").into(),
        topology: "fat-tree:k=4,gpus-per-server=2".into(),
        nccl_channels: Some(2),
        ..JobSpec::default()
    };
    let job = Job::prepare(&spec).unwrap();
    let opts = spec.trace_options().unwrap();
    let trace = generate_trace(&job, &opts, None, true, &mut |_| {})
        .unwrap()
        .records;
    assert!(trace.iter().any(|r| r.mode == Mode::Net && r.channel == 1));
    let (rep, ns) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let ina = InaConfig::default();
    replay_into(&trace, &job.topology, &ina, rep.path());
    run(&trace, &job.topology, &ina, ns.path());
    // the check means something only if some channel 1 leaves its pair's channel-0 path
    let p = ns.path().join("routes.txt");
    let routes = routes_txt::parse(&p, &std::fs::read_to_string(&p).unwrap())
        .unwrap()
        .paths;
    let apart = routes
        .iter()
        .filter(|(&(s, d, c), hops)| c == 1 && routes.get(&(s, d, 0)) != Some(*hops))
        .count();
    assert!(apart > 0, "every channel 1 hashed onto its channel-0 path");
    // RoCE packets carry the replayer's 48 header bytes: equal to the byte, link by link
    let bytes = |dir: &Path| -> BTreeMap<(u32, u32, u32), u64> {
        links_csv::read(&dir.join("links.csv"))
            .unwrap()
            .into_iter()
            .map(|c| ((c.link.0, c.from.0, c.to.0), c.bytes))
            .collect()
    };
    let (want, got) = (bytes(rep.path()), bytes(ns.path()));
    assert!(want.len() > 16, "{} busy channels", want.len());
    assert_eq!(got, want);
}

// ---------------------------------------------------------------- RoCE and DCQCN

#[test]
fn a_nic_serving_seven_queue_pairs_sends_at_its_line_rate_never_faster() {
    // host 0 sends 1 MiB to each other host of an 8-host star at once: seven queue pairs
    // share one 100 Gb/s NIC, nothing else is loaded, so the NIC's wire bytes over its
    // rate bound the makespan from below (a NIC cannot transmit two packets at once) and,
    // within the links' propagation and one packet's store-and-forward, from above.
    let mib = 1u64 << 20;
    let trace: Vec<FlowRecord> = (1..8)
        .map(|d| rec(d as u64, 0, d, mib, &[], Mode::Net, Class::Dp))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let r = run(&trace, &star(8), &InaConfig::default(), dir.path());
    let wire = 7 * Bytes(mib).with_headers(Bytes(1000), Bytes(48)).0;
    let line = BitsPerSec::gbps(100).transmit_time(Bytes(wire)).0;
    let t = r.summary.iteration_time_ns;
    assert!(
        t >= line,
        "{t} ns < {line} ns: faster than the NIC's line rate"
    );
    assert!(t <= line + 5_000, "{t} ns against {line} ns at line rate");
    assert_eq!(r.stats["finished"], 7);
}

use ina3d::ns3::Transport;

#[test]
fn transports_parse_from_and_print_as_their_params_names_and_unknown_ones_are_refused() {
    for t in [Transport::Roce, Transport::Tcp] {
        assert_eq!(t.to_string().parse::<Transport>(), Ok(t));
    }
    assert_eq!(Transport::default(), Transport::Roce);
    let e = "quic".parse::<Transport>().unwrap_err();
    assert!(
        e.contains("unknown transport `quic`") && e.contains("expected roce, tcp"),
        "{e}"
    );
}

/// Replaces the line of `path` starting with `key ` by `line` (or removes it when empty);
/// returns that line's 1-based number.
fn set_line(path: &Path, key: &str, line: &str) -> usize {
    let text = std::fs::read_to_string(path).unwrap();
    let at = text
        .lines()
        .position(|l| l.split_whitespace().next() == Some(key))
        .unwrap_or_else(|| panic!("{key} not in {}", path.display()));
    let mut lines: Vec<&str> = text.lines().collect();
    if line.is_empty() {
        lines.remove(at);
    } else {
        lines[at] = line;
    }
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
    at + 1
}

#[test]
fn a_stop_time_off_the_simulators_clock_is_refused_naming_file_and_line() {
    let dir = emitted_ring_on_star(4096);
    let p = dir.path().join("params.txt");
    for bad in ["nan", "0", "-1", "inf", "1e7", "3s"] {
        let line = set_line(&p, "STOP_TIME_S", &format!("STOP_TIME_S {bad}"));
        let e = run_glue(glue(), dir.path(), |_, _| {})
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("params.txt:{line}: STOP_TIME_S"))
                && e.contains(&format!("`{bad}`")),
            "{bad}: {e}"
        );
    }
}

#[test]
fn an_unknown_transport_in_params_txt_is_refused_naming_file_line_and_key() {
    let dir = emitted_ring_on_star(4096);
    let p = dir.path().join("params.txt");
    let line = set_line(&p, "TRANSPORT", "TRANSPORT quic");
    let e = run_glue(glue(), dir.path(), |_, _| {})
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!("params.txt:{line}: TRANSPORT")) && e.contains("`quic`"),
        "{e}"
    );
    assert!(e.contains("rejected its input"), "exit status 2: {e}");
}

#[test]
fn a_params_txt_without_ina_slots_is_refused_the_glue_has_no_default_of_its_own() {
    let dir = emitted_ring_on_star(4096);
    let p = dir.path().join("params.txt");
    set_line(&p, "INA_SLOTS", "");
    let e = run_glue(glue(), dir.path(), |_, _| {})
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("params.txt: INA_SLOTS missing"),
        "the glue names the key: {e}"
    );
    assert!(e.contains("rejected its input"), "exit status 2: {e}");
}

#[test]
fn a_dcqcn_key_missing_from_config_txt_falls_back_to_simais_value_and_the_run_says_so() {
    let dir = emitted_ring_on_star(65536);
    set_line(&dir.path().join("config.txt"), "RATE_AI", "");
    let r = run_glue(glue(), dir.path(), |_, _| {}).unwrap();
    assert_eq!(
        r.warnings,
        vec![format!(
            "{}: RATE_AI missing; using SimAI's value 50Mb/s",
            dir.path().join("config.txt").display()
        )]
    );
}

#[test]
fn a_link_rate_without_ecn_thresholds_is_refused_naming_config_line_and_key() {
    let dir = emitted_ring_on_star(4096);
    let p = dir.path().join("config.txt");
    // the star's links run at 100 Gb/s; leave KMIN_MAP only a 25 Gb/s entry
    let line = set_line(&p, "KMIN_MAP", "KMIN_MAP 1 25000000000 100");
    let e = run_glue(glue(), dir.path(), |_, _| {})
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!(
            "config.txt:{line}: KMIN_MAP has no entry for 100000000000 bit/s"
        )),
        "{e}"
    );
    // and a map that is missing altogether
    set_line(&p, "PMAX_MAP", "");
    set_line(&p, "KMIN_MAP", "KMIN_MAP 1 100000000000 400");
    let e = run_glue(glue(), dir.path(), |_, _| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("config.txt: PMAX_MAP missing"), "{e}");
}

#[test]
fn the_cli_refuses_an_unknown_transport_with_status_2() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.txt");
    std::fs::write(&trace, "RECORDS 0\n").unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_ina3d"))
        .args(["ns3", "emit"])
        .arg(&trace)
        .args(["--topology", "fat-tree:k=4", "--transport", "quic", "-o"])
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("invalid value 'quic' for '--transport")
            && err.contains("possible values: roce, tcp"),
        "{err}"
    );
}

#[test]
fn the_dcqcn_reaction_point_follows_its_equations() {
    // ns3-glue/test/dcqcn-test.cc recomputes every expected rate and alpha from the
    // equations, step by step; it needs no network and no ns-3
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("dcqcn-test");
    let src = glue_source_dir();
    let o = std::process::Command::new("g++")
        .args(["-std=c++17", "-O2", "-Wall", "-Werror", "-o"])
        .arg(&bin)
        .arg(src.join("test/dcqcn-test.cc"))
        .arg(src.join("model/dcqcn.cc"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = std::process::Command::new(&bin).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains("all ") && out.contains(" checks passed"),
        "{out}"
    );
    assert_eq!(
        out.matches("\nok ").count() + usize::from(out.starts_with("ok ")),
        8
    );
}

/// One row of the glue's rates.csv (RATE_LOG 1).
#[derive(Debug, Clone)]
struct RateChange {
    t: u64,
    src: u32,
    rate: u64,
    target: u64,
    alpha: f64,
    event: String,
}

fn read_rates(dir: &Path) -> Vec<RateChange> {
    let text = std::fs::read_to_string(dir.join("rates.csv")).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("time_ns,src,dst,rate_bps,target_bps,alpha,event")
    );
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            RateChange {
                t: f[0].parse().unwrap(),
                src: f[1].parse().unwrap(),
                rate: f[3].parse().unwrap(),
                target: f[4].parse().unwrap(),
                alpha: f[5].parse().unwrap(),
                event: f[6].to_string(),
            }
        })
        .collect()
}

/// Hosts 0 and 1 each send `bytes[i]` to host 2 over a 3-host star (one congested port,
/// the switch's towards host 2), with DCQCN's rate changes logged; `config` edits
/// config.txt first (key, line).
fn incast(bytes: [u64; 2], config: &[(&str, &str)]) -> (tempfile::TempDir, RunReport) {
    let trace = vec![
        rec(0, 0, 2, bytes[0], &[], Mode::Net, Class::Dp),
        rec(1, 1, 2, bytes[1], &[], Mode::Net, Class::Dp),
    ];
    let dir = tempfile::tempdir().unwrap();
    emit(
        &trace,
        &InaConfig::default(),
        &star(3),
        &EmitOptions::default(),
        dir.path(),
    )
    .unwrap();
    let params = dir.path().join("params.txt");
    let mut p = std::fs::read_to_string(&params).unwrap();
    p.push_str("RATE_LOG 1\n");
    std::fs::write(&params, p).unwrap();
    for (k, l) in config {
        set_line(&dir.path().join("config.txt"), k, l);
    }
    let r = run_glue(glue(), dir.path(), |_, _| {}).unwrap_or_else(|e| panic!("{e}"));
    (dir, r)
}

#[test]
fn two_line_rate_flows_into_one_port_converge_to_half_the_port_each_cut_by_alpha_over_two() {
    // DCQCN's own 55 µs rate-increase timer (SimAI's 900 µs keeps a cut rate low for
    // 900 µs, longer than this whole transfer: see docs/validation.md's figures)
    let mb8 = 8_000_000;
    let (dir, r) = incast([mb8, mb8], &[("RP_TIMER", "RP_TIMER 55")]);
    assert_eq!(r.stats["dropped_packets"], 0);
    assert!(
        r.stats["cnps_sent"] > 0,
        "the congested port marks, the receiver notifies"
    );
    // the port towards host 2 carries both flows' wire bytes: no faster than that, and
    // fair sharing finishes both together, close to it
    let wire = Bytes(mb8).with_headers(Bytes(1000), Bytes(48));
    let both = 2 * BitsPerSec::gbps(100).transmit_time(wire).0;
    let ends: Vec<u64> = r.rows.iter().map(|x| x.end_ns).collect();
    let t = *ends.iter().max().unwrap();
    assert!(t >= both, "{t} ns < {both} ns");
    assert!(
        t < both * 11 / 10,
        "{t} ns: more than 10 % above the port's {both} ns"
    );
    assert!(
        ends[0].abs_diff(ends[1]) < both / 10,
        "fair share: both end together, {ends:?}"
    );
    let rates = read_rates(dir.path());
    for src in [0u32, 1] {
        let mine: Vec<&RateChange> = rates.iter().filter(|c| c.src == src).collect();
        // every cut is rate × (1 − α/2), α as the sender held it then (floored at MIN_RATE)
        let mut prev = 100_000_000_000u64;
        let mut last_cut = None;
        for c in &mine {
            if c.event == "decrease" {
                let want = ((prev as f64) * (1.0 - c.alpha / 2.0)) as u64;
                assert!(
                    c.rate.abs_diff(want.max(100_000_000)) <= 1,
                    "{c:?}: want {want}"
                );
                // CNPs coalesce: at most one cut per RATE_DECREASE_INTERVAL (4 µs)
                if let Some(l) = last_cut {
                    assert!(c.t - l >= 4000, "{c:?} {l}");
                }
                last_cut = Some(c.t);
            }
            prev = c.rate;
        }
        // converged: over the second half of the transfer the time-weighted mean rate is
        // the fair share, half the port, within 20 % (DCQCN is fair on average, not at
        // every instant)
        let (from, to) = (t / 2, t);
        let mut area = 0f64;
        let rate_at = |x: u64| {
            mine.iter()
                .take_while(|c| c.t <= x)
                .last()
                .map_or(100e9, |c| c.rate as f64)
        };
        let step = (to - from) / 1000;
        for k in 0..1000 {
            area += rate_at(from + k * step);
        }
        let mean = area / 1000.0;
        assert!(
            (40e9..=65e9).contains(&mean),
            "flow {src}: mean rate {:.1} Gb/s over the second half",
            mean / 1e9
        );
        eprintln!(
            "flow {src}: {} rate changes, mean {:.1} Gb/s over the second half",
            mine.len(),
            mean / 1e9
        );
    }
    // at most one CNP per flow per 50 µs
    assert!(
        r.stats["cnps_sent"] <= 2 * (t / 50_000 + 1),
        "{}",
        r.stats["cnps_sent"]
    );
}

#[test]
fn the_flow_left_alone_recovers_every_rp_timer_fast_then_additive_then_hyper() {
    // a 20 µs rate-increase timer, so recovery shows within a short run
    let (dir, r) = incast([1_000_000, 8_000_000], &[("RP_TIMER", "RP_TIMER 20")]);
    let first_end = r.rows.iter().map(|x| x.end_ns).min().unwrap();
    let rates = read_rates(dir.path());
    let late: Vec<&RateChange> = rates
        .iter()
        .filter(|c| c.src == 1)
        .skip_while(|c| c.t < first_end)
        .collect();
    // the last cut of the remaining flow, then increases only, RP_TIMER apart
    let cut = late
        .iter()
        .rposition(|c| c.event == "decrease")
        .map_or(0, |i| i + 1);
    let incs = &late[cut..];
    assert!(incs.len() >= 3, "{late:?}");
    let kinds: Vec<&str> = incs.iter().map(|c| c.event.as_str()).take(3).collect();
    assert_eq!(
        kinds,
        ["fast-recovery", "additive-increase", "hyper-increase"],
        "FAST_RECOVERY_TIMES 1: one fast recovery, one additive, then hyper"
    );
    for w in incs.windows(2) {
        assert_eq!(w[1].t - w[0].t, 20_000, "{:?}", w);
        assert!(w[1].rate >= w[0].rate && w[1].target >= w[0].target);
        // each increase halves the distance to the target
        assert_eq!(
            w[1].rate,
            w[0].rate / 2 + w[1].target / 2 + ((w[0].rate | w[1].target) & 1)
        );
    }
}

#[test]
fn a_packet_drop_fails_the_run_as_a_broken_lossless_assumption() {
    // two line-rate flows into one port with 3 packets of buffer: the switch drops
    let trace = vec![
        rec(0, 0, 2, 2_000_000, &[], Mode::Net, Class::Dp),
        rec(1, 1, 2, 2_000_000, &[], Mode::Net, Class::Dp),
    ];
    let dir = tempfile::tempdir().unwrap();
    emit(
        &trace,
        &InaConfig::default(),
        &star(3),
        &EmitOptions::default(),
        dir.path(),
    )
    .unwrap();
    set_line(
        &dir.path().join("params.txt"),
        "QUEUE_PACKETS",
        "QUEUE_PACKETS 3",
    );
    let e = run_glue(glue(), dir.path(), |_, _| {})
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("lossless assumption violated") && e.contains("towards node 2"),
        "{e}"
    );
    assert!(!dir.path().join("done").exists());
}

#[test]
fn a_congested_glue_port_shares_its_rate_in_proportion_to_the_rates_packets_arrive_at() {
    // Hosts 0, 1 under switch 4, host 2 under switch 5, switches 4 and 5 and host 3 on
    // switch 6; 100 Gb/s, 1 µs links. Flows 0→3, 1→3, 2→3 of 16 KiB start together: 0 and 1
    // share 4→6 and reach 6's port to host 3 at 50 Gb/s each, 2 reaches it at 100 Gb/s. A
    // FIFO port serves packets in arrival order, so 2 gets half of 6→3 and ends first;
    // 0 and 1 end when all three flows' bytes have crossed it. (A max-min fluid, the
    // replayer's model, gives the three equal shares and ends them together:
    // docs/model.md#known-gaps, "Fair sharing"; this is what moves the DP buckets' ready
    // times on the validation suite's ina-hier-few-128.)
    let mut kinds = vec![NodeKind::Host; 4];
    kinds.extend([NodeKind::Switch; 3]);
    let topo = Topology {
        kinds,
        links: vec![
            link(0, 4, 100, LinkKind::Nic),
            link(1, 4, 100, LinkKind::Nic),
            link(2, 5, 100, LinkKind::Nic),
            link(3, 6, 100, LinkKind::Nic),
            link(4, 6, 100, LinkKind::Fabric),
            link(5, 6, 100, LinkKind::Fabric),
        ],
        gpus: (0..4).map(NodeId).collect(),
        gpus_per_server: 1,
        nvlink_rate: None,
        source: "test:fifo".into(),
        fabric: Default::default(),
    };
    let s = 16384u64;
    let trace: Vec<FlowRecord> = (0..3u32)
        .map(|h| rec(u64::from(h), h, 3, s, &[], Mode::Net, Class::Pp))
        .collect();
    let d = tempfile::tempdir().unwrap();
    let rows = run(&trace, &topo, &InaConfig::default(), d.path()).rows;
    let fct = |id: u64| rows.iter().find(|r| r.flow_id == id).unwrap().fct_ns as f64;
    // by hand: 1,000-byte payloads with 48 header bytes; at 100 Gb/s, 0.08 ns per byte
    let wire = (s + s.div_ceil(1000) * 48) as f64;
    let ns_per_byte = 8.0 / 100.0;
    // three hops of 1 µs, and the last packet stored and forwarded at the two switches
    let latency = 3000.0 + 2.0 * 1048.0 * ns_per_byte;
    let half_rate = wire * 2.0 * ns_per_byte + latency;
    let all_three = 3.0 * wire * ns_per_byte + latency;
    for (id, want) in [(0, all_three), (1, all_three), (2, half_rate)] {
        let got = fct(id);
        assert!(
            (got - want).abs() <= 100.0,
            "flow {id}: {got} ns, by hand {want:.0} ns"
        );
    }
}

// ---------------------------------------------------------------- other fabrics

/// The glue's links.csv rows as (link, from, to) → bytes.
fn link_bytes(dir: &Path) -> BTreeMap<(u32, u32, u32), u64> {
    ina3d::formats::links_csv::read(&dir.join("links.csv"))
        .unwrap()
        .into_iter()
        .map(|c| ((c.link.0, c.from.0, c.to.0), c.bytes))
        .collect()
}

#[test]
fn on_every_family_ns3_forwards_exactly_the_replayers_bytes_on_every_link_relays_included() {
    for spec in [
        "jellyfish:switches=8,ports=6,hosts-per-switch=2,seed=1",
        "dragonfly:groups=4,routers=2,hosts-per-router=2",
        "dragonfly:groups=4,routers=2,hosts-per-router=2,routing=valiant",
        "torus:dims=4x4",
        "bcube:n=4,k=1",
        "dcell:n=4,k=1",
        "topoopt:servers=16,degree=4",
    ] {
        let topo = Topology::from_spec(spec).unwrap();
        // a ring all-reduce over 16 hosts in the order h -> 5h mod 16 (neighbours 5 apart,
        // so TopoOpt's rings of strides 1 and 3 relay too), on two NCCL channels (odd steps
        // on channel 1)
        let mut trace = ring_allreduce(16, 1 << 20, 0);
        for r in trace.iter_mut() {
            r.src = NodeId(r.src.0 * 5 % 16);
            r.dst = NodeId(r.dst.0 * 5 % 16);
            if r.step.unwrap_or(0) % 2 == 1 {
                r.channel = 1;
            }
        }
        let (rep, ns) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let ina = InaConfig::default();
        replay_into(&trace, &topo, &ina, rep.path());
        // a drop or a missing route fails the run (the helper panics)
        run(&trace, &topo, &ina, ns.path());
        let (want, got) = (link_bytes(rep.path()), link_bytes(ns.path()));
        assert!(want.len() >= 24, "{spec}: {} busy channels", want.len());
        assert_eq!(
            got, want,
            "{spec}: RoCE carries the replayer's bytes link by link"
        );
        // the SimAI flavour of the same files (6-field header) runs the same
        let simai = tempfile::tempdir().unwrap();
        let opts = EmitOptions {
            flavor: Flavor::Simai,
            ..EmitOptions::default()
        };
        let report = emit(&trace, &ina, &topo, &opts, simai.path()).unwrap();
        assert!(
            report
                .warnings
                .iter()
                .any(|w| w.contains("HPCC's and SimAI's ns-3")),
            "{spec}: {:?}",
            report.warnings
        );
        run_glue(glue(), simai.path(), |_, _| {}).unwrap_or_else(|e| panic!("{spec}: {e}"));
        assert_eq!(link_bytes(simai.path()), want, "{spec} (SimAI files)");
        if topo.fabric.hosts_relay() {
            // some host forwarded bytes that are not its own: a channel from a host whose
            // bytes exceed what the trace sends from it
            let sent: u64 = trace
                .iter()
                .filter(|r| r.src.0 == 0)
                .map(|r| r.bytes.0)
                .sum();
            let out0: u64 = got
                .iter()
                .filter(|((_, f, _), _)| *f == 0)
                .map(|(_, b)| *b)
                .sum();
            let relayed = (0..16u32).any(|h| {
                let own: u64 = trace
                    .iter()
                    .filter(|r| r.src.0 == h)
                    .map(|r| r.bytes.0)
                    .sum();
                let out: u64 = got
                    .iter()
                    .filter(|((_, f, _), _)| *f == h)
                    .map(|(_, b)| *b)
                    .sum();
                out > own * 11 / 10
            });
            assert!(
                relayed,
                "{spec}: no server relayed ({sent} sent from 0, {out0} left it)"
            );
        }
    }
}

#[test]
fn a_relaying_server_shares_its_link_between_its_own_queue_pair_and_what_it_relays() {
    // DCell(4,1): server 10's link to server 14 carries its own transfer 10 -> 14 and,
    // relayed, 8 -> 15 (8 -> switch -> 10 -> 14 -> switch -> 15). Under RoCE the NIC serves
    // the connection it relays round robin with its own queue pair, as the replayer's fair
    // share assumes; forwarded straight into the device queue, the relayed bytes kept it
    // full and the server's own transfer waited (168 µs against 89 µs for 1 MB each).
    let topo = Topology::from_spec("dcell:n=4,k=1").unwrap();
    let s = 1_000_000;
    let trace = vec![
        rec(0, 10, 14, s, &[], Mode::Net, Class::Dp),
        rec(1, 8, 15, s, &[], Mode::Net, Class::Dp),
    ];
    let dir = tempfile::tempdir().unwrap();
    let r = run(&trace, &topo, &InaConfig::default(), dir.path());
    let bytes = link_bytes(dir.path());
    let shared: u64 = bytes
        .iter()
        .filter(|((_, f, t), _)| (*f, *t) == (10, 14))
        .map(|(_, b)| *b)
        .sum();
    assert!(
        shared > 2 * s,
        "both transfers cross 10 -> 14: {shared} bytes"
    );
    let fct = |id: u64| r.rows.iter().find(|x| x.flow_id == id).unwrap().fct_ns as f64;
    let (own, relayed) = (fct(0), fct(1));
    // sharing the link, each takes about twice its time alone; the relayed one's longer
    // path adds a few µs
    let alone = BitsPerSec::gbps(100).transmit_time(Bytes(s)).0 as f64;
    for (what, t) in [("own", own), ("relayed", relayed)] {
        assert!(
            t > 1.8 * alone,
            "{what}: {t} ns, alone {alone} ns: not shared"
        );
    }
    assert!(
        (own / relayed - 1.0).abs() < 0.1,
        "own {own} ns, relayed {relayed} ns"
    );
}

#[test]
fn a_swing_all_reduce_on_the_torus_puts_the_same_bytes_on_every_link_in_both_back_ends() {
    use ina3d::pipeline::{generate_bench_trace, Job, JobSpec, ParallelSizes};
    use ina3d::trace::{Algorithm, BenchGroup, CollectiveBench};
    let spec = JobSpec {
        input: concat!(env!("CARGO_MANIFEST_DIR"), "/traces/example/tiny.toml").into(),
        topology: "torus:dims=4x4".into(),
        sizes: ParallelSizes {
            tp: Some(1),
            pp: Some(1),
            dp: Some(16),
            ..Default::default()
        },
        collective: Algorithm::Swing,
        megatron: vec![("global-batch-size".into(), "16".into())],
        ..JobSpec::default()
    };
    let job = Job::prepare(&spec).unwrap();
    let bench = CollectiveBench {
        kind: ina3d::schedule::CollKind::AllReduce,
        sizes: vec![Bytes(1 << 20)],
        group: BenchGroup::All,
    };
    let trace = generate_bench_trace(&job, &spec.trace_options().unwrap(), &bench, None, true)
        .unwrap()
        .records;
    // both NCCL channels of NCCL's default rule carry the Swing steps
    assert!(trace.iter().any(|r| r.mode == Mode::Net && r.channel == 1));
    let (rep, ns) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let ina = InaConfig::default();
    replay_into(&trace, &job.topology, &ina, rep.path());
    run(&trace, &job.topology, &ina, ns.path());
    let (want, got) = (link_bytes(rep.path()), link_bytes(ns.path()));
    assert!(want.len() >= 64, "{} busy channels", want.len());
    assert_eq!(got, want);
}

#[test]
fn ina_trees_on_general_graphs_put_the_same_bytes_on_every_link_in_both_back_ends() {
    use ina3d::pipeline::{generate_bench_trace, Job, JobSpec, ParallelSizes};
    use ina3d::trace::{BenchGroup, CollectiveBench, InaMode};
    for spec in [
        "torus:dims=4x4",
        "jellyfish:switches=8,ports=6,hosts-per-switch=2,seed=1,nvlink=off",
        "bcube:n=4,k=1",
    ] {
        let job_spec = JobSpec {
            input: concat!(env!("CARGO_MANIFEST_DIR"), "/traces/example/tiny.toml").into(),
            topology: spec.into(),
            sizes: ParallelSizes {
                tp: Some(1),
                pp: Some(1),
                dp: Some(16),
                ..Default::default()
            },
            ina: ina3d::trace::InaConfig {
                mode: InaMode::Hierarchical,
                classes: vec![Class::Dp, Class::Tp, Class::Emb],
                ..Default::default()
            },
            megatron: vec![("global-batch-size".into(), "16".into())],
            ..JobSpec::default()
        };
        let job = Job::prepare(&job_spec).unwrap();
        let bench = CollectiveBench {
            kind: ina3d::schedule::CollKind::AllReduce,
            sizes: vec![Bytes(1 << 19)],
            group: BenchGroup::All,
        };
        let opts = job_spec.trace_options().unwrap();
        let trace = generate_bench_trace(&job, &opts, &bench, None, true)
            .unwrap()
            .records;
        let ina_edges = trace.iter().filter(|r| r.mode == Mode::Ina).count();
        assert!(ina_edges >= 2 * 16, "{spec}: {ina_edges} INA edges");
        let (rep, ns) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let model = opts.ina.clone();
        replay_into(&trace, &job.topology, &model, rep.path());
        run(&trace, &job.topology, &model, ns.path());
        let (want, got) = (link_bytes(rep.path()), link_bytes(ns.path()));
        assert_eq!(got, want, "{spec}");
    }
}
