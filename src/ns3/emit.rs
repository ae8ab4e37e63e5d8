//! `ina3d ns3 emit`: the input files of the HPCC simulator family and of our ns-3 glue.
//!
//! Files written into the output directory (each atomically):
//!
//! | file | for | content |
//! |---|---|---|
//! | `topology.txt` | HPCC / Parsimon / SimAI, glue | nodes, switch ids, links (plus INA proxy hosts) |
//! | `flow.txt` | HPCC / Parsimon / SimAI | open-loop flows sorted by start |
//! | `flow.meta.txt` | people | where start times came from; flow index → record id |
//! | `config.txt` | HPCC / SimAI | every key the family reads, RED maps for every rate |
//! | `trace_nodes.txt` | HPCC | HPCC's `TRACE_FILE` (nodes to trace: none) |
//! | `trace.txt` | glue | the DAG, one record per line (format below) |
//! | `routes.txt` | glue | identity addresses and the path of every (src, dst, channel) connection ([`super::routes`]) |
//! | `params.txt` | glue | INA slots, payload, window, policy; transport sizes |
//!
//! `trace.txt` (glue format v3, [`crate::formats::glue_trace_txt`]): `#` comments, then
//! `RECORDS <n>`, then one line per record: `id src dst bytes gap_ns dur_ns mode class
//! channel standalone_ns agg_id agg_switch agg_fanin agg_dir agg_group ndeps dep…` with
//! `-` in the five agg fields of records without aggregation. `ina3d ns3 emit` of a
//! glue `trace.txt` reads the `params.txt` and, under the planned policy, the
//! `reservations.txt` beside it ([`reservations_from_lines`]).
//! (HPCC's own `TRACE_FILE` key means something else — a list of nodes to trace — so
//! config.txt points it at `trace_nodes.txt`.)

use super::routes::{glue_pairs, PairRoutes};
use super::{InaConfig, Ns3Error};
use crate::fct::FctRow;
use crate::formats::flow_txt::{self, FlowLine, MAX_FLOW_BYTES};
use crate::formats::{glue_trace_txt, params_txt, topology_txt, write_atomic_bytes};
use crate::keyword::keyword_enum;
use crate::record::{AggDir, AggGroup, Class, FlowRecord, Mode};
use crate::topology::{Link, LinkKind, NodeKind, Topology};
use crate::trace::Reservation;
use crate::units::{BitsPerSec, Bytes, FlowId, Nanos, NodeId};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Which simulator's dialect to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Flavor {
    /// alibaba-edu/High-Precision-Congestion-Control.
    #[default]
    Hpcc,
    /// Parsimon's fork: an id column first in flow.txt (and in fct.txt).
    Parsimon,
    /// SimAI's ns-3: 6-field topology header with NVSwitch ids.
    Simai,
}

keyword_enum!(Flavor, "simulator flavour", Flavor::Hpcc => "hpcc", Flavor::Parsimon => "parsimon", Flavor::Simai => "simai");

impl Flavor {
    /// The `flow.txt` variant of this dialect (Parsimon's has an id column).
    pub fn flow_flavor(self) -> flow_txt::Flavor {
        match self {
            Flavor::Parsimon => flow_txt::Flavor::Parsimon,
            Flavor::Hpcc | Flavor::Simai => flow_txt::Flavor::Hpcc,
        }
    }

    /// The `topology.txt` header of this dialect for `topo`: SimAI's names the GPUs per
    /// server and the GPU type (`A100`, SimAI's default, when empty).
    pub fn topology_flavor(self, topo: &Topology, gpu_type: &str) -> topology_txt::Flavor {
        match self {
            Flavor::Simai => topology_txt::Flavor::Simai {
                gpus_per_server: topo.gpus_per_server.max(1),
                gpu_type: gpu_type.to_string(),
            },
            Flavor::Hpcc | Flavor::Parsimon => topology_txt::Flavor::Hpcc,
        }
    }
}

/// Where flow.txt's start times come from.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum StartSource {
    /// A contention-free schedule of the DAG: each record starts at max(dep ends) + gap and
    /// lasts its standalone time (size / bottleneck + path latency) or `dur`. INA down
    /// edges depend on the up edges, so this schedule runs an aggregation's up and down
    /// streams one after the other where a real switch pipelines them: for INA it is
    /// pessimistic (the 8-GPU tiny example: 1.77 ms scheduled vs 1.34 ms on ns-3).
    #[default]
    Schedule,
    /// The `start_ns` column of a replay's `fct.csv`.
    Replay(PathBuf),
}

pub use crate::formats::params_txt::{TcpConnections, Transport};

/// Options of [`emit`].
#[derive(Clone, Debug, Default)]
pub struct EmitOptions {
    /// Simulator dialect.
    pub flavor: Flavor,
    /// ECMP seed of the routes (the replayer's: the trace header's `seed` for the same paths).
    pub seed: u64,
    /// How the routes choose among equal-cost paths (the trace header's `routing`):
    /// `ecmp` and `dmodk` paths are written into `routes.txt`, which the glue follows;
    /// `spray` is refused (the glue forwards each connection on one path).
    pub routing: crate::topology::RoutingMode,
    /// Start times of flow.txt.
    pub start: StartSource,
    /// SimAI's GPU type field (`A100` when empty).
    pub gpu_type: String,
    /// TCP connection reuse in the glue (with [`Transport::Tcp`]).
    pub tcp: TcpConnections,
    /// How the glue carries net records.
    pub transport: Transport,
}

/// What [`emit`] wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct EmitReport {
    /// Files written, in write order.
    pub files: Vec<PathBuf>,
    /// Rows of flow.txt.
    pub flows: usize,
    /// Records split because they exceed HPCC's uint32 size.
    pub split_records: usize,
    /// (aggregating switch, its proxy host) pairs added to topology.txt.
    pub proxies: Vec<(NodeId, NodeId)>,
    /// `contention-free-schedule` or `replay:<path>`.
    pub start_source: String,
    /// Makespan of the contention-free schedule (a lower bound on the iteration).
    pub schedule_makespan: Nanos,
    /// PATH lines in routes.txt: the (src, dst, channel) connections routed, reverse
    /// directions included.
    pub routes: usize,
    /// What a user of these files must know (e.g. link speeds a simulator's stock
    /// configuration has no ECN thresholds for).
    pub warnings: Vec<String>,
}

/// Network link speeds with `KMAX_MAP`/`KMIN_MAP`/`PMAX_MAP` entries in SimAI's stock
/// configuration (`SimAI.conf`, aliyun/SimAI; tests/fixtures/simai/SimAI.conf): its ns-3
/// aborts ("must set kmin for each link speed") on a network link of any other speed.
pub const SIMAI_STOCK_RATES_GBPS: [u64; 6] = [25, 50, 100, 200, 400, 1600];

/// Warnings for network links whose speed SimAI's stock configuration lacks: the
/// `config.txt` written beside them has entries for every speed and must be used instead.
pub fn simai_rate_warnings(topo: &Topology) -> Vec<String> {
    let odd: BTreeSet<BitsPerSec> = topo
        .links
        .iter()
        .filter(|l| l.kind != LinkKind::NvLink)
        .map(|l| l.rate)
        .filter(|r| {
            !SIMAI_STOCK_RATES_GBPS
                .iter()
                .any(|g| BitsPerSec::gbps(*g) == *r)
        })
        .collect();
    odd.iter()
        .map(|r| {
            format!(
                "network links at {} have no ECN thresholds in SimAI's stock SimAI.conf (it knows {} Gb/s): run SimAI with the config.txt written here, which has entries for every speed used",
                r.to_hpcc_string(),
                SIMAI_STOCK_RATES_GBPS.map(|g| g.to_string()).join(", ")
            )
        })
        .collect()
}

/// Check a link rate is one the HPCC family and ns-3 take.
pub fn check_rate(l: &Link) -> Result<(), Ns3Error> {
    let r = l.rate.0;
    if r == 0 || !r.is_multiple_of(1_000_000) || r > 10_000_000_000_000 {
        return Err(Ns3Error::UnsupportedRate {
            a: l.a,
            b: l.b,
            rate: r,
        });
    }
    Ok(())
}

/// Validate records against the topology: endpoints exist, INA edges carry agg tags, only
/// net records name an NCCL channel other than 0 (the glue's INA streams are one
/// connection each).
pub fn validate(records: &[FlowRecord], topo: &Topology) -> Result<(), Ns3Error> {
    let n = topo.node_count();
    let mut ids = BTreeSet::new();
    for r in records {
        for node in [r.src, r.dst] {
            if node.idx() >= n {
                return Err(Ns3Error::UnknownNode {
                    record: r.id,
                    node,
                    nodes: n,
                });
            }
        }
        if !ids.insert(r.id) {
            return Err(Ns3Error::BadTrace(format!(
                "record id {} appears twice",
                r.id
            )));
        }
        if r.channel != 0 && r.mode != Mode::Net {
            return Err(Ns3Error::BadTrace(format!(
                "record {}: a {} record on NCCL channel {} (only net records run on channels)",
                r.id, r.mode, r.channel
            )));
        }
        match r.mode {
            Mode::Ina => {
                let a = r.agg.ok_or_else(|| {
                    Ns3Error::BadTrace(format!(
                        "record {}: ina record without aggregation tag",
                        r.id
                    ))
                })?;
                let sw = match a.dir {
                    AggDir::Up => r.dst,
                    AggDir::Down => r.src,
                };
                if sw != a.switch || topo.kinds.get(sw.idx()) != Some(&NodeKind::Switch) {
                    return Err(Ns3Error::BadTrace(format!("record {}: aggregating switch {} is not this edge's switch end or not a switch", r.id, a.switch)));
                }
            }
            Mode::Net if r.src != r.dst => {
                for node in [r.src, r.dst] {
                    if topo.kinds[node.idx()] != NodeKind::Host {
                        return Err(Ns3Error::BadTrace(format!(
                            "record {}: net flow endpoint {node} is not a host",
                            r.id
                        )));
                    }
                }
            }
            _ => {}
        }
    }
    for l in &topo.links {
        check_rate(l)?;
    }
    Ok(())
}

/// Records in an order where every dep precedes its dependant (Kahn), or an error naming
/// a dangling dep or a cycle.
pub fn topo_order(records: &[FlowRecord]) -> Result<Vec<usize>, Ns3Error> {
    let index: BTreeMap<FlowId, usize> =
        records.iter().enumerate().map(|(i, r)| (r.id, i)).collect();
    let mut indeg = vec![0usize; records.len()];
    let mut out: Vec<Vec<usize>> = vec![Vec::new(); records.len()];
    for (i, r) in records.iter().enumerate() {
        for d in &r.deps {
            let j = *index.get(d).ok_or_else(|| {
                Ns3Error::BadTrace(format!("record {} depends on unknown record {d}", r.id))
            })?;
            out[j].push(i);
            indeg[i] += 1;
        }
    }
    let mut q: VecDeque<usize> = (0..records.len()).filter(|&i| indeg[i] == 0).collect();
    let mut order = Vec::with_capacity(records.len());
    while let Some(i) = q.pop_front() {
        order.push(i);
        for &j in &out[i] {
            indeg[j] -= 1;
            if indeg[j] == 0 {
                q.push_back(j);
            }
        }
    }
    if order.len() != records.len() {
        let stuck = (0..records.len())
            .find(|&i| indeg[i] > 0)
            .map(|i| records[i].id.0)
            .unwrap_or(0);
        return Err(Ns3Error::BadTrace(format!(
            "the dependencies have a cycle (through record {stuck})"
        )));
    }
    Ok(order)
}

/// Standalone time of every record (index-aligned with `records`).
pub fn standalone_times(
    records: &[FlowRecord],
    topo: &Topology,
    routes: &PairRoutes,
) -> Result<Vec<Nanos>, Ns3Error> {
    records
        .iter()
        .map(|r| match r.mode {
            Mode::Compute | Mode::NvLink => Ok(r.dur),
            Mode::Net | Mode::Ina => routes.standalone(topo, (r.src, r.dst, r.channel), r.bytes),
        })
        .collect()
}

/// Contention-free schedule: start of every record (index-aligned), and the makespan.
pub fn contention_free_schedule(
    records: &[FlowRecord],
    standalone: &[Nanos],
) -> Result<(Vec<Nanos>, Nanos), Ns3Error> {
    let order = topo_order(records)?;
    let index: BTreeMap<FlowId, usize> =
        records.iter().enumerate().map(|(i, r)| (r.id, i)).collect();
    let mut start = vec![Nanos::ZERO; records.len()];
    let mut end = vec![Nanos::ZERO; records.len()];
    let mut makespan = Nanos::ZERO;
    for i in order {
        let r = &records[i];
        let ready = r
            .deps
            .iter()
            .map(|d| end[index[d]])
            .max()
            .unwrap_or(Nanos::ZERO);
        start[i] = ready + r.gap;
        end[i] = start[i] + standalone[i];
        makespan = makespan.max(end[i]);
    }
    Ok((start, makespan))
}

/// Read start times from a replay's fct.csv, index-aligned with `records`.
pub fn replay_starts(path: &Path, records: &[FlowRecord]) -> Result<Vec<Nanos>, Ns3Error> {
    let mut rdr = csv::Reader::from_path(path)
        .map_err(|e| Ns3Error::parse(path, 0, "fct.csv", e.to_string()))?;
    let mut by_id = BTreeMap::new();
    for (i, row) in rdr.deserialize::<FctRow>().enumerate() {
        let row = row.map_err(|e| Ns3Error::parse(path, i + 2, "row", e.to_string()))?;
        by_id.insert(row.flow_id, Nanos(row.start_ns));
    }
    records
        .iter()
        .map(|r| {
            by_id.get(&r.id.0).copied().ok_or_else(|| {
                Ns3Error::parse(
                    path,
                    0,
                    "flow_id",
                    format!("record {} of the trace has no row", r.id),
                )
            })
        })
        .collect()
}

/// KMAX/KMIN (KB of 1,000 B) and PMAX for a rate: the one rule, shared with the
/// replayer's DCQCN model ([`crate::netmodel::red_params`]).
pub use crate::netmodel::red_params;

/// The topology with one aggregation proxy host per aggregating switch (module docs of
/// [`crate::ns3`]); returns it and the (switch, proxy) pairs.
pub fn with_proxies(topo: &Topology, records: &[FlowRecord]) -> (Topology, Vec<(NodeId, NodeId)>) {
    let switches: BTreeSet<NodeId> = records
        .iter()
        .filter(|r| r.mode == Mode::Ina)
        .filter_map(|r| r.agg.map(|a| a.switch))
        .collect();
    let mut t = topo.clone();
    let mut pairs = Vec::new();
    for sw in switches {
        let ports: Vec<&Link> = topo
            .links
            .iter()
            .filter(|l| (l.a == sw || l.b == sw) && l.kind != LinkKind::NvLink)
            .collect();
        let rate = BitsPerSec(ports.iter().map(|l| l.rate.0).sum::<u64>().max(1_000_000));
        let delay = ports.iter().map(|l| l.delay).min().unwrap_or(Nanos(1000));
        let proxy = NodeId(t.kinds.len() as u32);
        t.kinds.push(NodeKind::Host);
        t.links.push(Link {
            a: sw,
            b: proxy,
            rate,
            delay,
            error_rate: 0.0,
            kind: LinkKind::Nic,
        });
        pairs.push((sw, proxy));
    }
    (t, pairs)
}

/// One flow.txt row before formatting.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Row {
    start: Nanos,
    record: FlowId,
    piece: u32,
    pieces: u32,
    src: NodeId,
    dst: NodeId,
    size: u64,
}

/// `config.txt` text: every key the HPCC family reads, file names relative to the directory.
pub fn config_text(rates: &BTreeSet<BitsPerSec>, stop_time_s: f64) -> String {
    let ecn: Vec<crate::formats::config_txt::Ecn> = rates
        .iter()
        .map(|&rate| {
            let (kmax_kb, kmin_kb, pmax) = red_params(rate);
            crate::formats::config_txt::Ecn {
                rate,
                kmax_kb,
                kmin_kb,
                pmax,
            }
        })
        .collect();
    crate::formats::config_txt::to_string(&ecn, stop_time_s)
}

/// Initial TCP window of the glue, in segments, at most: about one bandwidth-delay product
/// of a 400 Gb/s, 3-tier path (1,024 × 1,000 B ≈ 400 Gb/s × 20 µs), so a transfer starts at
/// line rate as an RDMA queue pair does, instead of TCP's slow start from 10 segments; never
/// above the buffer ([`tcp_buffer`]).
pub const TCP_INITIAL_CWND: u32 = 1024;

/// Packets each glue queue holds: the glue has no PFC, so a port is lossless by depth
/// (a drop fails the run). 100,000 packets: the bundled example job (`ina3d run --ns3`,
/// 1,936 records, several GB on a fat-tree) peaks at 22,717 under `roce`, more than the
/// 10,000 of before; the depth only matters to a run that would otherwise drop (the RED
/// thresholds that drive DCQCN are far below), so runs that fit before are unchanged.
pub const QUEUE_PACKETS: u64 = 100_000;

/// Bandwidth-delay products the glue's TCP send and receive buffers hold.
pub const TCP_BUFFER_BDPS: u64 = 4;

/// The glue's TCP send and receive buffer, bytes: [`TCP_BUFFER_BDPS`] × the largest
/// bandwidth-delay product over the routed connections (bottleneck rate × round trip, the round
/// trip being twice the path's propagation delay plus one 1,054-byte segment's
/// serialization per hop), in whole 1,000-byte segments, at least 64 segments. A window
/// of a few BDPs keeps a lone flow at line rate while bounding the segments TCP keeps
/// unacknowledged, which ns-3's sender scans on every send.
pub fn tcp_buffer(topo: &Topology, routes: &PairRoutes) -> u64 {
    let seg = crate::record::NET_PACKET_PAYLOAD.0;
    let mut bdp = 0u64;
    for (_, path) in routes.iter() {
        let links = || path.iter().map(|(_, l)| &topo.links[l.idx()]);
        let Some(rate) = links().map(|l| l.rate).min() else {
            continue;
        };
        let rtt: u64 = links()
            .map(|l| 2 * l.delay.0 + l.rate.transmit_time(Bytes(seg + 54)).0)
            .sum();
        bdp = bdp.max((u128::from(rate.0) * u128::from(rtt) / 8_000_000_000) as u64);
    }
    (TCP_BUFFER_BDPS * bdp).div_ceil(seg).max(64) * seg
}

/// What `params.txt` says about the glue's transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GlueTransport {
    /// How net records travel.
    pub transport: Transport,
    /// TCP connection reuse (with [`Transport::Tcp`]).
    pub tcp: TcpConnections,
    /// TCP send and receive buffer, bytes ([`tcp_buffer`]).
    pub tcp_buffer: u64,
}

/// `params.txt` text for the glue.
pub fn params_text(
    ina: &InaConfig,
    t: &GlueTransport,
    flavor: Flavor,
    seed: u64,
    stop_time_s: f64,
) -> String {
    let seg = crate::record::NET_PACKET_PAYLOAD.0;
    params_txt::to_string(&params_txt::Params {
        ina: ina.clone(),
        transport: t.transport,
        mtu: 1500.max(ina.payload.0 + 64),
        net_payload: seg,
        tcp_initial_cwnd: (t.tcp_buffer / seg).min(u64::from(TCP_INITIAL_CWND)),
        tcp_buffer: t.tcp_buffer,
        tcp_connections: t.tcp,
        queue_packets: QUEUE_PACKETS,
        flavor: flavor.as_str(),
        seed,
        stop_time_s,
    })
}

/// Read back what [`params_text`] wrote that a re-emit needs: the INA switch model and the
/// route seed (`None` when the file has no `SEED` line), through the format's one reader.
pub fn read_params(path: &Path, text: &str) -> Result<(InaConfig, Option<u64>), Ns3Error> {
    let r = params_txt::parse(path, text)?;
    Ok((r.ina, r.seed))
}

/// What the planned slot policy matches an aggregation by, from its up records: class,
/// group, first member (the lowest host sending up; `None` if no host does) and its
/// aggregating switches.
struct AggKey {
    class: Class,
    group: AggGroup,
    first: Option<NodeId>,
    switches: BTreeSet<NodeId>,
}

/// Every aggregation's [`AggKey`], by aggregation id.
fn aggregation_keys(records: &[FlowRecord], topo: &Topology) -> BTreeMap<u64, AggKey> {
    let mut aggs: BTreeMap<u64, AggKey> = BTreeMap::new();
    for r in records {
        let Some(a) = r.agg.filter(|a| a.dir == AggDir::Up) else {
            continue;
        };
        let e = aggs.entry(a.id).or_insert(AggKey {
            class: r.class,
            group: a.group,
            first: None,
            switches: BTreeSet::new(),
        });
        e.switches.insert(a.switch);
        if topo.kind(r.src) == Some(NodeKind::Host) {
            e.first = Some(e.first.map_or(r.src, |f| f.min(r.src)));
        }
    }
    aggs
}

/// `reservations.txt` for the glue under the `planned` slot policy: one `agg_id switch
/// slots` line per aggregating switch of every aggregation, the slots its group reserves
/// there ([`InaConfig::reservation`], the same lookup the replayer makes). `None`
/// for other policies; an error naming the aggregation when a switch has no reservation.
pub fn reservations_text(
    records: &[FlowRecord],
    ina: &InaConfig,
    topo: &Topology,
) -> Result<Option<String>, Ns3Error> {
    if ina.policy() != crate::trace::InaPolicy::Planned {
        return Ok(None);
    }
    let mut out = Vec::new();
    for (id, k) in aggregation_keys(records, topo) {
        for sw in k.switches {
            let slots = k.first.and_then(|f| ina.reservation(sw, k.class, k.group, f)).ok_or_else(|| {
                Ns3Error::BadTrace(format!(
                    "aggregation {id}: the planned slot policy has no reservation on switch {sw} for its {}{} group (first member {})",
                    k.group.prefix(),
                    k.class,
                    k.first.map_or("none".to_string(), |f| f.to_string())
                ))
            })?;
            out.push((id, sw, slots));
        }
    }
    Ok(Some(crate::formats::reservations_txt::to_string(&out)))
}

/// The model's reservations back from a `reservations.txt` the glue was given (`lines`,
/// with their line numbers, read from `path`) and the records it was given with: each
/// line's aggregation is matched to its (class, group, first member) as
/// [`reservations_text`] matched it, so emitting `records` again writes the same file.
/// Errors name the file, line and field: an aggregation the records do not have, one
/// without a host member, or two aggregations of one group given different slots on a
/// switch.
pub fn reservations_from_lines(
    records: &[FlowRecord],
    topo: &Topology,
    path: &Path,
    lines: &[(u64, crate::formats::reservations_txt::Line)],
) -> Result<Vec<Reservation>, Ns3Error> {
    let keys = aggregation_keys(records, topo);
    // per reservation key: the reservation and the aggregation that first gave it
    let mut by_key: BTreeMap<_, (Reservation, u64)> = BTreeMap::new();
    let err = |no: u64, field: &str, msg: String| Ns3Error::Parse {
        path: path.to_path_buf(),
        line: no as usize,
        field: field.into(),
        msg,
    };
    for &(no, (id, sw, slots)) in lines {
        let k = keys.get(&id).ok_or_else(|| {
            err(
                no,
                "agg_id",
                format!("aggregation {id} is not in the trace"),
            )
        })?;
        let first = k.first.ok_or_else(|| {
            err(
                no,
                "agg_id",
                format!("aggregation {id} has no host sending up"),
            )
        })?;
        let r = Reservation {
            switch: sw,
            class: k.class,
            group: k.group,
            first,
            slots,
        };
        let (held, was) = by_key.entry(r.key()).or_insert((r, id));
        if held.slots != slots {
            return Err(err(
                no,
                "slots",
                format!(
                    "{slots} slots on switch {sw} for aggregation {id}, but {} for aggregation {was} of the same {}{} group",
                    held.slots,
                    k.group.prefix(),
                    k.class
                ),
            ));
        }
    }
    Ok(by_key.into_values().map(|(r, _)| r).collect())
}

/// Write every input file for `records` on `topo` into `dir` (created if needed), in
/// phases: check the INA model, route the pairs, time the flows, lay out `flow.txt` and
/// its meta file, assemble every file's text, write them atomically.
pub fn emit(
    records: &[FlowRecord],
    ina: &InaConfig,
    topo: &Topology,
    opts: &EmitOptions,
    dir: &Path,
) -> Result<EmitReport, Ns3Error> {
    validate(records, topo)?;
    check_ina(ina)?;
    let pairs = glue_pairs(records, topo, ina.policy());
    let routes = PairRoutes::new(topo, opts.seed, opts.routing, &pairs)?;
    let standalone = standalone_times(records, topo, &routes)?;
    let (sched, makespan) = contention_free_schedule(records, &standalone)?;
    let (starts, start_source) = match &opts.start {
        StartSource::Schedule => (sched, "contention-free-schedule".to_string()),
        StartSource::Replay(p) => (
            replay_starts(p, records)?,
            format!("replay:{}", p.display()),
        ),
    };
    let (routes_txt, nroutes) = routes.text(topo);
    let (ext, proxies) = with_proxies(topo, records);
    let (rows, split) = flow_rows(records, &starts, &proxies);
    let flow = flow_text(&rows, opts.flavor);
    let meta = meta_text(opts, &start_source, &rows, split, &proxies, nroutes);
    for l in &ext.links {
        check_rate(l)?;
    }
    // stop time: generous against the contention-free bound, at least 1 s
    let stop = (makespan.as_secs_f64() * 100.0).max(1.0);
    let rates: BTreeSet<BitsPerSec> = ext.links.iter().map(|l| l.rate).collect();
    let transport = GlueTransport {
        transport: opts.transport,
        tcp: opts.tcp,
        tcp_buffer: tcp_buffer(topo, &routes),
    };
    let mut files: Vec<(&str, String)> = vec![
        (
            "topology.txt",
            topology_txt::to_string(
                &ext.to_file(opts.flavor.topology_flavor(&ext, &opts.gpu_type)),
            ),
        ),
        ("flow.txt", flow),
        ("flow.meta.txt", meta),
        ("config.txt", config_text(&rates, stop)),
        ("trace_nodes.txt", "0\n".to_string()),
        ("trace.txt", glue_trace_txt::to_string(records, &standalone)),
        ("routes.txt", routes_txt),
        (
            "params.txt",
            params_text(ina, &transport, opts.flavor, opts.seed, stop),
        ),
    ];
    if let Some(text) = reservations_text(records, ina, topo)? {
        files.push(("reservations.txt", text));
    }
    let written = write_files(dir, files)?;
    Ok(EmitReport {
        files: written,
        flows: rows.len(),
        split_records: split,
        proxies,
        start_source,
        schedule_makespan: makespan,
        routes: nroutes,
        warnings: emit_warnings(opts, &ext, records),
    })
}

/// The INA model the glue can run: one-packet payloads, at least one slot, window and class.
fn check_ina(ina: &InaConfig) -> Result<(), Ns3Error> {
    if ina.payload.0 == 0
        || ina.payload.0 > crate::formats::params_txt::MAX_INA_PAYLOAD
        || ina.slots == 0
        || ina.window == 0
        || ina.classes.is_empty()
    {
        return Err(Ns3Error::BadTrace(format!(
            "INA parameters out of range: payload {} (1..=8192 B, one packet), slots {}, window {} (both ≥ 1), {} classes (≥ 1)",
            ina.payload.0, ina.slots, ina.window, ina.classes.len()
        )));
    }
    Ok(())
}

/// `flow.txt`'s rows in start order: every network record with bytes (INA edges through
/// their switches' proxy hosts), cut into pieces of at most [`MAX_FLOW_BYTES`]; and how
/// many records were cut.
fn flow_rows(
    records: &[FlowRecord],
    starts: &[Nanos],
    proxies: &[(NodeId, NodeId)],
) -> (Vec<Row>, usize) {
    let proxy_of: BTreeMap<NodeId, NodeId> = proxies.iter().copied().collect();
    let mut rows = Vec::new();
    let mut split = 0;
    for (i, r) in records.iter().enumerate() {
        let (src, dst) = match r.mode {
            Mode::Net if r.src != r.dst && r.bytes.0 > 0 => (r.src, r.dst),
            Mode::Ina if r.bytes.0 > 0 => (
                *proxy_of.get(&r.src).unwrap_or(&r.src),
                *proxy_of.get(&r.dst).unwrap_or(&r.dst),
            ),
            _ => continue,
        };
        let pieces = r.bytes.0.div_ceil(MAX_FLOW_BYTES) as u32;
        if pieces > 1 {
            split += 1;
        }
        for p in 0..pieces {
            let size = (r.bytes.0 - p as u64 * MAX_FLOW_BYTES).min(MAX_FLOW_BYTES);
            rows.push(Row {
                start: starts[i],
                record: r.id,
                piece: p,
                pieces,
                src,
                dst,
                size,
            });
        }
    }
    rows.sort();
    (rows, split)
}

/// `flow.txt` in the flavour's layout (through the format's one writer).
fn flow_text(rows: &[Row], flavor: Flavor) -> String {
    let lines: Vec<FlowLine> = rows
        .iter()
        .enumerate()
        .map(|(k, row)| FlowLine {
            id: Some(k as u64),
            src: row.src,
            dst: row.dst,
            pg: 3,
            dport: 100,
            size: Bytes(row.size),
            start: row.start,
        })
        .collect();
    flow_txt::to_string(&lines, flavor.flow_flavor())
}

/// `flow.meta.txt`: what `flow.txt` does not say (start-time source, proxies, routes) and
/// which record each `flow.txt` row is.
fn meta_text(
    opts: &EmitOptions,
    start_source: &str,
    rows: &[Row],
    split: usize,
    proxies: &[(NodeId, NodeId)],
    nroutes: usize,
) -> String {
    let mut meta = format!(
        "# ina3d ns3 emit: what flow.txt does not say\nflavor {}\nstart_times {start_source}\nflows {}\nsplit_records {split} (records over {MAX_FLOW_BYTES} B cut into pieces starting together)\nina_proxies {}\n",
        opts.flavor.as_str(),
        rows.len(),
        proxies.len()
    );
    for (sw, p) in proxies {
        let _ = writeln!(meta, "proxy switch {sw} host {p}");
    }
    let _ = writeln!(
        meta,
        "glue_routes per (src, dst, channel) connection, the replayer's router: {nroutes} connections routed"
    );
    meta.push_str("# flow_index record_id piece pieces\n");
    for (k, row) in rows.iter().enumerate() {
        let _ = writeln!(meta, "{k} {} {} {}", row.record, row.piece, row.pieces);
    }
    meta
}

/// Writes each (name, text) into `dir` (created when missing), each atomically.
fn write_files(dir: &Path, files: Vec<(&str, String)>) -> Result<Vec<PathBuf>, Ns3Error> {
    std::fs::create_dir_all(dir).map_err(|e| Ns3Error::io(dir, e))?;
    let mut written = Vec::new();
    for (name, text) in files {
        let p = dir.join(name);
        write_atomic_bytes(&p, text.as_bytes())?;
        written.push(p);
    }
    Ok(written)
}

/// What a user of the emitted files must know: link speeds SimAI's stock configuration
/// lacks (SimAI flavour), NCCL channels the HPCC family cannot route apart.
fn emit_warnings(opts: &EmitOptions, ext: &Topology, records: &[FlowRecord]) -> Vec<String> {
    let mut w = if opts.flavor == Flavor::Simai {
        simai_rate_warnings(ext)
    } else {
        Vec::new()
    };
    w.extend(channel_warning(records));
    w.extend(fabric_warning(ext));
    w
}

/// The HPCC family routes shortest paths over switches by its own ECMP: it forwards
/// nothing through hosts and knows neither k-shortest, Valiant nor dimension-order routes.
/// The glue follows routes.txt on every family; say what an HPCC-family simulator will do.
fn fabric_warning(topo: &Topology) -> Option<String> {
    use crate::topology::Fabric;
    match &topo.fabric {
        Fabric::Clos => None,
        f if f.hosts_relay() => Some(format!(
            "topology `{}` relays through servers: the glue forwards along routes.txt, but HPCC's and SimAI's ns-3 route only through switches and cannot run these flows as ina3d routes them",
            topo.source
        )),
        _ => Some(format!(
            "topology `{}` routes by its family's rule (k-shortest paths, minimal/Valiant or dimension order; routes.txt): HPCC's and SimAI's ns-3 take their own shortest ECMP paths instead",
            topo.source
        )),
    }
}

/// Records on NCCL channels > 0 travel on their channel's own ECMP path
/// (`connection_key(src, dst, channel)`) in the replayer and in the glue (routes.txt has a
/// path per channel), but `flow.txt` has no channel column: an HPCC-family simulator hashes
/// its own 5-tuples and may put the channels of a pair on other paths. Say so instead of
/// diverging silently.
fn channel_warning(records: &[FlowRecord]) -> Option<String> {
    let n = records.iter().filter(|r| r.channel > 0).count();
    (n > 0).then(|| {
        format!(
            "{n} records travel on NCCL channels > 0: the replayer and the glue route each channel on its own ECMP path (routes.txt), flow.txt cannot say which path an HPCC-family simulator should take; trace with --nccl-channels 1 for identical routing there"
        )
    })
}
