//! The sensitivity matrix as a profile stores it: the reference server shape, the matrix on its axes and
//! per GPU, where each cell came from, and the best-case demand.

use super::Stage;
use serde::{Deserialize, Serialize};

/// A server shape: the GPU-proportional share is its cores and memory divided by its GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerShape {
    /// GPUs.
    pub gpus: u32,
    /// CPU cores.
    pub cpus: f64,
    /// Memory, GiB.
    pub memory_gib: f64,
}

impl ServerShape {
    /// Cores per GPU at GPU-proportional share.
    pub fn cpus_per_gpu(&self) -> f64 {
        self.cpus / self.gpus.max(1) as f64
    }
    /// Memory per GPU at GPU-proportional share, GiB.
    pub fn memory_gib_per_gpu(&self) -> f64 {
        self.memory_gib / self.gpus.max(1) as f64
    }
}

impl std::str::FromStr for ServerShape {
    type Err = String;
    /// Parses `8gpu,24cpu,500gb` (any order; memory in gb/gib as GiB, or tb).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (mut gpus, mut cpus, mut mem) = (None, None, None);
        for part in s.split(',').map(str::trim) {
            let split = part
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(part.len());
            let (num, unit) = part.split_at(split);
            let v: f64 = num.parse().map_err(|_| {
                format!("`{part}`: expected a number with a unit, like 8gpu, 24cpu or 500gb")
            })?;
            if !(v.is_finite() && v > 0.0) {
                return Err(format!("`{part}` must be positive"));
            }
            // Messages quote the part as typed; the unit is matched in any case.
            match unit.to_ascii_lowercase().as_str() {
                "gpu" | "gpus" => {
                    // A whole number that fits: `0.5gpu` is no server, `1.5gpu` not one GPU.
                    let whole = num.parse::<u32>().ok().filter(|&g| g > 0);
                    gpus = Some(whole.ok_or_else(|| {
                        format!(
                            "`{part}`: GPUs must be a whole number from 1 to {}",
                            u32::MAX
                        )
                    })?)
                }
                "cpu" | "cpus" | "cores" => cpus = Some(v),
                "gb" | "gib" | "g" => mem = Some(v),
                "tb" | "tib" => mem = Some(v * 1024.0),
                _ => {
                    return Err(format!(
                        "`{part}`: unknown unit `{unit}` (use gpu, cpu, gb)"
                    ))
                }
            }
        }
        match (gpus, cpus, mem) {
            (Some(_), Some(_), Some(m)) if !m.is_finite() => {
                Err(format!("`{s}`: the memory is out of range"))
            }
            (Some(g), Some(c), Some(m)) => Ok(ServerShape {
                gpus: g,
                cpus: c,
                memory_gib: m,
            }),
            _ => Err(format!(
                "`{s}` needs all of GPUs, cores and memory, like 8gpu,24cpu,500gb"
            )),
        }
    }
}

/// The sensitivity matrix: throughput for every (cores, memory) allocation of the whole job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Matrix {
    /// Row axis: CPU cores.
    pub cpus: Vec<f64>,
    /// Column axis: memory, GiB (footprint plus cache).
    pub memory_gib: Vec<f64>,
    /// Absolute throughput, samples per second, `[row][column]` (absent for published profiles).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples_per_s: Option<Vec<Vec<f64>>>,
    /// Throughput relative to the GPU-proportional allocation of the server shape, `[row][column]`.
    pub normalized: Vec<Vec<f64>>,
    /// The limiting stage per cell (absent for published profiles).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limited_by: Option<Vec<Vec<Stage>>>,
    /// The GPU-proportional allocation and its throughput, the normalization's 1.0.
    pub proportional: RatedAllocation,
    /// Where each cell's number comes from, `[row][column]` (absent before 1.3 and in profiles no
    /// refinement made: their cells are modelled except where a trial measured them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Vec<Vec<CellSource>>>,
}

/// Where a matrix cell's number comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CellSource {
    /// A profiling trial ran at this allocation (a cached CPU trial stands for every column where memory
    /// does not bind).
    Measured,
    /// A real run observed this allocation (same cores; memory in the same cache regime).
    Observed,
    /// The fitted model's prediction, measured nowhere.
    Modelled,
}

/// The matrix per GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerGpuMatrix {
    /// Cores per GPU.
    pub cpus: Vec<f64>,
    /// Memory per GPU, GiB.
    pub memory_gib: Vec<f64>,
    /// Normalized throughput, `[row][column]`.
    pub normalized: Vec<Vec<f64>>,
}

/// An allocation and its throughput.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RatedAllocation {
    /// Cores.
    pub cpus: f64,
    /// Memory, GiB.
    pub memory_gib: f64,
    /// Samples per second, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples_per_s: Option<f64>,
    /// Relative to GPU-proportional.
    pub normalized: f64,
}

/// The best-case demand: the smallest allocation within `tolerance` of the best throughput.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Demand {
    /// For the whole job.
    pub job: RatedAllocation,
    /// Per GPU.
    pub per_gpu: RatedAllocation,
    /// Fraction of the best throughput that still counts as best.
    pub tolerance: f64,
}
