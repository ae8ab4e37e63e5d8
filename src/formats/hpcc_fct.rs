//! HPCC's flow-completion output, `fct.txt`: one line per finished flow,
//! `sip dip sport dport size start_ns fct_ns standalone_fct_ns` with IPs as 8 hex digits
//! (HPCC, SimAI: 8 fields); Parsimon's fork puts the flow id first (9 fields).
//!
//! Host IPs follow the simulators' rule `0x0b000001 + (id/256)<<16 + (id%256)<<8`, so a
//! node id is `(ip >> 8) & 0xffff`. Checked against SimAI's output
//! (`tests/fixtures/simai/fct.head40.txt`).

use super::digits::{put_hex8, put_u64};
use super::{numbered_lines, read_text};
use super::{write_atomic, FormatError, Warning};
use crate::fct::FctRow;
use crate::record::Mode;
use std::path::Path;

/// Which variant of the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// 8 fields.
    Hpcc,
    /// 9 fields, the flow id first (Parsimon's fork).
    Parsimon,
}

impl Flavor {
    /// The flavour with `n` fields (8 or 9).
    pub fn from_fields(n: usize) -> Option<Self> {
        match n {
            8 => Some(Self::Hpcc),
            9 => Some(Self::Parsimon),
            _ => None,
        }
    }
}

/// One line of `fct.txt`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FctLine {
    /// Parsimon's flow id (9-field files only).
    pub id: Option<u64>,
    /// Source node (from its IP).
    pub src: u32,
    /// Destination node.
    pub dst: u32,
    /// Source IP as written.
    pub sip: u32,
    /// Destination IP as written.
    pub dip: u32,
    /// Source port.
    pub sport: u64,
    /// Destination port.
    pub dport: u64,
    /// Payload bytes.
    pub size: u64,
    /// Start, ns.
    pub start_ns: u64,
    /// Flow completion time, ns.
    pub fct_ns: u64,
    /// Completion time alone on an idle network, ns.
    pub standalone_fct_ns: u64,
}

/// HPCC host IP of node `id`.
pub fn hpcc_ip(id: u32) -> u32 {
    0x0b00_0001 + ((id / 256) << 16) + ((id % 256) << 8)
}

/// Node id of an HPCC host IP.
pub fn ip_node(ip: u32) -> u32 {
    (ip >> 8) & 0xffff
}

/// An IP written as exactly 8 hex digits.
pub fn parse_hex_ip(s: &str) -> Option<u32> {
    if s.len() != 8 {
        return None;
    }
    u32::from_str_radix(s, 16).ok()
}

/// Write the network records (`net`, `ina`) of `rows` as `fct.txt`, atomically. `sport`
/// is `10000 + id mod 50000` (distinct for concurrent flows of one pair, as HPCC's
/// incrementing port), `dport` 100.
pub fn write<T: std::borrow::Borrow<FctRow>>(
    path: &Path,
    rows: impl IntoIterator<Item = T>,
    flavor: Flavor,
) -> Result<(), FormatError> {
    write_atomic(path, |w| {
        let mut buf = vec![0u8; CHUNK + LINE_MAX];
        let mut at = 0;
        for r in rows.into_iter() {
            let r = r.borrow();
            if !matches!(r.mode, Mode::Net | Mode::Ina) {
                continue;
            }
            at = format_line(&mut buf, at, r, flavor);
            if at >= CHUNK {
                w.write_all(&buf[..at])?;
                at = 0;
            }
        }
        w.write_all(&buf[..at])
    })
}

/// Bytes formatted before they are handed to the file.
const CHUNK: usize = 1 << 20;

/// The longest line: two IPs of up to 16 hex digits, seven numbers of up to 20 digits,
/// their separators and the newline.
const LINE_MAX: usize = 2 * 17 + 7 * 21 + 1;

/// Write `r`'s line (`[id ]sip dip sport 100 size start fct standalone`, with its
/// newline) at `b[at..]`, which has [`LINE_MAX`] bytes of room; the position after it.
fn format_line(b: &mut [u8], at: usize, r: &FctRow, flavor: Flavor) -> usize {
    let mut p = at;
    if flavor == Flavor::Parsimon {
        p = put_u64(b, p, r.flow_id);
        b[p] = b' ';
        p += 1;
    }
    for ip in [hpcc_ip(r.src), hpcc_ip(r.dst)] {
        p = put_hex8(b, p, ip as u64);
        b[p] = b' ';
        p += 1;
    }
    p = put_u64(b, p, 10000 + r.flow_id % 50000);
    b[p..p + 5].copy_from_slice(b" 100 ");
    p += 5;
    for v in [r.size_bytes, r.start_ns, r.fct_ns] {
        p = put_u64(b, p, v);
        b[p] = b' ';
        p += 1;
    }
    p = put_u64(b, p, r.standalone_fct_ns);
    b[p] = b'\n';
    p + 1
}

/// Read `fct.txt`. Blank lines are skipped; a line that is not an fct row (wrong field
/// count, an IP that is not 8 hex digits, a non-integer) is returned as a [`Warning`]
/// naming its line and the rest is still read, as simulators append free text.
pub fn read(path: &Path) -> Result<(Vec<FctLine>, Vec<Warning>), FormatError> {
    Ok(parse(path, &read_text(path)?))
}

/// [`read`] of text already in memory; `path` names it in warnings.
pub fn parse(path: &Path, text: &str) -> (Vec<FctLine>, Vec<Warning>) {
    let mut rows = Vec::new();
    let mut warnings = Vec::new();
    for (no, l) in numbered_lines(text) {
        let l = l.trim();
        if l.is_empty() {
            continue;
        }
        match line(l).and_then(|r| out_of_range(&r).map_or(Ok(r), Err)) {
            Ok(r) => rows.push(r),
            Err(why) => warnings.push(Warning::new(path, no, format!("{why}: `{l}`"))),
        }
    }
    (rows, warnings)
}

/// Why an fct row holds a value no flow of a trace can have, if it does: a port past 16
/// bits, or a size or time past the trace's record bound (2^50,
/// [`crate::formats::trace_csv::MAX_RECORD_VALUE`]), which would wrap or lose precision in
/// what is computed from it (the field named, as in `size: ...`).
pub fn out_of_range(r: &FctLine) -> Option<String> {
    let bound = crate::formats::trace_csv::MAX_RECORD_VALUE;
    [
        ("sport", r.sport, u16::MAX as u64),
        ("dport", r.dport, u16::MAX as u64),
        ("size", r.size, bound),
        ("start_ns", r.start_ns, bound),
        ("fct_ns", r.fct_ns, bound),
        ("standalone_fct_ns", r.standalone_fct_ns, bound),
    ]
    .into_iter()
    .find(|(_, v, max)| v > max)
    .map(|(f, v, max)| format!("{f}: `{v}` is beyond {max}"))
}

/// One line of `fct.txt` (trimmed, not blank), or why it is not an fct row; its values
/// are not range-checked ([`out_of_range`]).
pub fn parse_line(l: &str) -> Result<FctLine, String> {
    line(l)
}

fn line(l: &str) -> Result<FctLine, String> {
    let f: Vec<&str> = l.split_whitespace().collect();
    let (id, r) = match f.len() {
        8 => (None, &f[..]),
        9 => (
            Some(f[0].parse::<u64>().map_err(|_| "flow id: not an integer")?),
            &f[1..],
        ),
        n => return Err(format!("{n} fields; expected 8 (HPCC) or 9 (Parsimon)")),
    };
    let sip = parse_hex_ip(r[0]).ok_or("sip: not 8 hex digits")?;
    let dip = parse_hex_ip(r[1]).ok_or("dip: not 8 hex digits")?;
    const NAMES: [&str; 6] = [
        "sport",
        "dport",
        "size",
        "start_ns",
        "fct_ns",
        "standalone_fct_ns",
    ];
    let mut n = [0u64; 6];
    for (i, v) in r[2..].iter().enumerate() {
        n[i] = v
            .parse()
            .map_err(|_| format!("{}: `{v}` is not an integer", NAMES[i]))?;
    }
    if n[3].checked_add(n[4]).is_none() {
        return Err(format!(
            "fct_ns: start_ns {} + fct_ns {} overflows 64 bits of nanoseconds",
            n[3], n[4]
        ));
    }
    Ok(FctLine {
        id,
        src: ip_node(sip),
        dst: ip_node(dip),
        sip,
        dip,
        sport: n[0],
        dport: n[1],
        size: n[2],
        start_ns: n[3],
        fct_ns: n[4],
        standalone_fct_ns: n[5],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Class;

    #[test]
    fn ips_follow_the_simulator_rule_and_back() {
        assert_eq!(hpcc_ip(0), 0x0b00_0001);
        assert_eq!(hpcc_ip(1), 0x0b00_0101);
        assert_eq!(hpcc_ip(256), 0x0b01_0001);
        for id in [0, 1, 255, 256, 4095, 65535] {
            assert_eq!(ip_node(hpcc_ip(id)), id);
        }
    }

    #[test]
    fn lines_are_written_as_std_formats_them() {
        let mut b = vec![0u8; LINE_MAX + 8];
        for (id, src, v) in [
            (0u64, 0u32, 0u64),
            (123_456, 70_000, 987_654_321_000),
            (u64::MAX, u32::MAX / 300, u64::MAX),
        ] {
            let r = FctRow {
                flow_id: id,
                src,
                dst: src / 3,
                mode: Mode::Net,
                class: Class::Pp,
                size_bytes: v,
                start_ns: v / 7,
                end_ns: v,
                fct_ns: v - v / 7,
                standalone_fct_ns: v / 2,
            };
            let want = format!(
                "{:08x} {:08x} {} 100 {} {} {} {}\n",
                hpcc_ip(r.src),
                hpcc_ip(r.dst),
                10000 + r.flow_id % 50000,
                r.size_bytes,
                r.start_ns,
                r.fct_ns,
                r.standalone_fct_ns
            );
            let end = format_line(&mut b, 0, &r, Flavor::Hpcc);
            assert_eq!(std::str::from_utf8(&b[..end]).unwrap(), want);
            let end = format_line(&mut b, 0, &r, Flavor::Parsimon);
            assert_eq!(
                std::str::from_utf8(&b[..end]).unwrap(),
                format!("{id} {want}")
            );
        }
    }

    #[test]
    fn both_flavours_round_trip_network_records_only() {
        let d = tempfile::tempdir().unwrap();
        let mk = |id, mode| FctRow {
            flow_id: id,
            src: 3,
            dst: 300,
            mode,
            class: Class::Dp,
            size_bytes: 4096,
            start_ns: 10,
            end_ns: 110,
            fct_ns: 100,
            standalone_fct_ns: 90,
        };
        let rows = [mk(0, Mode::Net), mk(1, Mode::Compute), mk(2, Mode::Ina)];
        for flavor in [Flavor::Hpcc, Flavor::Parsimon] {
            let p = d.path().join("fct.txt");
            write(&p, &rows, flavor).unwrap();
            let (back, warnings) = read(&p).unwrap();
            assert!(warnings.is_empty());
            assert_eq!(back.len(), 2);
            assert_eq!((back[1].src, back[1].dst, back[1].fct_ns), (3, 300, 100));
            assert_eq!(back[1].id, (flavor == Flavor::Parsimon).then_some(2));
        }
    }

    #[test]
    fn the_text_is_hpccs_eight_fields_or_parsimons_nine() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("fct.txt");
        let row = FctRow {
            flow_id: 3,
            src: 1,
            dst: 2,
            mode: Mode::Net,
            class: Class::Tp,
            size_bytes: 1000,
            start_ns: 5,
            end_ns: 25,
            fct_ns: 20,
            standalone_fct_ns: 20,
        };
        write(&p, std::slice::from_ref(&row), Flavor::Hpcc).unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "0b000101 0b000201 10003 100 1000 5 20 20\n"
        );
        write(&p, &[row], Flavor::Parsimon).unwrap();
        assert!(std::fs::read_to_string(&p)
            .unwrap()
            .starts_with("3 0b000101 "));
    }

    #[test]
    fn a_bad_line_is_a_warning_naming_its_line_and_field() {
        let (rows, w) = parse(
            Path::new("fct.txt"),
            "0b000001 0b000101 10000 100 5 0 7 7\n0b000001 zz 1 1 1 1 1 1\n",
        );
        assert_eq!(rows.len(), 1);
        assert_eq!(w.len(), 1);
        assert!(
            w[0].to_string().starts_with("fct.txt:2: warning: dip"),
            "{}",
            w[0]
        );
    }
}
