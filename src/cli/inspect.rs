//! `ina3d inspect`: what a trace contains, in the vocabulary of Megatron and nccl-tests
//! (the library's [`ina3d::trace::inspect`], printed as text or JSON).

use anyhow::Context;
use ina3d::trace::inspect::{inspect, Report};
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

/// Run `ina3d inspect`.
pub fn run(a: Args) -> anyhow::Result<()> {
    let report = inspect(&a.trace, a.topology.as_deref())
        .with_context(|| format!("inspecting `{}`", a.trace.display()))?;
    let mut out = String::new();
    if a.json {
        out = serde_json::to_string_pretty(&report)?;
        out.push('\n');
    } else {
        print_text(&mut out, &report);
    }
    use std::io::Write;
    std::io::stdout()
        .lock()
        .write_all(out.as_bytes())
        .context("writing to stdout")
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

/// Network bytes per rank and class: tp, pp, dp and emb always; cp and ep when present.
fn print_per_rank(out: &mut String, r: &Report) {
    // tp, pp, dp and emb always; cp and ep when the trace has them.
    let classes: Vec<&str> = ["tp", "pp", "dp", "emb", "cp", "ep"]
        .into_iter()
        .filter(|c| {
            ["tp", "pp", "dp", "emb"].contains(c)
                || r.per_rank
                    .iter()
                    .any(|b| b.sent.get(*c).is_some_and(|v| *v > 0))
        })
        .collect();
    let mut head = format!("  {:<12}", "");
    for c in &classes {
        head.push_str(&format!(
            " {:>16} {:>16}",
            format!("{c} sent"),
            format!("{c} recv")
        ));
    }
    head.push_str(&format!(" {:>12} {:>10}", "collectives", "p2p sends"));
    outln!(out, "{head}");
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
        let mut row = format!("  {who:<12}");
        for c in &classes {
            row.push_str(&format!(" {:>16} {:>16}", g(&b.sent, c), g(&b.received, c)));
        }
        row.push_str(&format!(" {:>12} {:>10}", b.collectives, b.p2p_sends));
        outln!(out, "{row}");
    }
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
        "compute_model",
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
            show_groups(out, "CP", &g.cp);
            show_groups(out, "DP×CP", &g.dp_cp);
        }
        show_groups(out, "embedding", &g.embedding);
        if let Some(e) = &g.experts {
            outln!(
                out,
                "  experts: EP {} × expert TP {} × expert DP {} (Megatron's expert rank generator)",
                e.ep,
                e.expert_tp,
                e.expert_dp
            );
            show_groups(out, "EP", &e.ep_groups);
            show_groups(out, "expert TP", &e.expert_tp_groups);
            show_groups(out, "expert DP", &e.expert_dp_groups);
        }
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
    print_per_rank(out, r);
    outln!(out, "\nvocabulary:");
    for (k, v) in &r.vocabulary {
        outln!(out, "  {k}: {v}");
    }
}
