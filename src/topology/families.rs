//! Builders of the non-Clos fabrics the seed paper cites: Jellyfish, Dragonfly, torus,
//! BCube, DCell and TopoOpt-style direct connect (docs/model.md#topologies). Each takes the
//! common options of [`super::build`] (rates, latency, `gpus-per-server`,
//! `nics-per-server`, NVLink) and records its [`Fabric`] so the one router applies the
//! family's rule.
//!
//! Numbering follows the Clos builders: GPU hosts first (rank order), then one NVSwitch
//! per server when NVLink is on, then switches/routers in the order each builder names.

use super::build::{common, finish, hosts_and_nvlink, nics_of, nvlink_of, Common, Opts, MAX_HOSTS};
use super::dcell::{dcell_link, dcell_sizes};
use super::{ecmp_hash, Fabric, LinkKind, NodeKind, Topology, TopologyError};
use std::collections::HashSet;

/// Build the family `kind` (one of the non-Clos names of [`super::build::KINDS`]).
pub(super) fn build(spec: &str, kind: &str, body: &str) -> Result<Topology, TopologyError> {
    let parse = |own: &[&str]| Opts::parse(spec, kind, body, own);
    match kind {
        "jellyfish" => jellyfish(&parse(&[
            "switches",
            "ports",
            "hosts-per-switch",
            "seed",
            "paths",
        ])?),
        "dragonfly" => dragonfly(&parse(&[
            "groups",
            "routers",
            "hosts-per-router",
            "global-links",
            "routing",
        ])?),
        "torus" => torus(&parse(&["dims", "hosts-per-node"])?),
        "bcube" => bcube(&parse(&["n", "k"])?),
        "dcell" => dcell(&parse(&["n", "k"])?),
        "topoopt" => topoopt(&parse(&["servers", "degree"])?),
        _ => unreachable!("caller checked KINDS"),
    }
}

/// The common options of a new family: NVLink off by default when a server is one GPU
/// (an NVSwitch per GPU models nothing).
fn family_common(
    o: &Opts<'_>,
    gps_default: u64,
    ports_default: u64,
) -> Result<Common, TopologyError> {
    let mut c = common(o, gps_default, ports_default)?;
    if c.gps == 1 && !o.has("nvlink") {
        c.nvlink = None;
    }
    Ok(c)
}

/// Refuse `fabric=` on a family without switch-to-switch links.
fn no_fabric_rate(o: &Opts<'_>, family: &str) -> Result<(), TopologyError> {
    if o.has("fabric") {
        return Err(o.err(
            "fabric",
            format!(
                "{family} has no switch-to-switch links; every link is a server NIC (set nic=RATE)"
            ),
        ));
    }
    Ok(())
}

fn too_many(o: &Opts<'_>, key: &str, hosts: u128) -> TopologyError {
    o.err(
        key,
        format!("gives {hosts} hosts, more than the {MAX_HOSTS} supported"),
    )
}

/// A seeded stream of uniform draws ([`ecmp_hash`] of a counter): deterministic on every
/// platform.
struct Draws {
    seed: u64,
    n: u64,
}

impl Draws {
    fn new(seed: u64, stream: u64) -> Self {
        Draws {
            seed: ecmp_hash(seed, stream),
            n: 0,
        }
    }
    /// Uniform in `0..n` (multiply-shift).
    fn below(&mut self, n: usize) -> usize {
        self.n += 1;
        ((ecmp_hash(self.seed, self.n) as u128 * n as u128) >> 64) as usize
    }
}

// ---------------------------------------------------------------------------------------
// Jellyfish

/// Jellyfish (Singla et al., NSDI'12): `switches` switches of `ports` ports,
/// `hosts-per-switch` GPUs (each with its NIC ports) on each, the remaining
/// `r = ports − hosts-per-switch × ports-per-GPU` ports joined into a random r-regular
/// graph drawn from `seed` ([`random_regular`]). Node order: hosts, NVSwitches, switches.
fn jellyfish(o: &Opts<'_>) -> Result<Topology, TopologyError> {
    let n = o.count("switches", 8, 2)?;
    let hps = o.count("hosts-per-switch", 2, 1)?;
    let ports = o.count("ports", 6, 2)?;
    let seed = o.count("seed", 1, 0)?;
    let paths = o.count("paths", 8, 1)?;
    if paths > 64 {
        return Err(o.err("paths", format!("{paths} is too many (at most 64)")));
    }
    let c = family_common(o, hps, 1)?;
    let host_ports = hps.saturating_mul(c.ports);
    if ports <= host_ports {
        return Err(o.err(
            "ports",
            format!(
                "{ports} must exceed hosts-per-switch × NIC ports per GPU = {host_ports}: the rest are the switch-to-switch links"
            ),
        ));
    }
    let r = ports - host_ports;
    if r >= n {
        return Err(o.err(
            "ports",
            format!(
                "leaves {r} switch links per switch, but {n} switches have only {} others to link to (one link per pair)",
                n - 1
            ),
        ));
    }
    if !(n * r).is_multiple_of(2) {
        return Err(o.err(
            "ports",
            format!(
                "switches × (ports − hosts-per-switch) = {n} × {r} is odd: every switch link takes two ports, so the stubs cannot all pair up"
            ),
        ));
    }
    if r < 2 && n > 2 {
        return Err(o.err(
            "ports",
            format!("leaves {r} switch link per switch: {n} switches cannot be connected with fewer than 2 each"),
        ));
    }
    let hosts = n.saturating_mul(hps);
    if hosts > MAX_HOSTS {
        return Err(too_many(o, "switches", hosts as u128));
    }
    let nics = hosts as u128 * c.ports as u128;
    c.check_size(
        o,
        "ports",
        hosts,
        n as u128,
        nics + n as u128 * r as u128 / 2,
    )?;
    let edges = random_regular(n as usize, r as usize, seed).ok_or_else(|| {
        o.err(
            "seed",
            format!("no connected {r}-regular graph on {n} switches was found from this seed in 64 attempts; try another seed"),
        )
    })?;
    let fabric = o.rate("fabric", c.nic)?;
    let mut net = hosts_and_nvlink(o, &c, hosts)?;
    let sw0 = net.nodes(n, NodeKind::Switch) as u64;
    for g in 0..hosts {
        nvlink_of(&mut net, &c, hosts, g);
        nics_of(&mut net, &c, g, sw0 + g / hps);
    }
    for (a, b) in edges {
        net.link(
            (sw0 + a as u64) as u32,
            (sw0 + b as u64) as u32,
            fabric,
            c.latency,
            LinkKind::Fabric,
        );
    }
    Ok(finish(
        net,
        &c,
        hosts,
        o.spec,
        Fabric::Jellyfish {
            paths: paths as u32,
        },
    ))
}

/// A connected simple r-regular graph on `n` vertices by Jellyfish's construction: join
/// random pairs of vertices with free ports that are not yet linked until no pair can
/// join; then a vertex `p` with two or more free ports takes a random link (x, y) with
/// neither end linked to `p`, removes it and links p–x and p–y; two vertices left with one
/// free port each (necessarily already linked) split a link (x, y) the same way, p–x and
/// q–y. Draws come from `seed`; an attempt that ends disconnected or stuck is redrawn
/// (another stream of the same seed), at most 64 times. Edges ascending `(a < b)`.
pub(super) fn random_regular(n: usize, r: usize, seed: u64) -> Option<Vec<(u32, u32)>> {
    (0..64).find_map(|attempt| {
        let e = regular_attempt(n, r, &mut Draws::new(seed, attempt))?;
        connected(n, &e).then_some(e)
    })
}

fn regular_attempt(n: usize, r: usize, d: &mut Draws) -> Option<Vec<(u32, u32)>> {
    let key = |a: usize, b: usize| (a.min(b) as u32, a.max(b) as u32);
    let mut free = vec![r; n];
    let mut linked: HashSet<(u32, u32)> = HashSet::new();
    let mut edges: Vec<(u32, u32)> = Vec::with_capacity(n * r / 2);
    let mut open: Vec<usize> = (0..n).filter(|_| r > 0).collect();
    let join = |a: usize,
                b: usize,
                free: &mut Vec<usize>,
                linked: &mut HashSet<(u32, u32)>,
                edges: &mut Vec<(u32, u32)>| {
        free[a] -= 1;
        free[b] -= 1;
        linked.insert(key(a, b));
        edges.push(key(a, b));
    };
    // Random joins; when random draws stop finding a pair, scan for one.
    loop {
        open.retain(|&v| free[v] > 0);
        let mut joined = false;
        for _ in 0..(4 * open.len() + 16) {
            if open.len() < 2 {
                break;
            }
            let (a, b) = (open[d.below(open.len())], open[d.below(open.len())]);
            if a != b && free[a] > 0 && free[b] > 0 && !linked.contains(&key(a, b)) {
                join(a, b, &mut free, &mut linked, &mut edges);
                joined = true;
            }
        }
        if joined {
            continue;
        }
        let pair = open.iter().enumerate().find_map(|(i, &a)| {
            open[i + 1..]
                .iter()
                .find(|&&b| free[a] > 0 && free[b] > 0 && !linked.contains(&key(a, b)))
                .map(|&b| (a, b))
        });
        match pair {
            Some((a, b)) => join(a, b, &mut free, &mut linked, &mut edges),
            None => break,
        }
    }
    // Place the remaining stubs by splitting links.
    loop {
        open.retain(|&v| free[v] > 0);
        let Some(&p) = open.first() else { break };
        let q = if free[p] >= 2 { p } else { *open.get(1)? };
        let ok = |&(x, y): &(u32, u32)| {
            let (x, y) = (x as usize, y as usize);
            x != p
                && y != p
                && x != q
                && y != q
                && !linked.contains(&key(p, x))
                && !linked.contains(&key(q, y))
        };
        let pick = (0..4 * edges.len() + 16)
            .map(|_| d.below(edges.len().max(1)))
            .find(|&i| edges.get(i).is_some_and(ok))
            .or_else(|| edges.iter().position(ok))?;
        let (x, y) = edges.swap_remove(pick);
        linked.remove(&(x, y));
        let (x, y) = (x as usize, y as usize);
        free[x] += 1;
        free[y] += 1;
        join(p, x, &mut free, &mut linked, &mut edges);
        join(q, y, &mut free, &mut linked, &mut edges);
    }
    if free.iter().any(|&f| f > 0) {
        return None;
    }
    edges.sort_unstable();
    Some(edges)
}

/// True when the undirected graph on `n` vertices is connected.
fn connected(n: usize, edges: &[(u32, u32)]) -> bool {
    let mut adj = vec![Vec::new(); n];
    for &(a, b) in edges {
        adj[a as usize].push(b as usize);
        adj[b as usize].push(a as usize);
    }
    let mut seen = vec![false; n];
    let mut stack = vec![0];
    seen[0] = true;
    while let Some(v) = stack.pop() {
        for &w in &adj[v] {
            if !seen[w] {
                seen[w] = true;
                stack.push(w);
            }
        }
    }
    seen.iter().all(|&s| s)
}

// ---------------------------------------------------------------------------------------
// Dragonfly

/// Dragonfly (Kim et al., ISCA'08): `groups` groups of `routers` routers linked all-to-all
/// inside the group, `hosts-per-router` GPUs on each router. Each group has `P` global
/// ports — `routers × global-links`, or, without `global-links`, `groups − 1` (one link
/// between every pair of groups) — port `q` on router `q mod routers`, so routers carry
/// global links evenly. Global links are laid in rounds: in round `t` group `i`'s port
/// `t·(groups − 1) + idx_i(j)` joins group `j`'s port `t·(groups − 1) + idx_j(i)` when both
/// exist (`idx_i(j)` = j's position among the groups other than i), so every pair of
/// groups gets the same number of links, ±1. Node order: hosts, NVSwitches, routers
/// (group by group).
fn dragonfly(o: &Opts<'_>) -> Result<Topology, TopologyError> {
    let g = o.count("groups", 4, 1)?;
    let a = o.count("routers", 2, 1)?;
    let p = o.count("hosts-per-router", 2, 1)?;
    let valiant = match o.text("routing").unwrap_or("minimal") {
        "minimal" => false,
        "valiant" => true,
        other => {
            return Err(o.err(
                "routing",
                format!("`{other}` is neither `minimal` nor `valiant`"),
            ))
        }
    };
    if valiant && g < 3 {
        return Err(o.err(
            "routing",
            format!("Valiant routing needs an intermediate group: at least 3 groups (have {g})"),
        ));
    }
    let ports = match o.text("global-links") {
        None => g - 1,
        Some(_) => {
            let h = o.count("global-links", 1, 1)?;
            let ports = a.saturating_mul(h);
            if ports < g - 1 {
                return Err(o.err(
                    "global-links",
                    format!(
                        "{h} per router × {a} routers = {ports} global links per group cannot reach the other {} groups (a dragonfly needs groups ≤ routers × global-links + 1)",
                        g - 1
                    ),
                ));
            }
            ports
        }
    };
    let c = family_common(o, p, 1)?;
    let routers = g.saturating_mul(a);
    let hosts = routers.saturating_mul(p);
    if hosts > MAX_HOSTS || ports > MAX_HOSTS {
        return Err(too_many(o, "groups", hosts as u128));
    }
    let fabric = o.rate("fabric", c.nic)?;
    let nics = hosts as u128 * c.ports as u128;
    // local links a·(a−1)/2 per group; at most g·ports/2 global ones
    let local = g as u128 * a as u128 * (a as u128 - 1) / 2;
    let global = g as u128 * ports as u128 / 2;
    c.check_size(o, "groups", hosts, routers as u128, nics + local + global)?;
    let mut net = hosts_and_nvlink(o, &c, hosts)?;
    let r0 = net.nodes(routers, NodeKind::Switch) as u64;
    for h in 0..hosts {
        nvlink_of(&mut net, &c, hosts, h);
        nics_of(&mut net, &c, h, r0 + h / p);
    }
    let link = |net: &mut super::build::Net, x: u64, y: u64| {
        net.link(
            (r0 + x) as u32,
            (r0 + y) as u32,
            fabric,
            c.latency,
            LinkKind::Fabric,
        )
    };
    for grp in 0..g {
        for i in 0..a {
            for j in i + 1..a {
                link(&mut net, grp * a + i, grp * a + j);
            }
        }
    }
    if g > 1 {
        let idx = |i: u64, j: u64| if j < i { j } else { j - 1 };
        let rounds = ports.div_ceil(g - 1);
        for t in 0..rounds {
            for i in 0..g {
                for j in i + 1..g {
                    let (qi, qj) = (t * (g - 1) + idx(i, j), t * (g - 1) + idx(j, i));
                    if qi < ports && qj < ports {
                        link(&mut net, i * a + qi % a, j * a + qj % a);
                    }
                }
            }
        }
    }
    Ok(finish(
        net,
        &c,
        hosts,
        o.spec,
        Fabric::Dragonfly {
            groups: g as u32,
            routers: a as u32,
            valiant,
        },
    ))
}

// ---------------------------------------------------------------------------------------
// Torus

/// A k-ary n-cube (Blue Gene/L style) of `dims` (`4x4` or `4x4x4`): one router per node
/// with `hosts-per-node` GPUs, and in every dimension a link from each router to its +1
/// neighbour with wrap-around (2n links per router; a dimension of 2 gets two parallel
/// links, its + and − ports). Routers are numbered with the first dimension fastest.
/// Node order: hosts, NVSwitches, routers.
fn torus(o: &Opts<'_>) -> Result<Topology, TopologyError> {
    let text = o.text("dims").unwrap_or("4x4");
    let mut dims = Vec::new();
    for (i, part) in text.split(['x', 'X']).enumerate() {
        let k: u64 = part.trim().parse().map_err(|_| {
            o.err(
                "dims",
                format!("`{text}` is not sizes joined by x, like 4x4 or 4x4x4"),
            )
        })?;
        if k < 2 {
            return Err(o.err(
                "dims",
                format!(
                    "dimension {} is {k}: every dimension of a torus needs at least 2 nodes (a ring)",
                    i + 1
                ),
            ));
        }
        dims.push(k);
    }
    if !(2..=3).contains(&dims.len()) {
        return Err(o.err(
            "dims",
            format!(
                "`{text}` has {} dimension(s); a torus here is 2-D or 3-D",
                dims.len()
            ),
        ));
    }
    let nodes = dims.iter().try_fold(1u64, |acc, &k| acc.checked_mul(k));
    let hpn = o.count("hosts-per-node", 1, 1)?;
    let hosts = nodes.and_then(|n| n.checked_mul(hpn)).unwrap_or(u64::MAX);
    if hosts > MAX_HOSTS {
        return Err(too_many(o, "dims", hosts as u128));
    }
    let nodes = hosts / hpn;
    let c = family_common(o, hpn, 1)?;
    let fabric = o.rate("fabric", c.nic)?;
    let nics = hosts as u128 * c.ports as u128;
    let ring_links = nodes as u128 * dims.len() as u128;
    c.check_size(o, "dims", hosts, nodes as u128, nics + ring_links)?;
    let mut net = hosts_and_nvlink(o, &c, hosts)?;
    let r0 = net.nodes(nodes, NodeKind::Switch) as u64;
    for h in 0..hosts {
        nvlink_of(&mut net, &c, hosts, h);
        nics_of(&mut net, &c, h, r0 + h / hpn);
    }
    let mut stride = 1;
    for &k in &dims {
        for v in 0..nodes {
            let coord = (v / stride) % k;
            let w = v - coord * stride + ((coord + 1) % k) * stride;
            net.link(
                (r0 + v) as u32,
                (r0 + w) as u32,
                fabric,
                c.latency,
                LinkKind::Fabric,
            );
        }
        stride *= k;
    }
    Ok(finish(
        net,
        &c,
        hosts,
        o.spec,
        Fabric::Torus {
            dims: dims.iter().map(|&k| k as u32).collect(),
        },
    ))
}

// ---------------------------------------------------------------------------------------
// BCube

/// BCube(n, k) (Guo et al., SIGCOMM'09): `n^(k+1)` servers (hosts), each with k+1 NIC
/// ports, and k+1 levels of `n^k` switches of n ports. Server `s` has address digits
/// `s_k … s_0` in base n; its level-l port joins the level-l switch of the servers that
/// differ from it in digit l only (switch `⌊s / n^(l+1)⌋·n^l + s mod n^l` of level l).
/// Node order: hosts, NVSwitches, level-0 switches, level-1 switches, …; each server's
/// links level by level.
fn bcube(o: &Opts<'_>) -> Result<Topology, TopologyError> {
    let n = o.count("n", 4, 0)?;
    if n < 2 {
        return Err(o.err(
            "n",
            format!("{n}: BCube needs n ≥ 2 (switches of n ports, address digits in base n)"),
        ));
    }
    let k = o.count("k", 1, 0)?;
    no_fabric_rate(o, "BCube")?;
    let servers = (k < 32)
        .then(|| n.checked_pow(k as u32 + 1))
        .flatten()
        .unwrap_or(u64::MAX);
    if servers > MAX_HOSTS {
        return Err(too_many(o, "k", servers as u128));
    }
    let c = family_common(o, 1, k + 1)?;
    c.fixed_ports(o, k + 1, "a BCube server has one NIC per level, k+1")?;
    let per_level = servers / n;
    let levels = k as u128 + 1;
    let nics = servers as u128 * levels;
    c.check_size(o, "k", servers, levels * per_level as u128, nics)?;
    let mut net = hosts_and_nvlink(o, &c, servers)?;
    let sw0 = net.nodes((k + 1) * per_level, NodeKind::Switch) as u64;
    for s in 0..servers {
        nvlink_of(&mut net, &c, servers, s);
        let mut low = 1; // n^l
        for l in 0..=k {
            let sw = (s / (low * n)) * low + s % low;
            net.link(
                s as u32,
                (sw0 + l * per_level + sw) as u32,
                c.nic,
                c.latency,
                LinkKind::Nic,
            );
            low *= n;
        }
    }
    Ok(finish(
        net,
        &c,
        servers,
        o.spec,
        Fabric::BCube {
            n: n as u32,
            k: k as u32,
        },
    ))
}

// ---------------------------------------------------------------------------------------
// DCell

/// DCell(n, k) (Guo et al., SIGCOMM'08): DCell_0 is n servers on one n-port switch;
/// DCell_l is `g_l = t_(l−1) + 1` copies of DCell_(l−1) (`t_(l−1)` servers each), copy i's
/// server `j − 1` linked to copy j's server `i` for every i < j (one link per pair of
/// copies). Servers are numbered so that copy i of a DCell_l at offset `o` holds servers
/// `o + i·t_(l−1) …`; each server has k+1 NIC ports (its switch, and one link per level).
/// Node order: hosts, NVSwitches, the DCell_0 switches; links: server–switch, then level
/// 1, level 2, ….
fn dcell(o: &Opts<'_>) -> Result<Topology, TopologyError> {
    let n = o.count("n", 4, 0)?;
    if n < 2 {
        return Err(o.err("n", format!("{n}: DCell needs n ≥ 2 servers per DCell_0")));
    }
    let k = o.count("k", 1, 0)?;
    no_fabric_rate(o, "DCell")?;
    let t = dcell_sizes(n, k).ok_or_else(|| too_many(o, "k", u128::MAX))?;
    let servers = t[k as usize];
    let c = family_common(o, 1, k + 1)?;
    c.fixed_ports(
        o,
        k + 1,
        "a DCell_k server has one NIC to its switch and one per level",
    )?;
    // one switch link per server, and under one link per server per level above 0
    let links = servers as u128 * (k as u128 + 1);
    c.check_size(o, "k", servers, (servers / n) as u128, links)?;
    let mut net = hosts_and_nvlink(o, &c, servers)?;
    let sw0 = net.nodes(servers / n, NodeKind::Switch) as u64;
    for s in 0..servers {
        nvlink_of(&mut net, &c, servers, s);
        net.link(
            s as u32,
            (sw0 + s / n) as u32,
            c.nic,
            c.latency,
            LinkKind::Nic,
        );
    }
    for l in 1..=k as usize {
        let sub = t[l - 1];
        for offset in (0..servers).step_by(t[l] as usize) {
            for i in 0..=sub {
                for j in i + 1..=sub {
                    let (a, b) = dcell_link(offset, sub, i, j);
                    net.link(a as u32, b as u32, c.nic, c.latency, LinkKind::Nic);
                }
            }
        }
    }
    Ok(finish(
        net,
        &c,
        servers,
        o.spec,
        Fabric::DCell {
            n: n as u32,
            k: k as u32,
        },
    ))
}

// ---------------------------------------------------------------------------------------
// TopoOpt

/// Switchless direct connect as TopoOpt (Wang et al., NSDI'23) builds it for all-reduce:
/// `servers × gpus-per-server` hosts, each with `degree` NIC ports. `degree / 2` ring
/// permutations `i ↔ i + p mod N` with p coprime to N (TotientPerms' candidates: every
/// such ring is one all-reduce ring over all servers), p chosen by [`totient_perms`]; an
/// odd degree adds the matching `i ↔ i + N/2` (N even). Node order: hosts, NVSwitches;
/// links ring by ring.
fn topoopt(o: &Opts<'_>) -> Result<Topology, TopologyError> {
    let servers = o.count("servers", 16, 2)?;
    let degree = o.count("degree", 4, 1)?;
    no_fabric_rate(o, "TopoOpt")?;
    let c = family_common(o, 1, degree)?;
    c.fixed_ports(
        o,
        degree,
        "a TopoOpt server has one NIC port per link, `degree`",
    )?;
    let hosts = servers.saturating_mul(c.gps);
    if hosts > MAX_HOSTS {
        return Err(too_many(o, "servers", hosts as u128));
    }
    if degree >= hosts {
        return Err(o.err(
            "degree",
            format!("{degree} is not below the {hosts} servers: a server links to at most every other one"),
        ));
    }
    if degree < 2 && hosts > 2 {
        return Err(o.err(
            "degree",
            "1 pairs servers up and leaves the rest unreachable: at least 2 (one ring)".into(),
        ));
    }
    if degree % 2 == 1 && hosts % 2 == 1 {
        return Err(o.err(
            "degree",
            format!("an odd degree needs the matching i <-> i + N/2, and N = {hosts} is odd"),
        ));
    }
    let rings = hosts as u128 * (degree / 2) as u128;
    let matching = if degree % 2 == 1 {
        hosts as u128 / 2
    } else {
        0
    };
    c.check_size(o, "degree", hosts, 0, rings + matching)?;
    let perms = totient_perms(hosts, degree / 2).ok_or_else(|| {
        o.err(
            "degree",
            format!(
                "{degree} needs {} ring permutations, but only {} p in 1..N/2 are coprime to N = {hosts}",
                degree / 2,
                (1..hosts.div_ceil(2)).filter(|&p| gcd(p, hosts) == 1).count()
            ),
        )
    })?;
    let mut net = hosts_and_nvlink(o, &c, hosts)?;
    for h in 0..hosts {
        nvlink_of(&mut net, &c, hosts, h);
    }
    let link = |net: &mut super::build::Net, a: u64, b: u64| {
        net.link(a as u32, b as u32, c.nic, c.latency, LinkKind::Nic)
    };
    for &p in &perms {
        for i in 0..hosts {
            link(&mut net, i, (i + p) % hosts);
        }
    }
    if degree % 2 == 1 {
        for i in 0..hosts / 2 {
            link(&mut net, i, i + hosts / 2);
        }
    }
    Ok(finish(net, &c, hosts, o.spec, Fabric::Direct))
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// `rings` distinct strides p coprime to `n` with `p < n/2` (p and n − p are the same
/// ring), spread geometrically as TotientPerms spreads its permutations to keep the
/// diameter small: ring i takes the unused candidate nearest `n^(i/rings)` (the lower on
/// a tie), so ring 0 is p = 1. For n = 2 the only ring is p = 1. `None` when fewer than
/// `rings` candidates exist.
pub(super) fn totient_perms(n: u64, rings: u64) -> Option<Vec<u64>> {
    let mut cands: Vec<u64> = if n == 2 {
        vec![1]
    } else {
        (1..n.div_ceil(2)).filter(|&p| gcd(p, n) == 1).collect()
    };
    if (cands.len() as u64) < rings {
        return None;
    }
    let mut out = Vec::new();
    for i in 0..rings {
        let target = (n as f64).powf(i as f64 / rings as f64);
        let best = (0..cands.len())
            .min_by(|&x, &y| {
                let dx = (cands[x] as f64 - target).abs();
                let dy = (cands[y] as f64 - target).abs();
                dx.total_cmp(&dy).then(cands[x].cmp(&cands[y]))
            })
            .expect("enough candidates");
        out.push(cands.remove(best));
    }
    Some(out)
}
