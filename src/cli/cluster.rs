//! `ina3d cluster`: several jobs on one fabric, through `ina3d::cluster` (which documents
//! the model and the output layout).

use ina3d::cluster::{self, Cluster, ClusterSpec};
use std::path::PathBuf;

/// Printed under `ina3d cluster --help`: the file, by example.
const CLUSTER_HELP: &str = "\
The cluster file (TOML):
  topology = \"fat-tree:k=4,gpus-per-server=2\"   # the shared fabric (default: this one)
  ina-slots = 1024            # aggregator slots per switch, one pool shared by every job
  policies = [\"ring\", \"split\", \"atp\", \"plan\", \"plan-fair\"]   # default: all five
  ina-classes = [\"tp\", \"dp\", \"emb\"]   # classes that may aggregate (default)
  # optional: ina-switches (all|tor|ids), ina (hierarchical|switchml, the trees of split),
  # seed (ECMP), routing (ecmp|dmodk|spray, as `ina3d trace --routing`), objective (slowest|sum-slowdown, of plan), fair-slowdown (1.2, plan-fair's
  # bound), plan-time-limit (s, each solve), plan-solver (heuristic|ilp|auto),
  # ns3 (true: also run each merged trace, and each job alone, on ns-3), traces (false:
  # keep them in memory), rate-model (ideal|dcqcn: the replayer's, see `ina3d replay --help`)
  [[job]]
  name = \"a\"
  input = \"traces/example/tiny.toml\"    # anything `ina3d trace` reads
  set = { hidden_size = 512 }           # Megatron arguments, applied last
  placement = \"interleaved\"             # contiguous (default) | interleaved |
                                        # random (+ placement-seed = N) | [fabric GPU indices]
  start-ns = 0                          # when it starts after the common start
  [sweep]                               # optional: run the cluster at every point of
  ina-slots = [256, 1024, 8192]         # the product of these axes (first slowest)
  placement = [\"contiguous\", \"interleaved\", \"random:1\"]   # every job's placement
  mix = [[\"a\", \"b\"], [\"a\"]]            # which jobs run together
  # -> DIR/points/<point>/ (a cluster run each) and DIR/jobs.csv, DIR/cluster.csv with
  #    the axis columns first; a re-run skips the points already done

Policies: ring (no INA); split (fixed INA for every job, each switch's pool split evenly
among the jobs, then among a job's classes); atp (best effort across jobs on the whole
pool, host fallback); plan (the joint planner: each job planned alone at 1, 1/2, 1/4, 1/8
of the pool, then one plan per job within every switch's pool, minimising the objective);
plan-fair (the sum of slowdowns with each job's predicted slowdown within fair-slowdown).

A job's slowdown is its iteration in the shared run over its iteration alone on the same
fabric, placement and policy (the pool to itself).

Outputs: DIR/jobs.csv (a row per job and policy), DIR/cluster.csv (a row per policy:
makespan, slowdowns, Jain's fairness index, aggregator utilisation), and per policy
DIR/<policy>/trace.csv.gz (the merged trace), replay/, <job>.plan.json, ns3/.

Bad input (a field of the file, an input that cannot be read, jobs needing more GPUs than
the fabric has, overlapping placements) stops before anything runs, naming the file,
line, column, job and field; exit status 2.";

/// Arguments of `ina3d cluster`.
#[derive(clap::Args, Debug)]
#[command(after_long_help = CLUSTER_HELP)]
pub struct Args {
    /// The cluster file (see --help for its keys).
    pub cluster: PathBuf,
    /// Output directory.
    #[arg(short, long, value_name = "DIR")]
    pub out: PathBuf,
    /// Also run each policy's merged trace on ns-3 (as `ns3 = true` in the file).
    #[arg(long)]
    pub ns3: bool,
}

/// Run `ina3d cluster`.
pub fn run(a: Args) -> anyhow::Result<()> {
    let mut spec = ClusterSpec::read(&a.cluster)?;
    spec.ns3 |= a.ns3;
    // every stage message, as before `run` hid its own behind -v: a cluster run has no
    // progress bar over its policies yet, so the messages are what shows it moving
    let mut rep = super::run::Stderr::new(true);
    if spec.sweep.is_some() {
        let o = cluster::run_sweep(&spec, &a.out, &mut rep)?;
        eprintln!(
            "{} sweep points under {}; wrote {} and {}",
            o.points.len(),
            a.out.join("points").display(),
            a.out.join(cluster::table::JOBS_CSV).display(),
            a.out.join(cluster::table::CLUSTER_CSV).display()
        );
        return Ok(());
    }
    let c = Cluster::prepare(spec)?;
    let o = cluster::run(&c, &a.out, &mut rep)?;
    print!("{}", cluster::table::format_table(&o));
    eprintln!(
        "wrote {} and {}",
        a.out.join(cluster::table::JOBS_CSV).display(),
        a.out.join(cluster::table::CLUSTER_CSV).display()
    );
    Ok(())
}
