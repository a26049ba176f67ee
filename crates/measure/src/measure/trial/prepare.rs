//! Before a trial launches anything: the request checked against this host and the spec, and the
//! dataset found (or generated when the spec says how).

use super::{host_cores, CacheState, TrialError, TrialRequest};
use crate::cancel::Cancel;
use crate::error::{InputError, Origin, Setting};
use crate::units::{Bytes, BytesPerSec};
use crate::workload::dataset::{self, DatasetFiles};
use crate::workload::{WorkloadError, WorkloadSpec};
use indicatif::ProgressBar;
use std::path::PathBuf;

pub(super) fn validate(req: &TrialRequest) -> Result<(), InputError> {
    req.estimator.check()?;
    let cores = host_cores().len();
    if !(req.cpus.0.is_finite() && req.cpus.0 > 0.0) {
        return Err(InputError::setting(
            Setting::Cpus,
            "must be a positive number of cores",
        ));
    }
    if req.cpus.0 > cores as f64 {
        return Err(InputError::setting(
            Setting::Cpus,
            format!("{} cores asked for, but this host has {cores}", req.cpus),
        ));
    }
    if let Some(list) = &req.cpu_list {
        if list.len() < req.cpus.threads() {
            return Err(InputError::setting(
                Setting::CpuList,
                format!(
                    "{} cores listed, but {} {} needs {}",
                    list.len(),
                    Setting::Cpus,
                    req.cpus,
                    req.cpus.threads()
                ),
            ));
        }
    }
    // The spec's footprint is a floor the workload cannot run below; without one, any budget is tried.
    let footprint = req.spec.footprint.unwrap_or(Bytes(0));
    let host = crate::isolate::host_memory_bytes();
    if let Some(cache) = req.cache_bytes {
        if host > 0 && cache.0 > host {
            return Err(InputError::setting(
                Setting::CacheBytes,
                format!("{cache} is more than this host has ({})", Bytes(host)),
            ));
        }
    }
    if let Some(mem) = req.mem_limit {
        if mem.0 == 0 {
            return Err(InputError::setting(
                Setting::MemLimit,
                "must be more than 0 bytes",
            ));
        }
        if host > 0 && mem.0 > host {
            return Err(InputError::setting(
                Setting::MemLimit,
                format!("{mem} is more than this host has ({})", Bytes(host)),
            ));
        }
        if mem < footprint {
            return Err(InputError::setting(
                Setting::MemLimit,
                format!(
                    "{mem} is below the least memory the workload runs in, {footprint} (field `footprint` in {})",
                    req.spec.origin
                ),
            ));
        }
        if let Some(cache) = req.cache_bytes {
            if Bytes(footprint.0 + cache.0) > mem {
                return Err(InputError::setting(
                    Setting::MemLimit,
                    format!(
                        "{mem} cannot hold the footprint ({footprint}) plus {} ({cache})",
                        Setting::CacheBytes
                    ),
                ));
            }
        }
        if req.cache_state == CacheState::Warm {
            return Err(InputError::setting(
                Setting::CacheStateWarm,
                format!(
                    "with {}, pages prewarmed by synergy would be charged outside the workload's cgroup; \
                     use {} with {} 1 instead",
                    Setting::MemLimit,
                    Setting::CacheStateCold,
                    Setting::WarmupEpochs
                ),
            ));
        }
    }
    if req.storage_limit.is_some() && req.spec.dataset.is_none() {
        return Err(InputError::setting(
            Setting::StorageLimit,
            format!(
                "the workload in {} has no dataset to throttle",
                req.spec.origin
            ),
        ));
    }
    if let Some(BytesPerSec(b)) = req.storage_limit {
        if !(b.is_finite() && b >= 1.0) {
            return Err(InputError::setting(
                Setting::StorageLimit,
                "must be a positive rate",
            ));
        }
    }
    Ok(())
}

/// Finds the dataset, generating it when absent and the spec says how.
pub fn prepare_dataset(
    spec: &WorkloadSpec,
    bar: &ProgressBar,
    cancel: &Cancel,
) -> Result<Option<(PathBuf, DatasetFiles, bool)>, TrialError> {
    let Some(dir) = spec.dataset_dir()? else {
        return Ok(None);
    };
    let mut generated = false;
    if !dir.exists() {
        let gen = spec.dataset.as_ref().and_then(|d| d.generate.clone()).ok_or_else(|| {
            InputError::field(
                &spec.origin,
                "dataset.path",
                format!(
                    "`{}` does not exist and the spec has no `dataset.generate`; create the dataset or add a generator",
                    dir.display()
                ),
            )
        })?;
        bar.set_message(format!(
            "generating {} dataset ({}) in {}",
            gen.kind,
            gen.size,
            dir.display()
        ));
        if let Some(parent) = dir.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| WorkloadError::io(format!("creating {}", parent.display()), e))?;
        }
        dataset::generate(gen.kind, &dir, gen.size, gen.seed, cancel).map_err(|e| match e {
            WorkloadError::Interrupted(sig) => TrialError::Interrupted(sig),
            // The size is the spec's field here, not `dataset gen`'s flag.
            WorkloadError::Input(e) if e.origin == Origin::Setting(Setting::Size) => {
                InputError::field(&spec.origin, "dataset.generate.size", e.message).into()
            }
            e => e.into(),
        })?;
        generated = true;
    }
    if !dir.is_dir() {
        return Err(InputError::field(
            &spec.origin,
            "dataset.path",
            format!(
                "`{}` is a file; a dataset is a directory of files",
                dir.display()
            ),
        )
        .into());
    }
    let files = dataset::scan(&dir)
        .map_err(|e| WorkloadError::io(format!("listing dataset {}", dir.display()), e))?;
    if files.files.is_empty() {
        return Err(InputError::field(
            &spec.origin,
            "dataset.path",
            format!("`{}` holds no data files", dir.display()),
        )
        .into());
    }
    Ok(Some((dir, files, generated)))
}
