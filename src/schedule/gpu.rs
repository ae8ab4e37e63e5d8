//! The GPUs a job can run on: dense peak per precision, HBM and NVLink bandwidth, and the
//! generation whose fitted efficiencies the roofline uses (docs/compute.md#gpus, where
//! every figure's datasheet is cited).

use serde::{Deserialize, Serialize};

/// A GPU generation: the roofline's efficiencies are fitted once per generation
/// ([`super::roofline::Efficiency::of`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Generation {
    /// A100 (third-generation tensor cores, NVLink 3).
    #[default]
    Ampere,
    /// H100, H800, H20, H200 (fourth generation, FP8, NVLink 4).
    Hopper,
    /// B200, GB200 (fifth generation, NVLink 5).
    Blackwell,
}

crate::keyword::keyword_enum!(Generation, "GPU generation", Generation::Ampere => "ampere", Generation::Hopper => "hopper", Generation::Blackwell => "blackwell");

/// A GPU as the compute model prices it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Gpu {
    /// Name as given (lower case): a preset, an alias or a custom name.
    pub name: String,
    /// Dense BF16/FP16 tensor-core peak, TFLOP/s (no sparsity).
    pub peak_tflops: f64,
    /// Dense FP8 tensor-core peak, TFLOP/s; `None` where the GPU has no FP8 tensor cores
    /// (FP8 jobs are then priced at the BF16 peak, as Transformer Engine cannot run them).
    #[serde(default)]
    pub fp8_tflops: Option<f64>,
    /// HBM bandwidth, GB/s (10⁹ bytes per second).
    #[serde(default = "default_hbm")]
    pub hbm_gbps: f64,
    /// NVLink bandwidth per GPU, GB/s, both directions together as datasheets give it.
    #[serde(default = "default_nvlink")]
    pub nvlink_gbps: f64,
    /// Generation (which fitted efficiencies apply).
    #[serde(default)]
    pub generation: Generation,
}

fn default_hbm() -> f64 {
    2039.0
}

fn default_nvlink() -> f64 {
    600.0
}

/// One preset: (names, BF16 TF, FP8 TF, HBM GB/s, NVLink GB/s, generation). The first
/// name is the canonical one; the others are aliases kept for older command lines.
type Row = (
    &'static [&'static str],
    f64,
    Option<f64>,
    f64,
    f64,
    Generation,
);

/// The presets (vendor datasheets, dense figures; docs/compute.md#gpus).
const PRESETS: &[Row] = &[
    (
        &["a100-40gb"],
        312.0,
        None,
        1555.0,
        600.0,
        Generation::Ampere,
    ),
    (
        &["a100-80gb", "a100"],
        312.0,
        None,
        2039.0,
        600.0,
        Generation::Ampere,
    ),
    (
        &["h100-sxm", "h100"],
        989.0,
        Some(1979.0),
        3350.0,
        900.0,
        Generation::Hopper,
    ),
    (
        &["h800"],
        989.0,
        Some(1979.0),
        3350.0,
        400.0,
        Generation::Hopper,
    ),
    (
        &["h20"],
        148.0,
        Some(296.0),
        4000.0,
        900.0,
        Generation::Hopper,
    ),
    (
        &["h200"],
        989.0,
        Some(1979.0),
        4800.0,
        900.0,
        Generation::Hopper,
    ),
    (
        &["b200"],
        2250.0,
        Some(4500.0),
        8000.0,
        1800.0,
        Generation::Blackwell,
    ),
    (
        &["gb200"],
        2500.0,
        Some(5000.0),
        8000.0,
        1800.0,
        Generation::Blackwell,
    ),
];

impl Gpu {
    /// The preset names, canonical first, for help texts and errors.
    pub const NAMES: &'static str =
        "a100-40gb, a100-80gb (alias a100), h100-sxm (alias h100), h800, h20, h200, b200, gb200";

    /// A named preset (case-insensitive), or `NAME:TFLOPS[:HBM_GBPS]` for any other GPU
    /// (priced with Ampere's fitted efficiencies, 2,039 GB/s of HBM unless given).
    /// `None` for an unknown name or a non-positive or non-finite figure.
    ///
    /// ```
    /// use ina3d::schedule::Gpu;
    /// assert_eq!(Gpu::preset("H100").unwrap().hbm_gbps, 3350.0);
    /// assert_eq!(Gpu::preset("a100").unwrap().peak_tflops, 312.0);
    /// assert!(Gpu::preset("mi300x:1307").is_some());
    /// assert!(Gpu::preset("x:nan").is_none());
    /// ```
    pub fn preset(name: &str) -> Option<Gpu> {
        let n = name.trim().to_ascii_lowercase();
        if let Some((nm, rest)) = n.split_once(':') {
            return Self::custom(nm, rest);
        }
        let (_, tf, fp8, hbm, nvl, generation) =
            PRESETS.iter().find(|r| r.0.contains(&n.as_str()))?;
        Some(Gpu {
            name: n,
            peak_tflops: *tf,
            fp8_tflops: *fp8,
            hbm_gbps: *hbm,
            nvlink_gbps: *nvl,
            generation: *generation,
        })
    }

    fn custom(name: &str, figures: &str) -> Option<Gpu> {
        let pos = |s: &str| {
            s.trim()
                .parse::<f64>()
                .ok()
                .filter(|t| t.is_finite() && *t > 0.0 && *t < 1e9)
        };
        let (tf, hbm) = match figures.split_once(':') {
            Some((tf, hbm)) => (pos(tf)?, pos(hbm)?),
            None => (pos(figures)?, default_hbm()),
        };
        Some(Gpu {
            name: name.to_string(),
            peak_tflops: tf,
            fp8_tflops: None,
            hbm_gbps: hbm,
            nvlink_gbps: default_nvlink(),
            generation: Generation::Ampere,
        })
    }

    /// The dense peak (FLOP/s) GEMMs of `fp8` precision run at.
    pub fn gemm_peak(&self, fp8: bool) -> f64 {
        let tf = match (fp8, self.fp8_tflops) {
            (true, Some(f)) => f,
            _ => self.peak_tflops,
        };
        tf * 1e12
    }

    /// HBM bandwidth, bytes per second.
    pub fn hbm_bytes_per_s(&self) -> f64 {
        self.hbm_gbps * 1e9
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_and_alias_resolves_and_old_names_keep_their_peaks() {
        for row in PRESETS {
            for n in row.0 {
                assert!(Gpu::preset(n).is_some(), "{n}");
            }
        }
        assert_eq!(Gpu::preset("h800").unwrap().nvlink_gbps, 400.0);
        assert_eq!(Gpu::preset("h20").unwrap().peak_tflops, 148.0);
        assert_eq!(Gpu::preset("x:100:500").unwrap().hbm_gbps, 500.0);
        assert!(Gpu::preset("x:100:-1").is_none());
        assert!(Gpu::preset("v100").is_none());
    }

    #[test]
    fn fp8_runs_at_the_fp8_peak_only_where_the_gpu_has_one() {
        let a = Gpu::preset("a100").unwrap();
        assert_eq!(a.gemm_peak(true), a.gemm_peak(false));
        let h = Gpu::preset("h100").unwrap();
        assert_eq!(h.gemm_peak(true), 1979e12);
    }
}
