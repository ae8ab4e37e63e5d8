//! Grid files: which runs a sweep is made of.
//!
//! ```toml
//! # Keep only the cells for which this is true (optional; before the first table).
//! filter = "not (collective == 'hd' and tp > 1)"
//!
//! [base]              # options every cell shares
//! input = "traces/example/tiny.toml"
//! ns3 = "off"
//!
//! [axes]              # one axis per key: the cells are the cartesian product
//! ina-slots = [256, 8192]
//! collective = ["ring", "hierarchical"]
//!
//! [[zip]]             # keys whose lists go together, index by index: one axis of tuples
//! tp = [1, 2]
//! dp = [4, 2]
//! ```
//!
//! Keys are the options of `ina3d run` ([`RunSpec`], [`crate::pipeline::RUN_OPTIONS`] and
//! Megatron's own flag names). The product runs over the axes and zip tables in file order,
//! the first slowest. Every error names the grid file, line and column: a malformed file,
//! an unknown key, a value the option does not take, an input or topology that cannot be
//! read, an empty axis, zipped lists of different lengths, a key given twice, a filter that
//! does not parse or evaluate, a filter that keeps no cell, two cells that are the same run.

use super::cell::{AxisValue, Cell, CellId};
use super::filter::{Filter, Value};
use crate::formats::FormatError;
use crate::pipeline::{OptionValue, RunSpec};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// The most cells a grid may expand to before filtering: a few lines of TOML can name a
/// product far larger than any sweep (and than memory).
pub const MAX_CELLS: u64 = 100_000;

type Lists = BTreeMap<Spanned<String>, Spanned<Vec<Spanned<toml::Value>>>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGrid {
    filter: Option<Spanned<String>>,
    base: Option<Spanned<BTreeMap<Spanned<String>, Spanned<toml::Value>>>>,
    axes: Option<Spanned<Lists>>,
    #[serde(default)]
    zip: Vec<Spanned<Lists>>,
}

/// A set of keys that vary together: one key of `[axes]`, or one `[[zip]]` table.
#[derive(Clone, Debug)]
struct Group {
    keys: Vec<(String, Range<usize>)>,
    /// One row per point of this axis: a value per key (and where it was written).
    rows: Vec<Vec<(AxisValue, Range<usize>)>>,
}

/// A parsed grid.
#[derive(Clone, Debug)]
pub struct Grid {
    /// The file.
    pub path: PathBuf,
    text: String,
    base: RunSpec,
    base_values: Vec<(String, AxisValue)>,
    base_span: Range<usize>,
    groups: Vec<Group>,
    /// The filter, where its string was written, and its text.
    filter: Option<(Filter, Range<usize>, String)>,
}

impl Grid {
    /// Reads and checks the grid file `path`.
    pub fn read(path: &Path) -> Result<Grid, FormatError> {
        let text = std::fs::read_to_string(path).map_err(FormatError::io(path))?;
        Grid::parse(path, &text)
    }

    /// Parses and checks grid text; `path` names it in errors.
    pub fn parse(path: &Path, text: &str) -> Result<Grid, FormatError> {
        let raw: RawGrid = toml::from_str(text).map_err(|e| {
            let at = e.span().map_or(0, |s| s.start);
            at_offset(
                path,
                text,
                at,
                "grid",
                e.message().trim().replace('\n', "; "),
            )
        })?;
        let mut g = Grid {
            path: path.to_path_buf(),
            text: text.to_string(),
            base: RunSpec::default(),
            base_values: Vec::new(),
            base_span: raw.base.as_ref().map_or(0..0, Spanned::span),
            groups: Vec::new(),
            filter: None,
        };
        let mut seen: BTreeMap<String, Range<usize>> = BTreeMap::new();
        if let Some(base) = raw.base {
            let mut entries: Vec<_> = base.into_inner().into_iter().collect();
            entries.sort_by_key(|(k, _)| k.span().start);
            for (k, v) in entries {
                g.key(&k, &mut seen, "base")?;
                let val = g.value(k.get_ref(), &v)?;
                let mut b = g.base.clone();
                g.set(&mut b, k.get_ref(), &val, v.span())?;
                g.base = b;
                g.base_values.push((k.into_inner(), val));
            }
        }
        let mut tables: Vec<(usize, Lists, bool)> = Vec::new();
        if let Some(a) = raw.axes {
            tables.push((a.span().start, a.into_inner(), false));
        }
        tables.extend(
            raw.zip
                .into_iter()
                .map(|z| (z.span().start, z.into_inner(), true)),
        );
        tables.sort_by_key(|t| t.0);
        for (at, lists, zipped) in tables {
            g.lists(at, lists, zipped, &mut seen)?;
        }
        if let Some(f) = raw.filter {
            g.filter(&f)?;
        }
        Ok(g)
    }

    fn err(&self, at: usize, field: &str, msg: impl Into<String>) -> FormatError {
        at_offset(&self.path, &self.text, at, field, msg.into())
    }

    /// A key: known, and not given twice.
    fn key(
        &self,
        k: &Spanned<String>,
        seen: &mut BTreeMap<String, Range<usize>>,
        table: &str,
    ) -> Result<(), FormatError> {
        let name = k.get_ref();
        let field = format!("{table}.{name}");
        RunSpec::check_name(name).map_err(|e| self.err(k.span().start, &field, e.to_string()))?;
        if let Some(first) = seen.get(name) {
            let (line, _) = line_col(&self.text, first.start);
            return Err(self.err(
                k.span().start,
                &field,
                format!("`{name}` is already set on line {line}: a key is either fixed in [base] or one axis"),
            ));
        }
        seen.insert(name.clone(), k.span());
        Ok(())
    }

    /// A TOML value as an option value.
    fn value(&self, key: &str, v: &Spanned<toml::Value>) -> Result<AxisValue, FormatError> {
        let scalar = |v: &toml::Value| -> Option<(String, Value)> {
            Some(match v {
                toml::Value::String(s) => (s.clone(), Value::Str(s.clone())),
                toml::Value::Integer(i) => (i.to_string(), Value::Int(*i)),
                toml::Value::Float(f) => (f.to_string(), Value::Float(*f)),
                toml::Value::Boolean(b) => (b.to_string(), Value::Bool(*b)),
                _ => return None,
            })
        };
        let bad = || {
            self.err(
                v.span().start,
                key,
                "expected text, a number, true/false or a list of them",
            )
        };
        match v.get_ref() {
            toml::Value::Array(items) => {
                let texts = items
                    .iter()
                    .map(|i| scalar(i).map(|s| s.0))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(bad)?;
                Ok(AxisValue {
                    typed: Value::Str(texts.join(",")),
                    option: OptionValue::List(texts),
                })
            }
            other => {
                let (text, typed) = scalar(other).ok_or_else(bad)?;
                Ok(AxisValue {
                    option: OptionValue::One(text),
                    typed,
                })
            }
        }
    }

    /// Sets `key` on `spec`, the error naming the value's place; inputs and topologies are
    /// read once here so a typo is reported against its line, not by every cell.
    fn set(
        &self,
        spec: &mut RunSpec,
        key: &str,
        v: &AxisValue,
        span: Range<usize>,
    ) -> Result<(), FormatError> {
        spec.set(key, &v.option)
            .map_err(|e| self.err(span.start, key, option_msg(e)))?;
        let check = match key {
            "input" => crate::megatron::load_input(&spec.job.input)
                .err()
                .map(|e| crate::pipeline::error_chain(&e)),
            "topology" => crate::topology::Topology::from_spec(&spec.job.topology)
                .err()
                .map(|e| crate::pipeline::error_chain(&e)),
            _ => None,
        };
        match check {
            Some(msg) => Err(self.err(span.start, key, msg)),
            None => Ok(()),
        }
    }

    /// One `[axes]` table (each key its own group) or one `[[zip]]` table (one group).
    fn lists(
        &mut self,
        at: usize,
        lists: Lists,
        zipped: bool,
        seen: &mut BTreeMap<String, Range<usize>>,
    ) -> Result<(), FormatError> {
        let table = if zipped { "zip" } else { "axes" };
        let mut entries: Vec<_> = lists.into_iter().collect();
        entries.sort_by_key(|(k, _)| k.span().start);
        let mut zip: Option<Group> = None;
        for (k, list) in entries {
            self.key(&k, seen, table)?;
            let field = format!("{table}.{}", k.get_ref());
            if list.get_ref().is_empty() {
                return Err(self.err(
                    list.span().start,
                    &field,
                    "no values: the product would be empty",
                ));
            }
            let mut values = Vec::new();
            for v in list.get_ref() {
                let val = self.value(k.get_ref(), v)?;
                self.set(&mut self.base.clone(), k.get_ref(), &val, v.span())?;
                values.push((val, v.span()));
            }
            let key = (k.get_ref().clone(), k.span());
            match zip.as_mut() {
                Some(z) if z.rows.len() != values.len() => {
                    return Err(self.err(
                        list.span().start,
                        &field,
                        format!(
                            "{} values where `{}` (line {}) has {}: zipped lists go together index by index",
                            values.len(),
                            z.keys[0].0,
                            line_col(&self.text, z.keys[0].1.start).0,
                            z.rows.len()
                        ),
                    ))
                }
                Some(z) => {
                    z.keys.push(key);
                    z.rows.iter_mut().zip(values).for_each(|(r, v)| r.push(v));
                }
                None => {
                    let g = Group {
                        keys: vec![key],
                        rows: values.into_iter().map(|v| vec![v]).collect(),
                    };
                    if zipped {
                        zip = Some(g);
                    } else {
                        self.groups.push(g);
                    }
                }
            }
        }
        match zip {
            Some(z) => self.groups.push(z),
            None if zipped => return Err(self.err(at, "zip", "a [[zip]] table with no keys")),
            None => {}
        }
        Ok(())
    }

    /// The filter: parses, and names only options.
    fn filter(&mut self, f: &Spanned<String>) -> Result<(), FormatError> {
        let src = f.get_ref();
        let span = f.span();
        let parsed = Filter::parse(src)
            .map_err(|e| self.err(self.filter_offset(&span, src, e.offset), "filter", e.msg))?;
        for (name, at) in parsed.names() {
            if !RunSpec::is_option(&name) {
                return Err(self.err(
                    self.filter_offset(&span, src, at),
                    "filter",
                    format!("`{name}` is not an option (filters name options: axes, [base] keys or any `ina3d run` option)"),
                ));
            }
        }
        self.filter = Some((parsed, span, src.clone()));
        Ok(())
    }

    /// The file offset of byte `at` of the filter expression: exact when the string is
    /// written on one line without escapes, else the string's start.
    fn filter_offset(&self, span: &Range<usize>, src: &str, at: usize) -> usize {
        let raw = &self.text[span.clone()];
        let quote = raw.chars().next().map_or(0, char::len_utf8);
        if raw.len() == src.len() + 2 * quote && &raw[quote..raw.len() - quote] == src {
            span.start + quote + at
        } else {
            span.start
        }
    }

    /// The options swept, in column order: every axis key, then every zipped key.
    pub fn axis_names(&self) -> Vec<String> {
        self.groups
            .iter()
            .flat_map(|g| g.keys.iter().map(|k| k.0.clone()))
            .collect()
    }

    /// Every cell the grid keeps, in product order (first axis slowest), numbered from 0.
    pub fn expand(&self) -> Result<Vec<Cell>, FormatError> {
        let total = self
            .groups
            .iter()
            .try_fold(1u64, |n, g| n.checked_mul(g.rows.len() as u64))
            .filter(|&n| n <= MAX_CELLS)
            .ok_or_else(|| {
                self.err(
                    self.groups.first().map_or(0, |g| g.keys[0].1.start),
                    "axes",
                    format!("the product has more than {MAX_CELLS} cells"),
                )
            })?;
        let mut cells: Vec<Cell> = Vec::new();
        let mut ids: BTreeMap<CellId, usize> = BTreeMap::new();
        let mut pick = vec![0usize; self.groups.len()];
        for _ in 0..total {
            if let Some(cell) = self.cell(&pick, cells.len())? {
                if let Some(&other) = ids.get(&cell.id) {
                    return Err(self.err(
                        self.first_value(&pick),
                        "axes",
                        format!(
                            "cells {} and {} are the same run (id {}): drop the repeated value",
                            describe(&cells[other]),
                            describe(&cell),
                            cell.id
                        ),
                    ));
                }
                ids.insert(cell.id.clone(), cell.index);
                cells.push(cell);
            }
            for (d, g) in pick.iter_mut().zip(&self.groups).rev() {
                *d += 1;
                if *d < g.rows.len() {
                    break;
                }
                *d = 0;
            }
        }
        if cells.is_empty() {
            let at = self.filter.as_ref().map_or(0, |f| f.1.start);
            return Err(self.err(
                at,
                "filter",
                format!("the filter keeps none of the {total} cells"),
            ));
        }
        Ok(cells)
    }

    /// Where the first axis value of a point of the product was written.
    fn first_value(&self, pick: &[usize]) -> usize {
        self.groups
            .first()
            .map_or(self.base_span.start, |g| g.rows[pick[0]][0].1.start)
    }

    /// The cell at `pick` (a row of each group), or `None` when the filter drops it.
    fn cell(&self, pick: &[usize], index: usize) -> Result<Option<Cell>, FormatError> {
        let mut spec = self.base.clone();
        let mut axes = Vec::new();
        for (g, &r) in self.groups.iter().zip(pick) {
            for ((key, _), (v, span)) in g.keys.iter().zip(&g.rows[r]) {
                spec.set(key, &v.option)
                    .map_err(|e| self.err(span.start, key, option_msg(e)))?;
                axes.push((key.clone(), v.clone()));
            }
        }
        if let Some((f, span, src)) = &self.filter {
            let lookup = |name: &str| -> Option<Value> {
                axes.iter()
                    .chain(&self.base_values)
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.typed.clone())
                    .or_else(|| spec.get(name).map(|t| typed(&t)))
            };
            let keep = f.keeps(&lookup).map_err(|e| {
                let at = self.filter_offset(span, src, e.offset);
                self.err(
                    at,
                    "filter",
                    format!("{} (in cell {})", e.msg, describe_axes(&axes)),
                )
            })?;
            if !keep {
                return Ok(None);
            }
        }
        spec.validate().map_err(|e| {
            self.err(
                self.first_value(pick),
                "axes",
                format!(
                    "cell {}: {} (a filter can leave such combinations out)",
                    describe_axes(&axes),
                    crate::pipeline::error_chain(&e)
                ),
            )
        })?;
        let id = CellId::of(&spec);
        Ok(Some(Cell {
            index,
            id,
            axes,
            spec,
        }))
    }
}

/// An option error without the option's name (the grid error names it as its field).
fn option_msg(e: crate::pipeline::OptionError) -> String {
    match e {
        crate::pipeline::OptionError::Invalid { msg, .. } => msg,
        other => other.to_string(),
    }
}

/// A default option's text as a typed value: an integer, a decimal, true/false, or text.
fn typed(t: &str) -> Value {
    if let Ok(i) = t.parse::<i64>() {
        Value::Int(i)
    } else if let Ok(x) = t.parse::<f64>() {
        Value::Float(x)
    } else if let Ok(b) = t.parse::<bool>() {
        Value::Bool(b)
    } else {
        Value::Str(t.to_string())
    }
}

fn describe_axes(axes: &[(String, AxisValue)]) -> String {
    if axes.is_empty() {
        return "[base]".into();
    }
    axes.iter()
        .map(|(k, v)| format!("{k}={}", v.typed))
        .collect::<Vec<_>>()
        .join(", ")
}

fn describe(c: &Cell) -> String {
    format!("{} ({})", c.index, describe_axes(&c.axes))
}

/// 1-based line and column (in characters) of byte `at` of `text`.
pub fn line_col(text: &str, at: usize) -> (u64, u64) {
    let at = at.min(text.len());
    let before = text.get(..at).unwrap_or(text);
    let line = before.matches('\n').count() as u64 + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) as u64 + 1;
    (line, col)
}

fn at_offset(path: &Path, text: &str, at: usize, field: &str, msg: String) -> FormatError {
    let (line, col) = line_col(text, at);
    FormatError::Syntax {
        path: path.to_path_buf(),
        line,
        column: Some(col),
        field: field.to_string(),
        msg,
    }
}
