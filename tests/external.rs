//! An HPCC-family `fct.txt` mapped back onto trace records (`interop::external`): the
//! replayer's own fct.txt, emitted with the replayer's start times, must map back to every
//! network record with the replayer's FCTs; rows the emitted flows do not explain and
//! records with a missing row are named.

use ina3d::formats::hpcc_fct;
use ina3d::interop::external::match_hpcc_fct;
use ina3d::ns3::{EmitOptions, StartSource};
use ina3d::pipeline::{emit_ns3, generate_trace, replay_records, Job, JobSpec};
use ina3d::record::Mode;

#[test]
fn a_replay_s_fct_txt_maps_back_to_every_network_record_and_gaps_are_named() {
    let spec = JobSpec {
        input: concat!(env!("CARGO_MANIFEST_DIR"), "/traces/example/tiny.toml").into(),
        topology: "leaf-spine:leaves=2,spines=2,hosts-per-leaf=4,gpus-per-server=2".into(),
        ..JobSpec::default()
    };
    let job = Job::prepare(&spec).unwrap();
    let opts = spec.trace_options().unwrap();
    let t = generate_trace(&job, &opts, None, true, &mut |_| {}).unwrap();
    let r = replay_records(
        &t.records,
        &t.header,
        &job.topology,
        0,
        "t",
        false,
        Default::default(),
    )
    .unwrap();
    let d = tempfile::tempdir().unwrap();
    let fct_csv = d.path().join("fct.csv");
    ina3d::formats::fct_csv::write(&fct_csv, r.row_iter()).unwrap();
    let emit = d.path().join("emit");
    let eo = EmitOptions {
        start: StartSource::Replay(fct_csv),
        ..EmitOptions::default()
    };
    let ina = ina3d::ns3::ina_model(&t.header).unwrap();
    emit_ns3(&t.records, &ina, &job.topology, &eo, &emit, "t").unwrap();
    let fct_txt = emit.join("fct.txt");
    hpcc_fct::write(&fct_txt, r.row_iter(), hpcc_fct::Flavor::Hpcc).unwrap();

    let ext = match_hpcc_fct(&emit, &fct_txt).unwrap();
    let rows = r.rows();
    let net: Vec<_> = rows.iter().filter(|x| x.mode == Mode::Net).collect();
    assert_eq!(ext.network_records, net.len());
    assert_eq!(ext.rows.len(), net.len());
    assert!(ext.unmatched_lines.is_empty() && ext.incomplete_records.is_empty());
    let mut got = ext.rows.clone();
    got.sort_by_key(|x| x.flow_id);
    for (a, b) in got.iter().zip(&net) {
        assert_eq!(
            (a.flow_id, a.start_ns, a.fct_ns),
            (b.flow_id, b.start_ns, b.fct_ns)
        );
    }

    // drop the first row and add one no emitted flow explains
    let text = std::fs::read_to_string(&fct_txt).unwrap();
    let mut lines: Vec<&str> = text.lines().skip(1).collect();
    lines.push("0b000001 0b000401 10005 100 7 1 2 3");
    std::fs::write(&fct_txt, lines.join("\n") + "\n").unwrap();
    let ext = match_hpcc_fct(&emit, &fct_txt).unwrap();
    assert_eq!(ext.rows.len(), net.len() - 1);
    assert_eq!(ext.incomplete_records.len(), 1);
    assert_eq!(ext.unmatched_lines.len(), 1);
    assert!(
        ext.unmatched_lines[0].contains("7 B"),
        "{:?}",
        ext.unmatched_lines
    );
}

mod simai_end_to_end {
    //! SimAI's `EndToEnd.csv` beside the replay's `summary.csv`: SimAI reports an
    //! iteration breakdown in µs, so each of its columns is compared with the summary
    //! figure it measures, and what it cannot say is listed.
    use ina3d::fct::Summary;
    use ina3d::formats::simai_end_to_end::{self, Basis, Breakdown};
    use ina3d::interop::external::compare_end_to_end;
    use std::path::Path;
    use std::process::Command;

    const HEADER: &str = "File name, Expose DP comm, Expose DP_EP comm, Expose TP comm, Expose_EP_comm, Expose_PP_comm, bubble time, total comp, total exposed comm, Total time";

    fn e2e(run_row: &str) -> simai_end_to_end::EndToEnd {
        let text = format!("{HEADER}\n{run_row}\n");
        simai_end_to_end::parse(Path::new("EndToEnd.csv"), &text)
            .unwrap()
            .0
    }

    fn row<'a>(
        c: &'a ina3d::interop::external::EndToEndComparison,
        metric: &str,
    ) -> &'a simai_end_to_end::ComparisonRow {
        c.rows.iter().find(|r| r.metric == metric).unwrap()
    }

    #[test]
    fn the_reference_file_gives_simai_s_breakdown_in_microseconds() {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/simai/EndToEnd.csv");
        let (f, warnings) = simai_end_to_end::read(&p).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(f.runs.len(), 1);
        assert_eq!(f.runs[0].name, "test1");
        assert_eq!(f.runs[0].us[&Breakdown::ExposeTp], 633.0);
        assert_eq!(f.runs[0].us[&Breakdown::TotalComp], 1112.0);
        // the totals line is unrounded; the run row says 1745
        assert_eq!(f.total_time_us(), Some(1745.246));
        assert_eq!(f.layers.len(), 3);
        assert!(f.layers[2].is_sum());
    }

    #[test]
    fn each_simai_column_is_compared_with_the_summary_figure_it_measures() {
        let f = e2e("run, 100 (10%), 50 (5%), 200 (20%), 0 (0%), 30 (3%), 20 (2%), 600 (60%), 350 (35%), 1000");
        let s = Summary {
            iteration_time_ns: 1_100_000,
            compute_ns: 600_000,
            exposed_tp_ns: 190_000,
            exposed_dp_ns: 135_000,
            exposed_pp_ns: 60_000,
            ..Summary::default()
        };
        let c = compare_end_to_end(&s, &f, None, Path::new("EndToEnd.csv")).unwrap();
        let it = row(&c, "iteration_time_ns");
        assert_eq!(it.simai_ns, Some(1_000_000.0));
        assert!((it.rel_error.unwrap() - 0.10).abs() < 1e-12);
        assert_eq!(row(&c, "compute_ns").rel_error, Some(0.0));
        assert!((row(&c, "exposed_tp_ns").rel_error.unwrap() + 0.05).abs() < 1e-12);
        // dense and expert gradients together: 100 + 50 µs
        let dp = row(&c, "exposed_dp_ns");
        assert_eq!(dp.simai_ns, Some(150_000.0));
        assert_eq!(dp.simai_columns, "expose_dp_comm+expose_dp_ep_comm");
        assert!((dp.rel_error.unwrap() + 0.10).abs() < 1e-12);
        // SimAI's zero has no relative error, and its pipeline terms are formulas
        assert_eq!(row(&c, "exposed_ep_ns").rel_error, None);
        assert_eq!(row(&c, "exposed_pp_ns").simai_basis, Basis::Formula);
        assert!((row(&c, "exposed_pp_ns").rel_error.unwrap() - 1.0).abs() < 1e-12);
        assert!(c.not_compared.iter().any(|n| n.contains("per-flow")));
    }

    #[test]
    fn a_missing_column_is_named_and_several_runs_are_refused() {
        let text = "File name, Expose TP comm, Total time\nrun, 5 (50%), 10\n";
        let (f, _) = simai_end_to_end::parse(Path::new("e.csv"), text).unwrap();
        let c = compare_end_to_end(&Summary::default(), &f, None, Path::new("e.csv")).unwrap();
        assert_eq!(row(&c, "bubble_ns").simai_ns, None);
        assert!(
            c.not_compared
                .iter()
                .any(|n| n.contains("bubble_ns: the file has no bubble_time")),
            "{:?}",
            c.not_compared
        );

        let text = "File name, Total time\na, 10\nb, 12\n";
        let (f, _) = simai_end_to_end::parse(Path::new("e.csv"), text).unwrap();
        let e = compare_end_to_end(&Summary::default(), &f, None, Path::new("e.csv"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("e.csv") && e.contains("3") && e.contains("2 runs (a, b)"),
            "{e}"
        );
    }

    #[test]
    fn bad_cells_and_rows_name_file_line_and_field() {
        let p = Path::new("e.csv");
        let e = simai_end_to_end::parse(p, &format!("{HEADER}\nrun, 1, 2, x3, 4, 5, 6, 7, 8, 9\n"))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "e.csv:2: expose_tp_comm: `x3` is not a number (expected µs or GB/s, `nan` or `NONE`)"
        );
        let e = simai_end_to_end::parse(p, &format!("{HEADER}\nrun, 1, 2\n")).unwrap_err();
        assert!(
            e.to_string().starts_with("e.csv:2: summary row: 3 cells"),
            "{e}"
        );
        let e = simai_end_to_end::parse(p, "layer_name,run,fwd compute\n").unwrap_err();
        assert!(e.to_string().contains("not a SimAI EndToEnd.csv"), "{e}");
        let e = simai_end_to_end::parse(p, "total exposed comm,1,total comp\n").unwrap_err();
        assert!(e.to_string().starts_with("e.csv:1: totals:"), "{e}");
    }

    #[test]
    fn compare_takes_an_end_to_end_csv_for_ns3_and_writes_end_to_end_csv() {
        let d = tempfile::tempdir().unwrap();
        let replay = d.path().join("replay");
        std::fs::create_dir_all(&replay).unwrap();
        let s = Summary {
            backend: "replay".into(),
            trace: "t".into(),
            iteration_time_ns: 1_919_770,
            ..Summary::default()
        };
        ina3d::formats::summary_csv::write(&replay.join("summary.csv"), &s).unwrap();
        let simai = d.path().join("simai");
        std::fs::create_dir_all(&simai).unwrap();
        std::fs::copy(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/simai/EndToEnd.csv"),
            simai.join("EndToEnd.csv"),
        )
        .unwrap();
        let out = d.path().join("cmp");
        let o = Command::new(env!("CARGO_BIN_EXE_ina3d"))
            .args(["compare", "--replay"])
            .arg(&replay)
            .arg("--ns3")
            .arg(&simai)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        // 1919.770 µs against SimAI's 1745.246 µs: +10.00 %
        assert!(stdout.contains("+10.00 %"), "{stdout}");
        let csv = std::fs::read_to_string(out.join("end_to_end.csv")).unwrap();
        assert!(
            csv.starts_with("metric,simai_columns,replay_ns,simai_ns,rel_error,simai_basis\n"),
            "{csv}"
        );
        assert!(
            csv.contains("iteration_time_ns,total_time,1919770,1745246"),
            "{csv}"
        );

        std::fs::write(
            simai.join("EndToEnd.csv"),
            format!("{HEADER}\nrun, 1, 2, 3, 4, 5, 6, 7, 8, ten\n"),
        )
        .unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_ina3d"))
            .args(["compare", "--replay"])
            .arg(&replay)
            .arg("--ns3")
            .arg(simai.join("EndToEnd.csv"))
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("EndToEnd.csv:2: total_time: `ten`"), "{err}");
    }

    fn fixture(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/simai")
            .join(name)
    }

    #[test]
    fn simai_1_6_analytical_output_reads_with_its_nan_cells_front_end_and_job() {
        // Written by SimAI 1.6's SimAI_analytical (`-r new-dp4-`) from the workload
        // `export aicb` made of analytical_tp8dp4.toml: `-nan` bandwidths over no time.
        let (f, warnings) = simai_end_to_end::read(&fixture("new-dp4-EndToEnd.csv")).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(f.runs[0].name, "new-dp4-");
        assert_eq!(f.backend(), simai_end_to_end::Backend::Analytical);
        let grad = &f.layers[0];
        assert_eq!(grad.layer, "grad_all_reduce");
        let fwd_algbw = grad.values.iter().find(|(n, _)| n == "fwd_algbw").unwrap();
        assert_eq!(fwd_algbw.1, None, "`-nan` is a missing value");
        // The job the file shows: TP 8 (fwd busbw/algbw 279.40/159.66 = 1.75 = 2·7/8), DP 4
        // (wg 11.64/7.76 = 1.5 = 2·3/4), 4 micro-batches (16 / (1·4)) of 4 layers.
        let j = f.job();
        assert_eq!(j.tp.map(|t| t.0), Some(8));
        assert_eq!(j.dp.map(|t| t.0), Some(4));
        assert_eq!((j.microbatches, j.layers), (Some(4), Some(4)));
    }

    /// A replay directory whose summary names a trace with these header sizes.
    fn replay_of(d: &Path, tp: u32, dp: u32, mbs: u32, emb_ns: u64) -> std::path::PathBuf {
        let replay = d.join(format!("replay-dp{dp}"));
        std::fs::create_dir_all(&replay).unwrap();
        let trace = replay.join("t.csv");
        let mut h = ina3d::trace::TraceHeader::new();
        h.set("tp", tp)
            .set("pp", 1)
            .set("dp", dp)
            .set("microbatches", mbs)
            .set("num_layers", 4)
            .set("world", tp * dp);
        ina3d::trace::write(&trace, &h, &[]).unwrap();
        let s = Summary {
            backend: "replay".into(),
            trace: trace.display().to_string(),
            iteration_time_ns: 184_302_300,
            compute_ns: 70_206_000,
            exposed_tp_ns: 8_988_000,
            exposed_dp_ns: 96_332_000,
            exposed_emb_ns: emb_ns,
            ..Summary::default()
        };
        ina3d::formats::summary_csv::write(&replay.join("summary.csv"), &s).unwrap();
        replay
    }

    fn compare_cli(replay: &Path, simai: &Path, out: &Path) -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_ina3d"))
            .args(["compare", "--replay"])
            .arg(replay)
            .arg("--ns3")
            .arg(simai)
            .arg("-o")
            .arg(out)
            .output()
            .unwrap()
    }

    #[test]
    fn compare_finds_simai_s_prefixed_file_labels_it_analytical_and_leaves_the_embedding_out() {
        let d = tempfile::tempdir().unwrap();
        let simai = d.path().join("simai");
        std::fs::create_dir_all(&simai).unwrap();
        std::fs::copy(
            fixture("new-dp4-EndToEnd.csv"),
            simai.join("new-dp4-EndToEnd.csv"),
        )
        .unwrap();
        let replay = replay_of(d.path(), 8, 4, 4, 5_000_000);
        let out = d.path().join("cmp");
        let o = compare_cli(&replay, &simai, &out);
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(stdout.contains("SimAI analytical"), "{stdout}");
        assert!(!stdout.contains("not compared: exposed_pp_ns"), "{stdout}");
        let csv = std::fs::read_to_string(out.join("end_to_end.csv")).unwrap();
        // TP and DP from SimAI's bandwidth formulas, compute from the workload.
        assert!(
            csv.contains("exposed_tp_ns,expose_tp_comm,8988000,8988000.0,0.0,analytical"),
            "{csv}"
        );
        assert!(
            csv.contains("compute_ns,total_comp,70206000,70206000.0,0.0,workload"),
            "{csv}"
        );
        // SimAI's total exposed comm (105.320 ms = TP 8.988 + DP 96.332) against the
        // replay's TP + DP + EP, without its 5 ms of tied-embedding all-reduce.
        assert!(
            csv.contains(
                "exposed_tp+dp+ep_ns,total_exposed_comm,105320000,105320000.0,0.0,analytical"
            ),
            "{csv}"
        );
        assert!(stdout.contains("exposed_emb_ns (5000000 ns)"), "{stdout}");
    }

    #[test]
    fn a_simai_file_of_another_job_is_refused_naming_what_differs() {
        let d = tempfile::tempdir().unwrap();
        let replay = replay_of(d.path(), 8, 2, 8, 0);
        let o = compare_cli(
            &replay,
            &fixture("new-dp4-EndToEnd.csv"),
            &d.path().join("cmp"),
        );
        assert_eq!(o.status.code(), Some(2));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("new-dp4-EndToEnd.csv:4: job"), "{err}");
        assert!(
            err.contains("DP 4 in SimAI's file") && err.contains("2 in the trace"),
            "{err}"
        );
        assert!(
            err.contains("4 micro-batches in SimAI's rows, 8 in the trace"),
            "{err}"
        );
    }
}
