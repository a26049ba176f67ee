//! Per-trial telemetry: CPU time, storage reads and page cache of the isolation domain, and GPU
//! utilization, memory and SM clock through NVML where a GPU exists (no GPU is a normal, silent case).

use crate::format::trial::GpuTelemetry;
use crate::isolate::DomainStats;
use nvml_wrapper::enum_wrappers::device::Clock;
use nvml_wrapper::Nvml;

/// Samples NVML during a trial. Holds the library open for the whole trial, as NVML expects.
pub struct GpuSampler {
    nvml: Nvml,
    indices: Vec<u32>,
    acc: GpuTelemetry,
    util_sum: f64,
    clock_sum: f64,
    readings: u64,
}

impl GpuSampler {
    /// A sampler over the GPUs in `visible` (CUDA_VISIBLE_DEVICES-style indices), or all GPUs; `None` when
    /// NVML or a GPU is absent.
    pub fn new(visible: Option<&[u32]>) -> Option<Self> {
        let nvml = Nvml::init().ok()?;
        let count = nvml.device_count().ok()?;
        if count == 0 {
            return None;
        }
        let indices: Vec<u32> = match visible {
            Some(v) => v.iter().copied().filter(|&i| i < count).collect(),
            None => (0..count).collect(),
        };
        let devices = indices
            .iter()
            .filter_map(|&i| nvml.device_by_index(i).ok()?.name().ok())
            .collect();
        Some(GpuSampler {
            nvml,
            indices,
            acc: GpuTelemetry {
                devices,
                ..Default::default()
            },
            util_sum: 0.0,
            clock_sum: 0.0,
            readings: 0,
        })
    }

    /// Takes one reading of every device.
    pub fn sample(&mut self) {
        for &i in &self.indices {
            let Ok(dev) = self.nvml.device_by_index(i) else {
                continue;
            };
            if let Ok(u) = dev.utilization_rates() {
                self.util_sum += u.gpu as f64;
                self.readings += 1;
            }
            if let Ok(m) = dev.memory_info() {
                self.acc.memory_used_peak_bytes = self.acc.memory_used_peak_bytes.max(m.used);
            }
            if let Ok(c) = dev.clock_info(Clock::SM) {
                self.clock_sum += c as f64;
            }
        }
        self.acc.samples += 1;
    }

    /// The averages so far.
    pub fn summary(&self) -> GpuTelemetry {
        let mut out = self.acc.clone();
        if self.readings > 0 {
            out.utilization_pct = self.util_sum / self.readings as f64;
            out.sm_clock_mhz = self.clock_sum / self.readings as f64;
        }
        out
    }
}

/// Tracks peaks of domain statistics across periodic readings.
#[derive(Debug, Clone, Default)]
pub struct Peaks {
    /// Largest page cache seen.
    pub page_cache_bytes: Option<u64>,
    /// Largest memory seen.
    pub memory_bytes: Option<u64>,
    /// Largest memory less page cache in one reading.
    pub resident_bytes: Option<u64>,
}

impl Peaks {
    /// Folds one reading in.
    pub fn observe(&mut self, s: &DomainStats) {
        let max = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(x), Some(y)) => Some(x.max(y)),
            (x, y) => x.or(y),
        };
        self.page_cache_bytes = max(self.page_cache_bytes, s.page_cache_bytes);
        self.memory_bytes = max(self.memory_bytes, s.memory_bytes);
        let resident = s
            .memory_bytes
            .map(|m| m.saturating_sub(s.page_cache_bytes.unwrap_or(0)));
        self.resident_bytes = max(self.resident_bytes, resident);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_gpu_is_silent() {
        // On a host without NVML this is None; on a GPU host it is Some with at least one device.
        if let Some(s) = GpuSampler::new(None) {
            assert!(!s.summary().devices.is_empty());
        }
    }

    #[test]
    fn peaks_keep_the_largest_reading() {
        let mut p = Peaks::default();
        for cache in [Some(5), None, Some(9), Some(7)] {
            p.observe(&DomainStats {
                page_cache_bytes: cache,
                ..Default::default()
            });
        }
        assert_eq!(p.page_cache_bytes, Some(9));
        assert_eq!(p.memory_bytes, None);
        assert_eq!(p.resident_bytes, None);
    }

    #[test]
    fn the_resident_peak_takes_cache_from_the_same_reading() {
        // A job that loads 1000 of library pages, then grows its heap to 400 while they are reclaimed:
        // its peak besides page cache is 400, not the whole peak 1100 less the cache peak 1000.
        let mut p = Peaks::default();
        for (memory, cache) in [(1100, 1000), (600, 300), (450, 50)] {
            p.observe(&DomainStats {
                memory_bytes: Some(memory),
                page_cache_bytes: Some(cache),
                ..Default::default()
            });
        }
        assert_eq!(p.memory_bytes, Some(1100));
        assert_eq!(p.page_cache_bytes, Some(1000));
        assert_eq!(p.resident_bytes, Some(400));
    }
}
