//! DCell's arithmetic (Guo et al., SIGCOMM'08), shared by its builder
//! ([`super::families`]) and the router that walks it ([`super::routing`]).

use super::build::MAX_HOSTS;

/// Servers of DCell_l for l = 0..=k: `t_0 = n`, `t_l = t_(l−1)·(t_(l−1) + 1)`; `None` on
/// overflow of the host cap.
pub(super) fn dcell_sizes(n: u64, k: u64) -> Option<Vec<u64>> {
    let mut t = vec![n];
    for _ in 0..k {
        let p = *t.last()?;
        let next = p.checked_mul(p + 1).filter(|&x| x <= MAX_HOSTS)?;
        t.push(next);
    }
    Some(t)
}

/// The servers joining copies `i < j` (of `sub` servers each) of the DCell at `offset`:
/// copy i's server `j − 1` and copy j's server `i`.
pub(super) fn dcell_link(offset: u64, sub: u64, i: u64, j: u64) -> (u64, u64) {
    (offset + i * sub + (j - 1), offset + j * sub + i)
}
