//! Integers and keywords written straight into a byte buffer, for the formats whose rows
//! number in the millions (trace CSV, `fct.csv`, `fct.txt`): what `std`'s formatting
//! writes, byte for byte, at a fraction of its cost (no `fmt::Write` machinery per field).

/// Bytes a field may take, separator included: 20 digits (`u64::MAX`) or an 8-byte
/// keyword slot ([`put_word`] stores 8 bytes whatever the word's length), plus the comma.
pub(crate) const FIELD_MAX: usize = 21;

/// `00` to `99`: integers are written two digits at a time.
const PAIRS: &[u8; 200] = b"00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899";

/// Write `v` in decimal at `b[at..]` (which has [`FIELD_MAX`] bytes of room: up to 20
/// bytes are stored, the digits and scratch after them); the position after the digits.
#[inline(always)]
pub(crate) fn put_u64(b: &mut [u8], at: usize, v: u64) -> usize {
    const E8: u64 = 100_000_000;
    // Most fields are small (steps, layers, stages, group sizes, channels).
    if v < 10 {
        b[at] = b'0' + v as u8;
        return at + 1;
    }
    if v < 100 {
        let d = v as usize * 2;
        b[at] = PAIRS[d];
        b[at + 1] = PAIRS[d + 1];
        return at + 2;
    }
    if v < E8 {
        return put_upto8(b, at, v);
    }
    if v < E8 * E8 {
        let p = put_upto8(b, at, v / E8);
        put8(b, p, v % E8);
        return p + 8;
    }
    let p = put_upto8(b, at, v / (E8 * E8));
    let rest = v % (E8 * E8);
    put8(b, p, rest / E8);
    put8(b, p + 8, rest % E8);
    p + 16
}

/// The 8 decimal digits of `v` < 10^8, leading zeros included, as ASCII in a `u64` whose
/// lowest byte is the first digit. All four pairs of digits are split at once (SWAR): the
/// two 4-digit halves sit in 32-bit lanes, are divided by 100 with a multiply-shift
/// (x·10486 >> 20 = x/100 for x < 10^4), then the four 2-digit values in 16-bit lanes by
/// 10 (x·103 >> 10 = x/10 for x < 100).
#[inline(always)]
fn eight_digits(v: u64) -> u64 {
    let halves = (v / 10_000) | ((v % 10_000) << 32);
    let hundreds_hi = ((halves * 10_486) >> 20) & ((0x7f << 32) | 0x7f);
    let hundreds_lo = halves - 100 * hundreds_hi;
    let pairs = (hundreds_lo << 16) + hundreds_hi;
    let tens = ((pairs * 103) >> 10) & ((0xf << 48) | (0xf << 32) | (0xf << 16) | 0xf);
    let digits = tens + ((pairs - 10 * tens) << 8);
    digits + 0x3030_3030_3030_3030
}

/// Write the 8 digits of `v` < 10^8 with leading zeros (one 8-byte store).
#[inline(always)]
fn put8(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&eight_digits(v).to_le_bytes());
}

/// Write 1 ≤ `v` < 10^8 without leading zeros (one 8-byte store: the digits, then
/// scratch); the position after the digits.
#[inline(always)]
fn put_upto8(b: &mut [u8], at: usize, v: u64) -> usize {
    let n = v.checked_ilog10().map_or(1, |l| l as usize + 1);
    let w = eight_digits(v) >> (8 * (8 - n));
    b[at..at + 8].copy_from_slice(&w.to_le_bytes());
    at + n
}

/// Write a keyword of at most 8 bytes as one fixed 8-byte store (the bytes past it are
/// overwritten by what follows or cut off with the chunk); longer words byte by byte.
#[inline(always)]
pub(crate) fn put_word(b: &mut [u8], at: usize, w: &str) -> usize {
    let w = w.as_bytes();
    let n = w.len();
    if n <= 8 {
        let mut x = [0u8; 8];
        for (i, s) in x.iter_mut().enumerate() {
            if i < n {
                *s = w[i];
            }
        }
        b[at..at + 8].copy_from_slice(&x);
    } else {
        b[at..at + n].copy_from_slice(w);
    }
    at + n
}

/// Write `v` as lowercase hexadecimal, at least 8 digits with leading zeros (what
/// `{:08x}` writes), at `b[at..]` (which has 16 bytes of room); the position after it.
#[inline]
pub(crate) fn put_hex8(b: &mut [u8], at: usize, v: u64) -> usize {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let n = (v.checked_ilog2().unwrap_or(0) as usize / 4 + 1).max(8);
    for i in 0..n {
        b[at + i] = HEX[((v >> (4 * (n - 1 - i))) & 0xf) as usize];
    }
    at + n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_written_as_std_formats_them() {
        let mut vals: Vec<u64> = vec![0, u64::MAX, u64::MAX - 1];
        for k in 0..20 {
            let p = 10u64.pow(k);
            vals.extend([
                p - 1,
                p,
                p + 1,
                p.wrapping_mul(2) - 1,
                p.wrapping_mul(5) + 3,
            ]);
            vals.push(p.wrapping_mul(9));
        }
        // a spread over every magnitude (xorshift, fixed seed)
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for i in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            vals.push(x >> (i % 64));
        }
        let mut b = vec![0xaau8; 64];
        for v in vals {
            let end = put_u64(&mut b, 3, v);
            assert_eq!(std::str::from_utf8(&b[3..end]).unwrap(), v.to_string());
            assert!(end + 1 - 3 <= FIELD_MAX + 1);
        }
    }

    #[test]
    fn hex_is_written_as_std_formats_it_with_eight_digits_at_least() {
        let mut b = vec![0u8; 32];
        for v in [0u64, 1, 0xb00_0001, 0xffff_ffff, 0x1_0000_0000, u64::MAX] {
            let end = put_hex8(&mut b, 2, v);
            assert_eq!(std::str::from_utf8(&b[2..end]).unwrap(), format!("{v:08x}"));
        }
    }
}
