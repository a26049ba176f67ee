//! What `kill -9` leaves (docs/architecture.md §7): `measure`, `profile` and `run`, each killed mid-trial,
//! leave cgroups, a probe's temporary directory and a frozen job behind; the next command removes all of
//! it, says so, and touches nothing of a live process.

use crate::common::{cgroups_of, processes_with, serial, skip_without_cgroups, synergy, RunSetup};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// Every cgroup directory under /sys/fs/cgroup whose name starts with `prefix`.
fn cgroups_named(prefix: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![PathBuf::from("/sys/fs/cgroup")];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                if e.file_name().to_string_lossy().starts_with(prefix) {
                    found.push(e.path());
                }
                stack.push(e.path());
            }
        }
    }
    found
}

/// The probe directories and workloads' own TMPDIRs of `pid` in `tmp`.
fn probe_dirs(tmp: &Path, pid: u32) -> Vec<PathBuf> {
    let prefixes = [
        format!("synergy-probe-{pid}-"),
        format!("synergy-tmp-{pid}-"),
    ];
    std::fs::read_dir(tmp)
        .unwrap()
        .flatten()
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            prefixes.iter().any(|p| name.starts_with(p))
        })
        .map(|e| e.path())
        .collect()
}

/// Waits (up to 60 s) until `ready` holds, then kills `child` with SIGKILL (no clean-up runs); returns its
/// pid and what it wrote to stderr.
fn kill_when(mut child: Child, what: &str, ready: impl Fn() -> bool) -> (u32, String) {
    let pid = child.id();
    let start = Instant::now();
    while !ready() {
        if let Ok(Some(status)) = child.try_wait() {
            let out = child.wait_with_output().unwrap();
            panic!(
                "{what} ended ({status}) before it was killed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{what} never got going"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    (pid, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Asserts that `stderr`, of the command after `pid`'s, says it removed what `pid` left, and that no
/// cgroup or probe directory of `pid` is left.
fn assert_reaped(stderr: &str, pid: u32, tmp: &Path) {
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.contains(&format!("left by dead pid {pid}")),
        "nothing said of {pid}:\n{stderr}"
    );
    assert!(cgroups_of(pid).is_empty(), "{:?}", cgroups_of(pid));
    assert!(probe_dirs(tmp, pid).is_empty());
}

#[test]
fn after_kill_9_of_measure_profile_and_run_the_next_command_leaves_nothing_of_them() {
    if skip_without_cgroups() {
        return;
    }
    let _g = serial();
    let s = RunSetup::new();
    let tmp = s.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let marker = format!("leftover-marker-{}", std::process::id());
    let start = |args: &[&str]| {
        synergy()
            .args(args)
            .env("TMPDIR", &tmp)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };

    // measure, with a probe: a cgroup and a temporary directory.
    let script = format!("import time; time.sleep(120)  # {marker}");
    let child = start(&[
        "measure",
        "--cpus",
        "1",
        "--max-seconds",
        "100",
        "--probe",
        "pytorch",
        "--",
        "python3",
        "-c",
        &script,
    ]);
    let measure_pid = child.id();
    let (measure, _) = kill_when(child, "measure", || {
        !cgroups_of(measure_pid).is_empty() && !processes_with(&marker).is_empty()
    });
    assert!(!cgroups_of(measure).is_empty(), "measure left no cgroup");
    // The probe's directory and the workload's own TMPDIR.
    assert_eq!(probe_dirs(&tmp, measure).len(), 2);
    // A live process's empty cgroup and probe directory look the same, and must stay.
    let live = std::process::id();
    let live_probe = tmp.join(format!("synergy-probe-{live}-keep"));
    std::fs::create_dir(&live_probe).unwrap();

    // profile of a built-in workload on a small dataset, killed in its first trial.
    let spec = s.spec("txt", "text", 1600);
    let child = start(&[
        "profile",
        &spec.display().to_string(),
        "--cpus",
        "1,2",
        "--out",
        &s.path().join("p.json").display().to_string(),
    ]);
    let profile_pid = child.id();
    let (profile, stderr) = kill_when(child, "profile", || !cgroups_of(profile_pid).is_empty());
    assert_reaped(&stderr, measure, &tmp);
    assert!(stderr.contains("removed temporary directory"), "{stderr}");
    assert!(
        processes_with(&marker).is_empty(),
        "measure's workload is left"
    );
    assert!(!cgroups_of(profile).is_empty(), "profile left no cgroup");

    // run, with one GPU for two jobs under LAS: one job runs, the other is frozen when it dies.
    let jobs = s.jobs(&[
        ("a", &spec, "text", 64000, 0.0),
        ("b", &spec, "text", 64000, 0.0),
    ]);
    let child = start(&[
        "run",
        &jobs.display().to_string(),
        "--gpus",
        "1",
        "--policy",
        "las",
        "--round",
        "2",
    ]);
    let run_prefix = format!("synergy-run-{}-", child.id());
    // Killed once both jobs have run and saved progress, so one of them is frozen.
    let progress = |n: &str| {
        let p = s.path().join(format!("jobs.state.json.jobs/{n}.json"));
        std::fs::read_to_string(p)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v["samples_done"].as_u64())
            .unwrap_or(0)
    };
    let (run, stderr) = kill_when(child, "run", || {
        let ready = progress("a") > 0 && progress("b") > 0;
        if ready {
            std::thread::sleep(Duration::from_millis(700));
        }
        ready
    });
    assert_reaped(&stderr, profile, &tmp);
    let workloads = s.path().display().to_string();
    // The frozen job survives its executor's death until its cgroup is thawed.
    std::thread::sleep(Duration::from_millis(300));
    assert!(!processes_with(&workloads).is_empty(), "no job of run left");
    assert!(!cgroups_named(&run_prefix).is_empty());

    // The next command, whatever it is and however it ends, reaps first.
    let out = synergy()
        .args([
            "measure",
            "--cpus",
            "1",
            "--max-seconds",
            "5",
            "--probe",
            "pytorch",
            "--",
        ])
        .args(["python3", "-c", "pass"])
        .env("TMPDIR", &tmp)
        .output()
        .unwrap();
    assert_reaped(&String::from_utf8_lossy(&out.stderr), run, &tmp);
    assert!(cgroups_named(&run_prefix).is_empty());
    let deadline = Instant::now() + Duration::from_secs(5);
    while !processes_with(&workloads).is_empty() {
        assert!(
            Instant::now() < deadline,
            "processes left: {:?}",
            processes_with(&workloads)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        live_probe.exists(),
        "a live process's directory was removed"
    );
    // And nothing of the next command itself is left.
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 1);
}
