//! Builder specs (`fat-tree:k=8`, `leaf-spine:…`, `rail:…`, `dual-plane:…`, and the
//! non-Clos families of [`super::families`]): the entry that reads one and the choice of
//! its builder.

use super::build::{dual_plane, fat_tree, leaf_spine, rail, superpod, Opts, KINDS};
use super::{families, Topology, TopologyError};
use crate::formats::Warning;

impl Topology {
    /// What `--topology` accepts; the CLI prints it in `--help`.
    pub const SPEC_HELP: &'static str = "\
Topology: a file or a builder spec KIND[:key=value,...]
  FILE                      HPCC topology.txt (3-field header) or SimAI topology (6-field header)
  fat-tree:k=4              k-ary fat-tree: k^3/4 hosts, k^2/2 ToRs, k^2/2 aggregation, k^2/4 core
  leaf-spine:leaves=4,spines=2,hosts-per-leaf=8[,oversub=R]
                            two tiers; every leaf linked to every spine
  superpod:gen=a100|h100|b200,servers=N[,su=S]
                            NVIDIA DGX SuperPOD, rail-optimised and non-blocking: units of
                            su servers (a100: 20, HDR 200Gbps; h100, b200: 32, NDR 400Gbps;
                            NVLink 2400/3600/7200Gbps), a leaf per rail per unit, su spines
  rail:servers=4,gpus-per-server=8[,spines=2][,oversub=R]
                            rail-optimised: GPU i of every server on leaf (rail) i, leaves under spines
  dual-plane:servers=4,gpus-per-server=8[,servers-per-tor=SERVERS][,spines=2][,oversub=R]
                            HPN-style: every GPU has 2 NIC ports, port p on a ToR of plane p;
                            each plane is its own leaf-spine
  jellyfish:switches=8,ports=6,hosts-per-switch=2[,seed=1][,paths=8]
                            random regular graph: ports - hosts-per-switch links per switch,
                            drawn from seed; routed over the `paths` shortest paths (Yen)
  dragonfly:groups=4,routers=2,hosts-per-router=2[,global-links=H][,routing=minimal|valiant]
                            routers all-to-all in a group; H global links per router (default:
                            one link between every pair of groups, spread evenly over routers)
  torus:dims=4x4[,hosts-per-node=1]
                            2-D or 3-D torus with wrap-around, a router per node;
                            dimension-order routing
  bcube:n=4,k=1             BCube(n,k): n^(k+1) servers with k+1 NICs, k+1 levels of n^k
                            n-port switches; servers relay (digit-correcting source routes)
  dcell:n=4,k=1             DCell(n,k): DCell_0 = n servers on a switch, DCell_k = t+1 copies
                            of DCell_(k-1) (t servers each) joined pairwise; servers relay
  topoopt:servers=16,degree=4
                            switchless direct connect, TopoOpt's TotientPerms: degree/2 rings
                            i <-> i+p (p coprime to the servers); servers relay; host
                            collectives only (no switch to aggregate in)
Common options (defaults):
  nic=100Gbps               GPU NIC port rate
  fabric=RATE               switch-switch rate; default: fat-tree = nic, the others
                            non-blocking (leaf uplinks carry all downlink capacity)
  oversub=R                 leaf/ToR uplinks sized so downlink/uplink capacity = R (not with fabric
                            on two-tier builders)
  latency=1us               one-way propagation delay of every network link
  gpus-per-server=8         GPUs per server (NVLink domain); hosts must fill whole servers
                            (default hosts-per-switch/-router/-node for jellyfish, dragonfly
                            and torus, 1 for bcube, dcell and topoopt)
  nics-per-server=GPUS      NIC ports per server, a multiple of gpus-per-server (every GPU
                            has nics/gpus ports on its first switch); fixed by the shape for
                            dual-plane (2 per GPU), bcube and dcell (k+1), topoopt (degree)
  nvlink=2400Gbps | off     per-GPU NVLink rate to the server's NVSwitch (one NVSwitch per server;
                            off by default for the new families when gpus-per-server is 1)
  nvlink-latency=25ns       one-way delay of an NVLink link (SimAI's value)";

    /// Build or load a topology from `spec`: a builder spec (see [`Topology::SPEC_HELP`])
    /// or the path of an HPCC/SimAI topology file. File warnings (header counts that
    /// disagree with the rows, trailing free text) are dropped here; callers that show
    /// them use [`Topology::from_spec_with_warnings`].
    ///
    /// ```
    /// use ina3d::topology::Topology;
    /// // a k-ary fat-tree has k³/4 hosts and 5k²/4 switches
    /// let t = Topology::from_spec("fat-tree:k=4").unwrap();
    /// assert_eq!((t.hosts().len(), t.switches().len()), (16, 20));
    /// assert!(Topology::from_spec("fat-tree:k=3").is_err()); // k must be even
    /// ```
    pub fn from_spec(spec: &str) -> Result<Topology, TopologyError> {
        Self::from_spec_with_warnings(spec).map(|(t, _)| t)
    }

    /// [`Topology::from_spec`], also returning the warnings a topology file produced
    /// (always empty for builder specs).
    pub fn from_spec_with_warnings(spec: &str) -> Result<(Topology, Vec<Warning>), TopologyError> {
        let spec = spec.trim();
        let (kind, body) = match spec.split_once(':') {
            Some((k, b)) => (k.trim(), b),
            None => (spec, ""),
        };
        if KINDS.contains(&kind) {
            return build(spec, kind, body).map(|t| (t, Vec::new()));
        }
        let path = std::path::Path::new(spec);
        if path.is_file() {
            return Topology::read_file(path);
        }
        Err(TopologyError::Spec {
            spec: spec.to_string(),
            key: "kind".into(),
            msg: format!(
                "`{kind}` is neither a builder ({}) nor an existing topology file",
                KINDS.join(", ")
            ),
        })
    }
}

fn build(spec: &str, kind: &str, body: &str) -> Result<Topology, TopologyError> {
    match kind {
        "fat-tree" => fat_tree(&Opts::parse(spec, kind, body, &["k", "oversub"])?),
        "leaf-spine" => leaf_spine(&Opts::parse(
            spec,
            kind,
            body,
            &["leaves", "spines", "hosts-per-leaf", "oversub"],
        )?),
        "rail" => rail(&Opts::parse(
            spec,
            kind,
            body,
            &["servers", "spines", "oversub"],
        )?),
        "superpod" => superpod(&Opts::parse(spec, kind, body, &["gen", "servers", "su"])?),
        "dual-plane" => dual_plane(&Opts::parse(
            spec,
            kind,
            body,
            &["servers", "servers-per-tor", "spines", "oversub"],
        )?),
        _ => families::build(spec, kind, body),
    }
}
