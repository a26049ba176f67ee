//! What `synergy recommend` prints, in each vocabulary: for people, `#SBATCH` lines, torchrun and
//! DataLoader settings, a Kubernetes resources block; and the closing lines of `synergy profile`.

use crate::recommend::Recommendation;
use crate::units::Cores;
use std::fmt::Write as _;

/// `mb` Slurm MB as GiB for people.
fn gib(mb: u64) -> String {
    format!("{:.2} GiB", mb as f64 / 1024.0)
}

/// `n` cores in words: `1 core`, `2 cores`, `0.5 cores`.
fn cores(n: f64) -> String {
    format!("{} core{}", Cores(n), if n == 1.0 { "" } else { "s" })
}

/// The ask per GPU and in all, with its throughput, on two lines (each starting with `label`).
fn ask_lines(r: &Recommendation, label: &str) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{label}per GPU {}, {}; job ({} GPU(s){}) {}, {}; {} loader worker(s) and {} intra-op thread(s) per rank",
        cores(r.per_gpu.cpus as f64),
        gib(r.per_gpu.memory_mb),
        r.gpus,
        if r.nodes > 1 {
            format!(" on {} nodes", r.nodes)
        } else {
            String::new()
        },
        cores(r.job.cpus as f64),
        gib(r.job.memory_mb),
        r.loader_workers_per_rank,
        r.intra_op_threads
    );
    let _ = writeln!(
        o,
        "{:width$}{:.2}x the GPU-proportional share ({}, {:.2} GiB per GPU), {:.0}% of the best{}",
        "",
        r.vs_share,
        cores((r.share_per_gpu.cpus * 100.0).round() / 100.0),
        r.share_per_gpu.memory_gib,
        100.0 * r.vs_best,
        r.samples_per_s
            .map(|t| format!("; {t:.1} samples/s as profiled"))
            .unwrap_or_default(),
        width = label.len()
    );
    o
}

/// The recommendation for people.
pub(in crate::cli) fn render_recommendation(r: &Recommendation) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} ({}) on a server of {} GPU(s), {} cores, {:.1} GiB",
        r.workload,
        r.profile,
        r.server.gpus,
        Cores(r.server.cpus),
        r.server.memory_gib
    );
    let _ = writeln!(
        o,
        "  demand     {:.3} cores, {:.3} GiB per GPU: the fewest within {:.0}% of the best",
        r.demand_per_gpu.cpus,
        r.demand_per_gpu.memory_gib,
        100.0 * r.tolerance
    );
    o.push_str(&ask_lines(r, "  ask        "));
    for s in &r.steps {
        let _ = writeln!(
            o,
            "  {:<10} {} ({}, {:.3} GiB per GPU): {}",
            if s.per_gpu.cpus < r.per_gpu.cpus as f64
                || s.per_gpu.memory_gib < r.per_gpu.memory_mb as f64 / 1024.0
            {
                "less"
            } else {
                "more"
            },
            s.change,
            cores(s.per_gpu.cpus),
            s.per_gpu.memory_gib,
            match s.relative {
                None => "below the footprint: the job does not run".to_string(),
                Some(x) if x < 1.0 - 5e-4 => format!("{:.1}% slower", 100.0 * (1.0 - x)),
                Some(x) if x > 1.0 + 5e-4 => format!("{:.1}% faster", 100.0 * (x - 1.0)),
                Some(_) => "no faster: wasted".to_string(),
            }
        );
    }
    for why in &r.rests_on {
        let _ = writeln!(o, "  rests on   {why}");
    }
    o
}

/// The closing lines of `synergy profile`: the ask on the profile's own server.
pub(in crate::cli) fn recommendation_summary(r: &Recommendation) -> String {
    format!(
        "{}               for your servers: synergy recommend {} --server SHAPE --format sbatch|torchrun|k8s\n",
        ask_lines(r, "  recommend    "),
        r.profile
    )
}

/// The head of a batch script: its interpreter line and the `#SBATCH` lines (`--gpus`,
/// `--cpus-per-gpu`, `--mem-per-gpu`); the job's own commands follow.
pub(in crate::cli) fn recommendation_sbatch(r: &Recommendation) -> String {
    let mut o = format!(
        "#!/bin/bash\n# synergy recommend: {} ({}), {:.2}x the GPU-proportional share\n",
        r.workload, r.profile, r.vs_share
    );
    if r.nodes > 1 {
        let _ = writeln!(o, "#SBATCH --nodes={}", r.nodes);
    }
    let _ = writeln!(o, "#SBATCH --gpus={}", r.gpus);
    let _ = writeln!(o, "#SBATCH --cpus-per-gpu={}", r.per_gpu.cpus);
    let _ = writeln!(o, "#SBATCH --mem-per-gpu={}M", r.per_gpu.memory_mb);
    o
}

/// torchrun's command line with the per-rank settings a script reads.
pub(in crate::cli) fn recommendation_torchrun(r: &Recommendation) -> String {
    format!(
        "# synergy recommend: {} ({}), {} and {} per rank\n\
         # in the script: DataLoader(..., num_workers={}) and torch.set_num_threads({})\n\
         export OMP_NUM_THREADS={}\n\
         torchrun --nnodes={} --nproc_per_node={} train.py\n",
        r.workload,
        r.profile,
        cores(r.per_gpu.cpus as f64),
        gib(r.per_gpu.memory_mb),
        r.loader_workers_per_rank,
        r.intra_op_threads,
        r.intra_op_threads,
        r.nodes,
        r.gpus_per_node
    )
}

/// A Kubernetes container's `resources` block for one pod per node (requests equal limits: the
/// Guaranteed class, whose cores the static CPU manager can pin).
pub(in crate::cli) fn recommendation_k8s(r: &Recommendation) -> String {
    let cpus = r.per_gpu.cpus * r.gpus_per_node;
    let mem = r.per_gpu.memory_mb * r.gpus_per_node as u64;
    let mut o = format!(
        "# synergy recommend: {} ({}), one pod per node of {} GPU(s)\nresources:\n",
        r.workload, r.profile, r.gpus_per_node
    );
    for part in ["requests", "limits"] {
        let _ = writeln!(
            o,
            "  {part}:\n    cpu: \"{cpus}\"\n    memory: \"{mem}Mi\"\n    nvidia.com/gpu: \"{}\"",
            r.gpus_per_node
        );
    }
    o
}
