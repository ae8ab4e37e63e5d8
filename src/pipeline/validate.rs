//! The validation suite (`ina3d validate`, `make validate`): contended fabrics from 8 to
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
    Job, JobSpec, ParallelSizes, PipelineError,
};
use crate::collective::{InaConfig, DEFAULT_INA_SLOTS};
use crate::fct::stats::{class_errors, rel_error, ErrorStats};
use crate::fct::Summary;
use crate::formats::validate_csv::{self, ValidateRow};
use crate::ns3::{EmitOptions, Transport};
use crate::replay::RateModel;

use crate::record::{Class, FlowRecord, Mode};
use crate::schedule::CollKind;
use crate::topology::{LinkKind, Topology};
use crate::trace::{
    Algorithm, BenchGroup, BenchSpec, CollectiveBench, InaMode, InaPolicy, TraceHeader,
};
use crate::units::{Bytes, Nanos};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

/// The replayer's rate model for a reference transport: the replayer's default for it
/// ([`RateModel::for_transport`]: DCQCN's dynamics against the RoCE glue, ideal max-min
/// rates against TCP).
pub fn rate_model_for(transport: Transport) -> RateModel {
    RateModel::chosen(None, transport)
}

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
    // NCCL's default channel count: both back-ends carry each channel of a GPU pair on
    // its own connection and ECMP path (docs/model.md#nccl-channels).
    with(tiny(topology, tp, pp, dp, micro), |s| {
        let size = [
            kv("num-layers", layers.to_string()),
            kv("hidden-size", "64".into()),
            kv("num-attention-heads", "8".into()),
            kv("seq-length", "128".into()),
            kv("max-position-embeddings", "128".into()),
            kv("micro-batch-size", "1".into()),
        ];
        // before the global batch size, as the overrides always were
        s.megatron.splice(0..0, size);
    })
}

/// The bundled tiny job at its own size (hidden 256, 256 tokens, 4 layers): messages of
/// 128 KiB to a few MiB, long enough for DCQCN to cut rates where ports are contended
/// (the suite's 64-wide model moves ≤ 2 MiB per collective and barely triggers it).
/// `micro` micro-batches per pipeline.
fn tiny(topology: &str, tp: u32, pp: u32, dp: u32, micro: u32) -> JobSpec {
    JobSpec {
        input: concat!(env!("CARGO_MANIFEST_DIR"), "/traces/example/tiny.toml").into(),
        topology: topology.into(),
        sizes: ParallelSizes {
            tp: Some(tp),
            pp: Some(pp),
            dp: Some(dp),
            ..Default::default()
        },
        megatron: vec![("global-batch-size".into(), (dp * micro).to_string())],
        ..JobSpec::default()
    }
}

fn with(mut s: JobSpec, f: impl FnOnce(&mut JobSpec)) -> JobSpec {
    f(&mut s);
    s
}

fn ina(mode: InaMode, slots: u32, policy: Option<InaPolicy>) -> InaConfig {
    InaConfig {
        mode,
        slots,
        policy,
        classes: vec![Class::Dp, Class::Tp, Class::Emb],
        ..InaConfig::default()
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

/// Every case of the suite, 8 to 128 GPUs: jobs at the 64-wide model's size, collective
/// curves, jobs at the tiny job's size, then the non-Clos fabrics.
pub fn cases() -> Vec<Case> {
    [model_jobs(), curves(), tiny_jobs(), other_fabrics()].concat()
}

/// The sizes (KiB) of an all-reduce or all-to-all curve.
const CURVE_KIB: [u64; 6] = [64, 128, 256, 512, 1024, 2048];

fn case(
    name: &'static str,
    about: &'static str,
    spec: JobSpec,
    bench: Option<CollectiveBench>,
) -> Case {
    Case {
        name,
        about,
        spec,
        bench,
    }
}

/// Jobs of the 64-wide model on Clos fabrics: host algorithms, NVLink, INA trees.
fn model_jobs() -> Vec<Case> {
    let ls2_16 = leaf_spine(4, 4, 2, 2);
    let ls4_32 = leaf_spine(4, 8, 2, 4);
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
                |s| s.ina = ina(InaMode::Hierarchical, DEFAULT_INA_SLOTS, None),
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
    ]
}

/// Collective curves: one collective at several sizes.
fn curves() -> Vec<Case> {
    let ls2_16 = leaf_spine(4, 4, 2, 2);
    let sizes = CURVE_KIB;
    vec![
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
                s.ina = ina(InaMode::Hierarchical, DEFAULT_INA_SLOTS, None)
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

/// The tiny job at its own size: messages long enough for DCQCN to act.
fn tiny_jobs() -> Vec<Case> {
    let ls2_16 = leaf_spine(4, 4, 2, 2);
    let ls4_32 = leaf_spine(4, 8, 2, 4);
    vec![
        case(
            "ls2-pp-emb-16",
            "2:1 leaf-spine, ring DP beside PP sends and the embedding all-reduce",
            tiny(&ls2_16, 1, 2, 8, 4),
            None,
        ),
        case(
            "ls2-pp4-32",
            "2:1 leaf-spine, PP4 × DP8",
            tiny(&leaf_spine(4, 8, 2, 2), 1, 4, 8, 4),
            None,
        ),
        case(
            "ls3-4ch-24",
            "3:1 leaf-spine, ring DP on 4 NCCL channels beside PP and embedding",
            with(tiny(&leaf_spine(4, 6, 2, 3), 1, 2, 12, 4), |s| {
                s.nccl_channels = Some(4)
            }),
            None,
        ),
        case(
            "ls4-pp-emb-32",
            "4:1 leaf-spine, ring DP beside PP sends and the embedding all-reduce",
            tiny(&ls4_32, 1, 2, 16, 4),
            None,
        ),
        case(
            "ls4-hd-pp-32",
            "4:1 leaf-spine, halving-doubling DP beside PP and embedding",
            with(tiny(&ls4_32, 1, 2, 16, 4), |s| s.collective = Algorithm::Hd),
            None,
        ),
        case(
            "ls4-dbt-pp-32",
            "4:1 leaf-spine, double-binary-tree DP beside PP and embedding",
            with(tiny(&ls4_32, 1, 2, 16, 4), |s| {
                s.collective = Algorithm::Dbt
            }),
            None,
        ),
        case(
            "ina-ls4-hosts-32",
            "INA hierarchical DP sharing 4:1 uplinks with PP and embedding host rings",
            with(tiny(&ls4_32, 1, 2, 16, 4), |s| {
                s.ina = InaConfig {
                    mode: InaMode::Hierarchical,
                    classes: vec![Class::Dp],
                    ..InaConfig::default()
                }
            }),
            None,
        ),
        case(
            "fattree-tpnet-tiny-16",
            "fat-tree k=4, TP2 across the network at the tiny job's size",
            tiny("fat-tree:k=4,gpus-per-server=1,nvlink=off", 2, 2, 4, 4),
            None,
        ),
        case(
            "moe-a2a-16",
            "MoE all-to-all (EP16, top-2) on a 2:1 leaf-spine",
            with(tiny(&ls2_16, 1, 1, 16, 1), |s| {
                s.sizes.ep = Some(16);
                s.megatron.push(("num-experts".into(), "16".into()));
                s.megatron.push(("moe-router-topk".into(), "2".into()));
            }),
            None,
        ),
        case(
            "ft-ring-h512-8",
            "fat-tree k=4, the tiny job at hidden 512: ECMP collisions DCQCN cuts",
            with(tiny("fat-tree:k=4,gpus-per-server=2", 2, 2, 2, 4), |s| {
                s.megatron.push(("hidden-size".into(), "512".into()))
            }),
            None,
        ),
        case(
            "ft-hd-h512-8",
            "fat-tree k=4, halving-doubling DP4 of a hidden-512 model",
            with(tiny("fat-tree:k=4,gpus-per-server=2", 2, 1, 4, 2), |s| {
                s.megatron.push(("hidden-size".into(), "512".into()));
                s.collective = Algorithm::Hd;
            }),
            None,
        ),
    ]
}

/// The non-Clos fabrics (docs/model.md#routing-on-other-fabrics): one job each.
fn other_fabrics() -> Vec<Case> {
    let sizes = CURVE_KIB;
    vec![
        // The host rings over long paths (Jellyfish's k-shortest detours, BCube's and DCell's
        // relays) run the tiny job at its own size (128 KiB – 4 MiB transfers): at the
        // 64-wide model's 20 KB ring steps a transfer lasts less than its path's
        // propagation, where the fluid model is pessimistic (docs/model.md#known-gaps)
        case(
            "jellyfish-ring-16",
            "Jellyfish, 8 switches of degree 4, ring DP + PP over k-shortest paths",
            tiny(
                "jellyfish:switches=8,ports=6,hosts-per-switch=2,seed=1,nvlink=off",
                1,
                2,
                8,
                4,
            ),
            None,
        ),
        case(
            "dragonfly-ina-16",
            "Dragonfly 4×2 routers, INA trees over general graphs",
            with(
                model(
                    "dragonfly:groups=4,routers=2,hosts-per-router=2,nvlink=off",
                    1,
                    2,
                    8,
                    4,
                    4,
                ),
                |s| s.ina = ina(InaMode::Hierarchical, DEFAULT_INA_SLOTS, None),
            ),
            None,
        ),
        case(
            "torus-swing-16",
            "4×4 torus, Swing all-reduce curve, dimension-order routes",
            with(model("torus:dims=4x4", 1, 1, 16, 4, 1), |s| {
                s.collective = Algorithm::Swing
            }),
            bench(CollKind::AllReduce, BenchGroup::All, &sizes),
        ),
        case(
            "torus-ina-16",
            "4×4 torus, INA in the routers, DP + PP",
            with(model("torus:dims=4x4", 1, 2, 8, 4, 4), |s| {
                s.ina = ina(InaMode::Hierarchical, DEFAULT_INA_SLOTS, None)
            }),
            None,
        ),
        case(
            "bcube-ring-16",
            "BCube(4,1), servers relay, ring DP + PP",
            tiny("bcube:n=4,k=1", 1, 2, 8, 4),
            None,
        ),
        case(
            "dcell-ring-16",
            "DCell(4,1), servers relay, ring DP + PP",
            tiny("dcell:n=4,k=1", 1, 2, 8, 4),
            None,
        ),
        case(
            "topoopt-ring-16",
            "TopoOpt 16 servers of degree 4, ring all-reduce curve",
            model("topoopt:servers=16,degree=4", 1, 1, 16, 4, 1),
            bench(CollKind::AllReduce, BenchGroup::All, &sizes),
        ),
    ]
}

/// The cases CI runs (small, a few seconds each on both back-ends).
pub const CI_CASES: [&str; 3] = ["ls2-ring-16", "bench-ring-ar-16", "ina-hier-128"];

/// How many times each case runs, and how far apart (docs/model.md#validation-ensemble).
///
/// On a contended fabric one packet-level run is one sample: moving every record's start
/// by less than a packet's time on the wire — differences no flow-level model resolves —
/// moves ns-3's iteration by up to 8.5 % on the suite. So each case also runs on copies of
/// its trace with every record's start moved by a few nanoseconds, and the table gives
/// the error of the means beside the spread of each back-end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ensemble {
    /// Runs per case (at least 1): run 0 on the trace as generated (the row's per-run
    /// figures), runs `1..` on jittered copies ([`jittered`]).
    pub runs: u32,
    /// The largest start move; `None`: one network packet on the case's fastest NIC
    /// ([`packet_time`]).
    pub jitter: Option<Nanos>,
}

impl Default for Ensemble {
    /// Eight runs, jitter of one packet time.
    fn default() -> Self {
        Ensemble {
            runs: 8,
            jitter: None,
        }
    }
}

/// One network packet's time on the fastest NIC of `topo` (a full packet's wire bytes,
/// payload and headers as both back-ends count them, docs/model.md#wire-bytes: the
/// granule below which a flow-level model does not order events); 1 ns without NICs.
pub fn packet_time(topo: &Topology) -> Nanos {
    use crate::record::{NET_PACKET_PAYLOAD, PACKET_HEADER};
    let packet = NET_PACKET_PAYLOAD.with_headers(NET_PACKET_PAYLOAD, PACKET_HEADER);
    topo.links
        .iter()
        .filter(|l| l.kind == LinkKind::Nic && l.rate.0 > 0)
        .map(|l| l.rate.transmit_time(packet))
        .min()
        .unwrap_or(Nanos(1))
}

/// `records` with every record's gap (the time between its last dependency ending and
/// its start) lengthened by a whole number of nanoseconds in `0..=max`, drawn per record
/// from the seeded hash of its position ([`crate::topology::ecmp_hash`], multiply-shift
/// to the range): the same `seed` gives the same copy. Dependencies, sizes and ids are
/// unchanged, so both back-ends must still do every record.
pub fn jittered(records: &[FlowRecord], seed: u64, max: Nanos) -> Vec<FlowRecord> {
    let span = u128::from(max.0) + 1;
    records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let h = crate::topology::ecmp_hash(seed, i as u64);
            let add = ((u128::from(h) * span) >> 64) as u64;
            let mut r = r.clone();
            r.gap = Nanos(r.gap.0.saturating_add(add));
            r
        })
        .collect()
}

/// One run of a case's records on both back-ends, outputs in `dir/replay` and `dir/ns3`.
struct RunPair {
    replay: crate::replay::ReplayResult,
    ns3: crate::ns3::run::RunReport,
}

/// What every run of a case shares: its records and where they run.
struct CaseSetup {
    /// The row's `case`.
    case: String,
    /// The row's `gpus`.
    gpus: u32,
    topology: Topology,
    seed: u64,
    transport: Transport,
    model: RateModel,
    header: TraceHeader,
    records: Vec<FlowRecord>,
    /// The trace's path, as the outputs name it.
    name: String,
}

impl CaseSetup {
    /// Runs `records` (the trace's own or a jittered copy, from the file `name`) on both
    /// back-ends under `dir` and checks the run's consistency.
    fn run(
        &self,
        records: &[FlowRecord],
        name: &str,
        dir: &Path,
    ) -> Result<RunPair, PipelineError> {
        let replay = replay_records(
            records,
            &self.header,
            &self.topology,
            self.seed,
            name,
            false,
            self.model,
        )?;
        crate::replay::write_outputs(&dir.join("replay"), &replay)?;
        let ina =
            crate::ns3::ina_model(&self.header).map_err(|e| PipelineError::Ns3(Box::new(e)))?;
        let emit = EmitOptions {
            seed: self.seed,
            // the glue follows the routes of the trace's routing, as the replayer does
            routing: super::header_routing(&self.header, Path::new(name))?,
            transport: self.transport,
            ..EmitOptions::default()
        };
        let ndir = dir.join("ns3");
        emit_ns3(records, &ina, &self.topology, &emit, &ndir, name)?;
        let ns3 = run_ns3(&glue()?, &ndir, |_, _| {})?;
        check_consistency(
            &self.case,
            records,
            &replay.summary,
            &ns3.summary,
            replay.channels.len(),
            !self.topology.switches().is_empty(),
        )?;
        Ok(RunPair { replay, ns3 })
    }

    /// Runs the ensemble in `dir` (run 0 there, run `k` in `dir/jitter-<k>/` with its
    /// copy's `trace.csv`) and returns the row.
    fn ensemble(&self, ensemble: Ensemble, dir: &Path) -> Result<ValidateRow, PipelineError> {
        let first = self.run(&self.records, &self.name, dir)?;
        let jitter = ensemble
            .jitter
            .unwrap_or_else(|| packet_time(&self.topology));
        let mut times = vec![iteration_pair(&first)];
        for k in 1..ensemble.runs.max(1) {
            let records = jittered(&self.records, self.seed ^ u64::from(k), jitter);
            let sub = dir.join(format!("jitter-{k}"));
            std::fs::create_dir_all(&sub).map_err(PipelineError::io(&sub))?;
            let file = sub.join("trace.csv");
            crate::formats::trace_csv::write(&file, &self.header, &records)?;
            let name = file.display().to_string();
            times.push(iteration_pair(&self.run(&records, &name, &sub)?));
        }
        let replay_rows = first.replay.rows();
        let classes = class_errors(&replay_rows, &first.ns3.rows);
        let bench_err = bench_error(self, dir, &replay_rows, &first.ns3.rows)?;
        Ok(row(
            self,
            (&first.replay.summary, &first.ns3.summary),
            &classes,
            bench_err,
            &EnsembleStats::of(&times, jitter),
        ))
    }
}

/// Runs `case` on both back-ends in `dir/<case>/` (run 0) and, for an ensemble of more
/// than one run, on jittered copies in `dir/<case>/jitter-<k>/` (each with the copy's
/// `trace.csv`), and returns its table row. Errors: a stage failed, or a consistency check
/// did not hold (named).
pub fn run_case(
    case: &Case,
    transport: Transport,
    model: RateModel,
    ensemble: Ensemble,
    dir: &Path,
) -> Result<ValidateRow, PipelineError> {
    let dir = dir.join(case.name);
    prepare_case(case, transport, model, &dir)?.ensemble(ensemble, &dir)
}

/// Runs the trace file `trace` as a case of its own, named by the file's stem, in
/// `dir/<stem>/`: what [`run_case`] does for the suite's cases, for a job the suite does
/// not have (`ina3d validate --trace`). The topology is `topology` or the trace header's
/// (an error when both are given and differ), the ECMP seed the header's (0 when it has
/// none, as `ina3d replay` takes it); the row is also written to `dir/validate.csv`.
pub fn run_trace_file(
    trace: &Path,
    topology: Option<&str>,
    transport: Transport,
    model: RateModel,
    ensemble: Ensemble,
    dir: &Path,
) -> Result<ValidateRow, PipelineError> {
    let t = crate::trace::read(trace).map_err(|source| PipelineError::ReadTrace {
        path: trace.to_path_buf(),
        source: Box::new(source),
    })?;
    let spec = super::resolve_topology(topology, super::header_topology(&t.header), trace)?;
    let topo = Topology::from_spec(&spec).map_err(|source| PipelineError::Topology {
        spec,
        source: Box::new(source),
    })?;
    let seed = super::header_seed(&t.header, trace)?.unwrap_or(0);
    let case = case_name(trace);
    let setup = CaseSetup {
        gpus: world_of(&t.header, &t.records),
        case: case.clone(),
        topology: topo,
        seed,
        transport,
        model,
        header: t.header,
        records: t.records,
        name: trace.display().to_string(),
    };
    let out = dir.join(&case);
    std::fs::create_dir_all(&out).map_err(PipelineError::io(&out))?;
    let row = setup.ensemble(ensemble, &out)?;
    validate_csv::write(&dir.join("validate.csv"), std::slice::from_ref(&row))?;
    Ok(row)
}

/// A trace file's case name: its file name without `.csv` / `.csv.gz`.
fn case_name(trace: &Path) -> String {
    let f = trace
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| "trace".into());
    let stem = f
        .strip_suffix(".csv.gz")
        .or_else(|| f.strip_suffix(".csv"))
        .unwrap_or(&f);
    if stem.is_empty() {
        "trace".into()
    } else {
        stem.to_string()
    }
}

/// The job's GPUs: the trace header's `world` (what `ina3d trace` writes), or the distinct
/// record endpoints when a header does not give it.
fn world_of(header: &TraceHeader, records: &[FlowRecord]) -> u32 {
    header
        .get("world")
        .and_then(|v| v.trim().parse::<u32>().ok())
        .unwrap_or_else(|| {
            let mut ends: Vec<u32> = records.iter().flat_map(|r| [r.src.0, r.dst.0]).collect();
            ends.sort_unstable();
            ends.dedup();
            ends.len() as u32
        })
}

/// Traces `case` into `dir/trace.csv`, keeping the records.
fn prepare_case(
    case: &Case,
    transport: Transport,
    model: RateModel,
    dir: &Path,
) -> Result<CaseSetup, PipelineError> {
    let job = Job::prepare(&case.spec)?;
    let opts = case.spec.trace_options()?;
    let trace_file = dir.join("trace.csv");
    std::fs::create_dir_all(dir).map_err(PipelineError::io(dir))?;
    let trace = match &case.bench {
        Some(b) => generate_bench_trace(&job, &opts, b, Some(&trace_file), true)?,
        None => generate_trace(&job, &opts, Some(&trace_file), true, &mut |_| {})?,
    };
    Ok(CaseSetup {
        case: case.name.to_string(),
        gpus: job.workload.world(),
        topology: job.topology,
        seed: opts.seed,
        transport,
        model,
        header: trace.header,
        records: trace.records,
        name: trace_file.display().to_string(),
    })
}

/// A bench case's busbw error at its largest size (run 0), writing both `bench.csv`.
fn bench_error(
    setup: &CaseSetup,
    dir: &Path,
    replay_rows: &[crate::fct::FctRow],
    ns3_rows: &[crate::fct::FctRow],
) -> Result<Option<f64>, PipelineError> {
    let spec = BenchSpec::from_header(&setup.header).map_err(|source| PipelineError::Generate {
        what: setup.name.clone(),
        source: Box::new(source),
    })?;
    let Some(spec) = spec else { return Ok(None) };
    let r = write_bench(&dir.join("replay"), &spec, &setup.records, replay_rows)?;
    let n = write_bench(&dir.join("ns3"), &spec, &setup.records, ns3_rows)?;
    let (r, n) = (r.last().map(|x| x.busbw_gbs), n.last().map(|x| x.busbw_gbs));
    Ok(r.zip(n).map(|(r, n)| (r - n) / n))
}

/// (replay, ns-3) iteration times of one run, ns.
fn iteration_pair(p: &RunPair) -> (u64, u64) {
    (
        p.replay.summary.iteration_time_ns,
        p.ns3.summary.iteration_time_ns,
    )
}

/// A case's ensemble in the table's terms.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EnsembleStats {
    /// Runs made.
    pub runs: u32,
    /// The jitter used, ns.
    pub jitter_ns: u64,
    /// `(mean replay − mean ns-3) / mean ns-3` over the runs.
    pub mean_error: f64,
    /// ns-3's `(max − min) / mean` over the runs.
    pub ns3_spread: f64,
    /// The replayer's `(max − min) / mean` over the runs.
    pub replay_spread: f64,
}

impl EnsembleStats {
    /// The statistics of `(replay, ns-3)` iteration times, one pair per run (at least one).
    pub fn of(times: &[(u64, u64)], jitter: Nanos) -> EnsembleStats {
        let side = |f: fn(&(u64, u64)) -> u64| {
            let v: Vec<f64> = times.iter().map(|t| f(t) as f64).collect();
            let mean = v.iter().sum::<f64>() / v.len().max(1) as f64;
            let (lo, hi) = v
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
                    (a.min(x), b.max(x))
                });
            let spread = if mean > 0.0 { (hi - lo) / mean } else { 0.0 };
            (mean, spread)
        };
        let (r, r_spread) = side(|t| t.0);
        let (n, n_spread) = side(|t| t.1);
        EnsembleStats {
            runs: times.len() as u32,
            jitter_ns: jitter.0,
            mean_error: if n > 0.0 { (r - n) / n } else { 0.0 },
            ns3_spread: n_spread,
            replay_spread: r_spread,
        }
    }
}

/// The suite's consistency checks on one case.
fn check_consistency(
    case: &str,
    records: &[FlowRecord],
    replay: &Summary,
    ns3: &Summary,
    replay_channels: usize,
    has_switches: bool,
) -> Result<(), PipelineError> {
    let fail = |msg: String| PipelineError::Option {
        option: format!("validation case `{case}`"),
        msg,
    };
    let n = records.len() as u64;
    if replay.records != n || ns3.records != n {
        return Err(fail(format!(
            "{n} records traced, {} done by the replayer, {} by ns-3",
            replay.records, ns3.records
        )));
    }
    let mut traced = [0u64; 6];
    for r in records
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
    // a switchless fabric (TopoOpt) carries its traffic over server links only
    let switched = |b: u64| b > 0 || !has_switches;
    if on_network
        && (replay_channels == 0 || !switched(replay.switch_bytes) || !switched(ns3.switch_bytes))
    {
        return Err(fail(format!(
            "network traffic in the trace but not observed: replay {replay_channels} busy links, switch bytes replay {} ns-3 {}",
            replay.switch_bytes, ns3.switch_bytes
        )));
    }
    Ok(())
}

/// The table row of a case run on both back-ends.
fn row(
    setup: &CaseSetup,
    (r, n): (&Summary, &Summary),
    classes: &BTreeMap<Class, ErrorStats>,
    bench_busbw_error: Option<f64>,
    ensemble: &EnsembleStats,
) -> ValidateRow {
    let class = |c: Class, p95: bool| {
        classes
            .get(&c)
            .map(|s| if p95 { s.p95_abs } else { s.median_abs })
    };
    ValidateRow {
        case: setup.case.clone(),
        gpus: setup.gpus,
        transport: setup.transport.to_string(),
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
        runs: ensemble.runs,
        jitter_ns: ensemble.jitter_ns,
        iteration_error_mean: ensemble.mean_error,
        ns3_spread: ensemble.ns3_spread,
        replay_spread: ensemble.replay_spread,
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
    ensemble: Ensemble,
    dir: &Path,
    progress: &mut dyn FnMut(&Case, &CaseOutcome, f64),
) -> Result<SuiteOutcome, PipelineError> {
    let mut rows = Vec::new();
    let mut failed = Vec::new();
    for c in cases {
        let t0 = Instant::now();
        let r = run_case(c, transport, model, ensemble, dir);
        progress(c, &r, t0.elapsed().as_secs_f64());
        match r {
            Ok(row) => rows.push(row),
            Err(e) => failed.push((c.name.to_string(), e)),
        }
    }
    validate_csv::write(&dir.join("validate.csv"), &rows)?;
    Ok(SuiteOutcome { rows, failed })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::FlowRecord;

    fn records(n: u64) -> Vec<FlowRecord> {
        (0..n)
            .map(|i| FlowRecord {
                id: crate::units::FlowId(i),
                gap: Nanos(10 * i),
                ..FlowRecord::default()
            })
            .collect()
    }

    #[test]
    fn a_jittered_copy_only_lengthens_gaps_within_the_bound_and_is_reproducible() {
        let base = records(2000);
        let a = jittered(&base, 7, Nanos(84));
        assert_eq!(a, jittered(&base, 7, Nanos(84)), "same seed, same copy");
        assert_ne!(
            a,
            jittered(&base, 8, Nanos(84)),
            "another seed, another copy"
        );
        let mut seen = [false; 85];
        for (x, y) in base.iter().zip(&a) {
            let add = y.gap.0 - x.gap.0;
            assert!(add <= 84, "{add}");
            seen[add as usize] = true;
            assert_eq!((x.id, &x.deps, x.bytes), (y.id, &y.deps, y.bytes));
        }
        // 2,000 draws cover both ends and nearly every value of 0..=84
        assert!(seen[0] && seen[84], "{seen:?}");
        assert!(seen.iter().filter(|s| **s).count() > 80);
        assert_eq!(jittered(&base, 7, Nanos(0)), base, "no jitter, no change");
    }

    #[test]
    fn the_ensemble_compares_means_and_measures_each_sides_spread() {
        let s = EnsembleStats::of(&[(110, 100), (100, 96), (120, 104)], Nanos(84));
        assert_eq!((s.runs, s.jitter_ns), (3, 84));
        assert!((s.mean_error - 0.1).abs() < 1e-12, "{s:?}");
        assert!((s.ns3_spread - 0.08).abs() < 1e-12, "{s:?}");
        assert!((s.replay_spread - 20.0 / 110.0).abs() < 1e-12, "{s:?}");
        let one = EnsembleStats::of(&[(90, 100)], Nanos(1));
        assert!((one.mean_error + 0.1).abs() < 1e-12 && one.ns3_spread == 0.0);
    }

    #[test]
    fn the_default_jitter_is_one_packet_on_the_fastest_nic() {
        let spec = "leaf-spine:leaves=2,spines=1,hosts-per-leaf=2,gpus-per-server=1";
        let topo = Topology::from_spec(spec).unwrap();
        // 1,000 B payload + 48 B headers at 100 Gb/s
        assert_eq!(packet_time(&topo), Nanos(84));
    }
}
