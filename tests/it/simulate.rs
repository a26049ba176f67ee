//! The simulator against its invariants (seeded random traces), a hand-checked trace, and the command
//! line's handling of bad input.

use crate::common;

use crate::common::assert_input_error;

use synergy::format::trace::TraceJob;
use synergy::sched::catalog::{Catalog, JobModel};
use synergy::sched::cluster::{ClusterConfig, ClusterState, ServerSpec};
use synergy::sched::place::speeds;
use synergy::sched::{
    mechanism_by_name, policy_by_name, Grant, Mechanism, MechanismStats, Proportional, Request,
    MECHANISMS, POLICIES,
};
use synergy::sim::trace::{GenConfig, GpuMode, JobListSeed};
use synergy::sim::{run, SimConfig, SimSemantics, TraceSource};

fn zoo() -> Catalog {
    Catalog::load_dir(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles/zoo"))
        .expect("the shipped zoo profiles load")
}

/// Wraps a mechanism and checks every round it allocates, independently of the cluster's own books.
struct Checked {
    inner: Box<dyn Mechanism>,
    tune_guarantee: bool,
    rounds: u64,
}

impl Mechanism for Checked {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn allocate(
        &mut self,
        catalog: &Catalog,
        state: &mut ClusterState,
        runnable: &[Request],
        grants: &mut [Grant],
    ) -> MechanismStats {
        let stats = self.inner.allocate(catalog, state, runnable, grants);
        self.rounds += 1;
        assert!(state.consistent(), "free vectors out of range");
        let n = state.specs.len();
        let (mut g, mut c, mut m) = (vec![0u32; n], vec![0.0; n], vec![0.0; n]);
        for (req, grant) in runnable.iter().zip(grants.iter()) {
            let (gpus, _, _) = grant.totals();
            assert!(
                gpus == 0 || gpus == req.gpus,
                "a job got {gpus} of {} GPUs",
                req.gpus
            );
            for p in &grant.parts {
                g[p.server as usize] += p.gpus;
                c[p.server as usize] += p.cpus;
                m[p.server as usize] += p.memory_gib;
            }
            if self.tune_guarantee {
                assert_eq!(gpus, req.gpus, "a runnable job was left out");
                let (speed, prop) = speeds(catalog, state, req, &grant.parts);
                assert!(speed + 1e-9 >= prop, "tune ran a job at {speed} < {prop}");
            }
        }
        if self.tune_guarantee {
            // The jobs served must be exactly those GPU-proportional serves from the same queue.
            let mut fresh = state.clone();
            fresh.reset();
            let mut pg = vec![Grant::default(); runnable.len()];
            Proportional.allocate(catalog, &mut fresh, runnable, &mut pg);
            for (a, b) in grants.iter().zip(&pg) {
                assert_eq!(
                    a.parts.is_empty(),
                    b.parts.is_empty(),
                    "runnable sets differ"
                );
            }
        }
        for (i, s) in state.specs.iter().enumerate() {
            assert!(g[i] <= s.gpus, "server {i}: {} GPUs of {}", g[i], s.gpus);
            assert!(
                c[i] <= s.cpus + 1e-6,
                "server {i}: {} cores of {}",
                c[i],
                s.cpus
            );
            assert!(
                m[i] <= s.memory_gib + 1e-6,
                "server {i}: {} GiB of {}",
                m[i],
                s.memory_gib
            );
        }
        stats
    }
}

fn small_cluster() -> ClusterConfig {
    ClusterConfig::uniform(4, 8, 24.0, 500.0)
}

fn gen(seed: u64, jobs: u64, load: f64, multi: bool) -> TraceSource {
    TraceSource::Generated(GenConfig {
        seed,
        job_list_seed: JobListSeed::Run,
        load_jobs_per_h: load,
        split: [20.0, 70.0, 10.0],
        gpu_mode: if multi {
            GpuMode::Multi
        } else {
            GpuMode::Single
        },
        jobs: Some(jobs),
    })
}

fn cfg(cluster: ClusterConfig) -> SimConfig {
    cfg_with(cluster, SimSemantics::SYNERGY)
}

fn cfg_with(cluster: ClusterConfig, semantics: SimSemantics) -> SimConfig {
    SimConfig {
        cluster,
        round_s: 300.0,
        window: None,
        record_rounds: true,
        record_jobs: true,
        semantics,
    }
}

/// Both sets of scheduling rules (docs/simulate.md, "Two semantics").
const BOTH: [SimSemantics; 2] = [SimSemantics::SYNERGY, SimSemantics::REFERENCE];

#[test]
fn no_server_is_over_allocated_and_every_job_finishes() {
    let _host = common::shared();
    let catalog = zoo();
    for (seed, sem) in (1..=3u64).flat_map(|s| BOTH.map(|sem| (s, sem))) {
        for mech in MECHANISMS {
            for policy in POLICIES {
                let multi = seed % 2 == 1;
                let mut m = Checked {
                    inner: mechanism_by_name(mech).unwrap(),
                    tune_guarantee: false,
                    rounds: 0,
                };
                let p = policy_by_name(policy).unwrap();
                let r = run(
                    &catalog,
                    &cfg_with(small_cluster(), sem),
                    gen(seed, 150, 4.0, multi),
                    p.as_ref(),
                    &mut m,
                )
                .unwrap();
                assert!(m.rounds > 0);
                assert_eq!(
                    r.jobs.len(),
                    150,
                    "{policy}/{mech} seed {seed} ({}): not every job finished",
                    sem.name()
                );
                assert!(r
                    .jobs
                    .iter()
                    .all(|j| j.jct_s > 0.0 && j.finish_s >= j.start_s));
            }
        }
    }
}

#[test]
fn tune_never_runs_a_job_below_proportional_and_serves_the_same_jobs() {
    let _host = common::shared();
    let catalog = zoo();
    // A mixed-shape cluster makes placement harder than the paper's.
    let cluster = ClusterConfig {
        servers: vec![
            ServerSpec {
                gpus: 8,
                cpus: 24.0,
                memory_gib: 465.0,
            },
            ServerSpec {
                gpus: 4,
                cpus: 8.0,
                memory_gib: 200.0,
            },
            ServerSpec {
                gpus: 8,
                cpus: 32.0,
                memory_gib: 300.0,
            },
        ],
    };
    for (seed, sem) in (1..=4u64).flat_map(|s| BOTH.map(|sem| (s, sem))) {
        for mech in ["tune", "opt"] {
            let mut m = Checked {
                inner: mechanism_by_name(mech).unwrap(),
                tune_guarantee: true,
                rounds: 0,
            };
            let p = policy_by_name("las").unwrap();
            let r = run(
                &catalog,
                &cfg_with(cluster.clone(), sem),
                gen(seed, 120, 3.0, true),
                p.as_ref(),
                &mut m,
            )
            .unwrap();
            assert_eq!(r.jobs.len(), 120);
            assert!(m.rounds > 10);
        }
    }
}

#[test]
fn a_seed_gives_identical_results() {
    let _host = common::shared();
    let catalog = zoo();
    for mech in MECHANISMS {
        let once = || {
            let mut m = mechanism_by_name(mech).unwrap();
            let p = policy_by_name("ftf").unwrap();
            run(
                &catalog,
                &cfg(small_cluster()),
                gen(7, 200, 5.0, true),
                p.as_ref(),
                m.as_mut(),
            )
            .unwrap()
        };
        let (a, b) = (once(), once());
        assert_eq!(a.jobs, b.jobs, "{mech}");
        assert_eq!(a.summary.jct, b.summary.jct, "{mech}");
        let other = {
            let mut m = mechanism_by_name(mech).unwrap();
            let p = policy_by_name("ftf").unwrap();
            run(
                &catalog,
                &cfg(small_cluster()),
                gen(8, 200, 5.0, true),
                p.as_ref(),
                m.as_mut(),
            )
            .unwrap()
        };
        assert_ne!(a.jobs, other.jobs, "{mech}: another seed should differ");
    }
}

fn hand_catalog() -> Catalog {
    Catalog::new(vec![
        JobModel {
            name: "img".into(),
            class: "image".into(),
            iter_time_s: 1.0,
            cpus_axis: vec![4.0, 6.0],
            memory_gib_axis: vec![50.0, 100.0],
            normalized: vec![vec![1.0, 1.0], vec![2.0, 2.0]],
            best_cpus_per_gpu: 6.0,
            best_memory_gib_per_gpu: 50.0,
            footprint_gib_per_gpu: None,
            path: "img.json".into(),
        },
        JobModel {
            name: "lang".into(),
            class: "language".into(),
            iter_time_s: 0.5,
            cpus_axis: vec![1.0, 4.0],
            memory_gib_axis: vec![10.0, 50.0],
            normalized: vec![vec![1.0, 1.0], vec![1.0, 1.0]],
            best_cpus_per_gpu: 1.0,
            best_memory_gib_per_gpu: 10.0,
            footprint_gib_per_gpu: None,
            path: "lang.json".into(),
        },
    ])
    .unwrap()
}

/// One server with 2 GPUs, 8 cores, 100 GiB: GPU-proportional is 4 cores and 50 GiB per GPU.
fn hand_run(mech: &str) -> Vec<(u64, f64)> {
    let c = hand_catalog();
    let (img, lang) = (
        c.index("img").unwrap() as u32,
        c.index("lang").unwrap() as u32,
    );
    let jobs = vec![
        TraceJob {
            id: 0,
            model: img,
            arrival_s: 0.0,
            iters: 1200,
            gpus: 1,
        },
        TraceJob {
            id: 1,
            model: lang,
            arrival_s: 0.0,
            iters: 1200,
            gpus: 1,
        },
        TraceJob {
            id: 2,
            model: img,
            arrival_s: 10.0,
            iters: 300,
            gpus: 1,
        },
    ];
    let cfg = cfg(ClusterConfig {
        servers: vec![ServerSpec {
            gpus: 2,
            cpus: 8.0,
            memory_gib: 100.0,
        }],
    });
    let mut m = mechanism_by_name(mech).unwrap();
    let r = run(
        &c,
        &cfg,
        TraceSource::Jobs(jobs),
        policy_by_name("fifo").unwrap().as_ref(),
        m.as_mut(),
    )
    .unwrap();
    let mut out: Vec<(u64, f64)> = r.jobs.iter().map(|j| (j.id, j.jct_s)).collect();
    out.sort_by_key(|x| x.0);
    out
}

#[test]
fn hand_checked_trace() {
    let _host = common::shared();
    // Proportional: every job at speed 1.
    //   t=0:   jobs 0 and 1 run (job 2 arrives at 10 s, no GPU left). 0: 300 of 1200 iterations; 1: 600 of
    //          1200 (0.5 s per iteration).
    //   t=300: FIFO keeps 0 and 1. Job 1 finishes its last 600 at 300 + 600 x 0.5 = 600 s: JCT 600.
    //          Job 0 reaches 600.
    //   t=600: jobs 0 and 2. Job 2 finishes at 600 + 300 = 900: JCT 890. Job 0 reaches 900.
    //   t=900: job 0 finishes at 1200: JCT 1200.
    assert_eq!(
        hand_run("proportional"),
        vec![(0, 1200.0), (1, 600.0), (2, 890.0)]
    );
    // Tune: job 0 gets its best 6 cores (speed 2, 600 iterations a round); job 1 its best 1 core and 10
    // GiB, which still fit beside it. Both finish at 600 s. Job 2 runs alone from 600 s at speed 2 and
    // finishes at 600 + 300 / 2 = 750: JCT 740.
    assert_eq!(hand_run("tune"), vec![(0, 600.0), (1, 600.0), (2, 740.0)]);
    assert_eq!(hand_run("greedy"), vec![(0, 600.0), (1, 600.0), (2, 740.0)]);
    assert_eq!(hand_run("opt"), vec![(0, 600.0), (1, 600.0), (2, 740.0)]);
}

/// The JCTs of the paper default (128 GPUs, 9 jobs/h, single-GPU jobs, split 20/70/10, window 4000-4999)
/// over the reference's job list, with the run's seed.
fn paper_default(policy: &str, mech: &str, seed: u64) -> synergy::sim::metrics::JctStats {
    let mut cfg = SimConfig::paper_default();
    cfg.record_rounds = false;
    let g = GenConfig {
        seed,
        job_list_seed: JobListSeed::Fixed(42),
        load_jobs_per_h: 9.0,
        split: [20.0, 70.0, 10.0],
        gpu_mode: GpuMode::Single,
        jobs: None,
    };
    let p = policy_by_name(policy).unwrap();
    let mut m = mechanism_by_name(mech).unwrap();
    run(
        &zoo(),
        &cfg,
        TraceSource::Generated(g),
        p.as_ref(),
        m.as_mut(),
    )
    .unwrap()
    .summary
    .jct
}

fn near(ours: f64, published: f64, tolerance: f64, what: &str) {
    assert!(
        (ours / published - 1.0).abs() <= tolerance,
        "{what}: {ours:.2} h, published {published} h"
    );
}

/// The generator draws the reference simulator's random streams, so its default seed (42) replays the run
/// behind the published paper-default figures (docs/architecture.md §5.6): FIFO 81 h -> 22 h, greedy 25 h; SRTF 38 h
/// -> 16.6 h with p99 1,158 h -> 182 h; LAS 86 h -> 33 h.
#[test]
fn seed_42_replays_the_published_paper_default() {
    let _host = common::shared();
    let jct = |policy: &str, mech: &str| paper_default(policy, mech, 42);
    let (prop, tune) = (jct("fifo", "proportional"), jct("fifo", "tune"));
    near(prop.mean_h, 81.0, 0.03, "FIFO proportional mean");
    near(tune.mean_h, 22.0, 0.03, "FIFO tune mean");
    assert!(prop.mean_h >= 3.0 * tune.mean_h);
    near(jct("fifo", "greedy").mean_h, 25.0, 0.05, "FIFO greedy mean");
    let (prop, tune) = (jct("srtf", "proportional"), jct("srtf", "tune"));
    near(prop.mean_h, 38.0, 0.03, "SRTF proportional mean");
    near(tune.mean_h, 16.6, 0.03, "SRTF tune mean");
    near(prop.p99_h, 1158.0, 0.03, "SRTF proportional p99");
    near(tune.p99_h, 182.0, 0.1, "SRTF tune p99");
    near(
        jct("las", "proportional").mean_h,
        86.0,
        0.03,
        "LAS proportional mean",
    );
    near(jct("las", "tune").mean_h, 33.0, 0.05, "LAS tune mean");
}

/// Issue 4's criterion: over five seeds (arrivals drawn anew, the reference's job list kept, as the
/// reference runs them), FIFO tune is at least 3x better than proportional and each mean is within 20% of
/// the published one.
#[test]
fn five_seeds_average_to_the_published_means() {
    let _host = common::shared();
    let mean = |mech: &str| {
        (42..47)
            .map(|seed| paper_default("fifo", mech, seed).mean_h)
            .sum::<f64>()
            / 5.0
    };
    let (prop, tune) = (mean("proportional"), mean("tune"));
    near(prop, 81.0, 0.2, "FIFO proportional, mean of seeds 42-46");
    near(tune, 22.0, 0.2, "FIFO tune, mean of seeds 42-46");
    assert!(prop >= 3.0 * tune, "{prop:.1} h vs {tune:.1} h");
}

// ---- the command line ----

fn write(dir: &std::path::Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

fn profiles_dir() -> String {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("profiles/zoo")
        .display()
        .to_string()
}

const HEADER: &str = "id,model,arrival_s,iters,gpus\n";

#[test]
fn bad_traces_name_the_line_and_field() {
    let _host = common::shared();
    let d = tempfile::tempdir().unwrap();
    let p = profiles_dir();
    let cases: [(&str, &str, &[&str]); 6] = [
        (
            "unknown.csv",
            "0,gnmt,0,10,1\n1,bert,5,10,1\n",
            &["line 3", "model", "bert"],
        ),
        (
            "negative.csv",
            "0,gnmt,-5,10,1\n",
            &["line 2", "arrival_s", "-5"],
        ),
        (
            "nonnumeric.csv",
            "0,gnmt,0,lots,1\n",
            &["line 2", "iters", "lots"],
        ),
        (
            "wide.csv",
            "0,gnmt,0,10,512\n",
            &["line 2", "gpus", "wider than the cluster"],
        ),
        ("empty.csv", "", &["empty"]),
        ("header.csv", "HEADER_ONLY", &["no jobs"]),
    ];
    for (name, body, mention) in cases {
        let text = match body {
            "" => String::new(),
            "HEADER_ONLY" => HEADER.to_string(),
            b => format!("{HEADER}{b}"),
        };
        let t = write(d.path(), name, &text);
        let mut want = vec![t.as_str()];
        want.extend_from_slice(mention);
        assert_input_error(&["simulate", "--profiles", &p, "--trace", &t], &want);
    }
}

#[test]
fn malformed_cluster_files_and_flags_are_refused() {
    let _host = common::shared();
    let d = tempfile::tempdir().unwrap();
    let p = profiles_dir();
    let c = write(
        d.path(),
        "c.toml",
        "[[servers]]\ngpus = 8\ncpus = 'many'\nmemory_gb = 500\n",
    );
    assert_input_error(
        &["simulate", "--profiles", &p, "--cluster", &c],
        &[&c, "line 3"],
    );
    let c = write(d.path(), "m.toml", "[[servers]]\ngpus = 8\ncpus = 24\n");
    assert_input_error(
        &["simulate", "--profiles", &p, "--cluster", &c],
        &[&c, "memory_gb"],
    );
    assert_input_error(
        &["simulate", "--profiles", &p, "--policy", "lottery"],
        &["--policy", "lottery"],
    );
    assert_input_error(&["simulate", "--profiles", &p, "--load=-3"], &["--load"]);
    assert_input_error(
        &["simulate", "--profiles", &p, "--job-list-seed", "twelve"],
        &["--job-list-seed", "twelve"],
    );
    assert_input_error(
        &["simulate", "--profiles", &p, "--semantics", "gavel"],
        &["--semantics", "gavel", "synergy, reference"],
    );
    assert_input_error(
        &["simulate", "--profiles", "/nonexistent-dir"],
        &["/nonexistent-dir"],
    );
}

#[test]
fn a_trace_file_runs_and_writes_its_outputs() {
    let _host = common::shared();
    let d = tempfile::tempdir().unwrap();
    let t = write(
        d.path(),
        "t.csv",
        "id,model,arrival_s,iters,gpus\n0,alexnet,.123,3349,4\n1,gnmt,.286,26435,1\n2,transformer,.317,13451,2\n",
    );
    let out_dir = d.path().join("out");
    let out = common::run(&[
        "simulate",
        "--profiles",
        &profiles_dir(),
        "--trace",
        &t,
        "--mechanism",
        "tune",
        "--json",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["jct"]["jobs"], 3);
    for f in ["jobs.csv", "rounds.csv", "summary.json"] {
        assert!(out_dir.join(f).exists(), "{f}");
    }
    let jobs = std::fs::read_to_string(out_dir.join("jobs.csv")).unwrap();
    assert_eq!(jobs.lines().count(), 4);
    // The Parquet tables hold the same rows as the CSV ones, readable by any Parquet reader.
    use parquet::file::reader::{FileReader, SerializedFileReader};
    for (name, rows) in [
        ("jobs", 3),
        (
            "rounds",
            std::fs::read_to_string(out_dir.join("rounds.csv"))
                .unwrap()
                .lines()
                .count()
                - 1,
        ),
    ] {
        let f = std::fs::File::open(out_dir.join(format!("{name}.parquet"))).unwrap();
        let reader = SerializedFileReader::new(f).unwrap();
        assert_eq!(
            reader.metadata().file_metadata().num_rows(),
            rows as i64,
            "{name}.parquet"
        );
    }
}

/// A trace in arrival order is read as the run goes; the same rows in another order are held and sorted
/// (docs/simulate.md, "Inputs"). Both must simulate the same jobs the same way: the per-job table and the
/// summary (timing fields aside) are identical, in a window that does not start at the first job.
#[test]
fn a_trace_read_as_it_goes_simulates_as_the_same_trace_held_whole() {
    let _host = common::shared();
    let d = tempfile::tempdir().unwrap();
    let models = ["alexnet", "gnmt", "transformer", "res18", "lstm"];
    let mut rows: Vec<String> = (0..400u64)
        .map(|i| {
            format!(
                "{i},{},{:.3},{},{}",
                models[(i * 7 % 5) as usize],
                i as f64 * 97.5 + (i % 3) as f64,
                2000 + i * 37 % 9000,
                [1, 1, 2, 4, 8][(i * 3 % 5) as usize]
            )
        })
        .collect();
    let ordered = write(
        d.path(),
        "ordered.csv",
        &format!("{HEADER}{}\n", rows.join("\n")),
    );
    // A fixed permutation: every row moves.
    rows.reverse();
    rows.rotate_left(133);
    let shuffled = write(
        d.path(),
        "shuffled.csv",
        &format!("{HEADER}{}\n", rows.join("\n")),
    );
    let run = |trace: &str, out: &str| {
        let out_dir = d.path().join(out);
        let o = common::run(&[
            "simulate",
            "--profiles",
            &profiles_dir(),
            "--trace",
            trace,
            "--servers",
            "4",
            "--mechanism",
            "tune",
            "--window",
            "50-349",
            "--json",
            "--out",
            out_dir.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let mut v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        for k in ["wall_s", "job_rounds_per_s"] {
            v.as_object_mut().unwrap().remove(k);
        }
        (
            v,
            std::fs::read_to_string(out_dir.join("jobs.csv")).unwrap(),
        )
    };
    let (a, a_jobs) = run(&ordered, "a");
    let (b, b_jobs) = run(&shuffled, "b");
    assert_eq!(a["jct"]["jobs"], 300, "{a}");
    assert_eq!(a, b);
    assert_eq!(a_jobs, b_jobs);
}
