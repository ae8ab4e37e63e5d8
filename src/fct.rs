//! The results contract shared by both back-ends and the report stage.
//!
//! The native replayer and the ns-3 glue both write, for one trace:
//! - `fct.csv`: one [`FctRow`] per trace record (compute and NVLink records included, so
//!   the timeline is complete), joinable on `flow_id`;
//! - `fct.txt`: the HPCC text format (network records only) for tools that read it;
//! - `summary.csv`: one [`Summary`] row, computed by the same Rust function from the
//!   trace and the per-record times, so both back-ends' summaries mean exactly the same.

use serde::{Deserialize, Serialize};

/// One record's outcome, as written to `fct.csv`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FctRow {
    /// Trace record id.
    pub flow_id: u64,
    /// Source node id.
    pub src: u32,
    /// Destination node id.
    pub dst: u32,
    /// `net`, `ina`, `nvlink` or `compute`.
    pub mode: String,
    /// `tp`, `pp`, `dp`, `emb` or `compute`.
    pub class: String,
    /// Payload bytes.
    pub size_bytes: u64,
    /// When the record started (after deps and gap), ns from iteration start.
    pub start_ns: u64,
    /// When it finished.
    pub end_ns: u64,
    /// `end_ns - start_ns`.
    pub fct_ns: u64,
    /// Completion time alone on an idle network (size/bottleneck rate + path latency).
    pub standalone_fct_ns: u64,
}

/// The iteration summary, one row in `summary.csv`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// `replay` or `ns3`.
    pub backend: String,
    /// Trace file it ran.
    pub trace: String,
    /// Number of trace records.
    pub records: u64,
    /// Makespan of the DAG.
    pub iteration_time_ns: u64,
    /// Busy compute of the busiest GPU.
    pub compute_ns: u64,
    /// Compute on the critical path beyond the busiest GPU's own (pipeline fill/drain).
    pub bubble_ns: u64,
    /// Critical-path time in TP records.
    pub exposed_tp_ns: u64,
    /// Critical-path time in PP records.
    pub exposed_pp_ns: u64,
    /// Critical-path time in DP records.
    pub exposed_dp_ns: u64,
    /// Critical-path time in embedding records.
    pub exposed_emb_ns: u64,
    /// Compute on the critical path.
    pub critical_path_compute_ns: u64,
    /// Payload bytes per class that crossed the network (net + ina records).
    pub tp_bytes: u64,
    /// See `tp_bytes`.
    pub pp_bytes: u64,
    /// See `tp_bytes`.
    pub dp_bytes: u64,
    /// See `tp_bytes`.
    pub emb_bytes: u64,
    /// Bytes that traversed at least one switch (sum over records of payload × switch hops).
    pub switch_bytes: u64,
    /// Peak number of INA aggregator slots in use on any switch.
    pub ina_slot_peak: u64,
    /// Wall-clock time the back-end took.
    pub wall_time_ns: u64,
}
