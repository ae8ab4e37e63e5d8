//! Stage 3: lower the workload onto a cluster as a DAG of flows, and read/write trace files.

pub mod record;

pub use record::{AggDir, AggTag, Class, FlowRecord, Mode};
