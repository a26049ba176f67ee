//! The Slurm client against real daemons: the single-node cluster `scripts/slurm-setup.sh` starts (cores and
//! memory confined by task/cgroup, two emulated GPUs as GRES). Discovery, a built-in workload submitted with
//! cores, memory and a GPU and what Slurm and the kernel really gave it, cancellation by SIGTERM, and the
//! errors a user sees. Without a running cluster these tests fail and say how to start one.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;
use synergy::exec::slurm::{JobId, JobInfo, JobRequest, Slurm, SlurmError, SlurmJobState};
use synergy::units::Bytes;

const MIB: u64 = 1 << 20;

/// The local cluster, or a failure that says how to start it.
fn cluster() -> Slurm {
    let slurm = Slurm::new();
    if let Err(e) = slurm.ping() {
        panic!("these tests need a running Slurm cluster: {e}");
    }
    slurm
}

/// The one node of the local cluster.
fn node(slurm: &Slurm) -> String {
    let nodes = slurm.nodes().expect("scontrol show node");
    assert_eq!(nodes.len(), 1, "the local cluster has one node: {nodes:?}");
    nodes[0].name.clone()
}

/// A small image dataset made once per build (a few MiB: epochs of a second or two).
fn dataset() -> PathBuf {
    static DATASET: OnceLock<PathBuf> = OnceLock::new();
    DATASET
        .get_or_init(|| {
            let dir = common::data_dir().join("slurm-image-4MiB");
            if !dir.exists() {
                let d = dir.to_str().unwrap();
                let out = common::run(&["dataset", "gen", "--kind", "image", "--size", "4MiB", d]);
                let err = String::from_utf8_lossy(&out.stderr);
                assert!(out.status.success(), "dataset gen: {err}");
            }
            dir
        })
        .clone()
}

/// A job request running `script` under `/bin/sh` with the absolute path of the synergy binary as `$1` and
/// the dataset as `$2`; its output files go to `dir`.
fn request(name: &str, node: &str, dir: &Path, script: &str) -> JobRequest {
    JobRequest {
        name: name.to_string(),
        command: vec![
            "/bin/sh".into(),
            "-c".into(),
            script.into(),
            "sh".into(),
            env!("CARGO_BIN_EXE_synergy").into(),
            dataset().display().to_string(),
        ],
        env: vec![("SYNERGY_TEST_MARK".into(), name.into())],
        workdir: dir.to_path_buf(),
        stdout: dir.join("out.txt"),
        stderr: dir.join("err.txt"),
        append_output: false,
        node: Some(node.to_string()),
        cpus: 1,
        memory: Bytes(300 * MIB),
        gpus: 1,
        partition: None,
        comment: None,
    }
}

/// Prints what the job's own cgroups hold (cpuset cores, memory limits up the tree), its GPUs and its pid,
/// then becomes the built-in image workload with `$WORKLOAD_ARGS` appended.
const PROBE: &str = r#"
echo "cuda=$CUDA_VISIBLE_DEVICES"
echo "mark=$SYNERGY_TEST_MARK"
cs=$(sed -n 's/^[0-9]*:cpuset://p' /proc/self/cgroup)
echo "cpuset=$cs $(cat /sys/fs/cgroup/cpuset$cs/cpuset.cpus)"
d=/sys/fs/cgroup/memory$(sed -n 's/^[0-9]*:memory://p' /proc/self/cgroup)
while [ "$d" != /sys/fs/cgroup/memory ] && [ "$d" != / ]; do
  echo "memlimit=$d $(cat "$d/memory.limit_in_bytes")"
  d=$(dirname "$d")
done
echo "pid=$$"
exec "$1" workload run image --dataset "$2" --gpu-rate 2000 --batch-size 16 "$@"
"#;

/// `key=value` lines of a job's output: every value of `key`.
fn values(out: &str, key: &str) -> Vec<String> {
    let prefix = format!("{key}=");
    out.lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .map(str::to_string)
        .collect()
}

/// Waits until the job runs (or has already ended) and returns what Slurm says then.
fn running(slurm: &Slurm, id: JobId) -> JobInfo {
    slurm
        .wait_for(id, Duration::from_secs(60), |j| {
            j.state == SlurmJobState::Running || j.state.is_finished()
        })
        .expect("the job starts")
}

/// The pid the probe script printed (the workload's, as the script `exec`s it), waiting up to 30 s.
fn job_pid(out_file: &Path) -> u32 {
    for _ in 0..300 {
        let out = std::fs::read_to_string(out_file).unwrap_or_default();
        if let Some(pid) = values(&out, "pid").first().and_then(|p| p.parse().ok()) {
            return pid;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the job did not print its pid into {}", out_file.display());
}

/// The state letter of a process (`R`, `S`, `T` for stopped, ...) from /proc/PID/stat; `None` once gone.
fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

/// CPU time (user + system, in clock ticks) of a process and its threads so far.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest: Vec<&str> = stat.rsplit_once(") ").unwrap().1.split(' ').collect();
    // After the state (field 3): utime and stime are fields 14 and 15.
    rest[11].parse::<u64>().unwrap() + rest[12].parse::<u64>().unwrap()
}

/// Slurm's cgroups of a job (`.../slurm*/uid_*/job_ID`) in any controller, as the kernel lists them.
fn job_cgroups(id: JobId) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for ctrl in ["cpuset", "memory", "freezer"] {
        let Ok(tops) = std::fs::read_dir(Path::new("/sys/fs/cgroup").join(ctrl)) else {
            continue;
        };
        for top in tops
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("slurm"))
        {
            for uid in std::fs::read_dir(top.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                let job = uid.path().join(format!("job_{id}"));
                if job.exists() {
                    found.push(job);
                }
            }
        }
    }
    found
}

#[test]
fn discovers_the_node_with_its_cores_memory_and_gpus() {
    let _host = common::shared();
    let slurm = cluster();
    let nodes = slurm.nodes().unwrap();
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    let n = &nodes[0];
    // Cores, as Slurm counts them: not `available_parallelism`, which takes an enclosing CFS quota off
    // (a whole test run held to half the host by `scripts/ci-stress.sh --half-speed`).
    let host_cores = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("processor"))
        .count() as u32;
    assert_eq!(n.cpus, host_cores, "every core of this host: {n:?}");
    assert_eq!(
        n.gpus, 2,
        "slurm-setup.sh's default of two emulated GPUs: {n:?}"
    );
    let host_mem = procfs_mem_total();
    assert!(
        n.memory.0 > host_mem / 2 && n.memory.0 < host_mem,
        "most of this host's {host_mem} bytes, less a reserve for the OS: {n:?}"
    );
    assert!(n.accepts_jobs(), "{n:?}");
    assert_eq!(n.addr, "127.0.0.1");
}

fn procfs_mem_total() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap();
    let kib: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kib * 1024
}

#[test]
fn a_workload_gets_exactly_the_cores_memory_and_gpu_it_asked_for() {
    let _serial = common::serial();
    let slurm = cluster();
    let node = node(&slurm);
    let dir = tempfile::tempdir().unwrap();
    // 160 steps of 16 images at up to 2000 samples/s: a few seconds on one core, long enough to see it run.
    let script = PROBE.replace(r#""$@""#, "--max-steps 160");
    let req = request("synergy-test-resources", &node, dir.path(), &script);
    let id = slurm.submit(&req).expect("sbatch accepts the job");

    let live = running(&slurm, id);
    let done = slurm
        .wait(id, Duration::from_secs(180))
        .expect("the job ends");
    let out = std::fs::read_to_string(dir.path().join("out.txt")).unwrap_or_default();
    let err = std::fs::read_to_string(dir.path().join("err.txt")).unwrap_or_default();
    assert_eq!(
        done.state,
        SlurmJobState::Completed,
        "{done:?}\nstdout:\n{out}\nstderr:\n{err}"
    );
    assert_eq!((done.exit_code, done.exit_signal), (0, 0));
    assert!(
        err.contains("160 steps, 2560 samples"),
        "the workload ran to its end: {err}"
    );

    // What the client reads back: the request, granted.
    assert_eq!(done.node.as_deref(), Some(node.as_str()));
    assert_eq!(done.cpus, 1);
    assert_eq!(done.memory, Some(Bytes(300 * MIB)));
    assert_eq!(done.gpus, 1);
    assert_eq!(done.name, "synergy-test-resources");
    // The same in scontrol's own words.
    let raw = Command::new("scontrol")
        .args(["show", "job", &id.to_string()])
        .output()
        .unwrap();
    let raw = String::from_utf8_lossy(&raw.stdout);
    for want in [
        "NumCPUs=1",
        "mem=300M",
        "gpu:1",
        &format!("NodeList={node}"),
    ] {
        assert!(
            raw.contains(want),
            "`{want}` not in scontrol show job:\n{raw}"
        );
    }

    // While it ran: the GPU Slurm bound is the one the job saw, and its cpuset held the one core Slurm named.
    assert_eq!(
        values(&out, "mark"),
        vec!["synergy-test-resources"],
        "the request's environment reached the job"
    );
    assert_eq!(
        live.state,
        SlurmJobState::Running,
        "a job of seconds is seen running: {live:?}"
    );
    assert_eq!(live.cpu_ids.len(), 1, "{live:?}");
    assert_eq!(live.gpu_ids.len(), 1, "{live:?}");
    assert_eq!(
        values(&out, "cuda"),
        vec![live.gpu_ids[0].to_string()],
        "CUDA_VISIBLE_DEVICES names the GPU Slurm bound: {out}"
    );

    // The kernel's view from inside the job: a cpuset of one core under Slurm's job cgroup, and a 300 MiB
    // memory limit on one of its memory cgroups.
    let cpuset = values(&out, "cpuset");
    assert_eq!(cpuset.len(), 1, "{out}");
    let (path, cpus) = cpuset[0].split_once(' ').unwrap();
    assert!(
        path.contains(&format!("/job_{id}")),
        "the job runs in Slurm's cgroup: {path}"
    );
    let cores: Vec<&str> = cpus.split(',').collect();
    assert!(cores.len() == 1 && !cpus.contains('-'), "one core: {cpus}");
    assert_eq!(cpus, live.cpu_ids[0].to_string(), "the core Slurm reported");
    let limits: Vec<u64> = values(&out, "memlimit")
        .iter()
        .filter(|l| l.contains(&format!("/job_{id}")))
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect();
    assert!(
        limits.contains(&(300 * MIB)),
        "a 300 MiB limit on the job's memory cgroup: {limits:?}\n{out}"
    );
    assert!(
        job_cgroups(id).is_empty(),
        "Slurm removed the job's cgroups: {:?}",
        job_cgroups(id)
    );
}

#[test]
fn cancel_delivers_sigterm_and_leaves_no_process_or_cgroup() {
    let _serial = common::serial();
    let slurm = cluster();
    let node = node(&slurm);
    let dir = tempfile::tempdir().unwrap();
    // No step limit: the workload runs until it is stopped.
    let script = PROBE.replace(r#""$@""#, "");
    let req = request("synergy-test-cancel", &node, dir.path(), &script);
    let id = slurm.submit(&req).unwrap();
    let live = running(&slurm, id);
    assert_eq!(live.state, SlurmJobState::Running, "{live:?}");

    // Wait until the workload itself runs (its pid printed, its first steps done) so SIGTERM finds it.
    let pid = job_pid(&dir.path().join("out.txt"));
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        Path::new(&format!("/proc/{pid}")).exists(),
        "the workload (pid {pid}) runs before the cancel"
    );
    assert!(!job_cgroups(id).is_empty(), "a running job has its cgroups");

    let ended = slurm
        .stop(id, Duration::from_secs(60))
        .expect("the job stops");
    assert_eq!(ended.state, SlurmJobState::Cancelled, "{ended:?}");
    // The workload's closing summary is written only by its SIGTERM handler's clean exit, not after SIGKILL.
    let err = std::fs::read_to_string(dir.path().join("err.txt")).unwrap_or_default();
    assert!(
        err.contains("samples/s"),
        "the workload saw SIGTERM and ended cleanly (its summary line): {err}"
    );
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "no process of the job is left (pid {pid})"
    );
    assert!(common::processes_with("synergy-test-cancel").is_empty());
    assert!(job_cgroups(id).is_empty(), "{:?}", job_cgroups(id));
    // Cancelling again is harmless.
    slurm
        .cancel(id)
        .expect("cancelling an ended job is not an error");
}

#[test]
fn suspend_stops_every_process_and_resume_continues() {
    let _serial = common::serial();
    let slurm = cluster();
    let node = node(&slurm);
    let dir = tempfile::tempdir().unwrap();
    let script = PROBE.replace(r#""$@""#, "");
    let id = slurm
        .submit(&request("synergy-test-suspend", &node, dir.path(), &script))
        .unwrap();
    assert_eq!(running(&slurm, id).state, SlurmJobState::Running);
    let pid = job_pid(&dir.path().join("out.txt"));
    std::thread::sleep(Duration::from_secs(1));

    slurm.suspend(id).expect("scontrol suspend");
    let suspended = slurm
        .wait_for(id, Duration::from_secs(30), |j| {
            j.state != SlurmJobState::Running
        })
        .unwrap();
    assert_eq!(suspended.state, SlurmJobState::Suspended, "{suspended:?}");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(process_state(pid), Some('T'), "the workload is stopped");
    let before = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(cpu_ticks(pid), before, "a suspended job uses no CPU");

    slurm.resume(id).expect("scontrol resume");
    let resumed = slurm
        .wait_for(id, Duration::from_secs(30), |j| {
            j.state != SlurmJobState::Suspended
        })
        .unwrap();
    assert_eq!(resumed.state, SlurmJobState::Running, "{resumed:?}");
    std::thread::sleep(Duration::from_secs(1));
    assert_ne!(process_state(pid), Some('T'));
    assert!(cpu_ticks(pid) > before, "the resumed job computes again");

    let ended = slurm.stop(id, Duration::from_secs(60)).unwrap();
    assert_eq!(ended.state, SlurmJobState::Cancelled);
    assert_eq!(process_state(pid), None, "no process is left");
    assert!(job_cgroups(id).is_empty(), "{:?}", job_cgroups(id));
}

#[test]
fn an_impossible_request_is_rejected_with_slurms_reason() {
    let _host = common::shared();
    let slurm = cluster();
    let node = node(&slurm);
    let dir = tempfile::tempdir().unwrap();
    let mut req = request("synergy-test-too-many-gpus", &node, dir.path(), "true");
    req.gpus = 3;
    match slurm.submit(&req) {
        Err(SlurmError::Rejected { name, message }) => {
            assert_eq!(name, "synergy-test-too-many-gpus");
            assert!(!message.is_empty());
        }
        other => panic!("three GPUs on a two-GPU node must be refused, got {other:?}"),
    }
    let mut req = request(
        "synergy-test-no-such-node",
        "no-such-node",
        dir.path(),
        "true",
    );
    req.gpus = 0;
    let e = slurm.submit(&req).unwrap_err();
    assert!(matches!(e, SlurmError::Rejected { .. }), "{e}");
    assert!(matches!(
        slurm.job(JobId(u32::MAX as u64)),
        Err(SlurmError::NoSuchJob(_))
    ));
}

#[test]
fn an_unreachable_controller_says_to_run_the_setup_script() {
    let _host = common::shared();
    // The real configuration with the controller moved to a port nothing listens on.
    let real = std::fs::read_to_string("/etc/slurm/slurm.conf")
        .expect("/etc/slurm/slurm.conf: run `sudo scripts/slurm-setup.sh` first");
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("slurm.conf");
    std::fs::write(
        &conf,
        format!("{real}\nSlurmctldPort=9\nMessageTimeout=2\n"),
    )
    .unwrap();
    let slurm = Slurm::with_conf(&conf);
    for e in [slurm.nodes().unwrap_err(), slurm.ping().unwrap_err()] {
        assert!(matches!(e, SlurmError::Unreachable { .. }), "{e:?}");
        assert!(e.to_string().contains("scripts/slurm-setup.sh"), "{e}");
    }
}
