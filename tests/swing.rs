//! Swing all-reduce (NSDI'24) against the paper's definitions, derived by hand here: the
//! peer rule π(r, s) = r ± ρ(s), ρ(s) = Σᵢ₌₀ˢ (−2)ⁱ, and the bandwidth-optimal
//! reduce-scatter + all-gather whose step s moves half of the remaining blocks.

use ina3d::pipeline::{generate_bench_trace, Job, JobSpec, ParallelSizes};
use ina3d::record::Mode;
use ina3d::schedule::CollKind;
use ina3d::trace::{swing_peer, swing_rho, swing_schedule, Algorithm, BenchGroup, CollectiveBench};
use ina3d::units::Bytes;
use std::collections::{BTreeMap, BTreeSet};

#[test]
fn rho_is_the_alternating_sum_of_powers_of_minus_two() {
    let got: Vec<i64> = (0..6).map(swing_rho).collect();
    assert_eq!(got, vec![1, -1, 3, -5, 11, -21]);
}

#[test]
fn peers_for_8_and_16_ranks_are_the_papers() {
    // p = 8, steps 0..3 with ρ = 1, −1, 3: even ranks add, odd subtract, mod 8
    let want8 = [
        [1, 7, 3],
        [0, 2, 6],
        [3, 1, 5],
        [2, 4, 0],
        [5, 3, 7],
        [4, 6, 2],
        [7, 5, 1],
        [6, 0, 4],
    ];
    for (r, w) in want8.iter().enumerate() {
        let got: Vec<usize> = (0..3).map(|s| swing_peer(r, s, 8)).collect();
        assert_eq!(got, w.to_vec(), "rank {r}");
    }
    // p = 16, ρ(3) = −5: rank 0 → 1, 15, 3, 11; rank 1 → 0, 2, 14, 6; rank 6 → 7, 5, 9, 1
    for (r, w) in [(0, [1, 15, 3, 11]), (1, [0, 2, 14, 6]), (6, [7, 5, 9, 1])] {
        let got: Vec<usize> = (0..4).map(|s| swing_peer(r, s, 16)).collect();
        assert_eq!(got, w.to_vec(), "rank {r}");
    }
    // the pairing is symmetric at every step
    for p in [8usize, 16] {
        for s in 0..p.trailing_zeros() {
            for r in 0..p {
                assert_eq!(
                    swing_peer(swing_peer(r, s, p), s, p),
                    r,
                    "p {p} s {s} r {r}"
                );
            }
        }
    }
}

/// Runs a schedule on contribution sets: after the reduce-scatter rank r's block r holds
/// every rank's contribution, after the all-gather every rank holds every final block.
fn check_semantics(p: usize) {
    let (rs, ag) = swing_schedule(p).unwrap_or_else(|| panic!("p = {p}"));
    let steps = p.next_power_of_two().trailing_zeros() as usize;
    assert_eq!((rs.len(), ag.len()), (steps, steps), "p = {p}");
    // contrib[r][b]: whose contributions rank r's copy of block b holds
    let mut contrib: Vec<Vec<BTreeSet<usize>>> = (0..p)
        .map(|r| (0..p).map(|_| BTreeSet::from([r])).collect())
        .collect();
    for st in &rs {
        let before = contrib.clone();
        for (r, held) in before.iter().enumerate() {
            let q = st.peer[r];
            assert_eq!(st.peer[q], r, "p {p}: pairs are mutual");
            for &b in &st.blocks[r] {
                contrib[q][b].extend(held[b].iter().copied());
            }
        }
    }
    let all: BTreeSet<usize> = (0..p).collect();
    for (r, c) in contrib.iter().enumerate() {
        assert_eq!(c[r], all, "p {p}: rank {r}'s block is fully reduced");
    }
    // all-gather: final[r] = blocks rank r holds fully reduced
    let mut fin: Vec<BTreeSet<usize>> = (0..p).map(|r| BTreeSet::from([r])).collect();
    for st in &ag {
        let before = fin.clone();
        for r in 0..p {
            for &b in &st.blocks[r] {
                assert!(
                    before[r].contains(&b),
                    "p {p}: rank {r} sends block {b} it lacks"
                );
                assert!(
                    fin[st.peer[r]].insert(b),
                    "p {p}: block {b} sent twice to {}",
                    st.peer[r]
                );
            }
        }
    }
    assert!(fin.iter().all(|f| *f == all), "p {p}: all-gather complete");
    // bandwidth-optimal: each rank sends p − 1 blocks per phase
    for r in 0..p {
        let sent: usize = rs.iter().map(|st| st.blocks[r].len()).sum();
        assert_eq!(sent, p - 1, "p {p} rank {r}");
    }
}

#[test]
fn the_reduce_scatter_reduces_every_block_and_the_all_gather_delivers_each_once() {
    for p in [2, 4, 6, 8, 10, 12, 14, 16, 18, 24, 30, 32, 48, 64, 100] {
        check_semantics(p);
    }
    assert!(swing_schedule(7).is_none(), "odd counts are folded first");
}

#[test]
fn for_a_power_of_two_step_s_moves_half_of_the_remaining_blocks() {
    for p in [8usize, 16] {
        let (rs, ag) = swing_schedule(p).unwrap();
        for (s, st) in rs.iter().enumerate() {
            for r in 0..p {
                assert_eq!(
                    st.blocks[r].len(),
                    p >> (s + 1),
                    "p {p} rs step {s} rank {r}"
                );
                assert_eq!(st.peer[r], swing_peer(r, s as u32, p));
            }
        }
        // the all-gather runs the steps backwards: 1, 2, 4, … blocks
        for (k, st) in ag.iter().enumerate() {
            assert!(st.blocks.iter().all(|b| b.len() == 1 << k), "p {p} ag {k}");
        }
    }
}

const TINY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/traces/example/tiny.toml");

/// The net records of a Swing all-reduce bench of `s` bytes over `dp` single-GPU hosts.
fn bench(topology: &str, dp: u32, s: Bytes) -> Vec<ina3d::record::FlowRecord> {
    let spec = JobSpec {
        input: TINY.into(),
        topology: topology.into(),
        sizes: ParallelSizes {
            tp: Some(1),
            pp: Some(1),
            dp: Some(dp),
            ..Default::default()
        },
        collective: Algorithm::Swing,
        nccl_channels: Some(1),
        megatron: vec![("global-batch-size".into(), dp.to_string())],
        ..JobSpec::default()
    };
    let job = Job::prepare(&spec).unwrap();
    let opts = spec.trace_options().unwrap();
    let bench = CollectiveBench {
        kind: CollKind::AllReduce,
        sizes: vec![s],
        group: BenchGroup::All,
    };
    let t = generate_bench_trace(&job, &opts, &bench, None, true).unwrap();
    t.records
        .into_iter()
        .filter(|r| r.mode == Mode::Net)
        .collect()
}

#[test]
fn lowered_on_a_16_node_torus_each_rank_sends_s_over_2_to_the_s_plus_1_at_reduce_scatter_step_s() {
    let s = Bytes(16 * 4096);
    let recs = bench("torus:dims=4x4", 16, s);
    // 4 reduce-scatter + 4 all-gather steps, 16 ranks each
    assert_eq!(recs.len(), 8 * 16);
    let mut by_step: BTreeMap<u32, BTreeSet<(u32, u32, u64)>> = BTreeMap::new();
    for r in &recs {
        by_step
            .entry(r.step.unwrap())
            .or_default()
            .insert((r.src.0, r.dst.0, r.bytes.0));
    }
    for (k, msgs) in &by_step {
        let k = *k as usize;
        let blocks = if k < 4 { 16 >> (k + 1) } else { 1 << (k - 4) };
        let rs_step = if k < 4 { k } else { 7 - k } as u32;
        for &(a, b, bytes) in msgs {
            assert_eq!(bytes, blocks * 4096, "step {k}");
            assert_eq!(b as usize, swing_peer(a as usize, rs_step, 16), "step {k}");
        }
        assert_eq!(msgs.len(), 16);
    }
    // per rank: 2 (p − 1)/p · S, bandwidth-optimal
    let from0: u64 = recs
        .iter()
        .filter(|r| r.src.0 == 0)
        .map(|r| r.bytes.0)
        .sum();
    assert_eq!(from0, 2 * 15 * 4096);
}

#[test]
fn an_odd_group_folds_its_last_member_into_the_one_before_and_back() {
    let s = Bytes(6 * 1000);
    let recs = bench("torus:dims=3x3", 7, s);
    // member 6 sends S to 5 first, 5 returns S last; the 6 others run Swing on 6 ranks:
    // 3 + 3 steps, each rank sending 5 blocks of S/6 per phase
    let first = recs.iter().min_by_key(|r| r.id).unwrap();
    let last = recs.iter().max_by_key(|r| r.id).unwrap();
    assert_eq!((first.src.0, first.dst.0, first.bytes), (6, 5, s));
    assert_eq!((last.src.0, last.dst.0, last.bytes), (5, 6, s));
    let core: u64 = recs
        .iter()
        .filter(|r| r.src.0 == 0)
        .map(|r| r.bytes.0)
        .sum();
    assert_eq!(core, 2 * 5 * 1000);
    assert_eq!(recs.len(), 2 + 6 * 6);
}

#[test]
fn a_non_power_of_two_schedule_never_sends_an_empty_message() {
    for p in [6usize, 10, 12, 14, 18, 24, 100] {
        let (rs, ag) = swing_schedule(p).unwrap();
        for (k, st) in rs.iter().chain(ag.iter()).enumerate() {
            for r in 0..p {
                assert!(!st.blocks[r].is_empty(), "p {p} step {k} rank {r}");
            }
        }
    }
}
