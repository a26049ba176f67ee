//! Sweeps: every combination of policies, mechanisms, loads and seeds, run in parallel on scoped threads
//! (one simulation per task; each is single-threaded and deterministic, so order does not matter).

use super::engine::{run_watched, Recorder, SimConfig, TraceSource, Watch};
use super::metrics::SimResult;
use super::trace::GenConfig;
use super::SimError;
use crate::sched::catalog::Catalog;
use crate::sched::{mechanism_by_name, policy_by_name};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// One configuration of a sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Policy name.
    pub policy: String,
    /// Mechanism name.
    pub mechanism: String,
    /// Load, jobs per hour (generated traces).
    pub load_jobs_per_h: f64,
    /// Seed.
    pub seed: u64,
}

/// Runs every point on up to `threads` threads, each reporting its progress to `watch` and handing its
/// records to the recorder `recorder(i, point)` makes for it; results and recorders come back in the
/// order of `points`.
pub fn sweep<R: Recorder + Send>(
    catalog: &Catalog,
    cfg: &SimConfig,
    base: &TraceSource,
    points: &[Point],
    threads: usize,
    watch: &dyn Watch,
    recorder: &(dyn Fn(usize, &Point) -> Result<R, SimError> + Sync),
) -> Result<Vec<(SimResult, R)>, SimError> {
    let next = AtomicUsize::new(0);
    type Slot<R> = Option<Result<(SimResult, R), SimError>>;
    let results: Mutex<Vec<Slot<R>>> = Mutex::new((0..points.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads.clamp(1, points.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(p) = points.get(i) else { break };
                let r = recorder(i, p).and_then(|mut rec| {
                    run_point(catalog, cfg, base, p, watch, &mut rec).map(|r| (r, rec))
                });
                results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|r| r.expect("every point ran"))
        .collect()
}

/// Runs one point: the generated trace takes the point's load and seed.
pub fn run_point(
    catalog: &Catalog,
    cfg: &SimConfig,
    base: &TraceSource,
    p: &Point,
    watch: &dyn Watch,
    recorder: &mut dyn Recorder,
) -> Result<SimResult, SimError> {
    let policy = policy_by_name(&p.policy)?;
    let mut mech = mechanism_by_name(&p.mechanism)?;
    let source = match base {
        TraceSource::Generated(g) => TraceSource::Generated(GenConfig {
            seed: p.seed,
            load_jobs_per_h: p.load_jobs_per_h,
            ..g.clone()
        }),
        other => other.clone(),
    };
    run_watched(
        catalog,
        cfg,
        source,
        policy.as_ref(),
        mech.as_mut(),
        watch,
        recorder,
    )
}
