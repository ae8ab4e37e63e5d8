//! The aggregator-slot pools of the INA switches and the three slot policies
//! ([`InaPolicy`]; what each does is in the replayer's module docs).

use super::prepare::Agg;
use super::{InaPolicy, InaSwitchModel};
use crate::formats::switches_csv::SlotSample;
use crate::record::Class;
use crate::units::NodeId;
use std::collections::BTreeSet;

/// Index of a class in the per-class arrays (compute never aggregates; it shares the
/// embedding slot only to keep the arrays at four).
pub(super) fn class_idx(c: Class) -> usize {
    match c {
        Class::Tp => 0,
        Class::Pp => 1,
        Class::Dp => 2,
        Class::Emb | Class::Compute => 3,
    }
}

/// Slot pools of the aggregating switches.
pub(super) struct Pools {
    policy: InaPolicy,
    total: u32,
    share: [u32; 4],
    used: Vec<[u32; 4]>,
    node_of: Vec<NodeId>,
    /// Aggregations waiting for slots, by (priority rank, arrival, aggregation).
    pub waiting: BTreeSet<(u8, u64, u32)>,
    /// Rank of each class in the priority order (`ina_classes` order; absent classes last).
    prio: [u8; 4],
    /// Every change of a switch's occupancy, in time order.
    pub samples: Vec<SlotSample>,
    peak: u32,
}

/// A policy's answer to an aggregation asking for slots.
pub(super) enum Grant {
    /// Run with this many slots on every switch of the tree.
    Slots(u32),
    /// Queue until slots free.
    Wait,
    /// Run as a host ring instead.
    Fallback,
}

impl Pools {
    /// Empty pools on the aggregating switches `switch_nodes` (dense index order): the
    /// static shares (the pool split equally among the enabled classes) and the priority
    /// ranks (the order of `ina.classes`).
    pub fn new(ina: &InaSwitchModel, switch_nodes: Vec<NodeId>) -> Pools {
        let enabled: Vec<Class> = {
            let mut v: Vec<Class> = ina
                .classes
                .iter()
                .copied()
                .filter(|c| *c != Class::Compute)
                .collect();
            v.sort();
            v.dedup();
            v
        };
        let mut share = [0u32; 4];
        for c in &enabled {
            share[class_idx(*c)] = ina.slots / enabled.len() as u32;
        }
        let mut prio = [4u8, 5, 6, 7];
        for (rank, c) in ina
            .classes
            .iter()
            .filter(|c| **c != Class::Compute)
            .enumerate()
        {
            let p = &mut prio[class_idx(*c)];
            *p = (*p).min(rank as u8);
        }
        Pools {
            prio,
            policy: ina.policy,
            total: ina.slots,
            share,
            used: vec![[0; 4]; switch_nodes.len()],
            node_of: switch_nodes,
            waiting: BTreeSet::new(),
            samples: Vec::new(),
            peak: 0,
        }
    }

    fn capacity(&self, class: usize) -> u32 {
        match self.policy {
            InaPolicy::Static => self.share[class],
            _ => self.total,
        }
    }

    fn free(&self, sw: u32, class: usize) -> u32 {
        let u = &self.used[sw as usize];
        let used = match self.policy {
            InaPolicy::Static => u[class],
            _ => u.iter().sum(),
        };
        self.capacity(class).saturating_sub(used)
    }

    /// The policy's answer for `agg` wanting `window` slots on each of its switches.
    pub fn ask(&self, agg: &Agg, window: u32) -> Grant {
        let c = class_idx(agg.class);
        if agg.switches.is_empty() {
            // a multicast-only aggregation (no up edge): nothing to sum, no slot, no window
            return Grant::Slots(0);
        }
        if self.capacity(c) == 0 || window == 0 {
            return Grant::Fallback;
        }
        let free = agg
            .switches
            .iter()
            .map(|&s| self.free(s, c))
            .min()
            .unwrap_or(0);
        if free > 0 {
            Grant::Slots(free.min(window))
        } else if self.policy == InaPolicy::BestEffort {
            Grant::Fallback
        } else {
            Grant::Wait
        }
    }

    /// Take (`take`) or give back `slots` on every switch of `agg` at `now`, sampling
    /// each switch's new occupancy.
    pub fn change(&mut self, agg: &Agg, slots: u32, take: bool, now: u64) {
        let c = class_idx(agg.class);
        for &s in &agg.switches {
            let u = &mut self.used[s as usize];
            if take {
                u[c] += slots;
            } else {
                u[c] -= slots;
            }
            let total: u32 = u.iter().sum();
            self.peak = self.peak.max(total);
            self.samples.push(SlotSample {
                time_ns: now,
                switch: self.node_of[s as usize],
                slots_in_use: total,
            });
        }
    }

    /// Where `agg` (index `idx`) queues when it arrives at `now`.
    pub fn wait_key(&self, agg: &Agg, idx: u32, now: u64) -> (u8, u64, u32) {
        let prio = if self.policy == InaPolicy::Priority {
            self.prio[class_idx(agg.class)]
        } else {
            0
        };
        (prio, now, idx)
    }
}
