//! Files and directories written whole or not at all: every result this project writes (profiles, CSV
//! and Parquet tables, charts, run state) goes through [`write_atomic`], and a directory of results through
//! [`StagedDir`], so a reader never sees half a file or a directory mixing two runs, and a failed write
//! leaves the old one in place (docs/architecture.md §7).
//!
//! Nothing half-written stays behind either. A temporary file is named for its target and its writer
//! (`.NAME.RANDOM.PID.synergy-tmp`), and every write reaps those in its directory whose writer is dead (a
//! `kill -9`), recording them for the command to say ([`take_reaped`]). What is being written now is
//! registered as it is created, so a command that ends on a signal removes it first
//! ([`exit_removing_in_progress`]).

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The end of every temporary file's name.
const TMP_SUFFIX: &str = ".synergy-tmp";

/// Temporary files and staging directories being written now, by this process.
static IN_PROGRESS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
/// What dead writers left, dealt with by this process and not yet said.
static REAPED: Mutex<Vec<Leftover>> = Mutex::new(Vec::new());

/// The end of a group's commit record's name ([`write_atomic_all`]).
const COMMIT_SUFFIX: &str = ".synergy-commit";

/// What a writer that died left, and what this process did with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leftover {
    /// A temporary file or staging directory, removed.
    Removed(PathBuf),
    /// A group of files killed between its renames, whose renames were finished: these files.
    Finished(Vec<PathBuf>),
}

fn reaped(l: Leftover) {
    REAPED.lock().unwrap_or_else(|p| p.into_inner()).push(l);
}

fn registry() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    IN_PROGRESS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Creates a temporary file or staging directory and registers it in one step under the registry's lock,
/// so a signal's removal never runs between the two (and leaves what was just created).
fn create_in_progress<T>(create: impl FnOnce() -> io::Result<(T, PathBuf)>) -> io::Result<T> {
    let mut registry = registry();
    let (made, path) = create()?;
    registry.push(path);
    Ok(made)
}

fn done_in_progress(path: &Path) {
    registry().retain(|p| p != path);
}

/// Removes every temporary file and staging directory this process is writing, then exits with `code`:
/// what a command does when a signal ends it, so no half-written output stays behind. The registry stays
/// locked until the process is gone, so no other thread creates one after the removal.
pub fn exit_removing_in_progress(code: i32) -> ! {
    let registry = registry();
    for p in registry.iter() {
        // Other threads may still be writing into a staging directory (a simulation's spools) and
        // make a file in it while it is being removed, which fails the removal: try again.
        for _ in 0..10 {
            let gone = std::fs::remove_file(p).or_else(|_| std::fs::remove_dir_all(p));
            if gone.is_ok() || p.symlink_metadata().is_err() {
                break;
            }
        }
    }
    std::process::exit(code)
}

/// What this process removed or finished that dead writers had left, since the last call: for the
/// command to say.
pub fn take_reaped() -> Vec<Leftover> {
    std::mem::take(&mut *REAPED.lock().unwrap_or_else(|p| p.into_inner()))
}

/// Deals with what dead writers left in `dir`: a group killed between its renames is finished
/// ([`finish_dead_commits`]), then every temporary file whose writer is no longer alive is removed. Run
/// by every write, for each directory it writes in.
fn reap_dir(dir: &Path) {
    finish_dead_commits(dir);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name
            .strip_prefix('.')
            .and_then(|r| r.strip_suffix(TMP_SUFFIX))
        else {
            continue;
        };
        let pid = rest.rsplit('.').next().and_then(|p| p.parse::<i32>().ok());
        if pid.is_some_and(|pid| !process_alive(pid)) && std::fs::remove_file(e.path()).is_ok() {
            reaped(Leftover::Removed(e.path()));
        }
    }
}

/// Writes `bytes` to `path` through a temporary file in the same directory, synced, then renamed over
/// `path`; the directory is created when missing. The error keeps the failure's kind and says which step
/// failed on which path.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_all(&[(path, bytes)])
}

/// Writes files that belong together (a profile's JSON and CSV, a zoo, the advisor's table and script)
/// as [`write_atomic`] writes one: every one written and synced to its temporary first, so a full disk or
/// any failure before the end leaves every old file in place; then renamed in the order given, the last
/// being the one readers go by. A signal waits for the renames to finish. Before renaming a group, a
/// commit record beside its last file lists every rename: a `kill -9` between two renames leaves it,
/// and the next write in that directory finishes the renames, so the group ends whole and new
/// ([`finish_dead_commits`]).
pub fn write_atomic_all(files: &[(&Path, &[u8])]) -> io::Result<()> {
    for dir in files
        .iter()
        .map(|(p, _)| dir_of(p))
        .collect::<std::collections::BTreeSet<_>>()
    {
        reap_dir(dir);
    }
    let mut staged = Vec::with_capacity(files.len());
    for &(path, bytes) in files {
        staged.push(stage(path, bytes)?);
    }
    // Holding the registry keeps a signal's removal of what is in progress from running between two
    // renames.
    let mut registry = registry();
    let record = match files {
        [_, .., (last, _)] => Some(write_commit_record(last, &staged, files)?),
        _ => None,
    };
    let mut result = Ok(());
    for (tmp, &(path, _)) in staged.into_iter().zip(files) {
        let tmp_path = tmp.path().to_path_buf();
        registry.retain(|p| *p != tmp_path);
        if result.is_ok() {
            result = tmp.persist(path).map(drop).map_err(|e| {
                io::Error::new(
                    e.error.kind(),
                    format!("renaming into {}: {}", path.display(), e.error),
                )
            });
        }
    }
    if let Some(record) = record {
        let _ = std::fs::remove_file(record);
    }
    result
}

/// The directory a file of `path` goes in.
fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// A group's renames, `[temporary, target]` in order, with absolute paths, written and synced beside its
/// last file as `.NAME.PID.synergy-commit`.
fn write_commit_record(
    last: &Path,
    staged: &[tempfile::NamedTempFile],
    files: &[(&Path, &[u8])],
) -> io::Result<PathBuf> {
    let absolute = |p: &Path| std::path::absolute(p);
    let mut renames = Vec::with_capacity(files.len());
    for (tmp, (path, _)) in staged.iter().zip(files) {
        renames.push([absolute(tmp.path())?, absolute(path)?]);
    }
    let name = last.file_name().unwrap_or_default().to_string_lossy();
    let record = dir_of(last).join(format!(".{name}.{}{COMMIT_SUFFIX}", std::process::id()));
    let mut f = std::fs::File::create(&record)
        .map_err(|e| io::Error::new(e.kind(), format!("creating {}: {e}", record.display())))?;
    f.write_all(&serde_json::to_vec(&renames).expect("paths serialize"))?;
    f.sync_data()?;
    Ok(record)
}

/// Finishes the renames of every group in `dir` whose writer died between two of them (its commit
/// record still there): every temporary it lists that is still there is renamed into its target, so
/// the group is whole and new; said by [`take_reaped`].
fn finish_dead_commits(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_suffix(COMMIT_SUFFIX) else {
            continue;
        };
        let pid = rest.rsplit('.').next().and_then(|p| p.parse::<i32>().ok());
        if pid.is_none_or(process_alive) {
            continue;
        }
        let renames: Vec<[PathBuf; 2]> = std::fs::read(e.path())
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        let mut finished = Vec::new();
        for [tmp, target] in renames {
            if std::fs::rename(&tmp, &target).is_ok() {
                finished.push(target);
            }
        }
        if std::fs::remove_file(e.path()).is_ok() {
            // A record whose renames were all done before the kill is all that was left.
            reaped(if finished.is_empty() {
                Leftover::Removed(e.path())
            } else {
                Leftover::Finished(finished)
            });
        }
    }
}

/// `bytes` written and synced to a temporary file beside `path`, registered as in progress.
fn stage(path: &Path, bytes: &[u8]) -> io::Result<tempfile::NamedTempFile> {
    let dir = dir_of(path);
    let step = |what: &str, e: io::Error| {
        io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // The directory is made under the registry's lock: a signal's clean-up holds it from the removal to
    // the exit, so no write makes a removed staging directory again. Results are ordinary files for
    // people and other tools: 0644 less the umask, not the temporary file's default 0600.
    let mut dir_made = false;
    let mut tmp = create_in_progress(|| {
        std::fs::create_dir_all(dir)?;
        dir_made = true;
        let tmp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(&format!(".{}{TMP_SUFFIX}", std::process::id()))
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .tempfile_in(dir)?;
        let path = tmp.path().to_path_buf();
        Ok((tmp, path))
    })
    .map_err(|e| match dir_made {
        false => step("creating the directory of", e),
        true => step("creating a temporary file for", e),
    })?;
    let tmp_path = tmp.path().to_path_buf();
    let written = tmp
        .write_all(bytes)
        .map_err(|e| step("writing", e))
        .and_then(|()| tmp.as_file().sync_all().map_err(|e| step("syncing", e)));
    match written {
        Ok(()) => Ok(tmp),
        Err(e) => {
            // Dropping the temporary removes it.
            done_in_progress(&tmp_path);
            Err(e)
        }
    }
}

/// Truncates a file of lines after its last line end, when it does not end with one: the line a writer
/// killed in mid-append left, so the next append starts a line of its own instead of joining it.
pub fn drop_cut_line(f: &mut std::fs::File) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    let len = f.metadata()?.len();
    if len == 0 {
        return Ok(());
    }
    // Walk back from the end in blocks to the last line end (a journal line is a few kilobytes).
    let mut end = len;
    let mut block = vec![0u8; 64 << 10];
    while end > 0 {
        let start = end.saturating_sub(block.len() as u64);
        let n = (end - start) as usize;
        f.seek(SeekFrom::Start(start))?;
        f.read_exact(&mut block[..n])?;
        if let Some(i) = block[..n].iter().rposition(|&b| b == b'\n') {
            let keep = start + i as u64 + 1;
            if keep < len {
                f.set_len(keep)?;
            }
            return Ok(());
        }
        end = start;
    }
    f.set_len(0)
}

/// Whether `name` may become a file name inside a directory the user chose: 1-64 letters, digits, `-`,
/// `_` or `.`, not starting with `.`; so no name can climb out (`../x`), hide, or start a path anew.
pub fn is_safe_file_stem(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !name.starts_with('.')
}

/// What [`is_safe_file_stem`] asks, for messages.
pub const SAFE_FILE_STEM: &str = "1-64 letters, digits, `-`, `_`, `.`, not starting with `.`";

/// Why a [`StagedDir`] could not begin.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    /// Another live process is writing the same directory.
    #[error("another synergy (pid {pid}) is writing {}; wait for it to finish or write elsewhere", target.display())]
    Busy {
        /// The directory both want to write.
        target: PathBuf,
        /// The process writing it.
        pid: i32,
    },
    /// The file system refused.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// A directory built beside its target (`.NAME.writing`, holding the writer's pid until it is done) and
/// renamed over it in one step, so the target holds one run's files or the previous run's, never a mix.
/// The staging name doubles as the lock: a second writer finds it and is refused while the first is
/// alive, and takes it over (reaping what was left) when the first died. Dropped uncommitted, it is
/// removed.
#[derive(Debug)]
pub struct StagedDir {
    target: PathBuf,
    staging: PathBuf,
    /// What a dead writer left that this one removed.
    pub reaped: Option<PathBuf>,
    committed: bool,
}

const WRITER_PID_FILE: &str = ".synergy-writer";

impl StagedDir {
    /// Starts writing `target`: creates its staging directory, or refuses while another live process
    /// holds it.
    pub fn begin(target: &Path) -> Result<StagedDir, StageError> {
        let name = target
            .file_name()
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{} names no directory", target.display()),
                )
            })?
            .to_string_lossy()
            .into_owned();
        let parent = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&parent)
            .map_err(|e| io::Error::new(e.kind(), format!("creating {}: {e}", parent.display())))?;
        reap_dir(&parent);
        let staging = parent.join(format!(".{name}.writing"));
        let mut reaped = None;
        loop {
            match create_in_progress(|| {
                std::fs::create_dir(&staging).map(|()| ((), staging.clone()))
            }) {
                Ok(()) => break,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    let pid = std::fs::read_to_string(staging.join(WRITER_PID_FILE))
                        .ok()
                        .and_then(|t| t.trim().parse::<i32>().ok());
                    match pid {
                        Some(pid) if process_alive(pid) => {
                            return Err(StageError::Busy {
                                target: target.to_path_buf(),
                                pid,
                            })
                        }
                        // A writer that died (or one caught between creating the directory and
                        // writing its pid, which lasts microseconds: a second look decides).
                        None if reaped.is_none() && recently_created(&staging) => {
                            std::thread::sleep(std::time::Duration::from_millis(100));
                            if std::fs::metadata(staging.join(WRITER_PID_FILE)).is_ok() {
                                continue;
                            }
                            std::fs::remove_dir_all(&staging)?;
                            reaped = Some(staging.clone());
                        }
                        _ => {
                            std::fs::remove_dir_all(&staging)?;
                            reaped = Some(staging.clone());
                        }
                    }
                }
                Err(e) => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("creating {}: {e}", staging.display()),
                    )
                    .into())
                }
            }
        }
        if let Some(r) = &reaped {
            self::reaped(Leftover::Removed(r.clone()));
        }
        std::fs::write(
            staging.join(WRITER_PID_FILE),
            std::process::id().to_string(),
        )?;
        Ok(StagedDir {
            target: target.to_path_buf(),
            staging,
            reaped,
            committed: false,
        })
    }

    /// Where to write the files.
    pub fn path(&self) -> &Path {
        &self.staging
    }

    /// The directory the files will appear in.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Puts the staged files in place: renamed into a missing target, or exchanged with an existing
    /// one in a single step (whose old contents are then removed).
    pub fn commit(mut self) -> io::Result<()> {
        let step = |what: &str, e: io::Error| {
            io::Error::new(e.kind(), format!("{what} {}: {e}", self.target.display()))
        };
        std::fs::remove_file(self.staging.join(WRITER_PID_FILE))
            .map_err(|e| step("finishing", e))?;
        // As in `write_atomic_all`: a signal's removal of the staging waits for the rename, so it never
        // empties a directory while it is being put in place.
        let registry = registry();
        if self.target.exists() {
            nix::fcntl::renameat2(
                None,
                &self.staging,
                None,
                &self.target,
                nix::fcntl::RenameFlags::RENAME_EXCHANGE,
            )
            .map_err(|e| step("replacing", io::Error::from(e)))?;
            // The staging name now holds the previous run's files.
            self.committed = true;
            drop(registry);
            std::fs::remove_dir_all(&self.staging)
                .map_err(|e| step("removing the previous contents of", e))?;
        } else {
            std::fs::rename(&self.staging, &self.target).map_err(|e| step("renaming into", e))?;
            self.committed = true;
            drop(registry);
        }
        Ok(())
    }
}

impl Drop for StagedDir {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_dir_all(&self.staging);
        }
        done_in_progress(&self.staging);
    }
}

/// Whether a process with this pid exists (signal 0 probes without sending anything).
pub fn process_alive(pid: i32) -> bool {
    use nix::errno::Errno;
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) {
        Ok(()) => true,
        Err(Errno::EPERM) => true,
        Err(_) => false,
    }
}

fn recently_created(dir: &Path) -> bool {
    std::fs::metadata(dir)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age < std::time::Duration::from_secs(2))
}

/// Bytes an unprivileged writer may still put on the filesystem that holds `path`, or would hold it once
/// created (the nearest existing ancestor's); `None` when it cannot be told.
pub fn available_bytes(path: &Path) -> Option<u64> {
    let existing = path
        .ancestors()
        .find(|a| !a.as_os_str().is_empty() && a.exists());
    let st = nix::sys::statvfs::statvfs(existing.unwrap_or(Path::new("."))).ok()?;
    Some((st.blocks_available() as u64).saturating_mul(st.fragment_size() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Held by the tests that read what was reaped, which is kept for the whole process.
    static REAPED_BY_TESTS: Mutex<()> = Mutex::new(());

    #[test]
    fn atomic_writes_are_readable_like_ordinary_files() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sub").join("out.json");
        write_atomic(&p, b"{}").unwrap();
        // SAFETY: umask only swaps the process mask; it is restored at once.
        let umask = unsafe {
            let m = libc::umask(0o022);
            libc::umask(m);
            m
        };
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644 & !(umask as u32));
        assert_eq!(std::fs::read(&p).unwrap(), b"{}");
        assert_eq!(
            std::fs::read_dir(p.parent().unwrap()).unwrap().count(),
            1,
            "no temporary left"
        );
    }

    #[test]
    fn a_group_killed_between_its_renames_is_finished_by_the_next_write() {
        let _reaped = REAPED_BY_TESTS.lock().unwrap();
        let d = tempfile::tempdir().unwrap();
        let (csv, json) = (d.path().join("p.csv"), d.path().join("p.json"));
        std::fs::write(&csv, b"new csv").unwrap();
        std::fs::write(&json, b"old json").unwrap();
        // As a writer killed after its first rename leaves the group: the CSV new, the JSON's new
        // contents still in its temporary, and the record of both renames.
        let tmp_json = d
            .path()
            .join(format!(".p.json.abc.{}{TMP_SUFFIX}", i32::MAX));
        std::fs::write(&tmp_json, b"new json").unwrap();
        let gone_csv = d
            .path()
            .join(format!(".p.csv.abc.{}{TMP_SUFFIX}", i32::MAX));
        let record = d
            .path()
            .join(format!(".p.json.{}{COMMIT_SUFFIX}", i32::MAX));
        let renames = [[&gone_csv, &csv], [&tmp_json, &json]];
        std::fs::write(&record, serde_json::to_vec(&renames).unwrap()).unwrap();
        write_atomic(&d.path().join("other"), b"x").unwrap();
        assert_eq!(std::fs::read(&json).unwrap(), b"new json");
        assert_eq!(std::fs::read(&csv).unwrap(), b"new csv");
        assert!(!record.exists() && !tmp_json.exists());
        assert!(take_reaped().contains(&Leftover::Finished(vec![json.clone()])));
        // A group written whole leaves no record.
        write_atomic_all(&[(&csv, b"a"), (&json, b"b")]).unwrap();
        let names: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 3, "{names:?}");
    }

    #[test]
    fn a_dead_writers_temporary_is_reaped_by_the_next_write_and_a_live_ones_kept() {
        let _reaped = REAPED_BY_TESTS.lock().unwrap();
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out.csv");
        let dead = d
            .path()
            .join(format!(".out.csv.abc123.{}{TMP_SUFFIX}", i32::MAX));
        let live = d.path().join(format!(
            ".out.csv.def456.{}{TMP_SUFFIX}",
            std::process::id()
        ));
        let other = d
            .path()
            .join(format!(".other.csv.abc.{}{TMP_SUFFIX}", i32::MAX));
        for f in [&dead, &live, &other] {
            std::fs::write(f, b"half").unwrap();
        }
        write_atomic(&p, b"whole").unwrap();
        assert!(!dead.exists() && live.exists() && !other.exists());
        assert!(take_reaped().contains(&Leftover::Removed(dead)));
        assert_eq!(std::fs::read(&p).unwrap(), b"whole");
    }

    #[test]
    fn a_failed_write_names_the_step_and_path_and_keeps_the_kind() {
        let d = tempfile::tempdir().unwrap();
        let blocker = d.path().join("file");
        std::fs::write(&blocker, b"x").unwrap();
        let p = blocker.join("out.json");
        let e = write_atomic(&p, b"{}").unwrap_err();
        assert!(e.to_string().contains(&p.display().to_string()), "{e}");
        assert!(
            e.to_string().starts_with("creating the directory of"),
            "{e}"
        );
        assert_eq!(std::fs::read(&blocker).unwrap(), b"x");
    }

    #[test]
    fn a_staged_directory_replaces_the_old_one_whole() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("out");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("old.csv"), b"old").unwrap();
        let staged = StagedDir::begin(&target).unwrap();
        std::fs::write(staged.path().join("new.csv"), b"new").unwrap();
        // Until the commit, the target holds the old run only.
        assert!(target.join("old.csv").exists() && !target.join("new.csv").exists());
        staged.commit().unwrap();
        let names: Vec<_> = std::fs::read_dir(&target)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("new.csv")]);
        assert_eq!(
            std::fs::read_dir(d.path()).unwrap().count(),
            1,
            "nothing beside it"
        );
    }

    #[test]
    fn a_second_writer_is_refused_while_the_first_lives_and_a_dead_ones_leftovers_are_reaped() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("out");
        let first = StagedDir::begin(&target).unwrap();
        match StagedDir::begin(&target) {
            Err(StageError::Busy { pid, .. }) => assert_eq!(pid, std::process::id() as i32),
            other => panic!("not refused: {other:?}"),
        }
        drop(first);
        assert!(!target.exists(), "an uncommitted directory never appears");
        // A writer that died: a pid no process has.
        let staging = d.path().join(".out.writing");
        std::fs::create_dir(&staging).unwrap();
        std::fs::write(staging.join(WRITER_PID_FILE), i32::MAX.to_string()).unwrap();
        let staged = StagedDir::begin(&target).unwrap();
        assert_eq!(staged.reaped.as_deref(), Some(staging.as_path()));
        staged.commit().unwrap();
        assert!(target.is_dir());
    }
}
