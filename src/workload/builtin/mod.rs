//! The built-in reference workloads: real input pipelines (image, audio, text) over a dataset on disk,
//! feeding an emulated accelerator that ingests batches at a fixed rate without using CPU.

use crate::units::Bytes;
use std::path::PathBuf;

/// Which built-in pipeline to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Pipeline {
    /// JPEG decode, random-resized crop to 224x224, horizontal flip, normalize.
    Image,
    /// WAV decode and a log-mel spectrogram.
    Audio,
    /// Fixed-length token sequences cut from shards.
    Text,
}

/// Arguments of `synergy workload run`. The budget comes from the launch contract's environment.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// The pipeline.
    #[arg(value_enum)]
    pub pipeline: Pipeline,
    /// Dataset directory (as made by `synergy dataset gen`).
    #[arg(long)]
    pub dataset: PathBuf,
    /// Samples per step.
    #[arg(long, default_value_t = 64)]
    pub batch_size: u32,
    /// Emulated accelerator ingestion rate, samples per second.
    #[arg(long)]
    pub gpu_rate: f64,
    /// Stop after this many steps (default: run until stopped).
    #[arg(long)]
    pub max_steps: Option<u64>,
    /// Stop after this many seconds (default: run until stopped).
    #[arg(long)]
    pub max_seconds: Option<f64>,
    /// Shuffling seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Batches prepared ahead of the accelerator, per worker.
    #[arg(long, default_value_t = 2)]
    pub prefetch: usize,
    /// Tokens per sequence (text pipeline).
    #[arg(long, default_value_t = 512)]
    pub seq_len: usize,
    /// Overrides `SYNERGY_CACHE_BYTES`.
    #[arg(long)]
    pub cache_bytes: Option<Bytes>,
}

/// Runs a built-in workload until its step or time limit, or until killed.
pub fn run(args: &RunArgs) -> Result<(), super::WorkloadError> {
    let _ = args;
    Err(super::WorkloadError::Other(
        "built-in workloads: not yet written".into(),
    ))
}
