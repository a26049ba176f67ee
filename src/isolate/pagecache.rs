//! Page-cache control for one dataset's files: evict, prewarm, and measure residency.

use std::path::PathBuf;

/// Fraction of a dataset in the page cache.
pub struct Residency {
    /// Bytes resident.
    pub resident_bytes: u64,
    /// Bytes in all files.
    pub total_bytes: u64,
}

impl Residency {
    /// Resident over total.
    pub fn fraction(&self) -> f64 {
        self.resident_bytes as f64 / self.total_bytes.max(1) as f64
    }
}

/// Drops the files' pages.
pub fn evict(_paths: &[PathBuf]) -> std::io::Result<()> {
    Ok(())
}
/// Reads the files.
pub fn prewarm(_paths: &[PathBuf]) -> std::io::Result<u64> {
    Ok(0)
}
/// Residency of the files.
pub fn residency(_paths: &[PathBuf]) -> std::io::Result<Residency> {
    Ok(Residency {
        resident_bytes: 0,
        total_bytes: 0,
    })
}
