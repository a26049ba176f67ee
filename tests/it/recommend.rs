//! `synergy recommend` on the local Slurm cluster (`scripts/slurm-setup.sh`): the `#SBATCH` lines it
//! prints for the node's own shape are accepted by `sbatch --test-only`, and a job submitted with them
//! runs with exactly the cores, memory and GPUs the recommendation names, as `scontrol show job` says.
//! Needs root and the daemons; the test fails and says so otherwise.

use crate::common::{self, job_field as field, job_running, serial};
use std::process::Command;

/// The local node's shape as `--server` takes it, from `sinfo` (memory in whole GiB, rounded down so
/// that an ask within it fits the node).
fn node_shape() -> String {
    let out = Command::new("sinfo")
        .args(["-N", "-h", "-o", "%c %m %G"])
        .output()
        .expect("sinfo: run scripts/slurm-setup.sh");
    let line = String::from_utf8_lossy(&out.stdout).into_owned();
    let f: Vec<&str> = line.split_whitespace().collect();
    assert!(
        f.len() == 3,
        "no node from sinfo (run scripts/slurm-setup.sh): {line:?}"
    );
    let gpus = f[2].rsplit(':').next().unwrap();
    let gib = f[1].parse::<u64>().unwrap() / 1024;
    format!("{gpus}gpu,{}cpu,{gib}gb", f[0])
}

/// Cancels the jobs it holds when dropped, a failing test's too.
struct Jobs(Vec<String>);

impl Drop for Jobs {
    fn drop(&mut self) {
        if !self.0.is_empty() {
            let _ = Command::new("scancel").args(&self.0).output();
        }
    }
}

#[test]
fn the_sbatch_lines_give_a_job_exactly_the_recommended_resources() {
    let _host = serial();
    let shape = node_shape();
    let root = env!("CARGO_MANIFEST_DIR");
    let dir = tempfile::tempdir().unwrap();
    let mut jobs = Jobs(Vec::new());
    // One GPU of a single-process job, and the two ranks of a distributed one (the node's two GPUs).
    for profile in [
        "profiles/image.json",
        "profiles/pytorch-ddp-resnet18-small.json",
    ] {
        let path = format!("{root}/{profile}");
        let rec = common::run_json(&["recommend", &path, "--server", &shape, "--json"]);
        let out = common::synergy()
            .args(["recommend", &path, "--server", &shape, "--format", "sbatch"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let head = String::from_utf8(out.stdout).unwrap();
        let (gpus, cpus_per_gpu, mb_per_gpu) = (
            rec["gpus"].as_u64().unwrap(),
            rec["per_gpu"]["cpus"].as_u64().unwrap(),
            rec["per_gpu"]["memory_mb"].as_u64().unwrap(),
        );
        for line in [
            format!("#SBATCH --gpus={gpus}"),
            format!("#SBATCH --cpus-per-gpu={cpus_per_gpu}"),
            format!("#SBATCH --mem-per-gpu={mb_per_gpu}M"),
        ] {
            assert!(head.lines().any(|l| l == line), "{line} not in\n{head}");
        }
        let script = dir.path().join("job.sh");
        std::fs::write(
            &script,
            format!("{head}#SBATCH --output=/dev/null\n#SBATCH --chdir=/\nsleep 30\n"),
        )
        .unwrap();
        let sbatch = |flag: &str| {
            Command::new("sbatch")
                .arg(flag)
                .arg(&script)
                .output()
                .unwrap()
        };
        let test_only = sbatch("--test-only");
        assert!(
            test_only.status.success(),
            "sbatch --test-only refused\n{head}: {}",
            String::from_utf8_lossy(&test_only.stderr)
        );
        let submitted = sbatch("--parsable");
        assert!(submitted.status.success(), "{submitted:?}");
        let id = String::from_utf8_lossy(&submitted.stdout)
            .trim()
            .to_string();
        jobs.0.push(id.clone());
        // What the job was given, once it runs: its cores, memory and GPUs as the recommendation says.
        let show = job_running(&id);
        // Per GPU as asked, and in all as allocated (Slurm shows memory in M, or G when whole enough).
        for (key, want) in [
            ("TresPerJob", format!("gres:gpu:{gpus}")),
            ("CpusPerTres", format!("gres:gpu:{cpus_per_gpu}")),
            ("MemPerTres", format!("gres:gpu:{mb_per_gpu}")),
            ("NumCPUs", (cpus_per_gpu * gpus).to_string()),
        ] {
            assert_eq!(field(&show, key), want, "{profile}: {show}");
        }
        let tres: Vec<&str> = field(&show, "TRES").split(',').collect();
        assert!(
            tres.contains(&format!("cpu={}", cpus_per_gpu * gpus).as_str()),
            "{show}"
        );
        assert!(
            tres.contains(&format!("gres/gpu={gpus}").as_str()),
            "{show}"
        );
        let mem = tres.iter().find_map(|t| t.strip_prefix("mem=")).unwrap();
        let mem_mb = match mem.strip_suffix('G') {
            Some(g) => (g.parse::<f64>().unwrap() * 1024.0).round() as u64,
            None => mem.strip_suffix('M').unwrap().parse().unwrap(),
        };
        assert_eq!(mem_mb, mb_per_gpu * gpus, "{profile}: {show}");
        assert_eq!(rec["job"]["cpus"].as_u64().unwrap(), cpus_per_gpu * gpus);
        assert_eq!(rec["job"]["memory_mb"].as_u64().unwrap(), mb_per_gpu * gpus);
        // The next job needs the node's cores.
        let _ = Command::new("scancel").arg(&id).output();
    }
}
