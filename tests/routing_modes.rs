//! `--routing ecmp|dmodk|spray` against hand-derived loads: D-mod-k's contention-free
//! shift permutations on a full fat-tree, spray's even split on a leaf-spine (in the
//! router and in the replayer's rates), and a trace replayed under another routing than
//! its header's refused by name.

use ina3d::formats::trace_csv::{self, TraceHeader};
use ina3d::record::{Class, FlowRecord, Mode};
use ina3d::replay::{simulate, RateModel, ReplayOptions};
use ina3d::topology::{Channel, NodeKind, Routing, RoutingMode, Topology};
use ina3d::units::{Bytes, FlowId, NodeId};
use std::collections::HashMap;

/// Largest number of the shift permutation `i → i + s (mod n)` crossing one channel.
fn worst_channel(r: &Routing, hosts: &[NodeId], s: usize) -> usize {
    let n = hosts.len();
    let mut load: HashMap<Channel, usize> = HashMap::new();
    for i in 0..n {
        let (a, b) = (hosts[i], hosts[(i + s) % n]);
        for c in r.connection_path(a, b).unwrap() {
            *load.entry(c).or_default() += 1;
        }
    }
    load.into_values().max().unwrap_or(0)
}

/// k = 4 fat-tree, hosts in order (h = 2·edge + port, pod = h / 4). D-mod-k sends
/// destination d up edge port d mod 2 and aggregation port (d / 2) mod 2. By hand:
/// - a down link serves one destination: core (a, b) → pod P reaches only
///   d = 4P + 2b + a, aggregation a of P → edge E only d = 2E + a;
/// - edge E's up port a carries sources 2E, 2E+1 whose destinations 2E+s, 2E+1+s differ
///   mod 2, so at most one of them;
/// - aggregation (P, a)'s up port b carries sources 4P..4P+3 whose destinations are four
///   consecutive numbers, so distinct mod 4 = (a, b): at most one.
///
/// So every shift loads every channel at most once; ECMP's hash is blind to this and
/// puts two flows on one channel for some seed and shift.
#[test]
fn dmodk_routes_every_shift_permutation_without_contention_where_ecmp_collides() {
    let topo = Topology::from_spec("fat-tree:k=4").unwrap();
    let hosts = topo.hosts();
    assert_eq!(hosts.len(), 16);
    let dmodk = Routing::with_mode(&topo, 0, RoutingMode::Dmodk).unwrap();
    for s in 1..16 {
        assert_eq!(worst_channel(&dmodk, &hosts, s), 1, "dmodk, shift {s}");
    }
    // the path of host 0 to host 5 (pod 1), by the rule: up edge port 5 mod 2 = 1, up
    // aggregation port (5 / 2) mod 2 = 0, then down
    let p = dmodk.connection_path(hosts[0], hosts[5]).unwrap();
    assert_eq!(
        p.len(),
        6,
        "host, edge, aggregation, core, aggregation, edge, host"
    );
    let node = |i: usize| dmodk.channel_ends(p[i]).1;
    let up = |v: NodeId| -> Vec<NodeId> {
        // v's neighbours one layer up, ascending channel (the router's order)
        let lv = dmodk.level(v).unwrap();
        topo.neighbors(v)
            .into_iter()
            .filter(|&(_, w)| dmodk.level(w) == Some(lv + 1))
            .map(|(_, w)| w)
            .collect()
    };
    let edge = node(0);
    assert_eq!(node(1), up(edge)[1]);
    assert_eq!(node(2), up(node(1))[0]);
    let collides = (0..20u64).any(|seed| {
        let ecmp = Routing::new(&topo, seed).unwrap();
        (1..16).any(|s| worst_channel(&ecmp, &hosts, s) > 1)
    });
    assert!(collides, "ECMP collides for some seed and shift");
}

/// A leaf-spine of 2 leaves × 4 spines, 2 hosts per leaf: host 0 → host 2 (other leaf)
/// crosses its NIC and the last link whole and each leaf–spine link with a quarter.
#[test]
fn spray_splits_a_transfer_evenly_over_the_spines() {
    let topo =
        Topology::from_spec("leaf-spine:leaves=2,spines=4,hosts-per-leaf=2,nvlink=off").unwrap();
    let hosts = topo.hosts();
    let r = Routing::with_mode(&topo, 0, RoutingMode::Spray).unwrap();
    let s = r.spray(hosts[0], hosts[2]).unwrap();
    assert_eq!(s.strands, 4);
    let kind = |v: NodeId| topo.kind(v).unwrap();
    let (mut whole, mut quarter) = (0, 0);
    for &(c, n) in &s.load {
        let (a, b) = r.channel_ends(c);
        let host_end = kind(a) == NodeKind::Host || kind(b) == NodeKind::Host;
        if host_end {
            assert_eq!(n, 4, "a host link carries the whole transfer");
            whole += 1;
        } else {
            assert_eq!(n, 1, "a leaf–spine link carries a quarter");
            quarter += 1;
        }
    }
    assert_eq!((whole, quarter), (2, 8), "NIC + last hop; 4 up + 4 down");
    // a transfer under one leaf never leaves it
    let local = r.spray(hosts[0], hosts[1]).unwrap();
    assert_eq!((local.strands, local.load.len()), (1, 2));
}

fn net(id: u64, src: NodeId, dst: NodeId, bytes: u64) -> FlowRecord {
    FlowRecord {
        id: FlowId(id),
        src,
        dst,
        bytes: Bytes(bytes),
        mode: Mode::Net,
        class: Class::Dp,
        ..Default::default()
    }
}

/// Three transfers from three hosts of leaf 0 to three of leaf 1 over 2 spines, every
/// link 100 Gb/s (12.5 B/ns). Sprayed, each transfer puts half its rate on each
/// uplink, so an uplink carries 3r/2 ≤ 12.5: r = 25/3 B/ns for all three, which end
/// together at wire / r + the path's propagation delay.
#[test]
fn sprayed_transfers_share_the_uplinks_evenly_in_the_replayer() {
    let topo = Topology::from_spec(
        "leaf-spine:leaves=2,spines=2,hosts-per-leaf=4,fabric=100Gbps,nvlink=off",
    )
    .unwrap();
    let h = topo.hosts();
    let bytes = 10_000_000u64;
    let recs: Vec<FlowRecord> = (0..3)
        .map(|i| net(i, h[i as usize], h[4 + i as usize], bytes))
        .collect();
    let opts = ReplayOptions {
        rate_model: RateModel::Ideal,
        ..ReplayOptions::default()
    };
    let wire = Bytes(bytes).with_headers(Bytes(1000), Bytes(48)).0 as f64;
    let spray = Routing::with_mode(&topo, 0, RoutingMode::Spray).unwrap();
    let res = simulate(&recs, &topo, &spray, &opts).unwrap();
    let delay = spray
        .path_delay(&spray.connection_path(h[0], h[4]).unwrap())
        .0 as f64;
    let want = wire / (25.0 / 3.0) + delay;
    for row in res.rows() {
        let got = (row.end_ns - row.start_ns) as f64;
        assert!(
            (got - want).abs() <= 2.0,
            "flow {}: {got} ns, want {want:.1}",
            row.flow_id
        );
    }
    // the links carried the even split: each uplink 3/2 of a transfer's wire bytes
    let up: f64 = res
        .channels
        .iter()
        .filter(|c| {
            topo.kind(c.from) == Some(NodeKind::Switch) && topo.kind(c.to) == Some(NodeKind::Switch)
        })
        .map(|c| c.bytes as f64)
        .fold(0.0, f64::max);
    assert!(
        (up - 1.5 * wire).abs() < 1.0,
        "uplink bytes {up}, want {}",
        1.5 * wire
    );
}

fn write_trace(dir: &std::path::Path, routing: Option<&str>) -> std::path::PathBuf {
    let topo = Topology::from_spec("fat-tree:k=4").unwrap();
    let h = topo.hosts();
    let p = dir.join("t.csv");
    let mut hd = TraceHeader::new();
    hd.set("topology", "fat-tree:k=4");
    hd.set("seed", 0);
    if let Some(r) = routing {
        hd.set("routing", r);
    }
    trace_csv::write(&p, &hd, &[net(0, h[0], h[9], 100_000)]).unwrap();
    p
}

/// A trace records its routing; replaying it under another is refused with a message
/// naming the header field, as a contradicting topology is. No field reads as ecmp.
#[test]
fn a_trace_replayed_under_another_routing_is_refused_by_name() {
    let d = tempfile::tempdir().unwrap();
    let replay = |p: &std::path::Path, r: Option<RoutingMode>| {
        let o = ina3d::pipeline::FileOptions {
            routing: r,
            model: RateModel::Ideal,
            ..Default::default()
        };
        ina3d::pipeline::replay_file(p, &o).map_err(|e| ina3d::pipeline::error_chain(&e))
    };
    let dmodk = write_trace(&d.path().join(""), Some("dmodk"));
    let e = replay(&dmodk, Some(RoutingMode::Ecmp)).unwrap_err();
    assert!(
        e.contains("--routing ecmp") && e.contains("header field `routing` is dmodk"),
        "{e}"
    );
    replay(&dmodk, Some(RoutingMode::Dmodk)).unwrap();
    replay(&dmodk, None).unwrap();
    let old = d.path().join("old");
    std::fs::create_dir(&old).unwrap();
    let plain = write_trace(&old, None);
    let e = replay(&plain, Some(RoutingMode::Spray)).unwrap_err();
    assert!(e.contains("header field `routing` is ecmp"), "{e}");
    replay(&plain, Some(RoutingMode::Ecmp)).unwrap();
    let bad = d.path().join("bad");
    std::fs::create_dir(&bad).unwrap();
    let e = replay(&write_trace(&bad, Some("adaptive")), None).unwrap_err();
    assert!(
        e.contains("header field routing") && e.contains("adaptive"),
        "{e}"
    );
}

/// The suite's smallest Clos case (ls2-ring-16: 2:1 leaf-spine, ring DP + PP, 16 GPUs)
/// under ecmp and dmodk on the replayer and on the ns-3 glue (RoCE, DCQCN on both):
/// the glue forwards on the routes `routes.txt` gives it, the D-mod-k paths under
/// dmodk, and the two back-ends' iteration times agree within 5 % for each mode.
#[test]
fn replayer_and_glue_agree_within_5_percent_under_ecmp_and_dmodk() {
    use ina3d::ns3::Transport;
    use ina3d::pipeline::validate::{cases, rate_model_for, run_suite, Ensemble};
    let base = cases()
        .into_iter()
        .find(|c| c.name == "ls2-ring-16")
        .unwrap();
    let mut dmodk = base.clone();
    dmodk.name = "ls2-ring-16-dmodk";
    dmodk.spec.routing = RoutingMode::Dmodk;
    let d = tempfile::tempdir().unwrap();
    let out = run_suite(
        &[base, dmodk],
        Transport::Roce,
        rate_model_for(Transport::Roce),
        Ensemble {
            runs: 1,
            jitter: None,
        },
        d.path(),
        &mut |_, _, _| {},
    )
    .unwrap();
    let failed: Vec<String> = out
        .failed
        .iter()
        .map(|(n, e)| format!("{n}: {}", ina3d::pipeline::error_chain(e)))
        .collect();
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(out.rows.len(), 2);
    for r in &out.rows {
        eprintln!(
            "{}: iteration error {:+.2} %",
            r.case,
            100.0 * r.iteration_error
        );
        assert!(r.iteration_error.abs() <= 0.05, "{r:?}");
    }
    // the dmodk trace says so, and its glue routes differ from ecmp's somewhere
    let t = std::fs::read_to_string(d.path().join("ls2-ring-16-dmodk/trace.csv")).unwrap();
    assert!(
        t.lines().any(|l| l == "# routing=dmodk"),
        "header records the routing"
    );
    let routes =
        |c: &str| std::fs::read_to_string(d.path().join(c).join("ns3/routes.txt")).unwrap();
    assert_ne!(routes("ls2-ring-16"), routes("ls2-ring-16-dmodk"));
}
