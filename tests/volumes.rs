//! `docs/volumes.md`: for published models, every communication op's size and count as
//! Megatron-LM's shapes give them (formulas written out here, independently of the
//! schedule), next to what ina3d's workload model computes. The test fails when the two
//! disagree, and when the committed file differs from the table it generates; it then
//! writes `docs/volumes.md.new` for review (`mv docs/volumes.md.new docs/volumes.md`).

use ina3d::megatron::{self, TrainingConfig};
use ina3d::record::Class;
use ina3d::schedule::{
    self, A2aSizes, CollKind, GradGroup, GroupKind, LayerStep, ScheduleOptions, StepBytes, Workload,
};
use ina3d::topology::Topology;
use ina3d::trace::{self, TraceOptions};
use std::fmt::Write as _;
use std::path::Path;

/// One line of a table: an op, when it runs, Megatron's formula with its value and count,
/// and ina3d's size and count.
struct Line {
    op: &'static str,
    when: &'static str,
    formula: String,
    megatron: u64,
    ours: u64,
    count: (usize, usize),
}

/// A job, with the sizes its formulas need.
struct Job {
    title: &'static str,
    cfg: TrainingConfig,
}

fn job(title: &'static str, preset: &str, set: &[(&str, &str)]) -> Job {
    let mut cfg = megatron::preset(preset).unwrap();
    for (k, v) in set {
        cfg.set(k, v).unwrap();
    }
    cfg.validate().unwrap();
    Job { title, cfg }
}

/// Shape numbers used by the formulas (read from the configuration, not the schedule).
struct Shape {
    b: u64,
    s: u64,
    h: u64,
    ffn: u64,
    kv: u64,
    tp: u64,
    cp: u64,
    pp: u64,
    layers: u64,
    vpad: u64,
    grad: u64,
}

fn shape(c: &TrainingConfig) -> Shape {
    let heads = c.num_attention_heads as u64;
    let groups = c.num_query_groups.map_or(heads, u64::from);
    let tp = c.tensor_model_parallel_size as u64;
    // Megatron's _vocab_size_with_padding: round up to make_vocab_size_divisible_by · TP.
    let mult = c.make_vocab_size_divisible_by * tp;
    Shape {
        b: c.micro_batch_size,
        s: c.seq_length,
        h: c.hidden_size,
        ffn: c.ffn_hidden_size,
        kv: c.hidden_size / heads * groups,
        tp,
        cp: c.context_parallel_size as u64,
        pp: c.pipeline_model_parallel_size as u64,
        layers: c.num_layers as u64,
        vpad: c.vocab_size.unwrap().div_ceil(mult) * mult,
        // Megatron's arguments.py: bf16 reduces in fp32 unless --grad-reduce-in-bf16.
        grad: if c.grad_reduce_in_bf16 { 2 } else { 4 },
    }
}

/// Parameters of one dense layer on one GPU, Megatron's modules one by one: QKV
/// `h·(h+2kv)` and its bias, projection `h²` and its (unsplit) bias, MLP fc1 (`2·h·ffn`
/// with SwiGLU) and fc2 and their biases, two norms (weight, + bias for LayerNorm).
fn layer_params(c: &TrainingConfig, x: &Shape) -> u64 {
    let (h, tp) = (x.h, x.tp);
    let gated = if c.swiglu { 2 } else { 1 };
    let bias = u64::from(c.add_bias_linear);
    let norm = if c.normalization == megatron::Normalization::LayerNorm {
        2 * h
    } else {
        h
    };
    (h * (h + 2 * x.kv) + h * h + gated * h * x.ffn + x.ffn * h) / tp
        + bias * ((h + 2 * x.kv) / tp + h + gated * x.ffn / tp + h)
        + 2 * norm
}

fn count(steps: &[LayerStep], want: impl Fn(&LayerStep) -> bool) -> usize {
    steps.iter().filter(|s| want(s)).count()
}

fn is_tp(k: CollKind) -> impl Fn(&LayerStep) -> bool {
    move |s| matches!(s, LayerStep::Tp(x) if *x == k)
}

fn tp_lines(j: &Job, wl: &Workload, out: &mut Vec<Line>) {
    let (c, x) = (&j.cfg, shape(&j.cfg));
    if x.tp == 1 {
        return; // no tensor parallelism: no TP collectives
    }
    let act = x.b * (x.s / x.cp) * x.h * 2;
    let f = "b·(s/CP)·h·2 B".to_string();
    let both = |k| count(&wl.fwd_steps, is_tp(k)) + count(&wl.bwd_steps, is_tp(k));
    if !c.sequence_parallel {
        out.push(Line {
            op: "TP all-reduce",
            when: "per layer, micro-batch (fwd + bwd)",
            formula: f.clone(),
            megatron: act,
            ours: wl.tp_bytes.0,
            count: (4, both(CollKind::AllReduce)),
        });
    } else {
        out.push(Line {
            op: "TP all-gather",
            when: "per layer, micro-batch (fwd 2 + bwd 4)",
            formula: f.clone(),
            megatron: act,
            ours: wl.tp_bytes.0,
            count: (6, both(CollKind::AllGather)),
        });
        out.push(Line {
            op: "TP reduce-scatter",
            when: "per layer, micro-batch (fwd 2 + bwd 2)",
            formula: f.clone(),
            megatron: act,
            ours: wl.tp_bytes.0,
            count: (4, both(CollKind::ReduceScatter)),
        });
    }
    let (first, last) = (&wl.stages[0], wl.stages.last().unwrap());
    let emb = count(&first.embedding_fwd, |_| true) + count(&first.embedding_bwd, |_| true);
    let head = count(&last.head_fwd, |s| matches!(s, LayerStep::Tp(_)))
        + count(&last.head_bwd, |s| matches!(s, LayerStep::Tp(_)));
    let (emb_n, head_n) = if c.sequence_parallel { (2, 3) } else { (1, 1) };
    out.push(Line {
        op: "embedding TP collective",
        when: "per micro-batch, first stage",
        formula: f.clone(),
        megatron: act,
        ours: wl.tp_bytes.0,
        count: (emb_n, emb),
    });
    out.push(Line {
        op: "LM head TP collectives",
        when: "per micro-batch, last stage",
        formula: f,
        megatron: act,
        ours: wl.tp_bytes.0,
        count: (head_n, head),
    });
    let ce: Vec<u64> = last
        .head_fwd
        .iter()
        .filter_map(|s| match s {
            LayerStep::Coll {
                group: GroupKind::Tp,
                bytes: StepBytes::Fixed(b),
                ..
            } => Some(b.0),
            _ => None,
        })
        .collect();
    out.push(Line {
        op: "cross-entropy all-reduces",
        when: "per micro-batch, last stage",
        formula: "b·(s/CP)·4 B (fp32 max, target, Σexp)".into(),
        megatron: x.b * x.s / x.cp * 4,
        ours: ce.first().copied().unwrap_or(0),
        count: (3, ce.len()),
    });
}

fn pp_lines(j: &Job, wl: &Workload, out: &mut Vec<Line>) {
    let x = shape(&j.cfg);
    if x.pp == 1 {
        return;
    }
    let sp = j.cfg.sequence_parallel;
    let v = x.b * (x.s / x.cp) * x.h * 2 / if sp { x.tp } else { 1 };
    out.push(Line {
        op: "PP send/recv",
        when: "per boundary, micro-batch, direction",
        formula: if sp {
            "b·(s/CP)·h·2/TP B"
        } else {
            "b·(s/CP)·h·2 B"
        }
        .into(),
        megatron: v,
        ours: wl.pp_bytes.0,
        count: (1, 1),
    });
}

fn dp_lines(j: &Job, wl: &Workload, out: &mut Vec<Line>) {
    let (c, x) = (&j.cfg, shape(&j.cfg));
    let per_stage = x.layers / x.pp;
    let moe = c.num_experts.is_some();
    let layer = if moe {
        moe_dense_params(c, &x)
    } else {
        layer_params(c, &x)
    };
    let pos = if c.position_embedding_type == megatron::PositionEmbedding::LearnedAbsolute {
        c.max_position_embeddings * x.h
    } else {
        0
    };
    // A single stage also holds the final norm and, untied, the output layer.
    let norm = if c.normalization == megatron::Normalization::LayerNorm {
        2 * x.h
    } else {
        x.h
    };
    let head = if x.pp == 1 {
        norm + u64::from(c.untie_embeddings_and_output_weights) * x.vpad / x.tp * x.h
    } else {
        0
    };
    let first = per_stage * layer + x.vpad / x.tp * x.h + pos + head;
    let dense: u64 = wl.stages[0]
        .buckets
        .iter()
        .filter(|b| b.group == GradGroup::DataContext)
        .map(|b| b.grad_bytes.0)
        .sum();
    let kind = if c.use_distributed_optimizer {
        "reduce-scatter"
    } else {
        "all-reduce"
    };
    out.push(Line {
        op: if c.use_distributed_optimizer {
            "DP gradient reduce-scatter (dense)"
        } else {
            "DP gradient all-reduce (dense)"
        },
        when: "per iteration, first stage, over DP×CP",
        formula: format!(
            "({}·layer + V_pad/TP·h + positions{})·{} B {kind}",
            per_stage,
            if x.pp == 1 {
                " + final norm + untied output"
            } else {
                ""
            },
            x.grad
        ),
        megatron: first * x.grad,
        ours: dense,
        count: (1, 1),
    });
    if c.use_distributed_optimizer {
        let ag: u64 = wl.stages[0]
            .buckets
            .iter()
            .filter(|b| b.group == GradGroup::DataContext)
            .map(|b| b.param_bytes.0)
            .sum();
        out.push(Line {
            op: "DP parameter all-gather",
            when: "per iteration, first stage",
            formula: "dense parameters·2 B (bf16)".into(),
            megatron: first * 2,
            ours: ag,
            count: (1, 1),
        });
    }
    if c.sequence_parallel {
        let norm = if c.normalization == megatron::Normalization::LayerNorm {
            2 * x.h
        } else {
            x.h
        };
        let bias = if c.add_bias_linear { 2 * x.h } else { 0 };
        let router = if moe {
            c.num_experts.unwrap() as u64 * x.h
        } else {
            0
        };
        let v = (per_stage * (2 * norm + bias + router) + norm) * x.grad;
        out.push(Line {
            op: "SP gradient all-reduce (norms, row biases, routers)",
            when: "per iteration, last stage, over TP",
            formula: "(L/PP·(2 norms + 2 row biases + router) + final norm)·grad B".into(),
            megatron: v,
            ours: wl.stages.last().unwrap().layernorm_bytes.map_or(0, |b| b.0),
            count: (1, 1),
        });
    }
    if !c.untie_embeddings_and_output_weights && x.pp > 1 {
        out.push(Line {
            op: "tied embedding all-reduce",
            when: "per iteration, first + last stage",
            formula: "V_pad/TP·h·grad B".into(),
            megatron: x.vpad / x.tp * x.h * x.grad,
            ours: wl.emb_bytes.map_or(0, |b| b.0),
            count: (1, 1),
        });
    }
}

/// Dense parameters of a MoE layer per GPU: attention, norms, router (experts apart).
fn moe_dense_params(c: &TrainingConfig, x: &Shape) -> u64 {
    let norm = if c.normalization == megatron::Normalization::LayerNorm {
        2 * x.h
    } else {
        x.h
    };
    (x.h * (x.h + 2 * x.kv) + x.h * x.h) / x.tp + 2 * norm + c.num_experts.unwrap() as u64 * x.h
}

/// CP bytes one rank sends per layer and micro-batch, forward and backward together, as
/// Transformer Engine's `context_parallel.py` moves them (docs/model.md#context-parallelism):
/// - `p2p` (`AttnFuncWithCPAndKVP2P`): forward CP−1 K/V blocks to the next rank; backward
///   K/V in step 0, K/V + dK/dV in steps 1 … CP−2, dK/dV in step CP−1: 2(CP−1) blocks;
/// - `allgather` (`AttnFuncWithCPAndKVAllGather`): forward all-gathers K and V
///   (`gather_along_first_dim`), backward gathers them again, then reduce-scatters dK, dV;
///   a ring all-gather or reduce-scatter of CP blocks sends CP−1 of them;
/// - `a2a` (`AttnFuncWithCPAndQKVOA2A`): all-to-alls of Q, K, V and of the output forward,
///   of dO and of dQ, dK, dV backward, each rank keeping 1/CP of its buffer.
fn cp_sent_per_layer(c: &TrainingConfig, x: &Shape) -> (String, u64) {
    let n = x.cp;
    let tokens = x.b * (x.s / n);
    let kv = 2 * tokens * (x.kv / x.tp) * 2;
    match c.cp_comm_type {
        megatron::CpCommType::P2p => ("(CP−1 + 2(CP−1))·K/V block".into(), 3 * (n - 1) * kv),
        megatron::CpCommType::AllGather => (
            "(CP−1)·K/V block × 3 (gather, gather again, reduce-scatter)".into(),
            3 * (n - 1) * kv,
        ),
        megatron::CpCommType::A2a => {
            let qkv = tokens * (x.h + 2 * x.kv) / x.tp * 2;
            let o = tokens * x.h / x.tp * 2;
            (
                "2·(CP−1)/CP·(b·(s/CP)·(h+2·g·d)/TP + b·(s/CP)·h/TP)·2 B".into(),
                2 * (qkv + o) * (n - 1) / n,
            )
        }
        megatron::CpCommType::A2aP2p => {
            // All-to-alls inside groups of A ranks, the ring over the P = CP/A ranks A
            // apart with K/V blocks of the same size (heads/A over A times the sequence).
            let a = c.hierarchical_cp_sizes().unwrap()[0] as u64;
            let p = n / a;
            let qkv = tokens * (x.h + 2 * x.kv) / x.tp * 2;
            let o = tokens * x.h / x.tp * 2;
            (
                "2·(A−1)/A·(Q·K·V + output buffers) + 3(P−1)·K/V block".into(),
                2 * (qkv + o) * (a - 1) / a + 3 * (p - 1) * kv,
            )
        }
    }
}

/// CP-class payload each rank sends in one iteration of the job's trace, per layer of its
/// stage and micro-batch: observed on the records `trace::generate` writes (ring
/// collectives, no NVLink, so every transfer is a flow), not on the schedule.
fn cp_sent_in_trace(j: &Job, wl: &Workload) -> Vec<u64> {
    let world = wl.world() as usize;
    let topo = Topology::from_spec("fat-tree:k=4,nvlink=off").unwrap();
    let mut sent = vec![0u64; world];
    trace::generate(&j.cfg, &topo, &TraceOptions::default(), &mut |r| {
        if r.class == Class::Cp {
            let rank = topo.gpus.iter().position(|g| *g == r.src).unwrap();
            sent[rank] += r.bytes.0;
        }
        Ok(())
    })
    .unwrap();
    let per = (wl.num_layers / wl.pp()) as u64 * wl.microbatches as u64;
    sent.iter().map(|b| b / per).collect()
}

fn cp_lines(j: &Job, wl: &Workload, out: &mut Vec<Line>) {
    let x = shape(&j.cfg);
    if x.cp == 1 {
        return;
    }
    let kv = 2 * x.b * (x.s / x.cp) * (x.kv / x.tp) * 2;
    let ring = count(&wl.fwd_steps, |s| matches!(s, LayerStep::CpRing { .. }));
    let cp = wl.cp.as_ref().unwrap();
    match cp.comm {
        megatron::CpCommType::A2a => {
            let (fwd, bwd) = (
                a2a_sizes(&wl.fwd_steps, GroupKind::Cp),
                a2a_sizes(&wl.bwd_steps, GroupKind::Cp),
            );
            let tokens = x.b * (x.s / x.cp);
            let qkv = tokens * (x.h + 2 * x.kv) / x.tp * 2;
            let o = tokens * x.h / x.tp * 2;
            out.push(Line {
                op: "CP all-to-all buffer, forward: Q·K·V, then output",
                when: "per layer, micro-batch",
                formula: "b·(s/CP)·(h+2·g·d)/TP·2 B, then b·(s/CP)·h/TP·2 B".into(),
                megatron: qkv + o,
                ours: fwd.iter().sum(),
                count: (2, fwd.len()),
            });
            out.push(Line {
                op: "CP all-to-all buffer, backward: dO, then dQ·dK·dV",
                when: "per layer, micro-batch",
                formula: "b·(s/CP)·h/TP·2 B, then b·(s/CP)·(h+2·g·d)/TP·2 B".into(),
                megatron: o + qkv,
                ours: bwd.iter().sum(),
                count: (2, bwd.len()),
            });
        }
        megatron::CpCommType::AllGather => {
            let colls = |steps: &[LayerStep], k: CollKind| {
                count(
                    steps,
                    |s| matches!(s, LayerStep::Coll { kind, group: GroupKind::Cp, .. } if *kind == k),
                )
            };
            out.push(Line {
                op: "CP K/V all-gather (S = CP blocks)",
                when: "per layer, micro-batch: fwd 1, bwd 1 (K/V gathered again)",
                formula: "CP·2·b·(s/CP)·(g·d/TP)·2 B".into(),
                megatron: x.cp * kv,
                ours: cp_coll_bytes(&wl.fwd_steps),
                count: (
                    2,
                    colls(&wl.fwd_steps, CollKind::AllGather)
                        + colls(&wl.bwd_steps, CollKind::AllGather),
                ),
            });
            out.push(Line {
                op: "CP dK/dV reduce-scatter (S = CP blocks)",
                when: "per layer, micro-batch, backward",
                formula: "CP·2·b·(s/CP)·(g·d/TP)·2 B".into(),
                megatron: x.cp * kv,
                ours: cp_coll_bytes(&wl.bwd_steps),
                count: (1, colls(&wl.bwd_steps, CollKind::ReduceScatter)),
            });
        }
        _ => out.push(Line {
            op: "CP ring K/V block",
            when: "per layer, micro-batch: fwd R−1 blocks, bwd 2(R−1); ring size R = CP (P with a2a+p2p)",
            formula: "2·b·(s/CP)·(g·d/TP)·2 B".into(),
            megatron: kv,
            ours: cp.kv_bytes.0,
            count: (1, ring),
        }),
    }
    let (formula, want) = cp_sent_per_layer(&j.cfg, &x);
    let sent = cp_sent_in_trace(j, wl);
    // Every rank sends the same; report the one farthest from the formula.
    let ours = *sent.iter().max_by_key(|b| b.abs_diff(want)).unwrap_or(&0);
    out.push(Line {
        op: "CP bytes each rank sends (in the trace)",
        when: "per layer, micro-batch, fwd + bwd",
        formula,
        megatron: want,
        ours,
        count: (1, 1),
    });
    let dp_cp = wl.groups.dp_cp_groups[0].len() as u64;
    out.push(Line {
        op: "dense gradients reduced over",
        when: "ranks in the group",
        formula: "DP·CP".into(),
        megatron: (j.cfg.data_parallel_size as u64) * x.cp,
        ours: dp_cp,
        count: (1, 1),
    });
}

/// The buffers of the all-to-alls over `group` among `steps`, in order.
fn a2a_sizes(steps: &[LayerStep], group: GroupKind) -> Vec<u64> {
    steps
        .iter()
        .filter_map(|s| match s {
            LayerStep::AllToAll {
                group: g,
                sizes: A2aSizes::Even(b),
            } if *g == group => Some(b.0),
            _ => None,
        })
        .collect()
}

/// The size S of the first CP collective among `steps`.
fn cp_coll_bytes(steps: &[LayerStep]) -> u64 {
    steps
        .iter()
        .find_map(|s| match s {
            LayerStep::Coll {
                group: GroupKind::Cp,
                bytes: StepBytes::Fixed(b),
                ..
            } => Some(b.0),
            _ => None,
        })
        .unwrap_or(0)
}

fn ep_lines(j: &Job, wl: &Workload, out: &mut Vec<Line>) {
    let (c, x) = (&j.cfg, shape(&j.cfg));
    let Some(m) = &wl.moe else { return };
    let (e, k, ep) = (
        c.num_experts.unwrap() as u64,
        c.moe_router_topk as u64,
        c.expert_model_parallel_size as u64,
    );
    let tokens = x.b * (x.s / x.cp) / x.tp;
    let a2a = count(&m.fwd_steps, |s| {
        matches!(
            s,
            LayerStep::AllToAll {
                sizes: A2aSizes::Dispatch | A2aSizes::Combine,
                ..
            }
        )
    }) + count(&m.bwd_steps, |s| matches!(s, LayerStep::AllToAll { .. }));
    out.push(Line {
        op: "EP all-to-all, bytes to each EP rank",
        when: "per MoE layer, micro-batch: dispatch + combine, fwd + bwd",
        formula: "b·(s/CP)/TP·topk·h·2/EP B (uniform routing)".into(),
        megatron: tokens * k * x.h * 2 / ep,
        ours: m.dispatch_bytes[0].0,
        count: (4, a2a),
    });
    let ffn = c.moe_ffn_hidden_size.unwrap_or(x.ffn);
    let gated = if c.swiglu { 2 } else { 1 };
    let etp = c.expert_tensor_parallel_size as u64;
    let expert = x.layers / x.pp * (e / ep) * (gated + 1) * x.h * ffn / etp;
    let ours: u64 = wl.stages[0]
        .buckets
        .iter()
        .filter(|b| b.group == GradGroup::ExpertData)
        .map(|b| b.grad_bytes.0)
        .sum();
    out.push(Line {
        op: "expert gradient all-reduce",
        when: "per iteration, over expert DP",
        formula: "L/PP·(E/EP)·3·h·ffn/ETP·grad B".into(),
        megatron: expert * x.grad,
        ours,
        count: (1, 1),
    });
}

fn table(j: &Job) -> (String, bool) {
    let wl = schedule::build(&j.cfg, &ScheduleOptions::default()).unwrap();
    let mut lines = Vec::new();
    tp_lines(j, &wl, &mut lines);
    cp_lines(j, &wl, &mut lines);
    pp_lines(j, &wl, &mut lines);
    dp_lines(j, &wl, &mut lines);
    ep_lines(j, &wl, &mut lines);
    let mut s = format!("\n## {}\n\n| op | when | Megatron formula | Megatron (B) | ina3d (B) | count: Megatron / ina3d |\n|---|---|---|---:|---:|---|\n", j.title);
    let mut ok = true;
    for l in &lines {
        let same = l.megatron == l.ours && l.count.0 == l.count.1;
        ok &= same;
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} / {}{} |",
            l.op,
            l.when,
            l.formula,
            l.megatron,
            l.ours,
            l.count.0,
            l.count.1,
            if same { "" } else { " **differs**" }
        );
    }
    (s, ok)
}

fn jobs() -> Vec<Job> {
    let common = [("micro_batch_size", "1")];
    let with = |extra: &[(&'static str, &'static str)]| -> Vec<(&'static str, &'static str)> {
        common.iter().chain(extra).copied().collect()
    };
    vec![
        job(
            "GPT-3 13B, TP8 · DP8, no sequence parallelism",
            "gpt3-13b",
            &with(&[
                ("tensor_model_parallel_size", "8"),
                ("data_parallel_size", "8"),
                ("global_batch_size", "64"),
            ]),
        ),
        job(
            "GPT-3 13B, TP8 · DP8, sequence parallelism",
            "gpt3-13b",
            &with(&[
                ("tensor_model_parallel_size", "8"),
                ("data_parallel_size", "8"),
                ("global_batch_size", "64"),
                ("sequence_parallel", "True"),
            ]),
        ),
        job(
            "GPT-3 175B, TP8 · PP16 · DP8",
            "gpt3-175b",
            &with(&[
                ("tensor_model_parallel_size", "8"),
                ("pipeline_model_parallel_size", "16"),
                ("data_parallel_size", "8"),
                ("global_batch_size", "1536"),
            ]),
        ),
        job(
            "GPT-3 175B, TP8 · PP16 · DP8, distributed optimizer",
            "gpt3-175b",
            &with(&[
                ("tensor_model_parallel_size", "8"),
                ("pipeline_model_parallel_size", "16"),
                ("data_parallel_size", "8"),
                ("global_batch_size", "1536"),
                ("use_distributed_optimizer", "True"),
            ]),
        ),
        job(
            "Llama-2 70B (GQA 8), TP8 · PP4 · DP4, sequence parallelism",
            "llama2-70b",
            &with(&[
                ("tensor_model_parallel_size", "8"),
                ("pipeline_model_parallel_size", "4"),
                ("data_parallel_size", "4"),
                ("global_batch_size", "64"),
                ("sequence_parallel", "True"),
            ]),
        ),
        job(
            "Mixtral-8x7B, PP4 · DP16 · EP8 (expert DP 2), alltoall dispatcher",
            "mixtral-8x7b",
            &with(&[
                ("pipeline_model_parallel_size", "4"),
                ("data_parallel_size", "16"),
                ("expert_model_parallel_size", "8"),
                ("global_batch_size", "256"),
            ]),
        ),
        job(
            "Llama-2 7B, TP2 · CP2 · DP2, sequence parallelism, ring attention",
            "llama2-7b",
            &with(&[
                ("tensor_model_parallel_size", "2"),
                ("context_parallel_size", "2"),
                ("data_parallel_size", "2"),
                ("global_batch_size", "8"),
                ("sequence_parallel", "True"),
            ]),
        ),
        job(
            "Llama-2 7B, TP2 · CP4, sequence parallelism, ring attention",
            "llama2-7b",
            &with(&[
                ("tensor_model_parallel_size", "2"),
                ("context_parallel_size", "4"),
                ("data_parallel_size", "1"),
                ("global_batch_size", "2"),
                ("sequence_parallel", "True"),
            ]),
        ),
        job(
            "Llama-2 7B, TP2 · CP4, sequence parallelism, K/V all-gather",
            "llama2-7b",
            &with(&[
                ("tensor_model_parallel_size", "2"),
                ("context_parallel_size", "4"),
                ("data_parallel_size", "1"),
                ("global_batch_size", "2"),
                ("sequence_parallel", "True"),
                ("cp_comm_type", "allgather"),
            ]),
        ),
        job(
            "Llama-2 7B with GQA 8, TP2 · CP4 as all-to-all 2 × ring 2 (a2a+p2p), sequence parallelism",
            "llama2-7b",
            &with(&[
                ("tensor_model_parallel_size", "2"),
                ("context_parallel_size", "4"),
                ("data_parallel_size", "1"),
                ("global_batch_size", "2"),
                ("sequence_parallel", "True"),
                ("group_query_attention", "True"),
                ("num_query_groups", "8"),
                ("cp_comm_type", "a2a+p2p"),
                ("hierarchical_context_parallel_sizes", "[2, 2]"),
            ]),
        ),
        job(
            "Llama-2 7B with GQA 8, TP2 · CP4, sequence parallelism, Ulysses all-to-all",
            "llama2-7b",
            &with(&[
                ("tensor_model_parallel_size", "2"),
                ("context_parallel_size", "4"),
                ("data_parallel_size", "1"),
                ("global_batch_size", "2"),
                ("sequence_parallel", "True"),
                ("group_query_attention", "True"),
                ("num_query_groups", "8"),
                ("cp_comm_type", "a2a"),
            ]),
        ),
    ]
}

#[test]
fn every_op_volume_equals_megatrons_formula_and_docs_volumes_md_is_current() {
    let mut doc = String::from("# Communication volumes: Megatron's formulas and ina3d's numbers\n\nGenerated by `tests/volumes.rs` (`cargo test --test volumes`), which derives every\nsize from Megatron-LM's shapes by hand and compares it with what the workload model\n(`schedule::build`) computes; do not edit by hand. Sizes are bytes per GPU; `b` is the\nmicro-batch, `s` the sequence, `h` the hidden size, `g·d` the K/V width, `V_pad` the\npadded vocabulary, `grad` the gradient element size (4: bf16 jobs reduce in fp32). Counts\nare per layer and micro-batch for layer ops, per micro-batch for the embedding and the\nhead, per iteration for gradients. See docs/model.md#per-op-sizes.\n\nContext-parallel volumes follow Transformer Engine's\n`transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py`\n(read at v2.9 and later; Megatron-core's `TEDotProductAttention` hands it `--cp-comm-type`).\n`p2p`: the forward loop runs CP steps and sends the concatenated K and V to the next rank\nin the first CP−1; the backward loop runs CP steps whose send buffer holds K/V and dK/dV,\nof which step 0 sends only K/V and step CP−1 only dK/dV, so 2(CP−1) blocks. `allgather`:\nthe forward gathers K and V along the sequence (`gather_along_first_dim`); the backward\ngathers them again before its attention steps (the forward kept only the local chunk)\nand reduce-scatters dK and dV (`reduce_scatter_along_first_dim`): three collectives of CP\nblocks, not two. `a2a`: the forward sends Q, K, V through one all-to-all and the output\nthrough another; the backward sends dO alone (the head-split output was saved in forward;\nTransformer Engine 1.11 to 2.8 re-sent the output with dO, 12.5 % more for multi-head\nattention) and returns dQ, dK, dV through a last one. `a2a+p2p` (Megatron's
`--hierarchical-context-parallel-sizes A P`): Q, K, V go through an all-to-all inside each
group of A consecutive CP ranks, then the ring runs over the P ranks A apart with blocks of
the same size (A times the sequence, heads/A), then the output comes back through the
all-to-all; backward mirrors it with dO and dQ, dK, dV. The \"in the trace\" rows count the\nCP-class payload every rank sends in a generated trace, divided by its layers and\nmicro-batches.\n");
    let mut ok = true;
    for j in jobs() {
        let (t, same) = table(&j);
        doc.push_str(&t);
        ok &= same;
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/volumes.md");
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != doc {
        std::fs::write(path.with_extension("md.new"), &doc).unwrap();
    }
    assert!(ok, "some volumes differ from Megatron's formulas:\n{doc}");
    assert!(
        committed == doc,
        "docs/volumes.md is not what the test generates: review docs/volumes.md.new and move it over"
    );
}
