//! The replayer against closed forms on small hand-built topologies.

use ina3d::record::{AggDir, AggGroup, AggTag, Class, FlowRecord, Mode};
use ina3d::replay::{
    simulate, InaConfig, InaPolicy, PathSource, RateModel, ReplayError, ReplayOptions,
};
use ina3d::topology::{Channel, Link, LinkKind, NodeKind, Routing, Topology};
use ina3d::units::{BitsPerSec, Bytes, FlowId, LinkId, Nanos, NodeId};
use std::collections::HashMap;

const G100: BitsPerSec = BitsPerSec(100_000_000_000);
/// 100 Gb/s in bytes per nanosecond.
const B100: f64 = 12.5;

/// `n` hosts (0..n) on one switch (node n): a non-blocking network.
fn star(n: u32, rate: BitsPerSec, delay: Nanos) -> Topology {
    let mut kinds = vec![NodeKind::Host; n as usize];
    kinds.push(NodeKind::Switch);
    let links = (0..n)
        .map(|h| Link {
            a: NodeId(h),
            b: NodeId(n),
            rate,
            delay,
            error_rate: 0.0,
            kind: LinkKind::Nic,
        })
        .collect();
    Topology {
        kinds,
        links,
        gpus: (0..n).map(NodeId).collect(),
        gpus_per_server: 1,
        nvlink_rate: None,
        source: format!("star:{n}"),
        fabric: Default::default(),
    }
}

#[allow(clippy::too_many_arguments)]
fn rec(
    id: u64,
    src: u32,
    dst: u32,
    bytes: u64,
    deps: &[u64],
    gap: u64,
    mode: Mode,
    class: Class,
) -> FlowRecord {
    FlowRecord {
        id: FlowId(id),
        src: NodeId(src),
        dst: NodeId(dst),
        bytes: Bytes(bytes),
        deps: deps.iter().map(|&d| FlowId(d)).collect(),
        gap: Nanos(gap),
        dur: Nanos(0),
        mode,
        class,
        ..Default::default()
    }
}

fn net(id: u64, src: u32, dst: u32, bytes: u64, deps: &[u64]) -> FlowRecord {
    rec(id, src, dst, bytes, deps, 0, Mode::Net, Class::Dp)
}

fn compute(id: u64, gpu: u32, dur: u64, deps: &[u64]) -> FlowRecord {
    let mut r = rec(id, gpu, gpu, 0, deps, 0, Mode::Compute, Class::Compute);
    r.dur = Nanos(dur);
    r
}

/// Wire bytes of a host transfer: 1,000 B packets with 48 B of headers (flowSim's rule).
fn wire(b: u64) -> u64 {
    Bytes(b).with_headers(Bytes(1000), Bytes(48)).0
}

/// Wire bytes of an INA stream whose packets carry `payload` bytes of one slot each.
fn ina_wire(b: u64, payload: u64) -> u64 {
    Bytes(b).with_headers(Bytes(payload), Bytes(48)).0
}

/// The max-min solver's options: ideal rates. Most tests here specify the solver; the
/// DCQCN rate model's own tests (at the end) use `RateModel::Dcqcn`.
fn ideal() -> ReplayOptions {
    ReplayOptions {
        rate_model: RateModel::Ideal,
        ..ReplayOptions::default()
    }
}

/// Options whose INA window never limits these small trees (SwitchML's 1,024 B slots).
fn wide_window() -> ReplayOptions {
    ReplayOptions {
        ina: InaConfig {
            payload: Bytes(1024),
            window: 256,
            ..Default::default()
        },
        ..ideal()
    }
}

fn run(
    records: &[FlowRecord],
    topo: &Topology,
    opts: &ReplayOptions,
) -> ina3d::replay::ReplayResult {
    simulate(records, topo, &Routing::new(topo, 1).unwrap(), opts).expect("replay runs")
}

fn ends(r: &ina3d::replay::ReplayResult) -> HashMap<u64, (u64, u64)> {
    r.rows()
        .iter()
        .map(|x| (x.flow_id, (x.start_ns, x.end_ns)))
        .collect()
}

fn assert_close(got: u64, want: f64, tol_ns: f64, what: &str) {
    assert!(
        (got as f64 - want).abs() <= tol_ns,
        "{what}: got {got} ns, want {want:.1} ns (±{tol_ns})"
    );
}

#[test]
fn one_flow_takes_wire_size_over_bandwidth_plus_path_latency() {
    let topo = star(2, G100, Nanos(1000));
    let r = run(&[net(0, 0, 1, 1_000_000, &[])], &topo, &ideal());
    // 1,000,000 B + 1000 packets × 48 B = 1,048,000 B at 12.5 B/ns = 83,840 ns; + 2 hops × 1 µs
    assert_eq!(wire(1_000_000), 1_048_000);
    assert_eq!(r.rows()[0].end_ns, 83_840 + 2_000);
    assert_eq!(r.rows()[0].fct_ns, r.rows()[0].standalone_fct_ns);
    assert_eq!(r.summary.iteration_time_ns, 85_840);
}

#[test]
fn k_flows_on_one_bottleneck_each_get_one_kth() {
    for k in [2u32, 3, 7] {
        let topo = star(k + 1, G100, Nanos(500));
        let recs: Vec<_> = (0..k)
            .map(|i| net(i as u64, i + 1, 0, 2_000_000, &[]))
            .collect();
        let r = run(&recs, &topo, &ideal());
        let want = k as f64 * wire(2_000_000) as f64 / B100 + 1000.0;
        for row in &r.rows() {
            assert_close(
                row.end_ns,
                want,
                1.0,
                &format!("k={k} flow {}", row.flow_id),
            );
            // each ran at 1/k of the link: k times its standalone transfer time
            let alone = row.standalone_fct_ns - 1000;
            assert_close(
                row.fct_ns - 1000,
                (k as u64 * alone) as f64,
                k as f64,
                "1/k share",
            );
        }
    }
}

#[test]
fn a_short_flow_leaves_its_share_to_the_long_one() {
    let topo = star(3, G100, Nanos(0));
    let recs = vec![net(0, 1, 0, 1_000_000, &[]), net(1, 2, 0, 3_000_000, &[])];
    let r = run(&recs, &topo, &ideal());
    let (w1, w2) = (wire(1_000_000) as f64, wire(3_000_000) as f64);
    // both at B/2 until the short one is done (2·w1/B), then the long one alone
    assert_close(r.rows()[0].end_ns, 2.0 * w1 / B100, 1.0, "short flow");
    assert_close(r.rows()[1].end_ns, (w1 + w2) / B100, 1.0, "long flow");
}

/// Paths given by hand, so a test controls exactly which channels each flow crosses.
struct FixedPaths(HashMap<(u32, u32), Vec<Channel>>);
impl PathSource for FixedPaths {
    fn path(&self, s: NodeId, d: NodeId, _key: u64) -> Result<Vec<Channel>, String> {
        self.0
            .get(&(s.0, d.0))
            .cloned()
            .ok_or_else(|| format!("no fixed path {s}->{d}"))
    }
}

#[test]
fn max_min_with_two_bottlenecks_gives_the_classic_allocation() {
    // Two links L0, L1 of 10 Gb/s. A crosses L0; B crosses L0 and L1; C and D cross L1.
    // Max-min: B, C, D get 1/3 of L1 each; A gets the rest of L0, 2/3.
    let rate = BitsPerSec(10_000_000_000);
    let mut kinds = vec![NodeKind::Host; 8];
    kinds[7] = NodeKind::Switch;
    let links = vec![
        Link {
            a: NodeId(7),
            b: NodeId(0),
            rate,
            delay: Nanos(0),
            error_rate: 0.0,
            kind: LinkKind::Fabric,
        },
        Link {
            a: NodeId(7),
            b: NodeId(1),
            rate,
            delay: Nanos(0),
            error_rate: 0.0,
            kind: LinkKind::Fabric,
        },
    ];
    let topo = Topology {
        kinds,
        links,
        gpus: vec![],
        gpus_per_server: 1,
        nvlink_rate: None,
        source: "two".into(),
        fabric: Default::default(),
    };
    let l0 = Channel::of(LinkId(0), true);
    let l1 = Channel::of(LinkId(1), true);
    let paths = FixedPaths(HashMap::from([
        ((2, 0), vec![l0]),
        ((3, 1), vec![l0, l1]),
        ((4, 1), vec![l1]),
        ((5, 1), vec![l1]),
    ]));
    let w = 1_000_000u64;
    let recs = vec![
        net(0, 2, 0, w, &[]),
        net(1, 3, 1, w, &[]),
        net(2, 4, 1, w, &[]),
        net(3, 5, 1, w, &[]),
    ];
    let r = simulate(&recs, &topo, &paths, &ideal()).unwrap();
    let c = 1.25; // bytes per ns
    let ww = wire(w) as f64;
    assert_close(r.rows()[0].end_ns, ww / (2.0 / 3.0 * c), 1.0, "A at 2/3");
    for i in 1..4 {
        assert_close(r.rows()[i].end_ns, ww / (c / 3.0), 1.0, "B, C, D at 1/3");
    }
}

/// Ring all-reduce records: step k of rank i sends S/n to i+1 and depends on its own
/// step k−1 and on step k−1 of its predecessor (what it forwards).
fn ring_allreduce(n: u32, s: u64) -> Vec<FlowRecord> {
    let chunk = s.div_ceil(n as u64);
    let id = |step: u32, rank: u32| (step * n + rank) as u64;
    let mut v = Vec::new();
    for step in 0..2 * (n - 1) {
        for i in 0..n {
            let deps: Vec<u64> = if step == 0 {
                vec![]
            } else {
                vec![id(step - 1, i), id(step - 1, (i + n - 1) % n)]
            };
            v.push(net(id(step, i), i, (i + 1) % n, chunk, &deps));
        }
    }
    v
}

#[test]
fn ring_allreduce_on_a_nonblocking_network_takes_2_n_minus_1_over_n_s_over_b_plus_latency() {
    for n in [2u32, 4, 8] {
        let s = 64_000_000u64;
        let delay = 1000u64;
        let topo = star(n, G100, Nanos(delay));
        let r = run(&ring_allreduce(n, s), &topo, &ideal());
        let steps = 2 * (n as u64 - 1);
        let chunk = s.div_ceil(n as u64);
        // each step: S/n (with headers) at full NIC rate, then 2 hops of latency
        let want = steps as f64 * (wire(chunk) as f64 / B100 + 2.0 * delay as f64);
        assert_close(
            r.summary.iteration_time_ns,
            want,
            steps as f64,
            &format!("ring n={n}"),
        );
        // and that is 2(n-1)/n · S/B within the header overhead (4.8 %) plus latency terms
        let ideal =
            2.0 * (n as f64 - 1.0) / n as f64 * s as f64 / B100 + (steps * 2 * delay) as f64;
        let err = (r.summary.iteration_time_ns as f64 - ideal) / ideal;
        assert!(err > 0.0 && err < 0.05, "n={n}: {err}");
    }
}

/// One aggregation on the switch of a star: an up edge per worker, a down edge per worker.
fn ina_allreduce(
    agg: u64,
    first_id: u64,
    workers: &[u32],
    sw: u32,
    s: u64,
    class: Class,
    deps: &[u64],
) -> Vec<FlowRecord> {
    let mut v = Vec::new();
    let fanin = workers.len() as u32;
    for (k, &w) in workers.iter().enumerate() {
        let mut r = rec(first_id + k as u64, w, sw, s, deps, 0, Mode::Ina, class);
        r.agg = Some(AggTag {
            id: agg,
            switch: NodeId(sw),
            fanin,
            dir: AggDir::Up,
            group: AggGroup::Dense,
        });
        v.push(r);
    }
    for (k, &w) in workers.iter().enumerate() {
        let ups: Vec<u64> = (0..workers.len() as u64).map(|j| first_id + j).collect();
        let mut r = rec(
            first_id + (workers.len() + k) as u64,
            sw,
            w,
            s,
            &ups,
            0,
            Mode::Ina,
            class,
        );
        r.agg = Some(AggTag {
            id: agg,
            switch: NodeId(sw),
            fanin,
            dir: AggDir::Down,
            group: AggGroup::Dense,
        });
        v.push(r);
    }
    v
}

fn ina_opts(slots: u32, window: u32, policy: InaPolicy) -> ReplayOptions {
    ReplayOptions {
        ina: InaConfig {
            slots,
            payload: Bytes(1000),
            window,
            policy: Some(policy),
            classes: vec![Class::Tp, Class::Dp],
            ..InaConfig::default()
        },
        ..ideal()
    }
}

#[test]
fn ina_on_one_switch_takes_s_over_b_plus_latency_when_the_window_suffices() {
    let topo = star(4, G100, Nanos(1000));
    let s = 10_000_000;
    let recs = ina_allreduce(1, 0, &[0, 1, 2, 3], 4, s, Class::Dp, &[]);
    let r = run(&recs, &topo, &ina_opts(8192, 256, InaPolicy::BestEffort));
    // window: 256 × 1000 B / 2 µs = 128 B/ns ≫ 12.5 B/ns, so the NIC binds
    let want = wire(s) as f64 / B100 + 2000.0;
    for row in &r.rows() {
        assert_close(row.end_ns, want, 1.0, "ina edge");
        assert_eq!(row.start_ns, 0);
    }
    assert_eq!(r.summary.ina_slot_peak, 256);
    assert_eq!(r.ina_fallbacks, 0);
    // a ring all-reduce of the same S on the same network is slower: INA moves S each way, ring 2S(n-1)/n
    let ring = run(&ring_allreduce(4, s), &topo, &ideal());
    assert!(r.summary.iteration_time_ns < ring.summary.iteration_time_ns);
}

#[test]
fn ina_with_a_small_window_is_limited_to_window_times_its_packets_wire_bytes_over_rtt() {
    let topo = star(4, G100, Nanos(1000));
    let s = 1_000_000;
    let recs = ina_allreduce(1, 0, &[0, 1, 2, 3], 4, s, Class::Dp, &[]);
    let r = run(&recs, &topo, &ina_opts(8192, 4, InaPolicy::BestEffort));
    // 4 packets of 1000 + 48 wire bytes in flight (SwitchML's window·payload/RTT, counted
    // on the wire); a round trip is 2 × 1000 ns of propagation plus the packet's
    // store-and-forward at each of its 2 hops, 2 × 1048 B / 12.5 B/ns = 167.68 ns (168 up
    // to the ns): 2168 ns. 1000 packets, 4 a round: the last result is back after 250
    // round trips.
    let want = 250.0 * 2168.0;
    assert_close(r.summary.iteration_time_ns, want, 1.0, "window 4");
    assert_eq!(r.summary.ina_slot_peak, 4);
}

#[test]
fn a_pool_smaller_than_one_window_grants_the_pool_and_limits_the_packets_in_flight() {
    // w = min(window 256, 1000 packets, pool 4) = 4, as in the glue: the stream holds the
    // whole pool and keeps 4 packets in flight per round trip of 2000 ns propagation plus
    // 2 hops × 1048 B / 12.5 B/ns of store-and-forward (168 ns rounded up), 1000 / 4
    // rounds; under `static` the pool is split between TP and DP, so DP's share is 2
    // slots
    let topo = star(4, G100, Nanos(1000));
    let s = 1_000_000;
    let recs = ina_allreduce(1, 0, &[0, 1, 2, 3], 4, s, Class::Dp, &[]);
    for (policy, w) in [
        (InaPolicy::BestEffort, 4u32),
        (InaPolicy::Priority, 4),
        (InaPolicy::Static, 2),
    ] {
        let r = run(&recs, &topo, &ina_opts(4, 256, policy));
        assert_eq!(r.ina_fallbacks, 0, "{policy:?}");
        assert_eq!(r.summary.ina_slot_peak, w as u64, "{policy:?}");
        let want = (1000 / w) as f64 * 2168.0;
        assert_close(
            r.summary.iteration_time_ns,
            want,
            1.0,
            &format!("{policy:?}"),
        );
    }
}

#[test]
fn best_effort_without_free_slots_falls_back_to_the_host_ring() {
    let topo = star(4, G100, Nanos(1000));
    let s = 8_000_000;
    // two aggregations at once; the pool holds one window
    let mut recs = ina_allreduce(1, 0, &[0, 1], 4, s, Class::Dp, &[]);
    recs.extend(ina_allreduce(2, 100, &[2, 3], 4, s, Class::Dp, &[]));
    let r = run(&recs, &topo, &ina_opts(256, 256, InaPolicy::BestEffort));
    assert_eq!(r.ina_fallbacks, 1);
    let e = ends(&r);
    // the first is INA at line rate; the second a 2-rank ring: 2 steps of S/2 each way,
    // its two flows on disjoint NIC channels from the INA one (hosts 2, 3)
    assert_close(
        e[&0].1,
        wire(s) as f64 / B100 + 2000.0,
        1.0,
        "INA aggregation",
    );
    let ring_t = 2.0 * wire(s / 2) as f64 / B100 + 2.0 * 2000.0;
    assert_close(e[&100].1, ring_t, 2.0, "fallback ring");
}

#[test]
fn priority_policy_queues_and_serves_tp_before_dp() {
    let topo = star(6, G100, Nanos(1000));
    let s = 1_000_000;
    // 0: DP aggregation holding the whole pool; then a DP and a TP aggregation arrive and wait
    let mut recs = ina_allreduce(1, 0, &[0, 1], 6, s, Class::Dp, &[]);
    recs.push(compute(50, 2, 10, &[]));
    recs.extend(ina_allreduce(2, 100, &[2, 3], 6, s, Class::Dp, &[50]));
    recs.extend(ina_allreduce(3, 200, &[4, 5], 6, s, Class::Tp, &[50]));
    let r = run(&recs, &topo, &ina_opts(256, 256, InaPolicy::Priority));
    let e = ends(&r);
    let one = (wire(s) as f64 / B100 + 2000.0).ceil() as u64;
    assert_close(e[&0].1, one as f64, 1.0, "first");
    assert_eq!(e[&200].0, e[&0].1, "TP starts as soon as the pool frees");
    assert_eq!(e[&100].0, e[&200].1, "DP waits for TP");
    assert_eq!(r.ina_fallbacks, 0);
    assert_eq!(r.summary.ina_slot_peak, 256);
    // the waiting shows on the critical path, charged to the waiting classes
    // (the DP aggregation ends last; from its dep, the 10 ns compute, everything is DP time)
    assert_eq!(r.summary.exposed_dp_ns, e[&100].1 - 10);
    assert_eq!(r.summary.exposed_tp_ns, 0);
    assert_eq!(r.summary.critical_path_compute_ns, 10);
}

#[test]
fn static_policy_partitions_slots_among_enabled_classes() {
    let topo = star(4, G100, Nanos(1000));
    let s = 1_000_000;
    let mut recs = ina_allreduce(1, 0, &[0, 1], 4, s, Class::Dp, &[]);
    recs.extend(ina_allreduce(2, 100, &[2, 3], 4, s, Class::Tp, &[]));
    // 512 slots, 2 classes: 256 each, so both run at once with a full window
    let r = run(&recs, &topo, &ina_opts(512, 256, InaPolicy::Static));
    let e = ends(&r);
    assert_eq!(e[&0], e[&100]);
    assert_eq!(r.summary.ina_slot_peak, 512);
    // PP has no share: a PP aggregation falls back to the ring
    let pp = ina_allreduce(3, 0, &[0, 1], 4, s, Class::Pp, &[]);
    assert_eq!(
        run(&pp, &topo, &ina_opts(512, 256, InaPolicy::Static)).ina_fallbacks,
        1
    );
}

/// The switch's samples as (time, slots in use).
fn occupancy(r: &ina3d::replay::ReplayResult) -> Vec<(u64, u32)> {
    r.slots
        .iter()
        .map(|s| (s.time_ns, s.slots_in_use))
        .collect()
}

/// Wire time of an INA stream of `s` bytes (1000 B slots) at 100 Gb/s, rounded up.
fn ina_tx(s: u64) -> u64 {
    (ina_wire(s, 1000) as f64 / B100).ceil() as u64
}

#[test]
fn one_aggregation_holds_w_slots_from_its_first_packet_until_its_last_result_leaves() {
    // star, 1 µs links: the first packet reaches the switch 1 µs after the start; the
    // last byte leaves the workers at T = wire/rate, reaches the switch at T + 1 µs, and
    // the switch multicasts the last result then; the edges end at T + 2 µs.
    let topo = star(4, G100, Nanos(1000));
    let s = 1_000_000;
    let recs = ina_allreduce(1, 0, &[0, 1, 2, 3], 4, s, Class::Dp, &[]);
    let r = run(&recs, &topo, &ina_opts(8192, 100, InaPolicy::BestEffort));
    let t = ina_tx(s); // 1,048,000 B / 12.5 B/ns = 83,840 ns
    assert_eq!(t, 83_840);
    // w = min(window 100, 1000 packets) = 100
    assert_eq!(occupancy(&r), vec![(1000, 100), (t + 1000, 0)]);
    assert_eq!(ends(&r)[&0].1, t + 2000);
    let per = ina3d::fct::switch_slots(&r.slots);
    assert_eq!(per.len(), 1);
    assert_eq!(per[0].switch, NodeId(4));
    assert_eq!(per[0].peak, 100);
    assert_eq!(per[0].slot_time, 100 * t);
}

#[test]
fn a_stream_shorter_than_the_window_holds_one_slot_per_packet() {
    let topo = star(4, G100, Nanos(1000));
    // 50,500 B = 51 packets of 1000 B < window 256
    let recs = ina_allreduce(1, 0, &[0, 1], 4, 50_500, Class::Dp, &[]);
    let r = run(&recs, &topo, &ina_opts(8192, 256, InaPolicy::BestEffort));
    assert_eq!(r.summary.ina_slot_peak, 51);
    let t = ina_tx(50_500);
    assert_eq!(occupancy(&r), vec![(1000, 51), (t + 1000, 0)]);
}

#[test]
fn two_overlapping_aggregations_add_up_on_their_shared_switch() {
    let topo = star(4, G100, Nanos(1000));
    let mut recs = ina_allreduce(1, 0, &[0, 1], 4, 1_000_000, Class::Dp, &[]);
    recs.push(compute(50, 2, 5_000, &[]));
    recs.extend(ina_allreduce(
        2,
        100,
        &[2, 3],
        4,
        1_000_000,
        Class::Dp,
        &[50],
    ));
    let r = run(&recs, &topo, &ina_opts(8192, 100, InaPolicy::BestEffort));
    let e = ends(&r);
    assert_eq!(e[&100].0, 5_000);
    // disjoint NICs: both stream at line rate, each for T
    let t = ina_tx(1_000_000);
    assert_eq!(
        occupancy(&r),
        vec![
            (1000, 100),
            (6000, 200),
            (t + 1000, 100),
            (5000 + t + 1000, 0)
        ]
    );
    assert!(r.slots.iter().all(|s| s.switch == NodeId(4)));
    assert_eq!(r.summary.ina_slot_peak, 200);
    let per = ina3d::fct::switch_slots(&r.slots);
    assert_eq!(per[0].slot_time, 2 * 100 * t);
}

#[test]
fn best_effort_refuses_an_aggregation_whose_w_slots_are_not_all_free() {
    // pool 150: the first takes w = 100, the second wants 100 with 50 free and falls back
    // (no partial grant)
    let topo = star(4, G100, Nanos(1000));
    let mut recs = ina_allreduce(1, 0, &[0, 1], 4, 1_000_000, Class::Dp, &[]);
    recs.push(compute(50, 2, 5_000, &[]));
    recs.extend(ina_allreduce(
        2,
        100,
        &[2, 3],
        4,
        1_000_000,
        Class::Dp,
        &[50],
    ));
    let r = run(&recs, &topo, &ina_opts(150, 100, InaPolicy::BestEffort));
    assert_eq!(r.ina_fallbacks, 1);
    let t = ina_tx(1_000_000);
    assert_eq!(occupancy(&r), vec![(1000, 100), (t + 1000, 0)]);
    // the fallback: a 2-rank ring, 2 steps of S/2 each way, from 5 µs
    let ring_t = 2.0 * wire(1_000_000 / 2) as f64 / B100 + 2.0 * 2000.0;
    assert_close(ends(&r)[&100].1, 5000.0 + ring_t, 2.0, "fallback ring");
}

#[test]
fn a_waiting_aggregation_starts_when_the_reservation_ends() {
    // priority, pool = one window: the second aggregation (ready at 5 µs) waits for the
    // first to end at T + 2 µs. Physically the switch frees the slots at T + 1 µs and the
    // second's first packet needs 1 µs to arrive, so a per-switch admission could have
    // started it 2 µs (one tree latency) earlier: the documented bound, reached.
    let topo = star(4, G100, Nanos(1000));
    let mut recs = ina_allreduce(1, 0, &[0, 1], 4, 1_000_000, Class::Dp, &[]);
    recs.push(compute(50, 2, 5_000, &[]));
    recs.extend(ina_allreduce(
        2,
        100,
        &[2, 3],
        4,
        1_000_000,
        Class::Dp,
        &[50],
    ));
    let r = run(&recs, &topo, &ina_opts(100, 100, InaPolicy::Priority));
    let t = ina_tx(1_000_000);
    let e = ends(&r);
    assert_eq!(e[&0].1, t + 2000);
    assert_eq!(e[&100].0, t + 2000);
    let second_acquires = e[&100].0 + 1000;
    assert_eq!(
        occupancy(&r),
        vec![
            (1000, 100),
            (t + 1000, 0),
            (second_acquires, 100),
            (second_acquires + t, 0)
        ]
    );
    assert_eq!(second_acquires - (t + 1000), 2000, "one tree latency");
    assert_eq!(r.ina_fallbacks, 0);
}

#[test]
fn ties_between_asks_go_to_the_lower_aggregation_id_not_the_one_written_first() {
    // A pool of one window (100 slots, 100-packet windows): one aggregation at a time on
    // the star's switch. Aggregation 9 is written before aggregation 7; they ask at the
    // same nanosecond, so the tie goes by id (docs/model.md#slot-policies; the glue's
    // InaSlotAdmission answers an instant's asks and orders equal arrivals by id).
    let topo = star(6, G100, Nanos(1000));
    let s = 1_000_000;
    // the whole unit: T on the wire plus 1 µs up and 1 µs down
    let unit = ina_tx(s) + 2000;
    let first = |e: &HashMap<u64, (u64, u64)>, ids: std::ops::Range<u64>| {
        ids.map(|i| e[&i].0).min().unwrap()
    };
    // both ready at 0 with the switch free: 7 is granted at once, 9 waits for it
    let mut recs = ina_allreduce(9, 100, &[0, 1], 6, s, Class::Dp, &[]);
    recs.extend(ina_allreduce(7, 200, &[2, 3], 6, s, Class::Dp, &[]));
    let e = ends(&run(&recs, &topo, &ina_opts(100, 100, InaPolicy::Priority)));
    assert_eq!(first(&e, 200..204), 0, "aggregation 7 first");
    assert_eq!(
        first(&e, 100..104),
        unit,
        "aggregation 9 after 7's reservation"
    );
    // both ask at 5 µs while aggregation 5 holds the pool: same arrival, so when 5 ends
    // the queue serves 7, then 9
    let mut recs = ina_allreduce(5, 0, &[4, 5], 6, s, Class::Dp, &[]);
    recs.push(compute(50, 0, 5_000, &[]));
    recs.extend(ina_allreduce(9, 100, &[0, 1], 6, s, Class::Dp, &[50]));
    recs.extend(ina_allreduce(7, 200, &[2, 3], 6, s, Class::Dp, &[50]));
    let e = ends(&run(&recs, &topo, &ina_opts(100, 100, InaPolicy::Priority)));
    assert_eq!(first(&e, 200..204), unit, "aggregation 7 when 5 ends");
    assert_eq!(first(&e, 100..104), 2 * unit, "aggregation 9 when 7 ends");
}

/// Hosts 0, 1 under leaf 4 and hosts 2, 3 under leaf 5 (1 µs host links), both leaves
/// under spine 6 (0.5 µs links), 100 Gb/s everywhere.
fn two_level() -> Topology {
    let mut kinds = vec![NodeKind::Host; 4];
    kinds.extend([NodeKind::Switch; 3]);
    let link = |a: u32, b: u32, d: u64| Link {
        a: NodeId(a),
        b: NodeId(b),
        rate: G100,
        delay: Nanos(d),
        error_rate: 0.0,
        kind: LinkKind::Nic,
    };
    Topology {
        kinds,
        links: vec![
            link(0, 4, 1000),
            link(1, 4, 1000),
            link(2, 5, 1000),
            link(3, 5, 1000),
            link(4, 6, 500),
            link(5, 6, 500),
        ],
        gpus: (0..4).map(NodeId).collect(),
        gpus_per_server: 1,
        nvlink_rate: None,
        source: "two-level".into(),
        fabric: Default::default(),
    }
}

#[test]
fn each_switch_of_a_two_level_tree_holds_slots_by_its_own_chain() {
    // up: hosts → leaves (1 µs), leaves → spine (0.5 µs); down mirrored. Leaves aggregate
    // their two hosts, the spine the two leaves.
    let topo = two_level();
    let s = 1_000_000;
    let mut recs = Vec::new();
    let tag = |sw: u32, fanin: u32, dir: AggDir| AggTag {
        id: 9,
        switch: NodeId(sw),
        fanin,
        dir,
        group: AggGroup::Dense,
    };
    let mut edge = |id: u64, src: u32, dst: u32, deps: &[u64], t: AggTag| {
        let mut r = rec(id, src, dst, s, deps, 0, Mode::Ina, Class::Dp);
        r.agg = Some(t);
        recs.push(r);
    };
    for h in 0..4u32 {
        edge(h as u64, h, 4 + h / 2, &[], tag(4 + h / 2, 2, AggDir::Up));
    }
    edge(4, 4, 6, &[0, 1], tag(6, 2, AggDir::Up));
    edge(5, 5, 6, &[2, 3], tag(6, 2, AggDir::Up));
    edge(6, 6, 4, &[4, 5], tag(6, 2, AggDir::Down));
    edge(7, 6, 5, &[4, 5], tag(6, 2, AggDir::Down));
    for h in 0..4u32 {
        let parent = 4 + h / 2;
        edge(
            8 + h as u64,
            parent,
            h,
            &[6 + h as u64 / 2],
            tag(parent, 2, AggDir::Down),
        );
    }
    let r = run(&recs, &topo, &ina_opts(8192, 100, InaPolicy::BestEffort));
    let t = ina_tx(s);
    // unit end: T + up 1.5 µs + down 1.5 µs
    assert_eq!(ends(&r)[&0].1, t + 3000);
    let at = |sw: u32| -> Vec<(u64, u32)> {
        r.slots
            .iter()
            .filter(|x| x.switch == NodeId(sw))
            .map(|x| (x.time_ns, x.slots_in_use))
            .collect()
    };
    // leaves: first packet at 1 µs; the last result leaves them at T + 1.5 + 0.5 µs
    assert_eq!(at(4), vec![(1000, 100), (t + 2000, 0)]);
    assert_eq!(at(5), vec![(1000, 100), (t + 2000, 0)]);
    // spine: first packet at 1.5 µs; it multicasts the last result at T + 1.5 µs
    assert_eq!(at(6), vec![(1500, 100), (t + 1500, 0)]);
    let per = ina3d::fct::switch_slots(&r.slots);
    let times: Vec<u64> = per.iter().map(|p| p.slot_time).collect();
    assert_eq!(times, vec![100 * (t + 1000), 100 * (t + 1000), 100 * t]);
}

/// A pseudo-random DAG on a star: compute and flows, gaps, shared receivers.
fn random_dag(n_hosts: u32, n: u64, seed: u64) -> Vec<FlowRecord> {
    let mut x = seed;
    let mut next = move || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        x >> 33
    };
    let mut v = Vec::new();
    for id in 0..n {
        let k = next() % 3;
        let deps: Vec<u64> = (0..k)
            .filter(|_| id > 0)
            .map(|_| next() % id)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let a = (next() % n_hosts as u64) as u32;
        let mut b = (next() % n_hosts as u64) as u32;
        if b == a {
            b = (a + 1) % n_hosts;
        }
        let mut r = if next() % 3 == 0 {
            compute(id, a, 1000 + next() % 50_000, &deps)
        } else {
            net(id, a, b, 1 + next() % 3_000_000, &deps)
        };
        r.gap = Nanos(next() % 10_000);
        v.push(r);
    }
    v
}

#[test]
fn no_record_starts_before_its_deps_end_plus_gap() {
    let topo = star(8, G100, Nanos(700));
    let recs = random_dag(8, 2000, 42);
    let r = run(&recs, &topo, &ideal());
    let e = ends(&r);
    let rows = r.rows();
    for rec in &recs {
        let ready = rec.deps.iter().map(|d| e[&d.0].1).max().unwrap_or(0);
        let (s, end) = e[&rec.id.0];
        assert_eq!(
            s,
            ready + rec.gap.0,
            "record {} starts exactly at ready + gap",
            rec.id
        );
        assert!(end >= s + rows[rec.id.0 as usize].standalone_fct_ns.min(end - s));
        assert!(
            end - s >= rows[rec.id.0 as usize].standalone_fct_ns.saturating_sub(1),
            "record {} beat its standalone time",
            rec.id
        );
    }
}

#[test]
fn bytes_are_conserved_on_every_channel() {
    let topo = star(8, G100, Nanos(700));
    let recs = random_dag(8, 1000, 7);
    let r = run(&recs, &topo, &ideal());
    // on a star every flow crosses exactly its sender's uplink and its receiver's downlink
    let mut want: HashMap<(u32, u32), u64> = HashMap::new();
    for rec in recs.iter().filter(|r| r.mode == Mode::Net) {
        *want.entry((rec.src.0, 8)).or_default() += wire(rec.bytes.0);
        *want.entry((8, rec.dst.0)).or_default() += wire(rec.bytes.0);
    }
    let got: HashMap<(u32, u32), u64> = r
        .channels
        .iter()
        .map(|c| ((c.from.0, c.to.0), c.bytes))
        .collect();
    assert_eq!(got, want);
    assert!(r
        .channels
        .iter()
        .all(|c| c.utilisation > 0.0 && c.utilisation <= 1.0 + 1e-9));
}

#[test]
fn the_same_input_gives_byte_identical_files() {
    let topo = star(8, G100, Nanos(700));
    let mut recs = random_dag(8, 1500, 3);
    recs.extend(ina_allreduce(
        9,
        10_000,
        &[0, 1, 2, 3],
        8,
        2_000_000,
        Class::Dp,
        &[1499],
    ));
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    for d in &dirs {
        let mut r = run(&recs, &topo, &ina_opts(300, 256, InaPolicy::BestEffort));
        r.summary.wall_time_ns = 0; // the only field that measures the machine, not the model
        ina3d::replay::write_outputs(d.path(), &r).unwrap();
    }
    for f in [
        "fct.csv",
        "fct.txt",
        "summary.csv",
        "links.csv",
        "switches.csv",
    ] {
        let a = std::fs::read(dirs[0].path().join(f)).unwrap();
        let b = std::fs::read(dirs[1].path().join(f)).unwrap();
        assert!(!a.is_empty(), "{f} is empty");
        assert_eq!(a, b, "{f} differs between two runs");
    }
    // and the written fct.csv reads back as the rows
    let rows = ina3d::formats::fct_csv::read(&dirs[0].path().join("fct.csv")).unwrap();
    assert_eq!(rows.len(), recs.len());
}

#[test]
fn the_summary_critical_path_adds_up_to_the_iteration_time() {
    let topo = star(8, G100, Nanos(700));
    let recs = random_dag(8, 3000, 11);
    let s = run(&recs, &topo, &ideal()).summary;
    assert_eq!(
        s.critical_path_compute_ns
            + s.exposed_tp_ns
            + s.exposed_pp_ns
            + s.exposed_dp_ns
            + s.exposed_emb_ns,
        s.iteration_time_ns
    );
    assert!(s.exposed_dp_ns > 0 && s.critical_path_compute_ns > 0);
}

#[test]
fn a_dependency_cycle_is_an_error_before_simulation() {
    let topo = star(2, G100, Nanos(0));
    let recs = vec![
        net(0, 0, 1, 10, &[2]),
        net(1, 0, 1, 10, &[0]),
        net(2, 0, 1, 10, &[1]),
        net(3, 0, 1, 10, &[]),
    ];
    let e = simulate(&recs, &topo, &Routing::new(&topo, 0).unwrap(), &ideal()).unwrap_err();
    assert!(matches!(e, ReplayError::Cycle(_, 3)), "{e}");
    assert!(e.to_string().contains("cycle"));
}

#[test]
fn a_cycle_through_an_aggregation_is_an_error() {
    let topo = star(2, G100, Nanos(0));
    // the aggregation's up edge waits for a flow that waits for its down edge
    let mut recs = ina_allreduce(1, 0, &[0, 1], 2, 100, Class::Dp, &[]);
    recs.push(net(9, 0, 1, 10, &[2]));
    recs[0].deps.push(FlowId(9));
    let e = simulate(&recs, &topo, &Routing::new(&topo, 0).unwrap(), &ideal()).unwrap_err();
    assert!(matches!(e, ReplayError::Cycle(..)), "{e}");
}

#[test]
fn a_dangling_dep_names_the_record_and_the_dep() {
    let topo = star(2, G100, Nanos(0));
    let e = simulate(
        &[net(5, 0, 1, 10, &[77])],
        &topo,
        &Routing::new(&topo, 0).unwrap(),
        &ideal(),
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "record 5: dep 77 is not in the trace");
}

#[test]
fn a_flow_without_route_is_an_error() {
    // The router refuses a topology with an unreachable host before anything runs...
    let mut cut = star(2, G100, Nanos(0));
    cut.kinds.push(NodeKind::Host); // node 3, connected to nothing
    let e = Routing::new(&cut, 0).unwrap_err().to_string();
    assert!(e.contains("host 3 has no network link"), "{e}");
    // ...and a path source that has no route for a record makes the replay an error.
    let topo = star(2, G100, Nanos(0));
    let e = simulate(
        &[net(0, 0, 1, 10, &[])],
        &topo,
        &FixedPaths(HashMap::new()),
        &ideal(),
    )
    .unwrap_err();
    assert!(matches!(e, ReplayError::NoRoute { .. }), "{e}");
    let e = simulate(
        &[net(0, 0, 9, 10, &[])],
        &topo,
        &Routing::new(&topo, 0).unwrap(),
        &ideal(),
    )
    .unwrap_err();
    assert!(matches!(e, ReplayError::UnknownNode { .. }), "{e}");
}

#[test]
fn a_zero_capacity_link_on_a_path_is_an_error() {
    let mut topo = star(2, G100, Nanos(0));
    // the router refuses a zero-rate link outright...
    let mut zero = topo.clone();
    zero.links[1].rate = BitsPerSec(0);
    assert!(matches!(
        Routing::new(&zero, 0),
        Err(ina3d::topology::TopologyError::ZeroRate { link: 1, .. })
    ));
    // ...and the replayer refuses a path (from any source) that crosses one.
    let path = Routing::new(&topo, 0)
        .unwrap()
        .connection_path(NodeId(0), NodeId(1))
        .unwrap();
    topo.links[1].rate = BitsPerSec(0);
    let e = simulate(
        &[net(0, 0, 1, 10, &[])],
        &topo,
        &FixedPaths(HashMap::from([((0, 1), path)])),
        &ideal(),
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            ReplayError::ZeroCapacity {
                link: LinkId(1),
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn duplicate_ids_are_an_error() {
    let topo = star(2, G100, Nanos(0));
    let e = simulate(
        &[net(0, 0, 1, 10, &[]), net(0, 1, 0, 10, &[])],
        &topo,
        &Routing::new(&topo, 0).unwrap(),
        &ideal(),
    )
    .unwrap_err();
    assert!(matches!(e, ReplayError::DuplicateId(FlowId(0))));
}

#[test]
fn compute_and_nvlink_records_are_timers() {
    let topo = star(2, G100, Nanos(0));
    let mut nv = rec(1, 0, 1, 5_000_000, &[0], 100, Mode::NvLink, Class::Tp);
    nv.dur = Nanos(3_000);
    let recs = vec![compute(0, 0, 1_000, &[]), nv];
    let r = run(&recs, &topo, &ideal());
    assert_eq!(ends(&r)[&1], (1_100, 4_100));
    assert!(
        r.channels.is_empty(),
        "NVLink records move nothing on the network"
    );
}

#[test]
fn the_cli_replays_a_trace_file_on_its_header_topology_and_rejects_a_different_one() {
    use ina3d::trace::TraceHeader;
    let dir = tempfile::tempdir().unwrap();
    let spec = "fat-tree:k=4";
    let topo = Topology::from_spec(spec).unwrap();
    let g = |r: usize| topo.gpus[r].0;
    let mut recs = vec![
        compute(0, g(0), 1_000, &[]),
        net(1, g(0), g(5), 4_000_000, &[0]),
        net(2, g(5), g(12), 1_000_000, &[1]),
    ];
    recs.extend(ina_allreduce_on(
        &topo,
        7,
        10,
        &[g(0), g(4), g(8), g(12)],
        1_000_000,
        &[2],
    ));
    let mut h = TraceHeader::new();
    h.set("topology", spec)
        .set("seed", 3)
        .set("ina_policy", "priority")
        .set("ina_slots_per_switch", 512);
    let trace = dir.path().join("t.csv.gz");
    ina3d::trace::write(&trace, &h, &recs).unwrap();
    let out = dir.path().join("out");
    let bin = env!("CARGO_BIN_EXE_ina3d");
    let st = std::process::Command::new(bin)
        .arg("replay")
        .arg(&trace)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    for f in [
        "fct.csv",
        "fct.txt",
        "summary.csv",
        "links.csv",
        "switches.csv",
    ] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    let s = ina3d::formats::summary_csv::read(&out.join("summary.csv")).unwrap();
    assert_eq!(s.records, recs.len() as u64);
    assert_eq!(s.backend, "replay");
    assert!(s.ina_slot_peak > 0 && s.ina_slot_peak <= 512);
    let rows = ina3d::formats::fct_csv::read(&out.join("fct.csv")).unwrap();
    assert_eq!(
        rows.iter().map(|r| r.end_ns).max(),
        Some(s.iteration_time_ns)
    );
    // an explicit topology that is not the trace's is refused, naming both
    let st = std::process::Command::new(bin)
        .args([
            "replay",
            trace.to_str().unwrap(),
            "--topology",
            "fat-tree:k=6",
            "-o",
        ])
        .arg(dir.path().join("o2"))
        .output()
        .unwrap();
    assert!(!st.status.success());
    let err = String::from_utf8_lossy(&st.stderr);
    assert!(
        err.contains("fat-tree:k=6") && err.contains("fat-tree:k=4"),
        "{err}"
    );
    assert!(!dir.path().join("o2").join("fct.csv").exists());
}

/// An aggregation on the tree the shared routing builds for `members`.
fn ina_allreduce_on(
    topo: &Topology,
    agg: u64,
    first_id: u64,
    members: &[u32],
    s: u64,
    deps: &[u64],
) -> Vec<FlowRecord> {
    let routing = ina3d::topology::Routing::new(topo, 3).unwrap();
    let ms: Vec<NodeId> = members.iter().map(|&m| NodeId(m)).collect();
    let tree = routing.aggregation_tree(&ms, &|_| true, agg).unwrap();
    let mut v = Vec::new();
    let mut id = first_id;
    let mut ups = Vec::new();
    for e in &tree.edges {
        let mut r = rec(id, e.child.0, e.parent.0, s, deps, 0, Mode::Ina, Class::Dp);
        r.agg = Some(AggTag {
            id: agg,
            switch: e.parent,
            fanin: e.fanin_at_parent,
            dir: AggDir::Up,
            group: AggGroup::Dense,
        });
        ups.push(id);
        v.push(r);
        id += 1;
    }
    for e in &tree.edges {
        let mut r = rec(id, e.parent.0, e.child.0, s, &ups, 0, Mode::Ina, Class::Dp);
        r.agg = Some(AggTag {
            id: agg,
            switch: e.parent,
            fanin: e.fanin_at_parent,
            dir: AggDir::Down,
            group: AggGroup::Dense,
        });
        v.push(r);
        id += 1;
    }
    v
}

#[test]
fn a_multi_level_aggregation_alone_takes_s_over_b_plus_the_up_and_down_tree_latency() {
    let topo = Topology::from_spec("fat-tree:k=4").unwrap();
    let routing = ina3d::topology::Routing::new(&topo, 3).unwrap();
    // members in different pods: the root is a core switch, the tree has three levels
    let members: Vec<u32> = [0usize, 5, 9, 13].iter().map(|&r| topo.gpus[r].0).collect();
    let recs = ina_allreduce_on(&topo, 1, 0, &members, 5_000_000, &[]);
    let ms: Vec<NodeId> = members.iter().map(|&m| NodeId(m)).collect();
    let tree = routing.aggregation_tree(&ms, &|_| true, 1).unwrap();
    assert!(tree.switches().len() >= 3, "a multi-level tree");
    // longest member-to-root chain of edge path delays
    let chain = |m: NodeId| {
        let (mut v, mut d) = (m, 0u64);
        while let Some(e) = tree.edges.iter().find(|e| e.child == v) {
            d += routing.path_delay(&e.path).0;
            v = e.parent;
        }
        d
    };
    let depth = ms.iter().map(|&m| chain(m)).max().unwrap();
    let rate = routing.bottleneck(&tree.edges[0].path).0 as f64 / 8e9;
    // SwitchML's 1,024 B slots: a 256-packet window (262 KB in flight) covers the
    // 100 Gb/s × ~12 µs tree RTT, so the line rate, not the window, limits the unit.
    let r = simulate(&recs, &topo, &routing, &wide_window()).unwrap();
    let want = ina_wire(5_000_000, 1024) as f64 / rate + 2.0 * depth as f64;
    for row in &r.rows() {
        assert_close(row.end_ns, want, 1.0, "multi-level INA");
        assert_eq!(row.fct_ns, row.standalone_fct_ns);
    }
    // every aggregating switch of the tree held the window
    let held: std::collections::BTreeSet<NodeId> = r
        .slots
        .iter()
        .filter(|s| s.slots_in_use > 0)
        .map(|s| s.switch)
        .collect();
    assert_eq!(held, tree.switches().into_iter().collect());
}

#[test]
fn the_trace_header_sets_the_ina_configuration_and_bad_values_name_their_key() {
    use ina3d::trace::TraceHeader;
    let mut h = TraceHeader::new();
    h.set("ina_slots_per_switch", 1024)
        .set("ina_payload_bytes", 256)
        .set("ina_window", 64);
    h.set("ina_policy", "static").set("ina_classes", "tp,dp");
    let o = ReplayOptions::from_header(&h).unwrap();
    assert_eq!(o.ina.slots, 1024);
    assert_eq!(o.ina.payload, Bytes(256));
    assert_eq!(
        o.payload,
        ina3d::record::NET_PACKET_PAYLOAD,
        "host transfers keep the network packet payload; only INA streams use the slot payload"
    );
    assert_eq!(o.ina.window, 64);
    assert_eq!(o.ina.policy(), InaPolicy::Static);
    assert_eq!(o.ina.classes, vec![Class::Tp, Class::Dp]);
    h.set("ina_policy", "lottery");
    let e = ReplayOptions::from_header(&h).unwrap_err().to_string();
    assert!(e.contains("ina_policy") && e.contains("lottery"), "{e}");
    h.set("ina_policy", "priority").set("ina_window", "-3");
    let e = ReplayOptions::from_header(&h).unwrap_err().to_string();
    assert!(e.contains("ina_window"), "{e}");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// Arbitrary small traces (forward and backward deps, cycles, unknown nodes, zero
    /// sizes) either replay with every dep respected or are refused: never a panic or hang.
    #[test]
    fn arbitrary_traces_replay_or_are_refused_but_never_panic(
        spec in proptest::collection::vec((0u32..7, 0u32..7, 0u64..200_000, 0u8..4, proptest::collection::vec(0u64..40, 0..3), 0u64..5000), 1..40)
    ) {
        let topo = star(5, G100, Nanos(100));
        let recs: Vec<FlowRecord> = spec.iter().enumerate().map(|(i, (a, b, bytes, m, deps, gap))| {
            let mut r = match m {
                0 => compute(i as u64, *a, *bytes % 10_000, deps),
                1 => { let mut r = rec(i as u64, *a, *b, *bytes, deps, 0, Mode::NvLink, Class::Tp); r.dur = Nanos(*bytes % 7_000); r }
                _ => net(i as u64, *a, *b, *bytes, deps),
            };
            r.gap = Nanos(*gap);
            r
        }).collect();
        match simulate(&recs, &topo, &Routing::new(&topo, 0).unwrap(), &ideal()) {
            Ok(r) => {
                let e = ends(&r);
                for rec in &recs {
                    let ready = rec.deps.iter().map(|d| e[&d.0].1).max().unwrap_or(0);
                    proptest::prop_assert_eq!(e[&rec.id.0].0, ready + rec.gap.0);
                }
            }
            Err(err) => proptest::prop_assert!(!err.to_string().is_empty()),
        }
    }
}

#[test]
fn priority_follows_the_order_of_the_enabled_classes() {
    let topo = star(6, G100, Nanos(1000));
    let s = 1_000_000;
    let mut recs = ina_allreduce(1, 0, &[0, 1], 6, s, Class::Dp, &[]);
    recs.push(compute(50, 2, 10, &[]));
    recs.extend(ina_allreduce(2, 100, &[2, 3], 6, s, Class::Dp, &[50]));
    recs.extend(ina_allreduce(3, 200, &[4, 5], 6, s, Class::Tp, &[50]));
    let mut o = ina_opts(256, 256, InaPolicy::Priority);
    o.ina.classes = vec![Class::Dp, Class::Tp];
    let e = ends(&run(&recs, &topo, &o));
    assert_eq!(e[&100].0, e[&0].1, "DP is listed first, so it goes first");
    assert_eq!(e[&200].0, e[&100].1);
}

#[test]
fn children_behind_a_non_aggregating_switch_share_its_uplink() {
    // hosts 0, 1 under switch 2 (not aggregating), switch 2 under the root switch 3
    let kinds = vec![
        NodeKind::Host,
        NodeKind::Host,
        NodeKind::Switch,
        NodeKind::Switch,
    ];
    let l = |a: u32, b: u32| Link {
        a: NodeId(a),
        b: NodeId(b),
        rate: G100,
        delay: Nanos(1000),
        error_rate: 0.0,
        kind: LinkKind::Fabric,
    };
    let topo = Topology {
        kinds,
        links: vec![l(0, 2), l(1, 2), l(2, 3)],
        gpus: vec![NodeId(0), NodeId(1)],
        gpus_per_server: 1,
        nvlink_rate: None,
        source: "two-level".into(),
        fabric: Default::default(),
    };
    let s = 2_000_000;
    let recs = ina_allreduce(1, 0, &[0, 1], 3, s, Class::Dp, &[]);
    let r = run(&recs, &topo, &wide_window());
    // two streams of S share 2->3 (and 3->2 on the way down): 2·S/B, plus 2 hops up and 2 down
    let want = 2.0 * ina_wire(s, 1024) as f64 / B100 + 4000.0;
    assert_close(r.summary.iteration_time_ns, want, 1.0, "shared uplink");
    assert_eq!(r.rows()[0].fct_ns, r.rows()[0].standalone_fct_ns);
    let up = r
        .channels
        .iter()
        .find(|c| c.from == NodeId(2) && c.to == NodeId(3))
        .unwrap();
    assert_eq!(up.bytes, 2 * ina_wire(s, 1024));
}

/// One path request: source, destination, ECMP key, the path returned.
type Asked = (NodeId, NodeId, u64, Vec<Channel>);

/// A [`PathSource`] that records every path the replayer asked for, with its key.
struct Recording<'a> {
    inner: &'a Routing,
    asked: std::cell::RefCell<Vec<Asked>>,
}
impl PathSource for Recording<'_> {
    fn path(&self, s: NodeId, d: NodeId, key: u64) -> Result<Vec<Channel>, String> {
        let p = PathSource::path(self.inner, s, d, key)?;
        self.asked.borrow_mut().push((s, d, key, p.clone()));
        Ok(p)
    }
}

/// Net records (a ring over all 16 GPUs, twice, with distinct ids) and a three-level INA
/// aggregation on a k=4 fat-tree, where most pairs have several equal-cost paths.
fn fat_tree_mix(topo: &Topology) -> Vec<FlowRecord> {
    let g: Vec<u32> = topo.gpus.iter().map(|n| n.0).collect();
    let mut recs = Vec::new();
    for round in 0..2u64 {
        for k in 0..g.len() {
            let id = round * 100 + k as u64;
            let deps: Vec<u64> = if round == 0 { vec![] } else { vec![k as u64] };
            recs.push(net(id, g[k], g[(k + 1) % g.len()], 65_536, &deps));
        }
    }
    recs.extend(ina_allreduce_on(
        topo,
        7,
        1000,
        &[g[0], g[5], g[9], g[13]],
        1 << 20,
        &[],
    ));
    recs
}

#[test]
fn every_net_and_ina_record_is_routed_by_its_src_dst_connection_not_its_record_id() {
    let topo = Topology::from_spec("fat-tree:k=4").unwrap();
    let routing = ina3d::topology::Routing::new(&topo, 11).unwrap();
    let rec = Recording {
        inner: &routing,
        asked: Default::default(),
    };
    let recs = fat_tree_mix(&topo);
    simulate(&recs, &topo, &rec, &ideal()).unwrap();
    let asked = rec.asked.into_inner();
    let connections: std::collections::BTreeSet<(NodeId, NodeId, u32)> = recs
        .iter()
        .filter(|r| r.src != r.dst)
        .map(|r| (r.src, r.dst, r.channel))
        .collect();
    // one routing per connection (the records of one connection share its path, asked
    // once), plus the 4 steps of the aggregation's fallback host ring
    assert_eq!(asked.len(), connections.len() + 4);
    let mut by_pair: HashMap<(NodeId, NodeId), Vec<Channel>> = HashMap::new();
    for (s, d, key, path) in asked {
        assert_eq!(
            key,
            ina3d::topology::pair_key(s, d),
            "record {s}->{d} keyed by its connection"
        );
        let first = by_pair.entry((s, d)).or_insert_with(|| path.clone());
        assert_eq!(*first, path, "both records {s}->{d} share one path");
    }
    let record_pairs: std::collections::BTreeSet<(NodeId, NodeId)> =
        recs.iter().map(|r| (r.src, r.dst)).collect();
    assert_eq!(
        record_pairs.len(),
        recs.len() - 16,
        "the second ring round reuses the first round's 16 connections"
    );
    assert!(record_pairs.iter().all(|p| by_pair.contains_key(p)));
}

#[test]
fn the_glues_routes_txt_gives_every_record_the_path_the_replayer_took_on_its_channel() {
    let topo = Topology::from_spec("fat-tree:k=4").unwrap();
    let seed = 11;
    let routing = ina3d::topology::Routing::new(&topo, seed).unwrap();
    let rec = Recording {
        inner: &routing,
        asked: Default::default(),
    };
    // the second ring round on NCCL channel 1: the same pairs, other connections
    let recs: Vec<FlowRecord> = fat_tree_mix(&topo)
        .into_iter()
        .map(|r| FlowRecord {
            channel: u32::from(r.mode == Mode::Net && r.id.0 >= 100),
            ..r
        })
        .collect();
    assert!(recs.iter().any(|r| r.channel == 1));
    simulate(&recs, &topo, &rec, &ideal()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let opts = ina3d::ns3::EmitOptions {
        seed,
        routing: Default::default(),
        ..Default::default()
    };
    let report = ina3d::ns3::emit(
        &recs,
        &ina3d::ns3::InaConfig::default(),
        &topo,
        &opts,
        dir.path(),
    )
    .unwrap();
    assert!(report.routes >= recs.len());
    let p = dir.path().join("routes.txt");
    let glue = ina3d::formats::routes_txt::parse(&p, &std::fs::read_to_string(&p).unwrap())
        .unwrap()
        .paths;
    let took: HashMap<(NodeId, NodeId, u64), Vec<Channel>> = rec
        .asked
        .into_inner()
        .into_iter()
        .map(|(s, d, key, p)| ((s, d, key), p))
        .collect();
    let mut multipath = 0;
    let mut channels_apart = 0;
    for r in &recs {
        let (s, d, c) = (r.src, r.dst, r.channel);
        let path = &took[&(s, d, ina3d::topology::connection_key(s, d, c))];
        let hops = glue
            .get(&(s, d, c))
            .unwrap_or_else(|| panic!("routes.txt lacks {s}->{d} channel {c}"));
        assert_eq!(
            hops.iter().map(|h| h.1).collect::<Vec<_>>(),
            path.iter().map(|c| c.link()).collect::<Vec<_>>(),
            "{s}->{d}"
        );
        // hops name the node each link leads to, ending at the destination
        let mut u = s;
        for &(v, l) in hops {
            let link = &topo.links[l.idx()];
            assert!(
                (link.a, link.b) == (u, v) || (link.b, link.a) == (u, v),
                "{s}->{d}: link {l} joins {u} and {v}"
            );
            u = v;
        }
        assert_eq!(u, d);
        // the reverse direction (TCP ACKs, CNPs, INA results) is routed too, on the
        // channel's own reverse connection path
        let back = glue
            .get(&(d, s, c))
            .unwrap_or_else(|| panic!("routes.txt lacks the reverse {d}->{s} channel {c}"));
        assert_eq!(
            back.iter().map(|h| h.1).collect::<Vec<_>>(),
            routing_path(&topo, &routing, d, s, c)
        );
        multipath += usize::from(path.len() >= 4);
        channels_apart += usize::from(c == 1 && glue[&(s, d, 0)] != *hops);
    }
    assert!(
        channels_apart > 0,
        "no channel-1 connection left its pair's channel-0 path"
    );
    assert!(multipath >= 16, "the check covers the ring steps that leave their edge switch, which have equal-cost choices ({multipath})");
}

fn routing_path(
    topo: &Topology,
    routing: &ina3d::topology::Routing,
    s: NodeId,
    d: NodeId,
    channel: u32,
) -> Vec<LinkId> {
    let _ = topo;
    routing
        .channel_path(s, d, channel)
        .unwrap()
        .iter()
        .map(|c| c.link())
        .collect()
}

/// `ina3d` with `args`, which must succeed; its stdout.
fn ina3d_ok(args: &[&std::ffi::OsStr]) -> String {
    let st = std::process::Command::new(env!("CARGO_BIN_EXE_ina3d"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    String::from_utf8_lossy(&st.stdout).into()
}

#[test]
fn replay_from_the_generator_gives_the_files_a_written_trace_gives() {
    // the bundled example with hierarchical INA: trace to a file then replay it, against
    // `replay --from` generating the same job in memory
    let dir = tempfile::tempdir().unwrap();
    let input = concat!(env!("CARGO_MANIFEST_DIR"), "/traces/example/megatron.log");
    let topo = "fat-tree:k=4,gpus-per-server=2";
    let trace = dir.path().join("t.csv.gz");
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let os = |s: &str| std::ffi::OsString::from(s);
    let job = [os("--ina"), os("hierarchical"), os("--seed"), os("2")];
    let mut gen = vec![os("trace"), os(input), os("--topology"), os(topo), os("-o")];
    gen.push(trace.clone().into());
    gen.extend(job.iter().cloned());
    let call = |v: Vec<std::ffi::OsString>| {
        let r: Vec<&std::ffi::OsStr> = v.iter().map(|s| s.as_os_str()).collect();
        ina3d_ok(&r)
    };
    call(gen);
    call(vec![
        os("replay"),
        trace.clone().into(),
        os("-o"),
        a.clone().into(),
    ]);
    let mut from = vec![
        os("replay"),
        os("--from"),
        os(input),
        os("--topology"),
        os(topo),
    ];
    from.extend(job.iter().cloned());
    from.extend([os("-o"), b.clone().into()]);
    call(from);
    for f in ["fct.csv", "fct.txt", "links.csv", "switches.csv"] {
        let (x, y) = (
            std::fs::read(a.join(f)).unwrap(),
            std::fs::read(b.join(f)).unwrap(),
        );
        assert!(!x.is_empty() && x == y, "{f} differs");
    }
    assert!(
        std::fs::read_to_string(a.join("switches.csv"))
            .unwrap()
            .lines()
            .count()
            > 1
    );
}

#[test]
fn job_flags_with_a_trace_file_are_refused_with_status_2() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.csv");
    ina3d::trace::write(&trace, &ina3d::trace::TraceHeader::new(), &[]).unwrap();
    for flag in [["--tp", "2"], ["--ina", "rina"]] {
        let st = std::process::Command::new(env!("CARGO_BIN_EXE_ina3d"))
            .arg("replay")
            .arg(&trace)
            .args(["--topology", "fat-tree:k=4", "-o"])
            .arg(dir.path().join("o"))
            .args(flag)
            .output()
            .unwrap();
        assert_eq!(st.status.code(), Some(2), "{flag:?}");
        let err = String::from_utf8_lossy(&st.stderr);
        assert!(err.contains("--from INPUT"), "{err}");
    }
}

// ---------------------------------------------------------------- DCQCN rate model

fn dcqcn() -> ReplayOptions {
    ReplayOptions {
        rate_model: RateModel::Dcqcn,
        ..ReplayOptions::default()
    }
}

#[test]
fn under_dcqcn_a_fabric_without_an_oversubscribed_port_replays_exactly_as_ideal() {
    // a ring on a star: every switch port carries one flow, nothing queues or marks
    let topo = star(6, G100, Nanos(1000));
    let recs = ring_allreduce(6, 3_000_000);
    let a = run(&recs, &topo, &ideal());
    let b = run(&recs, &topo, &dcqcn());
    assert_eq!(a.rows(), b.rows());
}

#[test]
fn two_senders_into_one_port_leave_their_queue_pair_throttled_for_the_next_transfer() {
    // 0→2 and 1→2 together (2 MB each) overfill port 2: its queue passes KMIN (400 KB at
    // 100 Gb/s), CNPs cut both pairs, and RP_TIMER (900 µs) is far off when 0→2 sends
    // its next 2 MB alone, so that transfer runs below line rate, never below MIN_RATE
    let topo = star(3, G100, Nanos(1000));
    let recs = vec![
        net(0, 0, 2, 2_000_000, &[]),
        net(1, 1, 2, 2_000_000, &[]),
        net(2, 0, 2, 2_000_000, &[0, 1]),
    ];
    let ideal_r = run(&recs, &topo, &ideal());
    let r = run(&recs, &topo, &dcqcn());
    // the port stays busy while backlogged: the shared pair cannot beat its fair share
    for i in 0..2 {
        assert!(r.rows()[i].end_ns >= ideal_r.rows()[i].end_ns);
    }
    let alone = r.rows()[2].standalone_fct_ns as f64;
    let fct = r.rows()[2].fct_ns as f64;
    assert!(fct > 1.5 * alone, "{fct} vs standalone {alone}");
    let min_rate = ina3d::netmodel::bytes_per_ns(ina3d::netmodel::DcqcnParams::default().min_rate);
    assert!(fct < wire(2_000_000) as f64 / min_rate, "{fct}");
    // the ideal model runs it at line rate
    assert_eq!(
        ideal_r.rows()[2].fct_ns,
        ideal_r.rows()[2].standalone_fct_ns
    );
}

#[test]
fn the_tiny_job_replays_under_dcqcn_with_every_record_done_and_bytes_conserved() {
    // two NCCL channels per collective: pairs with concurrent transfers share a queue
    // pair, and transfers re-capped by a tick finish in the same nanosecond as others
    // (this trace once made the solver remove a unit twice)
    use ina3d::pipeline::{generate_trace, replay_records, Job, JobSpec};
    let spec = JobSpec {
        input: concat!(env!("CARGO_MANIFEST_DIR"), "/traces/example/tiny.toml").into(),
        topology: "fat-tree:k=4,gpus-per-server=2".into(),
        ..JobSpec::default()
    };
    let job = Job::prepare(&spec).unwrap();
    let opts = spec.trace_options().unwrap();
    let t = generate_trace(&job, &opts, None, true, &mut |_| {}).unwrap();
    let run = |m| replay_records(&t.records, &t.header, &job.topology, 0, "t", false, m).unwrap();
    let (a, b) = (run(RateModel::Ideal), run(RateModel::Dcqcn));
    assert_eq!(b.rows().len(), t.records.len());
    assert!(b.rows().iter().all(|r| r.end_ns >= r.start_ns));
    // the same bytes cross the same channels whatever the rates
    let bytes = |r: &ina3d::replay::ReplayResult| -> Vec<(u32, u32, u64)> {
        r.channels
            .iter()
            .map(|c| (c.link.0, c.from.0, c.bytes))
            .collect()
    };
    assert_eq!(bytes(&a), bytes(&b));
}

#[test]
fn under_dcqcn_a_port_behind_a_congested_uplink_sees_only_what_the_uplink_passes() {
    // hosts 0–3 (leaf 0) send to hosts 8–11 (leaf 2) through leaf 0's one 100 Gb/s uplink
    // (4:1): that port queues, and DCQCN cuts those pairs. Host 10 sends to 8 and 9 (50
    // Gb/s each from its NIC). Leaf 2's port to host 8 gets 0→8 at a quarter of the
    // uplink plus 10→8 at 50 Gb/s: 75 Gb/s, below its rate, so nothing queues there and
    // 10→8 runs at its max-min share as under the ideal model; counted at their senders'
    // line rate, 0→8's arrivals would overfill that port and get 10→8 cut.
    let topo = Topology::from_spec(
        "leaf-spine:leaves=3,spines=1,hosts-per-leaf=4,gpus-per-server=1,oversub=4,nvlink=off",
    )
    .unwrap();
    let mut recs: Vec<FlowRecord> = (0..4)
        .map(|i| net(i, i as u32, 8 + i as u32, 16_000_000, &[]))
        .collect();
    recs.push(net(4, 10, 8, 4_000_000, &[]));
    recs.push(net(5, 10, 9, 4_000_000, &[]));
    let (a, b) = (run(&recs, &topo, &ideal()), run(&recs, &topo, &dcqcn()));
    // DCQCN is at work upstream: the pairs through the uplink end later than max-min's
    for i in 0..4 {
        assert!(
            b.rows()[i].end_ns > a.rows()[i].end_ns,
            "flow {i}: {} vs ideal {}",
            b.rows()[i].end_ns,
            a.rows()[i].end_ns
        );
    }
    // and not downstream: 10→8 and 10→9 share host 10's NIC at max-min rates
    for i in 4..6 {
        assert_eq!(b.rows()[i].end_ns, a.rows()[i].end_ns, "flow {i}");
    }
}

/// `records` replayed with 8,192 slots, a 256-packet window and best effort, under the
/// ideal and the DCQCN rate models.
fn ideal_and_dcqcn(
    records: &[FlowRecord],
    topo: &Topology,
) -> (ina3d::replay::ReplayResult, ina3d::replay::ReplayResult) {
    let opts = |m| ReplayOptions {
        rate_model: m,
        ..ina_opts(8192, 256, InaPolicy::BestEffort)
    };
    (
        run(records, topo, &opts(RateModel::Ideal)),
        run(records, topo, &opts(RateModel::Dcqcn)),
    )
}

#[test]
fn under_dcqcn_an_aggregation_stream_takes_its_rate_before_the_queue_pairs_beside_it() {
    // hosts 0–2 aggregate 10 MB on the switch while host 0 also sends 10 MB to host 3. In
    // the RoCE glue the aggregation's packets go straight into host 0's NIC queue and
    // the queue pair waits behind them: the stream runs as if alone, the transfer takes
    // what is left. Max-min (ideal) shares host 0's NIC between them instead.
    let topo = star(5, G100, Nanos(1000));
    let s = 10_000_000;
    let mut recs = ina_allreduce(1, 0, &[0, 1, 2], 5, s, Class::Dp, &[]);
    recs.push(net(6, 0, 3, s, &[]));
    let (a, b) = ideal_and_dcqcn(&recs, &topo);
    let alone = ina_wire(s, 1000) as f64 / B100 + 2000.0;
    let (ideal_agg, dcqcn_agg) = (a.rows()[0].end_ns, b.rows()[0].end_ns);
    assert_close(dcqcn_agg, alone, 2.0, "the stream under dcqcn");
    assert!(
        ideal_agg as f64 > 1.5 * alone,
        "max-min shares the NIC: {ideal_agg}"
    );
    // the transfer starts on what the stream leaves and ends one wire time after it
    let flow = b.rows()[6].end_ns as f64;
    assert_close(
        flow as u64,
        alone + wire(s) as f64 / B100,
        2.0 + 2000.0,
        "the transfer under dcqcn",
    );
}

#[test]
fn under_dcqcn_an_aggregation_stream_does_not_starve_transfers_queued_at_its_port() {
    // 0→2 and 1→2 (2 MB each) overfill port 2: their senders put their bytes on the
    // network faster than the port serves them, and DCQCN cuts them. At 100 µs hosts 2–4
    // start a 10 MB aggregation whose results reach host 2 through that port. The glue's
    // port is FIFO and the stream's window waits for its results: the bytes queued ahead
    // of the stream leave first, and a stream behind a backlog slows to its window over
    // the longer round trip. Filled before every host transfer at its line rate (as
    // until 2 Dec 2026), the stream took the port and the transfers ended after it.
    let topo = star(6, G100, Nanos(1000));
    let s = 10_000_000;
    let mut recs = vec![
        net(0, 0, 2, 2_000_000, &[]),
        net(1, 1, 2, 2_000_000, &[]),
        compute(2, 3, 100_000, &[]),
    ];
    recs.extend(ina_allreduce(1, 3, &[2, 3, 4], 6, s, Class::Dp, &[2]));
    let (a, b) = ideal_and_dcqcn(&recs, &topo);
    let stream_end = b.rows()[3..9].iter().map(|r| r.end_ns).max().unwrap();
    for i in 0..2 {
        let (got, fair) = (b.rows()[i].end_ns, a.rows()[i].end_ns);
        assert!(
            got < stream_end,
            "transfer {i} ends at {got}, the stream at {stream_end}"
        );
        assert!(
            (got as f64) < 1.25 * fair as f64,
            "transfer {i} ends at {got}, under max-min at {fair}"
        );
    }
}
