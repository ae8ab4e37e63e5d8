//! Observed paths: the bytes each back-end put on every channel, compared link by link.
//!
//! Both back-ends write `links.csv` (`link,from,to,rate_bps,bytes,utilisation`), one row
//! per channel — one direction of one topology link — that carried trace data. `bytes`
//! counts **wire bytes of data packets**: every packet's payload plus its headers. The
//! replayer adds `size + ceil(size / payload) · 48` for each record to every channel of
//! the path it routed; the ns-3 glue counts the frames its devices really started to
//! transmit (PPP header included, so an INA or RoCE packet of `n` payload bytes is `n +
//! 48` bytes on the wire), leaving out pure control frames (TCP ACKs, RoCE CNPs: its
//! `links_control.csv`). On a lossless run of the same trace over the same paths the two
//! agree to the byte under the glue's `roce` transport; a channel where they differ is
//! one where ns-3 forwarded other traffic than the replayer modelled.
//!
//! Under the glue's `tcp` transport the counts cannot be equal: TCP data segments carry
//! 54 header bytes (TCP with timestamps, IPv4, PPP), not 48, and a segment may span two
//! records of one connection. The glue says which per-packet header its net records
//! carried (`net_header_bytes` in `stats.txt`), and [`tolerance_for`] allows
//! [`TCP_LINK_TOLERANCE`] of relative difference when it is not the replayer's.

use super::ReportError;
use crate::formats::{links_csv, write_atomic, FormatError};
use std::collections::BTreeMap;
use std::path::Path;

/// Relative difference allowed per channel when the ns-3 run's net records carry other
/// header bytes than the replayer's 48 (the glue's `tcp` transport: 54-byte headers,
/// +0.57 % on 1,000-byte segments, and fewer headers where a segment spans two records).
pub const TCP_LINK_TOLERANCE: f64 = 0.01;

/// One row of a `links.csv` as the check uses it: the wire bytes of trace data one channel
/// carried (`utilisation` is derived and not compared).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChannelBytes {
    /// Topology link row (0-based).
    pub link: u32,
    /// Transmitting node.
    pub from: u32,
    /// Receiving node.
    pub to: u32,
    /// The link's rate.
    pub rate_bps: u64,
    /// Wire bytes of data packets.
    pub bytes: u64,
}

/// A channel whose byte counts differ between the back-ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkDiff {
    /// Topology link row.
    pub link: u32,
    /// Transmitting node.
    pub from: u32,
    /// Receiving node.
    pub to: u32,
    /// Bytes in the replayer's `links.csv` (0 when it has no row for the channel).
    pub replay_bytes: u64,
    /// Bytes in the ns-3 run's `links.csv` (0 when it has no row for the channel).
    pub ns3_bytes: u64,
}

/// Every channel either back-end used, with both counts and the verdict.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkCheck {
    /// Relative difference allowed per channel (0: byte-exact).
    pub tolerance: f64,
    /// All channels in either file, by (link, from); `differs` set per channel.
    pub channels: Vec<(LinkDiff, bool)>,
}

impl LinkCheck {
    /// The channels that differ.
    pub fn differing(&self) -> Vec<LinkDiff> {
        self.channels
            .iter()
            .filter(|(_, d)| *d)
            .map(|(c, _)| *c)
            .collect()
    }

    /// Writes `links.csv` of a comparison: `link,from,to,replay_bytes,ns3_bytes,
    /// diff_bytes,status` (`diff_bytes` = ns-3 − replay, `status` `same` or `differs`).
    pub fn write(&self, path: &Path) -> Result<(), ReportError> {
        write_atomic(path, |w| {
            writeln!(w, "link,from,to,replay_bytes,ns3_bytes,diff_bytes,status")?;
            for (c, differs) in &self.channels {
                writeln!(
                    w,
                    "{},{},{},{},{},{},{}",
                    c.link,
                    c.from,
                    c.to,
                    c.replay_bytes,
                    c.ns3_bytes,
                    c.ns3_bytes as i128 - c.replay_bytes as i128,
                    if *differs { "differs" } else { "same" }
                )?;
            }
            Ok(())
        })?;
        Ok(())
    }
}

/// Whether the link check ran, and if not why.
#[derive(Clone, Debug, PartialEq)]
pub enum LinkOutcome {
    /// Both directories had a `links.csv`.
    Checked(LinkCheck),
    /// One side has no `links.csv` (e.g. an external simulator's output); the reason.
    NotChecked(String),
}

/// Reads a `links.csv` ([`links_csv::read`], the format's one reader); a channel given
/// twice is an error naming its line (each back-end writes one row per channel).
pub fn read_links_csv(path: &Path) -> Result<Vec<ChannelBytes>, ReportError> {
    let mut seen = BTreeMap::new();
    let mut rows = Vec::new();
    for (i, c) in links_csv::read(path)?.into_iter().enumerate() {
        let line = i as u64 + 2;
        let row = ChannelBytes {
            link: c.link.0,
            from: c.from.0,
            to: c.to.0,
            rate_bps: c.rate_bps,
            bytes: c.bytes,
        };
        if let Some(first) = seen.insert((row.link, row.from, row.to), line) {
            return Err(FormatError::syntax(
                path,
                line,
                "link",
                format!(
                    "channel {} {}→{} already given on line {first}",
                    row.link, row.from, row.to
                ),
            )
            .into());
        }
        rows.push(row);
    }
    Ok(rows)
}

/// Compares two back-ends' channel counts link by link: every channel in either list,
/// a missing row counting as 0 bytes, and whether `|replay − ns3| > tolerance ·
/// max(replay, ns3)` (with `tolerance` 0: any difference).
pub fn join_links(replay: &[ChannelBytes], ns3: &[ChannelBytes], tolerance: f64) -> LinkCheck {
    let mut by: BTreeMap<(u32, u32, u32), LinkDiff> = BTreeMap::new();
    let blank = |c: &ChannelBytes| LinkDiff {
        link: c.link,
        from: c.from,
        to: c.to,
        replay_bytes: 0,
        ns3_bytes: 0,
    };
    for c in replay {
        by.entry((c.link, c.from, c.to))
            .or_insert_with(|| blank(c))
            .replay_bytes += c.bytes;
    }
    for c in ns3 {
        by.entry((c.link, c.from, c.to))
            .or_insert_with(|| blank(c))
            .ns3_bytes += c.bytes;
    }
    let channels = by
        .into_values()
        .map(|d| {
            let diff = d.replay_bytes.abs_diff(d.ns3_bytes) as f64;
            let allowed = tolerance * d.replay_bytes.max(d.ns3_bytes) as f64;
            (d, diff > allowed)
        })
        .collect();
    LinkCheck {
        tolerance,
        channels,
    }
}

/// The channels whose byte counts differ between the replayer's and the ns-3 run's
/// `links.csv` rows (see [`join_links`]), by (link, from).
pub fn check_links(replay: &[ChannelBytes], ns3: &[ChannelBytes], tolerance: f64) -> Vec<LinkDiff> {
    join_links(replay, ns3, tolerance).differing()
}

/// The tolerance for an ns-3 output directory: 0 (byte-exact) unless its `stats.txt`
/// says its net records carried other per-packet headers than the replayer's
/// ([`crate::record::PACKET_HEADER`]), then [`TCP_LINK_TOLERANCE`].
pub fn tolerance_for(ns3_dir: &Path) -> Result<f64, ReportError> {
    let stats = ns3_dir.join("stats.txt");
    if !stats.is_file() {
        return Ok(0.0);
    }
    let s = crate::ns3::run::read_stats(&stats)
        .map_err(|e| FormatError::file(&stats, e.to_string()))?;
    Ok(match s.get("net_header_bytes") {
        Some(&h) if h != crate::record::PACKET_HEADER.0 => TCP_LINK_TOLERANCE,
        _ => 0.0,
    })
}

/// Reads both directories' `links.csv` and compares them ([`join_links`]); when either
/// lacks one, says so instead.
pub fn compare_dirs(
    replay_dir: &Path,
    ns3_dir: &Path,
    tolerance: Option<f64>,
) -> Result<LinkOutcome, ReportError> {
    let (r, n) = (replay_dir.join("links.csv"), ns3_dir.join("links.csv"));
    for p in [&r, &n] {
        if !p.is_file() {
            return Ok(LinkOutcome::NotChecked(format!(
                "{} does not exist",
                p.display()
            )));
        }
    }
    let tolerance = match tolerance {
        Some(t) => t,
        None => tolerance_for(ns3_dir)?,
    };
    Ok(LinkOutcome::Checked(join_links(
        &read_links_csv(&r)?,
        &read_links_csv(&n)?,
        tolerance,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ch(link: u32, from: u32, to: u32, bytes: u64) -> ChannelBytes {
        ChannelBytes {
            link,
            from,
            to,
            rate_bps: 100_000_000_000,
            bytes,
        }
    }

    #[test]
    fn equal_counts_pass_and_a_channel_only_one_side_used_differs_with_zero_on_the_other() {
        let r = [ch(0, 0, 4, 1048), ch(0, 4, 0, 1048), ch(1, 1, 4, 2096)];
        let n = [ch(0, 0, 4, 1048), ch(0, 4, 0, 1048), ch(2, 2, 4, 2096)];
        let d = check_links(&r, &n, 0.0);
        assert_eq!(
            d,
            vec![
                LinkDiff {
                    link: 1,
                    from: 1,
                    to: 4,
                    replay_bytes: 2096,
                    ns3_bytes: 0
                },
                LinkDiff {
                    link: 2,
                    from: 2,
                    to: 4,
                    replay_bytes: 0,
                    ns3_bytes: 2096
                },
            ]
        );
        assert!(check_links(&r, &r, 0.0).is_empty());
    }

    #[test]
    fn a_relative_tolerance_accepts_header_sized_differences_but_not_a_moved_record() {
        // 1,000 segments of 1,000 B: 48-B headers on one side, 54-B on the other
        let r = [ch(0, 0, 4, 1_048_000)];
        let n = [ch(0, 0, 4, 1_054_000)];
        assert_eq!(check_links(&r, &n, 0.0).len(), 1);
        assert!(check_links(&r, &n, TCP_LINK_TOLERANCE).is_empty());
        let moved = [ch(0, 0, 4, 1_054_000 - 104_800)];
        assert_eq!(check_links(&r, &moved, TCP_LINK_TOLERANCE).len(), 1);
    }
}
