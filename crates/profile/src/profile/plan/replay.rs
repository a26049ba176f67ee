//! `synergy profile replay`: a profile's model, matrix and validation derived again by this version's fit
//! from the trials the profile holds, with nothing measured (docs/architecture.md §7). The plan runs as
//! it would, but every trial it asks for comes from the profile, and what the profile measured outside
//! its trials (the CPU calibration before and after, the read probe's wait per miss, the hits' memory
//! bandwidth, the storage rate it settled on) is taken as recorded. So a profile follows the model as it
//! improves without another half hour of a quiet host, and a replay says so in its `source`.

use super::assemble::now_rfc3339;
use super::runner::trial_name;
use super::{ProfileRequest, DEFAULT_REFINE_TOLERANCE};
use crate::error::InputError;
use crate::format::profile::FetchModel;
use crate::format::profile::{HostInfo, Profile, ProfileTrial, SpeedCheck, TrialRole};
use crate::units::BytesPerSec;
use crate::workload::WorkloadSpec;
use std::path::PathBuf;

/// What a profile measured outside its trials, and the trials themselves: all a replay takes from it.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The profile file the trials come from.
    pub(super) origin: String,
    /// Every trial of the profile, in the order run (a trial measured again appears twice).
    pub(super) trials: Vec<ProfileTrial>,
    /// The host the trials ran on.
    pub(super) host: HostInfo,
    /// Its CPU calibration before and after the trials.
    pub(super) speed: SpeedCheck,
    /// The fetch stage as fitted: its storage rate (and whether that is a lower bound) and the memory
    /// bandwidth of hits are taken from here.
    pub(super) fetch: FetchModel,
    /// Seconds a loader waits per miss, as the read probe timed it.
    pub(super) wait_s_per_miss: f64,
    /// What the profile warned of: the measurement's warnings (trials that stayed disturbed, the host's
    /// drift) hold for the replay too.
    pub(super) warnings: Vec<String>,
    /// The replay's `source`: this version, and the day of the replay.
    pub(super) source: String,
    /// When the trials were measured: a replay keeps the profile's `created`.
    pub(super) created: Option<String>,
}

impl Recorded {
    /// What the replayed profile lists, from the trials this version's plan took (`used`) and what the
    /// replay warned of (the profile's warnings first): every trial the profile holds, since each was
    /// measured, and the warnings once each, with one naming any trial the plan no longer asks for.
    pub(super) fn trials_and_warnings(
        &self,
        used: &[ProfileTrial],
        warnings: Vec<String>,
    ) -> (Vec<ProfileTrial>, Vec<String>) {
        let mut out: Vec<String> = Vec::new();
        for w in warnings {
            if !out.contains(&w) {
                out.push(w);
            }
        }
        let unused: Vec<String> = self
            .trials
            .iter()
            .filter(|t| !used.contains(t))
            .map(|t| {
                format!(
                    "the {} ({:.1} samples/s)",
                    trial_name(t.role, t.result.allocation.cpus, t.memory_gib),
                    t.result.throughput.samples_per_s
                )
            })
            .collect();
        if !unused.is_empty() {
            let note = format!(
                "replayed: this version's plan does not ask for {} of the profile's trials, so they do \
                 not enter the model: {}",
                unused.len(),
                unused.join("; ")
            );
            if !out.contains(&note) {
                out.push(note);
            }
        }
        (self.trials.clone(), out)
    }
}

/// Refuses a profile that holds no measured trials of its own to replay.
fn measured(profile: &Profile, origin: &str) -> Result<(), InputError> {
    let field = |name: &str, why: &str| InputError::field(origin, name, why.to_string());
    if profile.refinement.is_some() {
        return Err(field(
            "refinement",
            "a refined profile mixes observed runs into its model: replay the profile it was refined \
             from, then refine that again",
        ));
    }
    if profile.trials.is_empty() {
        return Err(field(
            "trials",
            "none: only a measured profile can be replayed (a published or imported one holds no trials)",
        ));
    }
    Ok(())
}

/// The workload `profile` names for a replay: a built-in's name, or the spec file it was read from.
pub fn spec_of(profile: &Profile, origin: &str) -> Result<String, InputError> {
    measured(profile, origin)?;
    let field = |why: &str| InputError::field(origin, "workload.spec", why.to_string());
    let spec = profile.workload.spec.as_deref().ok_or_else(|| {
        field("absent: a replay loads the workload's spec to run the plan; profile the workload again")
    })?;
    if let Some(name) = spec.strip_prefix("builtin:") {
        return Ok(name.to_string());
    }
    if !std::path::Path::new(spec).is_file() {
        return Err(field(&format!(
            "`{spec}` is not a file here; run the replay from the directory the profile was made in, \
             or pass --spec FILE"
        )));
    }
    Ok(spec.to_string())
}

/// The request that replays `profile` (read from `origin`) to `out`: its own axes, GPUs, server shape,
/// tolerance, storage limit and held-out points, with `spec` (the workload it names, see [`spec_of`]).
pub fn replay_request(
    profile: &Profile,
    origin: &str,
    spec: WorkloadSpec,
    out: PathBuf,
) -> Result<ProfileRequest, InputError> {
    let field = |name: &str, why: &str| InputError::field(origin, name, why.to_string());
    measured(profile, origin)?;
    let model = profile
        .model
        .as_ref()
        .ok_or_else(|| field("model", "absent: only a measured profile can be replayed"))?;
    let host = profile.host.clone().ok_or_else(|| {
        field(
            "host",
            "absent: a replay takes the host's measurements from it; profile the workload again",
        )
    })?;
    let speed = host.cpu_speed.ok_or_else(|| {
        field(
            "host.cpu_speed",
            "absent (a profile before schema 1.1): profile the workload again",
        )
    })?;
    let count = |role| profile.trials.iter().filter(|t| t.role == role).count();
    let recorded = Recorded {
        origin: origin.to_string(),
        trials: profile.trials.clone(),
        speed,
        fetch: model.stall.fetch,
        wait_s_per_miss: model
            .stall
            .miss_cost
            .as_ref()
            .map_or(0.0, |m| m.wait_s_per_miss),
        warnings: profile.warnings.clone(),
        // Short: charts put it in a subtitle. `created` stays when the trials were measured.
        source: format!(
            "replayed by synergy {} on {}",
            env!("CARGO_PKG_VERSION"),
            &now_rfc3339()[..10]
        ),
        created: profile.created.clone(),
        host,
    };
    Ok(ProfileRequest {
        spec,
        out,
        cpus: Some(profile.matrix.cpus.clone()),
        memory_gib: Some(profile.matrix.memory_gib.clone()),
        gpus: Some(profile.workload.gpus),
        server: Some(profile.server),
        validate: count(TrialRole::Validation),
        held_out: Some(recorded_held_out(profile)),
        // Nothing is measured: every trial it holds is replayed.
        budget_s: None,
        exhaustive: count(TrialRole::Exhaustive) > 0,
        resume: false,
        fresh_trials: false,
        storage_limit: recorded.host.storage_limit_bytes_per_s.map(BytesPerSec),
        isolation: None,
        tolerance: profile.demand.tolerance,
        refine_tolerance: DEFAULT_REFINE_TOLERANCE,
        recorded: Some(recorded),
    })
}

/// The held-out points a profile measured, in order, each once: a budget or an OOM kill can have left
/// out some of those its `--validate` asked for, so the count alone does not say which they were.
fn recorded_held_out(profile: &Profile) -> Vec<(f64, f64)> {
    let mut points = Vec::new();
    for t in profile
        .trials
        .iter()
        .filter(|t| t.role == TrialRole::Validation)
    {
        if let Some(point) = t.memory_gib.map(|m| (t.result.allocation.cpus.0, m)) {
            if !points.contains(&point) {
                points.push(point);
            }
        }
    }
    points
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replay_lists_every_trial_and_names_once_those_its_plan_left_out() {
        let shipped: Profile =
            serde_json::from_str(include_str!("../../../../../profiles/image.json")).unwrap();
        let host = shipped.host.clone().unwrap();
        let r = Recorded {
            origin: "image.json".into(),
            trials: shipped.trials.clone(),
            speed: host.cpu_speed.unwrap(),
            fetch: shipped.model.as_ref().unwrap().stall.fetch,
            wait_s_per_miss: 0.0,
            warnings: Vec::new(),
            source: String::new(),
            created: None,
            host,
        };
        let used = &shipped.trials[1..];
        let warned = vec!["slow".to_string(), "slow".to_string()];
        let (trials, warnings) = r.trials_and_warnings(used, warned);
        assert_eq!(trials, shipped.trials, "every measured trial stays listed");
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert_eq!(warnings[0], "slow");
        assert!(
            warnings[1].contains("1 of the profile's trials")
                && warnings[1].contains("the cpu trial at"),
            "{}",
            warnings[1]
        );
        // Re-fitting the replay adds nothing.
        let (_, again) = r.trials_and_warnings(used, warnings.clone());
        assert_eq!(again, warnings);
        let (_, all_used) = r.trials_and_warnings(&shipped.trials, Vec::new());
        assert!(all_used.is_empty());
    }
}
