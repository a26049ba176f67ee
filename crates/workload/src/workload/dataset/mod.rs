//! Datasets on disk: listing a dataset's files, and generating the deterministic (seeded) datasets of the
//! built-in workloads: JPEG images with ImageNet-like sizes, 16 kHz WAV clips, and token shards.

use super::WorkloadError;
use crate::cancel::Cancel;
use crate::error::InputError;
use crate::error::Setting;
use crate::format::dataset::{read_manifest, DatasetKind, DatasetManifest, MANIFEST};
use crate::units::Bytes;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The data files of a dataset, sorted by path, with their sizes.
#[derive(Debug, Clone, Default)]
pub struct DatasetFiles {
    /// `(path, bytes)` for every regular file except the manifest and hidden ones.
    pub files: Vec<(PathBuf, u64)>,
}

impl DatasetFiles {
    /// Sum of all file sizes.
    pub fn total_bytes(&self) -> u64 {
        self.files.iter().map(|(_, b)| b).sum()
    }
    /// Paths only.
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.files.iter().map(|(p, _)| p.as_path())
    }
}

/// Lists every regular file under `dir` (recursively, sorted), except the manifest and hidden entries
/// (names starting with `.`): those are synergy's own files, such as the one-core rate
/// ([`crate::format::rate::RATE_FILE`]) and the temporary files of its atomic writes, or other tools'
/// (`.DS_Store`, `.git`), never data.
pub fn scan(dir: &Path) -> std::io::Result<DatasetFiles> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)? {
            let entry = entry?;
            if entry.file_name().as_encoded_bytes().starts_with(b".") {
                continue;
            }
            let ft = entry.file_type()?;
            let path = entry.path();
            if ft.is_dir() {
                stack.push(path);
            } else if ft.is_file() && entry.file_name() != MANIFEST {
                files.push((path, entry.metadata()?.len()));
            }
        }
    }
    files.sort();
    Ok(DatasetFiles { files })
}

/// Classes (subdirectories) of the image and audio datasets, as in an ImageFolder layout.
const CLASSES: usize = 10;
/// Size the image generator aims at per file; only used to size the first round of generation.
const IMAGE_TARGET_BYTES: f64 = 110e3;
/// JPEG quality of generated images; with [`IMAGE_NOISE`] it sets the mean file size.
const IMAGE_QUALITY: u8 = 95;
/// Peak amplitude (in 8-bit levels) of the fine texture in generated images; the main size knob.
const IMAGE_NOISE: f32 = 51.0;
/// Sample rate of generated audio.
pub const AUDIO_RATE_HZ: u32 = 16_000;
/// Bytes per text shard.
const SHARD_BYTES: u64 = 4 << 20;
/// Vocabulary of generated tokens (GPT-2's), so every id fits a u16.
const VOCAB: u32 = 50_257;

/// Generates a deterministic dataset of `kind` with about `size` bytes of data files in `dir`, plus its
/// manifest. Writes into a temporary sibling directory and renames it into place, so an interrupted run
/// leaves nothing half-made. When `cancel` is raised, generation stops at the next file and the temporary
/// directory is removed.
///
/// Generation holds a lock on `dir`'s parent directory, so two processes asked for one dataset at once
/// make it once: the second waits, then finds the first's. A `dir` that already holds a dataset of the
/// same kind and seed is reused (its manifest returned); any other existing `dir` is refused. What a
/// killed generator left (`.NAME.tmp-PID`) is removed under the lock, where no live generator has one.
pub fn generate(
    kind: DatasetKind,
    dir: &Path,
    size: Bytes,
    seed: u64,
    cancel: &Cancel,
) -> Result<DatasetManifest, WorkloadError> {
    let check = || match cancel.signal() {
        Some(sig) => Err(WorkloadError::Interrupted(sig)),
        None => Ok(()),
    };
    if size.0 == 0 {
        return Err(InputError::setting(Setting::Size, "must be more than 0 bytes").into());
    }
    // The directory's place is the user's to choose: a file where a parent should be is bad input.
    if let Some(file) = dir.ancestors().skip(1).find(|a| a.is_file()) {
        return Err(InputError::new(
            dir.display().to_string(),
            format!(
                "`{}` is a file, not a directory to make it in",
                file.display()
            ),
        )
        .into());
    }
    // A budget within this host (docs/workload-spec.md): refused now rather than failing on a full disk.
    if let Some(free) = crate::fsutil::available_bytes(dir).filter(|free| size.0 > *free) {
        return Err(InputError::setting(
            Setting::Size,
            format!(
                "{size} is more than the {} free on the filesystem of {}",
                Bytes(free),
                dir.display()
            ),
        )
        .into());
    }
    let name = dir
        .file_name()
        .ok_or_else(|| InputError::new(dir.display().to_string(), "is not a directory name"))?;
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent)
        .map_err(|e| WorkloadError::io(format!("creating {}", parent.display()), e))?;
    let _lock = lock_dir(&parent, cancel)?;
    if dir.exists() {
        return match read_manifest(dir) {
            Some(m) if m.kind == kind && m.seed == seed => Ok(m),
            _ => Err(InputError::new(
                dir.display().to_string(),
                "already exists and is not this dataset; remove it or choose another directory",
            )
            .into()),
        };
    }
    let tmp_prefix = format!(".{}.tmp-", name.to_string_lossy());
    remove_partial(&parent, &tmp_prefix);
    let tmp = parent.join(format!("{tmp_prefix}{}", std::process::id()));
    std::fs::create_dir(&tmp)
        .map_err(|e| WorkloadError::io(format!("creating {}", tmp.display()), e))?;
    let guard = TempDirGuard(Some(tmp.clone()));

    let sizes = match kind {
        DatasetKind::Image => generate_files(&tmp, size.0, IMAGE_TARGET_BYTES, |i| {
            check()?;
            Ok((image_path(i), image_file(seed, i)?))
        })?,
        DatasetKind::Audio => generate_files(&tmp, size.0, 128e3, |i| {
            check()?;
            Ok((audio_path(i), audio_file(seed, i)?))
        })?,
        DatasetKind::Text => {
            let shards = size.0.div_ceil(SHARD_BYTES);
            let last = size.0 - (shards - 1) * SHARD_BYTES;
            generate_n(&tmp, shards as usize, |i| {
                check()?;
                let bytes = if i as u64 + 1 == shards {
                    last
                } else {
                    SHARD_BYTES
                };
                Ok((format!("shard_{i:05}.bin"), text_shard(seed, i, bytes)))
            })?
        }
    };
    let total: u64 = sizes.iter().sum();
    let manifest = DatasetManifest {
        kind,
        seed,
        files: sizes.len() as u64,
        total_bytes: Bytes(total),
        mean_file_bytes: total as f64 / sizes.len().max(1) as f64,
    };
    let json = serde_json::to_string_pretty(&manifest)
        .map_err(|e| WorkloadError::Other(format!("encoding the manifest: {e}")))?;
    let manifest_path = tmp.join(MANIFEST);
    std::fs::write(&manifest_path, json + "\n")
        .map_err(|e| WorkloadError::io(format!("writing {}", manifest_path.display()), e))?;
    std::fs::rename(&tmp, dir).map_err(|e| {
        WorkloadError::io(
            format!("renaming {} to {}", tmp.display(), dir.display()),
            e,
        )
    })?;
    guard.disarm();
    Ok(manifest)
}

/// Locks `dir` (an exclusive `flock` on the directory itself, so nothing is left behind), waiting while
/// another process holds it; the kernel drops the lock when its holder exits, even under `kill -9`.
fn lock_dir(
    dir: &Path,
    cancel: &Cancel,
) -> Result<nix::fcntl::Flock<std::fs::File>, WorkloadError> {
    use nix::fcntl::{Flock, FlockArg};
    let ctx = || format!("locking {} to generate a dataset in it", dir.display());
    let mut file = std::fs::File::open(dir).map_err(|e| WorkloadError::io(ctx(), e))?;
    loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => return Ok(lock),
            Err((f, nix::errno::Errno::EWOULDBLOCK)) => file = f,
            Err((_, e)) => return Err(WorkloadError::io(ctx(), e.into())),
        }
        if let Some(sig) = cancel.signal() {
            return Err(WorkloadError::Interrupted(sig));
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Removes the temporary directories `<parent>/<prefix>*` of earlier generators. Called under the lock,
/// when none of them can be a live generator's.
fn remove_partial(parent: &Path, prefix: &str) {
    for e in std::fs::read_dir(parent).into_iter().flatten().flatten() {
        if e.file_name().to_string_lossy().starts_with(prefix)
            && e.file_type().is_ok_and(|t| t.is_dir())
        {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Removes a half-made dataset when generation fails.
struct TempDirGuard(Option<PathBuf>);

impl TempDirGuard {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for TempDirGuard {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_dir_all(p);
        }
    }
}

/// Relative path of image `i`.
fn image_path(i: usize) -> String {
    format!("n{:04}/img_{i:05}.jpg", i % CLASSES)
}

/// Relative path of audio clip `i`.
fn audio_path(i: usize) -> String {
    format!("c{:04}/clip_{i:05}.wav", i % CLASSES)
}

/// Generates files `0, 1, 2, ...` until their sizes (in index order) add up to at least `size_bytes`, and
/// deletes any generated past that point, so the file set depends only on the seed and size, not on the
/// thread count. Each round generates as many files as the mean size so far suggests are still missing.
fn generate_files<F>(
    dir: &Path,
    size_bytes: u64,
    first_guess_bytes: f64,
    make: F,
) -> Result<Vec<u64>, WorkloadError>
where
    F: Fn(usize) -> Result<(String, Vec<u8>), WorkloadError> + Sync,
{
    let mut files: Generated = Vec::new();
    loop {
        let total: u64 = files.iter().map(|f| f.2).sum();
        if total >= size_bytes {
            break;
        }
        let mean = if files.is_empty() {
            first_guess_bytes
        } else {
            total as f64 / files.len() as f64
        };
        let missing = (((size_bytes - total) as f64 / mean).ceil() as usize).max(1);
        files.extend(generate_range(dir, files.len(), missing, &make)?);
    }
    // Keep the shortest prefix that reaches the size; the last round may have overshot.
    let mut acc = 0u64;
    let keep = files
        .iter()
        .position(|f| {
            acc += f.2;
            acc >= size_bytes
        })
        .map_or(files.len(), |p| p + 1);
    for (_, rel, _) in &files[keep..] {
        let path = dir.join(rel);
        std::fs::remove_file(&path)
            .map_err(|e| WorkloadError::io(format!("removing {}", path.display()), e))?;
    }
    Ok(files[..keep].iter().map(|f| f.2).collect())
}

/// Generates exactly `n` files `0..n`.
fn generate_n<F>(dir: &Path, n: usize, make: F) -> Result<Vec<u64>, WorkloadError>
where
    F: Fn(usize) -> Result<(String, Vec<u8>), WorkloadError> + Sync,
{
    Ok(generate_range(dir, 0, n, &make)?
        .into_iter()
        .map(|f| f.2)
        .collect())
}

/// Generated files: `(index, relative path, bytes)`.
type Generated = Vec<(usize, String, u64)>;

/// Generates files `start..start+n` on all cores and writes them; returns `(index, relative path, bytes)`
/// in index order.
fn generate_range<F>(
    dir: &Path,
    start: usize,
    n: usize,
    make: &F,
) -> Result<Generated, WorkloadError>
where
    F: Fn(usize) -> Result<(String, Vec<u8>), WorkloadError> + Sync,
{
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(n.max(1));
    let next = AtomicUsize::new(start);
    let end = start + n;
    let results: Vec<Result<Generated, WorkloadError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= end {
                            return Ok(done);
                        }
                        let (rel, bytes) = make(i)?;
                        let path = dir.join(&rel);
                        if let Some(p) = path.parent() {
                            std::fs::create_dir_all(p).map_err(|e| {
                                WorkloadError::io(format!("creating {}", p.display()), e)
                            })?;
                        }
                        std::fs::write(&path, &bytes).map_err(|e| {
                            WorkloadError::io(format!("writing {}", path.display()), e)
                        })?;
                        done.push((i, rel, bytes.len() as u64));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(WorkloadError::Other("a generator thread panicked".into()))
                })
            })
            .collect()
    });
    let mut all = Vec::with_capacity(n);
    for r in results {
        all.extend(r?);
    }
    all.sort_unstable();
    Ok(all)
}

/// A generator for file `index` of a dataset: one ChaCha stream per file, so files do not depend on
/// which thread made them or in what order.
fn file_rng(seed: u64, kind: DatasetKind, index: usize) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let kind_bits: u64 = match kind {
        DatasetKind::Image => 1,
        DatasetKind::Audio => 2,
        DatasetKind::Text => 3,
    };
    rng.set_stream((kind_bits << 48) | index as u64);
    rng
}

/// Image dimensions like ImageNet's: mostly 500 pixels on the long side, 4:3 or 3:2, a quarter portrait.
fn image_dims(rng: &mut ChaCha8Rng) -> (u32, u32) {
    let long: u32 = if rng.random_bool(0.7) {
        500
    } else {
        rng.random_range(333..=500)
    };
    let ratio: f64 = match rng.random_range(0..10) {
        0..=5 => 4.0 / 3.0,
        6..=8 => 1.5,
        _ => 1.0,
    };
    let short = ((long as f64 / ratio).round() as u32).max(1);
    if rng.random_bool(0.25) {
        (short, long)
    } else {
        (long, short)
    }
}

/// One JPEG: smooth separable colour fields, a few hard-edged shapes, and fine texture whose strength
/// varies over the image (as photos mix smooth sky with detailed foliage).
fn image_file(seed: u64, index: usize) -> Result<Vec<u8>, WorkloadError> {
    image_file_with(seed, index, IMAGE_QUALITY, IMAGE_NOISE)
}

fn image_file_with(
    seed: u64,
    index: usize,
    quality: u8,
    noise: f32,
) -> Result<Vec<u8>, WorkloadError> {
    let mut rng = file_rng(seed, DatasetKind::Image, index);
    let (w, h) = image_dims(&mut rng);
    let (wu, hu) = (w as usize, h as usize);
    let mut plane = vec![0f32; wu * hu * 3];
    let tau = std::f32::consts::TAU;
    // Smooth colour: per channel a base plus three separable sinusoid products.
    for c in 0..3 {
        let base: f32 = rng.random_range(50.0..200.0);
        let mut terms = Vec::with_capacity(3);
        for _ in 0..3 {
            let amp: f32 = rng.random_range(10.0..45.0);
            let (fx, px): (f32, f32) = (rng.random_range(0.3..3.0), rng.random_range(0.0..tau));
            let (fy, py): (f32, f32) = (rng.random_range(0.3..3.0), rng.random_range(0.0..tau));
            let sx: Vec<f32> = (0..wu)
                .map(|x| amp * (tau * fx * x as f32 / w as f32 + px).sin())
                .collect();
            let sy: Vec<f32> = (0..hu)
                .map(|y| (tau * fy * y as f32 / h as f32 + py).sin())
                .collect();
            terms.push((sx, sy));
        }
        for y in 0..hu {
            let row = &mut plane[(y * wu) * 3..(y * wu + wu) * 3];
            for (x, px) in row.chunks_exact_mut(3).enumerate() {
                let mut v = base;
                for (sx, sy) in &terms {
                    v += sx[x] * sy[y];
                }
                px[c] = v;
            }
        }
    }
    // Hard-edged ellipses: objects with outlines.
    for _ in 0..rng.random_range(3..9) {
        let cx: f32 = rng.random_range(0.0..w as f32);
        let cy: f32 = rng.random_range(0.0..h as f32);
        let rx: f32 = rng.random_range(10.0..w as f32 / 3.0);
        let ry: f32 = rng.random_range(10.0..h as f32 / 3.0);
        let shift: [f32; 3] = [
            rng.random_range(-60.0..60.0),
            rng.random_range(-60.0..60.0),
            rng.random_range(-60.0..60.0),
        ];
        let x0 = (cx - rx).max(0.0) as usize;
        let x1 = ((cx + rx) as usize).min(wu);
        let y0 = (cy - ry).max(0.0) as usize;
        let y1 = ((cy + ry) as usize).min(hu);
        for y in y0..y1 {
            let dy = (y as f32 - cy) / ry;
            for x in x0..x1 {
                let dx = (x as f32 - cx) / rx;
                if dx * dx + dy * dy <= 1.0 {
                    let p = &mut plane[(y * wu + x) * 3..(y * wu + x) * 3 + 3];
                    for c in 0..3 {
                        p[c] += shift[c];
                    }
                }
            }
        }
    }
    // Texture strength map: a low-frequency field in [0.15, 1].
    let (fx, px): (f32, f32) = (rng.random_range(0.5..2.0), rng.random_range(0.0..tau));
    let (fy, py): (f32, f32) = (rng.random_range(0.5..2.0), rng.random_range(0.0..tau));
    let mx: Vec<f32> = (0..wu)
        .map(|x| 0.5 + 0.5 * (tau * fx * x as f32 / w as f32 + px).sin())
        .collect();
    let my: Vec<f32> = (0..hu)
        .map(|y| 0.5 + 0.5 * (tau * fy * y as f32 / h as f32 + py).sin())
        .collect();
    let mut pixels = vec![0u8; wu * hu * 3];
    let mut prev = 0f32;
    for (y, &texture_y) in my.iter().enumerate() {
        for (x, &texture_x) in mx.iter().enumerate() {
            let strength = noise * (0.15 + 0.85 * texture_x * texture_y);
            let r = rng.next_u32();
            // Mostly luminance texture, slightly correlated with its left neighbour (less harsh than
            // white noise), plus a little chroma noise.
            let white = (r & 0xff) as f32 / 127.5 - 1.0;
            let luma = 0.35 * prev + white;
            prev = luma;
            let o = (y * wu + x) * 3;
            for c in 0..3 {
                let chroma = ((r >> (8 + 8 * c)) & 0xff) as f32 / 255.0 - 0.5;
                let v = plane[o + c] + strength * (luma + 0.25 * chroma);
                pixels[o + c] = v.clamp(0.0, 255.0) as u8;
            }
        }
    }
    let mut out = Vec::with_capacity(160_000);
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, quality)
        .encode(&pixels, w, h, image::ExtendedColorType::Rgb8)
        .map_err(|e| WorkloadError::Other(format!("encoding image {index}: {e}")))?;
    Ok(out)
}

/// A wavetable sine: generating a dataset computes tens of millions of harmonics, and a table lookup
/// is exact enough for audio that is only ever analysed, not listened to.
struct SineTable(Vec<f32>);

impl SineTable {
    const SIZE: usize = 4096;
    fn new() -> Self {
        SineTable(
            (0..Self::SIZE)
                .map(|i| (std::f32::consts::TAU * i as f32 / Self::SIZE as f32).sin())
                .collect(),
        )
    }
    /// `sin(2π·phase)` for a phase in cycles.
    fn at(&self, phase_cycles: f32) -> f32 {
        let i = (phase_cycles.fract() * Self::SIZE as f32) as usize;
        self.0[i & (Self::SIZE - 1)]
    }
}

/// One clip of 2–6 s of speech-like sound: syllables that are voiced (a gliding fundamental with
/// formant-shaped harmonics), unvoiced (noise bursts) or pauses, each under a smooth envelope.
fn audio_file(seed: u64, index: usize) -> Result<Vec<u8>, WorkloadError> {
    let mut rng = file_rng(seed, DatasetKind::Audio, index);
    let rate = AUDIO_RATE_HZ as f32;
    let seconds: f32 = rng.random_range(2.0..6.0);
    let n = (seconds * rate) as usize;
    let sine = SineTable::new();
    let f0_base: f32 = rng.random_range(90.0..240.0);
    let mut samples = vec![0f32; n];
    let mut pos = 0usize;
    let mut phase = 0f32;
    while pos < n {
        let len = ((rng.random_range(0.12..0.35f32) * rate) as usize).min(n - pos);
        let kind = rng.random_range(0..10);
        let gain: f32 = rng.random_range(0.2..0.6);
        if kind < 7 {
            // Voiced: three formants pick which harmonics are loud.
            let formants = [
                rng.random_range(300.0..900.0f32),
                rng.random_range(900.0..2500.0f32),
                rng.random_range(2300.0..3500.0f32),
            ];
            let glide: f32 = rng.random_range(-0.2..0.2);
            let harmonics = ((4000.0 / f0_base) as usize).clamp(1, 16);
            let mut amps = vec![0f32; harmonics];
            for i in 0..len {
                let t = i as f32 / len as f32;
                let f0 = f0_base * (1.0 + glide * t);
                if i % 160 == 0 {
                    for (k, a) in amps.iter_mut().enumerate() {
                        let f = f0 * (k + 1) as f32;
                        *a = formants
                            .iter()
                            .map(|&fm| (-((f - fm) / 200.0).powi(2)).exp())
                            .sum::<f32>()
                            + 0.05;
                    }
                }
                phase = (phase + f0 / rate).fract();
                let mut v = 0f32;
                for (k, a) in amps.iter().enumerate() {
                    v += a * sine.at(phase * (k + 1) as f32);
                }
                let env = (std::f32::consts::PI * t).sin();
                samples[pos + i] = gain * env * v / harmonics as f32 * 2.0;
            }
        } else if kind < 9 {
            for i in 0..len {
                let t = i as f32 / len as f32;
                let env = (std::f32::consts::PI * t).sin();
                samples[pos + i] = 0.3 * gain * env * rng.random_range(-1.0..1.0f32);
            }
        }
        pos += len;
    }
    let mut out = std::io::Cursor::new(Vec::with_capacity(n * 2 + 64));
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: AUDIO_RATE_HZ,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let fail = |e: hound::Error| WorkloadError::Other(format!("encoding clip {index}: {e}"));
    let mut writer = hound::WavWriter::new(&mut out, spec).map_err(fail)?;
    for s in samples {
        // A noise floor, so silence is not digital zero.
        let dither: f32 = rng.random_range(-0.002..0.002);
        let v = ((s + dither).clamp(-1.0, 1.0) * 32767.0) as i16;
        writer.write_sample(v).map_err(fail)?;
    }
    writer.finalize().map_err(fail)?;
    Ok(out.into_inner())
}

/// One shard of little-endian u16 tokens with a Zipf (1/rank) distribution: ranks drawn log-uniformly.
fn text_shard(seed: u64, index: usize, bytes: u64) -> Vec<u8> {
    let mut rng = file_rng(seed, DatasetKind::Text, index);
    let tokens = (bytes / 2) as usize;
    let ln_vocab = ((VOCAB + 1) as f64).ln();
    let mut out = Vec::with_capacity(tokens * 2);
    for _ in 0..tokens {
        let u: f64 = rng.random();
        let rank = ((u * ln_vocab).exp() as u32)
            .saturating_sub(1)
            .min(VOCAB - 1);
        out.extend_from_slice(&(rank as u16).to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests;
