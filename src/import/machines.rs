//! The cluster a trace ran on, where the trace describes it (docs/traces.md): Philly's
//! `cluster_machine_list`, PAI's `pai_machine_spec`, or Slurm's `sinfo` with a stated output format.
//! Machines of one shape become one `[[servers]]` group of a cluster file (`sched::cluster`).

use crate::error::InputError;
use crate::gres::gpus_in_gres;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

/// Where a machine list comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum MachineFormat {
    /// Philly `cluster_machine_list` (`machineId,number of GPUs,single GPU mem`): GPUs only, so cores and
    /// memory come from the per-GPU defaults.
    Philly,
    /// PAI `pai_machine_spec` (`machine,gpu_type,cap_cpu,cap_mem,cap_gpu`; cores, GB, GPUs; no header).
    Pai,
    /// `sinfo -N -h -o "%N %c %m %G"`: node, cores, memory in MiB, GRES (`gpu:4`, `gpu:a100:4(S:0-1)`).
    Sinfo,
}

/// Cores and memory per GPU for machine lists that give only GPUs.
#[derive(Debug, Clone, Copy)]
pub struct PerGpu {
    /// Cores per GPU.
    pub cpus: f64,
    /// Memory per GPU, decimal GB.
    pub memory_gb: f64,
}

/// One shape of machine and how many the list has.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MachineGroup {
    /// Machines of this shape.
    pub count: u32,
    /// GPUs each.
    pub gpus: u32,
    /// Cores each.
    pub cpus: f64,
    /// Memory each, decimal GB.
    pub memory_gb: f64,
}

/// Reads a machine list into groups of identical machines (largest first); machines without a GPU are
/// left out, since no job of a GPU trace runs on them. Errors name the file, line and field.
pub fn read_machines(
    format: MachineFormat,
    path: &Path,
    per_gpu: PerGpu,
) -> Result<Vec<MachineGroup>, InputError> {
    let origin = path.display().to_string();
    let text = match crate::input::read_text(path, crate::input::MACHINES) {
        Ok(t) => t,
        Err(crate::input::ReadError::Input(e)) => return Err(e),
        Err(crate::input::ReadError::Io(e)) => return Err(InputError::new(&origin, e.to_string())),
    };
    let groups = parse_machines(format, &origin, &text, per_gpu)?;
    if groups.is_empty() {
        return Err(InputError::new(origin, "lists no machine with a GPU"));
    }
    Ok(groups)
}

/// [`read_machines`] over text already read, `origin` naming it in errors (lines numbered from 1, blank
/// lines counted and skipped); no groups when no machine has a GPU.
pub fn parse_machines(
    format: MachineFormat,
    origin: &str,
    text: &str,
    per_gpu: PerGpu,
) -> Result<Vec<MachineGroup>, InputError> {
    let mut shapes: BTreeMap<(u32, u64, u64), u32> = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let at = format!("{origin}, line {}", i + 1);
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let num = |v: &str, field: &str| -> Result<f64, InputError> {
            v.trim()
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| {
                    InputError::field(
                        &at,
                        field,
                        format!("`{}` is not a number of at least 0", v.trim()),
                    )
                })
        };
        let (gpus, cpus, memory_gb) = match format {
            MachineFormat::Philly => {
                let f: Vec<&str> = line.split(',').collect();
                if i == 0 && f.first().is_some_and(|h| h.trim() == "machineId") {
                    continue;
                }
                let g = num(f.get(1).copied().unwrap_or(""), "number of GPUs")?;
                (g, g * per_gpu.cpus, g * per_gpu.memory_gb)
            }
            MachineFormat::Pai => {
                let f: Vec<&str> = line.split(',').collect();
                if i == 0 && f.first().is_some_and(|h| h.trim() == "machine") {
                    continue;
                }
                if f.len() < 5 {
                    return Err(InputError::new(at, format!("has {} fields; a PAI machine spec line has 5 (machine,gpu_type,cap_cpu,cap_mem,cap_gpu)", f.len())));
                }
                (
                    num(f[4], "cap_gpu")?,
                    num(f[2], "cap_cpu")?,
                    num(f[3], "cap_mem")?,
                )
            }
            MachineFormat::Sinfo => {
                let f: Vec<&str> = line.split_whitespace().collect();
                if f.len() < 4 {
                    return Err(InputError::new(
                        at,
                        "has fewer than 4 fields; write it with sinfo -N -h -o \"%N %c %m %G\"",
                    ));
                }
                let mib = num(f[2], "memory")?;
                (
                    f64::from(gpus_in_gres(f[3]).map_err(|e| {
                        InputError::field(&at, "gres", format!("{e}: not a GRES list"))
                    })?),
                    num(f[1], "cpus")?,
                    mib * 1_048_576.0 / 1e9,
                )
            }
        };
        if gpus.fract() != 0.0 {
            return Err(InputError::field(
                &at,
                "gpus",
                format!("`{gpus}` is not a whole number of GPUs"),
            ));
        }
        if gpus > crate::range::MAX_GPUS_PER_SERVER as f64 {
            return Err(InputError::field(
                &at,
                "gpus",
                format!(
                    "{gpus} GPUs on one machine is more than any server has (at most {})",
                    crate::range::MAX_GPUS_PER_SERVER
                ),
            ));
        }
        if gpus == 0.0 {
            continue;
        }
        // A machine with GPUs runs jobs only with cores and memory beside them.
        let (cpus_field, memory_field) = match format {
            MachineFormat::Philly => ("number of GPUs", "number of GPUs"),
            MachineFormat::Pai => ("cap_cpu", "cap_mem"),
            MachineFormat::Sinfo => ("cpus", "memory"),
        };
        for (field, v) in [(cpus_field, cpus), (memory_field, memory_gb)] {
            // Groups keep thousandths: less than that would be a machine of none.
            if (v * 1000.0).round() < 1.0 {
                return Err(InputError::field(
                    &at,
                    field,
                    "must be at least 0.001 (cores, or decimal GB) on a machine with GPUs",
                ));
            }
        }
        // Shapes are grouped at milli-core and megabyte precision.
        let key = (
            gpus as u32,
            (cpus * 1000.0).round() as u64,
            (memory_gb * 1000.0).round() as u64,
        );
        *shapes.entry(key).or_default() += 1;
    }
    let mut groups: Vec<MachineGroup> = shapes
        .into_iter()
        .map(|((gpus, mc, mmb), count)| MachineGroup {
            count,
            gpus,
            cpus: mc as f64 / 1000.0,
            memory_gb: mmb as f64 / 1000.0,
        })
        .collect();
    groups.sort_by_key(|g| std::cmp::Reverse((g.gpus, g.count)));
    Ok(groups)
}

/// The groups as a cluster file (`[[servers]]` with count, gpus, cpus, memory_gb).
pub fn to_cluster_toml(groups: &[MachineGroup]) -> String {
    #[derive(Serialize)]
    struct File<'a> {
        servers: &'a [MachineGroup],
    }
    toml::to_string(&File { servers: groups }).expect("plain numbers serialize")
}
