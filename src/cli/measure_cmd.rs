//! `synergy measure`: one trial of a workload under a budget. What was typed becomes a
//! [`TrialRequest`] in [`trial_request`]; the trial runs behind a spinner; [`render`] words the result.

use super::args::{MeasureArgs, WorkloadFlags};
use super::render;
use crate::cancel::Cancel;
use crate::error::InputError;
use crate::format::trial::CacheState;
use crate::measure::{self, EstimatorConfig, TrialError, TrialRequest};
use crate::workload::probe::ProbeKind;
use crate::workload::WorkloadSpec;
use std::path::Path;
use std::time::Duration;

/// Runs `measure`; the exit code is 128 + the signal when one stopped the trial.
pub(super) fn measure_cmd(args: MeasureArgs) -> anyhow::Result<i32> {
    let json = args.json;
    let req = trial_request(args)?;
    super::reap_leftovers();
    let cancel = Cancel::on_signals()?;
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    bar.enable_steady_tick(Duration::from_millis(200));
    let result = measure::run_trial(&req, &bar, &cancel);
    bar.finish_and_clear();
    match result {
        Ok(r) => {
            if let Some(why) = r.disturbance.as_ref().and_then(|d| d.reason.as_deref()) {
                eprintln!(
                    "synergy: warning: this trial was disturbed ({why}); its throughput is not this allocation's: measure again when the host is quiet"
                );
            }
            if json {
                out!("{}", render::json(&r)?)?;
            } else {
                out!("{}", render::render_trial(&r))?;
            }
            Ok(0)
        }
        Err(TrialError::Interrupted(sig)) => {
            eprintln!("synergy: {}", TrialError::Interrupted(sig));
            Ok(128 + sig)
        }
        Err(e) => Err(e.into()),
    }
}

/// The trial `measure`'s flags ask for. The budget's and the estimator's ranges (cores of this host,
/// memory above the footprint, times, precision) are the library's to check when the trial starts.
fn trial_request(args: MeasureArgs) -> Result<TrialRequest, InputError> {
    let spec = args.workload.load(Some("image"))?;
    let cpus = args
        .cpus
        .unwrap_or_else(|| measure::trial::host_cores().len() as f64);
    if spec.dataset.is_none() {
        // These act on the dataset's files: without a dataset they would silently do nothing.
        for (flag, given) in [
            ("--cold", args.cold),
            ("--warm", args.warm),
            ("--storage-bps", args.limits.storage_bps.is_some()),
        ] {
            if given {
                return Err(InputError::new(
                    flag,
                    format!(
                        "{} names no dataset, so there is none to act on; name its directory with --dataset DIR",
                        spec.origin
                    ),
                ));
            }
        }
    }
    let mut req = TrialRequest::new(spec, crate::units::Cores(cpus));
    req.cpu_list = args.cpu_list.map(|c| c.0);
    req.mem_limit = args.mem;
    req.cache_bytes = args.cache_bytes;
    req.cache_state = if args.cold {
        CacheState::Cold
    } else if args.warm {
        CacheState::Warm
    } else {
        CacheState::AsIs
    };
    req.storage_limit = args.limits.storage_bps;
    req.synthetic = args.synthetic;
    req.isolation = args.limits.isolation;
    req.estimator = EstimatorConfig {
        warmup_s: args.warmup_seconds,
        warmup_steps: args.warmup_steps,
        warmup_epochs: args.warmup_epochs,
        warmup_epochs_max_s: f64::INFINITY,
        min_measure_s: args.min_seconds,
        min_measure_steps: args.min_steps,
        long_window_s: f64::INFINITY,
        min_measure_steps_long: 0,
        max_total_s: args.max_seconds,
        rel_precision: args.precision,
        first_epoch_only: false,
        whole_epochs: args.whole_epochs,
    };
    // A --max-seconds out of range (NaN) is the trial's to refuse; until then any timeout will do.
    req.no_progress_timeout = Duration::try_from_secs_f64(args.max_seconds.clamp(10.0, 30.0))
        .unwrap_or(Duration::from_secs(30));
    Ok(req)
}

impl WorkloadFlags {
    /// The workload these flags name, `default` when they name none.
    pub(super) fn load(&self, default: Option<&str>) -> Result<WorkloadSpec, InputError> {
        workload_of(
            self.spec.as_deref(),
            default,
            self.probe,
            self.dataset.as_deref(),
            &self.command,
        )
    }
}

/// The workload of `measure` or `profile`: a spec (file or built-in name), or a bare command after `--`;
/// `--probe` applies to either.
pub(super) fn workload_of(
    spec: Option<&str>,
    default: Option<&str>,
    probe: Option<ProbeKind>,
    dataset: Option<&Path>,
    command: &[String],
) -> Result<WorkloadSpec, InputError> {
    let mut spec = match (spec, command.is_empty()) {
        (Some(s), true) => WorkloadSpec::load(s)?,
        (None, false) => WorkloadSpec::from_command(command, probe)?,
        (Some(s), false) => {
            return Err(InputError::new(
                s,
                "give either a spec or a command after `--`, not both",
            ))
        }
        (None, true) => match default {
            Some(d) => WorkloadSpec::load(d)?,
            None => {
                return Err(InputError::new(
                    "SPEC",
                    "name a workload spec (or a built-in: image, audio, text), or give a command after `--`",
                ))
            }
        },
    };
    if probe.is_some() {
        spec.probe = probe;
    }
    if let Some(dir) = dataset {
        spec.set_dataset_dir(dir)
            .map_err(|why| InputError::new("--dataset", why))?;
    }
    Ok(spec)
}
