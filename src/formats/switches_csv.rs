//! `switches.csv`: every change of an INA switch's aggregator-slot occupancy,
//! `time_ns,switch,slots_in_use` in time order, written by both back-ends.

use super::csv_rows::{read_rows, write_rows};
use super::{write_atomic, FormatError};
use std::path::Path;

pub use crate::fct::SlotSample;

/// The columns, in file order.
pub const COLUMNS: [&str; 3] = ["time_ns", "switch", "slots_in_use"];

/// Write `switches.csv`, atomically.
pub fn write(path: &Path, samples: &[SlotSample]) -> Result<(), FormatError> {
    write_atomic(path, |w| {
        if samples.is_empty() {
            return writeln!(w, "{}", COLUMNS.join(","));
        }
        write_rows(w, samples)
    })
}

/// Read `switches.csv` (errors name line and column).
pub fn read(path: &Path) -> Result<Vec<SlotSample>, FormatError> {
    read_rows(path, &COLUMNS, "switches.csv: slot occupancy changes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::NodeId;

    #[test]
    fn samples_round_trip() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("switches.csv");
        let s = vec![
            SlotSample {
                time_ns: 5,
                switch: NodeId(20),
                slots_in_use: 256,
            },
            SlotSample {
                time_ns: 90,
                switch: NodeId(20),
                slots_in_use: 0,
            },
        ];
        write(&p, &s).unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "time_ns,switch,slots_in_use\n5,20,256\n90,20,0\n"
        );
        assert_eq!(read(&p).unwrap(), s);
    }
}
