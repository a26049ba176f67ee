//! The optimization upper bound (docs/architecture.md §5.4, "opt"): choose one (cores, memory) grid configuration per
//! runnable job to maximize total normalized throughput under the cluster's core and memory capacity, no
//! job below its GPU-proportional speed; then place jobs integrally with tune's steps.
//!
//! Jobs of the same model and GPU count are interchangeable, so the linear program counts how many of
//! each group take each configuration (a few dozen variables instead of jobs x grid cells), solved with
//! the pure-Rust simplex solver microlp through good_lp. Fractional counts are rounded, the higher-speed
//! configurations going to the jobs earlier in policy order; placement then enforces every server's
//! capacity, falling back as tune does where rounding or fragmentation leaves no room.

use super::mechanism::tune_with;
use super::place::Share;
use super::{Grant, Mechanism, MechanismStats, Request};
use crate::sched::catalog::Catalog;
use crate::sched::cluster::ClusterState;
use good_lp::{constraint, microlp, variable, Expression, ProblemVariables, Solution, SolverModel};
use std::collections::BTreeMap;
use std::time::Instant;

/// The optimizer mechanism; it counts rounds the solver failed (then tune's choice stands).
#[derive(Debug, Clone, Default)]
pub struct Opt {
    /// Rounds whose linear program could not be solved.
    pub solver_failures: u64,
}

/// One grid configuration per GPU and its speed.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Config {
    cpus: f64,
    memory_gib: f64,
    speed: f64,
}

/// Configurations of a model for `gpus`-GPU jobs on `spec`-shaped servers that are no slower than
/// GPU-proportional and not dominated by a cheaper, at-least-as-fast one.
fn candidates(
    catalog: &Catalog,
    model: u32,
    gpus: u32,
    spec: &crate::sched::cluster::ServerSpec,
) -> Vec<Config> {
    let m = catalog.get(model as usize);
    let (pc, pm) = (spec.cpus_per_gpu(), spec.memory_gib_per_gpu());
    let prop = m.speed(pc, pm);
    let g = gpus as f64;
    let mut all = vec![Config {
        cpus: pc,
        memory_gib: pm,
        speed: prop,
    }];
    for &c in &m.cpus_axis {
        for &mem in &m.memory_gib_axis {
            if g * c > spec.cpus + 1e-9 || g * mem > spec.memory_gib + 1e-9 {
                continue;
            }
            let speed = m.speed(c, mem);
            if speed + 1e-9 >= prop {
                all.push(Config {
                    cpus: c,
                    memory_gib: mem,
                    speed,
                });
            }
        }
    }
    let dominated = |a: &Config| {
        all.iter().any(|b| {
            b != a
                && b.cpus <= a.cpus
                && b.memory_gib <= a.memory_gib
                && b.speed >= a.speed
                && (b.cpus < a.cpus || b.memory_gib < a.memory_gib || b.speed > a.speed)
        })
    };
    let mut keep: Vec<Config> = all.iter().copied().filter(|a| !dominated(a)).collect();
    keep.sort_by(|a, b| b.speed.total_cmp(&a.speed));
    keep.dedup();
    keep
}

impl Mechanism for Opt {
    fn name(&self) -> &'static str {
        "opt"
    }

    fn allocate(
        &mut self,
        catalog: &Catalog,
        state: &mut ClusterState,
        runnable: &[Request],
        grants: &mut [Grant],
    ) -> MechanismStats {
        let started = Instant::now();
        let spec = state.widest_server();
        let mut cpus_left: f64 = state.specs.iter().map(|s| s.cpus).sum();
        let mut mem_left: f64 = state.specs.iter().map(|s| s.memory_gib).sum();
        let mut fixed_speed = 0.0;
        // Groups of interchangeable jobs: (model, gpus) -> slots in policy order.
        let mut groups: BTreeMap<(u32, u32), Vec<usize>> = BTreeMap::new();
        for (slot, r) in runnable.iter().enumerate() {
            if r.gpus > spec.gpus {
                // Wider than a server: GPU-proportional, outside the program.
                let g = r.gpus as f64;
                cpus_left -= g * spec.cpus_per_gpu();
                mem_left -= g * spec.memory_gib_per_gpu();
                let m = catalog.get(r.model as usize);
                fixed_speed += g * m.speed(spec.cpus_per_gpu(), spec.memory_gib_per_gpu());
            } else {
                groups.entry((r.model, r.gpus)).or_default().push(slot);
            }
        }
        let mut share = vec![Share::Proportional; runnable.len()];
        let cands: Vec<((u32, u32), Vec<Config>)> = groups
            .keys()
            .map(|&(model, gpus)| ((model, gpus), candidates(catalog, model, gpus, &spec)))
            .collect();

        let mut vars = ProblemVariables::new();
        let mut objective = Expression::from(fixed_speed);
        let mut cpu_use = Expression::from(0.0);
        let mut mem_use = Expression::from(0.0);
        let mut counts = Vec::new();
        let mut group_vars = Vec::new();
        for (key, configs) in &cands {
            let n = groups[key].len() as f64;
            let g = key.1 as f64;
            let mut vs = Vec::new();
            let mut sum = Expression::from(0.0);
            for c in configs {
                let v = vars.add(variable().min(0.0).max(n));
                objective += g * c.speed * v;
                cpu_use += g * c.cpus * v;
                mem_use += g * c.memory_gib * v;
                sum += v;
                vs.push(v);
            }
            counts.push((sum, n));
            group_vars.push(vs);
        }
        let mut model = vars.maximise(objective.clone()).using(microlp);
        for (sum, n) in counts {
            model = model.with(constraint!(sum == n));
        }
        model = model
            .with(constraint!(cpu_use <= cpus_left.max(0.0)))
            .with(constraint!(mem_use <= mem_left.max(0.0)));
        let mut bound = None;
        match model.solve() {
            Ok(sol) => {
                bound = Some(sol.eval(&objective));
                for ((key, configs), vs) in cands.iter().zip(&group_vars) {
                    let slots = &groups[key];
                    let values: Vec<f64> = vs.iter().map(|v| sol.value(*v).max(0.0)).collect();
                    let chosen = round_counts(&values, slots.len());
                    // Configurations are sorted fastest first: earlier jobs in policy order get them.
                    let mut it = slots.iter();
                    for (k, &cnt) in chosen.iter().enumerate() {
                        for _ in 0..cnt {
                            if let Some(&slot) = it.next() {
                                share[slot] = Share::PerGpu {
                                    cpus: configs[k].cpus,
                                    memory_gib: configs[k].memory_gib,
                                };
                            }
                        }
                    }
                }
            }
            Err(_) => {
                self.solver_failures += 1;
                for ((key, configs), _) in cands.iter().zip(&group_vars) {
                    for &slot in &groups[key] {
                        let c = configs[0];
                        share[slot] = Share::PerGpu {
                            cpus: c.cpus,
                            memory_gib: c.memory_gib,
                        };
                    }
                }
            }
        }
        let solve_s = started.elapsed().as_secs_f64();
        let demotions = tune_with(catalog, state, runnable, grants, |slot| share[slot]);
        MechanismStats {
            demotions,
            solve_s,
            bound,
        }
    }
}

/// Integer counts summing to `n` from fractional ones: floors, then the largest remainders.
fn round_counts(values: &[f64], n: usize) -> Vec<usize> {
    let mut out: Vec<usize> = values.iter().map(|v| (v + 1e-6).floor() as usize).collect();
    let mut total: usize = out.iter().sum();
    while total > n {
        // Solver slack can overshoot; take from the slowest configuration.
        if let Some(k) = out.iter().rposition(|&c| c > 0) {
            out[k] -= 1;
            total -= 1;
        }
    }
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| {
        let fa = values[a] - values[a].floor();
        let fb = values[b] - values[b].floor();
        fb.total_cmp(&fa).then(a.cmp(&b))
    });
    let mut i = 0;
    while total < n && !order.is_empty() {
        out[order[i % order.len()]] += 1;
        total += 1;
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::sched::catalog::JobModel;
    use crate::sched::cluster::{ClusterConfig, ServerSpec};
    use crate::sched::place::speeds;

    #[test]
    fn scarce_cores_go_where_they_buy_the_most_and_nobody_drops_below_proportional() {
        let c = Catalog::new(vec![JobModel {
            name: "m".into(),
            class: "image".into(),
            iter_time_s: 1.0,
            cpus_axis: vec![1.0, 4.0, 8.0],
            memory_gib_axis: vec![10.0, 100.0],
            normalized: vec![vec![0.5, 0.5], vec![1.0, 1.0], vec![2.0, 2.0]],
            best_cpus_per_gpu: 8.0,
            best_memory_gib_per_gpu: 10.0,
            footprint_gib_per_gpu: None,
            path: "m.json".into(),
        }])
        .unwrap();
        // 4 GPUs, 20 cores: GPU-proportional is 5 cores (speed 1.25); 8 cores would give 2.0.
        let cfg = ClusterConfig {
            servers: vec![ServerSpec {
                gpus: 4,
                cpus: 20.0,
                memory_gib: 400.0,
            }],
        };
        let mut state = ClusterState::new(&cfg);
        let reqs = vec![Request { model: 0, gpus: 1 }; 4];
        let mut grants = vec![Grant::default(); 4];
        let stats = Opt::default().allocate(&c, &mut state, &reqs, &mut grants);
        let bound = stats.bound.expect("the program solves");
        // Nobody may drop below 5 cores, so the cores are all spoken for: 4 x 1.25 = 5, although each job
        // alone would take 8.
        assert!((bound - 5.0).abs() < 1e-6, "{bound}");
        assert!(state.consistent());
        for (r, g) in reqs.iter().zip(&grants) {
            let (speed, prop) = speeds(&c, &state, r, &g.parts);
            assert!(speed + 1e-9 >= prop);
        }
    }

    #[test]
    fn rounding_keeps_the_count() {
        assert_eq!(round_counts(&[1.5, 1.5, 0.0], 3).iter().sum::<usize>(), 3);
        assert_eq!(round_counts(&[2.0, 0.0], 2), vec![2, 0]);
        assert_eq!(round_counts(&[0.3, 0.7], 1), vec![0, 1]);
    }
}
