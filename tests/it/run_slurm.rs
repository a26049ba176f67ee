//! `synergy run --backend slurm` against the real daemons `scripts/slurm-setup.sh` starts (one node, two
//! emulated GPUs as GRES): a small queue completes with every running job holding, in
//! `scontrol show job`, exactly the cores, memory and GPUs the executor planned for it; a job whose
//! allocation changes at a round boundary is resubmitted and continues from its saved progress. Each
//! ends with no job of the run left in Slurm and no process left. Without a running cluster these tests
//! fail and say how to start one.

use crate::common;

use crate::common::{finish, job, processes_with, serial, synergy, RunSetup};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};
use synergy::exec::slurm::Slurm;

/// The local cluster, or a failure that says how to start it.
fn cluster() {
    if let Err(e) = Slurm::new().ping() {
        panic!("these tests need a running Slurm cluster: {e}");
    }
}

/// The shared run setup with the Slurm backend.
struct Setup(RunSetup);

impl std::ops::Deref for Setup {
    type Target = RunSetup;
    fn deref(&self) -> &RunSetup {
        &self.0
    }
}

impl Setup {
    fn new() -> Setup {
        Setup(RunSetup::new())
    }

    fn start(&self, jobs: &Path, args: &[&str]) -> Child {
        self.0
            .start(jobs, &[&["--backend", "slurm"], args].concat())
    }

    fn state(&self) -> Option<serde_json::Value> {
        let text = std::fs::read_to_string(self.path().join("jobs.state.json")).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Samples done by `job` as its workload last saved them.
    fn saved_samples(&self, job: &str) -> Option<u64> {
        let p = self.path().join(format!("jobs.state.json.jobs/{job}.json"));
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok()?;
        v["samples_done"].as_u64()
    }

    /// Asserts that Slurm holds no unfinished job of executor `pid` and no workload of this setup runs.
    fn assert_clean(&self, pid: u32) {
        let prefix = format!("synergy-run-{pid}-");
        let left: Vec<_> = Slurm::new()
            .jobs_named(&prefix)
            .unwrap()
            .into_iter()
            .filter(|j| !j.state.is_finished())
            .collect();
        assert!(left.is_empty(), "Slurm jobs left: {left:?}");
        let out = Command::new("squeue")
            .args(["--noheader", "--format=%j"])
            .output()
            .unwrap();
        let queue = String::from_utf8_lossy(&out.stdout);
        assert!(!queue.contains(&prefix), "squeue still lists: {queue}");
        let procs = processes_with(&self.path().display().to_string());
        assert!(procs.is_empty(), "processes left: {procs:?}");
    }
}

/// What `scontrol show job --details -o ID` says: (JobState, NumCPUs, memory in MiB, GPUs).
fn scontrol_job(id: &str) -> Option<(String, u32, u64, u32)> {
    let out = Command::new("scontrol")
        .args(["show", "job", "--details", "-o", id])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let f: BTreeMap<&str, &str> = text
        .split_whitespace()
        .filter_map(|w| w.split_once('='))
        .collect();
    let tres: BTreeMap<&str, &str> = f
        .get("TRES")?
        .split(',')
        .filter_map(|kv| kv.split_once('='))
        .collect();
    let mem = tres.get("mem").and_then(|m| {
        let (n, unit) = m.split_at(m.len() - 1);
        let n: f64 = n.parse().ok()?;
        Some(match unit {
            "M" => n,
            "G" => n * 1024.0,
            "T" => n * 1024.0 * 1024.0,
            _ => return None,
        } as u64)
    })?;
    // Allocated GRES (`JOB_GRES=gpu:N`, with `--details`); `TRES` lists it only when Slurm accounts it.
    let gpus = match f.get("JOB_GRES").filter(|g| **g != "(null)") {
        Some(g) => g
            .strip_prefix("gpu:")?
            .split(['(', ','])
            .next()?
            .parse()
            .ok()?,
        None => 0,
    };
    Some((
        f.get("JobState")?.to_string(),
        f.get("NumCPUs")?.parse().ok()?,
        mem,
        gpus,
    ))
}

/// One sighting of a running job: its Slurm id, the planned (cores, MiB, GPUs) and Slurm's.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    job: String,
    id: String,
    planned: (u32, u64, u32),
    slurm: (u32, u64, u32),
    saved_samples: u64,
}

/// Watches the run until the child exits: every job the state file says runs is looked up in Slurm,
/// and while Slurm says it runs, what it holds is recorded beside what the executor planned.
fn watch(s: &Setup, child: &mut Child) -> Vec<Seen> {
    let mut seen = Vec::new();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() && start.elapsed() < Duration::from_secs(180) {
        let Some(state) = s.state() else {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        };
        for j in state["jobs"].as_array().unwrap() {
            let (Some(id), Some(a)) = (j["handle"]["backend_id"].as_str(), j.get("allocation"))
            else {
                continue;
            };
            // One node: one part.
            let parts = a["parts"].as_array().unwrap();
            assert_eq!(parts.len(), 1, "{a}");
            let p = &parts[0];
            let planned_cpus = p["cpus"].as_f64().unwrap();
            assert_eq!(planned_cpus.fract(), 0.0, "whole cores on Slurm: {a}");
            let planned = (
                planned_cpus as u32,
                p["memory"].as_u64().unwrap() >> 20,
                p["gpus"].as_array().unwrap().len() as u32,
            );
            let Some((st, cpus, mem, gpus)) = scontrol_job(id) else {
                continue;
            };
            // The record may be a moment old: compare only while the executor still names this job.
            let current = s.state().is_some_and(|now| {
                now["jobs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|k| k["handle"]["backend_id"] == id && k["allocation"] == *a)
            });
            if st == "RUNNING" && current {
                let name = j["name"].as_str().unwrap().to_string();
                seen.push(Seen {
                    saved_samples: s.saved_samples(&name).unwrap_or(0),
                    job: name,
                    id: id.to_string(),
                    planned,
                    slurm: (cpus, mem, gpus),
                });
            }
        }
        std::thread::sleep(Duration::from_millis(150));
    }
    seen
}

#[test]
fn a_small_queue_completes_on_slurm_with_the_planned_cores_memory_and_gpus() {
    cluster();
    let _g = serial();
    let s = Setup::new();
    let image = s.spec("img", "image", 900);
    let text = s.spec("txt", "text", 1600);
    let jobs = s.jobs(&[
        ("image-a", &image, "image", 5000, 0.0),
        ("text-b", &text, "text", 8000, 0.0),
        ("image-c", &image, "image", 2400, 1.0),
    ]);
    // The plan alone: whole cores within the node's, nothing submitted.
    let out = synergy()
        .arg("run")
        .arg(&jobs)
        .args(["--backend", "slurm", "--round", "3", "--dry-run", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let node_cpus = Slurm::new().nodes().unwrap()[0].cpus as f64;
    for r in plan.as_array().unwrap() {
        let cpus: Vec<f64> = r["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|j| j["allocation"]["parts"][0]["cpus"].as_f64())
            .collect();
        assert!(cpus.iter().all(|c| c.fract() == 0.0 && *c >= 1.0), "{r}");
        assert!(cpus.iter().sum::<f64>() <= node_cpus, "{r}");
    }

    // Least attained service first: the late job takes a turn, so one of the others is paused (stopped,
    // as a suspended Slurm job would keep its GPU) and later submitted again.
    let mut child = s.start(
        &jobs,
        &["--round", "3", "--mechanism", "tune", "--policy", "las"],
    );
    let pid = child.id();
    let seen = watch(&s, &mut child);
    let (report, stderr, code) = finish(child);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("paused"), "{stderr}");
    assert!(stderr.contains("resumed"), "{stderr}");
    for name in ["image-a", "text-b", "image-c"] {
        assert_eq!(job(&report, name)["status"], "done", "{report}\n{stderr}");
        assert!(
            seen.iter().any(|x| x.job == name),
            "{name} never seen running in Slurm: {seen:?}\n{stderr}"
        );
    }
    assert_eq!(report["backend"], "slurm");
    for x in &seen {
        assert_eq!(x.slurm, x.planned, "Slurm holds what was planned: {x:?}");
    }
    s.assert_clean(pid);
}

#[test]
fn a_changed_allocation_resubmits_the_job_and_it_resumes_from_its_progress() {
    cluster();
    let _g = serial();
    let s = Setup::new();
    let image = s.spec("img", "image", 900);
    // Tune gives a lone image job its best case (1.5 cores, two whole ones on Slurm); when the second
    // arrives both get one core: the first is stopped and submitted again with one.
    let jobs = s.jobs(&[
        ("first", &image, "image", 8000, 0.0),
        ("second", &image, "image", 1600, 3.0),
    ]);
    let mut child = s.start(&jobs, &["--round", "2", "--mechanism", "tune"]);
    let pid = child.id();
    let mut samples: Vec<u64> = Vec::new();
    let seen = {
        // Sample the first job's saved progress alongside the Slurm sightings.
        let seen = watch(&s, &mut child);
        samples.extend(
            seen.iter()
                .filter(|x| x.job == "first")
                .map(|x| x.saved_samples),
        );
        seen
    };
    let (report, stderr, code) = finish(child);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(job(&report, "first")["status"], "done", "{stderr}");
    assert_eq!(job(&report, "second")["status"], "done", "{stderr}");
    for x in &seen {
        assert_eq!(x.slurm, x.planned, "Slurm holds what was planned: {x:?}");
    }
    let first: Vec<&Seen> = seen.iter().filter(|x| x.job == "first").collect();
    let ids: Vec<&str> = first
        .iter()
        .map(|x| x.id.as_str())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    assert!(
        ids.len() >= 2,
        "first was never resubmitted: {first:?}\n{stderr}"
    );
    let two = first.iter().position(|x| x.slurm.0 == 2);
    let one = first.iter().rposition(|x| x.slurm.0 == 1);
    let (Some(two), Some(one)) = (two, one) else {
        panic!("first ran with 2 cores and then with 1: {first:?}\n{stderr}");
    };
    assert!(two < one, "{first:?}");
    assert_ne!(first[two].id, first[one].id, "a new submission: {first:?}");
    // The resubmitted job continued: its saved progress never went back, and under its second
    // submission it was already past zero.
    assert!(
        samples.windows(2).all(|w| w[0] <= w[1]),
        "progress went back: {samples:?}"
    );
    let second_id = &first[one].id;
    let at_resubmission = first
        .iter()
        .find(|x| &x.id == second_id)
        .unwrap()
        .saved_samples;
    assert!(
        at_resubmission > 0,
        "the resubmitted job started from zero: {first:?}"
    );
    assert!(
        stderr.contains("restarted from its saved progress"),
        "{stderr}"
    );
    assert!(job(&report, "first")["restarts"].as_u64().unwrap() >= 1);
    // Its log holds one summary line per submission, and the last one ends at the job's work.
    let err = std::fs::read_to_string(s.path().join("jobs.state.json.jobs/first.err")).unwrap();
    let runs = err.lines().filter(|l| l.contains("samples/s")).count();
    assert!(runs >= 2, "one summary per submission: {err}");
    assert!(s.saved_samples("first").unwrap() >= 8000);
    s.assert_clean(pid);
}

#[test]
fn a_resumed_run_cancels_the_jobs_its_killed_executor_left_and_continues() {
    cluster();
    let _g = serial();
    let s = Setup::new();
    let image = s.spec("img", "image", 900);
    let jobs = s.jobs(&[
        ("a", &image, "image", 6000, 0.0),
        ("b", &image, "image", 6000, 0.0),
    ]);
    let args = ["--round", "2", "--mechanism", "tune"];
    let mut child = s.start(&jobs, &args);
    let pid = child.id();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60)
        && !(s.saved_samples("a").unwrap_or(0) > 0 && s.saved_samples("b").unwrap_or(0) > 0)
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap(); // SIGKILL: nothing is cancelled
    child.wait().unwrap();
    let prefix = format!("synergy-run-{pid}-");
    let orphans: Vec<_> = Slurm::new()
        .jobs_named(&prefix)
        .unwrap()
        .into_iter()
        .filter(|j| !j.state.is_finished())
        .collect();
    assert_eq!(
        orphans.len(),
        2,
        "the killed executor's jobs run on: {orphans:?}"
    );
    let before = (s.saved_samples("a").unwrap(), s.saved_samples("b").unwrap());

    let resumed = s.start(&jobs, &[&args[..], &["--resume"]].concat());
    let pid2 = resumed.id();
    let (report, stderr, code) = finish(resumed);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("removed 2 job(s) left by executor {pid}")),
        "{stderr}"
    );
    for (name, done) in [("a", before.0), ("b", before.1)] {
        assert_eq!(job(&report, name)["status"], "done", "{stderr}");
        assert!(
            stderr.contains(&format!("{name:<16}")) && stderr.contains("started from"),
            "{stderr}"
        );
        assert!(s.saved_samples(name).unwrap() >= done.max(6000));
    }
    s.assert_clean(pid);
    s.assert_clean(pid2);
}

#[test]
fn flags_of_the_other_backend_are_input_errors() {
    let _host = common::shared();
    let jobs = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/jobs-mixed.toml");
    let jobs = jobs.to_str().unwrap();
    common::assert_input_error(
        &["run", jobs, "--backend", "slurm", "--gpus", "2"],
        &["--gpus", "GRES"],
    );
    common::assert_input_error(&["run", jobs, "--node", "vm"], &["--node", "Slurm"]);
}
