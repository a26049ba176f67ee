//! Ctrl-C (SIGINT) and SIGTERM to `synergy measure` mid-trial leave no workload process and no cgroup.

use crate::common;

use crate::common::{cgroups_of, processes_with, synergy};
use std::time::{Duration, Instant};

fn interrupt_mid_trial(signal: i32, isolation: &str) {
    let _guard = common::serial();
    let marker = tempfile::tempdir().unwrap();
    let marker_str = marker.path().display().to_string();
    // A fresh data directory as the marker: the dataset path (inside it) appears in the workload's command.
    let mut child = synergy()
        .env("SYNERGY_DATA_DIR", marker.path())
        .args([
            "measure",
            "image",
            "--synthetic",
            "--cpus",
            "1",
            "--max-seconds",
            "120",
            "--precision",
            "0.0001",
        ])
        .args(["--isolation", isolation])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The workload starts only after the dataset is generated and this host's one-core rate is timed
    // (a synthetic trial's emulated ingestion rate is relative to it): about 15 s on a quiet 2-core host,
    // longer on a busy one.
    let start = Instant::now();
    while processes_with(&marker_str).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(180),
            "the workload never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(1500));
    if isolation != "affinity" {
        assert!(
            !cgroups_of(child.id()).is_empty(),
            "the trial's cgroup exists while it runs"
        );
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, signal) };
    let status = child.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(128 + signal),
        "exit status after signal {signal}"
    );
    assert!(
        processes_with(&marker_str).is_empty(),
        "a workload process survived"
    );
    assert!(
        cgroups_of(child.id()).is_empty(),
        "a cgroup survived: {:?}",
        cgroups_of(child.id())
    );
}

#[test]
fn sigint_cleans_up() {
    let _host = common::shared();
    if common::skip_without_cgroups() {
        return;
    }
    interrupt_mid_trial(libc::SIGINT, "cgroup-v1");
}

#[test]
fn sigterm_cleans_up() {
    let _host = common::shared();
    if common::skip_without_cgroups() {
        return;
    }
    interrupt_mid_trial(libc::SIGTERM, "cgroup-v1");
}

#[test]
fn sigterm_cleans_up_under_the_affinity_fallback() {
    let _host = common::shared();
    interrupt_mid_trial(libc::SIGTERM, "affinity");
}

#[test]
fn sigint_during_dataset_generation_leaves_nothing() {
    let _host = common::shared();
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("images");
    let child = synergy()
        .args(["dataset", "gen", "--kind", "image", "--size", "2GiB"])
        .arg(&dir)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until files are being written into the temporary directory.
    wait_for(Duration::from_secs(20), "generation never started", || {
        std::fs::read_dir(parent.path()).unwrap().count() > 0
    });
    std::thread::sleep(Duration::from_millis(500));
    signal_leaves_nothing(child, libc::SIGINT, parent.path());
}

/// Polls `ready` every 20 ms until it holds, failing with `never` after `limit`.
fn wait_for(limit: Duration, never: &str, ready: impl Fn() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(start.elapsed() < limit, "{never}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends `signal` to `child`, which must end with the shell's status for it, leaving `dir` empty.
fn signal_leaves_nothing(mut child: std::process::Child, signal: i32, dir: &std::path::Path) {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, signal) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(128 + signal));
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// A `simulate --out` run keeps its sorted jobs in unnamed temporary files in its staging directory
/// (docs/architecture.md §5.1, "Cost of a round"); SIGTERM while they exist leaves neither the staging
/// directory nor the output.
#[test]
fn sigterm_while_simulate_spools_jobs_to_disk_leaves_nothing() {
    let _host = common::shared();
    let parent = tempfile::tempdir().unwrap();
    let out = parent.path().join("out");
    let child = synergy()
        .args([
            "simulate",
            "--multi-gpu",
            "--servers",
            "800",
            "--load",
            "225",
            "--jobs",
            "400000",
            "--mechanism",
            "proportional",
            "--out",
        ])
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let staging = parent.path().join(".out.writing");
    let spooled = || {
        std::fs::read_dir(format!("/proc/{}/fd", child.id()))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|fd| std::fs::read_link(fd.path()).ok())
            .any(|p| p.starts_with(&staging) && p.to_string_lossy().ends_with("(deleted)"))
    };
    wait_for(
        Duration::from_secs(120),
        "the run never put rows on disk",
        spooled,
    );
    signal_leaves_nothing(child, libc::SIGTERM, parent.path());
}
