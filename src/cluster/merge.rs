//! Several jobs' traces as one DAG on one fabric, and each job's figures read back out.
//!
//! Each job's trace is generated on its own topology view (rank → the node its placement
//! gives), so its records already name the fabric's nodes. Merging appends them job after
//! job, renumbering what must be unique across jobs: record ids (job `j`'s records take
//! the ids `base_j ..`; so a record's job is the id range it falls in), its deps, its
//! aggregation ids and its collective ids. A job's start offset is added to the gap of its
//! records without deps (the only records that start on their own). No record of one job
//! depends on another's: they meet only in links and slot pools.

use crate::fct::{Summary, SummaryContext, TraceView};
use crate::record::{AggTag, Class, FlowRecord, Mode};
use crate::trace::TraceHeader;
use crate::units::{FlowId, Nanos, NodeId};
use std::collections::HashMap;
use std::ops::Range;

/// The merged records of several jobs.
#[derive(Debug, Default)]
pub struct Merged {
    /// Every job's records, job after job, in dependency order.
    pub records: Vec<FlowRecord>,
    /// Per job, its positions in `records` (= its record ids).
    pub ranges: Vec<Range<usize>>,
    /// Per job, its start offset (ns).
    pub starts: Vec<u64>,
    next_agg: u64,
    next_coll: u64,
}

/// Appends one job's records (streamed from the generator) to a [`Merged`].
pub struct JobAppender<'a> {
    m: &'a mut Merged,
    begin: usize,
    start: u64,
    /// Local id → merged id, once the local ids stop being 0, 1, 2, … in order.
    remap: Option<HashMap<u64, u64>>,
    max_agg: Option<u64>,
    max_coll: Option<u64>,
}

impl Merged {
    /// Starts the next job, which starts `start_ns` after the common start.
    pub fn job(&mut self, start_ns: u64) -> JobAppender<'_> {
        let begin = self.records.len();
        JobAppender {
            m: self,
            begin,
            start: start_ns,
            remap: None,
            max_agg: None,
            max_coll: None,
        }
    }

    /// Job `j`'s figures from a back-end's times of the merged records (by position):
    /// [`crate::fct::summarize_times`] over its records alone, times taken from its start.
    pub fn job_summary(&self, j: usize, start: &[u64], end: &[u64]) -> Summary {
        let r = self.ranges[j].clone();
        let off = self.starts[j];
        let s: Vec<u64> = start[r.clone()].iter().map(|t| t - off).collect();
        let e: Vec<u64> = end[r.clone()].iter().map(|t| t - off).collect();
        let view = JobView {
            records: &self.records[r.clone()],
            base: r.start as u64,
            offset: off,
        };
        crate::fct::summarize_times(&view, &s, &e, &SummaryContext::default())
    }

    /// The job a merged record id belongs to.
    pub fn job_of(&self, id: u64) -> Option<usize> {
        self.ranges
            .iter()
            .position(|r| (r.start as u64..r.end as u64).contains(&id))
    }
}

impl JobAppender<'_> {
    /// Appends one record of the job (its local id, deps, aggregation and collective).
    /// A record without deps starts at its gap after the job's start: an error when that
    /// sum does not fit in u64 ns.
    pub fn push(&mut self, mut r: FlowRecord) -> Result<(), String> {
        let local = (self.m.records.len() - self.begin) as u64;
        let id = self.m.records.len() as u64;
        if self.remap.is_none() && r.id.0 != local {
            self.remap = Some((0..local).map(|i| (i, self.begin as u64 + i)).collect());
        }
        if let Some(map) = self.remap.as_mut() {
            map.insert(r.id.0, id);
            for d in &mut r.deps {
                // a dep the job does not have stays dangling (the replayer names it)
                d.0 = map.get(&d.0).copied().unwrap_or(u64::MAX - d.0);
            }
        } else {
            for d in &mut r.deps {
                d.0 += self.begin as u64;
            }
        }
        r.id = FlowId(id);
        if let Some(a) = r.agg.as_mut() {
            self.max_agg = Some(self.max_agg.map_or(a.id, |m| m.max(a.id)));
            a.id += self.m.next_agg;
        }
        if let Some(c) = r.collective.as_mut() {
            self.max_coll = Some(self.max_coll.map_or(*c, |m| m.max(*c)));
            *c += self.m.next_coll;
        }
        if r.deps.is_empty() {
            let gap = r.gap.0.checked_add(self.start).ok_or_else(|| {
                format!(
                    "record {}: gap {} ns after the start at {} ns is past u64 ns",
                    r.id, r.gap.0, self.start
                )
            })?;
            r.gap = Nanos(gap);
        }
        self.m.records.push(r);
        Ok(())
    }

    /// Ends the job.
    pub fn finish(self) {
        let m = self.m;
        m.ranges.push(self.begin..m.records.len());
        m.starts.push(self.start);
        m.next_agg += self.max_agg.map_or(0, |x| x + 1);
        m.next_coll += self.max_coll.map_or(0, |x| x + 1);
    }
}

/// One job's records inside the merged trace, as the summary reads them: positions from
/// 0, deps by position, and the start offset taken out of its first records' gaps (so it
/// is not counted as compute).
struct JobView<'a> {
    records: &'a [FlowRecord],
    base: u64,
    offset: u64,
}

impl TraceView for JobView<'_> {
    fn len(&self) -> usize {
        self.records.len()
    }
    fn id(&self, i: usize) -> u64 {
        self.records[i].id.0 - self.base
    }
    fn src(&self, i: usize) -> NodeId {
        self.records[i].src
    }
    fn mode(&self, i: usize) -> Mode {
        self.records[i].mode
    }
    fn class(&self, i: usize) -> Class {
        self.records[i].class
    }
    fn gap(&self, i: usize) -> u64 {
        let r = &self.records[i];
        if r.deps.is_empty() {
            r.gap.0 - self.offset
        } else {
            r.gap.0
        }
    }
    fn dur(&self, i: usize) -> u64 {
        self.records[i].dur.0
    }
    fn bytes(&self, i: usize) -> u64 {
        self.records[i].bytes.0
    }
    fn agg(&self, i: usize) -> Option<AggTag> {
        self.records[i].agg
    }
    fn deps(&self, i: usize, out: &mut Vec<usize>) {
        out.clear();
        out.extend(
            self.records[i]
                .deps
                .iter()
                .filter_map(|d| d.0.checked_sub(self.base))
                .map(|d| d as usize)
                .filter(|&d| d < self.records.len()),
        );
    }
}

/// The header of a merged trace: the fabric-wide entries of the first job's header (the
/// topology, seed, INA switch model, NVLink and channel settings), the jobs with their
/// record id ranges (`cluster_jobs`: `NAME=FIRST-LAST;…`), and `extra` (the policy's
/// tenants and reservations). Job-specific entries (model, layout, calibration) stay in
/// each job's own trace.
pub fn header(first: &TraceHeader, names: &[String], m: &Merged) -> TraceHeader {
    const FABRIC: &[&str] = &[
        "topology",
        "topology_hash",
        "seed",
        "routing",
        "collective",
        "ina",
        "ina_switches",
        "ina_slots",
        "ina_payload_bytes",
        "ina_window",
        "ina_policy",
        "ina_classes",
        "gpus_per_server",
        "nvlink_rate_bps",
        "nvlink_step_latency_ns",
        "nvlink_model",
        "nccl_channels",
        "iterations",
    ];
    let mut h = TraceHeader::new();
    for k in FABRIC {
        if let Some(v) = first.get(k) {
            h.set(*k, v);
        }
    }
    h.set(
        "cluster_jobs",
        names
            .iter()
            .zip(&m.ranges)
            .map(|(n, r)| format!("{n}={}-{}", r.start, r.end.saturating_sub(1)))
            .collect::<Vec<_>>()
            .join(";"),
    );
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{AggDir, AggGroup};

    fn rec(id: u64, deps: &[u64], gap: u64) -> FlowRecord {
        FlowRecord {
            id: FlowId(id),
            deps: deps.iter().map(|&d| FlowId(d)).collect(),
            gap: Nanos(gap),
            ..FlowRecord::default()
        }
    }

    #[test]
    fn merging_renumbers_ids_deps_aggregations_and_delays_only_first_records() {
        let mut m = Merged::default();
        let mut a = m.job(0);
        a.push(rec(0, &[], 5)).unwrap();
        a.push(FlowRecord {
            agg: Some(AggTag {
                id: 3,
                switch: NodeId(20),
                fanin: 2,
                dir: AggDir::Up,
                group: AggGroup::Dense,
            }),
            collective: Some(4),
            ..rec(1, &[0], 7)
        })
        .unwrap();
        a.finish();
        let mut b = m.job(100);
        // ids not from 0 in this job: remapped
        b.push(rec(10, &[], 5)).unwrap();
        b.push(FlowRecord {
            agg: Some(AggTag {
                id: 0,
                switch: NodeId(20),
                fanin: 2,
                dir: AggDir::Up,
                group: AggGroup::Dense,
            }),
            collective: Some(0),
            ..rec(11, &[10], 7)
        })
        .unwrap();
        b.finish();
        let r = &m.records;
        assert_eq!(r.iter().map(|r| r.id.0).collect::<Vec<_>>(), [0, 1, 2, 3]);
        assert_eq!(r[3].deps, vec![FlowId(2)]);
        assert_eq!(
            (r[0].gap.0, r[1].gap.0, r[2].gap.0, r[3].gap.0),
            (5, 7, 105, 7)
        );
        assert_eq!(r[3].agg.unwrap().id, 4, "after job a's aggregation 3");
        assert_eq!(r[3].collective, Some(5));
        assert_eq!(m.job_of(2), Some(1));
        assert_eq!(m.ranges, vec![0..2, 2..4]);
    }

    #[test]
    fn a_job_summary_is_its_own_timeline_from_its_start() {
        let mut m = Merged::default();
        for start in [0, 1000] {
            let mut j = m.job(start);
            j.push(FlowRecord {
                dur: Nanos(50),
                ..rec(0, &[], 10)
            })
            .unwrap();
            j.push(FlowRecord {
                dur: Nanos(40),
                ..rec(1, &[0], 0)
            })
            .unwrap();
            j.finish();
        }
        // job b runs 1000 ns later and its second record waits 30 ns more (contention)
        let start = [10, 60, 1010, 1090];
        let end = [60, 100, 1060, 1130];
        let a = m.job_summary(0, &start, &end);
        let b = m.job_summary(1, &start, &end);
        assert_eq!(a.iteration_time_ns, 100);
        assert_eq!(b.iteration_time_ns, 130);
        assert_eq!(
            a.compute_ns, 100,
            "gap 10 + 50 + 40, the offset not counted"
        );
        assert_eq!(b.compute_ns, 100);
    }
}
