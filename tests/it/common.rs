//! Helpers shared by the integration tests: running the real binary, shared datasets, and the host lock
//! that keeps throughput measurements alone on this host.

use std::cell::Cell;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// Who holds the host: tests that measure throughput (or hold the one Slurm node's cores) alone, any
/// number of other tests together.
///
/// All the integration tests are one binary (`tests/it`), so the harness runs tests of every area side by
/// side, where separate binaries used to run one after another: without this, a CPU-heavy simulation or
/// chart test could share the two cores with a throughput trial. Every test therefore takes the lock,
/// [`serial`] when it measures, [`shared`] otherwise.
#[derive(Default)]
struct HostState {
    readers: usize,
    writer: bool,
    /// Exclusive holders waiting: new shared holders wait behind them, so a measuring test is not starved.
    writers_waiting: usize,
}

static HOST: Mutex<HostState> = Mutex::new(HostState {
    readers: 0,
    writer: false,
    writers_waiting: 0,
});
static HOST_CHANGED: Condvar = Condvar::new();

thread_local! {
    /// What this test's thread holds: a test that holds [`shared`] may call a helper taking [`serial`],
    /// which trades the shared hold for the exclusive one and back (a plain lock would deadlock).
    static HELD: Cell<Held> = const { Cell::new(Held::Nothing) };
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Held {
    Nothing,
    Shared,
    Exclusive,
}

fn host() -> std::sync::MutexGuard<'static, HostState> {
    HOST.lock().unwrap_or_else(|e| e.into_inner())
}

fn acquire_shared() {
    let mut h = host();
    while h.writer || h.writers_waiting > 0 {
        h = HOST_CHANGED.wait(h).unwrap_or_else(|e| e.into_inner());
    }
    h.readers += 1;
}

fn release_shared() {
    host().readers -= 1;
    HOST_CHANGED.notify_all();
}

/// A hold of the host lock, released on drop (a failing test's too, as it unwinds).
#[must_use = "the host is held only while the guard lives"]
pub struct HostGuard {
    /// What the thread held before: a nested call gives it back on drop.
    before: Held,
    /// When the hold was asked for, and how long it waited: what [`record_time`] reports.
    asked: Instant,
    waited: Duration,
}

impl HostGuard {
    fn new(before: Held, asked: Instant) -> HostGuard {
        HostGuard {
            before,
            asked,
            waited: asked.elapsed(),
        }
    }
}

/// Where CI time goes: with `SYNERGY_TEST_TIMES=FILE`, each test's outermost hold of the host appends a
/// line `TEST<TAB>serial|shared<TAB>seconds waited<TAB>seconds held` to FILE (README, "Development").
fn record_time(guard: &HostGuard, held: Held) {
    let Some(path) = std::env::var_os("SYNERGY_TEST_TIMES") else {
        return;
    };
    let name = std::thread::current().name().unwrap_or("?").to_string();
    let kind = if held == Held::Exclusive {
        "serial"
    } else {
        "shared"
    };
    let line = format!(
        "{name}\t{kind}\t{:.1}\t{:.1}\n",
        guard.waited.as_secs_f64(),
        (guard.asked.elapsed() - guard.waited).as_secs_f64()
    );
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = f.write_all(line.as_bytes());
    }
}

impl Drop for HostGuard {
    fn drop(&mut self) {
        let now = HELD.with(Cell::get);
        if self.before == Held::Nothing && now != Held::Nothing {
            record_time(self, now);
        }
        match (now, self.before) {
            (now, before) if now == before => {}
            (Held::Exclusive, before) => {
                host().writer = false;
                HOST_CHANGED.notify_all();
                if before == Held::Shared {
                    acquire_shared();
                }
            }
            (Held::Shared, _) => release_shared(),
            (Held::Nothing, _) => {}
        }
        HELD.with(|h| h.set(self.before));
    }
}

/// Holds the host alone for the rest of the test: throughput trials compete for this host's two cores,
/// and the local Slurm node has one set of cores to hand out.
pub fn serial() -> HostGuard {
    let asked = Instant::now();
    let before = HELD.with(Cell::get);
    if before == Held::Exclusive {
        return HostGuard::new(before, asked);
    }
    let mut h = host();
    if before == Held::Shared {
        h.readers -= 1;
        HOST_CHANGED.notify_all();
    }
    h.writers_waiting += 1;
    while h.writer || h.readers > 0 {
        h = HOST_CHANGED.wait(h).unwrap_or_else(|e| e.into_inner());
    }
    h.writers_waiting -= 1;
    h.writer = true;
    drop(h);
    HELD.with(|c| c.set(Held::Exclusive));
    HostGuard::new(before, asked)
}

/// Holds the host together with other tests that do not measure, for the rest of the test: a measuring
/// test waits for them, and they for it.
pub fn shared() -> HostGuard {
    let asked = Instant::now();
    let before = HELD.with(Cell::get);
    if before != Held::Nothing {
        return HostGuard::new(before, asked);
    }
    acquire_shared();
    HELD.with(|c| c.set(Held::Shared));
    HostGuard::new(before, asked)
}

/// Where datasets generated by tests live: shared by every test of a build, so each is made once.
pub fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("datasets")
}

/// The `synergy` binary with the shared data directory.
pub fn synergy() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_synergy"));
    c.env("SYNERGY_DATA_DIR", data_dir());
    c
}

/// Runs `synergy` with `args`, returning its output.
pub fn run(args: &[&str]) -> Output {
    synergy()
        .args(args)
        .output()
        .expect("the synergy binary runs")
}

/// Asserts that `synergy ARGS` fails as bad input: exit code 2, no panic, nothing on stdout, and a message
/// mentioning each of `must_mention` (the file or flag, the field).
pub fn assert_input_error(args: &[&str], must_mention: &[&str]) {
    let out = run(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    for m in must_mention {
        assert!(stderr.contains(m), "{args:?}: `{m}` not in: {stderr}");
    }
    assert!(out.stdout.is_empty(), "no partial output expected");
}

/// Runs `synergy ARGS` (which print JSON), asserting success; returns the parsed output.
pub fn run_json(args: &[&str]) -> serde_json::Value {
    let out = run(args);
    assert!(
        out.status.success(),
        "synergy {args:?} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the command prints JSON")
}

/// Runs `synergy measure ... --json`, asserting success; returns the parsed result.
pub fn measure(args: &[&str]) -> serde_json::Value {
    // `--json` goes first: a command to measure may follow `--` at the end.
    let mut all = vec!["measure", "--json"];
    all.extend_from_slice(args);
    run_json(&all)
}

/// Runs `synergy measure ... --json` until a trial is not disturbed by other work on the host (at most
/// three times, a few seconds apart). `None`, after saying why, when every run was disturbed: the
/// caller skips its throughput assertions, since a busy host says nothing about the allocation.
pub fn measure_undisturbed(args: &[&str]) -> Option<serde_json::Value> {
    for attempt in 1..=3 {
        let v = measure(args);
        if v["disturbance"]["disturbed"] != true {
            return Some(v);
        }
        eprintln!(
            "measure {args:?} was disturbed (run {attempt} of 3): {}",
            v["disturbance"]["reason"]
        );
        std::thread::sleep(std::time::Duration::from_secs(5));
    }
    skip("the host stayed busy on the trial's cores, so its throughput cannot be checked");
    None
}

/// A busy loop pinned to `core`, killed on drop: other work on a trial's cores.
pub struct Hog(std::process::Child);

impl Hog {
    /// Starts one on `core`.
    pub fn on(core: usize) -> Hog {
        let child = Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .expect("sh runs");
        let mut set = nix::sched::CpuSet::new();
        set.set(core).unwrap();
        nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(child.id() as i32), &set)
            .expect("pinning the hog");
        Hog(child)
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Throughput in samples/s and its 95% half-width from a trial result.
pub fn rate(v: &serde_json::Value) -> (f64, f64) {
    let t = &v["throughput"];
    (
        t["samples_per_s"].as_f64().expect("samples_per_s"),
        t["ci95_half_width"].as_f64().expect("ci95_half_width"),
    )
}

/// Every cgroup directory named like ours (`synergy-<pid>-<n>`) for `pid` under /sys/fs/cgroup.
pub fn cgroups_of(pid: u32) -> Vec<PathBuf> {
    let prefix = format!("synergy-{pid}-");
    let mut found = Vec::new();
    let mut stack = vec![PathBuf::from("/sys/fs/cgroup")];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                let p = e.path();
                if e.file_name().to_string_lossy().starts_with(&prefix) {
                    found.push(p.clone());
                }
                stack.push(p);
            }
        }
    }
    found
}

/// Pids whose command line contains `marker`.
pub fn processes_with(marker: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == std::process::id() {
            continue;
        }
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            if String::from_utf8_lossy(&cmd).contains(marker) {
                pids.push(pid);
            }
        }
    }
    pids
}

/// True (after saying so) when this host cannot run cgroup tests: the caller returns early. Under CI
/// the test fails instead ([`skip`]).
pub fn skip_without_cgroups() -> bool {
    !have_cgroups()
        && skip("needs root and cgroups (v1 controllers, or cgroup v2 with cpu and memory)")
}

/// Whether this run is CI's (`CI=true`), where every test must run its real check.
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Says why a test cannot run its real check on this host and returns true for the caller to return
/// early; under CI, where the suite must not go green by checking nothing, fails the test instead.
pub fn skip(why: &str) -> bool {
    assert!(
        !under_ci(),
        "under CI (CI=true) no test may skip its real check: {why}"
    );
    eprintln!("skipped: {why}");
    true
}

/// Whether this host lets us make cgroups: root, with the v1 cpu and memory controllers mounted, or a
/// cgroup v2 hierarchy whose root offers them.
pub fn have_cgroups() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let v1 =
        Path::new("/sys/fs/cgroup/cpu").exists() && Path::new("/sys/fs/cgroup/memory").exists();
    let v2 = std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers").is_ok_and(|c| {
        let c: Vec<&str> = c.split_whitespace().collect();
        c.contains(&"cpu") && c.contains(&"memory")
    });
    root && (v1 || v2)
}

/// A JSON file's contents (a profile, a state file, a log); panics, naming the file, when it cannot be read.
/// What synergy left in `dir`, the `TMPDIR` it ran with: a probe's directory, a workload's own temporary
/// directory, or what loader workers' multiprocessing put there.
pub fn temporaries_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            ["synergy-probe-", "synergy-tmp-", "pymp-"]
                .iter()
                .any(|p| n.starts_with(p))
        })
        .collect()
}

pub fn read_json(path: impl AsRef<Path>) -> serde_json::Value {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The profiles shipped in the repository.
pub fn profiles() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles")
}

/// A tempdir for `synergy run` tests: small datasets, workload specs and a job list.
pub struct RunSetup {
    dir: tempfile::TempDir,
}

impl RunSetup {
    pub fn new() -> RunSetup {
        RunSetup {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A 4 MiB dataset of `kind`, generated once.
    pub fn dataset(&self, kind: &str) -> PathBuf {
        let d = self.path().join(format!("data-{kind}"));
        if !d.exists() {
            let out = synergy()
                .args(["dataset", "gen", "--kind", kind, "--size", "4MiB"])
                .arg(&d)
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
        }
        d
    }

    /// A spec `NAME.toml` of built-in workload `kind` (batch 32, as the shipped profiles) on its dataset, at
    /// `rate` samples/s on its emulated accelerator.
    pub fn spec(&self, name: &str, kind: &str, rate: u32) -> PathBuf {
        let data = self.dataset(kind);
        let body = format!(
            r#"name = "{name}"
command = ["{{synergy}}", "workload", "run", "{kind}", "--dataset", "{{dataset}}",
           "--batch-size", "{{batch_size}}", "--gpu-rate", "{rate}"]
batch_size = 32
footprint = "96MiB"
[dataset]
path = "{}"
"#,
            data.display()
        );
        let p = self.path().join(format!("{name}.toml"));
        std::fs::write(&p, body).unwrap();
        p
    }

    /// Writes a job list of (name, spec, profile, samples, arrival_s).
    pub fn jobs(&self, jobs: &[(&str, &Path, &str, u64, f64)]) -> PathBuf {
        let mut text = String::new();
        for (name, spec, profile, samples, arrival) in jobs {
            text.push_str(&format!(
                "[[job]]\nname = \"{name}\"\nworkload = \"{}\"\nprofile = \"{}\"\nsamples = {samples}\narrival_s = {arrival}\n\n",
                spec.display(),
                profiles().join(format!("{profile}.json")).display()
            ));
        }
        let p = self.path().join("jobs.toml");
        std::fs::write(&p, text).unwrap();
        p
    }

    /// `synergy run JOBS ARGS --json`, its output piped.
    pub fn start(&self, jobs: &Path, args: &[&str]) -> std::process::Child {
        synergy()
            .arg("run")
            .arg(jobs)
            .args(args)
            .arg("--json")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    }
}

/// Waits for a `synergy run --json` child: its report, its stderr (which must show no panic) and its exit code.
pub fn finish(child: std::process::Child) -> (serde_json::Value, String, Option<i32>) {
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON report ({e}); stderr:\n{stderr}"));
    (v, stderr, out.status.code())
}

/// The report's entry for job `name`.
pub fn job<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    report["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["name"] == name)
        .unwrap()
}

/// How many cores the core ledger under `runtime` (a `SYNERGY_RUNTIME_DIR`) has held by process `pid`.
pub fn cores_held_by(runtime: &Path, pid: &str) -> usize {
    std::fs::read_dir(runtime.join("cores"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| std::fs::read_to_string(e.path()).is_ok_and(|t| t.lines().next() == Some(pid)))
        .count()
}

/// A copy of the built-in text workload over a small dataset and a ten times faster accelerator (still
/// far below a quarter core's rate), so epochs are short: a spec file in `dir`, by its path.
pub fn small_text_spec(dir: &Path) -> String {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/workloads/text.toml"))
        .unwrap();
    let text = text
        .replace(
            "{data_dir}/text-128m",
            &format!("{}/text-8m", data_dir().display()),
        )
        .replace("size = \"128MiB\"", "size = \"8MiB\"")
        .replace("\"0.0005x\"", "\"0.005x\"");
    let p = dir.join("text-small.toml");
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

/// `Key=value` of a `scontrol show job -o` line (values without spaces).
pub fn job_field<'a>(job: &'a str, key: &str) -> &'a str {
    job.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {key} in {job}"))
}

/// `scontrol show job -d -o` of `job` once it is RUNNING.
pub fn job_running(job: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let out = Command::new("scontrol")
            .args(["show", "job", "-d", "-o", job])
            .output()
            .unwrap();
        let show = String::from_utf8_lossy(&out.stdout).into_owned();
        if job_field(&show, "JobState") == "RUNNING" {
            return show;
        }
        assert!(Instant::now() < deadline, "job {job} never ran: {show}");
        std::thread::sleep(Duration::from_millis(100));
    }
}
