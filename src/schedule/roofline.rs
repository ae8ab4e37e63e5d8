//! The compute time of each part of a layer (docs/compute.md): every GEMM priced by a
//! roofline whose efficiency depends on its shape, attention by its kernel (flash, or
//! Megatron's unfused softmax over the score matrix), element-wise work (norms, rotary
//! embedding, activation, bias-dropout-add, FP8 casts) by the bytes it moves through HBM,
//! and the optimizer step by the bytes Adam reads and writes. The flat model
//! ([`ComputeModel::Mfu`]) keeps the old rule: every matmul FLOP at `peak · MFU`, nothing
//! else.
//!
//! The efficiencies ([`Efficiency::of`]) are fitted once per GPU generation on the fit set
//! of the published-run suite (`traces/reality/runs.toml`, `make reality`); the held-out
//! rows check them.

use super::gpu::{Generation, Gpu};
use crate::megatron::{PositionEmbedding, Recompute, TrainingConfig};
use serde::{Deserialize, Serialize};

/// How compute time is derived.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ComputeModel {
    /// Per-GEMM roofline with shape-dependent efficiency, memory-bound element-wise work,
    /// attention by kernel, the optimizer step (the default).
    #[default]
    Roofline,
    /// Every matmul FLOP at `peak · MFU` (`--mfu`); no element-wise work, no optimizer.
    Mfu,
}

crate::keyword::keyword_enum!(ComputeModel, "compute model", ComputeModel::Roofline => "roofline", ComputeModel::Mfu => "mfu");

/// The fitted efficiencies of one GPU generation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Efficiency {
    /// Fraction of the dense BF16 peak a large GEMM reaches.
    pub gemm: f64,
    /// Fraction of the dense FP8 peak a large FP8 GEMM reaches.
    pub gemm_fp8: f64,
    /// The GEMM dimension at which efficiency halves: each of M, N, K contributes a factor
    /// `d / (d + half_dim)` (small GEMMs fill fewer SMs and waves).
    pub half_dim: f64,
    /// Fraction of the BF16 peak a flash-attention kernel reaches on the FLOPs it runs.
    pub attention: f64,
    /// Fraction of the HBM bandwidth memory-bound kernels reach.
    pub memory: f64,
}

impl Efficiency {
    /// The efficiencies fitted for `g` (docs/compute.md#fit: the fit set, the command that
    /// refits them and the residuals).
    pub fn of(g: Generation) -> Efficiency {
        match g {
            // `ina3d validate --reality --fit ampere`: the 10 A100 rows of Megatron-LM's
            // 2021 table in the layouts of the paper's own launch script (micro-batches,
            // interleaving, DDP), routed as the suite routes them (fit median |error|
            // 2.3 %); `gemm_fp8` and `attention` are not identified there (no FP8, no
            // flash kernel) and keep their starting values
            Generation::Ampere => Efficiency {
                gemm: 0.739597338570571,
                gemm_fp8: 0.8,
                half_dim: 128.18497231227934,
                attention: 0.45,
                memory: 0.829310967774056,
            },
            // `--fit hopper`: the 17 H100 rows (Megatron-LM's 2024 table, NeMo 24.07 and
            // 25.02, Megatron-Bridge 25.11; fit median |error| 6.3 %); `gemm` at its bound
            Generation::Hopper => Efficiency {
                gemm: 0.85,
                gemm_fp8: 0.8427520721381041,
                half_dim: 101.8859738166172,
                attention: 0.40280805867275854,
                memory: 0.7450098146997101,
            },
            // `--fit blackwell`: the 5 B200 rows (NeMo 25.02, Megatron-Bridge 25.11; fit
            // median |error| 3.7 %)
            Generation::Blackwell => Efficiency {
                gemm: 0.7,
                gemm_fp8: 0.756871680619107,
                half_dim: 116.32290953711127,
                attention: 0.44865738628046004,
                memory: 0.931529361601386,
            },
        }
    }
}

/// Forward and backward seconds of one part, one micro-batch, one GPU (uncalibrated).
pub(crate) type Pair = (f64, f64);

/// What one micro-batch of each layer part costs on one GPU (uncalibrated seconds).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct PartCosts {
    /// QKV projection (+ the input norm and rotary embedding).
    pub qkv: Pair,
    /// Attention core (scores, softmax, values); its backward includes selective
    /// recomputation's second forward.
    pub core: Pair,
    /// Output projection (+ its bias-dropout-add).
    pub proj: Pair,
    /// Dense MLP (+ the pre-MLP norm, activation, bias-dropout-add).
    pub mlp: Pair,
    /// LM head: final norm, logits GEMM and the vocabulary-parallel cross-entropy.
    pub head: Pair,
    /// MoE router.
    pub router: Pair,
    /// Shared experts.
    pub shared: Pair,
    /// One routed token through one expert (fc1 + fc2 and its activation).
    pub per_expert_token: Pair,
}

impl PartCosts {
    /// The attention block as one part.
    pub fn attn(&self) -> Pair {
        (
            self.qkv.0 + self.core.0 + self.proj.0,
            self.qkv.1 + self.core.1 + self.proj.1,
        )
    }
}

/// The shapes the cost model reads from a job.
struct Dims {
    /// Tokens of one micro-batch on one GPU's attention (`b·s/CP`).
    t: f64,
    /// Tokens of the replicated (non-sequence-parallel) region per GPU: `t/TP` with SP.
    tr: f64,
    tp: f64,
    h: f64,
    kv: f64,
    ffn: f64,
    heads: f64,
    s: f64,
    b: f64,
    cp: f64,
    gated: bool,
    /// Bytes per activation element in the GEMMs' inputs.
    el: f64,
    fp8: bool,
}

/// The cost model for one job on one GPU.
pub(crate) struct Roofline<'a> {
    gpu: &'a Gpu,
    eff: Efficiency,
    d: Dims,
    flash: bool,
    rope: bool,
    selective: bool,
}

/// Whether Megatron runs this job's attention with a fused (flash) kernel: the
/// `--use-flash-attn` flag, `--attention-backend` other than `unfused`/`local`, or
/// Transformer Engine layers; Megatron's own unfused softmax when the arguments say
/// `--transformer-impl local` without flash, or when a log's arguments block predates
/// both flags (Megatron before 2023).
pub fn flash_attention(cfg: &TrainingConfig) -> bool {
    let get = |k: &str| cfg.extra.get(k).map(|v| v.trim().to_ascii_lowercase());
    if let Some(v) = get("use_flash_attn") {
        if matches!(v.as_str(), "true" | "1") {
            return true;
        }
    }
    if let Some(b) = get("attention_backend") {
        let b = b.trim_start_matches("attnbackend.");
        return !matches!(b, "unfused" | "local");
    }
    match get("transformer_impl").as_deref() {
        Some("local") => false,
        Some(_) => true,
        None => !cfg.from_legacy_arguments_block(),
    }
}

/// Whether the job's GEMMs run in FP8 (`--fp8-format` set to a format).
pub fn fp8_gemms(cfg: &TrainingConfig) -> bool {
    cfg.extra.get("fp8_format").is_some_and(|v| {
        let v = v.trim().to_ascii_lowercase();
        !v.is_empty() && v != "none" && v != "false"
    })
}

impl<'a> Roofline<'a> {
    /// The model of `cfg` on `gpu`.
    pub fn new(cfg: &TrainingConfig, gpu: &'a Gpu, eff: Option<Efficiency>) -> Roofline<'a> {
        let tp = cfg.tensor_model_parallel_size.max(1) as f64;
        let cp = cfg.context_parallel_size.max(1) as f64;
        let s = cfg.seq_length as f64;
        let b = cfg.micro_batch_size as f64;
        let t = b * s / cp;
        let sp = cfg.sequence_parallel && tp > 1.0;
        let fp8 = fp8_gemms(cfg) && gpu.fp8_tflops.is_some();
        Roofline {
            gpu,
            eff: eff.unwrap_or_else(|| Efficiency::of(gpu.generation)),
            d: Dims {
                t,
                tr: if sp { t / tp } else { t },
                tp,
                h: cfg.hidden_size as f64,
                kv: super::shape::kv_width(cfg) as f64,
                ffn: cfg.ffn_hidden_size as f64,
                heads: cfg.num_attention_heads.max(1) as f64,
                s,
                b,
                cp,
                gated: cfg.gated_linear_unit(),
                el: cfg.params_dtype.size_bytes() as f64,
                fp8,
            },
            flash: flash_attention(cfg),
            rope: cfg.position_embedding_type == PositionEmbedding::Rope,
            selective: cfg.recompute_granularity == Recompute::Selective,
        }
    }

    fn shape_factor(&self, x: f64) -> f64 {
        x / (x + self.eff.half_dim)
    }

    /// Seconds of one `M×K · K×N` GEMM (forward; backward is the two GEMMs of the same
    /// size, dgrad and wgrad): the slower of its FLOPs at the shape's efficiency and its
    /// operands through HBM, plus FP8's cast of the activation input.
    fn gemm(&self, m: f64, n: f64, k: f64) -> f64 {
        let d = &self.d;
        let (peak, top, in_el) = if d.fp8 {
            (self.gpu.gemm_peak(true), self.eff.gemm_fp8, 1.0)
        } else {
            (self.gpu.gemm_peak(false), self.eff.gemm, d.el)
        };
        let eff = top * self.shape_factor(m) * self.shape_factor(n) * self.shape_factor(k);
        let flops = 2.0 * m * n * k / (peak * eff);
        let bytes = in_el * (m * k + k * n) + d.el * m * n;
        let cast = if d.fp8 { (d.el + 1.0) * m * k } else { 0.0 };
        flops.max(self.mem(bytes)) + self.mem(cast)
    }

    /// Seconds to move `bytes` through HBM.
    fn mem(&self, bytes: f64) -> f64 {
        bytes / (self.gpu.hbm_bytes_per_s() * self.eff.memory)
    }

    /// A norm over `tokens × h` (read and write).
    fn norm(&self, tokens: f64) -> f64 {
        self.mem(2.0 * tokens * self.d.h * self.d.el)
    }

    /// Bias, dropout and residual add over `tokens × h`: two reads, a write, a mask byte.
    fn bias_dropout_add(&self, tokens: f64) -> f64 {
        self.mem(tokens * self.d.h * (3.0 * self.d.el + 1.0))
    }

    fn qkv(&self) -> Pair {
        let d = &self.d;
        let g = self.gemm(d.t, (d.h + 2.0 * d.kv) / d.tp, d.h);
        let rope = if self.rope {
            self.mem(2.0 * d.t * (d.h + d.kv) / d.tp * d.el)
        } else {
            0.0
        };
        let f = g + self.norm(d.tr) + rope;
        (f, 2.0 * f)
    }

    /// Attention core: a flash kernel runs the causal half of the score FLOPs (backward
    /// 2.5× the forward: it recomputes the scores); the unfused path runs two batched
    /// GEMMs per head over the whole score matrix and the softmax and dropout through HBM.
    fn core(&self) -> Pair {
        let d = &self.d;
        let heads = d.heads / d.tp;
        let dh = d.h / d.heads;
        let sl = d.s / d.cp;
        let (f, b) = if self.flash {
            let flops = 4.0 * d.b * heads * sl * d.s * dh * 0.5;
            let f =
                flops / (self.gpu.gemm_peak(false) * self.eff.attention * self.shape_factor(dh));
            (f, 2.5 * f)
        } else {
            let per_head = self.gemm(sl, d.s, dh) + self.gemm(sl, dh, d.s);
            let scores = d.b * heads * sl * d.s;
            let f = d.b * heads * per_head + self.mem(scores * (4.0 * d.el + 1.0));
            (f, 2.0 * f)
        };
        if self.selective {
            (f, b + f)
        } else {
            (f, b)
        }
    }

    fn proj(&self) -> Pair {
        let d = &self.d;
        let f = self.gemm(d.t, d.h, d.h / d.tp) + self.bias_dropout_add(d.tr);
        (f, 2.0 * f)
    }

    /// An MLP of hidden size `ffn` (split over `split` ranks) on `tokens`: fc1 (twice as
    /// wide when gated), the activation, fc2.
    fn mlp_of(&self, tokens: f64, ffn: f64, split: f64) -> f64 {
        let d = &self.d;
        let mats = if d.gated { 2.0 } else { 1.0 };
        let fc1 = self.gemm(tokens, mats * ffn / split, d.h);
        let fc2 = self.gemm(tokens, d.h, ffn / split);
        let act = self.mem(tokens * (mats + 1.0) * ffn / split * d.el);
        fc1 + fc2 + act
    }

    fn mlp(&self) -> Pair {
        let d = &self.d;
        let f = self.norm(d.tr) + self.mlp_of(d.t, d.ffn, d.tp) + self.bias_dropout_add(d.tr);
        (f, 2.0 * f)
    }

    /// The final norm, the logits GEMM over the vocabulary shard, and the cross-entropy's
    /// passes over the fp32 logits (cast, max, exp-sum; backward the softmax gradient).
    fn head(&self, vocab: f64) -> Pair {
        let d = &self.d;
        let v = vocab / d.tp;
        let logits = self.gemm(d.t, v, d.h);
        let ce = self.mem(d.t * v * (d.el + 3.0 * 4.0));
        let f = self.norm(d.tr) + logits + ce;
        (
            f,
            2.0 * logits + self.mem(d.t * v * (4.0 + d.el)) + self.norm(d.tr),
        )
    }

    /// The costs of every part of `cfg`'s layers.
    pub fn parts(&self, cfg: &TrainingConfig) -> PartCosts {
        let d = &self.d;
        let two = |f: f64| (f, 2.0 * f);
        let experts = cfg.num_experts.unwrap_or(0) as f64;
        let router = if experts > 0.0 {
            let tokens = super::shape::moe_tokens(cfg);
            two(self.gemm(tokens, experts, d.h))
        } else {
            (0.0, 0.0)
        };
        let shared = cfg
            .moe_shared_expert_intermediate_size
            .map_or((0.0, 0.0), |f| two(self.mlp_of(d.t, f as f64, d.tp)));
        let per_expert_token = if experts > 0.0 {
            let ffn_e = cfg.moe_ffn_hidden_size.unwrap_or(cfg.ffn_hidden_size) as f64;
            // the grouped GEMM at the mean tokens per local expert
            let ep = cfg.expert_model_parallel_size.max(1) as f64;
            let tokens = (super::shape::moe_tokens(cfg) * cfg.moe_router_topk as f64 * ep
                / experts)
                .max(1.0);
            two(self.mlp_of(tokens, ffn_e, 1.0) / tokens)
        } else {
            (0.0, 0.0)
        };
        PartCosts {
            qkv: self.qkv(),
            core: self.core(),
            proj: self.proj(),
            mlp: self.mlp(),
            head: self.head(cfg.padded_vocab() as f64),
            router,
            shared,
            per_expert_token,
        }
    }

    /// The optimizer step of a GPU holding `params` parameters: mixed-precision Adam
    /// reads the fp32 main parameter, gradient and both moments and writes the three back
    /// with the model's copy (30 bytes), and the gradient norm reads the gradient again,
    /// over the shard it owns (`params / shard`: the distributed optimizer's DP×CP);
    /// the gradient buffer is zeroed whole (4 bytes a parameter).
    pub fn optimizer(&self, params: u64, shard: u32) -> f64 {
        let p = params as f64;
        let owned = p / shard.max(1) as f64;
        self.mem(owned * (30.0 + 4.0) + p * 4.0)
    }
}

/// The flat model's costs: FLOPs at `peak · mfu`, backward twice the forward.
pub(crate) fn flat(
    fl: &super::shape::Flops,
    raw: &super::shape::RawShape,
    tp: f64,
    peak: f64,
) -> PartCosts {
    let two = |flops: f64| (flops / peak, 2.0 * flops / peak);
    PartCosts {
        qkv: two(fl.qkv),
        core: two(fl.core),
        proj: two(fl.proj),
        mlp: two(raw.mlp_fwd / tp),
        head: two(raw.head_fwd / tp),
        router: two(fl.router),
        shared: two(fl.shared),
        per_expert_token: two(fl.per_expert_token),
    }
}
