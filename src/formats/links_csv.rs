//! `links.csv`: bytes carried per channel (one direction of a link), written by both
//! back-ends — the replayer from its flows, `ina3d ns3 run` from the byte counters the
//! glue kept where ns-3 really transmitted — so `ina3d compare` can check that both put
//! the same traffic on the same links.
//!
//! Columns: `link,from,to,rate_bps,bytes,utilisation`; `link` is the 0-based row of the
//! link in `topology.txt`, `from → to` the direction, `bytes` wire bytes (payload plus
//! per-packet headers), `utilisation = bytes·8 / (rate · iteration time)`.

use super::csv_rows::{read_rows, write_rows};
use super::{write_atomic, FormatError};
use crate::units::{LinkId, NodeId};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Bytes and utilisation of one channel (one direction of a link).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChannelStat {
    /// The link.
    pub link: LinkId,
    /// Sending end.
    pub from: NodeId,
    /// Receiving end.
    pub to: NodeId,
    /// Rate in bits per second.
    pub rate_bps: u64,
    /// Wire bytes carried.
    pub bytes: u64,
    /// `bytes·8 / (rate · iteration time)`.
    #[serde(serialize_with = "six_decimals")]
    pub utilisation: f64,
}

fn six_decimals<S: serde::Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&format_args!("{x:.6}"))
}

/// The columns, in file order.
pub const COLUMNS: [&str; 6] = ["link", "from", "to", "rate_bps", "bytes", "utilisation"];

/// Write `links.csv`, atomically.
pub fn write(path: &Path, channels: &[ChannelStat]) -> Result<(), FormatError> {
    write_atomic(path, |w| {
        if channels.is_empty() {
            // The csv writer writes the header with the first row: an idle network still
            // gets a header, so readers can tell "no traffic" from "no file".
            return writeln!(w, "{}", COLUMNS.join(","));
        }
        write_rows(w, channels)
    })
}

/// Read `links.csv` (errors name line and column).
pub fn read(path: &Path) -> Result<Vec<ChannelStat>, FormatError> {
    read_rows(path, &COLUMNS, "links.csv: bytes per link direction")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels_round_trip_and_an_empty_file_keeps_its_header() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("links.csv");
        let c = vec![ChannelStat {
            link: LinkId(3),
            from: NodeId(1),
            to: NodeId(9),
            rate_bps: 100_000_000_000,
            bytes: 1048,
            utilisation: 0.25,
        }];
        write(&p, &c).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(
            text,
            "link,from,to,rate_bps,bytes,utilisation\n3,1,9,100000000000,1048,0.250000\n"
        );
        assert_eq!(read(&p).unwrap(), c);
        write(&p, &[]).unwrap();
        assert!(read(&p).unwrap().is_empty());
    }
}
