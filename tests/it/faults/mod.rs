//! Faults a hostile user and a failing machine bring (docs/architecture.md §7): special and enormous
//! files given as input, kills and signals in the middle of a write, a full or read-only disk, a closed
//! standard output, logs cut short by a kill. Each through the real binary, each asserting that the
//! output is the old one or a whole new one and that nothing is left behind.

use crate::common::{self, synergy};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Every file of `dir` whose name says it is a temporary or staging leftover.
fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            n.ends_with(".synergy-tmp")
                || n.ends_with(".synergy-commit")
                || n.ends_with(".writing")
                || n.starts_with(".tmp")
        })
        .collect()
}

/// `cmd` run with at most `bytes` of address space, as a reader that read a whole 2 GiB file could not.
fn output_within(mut cmd: Command, bytes: u64) -> Output {
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_AS, bytes, bytes)
                .map_err(std::io::Error::from)
        });
    }
    cmd.output().unwrap()
}

/// The special and enormous files of the probe, made in `dir`: a device, a named pipe with no writer, a
/// sparse 2 GiB file, a loop of links, a directory.
fn hostile_files(dir: &Path) -> Vec<(&'static str, PathBuf, &'static [&'static str])> {
    let fifo = dir.join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let sparse = dir.join("sparse");
    std::fs::File::create(&sparse)
        .unwrap()
        .set_len(2 << 30)
        .unwrap();
    let (a, b) = (dir.join("loop-a"), dir.join("loop-b"));
    std::os::unix::fs::symlink(&b, &a).unwrap();
    std::os::unix::fs::symlink(&a, &b).unwrap();
    let sub = dir.join("sub");
    std::fs::create_dir(&sub).unwrap();
    vec![
        ("a device", PathBuf::from("/dev/zero"), &["is a device"]),
        ("a named pipe", fifo, &["named pipe"]),
        // Over its kind's size, or (a trace read row by row) one line of 2 GiB, or not the format.
        (
            "a 2 GiB file",
            sparse,
            &["larger than", "line longer than", "is not"],
        ),
        ("a loop of links", a, &["loop of symbolic links"]),
        ("a directory", sub, &["directory"]),
    ]
}

/// Every command that reads a file a user names, given each special or enormous file in its place:
/// refused by name with exit 2 in seconds, in bounded memory, with nothing written.
#[test]
fn special_and_enormous_files_are_refused_by_every_reader() {
    let _host = common::shared();
    let d = tempfile::tempdir().unwrap();
    let profile = format!("{}/profiles/image.json", env!("CARGO_MANIFEST_DIR"));
    let zoo = format!("{}/profiles/zoo", env!("CARGO_MANIFEST_DIR"));
    // `{f}` stands for the hostile file.
    let commands: [(&str, &[&str]); 10] = [
        ("predict", &["predict", "{f}", "--cpus", "1", "--mem", "1"]),
        ("plot", &["plot", "{f}", "--kind", "cpu", "-o", "x.svg"]),
        (
            "simulate --trace",
            &["simulate", "--profiles", &zoo, "--trace", "{f}"],
        ),
        (
            "simulate --cluster",
            &[
                "simulate",
                "--profiles",
                &zoo,
                "--cluster",
                "{f}",
                "--jobs",
                "5",
            ],
        ),
        ("run --dry-run", &["run", "{f}", "--dry-run", "--gpus", "2"]),
        (
            "trace import",
            &[
                "trace",
                "import",
                "--profiles",
                &zoo,
                "--format",
                "helios",
                "{f}",
            ],
        ),
        (
            "trace import (Philly)",
            &[
                "trace",
                "import",
                "--profiles",
                &zoo,
                "--format",
                "philly",
                "{f}",
            ],
        ),
        (
            "slurm advisor --check",
            &["slurm", "advisor", "--check", "{f}"],
        ),
        (
            "profile refine --from",
            &["profile", "refine", &profile, "--from", "{f}"],
        ),
        ("measure (spec)", &["measure", "{f}"]),
    ];
    let mut tried = 0;
    for (kind, file, says) in hostile_files(d.path()) {
        let f = file.display().to_string();
        for (name, argv) in &commands {
            // `--from` takes a directory of logs: that case is not hostile for it.
            if kind == "a directory" && name.starts_with("profile refine") {
                continue;
            }
            let work = tempfile::tempdir().unwrap();
            let mut cmd = synergy();
            cmd.args(argv.iter().map(|a| a.replace("{f}", &f)))
                .current_dir(work.path());
            let start = Instant::now();
            let out = output_within(cmd, 1 << 30);
            let stderr = String::from_utf8_lossy(&out.stderr);
            let what = format!("{name} given {kind}: {stderr}");
            assert_eq!(out.status.code(), Some(2), "{what}");
            assert!(
                stderr.contains(&f) || stderr.contains("dev/zero"),
                "names the file: {what}"
            );
            assert!(
                says.iter().any(|s| stderr.contains(s)),
                "says {says:?}: {what}"
            );
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "took {:?}: {what}",
                start.elapsed()
            );
            assert_eq!(
                std::fs::read_dir(work.path()).unwrap().count(),
                0,
                "wrote nothing: {what}"
            );
            tried += 1;
        }
    }
    eprintln!("{tried} hostile inputs refused");
}

/// A Helios cluster log of `rows` jobs, as the published trace writes it.
fn helios_log(path: &Path, rows: usize) {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    writeln!(
        f,
        "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue"
    )
    .unwrap();
    for i in 0..rows {
        let t = 1_585_699_200 + i as i64 * 15;
        let stamp = |s: i64| {
            chrono::DateTime::from_timestamp(s, 0)
                .unwrap()
                .format("%Y-%m-%d %H:%M:%S")
                .to_string()
        };
        let g = [1, 1, 2, 4, 8][i % 5];
        let d = 60 + (i % 5000) as i64;
        writeln!(
            f,
            "j{i:07x},u{},vc{},{g},{},1,COMPLETED,{},{},{},{d},0",
            i % 97,
            i % 13,
            g * 6,
            stamp(t),
            stamp(t),
            stamp(t + d)
        )
        .unwrap();
    }
}

/// Polls `dir` until a temporary file of `name` appears (the write has begun), for at most `within`.
fn wait_for_temporary(dir: &Path, name: &str, within: Duration) -> bool {
    let start = Instant::now();
    let prefix = format!(".{name}.");
    while start.elapsed() < within {
        let found = std::fs::read_dir(dir).unwrap().flatten().any(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with(&prefix) && n.ends_with(".synergy-tmp")
        });
        if found {
            return true;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    false
}

/// `trace import` killed at random points of a large import, and in the middle of writing its output
/// (SIGKILL, SIGTERM, SIGINT, SIGHUP): the output is the previous whole one, never part of one; a signal
/// removes the temporary before the command ends (exit 128 + the signal), and what a `kill -9` left is
/// removed, and said, by the next import.
#[test]
fn an_import_killed_anywhere_leaves_the_old_output_or_a_whole_new_one_and_nothing_else() {
    let _host = common::serial();
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("cluster_log.csv");
    helios_log(&log, 400_000);
    let out = d.path().join("out.csv");
    let import = || {
        let mut c = synergy();
        c.args(["trace", "import", "--format", "helios"])
            .arg(&log)
            .arg("--out")
            .arg(&out)
            .stderr(Stdio::piped())
            .stdout(Stdio::null());
        c
    };
    let signal = |child: &std::process::Child, sig: i32| {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::try_from(sig).unwrap(),
        );
    };
    let start = Instant::now();
    let first = import().output().unwrap();
    let took = start.elapsed();
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let whole = std::fs::read(&out).unwrap();
    let reap_and_check = || {
        let next = import().output().unwrap();
        assert!(next.status.success());
        let stderr = String::from_utf8_lossy(&next.stderr);
        assert!(
            stderr.contains("removed") && stderr.contains(".synergy-tmp"),
            "{stderr}"
        );
        assert!(leftovers(d.path()).is_empty(), "{:?}", leftovers(d.path()));
    };
    // In the middle of the write, which the temporary file's appearance shows.
    let mut killed_in_write = 0;
    for sig in [libc::SIGKILL, libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        let mut child = import().spawn().unwrap();
        let writing = wait_for_temporary(d.path(), "out.csv", took * 4);
        signal(&child, sig);
        let status = child.wait().unwrap();
        assert!(writing, "signal {sig}: the write never began");
        assert_eq!(
            std::fs::read(&out).unwrap(),
            whole,
            "signal {sig}: the output is whole"
        );
        let left = leftovers(d.path());
        if sig == libc::SIGKILL {
            killed_in_write += left.len();
            if !left.is_empty() {
                reap_and_check();
            }
        } else {
            // Ended by synergy itself, having removed what it was writing (or, a rename that won the
            // race, having finished it).
            use std::os::unix::process::ExitStatusExt;
            assert!(
                status.code() == Some(128 + sig) || status.success(),
                "signal {sig}: {status:?} (signal {:?})",
                status.signal()
            );
            assert!(left.is_empty(), "signal {sig} left {left:?}");
        }
    }
    assert_eq!(
        killed_in_write, 1,
        "kill -9 in the write leaves its temporary"
    );
    // Anywhere in the import.
    for i in 0..8 {
        let sig = [libc::SIGKILL, libc::SIGTERM][i % 2];
        let mut child = import().spawn().unwrap();
        std::thread::sleep(took.mul_f64(0.2 + 0.1 * i as f64));
        signal(&child, sig);
        child.wait().unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), whole, "the output is whole");
        if !leftovers(d.path()).is_empty() {
            assert_eq!(sig, libc::SIGKILL, "{:?}", leftovers(d.path()));
            reap_and_check();
        }
    }
}

/// A mount of the given options over a fresh directory, unmounted when dropped.
struct Mount(tempfile::TempDir);

impl Mount {
    /// A tmpfs of `opts`, or none (said, and a failure under CI) where it cannot be mounted.
    fn tmpfs(opts: &str) -> Option<Mount> {
        let d = tempfile::tempdir().unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", opts, "tmpfs"])
            .arg(d.path())
            .status()
            .is_ok_and(|s| s.success());
        // Skipped only off CI: CI runs as root and must mount it.
        assert!(
            ok || !common::under_ci(),
            "CI runs as root and must mount a tmpfs"
        );
        if !ok {
            eprintln!("skipped: cannot mount a tmpfs (not root?)");
        }
        ok.then_some(Mount(d))
    }

    fn path(&self) -> &Path {
        self.0.path()
    }

    fn remount(&self, opts: &str) {
        let s = Command::new("mount")
            .args(["-o", &format!("remount,{opts}")])
            .arg(self.path())
            .status()
            .unwrap();
        assert!(s.success());
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

/// Writing to a full disk or a read-only one: exit 1 (a failure while running, for every command), one
/// line naming the file, the previous output kept whole, and no temporary left.
#[test]
fn a_full_or_read_only_disk_fails_the_write_and_keeps_the_old_output() {
    let _host = common::shared();
    let Some(disk) = Mount::tmpfs("size=256k") else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("cluster_log.csv");
    helios_log(&log, 20_000);
    let small = d.path().join("small.csv");
    helios_log(&small, 20);
    let out = disk.path().join("out.csv");
    let import = |from: &Path| {
        synergy()
            .args(["trace", "import", "--format", "helios"])
            .arg(from)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap()
    };
    assert!(import(&small).status.success());
    let old = std::fs::read(&out).unwrap();
    let profile = format!("{}/profiles/image.json", env!("CARGO_MANIFEST_DIR"));
    let chart = disk.path().join("chart.png");
    let plot = || {
        synergy()
            .args([
                "plot", &profile, "--kind", "heatmap", "--width", "4000", "--height", "4000", "-o",
            ])
            .arg(&chart)
            .output()
            .unwrap()
    };
    for (case, o) in [("full: import", import(&log)), ("full: plot", plot())] {
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{case}: {stderr}");
        assert!(stderr.contains("No space left"), "{case}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{case}: {stderr}");
    }
    assert_eq!(
        std::fs::read(&out).unwrap(),
        old,
        "the old output stays whole"
    );
    assert!(
        leftovers(disk.path()).is_empty(),
        "{:?}",
        leftovers(disk.path())
    );
    disk.remount("ro");
    let o = import(&small);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "read-only: {stderr}");
    assert!(stderr.contains("Read-only file system"), "{stderr}");
    assert_eq!(std::fs::read(&out).unwrap(), old);
}

/// Every command that writes files, pointed at a read-only disk: the same failure gives the same answer
/// from each, exit 1 (a failure while running) with one line naming the file system's refusal, as bad
/// input gives exit 2 from each in the contract walk.
#[test]
fn every_writer_fails_a_read_only_disk_with_exit_1() {
    let _host = common::shared();
    let Some(disk) = Mount::tmpfs("size=1m") else {
        return;
    };
    disk.remount("ro");
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("cluster_log.csv");
    helios_log(&log, 20);
    let root = env!("CARGO_MANIFEST_DIR");
    let ro = |name: &str| disk.path().join(name).display().to_string();
    let (image, audio) = (
        format!("{root}/profiles/image.json"),
        format!("{root}/profiles/audio.json"),
    );
    let observed = format!("{root}/tests/data/formats/observation");
    let writers: Vec<Vec<String>> = vec![
        vec![
            "trace".into(),
            "import".into(),
            "--format".into(),
            "helios".into(),
            log.display().to_string(),
            "--out".into(),
            ro("t.csv"),
        ],
        vec![
            "trace".into(),
            "cluster".into(),
            "--format".into(),
            "sinfo".into(),
            format!("{root}/tests/data/traces/nodes.sinfo"),
            "--out".into(),
            ro("c.toml"),
        ],
        vec![
            "plot".into(),
            image.clone(),
            "--kind".into(),
            "heatmap".into(),
            "-o".into(),
            ro("h.png"),
        ],
        vec![
            "import-zoo".into(),
            format!("{root}/tests/data/synergy-model-zoo.json"),
            "--out-dir".into(),
            ro("zoo"),
        ],
        vec![
            "slurm".into(),
            "advisor".into(),
            image.clone(),
            "--sinfo".into(),
            format!("{root}/tests/data/traces/partitions.sinfo"),
            "--out".into(),
            ro("adv"),
        ],
        vec![
            "profile".into(),
            "refine".into(),
            audio,
            "--include-disturbed".into(),
            "--from".into(),
            observed,
            "--out".into(),
            ro("r.json"),
        ],
        vec![
            "simulate".into(),
            "--jobs".into(),
            "20".into(),
            "--out".into(),
            ro("sim"),
        ],
        vec![
            "dataset".into(),
            "gen".into(),
            "--kind".into(),
            "text".into(),
            "--size".into(),
            "64KiB".into(),
            ro("data"),
        ],
    ];
    let mut wrong = Vec::new();
    for argv in &writers {
        let o = synergy().args(argv).output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        if o.status.code() != Some(1)
            || !stderr.contains("Read-only file system")
            || stderr.trim_end().lines().count() != 1
        {
            wrong.push(format!("{argv:?}: {:?}: {stderr}", o.status.code()));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Output piped to a reader that stops at once (`| head -1`) ends quietly with exit 0, as command-line
/// tools do.
#[test]
fn a_closed_standard_output_ends_quietly() {
    let _host = common::shared();
    let profile = format!("{}/profiles/image.json", env!("CARGO_MANIFEST_DIR"));
    for argv in [
        &["predict", &profile, "--cpus", "1", "--mem", "0.3", "--json"][..],
        &["simulate", "--jobs", "50", "--json"],
    ] {
        let mut child = synergy()
            .args(argv)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{argv:?}: {stderr}");
        assert!(!stderr.contains("Broken pipe"), "{argv:?}: {stderr}");
    }
}

/// A value echoed back in an error is cut: a model name of 500 KB does not make a 500 KB message.
#[test]
fn a_message_quoting_a_huge_value_stays_short() {
    let _host = common::shared();
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("t.csv");
    let name = "m".repeat(500_000);
    std::fs::write(
        &trace,
        format!("id,model,arrival_s,iters,gpus\n0,{name},0,100,1\n"),
    )
    .unwrap();
    let out = synergy()
        .args(["simulate", "--trace"])
        .arg(&trace)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        &stderr[..stderr.len().min(300)]
    );
    assert!(stderr.len() < 3000, "{} bytes", stderr.len());
    assert!(stderr.contains("more bytes)"), "{}", &stderr[..300]);
}

/// An observation log whose last line a kill cut short: `profile refine` leaves that line out and says
/// so, instead of refusing the whole log; a repeated line counts once.
#[test]
fn an_observation_log_cut_by_a_kill_still_refines() {
    let _host = common::shared();
    let d = tempfile::tempdir().unwrap();
    let shipped = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/formats/observation/image-on-audio.observations.jsonl"
    ))
    .unwrap();
    let lines: Vec<&str> = shipped.lines().collect();
    let last = lines[lines.len() - 1];
    let text = format!(
        "{}\n{}\n{}",
        lines.join("\n"),
        lines[0],
        &last[..last.len() / 2]
    );
    let log = d.path().join("cut.observations.jsonl");
    std::fs::write(&log, text).unwrap();
    let profile = format!("{}/profiles/audio.json", env!("CARGO_MANIFEST_DIR"));
    let out_path = d.path().join("refined.json");
    let out = synergy()
        .args([
            "profile",
            "refine",
            &profile,
            "--include-disturbed",
            "--from",
        ])
        .arg(&log)
        .arg("--out")
        .arg(&out_path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("was cut short"), "{stderr}");
    assert!(stderr.contains("repeats line 1"), "{stderr}");
    assert!(out_path.exists());
}

/// A trial journal holding another workload's trials is refused by name before anything is measured,
/// rather than taken for this workload's.
#[test]
fn a_journal_of_another_workload_is_refused_before_any_trial() {
    if common::skip_without_cgroups() {
        return;
    }
    let _g = common::serial();
    let d = tempfile::tempdir().unwrap();
    let image = common::read_json(format!(
        "{}/profiles/image.json",
        env!("CARGO_MANIFEST_DIR")
    ));
    let out = d.path().join("text.json");
    let journal: String = image["trials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| serde_json::to_string(t).unwrap() + "\n")
        .collect();
    std::fs::write(out.with_extension("trials.jsonl"), journal).unwrap();
    let spec = common::small_text_spec(d.path());
    let start = Instant::now();
    let o = synergy()
        .args([
            "profile", &spec, "--cpus", "0.5,1", "--mem", "0.2", "--resume", "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("workload `image`") && stderr.contains("not `text`"),
        "{stderr}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "{:?}",
        start.elapsed()
    );
    assert!(!out.exists());
}

/// `simulate --out` ended by SIGTERM, SIGINT or SIGHUP while it runs: its staging directory is removed
/// before it exits (128 + the signal), and no output directory appears.
#[test]
fn a_simulation_ended_by_a_signal_leaves_no_staging_directory() {
    let _host = common::serial();
    let d = tempfile::tempdir().unwrap();
    let zoo = format!("{}/profiles/zoo", env!("CARGO_MANIFEST_DIR"));
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        let mut child = synergy()
            .args([
                "simulate",
                "--profiles",
                &zoo,
                "--jobs",
                "30000",
                "--load",
                "20",
            ])
            .args(["--out", "o"])
            .current_dir(d.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let staging = d.path().join(".o.writing");
        let start = Instant::now();
        while !staging.exists() && start.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(
            staging.exists(),
            "signal {sig}: the run never began writing"
        );
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::try_from(sig).unwrap(),
        );
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(128 + sig), "signal {sig}: {status:?}");
        assert!(
            !staging.exists(),
            "signal {sig}: the staging directory is left"
        );
        assert!(
            !d.path().join("o").exists(),
            "signal {sig}: a partial output appeared"
        );
    }
}

/// Two imports writing the same output at once: it ends as one of the two whole outputs, never a mix,
/// and neither leaves a temporary.
#[test]
fn concurrent_writers_leave_one_whole_output() {
    let _host = common::serial();
    let d = tempfile::tempdir().unwrap();
    let (a, b) = (d.path().join("a.csv"), d.path().join("b.csv"));
    helios_log(&a, 100_000);
    helios_log(&b, 60_000);
    let out = d.path().join("out.csv");
    let import = |from: &Path, to: &Path| {
        synergy()
            .args(["trace", "import", "--format", "helios"])
            .arg(from)
            .arg("--out")
            .arg(to)
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    // Each input's whole output, written alone.
    let mut whole = Vec::new();
    for (from, to) in [(&a, d.path().join("a.out")), (&b, d.path().join("b.out"))] {
        assert!(import(from, &to).wait().unwrap().success());
        whole.push(std::fs::read(&to).unwrap());
    }
    for _ in 0..4 {
        let (mut x, mut y) = (import(&a, &out), import(&b, &out));
        assert!(x.wait().unwrap().success() && y.wait().unwrap().success());
        let got = std::fs::read(&out).unwrap();
        assert!(got == whole[0] || got == whole[1], "a mix of two outputs");
        assert!(leftovers(d.path()).is_empty(), "{:?}", leftovers(d.path()));
    }
}

mod kills;
