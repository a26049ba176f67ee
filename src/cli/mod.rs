//! The `synergy` command line: parses arguments, calls the library, prints results, maps errors to exit codes.

use crate::cancel::Cancel;
use crate::error::InputError;
use crate::isolate::{IsolateError, IsolationKind};
use crate::measure::{self, CacheState, EstimatorConfig, TrialError, TrialRequest, TrialResult};
use crate::profile::file::{ErrorSummary, ServerShape};
use crate::profile::plan::{self, ProfileRequest, ProfileRunError};
use crate::profile::{Profile, ProfileError};
use crate::units::{Bytes, BytesPerSec, Cores};
use crate::workload::probe::ProbeKind;
use crate::workload::{builtin, dataset, WorkloadError, WorkloadSpec};
use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Writes to standard output. A full or closed output (`> /dev/full`, a pipe whose reader left) is an
/// error the command reports, not a panic.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut stdout = std::io::stdout().lock();
        write!(stdout, $($arg)*)
            .and_then(|()| stdout.flush())
            .map_err(|e| anyhow::anyhow!("writing the output: {e}"))
    }};
}

/// [`out!`] with a newline.
macro_rules! outln {
    ($($arg:tt)*) => {
        out!("{}\n", format_args!($($arg)*))
    };
}

/// Exit code for bad input (as clap uses for usage errors).
pub const EXIT_INPUT: i32 = 2;
/// Exit code for a failure while running.
pub const EXIT_FAILURE: i32 = 1;

#[derive(Debug, Parser)]
#[command(
    name = "synergy",
    version,
    about = "Profile and schedule deep-learning training jobs by their CPU and memory sensitivity"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one trial of a workload under a CPU, memory and storage budget and measure its throughput.
    #[command(after_help = MEASURE_EXAMPLES)]
    Measure(MeasureArgs),
    /// Profile a workload: measure the CPU axis with the dataset cached, derive the memory axis from the
    /// data-stall model, validate it, and write a profile file (and CSV).
    #[command(after_help = PROFILE_EXAMPLES)]
    Profile(ProfileArgs),
    /// Predict throughput at an allocation from a profile, and say which stage limits it.
    #[command(
        after_help = "Examples:\n  synergy predict profiles/image.json --cpus 1 --mem 0.5\n  synergy predict profiles/image.json --cpus 0.5 --mem 1 --json"
    )]
    Predict(PredictArgs),
    /// Simulate a GPU cluster scheduled by a policy and an allocation mechanism, over a trace file or a
    /// generated (Philly-derived) workload; lists of policies, mechanisms, loads or seeds run as a sweep.
    #[command(after_help = SIMULATE_EXAMPLES)]
    Simulate(SimulateArgs),
    /// Draw charts of profiles (cpu, mem, heatmap, fit) or of simulation outputs (jct-cdf, jct-vs-load,
    /// utilization) as PNG or SVG, chosen by the output's extension.
    #[command(after_help = PLOT_EXAMPLES)]
    Plot(PlotArgs),
    /// Run a job list for real on this server (cgroups) with a policy and a mechanism, and compare each
    /// job's JCT with the simulator's prediction for the same list.
    #[command(after_help = RUN_EXAMPLES)]
    Run(RunCmdArgs),
    /// Convert the Synergy artifact's published model zoo (JSON) into profile files, one per model.
    #[command(
        after_help = "Example:\n  synergy import-zoo ../shared/reference/synergy-model-zoo.json --out-dir profiles/zoo"
    )]
    ImportZoo {
        /// The zoo file.
        zoo: PathBuf,
        /// Directory for the profile files.
        #[arg(long, default_value = "profiles/zoo")]
        out_dir: PathBuf,
    },
    /// Generate or inspect datasets.
    #[command(subcommand)]
    Dataset(DatasetCmd),
    /// Run a built-in reference workload (normally launched by `measure`, not by hand).
    #[command(subcommand)]
    Workload(WorkloadCmd),
}

#[derive(Debug, Subcommand)]
enum DatasetCmd {
    /// Generate a deterministic dataset.
    #[command(
        after_help = "Examples:\n  synergy dataset gen --kind image --size 256MiB data/image\n  synergy dataset gen --kind text --size 64MiB --seed 7 data/text"
    )]
    Gen {
        /// Kind of data.
        #[arg(long, value_enum)]
        kind: dataset::DatasetKind,
        /// Total size of the data files (e.g. 256MiB, 1GB).
        #[arg(long)]
        size: Bytes,
        /// Seed; the same seed gives the same bytes.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Print the manifest as JSON.
        #[arg(long)]
        json: bool,
        /// Directory to create.
        dir: PathBuf,
    },
    /// This host's one-core preprocessing rate for a built-in pipeline on a dataset: what
    /// `--gpu-rate 1.3x` multiplies. Stored in the dataset directory per host and boot; measured (about
    /// 0.3 s of CPU) when none is stored.
    #[command(
        after_help = "Examples:\n  synergy dataset rate ~/.cache/synergy/datasets/image-256m --pipeline image\n  synergy dataset rate data/text --pipeline text --seq-len 512 --refresh --json"
    )]
    Rate {
        /// The dataset directory.
        dir: PathBuf,
        /// The pipeline.
        #[arg(long, value_enum)]
        pipeline: builtin::Pipeline,
        /// Tokens per sequence (text only; default 512, as `workload run`).
        #[arg(long)]
        seq_len: Option<usize>,
        /// Measure again even when a rate is stored.
        #[arg(long)]
        refresh: bool,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
enum WorkloadCmd {
    /// Run a built-in pipeline under the launch contract (SYNERGY_CPUS, SYNERGY_CACHE_BYTES, ...).
    #[command(
        after_help = "Examples:\n  SYNERGY_CPUS=1 synergy workload run image --dataset data/image --gpu-rate 400 --max-steps 50\n  SYNERGY_CPUS=2 synergy workload run image --dataset data/image --gpu-rate 1.3x --max-seconds 10   # 1.3 x this host's one-core rate"
    )]
    Run(builtin::RunArgs),
}

const MEASURE_EXAMPLES: &str = "Examples:
  synergy measure                                   # built-in image workload, all cores, dataset generated
  synergy measure workloads/image.toml --cpus 0.5
  synergy measure image --cpus 2 --cold --storage-bps 20MB/s
  synergy measure image --cpus 1 --mem 512MiB --cold --warmup-epochs 1
  synergy measure text --cpus 1 --synthetic --json
  synergy measure workloads/pytorch-resnet18.toml --cpus 2
  synergy measure --cpus 1 --probe pytorch -- python3 train.py --epochs 1   # an unmodified script";

const PROFILE_EXAMPLES: &str = "Examples:
  synergy profile workloads/image.toml                       # defaults: auto axes, 2 validation points
  synergy profile image --storage-bps 20MB/s --validate 6     # a slower disk, more proof
  synergy profile audio --cpus 0.5,1,1.5,2 --mem 0.25,0.5,1 --exhaustive
  synergy profile image --server 8gpu,24cpu,500gb --out profiles/image-dgx.json
  synergy profile image --resume                              # continue after Ctrl-C
  synergy profile --probe pytorch --out profiles/mine.json -- python3 train.py   # an unmodified script";

#[derive(Debug, clap::Args)]
struct ProfileArgs {
    /// Workload spec file, or a built-in workload name (image, audio, text); or none, with `-- COMMAND`.
    spec: Option<String>,
    /// Inject a zero-change probe into the workload (overrides the spec's `probe`).
    #[arg(long, value_enum)]
    probe: Option<ProbeKind>,
    /// A command to profile without a spec, e.g. `-- python train.py` (use with --probe pytorch).
    #[arg(last = true)]
    command: Vec<String>,
    /// The directory of the workload's dataset, for a command (or instead of the spec's): its cache
    /// state, memory limits and storage limit then apply to it. A probed script's is found by the probe.
    #[arg(long)]
    dataset: Option<PathBuf>,
    /// Where to write the profile (a CSV goes beside it). Default: profiles/NAME.json.
    #[arg(long)]
    out: Option<PathBuf>,
    /// CPU axis: `auto` or a list of cores, e.g. 0.5,1,1.5,2.
    #[arg(long, default_value = "auto")]
    cpus: String,
    /// Memory axis: `auto` (footprint plus 0-100% of the dataset) or a list in GiB, e.g. 0.25,0.5,1.
    #[arg(long, default_value = "auto")]
    mem: String,
    /// GPUs the job trains on (default: the spec's).
    #[arg(long)]
    gpus: Option<u32>,
    /// Reference server shape for normalization, e.g. 8gpu,24cpu,500gb (default: this host).
    #[arg(long)]
    server: Option<ServerShape>,
    /// Held-out grid points to measure under their real constraint.
    #[arg(long, default_value_t = 2)]
    validate: usize,
    /// Measure every grid point too (slow; for checking the model).
    #[arg(long)]
    exhaustive: bool,
    /// Continue an interrupted profile, reusing its finished trials.
    #[arg(long)]
    resume: bool,
    /// Limit storage reads on the dataset's device in every trial, e.g. 20MB/s.
    #[arg(long)]
    storage_bps: Option<BytesPerSec>,
    /// Isolation backend (default: detect).
    #[arg(long, value_enum)]
    isolation: Option<IsolationKind>,
    /// Fraction of the best throughput the demand vector may give up.
    #[arg(long, default_value_t = 0.05)]
    tolerance: f64,
    /// Print the whole profile as JSON.
    #[arg(long)]
    json: bool,
    /// Also draw NAME.cpu.svg, NAME.mem.svg, NAME.heatmap.svg and NAME.fit.svg beside the profile.
    #[arg(long)]
    plot: bool,
}

const PLOT_EXAMPLES: &str = "Examples:
  synergy plot profiles/image.json --kind cpu -o image-cpu.png
  synergy plot profiles/*.json --kind cpu -o compare.svg          # one normalized line per profile
  synergy plot profiles/zoo/res18.json --kind heatmap -o res18.svg --width 1200 --height 800
  synergy plot profiles/audio.json --kind fit -o audio-fit.svg
  synergy simulate --policy fifo --mechanism proportional,tune --load 4,8,12 --jobs 300 --out sweep/
  synergy plot sweep/ --kind jct-vs-load -o jct-vs-load.svg";

#[derive(Debug, clap::Args)]
struct PlotArgs {
    /// Profile files (cpu, mem, heatmap, fit), or `simulate --out` directories: a run or a sweep (jct-cdf,
    /// jct-vs-load, utilization).
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// What to draw.
    #[arg(long, value_enum)]
    kind: crate::plot::Kind,
    /// The chart file: .png or .svg.
    #[arg(short, long)]
    out: PathBuf,
    /// Width, pixels.
    #[arg(long, default_value_t = crate::plot::Size::DEFAULT.width)]
    width: u32,
    /// Height, pixels.
    #[arg(long, default_value_t = crate::plot::Size::DEFAULT.height)]
    height: u32,
    /// Print what was written as JSON.
    #[arg(long)]
    json: bool,
}

fn plot_cmd(args: PlotArgs) -> anyhow::Result<i32> {
    let written = crate::plot::plot(&crate::plot::Request {
        inputs: args.inputs,
        kind: args.kind,
        out: args.out,
        size: crate::plot::Size {
            width: args.width,
            height: args.height,
        },
    })?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&written)?)?;
    } else {
        outln!(
            "{}: {} chart, {}x{} pixels, {} series ({})",
            written.path.display(),
            written.kind.name(),
            written.width,
            written.height,
            written.series.len(),
            written.series.join("; ")
        )?;
    }
    Ok(0)
}

const SIMULATE_EXAMPLES: &str = "Examples:
  synergy simulate                                          # paper default: 128 GPUs, 9 jobs/h, FIFO, tune
  synergy simulate --policy fifo,srtf,las --mechanism proportional,greedy,tune   # the published table
  synergy simulate --policy fifo --mechanism proportional,tune --seed 42,43,44,45,46
  synergy simulate --policy fifo,srtf,las,ftf --mechanism proportional,greedy,tune,opt --load 1,2,3,4,5,6,7,8,9
  synergy simulate --trace trace.csv --cluster cluster.toml --mechanism tune --out results/
  synergy simulate --servers 256 --load 144 --jobs 100000 --multi-gpu --json";

const RUN_EXAMPLES: &str = "Examples:
  synergy run examples/jobs-mixed.toml --gpus 2 --policy fifo --mechanism tune --round 15
  synergy run examples/jobs-mixed.toml --gpus 2 --mechanism proportional --dry-run
  synergy run examples/jobs-mixed.toml --gpus 2 --resume          # after the executor was killed
  synergy run examples/jobs-mixed.toml --gpus 2 --json > run.json
  synergy run examples/jobs-mixed.toml --backend slurm --round 15  # on a Slurm cluster";

#[derive(Debug, clap::Args)]
struct RunCmdArgs {
    /// The job list (TOML; see docs/run.md).
    jobs: PathBuf,
    /// Where jobs run.
    #[arg(long, value_enum, default_value = "local")]
    backend: RunBackend,
    /// Policy: fifo, srtf, las, ftf.
    #[arg(long, default_value = "fifo")]
    policy: String,
    /// Mechanism: proportional, greedy, tune, opt.
    #[arg(long, default_value = "tune")]
    mechanism: String,
    /// Round length, seconds.
    #[arg(long = "round", default_value_t = 15.0)]
    round_s: f64,
    /// Emulate this many GPUs (slots) instead of using NVML's (local backend).
    #[arg(long)]
    gpus: Option<u32>,
    /// Use only this many cores (of each node, on Slurm).
    #[arg(long)]
    cpus: Option<usize>,
    /// Give jobs at most this much memory in all (of each node, on Slurm; e.g. 8GiB).
    #[arg(long)]
    mem: Option<Bytes>,
    /// Slurm backend: use only this node (repeatable; default: every node with GPUs that takes jobs).
    #[arg(long = "node")]
    nodes: Vec<String>,
    /// Slurm backend: submit to this partition (default: the cluster's).
    #[arg(long)]
    partition: Option<String>,
    /// Print each round's plan (from the simulator's progress model) without launching anything.
    #[arg(long)]
    dry_run: bool,
    /// The state file (default: the job list's path with `.state.json`).
    #[arg(long)]
    state: Option<PathBuf>,
    /// Continue the run recorded in the state file after the executor was killed.
    #[arg(long)]
    resume: bool,
    /// Times a crashing job is started again before it counts as failed.
    #[arg(long, default_value_t = 2)]
    max_retries: u32,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum RunBackend {
    /// This server: cgroups per job, GPUs by CUDA_VISIBLE_DEVICES.
    Local,
    /// A Slurm cluster: each allocation a batch job (--cpus-per-task, --mem, --gres=gpu:N).
    Slurm,
}

#[derive(Debug, clap::Args)]
struct SimulateArgs {
    /// Directory of profile files (searched recursively); jobs name models by `workload.name`.
    #[arg(long, default_value = "profiles")]
    profiles: PathBuf,
    /// Cluster file (TOML: `[[servers]]` with count, gpus, cpus, memory_gb); overrides the --server-* flags.
    #[arg(long)]
    cluster: Option<PathBuf>,
    /// Servers.
    #[arg(long, default_value_t = 16)]
    servers: u32,
    /// GPUs per server.
    #[arg(long, default_value_t = 8)]
    server_gpus: u32,
    /// Cores per server.
    #[arg(long, default_value_t = 24.0)]
    server_cpus: f64,
    /// Memory per server, decimal GB (converted to GiB).
    #[arg(long, default_value_t = 500.0)]
    server_mem_gb: f64,
    /// Trace CSV (`id,model,arrival_s,iters,gpus`); without it a workload is generated.
    #[arg(long, conflicts_with = "jobs_list")]
    trace: Option<PathBuf>,
    /// A job list as `synergy run` takes it (its own profiles; predicts every job's JCT).
    #[arg(long = "jobs-list", value_name = "JOBS.toml")]
    jobs_list: Option<PathBuf>,
    /// Policies, comma-separated: fifo, srtf, las, ftf.
    #[arg(long, default_value = "fifo")]
    policy: String,
    /// Mechanisms, comma-separated: proportional, greedy, tune, opt.
    #[arg(long, default_value = "tune")]
    mechanism: String,
    /// Generated arrivals per hour, comma-separated for a sweep.
    #[arg(long, default_value = "9")]
    load: String,
    /// Seeds of the generated trace's arrivals, comma-separated; the streams are the reference simulator's,
    /// so 42 (its default) replays the published runs.
    #[arg(long, default_value = "42")]
    seed: String,
    /// Seed of the job list (durations, GPU counts): a number, or `seed` to follow --seed. The reference
    /// drew its list once, with 42, and reused it for every seed.
    #[arg(long, value_name = "N|seed", default_value = "42")]
    job_list_seed: String,
    /// Shares of image, language and speech jobs.
    #[arg(long, default_value = "20,70,10")]
    split: String,
    /// Generated jobs take 1/2/4/8 GPUs (0.70/0.10/0.15/0.05) instead of 1.
    #[arg(long)]
    multi_gpu: bool,
    /// Generate this many jobs (default: endless arrivals until the window has finished).
    #[arg(long)]
    jobs: Option<u64>,
    /// Job ids measured, `A-B` or `all` (default: 4000-4999 for an endless generated trace, else all).
    #[arg(long)]
    window: Option<String>,
    /// Round length, seconds.
    #[arg(long, visible_alias = "round", default_value_t = 300.0)]
    round_s: f64,
    /// Parallel simulations in a sweep (default: the host's cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Print the summary (or every summary of a sweep) as JSON.
    #[arg(long)]
    json: bool,
    /// Write jobs.csv, rounds.csv and summary.json here (a subdirectory per configuration in a sweep).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Write the usual charts here: jct-cdf.svg, utilization.svg, and jct-vs-load.svg for several loads.
    #[arg(long, value_name = "DIR")]
    plot: Option<PathBuf>,
}

fn parse_list<T: std::str::FromStr>(flag: &str, s: &str, what: &str) -> Result<Vec<T>, InputError> {
    let v: Vec<T> = s
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            p.parse::<T>()
                .map_err(|_| InputError::new(flag, format!("`{p}` is not {what}")))
        })
        .collect::<Result<_, _>>()?;
    if v.is_empty() {
        return Err(InputError::new(flag, "is empty"));
    }
    Ok(v)
}

fn simulate_cmd(args: SimulateArgs) -> anyhow::Result<i32> {
    use crate::sched::{Catalog, ClusterConfig};
    use crate::sim::{self, trace, SimConfig, TraceSource};
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
        return Err(InputError::new("--load", "loads must be positive").into());
    }
    let seeds: Vec<u64> = parse_list("--seed", &args.seed, "a non-negative integer")?;
    let job_list_seed = match args.job_list_seed.trim() {
        "seed" => trace::JobListSeed::Run,
        s => trace::JobListSeed::Fixed(s.parse().map_err(|_| {
            InputError::new(
                "--job-list-seed",
                format!("`{s}` is neither a non-negative integer nor `seed`"),
            )
        })?),
    };
    let split: Vec<f64> = parse_list("--split", &args.split, "a number")?;
    if split.len() != 3 {
        return Err(InputError::new("--split", "needs three shares: image,language,speech").into());
    }
    check_positive("--round-s", args.round_s)?;
    let cluster = match &args.cluster {
        Some(p) => ClusterConfig::read(p)?,
        None => {
            if args.servers == 0 || args.server_gpus == 0 {
                return Err(
                    InputError::new("--servers/--server-gpus", "must be at least 1").into(),
                );
            }
            check_positive("--server-cpus", args.server_cpus)?;
            check_positive("--server-mem-gb", args.server_mem_gb)?;
            ClusterConfig::uniform(
                args.servers,
                args.server_gpus,
                args.server_cpus,
                args.server_mem_gb,
            )
        }
    };
    if let Some(path) = &args.jobs_list {
        return simulate_job_list(path, &cluster, &policies, &mechanisms, &args);
    }
    let catalog = Catalog::load_dir(&args.profiles)?;
    let window = match args.window.as_deref() {
        Some("all") => None,
        Some(w) => {
            let bad = || InputError::new("--window", format!("`{w}` is not `A-B` or `all`"));
            let (a, b) = w.split_once('-').ok_or_else(bad)?;
            let (a, b): (u64, u64) = (
                a.trim().parse().map_err(|_| bad())?,
                b.trim().parse().map_err(|_| bad())?,
            );
            if a > b {
                return Err(bad().into());
            }
            Some((a, b))
        }
        None if args.trace.is_none() && args.jobs.is_none() => Some((4000, 4999)),
        None => None,
    };
    let source = match &args.trace {
        Some(path) => {
            let origin = path.display().to_string();
            let text = std::fs::read_to_string(path)
                .map_err(|e| InputError::new(&origin, format!("cannot read the trace: {e}")))?;
            TraceSource::Jobs(trace::parse_csv(
                &text,
                &origin,
                &catalog,
                cluster.total_gpus(),
            )?)
        }
        None => {
            let g = trace::GenConfig {
                seed: seeds[0],
                job_list_seed,
                load_jobs_per_h: loads[0],
                split: [split[0], split[1], split[2]],
                gpu_mode: if args.multi_gpu {
                    trace::GpuMode::Multi
                } else {
                    trace::GpuMode::Single
                },
                jobs: args.jobs,
            };
            // Validates the class models and shares before any thread starts.
            trace::Generator::new(g.clone(), &catalog)?;
            TraceSource::Generated(g)
        }
    };
    let generated = matches!(source, TraceSource::Generated(_));
    let cfg = SimConfig {
        cluster,
        round_s: args.round_s,
        window,
        // Per-round records only feed --out and --plot; a sweep's summaries do without them.
        record_rounds: args.out.is_some() || args.plot.is_some(),
    };
    let mut points = Vec::new();
    for p in &policies {
        for m in &mechanisms {
            for &load in if generated { &loads[..] } else { &loads[..1] } {
                for &seed in if generated { &seeds[..] } else { &seeds[..1] } {
                    points.push(sim::sweep::Point {
                        policy: p.clone(),
                        mechanism: m.clone(),
                        load_jobs_per_h: load,
                        seed,
                    });
                }
            }
        }
    }
    let threads = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    let results = sim::sweep::sweep(&catalog, &cfg, &source, &points, threads)?;
    let run_labels = |p: &sim::sweep::Point| sim::output::RunLabels {
        load_jobs_per_h: generated.then_some(p.load_jobs_per_h),
        seed: generated.then_some(p.seed),
        job_list_seed: generated.then(|| job_list_seed.for_run(p.seed)),
        cluster: sim::output::ClusterSize::of(&cfg.cluster),
    };
    if let Some(dir) = &args.out {
        for (p, r) in points.iter().zip(&results) {
            let d = if points.len() == 1 {
                dir.clone()
            } else {
                dir.join(format!(
                    "{}-{}-load{}-seed{}",
                    p.policy, p.mechanism, p.load_jobs_per_h, p.seed
                ))
            };
            sim::output::write_dir(r, &d, &run_labels(p))?;
        }
    }
    if let Some(dir) = &args.plot {
        let capacity = [
            cfg.cluster.total_gpus() as f64,
            cfg.cluster.total_cpus(),
            cfg.cluster.total_memory_gib(),
        ];
        let runs: Vec<crate::plot::RunData> = points
            .iter()
            .zip(&results)
            .map(|(p, r)| {
                crate::plot::RunData::from_result(
                    r,
                    generated.then_some(p.load_jobs_per_h),
                    generated.then_some(p.seed),
                    capacity,
                )
            })
            .collect();
        for path in crate::plot::simulation_charts(&runs, dir, crate::plot::Size::DEFAULT)? {
            eprintln!("synergy: wrote {}", path.display());
        }
    }
    if args.json {
        let summaries: Vec<serde_json::Value> = points
            .iter()
            .zip(&results)
            .map(|(p, r)| {
                let mut v = serde_json::to_value(&r.summary).expect("summaries serialize");
                if generated {
                    v["load_jobs_per_h"] = p.load_jobs_per_h.into();
                    v["seed"] = p.seed.into();
                    v["job_list_seed"] = job_list_seed.for_run(p.seed).into();
                }
                v
            })
            .collect();
        if summaries.len() == 1 {
            outln!("{}", serde_json::to_string_pretty(&summaries[0])?)?;
        } else {
            outln!("{}", serde_json::to_string_pretty(&summaries)?)?;
        }
    } else if results.len() == 1 {
        out!("{}", sim::output::render_summary(&results[0].summary))?;
    } else {
        let rows: Vec<(Option<f64>, Option<u64>, sim::Summary)> = points
            .iter()
            .zip(&results)
            .map(|(p, r)| {
                (
                    generated.then_some(p.load_jobs_per_h),
                    generated.then_some(p.seed),
                    r.summary.clone(),
                )
            })
            .collect();
        out!("{}", sim::output::render_sweep(&rows))?;
    }
    Ok(0)
}

/// `simulate --jobs-list`: every job's predicted JCT per policy and mechanism, as `run` prints them.
fn simulate_job_list(
    path: &std::path::Path,
    cluster: &crate::sched::ClusterConfig,
    policies: &[String],
    mechanisms: &[String],
    args: &SimulateArgs,
) -> anyhow::Result<i32> {
    let list = crate::exec::jobs::JobList::read(path)?;
    list.check_fits(cluster.max_server_gpus())?;
    let mut out = Vec::new();
    for p in policies {
        for m in mechanisms {
            let jcts = crate::exec::executor::predict(&list, cluster, args.round_s, p, m)?;
            let done: Vec<f64> = jcts.iter().flatten().copied().collect();
            let mean = done.iter().sum::<f64>() / done.len().max(1) as f64;
            out.push(serde_json::json!({
                "policy": p,
                "mechanism": m,
                "round_s": args.round_s,
                "jobs": list.jobs.iter().zip(&jcts).map(|(j, t)| serde_json::json!({
                    "name": j.name, "workload": j.spec.name, "gpus": j.gpus,
                    "arrival_s": j.arrival_s, "predicted_jct_s": t,
                })).collect::<Vec<_>>(),
                "mean_predicted_jct_s": mean,
            }));
        }
    }
    if args.json {
        let v = if out.len() == 1 {
            out.remove(0)
        } else {
            serde_json::Value::Array(out)
        };
        outln!("{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(0);
    }
    for v in &out {
        outln!(
            "{} / {} (rounds of {} s): mean predicted JCT {:.1} s",
            v["policy"].as_str().unwrap_or_default(),
            v["mechanism"].as_str().unwrap_or_default(),
            args.round_s,
            v["mean_predicted_jct_s"].as_f64().unwrap_or(0.0)
        )?;
        for j in v["jobs"].as_array().into_iter().flatten() {
            outln!(
                "  {:<16} {:<8} arrives {:>6.1} s  JCT {:>8.1} s",
                j["name"].as_str().unwrap_or_default(),
                j["workload"].as_str().unwrap_or_default(),
                j["arrival_s"].as_f64().unwrap_or(0.0),
                j["predicted_jct_s"].as_f64().unwrap_or(f64::NAN)
            )?;
        }
    }
    Ok(0)
}

fn run_cmd(args: RunCmdArgs) -> anyhow::Result<i32> {
    use crate::exec::slurm::Slurm;
    use crate::exec::{executor, jobs::JobList, local, slurm_backend};
    check_positive("--round", args.round_s)?;
    let list = JobList::read(&args.jobs)?;
    let slurm_opts = slurm_backend::SlurmOptions {
        nodes: args.nodes.clone(),
        partition: args.partition.clone(),
        cpus: args.cpus,
        memory: args.mem,
    };
    let opts = local::LocalOptions {
        emulated_gpus: args.gpus,
        cpus: args.cpus,
        memory: args.mem,
    };
    match args.backend {
        RunBackend::Slurm if args.gpus.is_some() => {
            return Err(crate::error::InputError::new(
                "--gpus",
                "the Slurm backend takes its GPUs from the nodes' GRES; leave --gpus out",
            )
            .into())
        }
        RunBackend::Local if !args.nodes.is_empty() || args.partition.is_some() => {
            return Err(crate::error::InputError::new(
                if args.nodes.is_empty() {
                    "--partition"
                } else {
                    "--node"
                },
                "only the Slurm backend (--backend slurm) places jobs on nodes and partitions",
            )
            .into())
        }
        _ => {}
    }
    if args.dry_run {
        // A plan needs the servers' shape only: no cgroups are made, nothing is submitted.
        let servers = match args.backend {
            RunBackend::Local => local::discover(&opts)?,
            RunBackend::Slurm => slurm_backend::discover(&Slurm::new(), &slurm_opts)?,
        };
        let rounds =
            executor::dry_run(&list, &servers, &args.policy, &args.mechanism, args.round_s)?;
        if args.json {
            outln!("{}", serde_json::to_string_pretty(&rounds)?)?;
        } else {
            for r in &rounds {
                out!("{r}")?;
            }
        }
        return Ok(0);
    }
    let state_path = args
        .state
        .clone()
        .unwrap_or_else(|| args.jobs.with_extension("state.json"));
    let cfg = executor::ExecConfig {
        policy: args.policy.clone(),
        mechanism: args.mechanism.clone(),
        round_s: args.round_s,
        max_retries: args.max_retries,
        state_path,
        resume: args.resume,
    };
    let cancel = Cancel::on_signals()?;
    let mut backend: Box<dyn crate::exec::Backend> = match args.backend {
        RunBackend::Local => Box::new(local::LocalBackend::new(&opts)?),
        RunBackend::Slurm => Box::new(slurm_backend::SlurmBackend::new(Slurm::new(), &slurm_opts)?),
    };
    let mut log = |line: &str| eprintln!("{line}");
    let report = executor::run(&list, backend.as_mut(), &cfg, &cancel, &mut log)?;
    drop(backend);
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        out!("{}", render_run(&report))?;
    }
    if let Some(sig) = report.interrupted {
        eprintln!(
            "synergy: interrupted; every job was stopped and its progress saved in {} (continue with --resume)",
            cfg.state_path.display()
        );
        return Ok(128 + sig);
    }
    Ok(
        if report
            .jobs
            .iter()
            .any(|j| j.status == crate::exec::state::JobStatus::Failed)
        {
            EXIT_FAILURE
        } else {
            0
        },
    )
}

fn render_run(r: &crate::exec::executor::RunReport) -> String {
    let secs = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |x| format!("{x:.1}"));
    let pct = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |x| format!("{:+.1}%", x * 100.0));
    let mut out = format!(
        "{} / {} on {} ({} rounds of {} s, makespan {:.1} s)\n",
        r.policy, r.mechanism, r.backend, r.rounds, r.round_s, r.makespan_s
    );
    out.push_str(&format!(
        "{:<16} {:<8} {:>4} {:>9} {:>8} {:>10} {:>10} {:>8}  {}\n",
        "job", "workload", "gpus", "samples", "arrive", "real JCT", "predicted", "diff", "status"
    ));
    for j in &r.jobs {
        out.push_str(&format!(
            "{:<16} {:<8} {:>4} {:>9} {:>8.1} {:>10} {:>10} {:>8}  {:?}{}\n",
            j.name,
            j.workload,
            j.gpus,
            j.samples,
            j.arrival_s,
            secs(j.real_jct_s),
            secs(j.predicted_jct_s),
            pct(j.difference),
            j.status,
            if j.retries > 0 {
                format!(" ({} retries)", j.retries)
            } else {
                String::new()
            }
        ));
    }
    out.push_str(&format!(
        "{:<16} {:<8} {:>4} {:>9} {:>8} {:>10} {:>10} {:>8}\n",
        "mean",
        "",
        "",
        "",
        "",
        secs(r.mean_real_jct_s),
        secs(r.mean_predicted_jct_s),
        pct(r.mean_difference)
    ));
    out
}

#[derive(Debug, clap::Args)]
struct PredictArgs {
    /// A profile file.
    profile: PathBuf,
    /// Cores.
    #[arg(long)]
    cpus: f64,
    /// Memory, GiB (footprint plus cache).
    #[arg(long)]
    mem: f64,
    /// Print as JSON.
    #[arg(long)]
    json: bool,
}

fn parse_axis(flag: &str, s: &str) -> Result<Option<Vec<f64>>, InputError> {
    if s.trim() == "auto" {
        return Ok(None);
    }
    s.split(',')
        .map(|p| {
            p.trim().parse::<f64>().map_err(|_| {
                InputError::new(flag, format!("`{p}` is not a number (or use `auto`)"))
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

#[derive(Debug, clap::Args)]
struct MeasureArgs {
    /// Workload spec file, or a built-in workload name (image, audio, text); default image; or none,
    /// with `-- COMMAND`.
    spec: Option<String>,
    /// Inject a zero-change probe into the workload (overrides the spec's `probe`).
    #[arg(long, value_enum)]
    probe: Option<ProbeKind>,
    /// A command to measure without a spec, e.g. `-- python train.py` (use with --probe pytorch).
    #[arg(last = true)]
    command: Vec<String>,
    /// The directory of the workload's dataset, for a command (or instead of the spec's): its cache
    /// state, memory limits and storage limit then apply to it. A probed script's is found by the probe.
    #[arg(long)]
    dataset: Option<PathBuf>,
    /// CPU cores (fractional values use a CFS quota). Default: every core of this host.
    #[arg(long)]
    cpus: Option<f64>,
    /// Specific core ids, e.g. `0,1` or `0-3`.
    #[arg(long, value_parser = parse_cpu_list)]
    cpu_list: Option<CoreIds>,
    /// Memory limit for the workload's cgroup (resident memory plus page cache), e.g. 1GiB.
    #[arg(long)]
    mem: Option<Bytes>,
    /// Application cache budget passed as SYNERGY_CACHE_BYTES, e.g. 128MiB.
    #[arg(long)]
    cache_bytes: Option<Bytes>,
    /// Evict the dataset from the page cache first.
    #[arg(long, conflicts_with = "warm")]
    cold: bool,
    /// Read the whole dataset into the page cache first.
    #[arg(long)]
    warm: bool,
    /// Limit storage reads on the dataset's device, e.g. 20MB/s.
    #[arg(long)]
    storage_bps: Option<BytesPerSec>,
    /// Feed synthetic batches: measures the accelerator's ingestion rate alone.
    #[arg(long)]
    synthetic: bool,
    /// Isolation backend (default: detect).
    #[arg(long, value_enum)]
    isolation: Option<IsolationKind>,
    /// Seconds of warm-up excluded from the estimate.
    #[arg(long, default_value_t = 2.0)]
    warmup_seconds: f64,
    /// Steps of warm-up excluded from the estimate.
    #[arg(long, default_value_t = 3)]
    warmup_steps: u64,
    /// Whole epochs excluded from the estimate (e.g. 1 while a cache fills).
    #[arg(long, default_value_t = 0)]
    warmup_epochs: u64,
    /// Measure whole epochs: start where an epoch starts and stop at the first epoch end past
    /// --min-seconds (--precision then does not apply). For memory-limited trials, whose page-cache hits
    /// cluster early in each epoch.
    #[arg(long)]
    whole_epochs: bool,
    /// Shortest measured window, seconds.
    #[arg(long, default_value_t = 3.0)]
    min_seconds: f64,
    /// Longest trial, seconds.
    #[arg(long, default_value_t = 60.0)]
    max_seconds: f64,
    /// Stop when the 95% confidence half-width is within this fraction of the mean.
    #[arg(long, default_value_t = 0.02)]
    precision: f64,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

/// Core ids as one flag value: a newtype, because clap reads `Option<Vec<T>>` as a flag given many times.
#[derive(Debug, Clone, PartialEq)]
struct CoreIds(Vec<usize>);

fn parse_cpu_list(s: &str) -> Result<CoreIds, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("`{part}` is not a core id or range (examples: 0,1 or 0-3)");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) =
                    (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                if a > b {
                    return Err(bad());
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().map_err(|_| bad())?),
        }
    }
    if out.is_empty() {
        return Err("no cores listed".into());
    }
    out.sort_unstable();
    out.dedup();
    Ok(CoreIds(out))
}

/// Runs the command line and returns the process exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return e.exit_code();
        }
    };
    match dispatch(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            if err.chain().any(is_input_error) {
                EXIT_INPUT
            } else {
                EXIT_FAILURE
            }
        }
    }
}

/// Whether an error in a chain is the user's to fix by changing their input (exit code 2).
fn is_input_error(e: &(dyn std::error::Error + 'static)) -> bool {
    if e.is::<InputError>() {
        return true;
    }
    if let Some(t) = e.downcast_ref::<TrialError>() {
        return t.is_input();
    }
    if let Some(w) = e.downcast_ref::<WorkloadError>() {
        return matches!(w, WorkloadError::Input(_));
    }
    if let Some(p) = e.downcast_ref::<ProfileRunError>() {
        return match p {
            ProfileRunError::Trial(t) => t.is_input(),
            ProfileRunError::Input(_) | ProfileRunError::File(ProfileError::Invalid(_)) => true,
            ProfileRunError::File(_) => false,
        };
    }
    if let Some(p) = e.downcast_ref::<ProfileError>() {
        return matches!(p, ProfileError::Invalid(_));
    }
    if let Some(s) = e.downcast_ref::<crate::sim::SimError>() {
        return s.is_input();
    }
    if let Some(p) = e.downcast_ref::<crate::plot::PlotError>() {
        return p.is_input();
    }
    if let Some(x) = e.downcast_ref::<crate::exec::ExecError>() {
        return x.is_input();
    }
    matches!(
        e.downcast_ref::<IsolateError>(),
        Some(IsolateError::Budget(_))
    )
}

fn dispatch(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Measure(args) => measure_cmd(args),
        Command::Profile(args) => profile_cmd(args),
        Command::Predict(args) => predict_cmd(args),
        Command::Simulate(args) => simulate_cmd(args),
        Command::Plot(args) => plot_cmd(args),
        Command::Run(args) => run_cmd(args),
        Command::ImportZoo { zoo, out_dir } => {
            let written = crate::profile::zoo::import_zoo(&zoo, &out_dir)?;
            for p in &written {
                outln!("{}", p.display())?;
            }
            Ok(0)
        }
        Command::Dataset(DatasetCmd::Gen {
            kind,
            size,
            seed,
            json,
            dir,
        }) => {
            let cancel = Cancel::on_signals()?;
            let manifest = match dataset::generate(kind, &dir, size, seed, &cancel) {
                Err(WorkloadError::Interrupted(sig)) => {
                    eprintln!(
                        "synergy: interrupted; nothing was left in {}",
                        dir.display()
                    );
                    return Ok(128 + sig);
                }
                r => r?,
            };
            if json {
                outln!("{}", serde_json::to_string_pretty(&manifest)?)?;
            } else {
                outln!(
                    "{}: {} {} files, {} (mean {:.1} KB)",
                    dir.display(),
                    manifest.files,
                    manifest.kind,
                    manifest.total_bytes,
                    manifest.mean_file_bytes / 1000.0
                )?;
            }
            Ok(0)
        }
        Command::Dataset(DatasetCmd::Rate {
            dir,
            pipeline,
            seq_len,
            refresh,
            json,
        }) => dataset_rate_cmd(&dir, pipeline, seq_len, refresh, json),
        Command::Workload(WorkloadCmd::Run(args)) => {
            builtin::run(&args)?;
            Ok(0)
        }
    }
}

fn dataset_rate_cmd(
    dir: &std::path::Path,
    pipeline: builtin::Pipeline,
    seq_len: Option<usize>,
    refresh: bool,
    json: bool,
) -> anyhow::Result<i32> {
    if seq_len.is_some() && pipeline != builtin::Pipeline::Text {
        return Err(InputError::new("--seq-len", "applies to the text pipeline only").into());
    }
    if seq_len == Some(0) {
        return Err(InputError::new("--seq-len", "must be at least 1").into());
    }
    // The same default as `synergy workload run`, so both find the same stored rate.
    let seq_len = seq_len.unwrap_or(builtin::DEFAULT_SEQ_LEN);
    let r = builtin::rate::one_core_rate(dir, pipeline, seq_len, refresh)?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&r)?)?;
        return Ok(0);
    }
    let m = &r.measurement;
    let when = if r.measured_now {
        "measured now".to_string()
    } else {
        format!("stored, measured at unix time {}", m.measured_unix_s)
    };
    let work = match r.key.seq_len {
        Some(n) => format!("{pipeline} pipeline, {n}-token sequences"),
        None => format!("{pipeline} pipeline"),
    };
    outln!(
        "{}: {:.1} samples per CPU-second on one core ({work}; {} samples in {:.3} CPU-s, {when})",
        dir.display(),
        m.samples_per_cpu_s,
        m.samples,
        m.cpu_s
    )?;
    match &r.not_kept {
        None => outln!("  kept in {}", r.rate_file.display())?,
        Some(why) => outln!("  not kept: {why}")?,
    }
    Ok(0)
}

fn check_positive(flag: &str, v: f64) -> Result<(), InputError> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(InputError::new(flag, "must be a positive number"))
    }
}

/// The workload of `measure` or `profile`: a spec (file or built-in name), or a bare command after `--`;
/// `--probe` applies to either.
fn workload_of(
    spec: Option<&str>,
    default: Option<&str>,
    probe: Option<ProbeKind>,
    dataset: Option<&Path>,
    command: &[String],
) -> Result<WorkloadSpec, InputError> {
    let mut spec = match (spec, command.is_empty()) {
        (Some(s), true) => WorkloadSpec::load(s)?,
        (None, false) => WorkloadSpec::from_command(command, probe)?,
        (Some(s), false) => {
            return Err(InputError::new(
                s,
                "give either a spec or a command after `--`, not both",
            ))
        }
        (None, true) => match default {
            Some(d) => WorkloadSpec::load(d)?,
            None => {
                return Err(InputError::new(
                    "SPEC",
                    "name a workload spec (or a built-in: image, audio, text), or give a command after `--`",
                ))
            }
        },
    };
    if probe.is_some() {
        spec.probe = probe;
    }
    if let Some(dir) = dataset {
        spec.set_dataset_dir(dir)
            .map_err(|why| InputError::new("--dataset", why))?;
    }
    Ok(spec)
}

fn measure_cmd(args: MeasureArgs) -> anyhow::Result<i32> {
    let spec = workload_of(
        args.spec.as_deref(),
        Some("image"),
        args.probe,
        args.dataset.as_deref(),
        &args.command,
    )?;
    let cpus = args
        .cpus
        .unwrap_or_else(|| measure::trial::host_cores().len() as f64);
    check_positive("--max-seconds", args.max_seconds)?;
    check_positive("--precision", args.precision)?;
    if !(args.warmup_seconds >= 0.0 && args.min_seconds >= 0.0) {
        return Err(
            InputError::new("--warmup-seconds/--min-seconds", "must not be negative").into(),
        );
    }
    if spec.dataset.is_none() {
        // These act on the dataset's files: without a dataset they would silently do nothing.
        for (flag, given) in [
            ("--cold", args.cold),
            ("--warm", args.warm),
            ("--storage-bps", args.storage_bps.is_some()),
        ] {
            if given {
                return Err(InputError::new(
                    flag,
                    format!(
                        "{} names no dataset, so there is none to act on; name its directory with --dataset DIR",
                        spec.origin
                    ),
                )
                .into());
            }
        }
    }
    let mut req = TrialRequest::new(spec, Cores(cpus));
    req.cpu_list = args.cpu_list.map(|c| c.0);
    req.mem_limit = args.mem;
    req.cache_bytes = args.cache_bytes;
    req.cache_state = if args.cold {
        CacheState::Cold
    } else if args.warm {
        CacheState::Warm
    } else {
        CacheState::AsIs
    };
    req.storage_limit = args.storage_bps;
    req.synthetic = args.synthetic;
    req.isolation = args.isolation;
    req.estimator = EstimatorConfig {
        warmup_s: args.warmup_seconds,
        warmup_steps: args.warmup_steps,
        warmup_epochs: args.warmup_epochs,
        warmup_epochs_max_s: f64::INFINITY,
        min_measure_s: args.min_seconds,
        max_total_s: args.max_seconds,
        rel_precision: args.precision,
        first_epoch_only: false,
        whole_epochs: args.whole_epochs,
    };
    req.no_progress_timeout = Duration::from_secs_f64(args.max_seconds.clamp(10.0, 30.0));

    let cancel = Cancel::on_signals()?;
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    bar.enable_steady_tick(Duration::from_millis(200));
    let result = measure::run_trial(&req, &bar, &cancel);
    bar.finish_and_clear();
    match result {
        Ok(r) => {
            if let Some(why) = r.disturbance.as_ref().and_then(|d| d.reason.as_deref()) {
                eprintln!(
                    "synergy: warning: this trial was disturbed ({why}); its throughput is not this allocation's: measure again when the host is quiet"
                );
            }
            if args.json {
                outln!("{}", serde_json::to_string_pretty(&r)?)?;
            } else {
                out!("{}", render_trial(&r))?;
            }
            Ok(0)
        }
        Err(TrialError::Interrupted(sig)) => {
            eprintln!("synergy: {}", TrialError::Interrupted(sig));
            Ok(128 + sig)
        }
        Err(e) => Err(e.into()),
    }
}

fn profile_cmd(args: ProfileArgs) -> anyhow::Result<i32> {
    let spec = workload_of(
        args.spec.as_deref(),
        None,
        args.probe,
        args.dataset.as_deref(),
        &args.command,
    )?;
    if !(0.0..1.0).contains(&args.tolerance) {
        return Err(InputError::new("--tolerance", "must be in [0, 1)").into());
    }
    let out = args
        .out
        .unwrap_or_else(|| PathBuf::from("profiles").join(format!("{}.json", spec.name)));
    let req = ProfileRequest {
        spec,
        out: out.clone(),
        cpus: parse_axis("--cpus", &args.cpus)?,
        memory_gib: parse_axis("--mem", &args.mem)?,
        gpus: args.gpus,
        server: args.server,
        validate: args.validate,
        exhaustive: args.exhaustive,
        resume: args.resume,
        storage_limit: args.storage_bps,
        isolation: args.isolation,
        tolerance: args.tolerance,
        refine_tolerance: 0.04,
    };
    let cancel = Cancel::on_signals()?;
    let bar = indicatif::ProgressBar::new(0);
    bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] {pos}/{len} trials (ETA {eta}) {wide_msg}",
    ) {
        bar.set_style(style);
    }
    bar.enable_steady_tick(Duration::from_millis(200));
    let result = plan::run_profile(&req, &bar, &cancel);
    bar.finish_and_clear();
    match result {
        Ok(p) => {
            if args.plot {
                for path in crate::plot::profile_charts(&p, &out, crate::plot::Size::DEFAULT)? {
                    eprintln!("synergy: wrote {}", path.display());
                }
            }
            if args.json {
                outln!("{}", serde_json::to_string_pretty(&p)?)?;
            } else {
                out!("{}", render_profile(&p, &out))?;
            }
            Ok(0)
        }
        Err(ProfileRunError::Trial(TrialError::Interrupted(sig))) => {
            eprintln!(
                "synergy: interrupted by signal {sig}; finished trials are saved in {}; continue with --resume",
                out.with_extension("trials.jsonl").display()
            );
            Ok(128 + sig)
        }
        Err(e) => Err(e.into()),
    }
}

fn render_profile(p: &Profile, out: &std::path::Path) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let m = &p.matrix;
    let _ = writeln!(
        o,
        "{}: profile written to {} (and .csv)",
        p.workload.name,
        out.display()
    );
    if let Some(model) = &p.model {
        let s = &model.stall;
        let _ = writeln!(
            o,
            "  model        G = {:.1} samples/s; footprint {}; dataset {}; hit model {}; storage {}",
            s.accelerator_samples_per_s,
            Bytes(s.footprint_bytes),
            Bytes(s.dataset_bytes),
            s.hit_model,
            match (s.fetch.storage_bytes_per_s, s.fetch.storage_lower_bound) {
                (Some(b), false) => format!("{:.1} MB/s", b / 1e6),
                (Some(b), true) => format!("at least {:.1} MB/s (never held the cold trial up)", b / 1e6),
                (None, _) => "never limits".into(),
            }
        );
        if let Some(mc) = &s.miss_cost {
            let _ = writeln!(
                o,
                "  miss cost    {:.3} ms of CPU and {:.3} ms of a blocked loader per miss",
                1e3 * mc.cpu_s_per_miss,
                1e3 * mc.wait_s_per_miss
            );
        }
        if let Some(fit) = &model.hit_curve {
            let _ = writeln!(
                o,
                "  page cache   LRU plus {:.0}% of the gap to a fixed subset: {}",
                100.0 * fit.fixed_subset_share,
                fit.chosen_because
            );
        }
        if let Some(a) = &model.accelerator {
            let _ = writeln!(o, "  accelerator  {}", a.because);
        }
    }
    if let Some(why) = &p.workload.no_memory_axis {
        let _ = writeln!(o, "  memory axis  does not apply: {why}");
    }
    if let Some(probe) = &p.workload.probe {
        let _ = writeln!(o, "  probe        {}", probe.describe());
    }
    let _ = write!(o, "  samples/s    cores \\ GiB");
    // Enough decimals that neighbouring columns read apart (a small dataset beside a large footprint).
    let decimals = (2..=4)
        .find(|&d| {
            let f = |g: &f64| format!("{g:.d$}");
            m.memory_gib.windows(2).all(|w| f(&w[0]) != f(&w[1]))
        })
        .unwrap_or(4);
    for g in &m.memory_gib {
        let _ = write!(o, " {g:>8.decimals$}");
    }
    let _ = writeln!(o);
    if let Some(abs) = &m.samples_per_s {
        for (c, row) in m.cpus.iter().zip(abs) {
            let _ = write!(o, "               {c:>10}");
            for v in row {
                let _ = write!(o, " {v:>8.1}");
            }
            let _ = writeln!(o);
        }
    }
    let d = &p.demand;
    let _ = writeln!(
        o,
        "  proportional {} cores, {:.2} GiB = 1.0 ({:.1} samples/s)",
        m.proportional.cpus,
        m.proportional.memory_gib,
        m.proportional.samples_per_s.unwrap_or(0.0)
    );
    let _ = writeln!(
        o,
        "  demand       {} cores, {:.2} GiB: {:.2}x proportional (within {:.0}% of the best); per GPU {} cores, {:.2} GiB",
        d.job.cpus,
        d.job.memory_gib,
        d.job.normalized,
        100.0 * d.tolerance,
        d.per_gpu.cpus,
        d.per_gpu.memory_gib
    );
    let secs: f64 = p.trials.iter().map(|t| t.result.duration_s).sum();
    let _ = writeln!(
        o,
        "  trials       {} ({secs:.0} trial-seconds)",
        p.trials.len()
    );
    for s in &p.validation_summary {
        let _ = writeln!(
            o,
            "  validation   {}{} model: median error {:.1}%, mean {:.1}%, max {:.1}% over {} points{}",
            if s.ds_analyzer { "DS-Analyzer's " } else { "" },
            s.hit_model,
            100.0 * s.median_error,
            100.0 * s.mean_error,
            100.0 * s.max_error,
            s.points,
            if s.ds_analyzer {
                " (LRU, misses cost bandwidth only)"
            } else if p
                .model
                .as_ref()
                .is_some_and(|m| m.stall.hit_model == s.hit_model)
            {
                " (the workload's model)"
            } else {
                ""
            }
        );
    }
    let ours: Vec<&ErrorSummary> = p
        .validation_summary
        .iter()
        .filter(|s| !s.ds_analyzer)
        .collect();
    if let (Some(model), [a, b]) = (&p.model, ours.as_slice()) {
        let (own, other) = if a.hit_model == model.stall.hit_model {
            (a, b)
        } else {
            (b, a)
        };
        if other.median_error + 0.01 < own.median_error {
            let _ = writeln!(
                o,
                "  note         the {} model fits the validation points better than the spec's {}; check `cache` in the spec",
                other.hit_model, own.hit_model
            );
        }
    }
    for w in &p.warnings {
        let _ = writeln!(o, "  warning      {w}");
    }
    o
}

fn predict_cmd(args: PredictArgs) -> anyhow::Result<i32> {
    let p = Profile::read(&args.profile)?;
    check_positive("--cpus", args.cpus)?;
    check_positive("--mem", args.mem)?;
    let v = crate::profile::file::predict(&p, args.cpus, args.mem);
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&v)?)?;
    } else {
        outln!(
            "{} at {} cores, {} GiB: {}{:.2}x proportional{}",
            p.workload.name,
            args.cpus,
            args.mem,
            v.samples_per_s
                .map(|t| format!("{t:.1} samples/s, "))
                .unwrap_or_default(),
            v.normalized,
            v.limited_by
                .map(|s| format!(", limited by {s}"))
                .unwrap_or_default()
        )?;
    }
    Ok(0)
}

fn render_trial(r: &TrialResult) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let a = &r.allocation;
    let cores: Vec<String> = a.cpu_list.iter().map(|c| c.to_string()).collect();
    let _ = writeln!(
        o,
        "{} ({}) at {} cores [cpuset {}]{}{}{}{}",
        r.workload,
        r.spec,
        a.cpus,
        cores.join(","),
        a.mem_limit_bytes
            .map(|b| format!(", memory {}", Bytes(b)))
            .unwrap_or_default(),
        a.cache_bytes
            .map(|b| format!(", app cache {}", Bytes(b)))
            .unwrap_or_default(),
        a.storage_limit_bytes_per_s
            .map(|b| format!(", storage {:.1} MB/s", b / 1e6))
            .unwrap_or_default(),
        if a.synthetic { ", synthetic input" } else { "" },
    );
    let t = &r.throughput;
    let _ = writeln!(
        o,
        "  throughput   {:.1} ± {:.1} samples/s (95% CI, ±{:.1}%)",
        t.samples_per_s,
        t.ci95_half_width,
        100.0 * t.rel_half_width()
    );
    let _ = writeln!(
        o,
        "  stopped      {} after {:.1} s ({} steps; warm-up {:.1} s, measured {:.1} s over {} steps)",
        r.stop_reason, r.duration_s, r.steps, t.warmup_s, t.measured_s, t.measured_steps
    );
    let tel = &r.telemetry;
    let _ = writeln!(
        o,
        "  cpu          {:.1} s total{}",
        tel.cpu_seconds,
        tel.cpu_cores_used
            .map(|c| format!(", {c:.2} cores busy while measured"))
            .unwrap_or_default()
    );
    if let Some(d) = &r.disturbance {
        let _ = writeln!(
            o,
            "  contention   got {:.2} of {} cores; other work used {:.2} cores of its cpuset{}{}",
            d.got_cores,
            d.granted_cores,
            d.other_cores,
            d.waited_cores
                .map(|w| format!("; its threads waited {w:.2} cores' worth"))
                .unwrap_or_default(),
            if d.disturbed { " (DISTURBED)" } else { "" }
        );
    }
    if let Some(b) = tel.storage_read_bytes {
        let _ = writeln!(
            o,
            "  storage      {} read{}",
            Bytes(b),
            tel.storage_read_bytes_per_s
                .map(|r| format!(", {:.1} MB/s while measured", r / 1e6))
                .unwrap_or_default()
        );
    }
    if let Some(c) = tel.page_cache_peak_bytes {
        let _ = writeln!(
            o,
            "  page cache   peak {}{}",
            Bytes(c),
            tel.memory_peak_bytes
                .map(|m| format!(" (memory peak {})", Bytes(m)))
                .unwrap_or_default()
        );
    }
    if let Some(c) = &tel.app_cache {
        let _ = writeln!(
            o,
            "  app cache    hit ratio {:.3} after warm-up ({} hits, {} misses)",
            c.hit_ratio(),
            c.hits,
            c.misses
        );
    }
    if let Some(g) = &tel.gpu {
        let _ = writeln!(
            o,
            "  gpu          {}: {:.0}% busy, {} peak memory, {:.0} MHz SM",
            g.devices.join(", "),
            g.utilization_pct,
            Bytes(g.memory_used_peak_bytes),
            g.sm_clock_mhz
        );
    }
    if let Some(d) = &r.dataset {
        let _ = writeln!(
            o,
            "  dataset      {} ({} files, {}, mean {:.1} KB; {:.0}% cached at start{})",
            d.path.display(),
            d.files,
            Bytes(d.bytes),
            d.mean_file_bytes / 1e3,
            100.0 * d.resident_fraction_at_start,
            if d.generated { "; generated now" } else { "" }
        );
    }
    if let Some(p) = &r.probe {
        let _ = writeln!(o, "  probe        {}", p.describe());
    }
    let i = &r.isolation;
    let _ = writeln!(
        o,
        "  isolation    {}: setup {:.1} ms, teardown {:.1} ms",
        i.chosen_because, i.setup_ms, i.teardown_ms
    );
    if r.malformed_lines > 0 {
        let _ = writeln!(
            o,
            "  warning      {} progress lines did not follow the protocol",
            r.malformed_lines
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_ranges() {
        assert_eq!(parse_cpu_list("0-2,5").unwrap(), CoreIds(vec![0, 1, 2, 5]));
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("x").is_err());
    }
}
