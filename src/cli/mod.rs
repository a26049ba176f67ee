//! The `synergy` command line: parses arguments, dispatches to a command, maps errors to exit codes and
//! prints them with the library's settings named as flags.
//!
//! What the user typed ([`args`]) is kept apart from what it means: each command's module turns its
//! arguments into the configurations the library takes, runs it, and hands results to [`render`], which
//! words everything printed. [`flags`] holds the one table from settings to flags.

use crate::error::InputError;
use crate::format::profile::ProfileError;
use crate::isolate::IsolateError;
use crate::measure::TrialError;
use crate::profile::plan::ProfileRunError;
use crate::workload::WorkloadError;
use clap::Parser as _;

/// Writes to standard output. A full or closed output (`> /dev/full`, a pipe whose reader left) is an
/// error the command reports, not a panic.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut stdout = std::io::stdout().lock();
        write!(stdout, $($arg)*)
            .and_then(|()| stdout.flush())
            .map_err(|e| anyhow::Error::new(e).context("writing the output"))
    }};
}

/// [`out!`] with a newline.
macro_rules! outln {
    ($($arg:tt)*) => {
        out!("{}\n", format_args!($($arg)*))
    };
}

mod args;
mod dataset_cmd;
mod flags;
mod measure_cmd;
mod plot_cmd;
mod profile_cmd;
mod recommend_cmd;
mod render;
mod run_cmd;
mod self_doc_cmd;
mod simulate_cmd;
mod slurm_cmd;
mod trace_cmd;
mod values;

use args::{Cli, Command};

/// Exit code for bad input (as clap uses for usage errors).
pub const EXIT_INPUT: i32 = 2;
/// Exit code for a failure while running.
pub const EXIT_FAILURE: i32 = 1;

/// Runs the command line and returns the process exit code.
pub fn main() -> i32 {
    flags::name_settings_as_flags();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return e.exit_code();
        }
    };
    // A built-in workload keeps its own signal contract (save its progress, then stop).
    if !matches!(cli.command, Command::Workload { .. }) {
        if let Err(e) = remove_unfinished_outputs_on_signals() {
            eprintln!("synergy: cannot watch for signals ({e}); an interrupted write may leave a temporary file");
        }
    }
    let result = dispatch(cli);
    for left in crate::fsutil::take_reaped() {
        match left {
            crate::fsutil::Leftover::Removed(p) => eprintln!(
                "synergy: removed {}, the unfinished output of a synergy that died",
                p.display()
            ),
            crate::fsutil::Leftover::Finished(files) => {
                let named: Vec<String> = files
                    .iter()
                    .take(3)
                    .map(|p| p.display().to_string())
                    .collect();
                let more = match files.len().saturating_sub(named.len()) {
                    0 => String::new(),
                    n => format!(" and {n} more"),
                };
                eprintln!(
                    "synergy: finished writing {}{more}, which a synergy that died had left half renamed",
                    named.join(", ")
                )
            }
        }
    }
    match result {
        Ok(code) => code,
        // A reader that stopped reading (`| head -1`) wanted no more: the command ends quietly, as
        // command-line tools do (docs/architecture.md §7).
        Err(err) if closed_stdout(&err) => 0,
        Err(err) => {
            eprintln!("error: {}", bounded(&one_line(&err)));
            if err.chain().any(is_input_error) {
                EXIT_INPUT
            } else {
                EXIT_FAILURE
            }
        }
    }
}

/// Has SIGINT, SIGTERM and SIGHUP remove what this process is writing (temporary files, staging
/// directories) before it ends, with the shell's status for the signal. Commands that stop gracefully on
/// SIGINT and SIGTERM ([`crate::cancel::Cancel`]) keep doing so: for those the signal is theirs.
fn remove_unfinished_outputs_on_signals() -> std::io::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])?;
    std::thread::spawn(move || {
        for sig in signals.forever() {
            if sig != SIGHUP && crate::cancel::Cancel::handled() {
                continue;
            }
            crate::fsutil::exit_removing_in_progress(128 + sig);
        }
    });
    Ok(())
}

/// Whether `err` is the standard output closed by its reader.
fn closed_stdout(err: &anyhow::Error) -> bool {
    err.to_string() == "writing the output"
        && err.chain().any(|c| {
            c.downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
        })
}

/// The longest error message printed: a value echoed back (a 50 MB field) is cut to this many bytes.
const MAX_MESSAGE_BYTES: usize = 2000;

/// `line` cut to [`MAX_MESSAGE_BYTES`] at a character boundary, saying how much was left out.
fn bounded(line: &str) -> std::borrow::Cow<'_, str> {
    if line.len() <= MAX_MESSAGE_BYTES {
        return line.into();
    }
    let mut end = MAX_MESSAGE_BYTES;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} more bytes)", &line[..end], line.len() - end).into()
}

/// The error and its causes on one line, `outer: inner: ...`; a cause whose words its outer error already
/// ends with (an error that prints its source and also reports it as its source) is said once.
fn one_line(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if line.is_empty() {
            line = text;
        } else if !line.ends_with(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
    }
    line
}

fn dispatch(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Measure(args) => measure_cmd::measure_cmd(args),
        Command::Profile(args) => profile_cmd::profile_cmd(args),
        Command::Predict(args) => profile_cmd::predict_cmd(args),
        Command::Simulate(args) => simulate_cmd::simulate_cmd(args),
        Command::Plot(args) => plot_cmd::plot_cmd(args),
        Command::Run(args) => run_cmd::run_cmd(args),
        Command::ImportZoo { zoo, out_dir } => profile_cmd::import_zoo_cmd(&zoo, &out_dir),
        Command::Dataset(cmd) => dataset_cmd::dataset_cmd(cmd),
        Command::Workload(cmd) => dataset_cmd::workload_cmd(cmd),
        Command::Trace(cmd) => trace_cmd::trace_cmd(cmd),
        Command::Slurm(cmd) => slurm_cmd::slurm_cmd(cmd),
        Command::Recommend(args) => recommend_cmd::recommend_cmd(args),
        Command::Completions { shell } => self_doc_cmd::completions_cmd(shell),
        Command::Man => self_doc_cmd::man_cmd(),
    }
}

/// Removes what dead synergy processes left ([`crate::leftovers`]) and says what on standard error. Every
/// command that makes cgroups or temporary directories calls it once its input is known to be good,
/// before it makes any.
fn reap_leftovers() {
    for l in crate::leftovers::reap() {
        match &l.error {
            None => eprintln!("synergy: removed {l}"),
            Some(e) => eprintln!("synergy: warning: could not remove {l}: {e}"),
        }
    }
}

/// Whether an error in a chain is the user's to fix by changing their input (exit code 2).
fn is_input_error(e: &(dyn std::error::Error + 'static)) -> bool {
    if e.is::<InputError>() {
        return true;
    }
    if let Some(r) = e.downcast_ref::<crate::input::ReadError>() {
        return matches!(r, crate::input::ReadError::Input(_));
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
    e.downcast_ref::<IsolateError>()
        .is_some_and(IsolateError::is_input)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_already_in_its_outer_message_is_said_once() {
        let io = std::io::Error::other("Is a directory");
        let e = anyhow::Error::new(ProfileError::Io {
            context: "reading profiles".into(),
            source: io,
        })
        .context("loading the catalog");
        assert_eq!(
            one_line(&e),
            "loading the catalog: reading profiles: Is a directory"
        );
    }
}
