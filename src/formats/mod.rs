//! Every file format ina3d reads or writes: one module per format, each with the one
//! reader and the one writer of that format.
//!
//! Formats sit below the stages and know nothing of them: a reader turns text into the
//! plain data the file holds (and a line-numbered [`FormatError`] when it cannot), a
//! writer does the reverse, and the stages convert that data to and from their own model
//! (a [`crate::topology::Topology`], a trace, a replay). So every producer and every
//! consumer of, say, `routes.txt` goes through [`routes_txt`], and a format changes in
//! exactly one place.
//!
//! | file | module | written by | read by |
//! |---|---|---|---|
//! | `topology.txt` (HPCC, SimAI flavours) | [`topology_txt`] | `ns3 emit` | `--topology FILE`, `ns3 run` |
//! | `flow.txt` (HPCC, Parsimon flavours) | [`flow_txt`] | `ns3 emit` | tests, users' simulators |
//! | `fct.txt` (HPCC 8 fields, Parsimon 9) | [`hpcc_fct`] | replay, glue (C++) | `ns3 ingest`, `compare` |
//! | `fct.csv` | [`fct_csv`] | replay, `ns3 run` | `compare`, `ns3 emit --starts` |
//! | `summary.csv` | [`summary_csv`] | replay, `ns3 run` | `compare`, `run`, `ns3 ingest` |
//! | `trace.txt` (the glue's DAG) | [`glue_trace_txt`] | `ns3 emit` | glue (C++), `ns3 run` |
//! | `routes.txt` (the glue's paths) | [`routes_txt`] | `ns3 emit` | glue (C++), `ns3 run` |
//! | `links.csv` | [`links_csv`] | replay, `ns3 run` (glue counters) | `compare` |
//! | trace (`.csv`, `.csv.gz`) | [`trace_csv`] | `trace` | every later stage |
//! | `switches.csv` | [`switches_csv`] | replay, `ns3 run` | `compare` |
//! | `results.csv` | [`results_csv`] (reader; written by `report::write_csv`) | `run`, sweep cells | `sweep collect` |
//! | AICB/SimAI workload | [`aicb`] | `export aicb` | tests (AICB's own files) |
//! | `plan.json` | [`plan_json`] | `plan` | `trace --plan` |
//! | `params.txt` (the glue's run parameters) | [`params_txt`] | `ns3 emit` | glue (C++), re-emit |
//! | `config.txt` (HPCC-family configuration) | [`config_txt`] (writer) | `ns3 emit` | glue (C++), HPCC/SimAI |
//! | `reservations.txt` (the glue's planned slots) | [`reservations_txt`] | `ns3 emit` | glue (C++) |
//! | `validate.csv` (the validation suite's table) | [`validate_csv`] | `validate` | tests |
//! | `bench.csv` (algbw/busbw per size of a collective bench) | [`bench_csv`] | replay, `ns3 run` | `compare` |
//! | SimAI `EndToEnd.csv` | [`simai_end_to_end`] (reader) | SimAI | `compare`, `ns3 ingest` |
//! | `jobs.csv`, `cluster.csv` | [`cluster_csv`] | `cluster` | tests, notebooks |
//! | `timeline.json` (Chrome/Perfetto trace events) | [`timeline_json`] (writer) | `replay --timeline`, `run --timeline` | ui.perfetto.dev, chrome://tracing, tests |
//! | Chakra execution trace (`<prefix>.<rank>.et`, v1.0.0) | [`chakra`] | `export chakra` | ASTRA-sim, mlc-chakra, tests |
//!
//! Files are written atomically ([`write_atomic`]): a crash never leaves a half-written
//! file under the final name. Readers never size an allocation by a number read from the
//! file beyond what the file's length justifies (a header count is a hint, not a promise).

pub mod aicb;
pub mod atomic;
pub mod bench_csv;
pub mod chakra;
pub mod cluster_csv;
pub mod config_txt;
mod csv_rows;
mod digits;
pub mod error;
pub mod fct_csv;
pub mod flow_txt;
pub mod glue_trace_txt;
pub mod gz_members;
pub mod hpcc_fct;
pub mod links_csv;
pub mod params_txt;
pub mod plan_json;
pub mod reality_csv;
pub mod reservations_txt;
pub mod results_csv;
pub mod routes_txt;
pub mod simai_end_to_end;
pub mod summary_csv;
pub mod switches_csv;
mod text;
pub mod timeline_json;
pub mod topology_txt;
pub mod trace_csv;
pub mod validate_csv;

pub use atomic::{write_atomic, write_atomic_bytes};

/// 64-bit FNV-1a (stable across platforms and Rust versions, unlike `std`'s hasher): the
/// content hash that names what a file or canonical text holds (a sweep cell's options, a
/// topology a plan was made on).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}
pub use error::{escape_input, escape_message, numbered_lines, FormatError, Warning};
pub use text::read_text;
