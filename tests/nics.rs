//! NICs per server and how NCCL channels map to them (docs/model.md#nics-and-nccl-channels):
//! a ring whose members share a server leaves it through a different GPU's NIC on each
//! channel, so every NIC of the server carries an equal share — derived by hand below.

use ina3d::pipeline::{generate_bench_trace, Job, JobSpec, ParallelSizes};
use ina3d::record::Mode;
use ina3d::schedule::CollKind;
use ina3d::trace::{BenchGroup, CollectiveBench};
use ina3d::units::Bytes;
use std::collections::{BTreeMap, BTreeSet};

const TINY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/traces/example/tiny.toml");
/// 4 servers of 8 GPUs (one NIC each) under 2 leaves.
const DGX_4: &str = "leaf-spine:leaves=2,spines=2,hosts-per-leaf=16,gpus-per-server=8";

fn dp_ring_bytes_per_gpu(channels: Option<u32>) -> (BTreeMap<u32, u64>, BTreeSet<u32>) {
    let spec = JobSpec {
        input: TINY.into(),
        topology: DGX_4.into(),
        sizes: ParallelSizes {
            tp: Some(2),
            pp: Some(1),
            dp: Some(16),
            ..Default::default()
        },
        nccl_channels: channels,
        megatron: vec![("global-batch-size".into(), "16".into())],
        ..JobSpec::default()
    };
    let job = Job::prepare(&spec).unwrap();
    let opts = spec.trace_options().unwrap();
    let bench = CollectiveBench {
        kind: CollKind::AllReduce,
        sizes: vec![Bytes::mib(16)],
        group: BenchGroup::Dp,
    };
    let t = generate_bench_trace(&job, &opts, &bench, None, true).unwrap();
    let mut per = BTreeMap::new();
    let mut chans = BTreeSet::new();
    for r in t.records.iter().filter(|r| r.mode == Mode::Net) {
        *per.entry(r.src.0).or_default() += r.bytes.0;
        chans.insert(r.channel);
    }
    (per, chans)
}

#[test]
fn a_dp_ring_with_four_gpus_per_server_spreads_over_all_four_nics_on_eight_channels() {
    // TP2 in 8-GPU servers: each of the 2 DP groups has n = 16 members, 4 per server.
    // NCCL's rule: 2 channels per NIC the communicator uses on a server, 2 × 4 = 8. Each
    // channel's ring crosses the network 4 times (once per server) in each of its
    // 2(n − 1) = 30 steps of S/(8·16); rotating each server's run by the channel, GPU j of
    // a server sends to the next server in channels j and j + 4: 2 × 30 × S/128 each.
    let (per, chans) = dp_ring_bytes_per_gpu(None);
    assert_eq!(chans, (0..8).collect());
    assert_eq!(per.len(), 32, "every GPU's NIC sends: {per:?}");
    let s = Bytes::mib(16).0 as f64;
    let want = 2.0 * 30.0 * s / 128.0;
    for (&g, &b) in &per {
        assert!(
            (b as f64 - want).abs() <= 64.0,
            "GPU {g}: {b} B, want {want}"
        );
    }
}

#[test]
fn an_explicit_channel_count_is_kept_and_still_rotates_the_exit_gpu() {
    // 2 channels: a group's run on a server (ranks 0, 2, 4, 6 on server 0 for the even
    // group) leaves through its last member in channel 0 (6) and, rotated by one, through
    // its first in channel 1 (0): 2 exit GPUs per server per group, 2 × 4 × 2 = 16.
    let (per, chans) = dp_ring_bytes_per_gpu(Some(2));
    assert_eq!(chans, BTreeSet::from([0, 1]));
    assert_eq!(per.len(), 16, "2 exit GPUs per server per group: {per:?}");
}
