//! The `synergy` command line: parses arguments, calls the library, prints results, maps errors to exit codes.

use crate::error::InputError;
use crate::units::Bytes;
use crate::workload::{builtin, dataset};
use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// Exit code for bad input (as clap uses for usage errors).
pub const EXIT_INPUT: i32 = 2;
/// Exit code for a failure while running.
pub const EXIT_FAILURE: i32 = 1;

#[derive(Debug, Parser)]
#[command(name = "synergy", version, about = "Profile and schedule deep-learning training jobs by their CPU and memory sensitivity")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
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
    #[command(after_help = "Examples:\n  synergy dataset gen --kind image --size 256MiB data/image\n  synergy dataset gen --kind text --size 64MiB --seed 7 data/text")]
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
}

#[derive(Debug, Subcommand)]
enum WorkloadCmd {
    /// Run a built-in pipeline under the launch contract (SYNERGY_CPUS, SYNERGY_CACHE_BYTES, ...).
    #[command(after_help = "Example:\n  SYNERGY_CPUS=1 synergy workload run image --dataset data/image --gpu-rate 400 --max-steps 50")]
    Run(builtin::RunArgs),
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
            if err.chain().any(|c| c.downcast_ref::<InputError>().is_some()) {
                EXIT_INPUT
            } else {
                EXIT_FAILURE
            }
        }
    }
}

fn dispatch(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Dataset(DatasetCmd::Gen {
            kind,
            size,
            seed,
            json,
            dir,
        }) => {
            let manifest = dataset::generate(kind, &dir, size, seed)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&manifest)?);
            } else {
                println!(
                    "{}: {} {} files, {} (mean {:.1} KB)",
                    dir.display(),
                    manifest.files,
                    manifest.kind,
                    manifest.total_bytes,
                    manifest.mean_file_bytes / 1000.0
                );
            }
            Ok(0)
        }
        Command::Workload(WorkloadCmd::Run(args)) => {
            builtin::run(&args)?;
            Ok(0)
        }
    }
}
