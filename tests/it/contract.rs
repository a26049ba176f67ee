//! The error contract (docs/architecture.md §7), walked over every subcommand: bad input exits 2
//! with one line (`error: ...`, or clap's usage error with its hint) that names the flag, file or field,
//! shows no panic, prints nothing on stdout, and leaves nothing behind in the directory it ran in.
//!
//! Every row is refused before anything is measured, generated or simulated, so the whole table runs in
//! seconds; a check that needs a trial to fail belongs in the area's own module.

use crate::common;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// One bad input: the arguments (`{root}` is the repository, for its shipped profiles and examples),
/// the files to create in the working directory first (a name ending in `/` is a directory; `{root}` is
/// replaced in contents too), the exit code, and what the message must contain.
struct Row {
    args: &'static [&'static str],
    files: &'static [(&'static str, &'static str)],
    code: i32,
    must: &'static [&'static str],
}

const fn row(
    args: &'static [&'static str],
    files: &'static [(&'static str, &'static str)],
    must: &'static [&'static str],
) -> Row {
    Row {
        args,
        files,
        code: 2,
        must,
    }
}

const NONE: &[(&str, &str)] = &[];
const IMAGE: &str = "{root}/profiles/image.json";
const ZOO: &str = "{root}/profiles/zoo";
const JOBS: &str = "{root}/examples/jobs-mixed.toml";
const ZOO_RES18: &str = "{root}/profiles/zoo/res18.json";
/// An observation log recorded from a real run (an image job given the audio profile), every line
/// disturbed by the busy host it ran on.
const FIXTURE_LOG: &str = "{root}/tests/data/formats/observation/image-on-audio.observations.jsonl";

/// A spec with a declared footprint, running nothing.
const FLOOR_SPEC: (&str, &str) = (
    "floor.toml",
    "name = 'floor'\ncommand = ['true']\nbatch_size = 4\nfootprint = '64MiB'\n",
);
const BAD_TOML: (&str, &str) = ("bad.toml", "name = 'x\ncommand = ['true']\n");
const BAD_JSON: (&str, &str) = ("bad.json", "{");
const A_DIR: (&str, &str) = ("d/", "");
const ONE_JOB: (&str, &str) = (
    "j.toml",
    "profiles = '{root}/profiles'\n[[job]]\nname = 'a'\nworkload = '{root}/workloads/image.toml'\nsamples = 9\n",
);
/// A run state whose one job says it held GPUs for 1e300 s.
const BAD_STATE: (&str, &str) = (
    "s.json",
    r#"{"schema": "synergy-run-state/1", "job_list": "j.toml", "backend": "local", "policy": "fifo",
    "mechanism": "tune", "round_s": 3.0, "started_unix_s": 1796182811.5, "executor_pid": 1,
    "jobs": [{"name": "a", "status": "waiting", "samples_done": 0, "retries": 0, "restarts": 0,
    "rounds_run": 0, "attained_s": 1e300}]}"#,
);

/// A profile without its demand vector.
const NO_DEMAND: (&str, &str) = (
    "nd.json",
    r#"{"schema": "synergy-profile/1.12", "source": "test", "workload": {"name": "nd", "batch_size": 1,
    "gpus": 1, "hit_model": "minio", "iter_time_s": 1.0}, "server": {"gpus": 8, "cpus": 24.0, "memory_gib": 500.0},
    "matrix": {"cpus": [1.0], "memory_gib": [1.0], "normalized": [[1.0]], "proportional": {"cpus": 3.0,
    "memory_gib": 62.5, "normalized": 1.0}}, "per_gpu": {"cpus": [1.0], "memory_gib": [1.0], "normalized": [[1.0]]}}"#,
);
/// The same profile with a demand of no cores.
const ZERO_DEMAND: (&str, &str) = (
    "zd.json",
    r#"{"schema": "synergy-profile/1.12", "source": "test", "workload": {"name": "zd", "batch_size": 1,
    "gpus": 1, "hit_model": "minio", "iter_time_s": 1.0}, "server": {"gpus": 8, "cpus": 24.0, "memory_gib": 500.0},
    "matrix": {"cpus": [1.0], "memory_gib": [1.0], "normalized": [[1.0]], "proportional": {"cpus": 3.0,
    "memory_gib": 62.5, "normalized": 1.0}}, "per_gpu": {"cpus": [1.0], "memory_gib": [1.0], "normalized": [[1.0]]},
    "demand": {"job": {"cpus": 0, "memory_gib": 1, "normalized": 1}, "per_gpu": {"cpus": 0, "memory_gib": 1,
    "normalized": 1}, "tolerance": 0.05}}"#,
);

const TABLE: &[Row] = &[
    // measure
    row(&["measure", "text", "--cpus", "0"], NONE, &["--cpus"]),
    row(&["measure", "text", "--cpus", "nan"], NONE, &["--cpus"]),
    row(&["measure", "text", "--cpus", "4096"], NONE, &["--cpus", "this host has"]),
    row(&["measure", "text", "--precision", "5"], NONE, &["--precision"]),
    row(&["measure", "text", "--max-seconds", "nan"], NONE, &["--max-seconds"]),
    row(
        &["measure", "text", "--min-seconds", "10", "--max-seconds", "5"],
        NONE,
        &["--min-seconds", "--max-seconds"],
    ),
    row(&["measure", "text", "--warmup-seconds", "inf"], NONE, &["--warmup-seconds"]),
    row(&["measure", "text", "--mem", "0"], NONE, &["--mem"]),
    row(&["measure", "text", "--mem", "lots"], NONE, &["--mem", "lots"]),
    row(
        &["measure", "text", "--mem", "1000TiB"],
        NONE,
        &["--mem", "more than this host has"],
    ),
    row(&["measure", "text", "--cache-bytes", "1000TiB"], NONE, &["--cache-bytes"]),
    row(&["measure", "text", "--storage-bps", "0"], NONE, &["--storage-bps"]),
    row(&["measure", "text", "--cpu-list", "x"], NONE, &["--cpu-list"]),
    row(&["measure", "text", "--cold", "--warm"], NONE, &["--cold", "--warm"]),
    row(&["measure", "no-such-workload"], NONE, &["no-such-workload"]),
    row(&["measure", "bad.toml"], &[BAD_TOML], &["bad.toml", "line 1"]),
    row(
        &["measure", "g.toml"],
        &[("g.toml", "name = 'x'\ncommand = ['true']\nbatch_size = 4\ngpus = 0\n")],
        &["g.toml", "gpus"],
    ),
    row(
        &["measure", "ddp.toml"],
        &[("ddp.toml", "name = 'x'\ncommand = ['true']\nlauncher = 'torchrun'\nbatch_size = 5\ngpus = 2\n")],
        &["ddp.toml", "batch_size", "ranks"],
    ),
    row(
        &["measure", "ddp.toml"],
        &[("ddp.toml", "name = 'x'\ncommand = ['true']\nlauncher = 'mpirun'\nbatch_size = 4\n")],
        &["ddp.toml", "line 3", "torchrun"],
    ),
    row(
        &["profile", "{root}/workloads/pytorch-ddp-resnet18-small.toml", "--gpus", "3"],
        NONE,
        &["--gpus", "ranks"],
    ),
    row(
        &["measure", "floor.toml", "--cpus", "1", "--mem", "1MiB"],
        &[FLOOR_SPEC],
        &["--mem", "footprint", "floor.toml"],
    ),
    row(
        &["measure", "z.toml", "--cpus", "1"],
        &[(
            "z.toml",
            "name = 'z'\ncommand = ['true']\nbatch_size = 4\n[dataset]\npath = 'data'\ngenerate = { kind = 'text', size = '0' }\n",
        )],
        &["z.toml", "dataset.generate.size"],
    ),
    row(
        &["measure", "z.toml", "--cpus", "1"],
        &[(
            "z.toml",
            "name = 'z'\ncommand = ['true']\nbatch_size = 4\n[dataset]\npath = 'data'\ngenerate = { kind = 'text', size = '1000TiB' }\n",
        )],
        &["z.toml", "field `dataset.generate.size`", "free"],
    ),
    row(
        &["measure", "--cpus", "1", "--isolation", "affinity", "--mem", "1GiB", "--", "true"],
        NONE,
        &["affinity"],
    ),
    row(&["measure", "--cold", "--cpus", "1", "--", "true"], NONE, &["--cold", "--dataset"]),
    // profile
    row(&["profile", "text", "--gpus", "0"], NONE, &["--gpus"]),
    row(&["profile", "text", "--tolerance", "1"], NONE, &["--tolerance"]),
    row(&["profile", "text", "--budget", "5 parsecs"], NONE, &["--budget", "not a duration"]),
    row(&["profile", "text", "--budget", "0s"], NONE, &["--budget", "longer than 0"]),
    row(&["profile", "text", "--cpus", "0,1"], NONE, &["--cpus"]),
    row(&["profile", "text", "--cpus", "1,0.5"], NONE, &["--cpus", "increasing"]),
    row(&["profile", "text", "--cpus", "4096"], NONE, &["--cpus", "this host has"]),
    row(&["profile", "text", "--cpus", "one"], NONE, &["--cpus", "one"]),
    row(&["profile", "text", "--mem", "nan"], NONE, &["--mem"]),
    row(&["profile", "text", "--mem", "100000"], NONE, &["--mem", "more than this host has"]),
    row(
        &["profile", "floor.toml", "--mem", "0.01,1"],
        &[FLOOR_SPEC],
        &["--mem", "footprint", "floor.toml"],
    ),
    row(&["profile", "text", "--storage-bps", "0"], NONE, &["--storage-bps"]),
    row(&["profile", "text", "--server", "0gpu,24cpu,500gb"], NONE, &["--server"]),
    row(&["profile"], NONE, &["SPEC"]),
    row(&["profile", "text", "--", "true"], NONE, &["text", "not both"]),
    row(
        &["profile", "evil.toml"],
        &[("evil.toml", "name = '../evil'\ncommand = ['true']\nbatch_size = 4\n")],
        &["evil.toml", "name", "--out"],
    ),
    row(&["profile", "bad.toml"], &[BAD_TOML], &["bad.toml", "line 1"]),
    // profile refine
    row(&["profile", "replay"], NONE, &["<PROFILE>"]),
    row(&["profile", "replay", "missing.json"], NONE, &["missing.json"]),
    row(&["profile", "replay", "bad.json"], &[BAD_JSON], &["bad.json"]),
    row(&["profile", "replay", ZOO_RES18], NONE, &["res18", "trials"]),
    // Run elsewhere, the spec the shipped profile names (workloads/image.toml) is not there.
    row(&["profile", "replay", IMAGE], NONE, &["workload.spec", "--spec"]),
    row(&["profile", "replay", IMAGE, "--spec", "bad.toml"], &[BAD_TOML], &["bad.toml"]),
    row(&["profile", "refine", IMAGE], NONE, &["--from"]),
    row(&["profile", "refine", IMAGE, "--from", "missing"], NONE, &["missing"]),
    row(&["profile", "refine", "missing.json", "--from", "d"], &[A_DIR], &["missing.json"]),
    row(&["profile", "refine", IMAGE, "--from", "d"], &[A_DIR], &["d", "observation log"]),
    row(
        &["profile", "refine", IMAGE, "--from", "x.observations.jsonl"],
        &[("x.observations.jsonl", "{\"schema\": \"synergy-trial/1\"}\n")],
        &["x.observations.jsonl", "line 1", "schema"],
    ),
    row(
        &["profile", "refine", IMAGE, "--from", "x.observations.jsonl"],
        &[("x.observations.jsonl", "\n{\"schema\": \"synergy-observation/1\", \"job\": 1}\n")],
        &["x.observations.jsonl", "line 2", "job"],
    ),
    row(&["profile", "refine", ZOO_RES18, "--from", FIXTURE_LOG], NONE, &["res18", "model"]),
    row(&["profile", "refine", IMAGE, "--from", FIXTURE_LOG], NONE, &["undisturbed", "image"]),
    // predict
    row(&["predict", IMAGE, "--cpus", "0", "--mem", "1"], NONE, &["--cpus"]),
    row(&["predict", IMAGE, "--cpus", "1", "--mem", "nan"], NONE, &["--mem"]),
    row(&["predict", IMAGE, "--cpus", "1"], NONE, &["--mem"]),
    row(&["predict", "missing.json", "--cpus", "1", "--mem", "1"], NONE, &["missing.json"]),
    row(&["predict", "d", "--cpus", "1", "--mem", "1"], &[A_DIR], &["d", "is a directory"]),
    row(&["predict", "bad.json", "--cpus", "1", "--mem", "1"], &[BAD_JSON], &["bad.json"]),
    row(&["predict", IMAGE, "--cpus", "1", "--mem", "1e-300"], NONE, &["--mem", "footprint"]),
    // recommend
    row(&["recommend", "nd.json"], &[NO_DEMAND], &["nd.json", "demand"]),
    row(&["recommend", "zd.json"], &[ZERO_DEMAND], &["zd.json", "demand.job.cpus"]),
    row(
        &["recommend", ZOO_RES18, "--server", "8gpu,24cpu,500gb", "--gpus", "8"],
        NONE,
        &["--server", "72 cores", "res18"],
    ),
    row(&["recommend", IMAGE, "--format", "yaml"], NONE, &["--format", "yaml"]),
    row(&["recommend", IMAGE, "--gpus", "0"], NONE, &["--gpus"]),
    row(&["recommend", IMAGE, "--server", "8gpu,24cpu"], NONE, &["--server", "memory"]),
    row(&["recommend", IMAGE, "--json", "--format", "k8s"], NONE, &["--json", "--format"]),
    row(&["recommend", "missing.json"], NONE, &["missing.json"]),
    // completions, man
    row(&["completions"], NONE, &["SHELL"]),
    row(&["completions", "tcsh"], NONE, &["tcsh", "bash"]),
    row(&["completions", "bash", "zsh"], NONE, &["zsh"]),
    row(&["completions", "bash", "--out", "x"], NONE, &["--out"]),
    row(&["man", "extra"], NONE, &["extra"]),
    row(&["man", "--out", "x"], NONE, &["--out"]),
    row(&["man", "--section", "5"], NONE, &["--section"]),
    row(&["man", "-o"], NONE, &["-o"]),
    // simulate
    row(&["simulate", "--profiles", ZOO, "--jobs", "0", "--out", "o"], NONE, &["--jobs"]),
    row(&["simulate", "--profiles", ZOO, "--jobs", "9", "--round", "0"], NONE, &["--round"]),
    row(&["simulate", "--profiles", ZOO, "--jobs", "9", "--round", "1e300"], NONE, &["--round", "1e9"]),
    row(
        &["simulate", "--profiles", ZOO, "--trace", "t.csv"],
        &[("t.csv", "id,model,arrival_s,iters,gpus\n0,res18,1e300,100,1\n")],
        &["t.csv", "line 2", "arrival_s", "1e9"],
    ),
    row(
        &["simulate", "--profiles", ZOO, "--trace", "t.csv"],
        &[("t.csv", "id,model,arrival_s,iters,gpus\n0,res18,0,18446744073709551615,1\n")],
        &["t.csv", "line 2", "iters", "2^50"],
    ),
    row(&["simulate", "--profiles", ZOO, "--load", "0"], NONE, &["--load"]),
    row(&["simulate", "--profiles", ZOO, "--load", "x"], NONE, &["--load", "`x`"]),
    row(&["simulate", "--profiles", ZOO, "--split", "1,1"], NONE, &["--split"]),
    row(&["simulate", "--profiles", ZOO, "--jobs", "9", "--split", "0,0,0"], NONE, &["--split"]),
    row(&["simulate", "--profiles", ZOO, "--policy", "nope"], NONE, &["--policy", "nope"]),
    row(&["simulate", "--profiles", ZOO, "--mechanism", "nope"], NONE, &["--mechanism", "nope"]),
    row(&["simulate", "--profiles", ZOO, "--window", "5-1"], NONE, &["--window", "5-1"]),
    row(
        &["simulate", "--profiles", ZOO, "--jobs", "10", "--window", "100-200"],
        NONE,
        &["--window"],
    ),
    row(&["simulate", "--profiles", ZOO, "--threads", "0"], NONE, &["--threads"]),
    row(&["simulate", "--profiles", ZOO, "--servers", "0"], NONE, &["--servers"]),
    row(
        &["simulate", "--profiles", ZOO, "--server-gpus", "4000000000"],
        NONE,
        &["--server-gpus", "at most"],
    ),
    row(&["simulate", "--profiles", ZOO, "--server-cpus", "nan"], NONE, &["--server-cpus"]),
    row(&["simulate", "--profiles", ZOO, "--server-mem-gb", "inf"], NONE, &["--server-mem-gb"]),
    row(&["simulate", "--profiles", ZOO, "--seed", "x"], NONE, &["--seed"]),
    row(&["simulate", "--profiles", ZOO, "--job-list-seed", "x"], NONE, &["--job-list-seed"]),
    row(
        &[
            "simulate", "--profiles", ZOO, "--servers", "1", "--server-gpus", "4", "--multi-gpu",
            "--jobs", "9", "--window", "all", "--out", "o",
        ],
        NONE,
        &["--multi-gpu"],
    ),
    row(&["simulate", "--profiles", "nodir", "--jobs", "9"], NONE, &["nodir"]),
    row(&["simulate", "--profiles", "d", "--jobs", "9"], &[A_DIR], &["d", "--profiles"]),
    row(&["simulate", "--profiles", ZOO, "--trace", "missing.csv"], NONE, &["missing.csv"]),
    row(
        &["simulate", "--profiles", ZOO, "--trace", "t.csv", "--out", "o"],
        &[("t.csv", "id,model,arrival_s,iters,gpus\n1,res18,0,100,0\n")],
        &["t.csv", "line 2", "gpus"],
    ),
    row(
        &["simulate", "--profiles", ZOO, "--trace", "t.csv"],
        &[("t.csv", "id,model,arrival_s,iters,gpus\n1,nope,0,100,1\n")],
        &["t.csv", "model", "nope"],
    ),
    row(
        &["simulate", "--profiles", ZOO, "--cluster", "c.toml", "--jobs", "9"],
        &[("c.toml", "[[servers]]\ncount = 0\ngpus = 8\ncpus = 24\nmemory_gb = 500\n")],
        &["c.toml", "servers[0].count"],
    ),
    row(
        &["simulate", "--profiles", ZOO, "--cluster", "c.toml", "--jobs", "9"],
        &[("c.toml", "[[servers]]\ncount = 1\ngpus = 8\ncpus = 24\nmemory_gb = -1\n")],
        &["c.toml", "servers[0].memory_gb"],
    ),
    // A measured profile whose footprint no server's memory share holds.
    row(
        &["simulate", "--profiles", "{root}/profiles", "--cluster", "c.toml", "--jobs", "9"],
        &[("c.toml", "[[servers]]\ncount = 1\ngpus = 8\ncpus = 24\nmemory_gb = 0.5\n")],
        &["model.footprint_bytes", "footprint", "at most 0.058 GiB per GPU"],
    ),
    row(&["simulate", "--jobs-list", "missing.toml"], NONE, &["missing.toml"]),
    row(
        &["simulate", "--jobs-list", "jobs.toml"],
        &[("jobs.toml", "[[job]]\nname = 'a'\nworkload = '{root}/workloads/image.toml'\nprofile = '{root}/profiles/image.json'\nsamples = 0\n")],
        &["jobs.toml", "samples"],
    ),
    // plot
    row(&["plot", IMAGE, "--kind", "cpu", "-o", "x.txt"], NONE, &["x.txt", ".svg"]),
    row(&["plot", IMAGE, "--kind", "cpu", "-o", "x.svg", "--width", "0"], NONE, &["--width"]),
    row(
        &["plot", IMAGE, "--kind", "cpu", "-o", "x.svg", "--height", "100000"],
        NONE,
        &["--height"],
    ),
    row(&["plot", IMAGE, "--kind", "jct-cdf", "-o", "x.svg"], NONE, &["jct-cdf", "directory"]),
    row(&["plot", IMAGE, "--kind", "nope", "-o", "x.svg"], NONE, &["--kind"]),
    row(&["plot", "missing.json", "--kind", "cpu", "-o", "x.svg"], NONE, &["missing.json"]),
    row(&["plot", "bad.json", "--kind", "heatmap", "-o", "x.svg"], &[BAD_JSON], &["bad.json"]),
    row(&["plot", "d", "--kind", "utilization", "-o", "x.svg"], &[A_DIR], &["d"]),
    // run
    row(&["run", "missing.toml", "--dry-run"], NONE, &["missing.toml"]),
    row(&["run", JOBS, "--dry-run", "--gpus", "0"], NONE, &["--gpus"]),
    row(&["run", JOBS, "--dry-run", "--gpus", "2", "--round", "0"], NONE, &["--round"]),
    row(&["run", JOBS, "--dry-run", "--gpus", "2", "--round", "1e300"], NONE, &["--round"]),
    row(
        &["run", "j.toml", "--dry-run", "--gpus", "2"],
        &[(
            "j.toml",
            "profiles = '{root}/profiles'\n[[job]]\nname = 'a'\nworkload = '{root}/workloads/image.toml'\nsamples = 9223372036854775807\n",
        )],
        &["j.toml", "samples", "2^50"],
    ),
    row(
        &["run", "j.toml", "--dry-run", "--gpus", "2"],
        &[(
            "j.toml",
            "profiles = '{root}/profiles'\n[[job]]\nname = 'a'\nworkload = '{root}/workloads/image.toml'\nsamples = 9\narrival_s = 1e300\n",
        )],
        &["j.toml", "arrival_s", "1e9"],
    ),
    // A state file no executor writes is read the same way by --resume and by a fresh run that finds it.
    row(
        &["run", "j.toml", "--gpus", "1", "--resume", "--state", "s.json"],
        &[ONE_JOB, BAD_STATE],
        &["s.json", "jobs[0].attained_s", "1e9"],
    ),
    row(
        &["run", "j.toml", "--gpus", "1", "--state", "s.json"],
        &[ONE_JOB, BAD_STATE],
        &["s.json", "--resume would refuse it", "jobs[0].attained_s"],
    ),
    row(&["run", JOBS, "--dry-run", "--gpus", "2", "--cpus", "0"], NONE, &["--cpus"]),
    row(&["run", JOBS, "--dry-run", "--gpus", "2", "--mem", "0"], NONE, &["--mem"]),
    row(
        &["run", JOBS, "--dry-run", "--gpus", "2", "--mem", "100MiB"],
        NONE,
        &["--mem", "footprint", "image-1"],
    ),
    row(&["run", JOBS, "--dry-run", "--gpus", "2", "--policy", "nope"], NONE, &["--policy"]),
    row(&["run", JOBS, "--dry-run", "--gpus", "2", "--mechanism", "nope"], NONE, &["--mechanism"]),
    row(&["run", JOBS, "--dry-run", "--backend", "slurm", "--gpus", "2"], NONE, &["--gpus"]),
    row(&["run", JOBS, "--dry-run", "--node", "n1"], NONE, &["--node"]),
    row(&["run", JOBS, "--resume", "--fresh"], NONE, &["--resume", "--fresh"]),
    row(&["run", JOBS, "--dry-run", "--refine"], NONE, &["--refine", "--dry-run"]),
    row(&["run", JOBS, "--gpus", "2", "--include-disturbed"], NONE, &["--refine"]),
    row(
        &["run", "jobs.toml", "--gpus", "2"],
        &[("jobs.toml", "[[job]]\nname = 'a'\nworkload = '{root}/workloads/image.toml'\nprofile = '{root}/profiles/image.json'\nsamples = 10\ngpus = 0\n")],
        &["jobs.toml", "job[0].gpus"],
    ),
    row(
        &["run", "jobs.toml", "--gpus", "2", "--dry-run"],
        &[("jobs.toml", "[[job]]\nname = 'a'\nworkload = '{root}/workloads/pytorch-ddp-resnet18-small.toml'\nprofile = '{root}/profiles/pytorch-ddp-resnet18-small.json'\nsamples = 10\ngpus = 3\n")],
        &["jobs.toml", "job[0].gpus", "batch_size"],
    ),
    row(
        &["run", "jobs.toml", "--gpus", "2"],
        &[("jobs.toml", "[[job]]\nname = 'a'\nworkload = '{root}/workloads/image.toml'\nprofile = '{root}/profiles/image.json'\nsamples = 10\narrival_s = nan\n")],
        &["jobs.toml", "arrival_s"],
    ),
    row(&["run", "bad.toml", "--gpus", "2"], &[BAD_TOML], &["bad.toml", "line 1"]),
    // import-zoo
    row(&["import-zoo", "missing.json", "--out-dir", "out"], NONE, &["missing.json"]),
    row(&["import-zoo", "bad.json", "--out-dir", "out"], &[BAD_JSON], &["bad.json"]),
    row(&["import-zoo", "d", "--out-dir", "out"], &[A_DIR], &["d", "is a directory"]),
    row(&["import-zoo", IMAGE, "--out-dir", "out"], NONE, &["not a model zoo"]),
    row(
        &["import-zoo", "zoo.json", "--out-dir", "out"],
        &[(
            "zoo.json",
            r#"{"cpus_per_gpu_rows":[1,3,6],"mem_gb_per_gpu_cols":[31.25,62.5],
              "normalized_to":{"cpus_per_gpu":3,"mem_gb_per_gpu":62.5},
              "models":{"../../evil":{"task":"image","best_cpus_per_gpu":6,"best_mem_gb_per_gpu":62.5,
                "batch_size":8,"iter_time_s_at_proportional":0.5,"speedup_at_best":2,
                "throughput_normalized":[[0.1,0.4],[0.1,1.0],[0.1,2.0]]}}}"#,
        )],
        &["zoo.json", "models.../../evil"],
    ),
    // dataset gen
    row(&["dataset", "gen", "--kind", "text", "--size", "0", "g"], NONE, &["--size"]),
    row(&["dataset", "gen", "--kind", "text", "--size", "lots", "g"], NONE, &["--size", "lots"]),
    row(
        &["dataset", "gen", "--kind", "text", "--size", "1000TiB", "g"],
        NONE,
        &["--size", "free"],
    ),
    row(&["dataset", "gen", "--kind", "nope", "--size", "1KiB", "g"], NONE, &["--kind"]),
    row(&["dataset", "gen", "--kind", "text", "--size", "1KiB"], NONE, &["<DIR>"]),
    row(
        &["dataset", "gen", "--kind", "text", "--size", "1KiB", "d"],
        &[A_DIR],
        &["d", "already exists"],
    ),
    row(
        &["dataset", "gen", "--kind", "text", "--size", "1KiB", "f/g"],
        &[("f", "x")],
        &["f/g", "`f` is a file"],
    ),
    // dataset rate
    row(&["dataset", "rate", "missing", "--pipeline", "text"], NONE, &["missing"]),
    row(&["dataset", "rate", "d", "--pipeline", "text", "--seq-len", "0"], &[A_DIR], &["--seq-len"]),
    row(
        &["dataset", "rate", "d", "--pipeline", "image", "--seq-len", "8"],
        &[A_DIR],
        &["--seq-len", "text"],
    ),
    row(&["dataset", "rate", "d", "--pipeline", "text"], &[A_DIR, ("d/x", "x")], &["d", ".bin"]),
    row(&["dataset", "rate", "d", "--pipeline", "nope"], &[A_DIR], &["--pipeline"]),
    // trace import
    row(
        &["trace", "import", "--format", "sacct", "{root}/tests/data/traces/helios.csv", "--profiles", ZOO],
        NONE,
        &["helios.csv", "line 1", "JobID", "--format"],
    ),
    row(
        &["trace", "import", "--format", "helios", "h.csv", "--profiles", ZOO, "--out", "t.csv"],
        &[("h.csv", "job_id,gpu_num,state,submit_time,duration\n1,1,COMPLETED,noon,5\n")],
        &["h.csv", "line 2", "submit_time", "noon"],
    ),
    row(
        &["trace", "import", "--format", "helios", "h.csv", "--profiles", ZOO, "--out", "t.csv"],
        &[("h.csv", "job_id,gpu_num,state,submit_time,duration\n1,1,COMPLETED,2020-04-01 00:00:00,-1\n")],
        &["h.csv", "line 2", "duration", "negative"],
    ),
    row(
        &["trace", "import", "--format", "philly", "p.json", "--profiles", ZOO, "--out", "t.csv"],
        &[("p.json", "[{\"status\":\"Pass\",\"jobid\":1}]")],
        &["p.json", "[0].jobid"],
    ),
    row(
        &["trace", "import", "--format", "helios", "{root}/tests/data/traces/helios.csv", "--profiles", ZOO, "--out", "t.csv", "--load-scale", "0"],
        NONE,
        &["--load-scale"],
    ),
    row(
        &["trace", "import", "--format", "helios", "{root}/tests/data/traces/helios.csv", "--profiles", ZOO, "--out", "t.csv", "--from", "soon"],
        NONE,
        &["--from", "soon"],
    ),
    row(
        &["trace", "import", "--format", "pai", "{root}/tests/data/traces/pai_job_table.csv", "--profiles", ZOO, "--out", "t.csv"],
        NONE,
        &["FILE", "both tables"],
    ),
    row(
        &["trace", "import", "--format", "helios", "{root}/tests/data/traces/helios.csv", "--profiles", ZOO, "--out", "t.csv", "--map", "m.toml"],
        &[("m.toml", "[[rule]]\nfield = 'queue'\npattern = '('\nprofile = 'res50'\n")],
        &["m.toml", "rule[0].pattern"],
    ),
    row(
        &["trace", "import", "--format", "nope", "x.csv"],
        NONE,
        &["--format", "nope"],
    ),
    // trace cluster
    row(
        &["trace", "cluster", "--format", "sinfo", "n.txt"],
        &[("n.txt", "node01 64 1000 gpu:1000000\n")],
        &["n.txt", "line 1", "more than any server has"],
    ),
    row(
        &["trace", "cluster", "--format", "sinfo", "n.txt"],
        &[("n.txt", "node01 64 lots gpu:8\n")],
        &["n.txt", "line 1", "memory"],
    ),
    row(
        &["trace", "cluster", "--format", "sinfo", "n.txt"],
        &[("n.txt", "node01 64 1000 gpu:x\n")],
        &["n.txt", "line 1", "gres"],
    ),
    row(
        &["trace", "cluster", "--format", "pai", "m.csv"],
        &[("m.csv", "m_0,V100,96\n")],
        &["m.csv", "line 1", "5"],
    ),
    row(
        &["trace", "cluster", "--format", "philly", "{root}/tests/data/traces/cluster_machine_list", "--cpus-per-gpu", "0"],
        NONE,
        &["--cpus-per-gpu"],
    ),
    row(&["trace", "cluster", "--format", "philly", "missing.csv"], NONE, &["missing.csv"]),
    // workload run
    row(
        &["workload", "run", "text", "--dataset", "d", "--gpu-rate", "9", "--batch-size", "0"],
        &[A_DIR],
        &["--batch-size"],
    ),
    row(
        &["workload", "run", "text", "--dataset", "d", "--gpu-rate", "9", "--max-steps", "0"],
        &[A_DIR],
        &["--max-steps"],
    ),
    row(
        &["workload", "run", "text", "--dataset", "d", "--gpu-rate", "9", "--max-samples", "0"],
        &[A_DIR],
        &["--max-samples"],
    ),
    row(
        &["workload", "run", "text", "--dataset", "d", "--gpu-rate", "9", "--max-seconds", "nan"],
        &[A_DIR],
        &["--max-seconds"],
    ),
    row(&["workload", "run", "text", "--dataset", "d", "--gpu-rate", "0"], &[A_DIR], &["--gpu-rate"]),
    row(
        &["workload", "run", "text", "--dataset", "d", "--gpu-rate", "9", "--batch-size", "100000000"],
        &[A_DIR],
        &["--batch-size", "this host"],
    ),
    row(
        &["workload", "run", "text", "--dataset", "d", "--gpu-rate", "9", "--prefetch", "100000000"],
        &[A_DIR],
        &["--prefetch"],
    ),
    row(
        &["workload", "run", "text", "--dataset", "d", "--gpu-rate", "9", "--cache-bytes", "1000TiB"],
        &[A_DIR],
        &["--cache-bytes"],
    ),
    row(
        &["workload", "run", "text", "--dataset", "missing", "--gpu-rate", "9", "--max-steps", "1"],
        NONE,
        &["missing"],
    ),
    row(
        &["workload", "run", "text", "--dataset", "d", "--gpu-rate", "9", "--max-steps", "1"],
        &[A_DIR, ("d/x.bin", "")],
        &["d"],
    ),
    // slurm advisor
    row(&["slurm", "advisor"], NONE, &["PROFILE"]),
    row(&["slurm", "advisor", ZOO_RES18], NONE, &["--out"]),
    row(&["slurm", "advisor", "missing.json", "--out", "o"], NONE, &["missing.json"]),
    row(
        &["slurm", "advisor", ZOO_RES18, "--out", "o", "--sinfo", "nodes.txt"],
        &[("nodes.txt", "n1 24 500000 gpu:8\n")],
        &["nodes.txt, line 1", "partition"],
    ),
    row(
        &["slurm", "advisor", ZOO_RES18, "--out", "o", "--sinfo", "nodes.txt"],
        &[("nodes.txt", "n1 24 lots gpu:8 gpu*\n")],
        &["nodes.txt, line 1", "memory"],
    ),
    row(
        &["slurm", "advisor", ZOO_RES18, "--out", "o", "--allow-below-share", "nope"],
        NONE,
        &["--allow-below-share", "nope"],
    ),
    row(&["slurm", "advisor", ZOO_RES18, "--out", "o", "--job-name", "x"], NONE, &["--job-name", "PREFIX=PROFILE"]),
    row(
        &["slurm", "advisor", ZOO_RES18, "--out", "o", "--job-name", "x=nope", "--sinfo", "nodes.txt"],
        &[("nodes.txt", "n1 24 500000 gpu:8 gpu*\n")],
        &["--job-name", "nope"],
    ),
    row(&["slurm", "advisor", "--check", "t.tsv", ZOO_RES18], NONE, &["--check", "PROFILE"]),
    row(
        &["slurm", "advisor", "--check", "t.tsv", "--sinfo", "nodes.txt"],
        &[("t.tsv", "hello\n"), ("nodes.txt", "n1 24 500000 gpu:8 gpu*\n")],
        &["t.tsv", "line 1", "field `version`"],
    ),
    row(
        &["slurm", "advisor", "--check", "t.tsv", "--sinfo", "nodes.txt"],
        &[
            ("t.tsv", "synergy-advisor-table\t1\ngenerated\t1\nsize\tres18\tgpu\t1\tnine\t1\tdemand\tdemand\n"),
            ("nodes.txt", "n1 24 500000 gpu:8 gpu*\n"),
        ],
        &["t.tsv", "line 3", "field `cpus`", "nine"],
    ),
    // the front door itself
    row(&["nope"], NONE, &["nope"]),
];

/// Runs every row whose arguments start with `prefix`, and fails with all the rows that broke the
/// contract (not only the first).
fn walk(prefix: &[&str]) {
    let _host = common::shared();
    let root = env!("CARGO_MANIFEST_DIR");
    let rows: Vec<&Row> = TABLE
        .iter()
        .filter(|r| r.args.starts_with(prefix))
        .collect();
    assert!(!rows.is_empty(), "no row for {prefix:?}");
    let broken: Vec<String> = rows
        .iter()
        .filter_map(|r| check_row(r, root).err())
        .collect();
    assert!(
        broken.is_empty(),
        "{} of {} rows broke the contract:\n{}",
        broken.len(),
        rows.len(),
        broken.join("\n")
    );
}

fn check_row(r: &Row, root: &str) -> Result<(), String> {
    let cwd = tempfile::tempdir().unwrap();
    let mut put = BTreeSet::new();
    for (name, text) in r.files {
        let p = cwd.path().join(name);
        if name.ends_with('/') {
            std::fs::create_dir_all(&p).unwrap();
        } else {
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, text.replace("{root}", root)).unwrap();
        }
        put.extend(listing(cwd.path()));
    }
    let args: Vec<String> = r.args.iter().map(|a| a.replace("{root}", root)).collect();
    let out = common::synergy()
        .args(&args)
        .current_dir(cwd.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let fail = |why: String| Err(format!("{:?}: {why}\n    stderr: {stderr}", r.args));
    if out.status.code() != Some(r.code) {
        return fail(format!("exit {:?}, expected {}", out.status.code(), r.code));
    }
    let now = listing(cwd.path());
    let appeared: Vec<&PathBuf> = now.difference(&put).collect();
    let gone: Vec<&PathBuf> = put.difference(&now).collect();
    if !appeared.is_empty() || !gone.is_empty() {
        return fail(format!("appeared {appeared:?}, gone {gone:?}"));
    }
    if !out.stdout.is_empty() {
        return fail(format!("stdout: {}", String::from_utf8_lossy(&out.stdout)));
    }
    if stderr.contains("panicked") {
        return fail("panicked".into());
    }
    if let Err(why) = one_message(&stderr) {
        return fail(why);
    }
    if let Some(m) = r.must.iter().find(|m| !stderr.contains(*m)) {
        return fail(format!("`{m}` not in the message"));
    }
    Ok(())
}

/// The message's form: one line `error: ...` (docs/architecture.md §7), or clap's usage error (its
/// `error:` line, the argument it lists or a tip, usage, and the hint to try `--help`).
fn one_message(stderr: &str) -> Result<(), String> {
    let lines: Vec<&str> = stderr.trim_end().lines().collect();
    let Some(first) = lines.first() else {
        return Err("no message".into());
    };
    if !first.starts_with("error: ") {
        return Err("the message does not start with `error: `".into());
    }
    // The library's own name for a setting, shown where the flag that sets it belongs.
    let advice = first.match_indices(" set `").any(|(i, _)| {
        let rest = &first[i + " set `".len()..];
        rest.find('`')
            .is_some_and(|end| rest[end + 1..].starts_with(" to "))
    });
    if first.contains("setting `") || advice {
        return Err("a setting is named by its configuration field, not its flag".into());
    }
    if lines.len() == 1 {
        return Ok(());
    }
    let clap_hint = lines.last() == Some(&"For more information, try '--help'.");
    let clap_body = lines[1..].iter().all(|l| {
        l.is_empty() || l.starts_with("  ") || l.starts_with("Usage: ") || l.starts_with("For more")
    });
    if clap_hint && clap_body {
        Ok(())
    } else {
        Err(format!("{} lines, not one", lines.len()))
    }
}

/// Every path under `dir`, relative to it.
fn listing(dir: &Path) -> BTreeSet<PathBuf> {
    let mut found = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            found.insert(p.strip_prefix(dir).unwrap().to_path_buf());
            if p.is_dir() {
                stack.push(p);
            }
        }
    }
    found
}

/// Every subcommand `synergy --help` lists (and those of a command that has them), so that a command
/// added later without rows fails here.
fn subcommands(path: &[&str]) -> Vec<Vec<String>> {
    let out = common::synergy().args(path).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout).into_owned();
    let Some(list) = help.split("Commands:\n").nth(1) else {
        return vec![path.iter().map(|s| s.to_string()).collect()];
    };
    let names: Vec<String> = list
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| *n != "help")
        .map(str::to_string)
        .collect();
    let mut all = Vec::new();
    for n in names {
        let mut p: Vec<&str> = path.to_vec();
        p.push(&n);
        all.extend(subcommands(&p));
    }
    all
}

/// The walk itself fails each kind of breach, so a row cannot pass by the check not looking.
#[test]
fn the_walk_catches_each_kind_of_breach() {
    let _host = common::shared();
    let root = env!("CARGO_MANIFEST_DIR");
    let breach = |r: Row| check_row(&r, root).unwrap_err();
    let good = row(&["predict", IMAGE, "--cpus", "1", "--mem", "1"], NONE, &[]);
    assert!(breach(good).contains("exit Some(0), expected 2"));
    let vague = row(
        &["predict", IMAGE, "--cpus", "0", "--mem", "1"],
        NONE,
        &["--mem"],
    );
    assert!(breach(vague).contains("`--mem` not in the message"));
    let made = Row {
        code: 0,
        ..row(
            &["dataset", "gen", "--kind", "text", "--size", "1KiB", "g"],
            NONE,
            &[],
        )
    };
    let e = breach(made);
    assert!(e.contains("appeared [\"g\", "), "{e}");
    let printed = Row {
        code: 0,
        ..row(&["predict", IMAGE, "--cpus", "1", "--mem", "1"], NONE, &[])
    };
    assert!(breach(printed).contains("stdout: "));
    assert!(one_message("error: a\nb\n").is_err());
    assert!(one_message("thread 'main' panicked\n").is_err());
    assert!(one_message("error: setting `round_s`: must be positive\n").is_err());
    assert!(
        one_message("error: a\n\nUsage: synergy x\n\nFor more information, try '--help'.\n")
            .is_ok()
    );
}

#[test]
fn every_subcommand_has_rows() {
    let _host = common::shared();
    let commands = subcommands(&[]);
    assert!(commands.len() >= 10, "{commands:?}");
    let thin: Vec<String> = commands
        .iter()
        .filter(|c| {
            let c: Vec<&str> = c.iter().map(String::as_str).collect();
            TABLE.iter().filter(|r| r.args.starts_with(&c)).count() < 4
        })
        .map(|c| c.join(" "))
        .collect();
    assert!(
        thin.is_empty(),
        "subcommands with fewer than 4 rows: {thin:?}"
    );
}

#[test]
fn measure_refuses_bad_input_by_contract() {
    walk(&["measure"]);
}

#[test]
fn profile_refuses_bad_input_by_contract() {
    walk(&["profile"]);
}

#[test]
fn predict_refuses_bad_input_by_contract() {
    walk(&["predict"]);
}

#[test]
fn simulate_refuses_bad_input_by_contract() {
    walk(&["simulate"]);
}

#[test]
fn plot_refuses_bad_input_by_contract() {
    walk(&["plot"]);
}

#[test]
fn run_refuses_bad_input_by_contract() {
    walk(&["run"]);
}

#[test]
fn import_zoo_refuses_bad_input_by_contract() {
    walk(&["import-zoo"]);
}

#[test]
fn dataset_refuses_bad_input_by_contract() {
    walk(&["dataset"]);
}

#[test]
fn workload_refuses_bad_input_by_contract() {
    walk(&["workload"]);
}

#[test]
fn trace_refuses_bad_input_by_contract() {
    walk(&["trace"]);
}

#[test]
fn slurm_refuses_bad_input_by_contract() {
    walk(&["slurm"]);
}

#[test]
fn recommend_refuses_bad_input_by_contract() {
    walk(&["recommend"]);
}

#[test]
fn completions_and_man_refuse_bad_input_by_contract() {
    walk(&["completions"]);
    walk(&["man"]);
}

#[test]
fn an_unknown_subcommand_is_refused_by_contract() {
    walk(&["nope"]);
}
