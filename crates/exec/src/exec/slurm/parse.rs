//! Reading what `scontrol show -o` prints of nodes and jobs: one line of KEY=VALUE fields per record.

use super::{JobId, JobInfo, Node, SlurmJobState};
use crate::gres::gpus_in_gres;
use crate::isolate::cpus::parse_list;
use crate::units::Bytes;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Splits a `--oneliner` record into its `Key=Value` fields. Values may hold `=` (`TRES=cpu=1,mem=300M`);
/// a word without `=` continues the previous value (a value with spaces).
pub(super) fn fields(line: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    let mut last: Option<String> = None;
    for word in line.split_whitespace() {
        match word.split_once('=') {
            Some((k, v)) if !k.is_empty() => {
                // `-d` repeats per-node keys (Nodes=, CPU_IDs=, Mem=, GRES=) once per node: keep the first.
                map.entry(k.to_string()).or_insert_with(|| v.to_string());
                last = Some(k.to_string());
            }
            _ => {
                if let Some(v) = last.as_ref().and_then(|k| map.get_mut(k)) {
                    v.push(' ');
                    v.push_str(word);
                }
            }
        }
    }
    map
}

pub(super) fn get<'a>(f: &'a BTreeMap<String, String>, key: &str) -> Result<&'a str, String> {
    f.get(key)
        .map(String::as_str)
        .ok_or_else(|| format!("no `{key}` field"))
}

pub(super) fn num<T: std::str::FromStr>(
    f: &BTreeMap<String, String>,
    key: &str,
) -> Result<T, String> {
    let v = get(f, key)?;
    v.parse()
        .map_err(|_| format!("`{key}={v}` is not a number"))
}

/// A Slurm memory amount: a number with an optional K/M/G/T suffix, MiB when bare (`RealMemory=21695`).
pub(super) fn parse_memory(v: &str) -> Option<Bytes> {
    let v = v.trim();
    let (digits, unit) = match v.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => (&v[..i], &v[i..]),
        None => (v, "M"),
    };
    let n: f64 = digits.parse().ok()?;
    let scale: u64 = match unit.to_ascii_uppercase().as_str() {
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        "T" => 1 << 40,
        _ => return None,
    };
    Some(Bytes((n * scale as f64).round() as u64))
}

/// The GPU indices in a per-node GRES record such as `gpu:2(IDX:0-1)` or `gpu:a100:1(IDX:3)`.
pub(super) fn gpu_ids_in_gres(gres: &str) -> Vec<usize> {
    let Some(start) = gres.find("(IDX:") else {
        return Vec::new();
    };
    let rest = &gres[start + 5..];
    let list = rest.split(')').next().unwrap_or_default();
    parse_list(list).unwrap_or_default()
}

pub(super) fn parse_node(f: &BTreeMap<String, String>) -> Result<Node, String> {
    let state_text = get(f, "State")?.to_ascii_lowercase();
    let mut parts = state_text.split('+');
    let state = parts
        .next()
        .unwrap_or_default()
        .trim_end_matches('*')
        .to_string();
    let memory =
        parse_memory(get(f, "RealMemory")?).ok_or("`RealMemory` is not an amount of memory")?;
    let memory_allocated = f
        .get("AllocMem")
        .and_then(|v| parse_memory(v))
        .unwrap_or(Bytes(0));
    Ok(Node {
        name: get(f, "NodeName")?.to_string(),
        addr: f.get("NodeAddr").cloned().unwrap_or_default(),
        cpus: match f.get("CPUEfctv") {
            Some(_) => num(f, "CPUEfctv")?,
            None => num(f, "CPUTot")?,
        },
        cpus_allocated: f.get("CPUAlloc").and_then(|v| v.parse().ok()).unwrap_or(0),
        memory,
        memory_allocated,
        gpus: f
            .get("Gres")
            .map_or(Ok(0), |g| gpus_in_gres(g))
            .map_err(|e| format!("Gres: {e}"))?,
        state,
        state_flags: parts.map(str::to_string).collect(),
    })
}

pub(super) fn parse_job(f: &BTreeMap<String, String>) -> Result<JobInfo, String> {
    let (exit_code, exit_signal) = {
        let v = get(f, "ExitCode")?;
        let (c, s) = v.split_once(':').unwrap_or((v, "0"));
        (
            c.parse().map_err(|_| format!("`ExitCode={v}`"))?,
            s.parse().map_err(|_| format!("`ExitCode={v}`"))?,
        )
    };
    let memory = f
        .get("TRES")
        .and_then(|t| t.split(',').find_map(|kv| kv.strip_prefix("mem=")))
        .and_then(parse_memory)
        .or_else(|| f.get("MinMemoryNode").and_then(|v| parse_memory(v)));
    let gpus = f
        .get("JOB_GRES")
        .filter(|g| g.as_str() != "(null)")
        .or_else(|| f.get("TresPerNode"))
        .map_or(Ok(0), |g| gpus_in_gres(g))
        .map_err(|e| format!("JOB_GRES: {e}"))?;
    let path = |key: &str| {
        f.get(key)
            .filter(|v| !v.is_empty() && *v != "(null)")
            .map(PathBuf::from)
    };
    let node = f
        .get("NodeList")
        .filter(|v| !v.is_empty() && *v != "(null)")
        .cloned();
    Ok(JobInfo {
        id: JobId(num(f, "JobId")?),
        name: f.get("JobName").cloned().unwrap_or_default(),
        state: SlurmJobState::parse(get(f, "JobState")?),
        reason: f.get("Reason").cloned().unwrap_or_default(),
        exit_code,
        exit_signal,
        node,
        cpus: num(f, "NumCPUs")?,
        memory,
        gpus,
        cpu_ids: f
            .get("CPU_IDs")
            .and_then(|v| parse_list(v))
            .unwrap_or_default(),
        gpu_ids: f
            .get("GRES")
            .map(|g| gpu_ids_in_gres(g))
            .unwrap_or_default(),
        workdir: path("WorkDir"),
        stdout: path("StdOut"),
        stderr: path("StdErr"),
    })
}
