//! How many transformer layers each pipeline stage holds (docs/model.md#stage-split).
//!
//! - Megatron-LM: `L/PP` each, unless `--decoder-first-pipeline-num-layers` /
//!   `--decoder-last-pipeline-num-layers` fix the first / last stage and the other stages
//!   share the rest evenly (`get_num_layers_to_build`), or
//!   `--account-for-embedding-in-pipeline-split` / `--account-for-loss-in-pipeline-split`
//!   count the embedding / the loss as one layer of the first / last stage.
//! - Megatron-DeepSpeed's pipeline engine (`--deepspeed`, PP > 1): DeepSpeed's
//!   `PipelineModule` partitions the model's layer list by `--pp-partition-method`
//!   (`--partition-method` in other forks)
//!   (default `type:transformer`): `uniform` (every entry of the list counts one),
//!   `type:NAMES` (entries whose class name contains one of the `|`-separated names count
//!   one, the others zero), `parameters` (each entry counts its parameters); the balanced
//!   partition minimises the spread between the heaviest and the lightest stage
//!   (`partition_balanced`, DeepSpeed ≥ 0.12.5).

use super::config::{PositionEmbedding, TrainingConfig};
use super::error::MegatronError;

/// Layer entries DeepSpeed partitions at most: its balancing is quadratic in them.
const MAX_DEEPSPEED_ENTRIES: usize = 4096;

impl TrainingConfig {
    /// Megatron's `gated_linear_unit`: the MLP's first projection is doubled, for SwiGLU
    /// (`--swiglu`) and for gpt-oss's gated GeLU (`--quick-geglu`).
    pub fn gated_linear_unit(&self) -> bool {
        self.swiglu || self.extra_flag("quick_geglu")
    }

    /// `--hierarchical-context-parallel-sizes` of `--cp-comm-type a2a+p2p`: the all-to-all
    /// (inner) and ring (outer) CP sizes, when given and well formed.
    pub fn hierarchical_cp_sizes(&self) -> Option<Vec<u32>> {
        let v = self.extra_value("hierarchical_context_parallel_sizes")?;
        super::fields::parse_size_list(v, "", &super::error::Loc::new("", 0, 0)).ok()
    }

    /// `--fp8-param-gather`: the distributed optimizer all-gathers the FP8 copies of the
    /// linear layers' weights (1 byte per element) instead of their bf16 values.
    pub fn fp8_param_gather(&self) -> bool {
        self.extra_flag("fp8_param_gather")
    }

    /// An argument kept in `extra`, unless Python's `None` or empty (an arguments block
    /// prints every argument, set or not).
    pub(crate) fn extra_value(&self, key: &str) -> Option<&str> {
        self.extra
            .get(key)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty() && !matches!(*v, "None" | "null"))
    }

    /// The `sources` key that marks a log whose arguments block predates Megatron's
    /// attention-kernel flags (unfused attention).
    pub const LEGACY_ATTENTION: &'static str = "legacy_arguments_block";

    /// Whether the job came from an arguments block older than `--transformer-impl` and
    /// `--use-flash-attn` (Megatron before 2023): its attention is unfused.
    pub fn from_legacy_arguments_block(&self) -> bool {
        self.sources.contains_key(Self::LEGACY_ATTENTION)
    }

    /// Whether each TP rank sends 1/TP of a pipeline activation (or gradient) and the
    /// receiving TP group all-gathers it: Megatron's `--scatter-gather-tensors-in-pipeline`
    /// (before core's p2p rewrite, on by default there; skipped under sequence
    /// parallelism, whose activations are already split), and DeepSpeed's pipeline engine
    /// with TP, whose `pipe_partitioned` and `grad_partitioned` (on by default) do the same
    /// with its `PartitionedTensor`.
    pub fn scatter_gather_in_pipeline(&self) -> bool {
        let megatron =
            self.extra_flag("scatter_gather_tensors_in_pipeline") && !self.sequence_parallel;
        self.tensor_model_parallel_size > 1 && (megatron || self.deepspeed_pipeline())
    }

    fn extra_flag(&self, key: &str) -> bool {
        self.extra
            .get(key)
            .is_some_and(|v| matches!(v.trim(), "True" | "true" | "1"))
    }

    fn extra_count(&self, key: &str) -> Option<u64> {
        self.extra.get(key).and_then(|v| v.trim().parse().ok())
    }

    fn stage_error(&self, field: &str, expected: String) -> MegatronError {
        MegatronError::Inconsistent {
            at: self.place(field),
            field: field.into(),
            expected,
        }
    }

    /// True when DeepSpeed's pipeline engine lays the stages out (Megatron-DeepSpeed with
    /// `--deepspeed` and PP > 1).
    pub fn deepspeed_pipeline(&self) -> bool {
        self.extra_flag("deepspeed")
            && self.pipeline_model_parallel_size > 1
            && !self.extra_flag("no_pipeline_parallel")
    }

    /// Transformer layers per pipeline stage, stage 0 first; an error names the argument
    /// when the split is impossible or not modelled.
    pub fn stage_layers(&self) -> Result<Vec<u32>, MegatronError> {
        let pp = self.pipeline_model_parallel_size.max(1);
        let l = self.num_layers;
        if self.extra_value("pipeline_model_parallel_layout").is_some() {
            return Err(self.stage_error(
                "pipeline_model_parallel_layout",
                "--pipeline-model-parallel-layout is not modelled: describe the split with --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers".into(),
            ));
        }
        let first = self.extra_count("decoder_first_pipeline_num_layers");
        let last = self.extra_count("decoder_last_pipeline_num_layers");
        let emb = self.extra_flag("account_for_embedding_in_pipeline_split");
        let loss = self.extra_flag("account_for_loss_in_pipeline_split");
        let uneven = first.is_some() || last.is_some() || emb || loss;
        let v = self.virtual_pipeline_model_parallel_size.unwrap_or(1);
        if self.deepspeed_pipeline() {
            return self.deepspeed_split();
        }
        if uneven && v > 1 {
            return Err(self.stage_error(
                "virtual_pipeline_model_parallel_size",
                "an uneven pipeline split with interleaving is not modelled: drop the virtual pipeline or the uneven split".into(),
            ));
        }
        if first.is_some() || last.is_some() {
            if emb || loss {
                return Err(self.stage_error(
                    "decoder_first_pipeline_num_layers",
                    "Megatron refuses --account-for-embedding/loss-in-pipeline-split together with an uneven first or last stage".into(),
                ));
            }
            return self.first_last_split(first, last);
        }
        let total = u64::from(l) + u64::from(emb) + u64::from(loss);
        if !total.is_multiple_of(u64::from(pp)) {
            let what = if emb || loss {
                format!("num_layers {l} plus the embedding/loss counted as layers = {total}")
            } else {
                format!("num_layers {l}")
            };
            return Err(self.stage_error(
                "num_layers",
                format!("{what} is not divisible by pipeline_model_parallel_size {pp}"),
            ));
        }
        let per = (total / u64::from(pp)) as u32;
        let mut v: Vec<u32> = vec![per; pp as usize];
        if emb {
            v[0] -= 1;
        }
        if loss {
            v[pp as usize - 1] -= 1;
        }
        if v.contains(&0) && pp > 1 {
            return Err(self.stage_error(
                "num_layers",
                format!("a pipeline stage would hold no transformer layer ({v:?})"),
            ));
        }
        Ok(v)
    }

    fn first_last_split(
        &self,
        first: Option<u64>,
        last: Option<u64>,
    ) -> Result<Vec<u32>, MegatronError> {
        let pp = self.pipeline_model_parallel_size.max(1) as u64;
        let l = u64::from(self.num_layers);
        let fixed = first.unwrap_or(0) + last.unwrap_or(0);
        let left_stages = pp - u64::from(first.is_some()) - u64::from(last.is_some());
        let field = if first.is_some() {
            "decoder_first_pipeline_num_layers"
        } else {
            "decoder_last_pipeline_num_layers"
        };
        if fixed > l || (left_stages == 0 && fixed != l) {
            return Err(self.stage_error(
                field,
                format!("the first/last stages' {fixed} layers do not fit num_layers {l} over {pp} stages"),
            ));
        }
        let rest = l - fixed;
        let per = if left_stages > 0 {
            if !rest.is_multiple_of(left_stages) {
                return Err(self.stage_error(
                    field,
                    format!("the {rest} layers left for the other {left_stages} stages do not divide evenly (Megatron requires it)"),
                ));
            }
            rest / left_stages
        } else {
            0
        };
        let mut v = vec![per as u32; pp as usize];
        if let Some(f) = first {
            v[0] = f as u32;
        }
        if let Some(t) = last {
            v[pp as usize - 1] = t as u32;
        }
        Ok(v)
    }

    /// Megatron-DeepSpeed's `GPTModelPipe` layer list, partitioned as DeepSpeed does.
    fn deepspeed_split(&self) -> Result<Vec<u32>, MegatronError> {
        let pp = self.pipeline_model_parallel_size.max(1) as usize;
        if self.virtual_pipeline_model_parallel_size.unwrap_or(1) > 1 {
            return Err(self.stage_error(
                "virtual_pipeline_model_parallel_size",
                "DeepSpeed's pipeline engine has no interleaved schedule".into(),
            ));
        }
        // bigscience's `--pp-partition-method`, other forks' `--partition-method`.
        let field = if self.extra_value("pp_partition_method").is_some() {
            "pp_partition_method"
        } else {
            "partition_method"
        };
        let method = self
            .extra_value(field)
            .map(|m| m.trim().trim_matches(['\'', '"']).to_string())
            .unwrap_or_else(|| "type:transformer".into());
        // (class name, parameters, is a transformer layer), in GPTModelPipe's order:
        // dtype cast, embedding, transpose, the layers, transpose back, final norm, the
        // tied embedding computing the logits, cast back (bf16/fp16 only).
        let h = self.hidden_size;
        let emb_params = self.padded_vocab() / u64::from(self.tensor_model_parallel_size.max(1))
            * h
            + if self.position_embedding_type == PositionEmbedding::LearnedAbsolute {
                self.max_position_embeddings * h
            } else {
                0
            };
        let layer = 12 * h * h / u64::from(self.tensor_model_parallel_size.max(1));
        let l = self.num_layers as usize;
        let mut specs: Vec<(&str, u64, bool)> = vec![
            ("_to_float16", 0, false),
            ("EmbeddingPipe", emb_params, false),
            ("<lambda>", 0, false),
        ];
        if l + 8 > MAX_DEEPSPEED_ENTRIES {
            return Err(self.stage_error(
                "num_layers",
                format!("DeepSpeed's partition of more than {MAX_DEEPSPEED_ENTRIES} layers is not modelled"),
            ));
        }
        specs.extend(std::iter::repeat_n(
            ("ParallelTransformerLayerPipe", layer, true),
            l,
        ));
        specs.push(("undo", 0, false));
        specs.push(("LayerNorm", 2 * h, false));
        specs.push(("EmbeddingPipe", emb_params, false));
        if self.bf16 || self.fp16 {
            specs.push(("float16_to_fp32", 0, false));
        }
        let weights: Vec<u64> = match method.to_ascii_lowercase().as_str() {
            "uniform" => vec![1; specs.len()],
            "parameters" => specs.iter().map(|s| s.1).collect(),
            m if m.starts_with("type:") => {
                let names: Vec<String> = m[5..].split('|').map(str::to_string).collect();
                if names.iter().any(|n| {
                    n.is_empty() || n.contains(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                }) {
                    return Err(self.stage_error(
                        field,
                        format!("`{method}`: only `type:` with |-separated class names is modelled, not other regular expressions"),
                    ));
                }
                let w: Vec<u64> = specs
                    .iter()
                    .map(|s| u64::from(names.iter().any(|n| s.0.to_ascii_lowercase().contains(n))))
                    .collect();
                if w.iter().all(|x| *x == 0) {
                    return Err(self.stage_error(
                        field,
                        format!("`{method}` matches no layer (DeepSpeed raises)"),
                    ));
                }
                w
            }
            _ => {
                return Err(self.stage_error(
                    field,
                    format!(
                    "`{method}`: expected uniform, parameters or type:NAMES (DeepSpeed's methods)"
                ),
                ))
            }
        };
        let parts = if method.eq_ignore_ascii_case("uniform") {
            partition_uniform(specs.len(), pp)
        } else {
            partition_balanced(&weights, pp)
        };
        let v: Vec<u32> = parts
            .windows(2)
            .map(|w| specs[w[0]..w[1]].iter().filter(|s| s.2).count() as u32)
            .collect();
        if v.contains(&0) {
            return Err(self.stage_error(
                field,
                format!("`{method}` leaves a pipeline stage without transformer layers ({v:?}), which DeepSpeed's engine does not run"),
            ));
        }
        Ok(v)
    }
}

/// DeepSpeed's `partition_uniform`: `parts[p]` is the first item of part `p`.
fn partition_uniform(n: usize, m: usize) -> Vec<usize> {
    if n <= m {
        return (0..=m).map(|p| p.min(n)).collect();
    }
    let (chunk, residual) = (n / m, n % m);
    (0..=m).map(|p| p * chunk + p.min(residual)).collect()
}

/// DeepSpeed's `partition_balanced` (≥ 0.12.5): the split of `weights` into `m`
/// consecutive parts minimising (heaviest − lightest), by dynamic programming; among
/// equal costs the last split point examined wins, as DeepSpeed's `>=` does.
fn partition_balanced(weights: &[u64], m: usize) -> Vec<usize> {
    let n = weights.len();
    if n <= m {
        return partition_uniform(n, m);
    }
    let mut prefix = vec![0u64; n + 1];
    for (i, w) in weights.iter().enumerate() {
        prefix[i + 1] = prefix[i] + w;
    }
    const INF: u64 = u64::MAX;
    let idx = |i: usize, j: usize| i * (m + 1) + j;
    let mut dmax = vec![INF; (n + 1) * (m + 1)];
    let mut dmin = vec![INF; (n + 1) * (m + 1)];
    let mut cost = vec![INF; (n + 1) * (m + 1)];
    let mut pos = vec![0usize; (n + 1) * (m + 1)];
    dmax[idx(0, 0)] = 0;
    cost[idx(0, 0)] = 0;
    for i in 1..=n {
        for j in 1..=i.min(m) {
            for k in 0..i {
                let part = prefix[i] - prefix[k];
                // DeepSpeed's arrays start at infinity: max/min with infinity as numpy does.
                let mx = dmax[idx(k, j - 1)].max(part);
                let mn = dmin[idx(k, j - 1)].min(part);
                let c = if mx == INF { INF } else { mx - mn };
                if cost[idx(i, j)] >= c {
                    cost[idx(i, j)] = c;
                    dmax[idx(i, j)] = mx;
                    dmin[idx(i, j)] = mn;
                    pos[idx(i, j)] = k;
                }
            }
        }
    }
    let mut parts = vec![n];
    for j in (1..=m).rev() {
        let last = *parts.last().unwrap_or(&0);
        parts.push(pos[idx(last, j)]);
    }
    parts.reverse();
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deepspeeds_partitions_match_its_algorithm_on_small_cases() {
        assert_eq!(partition_uniform(10, 3), vec![0, 4, 7, 10]);
        assert_eq!(partition_uniform(2, 3), vec![0, 1, 2, 2]);
        // 4 unit weights over 2 parts: 2 and 2.
        assert_eq!(partition_balanced(&[1, 1, 1, 1], 2), vec![0, 2, 4]);
        // 7 binary weights over 3 parts: weights [0,1,1,1,1,1,0] → 2/2/1 transformer-like
        // items, zero-weight items joining the later part on ties.
        let p = partition_balanced(&[0, 1, 1, 1, 1, 1, 0], 3);
        let counts: Vec<u64> = p
            .windows(2)
            .map(|w| [0, 1, 1, 1, 1, 1, 0][w[0]..w[1]].iter().sum())
            .collect();
        assert_eq!(counts.iter().sum::<u64>(), 5);
        assert!(
            counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1,
            "{counts:?}"
        );
    }
}
