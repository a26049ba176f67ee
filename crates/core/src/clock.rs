//! The clocks synergy reads besides `Instant`: a thread's own CPU time (what a rate per CPU-second
//! divides by) and the wall clock as Unix seconds (what state files record).

/// CPU time of the calling thread, seconds (user and system), from `CLOCK_THREAD_CPUTIME_ID`.
pub fn thread_cpu_s() -> f64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map(|t| t.tv_sec() as f64 + t.tv_nsec() as f64 * 1e-9)
        // Linux always has this clock; 0 only makes a rate meaningless, never a crash.
        .unwrap_or(0.0)
}

/// Seconds since the Unix epoch, now.
pub fn unix_now_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
