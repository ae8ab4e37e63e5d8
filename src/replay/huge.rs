//! Transparent huge pages for the replayer's per-record and per-channel arrays.
//!
//! The event loop reads and writes these arrays (megabytes per channel array, hundreds
//! of MB per record array at cluster scale) at effectively random positions, so with 4 KiB pages nearly every access also
//! misses the TLB. Backing them with 2 MiB pages (`madvise(MADV_HUGEPAGE)`, honoured where
//! the system's THP mode is `madvise` or `always`) removes most of those misses. This is
//! advice only: it never changes contents, and where the kernel declines, nothing changes.

/// Arrays smaller than this are left alone (half a huge page).
const MIN_BYTES: usize = 1 << 20;

/// Linux's `MADV_COLLAPSE` (6.1+): back an already-written range with huge pages now.
#[cfg(target_os = "linux")]
const MADV_COLLAPSE: libc::c_int = 25;

/// Advise huge pages for the whole allocation of `v` (its capacity); `collapse` also asks
/// the kernel to move pages already written into huge pages now.
pub(super) fn advise<T>(v: &Vec<T>, collapse: bool) {
    let bytes = v.capacity() * std::mem::size_of::<T>();
    if bytes < MIN_BYTES {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        const PAGE: usize = 4096;
        let base = v.as_ptr() as usize;
        let start = (base + PAGE - 1) & !(PAGE - 1);
        let end = (base + bytes) & !(PAGE - 1);
        if end <= start {
            return;
        }
        // SAFETY: the range lies inside `v`'s own live allocation, and both advices only
        // change how the kernel backs those pages, never their contents; failures (an old
        // kernel, THP off) are ignored because the advice is optional.
        unsafe {
            let p = start as *mut libc::c_void;
            libc::madvise(p, end - start, libc::MADV_HUGEPAGE);
            if collapse {
                libc::madvise(p, end - start, MADV_COLLAPSE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = collapse;
}

/// `n` copies of `value` in an allocation advised for huge pages before it is written.
pub(super) fn filled<T: Clone>(n: usize, value: T) -> Vec<T> {
    let mut v = Vec::with_capacity(n);
    advise(&v, false);
    v.resize(n, value);
    v
}
