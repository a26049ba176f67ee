//! Hostile but ordinary input (docs/architecture.md §7): each class of misbehaviour found once, reproduced here through
//! the real binary, so that it stays fixed at its root.

use crate::common::{self, assert_input_error, run};
use std::path::Path;

fn zoo_profile(name: &str) -> serde_json::Value {
    let p = common::profiles().join("zoo").join(format!("{name}.json"));
    common::read_json(p)
}

fn write_json(path: &Path, v: &serde_json::Value) -> String {
    std::fs::write(path, serde_json::to_string_pretty(v).unwrap()).unwrap();
    path.display().to_string()
}

/// Class 1 and 2: a profile is checked whole when read, the same for every command.
#[test]
fn a_corrupt_profile_is_refused_by_every_command_naming_the_field() {
    let _host = common::shared();
    let d = tempfile::tempdir().unwrap();
    let mut ragged = zoo_profile("alexnet");
    ragged["per_gpu"]["normalized"] = serde_json::json!([[1.0]]);
    let file = write_json(&d.path().join("alexnet.json"), &ragged);
    let dir = d.path().display().to_string();
    assert_input_error(
        &[
            "simulate",
            "--profiles",
            &dir,
            "--jobs",
            "10",
            "--window",
            "all",
        ],
        &[&file, "per_gpu.normalized"],
    );
    assert_input_error(
        &["predict", &file, "--cpus", "1", "--mem", "1"],
        &[&file, "per_gpu.normalized"],
    );
    let mut zero = zoo_profile("alexnet");
    let rows = zero["matrix"]["normalized"].as_array().unwrap().len();
    let cols = zero["matrix"]["memory_gib"].as_array().unwrap().len();
    zero["matrix"]["normalized"] = serde_json::json!(vec![vec![0.0; cols]; rows]);
    let file = write_json(&d.path().join("alexnet.json"), &zero);
    assert_input_error(
        &[
            "simulate",
            "--profiles",
            &dir,
            "--jobs",
            "10",
            "--window",
            "all",
        ],
        &[&file, "matrix.normalized", "zero everywhere"],
    );
}

/// Class 3: a name that becomes a file name cannot leave the directory it is written to.
#[test]
fn import_zoo_refuses_a_model_name_that_leaves_the_output_directory() {
    let _host = common::shared();
    let d = tempfile::tempdir().unwrap();
    let zoo = r#"{"cpus_per_gpu_rows":[1,3,6],"mem_gb_per_gpu_cols":[31.25,62.5],
      "normalized_to":{"cpus_per_gpu":3,"mem_gb_per_gpu":62.5},
      "models":{"../../evil":{"task":"image","best_cpus_per_gpu":6,"best_mem_gb_per_gpu":62.5,
        "batch_size":8,"iter_time_s_at_proportional":0.5,"speedup_at_best":2,
        "throughput_normalized":[[0.1,0.4],[0.1,1.0],[0.1,2.0]]}}}"#;
    let zoo_file = d.path().join("zoo.json");
    std::fs::write(&zoo_file, zoo).unwrap();
    let out = d.path().join("a").join("b");
    assert_input_error(
        &[
            "import-zoo",
            &zoo_file.display().to_string(),
            "--out-dir",
            &out.display().to_string(),
        ],
        &["models.../../evil"],
    );
    assert!(!d.path().join("evil.json").exists());
    assert!(!out.exists(), "nothing written");
}

/// Class 4: a run's output directory holds one run, and a second writer is refused, not raced.
#[test]
fn simulate_out_appears_whole_and_a_second_writer_is_refused() {
    let _host = common::shared();
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    let o = out.display().to_string();
    let first = run(&["simulate", "--jobs", "50", "--window", "all", "--out", &o]);
    assert!(first.status.success());
    // A sweep over the same directory replaces the single run's files with its subdirectories.
    let sweep = run(&[
        "simulate", "--jobs", "50", "--window", "all", "--policy", "fifo,las", "--out", &o,
    ]);
    assert!(sweep.status.success());
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["fifo-tune-load9-seed42", "las-tune-load9-seed42"]);
    // While one simulation writes the directory, a second is refused at once.
    let mut long = common::synergy()
        .args([
            "simulate",
            "--servers",
            "256",
            "--load",
            "72",
            "--jobs",
            "100000",
            "--multi-gpu",
            "--mechanism",
            "proportional",
            "--out",
            &o,
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let staging = d.path().join(".out.writing");
    let t0 = std::time::Instant::now();
    while !staging.exists() && t0.elapsed().as_secs() < 20 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let second = run(&["simulate", "--jobs", "50", "--window", "all", "--out", &o]);
    let stderr = String::from_utf8_lossy(&second.stderr);
    let finished_first = long.try_wait().unwrap().is_some();
    if !finished_first {
        assert_eq!(second.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("another synergy"), "{stderr}");
    }
    assert!(long.wait().unwrap().success());
    assert!(out.join("summary.json").exists() && !out.join("fifo-tune-load9-seed42").exists());
    assert!(!staging.exists(), "no staging directory left");
    // A directory holding anything else is never replaced.
    std::fs::write(out.join("notes.txt"), b"mine").unwrap();
    assert_input_error(
        &["simulate", "--jobs", "50", "--window", "all", "--out", &o],
        &[&o, "not a simulation's output"],
    );
    assert_eq!(std::fs::read(out.join("notes.txt")).unwrap(), b"mine");
}

/// Class 7: errors that blamed the wrong flag or exited 1 for the user's own mistake.
#[test]
fn misleading_errors_name_what_is_wrong_with_exit_code_2() {
    let _host = common::shared();
    assert_input_error(&["simulate", "--jobs", "0"], &["--jobs", "at least 1"]);
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().display().to_string();
    let out = run(&["predict", &dir, "--cpus", "1", "--mem", "1"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("is a directory, not a profile file"),
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("directory").count(),
        1,
        "said once: {stderr}"
    );
    assert_input_error(
        &["import-zoo", &dir, "--out-dir", &dir],
        &[&dir, "is a directory"],
    );
}

/// Class 2 and 7: numbers that make no sense are refused before anything runs.
#[test]
fn contradictory_or_impossible_budgets_are_refused_up_front() {
    let _host = common::shared();
    assert_input_error(
        &[
            "measure",
            "text",
            "--min-seconds",
            "10",
            "--max-seconds",
            "5",
        ],
        &["--min-seconds", "--max-seconds"],
    );
    assert_input_error(
        &["measure", "text", "--mem", "1000TiB"],
        &["--mem", "more than this host has"],
    );
    assert_input_error(&["profile", "image", "--gpus", "0"], &["--gpus"]);
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("not-a-dir");
    std::fs::write(&file, b"x").unwrap();
    let spec = d.path().join("spec.toml");
    std::fs::write(
        &spec,
        format!(
            "name = 'x'\ncommand = ['true']\nbatch_size = 4\n[dataset]\npath = '{}'\n",
            file.display()
        ),
    )
    .unwrap();
    let spec = spec.display().to_string();
    assert_input_error(
        &["measure", &spec, "--cpus", "1"],
        &[&spec, "dataset.path", "is a file"],
    );
}

/// Class 7: a backend asked for by name that this host lacks is the user's choice to change (exit 2),
/// and the message says what works here instead.
#[test]
fn an_unavailable_isolation_backend_is_refused_with_what_to_use() {
    let _host = common::shared();
    // Only on a v1 (hybrid) host, where cgroup-v2 cannot be had and cgroup-v1 can.
    if !common::have_cgroups() {
        common::skip("needs root and cgroups");
        return;
    }
    if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        // Not a skip: on a v2 host the check is the other way round, and the v2 suite makes it.
        return;
    }
    for verb in ["measure", "profile"] {
        assert_input_error(
            &[verb, "text", "--cpus", "1", "--isolation", "cgroup-v2"],
            &[
                "--isolation cgroup-v2 is not available here",
                "use --isolation cgroup-v1",
            ],
        );
    }
}

/// A spec declaring a footprint of 64 MiB and running nothing that reports progress.
fn sleeping_spec(dir: &Path) -> String {
    let spec = dir.join("sleeper.toml");
    std::fs::write(
        &spec,
        "name = 'sleeper'\ncommand = ['sleep', '60']\nbatch_size = 4\nfootprint = '64MiB'\n",
    )
    .unwrap();
    spec.display().to_string()
}

/// Class 7: a memory axis the workload cannot run in is refused before any trial, naming the footprint.
#[test]
fn profile_refuses_a_memory_axis_below_the_footprint_before_measuring() {
    let _host = common::shared();
    let d = tempfile::tempdir().unwrap();
    let spec = sleeping_spec(d.path());
    let out_file = d.path().join("p.json").display().to_string();
    let t0 = std::time::Instant::now();
    assert_input_error(
        &["profile", &spec, "--mem", "0.01,1", "--out", &out_file],
        &["--mem", "0.01 GiB", "footprint", "64.0 MiB", &spec],
    );
    assert!(t0.elapsed().as_secs() < 5, "refused before measuring");
    assert!(!Path::new(&out_file).exists());
    assert!(!d.path().join("p.trials.jsonl").exists());
}

/// Class 7: after a signal, `profile` speaks of saved trials only when its journal holds one.
#[test]
fn an_interrupted_profile_that_finished_no_trial_says_nothing_was_saved() {
    let _host = common::serial();
    let d = tempfile::tempdir().unwrap();
    let spec = sleeping_spec(d.path());
    let out_file = d.path().join("p.json");
    let child = common::synergy()
        .args(["profile", &spec, "--cpus", "1", "--mem", "0.5,1", "--out"])
        .arg(&out_file)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(2));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(128 + 15), "{stderr}");
    assert!(!d.path().join("p.trials.jsonl").exists(), "{stderr}");
    assert!(!stderr.contains("saved in"), "{stderr}");
    assert!(stderr.contains("before any trial finished"), "{stderr}");
}

/// Class 7: `run` with less memory than a job's footprint is refused before any round (it failed in
/// round 2 with a raw EBUSY when a job's cgroup could not shrink), naming the flag and the footprint.
#[test]
fn run_refuses_memory_below_a_jobs_footprint_up_front() {
    let _host = common::shared();
    let d = tempfile::tempdir().unwrap();
    let jobs = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/jobs-mixed.toml");
    let jobs = jobs.display().to_string();
    let state = d.path().join("s.json").display().to_string();
    let mut args = vec![
        "run", &jobs, "--gpus", "2", "--mem", "100MiB", "--state", &state,
    ];
    let must = [
        "--mem",
        "job `image-1`",
        "below its footprint",
        "give at least",
    ];
    assert_input_error(&[&args[..], &["--dry-run"]].concat(), &must);
    if common::have_cgroups() {
        args.push("--round");
        args.push("5");
        assert_input_error(&args, &must);
    }
    assert!(!Path::new(&state).exists(), "no state file");
}
