//! What the user typed: the clap types of every command and their help text, and nothing else. Turning
//! these into the configurations the library takes is each command's module's job.

use crate::format::profile::ServerShape;
use crate::format::trial::IsolationKind;
use crate::units::{Bytes, BytesPerSec};
use crate::workload::builtin;
use crate::workload::probe::ProbeKind;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "synergy",
    version = crate::BUILD,
    about = "Profile and schedule deep-learning training jobs by their CPU and memory sensitivity"
)]
pub(in crate::cli) struct Cli {
    #[command(subcommand)]
    pub(super) command: Command,
}

#[derive(Debug, Subcommand)]
pub(super) enum Command {
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
        after_help = "Example:\n  synergy import-zoo tests/data/synergy-model-zoo.json --out-dir profiles/zoo"
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
    /// Bring a cluster's own history: import published GPU-cluster traces and Slurm accounting.
    #[command(subcommand)]
    Trace(TraceCmd),
    /// Bring profiles to a Slurm cluster the administrators keep scheduling themselves.
    #[command(subcommand)]
    Slurm(SlurmCmd),
    /// Say what a job should ask for per GPU and in all (cores, memory, loader workers, threads), what
    /// that gives against the GPU-proportional share, and the settings as #SBATCH lines, torchrun and
    /// DataLoader settings, a Kubernetes resources block or JSON.
    #[command(after_help = RECOMMEND_EXAMPLES)]
    Recommend(RecommendArgs),
    /// Print a shell's completion script for synergy (bash, zsh, fish, elvish, powershell).
    #[command(after_help = COMPLETIONS_EXAMPLES)]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print synergy's man page (roff) on standard output.
    #[command(
        after_help = "Example:\n  synergy man > ~/.local/share/man/man1/synergy.1 && man synergy"
    )]
    Man,
}

const RECOMMEND_EXAMPLES: &str = "Examples:
  synergy recommend profiles/image.json                                  # on the profile's own server shape
  synergy recommend profiles/zoo/res18.json --server 8gpu,96cpu,1tb --gpus 8
  synergy recommend profiles/zoo/res18.json --server 8gpu,96cpu,1tb --format sbatch > job.sbatch.head
  synergy recommend profiles/image.json --format torchrun
  synergy recommend profiles/image.json --server 4gpu,32cpu,256gb --format k8s
  synergy recommend profiles/image.json --json";

const COMPLETIONS_EXAMPLES: &str = "Examples:
  synergy completions bash > ~/.local/share/bash-completion/completions/synergy
  synergy completions zsh > ~/.zfunc/_synergy     # with fpath+=~/.zfunc before compinit
  synergy completions fish > ~/.config/fish/completions/synergy.fish";

#[derive(Debug, clap::Args)]
pub(super) struct RecommendArgs {
    /// A profile file.
    pub(super) profile: PathBuf,
    /// The server the job runs on, e.g. 8gpu,96cpu,1tb (default: the shape the profile is normalized
    /// to, the profiling host for a measured profile).
    #[arg(long, value_name = "SHAPE")]
    pub(super) server: Option<ServerShape>,
    /// GPUs of the job, at least 1 (default: the profiled job's); more than a server's span nodes.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub(super) gpus: Option<u32>,
    /// What to print.
    #[arg(long, value_enum, default_value = "table")]
    pub(super) format: RecommendFormat,
    /// Print as JSON (the same as --format json).
    #[arg(long, conflicts_with = "format")]
    pub(super) json: bool,
}

/// The vocabularies `recommend` speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum RecommendFormat {
    /// For people: the ask, its throughput, the steps around it, what it rests on.
    Table,
    /// The whole recommendation for scripts.
    Json,
    /// #SBATCH lines for a batch script.
    Sbatch,
    /// torchrun's command line and the DataLoader and thread settings.
    Torchrun,
    /// A Kubernetes container's resources block (one pod per node).
    K8s,
}

#[derive(Debug, Subcommand)]
pub(super) enum SlurmCmd {
    /// Write the submit-time advisor an administrator installs: a job_submit.lua (JobSubmitPlugins=lua)
    /// and the table it reads, which give a job that names its profile its best-case cores and memory;
    /// or, with --check, validate an installed table against the cluster.
    #[command(after_help = ADVISOR_EXAMPLES)]
    Advisor(AdvisorArgs),
}

const ADVISOR_EXAMPLES: &str = "Examples:
  synergy slurm advisor profiles/zoo profiles/image.json --out advisor/
  synergy slurm advisor profiles/zoo --allow-below-share gnmt,lstm --job-name train-r18-=res18 --out advisor/
  sinfo -N -h -o \"%N %c %m %G %P\" > nodes.txt && synergy slurm advisor profiles/zoo --sinfo nodes.txt --out advisor/
  synergy slurm advisor --check /etc/slurm/synergy-advisor.tsv --json";

#[derive(Debug, clap::Args)]
pub(super) struct AdvisorArgs {
    /// Profile files, or directories of them: each profile's best-case demand per GPU.
    #[arg(value_name = "PROFILE")]
    pub(super) profiles: Vec<PathBuf>,
    /// Directory to write job_submit.lua and synergy-advisor.tsv into (install both beside slurm.conf).
    #[arg(long, value_name = "DIR")]
    pub(super) out: Option<PathBuf>,
    /// Check this table against the cluster instead of writing one: exit 2 naming each line and field
    /// at fault.
    #[arg(long, value_name = "TABLE")]
    pub(super) check: Option<PathBuf>,
    /// The cluster's nodes from this file (`sinfo -N -h -o "%N %c %m %G %P"`) instead of running sinfo.
    #[arg(long, value_name = "FILE")]
    pub(super) sinfo: Option<PathBuf>,
    /// Profiles (comma-separated) whose jobs may get less than the GPU-proportional share.
    #[arg(long, value_name = "NAMES")]
    pub(super) allow_below_share: Option<String>,
    /// A job-name prefix that names a profile, PREFIX=PROFILE (repeatable): jobs whose name starts with
    /// it are sized as that profile without a --comment.
    #[arg(long, value_name = "PREFIX=PROFILE")]
    pub(super) job_name: Vec<String>,
    /// Print the table (or the check) as JSON.
    #[arg(long)]
    pub(super) json: bool,
}

#[derive(Debug, Subcommand)]
pub(super) enum TraceCmd {
    /// Turn a cluster trace (Philly, Helios, PAI, Acme, sacct, Gavel, Tiresias) into the simulator's
    /// trace CSV, saying on stderr what was kept, dropped and assumed.
    #[command(after_help = TRACE_IMPORT_EXAMPLES)]
    Import(Box<TraceImportArgs>),
    /// Write the cluster file of the machines a trace ran on (Philly's machine list, PAI's machine spec,
    /// or `sinfo` output), machines of one shape grouped.
    #[command(
        after_help = "Examples:\n  synergy trace cluster --format philly cluster_machine_list --out philly.toml\n  sinfo -N -h -o \"%N %c %m %G\" > nodes.txt && synergy trace cluster --format sinfo nodes.txt --out mine.toml"
    )]
    Cluster {
        /// The machine list's format.
        #[arg(long, value_enum)]
        format: crate::import::machines::MachineFormat,
        /// The machine list.
        file: PathBuf,
        /// Where to write the cluster file (default: standard output).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Cores per GPU, for lists that give only GPUs (Philly), more than 0.
        #[arg(long, default_value_t = 3.0)]
        cpus_per_gpu: f64,
        /// Memory per GPU, decimal GB, for lists that give only GPUs (Philly), more than 0.
        #[arg(long, default_value_t = 62.5)]
        mem_gb_per_gpu: f64,
    },
}

const TRACE_IMPORT_EXAMPLES: &str = "Examples:
  synergy trace import --format helios cluster_log.csv --out trace.csv
  synergy trace import --format philly cluster_job_log --from 2017-10-01 --to 2017-10-08 --load-scale 2 --out week.csv
  synergy trace import --format pai pai_job_table.csv pai_task_table.csv --map map.toml --out pai.csv --json
  sacct -a -X --parsable2 -o JobID,Submit,Start,End,Elapsed,AllocTRES,State,Partition,JobName,Comment > jobs.sacct
  synergy trace import --format sacct jobs.sacct --states all --out mine.csv";

#[derive(Debug, clap::Args)]
pub(super) struct TraceImportArgs {
    /// The trace's format.
    #[arg(long, value_enum)]
    pub(super) format: crate::import::Format,
    /// The trace's files (PAI: the job table and the task table).
    #[arg(required = true, value_name = "FILE")]
    pub(super) files: Vec<PathBuf>,
    /// Where to write the trace CSV (default: standard output).
    #[arg(long)]
    pub(super) out: Option<PathBuf>,
    /// Directory of profile files: the models jobs are given, and their time per iteration.
    #[arg(long, default_value = "profiles")]
    pub(super) profiles: PathBuf,
    #[command(flatten)]
    pub(super) cluster: ClusterFlags,
    /// States kept, comma-separated (completed, failed, cancelled, timeout, running, other), or `all`.
    #[arg(long, default_value = "completed")]
    pub(super) states: String,
    /// Keep jobs submitted at or after this time (`2017-10-01`, `2017-10-01 08:00:00`, Unix seconds).
    #[arg(long)]
    pub(super) from: Option<String>,
    /// Keep jobs submitted before this time.
    #[arg(long)]
    pub(super) to: Option<String>,
    /// Compress arrivals by this factor (more than 0; 2 doubles the load).
    #[arg(long, default_value_t = 1.0)]
    pub(super) load_scale: f64,
    /// Jobs wider than the widest server: cap them at it, keep them (spread over servers), or drop them.
    #[arg(long, value_enum, default_value = "cap")]
    pub(super) wide: crate::import::WideJobs,
    /// Shares of image, language and speech jobs for jobs that name no model.
    #[arg(long, default_value = "20,70,10")]
    pub(super) split: String,
    /// A mapping file (TOML `[[rule]]` with field = name|queue|user, pattern, profile), tried before the split.
    #[arg(long, conflicts_with = "model")]
    pub(super) map: Option<PathBuf>,
    /// Give every job that names no model this profile.
    #[arg(long)]
    pub(super) model: Option<String>,
    /// Print the import's summary as JSON on standard output (needs --out).
    #[arg(long, requires = "out")]
    pub(super) json: bool,
}

#[derive(Debug, Subcommand)]
pub(super) enum DatasetCmd {
    /// Generate a deterministic dataset.
    #[command(
        after_help = "Examples:\n  synergy dataset gen --kind image --size 256MiB data/image\n  synergy dataset gen --kind text --size 64MiB --seed 7 data/text"
    )]
    Gen {
        /// Kind of data.
        #[arg(long, value_enum)]
        kind: crate::format::dataset::DatasetKind,
        /// Total size of the data files (e.g. 256MiB, 1GB): more than 0, at most the free space there.
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
        pipeline: crate::format::rate::Pipeline,
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
pub(super) enum WorkloadCmd {
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
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub(super) struct ProfileArgs {
    /// What else to do with profiles.
    #[command(subcommand)]
    pub(super) action: Option<ProfileAction>,
    /// The workload.
    #[command(flatten)]
    pub(super) workload: WorkloadFlags,
    /// Where to write the profile (a CSV goes beside it). Default: profiles/NAME.json.
    #[arg(long)]
    pub(super) out: Option<PathBuf>,
    /// CPU axis: `auto` or an increasing list of cores, each more than 0 and at most this host's, e.g.
    /// 0.5,1,1.5,2.
    #[arg(long, default_value = "auto")]
    pub(super) cpus: String,
    /// Memory axis: `auto` (footprint plus 0-100% of the dataset) or an increasing list in GiB, each at
    /// least the workload's footprint and at most this host's memory, e.g. 0.25,0.5,1.
    #[arg(long, default_value = "auto")]
    pub(super) mem: String,
    /// GPUs the job trains on, at least 1 (default: the spec's).
    #[arg(long)]
    pub(super) gpus: Option<u32>,
    /// Reference server shape for normalization, e.g. 8gpu,24cpu,500gb (default: this host).
    #[arg(long)]
    pub(super) server: Option<ServerShape>,
    /// Held-out grid points to measure under their real constraint.
    #[arg(long, default_value_t = 2)]
    pub(super) validate: usize,
    /// Wall time the profile may take, e.g. 10m or 2h, or `none`: a held-out point that would not
    /// fit in what is left is not measured (the profile says so); the model's own trials and
    /// --exhaustive always run.
    #[arg(long, default_value = "30m", value_name = "DURATION")]
    pub(super) budget: String,
    /// Measure every grid point too (slow; for checking the model).
    #[arg(long)]
    pub(super) exhaustive: bool,
    /// Continue an interrupted profile, reusing its finished trials.
    #[arg(long)]
    pub(super) resume: bool,
    /// Launch the workload afresh for every cached trial of the CPU sweep. By default a probed script
    /// (`--probe`, its loader's workers fixed by the script) is launched once for the whole sweep and
    /// re-budgeted in place; a script that sizes its loader from SYNERGY_CPUS needs this flag.
    #[arg(long)]
    pub(super) fresh_trials: bool,
    #[command(flatten)]
    pub(super) limits: LimitFlags,
    /// Fraction of the best throughput the demand vector may give up, in [0, 1).
    #[arg(long, default_value_t = 0.05)]
    pub(super) tolerance: f64,
    /// Print the whole profile as JSON.
    #[arg(long)]
    pub(super) json: bool,
    /// Also draw NAME.cpu.svg, NAME.mem.svg, NAME.heatmap.svg and NAME.fit.svg beside the profile.
    #[arg(long)]
    pub(super) plot: bool,
}

#[derive(Debug, Subcommand)]
pub(super) enum ProfileAction {
    /// Fold what real runs observed (`synergy run`'s observation logs) into a profile as `observed`
    /// trials: the CPU curve (and the miss cost, where memory was limited) moves to them, and the matrix
    /// and demand are rebuilt.
    #[command(
        after_help = "Examples:\n  synergy profile refine profiles/image.json --from runs/ --out image-here.json\n  synergy profile refine profiles/image.json --from jobs.state.observations.jsonl --json"
    )]
    Refine(RefineArgs),
    /// Replay the profiling plan over the trials a profile holds, measuring nothing: its model, matrix
    /// and validation are derived again with this version's fit, and what it measured outside its
    /// trials (the CPU calibration, the read probe, the storage rate) is taken as recorded. Needs the
    /// workload's spec and dataset. (Formerly `refit`, still accepted.)
    #[command(
        alias = "refit",
        after_help = "Examples:\n  synergy profile replay profiles/image.json --out image-replayed.json\n  synergy profile replay old.json --spec workloads/image.toml --json"
    )]
    Replay(ReplayArgs),
}

#[derive(Debug, clap::Args)]
pub(super) struct ReplayArgs {
    /// The profile to replay (a measured one: it needs its trials).
    pub(super) profile: PathBuf,
    /// The workload's spec file or built-in name (default: the one the profile names).
    #[arg(long)]
    pub(super) spec: Option<String>,
    /// Where to write the replayed profile (default: PROFILE with `.replayed.json`).
    #[arg(long)]
    pub(super) out: Option<PathBuf>,
    /// Print the replayed profile as JSON.
    #[arg(long)]
    pub(super) json: bool,
}

#[derive(Debug, clap::Args)]
pub(super) struct RefineArgs {
    /// The profile to refine (a measured one: it needs its fitted model).
    pub(super) profile: PathBuf,
    /// A run's directory (every *.observations.jsonl in it) or an observation log; repeatable.
    #[arg(long, required = true, num_args = 1.., value_name = "RUN_DIR")]
    pub(super) from: Vec<PathBuf>,
    /// Where to write the refined profile (default: PROFILE with `.refined.json`).
    #[arg(long)]
    pub(super) out: Option<PathBuf>,
    /// Fold in observations that other work on the host disturbed too (left out by default).
    #[arg(long)]
    pub(super) include_disturbed: bool,
    /// Print the refined profile as JSON.
    #[arg(long)]
    pub(super) json: bool,
}

const PLOT_EXAMPLES: &str = "Examples:
  synergy plot profiles/image.json --kind cpu -o image-cpu.png
  synergy plot profiles/*.json --kind cpu -o compare.svg          # one normalized line per profile
  synergy plot profiles/zoo/res18.json --kind heatmap -o res18.svg --width 1200 --height 800
  synergy plot profiles/audio.json --kind fit -o audio-fit.svg
  synergy simulate --policy fifo --mechanism proportional,tune --load 4,8,12 --jobs 300 --out sweep/
  synergy plot sweep/ --kind jct-vs-load -o jct-vs-load.svg";

#[derive(Debug, clap::Args)]
pub(super) struct PlotArgs {
    /// Profile files (cpu, mem, heatmap, fit), or `simulate --out` directories: a run or a sweep (jct-cdf,
    /// jct-vs-load, utilization).
    #[arg(required = true)]
    pub(super) inputs: Vec<PathBuf>,
    /// What to draw.
    #[arg(long, value_enum)]
    pub(super) kind: crate::plot::Kind,
    /// The chart file: .png or .svg.
    #[arg(short, long)]
    pub(super) out: PathBuf,
    /// Width, pixels.
    #[arg(long, default_value_t = crate::plot::Size::DEFAULT.width)]
    pub(super) width: u32,
    /// Height, pixels.
    #[arg(long, default_value_t = crate::plot::Size::DEFAULT.height)]
    pub(super) height: u32,
    /// Print what was written as JSON.
    #[arg(long)]
    pub(super) json: bool,
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
  synergy run examples/jobs-mixed.toml --gpus 2 --refine          # profiles learn from the run
  synergy run examples/jobs-mixed.toml --backend slurm --round 15  # on a Slurm cluster";

#[derive(Debug, clap::Args)]
pub(super) struct RunCmdArgs {
    /// The job list (TOML; see docs/run.md).
    pub(super) jobs: PathBuf,
    /// Where jobs run.
    #[arg(long, value_enum, default_value = "local")]
    pub(super) backend: RunBackend,
    /// Policy: fifo, srtf, las, ftf.
    #[arg(long, default_value = "fifo")]
    pub(super) policy: String,
    /// Mechanism: proportional, greedy, tune, opt.
    #[arg(long, default_value = "tune")]
    pub(super) mechanism: String,
    /// Round length, seconds, more than 0 and at most 1e9.
    #[arg(long = "round", default_value_t = 15.0)]
    pub(super) round_s: f64,
    /// Emulate this many GPUs (slots) instead of using NVML's (local backend).
    #[arg(long)]
    pub(super) gpus: Option<u32>,
    /// Use only this many cores (of each node, on Slurm).
    #[arg(long)]
    pub(super) cpus: Option<usize>,
    /// Give jobs at most this much memory in all (of each node, on Slurm; e.g. 8GiB): more than 0, at most
    /// the host's, and enough that each job's share by its GPUs holds its footprint.
    #[arg(long)]
    pub(super) mem: Option<Bytes>,
    /// Slurm backend: use only this node (repeatable; default: every node with GPUs that takes jobs).
    #[arg(long = "node")]
    pub(super) nodes: Vec<String>,
    /// Slurm backend: submit to this partition (default: the cluster's).
    #[arg(long)]
    pub(super) partition: Option<String>,
    /// Print each round's plan (from the simulator's progress model) without launching anything.
    #[arg(long)]
    pub(super) dry_run: bool,
    /// The state file (default: the job list's path with `.state.json`).
    #[arg(long)]
    pub(super) state: Option<PathBuf>,
    /// Continue the run recorded in the state file after the executor was killed.
    #[arg(long, conflicts_with = "fresh")]
    pub(super) resume: bool,
    /// Start over although the state file records an earlier run (its JCTs and saved progress are lost).
    #[arg(long)]
    pub(super) fresh: bool,
    /// Times a crashing job is started again before it counts as failed.
    #[arg(long, default_value_t = 2)]
    pub(super) max_retries: u32,
    /// Refine each job's profile from what the run observes, between rounds, so the next round is
    /// planned with the refined matrix; the refined profiles are written to STATE.refined/.
    #[arg(long, conflicts_with = "dry_run")]
    pub(super) refine: bool,
    /// With --refine: fold in observations that other work on the host disturbed too (left out by
    /// default; on a host that stays busy they are what the jobs get).
    #[arg(long, requires = "refine")]
    pub(super) include_disturbed: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub(super) json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum RunBackend {
    /// This server: cgroups per job, GPUs by CUDA_VISIBLE_DEVICES.
    Local,
    /// A Slurm cluster: each allocation a batch job (--cpus-per-task, --mem, --gres=gpu:N).
    Slurm,
}

/// The cluster a simulation (or an import) is for: a file, or uniform servers.
#[derive(Debug, clap::Args)]
pub(super) struct ClusterFlags {
    /// Cluster file (TOML: `[[servers]]` with count, gpus, cpus, memory_gb); overrides the --server* flags.
    #[arg(long)]
    pub(super) cluster: Option<PathBuf>,
    /// Servers, at least 1 (with --server-gpus, at most 2^20 GPUs in all).
    #[arg(long, default_value_t = 16)]
    pub(super) servers: u32,
    /// GPUs per server, at least 1.
    #[arg(long, default_value_t = 8)]
    pub(super) server_gpus: u32,
    /// Cores per server, more than 0.
    #[arg(long, default_value_t = 24.0)]
    pub(super) server_cpus: f64,
    /// Memory per server, decimal GB (converted to GiB), more than 0.
    #[arg(long, default_value_t = 500.0)]
    pub(super) server_mem_gb: f64,
}

#[derive(Debug, clap::Args)]
pub(super) struct SimulateArgs {
    /// Directory of profile files (searched recursively); jobs name models by `workload.name`.
    #[arg(long, default_value = "profiles")]
    pub(super) profiles: PathBuf,
    #[command(flatten)]
    pub(super) cluster: ClusterFlags,
    /// Trace CSV (`id,model,arrival_s,iters,gpus`), or a cluster's own trace with --trace-format;
    /// without it a workload is generated.
    #[arg(long, conflicts_with = "jobs_list")]
    pub(super) trace: Option<PathBuf>,
    /// Read --trace as this published format (imported as `synergy trace import` does, with its defaults
    /// and this --split) instead of the simulator's CSV.
    #[arg(long, value_enum, requires = "trace")]
    pub(super) trace_format: Option<crate::import::Format>,
    /// A job list as `synergy run` takes it (its own profiles; predicts every job's JCT).
    #[arg(long = "jobs-list", value_name = "JOBS.toml")]
    pub(super) jobs_list: Option<PathBuf>,
    /// Policies, comma-separated: fifo, srtf, las, ftf.
    #[arg(long, default_value = "fifo")]
    pub(super) policy: String,
    /// Mechanisms, comma-separated: proportional, greedy, tune, opt.
    #[arg(long, default_value = "tune")]
    pub(super) mechanism: String,
    /// Generated arrivals per hour, each more than 0, comma-separated for a sweep.
    #[arg(long, default_value = "9")]
    pub(super) load: String,
    /// Seeds of the generated trace's arrivals, comma-separated; the streams are the reference simulator's,
    /// so 42 (its default) replays the published runs.
    #[arg(long, default_value = "42")]
    pub(super) seed: String,
    /// Seed of the job list (durations, GPU counts): a number, or `seed` to follow --seed. The reference
    /// drew its list once, with 42, and reused it for every seed.
    #[arg(long, value_name = "N|seed", default_value = "42")]
    pub(super) job_list_seed: String,
    /// Shares of image, language and speech jobs.
    #[arg(long, default_value = "20,70,10")]
    pub(super) split: String,
    /// Generated jobs take 1/2/4/8 GPUs (0.70/0.10/0.15/0.05) instead of 1.
    #[arg(long)]
    pub(super) multi_gpu: bool,
    /// Generate this many jobs (default: endless arrivals until the window has finished).
    #[arg(long)]
    pub(super) jobs: Option<u64>,
    /// Job ids measured, `A-B` or `all` (default: 4000-4999 for an endless generated trace, else all).
    #[arg(long)]
    pub(super) window: Option<String>,
    /// Round length, seconds, more than 0 and at most 1e9.
    #[arg(long, visible_alias = "round", default_value_t = 300.0)]
    pub(super) round_s: f64,
    /// Scheduling rules: `synergy` (this project's) or `reference` (the reference simulator's: one
    /// random stream for a --multi-gpu trace, linear speed of capped jobs, per-GPU placement, one-server
    /// demotion, tune falling back to a job's own demand below its share, jobs ending at round
    /// boundaries; see docs/simulate.md).
    #[arg(long, value_name = "synergy|reference", default_value = "synergy")]
    pub(super) semantics: String,
    /// Parallel simulations in a sweep, at least 1 (default: the host's cores).
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub(super) threads: Option<usize>,
    /// Print the summary (or every summary of a sweep) as JSON.
    #[arg(long)]
    pub(super) json: bool,
    /// Write jobs.csv, rounds.csv and summary.json here (a subdirectory per configuration in a sweep).
    #[arg(long)]
    pub(super) out: Option<PathBuf>,
    /// Write the usual charts here: jct-cdf.svg, utilization.svg, and jct-vs-load.svg for several loads.
    #[arg(long, value_name = "DIR")]
    pub(super) plot: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub(super) struct PredictArgs {
    /// A profile file.
    pub(super) profile: PathBuf,
    /// Cores.
    #[arg(long)]
    pub(super) cpus: f64,
    /// Memory, GiB (footprint plus cache).
    #[arg(long)]
    pub(super) mem: f64,
    /// Print as JSON.
    #[arg(long)]
    pub(super) json: bool,
}

/// How `measure` and `profile` isolate their trials, and the storage limit each trial runs under.
#[derive(Debug, clap::Args)]
pub(super) struct LimitFlags {
    /// Limit storage reads on the dataset's device in every trial, e.g. 20MB/s (more than 0).
    #[arg(long)]
    pub(super) storage_bps: Option<BytesPerSec>,
    /// Isolation backend (default: detect).
    #[arg(long, value_enum)]
    pub(super) isolation: Option<IsolationKind>,
}

/// What `measure` and `profile` run: a spec, or a command that may be probed, and where its dataset is.
#[derive(Debug, clap::Args)]
pub(super) struct WorkloadFlags {
    /// Workload spec file, or a built-in workload name (image, audio, text; `measure` runs image when
    /// none is named); or none, with `-- COMMAND`.
    pub(super) spec: Option<String>,
    /// Inject a zero-change probe into the workload (overrides the spec's `probe`).
    #[arg(long, value_enum)]
    pub(super) probe: Option<ProbeKind>,
    /// A command to run without a spec, e.g. `-- python train.py` (use with --probe pytorch).
    #[arg(last = true)]
    pub(super) command: Vec<String>,
    /// The directory of the workload's dataset, for a command (or instead of the spec's): its cache
    /// state, memory limits and storage limit then apply to it. A probed script's is found by the probe.
    #[arg(long)]
    pub(super) dataset: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub(super) struct MeasureArgs {
    /// The workload (`image` when neither a spec nor a command is given).
    #[command(flatten)]
    pub(super) workload: WorkloadFlags,
    /// CPU cores, more than 0 and at most this host's (fractional values use a CFS quota). Default: every
    /// core of this host.
    #[arg(long)]
    pub(super) cpus: Option<f64>,
    /// Specific core ids, e.g. `0,1` or `0-3`.
    #[arg(long, value_parser = parse_cpu_list)]
    pub(super) cpu_list: Option<CoreIds>,
    /// Memory limit for the workload's cgroup (resident memory plus page cache), e.g. 1GiB: at least the
    /// spec's footprint, at most this host's memory.
    #[arg(long)]
    pub(super) mem: Option<Bytes>,
    /// Application cache budget passed as SYNERGY_CACHE_BYTES, e.g. 128MiB; at most this host's memory.
    #[arg(long)]
    pub(super) cache_bytes: Option<Bytes>,
    /// Evict the dataset from the page cache first.
    #[arg(long, conflicts_with = "warm")]
    pub(super) cold: bool,
    /// Read the whole dataset into the page cache first.
    #[arg(long)]
    pub(super) warm: bool,
    #[command(flatten)]
    pub(super) limits: LimitFlags,
    /// Feed synthetic batches: measures the accelerator's ingestion rate alone.
    #[arg(long)]
    pub(super) synthetic: bool,
    /// Seconds of warm-up excluded from the estimate, not negative.
    #[arg(long, default_value_t = 2.0)]
    pub(super) warmup_seconds: f64,
    /// Steps of warm-up excluded from the estimate.
    #[arg(long, default_value_t = 3)]
    pub(super) warmup_steps: u64,
    /// Whole epochs excluded from the estimate (e.g. 1 while a cache fills).
    #[arg(long, default_value_t = 0)]
    pub(super) warmup_epochs: u64,
    /// Measure whole epochs: start where an epoch starts and stop at the first epoch end past
    /// --min-seconds (--precision then does not apply; epochs shorter than 1.5 times --min-seconds are
    /// measured until three agree within it). For memory-limited trials, whose page-cache hits cluster
    /// early in each epoch.
    #[arg(long)]
    pub(super) whole_epochs: bool,
    /// Shortest measured window, seconds, not negative and at most --max-seconds.
    #[arg(long, default_value_t = 3.0)]
    pub(super) min_seconds: f64,
    /// Fewest steps in the measured window (a few steps of a loader with workers read off by
    /// several percent).
    #[arg(long, default_value_t = 0)]
    pub(super) min_steps: u64,
    /// Longest trial, seconds, more than 0.
    #[arg(long, default_value_t = 60.0)]
    pub(super) max_seconds: f64,
    /// Stop when the 95% confidence half-width is within this fraction of the mean (between 0 and 1).
    #[arg(long, default_value_t = 0.02)]
    pub(super) precision: f64,
    /// Print the result as JSON.
    #[arg(long)]
    pub(super) json: bool,
}

/// Core ids as one flag value: a newtype, because clap reads `Option<Vec<T>>` as a flag given many times.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct CoreIds(pub(super) Vec<usize>);

pub(super) fn parse_cpu_list(s: &str) -> Result<CoreIds, String> {
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
