//! The block device a storage read limit applies to: throttling rules name whole disks, so a dataset on a
//! partition maps to its disk, and one on no block device is refused with what to do.

use super::{io_err, read_trim};
use crate::isolate::{BlockDevice, IsolateError};
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The whole-disk block device holding `path` (a partition maps to its disk, since throttling rules apply
/// to whole disks).
pub fn block_device_of(path: &Path) -> Result<BlockDevice, IsolateError> {
    let meta = fs::metadata(path).map_err(|e| io_err(format!("reading {}", path.display()), e))?;
    let dev = meta.dev();
    let (major, minor) = (libc::major(dev) as u64, libc::minor(dev) as u64);
    let sys = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    if !sys.exists() {
        return Err(IsolateError::Budget(format!(
            "a storage limit needs the dataset on a block device, but {} is on device {major}:{minor}, \
             which is not one (overlay, tmpfs, btrfs or network file system); move the dataset or drop \
             the storage limit",
            path.display()
        )));
    }
    if !sys.join("partition").exists() {
        return Ok(BlockDevice { major, minor });
    }
    // /sys/dev/block/M:m links to .../block/<disk>/<partition>; the disk's `dev` holds its numbers.
    let real =
        fs::canonicalize(&sys).map_err(|e| io_err(format!("resolving {}", sys.display()), e))?;
    let disk_dev = real
        .parent()
        .and_then(|d| read_trim(&d.join("dev")))
        .ok_or_else(|| {
            IsolateError::Budget(format!(
                "cannot find the disk holding partition {major}:{minor} (of {})",
                path.display()
            ))
        })?;
    let parsed = disk_dev
        .split_once(':')
        .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)));
    match parsed {
        Some((major, minor)) => Ok(BlockDevice { major, minor }),
        None => Err(IsolateError::Budget(format!(
            "unexpected device number `{disk_dev}` for the disk holding {}",
            path.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_devices_are_whole_disks_and_pseudo_filesystems_are_refused() {
        let err = block_device_of(Path::new("/proc/self/status")).expect_err("procfs");
        assert!(err.to_string().contains("block device"), "{err}");
        if let Ok(d) = block_device_of(Path::new("/")) {
            let sys = format!("/sys/dev/block/{}:{}", d.major, d.minor);
            assert!(Path::new(&sys).exists());
            assert!(!Path::new(&sys).join("partition").exists());
        }
    }
}
