//! `synergy slurm advisor`: what was typed becomes the profiles' demands and the cluster's partitions;
//! the library ([`crate::advisor`]) builds, writes or checks the table; [`render`] words the result.

use super::args::{AdvisorArgs, SlurmCmd};
use super::render;
use super::values::parse_list;
use crate::advisor;
use crate::error::InputError;
use crate::exec::slurm::Slurm;
use crate::format::advisor_table::Partition;
use crate::input::{self, read_text, ReadError};
use std::path::Path;

/// Runs a `slurm` subcommand.
pub(super) fn slurm_cmd(cmd: SlurmCmd) -> anyhow::Result<i32> {
    match cmd {
        SlurmCmd::Advisor(args) => advisor_cmd(args),
    }
}

fn advisor_cmd(args: AdvisorArgs) -> anyhow::Result<i32> {
    if let Some(table) = &args.check {
        if let Some(p) = args.profiles.first() {
            return Err(InputError::new(
                "--check",
                format!(
                    "checks an installed table against the cluster and takes no PROFILE ({} given)",
                    p.display()
                ),
            )
            .into());
        }
        for (given, flag) in [
            (args.out.is_some(), "--out"),
            (args.allow_below_share.is_some(), "--allow-below-share"),
            (!args.job_name.is_empty(), "--job-name"),
        ] {
            if given {
                return Err(InputError::new(
                    "--check",
                    format!("does not write a table; {flag} is for writing one"),
                )
                .into());
            }
        }
        return check_cmd(table, args.sinfo.as_deref(), args.json);
    }
    if args.profiles.is_empty() {
        return Err(InputError::new(
            "PROFILE",
            "name at least one profile file or directory (or pass --check TABLE)",
        )
        .into());
    }
    let Some(out) = &args.out else {
        return Err(InputError::new(
            "--out",
            "is required: the directory to write job_submit.lua and synergy-advisor.tsv into",
        )
        .into());
    };
    if out.exists() && !out.is_dir() {
        return Err(
            InputError::new("--out", format!("{} is not a directory", out.display())).into(),
        );
    }
    let job_names = args
        .job_name
        .iter()
        .map(|j| match j.split_once('=') {
            Some((prefix, profile))
                if !prefix.is_empty()
                    && !profile.is_empty()
                    && !j.chars().any(|c| c.is_whitespace() || c.is_control()) =>
            {
                Ok((prefix.to_string(), profile.to_string()))
            }
            _ => Err(InputError::new(
                "--job-name",
                format!("`{j}` is not PREFIX=PROFILE (no spaces)"),
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let allow: Vec<String> = match &args.allow_below_share {
        Some(names) => parse_list("--allow-below-share", names, "a profile name")?,
        None => Vec::new(),
    };
    let mut demands = advisor::load_demands(&args.profiles)?;
    for name in &allow {
        match demands.iter_mut().find(|d| &d.name == name) {
            Some(d) => d.below_share = true,
            None => {
                return Err(InputError::new(
                    "--allow-below-share",
                    format!(
                        "no profile named `{name}` (profiles: {})",
                        demands
                            .iter()
                            .map(|d| d.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
                .into())
            }
        }
    }
    let partitions = partitions(args.sinfo.as_deref())?;
    let table = advisor::build(&demands, &partitions, &job_names, now_s())?;
    if table.partitions.is_empty() {
        return Err(InputError::new(
            args.sinfo
                .as_ref()
                .map_or("sinfo".to_string(), |p| p.display().to_string()),
            "lists no partition with GPU nodes: there is nothing to size",
        )
        .into());
    }
    let written = advisor::write(out, &table)
        .map_err(|e| anyhow::anyhow!("writing the advisor into {}: {e}", out.display()))?;
    if args.json {
        out!(
            "{}",
            render::json(&render::AdvisorWritten {
                written: &written,
                table: &table
            })?
        )?;
    } else {
        out!("{}", render::render_advisor(&table, &written))?;
    }
    Ok(0)
}

fn check_cmd(table: &Path, sinfo: Option<&Path>, json: bool) -> anyhow::Result<i32> {
    let text = match read_text(table, input::ADVISOR_TABLE) {
        Ok(t) => t,
        Err(ReadError::Input(e)) => return Err(e.into()),
        Err(ReadError::Io(e)) => return Err(e.into()),
    };
    let partitions = partitions(sinfo)?;
    let problems = advisor::check(&text, &partitions, now_s());
    if json {
        out!(
            "{}",
            render::json(&render::AdvisorCheck {
                table,
                ok: problems.is_empty(),
                problems: &problems,
            })?
        )?;
    }
    if problems.is_empty() {
        if !json {
            out!("{}", render::render_advisor_check(table, &text))?;
        }
        return Ok(0);
    }
    let listed: Vec<String> = problems.iter().map(ToString::to_string).collect();
    Err(InputError::new(
        table.display().to_string(),
        format!(
            "{} problem(s), the script will not trust what they touch: {}",
            problems.len(),
            listed.join("; ")
        ),
    )
    .into())
}

/// The cluster's partitions: from `--sinfo FILE`, or from `sinfo` of the cluster `SLURM_CONF` names.
fn partitions(file: Option<&Path>) -> anyhow::Result<Vec<Partition>> {
    let fmt = advisor::SINFO_FORMAT;
    match file {
        Some(p) => {
            let text = match read_text(p, input::SINFO) {
                Ok(t) => t,
                Err(ReadError::Input(e)) => return Err(e.into()),
                Err(ReadError::Io(e)) => return Err(e.into()),
            };
            Ok(advisor::parse_sinfo(&p.display().to_string(), &text)?)
        }
        None => {
            let text = Slurm::new().sinfo_nodes(fmt).map_err(|e| {
                anyhow::anyhow!("reading the cluster's nodes (or pass --sinfo FILE): {e}")
            })?;
            Ok(advisor::parse_sinfo(
                &format!("sinfo -N -h -o \"{fmt}\""),
                &text,
            )?)
        }
    }
}

fn now_s() -> u64 {
    crate::clock::unix_now_s() as u64
}
