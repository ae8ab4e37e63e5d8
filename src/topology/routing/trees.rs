//! INA aggregation trees on general graphs (docs/plan.md#candidate-trees-on-general-graphs):
//! the fabrics where no switch layer sits above a group (Jellyfish, Dragonfly, torus,
//! BCube, DCell), so the Clos rule — the lowest common layer — has no answer.
//!
//! **Candidate roots.** Every aggregating switch that every member reaches, ranked by the
//! members' total hop distance to it, then their largest, then id; the best
//! [`MAX_ROOTS`] are kept (the 1-median region of the group: the roots a tree of least
//! link use sits under). Distances come from one breadth-first search per member.
//!
//! **Two trees per root.**
//! - *Shortest-path tree*: each member (ascending id) walks the path the back-ends route
//!   from it to the root; every aggregating switch on the way becomes a tree node whose
//!   parent is the next aggregating switch on that walk, and a walk that reaches a node
//!   already in the tree joins there.
//! - *Steiner tree* (Takahashi–Matsuyama's shortest-path heuristic): starting from the
//!   root alone, repeatedly the member nearest to any tree node (ties: lower id) joins by
//!   a shortest path to that node, the aggregating switches on the way joining the tree.
//!   Members close to each other share a branch even when their paths to the root would
//!   not, so the tree crosses fewer links.
//!
//! Each edge (child, parent) is routed as both back-ends route an INA edge,
//! [`Routing::connection_path`]`(child, parent)`, and that is the path the edge records.
//! At most `2 × MAX_ROOTS` candidates per group; identical trees are listed once.

use super::{ecmp_choice, pair_key, AggEdge, AggTree, Routing, FAR};
use crate::topology::{NodeKind, TopologyError};
use crate::units::NodeId;
use std::collections::{BTreeMap, BTreeSet};

/// Candidate roots kept per group on a general graph.
pub const MAX_ROOTS: usize = 8;

/// How a candidate tree was built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TreeShape {
    /// Every aggregating switch on the members' routed paths to the root (on a Clos: the
    /// tree under the lowest common layer).
    ShortestPath,
    /// Members joined one by one to the nearest tree node (general graphs only).
    Steiner,
}

impl Routing {
    /// The candidate aggregation trees of `members` over the switches `can_aggregate`
    /// allows: on a Clos one per candidate root ([`Routing::aggregation_candidates`],
    /// the tree under it); on a general graph a shortest-path and a Steiner tree under
    /// each of the best [`MAX_ROOTS`] roots, duplicates removed. Errors as
    /// [`Routing::aggregation_tree`].
    pub fn candidate_trees(
        &self,
        members: &[NodeId],
        can_aggregate: &dyn Fn(NodeId) -> bool,
        key: u64,
    ) -> Result<Vec<(TreeShape, AggTree)>, TopologyError> {
        let roots = self.aggregation_candidates(members, can_aggregate)?;
        let mut out: Vec<(TreeShape, AggTree)> = Vec::new();
        for root in roots {
            let spt = self.aggregation_tree_at(members, can_aggregate, root, key)?;
            out.push((TreeShape::ShortestPath, spt));
            if self.general.is_some() {
                let st = self.steiner_tree_at(members, can_aggregate, root, key)?;
                if !out.iter().any(|(_, t)| *t == st) {
                    out.push((TreeShape::Steiner, st));
                }
            }
        }
        Ok(out)
    }

    /// Links a tree occupies (each edge's routed path, summed) and the longest chain of
    /// hops from a member to the root: the price [`Routing::aggregation_tree`] ranks
    /// candidates by on a general graph.
    pub fn tree_cost(&self, t: &AggTree) -> (usize, usize) {
        let links = t.edges.iter().map(|e| e.path.len()).sum();
        let mut up: BTreeMap<NodeId, (NodeId, usize)> = BTreeMap::new();
        for e in &t.edges {
            up.insert(e.child, (e.parent, e.path.len()));
        }
        let depth = |mut v: NodeId| {
            let mut d = 0;
            while let Some(&(p, l)) = up.get(&v) {
                d += l;
                v = p;
            }
            d
        };
        let deepest = t.edges.iter().map(|e| depth(e.child)).max().unwrap_or(0);
        (links, deepest)
    }

    /// General graphs: the cheapest candidate tree (fewest links, then the shortest
    /// deepest chain), ties spread by `ecmp_choice(seed, key, lowest member, ties)`.
    pub(super) fn cheapest_tree(
        &self,
        members: &[NodeId],
        can_aggregate: &dyn Fn(NodeId) -> bool,
        key: u64,
    ) -> Result<AggTree, TopologyError> {
        let mut c = self.candidate_trees(members, can_aggregate, key)?;
        let costs: Vec<(usize, usize)> = c.iter().map(|(_, t)| self.tree_cost(t)).collect();
        let best = *costs.iter().min().expect("candidates are never empty");
        let ties: Vec<usize> = (0..c.len()).filter(|&i| costs[i] == best).collect();
        let first = *members.iter().min().expect("members checked");
        let pick = ties[ecmp_choice(self.seed, key, first, ties.len())];
        Ok(c.swap_remove(pick).1)
    }

    /// General graphs: the aggregating switches every member reaches, best
    /// [`MAX_ROOTS`] by (total distance, largest distance, id).
    pub(super) fn general_candidates(
        &self,
        ms: &[NodeId],
        can_aggregate: &dyn Fn(NodeId) -> bool,
    ) -> Vec<NodeId> {
        let g = self.general.as_ref().expect("general routing");
        let n = self.kinds.len();
        let mut total = vec![0u64; n];
        let mut far = vec![0u16; n];
        for &m in ms {
            let d = g.dist_to_node(self, m);
            for v in 0..n {
                total[v] = total[v].saturating_add(d[v] as u64);
                far[v] = far[v].max(d[v]);
            }
        }
        let mut ranked: Vec<(u64, u16, NodeId)> = (0..n as u32)
            .map(NodeId)
            .filter(|v| self.kinds[v.idx()] == NodeKind::Switch && can_aggregate(*v))
            .filter(|v| far[v.idx()] != FAR)
            .map(|v| (total[v.idx()], far[v.idx()], v))
            .collect();
        ranked.sort_unstable();
        ranked.truncate(MAX_ROOTS);
        ranked.into_iter().map(|(_, _, v)| v).collect()
    }

    /// General graphs: the shortest-path tree of `ms` under `root`.
    pub(super) fn general_tree_at(
        &self,
        ms: &[NodeId],
        can_aggregate: &dyn Fn(NodeId) -> bool,
        root: NodeId,
    ) -> Result<AggTree, TopologyError> {
        let mut parent: BTreeMap<NodeId, NodeId> = BTreeMap::new();
        let mut in_tree = BTreeSet::from([root]);
        for &m in ms {
            self.hang(m, root, can_aggregate, &mut parent, &mut in_tree)?;
        }
        self.tree_of(root, parent)
    }

    /// Hang `m` on the tree along the path the back-ends route from it to `to` (a tree
    /// node): every aggregating switch on the way gets the previous one (or `m`) as a
    /// child, until the walk reaches a node already in the tree.
    fn hang(
        &self,
        m: NodeId,
        to: NodeId,
        can_aggregate: &dyn Fn(NodeId) -> bool,
        parent: &mut BTreeMap<NodeId, NodeId>,
        in_tree: &mut BTreeSet<NodeId>,
    ) -> Result<(), TopologyError> {
        let agg = |v: NodeId| self.kinds[v.idx()] == NodeKind::Switch && can_aggregate(v);
        let walk = self.path(m, to, pair_key(m, to))?;
        let mut child = m;
        for &c in &walk {
            let v = self.channel_ends(c).1;
            if !agg(v) {
                continue;
            }
            parent.insert(child, v);
            if !in_tree.insert(v) {
                break;
            }
            child = v;
        }
        Ok(())
    }

    /// A Steiner-style tree of `members` under `root` (module docs).
    pub fn steiner_tree_at(
        &self,
        members: &[NodeId],
        can_aggregate: &dyn Fn(NodeId) -> bool,
        root: NodeId,
        key: u64,
    ) -> Result<AggTree, TopologyError> {
        let Some(g) = self.general.as_ref() else {
            return self.aggregation_tree_at(members, can_aggregate, root, key);
        };
        let (ms, _) = self.members_and_reps(members)?;
        let agg = |v: NodeId| self.kinds[v.idx()] == NodeKind::Switch && can_aggregate(v);
        if !agg(root) {
            return Err(TopologyError::NoAggregator {
                members: ms.len(),
                first: ms[0],
            });
        }
        let mut tree = BTreeSet::from([root]);
        let mut parent: BTreeMap<NodeId, NodeId> = BTreeMap::new();
        let mut left: Vec<NodeId> = ms.clone();
        while !left.is_empty() {
            // the member nearest to the tree, and its nearest tree node
            let mut best: Option<(u16, NodeId, NodeId)> = None;
            for &m in &left {
                let d = g.dist_to_node(self, m);
                for &t in &tree {
                    let cand = (d[t.idx()], m, t);
                    if cand.0 != FAR && best.is_none_or(|b| cand < b) {
                        best = Some(cand);
                    }
                }
            }
            let Some((_, m, t)) = best else {
                return Err(TopologyError::Disconnected {
                    from: left[0],
                    to: root,
                });
            };
            left.retain(|&x| x != m);
            self.hang(m, t, can_aggregate, &mut parent, &mut tree)?;
        }
        self.tree_of(root, parent)
    }

    /// The tree of a parent map: every edge routed as the back-ends route it, bottom-up
    /// (deeper children first), fan-ins counted.
    fn tree_of(
        &self,
        root: NodeId,
        parent: BTreeMap<NodeId, NodeId>,
    ) -> Result<AggTree, TopologyError> {
        let depth = |mut v: NodeId| {
            let mut d = 0usize;
            while let Some(&p) = parent.get(&v) {
                d += 1;
                v = p;
                if d > parent.len() {
                    break; // a cycle cannot arise (each node gets one parent, toward the root)
                }
            }
            d
        };
        let mut fanin: BTreeMap<NodeId, u32> = BTreeMap::new();
        for p in parent.values() {
            *fanin.entry(*p).or_default() += 1;
        }
        let mut edges = Vec::with_capacity(parent.len());
        for (&child, &p) in &parent {
            edges.push(AggEdge {
                child,
                parent: p,
                fanin_at_parent: fanin[&p],
                path: self.connection_path(child, p)?,
            });
        }
        edges.sort_by_key(|e| (std::cmp::Reverse(depth(e.child)), e.child));
        Ok(AggTree { root, edges })
    }
}
