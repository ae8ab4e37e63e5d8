//! The one error type of every reader and writer in [`crate::formats`].

use std::path::{Path, PathBuf};

/// Why a file could not be read or written. Every variant names the file; a syntax error
/// also names the 1-based line, the column where the reader knows it, and the field.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// The file could not be opened, read, created, written or renamed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// A line that does not follow the format.
    #[error("{}:{line}{}: {field}: {msg}", path.display(), column.map(|c| format!(":{c}")).unwrap_or_default())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: u64,
        /// 1-based column, where the reader knows it.
        column: Option<u64>,
        /// The field of the line (`header`, `src`, `rate`, …).
        field: String,
        /// What is wrong and what was expected.
        msg: String,
    },
    /// A whole-file problem: empty, no data row, counts that cannot be reconciled.
    #[error("{}: {msg}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        msg: String,
    },
}

impl FormatError {
    /// A syntax error at `path:line` in `field`.
    pub fn syntax(
        path: &Path,
        line: u64,
        field: impl Into<String>,
        msg: impl Into<String>,
    ) -> Self {
        FormatError::Syntax {
            path: path.to_path_buf(),
            line,
            column: None,
            field: escape_input(&field.into()),
            msg: escape_message(&msg.into()),
        }
    }

    /// A syntax error at `path:line:column` in `field`.
    pub fn at(
        path: &Path,
        line: u64,
        column: u64,
        field: impl Into<String>,
        msg: impl Into<String>,
    ) -> Self {
        FormatError::Syntax {
            path: path.to_path_buf(),
            line,
            column: Some(column),
            field: escape_input(&field.into()),
            msg: escape_message(&msg.into()),
        }
    }

    /// A whole-file problem.
    pub fn file(path: &Path, msg: impl Into<String>) -> Self {
        FormatError::File {
            path: path.to_path_buf(),
            msg: escape_message(&msg.into()),
        }
    }

    /// An I/O error on `path`.
    pub fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Self + '_ {
        move |source| FormatError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// The line the error points at, if any.
    pub fn line(&self) -> Option<u64> {
        match self {
            FormatError::Syntax { line, .. } => Some(*line),
            _ => None,
        }
    }
}

/// Whether `c` must not reach a terminal raw from an error: a control character (NUL,
/// escape, carriage return, …), a byte-order mark, or an invisible formatting character
/// (zero-width, bidirectional overrides) that would hide or reorder what is shown.
fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{feff}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `s` as an error may echo it: every control character (line breaks too), BOM and
/// invisible formatting character written as a Rust escape (`\0`, `\u{feff}`), the rest
/// as it is. The one helper every error quoting input goes through (file errors and the
/// command line's message, [`escape_message`]).
pub fn escape_input(s: &str) -> String {
    escape(s, false)
}

/// [`escape_input`] of a whole message, whose own line breaks (between its parts) stay.
pub fn escape_message(s: &str) -> String {
    escape(s, true)
}

fn escape(s: &str, keep_newlines: bool) -> String {
    if !s.chars().any(unsafe_char) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if keep_newlines && c == '\n' || !unsafe_char(c) {
            out.push(c);
        } else {
            out.extend(c.escape_default());
        }
    }
    out
}

/// The lines of `text`, numbered from 1, without their `\r\n` / `\n` ending: real files
/// from Windows tools end lines with CRLF.
pub fn numbered_lines(text: &str) -> impl Iterator<Item = (u64, &str)> {
    text.split('\n')
        .enumerate()
        .map(|(i, l)| (i as u64 + 1, l.strip_suffix('\r').unwrap_or(l)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_file_line_column_and_field() {
        let p = Path::new("dir/topology.txt");
        assert_eq!(
            FormatError::syntax(p, 3, "rate", "`x` is not a rate").to_string(),
            "dir/topology.txt:3: rate: `x` is not a rate"
        );
        assert_eq!(
            FormatError::at(p, 3, 7, "rate", "bad").to_string(),
            "dir/topology.txt:3:7: rate: bad"
        );
    }

    #[test]
    fn lines_are_numbered_from_one_and_lose_their_crlf() {
        let v: Vec<_> = numbered_lines("a\r\nb\n\nc").collect();
        assert_eq!(v, vec![(1, "a"), (2, "b"), (3, ""), (4, "c")]);
    }
}

/// Something odd but survivable in an input file, reported instead of dying: header
/// counts that disagree with the rows, free text after the data, a missing optional
/// column. Callers print them; nothing is dropped silently.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    /// The file.
    pub path: PathBuf,
    /// 1-based line number the warning is about.
    pub line: u64,
    /// What was odd and what was done about it.
    pub msg: String,
}

impl Warning {
    /// A warning about `path:line`.
    pub fn new(path: &Path, line: u64, msg: impl Into<String>) -> Self {
        Warning {
            path: path.to_path_buf(),
            line,
            msg: escape_message(&msg.into()),
        }
    }
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}: warning: {}",
            self.path.display(),
            self.line,
            self.msg
        )
    }
}
