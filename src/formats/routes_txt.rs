//! The ns-3 glue's routing table, `routes.txt` (glue routes v3): the path of every
//! connection the glue carries — a (source, destination, NCCL channel) triple, each its
//! own queue pair or TCP connection — so it forwards each packet exactly where the
//! replayer's router sends that channel's traffic.
//!
//! ```text
//! # comment
//! ADDR node peer                    a host's identity address is its interface towards `peer`
//! PATH src dst channel node:link …  the hops from src in order: the node reached and the
//!                                   topology.txt link row (0-based) crossed to reach it
//! ```
//!
//! Version 2 files (`PATH src dst node:link …`, one path per pair) are refused naming the
//! `channel` field: every channel of a pair would otherwise silently share one path.

use super::error::numbered_lines;
use super::FormatError;
use crate::units::{LinkId, NodeId};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// One hop of a path: the node reached and the link crossed to reach it.
pub type Hop = (NodeId, LinkId);

/// A connection of the glue: source, destination and NCCL channel
/// ([`crate::record::FlowRecord::channel`]; 0 for INA edges and reverse traffic of channel 0).
pub type Connection = (NodeId, NodeId, u32);

/// What `routes.txt` holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Routes {
    /// `ADDR` lines: (host, the peer its address faces).
    pub addrs: Vec<(NodeId, NodeId)>,
    /// `PATH` lines by connection (src, dst, channel).
    pub paths: BTreeMap<Connection, Vec<Hop>>,
}

/// The text of `routes.txt`.
pub fn to_string(r: &Routes) -> String {
    let mut s = String::from("# ina3d-ns3 routes v3: ADDR node peer | PATH src dst channel node:link... (hops from src; link = topology.txt row, 0-based)\n");
    for (n, peer) in &r.addrs {
        let _ = writeln!(s, "ADDR {n} {peer}");
    }
    for ((src, dst, channel), hops) in &r.paths {
        let _ = write!(s, "PATH {src} {dst} {channel}");
        for (n, l) in hops {
            let _ = write!(s, " {n}:{}", l.0);
        }
        s.push('\n');
    }
    s
}

/// Read `routes.txt`. Errors name the file, line and field: a malformed id, channel or
/// hop, a path that does not end at its destination, a connection routed twice, an
/// unknown keyword.
pub fn parse(path: &Path, text: &str) -> Result<Routes, FormatError> {
    let mut out = Routes::default();
    for (no, raw) in numbered_lines(text) {
        let t: Vec<&str> = raw.split_whitespace().collect();
        if t.is_empty() || t[0].starts_with('#') {
            continue;
        }
        let err = |field: &str, msg: String| FormatError::syntax(path, no, field, msg);
        let node = |k: usize, field: &str| -> Result<NodeId, FormatError> {
            t.get(k)
                .and_then(|v| v.parse().ok())
                .map(NodeId)
                .ok_or_else(|| {
                    err(
                        field,
                        format!("expected a node id, found `{}`", t.get(k).unwrap_or(&"")),
                    )
                })
        };
        match t[0] {
            "ADDR" if t.len() == 3 => out.addrs.push((node(1, "node")?, node(2, "peer")?)),
            "PATH" if t.len() >= 5 => {
                let (src, dst) = (node(1, "src")?, node(2, "dst")?);
                let channel: u32 = t[3].parse().map_err(|_| {
                    err(
                        "channel",
                        format!(
                            "expected an NCCL channel number, found `{}` (routes v2 files, without channels, must be emitted again)",
                            t[3]
                        ),
                    )
                })?;
                let hops = t[4..]
                    .iter()
                    .map(|h| hop(h).ok_or_else(|| err("hop", format!("expected `node:link`, found `{h}`"))))
                    .collect::<Result<Vec<_>, _>>()?;
                if hops.last().map(|h| h.0) != Some(dst) {
                    return Err(err(
                        "hop",
                        format!("the path does not end at its destination {dst}"),
                    ));
                }
                if out.paths.insert((src, dst, channel), hops).is_some() {
                    return Err(err(
                        "PATH",
                        format!("channel {channel} of pair {src} {dst} is routed twice"),
                    ));
                }
            }
            other => {
                return Err(err(
                    "keyword",
                    format!(
                        "expected `ADDR node peer` or `PATH src dst channel node:link...`, found `{other}` with {} fields",
                        t.len()
                    ),
                ))
            }
        }
    }
    Ok(out)
}

fn hop(h: &str) -> Option<Hop> {
    let (n, l) = h.split_once(':')?;
    Some((NodeId(n.parse().ok()?), LinkId(l.parse().ok()?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_round_trip_with_one_path_per_channel_and_bad_lines_name_their_field() {
        let mut r = Routes::default();
        r.addrs.push((NodeId(0), NodeId(4)));
        r.paths.insert(
            (NodeId(0), NodeId(3), 0),
            vec![(NodeId(4), LinkId(0)), (NodeId(3), LinkId(3))],
        );
        r.paths.insert(
            (NodeId(0), NodeId(3), 1),
            vec![(NodeId(4), LinkId(0)), (NodeId(3), LinkId(5))],
        );
        let text = to_string(&r);
        assert!(text.contains("PATH 0 3 1 4:0 3:5\n"), "{text}");
        assert_eq!(parse(Path::new("r"), &text).unwrap(), r);
        let p = Path::new("routes.txt");
        for (text, want) in [
            ("PATH 0 3 0 2:0 5\n", "routes.txt:1: hop:"),
            (
                "PATH 0 3 0 2:0\n",
                "routes.txt:1: hop: the path does not end",
            ),
            ("PATH 0 3 1 3:0\nPATH 0 3 1 3:1\n", "routes.txt:2: PATH:"),
            ("ROUTE 0 3\n", "routes.txt:1: keyword:"),
            ("ADDR x 1\n", "routes.txt:1: node:"),
            // a v2 line: no channel before the hops
            ("PATH 0 3 4:0 3:3\n", "routes.txt:1: channel:"),
            ("PATH 0 3 -1 3:3\n", "routes.txt:1: channel:"),
            ("PATH 0 3 4294967296 3:3\n", "routes.txt:1: channel:"),
        ] {
            let e = parse(p, text).unwrap_err().to_string();
            assert!(e.starts_with(want), "{text:?}: {e}");
        }
        // two channels of one pair are two connections, not a repeat
        let two = "PATH 0 3 0 3:0\nPATH 0 3 1 3:0\n";
        assert_eq!(parse(p, two).unwrap().paths.len(), 2);
    }
}
