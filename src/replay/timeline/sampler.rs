//! The sampler that watches the records going into the replayer's table, and the
//! timeline it assembles once the replay has run.

use super::counters;
use super::entry::Entry;
use super::ranks::{RankLayout, TimelineError, TimelineOptions};
use super::spans;
use super::PathSource;
use crate::formats::timeline_json::Event;
use crate::formats::FormatError;
use crate::record::{AggDir, FlowRecord, Mode};
use crate::replay::ReplayResult;
use crate::topology::Topology;
use crate::trace::TraceHeader;
use crate::units::{NodeId, Rank};
use std::path::Path;

/// selected ranks' records.
#[derive(Clone, Debug)]
pub struct TimelineSampler {
    layout: RankLayout,
    ranks: Vec<Rank>,
    /// Rank of each node (`u32::MAX`: not a selected rank's GPU).
    selected_rank_of: Vec<u32>,
    /// Rank of each GPU node (`u32::MAX`: not a GPU of the job).
    rank_of: Vec<u32>,
    /// GPU of each rank of the job.
    gpus: Vec<NodeId>,
    entries: Vec<Entry>,
    opts: TimelineOptions,
}

impl TimelineSampler {
    /// A sampler for the job the header `h` describes on `topo`.
    pub fn new(
        h: &TraceHeader,
        topo: &Topology,
        opts: &TimelineOptions,
    ) -> Result<TimelineSampler, TimelineError> {
        let layout = RankLayout::from_header(h)?;
        if layout.world() as usize > topo.gpus.len() {
            return Err(TimelineError::Layout {
                key: "world",
                msg: format!(
                    "{} is more than the topology's {} GPUs",
                    layout.world(),
                    topo.gpus.len()
                ),
            });
        }
        let ranks = layout.select(&opts.ranks)?;
        let mut rank_of = vec![u32::MAX; topo.node_count()];
        for r in 0..layout.world() {
            rank_of[topo.gpu(Rank(r)).idx()] = r;
        }
        let mut selected_rank_of = vec![u32::MAX; topo.node_count()];
        for &r in &ranks {
            selected_rank_of[topo.gpu(r).idx()] = r.0;
        }
        let gpus = topo.gpus[..layout.world() as usize].to_vec();
        Ok(TimelineSampler {
            layout,
            ranks,
            selected_rank_of,
            rank_of,
            gpus,
            entries: Vec::new(),
            opts: opts.clone(),
        })
    }

    /// Ranks with tracks.
    pub fn ranks(&self) -> &[Rank] {
        &self.ranks
    }

    /// Record `r`, the `pos`-th pushed into the replayer's table.
    pub fn observe(&mut self, pos: usize, r: &FlowRecord) -> Result<(), TimelineError> {
        let sel = |n: NodeId| {
            self.selected_rank_of
                .get(n.idx())
                .copied()
                .filter(|&x| x != u32::MAX)
        };
        let add = |rank: u32, peer: NodeId, entries: &mut Vec<Entry>| {
            entries.push(Entry {
                pos: pos as u32,
                rank: Rank(rank),
                mode: r.mode,
                class: r.class,
                bytes: r.bytes.0,
                gap: r.gap.0,
                collective: r.collective,
                step: r.step,
                microbatch: r.microbatch,
                layer: r.layer,
                group: r.group_size,
                peer,
                dir: r.agg.map(|a| a.dir),
                channel: r.channel,
            })
        };
        match r.mode {
            Mode::Compute | Mode::Net => {
                if let Some(k) = sel(r.src) {
                    add(k, r.dst, &mut self.entries);
                }
            }
            Mode::Ina => {
                let worker = match r.agg.map(|a| a.dir) {
                    Some(AggDir::Down) => r.dst,
                    _ => r.src,
                };
                let switch = if worker == r.src { r.dst } else { r.src };
                if let Some(k) = sel(worker) {
                    add(k, switch, &mut self.entries);
                }
            }
            Mode::NvLink => {
                let hits: Vec<(u32, NodeId)> = self
                    .nvlink_members(r)
                    .filter_map(|m| sel(m).map(|k| (k, if m == r.src { r.dst } else { r.src })))
                    .collect();
                for (k, peer) in hits {
                    add(k, peer, &mut self.entries);
                }
            }
        }
        if self.entries.len() > self.opts.max_events {
            return Err(TimelineError::TooManyRecords {
                cap: self.opts.max_events,
            });
        }
        Ok(())
    }

    /// The members of an NVLink record: it names its first and last member and the
    /// group's size; the members between are evenly spaced in rank (true of every
    /// Megatron group: TP, CP, DP, PP, EP and embedding groups have one stride each).
    /// A record whose ends and size allow no even spacing counts its two ends only.
    fn nvlink_members(&self, r: &FlowRecord) -> impl Iterator<Item = NodeId> + '_ {
        let rank = |n: NodeId| {
            self.rank_of
                .get(n.idx())
                .copied()
                .filter(|&x| x != u32::MAX)
        };
        let n = r.group_size.unwrap_or(2).max(2);
        let spaced = match (rank(r.src), rank(r.dst)) {
            (Some(a), Some(b)) if n > 2 && a != b && b.abs_diff(a) % (n - 1) == 0 => {
                Some((a.min(b), b.abs_diff(a) / (n - 1)))
            }
            _ => None,
        };
        let ends = if r.src == r.dst { 1 } else { 2 };
        let (src, dst) = (r.src, r.dst);
        let count = if spaced.is_some() { n } else { ends };
        (0..count).map(move |k| match spaced {
            // lo + k·stride ≤ max(a, b) < world: a rank of the job
            Some((lo, stride)) => self.gpus[(lo + k * stride) as usize],
            None if k == 0 => src,
            None => dst,
        })
    }

    /// The timeline of the replay `result` of the records observed, on `topo` with the
    /// routes of `routes` (the ones the replay used: link tracks follow each transfer's
    /// path).
    pub fn assemble(
        self,
        result: &ReplayResult,
        topo: &Topology,
        routes: &dyn PathSource,
    ) -> Timeline {
        let mut s = spans::Spans::new(&self.ranks, &self.rank_of);
        for e in &self.entries {
            s.add(e, &result.times);
        }
        let (mut events, threads) = s.finish(&self.layout);
        let first_counter = self.layout.stages();
        let counters = counters::tracks(result, topo, routes, self.opts.links, first_counter);
        let mut all = threads;
        all.extend(counters::metadata(first_counter, &counters));
        // spans, then counters: the truncation keeps their order
        events.extend(counters);
        let note = spans::truncate(&mut events, self.opts.max_events.saturating_sub(all.len()));
        all.extend(events);
        Timeline {
            events: all,
            ranks: self.ranks.len(),
            note,
        }
    }
}

/// A timeline ready to write.
#[derive(Clone, Debug, PartialEq)]
pub struct Timeline {
    /// Every event, in file order.
    pub events: Vec<Event>,
    /// Ranks with tracks.
    pub ranks: usize,
    /// What was dropped to keep under the cap, if anything.
    pub note: Option<String>,
}

impl Timeline {
    /// Write it to `path` (atomically).
    pub fn write(&self, path: &Path) -> Result<(), FormatError> {
        crate::formats::timeline_json::write(path, &self.events)
    }

    /// Spans in the file.
    pub fn spans(&self) -> usize {
        self.events
            .iter()
            .filter(|e| matches!(e, Event::Span { .. }))
            .count()
    }
}
