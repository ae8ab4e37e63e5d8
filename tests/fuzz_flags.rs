//! Every numeric flag fuzzed through the command line (issue 37, item 7). The flags are
//! read from each subcommand's `--help`, so a new flag taking a value fails
//! [`every_flag_taking_a_value_is_fuzzed_or_said_not_to_be_a_number`] until it is listed in
//! [`NUMERIC`] (then fuzzed) or in [`NOT_NUMERIC`]. Each numeric flag is given extremes —
//! 0, -1, 2^32, 2^53 + 1, u64::MAX and past it, 1e308, 1e-300, NaN, ±inf, empty, 400
//! digits — on a cheap valid command: exit 0 with no infinite or NaN number in what it
//! wrote, or exit 2 with an error naming the flag; never a panic, a signal or a hang.
//! `INA3D_FUZZ_CASES` sets how many extremes each flag gets (default: see [`per_flag`]).

#[path = "fuzz/harness.rs"]
mod harness;

use harness::{cases, ina3d, judge, report, Rng, CASE_LIMIT, ROOT};
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Instant;

const FABRIC: &str = "fat-tree:k=4,gpus-per-server=2";
const TINY: &str = "traces/example/tiny.toml";

/// Flags whose value is a number or holds numbers, with how the number is written into
/// the value (`{}`: the extreme itself).
const NUMERIC: &[(&str, &str)] = &[
    // the job's layout and INA switch model, and the options every job command shares
    ("--tp", "{}"),
    ("--pp", "{}"),
    ("--dp", "{}"),
    ("--vpp", "{}"),
    ("--cp", "{}"),
    ("--ep", "{}"),
    ("--seed", "{}"),
    ("--ina-slots", "{}"),
    ("--ina-payload", "{}"),
    ("--ina-window", "{}"),
    ("--ina-switches", "{}"),
    ("--iterations", "{}"),
    ("--nvlink-step-latency", "{}"),
    ("--nccl-channels", "{}"),
    ("--mfu", "{}"),
    ("--calibration-factor", "{}"),
    ("--gpu", "fuzz:{}"),
    ("--set", "hidden_size={}"),
    ("--sizes", "{}"),
    // Megatron's own flags that take numbers
    ("--tensor-model-parallel-size", "{}"),
    ("--pipeline-model-parallel-size", "{}"),
    ("--virtual-pipeline-model-parallel-size", "{}"),
    ("--num-layers-per-virtual-pipeline-stage", "{}"),
    ("--context-parallel-size", "{}"),
    ("--data-parallel-size", "{}"),
    ("--world-size", "{}"),
    ("--num-layers", "{}"),
    ("--hidden-size", "{}"),
    ("--ffn-hidden-size", "{}"),
    ("--num-attention-heads", "{}"),
    ("--num-query-groups", "{}"),
    ("--seq-length", "{}"),
    ("--max-position-embeddings", "{}"),
    ("--micro-batch-size", "{}"),
    ("--global-batch-size", "{}"),
    ("--vocab-size", "{}"),
    ("--make-vocab-size-divisible-by", "{}"),
    ("--num-experts", "{}"),
    ("--moe-router-topk", "{}"),
    ("--expert-model-parallel-size", "{}"),
    ("--expert-tensor-parallel-size", "{}"),
    ("--moe-layer-freq", "{}"),
    ("--moe-expert-capacity-factor", "{}"),
    ("--moe-ffn-hidden-size", "{}"),
    ("--moe-shared-expert-intermediate-size", "{}"),
    // replay
    ("--timeline-ranks", "0,{}"),
    ("--timeline-max-events", "{}"),
    ("--timeline-links", "{}"),
    // plan and run
    ("--tree-quota", "{}"),
    ("--time-limit", "{}"),
    ("--slot-levels", "1,{}"),
    ("--replay-rounds", "{}"),
    ("--plan-time-limit", "{}"),
    ("--seeds", "0,{}"),
    // compare, sweep, validate, ns3 emit
    ("--link-tolerance", "{}"),
    ("--jobs", "{}"),
    ("--cell", "{}"),
    ("--array-limit", "{}"),
    ("--cpus-per-task", "{}"),
    ("--runs", "{}"),
    ("--jitter", "{}"),
    ("--slots", "{}"),
    ("--payload", "{}"),
    ("--window", "{}"),
];

/// Flags taking a value that is not a number: paths, names from a closed set (clap refuses
/// any other), free names and lists of names.
const NOT_NUMERIC: &[&str] = &[
    // paths and output places
    "--output",
    "--out",
    "--plan",
    "--timeline",
    "--from",
    "--topology",
    "--replay",
    "--ns3",
    "--emit",
    "--starts",
    "--glue",
    "--trace",
    "--suite",
    "--prefix",
    // keywords (clap's possible values) and lists of them
    "--ina",
    "--ina-classes",
    "--collective-bench",
    "--group",
    "--collective",
    "--ina-policy",
    "--routing",
    "--compute-model",
    "--moe-routing",
    "--rate-model",
    "--transport",
    "--objective",
    "--solver",
    "--require",
    "--forms",
    "--policies",
    "--tcp-connections",
    "--flavor",
    "--policy",
    "--fit",
    "--recompute-granularity",
    "--cp-comm-type",
    "--moe-token-dispatcher-type",
    "--normalization",
    "--position-embedding-type",
    // names: validation cases, published runs, a Slurm partition and time string, the
    // GPU type SimAI prints, environment variables of a launch script
    "--cases",
    "--runs-only",
    "--partition",
    "--time",
    "--gpu-type",
    "--env",
];

/// The subcommands, as their words.
const SUBCOMMANDS: &[&[&str]] = &[
    &["parse"],
    &["trace"],
    &["plan"],
    &["inspect"],
    &["replay"],
    &["compare"],
    &["run"],
    &["sweep"],
    &["cluster"],
    &["validate"],
    &["ns3", "emit"],
    &["ns3", "run"],
    &["ns3", "ingest"],
    &["export", "aicb"],
    &["export", "chakra"],
    &["sweep", "collect"],
];

/// The flags `ina3d SUB --help` lists with a value (`--name <VALUE>`).
fn value_flags(sub: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = sub.iter().map(|s| s.to_string()).collect();
    args.push("--help".into());
    let o = ina3d(&args, CASE_LIMIT);
    assert_eq!(o.code, Some(0), "{sub:?} --help: {}", o.stderr);
    let text = String::from_utf8(o.stdout).unwrap();
    let mut out = Vec::new();
    for l in text.lines() {
        let l = l.trim_start();
        let l = l
            .strip_prefix("-o, ")
            .or(l.strip_prefix("-j, "))
            .unwrap_or(l);
        let Some(rest) = l.strip_prefix("--") else {
            continue;
        };
        if let Some((name, tail)) = rest.split_once(' ') {
            if tail.starts_with('<') {
                out.push(format!("--{name}"));
            }
        }
    }
    out
}

#[test]
fn every_flag_taking_a_value_is_fuzzed_or_said_not_to_be_a_number() {
    let numeric: BTreeSet<&str> = NUMERIC.iter().map(|(f, _)| *f).collect();
    let other: BTreeSet<&str> = NOT_NUMERIC.iter().copied().collect();
    assert!(numeric.is_disjoint(&other));
    let mut seen = BTreeSet::new();
    let mut unlisted = Vec::new();
    for sub in SUBCOMMANDS {
        for f in value_flags(sub) {
            if !numeric.contains(f.as_str()) && !other.contains(f.as_str()) {
                unlisted.push(format!("ina3d {} {f}", sub.join(" ")));
            }
            seen.insert(f);
        }
    }
    assert!(
        unlisted.is_empty(),
        "flags taking a value in neither NUMERIC (fuzzed) nor NOT_NUMERIC: {unlisted:?}"
    );
    // and no list names a flag that is gone
    let stale: Vec<&&str> = numeric
        .iter()
        .chain(&other)
        .filter(|f| !seen.contains(**f))
        .collect();
    assert!(stale.is_empty(), "listed but in no --help: {stale:?}");
    // the subcommands are all here: `ina3d --help` lists no other
    let o = ina3d(&["--help".to_string()], CASE_LIMIT);
    let text = String::from_utf8(o.stdout).unwrap();
    let listed: BTreeSet<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    let ours: BTreeSet<&str> = SUBCOMMANDS.iter().map(|s| s[0]).collect();
    assert_eq!(listed, ours);
}

/// The values a numeric flag is set to.
const FLAG_EXTREMES: [&str; 16] = [
    "0",
    "-1",
    "1",
    "4294967296",
    "9007199254740993",
    "18446744073709551615",
    "18446744073709551616",
    "1e308",
    "1e-300",
    "nan",
    "inf",
    "-inf",
    "",
    "0.5",
    "1e20",
    "9999999999999999999999999999999999999999999999999999999999999999999999999999",
];

/// How many extremes each flag of a subcommand gets: `INA3D_FUZZ_CASES` (all 16 from
/// there on), else `default` — a fixed selection of the flag's own (seeded by its name)
/// that always holds u64::MAX and NaN.
fn per_flag(default: usize) -> usize {
    cases(default).min(FLAG_EXTREMES.len())
}

fn extremes_for(sub: &str, flag: &str, n: usize) -> Vec<&'static str> {
    let mut all: Vec<&str> = FLAG_EXTREMES.to_vec();
    // the two that broke most often first, the rest in the flag's own order
    let mut chosen = vec!["18446744073709551615", "nan"];
    all.retain(|v| !chosen.contains(v));
    let mut rng = Rng::new(&format!("{sub} {flag}"), 0);
    while !all.is_empty() {
        let i = rng.below(all.len());
        chosen.push(all.remove(i));
    }
    chosen.truncate(n);
    chosen
}

/// A subcommand's valid base command, and the flags it fuzzes there.
struct Sub {
    words: &'static [&'static str],
    /// The command without the flag, into `out`; `flag` is the one fuzzed (so flags it
    /// needs can be added).
    base: fn(&Path, &str) -> Vec<String>,
    /// Flags fuzzed: those of the subcommand's `--help` in NUMERIC, less `skip`.
    skip: &'static [&'static str],
    /// Extremes per flag in CI.
    per_flag: usize,
}

fn strings(a: &[&str]) -> Vec<String> {
    a.iter().map(|x| x.to_string()).collect()
}

fn run(sub: &Sub) {
    let name = sub.words.join(" ");
    let numeric: Vec<(&str, &str)> = NUMERIC.to_vec();
    let flags: Vec<String> = value_flags(sub.words)
        .into_iter()
        .filter(|f| numeric.iter().any(|(n, _)| n == f) && !sub.skip.contains(&f.as_str()))
        .collect();
    assert!(!flags.is_empty(), "{name}: no numeric flag to fuzz");
    let t0 = Instant::now();
    let mut failures = Vec::new();
    let (mut n, mut refused) = (0, 0);
    for flag in &flags {
        let template = numeric.iter().find(|(f, _)| f == flag).unwrap().1;
        for v in extremes_for(&name, flag, per_flag(sub.per_flag)) {
            let dir = tempfile::tempdir().unwrap();
            let out = dir.path().join("out");
            let mut args = (sub.base)(&out, flag);
            // `--flag=value`, so a value starting with `-` is not read as a flag
            args.push(format!("{flag}={}", template.replace("{}", v)));
            let o = ina3d(&args, CASE_LIMIT);
            n += 1;
            refused += usize::from(o.code == Some(2));
            // the flag, or the Megatron argument it sets (`--hidden-size`: hidden_size)
            let key = flag.trim_start_matches('-').replace('-', "_");
            let set_key = template.split('=').next().unwrap_or("");
            let names = [flag.as_str(), key.as_str(), set_key];
            let names: Vec<&str> = names.into_iter().filter(|s| s.len() > 2).collect();
            if let Some(why) = judge(&o, &names, Some(dir.path()), false) {
                failures.push(format!("  ina3d {name} {flag}={v}: {why}"));
            }
        }
    }
    report(&name, &failures, n, refused, t0.elapsed().as_secs_f64());
}

fn out_file(out: &Path, name: &str) -> String {
    out.join(name).display().to_string()
}

fn corpus(rel: &str) -> String {
    Path::new(ROOT)
        .join("tests/fuzz/corpus")
        .join(rel)
        .display()
        .to_string()
}

#[test]
fn parse_flags() {
    run(&Sub {
        words: &["parse"],
        base: |_, _| strings(&["parse", TINY, "--json"]),
        skip: &[],
        per_flag: 6,
    });
}

#[test]
fn trace_flags() {
    run(&Sub {
        words: &["trace"],
        base: |out, flag| {
            let mut a = strings(&["trace", TINY, "--topology", FABRIC]);
            if flag == "--sizes" {
                a.extend(strings(&["--collective-bench", "all-reduce"]));
            }
            a.extend(["-o".into(), out_file(out, "t.csv")]);
            a
        },
        skip: &[],
        per_flag: 8,
    });
}

#[test]
fn replay_flags() {
    run(&Sub {
        words: &["replay"],
        base: |out, flag| {
            let mut a = strings(&["replay", "--from", TINY, "--topology", FABRIC]);
            a.extend(strings(&["--rate-model", "ideal", "-o"]));
            a.push(out.display().to_string());
            if flag.starts_with("--timeline-") {
                a.extend(["--timeline".into(), out_file(out, "timeline.json")]);
            }
            a
        },
        skip: &[],
        per_flag: 3,
    });
}

#[test]
fn export_flags() {
    for (kind, out) in [("aicb", "w.txt"), ("chakra", "")] {
        run(&Sub {
            words: if kind == "aicb" {
                &["export", "aicb"]
            } else {
                &["export", "chakra"]
            },
            base: if out.is_empty() {
                |o, _| strings(&["export", "chakra", TINY, "-o", &o.display().to_string()])
            } else {
                |o, _| strings(&["export", "aicb", TINY, "-o", &out_file(o, "w.txt")])
            },
            skip: &[],
            per_flag: 2,
        });
    }
}

/// `plan` solves and replays (seconds on a debug build): its own flags, and the job's
/// through `trace` and `replay`, which read them with the same code.
#[test]
fn plan_and_run_flags() {
    let job: &[&str] = &[
        "--tp",
        "--pp",
        "--dp",
        "--vpp",
        "--cp",
        "--ep",
        "--ina-slots",
        "--ina-payload",
        "--ina-window",
        "--ina-switches",
        "--iterations",
        "--nvlink-step-latency",
        "--nccl-channels",
        "--mfu",
        "--calibration-factor",
        "--gpu",
        "--set",
        "--tensor-model-parallel-size",
        "--pipeline-model-parallel-size",
        "--virtual-pipeline-model-parallel-size",
        "--num-layers-per-virtual-pipeline-stage",
        "--context-parallel-size",
        "--data-parallel-size",
        "--world-size",
        "--num-layers",
        "--hidden-size",
        "--ffn-hidden-size",
        "--num-attention-heads",
        "--num-query-groups",
        "--seq-length",
        "--max-position-embeddings",
        "--micro-batch-size",
        "--global-batch-size",
        "--vocab-size",
        "--make-vocab-size-divisible-by",
        "--num-experts",
        "--moe-router-topk",
        "--expert-model-parallel-size",
        "--expert-tensor-parallel-size",
        "--moe-layer-freq",
        "--moe-expert-capacity-factor",
        "--moe-ffn-hidden-size",
        "--moe-shared-expert-intermediate-size",
    ];
    run(&Sub {
        words: &["plan"],
        base: |out, flag| {
            let mut a = strings(&["plan", TINY, "--topology", FABRIC, "--solver", "heuristic"]);
            if flag != "--replay-rounds" {
                a.extend(strings(&["--replay-rounds", "0"]));
            }
            a.extend(["-o".into(), out_file(out, "plan.json")]);
            a
        },
        skip: job,
        per_flag: 3,
    });
    run(&Sub {
        words: &["run"],
        base: |out, flag| {
            let mut a = strings(&["run", TINY, "--no-ns3", "--policies", "ring"]);
            if flag != "--seeds" {
                a.extend(strings(&["--seeds", "0"]));
            }
            a.extend(["-o".into(), out.display().to_string()]);
            a
        },
        skip: job,
        per_flag: 4,
    });
}

#[test]
fn sweep_validate_and_ns3_emit_flags() {
    run(&Sub {
        words: &["sweep"],
        base: |out, flag| {
            let mut a = strings(&["sweep", &corpus("sweep/grid.toml"), "--dry-run"]);
            if matches!(flag, "--array-limit" | "--cpus-per-task") {
                a.push("--slurm".into());
            }
            a.extend(["-o".into(), out.display().to_string()]);
            a
        },
        skip: &[],
        per_flag: 6,
    });
    // `--list` runs no case: the flags are checked where they are parsed
    run(&Sub {
        words: &["validate"],
        base: |out, _| strings(&["validate", "--list", "-o", &out.display().to_string()]),
        skip: &[],
        per_flag: 6,
    });
    run(&Sub {
        words: &["ns3", "emit"],
        base: |out, _| {
            let t = corpus("trace/t.csv");
            strings(&["ns3", "emit", &t, "-o", &out.display().to_string()])
        },
        skip: &[],
        per_flag: 6,
    });
}

/// Not yet run against a build with polars: see `fuzz_readers`'s compare target.
#[cfg(feature = "tables")]
#[test]
#[ignore = "not yet checked against a polars build"]
fn compare_flags() {
    run(&Sub {
        words: &["compare"],
        base: |out, _| {
            strings(&[
                "compare",
                "--replay",
                &corpus("compare/replay"),
                "--ns3",
                &corpus("compare/ns3"),
                "-o",
                &out.display().to_string(),
            ])
        },
        skip: &[],
        per_flag: 8,
    });
}
