//! The launch contract end to end with small shell workloads: the progress pipe, the regular-expression
//! reader, the environment a workload sees, and a crashing workload's report.

use crate::common;

use crate::common::{measure, rate, run};
use std::path::Path;

fn spec(dir: &Path, name: &str, body: &str) -> String {
    let p = dir.join(format!("{name}.toml"));
    std::fs::write(&p, body).unwrap();
    p.display().to_string()
}

#[test]
fn pipe_progress_and_the_launch_environment_reach_the_workload() {
    let _g = common::serial();
    let d = tempfile::tempdir().unwrap();
    let body = r#"
name = "shell"
command = ["sh", "-c", "env | grep -E '^(SYNERGY_|TMPDIR=|OMP_NUM_THREADS=)' > {spec_dir}/env.txt; test -d $TMPDIR && touch $TMPDIR/left; while :; do echo '{\"samples\": 10, \"epoch\": 0}' >&$SYNERGY_PROGRESS_FD; sleep 0.02; done"]
batch_size = 10
footprint = "1MiB"
[env]
OMP_NUM_THREADS = "{threads}"
"#;
    let s = spec(d.path(), "shell", body);
    let v = measure(&[
        &s,
        "--cpus",
        "1",
        "--cache-bytes",
        "12345",
        "--isolation",
        "affinity",
        "--max-seconds",
        "15",
    ]);
    let (r, _) = rate(&v);
    // 10 samples per 20 ms sleep, less the cost of forking `sleep`.
    assert!((300.0..=505.0).contains(&r), "rate {r}");
    let env = std::fs::read_to_string(d.path().join("env.txt")).unwrap();
    for want in [
        "SYNERGY_CPUS=1",
        "SYNERGY_CPU_LIST=",
        "SYNERGY_CACHE_BYTES=12345",
        "SYNERGY_PROGRESS_FD=3",
        "OMP_NUM_THREADS=1",
    ] {
        assert!(env.contains(want), "`{want}` missing from:\n{env}");
    }
    assert!(!env.contains("SYNERGY_SYNTHETIC"), "{env}");
    // Its own TMPDIR, which existed while it ran (it wrote there) and went with it.
    let tmp = env
        .lines()
        .find_map(|l| l.strip_prefix("TMPDIR="))
        .unwrap_or_else(|| panic!("no TMPDIR in:\n{env}"));
    assert!(
        Path::new(tmp)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("synergy-tmp-"),
        "{tmp}"
    );
    assert!(!Path::new(tmp).exists(), "{tmp} was left");
}

#[test]
fn a_regular_expression_reads_rates_from_output() {
    let _g = common::serial();
    let d = tempfile::tempdir().unwrap();
    let body = r#"
name = "tqdm-like"
command = ["sh", "-c", "while :; do printf 'train: 50%%|#####| 5/10 [00:01<00:01, 12.50it/s]\\r'; sleep 0.02; done"]
batch_size = 8
footprint = "1MiB"
[progress]
source = "regex"
pattern = '(?P<rate>[0-9.]+)it/s'
scale = 8
"#;
    let s = spec(d.path(), "tqdm", body);
    let v = measure(&[&s, "--cpus", "1", "--isolation", "affinity"]);
    let (r, half) = rate(&v);
    assert_eq!(r, 100.0);
    assert_eq!(half, 0.0);
    assert_eq!(v["stop_reason"], "converged");
}

#[test]
fn a_crashing_workload_is_reported_with_its_stderr() {
    let _host = common::shared();
    let d = tempfile::tempdir().unwrap();
    let body = r#"
name = "crash"
command = ["sh", "-c", "echo 'CUDA out of memory (pretend)' >&2; exit 3"]
batch_size = 1
footprint = "1MiB"
"#;
    let s = spec(d.path(), "crash", body);
    let out = run(&["measure", &s, "--cpus", "1", "--isolation", "affinity"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("exit status: 3"), "{stderr}");
    assert!(stderr.contains("CUDA out of memory (pretend)"), "{stderr}");
}

#[test]
fn a_missing_program_is_named() {
    let _host = common::shared();
    let d = tempfile::tempdir().unwrap();
    let body = "name = 'x'\ncommand = ['/no/such/program']\nbatch_size = 1\nfootprint = '1MiB'\n";
    let s = spec(d.path(), "missing", body);
    let out = run(&["measure", &s, "--cpus", "1", "--isolation", "affinity"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("command[0]") && stderr.contains("/no/such/program"),
        "{stderr}"
    );
}
