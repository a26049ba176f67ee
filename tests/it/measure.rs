//! What the foundation must show on this host, measured for real: throughput against cores, fetch-bound
//! throughput under a storage limit, page cache under a memory limit, the application cache's hit ratio,
//! and the affinity fallback. Trials run one at a time (they share two cores).

use crate::common;

use crate::common::{measure, measure_undisturbed, rate, serial, skip_without_cgroups};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// Throughput and half-width of an undisturbed trial; `None` when the host stayed busy (see
/// [`measure_undisturbed`]), and the test then skips its throughput assertions.
fn undisturbed_rate(args: &[&str]) -> Option<(f64, f64)> {
    measure_undisturbed(args).map(|v| rate(&v))
}

#[test]
fn image_throughput_rises_with_cores_until_the_ingestion_rate() {
    let _g = serial();
    if skip_without_cgroups() {
        return;
    }
    let at = |c: &str| undisturbed_rate(&["image", "--cpus", c, "--warm"]);
    // G is 1.3x this host's one-core rate as kept beside the dataset. The dataset outlives a test run
    // (it lives under the target directory), and a rate kept hours ago in a slow moment of this host
    // made G half of what one core does now, so that half a core reached 0.82 G: keep it afresh.
    let dir = image_dataset();
    let kept = common::run_json(&[
        "dataset",
        "rate",
        dir.to_str().unwrap(),
        "--pipeline",
        "image",
        "--refresh",
        "--json",
    ]);
    eprintln!(
        "image: one-core rate kept now: {:.1} samples/s",
        kept["samples_per_cpu_s"].as_f64().unwrap()
    );
    let Some((t05, h05)) = at("0.5") else { return };
    let Some((g, _)) = undisturbed_rate(&["image", "--synthetic", "--cpus", "1"]) else {
        return;
    };
    let Some((t1, h1)) = at("1") else { return };
    let Some(two) = measure_undisturbed(&["image", "--cpus", "2", "--warm"]) else {
        return;
    };
    let (t2, h2) = rate(&two);
    let used = two["disturbance"]["got_cores"].as_f64().unwrap();
    eprintln!("image: G {g:.1}; 0.5 cores {t05:.1}±{h05:.1}, 1 core {t1:.1}±{h1:.1}, 2 cores {t2:.1}±{h2:.1} using {used:.2} cores");
    assert!(t05 + h05 < t1 - h1, "1 core beats 0.5 cores");
    assert!(t05 < 0.8 * g, "0.5 cores is below the ingestion rate");
    assert!(t2 >= t1 - h1 - h2, "2 cores no slower than 1");
    // G is 1.3x the one-core rate kept from one moment of this host's speed, which swings by a third
    // within a minute: in a slow enough moment two whole cores fall short of it. That is the host, and
    // the trial shows it by using both cores undisturbed; a pipeline that could not use them would not.
    if t2 < 0.95 * g && used >= 1.9 {
        eprintln!(
            "2 cores ran CPU-bound below the ingestion rate: this host is slower now than when its \
             one-core rate was kept; not checking that they reach it"
        );
        return;
    }
    assert!(
        (t2 - g).abs() <= 0.05 * g,
        "2 cores reach the ingestion rate ({t2:.1} vs {g:.1}, using {used:.2} cores)"
    );
}

#[test]
fn text_throughput_is_flat_in_cores() {
    let _g = serial();
    if skip_without_cgroups() {
        return;
    }
    let Some((t05, h05)) = undisturbed_rate(&["text", "--cpus", "0.5", "--warm"]) else {
        return;
    };
    let Some((t2, h2)) = undisturbed_rate(&["text", "--cpus", "2", "--warm"]) else {
        return;
    };
    eprintln!("text: 0.5 cores {t05:.1}±{h05:.1}, 2 cores {t2:.1}±{h2:.1}");
    assert!(
        (t2 - t05).abs() <= h05 + h2 + 0.01 * t2,
        "flat within the confidence intervals"
    );
}

#[test]
fn a_storage_limit_makes_a_cold_run_fetch_bound_and_prewarming_recovers() {
    let _g = serial();
    if skip_without_cgroups() {
        return;
    }
    let limit = 20e6;
    let cold = measure(&[
        "image",
        "--cpus",
        "2",
        "--cold",
        "--storage-bps",
        "20MB/s",
        "--max-seconds",
        "12",
    ]);
    let mean_file = cold["dataset"]["mean_file_bytes"].as_f64().unwrap();
    let expected = limit / mean_file;
    let (t_cold, _) = rate(&cold);
    let Some((t_warm, _)) =
        undisturbed_rate(&["image", "--cpus", "2", "--warm", "--storage-bps", "20MB/s"])
    else {
        return;
    };
    eprintln!(
        "image at 20 MB/s: cold {t_cold:.1} (fetch rate {expected:.1}), prewarmed {t_warm:.1}"
    );
    assert!(
        (t_cold - expected).abs() <= 0.15 * expected,
        "cold run at the fetch rate"
    );
    assert!(t_warm > 1.5 * t_cold, "prewarmed run recovers");
    let read = cold["telemetry"]["storage_read_bytes_per_s"]
        .as_f64()
        .unwrap();
    assert!(
        read <= 1.1 * limit,
        "storage reads stay under the limit ({read:.0} B/s)"
    );
}

#[test]
fn a_memory_limit_bounds_the_page_cache() {
    let _g = serial();
    if skip_without_cgroups() {
        return;
    }
    let limit: u64 = 192 << 20;
    let v = measure(&[
        "image",
        "--cpus",
        "2",
        "--cold",
        "--mem",
        "192MiB",
        "--min-seconds",
        "8",
    ]);
    let dataset = v["dataset"]["bytes"].as_u64().unwrap();
    let peak = v["telemetry"]["page_cache_peak_bytes"].as_u64().unwrap();
    let read = v["telemetry"]["storage_read_bytes"].as_u64().unwrap();
    eprintln!("page cache peak {peak} under a {limit} limit; dataset {dataset}; read {read}");
    assert!(peak <= limit, "page cache stays under the memory limit");
    assert!(
        read > limit,
        "the trial read more than the limit, so the limit mattered"
    );
}

#[test]
fn an_application_cache_of_half_the_dataset_hits_half_the_time() {
    let _g = serial();
    if skip_without_cgroups() {
        return;
    }
    // Half the dataset: read its size from a trial's dataset report.
    let first = measure(&["image", "--cpus", "2", "--warm", "--max-seconds", "6"]);
    let half = first["dataset"]["bytes"].as_u64().unwrap() / 2;
    let v = measure(&[
        "image",
        "--cpus",
        "2",
        "--cold",
        "--cache-bytes",
        &half.to_string(),
        "--warmup-epochs",
        "1",
        "--max-seconds",
        "40",
    ]);
    let cache = &v["telemetry"]["app_cache"];
    let (hits, misses) = (
        cache["hits"].as_f64().unwrap(),
        cache["misses"].as_f64().unwrap(),
    );
    let ratio = hits / (hits + misses);
    eprintln!("app cache of half the dataset: hit ratio {ratio:.3} ({hits} hits, {misses} misses)");
    assert!((0.4..=0.6).contains(&ratio), "hit ratio about one half");
}

#[test]
fn the_affinity_fallback_measures_too() {
    let _g = serial();
    let v = measure(&["image", "--cpus", "1", "--warm", "--isolation", "affinity"]);
    assert_eq!(v["isolation"]["backend"], "affinity");
    assert_eq!(v["allocation"]["cpu_list"].as_array().unwrap().len(), 1);
    let (t, _) = rate(&v);
    let busy = v["telemetry"]["cpu_cores_used"].as_f64().unwrap();
    eprintln!("affinity, 1 core: {t:.1} samples/s, {busy:.2} cores busy");
    assert!(t > 0.0);
    assert!(busy <= 1.1, "pinned to one core");
}

#[test]
fn a_trial_measures_the_fewest_steps_asked() {
    let _g = serial();
    let v = measure(&["text", "--cpus", "1", "--warm", "--min-steps", "60"]);
    let steps = v["throughput"]["measured_steps"].as_u64().unwrap();
    eprintln!(
        "text, 1 core, --min-steps 60: {steps} steps in {:.1} s ({})",
        v["throughput"]["measured_s"].as_f64().unwrap(),
        v["stop_reason"]
    );
    assert_eq!(v["stop_reason"], "converged");
    assert!(steps >= 60, "measured {steps} steps, fewer than asked");
}

#[test]
fn isolation_overhead_is_reported_and_small() {
    let _g = serial();
    if skip_without_cgroups() {
        return;
    }
    let v = measure(&[
        "text",
        "--cpus",
        "1",
        "--synthetic",
        "--mem",
        "1GiB",
        "--max-seconds",
        "8",
    ]);
    let iso = &v["isolation"];
    let total = iso["setup_ms"].as_f64().unwrap() + iso["teardown_ms"].as_f64().unwrap();
    eprintln!(
        "isolation setup + teardown: {total:.1} ms ({})",
        iso["backend"]
    );
    assert_eq!(iso["backend"], "cgroup-v1");
    assert!(total < 100.0, "setup plus teardown under 100 ms");
}

/// Generates the image workload's dataset (as `workloads/image.toml` says) unless it exists, so that trials
/// started together do not each generate it; returns its directory.
fn image_dataset() -> std::path::PathBuf {
    let dir = common::data_dir().join("image-256m");
    if !dir.exists() {
        let out = common::run(&[
            "dataset",
            "gen",
            "--kind",
            "image",
            "--size",
            "256MiB",
            "--seed",
            "1",
            dir.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{out:?}");
    }
    dir
}

/// `synergy measure image --cpus CPUS --warm --json ARGS` with its core ledger in `runtime`, output piped.
fn start_measure(runtime: &Path, cpus: &str, args: &[&str]) -> Child {
    common::synergy()
        .args(["measure", "image", "--cpus", cpus, "--warm", "--json"])
        .args(args)
        .env("SYNERGY_RUNTIME_DIR", runtime)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The trial result of a finished `measure --json`, asserting it succeeded.
fn finished(child: Child) -> serde_json::Value {
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", out.status);
    serde_json::from_slice(&out.stdout).expect("measure --json prints JSON")
}

fn cpu_list(v: &serde_json::Value) -> Vec<u64> {
    v["allocation"]["cpu_list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_u64().unwrap())
        .collect()
}

/// Whether this host has the two cores the ledger tests hand out (after saying so when not).
fn two_cores() -> bool {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    n >= 2 || !common::skip(&format!("needs two cores, this process may use {n}"))
}

#[test]
fn two_measures_at_once_get_different_cores() {
    let _g = serial();
    if skip_without_cgroups() || !two_cores() {
        return;
    }
    image_dataset();
    let runtime = tempfile::tempdir().unwrap();
    // Only the cores are checked: a short trial is enough (two at once on a busy host run to the cap).
    let short = ["--max-seconds", "8"];
    let a = start_measure(runtime.path(), "1", &short);
    let b = start_measure(runtime.path(), "1", &short);
    let (a, b) = (cpu_list(&finished(a)), cpu_list(&finished(b)));
    eprintln!("cores: {a:?} and {b:?}");
    assert_eq!((a.len(), b.len()), (1, 1));
    assert_ne!(a, b, "each process gets its own core");
}

#[test]
fn a_measure_needing_cores_another_holds_is_refused_naming_it() {
    let _g = serial();
    if skip_without_cgroups() || !two_cores() {
        return;
    }
    image_dataset();
    let runtime = tempfile::tempdir().unwrap();
    // Long enough to still hold its cores while the second one starts and is refused, and no longer:
    // only the refusal is checked.
    let mut first = start_measure(
        runtime.path(),
        "2",
        &["--min-seconds", "8", "--max-seconds", "12"],
    );
    let pid = first.id().to_string();
    let held_by_first = || common::cores_held_by(runtime.path(), &pid);
    let deadline = Instant::now() + Duration::from_secs(120);
    while held_by_first() < 2 {
        assert!(
            first.try_wait().unwrap().is_none(),
            "the first trial ended early"
        );
        assert!(
            Instant::now() < deadline,
            "the first trial never claimed its cores"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = start_measure(runtime.path(), "2", &[])
        .wait_with_output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("second: {stderr}");
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.contains(&format!("held by pid {pid} (`synergy measure")),
        "{stderr}"
    );
    assert!(stderr.contains("wait for it to finish"), "{stderr}");
    assert!(out.stdout.is_empty(), "no partial output expected");
    assert_eq!(cpu_list(&finished(first)).len(), 2);
}

#[test]
fn a_cpu_hog_on_the_trials_core_marks_it_disturbed() {
    let _g = serial();
    if skip_without_cgroups() {
        return;
    }
    // An accelerator far faster than a core, so the trial is CPU-bound and an undisturbed one uses its
    // whole core. The shipped `image` spec's 1.3x this host's one-core rate will not do: the stored rate
    // was measured in a moment of the host's speed, and in a faster moment one core outruns 1.3 times it
    // and idles (a fresh clone's CI saw 0.80 cores used, undisturbed).
    let setup = common::RunSetup::new();
    let spec = setup.spec("cpu-bound", "image", 1_000_000);
    let args = [
        spec.to_str().unwrap(),
        "--cpus",
        "1",
        "--cpu-list",
        "0",
        "--warm",
        "--max-seconds",
        "8",
    ];
    let v = {
        let _hog = common::Hog::on(0);
        // Let the scheduler see the hog as a steady load before the trial starts.
        std::thread::sleep(std::time::Duration::from_millis(500));
        measure(&args)
    };
    let d = &v["disturbance"];
    eprintln!("with a hog on core 0: {d}");
    assert_eq!(d["disturbed"], true, "{d}");
    assert!(d["other_cores"].as_f64().unwrap() > 0.3, "{d}");
    assert!(d["reason"].as_str().unwrap().contains("other work"), "{d}");
    // Without it, the same trial gets its core (unless someone else's work was there: then say so).
    let v = measure(&args);
    let d = &v["disturbance"];
    eprintln!("without: {d}");
    if d["other_cores"].as_f64().unwrap() < 0.1 {
        // The machine under a virtual one may slow the core itself: the speed probe flags that
        // (docs/profile-format.md, "Disturbed trials"), and the trial still got its whole core.
        let slowed = d["reason"]
            .as_str()
            .is_some_and(|r| r.contains("below its fastest"));
        if slowed {
            eprintln!(
                "the machine under this one slowed core 0; checking only that the trial got it"
            );
        } else {
            assert_eq!(d["disturbed"], false, "{d}");
        }
        assert!(d["got_cores"].as_f64().unwrap() > 0.9, "{d}");
    } else {
        eprintln!("the host was busy on core 0 without the hog too; not checking the quiet case");
    }
}

#[test]
fn a_workload_whose_progress_lines_are_all_malformed_is_told_so() {
    if skip_without_cgroups() {
        return;
    }
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("junk.toml");
    std::fs::write(
        &spec,
        "name = 'junk'\ncommand = ['sh', '-c', 'while true; do echo steps=3 >&3; sleep 0.1; done']\nbatch_size = 1\n",
    )
    .unwrap();
    let out = common::run(&[
        "measure",
        spec.to_str().unwrap(),
        "--cpus",
        "1",
        "--max-seconds",
        "3",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("progress lines followed the protocol"),
        "{err}"
    );
    assert!(!err.contains("raise --max-seconds"), "{err}");
}
