//! The Slurm submit-time advisor (docs/slurm.md, "The submit-time advisor"): from profiles and the node
//! shapes of a cluster's partitions, the table that Slurm's `job_submit.lua` plugin reads to give a job
//! that names its profile its best-case cores and memory, the script itself, and the check of an
//! installed table against the cluster.
//!
//! The numbers are all made here (one `size` row per profile, partition and GPU count); the script only
//! looks them up, so what a job gets is decided, and tested, in one place.

mod check;

use crate::format::advisor_table::{
    Bound, NodeShape, Partition, PerGpuDemand, Size, Table, TABLE_VERSION,
};
pub use check::{check, parse_sinfo, SINFO_FORMAT};

use crate::error::InputError;
use crate::format::profile::{Profile, ProfileError};
use crate::import::machines::MachineGroup;
use crate::sched::catalog::{Catalog, JobModel};
use std::path::{Path, PathBuf};

/// The `job_submit.lua` an administrator installs beside `slurm.conf`.
pub const SCRIPT: &str = include_str!("job_submit.lua");
/// The script's file name (Slurm looks for exactly this name in `slurm.conf`'s directory).
pub const SCRIPT_FILE: &str = "job_submit.lua";
/// The table's file name; the script reads it from its own directory.
pub const TABLE_FILE: &str = "synergy-advisor.tsv";

/// The shape of a machine group read from `sinfo` (cores whole, memory back in MiB).
pub(crate) fn shape_of_group(g: &MachineGroup) -> NodeShape {
    NodeShape {
        nodes: g.count,
        gpus: g.gpus,
        cpus: g.cpus.round() as u32,
        memory_mb: (g.memory_gb * 1e9 / 1_048_576.0).round() as u64,
    }
}

/// The per-GPU demand of a catalog model, never below its footprint (a matrix column rounded to the
/// file's precision can sit a hair under it; docs/profile-format.md, "Honest edges").
pub fn demand_of_model(m: &JobModel) -> PerGpuDemand {
    let source = std::fs::canonicalize(&m.path).unwrap_or_else(|_| m.path.clone());
    PerGpuDemand {
        name: m.name.clone(),
        cpus_per_gpu: m.best_cpus_per_gpu,
        memory_gib_per_gpu: m
            .best_memory_gib_per_gpu
            .max(m.footprint_gib_per_gpu.unwrap_or(0.0)),
        below_share: false,
        source_mtime_s: mtime_s(&source).unwrap_or(0),
        source,
    }
}

/// A file's modification time in Unix seconds.
pub(crate) fn mtime_s(p: &Path) -> Option<u64> {
    let t = std::fs::metadata(p).ok()?.modified().ok()?;
    Some(t.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs())
}

/// The cores and memory of a job of `d` asking for `gpus` GPUs on `partition`: its demand times its GPUs,
/// raised to the GPU-proportional share unless `d.below_share`, capped at a node. `None` when no node of
/// the partition has that many GPUs.
///
/// The share and the cap are those of the partition's poorest node that has `gpus` GPUs (the smallest
/// cores and memory among those shapes), so the job fits on every node that can hold its GPUs.
pub fn size(d: &PerGpuDemand, partition: &Partition, gpus: u32) -> Option<Size> {
    let eligible: Vec<&NodeShape> = partition
        .shapes
        .iter()
        .filter(|s| s.gpus >= gpus && gpus >= 1)
        .collect();
    let cap_cpus = eligible.iter().map(|s| s.cpus).min()?;
    let cap_mem = eligible.iter().map(|s| s.memory_mb).min()?;
    let share_cpus = eligible
        .iter()
        .map(|s| s.cpus as f64 * gpus as f64 / s.gpus as f64)
        .fold(f64::INFINITY, f64::min);
    let share_mem = eligible
        .iter()
        .map(|s| s.memory_mb as f64 * gpus as f64 / s.gpus as f64)
        .fold(f64::INFINITY, f64::min);
    // Whole cores and MB, rounded up: never below the demand or the share (a hair of float error is not a
    // core more).
    let up = |x: f64| (x - 1e-9).ceil().max(1.0);
    let demand_cpus = up(d.cpus_per_gpu * gpus as f64);
    let demand_mem = up(d.memory_gib_per_gpu * gpus as f64 * 1024.0);
    let pick = |demand: f64, share: f64, cap: f64| -> (f64, Bound) {
        let (v, b) = if !d.below_share && up(share) > demand {
            (up(share), Bound::Share)
        } else {
            (demand, Bound::Demand)
        };
        if v > cap {
            (cap, Bound::Node)
        } else {
            (v, b)
        }
    };
    let (cpus, cpus_by) = pick(demand_cpus, share_cpus, cap_cpus as f64);
    let (mem, memory_by) = pick(demand_mem, share_mem, cap_mem as f64);
    Some(Size {
        profile: d.name.clone(),
        partition: partition.name.clone(),
        gpus,
        cpus: cpus as u32,
        memory_mb: mem as u64,
        cpus_by,
        memory_by,
    })
}

/// Loads profiles for the table: each path a profile file or a directory of them (as `--profiles`
/// reads), names unique across all of them.
pub fn load_demands(paths: &[PathBuf]) -> Result<Vec<PerGpuDemand>, ProfileError> {
    let mut models = Vec::new();
    for p in paths {
        if p.is_dir() {
            models.extend(Catalog::load_dir(p)?.models);
        } else {
            let profile = Profile::read(p)?;
            models.push(JobModel::from_profile(&profile, p)?);
        }
    }
    let catalog = Catalog::new(models)?;
    Ok(catalog.models.iter().map(demand_of_model).collect())
}

/// Builds the table: a `size` row for every profile, partition and GPU count from 1 to the partition's
/// largest node's, and `job_names` (prefix, profile) as they were given. Partitions without GPUs are left
/// out. Errors name a job-name rule whose profile is not among `demands`.
pub fn build(
    demands: &[PerGpuDemand],
    partitions: &[Partition],
    job_names: &[(String, String)],
    generated_s: u64,
) -> Result<Table, InputError> {
    for (prefix, profile) in job_names {
        if !demands.iter().any(|d| &d.name == profile) {
            return Err(InputError::new(
                "--job-name",
                format!(
                    "`{prefix}={profile}`: no profile named `{profile}` (profiles: {})",
                    demands
                        .iter()
                        .map(|d| d.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
    }
    let partitions: Vec<Partition> = partitions
        .iter()
        .filter(|p| !p.shapes.is_empty())
        .cloned()
        .collect();
    let mut sizes = Vec::new();
    for d in demands {
        for p in &partitions {
            let most = p.shapes.iter().map(|s| s.gpus).max().unwrap_or(0);
            sizes.extend((1..=most).filter_map(|g| size(d, p, g)));
        }
    }
    Ok(Table {
        version: TABLE_VERSION,
        generated_s,
        default_partition: partitions
            .iter()
            .find(|p| p.default)
            .map(|p| p.name.clone()),
        partitions,
        profiles: demands.to_vec(),
        job_names: job_names.to_vec(),
        sizes,
    })
}

/// Writes the script and the table into `dir` as one (the plugin rereads the script when its
/// modification time changes, and the table on every submission: neither may be seen half written, and
/// a full disk leaves both old).
pub fn write(dir: &Path, table: &Table) -> std::io::Result<[PathBuf; 2]> {
    let table_path = dir.join(TABLE_FILE);
    let script_path = dir.join(SCRIPT_FILE);
    // The table first: a new script never reads an old table of another version.
    crate::fsutil::write_atomic_all(&[
        (&table_path, table.to_tsv().as_bytes()),
        (&script_path, SCRIPT.as_bytes()),
    ])?;
    Ok([script_path, table_path])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn demand(name: &str, cpus: f64, gib: f64) -> PerGpuDemand {
        PerGpuDemand {
            name: name.into(),
            cpus_per_gpu: cpus,
            memory_gib_per_gpu: gib,
            below_share: false,
            source: PathBuf::from(format!("/p/{name}.json")),
            source_mtime_s: 100,
        }
    }

    /// The paper's server: 8 GPUs, 24 cores, 500 GB (here 500000 MB), so a GPU's share is 3 cores and
    /// 62500 MB.
    fn big() -> Partition {
        Partition {
            name: "big".into(),
            default: true,
            shapes: vec![NodeShape {
                nodes: 2,
                gpus: 8,
                cpus: 24,
                memory_mb: 500_000,
            }],
        }
    }

    #[test]
    fn demand_above_the_share_is_given() {
        // res18 of the zoo: 9 cores and 58.2 GiB per GPU.
        let s = size(&demand("res18", 9.0, 58.207_660_913_467_41), &big(), 1).unwrap();
        assert_eq!((s.cpus, s.cpus_by), (9, Bound::Demand));
        // 58.2 GiB = 59 605 MB is below the 62 500 MB share: raised to it.
        assert_eq!((s.memory_mb, s.memory_by), (62_500, Bound::Share));
        let two = size(&demand("res18", 9.0, 58.207_660_913_467_41), &big(), 2).unwrap();
        assert_eq!((two.cpus, two.memory_mb), (18, 125_000));
    }

    #[test]
    fn demand_below_the_share_is_raised_unless_allowed() {
        let d = demand("image", 1.25, 0.2626);
        let s = size(&d, &big(), 1).unwrap();
        assert_eq!((s.cpus, s.cpus_by), (3, Bound::Share));
        assert_eq!((s.memory_mb, s.memory_by), (62_500, Bound::Share));
        let allowed = PerGpuDemand {
            below_share: true,
            ..d
        };
        let s = size(&allowed, &big(), 1).unwrap();
        // 1.25 cores round up to 2; 0.2626 GiB = 268.9 MB rounds up to 269.
        assert_eq!((s.cpus, s.cpus_by), (2, Bound::Demand));
        assert_eq!((s.memory_mb, s.memory_by), (269, Bound::Demand));
        let four = size(&allowed, &big(), 4).unwrap();
        assert_eq!((four.cpus, four.memory_mb), (5, 1076));
    }

    #[test]
    fn never_above_a_node() {
        let d = demand("res18", 9.0, 58.207_660_913_467_41);
        let s = size(&d, &big(), 8).unwrap();
        // 72 cores asked of a 24-core node; 476 838 MB of demand is below the share, the whole node.
        assert_eq!((s.cpus, s.cpus_by), (24, Bound::Node));
        assert_eq!((s.memory_mb, s.memory_by), (500_000, Bound::Share));
        assert!(size(&d, &big(), 9).is_none());
        assert!(size(&d, &big(), 0).is_none());
        let small = Partition {
            name: "small".into(),
            default: false,
            shapes: vec![NodeShape {
                nodes: 1,
                gpus: 2,
                cpus: 2,
                memory_mb: 21_695,
            }],
        };
        let s = size(&d, &small, 1).unwrap();
        assert_eq!((s.cpus, s.cpus_by), (2, Bound::Node));
        assert_eq!((s.memory_mb, s.memory_by), (21_695, Bound::Node));
    }

    #[test]
    fn mixed_shapes_use_the_poorest_node_that_holds_the_gpus() {
        let p = Partition {
            name: "mixed".into(),
            default: false,
            shapes: vec![
                NodeShape {
                    nodes: 1,
                    gpus: 4,
                    cpus: 8,
                    memory_mb: 100_000,
                },
                NodeShape {
                    nodes: 3,
                    gpus: 2,
                    cpus: 16,
                    memory_mb: 200_000,
                },
            ],
        };
        let d = demand("lm", 1.0, 1.0);
        // One GPU: the 4-GPU node's share (2 cores, 25000 MB) is the smaller.
        let s = size(&d, &p, 1).unwrap();
        assert_eq!((s.cpus, s.memory_mb), (2, 25_000));
        // Three GPUs: only the 4-GPU node holds them.
        let s = size(&d, &p, 3).unwrap();
        assert_eq!((s.cpus, s.memory_mb), (6, 75_000));
    }

    #[test]
    fn the_table_has_a_row_per_profile_partition_and_gpu_count() {
        let t = build(
            &[demand("a", 1.0, 1.0), demand("b", 4.0, 8.0)],
            &[
                big(),
                Partition {
                    name: "cpu".into(),
                    default: false,
                    shapes: vec![],
                },
            ],
            &[("train-a-".into(), "a".into())],
            1000,
        )
        .unwrap();
        assert_eq!(t.sizes.len(), 16);
        assert_eq!(t.default_partition.as_deref(), Some("big"));
        assert_eq!(
            t.partitions.len(),
            1,
            "a partition without GPUs is left out"
        );
        let e = build(
            &[demand("a", 1.0, 1.0)],
            &[big()],
            &[("x".into(), "zz".into())],
            1,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("--job-name") && e.contains("zz"), "{e}");
    }
}
