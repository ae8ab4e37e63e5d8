//! The counter tracks of a timeline, in a process of their own (`network`): INA slots in
//! use per switch that held any, and the utilisation of the busiest link directions.
//!
//! Both are bounded: a track has at most [`POINTS`] samples. A switch whose occupancy
//! changes more often shows, per `1/POINTS` of the iteration, the most slots it held in
//! it. A link's utilisation is, per `1/POINTS` of the iteration, the payload bits of the
//! transfers crossing it in that bucket over what the link carries in it, each transfer
//! spread evenly over its own start to end (its average rate: the replay's rate changes
//! within a transfer and its headers are not counted, docs/timeline.md).

use super::PathSource;
use crate::formats::timeline_json::Event;
use crate::record::Mode;
use crate::replay::ReplayResult;
use crate::topology::{Channel, Topology};
use crate::units::NodeId;
use std::collections::{BTreeMap, HashMap};

/// The most samples one counter track holds.
pub const POINTS: u64 = 1000;

/// The counter events of `result`: INA slots per switch, then the `links` busiest link
/// directions; in process `stages + 1`.
pub(super) fn tracks(
    result: &ReplayResult,
    topo: &Topology,
    routes: &dyn PathSource,
    links: usize,
    stages: u32,
) -> Vec<Event> {
    let pid = stages + 1;
    let end = result.summary.iteration_time_ns;
    let mut out = slot_tracks(result, pid, end);
    out.extend(link_tracks(result, topo, routes, links, pid, end));
    out
}

/// The metadata of the counters' process, when it has any.
pub(super) fn metadata(stages: u32, counters: &[Event]) -> Vec<Event> {
    if counters.is_empty() {
        return Vec::new();
    }
    vec![
        Event::ProcessName {
            pid: stages + 1,
            name: "network".into(),
        },
        Event::ProcessSort {
            pid: stages + 1,
            index: stages,
        },
    ]
}

/// One counter track from its samples `(time, value)` in time order: each value as is
/// when they are few, else per bucket of the iteration `[0, end]` its largest.
fn bounded(
    name: &str,
    pid: u32,
    series: &'static str,
    samples: &[(u64, f64)],
    end: u64,
) -> Vec<Event> {
    let ev = |time_ns, v: f64| Event::Counter {
        name: name.to_string(),
        time_ns,
        pid,
        values: vec![(series, v)],
    };
    // of several samples at one time, the last holds
    let mut last: Vec<(u64, f64)> = Vec::new();
    for &(t, v) in samples {
        match last.last_mut() {
            Some(p) if p.0 == t => p.1 = v,
            _ => last.push((t, v)),
        }
    }
    if last.len() as u64 <= POINTS {
        return last.iter().map(|&(t, v)| ev(t, v)).collect();
    }
    let width = end.div_ceil(POINTS).max(1);
    let mut peak: BTreeMap<u64, f64> = BTreeMap::new();
    let mut held = 0.0;
    let mut k = 0;
    for b in 0..POINTS {
        let (lo, hi) = (b * width, (b + 1) * width);
        // the value held at the bucket's start, then every change within it
        let mut m: f64 = held;
        while k < last.len() && last[k].0 < hi {
            held = last[k].1;
            m = if last[k].0 < lo { held } else { m.max(held) };
            k += 1;
        }
        peak.insert(lo, m);
    }
    peak.into_iter().map(|(t, v)| ev(t, v)).collect()
}

/// INA slots in use, per switch that held any, ascending switch.
fn slot_tracks(result: &ReplayResult, pid: u32, end: u64) -> Vec<Event> {
    let mut per: BTreeMap<NodeId, Vec<(u64, f64)>> = BTreeMap::new();
    for s in &result.slots {
        per.entry(s.switch)
            .or_default()
            .push((s.time_ns, f64::from(s.slots_in_use)));
    }
    let mut out = Vec::new();
    for (sw, mut samples) in per {
        if samples.iter().all(|s| s.1 == 0.0) {
            continue;
        }
        // stable: file order among equal times is kept
        samples.sort_by_key(|s| s.0);
        out.extend(bounded(
            &format!("INA slots, switch {}", sw.0),
            pid,
            "in use",
            &samples,
            end,
        ));
    }
    out
}

/// The utilisation of the `n` link directions that carried the most bytes.
fn link_tracks(
    result: &ReplayResult,
    topo: &Topology,
    routes: &dyn PathSource,
    n: usize,
    pid: u32,
    end: u64,
) -> Vec<Event> {
    let mut busiest: Vec<_> = result.channels.iter().collect();
    busiest.sort_by_key(|c| (std::cmp::Reverse(c.bytes), c.link, c.from));
    busiest.truncate(n);
    if busiest.is_empty() || end == 0 {
        return Vec::new();
    }
    let hot: Vec<Channel> = busiest
        .iter()
        .map(|c| Channel::of(c.link, topo.links[c.link.idx()].a == c.from))
        .collect();
    let width = end.div_ceil(POINTS).max(1);
    let buckets = end.div_ceil(width) as usize;
    let mut bits = vec![vec![0f64; buckets]; hot.len()];
    let mut hits: HashMap<(NodeId, NodeId, u32), Vec<usize>> = HashMap::new();
    let t = &result.times;
    for i in 0..t.records.len() {
        let mode = t.records.mode(i);
        let (src, dst) = (t.records.src(i), t.records.dst(i));
        if !matches!(mode, Mode::Net | Mode::Ina) || src == dst {
            continue;
        }
        let ch = t.records.channel(i);
        let on = hits.entry((src, dst, ch)).or_insert_with(|| {
            let path = routes.channel_path(src, dst, ch).unwrap_or_default();
            (0..hot.len()).filter(|&k| path.contains(&hot[k])).collect()
        });
        if on.is_empty() {
            continue;
        }
        let (a, b) = (t.rec[i].start, t.rec[i].end);
        let total = t.records.bytes(i).0 as f64 * 8.0;
        for &k in on.iter() {
            spread(&mut bits[k], width, a, b, total);
        }
    }
    let mut out = Vec::new();
    for (k, c) in busiest.iter().enumerate() {
        let name = format!(
            "link {} node {} to {} utilisation",
            c.link.0, c.from.0, c.to.0
        );
        // bits a bucket can carry: rate (bit/s) × width (ns) / 1e9
        let cap = c.rate_bps as f64 * width as f64 / 1e9;
        let mut prev = None;
        for (j, &x) in bits[k].iter().enumerate() {
            let u = if cap > 0.0 { x / cap } else { 0.0 };
            // a counter holds its value until the next sample: repeats add nothing
            if prev == Some(u) {
                continue;
            }
            prev = Some(u);
            out.push(Event::Counter {
                name: name.clone(),
                time_ns: j as u64 * width,
                pid,
                values: vec![("utilisation", u)],
            });
        }
        out.push(Event::Counter {
            name,
            time_ns: end,
            pid,
            values: vec![("utilisation", 0.0)],
        });
    }
    out
}

/// Add `total` bits sent evenly over `[a, b)` to the buckets of `width` ns they cover.
fn spread(buckets: &mut [f64], width: u64, a: u64, b: u64, total: f64) {
    let last = buckets.len().saturating_sub(1);
    if b <= a {
        buckets[((a / width) as usize).min(last)] += total;
        return;
    }
    let per_ns = total / (b - a) as f64;
    let mut t = a;
    while t < b {
        let j = ((t / width) as usize).min(last);
        let hi = ((j as u64 + 1) * width).min(b).max(t + 1);
        buckets[j] += per_ns * (hi - t) as f64;
        t = hi;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_spread_over_buckets_in_proportion_to_the_time_in_each() {
        let mut b = vec![0.0; 4];
        // 300 bits over [50, 350): 50 ns in bucket 0, 100 in 1 and 2, 50 in 3
        spread(&mut b, 100, 50, 350, 300.0);
        assert_eq!(b, vec![50.0, 100.0, 100.0, 50.0]);
    }

    #[test]
    fn a_busy_track_keeps_each_buckets_peak() {
        // 2,000 changes alternating 0 and 5 over 2,000 ns: every bucket of 2 ns saw 5
        let samples: Vec<(u64, f64)> = (0..2000)
            .map(|t| (t, if t % 2 == 0 { 0.0 } else { 5.0 }))
            .collect();
        let ev = bounded("s", 1, "in use", &samples, 2000);
        assert_eq!(ev.len() as u64, POINTS);
        assert!(ev
            .iter()
            .all(|e| matches!(e, Event::Counter { values, .. } if values[0].1 == 5.0)));
    }
}
