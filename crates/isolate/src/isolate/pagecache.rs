//! Page-cache control for one dataset's files: evict, prewarm, and measure residency.
//!
//! Everything works per file, so measuring a dataset never disturbs the rest of the machine (no global
//! `drop_caches`). Functions take any list of paths: `&[PathBuf]`, or `files.paths()` of a
//! [`DatasetFiles`](crate::workload::dataset::DatasetFiles).

use std::fs::File;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// How much of a dataset sits in the page cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Residency {
    /// Bytes of the files that are in the page cache now.
    pub resident_bytes: u64,
    /// Sum of the file sizes.
    pub total_bytes: u64,
}

impl Residency {
    /// Resident share in `[0, 1]`; an empty dataset counts as fully resident.
    pub fn fraction(&self) -> f64 {
        if self.total_bytes == 0 {
            1.0
        } else {
            self.resident_bytes as f64 / self.total_bytes as f64
        }
    }
}

fn with_path(path: &Path, e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

fn collect<I>(paths: I) -> Vec<PathBuf>
where
    I: IntoIterator,
    I::Item: AsRef<Path>,
{
    paths
        .into_iter()
        .map(|p| p.as_ref().to_path_buf())
        .collect()
}

/// Drops the files' pages from the page cache (`posix_fadvise(DONTNEED)` per file), so the next read
/// comes from storage and is charged to whichever cgroup reads it (v1 charges a page to its first
/// toucher). Dirty pages cannot be dropped, so each file is `fdatasync`ed first: a no-op for a clean file,
/// and what makes eviction work right after the dataset was written.
pub fn evict<I>(paths: I) -> std::io::Result<()>
where
    I: IntoIterator,
    I::Item: AsRef<Path>,
{
    for path in paths {
        let path = path.as_ref();
        let f = File::open(path).map_err(|e| with_path(path, e))?;
        f.sync_data().map_err(|e| with_path(path, e))?;
        // SAFETY: plain syscall on an open descriptor; offset 0 and length 0 mean the whole file.
        let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        if rc != 0 {
            return Err(with_path(path, std::io::Error::from_raw_os_error(rc)));
        }
    }
    Ok(())
}

/// Reads every file fully so its pages are cached; returns the bytes read. Uses a few threads because
/// storage serves parallel reads faster than one stream (most of all for many small files).
pub fn prewarm<I>(paths: I) -> std::io::Result<u64>
where
    I: IntoIterator,
    I::Item: AsRef<Path>,
{
    let paths = collect(paths);
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, 4)
        .min(paths.len().max(1));
    let next = AtomicUsize::new(0);
    let total = AtomicU64::new(0);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| -> std::io::Result<()> {
                    let mut buf = vec![0u8; 1 << 20];
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(path) = paths.get(i) else {
                            return Ok(());
                        };
                        let mut f = File::open(path).map_err(|e| with_path(path, e))?;
                        loop {
                            match f.read(&mut buf) {
                                Ok(0) => break,
                                Ok(n) => {
                                    total.fetch_add(n as u64, Ordering::Relaxed);
                                }
                                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                                Err(e) => return Err(with_path(path, e)),
                            }
                        }
                    }
                })
            })
            .collect();
        workers.into_iter().try_for_each(|w| {
            w.join()
                .unwrap_or_else(|_| Err(std::io::Error::other("a prewarm thread panicked")))
        })
    })?;
    Ok(total.into_inner())
}

/// What reading files from storage cost one thread, per file: wall time and the thread's CPU time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ColdReads {
    /// Files read.
    pub files: usize,
    /// Wall seconds per file.
    pub wall_s_per_file: f64,
    /// CPU seconds of the reading thread per file.
    pub cpu_s_per_file: f64,
    /// Bytes read, over all files.
    pub bytes: u64,
}

impl ColdReads {
    /// Seconds per file the thread was blocked, waiting for the device.
    pub fn wait_s_per_file(&self) -> f64 {
        (self.wall_s_per_file - self.cpu_s_per_file).max(0.0)
    }

    /// Seconds blocked per byte read: what a miss of a given size waits, when misses are smaller than
    /// files (a sample cut from a shard).
    pub fn wait_s_per_byte(&self) -> f64 {
        if self.bytes == 0 {
            return 0.0;
        }
        self.wait_s_per_file() * self.files as f64 / self.bytes as f64
    }

    /// The rate one stream of reads got from the device, bytes per second.
    pub fn bytes_per_s(&self) -> f64 {
        let wall = self.wall_s_per_file * self.files as f64;
        if wall > 0.0 {
            self.bytes as f64 / wall
        } else {
            0.0
        }
    }
}

/// Evicts the files, then reads each whole, one after another on this thread, as a data loader does on
/// a miss; the files are evicted again afterwards. The time the thread was blocked is how long a loader
/// waits per miss.
pub fn time_cold_reads<I>(paths: I) -> std::io::Result<ColdReads>
where
    I: IntoIterator,
    I::Item: AsRef<Path>,
{
    let paths = collect(paths);
    evict(&paths)?;
    let cpu_now = || nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID);
    let secs = |t: nix::sys::time::TimeSpec| t.tv_sec() as f64 + t.tv_nsec() as f64 * 1e-9;
    let (t0, c0) = (
        std::time::Instant::now(),
        cpu_now().map_err(std::io::Error::from)?,
    );
    let mut buf = Vec::new();
    let mut bytes = 0u64;
    for path in &paths {
        buf.clear();
        bytes += File::open(path)
            .and_then(|mut f| f.read_to_end(&mut buf))
            .map_err(|e| with_path(path, e))? as u64;
    }
    let wall = t0.elapsed().as_secs_f64();
    let cpu = secs(cpu_now().map_err(std::io::Error::from)?) - secs(c0);
    evict(&paths)?;
    let n = paths.len().max(1) as f64;
    Ok(ColdReads {
        files: paths.len(),
        wall_s_per_file: wall / n,
        cpu_s_per_file: cpu.max(0.0) / n,
        bytes,
    })
}

/// Measures how much of the files is in the page cache (`mmap` + `mincore` per file; nothing is read,
/// so measuring does not change the answer). Zero-length files count for nothing.
pub fn residency<I>(paths: I) -> std::io::Result<Residency>
where
    I: IntoIterator,
    I::Item: AsRef<Path>,
{
    // SAFETY: sysconf has no preconditions.
    let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        p if p > 0 => p as u64,
        _ => 4096,
    };
    let mut r = Residency::default();
    let mut vec: Vec<u8> = Vec::new();
    for path in paths {
        let path = path.as_ref();
        let f = File::open(path).map_err(|e| with_path(path, e))?;
        let len = f.metadata().map_err(|e| with_path(path, e))?.len();
        if len == 0 {
            continue;
        }
        r.total_bytes += len;
        let pages = len.div_ceil(page) as usize;
        vec.clear();
        vec.resize(pages, 0);
        // SAFETY: a read-only shared mapping of an open file of `len` bytes; it is only passed to mincore
        // (never dereferenced) and unmapped below on every path.
        let resident_pages = unsafe {
            let addr = libc::mmap(
                std::ptr::null_mut(),
                len as usize,
                libc::PROT_READ,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            );
            if addr == libc::MAP_FAILED {
                return Err(with_path(path, std::io::Error::last_os_error()));
            }
            let rc = libc::mincore(addr, len as usize, vec.as_mut_ptr());
            let err = std::io::Error::last_os_error();
            libc::munmap(addr, len as usize);
            if rc != 0 {
                return Err(with_path(path, err));
            }
            vec.iter().filter(|&&b| b & 1 == 1).count() as u64
        };
        // The last page may be partly past the end of the file.
        let last_resident = vec.last().is_some_and(|&b| b & 1 == 1);
        let mut bytes = resident_pages * page;
        if last_resident {
            bytes -= pages as u64 * page - len;
        }
        r.resident_bytes += bytes;
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn evict_prewarm_residency_round_trip() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut paths = Vec::new();
        for (i, size) in [(0, 3 << 20), (1, 5 << 20), (2, 12_345)] {
            let p = dir.path().join(format!("f{i}"));
            let mut f = File::create(&p).expect("create");
            f.write_all(&vec![i as u8 + 1; size]).expect("write");
            paths.push(p);
        }
        let empty = dir.path().join("empty");
        File::create(&empty).expect("create");
        paths.push(empty);
        let total = (3 << 20) + (5 << 20) + 12_345;

        evict(&paths).expect("evict");
        let cold = residency(&paths).expect("residency");
        assert_eq!(cold.total_bytes, total);
        assert!(cold.fraction() < 0.05, "after evict: {cold:?}");

        assert_eq!(prewarm(&paths).expect("prewarm"), total);
        let warm = residency(&paths).expect("residency");
        assert!(warm.fraction() > 0.95, "after prewarm: {warm:?}");
        assert!(warm.resident_bytes <= total);

        evict(paths.iter().map(PathBuf::as_path)).expect("evict again");
        assert!(residency(&paths).expect("residency").fraction() < 0.05);
        assert!(evict([dir.path().join("missing")]).is_err());
        assert_eq!(Residency::default().fraction(), 1.0);
    }
}
