//! What a trace contains, in the vocabulary of Megatron and nccl-tests: records and bytes
//! per class and mode, network bytes per node, the parallel groups and warm-ups the header
//! describes. `ina3d inspect` prints the [`Report`] as text or JSON.

use super::{TraceError, TraceReader};
use crate::record::{Class, FlowRecord, Mode};
use crate::schedule::{self, CollKind, ExpertSizes, Groups, RankOrder};
use crate::topology::Topology;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Records and payload bytes.
#[derive(Serialize, Default, Debug)]
pub struct Counter {
    /// Records.
    pub records: u64,
    /// Payload bytes.
    pub bytes: u64,
}

/// Network bytes of one node, sent and received, per traffic class.
#[derive(Serialize, Default, Clone, Debug)]
pub struct RankBytes {
    /// `rank N` for GPUs of the job, `node N` for switches (INA, Rina ring workers) and
    /// unmapped nodes.
    pub who: String,
    /// Topology node id.
    pub node: u32,
    /// Megatron rank, when the node is one of the job's GPUs.
    pub rank: Option<u32>,
    /// Bytes sent, by class name.
    pub sent: BTreeMap<String, u64>,
    /// Bytes received, by class name.
    pub received: BTreeMap<String, u64>,
    /// Collectives the node sent flows for (distinct `collective` ids of its network
    /// records).
    pub collectives: u64,
    /// Network records it sent outside any collective (pipeline sends).
    pub p2p_sends: u64,
}

/// Everything `ina3d inspect` reports about a trace.
#[derive(Serialize, Debug)]
pub struct Report {
    /// The trace file.
    pub file: String,
    /// Its header's metadata.
    pub metadata: BTreeMap<String, String>,
    /// Records.
    pub records: u64,
    /// Records and bytes by `class/mode`.
    pub by_class_mode: BTreeMap<String, Counter>,
    /// Records and bytes by class.
    pub by_class: BTreeMap<String, Counter>,
    /// Distinct INA aggregations.
    pub aggregations: u64,
    /// Σ `dur` of compute records.
    pub compute_ns_in_records: u64,
    /// Σ `gap` of all records.
    pub compute_ns_in_gaps: u64,
    /// Network bytes (net + ina records) per node, by class; GPUs of the job first, in
    /// rank order, then other nodes by id.
    pub per_rank: Vec<RankBytes>,
    /// The parallel groups, when the header has the sizes.
    pub groups: Option<GroupsOut>,
    /// The generator's warm-up per stage (header).
    pub warmup_per_stage: Option<String>,
    /// The compute calibration factor (header).
    pub calibration_factor: Option<String>,
    /// Where the calibration came from (header).
    pub calibration_source: Option<String>,
    /// The terms used, explained.
    pub vocabulary: BTreeMap<String, String>,
}

/// The parallel groups of the job, rebuilt from the header's sizes.
#[derive(Serialize, Debug)]
pub struct GroupsOut {
    /// `tp-cp-ep-dp-pp` or `tp-cp-ep-pp-dp`.
    pub rank_order: String,
    /// Tensor-parallel groups (ranks).
    pub tp: Vec<Vec<u32>>,
    /// Pipeline groups.
    pub pp: Vec<Vec<u32>>,
    /// Data-parallel groups.
    pub dp: Vec<Vec<u32>>,
    /// Data × context parallel groups (where dense gradients are reduced).
    pub dp_cp: Vec<Vec<u32>>,
    /// Context-parallel groups (ring attention runs in this order).
    pub cp: Vec<Vec<u32>>,
    /// Expert groups of a MoE trace (`None` for dense jobs).
    pub experts: Option<ExpertGroupsOut>,
    /// Embedding groups (first and last stage).
    pub embedding: Vec<Vec<u32>>,
    /// nccl-tests busbw factors of the job's collectives.
    pub busbw_factors: BTreeMap<String, f64>,
    /// Warm-up micro-batches per stage, recomputed from the sizes.
    pub warmup_recomputed: Vec<u32>,
}

/// The expert layout of a MoE job, rebuilt from the header (Megatron's expert rank
/// generator: expert TP, EP, expert DP, the same PP).
#[derive(Serialize, Debug)]
pub struct ExpertGroupsOut {
    /// EP size.
    pub ep: u32,
    /// Expert TP size.
    pub expert_tp: u32,
    /// Expert DP size.
    pub expert_dp: u32,
    /// Expert-parallel groups (the MoE all-to-alls).
    pub ep_groups: Vec<Vec<u32>>,
    /// Expert tensor-parallel groups.
    pub expert_tp_groups: Vec<Vec<u32>>,
    /// Expert data-parallel groups (expert gradients are reduced here).
    pub expert_dp_groups: Vec<Vec<u32>>,
}

/// Read the trace at `path` and report on it. `topology` maps nodes to ranks (default:
/// the `topology` of the trace header; a given one that cannot be loaded is an error).
pub fn inspect(path: &Path, topology: Option<&str>) -> Result<Report, TraceError> {
    let rd = TraceReader::open(path)?;
    let meta = rd.header().meta.clone();
    let topo = match topology {
        Some(spec) => Some(Topology::from_spec(spec)?),
        None => meta
            .get("topology")
            .and_then(|s| Topology::from_spec(s).ok()),
    };
    let world = meta_u32(&meta, "world").unwrap_or(0) as usize;
    let rank_of = ranks_of_nodes(topo.as_ref(), world);
    let rd = match &topo {
        Some(t) => rd.with_check(t),
        None => rd,
    };
    let mut t = Tally::default();
    for r in rd {
        t.add(&r?);
    }
    Ok(Report {
        file: path.display().to_string(),
        records: t.records,
        by_class_mode: t.by_class_mode,
        by_class: t.by_class,
        aggregations: t.aggs.len() as u64,
        compute_ns_in_records: t.compute_in_records,
        compute_ns_in_gaps: t.compute_in_gaps,
        per_rank: per_node_bytes(&t.per_node, &t.per_node_ops, &rank_of),
        warmup_per_stage: meta.get("warmup").cloned(),
        calibration_factor: meta.get("calibration_factor").cloned(),
        calibration_source: meta.get("calibration_source").cloned(),
        groups: groups_from_meta(&meta),
        vocabulary: vocabulary(),
        metadata: meta,
    })
}

/// Node → rank for the job's GPUs (the first `world` GPUs of the topology, all when 0).
fn ranks_of_nodes(topo: Option<&Topology>, world: usize) -> BTreeMap<u32, u32> {
    let Some(t) = topo else {
        return BTreeMap::new();
    };
    let n = if world > 0 { world } else { t.gpus.len() };
    t.gpus
        .iter()
        .take(n)
        .enumerate()
        .map(|(r, g)| (g.0, r as u32))
        .collect()
}

/// Running counts over the records.
#[derive(Default)]
struct Tally {
    records: u64,
    by_class_mode: BTreeMap<String, Counter>,
    by_class: BTreeMap<String, Counter>,
    /// Per node: [sent, received] bytes per traffic class ([`Class::TRAFFIC`] order).
    per_node: BTreeMap<u32, [[u64; Class::TRAFFIC.len()]; 2]>,
    /// Per sending node: the collectives it sent flows for, and its records outside any.
    per_node_ops: BTreeMap<u32, (BTreeSet<u64>, u64)>,
    compute_in_records: u64,
    compute_in_gaps: u64,
    aggs: BTreeSet<u64>,
}

impl Tally {
    fn add(&mut self, r: &FlowRecord) {
        self.records += 1;
        for e in [
            self.by_class_mode
                .entry(format!("{}/{}", r.class, r.mode))
                .or_default(),
            self.by_class.entry(r.class.to_string()).or_default(),
        ] {
            e.records += 1;
            e.bytes += r.bytes.0;
        }
        self.compute_in_gaps += r.gap.0;
        if r.mode == Mode::Compute {
            self.compute_in_records += r.dur.0;
        }
        if let Some(ag) = r.agg {
            self.aggs.insert(ag.id);
        }
        // Network records always carry a traffic class (the reader refuses `compute` on
        // them), so every class of `Class::TRAFFIC` has its column.
        if matches!(r.mode, Mode::Net | Mode::Ina) {
            if let Some(ci) = Class::TRAFFIC.iter().position(|c| *c == r.class) {
                self.per_node.entry(r.src.0).or_default()[0][ci] += r.bytes.0;
                self.per_node.entry(r.dst.0).or_default()[1][ci] += r.bytes.0;
            }
            let ops = self.per_node_ops.entry(r.src.0).or_default();
            match r.collective {
                Some(c) => {
                    ops.0.insert(c);
                }
                None => ops.1 += 1,
            }
        }
    }
}

/// Per-node bytes labelled by rank where the node is a GPU of the job; ranks in rank
/// order first, then other nodes by id.
fn per_node_bytes(
    per: &BTreeMap<u32, [[u64; Class::TRAFFIC.len()]; 2]>,
    ops: &BTreeMap<u32, (BTreeSet<u64>, u64)>,
    rank_of: &BTreeMap<u32, u32>,
) -> Vec<RankBytes> {
    let mut out: Vec<RankBytes> = per
        .iter()
        .map(|(n, v)| RankBytes {
            who: match rank_of.get(n) {
                Some(r) => format!("rank {r:>5}"),
                None => format!("node {n:>5}"),
            },
            node: *n,
            rank: rank_of.get(n).copied(),
            sent: Class::TRAFFIC
                .iter()
                .zip(v[0])
                .map(|(c, b)| (c.as_str().into(), b))
                .collect(),
            received: Class::TRAFFIC
                .iter()
                .zip(v[1])
                .map(|(c, b)| (c.as_str().into(), b))
                .collect(),
            collectives: ops.get(n).map_or(0, |o| o.0.len() as u64),
            p2p_sends: ops.get(n).map_or(0, |o| o.1),
        })
        .collect();
    out.sort_by_key(|r| (r.rank.is_none(), r.rank.unwrap_or(0), r.node));
    out
}

/// The groups, warm-ups and busbw factors of the job the header describes; `None` when
/// the header lacks the sizes or they are out of range.
fn groups_from_meta(meta: &BTreeMap<String, String>) -> Option<GroupsOut> {
    let (tp, pp, dp) = (
        meta_u32(meta, "tp")?,
        meta_u32(meta, "pp")?,
        meta_u32(meta, "dp")?,
    );
    let cp = meta_u32(meta, "cp").unwrap_or(1);
    let v = meta_u32(meta, "vpp").unwrap_or(1);
    let m = meta_u32(meta, "microbatches")?;
    let order =
        if meta.get("rank_order").map(String::as_str) == Some(RankOrder::TpCpEpPpDp.as_str()) {
            RankOrder::TpCpEpPpDp
        } else {
            RankOrder::TpCpEpDpPp
        };
    if [tp, pp, dp, cp].contains(&0) || (tp as u64 * pp as u64 * dp as u64 * cp as u64) > 1 << 20 {
        return None;
    }
    let (ep, etp) = (
        meta_u32(meta, "ep").unwrap_or(1),
        meta_u32(meta, "expert_tp").unwrap_or(tp),
    );
    let moe = meta.contains_key("num_experts");
    let world = tp * pp * dp * cp;
    if moe && (ep == 0 || etp == 0 || !world.is_multiple_of(ep * etp * pp)) {
        return None;
    }
    let g = Groups::with_experts(tp, cp, dp, pp, order, ExpertSizes { ep, etp });
    let conv = |x: &Vec<Vec<crate::units::Rank>>| -> Vec<Vec<u32>> {
        x.iter().map(|g| g.iter().map(|r| r.0).collect()).collect()
    };
    let experts = moe.then(|| ExpertGroupsOut {
        ep,
        expert_tp: etp,
        expert_dp: g.edp,
        ep_groups: conv(&g.ep_groups),
        expert_tp_groups: conv(&g.etp_groups),
        expert_dp_groups: conv(&g.edp_groups),
    });
    let bus = BTreeMap::from([
        (
            format!("tp all-reduce (n={tp})"),
            CollKind::AllReduce.busbw_factor(tp),
        ),
        (
            format!("tp all-gather / reduce-scatter (n={tp})"),
            CollKind::AllGather.busbw_factor(tp),
        ),
        (
            format!("dp all-reduce (n={})", dp * cp),
            CollKind::AllReduce.busbw_factor(dp * cp),
        ),
        (
            format!("dp reduce-scatter / all-gather (n={})", dp * cp),
            CollKind::ReduceScatter.busbw_factor(dp * cp),
        ),
    ]);
    Some(GroupsOut {
        rank_order: order.as_str().into(),
        tp: conv(&g.tp_groups),
        pp: conv(&g.pp_groups),
        dp: conv(&g.dp_groups),
        dp_cp: conv(&g.dp_cp_groups),
        cp: conv(&g.cp_groups),
        experts,
        embedding: conv(&g.emb_groups),
        busbw_factors: bus,
        warmup_recomputed: (0..pp).map(|s| schedule::warmup(pp, s, m, v)).collect(),
    })
}

fn meta_u32(m: &BTreeMap<String, String>, k: &str) -> Option<u32> {
    m.get(k).and_then(|v| v.parse().ok())
}

fn vocabulary() -> BTreeMap<String, String> {
    let mut v = BTreeMap::new();
    v.insert(
        "algbw".into(),
        "S / t: collective size over its duration (nccl-tests)".into(),
    );
    v.insert("busbw".into(), "algbw × 2(n−1)/n for all-reduce, × (n−1)/n for reduce-scatter and all-gather, × (n−1)/(n+1) NCCL's figure for in-network reduction".into());
    v.insert(
        "ring all-reduce bytes per rank".into(),
        "2S(n−1)/n sent and the same received, over 2(n−1) steps of S/n".into(),
    );
    v.insert(
        "INA bytes per worker".into(),
        "S up to the aggregating switch and S down from it".into(),
    );
    v.insert("nvlink record".into(), "one record per collective inside a server; dur = busbw_factor·S/nvlink_rate + steps·α; its bytes are S, not counted as network bytes".into());
    v.insert(
        "gap_ns".into(),
        "compute after the last dependency before the record starts".into(),
    );
    v
}
