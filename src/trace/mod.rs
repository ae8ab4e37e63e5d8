//! Stage 3: lower the workload onto a cluster as a DAG of flows, and read/write trace files.
//!
//! Public entries: [`generate`] (workload + topology → records streamed to a sink in
//! dependency order), [`write()`] / [`read`] / [`validate`] and the streaming
//! [`TraceWriter`] / [`TraceReader`] for files. The file format is specified for users in
//! `traces/README.md`.

pub mod bench;
mod check;
pub mod gen;
pub mod groups;
pub mod inspect;
pub mod options;
pub mod planned;

pub use crate::formats::trace_csv::{
    read, read_str, write, Trace, TraceHeader, TraceReader, TraceWriter, COLUMNS, SCHEMA_VERSION,
};
pub use bench::{parse_sizes, BenchGroup, BenchSpec, CollectiveBench};
pub use check::{check_topology_hash, validate, ValidationSummary};
pub use gen::{
    default_channels, generate, generate_bench, generate_workload, header, nvlink_collective_time,
    nvlink_step_latency, swing_peer, swing_rho, swing_schedule, SwingStep, TraceStats,
    NCCL_NVLINK_RING_STEP,
};
pub use options::{
    aggregating_switches, format_reservations, format_tenants, parse_classes, parse_reservations,
    parse_tenants, Algorithm, InaConfig, InaMode, InaPolicy, InaSwitches, Reservation, Tenant,
    TraceOptions, DEFAULT_INA_SLOTS, INA_HEADER_KEYS, INA_RESERVATIONS_KEY, INA_TENANTS_KEY,
    MAX_ITERATIONS, MAX_NCCL_CHANNELS, MAX_NVLINK_STEP_LATENCY,
};

/// Why a trace could not be generated, read or written.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The trace file cannot be read or written, or breaks the format (file:line:column).
    #[error(transparent)]
    File(#[from] crate::formats::FormatError),
    /// A metadata value the stage needs is missing or malformed.
    #[error("trace metadata `{key}`: {msg}")]
    Metadata {
        /// Key.
        key: String,
        /// Why.
        msg: String,
    },
    /// Generation failed (inconsistent options, internal invariant).
    #[error("{0}")]
    Generate(String),
    /// The training configuration cannot be scheduled.
    #[error(transparent)]
    Schedule(#[from] crate::schedule::ScheduleError),
    /// A collective could not be lowered.
    #[error(transparent)]
    Lower(#[from] crate::lower::LowerError),
    /// The job does not fit the topology, or routing failed.
    #[error(transparent)]
    Topology(#[from] crate::topology::TopologyError),
}
