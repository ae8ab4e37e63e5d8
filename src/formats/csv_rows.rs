//! Typed CSV reading shared by the CSV formats of [`crate::formats`]: a header line that
//! must name the required columns, rows deserialised by name (extra columns ignored, as
//! later versions may add some), and errors that name the file, line and column.

use super::FormatError;
use serde::de::DeserializeOwned;
use std::path::Path;

/// Read every row of the CSV file `path` as a `T`. `required` are the columns that must
/// be in the header; `what` says what the file is, for the "empty" message.
pub fn read_rows<T: DeserializeOwned>(
    path: &Path,
    required: &[&str],
    what: &str,
) -> Result<Vec<T>, FormatError> {
    super::atomic::check_complete(path)?;
    let f = std::fs::File::open(path).map_err(FormatError::io(path))?;
    read_rows_from(path, std::io::BufReader::new(f), required, what)
}

/// [`read_rows`] from any reader; `path` names it in errors.
pub fn read_rows_from<T: DeserializeOwned>(
    path: &Path,
    input: impl std::io::Read,
    required: &[&str],
    what: &str,
) -> Result<Vec<T>, FormatError> {
    let mut rdr = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_reader(input);
    let headers: Vec<String> = rdr
        .headers()
        .map_err(|e| csv_error(path, e, &[]))?
        .iter()
        .map(str::to_string)
        .collect();
    if headers.iter().all(|h| h.is_empty()) {
        return Err(FormatError::file(
            path,
            format!("empty: no header line (expected {what})"),
        ));
    }
    if let Some(missing) = required.iter().find(|c| !headers.iter().any(|h| h == *c)) {
        return Err(FormatError::syntax(
            path,
            1,
            *missing,
            format!(
                "missing column; the header must name {}",
                required.join(",")
            ),
        ));
    }
    let header_record = csv::StringRecord::from(headers.clone());
    let mut rows = Vec::new();
    let mut record = csv::StringRecord::new();
    loop {
        match rdr.read_record(&mut record) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => return Err(csv_error(path, e, &headers)),
        }
        let row = record
            .deserialize::<T>(Some(&header_record))
            .map_err(|e| row_error(path, e, &headers, &record))?;
        rows.push(row);
    }
    Ok(rows)
}

/// A row that does not deserialise: name its column, found from serde's field index or,
/// where serde has none (an unknown enum variant), from the cell holding the value it
/// quotes.
fn row_error(
    path: &Path,
    e: csv::Error,
    headers: &[String],
    record: &csv::StringRecord,
) -> FormatError {
    let line = record.position().map(|p| p.line()).unwrap_or(0);
    let (field, why) = match e.kind() {
        csv::ErrorKind::Deserialize { err, .. } => {
            let msg = err.to_string();
            let quoted = msg.split('`').nth(1).unwrap_or("");
            let field = err
                .field()
                .and_then(|i| headers.get(i as usize).cloned())
                .or_else(|| {
                    if msg.starts_with("missing field") {
                        return Some(quoted.to_string());
                    }
                    record
                        .iter()
                        .position(|c| !quoted.is_empty() && c == quoted)
                        .and_then(|i| headers.get(i).cloned())
                })
                .unwrap_or_else(|| "row".into());
            (field, err.kind().to_string())
        }
        _ => ("row".into(), e.to_string()),
    };
    FormatError::syntax(path, line, field, why)
}

/// A csv-crate error as a [`FormatError`] naming line and field.
pub fn csv_error(path: &Path, e: csv::Error, headers: &[String]) -> FormatError {
    let line = e.position().map(|p| p.line()).unwrap_or(0);
    match e.kind() {
        csv::ErrorKind::Io(_) => FormatError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::other(e.to_string()),
        },
        csv::ErrorKind::Deserialize { err, .. } => {
            let field = err
                .field()
                .and_then(|i| headers.get(i as usize))
                .cloned()
                .or_else(|| {
                    // serde names a missing field in its message: "missing field `x`".
                    err.to_string().split('`').nth(1).map(str::to_string)
                })
                .unwrap_or_else(|| "?".into());
            FormatError::syntax(path, line, field, err.kind().to_string())
        }
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => FormatError::syntax(
            path,
            line,
            "row",
            format!("{len} fields where the header has {expected_len}"),
        ),
        _ => FormatError::syntax(path, line, "row", e.to_string()),
    }
}

/// Write `rows` as CSV (header from `T`'s field names) into `w`.
pub fn write_rows<T: serde::Serialize>(
    w: &mut dyn std::io::Write,
    rows: impl IntoIterator<Item = T>,
) -> std::io::Result<()> {
    let mut c = csv::Writer::from_writer(w);
    for r in rows {
        c.serialize(r)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
    }
    c.flush()
}
