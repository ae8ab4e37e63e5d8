//! Readers refuse what is not consistent (issue 37, item 5): each input below was accepted
//! silently before — a default standing in for a NaN, a cut trace replayed in part, a
//! header contradicting its own records or the fabric — and is now refused with exit-2
//! material naming the file, the line and the field.

use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
/// Two GPUs per server: TP runs on NVLink inside a server, so traces have nvlink records.
const FABRIC: &str = "fat-tree:k=4,gpus-per-server=2";

/// `ina3d ARGS` in the crate root: (exit code, stderr).
fn ina3d(args: &[&str]) -> (Option<i32>, String) {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_ina3d"))
        .args(args)
        .current_dir(ROOT)
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The tiny job's trace (`extra` flags added) as text, written by `ina3d trace`.
fn tiny_trace(dir: &Path, extra: &[&str]) -> String {
    let out = dir.join("made.csv");
    let mut args = vec![
        "trace",
        "traces/example/tiny.toml",
        "--topology",
        FABRIC,
        "-o",
    ];
    args.push(out.to_str().unwrap());
    args.extend_from_slice(extra);
    let (code, err) = ina3d(&args);
    assert_eq!(code, Some(0), "{err}");
    std::fs::read_to_string(out).unwrap()
}

/// `text` written to `dir/name`, then replayed in-process: the error chain, or `None`.
fn replay_text(dir: &Path, name: &str, text: &str) -> Option<String> {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    ina3d::pipeline::replay_file(&p, &ina3d::pipeline::FileOptions::default())
        .err()
        .map(|e| ina3d::pipeline::error_chain(&e))
}

/// The 1-based line of `text` starting with `prefix`.
fn line_of(text: &str, prefix: &str) -> usize {
    1 + text
        .lines()
        .position(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line `{prefix}`"))
}

/// `text` with its line starting with `prefix` replaced by `with`.
fn replace_line(text: &str, prefix: &str, with: &str) -> String {
    let n = line_of(text, prefix);
    text.lines()
        .enumerate()
        .map(|(i, l)| if i + 1 == n { with } else { l })
        .map(|l| format!("{l}\n"))
        .collect()
}

/// A plain trace cut at a line boundary replayed what was left (103 of 264 records, exit
/// 0); now its missing end line names the cut. A count that disagrees with the records,
/// and a record after the end line, are refused too. A trace written before the end line
/// existed (no `end_marker` key) is still read whole.
#[test]
fn a_plain_trace_cut_at_a_line_boundary_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let text = tiny_trace(d.path(), &[]);
    assert!(replay_text(d.path(), "whole.csv", &text).is_none());
    let records = text
        .lines()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
        .count();
    assert!(text.ends_with(&format!("\n# end records={records}\n")));
    let lines: Vec<&str> = text.lines().collect();
    let cut: String = lines[..lines.len() / 2]
        .iter()
        .map(|l| format!("{l}\n"))
        .collect();
    let e = replay_text(d.path(), "cut.csv", &cut).expect("a cut trace is refused");
    assert!(
        e.contains(&format!("cut.csv:{}: end:", lines.len() / 2)) && e.contains("cut short"),
        "{e}"
    );
    let end = line_of(&text, "# end records=");
    let miscounted = replace_line(
        &text,
        "# end records=",
        &format!("# end records={}", records + 1),
    );
    let e = replay_text(d.path(), "count.csv", &miscounted).unwrap();
    assert!(
        e.contains(&format!("count.csv:{end}:1: end:"))
            && e.contains(&format!(
                "counts {} records, the file holds {records}",
                records + 1
            )),
        "{e}"
    );
    let last = lines[end - 2];
    let after = format!(
        "{text}{}\n",
        last.replacen(last.split(',').next().unwrap(), "99999", 1)
    );
    let e = replay_text(d.path(), "after.csv", &after).unwrap();
    assert!(e.contains(&format!("after.csv:{}:1: end:", end + 1)), "{e}");
    // an older trace: neither the header key nor the end line
    let old: String = text
        .lines()
        .filter(|l| !l.starts_with("# end_marker=") && !l.starts_with("# end records="))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(replay_text(d.path(), "old.csv", &old).is_none());
}

/// Header values that contradict the job or make compute meaningless: a world size that
/// is not tp·cp·pp·dp, a calibration factor of NaN or −1, an MFU of 0. Each names its line
/// and key; the CLI exits 2.
#[test]
fn header_values_that_contradict_the_job_are_refused_at_their_line() {
    let d = tempfile::tempdir().unwrap();
    let text = tiny_trace(d.path(), &[]);
    // tiny.toml: TP2 × PP2 × DP2 = 8
    for (key, bad, want) in [
        (
            "world",
            "9",
            "world: 9 GPUs, but tp 2 × cp 1 × pp 2 × dp 2 = 8",
        ),
        (
            "calibration_factor",
            "nan",
            "calibration_factor: `nan` is not a number above 0",
        ),
        (
            "calibration_factor",
            "-1",
            "calibration_factor: `-1` is not a number above 0",
        ),
        ("mfu", "0", "mfu: `0` is not a number above 0 and at most 1"),
    ] {
        let prefix = format!("# {key}=");
        let line = line_of(&text, &prefix);
        let crafted = replace_line(&text, &prefix, &format!("{prefix}{bad}"));
        let e = replay_text(d.path(), "h.csv", &crafted).expect(key);
        assert!(
            e.contains(&format!("h.csv:{line}:")) && e.contains(want),
            "{key}={bad}: {e}"
        );
    }
    let (code, err) = ina3d(
        &["replay", d.path().join("h.csv").to_str().unwrap(), "-o"]
            .into_iter()
            .chain([d.path().join("r").to_str().unwrap()])
            .collect::<Vec<_>>(),
    );
    assert_eq!(code, Some(2), "{err}");
}

/// A trace replayed on a topology other than the one it was made on (its `topology_hash`
/// no longer that of the named topology — an edited topology file, or an edited header)
/// is refused naming both hashes.
#[test]
fn a_trace_on_another_topology_than_its_hash_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let text = tiny_trace(d.path(), &[]);
    let line = text
        .lines()
        .find(|l| l.starts_with("# topology_hash="))
        .unwrap();
    let made = line.trim_start_matches("# topology_hash=");
    let crafted = replace_line(
        &text,
        "# topology_hash=",
        "# topology_hash=0123456789abcdef",
    );
    let e = replay_text(d.path(), "hash.csv", &crafted).unwrap();
    let at = line_of(&crafted, "# topology_hash=");
    assert!(
        e.contains(&format!("hash.csv:{at}: topology_hash"))
            && e.contains("hash 0123456789abcdef")
            && e.contains(&format!("of hash {made}")),
        "{e}"
    );
}

/// Records that contradict each other or the fabric: an NVLink record between servers, an
/// aggregation of one member, an `agg_fanin` that is not the number of edges into its
/// switch.
#[test]
fn records_inconsistent_with_the_fabric_or_each_other_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let text = tiny_trace(d.path(), &[]);
    // record 0 is TP's first all-reduce between GPUs 0 and 1 (server 0); GPU 4 is on
    // server 2 (two GPUs per server)
    let first = text.lines().find(|l| l.contains(",nvlink,")).unwrap();
    let f: Vec<&str> = first.split(',').collect();
    assert_eq!((f[1], f[2]), ("0", "1"), "{first}");
    let crossed = text.replacen(
        &format!("\n{first}\n"),
        &format!("\n{}\n", first.replacen(",0,1,", ",0,4,", 1)),
        1,
    );
    let e = replay_text(d.path(), "nvl.csv", &crossed).unwrap();
    let line = line_of(&text, first);
    assert!(
        e.contains(&format!("nvl.csv:{line}:5: dst:"))
            && e.contains("node 0 is on server 0 and node 4 on server 2"),
        "{e}"
    );
    let ina = tiny_trace(d.path(), &["--ina", "hierarchical"]);
    // the first up edge: its group_size, and its fan-in at its switch
    let up = ina
        .lines()
        .find(|l| l.contains(",ina,") && l.contains(",up,"))
        .unwrap();
    let mut f: Vec<String> = up.split(',').map(str::to_string).collect();
    let line = line_of(&ina, up);
    let fanin: u32 = f[18].parse().unwrap();
    let same = ina
        .lines()
        .filter(|l| {
            let g: Vec<&str> = l.split(',').collect();
            g.len() > 19 && g[7] == "ina" && g[16] == f[16] && g[17] == f[17] && g[19] == "up"
        })
        .count();
    assert_eq!(
        same as u32, fanin,
        "the generator's fan-in is its edge count"
    );
    let mut one = f.clone();
    one[15] = "1".into();
    let e = replay_text(d.path(), "one.csv", &ina.replacen(up, &one.join(","), 1)).unwrap();
    assert!(
        e.contains(&format!("one.csv:{line}:")) && e.contains("at least 2 members"),
        "{e}"
    );
    f[18] = (fanin + 2).to_string();
    let e = replay_text(d.path(), "fanin.csv", &ina.replacen(up, &f.join(","), 1)).unwrap();
    assert!(
        e.contains(&format!("fanin.csv:{line}: agg_fanin:"))
            && e.contains(&format!(
                "agg_fanin {}, but the trace has {fanin} up edge(s)",
                fanin + 2
            )),
        "{e}"
    );
}

/// `global_batch_size = nan` gave the job its default of 2; `inf` likewise. Now refused,
/// naming the file and the key's line.
#[test]
fn toml_nan_and_inf_are_refused_not_read_as_absent() {
    let d = tempfile::tempdir().unwrap();
    let base = std::fs::read_to_string(Path::new(ROOT).join("traces/example/tiny.toml")).unwrap();
    for v in ["nan", "inf", "-inf"] {
        let text = replace_line(
            &base,
            "global_batch_size",
            &format!("global_batch_size = {v}"),
        );
        let line = line_of(&text, "global_batch_size");
        let p = d.path().join("job.toml");
        std::fs::write(&p, &text).unwrap();
        let out = d.path().join("t.csv");
        let (code, e) = ina3d(&[
            "trace",
            p.to_str().unwrap(),
            "--topology",
            FABRIC,
            "-o",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, Some(2), "{v}: {e}");
        assert!(
            e.contains(&format!("job.toml:{line}:1: global_batch_size:"))
                && e.contains("not a finite number"),
            "{v}: {e}"
        );
    }
}

/// A launch script whose loop never ends was read as if the loop had stopped after 10,000
/// turns (exit 0); now the reader refuses it, naming the script and the loop's line.
#[test]
fn a_launch_script_with_an_endless_loop_is_refused_at_the_loop() {
    let d = tempfile::tempdir().unwrap();
    let script = d.path().join("run.sh");
    std::fs::write(
        &script,
        "#!/bin/bash\nN=0\nwhile true; do\n  N=$((N+1))\ndone\n\
         python pretrain_gpt.py --tensor-model-parallel-size 2 --num-layers 4 \\\n\
         --hidden-size 256 --num-attention-heads 4 --seq-length 256 \\\n\
         --max-position-embeddings 256 --micro-batch-size 1 --global-batch-size 8\n",
    )
    .unwrap();
    let out = d.path().join("t.csv");
    let (code, e) = ina3d(&[
        "trace",
        script.to_str().unwrap(),
        "--topology",
        FABRIC,
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2), "{e}");
    assert!(
        e.contains("run.sh:3:1") && e.contains("ends within 10000 iterations"),
        "{e}"
    );
}

/// `ns3 ingest` of an fct.txt whose size is u64::MAX wrote it through; now refused at its
/// line and field (the trace's record bound is 2^50).
#[test]
fn ingest_refuses_sizes_and_times_past_the_record_bound() {
    let d = tempfile::tempdir().unwrap();
    let ok = "0b000001 0b000101 10000 100 1048576 0 2000 1500\n";
    for (bad, field) in [
        (
            format!("0b000001 0b000101 10000 100 {} 0 2000 1500\n", u64::MAX),
            "size",
        ),
        (
            "0b000001 0b000101 10000 100 4096 1125899906842625 2000 1500\n".to_string(),
            "start_ns",
        ),
        (
            "0b000001 0b000101 70000 100 4096 0 2000 1500\n".to_string(),
            "sport",
        ),
    ] {
        let f = d.path().join("fct.txt");
        std::fs::write(&f, format!("{ok}{bad}")).unwrap();
        let out = d.path().join("out");
        let (code, e) = ina3d(&[
            "ns3",
            "ingest",
            f.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, Some(2), "{field}: {e}");
        assert!(
            e.contains("fct.txt:2") && e.contains(&format!("{field}: `")),
            "{field}: {e}"
        );
    }
}

/// SimAI's totals line with a negative, an absurd (10^308) or a NaN total: refused at its
/// line, naming the total; SimAI's own file is read.
#[test]
fn simai_totals_that_are_no_time_are_refused() {
    let fixture: PathBuf = Path::new(ROOT).join("tests/fixtures/simai/EndToEnd.csv");
    let text = std::fs::read_to_string(&fixture).unwrap();
    let (e2e, _) = ina3d::formats::simai_end_to_end::parse(&fixture, &text).unwrap();
    assert_eq!(e2e.totals.unwrap().time_us, Some(1745.246));
    let line = line_of(&text, "total exposed comm");
    for bad in ["-1745.246000", "1e308", "nan", "inf"] {
        let t = text.replace("total time,1745.246000", &format!("total time,{bad}"));
        let e = ina3d::formats::simai_end_to_end::parse(Path::new("E.csv"), &t)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("E.csv:{line}")) && e.contains("total time") && e.contains(bad),
            "{bad}: {e}"
        );
    }
}

// ------------------------------------------------ messages (issue 37, item 6)

/// A byte-order mark or a NUL in a topology file reached the terminal raw in the error
/// quoting the field; now escaped (`\u{feff}`, `\u{0}`), with the file's line. The whole
/// stderr holds no control byte but line breaks.
#[test]
fn errors_quoting_input_escape_control_bytes_and_the_bom() {
    let d = tempfile::tempdir().unwrap();
    for (bad, shown) in [
        ("\u{feff}0", "\\u{feff}0"),
        ("0\u{0}", "0\\u{0}"),
        ("0\u{1b}[2J", "0\\u{1b}[2J"),
    ] {
        let topo = d.path().join("topo.txt");
        std::fs::write(&topo, format!("4 1 4\n{bad}\n0 1 100Gbps 0.001ms 0\n")).unwrap();
        let out = d.path().join("t.csv");
        let (code, e) = ina3d(&[
            "trace",
            "traces/example/tiny.toml",
            "--topology",
            topo.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, Some(2), "{e}");
        assert!(
            e.contains("topo.txt:2: switch id: `") && e.contains(shown),
            "{shown}: {e}"
        );
        assert!(
            !e.chars()
                .any(|c| (c.is_control() && c != '\n') || c == '\u{feff}'),
            "{e:?}"
        );
    }
}

/// A value of the wrong type in a cluster file named `cluster` instead of its key; now the
/// key (with its table) is named at its line and column.
#[test]
fn cluster_file_type_errors_name_the_field() {
    let d = tempfile::tempdir().unwrap();
    let c = d.path().join("c.toml");
    let job = format!("[[job]]\nname = \"a\"\ninput = \"{ROOT}/traces/example/tiny.toml\"\n");
    for (text, want) in [
        (
            format!("ina-slots = \"many\"\n{job}"),
            "c.toml:1:13: ina-slots: invalid type",
        ),
        (
            format!("{job}start-ns = \"soon\"\n"),
            "c.toml:4:12: job.start-ns: invalid type",
        ),
        (
            format!("{job}bogus = 1\n"),
            "c.toml:4:1: job.bogus: unknown field `bogus`",
        ),
    ] {
        std::fs::write(&c, text).unwrap();
        let (code, e) = ina3d(&[
            "cluster",
            c.to_str().unwrap(),
            "-o",
            d.path().join("o").to_str().unwrap(),
        ]);
        assert_eq!(code, Some(2), "{e}");
        assert!(e.contains(want), "{want}: {e}");
    }
}

/// A fabric the back-ends cannot route — host 0's one network link removed, so it reaches
/// the others only over NVLink — was traced with exit 0 and then refused by `replay`; now
/// `trace` refuses it, naming the flag and the host cut off.
#[test]
fn trace_refuses_a_topology_the_replay_cannot_route() {
    let d = tempfile::tempdir().unwrap();
    let file = Path::new(ROOT).join("tests/fuzz/corpus/topology/topology.txt");
    let text = std::fs::read_to_string(file).unwrap();
    // host 0's network link (to its leaf, 100 Gb/s); its NVLink row stays
    let cut = text
        .lines()
        .position(|l| l.starts_with("0 ") && l.contains("100Gbps"));
    let cut = cut.expect("host 0's network link");
    let kept: String = text
        .lines()
        .enumerate()
        .filter(|(i, _)| *i != cut)
        .map(|(_, l)| format!("{l}\n"))
        .collect();
    let topo = d.path().join("cut.txt");
    std::fs::write(&topo, kept).unwrap();
    let out = d.path().join("t.csv");
    let (code, err) = ina3d(&[
        "trace",
        "traces/example/tiny.toml",
        "--topology",
        topo.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--topology")
            && err.contains("cut.txt")
            && err.contains("cannot reach host 0"),
        "{err}"
    );
    assert!(!out.exists(), "no trace is written");
    // the same file with the link: traced
    let (code, err) = ina3d(&[
        "trace",
        "traces/example/tiny.toml",
        "--topology",
        Path::new(ROOT)
            .join("tests/fuzz/corpus/topology/topology.txt")
            .to_str()
            .unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{err}");
}
