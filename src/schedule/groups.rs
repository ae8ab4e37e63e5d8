//! Megatron's rank → parallel-group mapping (docs/model.md#rank-layout, `parallel_state.py`).

use crate::units::Rank;
use serde::{Deserialize, Serialize};

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

/// Coordinates of a rank along each parallel dimension (EP = 1 for dense models).
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
    /// Tensor-parallel groups.
    pub tp_groups: Vec<Vec<Rank>>,
    /// Data-parallel groups (fixed tp, cp, pp).
    pub dp_groups: Vec<Vec<Rank>>,
    /// Groups gradients are reduced over: data × context parallel (fixed tp, pp); equal to
    /// `dp_groups` when CP = 1.
    pub dp_cp_groups: Vec<Vec<Rank>>,
    /// Pipeline groups (fixed tp, cp, dp), in stage order.
    pub pp_groups: Vec<Vec<Rank>>,
    /// Embedding groups: first and last rank of each pipeline group (one rank when PP = 1).
    pub emb_groups: Vec<Vec<Rank>>,
}

impl Groups {
    /// Build every group for sizes `tp, cp, dp, pp` in `order`.
    pub fn new(tp: u32, cp: u32, dp: u32, pp: u32, order: RankOrder) -> Self {
        let mut g = Groups {
            order,
            tp,
            cp,
            dp,
            pp,
            tp_groups: vec![],
            dp_groups: vec![],
            dp_cp_groups: vec![],
            pp_groups: vec![],
            emb_groups: vec![],
        };
        let world = tp * cp * dp * pp;
        let probe = g.clone();
        let collect = |f: &dyn Fn(Coords) -> bool,
                       key: &dyn Fn(Coords) -> (u32, u32, u32, u32)|
         -> Vec<Vec<Rank>> {
            // Group ranks by the coordinates that stay fixed; BTreeMap keeps a deterministic order.
            let mut m: std::collections::BTreeMap<(u32, u32, u32, u32), Vec<Rank>> =
                Default::default();
            for r in 0..world {
                let c = probe.coords(Rank(r));
                if f(c) {
                    m.entry(key(c)).or_default().push(Rank(r));
                }
            }
            let mut v: Vec<Vec<Rank>> = m.into_values().collect();
            v.sort_by_key(|x| x[0]);
            v
        };
        let all = |_: Coords| true;
        g.tp_groups = collect(&all, &|c| (c.cp, c.dp, c.pp, 0));
        g.dp_groups = collect(&all, &|c| (c.tp, c.cp, c.pp, 0));
        g.dp_cp_groups = collect(&all, &|c| (c.tp, c.pp, 0, 0));
        let mut pp_groups = collect(&all, &|c| (c.tp, c.cp, c.dp, 0));
        for grp in &mut pp_groups {
            grp.sort_by_key(|r| probe.coords(*r).pp);
        }
        g.emb_groups = pp_groups
            .iter()
            .map(|p| {
                let mut e = vec![p[0], *p.last().expect("non-empty")];
                e.dedup();
                e
            })
            .collect();
        g.pp_groups = pp_groups;
        g
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
            RankOrder::TpCpEpDpPp => {
                let dp = x % self.dp;
                Coords {
                    tp,
                    cp,
                    dp,
                    pp: x / self.dp,
                }
            }
            RankOrder::TpCpEpPpDp => {
                let pp = x % self.pp;
                Coords {
                    tp,
                    cp,
                    dp: x / self.pp,
                    pp,
                }
            }
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
