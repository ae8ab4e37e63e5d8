//! The results table as a person reads it: one line per policy, times in milliseconds,
//! the speed-up over the ring with its range over the ECMP seeds, ns-3's figures when it
//! ran, the plan's prediction error, the best policy named, and a warning wherever the two
//! back-ends disagree. At most [`MAX_WIDTH`] characters wide; every column of it is in
//! `results.csv`, which keeps the rest.

use super::{ResultsTable, RING_POLICY};
use std::fmt::Write as _;

/// The widest line [`summary`] prints (a terminal of 100 columns shows it unwrapped).
pub const MAX_WIDTH: usize = 100;

/// The largest |replay − ns-3| / ns-3 iteration error the validation suite vouches for:
/// every case of `ina3d validate` has its error of the means within 5 % (docs/validation.md, "How far
/// to trust the replayer"). A larger error on a run means the run is outside what was
/// validated.
pub const VALIDATED_ERROR_BOUND: f64 = 0.05;

/// One policy's line, read from the table.
struct Line {
    policy: String,
    iteration_ms: Option<f64>,
    iteration_range_ms: Option<(f64, f64)>,
    speedup: Option<f64>,
    speedup_range: Option<(f64, f64)>,
    ns3_ms: Option<f64>,
    ns3_speedup: Option<f64>,
    prediction_error: Option<f64>,
    warned: bool,
}

fn lines(t: &ResultsTable) -> Vec<Line> {
    let ms = |v: Option<f64>| v.map(|x| x / 1e6);
    let pair = |a: Option<f64>, b: Option<f64>| a.zip(b);
    t.policies()
        .iter()
        .enumerate()
        .map(|(i, p)| Line {
            policy: (*p).to_string(),
            iteration_ms: ms(t.f64_at("iteration_time_ns", i)),
            iteration_range_ms: pair(
                ms(t.f64_at("iteration_time_ns_min", i)),
                ms(t.f64_at("iteration_time_ns_max", i)),
            ),
            speedup: t.f64_at("speedup_vs_ring", i),
            speedup_range: pair(
                t.f64_at("speedup_vs_ring_min", i),
                t.f64_at("speedup_vs_ring_max", i),
            ),
            ns3_ms: ms(t.f64_at("ns3_iteration_time_ns", i)),
            ns3_speedup: t.f64_at("ns3_speedup_vs_ring", i),
            prediction_error: t.f64_at("prediction_error", i),
            warned: false,
        })
        .collect()
}

/// One column of a printed table: its header, one cell per row, and its side (text to the
/// left, numbers to the right).
pub struct Cells {
    /// The header.
    pub header: String,
    /// One cell per row.
    pub cells: Vec<String>,
    /// Right-aligned (numbers) rather than left-aligned (text).
    pub right: bool,
}

impl Cells {
    /// A column of text, left-aligned.
    pub fn left(header: &str, cells: Vec<String>) -> Cells {
        Cells {
            header: header.into(),
            cells,
            right: false,
        }
    }
    /// A column of numbers, right-aligned.
    pub fn right(header: &str, cells: Vec<String>) -> Cells {
        Cells {
            header: header.into(),
            cells,
            right: true,
        }
    }
}

/// `cols` as the text every command prints a table in: a header line, then a line per row,
/// each column as wide as its widest cell, two spaces between columns, no trailing blanks.
/// The one table printer of the project (`run`, `sweep`, `compare` and `cluster` print
/// through it), so every table reads alike and its width is the sum of its cells'.
pub fn layout(cols: &[Cells]) -> String {
    let widths: Vec<usize> = cols
        .iter()
        .map(|c| {
            c.cells
                .iter()
                .map(|x| x.chars().count())
                .chain([c.header.chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let pad = |s: &str, w: usize, right: bool| {
        let n = w.saturating_sub(s.chars().count());
        if right {
            format!("{}{s}", " ".repeat(n))
        } else {
            format!("{s}{}", " ".repeat(n))
        }
    };
    let rows = cols.iter().map(|c| c.cells.len()).max().unwrap_or(0);
    let mut out = String::new();
    let mut row = |cells: Vec<String>| {
        let _ = writeln!(out, "{}", cells.join("  ").trim_end());
    };
    row(cols
        .iter()
        .zip(&widths)
        .map(|(c, &w)| pad(&c.header, w, c.right))
        .collect());
    for i in 0..rows {
        row(cols
            .iter()
            .zip(&widths)
            .map(|(c, &w)| pad(c.cells.get(i).map_or("", String::as_str), w, c.right))
            .collect());
    }
    out
}

/// Milliseconds to four significant digits or so (no decimals from a second up).
pub fn ms(x: f64) -> String {
    match x.abs() {
        a if a >= 1000.0 => format!("{x:.0}"),
        a if a >= 100.0 => format!("{x:.1}"),
        a if a >= 1.0 => format!("{x:.2}"),
        _ => format!("{x:.3}"),
    }
}

fn with_range(v: Option<f64>, r: Option<(f64, f64)>, f: fn(f64) -> String) -> String {
    match (v, r) {
        (None, _) => String::new(),
        (Some(v), Some((lo, hi))) if lo != hi => format!("{} ({}–{})", f(v), f(lo), f(hi)),
        (Some(v), _) => f(v),
    }
}

/// The disagreements between the back-ends (one sentence each), marking the lines they
/// concern.
fn disagreements(lines: &mut [Line]) -> Vec<String> {
    let mut out = Vec::new();
    for l in lines.iter_mut() {
        let (Some(r), Some(n)) = (l.iteration_ms, l.ns3_ms) else {
            continue;
        };
        let err = (r - n) / n;
        if err.abs() > VALIDATED_ERROR_BOUND {
            l.warned = true;
            out.push(format!(
                "{}: the replay's iteration ({} ms) is {:+.1} % off ns-3's ({} ms), beyond the \
                 {:.0} % the validation suite bounds",
                l.policy,
                ms(r),
                100.0 * err,
                ms(n),
                100.0 * VALIDATED_ERROR_BOUND
            ));
        }
    }
    // the ranking: every pair the two back-ends order the other way round
    let both: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].speedup.is_some() && lines[i].ns3_speedup.is_some())
        .collect();
    let mut flipped = Vec::new();
    for (k, &i) in both.iter().enumerate() {
        for &j in &both[k + 1..] {
            let (a, b) = (&lines[i], &lines[j]);
            let replay = a.speedup.partial_cmp(&b.speedup);
            let ns3 = a.ns3_speedup.partial_cmp(&b.ns3_speedup);
            use std::cmp::Ordering::{Greater, Less};
            if matches!(
                (replay, ns3),
                (Some(Greater), Some(Less)) | (Some(Less), Some(Greater))
            ) {
                flipped.push((i, j));
            }
        }
    }
    if !flipped.is_empty() {
        let pairs = flipped.len();
        let total = both.len() * both.len().saturating_sub(1) / 2;
        let shown: Vec<String> = flipped
            .iter()
            .take(3)
            .map(|&(i, j)| {
                let (a, b) = (&lines[i], &lines[j]);
                let f = |x: Option<f64>| x.map_or(String::new(), |x| format!("{x:.3}"));
                format!(
                    "{} vs {}: replay {} / {}, ns-3 {} / {}",
                    a.policy,
                    b.policy,
                    f(a.speedup),
                    f(b.speedup),
                    f(a.ns3_speedup),
                    f(b.ns3_speedup)
                )
            })
            .collect();
        for &(i, j) in &flipped {
            lines[i].warned = true;
            lines[j].warned = true;
        }
        out.push(format!(
            "the back-ends rank {pairs} of {total} policy pairs the other way round ({}{})",
            shown.join("; "),
            if pairs > 3 { "; …" } else { "" }
        ));
    }
    out
}

/// The best line by `key` (the first of equals), if any line has it.
fn best(lines: &[Line], key: fn(&Line) -> Option<f64>) -> Option<&Line> {
    lines
        .iter()
        .filter(|l| key(l).is_some())
        .fold(None, |b: Option<&Line>, l| match b {
            Some(b) if key(b) >= key(l) => Some(b),
            _ => Some(l),
        })
}

/// The text `ina3d run` prints: the table, then the best policy, then any warning.
pub fn summary(t: &ResultsTable) -> String {
    let mut lines = lines(t);
    let warnings = disagreements(&mut lines);
    let seeds = match t.column("seeds") {
        Some(super::Values::Text(v)) => v.first().cloned(),
        _ => None,
    };
    let several = seeds.is_some();
    let any = |f: fn(&Line) -> bool| lines.iter().any(f);
    let has_ns3 = any(|l| l.ns3_ms.is_some());
    let has_plan = any(|l| l.prediction_error.is_some());

    let cell = |f: &dyn Fn(&Line) -> String| lines.iter().map(f).collect::<Vec<String>>();
    let mut cols = vec![
        Cells::left("policy", cell(&|l| l.policy.clone())),
        Cells::right(
            if several {
                "iteration ms (range)"
            } else {
                "iteration ms"
            },
            cell(&|l| with_range(l.iteration_ms, l.iteration_range_ms, ms)),
        ),
        Cells::right(
            if several {
                "speed-up (range)"
            } else {
                "speed-up"
            },
            cell(&|l| with_range(l.speedup, l.speedup_range, |x| format!("{x:.3}"))),
        ),
    ];
    if has_ns3 {
        cols.push(Cells::right(
            "ns-3 ms",
            cell(&|l| l.ns3_ms.map_or(String::new(), ms)),
        ));
        cols.push(Cells::right(
            "ns-3 speed-up",
            cell(&|l| l.ns3_speedup.map_or(String::new(), |x| format!("{x:.3}"))),
        ));
    }
    if has_plan {
        cols.push(Cells::right(
            "plan error",
            cell(&|l| {
                l.prediction_error
                    .map_or(String::new(), |e| format!("{:+.1} %", 100.0 * e))
            }),
        ));
    }
    if !warnings.is_empty() {
        cols.push(Cells::left(
            "",
            cell(&|l| if l.warned { "!" } else { "" }.to_string()),
        ));
    }
    let mut out = layout(&cols);
    let _ = writeln!(
        out,
        "speed-up = ring's iteration / the policy's{}",
        match &seeds {
            Some(s) => format!(
                ", same ECMP seed; median (range) over seeds {}",
                seed_list(s)
            ),
            None => String::new(),
        }
    );
    out.push_str(&verdict(&lines, has_ns3));
    for w in &warnings {
        out.push_str(&wrap(&format!("warning: {w}"), MAX_WIDTH, "  "));
    }
    out
}

/// `text` broken at spaces into lines of at most `width` characters (a longer word stays
/// whole), the lines after the first indented by `indent`.
fn wrap(text: &str, width: usize, indent: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split(' ') {
        let len = line.chars().count();
        if len > indent.len() && len + 1 + word.chars().count() > width {
            out.push_str(line.trim_end());
            out.push('\n');
            line = indent.to_string();
        } else if !line.is_empty() && !line.ends_with(' ') {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
    out
}

/// The `;`-separated seeds of `results.csv` for a person: runs of consecutive seeds as
/// `a–b`, and only the count when that is still long.
fn seed_list(seeds: &str) -> String {
    let v: Vec<u64> = seeds.split(';').filter_map(|x| x.parse().ok()).collect();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j].wrapping_add(1) {
            j += 1;
        }
        parts.push(match j - i {
            0 => v[i].to_string(),
            1 => format!("{}, {}", v[i], v[j]),
            _ => format!("{}–{}", v[i], v[j]),
        });
        i = j + 1;
    }
    let text = parts.join(", ");
    if text.chars().count() > 24 {
        format!("{} ({}, …)", v.len(), parts[0])
    } else {
        text
    }
}

/// The sentence naming the best policy (on each back-end when ns-3 ran).
fn verdict(lines: &[Line], has_ns3: bool) -> String {
    let mut s = String::new();
    match best(lines, |l| l.speedup) {
        Some(b) if b.policy != RING_POLICY && b.speedup > Some(1.0) => {
            let _ = write!(
                s,
                "best: {}, {:.3}× the ring's speed",
                b.policy,
                b.speedup.unwrap_or(1.0)
            );
            if let Some((lo, hi)) = b.speedup_range.filter(|(lo, hi)| lo != hi) {
                let _ = write!(s, " ({lo:.3}–{hi:.3} over the seeds)");
            }
        }
        _ => s.push_str("best: the ring; no INA policy is faster"),
    }
    if has_ns3 {
        match best(lines, |l| l.ns3_speedup) {
            Some(b) if b.policy != RING_POLICY && b.ns3_speedup > Some(1.0) => {
                let _ = write!(
                    s,
                    "; on ns-3: {}, {:.3}×",
                    b.policy,
                    b.ns3_speedup.unwrap_or(1.0)
                );
            }
            Some(_) => s.push_str("; on ns-3: the ring"),
            None => {}
        }
    }
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::results::tests::row;
    use crate::report::{results_table, seeds_table, PolicyResult};

    #[test]
    fn one_line_per_policy_in_milliseconds_and_the_best_named() {
        let t = results_table(&[
            row("ring", 428_200_000, None),
            row("ina-dp", 396_000_000, None),
            row("plan-exact", 385_000_000, None),
        ])
        .unwrap();
        let s = summary(&t);
        let l: Vec<&str> = s.lines().collect();
        assert!(l[0].starts_with("policy") && l[0].contains("iteration ms"));
        assert!(l[1].starts_with("ring") && l[1].contains("428.2"), "{s}");
        // 428.2 / 385.0 = 1.1122
        assert!(l[3].contains("385.0") && l[3].contains("1.112"), "{s}");
        assert!(s.contains("best: plan-exact, 1.112×"), "{s}");
        assert!(!s.contains("warning"), "{s}");
        assert!(s.lines().all(|x| x.chars().count() <= MAX_WIDTH));
    }

    #[test]
    fn columns_are_as_wide_as_their_widest_cell_text_left_numbers_right() {
        let t = layout(&[
            Cells::left("policy", vec!["ring".into(), "plan-exact".into()]),
            Cells::right("ms", vec!["428.2".into(), "1.5".into()]),
            Cells::left("", vec!["".into(), "!".into()]),
        ]);
        assert_eq!(
            t,
            "policy         ms\nring        428.2\nplan-exact    1.5  !\n"
        );
    }

    #[test]
    fn long_warnings_wrap_under_the_width_with_a_hanging_indent() {
        let w = wrap(&"word ".repeat(50), 30, "  ");
        assert!(w.lines().all(|l| l.chars().count() <= 30), "{w}");
        assert!(w.lines().skip(1).all(|l| l.starts_with("  word")), "{w}");
        assert_eq!(w.split_whitespace().count(), 50);
        assert_eq!(wrap("short", 30, "  "), "short\n");
    }

    #[test]
    fn seeds_are_listed_as_ranges_or_counted() {
        assert_eq!(seed_list("0;1;2;3;4;5;6;7"), "0–7");
        assert_eq!(seed_list("3;9;10"), "3, 9, 10");
        assert_eq!(seed_list("0;1;2;5;6;7;8"), "0–2, 5–8");
        let many: Vec<String> = (0..40).map(|i| (3 * i).to_string()).collect();
        assert_eq!(seed_list(&many.join(";")), "40 (0, …)");
    }

    #[test]
    fn no_faster_policy_names_the_ring() {
        let t = results_table(&[row("ring", 100, None), row("rina", 120, None)]).unwrap();
        assert!(summary(&t).contains("best: the ring; no INA policy is faster"));
    }

    #[test]
    fn seeds_give_ranges_and_the_widest_table_fits_a_100_column_terminal() {
        let names = [
            "ring",
            "ina-dp",
            "ina-tp",
            "ina-tp-dp",
            "plan",
            "plan-exact",
            "atp",
            "rina",
            "sharp",
        ];
        // iterations of 99 s with ns-3 and a planner row: every column at its widest
        let per_seed: Vec<(u64, Vec<PolicyResult>)> = (0..3)
            .map(|s| {
                let rows = names
                    .iter()
                    .enumerate()
                    .map(|(k, p)| {
                        let t = 99_000_000_000 - 1_000_000_000 * (k as u64) * (s + 1);
                        let mut r = row(p, t, Some(t + 7_000_000_000));
                        if p.starts_with("plan") {
                            r.plan = Some(crate::report::PlanFigures {
                                predicted_ns: t as f64 * 0.9,
                                gap: 0.0,
                                solve_wall_time_ns: 1,
                            });
                        }
                        r
                    })
                    .collect();
                (s, rows)
            })
            .collect();
        let s = summary(&seeds_table(&per_seed).unwrap());
        for l in s.lines() {
            assert!(l.chars().count() <= MAX_WIDTH, "{} chars: {l}", l.len());
        }
        // ina-dp over the seeds: 98, 97, 96 s against 99 s
        assert!(s.contains("97000 (96000–98000)"), "{s}");
        assert!(s.contains("-10.0 %"), "{s}");
        assert!(s.contains("seeds 0–2"), "{s}");
    }

    #[test]
    fn a_flipped_ranking_and_an_error_beyond_the_bound_are_warned_and_marked() {
        // replay: ina-dp 1.25× the ring; ns-3: 0.8× (ranks it slower) and 87.5 % off
        let t = results_table(&[
            row("ring", 1_000_000, Some(1_200_000)),
            row("ina-dp", 800_000, Some(1_500_000)),
        ])
        .unwrap();
        let s = summary(&t);
        assert!(
            s.contains("rank 1 of 1 policy pairs the other way round"),
            "{s}"
        );
        assert!(
            s.contains("ina-dp vs ring") || s.contains("ring vs ina-dp"),
            "{s}"
        );
        assert!(
            s.contains("ina-dp: the replay's iteration (0.800 ms) is -46.7 %"),
            "{s}"
        );
        assert!(s.contains("on ns-3: the ring"), "{s}");
        let marked: Vec<&str> = s.lines().filter(|l| l.ends_with('!')).collect();
        assert_eq!(marked.len(), 2, "{s}");
    }

    #[test]
    fn agreeing_back_ends_within_the_bound_give_no_warning() {
        let t = results_table(&[
            row("ring", 1_000_000, Some(1_020_000)),
            row("ina-dp", 800_000, Some(830_000)),
        ])
        .unwrap();
        let s = summary(&t);
        assert!(!s.contains("warning") && !s.contains('!'), "{s}");
        assert!(s.contains("on ns-3: ina-dp, 1.229×"), "{s}");
    }
}
