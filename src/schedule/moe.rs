//! Token routing of MoE layers: how many tokens each expert-parallel rank receives, from
//! which the all-to-all sizes and the experts' compute follow
//! (docs/model.md#expert-parallelism).
//!
//! Every rank routes `T` tokens of one micro-batch (`b·s/CP/TP`) to `k` of `E` experts.
//! Expert `e` receives a share `p_e` of the `T·k` token copies: `1/E` under uniform
//! routing, `(e+1)^(−z) / Σ_i (i+1)^(−z)` under the Zipf skew option (expert 0 the
//! hottest). With a capacity factor `c`, Megatron caps what one rank sends to one expert
//! at `ceil(T·k/E · c)` tokens and drops the rest. Experts `j·E/EP … (j+1)·E/EP − 1` live
//! on expert-parallel rank `j`. Every rank routes the same way, so rank `i` sends rank `j`
//! the same amount for every `i`.

use serde::{Deserialize, Serialize};

/// How tokens are spread over the experts (a modelling choice, not a Megatron argument).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MoeRouting {
    /// Every expert gets the same share (what a well-trained load-balancing loss aims at).
    #[default]
    Uniform,
    /// Zipf-skewed shares `∝ (e+1)^(−s)` over the experts in order: expert 0 the hottest,
    /// so EP rank 0 is the straggler. `s = 0` is uniform.
    Zipf(f64),
}

impl std::fmt::Display for MoeRouting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MoeRouting::Uniform => f.write_str("uniform"),
            MoeRouting::Zipf(s) => write!(f, "zipf:{s}"),
        }
    }
}

impl std::str::FromStr for MoeRouting {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim().to_ascii_lowercase();
        if t == "uniform" {
            return Ok(MoeRouting::Uniform);
        }
        let z = t
            .strip_prefix("zipf:")
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|z| z.is_finite() && *z >= 0.0)
            .ok_or_else(|| {
                format!(
                    "MoE routing `{s}`: expected `uniform` or `zipf:S` with S ≥ 0 (e.g. zipf:1.0)"
                )
            })?;
        Ok(MoeRouting::Zipf(z))
    }
}

/// Tokens of one micro-batch flowing through a MoE layer, per expert-parallel rank.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Routing {
    /// Tokens one rank sends to EP rank `j` (the same from every rank), after capacity.
    pub to_rank: Vec<f64>,
    /// Token copies dropped by the capacity limit, as a fraction of `T·k`.
    pub dropped: f64,
}

/// Expert shares under `routing` for `experts` experts.
fn shares(routing: MoeRouting, experts: u32) -> Vec<f64> {
    let n = experts as usize;
    match routing {
        MoeRouting::Uniform => vec![1.0 / n as f64; n],
        MoeRouting::Zipf(z) => {
            let w: Vec<f64> = (0..n).map(|e| ((e + 1) as f64).powf(-z)).collect();
            let total: f64 = w.iter().sum();
            w.into_iter().map(|x| x / total).collect()
        }
    }
}

/// Route `tokens` tokens of one rank with top-`topk` over `experts` experts on `ep` ranks.
pub(crate) fn route(
    tokens: f64,
    topk: u32,
    experts: u32,
    ep: u32,
    capacity_factor: Option<f64>,
    routing: MoeRouting,
) -> Routing {
    let copies = tokens * topk as f64;
    let cap = capacity_factor.map(|c| (copies / experts as f64 * c).ceil());
    let per_rank = (experts / ep.max(1)) as usize;
    let mut to_rank = vec![0.0; ep.max(1) as usize];
    let mut kept = 0.0;
    for (e, p) in shares(routing, experts).into_iter().enumerate() {
        let want = copies * p;
        let got = cap.map_or(want, |c| want.min(c));
        to_rank[e / per_rank.max(1)] += got;
        kept += got;
    }
    Routing {
        to_rank,
        dropped: if copies > 0.0 {
            1.0 - kept / copies
        } else {
            0.0
        },
    }
}
