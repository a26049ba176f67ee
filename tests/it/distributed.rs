//! Multi-process PyTorch jobs through the real binary: a data-parallel script written as people write
//! them (workloads/pytorch/examples/ddp_train.py, started by `torchrun`) measured as one job at 2 ranks
//! and at 1 against its own log, profiled as one job of 2 GPUs, and run by `synergy run` as one
//! distributed job; and the ways such a job goes wrong (a launcher whose ranks never start, a rank that
//! stays silent, a rank that crashes), each a clear error that leaves nothing behind. The Slurm side (one
//! rendezvous over two nodes) is in `slurm_nodes`.

use crate::common;
use crate::pytorch::{data_dir, python};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn example(name: &str) -> String {
    format!(
        "{}/workloads/pytorch/examples/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn faults_script() -> String {
    format!(
        "{}/tests/data/pytorch/ddp_faults.py",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// `python -m torch.distributed.run --nproc_per_node N ARGS...`, as words.
fn torchrun(ranks: u32, args: &[&str]) -> Vec<String> {
    let mut v = vec![
        python(),
        "-m".into(),
        "torch.distributed.run".into(),
        format!("--nproc_per_node={ranks}"),
    ];
    v.extend(args.iter().map(|a| a.to_string()));
    v
}

/// Quotes a word for `sh -c`.
fn quoted(w: &str) -> String {
    format!("'{}'", w.replace('\'', r"'\''"))
}

/// What the script's rank 0 logged: each step's samples (all ranks) and seconds.
fn logged_steps(log: &Path) -> Vec<(f64, f64)> {
    let text = std::fs::read_to_string(log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    let field = |line: &str, key: &str| -> Option<f64> {
        let mut words = line.split_whitespace();
        words.find(|w| *w == key)?;
        words.next()?.parse().ok()
    };
    text.lines()
        .filter(|l| l.starts_with("Epoch: "))
        .filter_map(|l| Some((field(l, "Samples")?, field(l, "Time")?)))
        .collect()
}

/// The script's own throughput from its log, leaving out its first `skip` steps: all samples over all
/// seconds, with a 95% interval from batches of five steps.
fn logged_rate(steps: &[(f64, f64)], skip: usize) -> (f64, f64) {
    let batches: Vec<f64> = steps[skip..]
        .chunks_exact(5)
        .map(|c| c.iter().map(|s| s.0).sum::<f64>() / c.iter().map(|s| s.1).sum::<f64>())
        .collect();
    let n = batches.len() as f64;
    assert!(n >= 5.0, "too few steps logged: {steps:?}");
    let samples: f64 = steps[skip..].iter().map(|s| s.0).sum();
    let secs: f64 = steps[skip..].iter().map(|s| s.1).sum();
    let mean = batches.iter().sum::<f64>() / n;
    let sd = (batches.iter().map(|b| (b - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    // Student's t at 95% for the few degrees of freedom here is at most 2.78 (4).
    (samples / secs, 2.78 * sd / n.sqrt())
}

/// `synergy measure --probe pytorch` of the data-parallel script at `ranks` ranks, run to its own end
/// after `steps` steps, its rank 0's log captured; returns the trial and the log's steps.
fn measure_ddp(ranks: u32, steps: u32) -> (Value, Vec<(f64, f64)>) {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("train.log");
    let data = data_dir().join("image-64m");
    let script = example("ddp_train.py");
    let cmd = torchrun(
        ranks,
        &[
            script.as_str(),
            "-j",
            "1",
            "-b",
            "8",
            "--image-size",
            "32",
            "-p",
            "1",
            "--max-steps",
            &steps.to_string(),
            data.to_str().unwrap(),
        ],
    );
    let line = format!(
        "exec {} > {}",
        cmd.iter().map(|w| quoted(w)).collect::<Vec<_>>().join(" "),
        quoted(log.to_str().unwrap())
    );
    let _serial = common::serial();
    let trial = common::run_json(&[
        "measure",
        "--probe",
        "pytorch",
        "--cpus",
        "2",
        "--warmup-seconds",
        "0",
        "--warmup-steps",
        "3",
        "--min-seconds",
        "0",
        "--precision",
        "0.000001",
        "--max-seconds",
        "300",
        "--json",
        "--",
        "sh",
        "-c",
        &line,
    ]);
    (trial, logged_steps(&log))
}

/// The ranks a trial's probe recorded, each with its own rate.
fn ranks_of(trial: &Value) -> &Vec<Value> {
    trial["probe"]["ranks"]
        .as_array()
        .unwrap_or_else(|| panic!("no ranks recorded: {}", trial["probe"]))
}

#[test]
fn a_data_parallel_script_is_measured_as_one_job_and_agrees_with_its_own_log() {
    let _host = common::shared();
    for ranks in [2, 1] {
        let (trial, log) = measure_ddp(ranks, 40);
        assert_eq!(trial["stop_reason"], "workload-exited", "{trial}");
        let probe = &trial["probe"];
        assert_eq!(probe["world_size"], ranks, "{probe}");
        assert_eq!(probe["sampler"], "DistributedSampler", "{probe}");
        assert_eq!(probe["batch_size"], 8, "{probe}");
        let rs = ranks_of(&trial);
        assert_eq!(rs.len() as u32, ranks, "{probe}");
        for (k, r) in rs.iter().enumerate() {
            assert_eq!(r["rank"], k as u64, "{r}");
            assert_eq!(r["steps"], 40, "{r}");
            assert!(r["samples_per_s"].as_f64().unwrap() > 0.0, "{r}");
            // torchrun sets it in every rank it starts, when there is more than one.
            if ranks > 1 {
                assert_eq!(r["omp_num_threads"], "1", "{r}");
            }
        }
        // Every rank's samples, once per step of the whole job.
        assert_eq!(trial["steps"], 40, "{trial}");
        let logged: f64 = log.iter().map(|s| s.0).sum();
        assert_eq!(log.len(), 40, "{log:?}");
        assert_eq!(trial["samples"].as_f64().unwrap(), logged, "{trial}");
        // The throughput against the script's own: their 95% intervals overlap.
        let (ours, ours_ci) = common::rate(&trial);
        let (theirs, theirs_ci) = logged_rate(&log, 3);
        println!(
            "{ranks} rank(s): synergy {ours:.1} ± {ours_ci:.1} samples/s, the script's log {theirs:.1} ± {theirs_ci:.1}; {}",
            trial["disturbance"]["reason"]
        );
        if trial["disturbance"]["disturbed"] == true {
            common::skip(&format!(
                "throughputs not compared: the trial was disturbed ({})",
                trial["disturbance"]["reason"]
            ));
            continue;
        }
        assert!(
            (ours - theirs).abs() <= ours_ci + theirs_ci,
            "{ranks} rank(s): synergy {ours:.1} ± {ours_ci:.1}, the script's log {theirs:.1} ± {theirs_ci:.1}"
        );
    }
}

#[test]
fn a_data_parallel_script_is_profiled_as_one_job_of_two_gpus() {
    let _host = common::shared();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("ddp.json");
    let data = data_dir().join("image-64m");
    let script = example("ddp_train.py");
    let cmd = torchrun(
        2,
        &[
            script.as_str(),
            "-b",
            "4",
            "--image-size",
            "32",
            data.to_str().unwrap(),
        ],
    );
    let _serial = common::serial();
    let o = common::synergy()
        .args([
            "profile",
            "--probe",
            "pytorch",
            "--cpus",
            "1,2",
            "--validate",
            "1",
        ])
        // The dataset named, so no discovery trial: the single-process test (`pytorch`) has one.
        .args(["--dataset", data.to_str().unwrap()])
        .args(["--out", out.to_str().unwrap(), "--"])
        .args(&cmd)
        .env("SYNERGY_PROBE_SET_WORKERS", "1")
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{printed}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    println!("{printed}");
    let p = common::read_json(&out);
    // One job of two GPUs: its step holds both ranks' batches, and the matrix is per GPU too.
    let w = &p["workload"];
    assert_eq!(w["gpus"], 2, "{w}");
    assert_eq!(w["batch_size"], 8, "{w}");
    assert_eq!(w["probe"]["world_size"], 2, "{w}");
    assert_eq!(p["server"]["gpus"], 2);
    let per_gpu: Vec<f64> = p["per_gpu"]["cpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(per_gpu, vec![0.5, 1.0]);
    assert!(printed.contains("(1/GPU)"), "{printed}");
    // The one page cache the ranks share: a memory axis over the dataset.
    assert_eq!(
        Path::new(w["dataset"]["path"].as_str().unwrap()),
        data.as_path()
    );
    assert_eq!(p["matrix"]["memory_gib"].as_array().unwrap().len(), 5);
    assert_eq!(p["validation"].as_array().unwrap().len(), 1, "{printed}");
    // Every trial ran both ranks, each with its share of the cores' loader workers and the launcher's
    // one thread, and recorded each rank's own rate.
    for t in p["trials"].as_array().unwrap() {
        let r = &t["result"];
        let cpus = r["allocation"]["cpus"].as_f64().unwrap();
        let ranks = ranks_of(r);
        assert_eq!(ranks.len(), 2, "{}", r["probe"]);
        for rank in ranks {
            assert_eq!(rank["omp_num_threads"], "1", "{rank}");
            if r["allocation"]["synthetic"] != true {
                assert_eq!(
                    rank["workers"].as_f64().unwrap(),
                    (cpus / 2.0).ceil().max(1.0),
                    "{rank}"
                );
            }
            assert!(rank["samples_per_s"].as_f64().unwrap() > 0.0, "{rank}");
        }
    }
}

/// A data-parallel spec of the repository's contract script, as `synergy run` launches it: `torchrun`
/// with one rank per GPU of the job, in one cgroup with the job's whole allocation.
#[test]
fn a_data_parallel_job_runs_as_one_distributed_job_and_is_observed_as_one() {
    let _host = common::shared();
    let setup = common::RunSetup::new();
    let spec = format!(
        "{}/workloads/pytorch-ddp-resnet18-small.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let profile = common::profiles().join("pytorch-ddp-resnet18-small.json");
    let jobs = setup.path().join("jobs.toml");
    std::fs::write(
        &jobs,
        format!(
            "[[job]]\nname = \"ddp\"\nworkload = \"{spec}\"\nprofile = \"{}\"\ngpus = 2\nsamples = 800\n",
            profile.display()
        ),
    )
    .unwrap();
    let _serial = common::serial();
    let child = common::synergy()
        .args(["run", jobs.to_str().unwrap(), "--gpus", "2", "--round", "5"])
        .args(["--refine", "--json"])
        .env("SYNERGY_PYTHON", python())
        .env("SYNERGY_DATA_DIR", data_dir())
        .env("TRAIN_IMAGE_SIZE", "32")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (report, stderr, code) = common::finish(child);
    assert_eq!(code, Some(0), "{stderr}");
    let job = common::job(&report, "ddp");
    assert_eq!(job["status"], "done", "{stderr}");
    // The job's own state file holds its whole work, both ranks' samples counted once.
    let state = setup.path().join("jobs.state.json.jobs").join("ddp.json");
    let saved = common::read_json(&state);
    let done = saved["samples_done"].as_u64().unwrap();
    assert!((800..800 + 16).contains(&done), "{saved}");
    // Observed as the whole job: the observation log has the job's throughput at its 2 GPUs.
    let log = setup.path().join("jobs.state.observations.jsonl");
    let text = std::fs::read_to_string(&log).unwrap();
    let obs: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!obs.is_empty(), "no observation: {stderr}");
    for o in &obs {
        assert_eq!(o["gpus"], 2, "{o}");
        assert!(o["throughput"]["samples_per_s"].as_f64().unwrap() > 0.0);
    }
    assert!(
        stderr.contains("refine: ddp"),
        "the run refined the profile: {stderr}"
    );
    let left = common::processes_with("train_image.py");
    assert!(left.is_empty(), "processes left by run {pid}: {left:?}");
}

/// Runs `synergy measure --probe pytorch` of `command` for at most `seconds`, asserting it fails with
/// exit code `code` and a message holding each of `says`, and that nothing of it is left.
fn assert_fails_cleanly(command: &[String], seconds: u32, code: i32, says: &[&str]) {
    let marker = faults_script();
    let tmp = tempfile::tempdir().unwrap();
    let _serial = common::serial();
    let o = common::synergy()
        .args(["measure", "--probe", "pytorch", "--cpus", "2"])
        .args(["--max-seconds", &seconds.to_string(), "--"])
        .args(command)
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(code), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    for s in says {
        assert!(err.contains(s), "`{s}` not in: {err}");
    }
    let left = common::processes_with(&marker);
    assert!(left.is_empty(), "processes left: {left:?}");
    let left = common::temporaries_in(tmp.path());
    assert!(left.is_empty(), "temporary directories left: {left:?}");
}

#[test]
fn a_job_whose_ranks_go_wrong_says_which_and_leaves_nothing() {
    let _host = common::shared();
    let faults = faults_script();
    // A launcher for two nodes on one: it waits at its rendezvous and starts no rank. Input: exit 2.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let waiting = torchrun(
        1,
        &[
            "--nnodes=2",
            "--node-rank=0",
            "--master-addr=127.0.0.1",
            &format!("--master-port={port}"),
            faults.as_str(),
            "--fault",
            "silent-rank",
        ],
    );
    assert_fails_cleanly(
        &waiting,
        10,
        2,
        &["the launcher (torchrun, pid", "started no rank", "--nnodes"],
    );
    // Rank 1 iterates no DataLoader: the job never makes a whole step, and the message names it.
    let silent = torchrun(
        2,
        &[faults.as_str(), "--fault", "silent-rank", "--seconds", "60"],
    );
    assert_fails_cleanly(
        &silent,
        10,
        1,
        &[
            "no step of the whole job",
            "the job has 2 ranks",
            "rank 0 reported",
            "rank 1 loaded PyTorch but iterated no DataLoader",
        ],
    );
    // Rank 1 raises: torchrun ends the job, and its report of the failed rank is in the message.
    let crash = torchrun(2, &[faults.as_str(), "--fault", "crash-rank"]);
    assert_fails_cleanly(&crash, 60, 1, &["the workload exited", "rank      : 1"]);
}

/// `torch.multiprocessing.spawn` sets no rank in the environment and starts fresh interpreters with no
/// inherited descriptor: each rank is known from its process group and reports through the FIFO.
#[test]
fn a_job_started_by_mp_spawn_is_counted_rank_by_rank() {
    let _host = common::shared();
    let script = format!(
        "{}/tests/data/pytorch/spawn_train.py",
        env!("CARGO_MANIFEST_DIR")
    );
    let _serial = common::serial();
    let trial = common::run_json(&[
        "measure",
        "--probe",
        "pytorch",
        "--cpus",
        "2",
        "--max-seconds",
        "15",
        "--json",
        "--",
        &python(),
        &script,
        "100",
    ]);
    let probe = &trial["probe"];
    assert_eq!(probe["world_size"], 2, "{probe}");
    assert_eq!(probe["sampler"], "DistributedSampler", "{probe}");
    let ranks = ranks_of(&trial);
    assert_eq!(ranks.len(), 2, "{probe}");
    // Each rank's batches are counted once, and the job's step holds both ranks' samples.
    let per_rank: u64 = ranks
        .iter()
        .map(|r| r["steps"].as_u64().unwrap())
        .min()
        .unwrap();
    let steps = trial["steps"].as_u64().unwrap();
    assert!(
        steps > 20 && steps <= per_rank,
        "{steps} job steps, {per_rank} per rank"
    );
    assert_eq!(
        trial["samples"].as_f64().unwrap(),
        16.0 * steps as f64,
        "{trial}"
    );
}

/// The probe's own channel, as a rank opens it: the FIFO named by `SYNERGY_PROGRESS_PATH` reaches the
/// trial from a process that did not inherit the descriptor (here one started with every descriptor
/// above 2 closed, as torchrun starts its ranks).
#[test]
fn a_process_with_its_descriptors_closed_reports_through_the_fifo() {
    let _host = common::shared();
    let _serial = common::serial();
    let script = "import json, os, time\n\
                  fd = os.open(os.environ['SYNERGY_PROGRESS_PATH'], os.O_WRONLY)\n\
                  for k in range(300):\n    \
                  os.write(fd, (json.dumps({'samples': 4, 'rank': 0, 'world_size': 1}) + '\\n').encode())\n    \
                  time.sleep(0.01)\n";
    let o = Command::new(env!("CARGO_BIN_EXE_synergy"))
        .args([
            "measure",
            "--cpus",
            "1",
            "--max-seconds",
            "20",
            "--json",
            "--",
        ])
        .args(["sh", "-c"])
        .arg(format!("exec 3>&- && exec python3 -c {}", quoted(script)))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let trial: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(trial["steps"].as_u64().unwrap() >= 10, "{trial}");
    assert_eq!(ranks_of(&trial).len(), 1);
}
