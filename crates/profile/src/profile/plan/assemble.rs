//! What the profile says beside the model: the workload as it ran, the host it was measured on (and
//! whether its CPU speed held over the profile, docs/architecture.md §4), what the probe saw of the
//! script, and when (docs/architecture.md §3.4).

use super::runner::Runner;
use super::ProfileRequest;
use crate::format::profile::HitModel;
use crate::format::profile::{
    DatasetInfo, HostInfo, ProfileTrial, SpeedCheck, TrialRole, WorkloadInfo,
};
use crate::format::trial::ProbeReport;
use crate::format::trial::TrialResult;
use crate::measure::hostspeed::cpu_calibration;
use crate::workload::WorkloadSpec;

/// Times the host's CPU again after the last trial against before the first, and warns when the speed
/// drifted: the trials may then describe two machines.
pub(super) fn speed_check(run: &mut Runner) -> SpeedCheck {
    let speed = SpeedCheck::new(run.speed.first, cpu_calibration(run.speed.core));
    if speed.drifted {
        run.warnings.push(format!(
            "the host's CPU speed changed by {:+.0}% during the profile (a fixed calibration ran at {:.3e} ops/s before and {:.3e} after): its trials may describe two machines",
            100.0 * speed.drift,
            speed.before.ops_per_s,
            speed.after.ops_per_s
        ));
    }
    speed
}

/// What the profile says of the workload: the spec it ran, the batch size the probe saw (a distributed
/// job's step holds every rank's batch; the spec's where it saw none), the dataset the first CPU trial read, and an iteration's time at
/// `proportional_samples_per_s`, the proportional share's throughput.
pub(super) fn workload_info(
    spec: &WorkloadSpec,
    hit_model: HitModel,
    gpus: u32,
    proportional_samples_per_s: Option<f64>,
    first: &TrialResult,
    trials: &[ProfileTrial],
    no_memory_axis: Option<String>,
) -> WorkloadInfo {
    let probe = probe_seen(trials);
    let batch_size = probe
        .as_ref()
        .and_then(ProbeReport::job_batch_size)
        .unwrap_or(spec.batch_size);
    WorkloadInfo {
        name: spec.name.clone(),
        spec: Some(spec.origin.clone()),
        description: spec.description.clone(),
        batch_size,
        gpus,
        hit_model,
        iter_time_s: proportional_samples_per_s
            .filter(|t| *t > 0.0)
            .map(|t| batch_size as f64 / t),
        class: None,
        dataset: first.dataset.as_ref().map(|d| DatasetInfo {
            path: d.path.display().to_string(),
            items: d.files,
            bytes: d.bytes,
            mean_item_bytes: d.mean_file_bytes,
        }),
        no_memory_axis,
        probe,
    }
}

/// What the probe saw of the script as it runs (synthetic trials replay, so they are left out).
pub(super) fn probe_seen(trials: &[ProfileTrial]) -> Option<ProbeReport> {
    trials
        .iter()
        .filter(|t| matches!(t.role, TrialRole::Discovery | TrialRole::Cpu))
        .filter_map(|t| t.result.probe.clone())
        .reduce(|mut a: ProbeReport, b| {
            a.merge(b);
            a
        })
}

/// The host the profile was measured on, as the first CPU trial saw it and the cold trial read from
/// its storage.
pub(super) fn host_info(
    req: &ProfileRequest,
    host_cores: f64,
    first: &TrialResult,
    storage_seen: Option<f64>,
    host_mem: u64,
    speed: SpeedCheck,
    limits_enforced: Option<crate::format::trial::Limits>,
) -> HostInfo {
    HostInfo {
        hostname: nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_default(),
        cores: host_cores as usize,
        memory_bytes: host_mem,
        gpu: crate::measure::telemetry::GpuSampler::new(None)
            .and_then(|g| g.summary().devices.first().cloned()),
        kernel: nix::sys::utsname::uname()
            .map(|u| u.release().to_string_lossy().into_owned())
            .unwrap_or_default(),
        isolation: first.isolation.backend.to_string(),
        limits_enforced,
        storage_limit_bytes_per_s: req.storage_limit.map(|b| b.0),
        storage_read_bytes_per_s: storage_seen,
        cpu_speed: Some(speed),
    }
}

/// Now as RFC 3339 UTC, to the second.
pub(super) fn now_rfc3339() -> String {
    chrono::DateTime::<chrono::Utc>::from(std::time::SystemTime::now())
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339() {
        let t = now_rfc3339();
        assert_eq!(t.len(), 20);
        assert!(t.ends_with('Z'));
        let parsed = chrono::DateTime::parse_from_rfc3339(&t).expect("RFC 3339");
        let now = chrono::DateTime::<chrono::Utc>::from(std::time::SystemTime::now());
        assert!((now.timestamp() - parsed.timestamp()).abs() <= 2);
    }
}
