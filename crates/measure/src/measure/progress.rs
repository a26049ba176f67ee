//! Progress sources: the pipe protocol (one JSON line per step on `SYNERGY_PROGRESS_FD`) and a regular
//! expression over a workload's output for programs that cannot be changed (e.g. tqdm's `it/s`).

use super::event::{ProgressEvent, RankedStep};
use super::ranks::JobSteps;
use crate::format::trial::ProbeReport;
use regex::Regex;
use std::io::{BufRead, BufReader, Read};
use std::sync::mpsc::Sender;
use std::time::Instant;

/// A reader of one workload's progress: runs on its own thread until the stream ends.
pub trait ProgressSource: Send {
    /// Reads until end of stream, sending every event; returns when the stream closes or `tx` hangs up.
    fn run(self: Box<Self>, tx: Sender<ProgressEvent>);
}

/// Starts a source on a thread of its own.
pub fn spawn(
    source: Box<dyn ProgressSource>,
    tx: Sender<ProgressEvent>,
) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name("progress".into())
        .spawn(move || source.run(tx))
        .expect("spawning a thread only fails when the process is out of resources")
}

/// The pipe protocol: JSON objects with `samples` and optional `epoch`, `t`, `cache_hits`, `cache_misses`;
/// or a probe's `{"probe": {...}}`.
pub struct PipeProgress<R> {
    reader: R,
}

impl<R: Read + Send> PipeProgress<R> {
    /// Reads protocol lines from `reader` (the read end of the progress pipe).
    pub fn new(reader: R) -> Self {
        PipeProgress { reader }
    }
}

/// Parses one protocol line into an event stamped `at`: a step (a rank's, when the line carries `rank`,
/// with `world_size`), a probe's report, or a malformed line.
pub fn parse_pipe_line(line: &str, at: Instant) -> ProgressEvent {
    let malformed = || ProgressEvent::Malformed {
        line: line.chars().take(200).collect(),
    };
    let Ok(serde_json::Value::Object(mut map)) = serde_json::from_str::<serde_json::Value>(line)
    else {
        return malformed();
    };
    if let Some(report) = map.remove("probe") {
        return match serde_json::from_value::<ProbeReport>(report) {
            Ok(r) => ProgressEvent::Probe(Box::new(r)),
            Err(_) => malformed(),
        };
    }
    let Some(samples) = map.get("samples").and_then(|v| v.as_f64()) else {
        return malformed();
    };
    if !(samples.is_finite() && samples >= 0.0) {
        return malformed();
    }
    let uint = |k: &str| map.get(k).and_then(|v| v.as_u64());
    let small = |k: &str| uint(k).and_then(|v| u32::try_from(v).ok());
    match (map.get("rank"), small("rank"), small("world_size")) {
        (None, ..) => ProgressEvent::Step {
            at,
            samples,
            epoch: uint("epoch"),
            cache_hits: uint("cache_hits"),
            cache_misses: uint("cache_misses"),
        },
        // A rank's step says how many ranks there are, and its rank is one of them.
        (Some(_), Some(rank), Some(world_size)) if rank < world_size => {
            ProgressEvent::RankStep(RankedStep {
                rank,
                world_size,
                at,
                samples,
                epoch: uint("epoch"),
                cache_hits: uint("cache_hits"),
                cache_misses: uint("cache_misses"),
            })
        }
        (Some(_), ..) => malformed(),
    }
}

impl<R: Read + Send> ProgressSource for PipeProgress<R> {
    /// Sends every line's event; a rank's step is followed by the job's steps it completes.
    fn run(self: Box<Self>, tx: Sender<ProgressEvent>) {
        let reader = BufReader::new(self.reader);
        let mut job = JobSteps::default();
        for line in reader.lines() {
            let Ok(line) = line else { break };
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let ev = parse_pipe_line(line, Instant::now());
            let done = match &ev {
                ProgressEvent::RankStep(step) => job.push(*step),
                _ => Vec::new(),
            };
            if std::iter::once(ev)
                .chain(done)
                .any(|ev| tx.send(ev).is_err())
            {
                break;
            }
        }
    }
}

/// Which named group of a progress expression is present, and so what its number means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Capture {
    Samples,
    Total,
    Rate,
}

/// Progress from a regular expression over output lines (split at `\n` and `\r`, so tqdm bars work).
pub struct RegexProgress<R> {
    reader: R,
    matcher: RegexMatcher,
}

/// The line-by-line part of [`RegexProgress`], separate so it can be tested without a stream.
#[derive(Debug, Clone)]
pub struct RegexMatcher {
    regex: Regex,
    capture: Capture,
    scale: f64,
    last_total: f64,
}

impl RegexMatcher {
    /// A matcher for `pattern` (already validated by the spec) whose number is multiplied by `scale`.
    pub fn new(pattern: &str, scale: f64) -> Result<Self, regex::Error> {
        let regex = Regex::new(pattern)?;
        let names: Vec<&str> = regex.capture_names().flatten().collect();
        let capture = if names.contains(&"samples") {
            Capture::Samples
        } else if names.contains(&"total") {
            Capture::Total
        } else {
            Capture::Rate
        };
        Ok(RegexMatcher {
            regex,
            capture,
            scale,
            last_total: 0.0,
        })
    }

    /// The event for one output line, if it matches.
    pub fn parse_line(&mut self, line: &str, at: Instant) -> Option<ProgressEvent> {
        let caps = self.regex.captures(line)?;
        let name = match self.capture {
            Capture::Samples => "samples",
            Capture::Total => "total",
            Capture::Rate => "rate",
        };
        let value: f64 = caps.name(name)?.as_str().trim().parse().ok()?;
        let value = value * self.scale;
        Some(match self.capture {
            Capture::Samples => step(at, value),
            Capture::Total => {
                let delta = value - self.last_total;
                self.last_total = value;
                if delta <= 0.0 {
                    return None;
                }
                step(at, delta)
            }
            Capture::Rate => ProgressEvent::Rate {
                at,
                samples_per_s: value,
            },
        })
    }
}

fn step(at: Instant, samples: f64) -> ProgressEvent {
    ProgressEvent::Step {
        at,
        samples,
        epoch: None,
        cache_hits: None,
        cache_misses: None,
    }
}

impl<R: Read + Send> RegexProgress<R> {
    /// Reads `reader` (the workload's stdout or stderr) through `matcher`.
    pub fn new(reader: R, matcher: RegexMatcher) -> Self {
        RegexProgress { reader, matcher }
    }
}

impl<R: Read + Send> ProgressSource for RegexProgress<R> {
    fn run(mut self: Box<Self>, tx: Sender<ProgressEvent>) {
        let mut reader = BufReader::new(self.reader);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            // Read up to either separator: tqdm redraws with `\r`.
            let mut byte = [0u8; 1];
            let mut eof = false;
            loop {
                match reader.read(&mut byte) {
                    Ok(0) | Err(_) => {
                        eof = true;
                        break;
                    }
                    Ok(_) if byte[0] == b'\n' || byte[0] == b'\r' => break,
                    Ok(_) => buf.push(byte[0]),
                }
            }
            let line = String::from_utf8_lossy(&buf);
            if let Some(ev) = self.matcher.parse_line(&line, Instant::now()) {
                if tx.send(ev).is_err() {
                    return;
                }
            }
            if eof {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;

    #[test]
    fn pipe_lines_parse_with_optional_keys() {
        let now = Instant::now();
        match parse_pipe_line(
            r#"{"samples": 32, "epoch": 2, "t": 1.5, "cache_hits": 10}"#,
            now,
        ) {
            ProgressEvent::Step {
                samples,
                epoch,
                cache_hits,
                cache_misses,
                ..
            } => {
                assert_eq!(samples, 32.0);
                assert_eq!(epoch, Some(2));
                assert_eq!(cache_hits, Some(10));
                assert_eq!(cache_misses, None);
            }
            e => panic!("{e:?}"),
        }
        assert!(matches!(
            parse_pipe_line("samples=3", now),
            ProgressEvent::Malformed { .. }
        ));
        assert!(matches!(
            parse_pipe_line(r#"{"samples": -1}"#, now),
            ProgressEvent::Malformed { .. }
        ));
        match parse_pipe_line(r#"{"probe": {"batch_size": 8, "dataset_root": "/d"}}"#, now) {
            ProgressEvent::Probe(r) => assert_eq!(r.batch_size, Some(8)),
            e => panic!("{e:?}"),
        }
        assert!(matches!(
            parse_pipe_line(r#"{"probe": {"batch_size": "eight"}}"#, now),
            ProgressEvent::Malformed { .. }
        ));
    }

    #[test]
    fn a_ranks_lines_become_the_jobs_steps() {
        let data = b"{\"samples\":8,\"rank\":1,\"world_size\":2}\n{\"samples\":8,\"rank\":0,\"world_size\":2}\n{\"samples\":8,\"rank\":2,\"world_size\":2}\n{\"samples\":8,\"rank\":0}\n".to_vec();
        let (tx, rx) = channel();
        Box::new(PipeProgress::new(std::io::Cursor::new(data))).run(tx);
        let events: Vec<_> = rx.into_iter().collect();
        assert!(matches!(
            events[0],
            ProgressEvent::RankStep(RankedStep { rank: 1, .. })
        ));
        assert!(matches!(
            events[1],
            ProgressEvent::RankStep(RankedStep { rank: 0, .. })
        ));
        assert!(matches!(events[2], ProgressEvent::Step { samples, .. } if samples == 16.0));
        // A rank outside its world, or without one, does not follow the protocol.
        assert!(matches!(events[3], ProgressEvent::Malformed { .. }));
        assert!(matches!(events[4], ProgressEvent::Malformed { .. }));
        assert_eq!(events.len(), 5);
    }

    #[test]
    fn pipe_source_reads_until_eof() {
        let data = b"{\"samples\":8}\n\n{\"samples\":8}\nnot json\n".to_vec();
        let (tx, rx) = channel();
        Box::new(PipeProgress::new(std::io::Cursor::new(data))).run(tx);
        let events: Vec<_> = rx.into_iter().collect();
        assert_eq!(events.len(), 3);
        assert!(matches!(events[2], ProgressEvent::Malformed { .. }));
    }

    #[test]
    fn tqdm_rates_are_read_across_carriage_returns() {
        let out = b"epoch 1:  10%|#   | 10/100 [00:01<00:09, 9.50it/s]\repoch 1:  20%|##  | 20/100 [00:02<00:08, 10.00it/s]\n".to_vec();
        let m = RegexMatcher::new(r"(?P<rate>[0-9.]+)it/s", 64.0).unwrap();
        let (tx, rx) = channel();
        Box::new(RegexProgress::new(std::io::Cursor::new(out), m)).run(tx);
        let rates: Vec<f64> = rx
            .into_iter()
            .map(|e| match e {
                ProgressEvent::Rate { samples_per_s, .. } => samples_per_s,
                e => panic!("{e:?}"),
            })
            .collect();
        assert_eq!(rates, vec![9.5 * 64.0, 640.0]);
    }

    #[test]
    fn cumulative_totals_become_steps() {
        let mut m = RegexMatcher::new(r"seen (?P<total>\d+)", 1.0).unwrap();
        let now = Instant::now();
        let steps: Vec<_> = ["seen 10", "seen 25", "seen 25", "other"]
            .iter()
            .filter_map(|l| m.parse_line(l, now))
            .collect();
        assert_eq!(steps, vec![step(now, 10.0), step(now, 15.0)]);
    }
}
