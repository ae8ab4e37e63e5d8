//! The figures of a replay's memory budget ([`crate::replay::budget`], which re-exports
//! them) that the error refusing a replay also prints.

/// Peak bytes of a replay per record, whether a row or in a ring block (measured
/// 31.6 B, rounded up).
pub const BYTES_PER_RECORD: u64 = 32;

/// Peak bytes of a replay per explicit row, beyond [`BYTES_PER_RECORD`] (an all-row
/// replay measured 101–108 B per record before; the sum is rounded up to 120 B).
pub const BYTES_PER_ROW: u64 = 88;

/// The environment variable that sets the limit.
pub const LIMIT_VAR: &str = "INA3D_MEMORY_LIMIT";
