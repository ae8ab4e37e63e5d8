//! The files of one replay, all written atomically into one directory.

use super::ReplayResult;
use crate::formats::{fct_csv, hpcc_fct, links_csv, summary_csv, switches_csv, FormatError};
use std::path::Path;

/// Write `fct.csv`, `fct.txt` (HPCC, 8 fields), `summary.csv`, `links.csv` (per channel,
/// i.e. per link direction, that carried bytes) and `switches.csv` (every change of a
/// switch's INA slot occupancy) into `dir`, creating it if needed. The rows are made as
/// they are written; the two per-record files (GBs at cluster scale) are written on two
/// threads at once, each from its own pass over the rows (an error in `fct.csv` is
/// reported first, as if written one after the other).
pub fn write_outputs(dir: &Path, r: &ReplayResult) -> Result<(), FormatError> {
    write_outputs_with(dir, r, PerRecord::Write)
}

/// Whether a replay's per-record files (`fct.csv`, `fct.txt`) are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PerRecord {
    /// Written (the default).
    Write,
    /// Not written, and any left in the directory by an earlier run removed, so that
    /// what is there is one replay's (`ina3d replay --no-fct`: at cluster scale they are
    /// gigabytes, ≈ 135 B per record).
    Skip,
}

/// [`write_outputs`], the per-record files only if `per_record` says so.
pub fn write_outputs_with(
    dir: &Path,
    r: &ReplayResult,
    per_record: PerRecord,
) -> Result<(), FormatError> {
    // marked until the files are all there (formats::atomic::OutputSet)
    let set = crate::formats::atomic::OutputSet::begin(dir, "ina3d replay")?;
    if per_record == PerRecord::Skip {
        for name in ["fct.csv", "fct.txt"] {
            let p = dir.join(name);
            match std::fs::remove_file(&p) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(FormatError::Io { path: p, source: e })
                }
                _ => {}
            }
        }
    } else {
        write_per_record(dir, r)?;
    }
    summary_csv::write(&dir.join("summary.csv"), &r.summary)?;
    links_csv::write(&dir.join("links.csv"), &r.channels)?;
    switches_csv::write(&dir.join("switches.csv"), &r.slots)?;
    set.finish()
}

/// `fct.csv` and `fct.txt`, on two threads.
fn write_per_record(dir: &Path, r: &ReplayResult) -> Result<(), FormatError> {
    let (csv, txt) = std::thread::scope(|s| {
        let txt =
            s.spawn(|| hpcc_fct::write(&dir.join("fct.txt"), r.row_iter(), hpcc_fct::Flavor::Hpcc));
        let csv = fct_csv::write(&dir.join("fct.csv"), r.row_iter());
        (
            csv,
            txt.join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
        )
    });
    csv?;
    txt
}
