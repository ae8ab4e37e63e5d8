//! Aggregator slots as each back-end observed them, switch by switch.
//!
//! Both back-ends write `switches.csv` (`time_ns,switch,slots_in_use`, read by
//! [`crate::formats::switches_csv`]): one row per change of a switch's slots in use, in
//! time order. The slot model they implement (see `src/replay/mod.rs` and
//! `ns3-glue/README.md`, "Slots"): an aggregation's stream at an aggregating switch holds
//! `w = min(window, packets of the stream, the pool it draws from)` slots from the arrival
//! of its first packet at that switch until its last result packet leaves it. Each
//! switch's peak and **slot-time** (`∫ slots_in_use dt` = Σ w × held time, slot·ns) come
//! from [`crate::fct::switch_slots`], the one reading of those samples.

use super::ReportError;
use crate::fct::{switch_slots, SwitchSlots};
use crate::formats::{switches_csv, write_atomic};
use crate::units::NodeId;
use std::collections::BTreeMap;
use std::path::Path;

/// Columns of the comparison's `switches.csv` (differences are ns-3 − replay).
pub const COLUMNS: [&str; 7] = [
    "switch",
    "replay_slot_peak",
    "ns3_slot_peak",
    "replay_slot_time",
    "ns3_slot_time",
    "slot_time_diff",
    "slot_peak_diff",
];

/// One switch on both back-ends (a switch one side never used counts as zero there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotComparison {
    /// The switch.
    pub switch: NodeId,
    /// The replayer's peak and slot-time.
    pub replay: SwitchSlots,
    /// The ns-3 glue's peak and slot-time.
    pub ns3: SwitchSlots,
}

impl SlotComparison {
    /// ns-3's slot-time minus the replayer's, slot·ns.
    pub fn slot_time_diff(&self) -> i128 {
        self.ns3.slot_time as i128 - self.replay.slot_time as i128
    }

    /// ns-3's peak minus the replayer's.
    pub fn peak_diff(&self) -> i128 {
        self.ns3.peak as i128 - self.replay.peak as i128
    }
}

/// Both directories' `switches.csv`, switch by switch (ascending id); `None` when either
/// lacks one. A malformed file is an error naming its line and field.
pub fn compare_dirs(
    replay_dir: &Path,
    ns3_dir: &Path,
) -> Result<Option<Vec<SlotComparison>>, ReportError> {
    let (r, n) = (
        replay_dir.join("switches.csv"),
        ns3_dir.join("switches.csv"),
    );
    if !r.is_file() || !n.is_file() {
        return Ok(None);
    }
    let (ru, nu) = (
        switch_slots(&switches_csv::read(&r)?),
        switch_slots(&switches_csv::read(&n)?),
    );
    Ok(Some(join(&ru, &nu)))
}

/// Per-switch rows of two back-ends' slot use (each ascending by switch).
pub fn join(replay: &[SwitchSlots], ns3: &[SwitchSlots]) -> Vec<SlotComparison> {
    let zero = |switch| SwitchSlots {
        switch,
        peak: 0,
        slot_time: 0,
    };
    let mut rows: BTreeMap<NodeId, SlotComparison> = BTreeMap::new();
    for (side, list) in [replay, ns3].into_iter().enumerate() {
        for s in list {
            let row = rows.entry(s.switch).or_insert(SlotComparison {
                switch: s.switch,
                replay: zero(s.switch),
                ns3: zero(s.switch),
            });
            if side == 0 {
                row.replay = *s;
            } else {
                row.ns3 = *s;
            }
        }
    }
    rows.into_values().collect()
}

/// The comparison's slot lines for `ina3d compare`'s summary: each switch's peak and
/// slot-time on both back-ends, or why they were not compared.
pub fn summary_text(rows: Option<&[SlotComparison]>) -> String {
    use std::fmt::Write as _;
    let Some(rows) = rows else {
        return "INA slots: not compared (a directory has no switches.csv)\n".into();
    };
    let mut out = String::new();
    if rows.is_empty() {
        return out;
    }
    out.push_str("INA slots per switch (peak replay/ns-3, slot-time replay/ns-3 in slot·ms):\n");
    for r in rows {
        let _ = writeln!(
            out,
            "  switch {}: peak {}/{}, slot-time {:.3}/{:.3}",
            r.switch,
            r.replay.peak,
            r.ns3.peak,
            r.replay.slot_time as f64 / 1e6,
            r.ns3.slot_time as f64 / 1e6
        );
    }
    out
}

/// Writes the comparison's `switches.csv` ([`COLUMNS`]) atomically.
pub fn write_comparison(path: &Path, rows: &[SlotComparison]) -> Result<(), ReportError> {
    write_atomic(path, |w| {
        writeln!(w, "{}", COLUMNS.join(","))?;
        for r in rows {
            writeln!(
                w,
                "{},{},{},{},{},{},{}",
                r.switch.0,
                r.replay.peak,
                r.ns3.peak,
                r.replay.slot_time,
                r.ns3.slot_time,
                r.slot_time_diff(),
                r.peak_diff()
            )?;
        }
        Ok(())
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(switch: u32, peak: u64, slot_time: u64) -> SwitchSlots {
        SwitchSlots {
            switch: NodeId(switch),
            peak,
            slot_time,
        }
    }

    #[test]
    fn a_switch_one_side_never_used_counts_zero_there() {
        let rows = join(&[s(3, 10, 100), s(7, 5, 50)], &[s(7, 8, 20), s(9, 1, 1)]);
        let ids: Vec<u32> = rows.iter().map(|r| r.switch.0).collect();
        assert_eq!(ids, [3, 7, 9]);
        assert_eq!(rows[0].ns3, s(3, 0, 0));
        assert_eq!((rows[1].slot_time_diff(), rows[1].peak_diff()), (-30, 3));
        assert_eq!(rows[2].replay, s(9, 0, 0));
    }
}
