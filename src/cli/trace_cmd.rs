//! `synergy trace import`: a cluster's own history as the simulator's trace. What was typed becomes
//! [`ImportOptions`] here (shared with `simulate --trace-format`); the library reads and converts;
//! [`render`] words the summary, which goes to stderr (or, with `--json`, to stdout).

use super::args::{ClusterFlags, TraceCmd, TraceImportArgs};
use super::render;
use super::values::cluster_from_flags;
use super::values::{check_positive, parse_list};
use crate::error::InputError;
use crate::import::assign::{read_map, ModelRule};
use crate::import::machines::{read_machines, to_cluster_toml, PerGpu};
use crate::import::{self, time::parse_time, ImportOptions, JobOutcome, WideJobs};
use crate::sched::catalog::Catalog;
use std::path::Path;

/// Runs a `trace` subcommand.
pub(super) fn trace_cmd(cmd: TraceCmd) -> anyhow::Result<i32> {
    match cmd {
        TraceCmd::Import(args) => import_cmd(*args),
        TraceCmd::Cluster {
            format,
            file,
            out,
            cpus_per_gpu,
            mem_gb_per_gpu,
        } => {
            check_positive("--cpus-per-gpu", cpus_per_gpu)?;
            check_positive("--mem-gb-per-gpu", mem_gb_per_gpu)?;
            let per_gpu = PerGpu {
                cpus: cpus_per_gpu,
                memory_gb: mem_gb_per_gpu,
            };
            let groups = read_machines(format, &file, per_gpu)?;
            let text = to_cluster_toml(&groups);
            match &out {
                Some(p) => {
                    crate::fsutil::write_atomic(p, text.as_bytes())
                        .map_err(|e| anyhow::anyhow!("writing {}: {e}", p.display()))?;
                    let servers: u32 = groups.iter().map(|g| g.count).sum();
                    let gpus: u64 = groups.iter().map(|g| g.count as u64 * g.gpus as u64).sum();
                    eprintln!(
                        "synergy: wrote {} ({servers} servers in {} shapes, {gpus} GPUs)",
                        p.display(),
                        groups.len()
                    );
                }
                None => out!("{text}")?,
            }
            Ok(0)
        }
    }
}

fn import_cmd(args: TraceImportArgs) -> anyhow::Result<i32> {
    let rule = model_rule(&args.split, args.map.as_deref(), args.model.as_deref())?;
    let opts = import_options(
        &args.cluster,
        &args.states,
        args.from.as_deref(),
        args.to.as_deref(),
        args.load_scale,
        args.wide,
        rule,
    )?;
    let catalog = Catalog::load_dir(&args.profiles)?;
    let (jobs, summary) = import::import(args.format, &args.files, &opts, &catalog)?;
    let csv = crate::format::trace::to_csv(&jobs)
        .map_err(|e| anyhow::anyhow!("writing the trace: {e}"))?;
    match &args.out {
        Some(out) => crate::fsutil::write_atomic(out, &csv)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", out.display()))?,
        None => {
            use std::io::Write as _;
            std::io::stdout()
                .lock()
                .write_all(&csv)
                .map_err(|e| anyhow::Error::new(e).context("writing the output"))?;
        }
    }
    if args.json {
        out!("{}", render::json(&summary)?)?;
    } else {
        eprint!("{}", render::render_import(&summary, args.out.as_deref()));
    }
    Ok(0)
}

/// The model rule of `--split`, `--map` and `--model`.
pub(super) fn model_rule(
    split: &str,
    map: Option<&Path>,
    model: Option<&str>,
) -> Result<ModelRule, InputError> {
    let shares: Vec<f64> = parse_list("--split", split, "a number")?;
    let [a, b, c] = shares[..] else {
        return Err(InputError::new(
            "--split",
            "needs three shares: image,language,speech",
        ));
    };
    Ok(match (map, model) {
        (_, Some(m)) => ModelRule::Single(m.to_string()),
        (Some(p), None) => ModelRule::Map(read_map(p)?, [a, b, c]),
        (None, None) => ModelRule::Split([a, b, c]),
    })
}

/// What the import flags mean.
pub(super) fn import_options(
    cluster: &ClusterFlags,
    states: &str,
    from: Option<&str>,
    to: Option<&str>,
    load_scale: f64,
    wide: WideJobs,
    models: ModelRule,
) -> Result<ImportOptions, InputError> {
    let cluster = cluster_from_flags(cluster)?;
    let states = if states.trim() == "all" {
        <JobOutcome as clap::ValueEnum>::value_variants().to_vec()
    } else {
        states
            .split(',')
            .map(|w| {
                <JobOutcome as clap::ValueEnum>::from_str(w.trim(), true).map_err(|_| {
                    InputError::new(
                        "--states",
                        format!("`{w}` is not a state (completed, failed, cancelled, timeout, running, other, or all)"),
                    )
                })
            })
            .collect::<Result<_, _>>()?
    };
    let instant = |flag: &str, v: Option<&str>| -> Result<Option<f64>, InputError> {
        let Some(v) = v else { return Ok(None) };
        // A date alone is its midnight.
        let full = if v.trim().len() == 10 {
            format!("{} 00:00:00", v.trim())
        } else {
            v.to_string()
        };
        match parse_time(&full) {
            Some(Some(t)) => Ok(Some(t)),
            _ => Err(InputError::new(
                flag,
                format!("`{v}` is not a time (2017-10-01, 2017-10-01 08:00:00, or Unix seconds)"),
            )),
        }
    };
    Ok(ImportOptions {
        states,
        from_s: instant("--from", from)?,
        to_s: instant("--to", to)?,
        load_scale,
        wide,
        widest_server_gpus: cluster.servers.iter().map(|s| s.gpus).max().unwrap_or(0),
        cluster_gpus: cluster.total_gpus(),
        models,
    })
}
