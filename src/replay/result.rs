//! What a replay produced: the summary, the channel and slot statistics, and each
//! record's run-time state, from which its `fct.csv` row is made on demand.

use super::huge;
use super::prepare::{Prepared, NONE};
use super::table::{RecordTable, Segment};
use super::ReplayOptions;
use crate::fct::{FctRow, Summary};
use crate::formats::links_csv::ChannelStat;
use crate::formats::switches_csv::SlotSample;
use crate::record::Mode;
use crate::units::{BitsPerSec, Bytes};

/// Everything one replay produced.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayResult {
    /// Each record's times, from which its `fct.csv` row is made on demand
    /// ([`ReplayResult::rows`], [`ReplayResult::row_iter`]).
    pub(super) times: RecordTimes,
    /// The iteration summary (`fct::summarize_times`).
    pub summary: Summary,
    /// Per-channel statistics, channels that carried bytes, in channel order.
    pub channels: Vec<ChannelStat>,
    /// Slot occupancy changes (the physical holding intervals), in time order.
    pub slots: Vec<SlotSample>,
    /// Per job of a merged multi-job trace (`InaConfig::tenants`, in its order):
    /// the slots its own aggregations held; empty for a one-job trace.
    pub tenant_slots: Vec<TenantSlots>,
    /// Aggregations that fell back to the host ring.
    pub ina_fallbacks: u64,
    /// Events processed.
    pub events: u64,
    /// Max-min re-solves (batches with a rate change).
    pub resolves: u64,
}

/// The aggregator slots one job of a merged trace held over a replay, read from its own
/// holding intervals as `switches.csv` is read ([`crate::fct::switch_slots`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TenantSlots {
    /// Most slots the job held at once on any one switch.
    pub peak: u64,
    /// Σ over switches of the job's slots × time held (slot·ns).
    pub slot_time: u64,
}

/// The records replayed with each one's run-time state (its start and end, by position)
/// and what its standalone FCT is computed from: the rows of `fct.csv` without their
/// repeated fields, made on demand.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct RecordTimes {
    pub(super) records: RecordTable,
    pub(super) rec: Vec<RecState>,
    pub(super) standalone: Standalone,
}

impl ReplayResult {
    /// One row per record, in trace order, made as they are read (what `fct.csv` is
    /// written from without holding every row).
    pub fn row_iter(&self) -> impl ExactSizeIterator<Item = FctRow> + '_ {
        let t = &self.times;
        (0..t.records.len()).map(|i| {
            let r = &t.rec[i];
            let alone = t.standalone.of(i, r, &t.records);
            t.records.row(i, r.start, r.end, alone)
        })
    }

    /// One row per record, in trace order.
    pub fn rows(&self) -> Vec<FctRow> {
        self.row_iter().collect()
    }
}

/// What the event loop reads and writes of one record, side by side so that an event
/// touches one cache line of it, not one per column (the records are visited in time
/// order, which is far from trace order at scale).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct RecState {
    /// When the record became ready (its last dep ended) until it starts; then its start.
    pub start: u64,
    /// When it ended (`u64::MAX` until then).
    pub end: u64,
    /// Deps not ended yet.
    pub pending: u32,
    /// Its path ([`TIMER`] for compute and NVLink records, [`NONE`] for a transfer that
    /// crosses no channel).
    pub path: u32,
}

/// The `path` of a record that is a timer of `dur` (compute, NVLink).
pub(super) const TIMER: u32 = u32::MAX - 1;

impl RecState {
    /// The state of every record before the first event, taking the dep counts and
    /// paths out of the prepared tables.
    pub(super) fn table(p: &mut Prepared, records: &RecordTable) -> Vec<RecState> {
        let pending = std::mem::take(&mut p.pending);
        let paths = std::mem::take(&mut p.rec_path);
        let mut v = huge::filled(
            records.len(),
            RecState {
                start: 0,
                end: u64::MAX,
                pending: 0,
                path: NONE,
            },
        );
        for seg in records.segments() {
            match seg {
                Segment::Rows { pos, row, len } => {
                    for j in 0..len {
                        let (i, r) = ((pos + j) as usize, row + j);
                        v[i].path = match records.row_mode(r) {
                            Mode::Compute | Mode::NvLink => TIMER,
                            _ => paths[r as usize],
                        };
                    }
                }
                Segment::Block(b, x) => {
                    let cols = &p.block_path[b as usize];
                    for (j, r) in v[x.lo as usize..x.hi as usize].iter_mut().enumerate() {
                        r.path = cols[j % x.n as usize];
                    }
                }
            }
        }
        for (r, &k) in v.iter_mut().zip(pending.iter()) {
            r.pending = k;
        }
        v
    }
}

/// What a record's standalone FCT (alone on an idle network) is computed from, kept after
/// the replay instead of one value per record (`fct.csv` rows are made on demand).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Standalone {
    /// Per interned path: channels, propagation delay, smallest rate (bits/s).
    len: Vec<u32>,
    delay: Vec<u64>,
    min_rate: Vec<u64>,
    /// Per aggregation: its unit's standalone time.
    agg: Vec<u64>,
    /// Aggregation of each record ([`NONE`]; empty when no record aggregates).
    rec_agg: Vec<u32>,
    /// Wire bytes of a host transfer: payload and header of a packet.
    payload: Bytes,
    header: Bytes,
}

impl Standalone {
    /// Taken out of the prepared tables of a finished replay.
    pub(super) fn take(p: &mut Prepared, opts: &ReplayOptions) -> Standalone {
        Standalone {
            len: std::mem::take(&mut p.paths.len),
            delay: std::mem::take(&mut p.paths.delay),
            min_rate: std::mem::take(&mut p.paths.min_rate),
            agg: p.aggs.iter().map(|a| a.standalone).collect(),
            rec_agg: std::mem::take(&mut p.rec_agg),
            payload: opts.payload,
            header: opts.header,
        }
    }

    /// Completion time of record `i` (state `r`) alone on an idle network.
    pub fn of(&self, i: usize, r: &RecState, records: &RecordTable) -> u64 {
        let f = records.fields(i);
        match f.mode {
            Mode::Compute | Mode::NvLink => f.dur,
            Mode::Ina => self.agg[self.rec_agg[i] as usize],
            Mode::Net => match r.path {
                NONE => 0,
                p if self.len[p as usize] == 0 => self.delay[p as usize],
                p => {
                    let wire = Bytes(f.bytes).with_headers(self.payload, self.header);
                    BitsPerSec(self.min_rate[p as usize])
                        .transmit_time(wire)
                        .0
                        .saturating_add(self.delay[p as usize])
                }
            },
        }
    }
}
