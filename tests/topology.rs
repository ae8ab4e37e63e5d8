//! Specification of the topology module: builders, file formats, routing, INA trees.

use ina3d::topology::{ecmp_choice, ecmp_hash, LinkKind, NodeKind, Routing, Topology, TopologyError};
use ina3d::units::{BitsPerSec, Nanos, NodeId, Rank};
use std::collections::BTreeMap;

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
    let nv: Vec<_> = t.links.iter().filter(|l| l.kind == LinkKind::NvLink).collect();
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
