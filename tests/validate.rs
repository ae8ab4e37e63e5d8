//! The validation suite's CI subset: small cases run on the replayer and on the ns-3 glue
//! (TCP), asserting consistency only — every record done on both sides, payload bytes per
//! class conserved, traffic observed (checked inside `run_case`) — never error thresholds.

use ina3d::formats::validate_csv;
use ina3d::ns3::Transport;
use ina3d::pipeline::validate::{
    cases, rate_model_for, run_suite, run_trace_file, Ensemble, CI_CASES,
};
use ina3d::pipeline::{generate_trace, Job, JobSpec};

#[test]
fn the_ci_cases_run_on_both_back_ends_and_their_table_reads_back() {
    let d = tempfile::tempdir().unwrap();
    let ci: Vec<_> = cases()
        .into_iter()
        .filter(|c| CI_CASES.contains(&c.name))
        .collect();
    assert_eq!(ci.len(), CI_CASES.len());
    let ina3d::pipeline::validate::SuiteOutcome { rows, failed } = run_suite(
        &ci,
        Transport::Roce,
        rate_model_for(Transport::Roce),
        Ensemble {
            runs: 2,
            jitter: None,
        },
        d.path(),
        &mut |_, _, _| {},
    )
    .unwrap();
    let failed: Vec<String> = failed
        .iter()
        .map(|(n, e)| format!("{n}: {}", ina3d::pipeline::error_chain(e)))
        .collect();
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(rows.len(), CI_CASES.len());
    for r in &rows {
        assert!(r.records > 0 && r.iteration_error.is_finite(), "{r:?}");
        // the jittered run ran on both sides: a mean error and spreads, one packet's
        // jitter at the suite's 100 Gb/s NICs (1,048 B in 84 ns)
        assert_eq!((r.runs, r.jitter_ns), (2, 84), "{r:?}");
        assert!(
            r.iteration_error_mean.is_finite() && r.ns3_spread >= 0.0 && r.replay_spread >= 0.0,
            "{r:?}"
        );
    }
    assert!(d.path().join("ls2-ring-16/jitter-1/ns3/fct.csv").exists());
    assert!(d.path().join("ls2-ring-16/jitter-1/trace.csv").exists());
    // the bench case measured a busbw on both sides
    let b = rows.iter().find(|r| r.case == "bench-ring-ar-16").unwrap();
    assert!(b.bench_busbw_error.is_some_and(f64::is_finite), "{b:?}");
    assert!(d.path().join("bench-ring-ar-16/ns3/bench.csv").exists());
    assert_eq!(
        validate_csv::read(&d.path().join("validate.csv")).unwrap(),
        rows
    );
}

#[test]
fn the_suite_has_ten_cases_or_more_from_16_to_128_gpus() {
    let all = cases();
    assert!(all.len() >= 10);
    let gpus: Vec<u32> = all
        .iter()
        .filter_map(|c| c.spec.config().ok())
        .map(|c| c.world_size)
        .collect();
    assert!(gpus.contains(&16), "{gpus:?}");
    assert!(gpus.contains(&128), "{gpus:?}");
}

/// What issue 21 asked the suite to cover: oversubscription 2:1 to 4:1 with pipeline and
/// embedding traffic, INA sharing the fabric with host collectives, MoE all-to-all, a
/// double binary tree, 2 and 4 NCCL channels.
#[test]
fn the_suite_covers_oversubscribed_pipelines_ina_beside_host_rings_moe_dbt_and_channels() {
    let all = cases();
    let has = |f: &dyn Fn(&ina3d::pipeline::validate::Case) -> bool| all.iter().any(f);
    for ratio in [2, 3, 4] {
        let over = format!("oversub={ratio}");
        assert!(
            has(&|c| c.bench.is_none()
                && c.spec.topology.contains(&over)
                && c.spec.sizes.pp.unwrap_or(1) > 1),
            "a training case with PP on a {ratio}:1 fabric"
        );
    }
    assert!(has(&|c| c.spec.ina.mode != ina3d::trace::InaMode::Off
        && !c.spec.ina.classes.contains(&ina3d::record::Class::Pp)
        && c.spec.sizes.pp.unwrap_or(1) > 1
        && c.spec.topology.contains("oversub=4")));
    assert!(has(
        &|c| c.bench.is_none() && c.spec.sizes.ep.unwrap_or(1) > 1
    ));
    assert!(has(&|c| c.bench.is_none()
        && c.spec.collective == ina3d::trace::Algorithm::Dbt
        && c.spec.sizes.pp.unwrap_or(1) > 1));
    assert!(has(&|c| c.spec.nccl_channels == Some(4)));
    assert!(
        has(&|c| c.spec.nccl_channels.is_none()),
        "NCCL's default, 2 channels"
    );
}

/// A trace of the tiny example on a fabric the suite does not have (3 leaves, 2:1), as a
/// user's `ina3d trace` would write it.
fn user_trace(dir: &std::path::Path) -> std::path::PathBuf {
    let spec = JobSpec {
        input: concat!(env!("CARGO_MANIFEST_DIR"), "/traces/example/tiny.toml").into(),
        topology: "leaf-spine:leaves=3,spines=2,hosts-per-leaf=4,gpus-per-server=2,oversub=2"
            .into(),
        ..JobSpec::default()
    };
    let job = Job::prepare(&spec).unwrap();
    let opts = spec.trace_options().unwrap();
    let path = dir.join("my-job.csv.gz");
    generate_trace(&job, &opts, Some(&path), false, &mut |_| {}).unwrap();
    path
}

#[test]
fn a_trace_file_is_validated_as_a_case_of_its_own() {
    let d = tempfile::tempdir().unwrap();
    let trace = user_trace(d.path());
    let out = d.path().join("out");
    let ensemble = Ensemble {
        runs: 2,
        jitter: None,
    };
    let row = run_trace_file(
        &trace,
        None,
        Transport::Roce,
        rate_model_for(Transport::Roce),
        ensemble,
        &out,
    )
    .unwrap();
    // named by the file's stem, the job's world size from the header, both runs made
    assert_eq!((row.case.as_str(), row.gpus, row.runs), ("my-job", 8, 2));
    assert!(
        row.records > 0 && row.iteration_error_mean.is_finite(),
        "{row:?}"
    );
    for f in [
        "my-job/ns3/fct.csv",
        "my-job/replay/fct.csv",
        "my-job/jitter-1/ns3/fct.csv",
    ] {
        assert!(out.join(f).exists(), "{f}");
    }
    assert_eq!(
        validate_csv::read(&out.join("validate.csv")).unwrap(),
        vec![row]
    );
}

#[test]
fn a_trace_file_on_another_topology_than_its_header_s_is_refused_by_name() {
    let d = tempfile::tempdir().unwrap();
    let trace = user_trace(d.path());
    let e = run_trace_file(
        &trace,
        Some("fat-tree:k=4"),
        Transport::Roce,
        rate_model_for(Transport::Roce),
        Ensemble::default(),
        &d.path().join("out"),
    )
    .unwrap_err();
    let msg = ina3d::pipeline::error_chain(&e);
    assert!(
        msg.contains("my-job.csv.gz") && msg.contains("fat-tree:k=4"),
        "{msg}"
    );
    assert!(!d.path().join("out/validate.csv").exists());
    let missing = run_trace_file(
        &d.path().join("nope.csv"),
        None,
        Transport::Roce,
        rate_model_for(Transport::Roce),
        Ensemble::default(),
        &d.path().join("out"),
    )
    .unwrap_err();
    assert!(ina3d::pipeline::error_chain(&missing).contains("nope.csv"));
}
