//! The run's state file at the start of a run: a fresh one for a new run, or the one a killed executor
//! left, read back for `--resume` with what its live jobs held cleaned up first.

use super::*;

/// The run's state to start from: a fresh one, or the state file's when resuming (after cleaning up what
/// its dead executor left); saved at once under this executor's pid.
pub(super) fn open_state(
    list: &JobList,
    backend: &mut dyn Backend,
    cfg: &ExecConfig,
    jobs_dir: &Path,
    clock: &dyn Clock,
    log: &mut dyn FnMut(&str),
) -> Result<RunState, ExecError> {
    let mut state = if cfg.resume {
        resume_state(list, backend, cfg, log)?
    } else {
        fresh_state(list, &*backend, cfg, jobs_dir, clock)?
    };
    std::fs::create_dir_all(jobs_dir).map_err(|e| ExecError::Io {
        context: format!("creating {}", jobs_dir.display()),
        source: e,
    })?;
    state.executor_pid = std::process::id();
    save_state(&state, &cfg.state_path)?;
    Ok(state)
}

fn fresh_state(
    list: &JobList,
    backend: &dyn Backend,
    cfg: &ExecConfig,
    jobs_dir: &Path,
    clock: &dyn Clock,
) -> Result<RunState, ExecError> {
    if cfg.state_path.exists() && !cfg.fresh {
        let what = match RunState::read(&cfg.state_path) {
            Ok(old) => {
                let done = old
                    .jobs
                    .iter()
                    .filter(|j| j.status == JobStatus::Done)
                    .count();
                format!(
                    "records an earlier run ({done} of {} jobs done)",
                    old.jobs.len()
                )
            }
            // The same reading `--resume` would give it, so both modes say the same of one file.
            Err(e) => match e.field {
                Some(f) => format!(
                    "exists, and --resume would refuse it (field `{f}`: {})",
                    e.message
                ),
                None => format!("exists, and --resume would refuse it ({})", e.message),
            },
        };
        return Err(InputError::new(
            cfg.state_path.display().to_string(),
            format!(
                "{what}; continue it with {}, or discard it and start over with {}",
                crate::error::Setting::Resume,
                crate::error::Setting::Fresh
            ),
        )
        .into());
    }
    // A new run starts every job from zero: earlier progress files of these jobs go (a spread job's
    // task files too).
    for j in &list.jobs {
        let own = jobs_dir.join(format!("{}.json", j.name));
        let tasks = super::super::launch_env::task_state_files(&own);
        for p in std::iter::once(own).chain(tasks) {
            match std::fs::remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(ExecError::Io {
                        context: format!("removing {}", p.display()),
                        source: e,
                    })
                }
            }
        }
    }
    Ok(RunState {
        schema: SCHEMA.to_string(),
        job_list: list.path.display().to_string(),
        backend: backend.name().to_string(),
        policy: cfg.policy.clone(),
        mechanism: cfg.mechanism.clone(),
        round_s: cfg.round_s,
        started_unix_s: clock.unix_s(),
        executor_pid: std::process::id(),
        jobs: list
            .jobs
            .iter()
            .map(|j| JobRecord {
                name: j.name.clone(),
                status: JobStatus::Waiting,
                samples_done: 0,
                finish_s: None,
                retries: 0,
                restarts: 0,
                rounds_run: 0,
                attained_s: 0.0,
                allocation: None,
                handle: None,
                error: None,
            })
            .collect(),
    })
}

/// Whether another process (never this one) holds `pid`.
fn pid_alive(pid: u32) -> bool {
    pid != std::process::id() && crate::fsutil::process_alive(pid as i32)
}

fn resume_state(
    list: &JobList,
    backend: &mut dyn Backend,
    cfg: &ExecConfig,
    log: &mut dyn FnMut(&str),
) -> Result<RunState, ExecError> {
    let origin = cfg.state_path.display().to_string();
    let mut st = RunState::read(&cfg.state_path)?;
    let names: Vec<&str> = st.jobs.iter().map(|j| j.name.as_str()).collect();
    let want: Vec<&str> = list.jobs.iter().map(|j| j.name.as_str()).collect();
    if names != want {
        return Err(InputError::field(
            &origin,
            "jobs",
            format!(
                "records jobs {names:?}, but {} lists {want:?}; resume with the same job list",
                list.path.display()
            ),
        )
        .into());
    }
    if st.backend != backend.name() {
        return Err(InputError::field(
            &origin,
            "backend",
            format!(
                "the run used the {} backend, not {}",
                st.backend,
                backend.name()
            ),
        )
        .into());
    }
    if pid_alive(st.executor_pid)
        && std::fs::read_to_string(format!("/proc/{}/cmdline", st.executor_pid))
            .is_ok_and(|c| c.contains("synergy"))
    {
        return Err(InputError::new(
            &origin,
            format!(
                "executor {} is still running this job list; stop it first",
                st.executor_pid
            ),
        )
        .into());
    }
    let handles: Vec<super::super::JobHandle> =
        st.jobs.iter().filter_map(|j| j.handle.clone()).collect();
    let removed = backend.clean_orphans(st.executor_pid, &handles)?;
    if removed > 0 {
        log(&format!(
            "resume: removed {removed} job(s) left by executor {}",
            st.executor_pid
        ));
    }
    for j in st.jobs.iter_mut() {
        if matches!(j.status, JobStatus::Running | JobStatus::Paused) {
            // Relaunched from its own saved progress at the next round.
            j.status = JobStatus::Waiting;
        }
        j.allocation = None;
        j.handle = None;
    }
    st.policy = cfg.policy.clone();
    st.mechanism = cfg.mechanism.clone();
    st.round_s = cfg.round_s;
    Ok(st)
}

/// Replaces the run's state file atomically.
pub(super) fn save_state(state: &RunState, path: &Path) -> Result<(), ExecError> {
    state.write(path).map_err(|source| ExecError::Io {
        context: "saving the run state".to_string(),
        source,
    })
}
