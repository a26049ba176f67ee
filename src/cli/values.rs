//! Reading and checking flag values that clap takes as text or cannot bound: lists, axes, positive
//! numbers. Errors name the flag, since these are the command line's own.

use super::args::ClusterFlags;
use crate::error::InputError;
use crate::sched::ClusterConfig;

/// A number that must be positive and finite.
pub(super) fn check_positive(flag: &str, v: f64) -> Result<(), InputError> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(InputError::new(flag, "must be a positive number"))
    }
}

/// A comma-separated list of at least one value; `what` names one in the error (`a policy`).
pub(super) fn parse_list<T: std::str::FromStr>(
    flag: &str,
    s: &str,
    what: &str,
) -> Result<Vec<T>, InputError> {
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

/// A profile axis: `auto` (none: the library chooses) or a comma-separated list of numbers.
pub(super) fn parse_axis(flag: &str, s: &str) -> Result<Option<Vec<f64>>, InputError> {
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

/// The cluster file's servers, or the uniform cluster of the `--server*` flags.
pub(super) fn cluster_from_flags(args: &ClusterFlags) -> Result<ClusterConfig, InputError> {
    if let Some(p) = &args.cluster {
        return ClusterConfig::read(p);
    }
    if args.servers == 0 || args.server_gpus == 0 {
        return Err(InputError::new(
            "--servers/--server-gpus",
            "must be at least 1",
        ));
    }
    // The same bound as a cluster file's (each server is a record of its own).
    let most = crate::sched::cluster::MAX_SERVERS;
    if args.servers as usize > most {
        return Err(InputError::new(
            "--servers",
            format!("must be at most {most}"),
        ));
    }
    if let Some(why) =
        crate::sched::cluster::too_many_gpus(args.servers as u64 * args.server_gpus as u64)
    {
        return Err(InputError::new("--servers/--server-gpus", why));
    }
    check_positive("--server-cpus", args.server_cpus)?;
    check_positive("--server-mem-gb", args.server_mem_gb)?;
    Ok(ClusterConfig::uniform(
        args.servers,
        args.server_gpus,
        args.server_cpus,
        args.server_mem_gb,
    ))
}
