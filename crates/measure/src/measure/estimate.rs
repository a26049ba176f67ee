//! Throughput estimation from progress events: excludes warm-up, estimates samples per second with a 95%
//! confidence interval (batch means over consecutive steps), and decides when a trial can stop.

use crate::error::Setting;
use crate::format::trial::Estimate;
use serde::{Deserialize, Serialize};

/// When to start measuring and when to stop.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EstimatorConfig {
    /// Seconds from the first step that never count (pipeline fill, JIT, cache warm-up).
    pub warmup_s: f64,
    /// Steps that never count, whatever the time.
    pub warmup_steps: u64,
    /// Epochs that never count (e.g. 1 when an application cache fills in the first epoch); needs progress
    /// lines that carry `epoch`.
    pub warmup_epochs: u64,
    /// Waiting for `warmup_epochs` ends after this many seconds even if the epoch has not turned, so a
    /// workload with very long epochs is still measured.
    #[serde(default = "unbounded")]
    pub warmup_epochs_max_s: f64,
    /// Shortest measured window (after warm-up) before the trial may stop.
    pub min_measure_s: f64,
    /// Fewest steps in the measured window before the trial may stop. A loader's workers deliver
    /// batches in bursts, so a window of a dozen steps reads several percent off while its interval
    /// claims ±1-2% (docs/profile-format.md, "How the trials run").
    #[serde(default)]
    pub min_measure_steps: u64,
    /// A window at least this long needs only [`EstimatorConfig::min_measure_steps_long`] steps: where a
    /// step takes seconds, [`EstimatorConfig::min_measure_steps`] of them would take minutes, and a
    /// window this long already averages the host's slow spells and the loader's bursts over many of
    /// their periods.
    #[serde(default = "unbounded")]
    pub long_window_s: f64,
    /// Fewest steps in a window at least [`EstimatorConfig::long_window_s`] long.
    #[serde(default)]
    pub min_measure_steps_long: u64,
    /// Longest trial, warm-up included; the trial stops then whatever the precision.
    pub max_total_s: f64,
    /// Stop once the 95% confidence half-width is at most this fraction of the mean.
    pub rel_precision: f64,
    /// Measure the first epoch only: later steps are ignored and end the trial (a cold-cache trial stays
    /// cold only until the dataset comes round again).
    #[serde(default)]
    pub first_epoch_only: bool,
    /// Measure whole epochs: the window starts where an epoch starts and the trial stops where one ends,
    /// once the window is at least `min_measure_s` long (`rel_precision` does not apply, see
    /// [`Estimator::converged`]). A workload whose cache hits cluster within an epoch (an LRU-like page
    /// cache under per-epoch shuffling hits early and misses late) is otherwise over- or
    /// under-estimated by a window that covers part of one. Needs progress lines that carry `epoch`;
    /// without them it has no effect.
    #[serde(default)]
    pub whole_epochs: bool,
}

fn unbounded() -> f64 {
    f64::INFINITY
}

impl EstimatorConfig {
    /// The stated ranges (docs/architecture.md §7): times finite and not negative, the longest trial
    /// positive and at least the shortest window, the precision a fraction in (0, 1).
    pub fn check(&self) -> Result<(), crate::error::InputError> {
        use crate::error::InputError;
        for (setting, v) in [
            (Setting::WarmupS, self.warmup_s),
            (Setting::MinMeasureS, self.min_measure_s),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(InputError::setting(
                    setting,
                    "must be a finite, non-negative number of seconds",
                ));
            }
        }
        if !(self.max_total_s.is_finite() && self.max_total_s > 0.0) {
            return Err(InputError::setting(
                Setting::MaxTotalS,
                "must be a positive number of seconds",
            ));
        }
        if self.min_measure_s > self.max_total_s {
            return Err(InputError::setting(
                Setting::MinMeasureS,
                format!(
                    "{} s is more than {} ({} s): a trial could never measure that long",
                    self.min_measure_s,
                    Setting::MaxTotalS,
                    self.max_total_s
                ),
            ));
        }
        if !(self.rel_precision > 0.0 && self.rel_precision < 1.0) {
            return Err(InputError::setting(
                Setting::RelPrecision,
                "must be a fraction of the mean between 0 and 1 (0.02 is 2%)",
            ));
        }
        Ok(())
    }
}

impl Default for EstimatorConfig {
    fn default() -> Self {
        EstimatorConfig {
            warmup_s: 2.0,
            warmup_steps: 3,
            warmup_epochs: 0,
            warmup_epochs_max_s: f64::INFINITY,
            min_measure_s: 3.0,
            min_measure_steps: 0,
            long_window_s: f64::INFINITY,
            min_measure_steps_long: 0,
            max_total_s: 60.0,
            rel_precision: 0.02,
            first_epoch_only: false,
            whole_epochs: false,
        }
    }
}

/// One observation: a step with its sample count, or a rate the workload itself reported.
#[derive(Debug, Clone, Copy)]
enum Obs {
    Step { t_s: f64, samples: f64, epoch: u64 },
    Rate { t_s: f64, samples_per_s: f64 },
}

impl Obs {
    /// The epoch a step is in (0 for a reported rate).
    fn epoch(&self) -> u64 {
        match self {
            Obs::Step { epoch, .. } => *epoch,
            Obs::Rate { .. } => 0,
        }
    }

    /// The samples a step finished (none for a reported rate).
    fn samples(&self) -> f64 {
        match self {
            Obs::Step { samples, .. } => *samples,
            Obs::Rate { .. } => 0.0,
        }
    }
}

/// Accumulates progress and answers "how fast" and "may we stop".
#[derive(Debug, Clone)]
pub struct Estimator {
    cfg: EstimatorConfig,
    obs: Vec<Obs>,
    epoch_ended: bool,
    /// Whether any step said which epoch it belongs to.
    saw_epoch: bool,
}

/// Fewest batches the interval is computed from: fewer make Student's t too wide to be useful.
const MIN_BATCHES: usize = 10;
/// Most batches: more adds little and makes neighbouring batches correlated.
const MAX_BATCHES: usize = 30;
/// Fewest whole epochs whose own rates give the interval of a whole-epoch window (fewer leave Student's t
/// with one degree of freedom: the batches' interval stands in, as an upper bound).
const MIN_EPOCHS_FOR_INTERVAL: u64 = 3;
/// How many shortest windows long one epoch must be to stand alone as a whole-epoch window. On an H200 at
/// 8 cores, epochs of about 2 s ran at 1093 to 1247 samples/s in two trials (docs/profile-format.md, "How
/// the trials run"): one such epoch is a draw from that spread.
const LONE_EPOCH_MIN_WINDOWS: f64 = 1.5;

impl Estimator {
    /// An empty estimator.
    pub fn new(cfg: EstimatorConfig) -> Self {
        Estimator {
            cfg,
            obs: Vec::new(),
            epoch_ended: false,
            saw_epoch: false,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &EstimatorConfig {
        &self.cfg
    }

    /// Records a step of `samples` that finished `t_s` seconds after the trial started.
    pub fn push_step(&mut self, t_s: f64, samples: f64, epoch: Option<u64>) {
        self.saw_epoch |= epoch.is_some();
        let epoch = epoch.unwrap_or(0);
        if self.cfg.first_epoch_only {
            let first = match self.obs.first() {
                Some(Obs::Step { epoch, .. }) => *epoch,
                _ => epoch,
            };
            if epoch > first || self.epoch_ended {
                self.epoch_ended = true;
                return;
            }
        }
        self.obs.push(Obs::Step {
            t_s,
            samples,
            epoch,
        });
    }

    /// Records a rate the workload reported itself at `t_s` (e.g. tqdm's it/s).
    pub fn push_rate(&mut self, t_s: f64, samples_per_s: f64) {
        self.obs.push(Obs::Rate { t_s, samples_per_s });
    }

    /// Whether a step of a later epoch arrived while measuring the first epoch only.
    pub fn epoch_ended(&self) -> bool {
        self.epoch_ended
    }

    /// Steps (or rate reports) seen so far.
    pub fn observations(&self) -> usize {
        self.obs.len()
    }

    /// Samples seen so far (steps only).
    pub fn total_samples(&self) -> f64 {
        self.obs.iter().map(Obs::samples).sum()
    }

    fn t_of(o: &Obs) -> f64 {
        match o {
            Obs::Step { t_s, .. } | Obs::Rate { t_s, .. } => *t_s,
        }
    }

    /// Index of the observation that is the measurement's time origin (the window starts after it), and
    /// whether the window starts where an epoch starts (whole-epoch mode only).
    fn warmup_end(&self) -> Option<(usize, bool)> {
        let first_t = Self::t_of(self.obs.first()?);
        let first_epoch = self.obs.first()?.epoch();
        let idx = self.obs.iter().position(|o| {
            let past_time = Self::t_of(o) - first_t >= self.cfg.warmup_s;
            let past_epoch = match o {
                Obs::Step { epoch, t_s, .. } => {
                    *epoch >= first_epoch + self.cfg.warmup_epochs
                        || t_s - first_t >= self.cfg.warmup_epochs_max_s
                }
                Obs::Rate { .. } => true,
            };
            past_time && past_epoch
        })?;
        // The origin is observation idx; it needs warmup_steps before it.
        let idx = idx.max(self.cfg.warmup_steps as usize);
        if idx >= self.obs.len() {
            return None;
        }
        if self.whole_epoch_mode() {
            let past_warmup = |o: &Obs| o.epoch() >= first_epoch + self.cfg.warmup_epochs;
            let start = (idx.max(1)..self.obs.len()).find(|&i| {
                self.obs[i].epoch() > self.obs[i - 1].epoch() && past_warmup(&self.obs[i])
            });
            if past_warmup(&self.obs[idx]) {
                // The window opens where an epoch starts: at idx if it is the first step of its epoch,
                // else at the next epoch's first step. The origin is the step before it.
                return Some((start? - 1, true));
            }
            // Warm-up ended by `warmup_epochs_max_s` inside a warm-up epoch: the window opens where
            // the warm-up epochs end once it has steps enough after that, and until then is an
            // ordinary window. Cut where that epoch ends as if it were whole, a half-core trial had no
            // estimate at all when the epoch ended a few steps past the time cap.
            if let Some(start) = start.filter(|&i| self.obs.len() - i >= MIN_BATCHES) {
                return Some((start - 1, true));
            }
        }
        Some((idx + self.mser_truncation(idx), false))
    }

    /// Whether windows follow epochs: asked for, and the workload says which epoch each step is in.
    fn whole_epoch_mode(&self) -> bool {
        self.cfg.whole_epochs && self.saw_epoch
    }

    /// In whole-epoch mode, how many leading observations of `window` make up its complete epochs, and
    /// how many epochs that is; `None` while the window is still inside its first epoch.
    fn complete_epochs(&self, window: &[Obs]) -> Option<(usize, u64)> {
        let last = window.last()?.epoch();
        let cut = window.iter().position(|o| o.epoch() == last)?;
        (cut > 0).then(|| (cut, last - window[0].epoch()))
    }

    /// Extra observations to drop after the fixed warm-up, chosen by MSER-5: the truncation point that
    /// minimises the squared standard error of the mean of what remains, over batches of five steps.
    /// This removes a slow start (pipeline fill, cache warm-up) that outlasts the fixed warm-up, and
    /// drops almost nothing from a series that is already steady. At most half the data is dropped.
    fn mser_truncation(&self, origin: usize) -> usize {
        const BATCH: usize = 5;
        let window = &self.obs[origin..];
        let rates: Vec<f64> = window
            .windows(2)
            .collect::<Vec<_>>()
            .chunks(BATCH)
            .filter(|c| c.len() == BATCH)
            .map(|c| match (c[0][0], c[BATCH - 1][1]) {
                (Obs::Step { t_s: t0, .. }, Obs::Step { t_s: t1, .. }) => {
                    let samples: f64 = c
                        .iter()
                        .map(|w| match w[1] {
                            Obs::Step { samples, .. } => samples,
                            Obs::Rate { .. } => 0.0,
                        })
                        .sum();
                    samples / (t1 - t0).max(1e-9)
                }
                _ => {
                    c.iter()
                        .map(|w| match w[1] {
                            Obs::Rate { samples_per_s, .. } => samples_per_s,
                            Obs::Step { .. } => 0.0,
                        })
                        .sum::<f64>()
                        / BATCH as f64
                }
            })
            .collect();
        let k = rates.len();
        if k < 4 {
            return 0;
        }
        // Suffix sums make each candidate O(1).
        let mut suf = vec![(0.0f64, 0.0f64); k + 1];
        for i in (0..k).rev() {
            suf[i] = (suf[i + 1].0 + rates[i], suf[i + 1].1 + rates[i] * rates[i]);
        }
        let best = (0..=k / 2)
            .map(|d| {
                let n = (k - d) as f64;
                let (sum, sq) = suf[d];
                ((sq - sum * sum / n).max(0.0) / (n * n), d)
            })
            .fold((f64::INFINITY, 0), |a, b| if b.0 < a.0 { b } else { a });
        best.1 * BATCH
    }

    /// The current estimate, once enough steps were measured past warm-up.
    pub fn estimate(&self) -> Option<Estimate> {
        let (origin, at_epoch_start) = self.warmup_end()?;
        let first_t = Self::t_of(&self.obs[0]);
        let origin_t = Self::t_of(&self.obs[origin]);
        let mut window = &self.obs[origin + 1..];
        let mut whole_epochs = 0;
        if self.whole_epoch_mode() && at_epoch_start {
            // The epoch still running stays out once one has completed.
            if let Some((cut, epochs)) = self.complete_epochs(window) {
                window = &window[..cut];
                whole_epochs = epochs;
            }
        }
        if window.len() < MIN_BATCHES {
            return None;
        }
        let per_batch = window.len().div_ceil(MAX_BATCHES);
        let n_batches = window.len() / per_batch;
        if n_batches < MIN_BATCHES {
            return None;
        }
        // Only whole batches count, so the window ends at the last whole batch; a window of whole epochs
        // keeps its short last batch instead, so that it ends where the epoch does.
        let used = if whole_epochs > 0 {
            window
        } else {
            &window[..n_batches * per_batch]
        };
        let end_t = Self::t_of(&used[used.len() - 1]);
        let measured_s = end_t - origin_t;
        if measured_s <= 0.0 {
            return None;
        }
        let (mean, half) = match used[0] {
            // Whole epochs are the unit of a window of them (hits early, misses late within each), so
            // the interval comes from each epoch's samples and time; otherwise from batches of steps.
            Obs::Step { .. } if whole_epochs >= MIN_EPOCHS_FOR_INTERVAL => ratio_interval(
                &tiles(used.chunk_by(|a, b| a.epoch() == b.epoch()), origin_t),
                measured_s,
            ),
            Obs::Step { .. } => {
                ratio_interval(&tiles(used.chunks(per_batch), origin_t), measured_s)
            }
            Obs::Rate { .. } => {
                let rates: Vec<f64> = used
                    .chunks(per_batch)
                    .map(|c| {
                        c.iter()
                            .map(|o| match o {
                                Obs::Rate { samples_per_s, .. } => *samples_per_s,
                                Obs::Step { .. } => 0.0,
                            })
                            .sum::<f64>()
                            / c.len() as f64
                    })
                    .collect();
                let n = rates.len() as f64;
                let mean = rates.iter().sum::<f64>() / n;
                let var = rates.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / (n - 1.0);
                (mean, student_t95(rates.len() - 1) * (var / n).sqrt())
            }
        };
        Some(Estimate {
            samples_per_s: mean,
            ci95_half_width: half,
            measured_steps: used.len() as u64,
            measured_s,
            warmup_s: origin_t - first_t,
            window_start_s: origin_t,
            whole_epochs,
        })
    }

    /// Whether the estimate is precise enough, and measured for long enough, to stop. In whole-epoch
    /// mode throughput varies within each epoch by design (hits early, misses late), so batches of steps
    /// spread widely while an epoch's mean has no partial-epoch bias left: one whole epoch at least
    /// [`LONE_EPOCH_MIN_WINDOWS`] shortest windows long is enough, and its batches' interval is reported
    /// as an upper bound. Shorter epochs (a fast accelerator on a small dataset: 1.3 to 2.4 s on an H200,
    /// where one or two of them left intervals of ±29% and ±31%) are measured until the epochs' own
    /// rates agree to the precision.
    pub fn converged(&self) -> Option<Estimate> {
        self.estimate().filter(|e| {
            e.measured_s >= self.cfg.min_measure_s
                && (e.measured_steps >= self.cfg.min_measure_steps
                    || (e.measured_s >= self.cfg.long_window_s
                        && e.measured_steps >= self.cfg.min_measure_steps_long))
                && if self.whole_epoch_mode() {
                    e.whole_epochs > 0
                        && (e.measured_s / e.whole_epochs as f64
                            >= LONE_EPOCH_MIN_WINDOWS * self.cfg.min_measure_s
                            || (e.whole_epochs >= MIN_EPOCHS_FOR_INTERVAL
                                && e.rel_half_width() <= self.cfg.rel_precision))
                } else {
                    e.rel_half_width() <= self.cfg.rel_precision
                }
        })
    }
}

/// Each of `chunks`, consecutive observations from `origin_t` on, as (samples, seconds since the chunk
/// before ended).
fn tiles<'a>(chunks: impl Iterator<Item = &'a [Obs]>, origin_t: f64) -> Vec<(f64, f64)> {
    let mut prev_t = origin_t;
    chunks
        .map(|chunk| {
            let t = Estimator::t_of(&chunk[chunk.len() - 1]);
            let tile = (chunk.iter().map(Obs::samples).sum(), t - prev_t);
            prev_t = t;
            tile
        })
        .collect()
}

/// Total samples over `measured_s`, with the 95% half-width of the ratio estimator (delta-method standard
/// error, Student's t) over `batches` of (samples, seconds) that tile the window.
fn ratio_interval(batches: &[(f64, f64)], measured_s: f64) -> (f64, f64) {
    let total: f64 = batches.iter().map(|b| b.0).sum();
    let rate = total / measured_s;
    let n = batches.len() as f64;
    let mean_dt = measured_s / n;
    let var_resid: f64 = batches
        .iter()
        .map(|(s, dt)| (s - rate * dt).powi(2))
        .sum::<f64>()
        / (n - 1.0);
    let se = (var_resid / n).sqrt() / mean_dt;
    (rate, student_t95(batches.len() - 1) * se)
}

/// Two-sided 95% quantile of Student's t with `df` degrees of freedom.
pub fn student_t95(df: usize) -> f64 {
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => TABLE[df - 1],
        // Beyond 30 the quantile approaches 1.96 like 1.96 + 2.4/df.
        _ => 1.96 + 2.4 / df as f64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> EstimatorConfig {
        EstimatorConfig {
            warmup_s: 1.0,
            warmup_steps: 2,
            warmup_epochs: 0,
            warmup_epochs_max_s: f64::INFINITY,
            min_measure_s: 2.0,
            min_measure_steps: 0,
            long_window_s: f64::INFINITY,
            min_measure_steps_long: 0,
            max_total_s: 60.0,
            rel_precision: 0.02,
            first_epoch_only: false,
            whole_epochs: false,
        }
    }

    #[test]
    fn first_epoch_only_ignores_and_flags_later_epochs() {
        let mut c = cfg();
        c.first_epoch_only = true;
        let mut e = Estimator::new(c);
        let mut t = 0.0;
        for _ in 0..50 {
            t += 0.1;
            e.push_step(t, 32.0, Some(0));
        }
        assert!(!e.epoch_ended());
        t += 0.01;
        e.push_step(t, 3200.0, Some(1));
        assert!(e.epoch_ended());
        assert!((e.estimate().unwrap().samples_per_s - 320.0).abs() < 1.0);
    }

    #[test]
    fn steady_steps_give_the_true_rate_and_converge() {
        let mut e = Estimator::new(cfg());
        // 32 samples every 0.1 s = 320 samples/s, with +-10% jitter in step times.
        let mut t = 0.0;
        for i in 0..100 {
            t += 0.1 * if i % 2 == 0 { 0.9 } else { 1.1 };
            e.push_step(t, 32.0, None);
        }
        let est = e.converged().expect("converged");
        assert!((est.samples_per_s - 320.0).abs() < 5.0, "{est:?}");
        assert!(est.warmup_s >= 1.0);
        assert!(est.ci95_half_width > 0.0);
    }

    #[test]
    fn a_trial_waits_for_its_fewest_steps() {
        // Steady steps of 0.1 s: precise after the 2 s window's 20 steps, but asked for 40.
        let first_converged = |min_steps| {
            let mut c = cfg();
            c.min_measure_steps = min_steps;
            let mut e = Estimator::new(c);
            (1..200)
                .find_map(|i| {
                    e.push_step(0.1 * i as f64, 32.0, None);
                    e.converged()
                })
                .expect("converges")
        };
        let unasked = first_converged(0);
        assert!(unasked.measured_steps < 40, "{unasked:?}");
        let asked = first_converged(40);
        assert_eq!(asked.measured_steps, 40, "{asked:?}");
        assert!((asked.samples_per_s - 320.0).abs() < 1.0, "{asked:?}");
    }

    #[test]
    fn a_long_window_of_slow_steps_needs_fewer_of_them() {
        // Steady steps of 2 s (a real script at half a core), 40 asked for, 20 enough in 20 s.
        let first_converged = |long_window_s| {
            let mut c = cfg();
            c.max_total_s = 1000.0;
            c.min_measure_steps = 40;
            c.long_window_s = long_window_s;
            c.min_measure_steps_long = 20;
            let mut e = Estimator::new(c);
            (1..200)
                .find_map(|i| {
                    e.push_step(2.0 * i as f64, 8.0, None);
                    e.converged()
                })
                .expect("converges")
        };
        assert_eq!(first_converged(f64::INFINITY).measured_steps, 40);
        let long = first_converged(20.0);
        assert_eq!(long.measured_steps, 20, "{long:?}");
        assert!(long.measured_s >= 20.0, "{long:?}");
        assert!((long.samples_per_s - 4.0).abs() < 0.01, "{long:?}");
    }

    #[test]
    fn a_warm_up_epoch_that_ends_just_past_its_time_cap_still_leaves_an_estimate() {
        // Whole epochs after one warm-up epoch, waited for at most 5 s; the warm-up epoch ends 13 steps
        // after that (0.1 s steps of 32 samples, 320 samples/s throughout).
        let mut c = cfg();
        c.whole_epochs = true;
        c.warmup_epochs = 1;
        c.warmup_epochs_max_s = 5.0;
        let mut e = Estimator::new(c);
        let epoch_of = |i: u32| u64::from(i > 63);
        for i in 1..=68 {
            e.push_step(0.1 * f64::from(i), 32.0, Some(epoch_of(i)));
        }
        // Five steps into the next epoch: an ordinary window from the time cap.
        let early = e.estimate().expect("an estimate across the epoch's end");
        assert!(early.window_start_s < 6.3, "{early:?}");
        for i in 69..=100 {
            e.push_step(0.1 * f64::from(i), 32.0, Some(epoch_of(i)));
        }
        // Steps enough past it: the window opens where the warm-up epoch ended.
        let late = e
            .estimate()
            .expect("an estimate in the epoch after warm-up");
        assert!((late.window_start_s - 6.3).abs() < 1e-9, "{late:?}");
        // The epoch's 37 steps so far, in whole batches of two.
        assert_eq!(late.measured_steps, 36, "{late:?}");
        assert!((late.samples_per_s - 320.0).abs() < 1.0, "{late:?}");
        assert_eq!(late.whole_epochs, 0);
        assert!(e.converged().is_none(), "no whole epoch measured yet");
    }

    #[test]
    fn slow_warmup_is_excluded() {
        let mut e = Estimator::new(cfg());
        let mut t = 0.0;
        for _ in 0..5 {
            t += 0.5; // 64 samples/s during warm-up
            e.push_step(t, 32.0, None);
        }
        for _ in 0..100 {
            t += 0.1;
            e.push_step(t, 32.0, None);
        }
        let est = e.estimate().unwrap();
        assert!((est.samples_per_s - 320.0).abs() < 1.0, "{est:?}");
    }

    #[test]
    fn noisy_steps_do_not_converge_early() {
        let mut e = Estimator::new(cfg());
        let mut t = 0.0;
        for i in 0..40 {
            t += if i % 3 == 0 { 0.5 } else { 0.05 };
            e.push_step(t, 32.0, None);
        }
        let est = e.estimate().unwrap();
        assert!(est.rel_half_width() > 0.02, "{est:?}");
        assert!(e.converged().is_none());
    }

    #[test]
    fn warmup_epochs_wait_for_the_epoch_to_change() {
        let mut c = cfg();
        c.warmup_epochs = 1;
        let mut e = Estimator::new(c);
        let mut t = 0.0;
        for _ in 0..50 {
            t += 0.2;
            e.push_step(t, 32.0, Some(0));
        }
        assert!(e.estimate().is_none());
        for _ in 0..50 {
            t += 0.1;
            e.push_step(t, 32.0, Some(1));
        }
        let est = e.estimate().unwrap();
        assert!((est.samples_per_s - 320.0).abs() < 1.0, "{est:?}");
    }

    #[test]
    fn a_long_first_epoch_stops_being_waited_for() {
        let mut c = cfg();
        c.warmup_epochs = 1;
        c.warmup_epochs_max_s = 5.0;
        let mut e = Estimator::new(c);
        for i in 1..=100 {
            e.push_step(i as f64 * 0.1, 32.0, Some(0));
        }
        let est = e.estimate().expect("measured after 5 s of epoch 0");
        assert!(est.warmup_s >= 5.0 - 1e-9, "{est:?}");
    }

    #[test]
    fn reported_rates_are_averaged() {
        let mut e = Estimator::new(cfg());
        for i in 0..60 {
            e.push_rate(i as f64 * 0.1, if i % 2 == 0 { 99.0 } else { 101.0 });
        }
        let est = e.estimate().unwrap();
        assert!((est.samples_per_s - 100.0).abs() < 0.5);
        assert!(est.rel_half_width() < 0.02);
    }

    #[test]
    fn whole_epochs_start_and_end_at_epoch_boundaries() {
        let mut c = cfg();
        c.warmup_epochs = 1;
        c.whole_epochs = true;
        let mut e = Estimator::new(c);
        // Epochs of 40 steps that start fast and end slow (hits first, misses later): 0.05 s then 0.15 s
        // per step of 32 samples, 320 samples/s over a whole epoch.
        let mut t = 0.0;
        let mut epoch_of = |e: &mut Estimator, n: u64| {
            for k in 0..40 {
                t += if k < 20 { 0.05 } else { 0.15 };
                e.push_step(t, 32.0, Some(n));
            }
        };
        epoch_of(&mut e, 0);
        epoch_of(&mut e, 1);
        // Inside epoch 1 nothing is complete yet: an estimate exists but may not stop the trial.
        assert!(e.converged().is_none());
        // Epoch 2 is complete only once a step of epoch 3 says so.
        epoch_of(&mut e, 2);
        let est = e.estimate().unwrap();
        assert_eq!(est.whole_epochs, 1, "{est:?}");
        assert!((est.samples_per_s - 320.0).abs() < 1e-6, "{est:?}");
        assert!((est.measured_s - 4.0).abs() < 1e-9, "{est:?}");
        // Part of epoch 3 does not move the estimate.
        for _ in 0..10 {
            t += 0.05;
            e.push_step(t, 32.0, Some(3));
        }
        let est = e.converged().expect("two whole epochs");
        assert_eq!(est.whole_epochs, 2);
        assert!((est.samples_per_s - 320.0).abs() < 1e-6);
    }

    #[test]
    fn short_whole_epochs_measure_until_the_epochs_agree() {
        let mut c = cfg();
        c.warmup_epochs = 1;
        c.whole_epochs = true;
        c.rel_precision = 0.04;
        // Epochs of 1.2 s (12 steps, fast then slow), shorter than the 2 s shortest window.
        let steady = |e: &mut Estimator, t: &mut f64, n: u64, stretch: f64| {
            for k in 0..12 {
                *t += stretch * if k < 6 { 0.05 } else { 0.15 };
                e.push_step(*t, 32.0, Some(n));
            }
        };
        let mut e = Estimator::new(c.clone());
        let mut t = 0.0;
        for n in 0..4 {
            steady(&mut e, &mut t, n, 1.0);
        }
        // Epochs 1 and 2 are whole (epoch 3 is known to be only once epoch 4 starts): they pass the
        // shortest window, but two are too few to say how far epochs agree.
        assert_eq!(e.estimate().unwrap().whole_epochs, 2);
        assert!(e.converged().is_none());
        steady(&mut e, &mut t, 4, 1.0);
        let est = e.converged().expect("three epochs that agree");
        assert_eq!(est.whole_epochs, 3);
        assert!((est.samples_per_s - 320.0).abs() < 1e-6, "{est:?}");
        // The interval is the epochs' own: they agree exactly, where the batches spread 3x.
        assert!(est.ci95_half_width < 1e-6, "{est:?}");

        // Epochs that disagree by a third keep the trial going.
        let mut e = Estimator::new(c.clone());
        let mut t = 0.0;
        for n in 0..6 {
            steady(&mut e, &mut t, n, if n % 2 == 0 { 0.8 } else { 1.2 });
        }
        let est = e.estimate().unwrap();
        assert_eq!(est.whole_epochs, 3, "{est:?}");
        assert!(est.rel_half_width() > 0.04, "{est:?}");
        assert!(e.converged().is_none());

        // One epoch of 2.4 s passes the 2 s window but is too short to stand alone; three that agree do.
        let mut e = Estimator::new(c.clone());
        let mut t = 0.0;
        for n in 0..3 {
            steady(&mut e, &mut t, n, 2.0);
        }
        assert_eq!(e.estimate().unwrap().whole_epochs, 1);
        assert!(e.converged().is_none());
        for n in 3..5 {
            steady(&mut e, &mut t, n, 2.0);
        }
        assert_eq!(e.converged().expect("three epochs").whole_epochs, 3);
        // An epoch of 3.6 s stands alone.
        let mut e = Estimator::new(c);
        let mut t = 0.0;
        for n in 0..3 {
            steady(&mut e, &mut t, n, 3.0);
        }
        assert_eq!(e.converged().expect("one long epoch").whole_epochs, 1);
    }

    #[test]
    fn whole_epochs_without_epoch_numbers_measure_as_usual() {
        let mut c = cfg();
        c.whole_epochs = true;
        let mut e = Estimator::new(c);
        let mut t = 0.0;
        for _ in 0..100 {
            t += 0.1;
            e.push_step(t, 32.0, None);
        }
        assert!(e.converged().is_some());
    }
}
