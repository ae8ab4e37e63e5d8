//! Where the replayer gets its paths from: the seam between the engine and the one router.
//!
//! The engine asks a [`PathSource`] for the channels of every transfer, always through
//! [`PathSource::connection_path`] (ECMP per connection, keyed by
//! [`topology::pair_key`](crate::topology::pair_key)). `ina3d replay` passes the
//! topology's [`Routing`] — the same router `ina3d ns3 emit` writes into the glue's
//! `routes.txt` and INA trees are built from — so both back-ends put every record on the
//! same path. Tests pass hand-written paths through the same seam.

use crate::topology::{connection_key, pair_key, Channel, Routing, RoutingMode, Spray};
use crate::units::NodeId;

/// Anything that can route a transfer: channels from `src` to `dst`, ECMP choice keyed
/// by `key`, or a readable reason why there is no route.
pub trait PathSource {
    /// The channels of the path for ECMP key `key`, in order from `src`. Empty when
    /// `src == dst`.
    fn path(&self, src: NodeId, dst: NodeId, key: u64) -> Result<Vec<Channel>, String>;

    /// The path of the connection from `src` to `dst`: [`PathSource::path`] keyed by
    /// [`pair_key`]`(src, dst)`.
    fn connection_path(&self, src: NodeId, dst: NodeId) -> Result<Vec<Channel>, String> {
        self.path(src, dst, pair_key(src, dst))
    }

    /// The path of NCCL channel `channel` of that connection: [`PathSource::path`] keyed by
    /// [`connection_key`]`(src, dst, channel)` (channel 0 is the connection path).
    fn channel_path(&self, src: NodeId, dst: NodeId, channel: u32) -> Result<Vec<Channel>, String> {
        self.path(src, dst, connection_key(src, dst, channel))
    }

    /// Under `--routing spray`, the even split of a network transfer from `src` to `dst`
    /// over its equal-cost next hops ([`Routing::spray`]); `None` when transfers take one
    /// path (the default).
    fn spray(&self, _src: NodeId, _dst: NodeId) -> Result<Option<Spray>, String> {
        Ok(None)
    }
}

impl PathSource for Routing {
    fn path(&self, src: NodeId, dst: NodeId, key: u64) -> Result<Vec<Channel>, String> {
        Routing::path(self, src, dst, key).map_err(|e| e.to_string())
    }
    fn spray(&self, src: NodeId, dst: NodeId) -> Result<Option<Spray>, String> {
        if self.mode() != RoutingMode::Spray {
            return Ok(None);
        }
        Routing::spray(self, src, dst)
            .map(Some)
            .map_err(|e| e.to_string())
    }
}
