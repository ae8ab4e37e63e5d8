//! The ns-3 glue's slot reservations, `reservations.txt` (planned INA policy): for every
//! aggregation and each of its aggregating switches, the slots its group reserves there.
//! `ina3d ns3 emit` resolves them from the trace header (`ina_reservations`) with the
//! replayer's lookup; the glue caps each aggregation's slots on a switch at them.
//!
//! ```text
//! # comment
//! agg_id switch slots
//! ```

use super::error::numbered_lines;
use super::FormatError;
use crate::units::NodeId;
use std::fmt::Write as _;
use std::path::Path;

/// One line: aggregation id, switch, slots (≥ 1).
pub type Line = (u64, NodeId, u32);

/// The text of `reservations.txt`.
pub fn to_string(lines: &[Line]) -> String {
    let mut s =
        String::from("# ina3d-ns3 reservations v1: agg_id switch slots (planned slot policy)\n");
    for (agg, sw, slots) in lines {
        let _ = writeln!(s, "{agg} {sw} {slots}");
    }
    s
}

/// Read `reservations.txt`. Errors name the file, line and field: a field that is not a
/// number, slots of 0, a wrong field count, an (aggregation, switch) given twice.
pub fn parse(path: &Path, text: &str) -> Result<Vec<Line>, FormatError> {
    Ok(parse_numbered(path, text)?
        .into_iter()
        .map(|(_, l)| l)
        .collect())
}

/// [`parse`], each line with its 1-based line number (for errors found later, e.g. an
/// aggregation the trace does not have).
pub fn parse_numbered(path: &Path, text: &str) -> Result<Vec<(u64, Line)>, FormatError> {
    let mut out: Vec<(u64, Line)> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (no, raw) in numbered_lines(text) {
        let t: Vec<&str> = raw.split_whitespace().collect();
        if t.is_empty() || t[0].starts_with('#') {
            continue;
        }
        let err = |field: &str, msg: String| FormatError::syntax(path, no, field, msg);
        if t.len() != 3 {
            return Err(err(
                "line",
                format!("{} fields; expected `agg_id switch slots`", t.len()),
            ));
        }
        let agg: u64 = t[0]
            .parse()
            .map_err(|_| err("agg_id", format!("`{}` is not an id", t[0])))?;
        let sw: u32 = t[1]
            .parse()
            .map_err(|_| err("switch", format!("`{}` is not a node id", t[1])))?;
        let slots: u32 = t[2]
            .parse()
            .ok()
            .filter(|&s| s > 0)
            .ok_or_else(|| err("slots", format!("`{}` is not a positive slot count", t[2])))?;
        if !seen.insert((agg, sw)) {
            return Err(err(
                "switch",
                format!("aggregation {agg} has a second reservation on switch {sw}"),
            ));
        }
        out.push((no, (agg, NodeId(sw), slots)));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_round_trip_and_bad_lines_name_their_field() {
        let l = vec![(0, NodeId(16), 256), (7, NodeId(40), 64)];
        assert_eq!(parse(Path::new("r"), &to_string(&l)).unwrap(), l);
        for (text, field) in [
            ("1 2", "line"),
            ("x 2 3", "agg_id"),
            ("1 -2 3", "switch"),
            ("1 2 0", "slots"),
            ("1 2 3\n1 2 4", "switch"),
        ] {
            let e = parse(Path::new("r.txt"), text).unwrap_err().to_string();
            assert!(e.starts_with("r.txt:") && e.contains(field), "{text}: {e}");
        }
    }
}
