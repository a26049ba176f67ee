//! The round loop through the fake backend on a fake clock (0.25 s per poll): every test checks the
//! exact calls the executor made, when, and what it reported.

use super::*;
use crate::exec::fake::{Call, FakeBackend, FakeClock, FakeTime, DIED, SIGTERM};
use crate::format::run_state::JobStatus;

const STEP_S: f64 = 0.25;

/// A job list in `dir` of (name, profile, samples, arrival_s); each profile's spec launches nothing
/// and reads no dataset, so nothing is prepared.
fn job_list(dir: &Path, jobs: &[(&str, &str, u64, f64)]) -> JobList {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let mut text = String::new();
    for (name, profile, samples, arrival) in jobs {
        let spec = dir.join(format!("{profile}.toml"));
        std::fs::write(
            &spec,
            format!("name = \"{profile}\"\ncommand = [\"true\"]\nbatch_size = 32\n"),
        )
        .unwrap();
        text.push_str(&format!(
            "[[job]]\nname = \"{name}\"\nworkload = \"{}\"\nprofile = \"{}\"\nsamples = {samples}\narrival_s = {arrival}\n\n",
            spec.display(),
            root.join("profiles").join(format!("{profile}.json")).display()
        ));
    }
    let path = dir.join("jobs.toml");
    std::fs::write(&path, text).unwrap();
    JobList::read(&path).unwrap()
}

fn config(dir: &Path, policy: &str, mechanism: &str, max_retries: u32) -> ExecConfig {
    ExecConfig {
        policy: policy.into(),
        mechanism: mechanism.into(),
        round_s: 2.0,
        max_retries,
        state_path: dir.join("jobs.state.json"),
        resume: false,
        fresh: false,
        refine: false,
        include_disturbed: false,
    }
}

/// Runs `list` on `backend` with `clock`; the report and the lines logged.
fn go(
    list: &JobList,
    backend: &mut FakeBackend,
    cfg: &ExecConfig,
    cancel: &Cancel,
    clock: &mut FakeClock,
) -> (RunReport, String) {
    let mut lines = Vec::new();
    let report = run_on(
        list,
        backend,
        cfg,
        cancel,
        &mut |l: &str| lines.push(l.to_string()),
        clock,
    )
    .unwrap();
    (report, lines.join("\n"))
}

fn result<'r>(r: &'r RunReport, name: &str) -> &'r JobResult {
    r.jobs.iter().find(|j| j.name == name).unwrap()
}

fn start(from: u64, gpus: &[u32]) -> Call {
    Call::Start {
        gpus: gpus.to_vec(),
        from,
    }
}

#[test]
fn jobs_start_at_the_first_round_after_they_arrive_and_queue_for_free_gpus() {
    let dir = tempfile::tempdir().unwrap();
    // Two GPUs: b and c arrive together at 3 s, b takes the free GPU at the round at 4 s and c waits
    // until b's GPU is free again.
    let list = job_list(
        dir.path(),
        &[
            ("a", "text", 8000, 0.0),
            ("b", "text", 2000, 3.0),
            ("c", "text", 2000, 3.0),
        ],
    );
    let time = FakeTime::default();
    let mut backend = FakeBackend::new(&time, 2, 8, 64, 1000.0);
    let cfg = config(dir.path(), "fifo", "proportional", 0);
    let (report, log) = go(
        &list,
        &mut backend,
        &cfg,
        &Cancel::new(),
        &mut FakeClock::new(&time, STEP_S),
    );
    let gpus = |job: &str| match &backend.calls(job)[0] {
        Call::Start { gpus, .. } => gpus.clone(),
        other => panic!("{job} began with {other:?}"),
    };
    let (a, b) = (gpus("a"), gpus("b"));
    assert!(a.len() == 1 && b.len() == 1 && a != b, "{a:?} {b:?}");
    assert_eq!(gpus("c"), b);
    for (job, times) in [("a", [0.0, 8.0]), ("b", [4.0, 6.0]), ("c", [6.0, 8.0])] {
        assert_eq!(
            backend.calls(job),
            [start(0, &gpus(job)), Call::Stop],
            "{job}"
        );
        assert_eq!(backend.times(job), times, "{job}");
    }
    assert!(
        log.contains("round 3 at 4.0 s:\n  c                waits\n"),
        "{log}"
    );
    assert!(log.contains("job `b` done at 6.0 s"), "{log}");
    let jcts: Vec<Option<f64>> = ["a", "b", "c"]
        .iter()
        .map(|j| result(&report, j).real_jct_s)
        .collect();
    assert_eq!(jcts, [Some(8.0), Some(3.0), Some(5.0)]);
    assert!(report
        .jobs
        .iter()
        .all(|j| j.status == JobStatus::Done && j.predicted_jct_s.is_some()));
    // Rounds at 0, 2, 4 and 6 s; at 8 s every job is done before a fifth.
    assert_eq!((report.rounds, report.makespan_s), (4, 8.0));
    assert_eq!(report.interrupted, None);
    // The state file says the same.
    let st = RunState::read(&cfg.state_path).unwrap();
    assert!(st
        .jobs
        .iter()
        .all(|j| j.status == JobStatus::Done && j.handle.is_none() && j.allocation.is_none()));
    assert_eq!(st.jobs[1].finish_s, Some(6.0));
}

/// Two equal jobs on one GPU under LAS: they take turns, round by round.
fn taking_turns(dir: &Path) -> (JobList, ExecConfig) {
    let list = job_list(dir, &[("a", "text", 6400, 0.0), ("b", "text", 6400, 0.0)]);
    (list, config(dir, "las", "proportional", 0))
}

#[test]
fn a_job_that_loses_its_gpu_is_paused_and_resumed_where_it_stood() {
    let dir = tempfile::tempdir().unwrap();
    let (list, cfg) = taking_turns(dir.path());
    let time = FakeTime::default();
    let mut backend = FakeBackend::new(&time, 1, 4, 64, 1600.0);
    let (report, log) = go(
        &list,
        &mut backend,
        &cfg,
        &Cancel::new(),
        &mut FakeClock::new(&time, STEP_S),
    );
    let turns = [start(0, &[0]), Call::Pause, Call::Resume, Call::Stop];
    assert_eq!(backend.calls("a"), turns);
    assert_eq!(backend.times("a"), [0.0, 2.0, 4.0, 6.0]);
    assert_eq!(backend.calls("b"), turns);
    assert_eq!(backend.times("b"), [2.0, 4.0, 6.0, 8.0]);
    // Pauses go first, so the GPU is free before b takes it.
    let seq: Vec<(&str, &Call)> = backend
        .sequence()
        .iter()
        .filter(|c| c.0 == 2.0)
        .map(|c| (c.1.as_str(), &c.2))
        .collect();
    assert_eq!(seq, [("a", &Call::Pause), ("b", &start(0, &[0]))]);
    assert!(
        log.contains("  a                paused\n  b                gpu 0"),
        "{log}"
    );
    assert!(log.contains("(resumed)"), "{log}");
    // Paused, a made no progress: two rounds of work each, done one after the other.
    assert_eq!(result(&report, "a").real_jct_s, Some(6.0));
    assert_eq!(result(&report, "b").real_jct_s, Some(8.0));
    assert_eq!(result(&report, "a").restarts, 0);
}

#[test]
fn tune_resizes_a_running_job_live_when_another_arrives_and_when_it_leaves() {
    let dir = tempfile::tempdir().unwrap();
    // Two GPUs, two cores: alone, `first` gets its best case (the image profile's 1.25 cores per
    // GPU); with `second` beside it, each gets its proportional core.
    let list = job_list(
        dir.path(),
        &[
            ("first", "image", 6000, 0.0),
            ("second", "image", 1000, 3.0),
        ],
    );
    let best = list
        .catalog
        .get(list.jobs[0].model as usize)
        .best_cpus_per_gpu;
    assert!(best > 1.0 && best < 2.0, "{best}");
    let time = FakeTime::default();
    let mut backend = FakeBackend::new(&time, 2, 2, 64, 500.0);
    let cfg = config(dir.path(), "fifo", "tune", 0);
    let (report, log) = go(
        &list,
        &mut backend,
        &cfg,
        &Cancel::new(),
        &mut FakeClock::new(&time, STEP_S),
    );
    let calls = backend.calls("first");
    let Call::Start { gpus, .. } = &calls[0] else {
        panic!("{calls:?}");
    };
    let resize = |cpus: f64| Call::Reallocate {
        gpus: gpus.clone(),
        cpus,
        change: Change::Live,
    };
    assert_eq!(
        calls,
        [start(0, gpus), resize(1.0), resize(best), Call::Stop],
        "{log}"
    );
    assert_eq!(backend.times("first"), [0.0, 4.0, 6.0, 12.0]);
    // Shrunk before the newcomer starts, in the same round.
    let at4: Vec<&str> = backend
        .sequence()
        .iter()
        .filter(|c| c.0 == 4.0)
        .map(|c| c.1.as_str())
        .collect();
    assert_eq!(at4, ["first", "second"]);
    assert!(log.contains("(resized live)"), "{log}");
    assert_eq!(result(&report, "first").restarts, 0);
    assert_eq!(result(&report, "second").real_jct_s, Some(3.0));
}

#[test]
fn a_crashed_job_is_restarted_from_its_progress_and_one_that_keeps_crashing_fails() {
    let dir = tempfile::tempdir().unwrap();
    let list = job_list(
        dir.path(),
        &[("flaky", "text", 3000, 0.0), ("broken", "text", 3000, 0.0)],
    );
    let time = FakeTime::default();
    let mut backend = FakeBackend::new(&time, 2, 4, 64, 1000.0)
        .crash_at("flaky", &[1000])
        .crash_at("broken", &[500, 1000, 1500]);
    let cfg = config(dir.path(), "fifo", "proportional", 2);
    let (report, log) = go(
        &list,
        &mut backend,
        &cfg,
        &Cancel::new(),
        &mut FakeClock::new(&time, STEP_S),
    );
    let gpus = |job: &str| match &backend.calls(job)[0] {
        Call::Start { gpus, .. } => gpus.clone(),
        other => panic!("{job} began with {other:?}"),
    };
    assert_eq!(
        backend.calls("flaky"),
        [
            start(0, &gpus("flaky")),
            Call::Restart { from: 1000 },
            Call::Stop
        ]
    );
    assert_eq!(backend.times("flaky"), [0.0, 1.0, 3.0]);
    assert_eq!(
        backend.calls("broken"),
        [
            start(0, &gpus("broken")),
            Call::Restart { from: 500 },
            Call::Restart { from: 1000 },
            Call::Stop
        ]
    );
    assert_eq!(backend.times("broken"), [0.0, 0.5, 1.0, 1.5]);
    let flaky = result(&report, "flaky");
    assert_eq!(
        (flaky.status, flaky.retries, flaky.real_jct_s),
        (JobStatus::Done, 1, Some(3.0))
    );
    let broken = result(&report, "broken");
    assert_eq!((broken.status, broken.retries), (JobStatus::Failed, 2));
    assert_eq!(
        broken.error.as_deref(),
        Some("job `broken` failed (exit status 3) after 2 retries; its stderr ends with:\nboom at 1500")
    );
    assert!(
        log.contains("job `broken` crashed (exit status 3); retry 1 of 2; its stderr ends with:\nboom at 500"),
        "{log}"
    );
    let st = RunState::read(&cfg.state_path).unwrap();
    assert_eq!(st.jobs[1].samples_done, 1500);
}

#[test]
fn an_interrupted_run_stops_every_job_and_resumes_from_their_progress() {
    let dir = tempfile::tempdir().unwrap();
    let (list, mut cfg) = taking_turns(dir.path());
    let time = FakeTime::default();
    let cancel = Cancel::new();
    let mut first = FakeBackend::new(&time, 1, 4, 64, 1600.0);
    let (report, _) = go(
        &list,
        &mut first,
        &cfg,
        &cancel,
        &mut FakeClock::new(&time, STEP_S).signal_at(3.0, &cancel),
    );
    assert_eq!(report.interrupted, Some(SIGTERM));
    assert_eq!(report.makespan_s, 3.0);
    // Every job stopped, a while paused and b while running, each with its progress saved.
    assert_eq!(first.calls("a"), [start(0, &[0]), Call::Pause, Call::Stop]);
    assert_eq!(first.calls("b"), [start(0, &[0]), Call::Stop]);
    let st = RunState::read(&cfg.state_path).unwrap();
    let saved: Vec<(JobStatus, u64, bool)> = st
        .jobs
        .iter()
        .map(|j| (j.status, j.samples_done, j.handle.is_none()))
        .collect();
    assert_eq!(
        saved,
        [
            (JobStatus::Waiting, 3200, true),
            (JobStatus::Waiting, 1600, true)
        ]
    );

    cfg.resume = true;
    let mut second = FakeBackend::new(&time, 1, 4, 64, 1600.0);
    let (report, log) = go(
        &list,
        &mut second,
        &cfg,
        &Cancel::new(),
        &mut FakeClock::new(&time, STEP_S),
    );
    // Nothing was left to clean up, and each job went on from its own saved progress.
    assert_eq!(second.orphan_calls, [(std::process::id(), vec![])]);
    assert!(!log.contains("resume: removed"), "{log}");
    assert_eq!(second.calls("a"), [start(3200, &[0]), Call::Stop]);
    assert_eq!(second.times("a"), [3.0, 5.0]);
    assert_eq!(second.calls("b"), [start(1600, &[0]), Call::Stop]);
    assert_eq!(second.times("b"), [5.0, 8.0]);
    assert!(log.contains("(started from 3200 samples)"), "{log}");
    // JCTs count from the first executor's start.
    assert_eq!(result(&report, "a").real_jct_s, Some(5.0));
    assert_eq!(result(&report, "b").real_jct_s, Some(8.0));
    // Rounds at 3, 5 and 7 s by this executor.
    assert_eq!((report.rounds, report.interrupted), (3, None));
}

#[test]
fn a_killed_executor_s_jobs_are_cleaned_up_on_resume_and_continue() {
    let dir = tempfile::tempdir().unwrap();
    let (list, mut cfg) = taking_turns(dir.path());
    let time = FakeTime::default();
    let mut first = FakeBackend::new(&time, 1, 4, 64, 1600.0);
    let died = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        go(
            &list,
            &mut first,
            &cfg,
            &Cancel::new(),
            &mut FakeClock::new(&time, STEP_S).die_at(3.0),
        )
    }))
    .expect_err("the executor died");
    assert_eq!(
        died.downcast_ref::<String>().map(String::as_str),
        Some(DIED)
    );
    // Nothing was stopped: the state file still names both jobs' domains, as of the round at 2 s.
    assert!(
        first.calls("b") == [start(0, &[0])],
        "{:?}",
        first.calls("b")
    );
    let st = RunState::read(&cfg.state_path).unwrap();
    let left: Vec<(JobStatus, Option<String>)> = st
        .jobs
        .iter()
        .map(|j| (j.status, j.handle.clone().and_then(|h| h.domain)))
        .collect();
    assert_eq!(
        left,
        [
            (JobStatus::Paused, Some("fake-a".into())),
            (JobStatus::Running, Some("fake-b".into()))
        ]
    );

    cfg.resume = true;
    let mut second = FakeBackend::new(&time, 1, 4, 64, 1600.0);
    let (report, log) = go(
        &list,
        &mut second,
        &cfg,
        &Cancel::new(),
        &mut FakeClock::new(&time, STEP_S),
    );
    let pid = std::process::id();
    assert_eq!(
        second.orphan_calls,
        [(pid, vec!["fake-a".to_string(), "fake-b".to_string()])]
    );
    assert!(
        log.starts_with(&format!(
            "resume: removed 2 job(s) left by executor {pid}\n"
        )),
        "{log}"
    );
    // b's workload saved 0.75 s of work (1200 samples) before its executor died.
    assert_eq!(second.calls("a"), [start(3200, &[0]), Call::Stop]);
    assert_eq!(second.calls("b"), [start(1200, &[0]), Call::Stop]);
    assert_eq!(result(&report, "b").real_jct_s, Some(8.25));
    assert!(report.jobs.iter().all(|j| j.status == JobStatus::Done));
}

#[test]
fn a_new_run_over_an_earlier_runs_state_is_refused_unless_asked_to_start_over() {
    let dir = tempfile::tempdir().unwrap();
    let list = job_list(dir.path(), &[("a", "text", 2000, 0.0)]);
    let time = FakeTime::default();
    let mut backend = FakeBackend::new(&time, 1, 8, 64, 1000.0);
    let mut cfg = config(dir.path(), "fifo", "proportional", 0);
    let (report, _) = go(
        &list,
        &mut backend,
        &cfg,
        &Cancel::new(),
        &mut FakeClock::new(&time, STEP_S),
    );
    assert!(report.jobs.iter().all(|j| j.status == JobStatus::Done));
    let before = std::fs::read(&cfg.state_path).unwrap();
    let err = run_on(
        &list,
        &mut backend,
        &cfg,
        &Cancel::new(),
        &mut |_: &str| {},
        &mut FakeClock::new(&time, STEP_S),
    )
    .unwrap_err();
    let ExecError::Input(e) = &err else {
        panic!("not an input error: {err}")
    };
    assert!(e.message.contains("1 of 1 jobs done"), "{e}");
    assert!(
        e.message.contains("setting `resume`") && e.message.contains("setting `fresh`"),
        "{e}"
    );
    assert_eq!(
        std::fs::read(&cfg.state_path).unwrap(),
        before,
        "the state is kept"
    );
    cfg.fresh = true;
    let (report, _) = go(
        &list,
        &mut backend,
        &cfg,
        &Cancel::new(),
        &mut FakeClock::new(&time, STEP_S),
    );
    assert!(report.jobs.iter().all(|j| j.status == JobStatus::Done));
}

#[test]
fn a_job_wider_than_a_server_is_spread_over_two_and_started_on_the_gpus_of_both() {
    let dir = tempfile::tempdir().unwrap();
    let list = job_list(dir.path(), &[("wide", "text", 3200, 0.0)]);
    let text = std::fs::read_to_string(&list.path)
        .unwrap()
        .replace("samples =", "gpus = 2\nsamples =");
    std::fs::write(&list.path, text).unwrap();
    let list = JobList::read(&list.path).unwrap();
    let time = FakeTime::default();
    // Two servers of one GPU and 4 cores each.
    let mut backend = FakeBackend::new(&time, 1, 4, 64, 1600.0).servers(2);
    let cfg = config(dir.path(), "fifo", "proportional", 0);
    let (report, log) = go(
        &list,
        &mut backend,
        &cfg,
        &Cancel::new(),
        &mut FakeClock::new(&time, STEP_S),
    );
    // GPU 0 of each server, each with its server's 4 cores.
    assert_eq!(backend.calls("wide"), [start(0, &[0, 0]), Call::Stop]);
    assert!(
        log.contains("wide             gpu 0 cores 0,1,2,3 (4.00) mem 64.0 GiB on fake-0 + gpu 0 cores 0,1,2,3 (4.00) mem 64.0 GiB on fake-1 (started)"),
        "{log}"
    );
    assert_eq!(result(&report, "wide").status, JobStatus::Done);
    assert!(result(&report, "wide").predicted_jct_s.is_some());
}
