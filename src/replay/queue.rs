//! The event queue: events popped in the order of `(time, kind, index, version)`, the
//! order a binary heap of those tuples gives, at a fraction of its cost.
//!
//! Simulated time never goes back: every event is pushed at or after the time being
//! processed. So the queue is split in two: the events of the current nanosecond, a small
//! binary heap ordered by `(kind, index, version)`, and the later ones, a *radix heap* on
//! their time (Ahuja, Mehlhorn, Orlin and Tarjan, 1990): bucket `b` holds the events
//! whose time first differs from the current time in bit `b − 1`, so a push is an append
//! and moving on to the next time empties the lowest non-empty bucket into lower ones —
//! each event moves down at most 64 times, in practice once or twice. With tens of
//! thousands of transfers in flight, a binary heap of every pending event spent a tenth
//! of a 32,768-GPU replay in its `pop`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// An event without its time: (kind, index, version); `K` orders the kinds.
pub(super) type Item<K> = (K, u32, u32);

/// Events by `(time, item)`, smallest first, for times that never go back.
pub(super) struct EventQueue<K: Ord + Copy> {
    /// The time of the events in `now_items` (the last time moved to).
    now: u64,
    /// The events at `now`.
    now_items: BinaryHeap<Reverse<Item<K>>>,
    /// The later events, bucket `b` those whose time's highest bit differing from `now`
    /// is bit `b − 1` (bucket 0 is never used: those are in `now_items`).
    buckets: Vec<Vec<(u64, Item<K>)>>,
    /// Events in `buckets`.
    later: usize,
}

impl<K: Ord + Copy> EventQueue<K> {
    /// An empty queue at time 0.
    pub fn new() -> Self {
        EventQueue {
            now: 0,
            now_items: BinaryHeap::new(),
            buckets: (0..65).map(|_| Vec::new()).collect(),
            later: 0,
        }
    }

    /// The bucket of time `t` > `now`.
    #[inline]
    fn bucket(now: u64, t: u64) -> usize {
        64 - (t ^ now).leading_zeros() as usize
    }

    /// Add an event at time `t`, which must not be before the time being processed (one
    /// that is, which the engine never pushes, is taken as an event of that time).
    #[inline]
    pub fn push(&mut self, t: u64, item: Item<K>) {
        debug_assert!(t >= self.now, "an event in the past: {t} < {}", self.now);
        if t <= self.now {
            self.now_items.push(Reverse(item));
        } else {
            self.buckets[Self::bucket(self.now, t)].push((t, item));
            self.later += 1;
        }
    }

    /// Events pending.
    pub fn len(&self) -> usize {
        self.now_items.len() + self.later
    }

    /// True when no event is pending.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The time of the next event, moving the queue on to it (the events of the time
    /// before must all have been popped); `None` when empty.
    pub fn next_time(&mut self) -> Option<u64> {
        if !self.now_items.is_empty() {
            return Some(self.now);
        }
        if self.later == 0 {
            return None;
        }
        let b = (1..self.buckets.len()).find(|&b| !self.buckets[b].is_empty())?;
        let moving = std::mem::take(&mut self.buckets[b]);
        let t = moving.iter().map(|e| e.0).min()?;
        self.now = t;
        for &(te, item) in &moving {
            if te == t {
                self.now_items.push(Reverse(item));
                self.later -= 1;
            } else {
                self.buckets[Self::bucket(t, te)].push((te, item));
            }
        }
        // hand the emptied bucket's allocation back for reuse
        let mut moving = moving;
        moving.clear();
        if self.buckets[b].is_empty() {
            self.buckets[b] = moving;
        }
        Some(t)
    }

    /// The next event of the current time (see [`EventQueue::next_time`]), if any.
    #[inline]
    pub fn pop_now(&mut self) -> Option<Item<K>> {
        self.now_items.pop().map(|Reverse(x)| x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The queue pops what a binary heap of (time, item) pops, pushes made while popping
    /// included, for times that never go back.
    #[test]
    fn events_come_out_in_the_order_of_a_binary_heap_of_the_tuples() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut q: EventQueue<u8> = EventQueue::new();
        let mut h: BinaryHeap<Reverse<(u64, u8, u32, u32)>> = BinaryHeap::new();
        let mut now = 0u64;
        let push = |q: &mut EventQueue<u8>, h: &mut BinaryHeap<_>, now: u64, r: u64| {
            // same time, near, far, and the far end of the range
            let t = match r % 4 {
                0 => now,
                1 => now + r % 50,
                2 => now + (r >> 8) % (1 << 40),
                _ => u64::MAX - r % 3,
            };
            let item = (
                (r >> 3) as u8 % 4,
                (r >> 16) as u32 % 100,
                (r >> 40) as u32 % 3,
            );
            q.push(t, item);
            h.push(Reverse((t, item.0, item.1, item.2)));
        };
        for _ in 0..200 {
            push(&mut q, &mut h, now, rnd());
        }
        let mut popped = 0;
        while let Some(t) = q.next_time() {
            assert!(t >= now);
            now = t;
            while let Some(item) = q.pop_now() {
                let Reverse(want) = h.pop().unwrap();
                assert_eq!((t, item.0, item.1, item.2), want);
                popped += 1;
                if popped < 20_000 && now < u64::MAX - 10 {
                    for _ in 0..1 + rnd() % 2 {
                        push(&mut q, &mut h, now, rnd());
                    }
                }
            }
            assert_eq!(q.len(), h.len());
        }
        assert!(h.is_empty());
        assert!(popped > 10_000, "{popped}");
    }
}
