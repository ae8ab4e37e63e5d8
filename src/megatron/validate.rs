//! Consistency checks, as Megatron's `validate_args` and parallel-state set-up make them.
//! Each error names the field, where its value came from, the numbers that disagree and
//! what would make the job valid.

use super::config::{MoeDispatcher, MoeLayerFreq, TrainingConfig};
use super::error::{source_place, MegatronError};

type Check = Result<(), MegatronError>;

/// The largest value each size may take: about 64 times the largest models trained in
/// 2025 (Llama-3.1 405B: hidden 16,384, FFN 53,248, 126 layers; 1 M-token contexts;
/// 256 K vocabularies; 100 K-GPU jobs), far beyond any real job yet low enough that a
/// typo (`ffn_hidden_size=4e9`) is caught before it becomes a job of absurd compute.
pub const PLAUSIBLE_SIZES: [(&str, u64); 14] = [
    ("world_size", 1 << 24),
    ("num_layers", 1 << 16),
    ("hidden_size", 1 << 20),
    ("ffn_hidden_size", 1 << 22),
    ("num_attention_heads", 1 << 16),
    ("seq_length", 1 << 26),
    ("max_position_embeddings", 1 << 26),
    ("num_experts", 1 << 16),
    ("moe_ffn_hidden_size", 1 << 22),
    ("moe_shared_expert_intermediate_size", 1 << 22),
    ("micro_batch_size", 1 << 20),
    ("global_batch_size", 1 << 30),
    ("vocab_size", 1 << 24),
    // the vocabulary is padded to a multiple of it: past the largest vocabulary it pads
    // every one to a size no tokenizer has
    ("make_vocab_size_divisible_by", 1 << 24),
];

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a.max(1)
    } else {
        gcd(b, a % b)
    }
}

impl TrainingConfig {
    fn bad(&self, field: &str, msg: String) -> Check {
        Err(MegatronError::Inconsistent {
            at: self
                .sources
                .get(field)
                .map(source_place)
                .unwrap_or_else(|| "inputs".into()),
            field: field.into(),
            expected: msg,
        })
    }

    /// Checks the sizes agree as Megatron requires: W = TP·CP·PP·DP, the global batch is a
    /// multiple of micro-batch·DP, layers divide evenly over PP stages (and over PP·v
    /// chunks when interleaved), heads and query groups divide by TP, the sequence splits
    /// into 2·CP chunks, experts split over EP and the expert layout fits the world, the
    /// dispatcher supports the expert TP, one precision, and no ZeRO-3. First, every size
    /// is within [`PLAUSIBLE_SIZES`] (a typo such as `ffn_hidden_size=4e9` would otherwise
    /// give a job no one trains, and a calibration factor of 10^-5). The error names the
    /// numbers that disagree and where the first one came from.
    pub fn validate(&self) -> Check {
        self.check_sizes()?;
        self.check_world()?;
        self.check_batch()?;
        self.check_layers()?;
        self.check_heads()?;
        self.check_context_parallel()?;
        self.check_experts()?;
        self.check_expert_layout()?;
        self.check_precision()?;
        self.check_zero()
    }

    fn check_sizes(&self) -> Check {
        let opt = |v: Option<u64>| v.unwrap_or(0);
        let values = [
            u64::from(self.world_size),
            u64::from(self.num_layers),
            self.hidden_size,
            self.ffn_hidden_size,
            u64::from(self.num_attention_heads),
            self.seq_length,
            self.max_position_embeddings,
            opt(self.num_experts.map(u64::from)),
            opt(self.moe_ffn_hidden_size),
            opt(self.moe_shared_expert_intermediate_size),
            self.micro_batch_size,
            self.global_batch_size,
            opt(self.vocab_size),
            self.make_vocab_size_divisible_by,
        ];
        for ((field, max), v) in PLAUSIBLE_SIZES.iter().zip(values) {
            if v > *max {
                return self.bad(
                    field,
                    format!(
                        "{field} {v} is larger than any model trained (at most {max} accepted): a typo?"
                    ),
                );
            }
        }
        Ok(())
    }

    fn check_world(&self) -> Check {
        let (tp, cp, pp, dp) = (
            self.tensor_model_parallel_size,
            self.context_parallel_size,
            self.pipeline_model_parallel_size,
            self.data_parallel_size,
        );
        let w = self
            .model_parallel_product()
            .and_then(|mp| mp.checked_mul(u64::from(dp)));
        if w != Some(u64::from(self.world_size)) {
            let prod = w.map_or("more than 2^64".to_string(), |w| w.to_string());
            return self.bad(
                "world_size",
                format!(
                    "world_size {} ≠ TP·CP·PP·DP = {tp}·{cp}·{pp}·{dp} = {prod}: make them agree, e.g. with an override of data_parallel_size (`--dp`) or world_size (`--set world_size=…`)",
                    self.world_size
                ),
            );
        }
        Ok(())
    }

    fn check_batch(&self) -> Check {
        let dp = u64::from(self.data_parallel_size);
        let mb = self.micro_batch_size.checked_mul(dp);
        let ok = mb.is_some_and(|mb| {
            mb > 0 && self.global_batch_size > 0 && self.global_batch_size.is_multiple_of(mb)
        });
        if !ok {
            let mbs = mb.map_or("more than 2^64".to_string(), |m| m.to_string());
            return self.bad(
                "global_batch_size",
                format!(
                    "global_batch_size {} is not a positive multiple of micro_batch_size·data_parallel_size = {}·{dp} = {mbs}",
                    self.global_batch_size, self.micro_batch_size
                ),
            );
        }
        Ok(())
    }

    fn check_layers(&self) -> Check {
        let l = u64::from(self.num_layers);
        let pp = u64::from(self.pipeline_model_parallel_size);
        // The stage split (even, Megatron's uneven first/last stages, DeepSpeed's
        // partition) says itself what does not fit.
        let stages = self.stage_layers()?;
        if stages.iter().any(|n| *n as u64 != l / pp.max(1)) {
            return Ok(());
        }
        if let Some(v) = self.virtual_pipeline_model_parallel_size {
            let v = u64::from(v);
            if !l.is_multiple_of(pp * v) {
                return self.bad(
                    "num_layers",
                    format!(
                        "num_layers {l} is not divisible by pipeline_model_parallel_size·virtual_pipeline_model_parallel_size = {pp}·{v} = {}",
                        pp * v
                    ),
                );
            }
        }
        Ok(())
    }

    fn check_heads(&self) -> Check {
        let tp = u64::from(self.tensor_model_parallel_size);
        let heads = u64::from(self.num_attention_heads);
        if !heads.is_multiple_of(tp) {
            return self.bad(
                "num_attention_heads",
                format!("num_attention_heads {heads} is not divisible by tensor_model_parallel_size {tp}"),
            );
        }
        if let Some(g) = self.num_query_groups {
            let g = u64::from(g);
            if !g.is_multiple_of(tp) {
                return self.bad(
                    "num_query_groups",
                    format!(
                        "num_query_groups {g} is not divisible by tensor_model_parallel_size {tp}"
                    ),
                );
            }
            if !heads.is_multiple_of(g) {
                return self.bad(
                    "num_query_groups",
                    format!("num_attention_heads {heads} is not divisible by num_query_groups {g}"),
                );
            }
        }
        Ok(())
    }

    /// Megatron splits the sequence into 2·CP chunks (each CP rank takes one from each
    /// end, for load balance under causal masking).
    fn check_context_parallel(&self) -> Check {
        let cp = u64::from(self.context_parallel_size);
        let s = self.seq_length;
        if cp > 1 && !s.is_multiple_of(2 * cp) {
            return self.bad(
                "seq_length",
                format!(
                    "seq_length {s} is not divisible by 2·context_parallel_size = {}: Megatron splits the sequence into 2·CP chunks; use a multiple of {} (e.g. {}) or another CP",
                    2 * cp,
                    2 * cp,
                    s.div_ceil(2 * cp).saturating_mul(2 * cp)
                ),
            );
        }
        Ok(())
    }

    fn check_experts(&self) -> Check {
        let ep = self.expert_model_parallel_size;
        let Some(n) = self.num_experts else {
            if ep > 1 {
                return self.bad(
                    "expert_model_parallel_size",
                    format!("expert_model_parallel_size {ep} needs a MoE model: set num_experts (a multiple of {ep}) or use EP 1"),
                );
            }
            return Ok(());
        };
        if !n.is_multiple_of(ep) {
            let divisors: Vec<String> = (1..=n.min(1024))
                .filter(|d| n.is_multiple_of(*d))
                .map(|d| d.to_string())
                .collect();
            return self.bad(
                "expert_model_parallel_size",
                format!(
                    "num_experts {n} is not divisible by expert_model_parallel_size {ep}: use an EP that divides {n} ({})",
                    divisors.join(", ")
                ),
            );
        }
        if self.moe_router_topk > n {
            return self.bad(
                "moe_router_topk",
                format!(
                    "moe_router_topk {} is more than num_experts {n}",
                    self.moe_router_topk
                ),
            );
        }
        if let MoeLayerFreq::Pattern(p) = &self.moe_layer_freq {
            if p.len() != self.num_layers as usize {
                return self.bad(
                    "moe_layer_freq",
                    format!(
                        "the layer pattern has {} entries but num_layers is {}: give one 0/1 per layer",
                        p.len(),
                        self.num_layers
                    ),
                );
            }
        }
        Ok(())
    }

    /// Megatron-core builds the expert layers' groups with a second rank generator of
    /// the same world and PP: expert TP · EP · PP must divide the world; without PP-last
    /// rank order the expert DP must equal the dense DP; `alltoall_seq` needs expert TP =
    /// TP; biases in experts need expert TP = 1.
    fn check_expert_layout(&self) -> Check {
        if self.num_experts.is_none() {
            return Ok(());
        }
        let (etp, ep, pp) = (
            u64::from(self.expert_tensor_parallel_size),
            u64::from(self.expert_model_parallel_size),
            u64::from(self.pipeline_model_parallel_size),
        );
        if etp
            .checked_mul(ep)
            .and_then(|x| x.checked_mul(pp))
            .is_none()
        {
            return Err(self.overflow("expert_model_parallel_size", "expert TP·EP·PP"));
        }
        let w = u64::from(self.world_size);
        let emp = etp * ep * pp;
        if !w.is_multiple_of(emp) {
            // The smallest DP ≥ today's whose world the expert layout divides.
            let mp = self.model_parallel_product().unwrap_or(1).max(1);
            let step = emp / gcd(mp, emp);
            let dp = u64::from(self.data_parallel_size)
                .div_ceil(step)
                .max(1)
                .saturating_mul(step);
            return self.bad(
                "expert_model_parallel_size",
                format!(
                    "world_size {w} is not divisible by expert_tensor_parallel_size·expert_model_parallel_size·pipeline_model_parallel_size = {etp}·{ep}·{pp} = {emp}: the expert layers need a multiple of {emp} GPUs; \
                     make it valid with an override, e.g. `--dp {dp}` (world_size {}), or a smaller EP / expert TP",
                    dp.saturating_mul(mp)
                ),
            );
        }
        let edp = w / emp;
        if self.use_tp_pp_dp_mapping && pp > 1 && edp != u64::from(self.data_parallel_size) {
            return self.bad(
                "expert_model_parallel_size",
                format!(
                    "with use_tp_pp_dp_mapping and PP > 1 Megatron needs the expert data-parallel size ({w}/({etp}·{ep}·{pp}) = {edp}) to equal the data-parallel size {}",
                    self.data_parallel_size
                ),
            );
        }
        let tp = u64::from(self.tensor_model_parallel_size);
        if self.moe_token_dispatcher_type == MoeDispatcher::AllToAllSeq && etp != tp {
            return self.bad(
                "expert_tensor_parallel_size",
                format!(
                    "expert_tensor_parallel_size {etp} ≠ tensor_model_parallel_size {tp} is not supported by the alltoall_seq dispatcher: use --moe-token-dispatcher-type alltoall (or allgather), or expert TP {tp}"
                ),
            );
        }
        if self.add_bias_linear && etp > 1 {
            return self.bad(
                "expert_tensor_parallel_size",
                format!(
                    "Megatron supports biases in expert layers only with expert_tensor_parallel_size 1, found {etp}: add --disable-bias-linear or use --expert-tensor-parallel-size 1"
                ),
            );
        }
        Ok(())
    }

    fn check_precision(&self) -> Check {
        if self.fp16 && self.bf16 {
            return self.bad(
                "fp16",
                "fp16 and bf16 are both set by the same input: Megatron takes one (remove one of them)".into(),
            );
        }
        Ok(())
    }

    fn check_zero(&self) -> Check {
        match self.zero_stage {
            Some(s) if s >= 3 => self.bad(
                "zero_stage",
                format!(
                    "DeepSpeed ZeRO stage {s} is not modelled (stage 3 gathers every layer's parameters in forward and backward, traffic the schedule does not generate): stages 0–2 are supported, stage 1/2 as the distributed optimizer"
                ),
            ),
            _ => Ok(()),
        }
    }

    /// Micro-batches per iteration per pipeline: global / (micro · DP); 0 when undefined.
    pub fn num_microbatches(&self) -> u64 {
        self.micro_batch_size
            .checked_mul(u64::from(self.data_parallel_size))
            .and_then(|d| self.global_batch_size.checked_div(d))
            .unwrap_or(0)
    }

    /// Expert data-parallel size: world / (expert TP · EP · PP); 0 when it does not divide.
    pub fn expert_data_parallel_size(&self) -> u32 {
        let emp = u64::from(self.expert_tensor_parallel_size.max(1))
            .checked_mul(u64::from(self.expert_model_parallel_size.max(1)))
            .and_then(|x| x.checked_mul(u64::from(self.pipeline_model_parallel_size.max(1))))
            .unwrap_or(u64::MAX);
        let w = u64::from(self.world_size);
        if w.is_multiple_of(emp) {
            (w / emp) as u32
        } else {
            0
        }
    }

    /// Vocabulary as the embedding is sized: the padded size when known (logged or
    /// derived), else the vocabulary (or GPT-2's 50257) rounded up to
    /// `make_vocab_size_divisible_by · TP`.
    pub fn padded_vocab(&self) -> u64 {
        if let Some(p) = self.padded_vocab_size {
            return p;
        }
        let v = self.vocab_size.unwrap_or(super::fields::GPT2_VOCAB);
        self.vocab_multiple()
            .and_then(|m| super::derive::round_up(v, m))
            .unwrap_or(v)
    }

    /// Mean logged elapsed time per iteration (ms), over every logged line (including the
    /// first, which carries warm-up in real runs), or `None` without iteration lines.
    pub fn mean_iteration_ms(&self) -> Option<f64> {
        if self.iterations.is_empty() {
            return None;
        }
        Some(
            self.iterations.iter().map(|i| i.elapsed_ms).sum::<f64>()
                / self.iterations.len() as f64,
        )
    }

    /// Median logged elapsed time per iteration (ms): robust to the warm-up line.
    pub fn median_iteration_ms(&self) -> Option<f64> {
        super::median(self.iterations.iter().map(|i| i.elapsed_ms).collect())
    }
}
