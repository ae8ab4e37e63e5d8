//! The files of one replay, all written atomically into one directory.

use super::ReplayResult;
use crate::formats::{fct_csv, hpcc_fct, links_csv, summary_csv, switches_csv, FormatError};
use std::path::Path;

/// Write `fct.csv`, `fct.txt` (HPCC, 8 fields), `summary.csv`, `links.csv` (per channel,
/// i.e. per link direction, that carried bytes) and `switches.csv` (every change of a
/// switch's INA slot occupancy) into `dir`, creating it if needed. The rows are made as
/// they are written.
pub fn write_outputs(dir: &Path, r: &ReplayResult) -> Result<(), FormatError> {
    std::fs::create_dir_all(dir).map_err(FormatError::io(dir))?;
    fct_csv::write(&dir.join("fct.csv"), r.row_iter())?;
    hpcc_fct::write(&dir.join("fct.txt"), r.row_iter(), hpcc_fct::Flavor::Hpcc)?;
    summary_csv::write(&dir.join("summary.csv"), &r.summary)?;
    links_csv::write(&dir.join("links.csv"), &r.channels)?;
    switches_csv::write(&dir.join("switches.csv"), &r.slots)
}
