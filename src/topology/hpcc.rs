//! Reading and writing HPCC `topology.txt` and SimAI topology files (DESIGN §9).
//!
//! HPCC: `<nodes> <switches> <links>`, a line of switch ids, then one
//! `<src> <dst> <rate> <delay> <error_rate>` line per link. SimAI: the header is
//! `<nodes> <gpus_per_server> <nvswitches> <switches> <links> <gpu_type>` and the id line
//! lists the NVSwitch ids first, then the switch ids. Nodes not listed are hosts.
//!
//! The reader is line based and forgiving where real files are sloppy — CRLF endings,
//! trailing blanks, header counts that disagree with the rows, free text after a blank
//! line — reporting each oddity as a [`TopologyWarning`]; it fails with
//! `path:line: field: …` only where it cannot know what was meant.

use super::{Link, LinkKind, NodeKind, Topology, TopologyError, TopologyWarning};
use crate::units::{parse_delay, BitsPerSec, NodeId};
use std::fmt::Write as _;
use std::path::Path;

/// Largest node id accepted, so a corrupt header cannot ask for terabytes.
const MAX_NODES: u64 = 1 << 24;

impl Topology {
    /// Read an HPCC `topology.txt` or SimAI topology file (told apart by the header's
    /// field count: 3 for HPCC, 5 or 6 for SimAI).
    pub fn read_file(path: &Path) -> Result<(Topology, Vec<TopologyWarning>), TopologyError> {
        let bytes = std::fs::read(path).map_err(|source| TopologyError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let text = String::from_utf8_lossy(&bytes);
        Topology::parse_str(&text, &path.display().to_string())
    }

    /// Parse the text of an HPCC or SimAI topology file; `origin` names it in errors and
    /// warnings and becomes [`Topology::source`]. Hosts become the GPUs in ascending id
    /// order; HPCC files have `gpus_per_server = 1` and no NVLink; SimAI files take
    /// `gpus_per_server` from the header and the NVLink rate from the first NVLink link.
    pub fn parse_str(
        text: &str,
        origin: &str,
    ) -> Result<(Topology, Vec<TopologyWarning>), TopologyError> {
        Reader {
            origin,
            warnings: Vec::new(),
        }
        .parse(text)
    }

    /// HPCC `topology.txt` text. HPCC has no NVSwitch kind: NVSwitches are written as
    /// switches (and read back as such), so the round trip is exact for topologies
    /// without an NVLink domain; use [`Topology::to_simai_string`] to keep them.
    /// Delays are written in whole nanoseconds (`1000ns`), rates as `100Gbps`.
    pub fn to_hpcc_string(&self) -> String {
        let ids: Vec<String> = (0..self.kinds.len())
            .filter(|&v| self.kinds[v] != NodeKind::Host)
            .map(|v| v.to_string())
            .collect();
        let mut s = format!(
            "{} {} {}\n{}\n",
            self.kinds.len(),
            ids.len(),
            self.links.len(),
            ids.join(" ")
        );
        self.write_links(&mut s);
        s
    }

    /// SimAI topology text: 6-field header with `gpu_type` (whitespace in it becomes `_`,
    /// since the header is whitespace separated), then NVSwitch ids, then switch ids.
    pub fn to_simai_string(&self, gpu_type: &str) -> String {
        let nv = self.nvswitches();
        let sw = self.switches();
        let gpu_type: String = gpu_type
            .chars()
            .map(|c| if c.is_whitespace() { '_' } else { c })
            .collect();
        let gpu_type = if gpu_type.is_empty() {
            "unknown".to_string()
        } else {
            gpu_type
        };
        let ids: Vec<String> = nv.iter().chain(sw.iter()).map(|v| v.to_string()).collect();
        let mut s = format!(
            "{} {} {} {} {} {}\n{}\n",
            self.kinds.len(),
            self.gpus_per_server,
            nv.len(),
            sw.len(),
            self.links.len(),
            gpu_type,
            ids.join(" ")
        );
        self.write_links(&mut s);
        s
    }

    fn write_links(&self, s: &mut String) {
        for l in &self.links {
            let _ = writeln!(
                s,
                "{} {} {} {}ns {}",
                l.a,
                l.b,
                l.rate.to_hpcc_string(),
                l.delay.0,
                l.error_rate
            );
        }
    }
}

struct Reader<'a> {
    origin: &'a str,
    warnings: Vec<TopologyWarning>,
}

/// What the header announced.
struct Header {
    nodes: u64,
    gpus_per_server: Option<u64>,
    nvswitches: u64,
    switches: u64,
    links: u64,
}

impl Reader<'_> {
    fn err(&self, line: usize, field: &str, msg: String) -> TopologyError {
        TopologyError::Parse {
            path: self.origin.to_string(),
            line,
            field: field.to_string(),
            msg,
        }
    }
    fn warn(&mut self, line: usize, msg: String) {
        self.warnings.push(TopologyWarning {
            path: self.origin.to_string(),
            line,
            msg,
        });
    }

    fn num(&self, line: usize, field: &str, tok: &str) -> Result<u64, TopologyError> {
        let v: u64 = tok
            .parse()
            .map_err(|_| self.err(line, field, format!("`{tok}` is not a whole number")))?;
        Ok(v)
    }

    fn id(&self, line: usize, field: &str, tok: &str) -> Result<u32, TopologyError> {
        let v = self.num(line, field, tok)?;
        if v >= MAX_NODES {
            return Err(self.err(
                line,
                field,
                format!("node id {v} is beyond the supported {MAX_NODES}"),
            ));
        }
        Ok(v as u32)
    }

    fn parse(mut self, text: &str) -> Result<(Topology, Vec<TopologyWarning>), TopologyError> {
        let lines: Vec<(usize, &str)> = text
            .split('\n')
            .enumerate()
            .map(|(i, l)| (i + 1, l.trim()))
            .collect();
        let mut it = lines
            .iter()
            .copied()
            .skip_while(|(_, l)| l.is_empty())
            .peekable();
        let Some((hl, header)) = it.next() else {
            return Err(self.err(
                1,
                "header",
                "the file is empty; expected `<nodes> <switches> <links>`".into(),
            ));
        };
        let h = self.header(hl, header)?;
        let expected_ids = h.nvswitches + h.switches;

        // The id line: the next line (blank allowed when no ids are expected).
        let mut ids: Vec<u32> = Vec::new();
        let mut id_line = hl + 1;
        match it.peek().copied() {
            Some((_, l)) if l.is_empty() && expected_ids == 0 => {
                it.next();
            }
            Some((n, l)) if expected_ids == 0 && looks_like_link(l) => id_line = n,
            _ => {
                while matches!(it.peek(), Some((_, l)) if l.is_empty()) {
                    it.next();
                }
                match it.next() {
                    Some((n, l)) => {
                        id_line = n;
                        if looks_like_link(l)
                            && l.split_whitespace().count() != expected_ids as usize
                        {
                            return Err(self.err(
                                n,
                                "switch ids",
                                format!("expected the line of {expected_ids} switch ids, found a link line"),
                            ));
                        }
                        for tok in l.split_whitespace() {
                            ids.push(self.id(n, "switch id", tok)?);
                        }
                    }
                    None if expected_ids == 0 => {}
                    None => {
                        return Err(self.err(
                            hl + 1,
                            "switch ids",
                            format!(
                                "expected {expected_ids} switch ids, found the end of the file"
                            ),
                        ))
                    }
                }
            }
        }
        if ids.len() as u64 != expected_ids {
            self.warn(
                id_line,
                format!("the header announces {expected_ids} switch ids but the line lists {}; using the line", ids.len()),
            );
        }

        // Links until the end, or until free text after a blank line.
        let mut links: Vec<Link> = Vec::new();
        let mut blank: Option<usize> = None;
        let mut last_line = id_line;
        for (n, l) in it {
            if l.is_empty() {
                blank.get_or_insert(n);
                continue;
            }
            match self.link(n, l) {
                Ok(link) => {
                    blank = None;
                    last_line = n;
                    links.push(link);
                }
                Err(e) => match blank {
                    Some(b) if !links.is_empty() => {
                        let rest = lines
                            .iter()
                            .filter(|(m, t)| *m >= n && !t.is_empty())
                            .count();
                        self.warn(
                            n,
                            format!("ignored {rest} line(s) of free text after the blank line {b}"),
                        );
                        break;
                    }
                    _ => return Err(e),
                },
            }
        }
        if links.len() as u64 != h.links {
            self.warn(
                last_line,
                format!(
                    "the header announces {} links but the file has {}; using the rows",
                    h.links,
                    links.len()
                ),
            );
        }

        // Nodes: as many as the header says, or as the ids need.
        let max_id = ids
            .iter()
            .copied()
            .chain(links.iter().flat_map(|l| [l.a.0, l.b.0]))
            .max();
        let need = max_id.map_or(0, |m| m as u64 + 1);
        let n = if need > h.nodes {
            self.warn(
                hl,
                format!(
                    "the header announces {} nodes but ids go up to {}; using {need} nodes",
                    h.nodes,
                    need - 1
                ),
            );
            need
        } else {
            if h.nodes > MAX_NODES {
                return Err(self.err(
                    hl,
                    "node count",
                    format!("{} nodes is beyond the supported {MAX_NODES}", h.nodes),
                ));
            }
            h.nodes
        } as usize;
        let mut kinds = vec![NodeKind::Host; n];
        for (i, &id) in ids.iter().enumerate() {
            let k = if (i as u64) < h.nvswitches {
                NodeKind::NvSwitch
            } else {
                NodeKind::Switch
            };
            if kinds[id as usize] != NodeKind::Host {
                self.warn(id_line, format!("node {id} is listed twice as a switch"));
            }
            kinds[id as usize] = k;
        }
        let mut linked = vec![false; n];
        for l in &mut links {
            let (ka, kb) = (kinds[l.a.idx()], kinds[l.b.idx()]);
            l.kind = if ka == NodeKind::NvSwitch || kb == NodeKind::NvSwitch {
                LinkKind::NvLink
            } else if ka == NodeKind::Switch && kb == NodeKind::Switch {
                LinkKind::Fabric
            } else {
                LinkKind::Nic
            };
            linked[l.a.idx()] = true;
            linked[l.b.idx()] = true;
        }
        let lonely = linked.iter().filter(|&&x| !x).count();
        if lonely > 0 {
            let first = linked.iter().position(|&x| !x).unwrap_or(0);
            self.warn(
                hl,
                format!("{lonely} node(s) appear in no link (first: node {first})"),
            );
        }
        let gpus: Vec<NodeId> = (0..n as u32)
            .map(NodeId)
            .filter(|v| kinds[v.idx()] == NodeKind::Host)
            .collect();
        let nvlink_rate = links
            .iter()
            .find(|l| l.kind == LinkKind::NvLink)
            .map(|l| l.rate);
        let gps = match h.gpus_per_server {
            None => 1,
            Some(0) => {
                self.warn(hl, "gpus_per_server is 0; using 1".into());
                1
            }
            Some(g) if g > u32::MAX as u64 => {
                return Err(self.err(hl, "gpus per server", format!("{g} is out of range")));
            }
            Some(g) => g as u32,
        };
        let topo = Topology {
            kinds,
            links,
            gpus,
            gpus_per_server: gps,
            nvlink_rate,
            source: self.origin.to_string(),
        };
        Ok((topo, self.warnings))
    }

    fn header(&self, hl: usize, header: &str) -> Result<Header, TopologyError> {
        let f: Vec<&str> = header.split_whitespace().collect();
        match f.len() {
            3 => Ok(Header {
                nodes: self.num(hl, "node count", f[0])?,
                gpus_per_server: None,
                nvswitches: 0,
                switches: self.num(hl, "switch count", f[1])?,
                links: self.num(hl, "link count", f[2])?,
            }),
            5 | 6 => Ok(Header {
                nodes: self.num(hl, "node count", f[0])?,
                gpus_per_server: Some(self.num(hl, "gpus per server", f[1])?),
                nvswitches: self.num(hl, "nvswitch count", f[2])?,
                switches: self.num(hl, "switch count", f[3])?,
                links: self.num(hl, "link count", f[4])?,
            }),
            k => Err(self.err(
                hl,
                "header",
                format!(
                    "expected `<nodes> <switches> <links>` (HPCC) or `<nodes> <gpus_per_server> <nvswitches> <switches> <links> <gpu_type>` (SimAI), found {k} field(s)"
                ),
            )),
        }
        .and_then(|h| {
            if h.switches.saturating_add(h.nvswitches) > MAX_NODES {
                Err(self.err(hl, "switch count", format!("{} is beyond the supported {MAX_NODES}", h.switches)))
            } else {
                Ok(h)
            }
        })
    }

    fn link(&mut self, n: usize, l: &str) -> Result<Link, TopologyError> {
        let f: Vec<&str> = l.split_whitespace().collect();
        let names = ["src", "dst", "rate", "delay"];
        if f.len() < 4 {
            return Err(self.err(
                n,
                names[f.len()],
                format!("missing; a link line is `<src> <dst> <rate> <delay> <error_rate>`, found {} field(s)", f.len()),
            ));
        }
        let a = self.id(n, "src", f[0])?;
        let b = self.id(n, "dst", f[1])?;
        if a == b {
            return Err(self.err(n, "dst", format!("the link joins node {a} to itself")));
        }
        let rate = BitsPerSec::parse(f[2])
            .ok_or_else(|| self.err(n, "rate", format!("`{}` is not a rate like 100Gbps", f[2])))?;
        let delay = parse_delay(f[3]).ok_or_else(|| {
            self.err(
                n,
                "delay",
                format!("`{}` is not a delay like 1000ns or 0.001ms", f[3]),
            )
        })?;
        let error_rate = match f.get(4) {
            None => {
                self.warn(n, "no error-rate column; using 0".into());
                0.0
            }
            Some(t) => match t.parse::<f64>() {
                Ok(x) if x.is_finite() && (0.0..=1.0).contains(&x) => x,
                _ => {
                    return Err(self.err(
                        n,
                        "error_rate",
                        format!("`{t}` is not a probability between 0 and 1"),
                    ))
                }
            },
        };
        if f.len() > 5 {
            self.warn(
                n,
                format!(
                    "{} extra field(s) after the error rate ignored",
                    f.len() - 5
                ),
            );
        }
        Ok(Link {
            a: NodeId(a),
            b: NodeId(b),
            rate,
            delay,
            error_rate,
            kind: LinkKind::Nic,
        })
    }
}

/// A line whose third field is a rate with a unit: a link line, not a list of ids.
fn looks_like_link(l: &str) -> bool {
    l.split_whitespace()
        .nth(2)
        .is_some_and(|t| t.to_ascii_lowercase().ends_with("bps") && BitsPerSec::parse(t).is_some())
}
