//! Stage 1: read a Megatron-LM job (log, launch script, config file or preset) into a
//! [`TrainingConfig`].

pub mod config;

pub use config::{Dtype, IterationRecord, Recompute, Source, TimerStat, TrainingConfig};
