//! Slurm's own accounting, round trip: a queue run by `synergy run --backend slurm` against the real
//! daemons `scripts/slurm-setup.sh` starts (slurmctld, slurmd, slurmdbd with MariaDB), read back with
//! `sacct --parsable2`, imported with `synergy trace import --format sacct` and simulated. The imported
//! arrivals, GPU counts and run times must match what the executor recorded, with a job it resubmitted
//! (new cores at a round boundary) folded back into one job (docs/traces.md, "Jobs synergy run
//! resubmitted"). Without a running cluster with accounting this test fails and says how to start one.

use crate::common::{self, finish, job, profiles, serial, synergy, RunSetup};
use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};
use synergy::exec::slurm::Slurm;

const COLUMNS: &str =
    "JobID,Submit,Start,End,Elapsed,AllocTRES,ReqTRES,State,Partition,JobName,Comment";
const ROUND_S: f64 = 2.0;

/// `sacct -a --parsable2` of every job (and step) since `since`, as text.
fn sacct(since: &str) -> String {
    let out = Command::new("sacct")
        .args(["-a", "--parsable2", "-S", since, "-o", COLUMNS])
        .output()
        .expect("sacct runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && text.starts_with("JobID|"),
        "sacct does not work (start the accounting with scripts/slurm-setup.sh): {}{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// Seconds in sacct's `[D-]HH:MM:SS`.
fn elapsed_s(e: &str) -> f64 {
    let (days, hms) = e.split_once('-').unwrap_or(("0", e));
    let p: Vec<f64> = hms.split(':').map(|x| x.parse().unwrap()).collect();
    days.parse::<f64>().unwrap() * 86400.0 + p[0] * 3600.0 + p[1] * 60.0 + p[2]
}

/// Seconds from sacct's `Submit` to its `Start` (both `YYYY-MM-DDTHH:MM:SS`): how long Slurm held a
/// submission pending.
fn pending_s(submit: &str, start: &str) -> f64 {
    let at = |s: &str| chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S").unwrap();
    (at(start) - at(submit)).num_seconds() as f64
}

/// When the executor first started each job, seconds after the run began: from its round log
/// (`round N at T s:` then `  NAME ... (started)`).
fn first_starts(stderr: &str) -> BTreeMap<String, f64> {
    let mut at = 0.0;
    let mut starts = BTreeMap::new();
    for line in stderr.lines() {
        if let Some(t) = line
            .strip_prefix("round ")
            .and_then(|l| l.split(" at ").nth(1))
            .and_then(|l| l.strip_suffix(" s:"))
        {
            at = t.parse().unwrap();
        } else if line.ends_with("(started)") {
            let name = line.split_whitespace().next().unwrap().to_string();
            starts.entry(name).or_insert(at);
        }
    }
    starts
}

#[test]
fn a_run_read_back_with_sacct_imports_as_the_executor_recorded_it() {
    if let Err(e) = Slurm::new().ping() {
        panic!("this test needs a running Slurm cluster with accounting: {e}");
    }
    let _g = serial();
    let s = RunSetup::new();
    let image = s.spec("img", "image", 900);
    // Tune gives the lone first job two cores; when `second` arrives both get one, so `first` is
    // cancelled and submitted again (twice: back to two cores when `second` is done). `second` arrives
    // before the second round and `first` is long enough (at most 900 samples/s) to still run then, on a
    // fast host too. `wide` needs both GPUs and waits until they are free.
    let mut list = String::new();
    for (name, gpus, samples, arrival) in [
        ("first", 1, 6000, 0.0),
        ("second", 1, 900, 1.0),
        ("wide", 2, 1200, 4.0),
    ] {
        list.push_str(&format!(
            "[[job]]\nname = \"{name}\"\nworkload = \"{}\"\nprofile = \"{}\"\ngpus = {gpus}\n\
             samples = {samples}\narrival_s = {arrival}\n\n",
            image.display(),
            profiles().join("image.json").display()
        ));
    }
    let jobs = s.path().join("jobs.toml");
    std::fs::write(&jobs, list).unwrap();
    let date = Command::new("date")
        .arg("+%Y-%m-%dT%H:%M:%S")
        .output()
        .unwrap();
    let since = String::from_utf8(date.stdout).unwrap().trim().to_string();

    let child = s.start(
        &jobs,
        &["--backend", "slurm", "--round", "2", "--mechanism", "tune"],
    );
    let pid = child.id();
    let (report, stderr, code) = finish(child);
    assert_eq!(code, Some(0), "{stderr}");
    let state = common::read_json(s.path().join("jobs.state.json"));
    let record = |name: &str| {
        state["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["name"] == name)
            .unwrap()
            .clone()
    };
    let starts = first_starts(&stderr);
    assert_eq!(starts.len(), 3, "{stderr}");
    assert!(
        record("first")["restarts"].as_u64().unwrap() >= 1,
        "first was never resubmitted: {stderr}"
    );

    // slurmdbd receives each job's end a moment after slurmctld: wait until every submission of the
    // run has its final row.
    let prefix = format!("synergy-run-{pid}-");
    let deadline = Instant::now() + Duration::from_secs(60);
    let text = loop {
        let text = sacct(&since);
        let ours: Vec<&str> = text.lines().filter(|l| l.contains(&prefix)).collect();
        let ended = ours.iter().all(|l| {
            let state = l.split('|').nth(7).unwrap();
            !matches!(state, "RUNNING" | "PENDING" | "COMPLETING" | "REQUEUED")
        });
        let names = ["first", "second", "wide"]
            .iter()
            .all(|n| ours.iter().any(|l| l.contains(&format!("|{prefix}{n}|"))));
        if ended && names {
            break text;
        }
        assert!(
            Instant::now() < deadline,
            "sacct never showed the run:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    // This run's jobs and their steps (`123.batch`), nothing else of the cluster's history.
    let mut ids = Vec::new();
    let mut submissions: BTreeMap<String, Vec<Vec<String>>> = BTreeMap::new();
    let mut file = String::new();
    for (i, line) in text.lines().enumerate() {
        let f: Vec<String> = line.split('|').map(str::to_string).collect();
        let base = f[0].split('.').next().unwrap().to_string();
        if f[9].starts_with(&prefix) {
            ids.push(base.clone());
            submissions
                .entry(f[9].trim_start_matches(&prefix).to_string())
                .or_default()
                .push(f.clone());
        }
        if i == 0 || ids.contains(&base) {
            file.push_str(line);
            file.push('\n');
        }
    }
    assert!(file.contains(".batch|"), "steps are in the file: {file}");
    for (name, subs) in &submissions {
        let restarts = record(name)["restarts"].as_u64().unwrap() as usize;
        assert!(subs.len() > restarts, "{name}: {subs:?}");
        // The executor's comment: the model, and its mark (pid and start second), the same on each.
        let mark = format!("synergy:image synergy-run:{pid}-");
        assert!(
            subs.iter()
                .all(|x| x[10].starts_with(&mark) && x[10] == subs[0][10]),
            "{subs:?}"
        );
        // A job that did its work ends COMPLETED; the submissions before it were cancelled by the executor.
        assert_eq!(subs.last().unwrap()[7], "COMPLETED", "{name}: {subs:?}");
    }
    assert!(submissions["first"].len() >= 2, "{file}");
    let trace_in = s.path().join("run.sacct");
    std::fs::write(&trace_in, &file).unwrap();

    // Imported with the default states (completed only): every job is kept, folded.
    let profiles_dir = profiles();
    let cluster = [
        "--profiles",
        profiles_dir.to_str().unwrap(),
        "--servers",
        "1",
        "--server-gpus",
        "2",
        "--server-cpus",
        "2",
        "--server-mem-gb",
        "20",
    ];
    let trace = s.path().join("trace.csv");
    let out = synergy()
        .args(["trace", "import", "--format", "sacct", "--json", "--out"])
        .arg(&trace)
        .arg(&trace_in)
        .args(cluster)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["kept"], 3, "{summary}");
    let csv = std::fs::read_to_string(&trace).unwrap();
    let mut rows = csv::Reader::from_reader(csv.as_bytes());
    let header = rows.headers().unwrap().clone();
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    // A folded job's id is its first submission's (sacct lists a run's jobs in id order).
    let imported: BTreeMap<String, csv::StringRecord> = rows
        .records()
        .map(|r| {
            let r = r.unwrap();
            let name = submissions
                .iter()
                .find(|(_, subs)| subs[0][0] == r[col("source_id")])
                .unwrap_or_else(|| panic!("{r:?} is no job's first submission: {file}"))
                .0
                .clone();
            (name, r)
        })
        .collect();
    assert_eq!(imported.len(), 3, "{csv}");
    let t0 = starts.values().cloned().fold(f64::INFINITY, f64::min);
    let iter_s = {
        let p = common::read_json(profiles().join("image.json"));
        p["workload"]["iter_time_s"].as_f64()
    };
    let mut numbers = Vec::new();
    for name in ["first", "second", "wide"] {
        let r = &imported[name];
        let rec = record(name);
        assert_eq!(&r[col("model")], "image", "{csv}");
        assert_eq!(
            r[col("gpus")].parse::<u64>().unwrap(),
            job(&report, name)["gpus"].as_u64().unwrap(),
            "{csv}"
        );
        // Arrivals: Slurm's Submit (whole seconds) against the round the executor started the job in.
        let arrival: f64 = r[col("arrival_s")].parse().unwrap();
        let expected = starts[name] - t0;
        assert!(
            (arrival - expected).abs() <= 1.5,
            "{name}: imported arrival {arrival} s, executor started it at {expected} s\n{csv}"
        );
        // Run time: the sum of the submissions' Elapsed, which is what the executor held the job for
        // (its attained service, in whole rounds) less the start of each submission (about 1.6 s,
        // docs/slurm.md) and at most one round.
        let duration: f64 = r[col("duration_s")].parse().unwrap();
        let subs = &submissions[name];
        let sum: f64 = subs.iter().map(|x| elapsed_s(&x[4])).sum();
        assert_eq!(duration, sum, "{name}: {subs:?}");
        let attained = rec["attained_s"].as_f64().unwrap();
        let wall = rec["finish_s"].as_f64().unwrap() - starts[name];
        // The executor's clock also runs while Slurm holds a submission pending for its next
        // scheduling pass (seen: 2 s on a busy host), which Elapsed does not count.
        let pending: f64 = subs.iter().map(|x| pending_s(&x[1], &x[2])).sum();
        assert!(
            duration <= wall + 1.0 && duration >= wall - pending - 3.0 * subs.len() as f64,
            "{name}: {duration} s in Slurm ({pending} s pending before), {wall} s from its start \
             to done\n{file}"
        );
        assert!(
            (duration - attained).abs() <= ROUND_S + 3.0 * subs.len() as f64,
            "{name}: {duration} s in Slurm, {attained} s attained\n{file}"
        );
        if let Some(it) = iter_s {
            let iters: f64 = r[col("iters")].parse().unwrap();
            // Truncated, at least one (docs/traces.md).
            assert!(
                iters >= 1.0 && iters * it <= duration.max(it) + 1e-9,
                "{csv}"
            );
            assert!(duration < (iters + 1.0) * it, "{csv}");
        }
        numbers.push(format!(
            "{name}: {} submission(s), arrival {arrival} s (executor {expected} s), \
             {duration} s run (executor: {wall:.1} s start to done, {attained} s attained)",
            subs.len()
        ));
    }
    eprintln!("sacct round trip: {}", numbers.join("; "));

    // Simulated from the imported trace, and from the sacct file directly: the same three jobs.
    for args in [
        vec!["--trace", trace.to_str().unwrap()],
        vec![
            "--trace",
            trace_in.to_str().unwrap(),
            "--trace-format",
            "sacct",
        ],
    ] {
        let out = synergy()
            .arg("simulate")
            .args(&args)
            .args(cluster)
            .args(["--mechanism", "proportional", "--round-s", "2", "--json"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["jct"]["jobs"], 3, "{v}");
    }
}
