//! The DCQCN model's timers (`src/replay/dcqcn/`): at most one pending time per key
//! (a kind and an index: a port's next event, a queue pair's next CNP, …), popped in
//! the order of `(time, kind, index)`.
//!
//! The model reschedules its keys far more often than they fire: on the 1,024-GPU GPT-3
//! job (docs/model.md#dcqcn-rate-model) a queue pair's predicted CNP moves at almost
//! every change of a port it crosses, about 100 M reschedules for 60 M events. A binary
//! heap of every time ever scheduled, each checked against its key's current time when
//! it surfaced, held 200 k entries of which most were stale, and popping them was a
//! third of the replay's CPU. Here each key has one entry whose position the heap keeps
//! (a 4-ary heap: shallower, and a node's children share a cache line), so a
//! reschedule moves the entry and nothing stale is ever popped. The order is the lazy
//! heap's exactly: it popped the current entries by the same total order, and equal
//! entries of one key were one event.

/// An entry: its time in the high 64 bits, its key `kind << 32 | index` in the low ones,
/// so that the integer order is the `(time, kind, index)` order and comparing two is
/// one branch-free compare (the heap is small, a few hundred entries, and its cost was
/// mispredicted branches, not memory).
type Entry = u128;

#[inline]
fn entry(t: u64, key: u64) -> Entry {
    ((t as u128) << 64) | key as u128
}

#[inline]
fn time(e: Entry) -> u64 {
    (e >> 64) as u64
}

/// Children per node.
const ARITY: usize = 4;

/// No entry: a key's position when it is not scheduled.
const NIL: u32 = u32::MAX;

/// Pending times by key, earliest first (module docs).
pub(super) struct Timers {
    heap: Vec<Entry>,
    /// Per kind, per index: the position of its entry in `heap` (`NIL`: none).
    pos: Vec<Vec<u32>>,
}

impl Timers {
    /// No timer pending, for keys of `kinds` kinds.
    pub fn new(kinds: usize) -> Timers {
        Timers {
            heap: Vec::new(),
            pos: vec![Vec::new(); kinds],
        }
    }

    #[inline]
    fn key(kind: usize, i: u32) -> u64 {
        ((kind as u64) << 32) | i as u64
    }

    #[inline]
    fn unkey(key: u64) -> (usize, u32) {
        ((key >> 32) as usize, key as u32)
    }

    #[inline]
    fn slot(&self, kind: usize, i: u32) -> u32 {
        self.pos[kind].get(i as usize).copied().unwrap_or(NIL)
    }

    /// The time key `(kind, i)` is scheduled at (`u64::MAX`: none).
    #[cfg(test)]
    pub fn at(&self, kind: usize, i: u32) -> u64 {
        match self.slot(kind, i) {
            NIL => u64::MAX,
            p => time(self.heap[p as usize]),
        }
    }

    /// Schedule key `(kind, i)` at `t`, replacing its pending time; `u64::MAX` cancels it.
    pub fn set(&mut self, kind: usize, i: u32, t: u64) {
        let p = self.slot(kind, i);
        if p == NIL {
            if t == u64::MAX {
                return;
            }
            let v = &mut self.pos[kind];
            if v.len() <= i as usize {
                v.resize(i as usize + 1, NIL);
            }
            let n = self.heap.len();
            self.heap.push(entry(t, Self::key(kind, i)));
            self.pos[kind][i as usize] = n as u32;
            self.sift_up(n);
            return;
        }
        let p = p as usize;
        let old = time(self.heap[p]);
        if t == old {
            return;
        }
        if t == u64::MAX {
            self.remove_at(p);
        } else {
            self.heap[p] = entry(t, self.heap[p] as u64);
            if t < old {
                self.sift_up(p);
            } else {
                self.sift_down(p);
            }
        }
    }

    /// The earliest pending timer, `(time, kind, index)`.
    #[inline]
    pub fn peek(&self) -> Option<(u64, usize, u32)> {
        self.heap.first().map(|&e| {
            let (kind, i) = Self::unkey(e as u64);
            (time(e), kind, i)
        })
    }

    /// Take the earliest pending timer off (its key is then not scheduled).
    ///
    /// The hole at the top moves down to a leaf along the smaller children, and the last
    /// entry fills it and moves up (it nearly always belongs near the bottom): one
    /// compare per level fewer than sifting the last entry down from the top.
    pub fn pop(&mut self) -> Option<(u64, usize, u32)> {
        let top = self.peek()?;
        let (kind, i) = (top.1, top.2);
        self.pos[kind][i as usize] = NIL;
        let last = self.heap.pop().expect("a top entry");
        let n = self.heap.len();
        if n == 0 {
            return Some(top);
        }
        let mut p = 0;
        loop {
            let first = p * ARITY + 1;
            if first >= n {
                break;
            }
            let best = self.min_child(first, n);
            self.heap[p] = self.heap[best];
            self.place(p);
            p = best;
        }
        self.heap[p] = last;
        self.sift_up(p);
        Some(top)
    }

    /// The smallest of the children `first..` of a node (`first < n`, the heap's length).
    #[inline]
    fn min_child(&self, first: usize, n: usize) -> usize {
        let h = &self.heap;
        if first + ARITY <= n {
            // a full node: a tournament of selects, no data-dependent branch
            let a = first + usize::from(h[first + 1] < h[first]);
            let b = first + 2 + usize::from(h[first + 3] < h[first + 2]);
            if h[b] < h[a] {
                b
            } else {
                a
            }
        } else {
            let mut best = first;
            for c in first + 1..n {
                best = if h[c] < h[best] { c } else { best };
            }
            best
        }
    }

    /// Take the entry at position `p` off, the last entry taking its place.
    fn remove_at(&mut self, p: usize) {
        let (kind, i) = Self::unkey(self.heap[p] as u64);
        self.pos[kind][i as usize] = NIL;
        let last = self.heap.pop().expect("an entry at p");
        if p < self.heap.len() {
            let moved = last;
            self.heap[p] = moved;
            self.place(p);
            // the moved entry came from a leaf: it may belong above or below `p`
            if p > 0 && moved < self.heap[(p - 1) / ARITY] {
                self.sift_up(p);
            } else {
                self.sift_down(p);
            }
        }
    }

    /// Record the position of the entry at `p`.
    #[inline]
    fn place(&mut self, p: usize) {
        let (kind, i) = Self::unkey(self.heap[p] as u64);
        self.pos[kind][i as usize] = p as u32;
    }

    fn sift_up(&mut self, mut p: usize) {
        let e = self.heap[p];
        while p > 0 {
            let up = (p - 1) / ARITY;
            if self.heap[up] <= e {
                break;
            }
            self.heap[p] = self.heap[up];
            self.place(p);
            p = up;
        }
        self.heap[p] = e;
        self.place(p);
    }

    fn sift_down(&mut self, mut p: usize) {
        let e = self.heap[p];
        let n = self.heap.len();
        loop {
            let first = p * ARITY + 1;
            if first >= n {
                break;
            }
            let best = self.min_child(first, n);
            if self.heap[best] >= e {
                break;
            }
            self.heap[p] = self.heap[best];
            self.place(p);
            p = best;
        }
        self.heap[p] = e;
        self.place(p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    /// Timers pop what the lazy heap they replace popped: every time ever scheduled in a
    /// binary heap, an entry skipped unless it is its key's current time, over random
    /// reschedules, cancellations and pops (times never before the last popped, as the
    /// model schedules them).
    #[test]
    fn timers_pop_the_current_entries_of_a_lazy_heap_in_its_order() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let kinds = 3;
        let n = 40u32;
        let mut timers = Timers::new(kinds);
        let mut lazy: BinaryHeap<Reverse<(u64, usize, u32)>> = BinaryHeap::new();
        let mut cur = vec![vec![u64::MAX; n as usize]; kinds];
        let mut now = 0u64;
        let mut popped = 0;
        for _ in 0..200_000 {
            let r = rnd();
            let (kind, i) = ((r % kinds as u64) as usize, ((r >> 8) % n as u64) as u32);
            match (r >> 20) % 8 {
                0..=4 => {
                    let t = match (r >> 24) % 5 {
                        0 => u64::MAX,
                        1 => now,
                        _ => now + (r >> 32) % 200,
                    };
                    timers.set(kind, i, t);
                    if cur[kind][i as usize] != t {
                        cur[kind][i as usize] = t;
                        if t < u64::MAX {
                            lazy.push(Reverse((t, kind, i)));
                        }
                    }
                }
                _ => {
                    let want = loop {
                        match lazy.pop() {
                            Some(Reverse((t, k, j))) if cur[k][j as usize] == t => {
                                cur[k][j as usize] = u64::MAX;
                                break Some((t, k, j));
                            }
                            Some(_) => continue,
                            None => break None,
                        }
                    };
                    assert_eq!(timers.pop(), want);
                    if let Some((t, ..)) = want {
                        now = t;
                        popped += 1;
                    }
                }
            }
            for (k, times) in cur.iter().enumerate() {
                for (j, &t) in times.iter().enumerate() {
                    assert_eq!(timers.at(k, j as u32), t);
                }
            }
        }
        assert!(popped > 10_000, "{popped}");
    }
}
