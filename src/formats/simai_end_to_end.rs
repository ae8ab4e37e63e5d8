//! SimAI's `EndToEnd.csv`: the result table SimAI writes after running a workload (for
//! instance the one `ina3d export aicb` produced). Read only — ina3d never writes it.
//!
//! The file has three kinds of line, each recognised by its first cell, never by its
//! position (SimAI versions differ in which columns they write):
//! - `File name, Expose DP comm, …, Total time` then one row per run: the iteration's
//!   breakdown in µs, each cell `value (share%)` (the share is dropped);
//! - `layer_name, <run>, fwd compute, …` then one row per layer and a `SUM` row: per-layer
//!   compute, exposed and total communication (µs) and bandwidths (GB/s); `nan` and
//!   `NONE` are missing values, not zeros;
//! - `total exposed comm,<v>,total comp,<v>,total time,<v>`: the run's totals at full
//!   precision (the summary row rounds to whole µs).
//!
//! Separators are `, ` or `,` (SimAI mixes both). Summary columns are matched by their
//! name with case, spaces and underscores ignored, so `Expose_EP_comm` and
//! `Expose EP comm` are the same column ([`Breakdown`]).

use super::{numbered_lines, read_text, FormatError, Warning};
use crate::keyword::keyword_enum;
use std::collections::BTreeMap;
use std::path::Path;

/// A column of the run summary (the `File name, …` table), in SimAI's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Breakdown {
    /// Exposed data-parallel communication (dense gradients).
    ExposeDp,
    /// Exposed expert-data-parallel communication (MoE expert gradients).
    ExposeDpEp,
    /// Exposed tensor-parallel communication.
    ExposeTp,
    /// Exposed expert-parallel communication (MoE all-to-alls).
    ExposeEp,
    /// Exposed pipeline communication. SimAI computes it from a formula (p2p bytes over
    /// the configured pipeline bandwidth), it does not simulate it.
    ExposePp,
    /// Pipeline bubble; also a formula in SimAI: `(PP−1)/(GA·VPP)` times the sum, over the
    /// workload's rows except those named `embedding_layer`, of forward and
    /// input-gradient compute and exposed communication and weight-gradient compute.
    /// `export aicb` writes the rows of every micro-batch, so that is `(PP−1)/VPP`
    /// micro-batches of the first stage.
    Bubble,
    /// Compute of the simulated rank.
    TotalComp,
    /// Exposed communication of all kinds.
    TotalExposedComm,
    /// The iteration: compute + exposed communication + bubble + pipeline.
    TotalTime,
}

keyword_enum!(Breakdown, "EndToEnd.csv summary column",
    Breakdown::ExposeDp => "expose_dp_comm",
    Breakdown::ExposeDpEp => "expose_dp_ep_comm",
    Breakdown::ExposeTp => "expose_tp_comm",
    Breakdown::ExposeEp => "expose_ep_comm",
    Breakdown::ExposePp => "expose_pp_comm",
    Breakdown::Bubble => "bubble_time",
    Breakdown::TotalComp => "total_comp",
    Breakdown::TotalExposedComm => "total_exposed_comm",
    Breakdown::TotalTime => "total_time",
);

impl Breakdown {
    /// The column a header cell names, if any: SimAI's spelling with case, spaces and
    /// underscores ignored.
    pub fn of_header(cell: &str) -> Option<Self> {
        let key = squash(cell);
        [
            Breakdown::ExposeDp,
            Breakdown::ExposeDpEp,
            Breakdown::ExposeTp,
            Breakdown::ExposeEp,
            Breakdown::ExposePp,
            Breakdown::Bubble,
            Breakdown::TotalComp,
            Breakdown::TotalExposedComm,
            Breakdown::TotalTime,
        ]
        .into_iter()
        .find(|b| squash(b.as_str()) == key)
    }
}

/// One run's row of the summary table: every column the header named, in µs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunSummary {
    /// 1-based line of the row.
    pub line: u64,
    /// The `File name` cell (SimAI's run name).
    pub name: String,
    /// The columns present, µs.
    pub us: BTreeMap<Breakdown, f64>,
}

/// One row of the per-layer table (a layer, or the `SUM` row).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LayerRow {
    /// 1-based line of the row.
    pub line: u64,
    /// `layer_name` cell; `SUM` for the sum row.
    pub layer: String,
    /// Metric name (the header cell in snake case; `algbw`/`busbw` qualified by the
    /// communication before them, e.g. `fwd_algbw`) and its value (`None` for
    /// `nan`/`NONE`/empty). µs for times, GB/s for bandwidths.
    pub values: Vec<(String, Option<f64>)>,
}

impl LayerRow {
    /// Whether this is the `SUM` row.
    pub fn is_sum(&self) -> bool {
        self.layer == "SUM"
    }
}

/// The `total exposed comm,…,total time,…` line: the run's totals, µs, unrounded.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Totals {
    /// 1-based line.
    pub line: u64,
    /// Exposed communication.
    pub exposed_comm_us: Option<f64>,
    /// Compute.
    pub comp_us: Option<f64>,
    /// The iteration.
    pub time_us: Option<f64>,
}

/// Which SimAI front-end wrote the file, told by the run name SimAI puts in the layer
/// table's header (`layer_name,<run>,…`): its analytical front-end names every run
/// `Analytical_test`, its ns-3 front-end `test1` (`AnalyticalAstra.cc`,
/// `AstraSimNetwork.cc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// `SimAI_analytical`: communication times from its bus-bandwidth formulas, no network
    /// simulation.
    Analytical,
    /// `SimAI_simulator` on ns-3: communication simulated packet by packet.
    Ns3,
    /// The file has no layer table or another run name.
    Unknown,
}

/// The job a SimAI file was run on, as far as the file shows it: group sizes from the
/// ratio of bus to algorithm bandwidth of its collectives (nccl-tests' factors
/// `2(n−1)/n` for all-reduce, `(n−1)/n` for all-gather and reduce-scatter), and the
/// micro-batches and layers from the row names `ina3d export aicb` writes
/// (`layer<L>.mb<M>`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SimaiJob {
    /// Size of the group the forward and input-gradient collectives ran over (TP), with
    /// the line that shows it.
    pub tp: Option<(u32, u64)>,
    /// Size of the group the weight-gradient collectives ran over (DP), with its line.
    pub dp: Option<(u32, u64)>,
    /// Distinct micro-batches in the row names.
    pub microbatches: Option<u32>,
    /// Distinct transformer layers in the row names.
    pub layers: Option<u32>,
}

/// Everything an `EndToEnd.csv` holds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EndToEnd {
    /// The run name of the layer table's header, when there is one.
    pub layer_run_name: Option<String>,
    /// Summary rows, one per run (SimAI writes one).
    pub runs: Vec<RunSummary>,
    /// Per-layer rows and the `SUM` row, in file order.
    pub layers: Vec<LayerRow>,
    /// The totals line, when present.
    pub totals: Option<Totals>,
}

impl EndToEnd {
    /// Which SimAI front-end wrote the file ([`Backend`]).
    pub fn backend(&self) -> Backend {
        match self.layer_run_name.as_deref() {
            Some("Analytical_test") => Backend::Analytical,
            Some("test1") => Backend::Ns3,
            _ => Backend::Unknown,
        }
    }

    /// The job the file shows ([`SimaiJob`]).
    pub fn job(&self) -> SimaiJob {
        let mut j = SimaiJob::default();
        let get =
            |r: &LayerRow, k: &str| r.values.iter().find(|(n, _)| n == k).and_then(|(_, v)| *v);
        for r in self.layers.iter().filter(|r| !r.is_sum()) {
            for (kind, slot) in [("fwd", 0), ("ig", 0), ("wg", 1)] {
                let (Some(alg), Some(bus)) = (
                    get(r, &format!("{kind}_algbw")),
                    get(r, &format!("{kind}_busbw")),
                ) else {
                    continue;
                };
                let target = if slot == 0 { &mut j.tp } else { &mut j.dp };
                if target.is_none() {
                    *target = group_size(alg, bus).map(|n| (n, r.line));
                }
            }
        }
        let mut mbs = std::collections::BTreeSet::new();
        let mut layers = std::collections::BTreeSet::new();
        for r in &self.layers {
            let mut parts = r.layer.split('.');
            if let (Some(l), Some(mb)) = (parts.next(), parts.next()) {
                if let (Some(l), Some(mb)) = (
                    l.strip_prefix("layer").and_then(|x| x.parse::<u32>().ok()),
                    mb.strip_prefix("mb").and_then(|x| x.parse::<u32>().ok()),
                ) {
                    layers.insert(l);
                    mbs.insert(mb);
                }
            }
        }
        if !mbs.is_empty() {
            j.microbatches = Some(mbs.len() as u32);
            j.layers = Some(layers.len() as u32);
        }
        j
    }

    /// The iteration time in µs: the totals line's (unrounded) when present, else the
    /// single run's `Total time`.
    pub fn total_time_us(&self) -> Option<f64> {
        self.totals
            .and_then(|t| t.time_us)
            .or_else(|| self.runs.first()?.us.get(&Breakdown::TotalTime).copied())
    }
}

/// Reads `path` (see the module docs).
pub fn read(path: &Path) -> Result<(EndToEnd, Vec<Warning>), FormatError> {
    parse(path, &read_text(path)?)
}

/// Lower case, with spaces, underscores and dashes removed: `Expose_EP_comm` and
/// `Expose EP comm` both become `exposeepcomm`.
fn squash(s: &str) -> String {
    s.chars()
        .filter(|c| !matches!(c, ' ' | '_' | '-'))
        .flat_map(char::to_lowercase)
        .collect()
}

/// `Fwd compute` → `fwd_compute`.
fn snake(s: &str) -> String {
    s.trim()
        .to_ascii_lowercase()
        .split([' ', '_'])
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join("_")
}

/// The group size a collective's bus/algorithm bandwidth ratio gives: `r = 2(n−1)/n` (an
/// all-reduce, `r ≥ 1`) or `(n−1)/n` (`r < 1`); `None` for a ratio no small group gives
/// (SimAI prints both bandwidths with two decimals, so the size is rounded).
fn group_size(alg: f64, bus: f64) -> Option<u32> {
    if !(alg > 0.0 && bus > 0.0) {
        return None;
    }
    let r = bus / alg;
    let n = if r >= 1.0 {
        2.0 / (2.0 - r)
    } else {
        1.0 / (1.0 - r)
    };
    (n.is_finite() && (1.5..=65_536.0).contains(&n)).then(|| n.round() as u32)
}

/// A cell's number: the first word (`633 (36.28%)` → 633); `nan` (SimAI's analytical
/// back-end prints `-nan` for a bandwidth over no time), `inf`, `NONE` and empty are
/// `None`; anything else is an error naming the field.
fn number(path: &Path, line: u64, field: &str, cell: &str) -> Result<Option<f64>, FormatError> {
    let v = cell.split_whitespace().next().unwrap_or("");
    let unsigned = v.trim_start_matches(['-', '+']);
    if v.is_empty()
        || unsigned.eq_ignore_ascii_case("nan")
        || unsigned.eq_ignore_ascii_case("inf")
        || v == "NONE"
    {
        return Ok(None);
    }
    match v.parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(Some(x)),
        _ => Err(FormatError::syntax(
            path,
            line,
            field,
            format!(
                "`{}` is not a number (expected µs or GB/s, `nan` or `NONE`)",
                cell.trim()
            ),
        )),
    }
}

/// Which table the following rows belong to.
enum Table {
    None,
    Summary(Vec<Option<Breakdown>>),
    Layers(Vec<String>),
}

/// Parses the text of an `EndToEnd.csv` read from `path` (see the module docs). Lines
/// before any header, and summary header cells naming no known column, are warnings; a
/// file with neither a summary row nor a totals line is an error (it says nothing about
/// the iteration).
pub fn parse(path: &Path, text: &str) -> Result<(EndToEnd, Vec<Warning>), FormatError> {
    let mut out = EndToEnd::default();
    let mut warnings = Vec::new();
    let mut table = Table::None;
    for (no, l) in numbered_lines(text) {
        if l.trim().is_empty() {
            continue;
        }
        let cells: Vec<&str> = l.split(',').map(str::trim).collect();
        match squash(cells[0]).as_str() {
            "filename" => table = Table::Summary(summary_header(path, no, &cells, &mut warnings)),
            "layername" => {
                out.layer_run_name = cells.get(1).map(|s| s.to_string());
                table = Table::Layers(layer_header(&cells))
            }
            "totalexposedcomm" => out.totals = Some(totals_line(path, no, &cells)?),
            _ => match &table {
                Table::Summary(cols) => out.runs.push(summary_row(path, no, cols, &cells)?),
                Table::Layers(names) => out.layers.push(layer_row(path, no, names, &cells)?),
                Table::None => warnings.push(Warning::new(
                    path,
                    no,
                    "line before any EndToEnd.csv header (`File name,` or `layer_name,`): ignored",
                )),
            },
        }
    }
    if out.runs.is_empty() && out.totals.is_none() {
        return Err(FormatError::file(
            path,
            "no `File name, …, Total time` summary row and no `total exposed comm,…` line: not a SimAI EndToEnd.csv",
        ));
    }
    Ok((out, warnings))
}

fn summary_header(
    path: &Path,
    no: u64,
    cells: &[&str],
    warnings: &mut Vec<Warning>,
) -> Vec<Option<Breakdown>> {
    cells
        .iter()
        .skip(1)
        .map(|c| {
            let b = Breakdown::of_header(c);
            if b.is_none() {
                warnings.push(Warning::new(
                    path,
                    no,
                    format!("summary column `{c}` is not one ina3d knows: ignored"),
                ));
            }
            b
        })
        .collect()
}

fn summary_row(
    path: &Path,
    no: u64,
    cols: &[Option<Breakdown>],
    cells: &[&str],
) -> Result<RunSummary, FormatError> {
    if cells.len() != cols.len() + 1 {
        return Err(FormatError::syntax(
            path,
            no,
            "summary row",
            format!(
                "{} cells where the `File name` header has {}",
                cells.len(),
                cols.len() + 1
            ),
        ));
    }
    let mut us = BTreeMap::new();
    for (c, cell) in cols.iter().zip(&cells[1..]) {
        if let Some(b) = c {
            if let Some(v) = number(path, no, b.as_str(), cell)? {
                us.insert(*b, v);
            }
        }
    }
    Ok(RunSummary {
        line: no,
        name: cells[0].to_string(),
        us,
    })
}

/// Layer-table metric names; the repeated `algbw`/`busbw` are qualified by the
/// communication column before them (`fwd total comm, algbw` → `fwd_algbw`).
fn layer_header(cells: &[&str]) -> Vec<String> {
    let mut last = String::new();
    cells
        .iter()
        .map(|c| {
            let s = snake(c);
            if let Some(kind) = s.strip_suffix("_total_comm") {
                last = kind.to_string();
            }
            if s == "algbw" || s == "busbw" {
                format!("{last}_{s}")
            } else {
                s
            }
        })
        .collect()
}

fn layer_row(
    path: &Path,
    no: u64,
    names: &[String],
    cells: &[&str],
) -> Result<LayerRow, FormatError> {
    if cells.len() > names.len() {
        return Err(FormatError::syntax(
            path,
            no,
            "layer row",
            format!(
                "{} cells where the `layer_name` header has {}",
                cells.len(),
                names.len()
            ),
        ));
    }
    // cell 0 is the layer, cell 1 the run name; the rest are numbers
    let values = names
        .iter()
        .zip(cells)
        .skip(2)
        .map(|(n, c)| Ok((n.clone(), number(path, no, n, c)?)))
        .collect::<Result<Vec<_>, FormatError>>()?;
    Ok(LayerRow {
        line: no,
        layer: cells[0].to_string(),
        values,
    })
}

/// The longest total a file may give, µs: 10^12 µs (about 11.6 days, the bound of a
/// Megatron log's times), far above any simulated iteration.
pub const MAX_TOTAL_US: f64 = 1e12;

/// A total of the totals line: a time in [0, [`MAX_TOTAL_US`]] µs, or absent (`NONE`,
/// empty). Unlike a bandwidth, a total has no reason to be `nan` or `inf`: refused, as a
/// negative or absurd time is, naming the line and the field.
fn total_us(path: &Path, no: u64, field: &str, cell: &str) -> Result<Option<f64>, FormatError> {
    let v = cell.split_whitespace().next().unwrap_or("");
    let parsed = v.parse::<f64>();
    let x = match parsed {
        Ok(x) => Some(x),
        Err(_) => number(path, no, field, cell)?,
    };
    match x {
        Some(x) if !(0.0..=MAX_TOTAL_US).contains(&x) => Err(FormatError::syntax(
            path,
            no,
            field,
            format!(
                "`{}` is not a time in [0, {MAX_TOTAL_US:e}] µs",
                cell.trim()
            ),
        )),
        x => Ok(x),
    }
}

fn totals_line(path: &Path, no: u64, cells: &[&str]) -> Result<Totals, FormatError> {
    let mut t = Totals {
        line: no,
        ..Totals::default()
    };
    for pair in cells.chunks(2) {
        let [k, v] = pair else {
            return Err(FormatError::syntax(
                path,
                no,
                "totals",
                "expected `name,value` pairs (`total exposed comm,<µs>,total comp,<µs>,total time,<µs>`)",
            ));
        };
        let x = total_us(path, no, k, v)?;
        match squash(k).as_str() {
            "totalexposedcomm" => t.exposed_comm_us = x,
            "totalcomp" => t.comp_us = x,
            "totaltime" => t.time_us = x,
            _ => {
                return Err(FormatError::syntax(
                    path,
                    no,
                    "totals",
                    format!("`{k}` is not `total exposed comm`, `total comp` or `total time`"),
                ))
            }
        }
    }
    Ok(t)
}

/// How SimAI obtained a figure of its summary: by simulating the workload's collectives,
/// from a closed formula, or as a sum of other figures. Said beside every compared row so
/// a reader knows which differences measure the network model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Basis {
    /// Simulated on ns-3 (SimAI's ns-3 front-end).
    Simulated,
    /// SimAI's analytical model: each collective's bytes over a bus bandwidth, no network.
    Analytical,
    /// The file does not say which front-end wrote it: simulated or analytical.
    #[serde(rename = "simulated-or-analytical")]
    Unknown,
    /// The workload's own compute times (those `export aicb` wrote), summed.
    Workload,
    /// From a closed formula over the workload (SimAI's pipeline terms).
    Formula,
    /// A sum of other figures.
    Sum,
}

keyword_enum!(Basis, "SimAI basis", Basis::Simulated => "simulated", Basis::Analytical => "analytical", Basis::Unknown => "simulated-or-analytical", Basis::Workload => "workload", Basis::Formula => "formula", Basis::Sum => "sum");

impl Backend {
    /// How this front-end obtained its communication figures.
    pub fn comm_basis(self) -> Basis {
        match self {
            Backend::Analytical => Basis::Analytical,
            Backend::Ns3 => Basis::Simulated,
            Backend::Unknown => Basis::Unknown,
        }
    }
}

/// One row of `ina3d compare`'s `end_to_end.csv`: a figure of the replay's `summary.csv`
/// beside SimAI's, ns.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ComparisonRow {
    /// The replay's metric (a `summary.csv` column, or a sum of them).
    pub metric: String,
    /// The SimAI column(s) it is compared with, `+`-joined.
    pub simai_columns: String,
    /// The replay's value.
    pub replay_ns: u64,
    /// SimAI's value (µs × 1000), empty when the file lacks the column.
    pub simai_ns: Option<f64>,
    /// (replay − SimAI) / SimAI; empty when SimAI's value is missing or zero.
    pub rel_error: Option<f64>,
    /// How SimAI obtained its value.
    pub simai_basis: Basis,
}

/// Write `end_to_end.csv` atomically: columns
/// `metric,simai_columns,replay_ns,simai_ns,rel_error,simai_basis`.
pub fn write_comparison(path: &Path, rows: &[ComparisonRow]) -> Result<(), FormatError> {
    super::write_atomic(path, |w| super::csv_rows::write_rows(w, rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_columns_match_simai_spellings_regardless_of_case_spaces_and_underscores() {
        assert_eq!(
            Breakdown::of_header(" Expose_EP_comm"),
            Some(Breakdown::ExposeEp)
        );
        assert_eq!(
            Breakdown::of_header("Expose EP comm"),
            Some(Breakdown::ExposeEp)
        );
        assert_eq!(
            Breakdown::of_header("Expose DP_EP comm"),
            Some(Breakdown::ExposeDpEp)
        );
        assert_eq!(
            Breakdown::of_header("Total time"),
            Some(Breakdown::TotalTime)
        );
        assert_eq!(Breakdown::of_header("Expose CP comm"), None);
    }

    #[test]
    fn a_share_in_parentheses_is_dropped_and_nan_is_missing() {
        let p = Path::new("e.csv");
        assert_eq!(number(p, 1, "x", "633 (36.28%)").unwrap(), Some(633.0));
        assert_eq!(number(p, 1, "x", "nan").unwrap(), None);
        assert_eq!(number(p, 1, "x", "NONE").unwrap(), None);
        let e = number(p, 7, "expose_tp_comm", "abc")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "e.csv:7: expose_tp_comm: `abc` is not a number (expected µs or GB/s, `nan` or `NONE`)"
        );
    }
}
