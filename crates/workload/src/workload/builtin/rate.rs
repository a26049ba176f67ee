//! The emulated accelerator's rate relative to this host. CPU speed differs up to twofold between machines
//! of one kind, so a fixed rate (`--gpu-rate 900`) saturates at 1.3 cores on one machine and never on
//! another. `--gpu-rate 1.3x` means 1.3 times this host's one-core rate for the pipeline on the dataset:
//! samples per second of thread CPU time (a busy host does not lower it) for loading a sample from the
//! page cache and preprocessing it. The workload measures it at start-up when no valid stored value
//! exists and keeps it in the dataset directory ([`RATE_FILE`]), keyed by pipeline, the parameters that
//! change per-sample work, host name, kernel boot id and build, so another boot or host measures again.

use super::preprocess::{preprocess, sample_rng, sample_shape, Preprocessor};
use super::source::Items;
use super::RunArgs;
use crate::clock::thread_cpu_s;
use crate::error::InputError;
use crate::error::Setting;
use crate::format::rate::{store_rate, stored_rate, Pipeline, RateKey, RateMeasurement, RATE_FILE};
use crate::workload::WorkloadError;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Thread CPU time a measurement preprocesses for.
const MEASURE_CPU_S: f64 = 0.3;
/// Items a measurement cycles through (spread evenly over the dataset). Few image and audio files, so
/// reading them first puts little into the page cache of a trial that wants it cold; many text sequences,
/// since each is only 1 KB and a handful would sit in the CPU's caches as real reads do not.
const MEASURE_FILES: usize = 32;
const MEASURE_SEQUENCES: usize = 1024;

/// `--gpu-rate`: an absolute rate, or a multiple of this host's one-core rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GpuRate {
    /// Samples per second (`900`).
    SamplesPerS(f64),
    /// Times this host's one-core preprocessing rate for the pipeline on the dataset (`1.3x`).
    OneCoreMultiple(f64),
}

impl std::str::FromStr for GpuRate {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        let (number, relative) = match t.strip_suffix(['x', 'X']) {
            Some(n) => (n.trim(), true),
            None => (t, false),
        };
        let v: f64 = number.parse().map_err(|_| {
            format!("`{s}` is not a rate: give samples/s (e.g. 900) or a multiple of this host's one-core preprocessing rate (e.g. 1.3x)")
        })?;
        if !(v.is_finite() && v > 0.0) {
            return Err(format!(
                "`{s}`: the rate must be a finite number more than 0"
            ));
        }
        Ok(if relative {
            GpuRate::OneCoreMultiple(v)
        } else {
            GpuRate::SamplesPerS(v)
        })
    }
}

impl std::fmt::Display for GpuRate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GpuRate::SamplesPerS(v) => write!(f, "{v}"),
            GpuRate::OneCoreMultiple(m) => write!(f, "{m}x"),
        }
    }
}

/// A one-core rate and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OneCoreRate {
    /// What it is valid for.
    #[serde(flatten)]
    pub key: RateKey,
    /// The measurement.
    #[serde(flatten)]
    pub measurement: RateMeasurement,
    /// True when measured by this call, false when read from the rate file.
    pub measured_now: bool,
    /// Where it is kept.
    pub rate_file: PathBuf,
    /// Why it could not be kept there (it is then measured at every start); `None` when kept.
    pub not_kept: Option<String>,
}

impl OneCoreRate {
    /// Samples per CPU-second.
    pub fn samples_per_cpu_s(&self) -> f64 {
        self.measurement.samples_per_cpu_s
    }
}

/// This host's one-core rate for `pipeline` on the dataset at `dir`: the stored one, or (when none is
/// stored for this host and boot, or with `refresh`) measured now and stored.
pub fn one_core_rate(
    dir: &Path,
    pipeline: Pipeline,
    seq_len: usize,
    refresh: bool,
) -> Result<OneCoreRate, WorkloadError> {
    one_core_rate_keyed(dir, &RateKey::here(pipeline, seq_len), seq_len, refresh)
}

/// [`one_core_rate`] for an explicit key (another host name or boot id, in tests).
pub fn one_core_rate_keyed(
    dir: &Path,
    key: &RateKey,
    seq_len: usize,
    refresh: bool,
) -> Result<OneCoreRate, WorkloadError> {
    let rate_file = dir.join(RATE_FILE);
    if !refresh {
        if let Some(m) = stored_rate(dir, key) {
            return Ok(OneCoreRate {
                key: key.clone(),
                measurement: m,
                measured_now: false,
                rate_file,
                not_kept: None,
            });
        }
    }
    let m = measure_one_core_rate(dir, key.pipeline, seq_len)?;
    let not_kept = store_rate(dir, key, m).err().map(|e| {
        format!(
            "cannot keep the one-core rate in {} ({e}); it is measured at every start",
            rate_file.display()
        )
    });
    Ok(OneCoreRate {
        key: key.clone(),
        measurement: m,
        measured_now: true,
        rate_file,
        not_kept,
    })
}

/// Measures the one-core rate: reads a fixed, evenly spread set of items once (so no disk time is
/// counted), then on this thread loads them again from the page cache and preprocesses them, round after
/// round with fresh augmentation, until [`MEASURE_CPU_S`] of thread CPU time have passed.
pub fn measure_one_core_rate(
    dir: &Path,
    pipeline: Pipeline,
    seq_len: usize,
) -> Result<RateMeasurement, WorkloadError> {
    let items = Items::open(dir, pipeline, seq_len)?;
    let n = items.len();
    let k = n.min(match pipeline {
        Pipeline::Text => MEASURE_SEQUENCES,
        Pipeline::Image | Pipeline::Audio => MEASURE_FILES,
    });
    let picks: Vec<usize> = (0..k).map(|j| j * n / k).collect();
    for &i in &picks {
        items.read(i, false)?;
    }
    let (fps, ips) = sample_shape(pipeline, seq_len);
    let mut floats = vec![0f32; fps];
    let mut ints = vec![0i64; ips];
    let mut pre = Preprocessor::new(pipeline);
    let mut one = |i: usize, round: u64| -> Result<(), WorkloadError> {
        let bytes = items.read(i, false)?;
        let mut rng = sample_rng(0, round, i);
        preprocess(&mut pre, &bytes, &mut rng, seq_len, &mut floats, &mut ints).map_err(|e| {
            InputError::new(items.describe(i), format!("cannot be preprocessed: {e}")).into()
        })
    };
    // Untimed: a worker's first sample sizes its buffers.
    one(picks[0], 0)?;
    let wall0 = Instant::now();
    let cpu0 = thread_cpu_s();
    let mut samples = 0u64;
    let mut round = 1u64;
    let cpu_s = loop {
        for &i in &picks {
            one(i, round)?;
        }
        samples += picks.len() as u64;
        round += 1;
        let cpu_s = thread_cpu_s() - cpu0;
        if cpu_s >= MEASURE_CPU_S {
            break cpu_s;
        }
    };
    let measured_unix_s = crate::clock::unix_now_s() as u64;
    let m = RateMeasurement {
        samples_per_cpu_s: samples as f64 / cpu_s,
        samples,
        cpu_s,
        wall_s: wall0.elapsed().as_secs_f64(),
        measured_unix_s,
    };
    // serde_json reads some floats back one ulp off what it wrote: use the numbers as the rate file will
    // give them, so the run that measured G and every later run read the same G.
    Ok(serde_json::to_vec(&m)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(m))
}

/// `--gpu-rate` in samples per second, and the one-core rate it was derived from when relative.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedGpuRate {
    /// The accelerator's ingestion rate G, samples/s.
    pub samples_per_s: f64,
    /// The one-core rate a relative `--gpu-rate` multiplies.
    pub one_core: Option<OneCoreRate>,
}

impl ResolvedGpuRate {
    /// For people: `535.2 samples/s` or `535.2 samples/s = 1.3x one-core 411.7 (stored)`.
    pub fn describe(&self, rate: GpuRate) -> String {
        match (&self.one_core, rate) {
            (Some(oc), GpuRate::OneCoreMultiple(m)) => format!(
                "{:.1} samples/s = {m}x one-core {:.1} ({})",
                self.samples_per_s,
                oc.samples_per_cpu_s(),
                if oc.measured_now {
                    "measured now"
                } else {
                    "stored"
                }
            ),
            _ => format!("{:.1} samples/s", self.samples_per_s),
        }
    }
}

/// Resolves `--gpu-rate`: a relative rate takes the stored one-core rate (no dataset read, so synthetic
/// runs start at once), else measures it, which needs the dataset.
pub fn resolve_gpu_rate(args: &RunArgs) -> Result<ResolvedGpuRate, WorkloadError> {
    resolve_gpu_rate_keyed(args, &RateKey::here(args.pipeline, args.seq_len))
}

/// [`resolve_gpu_rate`] for an explicit key.
pub fn resolve_gpu_rate_keyed(
    args: &RunArgs,
    key: &RateKey,
) -> Result<ResolvedGpuRate, WorkloadError> {
    match args.gpu_rate {
        GpuRate::SamplesPerS(g) => {
            if !(g.is_finite() && g > 0.0) {
                return Err(
                    InputError::setting(Setting::GpuRate, "must be more than 0 samples/s").into(),
                );
            }
            Ok(ResolvedGpuRate {
                samples_per_s: g,
                one_core: None,
            })
        }
        GpuRate::OneCoreMultiple(m) => {
            if !(m.is_finite() && m > 0.0) {
                return Err(InputError::setting(
                    Setting::GpuRate,
                    "the multiple must be more than 0",
                )
                .into());
            }
            if stored_rate(&args.dataset, key).is_none() && !args.dataset.is_dir() {
                return Err(InputError::setting(
                    Setting::GpuRate,
                    format!(
                        "{m}x is relative to this host's one-core rate for the {} pipeline on the dataset, \
                         which is not stored and cannot be measured: {} does not exist; make the dataset \
                         (`synergy dataset gen`) or give an absolute rate in samples/s",
                        key.pipeline,
                        args.dataset.display()
                    ),
                )
                .into());
            }
            let oc = one_core_rate_keyed(&args.dataset, key, args.seq_len, false)?;
            Ok(ResolvedGpuRate {
                samples_per_s: m * oc.samples_per_cpu_s(),
                one_core: Some(oc),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::dataset::DatasetKind;
    use crate::units::Bytes;
    use crate::workload::dataset::{generate, scan};

    fn text_dataset() -> (tempfile::TempDir, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("ds");
        generate(
            DatasetKind::Text,
            &dir,
            Bytes(256 << 10),
            3,
            &crate::cancel::Cancel::new(),
        )
        .unwrap();
        (tmp, dir)
    }

    #[test]
    fn gpu_rates_parse_as_absolute_or_relative() {
        let p = |s: &str| s.parse::<GpuRate>();
        assert_eq!(p("900"), Ok(GpuRate::SamplesPerS(900.0)));
        assert_eq!(p(" 1.3x"), Ok(GpuRate::OneCoreMultiple(1.3)));
        assert_eq!(p("2X"), Ok(GpuRate::OneCoreMultiple(2.0)));
        assert_eq!(p("1e3"), Ok(GpuRate::SamplesPerS(1000.0)));
        for bad in [
            "0", "0x", "-1x", "-5", "x", "", "nan", "nanx", "inf", "fast", "1.3y", "1.3xx",
        ] {
            let err = p(bad).unwrap_err();
            assert!(err.contains(&format!("`{bad}`")), "{bad}: {err}");
        }
        assert_eq!(GpuRate::OneCoreMultiple(1.3).to_string(), "1.3x");
        assert_eq!(GpuRate::SamplesPerS(900.0).to_string(), "900");
    }

    #[test]
    fn a_rate_is_kept_for_its_host_boot_and_work_only() {
        let (_tmp, dir) = text_dataset();
        let key = RateKey::new(Pipeline::Text, 63, "host-a", "boot-1");
        let first = one_core_rate_keyed(&dir, &key, 63, false).unwrap();
        assert!(first.measured_now && first.not_kept.is_none(), "{first:?}");
        assert!(first.samples_per_cpu_s() > 0.0 && first.measurement.cpu_s >= MEASURE_CPU_S);
        assert_eq!(first.rate_file, dir.join(RATE_FILE));
        // The same key reads it back without measuring.
        let again = one_core_rate_keyed(&dir, &key, 63, false).unwrap();
        assert!(!again.measured_now);
        assert_eq!(again.measurement, first.measurement);
        // Another boot, another host or another sequence length measures again.
        let other_boot = RateKey::new(Pipeline::Text, 63, "host-a", "boot-2");
        assert_eq!(stored_rate(&dir, &other_boot), None);
        let host_b = RateKey::new(Pipeline::Text, 63, "host-b", "boot-1");
        assert_eq!(stored_rate(&dir, &host_b), None);
        assert_eq!(
            stored_rate(&dir, &RateKey::new(Pipeline::Text, 31, "host-a", "boot-1")),
            None
        );
        let remeasured = one_core_rate_keyed(&dir, &other_boot, 63, false).unwrap();
        assert!(remeasured.measured_now);
        // The new boot's entry replaced the old boot's on the same host.
        assert_eq!(stored_rate(&dir, &key), None);
        assert!(stored_rate(&dir, &other_boot).is_some());
        // Another host's entry stays beside this one's.
        one_core_rate_keyed(&dir, &host_b, 63, false).unwrap();
        assert!(stored_rate(&dir, &other_boot).is_some());
        assert!(stored_rate(&dir, &host_b).is_some());
        // --refresh measures even when one is stored.
        assert!(
            one_core_rate_keyed(&dir, &host_b, 63, true)
                .unwrap()
                .measured_now
        );
        // No boot id: nothing stored ever matches.
        let unknown = RateKey::new(Pipeline::Text, 63, "host-a", "");
        one_core_rate_keyed(&dir, &unknown, 63, false).unwrap();
        assert!(
            one_core_rate_keyed(&dir, &unknown, 63, false)
                .unwrap()
                .measured_now
        );
    }

    #[test]
    fn the_rate_file_is_not_data() {
        let (_tmp, dir) = text_dataset();
        let before = scan(&dir).unwrap();
        let key = RateKey::new(Pipeline::Text, 63, "h", "b");
        one_core_rate_keyed(&dir, &key, 63, false).unwrap();
        assert!(dir.join(RATE_FILE).is_file());
        // A temporary file left by an interrupted atomic write is hidden too.
        std::fs::write(dir.join(".tmpXYZ123"), b"junk").unwrap();
        let after = scan(&dir).unwrap();
        assert_eq!(before.files, after.files);
        let items = Items::open(&dir, Pipeline::Text, 63).unwrap();
        assert_eq!(items.total_bytes(), (256 << 10) / 128 * 128);
    }

    #[test]
    fn a_rate_file_that_cannot_be_written_is_measured_every_time() {
        let (_tmp, dir) = text_dataset();
        // A directory where the file should be: neither readable as a rate file nor replaceable.
        std::fs::create_dir(dir.join(RATE_FILE)).unwrap();
        let key = RateKey::new(Pipeline::Text, 63, "h", "b");
        let r = one_core_rate_keyed(&dir, &key, 63, false).unwrap();
        assert!(r.measured_now && r.samples_per_cpu_s() > 0.0);
        let why = r.not_kept.expect("the failure is reported");
        assert!(why.contains(RATE_FILE), "{why}");
        assert!(
            one_core_rate_keyed(&dir, &key, 63, false)
                .unwrap()
                .measured_now
        );
    }

    fn run_args(dir: &Path, rate: GpuRate) -> RunArgs {
        RunArgs {
            pipeline: Pipeline::Text,
            dataset: dir.to_path_buf(),
            batch_size: 8,
            gpu_rate: rate,
            max_steps: None,
            max_samples: None,
            max_seconds: None,
            seed: 0,
            prefetch: 2,
            seq_len: 63,
            cache_bytes: None,
        }
    }

    #[test]
    fn a_relative_rate_multiplies_the_one_core_rate_and_needs_the_dataset_only_to_measure_it() {
        let (tmp, dir) = text_dataset();
        let key = RateKey::new(Pipeline::Text, 63, "h", "b");
        let a = run_args(&dir, GpuRate::OneCoreMultiple(0.5));
        let r = resolve_gpu_rate_keyed(&a, &key).unwrap();
        let oc = r.one_core.clone().unwrap();
        assert!((r.samples_per_s - 0.5 * oc.samples_per_cpu_s()).abs() < 1e-9);
        assert!(r.describe(a.gpu_rate).contains("0.5x one-core"));
        // Stored: the same G again, even with the data files gone (as synthetic runs never read them).
        for (p, _) in scan(&dir).unwrap().files {
            std::fs::remove_file(p).unwrap();
        }
        let again = resolve_gpu_rate_keyed(&a, &key).unwrap();
        assert_eq!(again.samples_per_s, r.samples_per_s);
        assert!(!again.one_core.unwrap().measured_now);
        // No dataset and nothing stored: a clear input error naming the flag.
        let missing = run_args(&tmp.path().join("none"), GpuRate::OneCoreMultiple(1.3));
        let err = resolve_gpu_rate_keyed(&missing, &key).unwrap_err();
        assert!(matches!(err, WorkloadError::Input(_)), "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains("setting `gpu_rate`") && msg.contains("none"),
            "{msg}"
        );
        // An absolute rate needs nothing.
        let abs = resolve_gpu_rate_keyed(
            &run_args(&tmp.path().join("none"), GpuRate::SamplesPerS(900.0)),
            &key,
        )
        .unwrap();
        assert_eq!((abs.samples_per_s, abs.one_core), (900.0, None));
    }
}
