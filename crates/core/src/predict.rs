//! Predictions from a profile: the fitted model's T(c, m) with its hit-ratio tables
//! (docs/architecture.md §4), or, for a profile without a model, bilinear interpolation in its matrix.

use crate::format::profile::{FittedModel, HitRatioRow, Profile};
use crate::format::profile::{HitModel, Stage};
use crate::stall::{at_accelerator, EpochHits};
use serde::{Deserialize, Serialize};

impl FittedModel {
    /// The hit ratio of `model` at `cache_bytes`, interpolated in the table.
    pub fn hit_ratio(&self, model: HitModel, cache_bytes: f64) -> f64 {
        self.column(cache_bytes, |r| match model {
            HitModel::Minio => r.minio,
            HitModel::PageCache => r.page_cache,
        })
    }

    /// The hit ratios of `model` at `cache_bytes` over the epoch and by part of it, interpolated in the
    /// table: by part where both rows around it have them (a page cache, 1.9), else the mean throughout.
    pub fn epoch_hits(&self, model: HitModel, cache_bytes: f64) -> EpochHits {
        let mean = self.hit_ratio(model, cache_bytes);
        let parts = crate::format::profile::EPOCH_PARTS;
        let has_parts = model == HitModel::PageCache
            && !self.hit_ratios.is_empty()
            && self
                .hit_ratios
                .iter()
                .all(|r| r.page_cache_by_part.len() == parts);
        if !has_parts {
            return EpochHits::flat(mean);
        }
        let by_part = (0..parts)
            .map(|k| self.column(cache_bytes, |r| r.page_cache_by_part[k]))
            .collect();
        EpochHits { mean, by_part }
    }

    /// Uncalibrated LRU's hit ratio at `cache_bytes`.
    pub fn lru_hit_ratio(&self, cache_bytes: f64) -> f64 {
        self.column(cache_bytes, |r| r.lru.unwrap_or(r.page_cache))
    }

    fn column(&self, cache_bytes: f64, pick: impl Fn(&HitRatioRow) -> f64) -> f64 {
        let rows = &self.hit_ratios;
        let Some(first) = rows.first() else {
            return 0.0;
        };
        if cache_bytes <= first.cache_bytes as f64 {
            return pick(first);
        }
        for w in rows.windows(2) {
            let (a, b) = (&w[0], &w[1]);
            if cache_bytes <= b.cache_bytes as f64 {
                let f =
                    (cache_bytes - a.cache_bytes as f64) / (b.cache_bytes - a.cache_bytes) as f64;
                return pick(a) + f * (pick(b) - pick(a));
            }
        }
        pick(&rows[rows.len() - 1])
    }

    /// This model with its CPU stage `k` times as fast: the host's cores ran fast enough for that against
    /// the speed the model's CPU stage is at (the speed probe's ratio, raised to
    /// [`crate::measure::hostspeed::PIPELINE_SPEED_EXPONENT`]). Cached rates below the accelerator's
    /// scale by k (up to G), CPU-seconds per sample and per miss by 1/k; points at G stay, since the
    /// accelerator set them, as do storage and a miss's wait.
    pub fn at_core_speed(&self, k: f64) -> FittedModel {
        let mut m = self.clone();
        let g = m.stall.accelerator_samples_per_s;
        let k = if k.is_finite() && k > 0.0 { k } else { 1.0 };
        m.stall.cpu = crate::format::profile::CpuCurve::new(
            self.stall
                .cpu
                .points()
                .iter()
                .map(|p| crate::format::profile::CpuPoint {
                    cpus: p.cpus,
                    samples_per_s: if at_accelerator(p.samples_per_s, g) {
                        p.samples_per_s
                    } else {
                        (p.samples_per_s * k).min(g)
                    },
                })
                .collect(),
        );
        if let Some(mc) = m.stall.miss_cost.as_mut() {
            for p in &mut mc.cpu_s_per_sample {
                p.cpu_s_per_sample /= k;
            }
            mc.cpu_s_per_miss /= k;
        }
        m
    }

    /// T(c, m) with the profile's own hit model, or `model` when given.
    pub fn predict(
        &self,
        cpus: f64,
        memory_bytes: f64,
        model: Option<HitModel>,
    ) -> crate::stall::Prediction {
        let m = model.unwrap_or(self.stall.hit_model);
        self.stall
            .predict_with(cpus, memory_bytes, &mut |c| self.epoch_hits(m, c))
    }

    /// T(c, m) as the published DS-Analyzer model has it, for comparison: the workload's cache model
    /// with an uncalibrated LRU page cache, and misses that cost storage bandwidth only.
    pub fn predict_ds_analyzer(&self, cpus: f64, memory_bytes: f64) -> crate::stall::Prediction {
        let page_cache = self.stall.hit_model == HitModel::PageCache;
        self.stall
            .predict_without_miss_cost(cpus, memory_bytes, &mut |c| {
                if page_cache {
                    self.lru_hit_ratio(c)
                } else {
                    self.hit_ratio(HitModel::Minio, c)
                }
            })
    }
}

/// A prediction from a profile at one allocation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ProfilePrediction {
    /// Samples per second (when the profile has absolute numbers).
    pub samples_per_s: Option<f64>,
    /// Relative to GPU-proportional.
    pub normalized: f64,
    /// The limiting stage (when the profile has a model).
    pub limited_by: Option<Stage>,
    /// Cache hit ratio (when the profile has a model).
    pub hit_ratio: Option<f64>,
}

/// Predicts throughput at `cpus` cores and `memory_gib` GiB: from the fitted model where the profile has
/// one, else by bilinear interpolation in the normalized matrix (clamped to its edges).
pub fn predict(p: &Profile, cpus: f64, memory_gib: f64) -> ProfilePrediction {
    let t_prop = p.matrix.proportional.samples_per_s;
    if let Some(model) = &p.model {
        let r = model.predict(cpus, memory_gib * crate::units::GIB, None);
        return ProfilePrediction {
            samples_per_s: Some(r.samples_per_s),
            normalized: t_prop
                .filter(|t| *t > 0.0)
                .map_or(0.0, |t| r.samples_per_s / t),
            limited_by: Some(r.limited_by),
            hit_ratio: Some(r.hit_ratio),
        };
    }
    let normalized = interpolate(
        &p.matrix.cpus,
        &p.matrix.memory_gib,
        &p.matrix.normalized,
        cpus,
        memory_gib,
    );
    ProfilePrediction {
        samples_per_s: t_prop.map(|t| t * normalized),
        normalized,
        limited_by: None,
        hit_ratio: None,
    }
}

/// Bilinear interpolation of `values[row][col]` on axes `xs` (rows) and `ys` (columns), clamped.
pub fn interpolate(xs: &[f64], ys: &[f64], values: &[Vec<f64>], x: f64, y: f64) -> f64 {
    let locate = |axis: &[f64], v: f64| -> (usize, usize, f64) {
        if axis.len() == 1 || v <= axis[0] {
            return (0, 0, 0.0);
        }
        if v >= axis[axis.len() - 1] {
            let l = axis.len() - 1;
            return (l, l, 0.0);
        }
        let i = axis
            .windows(2)
            .position(|w| v <= w[1])
            .unwrap_or(axis.len() - 2);
        (i, i + 1, (v - axis[i]) / (axis[i + 1] - axis[i]))
    };
    let (r0, r1, fr) = locate(xs, x);
    let (c0, c1, fc) = locate(ys, y);
    let lerp = |a: f64, b: f64, f: f64| a + f * (b - a);
    lerp(
        lerp(values[r0][c0], values[r0][c1], fc),
        lerp(values[r1][c0], values[r1][c1], fc),
        fr,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bilinear_interpolation_is_exact_on_the_grid_and_clamped_outside() {
        let v = vec![vec![1.0, 2.0], vec![3.0, 4.0]];
        assert_eq!(interpolate(&[1.0, 2.0], &[10.0, 20.0], &v, 1.0, 20.0), 2.0);
        assert_eq!(interpolate(&[1.0, 2.0], &[10.0, 20.0], &v, 1.5, 15.0), 2.5);
        assert_eq!(interpolate(&[1.0, 2.0], &[10.0, 20.0], &v, 9.0, 99.0), 4.0);
        assert_eq!(interpolate(&[1.0, 2.0], &[10.0, 20.0], &v, 0.0, 0.0), 1.0);
    }

    #[test]
    fn a_faster_core_speeds_the_cpu_stage_and_nothing_else() {
        let p = Profile::read(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../profiles/audio.json"
        )))
        .unwrap();
        let m = p.model.as_ref().unwrap();
        let g = m.stall.accelerator_samples_per_s;
        let fast = m.at_core_speed(1.1);
        let gib = crate::units::GIB;
        // CPU-bound with everything cached (half a core, memory to spare): 10% faster.
        let (before, after) = (
            m.predict(0.5, 4.0 * gib, None),
            fast.predict(0.5, 4.0 * gib, None),
        );
        assert_eq!(before.limited_by, Stage::Preprocess);
        assert!((after.samples_per_s / before.samples_per_s - 1.1).abs() < 1e-6);
        // At G, and where storage sets the rate (no cache), unchanged.
        assert_eq!(fast.predict(2.0, 4.0 * gib, None).samples_per_s, g);
        let tight = m.stall.footprint_at(2.0);
        let f = m.predict(2.0, tight, None);
        assert_eq!(f.limited_by, Stage::Fetch);
        assert_eq!(
            fast.predict(2.0, tight, None).samples_per_s,
            f.samples_per_s
        );
        // The misses' CPU shrinks with the rest, and a slower core undoes a faster one.
        let mc = |x: &FittedModel| x.stall.miss_cost.as_ref().unwrap().cpu_s_per_miss;
        assert!((mc(&fast) * 1.1 - mc(m)).abs() < 1e-12);
        let back = fast.at_core_speed(1.0 / 1.1);
        assert!(
            (back.predict(0.5, 4.0 * gib, None).samples_per_s / before.samples_per_s - 1.0).abs()
                < 1e-9
        );
        // Nonsense ratios change nothing.
        assert_eq!(m.at_core_speed(f64::NAN), *m);
    }
}
