//! Checks of a trace as a whole, beyond each line: the header's job layout against
//! itself, the end line against the records read, and (on request) every aggregation's
//! fan-in against its edges.

use super::TraceReader;
use crate::formats::trace_csv::{TraceHeader, END_MARKER, END_MARKER_KEY};
use crate::formats::FormatError;

/// Metadata keys whose values later stages read as numbers, with the largest value each
/// may take (`ina3d trace` writes them; the INA keys are checked where the switch model is
/// read, `InaConfig::from_header`). A value out of range is refused here, naming its
/// line, rather than falling back to a default later.
const NUMERIC_KEYS: [(&str, u64, u64); 8] = [
    ("seed", 0, u64::MAX),
    ("world", 1, u32::MAX as u64),
    ("tp", 1, u32::MAX as u64),
    ("pp", 1, u32::MAX as u64),
    ("dp", 1, u32::MAX as u64),
    ("cp", 1, u32::MAX as u64),
    ("ep", 1, u32::MAX as u64),
    ("vpp", 1, u32::MAX as u64),
];

/// Metadata keys holding a decimal the compute times were scaled by, with the range
/// (exclusive low, inclusive high) it must be in: a NaN, a negative or a zero factor, or
/// an MFU of 0, would make every compute time meaningless.
const DECIMAL_KEYS: [(&str, f64, f64); 2] = [("calibration_factor", 0.0, 1e6), ("mfu", 0.0, 1.0)];

/// Whether metadata `key` may hold `value` ([`NUMERIC_KEYS`], [`DECIMAL_KEYS`]; other keys
/// hold any text).
pub(super) fn check_meta_value(key: &str, value: &str) -> Result<(), String> {
    if let Some(&(_, lo, hi)) = DECIMAL_KEYS.iter().find(|(k, _, _)| *k == key) {
        return match value.parse::<f64>() {
            Ok(x) if x > lo && x <= hi => Ok(()),
            _ => Err(format!(
                "`{value}` is not a number above {lo} and at most {hi}"
            )),
        };
    }
    let Some(&(_, lo, hi)) = NUMERIC_KEYS.iter().find(|(k, _, _)| *k == key) else {
        return Ok(());
    };
    match value.parse::<u64>() {
        Ok(n) if (lo..=hi).contains(&n) => Ok(()),
        _ => Err(format!("`{value}` is not a whole number from {lo} to {hi}")),
    }
}

/// `world` is `tp`·`cp`·`pp`·`dp` (those given; each defaults to 1), when the header has
/// `world` and `tp`: otherwise the job layout is not what its records were made for.
/// The error names `world`'s line.
pub(super) fn check_world(
    header: &TraceHeader,
    lines: &std::collections::HashMap<String, u64>,
) -> Result<(), (u64, String)> {
    let (Some(world), Some(_)) = (header.get("world"), header.get("tp")) else {
        return Ok(());
    };
    let n = |k: &str| {
        header
            .get(k)
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(1)
    };
    let product = ["tp", "cp", "pp", "dp"]
        .iter()
        .try_fold(1u64, |p, k| p.checked_mul(n(k)));
    let world: u64 = world.trim().parse().unwrap_or(0);
    if product == Some(world) {
        return Ok(());
    }
    let shown = ["tp", "cp", "pp", "dp"]
        .iter()
        .map(|k| format!("{k} {}", n(k)))
        .collect::<Vec<_>>()
        .join(" × ");
    Err((
        lines.get("world").copied().unwrap_or(1),
        format!(
            "world: {world} GPUs, but {shown} = {}: the header's layout is not one job's",
            product.map_or("more than 2^64".to_string(), |p| p.to_string())
        ),
    ))
}

impl TraceReader<'_> {
    /// At the end of the file: every aggregation's fan-in (when asked for), and the end
    /// line, when the header promises one, there and counting the records read
    /// ([`END_MARKER`]).
    pub(super) fn check_end(&self) -> Option<FormatError> {
        let path = &self.ctx.path;
        if let Some(e) = self.check_fanins() {
            return Some(e);
        }
        match self.marker {
            Some((n, line)) if n != self.admitted => Some(FormatError::at(
                path,
                line,
                1,
                "end",
                format!(
                    "the end line counts {n} records, the file holds {}: records are missing",
                    self.admitted
                ),
            )),
            None if self.promised => Some(FormatError::syntax(
                path,
                (self.base + self.lines).saturating_sub(1).max(1),
                "end",
                format!(
                    "the file ends after {} records without its end line `{END_MARKER}<count>` \
                     (its header's `{END_MARKER_KEY}` promises one): it was cut short; write \
                     it again",
                    self.admitted
                ),
            )),
            _ => None,
        }
    }

    /// Every aggregation switch of every aggregation has as many edges in each direction
    /// as their `agg_fanin` says: a missing or extra edge (an edited or merged trace) would
    /// make the switch wait forever or release early. The first such edge set by line.
    fn check_fanins(&self) -> Option<FormatError> {
        let (&(id, switch, up), &(fanin, n, line)) = self
            .fanins
            .as_ref()?
            .iter()
            .filter(|(_, (fanin, n, _))| fanin != n)
            .min_by_key(|(_, (_, _, line))| *line)?;
        let dir = if up { "up" } else { "down" };
        Some(FormatError::syntax(
            &self.ctx.path,
            line,
            "agg_fanin",
            format!(
                "aggregation {id} at switch {switch}: agg_fanin {fanin}, but the trace has \
                 {n} {dir} edge(s) of it there"
            ),
        ))
    }
}
