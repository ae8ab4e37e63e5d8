//! `results.csv`: one row per INA policy from the back-ends' [`Summary`] rows, with
//! `speedup_vs_ring` on each back-end. Plain typed columns (no polars), so the main job
//! (`ina3d run`) builds without the `tables` feature.

use super::{ReportError, RING_POLICY};
use crate::fct::Summary;
use std::fmt::Write as _;
use std::path::Path;

/// Columns of `results.csv`: the eleven the issue names, then the extras (see
/// [`results_table`] for their meaning).
pub const RESULTS_COLUMNS: [&str; 23] = [
    "policy",
    "iteration_time_ns",
    "compute_ns",
    "exposed_tp_ns",
    "exposed_pp_ns",
    "exposed_dp_ns",
    "exposed_emb_ns",
    "bubble_ns",
    "switch_bytes",
    "ina_slot_peak",
    "speedup_vs_ring",
    "ina_slots",
    "tp_bytes",
    "pp_bytes",
    "dp_bytes",
    "emb_bytes",
    "replay_wall_time_ns",
    "ns3_iteration_time_ns",
    "ns3_speedup_vs_ring",
    "predicted_iteration_time_ns",
    "prediction_error",
    "plan_gap",
    "plan_solve_wall_time_ns",
];

/// One policy's outcome, the input of [`results_table`].
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyResult {
    /// Policy name (`ring`, `ina-dp`, `ina-tp`, `ina-tp-dp`, ...).
    pub policy: String,
    /// Aggregator slots configured per switch (the same on every row of one run; `ring`
    /// does not use them).
    pub ina_slots: u64,
    /// The replayer's summary.
    pub replay: Summary,
    /// ns-3's summary of the same trace, when ns-3 ran.
    pub ns3: Option<Summary>,
    /// The plan behind a planner policy's trace (`plan`, `plan-exact`, `sharp`).
    pub plan: Option<PlanFigures>,
}

/// What `results.csv` shows of a planner policy's plan.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanFigures {
    /// The plan's predicted iteration time (ns).
    pub predicted_ns: f64,
    /// The solver's relative gap between its plan and its proven bound (0: optimal).
    pub gap: f64,
    /// Wall time of the solve (ns).
    pub solve_wall_time_ns: u64,
}

impl PlanFigures {
    /// The figures of a plan file.
    pub fn of(p: &crate::formats::plan_json::PlanFile) -> Self {
        PlanFigures {
            predicted_ns: p.prediction.iteration_ns,
            gap: p.solver.gap,
            solve_wall_time_ns: (p.solver.solve_time_s * 1e9).round() as u64,
        }
    }
}

/// The cells of one column, typed.
#[derive(Clone, Debug, PartialEq)]
pub enum Values {
    /// Text (never empty in a results table: policy names, seed lists).
    Text(Vec<String>),
    /// Integers; `None` is an empty cell.
    Int(Vec<Option<u64>>),
    /// Numbers; `None` is an empty cell.
    Float(Vec<Option<f64>>),
}

impl Values {
    pub(super) fn len(&self) -> usize {
        match self {
            Values::Text(v) => v.len(),
            Values::Int(v) => v.len(),
            Values::Float(v) => v.len(),
        }
    }

    /// Cell `i` as `results.csv` writes it: integers in decimal, floats in Rust's shortest
    /// round-trip form with at least one decimal (`1.0`, `0.9987`, `1e-7`), empty cells as
    /// nothing.
    fn csv_cell(&self, i: usize) -> String {
        match self {
            Values::Text(v) => v[i].clone(),
            Values::Int(v) => v[i].map_or(String::new(), |x| x.to_string()),
            Values::Float(v) => v[i].map_or(String::new(), |x| format!("{x:?}")),
        }
    }

    /// Cell `i` as a float (integers converted), `None` when empty or text.
    pub fn f64_at(&self, i: usize) -> Option<f64> {
        match self {
            Values::Text(_) => None,
            Values::Int(v) => v[i].map(|x| x as f64),
            Values::Float(v) => v[i],
        }
    }
}

/// One named column.
#[derive(Clone, Debug, PartialEq)]
pub struct Column {
    /// The column's name in `results.csv`.
    pub name: String,
    /// Its cells, one per policy.
    pub values: Values,
}

impl Column {
    pub(super) fn text(name: &str, v: Vec<String>) -> Self {
        Column {
            name: name.into(),
            values: Values::Text(v),
        }
    }
    pub(super) fn int(name: &str, v: Vec<Option<u64>>) -> Self {
        Column {
            name: name.into(),
            values: Values::Int(v),
        }
    }
    pub(super) fn float(name: &str, v: Vec<Option<f64>>) -> Self {
        Column {
            name: name.into(),
            values: Values::Float(v),
        }
    }
}

/// A results table: named typed columns of equal length, one row per policy.
#[derive(Clone, Debug, PartialEq)]
pub struct ResultsTable {
    /// The columns, in file order.
    pub columns: Vec<Column>,
}

impl ResultsTable {
    /// Rows (policies).
    pub fn height(&self) -> usize {
        self.columns.first().map_or(0, |c| c.values.len())
    }

    /// The column called `name`.
    pub fn column(&self, name: &str) -> Option<&Values> {
        self.columns
            .iter()
            .find(|c| c.name == name)
            .map(|c| &c.values)
    }

    /// Column names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.columns.iter().map(|c| c.name.as_str()).collect()
    }

    /// The policy names, in row order.
    pub fn policies(&self) -> Vec<&str> {
        match self.column("policy") {
            Some(Values::Text(v)) => v.iter().map(String::as_str).collect(),
            _ => Vec::new(),
        }
    }

    /// Cell (`name`, row `i`) as a float; `None` when empty or missing.
    pub fn f64_at(&self, name: &str, i: usize) -> Option<f64> {
        self.column(name).and_then(|v| v.f64_at(i))
    }

    /// The table as CSV text: a header line, then one line per row (LF endings). Text cells
    /// are policy names and `;`-separated seeds, which need no quoting.
    pub fn to_csv(&self) -> String {
        let mut s = self.names().join(",");
        s.push('\n');
        for i in 0..self.height() {
            let cells: Vec<String> = self.columns.iter().map(|c| c.values.csv_cell(i)).collect();
            let _ = writeln!(s, "{}", cells.join(","));
        }
        s
    }

    /// Writes [`Self::to_csv`] to `path` atomically (a temporary, then renamed), creating
    /// its directory.
    pub fn write_csv(&self, path: &Path) -> Result<(), ReportError> {
        if let Some(d) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(d).map_err(super::io(d))?;
        }
        Ok(crate::formats::write_atomic_bytes(
            path,
            self.to_csv().as_bytes(),
        )?)
    }
}

/// The results table, one row per policy in the order given, columns
/// [`RESULTS_COLUMNS`]: the replayer's summary fields (ns), `speedup_vs_ring` =
/// ring's `iteration_time_ns` / this row's (so > 1 is faster than ring), and the extras
/// `ina_slots`, per-class network bytes, the replayer's wall time,
/// `ns3_iteration_time_ns` and `ns3_speedup_vs_ring` (the same ratio on ns-3's iteration
/// times; empty when ns-3 did not run this policy or the ring), and for planner policies
/// the plan's `predicted_iteration_time_ns`, `prediction_error` = (predicted − replayed) /
/// replayed, the solver's `plan_gap` and `plan_solve_wall_time_ns` (empty on other rows).
///
/// ```
/// use ina3d::fct::Summary;
/// use ina3d::report::{results_table, PolicyResult};
/// let row = |policy: &str, replay_ns, ns3_ns| PolicyResult {
///     policy: policy.into(),
///     ina_slots: 8192,
///     replay: Summary { iteration_time_ns: replay_ns, ..Default::default() },
///     ns3: Some(Summary { iteration_time_ns: ns3_ns, ..Default::default() }),
///     plan: None,
/// };
/// // the replay finds INA 1.25× faster than the ring, ns-3 1.2× (600 / 500)
/// let t = results_table(&[row("ring", 1000, 600), row("ina-dp", 800, 500)]).unwrap();
/// assert_eq!(t.f64_at("speedup_vs_ring", 1), Some(1.25));
/// assert_eq!(t.f64_at("ns3_speedup_vs_ring", 1), Some(1.2));
/// assert!(t.to_csv().starts_with("policy,iteration_time_ns,"));
/// ```
pub fn results_table(rows: &[PolicyResult]) -> Result<ResultsTable, ReportError> {
    let speedup = speedups_vs_ring(rows)?;
    let ns3_speedup = ns3_speedups_vs_ring(rows);
    let plan = |f: &dyn Fn(&PlanFigures, &Summary) -> f64| -> Vec<Option<f64>> {
        rows.iter()
            .map(|r| r.plan.as_ref().map(|p| f(p, &r.replay)))
            .collect()
    };
    let u = |name: &str, f: fn(&Summary) -> u64| {
        Column::int(name, rows.iter().map(|r| Some(f(&r.replay))).collect())
    };
    Ok(ResultsTable {
        columns: vec![
            Column::text("policy", rows.iter().map(|r| r.policy.clone()).collect()),
            u("iteration_time_ns", |s| s.iteration_time_ns),
            u("compute_ns", |s| s.compute_ns),
            u("exposed_tp_ns", |s| s.exposed_tp_ns),
            u("exposed_pp_ns", |s| s.exposed_pp_ns),
            u("exposed_dp_ns", |s| s.exposed_dp_ns),
            u("exposed_emb_ns", |s| s.exposed_emb_ns),
            u("bubble_ns", |s| s.bubble_ns),
            u("switch_bytes", |s| s.switch_bytes),
            u("ina_slot_peak", |s| s.ina_slot_peak),
            Column::float("speedup_vs_ring", speedup.into_iter().map(Some).collect()),
            Column::int(
                "ina_slots",
                rows.iter().map(|r| Some(r.ina_slots)).collect(),
            ),
            u("tp_bytes", |s| s.tp_bytes),
            u("pp_bytes", |s| s.pp_bytes),
            u("dp_bytes", |s| s.dp_bytes),
            u("emb_bytes", |s| s.emb_bytes),
            u("replay_wall_time_ns", |s| s.wall_time_ns),
            Column::int(
                "ns3_iteration_time_ns",
                rows.iter()
                    .map(|r| r.ns3.as_ref().map(|s| s.iteration_time_ns))
                    .collect(),
            ),
            Column::float("ns3_speedup_vs_ring", ns3_speedup),
            Column::int(
                "predicted_iteration_time_ns",
                plan(&|p, _| p.predicted_ns.round())
                    .into_iter()
                    .map(|v| v.map(|x| x as u64))
                    .collect(),
            ),
            Column::float(
                "prediction_error",
                plan(&|p, s| {
                    let t = s.iteration_time_ns as f64;
                    (p.predicted_ns - t) / t
                }),
            ),
            Column::float("plan_gap", plan(&|p, _| p.gap)),
            Column::int(
                "plan_solve_wall_time_ns",
                rows.iter()
                    .map(|r| r.plan.as_ref().map(|p| p.solve_wall_time_ns))
                    .collect(),
            ),
        ],
    })
}

/// Each row's `speedup_vs_ring`: the ring row's `iteration_time_ns` / the row's. Errors: a
/// policy named twice, a zero iteration time, no ring row.
pub fn speedups_vs_ring(rows: &[PolicyResult]) -> Result<Vec<f64>, ReportError> {
    let mut seen = std::collections::BTreeSet::new();
    for r in rows {
        if !seen.insert(r.policy.as_str()) {
            return Err(ReportError::DuplicatePolicy {
                policy: r.policy.clone(),
            });
        }
        if r.replay.iteration_time_ns == 0 {
            return Err(ReportError::ZeroIteration {
                policy: r.policy.clone(),
            });
        }
    }
    let ring = rows
        .iter()
        .find(|r| r.policy == RING_POLICY)
        .ok_or_else(|| ReportError::NoRing {
            policies: rows
                .iter()
                .map(|r| r.policy.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })?;
    let ring_t = ring.replay.iteration_time_ns as f64;
    Ok(rows
        .iter()
        .map(|r| ring_t / r.replay.iteration_time_ns as f64)
        .collect())
}

/// Each row's speed-up over the ring on ns-3's iteration times: `None` where ns-3 did not
/// run the row or the ring (or gave an iteration of 0, which no completed run does).
pub fn ns3_speedups_vs_ring(rows: &[PolicyResult]) -> Vec<Option<f64>> {
    let time = |r: &PolicyResult| {
        r.ns3
            .as_ref()
            .map(|s| s.iteration_time_ns)
            .filter(|&t| t > 0)
    };
    let ring = rows.iter().find(|r| r.policy == RING_POLICY).and_then(time);
    rows.iter()
        .map(|r| Some(ring? as f64 / time(r)? as f64))
        .collect()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A policy's row with only its iteration times (ns) on the replay and on ns-3.
    pub(in crate::report) fn row(policy: &str, replay: u64, ns3: Option<u64>) -> PolicyResult {
        PolicyResult {
            policy: policy.into(),
            ina_slots: 8,
            replay: Summary {
                iteration_time_ns: replay,
                ..Default::default()
            },
            ns3: ns3.map(|t| Summary {
                iteration_time_ns: t,
                ..Default::default()
            }),
            plan: None,
        }
    }

    #[test]
    fn ns3_speedups_pair_each_policy_with_ns3_s_own_ring() {
        // replay: ina-dp 1000/800 = 1.25; ns-3: 1200/1500 = 0.8 (the ranking flips)
        let rows = [
            row("ring", 1000, Some(1200)),
            row("ina-dp", 800, Some(1500)),
            row("atp", 900, None),
        ];
        let t = results_table(&rows).unwrap();
        assert_eq!(t.f64_at("speedup_vs_ring", 1), Some(1.25));
        assert_eq!(t.f64_at("ns3_speedup_vs_ring", 0), Some(1.0));
        assert_eq!(t.f64_at("ns3_speedup_vs_ring", 1), Some(0.8));
        assert_eq!(t.f64_at("ns3_speedup_vs_ring", 2), None);
        // without ns-3 on the ring no row has an ns-3 speed-up
        let rows = [row("ring", 1000, None), row("ina-dp", 800, Some(1500))];
        assert_eq!(ns3_speedups_vs_ring(&rows), [None, None]);
    }

    #[test]
    fn floats_keep_a_decimal_and_empty_cells_stay_empty_in_the_csv() {
        let t = results_table(&[row("ring", 1000, None), row("ina-dp", 400, None)]).unwrap();
        let csv = t.to_csv();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0], RESULTS_COLUMNS.join(","));
        // ring: speed-up 1.0, six empty cells (ns-3 time and speed-up, four planner columns)
        assert!(lines[1].contains(",1.0,8,"), "{}", lines[1]);
        assert!(lines[1].ends_with(",,,,,,"), "{}", lines[1]);
        assert!(lines[2].contains(",2.5,8,"), "{}", lines[2]);
    }
}
