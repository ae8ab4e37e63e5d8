//! Trace generation throughput and memory: GPT-3 175B, TP8·PP16·DP8 (1,024 GPUs), global
//! batch 1536 (m = 192), one iteration, on a k=16 fat-tree (1,024 hosts, NVLink servers of
//! 8), streamed into a gzip'd trace file. Prints flows/s (target ≥ 2 M/s) and peak RSS
//! (VmHWM; streaming means it must not grow with the trace). Figures, not assertions.
//!
//! `INA3D_BENCH_INA=hierarchical` (or any `--ina` mode) runs with INA on dp,emb.

use ina3d::megatron;
use ina3d::record::Mode;
use ina3d::schedule;
use ina3d::topology::Topology;
use ina3d::trace::{self, InaMode, TraceOptions, TraceWriter};
use std::time::Instant;

fn vm_hwm_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// CPU time (user + system, all threads) of this process in seconds: robust to other
/// processes competing for the machine, unlike wall time.
fn cpu_secs() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = s.rsplit_once(')').map(|x| x.1).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // fields 14 and 15 of /proc/self/stat (utime, stime) are at 11 and 12 after the `)`; 100 Hz ticks
    (tick(11) + tick(12)) / 100.0
}

fn main() {
    let mut cfg = megatron::preset("gpt3-175b").expect("preset");
    for (k, v) in [
        ("tensor_model_parallel_size", "8"),
        ("pipeline_model_parallel_size", "16"),
        ("data_parallel_size", "8"),
        ("global_batch_size", "1536"),
        ("micro_batch_size", "1"),
    ] {
        cfg.set(k, v).expect("override");
    }
    let topo = Topology::from_spec("fat-tree:k=16").expect("topology");
    let mut opts = TraceOptions::default();
    if let Ok(m) = std::env::var("INA3D_BENCH_INA") {
        opts.ina.mode = m.parse::<InaMode>().expect("INA mode");
        opts.ina.switches = "all".parse().unwrap();
    }
    cfg.overlap_grad_reduce = std::env::var("INA3D_BENCH_NO_OVERLAP").is_err();
    let wl = schedule::build(&cfg, &opts.schedule).expect("workload");
    println!("trace_gen: GPT-3 175B TP{} PP{} DP{} = {} GPUs, m = {}, topology {}, ina {}, overlap_grad_reduce {}", wl.tp(), wl.pp(), wl.dp(), wl.world(), wl.microbatches, topo.source, opts.ina.mode, cfg.overlap_grad_reduce);
    let before = vm_hwm_kib().unwrap_or(0);
    let dir = tempfile::tempdir().expect("tempdir");
    // INA3D_BENCH_PLAIN=1: uncompressed CSV, to separate formatting from compression cost.
    let path = dir
        .path()
        .join(if std::env::var("INA3D_BENCH_PLAIN").is_ok() {
            "gpt3-175b.csv"
        } else {
            "gpt3-175b.csv.gz"
        });
    let t = Instant::now();
    let c = cpu_secs();
    let mut n = 0u64;
    trace::generate_workload(&wl, &topo, &opts, &mut |_r| {
        n += 1;
        Ok(())
    })
    .expect("generate");
    println!(
        "  generation only (no file): {:.3} s wall, {:.2} s CPU, {:.0} records/s wall, {:.0} records per CPU-second",
        t.elapsed().as_secs_f64(),
        cpu_secs() - c,
        n as f64 / t.elapsed().as_secs_f64(),
        n as f64 / (cpu_secs() - c).max(0.01)
    );
    let t0 = Instant::now();
    let c0 = cpu_secs();
    let mut w =
        TraceWriter::create(&path, &trace::header(&cfg, &wl, &topo, &opts)).expect("create");
    let mut network = 0u64;
    let stats = trace::generate_workload(&wl, &topo, &opts, &mut |r| {
        if matches!(r.mode, Mode::Net | Mode::Ina) {
            network += 1;
        }
        Ok(w.write(&r)?)
    })
    .expect("generate");
    w.finish().expect("finish");
    let secs = t0.elapsed().as_secs_f64();
    let cpu = cpu_secs() - c0;
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let after = vm_hwm_kib().unwrap_or(0);
    println!(
        "  records        {:>12}  (network flows {network}, of which by class/mode below)",
        stats.records
    );
    for ((c, m), (n, b)) in &stats.by_class_mode {
        println!(
            "    {:<8} {:<8} {:>10} records {:>18} B",
            c.as_str(),
            m.as_str(),
            n,
            b.0
        );
    }
    println!("  wall time      {secs:>12.3} s");
    println!(
        "  records/s      {:>12.0}  (target ≥ 2,000,000; wall time, machine shared)",
        stats.records as f64 / secs
    );
    println!("  CPU time       {:>12.3} s (generation + formatting + gzip thread): {:.0} records per CPU-second", cpu, stats.records as f64 / cpu.max(0.01));
    println!(
        "  file size      {:>12} B ({:.1} B/record)",
        size,
        size as f64 / stats.records.max(1) as f64
    );
    println!(
        "  peak RSS       {:>12} KiB (VmHWM; {} KiB before generation)",
        after, before
    );

    let t1 = Instant::now();
    let v = trace::validate(&path, Some(&topo)).expect("valid trace");
    let rs = t1.elapsed().as_secs_f64();
    println!(
        "  read+validate  {:>12.3} s ({:.0} records/s), peak RSS now {} KiB",
        rs,
        v.records as f64 / rs,
        vm_hwm_kib().unwrap_or(0)
    );
}
