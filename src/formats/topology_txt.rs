//! `topology.txt` of the HPCC simulator family, in its two flavours.
//!
//! - **HPCC** (alibaba-edu/High-Precision-Congestion-Control `simulation/mix/*.txt`):
//!   `<nodes> <switches> <links>`, a line of switch ids, then one
//!   `<a> <b> <rate> <delay> <error_rate>` line per link (`100Gbps`, `0.001ms`, `0`).
//! - **SimAI** (aliyun/SimAI's generated topologies): `<nodes> <gpus_per_server>
//!   <nvswitches> <switches> <links> <gpu_type>` (older files: 5 fields, no GPU type),
//!   the NVSwitch ids then the switch ids, then the same link lines.
//!
//! Nodes not listed are hosts. The reader is line based and forgiving where real files
//! are sloppy — CRLF endings, trailing blanks, header counts that disagree with the rows,
//! free text after a blank line — returning each oddity as a [`Warning`]; it fails with
//! `path:line: field: …` only where it cannot know what was meant, and for a node id at or
//! beyond the header's node count (which would make a topology of that many nodes). It
//! never allocates by a header count: ids are bounded by [`MAX_NODES`] and the node count
//! by what the rows use or the file's length. Checked against HPCC's `fat.txt` and SimAI's
//! `Spectrum-X_16g_8gps_100Gbps_A100.txt` (tests/fixtures).

use super::{numbered_lines, read_text};
use super::{FormatError, Warning};
use crate::units::{
    format_delay, link_delay_problem, link_rate_problem, parse_delay, BitsPerSec, Nanos, NodeId,
};
use std::fmt::Write as _;
use std::path::Path;

/// Largest node id accepted, so a corrupt file cannot ask for gigabytes.
pub const MAX_NODES: u64 = 1 << 24;

/// Which header the file has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// HPCC's 3-field header; NVSwitches, if any, are listed as switches.
    Hpcc,
    /// SimAI's 6-field header with GPUs per server and the GPU type.
    Simai {
        /// GPUs per server (the NVLink domain).
        gpus_per_server: u32,
        /// SimAI's GPU type name (`A100`, `H100`, …).
        gpu_type: String,
    },
}

/// One link row.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkRow {
    /// One end.
    pub a: NodeId,
    /// The other end.
    pub b: NodeId,
    /// Rate of each direction.
    pub rate: BitsPerSec,
    /// One-way propagation delay.
    pub delay: Nanos,
    /// HPCC's per-link error rate.
    pub error_rate: f64,
}

/// What a `topology.txt` holds.
#[derive(Clone, Debug, PartialEq)]
pub struct TopologyFile {
    /// The header variant (and SimAI's extra fields).
    pub flavor: Flavor,
    /// Node count (the header's, raised to cover every id the file uses).
    pub nodes: u32,
    /// NVSwitch ids (SimAI only; empty for HPCC).
    pub nvswitches: Vec<NodeId>,
    /// Switch ids.
    pub switches: Vec<NodeId>,
    /// Link rows in file order (a link's index is its row number, 0-based).
    pub links: Vec<LinkRow>,
}

/// Read a topology file.
pub fn read_file(path: &Path) -> Result<(TopologyFile, Vec<Warning>), FormatError> {
    parse(path, &read_text(path)?)
}

/// Write `t` as text.
pub fn to_string(t: &TopologyFile) -> String {
    let ids = |v: &[NodeId]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let mut s = String::new();
    match &t.flavor {
        Flavor::Hpcc => {
            let ids = ids(&t
                .nvswitches
                .iter()
                .chain(&t.switches)
                .copied()
                .collect::<Vec<_>>());
            let _ = writeln!(s, "{} {} {}", t.nodes, ids.len(), t.links.len());
            let _ = writeln!(s, "{}", ids.join(" "));
        }
        Flavor::Simai {
            gpus_per_server,
            gpu_type,
        } => {
            let _ = writeln!(
                s,
                "{} {} {} {} {} {}",
                t.nodes,
                gpus_per_server,
                t.nvswitches.len(),
                t.switches.len(),
                t.links.len(),
                simai_gpu_type(gpu_type)
            );
            let all = ids(&t
                .nvswitches
                .iter()
                .chain(&t.switches)
                .copied()
                .collect::<Vec<_>>());
            let _ = writeln!(s, "{}", all.join(" "));
        }
    }
    for l in &t.links {
        let _ = writeln!(
            s,
            "{} {} {} {} {}",
            l.a,
            l.b,
            l.rate.to_hpcc_string(),
            format_delay(l.delay),
            l.error_rate
        );
    }
    s
}

/// The GPU type as one header token: whitespace becomes `_`; empty becomes `A100`,
/// SimAI's own default GPU (its topology generator's `-g` default).
fn simai_gpu_type(t: &str) -> String {
    let t: String = t
        .trim()
        .chars()
        .map(|c| if c.is_whitespace() { '_' } else { c })
        .collect();
    if t.is_empty() {
        "A100".into()
    } else {
        t
    }
}

/// Parse the text of a topology file; `path` names it in errors and warnings.
pub fn parse(path: &Path, text: &str) -> Result<(TopologyFile, Vec<Warning>), FormatError> {
    let mut r = Reader {
        path,
        warnings: Vec::new(),
        declared: MAX_NODES,
    };
    let file = r.parse(text)?;
    Ok((file, r.warnings))
}

struct Reader<'a> {
    path: &'a Path,
    warnings: Vec<Warning>,
    /// The node count the header declares (ids run below it), once it is read.
    declared: u64,
}

/// What the header announced.
struct Header {
    nodes: u64,
    gpus_per_server: Option<u64>,
    gpu_type: Option<String>,
    nvswitches: u64,
    switches: u64,
    links: u64,
}

impl Reader<'_> {
    fn err(&self, line: u64, field: &str, msg: String) -> FormatError {
        FormatError::syntax(self.path, line, field, msg)
    }
    fn warn(&mut self, line: u64, msg: String) {
        self.warnings.push(Warning::new(self.path, line, msg));
    }

    fn num(&self, line: u64, field: &str, tok: &str) -> Result<u64, FormatError> {
        tok.parse()
            .map_err(|_| self.err(line, field, format!("`{tok}` is not a whole number")))
    }

    fn id(&self, line: u64, field: &str, tok: &str) -> Result<NodeId, FormatError> {
        let v = self.num(line, field, tok)?;
        if v >= MAX_NODES {
            return Err(self.err(
                line,
                field,
                format!("node id {v} is beyond the supported {MAX_NODES}"),
            ));
        }
        // an id past the declared count would make a topology of that many nodes
        if v >= self.declared {
            return Err(self.err(
                line,
                field,
                format!(
                    "node id {v} is beyond the {} node(s) the header declares (ids 0 to {})",
                    self.declared,
                    self.declared.saturating_sub(1)
                ),
            ));
        }
        Ok(NodeId(v as u32))
    }

    /// The phases: header, the id line, the link rows, then the node count.
    fn parse(&mut self, text: &str) -> Result<TopologyFile, FormatError> {
        let lines: Vec<(u64, &str)> = numbered_lines(text).map(|(n, l)| (n, l.trim())).collect();
        let mut rest = lines.iter().copied().skip_while(|(_, l)| l.is_empty());
        let Some((hl, header)) = rest.next() else {
            return Err(self.err(
                1,
                "header",
                "the file is empty; expected `<nodes> <switches> <links>`".into(),
            ));
        };
        let h = self.header(hl, header)?;
        self.declared = h.nodes.min(MAX_NODES);
        let mut rest = rest.peekable();
        let (id_line, ids) = self.id_line(hl, &h, &mut rest)?;
        let (links, last_line) = self.links(&lines, &h, id_line, rest)?;
        let nodes = self.node_count(hl, &h, &ids, &links, text.len())?;
        let nv = (h.nvswitches as usize).min(ids.len());
        let flavor = match h.gpus_per_server {
            None => Flavor::Hpcc,
            Some(g) => Flavor::Simai {
                gpus_per_server: self.gpus_per_server(hl, g)?,
                gpu_type: h.gpu_type.clone().unwrap_or_default(),
            },
        };
        let _ = last_line;
        Ok(TopologyFile {
            flavor,
            nodes,
            nvswitches: ids[..nv].to_vec(),
            switches: ids[nv..].to_vec(),
            links,
        })
    }

    fn gpus_per_server(&mut self, hl: u64, g: u64) -> Result<u32, FormatError> {
        match g {
            0 => {
                self.warn(hl, "gpus_per_server is 0; using 1".into());
                Ok(1)
            }
            g if g > u32::MAX as u64 => {
                Err(self.err(hl, "gpus per server", format!("{g} is out of range")))
            }
            g => Ok(g as u32),
        }
    }

    /// The line of (NVSwitch then) switch ids: the next line, a blank one allowed when the
    /// header announces no switches.
    fn id_line<'t>(
        &mut self,
        hl: u64,
        h: &Header,
        it: &mut std::iter::Peekable<impl Iterator<Item = (u64, &'t str)>>,
    ) -> Result<(u64, Vec<NodeId>), FormatError> {
        let expected = h.nvswitches + h.switches;
        let mut ids = Vec::new();
        let mut id_line = hl + 1;
        match it.peek().copied() {
            Some((_, l)) if l.is_empty() && expected == 0 => {
                it.next();
            }
            Some((n, l)) if expected == 0 && looks_like_link(l) => id_line = n,
            _ => {
                while matches!(it.peek(), Some((_, l)) if l.is_empty()) {
                    it.next();
                }
                match it.next() {
                    Some((n, l)) => {
                        id_line = n;
                        if looks_like_link(l) && l.split_whitespace().count() as u64 != expected {
                            return Err(self.err(
                                n,
                                "switch ids",
                                format!(
                                    "expected the line of {expected} switch ids, found a link line"
                                ),
                            ));
                        }
                        for tok in l.split_whitespace() {
                            ids.push(self.id(n, "switch id", tok)?);
                        }
                    }
                    None if expected == 0 => {}
                    None => {
                        return Err(self.err(
                            hl + 1,
                            "switch ids",
                            format!("expected {expected} switch ids, found the end of the file"),
                        ))
                    }
                }
            }
        }
        if ids.len() as u64 != expected {
            self.warn(
                id_line,
                format!(
                    "the header announces {expected} switch ids but the line lists {}; using the line",
                    ids.len()
                ),
            );
        }
        Ok((id_line, ids))
    }

    /// Link rows until the end, or until free text after a blank line.
    fn links<'t>(
        &mut self,
        lines: &[(u64, &str)],
        h: &Header,
        id_line: u64,
        it: impl Iterator<Item = (u64, &'t str)>,
    ) -> Result<(Vec<LinkRow>, u64), FormatError> {
        let mut links = Vec::new();
        let mut blank: Option<u64> = None;
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
        Ok((links, last_line))
    }

    /// Nodes: as many as the header says, or as the ids need; never more than the file's
    /// length could describe (a node per byte), so a crafted header allocates nothing.
    fn node_count(
        &mut self,
        hl: u64,
        h: &Header,
        ids: &[NodeId],
        links: &[LinkRow],
        text_len: usize,
    ) -> Result<u32, FormatError> {
        let max_id = ids
            .iter()
            .copied()
            .chain(links.iter().flat_map(|l| [l.a, l.b]))
            .map(|v| v.0)
            .max();
        // every id is below the declared count ([`Reader::id`])
        let need = max_id.map_or(0, |m| m as u64 + 1);
        let bound = MAX_NODES.min(need.max(text_len as u64));
        if h.nodes > bound {
            return Err(self.err(
                hl,
                "node count",
                format!(
                    "{} nodes, but the file's ids go up to {} and its {text_len} bytes cannot describe more than {bound} nodes",
                    h.nodes,
                    need.saturating_sub(1)
                ),
            ));
        }
        Ok(h.nodes as u32)
    }

    fn header(&self, hl: u64, header: &str) -> Result<Header, FormatError> {
        let f: Vec<&str> = header.split_whitespace().collect();
        let h = match f.len() {
            3 => Header {
                nodes: self.num(hl, "node count", f[0])?,
                gpus_per_server: None,
                gpu_type: None,
                nvswitches: 0,
                switches: self.num(hl, "switch count", f[1])?,
                links: self.num(hl, "link count", f[2])?,
            },
            5 | 6 => Header {
                nodes: self.num(hl, "node count", f[0])?,
                gpus_per_server: Some(self.num(hl, "gpus per server", f[1])?),
                gpu_type: f.get(5).map(|s| s.to_string()),
                nvswitches: self.num(hl, "nvswitch count", f[2])?,
                switches: self.num(hl, "switch count", f[3])?,
                links: self.num(hl, "link count", f[4])?,
            },
            k => return Err(self.err(
                hl,
                "header",
                format!(
                    "expected `<nodes> <switches> <links>` (HPCC) or `<nodes> <gpus_per_server> <nvswitches> <switches> <links> <gpu_type>` (SimAI), found {k} field(s)"
                ),
            )),
        };
        if h.switches.saturating_add(h.nvswitches) > MAX_NODES {
            return Err(self.err(
                hl,
                "switch count",
                format!("{} is beyond the supported {MAX_NODES}", h.switches),
            ));
        }
        Ok(h)
    }

    fn link(&mut self, n: u64, l: &str) -> Result<LinkRow, FormatError> {
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
        if let Some(why) = link_rate_problem(rate) {
            return Err(self.err(n, "rate", format!("`{}`: {why}", f[2])));
        }
        let delay = parse_delay(f[3]).ok_or_else(|| {
            self.err(
                n,
                "delay",
                format!("`{}` is not a delay like 1000ns or 0.001ms", f[3]),
            )
        })?;
        if let Some(why) = link_delay_problem(delay) {
            return Err(self.err(n, "delay", format!("`{}`: {why}", f[3])));
        }
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
        Ok(LinkRow {
            a,
            b,
            rate,
            delay,
            error_rate,
        })
    }
}

/// A line whose third field is a rate with a unit: a link line, not a list of ids.
fn looks_like_link(l: &str) -> bool {
    l.split_whitespace()
        .nth(2)
        .is_some_and(|t| t.to_ascii_lowercase().ends_with("bps") && BitsPerSec::parse(t).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> &'static Path {
        Path::new("t.txt")
    }

    #[test]
    fn both_flavours_round_trip_through_text() {
        for flavor in [
            Flavor::Hpcc,
            Flavor::Simai {
                gpus_per_server: 2,
                gpu_type: "H100".into(),
            },
        ] {
            let nv = if flavor == Flavor::Hpcc {
                vec![]
            } else {
                vec![NodeId(4)]
            };
            let t = TopologyFile {
                flavor: flavor.clone(),
                nodes: 6,
                nvswitches: nv,
                switches: vec![NodeId(5)],
                links: vec![
                    LinkRow {
                        a: NodeId(0),
                        b: NodeId(5),
                        rate: BitsPerSec::gbps(100),
                        delay: Nanos(1000),
                        error_rate: 0.0,
                    },
                    LinkRow {
                        a: NodeId(1),
                        b: NodeId(5),
                        rate: BitsPerSec(12_500_000_000),
                        delay: Nanos(1500),
                        error_rate: 0.001,
                    },
                ],
            };
            let text = to_string(&t);
            let (back, warnings) = parse(p(), &text).unwrap();
            assert!(warnings.is_empty(), "{warnings:?}");
            assert_eq!(back, t, "{text}");
        }
    }

    #[test]
    fn a_crafted_node_count_is_an_error_not_an_allocation() {
        let e = parse(p(), "4000000000 1 1\n1\n0 1 100Gbps 1us 0\n").unwrap_err();
        assert!(e.to_string().contains("t.txt:1: node count"), "{e}");
        let e = parse(p(), "3 1 1\n99999999999\n0 1 100Gbps 1us 0\n").unwrap_err();
        assert!(e.to_string().contains("t.txt:2: switch id"), "{e}");
    }

    #[test]
    fn an_empty_simai_gpu_type_is_written_as_simais_default() {
        assert_eq!(simai_gpu_type(" "), "A100");
        assert_eq!(simai_gpu_type("H 800"), "H_800");
    }
}
