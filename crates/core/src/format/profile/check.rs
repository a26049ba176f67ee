//! The checks of a profile file as it is read: everything a reader indexes or divides by is checked once,
//! naming the field at fault (docs/architecture.md §3.4, §7).

use super::{FittedModel, Profile, RatedAllocation, EPOCH_PARTS};

impl Profile {
    /// Checks everything a reader indexes or divides by, once, so that every command can trust a profile
    /// it has read: each table's shape against its axes, every number in its range, a matrix under which
    /// the job can run at all (docs/architecture.md §3.4).
    pub(super) fn validate(&self, origin: &str) -> Result<(), crate::error::InputError> {
        use crate::error::InputError;
        let bad = |field: String, what: &str| InputError::field(origin, field, what.to_string());
        let axis = |name: &str, v: &[f64]| {
            let ok = !v.is_empty()
                && v.iter().all(|x| x.is_finite() && *x > 0.0)
                && v.windows(2).all(|w| w[0] < w[1]);
            if ok {
                Ok(())
            } else {
                Err(bad(
                    name.to_string(),
                    "must be positive and strictly increasing",
                ))
            }
        };
        // A table `[row][column]` over the axes `rows` x `cols`.
        fn table<T>(
            origin: &str,
            name: &str,
            t: &[Vec<T>],
            rows: (&str, usize),
            cols: (&str, usize),
            ok: impl Fn(&T) -> bool,
            what: &str,
        ) -> Result<(), InputError> {
            if t.len() != rows.1 {
                return Err(InputError::field(
                    origin,
                    name,
                    format!("has {} rows but {} has {}", t.len(), rows.0, rows.1),
                ));
            }
            for (i, r) in t.iter().enumerate() {
                if r.len() != cols.1 {
                    return Err(InputError::field(
                        origin,
                        format!("{name}[{i}]"),
                        format!("has {} values but {} has {}", r.len(), cols.0, cols.1),
                    ));
                }
                if let Some(j) = r.iter().position(|v| !ok(v)) {
                    return Err(InputError::field(origin, format!("{name}[{i}][{j}]"), what));
                }
            }
            Ok(())
        }
        let non_negative = |v: &f64| v.is_finite() && *v >= 0.0;
        let positive = |v: f64| v.is_finite() && v > 0.0;
        let m = &self.matrix;
        axis("matrix.cpus", &m.cpus)?;
        axis("matrix.memory_gib", &m.memory_gib)?;
        let rows = ("matrix.cpus", m.cpus.len());
        let cols = ("matrix.memory_gib", m.memory_gib.len());
        let number = "must be a non-negative number";
        table(
            origin,
            "matrix.normalized",
            &m.normalized,
            rows,
            cols,
            non_negative,
            number,
        )?;
        if let Some(t) = &m.samples_per_s {
            table(
                origin,
                "matrix.samples_per_s",
                t,
                rows,
                cols,
                non_negative,
                number,
            )?;
        }
        if let Some(t) = &m.limited_by {
            table(origin, "matrix.limited_by", t, rows, cols, |_| true, "")?;
        }
        if !m.normalized.iter().flatten().any(|v| *v > 0.0) {
            return Err(bad(
                "matrix.normalized".into(),
                "is zero everywhere: a job with this profile could never make progress",
            ));
        }
        let p = &self.per_gpu;
        axis("per_gpu.cpus", &p.cpus)?;
        axis("per_gpu.memory_gib", &p.memory_gib)?;
        if p.cpus.len() != m.cpus.len() || p.memory_gib.len() != m.memory_gib.len() {
            return Err(bad("per_gpu".into(), "axes must match matrix's"));
        }
        let per_gpu_rows = ("per_gpu.cpus", p.cpus.len());
        let per_gpu_cols = ("per_gpu.memory_gib", p.memory_gib.len());
        table(
            origin,
            "per_gpu.normalized",
            &p.normalized,
            per_gpu_rows,
            per_gpu_cols,
            non_negative,
            number,
        )?;
        let rated = |name: &str, a: &RatedAllocation, normalized_positive: bool| {
            if !positive(a.cpus) {
                return Err(bad(
                    format!("{name}.cpus"),
                    "must be a positive number of cores",
                ));
            }
            if !positive(a.memory_gib) {
                return Err(bad(
                    format!("{name}.memory_gib"),
                    "must be a positive number of GiB",
                ));
            }
            let norm_ok = if normalized_positive {
                positive(a.normalized)
            } else {
                non_negative(&a.normalized)
            };
            if !norm_ok {
                return Err(bad(
                    format!("{name}.normalized"),
                    "must be a positive number",
                ));
            }
            if a.samples_per_s.is_some_and(|r| !non_negative(&r)) {
                return Err(bad(format!("{name}.samples_per_s"), number));
            }
            Ok(())
        };
        rated("matrix.proportional", &m.proportional, true)?;
        // The normalization's 1.0 divides every prediction: a rate near zero would make them infinite.
        if m.proportional
            .samples_per_s
            .is_some_and(|r| !THROUGHPUT.contains(&r))
        {
            return Err(bad(
                "matrix.proportional.samples_per_s".into(),
                THROUGHPUT_RANGE,
            ));
        }
        rated("demand.job", &self.demand.job, false)?;
        rated("demand.per_gpu", &self.demand.per_gpu, false)?;
        if !(self.demand.tolerance >= 0.0 && self.demand.tolerance < 1.0) {
            return Err(bad("demand.tolerance".into(), "must be in [0, 1)"));
        }
        let sv = &self.server;
        if sv.gpus == 0 {
            return Err(bad("server.gpus".into(), "must be at least 1"));
        }
        if !positive(sv.cpus) {
            return Err(bad(
                "server.cpus".into(),
                "must be a positive number of cores",
            ));
        }
        if !positive(sv.memory_gib) {
            return Err(bad(
                "server.memory_gib".into(),
                "must be a positive number of GiB",
            ));
        }
        let w = &self.workload;
        if w.gpus == 0 {
            return Err(bad("workload.gpus".into(), "must be at least 1"));
        }
        if w.batch_size == 0 {
            return Err(bad("workload.batch_size".into(), "must be at least 1"));
        }
        if w.iter_time_s.is_some_and(|t| !positive(t)) {
            return Err(bad(
                "workload.iter_time_s".into(),
                "must be a positive number of seconds",
            ));
        }
        for (i, v) in self.validation.iter().enumerate() {
            let numbers = [
                ("cpus", v.cpus),
                ("memory_gib", v.memory_gib),
                ("measured", v.measured),
            ];
            if let Some((f, _)) = numbers.iter().find(|(_, x)| !positive(*x)) {
                return Err(bad(
                    format!("validation[{i}].{f}"),
                    "must be a positive number",
                ));
            }
            if v.core_speed.is_some_and(|k| !positive(k)) {
                return Err(bad(
                    format!("validation[{i}].core_speed"),
                    "must be a positive ratio",
                ));
            }
            let predictions = [
                ("measured_ci95", v.measured_ci95),
                ("predicted_minio", v.predicted_minio),
                ("predicted_page_cache", v.predicted_page_cache),
                (
                    "predicted_ds_analyzer",
                    v.predicted_ds_analyzer.unwrap_or(0.0),
                ),
                (
                    "predicted_at_core_speed",
                    v.predicted_at_core_speed.unwrap_or(0.0),
                ),
            ];
            if let Some((f, _)) = predictions.iter().find(|(_, x)| !non_negative(x)) {
                return Err(bad(format!("validation[{i}].{f}"), number));
            }
        }
        // The bench adds these up as the profile's cost.
        if let Some(i) = self
            .trials
            .iter()
            .position(|t| !non_negative(&t.earlier_runs_s))
        {
            return Err(bad(
                format!("trials[{i}].earlier_runs_s"),
                "must be a non-negative number of seconds",
            ));
        }
        if let Some(model) = &self.model {
            model.validate(origin)?;
        }
        Ok(())
    }
}

/// The throughputs a profile divides by or is bounded by (the proportional rate, G), samples per
/// second: from one sample in eleven days to a trillion a second, so that their ratios stay finite.
const THROUGHPUT: std::ops::RangeInclusive<f64> = 1e-6..=1e12;
const THROUGHPUT_RANGE: &str = "must be a throughput from 1e-6 to 1e12 samples per second";

impl FittedModel {
    /// Checks what predictions read: rates positive, costs non-negative, hit ratios in [0, 1], curves
    /// over increasing core counts and cache sizes. A model that passes predicts a finite, non-negative
    /// throughput everywhere (docs/architecture.md §4).
    fn validate(&self, origin: &str) -> Result<(), crate::error::InputError> {
        use crate::error::InputError;
        let bad = |field: String, what: &str| InputError::field(origin, field, what.to_string());
        let positive = |v: f64| v.is_finite() && v > 0.0;
        let non_negative = |v: f64| v.is_finite() && v >= 0.0;
        let ratio = |v: f64| (0.0..=1.0).contains(&v);
        let m = &self.stall;
        // G bounds every prediction, which a profile divides by its proportional rate.
        if !THROUGHPUT.contains(&m.accelerator_samples_per_s) {
            return Err(bad(
                "model.accelerator_samples_per_s".into(),
                THROUGHPUT_RANGE,
            ));
        }
        let increasing = "must be positive and increasing from one point to the next";
        let cpu = m.cpu.points();
        for (i, p) in cpu.iter().enumerate() {
            if !positive(p.cpus) || i > 0 && p.cpus <= cpu[i - 1].cpus {
                return Err(bad(format!("model.cpu.points[{i}].cpus"), increasing));
            }
            if !non_negative(p.samples_per_s) {
                return Err(bad(
                    format!("model.cpu.points[{i}].samples_per_s"),
                    "must be a non-negative number",
                ));
            }
        }
        let f = &m.fetch;
        if !non_negative(f.mean_sample_bytes) {
            return Err(bad(
                "model.fetch.mean_sample_bytes".into(),
                "must be a non-negative number of bytes",
            ));
        }
        if !positive(f.memory_bytes_per_s) || f.storage_bytes_per_s.is_some_and(|b| !positive(b)) {
            let which = if positive(f.memory_bytes_per_s) {
                "storage_bytes_per_s"
            } else {
                "memory_bytes_per_s"
            };
            return Err(bad(
                format!("model.fetch.{which}"),
                "must be a positive number of bytes per second",
            ));
        }
        for (name, points) in [
            ("footprint_points", &m.footprint_points),
            ("resident_points", &m.resident_points),
        ] {
            for (i, p) in points.iter().enumerate() {
                if !positive(p.cpus) {
                    return Err(bad(
                        format!("model.{name}[{i}].cpus"),
                        "must be a positive number of cores",
                    ));
                }
            }
        }
        if let Some(mc) = &m.miss_cost {
            let pts = &mc.cpu_s_per_sample;
            for (i, p) in pts.iter().enumerate() {
                if !positive(p.cpus) || i > 0 && p.cpus <= pts[i - 1].cpus {
                    return Err(bad(
                        format!("model.miss_cost.cpu_s_per_sample[{i}].cpus"),
                        increasing,
                    ));
                }
                if !non_negative(p.cpu_s_per_sample) {
                    return Err(bad(
                        format!("model.miss_cost.cpu_s_per_sample[{i}].cpu_s_per_sample"),
                        "must be a non-negative number of seconds",
                    ));
                }
            }
            let costs = [
                ("cpu_s_per_miss", mc.cpu_s_per_miss),
                ("wait_s_per_miss", mc.wait_s_per_miss),
                ("limited_overhead", mc.limited_overhead),
            ];
            if let Some((name, _)) = costs.iter().find(|(_, v)| !non_negative(*v)) {
                return Err(bad(
                    format!("model.miss_cost.{name}"),
                    "must be a non-negative number",
                ));
            }
        }
        for (i, r) in self.hit_ratios.iter().enumerate() {
            if i > 0 && r.cache_bytes < self.hit_ratios[i - 1].cache_bytes {
                return Err(bad(
                    format!("model.hit_ratios[{i}].cache_bytes"),
                    "must not decrease from one row to the next",
                ));
            }
            let ratios = [
                ("minio", r.minio),
                ("page_cache", r.page_cache),
                ("lru", r.lru.unwrap_or(0.0)),
            ];
            if let Some((name, _)) = ratios.iter().find(|(_, v)| !ratio(*v)) {
                return Err(bad(
                    format!("model.hit_ratios[{i}].{name}"),
                    "must be a hit ratio in [0, 1]",
                ));
            }
            let parts = &r.page_cache_by_part;
            if !parts.is_empty() && parts.len() != EPOCH_PARTS {
                return Err(bad(
                    format!("model.hit_ratios[{i}].page_cache_by_part"),
                    &format!(
                        "must hold {} hit ratios, one per part of the epoch, or be left out",
                        EPOCH_PARTS
                    ),
                ));
            }
            if let Some(k) = parts.iter().position(|v| !ratio(*v)) {
                return Err(bad(
                    format!("model.hit_ratios[{i}].page_cache_by_part[{k}]"),
                    "must be a hit ratio in [0, 1]",
                ));
            }
        }
        if let Some(q) = &self.stall.loader_queue {
            if q.batch_samples == 0 || q.batches_per_loader == 0 {
                return Err(bad(
                    "model.loader_queue".into(),
                    "`batch_samples` and `batches_per_loader` must be at least 1",
                ));
            }
        }
        if let Some(s) = &self.core_speed {
            if !positive(s.reference_ops_per_cpu_s) {
                return Err(bad(
                    "model.core_speed.reference_ops_per_cpu_s".into(),
                    "must be a positive number of operations per CPU-second",
                ));
            }
            if !positive(s.pipeline_exponent) {
                return Err(bad(
                    "model.core_speed.pipeline_exponent".into(),
                    "must be a positive number",
                ));
            }
            if s.shape_band.is_some_and(|b| !(0.0..1.0).contains(&b)) {
                return Err(bad(
                    "model.core_speed.shape_band".into(),
                    "must be a fraction from 0 up to 1 (0.015 is 1.5%)",
                ));
            }
        }
        if let Some(c) = &self.hit_curve {
            match c.family.as_str() {
                "two-list" => {
                    if !c.active_list_scale.is_some_and(non_negative) {
                        return Err(bad(
                            "model.hit_curve.active_list_scale".into(),
                            "must be a non-negative multiple of the kernel's ratio for family `two-list`",
                        ));
                    }
                }
                "lru-to-fixed-subset" => {
                    if !c.fixed_subset_share.is_some_and(ratio) {
                        return Err(bad(
                            "model.hit_curve.fixed_subset_share".into(),
                            "must be in [0, 1] for family `lru-to-fixed-subset`",
                        ));
                    }
                }
                other => {
                    return Err(bad(
                        "model.hit_curve.family".into(),
                        &format!(
                            "`{other}` is not a hit curve this build knows: use `two-list` or \
                             `lru-to-fixed-subset`"
                        ),
                    ))
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::format::profile::tests::tiny;
    use crate::format::profile::{Profile, ProfileError};

    /// Each corruption is refused when the file is read, naming the field, so no command indexes past a
    /// table or divides by zero later (docs/architecture.md §7).
    #[test]
    fn every_table_and_number_is_checked_when_read() {
        use serde_json::json;
        type Corrupt = fn(&mut serde_json::Value);
        let cases: Vec<(&str, Corrupt)> = vec![
            ("per_gpu.normalized", |v| {
                v["per_gpu"]["normalized"] = json!([[0.5, 0.6]])
            }),
            ("per_gpu.normalized[1]", |v| {
                v["per_gpu"]["normalized"][1] = json!([1.0])
            }),
            ("per_gpu.cpus", |v| v["per_gpu"]["cpus"] = json!([2.0, 1.0])),
            ("matrix.normalized", |v| {
                v["matrix"]["normalized"] = json!([[0.0, 0.0], [0.0, 0.0]])
            }),
            ("matrix.limited_by", |v| {
                v["matrix"]["limited_by"] = json!([["fetch", "fetch"]])
            }),
            ("matrix.proportional.normalized", |v| {
                v["matrix"]["proportional"]["normalized"] = json!(0.0)
            }),
            ("demand.per_gpu.cpus", |v| {
                v["demand"]["per_gpu"]["cpus"] = json!(-1.0)
            }),
            ("server.cpus", |v| v["server"]["cpus"] = json!(0.0)),
            ("workload.batch_size", |v| {
                v["workload"]["batch_size"] = json!(0)
            }),
            ("workload.iter_time_s", |v| {
                v["workload"]["iter_time_s"] = json!(-0.5)
            }),
            ("validation[0].measured", |v| {
                v["validation"] = json!([{"cpus": 1.0, "memory_gib": 1.0, "measured": 0.0,
                    "measured_ci95": 0.0, "predicted_minio": 1.0, "predicted_page_cache": 1.0,
                    "role": "validation"}])
            }),
        ];
        for (field, corrupt) in cases {
            let mut v = serde_json::to_value(tiny()).unwrap();
            corrupt(&mut v);
            let err = Profile::parse(&v.to_string(), "p.json").unwrap_err();
            let ProfileError::Invalid(e) = err else {
                panic!("{field}: not an input error: {err}")
            };
            assert_eq!(e.field.as_deref(), Some(field), "{e}");
        }
    }

    /// The page cache's hits by part of the epoch and the loaders' queue (1.9) are checked when read.
    #[test]
    fn hits_by_part_of_the_epoch_and_the_loader_queue_are_checked() {
        use serde_json::json;
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../profiles/image.json"
        ))
        .unwrap();
        let shipped: serde_json::Value = serde_json::from_str(&text).unwrap();
        let parse = |edit: &dyn Fn(&mut serde_json::Value)| {
            let mut v = shipped.clone();
            edit(&mut v);
            Profile::parse(&v.to_string(), "image.json")
        };
        let parts = crate::format::profile::EPOCH_PARTS;
        assert!(parse(
            &|v| v["model"]["hit_ratios"][3]["page_cache_by_part"] = json!(vec![0.5; parts])
        )
        .is_ok());
        let mut out_of_range = vec![0.5; parts];
        out_of_range[7] = 1.5;
        let cases: Vec<(&str, serde_json::Value, &str)> = vec![
            (
                "page_cache_by_part",
                json!([0.5, 0.5, 0.5]),
                "model.hit_ratios[3].page_cache_by_part",
            ),
            (
                "page_cache_by_part",
                json!(out_of_range),
                "model.hit_ratios[3].page_cache_by_part[7]",
            ),
        ];
        for (key, value, field) in cases {
            let Err(ProfileError::Invalid(e)) =
                parse(&|v| v["model"]["hit_ratios"][3][key] = value.clone())
            else {
                panic!("accepted {field}")
            };
            assert_eq!(e.field.as_deref(), Some(field), "{e}");
        }
        let Err(ProfileError::Invalid(e)) = parse(&|v| {
            v["model"]["loader_queue"] = json!({"batch_samples": 0, "batches_per_loader": 3})
        }) else {
            panic!("accepted an empty batch")
        };
        assert_eq!(e.field.as_deref(), Some("model.loader_queue"), "{e}");
    }

    /// A trial's discarded runs took no negative time (1.8), and the shipped profile says so of none.
    #[test]
    fn a_negative_time_for_a_trials_earlier_runs_is_refused() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../profiles/image.json"
        ))
        .unwrap();
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert!(Profile::parse(&v.to_string(), "image.json").is_ok());
        v["trials"][1]["earlier_runs_s"] = serde_json::json!(-3.5);
        let Err(ProfileError::Invalid(e)) = Profile::parse(&v.to_string(), "image.json") else {
            panic!("accepted a negative earlier_runs_s")
        };
        assert_eq!(e.field.as_deref(), Some("trials[1].earlier_runs_s"), "{e}");
    }
}
