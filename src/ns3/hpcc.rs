//! Readers for the HPCC family's input files, so emitted files can be checked by
//! reading them back and users' own files can be inspected.
//!
//! Real files are messy (DESIGN §9): CRLF endings, trailing blanks, header counts that
//! disagree with the rows, free text after the data. The readers take every row that
//! parses, stop at the first line that does not, and return what they skipped as
//! warnings — they never fail on a count mismatch and never panic.

use super::Ns3Error;
use crate::topology::{Link, LinkKind, NodeKind, Topology};
use crate::units::{parse_delay, BitsPerSec, Bytes, Nanos, NodeId};
use std::path::Path;

/// One `flow.txt` row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HpccFlow {
    /// Parsimon's leading id column, when present.
    pub id: Option<u64>,
    /// Source host.
    pub src: NodeId,
    /// Destination host.
    pub dst: NodeId,
    /// Priority group (3 in every HPCC example).
    pub pg: u32,
    /// Destination port.
    pub dport: u32,
    /// Bytes (HPCC reads them into a uint32).
    pub size: Bytes,
    /// Start time.
    pub start: Nanos,
}

/// Parse seconds written as `%.9f` (or fewer digits) exactly into nanoseconds.
pub fn parse_secs_exact(s: &str) -> Option<Nanos> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() && frac.is_empty()
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let whole: u64 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let mut f = frac.to_string();
    if f.len() > 9 {
        // beyond ns: round down (HPCC prints %.9f, so this only happens in hand-written files)
        f.truncate(9);
    }
    while f.len() < 9 {
        f.push('0');
    }
    let ns: u64 = f.parse().ok()?;
    whole.checked_mul(1_000_000_000)?.checked_add(ns).map(Nanos)
}

/// Format nanoseconds as HPCC's `%.9f` seconds.
pub fn format_secs(t: Nanos) -> String {
    format!("{}.{:09}", t.0 / 1_000_000_000, t.0 % 1_000_000_000)
}

/// Read a `flow.txt` (HPCC: 6 fields; Parsimon: 7, id first). Returns the flows and warnings.
pub fn read_flow_txt(path: &Path, text: &str) -> Result<(Vec<HpccFlow>, Vec<String>), Ns3Error> {
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim_end_matches('\r').trim()));
    let mut warnings = Vec::new();
    let (hline, header) = lines
        .find(|(_, l)| !l.is_empty())
        .ok_or_else(|| Ns3Error::parse(path, 1, "count", "empty file"))?;
    let count: u64 = header.parse().map_err(|_| {
        Ns3Error::parse(
            path,
            hline,
            "count",
            format!("expected the number of flows, found `{header}`"),
        )
    })?;
    let mut flows = Vec::new();
    for (no, l) in lines {
        if l.is_empty() {
            continue;
        }
        let t: Vec<&str> = l.split_whitespace().collect();
        let (id, rest) = match t.len() {
            6 => (None, &t[..]),
            7 => match t[0].parse::<u64>() {
                Ok(id) => (Some(id), &t[1..]),
                Err(_) => (None, &t[..0]),
            },
            _ => (None, &t[..0]),
        };
        let parsed = (|| {
            Some(HpccFlow {
                id,
                src: NodeId(rest.first()?.parse().ok()?),
                dst: NodeId(rest.get(1)?.parse().ok()?),
                pg: rest.get(2)?.parse().ok()?,
                dport: rest.get(3)?.parse().ok()?,
                size: Bytes(rest.get(4)?.parse().ok()?),
                start: parse_secs_exact(rest.get(5)?)?,
            })
        })();
        match parsed {
            Some(f) => flows.push(f),
            None => {
                warnings.push(format!(
                    "{}:{no}: not a flow row, ignoring it and the rest of the file: `{l}`",
                    path.display()
                ));
                break;
            }
        }
    }
    if flows.len() as u64 != count {
        warnings.push(format!(
            "{}:{hline}: header says {count} flows, file has {}",
            path.display(),
            flows.len()
        ));
    }
    Ok((flows, warnings))
}

/// A `topology.txt` as read (HPCC 3-field or SimAI 6-field header).
#[derive(Clone, Debug, PartialEq)]
pub struct HpccTopology {
    /// Node count from the header.
    pub nodes: u32,
    /// Switch ids.
    pub switches: Vec<NodeId>,
    /// NVSwitch ids (SimAI only).
    pub nvswitches: Vec<NodeId>,
    /// SimAI's GPUs per server.
    pub gpus_per_server: Option<u32>,
    /// SimAI's GPU type.
    pub gpu_type: Option<String>,
    /// Link rows.
    pub links: Vec<Link>,
}

/// Read a `topology.txt`. Link rows that do not parse end the data (warned).
pub fn read_topology_txt(path: &Path, text: &str) -> Result<(HpccTopology, Vec<String>), Ns3Error> {
    let mut warnings = Vec::new();
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim_end_matches('\r').trim()));
    let (hl, header) = lines
        .find(|(_, l)| !l.is_empty())
        .ok_or_else(|| Ns3Error::parse(path, 1, "header", "empty file"))?;
    let h: Vec<&str> = header.split_whitespace().collect();
    let num = |i: usize, field: &str| -> Result<u32, Ns3Error> {
        h.get(i).and_then(|x| x.parse().ok()).ok_or_else(|| {
            Ns3Error::parse(path, hl, field, format!("expected a number in `{header}`"))
        })
    };
    let (nodes, nv, sw, nlinks, gps, gpu_type) = match h.len() {
        3 => (
            num(0, "node_num")?,
            0,
            num(1, "switch_num")?,
            num(2, "link_num")?,
            None,
            None,
        ),
        6 => (
            num(0, "node_num")?,
            num(2, "nvswitch_num")?,
            num(3, "switch_num")?,
            num(4, "link_num")?,
            Some(num(1, "gpus_per_server")?),
            Some(h[5].to_string()),
        ),
        _ => {
            return Err(Ns3Error::parse(
                path,
                hl,
                "header",
                format!(
                    "expected `<nodes> <switches> <links>` or SimAI's 6 fields, found `{header}`"
                ),
            ))
        }
    };
    // switch ids: the next tokens, possibly over several lines
    let mut ids = Vec::new();
    let mut rest_lines = Vec::new();
    for (no, l) in lines.by_ref() {
        if ids.len() < (nv + sw) as usize {
            for t in l.split_whitespace() {
                let id: u32 = t.parse().map_err(|_| {
                    Ns3Error::parse(path, no, "switch id", format!("`{t}` is not a node id"))
                })?;
                if id >= nodes {
                    return Err(Ns3Error::parse(
                        path,
                        no,
                        "switch id",
                        format!("{id} is not below the node count {nodes}"),
                    ));
                }
                ids.push(NodeId(id));
            }
        } else {
            rest_lines.push((no, l));
            break;
        }
    }
    rest_lines.extend(lines);
    let nvswitches = ids[..(nv as usize).min(ids.len())].to_vec();
    let switches = ids[(nv as usize).min(ids.len())..].to_vec();
    let kinds = kinds_of(nodes, &switches, &nvswitches);
    let mut links = Vec::new();
    for (no, l) in rest_lines {
        if l.is_empty() {
            if links.len() as u32 >= nlinks {
                break;
            }
            continue;
        }
        let t: Vec<&str> = l.split_whitespace().collect();
        let parsed = (|| {
            if t.len() != 5 {
                return None;
            }
            let a: u32 = t[0].parse().ok()?;
            let b: u32 = t[1].parse().ok()?;
            if a >= nodes || b >= nodes {
                return None;
            }
            let rate = BitsPerSec::parse(t[2])?;
            let delay = parse_delay(t[3])?;
            let err: f64 = t[4].parse().ok()?;
            Some((NodeId(a), NodeId(b), rate, delay, err))
        })();
        match parsed {
            Some((a, b, rate, delay, error_rate)) => {
                let kind = link_kind(&kinds, a, b);
                links.push(Link {
                    a,
                    b,
                    rate,
                    delay,
                    error_rate,
                    kind,
                });
            }
            None => {
                warnings.push(format!(
                    "{}:{no}: not a link row, ignoring it and the rest of the file: `{l}`",
                    path.display()
                ));
                break;
            }
        }
    }
    if links.len() as u32 != nlinks {
        warnings.push(format!(
            "{}:{hl}: header says {nlinks} links, file has {}",
            path.display(),
            links.len()
        ));
    }
    Ok((
        HpccTopology {
            nodes,
            switches,
            nvswitches,
            gpus_per_server: gps,
            gpu_type,
            links,
        },
        warnings,
    ))
}

fn kinds_of(nodes: u32, switches: &[NodeId], nvswitches: &[NodeId]) -> Vec<NodeKind> {
    let mut kinds = vec![NodeKind::Host; nodes as usize];
    for s in switches {
        kinds[s.idx()] = NodeKind::Switch;
    }
    for s in nvswitches {
        kinds[s.idx()] = NodeKind::NvSwitch;
    }
    kinds
}

fn link_kind(kinds: &[NodeKind], a: NodeId, b: NodeId) -> LinkKind {
    match (kinds[a.idx()], kinds[b.idx()]) {
        (NodeKind::NvSwitch, _) | (_, NodeKind::NvSwitch) => LinkKind::NvLink,
        (NodeKind::Host, _) | (_, NodeKind::Host) => LinkKind::Nic,
        _ => LinkKind::Fabric,
    }
}

impl HpccTopology {
    /// As a [`Topology`] (hosts in id order are the GPUs).
    pub fn to_topology(&self, source: &str) -> Topology {
        let kinds = kinds_of(self.nodes, &self.switches, &self.nvswitches);
        let gpus = kinds
            .iter()
            .enumerate()
            .filter(|(_, k)| **k == NodeKind::Host)
            .map(|(i, _)| NodeId(i as u32))
            .collect();
        Topology {
            kinds,
            links: self.links.clone(),
            gpus,
            gpus_per_server: self.gpus_per_server.unwrap_or(1),
            nvlink_rate: None,
            source: source.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn seconds_parse_exactly_to_the_nanosecond() {
        assert_eq!(parse_secs_exact("2"), Some(Nanos(2_000_000_000)));
        assert_eq!(parse_secs_exact("0.000000100"), Some(Nanos(100)));
        assert_eq!(parse_secs_exact("1.5"), Some(Nanos(1_500_000_000)));
        assert_eq!(parse_secs_exact("-1"), None);
        assert_eq!(parse_secs_exact("."), None);
        assert_eq!(format_secs(Nanos(1_000_000_123)), "1.000000123");
    }

    proptest! {
        #[test]
        fn formatted_seconds_read_back_unchanged(ns in 0u64..u64::MAX / 2) {
            prop_assert_eq!(parse_secs_exact(&format_secs(Nanos(ns))), Some(Nanos(ns)));
        }
    }
}
