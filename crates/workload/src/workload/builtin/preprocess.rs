//! One sample's preprocessing, the work a loader does per sample and the one-core rate times: the
//! per-worker state of each pipeline, the batch buffer's shape, and the per-sample augmentation
//! randomness that does not depend on which worker loads the sample.

use super::{audio, image, text};
use crate::format::rate::Pipeline;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Values per sample in the batch buffers: (f32s, i64s).
pub(super) fn sample_shape(pipeline: Pipeline, seq_len: usize) -> (usize, usize) {
    match pipeline {
        Pipeline::Image => (image::FLOATS_PER_SAMPLE, 0),
        Pipeline::Audio => (audio::FLOATS_PER_SAMPLE, 0),
        Pipeline::Text => (0, 2 * seq_len),
    }
}

/// The per-worker preprocessing state.
pub(super) enum Preprocessor {
    Image(Box<image::ImageWorker>),
    Audio(Box<audio::AudioWorker>),
    Text,
}

impl Preprocessor {
    /// A fresh worker's state for `pipeline`.
    pub(super) fn new(pipeline: Pipeline) -> Self {
        match pipeline {
            Pipeline::Image => Preprocessor::Image(Box::default()),
            Pipeline::Audio => Preprocessor::Audio(Box::default()),
            Pipeline::Text => Preprocessor::Text,
        }
    }
}

/// Preprocesses one sample's `bytes` into its slots of a batch buffer.
pub(super) fn preprocess(
    pre: &mut Preprocessor,
    bytes: &[u8],
    rng: &mut ChaCha8Rng,
    seq_len: usize,
    floats: &mut [f32],
    ints: &mut [i64],
) -> Result<(), String> {
    match pre {
        Preprocessor::Image(w) => w.process(bytes, rng, floats),
        Preprocessor::Audio(w) => w.process(bytes, floats),
        Preprocessor::Text => text::process(bytes, seq_len, ints),
    }
}

/// The augmentation randomness of one sample in one epoch, independent of which worker loads it.
pub(super) fn sample_rng(seed: u64, epoch: u64, item: usize) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x9e37_79b9_7f4a_7c15);
    rng.set_stream((epoch << 32) ^ item as u64);
    rng
}
