//! What a job should ask for, in the user's own terms (docs/recommend.md): from a profile's best-case
//! demand and a server shape, whole cores and memory per GPU and for the job, the loader workers and
//! compute threads each rank runs, the throughput of that ask against the GPU-proportional share and
//! the best, and what asking for a step less or more would cost or waste, read from the matrix.
//!
//! The rounding to whole cores and Slurm's MB, and the footprint floor, are the Slurm advisor's
//! ([`crate::advisor`]): a job told here what to ask gets what the advisor would give it below its share.

use crate::error::InputError;
use crate::format::advisor_table::{NodeShape, Partition};
use crate::format::profile::{Profile, ServerShape};
use crate::sched::catalog::JobModel;
use crate::units::Cores;
use serde::Serialize;
use std::path::Path;

/// What to ask for, per GPU or for a whole job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Ask {
    /// Whole cores.
    pub cpus: u32,
    /// Memory in Slurm's MB (MiB).
    pub memory_mb: u64,
}

/// An allocation per GPU, as the profile states it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PerGpu {
    /// Cores per GPU.
    pub cpus: f64,
    /// Memory per GPU, GiB.
    pub memory_gib: f64,
}

/// A step away from the recommendation and what it does to throughput.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    /// What changes, in words (`one core fewer per GPU`).
    pub change: String,
    /// The allocation per GPU it leads to.
    pub per_gpu: PerGpu,
    /// Throughput there relative to the recommendation's (0.9 is 10% slower); `None` below the footprint,
    /// where the job does not run.
    pub relative: Option<f64>,
}

/// The recommendation for one profile on one server shape.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recommendation {
    /// The profile's `workload.name`.
    pub workload: String,
    /// The profile file.
    pub profile: String,
    /// The server shape it is for.
    pub server: ServerShape,
    /// Whether the server is the profile's own reference shape (no `--server` given).
    pub server_is_profiles: bool,
    /// GPUs of the job.
    pub gpus: u32,
    /// Nodes the job spans: its GPUs over the server's.
    pub nodes: u32,
    /// GPUs on each node (the last may hold fewer when they do not divide).
    pub gpus_per_node: u32,
    /// The profile's best-case demand per GPU (the footprint at least), before rounding.
    pub demand_per_gpu: PerGpu,
    /// The server's GPU-proportional share per GPU.
    pub share_per_gpu: PerGpu,
    /// What to ask for per GPU.
    pub per_gpu: Ask,
    /// What to ask for in all.
    pub job: Ask,
    /// DataLoader `num_workers` per rank (one rank per GPU): one per core of the rank, at least one.
    pub loader_workers_per_rank: usize,
    /// torch's intra-op threads (`OMP_NUM_THREADS`, `torch.set_num_threads`) per rank: one per whole core.
    pub intra_op_threads: usize,
    /// Throughput at the ask relative to the server's GPU-proportional share.
    pub vs_share: f64,
    /// Throughput at the ask relative to the best the matrix holds.
    pub vs_best: f64,
    /// Samples per second of the profiled job at the ask (profiles with absolute numbers).
    pub samples_per_s: Option<f64>,
    /// The profile's tolerance: the demand is the smallest allocation within it of the best.
    pub tolerance: f64,
    /// Asking a step less or more of each resource.
    pub steps: Vec<Step>,
    /// What the recommendation rests on where the profile cannot say everything.
    pub rests_on: Vec<String>,
}

/// The recommendation for the profile `p` (read from `origin`) on `server` (the profile's own shape
/// when `None`) for a job of `gpus` GPUs (the profiled job's when `None`).
pub fn recommend(
    p: &Profile,
    origin: &Path,
    server: Option<ServerShape>,
    gpus: Option<u32>,
) -> Result<Recommendation, InputError> {
    let o = origin.display().to_string();
    let model = JobModel::from_profile(p, origin)?;
    let mut demand = crate::advisor::demand_of_model(&model);
    // The recommendation is the demand itself, below the share too: the share is what it is compared to.
    demand.below_share = true;
    let server_is_profiles = server.is_none();
    let server = server.unwrap_or(p.server);
    let profiled_gpus = p.workload.gpus.max(1);
    let gpus = gpus.unwrap_or(profiled_gpus);
    if gpus == 0 {
        return Err(InputError::new("--gpus", "must be at least 1"));
    }
    let gpus_per_node = gpus.min(server.gpus);
    let nodes = gpus.div_ceil(server.gpus);
    let node = NodeShape {
        nodes,
        gpus: server.gpus,
        cpus: server.cpus.floor() as u32,
        memory_mb: (server.memory_gib * 1024.0).floor() as u64,
    };
    let partition = Partition {
        name: "server".into(),
        default: true,
        shapes: vec![node],
    };
    // One GPU's ask, rounded as the advisor rounds; the node must then hold a node's worth of them.
    let one = crate::advisor::size(&demand, &partition, 1)
        .ok_or_else(|| InputError::field(o.clone(), "server.gpus", "must be at least 1"))?;
    let per_gpu = Ask {
        cpus: one.cpus,
        memory_mb: one.memory_mb,
    };
    let need_cpus = per_gpu.cpus as u64 * gpus_per_node as u64;
    let need_mb = per_gpu.memory_mb * gpus_per_node as u64;
    let short = [
        (need_cpus > node.cpus as u64).then(|| {
            format!(
                "{need_cpus} cores ({} per GPU) where it has {}",
                per_gpu.cpus, node.cpus
            )
        }),
        (need_mb > node.memory_mb).then(|| {
            format!(
                "{need_mb} MB ({} per GPU) where it has {}",
                per_gpu.memory_mb, node.memory_mb
            )
        }),
    ];
    let short: Vec<String> = short.into_iter().flatten().collect();
    if !short.is_empty() {
        return Err(InputError::new(
            "--server",
            format!(
                "a server of {} GPUs, {} cores and {:.0} GiB cannot hold {gpus_per_node} GPU(s) of `{}` ({o}): \
                 they need {}; give a larger server, or fewer --gpus per node",
                server.gpus,
                crate::units::Cores(server.cpus),
                server.memory_gib,
                p.workload.name,
                short.join(" and ")
            ),
        ));
    }
    let job = Ask {
        cpus: per_gpu.cpus * gpus,
        memory_mb: per_gpu.memory_mb * gpus as u64,
    };
    // Throughput is the profiled job's, at its own GPU count: per GPU times those GPUs.
    let speed = |c: f64, m_gib: f64| {
        crate::predict::predict(p, c * profiled_gpus as f64, m_gib * profiled_gpus as f64)
    };
    let ask = PerGpu {
        cpus: per_gpu.cpus as f64,
        memory_gib: per_gpu.memory_mb as f64 / 1024.0,
    };
    let at_ask = speed(ask.cpus, ask.memory_gib);
    let share_per_gpu = PerGpu {
        cpus: server.cpus_per_gpu(),
        memory_gib: server.memory_gib_per_gpu(),
    };
    let at_share = speed(share_per_gpu.cpus, share_per_gpu.memory_gib);
    let best = p
        .matrix
        .normalized
        .iter()
        .flatten()
        .cloned()
        .fold(0.0, f64::max);
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    let footprint_gib = model.footprint_gib_per_gpu;
    let step = |change: String, cpus: f64, memory_gib: f64| Step {
        change,
        per_gpu: PerGpu { cpus, memory_gib },
        relative: (footprint_gib.is_none_or(|f| memory_gib + 1e-9 >= f))
            .then(|| ratio(speed(cpus, memory_gib).normalized, at_ask.normalized)),
    };
    let mut steps = Vec::new();
    if per_gpu.cpus > 1 {
        steps.push(step(
            "one core fewer per GPU".into(),
            ask.cpus - 1.0,
            ask.memory_gib,
        ));
    }
    steps.push(step(
        "one core more per GPU".into(),
        ask.cpus + 1.0,
        ask.memory_gib,
    ));
    // Columns around the demand's own: the ask is that column rounded up to a whole MB.
    let columns = &p.per_gpu.memory_gib;
    let at = demand.memory_gib_per_gpu;
    if let Some(&less) = columns.iter().rev().find(|&&m| m < at - 1e-6) {
        steps.push(step(
            "the matrix's next memory column down".into(),
            ask.cpus,
            less,
        ));
    }
    if let Some(&more) = columns.iter().find(|&&m| m > at + 1e-6) {
        steps.push(step(
            "the matrix's next memory column up".into(),
            ask.cpus,
            more,
        ));
    }
    let rests_on = rests_on(p, &server, server_is_profiles, gpus, &share_per_gpu);
    Ok(Recommendation {
        workload: p.workload.name.clone(),
        profile: o,
        server,
        server_is_profiles,
        gpus,
        nodes,
        gpus_per_node,
        demand_per_gpu: PerGpu {
            cpus: demand.cpus_per_gpu,
            memory_gib: demand.memory_gib_per_gpu,
        },
        share_per_gpu,
        per_gpu,
        job,
        loader_workers_per_rank: Cores(ask.cpus).threads(),
        intra_op_threads: Cores(ask.cpus).whole(),
        vs_share: ratio(at_ask.normalized, at_share.normalized),
        vs_best: ratio(at_ask.normalized, best),
        samples_per_s: at_ask.samples_per_s,
        tolerance: p.demand.tolerance,
        steps,
        rests_on,
    })
}

/// What the recommendation rests on where the profile does not measure it all.
fn rests_on(
    p: &Profile,
    server: &ServerShape,
    server_is_profiles: bool,
    gpus: u32,
    share: &PerGpu,
) -> Vec<String> {
    let mut said = Vec::new();
    if server_is_profiles {
        said.push(format!(
            "the server is the profile's own reference shape ({} GPU(s), {} cores, {:.1} GiB); name yours with --server",
            server.gpus,
            Cores(server.cpus),
            server.memory_gib
        ));
    }
    if let Some(why) = &p.workload.no_memory_axis {
        said.push(format!(
            "memory: the footprint alone, since the memory axis does not apply ({why})"
        ));
    }
    match &p.model {
        None => said.push(format!(
            "the published matrix alone (no trials): throughput between its cells is interpolated, and \
             outside them it is the nearest edge's; source: {}",
            p.source
        )),
        Some(m) => {
            if let Some(a) = m.accelerator.as_ref().filter(|a| !a.separated) {
                said.push(format!(
                    "the accelerator's rate G was not told apart from the pipeline ({}): G is at least \
                     {:.1} samples/s, so more cores may still help past the demand",
                    a.because, m.stall.accelerator_samples_per_s
                ));
            }
        }
    }
    let profiled = p.workload.gpus.max(1);
    if gpus != profiled {
        said.push(format!(
            "the demand per GPU was profiled with {profiled} GPU(s) and is taken to hold for {gpus}"
        ));
    }
    let (max_c, max_m) = (
        p.per_gpu.cpus.last().copied().unwrap_or(0.0),
        p.per_gpu.memory_gib.last().copied().unwrap_or(0.0),
    );
    if share.cpus > max_c + 1e-9 || share.memory_gib > max_m + 1e-9 {
        said.push(format!(
            "the server's share per GPU ({} core(s), {:.2} GiB) lies beyond the matrix ({} core(s), {:.2} GiB per \
             GPU at most): the share's throughput is the matrix's edge",
            Cores((share.cpus * 100.0).round() / 100.0),
            share.memory_gib,
            Cores(max_c),
            max_m
        ));
    }
    said
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shipped(name: &str) -> (Profile, std::path::PathBuf) {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(name);
        (Profile::read(&path).unwrap(), path)
    }

    fn dgx() -> ServerShape {
        "8gpu,96cpu,1tb".parse().unwrap()
    }

    #[test]
    fn the_ask_is_the_demand_rounded_up_per_gpu_and_times_the_gpus() {
        let (p, path) = shipped("profiles/image.json");
        let r = recommend(&p, &path, Some(dgx()), Some(4)).unwrap();
        // 1.25 cores and 0.3879 GiB per GPU: 2 whole cores, 398 MB.
        assert_eq!(
            r.per_gpu,
            Ask {
                cpus: 2,
                memory_mb: 398
            }
        );
        assert_eq!(
            r.job,
            Ask {
                cpus: 8,
                memory_mb: 1592
            }
        );
        assert_eq!((r.loader_workers_per_rank, r.intra_op_threads), (2, 2));
        assert_eq!((r.nodes, r.gpus_per_node), (1, 4));
        assert!(r
            .rests_on
            .iter()
            .any(|w| w.contains("profiled with 1 GPU(s)")));
    }

    #[test]
    fn one_core_fewer_costs_what_the_matrix_says_and_one_more_buys_nothing() {
        let (p, path) = shipped("profiles/zoo/res18.json");
        let r = recommend(&p, &path, Some(dgx()), Some(8)).unwrap();
        assert_eq!(r.per_gpu.cpus, 9);
        let fewer = &r.steps[0];
        assert_eq!(fewer.per_gpu.cpus, 8.0);
        let expected = crate::predict::predict(&p, 8.0, fewer.per_gpu.memory_gib).normalized
            / crate::predict::predict(&p, 9.0, fewer.per_gpu.memory_gib).normalized;
        assert!((fewer.relative.unwrap() - expected).abs() < 1e-12);
        assert!(fewer.relative.unwrap() < 0.95);
        assert_eq!(r.steps[1].relative, Some(1.0));
    }

    #[test]
    fn a_server_that_cannot_hold_the_job_is_refused_by_flag() {
        let (p, path) = shipped("profiles/zoo/res18.json");
        let small: ServerShape = "8gpu,24cpu,500gb".parse().unwrap();
        let e = recommend(&p, &path, Some(small), Some(8)).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("--server") && msg.contains("72 cores"),
            "{msg}"
        );
        // Two GPUs of it fit on that server's 24 cores.
        assert!(recommend(&p, &path, Some(small), Some(2)).is_ok());
    }

    #[test]
    fn more_gpus_than_a_server_span_nodes() {
        let (p, path) = shipped("profiles/zoo/gnmt.json");
        let shape: ServerShape = "4gpu,32cpu,256gb".parse().unwrap();
        let r = recommend(&p, &path, Some(shape), Some(12)).unwrap();
        assert_eq!((r.nodes, r.gpus_per_node), (3, 4));
        assert_eq!(r.job.cpus, r.per_gpu.cpus * 12);
    }

    #[test]
    fn what_the_profile_cannot_say_is_said() {
        let (mut p, path) = shipped("profiles/image.json");
        p.workload.no_memory_axis = Some("its data are not files".into());
        let r = recommend(&p, &path, None, None).unwrap();
        assert!(
            r.rests_on[0].contains("own reference shape"),
            "{:?}",
            r.rests_on
        );
        assert!(r
            .rests_on
            .iter()
            .any(|w| w.contains("the footprint alone") && w.contains("its data are not files")));
        let (p, path) = shipped("tests/data/formats/profile/1.12.json");
        let r = recommend(&p, &path, Some(dgx()), None).unwrap();
        assert!(
            r.rests_on
                .iter()
                .any(|w| w.contains("G was not told apart")),
            "{:?}",
            r.rests_on
        );
    }
}
