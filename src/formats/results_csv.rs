//! `results.csv` (written by `ina3d run` through `report::write_csv`): one row per policy,
//! the columns of `report::RESULTS_COLUMNS` (plus `report::SEED_COLUMNS` over several
//! seeds). Read back as text cells, for `ina3d sweep collect`, which merges the tables of
//! many runs and types each column once over all of them.
//!
//! The reader checks the table's shape only — a header naming `policy`, no column twice,
//! every row as long as the header, at least one row — so columns added later are carried
//! through unchanged.

use super::csv_rows::csv_error;
use super::FormatError;
use std::path::Path;

/// The column every results table has.
pub const POLICY_COLUMN: &str = "policy";

/// A results table as text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResultsText {
    /// Column names, in file order.
    pub columns: Vec<String>,
    /// Rows, each as long as `columns`; empty strings for empty cells.
    pub rows: Vec<Vec<String>>,
}

/// Reads `path`.
pub fn read(path: &Path) -> Result<ResultsText, FormatError> {
    super::atomic::check_complete(path)?;
    let f = std::fs::File::open(path).map_err(FormatError::io(path))?;
    read_from(path, std::io::BufReader::new(f))
}

/// [`read`] from any reader; `path` names it in errors.
pub fn read_from(path: &Path, input: impl std::io::Read) -> Result<ResultsText, FormatError> {
    let mut rdr = csv::ReaderBuilder::new().from_reader(input);
    let columns: Vec<String> = rdr
        .headers()
        .map_err(|e| csv_error(path, e, &[]))?
        .iter()
        .map(str::to_string)
        .collect();
    if columns.iter().all(String::is_empty) {
        return Err(FormatError::file(
            path,
            "empty: no header line (expected a results table)",
        ));
    }
    for (i, c) in columns.iter().enumerate() {
        if columns[..i].contains(c) {
            return Err(FormatError::syntax(
                path,
                1,
                c.as_str(),
                "column named twice",
            ));
        }
    }
    if !columns.iter().any(|c| c == POLICY_COLUMN) {
        return Err(FormatError::syntax(
            path,
            1,
            POLICY_COLUMN,
            "missing column: a results table has one row per policy",
        ));
    }
    let mut rows = Vec::new();
    for r in rdr.records() {
        let r = r.map_err(|e| csv_error(path, e, &columns))?;
        rows.push(r.iter().map(str::to_string).collect());
    }
    if rows.is_empty() {
        return Err(FormatError::file(
            path,
            "no rows: a results table has one row per policy",
        ));
    }
    Ok(ResultsText { columns, rows })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ResultsText, FormatError> {
        read_from(Path::new("results.csv"), text.as_bytes())
    }

    #[test]
    fn a_table_is_read_as_text_cells_with_empty_cells_kept() {
        let t = parse("policy,iteration_time_ns,ns3_iteration_time_ns\nring,10,\nina-dp,8,7\n")
            .unwrap();
        assert_eq!(
            t.columns,
            ["policy", "iteration_time_ns", "ns3_iteration_time_ns"]
        );
        assert_eq!(t.rows, [["ring", "10", ""], ["ina-dp", "8", "7"]]);
    }

    #[test]
    fn a_short_row_is_an_error_naming_its_line() {
        let e = parse("policy,a\nring,1\nina-dp\n").unwrap_err().to_string();
        assert!(e.contains("results.csv:3"), "{e}");
    }

    #[test]
    fn tables_without_policy_rows_or_with_a_repeated_column_are_refused() {
        for (text, what) in [
            ("", "empty"),
            ("a,b\n1,2\n", "policy"),
            ("policy,a,a\nring,1,2\n", "twice"),
            ("policy,a\n", "no rows"),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(what), "{text:?}: {e}");
        }
    }

    proptest::proptest! {
        #[test]
        fn reading_arbitrary_bytes_never_panics(body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            let _ = read_from(Path::new("x.csv"), &body[..]);
        }

        #[test]
        fn near_valid_tables_are_read_or_refused_with_a_line(
            cells in proptest::collection::vec(proptest::collection::vec("[a-z0-9,\"\\.]{0,6}", 1..4), 1..5)
        ) {
            let mut text = String::from("policy,x,y\n");
            for row in &cells {
                text.push_str(&row.join(","));
                text.push('\n');
            }
            match parse(&text) {
                Ok(t) => proptest::prop_assert!(t.rows.iter().all(|r| r.len() == 3)),
                Err(e) => proptest::prop_assert!(e.to_string().starts_with("results.csv"), "{}", e),
            }
        }
    }
}
