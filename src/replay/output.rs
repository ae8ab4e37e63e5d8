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
    write(dir, r, true)
}

/// [`write_outputs`] without the two per-record files: `summary.csv`, `links.csv` and
/// `switches.csv` only. At thousands of GPUs `fct.csv` and `fct.txt` take hundreds of MB
/// per replay (the first run of `notebooks/study-scale.toml` wrote about 13 GB of them in
/// its first 49 replays, at 1,024 and 8,192 GPUs, and filled the disk), which a sweep reading
/// only the summaries does not need.
pub fn write_totals(dir: &Path, r: &ReplayResult) -> Result<(), FormatError> {
    write(dir, r, false)
}

fn write(dir: &Path, r: &ReplayResult, flows: bool) -> Result<(), FormatError> {
    // marked until the files are all there (formats::atomic::OutputSet)
    let set = crate::formats::atomic::OutputSet::begin(dir, "ina3d replay")?;
    if flows {
        let (csv, txt) = std::thread::scope(|s| {
            let txt = s.spawn(|| {
                hpcc_fct::write(&dir.join("fct.txt"), r.row_iter(), hpcc_fct::Flavor::Hpcc)
            });
            let csv = fct_csv::write(&dir.join("fct.csv"), r.row_iter());
            (
                csv,
                txt.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            )
        });
        csv?;
        txt?;
    }
    summary_csv::write(&dir.join("summary.csv"), &r.summary)?;
    links_csv::write(&dir.join("links.csv"), &r.channels)?;
    switches_csv::write(&dir.join("switches.csv"), &r.slots)?;
    set.finish()
}
