//! The spans of the selected ranks: compute, collectives with their steps, sends, each on
//! a thread of its rank where it nests properly.
//!
//! A viewer nests the complete events of one thread by containment, so two spans that
//! overlap without one holding the other cannot share a thread. Each rank has *compute*
//! threads and *comm* threads (lanes), filled greedily in time order: a span goes on the
//! first lane free at its start. A collective is a span whose steps nest under it; when
//! its steps overlap each other (NCCL channels, the up and down edge of an INA
//! aggregation, an all-to-all's peers) they spread over the lanes below it, which the
//! collective holds for its whole duration.

use super::entry::Entry;
use super::ranks::RankLayout;
use crate::formats::timeline_json::Args;
use crate::formats::timeline_json::Event;
use crate::record::{AggDir, Mode};
use crate::replay::result::RecordTimes;
use crate::units::Rank;
use std::collections::BTreeMap;

/// One span before it has a thread: its interval and what it shows.
#[derive(Clone, Debug)]
struct Item {
    start: u64,
    end: u64,
    what: What,
}

/// What a span shows: the index of its entry in `Spans::entries`.
#[derive(Clone, Copy, Debug)]
enum What {
    /// The compute before a record (its gap).
    Gap(usize),
    /// A compute record.
    Compute(usize),
    /// A network, INA or NVLink record.
    Comm(usize),
    /// A collective on one rank: its steps are the items of its group.
    Collective(usize, usize),
}

/// A collective (or a lone record) on one rank: its span, and its steps when it has more
/// than one.
#[derive(Clone, Debug)]
struct Group {
    head: Item,
    steps: Vec<Item>,
}

/// The selected ranks' items, then their events.
pub(super) struct Spans {
    ranks: Vec<Rank>,
    entries: Vec<Entry>,
    /// Per selected rank (by index in `ranks`): compute items.
    compute: Vec<Vec<Item>>,
    /// Per selected rank: collective id → its records' items; lone records under
    /// `None` keys of their own (`solo`).
    colls: Vec<BTreeMap<u64, Vec<Item>>>,
    solo: Vec<Vec<Item>>,
    /// Record ids by entry (for the args: joins `fct.csv` on `flow_id`).
    ids: Vec<u64>,
    /// Rank of each GPU node of the job, for naming peers.
    peers: Vec<u32>,
}

impl Spans {
    pub fn new(ranks: &[Rank], rank_of: &[u32]) -> Spans {
        let n = ranks.len();
        Spans {
            ranks: ranks.to_vec(),
            entries: Vec::new(),
            compute: vec![Vec::new(); n],
            colls: vec![BTreeMap::new(); n],
            solo: vec![Vec::new(); n],
            ids: Vec::new(),
            peers: rank_of.to_vec(),
        }
    }

    /// The items of entry `e`, timed by `times`.
    pub fn add(&mut self, e: &Entry, times: &RecordTimes) {
        let Ok(k) = self.ranks.binary_search(&e.rank) else {
            return;
        };
        let i = e.pos as usize;
        let (start, end) = (times.rec[i].start, times.rec[i].end);
        let idx = self.entries.len();
        self.entries.push(e.clone());
        self.ids.push(times.records.id(i).0);
        if e.gap > 0 {
            // ready when its last dep ended (the start of an INA edge is its unit's)
            let ready = times
                .records
                .deps_of(i)
                .iter()
                .map(|&d| times.rec[d as usize].end)
                .max()
                .unwrap_or(0);
            self.compute[k].push(Item {
                start: ready,
                end: ready + e.gap,
                what: What::Gap(idx),
            });
        }
        let item = |what| Item { start, end, what };
        match (e.mode, e.collective) {
            (Mode::Compute, _) => self.compute[k].push(item(What::Compute(idx))),
            (_, Some(c)) => self.colls[k]
                .entry(c)
                .or_default()
                .push(item(What::Comm(idx))),
            (_, None) => self.solo[k].push(item(What::Comm(idx))),
        }
    }

    /// The span events of every rank, sorted per thread, and the metadata naming the
    /// processes (stages) and threads they use.
    pub fn finish(mut self, layout: &RankLayout) -> (Vec<Event>, Vec<Event>) {
        let mut spans = Vec::new();
        let mut meta = Vec::new();
        let mut stages_used = std::collections::BTreeSet::new();
        let mut tid = 0u32;
        for k in 0..self.ranks.len() {
            let rank = self.ranks[k];
            let c = layout.coords(rank);
            let pid = c.pp + 1;
            stages_used.insert(c.pp);
            let label = format!("rank {} (tp {}, cp {}, dp {})", rank.0, c.tp, c.cp, c.dp);
            let compute: Vec<Group> = std::mem::take(&mut self.compute[k])
                .into_iter()
                .map(|head| Group {
                    head,
                    steps: Vec::new(),
                })
                .collect();
            let mut comm: Vec<Group> = std::mem::take(&mut self.solo[k])
                .into_iter()
                .map(|head| Group {
                    head,
                    steps: Vec::new(),
                })
                .collect();
            for (_, steps) in std::mem::take(&mut self.colls[k]) {
                comm.push(self.collective(steps));
            }
            for (kind, groups) in [("compute", compute), ("comm", comm)] {
                let lanes = pack(groups);
                for (j, lane) in lanes.into_iter().enumerate() {
                    tid += 1;
                    let name = match j {
                        0 => format!("{label} {kind}"),
                        _ => format!("{label} {kind} {}", j + 1),
                    };
                    meta.push(Event::ThreadName { pid, tid, name });
                    meta.push(Event::ThreadSort {
                        pid,
                        tid,
                        index: tid,
                    });
                    let mut lane = lane;
                    // outer first when two start together: a viewer nests by order
                    lane.sort_by_key(|it| (it.start, std::cmp::Reverse(it.end)));
                    spans.extend(lane.iter().map(|it| self.event(it, pid, tid)));
                }
            }
        }
        let mut head = Vec::new();
        for s in stages_used {
            head.push(Event::ProcessName {
                pid: s + 1,
                name: format!("stage {s}"),
            });
            head.push(Event::ProcessSort {
                pid: s + 1,
                index: s,
            });
        }
        head.extend(meta);
        (spans, head)
    }

    /// A collective's span over its records on one rank; its records are its steps when
    /// there is more than one.
    fn collective(&self, mut steps: Vec<Item>) -> Group {
        steps.sort_by_key(|s| (s.start, s.end));
        let start = steps.iter().map(|s| s.start).min().unwrap_or(0);
        let end = steps.iter().map(|s| s.end).max().unwrap_or(0);
        let first = match steps[0].what {
            What::Comm(i) => i,
            _ => unreachable!("collective steps are records"),
        };
        if steps.len() == 1 {
            return Group {
                head: steps.pop().expect("one"),
                steps: Vec::new(),
            };
        }
        Group {
            head: Item {
                start,
                end,
                what: What::Collective(first, steps.len()),
            },
            steps,
        }
    }

    /// How a peer node is named: its rank, or the node.
    fn peer(&self, e: &Entry) -> String {
        match self.peers.get(e.peer.idx()) {
            Some(&r) if r != u32::MAX => format!("rank {r}"),
            _ => format!("node {}", e.peer.0),
        }
    }

    /// The event of item `it` on thread `tid` of process `pid`.
    fn event(&self, it: &Item, pid: u32, tid: u32) -> Event {
        let mut args = Args::new();
        let (name, cat) = match it.what {
            What::Gap(i) | What::Compute(i) => {
                let e = &self.entries[i];
                for (k, v) in [("microbatch", e.microbatch), ("layer", e.layer)] {
                    if let Some(v) = v {
                        args.push((k, v.into()));
                    }
                }
                let name = match (e.microbatch, e.layer) {
                    (Some(m), Some(l)) => format!("compute mb {m} layer {l}"),
                    (Some(m), None) => format!("compute mb {m}"),
                    _ => "compute".to_string(),
                };
                if let What::Gap(_) = it.what {
                    // the record it precedes, by id (its name would double the span's size)
                    args.push(("before_record", self.ids[i].into()));
                } else {
                    args.push(("record", self.ids[i].into()));
                }
                (name, "compute")
            }
            What::Comm(i) => {
                let e = &self.entries[i];
                tags(&mut args, e);
                args.push(("record", self.ids[i].into()));
                args.push(("bytes", e.bytes.into()));
                args.push(("mode", e.mode.as_str().into()));
                args.push(("peer", self.peer(e).into()));
                if e.mode == Mode::Net {
                    args.push(("nccl_channel", e.channel.into()));
                }
                (self.record_name(e), e.class.as_str())
            }
            What::Collective(i, n) => {
                let e = &self.entries[i];
                args.push(("collective", e.collective.unwrap_or(0).into()));
                if let Some(g) = e.group {
                    args.push(("group_size", g.into()));
                }
                if let Some(m) = e.microbatch {
                    args.push(("microbatch", m.into()));
                }
                if let Some(l) = e.layer {
                    args.push(("layer", l.into()));
                }
                args.push(("records_on_this_rank", n.into()));
                (
                    format!("{} collective {}", e.class, e.collective.unwrap_or(0)),
                    e.class.as_str(),
                )
            }
        };
        Event::Span {
            name,
            cat,
            start_ns: it.start,
            dur_ns: it.end - it.start,
            pid,
            tid,
            args,
        }
    }

    /// The name of one record's span.
    fn record_name(&self, e: &Entry) -> String {
        let peer = self.peer(e);
        match (e.mode, e.collective) {
            (Mode::Compute, _) => "compute".into(),
            (Mode::Ina, _) => match e.dir {
                Some(AggDir::Down) => format!("{} ina down from {peer}", e.class),
                _ => format!("{} ina up to {peer}", e.class),
            },
            (Mode::NvLink, Some(c)) => format!("{} collective {c} (nvlink)", e.class),
            (Mode::Net, Some(c)) => match e.step {
                Some(s) => format!("{} collective {c} step {s} to {peer}", e.class),
                None => format!("{} collective {c} to {peer}", e.class),
            },
            (_, None) => match e.microbatch {
                Some(m) => format!("{} send mb {m} to {peer}", e.class),
                None => format!("{} send to {peer}", e.class),
            },
        }
    }
}

/// Micro-batch, layer and collective of a record, when it has them.
fn tags(args: &mut Args, e: &Entry) {
    for (k, v) in [
        ("microbatch", e.microbatch.map(u64::from)),
        ("layer", e.layer.map(u64::from)),
        ("collective", e.collective),
        ("step", e.step.map(u64::from)),
        ("group_size", e.group.map(u64::from)),
    ] {
        if let Some(v) = v {
            args.push((k, v.into()));
        }
    }
}

/// The groups on lanes where each lane's spans nest: a group of `m` overlapping step
/// lanes takes `m` adjacent lanes from its start to its end (its head and first step
/// lane on the first). Greedy in time order; the result is a function of the input order
/// only (ties broken by the sort's stability).
fn pack(mut groups: Vec<Group>) -> Vec<Vec<Item>> {
    groups.sort_by_key(|g| (g.head.start, std::cmp::Reverse(g.head.end)));
    let mut lanes: Vec<Vec<Item>> = Vec::new();
    let mut free_at: Vec<u64> = Vec::new();
    for g in groups {
        let sub = step_lanes(g.steps);
        let m = sub.len().max(1);
        let start = g.head.start;
        let base = (0..=free_at.len())
            .find(|&b| (b..b + m).all(|l| free_at.get(l).is_none_or(|&f| f <= start)))
            .expect("the lanes past the last are free");
        if lanes.len() < base + m {
            lanes.resize(base + m, Vec::new());
            free_at.resize(base + m, 0);
        }
        // a span holds its lane for at least a nanosecond, so no two spans of a lane
        // start together (a viewer would nest the shorter in the longer)
        for f in &mut free_at[base..base + m] {
            *f = g.head.end.max(start + 1);
        }
        lanes[base].push(g.head);
        for (j, items) in sub.into_iter().enumerate() {
            lanes[base + j].extend(items);
        }
    }
    lanes
}

/// A collective's steps on as few lanes as keep each lane's steps disjoint (interval
/// partitioning, in time order).
fn step_lanes(mut steps: Vec<Item>) -> Vec<Vec<Item>> {
    steps.sort_by_key(|s| (s.start, s.end));
    let mut lanes: Vec<Vec<Item>> = Vec::new();
    for s in steps {
        let fits = |l: &Vec<Item>| l.last().is_none_or(|p| p.end.max(p.start + 1) <= s.start);
        match lanes.iter().position(fits) {
            Some(j) => lanes[j].push(s),
            None => lanes.push(vec![s]),
        }
    }
    lanes
}

/// Keep at most `budget` of the spans and counter samples `events`: those that start
/// first (the timeline stops at a time). Returns what was dropped.
pub(super) fn truncate(events: &mut Vec<Event>, budget: usize) -> Option<String> {
    if events.len() <= budget {
        return None;
    }
    let start = |e: &Event| match e {
        Event::Span { start_ns, .. } => *start_ns,
        Event::Counter { time_ns, .. } => *time_ns,
        _ => 0,
    };
    let mut starts: Vec<u64> = events.iter().map(start).collect();
    starts.sort_unstable();
    let cut = starts[budget];
    let before = events.len();
    events.retain(|e| start(e) < cut);
    Some(format!(
        "timeline truncated at {:.3} ms to stay within --timeline-max-events: the {} spans and counter samples from then on were dropped, {} kept",
        cut as f64 / 1e6,
        before - events.len(),
        events.len(),
    ))
}
