//! `synergy run` on the local backend, end to end with real processes and cgroups: pausing and resuming
//! with the freezer, a live cpuset change at a round boundary, a crashing job's retries, and resuming
//! after `kill -9` of the executor. Each ends with no process and no cgroup of the run left behind.

use crate::common;

use crate::common::{
    finish, job, processes_with, profiles, serial, skip_without_cgroups, RunSetup,
};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod refine;

/// The shared run setup, and what these tests check of it.
type Setup = RunSetup;

trait LocalChecks {
    fn assert_clean(&self, pid: u32);
}

impl LocalChecks for RunSetup {
    /// Asserts that no workload of this setup runs any more and no cgroup of executor `pid` is left.
    fn assert_clean(&self, pid: u32) {
        let marker = self.path().display().to_string();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let left = processes_with(&marker);
            if left.is_empty() {
                break;
            }
            assert!(Instant::now() < deadline, "processes left: {left:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
        let left = run_cgroups(pid);
        assert!(left.is_empty(), "cgroups left: {left:?}");
    }
}

/// Every cgroup directory of executor `pid` under any hierarchy.
fn run_cgroups(pid: u32) -> Vec<PathBuf> {
    let prefix = format!("synergy-run-{pid}-");
    let mut found = Vec::new();
    for ctl in std::fs::read_dir("/sys/fs/cgroup").unwrap().flatten() {
        let mut stack = vec![ctl.path()];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    if e.file_name().to_string_lossy().starts_with(&prefix) {
                        found.push(e.path());
                    }
                    stack.push(e.path());
                }
            }
        }
    }
    found
}

/// The directory job `job` of executor `pid` has (or will have) in the `ctl` hierarchy: under this
/// process's own cgroup there, as the executor nests its cgroups under its own.
fn cgroup_dir(pid: u32, job: &str, ctl: &str) -> PathBuf {
    let own = read(Path::new("/proc/self/cgroup")).unwrap_or_default();
    let rel = own
        .lines()
        .filter_map(|l| l.split_once(':').and_then(|(_, rest)| rest.split_once(':')))
        .find(|(ctls, _)| ctls.split(',').any(|c| c == ctl))
        .map(|(_, path)| path.trim_start_matches('/').to_string())
        .unwrap_or_default();
    Path::new("/sys/fs/cgroup")
        .join(ctl)
        .join(rel)
        .join(format!("synergy-run-{pid}-{job}"))
}

fn read(p: &Path) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

fn samples_done(state: &Path) -> Option<u64> {
    let v: serde_json::Value = serde_json::from_str(&read(state)?).ok()?;
    v["samples_done"].as_u64()
}

#[test]
fn a_job_left_out_of_a_round_is_frozen_and_then_continues() {
    if skip_without_cgroups() {
        return;
    }
    let _g = serial();
    let s = Setup::new();
    let spec = s.spec("txt", "text", 1600);
    // One GPU, least attained service first: the two jobs take turns, one frozen while the other runs.
    let jobs = s.jobs(&[
        ("a", &spec, "text", 6400, 0.0),
        ("b", &spec, "text", 6400, 0.0),
    ]);
    let child = s.start(&jobs, &["--gpus", "1", "--policy", "las", "--round", "2"]);
    let pid = child.id();
    let freezer = cgroup_dir(pid, "a", "freezer").join("freezer.state");
    let progress = s.path().join("jobs.state.json.jobs/a.json");
    // (frozen, samples done) of job a, sampled while the run goes on.
    let mut seen: Vec<(bool, Option<u64>)> = Vec::new();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        if let Some(st) = read(&freezer) {
            seen.push((st == "FROZEN", samples_done(&progress)));
        } else if !seen.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let (report, stderr, code) = finish(child);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("paused"), "{stderr}");
    assert!(stderr.contains("resumed"), "{stderr}");
    // While frozen, a's progress stood still; after each thaw it moved on.
    let frozen: Vec<Option<u64>> = seen.iter().filter(|x| x.0).map(|x| x.1).collect();
    assert!(frozen.len() >= 5, "job a was never seen frozen: {seen:?}");
    let mut runs = seen.split(|x| !x.0).filter(|r| r.len() >= 3);
    let run = runs.next().expect("a frozen stretch of several samples");
    assert!(
        run.iter().all(|x| x.1 == run[0].1),
        "progress moved while frozen: {seen:?}"
    );
    let after = seen
        .iter()
        .skip_while(|x| !x.0)
        .skip_while(|x| x.0)
        .filter_map(|x| x.1)
        .max();
    assert!(after > run[0].1, "no progress after thawing: {seen:?}");
    for name in ["a", "b"] {
        let j = job(&report, name);
        assert_eq!(j["status"], "done", "{j}");
        // Four seconds of work each, shared 1:1: each takes about twice as long as alone.
        let jct = j["real_jct_s"].as_f64().unwrap();
        assert!(
            jct > 5.0,
            "{name}: JCT {jct} s without waiting for its turn"
        );
    }
    s.assert_clean(pid);
}

#[test]
fn a_round_boundary_changes_the_cpuset_and_quota_of_a_running_job_in_place() {
    if skip_without_cgroups() {
        return;
    }
    let _g = serial();
    let s = Setup::new();
    let spec = s.spec("img", "image", 900);
    // Tune gives a lone image job its best case (the shipped profile's per-GPU demand, between one and
    // two cores: cores 0-1 under a quota); when the second arrives both are demoted to one whole core each.
    let profile: serde_json::Value =
        serde_json::from_str(&read(&profiles().join("image.json")).unwrap()).unwrap();
    let best = profile["demand"]["per_gpu"]["cpus"].as_f64().unwrap();
    assert!(
        best > 1.0 && best < 2.0,
        "the image profile's demand: {best} cores"
    );
    let best_quota = (best * 100_000.0).round() as u64;
    let jobs = s.jobs(&[
        ("first", &spec, "image", 9000, 0.0),
        ("second", &spec, "image", 1500, 3.0),
    ]);
    let child = s.start(
        &jobs,
        &[
            "--gpus",
            "2",
            "--cpus",
            "2",
            "--mechanism",
            "tune",
            "--round",
            "2",
        ],
    );
    let pid = child.id();
    let dir = |ctl: &str| cgroup_dir(pid, "first", ctl);
    let mut seen: Vec<(String, String, String)> = Vec::new();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(40) {
        let cpus = read(&dir("cpuset").join("cpuset.cpus"));
        let quota = read(&dir("cpu").join("cpu.cfs_quota_us"));
        let procs = read(&dir("cpuset").join("cgroup.procs"));
        match (cpus, quota, procs) {
            (Some(c), Some(q), Some(p)) if !p.is_empty() => {
                let leader = p.lines().next().unwrap_or_default().to_string();
                if seen.last() != Some(&(c.clone(), q.clone(), leader.clone())) {
                    seen.push((c, q, leader));
                }
            }
            _ if !seen.is_empty() => break,
            _ => {}
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let (report, stderr, code) = finish(child);
    assert_eq!(code, Some(0), "{stderr}");
    let first = seen.first().expect("the job's cgroup was seen");
    // Under a CPU quota on the whole test run (scripts/ci-stress.sh --half-speed) the job's quota is
    // capped at the tightest one above it, which cgroup v1 requires.
    let enclosing = dir("cpu")
        .ancestors()
        .skip(1)
        .map_while(|d| {
            let q: f64 = read(&d.join("cpu.cfs_quota_us"))?.parse().ok()?;
            let p: f64 = read(&d.join("cpu.cfs_period_us"))?.parse().ok()?;
            Some((q > 0.0).then(|| (q / p * 100_000.0).floor() as u64))
        })
        .flatten()
        .min();
    let best_quota = match enclosing {
        Some(cap) => best_quota.min(cap),
        None => best_quota,
    }
    .to_string();
    assert_eq!(
        (first.0.as_str(), first.1.as_str()),
        ("0-1", best_quota.as_str()),
        "{seen:?}"
    );
    let demoted = seen
        .iter()
        .find(|x| x.1 == "-1")
        .unwrap_or_else(|| panic!("never demoted to one whole core: {seen:?}\n{stderr}"));
    assert!(demoted.0 == "0" || demoted.0 == "1", "{seen:?}");
    // The same process throughout: the change was made in place.
    assert!(seen.iter().all(|x| x.2 == first.2), "{seen:?}");
    assert!(stderr.contains("resized live"), "{stderr}");
    assert_eq!(job(&report, "first")["restarts"], 0);
    assert_eq!(job(&report, "second")["status"], "done");
    s.assert_clean(pid);
}

#[test]
fn a_crashing_job_is_retried_and_one_that_keeps_crashing_fails_with_its_stderr() {
    if skip_without_cgroups() {
        return;
    }
    let _g = serial();
    let s = Setup::new();
    let data = s.dataset("text");
    // Fails on its first two starts, then trains.
    let flaky = s.path().join("flaky.toml");
    std::fs::write(
        &flaky,
        format!(
            r#"name = "flaky"
command = ["sh", "-c", "n=$(cat {{spec_dir}}/starts 2>/dev/null || echo 0); echo $((n+1)) > {{spec_dir}}/starts; if [ $n -lt 2 ]; then echo flaky-start-$n >&2; exit 3; fi; exec {{synergy}} workload run text --dataset {d} --batch-size 32 --gpu-rate 2000 --max-samples 3200"]
batch_size = 32
footprint = "96MiB"
"#,
            d = data.display()
        ),
    )
    .unwrap();
    let broken = s.path().join("broken.toml");
    std::fs::write(
        &broken,
        format!(
            r#"name = "broken"
command = ["sh", "-c", "echo cannot-open-{d} >&2; exit 7"]
batch_size = 32
footprint = "96MiB"
"#,
            d = data.display()
        ),
    )
    .unwrap();
    let jobs = s.jobs(&[
        ("flaky", &flaky, "text", 3200, 0.0),
        ("broken", &broken, "text", 3200, 0.0),
    ]);
    let child = s.start(
        &jobs,
        &["--gpus", "2", "--round", "2", "--max-retries", "2"],
    );
    let pid = child.id();
    let (report, stderr, code) = finish(child);
    assert_eq!(code, Some(1), "a failed job makes the run fail: {stderr}");
    let f = job(&report, "flaky");
    assert_eq!(f["status"], "done", "{f}\n{stderr}");
    assert_eq!(f["retries"], 2);
    assert_eq!(read(&s.path().join("starts")).as_deref(), Some("3"));
    assert!(stderr.contains("flaky-start-0"), "{stderr}");
    assert!(stderr.contains("flaky-start-1"), "{stderr}");
    let b = job(&report, "broken");
    assert_eq!(b["status"], "failed", "{b}");
    assert_eq!(b["retries"], 2);
    let err = b["error"].as_str().unwrap();
    assert!(err.contains("exit status 7"), "{err}");
    assert!(err.contains("cannot-open-"), "{err}");
    s.assert_clean(pid);
}

#[test]
fn a_run_resumes_after_its_executor_is_killed() {
    if skip_without_cgroups() {
        return;
    }
    let _g = serial();
    let s = Setup::new();
    let spec = s.spec("txt", "text", 1600);
    // One GPU and LAS: when the executor dies one job is running and the other frozen.
    let jobs = s.jobs(&[
        ("a", &spec, "text", 9600, 0.0),
        ("b", &spec, "text", 9600, 0.0),
    ]);
    let args = ["--gpus", "1", "--policy", "las", "--round", "2"];
    let mut child = s.start(&jobs, &args);
    let pid = child.id();
    let progress = |n: &str| samples_done(&s.path().join(format!("jobs.state.json.jobs/{n}.json")));
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30)
        && !(progress("a").unwrap_or(0) > 0 && progress("b").unwrap_or(0) > 0)
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(700));
    child.kill().unwrap(); // SIGKILL: no cleanup at all
    child.wait().unwrap();
    let before = (progress("a").unwrap(), progress("b").unwrap());
    // The killed executor left its cgroups behind (and the frozen job's process, which survives the
    // parent-death signal until its cgroup is thawed).
    assert!(!run_cgroups(pid).is_empty());
    assert!(before.0 > 0 && before.1 > 0, "{before:?}");
    assert!(before.0 < 9600 && before.1 < 9600, "{before:?}");

    let resumed = s.start(&jobs, &[&args[..], &["--resume"]].concat());
    let pid2 = resumed.id();
    let (report, stderr, code) = finish(resumed);
    assert_eq!(code, Some(0), "{stderr}");
    // The killed executor's cgroups (and its frozen job) are reaped before the run resumes.
    assert!(
        stderr.contains(&format!("left by dead pid {pid}")),
        "{stderr}"
    );
    // Each job was started again from the progress it had saved, not from zero.
    for (n, had) in [("a", before.0), ("b", before.1)] {
        let line = stderr
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{n} ")) && l.contains("started from"))
            .unwrap_or_else(|| panic!("{n} not restarted from its progress:\n{stderr}"));
        let from: u64 = line
            .split("started from ")
            .nth(1)
            .and_then(|t| t.split_whitespace().next())
            .and_then(|t| t.parse().ok())
            .unwrap();
        assert!(from >= had, "{n}: from {from}, had {had}");
    }
    for n in ["a", "b"] {
        let j = job(&report, n);
        assert_eq!(j["status"], "done", "{j}");
        assert!(j["real_jct_s"].as_f64().unwrap() > 0.0);
    }
    // The jobs went on from their saved progress: the resumed run did less than all the work again.
    assert!(
        report["makespan_s"].as_f64().unwrap() < 30.0,
        "{report}\n{stderr}"
    );
    let after = (progress("a").unwrap(), progress("b").unwrap());
    assert!(after.0 >= 9600 && after.1 >= 9600, "{after:?}");
    // Nothing of either executor is left: the killed one's cgroups were removed on resume.
    s.assert_clean(pid);
    s.assert_clean(pid2);
}

#[test]
fn bad_job_lists_and_flags_are_input_errors_naming_the_field() {
    let _host = common::shared();
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("jobs.toml");
    let write = |text: &str| std::fs::write(&p, text).unwrap();
    let path = p.display().to_string();
    write("[[job]]\nname = \"a\"\nworkload = \"text\"\n");
    common::assert_input_error(
        &["run", &path, "--gpus", "1", "--dry-run"],
        &[&path, "job[0]"],
    );
    let profile = profiles().join("text.json").display().to_string();
    write(&format!(
        "[[job]]\nname = \"a\"\nworkload = \"text\"\nprofile = \"{profile}\"\nsamples = 10\ngpus = 3\n"
    ));
    common::assert_input_error(
        &["run", &path, "--gpus", "2", "--dry-run"],
        &["job[0].gpus", "3 GPUs"],
    );
    write(&format!(
        "[[job]]\nname = \"a\"\nworkload = \"text\"\nprofile = \"{profile}\"\nsamples = 10\n"
    ));
    common::assert_input_error(
        &[
            "run",
            &path,
            "--gpus",
            "1",
            "--mechanism",
            "fastest",
            "--dry-run",
        ],
        &["--mechanism", "fastest"],
    );
    common::assert_input_error(&["run", &path, "--gpus", "0", "--dry-run"], &["--gpus"]);
    // A dry run plans without launching: one round, the job on GPU 0.
    let out = common::run(&["run", &path, "--gpus", "1", "--dry-run"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        text.contains("round 1 at 0 s") && text.contains("gpu 0"),
        "{text}"
    );
}

#[test]
fn sigterm_stops_every_job_removes_every_cgroup_and_saves_the_state() {
    if skip_without_cgroups() {
        return;
    }
    let _g = serial();
    let s = Setup::new();
    let spec = s.spec("txt", "text", 1600);
    let jobs = s.jobs(&[
        ("a", &spec, "text", 64000, 0.0),
        ("b", &spec, "text", 64000, 0.0),
    ]);
    let child = s.start(&jobs, &["--gpus", "2", "--round", "2"]);
    let pid = child.id();
    let progress = s.path().join("jobs.state.json.jobs/a.json");
    let start = Instant::now();
    while samples_done(&progress).unwrap_or(0) == 0 && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(100));
    }
    // SAFETY: kill on the pid of our own child.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGTERM) }, 0);
    let (report, stderr, code) = finish(child);
    assert_eq!(code, Some(128 + libc::SIGTERM), "{stderr}");
    assert_eq!(report["interrupted"], libc::SIGTERM);
    let state: serde_json::Value =
        serde_json::from_str(&read(&s.path().join("jobs.state.json")).unwrap()).unwrap();
    for j in state["jobs"].as_array().unwrap() {
        assert_eq!(j["status"], "waiting", "{j}");
        assert!(j["samples_done"].as_u64().unwrap() > 0, "{j}");
        assert!(j.get("handle").is_none(), "{j}");
    }
    // The jobs saved their own progress when they were stopped.
    assert!(samples_done(&progress).unwrap() > 0);
    s.assert_clean(pid);
}

#[test]
fn simulate_predicts_a_job_list_and_tune_beats_proportional_on_the_mixed_queue() {
    let _host = common::shared();
    let list = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/jobs-mixed.toml");
    let list = list.display().to_string();
    let out = common::run(&[
        "simulate",
        "--jobs-list",
        &list,
        "--servers",
        "1",
        "--server-gpus",
        "2",
        "--server-cpus",
        "2",
        "--server-mem-gb",
        "25",
        "--round",
        "10",
        "--mechanism",
        "proportional,tune",
        "--json",
    ]);
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = v.as_array().unwrap();
    let mean = |m: &str| {
        let r = runs.iter().find(|r| r["mechanism"] == m).unwrap();
        let jobs = r["jobs"].as_array().unwrap();
        assert_eq!(jobs.len(), 8);
        for j in jobs {
            // No job beats its own work at the emulated GPU's rate (image 40000 / 900, text 24000 / 600).
            assert!(j["predicted_jct_s"].as_f64().unwrap() >= 40.0, "{j}");
        }
        r["mean_predicted_jct_s"].as_f64().unwrap()
    };
    let (prop, tune) = (mean("proportional"), mean("tune"));
    // How much tune gains depends on the image profile's demand (4.8% at 1.25 cores per GPU).
    assert!(tune < prop * 0.98, "tune {tune} s, proportional {prop} s");
}

/// A job wider than one server is predicted spread over two, as `run` places it, and refused only when
/// it is wider than the whole cluster.
#[test]
fn simulate_spreads_a_job_list_job_wider_than_a_server_and_refuses_one_wider_than_the_cluster() {
    let _host = common::shared();
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("wide.toml");
    std::fs::write(
        &list,
        format!(
            "profiles = \"{root}/profiles\"\n[[job]]\nname = \"wide\"\nworkload = \"{root}/workloads/text.toml\"\nsamples = 24000\ngpus = 3\n",
            root = env!("CARGO_MANIFEST_DIR")
        ),
    )
    .unwrap();
    let list = list.display().to_string();
    let simulate = |servers: &str| {
        common::run(&[
            "simulate",
            "--jobs-list",
            &list,
            "--servers",
            servers,
            "--server-gpus",
            "2",
            "--server-cpus",
            "2",
            "--server-mem-gb",
            "25",
            "--mechanism",
            "proportional,tune",
            "--json",
        ])
    };
    let out = simulate("2");
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = v.as_array().unwrap();
    assert_eq!(runs.len(), 2, "{v}");
    for r in runs {
        let jct = r["jobs"][0]["predicted_jct_s"].as_f64().unwrap();
        assert!(jct.is_finite() && jct > 0.0, "{r}");
    }
    common::assert_input_error(
        &[
            "simulate",
            "--jobs-list",
            &list,
            "--servers",
            "1",
            "--server-gpus",
            "2",
        ],
        &["wide.toml", "job[0].gpus", "the cluster has 2"],
    );
}

#[test]
fn a_run_holds_its_cores_in_the_ledger_and_a_measure_needing_them_is_refused_naming_it() {
    if skip_without_cgroups() {
        return;
    }
    let _g = serial();
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        common::skip("needs two cores");
        return;
    }
    let s = Setup::new();
    let runtime = tempfile::tempdir().unwrap();
    let spec = s.spec("txt", "text", 1600);
    let jobs = s.jobs(&[
        ("a", &spec, "text", 6400, 0.0),
        ("b", &spec, "text", 6400, 0.0),
    ]);
    let child = common::synergy()
        .arg("run")
        .arg(&jobs)
        .args(["--gpus", "1", "--cpus", "2", "--round", "2", "--json"])
        .env("SYNERGY_RUNTIME_DIR", runtime.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    let held_by_run = || common::cores_held_by(runtime.path(), &pid);
    let deadline = Instant::now() + Duration::from_secs(60);
    while held_by_run() < 2 {
        assert!(Instant::now() < deadline, "the run never claimed its cores");
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = common::synergy()
        .arg("measure")
        .arg(&spec)
        .args(["--cpus", "2", "--warm"])
        .env("SYNERGY_RUNTIME_DIR", runtime.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("held by pid {pid} (`synergy run")),
        "{stderr}"
    );
    let (report, stderr, code) = finish(child);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(job(&report, "a")["status"], "done", "{report}");
    // The run let go of its cores when it ended.
    assert_eq!(held_by_run(), 0);
}

/// A job given a profile that asks less memory than it runs in (the text profile asks about 14 MiB; the
/// image pipeline needs more) and whose spec declares no footprint is killed by the OOM killer at each start:
/// the run says so, and what to do, rather than a bare signal 9.
#[test]
fn a_job_killed_for_memory_is_reported_with_what_to_do() {
    if skip_without_cgroups() {
        return;
    }
    let _g = serial();
    let s = Setup::new();
    let spec = s.spec("image", "image", 900);
    let text = read(&spec).unwrap().replace("footprint = \"96MiB\"\n", "");
    std::fs::write(&spec, text).unwrap();
    let jobs = s.jobs(&[("tight", &spec, "text", 3200, 0.0)]);
    let child = s.start(&jobs, &["--gpus", "1", "--cpus", "1", "--round", "2"]);
    let (report, stderr, _) = finish(child);
    assert_eq!(job(&report, "tight")["status"], "failed", "{stderr}");
    // The memory it held is the text profile's ask, which moves each time that profile is measured.
    let killed = stderr
        .lines()
        .find(|l| l.contains("crashed (killed by signal 9: the kernel's OOM killer, at "))
        .unwrap_or_else(|| panic!("no OOM kill reported in:\n{stderr}"));
    assert!(killed.contains(" MiB of memory); retry 1 of 2"), "{killed}");
    for want in ["declare `footprint` in", "text.json asks"] {
        assert!(stderr.contains(want), "`{want}` missing from:\n{stderr}");
    }
}
