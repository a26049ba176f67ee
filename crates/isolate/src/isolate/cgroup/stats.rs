//! A domain's counters (CPU time, storage reads, page cache and memory, OOM kills, CFS throttling) read
//! from the v1 or v2 stat files, which name and scale them differently.

use super::domain::CgroupDomain;
use super::read_trim;
use crate::format::trial::IsolationKind;
use crate::isolate::DomainStats;
use cgroups_rs::fs::blkio::BlkIoController;
use cgroups_rs::fs::cpu::CpuController;
use cgroups_rs::fs::memory::MemController;
use std::fs;
use std::path::Path;

/// The value of `key` in a flat-keyed file such as `memory.stat` or `cpu.stat`.
fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let mut it = l.split_whitespace();
        (it.next() == Some(key))
            .then(|| it.next().and_then(|v| v.parse().ok()))
            .flatten()
    })
}

/// CFS periods throttled, summed over every cgroup above `dir` in its hierarchy that has a `cpu.stat`.
fn enclosing_throttled(dir: &Path) -> Option<u64> {
    let mut sum = None;
    for d in dir.ancestors().skip(1) {
        let Ok(t) = fs::read_to_string(d.join("cpu.stat")) else {
            break;
        };
        *sum.get_or_insert(0) += keyed(&t, "nr_throttled").unwrap_or(0);
    }
    sum
}

/// The `some` total of a v2 `*.pressure` file (`some avg10=0.00 avg60=0.00 avg300=0.00 total=N`),
/// microseconds.
fn some_total(text: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.starts_with("some "))?
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("total="))?
        .parse()
        .ok()
}

/// The cgroup's own CPU, I/O and memory pressure totals, microseconds; `None` where the kernel keeps
/// none (no PSI, or `cgroup.pressure` switched off).
fn pressure_totals(dir: &Path) -> Option<[u64; 3]> {
    let read = |f: &str| {
        fs::read_to_string(dir.join(f))
            .ok()
            .as_deref()
            .and_then(some_total)
    };
    Some([
        read("cpu.pressure")?,
        read("io.pressure")?,
        read("memory.pressure")?,
    ])
}

/// Bytes read over every device in v1 `blkio.throttle.io_service_bytes`: lines are `MAJ:MIN Read N`,
/// `MAJ:MIN Write N`, ..., and a final `Total N` over every operation (which must not be counted).
fn v1_read_bytes(text: &str) -> u64 {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 3 && f[1] == "Read").then(|| f[2].parse::<u64>().ok())?
        })
        .sum()
}

/// Bytes read over every device in v2 `io.stat`: lines are `MAJ:MIN rbytes=N wbytes=N rios=N ...`.
fn v2_read_bytes(text: &str) -> u64 {
    text.split_whitespace()
        .filter_map(|kv| kv.strip_prefix("rbytes="))
        .filter_map(|v| v.parse::<u64>().ok())
        .sum()
}

impl CgroupDomain {
    /// What [`Domain::stats`](crate::isolate::Domain::stats) reports for this cgroup.
    pub(super) fn read_stats(&self) -> DomainStats {
        let v2 = self.kind == IsolationKind::CgroupV2;
        let mut s = DomainStats::default();
        if v2 {
            let Some(dir) = self.dirs.first() else {
                return s;
            };
            let cpu = fs::read_to_string(dir.join("cpu.stat")).ok();
            s.cpu_seconds = cpu
                .as_deref()
                .and_then(|t| keyed(t, "usage_usec"))
                .map_or(0.0, |us| us as f64 / 1e6);
            s.storage_read_bytes = fs::read_to_string(dir.join("io.stat"))
                .ok()
                .map(|t| v2_read_bytes(&t));
            let mem = fs::read_to_string(dir.join("memory.stat")).ok();
            s.page_cache_bytes = mem.as_deref().and_then(|t| keyed(t, "file"));
            s.memory_bytes = read_trim(&dir.join("memory.current")).and_then(|v| v.parse().ok());
            s.oom_kills = fs::read_to_string(dir.join("memory.events"))
                .ok()
                .and_then(|t| keyed(&t, "oom_kill"));
            if let Some(t) = cpu.as_deref() {
                s.throttled_periods = keyed(t, "nr_throttled");
                s.throttled_s = keyed(t, "throttled_usec").map(|us| us as f64 / 1e6);
            }
            s.enclosing_throttled_periods = enclosing_throttled(dir);
            s.pressure_us = pressure_totals(dir);
        } else {
            s.cpu_seconds = self
                .dir_of::<cgroups_rs::fs::cpuacct::CpuAcctController>()
                .and_then(|d| read_trim(&d.join("cpuacct.usage")))
                .and_then(|v| v.parse::<u64>().ok())
                .map_or(0.0, |ns| ns as f64 / 1e9);
            s.storage_read_bytes = self.dir_of::<BlkIoController>().and_then(|d| {
                fs::read_to_string(d.join("blkio.throttle.io_service_bytes_recursive"))
                    .or_else(|_| fs::read_to_string(d.join("blkio.throttle.io_service_bytes")))
                    .ok()
                    .map(|t| v1_read_bytes(&t))
            });
            if let Some(d) = self.dir_of::<MemController>() {
                let stat = fs::read_to_string(d.join("memory.stat")).ok();
                s.page_cache_bytes = stat
                    .as_deref()
                    .and_then(|t| keyed(t, "total_cache").or_else(|| keyed(t, "cache")));
                s.memory_bytes =
                    read_trim(&d.join("memory.usage_in_bytes")).and_then(|v| v.parse().ok());
                s.oom_kills = fs::read_to_string(d.join("memory.oom_control"))
                    .ok()
                    .and_then(|t| keyed(&t, "oom_kill"));
            }
            if let Some(d) = self.dir_of::<CpuController>() {
                if let Ok(t) = fs::read_to_string(d.join("cpu.stat")) {
                    s.throttled_periods = keyed(&t, "nr_throttled");
                    s.throttled_s = keyed(&t, "throttled_time").map(|ns| ns as f64 / 1e9);
                }
                s.enclosing_throttled_periods = enclosing_throttled(d);
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_files_parse() {
        let v1 = "254:0 Read 4096\n254:0 Write 10\n254:0 Total 4106\n7:0 Read 6\nTotal 4112\n";
        assert_eq!(v1_read_bytes(v1), 4102);
        let v2 =
            "254:0 rbytes=4096 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n7:0 rbytes=4 wbytes=1\n";
        assert_eq!(v2_read_bytes(v2), 4100);
        let mem = "anon 10\nfile 300\nfile_mapped 7\n";
        assert_eq!(keyed(mem, "file"), Some(300));
        assert_eq!(keyed(mem, "total_cache"), None);
        let psi = "some avg10=1.50 avg60=0.20 avg300=0.00 total=123456\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=99\n";
        assert_eq!(some_total(psi), Some(123456));
        assert_eq!(some_total("full avg10=0.00 total=5\n"), None);
    }
}
