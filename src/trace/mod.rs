//! Stage 3: lower the workload onto a cluster as a DAG of flows, and read/write trace files.
//!
//! Public entries: [`generate`] (workload + topology → records streamed to a sink in
//! dependency order), [`write()`] / [`read`] / [`validate`] and the streaming
//! [`TraceWriter`] / [`TraceReader`] for files. The file format is specified for users in
//! `traces/README.md`.

pub mod gen;
pub mod io;
pub mod options;

pub use gen::{generate, generate_workload, header, nvlink_step_latency, TraceStats};
pub use io::{
    read, read_str, validate, write, Trace, TraceError, TraceHeader, TraceReader, TraceWriter,
    ValidationSummary, COLUMNS, SCHEMA_VERSION,
};
pub use options::{
    parse_classes, Algorithm, InaConfig, InaMode, InaPolicy, InaSwitchModel, InaSwitches,
    TraceOptions, INA_HEADER_KEYS,
};
