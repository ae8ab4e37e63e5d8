//! Where a configuration field's value came from: what an error message or a warning
//! points at, and what the parsed configuration records per field.

use serde::{Deserialize, Serialize};

/// Where a field's value came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Source {
    /// A line of an input file.
    File {
        /// Path as given.
        path: String,
        /// 1-based line.
        line: usize,
    },
    /// A named model preset.
    Preset {
        /// Preset name.
        name: String,
    },
    /// A command-line override.
    Override,
    /// Computed from other fields (e.g. DP from world size).
    Derived {
        /// How.
        how: String,
    },
    /// Megatron's default, not seen in any input.
    Default,
}
