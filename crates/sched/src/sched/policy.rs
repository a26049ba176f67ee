//! The four job orders of docs/architecture.md §5.3: FIFO, SRTF, LAS and finish-time fairness.

use super::{JobState, Policy};

/// First in, first out: arrival time.
#[derive(Debug, Clone, Copy, Default)]
pub struct Fifo;

impl Policy for Fifo {
    fn name(&self) -> &'static str {
        "fifo"
    }
    fn key(&self, job: &JobState, _now_s: f64) -> f64 {
        job.arrival_s
    }
    fn starvation_guard(&self) -> bool {
        false
    }
    fn is_arrival_order(&self) -> bool {
        true
    }
}

/// Shortest remaining time first, at GPU-proportional speed.
#[derive(Debug, Clone, Copy, Default)]
pub struct Srtf;

impl Policy for Srtf {
    fn name(&self) -> &'static str {
        "srtf"
    }
    fn key(&self, job: &JobState, _now_s: f64) -> f64 {
        job.remaining_s()
    }
}

/// Least attained service first: seconds run times GPUs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Las;

impl Policy for Las {
    fn name(&self) -> &'static str {
        "las"
    }
    fn key(&self, job: &JobState, _now_s: f64) -> f64 {
        job.attained_s * job.gpus as f64
    }
}

/// Finish-time fairness: rho = (now - arrival + remaining) / isolated duration, highest first.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ftf;

impl Policy for Ftf {
    fn name(&self) -> &'static str {
        "ftf"
    }
    fn key(&self, job: &JobState, now_s: f64) -> f64 {
        // Negated: the most-wronged job (largest rho) must sort first.
        -((now_s - job.arrival_s + job.remaining_s()) / job.isolated_s().max(1e-9))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(arrival_s: f64, remaining: u64, attained_s: f64) -> JobState {
        JobState {
            id: 0,
            model: 0,
            gpus: 1,
            arrival_s,
            iter_time_s: 1.0,
            total_iters: 100,
            remaining_iters: remaining,
            attained_s,
            first_start_s: None,
            last_run_s: arrival_s,
            starved: false,
            demotions: 0,
            in_window: true,
        }
    }

    #[test]
    fn keys_order_as_published() {
        let (a, b) = (job(0.0, 90, 10.0), job(5.0, 20, 80.0));
        assert!(Fifo.key(&a, 10.0) < Fifo.key(&b, 10.0));
        assert!(Srtf.key(&b, 10.0) < Srtf.key(&a, 10.0));
        assert!(Las.key(&a, 10.0) < Las.key(&b, 10.0));
        // a: (10 + 90) / 100 = 1.0; b: (5 + 20) / 100 = 0.25: a is more wronged and goes first.
        assert!(Ftf.key(&a, 10.0) < Ftf.key(&b, 10.0));
    }
}
