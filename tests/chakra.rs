//! `ina3d export chakra` read back with MLCommons' own reader (mlc-chakra, in the
//! notebooks' venv: `make venv`), checked against `ina3d inspect` of the same job's trace:
//! per rank, the collective nodes against the collectives the trace's flows belong to, the
//! send nodes against its pipeline sends, and the bytes a ring lowering of the nodes sends
//! (nccl-tests' factors on `comm_size`, send sizes) against the bytes the trace's records
//! send. Two independent paths (the Chakra files decoded by Chakra's protobuf code, the
//! trace records by inspect) must agree.

use std::path::{Path, PathBuf};
use std::process::Command;

fn ina3d() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ina3d"))
}

/// The venv's python (or `INA3D_PYTHON`); the test fails, saying how to get it, when
/// neither has mlc-chakra.
fn python() -> PathBuf {
    let p = std::env::var_os("INA3D_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python"));
    let ok = Command::new(&p)
        .args(["-c", "import chakra.schema.protobuf.et_def_pb2"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "{} cannot import mlc-chakra: run `make venv` (notebooks/requirements.txt pins it) or set INA3D_PYTHON",
        p.display()
    );
    p
}

fn run(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

/// Exports and traces `job`, and checks the two per rank. `p2p_in_collectives`: ring
/// attention's sends belong to a collective in the trace (one per ring pass) but are send
/// nodes in Chakra, so only bytes are compared then.
fn check(job: &[&str], world: usize, p2p_in_collectives: bool) {
    let py = python();
    let d = tempfile::tempdir().unwrap();
    let et = d.path().join("et");
    run(ina3d()
        .args(["export", "chakra"])
        .args(job)
        .arg("-o")
        .arg(&et));
    let trace = d.path().join("t.csv.gz");
    // Ring collectives on one channel over a network without NVLink: every transfer is a
    // record, one collective id per collective.
    run(ina3d()
        .arg("trace")
        .args(job)
        .args([
            "--topology",
            "fat-tree:k=4,nvlink=off",
            "--nccl-channels",
            "1",
            "-o",
        ])
        .arg(&trace));
    let inspect: serde_json::Value =
        serde_json::from_str(&run(ina3d().arg("inspect").arg(&trace).arg("--json"))).unwrap();
    let chakra: serde_json::Value = serde_json::from_str(&run(Command::new(&py)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/chakra_read.py"))
        .arg(&et)
        .arg("workload")
        .arg(world.to_string())))
    .unwrap();
    let groups = chakra["groups"].as_object().unwrap();
    let per_rank = inspect["per_rank"].as_array().unwrap();
    let ranks = chakra["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), world);
    for (r, c) in ranks.iter().enumerate() {
        let t = per_rank.iter().find(|x| x["rank"] == r).unwrap();
        assert_eq!(c["version"], "1.0.0");
        assert_eq!(c["ids_unique"], true, "rank {r}");
        assert_eq!(
            c["deps_backward"], true,
            "rank {r}: a dependency on a later node"
        );
        // Ring bytes of each collective node: all-reduce 2(n−1)/n·S, the others (n−1)/n·S
        // (comm_type 0 = ALL_REDUCE in et_def.proto).
        let mut sent = 0u64;
        let colls = c["coll"].as_array().unwrap();
        for x in colls {
            let (ty, s, pg) = (
                x[0].as_u64().unwrap(),
                x[1].as_u64().unwrap(),
                x[2].as_str().unwrap(),
            );
            let n = groups[pg].as_array().unwrap().len() as u64;
            assert!(
                groups[pg].as_array().unwrap().iter().any(|m| m == r),
                "rank {r} not in group {pg}"
            );
            sent += if ty == 0 {
                2 * s * (n - 1) / n
            } else {
                s * (n - 1) / n
            };
        }
        let sends = c["send"].as_array().unwrap();
        for x in sends {
            assert_eq!(x[0], r, "a send node's comm_src is its rank");
            sent += x[3].as_u64().unwrap();
        }
        let trace_sent: u64 = t["sent"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum();
        assert_eq!(sent, trace_sent, "rank {r}: bytes sent");
        if !p2p_in_collectives {
            assert_eq!(
                colls.len() as u64,
                t["collectives"].as_u64().unwrap(),
                "rank {r}: collectives"
            );
            assert_eq!(
                sends.len() as u64,
                t["p2p_sends"].as_u64().unwrap(),
                "rank {r}: sends"
            );
        }
        assert!(c["comp"].as_u64().unwrap() > 0);
    }
    // Every send has its receive on the peer, with the same tag and size.
    for (r, c) in ranks.iter().enumerate() {
        for s in c["send"].as_array().unwrap() {
            let dst = s[1].as_u64().unwrap() as usize;
            let matched = ranks[dst]["recv"]
                .as_array()
                .unwrap()
                .iter()
                .any(|x| x[0] == r && x[1] == dst && x[2] == s[2] && x[3] == s[3]);
            assert!(matched, "rank {r}'s send {s} has no receive on rank {dst}");
        }
    }
}

const SMALL: &[&str] = &[
    "--num-layers",
    "4",
    "--hidden-size",
    "1024",
    "--num-attention-heads",
    "16",
    "--seq-length",
    "512",
];

#[test]
fn a_3d_parallel_job_exports_what_its_trace_sends_rank_by_rank() {
    // TP2 · PP2 · DP2, sequence parallelism, distributed optimizer, 4 micro-batches.
    let mut job = vec!["gpt3-13b", "--tp", "2", "--pp", "2", "--dp", "2"];
    job.extend_from_slice(SMALL);
    job.extend_from_slice(&[
        "--global-batch-size",
        "8",
        "--sequence-parallel",
        "--use-distributed-optimizer",
    ]);
    check(&job, 8, false);
}

#[test]
fn interleaved_pipelines_moe_and_ring_attention_export_what_their_traces_send() {
    // Interleaved 1F1B: PP2 · VPP2 · DP2 · TP2 (8 layers).
    let job = [
        "gpt3-13b",
        "--tp",
        "2",
        "--pp",
        "2",
        "--dp",
        "2",
        "--vpp",
        "2",
        "--num-layers",
        "8",
        "--hidden-size",
        "1024",
        "--num-attention-heads",
        "16",
        "--seq-length",
        "512",
        "--global-batch-size",
        "8",
        "--overlap-grad-reduce",
    ];
    check(&job, 8, false);
    // MoE: 4 experts top-2 over EP 4, DP 4, alltoall dispatcher, uniform routing.
    let job = [
        "mixtral-8x7b",
        "--ep",
        "4",
        "--dp",
        "4",
        "--num-layers",
        "2",
        "--hidden-size",
        "512",
        "--num-attention-heads",
        "8",
        "--num-query-groups",
        "8",
        "--seq-length",
        "256",
        "--ffn-hidden-size",
        "1024",
        "--num-experts",
        "4",
        "--global-batch-size",
        "4",
    ];
    check(&job, 4, false);
    // Ring attention: CP 2 · TP 2 · DP 2.
    let job = [
        "llama2-7b",
        "--tp",
        "2",
        "--cp",
        "2",
        "--dp",
        "2",
        "--num-layers",
        "2",
        "--global-batch-size",
        "2",
        "--sequence-parallel",
    ];
    check(&job, 8, true);
    // Hierarchical CP (a2a+p2p): all-to-alls inside pairs, rings across, CP 4 · TP 2.
    let job = [
        "llama2-7b",
        "--tp",
        "2",
        "--cp",
        "4",
        "--dp",
        "1",
        "--num-layers",
        "2",
        "--global-batch-size",
        "1",
        "--sequence-parallel",
        "--set",
        "cp_comm_type=a2a+p2p",
        "--set",
        "hierarchical_context_parallel_sizes=[2, 2]",
    ];
    check(&job, 8, true);
}

#[test]
fn the_export_is_byte_identical_run_to_run_and_refuses_a_prefix_with_a_slash() {
    let d = tempfile::tempdir().unwrap();
    let job = [
        "gpt3-13b",
        "--tp",
        "2",
        "--pp",
        "2",
        "--dp",
        "2",
        "--num-layers",
        "4",
        "--hidden-size",
        "1024",
        "--num-attention-heads",
        "16",
        "--seq-length",
        "512",
        "--global-batch-size",
        "8",
    ];
    let (a, b) = (d.path().join("a"), d.path().join("b"));
    for dir in [&a, &b] {
        run(ina3d()
            .args(["export", "chakra"])
            .args(job)
            .arg("-o")
            .arg(dir));
    }
    // the completion marker names the process that wrote it: the files of the export
    let mut names: Vec<_> = std::fs::read_dir(&a)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != ina3d::formats::atomic::COMPLETE)
        .collect();
    names.sort();
    assert_eq!(names.len(), 8 + 1, "{names:?}");
    assert!(a.join(ina3d::formats::atomic::COMPLETE).is_file());
    for n in names {
        assert_eq!(
            std::fs::read(a.join(&n)).unwrap(),
            std::fs::read(b.join(&n)).unwrap(),
            "{n:?}"
        );
    }
    let o = ina3d()
        .args(["export", "chakra"])
        .args(job)
        .args(["--prefix", "x/y", "-o"])
        .arg(d.path().join("c"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--prefix `x/y`"));
}
