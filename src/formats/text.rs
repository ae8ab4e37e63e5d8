//! Reading a text file as every reader of [`crate::formats`] does: refused under a
//! directory another process marked incomplete, invalid UTF-8 kept visible.

use super::atomic::check_complete;
use super::FormatError;
use std::path::Path;

/// Read a whole text file; invalid UTF-8 is replaced (these formats are ASCII, and a
/// stray byte should be reported where it stands, not as "not UTF-8").
pub fn read_text(path: &Path) -> Result<String, FormatError> {
    check_complete(path)?;
    let bytes = std::fs::read(path).map_err(FormatError::io(path))?;
    Ok(match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}
