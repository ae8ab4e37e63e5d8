//! Parsing throughput of the Megatron log scanner on a large synthetic log.
//!
//! The log is built in memory from realistic lines — a real-format arguments block, then
//! repeated training intervals (a timestamped iteration line, a level-2 `(min, max)`
//! timer block, and noise: INFO/WARNING lines, memory reports, rank-prefixed NCCL lines)
//! — until it reaches the target size (default 200 MB; `INA3D_BENCH_MB` changes it).
//! Prints MB/s (target ≥ 200 MB/s in release). Asserts nothing about time.

use ina3d::megatron::scan::scan_log;
use std::time::Instant;

fn synth(target: usize) -> String {
    let mut s = String::with_capacity(target + 4096);
    s.push_str("Zarr-based strategies will not be registered because of missing packages\n");
    s.push_str("------------------------ arguments ------------------------\n");
    for (k, v) in [
        ("global_batch_size", "64"),
        ("hidden_size", "1024"),
        ("micro_batch_size", "4"),
        ("num_attention_heads", "16"),
        ("num_layers", "24"),
        ("pipeline_model_parallel_size", "2"),
        ("seq_length", "1024"),
        ("tensor_model_parallel_size", "2"),
        ("world_size", "16"),
    ] {
        s.push_str(&format!("  {} {} {}\n", k, ".".repeat(47 - k.len()), v));
    }
    s.push_str("-------------------- end of arguments ---------------------\n");
    let timers = [
        "forward-backward",
        "forward-compute",
        "backward-compute",
        "batch-generator",
        "forward-recv",
        "forward-send",
        "backward-recv",
        "backward-send",
        "forward-send-backward-recv",
        "backward-send-forward-recv",
        "layernorm-grads-all-reduce",
        "embedding-grads-all-reduce",
        "all-grads-sync",
        "optimizer-copy-to-main-grad",
        "optimizer-clip-main-grad",
        "optimizer-inner-step",
        "optimizer-copy-main-to-model-params",
        "optimizer",
    ];
    let mut it = 1u64;
    while s.len() < target {
        let ms = 330.0 + (it % 17) as f64 * 0.37;
        s.push_str(&format!(
            " [2024-01-24 11:{:02}:{:02}] iteration {:8}/  500000 | consumed samples: {:12} | elapsed time per iteration (ms): {:.1} | throughput per GPU (TFLOP/s/GPU): 118.7 | learning rate: 1.395349E-04 | global batch size:    64 | lm loss: 3.044022E+00 | loss scale: 1.0 | grad norm: 0.305 | number of skipped iterations:   0 | number of nan iterations:   0 |\n",
            (it / 60) % 60, it % 60, it, it * 64, ms
        ));
        s.push_str("(min, max) time across ranks (ms):\n");
        for (j, t) in timers.iter().enumerate() {
            s.push_str(&format!(
                "    {}: ({:.2}, {:.2})\n",
                format!("{t} ").to_string() + &".".repeat(47 - t.len()),
                1.0 + j as f64,
                2.5 + j as f64
            ));
        }
        s.push_str("[default3]:NCCL INFO Channel 00/02 :    0   1   2   3   4   5   6   7\n");
        s.push_str("INFO:megatron.core.distributed.param_and_grad_buffer:Number of buckets for gradient all-reduce / reduce-scatter: 1\n");
        s.push_str("/usr/local/lib/python3.10/dist-packages/torch/utils/checkpoint.py:429: UserWarning: torch.utils.checkpoint: please pass in use_reentrant=True or use_reentrant=False explicitly.\n");
        s.push_str("[Rank 12] (after 1 iterations) memory (MB) | allocated: 2377.40 | max allocated: 5046.68 | reserved: 5720.0 | max reserved: 5720.0\n");
        it += 1;
    }
    s
}

/// On-CPU nanoseconds of this thread (Linux `/proc/thread-self/schedstat`), so the
/// figure is not skewed by other jobs sharing the machine; `None` elsewhere.
fn cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

fn main() {
    let mb: usize = std::env::var("INA3D_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let text = synth(mb * 1_000_000);
    let bytes = text.len() as f64;
    let mut best = f64::INFINITY;
    let mut best_cpu = f64::INFINITY;
    let mut iters = 0;
    for _ in 0..3 {
        let t = Instant::now();
        let c0 = cpu_ns();
        let scan = scan_log("synthetic.log", &text).expect("the synthetic log is well-formed");
        let dt = t.elapsed().as_secs_f64();
        if let (Some(a), Some(b)) = (c0, cpu_ns()) {
            best_cpu = best_cpu.min((b - a) as f64 / 1e9);
        }
        best = best.min(dt);
        iters = scan.iterations.len();
        assert_eq!(scan.args.len(), 9);
    }
    println!(
        "megatron log scan: {:.1} MB, {} iteration lines, best of 3: {:.3} s = {:.0} MB/s (target ≥ 200 MB/s)",
        bytes / 1e6,
        iters,
        best,
        bytes / 1e6 / best
    );
    if best_cpu.is_finite() {
        println!(
            "  on-CPU time (unaffected by other jobs on the machine): {best_cpu:.3} s = {:.0} MB/s",
            bytes / 1e6 / best_cpu
        );
    }
}
