//! A [`Topology`] to and from the data of a `topology.txt`
//! ([`crate::formats::topology_txt`], the one reader and writer of that format).

use super::{Link, LinkKind, NodeKind, Topology, TopologyError};
use crate::formats::topology_txt::{self, Flavor, LinkRow, TopologyFile};
use crate::formats::Warning;
use crate::units::NodeId;
use std::path::Path;

impl Topology {
    /// Read an HPCC `topology.txt` or SimAI topology file (told apart by the header's
    /// field count: 3 for HPCC, 5 or 6 for SimAI), with the oddities it survived.
    pub fn read_file(path: &Path) -> Result<(Topology, Vec<Warning>), TopologyError> {
        let (file, mut warnings) = topology_txt::read_file(path)?;
        let topo = Topology::from_file(file, &path.display().to_string(), &mut warnings);
        Ok((topo, warnings))
    }

    /// Parse the text of a topology file; `origin` names it in errors and warnings and
    /// becomes [`Topology::source`].
    pub fn parse_str(text: &str, origin: &str) -> Result<(Topology, Vec<Warning>), TopologyError> {
        let (file, mut warnings) = topology_txt::parse(Path::new(origin), text)?;
        let topo = Topology::from_file(file, origin, &mut warnings);
        Ok((topo, warnings))
    }

    /// The topology a file describes. Hosts become the GPUs in ascending id order; HPCC
    /// files have `gpus_per_server = 1` and no NVLink domain; SimAI files take
    /// `gpus_per_server` from the header and the NVLink rate from the first NVLink link.
    /// A link's kind follows its ends (an NVSwitch end: NVLink; two switches: fabric;
    /// else a NIC). Nodes in no link are reported in `warnings`.
    pub fn from_file(file: TopologyFile, origin: &str, warnings: &mut Vec<Warning>) -> Topology {
        let n = file.nodes as usize;
        let mut kinds = vec![NodeKind::Host; n];
        for (ids, k) in [
            (&file.nvswitches, NodeKind::NvSwitch),
            (&file.switches, NodeKind::Switch),
        ] {
            for &id in ids {
                if kinds[id.idx()] != NodeKind::Host {
                    warnings.push(Warning::new(
                        Path::new(origin),
                        2,
                        format!("node {id} is listed twice as a switch"),
                    ));
                }
                kinds[id.idx()] = k;
            }
        }
        let mut linked = vec![false; n];
        let links: Vec<Link> = file
            .links
            .iter()
            .map(|l| {
                linked[l.a.idx()] = true;
                linked[l.b.idx()] = true;
                Link {
                    a: l.a,
                    b: l.b,
                    rate: l.rate,
                    delay: l.delay,
                    error_rate: l.error_rate,
                    kind: link_kind(kinds[l.a.idx()], kinds[l.b.idx()]),
                }
            })
            .collect();
        let lonely = linked.iter().filter(|&&x| !x).count();
        if lonely > 0 {
            let first = linked.iter().position(|&x| !x).unwrap_or(0);
            warnings.push(Warning::new(
                Path::new(origin),
                1,
                format!("{lonely} node(s) appear in no link (first: node {first})"),
            ));
        }
        let gpus = (0..n as u32)
            .map(NodeId)
            .filter(|v| kinds[v.idx()] == NodeKind::Host)
            .collect();
        let nvlink_rate = links
            .iter()
            .find(|l| l.kind == LinkKind::NvLink)
            .map(|l| l.rate);
        let gpus_per_server = match file.flavor {
            Flavor::Hpcc => 1,
            Flavor::Simai {
                gpus_per_server, ..
            } => gpus_per_server,
        };
        Topology {
            kinds,
            links,
            gpus,
            gpus_per_server,
            nvlink_rate,
            source: origin.to_string(),
            fabric: Default::default(),
        }
    }

    /// This topology as `topology.txt` text in `flavor` (through the one writer,
    /// [`topology_txt::to_string`]).
    pub fn to_text(&self, flavor: Flavor) -> String {
        topology_txt::to_string(&self.to_file(flavor))
    }

    /// The file data of this topology. HPCC has no NVSwitch kind: NVSwitches are listed
    /// as switches (and read back as such), so the HPCC round trip is exact for
    /// topologies without an NVLink domain; the SimAI flavour keeps them.
    pub fn to_file(&self, flavor: Flavor) -> TopologyFile {
        let (nvswitches, switches) = match flavor {
            Flavor::Hpcc => (
                Vec::new(),
                (0..self.kinds.len() as u32)
                    .map(NodeId)
                    .filter(|v| self.kinds[v.idx()] != NodeKind::Host)
                    .collect(),
            ),
            Flavor::Simai { .. } => (self.nvswitches(), self.switches()),
        };
        TopologyFile {
            flavor,
            nodes: self.kinds.len() as u32,
            nvswitches,
            switches,
            links: self
                .links
                .iter()
                .map(|l| LinkRow {
                    a: l.a,
                    b: l.b,
                    rate: l.rate,
                    delay: l.delay,
                    error_rate: l.error_rate,
                })
                .collect(),
        }
    }
}

/// What a link is, from the kinds of its ends.
fn link_kind(a: NodeKind, b: NodeKind) -> LinkKind {
    match (a, b) {
        (NodeKind::NvSwitch, _) | (_, NodeKind::NvSwitch) => LinkKind::NvLink,
        (NodeKind::Switch, NodeKind::Switch) => LinkKind::Fabric,
        _ => LinkKind::Nic,
    }
}
