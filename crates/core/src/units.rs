//! Quantities with their units: CPU cores, bytes, rates. Parsing of human-written sizes lives here too.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Bytes in a binary gigabyte (GiB), the unit of every memory axis and budget in this project.
pub const GIB_BYTES: u64 = 1 << 30;
/// [`GIB_BYTES`] as a float, for arithmetic on fractional sizes.
pub const GIB: f64 = GIB_BYTES as f64;
/// Bytes in a binary megabyte (MiB).
pub const MIB: f64 = (1u64 << 20) as f64;
/// Bytes in a decimal gigabyte (GB), the unit of the published zoo and of cluster files' `memory_gb`.
pub const GB: f64 = 1e9;

/// Converts decimal gigabytes to GiB.
pub fn gb_to_gib(gb: f64) -> f64 {
    gb * GB / GIB
}

/// A number of CPU cores; fractional when a CFS quota enforces it.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Cores(pub f64);

impl Cores {
    /// Whole threads needed to use this many cores (at least one).
    pub fn threads(self) -> usize {
        (self.0.ceil() as usize).max(1)
    }

    /// Whole cores in this budget, at least one: the compute threads a job should run, since under a
    /// fractional CFS quota a thread beyond the whole cores spins on quota the others need
    /// (docs/pytorch.md, "Threads under a fractional quota").
    pub fn whole(self) -> usize {
        (self.0.floor() as usize).max(1)
    }
}

impl fmt::Display for Cores {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.fract() == 0.0 {
            write!(f, "{}", self.0 as i64)
        } else {
            write!(f, "{}", self.0)
        }
    }
}

/// A size in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Bytes(pub u64);

impl Bytes {
    /// Size in binary gigabytes (GiB).
    pub fn gib(self) -> f64 {
        self.0 as f64 / GIB
    }
    /// The nearest whole number of bytes to `gib` GiB.
    pub fn from_gib(gib: f64) -> Bytes {
        Bytes((gib * GIB).round() as u64)
    }
    /// Size in binary megabytes (MiB).
    pub fn mib(self) -> f64 {
        self.0 as f64 / MIB
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0 as f64;
        const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
        let mut v = b;
        let mut i = 0;
        while v >= 1024.0 && i + 1 < UNITS.len() {
            v /= 1024.0;
            i += 1;
        }
        if i == 0 {
            write!(f, "{} B", self.0)
        } else {
            write!(f, "{v:.1} {}", UNITS[i])
        }
    }
}

impl std::str::FromStr for Bytes {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_bytes(s).map(Bytes)
    }
}

/// A storage or memory bandwidth in bytes per second.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BytesPerSec(pub f64);

impl std::str::FromStr for BytesPerSec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let bytes = t
            .strip_suffix("/s")
            .or_else(|| t.strip_suffix("ps"))
            .unwrap_or(t);
        // The error quotes the whole value, as typed, with a rate's examples: the size alone (`` for
        // `/s`) would not say which value was wrong. Every rate the project takes is a limit or a speed:
        // zero would stall whatever it bounds.
        match parse_bytes(bytes)
            .map_err(|e| format!("`{s}` is not a rate (examples: 20MB/s, 1.5GiB/s, 40MBps): {e}"))?
        {
            0 => Err(format!("`{s}`: a rate must be more than 0 bytes/s")),
            b => Ok(BytesPerSec(b as f64)),
        }
    }
}

/// Training throughput in samples per second.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SamplesPerSec(pub f64);

/// Parses a size such as `4096`, `256MiB`, `1.5G`, `20MB` or `2 kB`.
///
/// SI suffixes with `B` (`kB`, `MB`, `GB`, `TB`) are powers of 1000; binary ones (`KiB`, `MiB`, `GiB`, `TiB`)
/// and bare letters (`K`, `M`, `G`, `T`) are powers of 1024, as in most command-line tools.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a size (examples: 4096, 256MiB, 1.5GB)"))?;
    let mult: u64 = match unit.trim() {
        "" | "B" | "b" => 1,
        "k" | "K" | "KiB" | "kiB" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => GIB_BYTES,
        "T" | "TiB" => 1 << 40,
        "kB" | "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        other => {
            return Err(format!(
                "`{s}`: unknown size unit `{other}` (use B, KiB, MiB, GiB, TiB, kB, MB, GB or TB)"
            ))
        }
    };
    let out_of_range = || format!("`{s}` is out of range (at most 16 EiB)");
    // A whole number is read exactly (a float holds integers only up to 2^53); a fraction as a float.
    if let Ok(whole) = num.parse::<u64>() {
        return whole.checked_mul(mult).ok_or_else(out_of_range);
    }
    let bytes = value * mult as f64;
    // 2^64 itself is out of range: `u64::MAX as f64` rounds up to it.
    if !bytes.is_finite() || bytes < 0.0 || bytes >= u64::MAX as f64 {
        return Err(out_of_range());
    }
    Ok(bytes.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_si_and_binary_units() {
        assert_eq!(parse_bytes("4096").unwrap(), 4096);
        assert_eq!(parse_bytes("256MiB").unwrap(), 256 << 20);
        assert_eq!(parse_bytes("256M").unwrap(), 256 << 20);
        assert_eq!(parse_bytes("20MB").unwrap(), 20_000_000);
        assert_eq!(parse_bytes("1.5G").unwrap(), 3 << 29);
        assert!(parse_bytes("12 parsecs").is_err());
        assert!(parse_bytes("-3").is_err());
        assert_eq!("20MB/s".parse::<BytesPerSec>().unwrap().0, 20e6);
        assert!("0MB/s".parse::<BytesPerSec>().is_err());
    }

    #[test]
    fn fractional_cores_need_whole_threads() {
        assert_eq!(Cores(0.5).threads(), 1);
        assert_eq!(Cores(1.5).threads(), 2);
        assert_eq!(Cores(2.0).threads(), 2);
    }

    #[test]
    fn compute_threads_are_the_whole_cores() {
        assert_eq!(Cores(0.5).whole(), 1);
        assert_eq!(Cores(1.25).whole(), 1);
        assert_eq!(Cores(1.99).whole(), 1);
        assert_eq!(Cores(2.0).whole(), 2);
    }
}
