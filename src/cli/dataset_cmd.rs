//! `synergy dataset gen`, `dataset rate` and `workload run`: the built-in workloads' data and the
//! pipelines themselves.

use super::args::{DatasetCmd, WorkloadCmd};
use super::render;
use crate::cancel::Cancel;
use crate::error::InputError;
use crate::workload::{builtin, dataset, WorkloadError};
use std::path::Path;

/// Runs a `dataset` subcommand.
pub(super) fn dataset_cmd(cmd: DatasetCmd) -> anyhow::Result<i32> {
    match cmd {
        DatasetCmd::Gen {
            kind,
            size,
            seed,
            json,
            dir,
        } => {
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
                out!("{}", render::json(&manifest)?)?;
            } else {
                out!("{}", render::render_manifest(&dir, &manifest))?;
            }
            Ok(0)
        }
        DatasetCmd::Rate {
            dir,
            pipeline,
            seq_len,
            refresh,
            json,
        } => rate_cmd(&dir, pipeline, seq_len, refresh, json),
    }
}

fn rate_cmd(
    dir: &Path,
    pipeline: crate::format::rate::Pipeline,
    seq_len: Option<usize>,
    refresh: bool,
    json: bool,
) -> anyhow::Result<i32> {
    if seq_len.is_some() && pipeline != crate::format::rate::Pipeline::Text {
        return Err(InputError::new("--seq-len", "applies to the text pipeline only").into());
    }
    if seq_len == Some(0) {
        return Err(InputError::new("--seq-len", "must be at least 1").into());
    }
    // The same default as `synergy workload run`, so both find the same stored rate.
    let seq_len = seq_len.unwrap_or(builtin::DEFAULT_SEQ_LEN);
    let r = builtin::rate::one_core_rate(dir, pipeline, seq_len, refresh)?;
    if json {
        out!("{}", render::json(&r)?)?;
    } else {
        out!("{}", render::render_rate(dir, pipeline, &r))?;
    }
    Ok(0)
}

/// Runs a `workload` subcommand: a built-in pipeline, as `measure` launches it.
pub(super) fn workload_cmd(cmd: WorkloadCmd) -> anyhow::Result<i32> {
    match cmd {
        WorkloadCmd::Run(args) => {
            builtin::run(&args)?;
            Ok(0)
        }
    }
}
