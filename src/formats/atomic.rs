//! The one atomic writer: every output file of ina3d is written through it.
//!
//! Two more guarantees for a run that is stopped part way (an error, SIGINT, SIGTERM):
//!
//! - every temporary this process has open is listed ([`create_temp`] adds it,
//!   [`settled`] drops it), so the command line's signal handler removes them all
//!   ([`remove_temporaries`]) before it exits;
//! - a command writing a set of files into a directory marks it first ([`OutputSet`]: the
//!   file [`INCOMPLETE`] in it) and unmarks it when the set is whole; every reader refuses
//!   a file under a marked directory ([`check_complete`]), unless the marking process is
//!   itself reading what it writes.

use super::FormatError;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Temporaries this process is writing.
static TEMPS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Directories this process has marked incomplete (canonical paths).
static OWN_MARKS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// The marker file of a directory whose output set is being written, or was interrupted.
pub const INCOMPLETE: &str = ".ina3d-incomplete";

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `tmp` is gone (renamed to its final name or removed): no longer this process's to clean.
pub fn settled(tmp: &Path) {
    lock(&TEMPS).retain(|p| p != tmp);
}

/// Removes every temporary this process still has open (the signal handler's cleanup);
/// returns how many were removed.
pub fn remove_temporaries() -> usize {
    let temps = std::mem::take(&mut *lock(&TEMPS));
    temps
        .iter()
        .filter(|p| std::fs::remove_file(p).is_ok())
        .count()
}

/// A directory whose set of outputs is being written: marked by [`INCOMPLETE`] from
/// [`OutputSet::begin`] until [`OutputSet::finish`]. A set left unfinished (an error, a
/// signal, a crash) keeps its marker, and every reader refuses its files.
#[derive(Debug)]
pub struct OutputSet {
    dir: PathBuf,
    marker: PathBuf,
}

impl OutputSet {
    /// Creates `dir` if needed and marks it: `what` (the command) is writing it.
    pub fn begin(dir: &Path, what: &str) -> Result<OutputSet, FormatError> {
        std::fs::create_dir_all(dir).map_err(FormatError::io(dir))?;
        let marker = dir.join(INCOMPLETE);
        let text = format!(
            "`{what}` (process {}) is writing this directory. If no ina3d is running, it was \
             interrupted: its files are not a whole set and ina3d refuses to read them; run \
             the command again.\n",
            std::process::id()
        );
        std::fs::write(&marker, text).map_err(FormatError::io(&marker))?;
        let dir = dir.canonicalize().map_err(FormatError::io(dir))?;
        lock(&OWN_MARKS).push(dir.clone());
        Ok(OutputSet { dir, marker })
    }

    /// The set is whole: remove the marker.
    pub fn finish(self) -> Result<(), FormatError> {
        lock(&OWN_MARKS).retain(|d| d != &self.dir);
        std::fs::remove_file(&self.marker).map_err(FormatError::io(&self.marker))
    }
}

/// How many directories up from a file [`check_complete`] looks for a marker: the file's
/// own and three above it, as deep as any output set nests (`run`'s
/// `DIR/seed-<s>/<policy>/replay/`), and no further, so a stale marker far up (in a home
/// directory) does not stop every read below it.
pub const MARK_DEPTH: usize = 4;

/// Refuses `path` when it lies in a directory (or up to [`MARK_DEPTH`] − 1 levels under
/// one) that another process marked incomplete ([`OutputSet`]): an interrupted run's half
/// set is never read as a result.
pub fn check_complete(path: &Path) -> Result<(), FormatError> {
    let start = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(d) => d.canonicalize(),
        None => std::env::current_dir(),
    };
    let Ok(start) = start else {
        return Ok(()); // a missing directory: the read itself will say so
    };
    let own = lock(&OWN_MARKS).clone();
    // the deepest output set is `run`'s: DIR/seed-<s>/<policy>/replay/fct.csv
    for dir in start.ancestors().take(MARK_DEPTH) {
        if dir.join(INCOMPLETE).is_file() && !own.iter().any(|d| d == dir) {
            return Err(FormatError::file(
                path,
                format!(
                    "{} is marked incomplete ({}): an ina3d command writing it was interrupted \
                     or is still running; run it again",
                    dir.display(),
                    INCOMPLETE
                ),
            ));
        }
    }
    Ok(())
}

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
    lock(&TEMPS).push(tmp.to_path_buf());
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
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    settled(&tmp);
    result.map_err(|source| FormatError::Io {
        path: path.to_path_buf(),
        source,
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
    fn a_marked_directory_is_refused_by_other_processes_only_until_finished() {
        let d = tempfile::tempdir().unwrap();
        let sub = d.path().join("run/seed-0/ina-dp/replay");
        write_atomic_bytes(&sub.join("fct.csv"), b"x\n").unwrap();
        let set = OutputSet::begin(&d.path().join("run"), "ina3d run").unwrap();
        // the marking process reads its own set
        check_complete(&sub.join("fct.csv")).unwrap();
        // another process (here: the marker no longer ours) is refused, at any depth
        lock(&OWN_MARKS).clear();
        let e = check_complete(&sub.join("fct.csv"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("marked incomplete") && e.contains("fct.csv"),
            "{e}"
        );
        lock(&OWN_MARKS).push(d.path().join("run").canonicalize().unwrap());
        set.finish().unwrap();
        check_complete(&sub.join("fct.csv")).unwrap();
        assert!(!d.path().join("run").join(INCOMPLETE).exists());
        // a marker further up than an output set nests is not looked for
        let deep = d.path().join("a/b/c/d/e.csv");
        write_atomic_bytes(&deep, b"x").unwrap();
        std::fs::write(d.path().join(INCOMPLETE), "").unwrap();
        check_complete(&deep).unwrap();
    }

    #[test]
    fn temporaries_are_listed_while_open_and_removed_on_request() {
        let d = tempfile::tempdir().unwrap();
        let tmp = temp_path(&d.path().join("a.csv"));
        let _f = create_temp(&tmp).unwrap();
        assert!(lock(&TEMPS).contains(&tmp));
        assert!(remove_temporaries() >= 1);
        assert!(!tmp.exists());
        write_atomic_bytes(&d.path().join("b.csv"), b"b").unwrap();
        assert!(!lock(&TEMPS).iter().any(|p| p.starts_with(d.path())));
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
