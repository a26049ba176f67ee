//! The built-in reference workloads: real input pipelines (image, audio, text) over a dataset on disk,
//! feeding an emulated accelerator that ingests batches at a fixed rate without using CPU, given in
//! samples/s or relative to this host's one-core preprocessing rate ([`rate`]).

mod audio;
mod image;
mod pipeline;
mod preprocess;
pub mod rate;
mod source;
mod text;

use crate::format::rate::Pipeline;
pub use pipeline::{run_at, run_with};
pub use rate::{GpuRate, OneCoreRate};

use super::{env, WorkloadError};
use crate::error::InputError;
use crate::units::{parse_bytes, Bytes, Cores};
use std::fs::File;
use std::io::Write;
use std::os::unix::io::{FromRawFd, RawFd};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Tokens per text sequence unless `--seq-len` says otherwise.
pub const DEFAULT_SEQ_LEN: usize = 512;
/// Batches each loader prepares ahead of the accelerator unless told otherwise (`--prefetch`), as a
/// PyTorch `DataLoader`'s `prefetch_factor` does by default.
pub const DEFAULT_PREFETCH_BATCHES: usize = 2;

/// Arguments of `synergy workload run`. The budget comes from the launch contract's environment.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// The pipeline.
    #[arg(value_enum)]
    pub pipeline: Pipeline,
    /// Dataset directory (as made by `synergy dataset gen`).
    #[arg(long)]
    pub dataset: PathBuf,
    /// Samples per step, at least 1; the batches in flight (--prefetch per worker, and one being made)
    /// must fit this host's memory.
    #[arg(long, default_value_t = 64)]
    pub batch_size: u32,
    /// Emulated accelerator ingestion rate: samples per second (`900`), or a multiple of this host's
    /// one-core preprocessing rate for this pipeline on this dataset (`1.3x`; measured at start-up unless
    /// stored, see `synergy dataset rate`).
    #[arg(long, allow_hyphen_values = true)]
    pub gpu_rate: GpuRate,
    /// Stop after this many steps in all (at least 1), resumed ones included (default: run until stopped).
    #[arg(long)]
    pub max_steps: Option<u64>,
    /// Stop after this many samples in all (at least 1), resumed ones included (default: run until
    /// stopped).
    #[arg(long)]
    pub max_samples: Option<u64>,
    /// Stop after this many seconds, more than 0 (default: run until stopped).
    #[arg(long)]
    pub max_seconds: Option<f64>,
    /// Shuffling seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Batches prepared ahead of the accelerator, per worker.
    #[arg(long, default_value_t = DEFAULT_PREFETCH_BATCHES)]
    pub prefetch: usize,
    /// Tokens per sequence (text pipeline).
    #[arg(long, default_value_t = DEFAULT_SEQ_LEN)]
    pub seq_len: usize,
    /// Overrides `SYNERGY_CACHE_BYTES`; at most this host's memory.
    #[arg(long)]
    pub cache_bytes: Option<Bytes>,
}

/// The budget a run works under; [`run`] takes it from the launch contract's environment.
#[derive(Debug, Clone, PartialEq)]
pub struct RunConfig {
    /// Data-loader worker threads.
    pub workers: usize,
    /// Application cache budget in bytes; `None`: no app cache (the OS page cache serves repeats).
    pub cache_bytes: Option<u64>,
    /// Feed one in-memory batch at the accelerator's rate, with no loading or preprocessing.
    pub synthetic: bool,
    /// `SYNERGY_STATE_FILE`: where the run's totals are kept across restarts (the resume contract).
    pub state_file: Option<PathBuf>,
}

impl RunConfig {
    /// Reads `SYNERGY_CPUS` (workers = ceil, at least 1; default: all available cores),
    /// `SYNERGY_CACHE_BYTES` (overridden by `--cache-bytes`), `SYNERGY_SYNTHETIC` and `SYNERGY_STATE_FILE`.
    pub fn from_env(args: &RunArgs) -> Result<Self, WorkloadError> {
        let workers = match std::env::var(env::CPUS) {
            Ok(v) => {
                let cores: f64 = v.trim().parse().map_err(|_| {
                    InputError::new(env::CPUS, format!("`{v}` is not a number of cores"))
                })?;
                if !(cores.is_finite() && cores > 0.0) {
                    return Err(InputError::new(env::CPUS, "must be more than 0").into());
                }
                Cores(cores).threads()
            }
            Err(_) => std::thread::available_parallelism().map_or(1, |n| n.get()),
        };
        let cache_bytes = match (args.cache_bytes, std::env::var(env::CACHE_BYTES)) {
            (Some(b), _) => Some(b.0),
            (None, Ok(v)) if !v.trim().is_empty() => {
                Some(parse_bytes(&v).map_err(|e| InputError::new(env::CACHE_BYTES, e))?)
            }
            _ => None,
        };
        let synthetic =
            std::env::var(env::SYNTHETIC).is_ok_and(|v| matches!(v.trim(), "1" | "true" | "yes"));
        let state_file = std::env::var_os(env::STATE_FILE)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from);
        Ok(RunConfig {
            workers,
            cache_bytes,
            synthetic,
            state_file,
        })
    }
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunTotals {
    /// Steps (batches) the accelerator ingested.
    pub steps: u64,
    /// Samples ingested.
    pub samples: u64,
    /// Wall time from start to stop.
    pub seconds: f64,
    /// Samples served by the app cache.
    pub cache_hits: u64,
    /// Samples read from disk while an app cache was on.
    pub cache_misses: u64,
    /// Bytes of all items of the dataset (0 in synthetic mode).
    pub dataset_bytes: u64,
    /// Bytes the app cache held at the end.
    pub cache_used_bytes: u64,
    /// The accelerator's ingestion rate it ran at, samples/s.
    pub gpu_rate_samples_per_s: f64,
    /// Batch buffers the loaders allocated (0 in synthetic mode).
    pub batch_buffers: u64,
}

impl RunTotals {
    /// Ingested samples per second.
    pub fn rate_samples_per_s(&self) -> f64 {
        if self.seconds > 0.0 {
            self.samples as f64 / self.seconds
        } else {
            0.0
        }
    }
    /// App cache hits over lookups; `None` without an app cache.
    pub fn hit_ratio(&self) -> Option<f64> {
        let lookups = self.cache_hits + self.cache_misses;
        (lookups > 0).then(|| self.cache_hits as f64 / lookups as f64)
    }
}

/// Runs a built-in workload until its step or time limit, or until killed. Progress lines go to
/// `SYNERGY_PROGRESS_FD` when set; a one-line summary goes to stderr at the end. SIGINT and SIGTERM end
/// the run cleanly (a second one kills it).
pub fn run(args: &RunArgs) -> Result<(), WorkloadError> {
    let cfg = RunConfig::from_env(args)?;
    let mut progress = progress_from_env()?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        // The conditional shutdown goes first so that the second signal, with the flag already set,
        // terminates at once.
        signal_hook::flag::register_conditional_shutdown(sig, 1, stop.clone())
            .and_then(|_| signal_hook::flag::register(sig, stop.clone()))
            .map_err(|e| WorkloadError::io("installing signal handlers", e))?;
    }
    let gpu_rate = rate::resolve_gpu_rate(args)?;
    if let Some(why) = gpu_rate.one_core.as_ref().and_then(|r| r.not_kept.as_ref()) {
        eprintln!("synergy workload: {why}");
    }
    let summary = pipeline::run_at(
        args,
        &cfg,
        gpu_rate.samples_per_s,
        progress.as_mut().map(|f| f as &mut dyn Write),
        &stop,
    )?;
    let hits = summary.hit_ratio().map_or_else(
        || "no app cache".to_string(),
        |h| {
            format!(
                "cache hit ratio {h:.3} (cache holds {} of {})",
                Bytes(summary.cache_used_bytes),
                Bytes(summary.dataset_bytes)
            )
        },
    );
    eprintln!(
        "{:?}: {} steps, {} samples in {:.2} s = {:.1} samples/s, {} workers ({} batch buffers), G {}, {}",
        args.pipeline,
        summary.steps,
        summary.samples,
        summary.seconds,
        summary.rate_samples_per_s(),
        cfg.workers,
        summary.batch_buffers,
        gpu_rate.describe(args.gpu_rate),
        hits
    );
    Ok(())
}

/// The progress pipe named by `SYNERGY_PROGRESS_FD`, taken over once for the whole run.
fn progress_from_env() -> Result<Option<File>, WorkloadError> {
    let Ok(v) = std::env::var(env::PROGRESS_FD) else {
        return Ok(None);
    };
    let fd: RawFd = v.trim().parse().ok().filter(|&fd| fd >= 0).ok_or_else(|| {
        InputError::new(env::PROGRESS_FD, format!("`{v}` is not a file descriptor"))
    })?;
    // SAFETY: F_GETFD only queries the descriptor's flags.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1 {
        return Err(InputError::new(
            env::PROGRESS_FD,
            format!("{fd} is not an open file descriptor"),
        )
        .into());
    }
    // SAFETY: the launcher passed this descriptor for our exclusive use and nothing else in this
    // process refers to it; the File owns it from here on and closes it once, at exit.
    Ok(Some(unsafe { File::from_raw_fd(fd) }))
}
