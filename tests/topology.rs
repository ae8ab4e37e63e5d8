//! Specification of the topology module: builders, file formats, routing, INA trees.

use ina3d::formats::topology_txt::Flavor;
use ina3d::topology::{
    ecmp_choice, ecmp_hash, Channel, LinkKind, NodeKind, Routing, Topology, TopologyError,
};
use ina3d::units::{BitsPerSec, Nanos, NodeId, Rank};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const FAT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/hpcc/fat.txt");
const SIMAI: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/simai/Spectrum-X_16g_8gps_100Gbps_A100.txt"
);

fn topo(spec: &str) -> Topology {
    Topology::from_spec(spec).unwrap_or_else(|e| panic!("{spec}: {e}"))
}

fn count(t: &Topology, k: NodeKind) -> usize {
    t.kinds.iter().filter(|&&x| x == k).count()
}

#[test]
fn fat_tree_k_has_k_cubed_over_4_hosts_and_5_k_squared_over_4_switches() {
    for k in [2u64, 4, 6, 8, 16] {
        let t = topo(&format!("fat-tree:k={k},nvlink=off"));
        assert_eq!(count(&t, NodeKind::Host) as u64, k * k * k / 4, "k={k}");
        assert_eq!(count(&t, NodeKind::Switch) as u64, 5 * k * k / 4, "k={k}");
        assert_eq!(count(&t, NodeKind::NvSwitch), 0);
        // host links + ToR-agg + agg-core, each k³/4
        assert_eq!(t.links.len() as u64, 3 * k * k * k / 4, "k={k}");
        assert_eq!(t.gpus.len() as u64, k * k * k / 4);
        assert_eq!(t.gpus_per_server, 1);
    }
}

#[test]
fn every_switch_of_a_fat_tree_has_k_ports() {
    let t = topo("fat-tree:k=8,nvlink=off");
    for s in t.switches() {
        assert_eq!(t.neighbors(s).len(), 8, "switch {s}");
    }
}

#[test]
fn nvlink_domain_adds_one_nvswitch_per_server_linked_to_its_gpus() {
    let t = topo("fat-tree:k=4,gpus-per-server=4,nvlink=900Gbps");
    assert_eq!(count(&t, NodeKind::NvSwitch), 4);
    assert_eq!(t.gpus_per_server, 4);
    assert_eq!(t.nvlink_rate, Some(BitsPerSec::gbps(900)));
    let nv: Vec<_> = t
        .links
        .iter()
        .filter(|l| l.kind == LinkKind::NvLink)
        .collect();
    assert_eq!(nv.len(), 16);
    for l in nv {
        assert_eq!(t.kinds[l.a.idx()], NodeKind::Host);
        assert_eq!(t.kinds[l.b.idx()], NodeKind::NvSwitch);
        // GPU g is on NVSwitch 16 + g/4
        assert_eq!(l.b.0, 16 + l.a.0 / 4);
        assert_eq!(l.rate, BitsPerSec::gbps(900));
    }
    assert!(t.same_nvlink_domain(Rank(4), Rank(7)));
    assert!(!t.same_nvlink_domain(Rank(3), Rank(4)));
}

#[test]
fn fat_tree_paths_take_2_hops_under_one_tor_4_in_a_pod_6_across_pods() {
    let t = topo("fat-tree:k=4");
    let r = Routing::new(&t, 7).unwrap();
    // hosts 0,1 share ToR 0; 2,3 on ToR 1 of pod 0; 4.. in pod 1
    for key in 0..50 {
        assert_eq!(r.path(NodeId(0), NodeId(1), key).unwrap().len(), 2);
        assert_eq!(r.path(NodeId(0), NodeId(3), key).unwrap().len(), 4);
        assert_eq!(r.path(NodeId(0), NodeId(15), key).unwrap().len(), 6);
    }
}

#[test]
fn paths_are_connected_chains_from_src_to_dst_over_network_links_only() {
    let t = topo("fat-tree:k=4,gpus-per-server=8");
    let r = Routing::new(&t, 1).unwrap();
    for (s, d) in [(0u32, 5u32), (7, 8), (15, 0), (3, 2)] {
        for key in 0..20 {
            let p = r.path(NodeId(s), NodeId(d), key).unwrap();
            let mut at = NodeId(s);
            for (i, &c) in p.iter().enumerate() {
                let (from, to) = r.channel_ends(c);
                assert_eq!(from, at);
                assert_eq!(t.channel_ends(c), (from, to));
                assert_ne!(t.links[c.link().idx()].kind, LinkKind::NvLink);
                if i + 1 < p.len() {
                    assert_eq!(t.kinds[to.idx()], NodeKind::Switch, "hosts never forward");
                }
                at = to;
            }
            assert_eq!(at, NodeId(d));
        }
    }
}

#[test]
fn leaf_spine_has_leaves_times_hosts_per_leaf_hosts_and_a_full_bipartite_fabric() {
    let t = topo("leaf-spine:leaves=4,spines=2,hosts-per-leaf=8");
    assert_eq!(t.hosts().len(), 32);
    assert_eq!(t.switches().len(), 6);
    assert_eq!(
        t.nvswitches().len(),
        4,
        "NVLink is on by default: 4 servers of 8"
    );
    let fabric: Vec<_> = t
        .links
        .iter()
        .filter(|l| l.kind == LinkKind::Fabric)
        .collect();
    assert_eq!(fabric.len(), 8);
    // non-blocking by default: 8 × 100G down = 2 uplinks × 400G
    assert!(fabric.iter().all(|l| l.rate == BitsPerSec::gbps(400)));
    assert_eq!(
        t.links.iter().filter(|l| l.kind == LinkKind::Nic).count(),
        32
    );
    assert!(t
        .links
        .iter()
        .all(|l| l.kind != LinkKind::Nic || l.rate == BitsPerSec::gbps(100)));
}

#[test]
fn oversubscription_sizes_leaf_uplinks_so_downlink_over_uplink_capacity_is_the_ratio() {
    let t = topo("leaf-spine:leaves=2,spines=4,hosts-per-leaf=16,nic=200Gbps,oversub=2");
    let up: Vec<_> = t
        .links
        .iter()
        .filter(|l| l.kind == LinkKind::Fabric)
        .collect();
    // 16 × 200G = 3.2T down, 4 uplinks carrying 1.6T → 400G each
    assert!(up.iter().all(|l| l.rate == BitsPerSec::gbps(400)));
    let leaf = t.switches()[0];
    let (mut down, mut upc) = (0u128, 0u128);
    for l in t.links.iter().filter(|l| l.a == leaf || l.b == leaf) {
        match l.kind {
            LinkKind::Nic => down += l.rate.0 as u128,
            LinkKind::Fabric => upc += l.rate.0 as u128,
            LinkKind::NvLink => unreachable!(),
        }
    }
    assert_eq!(down, 2 * upc);
    // a fat-tree with oversub=4: ToR uplinks at nic/4, agg-core links at fabric
    let f = topo("fat-tree:k=4,oversub=4,fabric=400Gbps,nvlink=off");
    let tors: BTreeSet<NodeId> = (16..24).map(NodeId).collect();
    for l in f.links.iter().filter(|l| l.kind == LinkKind::Fabric) {
        let want = if tors.contains(&l.a) {
            BitsPerSec::gbps(25)
        } else {
            BitsPerSec::gbps(400)
        };
        assert_eq!(l.rate, want, "{l:?}");
    }
}

#[test]
fn rail_optimised_places_gpu_i_of_every_server_on_leaf_i() {
    let t = topo("rail:servers=4,gpus-per-server=8,spines=2");
    assert_eq!(t.gpus.len(), 32);
    let leaves: Vec<NodeId> = t.switches()[..8].to_vec();
    for (r, &g) in t.gpus.iter().enumerate() {
        let nic: Vec<NodeId> = t
            .neighbors(g)
            .into_iter()
            .filter(|(c, _)| t.links[c.link().idx()].kind == LinkKind::Nic)
            .map(|(_, w)| w)
            .collect();
        assert_eq!(nic, vec![leaves[r % 8]], "rank {r}");
    }
    let r = Routing::new(&t, 3).unwrap();
    // same rail, different servers: leaf only
    assert_eq!(r.path(t.gpus[1], t.gpus[9], 0).unwrap().len(), 2);
    // different rails, even inside one server: up to a spine and back (NVLink is not routed)
    assert_eq!(r.path(t.gpus[0], t.gpus[1], 0).unwrap().len(), 4);
}

#[test]
fn dual_plane_gives_every_gpu_one_port_in_each_plane_and_flows_stay_in_one_plane() {
    let t = topo("dual-plane:servers=4,gpus-per-server=8,servers-per-tor=2,spines=2");
    assert_eq!(t.switches().len(), 2 * 2 + 2 * 2);
    for &g in &t.gpus {
        let nics = t
            .neighbors(g)
            .into_iter()
            .filter(|(c, _)| t.links[c.link().idx()].kind == LinkKind::Nic)
            .count();
        assert_eq!(nics, 2);
    }
    let r = Routing::new(&t, 5).unwrap();
    let mut planes = BTreeSet::new();
    for key in 0..64 {
        let p = r.path(t.gpus[0], t.gpus[31], key).unwrap();
        assert_eq!(p.len(), 4);
        let tor = r.channel_ends(p[0]).1;
        let last_tor = r.channel_ends(p[3]).0;
        planes.insert(tor);
        // ToRs 36,37 are plane 0, 38,39 plane 1 (after 32 GPUs and 4 NVSwitches): a path never changes plane
        assert_eq!((tor.0 - 36) / 2, (last_tor.0 - 36) / 2, "{p:?}");
    }
    assert_eq!(planes.len(), 2, "ECMP uses both planes");
}

#[test]
fn spec_errors_name_the_bad_key_and_value() {
    let cases = [
        ("fat-tree:k=5", "k"),
        ("fat-tree:k=four", "four"),
        ("leaf-spine:leaves=4,color=red", "color"),
        ("leaf-spine:nic=fast", "fast"),
        ("leaf-spine:fabric=400Gbps,oversub=2", "oversub"),
        ("rail:servers=0", "servers"),
        ("fat-tree:k=4,k=8", "twice"),
        ("fat-tree:latency=soon", "soon"),
        ("fat-tree:k=6", "gpus-per-server"),
        ("torus:x=4", "torus"),
        ("leaf-spine:nic=0Gbps", "zero"),
    ];
    for (spec, needle) in cases {
        let e = Topology::from_spec(spec).expect_err(spec).to_string();
        assert!(e.contains(needle) && e.contains(spec), "{spec}: {e}");
    }
}

#[test]
fn spec_help_documents_every_builder_and_default() {
    for word in [
        "fat-tree",
        "leaf-spine",
        "rail",
        "dual-plane",
        "nic=100Gbps",
        "latency=1us",
        "gpus-per-server=8",
        "nvlink=2400Gbps",
        "oversub",
    ] {
        assert!(Topology::SPEC_HELP.contains(word), "{word}");
    }
}

#[test]
fn builders_apply_latency_and_nic_options_to_every_network_link() {
    let t =
        topo("leaf-spine:leaves=2,spines=1,hosts-per-leaf=2,nic=25Gbps,latency=500ns,nvlink=off");
    assert!(t.links.iter().all(|l| l.delay == Nanos(500)));
    let r = Routing::new(&t, 0).unwrap();
    let p = r.path(NodeId(0), NodeId(3), 9).unwrap();
    assert_eq!(r.path_delay(&p), Nanos(4 * 500));
    assert_eq!(r.bottleneck(&p), BitsPerSec::gbps(25));
}

#[test]
fn check_world_rejects_more_gpus_than_hosts_and_tp_groups_that_leave_a_server() {
    let t = topo("fat-tree:k=4,gpus-per-server=8");
    assert!(t.check_world(16, 8).is_ok());
    let e = t.check_world(32, 8).unwrap_err().to_string();
    assert!(e.contains("32") && e.contains("16"), "{e}");
    let e = t.check_world(16, 16).unwrap_err().to_string();
    assert!(e.contains("16") && e.contains("8 GPUs"), "{e}");
    let e = t.check_world(12, 3).unwrap_err().to_string();
    assert!(e.contains("3") && e.contains("8"), "{e}");
    // without NVLink every GPU is a plain host: TP may cross the network
    let flat = topo("fat-tree:k=4,nvlink=off");
    assert!(flat.check_world(16, 16).is_ok());
}

#[test]
fn same_seed_and_key_give_the_same_path_and_other_seeds_differ_somewhere() {
    let t = topo("fat-tree:k=8,nvlink=off");
    let a = Routing::new(&t, 42).unwrap();
    let b = Routing::new(&t, 42).unwrap();
    let c = Routing::new(&t, 43).unwrap();
    let mut differ = 0;
    for key in 0..500u64 {
        let (s, d) = (
            NodeId((key % 128) as u32),
            NodeId(((key * 37 + 64) % 128) as u32),
        );
        assert_eq!(a.path(s, d, key).unwrap(), b.path(s, d, key).unwrap());
        differ += usize::from(a.path(s, d, key).unwrap() != c.path(s, d, key).unwrap());
    }
    assert!(differ > 100, "seed changes routes ({differ}/500)");
}

#[test]
fn ecmp_spreads_keys_evenly_over_the_four_paths_between_pods_of_a_k4_fat_tree() {
    let t = topo("fat-tree:k=4,nvlink=off");
    let r = Routing::new(&t, 11).unwrap();
    let mut count: BTreeMap<Vec<_>, u32> = BTreeMap::new();
    let n = 40_000;
    for key in 0..n {
        *count
            .entry(r.path(NodeId(0), NodeId(15), key).unwrap())
            .or_default() += 1;
    }
    assert_eq!(count.len(), 4, "k=4: 2 aggregation × 2 core choices");
    // chi-square with 3 degrees of freedom; 16.27 is the 0.1 % critical value
    let e = n as f64 / 4.0;
    let chi: f64 = count.values().map(|&o| (o as f64 - e).powi(2) / e).sum();
    assert!(
        chi < 16.27,
        "chi² = {chi}, counts {:?}",
        count.values().collect::<Vec<_>>()
    );
}

#[test]
fn ecmp_choice_is_uniform_and_reproducible_from_its_documented_formula() {
    // the formula the ns-3 glue re-implements
    fn sm(x: u64) -> u64 {
        let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    for (seed, key) in [(0u64, 0u64), (1, 2), (u64::MAX, 12345)] {
        assert_eq!(ecmp_hash(seed, key), sm(seed ^ sm(key)));
        let h = ecmp_hash(seed, key ^ sm(7));
        assert_eq!(
            ecmp_choice(seed, key, NodeId(7), 5),
            ((h as u128 * 5) >> 64) as usize
        );
    }
    let mut hist = [0u32; 3];
    for key in 0..30_000 {
        hist[ecmp_choice(9, key, NodeId(1), 3)] += 1;
    }
    assert!(
        hist.iter().all(|&h| (9_500..10_500).contains(&h)),
        "{hist:?}"
    );
}

#[test]
fn hpcc_fat_txt_loads_with_320_hosts_56_switches_and_routes() {
    let (t, warnings) = Topology::from_spec_with_warnings(FAT).unwrap();
    // its only irregularity is a trailing blank line, which is no cause for a warning
    assert_eq!(warnings, vec![]);
    assert_eq!(t.node_count(), 376);
    assert_eq!(t.hosts().len(), 320);
    assert_eq!(t.switches().len(), 56);
    assert_eq!(t.links.len(), 480);
    assert_eq!(
        t.links.iter().filter(|l| l.kind == LinkKind::Nic).count(),
        320
    );
    assert!(t
        .links
        .iter()
        .filter(|l| l.kind == LinkKind::Fabric)
        .all(|l| l.rate == BitsPerSec::gbps(400)));
    assert!(t.links.iter().all(|l| l.delay == Nanos(1000)));
    assert_eq!(t.gpus_per_server, 1);
    assert_eq!(t.nvlink_rate, None);
    let r = Routing::new(&t, 0).unwrap();
    // 16 hosts per ToR; ToRs 320..339, aggregation 340..359, core 360..375
    assert_eq!(r.path(NodeId(0), NodeId(15), 1).unwrap().len(), 2);
    assert_eq!(r.level(NodeId(320)), Some(1));
    assert_eq!(r.level(NodeId(340)), Some(2));
    assert_eq!(r.level(NodeId(360)), Some(3));
    assert_eq!(r.path(NodeId(0), NodeId(319), 1).unwrap().len(), 6);
}

#[test]
fn a_sloppy_fat_txt_with_crlf_wrong_counts_and_free_text_loads_with_warnings() {
    let text = std::fs::read_to_string(FAT).unwrap();
    let mut lines: Vec<String> = text.lines().map(|l| format!("{l}  \r")).collect();
    lines[0] = "376 57 500  \r".into();
    let sloppy = format!(
        "{}\n\nthis topology was generated by hand\n  see README\n",
        lines.join("\n")
    );
    let (t, w) = Topology::parse_str(&sloppy, "sloppy.txt").unwrap();
    let (clean, _) = Topology::parse_str(&text, "sloppy.txt").unwrap();
    assert_eq!(t, clean);
    let msgs: Vec<String> = w.iter().map(|w| w.to_string()).collect();
    assert_eq!(msgs.len(), 3, "{msgs:#?}");
    assert!(
        msgs[0].starts_with("sloppy.txt:2: warning:") && msgs[0].contains("57"),
        "{msgs:#?}"
    );
    assert!(
        msgs[1].starts_with("sloppy.txt:485:") && msgs[1].contains("free text"),
        "{msgs:#?}"
    );
    assert!(
        msgs[2].contains("500") && msgs[2].contains("480"),
        "{msgs:#?}"
    );
}

#[test]
fn simai_topology_loads_nvswitches_then_switches() {
    let (t, w) = Topology::from_spec_with_warnings(SIMAI).unwrap();
    assert_eq!(w, vec![]);
    assert_eq!(t.node_count(), 90);
    assert_eq!(t.hosts().len(), 16);
    assert_eq!(t.nvswitches(), vec![NodeId(16), NodeId(17)]);
    assert_eq!(t.switches().len(), 72);
    assert_eq!(t.gpus_per_server, 8);
    assert_eq!(t.nvlink_rate, Some(BitsPerSec::gbps(2400)));
    assert_eq!(t.links.len(), 544);
    assert_eq!(
        t.links
            .iter()
            .filter(|l| l.kind == LinkKind::NvLink)
            .count(),
        16
    );
    assert!(t.same_nvlink_domain(Rank(0), Rank(7)));
    let r = Routing::new(&t, 0).unwrap();
    // rail-optimised: GPU 0 and GPU 8 share rail switch 18
    assert_eq!(r.path(NodeId(0), NodeId(8), 0).unwrap().len(), 2);
    // NVLink is never routed: GPU 0 → GPU 1 crosses a spine
    assert_eq!(r.path(NodeId(0), NodeId(1), 0).unwrap().len(), 4);
}

#[test]
fn written_hpcc_and_simai_files_read_back_identically() {
    for spec in [
        "fat-tree:k=4,nvlink=off",
        "leaf-spine:leaves=3,spines=2,hosts-per-leaf=5,nvlink=off,latency=1500ns",
        "dual-plane:servers=2,gpus-per-server=4,nvlink=off",
    ] {
        let t = topo(spec);
        let (back, w) = Topology::parse_str(&t.to_text(Flavor::Hpcc), spec).unwrap();
        assert_eq!(w, vec![]);
        assert_eq!(back, t, "{spec}");
    }
    for spec in [
        "rail:servers=2,gpus-per-server=8",
        "fat-tree:k=4,gpus-per-server=4,nvlink=900Gbps",
        "fat-tree:k=4,nvlink=off",
    ] {
        let t = topo(spec);
        let (back, w) = Topology::parse_str(
            &t.to_text(Flavor::Simai {
                gpus_per_server: t.gpus_per_server,
                gpu_type: "H100".into(),
            }),
            spec,
        )
        .unwrap();
        assert_eq!(w, vec![]);
        assert_eq!(back, t, "{spec}");
    }
    // the real files too: read → write → read
    for f in [FAT, SIMAI] {
        let (t, _) = Topology::read_file(Path::new(f)).unwrap();
        let text = if t.nvswitches().is_empty() {
            t.to_text(Flavor::Hpcc)
        } else {
            t.to_text(Flavor::Simai {
                gpus_per_server: t.gpus_per_server,
                gpu_type: "A100".into(),
            })
        };
        assert_eq!(Topology::parse_str(&text, f).unwrap().0, t);
    }
}

#[test]
fn reader_errors_name_file_line_and_field() {
    let cases = [
        ("", ":1: header:"),
        ("3 1\n", ":1: header:"),
        ("3 x 2\n2\n0 2 100Gbps 1us 0\n", ":1: switch count:"),
        ("3 1 2\n2\n0 2 100Gbps 1us 0\n1 2 fast 1us 0\n", ":4: rate:"),
        (
            "3 1 2\n2\n0 2 100Gbps 1us 0\n1 2 100Gbps soon 0\n",
            ":4: delay:",
        ),
        (
            "3 1 2\n2\n0 2 100Gbps 1us 0\n1 1 100Gbps 1us 0\n",
            ":4: dst:",
        ),
        ("3 1 2\n2\n0 2 100Gbps\n", ":3: delay:"),
        ("3 1 1\n2\n0 2 100Gbps 1us 7\n", ":3: error_rate:"),
        ("3 1 1\nswitch\n0 2 100Gbps 1us 0\n", ":2: switch id:"),
        ("3 1 1\n0 2 100Gbps 1us 0\n", ":2: switch ids:"),
    ];
    for (text, want) in cases {
        let e = Topology::parse_str(text, "t.txt")
            .expect_err(text)
            .to_string();
        assert!(e.starts_with("t.txt") && e.contains(want), "{text:?}: {e}");
    }
}

#[test]
fn missing_topology_file_is_an_error_naming_it() {
    let e = Topology::from_spec("/nonexistent/topo.txt")
        .unwrap_err()
        .to_string();
    assert!(e.contains("/nonexistent/topo.txt"), "{e}");
}

#[test]
fn routing_rejects_zero_rate_links_and_disconnected_hosts() {
    let mut t = topo("fat-tree:k=4,nvlink=off");
    t.links[20].rate = BitsPerSec(0);
    match Routing::new(&t, 0) {
        Err(TopologyError::ZeroRate { link: 20, .. }) => {}
        other => panic!("{other:?}"),
    }
    // a zero-rate link read from a file: the reader refuses it, naming line and field
    let e = Topology::parse_str("3 1 2\n2\n0 2 0Gbps 1us 0\n1 2 100Gbps 1us 0\n", "z.txt")
        .unwrap_err()
        .to_string();
    assert!(e.contains("z.txt:3") && e.contains("rate"), "{e}");
    // two leaf-spine halves with no spine between them
    let (split, _) = Topology::parse_str(
        "6 2 4\n4 5\n0 4 1Gbps 1us 0\n1 4 1Gbps 1us 0\n2 5 1Gbps 1us 0\n3 5 1Gbps 1us 0\n",
        "s.txt",
    )
    .unwrap();
    let e = Routing::new(&split, 0).unwrap_err();
    assert!(matches!(e, TopologyError::Disconnected { .. }), "{e}");
    // a host known only from the header has no link at all
    let (lonely, w) =
        Topology::parse_str("4 1 2\n2\n0 2 1Gbps 1us 0\n1 2 1Gbps 1us 0\n", "l.txt").unwrap();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(Routing::new(&lonely, 0)
        .unwrap_err()
        .to_string()
        .contains("host 3"));
}

#[test]
fn path_queries_reject_non_hosts() {
    let t = topo("fat-tree:k=4,gpus-per-server=8");
    let r = Routing::new(&t, 0).unwrap();
    assert!(matches!(
        r.path(NodeId(0), NodeId(16), 0),
        Err(TopologyError::NotAHost { .. })
    ));
    assert!(matches!(
        r.path(NodeId(0), NodeId(9999), 0),
        Err(TopologyError::NotAHost { .. })
    ));
    assert_eq!(r.path(NodeId(3), NodeId(3), 0).unwrap(), vec![]);
}

#[test]
fn ina_tree_over_two_pods_aggregates_at_the_tors_and_roots_at_a_core() {
    let t = topo("fat-tree:k=4,nvlink=off");
    let r = Routing::new(&t, 2).unwrap();
    // pod 0: hosts 0,1 (ToR 16), 2 (ToR 17); pod 1: hosts 4,5 (ToR 18)
    let members = [NodeId(0), NodeId(1), NodeId(2), NodeId(4), NodeId(5)];
    let all_switches = |v: NodeId| t.kinds[v.idx()] == NodeKind::Switch;
    for key in 0..16 {
        let tree = r.aggregation_tree(&members, &all_switches, key).unwrap();
        assert_eq!(r.level(tree.root), Some(3), "root is a core switch");
        assert_eq!(tree.fanin(NodeId(16)), 2);
        assert_eq!(tree.fanin(NodeId(17)), 1);
        assert_eq!(tree.fanin(NodeId(18)), 2);
        // every member appears once as a child, and the ToR fan-ins add up to the members
        let tor_fanin: u32 = [16, 17, 18].iter().map(|&s| tree.fanin(NodeId(s))).sum();
        assert_eq!(tor_fanin as usize, members.len());
        for &m in &members {
            assert_eq!(tree.edges.iter().filter(|e| e.child == m).count(), 1);
        }
        // every node but the root has exactly one parent; edges are contiguous paths
        let mut parents = BTreeMap::new();
        for e in &tree.edges {
            assert!(parents.insert(e.child, e.parent).is_none());
            assert_eq!(r.channel_ends(e.path[0]).0, e.child);
            assert_eq!(r.channel_ends(*e.path.last().unwrap()).1, e.parent);
            assert_eq!(e.fanin_at_parent, tree.fanin(e.parent));
        }
        assert!(!parents.contains_key(&tree.root));
        // bottom-up order: a node's own edge comes after all edges into it
        for (i, e) in tree.edges.iter().enumerate() {
            assert!(tree.edges[i..].iter().all(|later| later.parent != e.child));
        }
        // fan-in at each parent sums to the number of edges
        let total: u32 = tree.switches().iter().map(|&s| tree.fanin(s)).sum();
        assert_eq!(total as usize, tree.edges.len());
    }
}

#[test]
fn ina_tree_of_members_under_one_tor_is_that_tor() {
    let t = topo("fat-tree:k=4,nvlink=off");
    let r = Routing::new(&t, 2).unwrap();
    let tree = r
        .aggregation_tree(&[NodeId(1), NodeId(0)], &|_| true, 5)
        .unwrap();
    assert_eq!(tree.root, NodeId(16));
    assert_eq!(tree.edges.len(), 2);
    assert!(tree
        .edges
        .iter()
        .all(|e| e.parent == NodeId(16) && e.path.len() == 1 && e.fanin_at_parent == 2));
    // members in one pod: an aggregation switch of that pod
    let tree = r
        .aggregation_tree(&[NodeId(0), NodeId(3)], &|_| true, 5)
        .unwrap();
    assert_eq!(r.level(tree.root), Some(2));
    assert!([24, 25].contains(&tree.root.0), "{tree:?}");
}

#[test]
fn ina_tree_skips_switches_that_cannot_aggregate_and_errors_when_none_covers() {
    let t = topo("fat-tree:k=4,nvlink=off");
    let r = Routing::new(&t, 2).unwrap();
    let only_cores = |v: NodeId| v.0 >= 32;
    let members = [NodeId(0), NodeId(1), NodeId(15)];
    let tree = r.aggregation_tree(&members, &only_cores, 1).unwrap();
    assert!(tree.root.0 >= 32);
    assert_eq!(tree.edges.len(), 3, "members send straight to the core");
    assert!(tree
        .edges
        .iter()
        .all(|e| e.path.len() == 3 && e.fanin_at_parent == 3));
    let only_tor0 = |v: NodeId| v.0 == 16;
    let e = r.aggregation_tree(&members, &only_tor0, 1).unwrap_err();
    assert!(
        matches!(e, TopologyError::NoAggregator { members: 3, .. }),
        "{e}"
    );
    assert!(r.aggregation_tree(&[], &only_cores, 1).is_err());
    assert!(r
        .aggregation_tree(&[NodeId(0), NodeId(0)], &only_cores, 1)
        .is_err());
    assert!(r.aggregation_tree(&[NodeId(16)], &only_cores, 1).is_err());
}

#[test]
fn routing_a_1024_gpu_fat_tree_reaches_every_pair_in_six_hops_or_fewer() {
    let t = topo("fat-tree:k=16");
    let r = Routing::new(&t, 0).unwrap();
    let mut buf = Vec::new();
    for s in (0..1024).step_by(37) {
        for d in (0..1024).step_by(41) {
            r.path_into(NodeId(s), NodeId(d), (s * 1024 + d) as u64, &mut buf)
                .unwrap();
            assert!(buf.len() <= 6 && (s == d || !buf.is_empty()));
        }
    }
}

proptest! {
    #[test]
    fn arbitrary_text_never_panics_the_reader(text in "\\PC{0,400}") {
        let _ = Topology::parse_str(&text, "fuzz.txt");
    }

    #[test]
    fn topology_like_text_never_panics_the_reader(
        header in prop::collection::vec(0u64..40, 0..7),
        ids in prop::collection::vec(0u64..50, 0..8),
        rows in prop::collection::vec((0u64..45, 0u64..45, prop::sample::select(vec!["100Gbps", "0Gbps", "1", "x"]), prop::sample::select(vec!["1us", "0.001ms", "-1", ""]), prop::sample::select(vec!["0", "0.5", "nan", ""])), 0..12),
        crlf in any::<bool>(),
    ) {
        let nl = if crlf { "\r\n" } else { "\n" };
        let mut s = header.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(" ");
        s += nl;
        s += &ids.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(" ");
        for (a, b, r, d, e) in &rows {
            s += &format!("{nl}{a} {b} {r} {d} {e}");
        }
        if let Ok((t, _)) = Topology::parse_str(&s, "fuzz.txt") {
            // whatever loads must also route or refuse cleanly
            let _ = Routing::new(&t, 1);
        }
    }

    #[test]
    fn any_built_topology_round_trips_through_both_formats(
        kind in 0usize..4, a in 1u64..4, b in 1u64..4, c in 1u64..5,
        nic in 1u64..800, lat in 1u64..5000, nv in any::<bool>(), err in prop::sample::select(vec![0.0, 1e-5, 0.25]),
    ) {
        let nvl = if nv { "nvlink=1234Gbps,gpus-per-server=2" } else { "nvlink=off" };
        let spec = match kind {
            0 => format!("fat-tree:k={},nic={nic}Gbps,latency={lat}ns,{nvl}", 2 * a),
            1 => format!("leaf-spine:leaves={a},spines={b},hosts-per-leaf={},nic={nic}Mbps,latency={lat}ns,{nvl}", 2 * c),
            2 => format!("rail:servers={a},spines={b},gpus-per-server=2,nic={nic}Gbps,nvlink={}", if nv { "300Gbps" } else { "off" }),
            _ => format!("dual-plane:servers={},servers-per-tor={b},spines={c},gpus-per-server=2,latency={lat}ns,nvlink={}", 2 * a, if nv { "300Gbps" } else { "off" }),
        };
        let mut t = topo(&spec);
        for (i, l) in t.links.iter_mut().enumerate() {
            if i % 3 == 0 { l.error_rate = err; }
        }
        let (back, _) = Topology::parse_str(&t.to_text(Flavor::Simai { gpus_per_server: t.gpus_per_server, gpu_type: "A100".into() }), &spec).unwrap();
        prop_assert_eq!(&back, &t);
        if !nv {
            let (back, _) = Topology::parse_str(&t.to_text(Flavor::Hpcc), &spec).unwrap();
            prop_assert_eq!(&back, &t);
        }
        prop_assert!(Routing::new(&t, 0).is_ok());
    }
}

#[test]
fn ina_roots_spread_over_the_spines_of_a_leaf_spine_by_key() {
    let t = topo("leaf-spine:leaves=4,spines=4,hosts-per-leaf=2,nvlink=off");
    let r = Routing::new(&t, 8).unwrap();
    let members: Vec<NodeId> = (0..8).map(NodeId).collect();
    let mut roots = BTreeMap::new();
    for key in 0..400 {
        let tree = r.aggregation_tree(&members, &|_| true, key).unwrap();
        assert_eq!(r.level(tree.root), Some(2));
        assert_eq!(tree.fanin(tree.root), 4, "four leaves feed the spine");
        assert_eq!(tree.edges.len(), 8 + 4);
        assert_eq!(
            tree,
            r.aggregation_tree(&members, &|_| true, key).unwrap(),
            "deterministic"
        );
        *roots.entry(tree.root).or_insert(0) += 1;
    }
    assert_eq!(roots.len(), 4, "{roots:?}");
    assert!(roots.values().all(|&n| n > 60), "{roots:?}");
}

/// An independent reference router, written from the routing rule alone: breadth-first
/// distances to `dst` over network links (never NVLink or an NVSwitch), where only
/// switches relay; at every node the channels to a strictly closer neighbour that is a
/// switch or `dst` itself, in ascending channel order, and `ecmp_choice` among them.
fn reference_path(t: &Topology, seed: u64, src: NodeId, dst: NodeId) -> Option<Vec<Channel>> {
    use ina3d::topology::pair_key;
    let n = t.node_count();
    let host = |v: usize| t.kinds[v] == NodeKind::Host;
    let mut adj: Vec<Vec<(Channel, usize)>> = vec![Vec::new(); n];
    for (i, l) in t.links.iter().enumerate() {
        let nvs = |v: NodeId| t.kinds[v.idx()] == NodeKind::NvSwitch;
        if l.kind == LinkKind::NvLink || nvs(l.a) || nvs(l.b) {
            continue;
        }
        let id = ina3d::units::LinkId(i as u32);
        adj[l.a.idx()].push((Channel::of(id, true), l.b.idx()));
        adj[l.b.idx()].push((Channel::of(id, false), l.a.idx()));
    }
    for a in &mut adj {
        a.sort();
    }
    let mut d = vec![u32::MAX; n];
    d[dst.idx()] = 0;
    let mut q = std::collections::VecDeque::from([dst.idx()]);
    while let Some(u) = q.pop_front() {
        if u != dst.idx() && host(u) {
            continue;
        }
        for &(_, v) in &adj[u] {
            if d[v] == u32::MAX {
                d[v] = d[u] + 1;
                q.push_back(v);
            }
        }
    }
    if d[src.idx()] == u32::MAX {
        return None;
    }
    let key = pair_key(src, dst);
    let (mut u, mut path) = (src.idx(), Vec::new());
    while u != dst.idx() {
        let c: Vec<(Channel, usize)> = adj[u]
            .iter()
            .copied()
            .filter(|&(_, v)| d[v] != u32::MAX && d[v] + 1 == d[u] && (v == dst.idx() || !host(v)))
            .collect();
        let (ch, v) = c[ecmp_choice(seed, key, NodeId(u as u32), c.len())];
        path.push(ch);
        u = v;
    }
    Some(path)
}

#[test]
fn the_router_takes_the_reference_path_between_every_pair_of_hosts_and_switches() {
    let specs = [
        "fat-tree:k=4",
        "fat-tree:k=4,nvlink=off",
        "leaf-spine:leaves=4,spines=2,hosts-per-leaf=4,oversub=2,nvlink=off",
        "rail:servers=4,gpus-per-server=4",
        "dual-plane:servers=4,gpus-per-server=2",
        FAT,
    ];
    for spec in specs {
        let t = topo(spec);
        let ends: Vec<NodeId> = (0..t.node_count() as u32)
            .map(NodeId)
            .filter(|v| matches!(t.kinds[v.idx()], NodeKind::Host | NodeKind::Switch))
            .collect();
        let step = (ends.len() / 60).max(1);
        for seed in [0, 7] {
            let r = Routing::new(&t, seed).unwrap();
            for &a in ends.iter().step_by(step) {
                for &b in ends.iter() {
                    if a == b {
                        continue;
                    }
                    match reference_path(&t, seed, a, b) {
                        Some(p) => assert_eq!(
                            r.connection_path(a, b)
                                .unwrap_or_else(|e| panic!("{spec} seed {seed}: {e}")),
                            p,
                            "{spec}, seed {seed}: {a} -> {b}"
                        ),
                        None => assert!(
                            matches!(
                                r.connection_path(a, b),
                                Err(TopologyError::Disconnected { .. })
                            ),
                            "{spec}, seed {seed}: {a} -> {b} has no path"
                        ),
                    }
                }
            }
        }
    }
}

#[test]
fn sized_uplinks_are_standard_link_speeds_or_the_error_names_the_ratios_that_are() {
    // non-blocking by default: a one-server rail under 8 spines needs 12.5 Gb/s per
    // uplink; the next standard speed, 25 Gb/s, keeps it non-blocking.
    let t = topo("rail:servers=1,gpus-per-server=8,spines=8");
    assert!(t
        .links
        .iter()
        .filter(|l| l.kind == LinkKind::Fabric)
        .all(|l| l.rate == BitsPerSec::gbps(25)));
    // an explicit ratio must land on a standard speed
    let e = Topology::from_spec("leaf-spine:leaves=2,spines=2,hosts-per-leaf=8,oversub=3")
        .unwrap_err()
        .to_string();
    assert!(e.contains("oversub: gives 133.3333 Gb/s uplinks"), "{e}");
    assert!(
        e.contains("ratios that give one here: 40, 16, 8, 4, 2, 1"),
        "{e}"
    );
    for spec in [
        "leaf-spine:leaves=2,spines=2,hosts-per-leaf=8,oversub=2",
        "leaf-spine:leaves=4,spines=4,hosts-per-leaf=16",
        "fat-tree:k=8,oversub=4",
        "dual-plane:servers=3,gpus-per-server=8,spines=2",
    ] {
        for l in topo(spec)
            .links
            .iter()
            .filter(|l| l.kind != LinkKind::NvLink)
        {
            assert!(
                ina3d::topology::STANDARD_RATES.contains(&l.rate),
                "{spec}: {:?}",
                l.rate
            );
        }
    }
}

#[test]
fn a_superpod_puts_each_rail_of_each_scalable_unit_on_its_own_leaf_non_blocking() {
    // DGX A100 SuperPOD: units of 20 servers, HDR 200 Gb/s per GPU. 45 servers = 3 units
    // (the last one of 5 servers): 3 × 8 leaves, 20 spines, each leaf linked once to each
    // spine at 200 Gb/s, so a leaf's 20 downlinks of 200 Gb/s match its 20 uplinks.
    let t = topo("superpod:gen=a100,servers=45");
    assert_eq!(t.gpus.len(), 360);
    assert_eq!(t.nvlink_rate, Some(BitsPerSec::gbps(2400)));
    let leaves: Vec<NodeId> = t.switches()[..24].to_vec();
    assert_eq!(t.switches().len(), 24 + 20);
    for (r, &g) in t.gpus.iter().enumerate() {
        let nic: Vec<(NodeId, BitsPerSec)> = t
            .neighbors(g)
            .into_iter()
            .filter(|(c, _)| t.links[c.link().idx()].kind == LinkKind::Nic)
            .map(|(c, w)| (w, t.links[c.link().idx()].rate))
            .collect();
        let (server, rail) = (r / 8, r % 8);
        let leaf = leaves[(server / 20) * 8 + rail];
        assert_eq!(nic, vec![(leaf, BitsPerSec::gbps(200))], "rank {r}");
    }
    let fabric: Vec<_> = t
        .links
        .iter()
        .filter(|l| l.kind == LinkKind::Fabric)
        .collect();
    assert_eq!(fabric.len(), 24 * 20);
    assert!(fabric.iter().all(|l| l.rate == BitsPerSec::gbps(200)));
    // DGX H100 and B200: units of 32 servers on NDR 400 Gb/s, NVLink 4 and 5
    let h = topo("superpod:gen=h100,servers=4");
    assert_eq!(
        (h.switches().len(), h.nvlink_rate),
        (8 + 32, Some(BitsPerSec::gbps(3600)))
    );
    let b = topo("superpod:gen=b200,servers=2");
    assert_eq!(b.nvlink_rate, Some(BitsPerSec::gbps(7200)));
    let e = Topology::from_spec("superpod:gen=v100")
        .unwrap_err()
        .to_string();
    assert!(e.contains("gen") && e.contains("a100"), "{e}");
}
