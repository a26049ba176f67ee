//! Audio preprocessing as speech models' input pipelines do it: WAV decode and a log-mel spectrogram
//! (25 ms Hann frames, 10 ms hop, 512-point FFT, 80 mel bands), padded or cut to a fixed frame count.

use rustfft::num_complex::Complex;
use rustfft::{Fft, FftPlanner};
use std::sync::Arc;

/// Samples per analysis frame (25 ms at 16 kHz).
pub const FRAME_SAMPLES: usize = 400;
/// Samples between frame starts (10 ms at 16 kHz).
pub const HOP_SAMPLES: usize = 160;
/// FFT length.
pub const FFT_LEN: usize = 512;
/// Mel bands.
pub const MELS: usize = 80;
/// Frames per sample after padding or cutting: 6 s, the longest generated clip.
pub const FRAMES: usize = 600;
/// f32 values per preprocessed clip (80 x 600, band-major).
pub const FLOATS_PER_SAMPLE: usize = MELS * FRAMES;
/// The sample rate the mel bank is laid out for.
const RATE_HZ: f32 = 16_000.0;

/// Triangular mel filters over the FFT bins: per band, its first bin and its weights.
struct MelBank(Vec<(usize, Vec<f32>)>);

impl MelBank {
    /// HTK-style mel filters from 0 Hz to the Nyquist frequency.
    fn new() -> Self {
        let mel = |f: f32| 2595.0 * (1.0 + f / 700.0).log10();
        let hz = |m: f32| 700.0 * (10f32.powf(m / 2595.0) - 1.0);
        let top = mel(RATE_HZ / 2.0);
        let edges: Vec<f32> = (0..MELS + 2)
            .map(|i| hz(top * i as f32 / (MELS + 1) as f32))
            .collect();
        let bin_hz = RATE_HZ / FFT_LEN as f32;
        let bins = FFT_LEN / 2 + 1;
        let bands = (0..MELS)
            .map(|m| {
                let (lo, mid, hi) = (edges[m], edges[m + 1], edges[m + 2]);
                let weight = |k: usize| {
                    let f = k as f32 * bin_hz;
                    if f <= lo || f >= hi {
                        0.0
                    } else if f <= mid {
                        (f - lo) / (mid - lo)
                    } else {
                        (hi - f) / (hi - mid)
                    }
                };
                let first = (0..bins).find(|&k| weight(k) > 0.0).unwrap_or(0);
                let last = (0..bins).rev().find(|&k| weight(k) > 0.0).unwrap_or(first);
                (first, (first..=last).map(weight).collect())
            })
            .collect();
        MelBank(bands)
    }
}

/// Per-worker state: the FFT plan, window, mel bank and buffers are made once per worker.
pub struct AudioWorker {
    fft: Arc<dyn Fft<f32>>,
    window: Vec<f32>,
    mel: MelBank,
    samples: Vec<f32>,
    spectrum: Vec<Complex<f32>>,
    scratch: Vec<Complex<f32>>,
    power: Vec<f32>,
}

impl Default for AudioWorker {
    fn default() -> Self {
        let fft = FftPlanner::new().plan_fft_forward(FFT_LEN);
        let scratch = vec![Complex::default(); fft.get_inplace_scratch_len()];
        // The periodic Hann window, as torch.hann_window uses.
        let window = (0..FRAME_SAMPLES)
            .map(|i| 0.5 - 0.5 * (std::f32::consts::TAU * i as f32 / FRAME_SAMPLES as f32).cos())
            .collect();
        AudioWorker {
            fft,
            window,
            mel: MelBank::new(),
            samples: Vec::new(),
            spectrum: vec![Complex::default(); FFT_LEN],
            scratch,
            power: vec![0.0; FFT_LEN / 2 + 1],
        }
    }
}

impl AudioWorker {
    /// Parses one 16-bit mono WAV file and writes its 80x600 log-mel spectrogram into `out`
    /// (frames past the clip's end are zero).
    pub fn process(&mut self, wav: &[u8], out: &mut [f32]) -> Result<(), String> {
        let mut reader =
            hound::WavReader::new(std::io::Cursor::new(wav)).map_err(|e| e.to_string())?;
        let spec = reader.spec();
        if spec.channels != 1 || spec.bits_per_sample != 16 {
            return Err(format!(
                "expected 16-bit mono WAV, found {} channels of {} bits",
                spec.channels, spec.bits_per_sample
            ));
        }
        self.samples.clear();
        for s in reader.samples::<i16>() {
            let s = s.map_err(|e| e.to_string())?;
            self.samples.push(s as f32 / 32768.0);
        }
        let n = self.samples.len();
        let frames = if n >= FRAME_SAMPLES {
            1 + (n - FRAME_SAMPLES) / HOP_SAMPLES
        } else {
            1
        }
        .min(FRAMES);
        let out = &mut out[..FLOATS_PER_SAMPLE];
        out.fill(0.0);
        for f in 0..frames {
            let start = f * HOP_SAMPLES;
            for (i, z) in self.spectrum.iter_mut().enumerate() {
                let s = if i < FRAME_SAMPLES {
                    self.samples.get(start + i).copied().unwrap_or(0.0) * self.window[i]
                } else {
                    0.0
                };
                *z = Complex::new(s, 0.0);
            }
            self.fft
                .process_with_scratch(&mut self.spectrum, &mut self.scratch);
            for (p, z) in self.power.iter_mut().zip(&self.spectrum) {
                *p = z.norm_sqr();
            }
            for (m, (first, weights)) in self.mel.0.iter().enumerate() {
                let energy: f32 = weights
                    .iter()
                    .zip(&self.power[*first..])
                    .map(|(w, p)| w * p)
                    .sum();
                out[m * FRAMES + f] = (energy + 1e-6).ln();
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wav(samples: &[i16]) -> Vec<u8> {
        let mut out = std::io::Cursor::new(Vec::new());
        let spec = hound::WavSpec {
            channels: 1,
            sample_rate: 16_000,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        let mut w = hound::WavWriter::new(&mut out, spec).unwrap();
        for &s in samples {
            w.write_sample(s).unwrap();
        }
        w.finalize().unwrap();
        out.into_inner()
    }

    #[test]
    fn a_tone_lights_up_its_mel_band() {
        let tone: Vec<i16> = (0..16_000)
            .map(|i| (8000.0 * (std::f32::consts::TAU * 1000.0 * i as f32 / 16_000.0).sin()) as i16)
            .collect();
        let mut worker = AudioWorker::default();
        let mut out = vec![1f32; FLOATS_PER_SAMPLE];
        worker.process(&wav(&tone), &mut out).unwrap();
        let frame = 10;
        let loudest = (0..MELS)
            .max_by(|&a, &b| out[a * FRAMES + frame].total_cmp(&out[b * FRAMES + frame]))
            .unwrap();
        let (first, weights) = &worker.mel.0[loudest];
        let bin = 1000.0 / (16_000.0 / FFT_LEN as f32);
        assert!((*first as f32) <= bin && bin <= (*first + weights.len()) as f32);
        // One second of audio is 98 frames; the rest is padding.
        assert_eq!(out[5 * FRAMES + 200], 0.0);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let mut worker = AudioWorker::default();
        let mut out = vec![0f32; FLOATS_PER_SAMPLE];
        assert!(worker.process(b"RIFF....", &mut out).is_err());
    }
}
