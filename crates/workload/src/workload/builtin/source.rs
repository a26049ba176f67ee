//! Where samples come from: the dataset's items (whole files, or fixed-length sequences inside token
//! shards), read from disk, and the application cache with MinIO semantics in front of them.

use crate::error::InputError;
use crate::error::Setting;
use crate::format::dataset::{read_manifest, DatasetKind};
use crate::format::rate::Pipeline;
use crate::workload::dataset;
use crate::workload::WorkloadError;
use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Page size assumed when dropping a shard range from the page cache.
const PAGE_BYTES: u64 = 4096;

/// The items of one dataset, addressed by index.
pub enum Items {
    /// One item per file (image, audio).
    Files(Vec<(PathBuf, u64)>),
    /// One item per sequence of `seq_bytes` at a fixed offset inside a shard (text).
    Sequences {
        /// Open shards (path, file).
        shards: Vec<(PathBuf, File)>,
        /// (shard index, byte offset) of every sequence.
        seqs: Vec<(u32, u64)>,
        /// Bytes per sequence.
        seq_bytes: u64,
    },
}

impl Items {
    /// Lists the items of the dataset at `dir` for `pipeline`.
    pub fn open(dir: &Path, pipeline: Pipeline, seq_len: usize) -> Result<Items, WorkloadError> {
        let origin = dir.display().to_string();
        if !dir.is_dir() {
            return Err(InputError::new(
                origin,
                "dataset directory does not exist; make one with `synergy dataset gen`",
            )
            .into());
        }
        let (want, ext): (DatasetKind, &[&str]) = match pipeline {
            Pipeline::Image => (DatasetKind::Image, &["jpg", "jpeg", "JPEG"]),
            Pipeline::Audio => (DatasetKind::Audio, &["wav"]),
            Pipeline::Text => (DatasetKind::Text, &["bin"]),
        };
        if let Some(m) = read_manifest(dir) {
            if m.kind != want {
                return Err(InputError::new(
                    origin,
                    format!(
                        "holds {} data (per its manifest), but this pipeline reads {want} data",
                        m.kind
                    ),
                )
                .into());
            }
        }
        let files: Vec<(PathBuf, u64)> = dataset::scan(dir)
            .map_err(|e| WorkloadError::io(format!("listing {origin}"), e))?
            .files
            .into_iter()
            .filter(|(p, _)| {
                p.extension()
                    .and_then(|e| e.to_str())
                    .is_some_and(|e| ext.contains(&e))
            })
            .collect();
        if files.is_empty() {
            return Err(InputError::new(
                origin,
                format!("holds no .{} files for the {want} pipeline", ext[0]),
            )
            .into());
        }
        if pipeline != Pipeline::Text {
            if files.len() > u32::MAX as usize {
                return Err(InputError::new(origin, "holds too many files").into());
            }
            return Ok(Items::Files(files));
        }
        if seq_len == 0 {
            return Err(InputError::setting(Setting::SeqLen, "must be at least 1").into());
        }
        let seq_bytes = (seq_len as u64 + 1) * 2;
        let mut shards = Vec::new();
        let mut seqs = Vec::new();
        for (path, bytes) in files {
            let file = File::open(&path)
                .map_err(|e| WorkloadError::io(format!("opening {}", path.display()), e))?;
            for k in 0..bytes / seq_bytes {
                seqs.push((shards.len() as u32, k * seq_bytes));
            }
            shards.push((path, file));
        }
        if seqs.is_empty() || seqs.len() > u32::MAX as usize {
            return Err(InputError::new(
                origin,
                format!("its shards hold no sequence of {seq_len}+1 tokens"),
            )
            .into());
        }
        Ok(Items::Sequences {
            shards,
            seqs,
            seq_bytes,
        })
    }

    /// Number of items.
    pub fn len(&self) -> usize {
        match self {
            Items::Files(f) => f.len(),
            Items::Sequences { seqs, .. } => seqs.len(),
        }
    }

    /// Total bytes of all items (the dataset size D of the hit-ratio model).
    pub fn total_bytes(&self) -> u64 {
        match self {
            Items::Files(f) => f.iter().map(|(_, b)| b).sum(),
            Items::Sequences {
                seqs, seq_bytes, ..
            } => seqs.len() as u64 * seq_bytes,
        }
    }

    /// Names item `i` for error messages.
    pub fn describe(&self, i: usize) -> String {
        match self {
            Items::Files(f) => f[i].0.display().to_string(),
            Items::Sequences { shards, seqs, .. } => {
                let (s, off) = seqs[i];
                format!("{} at byte {off}", shards[s as usize].0.display())
            }
        }
    }

    /// Reads item `i` from disk. With `drop_from_page_cache`, tells the kernel the bytes are not needed
    /// again, so that only the application cache ever serves repeats.
    pub fn read(&self, i: usize, drop_from_page_cache: bool) -> Result<Vec<u8>, WorkloadError> {
        match self {
            Items::Files(f) => {
                let (path, bytes) = &f[i];
                let fail = |e| WorkloadError::io(format!("reading {}", path.display()), e);
                let mut file = File::open(path).map_err(fail)?;
                let mut buf = Vec::with_capacity(*bytes as usize);
                file.read_to_end(&mut buf).map_err(fail)?;
                if drop_from_page_cache {
                    fadvise_dontneed(&file, 0, 0);
                }
                Ok(buf)
            }
            Items::Sequences {
                shards,
                seqs,
                seq_bytes,
            } => {
                let (s, off) = seqs[i];
                let (path, file) = &shards[s as usize];
                let mut buf = vec![0u8; *seq_bytes as usize];
                file.read_exact_at(&mut buf, off).map_err(|e| {
                    WorkloadError::io(format!("reading {} at byte {off}", path.display()), e)
                })?;
                if drop_from_page_cache {
                    // Whole pages only are dropped, so widen the range to the pages it touches.
                    let start = off / PAGE_BYTES * PAGE_BYTES;
                    let end = (off + seq_bytes).div_ceil(PAGE_BYTES) * PAGE_BYTES;
                    fadvise_dontneed(file, start, end - start);
                }
                Ok(buf)
            }
        }
    }
}

/// Advises the kernel to drop a file range from the page cache (`len` 0: to the end). Advice only, so
/// a failure changes nothing worth reporting.
fn fadvise_dontneed(file: &File, offset: u64, len: u64) {
    // SAFETY: posix_fadvise only reads its integer arguments; the descriptor is open for this call.
    unsafe {
        libc::posix_fadvise(
            file.as_raw_fd(),
            offset as libc::off_t,
            len as libc::off_t,
            libc::POSIX_FADV_DONTNEED,
        );
    }
}

/// An application-level cache with MinIO's policy: an item is admitted the first time it is read if it
/// still fits the budget, and nothing is ever evicted, so the cached set is fixed during the first epoch
/// and the hit ratio afterwards is budget / dataset size.
pub struct AppCache {
    budget_bytes: u64,
    inner: Mutex<CacheInner>,
}

#[derive(Default)]
struct CacheInner {
    used_bytes: u64,
    items: HashMap<u32, Arc<Vec<u8>>>,
}

impl AppCache {
    /// An empty cache holding at most `budget_bytes` of item data.
    pub fn new(budget_bytes: u64) -> Self {
        AppCache {
            budget_bytes,
            inner: Mutex::new(CacheInner::default()),
        }
    }

    /// The cached bytes of item `i`, if it is cached.
    pub fn get(&self, i: usize) -> Option<Arc<Vec<u8>>> {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.items.get(&(i as u32)).cloned()
    }

    /// Admits item `i` if it fits what is left of the budget.
    pub fn offer(&self, i: usize, data: Vec<u8>) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let len = data.len() as u64;
        if inner.used_bytes + len <= self.budget_bytes && !inner.items.contains_key(&(i as u32)) {
            inner.used_bytes += len;
            inner.items.insert(i as u32, Arc::new(data));
        }
    }

    /// Bytes held.
    pub fn used_bytes(&self) -> u64 {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .used_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_admits_until_full_and_never_evicts() {
        let cache = AppCache::new(10);
        cache.offer(1, vec![0; 6]);
        cache.offer(2, vec![0; 6]);
        cache.offer(3, vec![0; 4]);
        assert!(cache.get(1).is_some());
        assert!(cache.get(2).is_none());
        assert!(cache.get(3).is_some());
        assert_eq!(cache.used_bytes(), 10);
    }

    #[test]
    fn a_missing_dataset_is_an_input_error_naming_it() {
        let err = Items::open(Path::new("/nonexistent/ds"), Pipeline::Image, 8)
            .err()
            .unwrap();
        assert!(err.to_string().contains("/nonexistent/ds"), "{err}");
        assert!(matches!(err, WorkloadError::Input(_)));
    }

    #[test]
    fn an_empty_dataset_is_an_input_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = Items::open(dir.path(), Pipeline::Audio, 8).err().unwrap();
        assert!(matches!(err, WorkloadError::Input(_)), "{err}");
    }
}
