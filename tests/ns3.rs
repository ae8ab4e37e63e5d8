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
use ina3d::ns3::{emit, EmitOptions, Flavor, InaPolicy, InaSwitchModel, Ns3Error, StartSource};
use ina3d::record::{AggDir, AggTag, Class, FlowRecord, Mode};
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

fn ina_params(policy: InaPolicy) -> InaSwitchModel {
    InaSwitchModel {
        slots: 64,
        payload: Bytes(1024),
        window: 32,
        policy,
        ..InaSwitchModel::default()
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
fn glue_routes_give_each_src_dst_pair_one_path_its_reverse_and_the_replayers_choice() {
    let dir = tempfile::tempdir().unwrap();
    // a ring on the leaf-spine (14 records per pair) plus one flow from each host to its
    // opposite: the leaf-crossing pairs have a choice of spine
    let mut trace = ring_allreduce(8, 8192, 0);
    trace.extend((0..8).map(|h| {
        rec(
            1000 + h as u64,
            h,
            (h + 4) % 8,
            4096,
            &[],
            Mode::Net,
            Class::Tp,
        )
    }));
    let r = emit(
        &trace,
        &InaSwitchModel::default(),
        &leaf_spine(),
        &EmitOptions {
            seed: 3,
            ..Default::default()
        },
        dir.path(),
    )
    .unwrap();
    assert!(r.routes > 0);
    let p = dir.path().join("routes.txt");
    let text = std::fs::read_to_string(&p).unwrap();
    let routes = ina3d::formats::routes_txt::parse(&p, &text).unwrap().paths;
    let pairs: std::collections::BTreeSet<(NodeId, NodeId)> = trace
        .iter()
        .flat_map(|f| [(f.src, f.dst), (f.dst, f.src)])
        .collect();
    assert_eq!(
        routes
            .keys()
            .copied()
            .collect::<std::collections::BTreeSet<_>>(),
        pairs,
        "trace pairs and their reverses, nothing else"
    );
    assert_eq!(r.routes, pairs.len());
    // a crossing pair goes host → leaf → spine → leaf → host, on the spine its hash picks
    let routing = ina3d::topology::Routing::new(&leaf_spine(), 3).unwrap();
    let mut spines = std::collections::BTreeSet::new();
    for (&(s, d), hops) in &routes {
        let want = routing.path(s, d, ina3d::topology::pair_key(s, d)).unwrap();
        assert_eq!(
            hops.iter().map(|h| h.1).collect::<Vec<_>>(),
            want.iter().map(|c| c.link()).collect::<Vec<_>>(),
            "{s}->{d}"
        );
        if hops.len() == 4 {
            spines.insert(hops[1].0);
        }
    }
    assert_eq!(
        spines.len(),
        2,
        "crossing connections spread over both spines"
    );
    let meta = std::fs::read_to_string(dir.path().join("flow.meta.txt")).unwrap();
    assert!(
        meta.contains(&format!("{} pairs routed", pairs.len())),
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
        w.serialize(FctRow {
            flow_id: r.id.0,
            src: r.src.0,
            dst: r.dst.0,
            mode: r.mode,
            class: r.class,
            size_bytes: r.bytes.0,
            start_ns: 1000 + r.id.0 * 7,
            end_ns: 999_999,
            fct_ns: 0,
            standalone_fct_ns: 0,
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

#[test]
fn glue_trace_text_reads_back_into_the_same_records() {
    let dir = tempfile::tempdir().unwrap();
    let trace = snapshot_trace();
    emit(
        &trace,
        &ina_params(InaPolicy::BestEffort),
        &star(4),
        &EmitOptions::default(),
        dir.path(),
    )
    .unwrap();
    let p = dir.path().join("trace.txt");
    let (back, _) = glue_trace_txt::parse(&p, &std::fs::read_to_string(&p).unwrap()).unwrap();
    assert_eq!(back, trace);
}

#[test]
fn a_trace_naming_a_node_the_topology_lacks_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let trace = vec![rec(0, 0, 99, 10, &[], Mode::Net, Class::Tp)];
    let e = emit(
        &trace,
        &InaSwitchModel::default(),
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
        &InaSwitchModel::default(),
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
        &InaSwitchModel::default(),
        &star(2),
        &EmitOptions::default(),
        dir.path(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("cycle"), "{e}");
    let dangling = vec![rec(0, 0, 1, 10, &[42], Mode::Net, Class::Tp)];
    let e = emit(
        &dangling,
        &InaSwitchModel::default(),
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
fn reference_end_to_end_csv_parses_with_nan_and_none_as_empty_values() {
    let p = fixture("simai/EndToEnd.csv");
    let text = std::fs::read_to_string(&p).unwrap();
    assert_eq!(ingest::detect(&p, &text), Some(Kind::EndToEnd));
    let t = parse_end_to_end(&p, &text);
    assert!(t.warnings.is_empty(), "{:?}", t.warnings);
    let get = |section: &str, metric: &str| {
        t.rows
            .iter()
            .find(|r| r[0] == section && r[3] == metric)
            .map(|r| r[4].clone())
    };
    assert_eq!(get("summary", "expose_tp_comm").as_deref(), Some("633"));
    assert_eq!(get("total", "total_time").as_deref(), Some("1745.246000"));
    assert_eq!(get("layer", "fwd_compute").as_deref(), Some("556.000000"));
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

fn run(trace: &[FlowRecord], topo: &Topology, ina: &InaSwitchModel, dir: &Path) -> RunReport {
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
    let r = run(
        &trace,
        &leaf_spine(),
        &InaSwitchModel::default(),
        dir.path(),
    );
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
        &InaSwitchModel {
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
        &InaSwitchModel::default(),
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

#[test]
fn ns3_ina_slot_exhaustion_waits_under_static_and_falls_back_under_best_effort() {
    let s = 256 * 1024;
    let topo = leaf_spine();
    // one enabled class, so the static share is the whole (tiny) pool
    let tiny = |policy| InaSwitchModel {
        slots: 2,
        payload: Bytes(1024),
        window: 64,
        policy,
        classes: vec![Class::Dp],
        reservations: vec![],
    };
    let d1 = tempfile::tempdir().unwrap();
    let st = run(
        &ina_allreduce_staggered(s, 20_000),
        &topo,
        &tiny(InaPolicy::Static),
        d1.path(),
    );
    assert_eq!(st.stats["ina_fallback_packets"], 0);
    assert!(st.summary.ina_slot_peak <= 2);
    assert_eq!(st.stats["ina_sum_errors"], 0);
    let d2 = tempfile::tempdir().unwrap();
    let be = run(
        &ina_allreduce_staggered(s, 20_000),
        &topo,
        &tiny(InaPolicy::BestEffort),
        d2.path(),
    );
    assert!(
        be.stats["ina_fallback_packets"] > 0,
        "2 slots cannot hold 64 outstanding packets of staggered workers"
    );
    // (which is faster depends on the fallback host's incast: with 2 slots, best-effort
    // funnels most packets through worker 0's NIC, so it is not asserted)
    eprintln!(
        "2 slots: static {} ns, best-effort {} ns",
        st.summary.iteration_time_ns, be.summary.iteration_time_ns
    );
    assert_eq!(
        be.stats["ina_sum_errors"], 0,
        "fallback hosts sum correctly too"
    );
    let d3 = tempfile::tempdir().unwrap();
    let pr = run(
        &ina_allreduce_staggered(s, 20_000),
        &topo,
        &tiny(InaPolicy::Priority),
        d3.path(),
    );
    assert_eq!(pr.stats["ina_fallback_packets"], 0);
}

/// A directory holding `ns3 emit` output for a 4-rank ring all-reduce of `bytes` on a
/// 4-host star, ready for the glue (or for a test to break one of its files first).
fn emitted_ring_on_star(bytes: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    emit(
        &ring_allreduce(4, bytes, 0),
        &InaSwitchModel::default(),
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
fn a_pair_missing_from_routes_txt_makes_the_glue_run_fail_naming_the_pair() {
    // the glue has no static or global routing to fall back on: routes.txt is the only table
    let dir = emitted_ring_on_star(65536);
    let p = dir.path().join("routes.txt");
    let t = std::fs::read_to_string(&p).unwrap();
    assert!(t.contains("PATH 1 2 4:1 2:2\n"), "{t}");
    std::fs::write(&p, t.replace("PATH 1 2 4:1 2:2\n", "")).unwrap();
    let e = run_glue(glue(), dir.path(), |_, _| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("unfinished"), "{e}");
    assert!(
        e.contains("no route for packets from node 1 to node 2"),
        "{e}"
    );
}

#[test]
fn a_routes_txt_hop_over_a_link_that_does_not_join_its_nodes_is_rejected_with_file_and_line() {
    let dir = emitted_ring_on_star(4096);
    let p = dir.path().join("routes.txt");
    let t = std::fs::read_to_string(&p).unwrap();
    let line = t.lines().position(|l| l == "PATH 1 2 4:1 2:2").unwrap() + 1;
    std::fs::write(&p, t.replace("PATH 1 2 4:1 2:2", "PATH 1 2 4:3 2:2")).unwrap();
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
        &InaSwitchModel::default(),
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
            &InaSwitchModel::default(),
            &star(4),
            &EmitOptions {
                tcp,
                ..Default::default()
            },
            dir.path(),
        )
        .unwrap();
        let r = run_glue(glue(), dir.path(), |_, _| {}).unwrap();
        assert_eq!(r.rows.len(), trace.len());
        t.insert(tcp.as_str(), r.summary.iteration_time_ns);
    }
    // 6 dependent steps, each at least one extra round trip (4 hops of 1 µs) slower
    assert!(t["per-flow"] >= t["persistent"] + 6 * 4_000, "{t:?}");
}

#[test]
fn ns3_runs_are_deterministic_and_parsimon_fct_puts_the_record_id_first() {
    let trace = ring_allreduce(4, 1 << 16, 100);
    let mut outputs = Vec::new();
    for _ in 0..2 {
        let dir = tempfile::tempdir().unwrap();
        emit(
            &trace,
            &InaSwitchModel::default(),
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
