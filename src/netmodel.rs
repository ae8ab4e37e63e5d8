//! The fluid network model's formulas, in one place: the replayer simulates with them and
//! the planner (`crate::plan`) predicts with them, so a plan's prediction and its replay
//! cannot disagree about what a window, a tree or a header costs.
//!
//! Rates are in bytes per nanosecond (a link of `r` bit/s moves `r / 8e9` B/ns), times in
//! nanoseconds. Wire bytes are payload plus headers, [`crate::units::Bytes::with_headers`].

use crate::units::BitsPerSec;

/// Bytes per nanosecond of a link rate.
#[inline]
pub fn bytes_per_ns(rate: BitsPerSec) -> f64 {
    rate.0 as f64 / 8e9
}

/// Wire bytes per ns a window of `slots` packets of `packet` wire bytes each (payload plus
/// headers) sustains over a round trip of `rtt` ns: SwitchML's `window·payload / RTT` of
/// payload, counted on the wire, because the fluid it caps is wire bytes (a payload-only
/// rate applied to wire bytes would slow a 256-byte-payload stream by 48/256, 19 %);
/// unlimited when `rtt` is 0.
#[inline]
pub fn window_rate(slots: u32, packet: u64, rtt: u64) -> f64 {
    if rtt == 0 {
        f64::INFINITY
    } else {
        slots as f64 * packet as f64 / rtt as f64
    }
}

/// Nanoseconds to move `bytes` at `rate` bytes/ns, rounded up (a tolerance of 1e-6 ns
/// keeps exact quotients such as 80000.0000000001 from rounding to the next ns); 0 for
/// nothing to move or an unlimited rate.
#[inline]
pub fn fluid_time(bytes: f64, rate: f64) -> u64 {
    if bytes <= 0.0 || rate.is_infinite() {
        return 0;
    }
    (bytes / rate - 1e-6).ceil().max(0.0) as u64
}

/// Direction of one edge of an aggregation tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EdgeDir {
    /// Child → parent (partial aggregates).
    Up,
    /// Parent → child (the result multicast back).
    Down,
}

/// Propagation latency of an aggregation tree: (longest up chain, longest down chain),
/// each the largest sum of edge delays along a path of edges (`from` → `to`, `delay` ns).
/// An INA stream's round trip is their sum. Edges may come in any order.
pub fn tree_latency<N: Copy + Eq + std::hash::Hash>(edges: &[(N, N, u64, EdgeDir)]) -> (u64, u64) {
    let c = TreeChains::new(edges);
    (c.up_latency(), c.down_latency())
}

/// The chains of an aggregation tree, per node, found by relaxation over the edge list
/// (trees are shallow, so it converges in a few passes): what the tree's latency and each
/// switch's slot holding interval are read from.
pub struct TreeChains<N> {
    /// Longest chain of up edges ending at a node (the last packet's arrival).
    up_long: std::collections::HashMap<N, u64>,
    /// Shortest chain of up edges from a leaf to a node (the first packet's arrival).
    up_first: std::collections::HashMap<N, u64>,
    /// Longest chain of down edges starting at a node.
    down_long: std::collections::HashMap<N, u64>,
    /// Longest chain of down edges from the root to a node.
    from_root: std::collections::HashMap<N, u64>,
    /// Nodes that send down edges.
    down_src: std::collections::HashSet<N>,
}

impl<N: Copy + Eq + std::hash::Hash> TreeChains<N> {
    /// Relax every chain over `edges` (`from`, `to`, delay ns, direction). A node that no
    /// up edge enters is a leaf (its first packet leaves at 0).
    pub fn new(edges: &[(N, N, u64, EdgeDir)]) -> TreeChains<N> {
        use std::collections::{HashMap, HashSet};
        let up_dst: HashSet<N> = edges
            .iter()
            .filter(|e| e.3 == EdgeDir::Up)
            .map(|e| e.1)
            .collect();
        let mut c = TreeChains {
            up_long: HashMap::new(),
            up_first: HashMap::new(),
            down_long: HashMap::new(),
            from_root: HashMap::new(),
            down_src: edges
                .iter()
                .filter(|e| e.3 == EdgeDir::Down)
                .map(|e| e.0)
                .collect(),
        };
        let relax_max = |map: &mut HashMap<N, u64>, to: N, v: u64| {
            let e = map.entry(to).or_insert(0);
            let grew = v > *e;
            *e = (*e).max(v);
            grew
        };
        for _ in 0..edges.len() {
            let mut changed = false;
            for &(from, to, d, dir) in edges {
                match dir {
                    EdgeDir::Up => {
                        let v = c.up_long.get(&from).copied().unwrap_or(0) + d;
                        changed |= relax_max(&mut c.up_long, to, v);
                        let first = if up_dst.contains(&from) {
                            c.up_first.get(&from).copied()
                        } else {
                            Some(0)
                        };
                        if let Some(f) = first {
                            let e = c.up_first.entry(to).or_insert(u64::MAX);
                            if f + d < *e {
                                *e = f + d;
                                changed = true;
                            }
                        }
                    }
                    EdgeDir::Down => {
                        let v = c.down_long.get(&to).copied().unwrap_or(0) + d;
                        changed |= relax_max(&mut c.down_long, from, v);
                        let v = c.from_root.get(&from).copied().unwrap_or(0) + d;
                        changed |= relax_max(&mut c.from_root, to, v);
                    }
                }
            }
            if !changed {
                break;
            }
        }
        c
    }

    /// The longest up chain: when the last packet reaches the root after the last byte
    /// left the workers.
    pub fn up_latency(&self) -> u64 {
        self.up_long.values().copied().max().unwrap_or(0)
    }

    /// The longest down chain.
    pub fn down_latency(&self) -> u64 {
        self.down_long.values().copied().max().unwrap_or(0)
    }

    /// When aggregating switch `s` holds a stream's slots: (from the stream's start to its
    /// first packet's arrival at `s` — the shortest up chain; from the stream's last byte
    /// leaving the workers to its last result leaving `s` — for a switch that sends
    /// results down, the longest up chain plus the down chain from the root to `s`; for
    /// one that only sums upwards, the longest up chain to it).
    pub fn slot_hold(&self, s: N) -> (u64, u64) {
        let acquire = self.up_first.get(&s).copied().unwrap_or(0);
        let release = if self.down_src.contains(&s) {
            self.up_latency() + self.from_root.get(&s).copied().unwrap_or(0)
        } else {
            self.up_long.get(&s).copied().unwrap_or(0)
        };
        (acquire, release)
    }
}

/// A unit's own rate limit over the channels it occupies: the smallest `capacity / k` over
/// its channels, where a channel listed `k` times (k edges of one tree crossing it) is
/// shared k ways. `channels` must be sorted so equal channels are adjacent; `cap(c)` is
/// the channel's capacity in bytes/ns. Unlimited for no channel.
pub fn multiset_cap(channels: &[u32], cap: impl Fn(u32) -> f64) -> f64 {
    channels
        .chunk_by(|a, b| a == b)
        .map(|run| cap(run[0]) / run.len() as f64)
        .fold(f64::INFINITY, f64::min)
}

/// Nanoseconds one packet of `packet` wire bytes spends being serialized along a path,
/// `shares` being the capacity (B/ns) each hop gives the packet's stream: a hop's
/// capacity, or its capacity over `k` when `k` edges of one tree cross it (their `k`
/// copies of a sequence number go out one after the other, as [`multiset_cap`] shares
/// it). Store-and-forward: the glue's point-to-point links deliver a packet only once
/// its last bit is through (`ns3-glue/helper/ina3d-helper.cc` builds every link with
/// ns-3's `PointToPointHelper`) and a switch sends it on only then, so every hop adds
/// `packet / share`. Rounded up to the ns once, over the whole path.
pub fn store_and_forward(packet: u64, shares: impl IntoIterator<Item = f64>) -> u64 {
    let t: f64 = shares.into_iter().map(|c| packet as f64 / c).sum();
    (t - 1e-6).ceil().max(0.0) as u64
}

/// The round trip that paces a windowed INA stream: a slot is used again once its
/// sequence number's result is back at the worker (`ns3-glue/model/ina-apps.cc`,
/// `PumpIna`), so the window cycles once per longest up chain plus longest down chain,
/// each edge timed as its path's propagation (`edges`: from, to, propagation ns,
/// direction) plus `serialization[i]`, edge `i`'s [`store_and_forward`] of one packet.
/// No processing time at the switches (the glue's applications have none).
/// Approximation: the queueing delay other traffic adds on the tree's channels is not in
/// it (`docs/model.md#known-gaps`).
pub fn window_round_trip<N: Copy + Eq + std::hash::Hash>(
    edges: &[(N, N, u64, EdgeDir)],
    serialization: &[u64],
) -> u64 {
    debug_assert_eq!(edges.len(), serialization.len());
    let timed: Vec<(N, N, u64, EdgeDir)> = edges
        .iter()
        .zip(serialization)
        .map(|(&(a, b, d, dir), &s)| (a, b, d + s, dir))
        .collect();
    let (up, down) = tree_latency(&timed);
    up + down
}

/// What one stream gets of channel `c` (capacity `cap`, B/ns) when `c` is listed `k`
/// times in the sorted multiset `channels`: `cap / k` (the whole `cap` when it is not
/// listed), the share [`multiset_cap`] takes its minimum over.
pub fn multiset_share(channels: &[u32], c: u32, cap: f64) -> f64 {
    let k = channels.partition_point(|&x| x <= c) - channels.partition_point(|&x| x < c);
    cap / k.max(1) as f64
}

/// Round trips a windowed stream of `wire` bytes in packets of `packet` wire bytes takes
/// with `slots` packets in flight: `ceil(packets / slots)`, `packets = ceil(wire /
/// packet)` (every packet carries the same headers, the last a shorter payload).
pub fn window_rounds(wire: f64, packet: u64, slots: u32) -> u64 {
    if packet == 0 || slots == 0 {
        return 0;
    }
    let packets = (wire / packet as f64 - 1e-9).ceil().max(0.0) as u64;
    packets.div_ceil(slots as u64)
}

/// What an INA stream's end adds after its fluid's last byte left at `rate`: the tree's
/// propagation `latency` when the network bounds it (the last packet's trip), but when
/// its window bounds it (`rate` at its window rate `window`, [`window_rate`]) the rest of
/// its last round trip: a window leaves in one burst at the start of each round and its
/// results are back one `rtt` later (`ns3-glue/model/ina-apps.cc`, `PumpIna`), so
/// `rounds` ([`window_rounds`]) of them end at `rounds × rtt`, where the fluid at the
/// window rate has its last byte out at `wire / window` ([`fluid_time`]; one latency
/// more would count the last round's trip twice: +2.3 % on a 26-round stream).
/// Approximation: the regime is the one at the end and is chosen whole (a stream whose
/// network share is barely above its window rate ends up to one latency earlier than
/// one barely below it).
pub fn ina_tail(wire: f64, rate: f64, window: f64, rounds: u64, rtt: u64, latency: u64) -> u64 {
    if window.is_finite() && rate >= window * (1.0 - 1e-9) {
        (rounds * rtt).saturating_sub(fluid_time(wire, window))
    } else {
        latency
    }
}

/// Time of one INA aggregation alone on the network: its `wire` bytes at the smaller of
/// its tree's own limit (`tree_cap`, [`multiset_cap`]) and its window (`slots` packets of
/// `packet` wire bytes per round trip `rtt`, [`window_round_trip`]), then its
/// [`ina_tail`] (the tree's propagation `latency`, up plus down chain, unless the window
/// bounds it). `windowed = false` (a multicast with nothing to sum) has no window limit.
pub fn ina_time(
    wire: u64,
    tree_cap: f64,
    slots: u32,
    packet: u64,
    latency: u64,
    rtt: u64,
    windowed: bool,
) -> u64 {
    let window = if windowed {
        window_rate(slots, packet, rtt)
    } else {
        f64::INFINITY
    };
    let rate = tree_cap.min(window);
    let rounds = window_rounds(wire as f64, packet, slots);
    fluid_time(wire as f64, rate) + ina_tail(wire as f64, rate, window, rounds, rtt, latency)
}

/// KMAX/KMIN (KB of 1,000 B) and PMAX of the ECN marking on a switch port of `rate`:
/// SimAI's values for the rates its configuration lists (25, 50, 100, 200, 400 and
/// 1,600 Gb/s), else DCQCN's usual linear rule of its 25–100 Gb/s entries, KMAX = 16 KB
/// and KMIN = 4 KB per Gb/s, PMAX 0.2. `ns3 emit` writes them into `config.txt` (the
/// glue marks with them) and the replayer's DCQCN model marks with the same.
pub fn red_params(rate: BitsPerSec) -> (u64, u64, f64) {
    const G: u64 = 1_000_000_000;
    match rate.0 {
        r if r == 200 * G => (1200, 300, 0.8),
        r if r == 400 * G => (3200, 800, 0.2),
        r if r == 1600 * G => (2400, 600, 0.2),
        r => {
            let g = (r / G).max(1);
            (16 * g, 4 * g, 0.2)
        }
    }
}

/// Probability that a packet entering a switch queue of `queue` bytes is ECN-marked:
/// 0 up to KMIN, rising linearly to PMAX at KMAX, 1 above (RED on the instantaneous
/// queue, as the glue's ports and HPCC's switches mark). Thresholds from [`red_params`].
pub fn mark_probability(queue: f64, rate: BitsPerSec) -> f64 {
    let (kmax, kmin, pmax) = red_params(rate);
    let (kmin, kmax) = (kmin as f64 * 1000.0, kmax as f64 * 1000.0);
    if queue <= kmin {
        0.0
    } else if queue >= kmax {
        1.0
    } else {
        pmax * (queue - kmin) / (kmax - kmin)
    }
}

/// DCQCN's parameters (the `config.txt` keys of HPCC's and SimAI's ns-3), times in ns;
/// [`Default`] is SimAI's configuration (`SimAI.conf`): `ns3 emit` writes it into
/// `config.txt` and the replayer's DCQCN model runs it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DcqcnParams {
    /// `EWMA_GAIN`, g.
    pub ewma_gain: f64,
    /// `ALPHA_RESUME_INTERVAL`: alpha's update period.
    pub alpha_resume_ns: u64,
    /// `RATE_DECREASE_INTERVAL`: the period of the rate-decrease checks.
    pub rate_decrease_ns: u64,
    /// `RP_TIMER`: the rate-increase timer.
    pub rp_timer_ns: u64,
    /// `FAST_RECOVERY_TIMES`: increase events spent in fast recovery.
    pub fast_recovery_times: u32,
    /// `RATE_AI`: additive increase step.
    pub rate_ai: BitsPerSec,
    /// `RATE_HAI`: hyper increase step.
    pub rate_hai: BitsPerSec,
    /// `MIN_RATE`: the lowest rate a cut reaches.
    pub min_rate: BitsPerSec,
    /// `CLAMP_TARGET_RATE`: every cut sets the target to the rate.
    pub clamp_target: bool,
    /// The notification point sends at most one CNP per queue pair per this interval.
    pub cnp_interval_ns: u64,
}

impl Default for DcqcnParams {
    fn default() -> Self {
        let mbps = |m: u64| BitsPerSec(m * 1_000_000);
        DcqcnParams {
            ewma_gain: 1.0 / 256.0,
            alpha_resume_ns: 1_000,
            rate_decrease_ns: 4_000,
            rp_timer_ns: 900_000,
            fast_recovery_times: 1,
            rate_ai: mbps(50),
            rate_hai: mbps(100),
            min_rate: mbps(100),
            clamp_target: false,
            cnp_interval_ns: 50_000,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_of_256_packets_of_256_bytes_over_4_us_moves_16_bytes_per_ns() {
        assert_eq!(window_rate(256, 256, 4096), 16.0);
        assert!(window_rate(1, 1, 0).is_infinite());
    }

    #[test]
    fn fluid_time_rounds_up_but_forgives_float_noise() {
        assert_eq!(fluid_time(1000.0, 3.0), 334);
        assert_eq!(fluid_time(80000.0000000001, 1.0), 80000);
        assert_eq!(fluid_time(0.0, 1.0), 0);
        assert_eq!(fluid_time(5.0, f64::INFINITY), 0);
    }

    #[test]
    fn tree_latency_takes_the_longest_chain_each_way() {
        // members 1, 2 → switch 10 → root 20; 3 → root 20 directly
        use EdgeDir::*;
        let e = [
            (1, 10, 100, Up),
            (2, 10, 100, Up),
            (10, 20, 50, Up),
            (3, 20, 120, Up),
            (20, 10, 50, Down),
            (10, 1, 100, Down),
            (10, 2, 100, Down),
            (20, 3, 120, Down),
        ];
        assert_eq!(tree_latency(&e), (150, 150));
        // switch 10: first packet after 100, last result leaves it at 150 (up) + 50;
        // the root: first packet at 120 (from 3), last result leaves at 150
        let c = TreeChains::new(&e);
        assert_eq!(c.slot_hold(10), (100, 200));
        assert_eq!(c.slot_hold(20), (120, 150));
    }

    #[test]
    fn a_window_cycles_once_per_propagation_plus_one_serialization_per_hop() {
        // 304-byte packets (256 payload + 48 headers) at 100 Gb/s (12.5 B/ns): 24.32 ns
        // per hop; two hops up and two down: 97.28 ns, rounded up to 98
        assert_eq!(store_and_forward(304, [12.5; 4]), 98);
        // a hop two edges cross serializes both copies: 48.64 ns there
        assert_eq!(store_and_forward(304, [12.5, 6.25]), 73);
        assert_eq!(store_and_forward(304, []), 0);
        // host 1 → leaf 10 → spine 20 ← leaf 11 ← host 2, 1 µs per link, results back
        // down the same way; every edge one 100 Gb/s hop (24.32 ns, 25 rounded up)
        use EdgeDir::*;
        let e = [
            (1, 10, 1000, Up),
            (2, 11, 1000, Up),
            (10, 20, 1000, Up),
            (11, 20, 1000, Up),
            (20, 10, 1000, Down),
            (20, 11, 1000, Down),
            (10, 1, 1000, Down),
            (11, 2, 1000, Down),
        ];
        let ser = [store_and_forward(304, [12.5]); 8];
        assert_eq!(ser[0], 25);
        assert_eq!(window_round_trip(&e, &ser), 4 * 1025);
        assert_eq!(window_round_trip(&e, &[0; 8]), 4000);
        // 8 slots of 304 bytes per 4.1 µs: 1,024 packets take 128 round trips, the
        // last result back at the end of the 128th
        let rtt = window_round_trip(&e, &ser);
        let t = ina_time(1024 * 304, 12.5, 8, 304, 4000, rtt, true);
        assert_eq!(t, 128 * 4100);
    }

    #[test]
    fn a_window_bound_stream_ends_with_its_last_round_a_network_bound_one_a_latency_after_its_last_byte(
    ) {
        // 128 packets of 304 bytes (the last full), 5 slots: 26 rounds of 6,146 ns, the
        // 26th holding 3 packets
        assert_eq!(window_rounds(128.0 * 304.0, 304, 5), 26);
        assert_eq!(window_rounds(127.0 * 304.0 + 49.0, 304, 5), 26);
        assert_eq!(window_rounds(0.0, 304, 5), 0);
        let wire = 128.0 * 304.0;
        let window = window_rate(5, 304, 6146);
        // its fluid's last byte leaves at 128/5 rounds (157,337.6 ns, 157,338 rounded
        // up): 0.4 round remains
        assert_eq!(ina_tail(wire, window, window, 26, 6146, 6000), 2458);
        assert_eq!(
            ina_time(wire as u64, 12.5, 5, 304, 6000, 6146, true),
            26 * 6146
        );
        // the network bound (a third of the window rate): a latency after the last byte
        let slow = window / 3.0;
        assert_eq!(ina_tail(wire, slow, window, 26, 6146, 6000), 6000);
        assert_eq!(
            ina_time(wire as u64, slow, 5, 304, 6000, 6146, true),
            fluid_time(wire, slow) + 6000
        );
        // no window (a multicast): always the latency
        assert_eq!(ina_tail(wire, 1.0, f64::INFINITY, 0, 6146, 6000), 6000);
    }

    #[test]
    fn a_channel_crossed_twice_halves_the_units_cap() {
        assert_eq!(
            multiset_cap(&[1, 1, 2], |c| if c == 1 { 10.0 } else { 4.0 }),
            4.0
        );
        assert_eq!(multiset_cap(&[1, 1, 1, 2], |_| 12.0), 4.0);
        assert!(multiset_cap(&[], |_| 1.0).is_infinite());
        assert_eq!(multiset_share(&[1, 1, 2], 1, 10.0), 5.0);
        assert_eq!(multiset_share(&[1, 1, 2], 2, 10.0), 10.0);
        assert_eq!(multiset_share(&[1, 1, 2], 3, 10.0), 10.0);
    }
}
