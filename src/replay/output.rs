//! The files of one replay, all written atomically into one directory.

use super::ReplayResult;
use crate::fct::{self, FctError, HpccFlavor};
use std::path::Path;

/// Write `fct.csv`, `fct.txt` (HPCC, 8 fields), `summary.csv`, `links.csv`
/// (`link,from,to,rate_bps,bytes,utilisation`: per channel, i.e. per link direction, that
/// carried bytes) and `switches.csv` (`time_ns,switch,slots_in_use`: every change of a
/// switch's INA slot occupancy) into `dir`, creating it if needed.
pub fn write_outputs(dir: &Path, r: &ReplayResult) -> Result<(), FctError> {
    std::fs::create_dir_all(dir).map_err(|source| FctError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    fct::write_fct_csv(&dir.join("fct.csv"), &r.rows)?;
    fct::write_hpcc_fct(&dir.join("fct.txt"), &r.rows, HpccFlavor::Hpcc)?;
    fct::write_summary_csv(&dir.join("summary.csv"), &r.summary)?;
    fct::write_atomic(&dir.join("links.csv"), |w| {
        writeln!(w, "link,from,to,rate_bps,bytes,utilisation")?;
        for c in &r.channels {
            writeln!(
                w,
                "{},{},{},{},{},{:.6}",
                c.link, c.from, c.to, c.rate_bps, c.bytes, c.utilisation
            )?;
        }
        Ok(())
    })?;
    fct::write_atomic(&dir.join("switches.csv"), |w| {
        writeln!(w, "time_ns,switch,slots_in_use")?;
        for s in &r.slots {
            writeln!(w, "{},{},{}", s.time_ns, s.switch, s.slots_in_use)?;
        }
        Ok(())
    })
}
