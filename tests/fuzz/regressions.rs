//! Inputs that once failed, run before the random ones.

/// Inputs that once panicked or were refused without naming the field, per parser: they run before the
/// random ones, so a fix that regresses fails at once and by name.
pub(crate) const REGRESSIONS: &[(&str, &str, &str)] = &[
    // (parser, what it once did, input)
    (
        "machines",
        "a GPU machine with no memory was accepted, and made a cluster of machines of none",
        "2\nn1 4 0 gpu:2\n",
    ),
    (
        "run-state",
        "an allocation of the wrong shape said `data did not match any variant of untagged enum`",
        r#"{"schema": "synergy-run-state/1", "job_list": "j", "backend": "local", "policy": "fifo", "mechanism": "tune", "round_s": 1.0, "started_unix_s": 1.0, "executor_pid": 1, "jobs": [{"name": "a", "status": "running", "samples_done": 0, "retries": 0, "restarts": 0, "rounds_run": 0, "attained_s": 0.0, "allocation": 5}]}"#,
    ),
    (
        "size",
        "2^64 bytes was accepted as u64::MAX (saturated) instead of refused",
        "18446744073709551616",
    ),
    (
        "rate",
        "a rate with no number named the empty string, not the flag's value",
        "/s",
    ),
    (
        "server-shape",
        "0.5gpu was refused as if the GPUs were missing; 1.5gpu was taken as 1",
        "0.5gpu,24cpu,500gb",
    ),
    ("server-shape", "1.5gpu was taken as 1 GPU", "1.5gpu,24cpu,500gb"),
    (
        "server-shape",
        "more GPUs than a u32 holds were taken as 4294967295",
        "99999999999gpu,24cpu,500gb",
    ),
    (
        "spec",
        "a negative size said `data did not match any variant of untagged enum Raw`",
        "name = 'x'\ncommand = ['true']\nbatch_size = 1\nfootprint = -1\n",
    ),
    (
        "spec",
        "a size of the wrong type said `data did not match any variant of untagged enum Raw`",
        "name = 'x'\ncommand = ['true']\nbatch_size = 1\n[dataset]\npath = 'd'\ngenerate = { kind = 'image', size = 1.5 }\n",
    ),
    (
        "cluster",
        "4 billion servers were built one by one (minutes, then out of memory)",
        "[[servers]]\ncount = 4000000000\ngpus = 8\ncpus = 24\nmemory_gb = 500\n",
    ),
    (
        "cluster",
        "cores that overflow to infinity in total were accepted",
        "[[servers]]\ncount = 2\ngpus = 8\ncpus = 1e308\nmemory_gb = 500\n",
    ),
    (
        "profile",
        "a field missing at the top level was named as field `.`",
        "{\"schema\": \"synergy-profile/1.2\"}",
    ),
    (
        "profile",
        "an unknown empty key at the top level was named as field ``",
        "{\"\": 1, \"schema\": \"synergy-profile/1.2\"}",
    ),
    (
        "jobs",
        "a workload that is a directory said `Is a directory (os error 21)`, naming no job or field",
        "profiles = \"../profiles\"\n[[job]]\nname = \"a\"\nworkload = \"../profiles\"\nsamples = 5\n",
    ),
    (
        "spec",
        "a footprint of inf said `data did not match any variant of untagged enum Raw`",
        "name = 'x'\ncommand = ['true']\nbatch_size = 1\nfootprint = inf\n",
    ),
    (
        "jobs",
        "steps times the batch size overflowed u64 (a panic in a debug build, wrapped work in release)",
        "profiles = \"../profiles\"\n[[job]]\nname = \"a\"\nworkload = \"../workloads/image.toml\"\nsteps = 1000000000000000000\n",
    ),
];

/// Profile regressions, as edits of the shipped `profiles/image.json` (a JSON pointer and the value put
/// there): what each once did.
pub(crate) const PROFILE_REGRESSIONS: &[(&str, &str, &str)] = &[
    (
        "a CPU curve point of -0.5 samples/s was accepted, and predicted negative throughput",
        "/model/cpu/points/0/samples_per_s",
        "-0.5",
    ),
    (
        "a proportional rate of 5e-324 samples/s was accepted, and every normalized prediction was infinite",
        "/matrix/proportional/samples_per_s",
        "5e-324",
    ),
    (
        "465.66118446744076 read back as another number after writing (serde_json's default float parser)",
        "/server/memory_gib",
        "465.66118446744076",
    ),
];
