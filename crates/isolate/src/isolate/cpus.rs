//! Core lists shared by the backends: parsing the kernel's `0-3,6` syntax, reading the cores this process
//! may use, and choosing the cores a budget gets.

use super::{Budget, IsolateError};

/// CFS bandwidth period: 100 ms, long enough that the quota is not rounded away by scheduler ticks and short
/// enough that a quota-limited loader does not stall for visible stretches. A shorter one does not make
/// half-core trials repeat better: six alternated rounds of cached `image` trials at 0.5 cores varied by
/// 6.3% (coefficient of variation) at 100 ms, 13.0% at 20 ms and 9.4% at 10 ms, and at one core, with no
/// quota, by 8.4% (2026-12-05, a noisy host): the spread is the host's, not the quota's.
pub(crate) const CFS_PERIOD_US: u64 = 100_000;

/// Parses a kernel cpu list such as `0-3,6,8-9` (empty text is an empty list).
pub fn parse_list(text: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.trim().is_empty()) {
        let part = part.trim();
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                if b < a {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().ok()?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Some(out)
}

/// Formats cores as the comma-separated list cgroup files accept.
pub(crate) fn format_list(cores: &[usize]) -> String {
    cores
        .iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// The cores in this process's affinity mask.
pub fn own_affinity() -> Result<Vec<usize>, IsolateError> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set, and sched_getaffinity only writes into it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(IsolateError::Io {
                context: "reading this process's CPU affinity".into(),
                source: std::io::Error::last_os_error(),
            });
        }
        Ok((0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect())
    }
}

/// Pins every thread of process `pid` to `cores` (threads created later inherit the mask).
pub(crate) fn set_affinity_of(pid: i32, cores: &[usize]) -> Result<(), IsolateError> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET only sets bits in it.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cores {
            libc::CPU_SET(c, &mut set);
        }
        set
    };
    let tids: Vec<i32> = match std::fs::read_dir(format!("/proc/{pid}/task")) {
        Ok(entries) => entries
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect(),
        // Gone already: nothing to pin.
        Err(_) => return Ok(()),
    };
    for tid in tids {
        // SAFETY: plain syscall on a valid set of the right size.
        let rc =
            unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            // A thread that exited between listing and pinning is fine.
            if err.raw_os_error() != Some(libc::ESRCH) {
                return Err(IsolateError::Io {
                    context: format!("pinning thread {tid} of process {pid} to cores {cores:?}"),
                    source: err,
                });
            }
        }
    }
    Ok(())
}

/// The cores a budget gets out of `available` (sorted): its explicit list, or the lowest-numbered
/// `ceil(cpus)` cores. Rejects budgets the host cannot give, saying what it has.
pub(crate) fn choose(budget: &Budget, available: &[usize]) -> Result<Vec<usize>, IsolateError> {
    let cpus = budget.cpus.0;
    if !cpus.is_finite() || cpus <= 0.0 {
        return Err(IsolateError::Budget(format!(
            "a budget needs a positive number of CPU cores, got {cpus}"
        )));
    }
    let want = cpus.ceil() as usize;
    match &budget.cpu_list {
        Some(list) => {
            let mut cores = list.clone();
            cores.sort_unstable();
            cores.dedup();
            if cores.len() != list.len() {
                return Err(IsolateError::Budget(format!(
                    "cpu list {list:?} names a core twice"
                )));
            }
            if let Some(bad) = cores.iter().find(|c| !available.contains(c)) {
                return Err(IsolateError::Budget(format!(
                    "core {bad} is not available: this process may use cores {} ({} in all)",
                    format_list(available),
                    available.len()
                )));
            }
            if want > cores.len() {
                return Err(IsolateError::Budget(format!(
                    "{cpus} CPU cores do not fit in the {} cores listed ({})",
                    cores.len(),
                    format_list(&cores)
                )));
            }
            Ok(cores)
        }
        None => {
            if want > available.len() {
                return Err(IsolateError::Budget(format!(
                    "the budget asks for {cpus} CPU cores but only {} are available here (cores {})",
                    available.len(),
                    format_list(available)
                )));
            }
            Ok(available[..want].to_vec())
        }
    }
}

/// The CFS quota (µs per [`CFS_PERIOD_US`]) that holds `cpus` cores when the cpuset alone does not:
/// `None` when the cores already equal the budget.
pub(crate) fn quota_us(cpus: f64, cores: usize) -> Option<u64> {
    if cpus + 1e-9 >= cores as f64 {
        return None;
    }
    // The kernel refuses quotas under 1 ms.
    Some(((cpus * CFS_PERIOD_US as f64).round() as u64).max(1_000))
}

/// The `Cpus_allowed_list` of a process, as the kernel reports it (for tests that check pinning).
#[cfg(test)]
pub(crate) fn cpus_allowed(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|v| v.trim().to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::Cores;

    fn budget(cpus: f64, list: Option<Vec<usize>>) -> Budget {
        Budget {
            cpus: Cores(cpus),
            cpu_list: list,
            mem_limit: None,
            read_limit: None,
            count_reads_on: None,
        }
    }

    #[test]
    fn lists_parse_and_format() {
        assert_eq!(parse_list("0-3,6\n"), Some(vec![0, 1, 2, 3, 6]));
        assert_eq!(parse_list(""), Some(vec![]));
        assert_eq!(parse_list("3-1"), None);
        assert_eq!(format_list(&[0, 2, 5]), "0,2,5");
    }

    #[test]
    fn cores_are_chosen_lowest_first_and_checked() {
        assert_eq!(choose(&budget(1.5, None), &[0, 1, 2]).unwrap(), vec![0, 1]);
        assert_eq!(
            choose(&budget(1.0, Some(vec![2])), &[0, 1, 2]).unwrap(),
            vec![2]
        );
        let err = choose(&budget(3.0, None), &[0, 1]).unwrap_err().to_string();
        assert!(err.contains("only 2 are available"), "{err}");
        assert!(choose(&budget(1.0, Some(vec![5])), &[0, 1]).is_err());
        assert!(choose(&budget(2.0, Some(vec![0])), &[0, 1]).is_err());
        assert!(choose(&budget(0.0, None), &[0, 1]).is_err());
        assert!(choose(&budget(f64::NAN, None), &[0, 1]).is_err());
    }

    #[test]
    fn quota_only_when_cores_exceed_budget() {
        assert_eq!(quota_us(0.5, 1), Some(50_000));
        assert_eq!(quota_us(1.0, 1), None);
        assert_eq!(quota_us(1.0, 2), Some(100_000));
        assert_eq!(quota_us(0.001, 1), Some(1_000));
    }
}
