//! The aggregator-slot pools of the INA switches and the slot policies
//! ([`InaPolicy`]; what each does is in the replayer's module docs).

use super::prepare::Agg;
use super::{InaConfig, InaPolicy};
use crate::formats::switches_csv::SlotSample;
use crate::record::Class;
use crate::units::NodeId;
use std::collections::{BTreeSet, HashMap};

/// Classes in the per-class arrays.
const CLASSES: usize = 6;

/// Index of a class in the per-class arrays (compute never aggregates; it shares the
/// embedding slot only to keep the arrays at six).
pub(super) fn class_idx(c: Class) -> usize {
    match c {
        Class::Tp => 0,
        Class::Pp => 1,
        Class::Dp => 2,
        Class::Emb | Class::Compute => 3,
        Class::Cp => 4,
        Class::Ep => 5,
    }
}

/// Slot pools of the aggregating switches.
pub(super) struct Pools {
    policy: InaPolicy,
    total: u32,
    /// Under `static`: each class's share of one job's part of the pool.
    share: [u32; CLASSES],
    /// Jobs sharing the pools (1 for a one-job trace); `static` splits each pool among
    /// them first.
    tenants: usize,
    /// Slots reserved, per (switch, job) at `switch · tenants + job`, per class.
    used: Vec<[u32; CLASSES]>,
    /// Aggregations waiting for slots, by (priority rank, arrival, aggregation).
    pub waiting: BTreeSet<(u8, u64, u32)>,
    /// Rank of each class in the priority order (`ina_classes` order; absent classes last).
    prio: [u8; CLASSES],
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
    /// Empty pools on `switches` aggregating switches (dense indices): the
    /// static shares (the pool split equally among the jobs of a merged trace, each job's
    /// part equally among the enabled classes) and the priority ranks (the order of
    /// `ina.classes`).
    pub fn new(ina: &InaConfig, switches: usize) -> Pools {
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
        let tenants = ina.tenants.len().max(1);
        let mut share = [0u32; CLASSES];
        for c in &enabled {
            share[class_idx(*c)] = ina.slots / tenants as u32 / enabled.len() as u32;
        }
        let mut prio = [6u8, 7, 8, 9, 10, 11];
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
            policy: ina.policy(),
            total: ina.slots,
            share,
            tenants,
            used: vec![[0; CLASSES]; switches * tenants],
            waiting: BTreeSet::new(),
        }
    }

    fn capacity(&self, class: usize) -> u32 {
        match self.policy {
            InaPolicy::Static => self.share[class],
            _ => self.total,
        }
    }

    /// Free slots on switch `sw` for a `class` aggregation of job `tenant`: its share
    /// under `static`, the whole pool otherwise.
    fn free(&self, sw: u32, tenant: u32, class: usize) -> u32 {
        let at = sw as usize * self.tenants;
        let used = match self.policy {
            InaPolicy::Static => self.used[at + tenant as usize][class],
            _ => self.used[at..at + self.tenants]
                .iter()
                .flat_map(|u| u.iter())
                .sum(),
        };
        self.capacity(class).saturating_sub(used)
    }

    /// The policy's answer for `agg`, which needs its `w` slots on each of its switches:
    /// all of them or none. `w` is [`Agg::want`] (`min(window, packets)`) capped by the
    /// pool it draws from (the class's share under `static`, the whole pool otherwise),
    /// as in the glue: a pool smaller than the window makes `w` the pool and the stream
    /// runs with that many packets in flight. `window` is the workers' window (0: INA
    /// cannot run).
    pub fn ask(&self, agg: &Agg, window: u32) -> Grant {
        let c = class_idx(agg.class);
        if agg.switches.is_empty() {
            // a multicast-only aggregation (no up edge): nothing to sum, no slot, no window
            return Grant::Slots(0);
        }
        if self.capacity(c) == 0 || window == 0 {
            return Grant::Fallback;
        }
        if agg.want == 0 {
            // an empty stream: nothing to hold
            return Grant::Slots(0);
        }
        if self.policy == InaPolicy::Planned {
            // the plan's reservation (the pool this stream draws from), once every
            // switch's pool can hold it
            let need = agg.want.min(agg.reserved);
            let fits = agg
                .switches
                .iter()
                .all(|&s| self.free(s, agg.tenant, c) >= need);
            return if need > 0 && fits {
                Grant::Slots(need)
            } else {
                Grant::Wait
            };
        }
        let want = agg.want.min(self.capacity(c));
        let free = agg
            .switches
            .iter()
            .map(|&s| self.free(s, agg.tenant, c))
            .min()
            .unwrap_or(0);
        if free >= want {
            Grant::Slots(want)
        } else if self.policy == InaPolicy::BestEffort {
            Grant::Fallback
        } else {
            Grant::Wait
        }
    }

    /// Reserve (`take`) or give back `slots` on every switch of `agg`. The reservation
    /// spans the whole unit, from its start to its end; what the switches physically
    /// hold is recorded by [`Occupancy`].
    pub fn change(&mut self, agg: &Agg, slots: u32, take: bool) {
        let c = class_idx(agg.class);
        for &s in &agg.switches {
            let u = &mut self.used[s as usize * self.tenants + agg.tenant as usize];
            if take {
                u[c] += slots;
            } else {
                u[c] -= slots;
            }
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

/// The slots the switches physically hold over time: each granted aggregation adds its
/// `w` on a switch from the first packet's arrival to the last result's departure
/// (`prepare::SlotHold`). The release of a unit is known only when it ends, after its
/// acquisitions, so changes are collected and put in time order at the end.
pub(super) struct Occupancy {
    node_of: Vec<NodeId>,
    /// (time, switch node, +slots or −slots, job of a merged trace).
    changes: Vec<(u64, NodeId, i64, u32)>,
}

impl Occupancy {
    pub fn new(switch_nodes: Vec<NodeId>) -> Occupancy {
        Occupancy {
            node_of: switch_nodes,
            changes: Vec::new(),
        }
    }

    /// `agg`, started at `start`, holds `slots` on each switch from its first packet.
    pub fn acquire(&mut self, agg: &Agg, slots: u32, start: u64) {
        for h in &agg.holds {
            let node = self.node_of[h.switch as usize];
            self.changes
                .push((start + h.acquire, node, slots as i64, agg.tenant));
        }
    }

    /// `agg`, whose last byte left its workers at `tx_end`, frees its `slots` on each
    /// switch as its last result leaves.
    pub fn release(&mut self, agg: &Agg, slots: u32, tx_end: u64) {
        for h in &agg.holds {
            let node = self.node_of[h.switch as usize];
            self.changes
                .push((tx_end + h.release, node, -(slots as i64), agg.tenant));
        }
    }

    /// Every change of a switch's occupancy, in time order (then switch id): one sample
    /// per (time, switch) with the slots in use from then on, none where the changes at
    /// one instant cancel out.
    pub fn samples(mut self) -> Vec<SlotSample> {
        self.changes.sort_unstable();
        samples_of(self.changes.iter())
    }

    /// What each of `tenants` jobs of a merged trace held on the switches: per job, the
    /// [`SlotSample`]s of its own aggregations alone, read as `switches.csv` is
    /// ([`crate::fct::switch_slots`]): its peak on any one switch and its slot-time.
    pub fn tenant_slots(&mut self, tenants: usize) -> Vec<super::TenantSlots> {
        self.changes.sort_unstable();
        (0..tenants as u32)
            .map(|t| {
                let mine = samples_of(self.changes.iter().filter(|c| c.3 == t));
                let per_switch = crate::fct::switch_slots(&mine);
                super::TenantSlots {
                    peak: per_switch.iter().map(|s| s.peak).max().unwrap_or(0),
                    slot_time: per_switch.iter().map(|s| s.slot_time).sum(),
                }
            })
            .collect()
    }
}

/// One sample per (time, switch) with the slots in use from then on, from changes in time
/// order (then switch id); none where the changes at one instant cancel out.
fn samples_of<'a>(changes: impl Iterator<Item = &'a (u64, NodeId, i64, u32)>) -> Vec<SlotSample> {
    let mut used: HashMap<NodeId, i64> = HashMap::new();
    let mut out = Vec::new();
    let mut run: Option<(u64, NodeId, i64)> = None;
    let mut flush = |r: (u64, NodeId, i64), out: &mut Vec<SlotSample>| {
        let u = used.entry(r.1).or_insert(0);
        let before = *u;
        *u += r.2;
        if *u != before {
            out.push(SlotSample {
                time_ns: r.0,
                switch: r.1,
                slots_in_use: (*u).max(0) as u32,
            });
        }
    };
    for &(t, node, d, _) in changes {
        match run.as_mut() {
            Some(r) if (r.0, r.1) == (t, node) => r.2 += d,
            _ => {
                if let Some(r) = run.take() {
                    flush(r, &mut out);
                }
                run = Some((t, node, d));
            }
        }
    }
    if let Some(r) = run {
        flush(r, &mut out);
    }
    out
}
