//! The batch scripts and `sbatch` arguments of a job request: one task, or a task on each node of a job
//! spread over several, each started with its environment and the resources Slurm is asked for.

use super::{JobRequest, SlurmError};

/// The `sbatch` options for a job of `tasks`, one per node (the script itself goes to its standard
/// input): the name, files and comment of the first, and each node's resources (see
/// [`Slurm::submit_tasks`]).
pub(super) fn sbatch_args(tasks: &[JobRequest]) -> Vec<String> {
    let Some(req) = tasks.first() else {
        return Vec::new();
    };
    let mut args = vec![
        "--parsable".to_string(),
        format!("--job-name={}", req.name),
        format!("--chdir={}", req.workdir.display()),
        format!("--output={}", escape_filename_pattern(&req.stdout)),
        format!("--error={}", escape_filename_pattern(&req.stderr)),
        // The executor decides when a job runs again (with a new allocation); Slurm must not requeue it.
        "--no-requeue".to_string(),
    ];
    if req.append_output {
        args.push("--open-mode=append".to_string());
    }
    if let Some(c) = &req.comment {
        args.push(format!("--comment={c}"));
    }
    let same = |t: &JobRequest| (t.cpus, t.memory, t.gpus) == (req.cpus, req.memory, req.gpus);
    if tasks.iter().all(same) {
        let nodes: Vec<&str> = tasks.iter().filter_map(|t| t.node.as_deref()).collect();
        if tasks.len() == 1 {
            args.extend(["--nodes=1".to_string(), "--ntasks=1".to_string()]);
        } else {
            args.extend([
                format!("--nodes={}", tasks.len()),
                "--ntasks-per-node=1".to_string(),
            ]);
        }
        args.extend(resource_args(
            req,
            &nodes.join(","),
            tasks.len() == nodes.len(),
        ));
    } else {
        // A heterogeneous job: one component per node, separated by `:`.
        for (k, t) in tasks.iter().enumerate() {
            if k > 0 {
                args.push(":".to_string());
            }
            args.extend(["--nodes=1".to_string(), "--ntasks=1".to_string()]);
            args.extend(resource_args(
                t,
                t.node.as_deref().unwrap_or(""),
                t.node.is_some(),
            ));
        }
    }
    args
}

/// One node's resources: `--cpus-per-task`, `--mem`, `--gres`, `--nodelist` (when `with_nodes`) and
/// `--partition`.
pub(super) fn resource_args(req: &JobRequest, nodes: &str, with_nodes: bool) -> Vec<String> {
    let mut args = vec![
        format!("--cpus-per-task={}", req.cpus),
        format!("--mem={}M", req.memory.0.div_ceil(1 << 20)),
    ];
    if req.gpus > 0 {
        args.push(format!("--gres=gpu:{}", req.gpus));
    }
    if with_nodes && !nodes.is_empty() {
        args.push(format!("--nodelist={nodes}"));
    }
    if let Some(p) = &req.partition {
        args.push(format!("--partition={p}"));
    }
    args
}

/// sbatch expands `%j`, `%N`, ... in file names; a literal `%` is written `%%`.
pub(super) fn escape_filename_pattern(p: &std::path::Path) -> String {
    p.display().to_string().replace('%', "%%")
}

/// The batch script: exports the request's variables and `exec`s its command, every word quoted.
pub(super) fn batch_script(req: &JobRequest) -> Result<String, SlurmError> {
    let mut s = String::from("#!/bin/sh\n# Submitted by synergy.\n");
    s.push_str(&task_lines(req)?);
    Ok(s)
}

/// The batch script of a job spread over the nodes of `tasks`: one `srun` that starts a task on every
/// node (every component of a heterogeneous job), where each task runs its node's exports and command.
pub(super) fn spread_script(tasks: &[JobRequest]) -> Result<String, SlurmError> {
    let first = &tasks[0];
    let invalid = |message: String| SlurmError::InvalidRequest {
        name: first.name.clone(),
        message,
    };
    let mut dispatch = String::from("case \"$SLURMD_NODENAME\" in\n");
    let mut seen = Vec::new();
    for t in tasks {
        let node = t.node.as_deref().ok_or_else(|| {
            invalid("every task of a job over several nodes names its node".into())
        })?;
        if seen.contains(&node) {
            return Err(invalid(format!("two tasks on node `{node}`")));
        }
        seen.push(node);
        dispatch.push_str(&format!("{})\n{};;\n", shell_quote(node), task_lines(t)?));
    }
    dispatch
        .push_str("*) echo \"synergy: no task for node $SLURMD_NODENAME\" >&2; exit 1;;\nesac\n");
    let same =
        |t: &JobRequest| (t.cpus, t.memory, t.gpus) == (first.cpus, first.memory, first.gpus);
    let groups = if tasks.iter().all(same) {
        String::new()
    } else {
        let all: Vec<String> = (0..tasks.len()).map(|k| k.to_string()).collect();
        format!(" --het-group={}", all.join(","))
    };
    Ok(format!(
        "#!/bin/sh\n# Submitted by synergy: a task on each of {} nodes.\nexec srun{groups} --kill-on-bad-exit=1 /bin/sh -c {}\n",
        tasks.len(),
        shell_quote(&dispatch)
    ))
}

/// What runs one task: its checks, its variables exported and its command `exec`ed, every word quoted.
pub(super) fn task_lines(req: &JobRequest) -> Result<String, SlurmError> {
    let invalid = |message: String| SlurmError::InvalidRequest {
        name: req.name.clone(),
        message,
    };
    if req.command.is_empty() {
        return Err(invalid("the command is empty".into()));
    }
    if req.cpus == 0 {
        return Err(invalid("a job needs at least one CPU".into()));
    }
    if req.memory.0 == 0 {
        return Err(invalid(
            "a job needs some memory (--mem=0 would mean all of the node's)".into(),
        ));
    }
    if req.name.is_empty() || req.name.contains(['\n', '|']) {
        return Err(invalid(
            "the name must be non-empty, on one line and without `|`".into(),
        ));
    }
    if req.comment.as_deref().is_some_and(|c| c.contains('\n')) {
        return Err(invalid("the comment must be on one line".into()));
    }
    let mut s = String::new();
    for (k, v) in &req.env {
        let ok = !k.is_empty()
            && !k.starts_with(|c: char| c.is_ascii_digit())
            && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ok {
            return Err(invalid(format!(
                "`{k}` is not a valid environment variable name"
            )));
        }
        s.push_str(&format!("export {k}={}\n", shell_quote(v)));
    }
    s.push_str("exec");
    for word in &req.command {
        s.push(' ');
        s.push_str(&shell_quote(word));
    }
    s.push('\n');
    Ok(s)
}

/// Quotes `s` as one POSIX shell word.
pub(super) fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}
