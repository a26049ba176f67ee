//! Stage 0, discovery: finding the dataset of a probed script that does not name one, so the memory axis
//! has something to cache (docs/architecture.md §3.3, §4).

use super::runner::Runner;
use super::{base_request, ProfileRunError};
use crate::error::InputError;
use crate::format::profile::TrialRole;
use crate::workload::WorkloadSpec;

/// The discovery run's shortest window, seconds: long enough for a handful of a real script's steps.
const DISCOVERY_MEASURE_S: f64 = 2.0;
/// The discovery run stops once its rate is known to this fraction: it says the script trains, and
/// nothing more is asked of it.
const DISCOVERY_PRECISION: f64 = 0.25;

/// Stage 0: a probed script whose dataset the spec does not name runs once as it is, at the most cores,
/// and what the probe sees of it (the directory its dataset's files are in) becomes its dataset. Returns
/// the spec the rest of the plan runs, and why the memory axis does not apply when no dataset is known.
pub(super) fn discover(
    run: &mut Runner,
    spec: &WorkloadSpec,
    c_max: f64,
) -> Result<(WorkloadSpec, Option<String>), ProfileRunError> {
    let mut spec = spec.clone();
    if spec.dataset.is_some() {
        return Ok((spec, None));
    }
    if spec.probe.is_none() {
        return Ok((
            spec,
            Some("the workload names no dataset, so memory only has to hold its footprint".into()),
        ));
    }
    let mut req = base_request(&spec, c_max);
    // Only what the probe sees is wanted (its first batch's line names the dataset), and that the script
    // trains: no rate of this run enters the model, so it stops at its first rough estimate rather than
    // after 30 s at ±2% (`examples/imagefolder_train.py`: 11-30 s).
    req.estimator.warmup_s = 0.0;
    req.estimator.min_measure_s = DISCOVERY_MEASURE_S;
    req.estimator.rel_precision = DISCOVERY_PRECISION;
    let first = run.trial(TrialRole::Discovery, None, req)?;
    let seen = first.probe.unwrap_or_default();
    match &seen.dataset_root {
        Some(root) => {
            spec.set_dataset_dir(root).map_err(|why| {
                InputError::new(
                    &spec.origin,
                    format!("the probe saw the dataset in {}, but {why}", root.display()),
                )
            })?;
            Ok((spec, None))
        }
        None => Ok((
            spec,
            Some(format!(
                "the probe saw {} but no directory of files on disk, so memory only has to hold the footprint; if the script reads files, name their directory (--dataset)",
                seen.dataset_class
                    .as_deref()
                    .map_or("no dataset".to_string(), |c| format!("a {c} dataset"))
            )),
        )),
    }
}
