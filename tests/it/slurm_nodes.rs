//! The multi-node test cluster (`scripts/slurm-setup.sh --nodes 2`, docs/slurm.md "Several nodes on one
//! host"): every node is its own slurmd in its own network namespace, with its own block of this host's cores.
//! A job placed on one node, and a job spread over two, get exactly their node's cores and the memory asked
//! for, as `scontrol show job -d` says and as the nodes' cgroups enforce. Without that cluster these tests
//! fail and say how to start it.

use crate::common::serial;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const CONF: &str = "/etc/slurm-nodes/slurm.conf";

/// A Slurm client command against the multi-node cluster.
fn slurm(cmd: &str, args: &[&str]) -> Output {
    Command::new(cmd)
        .args(args)
        .env("SLURM_CONF", CONF)
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"))
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Each node's name and the cores its jobs may use (the host's cores less its `CPUSpecList`), or a failure
/// that says how to start the cluster.
fn nodes() -> BTreeMap<String, Vec<u32>> {
    let ping = slurm("scontrol", &["ping"]);
    assert!(
        Path::new(CONF).exists() && text(&ping).contains("UP"),
        "these tests need the multi-node test cluster: run `scripts/slurm-setup.sh --nodes 2` as root ({})",
        String::from_utf8_lossy(&ping.stderr)
    );
    let out = slurm("scontrol", &["show", "node", "-o"]);
    let mut nodes = BTreeMap::new();
    for line in text(&out).lines() {
        let field = |k: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(k))
                .map(str::to_string)
        };
        let name = field("NodeName=").expect("NodeName");
        let total: u32 = field("CPUTot=").unwrap().parse().unwrap();
        let spec = cores(&field("CPUSpecList=").unwrap_or_default());
        let own: Vec<u32> = (0..total).filter(|c| !spec.contains(c)).collect();
        nodes.insert(name, own);
    }
    assert!(nodes.len() >= 2, "two nodes expected: {nodes:?}");
    nodes
}

/// A CPU list (`0-2,5`) as core numbers.
fn cores(list: &str) -> Vec<u32> {
    let mut v = Vec::new();
    for part in list.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => v.extend(a.parse::<u32>().unwrap()..=b.parse::<u32>().unwrap()),
            None => v.push(part.parse().unwrap()),
        }
    }
    v
}

/// Submits `script` with `args`, output in `dir`; its job id.
fn submit(dir: &Path, args: &[&str], script: &str) -> String {
    let out_file = dir.join("slurm-%j.out");
    let mut all = vec!["--parsable", "--output", out_file.to_str().unwrap()];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--wrap", script]);
    let out = slurm("sbatch", &all);
    assert!(
        out.status.success(),
        "sbatch: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    text(&out).trim().to_string()
}

/// `scontrol show job -d` of `job` once it runs: per node, its CPU_IDs and memory (MB).
fn placement(job: &str) -> BTreeMap<String, (Vec<u32>, u64)> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let t = text(&slurm("scontrol", &["show", "job", "-d", job]));
        if t.contains("JobState=RUNNING") {
            let mut by_node = BTreeMap::new();
            for line in t.lines().map(str::trim).filter(|l| l.contains("CPU_IDs=")) {
                let field = |k: &str| {
                    line.split_whitespace()
                        .find_map(|w| w.strip_prefix(k))
                        .unwrap_or_else(|| panic!("{k} in {line}"))
                        .to_string()
                };
                let mem = field("Mem=").parse().unwrap();
                by_node.insert(field("Nodes="), (cores(&field("CPU_IDs=")), mem));
            }
            return by_node;
        }
        assert!(Instant::now() < deadline, "job {job} never ran:\n{t}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The cpuset and memory limit the kernel holds for `job` on `node` (Slurm's cgroup v1 tree `slurm_<node>`).
fn cgroup_of(node: &str, job: &str) -> (Vec<u32>, u64) {
    let dir = |ctl: &str| format!("/sys/fs/cgroup/{ctl}/slurm_{node}/uid_0/job_{job}");
    let cpus = std::fs::read_to_string(format!("{}/cpuset.cpus", dir("cpuset")))
        .unwrap_or_else(|e| panic!("{}: {e}", dir("cpuset")));
    let mem = std::fs::read_to_string(format!("{}/memory.limit_in_bytes", dir("memory")))
        .unwrap_or_else(|e| panic!("{}: {e}", dir("memory")));
    (cores(&cpus), mem.trim().parse().unwrap())
}

fn wait_done(job: &str, dir: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let t = text(&slurm("scontrol", &["show", "job", job]));
        if t.contains("JobState=COMPLETED") {
            return std::fs::read_to_string(dir.join(format!("slurm-{job}.out"))).unwrap();
        }
        assert!(
            !t.contains("JobState=FAILED") && !t.contains("JobState=CANCELLED"),
            "job {job}:\n{t}"
        );
        assert!(Instant::now() < deadline, "job {job} never finished:\n{t}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_job_spread_over_two_nodes_gets_each_nodes_own_cores_and_its_memory_on_both() {
    let _g = serial();
    let nodes = nodes();
    let dir = tempfile::tempdir().unwrap();
    let job = submit(
        dir.path(),
        &[
            "-N",
            "2",
            "--ntasks-per-node=1",
            "-c",
            "1",
            "--gres=gpu:1",
            "--mem=256M",
        ],
        "srun sh -c 'echo $(hostname) $(grep Cpus_allowed_list /proc/self/status | cut -f2) gpu=$CUDA_VISIBLE_DEVICES; sleep 3'",
    );
    let placed = placement(&job);
    assert_eq!(placed.len(), 2, "spread over two nodes: {placed:?}");
    for (node, (cpu_ids, mem_mb)) in &placed {
        let own = &nodes[node];
        assert_eq!(cpu_ids.len(), 1, "{node}: {cpu_ids:?}");
        assert!(
            own.contains(&cpu_ids[0]),
            "{node} owns {own:?}, job got {cpu_ids:?}"
        );
        assert_eq!(*mem_mb, 256, "{node}");
        let (cg_cpus, cg_mem) = cgroup_of(node, &job);
        assert_eq!(
            &cg_cpus, cpu_ids,
            "{node}: the cgroup holds what scontrol says"
        );
        assert_eq!(cg_mem, 256 << 20, "{node}");
    }
    let out = wait_done(&job, dir.path());
    for (node, (cpu_ids, _)) in &placed {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("{node} ")))
            .unwrap_or_else(|| panic!("no task ran on {node}:\n{out}"));
        let allowed = cores(line.split_whitespace().nth(1).unwrap());
        assert_eq!(
            &allowed, cpu_ids,
            "{node}'s task ran on {allowed:?}: {line}"
        );
        assert!(line.ends_with("gpu=0"), "{line}");
    }
}

#[test]
fn a_job_placed_on_the_second_node_runs_on_that_nodes_cores_only() {
    let _g = serial();
    let nodes = nodes();
    let (second, own) = nodes.iter().nth(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let job = submit(
        dir.path(),
        &["-w", second, "-c", "1", "--gres=gpu:1", "--mem=128M"],
        "echo $(hostname) $(grep Cpus_allowed_list /proc/self/status | cut -f2)",
    );
    let out = wait_done(&job, dir.path());
    let mut words = out.split_whitespace();
    assert_eq!(words.next(), Some(second.as_str()), "{out}");
    let allowed = cores(words.next().unwrap());
    assert!(
        !allowed.is_empty() && allowed.iter().all(|c| own.contains(c)),
        "{second} owns {own:?}, the job ran on {allowed:?}"
    );
    let first = nodes.values().next().unwrap();
    assert!(
        allowed.iter().all(|c| !first.contains(c)),
        "no core of the first node"
    );
}
