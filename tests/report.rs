//! The report stage on small hand-made inputs whose answers are recomputed here by hand.
#![cfg(feature = "tables")]

use ina3d::fct::Summary;
use ina3d::formats::FormatError;
use ina3d::report::{
    compare, compare_with, median, percentile_nearest_rank, read_fct, results_table,
    CompareOptions, PolicyResult, ReportError, RESULTS_COLUMNS,
};
use std::fs;
use std::path::{Path, PathBuf};

const FIX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/report");
const FCT_HEADER: &str =
    "flow_id,src,dst,mode,class,size_bytes,start_ns,end_ns,fct_ns,standalone_fct_ns";

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

/// Copies the fixture pair into a temp dir so a test can damage one file.
fn fixture_copy() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    for side in ["replay", "ns3"] {
        fs::create_dir_all(t.path().join(side)).unwrap();
        for f in ["fct.csv", "summary.csv"] {
            fs::copy(
                Path::new(FIX).join(side).join(f),
                t.path().join(side).join(f),
            )
            .unwrap();
        }
    }
    let (r, n) = (t.path().join("replay"), t.path().join("ns3"));
    (t, r, n)
}

fn edit(path: &Path, from: &str, to: &str) {
    let s = fs::read_to_string(path).unwrap();
    assert!(s.contains(from), "{from:?} not in {}", path.display());
    fs::write(path, s.replacen(from, to, 1)).unwrap();
}

fn summary(policy: &str, iteration_time_ns: u64) -> PolicyResult {
    PolicyResult {
        policy: policy.into(),
        ina_slots: 1024,
        replay: Summary {
            backend: "replay".into(),
            iteration_time_ns,
            compute_ns: 100,
            ..Default::default()
        },
        ns3: None,
        plan: None,
    }
}

#[test]
fn network_flow_errors_are_summarised_by_mean_median_and_nearest_rank_percentiles() {
    let c = compare(&Path::new(FIX).join("replay"), &Path::new(FIX).join("ns3")).unwrap();
    // Signed errors (r-n)/n: tp +0.1, dp -0.2, dp(ina) +0.3, pp +0.4.
    let all = c.stats("all", "net+ina").unwrap();
    assert_eq!(all.flows, 4);
    assert_eq!(all.undefined, 0);
    assert!(close(all.mean_abs, 0.25));
    assert!(close(all.median_abs, 0.25)); // (0.2 + 0.3) / 2
    assert!(close(all.p95_abs, 0.4)); // rank ceil(0.95*4) = 4
    assert!(close(all.p99_abs, 0.4));
    assert!(close(all.max_abs, 0.4));
    assert!(close(all.mean_signed, 0.15));
    let dp = c.stats("class", "dp").unwrap();
    assert_eq!(dp.flows, 2);
    assert!(close(dp.mean_abs, 0.25));
    assert!(close(dp.p95_abs, 0.3)); // rank ceil(0.95*2) = 2
    assert!(close(dp.mean_signed, 0.05));
    assert!(close(c.stats("class", "tp").unwrap().mean_abs, 0.1));
    assert!(close(c.stats("class", "pp").unwrap().mean_abs, 0.4));
    assert!(
        c.stats("class", "emb").is_none(),
        "no emb flows, no emb row"
    );
    let net = c.stats("mode", "net").unwrap();
    assert_eq!(net.flows, 3);
    assert!(close(net.median_abs, 0.2));
    assert!(close(c.stats("mode", "ina").unwrap().mean_abs, 0.3));
}

#[test]
fn compute_and_nvlink_timers_are_kept_out_of_the_network_statistics() {
    let c = compare(&Path::new(FIX).join("replay"), &Path::new(FIX).join("ns3")).unwrap();
    let t = c.stats("timers", "compute+nvlink").unwrap();
    assert_eq!(t.flows, 2);
    assert_eq!(t.max_abs, 0.0);
    let order: Vec<(String, String)> = c
        .fct_error
        .iter()
        .map(|s| (s.scope.clone(), s.group.clone()))
        .collect();
    let names: Vec<String> = order.iter().map(|(a, b)| format!("{a}:{b}")).collect();
    assert_eq!(
        names,
        [
            "all:net+ina",
            "class:tp",
            "class:pp",
            "class:dp",
            "mode:ina",
            "mode:net",
            "timers:compute+nvlink"
        ]
    );
}

#[test]
fn iteration_error_is_relative_to_ns3_and_wall_ratio_is_ns3_over_replay() {
    let c = compare(&Path::new(FIX).join("replay"), &Path::new(FIX).join("ns3")).unwrap();
    assert!(close(
        c.iteration_rel_error(),
        (10_000.0 - 12_500.0) / 12_500.0
    ));
    assert!(close(c.wall_time_ratio(), 5_000_000_000.0 / 2_000_000.0));
    assert_eq!(c.records, 6);
    assert_eq!(c.flows.height(), 6);
}

#[test]
fn nearest_rank_percentiles_of_twenty_errors_pick_the_19th_and_20th_values() {
    // 20 network flows with |error| k/100, k = 1..20, signs alternating.
    let t = tempfile::tempdir().unwrap();
    let (r, n) = (t.path().join("replay"), t.path().join("ns3"));
    fs::create_dir_all(&r).unwrap();
    fs::create_dir_all(&n).unwrap();
    let mut rf = format!("{FCT_HEADER}\n");
    let mut nf = format!("{FCT_HEADER}\n");
    for k in 1..=20u64 {
        let rep = if k % 2 == 0 {
            1000 + 10 * k
        } else {
            1000 - 10 * k
        };
        rf.push_str(&format!("{k},0,1,net,dp,100,0,{rep},{rep},500\n"));
        nf.push_str(&format!("{k},0,1,net,dp,100,0,1000,1000,500\n"));
    }
    fs::write(r.join("fct.csv"), rf).unwrap();
    fs::write(n.join("fct.csv"), nf).unwrap();
    fs::copy(
        Path::new(FIX).join("replay/summary.csv"),
        r.join("summary.csv"),
    )
    .unwrap();
    fs::copy(
        Path::new(FIX).join("ns3/summary.csv"),
        n.join("summary.csv"),
    )
    .unwrap();
    edit(
        &r.join("summary.csv"),
        "trace.csv.gz,6,",
        "trace.csv.gz,20,",
    );
    edit(
        &n.join("summary.csv"),
        "trace.csv.gz,6,",
        "trace.csv.gz,20,",
    );
    let c = compare(&r, &n).unwrap();
    let s = c.stats("all", "net+ina").unwrap();
    assert!(close(s.p95_abs, 0.19), "{}", s.p95_abs);
    assert!(close(s.p99_abs, 0.20));
    assert!(close(s.median_abs, 0.105)); // (0.10 + 0.11) / 2
    assert!(close(s.mean_abs, 0.105)); // (1+...+20)/20/100
    assert!(close(s.mean_signed, 0.005)); // ten pairs of (+2k - (2k-1))/100 = 10 * 0.01 / 20
}

#[test]
fn percentile_definitions_match_their_documentation() {
    let v: Vec<f64> = (1..=10).map(f64::from).collect();
    assert_eq!(percentile_nearest_rank(&v, 95.0), Some(10.0));
    assert_eq!(percentile_nearest_rank(&v, 50.0), Some(5.0));
    assert_eq!(percentile_nearest_rank(&v, 0.0), Some(1.0));
    assert_eq!(percentile_nearest_rank(&[], 50.0), None);
    assert_eq!(median(&v), Some(5.5));
    assert_eq!(median(&[3.0]), Some(3.0));
}

#[test]
fn a_zero_ns3_fct_makes_that_flow_undefined_not_infinite() {
    let (_t, r, n) = fixture_copy();
    edit(
        &n.join("fct.csv"),
        "4,2,3,net,pp,2048,2200,2700,500,400",
        "4,2,3,net,pp,2048,2200,2200,0,400",
    );
    let c = compare(&r, &n).unwrap();
    let s = c.stats("all", "net+ina").unwrap();
    assert_eq!((s.flows, s.undefined), (4, 1));
    assert!(close(s.max_abs, 0.3));
    assert!(close(s.mean_abs, 0.2));
}

#[test]
fn comparison_tables_are_written_with_their_documented_columns_and_are_deterministic() {
    let c = compare(&Path::new(FIX).join("replay"), &Path::new(FIX).join("ns3")).unwrap();
    let t = tempfile::tempdir().unwrap();
    let paths = c.write(t.path()).unwrap();
    assert_eq!(paths.len(), 3);
    let first_line = |p: &str| {
        fs::read_to_string(t.path().join(p))
            .unwrap()
            .lines()
            .next()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        first_line("fct_error.csv"),
        "scope,group,flows,undefined,mean_abs_rel_error,median_abs_rel_error,p95_abs_rel_error,p99_abs_rel_error,max_abs_rel_error,mean_signed_rel_error"
    );
    assert_eq!(
        first_line("iteration.csv"),
        "metric,replay,ns3,difference,rel_error,ns3_over_replay"
    );
    assert_eq!(
        first_line("flows.csv"),
        "flow_id,src,dst,mode,class,size_bytes,replay_fct_ns,ns3_fct_ns,rel_error"
    );
    let it = fs::read_to_string(t.path().join("iteration.csv")).unwrap();
    assert!(
        it.lines()
            .any(|l| l == "iteration_time_ns,10000,12500,-2500,-0.2,1.25"),
        "{it}"
    );
    for metric in ["switch_bytes", "ina_slot_peak", "records", "wall_time_ns"] {
        assert!(
            it.lines().any(|l| l.starts_with(&format!("{metric},"))),
            "iteration.csv lists {metric}: {it}"
        );
    }
    let again = tempfile::tempdir().unwrap();
    c.write(again.path()).unwrap();
    for f in ["fct_error.csv", "iteration.csv", "flows.csv"] {
        assert_eq!(
            fs::read(t.path().join(f)).unwrap(),
            fs::read(again.path().join(f)).unwrap()
        );
        assert!(!t.path().join(format!("{f}.tmp")).exists());
    }
}

#[test]
fn compare_switches_csv_puts_each_switchs_peak_and_slot_time_side_by_side() {
    let (_t, r, n) = fixture_copy();
    // replay: switch 20 holds 256 over [1000, 81000), switch 21 holds 256 over [1500, 80500)
    fs::write(
        r.join("switches.csv"),
        "time_ns,switch,slots_in_use\n1000,20,256\n1500,21,256\n80500,21,0\n81000,20,0\n",
    )
    .unwrap();
    // ns-3 (the glue logs every change, two at one instant on switch 20): switch 20 holds
    // 100 over [900, 50000), 200 over [50000, 90000) (after a transient 300 at 50000);
    // switch 22, which the replay never used, 10 over [0, 10)
    fs::write(
        n.join("switches.csv"),
        "time_ns,switch,slots_in_use\n0,22,10\n10,22,0\n900,20,100\n50000,20,300\n50000,20,200\n90000,20,0\n",
    )
    .unwrap();
    let c = compare(&r, &n).unwrap();
    assert!(c.slots.is_some());
    let out = tempfile::tempdir().unwrap();
    let paths = c.write(out.path()).unwrap();
    assert_eq!(paths.len(), 4);
    let text = fs::read_to_string(out.path().join("switches.csv")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "switch,replay_slot_peak,ns3_slot_peak,replay_slot_time,ns3_slot_time,slot_time_diff,slot_peak_diff"
    );
    // 20: replay 256 × 80,000 = 20,480,000; ns-3 100 × 49,100 + 200 × 40,000 = 12,910,000
    // (the transient 300 lasts no time: not a peak); differences are ns-3 − replay
    assert_eq!(lines[1], "20,256,200,20480000,12910000,-7570000,-56");
    // 21: replay 256 × 79,000; ns-3 never saw it
    assert_eq!(lines[2], "21,256,0,20224000,0,-20224000,-256");
    // 22: only ns-3
    assert_eq!(lines[3], "22,0,10,0,100,100,10");
    assert_eq!(lines.len(), 4);
}

#[test]
fn without_a_switches_csv_on_one_side_no_slots_table_is_written() {
    let (_t, r, n) = fixture_copy();
    fs::write(r.join("switches.csv"), "time_ns,switch,slots_in_use\n").unwrap();
    let c = compare(&r, &n).unwrap();
    assert!(c.slots.is_none());
    let out = tempfile::tempdir().unwrap();
    assert_eq!(c.write(out.path()).unwrap().len(), 3);
    assert!(!out.path().join("switches.csv").exists());
}

#[test]
fn a_malformed_switches_csv_is_named_with_its_line() {
    let (_t, r, n) = fixture_copy();
    fs::write(r.join("switches.csv"), "time_ns,switch,slots_in_use\n").unwrap();
    fs::write(
        n.join("switches.csv"),
        "time_ns,switch,slots_in_use\n5,20,256\n9,x,0\n",
    )
    .unwrap();
    let e = compare(&r, &n).unwrap_err().to_string();
    assert!(e.contains("switches.csv") && e.contains(":3"), "{e}");
}

#[test]
fn speedup_vs_ring_is_ring_iteration_time_over_each_policy_time() {
    let rows = vec![
        summary("ring", 1000),
        summary("ina-dp", 800),
        summary("ina-tp", 500),
        summary("ina-tp-dp", 400),
    ];
    let t = results_table(&rows).unwrap();
    assert_eq!(t.names(), RESULTS_COLUMNS);
    let sp: Vec<f64> = (0..4)
        .map(|i| t.f64_at("speedup_vs_ring", i).unwrap())
        .collect();
    assert_eq!(sp, vec![1.0, 1.25, 2.0, 2.5]);
    assert!(
        (0..4).all(|i| t.f64_at("ns3_iteration_time_ns", i).is_none()),
        "ns-3 did not run: empty cells, not zeros"
    );
    let text = ina3d::report::text::summary(&t);
    assert!(text.lines().nth(1).unwrap().starts_with("ring "));
    assert!(text.contains("2.500"));
}

#[test]
fn results_csv_has_the_issue_columns_first_and_empty_cells_for_missing_ns3() {
    let mut rows = vec![summary("ina-dp", 800), summary("ring", 1000)];
    rows[1].ns3 = Some(Summary {
        iteration_time_ns: 1100,
        ..Default::default()
    });
    let table = results_table(&rows).unwrap();
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("results.csv");
    table.write_csv(&p).unwrap();
    let s = fs::read_to_string(&p).unwrap();
    let lines: Vec<&str> = s.lines().collect();
    assert!(lines[0].starts_with(
        "policy,iteration_time_ns,compute_ns,exposed_tp_ns,exposed_pp_ns,exposed_dp_ns,exposed_emb_ns,bubble_ns,switch_bytes,ina_slot_peak,speedup_vs_ring,"
    ));
    assert_eq!(lines.len(), 3);
    assert!(
        lines[1].starts_with("ina-dp,800,100,") && lines[1].ends_with(",,,,,,"),
        "{}",
        lines[1]
    );
    // ns-3's time and its own speed-up (the ring against itself: 1.0), then the four
    // planner columns, empty on a non-planner row; ina-dp did not run on ns-3 (its row
    // ends in six empty cells)
    assert!(lines[2].ends_with(",1100,1.0,,,,"), "{}", lines[2]);
}

#[test]
fn a_results_table_without_a_ring_row_is_refused() {
    let e = results_table(&[summary("ina-dp", 800)]).unwrap_err();
    assert!(matches!(e, ReportError::NoRing { .. }), "{e}");
    assert!(e.to_string().contains("ina-dp"));
    let e = results_table(&[summary("ring", 1000), summary("ring", 900)]).unwrap_err();
    assert!(matches!(e, ReportError::DuplicatePolicy { .. }));
    let e = results_table(&[summary("ring", 0)]).unwrap_err();
    assert!(matches!(e, ReportError::ZeroIteration { .. }));
}

#[test]
fn a_missing_ns3_fct_file_is_named_in_the_error() {
    let (_t, r, n) = fixture_copy();
    fs::remove_file(n.join("fct.csv")).unwrap();
    let e = compare(&r, &n).unwrap_err();
    assert!(matches!(e, ReportError::MissingFile { .. }), "{e}");
    assert!(
        e.to_string()
            .contains(&n.join("fct.csv").display().to_string()),
        "{e}"
    );
}

#[test]
fn a_missing_directory_is_named_in_the_error() {
    let e = compare(
        Path::new("/nonexistent/replay"),
        &Path::new(FIX).join("ns3"),
    )
    .unwrap_err();
    assert!(
        e.to_string().starts_with("/nonexistent/replay: missing"),
        "{e}"
    );
}

#[test]
fn an_ns3_fct_with_only_a_header_is_reported_empty() {
    let (_t, r, n) = fixture_copy();
    fs::write(n.join("fct.csv"), format!("{FCT_HEADER}\n")).unwrap();
    let e = compare(&r, &n).unwrap_err();
    assert!(
        matches!(e, ReportError::File(FormatError::File { .. })),
        "{e}"
    );
    assert!(
        e.to_string().contains("ns3/fct.csv: empty: header only"),
        "{e}"
    );
}

#[test]
fn a_zero_byte_ns3_summary_is_reported_empty() {
    let (_t, r, n) = fixture_copy();
    fs::write(n.join("summary.csv"), "").unwrap();
    let e = compare(&r, &n).unwrap_err();
    assert!(
        matches!(e, ReportError::File(FormatError::File { .. })),
        "{e}"
    );
    assert!(e.to_string().contains("ns3/summary.csv"), "{e}");
}

#[test]
fn summaries_of_different_record_counts_are_different_traces() {
    let (_t, r, n) = fixture_copy();
    edit(&n.join("summary.csv"), "trace.csv.gz,6,", "trace.csv.gz,7,");
    let e = compare(&r, &n).unwrap_err();
    assert!(
        matches!(
            e,
            ReportError::TraceMismatch {
                field: "records",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn summaries_naming_different_trace_files_are_refused_unless_told_to_ignore_names() {
    let (_t, r, n) = fixture_copy();
    edit(&n.join("summary.csv"), "trace.csv.gz", "other/trace.csv.gz");
    let e = compare(&r, &n).unwrap_err();
    assert!(
        matches!(e, ReportError::TraceMismatch { field: "trace", .. }),
        "{e}"
    );
    let c = compare_with(
        &r,
        &n,
        &CompareOptions {
            ignore_trace_name: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(c.stats("all", "net+ina").unwrap().flows, 4);
}

#[test]
fn fct_files_with_different_flow_ids_are_different_traces() {
    let (_t, r, n) = fixture_copy();
    edit(&n.join("fct.csv"), "\n4,2,3,", "\n9,2,3,");
    let e = compare(&r, &n).unwrap_err();
    match &e {
        ReportError::FlowIdMismatch {
            only_replay,
            first_replay,
            only_ns3,
            first_ns3,
            ..
        } => {
            assert_eq!(
                (
                    *only_replay,
                    first_replay.as_str(),
                    *only_ns3,
                    first_ns3.as_str()
                ),
                (1, "4", 1, "9")
            );
        }
        other => panic!("wrong error: {other}"),
    }
}

#[test]
fn a_flow_whose_size_differs_between_backends_is_named() {
    let (_t, r, n) = fixture_copy();
    edit(
        &n.join("fct.csv"),
        "3,1,2,ina,dp,8192,",
        "3,1,2,ina,dp,8000,",
    );
    let e = compare(&r, &n).unwrap_err();
    assert!(
        matches!(
            &e,
            ReportError::FlowMismatch {
                flow_id: 3,
                field: "size_bytes",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn an_fct_with_fewer_rows_than_the_summary_records_is_refused() {
    let (_t, r, n) = fixture_copy();
    edit(
        &n.join("fct.csv"),
        "5,0,1,nvlink,tp,0,2700,4700,2000,2000\n",
        "",
    );
    let e = compare(&r, &n).unwrap_err();
    assert!(
        matches!(
            e,
            ReportError::RecordCount {
                rows: 5,
                records: 6,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn a_malformed_value_is_reported_with_its_line_and_field() {
    let (_t, r, n) = fixture_copy();
    edit(
        &n.join("fct.csv"),
        "2,0,2,net,dp,4096,1100,1200,100,70",
        "2,0,2,net,dp,4096,1100,1200,1e2x,70",
    );
    let e = compare(&r, &n).unwrap_err();
    match &e {
        ReportError::File(FormatError::Syntax { line, field, .. }) => {
            assert_eq!((*line, field.as_str()), (4, "fct_ns"))
        }
        other => panic!("wrong error: {other}"),
    }
}

#[test]
fn an_empty_field_is_reported_with_its_line_and_field() {
    let (_t, r, n) = fixture_copy();
    edit(
        &r.join("fct.csv"),
        "1,0,1,net,tp,4096,1000,1110,110,100",
        "1,0,1,net,tp,,1000,1110,110,100",
    );
    let e = compare(&r, &n).unwrap_err();
    match &e {
        ReportError::File(FormatError::Syntax { line, field, .. }) => {
            assert_eq!((*line, field.as_str()), (3, "size_bytes"))
        }
        other => panic!("wrong error: {other}"),
    }
}

#[test]
fn a_missing_column_is_named() {
    let (_t, r, _n) = fixture_copy();
    let p = r.join("fct.csv");
    let s = fs::read_to_string(&p)
        .unwrap()
        .replace("standalone_fct_ns", "standalone");
    fs::write(&p, s).unwrap();
    let e = read_fct(&p).unwrap_err();
    assert!(
        matches!(&e, ReportError::File(FormatError::Syntax { field, line: 1, .. }) if field == "standalone_fct_ns"),
        "{e}"
    );
}

#[test]
fn columns_in_another_order_are_read_by_name() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("fct.csv");
    fs::write(&p, "fct_ns,flow_id,src,dst,mode,class,size_bytes,start_ns,end_ns,standalone_fct_ns,extra\n7,1,0,1,net,tp,10,0,7,5,x\n").unwrap();
    let df = read_fct(&p).unwrap();
    assert_eq!(df.column("fct_ns").unwrap().u64().unwrap().get(0), Some(7));
    assert_eq!(df.width(), 10);
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Arbitrary bytes after a valid header: an answer or an error, never a panic.
        #[test]
        fn reading_arbitrary_fct_content_never_panics(body in "[0-9a-z,\\-\\.\n\r\" ]{0,200}") {
            let t = tempfile::tempdir().unwrap();
            let p = t.path().join("fct.csv");
            fs::write(&p, format!("{FCT_HEADER}\n{body}")).unwrap();
            let _ = read_fct(&p);
        }

        /// Near-valid links.csv rows (numbers, signs, blanks, stray fields): an answer or an
        /// error naming the file, never a panic.
        #[test]
        fn reading_near_valid_links_csv_never_panics(
            rows in proptest::collection::vec(
                ("[0-9]{1,3}|-1|x", "[0-9]{1,2}", "[0-9]{1,2}", "[0-9]{1,12}|", "[0-9]{1,20}|1e3", "[0-9.]{0,8}"),
                0..8,
            )
        ) {
            let t = tempfile::tempdir().unwrap();
            let p = t.path().join("links.csv");
            let body: String = rows
                .iter()
                .map(|(a, b, c, d, e, f)| format!("{a},{b},{c},{d},{e},{f}\n"))
                .collect();
            fs::write(&p, format!("link,from,to,rate_bps,bytes,utilisation\n{body}")).unwrap();
            match ina3d::report::links::read_links_csv(&p) {
                Ok(v) => prop_assert!(v.len() <= rows.len()),
                Err(e) => prop_assert!(e.to_string().contains("links.csv"), "{e}"),
            }
        }

        /// Whatever the errors, p95 ≤ p99 ≤ max and median ≤ max.
        #[test]
        fn percentiles_are_ordered(mut v in proptest::collection::vec(0.0f64..10.0, 1..50)) {
            v.sort_by(f64::total_cmp);
            let p95 = percentile_nearest_rank(&v, 95.0).unwrap();
            let p99 = percentile_nearest_rank(&v, 99.0).unwrap();
            prop_assert!(p95 <= p99 && p99 <= *v.last().unwrap());
            prop_assert!(median(&v).unwrap() <= *v.last().unwrap());
        }
    }
}

#[test]
fn notebook_fixture_tables_follow_the_results_schema_and_speedup_arithmetic() {
    for name in ["results.csv", "sweep.csv"] {
        let text = fs::read_to_string(Path::new(FIX).join(name)).unwrap();
        let mut lines = text.lines();
        assert_eq!(lines.next().unwrap(), RESULTS_COLUMNS.join(","), "{name}");
        let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
        // Within one ina_slots value, speedup = ring time / row time.
        for r in &rows {
            let ring = rows
                .iter()
                .find(|x| x[0] == "ring" && x[11] == r[11])
                .unwrap();
            let expect = ring[1].parse::<f64>().unwrap() / r[1].parse::<f64>().unwrap();
            assert!(
                close(r[10].parse::<f64>().unwrap(), expect),
                "{name}: {r:?}"
            );
        }
    }
}

#[test]
fn a_links_csv_giving_one_channel_twice_or_lacking_a_column_is_an_error_naming_line_and_field() {
    use ina3d::report::links::read_links_csv;
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("links.csv");
    fs::write(
        &p,
        "link,from,to,rate_bps,bytes,utilisation\n0,0,4,100,1048,0.1\n0,4,0,100,1048,0.1\n0,0,4,100,5,0.1\n",
    )
    .unwrap();
    let e = read_links_csv(&p).unwrap_err().to_string();
    assert!(
        e.contains("links.csv:4") && e.contains("already given on line 2"),
        "{e}"
    );
    fs::write(&p, "link,from,to,bytes\n0,0,4,1048\n").unwrap();
    let e = read_links_csv(&p).unwrap_err().to_string();
    assert!(e.contains("links.csv:1") && e.contains("rate_bps"), "{e}");
    fs::write(
        &p,
        "link,from,to,rate_bps,bytes,utilisation\n0,0,4,100,-3,0.1\n",
    )
    .unwrap();
    let e = read_links_csv(&p).unwrap_err().to_string();
    assert!(e.contains("links.csv:2") && e.contains("bytes"), "{e}");
}

#[test]
fn compare_without_links_csv_says_the_link_check_did_not_run_and_why() {
    let (_t, r, n) = fixture_copy();
    let c = compare(&r, &n).unwrap();
    match c.links {
        ina3d::report::links::LinkOutcome::NotChecked(why) => {
            assert!(
                why.contains("links.csv") && why.contains("does not exist"),
                "{why}"
            )
        }
        other => panic!("{other:?}"),
    }
}

/// The printed summary quotes each back-end's iteration time (the fixture's 10,000 and
/// 12,500 ns), not another metric's row.
#[test]
fn the_printed_summary_quotes_both_iteration_times_and_their_error() {
    let (_t, r, n) = fixture_copy();
    let text = compare(&r, &n).unwrap().summary_text().unwrap();
    assert!(
        text.contains("iteration time: replay 10000 ns, ns-3 12500 ns, error -20.00 %"),
        "{text}"
    );
}
