//! Whether a trial got the CPU it was granted. On a shared host another tenant's work can take half of a
//! trial's cores and the trial measures half the throughput; nothing in the workload's own progress says
//! so. Readings of the host (per-core CPU time from `/proc/stat`, pressure stall information) and of the
//! trial's tasks (time they waited to run, from each task's `schedstat`), taken beside the domain's own
//! statistics, tell a trial that lacked CPU because others used it from one that simply needed less.
//! docs/profile-format.md ("Disturbed trials") states the rule.

use crate::format::trial::computed;
use crate::format::trial::{Disturbance, Pressure};
use crate::isolate::DomainStats;
use procfs::{Current, CurrentSI};

/// A trial lacked CPU when it got less than this fraction of its grant...
const SHORTFALL_FRACTION: f64 = 0.10;
/// ...and its tasks waited to run for at least this fraction of what it lacked (so it wanted the CPU)...
const WAITED_FRACTION: f64 = 0.20;
/// ...and other work on its cores used at least this fraction of what it lacked (so others took it).
const OTHERS_FRACTION: f64 = 0.50;
/// A trial whose core ran, by the speed probe, below this fraction of its fastest reading on average
/// was slowed by the machine under it (another tenant of a virtual machine's physical core).
pub const SLOW_CORE: f64 = 0.85;

/// Host-side figures at one moment, for the cores of one domain.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostReading {
    /// CPU time on the domain's cores, busy (user, nice, system, irq, softirq), seconds.
    pub busy_s: f64,
    /// Time stolen from those cores by the hypervisor, seconds.
    pub steal_s: f64,
    /// Pressure stall totals (`some`), microseconds: CPU, I/O and memory, where the kernel has PSI.
    pub pressure_us: Option<[u64; 3]>,
    /// Time the domain's tasks spent runnable but not running, nanoseconds (sum over its threads).
    pub waited_ns: Option<u64>,
}

impl HostReading {
    /// Reads the host's counters for `cores` and the run delay of every thread of `pids`.
    pub fn read(cores: &[usize], pids: &[i32]) -> HostReading {
        let mut r = HostReading::default();
        if let Ok(stat) = procfs::KernelStats::current() {
            for c in cores {
                if let Some(t) = stat.cpu_time.get(*c) {
                    let tps = procfs::ticks_per_second() as f64;
                    let busy =
                        t.user + t.nice + t.system + t.irq.unwrap_or(0) + t.softirq.unwrap_or(0);
                    r.busy_s += busy as f64 / tps;
                    r.steal_s += t.steal.unwrap_or(0) as f64 / tps;
                }
            }
        }
        r.pressure_us = match (
            procfs::CpuPressure::current(),
            procfs::IoPressure::current(),
            procfs::MemoryPressure::current(),
        ) {
            (Ok(c), Ok(i), Ok(m)) => Some([c.some.total, i.some.total, m.some.total]),
            _ => None,
        };
        r.waited_ns = waited_ns(pids);
        r
    }
}

/// Total run delay of every thread of `pids`, nanoseconds; `None` when no task could be read.
fn waited_ns(pids: &[i32]) -> Option<u64> {
    let mut sum = None;
    for &pid in pids {
        let Ok(tasks) = procfs::process::Process::new(pid).and_then(|p| p.tasks()) else {
            continue;
        };
        for task in tasks.flatten() {
            if let Ok(s) = task.schedstat() {
                *sum.get_or_insert(0) += s.run_delay;
            }
        }
    }
    sum
}

/// One reading of a domain and of the host, at `t_s` seconds into the trial.
#[derive(Debug, Clone, Default)]
pub struct Reading {
    /// Seconds since the workload started.
    pub t_s: f64,
    /// The domain's statistics.
    pub domain: DomainStats,
    /// The host's.
    pub host: HostReading,
}

/// Judges the window between two readings of a domain granted `granted_cores` on `n_cores` cores;
/// `speed` holds the speed probe's readings `(t_s, ops per CPU-second)` over the whole trial.
pub fn assess(
    granted_cores: f64,
    n_cores: usize,
    a: &Reading,
    b: &Reading,
    speed: &[(f64, f64)],
) -> Disturbance {
    let dt = (b.t_s - a.t_s).max(1e-9);
    let per_s = |x: f64| (x / dt).max(0.0);
    let got = per_s(b.domain.cpu_seconds - a.domain.cpu_seconds);
    let steal = per_s(b.host.steal_s - a.host.steal_s);
    // The domain runs only on its cores, so what else was busy there is everyone else's.
    let others = (per_s(b.host.busy_s - a.host.busy_s) - got).max(0.0) + steal;
    let waited = match (a.host.waited_ns, b.host.waited_ns) {
        (Some(x), Some(y)) => Some(per_s(y.saturating_sub(x) as f64 / 1e9)),
        _ => None,
    };
    let delta = |f: fn(&DomainStats) -> Option<u64>| match (f(&a.domain), f(&b.domain)) {
        (Some(x), Some(y)) => Some(y.saturating_sub(x)),
        _ => None,
    };
    let throttled = delta(|s| s.throttled_periods);
    let enclosing = delta(|s| s.enclosing_throttled_periods);
    let pressure = |x: Option<[u64; 3]>, y: Option<[u64; 3]>| {
        let (x, y) = (x?, y?);
        let f = |i: usize| (y[i].saturating_sub(x[i]) as f64 / 1e6 / dt).clamp(0.0, 1.0);
        Some(Pressure {
            cpu: f(0),
            io: f(1),
            memory: f(2),
        })
    };
    let host_pressure = pressure(a.host.pressure_us, b.host.pressure_us);
    let domain_pressure = pressure(a.domain.pressure_us, b.domain.pressure_us);
    // Where its threads' run delay cannot be read, the domain's own CPU pressure (cgroup v2) bounds
    // it from below: some thread waited for that fraction of the window.
    let waited = waited.or(domain_pressure.map(|p| p.cpu));

    let shortfall = granted_cores - got;
    let lacked = shortfall > (SHORTFALL_FRACTION * granted_cores).max(0.05);
    let wanted = waited.is_none_or(|w| w >= WAITED_FRACTION * shortfall);
    let crowded = others >= (OTHERS_FRACTION * shortfall).max(0.05 * n_cores as f64);
    let squeezed = enclosing.is_some_and(|n| n > 0);
    let in_window: Vec<f64> = speed
        .iter()
        .filter(|(t, _)| *t >= a.t_s && *t <= b.t_s)
        .map(|(_, v)| *v)
        .collect();
    let core_speed =
        (!in_window.is_empty()).then(|| in_window.iter().sum::<f64>() / in_window.len() as f64);
    let core_best = speed.iter().map(|(_, v)| *v).reduce(f64::max);
    let slow = match (core_speed, core_best) {
        (Some(s), Some(b)) if computed(got, granted_cores) => {
            (s < SLOW_CORE * b).then(|| 1.0 - s / b)
        }
        _ => None,
    };
    let contended = lacked && wanted && (crowded || squeezed);
    let disturbed = contended || slow.is_some();
    let reason = disturbed.then(|| {
        if let (Some(slowdown), false) = (slow, contended) {
            return format!(
                "its core ran {:.0}% below its fastest during the trial, by the speed probe, though no other work showed on it (the machine under this one is busy)",
                100.0 * slowdown
            );
        }
        let mut why = format!("got {got:.2} of {granted_cores} cores");
        if crowded {
            why.push_str(&format!(
                " while other work used {others:.2} cores of its cpuset"
            ));
            if steal >= 0.05 {
                why.push_str(&format!(" ({steal:.2} stolen by the hypervisor)"));
            }
        }
        if squeezed {
            why.push_str(&format!(
                "{} a cgroup above synergy's was throttled {} times (a CPU quota on whatever runs synergy)",
                if crowded { " and" } else { " because" },
                enclosing.unwrap_or(0)
            ));
        }
        if let Some(w) = waited {
            why.push_str(&format!("; its threads waited to run {w:.2} cores' worth"));
        }
        if let Some(p) = domain_pressure.filter(|p| p.cpu > 0.0) {
            why.push_str(&format!(
                " (its cgroup's CPU pressure: some thread waited {:.0}% of the time)",
                100.0 * p.cpu
            ));
        }
        why
    });
    Disturbance {
        disturbed,
        reason,
        granted_cores,
        got_cores: got,
        other_cores: others,
        steal_cores: steal,
        waited_cores: waited,
        throttled_periods: throttled,
        enclosing_throttled_periods: enclosing,
        host_pressure,
        domain_pressure,
        core_ops_per_cpu_s: core_speed,
        core_best_ops_per_cpu_s: core_best,
        window_s: dt,
        slowed_alone: slow.is_some() && !contended,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(t: f64, own_cpu: f64, busy: f64, waited_s: Option<f64>, enclosing: u64) -> Reading {
        Reading {
            t_s: t,
            domain: DomainStats {
                cpu_seconds: own_cpu,
                enclosing_throttled_periods: Some(enclosing),
                ..Default::default()
            },
            host: HostReading {
                busy_s: busy,
                steal_s: 0.0,
                pressure_us: None,
                waited_ns: waited_s.map(|w| (w * 1e9) as u64),
            },
        }
    }

    #[test]
    fn a_hog_on_the_trials_core_disturbs_it() {
        // One core for 10 s: the trial got 5 s, the host's core was busy all 10, the trial waited 5 s.
        let d = assess(
            1.0,
            1,
            &reading(0.0, 0.0, 0.0, Some(0.0), 0),
            &reading(10.0, 5.0, 10.0, Some(5.0), 0),
            &[],
        );
        assert!(d.disturbed, "{d:?}");
        assert!((d.other_cores - 0.5).abs() < 1e-9);
        assert!(d.reason.unwrap().contains("other work"));
    }

    #[test]
    fn a_trial_that_needs_less_than_its_grant_is_not_disturbed() {
        // Two cores granted, 0.3 used, a hog busy on the rest, but the trial hardly waited to run.
        let d = assess(
            2.0,
            2,
            &reading(0.0, 0.0, 0.0, Some(0.0), 0),
            &reading(10.0, 3.0, 20.0, Some(0.1), 0),
            &[],
        );
        assert!(!d.disturbed, "{d:?}");
        // Alone on its cores, a trial that used half its grant is not disturbed either.
        let d = assess(
            2.0,
            2,
            &reading(0.0, 0.0, 0.0, Some(0.0), 0),
            &reading(10.0, 10.0, 10.0, Some(8.0), 0),
            &[],
        );
        assert!(!d.disturbed, "{d:?}");
    }

    #[test]
    fn a_throttled_enclosing_cgroup_disturbs_a_trial_that_wanted_more() {
        let d = assess(
            2.0,
            2,
            &reading(0.0, 0.0, 0.0, Some(0.0), 7),
            &reading(10.0, 10.0, 10.0, Some(9.0), 107),
            &[],
        );
        assert!(d.disturbed, "{d:?}");
        assert!(d.reason.unwrap().contains("throttled 100 times"));
    }

    #[test]
    fn a_trial_that_got_its_grant_is_never_disturbed() {
        let d = assess(
            0.5,
            1,
            &reading(0.0, 0.0, 0.0, Some(0.0), 0),
            &reading(10.0, 5.0, 10.0, Some(5.0), 0),
            &[],
        );
        assert!(!d.disturbed, "{d:?}");
    }

    #[test]
    fn this_host_can_be_read() {
        let me = std::process::id() as i32;
        let r = HostReading::read(&[0], &[me]);
        assert!(r.busy_s > 0.0);
        assert!(
            r.waited_ns.is_some(),
            "this test's own threads have a schedstat"
        );
    }

    #[test]
    fn a_core_that_ran_slow_disturbs_the_trial() {
        let quiet = [(1.0, 100.0), (5.0, 98.0), (9.0, 97.0)];
        let slow = [(0.5, 100.0), (3.0, 70.0), (6.0, 72.0), (9.0, 75.0)];
        let a = reading(0.0, 0.0, 0.0, Some(0.0), 0);
        let b = reading(10.0, 10.0, 10.0, Some(0.0), 0);
        assert!(!assess(1.0, 1, &a, &b, &quiet).disturbed);
        let d = assess(1.0, 1, &a, &b, &slow);
        assert!(d.disturbed, "{d:?}");
        assert!(d.reason.unwrap().contains("below its fastest"));
        assert!(d.slowed_alone, "nothing else showed on its core");
        assert_eq!(d.core_best_ops_per_cpu_s, Some(100.0));
        // A hog beside it as well: other work disturbed it, not its core's speed alone.
        let hog = reading(10.0, 5.0, 10.0, Some(5.0), 0);
        let d = assess(1.0, 1, &a, &hog, &slow);
        assert!(d.disturbed && !d.slowed_alone, "{d:?}");
        assert!(d.reason.unwrap().contains("other work"));
        // A trial that hardly used its core (0.05 of 1) was waiting on something else.
        let idle = reading(10.0, 0.5, 0.5, Some(0.0), 0);
        let d = assess(1.0, 1, &a, &idle, &slow);
        assert!(!d.disturbed && !d.computed(), "{d:?}");
    }
}
