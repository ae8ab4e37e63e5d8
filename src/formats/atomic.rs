//! The one atomic writer: every output file of ina3d is written through it.

use super::FormatError;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// The temporary name `path` is written under before the rename: `path` + `.tmp`.
pub fn temp_path(path: &Path) -> PathBuf {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    PathBuf::from(tmp)
}

/// Create the file `tmp` (an output's [`temp_path`]), and its directory first when it is
/// missing (an output named in a new directory is made there, as `-o DIR` outputs are).
pub fn create_temp(tmp: &Path) -> std::io::Result<std::fs::File> {
    if let Some(dir) = tmp.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::File::create(tmp)
}

/// Write `path` atomically: `body` writes into `path.tmp`, which is renamed over `path`
/// only once it is complete and flushed, so a crash or an error never leaves a
/// half-written file under the final name (the temporary is removed on error).
pub fn write_atomic(
    path: &Path,
    body: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), FormatError> {
    let tmp = temp_path(path);
    let result = (|| {
        let f = create_temp(&tmp)?;
        let mut w = BufWriter::new(f);
        body(&mut w)?;
        w.flush()?;
        w.into_inner().map_err(|e| e.into_error())?.sync_data()?;
        std::fs::rename(&tmp, path)
    })();
    result.map_err(|source| {
        let _ = std::fs::remove_file(&tmp);
        FormatError::Io {
            path: path.to_path_buf(),
            source,
        }
    })
}

/// [`write_atomic`] of a ready buffer.
pub fn write_atomic_bytes(path: &Path, bytes: &[u8]) -> Result<(), FormatError> {
    write_atomic(path, |w| w.write_all(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_output_in_a_missing_directory_is_written_there() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("new/sub/out.csv");
        write_atomic_bytes(&p, b"x\n").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"x\n");
        assert!(!temp_path(&p).exists());
    }

    #[test]
    fn a_failed_write_leaves_neither_the_file_nor_its_temporary() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out.csv");
        let e = write_atomic(&p, |w| {
            w.write_all(b"half")?;
            Err(std::io::Error::other("disk full"))
        })
        .unwrap_err();
        assert!(e.to_string().contains("out.csv"), "{e}");
        assert!(!p.exists());
        assert!(!temp_path(&p).exists());
    }

    #[test]
    fn a_complete_write_replaces_the_old_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out.csv");
        std::fs::write(&p, "old").unwrap();
        write_atomic_bytes(&p, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
    }
}
