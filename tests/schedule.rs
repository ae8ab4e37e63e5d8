//! The 3D-parallel workload matches Megatron (DESIGN §4–§5).

use ina3d::megatron::{self, TimerStat, TrainingConfig};
use ina3d::schedule::{self, CalibrationSource, CollKind, Groups, LayerStep, Pass, RankOrder, ScheduleError, ScheduleOptions};
use ina3d::units::{Bytes, Rank};

fn ranks(v: &[Vec<Rank>]) -> Vec<Vec<u32>> {
    v.iter().map(|g| g.iter().map(|r| r.0).collect()).collect()
}

/// A small GPT: `tp·pp·dp` GPUs, `layers`, `gb` global batch, micro-batch 1.
fn cfg(tp: u32, pp: u32, dp: u32, layers: u32, gb: u64) -> TrainingConfig {
    let mut c = megatron::preset("gpt3-13b").expect("preset");
    c.set("tensor_model_parallel_size", &tp.to_string()).unwrap();
    c.set("pipeline_model_parallel_size", &pp.to_string()).unwrap();
    c.set("data_parallel_size", &dp.to_string()).unwrap();
    c.set("num_layers", &layers.to_string()).unwrap();
    c.set("global_batch_size", &gb.to_string()).unwrap();
    c.set("seq_length", "2048").unwrap();
    c
}

#[test]
fn tp2_pp2_dp2_groups_are_exactly_megatrons() {
    let g = Groups::new(2, 1, 2, 2, RankOrder::TpCpEpDpPp);
    assert_eq!(ranks(&g.tp_groups), vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]);
    assert_eq!(ranks(&g.dp_groups), vec![vec![0, 2], vec![1, 3], vec![4, 6], vec![5, 7]]);
    assert_eq!(ranks(&g.pp_groups), vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]]);
    assert_eq!(ranks(&g.emb_groups), ranks(&g.pp_groups), "with PP=2 the embedding group is the whole pipeline");
    assert_eq!(g.dp_cp_groups, g.dp_groups);
}

#[test]
fn tp_pp_dp_mapping_swaps_the_pp_and_dp_strides() {
    let g = Groups::new(2, 1, 2, 2, RankOrder::TpCpEpPpDp);
    assert_eq!(ranks(&g.tp_groups), vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]);
    assert_eq!(ranks(&g.pp_groups), vec![vec![0, 2], vec![1, 3], vec![4, 6], vec![5, 7]]);
    assert_eq!(ranks(&g.dp_groups), vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]]);
}

#[test]
fn coordinates_and_ranks_invert_each_other_and_follow_the_formula() {
    for order in [RankOrder::TpCpEpDpPp, RankOrder::TpCpEpPpDp] {
        let g = Groups::new(4, 2, 3, 2, order);
        for r in 0..g.world() {
            let c = g.coords(Rank(r));
            assert_eq!(g.rank(c), Rank(r));
            if order == RankOrder::TpCpEpDpPp {
                assert_eq!(r, c.tp + 4 * (c.cp + 2 * (c.dp + 3 * c.pp)));
            }
        }
        // every rank is in exactly one group of each kind
        for groups in [&g.tp_groups, &g.dp_groups, &g.pp_groups, &g.dp_cp_groups] {
            let mut all: Vec<u32> = groups.iter().flatten().map(|r| r.0).collect();
            all.sort();
            assert_eq!(all, (0..g.world()).collect::<Vec<_>>());
        }
        assert_eq!(g.dp_cp_groups[0].len(), 6, "gradients reduce over DP×CP");
    }
}

#[test]
fn one_f_one_b_warmups_are_3_2_1_0_for_pp4_m8() {
    let w: Vec<u32> = (0..4).map(|r| schedule::warmup(4, r, 8, 1)).collect();
    assert_eq!(w, vec![3, 2, 1, 0]);
    let wl = schedule::build(&cfg(1, 4, 1, 16, 8), &ScheduleOptions::default()).unwrap();
    assert_eq!(wl.stages.iter().map(|s| s.warmup).collect::<Vec<_>>(), vec![3, 2, 1, 0]);
}

#[test]
fn interleaved_warmups_are_10_8_6_4_for_pp4_v2_m8() {
    let w: Vec<u32> = (0..4).map(|r| schedule::warmup(4, r, 8, 2)).collect();
    assert_eq!(w, vec![10, 8, 6, 4]);
}

#[test]
fn every_stage_runs_each_microbatch_chunk_once_forward_then_backward() {
    for v in [1, 2] {
        for r in 0..4 {
            let order = schedule::stage_order(4, r, 8, v);
            assert_eq!(order.len(), 2 * 8 * v as usize);
            let w = schedule::warmup(4, r, 8, v) as usize;
            assert!(order[..w].iter().all(|o| o.pass == Pass::Fwd));
            for mb in 0..8 {
                for c in 0..v {
                    let f = order.iter().position(|o| o.pass == Pass::Fwd && o.microbatch == mb && o.chunk == c).expect("forward present");
                    let b = order.iter().position(|o| o.pass == Pass::Bwd && o.microbatch == mb && o.chunk == c).expect("backward present");
                    assert!(f < b);
                }
            }
        }
    }
}

#[test]
fn interleaved_layers_go_round_robin_over_chunks() {
    // PP=4, v=2, 16 layers: stage 0 holds layers 1–2 and 9–10 (1-based).
    assert_eq!(schedule::chunk_layers(16, 4, 2, 0, 0), 0..2);
    assert_eq!(schedule::chunk_layers(16, 4, 2, 0, 1), 8..10);
    assert_eq!(schedule::chunk_layers(16, 4, 2, 3, 1), 14..16);
}

#[test]
fn gpt13b_tp8_s2048_b1_moves_20971520_bytes_per_tp_op() {
    let wl = schedule::build(&cfg(8, 1, 1, 40, 8), &ScheduleOptions::default()).unwrap();
    assert_eq!(wl.tp_bytes, Bytes(20_971_520));
    let tp_ops = |s: &[LayerStep]| s.iter().filter(|x| matches!(x, LayerStep::Tp(_))).count();
    assert_eq!(tp_ops(&wl.fwd_steps), 2);
    assert_eq!(tp_ops(&wl.bwd_steps), 2);
    assert!(wl.fwd_steps.iter().all(|s| !matches!(s, LayerStep::Tp(k) if *k != CollKind::AllReduce)));
}

#[test]
fn sequence_parallel_uses_2ag_2rs_forward_4ag_2rs_backward_and_shrinks_pp_messages() {
    let mut c = cfg(8, 2, 1, 40, 8);
    c.sequence_parallel = true;
    let wl = schedule::build(&c, &ScheduleOptions::default()).unwrap();
    let count = |s: &[LayerStep], k: CollKind| s.iter().filter(|x| **x == LayerStep::Tp(k)).count();
    assert_eq!((count(&wl.fwd_steps, CollKind::AllGather), count(&wl.fwd_steps, CollKind::ReduceScatter)), (2, 2));
    assert_eq!((count(&wl.bwd_steps, CollKind::AllGather), count(&wl.bwd_steps, CollKind::ReduceScatter)), (4, 2));
    assert_eq!(count(&wl.fwd_steps, CollKind::AllReduce), 0);
    assert_eq!(wl.pp_bytes, Bytes(20_971_520 / 8));
    assert!(wl.stages.iter().all(|s| s.layernorm_bytes.is_some()));
}

#[test]
fn pp_messages_without_sp_are_the_full_activation() {
    let wl = schedule::build(&cfg(8, 2, 1, 40, 8), &ScheduleOptions::default()).unwrap();
    assert_eq!(wl.pp_bytes, Bytes(2048 * 5120 * 2));
}

#[test]
fn dp_buckets_cover_every_parameter_in_reverse_layer_order() {
    let mut c = cfg(1, 2, 4, 8, 16);
    c.overlap_grad_reduce = true;
    let wl = schedule::build(&c, &ScheduleOptions::default()).unwrap();
    for s in &wl.stages {
        let sum: u64 = s.buckets.iter().map(|b| b.params).sum();
        assert_eq!(sum, s.params_per_gpu);
        let triggers: Vec<u32> = s.buckets.iter().map(|b| b.trigger_layer.unwrap()).collect();
        assert!(triggers.windows(2).all(|w| w[0] >= w[1]), "{triggers:?}");
        assert!(s.buckets.iter().all(|b| b.grad_bytes == Bytes(4 * b.params)), "fp32 gradients");
        assert!(s.buckets[..s.buckets.len() - 1].iter().all(|b| b.params >= 40_000_000));
    }
    // Last stage, tensor by tensor (h=5120, TP=1): output layer 262M → 1 bucket; per layer
    // fc2 105M | fc1 105M | LN+proj+qkv 105M → 3 buckets, × 4 layers; the first layer's
    // input layer norm (10,240) is left over → a final small bucket. 1 + 12 + 1 = 14.
    assert_eq!(wl.stages[1].buckets.len(), 14);
    assert_eq!(wl.stages[1].buckets.last().unwrap().params, 2 * 5120);
}

#[test]
fn without_overlap_one_bucket_follows_the_last_backward_and_dist_opt_gathers_bf16_params() {
    let mut c = cfg(2, 2, 2, 8, 8);
    c.use_distributed_optimizer = true;
    c.grad_reduce_in_bf16 = true;
    let wl = schedule::build(&c, &ScheduleOptions::default()).unwrap();
    for s in &wl.stages {
        assert_eq!(s.buckets.len(), 1);
        assert_eq!(s.buckets[0].trigger_layer, None);
        assert_eq!(s.buckets[0].grad_bytes, Bytes(2 * s.params_per_gpu));
        assert_eq!(s.buckets[0].param_bytes, Bytes(2 * s.params_per_gpu));
    }
    // tied embedding: (V_pad/TP)·h fp32... here bf16 grads
    assert_eq!(wl.emb_bytes, Some(Bytes(wl.padded_vocab / 2 * 5120 * 2)));
    assert_eq!(wl.padded_vocab % (128 * 2), 0);
}

#[test]
fn calibration_uses_timers_then_iteration_time_and_reports_the_factor() {
    let c0 = cfg(8, 2, 1, 40, 8);
    let base = schedule::build(&c0, &ScheduleOptions::default()).unwrap();
    assert_eq!(base.calibration.source, CalibrationSource::None);
    assert_eq!(base.calibration.factor, 1.0);

    let mut c = c0.clone();
    c.iterations.push(megatron::IterationRecord { iteration: 10, elapsed_ms: 5000.0, fields: Default::default() });
    let wl = schedule::build(&c, &ScheduleOptions::default()).unwrap();
    assert_eq!(wl.calibration.source, CalibrationSource::IterationTime);
    let f = wl.calibration.factor;
    assert!((wl.calibration.modelled_ms.unwrap() * f - 5000.0).abs() < 1e-6);

    c.timers.insert("forward-compute".into(), TimerStat { min: 900.0, max: 1000.0 });
    c.timers.insert("backward-compute".into(), TimerStat { min: 1900.0, max: 2000.0 });
    let wl2 = schedule::build(&c, &ScheduleOptions::default()).unwrap();
    assert_eq!(wl2.calibration.source, CalibrationSource::Timers);
    assert_eq!(wl2.calibration.measured_ms, Some(3000.0));
    // compute times scale with the factor
    let fwd = |w: &schedule::Workload| w.fwd_steps.iter().map(|s| if let LayerStep::Compute(t) = s { t.0 } else { 0 }).sum::<u64>() as f64;
    let ratio = fwd(&wl2) / fwd(&base);
    assert!((ratio / wl2.calibration.factor - 1.0).abs() < 1e-3, "{ratio} vs {}", wl2.calibration.factor);
}

#[test]
fn inconsistent_sizes_name_the_numbers() {
    let mut c = cfg(2, 2, 2, 8, 8);
    c.global_batch_size = 7;
    let e = schedule::build(&c, &ScheduleOptions::default()).unwrap_err();
    assert_eq!(e, ScheduleError::Batch { global: 7, micro: 1, dp: 2 });
    assert!(e.to_string().contains("7") && e.to_string().contains("= 2"), "{e}");
    let mut c = cfg(2, 2, 2, 8, 8);
    c.world_size = 9;
    assert!(schedule::build(&c, &ScheduleOptions::default()).unwrap_err().to_string().contains("9"));
    let mut c = cfg(2, 3, 2, 8, 12);
    c.num_layers = 8;
    assert!(matches!(schedule::build(&c, &ScheduleOptions::default()), Err(ScheduleError::Layers { layers: 8, pp: 3, v: 1 })));
    let mut c = cfg(1, 4, 1, 16, 6);
    c.virtual_pipeline_model_parallel_size = Some(2);
    assert!(matches!(schedule::build(&c, &ScheduleOptions::default()), Err(ScheduleError::Interleave { m: 6, pp: 4 })));
}

#[test]
fn gpu_presets_have_their_datasheet_peaks() {
    use schedule::Gpu;
    assert_eq!(Gpu::preset("A100").unwrap().peak_tflops, 312.0);
    assert_eq!(Gpu::preset("h100").unwrap().peak_tflops, 989.0);
    assert_eq!(Gpu::preset("h800").unwrap().peak_tflops, 989.0);
    assert_eq!(Gpu::preset("h20").unwrap().peak_tflops, 148.0);
    assert_eq!(Gpu::preset("mi300x:1307").unwrap().peak_tflops, 1307.0);
    assert!(Gpu::preset("tpu").is_none());
}
