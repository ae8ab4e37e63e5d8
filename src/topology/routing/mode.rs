//! How the one router chooses among equal-cost next hops ([`RoutingMode`],
//! docs/model.md#routing-modes), and the even split of a sprayed transfer over them.
//!
//! - **`ecmp`**: a per-connection hash, [`ecmp_choice`] — RoCE/Ethernet fabrics hashing
//!   the 5-tuple. Every transfer of one connection and NCCL channel takes one path.
//! - **`dmodk`**: InfiniBand's static D-mod-k tables (Zahavi et al. 2010). A transfer to
//!   destination index `d` (a host's rank among the hosts, a switch's rank among the
//!   switches) takes, at its `j`-th choice point with `n_j` equal-cost next hops (in the
//!   router's ascending channel order), index `floor(d / Π_{i<j} n_i) mod n_j`. The
//!   choices are made in path order from the source, so on a fat-tree or leaf-spine the
//!   first up-port is `d mod u1`, the next `(d / u1) mod u2`: the classic rule, under which
//!   shift permutations of in-order ranks are contention-free on a full fat-tree; going
//!   down the choice counts are 1. On the other fabrics the same rule applies to the
//!   choices their family rule makes, in the order it makes them (parallel links, NIC
//!   ports, Jellyfish's k paths, Dragonfly's global links and Valiant group, the torus
//!   tie, BCube's starting level): destination-based and static, as a subnet manager's
//!   tables are.
//! - **`spray`**: adaptive routing / per-packet spraying. A transfer's bytes split evenly
//!   at every node over its equal-cost next hops ([`Routing::spray`]): a per-link fraction
//!   of the transfer, which on a Clos equals the even split over all equal-cost paths
//!   (every path crosses the same number of choices with the same counts) without listing
//!   the `(k/2)²` paths of a fat-tree. Where one path is needed (INA aggregation trees,
//!   whose edges a switch forwards along its tree), spray routes as `ecmp`.

use super::{ecmp_choice, Routing, FAR, LAST, NONE};
use crate::topology::{Channel, NodeKind, TopologyError};
use crate::units::NodeId;
use std::cell::Cell;
use std::collections::BTreeMap;

/// How equal-cost next hops are chosen (module docs).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum RoutingMode {
    /// Per-connection hash (RoCE/Ethernet ECMP). Today's behaviour.
    #[default]
    Ecmp,
    /// Static destination-mod-k tables (InfiniBand OpenSM `ftree`/`dmodk`).
    Dmodk,
    /// Even split over the equal-cost next hops (adaptive routing, packet spraying).
    Spray,
}

crate::keyword::keyword_enum!(RoutingMode, "routing", RoutingMode::Ecmp => "ecmp", RoutingMode::Dmodk => "dmodk", RoutingMode::Spray => "spray");

/// The choice rule of one path query: the mode, the ECMP seed and key, and for D-mod-k
/// the destination index and the product of the earlier choices' counts.
pub(super) struct Pick {
    dmodk: bool,
    seed: u64,
    key: u64,
    dest: u64,
    div: Cell<u64>,
}

impl Pick {
    /// The rule of a path to `dst` with ECMP key `key` under `r`'s mode.
    pub(super) fn new(r: &Routing, dst: NodeId, key: u64) -> Pick {
        Pick {
            dmodk: r.mode == RoutingMode::Dmodk,
            seed: r.seed,
            key,
            dest: r.dest_index(dst),
            div: Cell::new(1),
        }
    }

    /// [`Pick::at`] with the ECMP key salted by `salt` (a choice that must be independent
    /// of the others the same key makes); D-mod-k ignores the key.
    pub(super) fn at_salted(&self, salt: u64, node: NodeId, n: usize) -> usize {
        if self.dmodk {
            return self.at(node, n);
        }
        ecmp_choice(self.seed, self.key ^ salt, node, n)
    }

    /// Which of `n` equal-cost next hops to take at `node`: [`ecmp_choice`] under
    /// `ecmp` and `spray`, `floor(d / Π earlier counts) mod n` under `dmodk`.
    pub(super) fn at(&self, node: NodeId, n: usize) -> usize {
        if !self.dmodk {
            return ecmp_choice(self.seed, self.key, node, n);
        }
        if n <= 1 {
            return 0;
        }
        let div = self.div.get();
        self.div.set(div.saturating_mul(n as u64));
        ((self.dest / div) % n as u64) as usize
    }
}

/// A transfer sprayed over its equal-cost paths: channel `c` carries `load[c] / strands`
/// of its bytes. `strands` is the least common denominator of the per-channel fractions,
/// so the transfer is exactly `strands` equal strands, channel `c` crossed by `load[c]`
/// of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spray {
    /// Equal strands the transfer is cut into.
    pub strands: u32,
    /// Channels with the number of strands crossing each, ascending channel.
    pub load: Vec<(Channel, u32)>,
}

/// The most strands [`Routing::spray`] cuts a transfer into (a fat-tree of k = 32 has
/// 16 × 16 = 256 equal-cost core paths).
pub const MAX_STRANDS: u64 = 256;

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// A non-negative fraction, reduced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Frac(u64, u64);

impl Frac {
    fn add(self, o: Frac) -> Option<Frac> {
        let l = self.1 / gcd(self.1, o.1);
        let den = l.checked_mul(o.1)?;
        let num = self
            .0
            .checked_mul(den / self.1)?
            .checked_add(o.0.checked_mul(den / o.1)?)?;
        let g = gcd(num, den).max(1);
        Some(Frac(num / g, den / g))
    }
    fn split(self, n: u64) -> Option<Frac> {
        let den = self.1.checked_mul(n)?;
        let g = gcd(self.0, den).max(1);
        Some(Frac(self.0 / g, den / g))
    }
}

impl Routing {
    /// The routing mode of these tables.
    pub fn mode(&self) -> RoutingMode {
        self.mode
    }

    /// The D-mod-k destination index of `v`: a host's rank among the hosts, a switch's
    /// among the switches (ascending node id).
    pub(super) fn dest_index(&self, v: NodeId) -> u64 {
        self.rank.get(v.idx()).copied().unwrap_or(0) as u64
    }

    /// The equal-cost next hops of `v` towards `dst` (a host or switch), ascending
    /// channel: the choices the path walk picks one of, all of them.
    fn next_hops(&self, v: NodeId, dst: NodeId) -> Result<Vec<(Channel, NodeId)>, TopologyError> {
        if self.general.is_some() || self.kinds[dst.idx()] == NodeKind::Switch {
            // one step of the general walk would need the family rule's state; spray's
            // even split is defined on the Clos tables only
            return Err(TopologyError::World(format!(
                "--routing spray splits transfers over the equal-cost next hops of a Clos fabric (fat-tree, leaf-spine, rail, dual-plane); transfer {v} → {dst} is not between two hosts of one"
            )));
        }
        let grp = &self.groups[self.group_of[dst.idx()] as usize];
        let dist_of = |w: NodeId| match self.sw[w.idx()] {
            NONE => FAR,
            wi => grp.dist[wi as usize],
        };
        if self.kinds[v.idx()] != NodeKind::Switch {
            let direct: Vec<_> = self.net(v).iter().filter(|p| p.1 == dst).copied().collect();
            if !direct.is_empty() {
                return Ok(direct);
            }
            let best = self
                .net(v)
                .iter()
                .map(|p| dist_of(p.1))
                .min()
                .unwrap_or(FAR);
            if best == FAR {
                return Err(TopologyError::Disconnected { from: v, to: dst });
            }
            return Ok(self
                .net(v)
                .iter()
                .filter(|p| dist_of(p.1) == best)
                .copied()
                .collect());
        }
        match grp.next[self.sw[v.idx()] as usize] {
            NONE => Err(TopologyError::Disconnected { from: v, to: dst }),
            LAST => Ok(self
                .net(dst)
                .iter()
                .filter(|p| p.1 == v)
                .map(|&(c, _)| (Channel(c.0 ^ 1), dst))
                .collect()),
            id => Ok(self
                .lists
                .get(id)
                .iter()
                .map(|&c| (c, self.channel_ends(c).1))
                .collect()),
        }
    }

    /// The even split of a transfer from host `src` to host `dst` over its equal-cost
    /// next hops at every node (module docs): the fraction of the transfer on each
    /// channel, as whole strands. Errors: an endpoint that is not a host, no route, a
    /// non-Clos fabric, or a split finer than [`MAX_STRANDS`] strands.
    pub fn spray(&self, src: NodeId, dst: NodeId) -> Result<Spray, TopologyError> {
        self.host(src)?;
        self.host(dst)?;
        if src == dst {
            return Ok(Spray {
                strands: 1,
                load: Vec::new(),
            });
        }
        let too_fine = || {
            TopologyError::World(format!(
                "--routing spray: the transfer {src} → {dst} splits into more than {MAX_STRANDS} equal strands"
            ))
        };
        // every hop brings the transfer one step closer, so nodes keyed by their
        // remaining distance are settled before anything reaches them from further away
        let mut mass: BTreeMap<NodeId, Frac> = BTreeMap::from([(src, Frac(1, 1))]);
        let mut load: BTreeMap<Channel, Frac> = BTreeMap::new();
        let mut hops = 0usize;
        while !(mass.len() == 1 && mass.contains_key(&dst)) {
            hops += 1;
            if hops > self.kinds.len() {
                return Err(TopologyError::Disconnected { from: src, to: dst });
            }
            let mut next: BTreeMap<NodeId, Frac> = BTreeMap::new();
            for (&v, &m) in &mass {
                if v == dst {
                    let e = next.entry(v).or_insert(Frac(0, 1));
                    *e = e.add(m).ok_or_else(too_fine)?;
                    continue;
                }
                let nh = self.next_hops(v, dst)?;
                let part = m.split(nh.len() as u64).ok_or_else(too_fine)?;
                if part.1 > MAX_STRANDS {
                    return Err(too_fine());
                }
                for (c, w) in nh {
                    let e = load.entry(c).or_insert(Frac(0, 1));
                    *e = e.add(part).ok_or_else(too_fine)?;
                    let e = next.entry(w).or_insert(Frac(0, 1));
                    *e = e.add(part).ok_or_else(too_fine)?;
                }
            }
            mass = next;
        }
        let strands = load.values().fold(1u64, |l, f| l / gcd(l, f.1) * f.1);
        if strands > MAX_STRANDS {
            return Err(too_fine());
        }
        Ok(Spray {
            strands: strands as u32,
            load: load
                .into_iter()
                .map(|(c, f)| (c, (f.0 * (strands / f.1)) as u32))
                .collect(),
        })
    }
}
