//! The cluster model: server shapes (from a TOML file or flags) and, during a round, each server's free
//! GPUs, cores and memory, with the jobs placed on it. It refuses to over-allocate any server.

use crate::error::InputError;
use crate::sched::room::RoomIndex;
use crate::sched::semantics::Semantics;
pub use crate::sched::server::{ServerSpec, EPS};
use crate::units::gb_to_gib;
use serde::Deserialize;
use std::path::Path;

/// The servers of a cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterConfig {
    /// Every server, in placement order.
    pub servers: Vec<ServerSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClusterFile {
    servers: Vec<ServerGroup>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerGroup {
    #[serde(default = "one")]
    count: u32,
    gpus: u32,
    cpus: f64,
    #[serde(default)]
    memory_gb: Option<f64>,
    #[serde(default)]
    memory_gib: Option<f64>,
}

fn one() -> u32 {
    1
}

/// The most servers a cluster may have: far beyond the 2,048-GPU (256-server) target of
/// docs/architecture.md §6, and still a few megabytes of server records.
pub const MAX_SERVERS: usize = 100_000;

/// The most GPUs a simulated cluster may have in all: 512 times the paper's largest (2,048), and few
/// enough that the simulator's per-server state fits this host (docs/simulate.md).
pub const MAX_GPUS: u64 = 1 << 20;

/// Why a cluster of `total` GPUs is too large, if it is.
pub fn too_many_gpus(total: u64) -> Option<String> {
    (total > MAX_GPUS)
        .then(|| format!("{total} GPUs in all; a cluster may have at most {MAX_GPUS}"))
}

impl ClusterConfig {
    /// `servers` identical servers; memory in decimal GB as the paper states it (converted to GiB).
    pub fn uniform(servers: u32, gpus: u32, cpus: f64, memory_gb: f64) -> ClusterConfig {
        ClusterConfig {
            servers: vec![
                ServerSpec {
                    gpus,
                    cpus,
                    memory_gib: gb_to_gib(memory_gb),
                };
                servers as usize
            ],
        }
    }

    /// The paper's default: 16 servers of 8 GPUs, 24 cores and 500 GB.
    pub fn paper_default() -> ClusterConfig {
        Self::uniform(16, 8, 24.0, 500.0)
    }

    /// Parses a cluster file:
    /// `[[servers]]` tables with `count` (default 1), `gpus`, `cpus`, and `memory_gb` or `memory_gib`.
    pub fn parse(text: &str, origin: &str) -> Result<ClusterConfig, InputError> {
        let file: ClusterFile =
            toml::from_str(text).map_err(|e| InputError::toml(origin, text, &e))?;
        let mut servers = Vec::new();
        let (mut total_cpus, mut total_memory_gib) = (0.0, 0.0);
        let mut total_gpus = 0u64;
        for (i, g) in file.servers.iter().enumerate() {
            let field = |f: &str| format!("servers[{i}].{f}");
            if g.count == 0 {
                return Err(InputError::field(
                    origin,
                    field("count"),
                    "must be at least 1",
                ));
            }
            // Each server is a record of its own: a count in the billions would build them for minutes
            // and then run out of memory.
            if servers.len() + g.count as usize > MAX_SERVERS {
                return Err(InputError::field(
                    origin,
                    field("count"),
                    format!("the cluster may have at most {MAX_SERVERS} servers in all"),
                ));
            }
            if g.gpus == 0 || u64::from(g.gpus) > crate::range::MAX_GPUS_PER_SERVER {
                return Err(InputError::field(
                    origin,
                    field("gpus"),
                    format!(
                        "must be 1 to {} (GPUs of one server)",
                        crate::range::MAX_GPUS_PER_SERVER
                    ),
                ));
            }
            if !(g.cpus.is_finite() && g.cpus > 0.0) {
                return Err(InputError::field(origin, field("cpus"), "must be positive"));
            }
            let memory_gib = match (g.memory_gb, g.memory_gib) {
                (Some(gb), None) => gb_to_gib(gb),
                (None, Some(gib)) => gib,
                _ => {
                    return Err(InputError::field(
                        origin,
                        field("memory_gb"),
                        "give exactly one of memory_gb (decimal GB) and memory_gib",
                    ))
                }
            };
            if !(memory_gib.is_finite() && memory_gib > 0.0) {
                return Err(InputError::field(
                    origin,
                    field("memory_gb"),
                    "must be positive",
                ));
            }
            // The simulator divides by the cluster's totals: they must stay finite.
            total_cpus += g.cpus * g.count as f64;
            total_memory_gib += memory_gib * g.count as f64;
            for (f, total) in [("cpus", total_cpus), ("memory_gb", total_memory_gib)] {
                if !total.is_finite() {
                    return Err(InputError::field(
                        origin,
                        field(f),
                        "is too large: the cluster's total overflows",
                    ));
                }
            }
            total_gpus += g.count as u64 * g.gpus as u64;
            if let Some(why) = too_many_gpus(total_gpus) {
                return Err(InputError::field(origin, field("count"), why));
            }
            for _ in 0..g.count {
                servers.push(ServerSpec {
                    gpus: g.gpus,
                    cpus: g.cpus,
                    memory_gib,
                });
            }
        }
        if servers.is_empty() {
            return Err(InputError::field(origin, "servers", "lists no server"));
        }
        Ok(ClusterConfig { servers })
    }

    /// Reads a cluster file.
    pub fn read(path: &Path) -> Result<ClusterConfig, InputError> {
        let origin = path.display().to_string();
        let text = crate::input::read_text(path, crate::input::CLUSTER)
            .map_err(|e| e.into_input(&origin))?;
        Self::parse(&text, &origin)
    }

    /// GPUs in the whole cluster.
    pub fn total_gpus(&self) -> u64 {
        self.servers.iter().map(|s| s.gpus as u64).sum()
    }
    /// Cores in the whole cluster.
    pub fn total_cpus(&self) -> f64 {
        self.servers.iter().map(|s| s.cpus).sum()
    }
    /// Memory in the whole cluster, GiB.
    pub fn total_memory_gib(&self) -> f64 {
        self.servers.iter().map(|s| s.memory_gib).sum()
    }
    /// GPUs of the widest server.
    pub fn max_server_gpus(&self) -> u32 {
        self.servers.iter().map(|s| s.gpus).max().unwrap_or(0)
    }
}

/// A job's share of one server.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Part {
    /// Server index.
    pub server: u32,
    /// GPUs there.
    pub gpus: u32,
    /// Cores there.
    pub cpus: f64,
    /// Memory there, GiB.
    pub memory_gib: f64,
}

/// Free capacity of every server during one round, and which jobs (by round slot) sit where.
#[derive(Debug, Clone)]
pub struct ClusterState {
    /// Server shapes.
    pub specs: Vec<ServerSpec>,
    /// Free GPUs per server.
    pub free_gpus: Vec<u32>,
    /// Free cores per server.
    pub free_cpus: Vec<f64>,
    /// Free memory per server, GiB.
    pub free_memory_gib: Vec<f64>,
    /// Slots of the jobs placed on each server this round.
    pub residents: Vec<Vec<u32>>,
    /// Which servers have room, kept as parts are taken and given back (placement searches it).
    pub room: RoomIndex,
    /// Free GPUs in the whole cluster.
    pub free_gpus_total: u64,
    /// The rules placement, demotion and speed follow (docs/simulate.md, "Two semantics").
    pub semantics: Semantics,
    /// The server with the most GPUs (the last of equals), found once: every placement asks for it.
    widest: ServerSpec,
    /// The fewest and most cores and GiB per GPU at the proportional share over the servers.
    share_range: ShareRange,
}

/// The fewest and most cores and GiB per GPU that the servers give at the proportional share.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShareRange {
    /// Fewest cores per GPU.
    pub min_cpus_per_gpu: f64,
    /// Fewest GiB per GPU.
    pub min_memory_gib_per_gpu: f64,
    /// Most cores per GPU.
    pub max_cpus_per_gpu: f64,
    /// Most GiB per GPU.
    pub max_memory_gib_per_gpu: f64,
}

impl ClusterState {
    /// The server with the most GPUs (the last of equals): it bounds what one job's demand may ask for.
    pub fn widest_server(&self) -> ServerSpec {
        self.widest
    }

    /// The range of the servers' per-GPU proportional shares.
    pub fn share_range(&self) -> ShareRange {
        self.share_range
    }

    /// An empty cluster under this project's semantics.
    pub fn new(cfg: &ClusterConfig) -> ClusterState {
        Self::with_semantics(cfg, Semantics::SYNERGY)
    }

    /// An empty cluster whose placements follow `semantics`.
    pub fn with_semantics(cfg: &ClusterConfig, semantics: Semantics) -> ClusterState {
        let specs = &cfg.servers;
        let widest = *specs
            .iter()
            .max_by_key(|s| s.gpus)
            .expect("a cluster has servers");
        let share_range = specs.iter().fold(
            ShareRange {
                min_cpus_per_gpu: f64::INFINITY,
                min_memory_gib_per_gpu: f64::INFINITY,
                max_cpus_per_gpu: 0.0,
                max_memory_gib_per_gpu: 0.0,
            },
            |r, s| ShareRange {
                min_cpus_per_gpu: r.min_cpus_per_gpu.min(s.cpus_per_gpu()),
                min_memory_gib_per_gpu: r.min_memory_gib_per_gpu.min(s.memory_gib_per_gpu()),
                max_cpus_per_gpu: r.max_cpus_per_gpu.max(s.cpus_per_gpu()),
                max_memory_gib_per_gpu: r.max_memory_gib_per_gpu.max(s.memory_gib_per_gpu()),
            },
        );
        let mut s = ClusterState {
            specs: specs.clone(),
            free_gpus: Vec::new(),
            free_cpus: Vec::new(),
            free_memory_gib: Vec::new(),
            residents: vec![Vec::new(); specs.len()],
            room: RoomIndex::new(specs),
            free_gpus_total: 0,
            semantics,
            widest,
            share_range,
        };
        s.reset();
        s
    }

    /// Frees everything (rounds allocate from scratch).
    pub fn reset(&mut self) {
        self.free_gpus.clear();
        self.free_cpus.clear();
        self.free_memory_gib.clear();
        self.free_gpus_total = 0;
        for (i, s) in self.specs.iter().enumerate() {
            self.free_gpus.push(s.gpus);
            self.free_cpus.push(s.cpus);
            self.free_memory_gib.push(s.memory_gib);
            self.residents[i].clear();
            self.free_gpus_total += s.gpus as u64;
        }
        self.room.reset(&self.specs);
    }

    /// Tells the room index what server `s` has free now.
    fn changed(&mut self, s: usize) {
        self.room.update(
            s,
            self.free_gpus[s],
            self.free_cpus[s],
            self.free_memory_gib[s],
        );
    }

    /// Whether `part` fits on its server now.
    pub fn fits(&self, server: usize, gpus: u32, cpus: f64, memory_gib: f64) -> bool {
        self.free_gpus[server] >= gpus
            && self.free_cpus[server] + EPS >= cpus
            && self.free_memory_gib[server] + EPS >= memory_gib
    }

    /// Takes `part` for job `slot`; the caller has checked that it fits.
    pub fn take(&mut self, slot: u32, p: Part) {
        let s = p.server as usize;
        debug_assert!(
            self.fits(s, p.gpus, p.cpus, p.memory_gib),
            "server {s} over-allocated: {p:?} with {} GPUs, {} cores, {} GiB free",
            self.free_gpus[s],
            self.free_cpus[s],
            self.free_memory_gib[s]
        );
        self.free_gpus[s] -= p.gpus;
        self.free_cpus[s] -= p.cpus;
        self.free_memory_gib[s] -= p.memory_gib;
        self.free_gpus_total -= p.gpus as u64;
        if p.gpus > 0 {
            self.residents[s].push(slot);
        }
        self.changed(s);
    }

    /// Gives back cores and memory (not GPUs) of a part when a job is demoted; a negative amount takes
    /// more (a job brought up to its share in one dimension while it gives up the other).
    pub fn give_back(&mut self, server: u32, cpus: f64, memory_gib: f64) {
        let s = server as usize;
        self.free_cpus[s] += cpus;
        self.free_memory_gib[s] += memory_gib;
        self.changed(s);
        debug_assert!(
            self.free_cpus[s] >= -EPS && self.free_memory_gib[s] >= -EPS,
            "server {s} over-allocated by a demotion"
        );
        debug_assert!(self.free_cpus[s] <= self.specs[s].cpus + EPS);
        debug_assert!(self.free_memory_gib[s] <= self.specs[s].memory_gib + EPS);
    }

    /// Whether no server holds more than its capacity.
    pub fn consistent(&self) -> bool {
        self.specs.iter().enumerate().all(|(i, s)| {
            self.free_gpus[i] <= s.gpus
                && self.free_cpus[i] >= -EPS
                && self.free_memory_gib[i] >= -EPS
                && self.free_cpus[i] <= s.cpus + EPS
                && self.free_memory_gib[i] <= s.memory_gib + EPS
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_files_name_line_and_field() {
        let c = ClusterConfig::parse(
            "[[servers]]\ncount = 2\ngpus = 8\ncpus = 24\nmemory_gb = 500\n",
            "c.toml",
        )
        .unwrap();
        assert_eq!(c.total_gpus(), 16);
        let e = ClusterConfig::parse("[[servers]]\ngpus = 8\ncpus = 'x'\n", "c.toml").unwrap_err();
        assert!(e.to_string().contains("line 3"), "{e}");
        let e = ClusterConfig::parse("[[servers]]\ngpus = 8\ncpus = 4\n", "c.toml").unwrap_err();
        assert!(e.to_string().contains("servers[0].memory_gb"), "{e}");
        let e = ClusterConfig::parse("servers = []\n", "c.toml").unwrap_err();
        assert!(e.to_string().contains("servers"), "{e}");
    }
}
