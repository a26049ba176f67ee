//! Every result the command line prints, for people and as JSON: commands compute, this module words.
//! One file per command's output; each function returns the whole text, so a command writes it with one
//! `out!`, and `--json` goes through [`json`] (or [`json_one_or_many`] for a sweep). What users see is
//! held by the snapshot tests of `tests/it/snapshots.rs`.

mod advisor;
mod dataset;
mod measure;
mod plot;
mod profile;
mod recommend;
mod run;
mod simulate;
mod trace;

pub(in crate::cli) use advisor::{
    render_advisor, render_advisor_check, AdvisorCheck, AdvisorWritten,
};
pub(in crate::cli) use dataset::{render_manifest, render_rate};
pub(in crate::cli) use measure::render_trial;
pub(in crate::cli) use plot::render_written;
pub(in crate::cli) use profile::{render_prediction, render_profile, render_refinement};
pub(in crate::cli) use recommend::{
    recommendation_k8s, recommendation_sbatch, recommendation_summary, recommendation_torchrun,
    render_recommendation,
};
pub(in crate::cli) use run::{job_list_predictions, render_job_list, render_plan, render_run};
pub(in crate::cli) use simulate::{render_simulation, SimRun};
pub(in crate::cli) use trace::render_import;

use crate::exec::executor::RunReport;
use crate::format::profile::ErrorSummary;
use crate::format::profile::Profile;
use crate::format::trial::TrialResult;
use crate::units::Bytes;
use std::fmt::Write as _;
use std::path::Path;

/// Any result as the `--json` flags print it: pretty, with a final newline.
pub(in crate::cli) fn json<T: serde::Serialize + ?Sized>(
    v: &T,
) -> Result<String, serde_json::Error> {
    serde_json::to_string_pretty(v).map(|s| s + "\n")
}

/// One value, or a list of several, as JSON: a single configuration prints as an object.
pub(in crate::cli) fn json_one_or_many(
    mut values: Vec<serde_json::Value>,
) -> serde_json::Result<String> {
    if values.len() == 1 {
        json(&values.remove(0))
    } else {
        json(&values)
    }
}
