//! Errors of the Megatron front-end. Every message reads `where: field: what was expected`,
//! where `where` is `path:line:col` when the problem sits in an input file, so a user can
//! jump straight to it from a terminal or an editor.

use super::source::Source;
use std::fmt;

/// A position in an input: file, 1-based line and 1-based column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loc {
    /// Path as given by the user.
    pub path: String,
    /// 1-based line (0 when the whole file is meant).
    pub line: usize,
    /// 1-based column (0 when the whole line is meant).
    pub col: usize,
}

impl Loc {
    /// A position in `path`.
    pub fn new(path: impl Into<String>, line: usize, col: usize) -> Self {
        Loc {
            path: path.into(),
            line,
            col,
        }
    }
}

impl fmt::Display for Loc {
    /// `path:line:col`; only `path` when no line is meant (an override, a grid value).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            return write!(f, "{}", self.path);
        }
        write!(f, "{}:{}:{}", self.path, self.line, self.col)
    }
}

/// Describes a [`Source`] the way an error message should point at it.
pub(crate) fn source_place(s: &Source) -> String {
    match s {
        Source::File { path, line } => format!("{path}:{line}:1"),
        Source::Preset { name } => format!("preset:{name}"),
        Source::Override => "override".to_string(),
        Source::Derived { how } => format!("derived ({how})"),
        Source::Default => "megatron-default".to_string(),
    }
}

/// Everything that can go wrong while reading a Megatron job.
#[derive(Debug, thiserror::Error)]
pub enum MegatronError {
    /// A value or a line does not have the expected shape.
    #[error("{at}: {field}: {expected}")]
    Syntax {
        /// Where (`path:line:col`, or `override`, `preset:NAME`).
        at: String,
        /// Megatron argument (or structure) concerned.
        field: String,
        /// What was expected, and what was found.
        expected: String,
    },
    /// An input file could not be read.
    #[error("{path}:0:0: file: cannot be read ({source})")]
    Io {
        /// Path as given.
        path: String,
        /// OS error.
        #[source]
        source: std::io::Error,
    },
    /// The inputs, taken together, do not define a required argument.
    #[error("{at}: {field}: required argument not found in any input ({hint})")]
    Missing {
        /// The inputs searched.
        at: String,
        /// Megatron argument name.
        field: String,
        /// What would have provided it.
        hint: String,
    },
    /// A bash variable a flag depends on has no value in the script.
    #[error("{at}: {field}: variable `{var}` is not set in the script (set it there, or pass the value as an override)")]
    Unresolved {
        /// `path:line:col` of the flag.
        at: String,
        /// The flag, e.g. `--tensor-model-parallel-size`.
        field: String,
        /// The variable.
        var: String,
    },
    /// A flag's value depends on something the script reader cannot decide from the file
    /// alone (a condition on an unset variable, a `while` loop, a file test).
    #[error("{at}: {field}: {why} (decide it in the script, or pass the value as an override)")]
    Undecidable {
        /// `path:line:col` of the flag.
        at: String,
        /// The flag.
        field: String,
        /// What could not be decided, naming where.
        why: String,
    },
    /// Sizes that contradict each other (see [`super::TrainingConfig::validate`]).
    #[error("{at}: {field}: {expected}")]
    Inconsistent {
        /// Where the first of the disagreeing values came from.
        at: String,
        /// The field found inconsistent.
        field: String,
        /// Which numbers disagree.
        expected: String,
    },
}

impl MegatronError {
    /// A syntax error at a file position.
    pub(crate) fn at(loc: &Loc, field: impl Into<String>, expected: impl Into<String>) -> Self {
        MegatronError::Syntax {
            at: loc.to_string(),
            field: crate::formats::escape_input(&field.into()),
            expected: crate::formats::escape_message(&expected.into()),
        }
    }
}

/// Something an input said that the reader could not use as written, or had to decide
/// without certainty: reported, never silently applied or dropped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    /// `path:line:col`, or `override`, `preset:NAME`.
    pub at: String,
    /// The argument or structure concerned.
    pub field: String,
    /// What happened and what was assumed.
    pub message: String,
}

impl Warning {
    /// A warning at a file position.
    pub(crate) fn at(loc: &Loc, field: impl Into<String>, message: impl Into<String>) -> Self {
        Warning {
            at: loc.to_string(),
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.at, self.field, self.message)
    }
}
