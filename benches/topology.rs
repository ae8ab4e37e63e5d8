//! Routing benchmark: prints figures, asserts nothing about time.
//!
//! `cargo bench --no-default-features --bench topology [-- quick]`: builds fat-trees of
//! 1,024 and 16,000 GPUs, precomputes ECMP routes, then answers 1 M path queries between
//! random host pairs and builds INA trees for DP-like groups; then builds every non-Clos
//! family (Jellyfish, Dragonfly, torus, BCube, DCell, TopoOpt) at 8,192 GPUs or more.

use ina3d::topology::{ecmp_hash, NodeKind, Routing, Topology};
use ina3d::units::NodeId;
use std::time::Instant;

/// `queries` paths between random host pairs (seeded), each its own connection: the time
/// they took and the hops they crossed in all.
fn random_paths(r: &Routing, hosts: u64, queries: u64) -> (std::time::Duration, usize) {
    let mut buf = Vec::new();
    let mut hops = 0usize;
    let t = Instant::now();
    for q in 0..queries {
        let h = ecmp_hash(7, q);
        let s = NodeId((h % hosts) as u32);
        let d = NodeId(((h >> 32) % hosts) as u32);
        r.path_into(s, d, q, &mut buf).expect("path");
        hops += buf.len();
    }
    (t.elapsed(), hops)
}

/// Every non-Clos family at ≥ 8,192 GPUs (issue 22's scale target).
const FAMILIES: [&str; 6] = [
    "jellyfish:switches=1024,ports=24,hosts-per-switch=8,seed=1",
    "dragonfly:groups=65,routers=16,hosts-per-router=8,global-links=8",
    "torus:dims=16x16x32",
    "bcube:n=8,k=4",
    "dcell:n=10,k=2",
    "topoopt:servers=8192,degree=8",
];

/// Builds every family at ≥ 8,192 GPUs, then routes random host pairs (each query a new
/// connection; Jellyfish's first query of a switch pair runs Yen's algorithm) and builds
/// INA candidate trees for DP-like groups of 8.
fn families(quick: bool) {
    for spec in FAMILIES {
        let t0 = Instant::now();
        let t = Topology::from_spec(spec).expect("spec");
        let build = t0.elapsed();
        assert!(t.gpus.len() >= 8192, "{spec}: below the 8,192-GPU target");
        let t1 = Instant::now();
        let r = Routing::new(&t, 1).expect("routing");
        let pre = t1.elapsed();
        let hosts = t.gpus.len() as u64;
        let queries: u64 = if quick { 2_000 } else { 5_000 };
        let (qt, hops) = random_paths(&r, hosts, queries);
        let agg = |v: NodeId| t.kinds[v.idx()] == NodeKind::Switch;
        let groups = if quick { 5 } else { 20 };
        let stride = (hosts / 8).max(1);
        let t3 = Instant::now();
        let mut trees = 0;
        for g in 0..groups {
            let members: Vec<NodeId> = (0..8)
                .map(|i| NodeId(((g * 97 % stride) + i * stride) as u32 % hosts as u32))
                .collect();
            trees += r.candidate_trees(&members, &agg, g).map_or(0, |c| c.len());
        }
        let tt = t3.elapsed();
        println!(
            "{spec}: {} GPUs, {} switches, {} links | build {:.1} ms | routing set-up {:.1} ms | {} path queries {:.1} k/s (mean {:.2} hops) | {} groups of 8: {} candidate trees, {:.1} ms per group",
            t.gpus.len(),
            t.switches().len(),
            t.links.len(),
            build.as_secs_f64() * 1e3,
            pre.as_secs_f64() * 1e3,
            queries,
            queries as f64 / qt.as_secs_f64() / 1e3,
            hops as f64 / queries as f64,
            groups,
            trees,
            tt.as_secs_f64() * 1e3 / groups as f64,
        );
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    let specs: &[&str] = if quick {
        &["fat-tree:k=16"]
    } else {
        &[
            "fat-tree:k=16",
            "leaf-spine:leaves=32,spines=16,hosts-per-leaf=32",
            "fat-tree:k=40",
        ]
    };
    for spec in specs {
        let t0 = Instant::now();
        let t = Topology::from_spec(spec).expect("spec");
        let build = t0.elapsed();
        let t1 = Instant::now();
        let r = Routing::new(&t, 1).expect("routing");
        let pre = t1.elapsed();
        let hosts = t.gpus.len() as u64;
        let queries: u64 = if quick { 100_000 } else { 1_000_000 };
        let (qt, hops) = random_paths(&r, hosts, queries);
        // INA trees over groups of 8 hosts strided across the cluster (DP-like)
        let trees = 1_000u64;
        let stride = (hosts / 8).max(1);
        let t3 = Instant::now();
        let agg = |v: NodeId| t.kinds[v.idx()] == NodeKind::Switch;
        let mut edges = 0;
        for g in 0..trees {
            let members: Vec<NodeId> = (0..8)
                .map(|i| NodeId(((g % stride) + i * stride) as u32 % hosts as u32))
                .collect();
            edges += r
                .aggregation_tree(&members, &agg, g)
                .expect("tree")
                .edges
                .len();
        }
        let tt = t3.elapsed();
        println!(
            "{spec}: {} hosts, {} switches, {} links | build {:.1} ms | routing precompute {:.1} ms | {} path queries in {:.3} s = {:.2} M/s (mean {:.2} hops) | {} INA trees of 8 in {:.1} ms ({:.1} µs each, {} edges)",
            hosts,
            t.switches().len(),
            t.links.len(),
            build.as_secs_f64() * 1e3,
            pre.as_secs_f64() * 1e3,
            queries,
            qt.as_secs_f64(),
            queries as f64 / qt.as_secs_f64() / 1e6,
            hops as f64 / queries as f64,
            trees,
            tt.as_secs_f64() * 1e3,
            tt.as_secs_f64() * 1e6 / trees as f64,
            edges
        );
    }
    families(quick);
}
