//! The validation suite (`ina3d validate`, `make validate`): contended fabrics from 16 to
//! 128 GPUs, each case traced once and run on both back-ends — the native replayer and the
//! ns-3 glue — through the same library calls as `ina3d trace`, `replay`, `ns3 emit|run`
//! and `compare`, then summarised as one row of `validate.csv`.
//!
//! The suite asserts consistency only (every record done on both sides, payload bytes per
//! class conserved from the trace to both summaries, traffic observed on the network when
//! the trace has some); how far the replayer is from ns-3 is *measured* and written in the
//! table, never asserted.

use super::{
    emit_ns3, generate_bench_trace, generate_trace, glue, replay_records, run_ns3, write_bench,
    GeneratedTrace, InaSpec, Job, JobSpec, ParallelSizes, PipelineError,
};
use crate::fct::stats::{class_errors, rel_error, ErrorStats};
use crate::fct::Summary;
use crate::formats::validate_csv::{self, ValidateRow};
use crate::ns3::{EmitOptions, Transport};
use crate::replay::RateModel;

/// The replayer's rate model for a reference transport: DCQCN's dynamics against the
/// RoCE glue, ideal max-min rates against TCP (whose windows reach their fair share
/// within a few round trips; `docs/model.md`).
pub fn rate_model_for(transport: Transport) -> RateModel {
    match transport {
        Transport::Roce => RateModel::Dcqcn,
        Transport::Tcp => RateModel::Ideal,
    }
}
use crate::record::{Class, Mode};
use crate::schedule::CollKind;
use crate::trace::{Algorithm, BenchGroup, BenchSpec, CollectiveBench, InaMode, InaPolicy};
use crate::units::Bytes;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

/// One case of the suite: a job (or a collective bench) on a topology.
#[derive(Clone, Debug)]
pub struct Case {
    /// Name (the row's `case`).
    pub name: &'static str,
    /// What the case stresses, for the reader of the table.
    pub about: &'static str,
    /// The job: model overrides, layout, collective, INA.
    pub spec: JobSpec,
    /// A collective bench instead of a training iteration.
    pub bench: Option<CollectiveBench>,
}

/// The small model every case trains: the bundled tiny job's file with a 64-wide,
/// 8-head, 128-token model, so that packet-level runs stay short at 128 GPUs.
fn model(topology: &str, tp: u32, pp: u32, dp: u32, layers: u32, micro: u32) -> JobSpec {
    let kv = |k: &str, v: String| (k.to_string(), v);
    JobSpec {
        input: concat!(env!("CARGO_MANIFEST_DIR"), "/traces/example/tiny.toml").into(),
        topology: topology.into(),
        sizes: ParallelSizes {
            tp: Some(tp),
            pp: Some(pp),
            dp: Some(dp),
            ..Default::default()
        },
        megatron: vec![
            kv("num-layers", layers.to_string()),
            kv("hidden-size", "64".into()),
            kv("num-attention-heads", "8".into()),
            kv("seq-length", "128".into()),
            kv("max-position-embeddings", "128".into()),
            kv("micro-batch-size", "1".into()),
            kv("global-batch-size", (dp * micro).to_string()),
        ],
        // NCCL's default channel count: both back-ends carry each channel of a GPU pair
        // on its own connection and ECMP path (docs/model.md#nccl-channels).
        ..JobSpec::default()
    }
}

fn with(mut s: JobSpec, f: impl FnOnce(&mut JobSpec)) -> JobSpec {
    f(&mut s);
    s
}

fn ina(mode: InaMode, slots: u32, policy: Option<InaPolicy>) -> InaSpec {
    InaSpec {
        mode,
        slots,
        policy,
        classes: vec![Class::Dp, Class::Tp, Class::Emb],
        ..InaSpec::default()
    }
}

fn bench(kind: CollKind, group: BenchGroup, sizes: &[u64]) -> Option<CollectiveBench> {
    Some(CollectiveBench {
        kind,
        sizes: sizes.iter().map(|&k| Bytes::kib(k)).collect(),
        group,
    })
}

/// Leaf-spine of single-GPU servers: `leaves` × `per_leaf` hosts, uplinks `oversub`:1.
fn leaf_spine(leaves: u32, per_leaf: u32, spines: u32, oversub: u32) -> String {
    format!("leaf-spine:leaves={leaves},spines={spines},hosts-per-leaf={per_leaf},gpus-per-server=1,oversub={oversub}")
}

/// Every case of the suite, 16 to 128 GPUs.
pub fn cases() -> Vec<Case> {
    let ls2_16 = leaf_spine(4, 4, 2, 2);
    let ls4_32 = leaf_spine(4, 8, 2, 4);
    let sizes = [64, 128, 256, 512, 1024, 2048];
    let case = |name, about, spec, bench| Case {
        name,
        about,
        spec,
        bench,
    };
    vec![
        case(
            "ls2-ring-16",
            "2:1 leaf-spine, ring DP + PP",
            model(&ls2_16, 1, 2, 8, 4, 4),
            None,
        ),
        case(
            "ls4-hd-32",
            "4:1 leaf-spine, halving-doubling DP",
            with(model(&ls4_32, 1, 2, 16, 4, 4), |s| {
                s.collective = Algorithm::Hd
            }),
            None,
        ),
        case(
            "ls4-dbt-32",
            "4:1 leaf-spine, double binary tree DP",
            with(model(&ls4_32, 1, 2, 16, 4, 4), |s| {
                s.collective = Algorithm::Dbt
            }),
            None,
        ),
        case(
            "rail-ring-32",
            "rail-optimised, 8 servers × 4 GPUs, TP in NVLink",
            model("rail:servers=8,gpus-per-server=4,spines=2", 4, 1, 8, 4, 4),
            None,
        ),
        case(
            "fattree-tpnet-16",
            "fat-tree k=4, TP2 across the network",
            model("fat-tree:k=4,gpus-per-server=1,nvlink=off", 2, 2, 4, 4, 4),
            None,
        ),
        case(
            "pp-heavy-64",
            "PP8 × 16 micro-batches: many small p2p",
            model(&leaf_spine(8, 8, 4, 2), 1, 8, 8, 8, 16),
            None,
        ),
        case(
            "hier-64",
            "hierarchical collectives, 8-GPU NVLink servers, 2:1",
            with(
                model(
                    "leaf-spine:leaves=4,spines=2,hosts-per-leaf=16,gpus-per-server=8,oversub=2",
                    2,
                    1,
                    32,
                    4,
                    2,
                ),
                |s| s.collective = Algorithm::Hierarchical,
            ),
            None,
        ),
        case(
            "ina-hier-128",
            "INA hierarchical tree, enough slots",
            with(
                model("fat-tree:k=8,gpus-per-server=8", 8, 2, 8, 4, 4),
                |s| s.ina = ina(InaMode::Hierarchical, 8192, None),
            ),
            None,
        ),
        case(
            "ina-hier-few-128",
            "INA hierarchical tree, too few slots (static shares wait)",
            with(
                model("fat-tree:k=8,gpus-per-server=8", 8, 2, 8, 4, 4),
                |s| s.ina = ina(InaMode::Hierarchical, 16, None),
            ),
            None,
        ),
        case(
            "ina-atp-64",
            "ATP best-effort: too few slots, fallback to the host ring",
            with(model(&leaf_spine(8, 8, 4, 2), 1, 2, 32, 4, 2), |s| {
                s.ina = ina(InaMode::Atp, 8, Some(InaPolicy::BestEffort))
            }),
            None,
        ),
        case(
            "bench-ring-ar-16",
            "all-reduce curve, ring, 2:1",
            model(&ls2_16, 1, 1, 16, 4, 1),
            bench(CollKind::AllReduce, BenchGroup::All, &sizes),
        ),
        case(
            "bench-hd-ar-16",
            "all-reduce curve, halving-doubling, 2:1",
            with(model(&ls2_16, 1, 1, 16, 4, 1), |s| {
                s.collective = Algorithm::Hd
            }),
            bench(CollKind::AllReduce, BenchGroup::All, &sizes),
        ),
        case(
            "bench-dbt-ar-16",
            "all-reduce curve, double binary tree, 2:1",
            with(model(&ls2_16, 1, 1, 16, 4, 1), |s| {
                s.collective = Algorithm::Dbt
            }),
            bench(CollKind::AllReduce, BenchGroup::All, &sizes),
        ),
        case(
            "bench-ina-ar-16",
            "all-reduce curve, INA hierarchical, 2:1",
            with(model(&ls2_16, 1, 1, 16, 4, 1), |s| {
                s.ina = ina(InaMode::Hierarchical, 8192, None)
            }),
            bench(CollKind::AllReduce, BenchGroup::All, &sizes),
        ),
        case(
            "bench-nvlink-ag-32",
            "all-gather curve inside 8-GPU NVLink servers",
            model(
                "leaf-spine:leaves=2,spines=2,hosts-per-leaf=16,gpus-per-server=8",
                8,
                1,
                4,
                4,
                1,
            ),
            bench(CollKind::AllGather, BenchGroup::Tp, &[1024, 4096, 16384]),
        ),
        case(
            "bench-a2a-16",
            "all-to-all curve, 2:1",
            model(&ls2_16, 1, 1, 16, 4, 1),
            bench(CollKind::AllToAll, BenchGroup::All, &sizes),
        ),
    ]
}

/// The cases CI runs (small, a few seconds each on both back-ends).
pub const CI_CASES: [&str; 3] = ["ls2-ring-16", "bench-ring-ar-16", "ina-hier-128"];

/// Runs `case` on both back-ends in `dir/<case>/` and returns its table row. Errors: a
/// stage failed, or a consistency check did not hold (named).
pub fn run_case(
    case: &Case,
    transport: Transport,
    model: RateModel,
    dir: &Path,
) -> Result<ValidateRow, PipelineError> {
    let dir = dir.join(case.name);
    let job = Job::prepare(&case.spec)?;
    let opts = case.spec.trace_options()?;
    let trace_file = dir.join("trace.csv");
    std::fs::create_dir_all(&dir).map_err(PipelineError::io(&dir))?;
    let t = match &case.bench {
        Some(b) => generate_bench_trace(&job, &opts, b, Some(&trace_file), true)?,
        None => generate_trace(&job, &opts, Some(&trace_file), true, &mut |_| {})?,
    };
    let name = trace_file.display().to_string();
    let replay = replay_records(
        &t.records,
        &t.header,
        &job.topology,
        opts.seed,
        &name,
        false,
        model,
    )?;
    let (rdir, ndir) = (dir.join("replay"), dir.join("ns3"));
    crate::replay::write_outputs(&rdir, &replay)?;
    let ina = crate::ns3::ina_model(&t.header).map_err(|e| PipelineError::Ns3(Box::new(e)))?;
    let emit = EmitOptions {
        seed: opts.seed,
        transport,
        ..EmitOptions::default()
    };
    emit_ns3(&t.records, &ina, &job.topology, &emit, &ndir, &name)?;
    let ns3 = run_ns3(&glue()?, &ndir, |_, _| {})?;
    check_consistency(
        case,
        &t,
        &replay.summary,
        &ns3.summary,
        replay.channels.len(),
    )?;
    let replay_rows = replay.rows();
    let classes = class_errors(&replay_rows, &ns3.rows);
    let bench_err =
        match BenchSpec::from_header(&t.header).map_err(|source| PipelineError::Generate {
            what: name.clone(),
            source: Box::new(source),
        })? {
            Some(spec) => {
                let r = write_bench(&rdir, &spec, &t.records, &replay_rows)?;
                let n = write_bench(&ndir, &spec, &t.records, &ns3.rows)?;
                let (r, n) = (r.last().map(|x| x.busbw_gbs), n.last().map(|x| x.busbw_gbs));
                r.zip(n).map(|(r, n)| (r - n) / n)
            }
            None => None,
        };
    Ok(row(
        case,
        transport,
        &job,
        (&replay.summary, &ns3.summary),
        &classes,
        bench_err,
    ))
}

/// The suite's consistency checks on one case.
fn check_consistency(
    case: &Case,
    t: &GeneratedTrace,
    replay: &Summary,
    ns3: &Summary,
    replay_channels: usize,
) -> Result<(), PipelineError> {
    let fail = |msg: String| PipelineError::Option {
        option: format!("validation case `{}`", case.name),
        msg,
    };
    let n = t.records.len() as u64;
    if replay.records != n || ns3.records != n {
        return Err(fail(format!(
            "{n} records traced, {} done by the replayer, {} by ns-3",
            replay.records, ns3.records
        )));
    }
    let mut traced = [0u64; 6];
    for r in t
        .records
        .iter()
        .filter(|r| matches!(r.mode, Mode::Net | Mode::Ina))
    {
        if let Some(i) = Class::TRAFFIC.iter().position(|c| *c == r.class) {
            traced[i] += r.bytes.0;
        }
    }
    let of = |s: &Summary| {
        [
            s.tp_bytes,
            s.pp_bytes,
            s.dp_bytes,
            s.emb_bytes,
            s.cp_bytes,
            s.ep_bytes,
        ]
    };
    if of(replay) != traced || of(ns3) != traced {
        return Err(fail(format!(
            "payload bytes per class (tp, pp, dp, emb, cp, ep) not conserved: trace {traced:?}, replay {:?}, ns-3 {:?}",
            of(replay),
            of(ns3)
        )));
    }
    let on_network = traced.iter().sum::<u64>() > 0;
    if on_network && (replay_channels == 0 || replay.switch_bytes == 0 || ns3.switch_bytes == 0) {
        return Err(fail(format!(
            "network traffic in the trace but not observed: replay {replay_channels} busy links, switch bytes replay {} ns-3 {}",
            replay.switch_bytes, ns3.switch_bytes
        )));
    }
    Ok(())
}

/// The table row of a case run on both back-ends.
fn row(
    case: &Case,
    transport: Transport,
    job: &Job,
    (r, n): (&Summary, &Summary),
    classes: &BTreeMap<Class, ErrorStats>,
    bench_busbw_error: Option<f64>,
) -> ValidateRow {
    let class = |c: Class, p95: bool| {
        classes
            .get(&c)
            .map(|s| if p95 { s.p95_abs } else { s.median_abs })
    };
    ValidateRow {
        case: case.name.into(),
        gpus: job.workload.world(),
        transport: transport.to_string(),
        records: r.records,
        iteration_error: rel_error(r.iteration_time_ns, n.iteration_time_ns),
        fct_median_error_tp: class(Class::Tp, false),
        fct_p95_error_tp: class(Class::Tp, true),
        fct_median_error_pp: class(Class::Pp, false),
        fct_p95_error_pp: class(Class::Pp, true),
        fct_median_error_dp: class(Class::Dp, false),
        fct_p95_error_dp: class(Class::Dp, true),
        slot_peak_replay: r.ina_slot_peak,
        slot_peak_ns3: n.ina_slot_peak,
        switch_bytes_diff: r.switch_bytes as i64 - n.switch_bytes as i64,
        bench_busbw_error,
        replay_wall_s: r.wall_time_ns as f64 / 1e9,
        ns3_wall_s: n.wall_time_ns as f64 / 1e9,
        speed_ratio: n.wall_time_ns as f64 / r.wall_time_ns.max(1) as f64,
    }
}

/// One case's outcome: its row, or why it failed.
pub type CaseOutcome = Result<ValidateRow, PipelineError>;

/// What a suite run gave.
#[derive(Debug)]
pub struct SuiteOutcome {
    /// The rows of the cases that ran, in case order (what `validate.csv` holds).
    pub rows: Vec<ValidateRow>,
    /// The cases that failed, by name, with why.
    pub failed: Vec<(String, PipelineError)>,
}

/// Runs `cases` in order under `dir` and writes `dir/validate.csv` atomically (the rows of
/// the cases that ran; a failed case is reported and the suite goes on). `progress` is
/// told each case's outcome. Returns the rows and the failures.
pub fn run_suite(
    cases: &[Case],
    transport: Transport,
    model: RateModel,
    dir: &Path,
    progress: &mut dyn FnMut(&Case, &CaseOutcome, f64),
) -> Result<SuiteOutcome, PipelineError> {
    let mut rows = Vec::new();
    let mut failed = Vec::new();
    for c in cases {
        let t0 = Instant::now();
        let r = run_case(c, transport, model, dir);
        progress(c, &r, t0.elapsed().as_secs_f64());
        match r {
            Ok(row) => rows.push(row),
            Err(e) => failed.push((c.name.to_string(), e)),
        }
    }
    validate_csv::write(&dir.join("validate.csv"), &rows)?;
    Ok(SuiteOutcome { rows, failed })
}
