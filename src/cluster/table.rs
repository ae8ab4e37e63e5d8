//! The cluster's tables: `jobs.csv` (a row per job and policy), `cluster.csv` (a row per
//! policy) and the text the command line prints (times in ms, at most 100 characters wide).

use super::{ClusterOutcome, JobResult, PolicyResult};
use crate::formats::cluster_csv::{ClusterRow, JobRow};
use crate::formats::FormatError;
use crate::report::text::{self, Cells};
use std::fmt::Write as _;
use std::path::Path;

/// `DIR/jobs.csv`.
pub const JOBS_CSV: &str = "jobs.csv";
/// `DIR/cluster.csv`.
pub const CLUSTER_CSV: &str = "cluster.csv";

/// The `jobs.csv` row of a result.
pub fn job_row(r: &JobResult) -> JobRow {
    let s = &r.shared;
    JobRow {
        job: r.job.clone(),
        policy: r.policy.to_string(),
        gpus: r.gpus,
        placement: r.placement.clone(),
        start_ns: r.start_ns,
        iteration_time_ns: s.iteration_time_ns,
        alone_iteration_time_ns: r.alone.iteration_time_ns,
        slowdown: r.slowdown(),
        compute_ns: s.compute_ns,
        bubble_ns: s.bubble_ns,
        exposed_tp_ns: s.exposed_tp_ns,
        exposed_pp_ns: s.exposed_pp_ns,
        exposed_dp_ns: s.exposed_dp_ns,
        exposed_emb_ns: s.exposed_emb_ns,
        exposed_cp_ns: s.exposed_cp_ns,
        exposed_ep_ns: s.exposed_ep_ns,
        alone_exposed_dp_ns: r.alone.exposed_dp_ns,
        slots_peak: r.slots.peak,
        slot_time: r.slots.slot_time,
        alone_slots_peak: r.alone_slots,
        plan_pool: r.plan_pool,
        predicted_slowdown: r.predicted_slowdown,
        ns3_iteration_time_ns: r.ns3_iteration_ns,
        ns3_alone_iteration_time_ns: r.ns3_alone_iteration_ns,
    }
}

/// Jain's fairness index of `x`: (Σx)² / (n·Σx²), 1 when all are equal, 1/n at worst.
pub fn jain(x: &[f64]) -> f64 {
    let (s, q) = x.iter().fold((0.0, 0.0), |(s, q), v| (s + v, q + v * v));
    if q > 0.0 {
        s * s / (x.len() as f64 * q)
    } else {
        1.0
    }
}

/// The `cluster.csv` row of a policy.
pub fn cluster_row(p: &PolicyResult, jobs: &[&JobResult], slots: u32) -> ClusterRow {
    let sd: Vec<f64> = jobs.iter().map(|j| j.slowdown()).collect();
    ClusterRow {
        policy: p.policy.to_string(),
        jobs: jobs.len() as u32,
        ina_slots: slots,
        makespan_ns: p.merged.iteration_time_ns,
        max_slowdown: sd.iter().copied().fold(0.0, f64::max),
        mean_slowdown: sd.iter().sum::<f64>() / sd.len().max(1) as f64,
        jain_fairness: jain(&sd),
        aggregator_utilisation: p.utilisation,
        slot_peak: p.merged.ina_slot_peak,
        ina_fallbacks: p.fallbacks,
        switch_bytes: p.merged.switch_bytes,
        plan_proven: p.plan_proven,
    }
}

/// Writes `jobs.csv`.
pub fn write_jobs(path: &Path, rows: &[JobResult]) -> Result<(), FormatError> {
    let rows: Vec<JobRow> = rows.iter().map(job_row).collect();
    crate::formats::cluster_csv::write_jobs(path, &rows)
}

/// Writes `cluster.csv`.
pub fn write_cluster(path: &Path, o: &ClusterOutcome, slots: u32) -> Result<(), FormatError> {
    crate::formats::cluster_csv::write_cluster(path, &cluster_rows(o, slots))
}

/// Every policy's `cluster.csv` row.
pub fn cluster_rows(o: &ClusterOutcome, slots: u32) -> Vec<ClusterRow> {
    o.policies
        .iter()
        .map(|p| {
            let jobs: Vec<&JobResult> = o.jobs.iter().filter(|j| j.policy == p.policy).collect();
            cluster_row(p, &jobs, slots)
        })
        .collect()
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// One policy as the command line prints it: a line per job, then the cluster's line.
pub fn policy_text(p: &PolicyResult, jobs: &[JobResult]) -> String {
    let refs: Vec<&JobResult> = jobs.iter().collect();
    let c = cluster_row(p, &refs, 0);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "[{}] makespan {:.3} ms, slowdown max {:.3} mean {:.3}, Jain {:.3}, slots peak {}, util {:.1} %",
        p.policy,
        ms(c.makespan_ns),
        c.max_slowdown,
        c.mean_slowdown,
        c.jain_fairness,
        c.slot_peak,
        100.0 * c.aggregator_utilisation
    );
    if let Some(n) = &p.note {
        let _ = writeln!(s, "[{}] note: {n}", p.policy);
    }
    s.trim_end().to_string()
}

/// The tables printed at the end: one line per job and policy, then one per policy, laid
/// out by [`crate::report::text::layout`] like every table the project prints (times in
/// ms, under 100 characters wide for job names of up to 12 characters).
pub fn format_table(o: &ClusterOutcome) -> String {
    let t = |x: u64| text::ms(ms(x));
    let f3 = |x: f64| format!("{x:.3}");
    let jobs = |f: &dyn Fn(&JobResult) -> String| o.jobs.iter().map(f).collect::<Vec<_>>();
    let per_job = [
        Cells::left("policy", jobs(&|j| j.policy.to_string())),
        Cells::left("job", jobs(&|j| trunc(&j.job, 12))),
        Cells::right("iter ms", jobs(&|j| t(j.shared.iteration_time_ns))),
        Cells::right("alone ms", jobs(&|j| t(j.alone.iteration_time_ns))),
        Cells::right("slowdown", jobs(&|j| f3(j.slowdown()))),
        Cells::right("exp tp ms", jobs(&|j| t(j.shared.exposed_tp_ns))),
        Cells::right("exp dp ms", jobs(&|j| t(j.shared.exposed_dp_ns))),
        Cells::right("exp pp ms", jobs(&|j| t(j.shared.exposed_pp_ns))),
        Cells::right("slots", jobs(&|j| j.slots.peak.to_string())),
    ];
    let rows: Vec<_> = o
        .policies
        .iter()
        .map(|p| {
            let jobs: Vec<&JobResult> = o.jobs.iter().filter(|j| j.policy == p.policy).collect();
            (p.policy.to_string(), cluster_row(p, &jobs, 0))
        })
        .collect();
    let policies = |f: &dyn Fn(&ClusterRow) -> String| rows.iter().map(|(_, c)| f(c)).collect();
    let per_policy = [
        Cells::left("policy", rows.iter().map(|(p, _)| p.clone()).collect()),
        Cells::right("makespan ms", policies(&|c| t(c.makespan_ns))),
        Cells::right("max slowdown", policies(&|c| f3(c.max_slowdown))),
        Cells::right("mean slowdown", policies(&|c| f3(c.mean_slowdown))),
        Cells::right("Jain", policies(&|c| f3(c.jain_fairness))),
        Cells::right("slot peak", policies(&|c| c.slot_peak.to_string())),
        Cells::right(
            "util %",
            policies(&|c| format!("{:.1}", 100.0 * c.aggregator_utilisation)),
        ),
        Cells::right("fallbacks", policies(&|c| c.ina_fallbacks.to_string())),
    ];
    format!("{}\n{}", text::layout(&per_job), text::layout(&per_policy))
}

fn trunc(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).chain(std::iter::once('…')).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jains_index_is_one_for_equal_slowdowns_and_one_over_n_at_worst() {
        assert!((jain(&[1.2, 1.2, 1.2]) - 1.0).abs() < 1e-12);
        assert!((jain(&[1.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
        // (1 + 2)² / (2 · (1 + 4)) = 0.9
        assert!((jain(&[1.0, 2.0]) - 0.9).abs() < 1e-12);
    }
}
