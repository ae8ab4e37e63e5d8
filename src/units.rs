//! Units and identifiers as types.
//!
//! Every quantity that crosses a module boundary carries its unit in its type, so a
//! byte count can never be added to a duration by accident and every conversion
//! (bytes on a link of some rate → time on the wire) is one named, tested function.
//! All are `u64`-backed: nanoseconds cover 584 years, bytes cover 16 EiB.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::{Add, AddAssign, Sub};

macro_rules! unit_newtype {
    ($(#[$m:meta])* $name:ident, $suffix:literal) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub u64);

        impl $name {
            /// Zero of this unit.
            pub const ZERO: Self = Self(0);
            /// The raw value (explicit, so every escape from the type is visible).
            #[inline]
            pub const fn get(self) -> u64 {
                self.0
            }
            /// Subtraction that stops at zero instead of wrapping.
            #[inline]
            pub fn saturating_sub(self, other: Self) -> Self {
                Self(self.0.saturating_sub(other.0))
            }
        }

        impl Add for $name {
            type Output = Self;
            #[inline]
            fn add(self, o: Self) -> Self {
                Self(self.0 + o.0)
            }
        }
        impl AddAssign for $name {
            #[inline]
            fn add_assign(&mut self, o: Self) {
                self.0 += o.0;
            }
        }
        impl Sub for $name {
            type Output = Self;
            #[inline]
            fn sub(self, o: Self) -> Self {
                Self(self.0 - o.0)
            }
        }
        impl std::iter::Sum for $name {
            fn sum<I: Iterator<Item = Self>>(it: I) -> Self {
                Self(it.map(|x| x.0).sum())
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}{}", self.0, $suffix)
            }
        }
    };
}

macro_rules! id_newtype {
    ($(#[$m:meta])* $name:ident, $inner:ty) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub $inner);

        impl $name {
            /// The id as an index into a dense table.
            #[inline]
            pub const fn idx(self) -> usize {
                self.0 as usize
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

unit_newtype!(
    /// A number of bytes.
    Bytes, " B"
);
unit_newtype!(
    /// A duration or a point in simulated time, in nanoseconds.
    Nanos, " ns"
);
unit_newtype!(
    /// A link or device rate in bits per second.
    BitsPerSec, " bps"
);
unit_newtype!(
    /// Floating-point operations.
    Flops, " FLOP"
);

id_newtype!(
    /// A node of the topology (host/GPU, switch or NVSwitch), numbered as in HPCC `topology.txt`.
    NodeId, u32
);
id_newtype!(
    /// A record of a flow trace.
    FlowId, u64
);
id_newtype!(
    /// A link of the topology (index into `Topology::links`).
    LinkId, u32
);
id_newtype!(
    /// A global Megatron rank (= GPU index in rank order).
    Rank, u32
);

impl Bytes {
    /// Bytes in bits.
    #[inline]
    pub const fn bits(self) -> u64 {
        self.0 * 8
    }
    /// `n` kibibytes.
    pub const fn kib(n: u64) -> Self {
        Self(n << 10)
    }
    /// `n` mebibytes.
    pub const fn mib(n: u64) -> Self {
        Self(n << 20)
    }
    /// Bytes on the wire when `self` is cut into packets of `payload` bytes and each
    /// packet carries `header` bytes of headers (docs/model.md#wire-bytes: `size + ceil(size/payload)·48`).
    pub fn with_headers(self, payload: Bytes, header: Bytes) -> Bytes {
        if self.0 == 0 || payload.0 == 0 {
            return self;
        }
        Bytes(self.0 + self.0.div_ceil(payload.0) * header.0)
    }
}

impl Bytes {
    /// Parse a size as nccl-tests takes them: a whole number with an optional binary
    /// suffix — `B`, `K`/`KiB`, `M`/`MiB`, `G`/`GiB`, `T`/`TiB` (powers of 1024;
    /// case-insensitive). Decimal suffixes (`KB`, `MB`) are refused rather than guessed.
    ///
    /// ```
    /// use ina3d::units::Bytes;
    /// assert_eq!(Bytes::parse_size("1MiB"), Ok(Bytes(1_048_576)));
    /// assert_eq!(Bytes::parse_size("64k"), Ok(Bytes(65_536)));
    /// assert!(Bytes::parse_size("1MB").is_err()); // decimal or binary? refused
    /// assert!(Bytes::parse_size("16777216TiB").is_err()); // 2^64 bytes do not fit
    /// ```
    pub fn parse_size(s: &str) -> Result<Bytes, String> {
        let t = s.trim();
        let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (num, suffix) = t.split_at(split);
        if num.is_empty() {
            return Err(format!(
                "size `{s}` does not start with a whole number of bytes (e.g. 64KiB, 1MiB, 1048576)"
            ));
        }
        let shift = match suffix.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 0,
            "k" | "kib" => 10,
            "m" | "mib" => 20,
            "g" | "gib" => 30,
            "t" | "tib" => 40,
            other => {
                return Err(format!(
                    "size `{s}`: unknown unit `{other}` (expected B, KiB, MiB, GiB or TiB; K, M, G, T mean the same)"
                ))
            }
        };
        let n: u64 = num
            .parse()
            .map_err(|_| format!("size `{s}`: `{num}` is too large"))?;
        n.checked_mul(1u64 << shift)
            .map(Bytes)
            .ok_or_else(|| format!("size `{s}` does not fit in 64 bits"))
    }
}

impl Nanos {
    /// From (possibly fractional) seconds, rounded to the nearest nanosecond.
    pub fn from_secs_f64(s: f64) -> Self {
        Self((s * 1e9).round().max(0.0) as u64)
    }
    /// From milliseconds, rounded to the nearest nanosecond.
    pub fn from_millis_f64(ms: f64) -> Self {
        Self((ms * 1e6).round().max(0.0) as u64)
    }
    /// From microseconds.
    pub const fn from_micros(us: u64) -> Self {
        Self(us * 1_000)
    }
    /// As seconds.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    /// As milliseconds.
    pub fn as_millis_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }
}

impl BitsPerSec {
    /// `n` gigabits per second.
    pub const fn gbps(n: u64) -> Self {
        Self(n * 1_000_000_000)
    }
    /// As gigabits per second.
    pub fn as_gbps_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    /// Time to serialise `b` on a link of this rate, rounded up to whole nanoseconds
    /// (a packet is not received before its last bit). A zero rate has no finite time:
    /// callers validate rates first, so this returns `u64::MAX` rather than panicking.
    ///
    /// ```
    /// use ina3d::units::{BitsPerSec, Bytes, Nanos};
    /// // a 1,048-byte packet on a 100 Gb/s NIC: 83.84 ns, rounded up
    /// assert_eq!(BitsPerSec::gbps(100).transmit_time(Bytes(1048)), Nanos(84));
    /// assert_eq!(BitsPerSec(0).transmit_time(Bytes(1)), Nanos(u64::MAX));
    /// ```
    pub fn transmit_time(self, b: Bytes) -> Nanos {
        if self.0 == 0 {
            return Nanos(u64::MAX);
        }
        let num = b.0 as u128 * 8 * 1_000_000_000;
        Nanos(num.div_ceil(self.0 as u128).min(u64::MAX as u128) as u64)
    }
    /// Bytes a link of this rate carries in `t`, rounded down.
    pub fn bytes_in(self, t: Nanos) -> Bytes {
        Bytes((self.0 as u128 * t.0 as u128 / 8 / 1_000_000_000) as u64)
    }
    /// Rate as HPCC writes it: `100Gbps`, `400Mbps`, `2500bps`.
    pub fn to_hpcc_string(self) -> String {
        let v = self.0;
        if v.is_multiple_of(1_000_000_000) {
            format!("{}Gbps", v / 1_000_000_000)
        } else if v.is_multiple_of(1_000_000) {
            format!("{}Mbps", v / 1_000_000)
        } else if v.is_multiple_of(1_000) {
            format!("{}Kbps", v / 1_000)
        } else {
            format!("{v}bps")
        }
    }
    /// Parse `100Gbps`, `2.5Gbps`, `400Mbps`, `10Kbps`, `1000bps`, case-insensitive
    /// suffix, or a bare number of bits per second.
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim();
        let lower = s.to_ascii_lowercase();
        let (num, mult) = if let Some(n) = lower.strip_suffix("gbps") {
            (n, 1e9)
        } else if let Some(n) = lower.strip_suffix("mbps") {
            (n, 1e6)
        } else if let Some(n) = lower.strip_suffix("kbps") {
            (n, 1e3)
        } else if let Some(n) = lower.strip_suffix("bps") {
            (n, 1.0)
        } else if let Some(n) = lower.strip_suffix('g') {
            (n, 1e9)
        } else {
            (lower.as_str(), 1.0)
        };
        let v: f64 = num.trim().parse().ok()?;
        if !v.is_finite() || v < 0.0 {
            return None;
        }
        Some(Self((v * mult).round() as u64))
    }
}

/// Bytes in the largest binary unit that keeps the number at least 1 (`1.50 GiB`).
pub fn binary_size(b: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut x = b as f64;
    let mut u = 0;
    while x >= 1024.0 && u + 1 < units.len() {
        x /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{x:.2} {}", units[u])
    }
}

/// Ids or quantities for a message: `3, 7, 12` (`none` for an empty list), never a debug
/// dump such as `[NodeId(3), NodeId(7)]`.
pub fn list<T: std::fmt::Display>(items: &[T]) -> String {
    if items.is_empty() {
        return "none".into();
    }
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The link rates ina3d simulates, bits per second: 1 Mb/s to 1 Pb/s. Beyond them a time
/// computed from a rate stops meaning anything (a terabyte at 1 Mb/s takes 93 days) and a
/// crafted rate could carry it past 64 bits of nanoseconds; topology readers refuse them.
pub const LINK_RATES: std::ops::RangeInclusive<u64> = 1_000_000..=1_000_000_000_000_000;

/// The longest one-way link delay accepted: 1 s (a geostationary hop is 0.25 s). Larger
/// values are refused by the topology readers, so sums of delays stay far from overflow.
pub const MAX_LINK_DELAY: Nanos = Nanos(1_000_000_000);

/// Why `rate` is not a link rate ina3d simulates ([`LINK_RATES`]), or `None` when it is.
pub fn link_rate_problem(rate: BitsPerSec) -> Option<String> {
    (!LINK_RATES.contains(&rate.0)).then(|| {
        format!(
            "{} b/s is outside the link rates simulated ({} to {})",
            rate.0,
            BitsPerSec(*LINK_RATES.start()).to_hpcc_string(),
            BitsPerSec(*LINK_RATES.end()).to_hpcc_string()
        )
    })
}

/// Why `delay` is not a link delay ina3d simulates ([`MAX_LINK_DELAY`]), or `None`.
pub fn link_delay_problem(delay: Nanos) -> Option<String> {
    (delay > MAX_LINK_DELAY).then(|| {
        format!(
            "{} ns is longer than the longest link delay simulated ({} ns)",
            delay.0, MAX_LINK_DELAY.0
        )
    })
}

/// Parse an HPCC-style delay: `0.001ms`, `1000ns`, `1us`, `2e-6s`; a bare number is seconds.
pub fn parse_delay(s: &str) -> Option<Nanos> {
    let l = s.trim().to_ascii_lowercase();
    let (num, mult) = if let Some(n) = l.strip_suffix("ns") {
        (n, 1.0)
    } else if let Some(n) = l.strip_suffix("us") {
        (n, 1e3)
    } else if let Some(n) = l.strip_suffix("ms") {
        (n, 1e6)
    } else if let Some(n) = l.strip_suffix('s') {
        (n, 1e9)
    } else {
        (l.as_str(), 1e9)
    };
    let v: f64 = num.trim().parse().ok()?;
    if !v.is_finite() || v < 0.0 {
        return None;
    }
    Some(Nanos((v * mult).round() as u64))
}

/// Format a delay the way HPCC topology files do (`0.001ms` for whole microseconds, else ns).
pub fn format_delay(d: Nanos) -> String {
    if d.0.is_multiple_of(1000) {
        let ms = d.0 as f64 / 1e6;
        format!("{ms}ms")
    } else {
        format!("{}ns", d.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_megabyte_on_100g_takes_80_microseconds() {
        assert_eq!(
            BitsPerSec::gbps(100).transmit_time(Bytes(1_000_000)),
            Nanos(80_000)
        );
    }

    #[test]
    fn transmit_time_rounds_up_partial_nanoseconds() {
        // 1 byte at 3 bps = 2.666.. s
        assert_eq!(BitsPerSec(3).transmit_time(Bytes(1)), Nanos(2_666_666_667));
        assert_eq!(BitsPerSec(0).transmit_time(Bytes(1)), Nanos(u64::MAX));
    }

    #[test]
    fn bytes_in_inverts_transmit_time_for_whole_values() {
        let r = BitsPerSec::gbps(400);
        let t = r.transmit_time(Bytes(5_000_000));
        assert_eq!(r.bytes_in(t), Bytes(5_000_000));
    }

    #[test]
    fn header_overhead_matches_flowsim_rule() {
        // 1000-byte payload, 48 B headers: 2500 B is 3 packets
        assert_eq!(
            Bytes(2500).with_headers(Bytes(1000), Bytes(48)),
            Bytes(2500 + 3 * 48)
        );
        assert_eq!(Bytes(0).with_headers(Bytes(1000), Bytes(48)), Bytes(0));
    }

    #[test]
    fn rates_parse_and_print_like_hpcc() {
        assert_eq!(BitsPerSec::parse("100Gbps"), Some(BitsPerSec::gbps(100)));
        assert_eq!(
            BitsPerSec::parse("2.5Gbps"),
            Some(BitsPerSec(2_500_000_000))
        );
        assert_eq!(
            BitsPerSec::parse("400Mbps").unwrap().to_hpcc_string(),
            "400Mbps"
        );
        assert_eq!(BitsPerSec::gbps(25).to_hpcc_string(), "25Gbps");
        assert_eq!(BitsPerSec::parse("fast"), None);
        assert_eq!(BitsPerSec::parse("-1Gbps"), None);
    }

    #[test]
    fn delays_parse_in_every_hpcc_spelling() {
        assert_eq!(parse_delay("0.001ms"), Some(Nanos(1000)));
        assert_eq!(parse_delay("1000ns"), Some(Nanos(1000)));
        assert_eq!(parse_delay("1us"), Some(Nanos(1000)));
        assert_eq!(parse_delay("2e-6s"), Some(Nanos(2000)));
        assert_eq!(format_delay(Nanos(1000)), "0.001ms");
        assert_eq!(format_delay(Nanos(1500)), "1500ns");
        assert_eq!(
            parse_delay(&format_delay(Nanos(123_000))),
            Some(Nanos(123_000))
        );
    }

    #[test]
    fn nanos_convert_from_floating_units() {
        assert_eq!(Nanos::from_millis_f64(12936.1), Nanos(12_936_100_000));
        assert_eq!(Nanos::from_secs_f64(0.000_001), Nanos(1000));
        assert_eq!(Nanos::from_secs_f64(-1.0), Nanos(0));
    }
}
