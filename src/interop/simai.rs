//! SimAI's `EndToEnd.csv` (its iteration breakdown, per layer and in total) as long-form
//! rows `section,layer,row,metric,value,unit`, read by the one reader of the format
//! ([`crate::formats::simai_end_to_end`]).

use crate::formats::simai_end_to_end::EndToEnd;

/// The columns of [`long_form`]'s rows.
pub const LONG_FORM_COLUMNS: [&str; 6] = ["section", "layer", "row", "metric", "value", "unit"];

/// `e2e` as rows of [`LONG_FORM_COLUMNS`]: each run's summary, each layer row (numbered
/// from 1; SimAI's sum row is `sum`), the totals. Times are µs; algbw/busbw GB/s; a
/// missing value (`nan`, `NONE`) is an empty cell, not a zero.
pub fn long_form(e2e: &EndToEnd) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let unit = |m: &str| if m.contains("bw") { "GB/s" } else { "us" };
    let cell = |v: Option<f64>| v.map(|x| x.to_string()).unwrap_or_default();
    let mut push = |section: &str, layer: &str, row: String, metric: &str, v: Option<f64>| {
        rows.push(vec![
            section.into(),
            layer.into(),
            row,
            metric.into(),
            cell(v),
            unit(metric).into(),
        ])
    };
    for run in &e2e.runs {
        for (b, v) in &run.us {
            push("summary", "", String::new(), b.as_str(), Some(*v));
        }
    }
    let mut row_no = 0usize;
    for l in &e2e.layers {
        let (section, layer, row) = if l.is_sum() {
            ("sum", "", String::new())
        } else {
            row_no += 1;
            ("layer", l.layer.as_str(), row_no.to_string())
        };
        for (m, v) in &l.values {
            push(section, layer, row.clone(), m, *v);
        }
    }
    if let Some(tot) = e2e.totals {
        push(
            "total",
            "",
            String::new(),
            "total_exposed_comm",
            tot.exposed_comm_us,
        );
        push("total", "", String::new(), "total_comp", tot.comp_us);
        push("total", "", String::new(), "total_time", tot.time_us);
    }
    rows
}
