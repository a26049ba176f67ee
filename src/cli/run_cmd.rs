//! `synergy run`: a job list for real, on this server or a Slurm cluster, or its plan (`--dry-run`).
//! [`backend_options`] checks which flags the chosen backend takes and turns them into its options;
//! [`render`] words the report.

use super::args::{RunBackend, RunCmdArgs};
use super::render;
use super::EXIT_FAILURE;
use crate::cancel::Cancel;
use crate::error::InputError;
use crate::exec::slurm::Slurm;
use crate::exec::slurm_backend::{self, SlurmOptions};
use crate::exec::{executor, jobs::JobList, local, local::LocalOptions};

/// Runs `run`: exit code 1 when a job failed, 128 + the signal when one stopped the run.
pub(super) fn run_cmd(args: RunCmdArgs) -> anyhow::Result<i32> {
    let list = JobList::read(&args.jobs)?;
    let (local_opts, slurm_opts) = backend_options(&args)?;
    // The servers' shape only: no cgroups are made, no cores claimed, nothing submitted. Enough for a plan,
    // and for refusing a job list the servers cannot hold before anything starts.
    let servers = match args.backend {
        RunBackend::Local => local::discover(&local_opts)?,
        RunBackend::Slurm => slurm_backend::discover(&Slurm::new(), &slurm_opts)?,
    };
    if args.dry_run {
        let rounds =
            executor::dry_run(&list, &servers, &args.policy, &args.mechanism, args.round_s)?;
        if args.json {
            out!("{}", render::json(&rounds)?)?;
        } else {
            out!("{}", render::render_plan(&rounds))?;
        }
        return Ok(0);
    }
    let state_path = args
        .state
        .clone()
        .unwrap_or_else(|| args.jobs.with_extension("state.json"));
    let cfg = executor::ExecConfig {
        policy: args.policy.clone(),
        mechanism: args.mechanism.clone(),
        round_s: args.round_s,
        max_retries: args.max_retries,
        state_path,
        resume: args.resume,
        fresh: args.fresh,
        refine: args.refine,
        include_disturbed: args.include_disturbed,
    };
    executor::check_servers(&list, &servers)?;
    super::reap_leftovers();
    let cancel = Cancel::on_signals()?;
    let mut backend: Box<dyn crate::exec::Backend> = match args.backend {
        RunBackend::Local => Box::new(local::LocalBackend::new(&local_opts)?),
        RunBackend::Slurm => Box::new(slurm_backend::SlurmBackend::new(Slurm::new(), &slurm_opts)?),
    };
    let mut log = |line: &str| eprintln!("{line}");
    let report = executor::run(&list, backend.as_mut(), &cfg, &cancel, &mut log)?;
    drop(backend);
    if args.json {
        out!("{}", render::json(&report)?)?;
    } else {
        out!("{}", render::render_run(&report))?;
    }
    if let Some(sig) = report.interrupted {
        eprintln!(
            "synergy: interrupted; every job was stopped and its progress saved in {} (continue with --resume)",
            cfg.state_path.display()
        );
        return Ok(128 + sig);
    }
    let failed = report
        .jobs
        .iter()
        .any(|j| j.status == crate::format::run_state::JobStatus::Failed);
    Ok(if failed { EXIT_FAILURE } else { 0 })
}

/// Both backends' options from the flags, after refusing the flags the chosen backend does not take.
fn backend_options(args: &RunCmdArgs) -> Result<(LocalOptions, SlurmOptions), InputError> {
    match args.backend {
        RunBackend::Slurm if args.gpus.is_some() => {
            return Err(InputError::new(
                "--gpus",
                "the Slurm backend takes its GPUs from the nodes' GRES; leave --gpus out",
            ))
        }
        RunBackend::Local if !args.nodes.is_empty() || args.partition.is_some() => {
            return Err(InputError::new(
                if args.nodes.is_empty() {
                    "--partition"
                } else {
                    "--node"
                },
                "only the Slurm backend (--backend slurm) places jobs on nodes and partitions",
            ))
        }
        _ => {}
    }
    let local = LocalOptions {
        emulated_gpus: args.gpus,
        cpus: args.cpus,
        memory: args.mem,
    };
    let slurm = SlurmOptions {
        nodes: args.nodes.clone(),
        partition: args.partition.clone(),
        cpus: args.cpus,
        memory: args.mem,
    };
    Ok((local, slurm))
}
