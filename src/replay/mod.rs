//! Stage 4b: the native flow-level replayer with INA-enabled switches (`ina3d replay`).
//!
//! One public entry, [`simulate`]: the trace DAG on a topology, event by event.
//!
//! **Model.** A record becomes ready when all its deps have ended and starts `gap` later.
//! `Compute` and `NvLink` records are timers of `dur`. A `Net` record is a fluid flow of
//! `bytes + ceil(bytes/payload)·48` wire bytes over its routed channels (each direction
//! of a link is one channel with the link's rate); rates are max-min fair over channels,
//! recomputed at every arrival and completion, but only for the flows connected to the
//! change through *tight* channels (channels whose flows' rate caps sum above the
//! capacity — a channel that cannot be saturated constrains nobody, so skipping it is
//! exact). Events of one nanosecond are processed as a batch before rates are re-solved,
//! so a collective whose flows finish together costs one re-solve, not one per flow. A
//! flow's record ends when its last byte has left (fluid completion, rounded up to the
//! nanosecond) plus the propagation delay of its path (store-and-forward of the last
//! packet is not modelled: an approximation of one packet time per hop).
//!
//! **Rate models** ([`RateModel`], `ReplayOptions::rate_model`; the default follows the
//! fabric's transport, [`RateModel::for_transport`]): `dcqcn` (RoCE, the default) caps
//! each transfer at its queue pair's DCQCN rate, with fluid switch queues, ECN marking
//! and CNP feedback evaluated only on oversubscribed or backlogged ports, and lets
//! aggregation streams take their rate before host transfers (`dcqcn/`, `solver.rs`,
//! `docs/model.md` "DCQCN rate model"); `ideal` (TCP) is the max-min model above alone
//! (`ideal.rs`). Each is a `RateControl` behind one seam (`rates.rs`): the engine tells
//! the model which transfers start and end and when a batch of events is done; the model
//! caps transfers, re-solves the rates and answers when its own next event falls.
//!
//! **INA.** All `Ina` records sharing an aggregation id form one unit: it starts when every
//! edge is ready (deps outside the aggregation only) plus that edge's gap, and streams
//! `S` bytes (the largest edge) as one flow occupying every channel of its tree once (up
//! and down); its rate is its max-min share, capped by its window, `window × (payload +
//! 48) / RTT` wire bytes per ns (the window's packets on the wire) with RTT = the tree's
//! up plus down chain of propagation and each hop's store-and-forward of one packet
//! ([`crate::netmodel::window_round_trip`]). It ends at
//! `S_wire/rate + up latency + down latency` (propagation), or, when its window bounds
//! it, with its last round ([`crate::netmodel::ina_tail`]); all its edges share its start
//! and end.
//! `S` is the largest up edge (down edges of a reduce-scatter carry smaller shards within
//! the same time; each edge's own bytes are what `links.csv` counts). A channel crossed by
//! `k` edges of one tree (children behind a switch that does not aggregate) weighs `k` for
//! the unit in the max-min solve. An aggregation with only down edges (Rina's multicast
//! back to the racks) sums nothing: it takes no slots and has no window limit.
//!
//! **Slots (one model for both back-ends).** An aggregation stream occupies, at each of
//! its aggregating switches, `w = min(window, packets of the stream, the pool it draws
//! from)` slots — SwitchML's worker pool of slot indices reused round-robin (`packets =
//! ceil(S / payload)`; the pool is the class's share under `static`, the whole pool
//! otherwise: a pool smaller than the window makes `w` the pool, and the stream then has
//! `w` packets in flight, its rate capped at `w × (payload + 48) / RTT`). The
//! switch holds them from the arrival of the stream's first packet until its last result
//! packet leaves it: the root when it multicasts the last sum, a non-root switch when it
//! forwards the parent's last result down (a switch that only sums upwards, Rina's rack
//! reduction, when its last partial sum leaves upwards). In the replayer's timing, for a
//! unit that starts at `t0` and whose last byte leaves the workers at `T`:
//! - first packet at `s`: `t0 +` the shortest up chain (sum of path delays) from a worker to `s`;
//! - last result leaves `s`: `T +` the longest up chain (the last packet reaching the root)
//!   `+` the down chain from the root to `s` (0 at the root); the unit ends at
//!   `T +` longest up `+` longest down chain.
//!
//! `switches.csv` records exactly these holding intervals, one sample per change, and
//! per-switch peak and slot-time (Σ w × held, slot·ns) are read from it by
//! [`crate::fct::switch_slots`], the same function that reads the glue's file.
//!
//! The policies ([`InaPolicy`]) grant the `w` slots on every switch of the tree, or refuse
//! them — never a part, so an aggregation never holds slots at one switch while it waits
//! at another (no deadlock). The decision is made once, when the unit starts (before its
//! first packet reaches any switch), and the slots stay *reserved* for the policy from
//! that start to the unit's end, while the recorded occupancy is the physical interval
//! above, which starts later by the up chain to `s` and ends earlier by the rest of the
//! down chain: one tree latency (up + down chain: 2 µs on a star with 1 µs links, ≈ 6 µs
//! on a 3-tier fat-tree) more conservative than the switches' physical use (the test
//! `a_waiting_aggregation_starts_when_the_reservation_ends` shows the bound reached). The
//! ns-3 glue decides and reserves the same way (`InaSlotAdmission`, docs/model.md).
//!
//! When an aggregation gets no slot and is not allowed to wait, it **falls back to the
//! host ring all-reduce** over its worker hosts: `n` flows, member i → member i+1, each of
//! `2(n−1)` chunks of `ceil(S/n)` bytes (headers per chunk), started together and
//! finishing when the last finishes plus `2(n−1)` path latencies — the ring's pipelined
//! steps as one fluid stream (per-step synchronisation is not modelled; the glue runs the
//! same ring step by step, docs/model.md#known-gaps measures the difference).
//!
//! Before anything runs the input is validated (unique ids, deps exist, no cycle once
//! each aggregation is contracted to one node, endpoints exist, every transfer has a route
//! whose links have non-zero rates): a bad trace is an error, never a hang.
//!
//! **Storage (cluster scale).** The records live in a [`RecordTable`] (one column per
//! field the replayer reads, deps as `u32` positions; ≈ 42 B plus 4 B per dep, against
//! ≈ 200 B for a `FlowRecord`), filled one record at a time from the generator or the
//! trace reader, so no `Vec<FlowRecord>` of the whole trace exists on those paths
//! (`ina3d replay --from` and `ina3d replay FILE`). The steps of ring collectives — the
//! records that grow with DP², 95 % of a 32,768-GPU ring trace — are recognised by their
//! pattern as they arrive and held as *ring blocks* that take no row at all (`table`): a
//! block record's fields and deps are computed from its position, and the records that
//! wait for it are the two of the next step. Paths are interned per connection
//! (sender, receiver, NCCL channel): one routing and one channel list per connection, a
//! `u32` per record. The event loop keeps each record's run-time state in one 24 B struct
//! (an event touches one cache line of it) and advises huge pages for the per-record and
//! per-channel arrays (`huge`). `fct.csv` and `fct.txt` rows are made as they are written
//! ([`ReplayResult::row_iter`]). GPT-3 175B on 32,768 GPUs with ring all-reduce
//! (17.7 M records) replays from the generator in 1.79 GiB peak RSS, ≈ 108 B per record,
//! everything included (was 4.9 GiB); 65,536 GPUs (68.0 M records) in 6.4 GiB, ≈ 101 B
//! per record (docs/benchmarks.md).

pub mod budget;
mod dcqcn;
mod engine;
mod error;
mod huge;
mod ideal;
mod memory;
mod options;
mod output;
mod pools;
mod prepare;
mod queue;
mod rates;
mod result;
mod route;
mod solver;
mod table;
pub mod timeline;
mod timers;

pub use dcqcn::Rp;
pub use engine::{simulate, simulate_table};
pub use error::ReplayError;
pub use options::ReplayOptions;
pub use output::{write_outputs, write_outputs_with, PerRecord};
pub use rates::RateModel;
pub use result::{ReplayResult, TenantSlots};
pub use route::PathSource;
pub use solver::TIME_HORIZON_NS;
pub use table::RecordTable;

/// The slot policies, each granting an aggregation its `w` slots on every switch of its
/// tree or refusing them (see the module docs): `static` partitions each switch's pool
/// equally among the enabled classes and an aggregation waits FIFO within its class's
/// share, a class with no share falling back to the host ring; `best-effort` takes the
/// slots from the whole pool and falls back to the host ring at once when they are not
/// free, ATP-style; `priority` is best-effort that waits instead, freed slots going to
/// waiting aggregations by class in `ina_classes` order, then arrival, then id (each
/// waiting aggregation whose slots are free is served, in that order); `planned` draws
/// from its group's reservation (the trace header's, `InaConfig::reservation`):
/// `w = min(window, packets, reservation)`, waiting while a switch's pool cannot hold it.
pub use crate::trace::{InaConfig, InaPolicy};
