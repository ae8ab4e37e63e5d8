//! How a collective is carried out: the host algorithm, the in-network aggregation (INA)
//! mode and the one INA switch configuration — what the job options, the trace header,
//! `plan.json` and the glue's `params.txt` share. A foundation: it names only the record
//! vocabulary and units, so every layer from the formats up reads the same types.

use crate::keyword::keyword_enum;
use crate::record::{AggGroup, Class};
use crate::units::{Bytes, NodeId};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Host algorithm of a collective that crosses the network.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Algorithm {
    /// Ring: 2(n−1) steps of S/n (all-reduce), n−1 (reduce-scatter / all-gather).
    Ring,
    /// Double binary tree (all-reduce; the ring otherwise).
    Dbt,
    /// Recursive halving-doubling (power-of-two groups; the ring otherwise).
    Hd,
    /// NVLink reduce-scatter, a network ring per local index, NVLink all-gather.
    Hierarchical,
    /// Swing (NSDI'24), bandwidth-optimal: ⌈log₂ n⌉ reduce-scatter then all-gather steps
    /// with peers r ± ρ(s) (all-reduce only; RS and AG use the ring).
    Swing,
}

keyword_enum!(Algorithm, "collective algorithm", Algorithm::Ring => "ring", Algorithm::Dbt => "dbt", Algorithm::Hd => "hd", Algorithm::Hierarchical => "hierarchical", Algorithm::Swing => "swing");

impl Algorithm {
    /// The host algorithms the planner offers beside `--collective` (plan::options::hosts).
    /// Swing is lowered only when asked for (`--collective swing`): the planner does not
    /// yet offer it to groups on its own.
    pub const ALL: [Algorithm; 4] = [
        Algorithm::Ring,
        Algorithm::Dbt,
        Algorithm::Hd,
        Algorithm::Hierarchical,
    ];
}

/// Where in-network aggregation happens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InaMode {
    /// No INA: host algorithms only.
    Off,
    /// One switch aggregates all members (their shared ToR, else the lowest switch above all).
    SwitchMl,
    /// Multi-switch tree: each aggregating switch sums its children, the root multicasts.
    Hierarchical,
    /// The hierarchical tree under ATP's best-effort slot policy (back-ends fall back to the host ring).
    Atp,
    /// Rina: racks whose ToR aggregates act as one worker of a host ring.
    Rina,
    /// Each group as a plan says (`ina3d trace --plan`): host algorithm, its own tree, or
    /// Rina, with the slots it reserves.
    Planned,
}

/// How switch slots are shared among concurrent aggregations (enforced by the back-ends).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InaPolicy {
    /// Slots split evenly among the aggregations that may use a switch.
    Static,
    /// First come, first served; an aggregation that finds no slot falls back to the host ring.
    BestEffort,
    /// Classes earlier in `ina-classes` take slots first.
    Priority,
    /// Reservations from a plan (header `ina_reservations`): an aggregation takes
    /// `min(window, its group's reservation)` slots on each of its switches, waiting while a
    /// switch's pool cannot hold them.
    Planned,
}

/// Which switches can aggregate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum InaSwitches {
    /// Switches with a GPU attached (ToR / leaf).
    Tor,
    /// Every packet switch.
    All,
    /// These node ids.
    Ids(Vec<NodeId>),
}

/// Aggregator slots per switch when none are given: the one default of `--ina-slots`,
/// the trace header, `plan.json`'s settings and `params.txt` (which the glue requires).
pub const DEFAULT_INA_SLOTS: u32 = 8192;

impl InaMode {
    /// The slot policy of this mode when none is given: best-effort for ATP (its slots
    /// are first come, first served), the plan's reservations for `planned`, else static
    /// shares. The one place this rule is written.
    pub fn default_policy(self) -> InaPolicy {
        match self {
            InaMode::Atp => InaPolicy::BestEffort,
            InaMode::Planned => InaPolicy::Planned,
            _ => InaPolicy::Static,
        }
    }
}

/// The one INA switch configuration, from the command line (`--ina*` flags, a sweep's or
/// a cluster's keys) through the trace options and header to what both back-ends
/// simulate and `ns3 emit` writes into the glue's `params.txt`. A trace header or
/// `params.txt` read back fills the switch-model fields (slots, payload, window, policy,
/// classes, reservations, tenants); `mode` and `switches` only shape the trace and keep
/// their defaults there.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InaConfig {
    /// Algorithm.
    pub mode: InaMode,
    /// Aggregating switches.
    pub switches: InaSwitches,
    /// Aggregator slots per switch.
    pub slots: u32,
    /// Payload bytes one slot aggregates (one packet).
    pub payload: Bytes,
    /// Slots (packets) one worker / aggregation keeps outstanding.
    pub window: u32,
    /// Slot policy as given; `None`: the mode's ([`InaMode::default_policy`]), read
    /// through [`InaConfig::policy`].
    pub policy: Option<InaPolicy>,
    /// Classes allowed to aggregate, in priority order (static shares, priority order;
    /// `pp` is accepted but point-to-point transfers have nothing to sum, so it never
    /// changes the trace).
    pub classes: Vec<Class>,
    /// Slot reservations of the `planned` policy, sorted (header `ina_reservations`).
    #[serde(default)]
    pub reservations: Vec<Reservation>,
    /// The jobs sharing the fabric, for a trace that merges several (`ina3d cluster`,
    /// header `ina_tenants`): under `static` each switch's pool is first split evenly
    /// among them; under the other policies they only label whose aggregation holds
    /// slots. Empty for one job (the pool is the job's).
    #[serde(default)]
    pub tenants: Vec<Tenant>,
}

impl Default for InaConfig {
    /// What `ina3d trace` takes when no INA flag is given (INA off).
    fn default() -> Self {
        InaConfig {
            mode: InaMode::Off,
            switches: InaSwitches::All,
            slots: DEFAULT_INA_SLOTS,
            payload: Bytes(256),
            window: 256,
            policy: None,
            classes: vec![Class::Tp, Class::Dp, Class::Emb],
            reservations: Vec::new(),
            tenants: Vec::new(),
        }
    }
}

impl InaConfig {
    /// How a switch's pool is shared among concurrent aggregations: the policy given,
    /// else the mode's.
    pub fn policy(&self) -> InaPolicy {
        self.policy.unwrap_or(self.mode.default_policy())
    }

    /// This configuration under INA mode `mode` with that mode's slot policy (a policy
    /// given before is dropped: the policies of `ina3d run` and `ina3d cluster` that
    /// name a mode name its policy too).
    pub fn set_mode(&mut self, mode: InaMode) {
        self.mode = mode;
        self.policy = Some(mode.default_policy());
    }

    /// The counts in range and the policy compatible with the mode; an error is the
    /// flags at fault and what is wrong.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if self.payload.0 == 0 || self.window == 0 || self.slots == 0 {
            return Err((
                "--ina-slots, --ina-payload, --ina-window",
                "must be positive".into(),
            ));
        }
        if self.policy == Some(InaPolicy::Planned) && self.mode != InaMode::Planned {
            return Err((
                "--ina-policy planned",
                "the `planned` slot policy comes with a plan (ina3d trace --plan FILE)".into(),
            ));
        }
        Ok(())
    }
}

/// One job of a merged (multi-job) trace: its name and the hosts its ranks live on. An
/// aggregation belongs to the job of its first member (the lowest host sending an up
/// edge, as for [`Reservation`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tenant {
    /// The job's name.
    pub name: String,
    /// Its hosts, ascending.
    pub hosts: Vec<NodeId>,
}

/// Header key of the tenants: `NAME=HOSTS` entries joined by `;`, HOSTS a comma-separated
/// list of node ids and ranges `a-b` (inclusive), e.g. `a=0-7,16-23;b=8-15,24-31`.
pub const INA_TENANTS_KEY: &str = "ina_tenants";

/// The header value of a tenant list (hosts written as ranges).
pub fn format_tenants(t: &[Tenant]) -> String {
    t.iter()
        .map(|x| {
            let mut parts: Vec<String> = Vec::new();
            for run in x.hosts.chunk_by(|a, b| b.0 == a.0 + 1) {
                let (a, b) = (run[0], run[run.len() - 1]);
                parts.push(if a == b {
                    a.to_string()
                } else {
                    format!("{a}-{b}")
                });
            }
            format!("{}={}", x.name, parts.join(","))
        })
        .collect::<Vec<_>>()
        .join(";")
}

/// Hosts a tenant list may name in all (the topology builders' own cap), so a crafted
/// header cannot size an allocation.
const MAX_TENANT_HOSTS: u64 = 1 << 22;

/// Parse a tenant list; errors name the entry (a malformed range, more than 2^22 hosts
/// in all, a host in two jobs, a job named twice).
pub fn parse_tenants(v: &str) -> Result<Vec<Tenant>, String> {
    let mut out: Vec<Tenant> = Vec::new();
    let mut owner: std::collections::BTreeMap<NodeId, usize> = Default::default();
    let mut total = 0u64;
    for e in v.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let bad = || format!("entry `{e}` is not NAME=HOSTS (hosts: ids and ranges a-b)");
        let (name, hosts) = e.split_once('=').ok_or_else(bad)?;
        let name = name.trim();
        if name.is_empty() || out.iter().any(|t| t.name == name) {
            return Err(format!("entry `{e}`: the job name is empty or given twice"));
        }
        let mut list = Vec::new();
        for part in hosts.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let num = |x: &str| x.trim().parse::<u32>().map_err(|_| bad());
            let (a, b) = match part.split_once('-') {
                Some((a, b)) => (num(a)?, num(b)?),
                None => (num(part)?, num(part)?),
            };
            total += u64::from(b.saturating_sub(a)) + 1;
            if b < a || total > MAX_TENANT_HOSTS {
                return Err(format!(
                    "entry `{e}`: range `{part}` is empty, or the jobs name more than {MAX_TENANT_HOSTS} hosts"
                ));
            }
            list.extend((a..=b).map(NodeId));
        }
        list.sort_unstable();
        list.dedup();
        for h in &list {
            if let Some(&o) = owner.get(h) {
                return Err(format!(
                    "host {h} belongs to two jobs, `{}` and `{name}`",
                    out[o].name
                ));
            }
            owner.insert(*h, out.len());
        }
        out.push(Tenant {
            name: name.to_string(),
            hosts: list,
        });
    }
    Ok(out)
}

/// Slots a plan reserves on one switch for the aggregations of one group. An aggregation
/// is matched by its class, its group (dense, or a MoE model's expert gradients: an
/// expert-DP group can have a dense DP group's members) and its *first member*: the
/// lowest-numbered host among the senders of its up edges (for a tree, the group's lowest
/// GPU; for a Rina rack, the rack's), which no other group of that class and kind shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Reservation {
    /// The switch.
    pub switch: NodeId,
    /// Class of the group.
    pub class: Class,
    /// Dense or expert gradients (the aggregations' [`AggTag::group`](crate::record::AggTag)).
    pub group: AggGroup,
    /// First member (host) of the aggregation.
    pub first: NodeId,
    /// Slots.
    pub slots: u32,
}

impl Reservation {
    /// What an aggregation is matched by: switch, class, group, first member.
    pub fn key(&self) -> (NodeId, Class, AggGroup, NodeId) {
        (self.switch, self.class, self.group, self.first)
    }
}

/// Header key of the reservations: `SWITCH:CLASS:FIRST=SLOTS` entries (a dense group's) or
/// `SWITCH:CLASS:FIRST:expert=SLOTS` (a MoE model's expert-DP group's) joined by `;`.
pub const INA_RESERVATIONS_KEY: &str = "ina_reservations";

/// The header value of a reservation list.
pub fn format_reservations(r: &[Reservation]) -> String {
    r.iter()
        .map(|x| match x.group {
            AggGroup::Dense => format!("{}:{}:{}={}", x.switch, x.class, x.first, x.slots),
            g => format!("{}:{}:{}:{g}={}", x.switch, x.class, x.first, x.slots),
        })
        .collect::<Vec<_>>()
        .join(";")
}

/// Parse a reservation list (sorted on return); errors name the entry.
pub fn parse_reservations(v: &str) -> Result<Vec<Reservation>, String> {
    let mut out = Vec::new();
    for e in v.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let bad = || {
            format!(
                "entry `{e}` is not SWITCH:CLASS:FIRST=SLOTS or SWITCH:CLASS:FIRST:expert=SLOTS"
            )
        };
        let (key, slots) = e.split_once('=').ok_or_else(bad)?;
        let mut it = key.split(':');
        let (Some(sw), Some(class), Some(first), group, None) =
            (it.next(), it.next(), it.next(), it.next(), it.next())
        else {
            return Err(bad());
        };
        let num = |x: &str| x.trim().parse::<u32>().map_err(|_| bad());
        out.push(Reservation {
            switch: NodeId(num(sw)?),
            class: class
                .trim()
                .parse()
                .map_err(|m: String| format!("entry `{e}`: {m}"))?,
            group: group
                .map_or(Ok(AggGroup::Dense), str::parse)
                .map_err(|m: String| format!("entry `{e}`: {m}"))?,
            first: NodeId(num(first)?),
            slots: num(slots)?,
        });
    }
    out.sort_unstable();
    if let Some(w) = out.windows(2).find(|w| w[0].key() == w[1].key()) {
        return Err(format!(
            "switch {} has two reservations for the {}{} aggregation of first member {}",
            w[0].switch,
            w[0].group.prefix(),
            w[0].class,
            w[0].first
        ));
    }
    Ok(out)
}

impl InaConfig {
    /// Slots reserved on `switch` for the `class` aggregation of `group` whose first
    /// member is `first` (the `planned` policy), if any.
    pub fn reservation(
        &self,
        switch: NodeId,
        class: Class,
        group: AggGroup,
        first: NodeId,
    ) -> Option<u32> {
        let key = (switch, class, group, first);
        self.reservations
            .binary_search_by(|r| r.key().cmp(&key))
            .ok()
            .map(|i| self.reservations[i].slots)
    }

    /// The tenant (job index in [`InaConfig::tenants`]) whose hosts include `host`.
    pub fn tenant_of(&self, host: NodeId) -> Option<u32> {
        self.tenants
            .iter()
            .position(|t| t.hosts.binary_search(&host).is_ok())
            .map(|i| i as u32)
    }
}

keyword_enum!(InaMode, "INA mode", InaMode::Off => "off", InaMode::SwitchMl => "switchml", InaMode::Hierarchical => "hierarchical", InaMode::Atp => "atp", InaMode::Rina => "rina", InaMode::Planned => "planned");
keyword_enum!(InaPolicy, "INA policy", InaPolicy::Static => "static", InaPolicy::BestEffort => "best-effort", InaPolicy::Priority => "priority", InaPolicy::Planned => "planned");

impl fmt::Display for InaSwitches {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InaSwitches::Tor => f.write_str("tor"),
            InaSwitches::All => f.write_str("all"),
            InaSwitches::Ids(v) => {
                let s: Vec<String> = v.iter().map(|n| n.0.to_string()).collect();
                f.write_str(&s.join(";"))
            }
        }
    }
}

impl FromStr for InaSwitches {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "tor" => Ok(InaSwitches::Tor),
            "all" => Ok(InaSwitches::All),
            other => {
                let mut v = Vec::new();
                for p in other
                    .split([',', ';'])
                    .map(str::trim)
                    .filter(|p| !p.is_empty())
                {
                    v.push(NodeId(p.parse().map_err(|_| format!("INA switches: `{p}` is not a node id (expected tor, all or a comma-separated list of switch ids)"))?));
                }
                if v.is_empty() {
                    return Err("INA switches: empty list".into());
                }
                v.sort_unstable();
                v.dedup();
                Ok(InaSwitches::Ids(v))
            }
        }
    }
}

/// Parse a comma-separated class list (`tp,dp,emb`).
pub fn parse_classes(s: &str) -> Result<Vec<Class>, String> {
    let mut v = Vec::new();
    for p in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let c: Class = p.parse()?;
        if c == Class::Compute {
            return Err("`compute` is not a traffic class INA can aggregate".into());
        }
        if !v.contains(&c) {
            v.push(c);
        }
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenants_round_trip_as_host_ranges_and_a_host_of_two_jobs_is_refused() {
        let v = "a=0-3,8;b=4-7";
        let t = parse_tenants(v).unwrap();
        assert_eq!(t[0].hosts, [0, 1, 2, 3, 8].map(NodeId).to_vec());
        assert_eq!(format_tenants(&t), v);
        let m = InaConfig {
            tenants: t,
            ..InaConfig::default()
        };
        assert_eq!(m.tenant_of(NodeId(8)), Some(0));
        assert_eq!(m.tenant_of(NodeId(5)), Some(1));
        assert_eq!(m.tenant_of(NodeId(9)), None);
        let e = parse_tenants("a=0-3;b=3-5").unwrap_err();
        assert!(
            e.contains("host 3") && e.contains("`a`") && e.contains("`b`"),
            "{e}"
        );
        assert!(parse_tenants("a=5-2").is_err());
        assert!(parse_tenants("a=0;a=1").is_err());
        assert!(
            parse_tenants("a=0-99999999").is_err(),
            "no allocation sized by the header"
        );
    }
}
