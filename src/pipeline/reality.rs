//! The published-run suite (`make reality`, `ina3d validate --reality`): real Megatron-LM
//! and NeMo training runs whose iteration times were published, each predicted from its
//! configuration on the fabric it ran on, with the compute model's efficiencies fitted on
//! the rows marked `fit` and checked on the rows `held-out` (docs/compute.md#the-published-run-suite).
//!
//! The suite lives in `traces/reality/runs.toml`; every row cites its source.

use super::{replay_job, JobSpec, ParallelSizes, PipelineError};
use crate::replay::RateModel;
use crate::schedule::{
    ComputeModel, Efficiency, Engine, EngineCost, Generation, Gpu, LayerStep, Pass, Workload,
};
use crate::topology::RoutingMode;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// The suite file in the repository.
pub const SUITE: &str = "traces/reality/runs.toml";

/// Which rows the efficiencies are fitted on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunGroup {
    /// The per-generation efficiencies are fitted on these rows.
    Fit,
    /// Never fitted on: the independent check.
    HeldOut,
}

crate::keyword::keyword_enum!(RunGroup, "run group", RunGroup::Fit => "fit", RunGroup::HeldOut => "held-out");

/// One published run.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublishedRun {
    /// Short unique name.
    pub id: String,
    /// Fit or held out.
    pub group: RunGroup,
    /// Where the figure was published (in our words: document, table, row).
    pub source: String,
    /// How the iteration time follows from what was published.
    pub derivation: String,
    /// GPU preset.
    pub gpu: String,
    /// The fabric as the run had it (a topology spec).
    pub topology: String,
    /// How that fabric routed (ecmp by default; InfiniBand's static tables are `dmodk`,
    /// its adaptive routing `spray`).
    #[serde(default)]
    pub routing: RoutingMode,
    /// The published (or derived) iteration time, ms.
    pub published_ms: f64,
    /// The job's base (a model preset or a config file relative to the suite file).
    pub input: String,
    /// Parallel sizes.
    pub tp: u32,
    /// Pipeline size.
    pub pp: u32,
    /// Data-parallel size.
    pub dp: u32,
    /// Interleaved chunks per stage.
    #[serde(default)]
    pub vpp: Option<u32>,
    /// Context parallel size.
    #[serde(default)]
    pub cp: Option<u32>,
    /// Expert parallel size.
    #[serde(default)]
    pub ep: Option<u32>,
    /// Megatron arguments over the base (`KEY = value`, as `--set KEY=VALUE`).
    #[serde(default)]
    pub args: BTreeMap<String, toml::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SuiteFile {
    run: Vec<PublishedRun>,
}

/// Why the suite cannot be read or a row cannot be predicted.
#[derive(Debug, thiserror::Error)]
pub enum RealityError {
    /// The file cannot be read.
    #[error("{path}: {source}")]
    Io {
        /// File.
        path: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a valid suite.
    #[error("{path}: {msg}")]
    Parse {
        /// File.
        path: String,
        /// What is wrong, with line and column.
        msg: String,
    },
    /// A row's field is out of range or inconsistent.
    #[error("{path}: run `{id}`: {field}: {msg}")]
    Row {
        /// File.
        path: String,
        /// Row.
        id: String,
        /// Field.
        field: String,
        /// What is expected.
        msg: String,
    },
    /// The row's job could not be replayed.
    #[error("run `{id}`: {source}")]
    Run {
        /// Row.
        id: String,
        /// Cause.
        #[source]
        source: Box<PipelineError>,
    },
}

/// Read and check the suite at `path`.
pub fn load_suite(path: &Path) -> Result<Vec<PublishedRun>, RealityError> {
    let p = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| RealityError::Io {
        path: p.clone(),
        source,
    })?;
    let file: SuiteFile = toml::from_str(&text).map_err(|e| RealityError::Parse {
        path: p.clone(),
        msg: e.to_string().trim().replace('\n', " "),
    })?;
    let mut seen = std::collections::BTreeSet::new();
    for r in &file.run {
        let bad = |field: &str, msg: String| RealityError::Row {
            path: p.clone(),
            id: r.id.clone(),
            field: field.into(),
            msg,
        };
        if !seen.insert(r.id.clone()) {
            return Err(bad("id", "given twice".into()));
        }
        if !(r.published_ms.is_finite() && r.published_ms > 0.0 && r.published_ms < 1e9) {
            return Err(bad(
                "published_ms",
                format!("{} is not a time in (0, 1e9) ms", r.published_ms),
            ));
        }
        if Gpu::preset(&r.gpu).is_none() {
            return Err(bad("gpu", format!("`{}`: expected {}", r.gpu, Gpu::NAMES)));
        }
        for (k, v) in &r.args {
            if matches!(v, toml::Value::Array(_) | toml::Value::Table(_)) {
                return Err(bad(
                    &format!("args.{k}"),
                    "expected a number, a string or a boolean".into(),
                ));
            }
        }
    }
    Ok(file.run)
}

/// One row's prediction.
#[derive(Clone, Debug)]
pub struct Prediction {
    /// The row's id.
    pub id: String,
    /// Its group.
    pub group: RunGroup,
    /// GPU.
    pub gpu: String,
    /// GPUs of the run.
    pub gpus: u32,
    /// Published iteration, ms.
    pub published_ms: f64,
    /// Predicted iteration, ms.
    pub predicted_ms: f64,
    /// Of which the busiest rank's compute, ms.
    pub compute_ms: f64,
}

impl Prediction {
    /// Signed relative error of the prediction.
    pub fn error(&self) -> f64 {
        self.predicted_ms / self.published_ms - 1.0
    }
}

fn arg_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Boolean(true) => "True".into(),
        toml::Value::Boolean(false) => "False".into(),
        other => other.to_string(),
    }
}

/// The constants a prediction uses where they override the fitted ones (the fit's
/// trial values).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Constants {
    /// The GPU generation's efficiencies.
    pub efficiency: Option<Efficiency>,
    /// The training engine's cost.
    pub engine: Option<EngineCost>,
}

/// The job of `run` (inputs relative to `base`), with `c` overriding the fitted constants.
pub fn job_spec(run: &PublishedRun, base: &Path, c: Constants) -> JobSpec {
    let input = {
        let rel = base.join(&run.input);
        if rel.is_file() {
            rel.display().to_string()
        } else {
            run.input.clone()
        }
    };
    JobSpec {
        input,
        topology: run.topology.clone(),
        sizes: ParallelSizes {
            tp: Some(run.tp),
            pp: Some(run.pp),
            dp: Some(run.dp),
            vpp: run.vpp,
            cp: run.cp,
            ep: run.ep,
        },
        set: run
            .args
            .iter()
            .map(|(k, v)| format!("{k}={}", arg_text(v)))
            .collect(),
        gpu: run.gpu.clone(),
        compute: ComputeModel::Roofline,
        efficiency: c.efficiency,
        engine_cost: c.engine,
        calibrate: false,
        routing: run.routing,
        ..JobSpec::default()
    }
}

/// Predict `run` (InfiniBand fabrics: credit-based lossless links, so the ideal rate
/// model; docs/compute.md#the-published-run-suite).
pub fn predict(run: &PublishedRun, base: &Path, c: Constants) -> Result<Prediction, RealityError> {
    let spec = job_spec(run, base, c);
    let (job, result) =
        replay_job(&spec, false, RateModel::Ideal, &mut |_| {}).map_err(|e| RealityError::Run {
            id: run.id.clone(),
            source: Box::new(e),
        })?;
    let s = &result.summary;
    Ok(Prediction {
        id: run.id.clone(),
        group: run.group,
        gpu: run.gpu.clone(),
        gpus: job.workload.world(),
        published_ms: run.published_ms,
        predicted_ms: s.iteration_time_ns as f64 / 1e6,
        compute_ms: s.compute_ns as f64 / 1e6,
    })
}

/// The GPU generation of `run`.
pub fn generation(run: &PublishedRun) -> Generation {
    Gpu::preset(&run.gpu).map_or(Generation::Ampere, |g| g.generation)
}

/// The training engine `run` runs under (from its configuration, as the schedule reads it).
pub fn engine(run: &PublishedRun, base: &Path) -> Result<Engine, RealityError> {
    let cfg = job_spec(run, base, Constants::default())
        .config()
        .map_err(|e| RealityError::Run {
            id: run.id.clone(),
            source: Box::new(e),
        })?;
    Ok(Engine::of(&cfg))
}

/// Median and largest absolute error of `rows`.
pub fn summary(rows: &[&Prediction]) -> Option<(f64, f64)> {
    let mut e: Vec<f64> = rows.iter().map(|p| p.error().abs()).collect();
    if e.is_empty() {
        return None;
    }
    let max = e.iter().copied().fold(0.0, f64::max);
    Some((
        crate::megatron::median(std::mem::take(&mut e)).unwrap_or(0.0),
        max,
    ))
}

/// The table `make reality` prints.
pub fn table(rows: &[Prediction]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<34} {:<8} {:<10} {:>6} {:>12} {:>12} {:>8}",
        "run", "group", "gpu", "gpus", "published ms", "predicted ms", "error"
    );
    for p in rows {
        let _ = writeln!(
            out,
            "{:<34} {:<8} {:<10} {:>6} {:>12.1} {:>12.1} {:>+7.1}%",
            p.id,
            p.group.as_str(),
            p.gpu,
            p.gpus,
            p.published_ms,
            p.predicted_ms,
            100.0 * p.error()
        );
    }
    for g in [RunGroup::Fit, RunGroup::HeldOut] {
        let sel: Vec<&Prediction> = rows.iter().filter(|p| p.group == g).collect();
        if let Some((med, max)) = summary(&sel) {
            let within = sel.iter().filter(|p| p.error().abs() <= 0.10).count();
            let _ = writeln!(
                out,
                "{}: {} rows, median |error| {:.1} %, largest {:.1} %, {} of {} within 10 %",
                g.as_str(),
                sel.len(),
                100.0 * med,
                100.0 * max,
                within,
                sel.len()
            );
        }
    }
    out
}

/// The compute on an iteration's critical path as the schedule alone gives it: the
/// busiest stage's forward and backward of one micro-batch × `(m + (PP − 1)/v)`, plus the
/// longest optimizer step. The fit's proxy for how the iteration moves with the
/// efficiencies (the network's part held at its replayed value).
pub fn critical_compute_ns(wl: &Workload) -> f64 {
    let ns = |steps: &[LayerStep]| -> f64 {
        steps
            .iter()
            .map(|s| match s {
                LayerStep::Compute(t) => t.0 as f64,
                _ => 0.0,
            })
            .sum()
    };
    let expert = |pass| -> f64 {
        wl.moe.as_ref().map_or(0.0, |m| {
            let v = match pass {
                Pass::Fwd => &m.expert_fwd,
                Pass::Bwd => &m.expert_bwd,
            };
            v.iter().map(|t| t.0 as f64).fold(0.0, f64::max)
        })
    };
    let per_mb = wl
        .stages
        .iter()
        .map(|st| {
            let layers: f64 = st
                .chunks
                .iter()
                .flat_map(|c| c.clone())
                .map(|l| {
                    let moe = wl.is_moe_layer(l);
                    ns(wl.layer_steps(l, Pass::Fwd))
                        + ns(wl.layer_steps(l, Pass::Bwd))
                        + if moe {
                            expert(Pass::Fwd) + expert(Pass::Bwd)
                        } else {
                            0.0
                        }
                })
                .sum();
            layers + ns(&st.head_fwd) + ns(&st.head_bwd)
        })
        .fold(0.0, f64::max);
    let optimizer = wl
        .stages
        .iter()
        .map(|s| s.optimizer.0 as f64)
        .fold(0.0, f64::max);
    let m = wl.microbatches as f64;
    let fill = (wl.pp() as f64 - 1.0) / wl.vpp.max(1) as f64;
    per_mb * (m + fill) + optimizer
}

/// What `--fit` refits: one GPU generation's efficiencies on the fit rows of that
/// generation that Megatron's own schedule runs, or the DeepSpeed pipeline engine's cost
/// on the fit rows that engine runs (any generation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FitTarget {
    /// A100.
    Ampere,
    /// H100, H200, H800, H20.
    Hopper,
    /// B200, GB200.
    Blackwell,
    /// Megatron-DeepSpeed's pipeline engine.
    DeepSpeedPipeline,
}

crate::keyword::keyword_enum!(FitTarget, "fit target",
    FitTarget::Ampere => "ampere",
    FitTarget::Hopper => "hopper",
    FitTarget::Blackwell => "blackwell",
    FitTarget::DeepSpeedPipeline => "deepspeed-pipeline");

impl FitTarget {
    /// Whether `run` (of `engine`) is one of this target's fit rows.
    fn selects(self, run: &PublishedRun, engine: Engine) -> bool {
        let gen = |g| engine == Engine::Megatron && generation(run) == g;
        run.group == RunGroup::Fit
            && match self {
                FitTarget::Ampere => gen(Generation::Ampere),
                FitTarget::Hopper => gen(Generation::Hopper),
                FitTarget::Blackwell => gen(Generation::Blackwell),
                FitTarget::DeepSpeedPipeline => engine == Engine::DeepSpeedPipeline,
            }
    }

    /// The constants the fit starts from (those in the code).
    fn start(self) -> Knobs {
        let efficiency = Efficiency::of(match self {
            FitTarget::Hopper => Generation::Hopper,
            FitTarget::Blackwell => Generation::Blackwell,
            FitTarget::Ampere | FitTarget::DeepSpeedPipeline => Generation::Ampere,
        });
        Knobs {
            efficiency,
            engine: EngineCost::of(Engine::DeepSpeedPipeline),
        }
    }

    /// The knobs this target moves, each with its bounds ([`Knobs::field`]'s index).
    fn fields(self) -> &'static [(usize, (f64, f64))] {
        match self {
            FitTarget::DeepSpeedPipeline => &ENGINE_BOUNDS,
            _ => &EFFICIENCY_BOUNDS,
        }
    }

    /// The overrides a trial of `k` makes: the efficiencies only where they are fitted
    /// (an engine fit keeps each row's own generation's).
    fn constants(self, k: Knobs) -> Constants {
        match self {
            FitTarget::DeepSpeedPipeline => Constants {
                efficiency: None,
                engine: Some(k.engine),
            },
            _ => Constants {
                efficiency: Some(k.efficiency),
                engine: None,
            },
        }
    }
}

/// Every constant a fit can move.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Knobs {
    efficiency: Efficiency,
    engine: EngineCost,
}

impl Knobs {
    fn field(&mut self, i: usize) -> &mut f64 {
        match i {
            0 => &mut self.efficiency.gemm,
            1 => &mut self.efficiency.gemm_fp8,
            2 => &mut self.efficiency.half_dim,
            3 => &mut self.efficiency.attention,
            4 => &mut self.efficiency.memory,
            5 => &mut self.engine.kernel_factor,
            _ => &mut self.engine.per_layer_pass_s,
        }
    }
}

/// Refit `target`'s constants on its fit rows: each row is replayed once at the current
/// constants; a coordinate search then moves them (minimising the sum of squared log
/// errors) with each row's iteration estimated as its replayed time plus the change of
/// its critical-path compute ([`critical_compute_ns`]); the rows are replayed again at the
/// result. Returns the fitted constants and the fit rows' final predictions.
pub fn fit(
    runs: &[PublishedRun],
    base: &Path,
    target: FitTarget,
    progress: &mut dyn FnMut(&str),
) -> Result<(Constants, Vec<Prediction>), RealityError> {
    let mut rows: Vec<&PublishedRun> = Vec::new();
    for r in runs {
        if target.selects(r, engine(r, base)?) {
            rows.push(r);
        }
    }
    let start = target.start();
    let critical = |r: &PublishedRun, k: Knobs| -> Result<f64, RealityError> {
        let spec = job_spec(r, base, target.constants(k));
        let job = super::Job::prepare(&spec).map_err(|e| RealityError::Run {
            id: r.id.clone(),
            source: Box::new(e),
        })?;
        Ok(critical_compute_ns(&job.workload))
    };
    let mut anchors = Vec::with_capacity(rows.len());
    for r in &rows {
        let p = predict(r, base, target.constants(start))?;
        progress(&format!("{}: replayed {:.1} ms", r.id, p.predicted_ms));
        anchors.push((
            p.predicted_ms * 1e6,
            critical(r, start)?,
            r.published_ms * 1e6,
        ));
    }
    let loss = |k: Knobs| -> Result<f64, RealityError> {
        let mut l = 0.0;
        for (r, (it0, c0, published)) in rows.iter().zip(&anchors) {
            let it = it0 + critical(r, k)? - c0;
            l += (it.max(1.0) / published).ln().powi(2);
        }
        Ok(l)
    };
    let mut best = start;
    let mut best_l = loss(best)?;
    let mut step = 0.16;
    for round in 0..8 {
        for &(field, (lo, hi)) in target.fields() {
            for dir in [1.0, -1.0] {
                let mut k = best;
                let f = k.field(field);
                *f = (*f * (1.0 + dir * step)).clamp(lo, hi);
                let l = loss(k)?;
                if l < best_l {
                    (best, best_l) = (k, l);
                }
            }
        }
        progress(&format!("round {round}: loss {best_l:.5} at {best:?}"));
        step /= 2.0;
    }
    let mut preds = Vec::with_capacity(rows.len());
    for r in &rows {
        preds.push(predict(r, base, target.constants(best))?);
    }
    Ok((target.constants(best), preds))
}

/// What a generation's fit may choose, per field of [`Efficiency`] ([`Knobs::field`]'s
/// index): the largest fractions of peak that kernels reach on these GPUs in
/// microbenchmarks (cuBLAS BF16 and FP8 GEMMs at about 80–85 % of the dense peak, flash
/// attention's forward at about 70 %, streaming kernels at about 90–95 % of HBM
/// bandwidth). Without them the fit can buy back what the network model misses (overlaps
/// it does not run) with a GEMM faster than any GPU runs one.
const EFFICIENCY_BOUNDS: [(usize, (f64, f64)); 5] = [
    (0, (0.3, 0.85)),
    (1, (0.3, 0.85)),
    (2, (16.0, 1024.0)),
    (3, (0.2, 0.75)),
    (4, (0.5, 0.95)),
];

/// What the engine's fit may choose: a kernel factor in [1, 2] (the engine runs the same
/// kernels, never faster) and a host time per layer pass in [0.1, 50] ms.
const ENGINE_BOUNDS: [(usize, (f64, f64)); 2] = [(5, (1.0, 2.0)), (6, (1e-4, 0.05))];
