//! Cluster benchmark (`ina3d cluster` at scale): prints figures, asserts nothing about time.
//!
//! `cargo bench --no-default-features --bench cluster` (add `-- quick` for the ring under
//! contiguous placement only; `-- plan` adds the joint planner, minutes per policy).
//!
//! Eight 1,024-GPU jobs on an 8,192-GPU fat-tree (k=32, 8-GPU NVLink servers, 100 Gb/s):
//! each GPT-3 13B cut to 8 layers, TP8·PP4·DP32, 4 micro-batches of one sequence (so one
//! iteration is short and the network carries every job's full-size gradient buckets).
//! Per placement and policy: records of the merged trace, wall time of the whole
//! `cluster::run` (each job generated and replayed alone, the merged trace generated and
//! replayed once), per-job slowdowns, makespan, Jain's index, slots, peak RSS (VmHWM of
//! the process so far).

use ina3d::cluster::{self, Cluster, ClusterSpec};
use ina3d::pipeline::Reporter;
use std::path::Path;
use std::time::Instant;

mod procfs;
use procfs::vm_hwm_kib;

struct Quiet;
impl Reporter for Quiet {
    fn line(&mut self, _: &str) {}
}

/// The cluster file: eight copies of the job, all with `placement`.
fn spec(placement: &str, policies: &str) -> String {
    let mut s = format!(
        "topology = \"fat-tree:k=32,gpus-per-server=8\"\nina-slots = 8192\npolicies = [{policies}]\n\
         traces = false\nplan-time-limit = 20\n"
    );
    for j in 0..8 {
        s.push_str(&format!(
            "[[job]]\nname = \"j{j}\"\ninput = \"gpt3-13b\"\nplacement = \"{placement}\"\n\
             set = {{ tensor_model_parallel_size = 8, pipeline_model_parallel_size = 4, data_parallel_size = 32, num_layers = 8, global_batch_size = 128, micro_batch_size = 1 }}\n"
        ));
    }
    s
}

fn peak_rss_gib() -> f64 {
    vm_hwm_kib().map_or(f64::NAN, |kb| kb as f64 / (1024.0 * 1024.0))
}

fn case(placement: &str, policy: &str, dir: &Path) {
    let text = spec(placement, &format!("\"{policy}\""));
    let path = dir.join(format!("{placement}-{policy}.toml"));
    std::fs::write(&path, text).expect("temporary directory");
    let t0 = Instant::now();
    let s = match ClusterSpec::read(&path) {
        Ok(s) => s,
        Err(e) => return println!("{placement} {policy}: {e}"),
    };
    let c = match Cluster::prepare(s) {
        Ok(c) => c,
        Err(e) => return println!("{placement} {policy}: {e}"),
    };
    let prep = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let out = dir.join(format!("{placement}-{policy}"));
    let o = match cluster::run(&c, &out, &mut Quiet) {
        Ok(o) => o,
        Err(e) => return println!("{placement} {policy}: {}", ina3d::pipeline::error_chain(&e)),
    };
    let wall = t1.elapsed().as_secs_f64();
    let rows = cluster::table::cluster_rows(&o, c.spec.ina_slots);
    let r = &rows[0];
    let p = &o.policies[0];
    let sd: Vec<String> = o
        .jobs
        .iter()
        .map(|j| format!("{:.3}", j.slowdown()))
        .collect();
    println!(
        "{placement:<11} {policy:<5}: {} GPUs, merged trace {} records; prepare {prep:.1} s, run {wall:.1} s \
         (8 jobs generated and replayed alone + the merged replay); makespan {:.3} ms, \
         alone {:.3} ms (job j0); slowdowns [{}], max {:.3}, Jain {:.4}; slot peak {}, \
         utilisation {:.2} %, fallbacks {}; peak RSS {:.2} GiB",
        c.fabric.gpus.len(),
        p.merged.records,
        r.makespan_ns as f64 / 1e6,
        o.jobs[0].alone.iteration_time_ns as f64 / 1e6,
        sd.join(" "),
        r.max_slowdown,
        r.jain_fairness,
        r.slot_peak,
        100.0 * r.aggregator_utilisation,
        r.ina_fallbacks,
        peak_rss_gib()
    );
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    let plan = std::env::args().any(|a| a == "plan");
    let dir = tempfile::tempdir().expect("temporary directory");
    println!("== cluster benchmark: 8 jobs x 1,024 GPUs on an 8,192-GPU fat-tree (benches/cluster.rs) ==");
    case("contiguous", "ring", dir.path());
    if quick {
        return;
    }
    case("interleaved", "ring", dir.path());
    for p in ["split", "atp"] {
        case("interleaved", p, dir.path());
    }
    if plan {
        case("interleaved", "plan", dir.path());
    }
}
