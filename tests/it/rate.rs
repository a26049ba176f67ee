//! The emulated accelerator's rate relative to this host, through the real binary: `synergy dataset rate`
//! measures and keeps the one-core rate, `workload run --gpu-rate 0.5x` runs at that multiple of it (in
//! synthetic mode without reading the dataset), and the rate file is never taken for data.

use crate::common;

use crate::common::{run, synergy};
use std::path::Path;

fn gen(dir: &Path, kind: &str, size: &str) {
    let out = run(&[
        "dataset",
        "gen",
        "--kind",
        kind,
        "--size",
        size,
        &dir.display().to_string(),
    ]);
    assert!(out.status.success(), "{out:?}");
}

fn rate_json(dir: &Path, extra: &[&str]) -> serde_json::Value {
    let d = dir.display().to_string();
    let mut args = vec!["dataset", "rate", &d, "--pipeline", "text", "--json"];
    args.extend_from_slice(extra);
    let out = run(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_one_core_rate_is_measured_once_and_multiplied() {
    let _g = common::serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("text");
    gen(&dir, "text", "2MiB");
    let first = rate_json(&dir, &[]);
    assert_eq!(first["measured_now"], true, "{first}");
    assert_eq!(first["seq_len"], 512);
    assert!(first["not_kept"].is_null(), "{first}");
    let one_core = first["samples_per_cpu_s"].as_f64().unwrap();
    assert!(one_core > 0.0);
    let file = first["rate_file"].as_str().unwrap();
    assert!(Path::new(file).is_file() && file.ends_with(".synergy-rate.json"));
    let again = rate_json(&dir, &[]);
    assert_eq!(again["measured_now"], false);
    assert_eq!(again["samples_per_cpu_s"].as_f64().unwrap(), one_core);
    // Another sequence length is other work: measured on its own.
    assert_eq!(rate_json(&dir, &["--seq-len", "64"])["measured_now"], true);
    assert_eq!(rate_json(&dir, &["--refresh"])["measured_now"], true);
    let one_core = rate_json(&dir, &[])["samples_per_cpu_s"].as_f64().unwrap();

    // Synthetic mode finds the stored rate without touching the data files.
    let moved = tmp.path().join("shards");
    std::fs::create_dir(&moved).unwrap();
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        if e.file_name().to_string_lossy().ends_with(".bin") {
            std::fs::rename(e.path(), moved.join(e.file_name())).unwrap();
        }
    }
    let out = synergy()
        .args(["workload", "run", "text", "--dataset"])
        .arg(&dir)
        .args(["--gpu-rate", "0.0005x", "--max-steps", "3"])
        .env("SYNERGY_SYNTHETIC", "1")
        .env("SYNERGY_CPUS", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let g = 0.0005 * one_core;
    assert!(
        stderr.contains(&format!(
            "G {g:.1} samples/s = 0.0005x one-core {one_core:.1} (stored)"
        )),
        "{stderr}"
    );
}

#[test]
fn a_measured_dataset_does_not_count_the_rate_file() {
    let _g = common::serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("text");
    gen(&dir, "text", "1MiB");
    rate_json(&dir, &[]);
    let spec = tmp.path().join("t.toml");
    std::fs::write(
        &spec,
        format!(
            "name = 't'\ncommand = ['{{synergy}}', 'workload', 'run', 'text', '--dataset', '{{dataset}}', \
             '--batch-size', '{{batch_size}}', '--gpu-rate', '0.005x']\nbatch_size = 32\n\
             [dataset]\npath = '{}'\n",
            dir.display()
        ),
    )
    .unwrap();
    let v = common::measure(&[
        &spec.display().to_string(),
        "--cpus",
        "1",
        "--isolation",
        "affinity",
        "--max-seconds",
        "10",
    ]);
    assert_eq!(v["dataset"]["files"], 1, "{}", v["dataset"]);
    assert_eq!(v["dataset"]["bytes"], 1 << 20);
}
