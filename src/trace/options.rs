//! Options of trace generation: collective algorithm and INA configuration.

use crate::record::Class;
use crate::schedule::ScheduleOptions;
use crate::topology::{LinkKind, NodeKind, RoutingMode, Topology};
use crate::units::{Bytes, Nanos, NodeId};
use serde::{Deserialize, Serialize};

pub use crate::collective::{
    format_reservations, format_tenants, parse_classes, parse_reservations, parse_tenants,
    Algorithm, InaConfig, InaMode, InaPolicy, InaSwitches, Reservation, Tenant, DEFAULT_INA_SLOTS,
    INA_RESERVATIONS_KEY, INA_TENANTS_KEY,
};

/// Header keys of the INA switch model, each with the spellings accepted on read (the
/// first is what `ina3d trace` writes).
pub const INA_HEADER_KEYS: [(&str, &[&str]); 5] = [
    (
        "slots per switch",
        &[
            "ina_slots",
            "ina_slots_per_switch",
            "ina.slots_per_switch",
            "ina.slots",
        ],
    ),
    (
        "payload bytes",
        &[
            "ina_payload_bytes",
            "ina_payload",
            "ina.payload_bytes",
            "ina.payload",
        ],
    ),
    ("window", &["ina_window", "ina.window"]),
    ("policy", &["ina_policy", "ina.policy"]),
    ("classes", &["ina_classes", "ina.classes"]),
];

impl InaConfig {
    /// The model of a trace header; keys absent from the header keep
    /// [`InaConfig::default`], a malformed value is an error naming its key.
    pub fn from_header(h: &super::TraceHeader) -> Result<Self, super::TraceError> {
        let mut m = InaConfig::default();
        let get = |which: usize| {
            INA_HEADER_KEYS[which]
                .1
                .iter()
                .find_map(|k| h.get(k).map(|v| (*k, v.trim())))
        };
        let bad = |key: &str, msg: String| super::TraceError::Metadata {
            key: key.into(),
            msg,
        };
        let int = |which: usize| -> Result<Option<(&str, u64)>, super::TraceError> {
            match get(which) {
                None => Ok(None),
                Some((k, v)) => v.parse::<u64>().map(|n| Some((k, n))).map_err(|_| {
                    bad(
                        k,
                        format!(
                            "`{v}` is not a non-negative integer ({})",
                            INA_HEADER_KEYS[which].0
                        ),
                    )
                }),
            }
        };
        let small =
            |k: &str, n: u64| u32::try_from(n).map_err(|_| bad(k, format!("{n} is too large")));
        if let Some((k, n)) = int(0)? {
            m.slots = small(k, n)?;
        }
        if let Some((k, n)) = int(1)? {
            if n == 0 {
                return Err(bad(k, "payload must be positive".into()));
            }
            m.payload = Bytes(n);
        }
        if let Some((k, n)) = int(2)? {
            m.window = small(k, n)?;
        }
        if let Some((k, v)) = get(3) {
            m.policy = Some(v.replace(['_', ' '], "-").parse().map_err(|e| bad(k, e))?);
        }
        if let Some(v) = h.get(INA_RESERVATIONS_KEY) {
            m.reservations = parse_reservations(v).map_err(|e| bad(INA_RESERVATIONS_KEY, e))?;
        }
        if let Some(v) = h.get(INA_TENANTS_KEY) {
            m.tenants = parse_tenants(v).map_err(|e| bad(INA_TENANTS_KEY, e))?;
        }
        if let Some((k, v)) = get(4) {
            m.classes = v
                .split([',', ';', '+', ' '])
                .filter(|c| !c.is_empty() && *c != "none")
                .map(|c| c.parse::<Class>().map_err(|e| bad(k, e)))
                .collect::<Result<_, _>>()?;
        }
        Ok(m)
    }
}

/// Which switches may aggregate (`can[node]`) under `switches`, and each host's ToR (the
/// first switch its NIC attaches to). Errors: an id that is not a switch of `topo`.
pub fn aggregating_switches(
    topo: &Topology,
    switches: &InaSwitches,
) -> Result<(Vec<bool>, Vec<Option<NodeId>>), super::TraceError> {
    if topo.fabric == crate::topology::Fabric::Direct {
        return Err(super::TraceError::Generate(format!(
            "topology `{}` is switchless direct connect (TopoOpt): no switch can aggregate, so INA options do not apply; use a host algorithm (--ina off, --collective ring|hd|dbt|swing)",
            topo.source
        )));
    }
    let n = topo.node_count();
    let mut can_agg = vec![false; n];
    let mut tor = vec![None; n];
    for l in topo.links.iter().filter(|l| l.kind == LinkKind::Nic) {
        let (h, s) = if topo.kinds[l.a.idx()] == NodeKind::Host {
            (l.a, l.b)
        } else {
            (l.b, l.a)
        };
        if topo.kinds[s.idx()] == NodeKind::Switch && tor[h.idx()].is_none() {
            tor[h.idx()] = Some(s);
        }
    }
    match switches {
        InaSwitches::All => {
            for (i, k) in topo.kinds.iter().enumerate() {
                can_agg[i] = *k == NodeKind::Switch;
            }
        }
        InaSwitches::Tor => {
            for t in tor.iter().flatten() {
                can_agg[t.idx()] = true;
            }
        }
        InaSwitches::Ids(ids) => {
            for id in ids {
                if topo.kind(*id) != Some(NodeKind::Switch) {
                    return Err(super::TraceError::Generate(format!(
                        "--ina-switches: node {id} is not a switch of topology `{}`",
                        topo.source
                    )));
                }
                can_agg[id.idx()] = true;
            }
        }
    }
    Ok((can_agg, tor))
}

/// All options of [`super::generate`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceOptions {
    /// Compute model.
    pub schedule: ScheduleOptions,
    /// Host algorithm for network collectives.
    pub collective: Algorithm,
    /// INA.
    pub ina: InaConfig,
    /// ECMP / tie-break seed.
    pub seed: u64,
    /// How equal-cost paths are chosen (`--routing`); recorded in the header as
    /// `routing` when not the default `ecmp`.
    #[serde(default)]
    pub routing: RoutingMode,
    /// The plan `InaMode::Planned` lowers (`ina3d trace --plan`).
    pub plan: Option<crate::formats::plan_json::PlanFile>,
    /// Iterations to generate (each waits for the previous one's gradient sync).
    pub iterations: u32,
    /// Latency α per algorithm step inside an NVLink domain; `None`: NCCL's own estimate
    /// for a ring step over NVLink, 3.4 µs ([`super::gen::NCCL_NVLINK_RING_STEP`]).
    pub nvlink_step_latency: Option<Nanos>,
    /// NCCL channels each network collective is split over; `None`: NCCL's rule for the
    /// topology ([`super::default_channels`]).
    pub nccl_channels: Option<u32>,
}

/// The most iterations a trace may have (`--iterations`).
pub const MAX_ITERATIONS: u32 = 1000;

/// The longest NVLink step latency α (`--nvlink-step-latency`): 1 s, about 300,000 times
/// NCCL's own estimate; every NVLink record's `steps · α` then fits easily in u64 ns.
pub const MAX_NVLINK_STEP_LATENCY: Nanos = Nanos(1_000_000_000);

/// The most NCCL channels a collective may be split over (`--nccl-channels`): NCCL's
/// `MAXCHANNELS` (`src/include/device.h`; 32 in older releases, 64 in recent ones).
pub const MAX_NCCL_CHANNELS: u32 = 64;

impl TraceOptions {
    /// The counts and times of these options in range (checked before anything is sized
    /// by them): iterations in [1, [`MAX_ITERATIONS`]], an NVLink step latency up to
    /// [`MAX_NVLINK_STEP_LATENCY`], NCCL channels in [1, [`MAX_NCCL_CHANNELS`]]. An error
    /// is the flag and what is wrong with its value, the range included.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if !(1..=MAX_ITERATIONS).contains(&self.iterations) {
            return Err((
                "--iterations",
                format!(
                    "{} must be in [1, {MAX_ITERATIONS}] (every iteration repeats the same \
                     schedule)",
                    self.iterations
                ),
            ));
        }
        if let Some(a) = self.nvlink_step_latency {
            if a > MAX_NVLINK_STEP_LATENCY {
                return Err((
                    "--nvlink-step-latency",
                    format!(
                        "{} ns must be in [0, {}] ns (up to 1 s)",
                        a.0, MAX_NVLINK_STEP_LATENCY.0
                    ),
                ));
            }
        }
        if let Some(c) = self.nccl_channels {
            if !(1..=MAX_NCCL_CHANNELS).contains(&c) {
                return Err((
                    "--nccl-channels",
                    format!("{c} must be in [1, {MAX_NCCL_CHANNELS}] (NCCL's own limit)"),
                ));
            }
        }
        Ok(())
    }
}

impl Default for TraceOptions {
    fn default() -> Self {
        TraceOptions {
            schedule: ScheduleOptions::default(),
            collective: Algorithm::Ring,
            ina: InaConfig::default(),
            seed: 0,
            routing: RoutingMode::Ecmp,
            plan: None,
            iterations: 1,
            nvlink_step_latency: None,
            nccl_channels: None,
        }
    }
}
