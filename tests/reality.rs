//! The published-run suite (`traces/reality/runs.toml`, `make reality`): the file the
//! repository ships stays a valid suite whose every row builds, and bad suites are refused
//! naming the file, the run and the field. (The prediction errors themselves are measured
//! by `make reality`, not asserted: docs/compute.md#the-published-run-suite.)

use ina3d::pipeline::reality::{self, RunGroup};
use ina3d::pipeline::Job;
use std::path::Path;

fn suite_path() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(reality::SUITE)
}

#[test]
fn the_shipped_suite_has_fit_and_held_out_rows_that_all_build_on_their_fabrics() {
    let runs = reality::load_suite(&suite_path()).unwrap();
    assert!(runs.len() >= 15, "{} rows", runs.len());
    let held = runs.iter().filter(|r| r.group == RunGroup::HeldOut).count();
    assert!(
        held >= 8 && held < runs.len(),
        "{held} held-out of {}",
        runs.len()
    );
    let base = suite_path().parent().unwrap().to_path_buf();
    for r in &runs {
        assert!(
            !r.source.trim().is_empty() && !r.derivation.trim().is_empty(),
            "{}",
            r.id
        );
        let job = Job::prepare(&reality::job_spec(r, &base, reality::Constants::default()))
            .unwrap_or_else(|e| panic!("{}: {e}", r.id));
        // the layout is the row's, and the fabric holds it
        assert_eq!(
            job.workload.world(),
            r.tp * r.pp * r.dp * r.cp.unwrap_or(1),
            "{}",
            r.id
        );
        assert!(
            job.topology.gpus.len() >= job.workload.world() as usize,
            "{}",
            r.id
        );
    }
}

#[test]
fn a_bad_suite_is_refused_naming_the_file_the_run_and_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let row = |id: &str, gpu: &str, ms: &str| {
        format!(
            "[[run]]\nid = \"{id}\"\ngroup = \"fit\"\nsource = \"s\"\nderivation = \"d\"\ngpu = \"{gpu}\"\ntopology = \"superpod:gen=a100,servers=1\"\npublished_ms = {ms}\ninput = \"gpt3-1.3b\"\ntp = 1\npp = 1\ndp = 8\n"
        )
    };
    for (text, want) in [
        (row("a", "a100", "nan"), "run `a`: published_ms"),
        (row("a", "v100", "10.0"), "run `a`: gpu"),
        (
            format!("{}{}", row("a", "a100", "1.0"), row("a", "a100", "2.0")),
            "run `a`: id",
        ),
        (
            row("a", "a100", "1.0").replace("group = \"fit\"", "group = \"other\""),
            "group",
        ),
        (format!("{}colour = 1\n", row("a", "a100", "1.0")), "colour"),
    ] {
        let p = dir.path().join("runs.toml");
        std::fs::write(&p, text).unwrap();
        let e = reality::load_suite(&p).unwrap_err().to_string();
        assert!(
            e.contains("runs.toml") && e.contains(want),
            "{e} (wanted {want})"
        );
    }
}
