//! `ina3d inspect`: what a trace contains, in the vocabulary of Megatron and nccl-tests.

use anyhow::Context;
use ina3d::record::{Class, Mode};
use ina3d::schedule::{self, CollKind, Groups, RankOrder};
use ina3d::topology::Topology;
use ina3d::trace::TraceReader;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// `writeln!` into a String (cannot fail).
macro_rules! outln {
    ($o:expr, $($t:tt)*) => {{
        use std::fmt::Write as _;
        let _ = writeln!($o, $($t)*);
    }};
}

/// Arguments of `ina3d inspect`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Trace file (.csv or .csv.gz).
    pub trace: PathBuf,
    /// Machine-readable JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Topology to map nodes to ranks (default: the `topology` recorded in the trace header).
    #[arg(long)]
    pub topology: Option<String>,
}

#[derive(Serialize, Default)]
struct Counter {
    records: u64,
    bytes: u64,
}

#[derive(Serialize, Default, Clone)]
struct RankBytes {
    /// `rank N` for GPUs of the job, `node N` for switches (INA, Rina ring workers) and unmapped nodes.
    who: String,
    /// Topology node id.
    node: u32,
    /// Megatron rank, when the node is one of the job's GPUs.
    rank: Option<u32>,
    sent: BTreeMap<String, u64>,
    received: BTreeMap<String, u64>,
}

#[derive(Serialize)]
struct Report {
    file: String,
    metadata: BTreeMap<String, String>,
    records: u64,
    by_class_mode: BTreeMap<String, Counter>,
    by_class: BTreeMap<String, Counter>,
    aggregations: u64,
    compute_ns_in_records: u64,
    compute_ns_in_gaps: u64,
    /// Network bytes (net + ina records) per rank, by class; keyed `rank N` (or `node N` for switches / unmapped nodes).
    per_rank: Vec<RankBytes>,
    groups: Option<GroupsOut>,
    warmup_per_stage: Option<String>,
    calibration_factor: Option<String>,
    calibration_source: Option<String>,
    vocabulary: BTreeMap<String, String>,
}

#[derive(Serialize)]
struct GroupsOut {
    rank_order: String,
    tp: Vec<Vec<u32>>,
    pp: Vec<Vec<u32>>,
    dp: Vec<Vec<u32>>,
    dp_cp: Vec<Vec<u32>>,
    embedding: Vec<Vec<u32>>,
    busbw_factors: BTreeMap<String, f64>,
    warmup_recomputed: Vec<u32>,
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

/// Run `ina3d inspect`.
pub fn run(a: Args) -> anyhow::Result<()> {
    let rd = TraceReader::open(&a.trace)?;
    let meta = rd.header().meta.clone();
    let topo_spec = a.topology.clone().or_else(|| meta.get("topology").cloned());
    let topo = topo_spec
        .as_deref()
        .and_then(|s| Topology::from_spec(s).ok());
    if a.topology.is_some() && topo.is_none() {
        anyhow::bail!(
            "--topology `{}` cannot be loaded",
            a.topology.as_deref().unwrap_or_default()
        );
    }
    let world = meta_u32(&meta, "world").unwrap_or(0) as usize;
    let mut rank_of: BTreeMap<u32, u32> = BTreeMap::new();
    if let Some(t) = &topo {
        for (r, n) in t
            .gpus
            .iter()
            .enumerate()
            .take(if world > 0 { world } else { t.gpus.len() })
        {
            rank_of.insert(n.0, r as u32);
        }
    }
    let label = |n: u32| match rank_of.get(&n) {
        Some(r) => format!("rank {r:>5}"),
        None => format!("node {n:>5}"),
    };
    let mut by_cm: BTreeMap<String, Counter> = BTreeMap::new();
    let mut by_class: BTreeMap<String, Counter> = BTreeMap::new();
    let mut per: BTreeMap<u32, [[u64; 4]; 2]> = BTreeMap::new();
    let (mut records, mut comp_rec, mut comp_gap) = (0u64, 0u64, 0u64);
    let mut aggs = std::collections::BTreeSet::new();
    let rd = match &topo {
        Some(t) => rd.with_check(t),
        None => rd,
    };
    for r in rd {
        let r = r.with_context(|| format!("reading `{}`", a.trace.display()))?;
        records += 1;
        let e = by_cm.entry(format!("{}/{}", r.class, r.mode)).or_default();
        e.records += 1;
        e.bytes += r.bytes.0;
        let e = by_class.entry(r.class.to_string()).or_default();
        e.records += 1;
        e.bytes += r.bytes.0;
        comp_gap += r.gap.0;
        if r.mode == Mode::Compute {
            comp_rec += r.dur.0;
        }
        if let Some(ag) = r.agg {
            aggs.insert(ag.id);
        }
        if matches!(r.mode, Mode::Net | Mode::Ina) {
            let ci = Class::TRAFFIC
                .iter()
                .position(|c| *c == r.class)
                .unwrap_or(0);
            per.entry(r.src.0).or_default()[0][ci] += r.bytes.0;
            per.entry(r.dst.0).or_default()[1][ci] += r.bytes.0;
        }
    }
    let mut per_rank = Vec::new();
    for (n, v) in &per {
        let mut rb = RankBytes {
            who: label(*n),
            node: *n,
            rank: rank_of.get(n).copied(),
            ..Default::default()
        };
        for (i, c) in Class::TRAFFIC.iter().enumerate() {
            rb.sent.insert(c.as_str().into(), v[0][i]);
            rb.received.insert(c.as_str().into(), v[1][i]);
        }
        per_rank.push(rb);
    }
    // Ranks in rank order first, then other nodes by id.
    per_rank.sort_by_key(|r| (r.rank.is_none(), r.rank.unwrap_or(0), r.node));
    let groups = (|| {
        let (tp, pp, dp) = (
            meta_u32(&meta, "tp")?,
            meta_u32(&meta, "pp")?,
            meta_u32(&meta, "dp")?,
        );
        let cp = meta_u32(&meta, "cp").unwrap_or(1);
        let v = meta_u32(&meta, "vpp").unwrap_or(1);
        let m = meta_u32(&meta, "microbatches")?;
        let order =
            if meta.get("rank_order").map(String::as_str) == Some(RankOrder::TpCpEpPpDp.as_str()) {
                RankOrder::TpCpEpPpDp
            } else {
                RankOrder::TpCpEpDpPp
            };
        if tp == 0
            || pp == 0
            || dp == 0
            || cp == 0
            || (tp as u64 * pp as u64 * dp as u64 * cp as u64) > 1 << 20
        {
            return None;
        }
        let g = Groups::new(tp, cp, dp, pp, order);
        let conv = |x: &Vec<Vec<ina3d::units::Rank>>| {
            x.iter().map(|g| g.iter().map(|r| r.0).collect()).collect()
        };
        let mut bus = BTreeMap::new();
        bus.insert(
            format!("tp all-reduce (n={tp})"),
            CollKind::AllReduce.busbw_factor(tp),
        );
        bus.insert(
            format!("tp all-gather / reduce-scatter (n={tp})"),
            CollKind::AllGather.busbw_factor(tp),
        );
        bus.insert(
            format!("dp all-reduce (n={})", dp * cp),
            CollKind::AllReduce.busbw_factor(dp * cp),
        );
        bus.insert(
            format!("dp reduce-scatter / all-gather (n={})", dp * cp),
            CollKind::ReduceScatter.busbw_factor(dp * cp),
        );
        Some(GroupsOut {
            rank_order: order.as_str().into(),
            tp: conv(&g.tp_groups),
            pp: conv(&g.pp_groups),
            dp: conv(&g.dp_groups),
            dp_cp: conv(&g.dp_cp_groups),
            embedding: conv(&g.emb_groups),
            busbw_factors: bus,
            warmup_recomputed: (0..pp).map(|s| schedule::warmup(pp, s, m, v)).collect(),
        })
    })();
    let report = Report {
        file: a.trace.display().to_string(),
        records,
        by_class_mode: by_cm,
        by_class,
        aggregations: aggs.len() as u64,
        compute_ns_in_records: comp_rec,
        compute_ns_in_gaps: comp_gap,
        per_rank,
        warmup_per_stage: meta.get("warmup").cloned(),
        calibration_factor: meta.get("calibration_factor").cloned(),
        calibration_source: meta.get("calibration_source").cloned(),
        groups,
        vocabulary: vocabulary(),
        metadata: meta,
    };
    let mut out = String::new();
    if a.json {
        out = serde_json::to_string_pretty(&report)?;
        out.push('\n');
    } else {
        print_text(&mut out, &report);
    }
    use std::io::Write;
    match std::io::stdout().lock().write_all(out.as_bytes()) {
        // A closed pipe (`| head`) is the reader's choice, not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("writing to stdout"),
    }
}

fn show_groups(out: &mut String, name: &str, gs: &[Vec<u32>]) {
    let shown: Vec<String> = gs.iter().take(8).map(|g| format!("{g:?}")).collect();
    let more = if gs.len() > 8 {
        format!(" … ({} groups)", gs.len())
    } else {
        String::new()
    };
    outln!(out, "  {name:<10} {}{more}", shown.join(" "));
}

fn print_text(out: &mut String, r: &Report) {
    outln!(
        out,
        "{}: {} records, {} INA aggregations",
        r.file,
        r.records,
        r.aggregations
    );
    for k in [
        "topology",
        "collective",
        "ina",
        "ina_switches",
        "ina_policy",
        "ina_classes",
        "ina_slots",
        "ina_payload_bytes",
        "ina_window",
        "seed",
        "gpu",
        "mfu",
    ] {
        if let Some(v) = r.metadata.get(k) {
            outln!(out, "  {k:<18} {v}");
        }
    }
    outln!(
        out,
        "  calibration        factor {} ({})",
        r.calibration_factor.as_deref().unwrap_or("?"),
        r.calibration_source.as_deref().unwrap_or("?")
    );
    outln!(out, "\nrecords and payload bytes by class/mode:");
    for (k, c) in &r.by_class_mode {
        outln!(out, "  {k:<16} {:>12} records {:>22} B", c.records, c.bytes);
    }
    outln!(
        out,
        "  compute: {} ns in compute records, {} ns in gaps (summed over all ranks)",
        r.compute_ns_in_records,
        r.compute_ns_in_gaps
    );
    if let Some(g) = &r.groups {
        outln!(out, "\ngroups ({}):", g.rank_order);
        show_groups(out, "TP", &g.tp);
        show_groups(out, "PP", &g.pp);
        show_groups(out, "DP", &g.dp);
        if g.dp_cp != g.dp {
            show_groups(out, "DP×CP", &g.dp_cp);
        }
        show_groups(out, "embedding", &g.embedding);
        outln!(
            out,
            "  warm-up per stage  {} (recomputed: {:?})",
            r.warmup_per_stage.as_deref().unwrap_or("?"),
            g.warmup_recomputed
        );
        outln!(out, "  busbw factors:");
        for (k, f) in &g.busbw_factors {
            outln!(out, "    {k:<40} {f:.4}");
        }
    }
    outln!(
        out,
        "\nnetwork bytes per rank (net + ina records), sent / received:"
    );
    outln!(
        out,
        "  {:<12} {:>16} {:>16} {:>16} {:>16} {:>16} {:>16} {:>16} {:>16}",
        "",
        "tp sent",
        "tp recv",
        "pp sent",
        "pp recv",
        "dp sent",
        "dp recv",
        "emb sent",
        "emb recv"
    );
    let n = r.per_rank.len();
    for (i, b) in r.per_rank.iter().enumerate() {
        let who = &b.who;
        if n > 40 && i == 32 {
            outln!(out, "  … {} more rows (use --json for all)", n - 32);
        }
        if n > 40 && i >= 32 {
            continue;
        }
        let g = |m: &BTreeMap<String, u64>, k: &str| m.get(k).copied().unwrap_or(0);
        outln!(
            out,
            "  {:<12} {:>16} {:>16} {:>16} {:>16} {:>16} {:>16} {:>16} {:>16}",
            who,
            g(&b.sent, "tp"),
            g(&b.received, "tp"),
            g(&b.sent, "pp"),
            g(&b.received, "pp"),
            g(&b.sent, "dp"),
            g(&b.received, "dp"),
            g(&b.sent, "emb"),
            g(&b.received, "emb")
        );
    }
    outln!(out, "\nvocabulary:");
    for (k, v) in &r.vocabulary {
        outln!(out, "  {k}: {v}");
    }
}
