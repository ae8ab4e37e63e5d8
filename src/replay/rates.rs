//! The seam between the event loop and the rate models: what the engine tells a model
//! ([`RateControl`]: transfers put on and taken off the network, the end of a batch of
//! events, the model's own events) and what the model answers (caps on the transfers'
//! rates, through [`Net::set_cap`], the re-solve of the rates, and the time of its next
//! own event). [`RateModel`] names the implementations: `ideal` (`ideal.rs`) and the
//! exact `dcqcn` (`dcqcn/`, the reference).

use super::solver::Net;
use crate::formats::params_txt::Transport;

/// How the replayer rates transfers on shared links.
///
/// The default is the model of the fabric's transport ([`RateModel::for_transport`]):
/// `dcqcn` for RoCE, the transport the ns-3 glue runs unless told otherwise and what LLM
/// clusters run; `ideal` for TCP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RateModel {
    /// Max-min fair rates, recomputed at every arrival and completion: a transport that
    /// reaches its fair share at once (what TCP approaches on long transfers; the model
    /// for `tcp`).
    Ideal,
    /// Max-min fair rates capped by each queue pair's DCQCN rate, with fluid switch
    /// queues and ECN marking on oversubscribed ports (`dcqcn/`): what the RoCE glue
    /// and SimAI run, and the default.
    #[default]
    Dcqcn,
}

impl RateModel {
    /// The model that follows `transport` (docs/model.md#dcqcn-rate-model): DCQCN's
    /// cuts and slow recovery under RoCE, max-min rates under TCP, whose windows reach
    /// their fair share within a few round trips. The one place the default is chosen:
    /// [`RateModel::chosen`] applies it.
    pub fn for_transport(transport: Transport) -> RateModel {
        match transport {
            Transport::Roce => RateModel::Dcqcn,
            Transport::Tcp => RateModel::Ideal,
        }
    }

    /// The model given (`--rate-model`), else the transport's
    /// ([`RateModel::for_transport`]).
    pub fn chosen(given: Option<RateModel>, transport: Transport) -> RateModel {
        given.unwrap_or(RateModel::for_transport(transport))
    }
}

crate::keyword::keyword_enum!(RateModel, "rate model", RateModel::Ideal => "ideal", RateModel::Dcqcn => "dcqcn");

/// A queue pair's connection: source, destination, NCCL channel.
pub type QpKey = (u32, u32, u32);

/// What kind of transfer a new unit is, as the rate model is told it.
#[derive(Clone, Copy, Debug)]
pub(super) enum Started {
    /// A record's transfer on connection `conn`, its path's line rate `line` (B/ns).
    Transfer {
        /// Source, destination, NCCL channel.
        conn: QpKey,
        /// The path's smallest capacity, bytes per ns.
        line: f64,
    },
    /// An aggregation stream, its window protocol as it started.
    Stream(StreamWindow),
    /// One flow of an aggregation's fallback host ring.
    Ring,
}

/// What caps an aggregation stream's rate: its window's rate, round trip and tree.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct StreamWindow {
    /// The window's rate over the bare round trip, bytes per ns (infinite: no window).
    pub window: f64,
    /// The bare round trip, ns.
    pub rtt: u64,
    /// The tree's own limit (capacity over multiplicity on its tightest channel).
    pub tree_cap: f64,
}

/// A rate model behind the event loop. The engine calls, in this order for each unit:
/// [`RateControl::started`] once the unit is on its channels; [`RateControl::finished`]
/// when its last byte has left (its rate still the last solved), then
/// [`RateControl::removing`] with its rate at 0, just before it leaves its channels; and
/// after every batch of events of one nanosecond, [`RateControl::settle`], which
/// re-solves the rates ([`Net::resolve`]) and answers when the model's own next event
/// falls, which the engine then delivers through [`RateControl::tick`].
pub(super) trait RateControl {
    /// Unit `u` was put on its channels, as `what`.
    fn started(&mut self, net: &mut Net, u: u32, what: Started);
    /// Unit `u` has sent its last byte.
    fn finished(&mut self, net: &mut Net, u: u32);
    /// Unit `u` is about to leave its channels.
    fn removing(&mut self, net: &mut Net, u: u32);
    /// After a batch of events at `net.now`: bring the rates up to date; the time of the
    /// model's next own event, when one is to be queued.
    fn settle(&mut self, net: &mut Net) -> Option<u64>;
    /// The model's own event queued for `net.now` (one [`RateControl::settle`] asked for);
    /// `engine_next` is the time of the engine's next event. The model may move
    /// `net.now` on, to its own later events before `engine_next`, while they leave the
    /// rates as they are.
    fn tick(&mut self, net: &mut Net, engine_next: Option<u64>);
}
