//! Microsoft Philly's `cluster_job_log`: one JSON array of jobs (`jobid`, `status`, `vc`, `user`,
//! `submitted_time`, `attempts[{start_time, end_time, detail[{ip, gpus[]}]}]`), times written
//! `2017-10-03 02:02:59` or `None`.
//!
//! The rules (docs/traces.md): a job's GPUs are the most any of its attempts held (the GPU lists of every
//! machine of the attempt, together); its run time is the sum over its attempts that have both a start
//! and an end, as the Synergy artifact sums it; a job with no attempt never ran and one whose attempts all
//! lack an end never finished: both are dropped and counted.

use super::time::parse_time;
use super::{JobOutcome, RawJob, Sink};
use crate::error::InputError;
use serde::de::{DeserializeSeed, Deserializer, SeqAccess, Visitor};
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

/// Reads one Philly job log, streaming: each job is turned into a [`RawJob`] as soon as it is parsed, so
/// memory follows what the sink keeps, not the size of the log.
pub(super) fn read(path: &Path, sink: &mut Sink) -> Result<(), InputError> {
    let origin = path.display().to_string();
    let file =
        crate::input::open(path, crate::input::PHILLY_LOG).map_err(|e| e.into_input(&origin))?;
    let mut de =
        serde_json::Deserializer::from_reader(std::io::BufReader::with_capacity(1 << 20, file));
    let mut track = serde_path_to_error::Track::new();
    let mut failed = None;
    let jobs = Jobs {
        origin: &origin,
        sink,
        failed: &mut failed,
    };
    let parsed = jobs
        .deserialize(serde_path_to_error::Deserializer::new(&mut de, &mut track))
        .and_then(|()| de.end());
    if let Some(e) = failed {
        return Err(e);
    }
    parsed.map_err(|inner| {
        let path = track.path().to_string();
        let at = format!("{origin}, line {}", inner.line());
        if inner.is_io() {
            InputError::new(at, format!("cannot read the trace: {inner}"))
        } else if path == "." || path.is_empty() {
            InputError::new(
                at,
                format!("is not a Philly job log (a JSON array of jobs): {inner}"),
            )
        } else {
            InputError::field(at, path, inner.to_string())
        }
    })
}

/// The log's top-level array, handed to the sink job by job. A rule broken by a job that parsed (a time
/// that does not parse, an attempt ending before it starts) stops the parse and is kept in `failed`.
struct Jobs<'a, 's> {
    origin: &'a str,
    sink: &'a mut Sink<'s>,
    failed: &'a mut Option<InputError>,
}

impl<'de> DeserializeSeed<'de> for Jobs<'_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        de.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Jobs<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON array of jobs")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        while let Some(job) = seq.next_element::<Job>()? {
            if let Err(e) = offer(self.origin, i, job, self.sink) {
                *self.failed = Some(e);
                return Err(serde::de::Error::custom("a job broke the log's rules"));
            }
            i += 1;
        }
        Ok(())
    }
}

/// Applies the rules above to job `i` of the log.
fn offer(origin: &str, i: usize, job: Job, sink: &mut Sink<'_>) -> Result<(), InputError> {
    let time = |v: &Option<String>, field: String| -> Result<Option<f64>, InputError> {
        match v {
            None => Ok(None),
            Some(t) => parse_time(t)
                .ok_or_else(|| InputError::field(origin, field, format!("`{t}` is not a time"))),
        }
    };
    let Some(submit_s) = time(&job.submitted_time, format!("[{i}].submitted_time"))? else {
        sink.skip("no submission time");
        return Ok(());
    };
    if job.attempts.is_empty() {
        sink.skip("no attempt");
        return Ok(());
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
                    origin,
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
        return Ok(());
    }
    sink.offer(RawJob {
        queue: job.vc,
        user: job.user,
        ..RawJob::new(
            job.jobid,
            submit_s,
            run_s,
            gpus,
            JobOutcome::from_word(&job.status),
        )
    });
    Ok(())
}
