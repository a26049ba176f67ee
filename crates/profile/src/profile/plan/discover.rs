//! Stage 0, discovery: finding the dataset of a probed script that does not name one, so the memory axis
//! has something to cache (docs/architecture.md §3.3, §4).

use super::runner::Runner;
use super::{base_request, ProfileRunError};
use crate::error::InputError;
use crate::format::profile::TrialRole;
use crate::workload::WorkloadSpec;

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
    let first = run.trial(TrialRole::Discovery, None, base_request(&spec, c_max))?;
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
