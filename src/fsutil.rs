//! Files written whole or not at all: every result this project writes (profiles, CSV and Parquet tables,
//! charts, run state) goes through [`write_atomic`], so a reader never sees half a file and a failed write
//! leaves the old one in place.

use std::io::{self, Write};
use std::path::Path;

/// Writes `bytes` to `path` through a temporary file in the same directory, synced, then renamed over
/// `path`; the directory is created when missing. The error keeps the failure's kind and says which step
/// failed on which path.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let step = |what: &str, e: io::Error| {
        io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
    };
    std::fs::create_dir_all(dir).map_err(|e| step("creating the directory of", e))?;
    // Results are ordinary files for people and other tools: 0644 less the umask, not the temporary
    // file's default 0600.
    let mut tmp = tempfile::Builder::new()
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644))
        .tempfile_in(dir)
        .map_err(|e| step("creating a temporary file for", e))?;
    tmp.write_all(bytes).map_err(|e| step("writing", e))?;
    tmp.as_file().sync_all().map_err(|e| step("syncing", e))?;
    tmp.persist(path)
        .map_err(|e| step("renaming into", e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
