//! How fast this host's CPU is, by a fixed calibration kernel: machines of one kind differ in speed by up
//! to 2x, so a profile records the calibration beside its numbers, taken before and after, to say how fast
//! the machine that made it was and whether its speed held while it ran.

use crate::clock::thread_cpu_s;
use crate::format::trial::CpuCalibration;
use std::time::Instant;

/// Timed repeats of the kernel (after one untimed warm-up repeat).
const REPEATS: u32 = 7;
/// 64-bit words in the kernel's buffer: 4 KiB, so it stays in every L1 cache and memory speed does not
/// enter.
const BUF_WORDS: usize = 512;
/// Passes over the buffer per repeat: a fixed amount of work, about 15 ms on the slower machines of the
/// 2-core kind with a release build (debug builds are several times slower; compare release numbers only).
const PASSES_PER_REPEAT: u64 = 10_000;
/// Kernel operations per repeat: one per buffer word per pass.
const OPS_PER_REPEAT: u64 = PASSES_PER_REPEAT * BUF_WORDS as u64;

/// How much further a data pipeline's CPU-bound rate moves than the speed probe's kernel when the host's
/// speed drifts: the rate goes as the probe's reading to this power. The kernel stays in L1, while a
/// pipeline decodes and copies samples through the caches its neighbours share, so a slow spell slows
/// it more. Measured here: the image pipeline on one core against the kernel on the other for 360 s,
/// the slope of the log of the one on the log of the other was 2.4 to 2.7 over windows of 5 to 20 s
/// (docs/profile-format.md, "The host's speed").
pub const PIPELINE_SPEED_EXPONENT: f64 = 2.5;

/// How far the speed probe's reading may sit from the reference, either way, before the rest counts as the
/// host's drift. The probe reads a trial's shape as well as the host: on a core that a half-core quota
/// leaves idle half the time it read 1.1% lower than at one core in four alternated pairs of cached `image`
/// trials, and the pipeline ran 1.1% less per core there too (2026-12-05). That is a cost of the allocation,
/// which every job granted it pays, not a slow spell, so it is not scaled away (docs/profile-format.md,
/// "The host's speed").
pub const PROBE_SHAPE_BAND: f64 = 0.015;

/// How many times as fast a CPU-bound pipeline runs on a core the speed probe read at `ratio` times
/// another's speed: the ratio's first [`PROBE_SHAPE_BAND`] either way is the trial's shape and moves
/// nothing, and the rest, the host's drift, moves the pipeline to the power [`PIPELINE_SPEED_EXPONENT`].
/// 1 for a ratio that is not a positive number.
pub fn pipeline_speedup(ratio: f64) -> f64 {
    if !(ratio.is_finite() && ratio > 0.0) {
        return 1.0;
    }
    let log_ratio = ratio.ln();
    let drift = log_ratio.signum() * (log_ratio.abs() - PROBE_SHAPE_BAND.ln_1p()).max(0.0);
    (drift * PIPELINE_SPEED_EXPONENT).exp()
}

/// Runs the calibration kernel (integer and float work over a 4 KiB buffer: no I/O, no allocation) on a
/// new thread, pinned to `core` when given, [`REPEATS`] times after a warm-up; about 120 ms on this
/// machine kind in a release build.
pub fn cpu_calibration(core: Option<usize>) -> CpuCalibration {
    let run = move || {
        let pinned = core.filter(|&c| pin_this_thread(c));
        measure_repeats(pinned)
    };
    // A thread of its own, so that pinning never touches the caller's affinity; where no thread can be
    // made, the caller's thread is measured unpinned.
    match std::thread::Builder::new()
        .name("cpu-calibration".into())
        .spawn(run)
    {
        Ok(handle) => handle.join().unwrap_or_else(|_| measure_repeats(None)),
        Err(_) => measure_repeats(None),
    }
}

fn measure_repeats(core: Option<usize>) -> CpuCalibration {
    let mut buf = [0u64; BUF_WORDS];
    let mut seed = std::hint::black_box(0x9e37_79b9_7f4a_7c15u64);
    for w in buf.iter_mut() {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *w = seed | 1;
    }
    std::hint::black_box(kernel(&mut buf, PASSES_PER_REPEAT));
    let mut rates = Vec::with_capacity(REPEATS as usize);
    let cpu_start = thread_cpu_s();
    for _ in 0..REPEATS {
        let t0 = Instant::now();
        std::hint::black_box(kernel(&mut buf, PASSES_PER_REPEAT));
        let wall_s = t0.elapsed().as_secs_f64().max(1e-9);
        rates.push(OPS_PER_REPEAT as f64 / wall_s);
    }
    let cpu_s = (thread_cpu_s() - cpu_start).max(1e-9);
    let best = rates.iter().copied().fold(0.0, f64::max);
    let worst = rates.iter().copied().fold(f64::INFINITY, f64::min);
    CpuCalibration {
        ops_per_s: best,
        ops_per_cpu_s: (OPS_PER_REPEAT * u64::from(REPEATS)) as f64 / cpu_s,
        spread: best / worst - 1.0,
        repeats: REPEATS,
        core,
    }
}

/// Passes of one probe reading: about 2 ms of the kernel, so a reading every 250 ms takes under 1% of
/// the core it shares with a trial.
const PROBE_PASSES: u64 = 1_300;

/// Readings of the kernel's speed on one core while a trial runs there: every `every`, a short run timed
/// by the probe thread's own CPU time, which other work on the core does not lengthen but a slower core
/// does (another tenant of a virtual machine's physical core shows up here and nowhere else).
pub struct SpeedProbe {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    handle: Option<std::thread::JoinHandle<Vec<(Instant, f64)>>>,
}

impl SpeedProbe {
    /// Starts probing `core` every `every`; `None` when no thread can be made.
    pub fn start(core: usize, every: std::time::Duration) -> Option<SpeedProbe> {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("speed-probe".into())
            .spawn(move || {
                pin_this_thread(core);
                let mut buf = [1u64; BUF_WORDS];
                let mut out = Vec::new();
                while !flag.load(Ordering::Relaxed) {
                    let c0 = thread_cpu_s();
                    std::hint::black_box(kernel(&mut buf, PROBE_PASSES));
                    let cpu = thread_cpu_s() - c0;
                    if cpu > 0.0 {
                        out.push((
                            Instant::now(),
                            (PROBE_PASSES * BUF_WORDS as u64) as f64 / cpu,
                        ));
                    }
                    std::thread::sleep(every);
                }
                out
            })
            .ok()?;
        Some(SpeedProbe {
            stop,
            handle: Some(handle),
        })
    }

    /// Stops the probe; its readings as (when, operations per CPU-second).
    pub fn finish(mut self) -> Vec<(Instant, f64)> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for SpeedProbe {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The kernel: xorshift mixing chained through the buffer plus a float accumulation, so neither the
/// integer nor the float units can be skipped and the compiler cannot fold the work away.
fn kernel(buf: &mut [u64; BUF_WORDS], passes: u64) -> f64 {
    let mut acc = 1.0f64;
    let scale = 1.0 / (1u64 << 53) as f64;
    for _ in 0..passes {
        let mut prev = buf[BUF_WORDS - 1];
        for w in buf.iter_mut() {
            let mut x = *w ^ prev.rotate_left(7);
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *w = x;
            prev = x;
            acc = acc * 0.999_999_9 + (x >> 11) as f64 * scale;
        }
    }
    acc
}

/// Pins the calling thread to `core`; false when the kernel refuses (a core not in this cpuset).
fn pin_this_thread(core: usize) -> bool {
    let mut set = nix::sched::CpuSet::new();
    if set.set(core).is_err() {
        return false;
    }
    // Pid 0 is the calling thread for sched_setaffinity.
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_calibration_is_positive_finite_and_repeatable() {
        let a = cpu_calibration(Some(0));
        let b = cpu_calibration(None);
        for c in [a, b] {
            assert!(c.ops_per_s.is_finite() && c.ops_per_s > 0.0, "{c:?}");
            assert!(
                c.ops_per_cpu_s.is_finite() && c.ops_per_cpu_s > 0.0,
                "{c:?}"
            );
            assert!(c.spread.is_finite() && c.spread >= 0.0, "{c:?}");
            assert_eq!(c.repeats, REPEATS);
        }
        // Core 0 exists everywhere, but a cpuset may leave it out; then it ran unpinned.
        assert!(a.core.is_none() || a.core == Some(0));
        assert_eq!(b.core, None);
        // By CPU time another tenant cannot halve the rate: a bound that only a broken clock or kernel
        // breaks, not a busy host.
        let ratio = a.ops_per_cpu_s / b.ops_per_cpu_s;
        assert!((1.0 / 3.0..=3.0).contains(&ratio), "{a:?} vs {b:?}");
        let json = serde_json::to_value(a).unwrap();
        assert!(json["ops_per_s"].is_number() && json["spread"].is_number());
    }

    #[test]
    fn a_reading_within_the_shape_band_moves_nothing_and_only_the_rest_is_drift() {
        for r in [
            1.0,
            1.01,
            0.99,
            1.0 + PROBE_SHAPE_BAND,
            1.0 / (1.0 + PROBE_SHAPE_BAND),
        ] {
            assert!((pipeline_speedup(r) - 1.0).abs() < 1e-12, "{r}");
        }
        // 5% slow is the band's 1.5% of shape and the rest drift, to the power 2.5.
        let drift = 0.95 * (1.0 + PROBE_SHAPE_BAND);
        let want = drift.powf(PIPELINE_SPEED_EXPONENT);
        assert!((pipeline_speedup(0.95) - want).abs() < 1e-12);
        assert!(pipeline_speedup(0.95) < 0.95 && pipeline_speedup(0.95) > 0.95f64.powf(2.5));
        // Fast and slow by the same factor are mirror images, and the speed-up never jumps at the band.
        assert!((pipeline_speedup(1.1) * pipeline_speedup(1.0 / 1.1) - 1.0).abs() < 1e-12);
        let edge = 1.0 + PROBE_SHAPE_BAND;
        assert!((pipeline_speedup(edge * 1.000_001) - 1.0).abs() < 1e-5);
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(pipeline_speedup(bad), 1.0);
        }
    }

    #[test]
    fn the_thread_clock_advances_with_work() {
        let t0 = thread_cpu_s();
        let mut buf = [1u64; BUF_WORDS];
        std::hint::black_box(kernel(&mut buf, 200));
        assert!(thread_cpu_s() > t0);
    }

    #[test]
    fn the_probe_reads_while_running_and_stops() {
        let p = SpeedProbe::start(0, std::time::Duration::from_millis(10)).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        let r = p.finish();
        assert!(r.len() >= 3, "{}", r.len());
        assert!(r.iter().all(|(_, v)| v.is_finite() && *v > 0.0));
    }
}
