//! The one atomic writer: every output file of ina3d is written through it.
//!
//! Two more guarantees for a run that is stopped part way (an error, SIGINT, SIGTERM):
//!
//! - every temporary this process has open is listed ([`create_temp`] adds it,
//!   [`settled`] drops it), so the command line's signal handler removes them all
//!   ([`remove_temporaries`]) before it exits;
//! - a command writing a set of files into a directory marks it first ([`OutputSet`]: the
//!   file [`INCOMPLETE`] in it, naming the command) and, when the set is whole, writes
//!   [`COMPLETE`] last (the command and the entries of the set) and removes the first;
//!   every reader refuses a file under a directory marked incomplete ([`check_complete`]),
//!   unless the marking process is itself reading what it writes, and a file under a
//!   complete directory but outside its listed entries (another run's leftover). A command
//!   writing into a directory it wrote before first clears what the earlier run listed, so
//!   stale and new results never mix.

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

/// The marker file of a directory whose output set was written completely: written last.
pub const COMPLETE: &str = ".ina3d-complete";

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
/// [`OutputSet::begin`] until [`OutputSet::finish`], which writes [`COMPLETE`] last. A set
/// left unfinished (an error, a signal, a crash) keeps its incompleteness marker, and every
/// reader refuses its files.
///
/// Both markers name the command (with what identifies its run, e.g. the seeds) and, when
/// the command declared them ([`OutputSet::with_members`]), the entries of the directory the
/// set consists of: a file under the directory but outside them (left by another run) is
/// refused by [`check_complete`] as not part of the set.
#[derive(Debug)]
pub struct OutputSet {
    dir: PathBuf,
    marker: PathBuf,
    what: String,
    members: Vec<String>,
}

/// The text of a marker: `command: …`, `process: …`, one `member: …` per entry, then what
/// the marker means for a reader.
fn marker_text(what: &str, members: &[String], meaning: &str) -> String {
    let mut t = format!("command: {what}\nprocess: {}\n", std::process::id());
    for m in members {
        t.push_str(&format!("member: {m}\n"));
    }
    t.push_str(meaning);
    t
}

/// The `member:` entries of a marker file (none when it has none or cannot be read).
pub fn marker_members(marker: &Path) -> Vec<String> {
    std::fs::read_to_string(marker)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix("member: "))
        .map(str::to_string)
        .collect()
}

/// The `command:` line of a marker file.
fn marker_command(marker: &Path) -> String {
    std::fs::read_to_string(marker)
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("command: "))
        .unwrap_or("an ina3d command")
        .to_string()
}

const INCOMPLETE_MEANING: &str = "This command is writing this directory. If no ina3d is \
running, it was interrupted: its files are not a whole set and ina3d refuses to read them; \
run the command again.\n";
const COMPLETE_MEANING: &str = "This command wrote this directory completely; the members \
listed (all of it when none are) are its set.\n";

impl OutputSet {
    /// Creates `dir` if needed and marks it: `what` (the command) is writing it. The set's
    /// entries are not declared: readers check only that it is finished.
    pub fn begin(dir: &Path, what: &str) -> Result<OutputSet, FormatError> {
        Self::with_members(dir, what, Vec::new(), |_| false)
    }

    /// [`OutputSet::begin`] of a set made of `members` (entries of `dir`, `/`-separated
    /// when nested), after clearing what an earlier run left: every entry an earlier
    /// marker of `dir` listed, and every entry for which `owned` holds (the command's own
    /// layout, for directories written before markers listed their members) when `dir`
    /// holds a marker or `results.csv`. Nothing else in `dir` is touched.
    pub fn with_members(
        dir: &Path,
        what: &str,
        members: Vec<String>,
        owned: impl Fn(&str) -> bool,
    ) -> Result<OutputSet, FormatError> {
        Self::start(dir, what, members, &owned, true)
    }

    /// [`OutputSet::with_members`] for a command that resumes: the entries an earlier
    /// marker listed stay (the command decides which of them it keeps); only those for
    /// which `owned` holds are cleared.
    pub fn resuming(
        dir: &Path,
        what: &str,
        members: Vec<String>,
        owned: impl Fn(&str) -> bool,
    ) -> Result<OutputSet, FormatError> {
        Self::start(dir, what, members, &owned, false)
    }

    fn start(
        dir: &Path,
        what: &str,
        members: Vec<String>,
        owned: &dyn Fn(&str) -> bool,
        clear_listed: bool,
    ) -> Result<OutputSet, FormatError> {
        std::fs::create_dir_all(dir).map_err(FormatError::io(dir))?;
        let marker = dir.join(INCOMPLETE);
        let done = dir.join(COMPLETE);
        let mut stale: Vec<String> = Vec::new();
        if clear_listed {
            stale.extend(marker_members(&marker));
            stale.extend(marker_members(&done));
        }
        let earlier = marker.is_file() || done.is_file() || dir.join("results.csv").is_file();
        // marked before anything is cleared, so a stop in between leaves it marked
        std::fs::write(&marker, marker_text(what, &members, INCOMPLETE_MEANING))
            .map_err(FormatError::io(&marker))?;
        if done.exists() {
            std::fs::remove_file(&done).map_err(FormatError::io(&done))?;
        }
        if earlier {
            for e in std::fs::read_dir(dir)
                .map_err(FormatError::io(dir))?
                .flatten()
            {
                let name = e.file_name().to_string_lossy().into_owned();
                if owned(&name) && !stale.contains(&name) {
                    stale.push(name);
                }
            }
        }
        for s in &stale {
            clear(&dir.join(s))?;
        }
        let dir = dir.canonicalize().map_err(FormatError::io(dir))?;
        lock(&OWN_MARKS).push(dir.clone());
        Ok(OutputSet {
            dir,
            marker,
            what: what.to_string(),
            members,
        })
    }

    /// The set is whole: write [`COMPLETE`] (command and members), then remove
    /// [`INCOMPLETE`].
    pub fn finish(self) -> Result<(), FormatError> {
        let done = self.dir.join(COMPLETE);
        write_atomic_bytes(
            &done,
            marker_text(&self.what, &self.members, COMPLETE_MEANING).as_bytes(),
        )?;
        lock(&OWN_MARKS).retain(|d| d != &self.dir);
        std::fs::remove_file(&self.marker).map_err(FormatError::io(&self.marker))
    }
}

/// The command that completed `dir` (its [`COMPLETE`] marker's), unless the directory is
/// not marked complete or is marked incomplete as well.
pub fn completed_by(dir: &Path) -> Option<String> {
    let done = dir.join(COMPLETE);
    (done.is_file() && !dir.join(INCOMPLETE).exists()).then(|| marker_command(&done))
}

/// Removes `path` (a file or a whole directory) if it exists.
fn clear(path: &Path) -> Result<(), FormatError> {
    let r = match std::fs::symlink_metadata(path) {
        Err(_) => return Ok(()),
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
    };
    r.map_err(FormatError::io(path))
}

/// How many directories up from a file [`check_complete`] looks for a marker: the file's
/// own and three above it, as deep as any output set nests (`run`'s
/// `DIR/seed-<s>/<policy>/replay/`), and no further, so a stale marker far up (in a home
/// directory) does not stop every read below it.
pub const MARK_DEPTH: usize = 4;

/// Refuses `path` when it lies in a directory (or up to [`MARK_DEPTH`] − 1 levels under
/// one) that another process marked incomplete ([`OutputSet`]): an interrupted run's half
/// set is never read as a result; or in a directory marked complete whose listed entries
/// do not include it: a leftover of another run is never read as this one's.
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
        if own.iter().any(|d| d == dir) {
            continue;
        }
        let marker = dir.join(INCOMPLETE);
        if marker.is_file() {
            return Err(FormatError::file(
                path,
                format!(
                    "{} is marked incomplete ({}, by `{}`): the command writing it was \
                     interrupted or is still running; run it again",
                    dir.display(),
                    INCOMPLETE,
                    marker_command(&marker)
                ),
            ));
        }
        let done = dir.join(COMPLETE);
        let members = marker_members(&done);
        if members.is_empty() {
            continue;
        }
        let rel = start.join(path.file_name().unwrap_or_default());
        let Ok(rel) = rel.strip_prefix(dir) else {
            continue;
        };
        let inside = members.iter().any(|m| rel.starts_with(Path::new(m)));
        if !inside {
            let first = rel
                .components()
                .next()
                .map(|c| c.as_os_str().to_string_lossy());
            return Err(FormatError::file(
                path,
                format!(
                    "{} mixes runs: `{}` is not part of what `{}` completed there ({}: {}); \
                     it was left by another run — run the command again into a fresh \
                     directory, or remove it",
                    dir.display(),
                    first.unwrap_or_default(),
                    marker_command(&done),
                    COMPLETE,
                    members.join(", ")
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
