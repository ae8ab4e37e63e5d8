//! # ina3d
//!
//! From a real Megatron-LM job to the network traffic of one 3D-parallel iteration, to
//! ns-3 and a native INA-aware replayer, to CSV tables.
//!
//! Data flows one way, one module per stage, one public entry per stage:
//!
//! ```text
//! megatron (parse) → schedule (workload) → trace (flow DAG) → ns3 / replay → report
//! ```
//!
//! `units` (typed quantities and ids), `topology` (clusters and routing) and `fct` (the
//! results schema both back-ends write) are shared vocabulary, not stages.

mod keyword;

pub mod fct;
pub mod formats;
pub mod megatron;
pub mod netmodel;
pub mod ns3;
pub mod plan;
pub mod record;
pub mod replay;
#[cfg(feature = "tables")]
pub mod report;
pub mod schedule;
pub mod topology;
pub mod trace;
pub mod units;
