//! `jobs.csv` and `cluster.csv` of `ina3d cluster`: one row per job and policy, and one
//! row per policy over the whole cluster (columns in docs/cluster.md, "Outputs").

use super::csv_rows::{read_rows, write_rows};
use super::{write_atomic, FormatError};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// One job at one policy (`jobs.csv`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobRow {
    /// The job's name.
    pub job: String,
    /// The policy.
    pub policy: String,
    /// GPUs it runs on.
    pub gpus: u32,
    /// Its placement (`contiguous`, `interleaved`, `random:SEED`, `explicit`).
    pub placement: String,
    /// Its start after the common start.
    pub start_ns: u64,
    /// Its iteration in the shared run, from its start.
    pub iteration_time_ns: u64,
    /// Its iteration alone on the same fabric, placement and policy.
    pub alone_iteration_time_ns: u64,
    /// `iteration_time_ns / alone_iteration_time_ns`.
    pub slowdown: f64,
    /// Busy compute of its busiest GPU.
    pub compute_ns: u64,
    /// Pipeline bubble on its critical path.
    pub bubble_ns: u64,
    /// Its exposed (critical-path) communication per class, shared run.
    pub exposed_tp_ns: u64,
    /// See `exposed_tp_ns`.
    pub exposed_pp_ns: u64,
    /// See `exposed_tp_ns`.
    pub exposed_dp_ns: u64,
    /// See `exposed_tp_ns`.
    pub exposed_emb_ns: u64,
    /// See `exposed_tp_ns`.
    pub exposed_cp_ns: u64,
    /// See `exposed_tp_ns`.
    pub exposed_ep_ns: u64,
    /// Its exposed data-parallel communication alone.
    pub alone_exposed_dp_ns: u64,
    /// Most aggregator slots it held at once on any one switch, shared run.
    pub slots_peak: u64,
    /// Σ over switches of its slots × time held, slot·ns, shared run.
    pub slot_time: u64,
    /// Most slots it held on any one switch alone.
    pub alone_slots_peak: u64,
    /// Planner policies: the pool its chosen plan was made under (0: all host).
    pub plan_pool: Option<u32>,
    /// Planner policies: the slowdown the joint planner predicted.
    pub predicted_slowdown: Option<f64>,
    /// Its iteration in ns-3's run of the merged trace, when ns-3 ran.
    pub ns3_iteration_time_ns: Option<u64>,
    /// Its iteration in ns-3's run of its trace alone, when ns-3 ran.
    pub ns3_alone_iteration_time_ns: Option<u64>,
}

/// One policy over the cluster (`cluster.csv`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClusterRow {
    /// The policy.
    pub policy: String,
    /// Jobs.
    pub jobs: u32,
    /// Aggregator slots per switch.
    pub ina_slots: u32,
    /// From the common start to the last job's end.
    pub makespan_ns: u64,
    /// Largest slowdown.
    pub max_slowdown: f64,
    /// Mean slowdown.
    pub mean_slowdown: f64,
    /// Jain's fairness index of the slowdowns, (Σx)² / (n·Σx²): 1 when all are equal.
    pub jain_fairness: f64,
    /// Slot-time held over pool × aggregating switches × makespan.
    pub aggregator_utilisation: f64,
    /// Most slots in use on any one switch.
    pub slot_peak: u64,
    /// Aggregations that fell back to the host ring.
    pub ina_fallbacks: u64,
    /// Σ payload × switches traversed.
    pub switch_bytes: u64,
    /// Planner policies: whether the joint choice is optimal among its candidates.
    pub plan_proven: Option<bool>,
}

/// The columns `jobs.csv` must have.
pub const JOB_COLUMNS: [&str; 4] = [
    "job",
    "policy",
    "iteration_time_ns",
    "alone_iteration_time_ns",
];

/// Write `jobs.csv`, atomically.
pub fn write_jobs(path: &Path, rows: &[JobRow]) -> Result<(), FormatError> {
    write_atomic(path, |w| write_rows(w, rows))
}

/// Write `cluster.csv`, atomically.
pub fn write_cluster(path: &Path, rows: &[ClusterRow]) -> Result<(), FormatError> {
    write_atomic(path, |w| write_rows(w, rows))
}

/// Read `jobs.csv` (errors name line and column).
pub fn read_jobs(path: &Path) -> Result<Vec<JobRow>, FormatError> {
    read_rows(path, &JOB_COLUMNS, "jobs.csv: one row per job and policy")
}

/// Read `cluster.csv`.
pub fn read_cluster(path: &Path) -> Result<Vec<ClusterRow>, FormatError> {
    read_rows(
        path,
        &["policy", "makespan_ns", "jain_fairness"],
        "cluster.csv: one row per policy",
    )
}

/// Write the rows of a cluster sweep (`jobs.csv` or `cluster.csv` of every point), each
/// preceded by its point's axis values under the columns `axes`, atomically.
pub fn write_with_axes<T: Serialize>(
    path: &Path,
    axes: &[&str],
    rows: &[(Vec<String>, T)],
) -> Result<(), FormatError> {
    write_atomic(path, |w| {
        let mut c = csv::Writer::from_writer(w);
        let mut header = true;
        for (vals, row) in rows {
            // the row's own columns, through serde, once with its header
            let mut one = csv::WriterBuilder::new()
                .has_headers(header)
                .from_writer(Vec::new());
            one.serialize(row)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            let bytes = one
                .into_inner()
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            let mut rd = csv::ReaderBuilder::new()
                .has_headers(false)
                .from_reader(&bytes[..]);
            for (k, rec) in rd.records().enumerate() {
                let rec = rec.map_err(|e| std::io::Error::other(e.to_string()))?;
                let lead: Vec<&str> = if header && k == 0 {
                    axes.to_vec()
                } else {
                    vals.iter().map(String::as_str).collect()
                };
                c.write_record(lead.into_iter().chain(rec.iter()))
                    .map_err(|e| std::io::Error::other(e.to_string()))?;
            }
            header = false;
        }
        c.flush()
    })
}
