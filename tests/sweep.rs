//! Sweeps and the in-process `run`: grid expansion, cell ids, filters, bad grids, resume,
//! killed cells, collect, seeds, and the CLI around them.

use ina3d::pipeline::{OptionValue, Policy, RunSpec};
use ina3d::sweep::exec::{run_cell, CellRunner};
use ina3d::sweep::{self, Cell, CellState, Grid, Outcome};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn tiny() -> String {
    root()
        .join("traces/example/tiny.toml")
        .display()
        .to_string()
}

fn grid(text: &str) -> Result<Grid, String> {
    Grid::parse(Path::new("g.toml"), text).map_err(|e| e.to_string())
}

fn cells(text: &str) -> Vec<Cell> {
    grid(text).unwrap().expand().unwrap()
}

fn value(c: &Cell, key: &str) -> String {
    c.spec.get(key).unwrap()
}

// ---------------------------------------------------------------------------------------
// Expansion and ids
// ---------------------------------------------------------------------------------------

#[test]
fn axes_multiply_in_file_order_with_the_first_axis_slowest_and_zips_go_together() {
    let text = format!(
        "[base]\ninput = '{}'\nns3 = 'off'\n[axes]\nina-slots = [64, 128]\ncollective = ['ring', 'hd', 'dbt']\n[[zip]]\npp = [1, 2]\ndp = [4, 2]\n",
        tiny()
    );
    let cs = cells(&text);
    assert_eq!(cs.len(), 2 * 3 * 2);
    let got: Vec<(String, String, String, String)> = cs
        .iter()
        .map(|c| {
            (
                value(c, "ina-slots"),
                value(c, "collective"),
                value(c, "pp"),
                value(c, "dp"),
            )
        })
        .collect();
    assert_eq!(got[0], ("64".into(), "ring".into(), "1".into(), "4".into()));
    assert_eq!(got[1], ("64".into(), "ring".into(), "2".into(), "2".into()));
    assert_eq!(got[2], ("64".into(), "hd".into(), "1".into(), "4".into()));
    assert_eq!(
        got[11],
        ("128".into(), "dbt".into(), "2".into(), "2".into())
    );
    assert!(cs.iter().enumerate().all(|(i, c)| c.index == i));
    assert_eq!(
        grid(&text).unwrap().axis_names(),
        ["ina-slots", "collective", "pp", "dp"]
    );
    // every cell is its own run
    let mut ids: Vec<_> = cs.iter().map(|c| c.id.clone()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), cs.len());
}

#[test]
fn adding_an_axis_value_or_reordering_axes_keeps_every_other_cell_s_id() {
    let base = format!("[base]\ninput = '{}'\n", tiny());
    let a = cells(&format!(
        "{base}[axes]\nina-slots = [64, 128]\ncollective = ['ring', 'hd']\n"
    ));
    let b = cells(&format!(
        "{base}[axes]\ncollective = ['hd', 'ring']\nina-slots = [32, 64, 128]\n"
    ));
    let ids_b: Vec<_> = b.iter().map(|c| c.id.clone()).collect();
    for c in &a {
        assert!(ids_b.contains(&c.id), "cell {} lost its id", c.index);
    }
    assert_eq!(b.len(), 6);
    // an axis fixed in [base] instead gives the same id, and so does a default made explicit
    let one = cells(&format!(
        "{base}ina-slots = 64\ncollective = 'hd'\nina-window = 256\n"
    ));
    assert!(a.iter().any(|c| c.id == one[0].id));
}

#[test]
fn cell_ids_hash_only_what_differs_from_run_s_defaults() {
    let mut spec = RunSpec::default();
    let id0 = sweep::CellId::of(&spec);
    spec.set("ina-slots", &OptionValue::One("8192".into()))
        .unwrap(); // the default
    assert_eq!(sweep::CellId::of(&spec), id0);
    spec.set("ina-slots", &OptionValue::One("64".into()))
        .unwrap();
    assert_eq!(
        spec.canonical(),
        [("ina-slots".to_string(), "64".to_string())]
    );
    assert_ne!(sweep::CellId::of(&spec), id0);
    // the hash of exactly that text, FNV-1a 64
    assert_eq!(
        sweep::CellId::of(&spec).as_str(),
        format!("{:016x}", sweep::cell::fnv1a64(b"ina-slots=64\n"))
    );
}

#[test]
fn a_filter_keeps_only_the_cells_it_is_true_for() {
    let text = format!(
        "filter = \"not (collective == 'hd' and ina-slots > 64) and policies != 'ring'\"\n[base]\ninput = '{}'\n[axes]\nina-slots = [64, 128]\ncollective = ['ring', 'hd']\npolicies = [['ring'], ['ring', 'ina-dp']]\n",
        tiny()
    );
    let cs = cells(&text);
    // 8 cells; policies == 'ring' drops 4, (hd, 128) drops one more of the rest
    assert_eq!(cs.len(), 3);
    for c in &cs {
        assert_eq!(c.spec.policies, [Policy::Ring, Policy::InaDp]);
        assert!(!(value(c, "collective") == "hd" && value(c, "ina-slots") == "128"));
    }
    // options not in the grid read as their defaults (ina-window is 256)
    let keep_all = cells(&format!(
        "filter = 'ina-window == 256'\n[base]\ninput = '{}'\n",
        tiny()
    ));
    assert_eq!(keep_all.len(), 1);
}

#[test]
fn a_cell_toml_is_a_grid_of_that_one_cell_with_the_same_id() {
    let text = format!(
        "[base]\ninput = '{}'\nnum-layers = 8\nsequence-parallel = true\n[axes]\nseeds = [[0, 1], [2]]\nina-switches = ['tor', 'all']\n",
        tiny()
    );
    for c in cells(&text) {
        let again = cells(&c.toml(Path::new("g.toml")));
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].id, c.id, "{}", c.toml(Path::new("g.toml")));
        assert_eq!(again[0].spec, c.spec);
    }
}

// ---------------------------------------------------------------------------------------
// The study at scale (notebooks/study-scale.toml): the star docs/studies.md describes
// ---------------------------------------------------------------------------------------

/// The one-axis variations of a scale cell against its model's base cell, by name.
fn scale_variations(c: &Cell, base: &Cell) -> Vec<&'static str> {
    let kind = |c: &Cell| value(c, "topology").split(':').next().unwrap().to_string();
    let gpus = |c: &Cell| {
        ["tp", "pp", "dp"]
            .iter()
            .map(|k| value(c, k).parse::<u64>().unwrap())
            .product::<u64>()
    };
    let mut v = Vec::new();
    if gpus(c) != gpus(base) {
        v.push("gpus");
    }
    if value(c, "ina-slots") != value(base, "ina-slots") {
        v.push("slots");
    }
    if kind(c) != kind(base) {
        v.push("fabric");
    }
    if value(c, "pp") != value(base, "pp") {
        v.push("layout");
    }
    v
}

#[test]
fn the_scale_study_is_a_star_of_one_axis_variations_around_each_model_s_base_cell() {
    let path = root().join("notebooks/study-scale.toml");
    let g = Grid::read(&path).unwrap();
    let cells = g.expand().unwrap();
    let models = ["gpt3-175b", "llama2-70b", "mixtral-8x7b"];
    assert_eq!(cells.len(), 28, "10 cells for GPT-3, 9 for the others");
    for m in models {
        let of: Vec<&Cell> = cells.iter().filter(|c| value(c, "input") == m).collect();
        // the base: 8,192 GPUs on the k=32 fat-tree, 8,192 slots, layout A (the first listed)
        let base = of
            .iter()
            .find(|c| {
                value(c, "topology") == "fat-tree:k=32"
                    && value(c, "ina-slots") == "8192"
                    && value(c, "pp") == if m == "gpt3-175b" { "16" } else { "8" }
            })
            .unwrap_or_else(|| panic!("{m} has its base cell"));
        let mut seen: Vec<Vec<&str>> = of.iter().map(|c| scale_variations(c, base)).collect();
        seen.sort();
        let mut want: Vec<Vec<&str>> = vec![
            vec![],
            vec!["slots"],
            vec!["slots"],
            vec!["fabric"],
            vec!["fabric"],
            vec!["layout"],
            // 1,024 GPUs: its own base, then fabric and layout around it
            vec!["gpus"],
            vec!["gpus", "fabric"],
            vec!["gpus", "fabric"],
            vec!["gpus", "layout"],
        ];
        if m != "gpt3-175b" {
            // 65,536 slots only on GPT-3
            want.remove(1);
        }
        want.sort();
        assert_eq!(seen, want, "{m}: the cells vary one axis from the base");
        let slots: std::collections::BTreeSet<String> =
            of.iter().map(|c| value(c, "ina-slots")).collect();
        let want: &[&str] = if m == "gpt3-175b" {
            &["1024", "65536", "8192"]
        } else {
            &["1024", "8192"]
        };
        assert_eq!(slots, want.iter().map(|s| s.to_string()).collect());
    }
    for c in &cells {
        let s = &c.spec;
        assert_eq!(s.get("rate-model").unwrap(), "ideal");
        assert_eq!(s.get("seeds").unwrap(), "0,1");
        assert_eq!(
            s.get("flows").unwrap(),
            "false",
            "no per-flow files at scale"
        );
        // every fabric holds the job, with less than one leaf of 48 hosts left over
        let world: usize = ["tp", "pp", "dp"]
            .iter()
            .map(|k| value(c, k).parse::<usize>().unwrap())
            .product();
        let topo = ina3d::topology::Topology::from_spec(&value(c, "topology")).unwrap();
        let hosts = topo.hosts().len();
        assert!(
            (world..world + 48).contains(&hosts),
            "{}: {hosts} hosts for {world} GPUs",
            value(c, "topology")
        );
        if value(c, "topology").starts_with("leaf-spine") {
            // 3:1: every leaf's host links carry three times its spine links
            for leaf in topo.switches() {
                let (mut down, mut up) = (0u128, 0u128);
                for l in topo.links.iter().filter(|l| l.a == leaf || l.b == leaf) {
                    let other = if l.a == leaf { l.b } else { l.a };
                    match topo.kind(other) {
                        Some(ina3d::topology::NodeKind::Host) => down += l.rate.0 as u128,
                        Some(ina3d::topology::NodeKind::Switch) => up += l.rate.0 as u128,
                        _ => {}
                    }
                }
                assert!(
                    down == 0 || down == 3 * up,
                    "leaf {leaf:?}: {down} down, {up} up"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Bad grids: errors name file, line and column
// ---------------------------------------------------------------------------------------

#[test]
fn bad_grids_are_refused_naming_line_and_column() {
    let t = tiny();
    for (text, want) in [
        (
            "[axes]\nina-slotz = [1]\n".to_string(),
            "g.toml:2:1: axes.ina-slotz: unknown option `ina-slotz`",
        ),
        (
            "[axes]\nina-slots = [64, 'many']\n".to_string(),
            "g.toml:2:18: ina-slots: `many` is not a positive integer",
        ),
        (
            "[axes]\nina-slots = [64, 0]\n".to_string(),
            "g.toml:2:18: ina-slots: must be positive",
        ),
        (
            "[axes]\ncollective = ['ring', 'tree']\n".to_string(),
            "g.toml:2:23: collective: unknown collective algorithm `tree`",
        ),
        (
            "[base]\ninput = 'no-such-model'\n".to_string(),
            "g.toml:2:9: input",
        ),
        (
            "[base]\ntopology = 'fat-tree:k=3'\n".to_string(),
            "g.toml:2:12: topology",
        ),
        (
            "[axes]\ntp = []\n".to_string(),
            "g.toml:2:6: axes.tp: no values: the product would be empty",
        ),
        (
            "[[zip]]\ntp = [1, 2]\ndp = [4]\n".to_string(),
            "g.toml:3:6: zip.dp: 1 values where `tp` (line 2) has 2",
        ),
        (
            "[base]\ntp = 2\n[axes]\ntp = [1, 2]\n".to_string(),
            "g.toml:4:1: axes.tp: `tp` is already set on line 2",
        ),
        (
            "[axes]\ntp = [1, 1]\n".to_string(),
            "g.toml:2:10: axes: cells 0 (tp=1) and 1 (tp=1) are the same run",
        ),
        (
            "filter = 'tp >'\n[axes]\ntp = [1]\n".to_string(),
            "g.toml:1:15: filter: unexpected the end of the filter",
        ),
        (
            "filter = 'tpp > 1'\n[axes]\ntp = [1]\n".to_string(),
            "g.toml:1:11: filter: `tpp` is not an option",
        ),
        (
            "filter = 'tp > 4'\n[axes]\ntp = [1, 2]\n".to_string(),
            "g.toml:1:10: filter: the filter keeps none of the 2 cells",
        ),
        (
            "filter = 'collective > 4'\n".to_string(),
            "g.toml:1:22: filter: cannot compare text ('ring') with a number (4)",
        ),
        (
            "[axes]\ntp = [1, 2\n".to_string(),
            "g.toml:3:1: grid: invalid array; expected `]`",
        ),
        ("[axis]\ntp = [1]\n".to_string(), "g.toml:1:"),
        (
            "[axes]\ntp = [{ a = 1 }]\n".to_string(),
            "g.toml:2:7: tp: expected text, a number",
        ),
        (
            "[base]\nina = 'off'\n".to_string(),
            "g.toml:1:1: axes: cell [base]: --ina off: the INA policies",
        ),
        (
            format!("[base]\ninput = '{t}'\n[axes]\nseeds = ['0,0']\n"),
            "g.toml:4:10: seeds: seed 0 is named twice",
        ),
        (
            format!("[base]\ninput = '{t}'\n[axes]\nnum-layers = ['x']\n"),
            "g.toml:4:15: num-layers:",
        ),
    ] {
        let got = grid(&text).and_then(|g| g.expand().map(|_| ()).map_err(|e| e.to_string()));
        let e = got.expect_err(&text);
        assert!(e.starts_with(want), "{text}\n  got:  {e}\n  want: {want}");
    }
}

#[test]
fn a_product_beyond_the_cell_limit_is_refused_before_anything_is_allocated() {
    let many: Vec<String> = (1..=100).map(|i| i.to_string()).collect();
    let list = many.join(", ");
    let text =
        format!("[axes]\nina-slots = [{list}]\nina-window = [{list}]\nina-payload = [{list}]\n");
    let e = grid(&text).unwrap().expand().unwrap_err().to_string();
    assert!(e.contains("more than 100000 cells"), "{e}");
}

proptest::proptest! {
    /// Near-valid grids (known and unknown keys, good and bad values, filters) are either
    /// expanded or refused with an error naming the file and a line — never a panic.
    #[test]
    fn near_valid_grids_expand_or_are_refused_with_a_line(
        keys in proptest::collection::vec(0usize..8, 0..4),
        values in proptest::collection::vec(0usize..9, 1..4),
        zip in proptest::bool::ANY,
        filter in 0usize..6,
    ) {
        const KEYS: [&str; 8] = ["tp", "ina-slots", "collective", "ina", "seeds", "mfu", "nonsense", "policies"];
        const VALUES: [&str; 9] = ["1", "2", "0", "'ring'", "'hd'", "0.5", "[0, 1]", "'x'", "true"];
        const FILTERS: [&str; 6] = ["", "tp > 1", "tp ==", "collective == 'ring' or tp in [1, 2]", "nonsense > 1", "tp + 'a' > 1"];
        let list = values.iter().map(|&v| VALUES[v]).collect::<Vec<_>>().join(", ");
        let mut text = String::new();
        if filter > 0 {
            text.push_str(&format!("filter = \"{}\"\n", FILTERS[filter]));
        }
        text.push_str(if zip { "[[zip]]\n" } else { "[axes]\n" });
        let mut used = Vec::new();
        for &k in &keys {
            if !used.contains(&k) {
                used.push(k);
                text.push_str(&format!("{} = [{list}]\n", KEYS[k]));
            }
        }
        match grid(&text).and_then(|g| g.expand().map_err(|e| e.to_string())) {
            Ok(cs) => proptest::prop_assert!(!cs.is_empty()),
            Err(e) => proptest::prop_assert!(e.starts_with("g.toml:"), "{}", e),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Running cells: atomic directories, resume, failures, kills
// ---------------------------------------------------------------------------------------

fn two_cells(dir: &Path) -> (PathBuf, Vec<Cell>) {
    let g = dir.join("grid.toml");
    std::fs::write(
        &g,
        format!(
            "[base]\ninput = '{}'\n[axes]\nina-slots = [64, 128]\n",
            tiny()
        ),
    )
    .unwrap();
    let (_, cs) = sweep::prepare(&g, &dir.join("out")).unwrap();
    (g, cs)
}

#[test]
fn done_cells_are_skipped_failed_ones_retried_and_partial_ones_redone() {
    let d = tempfile::tempdir().unwrap();
    let (g, cs) = two_cells(d.path());
    let out = d.path().join("out");
    let runs = AtomicUsize::new(0);
    let fail_64 = std::sync::atomic::AtomicBool::new(true);
    let runner = |c: &Cell, dir: &Path, _: &Path, log: &mut dyn ina3d::pipeline::Reporter| {
        runs.fetch_add(1, Ordering::SeqCst);
        log.line("hello");
        if c.spec.job.ina.slots == 64 && fail_64.load(Ordering::SeqCst) {
            return Err("slots too few".to_string());
        }
        std::fs::write(dir.join("results.csv"), "policy\nring\n").unwrap();
        Ok(())
    };
    let outcomes = sweep::run_cells(&out, &g, &cs, 2, &runner, &|_| {});
    assert_eq!(outcomes[0], Outcome::Failed("slots too few".into()));
    assert_eq!(outcomes[1], Outcome::Done);
    let failed = out.join("cells").join(cs[0].id.as_str());
    assert_eq!(
        std::fs::read_to_string(failed.join("error.txt")).unwrap(),
        "slots too few\n"
    );
    assert!(!failed.join("results.csv").exists());
    assert_eq!(
        std::fs::read_to_string(failed.join("log.txt")).unwrap(),
        "hello\n"
    );
    assert!(std::fs::read_to_string(failed.join("cell.toml"))
        .unwrap()
        .contains("ina-slots = 64"));
    assert_eq!(
        sweep::state(&out, &cs[0].id),
        CellState::Failed("slots too few".into())
    );
    assert_eq!(sweep::state(&out, &cs[1].id), CellState::Done);
    // again: the done cell is skipped, the failed one retried (and now succeeds)
    fail_64.store(false, Ordering::SeqCst);
    let again = sweep::run_cells(&out, &g, &cs, 1, &runner, &|_| {});
    assert_eq!(again, [Outcome::Done, Outcome::Skipped]);
    assert_eq!(runs.load(Ordering::SeqCst), 3);
    assert!(!failed.join("error.txt").exists());
    // a leftover .tmp of a done cell is not read; of a missing cell, it is redone
    let tmp = out.join("cells").join(format!("{}.tmp", cs[1].id));
    std::fs::remove_dir_all(out.join("cells").join(cs[1].id.as_str())).unwrap();
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::write(tmp.join("results.csv"), "policy\nhalf\n").unwrap();
    assert_eq!(sweep::state(&out, &cs[1].id), CellState::Partial);
    assert_eq!(run_cell(&out, &g, &cs[1], &runner).unwrap(), Outcome::Done);
    assert!(!tmp.exists());
    let done = out
        .join("cells")
        .join(cs[1].id.as_str())
        .join("results.csv");
    assert_eq!(std::fs::read_to_string(done).unwrap(), "policy\nring\n");
}

#[test]
fn a_cell_that_dies_mid_run_leaves_no_results_under_its_final_name() {
    let d = tempfile::tempdir().unwrap();
    let (g, cs) = two_cells(d.path());
    let out = d.path().join("out");
    let dies: &CellRunner<'_> = &|_, dir, _, _| {
        std::fs::write(dir.join("results.csv"), "policy\nring\n").unwrap();
        panic!("killed half-way");
    };
    let o = run_cell(&out, &g, &cs[0], dies).unwrap();
    assert!(
        matches!(&o, Outcome::Failed(e) if e.contains("killed half-way")),
        "{o:?}"
    );
    let dir = out.join("cells").join(cs[0].id.as_str());
    assert!(!dir.join("results.csv").exists());
    assert!(dir.join("error.txt").exists());
    // a runner that claims success without results is a failure too
    let silent: &CellRunner<'_> = &|_, _, _, _| Ok(());
    let o = run_cell(&out, &g, &cs[1], silent).unwrap();
    assert_eq!(o, Outcome::Failed("the run wrote no results.csv".into()));
}

// ---------------------------------------------------------------------------------------
// The CLI (the binary): run, seeds, sweep, collect, Slurm script, kill
// ---------------------------------------------------------------------------------------

fn ina3d(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_ina3d"))
        .args(args)
        .current_dir(root())
        .output()
        .unwrap()
}

fn ok(o: &std::process::Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Every grid key is an `ina3d run` flag (booleans as --no-…; ns3 as --ns3/--no-ns3) and
/// every run flag but -o is a grid key: the two lists are one list.
#[test]
fn grid_keys_and_run_flags_are_the_same_options() {
    let o = ina3d(&["run", "--help"]);
    let help = String::from_utf8_lossy(&o.stdout).into_owned();
    let mut flags: Vec<String> = help
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("--"))
        .map(|w| {
            w.trim_end_matches([',', '.', ')', ']'])
                .split(['=', '[', '<'])
                .next()
                .unwrap()
                .to_string()
        })
        .filter(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
        .collect();
    flags.sort();
    flags.dedup();
    let flag = |k: &str| flags.iter().any(|f| f == k);
    for k in RunSpec::option_names() {
        let as_flag = match k {
            "input" => continue, // the positional argument
            "calibrate" | "traces" | "flows" => format!("no-{k}"),
            _ => k.to_string(),
        };
        assert!(flag(&as_flag), "grid key `{k}` has no run flag --{as_flag}");
    }
    for f in &flags {
        let key = match f.as_str() {
            // what is printed, not what runs
            "out" | "help" | "version" | "no-ns3" | "verbose" => continue,
            "no-calibrate" => "calibrate",
            "no-traces" => "traces",
            "no-flows" => "flows",
            other => other,
        };
        assert!(RunSpec::is_option(key), "run flag --{f} is not a grid key");
    }
}

/// The columns of a `results.csv` or `summary.csv` but wall times (which differ run to
/// run) and the trace's name (which names the run's directory).
fn simulated_columns(path: &Path) -> Vec<Vec<String>> {
    let mut r = csv::Reader::from_path(path).unwrap();
    let keep: Vec<usize> = r
        .headers()
        .unwrap()
        .iter()
        .enumerate()
        .filter(|(_, h)| !h.contains("wall_time") && *h != "trace")
        .map(|(i, _)| i)
        .collect();
    r.records()
        .map(|row| {
            let row = row.unwrap();
            keep.iter().map(|&i| row[i].to_string()).collect()
        })
        .collect()
}

/// `--no-flows` (grid key `flows = false`, what the study at scale runs): every replay
/// keeps its summary, links and switches (the last two byte for byte) but writes no
/// per-flow files, and the results are the same; ns-3, whose comparison joins the
/// per-flow files, is refused with it.
#[test]
fn without_flows_a_run_has_the_same_results_and_no_per_flow_files() {
    let d = tempfile::tempdir().unwrap();
    let input = tiny();
    let run = |name: &str, extra: &[&str]| {
        let out = d.path().join(name);
        let mut args = vec![
            "run",
            input.as_str(),
            "--no-ns3",
            "--no-traces",
            "--policies",
            "ring,ina-dp",
            "-o",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        ok(&ina3d(&args));
        out
    };
    let with = run("with", &[]);
    let without = run("without", &["--no-flows"]);
    assert_eq!(
        simulated_columns(&with.join("results.csv")),
        simulated_columns(&without.join("results.csv"))
    );
    for p in ["ring", "ina-dp"] {
        let (a, b) = (with.join(p).join("replay"), without.join(p).join("replay"));
        assert_eq!(
            simulated_columns(&a.join("summary.csv")),
            simulated_columns(&b.join("summary.csv"))
        );
        for f in ["links.csv", "switches.csv"] {
            assert_eq!(
                std::fs::read(a.join(f)).unwrap(),
                std::fs::read(b.join(f)).unwrap(),
                "{p}/replay/{f}"
            );
        }
        for f in ["fct.csv", "fct.txt"] {
            assert!(a.join(f).is_file(), "{p}/replay/{f} with flows");
            assert!(!b.join(f).exists(), "{p}/replay/{f} without flows");
        }
    }
    let o = ina3d(&[
        "run",
        &input,
        "--ns3",
        "--no-flows",
        "-o",
        d.path().join("refused").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let mut spec = RunSpec::default();
    spec.set("ns3", &OptionValue::One("on".into())).unwrap();
    spec.set("flows", &OptionValue::One("false".into()))
        .unwrap();
    let e = spec.validate().unwrap_err().to_string();
    assert!(e.contains("--no-flows"), "{e}");
}

#[test]
fn sweep_dry_run_lists_cells_and_the_slurm_script_names_the_pending_ones() {
    let d = tempfile::tempdir().unwrap();
    let (g, cs) = two_cells(d.path());
    let out = d.path().join("out2");
    let o = ina3d(&[
        "sweep",
        g.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--dry-run",
    ]);
    let listed = String::from_utf8_lossy(&o.stdout).into_owned();
    ok(&o);
    assert_eq!(listed.lines().count(), 2);
    assert!(
        listed.contains(cs[1].id.as_str()) && listed.contains("ina-slots=128"),
        "{listed}"
    );
    let o = ina3d(&[
        "sweep",
        g.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--slurm",
        "--dry-run",
        "--array-limit",
        "3",
        "--partition",
        "ci",
        "--time",
        "10",
    ]);
    ok(&o);
    let script = String::from_utf8_lossy(&o.stdout).into_owned();
    for want in [
        "#SBATCH --array=0-1%3",
        "#SBATCH --partition=ci",
        "#SBATCH --time=10",
        "--cell \"$SLURM_ARRAY_TASK_ID\"",
    ] {
        assert!(script.contains(want), "{want} not in\n{script}");
    }
    // sbatch missing: a clear error, status 2
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_ina3d"))
        .args([
            "sweep",
            g.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--slurm",
        ])
        .env("INA3D_SBATCH", d.path().join("no-sbatch"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("no-sbatch") && e.contains("not found"), "{e}");
}

#[test]
fn a_bad_grid_exits_2_naming_its_line() {
    let d = tempfile::tempdir().unwrap();
    let g = d.path().join("bad.toml");
    std::fs::write(&g, "[axes]\nina-slots = [64]\ncollectiv = ['ring']\n").unwrap();
    let o = ina3d(&[
        "sweep",
        g.to_str().unwrap(),
        "-o",
        d.path().join("o").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("bad.toml:3:1: axes.collectiv: unknown option"),
        "{e}"
    );
}

#[cfg(feature = "tables")]
mod tables {
    use super::*;
    use std::collections::BTreeMap;

    /// A CSV file as header → column of text.
    fn csv_columns(p: &Path) -> (Vec<String>, Vec<BTreeMap<String, String>>) {
        let mut r = csv::Reader::from_path(p).unwrap();
        let h: Vec<String> = r.headers().unwrap().iter().map(String::from).collect();
        let rows = r
            .records()
            .map(|rec| {
                h.iter()
                    .cloned()
                    .zip(rec.unwrap().iter().map(String::from))
                    .collect()
            })
            .collect();
        (h, rows)
    }

    #[test]
    fn run_in_process_gives_what_the_stand_alone_replay_of_its_trace_gives() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("run");
        ok(&ina3d(&[
            "run",
            &tiny(),
            "--no-ns3",
            "--policies",
            "ring,ina-dp",
            "-o",
            out.to_str().unwrap(),
        ]));
        let (h, rows) = csv_columns(&out.join("results.csv"));
        assert_eq!(h, ina3d::report::RESULTS_COLUMNS);
        assert_eq!(
            rows.iter()
                .map(|r| r["policy"].as_str())
                .collect::<Vec<_>>(),
            ["ring", "ina-dp"]
        );
        for p in ["ring", "ina-dp"] {
            let again = d.path().join(format!("again-{p}"));
            let trace = out.join(p).join("trace.csv.gz");
            ok(&ina3d(&[
                "replay",
                trace.to_str().unwrap(),
                "-o",
                again.to_str().unwrap(),
            ]));
            let (_, a) = csv_columns(&out.join(p).join("replay/summary.csv"));
            let (_, b) = csv_columns(&again.join("summary.csv"));
            let strip = |mut r: BTreeMap<String, String>| {
                r.remove("wall_time_ns");
                r
            };
            assert_eq!(strip(a[0].clone()), strip(b[0].clone()), "{p}");
            let row = rows.iter().find(|r| r["policy"] == p).unwrap();
            assert_eq!(row["iteration_time_ns"], b[0]["iteration_time_ns"]);
            let fct = |dir: &Path| std::fs::read(dir.join("fct.csv")).unwrap();
            assert_eq!(fct(&out.join(p).join("replay")), fct(&again));
        }
    }

    fn result(
        policy: &str,
        iteration_time_ns: u64,
        ns3: Option<u64>,
    ) -> ina3d::report::PolicyResult {
        ina3d::report::PolicyResult {
            policy: policy.into(),
            ina_slots: 64,
            replay: ina3d::fct::Summary {
                iteration_time_ns,
                dp_bytes: iteration_time_ns / 10,
                ..Default::default()
            },
            ns3: ns3.map(|t| ina3d::fct::Summary {
                iteration_time_ns: t,
                ..Default::default()
            }),
            plan: None,
        }
    }

    /// Worked by hand: ring 100, 110, 90, 120 and ina-dp 50, 100, 60, 80 over four seeds.
    #[test]
    fn the_seed_table_takes_medians_of_paired_speedups_and_rounds_integer_medians_half_up() {
        let rows =
            |r: u64, i: u64, n: Option<u64>| vec![result("ring", r, None), result("ina-dp", i, n)];
        let per_seed = vec![
            (0, rows(100, 50, Some(40))),
            (1, rows(110, 100, None)),
            (2, rows(90, 60, Some(41))),
            (3, rows(120, 80, None)),
        ];
        let table = ina3d::report::seeds_table(&per_seed).unwrap();
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.csv");
        table.write_csv(&p).unwrap();
        let (_, t) = csv_columns(&p);
        // ring: sorted 90 100 110 120 → (100 + 110) / 2 = 105; dp_bytes 9 10 11 12 → 10.5 → 11
        assert_eq!(t[0]["iteration_time_ns"], "105");
        assert_eq!(t[0]["dp_bytes"], "11");
        assert_eq!(t[0]["speedup_vs_ring"], "1.0");
        // ina-dp: sorted 50 60 80 100 → 70; min 50, max 100
        assert_eq!(t[1]["iteration_time_ns"], "70");
        assert_eq!(
            (
                t[1]["iteration_time_ns_min"].as_str(),
                t[1]["iteration_time_ns_max"].as_str()
            ),
            ("50", "100")
        );
        // speed-ups per seed: 2, 1.1, 1.5, 1.5 → median 1.5, range 1.1 … 2
        assert_eq!(t[1]["speedup_vs_ring"], "1.5");
        assert_eq!(t[1]["speedup_vs_ring_min"], "1.1");
        assert_eq!(t[1]["speedup_vs_ring_max"], "2.0");
        // ns-3 ran at two seeds: median of 40 and 41 is 40.5 → 41; the ring never: empty
        assert_eq!(t[1]["ns3_iteration_time_ns"], "41");
        assert_eq!(t[0]["ns3_iteration_time_ns"], "");
        assert_eq!(t[1]["seeds"], "0;1;2;3");
        // seeds that ran different policies are refused
        let bad = vec![
            (0, rows(100, 50, None)),
            (1, vec![result("ring", 100, None)]),
        ];
        assert!(ina3d::report::seeds_table(&bad)
            .unwrap_err()
            .to_string()
            .contains("seed 1"));
    }

    fn median(mut v: Vec<u64>) -> u64 {
        v.sort();
        let k = v.len();
        if k % 2 == 1 {
            v[k / 2]
        } else {
            (v[k / 2 - 1] + v[k / 2]).div_ceil(2)
        }
    }

    #[test]
    fn several_seeds_give_each_seed_its_table_and_medians_and_ranges_over_them() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("seeds");
        let topo = "fat-tree:k=4,nvlink=off";
        ok(&ina3d(&[
            "run",
            &tiny(),
            "--topology",
            topo,
            "--no-ns3",
            "--no-traces",
            "--policies",
            "ring,ina-dp",
            "--seeds",
            "0,1,2,3",
            "-o",
            out.to_str().unwrap(),
        ]));
        let (h, rows) = csv_columns(&out.join("results.csv"));
        let n = ina3d::report::RESULTS_COLUMNS.len();
        assert_eq!(&h[..n], &ina3d::report::RESULTS_COLUMNS[..]);
        assert_eq!(&h[n..], &ina3d::report::SEED_COLUMNS[..]);
        let per_seed: Vec<Vec<BTreeMap<String, String>>> = (0..4)
            .map(|s| csv_columns(&out.join(format!("seed-{s}/results.csv"))).1)
            .collect();
        for (i, row) in rows.iter().enumerate() {
            assert_eq!(row["seeds"], "0;1;2;3");
            let it: Vec<u64> = per_seed
                .iter()
                .map(|t| t[i]["iteration_time_ns"].parse().unwrap())
                .collect();
            assert_eq!(row["iteration_time_ns"], median(it.clone()).to_string());
            assert_eq!(
                row["iteration_time_ns_min"],
                it.iter().min().unwrap().to_string()
            );
            assert_eq!(
                row["iteration_time_ns_max"],
                it.iter().max().unwrap().to_string()
            );
            // each seed's speed-up pairs the policy with the ring of the same seed
            let sp: Vec<f64> = per_seed
                .iter()
                .map(|t| {
                    t[0]["iteration_time_ns"].parse::<f64>().unwrap()
                        / t[i]["iteration_time_ns"].parse::<f64>().unwrap()
                })
                .collect();
            let lo = sp.iter().cloned().fold(f64::INFINITY, f64::min);
            let hi = sp.iter().cloned().fold(0.0, f64::max);
            assert!((row["speedup_vs_ring_min"].parse::<f64>().unwrap() - lo).abs() < 1e-12);
            assert!((row["speedup_vs_ring_max"].parse::<f64>().unwrap() - hi).abs() < 1e-12);
        }
        // the seed is the ECMP seed of the trace and of the replay
        let s1 = std::fs::read_to_string(out.join("seed-1/ina-dp/replay/summary.csv")).unwrap();
        assert!(s1.contains("(in memory)"), "{s1}");
        // seed 0 alone is what a one-seed run writes
        let one = d.path().join("one");
        ok(&ina3d(&[
            "run",
            &tiny(),
            "--topology",
            topo,
            "--no-ns3",
            "--no-traces",
            "--policies",
            "ring,ina-dp",
            "-o",
            one.to_str().unwrap(),
        ]));
        let strip = |rows: Vec<BTreeMap<String, String>>| {
            rows.into_iter()
                .map(|mut r| {
                    r.remove("replay_wall_time_ns");
                    r
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(
            strip(csv_columns(&one.join("results.csv")).1),
            strip(per_seed[0].clone())
        );
    }

    #[test]
    fn a_local_sweep_collects_every_cell_and_policy_and_records_a_failing_cell() {
        let d = tempfile::tempdir().unwrap();
        let g = d.path().join("grid.toml");
        // tp = 3 does not divide the 8 GPUs: that cell fails when it runs, the rest go on.
        std::fs::write(
            &g,
            format!(
                "[base]\ninput = '{}'\nns3 = 'off'\ntraces = false\npolicies = ['ring', 'ina-dp']\n[axes]\nina-slots = [64, 8192]\ntp = [2, 3]\n",
                tiny()
            ),
        )
        .unwrap();
        let out = d.path().join("sw");
        let o = ina3d(&[
            "sweep",
            g.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--jobs",
            "2",
        ]);
        assert_eq!(
            o.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let (h, rows) = csv_columns(&out.join("sweep.csv"));
        assert_eq!(&h[..3], ["cell", "ina-slots", "tp"]);
        assert!(!h.iter().any(|c| c.ends_with("wall_time_ns")));
        assert_eq!(rows.len(), 2 * 2, "two good cells × two policies");
        let (_, cells) = csv_columns(&out.join("cells.csv"));
        assert_eq!(cells.iter().filter(|c| c["state"] == "failed").count(), 2);
        for c in cells.iter().filter(|c| c["state"] == "failed") {
            assert_eq!(c["tp"], "3");
            assert!(
                c["error"].contains("inconsistent")
                    || c["error"].contains("override")
                    || c["error"].contains("not divisible by tensor_model_parallel_size 3"),
                "{}",
                c["error"]
            );
        }
        // every sweep.csv row is its cell's results.csv row
        for r in &rows {
            let (_, res) = csv_columns(&out.join("cells").join(&r["cell"]).join("results.csv"));
            let src = res.iter().find(|x| x["policy"] == r["policy"]).unwrap();
            for (k, v) in src {
                if !k.ends_with("wall_time_ns") {
                    assert_eq!(&r[k], v, "{k}");
                }
            }
            let (_, summary) = csv_columns(
                &out.join("cells")
                    .join(&r["cell"])
                    .join(&r["policy"])
                    .join("replay/summary.csv"),
            );
            assert_eq!(r["iteration_time_ns"], summary[0]["iteration_time_ns"]);
        }
        // the picture of the done cells names each policy and how many cells it covers
        let svg = std::fs::read_to_string(out.join("sweep.svg")).unwrap();
        for name in ["ring", "ina-dp", "2 cells of"] {
            assert!(svg.contains(name), "{name} not in sweep.svg");
        }
        // collected again: the same bytes; a removed cell is reported missing (status 1)
        let before = std::fs::read(out.join("sweep.csv")).unwrap();
        let o = ina3d(&["sweep", "collect", out.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1));
        assert_eq!(std::fs::read(out.join("sweep.csv")).unwrap(), before);
        let gone = &rows[0]["cell"];
        std::fs::remove_dir_all(out.join("cells").join(gone)).unwrap();
        let o = ina3d(&["sweep", "collect", out.to_str().unwrap()]);
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains(&format!("{gone}: missing")), "{e}");
    }

    #[test]
    fn a_killed_sweep_leaves_no_results_and_the_next_run_completes_it() {
        let d = tempfile::tempdir().unwrap();
        let g = d.path().join("grid.toml");
        // the bundled 16-GPU example, ring and one INA policy (no planner) over 8 seeds:
        // a second or more per cell, so the kill lands mid-cell even when polling is slow
        // on a loaded machine
        let seeds = (0..8).map(|s| s.to_string()).collect::<Vec<_>>().join(",");
        std::fs::write(
            &g,
            format!("[base]\nns3 = 'off'\ntraces = false\nseeds = '{seeds}'\npolicies = ['ring', 'ina-dp']\n[axes]\nina-slots = [4096]\n"),
        )
        .unwrap();
        let out = d.path().join("sw");
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ina3d"))
            .args(["sweep", g.to_str().unwrap(), "-o", out.to_str().unwrap()])
            .current_dir(root())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let cells = out.join("cells");
        let tmp = loop {
            let t = std::fs::read_dir(&cells).ok().and_then(|mut r| {
                r.find_map(|e| {
                    e.ok()
                        .map(|e| e.path())
                        .filter(|p| p.extension().is_some_and(|x| x == "tmp"))
                })
            });
            if let Some(t) = t {
                break t;
            }
            assert!(
                child.try_wait().unwrap().is_none(),
                "the sweep ended before its cell started"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        child.kill().unwrap();
        child.wait().unwrap();
        let id = tmp.file_stem().unwrap().to_str().unwrap().to_string();
        assert!(
            !cells.join(&id).exists(),
            "the killed cell has a final directory"
        );
        let o = ina3d(&["sweep", "collect", out.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&o.stderr).contains(&format!("{id}: partial")));
        ok(&ina3d(&[
            "sweep",
            g.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ]));
        assert!(!tmp.exists());
        assert!(cells.join(&id).join("results.csv").exists());
    }
}
