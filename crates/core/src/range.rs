//! The range of every magnitude synergy takes, one per kind (docs/architecture.md §7, "Ranges"): times,
//! work, rates, counts and memory. Each bound is far beyond any real cluster's, and close enough that
//! arithmetic on the largest accepted values stays exact where it must (a 300-digit time absorbs every
//! job's length; 2^64 - 1 iterations never finish): a value outside is a corrupt or mistaken input,
//! refused by name where a flag or a file gives it, dropped and counted where an import reads it.

/// The longest time, seconds, of anything: an arrival, a duration, a round, a window (about 31.7 years).
pub const MAX_SECONDS: f64 = 1e9;

/// The most work of one job: iterations or samples (2^50, about 10^15).
pub const MAX_WORK: u64 = 1 << 50;

/// The fastest rate any record may say a job made, samples per second: a thousand times the fastest
/// published training rates (ResNet-18 on a DGX is about 10^4 images/s).
pub const MAX_SAMPLES_PER_S: f64 = 1e9;

/// The most GPUs of one server.
pub const MAX_GPUS_PER_SERVER: u64 = 1024;

/// Whether `s` is a time synergy takes: a finite number of seconds in [0, [`MAX_SECONDS`]].
pub fn is_seconds(s: f64) -> bool {
    s.is_finite() && (0.0..=MAX_SECONDS).contains(&s)
}

/// What [`is_seconds`] asks, for messages.
pub const SECONDS: &str = "a number of seconds from 0 to 1e9 (about 31.7 years)";

/// Whether `n` is an amount of work synergy takes: 1 to [`MAX_WORK`].
pub fn is_work(n: u64) -> bool {
    (1..=MAX_WORK).contains(&n)
}

/// What [`is_work`] asks, for messages.
pub const WORK: &str = "a whole number from 1 to 2^50";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bounds_hold_their_edges() {
        assert!(is_seconds(0.0) && is_seconds(MAX_SECONDS));
        assert!(!is_seconds(1e300) && !is_seconds(-1.0) && !is_seconds(f64::NAN));
        assert!(is_work(1) && is_work(MAX_WORK));
        assert!(!is_work(0) && !is_work(u64::MAX));
        // The largest time plus a millisecond still changes: no absorption.
        const { assert!(MAX_SECONDS + 1e-3 > MAX_SECONDS) };
    }
}
