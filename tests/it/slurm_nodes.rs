//! The multi-node test cluster (`scripts/slurm-setup.sh --nodes 2`, docs/slurm.md "Several nodes on one
//! host"): every node is its own slurmd in its own network namespace, with its own block of this host's cores.
//! A job placed on one node, and a job spread over two, get exactly their node's cores and the memory asked
//! for, as `scontrol show job -d` says and as the nodes' cgroups enforce. `synergy run --backend slurm`
//! spreads a job wider than a node over both, with the planned cores, memory and GPUs on each, and a
//! queue under tune completes with every job holding what each round planned. Without that cluster these
//! tests fail and say how to start it.

use crate::common::{finish, job, processes_with, serial, synergy, RunSetup};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
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
        // The second node's cgroup is made when srun starts its task there, a moment after the job is
        // RUNNING.
        let deadline = Instant::now() + Duration::from_secs(10);
        while try_cgroup_of(node, &job).is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
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

/// What a node holds of a job: (core ids, memory MiB, GPUs), and the Slurm job id whose cgroup it is
/// (a heterogeneous job's component on that node has an id of its own).
type Held = (Vec<u32>, u64, u32, String);

/// `scontrol show job -d ID` while every record of it (every component of a heterogeneous job) runs:
/// per node, what it holds; `None` otherwise.
fn held(id: &str) -> Option<BTreeMap<String, Held>> {
    let t = text(&slurm("scontrol", &["show", "job", "-d", id]));
    let states: Vec<&str> = t
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("JobState="))
        .collect();
    if states.is_empty() || states.iter().any(|s| *s != "RUNNING") {
        return None;
    }
    let mut by_node = BTreeMap::new();
    let mut record = String::new();
    for line in t.lines().map(str::trim) {
        if let Some(id) = line.strip_prefix("JobId=") {
            record = id.split_whitespace().next().unwrap_or_default().to_string();
        }
        if !line.contains("CPU_IDs=") {
            continue;
        }
        let field = |k: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(k))
                .unwrap_or_default()
                .to_string()
        };
        // `GRES=gpu:2(IDX:0-1)`: the count before the parenthesis.
        let gres = field("GRES=");
        let gpus = gres
            .strip_prefix("gpu:")
            .and_then(|g| g.split('(').next())
            .and_then(|n| n.rsplit(':').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        by_node.insert(
            field("Nodes="),
            (
                cores(&field("CPU_IDs=")),
                field("Mem=").parse().unwrap_or(0),
                gpus,
                record.clone(),
            ),
        );
    }
    Some(by_node)
}

/// A planned allocation (`{"parts": [...]}`) per node name: (cores, memory MiB, GPUs).
fn planned(alloc: &serde_json::Value, names: &[String]) -> BTreeMap<String, (u32, u64, u32)> {
    alloc["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let cpus = p["cpus"].as_f64().unwrap();
            assert_eq!(cpus.fract(), 0.0, "whole cores on Slurm: {p}");
            (
                names[p["server"].as_u64().unwrap() as usize].clone(),
                (
                    cpus as u32,
                    p["memory"].as_u64().unwrap() >> 20,
                    p["gpus"].as_array().unwrap().len() as u32,
                ),
            )
        })
        .collect()
}

/// A run of `synergy run --backend slurm` on the multi-node cluster, in a temporary directory.
struct NodesRun {
    setup: RunSetup,
    names: Vec<String>,
}

impl NodesRun {
    fn new() -> NodesRun {
        NodesRun {
            setup: RunSetup::new(),
            names: nodes().into_keys().collect(),
        }
    }

    /// A job list of (name, GPUs, samples, arrival_s), every job the image workload with an emulated
    /// accelerator of `rate` samples/s (each task's most).
    fn jobs(&self, rate: u32, jobs: &[(&str, u32, u64, f64)]) -> PathBuf {
        let spec = self.setup.spec(&format!("img{rate}"), "image", rate);
        let profile = crate::common::profiles().join("image.json");
        let mut body = String::new();
        for (name, gpus, samples, arrival) in jobs {
            body.push_str(&format!(
                "[[job]]\nname = \"{name}\"\nworkload = \"{}\"\nprofile = \"{}\"\ngpus = {gpus}\nsamples = {samples}\narrival_s = {arrival}\n\n",
                spec.display(),
                profile.display()
            ));
        }
        let p = self.setup.path().join("jobs.toml");
        std::fs::write(&p, body).unwrap();
        p
    }

    fn command(&self, jobs: &Path, args: &[&str]) -> Command {
        let mut c = synergy();
        c.arg("run")
            .arg(jobs)
            .args(["--backend", "slurm", "--json"])
            .args(args)
            .env("SLURM_CONF", CONF);
        c
    }

    fn start(&self, jobs: &Path, args: &[&str]) -> Child {
        self.command(jobs, args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    fn state(&self) -> Option<serde_json::Value> {
        let text = std::fs::read_to_string(self.setup.path().join("jobs.state.json")).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Samples in the workload state file `file` of the run's jobs directory.
    fn saved(&self, file: &str) -> u64 {
        let p = self.setup.path().join("jobs.state.json.jobs").join(file);
        let v: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
        )
        .unwrap();
        v["samples_done"].as_u64().unwrap()
    }

    /// Watches the run until `child` exits: whenever Slurm runs a job the state file names, what each
    /// node holds beside what the executor planned for that round, with the node's cgroup (cpuset and
    /// memory limit) read at the same moment.
    fn watch(&self, child: &mut Child) -> Vec<Sighting> {
        let mut seen = Vec::new();
        let start = Instant::now();
        while child.try_wait().unwrap().is_none() && start.elapsed() < Duration::from_secs(150) {
            let Some(state) = self.state() else {
                std::thread::sleep(Duration::from_millis(100));
                continue;
            };
            for j in state["jobs"].as_array().unwrap() {
                let (Some(id), Some(a)) = (j["handle"]["backend_id"].as_str(), j.get("allocation"))
                else {
                    continue;
                };
                let Some(slurm) = held(id) else { continue };
                let cgroups: BTreeMap<String, Option<(Vec<u32>, u64)>> = slurm
                    .iter()
                    .map(|(node, h)| (node.clone(), try_cgroup_of(node, &h.3)))
                    .collect();
                // The record may be a moment old: keep only what the executor still names.
                let current = self.state().is_some_and(|now| {
                    now["jobs"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|k| k["handle"]["backend_id"] == id && k["allocation"] == *a)
                });
                if current && held(id).is_some() {
                    seen.push(Sighting {
                        job: j["name"].as_str().unwrap().to_string(),
                        id: id.to_string(),
                        planned: planned(a, &self.names),
                        slurm,
                        cgroups,
                    });
                }
            }
            std::thread::sleep(Duration::from_millis(150));
        }
        seen
    }
}

/// One sighting of a running job.
#[derive(Debug)]
struct Sighting {
    job: String,
    id: String,
    planned: BTreeMap<String, (u32, u64, u32)>,
    slurm: BTreeMap<String, Held>,
    cgroups: BTreeMap<String, Option<(Vec<u32>, u64)>>,
}

impl Sighting {
    /// Asserts that every node holds what was planned for it, in Slurm and in its cgroup, on that node's
    /// own cores.
    fn assert_as_planned(&self, own: &BTreeMap<String, Vec<u32>>) {
        let nodes: Vec<&String> = self.slurm.keys().collect();
        let want: Vec<&String> = self.planned.keys().collect();
        assert_eq!(nodes, want, "the planned nodes: {self:?}");
        for (node, &(cpus, mem, gpus)) in &self.planned {
            let (ids, s_mem, s_gpus, _) = &self.slurm[node];
            assert_eq!(
                (ids.len() as u32, *s_mem, *s_gpus),
                (cpus, mem, gpus),
                "{node} holds what was planned: {self:?}"
            );
            assert!(
                ids.iter().all(|c| own[node].contains(c)),
                "{node}'s own cores: {self:?}"
            );
            if let Some((cg_cpus, cg_mem)) = &self.cgroups[node] {
                assert_eq!(
                    cg_cpus, ids,
                    "{node}: the cgroup holds what scontrol says: {self:?}"
                );
                assert_eq!(*cg_mem, mem << 20, "{node}: memory limit: {self:?}");
            }
        }
    }
}

/// [`cgroup_of`], or `None` while the job's cgroup is not there or not yet set up (slurmd makes it,
/// then writes its cpuset and memory limit) or being removed.
fn try_cgroup_of(node: &str, job: &str) -> Option<(Vec<u32>, u64)> {
    let dir = |ctl: &str| format!("/sys/fs/cgroup/{ctl}/slurm_{node}/uid_0/job_{job}");
    let cpus = cores(&std::fs::read_to_string(format!("{}/cpuset.cpus", dir("cpuset"))).ok()?);
    let mem: u64 = std::fs::read_to_string(format!("{}/memory.limit_in_bytes", dir("memory")))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    // A new memory cgroup starts unlimited (the largest page-aligned i64).
    (!cpus.is_empty() && mem < 1 << 62).then_some((cpus, mem))
}

/// GPUs of each node (the fewest, should they differ).
fn gpus_per_node() -> u32 {
    text(&slurm("sinfo", &["-h", "-N", "-o", "%G"]))
        .lines()
        .filter_map(|g| {
            g.trim()
                .strip_prefix("gpu:")?
                .split('(')
                .next()?
                .parse()
                .ok()
        })
        .min()
        .expect("the nodes have GPUs")
}

/// Asserts that Slurm holds no unfinished job of executor `pid` and no workload of `dir` runs.
fn assert_clean(pid: u32, dir: &Path) {
    let prefix = format!("synergy-run-{pid}-");
    let queue = text(&slurm("squeue", &["--noheader", "--format=%j|%T"]));
    assert!(!queue.contains(&prefix), "squeue still lists: {queue}");
    let procs = processes_with(&dir.display().to_string());
    assert!(procs.is_empty(), "processes left: {procs:?}");
}

#[test]
fn synergy_run_spreads_a_job_wider_than_a_node_with_the_planned_cores_and_memory_on_each() {
    let _g = serial();
    let own = nodes();
    let gpus_per_node = gpus_per_node();
    let r = NodesRun::new();
    // One GPU more than a node has: the plan spreads it, all of one node's GPUs and one of the other's.
    let wide = gpus_per_node + 1;
    // Each task at most 200 samples/s, so the job runs for seconds and is seen running.
    let jobs = r.jobs(200, &[("wide", wide, 600, 0.0)]);
    let out = r
        .command(&jobs, &["--round", "3", "--dry-run"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let first = &plan[0]["jobs"][0];
    assert_eq!(first["servers"], serde_json::json!(r.names), "{first}");
    let want = planned(&first["allocation"], &r.names);
    let gpus: Vec<u32> = want.values().map(|p| p.2).collect();
    assert_eq!(gpus, vec![gpus_per_node, 1], "{first}");

    let mut child = r.start(&jobs, &["--round", "3"]);
    let pid = child.id();
    let seen = r.watch(&mut child);
    let (report, stderr, code) = finish(child);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(job(&report, "wide")["status"], "done", "{stderr}");
    assert!(!seen.is_empty(), "never seen running in Slurm:\n{stderr}");
    for x in &seen {
        assert_eq!(x.planned, want, "the dry run's plan: {x:?}");
        x.assert_as_planned(&own);
    }
    assert!(
        seen.iter().any(|x| x.cgroups.values().all(Option::is_some)),
        "the cgroups on both nodes were read: {seen:?}"
    );
    // One task per node, each with its own state file, sharing the work by GPUs: the first node's
    // task did `gpus_per_node` shares of 600 / wide (up to a batch of 32 more), the other's one.
    let (t0, t1) = (r.saved("wide.json.task0"), r.saved("wide.json.task1"));
    let share = 600 / wide as u64;
    assert!(
        t0 >= share * gpus_per_node as u64 && t0 < share * gpus_per_node as u64 + 32 + 1,
        "{t0} {t1}"
    );
    assert!(t1 >= share && t1 < share + 32 + 1, "{t0} {t1}");
    assert_clean(pid, r.setup.path());
}

#[test]
fn a_queue_under_tune_on_two_nodes_holds_what_each_round_planned() {
    let _g = serial();
    let own = nodes();
    let r = NodesRun::new();
    // A job of both nodes' GPUs and two one-GPU jobs: least attained service takes turns, so the wide
    // job is stopped and submitted again (its tasks continue from their own state files), and the
    // others run one a node.
    let all = own.len() as u32 * gpus_per_node();
    // Each task at most 200 samples/s: the wide job's 1200 samples take its two tasks at least 3 s, so
    // it is still running at the second round (2 s), however quiet the host.
    let jobs = r.jobs(
        200,
        &[
            ("wide", all, 1200, 0.0),
            ("one-a", 1, 300, 0.0),
            ("one-b", 1, 300, 2.0),
        ],
    );
    let mut child = r.start(
        &jobs,
        &["--round", "2", "--mechanism", "tune", "--policy", "las"],
    );
    let pid = child.id();
    let seen = r.watch(&mut child);
    let (report, stderr, code) = finish(child);
    assert_eq!(code, Some(0), "{stderr}");
    for name in ["wide", "one-a", "one-b"] {
        assert_eq!(job(&report, name)["status"], "done", "{report}\n{stderr}");
        assert!(
            seen.iter().any(|x| x.job == name),
            "{name} never seen running in Slurm: {seen:?}\n{stderr}"
        );
    }
    for x in &seen {
        x.assert_as_planned(&own);
    }
    let wide: Vec<&Sighting> = seen.iter().filter(|x| x.job == "wide").collect();
    assert!(
        wide.iter().all(|x| x.planned.len() == 2),
        "spread over both: {wide:?}"
    );
    // The work is done once: the tasks' files hold 1200 samples in all, up to a batch each per submission.
    let saved: u64 = (0..2).map(|k| r.saved(&format!("wide.json.task{k}"))).sum();
    let submissions = wide
        .iter()
        .map(|x| &x.id)
        .collect::<std::collections::BTreeSet<_>>()
        .len() as u64;
    assert!(
        submissions >= 2,
        "wide was stopped and submitted again: {wide:?}\n{stderr}"
    );
    assert!(
        saved >= 1200 && saved <= 1200 + 2 * 32 * submissions,
        "{saved} over {submissions} submissions"
    );
    assert_clean(pid, r.setup.path());
}

/// A data-parallel PyTorch job of all the nodes' GPUs (workloads/pytorch-ddp-resnet18-small.toml, with
/// its `launcher = "torchrun"`) runs as one job: one Slurm job with a launcher on each node, the first
/// node's address its rendezvous, one rank per GPU in all; its ranks keep one state file, which holds its
/// work once, and the run observes its throughput from that file.
#[test]
fn a_data_parallel_job_over_two_nodes_is_one_rendezvous_and_is_observed() {
    let _g = serial();
    let _ = nodes();
    let r = NodesRun::new();
    let all = r.names.len() as u32 * gpus_per_node();
    let spec = format!(
        "{}/workloads/pytorch-ddp-resnet18-small.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let profile = crate::common::profiles().join("pytorch-ddp-resnet18-small.json");
    // Enough work for whole rounds of training after the ranks' start-up (about 10 s): with 640
    // samples a fast run trained for about 8 s and no round's window held enough saved steps to observe.
    const SAMPLES: u64 = 1920;
    let jobs = r.setup.path().join("jobs.toml");
    std::fs::write(
        &jobs,
        format!(
            "[[job]]\nname = \"ddp\"\nworkload = \"{spec}\"\nprofile = \"{}\"\ngpus = {all}\nsamples = {SAMPLES}\n",
            profile.display()
        ),
    )
    .unwrap();
    let child = r
        .command(&jobs, &["--round", "4"])
        .env("SYNERGY_PYTHON", crate::pytorch::python())
        .env("SYNERGY_DATA_DIR", crate::pytorch::data_dir())
        .env("TRAIN_IMAGE_SIZE", "32")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (report, stderr, code) = finish(child);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(job(&report, "ddp")["status"], "done", "{report}\n{stderr}");
    // One job of ranks: the job's own state file holds its work once (up to a step of every rank
    // more), and no task kept a file of its own.
    let done = r.saved("ddp.json");
    assert!((SAMPLES..SAMPLES + 16).contains(&done), "{done}");
    let dir = r.setup.path().join("jobs.state.json.jobs");
    assert!(!dir.join("ddp.json.task0").exists());
    // Each node's launcher ran its ranks; the ranks of both met (torchrun's log names both nodes).
    let err = std::fs::read_to_string(dir.join("ddp.err")).unwrap_or_default();
    assert!(!err.contains("ChildFailedError"), "{err}");
    // Observed from its saved progress, as the whole job at all its GPUs, under Slurm's isolation.
    let log = r.setup.path().join("jobs.state.observations.jsonl");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let obs: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        !obs.is_empty(),
        "no observation in {}:\n{stderr}",
        log.display()
    );
    for o in &obs {
        assert_eq!(o["gpus"], all, "{o}");
        assert_eq!(o["isolation"], "slurm", "{o}");
        assert!(
            o["throughput"]["samples_per_s"].as_f64().unwrap() > 0.0,
            "{o}"
        );
    }
    assert_clean(pid, r.setup.path());
}
