//! Which ranks have tracks and how many events a timeline holds: the options, the job's
//! rank layout read from a trace header, and why a timeline cannot be made.

use crate::schedule::{Coords, Groups, RankOrder};
use crate::trace::TraceHeader;
use crate::units::Rank;
use std::str::FromStr;

/// Events a timeline holds by default ([`TimelineOptions::max_events`]): about 150 MB of
/// JSON at most (≈ 150 B per span).
pub const DEFAULT_MAX_EVENTS: usize = 1_000_000;

/// Links with a utilisation track by default ([`TimelineOptions::links`]).
pub const DEFAULT_LINKS: usize = 8;

/// Which ranks have tracks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RankSelection {
    /// The ranks that show one iteration's structure: every stage of the first pipeline
    /// (TP, CP and DP index 0), and the DP group and CP group of rank 0, each whole up to
    /// [`GROUP_SAMPLE`] members and sampled evenly beyond (docs/timeline.md). TP peers repeat rank 0's spans when TP stays in one NVLink
    /// domain (one record for the group), so they are left to an explicit list.
    Representative,
    /// Every rank.
    All,
    /// These ranks (ascending, no repeats).
    List(Vec<Rank>),
}

impl FromStr for RankSelection {
    type Err = String;
    /// `representative`, `all`, or a comma-separated list of ranks and ranges `A-B`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "representative" | "default" => return Ok(RankSelection::Representative),
            "all" => return Ok(RankSelection::All),
            _ => {}
        }
        let num = |t: &str| {
            t.trim().parse::<u32>().map_err(|_| {
                format!(
                    "`{t}` is not a rank (expected all, representative or a list like 0,8,16-23)"
                )
            })
        };
        let mut ranks = Vec::new();
        for part in s.split(',').filter(|p| !p.trim().is_empty()) {
            let (a, b) = match part.split_once('-') {
                Some((a, b)) => (num(a)?, num(b)?),
                None => (num(part)?, num(part)?),
            };
            if a > b {
                return Err(format!("`{part}`: a range goes from low to high"));
            }
            // a range is bounded by the world once the job is known; refuse absurd ones now
            if b - a >= 1 << 20 {
                return Err(format!("`{part}`: more than 1,048,576 ranks"));
            }
            ranks.extend((a..=b).map(Rank));
        }
        if ranks.is_empty() {
            return Err("no rank given".into());
        }
        ranks.sort_unstable();
        ranks.dedup();
        Ok(RankSelection::List(ranks))
    }
}

impl RankSelection {
    /// [`RankSelection::from_str`] for a command-line parser (a `fn`, not a trait method).
    pub fn from_str_arg(s: &str) -> Result<Self, String> {
        s.parse()
    }
}

/// How a timeline is made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimelineOptions {
    /// The ranks with tracks.
    pub ranks: RankSelection,
    /// The most spans and counter samples the file holds; past it, those that start
    /// last are dropped (the timeline stops at a time), and a selection with more records
    /// than this is refused before the replay.
    pub max_events: usize,
    /// How many of the busiest link directions get a utilisation track.
    pub links: usize,
}

impl Default for TimelineOptions {
    fn default() -> Self {
        TimelineOptions {
            ranks: RankSelection::Representative,
            max_events: DEFAULT_MAX_EVENTS,
            links: DEFAULT_LINKS,
        }
    }
}

/// Why a timeline cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum TimelineError {
    /// The trace header does not describe one job's layout.
    #[error("the trace header's `{key}` {msg}: a timeline needs one job's layout (tp, cp, dp, pp, world) to place ranks on stages; a merged cluster trace has none")]
    Layout {
        /// The key.
        key: &'static str,
        /// What is wrong with it.
        msg: String,
    },
    /// A rank of `--timeline-ranks` the job does not have.
    #[error("--timeline-ranks: rank {rank} is not in the job ({world} ranks)")]
    RankOutOfRange {
        /// The rank.
        rank: Rank,
        /// Ranks in the job.
        world: u32,
    },
    /// The selection's records exceed the cap.
    #[error("the ranks chosen for the timeline have more than {cap} records (--timeline-max-events): choose fewer ranks with --timeline-ranks or raise the cap")]
    TooManyRecords {
        /// The cap.
        cap: usize,
    },
}

/// The job's ranks on its parallel dimensions, from a trace header.
#[derive(Clone, Debug)]
pub struct RankLayout {
    groups: Groups,
}

impl RankLayout {
    /// The layout the header's `tp`, `cp`, `dp`, `pp`, `world` and `rank_order` give.
    pub fn from_header(h: &TraceHeader) -> Result<RankLayout, TimelineError> {
        let get = |key: &'static str| -> Result<u32, TimelineError> {
            let v = h.get(key).ok_or(TimelineError::Layout {
                key,
                msg: "is missing".into(),
            })?;
            v.trim()
                .parse::<u32>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or(TimelineError::Layout {
                    key,
                    msg: format!("`{v}` is not a positive whole number"),
                })
        };
        let (tp, cp, dp, pp, world) = (
            get("tp")?,
            get("cp")?,
            get("dp")?,
            get("pp")?,
            get("world")?,
        );
        if u64::from(tp) * u64::from(cp) * u64::from(dp) * u64::from(pp) != u64::from(world) {
            return Err(TimelineError::Layout {
                key: "world",
                msg: format!("{world} is not tp·cp·dp·pp = {tp}·{cp}·{dp}·{pp}"),
            });
        }
        let order = match h.get("rank_order").map(str::trim) {
            Some(o) if o == RankOrder::TpCpEpPpDp.as_str() => RankOrder::TpCpEpPpDp,
            Some(o) if o == RankOrder::TpCpEpDpPp.as_str() => RankOrder::TpCpEpDpPp,
            None => RankOrder::TpCpEpDpPp,
            Some(o) => {
                return Err(TimelineError::Layout {
                    key: "rank_order",
                    msg: format!("`{o}` is neither tp-cp-ep-dp-pp nor tp-cp-ep-pp-dp"),
                })
            }
        };
        Ok(RankLayout {
            groups: Groups::new(tp, cp, dp, pp, order),
        })
    }

    /// Ranks in the job.
    pub fn world(&self) -> u32 {
        self.groups.world()
    }

    /// Pipeline stages.
    pub fn stages(&self) -> u32 {
        self.groups.pp
    }

    /// A rank's coordinates.
    pub fn coords(&self, r: Rank) -> Coords {
        self.groups.coords(r)
    }

    /// The ranks `sel` names, ascending.
    pub fn select(&self, sel: &RankSelection) -> Result<Vec<Rank>, TimelineError> {
        let g = &self.groups;
        let mut out: Vec<Rank> = match sel {
            RankSelection::All => (0..self.world()).map(Rank).collect(),
            RankSelection::List(l) => {
                if let Some(&rank) = l.iter().find(|r| r.0 >= self.world()) {
                    return Err(TimelineError::RankOutOfRange {
                        rank,
                        world: self.world(),
                    });
                }
                l.clone()
            }
            RankSelection::Representative => {
                let at = |tp, cp, dp, pp| g.rank(Coords { tp, cp, dp, pp });
                let mut v: Vec<Rank> = (0..g.pp).map(|s| at(0, 0, 0, s)).collect();
                v.extend(spread(g.cp).map(|c| at(0, c, 0, 0)));
                v.extend(spread(g.dp).map(|d| at(0, 0, d, 0)));
                v
            }
        };
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }
}

/// The most members of a group the representative ranks take ([`spread`]).
pub const GROUP_SAMPLE: u32 = 16;

/// Indices `0..n` of a group, all of them up to [`GROUP_SAMPLE`], else that many evenly
/// spread from the first to the last (a DP group of 256 gives 0, 17, 34, …, 255).
fn spread(n: u32) -> impl Iterator<Item = u32> {
    let k = n.min(GROUP_SAMPLE);
    (0..k).map(move |i| {
        if k == n {
            i
        } else {
            // i·(n−1)/(k−1): distinct since n − 1 ≥ k − 1
            (u64::from(i) * u64::from(n - 1) / u64::from(k - 1)) as u32
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_group_is_sampled_evenly_from_its_first_to_its_last_member() {
        assert_eq!(spread(4).collect::<Vec<_>>(), vec![0, 1, 2, 3]);
        let s: Vec<u32> = spread(256).collect();
        assert_eq!(s.len(), 16);
        assert_eq!((s[0], s[1], s[15]), (0, 17, 255));
        assert!(s.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn rank_lists_read_ranges_and_refuse_what_is_not_a_rank() {
        assert_eq!(
            "4,0-2,2".parse::<RankSelection>().unwrap(),
            RankSelection::List(vec![Rank(0), Rank(1), Rank(2), Rank(4)])
        );
        assert!("3-1"
            .parse::<RankSelection>()
            .unwrap_err()
            .contains("low to high"));
        assert!("x"
            .parse::<RankSelection>()
            .unwrap_err()
            .contains("`x` is not a rank"));
        assert!("0-4294967295".parse::<RankSelection>().is_err());
    }
}
