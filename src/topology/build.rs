//! What every builder shares (spec options, the common keys, node and link numbering)
//! and the Clos builders (`fat-tree:k=8`, `leaf-spine:…`, `rail:…`, `superpod:…`,
//! `dual-plane:…`); [`super::spec`] reads a spec and picks the builder.

use super::{Fabric, Link, LinkKind, NodeKind, Topology, TopologyError};
use crate::units::{parse_delay, BitsPerSec, Nanos, NodeId};
use std::collections::BTreeMap;

/// Builder names accepted before the `:` of a spec.
pub(super) const KINDS: [&str; 11] = [
    "fat-tree",
    "leaf-spine",
    "rail",
    "superpod",
    "dual-plane",
    "jellyfish",
    "dragonfly",
    "torus",
    "bcube",
    "dcell",
    "topoopt",
];

/// Options every builder accepts.
const COMMON: [&str; 7] = [
    "nic",
    "fabric",
    "latency",
    "gpus-per-server",
    "nics-per-server",
    "nvlink",
    "nvlink-latency",
];

/// Hard cap on hosts, so a typo such as `k=4000` is an error, not an out-of-memory.
pub(super) const MAX_HOSTS: u64 = 1 << 22;

/// Hard cap on nodes (hosts, NVSwitches, switches): hosts alone do not bound them (a
/// leaf-spine of one host under 10^8 spines). 2^24 keeps every builder at [`MAX_HOSTS`]
/// hosts valid, an NVSwitch per GPU included.
pub const MAX_NODES: u64 = 1 << 24;

/// Hard cap on links: `bcube:n=2,k=21` has 2^22 hosts but 22 links each (92 M links,
/// 3.7 GB before routing). 2^25 (1.3 GB of links) keeps the largest fat-tree (k=256,
/// 16.8 M links with NVLink) valid.
pub const MAX_LINKS: u64 = 1 << 25;

/// Parsed `key=value` options of one spec, with typed getters whose errors name the key.
pub(super) struct Opts<'a> {
    pub(super) spec: &'a str,
    map: BTreeMap<String, String>,
}

impl<'a> Opts<'a> {
    pub(super) fn parse(
        spec: &'a str,
        kind: &str,
        body: &str,
        own: &[&str],
    ) -> Result<Self, TopologyError> {
        let mut map = BTreeMap::new();
        for part in body.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').ok_or_else(|| TopologyError::Spec {
                spec: spec.into(),
                key: part.into(),
                msg: "expected key=value".into(),
            })?;
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().to_string());
            if !own.contains(&k.as_str()) && !COMMON.contains(&k.as_str()) {
                let mut known: Vec<&str> = own.iter().chain(COMMON.iter()).copied().collect();
                known.sort_unstable();
                return Err(TopologyError::Spec {
                    spec: spec.into(),
                    key: k,
                    msg: format!("unknown option for {kind} (known: {})", known.join(", ")),
                });
            }
            if map.insert(k.clone(), v).is_some() {
                return Err(TopologyError::Spec {
                    spec: spec.into(),
                    key: k,
                    msg: "given twice".into(),
                });
            }
        }
        Ok(Opts { spec, map })
    }

    pub(super) fn err(&self, key: &str, msg: String) -> TopologyError {
        TopologyError::Spec {
            spec: self.spec.into(),
            key: key.into(),
            msg,
        }
    }

    pub(super) fn has(&self, key: &str) -> bool {
        self.map.contains_key(key)
    }

    /// The raw value of `key`, if given.
    pub(super) fn text(&self, key: &str) -> Option<&str> {
        self.map.get(key).map(String::as_str)
    }

    pub(super) fn count(&self, key: &str, default: u64, min: u64) -> Result<u64, TopologyError> {
        let Some(v) = self.map.get(key) else {
            return Ok(default);
        };
        let n: u64 = v
            .parse()
            .map_err(|_| self.err(key, format!("`{v}` is not a whole number")))?;
        if n < min {
            return Err(self.err(key, format!("{n} is too small (at least {min})")));
        }
        if n > MAX_HOSTS {
            return Err(self.err(key, format!("{n} is too large (at most {MAX_HOSTS})")));
        }
        Ok(n)
    }

    pub(super) fn rate(&self, key: &str, default: BitsPerSec) -> Result<BitsPerSec, TopologyError> {
        let Some(v) = self.map.get(key) else {
            return Ok(default);
        };
        match BitsPerSec::parse(v) {
            Some(r) if r.0 == 0 => {
                Err(self.err(key, format!("`{v}` is zero; a link rate must be positive")))
            }
            Some(r) => match crate::units::link_rate_problem(r) {
                None => Ok(r),
                Some(why) => Err(self.err(key, format!("`{v}`: {why}"))),
            },
            None => Err(self.err(key, format!("`{v}` is not a rate like 100Gbps"))),
        }
    }

    pub(super) fn opt_rate(&self, key: &str) -> Result<Option<BitsPerSec>, TopologyError> {
        if self.has(key) {
            self.rate(key, BitsPerSec(0)).map(Some)
        } else {
            Ok(None)
        }
    }

    pub(super) fn delay(&self, key: &str, default: Nanos) -> Result<Nanos, TopologyError> {
        let Some(v) = self.map.get(key) else {
            return Ok(default);
        };
        let d = parse_delay(v).ok_or_else(|| {
            self.err(
                key,
                format!("`{v}` is not a delay like 1us, 1000ns or 0.001ms"),
            )
        })?;
        match crate::units::link_delay_problem(d) {
            None => Ok(d),
            Some(why) => Err(self.err(key, format!("`{v}`: {why}"))),
        }
    }

    fn oversub(&self) -> Result<Option<f64>, TopologyError> {
        let Some(v) = self.map.get("oversub") else {
            return Ok(None);
        };
        match v.parse::<f64>() {
            Ok(x) if x.is_finite() && x > 0.0 => Ok(Some(x)),
            _ => Err(self.err(
                "oversub",
                format!("`{v}` is not a positive ratio such as 2 or 1.5"),
            )),
        }
    }

    /// `nvlink=RATE|off`: `None` when off.
    fn nvlink(&self) -> Result<Option<BitsPerSec>, TopologyError> {
        match self.map.get("nvlink").map(|s| s.to_ascii_lowercase()) {
            Some(s) if s == "off" || s == "none" || s == "no" => Ok(None),
            _ => self.rate("nvlink", BitsPerSec::gbps(2400)).map(Some),
        }
    }

    /// Uplink rate of a leaf with `down` capacity and `uplinks` uplinks: `fabric` when
    /// given, else sized for `oversub` (default 1 = non-blocking). Two-tier builders only,
    /// where every switch-switch link is a leaf uplink, so `fabric` and `oversub` conflict.
    fn leaf_uplink(&self, down: u128, uplinks: u64) -> Result<BitsPerSec, TopologyError> {
        let over = self.oversub()?;
        if let Some(f) = self.opt_rate("fabric")? {
            if over.is_some() {
                return Err(self.err(
                    "oversub",
                    "give fabric (the uplink rate) or oversub (uplinks sized from it), not both"
                        .into(),
                ));
            }
            return Ok(f);
        }
        self.sized_uplink(down, uplinks, over)
    }

    /// The uplink rate for `down` capacity over `uplinks` uplinks at ratio `over`, as a
    /// standard Ethernet speed ([`STANDARD_RATES`]): real fabrics reach a ratio with port
    /// counts at standard speeds, and simulators key their ECN thresholds by link speed
    /// (SimAI aborts on a speed its `KMAX_MAP` lacks). Without `oversub` the fabric is
    /// non-blocking: the smallest standard speed at or above the exact rate. An explicit
    /// `oversub` must land on a standard speed; otherwise the error lists the ratios that do.
    fn sized_uplink(
        &self,
        down: u128,
        uplinks: u64,
        over: Option<f64>,
    ) -> Result<BitsPerSec, TopologyError> {
        let exact = down as f64 / (uplinks.max(1) as f64 * over.unwrap_or(1.0));
        let fits = |r: &&BitsPerSec| (r.0 as f64 - exact).abs() <= exact * 1e-9;
        let pick = match over {
            None => STANDARD_RATES
                .iter()
                .find(|r| r.0 as f64 >= exact * (1.0 - 1e-9)),
            Some(_) => STANDARD_RATES.iter().find(fits),
        };
        if let Some(r) = pick {
            return Ok(*r);
        }
        let ratios: Vec<String> = STANDARD_RATES
            .iter()
            .map(|r| down as f64 / (uplinks.max(1) as f64 * r.0 as f64))
            .filter(|x| (1.0..=64.0).contains(x))
            .map(|x| format!("{}", (x * 1000.0).round() / 1000.0))
            .collect();
        Err(self.err(
            "oversub",
            format!(
                "gives {:.4} Gb/s uplinks, not a standard link speed ({}); ratios that give one here: {} (or set fabric=RATE, or change the spine count)",
                exact / 1e9,
                STANDARD_RATES.iter().map(|r| r.to_hpcc_string()).collect::<Vec<_>>().join(", "),
                if ratios.is_empty() { "none".into() } else { ratios.join(", ") }
            ),
        ))
    }
}

/// Standard Ethernet link speeds that sized uplinks snap to: the speeds of SimAI's and
/// HPCC's `KMAX_MAP`s (25–400 Gb/s, 1.6 Tb/s) plus 10 and 800 Gb/s (see
/// `src/formats/` and the emit checks for which consumers know which).
pub const STANDARD_RATES: [BitsPerSec; 9] = [
    BitsPerSec(10_000_000_000),
    BitsPerSec(25_000_000_000),
    BitsPerSec(50_000_000_000),
    BitsPerSec(100_000_000_000),
    BitsPerSec(200_000_000_000),
    BitsPerSec(400_000_000_000),
    BitsPerSec(800_000_000_000),
    BitsPerSec(1_600_000_000_000),
    BitsPerSec(3_200_000_000_000),
];

/// Nodes and links being assembled, numbered in creation order.
pub(super) struct Net {
    pub(super) kinds: Vec<NodeKind>,
    pub(super) links: Vec<Link>,
}

impl Net {
    pub(super) fn nodes(&mut self, n: u64, k: NodeKind) -> u32 {
        let first = self.kinds.len() as u32;
        self.kinds.extend(std::iter::repeat_n(k, n as usize));
        first
    }
    pub(super) fn link(&mut self, a: u32, b: u32, rate: BitsPerSec, delay: Nanos, kind: LinkKind) {
        self.links.push(Link {
            a: NodeId(a),
            b: NodeId(b),
            rate,
            delay,
            error_rate: 0.0,
            kind,
        });
    }
}

/// Settings shared by all builders.
pub(super) struct Common {
    pub(super) nic: BitsPerSec,
    pub(super) latency: Nanos,
    pub(super) gps: u64,
    /// NIC ports of every GPU (`nics-per-server / gpus-per-server`).
    pub(super) ports: u64,
    pub(super) nvlink: Option<BitsPerSec>,
    pub(super) nvlink_latency: Nanos,
}

/// The common options, with `gps_default` GPUs per server and `ports_default` NIC ports
/// per GPU unless `nics-per-server` says otherwise.
pub(super) fn common(
    o: &Opts<'_>,
    gps_default: u64,
    ports_default: u64,
) -> Result<Common, TopologyError> {
    let gps = o.count("gpus-per-server", gps_default, 1)?;
    let nics = o.count("nics-per-server", gps.saturating_mul(ports_default), 1)?;
    if !nics.is_multiple_of(gps) {
        return Err(o.err(
            "nics-per-server",
            format!(
                "{nics} is not a multiple of gpus-per-server={gps}: every GPU is its own network endpoint, \
                 so a server has a whole number of NIC ports per GPU ({gps}, {}, …); NICs shared by \
                 several GPUs are not modelled (docs/model.md#nics-and-nccl-channels)",
                2 * gps
            ),
        ));
    }
    Ok(Common {
        nic: o.rate("nic", BitsPerSec::gbps(100))?,
        latency: o.delay("latency", Nanos(1000))?,
        gps,
        ports: nics / gps,
        nvlink: o.nvlink()?,
        nvlink_latency: o.delay("nvlink-latency", Nanos(25))?,
    })
}

impl Common {
    /// Refuses, before anything is allocated, a topology of `hosts` hosts (with their
    /// NVSwitches and NVLink links when NVLink is on), `switches` more nodes and
    /// `net_links` more links beyond [`MAX_NODES`] or [`MAX_LINKS`], blaming `key`.
    /// Counts are u128 so no product of spec values wraps before the check.
    pub(super) fn check_size(
        &self,
        o: &Opts<'_>,
        key: &str,
        hosts: u64,
        switches: u128,
        net_links: u128,
    ) -> Result<(), TopologyError> {
        let hosts = hosts as u128;
        let (nvswitches, nvlinks) = match self.nvlink {
            Some(_) => (hosts / self.gps as u128, hosts),
            None => (0, 0),
        };
        let nodes = hosts + nvswitches + switches;
        let links = nvlinks + net_links;
        if nodes <= MAX_NODES as u128 && links <= MAX_LINKS as u128 {
            return Ok(());
        }
        let bytes = links.saturating_mul(std::mem::size_of::<Link>() as u128);
        Err(o.err(
            key,
            format!(
                "gives {nodes} nodes and {links} links ({} of links alone), more than the \
                 {MAX_NODES} nodes and {MAX_LINKS} links supported",
                crate::units::binary_size(u64::try_from(bytes).unwrap_or(u64::MAX))
            ),
        ))
    }

    /// Refuse a `nics-per-server` other than the `ports` per GPU the shape fixes; `why`
    /// says what fixes it.
    pub(super) fn fixed_ports(
        &self,
        o: &Opts<'_>,
        ports: u64,
        why: &str,
    ) -> Result<(), TopologyError> {
        if o.has("nics-per-server") && self.ports != ports {
            return Err(o.err(
                "nics-per-server",
                format!(
                    "must be {} here ({ports} per GPU × gpus-per-server={}): {why}",
                    ports * self.gps,
                    self.gps
                ),
            ));
        }
        Ok(())
    }
}

/// Create `hosts` GPU nodes and, when NVLink is on, one NVSwitch per server linked to each
/// of its GPUs. Returns the net with hosts at `0..hosts`. `nic_links(g)` is called per GPU
/// after its NVLink link, so each GPU's links stay together as in SimAI files.
pub(super) fn hosts_and_nvlink(o: &Opts<'_>, c: &Common, hosts: u64) -> Result<Net, TopologyError> {
    if hosts > MAX_HOSTS {
        return Err(o.err(
            "kind",
            format!("{hosts} hosts is more than the {MAX_HOSTS} supported"),
        ));
    }
    if c.nvlink.is_some() && !hosts.is_multiple_of(c.gps) {
        return Err(o.err(
            "gpus-per-server",
            format!(
                "{hosts} hosts do not fill whole servers of {} GPUs; change gpus-per-server or set nvlink=off",
                c.gps
            ),
        ));
    }
    let mut net = Net {
        kinds: Vec::new(),
        links: Vec::new(),
    };
    net.nodes(hosts, NodeKind::Host);
    if c.nvlink.is_some() {
        net.nodes(hosts / c.gps, NodeKind::NvSwitch);
    }
    Ok(net)
}

pub(super) fn nvlink_of(net: &mut Net, c: &Common, hosts: u64, g: u64) {
    if let Some(r) = c.nvlink {
        let nvs = hosts + g / c.gps;
        net.link(g as u32, nvs as u32, r, c.nvlink_latency, LinkKind::NvLink);
    }
}

/// The NIC links of GPU `g` to switch `sw`: one per NIC port of the GPU.
pub(super) fn nics_of(net: &mut Net, c: &Common, g: u64, sw: u64) {
    for _ in 0..c.ports {
        net.link(g as u32, sw as u32, c.nic, c.latency, LinkKind::Nic);
    }
}

pub(super) fn finish(net: Net, c: &Common, hosts: u64, spec: &str, fabric: Fabric) -> Topology {
    Topology {
        kinds: net.kinds,
        links: net.links,
        gpus: (0..hosts as u32).map(NodeId).collect(),
        gpus_per_server: if c.nvlink.is_some() { c.gps as u32 } else { 1 },
        nvlink_rate: c.nvlink,
        source: spec.to_string(),
        fabric,
    }
}

/// k-ary fat-tree (Al-Fares et al.): k pods of k/2 ToRs and k/2 aggregation switches,
/// k/2 hosts per ToR, (k/2)² cores; aggregation switch `a` of every pod links to cores
/// `a·k/2 .. (a+1)·k/2`. Node order: hosts, NVSwitches, ToRs (pod-major), aggs, cores.
/// `fabric` (default nic) sets switch-switch rates; `oversub` resizes ToR uplinks only.
pub(super) fn fat_tree(o: &Opts<'_>) -> Result<Topology, TopologyError> {
    let k = o.count("k", 4, 2)?;
    if k % 2 != 0 || k > 256 {
        return Err(o.err("k", format!("{k} must be even and at most 256")));
    }
    let c = common(o, 8, 1)?;
    let h = k / 2;
    let hosts = k * k * k / 4;
    let fabric = o.rate("fabric", c.nic)?;
    let tor_up = match o.oversub()? {
        Some(r) => o.sized_uplink((h * c.ports) as u128 * c.nic.0 as u128, h, Some(r))?,
        None => fabric,
    };
    let (k2, h2) = (k as u128, h as u128);
    let nics = hosts as u128 * c.ports as u128;
    c.check_size(
        o,
        "k",
        hosts,
        2 * k2 * h2 + h2 * h2,
        nics + 2 * k2 * h2 * h2,
    )?;
    let mut net = hosts_and_nvlink(o, &c, hosts)?;
    let tor0 = net.nodes(k * h, NodeKind::Switch) as u64;
    let agg0 = net.nodes(k * h, NodeKind::Switch) as u64;
    let core0 = net.nodes(h * h, NodeKind::Switch) as u64;
    for g in 0..hosts {
        nvlink_of(&mut net, &c, hosts, g);
        nics_of(&mut net, &c, g, tor0 + g / h);
    }
    for pod in 0..k {
        for e in 0..h {
            for a in 0..h {
                net.link(
                    (tor0 + pod * h + e) as u32,
                    (agg0 + pod * h + a) as u32,
                    tor_up,
                    c.latency,
                    LinkKind::Fabric,
                );
            }
        }
    }
    for pod in 0..k {
        for a in 0..h {
            for j in 0..h {
                net.link(
                    (agg0 + pod * h + a) as u32,
                    (core0 + a * h + j) as u32,
                    fabric,
                    c.latency,
                    LinkKind::Fabric,
                );
            }
        }
    }
    Ok(finish(net, &c, hosts, o.spec, Fabric::Clos))
}

/// Two-tier leaf-spine: `hosts-per-leaf` hosts under each leaf, every leaf linked once to
/// every spine. Node order: hosts, NVSwitches, leaves, spines.
pub(super) fn leaf_spine(o: &Opts<'_>) -> Result<Topology, TopologyError> {
    let leaves = o.count("leaves", 4, 1)?;
    let spines = o.count("spines", 2, 1)?;
    let hpl = o.count("hosts-per-leaf", 8, 1)?;
    let c = common(o, 8, 1)?;
    let hosts = leaves.saturating_mul(hpl);
    let up = o.leaf_uplink((hpl * c.ports) as u128 * c.nic.0 as u128, spines)?;
    let nics = hosts as u128 * c.ports as u128;
    let (l2, s2) = (leaves as u128, spines as u128);
    c.check_size(o, "spines", hosts, l2 + s2, nics + l2 * s2)?;
    let mut net = hosts_and_nvlink(o, &c, hosts)?;
    two_tier(&mut net, &c, hosts, leaves, spines, up, |g| g / hpl);
    Ok(finish(net, &c, hosts, o.spec, Fabric::Clos))
}

/// The shape both two-tier builders share: leaves then spines appended after the hosts,
/// host `g` (with its NVLink) on leaf `leaf_of(g)` at the NIC rate, and every leaf linked
/// once to every spine at `up`.
fn two_tier(
    net: &mut Net,
    c: &Common,
    hosts: u64,
    leaves: u64,
    spines: u64,
    up: BitsPerSec,
    leaf_of: impl Fn(u64) -> u64,
) {
    let leaf0 = net.nodes(leaves, NodeKind::Switch) as u64;
    let spine0 = net.nodes(spines, NodeKind::Switch) as u64;
    for g in 0..hosts {
        nvlink_of(net, c, hosts, g);
        nics_of(net, c, g, leaf0 + leaf_of(g));
    }
    for l in 0..leaves {
        for s in 0..spines {
            net.link(
                (leaf0 + l) as u32,
                (spine0 + s) as u32,
                up,
                c.latency,
                LinkKind::Fabric,
            );
        }
    }
}

/// Rail-optimised: one leaf per rail (`gpus-per-server` rails), GPU i of every server on
/// leaf i, every leaf linked to every spine (traffic between rails crosses a spine, since
/// hosts do not forward and NVLink is not a network path). Node order: hosts, NVSwitches,
/// leaves (rail order), spines.
pub(super) fn rail(o: &Opts<'_>) -> Result<Topology, TopologyError> {
    let servers = o.count("servers", 4, 1)?;
    let spines = o.count("spines", 2, 1)?;
    let c = common(o, 8, 1)?;
    let hosts = servers.saturating_mul(c.gps);
    let up = o.leaf_uplink((servers * c.ports) as u128 * c.nic.0 as u128, spines)?;
    let nics = hosts as u128 * c.ports as u128;
    let (r2, s2) = (c.gps as u128, spines as u128);
    c.check_size(o, "spines", hosts, r2 + s2, nics + r2 * s2)?;
    let mut net = hosts_and_nvlink(o, &c, hosts)?;
    two_tier(&mut net, &c, hosts, c.gps, spines, up, |g| g % c.gps);
    Ok(finish(net, &c, hosts, o.spec, Fabric::Clos))
}

/// A DGX SuperPOD generation's compute fabric (docs/compute.md#fabrics-of-the-published-runs).
struct PodGen {
    /// Servers per scalable unit.
    su: u64,
    /// Compute NIC rate (one per GPU).
    nic: BitsPerSec,
    /// NVLink rate per GPU and direction.
    nvlink: BitsPerSec,
}

/// NVIDIA DGX SuperPOD, rail-optimised: scalable units of `su` DGX servers (20 for A100
/// with HDR 200 Gb/s InfiniBand, 32 for H100 and B200 with NDR 400 Gb/s), 8 GPUs each with its own
/// NIC; in every unit, rail `r` (GPU `r` of each server) has its own leaf; every leaf links
/// once to each of `su` spines at the NIC rate, so the fabric is non-blocking. (The real
/// design adds a core tier above 4–7 units; at the same non-blocking capacity a fluid model
/// sees the same rates, and the difference is a hop of latency.) Node order: hosts,
/// NVSwitches, leaves (unit-major, rail order), spines.
pub(super) fn superpod(o: &Opts<'_>) -> Result<Topology, TopologyError> {
    let gen = match o.text("gen").map(str::to_ascii_lowercase).as_deref() {
        None | Some("a100") => PodGen {
            su: 20,
            nic: BitsPerSec::gbps(200),
            nvlink: BitsPerSec::gbps(2400),
        },
        Some("h100") | Some("h200") => PodGen {
            su: 32,
            nic: BitsPerSec::gbps(400),
            nvlink: BitsPerSec::gbps(3600),
        },
        Some("b200") => PodGen {
            su: 32,
            nic: BitsPerSec::gbps(400),
            nvlink: BitsPerSec::gbps(7200),
        },
        Some(g) => {
            return Err(o.err(
                "gen",
                format!("`{g}`: expected a100, h100 (also for H200 servers) or b200"),
            ))
        }
    };
    let servers = o.count("servers", gen.su, 1)?;
    let su = o.count("su", gen.su, 1)?;
    let mut c = common(o, 8, 1)?;
    c.fixed_ports(o, 1, "a DGX SuperPOD gives every GPU one compute NIC")?;
    if !o.has("nic") {
        c.nic = gen.nic;
    }
    if !o.has("nvlink") {
        c.nvlink = Some(gen.nvlink);
    }
    let hosts = servers.saturating_mul(c.gps);
    let units = servers.div_ceil(su);
    let leaves = units.saturating_mul(c.gps);
    let spines = su;
    let up = o.leaf_uplink(su as u128 * c.nic.0 as u128, spines)?;
    let mut net = hosts_and_nvlink(o, &c, hosts)?;
    let gps = c.gps;
    two_tier(&mut net, &c, hosts, leaves, spines, up, |g| {
        (g / gps / su) * gps + g % gps
    });
    Ok(finish(net, &c, hosts, o.spec, Fabric::Clos))
}

/// HPN-style dual-plane (a simplification of Alibaba's HPN, SIGCOMM'24): every GPU has two
/// NIC ports of rate `nic`; port p links to a ToR of plane p. `servers-per-tor` servers
/// share one ToR pair; each plane is its own leaf-spine with `spines` spines (the planes
/// never meet, so a flow stays in the plane its first hop picks). Node order: hosts,
/// NVSwitches, plane-0 ToRs, plane-1 ToRs, plane-0 spines, plane-1 spines.
pub(super) fn dual_plane(o: &Opts<'_>) -> Result<Topology, TopologyError> {
    let servers = o.count("servers", 4, 1)?;
    let spt = o.count("servers-per-tor", servers, 1)?;
    let spines = o.count("spines", 2, 1)?;
    let c = common(o, 8, 2)?;
    c.fixed_ports(o, 2, "every GPU has one port in each of the two planes")?;
    let hosts = servers.saturating_mul(c.gps);
    let tors = servers.div_ceil(spt);
    let up = o.leaf_uplink(spt as u128 * c.gps as u128 * c.nic.0 as u128, spines)?;
    let (t2, s2) = (tors as u128, spines as u128);
    c.check_size(
        o,
        "spines",
        hosts,
        2 * (t2 + s2),
        2 * hosts as u128 + 2 * t2 * s2,
    )?;
    let mut net = hosts_and_nvlink(o, &c, hosts)?;
    let tor0 = net.nodes(2 * tors, NodeKind::Switch) as u64;
    let spine0 = net.nodes(2 * spines, NodeKind::Switch) as u64;
    for g in 0..hosts {
        nvlink_of(&mut net, &c, hosts, g);
        let t = g / c.gps / spt;
        for plane in 0..2 {
            net.link(
                g as u32,
                (tor0 + plane * tors + t) as u32,
                c.nic,
                c.latency,
                LinkKind::Nic,
            );
        }
    }
    for plane in 0..2 {
        for t in 0..tors {
            for s in 0..spines {
                net.link(
                    (tor0 + plane * tors + t) as u32,
                    (spine0 + plane * spines + s) as u32,
                    up,
                    c.latency,
                    LinkKind::Fabric,
                );
            }
        }
    }
    Ok(finish(net, &c, hosts, o.spec, Fabric::Clos))
}
