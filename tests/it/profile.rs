//! `synergy profile` end to end on a small text workload: the file round-trips through `predict`, an
//! interrupted profile resumes without re-measuring, a budget too short for the held-out points leaves
//! them out and says so, a profile on a host kept busy says so without
//! re-running every trial, and bad profile files are refused by field.

use crate::common;

use crate::common::{run, small_text_spec, synergy};
use std::path::Path;
use std::time::{Duration, Instant};

fn profile_args<'a>(spec: &'a str, out: &'a str) -> Vec<&'a str> {
    vec![
        "profile",
        spec,
        "--out",
        out,
        "--cpus",
        "0.5,1,2",
        "--mem",
        "0.2,0.5",
        "--validate",
        "1",
        "--json",
    ]
}

/// The small text workload profiled by [`profile_args`] as `adjust` changes them, which must succeed: its
/// directory, spec, profile file and the profile printed.
fn profile_small_text(
    adjust: impl FnOnce(&mut Vec<&str>),
) -> (
    tempfile::TempDir,
    String,
    std::path::PathBuf,
    serde_json::Value,
) {
    let d = tempfile::tempdir().unwrap();
    let spec = small_text_spec(d.path());
    let out = d.path().join("text.json");
    let out_s = out.display().to_string();
    let mut args = profile_args(&spec, &out_s);
    adjust(&mut args);
    let o = run(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let p = serde_json::from_slice(&o.stdout).unwrap();
    (d, spec, out, p)
}

#[test]
fn a_profile_round_trips_through_predict() {
    if common::skip_without_cgroups() {
        return;
    }
    let _g = common::serial();
    let (d, spec, out, p) = profile_small_text(|_| ());
    let out_s = out.display().to_string();
    assert_eq!(p["schema"], "synergy-profile/1.12");
    assert!(out.with_extension("csv").exists());
    assert!(
        !out.with_extension("trials.jsonl").exists(),
        "the journal goes once the profile is written"
    );
    // Text is light on CPU: the sweep needs only its two ends, both at the accelerator rate. A core
    // count the speed probe read slow against the other is measured again (docs/profile-format.md,
    // "Disturbed trials"), which says the host was busy, not where the sweep stops.
    let cpu_trials: Vec<&serde_json::Value> = p["trials"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["role"] == "cpu")
        .collect();
    let mut swept: Vec<f64> = cpu_trials
        .iter()
        .map(|t| t["result"]["allocation"]["cpus"].as_f64().unwrap())
        .collect();
    swept.sort_by(f64::total_cmp);
    swept.dedup();
    assert_eq!(swept, [0.5, 2.0], "{:#}", p["warnings"]);
    if cpu_trials.len() > swept.len() {
        eprintln!(
            "the host slowed a CPU trial, which was measured again: {} trials at {swept:?} cores",
            cpu_trials.len()
        );
    }
    let m = &p["matrix"];
    let abs = m["samples_per_s"].as_array().unwrap();
    for (i, c) in m["cpus"].as_array().unwrap().iter().enumerate() {
        for (j, g) in m["memory_gib"].as_array().unwrap().iter().enumerate() {
            let o = run(&[
                "predict",
                &out_s,
                "--cpus",
                &c.to_string(),
                "--mem",
                &g.to_string(),
                "--json",
            ]);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            let want = abs[i][j].as_f64().unwrap();
            assert!((v["samples_per_s"].as_f64().unwrap() - want).abs() < 1e-6 * want.max(1.0));
        }
    }
    let val = p["validation"].as_array().unwrap();
    assert_eq!(val.len(), 1);
    let err = p["validation_summary"][1]["median_error"].as_f64().unwrap();
    assert!(err < 0.1, "text is flat: the model predicts it ({err})");
    // The point's core speed against the sweep's, and the model's prediction at it, with its summary.
    let reference = &p["model"]["core_speed"];
    assert!(reference["reference_ops_per_cpu_s"].as_f64().unwrap() > 0.0);
    assert_eq!(reference["pipeline_exponent"], 2.5);
    assert_eq!(reference["shape_band"], 0.015);
    let k = val[0]["core_speed"].as_f64().unwrap();
    assert!(k > 0.5 && k < 2.0, "{k}");
    assert!(val[0]["predicted_at_core_speed"].as_f64().unwrap() > 0.0);
    assert!(p["validation_summary"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["at_core_speed"] == true && s["points"] == 1));
    replay_reproduces(d.path(), &spec, &out, &p);
}

/// A `--budget` the model's own trials use up leaves the held-out points unmeasured, and the profile says
/// which and why; the profile is written whole and replays as it was.
#[test]
fn a_budget_too_short_for_the_held_out_points_leaves_them_out_and_says_so() {
    if common::skip_without_cgroups() {
        return;
    }
    let _g = common::serial();
    let (d, spec, out, p) = profile_small_text(|args| {
        let at = args.iter().position(|a| *a == "--validate").unwrap();
        args[at + 1] = "2";
        args.extend(["--budget", "1s"]);
    });
    assert_eq!(p["validation"].as_array().map_or(0, Vec::len), 0, "{p:#}");
    let warnings = p["warnings"].as_array().unwrap();
    let said = warnings
        .iter()
        .filter_map(|w| w.as_str())
        .find(|w| w.contains("--budget"))
        .unwrap_or_else(|| panic!("no warning names the budget: {warnings:#?}"));
    assert!(
        said.starts_with("2 of the 2 held-out points were not measured") && said.contains("1s"),
        "{said}"
    );
    replay_reproduces(d.path(), &spec, &out, &p);
}

/// `profile replay` of a profile this version made gives its model, matrix and validation again, without
/// running the workload: its spec's command is swapped for one that fails, so any trial would fail. A
/// profile that lacks a trial the plan asks for is refused with the field named.
fn replay_reproduces(dir: &Path, spec: &str, profile: &Path, p: &serde_json::Value) {
    let failing = dir.join("failing.toml");
    let text = std::fs::read_to_string(spec).unwrap();
    let start = text.find("command = [").unwrap();
    let end = start + text[start..].find("]\n").unwrap() + 1;
    let text = format!("{}command = [\"false\"]{}", &text[..start], &text[end..]);
    std::fs::write(&failing, text).unwrap();
    let failing = failing.display().to_string();
    let out = dir.join("replayed.json");
    let out_s = out.display().to_string();
    let profile_s = profile.display().to_string();
    let o = run(&[
        "profile", "replay", &profile_s, "--spec", &failing, "--out", &out_s, "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for field in [
        "model",
        "matrix",
        "per_gpu",
        "demand",
        "validation",
        "trials",
        "host",
        "created",
        "warnings",
    ] {
        assert_eq!(r[field], p[field], "the replay's {field} differs");
    }
    assert!(r["source"]
        .as_str()
        .unwrap()
        .starts_with("replayed by synergy"));
    assert_eq!(
        r,
        serde_json::from_slice::<serde_json::Value>(&std::fs::read(&out).unwrap()).unwrap()
    );

    // Without its first cached trial, the plan asks for one the profile does not hold.
    let mut lacking = p.clone();
    let trials = lacking["trials"].as_array_mut().unwrap();
    let first = trials.iter().position(|t| t["role"] == "cpu").unwrap();
    trials.remove(first);
    let lacking_path = dir.join("lacking.json");
    std::fs::write(&lacking_path, serde_json::to_string(&lacking).unwrap()).unwrap();
    let lacking_s = lacking_path.display().to_string();
    let o = run(&[
        "profile", "replay", &lacking_s, "--spec", &failing, "--out", &out_s,
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&lacking_s) && err.contains("trials") && err.contains("does not hold"),
        "{err}"
    );
}

#[test]
fn an_interrupted_profile_resumes_without_remeasuring() {
    if common::skip_without_cgroups() {
        return;
    }
    let _g = common::serial();
    let d = tempfile::tempdir().unwrap();
    let spec = small_text_spec(d.path());
    let out = d.path().join("resume.json");
    let out_s = out.display().to_string();
    let journal = out.with_extension("trials.jsonl");
    let mut child = synergy()
        .args(profile_args(&spec, &out_s))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while std::fs::read_to_string(&journal).map_or(0, |t| t.lines().count()) < 2 {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no trial finished"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert_eq!(child.wait().unwrap().code(), Some(130));
    assert!(!out.exists(), "no profile from an interrupted run");
    let saved: Vec<serde_json::Value> = std::fs::read_to_string(&journal)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["trial"].clone())
        .collect();
    assert!(saved.len() >= 2);

    let mut args = profile_args(&spec, &out_s);
    args.push("--resume");
    let o = run(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let p: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let trials = p["trials"].as_array().unwrap();
    for s in &saved {
        assert!(trials.contains(s), "a journaled trial was measured again");
    }
}

/// The small text workload with a process beside it that holds 16 MiB whenever its cgroup has a memory
/// limit, and takes the job down when the OOM killer ends it (as a killed DataLoader worker does): the
/// cached trials, unlimited, never show that memory, so the calibration's first limit is too small. The
/// profile learns the footprint from the OOM kills and finishes, rather than losing every trial.
#[test]
fn a_footprint_the_cached_trials_underestimated_is_learned_from_the_oom_kill() {
    if common::skip_without_cgroups() {
        return;
    }
    let _g = common::serial();
    let d = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(small_text_spec(d.path())).unwrap();
    let hog = d.path().join("hog.sh");
    std::fs::write(
        &hog,
        r#"synergy=$1; shift
"$synergy" workload run text --dataset "$1" --batch-size "$2" --gpu-rate 0.005x & work=$!
cg=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print "/sys/fs/cgroup/memory" $3}' /proc/self/cgroup)
[ -n "$cg" ] || cg=/sys/fs/cgroup$(awk -F: '$1 == "0" {print $3}' /proc/self/cgroup)
limit=$(cat "$cg/memory.limit_in_bytes" "$cg/memory.max" 2>/dev/null | head -n 1)
case "$limit" in
max|9223372036854*|"") wait $work; exit $? ;;
esac
python3 -c 'import time; b = b"x" * (16 << 20); time.sleep(1e6)'
kill $work; exit 137
"#,
    )
    .unwrap();
    let start = text.find("command = [").unwrap();
    let command = &text[start..start + text[start..].find("]\n").unwrap() + 1];
    let spec = d.path().join("text-hog.toml");
    std::fs::write(
        &spec,
        text.replacen(
            command,
            r#"command = ["sh", "{spec_dir}/hog.sh", "{synergy}", "{dataset}", "{batch_size}"]"#,
            1,
        )
        .replace("name = \"text\"", "name = \"text-hog\""),
    )
    .unwrap();
    let out = d.path().join("hog.json");
    let o = run(&[
        "profile",
        spec.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--cpus",
        "1,2",
        "--validate",
        "1",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let p: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let warnings = p["warnings"].to_string();
    assert!(warnings.contains("OOM-killed"), "{warnings}");
    let peak = |role: &str| {
        p["trials"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["role"] == role)
            .map(|t| {
                t["result"]["telemetry"]["resident_peak_bytes"]
                    .as_f64()
                    .unwrap()
            })
            .fold(0.0, f64::max)
    };
    // The footprint the matrix starts from holds what ran under a limit, the held memory included.
    let footprint = p["model"]["footprint_bytes"].as_f64().unwrap();
    assert!(peak("cpu") + f64::from(16 << 20) < footprint, "{footprint}");
    assert!(peak("calibration") < footprint, "{footprint}");
    assert_eq!(p["validation"].as_array().unwrap().len(), 1, "{warnings}");
}

/// With a busy loop on each of the host's cores for the whole profile, a CPU-bound workload's trials are
/// disturbed. The first waits for the cores to go quiet, in vain; from then on the profile knows the host
/// is busy and runs no trial again (each would only be disturbed again), and lists each in its warnings.
#[test]
fn a_profile_on_a_host_that_stays_busy_runs_no_trial_again_and_says_so() {
    if common::skip_without_cgroups() {
        return;
    }
    let _g = common::serial();
    let d = tempfile::tempdir().unwrap();
    // A fast accelerator: the text pipeline is CPU-bound at every core count, so other work shows.
    let spec = small_text_spec(d.path());
    let text = std::fs::read_to_string(&spec)
        .unwrap()
        .replace("\"0.005x\"", "\"100x\"");
    std::fs::write(&spec, text).unwrap();
    let out = d.path().join("busy.json");
    let out_s = out.display().to_string();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let o = {
        let _hogs: Vec<common::Hog> = (0..cores).map(common::Hog::on).collect();
        std::thread::sleep(Duration::from_millis(500));
        run(&[
            "profile",
            &spec,
            "--out",
            &out_s,
            "--cpus",
            "1",
            "--mem",
            "0.2",
            "--validate",
            "0",
            "--json",
        ])
    };
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let p: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let trials = p["trials"].as_array().unwrap();
    let warnings: Vec<&str> = p["warnings"]
        .as_array()
        .map(|w| w.iter().filter_map(|w| w.as_str()).collect())
        .unwrap_or_default();
    let disturbed = trials
        .iter()
        .filter(|t| t["result"]["disturbance"]["disturbed"] == true)
        .count();
    assert!(
        disturbed >= 1,
        "a CPU-bound trial beside a busy loop on its core is disturbed: {warnings:?}"
    );
    for t in trials {
        // `attempts` is left out of the file when it is 1.
        assert!(
            t["attempts"].is_null(),
            "the {} trial ran {} times on a host that stayed busy",
            t["role"],
            t["attempts"]
        );
        // Nor the seconds of discarded runs, when there were none (schema 1.8).
        assert!(t["earlier_runs_s"].is_null(), "{}", t["earlier_runs_s"]);
    }
    let not_again = warnings
        .iter()
        .filter(|w| w.contains("stayed disturbed") && w.contains("was not run again"))
        .count();
    assert_eq!(not_again, disturbed, "{warnings:#?}");
}

#[test]
fn bad_profiles_are_refused_with_the_field_named() {
    let _host = common::shared();
    let d = tempfile::tempdir().unwrap();
    let cases: [(&str, &str, &[&str]); 4] = [
        ("notjson.json", "{ nope", &["not JSON"]),
        (
            "schema.json",
            r#"{"schema": "synergy-profile/9"}"#,
            &["schema", "synergy-profile/9"],
        ),
        (
            "missing.json",
            r#"{"schema": "synergy-profile/1", "source": "x"}"#,
            &["workload"],
        ),
        (
            "ragged.json",
            r#"{"schema": "synergy-profile/1", "source": "x",
                "workload": {"name": "m", "batch_size": 1, "gpus": 1, "hit_model": "minio"},
                "server": {"gpus": 8, "cpus": 24, "memory_gib": 500},
                "matrix": {"cpus": [1, 2], "memory_gib": [10, 20], "normalized": [[1, 1], [1]],
                           "proportional": {"cpus": 3, "memory_gib": 62.5, "normalized": 1}},
                "per_gpu": {"cpus": [1, 2], "memory_gib": [10, 20], "normalized": [[1, 1], [1, 1]]},
                "demand": {"job": {"cpus": 1, "memory_gib": 10, "normalized": 1},
                           "per_gpu": {"cpus": 1, "memory_gib": 10, "normalized": 1}, "tolerance": 0.05}}"#,
            &["matrix.normalized[1]"],
        ),
    ];
    let mut cases: Vec<(String, String, Vec<&str>)> = cases
        .iter()
        .map(|(n, t, w)| (n.to_string(), t.to_string(), w.to_vec()))
        .collect();
    // The hit curve's parameter must be the one its family needs (schema 1.5).
    let shipped: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string("profiles/image.json").unwrap()).unwrap();
    for (family, drop, want) in [
        (
            "two-list",
            "active_list_scale",
            "model.hit_curve.active_list_scale",
        ),
        (
            "lru-to-fixed-subset",
            "",
            "model.hit_curve.fixed_subset_share",
        ),
        ("mru", "", "model.hit_curve.family"),
    ] {
        let mut v = shipped.clone();
        let curve = v["model"]["hit_curve"].as_object_mut().unwrap();
        curve.insert("family".into(), family.into());
        curve.remove(drop);
        cases.push((format!("curve-{family}.json"), v.to_string(), vec![want]));
    }
    // The core speed the CPU stage is at must be a speed and a power (schema 1.7), its shape band a
    // fraction (1.10).
    for (i, (speed, power, band, want)) in [
        (0.0, 2.5, 0.015, "model.core_speed.reference_ops_per_cpu_s"),
        (4.0e8, -1.0, 0.015, "model.core_speed.pipeline_exponent"),
        (4.0e8, 2.5, -0.01, "model.core_speed.shape_band"),
        (4.0e8, 2.5, 1.5, "model.core_speed.shape_band"),
    ]
    .into_iter()
    .enumerate()
    {
        let mut v = shipped.clone();
        v["model"]["core_speed"] = serde_json::json!({
            "reference_ops_per_cpu_s": speed,
            "pipeline_exponent": power,
            "shape_band": band,
        });
        cases.push((format!("core-speed-{i}.json"), v.to_string(), vec![want]));
    }
    for (name, text, want) in cases {
        let p = d.path().join(&name);
        std::fs::write(&p, text).unwrap();
        let o = run(&[
            "predict",
            &p.display().to_string(),
            "--cpus",
            "1",
            "--mem",
            "10",
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains(&p.display().to_string()), "{name}: {err}");
        for w in want {
            assert!(err.contains(w), "{name}: `{w}` not in {err}");
        }
        assert!(!err.contains("panicked"));
    }
}

/// `profile replay` refuses, with the field named and exit 2, a profile it cannot replay: one without
/// trials (published or imported), one whose spec is not here, one without its host's measurements.
#[test]
fn a_profile_that_cannot_be_replayed_is_refused_with_the_field_named() {
    let d = tempfile::tempdir().unwrap();
    let shipped: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string("profiles/image.json").unwrap()).unwrap();
    let mut no_spec = shipped.clone();
    no_spec["workload"]["spec"] = "elsewhere/image.toml".into();
    let mut no_host = shipped.clone();
    no_host.as_object_mut().unwrap().remove("host");
    let zoo = std::fs::read_to_string("profiles/zoo/alexnet.json").unwrap();
    for (name, text, want) in [
        ("zoo.json", zoo, "trials"),
        ("no-spec.json", no_spec.to_string(), "workload.spec"),
        ("no-host.json", no_host.to_string(), "host"),
    ] {
        let p = d.path().join(name);
        std::fs::write(&p, text).unwrap();
        let p = p.display().to_string();
        let out = d.path().join("out.json");
        let o = run(&["profile", "replay", &p, "--out", &out.display().to_string()]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains(&p) && err.contains(want), "{name}: {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
        assert!(!out.exists(), "{name}: nothing is written");
    }
}
