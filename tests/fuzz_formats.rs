//! Structure-aware fuzzing of every file reader in `ina3d::formats`.
//!
//! Each case builds a *valid* file with the format's own writer from random data, then
//! mutates it the way real and crafted files go wrong: a token replaced by a huge, negative,
//! empty or foreign value, a line dropped or doubled, the text cut anywhere, CRLF endings.
//! The reader must never panic; an unmutated file must read back as what was written; an
//! error must name the file and, when it names a line, a line the file has. The number of
//! cases is proptest's (`PROPTEST_CASES`, default 256 per reader), so CI runs a fixed budget.

use ina3d::fct::bench::BenchRow;
use ina3d::fct::{FctRow, Summary};
use ina3d::formats::links_csv::ChannelStat;
use ina3d::formats::plan_json::{self, Decision, PlanFile};
use ina3d::formats::switches_csv::SlotSample;
use ina3d::formats::topology_txt::{self, LinkRow, TopologyFile};
use ina3d::formats::validate_csv::{self, ValidateRow};
use ina3d::formats::{
    bench_csv, fct_csv, flow_txt, glue_trace_txt, hpcc_fct, links_csv, params_txt,
    reservations_txt, routes_txt, simai_end_to_end, summary_csv, switches_csv, trace_csv,
    FormatError,
};
use ina3d::record::{AggDir, AggGroup, AggTag, Class, FlowRecord, Mode};
use ina3d::units::{BitsPerSec, Bytes, FlowId, LinkId, Nanos, NodeId};
use proptest::prelude::*;
use std::path::Path;

/// What a crafted or broken file does to a valid one.
#[derive(Clone, Debug)]
enum Mutation {
    None,
    /// Replace the k-th whitespace/comma-separated token with this text.
    Token(usize, &'static str),
    DropLine(usize),
    DoubleLine(usize),
    Truncate(usize),
    Crlf,
}

/// Values that have broken parsers before: beyond u32/u64, negative, empty, not a number;
/// and the crafted ones that wrap sums downstream (u64::MAX, just past 2^50 and 2^53).
/// `tests/crafted.rs` follows such values on into the simulation.
const NASTY: [&str; 13] = [
    "18446744073709551615",
    "1125899906842625",
    "9007199254740993",
    "18446744073709551616",
    "4294967296",
    "99999999999999999999999",
    "-1",
    "",
    "x",
    "1e309",
    "NaN",
    "0",
    "🦀",
];

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        2 => Just(Mutation::None),
        4 => (0usize..64, proptest::sample::select(&NASTY[..])).prop_map(|(k, v)| Mutation::Token(k, v)),
        1 => (0usize..16).prop_map(Mutation::DropLine),
        1 => (0usize..16).prop_map(Mutation::DoubleLine),
        1 => (0usize..4096).prop_map(Mutation::Truncate),
        1 => Just(Mutation::Crlf),
    ]
}

fn apply(text: &str, m: &Mutation) -> String {
    match m {
        Mutation::None => text.to_string(),
        Mutation::Token(k, v) => {
            let tokens: Vec<(usize, usize)> = token_spans(text);
            match tokens.get(k % tokens.len().max(1)) {
                Some(&(a, b)) => format!("{}{}{}", &text[..a], v, &text[b..]),
                None => text.to_string(),
            }
        }
        Mutation::DropLine(k) | Mutation::DoubleLine(k) => {
            let mut lines: Vec<&str> = text.lines().collect();
            if lines.is_empty() {
                return text.to_string();
            }
            let i = k % lines.len();
            if matches!(m, Mutation::DropLine(_)) {
                lines.remove(i);
            } else {
                lines.insert(i, lines[i]);
            }
            lines.join("\n") + "\n"
        }
        Mutation::Truncate(k) => {
            let mut cut = k % (text.len() + 1);
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text[..cut].to_string()
        }
        Mutation::Crlf => text.replace('\n', "\r\n"),
    }
}

/// Byte spans of the tokens separated by whitespace, `,`, `;` or `:`.
fn token_spans(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        let sep = c.is_whitespace() || matches!(c, ',' | ';' | ':');
        match (sep, start) {
            (true, Some(s)) => {
                out.push((s, i));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push((s, text.len()));
    }
    out
}

/// An error names the file and, when it names a line, one the text has (or one past it).
fn check_error(e: &FormatError, path: &Path, text: &str) -> Result<(), TestCaseError> {
    let msg = e.to_string();
    prop_assert!(msg.contains(&path.display().to_string()), "{msg}");
    if let Some(line) = e.line() {
        let lines = text.lines().count() as u64 + 1;
        prop_assert!(line <= lines, "line {line} of {lines}: {msg}");
    }
    Ok(())
}

/// Write `text` to a file named `name` and return its path (the CSV readers read files).
fn file(dir: &tempfile::TempDir, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p
}

// ------------------------------------------------------------------ generators

fn node() -> impl Strategy<Value = NodeId> {
    (0u32..64).prop_map(NodeId)
}

fn topology_file() -> impl Strategy<Value = TopologyFile> {
    (
        2u32..12,
        proptest::collection::vec((0u32..12, 0u32..12, 0usize..4, 1u64..5000), 1..12),
        any::<bool>(),
    )
        .prop_map(|(n, links, simai)| {
            let rates = [25u64, 100, 400, 2400];
            let nodes = n + 12;
            TopologyFile {
                flavor: if simai {
                    topology_txt::Flavor::Simai {
                        gpus_per_server: 2,
                        gpu_type: "H100".into(),
                    }
                } else {
                    topology_txt::Flavor::Hpcc
                },
                nodes,
                nvswitches: if simai {
                    vec![NodeId(nodes - 2)]
                } else {
                    vec![]
                },
                switches: vec![NodeId(nodes - 1)],
                links: links
                    .into_iter()
                    .filter(|(a, b, ..)| a != b)
                    .map(|(a, b, r, d)| LinkRow {
                        a: NodeId(a),
                        b: NodeId(b),
                        rate: BitsPerSec::gbps(rates[r]),
                        delay: Nanos(d),
                        error_rate: 0.0,
                    })
                    .collect(),
            }
        })
        .prop_filter("at least one link", |t| !t.links.is_empty())
}

fn fct_row() -> impl Strategy<Value = FctRow> {
    (
        0u64..1000,
        node(),
        node(),
        0usize..4,
        0usize..5,
        0u64..1 << 40,
        0u64..1 << 40,
        0u64..1 << 30,
    )
        .prop_map(|(id, s, d, m, c, size, start, dur)| FctRow {
            flow_id: id,
            src: s.0,
            dst: d.0,
            mode: [Mode::Net, Mode::Ina, Mode::NvLink, Mode::Compute][m],
            class: Class::ALL[c],
            size_bytes: size,
            start_ns: start,
            end_ns: start + dur,
            fct_ns: dur,
            standalone_fct_ns: dur / 2,
        })
}

/// Glue trace records: a valid DAG (deps on earlier ids), aggregation tags on ina edges,
/// NCCL channels on net records.
fn glue_records() -> impl Strategy<Value = (Vec<FlowRecord>, Vec<Nanos>)> {
    proptest::collection::vec(
        (
            node(),
            node(),
            0u64..1 << 34,
            any::<bool>(),
            proptest::collection::vec(0u64..64, 0..4),
            0u64..1 << 20,
            prop_oneof![Just(0u32), 1u32..8, Just(u32::MAX)],
        ),
        1..20,
    )
    .prop_map(|spec| {
        let mut recs = Vec::new();
        let mut sa = Vec::new();
        for (i, (s, d, bytes, ina, deps, gap, channel)) in spec.into_iter().enumerate() {
            recs.push(FlowRecord {
                id: FlowId(i as u64),
                src: s,
                dst: d,
                bytes: Bytes(bytes),
                deps: deps
                    .into_iter()
                    .filter(|&x| (x as usize) < i)
                    .map(FlowId)
                    .collect(),
                gap: Nanos(gap),
                mode: if ina { Mode::Ina } else { Mode::Net },
                class: Class::Dp,
                agg: ina.then_some(AggTag {
                    id: i as u64 / 3,
                    switch: d,
                    fanin: 2,
                    dir: AggDir::Up,
                    // the group rides on the id's parity (trace.txt v3 carries it)
                    group: AggGroup::of_expert(i / 3 % 2 == 1),
                }),
                channel: if ina { 0 } else { channel },
                ..Default::default()
            });
            sa.push(Nanos(bytes / 12));
        }
        (recs, sa)
    })
}

fn routes() -> impl Strategy<Value = routes_txt::Routes> {
    proptest::collection::vec(
        (
            node(),
            node(),
            prop_oneof![Just(0u32), 1u32..4, Just(u32::MAX)],
            proptest::collection::vec((node(), 0u32..200), 0..5),
        ),
        0..10,
    )
    .prop_map(|spec| {
        let mut r = routes_txt::Routes::default();
        for (s, d, channel, hops) in spec {
            if s == d {
                continue;
            }
            let mut hops: Vec<(NodeId, LinkId)> =
                hops.into_iter().map(|(n, l)| (n, LinkId(l))).collect();
            hops.push((d, LinkId(7)));
            r.addrs.push((s, d));
            // one pair on two channels: distinct connections, not a repeat
            r.paths.insert((s, d, channel), hops.clone());
            r.paths.insert((s, d, channel ^ 1), hops);
        }
        r
    })
}

/// A shape-valid plan: groups of distinct (class, lowest rank), ascending members, trees
/// whose last edge ends at the root.
fn plan_file() -> impl Strategy<Value = PlanFile> {
    let group = (
        0u32..3,
        proptest::collection::btree_set(0u32..4096, 1..6),
        0u8..3,
        proptest::collection::vec((node(), node()), 0..5),
        node(),
        0u32..65536,
    );
    (
        proptest::collection::vec(group, 0..6),
        0.0f64..1e12,
        0u32..1 << 20,
    )
        .prop_map(|(gs, t, slots)| {
            let mut seen = std::collections::BTreeSet::new();
            let groups = gs
                .into_iter()
                .filter_map(|(c, members, d, mut edges, root, k)| {
                    let class = [Class::Tp, Class::Dp, Class::Emb][c as usize];
                    let members: Vec<ina3d::units::Rank> =
                        members.into_iter().map(ina3d::units::Rank).collect();
                    if !seen.insert((class, members[0])) {
                        return None;
                    }
                    edges.push((NodeId(members[0].0), root));
                    let decision = match d {
                        0 => Decision::Host,
                        1 => Decision::Tree {
                            form: "hierarchical".into(),
                            root,
                            edges,
                        },
                        _ => Decision::Rina { tors: vec![root] },
                    };
                    Some(plan_json::PlannedGroup {
                        class,
                        stage: (c != 2).then_some(c),
                        members,
                        // a DP group may be a MoE model's expert-DP group (written only
                        // when true: both shapes round-trip)
                        expert: class == Class::Dp && k % 2 == 1,
                        decision,
                        slots: k,
                        reservations: vec![(root, k)],
                        collectives: k as u64,
                        collective_ns: t,
                        host_collective_ns: t / 2.0,
                        exposed_ns: t / 3.0,
                        host_algorithm: None,
                        active: plan_json::Activity {
                            from_ns: t / 4.0,
                            until_ns: (c != 0).then_some(t),
                        },
                    })
                })
                .collect();
            PlanFile {
                schema: plan_json::PLAN_SCHEMA,
                job: [
                    ("seed".to_string(), "0".to_string()),
                    ("topology".to_string(), "fat-tree:k=4".to_string()),
                ]
                .into_iter()
                .collect(),
                settings: plan_json::PlanSettings {
                    slots,
                    tree_quota: Some(1),
                    slot_levels: vec![1.0, 0.5],
                    objective: "iteration".into(),
                    classes: vec![Class::Dp],
                    required: vec![],
                },
                solver: plan_json::SolverReport {
                    requested: "auto".into(),
                    used: "ilp".into(),
                    status: "optimal".into(),
                    objective_ns: t,
                    bound_ns: t,
                    gap: 0.0,
                    solve_time_s: 0.0,
                    time_limit_s: 10.0,
                    variables: 7,
                    constraints: 9,
                    note: None,
                    hit_time_limit: false,
                    exact_gain: None,
                },
                prediction: plan_json::Prediction {
                    iteration_ns: t,
                    exposed_ns: t / 2.0,
                    host_iteration_ns: t * 1.5,
                },
                groups,
                verification: None,
                fixed_policy: None,
                candidates: vec![],
            }
        })
}

fn trace_records() -> impl Strategy<Value = Vec<FlowRecord>> {
    glue_records().prop_map(|(mut recs, _)| {
        for r in &mut recs {
            if r.src == r.dst {
                r.dst = NodeId(r.src.0 + 1);
                if let Some(a) = &mut r.agg {
                    a.switch = r.dst;
                }
            }
            r.iteration = 0;
            r.layer = Some(r.id.0 as u32);
            // trace files carry an aggregation's group (the glue's trace does not)
            if let Some(a) = &mut r.agg {
                if a.id % 2 == 1 {
                    a.group = AggGroup::Expert;
                }
            }
        }
        recs
    })
}

/// JSON a crafted plan puts where a value belongs: beyond u32/u64, negative, out of f64's
/// range, fractional, the wrong type, huge lists of huge ids.
const CRAFTED_JSON: [&str; 16] = [
    "18446744073709551616",
    "4294967296",
    "-1",
    "1e309",
    "-1e309",
    "1.5",
    "-0.0",
    "null",
    "\"\"",
    "\"🦀\"",
    "[]",
    "{}",
    "true",
    "[[4294967295, 4294967295]]",
    "[4294967295]",
    "{\"kind\": \"tree\"}",
];

/// JSON pointers of every value inside `v` (objects' members and arrays' elements).
fn json_pointers(v: &serde_json::Value, at: String, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                let p = format!("{at}/{k}");
                out.push(p.clone());
                json_pointers(x, p, out);
            }
        }
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                let p = format!("{at}/{i}");
                out.push(p.clone());
                json_pointers(x, p, out);
            }
        }
        _ => {}
    }
}

/// `plan` as JSON with the value at its `k`-th pointer replaced by the raw text `raw`.
fn craft_plan_json(plan: &PlanFile, k: usize, raw: &str) -> String {
    let mut v = serde_json::to_value(plan).unwrap();
    let mut ptrs = Vec::new();
    json_pointers(&v, String::new(), &mut ptrs);
    let marker = "@@crafted@@";
    if let Some(slot) = ptrs
        .get(k % ptrs.len().max(1))
        .and_then(|p| v.pointer_mut(p))
    {
        *slot = serde_json::Value::String(marker.into());
    }
    serde_json::to_string_pretty(&v)
        .unwrap()
        .replace(&format!("\"{marker}\""), raw)
}

// ------------------------------------------------------------------ properties

proptest! {
    #[test]
    fn topology_txt(t in topology_file(), m in mutation()) {
        let text = apply(&topology_txt::to_string(&t), &m);
        let p = Path::new("fuzz/topology.txt");
        match topology_txt::parse(p, &text) {
            Ok((back, _)) => if matches!(m, Mutation::None) { prop_assert_eq!(back, t) },
            Err(e) => { prop_assert!(!matches!(m, Mutation::None), "{e}"); check_error(&e, p, &text)? }
        }
    }

    #[test]
    fn flow_txt(rows in proptest::collection::vec((node(), node(), 0u64..1 << 32, 0u64..1 << 40), 0..12), parsimon in any::<bool>(), m in mutation()) {
        let flows: Vec<flow_txt::FlowLine> = rows.iter().enumerate().map(|(k, &(s, d, size, t))| flow_txt::FlowLine {
            id: parsimon.then_some(k as u64), src: s, dst: d, pg: 3, dport: 100, size: Bytes(size), start: Nanos(t),
        }).collect();
        let flavor = if parsimon { flow_txt::Flavor::Parsimon } else { flow_txt::Flavor::Hpcc };
        let text = apply(&flow_txt::to_string(&flows, flavor), &m);
        let p = Path::new("fuzz/flow.txt");
        match flow_txt::parse(p, &text) {
            Ok((back, w)) => if matches!(m, Mutation::None) { prop_assert!(w.is_empty()); prop_assert_eq!(back, flows) },
            Err(e) => { prop_assert!(!matches!(m, Mutation::None), "{e}"); check_error(&e, p, &text)? }
        }
    }

    #[test]
    fn hpcc_fct_txt(rows in proptest::collection::vec(fct_row(), 0..12), parsimon in any::<bool>(), m in mutation()) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("fct.txt");
        let flavor = if parsimon { hpcc_fct::Flavor::Parsimon } else { hpcc_fct::Flavor::Hpcc };
        hpcc_fct::write(&p, &rows, flavor).unwrap();
        let text = apply(&std::fs::read_to_string(&p).unwrap(), &m);
        let (back, warnings) = hpcc_fct::parse(&p, &text);
        if matches!(m, Mutation::None) {
            prop_assert!(warnings.is_empty());
            let net: Vec<&FctRow> = rows.iter().filter(|r| matches!(r.mode, Mode::Net | Mode::Ina)).collect();
            prop_assert_eq!(back.len(), net.len());
            for (b, r) in back.iter().zip(net) {
                prop_assert_eq!((b.fct_ns, b.size, b.start_ns), (r.fct_ns, r.size_bytes, r.start_ns));
            }
        }
        for w in warnings { prop_assert!(w.line <= text.lines().count() as u64 + 1); }
    }

    #[test]
    fn fct_csv(rows in proptest::collection::vec(fct_row(), 1..12), m in mutation()) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("fct.csv");
        fct_csv::write(&p, &rows).unwrap();
        let text = apply(&std::fs::read_to_string(&p).unwrap(), &m);
        let p = file(&dir, "fct.csv", &text);
        match fct_csv::read(&p) {
            Ok(back) => if matches!(m, Mutation::None) { prop_assert_eq!(back, rows) },
            Err(e) => { prop_assert!(!matches!(m, Mutation::None), "{e}"); check_error(&e, &p, &text)? }
        }
    }

    #[test]
    fn summary_csv(n in proptest::collection::vec(0u64..u64::MAX, 20), m in mutation()) {
        let s = Summary {
            backend: "replay".into(), trace: "t.csv.gz".into(), records: n[0], iteration_time_ns: n[1],
            compute_ns: n[2], bubble_ns: n[3], exposed_tp_ns: n[4], exposed_pp_ns: n[5], exposed_dp_ns: n[6],
            exposed_emb_ns: n[7], critical_path_compute_ns: n[8], tp_bytes: n[9], pp_bytes: n[10],
            dp_bytes: n[11], emb_bytes: n[12], switch_bytes: n[13], ina_slot_peak: n[14], wall_time_ns: n[15],
            exposed_cp_ns: n[16], exposed_ep_ns: n[17], cp_bytes: n[18], ep_bytes: n[19],
        };
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("summary.csv");
        summary_csv::write(&p, &s).unwrap();
        let text = apply(&std::fs::read_to_string(&p).unwrap(), &m);
        let p = file(&dir, "summary.csv", &text);
        match summary_csv::read(&p) {
            Ok(back) => if matches!(m, Mutation::None) { prop_assert_eq!(back, s) },
            Err(e) => { prop_assert!(!matches!(m, Mutation::None), "{e}"); check_error(&e, &p, &text)? }
        }
    }

    #[test]
    fn links_and_switches_csv(ch in proptest::collection::vec((0u32..100, node(), node(), 0u64..u64::MAX / 2), 0..10), m in mutation()) {
        let dir = tempfile::tempdir().unwrap();
        let channels: Vec<ChannelStat> = ch.iter().map(|&(l, a, b, bytes)| ChannelStat {
            link: LinkId(l), from: a, to: b, rate_bps: 100_000_000_000, bytes, utilisation: 0.5,
        }).collect();
        let p = dir.path().join("links.csv");
        links_csv::write(&p, &channels).unwrap();
        let text = apply(&std::fs::read_to_string(&p).unwrap(), &m);
        let p = file(&dir, "links.csv", &text);
        match links_csv::read(&p) {
            Ok(back) => if matches!(m, Mutation::None) { prop_assert_eq!(back, channels) },
            Err(e) => check_error(&e, &p, &text)?,
        }
        let samples: Vec<SlotSample> = ch.iter().map(|&(l, a, _, t)| SlotSample { time_ns: t, switch: a, slots_in_use: l }).collect();
        let p = dir.path().join("switches.csv");
        switches_csv::write(&p, &samples).unwrap();
        let text = apply(&std::fs::read_to_string(&p).unwrap(), &m);
        let p = file(&dir, "switches.csv", &text);
        match switches_csv::read(&p) {
            Ok(back) => if matches!(m, Mutation::None) { prop_assert_eq!(back, samples) },
            Err(e) => check_error(&e, &p, &text)?,
        }
    }

    #[test]
    fn glue_trace_txt((recs, sa) in glue_records(), m in mutation()) {
        let text = apply(&glue_trace_txt::to_string(&recs, &sa), &m);
        let p = Path::new("fuzz/trace.txt");
        match glue_trace_txt::parse(p, &text) {
            Ok((back, bsa)) => if matches!(m, Mutation::None) { prop_assert_eq!(back, recs); prop_assert_eq!(bsa, sa) },
            Err(e) => { prop_assert!(!matches!(m, Mutation::None), "{e}"); check_error(&e, p, &text)? }
        }
    }

    #[test]
    fn routes_txt(r in routes(), m in mutation()) {
        let text = apply(&routes_txt::to_string(&r), &m);
        let p = Path::new("fuzz/routes.txt");
        match routes_txt::parse(p, &text) {
            Ok(back) => if matches!(m, Mutation::None) { prop_assert_eq!(back, r) },
            Err(e) => { prop_assert!(!matches!(m, Mutation::None), "{e}"); check_error(&e, p, &text)? }
        }
    }

    #[test]
    fn trace_csv(recs in trace_records(), m in mutation()) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.csv");
        let mut h = trace_csv::TraceHeader::new();
        h.set("topology", "fat-tree:k=4");
        trace_csv::write(&p, &h, &recs).unwrap();
        let text = apply(&std::fs::read_to_string(&p).unwrap(), &m);
        match trace_csv::read_str(&text, "fuzz/t.csv") {
            Ok(back) => if matches!(m, Mutation::None) { prop_assert_eq!(back.records, recs) },
            Err(e) => { prop_assert!(!matches!(m, Mutation::None), "{e}"); check_error(&e, Path::new("fuzz/t.csv"), &text)? }
        }
    }

    #[test]
    fn plan_json(p in plan_file(), m in mutation()) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plan.json");
        plan_json::write(&path, &p).unwrap();
        let text = apply(&std::fs::read_to_string(&path).unwrap(), &m);
        let f = Path::new("fuzz/plan.json");
        match plan_json::parse(f, &text) {
            Ok(back) => if matches!(m, Mutation::None) { prop_assert_eq!(back, p) },
            Err(e) => { prop_assert!(!matches!(m, Mutation::None), "{e}"); check_error(&e, f, &text)? }
        }
    }

    /// Structure-aware crafting: any value of a valid plan replaced by a crafted JSON value.
    /// The reader never panics; what it accepts keeps the shape it promises (members
    /// ascending and distinct, windows that are windows, trees ending at their root).
    #[test]
    fn plan_json_crafted_values(p in plan_file(), k in 0usize..512, raw in proptest::sample::select(&CRAFTED_JSON[..])) {
        let text = craft_plan_json(&p, k, raw);
        let f = Path::new("fuzz/plan.json");
        match plan_json::parse(f, &text) {
            Ok(back) => {
                for g in &back.groups {
                    prop_assert!(g.members.windows(2).all(|w| w[0] < w[1]), "{text}");
                    let (a, b) = g.active.interval();
                    prop_assert!(0.0 <= a && a <= b, "{text}");
                    if let Decision::Tree { root, edges, .. } = &g.decision {
                        prop_assert_eq!(edges.last().map(|e| e.1), Some(*root));
                    }
                }
            }
            Err(e) => check_error(&e, f, &text)?,
        }
    }

    #[test]
    fn params_txt(slots in 1u32..u32::MAX, payload in 1u64..=params_txt::MAX_INA_PAYLOAD, window in 1u32..u32::MAX, seed in any::<u64>(), tcp in any::<bool>(), m in mutation()) {
        let p = params_txt::Params {
            ina: ina3d::trace::InaConfig {
                slots,
                payload: Bytes(payload),
                window,
                policy: Some(ina3d::trace::InaPolicy::BestEffort),
                classes: vec![Class::Dp, Class::Emb],
                ..Default::default()
            },
            transport: if tcp { params_txt::Transport::Tcp } else { params_txt::Transport::Roce },
            mtu: 1500,
            net_payload: 1000,
            tcp_initial_cwnd: 64,
            tcp_buffer: 1 << 20,
            tcp_connections: params_txt::TcpConnections::Persistent,
            queue_packets: 10_000,
            flavor: "hpcc",
            seed,
            stop_time_s: 1.0,
        };
        let text = apply(&params_txt::to_string(&p), &m);
        let f = Path::new("fuzz/params.txt");
        match params_txt::parse(f, &text) {
            Ok(back) => if matches!(m, Mutation::None) {
                prop_assert_eq!(back.ina, p.ina);
                prop_assert_eq!(back.seed, Some(seed));
            },
            Err(e) => { prop_assert!(!matches!(m, Mutation::None), "{e}"); check_error(&e, f, &text)? }
        }
    }

    #[test]
    fn reservations_txt(lines in proptest::collection::btree_map((0u64..u64::MAX, node()), 1u32..u32::MAX, 0..12), m in mutation()) {
        let l: Vec<reservations_txt::Line> = lines.into_iter().map(|((a, s), k)| (a, s, k)).collect();
        let text = apply(&reservations_txt::to_string(&l), &m);
        let f = Path::new("fuzz/reservations.txt");
        match reservations_txt::parse(f, &text) {
            Ok(back) => if matches!(m, Mutation::None) { prop_assert_eq!(back, l) },
            Err(e) => { prop_assert!(!matches!(m, Mutation::None), "{e}"); check_error(&e, f, &text)? }
        }
    }

    #[test]
    fn chakra_et(nodes in proptest::collection::vec((0u64..1 << 40, 0u64..1 << 20, any::<bool>(), proptest::collection::vec(0u64..64, 0..4)), 0..8), cut in any::<prop::sample::Index>(), flip in any::<prop::sample::Index>(), byte in any::<u8>(), how in 0u8..3) {
        // A binary format: the valid file is what the one writer writes; mutations truncate
        // it, overwrite one byte, or append garbage.
        use ina3d::formats::chakra::{self, attribute_proto::Value, AttributeProto, Node, NodeType};
        let nodes: Vec<Node> = nodes
            .iter()
            .enumerate()
            .map(|(i, (size, dur, coll, deps))| Node {
                id: i as u64,
                name: format!("n{i}"),
                r#type: if *coll { NodeType::CommCollNode } else { NodeType::CompNode } as i32,
                data_deps: deps.clone(),
                duration_micros: *dur,
                attr: vec![AttributeProto::new("comm_size", Value::Int64Val(*size as i64))],
                ..Node::default()
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("w.0.et");
        let meta = ina3d::interop::chakra::ChakraExport::metadata();
        chakra::write(&p, &meta, &nodes).unwrap();
        let mut bytes = std::fs::read(&p).unwrap();
        let (m, n) = chakra::read(&p).unwrap();
        prop_assert_eq!((m, n), (meta, nodes));
        match how {
            0 => bytes.truncate(cut.index(bytes.len() + 1)),
            1 if !bytes.is_empty() => { let i = flip.index(bytes.len()); bytes[i] = byte; }
            _ => bytes.extend([byte, 0xff, 0xff, 0xff, 0x0f]),
        }
        if let Err(e) = chakra::parse(&p, &bytes) {
            prop_assert!(e.to_string().starts_with(&p.display().to_string()), "{e}");
        }
    }

    #[test]
    fn simai_end_to_end_csv(cols in proptest::collection::vec(0u32..1 << 24, 9), layers in proptest::collection::vec((0u32..1 << 20, proptest::option::of(0u32..1000)), 0..6), m in mutation()) {
        // SimAI's layout, mixed `, ` and `,` separators, `nan` and `NONE` (ina3d writes no
        // EndToEnd.csv, so the valid file is built here as SimAI prints it)
        let header = "File name, Expose DP comm, Expose DP_EP comm, Expose TP comm, Expose_EP_comm, Expose_PP_comm, bubble time, total comp, total exposed comm, Total time";
        let run: Vec<String> = cols.iter().map(|v| format!("{v} (1.00%)")).collect();
        let mut text = format!("{header}\nrun, {}\nlayer_name,run,fwd compute,fwd total comm,algbw,busbw\n", run.join(", "));
        for (i, (c, bw)) in layers.iter().enumerate() {
            let bw = bw.map_or("nan".to_string(), |b| format!("{b}.5"));
            text += &format!("layer{i},run,{c}.000000,1.000000,{bw},NONE\n");
        }
        text += &format!("total exposed comm,{},total comp,{},total time,{}.246000\n", cols[7], cols[8], cols[8]);
        let text = apply(&text, &m);
        let dir = tempfile::tempdir().unwrap();
        let p = file(&dir, "EndToEnd.csv", &text);
        match simai_end_to_end::read(&p) {
            Ok((f, _)) => if matches!(m, Mutation::None) {
                let got: Vec<f64> = f.runs[0].us.values().copied().collect();
                prop_assert_eq!(got, cols.iter().map(|&v| v as f64).collect::<Vec<_>>());
                prop_assert_eq!(f.layers.len(), layers.len());
                prop_assert_eq!(f.total_time_us(), Some(cols[8] as f64 + 0.246));
            },
            Err(e) => { prop_assert!(!matches!(m, Mutation::None), "{e}"); check_error(&e, &p, &text)? }
        }
    }

    #[test]
    fn bench_csv(rows in proptest::collection::vec((0u32..1024, 1u64..u64::MAX, 1u64..u64::MAX, 0u32..1 << 20), 1..10), m in mutation()) {
        let rows: Vec<BenchRow> = rows.into_iter().map(|(n, s, t, bw)| BenchRow {
            collective: "all-reduce".into(), group: "dp".into(), group_size: n, size_bytes: s,
            time_ns: t, algbw_gbs: bw as f64 / 8.0, busbw_gbs: bw as f64 / 4.0,
        }).collect();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bench.csv");
        bench_csv::write(&p, &rows).unwrap();
        let text = apply(&std::fs::read_to_string(&p).unwrap(), &m);
        let p = file(&dir, "bench.csv", &text);
        match bench_csv::read(&p) {
            Ok(back) => if matches!(m, Mutation::None) { prop_assert_eq!(back, rows) },
            Err(e) => { prop_assert!(!matches!(m, Mutation::None), "{e}"); check_error(&e, &p, &text)? }
        }
    }

    #[test]
    fn validate_csv(rows in proptest::collection::vec((0u32..1024, 0u64..u64::MAX, -(1i64 << 40)..(1 << 40), proptest::option::of(0u32..1 << 20)), 0..10), m in mutation()) {
        let rows: Vec<ValidateRow> = rows.into_iter().map(|(g, n, d, e)| ValidateRow {
            case: format!("case-{g}"), gpus: g, transport: "tcp".into(), records: n,
            iteration_error: d as f64 / 1024.0, fct_median_error_tp: e.map(|x| x as f64 / 16.0),
            fct_p95_error_tp: e.map(|x| x as f64 / 8.0), fct_median_error_pp: None,
            fct_p95_error_pp: None, fct_median_error_dp: Some(0.5), fct_p95_error_dp: Some(1.5),
            slot_peak_replay: n / 2, slot_peak_ns3: n / 3, switch_bytes_diff: d,
            bench_busbw_error: e.map(|x| -(x as f64) / 32.0), replay_wall_s: 0.25, ns3_wall_s: 2.5,
            speed_ratio: 10.0, runs: g % 9 + 1, jitter_ns: n % 1000, iteration_error_mean: d as f64 / 2048.0,
            ns3_spread: 0.0625, replay_spread: e.map_or(0.0, |x| x as f64 / 64.0),
        }).collect();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("validate.csv");
        validate_csv::write(&p, &rows).unwrap();
        let text = apply(&std::fs::read_to_string(&p).unwrap(), &m);
        let p = file(&dir, "validate.csv", &text);
        match validate_csv::read(&p) {
            Ok(back) => if matches!(m, Mutation::None) { prop_assert_eq!(back, rows) },
            Err(e) => { prop_assert!(!matches!(m, Mutation::None), "{e}"); check_error(&e, &p, &text)? }
        }
    }

    #[test]
    fn bench_sizes_and_header_never_panic(text in "[0-9KMGTiBb.,]{0,24}", kind in "[a-z-]{0,14}", n in "[0-9x]{0,6}") {
        // arbitrary --sizes text: a list of positive sizes or an error naming the input
        match ina3d::trace::parse_sizes(&text) {
            Ok(v) => prop_assert!(!v.is_empty() && v.len() <= 64 && v.iter().all(|b| b.0 > 0)),
            Err(e) => prop_assert!(e.contains('`') || e.contains("--sizes"), "{e}"),
        }
        let mut h = ina3d::trace::TraceHeader::new();
        h.set("collective_bench", &kind).set("bench_group", "all").set("bench_group_size", &n)
            .set("bench_groups", "1").set("bench_sizes", &text);
        if let Err(e) = ina3d::trace::BenchSpec::from_header(&h) {
            prop_assert!(e.to_string().contains("collective_bench") || e.to_string().contains("bench_"), "{e}");
        }
    }
}

// ------------------------------------------------------------------ ina3d cluster

fn job_row() -> impl Strategy<Value = ina3d::formats::cluster_csv::JobRow> {
    (
        (
            0u32..1 << 20,
            0u64..u64::MAX / 4,
            1u64..u64::MAX / 4,
            0.0f64..8.0,
        ),
        proptest::collection::vec(0u64..u64::MAX / 4, 12),
        (
            proptest::option::of(0u32..1 << 20),
            proptest::option::of(0.5f64..4.0),
            proptest::option::of(0u64..1 << 40),
        ),
    )
        .prop_map(|((gpus, it, alone, sd), n, (pool, pred, ns3))| {
            ina3d::formats::cluster_csv::JobRow {
                job: format!("j{}", gpus % 7),
                policy: "plan".into(),
                gpus,
                placement: "random:3".into(),
                start_ns: n[0],
                iteration_time_ns: it,
                alone_iteration_time_ns: alone,
                slowdown: sd,
                compute_ns: n[1],
                bubble_ns: n[2],
                exposed_tp_ns: n[3],
                exposed_pp_ns: n[4],
                exposed_dp_ns: n[5],
                exposed_emb_ns: n[6],
                exposed_cp_ns: n[7],
                exposed_ep_ns: n[8],
                alone_exposed_dp_ns: n[9],
                slots_peak: n[10],
                slot_time: n[11],
                alone_slots_peak: n[10] / 2,
                plan_pool: pool,
                predicted_slowdown: pred,
                ns3_iteration_time_ns: ns3,
                ns3_alone_iteration_time_ns: ns3.map(|x| x / 2),
            }
        })
}

/// A valid cluster file: a pool, some policies, jobs with placements, maybe a sweep.
fn cluster_file() -> impl Strategy<Value = String> {
    (
        1u32..100_000,
        proptest::sample::subsequence(vec!["ring", "split", "atp", "plan", "plan-fair"], 1..5),
        proptest::collection::vec((0u8..4, 0u64..1000, 0u64..1 << 30), 1..3),
        any::<bool>(),
    )
        .prop_map(|(slots, policies, jobs, sweep)| {
            let tiny = concat!(env!("CARGO_MANIFEST_DIR"), "/traces/example/tiny.toml");
            let mut s = format!(
                "topology = \"fat-tree:k=4,gpus-per-server=2\"\nina-slots = {slots}\npolicies = [{}]\n",
                policies.iter().map(|p| format!("\"{p}\"")).collect::<Vec<_>>().join(", ")
            );
            if sweep {
                s.push_str("[sweep]\nina-slots = [256, 1024]\nplacement = [\"contiguous\", \"random:7\"]\n");
            }
            for (i, (kind, seed, start)) in jobs.iter().enumerate() {
                let placement = match kind {
                    0 => "\"contiguous\"".to_string(),
                    1 => "\"interleaved\"".to_string(),
                    2 => format!("\"random:{seed}\""),
                    _ => format!("[{}]", (8 * i..8 * i + 8).map(|g| g.to_string()).collect::<Vec<_>>().join(", ")),
                };
                s.push_str(&format!(
                    "[[job]]\nname = \"j{i}\"\ninput = \"{tiny}\"\nplacement = {placement}\nstart-ns = {start}\nset = {{ hidden_size = 512 }}\n"
                ));
            }
            s
        })
}

proptest! {
    #[test]
    fn cluster_jobs_and_cluster_csv(rows in proptest::collection::vec(job_row(), 1..8), m in mutation()) {
        use ina3d::formats::cluster_csv::{self, ClusterRow};
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("jobs.csv");
        cluster_csv::write_jobs(&p, &rows).unwrap();
        let text = apply(&std::fs::read_to_string(&p).unwrap(), &m);
        let p = file(&dir, "jobs.csv", &text);
        match cluster_csv::read_jobs(&p) {
            Ok(back) => if matches!(m, Mutation::None) { prop_assert_eq!(back, rows.clone()) },
            Err(e) => { prop_assert!(!matches!(m, Mutation::None), "{e}"); check_error(&e, &p, &text)? }
        }
        let cl: Vec<ClusterRow> = rows.iter().map(|r| ClusterRow {
            policy: r.policy.clone(), jobs: r.gpus % 9, ina_slots: r.gpus, makespan_ns: r.iteration_time_ns,
            max_slowdown: r.slowdown, mean_slowdown: r.slowdown / 2.0, jain_fairness: 0.75,
            aggregator_utilisation: 0.125, slot_peak: r.slots_peak, ina_fallbacks: r.compute_ns,
            switch_bytes: r.bubble_ns, plan_proven: r.plan_pool.map(|x| x % 2 == 0),
        }).collect();
        let p = dir.path().join("cluster.csv");
        cluster_csv::write_cluster(&p, &cl).unwrap();
        let text = apply(&std::fs::read_to_string(&p).unwrap(), &m);
        let p = file(&dir, "cluster.csv", &text);
        match cluster_csv::read_cluster(&p) {
            Ok(back) => if matches!(m, Mutation::None) { prop_assert_eq!(back, cl) },
            Err(e) => { prop_assert!(!matches!(m, Mutation::None), "{e}"); check_error(&e, &p, &text)? }
        }
    }

    #[test]
    fn cluster_toml(text in cluster_file(), m in mutation()) {
        let path = Path::new("fuzz/cluster.toml");
        let mutated = apply(&text, &m);
        match ina3d::cluster::ClusterSpec::parse(path, &mutated) {
            Ok(s) => {
                // a file that reads places its jobs or refuses naming one, never panics
                if let Err(e) = ina3d::cluster::Cluster::prepare(s.clone()) {
                    let msg = ina3d::pipeline::error_chain(&e);
                    prop_assert!(msg.contains("fuzz/cluster.toml"), "{msg}");
                }
                let _ = s.points();
            }
            Err(e) => { prop_assert!(!matches!(m, Mutation::None), "{e}"); check_error(&e, path, &mutated)? }
        }
    }

    #[test]
    fn ina_tenants_header(hosts in proptest::collection::vec(proptest::collection::btree_set(0u32..4096, 1..40), 1..5), m in mutation()) {
        // disjoint host sets: each host kept by the first job that drew it
        let mut seen = std::collections::BTreeSet::new();
        let tenants: Vec<ina3d::trace::Tenant> = hosts.iter().enumerate().filter_map(|(i, h)| {
            let mine: Vec<NodeId> = h.iter().filter(|x| seen.insert(**x)).map(|&x| NodeId(x)).collect();
            (!mine.is_empty()).then(|| ina3d::trace::Tenant { name: format!("j{i}"), hosts: mine })
        }).collect();
        let text = apply(&ina3d::trace::format_tenants(&tenants), &m);
        match ina3d::trace::parse_tenants(&text) {
            Ok(back) => if matches!(m, Mutation::None) { prop_assert_eq!(back, tenants) },
            Err(e) => prop_assert!(!e.is_empty()),
        }
    }
}
