//! The one shortest-path service over a topology's graph: breadth-first search by hop
//! count. The routing tables (distances to an attachment group, switch layers, distances
//! to a switch or to any node) and Yen's k shortest paths on Jellyfish all call it; each
//! caller says which nodes it searches (dense switch indices, or node ids) and which
//! neighbours a node has, in the order ties are to be broken.

/// Hop distance of a node the search did not reach.
pub const FAR: u16 = u16::MAX;

/// Breadth-first search over nodes `0..n` from `sources` (each at distance `start`):
/// `next(u)` lists the neighbours of `u` the search may enter, in order, and
/// `reached(w, u)` is told when `w` is first reached from `u` (a source is not), returning
/// `true` to stop there. Returns every node's hop distance ([`FAR`] if unreached).
pub fn search<I: IntoIterator<Item = u32>>(
    n: usize,
    sources: impl IntoIterator<Item = u32>,
    start: u16,
    mut next: impl FnMut(u32) -> I,
    mut reached: impl FnMut(u32, u32) -> bool,
) -> Vec<u16> {
    let mut dist = vec![FAR; n];
    let mut queue: Vec<u32> = Vec::new();
    for s in sources {
        dist[s as usize] = start;
        queue.push(s);
    }
    let mut head = 0;
    while head < queue.len() {
        let u = queue[head];
        head += 1;
        let du = dist[u as usize];
        for w in next(u) {
            if dist[w as usize] == FAR {
                dist[w as usize] = du.saturating_add(1);
                queue.push(w);
                if reached(w, u) {
                    return dist;
                }
            }
        }
    }
    dist
}

/// Hop distances over nodes `0..n` from `sources` (each at `start`); see [`search`].
pub fn hops<I: IntoIterator<Item = u32>>(
    n: usize,
    sources: impl IntoIterator<Item = u32>,
    start: u16,
    next: impl FnMut(u32) -> I,
) -> Vec<u16> {
    search(n, sources, start, next, |_, _| false)
}

/// A shortest path from `a` to `b` over nodes `0..n` (both ends included), `None` if `b`
/// is unreachable. Each node keeps the first neighbour it was reached from, so with
/// neighbours listed in ascending order the path is the lowest node sequence among the
/// shortest.
pub fn path<I: IntoIterator<Item = u32>>(
    n: usize,
    a: u32,
    b: u32,
    next: impl FnMut(u32) -> I,
) -> Option<Vec<u32>> {
    if a == b {
        return Some(vec![a]);
    }
    let mut prev = vec![u32::MAX; n];
    let dist = search(n, [a], 0, next, |w, u| {
        prev[w as usize] = u;
        w == b
    });
    if dist[b as usize] == FAR {
        return None;
    }
    let mut p = vec![b];
    let mut x = b;
    while x != a {
        x = prev[x as usize];
        p.push(x);
    }
    p.reverse();
    Some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 6-cycle 0-1-2-3-4-5-0 plus the chord 1-4, written out by hand.
    fn adj(u: u32) -> Vec<u32> {
        match u {
            0 => vec![1, 5],
            1 => vec![0, 2, 4],
            2 => vec![1, 3],
            3 => vec![2, 4],
            4 => vec![1, 3, 5],
            5 => vec![0, 4],
            _ => vec![],
        }
    }

    #[test]
    fn hop_counts_and_the_lowest_shortest_path_match_the_hand_derived_ones() {
        assert_eq!(hops(6, [0], 0, adj), vec![0, 1, 2, 3, 2, 1]);
        // two sources at distance 1, as the routing tables seed them
        assert_eq!(hops(6, [0, 3], 1, adj), vec![1, 2, 2, 1, 2, 2]);
        // 0→3: 0-1-2-3, 0-1-4-3 and 0-5-4-3 are all 3 hops; the lowest sequence wins
        assert_eq!(path(6, 0, 3, adj), Some(vec![0, 1, 2, 3]));
        assert_eq!(path(6, 2, 2, adj), Some(vec![2]));
        // a node the neighbour rule never enters is unreachable
        let no_2_or_4 = |u: u32| adj(u).into_iter().filter(|&w| w != 2 && w != 4);
        assert_eq!(path(6, 0, 3, no_2_or_4), None);
        assert_eq!(hops(6, [0], 0, no_2_or_4)[3], FAR);
    }
}
