//! Bad input gets one clear message naming the file or flag, exit code 2, and no panic.

use crate::common;

use crate::common::{assert_input_error, run};
use std::path::Path;

fn write_spec(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

const GOOD: &str = "name = 'x'\ncommand = ['true']\nbatch_size = 4\nfootprint = '64MiB'\n";

#[test]
fn malformed_toml_names_the_file_and_line() {
    let _host = common::shared();
    let d = tempfile::tempdir().unwrap();
    let spec = write_spec(d.path(), "bad.toml", "name = 'x\ncommand = ['true']\n");
    assert_input_error(&["measure", &spec], &[&spec, "line 1"]);
}

#[test]
fn unknown_field_is_named() {
    let _host = common::shared();
    let d = tempfile::tempdir().unwrap();
    let spec = write_spec(d.path(), "extra.toml", &format!("{GOOD}gpu_rate = 3\n"));
    assert_input_error(&["measure", &spec], &[&spec, "gpu_rate"]);
}

#[test]
fn missing_dataset_without_generator_is_named() {
    let _host = common::shared();
    let d = tempfile::tempdir().unwrap();
    let text = format!("{GOOD}[dataset]\npath = 'no-such-dataset'\n");
    let spec = write_spec(d.path(), "nodata.toml", &text);
    assert_input_error(
        &["measure", &spec, "--cpus", "1"],
        &[&spec, "dataset.path", "no-such-dataset"],
    );
}

#[test]
fn more_cores_than_the_host_has_is_refused() {
    let _host = common::shared();
    assert_input_error(&["measure", "text", "--cpus", "4096"], &["--cpus", "4096"]);
    assert_input_error(&["measure", "text", "--cpus", "0"], &["--cpus"]);
}

#[test]
fn memory_below_the_footprint_is_refused() {
    let _host = common::shared();
    // `footprint` is a floor a spec may declare; the built-in specs declare none.
    let d = tempfile::tempdir().unwrap();
    let spec = write_spec(d.path(), "floor.toml", GOOD);
    assert_input_error(
        &["measure", &spec, "--cpus", "1", "--mem", "1MiB"],
        &["--mem", "footprint", &spec],
    );
}

#[test]
fn bad_gpu_rates_are_refused() {
    let _host = common::shared();
    for bad in ["0", "-1x", "x", "nan", "0x", "fast"] {
        assert_input_error(
            &[
                "workload",
                "run",
                "text",
                "--dataset",
                "/nonexistent",
                "--gpu-rate",
                bad,
                "--max-steps",
                "1",
            ],
            &["--gpu-rate", &format!("`{bad}`")],
        );
    }
}

#[test]
fn a_relative_gpu_rate_needs_the_dataset() {
    let _host = common::shared();
    let d = tempfile::tempdir().unwrap();
    let missing = d.path().join("no-such-dataset").display().to_string();
    let out = common::synergy()
        .args(["workload", "run", "image", "--dataset", &missing])
        .args(["--gpu-rate", "1.3x", "--max-steps", "1"])
        .env("SYNERGY_SYNTHETIC", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--gpu-rate") && stderr.contains(&missing),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn dataset_rate_names_bad_input() {
    let _host = common::shared();
    let d = tempfile::tempdir().unwrap();
    let missing = d.path().join("none").display().to_string();
    assert_input_error(
        &["dataset", "rate", &missing, "--pipeline", "image"],
        &[&missing],
    );
    assert_input_error(
        &[
            "dataset",
            "rate",
            &missing,
            "--pipeline",
            "image",
            "--seq-len",
            "8",
        ],
        &["--seq-len"],
    );
}

#[test]
fn unknown_spec_and_bad_sizes_are_refused() {
    let _host = common::shared();
    assert_input_error(&["measure", "no-such-workload"], &["no-such-workload"]);
    let out = run(&["measure", "image", "--mem", "lots"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn affinity_cannot_bound_memory() {
    let _host = common::shared();
    assert_input_error(
        &[
            "measure",
            "text",
            "--cpus",
            "1",
            "--isolation",
            "affinity",
            "--mem",
            "1GiB",
            "--synthetic",
        ],
        &["affinity"],
    );
}

#[test]
fn a_dataset_that_is_not_a_directory_is_refused() {
    let _host = common::shared();
    for verb in ["measure", "profile"] {
        assert_input_error(
            &[
                verb,
                "--dataset",
                "/no/such/dataset",
                "--probe",
                "pytorch",
                "--",
                "python3",
                "t.py",
            ],
            &["--dataset", "/no/such/dataset", "not a directory"],
        );
    }
    // Without a dataset, flags that act on its files are refused rather than ignored.
    for flag in [&["--cold"][..], &["--warm"], &["--storage-bps", "20MB/s"]] {
        assert_input_error(
            &[
                &["measure", "--cpus", "1"][..],
                flag,
                &["--probe", "pytorch", "--", "python3", "t.py"],
            ]
            .concat(),
            &[flag[0], "--dataset"],
        );
    }
}

#[test]
fn a_full_standard_output_is_an_error_not_a_panic() {
    let _host = common::shared();
    let profile = format!("{}/profiles/image.json", env!("CARGO_MANIFEST_DIR"));
    for args in [
        vec!["predict", profile.as_str(), "--cpus", "1", "--mem", "0.3"],
        vec![
            "predict",
            profile.as_str(),
            "--cpus",
            "1",
            "--mem",
            "0.3",
            "--json",
        ],
    ] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let out = common::synergy().args(&args).stdout(full).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(stderr.contains("writing the output"), "{stderr}");
    }
}
