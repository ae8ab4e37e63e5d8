//! Megatron's rank → parallel-group mapping (docs/model.md#rank-layout, `parallel_state.py`).
//!
//! Megatron-core builds two rank generators over the same world: the *dense* one
//! (`tp-cp-ep-dp-pp` with EP = 1) for attention and dense MLPs, and the *expert* one
//! (the same order string with CP = 1, its own TP = `--expert-tensor-parallel-size`, EP
//! and an expert data-parallel size `W / (ETP·EP·PP)`) for the experts of MoE layers
//! (docs/model.md#expert-groups). In both the leftmost dimension has stride 1 and PP is
//! the same, so a rank is on the same pipeline stage in both.

use crate::units::Rank;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Order of the parallel dimensions in the global rank, leftmost = stride 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RankOrder {
    /// Megatron's default `tp-cp-ep-dp-pp`: `r = tp + TP·(cp + CP·(dp + DP·pp))`.
    TpCpEpDpPp,
    /// `--use-tp-pp-dp-mapping`, `tp-cp-ep-pp-dp`: `r = tp + TP·(cp + CP·(pp + PP·dp))`.
    TpCpEpPpDp,
}

impl RankOrder {
    /// Megatron's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            RankOrder::TpCpEpDpPp => "tp-cp-ep-dp-pp",
            RankOrder::TpCpEpPpDp => "tp-cp-ep-pp-dp",
        }
    }
}

/// Coordinates of a rank along each dense parallel dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Coords {
    /// Tensor-parallel index.
    pub tp: u32,
    /// Context-parallel index.
    pub cp: u32,
    /// Data-parallel index.
    pub dp: u32,
    /// Pipeline stage.
    pub pp: u32,
}

/// Coordinates of a rank in the expert rank generator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpertCoords {
    /// Expert tensor-parallel index.
    pub etp: u32,
    /// Expert-parallel index (which slice of the experts the rank holds).
    pub ep: u32,
    /// Expert data-parallel index.
    pub edp: u32,
    /// Pipeline stage (the same as the dense one).
    pub pp: u32,
}

/// Sizes of the expert layout: EP and expert TP (the expert DP follows from the world).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpertSizes {
    /// Expert-parallel size.
    pub ep: u32,
    /// Expert tensor-parallel size.
    pub etp: u32,
}

/// All groups of one job. Every list is sorted ascending and groups are listed in order of
/// their lowest rank, like Megatron builds them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Groups {
    /// Rank order.
    pub order: RankOrder,
    /// TP size.
    pub tp: u32,
    /// CP size.
    pub cp: u32,
    /// DP size.
    pub dp: u32,
    /// PP size.
    pub pp: u32,
    /// EP size (1 for dense models).
    pub ep: u32,
    /// Expert TP size (the dense TP for dense models).
    pub etp: u32,
    /// Expert DP size `W / (ETP·EP·PP)`.
    pub edp: u32,
    /// Tensor-parallel groups.
    pub tp_groups: Vec<Vec<Rank>>,
    /// Context-parallel groups (fixed tp, dp, pp), in CP-rank order: ring attention
    /// passes K/V from each member to the next.
    pub cp_groups: Vec<Vec<Rank>>,
    /// Data-parallel groups (fixed tp, cp, pp).
    pub dp_groups: Vec<Vec<Rank>>,
    /// Groups dense gradients are reduced over: data × context parallel (fixed tp, pp);
    /// equal to `dp_groups` when CP = 1.
    pub dp_cp_groups: Vec<Vec<Rank>>,
    /// Pipeline groups (fixed tp, cp, dp), in stage order.
    pub pp_groups: Vec<Vec<Rank>>,
    /// Embedding groups: first and last rank of each pipeline group (one rank when PP = 1).
    pub emb_groups: Vec<Vec<Rank>>,
    /// Expert-parallel groups (expert generator, fixed etp, edp, pp): MoE all-to-alls.
    pub ep_groups: Vec<Vec<Rank>>,
    /// Expert tensor-parallel groups (fixed ep, edp, pp).
    pub etp_groups: Vec<Vec<Rank>>,
    /// Expert TP × EP groups (fixed edp, pp): the all-gather dispatcher's domain.
    pub etp_ep_groups: Vec<Vec<Rank>>,
    /// Expert data-parallel groups (fixed etp, ep, pp): expert gradients are reduced here.
    pub edp_groups: Vec<Vec<Rank>>,
}

/// The groups of ranks `0..world` that share `key(rank)`, each sorted, listed by lowest
/// rank (a BTreeMap keeps the order deterministic).
fn group_by<K: Ord>(world: u32, key: impl Fn(Rank) -> K) -> Vec<Vec<Rank>> {
    let mut m: BTreeMap<K, Vec<Rank>> = BTreeMap::new();
    for r in 0..world {
        m.entry(key(Rank(r))).or_default().push(Rank(r));
    }
    let mut v: Vec<Vec<Rank>> = m.into_values().collect();
    v.sort_by_key(|x| x[0]);
    v
}

impl Groups {
    /// Every group of a dense job (EP = 1, expert TP = TP) of sizes `tp, cp, dp, pp`.
    pub fn new(tp: u32, cp: u32, dp: u32, pp: u32, order: RankOrder) -> Self {
        Self::with_experts(tp, cp, dp, pp, order, ExpertSizes { ep: 1, etp: tp })
    }

    /// Every group, the expert ones from Megatron's expert rank generator with `experts`
    /// (its expert DP is `W / (ETP·EP·PP)`; the caller checks that it divides).
    pub fn with_experts(
        tp: u32,
        cp: u32,
        dp: u32,
        pp: u32,
        order: RankOrder,
        experts: ExpertSizes,
    ) -> Self {
        let world = tp * cp * dp * pp;
        let (ep, etp) = (experts.ep.max(1), experts.etp.max(1));
        let edp = (world / (ep * etp * pp)).max(1);
        let mut g = Groups {
            order,
            tp,
            cp,
            dp,
            pp,
            ep,
            etp,
            edp,
            tp_groups: vec![],
            cp_groups: vec![],
            dp_groups: vec![],
            dp_cp_groups: vec![],
            pp_groups: vec![],
            emb_groups: vec![],
            ep_groups: vec![],
            etp_groups: vec![],
            etp_ep_groups: vec![],
            edp_groups: vec![],
        };
        let c = |r: Rank| g.coords(r);
        let e = |r: Rank| g.expert_coords(r);
        let tp_groups = group_by(world, |r| (c(r).cp, c(r).dp, c(r).pp));
        let cp_groups = group_by(world, |r| (c(r).tp, c(r).dp, c(r).pp));
        let dp_groups = group_by(world, |r| (c(r).tp, c(r).cp, c(r).pp));
        let dp_cp_groups = group_by(world, |r| (c(r).tp, c(r).pp));
        let mut pp_groups = group_by(world, |r| (c(r).tp, c(r).cp, c(r).dp));
        for grp in &mut pp_groups {
            grp.sort_by_key(|r| c(*r).pp);
        }
        let ep_groups = group_by(world, |r| (e(r).etp, e(r).edp, e(r).pp));
        let etp_groups = group_by(world, |r| (e(r).ep, e(r).edp, e(r).pp));
        let etp_ep_groups = group_by(world, |r| (e(r).edp, e(r).pp));
        let edp_groups = group_by(world, |r| (e(r).etp, e(r).ep, e(r).pp));
        g.emb_groups = pp_groups
            .iter()
            .map(|p| {
                let mut e = vec![p[0], *p.last().expect("non-empty")];
                e.dedup();
                e
            })
            .collect();
        g.tp_groups = tp_groups;
        g.cp_groups = cp_groups;
        g.dp_groups = dp_groups;
        g.dp_cp_groups = dp_cp_groups;
        g.pp_groups = pp_groups;
        g.ep_groups = ep_groups;
        g.etp_groups = etp_groups;
        g.etp_ep_groups = etp_ep_groups;
        g.edp_groups = edp_groups;
        g
    }

    /// The first group of `kind` on pipeline stage `stage` (every group of a kind on one
    /// stage is alike up to position), if any.
    pub fn first_of(&self, kind: super::GroupKind, stage: u32) -> Option<&[Rank]> {
        use super::GroupKind::*;
        let (list, expert) = match kind {
            Tp => (&self.tp_groups, false),
            Cp => (&self.cp_groups, false),
            Ep => (&self.ep_groups, true),
            ExpertTp => (&self.etp_groups, true),
            ExpertTpEp => (&self.etp_ep_groups, true),
        };
        list.iter()
            .find(|g| {
                let pp = if expert {
                    self.expert_coords(g[0]).pp
                } else {
                    self.coords(g[0]).pp
                };
                pp == stage
            })
            .map(Vec::as_slice)
    }

    /// World size.
    pub fn world(&self) -> u32 {
        self.tp * self.cp * self.dp * self.pp
    }

    /// Coordinates of a rank.
    pub fn coords(&self, r: Rank) -> Coords {
        let mut x = r.0;
        let tp = x % self.tp;
        x /= self.tp;
        let cp = x % self.cp;
        x /= self.cp;
        match self.order {
            RankOrder::TpCpEpDpPp => Coords {
                tp,
                cp,
                dp: x % self.dp,
                pp: x / self.dp,
            },
            RankOrder::TpCpEpPpDp => Coords {
                tp,
                cp,
                dp: x / self.pp,
                pp: x % self.pp,
            },
        }
    }

    /// Coordinates of a rank in the expert generator: the same order string with CP
    /// dropped, `r = etp + ETP·(ep + EP·(edp + EDP·pp))` by default and
    /// `r = etp + ETP·(ep + EP·(pp + PP·edp))` with `--use-tp-pp-dp-mapping`.
    pub fn expert_coords(&self, r: Rank) -> ExpertCoords {
        let mut x = r.0;
        let etp = x % self.etp;
        x /= self.etp;
        let ep = x % self.ep;
        x /= self.ep;
        match self.order {
            RankOrder::TpCpEpDpPp => ExpertCoords {
                etp,
                ep,
                edp: x % self.edp,
                pp: x / self.edp,
            },
            RankOrder::TpCpEpPpDp => ExpertCoords {
                etp,
                ep,
                edp: x / self.pp,
                pp: x % self.pp,
            },
        }
    }

    /// The rank at given coordinates.
    pub fn rank(&self, c: Coords) -> Rank {
        let inner = c.tp + self.tp * c.cp;
        let tc = self.tp * self.cp;
        Rank(match self.order {
            RankOrder::TpCpEpDpPp => inner + tc * (c.dp + self.dp * c.pp),
            RankOrder::TpCpEpPpDp => inner + tc * (c.pp + self.pp * c.dp),
        })
    }
}
