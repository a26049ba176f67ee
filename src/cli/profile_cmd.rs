//! `synergy profile`, `predict` and `import-zoo`: making profiles and reading them. What `profile`'s
//! flags ask for becomes a [`ProfileRequest`] in [`profile_request`].

use super::args::{PredictArgs, ProfileAction, ProfileArgs, RefineArgs, ReplayArgs};
use super::measure_cmd::workload_of;
use super::render;
use super::values::{check_positive, parse_axis};
use crate::cancel::Cancel;
use crate::error::InputError;
use crate::error::Setting;
use crate::format::profile::Profile;
use crate::measure::TrialError;
use crate::profile::plan::{self, ProfileRequest, ProfileRunError};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Runs `profile refine`: reads every observation log `--from` names, refines the profile, writes it.
fn refine_cmd(args: RefineArgs) -> anyhow::Result<i32> {
    use crate::format::observation as observe;
    let origin = args.profile.display().to_string();
    let profile = Profile::read(&args.profile)?;
    let mut logs = Vec::new();
    for f in &args.from {
        logs.extend(observe::logs_in(f)?);
    }
    let mut observations = Vec::new();
    for l in &logs {
        let read = observe::read_log(l)?;
        for s in &read.skipped {
            eprintln!("synergy: {s}");
        }
        observations.extend(read.observations);
    }
    let from: Vec<String> = logs.iter().map(|l| l.display().to_string()).collect();
    let (refined, summary) = crate::profile::refine::refine(
        &profile,
        &origin,
        &observations,
        &from,
        args.include_disturbed,
    )?;
    let out = args
        .out
        .unwrap_or_else(|| args.profile.with_extension("refined.json"));
    refined.write(&out)?;
    if args.json {
        out!("{}", render::json(&refined)?)?;
    } else {
        out!("{}", render::render_refinement(&summary, &out))?;
    }
    Ok(0)
}

/// Runs `profile replay`: the plan again over the profile's own trials, with nothing measured.
fn replay_cmd(args: ReplayArgs) -> anyhow::Result<i32> {
    let origin = args.profile.display().to_string();
    let profile = Profile::read(&args.profile)?;
    let spec = match args.spec {
        Some(s) => s,
        None => plan::spec_of(&profile, &origin)?,
    };
    let spec = workload_of(Some(&spec), None, None, None, &[])?;
    let out = args
        .out
        .unwrap_or_else(|| args.profile.with_extension("replayed.json"));
    let req = plan::replay_request(&profile, &origin, spec, out.clone())?;
    // Generating the dataset again can take a while; Ctrl-C stops it cleanly.
    let cancel = Cancel::on_signals()?;
    let p = match plan::run_profile(&req, &indicatif::ProgressBar::hidden(), &cancel) {
        Ok(p) => p,
        Err(ProfileRunError::Trial(TrialError::Interrupted(sig))) => {
            eprintln!("synergy: interrupted by signal {sig}; nothing was written");
            return Ok(128 + sig);
        }
        Err(e) => return Err(e.into()),
    };
    if args.json {
        out!("{}", render::json(&p)?)?;
    } else {
        out!("{}", profile_text(&p, &out))?;
    }
    Ok(0)
}

/// A profile for people, ending with what a job should ask for on the server it is normalized to.
fn profile_text(p: &Profile, out: &Path) -> String {
    let ask = crate::recommend::recommend(p, out, None, None)
        .map(|r| render::recommendation_summary(&r))
        .unwrap_or_else(|e| format!("  recommend    none: {e}\n"));
    format!("{}{ask}", render::render_profile(p, out))
}

/// Runs `profile`; the exit code is 128 + the signal when one stopped it (its finished trials are kept).
pub(super) fn profile_cmd(mut args: ProfileArgs) -> anyhow::Result<i32> {
    match args.action.take() {
        Some(ProfileAction::Refine(r)) => return refine_cmd(r),
        Some(ProfileAction::Replay(r)) => return replay_cmd(r),
        None => {}
    }
    let (json, plot) = (args.json, args.plot);
    let req = profile_request(args)?;
    super::reap_leftovers();
    let out = req.out.clone();
    let cancel = Cancel::on_signals()?;
    let bar = indicatif::ProgressBar::new(0);
    bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        // The plan says in the prefix what is left, once its model's rates say it.
        "{spinner} [{elapsed_precise}] {pos}/{len} trials {prefix} {wide_msg}",
    ) {
        bar.set_style(style);
    }
    bar.enable_steady_tick(Duration::from_millis(200));
    let result = plan::run_profile(&req, &bar, &cancel);
    bar.finish_and_clear();
    match result {
        Ok(p) => {
            if plot {
                for path in crate::plot::profile_charts(&p, &out, crate::plot::Size::DEFAULT)? {
                    eprintln!("synergy: wrote {}", path.display());
                }
            }
            if json {
                out!("{}", render::json(&p)?)?;
            } else {
                out!("{}", profile_text(&p, &out))?;
            }
            Ok(0)
        }
        Err(ProfileRunError::Trial(TrialError::Interrupted(sig))) => {
            // Said only of a journal that holds something: `--resume` has nothing to continue otherwise.
            if crate::format::journal::has_journaled_trials(&out) {
                eprintln!(
                    "synergy: interrupted by signal {sig}; finished trials are saved in {}; continue with --resume",
                    crate::format::journal::journal_path(&out).display()
                );
            } else {
                eprintln!("synergy: interrupted by signal {sig} before any trial finished; nothing was saved");
            }
            Ok(128 + sig)
        }
        Err(e) => Err(e.into()),
    }
}

/// The profile `profile`'s flags ask for; the axes' values are the library's to check.
fn profile_request(args: ProfileArgs) -> Result<ProfileRequest, InputError> {
    let mut spec = args.workload.load(None)?;
    // A spec with a launcher starts one rank per GPU the profile is asked for.
    if let (Some(gpus), Some(_)) = (args.gpus, spec.launcher) {
        spec.check_ranks(gpus)
            .map_err(|m| InputError::setting(Setting::Gpus, m))?;
        spec.gpus = gpus;
    }
    let out = match args.out {
        Some(out) => out,
        // The workload's name becomes a file name only when no --out names one.
        None if crate::fsutil::is_safe_file_stem(&spec.name) => {
            PathBuf::from("profiles").join(format!("{}.json", spec.name))
        }
        None => {
            return Err(InputError::field(
                spec.origin.clone(),
                "name",
                format!(
                    "`{}` cannot name the profile file ({}); pass --out FILE",
                    spec.name,
                    crate::fsutil::SAFE_FILE_STEM
                ),
            ))
        }
    };
    Ok(ProfileRequest {
        spec,
        out,
        cpus: parse_axis("--cpus", &args.cpus)?,
        memory_gib: parse_axis("--mem", &args.mem)?,
        gpus: args.gpus,
        server: args.server,
        validate: args.validate,
        held_out: None,
        budget_s: parse_budget(&args.budget)?,
        exhaustive: args.exhaustive,
        resume: args.resume,
        fresh_trials: args.fresh_trials,
        storage_limit: args.limits.storage_bps,
        isolation: args.limits.isolation,
        tolerance: args.tolerance,
        refine_tolerance: plan::DEFAULT_REFINE_TOLERANCE,
        recorded: None,
    })
}

/// `--budget`: a duration as people type it (`10m`, `90s`, `1h 30m`), or `none`, in seconds.
fn parse_budget(s: &str) -> Result<Option<f64>, InputError> {
    if s.trim() == "none" {
        return Ok(None);
    }
    match humantime::parse_duration(s.trim()) {
        Ok(d) if !d.is_zero() => Ok(Some(d.as_secs_f64())),
        Ok(_) => Err(InputError::new(
            "--budget",
            "must be longer than 0 (or `none`)",
        )),
        Err(e) => Err(InputError::new(
            "--budget",
            format!("`{s}` is not a duration ({e}): write it as 10m, 90s or 1h, or `none`"),
        )),
    }
}

/// Runs `predict`: a profile's throughput at one allocation.
pub(super) fn predict_cmd(args: PredictArgs) -> anyhow::Result<i32> {
    let p = Profile::read(&args.profile)?;
    check_positive("--cpus", args.cpus)?;
    check_positive("--mem", args.mem)?;
    // Below its footprint the job does not run at all: no throughput to answer.
    if let Some(footprint) = p.model.as_ref().map(|m| m.stall.footprint_bytes) {
        if args.mem * crate::units::GIB < footprint as f64 {
            return Err(InputError::new(
                "--mem",
                format!(
                    "{:.3e} GiB is below the workload's footprint, {} ({}): the job cannot run in it; \
                     give at least {:.3}",
                    args.mem,
                    crate::units::Bytes(footprint),
                    args.profile.display(),
                    footprint as f64 / crate::units::GIB
                ),
            )
            .into());
        }
    }
    let v = crate::predict::predict(&p, args.cpus, args.mem);
    if args.json {
        /// The prediction, and what the profile's trials were isolated by.
        #[derive(serde::Serialize)]
        struct Answer<'a> {
            #[serde(flatten)]
            prediction: &'a crate::predict::ProfilePrediction,
            isolation: Option<&'a str>,
            limits_enforced: Option<crate::format::trial::Limits>,
        }
        let host = p.host.as_ref();
        out!(
            "{}",
            render::json(&Answer {
                prediction: &v,
                isolation: host.map(|h| h.isolation.as_str()),
                limits_enforced: host.and_then(|h| h.limits_enforced),
            })?
        )?;
    } else {
        out!("{}", render::render_prediction(&p, args.cpus, args.mem, &v))?;
    }
    Ok(0)
}

/// Runs `import-zoo`: prints each profile file written.
pub(super) fn import_zoo_cmd(zoo: &Path, out_dir: &Path) -> anyhow::Result<i32> {
    let written = crate::profile::zoo::import_zoo(zoo, out_dir)?;
    for p in &written {
        outln!("{}", p.display())?;
    }
    Ok(0)
}
