//! The memory a replay may take, checked while its records arrive: a job that will not
//! fit is refused with the estimate and the limit before the replay holds it, instead of
//! being killed by the system half way.
//!
//! A replay's peak memory is proportional to its records: every record has a run-time
//! state that also holds its times for the outputs (24 B) and a dep count while the
//! replay is prepared, [`BYTES_PER_RECORD`] with the fixed part spread over it; a record
//! held as an explicit row of the table (not in a ring block, `table`) adds its columns,
//! deps, dependants and path, [`BYTES_PER_ROW`]. Measured: 31.6 B per record for the
//! 68.0 M records of a 65,536-GPU ring job (2.05 GiB, 99 % in ring blocks); 101–108 B per
//! record before ring blocks, when every record was a row (docs/benchmarks.md). The limit is `INA3D_MEMORY_LIMIT` (bytes, with an optional `K`, `M` or
//! `G` suffix, powers of 1,024) or else the memory the system reports available when the
//! replay starts (`MemAvailable` of `/proc/meminfo`) or, when lower, what the process's
//! address-space limit (`RLIMIT_AS`, `ulimit -v`) leaves of its address space; where none
//! is known nothing is checked.

use super::error::ReplayError;

pub use super::memory::{BYTES_PER_RECORD, BYTES_PER_ROW, LIMIT_VAR};

/// A replay's memory limit and where it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryBudget {
    /// Bytes.
    pub limit: u64,
    /// Where the limit came from, for the message.
    pub source: String,
}

impl MemoryBudget {
    /// The limit of this process: [`LIMIT_VAR`] if set, else the memory available now;
    /// `None` when neither is known. A malformed [`LIMIT_VAR`] is an error naming it.
    pub fn of_process() -> Result<Option<MemoryBudget>, ReplayError> {
        if let Some(v) = std::env::var_os(LIMIT_VAR) {
            let v = v.to_string_lossy().into_owned();
            let limit = parse_size(&v).ok_or_else(|| ReplayError::BadLimit(v.clone()))?;
            return Ok(Some(MemoryBudget {
                limit,
                source: format!("{LIMIT_VAR}={v}"),
            }));
        }
        let free = mem_available().map(|limit| MemoryBudget {
            limit,
            source: format!("the memory available now, MemAvailable; {LIMIT_VAR} sets another"),
        });
        let space = address_space_left().map(|limit| MemoryBudget {
            limit,
            source: format!(
                "what the process's address-space limit (RLIMIT_AS, ulimit -v) leaves; \
                 {LIMIT_VAR} sets another"
            ),
        });
        // the tighter of the two; a limit that is not known does not count
        Ok(match (free, space) {
            (Some(f), Some(s)) => Some(if s.limit < f.limit { s } else { f }),
            (f, s) => f.or(s),
        })
    }

    /// Refuses a replay of `records` records of which `rows` are explicit rows (an
    /// estimate, `how` says of what) that does not fit.
    pub fn check(&self, records: u64, rows: u64, how: &str) -> Result<(), ReplayError> {
        let need = need(records, rows);
        if need <= self.limit {
            return Ok(());
        }
        Err(ReplayError::OverBudget {
            records,
            rows,
            how: how.to_string(),
            need,
            limit: self.limit,
            origin: self.source.clone(),
        })
    }
}

/// Peak bytes of a replay of `records` records of which `rows` are explicit rows.
pub fn need(records: u64, rows: u64) -> u64 {
    records
        .saturating_mul(BYTES_PER_RECORD)
        .saturating_add(rows.saturating_mul(BYTES_PER_ROW))
}

/// The records of a file of `size` bytes of which `read` bytes gave `records` records.
pub fn extrapolate(records: u64, read: u64, size: u64) -> u64 {
    if read == 0 {
        return records;
    }
    ((records as u128 * size as u128) / read as u128).min(u64::MAX as u128) as u64
}

/// `1073741824`, `512M`, `8G`, `8GiB` (powers of 1,024).
fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let n: u64 = s[..digits].parse().ok()?;
    let shift = match s[digits..].trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KIB" => 10,
        "M" | "MIB" => 20,
        "G" | "GIB" => 30,
        "T" | "TIB" => 40,
        _ => return None,
    };
    n.checked_mul(1u64 << shift)
}

/// The soft address-space limit (`RLIMIT_AS`) less the address space the process maps
/// now (`/proc/self/statm`), bytes; `None` when unlimited or not known.
fn address_space_left() -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given and nothing else.
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut r) } != 0 || r.rlim_cur == libc::RLIM_INFINITY
    {
        return None;
    }
    let mapped = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |pages| pages.saturating_mul(page_size()));
    Some(r.rlim_cur.saturating_sub(mapped))
}

fn page_size() -> u64 {
    // SAFETY: sysconf only reads a system constant.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(p).unwrap_or(4096)
}

/// `MemAvailable` of `/proc/meminfo`, bytes.
fn mem_available() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let l = s.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = l.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

pub use crate::units::binary_size as size;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_with_binary_suffixes_and_refuse_anything_else() {
        assert_eq!(parse_size("1073741824"), Some(1 << 30));
        assert_eq!(parse_size("512M"), Some(512 << 20));
        assert_eq!(parse_size("8G"), Some(8 << 30));
        assert_eq!(parse_size("8gib"), Some(8 << 30));
        assert_eq!(parse_size("8 G"), Some(8 << 30));
        assert_eq!(parse_size("eight"), None);
        assert_eq!(parse_size("8X"), None);
        assert_eq!(parse_size("99999999999T"), None, "overflow");
    }

    #[test]
    fn a_replay_over_the_limit_is_refused_with_the_estimate_and_the_limit() {
        let b = MemoryBudget {
            limit: 1200,
            source: "test".into(),
        };
        // ten rows fit, as do 37 records in ring blocks
        assert!(b.check(10, 10, "exact").is_ok());
        assert!(b.check(37, 0, "blocks").is_ok());
        assert!(b.check(38, 0, "blocks").is_err());
        let e = b.check(11, 11, "11 so far").unwrap_err().to_string();
        assert!(e.contains("11 records") && e.contains("11 so far"), "{e}");
        assert!(
            e.contains("11 of them rows") && e.contains("32 B per record, 88 B more per row"),
            "{e}"
        );
        assert!(e.contains("1.29 KiB"), "{e}");
        assert!(e.contains("limit of 1.17 KiB"), "{e}");
        assert!(e.contains("test"), "{e}");
    }

    #[test]
    fn sizes_print_in_the_largest_unit_that_keeps_them_above_one() {
        assert_eq!(size(512), "512 B");
        assert_eq!(size(1536), "1.50 KiB");
        assert_eq!(size(3 << 30), "3.00 GiB");
    }

    #[test]
    fn a_file_s_records_are_extrapolated_from_the_part_read() {
        assert_eq!(extrapolate(1000, 10, 100), 10_000);
        assert_eq!(extrapolate(1000, 0, 100), 1000);
        assert_eq!(extrapolate(u64::MAX, 1, 2), u64::MAX);
    }
}
