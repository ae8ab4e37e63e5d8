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
//!
//! `interop` writes the workload for other simulators (AICB/SimAI, Chakra for ASTRA-sim)
//! and reads their results beside ours.
//!
//! `pipeline` puts the stages together as in-process library calls (the main job, `run`,
//! over every policy and ECMP seed); `sweep` runs grids of such jobs, locally or on Slurm.

mod keyword;

pub mod cluster;
pub mod collective;
pub mod fct;
pub mod formats;
pub mod interop;
pub mod lower;
pub mod megatron;
pub mod netmodel;
pub mod ns3;
pub mod pipeline;
pub mod plan;
pub mod progress;
pub mod record;
pub mod replay;
pub mod report;
pub mod schedule;
pub mod sweep;
pub mod topology;
pub mod trace;
pub mod units;
