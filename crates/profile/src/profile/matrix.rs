//! The sensitivity matrix from a fitted model: the grid's axes, throughput at every cell, normalization to
//! the GPU-proportional share of a server shape, the per-GPU view, and the best-case demand vector.

use crate::format::profile::Stage;
use crate::format::profile::{
    Demand, FittedModel, Matrix, PerGpuMatrix, RatedAllocation, ServerShape,
};
use crate::units::GIB;

/// Default CPU axis for a host with `cores` cores: about eight steps, at a round step size.
pub fn auto_cpu_axis(cores: f64) -> Vec<f64> {
    let step = [0.25, 0.5, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0]
        .into_iter()
        .find(|s| cores / s <= 8.0)
        .unwrap_or((cores / 8.0).ceil());
    let mut axis = Vec::new();
    let mut c = step;
    while c <= cores + 1e-9 {
        axis.push((c * 1e6).round() / 1e6);
        c += step;
    }
    if axis.last().is_none_or(|l| (l - cores).abs() > 1e-9) {
        axis.push(cores);
    }
    axis
}

/// `bytes` as a memory axis value: GiB to four decimals (about 100 KiB), as the files show them.
pub fn axis_gib(bytes: f64) -> f64 {
    (bytes / GIB * 1e4).round() / 1e4
}

/// Default memory axis: the footprint plus 0, 25, 50, 75 and 100% of the dataset as cache, GiB.
pub fn auto_memory_axis(footprint_bytes: u64, dataset_bytes: u64) -> Vec<f64> {
    let mut axis: Vec<f64> = [0.0, 0.25, 0.5, 0.75, 1.0]
        .iter()
        .map(|f| axis_gib(footprint_bytes as f64 + f * dataset_bytes as f64))
        .collect();
    // Without a dataset (or one too small to show at this precision) the columns coincide: one remains.
    axis.dedup();
    axis
}

/// Builds the matrix, per-GPU view and demand of a workload with `gpus` GPUs.
pub fn build(
    model: &FittedModel,
    cpus: &[f64],
    memory_gib: &[f64],
    gpus: u32,
    server: &ServerShape,
    tolerance: f64,
) -> (Matrix, PerGpuMatrix, Demand) {
    let g = gpus.max(1) as f64;
    let prop_cpus = server.cpus_per_gpu() * g;
    let prop_mem = server.memory_gib_per_gpu() * g;
    let t_prop = model.predict(prop_cpus, prop_mem * GIB, None).samples_per_s;
    let norm = |t: f64| if t_prop > 0.0 { t / t_prop } else { 0.0 };

    let mut abs = Vec::with_capacity(cpus.len());
    let mut lim = Vec::with_capacity(cpus.len());
    for &c in cpus {
        let (row, stages): (Vec<f64>, Vec<Stage>) = memory_gib
            .iter()
            .map(|&m| {
                let p = model.predict(c, m * GIB, None);
                (p.samples_per_s, p.limited_by)
            })
            .unzip();
        abs.push(row);
        lim.push(stages);
    }
    let normalized: Vec<Vec<f64>> = abs
        .iter()
        .map(|r| r.iter().map(|&t| norm(t)).collect())
        .collect();

    let demand = demand_of(&abs, &normalized, cpus, memory_gib, gpus, server, tolerance);
    let per_gpu = PerGpuMatrix {
        cpus: cpus.iter().map(|c| c / g).collect(),
        memory_gib: memory_gib.iter().map(|m| m / g).collect(),
        normalized: normalized.clone(),
    };
    let matrix = Matrix {
        cpus: cpus.to_vec(),
        memory_gib: memory_gib.to_vec(),
        samples_per_s: Some(abs),
        normalized,
        limited_by: Some(lim),
        proportional: RatedAllocation {
            cpus: prop_cpus,
            memory_gib: prop_mem,
            samples_per_s: Some(t_prop),
            normalized: 1.0,
        },
        source: None,
    };
    (matrix, per_gpu, demand)
}

/// The best-case demand of a grid of absolute throughputs `abs[row][column]` (and their `normalized`
/// values): the smallest allocation within `tolerance` of the best.
pub fn demand_of(
    abs: &[Vec<f64>],
    normalized: &[Vec<f64>],
    cpus: &[f64],
    memory_gib: &[f64],
    gpus: u32,
    server: &ServerShape,
    tolerance: f64,
) -> Demand {
    let g = gpus.max(1) as f64;
    let prop_cpus = server.cpus_per_gpu() * g;
    let prop_mem = server.memory_gib_per_gpu() * g;
    let best = abs.iter().flatten().cloned().fold(0.0, f64::max);
    // Smallest: least share of the server, counting cores and memory as fractions of the proportional
    // allocation, so neither resource's units dominate; ties go to fewer cores.
    let fallen = falls_with_cores(abs);
    let mut pick: Option<(f64, usize, usize)> = None;
    for (i, &c) in cpus.iter().enumerate() {
        for (j, &m) in memory_gib.iter().enumerate() {
            if abs[i][j] + 1e-9 < (1.0 - tolerance) * best {
                continue;
            }
            // Never a cell that fewer cores beat at the same memory.
            if fallen.iter().any(|f| (f.row, f.col) == (i, j)) {
                continue;
            }
            let cost = c / prop_cpus + m / prop_mem;
            if pick.is_none_or(|(b, _, _)| cost < b - 1e-12) {
                pick = Some((cost, i, j));
            }
        }
    }
    let (_, i, j) = pick.unwrap_or((0.0, cpus.len() - 1, memory_gib.len() - 1));
    let job = RatedAllocation {
        cpus: cpus[i],
        memory_gib: memory_gib[j],
        samples_per_s: Some(abs[i][j]),
        normalized: normalized[i][j],
    };
    Demand {
        job,
        per_gpu: RatedAllocation {
            cpus: job.cpus / g,
            memory_gib: job.memory_gib / g,
            samples_per_s: job.samples_per_s.map(|t| t / g),
            normalized: job.normalized,
        },
        tolerance,
    }
}

/// A cell of the matrix that fewer cores beat at the same memory.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fall {
    /// Its row (cores).
    pub row: usize,
    /// Its column (memory).
    pub col: usize,
    /// The row of fewer cores with the most throughput in that column.
    pub best_row: usize,
}

/// Every cell of `abs[row][column]` (rows in rising cores) below the best of fewer cores in its column.
pub fn falls_with_cores(abs: &[Vec<f64>]) -> Vec<Fall> {
    let mut falls = Vec::new();
    let cols = abs.first().map_or(0, Vec::len);
    for col in 0..cols {
        let mut best_row = 0;
        for row in 1..abs.len() {
            if abs[row][col] + 1e-9 < abs[best_row][col] {
                falls.push(Fall { row, col, best_row });
            } else if abs[row][col] > abs[best_row][col] {
                best_row = row;
            }
        }
    }
    falls
}

/// What the workload must keep resident beyond the fewer cores' for a fall to be the cache it gives up
/// rather than the fit's noise, bytes.
const RESIDENT_EXPLAINS_BYTES: f64 = (1u64 << 20) as f64;

/// What to do with a matrix that falls with more cores (docs/profile-format.md, "Honest edges"): where
/// the workload keeps more resident at the cell's cores than at the fewer cores that beat it (measured
/// at each swept core count), the fall is real, since that memory is taken from its cache, and it is
/// kept and explained; any other fall is the fit's noise, and the cell is raised to the best of fewer
/// cores. The per-GPU view and the demand follow. Returns the warnings the profile carries.
pub fn explain_or_repair(
    model: &FittedModel,
    m: &mut Matrix,
    per_gpu: &mut PerGpuMatrix,
    demand: &mut Demand,
    gpus: u32,
    server: &ServerShape,
) -> Vec<String> {
    let Some(abs) = m.samples_per_s.as_mut() else {
        return Vec::new();
    };
    let resident = |row: usize| model.stall.resident_at(m.cpus[row]);
    let (explained, noise): (Vec<Fall>, Vec<Fall>) = falls_with_cores(abs)
        .into_iter()
        .partition(|f| resident(f.row) >= resident(f.best_row) + RESIDENT_EXPLAINS_BYTES);
    let describe = |f: &Fall, abs: &[Vec<f64>], n: usize| {
        format!(
            "the matrix falls with more cores at {n} cell(s): at {} GiB, {} cores give {:.1} samples/s \
             and {} cores {:.1}",
            m.memory_gib[f.col],
            m.cpus[f.row],
            abs[f.row][f.col],
            m.cpus[f.best_row],
            abs[f.best_row][f.col]
        )
    };
    let mut warnings = Vec::new();
    if let Some(f) = explained.first() {
        warnings.push(format!(
            "{}; measured: the workload keeps {} resident at {} cores and {} at {}, and the difference \
             is taken from its cache; kept as measured (the demand never sits on such a cell; fewer \
             loader workers would keep the fewer cores' throughput)",
            describe(f, abs, explained.len()),
            crate::units::Bytes(resident(f.row) as u64),
            m.cpus[f.row],
            crate::units::Bytes(resident(f.best_row) as u64),
            m.cpus[f.best_row]
        ));
    }
    if let Some(f) = noise.first() {
        warnings.push(format!(
            "{}; no measurement explains it (the workload keeps no more resident at more cores), so \
             each was raised to the best of fewer cores",
            describe(f, abs, noise.len())
        ));
        for f in &noise {
            abs[f.row][f.col] = abs[f.best_row][f.col];
            m.normalized[f.row][f.col] = m.normalized[f.best_row][f.col];
        }
        follow_matrix(m, per_gpu, demand, gpus, server);
    }
    warnings
}

/// The per-GPU view and the demand made again from a matrix whose cells changed.
fn follow_matrix(
    m: &Matrix,
    per_gpu: &mut PerGpuMatrix,
    demand: &mut Demand,
    gpus: u32,
    server: &ServerShape,
) {
    per_gpu.normalized = m.normalized.clone();
    if let Some(abs) = &m.samples_per_s {
        *demand = demand_of(
            abs,
            &m.normalized,
            &m.cpus,
            &m.memory_gib,
            gpus,
            server,
            demand.tolerance,
        );
    }
}

/// Makes every column of the matrix non-decreasing in cores (a job given more cores, all else equal, is
/// never predicted slower; docs/profile-format.md, "Refinement"), then recomputes the per-GPU view and
/// the demand from the result. Returns how many cells it raised.
pub fn make_monotone_in_cores(
    m: &mut Matrix,
    per_gpu: &mut PerGpuMatrix,
    demand: &mut Demand,
    gpus: u32,
    server: &ServerShape,
) -> usize {
    let mut raised = 0;
    let cols = m.memory_gib.len();
    for j in 0..cols {
        for i in 1..m.cpus.len() {
            if m.normalized[i][j] < m.normalized[i - 1][j] {
                m.normalized[i][j] = m.normalized[i - 1][j];
                raised += 1;
            }
            if let Some(abs) = m.samples_per_s.as_mut() {
                if abs[i][j] < abs[i - 1][j] {
                    abs[i][j] = abs[i - 1][j];
                }
            }
        }
    }
    follow_matrix(m, per_gpu, demand, gpus, server);
    raised
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::profile::HitRatioRow;
    use crate::format::profile::{CpuCurve, CpuPoint, FetchModel, HitModel, StallModel};

    fn model() -> FittedModel {
        let d = 2u64 << 30;
        FittedModel {
            stall: StallModel {
                accelerator_samples_per_s: 900.0,
                cpu: CpuCurve::new(vec![
                    CpuPoint {
                        cpus: 1.0,
                        samples_per_s: 300.0,
                    },
                    CpuPoint {
                        cpus: 3.0,
                        samples_per_s: 900.0,
                    },
                ]),
                fetch: FetchModel {
                    mean_sample_bytes: 1e5,
                    storage_bytes_per_s: Some(30e6),
                    storage_lower_bound: false,
                    memory_bytes_per_s: 5e9,
                },
                footprint_bytes: 1 << 30,
                footprint_points: Vec::new(),
                resident_points: Vec::new(),
                dataset_bytes: d,
                hit_model: HitModel::Minio,
                miss_cost: None,
                loader_queue: None,
            },
            hit_ratios: vec![
                HitRatioRow {
                    cache_bytes: 0,
                    minio: 0.0,
                    page_cache: 0.0,
                    lru: None,
                    page_cache_by_part: Vec::new(),
                },
                HitRatioRow {
                    cache_bytes: d,
                    minio: 1.0,
                    page_cache: 1.0,
                    lru: None,
                    page_cache_by_part: Vec::new(),
                },
            ],
            hit_curve: None,
            accelerator: None,
            core_speed: None,
        }
    }

    #[test]
    fn a_fall_with_more_cores_is_kept_where_residency_explains_it_and_raised_where_not() {
        let server = ServerShape {
            gpus: 1,
            cpus: 3.0,
            memory_gib: 8.0,
        };
        let falling = |model: &FittedModel| {
            let (mut m, mut per_gpu, _) =
                build(model, &[1.0, 2.0, 3.0], &[1.5, 3.0], 1, &server, 0.05);
            let abs = m.samples_per_s.as_mut().unwrap();
            for (row, t) in [300.0, 280.0, 290.0].into_iter().enumerate() {
                abs[row][0] = t;
                abs[row][1] = t;
                m.normalized[row][0] = t / 900.0;
                m.normalized[row][1] = t / 900.0;
            }
            let mut demand =
                demand_of(abs, &m.normalized, &m.cpus, &m.memory_gib, 1, &server, 0.05);
            let warnings = explain_or_repair(model, &mut m, &mut per_gpu, &mut demand, 1, &server);
            (m, per_gpu, demand, warnings)
        };
        let flat = model();
        let (m, per_gpu, demand, warnings) = falling(&flat);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("raised"), "{warnings:?}");
        assert!(falls_with_cores(m.samples_per_s.as_ref().unwrap()).is_empty());
        assert_eq!(per_gpu.normalized, m.normalized);
        assert_eq!(demand.job.cpus, 1.0);

        let mut grows = model();
        grows.stall.resident_points = [(1.0, 1u64 << 30), (2.0, 3 << 29), (3.0, 3 << 29)]
            .map(|(cpus, bytes)| crate::format::profile::FootprintPoint { cpus, bytes })
            .to_vec();
        let (m, _, demand, warnings) = falling(&grows);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("kept as measured"), "{warnings:?}");
        let abs = m.samples_per_s.as_ref().unwrap();
        assert_eq!(abs[1][0], 280.0, "an explained fall stays");
        assert_eq!(
            (demand.job.cpus, demand.job.memory_gib),
            (1.0, 1.5),
            "never a fallen cell"
        );
    }

    #[test]
    fn auto_axes_are_round_and_end_at_the_host() {
        assert_eq!(
            auto_cpu_axis(2.0),
            vec![0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0]
        );
        assert_eq!(
            auto_cpu_axis(24.0),
            vec![3.0, 6.0, 9.0, 12.0, 15.0, 18.0, 21.0, 24.0]
        );
        assert_eq!(
            auto_memory_axis(1 << 30, 4 << 30),
            vec![1.0, 2.0, 3.0, 4.0, 5.0]
        );
    }

    #[test]
    fn normalized_is_one_at_proportional_and_demand_is_the_smallest_near_best() {
        let server = ServerShape {
            gpus: 4,
            cpus: 12.0,
            memory_gib: 12.0,
        };
        let cpus = [1.0, 2.0, 3.0, 4.0];
        let mem = [1.0, 2.0, 3.0];
        let (m, per_gpu, demand) = build(&model(), &cpus, &mem, 1, &server, 0.05);
        // Proportional: 3 cores, 3 GiB: accelerator-bound (the cache holds the whole dataset).
        assert_eq!(m.proportional.samples_per_s, Some(900.0));
        assert!((m.normalized[2][2] - 1.0).abs() < 1e-9);
        // With no cache, fetch limits everything: 30 MB/s over 100 kB samples.
        assert!((m.samples_per_s.as_ref().unwrap()[3][0] - 300.0).abs() < 1.0);
        assert_eq!(m.limited_by.as_ref().unwrap()[3][0], Stage::Fetch);
        assert_eq!((demand.job.cpus, demand.job.memory_gib), (3.0, 3.0));
        assert_eq!(per_gpu.cpus, cpus.to_vec());
        // Monotone in both axes.
        for i in 0..cpus.len() {
            for j in 0..mem.len() {
                if i > 0 {
                    assert!(m.normalized[i][j] >= m.normalized[i - 1][j]);
                }
                if j > 0 {
                    assert!(m.normalized[i][j] >= m.normalized[i][j - 1]);
                }
            }
        }
    }

    /// Property: for random monotone models and axes, the matrix is monotone in both axes, normalized is
    /// 1.0 at the proportional allocation, and the demand is within tolerance of the best cell while no
    /// cheaper cell is.
    #[test]
    fn random_models_give_monotone_matrices_and_a_minimal_demand() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for case in 0..200 {
            let g = rng.random_range(50.0..2000.0);
            let mut pts = Vec::new();
            let mut t: f64 = 0.0;
            for k in 1..=rng.random_range(1..6) {
                t += rng.random_range(1.0..500.0);
                pts.push(CpuPoint {
                    cpus: k as f64 * rng.random_range(0.25..2.0),
                    samples_per_s: t.min(g),
                });
            }
            let d = rng.random_range(1u64..8) << 30;
            let mut rows = Vec::new();
            let mut h = 0.0;
            for k in 0..=10u64 {
                h = f64::min(1.0, h + rng.random_range(0.0..0.2));
                rows.push(HitRatioRow {
                    cache_bytes: d * k / 10,
                    minio: k as f64 / 10.0,
                    page_cache: if k == 10 { 1.0 } else { h },
                    lru: None,
                    page_cache_by_part: Vec::new(),
                });
            }
            let model = FittedModel {
                stall: StallModel {
                    accelerator_samples_per_s: g,
                    cpu: CpuCurve::new(pts),
                    fetch: FetchModel {
                        mean_sample_bytes: rng.random_range(1e3..1e6),
                        storage_bytes_per_s: Some(rng.random_range(1e6..1e9)),
                        storage_lower_bound: false,
                        memory_bytes_per_s: 1e10,
                    },
                    footprint_bytes: 1 << 29,
                    footprint_points: Vec::new(),
                    resident_points: Vec::new(),
                    dataset_bytes: d,
                    hit_model: if case % 2 == 0 {
                        HitModel::Minio
                    } else {
                        HitModel::PageCache
                    },
                    miss_cost: None,
                    loader_queue: None,
                },
                hit_ratios: rows,
                hit_curve: None,
                accelerator: None,
                core_speed: None,
            };
            let cpus = auto_cpu_axis(rng.random_range(2.0..32.0));
            let mem = auto_memory_axis(1 << 29, d);
            let server = ServerShape {
                gpus: 8,
                cpus: *cpus.last().unwrap() * 2.0,
                memory_gib: 500.0,
            };
            let tol = 0.05;
            let (m, _, demand) = build(&model, &cpus, &mem, 1, &server, tol);
            let abs = m.samples_per_s.as_ref().unwrap();
            for i in 0..cpus.len() {
                for j in 0..mem.len() {
                    if i > 0 {
                        assert!(abs[i][j] + 1e-9 >= abs[i - 1][j], "case {case}: cpus");
                    }
                    if j > 0 {
                        assert!(abs[i][j] + 1e-9 >= abs[i][j - 1], "case {case}: memory");
                    }
                }
            }
            let best = abs.iter().flatten().cloned().fold(0.0, f64::max);
            let t_d = demand.job.samples_per_s.unwrap();
            assert!(
                t_d + 1e-9 >= (1.0 - tol) * best,
                "case {case}: demand within tolerance"
            );
            let cost = |c: f64, g: f64| c / m.proportional.cpus + g / m.proportional.memory_gib;
            let d_cost = cost(demand.job.cpus, demand.job.memory_gib);
            for (i, &c) in cpus.iter().enumerate() {
                for (j, &g) in mem.iter().enumerate() {
                    if abs[i][j] + 1e-9 >= (1.0 - tol) * best {
                        assert!(
                            cost(c, g) >= d_cost - 1e-9,
                            "case {case}: a cheaper cell qualifies"
                        );
                    }
                }
            }
            let p = model
                .predict(m.proportional.cpus, m.proportional.memory_gib * GIB, None)
                .samples_per_s;
            assert!((p / m.proportional.samples_per_s.unwrap() - 1.0).abs() < 1e-12);
        }
    }

    #[test]
    fn demand_per_gpu_divides_by_gpus() {
        let server = ServerShape {
            gpus: 8,
            cpus: 24.0,
            memory_gib: 500.0,
        };
        let (_, per_gpu, demand) = build(
            &model(),
            &[1.0, 2.0, 3.0, 4.0],
            &[1.0, 3.0],
            2,
            &server,
            0.05,
        );
        assert_eq!(demand.per_gpu.cpus, demand.job.cpus / 2.0);
        assert_eq!(per_gpu.memory_gib, vec![0.5, 1.5]);
    }
}
