//! Every file synergy takes from a user, read one way (docs/architecture.md §7, "Bounded input"): a
//! regular file only (a FIFO, a device, a directory or a loop of links is refused by name before anything
//! is read, so `/dev/zero` or a named pipe cannot hang or exhaust a command), no larger than its kind's
//! limit ([`Kind`]), and no line longer than [`MAX_LINE_BYTES`], so a reader's memory follows what it keeps,
//! never what a file holds.

use crate::error::InputError;
use crate::units::Bytes;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The longest line any text input may hold: far above any real record (a profile's longest line is a
/// few kilobytes; a trace row well under one), and what a reader buffers at most for one record.
pub const MAX_LINE_BYTES: u64 = 1 << 20;

/// A kind of input file: what it is called in messages, and the largest such file synergy reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kind {
    /// What the file is (`a profile file`), for messages.
    pub what: &'static str,
    /// The largest file of this kind, bytes.
    pub max_bytes: u64,
    /// The longest line, bytes: [`MAX_LINE_BYTES`] for every kind of lines.
    pub max_line_bytes: u64,
}

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// A profile (`synergy-profile/*`): the shipped ones are under 100 KiB.
pub const PROFILE: Kind = Kind {
    what: "a profile file",
    max_bytes: 64 * MIB,
    max_line_bytes: MAX_LINE_BYTES,
};
/// A workload spec (TOML).
pub const SPEC: Kind = Kind {
    what: "a workload spec",
    max_bytes: MIB,
    max_line_bytes: MAX_LINE_BYTES,
};
/// A job list for `run` and `simulate --jobs-list` (TOML).
pub const JOB_LIST: Kind = Kind {
    what: "a job list",
    max_bytes: 64 * MIB,
    max_line_bytes: MAX_LINE_BYTES,
};
/// A cluster file (TOML).
pub const CLUSTER: Kind = Kind {
    what: "a cluster file",
    max_bytes: 16 * MIB,
    max_line_bytes: MAX_LINE_BYTES,
};
/// A model zoo (JSON).
pub const ZOO: Kind = Kind {
    what: "a model zoo file",
    max_bytes: 64 * MIB,
    max_line_bytes: MAX_LINE_BYTES,
};
/// The advisor's table.
pub const ADVISOR_TABLE: Kind = Kind {
    what: "an advisor table",
    max_bytes: 64 * MIB,
    max_line_bytes: MAX_LINE_BYTES,
};
/// Saved `sinfo` output.
pub const SINFO: Kind = Kind {
    what: "sinfo output",
    max_bytes: 64 * MIB,
    max_line_bytes: MAX_LINE_BYTES,
};
/// A model mapping file for `trace import`.
pub const MAPPING: Kind = Kind {
    what: "a mapping file",
    max_bytes: 16 * MIB,
    max_line_bytes: MAX_LINE_BYTES,
};
/// A machine list for `trace import` or `trace cluster`.
pub const MACHINES: Kind = Kind {
    what: "a machine list",
    max_bytes: 256 * MIB,
    max_line_bytes: MAX_LINE_BYTES,
};
/// A trace in synergy's CSV, for `simulate --trace`: checked whole, then read row by row, or held whole
/// where its rows are not in arrival order.
pub const TRACE: Kind = Kind {
    what: "a trace",
    max_bytes: 4 * GIB,
    max_line_bytes: MAX_LINE_BYTES,
};
/// A published cluster's trace for `trace import`, read row by row: only its size on disk is bounded.
pub const IMPORTED_TRACE: Kind = Kind {
    what: "a trace",
    max_bytes: 1 << 40,
    max_line_bytes: MAX_LINE_BYTES,
};
/// A Philly job log: one JSON array, read job by job, which may be a single line.
pub const PHILLY_LOG: Kind = Kind {
    what: "a Philly job log",
    max_bytes: 1 << 40,
    max_line_bytes: 1 << 40,
};
/// A run's state file.
pub const RUN_STATE: Kind = Kind {
    what: "a run state file",
    max_bytes: 256 * MIB,
    max_line_bytes: MAX_LINE_BYTES,
};
/// A run's observation log.
pub const OBSERVATION_LOG: Kind = Kind {
    what: "an observation log",
    max_bytes: GIB,
    max_line_bytes: MAX_LINE_BYTES,
};
/// A profile's trial journal.
pub const JOURNAL: Kind = Kind {
    what: "a trial journal",
    max_bytes: 256 * MIB,
    max_line_bytes: MAX_LINE_BYTES,
};
/// A simulation's output files (`summary.json`, `jobs.csv`, `rounds.csv`) read back by `plot`.
pub const SIM_OUTPUT: Kind = Kind {
    what: "a simulation output file",
    max_bytes: 4 * GIB,
    max_line_bytes: MAX_LINE_BYTES,
};
/// The small files synergy keeps beside a user's data (a workload's resume totals, a dataset's rate file
/// and manifest).
pub const KEPT_STATE: Kind = Kind {
    what: "a state file",
    max_bytes: 16 * MIB,
    max_line_bytes: MAX_LINE_BYTES,
};

/// A file the user named could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Theirs to fix: no such file, not a regular file, too large, a line too long, not text.
    #[error(transparent)]
    Input(#[from] InputError),
    /// The system's: I/O.
    #[error(transparent)]
    Io(#[from] io::Error),
}

impl ReadError {
    /// The error as the user's, for readers whose callers take only input errors: a system failure
    /// reads `cannot read: ...` naming the path (`origin`).
    pub fn into_input(self, origin: &str) -> InputError {
        match self {
            ReadError::Input(e) => e,
            ReadError::Io(e) => InputError::new(origin, format!("cannot read: {e}")),
        }
    }
}

/// A checked input file, read through its limits: more than the kind's bytes, or a line longer than
/// [`MAX_LINE_BYTES`], ends the read with an [`io::ErrorKind::InvalidData`] error that says which
/// ([`ReadError`] from [`read_text`]; a streaming reader reports it as its read failing).
#[derive(Debug)]
pub struct Bounded<R> {
    inner: R,
    kind: Kind,
    read: u64,
    line: u64,
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        if self.read > self.kind.max_bytes {
            return Err(too_large(self.kind));
        }
        for &b in &buf[..n] {
            if b == b'\n' {
                self.line = 0;
            } else {
                self.line += 1;
                if self.line > self.kind.max_line_bytes {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "has a line longer than {} (is this {}?)",
                            Bytes(self.kind.max_line_bytes),
                            self.kind.what
                        ),
                    ));
                }
            }
        }
        Ok(n)
    }
}

fn too_large(kind: Kind) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "is larger than {}, the most {} may be",
            Bytes(kind.max_bytes),
            kind.what
        ),
    )
}

/// Opens the file at `path`, given as a `kind`: refuses, naming the path, what is missing, not a regular
/// file (checked on the opened file, which a FIFO does not block), a loop of links, or larger than the
/// kind's limit. Errors the user can fix are [`ReadError::Input`]; others keep their I/O kind.
pub fn open(path: &Path, kind: Kind) -> Result<Bounded<File>, ReadError> {
    let origin = path.display().to_string();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| open_error(&origin, kind, e))?;
    let meta = file
        .metadata()
        .map_err(|e| io::Error::new(e.kind(), format!("reading {origin}: {e}")))?;
    let ft = meta.file_type();
    let not = |what: &str| -> ReadError {
        InputError::new(
            &origin,
            format!("is {what}, not {}; give a regular file", kind.what),
        )
        .into()
    };
    if ft.is_dir() {
        return Err(not("a directory"));
    }
    if ft.is_fifo() {
        return Err(not("a named pipe (FIFO)"));
    }
    if ft.is_char_device() || ft.is_block_device() {
        return Err(not("a device"));
    }
    if ft.is_socket() {
        return Err(not("a socket"));
    }
    if meta.len() > kind.max_bytes {
        return Err(InputError::new(&origin, too_large(kind).to_string()).into());
    }
    Ok(Bounded {
        inner: file,
        kind,
        read: 0,
        line: 0,
    })
}

/// What an open or read error means for the user: their input (missing, a loop, not allowed, not a
/// directory on the way) or the system's.
fn open_error(origin: &str, kind: Kind, e: io::Error) -> ReadError {
    let why = match (e.kind(), e.raw_os_error()) {
        (io::ErrorKind::NotFound, _) => format!("no such file (expected {})", kind.what),
        (io::ErrorKind::PermissionDenied, _) => {
            format!("cannot be read: permission denied (expected {})", kind.what)
        }
        (_, Some(libc::ELOOP)) => "is a loop of symbolic links".to_string(),
        (_, Some(libc::ENOTDIR)) => {
            "has a file where a directory should be on its path".to_string()
        }
        (_, Some(libc::ENAMETOOLONG)) => "is a path too long for this system".to_string(),
        _ => return io::Error::new(e.kind(), format!("reading {origin}: {e}")).into(),
    };
    InputError::new(origin, why).into()
}

/// A read error from a [`Bounded`] reader as the user's (a limit, or not text) or the system's.
fn read_error(origin: &str, kind: Kind, e: io::Error) -> ReadError {
    if e.kind() == io::ErrorKind::InvalidData {
        let msg = e.to_string();
        let msg = if msg.starts_with("stream did not contain valid UTF-8") {
            format!("is not text (expected {})", kind.what)
        } else {
            msg
        };
        InputError::new(origin, msg).into()
    } else {
        io::Error::new(e.kind(), format!("reading {origin}: {e}")).into()
    }
}

/// Reads the text file at `path`, given as a `kind`, through [`open`]'s checks and its limits.
pub fn read_text(path: &Path, kind: Kind) -> Result<String, ReadError> {
    let mut f = open(path, kind)?;
    let mut text = String::new();
    f.read_to_string(&mut text)
        .map_err(|e| read_error(&path.display().to_string(), kind, e))?;
    Ok(text)
}

/// [`read_text`] where a missing file is `None`: files synergy keeps for itself, which may not exist yet.
pub fn read_text_if_present(path: &Path, kind: Kind) -> Result<Option<String>, ReadError> {
    match read_text(path, kind) {
        Ok(t) => Ok(Some(t)),
        Err(ReadError::Input(_)) if path.symlink_metadata().is_err() => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input_message(r: Result<String, ReadError>) -> String {
        match r {
            Err(ReadError::Input(e)) => e.to_string(),
            other => panic!("not an input error: {other:?}"),
        }
    }

    #[test]
    fn special_files_are_refused_by_name_without_reading() {
        let d = tempfile::tempdir().unwrap();
        assert!(input_message(read_text(Path::new("/dev/zero"), PROFILE)).contains("is a device"));
        assert!(input_message(read_text(d.path(), PROFILE)).contains("is a directory"));
        let fifo = d.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        // Opening a FIFO with no writer would block; this returns at once.
        assert!(input_message(read_text(&fifo, PROFILE)).contains("named pipe"));
        let a = d.path().join("a");
        let b = d.path().join("b");
        std::os::unix::fs::symlink(&b, &a).unwrap();
        std::os::unix::fs::symlink(&a, &b).unwrap();
        assert!(input_message(read_text(&a, PROFILE)).contains("loop of symbolic links"));
        assert!(input_message(read_text(&d.path().join("none"), PROFILE)).contains("no such file"));
    }

    #[test]
    fn a_file_over_its_limit_or_with_an_endless_line_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let sparse = d.path().join("sparse");
        let f = File::create(&sparse).unwrap();
        f.set_len(2 * GIB).unwrap();
        let m = input_message(read_text(&sparse, PROFILE));
        assert!(m.contains("larger than 64.0 MiB"), "{m}");
        // Within the size limit, but one line of 2 MiB: refused once the line passes 1 MiB.
        let long = d.path().join("long");
        std::fs::write(&long, vec![b'x'; 2 << 20]).unwrap();
        let m = input_message(read_text(&long, PROFILE));
        assert!(m.contains("a line longer than"), "{m}");
        let bin = d.path().join("bin");
        std::fs::write(&bin, [0xff, 0xfe, b'\n']).unwrap();
        assert!(input_message(read_text(&bin, PROFILE)).contains("is not text"));
        let ok = d.path().join("ok");
        std::fs::write(&ok, "a\nb\n").unwrap();
        assert_eq!(read_text(&ok, PROFILE).unwrap(), "a\nb\n");
    }

    #[test]
    fn a_missing_kept_file_is_none_and_a_special_one_an_error() {
        let d = tempfile::tempdir().unwrap();
        assert!(read_text_if_present(&d.path().join("none"), KEPT_STATE)
            .unwrap()
            .is_none());
        assert!(read_text_if_present(Path::new("/dev/zero"), KEPT_STATE).is_err());
    }
}
