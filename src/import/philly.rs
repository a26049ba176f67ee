//! Microsoft Philly's `cluster_job_log`: one JSON array of jobs (`jobid`, `status`, `vc`, `user`,
//! `submitted_time`, `attempts[{start_time, end_time, detail[{ip, gpus[]}]}]`), times written
//! `2017-10-03 02:02:59` or `None`.
//!
//! The rules (docs/traces.md): a job's GPUs are the most any of its attempts held (the GPU lists of every
//! machine of the attempt, together); its run time is the sum over its attempts that have both a start
//! and an end, as the Synergy artifact sums it; a job with no attempt never ran and one whose attempts all
//! lack an end never finished: both are dropped and counted.

use super::time::parse_time;
use super::{JobState, RawJob, Sink};
use crate::error::InputError;
use serde::Deserialize;
use std::path::Path;

#[derive(Deserialize)]
struct Job {
    jobid: String,
    status: String,
    #[serde(default)]
    vc: Option<String>,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    submitted_time: Option<String>,
    #[serde(default)]
    attempts: Vec<Attempt>,
}

#[derive(Deserialize)]
struct Attempt {
    #[serde(default)]
    start_time: Option<String>,
    #[serde(default)]
    end_time: Option<String>,
    #[serde(default)]
    detail: Vec<Detail>,
}

#[derive(Deserialize)]
struct Detail {
    #[serde(default)]
    gpus: Vec<String>,
}

/// Reads one Philly job log.
pub(super) fn read(path: &Path, sink: &mut Sink) -> Result<(), InputError> {
    let origin = path.display().to_string();
    let text = match crate::fsutil::read_user_text(path, "a Philly job log") {
        Ok(t) => t,
        Err(crate::fsutil::ReadError::Input(e)) => return Err(e),
        Err(crate::fsutil::ReadError::Io(e)) => {
            return Err(InputError::new(&origin, e.to_string()))
        }
    };
    let de = &mut serde_json::Deserializer::from_str(&text);
    let jobs: Vec<Job> = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let at = format!("{origin}, line {}", inner.line());
        if path == "." || path.is_empty() {
            InputError::new(
                at,
                format!("is not a Philly job log (a JSON array of jobs): {inner}"),
            )
        } else {
            InputError::field(at, path, inner.to_string())
        }
    })?;
    for (i, job) in jobs.into_iter().enumerate() {
        let time = |v: &Option<String>, field: String| -> Result<Option<f64>, InputError> {
            match v {
                None => Ok(None),
                Some(t) => parse_time(t).ok_or_else(|| {
                    InputError::field(&origin, field, format!("`{t}` is not a time"))
                }),
            }
        };
        let Some(submit_s) = time(&job.submitted_time, format!("[{i}].submitted_time"))? else {
            sink.skip("no submission time");
            continue;
        };
        if job.attempts.is_empty() {
            sink.skip("no attempt");
            continue;
        }
        let mut run_s = 0.0;
        let mut finished = 0;
        let mut gpus = 0u32;
        for (k, a) in job.attempts.iter().enumerate() {
            let s = time(&a.start_time, format!("[{i}].attempts[{k}].start_time"))?;
            let e = time(&a.end_time, format!("[{i}].attempts[{k}].end_time"))?;
            if let (Some(s), Some(e)) = (s, e) {
                if e < s {
                    return Err(InputError::field(
                        &origin,
                        format!("[{i}].attempts[{k}].end_time"),
                        "is before its start_time",
                    ));
                }
                run_s += e - s;
                finished += 1;
            }
            gpus = gpus.max(a.detail.iter().map(|d| d.gpus.len() as u32).sum());
        }
        if finished == 0 {
            sink.skip("no attempt with an end time");
            continue;
        }
        sink.offer(RawJob {
            queue: job.vc,
            user: job.user,
            ..RawJob::new(
                job.jobid,
                submit_s,
                run_s,
                gpus,
                JobState::from_word(&job.status),
            )
        });
    }
    Ok(())
}
