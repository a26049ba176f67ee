//! `synergy trace import` and `simulate --trace-format` on small files in each format's published layout
//! (tests/data/traces), awkward rows included: every field of a few jobs, what was dropped and why, and
//! bad input naming the file, line (or JSON path) and field.

use crate::common::{assert_input_error, run};
use std::path::{Path, PathBuf};

fn data(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/traces")
        .join(name)
        .display()
        .to_string()
}

fn zoo() -> String {
    crate::common::profiles().join("zoo").display().to_string()
}

/// Imports `files` as `format` with `extra` flags; the rows of the CSV and the JSON summary.
fn import(format: &str, files: &[&str], extra: &[&str]) -> (Vec<Vec<String>>, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let out: PathBuf = dir.path().join("t.csv");
    let zoo = zoo();
    let mut args = vec!["trace", "import", "--format", format, "--profiles", &zoo];
    let out_s = out.display().to_string();
    args.extend(["--out", &out_s, "--json"]);
    args.extend(files);
    args.extend(extra);
    let o = run(&args);
    assert!(o.status.success(), "{o:?}");
    let summary: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let text = std::fs::read_to_string(&out).unwrap();
    let rows = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    assert!(text
        .starts_with("id,model,arrival_s,iters,gpus,source_id,duration_s,req_cpus,req_mem_gb\n"));
    (rows, summary)
}

/// A row's (model, arrival_s, iters, gpus, source_id, duration_s, req_cpus, req_mem_gb).
fn row(rows: &[Vec<String>], source: &str) -> Vec<String> {
    rows.iter()
        .find(|r| r[5] == source)
        .unwrap_or_else(|| panic!("no job {source} in {rows:?}"))[1..]
        .to_vec()
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn philly_sums_attempts_counts_every_gpu_and_drops_jobs_that_never_ended() {
    let (rows, s) = import("philly", &[&data("philly.json")], &[]);
    // alexnet's zoo iteration is 0.6 s at proportional share: 1541 s is 2568 iterations; 2 machines x 2 GPUs.
    assert_eq!(
        row(&rows, "application_1506638472019_10238"),
        strs(&[
            "alexnet",
            "0",
            "2568",
            "4",
            "application_1506638472019_10238",
            "1541",
            "",
            ""
        ])
    );
    // Two attempts: 10 + 30 minutes, submitted 220 s after the first job.
    assert_eq!(
        row(&rows, "application_1506638472019_10239")[..6],
        strs(&[
            "gnmt",
            "220",
            "20000",
            "1",
            "application_1506638472019_10239",
            "2400"
        ])
    );
    // 16 GPUs on two machines, capped at the widest server's 8.
    assert_eq!(row(&rows, "application_1506638472019_10243")[3], "8");
    assert_eq!(rows.len(), 3, "the killed job is not completed");
    assert_eq!(s["read"], 7);
    assert_eq!(s["dropped"]["no attempt"], 1);
    assert_eq!(s["dropped"]["no attempt with an end time"], 2);
    assert_eq!(s["dropped"]["state cancelled"], 1);
    // Spread keeps the width the cluster can hold.
    let (rows, _) = import("philly", &[&data("philly.json")], &["--wide", "spread"]);
    assert_eq!(row(&rows, "application_1506638472019_10243")[3], "16");
}

#[test]
fn helios_and_acme_keep_requests_and_read_time_zones() {
    let (rows, s) = import("helios", &[&data("helios.csv")], &[]);
    assert_eq!(
        row(&rows, "8hPvq9"),
        strs(&["alexnet", "0", "8000", "1", "8hPvq9", "4800", "6", ""])
    );
    // No duration: end minus start. 30 minutes of m5 (0.6 s an iteration here).
    assert_eq!(row(&rows, "Rr5tY6")[3..6], strs(&["4", "Rr5tY6", "1800"]));
    assert_eq!(s["dropped"]["no GPU"], 1);
    assert_eq!(s["dropped"]["state cancelled"], 1);
    assert_eq!(s["dropped"]["state failed"], 1);
    assert_eq!(s["requests"]["jobs"], 2);
    let (rows, s) = import("acme", &[&data("acme.csv")], &[]);
    // 2023-05-31 16:10:00+00:00 is 00:10:00+08:00: it arrives 587 s after the first job.
    let sft = row(&rows, "dlc4r2yy");
    assert_eq!(sft[1], "587", "{sft:?}");
    assert_eq!(sft[3..7], strs(&["2", "dlc4r2yy", "1800", "16"]));
    assert_eq!(s["kept"], 2);
}

#[test]
fn sacct_folds_steps_reads_tres_and_takes_the_model_from_the_comment() {
    let (rows, s) = import("sacct", &[&data("jobs.sacct")], &[]);
    // synergy:res18 in the comment; 16G is 16 GiB = 17.18 GB.
    assert_eq!(
        row(&rows, "101"),
        strs(&["res18", "0", "2812", "1", "101", "1800", "4", "17.18"])
    );
    // gres/gpu:a100=2 counts as 2 GPUs; 32000M is 33.55 GB.
    assert_eq!(
        row(&rows, "102")[2..],
        strs(&["12000", "2", "102", "7200", "8", "33.554"])
    );
    assert_eq!(rows.len(), 2, "steps are not jobs: {rows:?}");
    assert_eq!(s["read"], 5);
    assert_eq!(s["dropped"]["no GPU"], 1, "{s}");
    let (rows, _) = import(
        "sacct",
        &[&data("jobs.sacct")],
        &["--states", "completed,timeout"],
    );
    assert_eq!(row(&rows, "105")[5], "600");
}

#[test]
fn sacct_folds_the_submissions_synergy_run_made_of_one_job() {
    // This cluster's own sacct rows of a `synergy run --backend slurm` (the model renamed to a zoo
    // one), the submissions of `first` out of order, then a later executor with the same pid and a
    // user's two jobs of one name, which are not folded.
    let (rows, s) = import("sacct", &[&data("resubmitted.sacct")], &[]);
    // 3 + 33 + 8 s; ended as its last submission (job 7, COMPLETED), not the last row (job 5);
    // the most cores and memory asked (10847M is 11.374 GB); res18's 0.64 s an iteration.
    assert_eq!(
        row(&rows, "4"),
        strs(&["res18", "0", "68", "1", "4", "44", "2", "11.374"])
    );
    assert_eq!(
        row(&rows, "8"),
        strs(&["res18", "50", "25", "2", "8", "16", "2", "22.749"])
    );
    // The same job name under another run mark is another job.
    assert_eq!(
        row(&rows, "31"),
        strs(&["res18", "5400", "62", "1", "31", "40", "1", "0.537"])
    );
    assert_eq!(row(&rows, "40")[4..6], strs(&["40", "30"]));
    assert_eq!(row(&rows, "41")[4..6], strs(&["41", "20"]));
    // `second` ended CANCELLED (the executor stopped it before its work was done).
    assert_eq!(rows.len(), 5, "{rows:?}");
    assert_eq!(s["read"], 6, "{s}");
    assert_eq!(s["dropped"]["state cancelled"], 1, "{s}");
    let (rows, _) = import("sacct", &[&data("resubmitted.sacct")], &["--states", "all"]);
    assert_eq!(row(&rows, "6")[4..6], strs(&["6", "8"]));
}

#[test]
fn gavel_tiresias_and_pai_name_their_models_or_tasks() {
    let (rows, _) = import("gavel", &[&data("gavel.trace")], &[]);
    // ResNet-18 is res18; total_steps are its iterations; the 11-field line (with a mode) reads too.
    assert_eq!(row(&rows, "1")[..4], strs(&["res18", "0", "8000", "1"]));
    assert_eq!(
        row(&rows, "2")[..4],
        strs(&["transformer", "4035.5", "12000", "4"])
    );
    assert_eq!(row(&rows, "4")[..4], strs(&["lstm", "9000", "3000", "2"]));
    let (rows, _) = import("tiresias", &[&data("tiresias.csv")], &["--model", "gnmt"]);
    assert_eq!(row(&rows, "1")[..4], strs(&["res50", "0", "4615", "1"]));
    // vgg19 is not in the catalog: the single-profile rule gives it gnmt.
    assert_eq!(row(&rows, "2")[0], "gnmt");
    let (rows, s) = import(
        "pai",
        &[&data("pai_task_table.csv"), &data("pai_job_table.csv")],
        &["--states", "all"],
    );
    // Two workers of one GPU and a GPU-less ps; 2x6 + 4 cores; run time from the first task start to the
    // last task end (3540 s).
    assert_eq!(
        row(&rows, "4b3e2f0ac4d6f0c8b1")[2..],
        strs(&["5900", "2", "4b3e2f0ac4d6f0c8b1", "3540", "16", "68.594"])
    );
    // Half a GPU takes one.
    assert_eq!(row(&rows, "9c1d2e3f4a5b6c7d8e")[3], "1");
    assert_eq!(s["dropped"]["no task in the task table"], 1);
}

#[test]
fn a_mapping_file_chooses_models_by_pattern() {
    let dir = tempfile::tempdir().unwrap();
    let map = dir.path().join("map.toml");
    std::fs::write(
        &map,
        "[[rule]]\nfield = \"queue\"\npattern = \"^vcY\"\nprofile = \"res50\"\n\n[[rule]]\nfield = \"user\"\npattern = \"uSX0J\"\nprofile = \"m5\"\n",
    )
    .unwrap();
    let m = map.display().to_string();
    let (rows, _) = import(
        "helios",
        &[&data("helios.csv")],
        &["--map", &m, "--states", "all"],
    );
    assert_eq!(row(&rows, "8hPvq9")[0], "m5");
    assert_eq!(row(&rows, "Zz9yX8")[0], "res50");
    std::fs::write(
        &map,
        "[[rule]]\nfield = \"queue\"\npattern = \"(\"\nprofile = \"res50\"\n",
    )
    .unwrap();
    assert_input_error(
        &[
            "trace",
            "import",
            "--format",
            "helios",
            &data("helios.csv"),
            "--profiles",
            &zoo(),
            "--map",
            &m,
        ],
        &[&m, "rule[0].pattern"],
    );
}

#[test]
fn simulate_reads_a_published_trace_directly() {
    let zoo = zoo();
    let o = run(&[
        "simulate",
        "--profiles",
        &zoo,
        "--trace",
        &data("helios.csv"),
        "--trace-format",
        "helios",
        "--servers",
        "2",
        "--json",
    ]);
    assert!(o.status.success(), "{o:?}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["jct"]["jobs"], 3, "{v}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("imported 3 of 6 jobs"));
}

#[test]
fn bad_traces_name_the_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let zoo = zoo();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let imp = |format: &str, file: &str| -> Vec<String> {
        [
            "trace",
            "import",
            "--format",
            format,
            file,
            "--profiles",
            &zoo,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let check = |args: Vec<String>, must: &[&str]| {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_input_error(&a, must);
    };
    // The wrong format: a Helios file read as sacct.
    let helios = data("helios.csv");
    check(
        imp("sacct", &helios),
        &[&helios, "line 1", "JobID", "--format"],
    );
    // A missing column.
    let f = write("h.csv", "job_id,user,vc,cpu_num,state,submit_time,duration\n1,u,v,1,COMPLETED,2020-04-01 00:00:00,5\n");
    check(imp("helios", &f), &[&f, "gpu_num"]);
    // A timestamp that does not parse.
    let f = write("t.csv", "job_id,gpu_num,state,submit_time,duration\n1,1,COMPLETED,2020-04-01 00:00:00,5\n2,1,COMPLETED,April 1st,5\n");
    check(
        imp("helios", &f),
        &[&f, "line 3", "submit_time", "April 1st"],
    );
    // A negative duration.
    let f = write(
        "n.csv",
        "job_id,gpu_num,state,submit_time,duration\n1,1,COMPLETED,2020-04-01 00:00:00,-5\n",
    );
    check(imp("helios", &f), &[&f, "line 2", "duration", "negative"]);
    // Philly: a bad time names the JSON path; a file that is not a job log says so.
    let f = write(
        "p.json",
        r#"[{"status":"Pass","jobid":"a","submitted_time":"2017-10-07 20:21:20","attempts":[{"start_time":"2017-10-07 20:23:05","end_time":"soon","detail":[]}]}]"#,
    );
    check(imp("philly", &f), &[&f, "[0].attempts[0].end_time", "soon"]);
    let f = write("q.json", r#"{"jobs": []}"#);
    check(imp("philly", &f), &[&f, "Philly job log"]);
    let f = write("r.json", r#"[{"status":"Pass","jobid":7}]"#);
    check(imp("philly", &f), &[&f, "[0].jobid"]);
    // An end before its start.
    let f = write("e.csv", "job_id,gpu_num,state,submit_time,start_time,end_time\n1,1,COMPLETED,2020-04-01 00:00:00,2020-04-01 00:10:00,2020-04-01 00:05:00\n");
    check(imp("helios", &f), &[&f, "line 2", "end_time"]);
    // PAI needs both tables.
    let jobs = data("pai_job_table.csv");
    check(imp("pai", &jobs), &["FILE", "both tables"]);
    // Flags.
    let mut a = imp("helios", &helios);
    a.extend(["--load-scale", "0"].map(String::from));
    check(a, &["--load-scale"]);
    let mut a = imp("helios", &helios);
    a.extend(["--from", "2020-05-01", "--to", "2020-04-01"].map(String::from));
    check(a, &["--from/--to"]);
    let mut a = imp("helios", &helios);
    a.extend(["--states", "done"].map(String::from));
    check(a, &["--states", "done"]);
    let mut a = imp("helios", &helios);
    a.extend(["--model", "vgg99"].map(String::from));
    check(a, &["--map or --model", "vgg99"]);
    // Nothing kept says why.
    let mut a = imp("helios", &helios);
    a.extend(["--from", "2021-01-01"].map(String::from));
    check(a, &[&helios, "outside the time window"]);
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        7,
        "no output appeared"
    );
}

#[test]
fn machine_lists_become_cluster_files_that_simulate_reads() {
    let dir = tempfile::tempdir().unwrap();
    let zoo = zoo();
    // (format, file, the cluster's servers as (count, gpus, cpus, memory_gb))
    let cases = [
        (
            "philly",
            "cluster_machine_list",
            vec![(2, 8, 24.0, 500.0), (1, 2, 6.0, 125.0)],
        ),
        (
            "pai",
            "pai_machine_spec.csv",
            vec![(2, 8, 96.0, 512.0), (1, 2, 96.0, 512.0)],
        ),
        // 515000 MiB is 540.017 GB; the CPU-only node is left out.
        (
            "sinfo",
            "nodes.sinfo",
            vec![(2, 8, 64.0, 540.017), (1, 4, 32.0, 269.484)],
        ),
    ];
    for (format, file, want) in cases {
        let out = dir.path().join(format!("{format}.toml"));
        let out_s = out.display().to_string();
        let o = run(&[
            "trace",
            "cluster",
            "--format",
            format,
            &data(file),
            "--out",
            &out_s,
        ]);
        assert!(o.status.success(), "{o:?}");
        let v: toml::Value = toml::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        let got: Vec<(i64, i64, f64, f64)> = v["servers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["count"].as_integer().unwrap(),
                    s["gpus"].as_integer().unwrap(),
                    s["cpus"].as_float().unwrap(),
                    s["memory_gb"].as_float().unwrap(),
                )
            })
            .collect();
        let want: Vec<(i64, i64, f64, f64)> = want.into_iter().collect();
        assert_eq!(got, want, "{format}");
        // The cluster file is one simulate takes.
        let o = run(&[
            "simulate",
            "--profiles",
            &zoo,
            "--cluster",
            &out_s,
            "--trace",
            &data("helios.csv"),
            "--trace-format",
            "helios",
            "--json",
        ]);
        assert!(o.status.success(), "{format}: {o:?}");
    }
    let bad = dir.path().join("bad.sinfo");
    std::fs::write(&bad, "node01 64 lots gpu:8\n").unwrap();
    let b = bad.display().to_string();
    assert_input_error(
        &["trace", "cluster", "--format", "sinfo", &b],
        &[&b, "line 1", "memory", "lots"],
    );
    std::fs::write(&bad, "cpu01 128 1030000 (null)\n").unwrap();
    assert_input_error(
        &["trace", "cluster", "--format", "sinfo", &b],
        &[&b, "no machine with a GPU"],
    );
}
