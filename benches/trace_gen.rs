//! Trace generation throughput: GPT-3 175B, TP8·PP16·DP64 (8,192 GPUs) on a k=32 fat-tree,
//! one iteration, through the pipeline's own `generate_trace` (what `ina3d trace … -o
//! FILE` runs after preparing the job), three ways: records only (no file), to a plain
//! `.csv`, and to a `.csv.gz` (the target: ≥ 5 M records/s, wall time of the whole
//! generate + format + compress + write + fsync + rename phase). Each is run `RUNS` times;
//! the median, min and max are printed with the load average, since the 2 cores are
//! shared. Also: records per CPU-second (user + system of every thread; less sensitive to
//! other processes than wall time), the compression ratio (bytes of the decompressed file
//! over bytes of the file), peak RSS, and reading + validating the file back.
//! Figures, not assertions.
//!
//! `INA3D_BENCH_INA=hierarchical` (or any `--ina` mode) runs with INA on dp,emb;
//! `INA3D_BENCH_DP=8` another data-parallel size; `INA3D_BENCH_RUNS=N` more runs.

use ina3d::pipeline::{generate_trace, Job, JobSpec, ParallelSizes};
use ina3d::trace::InaMode;
use std::io::Read;
use std::path::Path;
use std::time::Instant;

mod procfs;
use procfs::vm_hwm_kib;

const TARGET: f64 = 5_000_000.0;

/// CPU time (user + system, all threads) of this process in seconds.
fn cpu_secs() -> f64 {
    procfs::stat_cpu("/proc/self/stat")
}

/// CPU time of the calling thread (the generator's: it generates and formats the rows).
fn thread_cpu_secs() -> f64 {
    procfs::stat_cpu("/proc/thread-self/stat")
}

/// The 1-, 5- and 15-minute load averages.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// Median, min and max.
fn stats(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

struct Phase {
    records: u64,
    wall: Vec<f64>,
    cpu: Vec<f64>,
    /// CPU of the generating thread alone.
    main_cpu: Vec<f64>,
    load: Vec<String>,
}

/// Run the generate(+write) phase `runs` times into `file` (or no file).
fn phase(job: &Job, spec: &JobSpec, file: Option<&Path>, runs: usize) -> Phase {
    let opts = spec.trace_options().expect("options");
    let mut p = Phase {
        records: 0,
        wall: Vec::new(),
        cpu: Vec::new(),
        main_cpu: Vec::new(),
        load: Vec::new(),
    };
    for _ in 0..runs {
        p.load.push(loadavg());
        let (t, c, m) = (Instant::now(), cpu_secs(), thread_cpu_secs());
        let g = generate_trace(job, &opts, file, false, &mut |_| {}).expect("generate");
        p.wall.push(t.elapsed().as_secs_f64());
        p.cpu.push(cpu_secs() - c);
        p.main_cpu.push(thread_cpu_secs() - m);
        p.records = g.stats.records;
    }
    p
}

fn print_phase(name: &str, p: &Phase, target: bool) {
    let (w, wmin, wmax) = stats(p.wall.clone());
    let (c, _, _) = stats(p.cpu.clone());
    let n = p.records as f64;
    let rate = n / w;
    println!(
        "  {name:<22} {:>6.3} s wall (min {wmin:.3}, max {wmax:.3}) = {:>5.2} M records/s{}; {:.2} M records per CPU-second",
        w,
        rate / 1e6,
        if target {
            format!(
                " (target ≥ {:.0} M/s: {:.2}×{})",
                TARGET / 1e6,
                rate / TARGET,
                if rate >= TARGET { ", met" } else { ", MISSED" }
            )
        } else {
            String::new()
        },
        n / c.max(0.01) / 1e6,
    );
    println!(
        "  {:<22} load average before each run: {}",
        "",
        p.load.join(" | ")
    );
    // Two cores to ourselves: the generating thread runs alone on one, the compressors
    // share what is left of both; wall ≥ max(its CPU, all CPU / 2). A projection from
    // the CPU times of a shared machine, not a measurement.
    let (m, _, _) = stats(p.main_cpu.clone());
    println!(
        "  {:<22} CPU {c:.3} s, of which the generating thread {m:.3} s: on 2 free cores at best {:.2} M records/s (projection)",
        "",
        n / m.max(c / 2.0).max(0.01) / 1e6
    );
}

fn main() {
    let runs: usize = std::env::var("INA3D_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
        .max(1);
    let dp: u32 = std::env::var("INA3D_BENCH_DP")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    let mut spec = JobSpec {
        input: "gpt3-175b".into(),
        topology: "fat-tree:k=32".into(),
        sizes: ParallelSizes {
            tp: Some(8),
            pp: Some(16),
            dp: Some(dp),
            ..ParallelSizes::default()
        },
        ..JobSpec::default()
    };
    if let Ok(m) = std::env::var("INA3D_BENCH_INA") {
        spec.ina.mode = m.parse::<InaMode>().expect("INA mode");
        spec.ina.switches = "all".parse().unwrap();
    }
    let job = Job::prepare(&spec).expect("job");
    let wl = &job.workload;
    println!(
        "trace_gen: GPT-3 175B TP{} PP{} DP{} = {} GPUs, m = {}, topology {}, ina {}; {runs} runs per phase, {} compression threads",
        wl.tp(),
        wl.pp(),
        wl.dp(),
        wl.world(),
        wl.microbatches,
        job.topology.source,
        spec.ina.mode,
        ina3d::formats::gz_members::default_threads()
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let (plain, gz) = (dir.path().join("t.csv"), dir.path().join("t.csv.gz"));
    let before = vm_hwm_kib().unwrap_or(0);
    let gen = phase(&job, &spec, None, runs);
    print_phase("generation only", &gen, false);
    let csv = phase(&job, &spec, Some(&plain), runs);
    print_phase("to .csv (no gzip)", &csv, false);
    let _ = std::fs::remove_file(&plain);
    let gzp = phase(&job, &spec, Some(&gz), runs);
    print_phase("to .csv.gz", &gzp, true);
    let after = vm_hwm_kib().unwrap_or(0);

    let size = std::fs::metadata(&gz).map(|m| m.len()).unwrap_or(0);
    let t = Instant::now();
    let mut text = 0u64;
    let mut rd =
        flate2::read::MultiGzDecoder::new(std::fs::File::open(&gz).expect("open the trace"));
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match rd.read(&mut buf).expect("the file decompresses") {
            0 => break,
            n => text += n as u64,
        }
    }
    let n = gzp.records.max(1) as f64;
    println!(
        "  records        {:>12}  ({:.1} B/record uncompressed, {:.1} B/record compressed)",
        gzp.records,
        text as f64 / n,
        size as f64 / n
    );
    println!(
        "  compression    {:>12.2}× ({text} B of CSV in {size} B of gzip; decompressed in {:.2} s)",
        text as f64 / size.max(1) as f64,
        t.elapsed().as_secs_f64()
    );
    println!("  peak RSS       {after:>12} KiB (VmHWM; {before} KiB after preparing the job)");
    let t1 = Instant::now();
    let v = ina3d::trace::validate(&gz, Some(&job.topology)).expect("valid trace");
    let rs = t1.elapsed().as_secs_f64();
    println!(
        "  read+validate  {:>12.3} s ({:.2} M records/s), peak RSS now {} KiB",
        rs,
        v.records as f64 / rs / 1e6,
        vm_hwm_kib().unwrap_or(0)
    );
}
