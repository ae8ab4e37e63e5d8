//! Interop: the workload for other simulators, and their results read beside ours.
//!
//! - [`aicb`]: the AICB/SimAI workload text (`ina3d export aicb`) of a training job, from
//!   the same [`crate::schedule::Workload`] the trace is built from.
//! - [`chakra`]: MLCommons Chakra execution traces for ASTRA-sim (`ina3d export chakra`),
//!   one program per rank at the level of collectives; ring attention's blocks are the
//!   ones [`crate::lower`] gives the trace.
//! - [`simai`]: SimAI's `EndToEnd.csv` as long-form rows (`ina3d ns3 ingest`).
//! - [`external`]: an HPCC-family `fct.txt` mapped back onto trace records, and SimAI's
//!   iteration breakdown compared with a replay (`ina3d compare`).
//!
//! Nothing here drives or reads ns-3 itself: that is [`crate::ns3`]'s (which reads SimAI
//! files through [`simai`]).

pub mod aicb;
pub mod chakra;
pub mod external;
pub mod simai;

use std::path::PathBuf;

/// Why a file of another simulator could not be read or matched.
#[derive(Debug, thiserror::Error)]
pub enum InteropError {
    /// A file could not be parsed, or is of another job.
    #[error("{path}:{line}: {field}: {msg}")]
    Parse {
        /// File.
        path: PathBuf,
        /// 1-based line (0 when not line-bound).
        line: usize,
        /// Field or column.
        field: String,
        /// What was wrong.
        msg: String,
    },
    /// A file could not be read, written or understood (names file, line and field).
    #[error(transparent)]
    File(#[from] crate::formats::FormatError),
}
