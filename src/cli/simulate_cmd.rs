//! `synergy simulate`: a cluster over a trace file, a generated trace, or a job list, for every
//! combination of the policies, mechanisms, loads and seeds given. [`sweep_settings`] turns what was
//! typed into checked values; the named steps below build the [`SimConfig`] and trace, run the sweep and
//! write what was asked for; [`render`] words the summaries.

use super::args::SimulateArgs;
use super::render::{self, SimRun};
use super::values::{cluster_from_flags, parse_list};
use crate::error::InputError;
use crate::sched::{Catalog, ClusterConfig};
use crate::sim::sweep::Point;
use crate::sim::trace::{self, GenConfig, GpuMode, JobListSeed};
use crate::sim::{self, SimConfig, SimSemantics, TraceSource};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// What `simulate`'s flags ask for, checked: the sweep's axes and the cluster.
struct SweepSettings {
    policies: Vec<String>,
    mechanisms: Vec<String>,
    loads: Vec<f64>,
    seeds: Vec<u64>,
    job_list_seed: JobListSeed,
    split: [f64; 3],
    cluster: ClusterConfig,
    semantics: SimSemantics,
}

/// Runs `simulate`.
pub(super) fn simulate_cmd(args: SimulateArgs) -> anyhow::Result<i32> {
    let s = sweep_settings(&args)?;
    if let Some(path) = &args.jobs_list {
        return simulate_job_list(path, &s, &args);
    }
    let catalog = Catalog::load_dir(&args.profiles)?;
    catalog.check_footprints(&s.cluster)?;
    let window = window_of(&args)?;
    let source = trace_source(&args, &s, &catalog)?;
    let generated = matches!(source, TraceSource::Generated(_));
    let cfg = SimConfig {
        cluster: s.cluster.clone(),
        round_s: args.round_s,
        window,
        // Per-round and per-job records go to --out and --plot as they come (`PointOutputs`), so the
        // results keep none.
        record_rounds: false,
        record_jobs: false,
        semantics: s.semantics,
    };
    // Claimed before the minutes of simulating, so that a second run into the same directory is refused
    // at once.
    let staged = args
        .out
        .as_deref()
        .map(sim::output::begin_out_dir)
        .transpose()?;
    let points = sweep_points(&s, generated);
    let threads = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    let progress = Progress::new();
    let job_list_seed = |p: &Point| generated.then(|| s.job_list_seed.for_run(p.seed));
    let outputs = |_: usize, p: &Point| -> Result<PointOutputs, sim::SimError> {
        let out = match &staged {
            Some(staged) => Some(point_out_dir(
                staged.path(),
                p,
                points.len(),
                job_list_seed(p),
                &cfg.cluster,
            )?),
            None => None,
        };
        let charts = args.plot.is_some().then(|| {
            crate::plot::Gather::new(
                generated.then_some(p.load_jobs_per_h),
                generated.then_some(p.seed),
                capacity(&cfg.cluster),
            )
        });
        Ok((out, charts))
    };
    let results = sim::sweep::sweep(
        &catalog, &cfg, &source, &points, threads, &progress, &outputs,
    );
    progress.bar.finish_and_clear();
    let (results, outputs): (Vec<_>, Vec<PointOutputs>) = results?.into_iter().unzip();
    if let Some(staged) = staged {
        staged.commit().map_err(|e| sim::SimError::Io {
            context: "writing the simulation's output".to_string(),
            source: e,
        })?;
    }
    let runs: Vec<SimRun<'_>> = points
        .iter()
        .zip(&results)
        .map(|(point, result)| SimRun {
            point,
            result,
            job_list_seed: job_list_seed(point),
        })
        .collect();
    if let Some(dir) = &args.plot {
        let data: Vec<_> = outputs
            .into_iter()
            .filter_map(|(_, charts)| charts.map(crate::plot::Gather::into_run))
            .collect();
        for path in crate::plot::simulation_charts(&data, dir, crate::plot::Size::DEFAULT)? {
            eprintln!("synergy: wrote {}", path.display());
        }
    }
    out!("{}", render::render_simulation(&runs, args.json)?)?;
    Ok(0)
}

/// The progress of a run or a sweep on stderr, once it has taken a few seconds and only on a terminal
/// (indicatif draws nothing elsewhere): measured jobs finished of all, with an estimate of the time left,
/// the simulated time the furthest run has reached, and rounds per second over the sweep.
struct Progress {
    bar: indicatif::ProgressBar,
    started: std::time::Instant,
    shown: AtomicBool,
    rounds: AtomicU64,
    /// The furthest simulated time reached, seconds, as f64 bits (non-negative floats order as their
    /// bits do).
    now_s_bits: AtomicU64,
}

/// How long a run goes before its progress shows.
const PROGRESS_AFTER: std::time::Duration = std::time::Duration::from_secs(2);

impl Progress {
    fn new() -> Progress {
        let bar = indicatif::ProgressBar::with_draw_target(
            Some(0),
            indicatif::ProgressDrawTarget::hidden(),
        );
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "[{elapsed_precise}] {pos}/{len} jobs finished (ETA {eta}) {wide_msg}",
        ) {
            bar.set_style(style);
        }
        Progress {
            bar,
            started: std::time::Instant::now(),
            shown: AtomicBool::new(false),
            rounds: AtomicU64::new(0),
            now_s_bits: AtomicU64::new(0),
        }
    }
}

impl sim::Watch for Progress {
    fn started(&self, jobs: u64) {
        self.bar.inc_length(jobs);
    }

    fn advanced(&self, jobs: u64, rounds: u64, now_s: f64) {
        let rounds = self.rounds.fetch_add(rounds, Ordering::Relaxed) + rounds;
        let now_s = f64::from_bits(
            self.now_s_bits
                .fetch_max(now_s.max(0.0).to_bits(), Ordering::Relaxed)
                .max(now_s.max(0.0).to_bits()),
        );
        let elapsed = self.started.elapsed();
        if elapsed >= PROGRESS_AFTER && !self.shown.swap(true, Ordering::Relaxed) {
            self.bar
                .set_draw_target(indicatif::ProgressDrawTarget::stderr());
        }
        self.bar.set_message(format!(
            "simulated {:.0} h, {:.0} rounds/s",
            now_s / 3600.0,
            rounds as f64 / elapsed.as_secs_f64().max(1e-9)
        ));
        self.bar.inc(jobs);
    }
}

/// Every flag but the trace's and the window's, checked in the order they are documented.
fn sweep_settings(args: &SimulateArgs) -> Result<SweepSettings, InputError> {
    let policies: Vec<String> = parse_list("--policy", &args.policy, "a policy")?;
    for p in &policies {
        crate::sched::policy_by_name(p)?;
    }
    let mechanisms: Vec<String> = parse_list("--mechanism", &args.mechanism, "a mechanism")?;
    for m in &mechanisms {
        crate::sched::mechanism_by_name(m)?;
    }
    let loads: Vec<f64> = parse_list("--load", &args.load, "a number of jobs per hour")?;
    if loads.iter().any(|l| !(l.is_finite() && *l > 0.0)) {
        return Err(InputError::new("--load", "loads must be positive"));
    }
    let seeds: Vec<u64> = parse_list("--seed", &args.seed, "a non-negative integer")?;
    let job_list_seed = match args.job_list_seed.trim() {
        "seed" => JobListSeed::Run,
        s => JobListSeed::Fixed(s.parse().map_err(|_| {
            InputError::new(
                "--job-list-seed",
                format!("`{s}` is neither a non-negative integer nor `seed`"),
            )
        })?),
    };
    let split: Vec<f64> = parse_list("--split", &args.split, "a number")?;
    let [image, language, speech] = split[..] else {
        return Err(InputError::new(
            "--split",
            "needs three shares: image,language,speech",
        ));
    };
    sim::check_round(args.round_s)?;
    let semantics = SimSemantics::by_name(args.semantics.trim())?;
    Ok(SweepSettings {
        policies,
        mechanisms,
        loads,
        seeds,
        job_list_seed,
        split: [image, language, speech],
        cluster: cluster_from_flags(&args.cluster)?,
        semantics,
    })
}

/// The job ids measured: `--window`, or the paper's 4000-4999 for an endless generated trace.
fn window_of(args: &SimulateArgs) -> Result<Option<(u64, u64)>, InputError> {
    Ok(match args.window.as_deref() {
        Some("all") => None,
        Some(w) => {
            let bad = || InputError::new("--window", format!("`{w}` is not `A-B` or `all`"));
            let (a, b) = w.split_once('-').ok_or_else(bad)?;
            let (a, b): (u64, u64) = (
                a.trim().parse().map_err(|_| bad())?,
                b.trim().parse().map_err(|_| bad())?,
            );
            if a > b {
                return Err(bad());
            }
            Some((a, b))
        }
        None if args.trace.is_none() && args.jobs.is_none() => Some((4000, 4999)),
        None => None,
    })
}

/// The jobs: the `--trace` file's, or a generator's for the first load and seed (each sweep point
/// sets its own).
fn trace_source(
    args: &SimulateArgs,
    s: &SweepSettings,
    catalog: &Catalog,
) -> anyhow::Result<TraceSource> {
    if let (Some(path), Some(format)) = (&args.trace, args.trace_format) {
        let rule = super::trace_cmd::model_rule(&args.split, None, None)?;
        let opts = super::trace_cmd::import_options(
            &args.cluster,
            "completed",
            None,
            None,
            1.0,
            crate::import::WideJobs::Cap,
            rule,
        )?;
        let (jobs, summary) =
            crate::import::import(format, std::slice::from_ref(path), &opts, catalog)?;
        eprint!("{}", super::render::render_import(&summary, None));
        return Ok(TraceSource::Jobs(crate::import::trace_jobs(&jobs, catalog)));
    }
    if let Some(path) = &args.trace {
        return trace_file(path, catalog, s.cluster.total_gpus());
    }
    let g = GenConfig {
        seed: s.seeds[0],
        job_list_seed: s.job_list_seed,
        load_jobs_per_h: s.loads[0],
        split: s.split,
        gpu_mode: if args.multi_gpu {
            GpuMode::Multi
        } else {
            GpuMode::Single
        },
        jobs: args.jobs,
    };
    // Validates the class models and shares before any thread starts.
    trace::Generator::with_streams(g.clone(), catalog, s.semantics.streams)?;
    Ok(TraceSource::Generated(g))
}

/// A trace in synergy's CSV: every row checked in one pass that keeps only the ids; a file in arrival
/// order (as `trace import` writes them) is then read again by each run as it goes, and any other is
/// held and sorted (docs/simulate.md, "Inputs").
fn trace_file(path: &Path, catalog: &Catalog, max_gpus: u64) -> anyhow::Result<TraceSource> {
    use crate::format::trace;
    let origin = path.display().to_string();
    let open = || crate::input::open(path, crate::input::TRACE).map(std::io::BufReader::new);
    let scanned = trace::scan(open()?, &origin, catalog, max_gpus)?;
    if scanned.in_arrival_order {
        return Ok(TraceSource::File(sim::TraceFile {
            path: path.to_path_buf(),
            ids: std::sync::Arc::new(scanned.ids),
        }));
    }
    let rows = trace::TraceRows::new(
        trace::CsvRecords::new(open()?, &origin),
        &origin,
        catalog,
        max_gpus,
    )?;
    Ok(TraceSource::Jobs(trace::collect_jobs(rows, &origin)?))
}

/// Every combination of policy, mechanism, load and seed; a trace file has one load and seed.
fn sweep_points(s: &SweepSettings, generated: bool) -> Vec<Point> {
    let (loads, seeds) = if generated {
        (&s.loads[..], &s.seeds[..])
    } else {
        (&s.loads[..1], &s.seeds[..1])
    };
    let mut points = Vec::new();
    for p in &s.policies {
        for m in &s.mechanisms {
            for &load_jobs_per_h in loads {
                for &seed in seeds {
                    points.push(Point {
                        policy: p.clone(),
                        mechanism: m.clone(),
                        load_jobs_per_h,
                        seed,
                    });
                }
            }
        }
    }
    points
}

/// Where a sweep point's records go as it runs: its `--out` directory and the `--plot` charts' data.
type PointOutputs = (Option<sim::output::OutDir>, Option<crate::plot::Gather>);

/// `--out`: the point's files in `dir`, or in a subdirectory of it per sweep point (of `points`).
fn point_out_dir(
    dir: &Path,
    p: &Point,
    points: usize,
    job_list_seed: Option<u64>,
    cluster: &ClusterConfig,
) -> Result<sim::output::OutDir, sim::SimError> {
    let d = if points == 1 {
        dir.to_path_buf()
    } else {
        let d = dir.join(format!(
            "{}-{}-load{}-seed{}",
            p.policy, p.mechanism, p.load_jobs_per_h, p.seed
        ));
        // Not create_dir_all: where a signal removed the staging directory, this fails rather than
        // making it again.
        std::fs::create_dir(&d).map_err(|e| sim::SimError::Io {
            context: format!("creating {}", d.display()),
            source: e,
        })?;
        d
    };
    let generated = job_list_seed.is_some();
    let labels = sim::output::RunLabels {
        load_jobs_per_h: generated.then_some(p.load_jobs_per_h),
        seed: generated.then_some(p.seed),
        job_list_seed,
        cluster: sim::output::ClusterSize::of(cluster),
    };
    sim::output::OutDir::begin(&d, labels)
}

/// The cluster's GPUs, cores and GiB, as the utilization chart scales them.
fn capacity(cluster: &ClusterConfig) -> [f64; 3] {
    [
        cluster.total_gpus() as f64,
        cluster.total_cpus(),
        cluster.total_memory_gib(),
    ]
}

/// `simulate --jobs-list`: every job's predicted JCT per policy and mechanism, as `run` prints them.
fn simulate_job_list(path: &Path, s: &SweepSettings, args: &SimulateArgs) -> anyhow::Result<i32> {
    let list = crate::exec::jobs::JobList::read(path)?;
    // A job wider than one server spreads over several, as `run` places it (docs/run.md).
    let cluster_gpus = u32::try_from(s.cluster.total_gpus()).unwrap_or(u32::MAX);
    list.check_fits(cluster_gpus, "the cluster has")?;
    let mut predictions = Vec::new();
    for p in &s.policies {
        for m in &s.mechanisms {
            let jcts = crate::exec::executor::predict(&list, &s.cluster, args.round_s, p, m)?;
            predictions.push(render::job_list_predictions(
                &list,
                p,
                m,
                args.round_s,
                &jcts,
            ));
        }
    }
    if args.json {
        out!("{}", render::json_one_or_many(predictions)?)?;
    } else {
        out!("{}", render::render_job_list(&predictions, args.round_s))?;
    }
    Ok(0)
}
