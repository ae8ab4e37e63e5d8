//! Aggregator slots as each back-end observed them, switch by switch.
//!
//! Both back-ends write `switches.csv` (`time_ns,switch,slots_in_use`): one row per change
//! of a switch's slots in use, in time order. The slot model they implement: an
//! aggregation's stream at an aggregating switch holds `w = min(window, packets of the
//! stream, the pool it draws from)` slots from the arrival of its first packet at that
//! switch until its last result packet leaves it downwards (see `ns3-glue/README.md`,
//! "Slots"). From the changes, per switch: the peak of slots in use and the **slot-time**
//! `∫ slots_in_use dt` (= Σ w × held time over its streams, in slot·ns).

use super::ReportError;
use crate::formats::{switches_csv, write_atomic, FormatError};
use std::collections::BTreeMap;
use std::path::Path;

/// One row of `switches.csv` as the comparison uses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotChange {
    /// When, ns.
    pub time_ns: u64,
    /// The switch (node id).
    pub switch: u32,
    /// Slots in use from then on.
    pub slots_in_use: u32,
}

/// Peak and slot-time of one switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SwitchSlots {
    /// Most slots in use at once.
    pub peak: u32,
    /// `∫ slots_in_use dt`, slot·ns (to the switch's last change).
    pub slot_time: u128,
}

/// Reads a `switches.csv` ([`switches_csv::read`], the format's one reader); rows must be
/// in time order (an error names the line).
pub fn read_switches_csv(path: &Path) -> Result<Vec<SlotChange>, ReportError> {
    let mut rows: Vec<SlotChange> = Vec::new();
    for (i, x) in switches_csv::read(path)?.into_iter().enumerate() {
        let row = SlotChange {
            time_ns: x.time_ns,
            switch: x.switch.0,
            slots_in_use: x.slots_in_use,
        };
        if let Some(prev) = rows.last() {
            if row.time_ns < prev.time_ns {
                return Err(FormatError::syntax(
                    path,
                    i as u64 + 2,
                    "time_ns",
                    format!(
                        "{} is before the previous row's {}",
                        row.time_ns, prev.time_ns
                    ),
                )
                .into());
            }
        }
        rows.push(row);
    }
    Ok(rows)
}

/// Peak and slot-time per switch from its changes (in time order).
pub fn slot_usage(changes: &[SlotChange]) -> BTreeMap<u32, SwitchSlots> {
    let mut last: BTreeMap<u32, (u64, u32)> = BTreeMap::new();
    let mut out: BTreeMap<u32, SwitchSlots> = BTreeMap::new();
    for c in changes {
        let u = out.entry(c.switch).or_default();
        if let Some((t, n)) = last.insert(c.switch, (c.time_ns, c.slots_in_use)) {
            u.slot_time += u128::from(n) * u128::from(c.time_ns - t);
        }
        u.peak = u.peak.max(c.slots_in_use);
    }
    out
}

/// One switch on both back-ends (a switch one side never used counts as zero there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotComparison {
    /// The switch.
    pub switch: u32,
    /// The replayer's peak and slot-time.
    pub replay: SwitchSlots,
    /// The ns-3 glue's peak and slot-time.
    pub ns3: SwitchSlots,
}

/// Both directories' `switches.csv`, switch by switch; `None` when either lacks one.
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
        slot_usage(&read_switches_csv(&r)?),
        slot_usage(&read_switches_csv(&n)?),
    );
    let mut switches: Vec<u32> = ru.keys().chain(nu.keys()).copied().collect();
    switches.sort_unstable();
    switches.dedup();
    Ok(Some(
        switches
            .into_iter()
            .map(|s| SlotComparison {
                switch: s,
                replay: ru.get(&s).copied().unwrap_or_default(),
                ns3: nu.get(&s).copied().unwrap_or_default(),
            })
            .collect(),
    ))
}

/// Writes `switches.csv` of a comparison: `switch,replay_slot_peak,ns3_slot_peak,
/// replay_slot_time,ns3_slot_time,slot_time_diff` (slot·ns; diff = ns-3 − replay).
pub fn write_comparison(path: &Path, rows: &[SlotComparison]) -> Result<(), ReportError> {
    write_atomic(path, |w| {
        writeln!(
            w,
            "switch,replay_slot_peak,ns3_slot_peak,replay_slot_time,ns3_slot_time,slot_time_diff"
        )?;
        for r in rows {
            writeln!(
                w,
                "{},{},{},{},{},{}",
                r.switch,
                r.replay.peak,
                r.ns3.peak,
                r.replay.slot_time,
                r.ns3.slot_time,
                r.ns3.slot_time as i128 - r.replay.slot_time as i128
            )?;
        }
        Ok(())
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_time_integrates_slots_in_use_over_time_per_switch() {
        let c = |t, s, n| SlotChange {
            time_ns: t,
            switch: s,
            slots_in_use: n,
        };
        // switch 8: 64 slots for 100 ns, then 128 for 50 ns, then 64 for 10 ns
        // switch 9: 32 slots for 1,000 ns
        let u = slot_usage(&[
            c(0, 8, 64),
            c(5, 9, 32),
            c(100, 8, 128),
            c(150, 8, 64),
            c(160, 8, 0),
            c(1005, 9, 0),
        ]);
        assert_eq!(
            u[&8],
            SwitchSlots {
                peak: 128,
                slot_time: 64 * 100 + 128 * 50 + 64 * 10
            }
        );
        assert_eq!(
            u[&9],
            SwitchSlots {
                peak: 32,
                slot_time: 32 * 1000
            }
        );
    }
}
