//! The AICB/SimAI workload: the one reader against AICB's own files, the export from the
//! workload model against sizes and row counts derived by hand
//! (docs/model.md#aicb-workload).

use ina3d::formats::aicb::{self, Collective, Comm, CommGroup, Slot};
use ina3d::interop::aicb::from_workload;
use ina3d::megatron::{self, TrainingConfig};
use ina3d::schedule::{self, ScheduleOptions};
use proptest::prelude::*;
use std::path::{Path, PathBuf};

fn fixture(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(p)
}

#[test]
fn the_reader_takes_aicbs_llama7b_workload_as_aicb_wrote_it() {
    let w = aicb::read(&fixture("simai/aicb_llama7b_tp2_pp1_mbs1.txt")).unwrap();
    assert_eq!(w.kind, aicb::KIND);
    assert_eq!(w.get("model_parallel_NPU_group"), Some("2"));
    assert_eq!(w.get("checkpoints"), Some("0"));
    assert_eq!(w.rows.len(), 76);
    assert_eq!(w.rows[0].name, "norm");
    assert_eq!(w.rows[0].fwd.comm, Comm::slot(Collective::Broadcast));
    let g = &w.rows[1];
    assert_eq!(
        (g.name.as_str(), g.fwd.comm.kind, g.fwd.bytes),
        ("grad_norm", Collective::AllGather, 6_754_926_592)
    );
    assert_eq!(
        (g.wg.comm.kind, g.wg.bytes),
        (Collective::ReduceScatter, 13_509_853_184)
    );
    let attn = w.rows.iter().find(|r| r.name == "attention_layer").unwrap();
    assert_eq!(
        attn.fwd,
        Slot {
            compute: 539_986,
            comm: Comm::slot(Collective::AllReduce),
            bytes: 16_777_216
        }
    );
    assert_eq!(attn.update, 100);
    let ce: Vec<u64> = w
        .rows
        .iter()
        .filter(|r| r.name.starts_with("cross_entropy"))
        .map(|r| r.fwd.bytes)
        .collect();
    assert_eq!(
        ce,
        vec![8192; 3],
        "b·s fp32 values, as our cross-entropy model"
    );
}

#[test]
fn the_reader_takes_simais_micro_all_reduce_with_its_padded_columns() {
    let w = aicb::read(&fixture("simai/microAllReduce.txt")).unwrap();
    assert_eq!(w.get("model_parallel_NPU_group"), Some("8"));
    assert_eq!(w.get("ep"), Some("1"));
    assert_eq!(w.get("all_gpus"), Some("8"));
    assert_eq!(w.rows.len(), 1);
    assert_eq!(w.rows[0].name, "embedding_layer");
    assert_eq!(w.rows[0].fwd.compute, 556_000);
    assert_eq!(w.rows[0].fwd.bytes, 536_870_912);
}

#[test]
fn reader_errors_name_the_file_line_and_field() {
    let p = Path::new("w.txt");
    let head = "HYBRID_TRANSFORMER_FWD_IN_BCKWD\tmodel_parallel_NPU_group: 2\n";
    let e = aicb::parse(
        p,
        &format!("{head}1\nx\t-1\t0\tALLSCATTER\t0\t0\tNONE\t0\t0\tNONE\t0\t0\n"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("w.txt:3: fwd_comm: unknown AICB collective"),
        "{e}"
    );
    let e = aicb::parse(
        p,
        &format!("{head}2\nx\t-1\t0\tNONE\t0\t0\tNONE\t0\t0\tNONE\t0\t0\n"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("w.txt:2: rows: the header announces 2 rows, the file has 1"),
        "{e}"
    );
    let e = aicb::parse(
        p,
        &format!("{head}1\nx\t-1\t0\tNONE\t0\t0\tNONE\t0\t0\tNONE\t-5\t0\n"),
    )
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("w.txt:3: wg_bytes:"), "{e}");
}

/// GPT-3 13B shapes on 2 layers: h = 5120, 40 heads, s = 2048, b = 1, TP 8 with sequence
/// parallelism, DP 2, the distributed optimizer, global batch 4 (m = 2), bf16.
fn gpt13b_two_layers() -> TrainingConfig {
    let mut c = megatron::preset("gpt3-13b").unwrap();
    for (k, v) in [
        ("num_layers", "2"),
        ("tensor_model_parallel_size", "8"),
        ("data_parallel_size", "2"),
        ("global_batch_size", "4"),
        ("sequence_parallel", "True"),
        ("use_distributed_optimizer", "True"),
    ] {
        c.set(k, v).unwrap();
    }
    c.validate().unwrap();
    c
}

#[test]
fn a_two_layer_export_has_the_hand_counted_rows_and_sizes() {
    // the flat compute model, whose times are counted by hand below
    let flat = ScheduleOptions {
        compute: schedule::ComputeModel::Mfu,
        ..ScheduleOptions::default()
    };
    let wl = schedule::build(&gpt13b_two_layers(), &flat).unwrap();
    let w = from_workload(&wl).unwrap();
    let head: Vec<(&str, &str)> = w
        .header
        .iter()
        .map(|(k, v)| (k.as_str(), v[0].as_str()))
        .collect();
    assert_eq!(
        head,
        [
            ("model_parallel_NPU_group", "8"),
            ("ep", "1"),
            ("pp", "1"),
            ("vpp", "1"),
            ("ga", "2"),
            ("all_gpus", "16"),
            ("checkpoints", "0"),
            ("checkpoint_initiates", "0"),
            ("pp_comm", "0"),
        ]
    );
    // Rows: parameter all-gather, gradient reduce-scatter, SP gradient all-reduce; then per
    // micro-batch the embedding (1 row), 2 layers of 6 rows (backward's 6 collectives
    // outnumber forward's 4), the LM head's 4 (forward: all-gather + 3 cross-entropy
    // all-reduces). 3 + 2·(1 + 12 + 4) = 37.
    assert_eq!(w.rows.len(), 37);
    // Per GPU (TP 8): a layer is 12h²/8 weights, QKV and fc1 biases 7h/8, projection and
    // fc2 biases 2h, two LayerNorms 4h; plus the word embedding (50257 → 51200 padded to
    // 128·8)/8·h, the position embedding 2048·h and the final LayerNorm 2h.
    let h: u64 = 5120;
    let params = 2 * (12 * h * h / 8 + 7 * h / 8 + 6 * h) + 51200 / 8 * h + 2048 * h + 2 * h;
    let (ag, rs, sp) = (&w.rows[0], &w.rows[1], &w.rows[2]);
    assert_eq!(
        (ag.wg.comm, ag.wg.bytes),
        (Comm::slot(Collective::AllGather), 2 * params)
    );
    assert_eq!(
        (rs.wg.comm, rs.wg.bytes),
        (Comm::slot(Collective::ReduceScatter), 4 * params),
        "gradients reduced in fp32"
    );
    assert!(
        ag.fwd.comm == Comm::NONE,
        "the parameter all-gather is not in the TP slot"
    );
    // SP: per layer two LayerNorms and two row-parallel biases (6h), the final LayerNorm.
    assert_eq!(sp.ig.bytes, (2 * 6 * h + 2 * h) * 4);
    // Every TP collective is b·s·h bf16; per micro-batch forward: 5 all-gathers, 5
    // reduce-scatters, 3 cross-entropy all-reduces of b·s fp32; backward (input-gradient
    // slots): 10 all-gathers, 5 reduce-scatters.
    let act = 2048 * h * 2;
    let count = |slot: fn(&aicb::Row) -> Slot, kind: Collective, bytes: u64| {
        w.rows[3..]
            .iter()
            .filter(|r| slot(r).comm.kind == kind && slot(r).bytes == bytes)
            .count()
    };
    let m = 2;
    assert_eq!(count(|r| r.fwd, Collective::AllGather, act), 5 * m);
    assert_eq!(count(|r| r.fwd, Collective::ReduceScatter, act), 5 * m);
    assert_eq!(count(|r| r.fwd, Collective::AllReduce, 2048 * 4), 3 * m);
    assert_eq!(count(|r| r.ig, Collective::AllGather, act), 10 * m);
    assert_eq!(count(|r| r.ig, Collective::ReduceScatter, act), 5 * m);
    assert!(w.rows[3..].iter().all(|r| r.wg.comm == Comm::NONE));
    // The embedding's rows carry AICB's name, which SimAI leaves out of its bubble base
    // (its Layer::report skips rows named exactly `embedding_layer`): one per micro-batch.
    let emb: Vec<usize> = (0..w.rows.len())
        .filter(|&i| w.rows[i].name == "embedding_layer")
        .collect();
    assert_eq!(emb, [3, 3 + 17]);
    assert!(!w.rows.iter().any(|r| r.name.starts_with("embedding.")));
    // A layer's forward compute is its FLOPs per GPU at 312 TF · 0.45 (no log: factor 1):
    // attention 2·s·h·3h + 4·s²·h + 2·s·h², MLP 2·s·h·4h·2, each ÷ 8.
    let s = 2048.0;
    let hf = h as f64;
    let attn = (2.0 * s * hf * 3.0 * hf + 4.0 * s * s * hf + 2.0 * s * hf * hf) / 8.0;
    let mlp = 2.0 * s * hf * 4.0 * hf * 2.0 / 8.0;
    let ns = |f: f64| (f / (312e12 * 0.45) * 1e9).round() as u64;
    let layer0: u64 = w
        .rows
        .iter()
        .filter(|r| r.name.starts_with("layer0.mb0"))
        .map(|r| r.fwd.compute)
        .sum();
    assert_eq!(layer0, ns(attn) + ns(mlp));
}

#[test]
fn the_export_round_trips_through_the_one_writer_and_reader() {
    let wl = schedule::build(&gpt13b_two_layers(), &ScheduleOptions::default()).unwrap();
    let w = from_workload(&wl).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("w.txt");
    aicb::write(&p, &w).unwrap();
    assert_eq!(aicb::read(&p).unwrap(), w);
}

#[test]
fn pipeline_and_moe_jobs_carry_pp_comm_and_expert_groups() {
    let mut c = megatron::preset("mixtral-8x7b").unwrap();
    for (k, v) in [
        ("num_layers", "4"),
        ("pipeline_model_parallel_size", "2"),
        ("data_parallel_size", "8"),
        ("expert_model_parallel_size", "8"),
        ("global_batch_size", "16"),
        ("seq_length", "1024"),
    ] {
        c.set(k, v).unwrap();
    }
    c.validate().unwrap();
    let wl = schedule::build(&c, &ScheduleOptions::default()).unwrap();
    let w = from_workload(&wl).unwrap();
    // PP 2: s·b·h bf16 per boundary crossing.
    assert_eq!(
        w.get("pp_comm"),
        Some((1024 * 4096 * 2).to_string().as_str())
    );
    assert_eq!(w.get("ep"), Some("8"));
    // Dispatch and combine: each rank's 1024 tokens × top-2 × h bf16.
    let a2a: Vec<&aicb::Row> = w
        .rows
        .iter()
        .filter(|r| {
            r.fwd.comm
                == Comm {
                    kind: Collective::AllToAll,
                    group: CommGroup::Ep,
                }
        })
        .collect();
    assert_eq!(
        a2a.len(),
        2 * 2 * 2,
        "2 layers per stage × 2 per layer × 2 micro-batches"
    );
    assert!(a2a.iter().all(|r| r.fwd.bytes == 1024 * 2 * 4096 * 2));
    // Expert gradients over the expert-DP group (W/(ETP·EP·PP) = 16/(1·8·2) = 1: none to
    // reduce) — with DP 16 they are.
    assert!(!w.rows.iter().any(|r| r.name.starts_with("expert_")));
    c.set("data_parallel_size", "16").unwrap();
    c.set("global_batch_size", "32").unwrap();
    let w = from_workload(&schedule::build(&c, &ScheduleOptions::default()).unwrap()).unwrap();
    let e = w
        .rows
        .iter()
        .find(|r| r.name == "expert_grad_all_reduce")
        .unwrap();
    assert_eq!(e.wg.comm.group, CommGroup::DpEp);
    // One expert per rank: fc1 (SwiGLU 2·14336·4096) + fc2 (14336·4096), 2 layers, fp32.
    assert_eq!(e.wg.bytes, 2 * 3 * 14336 * 4096 * 4);
}

#[test]
fn context_parallel_jobs_are_refused_with_the_reason() {
    let mut c = megatron::preset("llama2-7b").unwrap();
    c.set("num_layers", "2").unwrap();
    c.set("context_parallel_size", "2").unwrap();
    c.set("global_batch_size", "1").unwrap();
    let wl = schedule::build(&c, &ScheduleOptions::default()).unwrap();
    let e = from_workload(&wl).unwrap_err().to_string();
    assert!(e.contains("context-parallel group"), "{e}");
}

#[test]
fn the_cli_takes_the_same_overrides_as_trace_and_writes_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("w.txt");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_ina3d"))
        .args(["export", "aicb", "gpt3-13b", "--tp", "8", "--dp", "2"])
        .args(["--set", "num_layers=2", "--set", "global_batch_size=4"])
        .args(["--sequence-parallel", "--use-distributed-optimizer", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let wl = schedule::build(&gpt13b_two_layers(), &ScheduleOptions::default()).unwrap();
    assert_eq!(aicb::read(&out).unwrap(), from_workload(&wl).unwrap());
    assert!(!dir.path().join("w.txt.tmp").exists());
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_ina3d"))
        .args(["export", "aicb", "no-such-model", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no-such-model"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Near-valid files (a real one with a token replaced, a line dropped or doubled, or
    /// cut short) are read or refused with an error at an existing line — never a panic.
    #[test]
    fn mutated_workloads_are_read_or_refused_at_a_line(
        which in 0usize..3, line in 0usize..80, tok in 0usize..12,
        repl in prop::sample::select(vec!["", "-1", "18446744073709551616", "ALLTOALL_DP_EP", "x", "1e9", "NONE", "model_parallel_NPU_group:"]),
        op in 0u8..4,
    ) {
        let base = std::fs::read_to_string(fixture("simai/aicb_llama7b_tp2_pp1_mbs1.txt")).unwrap();
        let mut lines: Vec<String> = base.lines().map(String::from).collect();
        let i = line % lines.len();
        match op {
            0 => {
                let mut t: Vec<String> = lines[i].split_whitespace().map(String::from).collect();
                if !t.is_empty() { let k = tok % t.len(); t[k] = repl.to_string(); }
                lines[i] = t.join("\t");
            }
            1 => { lines.remove(i); }
            2 => { let l = lines[i].clone(); lines.insert(i, l); }
            _ => { lines.truncate(i); }
        }
        let text = lines.join("\n");
        let _ = which;
        match aicb::parse(Path::new("m.txt"), &text) {
            Ok(w) => prop_assert_eq!(w.rows.len(), text.lines().filter(|l| !l.trim().is_empty()).count() - 2),
            Err(e) => {
                let s = e.to_string();
                prop_assert!(s.starts_with("m.txt"), "{}", s);
                if let Some(l) = e.line() { prop_assert!(l as usize <= lines.len() + 1, "{}", s); }
            }
        }
    }
}
