//! `synergy completions` and `synergy man`: the command line describing itself, generated from its clap
//! definitions ([`super::args`]) so that neither can fall behind the flags.

use super::args::Cli;
use clap::CommandFactory as _;

/// Prints `shell`'s completion script.
pub(super) fn completions_cmd(shell: clap_complete::Shell) -> anyhow::Result<i32> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "synergy", &mut script);
    out!("{}", String::from_utf8_lossy(&script))?;
    Ok(0)
}

/// Prints the man page, synergy(1), as roff.
pub(super) fn man_cmd() -> anyhow::Result<i32> {
    let mut page = Vec::new();
    clap_mangen::Man::new(Cli::command()).render(&mut page)?;
    out!("{}", String::from_utf8_lossy(&page))?;
    Ok(0)
}
