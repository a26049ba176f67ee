//! Placement on servers by counts: a job's GPUs on one server when they fit there, else spread over
//! servers with free GPUs, each server giving cores and memory in proportion to the GPUs it gives; and
//! tune's demotion of over-provisioned co-located jobs.

use super::{Grant, Request};
use crate::sched::catalog::Catalog;
use crate::sched::cluster::{ClusterState, Part, ServerSpec, EPS};
use crate::sched::semantics::{DemotionScope, Fallback, Placement};

/// What each GPU of a job brings with it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Share {
    /// The server's per-GPU share of cores and memory.
    Proportional,
    /// Fixed cores and memory (GiB) per GPU.
    PerGpu {
        /// Cores per GPU.
        cpus: f64,
        /// Memory per GPU, GiB.
        memory_gib: f64,
    },
}

/// Cores and memory that `gpus` GPUs bring on a server of shape `spec`.
pub fn need(spec: &ServerSpec, gpus: u32, share: Share) -> (f64, f64) {
    let k = gpus as f64;
    match share {
        Share::Proportional => (k * spec.cpus_per_gpu(), k * spec.memory_gib_per_gpu()),
        Share::PerGpu { cpus, memory_gib } => (
            (k * cpus).min(spec.cpus),
            (k * memory_gib).min(spec.memory_gib),
        ),
    }
}

/// A job's best-case demand per GPU, capped so that the whole job fits one server (docs/architecture.md §5.4).
pub fn best_share(catalog: &Catalog, state: &ClusterState, req: &Request) -> Share {
    let m = catalog.get(req.model as usize);
    let widest = state.widest_server();
    let g = req.gpus as f64;
    Share::PerGpu {
        cpus: m.best_cpus_per_gpu.min(widest.cpus / g),
        memory_gib: m.best_memory_gib_per_gpu.min(widest.memory_gib / g),
    }
}

/// What tune asks for once `req`'s best case has not fitted: GPU-proportional, or under the reference's
/// [`Fallback::OwnBelowShare`] the best case itself when it is at or below every server's per-GPU share
/// in cores and memory and runs at least as fast as at the largest of those shares, so that wherever it
/// lands it is not below proportional speed (the reference's clusters are uniform; ours need not be).
pub fn fallback_share(catalog: &Catalog, state: &ClusterState, req: &Request) -> Share {
    if state.semantics.fallback == Fallback::Proportional || req.gpus > state.widest_server().gpus {
        return Share::Proportional;
    }
    let own = best_share(catalog, state, req);
    let m = catalog.get(req.model as usize);
    let r = state.share_range();
    let (lo_c, lo_m, hi_c, hi_m) = (
        r.min_cpus_per_gpu,
        r.min_memory_gib_per_gpu,
        r.max_cpus_per_gpu,
        r.max_memory_gib_per_gpu,
    );
    match own {
        Share::PerGpu { cpus, memory_gib }
            if cpus <= lo_c + EPS
                && memory_gib <= lo_m + EPS
                && m.speed(cpus, memory_gib) + 1e-9 >= m.speed(hi_c, hi_m) =>
        {
            own
        }
        _ => Share::Proportional,
    }
}

/// Finds room for `gpus` GPUs at `share` without taking it: one server if possible, else spread; under
/// the reference's [`Placement::FirstFitPerGpu`] spread at once, in server order.
pub fn find(state: &ClusterState, gpus: u32, share: Share) -> Option<Vec<Part>> {
    let mut parts = Vec::new();
    find_into(state, gpus, share, &mut parts).then_some(parts)
}

/// [`find`] into `parts` (emptied first; empty again when there is no room): a mechanism placing
/// thousands of jobs a round reuses one vector instead of allocating one per job.
pub fn find_into(state: &ClusterState, gpus: u32, share: Share, parts: &mut Vec<Part>) -> bool {
    parts.clear();
    if state.free_gpus_total < gpus as u64 {
        return false;
    }
    if state.semantics.placement == Placement::OneServerFirst {
        if find_one_server(state, gpus, share, parts) {
            return true;
        }
        if gpus == 1 {
            return false;
        }
    }
    let found = find_spread(state, gpus, share, parts);
    if !found {
        parts.clear();
    }
    found
}

/// The first server (in index order) that holds all `gpus` GPUs at `share`, pushed onto `parts`.
fn find_one_server(state: &ClusterState, gpus: u32, share: Share, parts: &mut Vec<Part>) -> bool {
    state
        .room
        .first_holding(0, gpus, share, |si| {
            let (c, m) = need(&state.specs[si], gpus, share);
            let fits = state.fits(si, gpus, c, m);
            if fits {
                parts.push(Part {
                    server: si as u32,
                    gpus,
                    cpus: c,
                    memory_gib: m,
                });
            }
            fits
        })
        .is_some()
}

/// `gpus` GPUs at `share` over the servers in index order, each giving as many as it has room for: the
/// same as taking GPU by GPU the first server with room for one more. Servers without room for one
/// GPU give none, so only those with room for one are visited.
fn find_spread(state: &ClusterState, gpus: u32, share: Share, parts: &mut Vec<Part>) -> bool {
    let mut left = gpus;
    let mut from = 0;
    while let Some(si) = state.room.first_holding(from, 1, share, &mut |si| {
        let (c, m) = need(&state.specs[si], 1, share);
        state.fits(si, 1, c, m)
    }) {
        from = si + 1;
        let mut k = state.free_gpus[si].min(left);
        while k > 0 {
            let (c, m) = need(&state.specs[si], k, share);
            if state.fits(si, k, c, m) {
                parts.push(Part {
                    server: si as u32,
                    gpus: k,
                    cpus: c,
                    memory_gib: m,
                });
                left -= k;
                break;
            }
            k -= 1;
        }
        if left == 0 {
            return true;
        }
    }
    false
}

/// Takes `parts` for the job in `slot`.
pub fn commit(state: &mut ClusterState, slot: usize, parts: &[Part]) {
    for p in parts {
        state.take(slot as u32, *p);
    }
}

/// Speed of a job holding `parts`.
pub fn speed(catalog: &Catalog, state: &ClusterState, req: &Request, parts: &[Part]) -> f64 {
    let m = catalog.get(req.model as usize);
    let g = req.gpus.max(1) as f64;
    let (c, mem) = parts
        .iter()
        .fold((0.0, 0.0), |(c, mem), p| (c + p.cpus, mem + p.memory_gib));
    state
        .semantics
        .speed(m, req.gpus, &state.widest_server(), c / g, mem / g)
}

/// Speed of a job holding `parts`, and its speed at GPU-proportional share on the same GPUs.
pub fn speeds(
    catalog: &Catalog,
    state: &ClusterState,
    req: &Request,
    parts: &[Part],
) -> (f64, f64) {
    let m = catalog.get(req.model as usize);
    let g = req.gpus.max(1) as f64;
    let (mut pc, mut pm) = (0.0, 0.0);
    for p in parts {
        let spec = &state.specs[p.server as usize];
        pc += p.gpus as f64 * spec.cpus_per_gpu();
        pm += p.gpus as f64 * spec.memory_gib_per_gpu();
    }
    (speed(catalog, state, req, parts), m.speed(pc / g, pm / g))
}

/// How far above GPU-proportional share a job sits, in shares of cores plus shares of memory.
fn excess(state: &ClusterState, parts: &[Part]) -> f64 {
    let (mut c, mut m, mut pc, mut pm) = (0.0, 0.0, 0.0, 0.0);
    for p in parts {
        let spec = &state.specs[p.server as usize];
        c += p.cpus;
        m += p.memory_gib;
        pc += p.gpus as f64 * spec.cpus_per_gpu();
        pm += p.gpus as f64 * spec.memory_gib_per_gpu();
    }
    ((c - pc) / pc).max(0.0) + ((m - pm) / pm).max(0.0)
}

/// Brings job `slot` back to GPU-proportional share on every server it holds; returns whether anything
/// was freed. Where it holds less than its share in one dimension and more in the other, the cheaper
/// demotion (each dimension capped at the share) is used if the job still runs at GPU-proportional speed,
/// else exactly the share if the server has room for the increase; otherwise the job is left alone.
fn demote(
    catalog: &Catalog,
    state: &mut ClusterState,
    requests: &[Request],
    grants: &mut [Grant],
    slot: usize,
) -> bool {
    let old = grants[slot].parts.clone();
    let mut capped = old.clone();
    let mut exact = old.clone();
    for (c, e) in capped.iter_mut().zip(exact.iter_mut()) {
        let spec = state.specs[c.server as usize];
        let (pc, pm) = (
            c.gpus as f64 * spec.cpus_per_gpu(),
            c.gpus as f64 * spec.memory_gib_per_gpu(),
        );
        c.cpus = c.cpus.min(pc);
        c.memory_gib = c.memory_gib.min(pm);
        e.cpus = pc;
        e.memory_gib = pm;
    }
    let (speed, prop) = speeds(catalog, state, &requests[slot], &capped);
    let target = if speed + 1e-9 >= prop {
        capped
    } else if old.iter().zip(&exact).all(|(o, e)| {
        let s = o.server as usize;
        e.cpus - o.cpus <= state.free_cpus[s] + EPS
            && e.memory_gib - o.memory_gib <= state.free_memory_gib[s] + EPS
    }) {
        exact
    } else {
        return false;
    };
    let mut freed = false;
    for (o, n) in old.iter().zip(&target) {
        let (dc, dm) = (o.cpus - n.cpus, o.memory_gib - n.memory_gib);
        if dc.abs() > EPS || dm.abs() > EPS {
            state.give_back(o.server, dc, dm);
            freed |= dc > EPS || dm > EPS;
        }
    }
    grants[slot].parts = target;
    if freed {
        grants[slot].demoted = true;
    }
    freed
}

/// Tune's step 3: demote co-placed jobs until job `slot` fits at `share` (its [`fallback_share`]), as
/// far as [`DemotionScope`] reaches; takes the room and returns the demotions made, or None.
pub fn place_with_demotion(
    catalog: &Catalog,
    state: &mut ClusterState,
    requests: &[Request],
    grants: &mut [Grant],
    slot: usize,
    share: Share,
) -> Option<u32> {
    match state.semantics.demotion {
        DemotionScope::EveryServer => {
            demote_anywhere(catalog, state, requests, grants, slot, share)
        }
        DemotionScope::OneServer => {
            let (d, placed) = demote_on_one_server(catalog, state, requests, grants, slot, share);
            if placed {
                return Some(d);
            }
            // The reference stops the whole simulation here; every runnable job runs in ours, so the
            // search goes on over every server (docs/simulate.md, "Two semantics").
            demote_anywhere(catalog, state, requests, grants, slot, share).map(|more| d + more)
        }
    }
}

/// The reference's step 3: the job's GPUs are looked for on one server (the first with enough free
/// GPUs for a multi-GPU job, else the servers with the fewest free GPUs first), only the jobs placed
/// there this round are demoted (single-server jobs first, then the most cores and memory per GPU),
/// and the job is then placed at `share` wherever it fits. Returns the demotions and whether it was
/// placed.
fn demote_on_one_server(
    catalog: &Catalog,
    state: &mut ClusterState,
    requests: &[Request],
    grants: &mut [Grant],
    slot: usize,
    share: Share,
) -> (u32, bool) {
    let gpus = requests[slot].gpus;
    let first_whole = if gpus > 1 {
        state.room.first_with_free_gpus(0, gpus, u32::MAX)
    } else {
        None
    };
    let targets: Vec<(u32, u32)> = match first_whole {
        Some(s) => vec![(s as u32, gpus)],
        None => {
            // The servers with free GPUs, fewest free first (then by index), until the job's GPUs are
            // covered.
            let mut left = gpus;
            let mut t = Vec::new();
            if let Some((lo, hi)) = state.room.open_gpu_range() {
                'counts: for free in lo..=hi {
                    for s in state.room.with_free_gpus(free, free) {
                        if left == 0 {
                            break 'counts;
                        }
                        let k = free.min(left);
                        t.push((s as u32, k));
                        left -= k;
                    }
                }
            }
            t
        }
    };
    let mut demotions = 0;
    for (s, k) in targets {
        let si = s as usize;
        let (c, m) = need(&state.specs[si], k, share);
        let mut residents: Vec<usize> = state.residents[si].iter().map(|&r| r as usize).collect();
        let per_gpu = |r: usize| {
            let (g, c, m) = grants[r].totals();
            (grants[r].parts.len(), c / g as f64, m / g as f64)
        };
        residents.sort_by(|&a, &b| {
            let (pa, ca, ma) = per_gpu(a);
            let (pb, cb, mb) = per_gpu(b);
            pa.cmp(&pb).then(cb.total_cmp(&ca)).then(mb.total_cmp(&ma))
        });
        for r in residents {
            if state.fits(si, k, c, m) {
                break;
            }
            if demote(catalog, state, requests, grants, r) {
                demotions += 1;
            }
        }
    }
    match find(state, gpus, share) {
        Some(parts) => {
            commit(state, slot, &parts);
            grants[slot].parts = parts;
            (demotions, true)
        }
        None => (demotions, false),
    }
}

/// Our step 3: on servers with free GPUs, demote over-provisioned residents (most first) until job
/// `slot` fits at `share` (GPU-proportional under our rules).
fn demote_anywhere(
    catalog: &Catalog,
    state: &mut ClusterState,
    requests: &[Request],
    grants: &mut [Grant],
    slot: usize,
    share: Share,
) -> Option<u32> {
    let gpus = requests[slot].gpus;
    let mut left = gpus;
    let mut parts = Vec::new();
    let mut demotions = 0;
    // Prefer one server that has all the GPUs, as placement without demotion does. Demotion frees cores
    // and memory, never GPUs, so the servers' free GPUs stay what they were when the order began.
    let chains = [(gpus.max(1), u32::MAX), (1, gpus.saturating_sub(1))];
    let (mut chain, mut from) = (0, 0);
    while let Some(&(lo, hi)) = chains.get(chain) {
        let Some(si) = state.room.first_with_free_gpus(from, lo, hi) else {
            (chain, from) = (chain + 1, 0);
            continue;
        };
        from = si + 1;
        let s = si as u32;
        let k = state.free_gpus[si].min(left);
        if k == 0 {
            continue;
        }
        let (c, m) = need(&state.specs[si], k, share);
        if !state.fits(si, k, c, m) {
            let mut residents: Vec<(f64, usize)> = state.residents[si]
                .iter()
                .map(|&r| (excess(state, &grants[r as usize].parts), r as usize))
                .filter(|(e, _)| *e > 0.0)
                .collect();
            residents.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            // A second pass catches jobs whose demotion needed room that a later demotion freed.
            'passes: for _ in 0..2 {
                for &(_, r) in &residents {
                    if excess(state, &grants[r].parts) <= 0.0 {
                        continue;
                    }
                    if demote(catalog, state, requests, grants, r) {
                        demotions += 1;
                    }
                    if state.fits(si, k, c, m) {
                        break 'passes;
                    }
                }
            }
        }
        if state.fits(si, k, c, m) {
            parts.push(Part {
                server: s,
                gpus: k,
                cpus: c,
                memory_gib: m,
            });
            left -= k;
        }
        if left == 0 {
            break;
        }
    }
    if left > 0 {
        return None;
    }
    commit(state, slot, &parts);
    grants[slot].parts = parts;
    Some(demotions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::catalog::JobModel;
    use crate::sched::cluster::ClusterConfig;

    fn catalog() -> Catalog {
        Catalog::new(vec![JobModel {
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
        .unwrap()
    }

    #[test]
    fn demotion_takes_the_most_over_provisioned_first_and_only_as_needed() {
        let c = catalog();
        // 4 GPUs, 16 cores, 400 GiB: GPU-proportional is 4 cores and 100 GiB.
        let cfg = ClusterConfig {
            servers: vec![ServerSpec {
                gpus: 4,
                cpus: 16.0,
                memory_gib: 400.0,
            }],
        };
        let mut state = ClusterState::new(&cfg);
        let reqs = vec![Request { model: 0, gpus: 1 }; 4];
        let mut grants = vec![Grant::default(); 4];
        for (slot, cpus) in [(0usize, 5.0), (1, 8.0), (2, 1.0)] {
            let share = Share::PerGpu {
                cpus,
                memory_gib: 100.0,
            };
            let parts = find(&state, 1, share).unwrap();
            commit(&mut state, slot, &parts);
            grants[slot].parts = parts;
        }
        assert!(
            find(&state, 1, Share::Proportional).is_none(),
            "2 cores are free"
        );
        let d = place_with_demotion(&c, &mut state, &reqs, &mut grants, 3, Share::Proportional)
            .unwrap();
        assert_eq!(d, 1);
        assert!(grants[1].demoted && !grants[0].demoted && !grants[2].demoted);
        assert_eq!(grants[1].parts[0].cpus, 4.0);
        assert_eq!(grants[3].parts[0].cpus, 4.0);
        assert!(state.consistent());
        assert!((state.free_cpus[0] - 2.0).abs() < 1e-9);
    }

    #[test]
    fn wide_jobs_spread_with_proportional_shares() {
        let cfg = ClusterConfig::uniform(2, 8, 24.0, 500.0);
        let mut state = ClusterState::new(&cfg);
        let p = find(&state, 6, Share::Proportional).unwrap();
        commit(&mut state, 0, &p);
        // 2 + 8 free GPUs: a 4-GPU job fits whole on the second server, a 10-GPU one spreads.
        assert_eq!(find(&state, 4, Share::Proportional).unwrap().len(), 1);
        let spread = find(&state, 10, Share::Proportional).unwrap();
        assert_eq!(spread.iter().map(|p| p.gpus).sum::<u32>(), 10);
        assert!(spread
            .iter()
            .all(|p| (p.cpus - 3.0 * p.gpus as f64).abs() < 1e-9));
        assert!(find(&state, 11, Share::Proportional).is_none());
    }
}
