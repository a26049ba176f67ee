//! Which servers have room during a round: a segment tree over the servers of their free GPUs, cores and
//! memory, so that placement finds the first server (in index order) that holds a part in about log S
//! steps instead of scanning every server with a free GPU (docs/architecture.md §5.1, "Cost of a
//! round"). It only prunes: a subtree is skipped when no server in it can hold the part, and every
//! server it returns is checked with [`ClusterState::fits`](crate::sched::ClusterState::fits), so the
//! servers found are exactly those a scan in index order finds.

use crate::sched::place::{need, Share};
use crate::sched::server::{ServerSpec, EPS};

/// Per-subtree bounds over the servers; a leaf is one server, padding leaves hold nothing.
#[derive(Debug, Clone)]
pub struct RoomIndex {
    /// Leaves: the power of two at or above the number of servers.
    width: usize,
    /// Most free GPUs of a server in the subtree.
    max_gpus: Vec<u32>,
    /// Fewest free GPUs of a server in the subtree that has any (`u32::MAX` when none has).
    min_open_gpus: Vec<u32>,
    /// Most free cores of a server in the subtree that has a free GPU (-inf when none has).
    max_cpus: Vec<f64>,
    /// Most free GiB of a server in the subtree that has a free GPU (-inf when none has).
    max_memory_gib: Vec<f64>,
    /// Fewest cores per GPU at the proportional share of a server in the subtree.
    min_cpus_per_gpu: Vec<f64>,
    /// Fewest GiB per GPU at the proportional share.
    min_memory_gib_per_gpu: Vec<f64>,
    /// Fewest cores of a server.
    min_cpus: Vec<f64>,
    /// Fewest GiB of a server.
    min_memory_gib: Vec<f64>,
}

impl RoomIndex {
    /// The index of `specs`, every server free.
    pub fn new(specs: &[ServerSpec]) -> RoomIndex {
        let width = specs.len().next_power_of_two().max(1);
        let inf = f64::INFINITY;
        let mut r = RoomIndex {
            width,
            max_gpus: vec![0; 2 * width],
            min_open_gpus: vec![u32::MAX; 2 * width],
            max_cpus: vec![-inf; 2 * width],
            max_memory_gib: vec![-inf; 2 * width],
            min_cpus_per_gpu: vec![inf; 2 * width],
            min_memory_gib_per_gpu: vec![inf; 2 * width],
            min_cpus: vec![inf; 2 * width],
            min_memory_gib: vec![inf; 2 * width],
        };
        for (i, s) in specs.iter().enumerate() {
            let n = width + i;
            r.min_cpus_per_gpu[n] = s.cpus_per_gpu();
            r.min_memory_gib_per_gpu[n] = s.memory_gib_per_gpu();
            r.min_cpus[n] = s.cpus;
            r.min_memory_gib[n] = s.memory_gib;
        }
        for n in (1..width).rev() {
            let (a, b) = (2 * n, 2 * n + 1);
            r.min_cpus_per_gpu[n] = r.min_cpus_per_gpu[a].min(r.min_cpus_per_gpu[b]);
            r.min_memory_gib_per_gpu[n] =
                r.min_memory_gib_per_gpu[a].min(r.min_memory_gib_per_gpu[b]);
            r.min_cpus[n] = r.min_cpus[a].min(r.min_cpus[b]);
            r.min_memory_gib[n] = r.min_memory_gib[a].min(r.min_memory_gib[b]);
        }
        r.reset(specs);
        r
    }

    /// Every server free again.
    pub fn reset(&mut self, specs: &[ServerSpec]) {
        for (i, s) in specs.iter().enumerate() {
            self.set_leaf(i, s.gpus, s.cpus, s.memory_gib);
        }
        for n in (1..self.width).rev() {
            self.pull(n);
        }
    }

    /// Server `server` now has `gpus` GPUs, `cpus` cores and `memory_gib` GiB free.
    pub fn update(&mut self, server: usize, gpus: u32, cpus: f64, memory_gib: f64) {
        self.set_leaf(server, gpus, cpus, memory_gib);
        let mut n = (self.width + server) / 2;
        while n >= 1 {
            self.pull(n);
            n /= 2;
        }
    }

    fn set_leaf(&mut self, server: usize, gpus: u32, cpus: f64, memory_gib: f64) {
        let n = self.width + server;
        self.max_gpus[n] = gpus;
        let open = gpus > 0;
        self.min_open_gpus[n] = if open { gpus } else { u32::MAX };
        self.max_cpus[n] = if open { cpus } else { f64::NEG_INFINITY };
        self.max_memory_gib[n] = if open { memory_gib } else { f64::NEG_INFINITY };
    }

    fn pull(&mut self, n: usize) {
        let (a, b) = (2 * n, 2 * n + 1);
        self.max_gpus[n] = self.max_gpus[a].max(self.max_gpus[b]);
        self.min_open_gpus[n] = self.min_open_gpus[a].min(self.min_open_gpus[b]);
        self.max_cpus[n] = self.max_cpus[a].max(self.max_cpus[b]);
        self.max_memory_gib[n] = self.max_memory_gib[a].max(self.max_memory_gib[b]);
    }

    /// Whether some server under node `n` might hold `gpus` GPUs at `share`: the least any of its servers
    /// would need (need is monotone in the server's shape) against the most any has free.
    fn may_hold(&self, n: usize, gpus: u32, share: Share) -> bool {
        if self.max_gpus[n] < gpus {
            return false;
        }
        let least = ServerSpec {
            gpus: 1,
            cpus: self.min_cpus[n],
            memory_gib: self.min_memory_gib[n],
        };
        let (c, m) = match share {
            Share::Proportional => {
                let k = gpus as f64;
                (
                    k * self.min_cpus_per_gpu[n],
                    k * self.min_memory_gib_per_gpu[n],
                )
            }
            per_gpu => need(&least, gpus, per_gpu),
        };
        self.max_cpus[n] + EPS >= c && self.max_memory_gib[n] + EPS >= m
    }

    /// The first server at or after `from` (in index order) under which `node` (covering `lo..hi`)
    /// passes `prune` and that `leaf` accepts.
    fn first(
        &self,
        node: usize,
        (lo, hi): (usize, usize),
        from: usize,
        prune: &dyn Fn(usize) -> bool,
        leaf: &mut dyn FnMut(usize) -> bool,
    ) -> Option<usize> {
        if hi <= from || !prune(node) {
            return None;
        }
        if node >= self.width {
            let s = node - self.width;
            return leaf(s).then_some(s);
        }
        let mid = (lo + hi) / 2;
        self.first(2 * node, (lo, mid), from, prune, leaf)
            .or_else(|| self.first(2 * node + 1, (mid, hi), from, prune, leaf))
    }

    /// The first server at or after `from` that might hold `gpus` GPUs at `share` and that `holds`
    /// (the exact test) accepts.
    pub fn first_holding(
        &self,
        from: usize,
        gpus: u32,
        share: Share,
        holds: &mut dyn FnMut(usize) -> bool,
    ) -> Option<usize> {
        self.first(
            1,
            (0, self.width),
            from,
            &|n| self.may_hold(n, gpus, share),
            holds,
        )
    }

    /// The first server at or after `from` with `lo..=hi` free GPUs (`lo` at least 1).
    pub fn first_with_free_gpus(&self, from: usize, lo: u32, hi: u32) -> Option<usize> {
        debug_assert!(lo >= 1);
        self.first(
            1,
            (0, self.width),
            from,
            &|n| self.max_gpus[n] >= lo && self.min_open_gpus[n] <= hi,
            &mut |s| {
                let n = self.width + s;
                self.max_gpus[n] >= lo && self.max_gpus[n] <= hi
            },
        )
    }

    /// Servers with `lo..=hi` free GPUs, in index order.
    pub fn with_free_gpus(&self, lo: u32, hi: u32) -> impl Iterator<Item = usize> + '_ {
        let mut from = 0;
        std::iter::from_fn(move || {
            let s = self.first_with_free_gpus(from, lo, hi)?;
            from = s + 1;
            Some(s)
        })
    }

    /// The fewest and most free GPUs of a server that has any (None when no server has a free GPU).
    pub fn open_gpu_range(&self) -> Option<(u32, u32)> {
        (self.max_gpus[1] > 0).then(|| (self.min_open_gpus[1], self.max_gpus[1]))
    }
}
