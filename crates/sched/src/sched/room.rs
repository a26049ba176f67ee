//! Which servers have room during a round: a segment tree over the servers of their free GPUs, cores and
//! memory, so that placement finds the first server (in index order) that holds a part in about log S
//! steps instead of scanning every server with a free GPU (docs/architecture.md §5.1, "Cost of a
//! round"). It only prunes: a subtree is skipped when no server in it can hold the part, and every
//! server it returns is checked with [`ClusterState::fits`](crate::sched::ClusterState::fits), so the
//! servers found are exactly those a scan in index order finds.

use crate::sched::place::{need, Share};
use crate::sched::server::{ServerSpec, EPS};

/// What a subtree has free: bounds over its servers.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Free {
    /// Most free GPUs of a server.
    max_gpus: u32,
    /// Fewest free GPUs of a server that has any (`u32::MAX` when none has).
    min_open_gpus: u32,
    /// Most free cores of a server that has a free GPU (-inf when none has).
    max_cpus: f64,
    /// Most free GiB of a server that has a free GPU (-inf when none has).
    max_memory_gib: f64,
}

impl Free {
    const NONE: Free = Free {
        max_gpus: 0,
        min_open_gpus: u32::MAX,
        max_cpus: f64::NEG_INFINITY,
        max_memory_gib: f64::NEG_INFINITY,
    };

    fn of(gpus: u32, cpus: f64, memory_gib: f64) -> Free {
        if gpus == 0 {
            return Free::NONE;
        }
        Free {
            max_gpus: gpus,
            min_open_gpus: gpus,
            max_cpus: cpus,
            max_memory_gib: memory_gib,
        }
    }

    fn join(a: &Free, b: &Free) -> Free {
        Free {
            max_gpus: a.max_gpus.max(b.max_gpus),
            min_open_gpus: a.min_open_gpus.min(b.min_open_gpus),
            max_cpus: a.max_cpus.max(b.max_cpus),
            max_memory_gib: a.max_memory_gib.max(b.max_memory_gib),
        }
    }
}

/// The smallest server shape in a subtree, dimension by dimension: what any of its servers asks of a
/// part is at least what this asks.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Least {
    cpus_per_gpu: f64,
    memory_gib_per_gpu: f64,
    cpus: f64,
    memory_gib: f64,
}

/// Per-subtree bounds over the servers; a leaf is one server, padding leaves hold nothing.
#[derive(Debug, Clone)]
pub struct RoomIndex {
    /// Leaves: the power of two at or above the number of servers.
    width: usize,
    /// What each node's servers have free; node 1 is the root, node `width + s` server `s`.
    free: Vec<Free>,
    /// Each node's smallest shape.
    least: Vec<Least>,
}

impl RoomIndex {
    /// The index of `specs`, every server free.
    pub fn new(specs: &[ServerSpec]) -> RoomIndex {
        let width = specs.len().next_power_of_two().max(1);
        let inf = f64::INFINITY;
        let none = Least {
            cpus_per_gpu: inf,
            memory_gib_per_gpu: inf,
            cpus: inf,
            memory_gib: inf,
        };
        let mut least = vec![none; 2 * width];
        for (i, s) in specs.iter().enumerate() {
            least[width + i] = Least {
                cpus_per_gpu: s.cpus_per_gpu(),
                memory_gib_per_gpu: s.memory_gib_per_gpu(),
                cpus: s.cpus,
                memory_gib: s.memory_gib,
            };
        }
        for n in (1..width).rev() {
            let (a, b) = (least[2 * n], least[2 * n + 1]);
            least[n] = Least {
                cpus_per_gpu: a.cpus_per_gpu.min(b.cpus_per_gpu),
                memory_gib_per_gpu: a.memory_gib_per_gpu.min(b.memory_gib_per_gpu),
                cpus: a.cpus.min(b.cpus),
                memory_gib: a.memory_gib.min(b.memory_gib),
            };
        }
        let mut r = RoomIndex {
            width,
            free: vec![Free::NONE; 2 * width],
            least,
        };
        r.reset(specs);
        r
    }

    /// Every server free again.
    pub fn reset(&mut self, specs: &[ServerSpec]) {
        for (i, s) in specs.iter().enumerate() {
            self.free[self.width + i] = Free::of(s.gpus, s.cpus, s.memory_gib);
        }
        for n in (1..self.width).rev() {
            self.free[n] = Free::join(&self.free[2 * n], &self.free[2 * n + 1]);
        }
    }

    /// Server `server` now has `gpus` GPUs, `cpus` cores and `memory_gib` GiB free.
    pub fn update(&mut self, server: usize, gpus: u32, cpus: f64, memory_gib: f64) {
        let mut n = self.width + server;
        self.free[n] = Free::of(gpus, cpus, memory_gib);
        while n > 1 {
            n /= 2;
            let joined = Free::join(&self.free[2 * n], &self.free[2 * n + 1]);
            // Nothing above changes once a node's bounds have not.
            if joined == self.free[n] {
                break;
            }
            self.free[n] = joined;
        }
    }

    /// Whether some server under node `n` might hold `gpus` GPUs at `share`: the least any of its servers
    /// would need (need is monotone in the server's shape) against the most any has free.
    fn may_hold(&self, n: usize, gpus: u32, share: Share) -> bool {
        let f = &self.free[n];
        if f.max_gpus < gpus {
            return false;
        }
        let l = &self.least[n];
        let (c, m) = match share {
            Share::Proportional => {
                let k = gpus as f64;
                (k * l.cpus_per_gpu, k * l.memory_gib_per_gpu)
            }
            per_gpu => need(
                &ServerSpec {
                    gpus: 1,
                    cpus: l.cpus,
                    memory_gib: l.memory_gib,
                },
                gpus,
                per_gpu,
            ),
        };
        f.max_cpus + EPS >= c && f.max_memory_gib + EPS >= m
    }

    /// The first server at or after `from` (in index order) under a chain of nodes that `prune` passes
    /// and that `leaf` accepts: a depth-first walk, left first, that skips what lies before `from`.
    fn first(
        &self,
        from: usize,
        prune: impl Fn(usize) -> bool,
        mut leaf: impl FnMut(usize) -> bool,
    ) -> Option<usize> {
        if from >= self.width {
            return None;
        }
        // From the first server the walk starts at the root; else at the leaf `from`, climbing to the
        // subtrees to its right.
        let mut n = if from == 0 { 1 } else { self.width + from };
        loop {
            if prune(n) {
                // Descend to the first accepted leaf under n, left first.
                let mut m = n;
                loop {
                    if m >= self.width {
                        if leaf(m - self.width) {
                            return Some(m - self.width);
                        }
                        break;
                    }
                    if prune(2 * m) {
                        m *= 2;
                    } else if prune(2 * m + 1) {
                        m = 2 * m + 1;
                    } else {
                        break;
                    }
                }
                // m failed: move on to the next subtree after m (within n's range or beyond).
                n = m;
            }
            // Next: the right sibling of the nearest ancestor (or self) that is a left child.
            while n & 1 == 1 {
                n /= 2;
                if n == 0 {
                    return None;
                }
            }
            if n == 0 {
                return None;
            }
            n += 1;
        }
    }

    /// The first server at or after `from` that might hold `gpus` GPUs at `share` and that `holds`
    /// (the exact test) accepts.
    pub fn first_holding(
        &self,
        from: usize,
        gpus: u32,
        share: Share,
        holds: impl FnMut(usize) -> bool,
    ) -> Option<usize> {
        self.first(from, |n| self.may_hold(n, gpus, share), holds)
    }

    /// The first server at or after `from` with `lo..=hi` free GPUs (`lo` at least 1).
    pub fn first_with_free_gpus(&self, from: usize, lo: u32, hi: u32) -> Option<usize> {
        debug_assert!(lo >= 1);
        self.first(
            from,
            |n| self.free[n].max_gpus >= lo && self.free[n].min_open_gpus <= hi,
            |s| {
                let g = self.free[self.width + s].max_gpus;
                g >= lo && g <= hi
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
        let root = &self.free[1];
        (root.max_gpus > 0).then_some((root.min_open_gpus, root.max_gpus))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::cluster::{ClusterConfig, ClusterState, Part};

    /// The room index finds exactly the servers a scan in index order finds, on a mixed cluster taken
    /// apart by random parts.
    #[test]
    fn searches_agree_with_a_scan_in_index_order() {
        let mut servers = Vec::new();
        for i in 0..37u32 {
            servers.push(ServerSpec {
                gpus: [4, 8, 16][i as usize % 3],
                cpus: [16.0, 24.0, 64.0][(i as usize / 3) % 3],
                memory_gib: [200.0, 500.0, 1000.0][(i as usize / 2) % 3],
            });
        }
        let mut state = ClusterState::new(&ClusterConfig { servers });
        let mut seed = 12345u64;
        let mut draw = |n: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        let shares = [
            Share::Proportional,
            Share::PerGpu {
                cpus: 6.0,
                memory_gib: 40.0,
            },
            Share::PerGpu {
                cpus: 1.0,
                memory_gib: 150.0,
            },
        ];
        for _ in 0..400 {
            let gpus = 1 + draw(16) as u32;
            let share = shares[draw(3) as usize];
            let scan = (0..state.specs.len()).find(|&s| {
                let (c, m) = need(&state.specs[s], gpus, share);
                state.fits(s, gpus, c, m)
            });
            let found = state.room.first_holding(0, gpus, share, |s| {
                let (c, m) = need(&state.specs[s], gpus, share);
                state.fits(s, gpus, c, m)
            });
            assert_eq!(found, scan);
            let (lo, hi) = (1 + draw(4) as u32, 1 + draw(16) as u32);
            let scan: Vec<usize> = (0..state.specs.len())
                .filter(|&s| (lo..=hi).contains(&state.free_gpus[s]))
                .collect();
            assert_eq!(state.room.with_free_gpus(lo, hi).collect::<Vec<_>>(), scan);
            // Take part of a random server, or free everything now and then.
            let s = draw(state.specs.len() as u64) as usize;
            let k = state.free_gpus[s].min(1 + draw(4) as u32);
            let (c, m) = need(&state.specs[s], k, share);
            if draw(50) == 0 {
                state.reset();
            } else if k > 0 && state.fits(s, k, c, m) {
                state.take(
                    0,
                    Part {
                        server: s as u32,
                        gpus: k,
                        cpus: c,
                        memory_gib: m,
                    },
                );
            }
        }
    }
}
