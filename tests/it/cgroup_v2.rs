//! cgroup v2 as users' servers have it. Synergy started from a cgroup it shares with another process
//! (the shell of a systemd-less GPU server) takes a cgroup of its own under the hierarchy's root, enforces
//! every limit there, and leaves the host's cgroups as it found them, also after `kill -9` (the next start
//! reaps). These need a cgroup v2 kernel: they are `#[ignore]`d here and run by CI in a v2-only VM
//! (`scripts/cgroup2-vm.sh`, with `--include-ignored`). Beside them, on any host: a plan whose limits the
//! detected backend cannot enforce is refused before its first trial.

use crate::common::{self, serial, synergy, RunSetup};
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const V2: &str = "/sys/fs/cgroup";
/// Synergy's own cgroup under the root (the backend's `ROOT_HOME`).
const HOME: &str = "/sys/fs/cgroup/synergy";

/// Whether this host's /sys/fs/cgroup is the unified v2 hierarchy without systemd (after saying so, or
/// failing under CI, when not: CI runs these in the v2 VM only). Under systemd synergy takes a delegated
/// scope instead of a cgroup under the root: [`systemd`] tests that.
fn v2_host() -> bool {
    if under_systemd() {
        return !common::skip("under systemd synergy takes a delegated scope: cgroup_v2::systemd");
    }
    Path::new(V2).join("cgroup.controllers").exists() || !common::skip("needs a cgroup v2 kernel")
}

/// Whether systemd manages this host's cgroups.
fn under_systemd() -> bool {
    Path::new("/run/systemd/system").is_dir()
}

/// What synergy must leave as it found it: the root's and the shell's enabled controllers, the shell's
/// processes, and the cgroups directly under each.
#[derive(Debug, PartialEq)]
struct Snapshot {
    root_subtree: String,
    shell_subtree: String,
    shell_procs: Vec<String>,
    under_root: Vec<String>,
    under_shell: Vec<String>,
}

fn snapshot(shell: &Path) -> Snapshot {
    let read = |p: PathBuf| fs::read_to_string(p).unwrap_or_default().trim().to_string();
    let dirs = |d: &Path| {
        let mut v: Vec<String> = fs::read_dir(d)
            .unwrap()
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let mut shell_procs: Vec<String> = read(shell.join("cgroup.procs"))
        .split_whitespace()
        .map(str::to_string)
        .collect();
    shell_procs.sort();
    Snapshot {
        root_subtree: read(Path::new(V2).join("cgroup.subtree_control")),
        shell_subtree: read(shell.join("cgroup.subtree_control")),
        shell_procs,
        under_root: dirs(Path::new(V2)),
        under_shell: dirs(shell),
    }
}

/// A cgroup under the root holding one other process, as the shell's own cgroup on the H200 host;
/// removed (its process killed) on drop.
struct SharedShell {
    dir: PathBuf,
    sharer: Child,
}

impl SharedShell {
    fn new() -> SharedShell {
        let dir = Path::new(V2).join(format!("test-shell-{}", std::process::id()));
        fs::create_dir(&dir).unwrap();
        let procs = dir.join("cgroup.procs");
        let mut cmd = Command::new("sleep");
        cmd.arg("600");
        let p = procs.clone();
        // SAFETY: only a write to an already named file, before exec.
        unsafe {
            cmd.pre_exec(move || std::fs::write(&p, "0"));
        }
        let sharer = cmd.spawn().unwrap();
        SharedShell { dir, sharer }
    }

    /// `synergy ARGS` started inside this cgroup, beside its other process.
    fn synergy(&self, args: &[&str]) -> Command {
        let mut c = synergy();
        c.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
        let p = self.dir.join("cgroup.procs");
        // SAFETY: as above.
        unsafe {
            c.pre_exec(move || std::fs::write(&p, "0"));
        }
        c
    }
}

impl Drop for SharedShell {
    fn drop(&mut self) {
        let _ = self.sharer.kill();
        let _ = self.sharer.wait();
        let _ = fs::remove_dir(&self.dir);
    }
}

/// A spec of the built-in image workload on a 16 MiB dataset in the test's directory (on the VM's
/// scratch disk, a real block device: `TMPDIR` there), in steps of 8 so that an emulated CPU still
/// makes enough of them in a short trial.
fn image_spec(s: &RunSetup) -> PathBuf {
    let data = s.path().join("data");
    let out = synergy()
        .args(["dataset", "gen", "--kind", "image", "--size", "16MiB"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let spec = s.path().join("v2.toml");
    fs::write(
        &spec,
        format!(
            r#"name = "v2"
command = ["{{synergy}}", "workload", "run", "image", "--dataset", "{{dataset}}",
           "--batch-size", "{{batch_size}}", "--gpu-rate", "2000"]
batch_size = 8
footprint = "96MiB"
[dataset]
path = "{}"
"#,
            data.display()
        ),
    )
    .unwrap();
    spec
}

/// The domain of synergy `pid` under its own cgroup at the root, once it holds the workload.
fn live_domain(pid: u32) -> Option<PathBuf> {
    fs::read_dir(HOME)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&format!("synergy-{pid}-")))
                && fs::read_to_string(p.join("cgroup.procs")).is_ok_and(|t| !t.trim().is_empty())
        })
}

fn finish(child: Child) -> (Output, serde_json::Value) {
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{}: {stderr}", out.status);
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    (out, v)
}

/// What each v2 test starts from: the host to itself, a spec on the scratch disk, a shell's cgroup
/// shared with another process, and the host's cgroups as they were before synergy ran.
struct Case {
    _host: common::HostGuard,
    _dir: RunSetup,
    spec: PathBuf,
    shell: SharedShell,
    before: Snapshot,
}

impl Case {
    /// `None` (after saying so) on a host without cgroup v2.
    fn new() -> Option<Case> {
        let host = serial();
        if !v2_host() {
            return None;
        }
        let dir = RunSetup::new();
        let spec = image_spec(&dir);
        let shell = SharedShell::new();
        let before = snapshot(&shell.dir);
        Some(Case {
            _host: host,
            _dir: dir,
            spec,
            shell,
            before,
        })
    }

    /// `synergy measure SPEC ARGS --json`, started from the shared shell's cgroup.
    fn measure(&self, args: &[&str]) -> Child {
        let mut all = vec!["measure", self.spec.to_str().unwrap()];
        all.extend_from_slice(args);
        all.push("--json");
        self.shell.synergy(&all).spawn().unwrap()
    }
}

#[test]
#[ignore = "needs a cgroup v2 kernel: scripts/cgroup2-vm.sh runs it (CI does)"]
fn from_a_shared_cgroup_synergy_takes_its_own_enforces_every_limit_and_leaves_all_as_found() {
    // Held whole: the host guard and the directory must live to the end of the test.
    let Some(case) = Case::new() else {
        return;
    };
    let (shell, before) = (&case.shell, &case.before);
    let limit = 112u64 << 20;
    let child = case.measure(&[
        "--cpus",
        "0.5",
        "--mem",
        "112MiB",
        "--storage-bps",
        "4MB/s",
        "--cold",
        "--max-seconds",
        "40",
    ]);
    let pid = child.id();
    // While the trial runs, what the kernel holds for its domain, read from the cgroup's own files.
    let start = Instant::now();
    let mut files = None;
    while files.is_none() && start.elapsed() < Duration::from_secs(300) {
        if let Some(d) = live_domain(pid) {
            let read = |f: &str| fs::read_to_string(d.join(f)).unwrap_or_default();
            let leaf = Path::new(HOME).join(format!("synergy-supervisor-{pid}"));
            files = Some((
                read("cpu.max"),
                read("memory.max"),
                read("io.max"),
                read("cpuset.cpus.effective"),
                fs::read_to_string(leaf.join("cgroup.procs")).unwrap_or_default(),
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let (_, v) = finish(child);
    let (cpu_max, memory_max, io_max, cpuset, leaf_procs) =
        files.expect("the trial's domain appeared under /sys/fs/cgroup/synergy while it ran");
    eprintln!(
        "v2 domain of a 0.5-core, 112 MiB, 4 MB/s trial: cpu.max `{}`, memory.max `{}`, io.max `{}`, cpuset `{}`",
        cpu_max.trim(),
        memory_max.trim(),
        io_max.trim(),
        cpuset.trim()
    );
    assert_eq!(cpu_max.trim(), "50000 100000");
    assert_eq!(memory_max.trim(), limit.to_string());
    assert!(io_max.contains("rbps=4000000"), "io.max: {io_max}");
    assert_eq!(cpuset.trim().len(), 1, "one core: {cpuset}");
    assert_eq!(
        leaf_procs.trim(),
        pid.to_string(),
        "synergy sat in its own leaf"
    );
    // And what the trial's telemetry, read from the same files, says it got.
    assert_eq!(v["isolation"]["backend"], "cgroup-v2", "{}", v["isolation"]);
    let t = &v["telemetry"];
    eprintln!("telemetry: {t}");
    assert!(t["cpu_cores_used"].as_f64().unwrap() <= 0.55, "{t}");
    assert!(t["memory_peak_bytes"].as_u64().unwrap() <= limit, "{t}");
    assert!(t["page_cache_peak_bytes"].as_u64().unwrap() <= limit, "{t}");
    assert!(
        t["storage_read_bytes"].as_u64().unwrap() > 8 << 20,
        "the cold dataset's reads were counted by io.stat: {t}"
    );
    assert_eq!(&snapshot(&shell.dir), before, "the host's cgroups as found");
    assert!(!Path::new(HOME).exists());
}

#[test]
#[ignore = "needs a cgroup v2 kernel: scripts/cgroup2-vm.sh runs it (CI does)"]
fn a_run_killed_in_its_own_cgroup_is_reaped_by_the_next_start_and_the_root_put_back() {
    // Held whole: the host guard and the directory must live to the end of the test.
    let Some(case) = Case::new() else {
        return;
    };
    let (shell, before) = (&case.shell, &case.before);
    let mut child = case.measure(&["--cpus", "1", "--max-seconds", "120"]);
    let pid = child.id();
    let start = Instant::now();
    while live_domain(pid).is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "no domain of {pid} under {HOME}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        !common::cgroups_of(pid).is_empty(),
        "kill -9 runs no clean-up"
    );
    assert_ne!(&snapshot(&shell.dir), before);
    // The next start, from the same shell, reaps the dead run's leaf and domain (its workload still
    // inside), then runs its own trial and leaves everything as the host had it.
    let next = case.measure(&["--cpus", "1", "--max-seconds", "20"]);
    let (out, _) = finish(next);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("left by dead pid {pid}")),
        "nothing said of {pid}:\n{stderr}"
    );
    assert!(common::cgroups_of(pid).is_empty());
    assert_eq!(&snapshot(&shell.dir), before, "the host's cgroups as found");
    assert!(!Path::new(HOME).exists());
}

/// On any host, as root: with no cgroup mounted (hidden in a mount namespace, as a container without
/// /sys/fs/cgroup has it) detection falls back to affinity, and a profile or trial that needs a limit it
/// cannot enforce is refused before its first trial with the way out; asked for by name, affinity takes
/// whole cores for a fractional budget, and a memory limit is still refused.
#[test]
fn a_limit_the_detected_backend_cannot_enforce_is_refused_before_the_first_trial() {
    let _g = serial();
    if !common::have_cgroups() {
        common::skip("needs root (to hide the cgroup mounts in a mount namespace)");
        return;
    }
    let s = RunSetup::new();
    let spec = image_spec(&s);
    let out_file = s.path().join("p/limits.json");
    let hidden = |args: &[&str]| {
        let mut c = Command::new("unshare");
        c.args([
            "-m",
            "sh",
            "-c",
            "mount -t tmpfs none /sys/fs/cgroup && exec \"$0\" \"$@\"",
        ])
        .arg(env!("CARGO_BIN_EXE_synergy"))
        .args(args)
        .env("SYNERGY_DATA_DIR", common::data_dir());
        c.output().unwrap()
    };
    let spec = spec.to_str().unwrap();
    for args in [
        vec!["profile", spec, "--out", out_file.to_str().unwrap()],
        vec!["measure", spec, "--cpus", "0.5"],
        vec!["measure", spec, "--cpus", "1", "--mem", "200MiB"],
        // By name too: affinity enforces no memory limit, which a page-cache workload's memory axis needs.
        vec![
            "profile",
            spec,
            "--isolation",
            "affinity",
            "--cpus",
            "1,2",
            "--out",
            out_file.to_str().unwrap(),
        ],
    ] {
        let out = hidden(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}: no trial ran");
        assert!(
            stderr.contains("affinity") && stderr.contains("mount -t cgroup2"),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    assert!(!out_file.exists() && !out_file.with_extension("csv").exists());
    // By name, a fractional budget runs on whole cores, and says so.
    let out = hidden(&[
        "measure",
        spec,
        "--cpus",
        "0.5",
        "--isolation",
        "affinity",
        "--max-seconds",
        "15",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["isolation"]["backend"], "affinity");
    assert_eq!(v["allocation"]["cpu_list"].as_array().unwrap().len(), 1);
}

/// cgroup v2 under systemd, as on every current distribution's GPU server: synergy, started from a cgroup
/// it shares (a service's, a login session's), asks the system manager for a transient scope with
/// delegation over D-Bus, runs its trials there, and the scope goes with it; a scope a `kill -9` left
/// running is stopped by the next start. `#[ignore]`d here; `scripts/test-cgroup2.sh` runs them in the
/// v2 VM booted with systemd as PID 1 (`cgroup2-vm.sh run --systemd`).
mod systemd {
    use super::*;

    /// Whether this is a cgroup v2 host under systemd (after saying so, or failing under CI, when not).
    fn systemd_host() -> bool {
        (under_systemd() && Path::new(V2).join("cgroup.controllers").exists())
            || !common::skip("needs systemd on a cgroup v2 host")
    }

    /// The cgroup synergy `pid` sits in, relative to the hierarchy's root, once it is a scope's.
    fn scope_of(pid: u32) -> Option<PathBuf> {
        let text = fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
        let rel = text.lines().find_map(|l| l.strip_prefix("0::"))?;
        let mut dir = Path::new(V2).join(rel.trim_start_matches('/'));
        if dir
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("synergy-supervisor-"))
        {
            dir.pop();
        }
        let unit = format!("synergy-{pid}.scope");
        dir.ends_with(&unit).then_some(dir)
    }

    /// The trial domain of synergy `pid` in its scope, once it holds the workload.
    fn domain_in(scope: &Path, pid: u32) -> Option<PathBuf> {
        fs::read_dir(scope)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(&format!("synergy-{pid}-")))
                    && fs::read_to_string(p.join("cgroup.procs"))
                        .is_ok_and(|t| !t.trim().is_empty())
            })
    }

    fn systemctl(args: &[&str]) -> String {
        let o = Command::new("systemctl").args(args).output().unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }

    /// The cgroups under the slice the scopes go in, and this process's own cgroup's controllers and
    /// processes: what synergy must leave as it found them.
    fn slice_snapshot(slice: &Path) -> (Vec<String>, String) {
        let mut dirs: Vec<String> = fs::read_dir(slice)
            .unwrap()
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        dirs.sort();
        let own = fs::read_to_string("/proc/self/cgroup").unwrap();
        let own = Path::new(V2).join(own.trim().trim_start_matches("0::/"));
        let subtree = fs::read_to_string(own.join("cgroup.subtree_control")).unwrap_or_default();
        (dirs, subtree.trim().to_string())
    }

    /// Waits up to 10 s for `unit` to be gone from the system manager (a user manager's scope: by its
    /// cgroup alone) and its cgroup `dir` removed.
    fn gone(unit: &str, dir: &Path) -> bool {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if !dir.exists() && systemctl(&["is-active", unit]) != "active" {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    /// `synergy measure SPEC ARGS --json` from this test's own cgroup (the service's, shared).
    fn measure(spec: &Path, args: &[&str]) -> Child {
        synergy()
            .args(["measure", spec.to_str().unwrap()])
            .args(args)
            .arg("--json")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Polls `found` every 50 ms until it gives something, for `limit` at most (failing with `what`).
    fn wait_for<T>(what: &str, limit: Duration, mut found: impl FnMut() -> Option<T>) -> T {
        let start = Instant::now();
        loop {
            if let Some(t) = found() {
                return t;
            }
            assert!(start.elapsed() < limit, "{what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits for synergy `pid`'s scope and the trial domain in it.
    fn scope_and_domain(pid: u32) -> (PathBuf, PathBuf) {
        wait_for(
            &format!("no delegated scope with a trial domain for synergy {pid}"),
            Duration::from_secs(300),
            || {
                let scope = scope_of(pid)?;
                domain_in(&scope, pid).map(|d| (scope, d))
            },
        )
    }

    /// What each test starts from: the host to itself and a spec on the scratch disk; `None` (after
    /// saying so, or failing under CI) off a cgroup v2 host under systemd.
    fn setup() -> Option<(common::HostGuard, RunSetup, PathBuf)> {
        let host = serial();
        if !systemd_host() {
            return None;
        }
        let dir = RunSetup::new();
        let spec = image_spec(&dir);
        Some((host, dir, spec))
    }

    /// Asserts that `unit`'s cgroup `scope` went with synergy and `slice` is as `before`.
    fn left_as_found(unit: &str, scope: &Path, slice: &Path, before: &(Vec<String>, String)) {
        assert!(gone(unit, scope), "{unit} outlived synergy");
        assert_eq!(
            &slice_snapshot(slice),
            before,
            "the host's cgroups as found"
        );
    }

    #[test]
    #[ignore = "needs systemd on a cgroup v2 host: scripts/cgroup2-vm.sh run --systemd runs it (CI does)"]
    fn from_a_shared_cgroup_synergy_takes_a_delegated_scope_that_goes_with_it() {
        let Some((_host, _dir, spec)) = setup() else {
            return;
        };
        let slice = Path::new(V2).join("system.slice");
        let before = slice_snapshot(&slice);
        let limit = 112u64 << 20;
        let child = measure(
            &spec,
            &["--cpus", "0.5", "--mem", "112MiB", "--max-seconds", "30"],
        );
        let pid = child.id();
        let (scope, domain) = scope_and_domain(pid);
        let unit = format!("synergy-{pid}.scope");
        let read = |f: &str| fs::read_to_string(domain.join(f)).unwrap_or_default();
        let (cpu_max, memory_max) = (read("cpu.max"), read("memory.max"));
        let delegate = systemctl(&["show", "-p", "Delegate", "--value", &unit]);
        let (_, v) = finish(child);
        eprintln!(
            "{} (Delegate={delegate}): domain cpu.max `{}`, memory.max `{}`",
            scope.display(),
            cpu_max.trim(),
            memory_max.trim()
        );
        assert_eq!(scope.parent().unwrap(), slice, "the system manager's scope");
        assert_eq!(delegate, "yes");
        assert_eq!(cpu_max.trim(), "50000 100000");
        assert_eq!(memory_max.trim(), limit.to_string());
        assert_eq!(v["isolation"]["backend"], "cgroup-v2", "{}", v["isolation"]);
        assert!(
            v["telemetry"]["cpu_cores_used"].as_f64().unwrap() <= 0.55,
            "{}",
            v["telemetry"]
        );
        left_as_found(&unit, &scope, &slice, &before);
    }

    #[test]
    #[ignore = "needs systemd on a cgroup v2 host: scripts/cgroup2-vm.sh run --systemd runs it (CI does)"]
    fn a_scope_a_kill_9_left_running_is_stopped_by_the_next_start() {
        let Some((_host, _dir, spec)) = setup() else {
            return;
        };
        // With a grandchild that writes no progress (as a launcher's helpers): neither the parent-death
        // signal synergy gives its child nor a broken progress pipe reaches it, so it outlives a
        // `kill -9` of synergy, and so does the scope.
        let text = fs::read_to_string(&spec).unwrap().replacen(
            r#"command = ["{synergy}""#,
            r#"command = ["sh", "-c", "sleep 600 & \"$0\" \"$@\"", "{synergy}""#,
            1,
        );
        fs::write(&spec, text).unwrap();
        let slice = Path::new(V2).join("system.slice");
        let before = slice_snapshot(&slice);
        let mut child = measure(&spec, &["--cpus", "1", "--max-seconds", "120"]);
        let pid = child.id();
        let (scope, domain) = scope_and_domain(pid);
        let unit = format!("synergy-{pid}.scope");
        // Killed only once the helper runs: killed before, its shell would never start it.
        let helper = || {
            let procs = fs::read_to_string(domain.join("cgroup.procs")).unwrap_or_default();
            procs
                .split_whitespace()
                .find(|p| {
                    fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| c.starts_with(b"sleep\0"))
                })
                .map(str::to_string)
        };
        let sleeper = wait_for("the helper never started", Duration::from_secs(60), helper);
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(
            helper().as_ref(),
            Some(&sleeper),
            "kill -9 runs no clean-up"
        );
        assert_eq!(systemctl(&["is-active", &unit]), "active");
        let (out, _) = finish(measure(&spec, &["--cpus", "1", "--max-seconds", "20"]));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("{unit} left by dead pid {pid}")),
            "nothing said of {unit}:\n{stderr}"
        );
        left_as_found(&unit, &scope, &slice, &before);
        assert!(
            !Path::new("/proc").join(&sleeper).exists(),
            "the dead run's helper {sleeper} still runs"
        );
    }

    /// An unprivileged user (`nobody`, whose manager the test starts) gets a scope from their own
    /// manager, with the controllers the host's `user@.service` delegates (cpu and memory: enough for
    /// cores and memory, no cpuset or io), and the scope goes with synergy.
    #[test]
    #[ignore = "needs systemd on a cgroup v2 host: scripts/cgroup2-vm.sh run --systemd runs it (CI does)"]
    fn an_unprivileged_user_gets_a_scope_from_their_own_manager() {
        let Some((_host, dir, spec)) = setup() else {
            return;
        };
        let uid = String::from_utf8(
            Command::new("id")
                .args(["-u", "nobody"])
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap()
        .trim()
        .to_string();
        let manager = format!("user@{uid}.service");
        assert!(Command::new("systemctl")
            .args(["start", &manager])
            .status()
            .unwrap()
            .success());
        // The user reads the spec and dataset and writes its own temporary files there.
        assert!(Command::new("chmod")
            .args(["-R", "a+rwX"])
            .arg(dir.path())
            .status()
            .unwrap()
            .success());
        let runtime = format!("/run/user/{uid}");
        let child = Command::new("runuser")
            .args(["-u", "nobody", "--"])
            .arg(env!("CARGO_BIN_EXE_synergy"))
            .args(["measure", spec.to_str().unwrap()])
            .args([
                "--cpus",
                "0.5",
                "--mem",
                "112MiB",
                "--max-seconds",
                "20",
                "--json",
            ])
            .env("HOME", dir.path())
            .env("TMPDIR", dir.path())
            .env("XDG_RUNTIME_DIR", &runtime)
            .env(
                "DBUS_SESSION_BUS_ADDRESS",
                format!("unix:path={runtime}/bus"),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let apps = Path::new(V2).join(format!("user.slice/user-{uid}.slice/{manager}/app.slice"));
        let (scope, domain) = wait_for(
            &format!("no scope with a trial domain under {}", apps.display()),
            Duration::from_secs(300),
            || {
                fs::read_dir(&apps)
                    .ok()?
                    .flatten()
                    .map(|e| e.path())
                    .find_map(|scope| {
                        let name = scope.file_name()?.to_string_lossy().into_owned();
                        let pid: u32 = name
                            .strip_prefix("synergy-")?
                            .strip_suffix(".scope")?
                            .parse()
                            .ok()?;
                        domain_in(&scope, pid).map(|d| (scope, d))
                    })
            },
        );
        let read = |f: &str| fs::read_to_string(domain.join(f)).unwrap_or_default();
        let (cpu_max, memory_max) = (read("cpu.max"), read("memory.max"));
        let (_, v) = finish(child);
        eprintln!(
            "{}: domain cpu.max `{}`, memory.max `{}`",
            scope.display(),
            cpu_max.trim(),
            memory_max.trim()
        );
        assert_eq!(cpu_max.trim(), "50000 100000");
        assert_eq!(memory_max.trim(), (112u64 << 20).to_string());
        assert_eq!(v["isolation"]["backend"], "cgroup-v2", "{}", v["isolation"]);
        let unit = scope.file_name().unwrap().to_string_lossy().into_owned();
        assert!(gone(&unit, &scope), "{unit} outlived synergy");
        let _ = Command::new("systemctl").args(["stop", &manager]).status();
    }
}
