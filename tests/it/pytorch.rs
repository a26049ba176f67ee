//! Real PyTorch training through the real binary: every training script in workloads/pytorch/ (through its
//! spec) and the zero-change probe on an unmodified script, each for a few steps with a tiny batch on CPU.
//! Each asserts that the samples synergy counted equal the samples the script says it trained on.
//!
//! Needs PyTorch: `scripts/install-pytorch.sh` installs it (CI runs it first) and prints the interpreter,
//! which these tests take from $SYNERGY_PYTHON, else from that script's default location.

use crate::common;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

const STEPS: u64 = 14;
const BATCH: u64 = 2;

/// The Python interpreter with torch; fails the test (never skips it) when torch is missing.
pub(crate) fn python() -> String {
    let py = std::env::var("SYNERGY_PYTHON")
        .ok()
        .filter(|p| !p.is_empty())
        .or_else(|| {
            let home = std::env::var("HOME").ok()?;
            let p = Path::new(&home).join(".cache/synergy/torch-venv/bin/python");
            p.exists().then(|| p.display().to_string())
        })
        .unwrap_or_else(|| "python3".into());
    let ok = Command::new(&py)
        .args(["-c", "import torch, torchvision"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        ok,
        "`{py}` cannot import torch and torchvision: run scripts/install-pytorch.sh (CI does) and set \
         SYNERGY_PYTHON to the interpreter it prints"
    );
    py
}

/// A data directory of small datasets under the names the pytorch-* specs expect, made once.
pub(crate) fn data_dir() -> PathBuf {
    static MADE: Mutex<bool> = Mutex::new(false);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("torch-datasets");
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    if !*made {
        for (kind, name, size) in [
            ("image", "image-256m", "3MiB"),
            // Under the name the data-parallel spec expects: ten steps of 2 x 8 an epoch.
            ("image", "image-64m", "16MiB"),
            ("audio", "audio-256m", "2MiB"),
            ("text", "text-128m", "1MiB"),
        ] {
            let path = dir.join(name);
            if !path.exists() {
                let st = Command::new(env!("CARGO_BIN_EXE_synergy"))
                    .args(["dataset", "gen", "--kind", kind, "--size", size])
                    .arg(&path)
                    .status()
                    .unwrap();
                assert!(st.success(), "generating {}", path.display());
            }
        }
        *made = true;
    }
    dir
}

fn spec(name: &str) -> String {
    format!("{}/workloads/{name}.toml", env!("CARGO_MANIFEST_DIR"))
}

/// `synergy measure ARGS --json` with a tiny batch and a step limit; returns the trial and the script's
/// own summary of what it processed.
/// `synergy measure` flags that let a trial run to the script's own step limit: one core, no warm-up, and
/// a precision it never reaches, so the script exits by itself.
const RUN_TO_EXIT: &[&str] = &[
    "--cpus",
    "1",
    "--warmup-seconds",
    "0",
    "--warmup-steps",
    "1",
    "--min-seconds",
    "0",
    "--precision",
    "0.000001",
    "--max-seconds",
    "300",
];

fn measure(args: &[&str], script_env: &[(&str, &str)]) -> (Value, Value) {
    let _serial = common::serial();
    let tmp = tempfile::tempdir().unwrap();
    let summary = tmp.path().join("summary.json");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_synergy"));
    cmd.arg("measure")
        .args(args)
        .args(RUN_TO_EXIT)
        .arg("--json")
        .env("SYNERGY_PYTHON", python())
        .env("SYNERGY_DATA_DIR", data_dir())
        .env("TRAIN_BATCH_SIZE", BATCH.to_string())
        .env("TRAIN_MAX_STEPS", STEPS.to_string())
        .env("TRAIN_SUMMARY", &summary);
    for (k, v) in script_env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "synergy measure {args:?} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let trial: Value = serde_json::from_slice(&out.stdout).expect("measure --json prints JSON");
    let text = std::fs::read_to_string(&summary).expect("the script wrote its summary");
    (trial, serde_json::from_str(&text).unwrap())
}

/// The samples and steps synergy counted equal those the script trained on.
fn assert_counts_match(trial: &Value, summary: &Value, steps: u64, per_step: u64) {
    assert_eq!(trial["stop_reason"], "workload-exited", "{trial}");
    assert_eq!(summary["steps"], steps, "{summary}");
    assert_eq!(summary["samples"], steps * per_step, "{summary}");
    assert_eq!(trial["steps"], steps, "{trial}");
    assert_eq!(
        trial["samples"].as_f64().unwrap(),
        summary["samples"].as_f64().unwrap()
    );
    assert!(trial["throughput"]["samples_per_s"].as_f64().unwrap() > 0.0);
    // No GPU here: the GPU figures are null, not made up.
    if summary["device"] == "cpu" {
        assert!(trial["telemetry"]["gpu"].is_null(), "{trial}");
    }
}

fn image_model(spec_name: &str, model: &str) {
    let (trial, summary) = measure(&[&spec(spec_name)], &[("TRAIN_IMAGE_SIZE", "64")]);
    assert_counts_match(&trial, &summary, STEPS, BATCH);
    assert_eq!(summary["model"], model);
    // One DataLoader worker per granted core.
    assert_eq!(summary["workers"], 1);
}

#[test]
fn resnet18_counts_match() {
    let _host = common::shared();
    image_model("pytorch-resnet18", "resnet18");
}

#[test]
fn resnet50_counts_match() {
    let _host = common::shared();
    image_model("pytorch-resnet50", "resnet50");
}

#[test]
fn mobilenet_v2_counts_match() {
    let _host = common::shared();
    image_model("pytorch-mobilenet-v2", "mobilenet_v2");
}

#[test]
fn shufflenet_v2_counts_match() {
    let _host = common::shared();
    image_model("pytorch-shufflenet-v2", "shufflenet_v2_x1_0");
}

#[test]
fn alexnet_counts_match() {
    let _host = common::shared();
    image_model("pytorch-alexnet", "alexnet");
}

#[test]
fn lstm_and_transformer_count_match() {
    let _host = common::shared();
    for (name, model) in [
        ("pytorch-lstm", "lstm"),
        ("pytorch-transformer", "transformer"),
    ] {
        let (trial, summary) = measure(&[&spec(name)], &[("TRAIN_SEQ_LEN", "32")]);
        assert_counts_match(&trial, &summary, STEPS, BATCH);
        assert_eq!(summary["model"], model);
    }
}

#[test]
fn m5_counts_match_with_data_and_synthetic() {
    let _host = common::shared();
    let (trial, summary) = measure(&[&spec("pytorch-m5")], &[]);
    assert_counts_match(&trial, &summary, STEPS, BATCH);
    assert_eq!(summary["synthetic"], false);
    let (trial, summary) = measure(&[&spec("pytorch-m5"), "--synthetic"], &[]);
    assert_counts_match(&trial, &summary, STEPS, BATCH);
    assert_eq!(summary["synthetic"], true);
}

#[test]
fn the_application_cache_keeps_a_fixed_subset() {
    let _host = common::shared();
    // About 32 images in 3 MiB; a 1 MB cache holds about a third of them. Three epochs of 8 steps.
    let (trial, summary) = measure(
        &[&spec("pytorch-shufflenet-v2"), "--cache-bytes", "1MB"],
        &[
            ("TRAIN_IMAGE_SIZE", "32"),
            ("TRAIN_BATCH_SIZE", "4"),
            ("TRAIN_MAX_STEPS", "24"),
        ],
    );
    assert_counts_match(&trial, &summary, 24, 4);
    let hits = summary["cache_hits"].as_u64().unwrap();
    let misses = summary["cache_misses"].as_u64().unwrap();
    assert_eq!(hits + misses, 96);
    // Hits only after the first epoch, and never the whole dataset: a third of it, give or take.
    let ratio = hits as f64 / 96.0;
    assert!(
        (0.1..0.5).contains(&ratio),
        "hit ratio {ratio} ({hits} hits)"
    );
    let app = &trial["telemetry"]["app_cache"];
    assert!(
        app["hits"].as_u64().unwrap() + app["misses"].as_u64().unwrap() > 0,
        "{trial}"
    );
}

/// The unmodified script's own log of what it trained on.
fn plain_script() -> String {
    format!(
        "{}/workloads/pytorch/examples/plain_train.py",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn the_probe_counts_an_unmodified_script() {
    let _host = common::shared();
    let py = python();
    let data = data_dir().join("image-256m");
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("log.json");
    let probe_tmp = tempfile::tempdir().unwrap();
    // Batches of 5 over about 32 images: every epoch ends with a short batch, which must count as such.
    let (trial, _) = {
        let _serial = common::serial();
        let out = Command::new(env!("CARGO_BIN_EXE_synergy"))
            .arg("measure")
            .args(RUN_TO_EXIT)
            .args([
                "--json",
                "--probe",
                "pytorch",
                "--",
                &py,
                &plain_script(),
                "--data",
                data.to_str().unwrap(),
                "--batch-size",
                "5",
                "--steps",
                "16",
                "--log",
                log.to_str().unwrap(),
            ])
            .env("TMPDIR", probe_tmp.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        (v, ())
    };
    let own = common::read_json(&log);
    assert_eq!(own["steps"], 16);
    assert_eq!(trial["steps"], 16);
    assert_eq!(trial["workload"], "plain_train");
    assert_eq!(
        trial["samples"].as_f64().unwrap(),
        own["samples"].as_f64().unwrap()
    );
    assert!(
        own["samples"].as_u64().unwrap() < 16 * 5,
        "a short batch was expected: {own}"
    );
    // Left alone, the script keeps its own two workers.
    assert_eq!(own["workers"], 2);
    // The probe's temporary directory is gone, and so is the script's own TMPDIR with what its loader
    // workers' multiprocessing put there.
    let left = common::temporaries_in(probe_tmp.path());
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn a_spec_probe_sets_workers_and_chains_the_users_sitecustomize() {
    let _host = common::shared();
    let py = python();
    let data = data_dir().join("image-256m");
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("log.json");
    let user = tmp.path().join("user-site");
    std::fs::create_dir(&user).unwrap();
    let marker = tmp.path().join("user-sitecustomize-ran");
    std::fs::write(
        user.join("sitecustomize.py"),
        format!(
            "open({:?}, 'w').write('yes')\n",
            marker.display().to_string()
        ),
    )
    .unwrap();
    let spec_path = tmp.path().join("plain.toml");
    std::fs::write(
        &spec_path,
        format!(
            r#"name = "plain"
command = ["{py}", "{script}", "--data", "{data}", "--batch-size", "{{batch_size}}", "--steps", "14",
           "--log", "{log}"]
batch_size = 4
footprint = "512MiB"
probe = "pytorch"

[env]
SYNERGY_PROBE_SET_WORKERS = "1"
PYTHONPATH = "{user}"
"#,
            script = plain_script(),
            data = data.display(),
            log = log.display(),
            user = user.display(),
        ),
    )
    .unwrap();
    let _serial = common::serial();
    let v = common::measure(&[&[spec_path.to_str().unwrap()], RUN_TO_EXIT].concat());
    let own = common::read_json(&log);
    assert_eq!(
        v["samples"].as_f64().unwrap(),
        own["samples"].as_f64().unwrap()
    );
    assert_eq!(own["steps"], 14);
    assert_eq!(
        own["workers"], 1,
        "SYNERGY_PROBE_SET_WORKERS follows --cpus 1"
    );
    assert!(marker.exists(), "the user's sitecustomize must still run");
}

#[test]
fn a_spec_and_a_command_together_are_refused() {
    let _host = common::shared();
    common::assert_input_error(
        &[
            "measure", "image", "--probe", "pytorch", "--", "python3", "t.py",
        ],
        &["not both"],
    );
    common::assert_input_error(&["profile"], &["command after `--`"]);
    common::assert_input_error(&["measure", "--probe", "jax", "--", "python3"], &["jax"]);
}

/// The ImageNet-style script of workloads/pytorch/examples, written as people write them.
fn imagefolder_script() -> String {
    format!(
        "{}/workloads/pytorch/examples/imagefolder_train.py",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// `synergy profile ARGS --out DIR/p.json`; returns the profile and what it printed.
fn profile_command(args: &[&str]) -> (Value, String) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("p.json");
    let _serial = common::serial();
    let o = Command::new(env!("CARGO_BIN_EXE_synergy"))
        .arg("profile")
        .args(["--out", out.to_str().unwrap()])
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "synergy profile {args:?} failed ({}):\n{stdout}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    let p = common::read_json(&out);
    (p, stdout)
}

fn trials<'a>(p: &'a Value, role: &str) -> Vec<&'a Value> {
    p["trials"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["role"] == role)
        .collect()
}

#[test]
fn an_unmodified_script_is_profiled_completely() {
    let _host = common::shared();
    let py = python();
    let data = data_dir().join("image-256m");
    let script = imagefolder_script();
    let (p, printed) = profile_command(&[
        "--probe",
        "pytorch",
        "--cpus",
        "1,2",
        "--validate",
        "2",
        "--",
        py.as_str(),
        script.as_str(),
        "-j",
        "2",
        "-b",
        "8",
        "--image-size",
        "32",
        data.to_str().unwrap(),
    ]);
    println!("{printed}");
    // The first run found the dataset, and every later trial used it.
    assert_eq!(trials(&p, "discovery").len(), 1, "{printed}");
    let found = &p["workload"]["dataset"];
    assert_eq!(Path::new(found["path"].as_str().unwrap()), data, "{found}");
    assert!(p["workload"]["no_memory_axis"].is_null());
    // What the probe saw: the script's batch size, workers, dataset and model.
    assert_eq!(p["workload"]["batch_size"], 8);
    let seen = &p["workload"]["probe"];
    assert_eq!(seen["workers"], 2, "{seen}");
    assert_eq!(seen["dataset_class"], "ImageFolder", "{seen}");
    assert_eq!(seen["device"], "cpu", "{seen}");
    assert!(seen["parameters"].as_u64().unwrap() > 1_000_000, "{seen}");
    // The script fixes its loader's workers, so the CPU sweep ran in one launch: the core count after
    // the first was measured in place, or, where other work disturbed that, run again afresh.
    let cached: Vec<(f64, Value, u64)> = trials(&p, "cpu")
        .iter()
        .map(|t| {
            let a = &t["result"]["allocation"];
            // A trial run once does not say so.
            let runs = t["attempts"].as_u64().unwrap_or(1);
            (
                a["cpus"].as_f64().unwrap(),
                a["launched_at_cpus"].clone(),
                runs,
            )
        })
        .collect();
    assert!(
        cached.iter().any(|(c, at, _)| *c == 2.0 && at.is_null())
            && cached
                .iter()
                .any(|(c, at, runs)| *c == 1.0 && (*at == 2.0 || *runs > 1)),
        "cached trials (cores, launched at, runs): {cached:?}\n{printed}"
    );
    // A memory axis over the footprint and the dataset, with distinct columns.
    let mem: Vec<f64> = p["matrix"]["memory_gib"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(mem.len(), 5, "{mem:?}");
    assert!(mem.windows(2).all(|w| w[0] < w[1]), "{mem:?}");
    // Held-out points under real memory limits, checked against the model.
    assert_eq!(p["validation"].as_array().unwrap().len(), 2, "{printed}");
    // The cold epoch is the calibration trial's first: a page cache gets no cold trial of its own, and
    // the storage rate is recorded all the same.
    assert_eq!(trials(&p, "calibration").len(), 1, "{printed}");
    assert!(trials(&p, "fetch").is_empty(), "{printed}");
    assert!(p["model"]["fetch"]["storage_bytes_per_s"]
        .as_f64()
        .is_some_and(|b| b > 0.0));
    // What follows compares throughputs: on a host whose other work kept the trials from their cores
    // (the profile lists those that stayed disturbed after their re-runs) the numbers are not this
    // allocation's, so say so and stop.
    let stayed: Vec<&str> = p["warnings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| w.as_str())
        .filter(|w| w.contains("stayed disturbed"))
        .collect();
    if !stayed.is_empty() {
        common::skip(&format!(
            "the throughput checks: {} trial(s) stayed disturbed by other work on the host: {}",
            stayed.len(),
            stayed.join("; ")
        ));
        return;
    }
    // G from the probe's replay: loading drops out, so it is at least the 2-core cached throughput.
    let synth = trials(&p, "synthetic");
    assert_eq!(synth.len(), 1);
    assert!(
        !synth[0]["result"]["probe"]["replay"].is_null(),
        "the synthetic trial must replay the script's batches: {}",
        synth[0]["result"]["probe"]
    );
    let g = synth[0]["result"]["throughput"]["samples_per_s"]
        .as_f64()
        .unwrap();
    let at2 = trials(&p, "cpu")
        .into_iter()
        .find(|t| t["result"]["allocation"]["cpus"] == 2.0)
        .map(|t| t["result"]["throughput"]["samples_per_s"].as_f64().unwrap())
        .unwrap();
    assert!(g >= at2, "G {g} below the cached 2-core {at2}:\n{printed}");
    assert_eq!(p["model"]["accelerator"]["separated"], true, "{printed}");
}

#[test]
fn a_script_whose_data_is_not_on_disk_gets_a_profile_that_says_memory_does_not_apply() {
    let _host = common::shared();
    let py = python();
    let script = imagefolder_script();
    let (p, printed) = profile_command(&[
        "--probe",
        "pytorch",
        "--cpus",
        "2",
        "--",
        py.as_str(),
        script.as_str(),
        "--dummy",
        "-b",
        "8",
        "--image-size",
        "32",
        "--num-classes",
        "10",
    ]);
    println!("{printed}");
    let why = p["workload"]["no_memory_axis"].as_str().unwrap_or_default();
    assert!(why.contains("TensorDataset"), "{printed}");
    assert!(printed.contains("memory axis  does not apply"), "{printed}");
    assert_eq!(p["matrix"]["memory_gib"].as_array().unwrap().len(), 1);
    assert!(p["workload"]["dataset"].is_null());
    assert!(p["validation"].as_array().is_none_or(|v| v.is_empty()));
    // The matrix is never capped below what a trial measured.
    let measured = trials(&p, "cpu")
        .iter()
        .map(|t| t["result"]["throughput"]["samples_per_s"].as_f64().unwrap())
        .fold(0.0, f64::max);
    let cell = p["matrix"]["samples_per_s"][0][0].as_f64().unwrap();
    assert!(
        cell >= 0.999 * measured,
        "matrix {cell} below measured {measured}"
    );
}

#[test]
fn the_probes_synthetic_mode_agrees_with_the_scripts_own_fake_data() {
    let _host = common::shared();
    let py = python();
    let data = data_dir().join("image-256m");
    let script = imagefolder_script();
    let at = ["--cpus", "2", "--max-seconds", "60", "--probe", "pytorch"];
    let shape = ["-b", "8", "--image-size", "32"];
    let _serial = common::serial();
    let replay_args = [
        &at[..],
        &["--synthetic", "--", py.as_str(), script.as_str(), "-j", "2"],
        &shape,
        &[data.to_str().unwrap()],
    ]
    .concat();
    let dummy_args = [
        &at[..],
        &[
            "--",
            py.as_str(),
            script.as_str(),
            "--dummy",
            "--num-classes",
            "10",
        ],
        &shape,
    ]
    .concat();
    // Samples per CPU-second of the workload's own cgroup, not per wall second: in fresh-clone CI one run
    // got far less of its two cores than the other without being flagged (replay 104.2 samples/s against
    // --dummy 137.0; on a quiet host the replay is the faster, 223.7-297.9 against 188.8-254.3).
    let per_cpu_s = |v: &Value| {
        let (rate, ci) = common::rate(v);
        let used = v["telemetry"]["cpu_cores_used"].as_f64().unwrap_or(0.0);
        assert!(used > 0.0, "no CPU use recorded: {}", v["telemetry"]);
        (rate / used, ci / used)
    };
    // Both feed the model tensors from memory, but the script's --dummy still indexes and collates every
    // batch on the training process (no loader workers) where the replay hands over whole batches, so
    // the replay does less per sample: 113.3-118.8 against 95.5-105.1 samples per CPU-second here. A
    // replay that did more per sample than --dummy would still be paying for the loader; one doing far
    // less would have skipped the model.
    //
    // Even per CPU-second, a run on a shared host can come out slow unflagged: a fresh-clone CI measured
    // the replay at 80.9 against --dummy's 109.3, where this host gives the replay 113-119. Neighbours on
    // the machine's memory and caches make every CPU-second do less, and nothing inside the guest sees
    // them. So the pair is measured again, up to three times; a replay that is wrong fails every pair.
    let mut seen = Vec::new();
    for _ in 0..3 {
        let Some(replayed) = common::measure_undisturbed(&replay_args) else {
            return;
        };
        let Some(dummy) = common::measure_undisturbed(&dummy_args) else {
            return;
        };
        let replay = &replayed["probe"]["replay"];
        assert!(
            replay["batches"].as_u64().unwrap() >= 1,
            "{}",
            replayed["probe"]
        );
        assert_eq!(replay["device"], "cpu");
        let (a, a_ci) = per_cpu_s(&replayed);
        let (b, b_ci) = per_cpu_s(&dummy);
        let pair = format!(
            "replayed {a:.1} ± {a_ci:.1} against --dummy {b:.1} ± {b_ci:.1} samples per CPU-second"
        );
        println!("{pair}");
        seen.push(pair);
        if a + a_ci + b_ci >= 0.85 * b && a - a_ci - b_ci <= 2.5 * b {
            return;
        }
    }
    panic!(
        "no pair of runs agreed (the replay within 0.85-2.5x of --dummy):\n{}",
        seen.join("\n")
    );
}

#[test]
fn a_script_without_a_dataloader_gets_a_message_that_says_so() {
    let _host = common::shared();
    let py = python();
    let tmp = tempfile::tempdir().unwrap();
    let no_loader = tmp.path().join("no_loader.py");
    std::fs::write(
        &no_loader,
        "import time\nimport torch\nx = torch.randn(64, 64)\nfor _ in range(10 ** 9):\n    x = torch.tanh(x @ x)\n    time.sleep(0.01)\n",
    )
    .unwrap();
    let no_torch = tmp.path().join("no_torch.py");
    std::fs::write(&no_torch, "import time\ntime.sleep(120)\n").unwrap();
    let _serial = common::serial();
    for (script, says) in [
        (&no_loader, "DataLoader"),
        (&no_torch, "saw no import of `torch.utils.data`"),
    ] {
        let o = common::run(&[
            "measure",
            "--cpus",
            "1",
            "--max-seconds",
            "10",
            "--probe",
            "pytorch",
            "--",
            py.as_str(),
            script.to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success());
        assert!(err.contains(says), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}
