//! Specification of the non-Clos fabrics (issue 22): Jellyfish, Dragonfly, torus, BCube,
//! DCell and TopoOpt. Every count is derived by hand from the family's published formula
//! in the test itself; graph facts (regularity, connectivity, diameters) are measured on
//! the built links with a breadth-first search written here, not with the router.

use ina3d::topology::{LinkKind, NodeKind, Topology, TopologyError};
use ina3d::units::NodeId;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

fn topo(spec: &str) -> Topology {
    Topology::from_spec(spec).unwrap_or_else(|e| panic!("{spec}: {e}"))
}

fn count(t: &Topology, k: NodeKind) -> usize {
    t.kinds.iter().filter(|&&x| x == k).count()
}

fn nodes(t: &Topology, k: NodeKind) -> Vec<NodeId> {
    (0..t.kinds.len() as u32)
        .map(NodeId)
        .filter(|v| t.kinds[v.idx()] == k)
        .collect()
}

/// Network links (not NVLink) at every node.
fn degree(t: &Topology) -> Vec<usize> {
    let mut d = vec![0; t.kinds.len()];
    for l in t.links.iter().filter(|l| l.kind != LinkKind::NvLink) {
        d[l.a.idx()] += 1;
        d[l.b.idx()] += 1;
    }
    d
}

fn links_of(t: &Topology, k: LinkKind) -> usize {
    t.links.iter().filter(|l| l.kind == k).count()
}

/// Hop distances from `from` over network links, through nodes `through` allows.
fn bfs(t: &Topology, from: NodeId, through: &dyn Fn(NodeId) -> bool) -> Vec<Option<u32>> {
    let mut adj: Vec<Vec<NodeId>> = vec![Vec::new(); t.kinds.len()];
    for l in t.links.iter().filter(|l| l.kind != LinkKind::NvLink) {
        adj[l.a.idx()].push(l.b);
        adj[l.b.idx()].push(l.a);
    }
    let mut dist = vec![None; t.kinds.len()];
    dist[from.idx()] = Some(0);
    let mut q = VecDeque::from([from]);
    while let Some(v) = q.pop_front() {
        if v != from && !through(v) {
            continue;
        }
        for &w in &adj[v.idx()] {
            if dist[w.idx()].is_none() {
                dist[w.idx()] = Some(dist[v.idx()].unwrap() + 1);
                q.push_back(w);
            }
        }
    }
    dist
}

/// Largest switch-to-switch distance over switch links only.
fn switch_diameter(t: &Topology) -> u32 {
    let sw = nodes(t, NodeKind::Switch);
    let is_sw = |v: NodeId| t.kinds[v.idx()] == NodeKind::Switch;
    sw.iter()
        .map(|&s| {
            let d = bfs(t, s, &is_sw);
            sw.iter()
                .map(|x| d[x.idx()].expect("connected"))
                .max()
                .unwrap()
        })
        .max()
        .unwrap()
}

fn spec_error(spec: &str) -> (String, String) {
    match Topology::from_spec(spec) {
        Err(TopologyError::Spec { key, msg, .. }) => (key, msg),
        other => panic!("{spec}: expected a spec error, got {other:?}"),
    }
}

#[test]
fn jellyfish_acceptance_spec_is_a_connected_4_regular_graph_of_8_switches_with_16_hosts() {
    let t = topo("jellyfish:switches=8,ports=6,hosts-per-switch=2,seed=1");
    // N = 8 switches, h = 2 hosts each: 16 hosts; r = ports − h = 4 switch links each,
    // N·r/2 = 16 switch links, N·h = 16 NIC links.
    assert_eq!(count(&t, NodeKind::Host), 16);
    assert_eq!(count(&t, NodeKind::Switch), 8);
    assert_eq!(links_of(&t, LinkKind::Nic), 16);
    assert_eq!(links_of(&t, LinkKind::Fabric), 16);
    let deg = degree(&t);
    let sw = nodes(&t, NodeKind::Switch);
    for &s in &sw {
        assert_eq!(deg[s.idx()], 6, "every port used: 2 hosts + 4 switches");
        let switch_links = t
            .links
            .iter()
            .filter(|l| l.kind == LinkKind::Fabric && (l.a == s || l.b == s))
            .count();
        assert_eq!(switch_links, 4, "regular of degree r = 4");
    }
    // simple graph: no pair of switches linked twice, no self-loop
    let pairs: BTreeSet<(NodeId, NodeId)> = t
        .links
        .iter()
        .filter(|l| l.kind == LinkKind::Fabric)
        .map(|l| (l.a.min(l.b), l.a.max(l.b)))
        .collect();
    assert_eq!(pairs.len(), 16);
    assert!(pairs.iter().all(|(a, b)| a != b));
    // connected over switches
    let is_sw = |v: NodeId| t.kinds[v.idx()] == NodeKind::Switch;
    let d = bfs(&t, sw[0], &is_sw);
    assert!(sw.iter().all(|s| d[s.idx()].is_some()));
    // host g on switch g / 2
    for l in t.links.iter().filter(|l| l.kind == LinkKind::Nic) {
        assert_eq!(l.b.0 - sw[0].0, l.a.0 / 2);
    }
}

#[test]
fn jellyfish_is_drawn_from_its_seed_regular_and_connected_for_many_seeds() {
    let a = topo("jellyfish:switches=8,ports=6,hosts-per-switch=2,seed=1");
    let b = topo("jellyfish:switches=8,ports=6,hosts-per-switch=2,seed=1");
    assert_eq!(a.links, b.links, "same seed, same graph");
    let mut graphs = BTreeSet::new();
    for seed in 0..20 {
        // 20 switches of 7 ports, 2 hosts: r = 5, odd r on an even N
        let t = topo(&format!(
            "jellyfish:switches=20,ports=7,hosts-per-switch=2,seed={seed}"
        ));
        let sw = nodes(&t, NodeKind::Switch);
        let deg = degree(&t);
        assert!(sw.iter().all(|s| deg[s.idx()] == 7), "seed {seed}");
        assert_eq!(links_of(&t, LinkKind::Fabric), 20 * 5 / 2);
        assert!(switch_diameter(&t) < 20, "connected (seed {seed})");
        graphs.insert(format!("{:?}", t.links));
    }
    assert!(
        graphs.len() > 15,
        "seeds draw different graphs: {}",
        graphs.len()
    );
}

#[test]
fn dragonfly_acceptance_spec_has_one_global_link_between_every_pair_of_groups() {
    let t = topo("dragonfly:groups=4,routers=2,hosts-per-router=2");
    // g = 4 groups × a = 2 routers × p = 2 hosts = 16 hosts, 8 routers; local links
    // g·a(a−1)/2 = 4; global: one per pair of groups, g(g−1)/2 = 6.
    assert_eq!(count(&t, NodeKind::Host), 16);
    assert_eq!(count(&t, NodeKind::Switch), 8);
    assert_eq!(links_of(&t, LinkKind::Nic), 16);
    assert_eq!(links_of(&t, LinkKind::Fabric), 4 + 6);
    let r0 = nodes(&t, NodeKind::Switch)[0].0;
    let group = |v: NodeId| (v.0 - r0) / 2;
    let mut per_pair: BTreeMap<(u32, u32), u32> = BTreeMap::new();
    let mut global_at: BTreeMap<u32, u32> = BTreeMap::new();
    for l in t.links.iter().filter(|l| l.kind == LinkKind::Fabric) {
        let (ga, gb) = (group(l.a), group(l.b));
        if ga != gb {
            *per_pair.entry((ga.min(gb), ga.max(gb))).or_default() += 1;
            *global_at.entry(l.a.0).or_default() += 1;
            *global_at.entry(l.b.0).or_default() += 1;
        }
    }
    assert_eq!(per_pair.len(), 6);
    assert!(per_pair.values().all(|&n| n == 1));
    // g − 1 = 3 global ports per group over 2 routers: 2 and 1, never 3 and 0
    for g in 0..4 {
        let on: Vec<u32> = (0..2).map(|i| global_at[&(r0 + 2 * g + i)]).collect();
        assert_eq!(on.iter().sum::<u32>(), 3);
        assert!(on.iter().all(|&n| (1..=2).contains(&n)), "{on:?}");
    }
}

#[test]
fn a_balanced_dragonfly_has_a_h_plus_1_groups_and_h_global_links_on_every_router() {
    // Kim et al.: a = 2p = 2h is balanced; with g = a·h + 1 groups every pair of groups
    // has exactly one global link. a = 4, p = 2, h = 2: g = 9, 36 routers, 72 hosts,
    // local 9 · 4·3/2 = 54, global 9·8/2 = 36, router degree p + (a − 1) + h = 7.
    let t = topo("dragonfly:groups=9,routers=4,hosts-per-router=2,global-links=2");
    assert_eq!(count(&t, NodeKind::Host), 72);
    assert_eq!(count(&t, NodeKind::Switch), 36);
    assert_eq!(links_of(&t, LinkKind::Fabric), 54 + 36);
    let deg = degree(&t);
    assert!(nodes(&t, NodeKind::Switch)
        .iter()
        .all(|s| deg[s.idx()] == 7));
}

#[test]
fn torus_has_2n_links_per_router_and_diameter_n_times_floor_k_over_2() {
    for (dims, ks) in [
        ("4x4", vec![4u32, 4]),
        ("4x4x4", vec![4, 4, 4]),
        ("2x3", vec![2, 3]),
        ("5x3x2", vec![5, 3, 2]),
    ] {
        let t = topo(&format!("torus:dims={dims}"));
        let routers: u32 = ks.iter().product();
        let n = ks.len();
        assert_eq!(count(&t, NodeKind::Host) as u32, routers, "{dims}");
        assert_eq!(count(&t, NodeKind::Switch) as u32, routers, "{dims}");
        assert_eq!(
            links_of(&t, LinkKind::Fabric),
            routers as usize * n,
            "{dims}"
        );
        let deg = degree(&t);
        for s in nodes(&t, NodeKind::Switch) {
            assert_eq!(deg[s.idx()], 2 * n + 1, "{dims}: 2n torus links + its host");
        }
        let want: u32 = ks.iter().map(|k| k / 2).sum();
        assert_eq!(switch_diameter(&t), want, "{dims}");
    }
    let t = topo("torus:dims=4x4,hosts-per-node=2,gpus-per-server=2");
    assert_eq!(count(&t, NodeKind::Host), 32);
    assert_eq!(count(&t, NodeKind::NvSwitch), 16);
    assert_eq!(t.gpus_per_server, 2);
}

#[test]
fn bcube_has_n_to_the_k_plus_1_servers_with_k_plus_1_nics_and_k_plus_1_levels_of_n_to_the_k_switches(
) {
    for (n, k) in [(4u32, 1u32), (3, 2), (2, 3)] {
        let t = topo(&format!("bcube:n={n},k={k}"));
        let servers = n.pow(k + 1) as usize;
        let switches = ((k + 1) * n.pow(k)) as usize;
        assert_eq!(count(&t, NodeKind::Host), servers);
        assert_eq!(count(&t, NodeKind::Switch), switches);
        assert_eq!(t.links.len(), servers * (k as usize + 1));
        let deg = degree(&t);
        for h in nodes(&t, NodeKind::Host) {
            assert_eq!(deg[h.idx()], k as usize + 1, "k+1 NICs");
        }
        for s in nodes(&t, NodeKind::Switch) {
            assert_eq!(deg[s.idx()], n as usize, "n-port switches");
            // the servers on one switch differ in exactly one address digit
            let on: Vec<u32> = t.links.iter().filter(|l| l.b == s).map(|l| l.a.0).collect();
            let digits = |x: u32| (0..=k).map(move |l| x / n.pow(l) % n);
            let differ: BTreeSet<usize> = on
                .iter()
                .flat_map(|&x| {
                    digits(x)
                        .zip(digits(on[0]))
                        .enumerate()
                        .filter(|(_, (a, b))| a != b)
                        .map(|(l, _)| l)
                        .collect::<Vec<_>>()
                })
                .collect();
            assert_eq!(differ.len(), 1, "switch {s}: servers {on:?}");
        }
    }
    assert_eq!(count(&topo("bcube:n=4,k=1"), NodeKind::Host), 16);
}

#[test]
fn dcell_has_t_k_servers_each_with_k_plus_1_links_and_t_k_over_2_links_per_level() {
    // t_0 = n, t_l = t_(l−1)(t_(l−1) + 1): DCell(4,1) has 4·5 = 20 servers, DCell(2,2)
    // has t_1 = 6, t_2 = 6·7 = 42; DCell(3,1) 12.
    for (n, k, servers) in [(4u32, 1u32, 20usize), (2, 2, 42), (3, 1, 12)] {
        let t = topo(&format!("dcell:n={n},k={k}"));
        assert_eq!(count(&t, NodeKind::Host), servers, "DCell({n},{k})");
        assert_eq!(count(&t, NodeKind::Switch), servers / n as usize);
        // server–switch links t_k, and t_k/2 server–server links per level
        assert_eq!(
            links_of(&t, LinkKind::Nic),
            servers + k as usize * servers / 2
        );
        let deg = degree(&t);
        for h in nodes(&t, NodeKind::Host) {
            assert_eq!(deg[h.idx()], k as usize + 1, "DCell({n},{k}) server {h}");
        }
        for s in nodes(&t, NodeKind::Switch) {
            assert_eq!(deg[s.idx()], n as usize);
        }
        // connected through relaying servers
        let d = bfs(&t, NodeId(0), &|_| true);
        assert!(d.iter().all(Option::is_some));
    }
    // DCell(4,1): copy i's server j−1 joins copy j's server i, e.g. 0–4 (copies 0, 1),
    // 3–16 (copies 0, 4), 15–19 (copies 3, 4), 5–9 (copies 1, 2: servers 4+1 and 8+1)
    let t = topo("dcell:n=4,k=1");
    let server_pairs: BTreeSet<(u32, u32)> = t
        .links
        .iter()
        .filter(|l| t.kinds[l.b.idx()] == NodeKind::Host)
        .map(|l| (l.a.0.min(l.b.0), l.a.0.max(l.b.0)))
        .collect();
    for p in [(0, 4), (3, 16), (15, 19), (5, 9)] {
        assert!(server_pairs.contains(&p), "{p:?} in {server_pairs:?}");
    }
}

#[test]
fn topoopt_links_every_server_to_i_plus_minus_p_for_coprime_p_and_has_no_switch() {
    let t = topo("topoopt:servers=16,degree=4");
    assert_eq!(count(&t, NodeKind::Host), 16);
    assert_eq!(count(&t, NodeKind::Switch), 0);
    // degree/2 = 2 rings of 16 links: 32
    assert_eq!(t.links.len(), 32);
    assert!(degree(&t).iter().all(|&d| d == 4));
    let strides: BTreeSet<u32> = t
        .links
        .iter()
        .map(|l| {
            let d = (l.b.0 + 16 - l.a.0) % 16;
            d.min(16 - d)
        })
        .collect();
    // ring 0 is p = 1; ring 1 the coprime p nearest 16^(1/2) = 4: 3 and 5 tie, the lower
    assert_eq!(strides, BTreeSet::from([1, 3]));
    let d = bfs(&t, NodeId(0), &|_| true);
    // ±1, ±3 on Z_16: 8 = 3+3+1+1 is the farthest, 4 hops
    assert_eq!(d.iter().map(|x| x.unwrap()).max(), Some(4));
    // an odd degree adds the matching i <-> i + 8
    let t = topo("topoopt:servers=16,degree=3");
    assert_eq!(t.links.len(), 16 + 8);
    assert!(degree(&t).iter().all(|&d| d == 3));
}

#[test]
fn the_acceptance_specs_build_exactly_as_spelled() {
    // a server is the GPUs on one switch or router (2 here), or one GPU for the
    // server-centric and direct-connect families
    for (spec, hosts, gps) in [
        (
            "jellyfish:switches=8,ports=6,hosts-per-switch=2,seed=1",
            16,
            2,
        ),
        ("dragonfly:groups=4,routers=2,hosts-per-router=2", 16, 2),
        ("torus:dims=4x4", 16, 1),
        ("bcube:n=4,k=1", 16, 1),
        ("dcell:n=4,k=1", 20, 1),
        ("topoopt:servers=16,degree=4", 16, 1),
    ] {
        let t = topo(spec);
        assert_eq!(t.gpus.len(), hosts, "{spec}");
        assert_eq!(t.source, spec);
        assert_eq!(t.gpus_per_server, gps, "{spec}");
        assert_eq!(
            t.nvlink_rate.is_some(),
            gps > 1,
            "{spec}: NVLink only in servers of several GPUs"
        );
    }
}

#[test]
fn parameters_that_cannot_build_name_the_parameter_and_the_rule() {
    for (spec, key, rule) in [
        (
            "jellyfish:switches=5,ports=5,hosts-per-switch=2",
            "ports",
            "odd",
        ),
        (
            "jellyfish:switches=8,ports=2,hosts-per-switch=2",
            "ports",
            "must exceed",
        ),
        (
            "jellyfish:switches=4,ports=8,hosts-per-switch=2",
            "ports",
            "others to link to",
        ),
        (
            "dragonfly:groups=4,routers=2,hosts-per-router=2,global-links=1",
            "global-links",
            "groups ≤ routers × global-links + 1",
        ),
        (
            "dragonfly:groups=2,routers=2,hosts-per-router=2,routing=valiant",
            "routing",
            "intermediate group",
        ),
        ("dragonfly:routing=adaptive", "routing", "minimal"),
        ("torus:dims=4x1", "dims", "at least 2"),
        ("torus:dims=16", "dims", "2-D or 3-D"),
        ("torus:dims=4xq", "dims", "sizes joined by x"),
        ("bcube:n=1,k=1", "n", "n ≥ 2"),
        ("dcell:n=1,k=1", "n", "n ≥ 2"),
        ("dcell:n=8,k=3", "k", "more than"),
        ("topoopt:servers=16,degree=16", "degree", "not below"),
        ("topoopt:servers=16,degree=17", "degree", "not below"),
        ("topoopt:servers=15,degree=3", "degree", "odd"),
        ("topoopt:servers=16,degree=1", "degree", "at least 2"),
        ("topoopt:servers=6,degree=4", "degree", "coprime"),
        (
            "bcube:n=4,k=1,fabric=400Gbps",
            "fabric",
            "no switch-to-switch",
        ),
        ("bcube:n=4,k=1,nics-per-server=4", "nics-per-server", "k+1"),
        ("torus:dims=4x4,colour=red", "colour", "unknown option"),
    ] {
        let (k, msg) = spec_error(spec);
        assert_eq!(k, key, "{spec}: {msg}");
        assert!(msg.contains(rule), "{spec}: `{msg}` lacks `{rule}`");
    }
}

#[test]
fn nics_per_server_gives_every_gpu_that_many_ports_over_its_gpus() {
    // default: one NIC per GPU
    let t = topo("leaf-spine:leaves=2,spines=2,hosts-per-leaf=8,gpus-per-server=8");
    assert_eq!(links_of(&t, LinkKind::Nic), 16);
    let t =
        topo("leaf-spine:leaves=2,spines=2,hosts-per-leaf=8,gpus-per-server=8,nics-per-server=16");
    assert_eq!(links_of(&t, LinkKind::Nic), 32, "two ports per GPU");
    let deg = degree(&t);
    assert!(nodes(&t, NodeKind::Host).iter().all(|h| deg[h.idx()] == 2));
    // the leaf uplinks stay non-blocking: 8 hosts × 2 × 100 Gb/s over 2 spines = 800 Gb/s
    let up = t.links.iter().find(|l| l.kind == LinkKind::Fabric).unwrap();
    assert_eq!(up.rate.0, 800_000_000_000);
    for spec in [
        "jellyfish:switches=8,ports=8,hosts-per-switch=2,nics-per-server=4",
        "dragonfly:groups=4,routers=2,hosts-per-router=2,nics-per-server=4",
        "torus:dims=4x4,nics-per-server=2",
        "fat-tree:k=4,gpus-per-server=2,nics-per-server=4",
        "rail:servers=2,gpus-per-server=4,nics-per-server=8",
    ] {
        let t = topo(spec);
        let deg = degree(&t);
        assert!(
            nodes(&t, NodeKind::Host).iter().all(|h| deg[h.idx()] == 2),
            "{spec}"
        );
    }
    let (k, msg) = spec_error("leaf-spine:gpus-per-server=8,nics-per-server=4");
    assert_eq!(k, "nics-per-server");
    assert!(msg.contains("multiple of gpus-per-server=8"), "{msg}");
    let (k, msg) = spec_error("dual-plane:servers=2,gpus-per-server=8,nics-per-server=8");
    assert_eq!(k, "nics-per-server");
    assert!(msg.contains("must be 16"), "{msg}");
    let dp = topo("dual-plane:servers=2,gpus-per-server=8,nics-per-server=16");
    assert_eq!(links_of(&dp, LinkKind::Nic), 32);
}

// ----------------------------------------------------------------------------- routing

use ina3d::topology::{connection_key, Channel, Routing};

/// The nodes a path visits after `src`, checking it is a chain of links from `src` to `dst`.
fn visits(t: &Topology, src: NodeId, dst: NodeId, path: &[Channel]) -> Vec<NodeId> {
    let mut at = src;
    let mut out = Vec::new();
    for &c in path {
        let (a, b) = t.channel_ends(c);
        assert_eq!(a, at, "{src}->{dst}: {path:?} is not a chain");
        assert_ne!(t.links[c.link().idx()].kind, LinkKind::NvLink);
        out.push(b);
        at = b;
    }
    assert_eq!(at, dst);
    let mut seen = BTreeSet::from([src]);
    assert!(
        out.iter().all(|v| seen.insert(*v)),
        "{src}->{dst} revisits a node: {out:?}"
    );
    out
}

fn all_pairs(t: &Topology) -> Vec<(NodeId, NodeId)> {
    let h = nodes(t, NodeKind::Host);
    h.iter()
        .flat_map(|&a| h.iter().filter(move |&&b| b != a).map(move |&b| (a, b)))
        .collect()
}

#[test]
fn dragonfly_minimal_routes_take_at_most_3_router_hops_and_valiant_at_most_5_through_a_third_group()
{
    let t = topo("dragonfly:groups=4,routers=2,hosts-per-router=2");
    let r = Routing::new(&t, 0).unwrap();
    let r0 = nodes(&t, NodeKind::Switch)[0].0;
    let group = |v: NodeId| (v.0 - r0) / 2;
    let mut longest = 0;
    for (a, b) in all_pairs(&t) {
        for ch in 0..4 {
            let p = r.channel_path(a, b, ch).unwrap();
            let v = visits(&t, a, b, &p);
            let router_hops = p.len() - 2;
            assert!(router_hops <= 3, "{a}->{b}: {v:?}");
            // minimal: never enters a third group
            let groups: BTreeSet<u32> = v[..v.len() - 1].iter().map(|&x| group(x)).collect();
            assert!(groups.len() <= 2, "{a}->{b}: {v:?}");
            longest = longest.max(router_hops);
        }
    }
    assert_eq!(
        longest, 3,
        "minimal-route diameter 3 (local, global, local)"
    );
    let t = topo("dragonfly:groups=4,routers=2,hosts-per-router=2,routing=valiant");
    let r = Routing::new(&t, 0).unwrap();
    let mut longest = 0;
    let mut thirds = BTreeSet::new();
    for (a, b) in all_pairs(&t) {
        let p = r.connection_path(a, b).unwrap();
        let v = visits(&t, a, b, &p);
        longest = longest.max(p.len() - 2);
        assert!(p.len() - 2 <= 5, "{a}->{b}: {v:?}");
        let (ga, gb) = (group(v[0]), group(v[v.len() - 2]));
        if ga != gb {
            let mid: BTreeSet<u32> = v[..v.len() - 1]
                .iter()
                .map(|&x| group(x))
                .filter(|&g| g != ga && g != gb)
                .collect();
            assert_eq!(
                mid.len(),
                1,
                "Valiant crosses one intermediate group: {v:?}"
            );
            thirds.extend(mid);
        }
    }
    assert!(longest > 3 && longest <= 5, "{longest}");
    assert_eq!(
        thirds.len(),
        4,
        "intermediate groups spread over all groups"
    );
}

#[test]
fn torus_routes_are_dimension_ordered_and_as_long_as_the_torus_distance() {
    for (spec, dims) in [
        ("torus:dims=4x4", vec![4u32, 4]),
        ("torus:dims=3x4x2", vec![3, 4, 2]),
    ] {
        let t = topo(spec);
        let r = Routing::new(&t, 3).unwrap();
        let r0 = nodes(&t, NodeKind::Switch)[0].0;
        let coord = |v: NodeId| {
            let mut x = v.0 - r0;
            dims.iter()
                .map(|&k| {
                    let c = x % k;
                    x /= k;
                    c
                })
                .collect::<Vec<u32>>()
        };
        let mut diameter = 0;
        for (a, b) in all_pairs(&t) {
            let p = r.connection_path(a, b).unwrap();
            let v = visits(&t, a, b, &p);
            // host a sits on router a (one host per node)
            let (ca, cb) = (coord(NodeId(r0 + a.0)), coord(NodeId(r0 + b.0)));
            let want: u32 = (0..dims.len())
                .map(|d| {
                    let f = (cb[d] + dims[d] - ca[d]) % dims[d];
                    f.min(dims[d] - f)
                })
                .sum();
            assert_eq!(p.len() as u32, want + 2, "{spec} {a}->{b}: {v:?}");
            diameter = diameter.max(p.len() as u32);
            // dimension order: the dimension that changes never goes back down
            let routers: Vec<Vec<u32>> = v[..v.len() - 1].iter().map(|&x| coord(x)).collect();
            let changed: Vec<usize> = routers
                .windows(2)
                .map(|w| (0..dims.len()).find(|&d| w[0][d] != w[1][d]).unwrap())
                .collect();
            assert!(
                changed.windows(2).all(|w| w[0] <= w[1]),
                "{spec} {a}->{b}: {routers:?}"
            );
        }
        let want: u32 = dims.iter().map(|k| k / 2).sum();
        assert_eq!(diameter, want + 2, "{spec}: host diameter n·⌊k/2⌋ + 2");
    }
}

/// Every simple switch path from `a` to `b`, shortest first (DFS, written here).
fn simple_paths(t: &Topology, a: NodeId, b: NodeId) -> Vec<Vec<NodeId>> {
    let mut out = Vec::new();
    let mut stack = vec![a];
    fn go(t: &Topology, b: NodeId, stack: &mut Vec<NodeId>, out: &mut Vec<Vec<NodeId>>) {
        let u = *stack.last().unwrap();
        if u == b {
            out.push(stack.clone());
            return;
        }
        for l in t.links.iter().filter(|l| l.kind == LinkKind::Fabric) {
            let w = if l.a == u {
                l.b
            } else if l.b == u {
                l.a
            } else {
                continue;
            };
            if !stack.contains(&w) {
                stack.push(w);
                go(t, b, stack, out);
                stack.pop();
            }
        }
    }
    go(t, b, &mut stack, &mut out);
    out.sort_by_key(|p| p.len());
    out
}

#[test]
fn jellyfish_spreads_channels_over_the_8_shortest_paths() {
    let t = topo("jellyfish:switches=8,ports=6,hosts-per-switch=2,seed=1");
    let r = Routing::new(&t, 0).unwrap();
    let sw = nodes(&t, NodeKind::Switch);
    // hosts 0 and 14 sit on switches 0 and 7
    let (a, b) = (NodeId(0), NodeId(14));
    let all = simple_paths(&t, sw[0], sw[7]);
    let want: Vec<usize> = all.iter().take(8).map(Vec::len).collect();
    let mut used: BTreeMap<Vec<NodeId>, u32> = BTreeMap::new();
    for ch in 0..400 {
        let p = r.channel_path(a, b, ch).unwrap();
        let v = visits(&t, a, b, &p);
        let switches: Vec<NodeId> = std::iter::once(sw[0])
            .chain(v[1..v.len() - 1].iter().copied())
            .collect();
        assert!(all.contains(&switches), "a simple path: {switches:?}");
        *used.entry(switches).or_default() += 1;
    }
    assert_eq!(used.len(), 8, "400 channels use all 8 paths: {used:?}");
    let mut lens: Vec<usize> = used.keys().map(Vec::len).collect();
    lens.sort_unstable();
    assert_eq!(lens, want, "the 8 shortest lengths");
    assert!(used.values().all(|&n| n > 20), "evenly: {used:?}");
    // same key, same path; the ECMP seed reshuffles
    let r2 = Routing::new(&t, 9).unwrap();
    let differs =
        (0..50).any(|c| r.channel_path(a, b, c).unwrap() != r2.channel_path(a, b, c).unwrap());
    assert!(differs);
    assert_eq!(
        r.channel_path(a, b, 3).unwrap(),
        Routing::new(&t, 0).unwrap().channel_path(a, b, 3).unwrap()
    );
}

#[test]
fn bcube_source_routes_correct_one_digit_per_hop_through_relay_servers() {
    let t = topo("bcube:n=4,k=1");
    let r = Routing::new(&t, 0).unwrap();
    let digits = |x: u32| [x % 4, x / 4];
    for (a, b) in all_pairs(&t) {
        let differ = (0..2).filter(|&l| digits(a.0)[l] != digits(b.0)[l]).count();
        let p = r.connection_path(a, b).unwrap();
        let v = visits(&t, a, b, &p);
        assert_eq!(p.len(), 2 * differ, "{a}->{b}: {v:?}");
        // server, switch, server, …: every relay is a server one digit closer
        for (i, x) in v.iter().enumerate() {
            let want = if i % 2 == 0 {
                NodeKind::Switch
            } else {
                NodeKind::Host
            };
            assert_eq!(t.kinds[x.idx()], want, "{a}->{b}: {v:?}");
        }
    }
    // the k+1 = 2 parallel paths of 0 -> 5 (both digits differ): first via the level-0
    // switch (relay 1) or the level-1 switch (relay 4); the key picks, both are used
    let relays: BTreeSet<NodeId> = (0..64)
        .map(|c| {
            visits(
                &t,
                NodeId(0),
                NodeId(5),
                &r.channel_path(NodeId(0), NodeId(5), c).unwrap(),
            )[1]
        })
        .collect();
    assert_eq!(relays, BTreeSet::from([NodeId(1), NodeId(4)]));
}

#[test]
fn dcell_routes_through_the_link_joining_the_two_sub_dcells() {
    let t = topo("dcell:n=4,k=1");
    let r = Routing::new(&t, 0).unwrap();
    let sw = nodes(&t, NodeKind::Switch);
    // 0 (copy 0) -> 19 (copy 4): the link joining copies 0 and 4 is 3–16, so
    // 0, switch 0, 3, 16, switch 4, 19
    let p = r.connection_path(NodeId(0), NodeId(19)).unwrap();
    assert_eq!(
        visits(&t, NodeId(0), NodeId(19), &p),
        vec![sw[0], NodeId(3), NodeId(16), sw[4], NodeId(19)]
    );
    // 0 -> 4: directly linked servers
    assert_eq!(
        visits(
            &t,
            NodeId(0),
            NodeId(4),
            &r.connection_path(NodeId(0), NodeId(4)).unwrap()
        ),
        vec![NodeId(4)]
    );
    for (a, b) in all_pairs(&t) {
        let p = r.connection_path(a, b).unwrap();
        visits(&t, a, b, &p);
        // DCellRouting's bound for k = 1: 2^(k+1) − 1 = 3 server hops, each up to 2 links
        assert!(p.len() <= 5, "{a}->{b}: {p:?}");
    }
}

#[test]
fn topoopt_routes_take_shortest_paths_through_relay_servers() {
    let t = topo("topoopt:servers=16,degree=4");
    let r = Routing::new(&t, 0).unwrap();
    for (a, b) in all_pairs(&t) {
        let d = bfs(&t, a, &|_| true);
        let p = r.channel_path(a, b, 1).unwrap();
        visits(&t, a, b, &p);
        assert_eq!(Some(p.len() as u32), d[b.idx()], "{a}->{b}");
    }
}

#[test]
fn every_family_routes_every_pair_and_the_key_of_a_channel_is_the_connection_key() {
    for spec in [
        "jellyfish:switches=8,ports=6,hosts-per-switch=2,seed=1",
        "dragonfly:groups=4,routers=2,hosts-per-router=2",
        "torus:dims=4x4",
        "bcube:n=4,k=1",
        "dcell:n=4,k=1",
        "topoopt:servers=16,degree=4",
    ] {
        let t = topo(spec);
        let r = Routing::new(&t, 1).unwrap();
        for (a, b) in all_pairs(&t) {
            let p = r.channel_path(a, b, 2).unwrap();
            assert_eq!(p, r.path(a, b, connection_key(a, b, 2)).unwrap(), "{spec}");
            let relays = visits(&t, a, b, &p);
            let hosts_relay = spec.starts_with("bcube")
                || spec.starts_with("dcell")
                || spec.starts_with("topoopt");
            if !hosts_relay {
                assert!(
                    relays[..relays.len() - 1]
                        .iter()
                        .all(|v| t.kinds[v.idx()] == NodeKind::Switch),
                    "{spec}"
                );
            }
        }
    }
}

#[test]
fn the_command_line_exits_2_naming_the_parameter_and_the_rule() {
    let tiny = concat!(env!("CARGO_MANIFEST_DIR"), "/traces/example/tiny.toml");
    let dir = std::env::temp_dir();
    let out = dir.join("ina3d-families-cli.csv");
    for (spec, words) in [
        (
            "jellyfish:switches=5,ports=5,hosts-per-switch=2",
            ["ports", "odd"],
        ),
        ("torus:dims=4x1", ["dims", "at least 2"]),
        ("topoopt:servers=16,degree=20", ["degree", "not below"]),
    ] {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_ina3d"))
            .args([
                "trace",
                tiny,
                "--topology",
                spec,
                "-o",
                out.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{spec}: {err}");
        for w in words {
            assert!(err.contains(w), "{spec}: {err}");
        }
    }
}

#[test]
fn every_family_writes_hpcc_and_simai_topology_files_that_read_back_as_its_links() {
    use ina3d::formats::topology_txt::Flavor;
    for spec in [
        "jellyfish:switches=8,ports=6,hosts-per-switch=2,seed=1",
        "jellyfish:switches=8,ports=6,hosts-per-switch=2,nvlink=off",
        "dragonfly:groups=4,routers=2,hosts-per-router=2",
        "torus:dims=4x4",
        "torus:dims=2x2x2,hosts-per-node=2",
        "bcube:n=4,k=1",
        "dcell:n=4,k=1",
        "topoopt:servers=16,degree=4",
    ] {
        let t = topo(spec);
        // a file carries no routing family: it reads back as a Clos with the same links
        let want = Topology {
            fabric: Default::default(),
            ..t.clone()
        };
        let simai = t.to_text(Flavor::Simai {
            gpus_per_server: t.gpus_per_server,
            gpu_type: "H100".into(),
        });
        let (back, w) = Topology::parse_str(&simai, spec).unwrap();
        assert_eq!(w, vec![], "{spec}");
        assert_eq!(back, want, "{spec} (SimAI)");
        if t.nvswitches().is_empty() {
            let (back, w) = Topology::parse_str(&t.to_text(Flavor::Hpcc), spec).unwrap();
            assert_eq!(w, vec![], "{spec}");
            assert_eq!(back, want, "{spec} (HPCC)");
        }
    }
    // TopoOpt's HPCC header: 16 nodes, no switch, 32 links
    let text = topo("topoopt:servers=16,degree=4").to_text(Flavor::Hpcc);
    assert!(text.starts_with("16 0 32\n"), "{}", &text[..20]);
}

// ------------------------------------------------------------------ INA on general graphs

use ina3d::topology::{AggTree, TreeShape, MAX_ROOTS};

/// A well-formed aggregation tree of `members`: each member and aggregating switch has
/// one parent, every chain ends at the root, edges come bottom-up, fan-ins are counted and
/// every edge's path is a chain from child to parent.
fn check_tree(t: &Topology, tree: &AggTree, members: &[NodeId]) {
    let mut parent = BTreeMap::new();
    for e in &tree.edges {
        assert!(
            parent.insert(e.child, e.parent).is_none(),
            "{} has two parents",
            e.child
        );
        assert_eq!(t.kinds[e.parent.idx()], NodeKind::Switch);
        assert_eq!(e.fanin_at_parent, tree.fanin(e.parent));
        visits(t, e.child, e.parent, &e.path);
    }
    for &m in members {
        let mut v = m;
        let mut hops = 0;
        while v != tree.root {
            v = *parent
                .get(&v)
                .unwrap_or_else(|| panic!("{m} does not reach the root"));
            hops += 1;
            assert!(hops <= parent.len());
        }
    }
    // bottom-up: an edge out of a node comes after every edge into it
    for (i, e) in tree.edges.iter().enumerate() {
        assert!(
            tree.edges[i..].iter().all(|f| f.parent != e.child),
            "edge {i} out of order"
        );
    }
    assert_eq!(tree.edges.last().unwrap().parent, tree.root);
}

#[test]
fn on_a_torus_three_hosts_in_a_row_aggregate_under_the_middle_router_with_five_links() {
    let t = topo("torus:dims=4x4");
    let r = Routing::new(&t, 0).unwrap();
    let rt = nodes(&t, NodeKind::Switch);
    let all = |_: NodeId| true;
    // hosts 0, 1, 2 sit on routers (0,0), (1,0), (2,0). Total distances: under (1,0)
    // 2 + 1 + 2 = 5, under (0,0) or (2,0) 1 + 2 + 3 = 6: (1,0) ranks first
    let members = [NodeId(0), NodeId(1), NodeId(2)];
    let roots = r.aggregation_candidates(&members, &all).unwrap();
    assert_eq!(roots[0], rt[1]);
    assert!(roots.len() <= MAX_ROOTS);
    let cands = r.candidate_trees(&members, &all, 0).unwrap();
    assert!(!cands.is_empty() && cands.len() <= 2 * MAX_ROOTS);
    for (_, tree) in &cands {
        check_tree(&t, tree, &members);
    }
    // the cheapest: host 0 -> (0,0) -> (1,0) <- (2,0) <- host 2, host 1 -> (1,0): 5 links
    let best = r.aggregation_tree(&members, &all, 0).unwrap();
    assert_eq!(best.root, rt[1]);
    assert_eq!(r.tree_cost(&best), (5, 2));
    let edges: BTreeSet<(NodeId, NodeId)> =
        best.edges.iter().map(|e| (e.child, e.parent)).collect();
    let want = BTreeSet::from([
        (NodeId(0), rt[0]),
        (rt[0], rt[1]),
        (NodeId(1), rt[1]),
        (NodeId(2), rt[2]),
        (rt[2], rt[1]),
    ]);
    assert_eq!(edges, want);
}

#[test]
fn a_steiner_tree_shares_a_branch_the_shortest_path_tree_splits() {
    // 4x4 torus, root router (0,0) given, members on routers (2,1) and (2,2): 3 and 4
    // router hops from the root, 1 from each other. Steiner joins the nearer member first
    // (3 router links + its host link), then the other to it (1 + 1): 6 links, never more
    // than the shortest-path tree, whose second member takes its own routed path.
    let t = topo("torus:dims=4x4");
    let r = Routing::new(&t, 0).unwrap();
    let rt = nodes(&t, NodeKind::Switch);
    let all = |_: NodeId| true;
    let members = [NodeId(2 + 4), NodeId(2 + 4 * 2)]; // routers (2,1) and (2,2), adjacent
    let spt = r.aggregation_tree_at(&members, &all, rt[0], 0).unwrap();
    let st = r.steiner_tree_at(&members, &all, rt[0], 0).unwrap();
    check_tree(&t, &spt, &members);
    check_tree(&t, &st, &members);
    let (spt_links, _) = r.tree_cost(&spt);
    let (st_links, _) = r.tree_cost(&st);
    assert!(st_links <= spt_links, "steiner {st_links}, spt {spt_links}");
    // Steiner: root (0,0) to the nearer member (2,1) is 3 router hops; (2,2) then joins
    // (2,1) in one: 3 + 1 router links + 2 host links = 6
    assert_eq!(st_links, 6);
    let shapes: BTreeSet<TreeShape> = r
        .candidate_trees(&members, &all, 0)
        .unwrap()
        .into_iter()
        .map(|(s, _)| s)
        .collect();
    assert!(shapes.contains(&TreeShape::ShortestPath));
}

#[test]
fn every_switched_family_builds_trees_for_a_spread_group_and_topoopt_has_none() {
    for spec in [
        "jellyfish:switches=8,ports=6,hosts-per-switch=2,seed=1",
        "dragonfly:groups=4,routers=2,hosts-per-router=2",
        "torus:dims=4x4",
        "bcube:n=4,k=1",
        "dcell:n=4,k=1",
    ] {
        let t = topo(spec);
        let r = Routing::new(&t, 0).unwrap();
        let all = |_: NodeId| true;
        let members: Vec<NodeId> = (0..16).step_by(3).map(NodeId).collect();
        let cands = r.candidate_trees(&members, &all, 7).unwrap();
        assert!(!cands.is_empty(), "{spec}");
        for (_, tree) in &cands {
            check_tree(&t, tree, &members);
        }
        // only some switches may aggregate: the trees use no other
        let sw = nodes(&t, NodeKind::Switch);
        let some: BTreeSet<NodeId> = sw.iter().step_by(2).copied().collect();
        let can = |v: NodeId| some.contains(&v);
        if let Ok(cands) = r.candidate_trees(&members, &can, 7) {
            for (_, tree) in &cands {
                check_tree(&t, tree, &members);
                assert!(tree.switches().iter().all(|s| some.contains(s)), "{spec}");
            }
        }
    }
    let t = topo("topoopt:servers=16,degree=4");
    let r = Routing::new(&t, 0).unwrap();
    assert!(matches!(
        r.aggregation_tree(&[NodeId(0), NodeId(5)], &|_| true, 0),
        Err(TopologyError::NoAggregator { .. })
    ));
}
