//! The compute calibration factor (docs/model.md#compute-and-calibration): given, from the
//! log's `forward-compute` + `backward-compute` timers, from the median iteration time, or 1.

use super::workload::{
    Calibration, CalibrationSource, ScheduleError, ScheduleOptions, MAX_CALIBRATION_FACTOR,
};
use crate::megatron::TrainingConfig;

/// Calibrate against `busiest_ms`, the uncalibrated compute of the busiest stage for one
/// micro-batch (forward + backward, ms), with `m` micro-batches and `v` chunks per stage.
/// A factor measured outside (0, [`MAX_CALIBRATION_FACTOR`]] is an error naming what it
/// was measured from (a given factor is checked with the options).
pub(crate) fn calibrate(
    cfg: &TrainingConfig,
    opts: &ScheduleOptions,
    busiest_ms: f64,
    m: u32,
    v: u32,
) -> Result<Calibration, ScheduleError> {
    let pp = cfg.pipeline_model_parallel_size;
    let none = (1.0, CalibrationSource::None, None, None);
    let (factor, source, measured_ms, modelled_ms) = if let Some(f) = opts.factor {
        (f, CalibrationSource::Given, None, None)
    } else if !opts.calibrate {
        none
    } else if let (Some(fc), Some(bc)) = (
        cfg.timers.get("forward-compute"),
        cfg.timers.get("backward-compute"),
    ) {
        let meas = fc.max + bc.max;
        let model = busiest_ms * m as f64;
        if meas > 0.0 && model > 0.0 {
            (
                meas / model,
                CalibrationSource::Timers,
                Some(meas),
                Some(model),
            )
        } else {
            none
        }
    } else if let Some(it) = cfg.median_iteration_ms() {
        let model = busiest_ms * (m as f64 + (pp as f64 - 1.0) / v as f64);
        if it > 0.0 && model > 0.0 {
            (
                it / model,
                CalibrationSource::IterationTime,
                Some(it),
                Some(model),
            )
        } else {
            none
        }
    } else {
        none
    };
    if !(factor > 0.0 && factor <= MAX_CALIBRATION_FACTOR) {
        let from = match source {
            CalibrationSource::Timers => "the log's forward-compute + backward-compute timers",
            CalibrationSource::IterationTime => "the log's median iteration time",
            _ => "the options",
        };
        return Err(ScheduleError::Option(format!(
            "calibration factor {factor:?} (measured {:?} ms / modelled {:?} ms, from {from}) is \
             outside (0, {MAX_CALIBRATION_FACTOR}]: check those figures, or give \
             --calibration-factor or --no-calibrate",
            measured_ms.unwrap_or(f64::NAN),
            modelled_ms.unwrap_or(f64::NAN),
        )));
    }
    Ok(Calibration {
        gpu: opts.gpu.clone(),
        compute: opts.compute,
        mfu: opts.mfu,
        factor,
        source,
        measured_ms,
        modelled_ms,
    })
}
