//! A replay as a timeline ([`crate::formats::timeline_json`], docs/timeline.md): per
//! pipeline stage and rank, the compute, collectives (with their steps) and pipeline
//! sends the replay timed, and counter tracks for INA slots in use and the busiest links.
//!
//! The replayer's table keeps no tags (micro-batch, layer, collective, step), so a
//! [`TimelineSampler`] watches the records as they go into the table and keeps, for the
//! selected ranks only, what the timeline names its spans with; once the replay has run,
//! [`TimelineSampler::assemble`] joins them with the records' times. Memory and file size
//! stay bounded: the selection (by default a few representative ranks,
//! [`RankSelection::Representative`]) and a cap on events
//! ([`TimelineOptions::max_events`]).

mod counters;
mod entry;
mod ranks;
mod sampler;
mod spans;

pub use super::route::PathSource;
pub use ranks::{
    RankLayout, RankSelection, TimelineError, TimelineOptions, DEFAULT_LINKS, DEFAULT_MAX_EVENTS,
    GROUP_SAMPLE,
};
pub use sampler::{Timeline, TimelineSampler};
