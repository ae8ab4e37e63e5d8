//! `ina3d run`'s policies on cells of the study grid (`notebooks/study.toml`): the planner's
//! plans, replayed, against the ring and the fixed INA policies over ECMP seeds, and the
//! planner policies' refusals.
#![cfg(feature = "tables")]

use ina3d::pipeline::{error_chain, run, OptionValue, Policy, Reporter, RunSpec};
use ina3d::report::PolicyResult;
use ina3d::sweep::Grid;
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

struct Quiet;
impl Reporter for Quiet {
    fn line(&mut self, _: &str) {}
}

/// The study's cells whose options include every `(key, value)` of `pick`.
fn study_cells(pick: &[(&str, &str)]) -> Vec<RunSpec> {
    let path = root().join("notebooks/study.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let g = Grid::parse(&path, &text).unwrap();
    let mut cells: Vec<RunSpec> = g
        .expand()
        .unwrap()
        .into_iter()
        .map(|c| c.spec)
        .filter(|s| pick.iter().all(|(k, v)| s.get(k).as_deref() == Some(*v)))
        .collect();
    for s in &mut cells {
        s.set("seeds", &OptionValue::One("0,1".into())).unwrap();
        // the planner prices max-min fair rates (the ideal model's formulas,
        // docs/plan.md): the property is stated under the model it prices, where the
        // plan's own prediction error bounds the comparison
        s.set("rate-model", &OptionValue::One("ideal".into()))
            .unwrap();
    }
    cells
}

fn row(rows: &[PolicyResult], p: Policy) -> &PolicyResult {
    rows.iter().find(|r| r.policy == p.as_str()).unwrap()
}

/// On small study cells and two seeds, every planner policy's replayed iteration is no
/// slower than the ring, nor than any fixed INA tree policy on the same slots, beyond the
/// plan's own measured prediction error — and results.csv shows prediction and replay side by side.
#[test]
fn on_small_study_cells_a_replayed_plan_is_within_its_prediction_error_of_ring_and_every_fixed_ina_policy(
) {
    let cells = study_cells(&[
        ("input", "gpt3-13b"),
        ("ina-switches", "all"),
        ("tp", "2"),
        ("pp", "2"),
        ("topology", "fat-tree:k=4,gpus-per-server=2"),
    ]);
    let cells: Vec<RunSpec> = cells
        .into_iter()
        .filter(|s| ["256", "8192"].contains(&s.get("ina-slots").unwrap().as_str()))
        .collect();
    assert_eq!(cells.len(), 2, "the study grid has the gpt3-13b base cells");
    for spec in cells {
        let d = tempfile::tempdir().unwrap();
        let out = run(&spec, d.path(), d.path(), &mut Quiet).unwrap();
        let slots = spec.get("ina-slots").unwrap();
        assert_eq!(out.per_seed.len(), 2);
        for (seed, rows) in &out.per_seed {
            let ring = row(rows, Policy::Ring).replay.iteration_time_ns as f64;
            for p in [Policy::Plan, Policy::PlanExact] {
                let r = row(rows, p);
                let t = r.replay.iteration_time_ns as f64;
                let predicted = r
                    .plan
                    .as_ref()
                    .expect("a planner row has its plan")
                    .predicted_ns;
                let err = (predicted - t).abs() / t;
                assert!(
                    d.path()
                        .join(format!("seed-{seed}/{p}/plan.json"))
                        .is_file(),
                    "plan.json of {p} at seed {seed}"
                );
                assert!(
                    t <= ring * (1.0 + err),
                    "{slots} slots, seed {seed}: {p} {t} vs ring {ring} (error {err})"
                );
                // Rina is not in this list: where no aggregating ToR holds two members of
                // a group, the Rina baseline lowers its one-channel ring, an option the
                // planner does not have; at 256 slots it replays up to 9 % faster than the
                // plan (seed 0: 610 ms against 699 ms under DCQCN; 589 against 643 ms
                // under the ideal model). docs/plan.md#measured, issue 20.
                for f in [Policy::InaDp, Policy::InaTp, Policy::InaTpDp, Policy::Atp] {
                    let tf = row(rows, f).replay.iteration_time_ns as f64;
                    assert!(
                        t <= tf * (1.0 + err),
                        "{slots} slots, seed {seed}: {p} {t} slower than {f} {tf} (error {err})"
                    );
                }
            }
            for r in rows {
                assert_eq!(
                    r.plan.is_some(),
                    matches!(r.policy.as_str(), "plan" | "plan-exact" | "sharp"),
                    "{}",
                    r.policy
                );
            }
        }
        // the median table: predicted next to replayed on the planner rows only
        let text = std::fs::read_to_string(&out.results).unwrap();
        let mut lines = text.lines();
        let head: Vec<&str> = lines.next().unwrap().split(',').collect();
        let col = |n: &str| head.iter().position(|h| *h == n).unwrap();
        let (pol, pred, it) = (
            col("policy"),
            col("predicted_iteration_time_ns"),
            col("iteration_time_ns"),
        );
        for l in lines {
            let f: Vec<&str> = l.split(',').collect();
            let planner = matches!(f[pol], "plan" | "plan-exact" | "sharp");
            assert_eq!(!f[pred].is_empty(), planner, "{l}");
            assert!(f[it].parse::<u64>().unwrap() > 0);
        }
    }
}

/// The SHARP-like baseline is the planner under one tree per switch: its plan says so, and
/// no switch carries two trees of groups that may be active together.
#[test]
fn the_sharp_baseline_plans_with_one_tree_per_switch() {
    let mut spec = RunSpec::default();
    for (k, v) in [
        ("input", "traces/example/tiny.toml"),
        ("topology", "fat-tree:k=4,nvlink=off"),
        ("policies", "ring,sharp,plan-exact"),
        ("ns3", "off"),
        ("traces", "false"),
    ] {
        spec.set(k, &OptionValue::One(v.into())).unwrap();
    }
    spec.job.input = root()
        .join("traces/example/tiny.toml")
        .display()
        .to_string();
    let d = tempfile::tempdir().unwrap();
    run(&spec, d.path(), d.path(), &mut Quiet).unwrap();
    let sharp = ina3d::formats::plan_json::read(&d.path().join("sharp/plan.json")).unwrap();
    let plan = ina3d::formats::plan_json::read(&d.path().join("plan-exact/plan.json")).unwrap();
    assert_eq!(sharp.settings.tree_quota, Some(1));
    assert_eq!(plan.settings.tree_quota, None);
    // the quota can only cost: no plan under it predicts better than the proven optimum
    // without it (the heuristics' plans may: they are not optimal)
    assert_eq!(plan.solver.status, "optimal");
    assert!(sharp.prediction.iteration_ns >= plan.prediction.iteration_ns * (1.0 - 1e-9));
}

#[test]
fn planner_policies_plan_context_parallel_and_moe_jobs_and_any_host_algorithm() {
    let moe: &[(&str, &str)] = &[
        ("num-experts", "4"),
        ("ep", "2"),
        ("moe-router-topk", "2"),
        ("disable-bias-linear", "true"),
        ("sequence-parallel", "true"),
    ];
    for sets in [
        &[("cp", "2"), ("dp", "1")][..],
        &[("collective", "hd")][..],
        moe,
    ] {
        let mut spec = RunSpec::default();
        spec.job.input = root()
            .join("traces/example/tiny.toml")
            .display()
            .to_string();
        for (k, v) in sets.iter().chain(&[
            ("policies", "ring,plan"),
            ("ns3", "off"),
            ("traces", "false"),
        ]) {
            spec.set(k, &OptionValue::One((*v).into())).unwrap();
        }
        let d = tempfile::tempdir().unwrap();
        if let Err(e) = run(&spec, d.path(), d.path(), &mut Quiet) {
            panic!("{sets:?}: {}", error_chain(&e));
        }
        assert!(d.path().join("plan/plan.json").exists(), "{sets:?}");
    }
}

#[test]
fn a_non_positive_plan_time_limit_is_refused() {
    let mut spec = RunSpec::default();
    let e = spec
        .set("plan-time-limit", &OptionValue::One("0".into()))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("plan-time-limit") && e.contains("above 0 and at most 86400"),
        "{e}"
    );
}

/// `rate-model` reaches the replay of every policy: `run` under `dcqcn` gives the
/// iteration a standalone replay of the policy's own trace file gives under `dcqcn`, and
/// on the tiny job (queue pairs sharing ports, DCQCN cutting rates) not the `ideal` one.
#[test]
fn the_rate_model_option_is_the_one_each_policy_s_replay_runs_under() {
    use ina3d::formats::summary_csv;
    use ina3d::pipeline::replay_file;
    use ina3d::replay::RateModel;
    let iteration = |model: &str| {
        let mut spec = RunSpec::default();
        spec.job.input = root()
            .join("traces/example/tiny.toml")
            .display()
            .to_string();
        for (k, v) in [
            ("policies", "ring"),
            ("ns3", "off"),
            ("nccl-channels", "1"),
            ("rate-model", model),
        ] {
            spec.set(k, &OptionValue::One(v.into())).unwrap();
        }
        let d = tempfile::tempdir().unwrap();
        run(&spec, d.path(), d.path(), &mut Quiet).unwrap();
        let s = summary_csv::read(&d.path().join("ring/replay/summary.csv")).unwrap();
        let o = ina3d::pipeline::FileOptions {
            model: RateModel::Dcqcn,
            ..Default::default()
        };
        let file = replay_file(&d.path().join("ring/trace.csv.gz"), &o).unwrap();
        (s.iteration_time_ns, file.result.summary.iteration_time_ns)
    };
    let (dcqcn, file_dcqcn) = iteration("dcqcn");
    let (ideal, _) = iteration("ideal");
    assert_eq!(
        dcqcn, file_dcqcn,
        "run --rate-model dcqcn vs replay --rate-model dcqcn"
    );
    assert!(
        dcqcn > ideal,
        "DCQCN cuts rates on the tiny job: {dcqcn} vs {ideal} ns"
    );
}

/// Seeds run side by side on the machine's cores (`src/pipeline/run.rs`, `seed_workers`):
/// each seed's rows and files are those of that seed run alone, and the rows come back in
/// seed order, whichever seed finished first.
#[test]
fn seeds_run_side_by_side_give_what_each_seed_gives_alone() {
    let spec_for = |seeds: &str| {
        let mut spec = RunSpec::default();
        for (k, v) in [
            ("topology", "fat-tree:k=4,nvlink=off"),
            ("policies", "ring,ina-dp,atp"),
            ("ns3", "off"),
            ("seeds", seeds),
        ] {
            spec.set(k, &OptionValue::One(v.into())).unwrap();
        }
        spec.job.input = root()
            .join("traces/example/tiny.toml")
            .display()
            .to_string();
        spec
    };
    let together = tempfile::tempdir().unwrap();
    let all = run(
        &spec_for("3,0,2,1"),
        together.path(),
        together.path(),
        &mut Quiet,
    )
    .unwrap();
    let order: Vec<u64> = all.per_seed.iter().map(|s| s.0).collect();
    assert_eq!(order, [3, 0, 2, 1]);
    for (seed, rows) in &all.per_seed {
        let alone = tempfile::tempdir().unwrap();
        let one = run(
            &spec_for(&seed.to_string()),
            alone.path(),
            alone.path(),
            &mut Quiet,
        )
        .unwrap();
        let key = |r: &PolicyResult| {
            (
                r.policy.clone(),
                r.replay.iteration_time_ns,
                r.replay.exposed_dp_ns,
            )
        };
        let a: Vec<_> = rows.iter().map(key).collect();
        let b: Vec<_> = one.per_seed[0].1.iter().map(key).collect();
        assert_eq!(a, b, "seed {seed}");
        for p in ["ring", "ina-dp", "atp"] {
            let read = |d: &std::path::Path| std::fs::read(d.join("replay/fct.csv")).unwrap();
            assert_eq!(
                read(&together.path().join(format!("seed-{seed}/{p}"))),
                read(&alone.path().join(p)),
                "seed {seed}, {p}: fct.csv"
            );
        }
    }
}
