//! The picture of a results table (`results.svg` beside `results.csv`, drawn with plotters'
//! SVG backend): on top, each policy's speed-up over the ring — the median as a dot, the
//! range over the ECMP seeds (or over a sweep's cells) as a bar, ns-3's speed-up as a
//! triangle when it ran — against the ring's 1.0; below, each policy's exposed
//! communication per class (tp, pp, dp, emb) stacked, in milliseconds.

use super::{ReportError, ResultsTable};
use crate::formats::results_csv::ResultsText;
use plotters::prelude::*;
use std::path::Path;

/// The classes whose exposed time is drawn, with their `results.csv` columns.
pub const CLASSES: [(&str, &str); 4] = [
    ("tp", "exposed_tp_ns"),
    ("pp", "exposed_pp_ns"),
    ("dp", "exposed_dp_ns"),
    ("emb", "exposed_emb_ns"),
];

/// What the picture shows of one policy.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyFigures {
    /// The policy.
    pub policy: String,
    /// Its (median) speed-up over the ring.
    pub speedup: f64,
    /// The range of the speed-up (seeds or cells), when there is one.
    pub speedup_range: Option<(f64, f64)>,
    /// ns-3's speed-up, when ns-3 ran.
    pub ns3_speedup: Option<f64>,
    /// Exposed time per class of [`CLASSES`], milliseconds.
    pub exposed_ms: [f64; 4],
}

/// The figures of each row of a results table (one seed or a seeds table).
pub fn figures(t: &ResultsTable) -> Vec<PolicyFigures> {
    t.policies()
        .iter()
        .enumerate()
        .map(|(i, p)| PolicyFigures {
            policy: (*p).to_string(),
            speedup: t.f64_at("speedup_vs_ring", i).unwrap_or(f64::NAN),
            speedup_range: t
                .f64_at("speedup_vs_ring_min", i)
                .zip(t.f64_at("speedup_vs_ring_max", i)),
            ns3_speedup: t.f64_at("ns3_speedup_vs_ring", i),
            exposed_ms: CLASSES.map(|(_, c)| t.f64_at(c, i).unwrap_or(0.0) / 1e6),
        })
        .collect()
}

/// The figures of a sweep, from its cells' `results.csv` (each a one-seed or a seeds
/// table): per policy, in the order first met, the median over the cells of each cell's
/// speed-up with the range over the cells, ns-3's median speed-up over the cells where it
/// ran, and the median exposed time per class.
pub fn over_cells(tables: &[&ResultsText]) -> Vec<PolicyFigures> {
    let mut order: Vec<String> = Vec::new();
    let mut values: std::collections::HashMap<(String, &str), Vec<f64>> = Default::default();
    let columns = ["speedup_vs_ring", "ns3_speedup_vs_ring"]
        .into_iter()
        .chain(CLASSES.iter().map(|(_, c)| *c));
    let columns: Vec<&str> = columns.collect();
    for t in tables {
        let at = |name: &str| t.columns.iter().position(|c| c == name);
        let Some(p) = at("policy") else { continue };
        for row in &t.rows {
            let policy = &row[p];
            if !order.contains(policy) {
                order.push(policy.clone());
            }
            for &c in &columns {
                if let Some(v) = at(c).and_then(|j| row[j].parse::<f64>().ok()) {
                    values.entry((policy.clone(), c)).or_default().push(v);
                }
            }
        }
    }
    let median = |p: &str, c: &str| -> Option<f64> {
        let mut v = values.get(&(p.to_string(), c))?.clone();
        v.sort_by(f64::total_cmp);
        super::median(&v)
    };
    let range = |p: &str, c: &str| -> Option<(f64, f64)> {
        let v = values.get(&(p.to_string(), c))?;
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (lo <= hi).then_some((lo, hi))
    };
    order
        .iter()
        .map(|p| PolicyFigures {
            policy: p.clone(),
            speedup: median(p, "speedup_vs_ring").unwrap_or(f64::NAN),
            speedup_range: range(p, "speedup_vs_ring"),
            ns3_speedup: median(p, "ns3_speedup_vs_ring"),
            exposed_ms: CLASSES.map(|(_, c)| median(p, c).unwrap_or(0.0) / 1e6),
        })
        .collect()
}

const WIDTH: u32 = 900;
const HEIGHT: u32 = 720;
const COLOURS: [RGBColor; 4] = [
    RGBColor(0x4c, 0x72, 0xb0),
    RGBColor(0x55, 0xa8, 0x68),
    RGBColor(0xc4, 0x4e, 0x52),
    RGBColor(0x81, 0x72, 0xb3),
];

/// The SVG text of the picture of `figs` under `title` (`range_of` names what the speed-up
/// ranges span: "seeds", "cells").
pub fn svg(title: &str, range_of: &str, figs: &[PolicyFigures]) -> Result<String, String> {
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let root = root
            .titled(title, ("sans-serif", 20))
            .map_err(|e| e.to_string())?;
        let (top, bottom) = root.split_vertically(HEIGHT / 2 - 10);
        speedups(&top, range_of, figs).map_err(|e| e.to_string())?;
        exposed(&bottom, figs).map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(text)
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;
type DrawResult = Result<(), DrawingAreaErrorKind<std::io::Error>>;

/// The x axis of both panels: policy `i` at `i`, named under its tick.
fn policy_label(figs: &[PolicyFigures]) -> impl Fn(&f64) -> String + '_ {
    move |x: &f64| {
        let i = x.round();
        if (x - i).abs() > 1e-9 || i < 0.0 {
            return String::new();
        }
        figs.get(i as usize)
            .map_or(String::new(), |f| f.policy.clone())
    }
}

fn speedups(area: &Area<'_>, range_of: &str, figs: &[PolicyFigures]) -> DrawResult {
    let n = figs.len();
    let values = figs.iter().flat_map(|f| {
        [f.speedup, f.ns3_speedup.unwrap_or(f.speedup)]
            .into_iter()
            .chain(f.speedup_range.map(|(a, b)| [a, b]).into_iter().flatten())
    });
    let (lo, hi) = values
        .filter(|v| v.is_finite())
        .fold((1.0f64, 1.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let pad = ((hi - lo) * 0.1).max(0.02);
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .caption(
            format!("speed-up over the ring (dot: median, bar: range over the {range_of})"),
            ("sans-serif", 15),
        )
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), (lo - pad)..(hi + pad))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n + 1)
        .x_label_formatter(&policy_label(figs))
        .y_desc("speed-up (×)")
        .y_label_formatter(&|y| format!("{y:.2}"))
        .draw()?;
    chart.draw_series(std::iter::once(PathElement::new(
        vec![(-0.5, 1.0), (n as f64 - 0.5, 1.0)],
        BLACK.mix(0.6).stroke_width(1),
    )))?;
    let blue = COLOURS[0];
    chart.draw_series(figs.iter().enumerate().filter_map(|(i, f)| {
        f.speedup_range.map(|(a, b)| {
            let x = i as f64;
            PathElement::new(vec![(x, a), (x, b)], blue.stroke_width(3))
        })
    }))?;
    chart
        .draw_series(
            figs.iter()
                .enumerate()
                .filter(|(_, f)| f.speedup.is_finite())
                .map(|(i, f)| Circle::new((i as f64, f.speedup), 5, blue.filled())),
        )?
        .label("replay")
        .legend(move |(x, y)| Circle::new((x, y), 5, blue.filled()));
    if figs.iter().any(|f| f.ns3_speedup.is_some()) {
        let red = COLOURS[2];
        chart
            .draw_series(figs.iter().enumerate().filter_map(|(i, f)| {
                f.ns3_speedup
                    .map(|s| TriangleMarker::new((i as f64 + 0.2, s), 6, red.filled()))
            }))?
            .label("ns-3")
            .legend(move |(x, y)| TriangleMarker::new((x, y), 6, red.filled()));
        chart
            .configure_series_labels()
            .border_style(BLACK.mix(0.3))
            .background_style(WHITE.mix(0.9))
            .draw()?;
    }
    Ok(())
}

fn exposed(area: &Area<'_>, figs: &[PolicyFigures]) -> DrawResult {
    let n = figs.len();
    let top = figs
        .iter()
        .map(|f| f.exposed_ms.iter().sum::<f64>())
        .fold(0.0f64, f64::max);
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .caption(
            "exposed communication per class (critical path, ms)",
            ("sans-serif", 15),
        )
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0.0..(top * 1.35).max(1e-3))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n + 1)
        .x_label_formatter(&policy_label(figs))
        .y_desc("ms")
        .draw()?;
    for (k, (class, _)) in CLASSES.iter().enumerate() {
        let colour = COLOURS[k];
        chart
            .draw_series(figs.iter().enumerate().map(|(i, f)| {
                let below: f64 = f.exposed_ms[..k].iter().sum();
                let x = i as f64;
                Rectangle::new(
                    [(x - 0.3, below), (x + 0.3, below + f.exposed_ms[k])],
                    colour.filled(),
                )
            }))?
            .label(*class)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], colour.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .border_style(BLACK.mix(0.3))
        .background_style(WHITE.mix(0.9))
        .draw()?;
    Ok(())
}

/// Writes the picture of `figs` to `path` (atomically).
pub fn write_svg(
    path: &Path,
    title: &str,
    range_of: &str,
    figs: &[PolicyFigures],
) -> Result<(), ReportError> {
    let text = svg(title, range_of, figs).map_err(|msg| ReportError::Plot {
        path: path.to_path_buf(),
        msg,
    })?;
    Ok(crate::formats::write_atomic_bytes(path, text.as_bytes())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig(policy: &str, speedup: f64, range: Option<(f64, f64)>) -> PolicyFigures {
        PolicyFigures {
            policy: policy.into(),
            speedup,
            speedup_range: range,
            ns3_speedup: None,
            exposed_ms: [1.0, 2.0, 30.0, 4.0],
        }
    }

    #[test]
    fn the_picture_names_every_policy_and_draws_a_range_bar_per_policy_with_one() {
        let figs = [
            fig("ring", 1.0, None),
            fig("ina-dp", 1.08, Some((0.99, 1.15))),
            fig("plan-exact", 1.10, Some((1.08, 1.19))),
        ];
        let s = svg("example", "seeds", &figs).unwrap();
        assert!(s.starts_with("<svg"), "{}", &s[..60]);
        for name in [
            "ring",
            "ina-dp",
            "plan-exact",
            "tp",
            "pp",
            "dp",
            "emb",
            "example",
        ] {
            assert!(
                s.contains(&format!(">\n{name}\n</text>")),
                "{name} not drawn"
            );
        }
        // the same figures give the same bytes
        assert_eq!(s, svg("example", "seeds", &figs).unwrap());
        // no ns-3 figures: no ns-3 legend
        assert!(!s.contains(">\nns-3\n</text>"));
        let mut with_ns3 = figs.clone();
        with_ns3[1].ns3_speedup = Some(0.97);
        assert!(svg("example", "seeds", &with_ns3)
            .unwrap()
            .contains(">\nns-3\n</text>"));
    }

    #[test]
    fn a_sweep_s_figures_are_medians_and_ranges_over_its_cells() {
        let cell = |dp: f64, ns3: &str| ResultsText {
            columns: [
                "policy",
                "speedup_vs_ring",
                "ns3_speedup_vs_ring",
                "exposed_dp_ns",
            ]
            .map(String::from)
            .to_vec(),
            rows: vec![
                ["ring", "1.0", ns3, "4000000"].map(String::from).to_vec(),
                ["ina-dp", &dp.to_string(), "", "2000000"]
                    .map(String::from)
                    .to_vec(),
            ],
        };
        let (a, b, c) = (cell(1.2, "1.0"), cell(0.9, ""), cell(1.1, "1.0"));
        let f = over_cells(&[&a, &b, &c]);
        assert_eq!(f.len(), 2);
        assert_eq!(f[1].policy, "ina-dp");
        assert_eq!(f[1].speedup, 1.1);
        assert_eq!(f[1].speedup_range, Some((0.9, 1.2)));
        assert_eq!((f[0].ns3_speedup, f[1].ns3_speedup), (Some(1.0), None));
        assert_eq!(f[0].exposed_ms, [0.0, 0.0, 4.0, 0.0]);
    }
}
