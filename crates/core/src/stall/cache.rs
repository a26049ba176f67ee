//! The hit ratio a cache gives over a shuffled epoch: a fixed-subset application cache (MinIO), and the
//! OS page cache, simulated on the dataset's real item sizes as LRU and as the kernel's active and inactive
//! lists, with hits told apart by part of the epoch (docs/profile-format.md, "The model behind the matrix").

use super::EPOCH_PARTS;
use std::collections::HashMap;

/// The hit ratio of a cache of `cache_bytes` over a dataset of `dataset_bytes` that keeps a fixed subset.
pub fn minio_hit_ratio(cache_bytes: f64, dataset_bytes: f64) -> f64 {
    if dataset_bytes <= 0.0 {
        return 1.0;
    }
    (cache_bytes / dataset_bytes).clamp(0.0, 1.0)
}

/// A cache's steady hit ratio under per-epoch shuffling: over whole epochs, and by part of the epoch
/// ([`EPOCH_PARTS`], in reading order). Under shuffling a cache hits early in an epoch (what the end of
/// the last one read is still there) and misses late.
#[derive(Debug, Clone, PartialEq)]
pub struct EpochHits {
    /// Over whole epochs.
    pub mean: f64,
    /// Per part of the epoch, first to last.
    pub by_part: Vec<f64>,
}

impl EpochHits {
    /// The same ratio `h` throughout the epoch (an empty or a full cache, or a fixed subset).
    pub fn flat(h: f64) -> Self {
        EpochHits {
            mean: h,
            by_part: vec![h; EPOCH_PARTS],
        }
    }
}

/// Steady-state hit ratios of a cache under per-epoch random permutations of items of the given sizes,
/// by simulation: LRU ([`CacheSim::lru`]) and the kernel's two page-cache lists
/// ([`CacheSim::two_lists`]). Results are memoized per capacity (and scale).
#[derive(Debug, Clone)]
pub struct CacheSim {
    sizes: Vec<u64>,
    total: u64,
    seed: u64,
    /// Keyed by capacity and, for the two lists, the scale in steps of 1e-4.
    memo: HashMap<(u64, Option<u64>), EpochHits>,
}

/// Epochs LRU is simulated before counting (the first one only fills the cache).
const LRU_WARM_EPOCHS: usize = 1;
/// Epochs counted.
const LRU_COUNT_EPOCHS: usize = 3;
/// Epochs the two lists are simulated before counting: they settle over a few epochs, not one.
const TWO_LIST_WARM_EPOCHS: usize = 3;
/// Epochs counted.
const TWO_LIST_COUNT_EPOCHS: usize = 3;

impl CacheSim {
    /// A simulator for items of `sizes` bytes.
    pub fn new(sizes: Vec<u64>, seed: u64) -> Self {
        let total = sizes.iter().sum();
        CacheSim {
            sizes,
            total,
            seed,
            memo: HashMap::new(),
        }
    }

    /// Total bytes of all items.
    pub fn dataset_bytes(&self) -> u64 {
        self.total
    }

    /// LRU's hit ratio (by samples) at `cache_bytes` of cache.
    pub fn lru(&mut self, cache_bytes: u64) -> f64 {
        self.memoized(cache_bytes, None, simulate_lru).mean
    }

    /// The kernel's two lists' hit ratio (by samples) at `cache_bytes` of cache, the active list's share
    /// scaled by `scale` (docs/profile-format.md, "The page-cache hit curve"). A read miss enters the
    /// inactive list; a hit there promotes the item to the active list; reclaim keeps the active list
    /// within its share ([`active_share`]) by moving its oldest items to the inactive list, and evicts
    /// the inactive list's oldest; an item read again soon after its eviction (within the active list's
    /// size of evictions since) goes straight to the active list (refault detection).
    pub fn two_lists(&mut self, cache_bytes: u64, scale: f64) -> f64 {
        self.two_lists_by_part(cache_bytes, scale).mean
    }

    /// [`CacheSim::two_lists`] over whole epochs and by part of the epoch.
    pub fn two_lists_by_part(&mut self, cache_bytes: u64, scale: f64) -> EpochHits {
        let share = active_share(cache_bytes, scale);
        let key = Some((scale.max(0.0) * 1e4).round() as u64);
        self.memoized(cache_bytes, key, |sizes, capacity, seed| {
            simulate_two_lists(sizes, capacity, share, seed)
        })
    }

    fn memoized(
        &mut self,
        cache_bytes: u64,
        key: Option<u64>,
        simulate: impl FnOnce(&[u64], u64, u64) -> EpochHits,
    ) -> EpochHits {
        if cache_bytes >= self.total {
            return EpochHits::flat(1.0);
        }
        if cache_bytes == 0 || self.sizes.is_empty() {
            return EpochHits::flat(0.0);
        }
        self.memo
            .entry((cache_bytes, key))
            .or_insert_with(|| simulate(&self.sizes, cache_bytes, self.seed))
            .clone()
    }

    /// The `scale` that fits measured `(cache_bytes, hit ratio)` points best (least squares), searched
    /// over active shares of 0 to 0.95 at one GiB's ratio and refined; 1 (the kernel's own ratio) when
    /// there are no points.
    pub fn fit_scale(&mut self, points: &[(u64, f64)]) -> f64 {
        if points.is_empty() {
            return 1.0;
        }
        let scale_of = |share: f64| share / (1.0 - share);
        let err = |sim: &mut Self, share: f64| {
            points
                .iter()
                .map(|&(c, h)| (sim.two_lists(c, scale_of(share)) - h).powi(2))
                .sum::<f64>()
        };
        let mut best = (f64::INFINITY, 0.0);
        for k in 0..=38 {
            let share = 0.025 * k as f64;
            let e = err(self, share);
            if e < best.0 {
                best = (e, share);
            }
        }
        let centre = best.1;
        for k in -5..=5 {
            let share = (centre + 0.005 * k as f64).clamp(0.0, 0.95);
            let e = err(self, share);
            if e < best.0 {
                best = (e, share);
            }
        }
        scale_of(best.1)
    }
}

const NIL: u32 = u32::MAX;

/// LRU is one list of [`TwoLists`]: a hit moves the item to the head, a miss enters there, and the tail
/// is evicted while the cache is over capacity.
fn simulate_lru(sizes: &[u64], capacity: u64, seed: u64) -> EpochHits {
    let mut list = TwoLists::new(sizes.len());
    let epochs = (LRU_WARM_EPOCHS, LRU_COUNT_EPOCHS);
    hit_ratio_under_shuffling(sizes.len(), seed, epochs, |i| {
        let size = sizes[i];
        let hit = list.on[i] == INACTIVE;
        if hit {
            list.unlink(i, size);
        } else if size > capacity {
            return false;
        }
        list.push(INACTIVE, i, size);
        while list.bytes[INACTIVE as usize] > capacity {
            let t = list.tail[INACTIVE as usize] as usize;
            list.unlink(t, sizes[t]);
        }
        hit
    })
}

/// The share of accesses `access` (given an item, says whether it hit) calls hits over `epochs.1`
/// epochs of a fresh random permutation of `n` items each, after `epochs.0` epochs not counted: over
/// whole epochs and by part of the epoch.
fn hit_ratio_under_shuffling(
    n: usize,
    seed: u64,
    epochs: (usize, usize),
    mut access: impl FnMut(usize) -> bool,
) -> EpochHits {
    use rand::seq::SliceRandom;
    use rand::SeedableRng;
    let mut order: Vec<u32> = (0..n as u32).collect();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut hits = [0u64; EPOCH_PARTS];
    let mut lookups = [0u64; EPOCH_PARTS];
    for epoch in 0..epochs.0 + epochs.1 {
        order.shuffle(&mut rng);
        let counting = epoch >= epochs.0;
        for (at, &i) in order.iter().enumerate() {
            let hit = access(i as usize);
            if counting {
                let part = at * EPOCH_PARTS / n;
                lookups[part] += 1;
                hits[part] += u64::from(hit);
            }
        }
    }
    let (all_hits, all_lookups) = (hits.iter().sum::<u64>(), lookups.iter().sum::<u64>());
    let mean = if all_lookups == 0 {
        0.0
    } else {
        all_hits as f64 / all_lookups as f64
    };
    // A part no item fell in (fewer items than parts) reads as the epoch's mean.
    let by_part = hits
        .iter()
        .zip(&lookups)
        .map(|(&h, &l)| if l == 0 { mean } else { h as f64 / l as f64 })
        .collect();
    EpochHits { mean, by_part }
}

/// The active list's share of the page cache the kernel keeps at `cache_bytes` of file pages, times
/// `scale`: the kernel deactivates active pages while active exceeds `ratio` times inactive, where
/// `ratio` is 1 below 1 GiB of file pages and the integer square root of 10 x the whole GiB above
/// (Linux `mm/vmscan.c`, `inactive_is_low`), so a large cache keeps most of itself on the active list.
/// `scale` is what a calibration fits (docs/profile-format.md, "The page-cache hit curve").
pub fn active_share(cache_bytes: u64, scale: f64) -> f64 {
    let gib = cache_bytes >> 30;
    let ratio = if gib == 0 {
        1.0
    } else {
        ((10 * gib) as f64).sqrt().floor()
    };
    let r = scale.max(0.0) * ratio;
    r / (1.0 + r)
}

/// Two intrusive doubly linked lists over item indices, newest at the head: O(1) per move.
struct TwoLists {
    prev: Vec<u32>,
    next: Vec<u32>,
    on: Vec<u8>,
    head: [u32; 2],
    tail: [u32; 2],
    bytes: [u64; 2],
}

const INACTIVE: u8 = 0;
const ACTIVE: u8 = 1;
const OFF: u8 = 2;

impl TwoLists {
    fn new(n: usize) -> Self {
        TwoLists {
            prev: vec![NIL; n],
            next: vec![NIL; n],
            on: vec![OFF; n],
            head: [NIL; 2],
            tail: [NIL; 2],
            bytes: [0; 2],
        }
    }

    fn unlink(&mut self, i: usize, size: u64) {
        let l = self.on[i] as usize;
        let (p, nx) = (self.prev[i], self.next[i]);
        if p != NIL {
            self.next[p as usize] = nx;
        } else {
            self.head[l] = nx;
        }
        if nx != NIL {
            self.prev[nx as usize] = p;
        } else {
            self.tail[l] = p;
        }
        self.bytes[l] -= size;
        self.on[i] = OFF;
    }

    fn push(&mut self, list: u8, i: usize, size: u64) {
        let l = list as usize;
        self.prev[i] = NIL;
        self.next[i] = self.head[l];
        if self.head[l] != NIL {
            self.prev[self.head[l] as usize] = i as u32;
        }
        self.head[l] = i as u32;
        if self.tail[l] == NIL {
            self.tail[l] = i as u32;
        }
        self.bytes[l] += size;
        self.on[i] = list;
    }
}

fn simulate_two_lists(sizes: &[u64], capacity: u64, share: f64, seed: u64) -> EpochHits {
    let mut lists = TwoLists::new(sizes.len());
    // Eviction age (bytes evicted or activated so far) at each item's eviction: the shadow entry.
    let mut shadow: Vec<Option<u64>> = vec![None; sizes.len()];
    let mut age = 0u64;
    let epochs = (TWO_LIST_WARM_EPOCHS, TWO_LIST_COUNT_EPOCHS);
    hit_ratio_under_shuffling(sizes.len(), seed, epochs, |i| {
        let size = sizes[i];
        match lists.on[i] {
            ACTIVE => return true,
            INACTIVE => {
                lists.unlink(i, size);
                lists.push(ACTIVE, i, size);
                age += size;
                return true;
            }
            _ => {}
        }
        if size > capacity {
            return false;
        }
        let refault = shadow[i]
            .take()
            .is_some_and(|at| age - at <= lists.bytes[ACTIVE as usize]);
        if refault {
            lists.push(ACTIVE, i, size);
            age += size;
        } else {
            lists.push(INACTIVE, i, size);
        }
        while lists.bytes[0] + lists.bytes[1] > capacity {
            let total = (lists.bytes[0] + lists.bytes[1]) as f64;
            while lists.tail[ACTIVE as usize] != NIL
                && (lists.bytes[ACTIVE as usize] as f64 > share * total
                    || lists.tail[INACTIVE as usize] == NIL)
            {
                let t = lists.tail[ACTIVE as usize] as usize;
                lists.unlink(t, sizes[t]);
                lists.push(INACTIVE, t, sizes[t]);
            }
            let t = lists.tail[INACTIVE as usize] as usize;
            lists.unlink(t, sizes[t]);
            shadow[t] = Some(age);
            age += sizes[t];
        }
        false
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_under_shuffling_thrashes_far_below_minio() {
        // Measured on this project's 2-core machine: 20,000 equal items gave 0.035, 0.154, 0.403 at 25/50/75% cached.
        let mut sim = CacheSim::new(vec![1000; 20_000], 1);
        let d = sim.dataset_bytes() as f64;
        for (frac, want) in [(0.25, 0.035), (0.5, 0.154), (0.75, 0.403)] {
            let h = sim.lru((frac * d) as u64);
            assert!((h - want).abs() < 0.02, "{frac}: {h} vs {want}");
            assert!(h < minio_hit_ratio(frac * d, d));
        }
        assert_eq!(sim.lru(0), 0.0);
        assert_eq!(sim.lru(d as u64), 1.0);
    }

    #[test]
    fn lru_hit_ratio_grows_with_the_cache() {
        let sizes: Vec<u64> = (0..3000).map(|i| 50_000 + (i * 7919 % 120_000)).collect();
        let mut sim = CacheSim::new(sizes, 3);
        let d = sim.dataset_bytes();
        let hs: Vec<f64> = (0..=10).map(|k| sim.lru(d * k / 10)).collect();
        for w in hs.windows(2) {
            assert!(w[1] + 0.01 >= w[0], "{hs:?}");
        }
    }

    #[test]
    fn hits_come_early_in_an_epoch_and_average_to_the_mean() {
        let mut sim = CacheSim::new(vec![1000; 4000], 5);
        let hits = sim.two_lists_by_part(2_400_000, 1.0);
        assert_eq!(hits.by_part.len(), EPOCH_PARTS);
        let first = hits.by_part[0];
        let last = hits.by_part[EPOCH_PARTS - 1];
        assert!(first > 2.0 * last, "{first} then {last}");
        let mean = hits.by_part.iter().sum::<f64>() / EPOCH_PARTS as f64;
        assert!(
            (mean - hits.mean).abs() < 1e-9,
            "{mean} against {}",
            hits.mean
        );
        assert_eq!(sim.two_lists(2_400_000, 1.0), hits.mean);
        assert_eq!(sim.two_lists_by_part(0, 1.0), EpochHits::flat(0.0));
    }

    #[test]
    fn the_two_lists_keep_more_than_lru_and_less_than_a_fixed_subset() {
        // 2,000 equal items, 25/50/75% cached, the kernel's own ratio (equal lists below 1 GiB).
        let mut two = CacheSim::new(vec![1 << 20; 2000], 1);
        let mut last = 0.0;
        for pct in [25u64, 50, 75] {
            let c = 2000 * (1 << 20) * pct / 100;
            let h = two.two_lists(c, 1.0);
            assert!(h > two.lru(c) + 0.02, "{pct}%: {h}");
            assert!(h < pct as f64 / 100.0 - 0.1, "{pct}%: {h}");
            assert!(h > last);
            last = h;
        }
        // A larger active list keeps more; none at all is LRU within sampling noise.
        let c = 1000 << 20;
        assert!(two.two_lists(c, 1.5) > two.two_lists(c, 1.0));
        assert!((two.two_lists(c, 0.0) - two.lru(c)).abs() < 0.03);
    }

    #[test]
    fn the_active_list_grows_with_the_cache_as_the_kernel_sets_it() {
        assert_eq!(active_share(100 << 20, 1.0), 0.5);
        assert_eq!(active_share(100 << 20, 0.0), 0.0);
        // 10 GiB: ratio sqrt(100) = 10.
        assert!((active_share(10 << 30, 1.0) - 10.0 / 11.0).abs() < 1e-12);
        assert!((active_share(100 << 20, 1.5) - 0.6).abs() < 1e-12);
    }

    #[test]
    fn the_active_list_scale_is_fitted_to_a_measured_point() {
        let mut two = CacheSim::new(vec![1 << 20; 2000], 1);
        let c = 1200 << 20;
        let measured = two.two_lists(c, 1.5);
        let scale = two.fit_scale(&[(c, measured)]);
        assert!((scale / (1.0 + scale) - 0.6).abs() <= 0.03, "{scale}");
        assert_eq!(two.fit_scale(&[]), 1.0);
        // A point below anything the lists keep fits (next to) no active list.
        assert!(two.fit_scale(&[(c, 0.0)]) < 0.05);
    }
}
