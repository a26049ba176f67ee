//! `synergy run --refine` end to end: a real queue observed each round, a starved job given more cores
//! by its refined profile, and the refined profiles it writes.

use super::*;

/// What a real queue of the image workload, run with `--refine` on 2 GPUs and 2 cores in rounds of 2 s,
/// leaves: its setup, the executor's pid, its report, its stderr and its observation log's lines.
struct Refined {
    s: Setup,
    pid: u32,
    report: serde_json::Value,
    stderr: String,
    observations: Vec<serde_json::Value>,
}

/// Runs `jobs` (name, profile, samples; all arriving at once) with `--refine` and `extra`.
fn refine_queue(jobs: &[(&str, &str, u64)], extra: &[&str]) -> Refined {
    let s = Setup::new();
    let spec = s.spec("image", "image", 900);
    let list: Vec<(&str, &Path, &str, u64, f64)> = jobs
        .iter()
        .map(|&(name, profile, samples)| (name, spec.as_path(), profile, samples, 0.0))
        .collect();
    let jobs = s.jobs(&list);
    let mut args = vec!["--gpus", "2", "--cpus", "2", "--round", "2", "--refine"];
    args.extend_from_slice(extra);
    let child = s.start(&jobs, &args);
    let pid = child.id();
    let (report, stderr, code) = finish(child);
    assert_eq!(code, Some(0), "{stderr}");
    let log = s.path().join("jobs.state.observations.jsonl");
    let observations = read(&log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    Refined {
        s,
        pid,
        report,
        stderr,
        observations,
    }
}

/// `synergy predict PROFILE --cpus CPUS --mem MEM_GIB --json`: samples per second.
fn predicted(profile: &str, cpus: &str, mem_gib: &str) -> f64 {
    let out = common::synergy()
        .args([
            "predict", profile, "--cpus", cpus, "--mem", mem_gib, "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{profile}: {out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["samples_per_s"].as_f64().unwrap()
}

/// An image job given the text profile, which says a quarter of a core feeds its accelerator: the planner
/// gives it that quarter, and with `--refine` the first observation (far below the profile's rate, every
/// granted core used) makes the refined curve scale with cores, so a later round gives it more. Skips,
/// saying so, when the observations at a quarter of a core were disturbed (a busy host).
#[test]
fn refine_gives_more_cores_to_a_job_its_profile_starved() {
    if skip_without_cgroups() {
        return;
    }
    let _g = serial();
    // `_dir` holds the run's directory, where the refined profiles are, to the end.
    let Refined {
        s: _dir,
        report,
        stderr,
        observations,
        ..
    } = refine_queue(&[("starved", "text", 3200), ("right", "image", 6400)], &[]);
    let mine: Vec<&serde_json::Value> = observations
        .iter()
        .filter(|o| o["job"] == "starved")
        .collect();
    let first = mine
        .first()
        .unwrap_or_else(|| panic!("no observation of the job:\n{stderr}"));
    // As given, the profile asks a quarter of a core.
    assert!(first["cpus"].as_f64().unwrap() <= 0.26, "{first}");
    let quarter: Vec<&&serde_json::Value> = mine
        .iter()
        .take_while(|o| o["cpus"].as_f64().unwrap() <= 0.26)
        .collect();
    if quarter.iter().all(|o| o["disturbed"] == true) {
        common::skip(
            "every observation at a quarter of a core was disturbed by other work on the host",
        );
        return;
    }
    let later = mine
        .iter()
        .map(|o| o["cpus"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert!(
        later >= 0.5,
        "never offered more than {later} cores:\n{stderr}"
    );
    assert!(stderr.contains("scales with cores"), "{stderr}");
    assert_eq!(job(&report, "starved")["status"], "done");
    // The refined text profile now says more cores help, with memory to spare.
    let refined: String = report["refined_profiles"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p.as_str())
        .find(|p| p.ends_with("text.json"))
        .unwrap_or_else(|| panic!("no refined text profile: {report}"))
        .to_string();
    let at = |cpus: &str| predicted(&refined, cpus, "4");
    assert!(
        at("1") > 2.0 * at("0.25"),
        "{} vs {}; observations {mine:?}\n{stderr}",
        at("1"),
        at("0.25")
    );
}

/// `--refine` on a short real queue: an image job given the audio profile beside one given its own. The
/// observation log is written beside the state file and every line reads back; the refined profiles
/// exist, are profile files every command reads, and keep every matrix column non-decreasing in cores;
/// the report sets observed throughput beside the profile before and after. No throughput threshold:
/// the host is shared (disturbed observations are folded in, or a busy host would leave none).
#[test]
fn refine_observes_each_round_and_writes_sane_refined_profiles() {
    if skip_without_cgroups() {
        return;
    }
    let _g = serial();
    let Refined {
        s,
        pid,
        report,
        stderr,
        observations: lines,
    } = refine_queue(
        &[("wrong", "audio", 2400), ("right", "image", 2400)],
        &["--include-disturbed"],
    );
    let log = s.path().join("jobs.state.observations.jsonl");
    assert_eq!(report["observation_log"], log.display().to_string());
    assert!(
        !lines.is_empty(),
        "no observation in {}:\n{stderr}",
        log.display()
    );
    assert_eq!(report["observations"].as_u64(), Some(lines.len() as u64));
    for o in &lines {
        assert_eq!(o["schema"], "synergy-observation/1");
        let rate = o["throughput"]["samples_per_s"].as_f64().unwrap();
        assert!(rate > 0.0 && rate.is_finite(), "{o}");
        assert!(o["cpus"].as_f64().unwrap() > 0.0);
        assert!(["wrong", "right"].contains(&o["job"].as_str().unwrap()));
    }
    assert!(stderr.contains("refine:"), "{stderr}");
    // The queue is predicted again from the refined profiles, beside the prediction from the given ones.
    for j in report["jobs"].as_array().unwrap() {
        let again = j["predicted_refined_jct_s"].as_f64();
        assert!(again.is_some_and(|t| t.is_finite() && t > 0.0), "{j}");
        assert!(j["difference_refined"].as_f64().is_some(), "{j}");
    }
    assert!(
        report["mean_predicted_refined_jct_s"]
            .as_f64()
            .is_some_and(|t| t > 0.0),
        "{report}"
    );
    let written: Vec<String> = report["refined_profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect();
    assert!(!written.is_empty(), "{report}");
    for p in &written {
        assert!(predicted(p, "1", "1") > 0.0, "{p}");
        let v: serde_json::Value = serde_json::from_str(&read(Path::new(p)).unwrap()).unwrap();
        assert_eq!(v["schema"], "synergy-profile/1.12");
        assert!(v["refinement"]["points"]
            .as_array()
            .is_some_and(|a| !a.is_empty()));
        assert!(v["trials"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["role"] == "observed"));
        let m = &v["matrix"]["samples_per_s"];
        let rows = m.as_array().unwrap();
        for j in 0..rows[0].as_array().unwrap().len() {
            for i in 1..rows.len() {
                assert!(
                    rows[i][j].as_f64().unwrap() >= rows[i - 1][j].as_f64().unwrap(),
                    "{p}: column {j} falls at row {i}"
                );
            }
        }
        let src = v["matrix"]["source"].as_array().unwrap();
        assert!(src
            .iter()
            .flat_map(|r| r.as_array().unwrap())
            .all(|c| ["measured", "observed", "modelled"].contains(&c.as_str().unwrap())));
    }
    for name in ["wrong", "right"] {
        let j = job(&report, name);
        assert_eq!(j["status"], "done", "{j}");
        for f in j["fidelity"].as_array().unwrap() {
            assert!(f["observed_samples_per_s"].as_f64().unwrap() > 0.0, "{f}");
            assert!(f["predicted_before"].as_f64().unwrap() > 0.0, "{f}");
            assert!(f["predicted_after"].as_f64().is_some(), "{f}");
        }
    }
    assert!(
        job(&report, "wrong")["fidelity"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
            || job(&report, "right")["fidelity"]
                .as_array()
                .is_some_and(|a| !a.is_empty()),
        "{report}"
    );
    s.assert_clean(pid);
}
