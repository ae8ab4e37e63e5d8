//! `ina3d export aicb`: the AICB/SimAI workload of a job, derived from the one workload
//! model ([`crate::schedule::Workload`]) — the same op sequences, sizes and compute times
//! the trace is lowered from (docs/model.md#aicb-workload). The file format itself lives
//! in [`crate::formats::aicb`].
//!
//! How SimAI reads the file decides the layout. SimAI walks the rows once forward (each
//! row's forward compute, then its forward collective) and once backward in reverse
//! order (input-gradient compute and collective, weight-gradient compute and collective);
//! it runs forward and input-gradient collectives over the TP group and weight-gradient
//! ones over the DP group (`_EP` / `_DP_EP` suffixes: EP and expert DP), and uses `ga`
//! only in its pipeline formulas. So:
//! - the rows of one micro-batch are repeated for every micro-batch;
//! - a block of op steps (a layer, the embedding, the LM head) becomes as many rows as
//!   its forward or backward has collectives: row `i` carries the `i`-th forward
//!   (compute, collective) pair, and, counted from the block's last row, the backward
//!   pairs in execution order; a backward compute is split evenly between the
//!   input-gradient and the weight-gradient slots;
//! - gradient synchronisation happens once, in the weight-gradient slots of the first
//!   rows (so it runs last in the backward walk): dense gradients over DP, expert
//!   gradients over expert DP, each a reduce-scatter followed (in the row above) by the
//!   parameter all-gather with the distributed optimizer, else an all-reduce; the
//!   sequence-parallel gradient all-reduce over TP in the first row's input-gradient slot;
//! - like AICB's own files, the layers are those of one stage (the first) and the file
//!   carries both the embedding (first stage) and the LM head (last stage).
//!
//! Not expressible, and documented in docs/model.md#known-gaps: context parallelism
//! (SimAI has no CP group: refused), the tied-embedding all-reduce between the first and
//! last stages (SimAI has no such group: left out), per-rank differences (skewed MoE
//! routing: the busiest EP rank's expert compute, the all-to-all buffer of a uniform
//! rank), expert TP collectives (run over SimAI's TP group).

use crate::formats::aicb::{self as fmt, Collective, Comm, CommGroup, Row, Slot};
use crate::schedule::{
    A2aSizes, CollKind, GradGroup, GroupKind, LayerStep, Pass, StagePlan, StepBytes, Workload,
};

/// A job SimAI's workload format cannot express.
#[derive(Debug, thiserror::Error)]
pub enum AicbError {
    /// Something the format has no place for.
    #[error("the AICB/SimAI workload cannot express this job: {0}")]
    Unsupported(String),
}

/// One (compute, collective) pair of a block, in execution order.
type Pair = (u64, Comm, u64);

fn collective(kind: CollKind) -> Collective {
    match kind {
        CollKind::AllReduce => Collective::AllReduce,
        CollKind::AllGather => Collective::AllGather,
        CollKind::ReduceScatter => Collective::ReduceScatter,
        CollKind::AllToAll => Collective::AllToAll,
    }
}

fn on(kind: Collective, group: CommGroup) -> Comm {
    Comm { kind, group }
}

/// Every row of the embedding block is named as AICB names it: SimAI's bubble sums every
/// row except those named exactly `embedding_layer`.
const EMBEDDING_ROW: &str = "embedding_layer";

/// The AICB workload of `wl`.
pub fn from_workload(wl: &Workload) -> Result<fmt::Workload, AicbError> {
    if wl.groups.cp > 1 {
        return Err(AicbError::Unsupported(format!(
            "context parallelism (CP {}): SimAI's workload has no context-parallel group",
            wl.groups.cp
        )));
    }
    let first = &wl.stages[0];
    let last = wl.stages.last().expect("at least one stage");
    let mut rows = gradient_rows(wl, first);
    for mb in 0..wl.microbatches {
        // AICB's name, which SimAI leaves out of its bubble base (`Layer::report`).
        block_rows(
            wl,
            EMBEDDING_ROW,
            &first.embedding_fwd,
            &first.embedding_bwd,
            &mut rows,
        );
        for l in first.chunks.iter().flat_map(|c| c.clone()) {
            block_rows(
                wl,
                &format!("layer{l}.mb{mb}"),
                wl.layer_steps(l, Pass::Fwd),
                wl.layer_steps(l, Pass::Bwd),
                &mut rows,
            );
        }
        block_rows(
            wl,
            &format!("lm_head.mb{mb}"),
            &last.head_fwd,
            &last.head_bwd,
            &mut rows,
        );
    }
    Ok(fmt::Workload {
        kind: fmt::KIND.into(),
        header: header(wl),
        rows,
    })
}

fn header(wl: &Workload) -> Vec<(String, Vec<String>)> {
    let pp_comm = if wl.pp() > 1 { wl.pp_bytes.0 } else { 0 };
    [
        ("model_parallel_NPU_group", wl.tp() as u64),
        ("ep", wl.groups.ep as u64),
        ("pp", wl.pp() as u64),
        ("vpp", wl.vpp as u64),
        ("ga", wl.microbatches as u64),
        ("all_gpus", wl.world() as u64),
        ("checkpoints", 0),
        ("checkpoint_initiates", 0),
        ("pp_comm", pp_comm),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), vec![v.to_string()]))
    .collect()
}

/// The once-per-iteration rows, top first: for each gradient group the parameter
/// all-gather (distributed optimizer) above the gradient reduction, then the
/// sequence-parallel all-reduce.
fn gradient_rows(wl: &Workload, stage: &StagePlan) -> Vec<Row> {
    let mut rows = Vec::new();
    let sum = |g: GradGroup, f: fn(&crate::schedule::Bucket) -> u64| -> u64 {
        stage.buckets.iter().filter(|b| b.group == g).map(f).sum()
    };
    let g = &wl.groups;
    for (group, name, suffix, ranks) in [
        (GradGroup::DataContext, "", CommGroup::Slot, g.dp * g.cp),
        (GradGroup::ExpertData, "expert_", CommGroup::DpEp, g.edp),
    ] {
        let grads = sum(group, |b| b.grad_bytes.0);
        if grads == 0 || ranks <= 1 {
            continue; // nothing to reduce over one rank
        }
        let wg = |kind, bytes| Row {
            name: String::new(),
            dep: -1,
            fwd: Slot::EMPTY,
            ig: Slot::EMPTY,
            wg: Slot {
                compute: 0,
                comm: on(kind, suffix),
                bytes,
            },
            update: 0,
        };
        if wl.distributed_optimizer {
            rows.push(Row {
                name: format!("{name}param_allgather"),
                ..wg(Collective::AllGather, sum(group, |b| b.param_bytes.0))
            });
            rows.push(Row {
                name: format!("{name}grad_reduce_scatter"),
                ..wg(Collective::ReduceScatter, grads)
            });
        } else {
            rows.push(Row {
                name: format!("{name}grad_all_reduce"),
                ..wg(Collective::AllReduce, grads)
            });
        }
    }
    if let Some(b) = stage.layernorm_bytes {
        rows.push(Row {
            name: "sequence_parallel_grads".into(),
            dep: -1,
            fwd: Slot::EMPTY,
            ig: Slot {
                compute: 0,
                comm: Comm::slot(Collective::AllReduce),
                bytes: b.0,
            },
            wg: Slot::EMPTY,
            update: 0,
        });
    }
    rows
}

/// A block's steps as (compute, collective) pairs: compute accumulates until the next
/// collective; trailing compute is a pair without a collective.
fn pairs(wl: &Workload, steps: &[LayerStep]) -> Vec<Pair> {
    let mut out = Vec::new();
    let mut acc = 0u64;
    for st in steps {
        let (comm, bytes) = match *st {
            LayerStep::Compute(t) => {
                acc += t.0;
                continue;
            }
            LayerStep::Experts(pass) => {
                acc += busiest_experts(wl, pass);
                continue;
            }
            LayerStep::CpRing { core, .. } => {
                // Refused before (CP > 1); with one CP rank the ring is its compute.
                acc += core.0;
                continue;
            }
            LayerStep::Tp(kind) => (Comm::slot(collective(kind)), wl.tp_bytes.0),
            LayerStep::Coll { kind, group, bytes } => (
                on(collective(kind), suffix(group)),
                match bytes {
                    StepBytes::Fixed(b) => b.0,
                    StepBytes::ExpertTokens => wl.moe.as_ref().map_or(0, |m| {
                        m.etp_gather_bytes.iter().map(|b| b.0).max().unwrap_or(0)
                    }),
                },
            ),
            LayerStep::AllToAll { group, sizes } => (
                on(Collective::AllToAll, suffix(group)),
                a2a_buffer(wl, sizes),
            ),
        };
        out.push((acc, comm, bytes));
        acc = 0;
    }
    if acc > 0 {
        out.push((acc, Comm::NONE, 0));
    }
    out
}

fn suffix(g: GroupKind) -> CommGroup {
    match g {
        GroupKind::Tp | GroupKind::Cp | GroupKind::ExpertTp => CommGroup::Slot,
        GroupKind::Ep | GroupKind::ExpertTpEp => CommGroup::Ep,
    }
}

/// The experts' compute of the busiest EP rank (every rank's, under uniform routing).
fn busiest_experts(wl: &Workload, pass: Pass) -> u64 {
    wl.moe.as_ref().map_or(0, |m| {
        let v = match pass {
            Pass::Fwd => &m.expert_fwd,
            Pass::Bwd => &m.expert_bwd,
        };
        v.iter().map(|t| t.0).max().unwrap_or(0)
    })
}

/// The per-rank buffer of an all-to-all: what one rank sends to all members.
fn a2a_buffer(wl: &Workload, sizes: A2aSizes) -> u64 {
    match sizes {
        A2aSizes::Even(b) | A2aSizes::CpInner(b) => b.0,
        A2aSizes::Dispatch | A2aSizes::Combine => wl
            .moe
            .as_ref()
            .map_or(0, |m| m.dispatch_bytes.iter().map(|b| b.0).sum()),
    }
}

/// The rows of one block (see the module docs for how forward and backward share them).
fn block_rows(
    wl: &Workload,
    name: &str,
    fwd: &[LayerStep],
    bwd: &[LayerStep],
    rows: &mut Vec<Row>,
) {
    let (f, b) = (pairs(wl, fwd), pairs(wl, bwd));
    let n = f.len().max(b.len());
    for i in 0..n {
        let fwd = f.get(i).map_or(Slot::EMPTY, |&(c, comm, bytes)| Slot {
            compute: c,
            comm,
            bytes,
        });
        // Backward walks the rows from the last: row n−1 runs the first backward pair.
        let (ig, wg) = match b.get(n - 1 - i) {
            Some(&(c, comm, bytes)) => (
                Slot {
                    compute: c - c / 2,
                    comm,
                    bytes,
                },
                Slot {
                    compute: c / 2,
                    ..Slot::EMPTY
                },
            ),
            None => (Slot::EMPTY, Slot::EMPTY),
        };
        rows.push(Row {
            name: if n == 1 || name == EMBEDDING_ROW {
                name.to_string()
            } else {
                format!("{name}.{i}")
            },
            dep: -1,
            fwd,
            ig,
            wg,
            update: 0,
        });
    }
}
