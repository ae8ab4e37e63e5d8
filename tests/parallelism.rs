//! Context parallelism, expert parallelism and NCCL channels in the trace, checked
//! against sizes derived by hand from Megatron's and Transformer Engine's shapes
//! (docs/model.md#context-parallelism, docs/model.md#expert-parallelism,
//! docs/model.md#nccl-channels), and run end to end by the replayer and the ns-3 glue.

use ina3d::megatron::{self, TrainingConfig};
use ina3d::record::{Class, FlowRecord, Mode};
use ina3d::replay::{simulate, ReplayOptions};
use ina3d::schedule::{self, MoeRouting, ScheduleOptions};
use ina3d::topology::{Routing, Topology};
use ina3d::trace::{self, InaConfig, InaMode, TraceOptions};
use ina3d::units::{Bytes, Nanos};
use std::collections::{BTreeMap, BTreeSet};

/// A Llama-like model (RMSNorm, SwiGLU, no biases): h, heads, query groups, layers, s.
pub fn llama(h: u64, heads: u32, groups: u32, layers: u32, s: u64) -> TrainingConfig {
    let mut c = megatron::preset("llama2-7b").unwrap();
    for (k, v) in [
        ("num_layers", layers.to_string()),
        ("hidden_size", h.to_string()),
        ("ffn_hidden_size", (3 * h).to_string()),
        ("num_attention_heads", heads.to_string()),
        ("group_query_attention", "True".into()),
        ("num_query_groups", groups.to_string()),
        ("seq_length", s.to_string()),
        ("max_position_embeddings", s.to_string()),
        ("vocab_size", "1000".into()),
    ] {
        c.set(k, &v).unwrap();
    }
    c
}

/// A Mixtral-like MoE model: `experts` experts top-2 in every layer, h, ffn = 2h, s.
pub fn moe(experts: u32, layers: u32, h: u64, s: u64) -> TrainingConfig {
    let mut c = megatron::preset("mixtral-8x7b").unwrap();
    for (k, v) in [
        ("num_layers", layers.to_string()),
        ("hidden_size", h.to_string()),
        ("ffn_hidden_size", (2 * h).to_string()),
        ("num_attention_heads", "8".into()),
        ("num_query_groups", "8".into()),
        ("num_experts", experts.to_string()),
        ("seq_length", s.to_string()),
        ("max_position_embeddings", s.to_string()),
        ("vocab_size", "1000".into()),
    ] {
        c.set(k, &v).unwrap();
    }
    c
}

/// Set parallel sizes and the global batch.
pub fn sized(mut c: TrainingConfig, sizes: &[(&str, u64)]) -> TrainingConfig {
    for (k, v) in sizes {
        c.set(k, &v.to_string()).unwrap();
    }
    c.validate().unwrap();
    c
}

pub fn collect(cfg: &TrainingConfig, topo: &Topology, opts: &TraceOptions) -> Vec<FlowRecord> {
    let mut out = Vec::new();
    trace::generate(cfg, topo, opts, &mut |r| {
        out.push(r);
        Ok(())
    })
    .unwrap();
    out
}

fn net_bytes(recs: &[FlowRecord], class: Class) -> u64 {
    recs.iter()
        .filter(|r| r.class == class && r.mode == Mode::Net)
        .map(|r| r.bytes.0)
        .sum()
}

// ---------------------------------------------------------------- context parallelism

#[test]
fn ring_attention_sends_cp_minus_1_kv_blocks_forward_and_twice_that_backward() {
    // h = 1024, 16 heads of 64, 4 query groups (GQA), s = 1024, CP 4, TP 1, b = 1, bf16:
    // one K/V block is 2 · b · (s/CP) · (groups · 64) · 2 B = 2·256·256·2 = 262,144 B.
    let c = sized(
        llama(1024, 16, 4, 2, 1024),
        &[("context_parallel_size", 4), ("global_batch_size", 2)],
    );
    let kv = 2 * 256 * 256 * 2;
    let wl = schedule::build(&c, &ScheduleOptions::default()).unwrap();
    assert_eq!(wl.cp.as_ref().unwrap().kv_bytes, Bytes(kv));
    let topo = Topology::from_spec("fat-tree:k=4,nvlink=off").unwrap();
    let recs = collect(&c, &topo, &TraceOptions::default());
    let cp: Vec<&FlowRecord> = recs.iter().filter(|r| r.class == Class::Cp).collect();
    // Per layer and micro-batch, each of the 4 members: forward 3 blocks to the next;
    // backward 4 steps to the previous of K/V, K/V + dK/dV, K/V + dK/dV, dK/dV = 6 blocks.
    let per_layer_mb = 4 * (3 + 6) * kv;
    assert_eq!(net_bytes(&recs, Class::Cp), 2 * 2 * per_layer_mb);
    assert!(cp.iter().all(|r| r.mode == Mode::Net && r.channel == 0));
    // Step sizes: forward steps are one block; backward steps 1 and 2 are two.
    let fwd_first_layer: Vec<&&FlowRecord> = cp
        .iter()
        .filter(|r| r.microbatch == Some(0) && r.layer == Some(0))
        .collect();
    let sizes: BTreeMap<u32, BTreeSet<u64>> =
        fwd_first_layer.iter().fold(BTreeMap::new(), |mut m, r| {
            m.entry(r.step.unwrap()).or_default().insert(r.bytes.0);
            m
        });
    assert_eq!(sizes[&0], BTreeSet::from([kv]));
    assert_eq!(
        sizes[&1],
        BTreeSet::from([kv, 2 * kv]),
        "forward kv, backward kv+dkv"
    );
    assert_eq!(
        sizes[&3],
        BTreeSet::from([kv]),
        "backward's last step: dK/dV only"
    );
    // Forward goes to the next CP rank (ranks 0..3 are the CP group: TP 1, DP 1).
    let ring: BTreeSet<(u32, u32)> = fwd_first_layer
        .iter()
        .filter(|r| r.step == Some(0) && r.bytes.0 == kv && r.deps.iter().all(|_| true))
        .map(|r| (r.src.0, r.dst.0))
        .collect();
    assert!(ring.contains(&(0, 1)) && ring.contains(&(3, 0)), "{ring:?}");
    assert!(
        ring.contains(&(1, 0)),
        "backward goes to the previous rank: {ring:?}"
    );
}

#[test]
fn ulysses_all_to_alls_move_qkv_and_the_output_each_way() {
    // cp_comm_type a2a, CP 2, TP 1: each rank holds Q (h), K and V (groups·64 each) of its
    // 512 tokens and sends half of each all-to-all buffer to the other rank.
    let mut c = llama(1024, 16, 4, 2, 1024);
    c.set("cp_comm_type", "a2a").unwrap();
    let c = sized(c, &[("context_parallel_size", 2), ("global_batch_size", 2)]);
    let qkv = 512 * (1024 + 2 * 256) * 2;
    let out = 512 * 1024 * 2;
    let topo = Topology::from_spec("fat-tree:k=4,nvlink=off").unwrap();
    let recs = collect(&c, &topo, &TraceOptions::default());
    // Forward: a2a(Q,K,V) and a2a(O); backward (Transformer Engine ≥ 2.9): a2a(dO) alone
    // and a2a(dQ,dK,dV); each member sends half of its buffer: 2 members × S/2 = S per
    // all-to-all.
    let per_layer_mb = qkv + out + out + qkv;
    assert_eq!(net_bytes(&recs, Class::Cp), 2 * 2 * per_layer_mb);
}

#[test]
fn kv_all_gather_context_parallelism_gathers_forward_gathers_again_and_reduce_scatters_backward() {
    let mut c = llama(1024, 16, 4, 1, 1024);
    c.set("cp_comm_type", "allgather").unwrap();
    let c = sized(c, &[("context_parallel_size", 2), ("global_batch_size", 1)]);
    let kv: u64 = 2 * 512 * 256 * 2;
    let topo = Topology::from_spec("fat-tree:k=4,nvlink=off").unwrap();
    let opts = TraceOptions {
        nccl_channels: Some(1),
        ..Default::default()
    };
    let recs = collect(&c, &topo, &opts);
    // A 2-member ring all-gather of S = CP·kv sends S/2 per member, the reduce-scatter too:
    // forward all-gather, backward all-gather (Transformer Engine gathers K and V again)
    // and reduce-scatter of dK, dV, for 2 members.
    assert_eq!(net_bytes(&recs, Class::Cp), 3 * (2 * kv / 2) * 2);
}

#[test]
fn dense_gradients_reduce_over_dp_times_cp() {
    let c = sized(
        llama(512, 8, 8, 2, 512),
        &[
            ("context_parallel_size", 2),
            ("data_parallel_size", 2),
            ("global_batch_size", 2),
        ],
    );
    let topo = Topology::from_spec("fat-tree:k=4,nvlink=off").unwrap();
    let recs = collect(&c, &topo, &TraceOptions::default());
    let wl = schedule::build(&c, &ScheduleOptions::default()).unwrap();
    let s: u64 = wl.stages[0].buckets.iter().map(|b| b.grad_bytes.0).sum();
    // A ring all-reduce over DP·CP = 4 members: every member sends 2·S·3/4.
    let mut sent: BTreeMap<u32, u64> = BTreeMap::new();
    for r in recs.iter().filter(|r| r.class == Class::Dp) {
        *sent.entry(r.src.0).or_default() += r.bytes.0;
    }
    assert_eq!(sent.len(), 4);
    assert!(
        sent.values().all(|b| *b == 2 * s * 3 / 4),
        "{sent:?} vs S = {s}"
    );
}

// ---------------------------------------------------------------- expert parallelism

/// 4 experts top-2 over EP 4 (one expert per rank), DP 4, TP 1, h = 512, s = 256, b = 1:
/// each rank routes 256 tokens · 2 = 512 token copies, 128 to each EP rank.
fn moe_ep4() -> TrainingConfig {
    sized(
        moe(4, 2, 512, 256),
        &[
            ("data_parallel_size", 4),
            ("expert_model_parallel_size", 4),
            ("global_batch_size", 8),
        ],
    )
}

#[test]
fn moe_dispatch_and_combine_move_tokens_times_topk_times_h_with_nvlink_local_pairs() {
    let c = moe_ep4();
    let wl = schedule::build(&c, &ScheduleOptions::default()).unwrap();
    let per_peer = 128 * 512 * 2; // tokens · h · 2 B
    assert_eq!(
        wl.moe.as_ref().unwrap().dispatch_bytes,
        vec![Bytes(per_peer); 4]
    );
    // 2 GPUs per server: each rank has 1 NVLink peer and 2 network peers.
    let topo = Topology::from_spec("fat-tree:k=4,gpus-per-server=2").unwrap();
    let recs = collect(&c, &topo, &TraceOptions::default());
    // Per MoE layer and micro-batch: dispatch + combine forward and backward = 4
    // all-to-alls, each moving 4 ranks × 2 network peers × per_peer.
    let m = 2;
    assert_eq!(net_bytes(&recs, Class::Ep), 2 * m * 4 * (4 * 2 * per_peer));
    // The local pair of each server is one NVLink record per all-to-all: its busiest GPU
    // sends per_peer, at 2400 Gb/s, plus one step latency for its one local peer.
    let nv: Vec<&FlowRecord> = recs
        .iter()
        .filter(|r| r.class == Class::Ep && r.mode == Mode::NvLink)
        .collect();
    assert_eq!(nv.len() as u64, 2 * m * 4 * 2);
    let expect = (per_peer as f64 * 8.0 / 2400e9 * 1e9).ceil() as u64 + 3400;
    assert!(nv
        .iter()
        .all(|r| r.dur == Nanos(expect) && r.bytes.0 == 2 * per_peer));
    // Network pairs are split over the 2 NCCL channels.
    let chans: BTreeSet<u32> = recs
        .iter()
        .filter(|r| r.class == Class::Ep && r.mode == Mode::Net)
        .map(|r| r.channel)
        .collect();
    assert_eq!(chans, BTreeSet::from([0, 1]));
}

#[test]
fn a_capacity_factor_below_one_drops_the_tokens_over_capacity() {
    // Capacity per expert = ceil(512 copies / 4 experts · 0.5) = 64 tokens.
    let mut c = moe_ep4();
    c.set("moe_expert_capacity_factor", "0.5").unwrap();
    let wl = schedule::build(&c, &ScheduleOptions::default()).unwrap();
    let m = wl.moe.as_ref().unwrap();
    assert_eq!(m.dispatch_bytes, vec![Bytes(64 * 512 * 2); 4]);
    assert!((m.dropped - 0.5).abs() < 1e-12);
}

#[test]
fn zipf_routing_loads_the_first_expert_rank_most() {
    // Shares ∝ 1, 1/2, 1/3, 1/4 over 4 experts: 12/25, 6/25, 4/25, 3/25 of 512 copies.
    let c = moe_ep4();
    let opts = ScheduleOptions {
        moe_routing: MoeRouting::Zipf(1.0),
        ..Default::default()
    };
    let wl = schedule::build(&c, &opts).unwrap();
    let m = wl.moe.as_ref().unwrap();
    let want: Vec<Bytes> = [12.0, 6.0, 4.0, 3.0]
        .iter()
        .map(|w| Bytes((512.0 * w / 25.0 * 1024.0_f64).round() as u64))
        .collect();
    assert_eq!(m.dispatch_bytes, want);
    // Experts' compute follows the tokens each rank receives: rank 0 does 4× rank 3's.
    let ratio = m.expert_fwd[0].0 as f64 / m.expert_fwd[3].0 as f64;
    assert!((ratio - 4.0).abs() < 1e-3, "{ratio}");
}

#[test]
fn expert_gradients_reduce_over_the_expert_data_parallel_group() {
    // DP 8, EP 4: expert DP = 8 / (1·4·1) = 2, groups {j, j+4}. One expert per rank of
    // fc1 (SwiGLU, 2·ffn·h) and fc2 (ffn·h), ffn = 2h = 1024, h = 512, 2 layers.
    let c = sized(
        moe(4, 2, 512, 256),
        &[
            ("data_parallel_size", 8),
            ("expert_model_parallel_size", 4),
            ("global_batch_size", 8),
        ],
    );
    let wl = schedule::build(&c, &ScheduleOptions::default()).unwrap();
    let st = &wl.stages[0];
    assert_eq!(st.expert_params_per_gpu, 2 * 3 * 1024 * 512);
    let expert: Vec<_> = st
        .buckets
        .iter()
        .filter(|b| b.group == schedule::GradGroup::ExpertData)
        .collect();
    assert_eq!(expert.len(), 1);
    assert_eq!(expert[0].grad_bytes, Bytes(4 * 2 * 3 * 1024 * 512));
    assert_eq!(
        wl.groups
            .edp_groups
            .iter()
            .map(|g| g.iter().map(|r| r.0).collect::<Vec<_>>())
            .collect::<Vec<_>>(),
        vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]]
    );
    let topo = Topology::from_spec("fat-tree:k=4,nvlink=off").unwrap();
    let recs = collect(&c, &topo, &TraceOptions::default());
    // Rank 0's DP traffic: a ring all-reduce over 8 (dense, 2·D·7/8) and over its expert
    // DP pair {0, 4} (2·E·1/2).
    let dense: u64 = st
        .buckets
        .iter()
        .filter(|b| b.group == schedule::GradGroup::DataContext)
        .map(|b| b.grad_bytes.0)
        .sum();
    let e = expert[0].grad_bytes.0;
    let sent0: u64 = recs
        .iter()
        .filter(|r| r.class == Class::Dp && r.src.0 == 0)
        .map(|r| r.bytes.0)
        .sum();
    assert_eq!(sent0, 2 * dense * 7 / 8 + e);
    let expert_peers: BTreeSet<u32> = recs
        .iter()
        .filter(|r| r.class == Class::Dp && r.src.0 == 0 && r.collective.is_some())
        .map(|r| r.dst.0)
        .collect();
    assert!(expert_peers.contains(&4) && expert_peers.contains(&1));
}

#[test]
fn the_allgather_dispatcher_gathers_over_expert_tp_times_ep_and_reduce_scatters_back() {
    let mut c = moe_ep4();
    c.set("moe_token_dispatcher_type", "allgather").unwrap();
    let topo = Topology::from_spec("fat-tree:k=4,nvlink=off").unwrap();
    let recs = collect(
        &c,
        &topo,
        &TraceOptions {
            nccl_channels: Some(1),
            ..Default::default()
        },
    );
    // S = ETP·EP·T·h·2 = 4·256·512·2; ring all-gather and reduce-scatter over 4: each
    // member sends 3·S/4; fwd AG + RS, bwd AG + RS, 2 layers, 2 micro-batches.
    let s = 4 * 256 * 512 * 2;
    assert_eq!(net_bytes(&recs, Class::Ep), 2 * 2 * 4 * (4 * 3 * s / 4));
}

#[test]
fn in_network_aggregation_never_takes_an_all_to_all() {
    let c = moe_ep4();
    let topo = Topology::from_spec("fat-tree:k=4,nvlink=off").unwrap();
    let opts = TraceOptions {
        ina: InaConfig {
            mode: InaMode::Hierarchical,
            classes: vec![Class::Ep, Class::Dp],
            ..Default::default()
        },
        ..Default::default()
    };
    let recs = collect(&c, &topo, &opts);
    assert!(recs
        .iter()
        .any(|r| r.class == Class::Dp && r.mode == Mode::Ina));
    assert!(recs
        .iter()
        .filter(|r| r.class == Class::Ep)
        .all(|r| r.mode == Mode::Net));
}

#[test]
fn moe_with_tp_and_without_sequence_parallelism_is_refused_naming_the_field_and_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("job.toml");
    std::fs::write(
        &p,
        "preset = \"mixtral-8x7b\"\ntensor_model_parallel_size = 2\nnum_layers = 2\nglobal_batch_size = 8\n",
    )
    .unwrap();
    let c = megatron::load(std::slice::from_ref(&p)).unwrap();
    let e = schedule::build(&c, &ScheduleOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("sequence_parallel") && e.contains("--sequence-parallel"),
        "{e}"
    );
    let e2 = {
        let mut c = c.clone();
        c.set("sequence_parallel", "True").unwrap();
        c.set("moe_token_dispatcher_type", "flex").unwrap();
        schedule::build(&c, &ScheduleOptions::default())
            .unwrap_err()
            .to_string()
    };
    assert!(
        e2.contains("moe_token_dispatcher_type") && e2.contains("override"),
        "{e2}"
    );
    // A refused value read from a file names the file, its line and the field.
    let q = dir.path().join("cp.toml");
    std::fs::write(
        &q,
        "preset = \"llama2-7b\"\ncontext_parallel_size = 2\ncp_comm_type = \"a2a+p2p\"\nnum_layers = 2\nglobal_batch_size = 1\n",
    )
    .unwrap();
    let c = megatron::load(std::slice::from_ref(&q)).unwrap();
    let e3 = schedule::build(&c, &ScheduleOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e3.starts_with(&format!("{}:3:1: cp_comm_type: ", q.display())),
        "{e3}"
    );
}

// ---------------------------------------------------------------- NCCL channels

#[test]
fn channels_split_each_ring_step_and_keep_every_rank_s_bytes() {
    let c = sized(
        llama(512, 8, 8, 2, 512),
        &[("data_parallel_size", 8), ("global_batch_size", 8)],
    );
    let topo = Topology::from_spec("fat-tree:k=4,nvlink=off").unwrap();
    let one = collect(
        &c,
        &topo,
        &TraceOptions {
            nccl_channels: Some(1),
            ..Default::default()
        },
    );
    let four = collect(
        &c,
        &topo,
        &TraceOptions {
            nccl_channels: Some(4),
            ..Default::default()
        },
    );
    let dp = |v: &[FlowRecord]| v.iter().filter(|r| r.class == Class::Dp).count();
    assert_eq!(dp(&four), 4 * dp(&one));
    assert_eq!(net_bytes(&four, Class::Dp), net_bytes(&one, Class::Dp));
    let chans: BTreeSet<u32> = four.iter().map(|r| r.channel).collect();
    assert_eq!(chans, BTreeSet::from([0, 1, 2, 3]));
    // Channel c of a pair is its own ECMP connection.
    let r = Routing::new(&topo, 0).unwrap();
    let (a, b) = (
        topo.gpu(ina3d::units::Rank(0)),
        topo.gpu(ina3d::units::Rank(15)),
    );
    let paths: BTreeSet<Vec<_>> = (0..8).map(|c| r.channel_path(a, b, c).unwrap()).collect();
    assert!(
        paths.len() > 1,
        "8 channels of one pair all hashed onto one path"
    );
    assert_eq!(
        r.channel_path(a, b, 0).unwrap(),
        r.connection_path(a, b).unwrap()
    );
}

#[test]
fn the_default_channel_count_is_two_per_nic_port() {
    let one = Topology::from_spec("fat-tree:k=4").unwrap();
    assert_eq!(trace::default_channels(&one), 2);
    let two = Topology::from_spec("dual-plane").unwrap();
    assert_eq!(trace::default_channels(&two), 4);
}

// ---------------------------------------------------------------- end to end

/// Replays `recs` and checks every record finishes and every byte is accounted for: per
/// class the fct rows carry the trace's bytes, and the links carry exactly each net
/// record's wire bytes once per hop of its channel's path.
fn replay_conserves_bytes(recs: &[FlowRecord], topo: &Topology) {
    let routing = Routing::new(topo, 0).unwrap();
    let res = simulate(recs, topo, &routing, &ReplayOptions::default()).unwrap();
    assert_eq!(res.rows().len(), recs.len());
    let mut by_class: BTreeMap<Class, (u64, u64)> = BTreeMap::new();
    for (r, row) in recs.iter().zip(&res.rows()) {
        assert_eq!(row.flow_id, r.id.0);
        assert!(row.end_ns >= row.start_ns);
        let e = by_class.entry(r.class).or_default();
        e.0 += r.bytes.0;
        e.1 += row.size_bytes;
    }
    assert!(by_class.values().all(|(a, b)| a == b), "{by_class:?}");
    let mut want = 0u64;
    for r in recs.iter().filter(|r| r.mode == Mode::Net) {
        let hops = routing.channel_path(r.src, r.dst, r.channel).unwrap().len() as u64;
        want += r.bytes.with_headers(Bytes(1000), Bytes(48)).0 * hops;
    }
    let got: u64 = res.channels.iter().map(|c| c.bytes).sum();
    assert_eq!(got, want);
}

#[test]
fn the_replayer_runs_a_small_moe_trace_and_a_small_cp_trace_with_bytes_conserved() {
    let topo = Topology::from_spec("fat-tree:k=4,gpus-per-server=2").unwrap();
    let moe = collect(&moe_ep4(), &topo, &TraceOptions::default());
    assert!(net_bytes(&moe, Class::Ep) > 0);
    replay_conserves_bytes(&moe, &topo);
    let cp = sized(
        llama(512, 8, 4, 2, 512),
        &[
            ("context_parallel_size", 4),
            ("data_parallel_size", 2),
            ("global_batch_size", 2),
        ],
    );
    let cp = collect(&cp, &topo, &TraceOptions::default());
    assert!(net_bytes(&cp, Class::Cp) > 0);
    replay_conserves_bytes(&cp, &topo);
}

/// Runs `recs` on the ns-3 glue and checks every record finishes with its bytes: per class
/// the glue's fct rows and summary carry the trace's network bytes.
fn glue_conserves_bytes(recs: &[FlowRecord], topo: &Topology, dir: &std::path::Path) {
    use ina3d::ns3::run::{build_glue, glue_binary, glue_source_dir, run_glue};
    use ina3d::ns3::{emit, EmitOptions, InaConfig};
    let glue = build_glue(&glue_source_dir(), &glue_binary())
        .unwrap_or_else(|e| panic!("ns-3 glue unavailable — this test needs ns-3: {e}"));
    emit(
        recs,
        &InaConfig::default(),
        topo,
        &EmitOptions::default(),
        dir,
    )
    .unwrap();
    let r = run_glue(&glue, dir, |_, _| {}).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.rows.len(), recs.len());
    assert_eq!(r.stats["finished"], recs.len() as u64);
    let mut want: BTreeMap<Class, u64> = BTreeMap::new();
    let mut got: BTreeMap<Class, u64> = BTreeMap::new();
    for (rec, row) in recs.iter().zip(&r.rows) {
        assert_eq!(row.flow_id, rec.id.0);
        *want.entry(rec.class).or_default() += rec.bytes.0;
        *got.entry(row.class).or_default() += row.size_bytes;
    }
    assert_eq!(got, want);
    let net = |c| net_bytes(recs, c);
    assert_eq!(
        (r.summary.ep_bytes, r.summary.cp_bytes, r.summary.dp_bytes),
        (net(Class::Ep), net(Class::Cp), net(Class::Dp))
    );
}

#[test]
fn the_ns3_glue_runs_a_small_moe_trace_and_a_small_cp_trace_with_bytes_conserved() {
    let topo = Topology::from_spec("fat-tree:k=4,gpus-per-server=2").unwrap();
    // Tiny on purpose: packet-level cost grows with bytes × hops.
    let moe_cfg = sized(
        moe(4, 1, 128, 64),
        &[
            ("data_parallel_size", 4),
            ("expert_model_parallel_size", 4),
            ("global_batch_size", 4),
        ],
    );
    let recs = collect(&moe_cfg, &topo, &TraceOptions::default());
    assert!(net_bytes(&recs, Class::Ep) > 0);
    let dir = tempfile::tempdir().unwrap();
    glue_conserves_bytes(&recs, &topo, dir.path());
    let cp_cfg = sized(
        llama(128, 4, 2, 1, 128),
        &[("context_parallel_size", 4), ("global_batch_size", 1)],
    );
    let recs = collect(&cp_cfg, &topo, &TraceOptions::default());
    assert!(net_bytes(&recs, Class::Cp) > 0);
    let dir = tempfile::tempdir().unwrap();
    glue_conserves_bytes(&recs, &topo, dir.path());
}
