//! A server's shape as the scheduling core sees it, and the slack its sums of cores and GiB allow.

/// One server's capacity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServerSpec {
    /// GPUs.
    pub gpus: u32,
    /// CPU cores.
    pub cpus: f64,
    /// Memory, GiB.
    pub memory_gib: f64,
}

impl ServerSpec {
    /// Cores per GPU at GPU-proportional share.
    pub fn cpus_per_gpu(&self) -> f64 {
        self.cpus / self.gpus as f64
    }
    /// Memory per GPU at GPU-proportional share, GiB.
    pub fn memory_gib_per_gpu(&self) -> f64 {
        self.memory_gib / self.gpus as f64
    }
}

/// Slack for floating-point sums of cores and GiB.
pub const EPS: f64 = 1e-9;
