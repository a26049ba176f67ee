//! The client's scripts, arguments and parsers, without a cluster (tests/it/slurm_client.rs runs it
//! against real daemons).

use super::parse::*;
use super::script::*;
use super::*;

const NODE: &str = "NodeName=vm Arch=x86_64 CoresPerSocket=2  CPUAlloc=1 CPUEfctv=2 CPUTot=2 CPULoad=0.72 AvailableFeatures=(null) ActiveFeatures=(null) Gres=gpu:2 NodeAddr=127.0.0.1 NodeHostName=vm Version=22.05.8 OS=Linux 6.18.44-fc-v657 #1 SMP PREEMPT_DYNAMIC @0  RealMemory=21695 AllocMem=300 FreeMem=16204 Sockets=1 Boards=1 State=MIXED+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 CfgTRES=cpu=2,mem=21695M,billing=2 AllocTRES= CapWatts=n/a";

const JOB: &str = "JobId=2 JobName=synergy-a UserId=root(0) GroupId=root(0) JobState=RUNNING Reason=None Dependency=(null) Requeue=0 ExitCode=0:15 NodeList=vm BatchHost=vm NumNodes=1 NumCPUs=1 NumTasks=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=1,mem=300M,node=1,billing=1 Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=* JOB_GRES=gpu:1   Nodes=vm CPU_IDs=0-1 Mem=300 GRES=gpu:1(IDX:1) MinCPUsNode=1 MinMemoryNode=300M Command=/tmp/a b WorkDir=/tmp/w StdErr=/tmp/e StdIn=/dev/null StdOut=/tmp/o Power= TresPerNode=gres:gpu:1";

#[test]
fn a_node_record_gives_cores_memory_gpus_and_state() {
    let n = parse_node(&fields(NODE)).unwrap();
    assert_eq!(n.name, "vm");
    assert_eq!(n.addr, "127.0.0.1");
    assert_eq!((n.cpus, n.cpus_allocated, n.gpus), (2, 1, 2));
    assert_eq!(n.memory, Bytes(21695 << 20));
    assert_eq!(n.memory_allocated, Bytes(300 << 20));
    assert_eq!(n.state, "mixed");
    assert_eq!(n.state_flags, vec!["drain"]);
    assert!(!n.accepts_jobs(), "a draining node takes no new jobs");
}

#[test]
fn cores_reserved_by_cpu_spec_list_are_not_offered_to_jobs() {
    let spec = NODE.replace("CPUEfctv=2", "CPUEfctv=1 CPUSpecList=1");
    assert_eq!(parse_node(&fields(&spec)).unwrap().cpus, 1);
    let old = NODE.replace("CPUEfctv=2 ", "");
    assert_eq!(
        parse_node(&fields(&old)).unwrap().cpus,
        2,
        "CPUTot without CPUEfctv"
    );
}

#[test]
fn a_job_record_gives_state_and_resources() {
    let j = parse_job(&fields(JOB)).unwrap();
    assert_eq!(j.id, JobId(2));
    assert_eq!(j.state, SlurmJobState::Running);
    assert_eq!((j.exit_code, j.exit_signal), (0, 15));
    assert_eq!(j.node.as_deref(), Some("vm"));
    assert_eq!((j.cpus, j.gpus), (1, 1));
    assert_eq!(j.memory, Some(Bytes(300 << 20)));
    assert_eq!(j.cpu_ids, vec![0, 1]);
    assert_eq!(j.gpu_ids, vec![1]);
    assert_eq!(j.workdir, Some(PathBuf::from("/tmp/w")));
    assert_eq!(j.stdout, Some(PathBuf::from("/tmp/o")));
}

#[test]
fn gres_counts_and_memory_units() {
    assert_eq!(gpu_ids_in_gres("gpu:a100:3(IDX:0,2-3)"), vec![0, 2, 3]);
    assert_eq!(parse_memory("300M"), Some(Bytes(300 << 20)));
    assert_eq!(parse_memory("1.5G"), Some(Bytes(3 << 29)));
    assert_eq!(parse_memory("512"), Some(Bytes(512 << 20)));
    assert_eq!(parse_memory("lots"), None);
}

#[test]
fn the_batch_script_quotes_every_word_and_refuses_bad_names() {
    let mut req = JobRequest {
        name: "synergy-j1".into(),
        command: vec!["/bin/echo".into(), "it's $HOME".into()],
        env: vec![("SYNERGY_STATE_FILE".into(), "/tmp/a b".into())],
        workdir: "/tmp".into(),
        stdout: "/tmp/100%.out".into(),
        stderr: "/tmp/e".into(),
        append_output: true,
        node: Some("vm".into()),
        cpus: 2,
        memory: Bytes(300 << 20),
        gpus: 1,
        partition: None,
        comment: Some("synergy:image synergy-run:7".into()),
    };
    let s = batch_script(&req).unwrap();
    assert!(s.contains("export SYNERGY_STATE_FILE='/tmp/a b'\n"), "{s}");
    assert!(s.ends_with("exec '/bin/echo' 'it'\\''s $HOME'\n"), "{s}");
    let args = sbatch_args(std::slice::from_ref(&req));
    for a in [
        "--cpus-per-task=2",
        "--mem=300M",
        "--gres=gpu:1",
        "--nodelist=vm",
        "--output=/tmp/100%%.out",
        "--open-mode=append",
        "--no-requeue",
        "--comment=synergy:image synergy-run:7",
    ] {
        assert!(args.iter().any(|x| x == a), "{a} not in {args:?}");
    }
    let mut bad = req.clone();
    bad.comment = Some("two\nlines".into());
    assert!(matches!(
        batch_script(&bad),
        Err(SlurmError::InvalidRequest { .. })
    ));
    req.env.push(("BAD NAME".into(), "x".into()));
    assert!(matches!(
        batch_script(&req),
        Err(SlurmError::InvalidRequest { .. })
    ));
}

#[test]
fn tool_failures_become_actionable_errors() {
    let e = classify_failure(
        "sinfo".into(),
        "exit status: 1".into(),
        "sinfo: error: Unable to contact slurm controller (connect failure)".into(),
    );
    assert!(matches!(e, SlurmError::Unreachable { .. }));
    assert!(e.to_string().contains("scripts/slurm-setup.sh"), "{e}");
    let e = classify_failure(
        "sbatch".into(),
        "exit status: 1".into(),
        "sbatch: error: Munge encode failed: Failed to access \"/run/munge/munge.socket.2\"".into(),
    );
    assert!(matches!(e, SlurmError::Auth { .. }));
}

#[test]
fn a_job_over_several_nodes_is_one_job_or_a_heterogeneous_one() {
    let task = |node: &str, cpus: u32, mib: u64, gpus: u32| JobRequest {
        name: "synergy-run-1-wide".into(),
        command: vec!["/bin/work".into(), node.into()],
        env: vec![("SYNERGY_STATE_FILE".into(), format!("/s/{node}"))],
        workdir: "/tmp".into(),
        stdout: "/tmp/o".into(),
        stderr: "/tmp/e".into(),
        append_output: false,
        node: Some(node.into()),
        cpus,
        memory: Bytes(mib << 20),
        gpus,
        partition: Some("main".into()),
        comment: Some("synergy:image synergy-run:1-2".into()),
    };
    // Equal shares: `--nodes=2 --ntasks-per-node=1` with the per-node resources, both nodes listed.
    let equal = [task("n1", 1, 256, 1), task("n2", 1, 256, 1)];
    let args = sbatch_args(&equal);
    for a in [
        "--nodes=2",
        "--ntasks-per-node=1",
        "--cpus-per-task=1",
        "--mem=256M",
        "--gres=gpu:1",
        "--nodelist=n1,n2",
        "--job-name=synergy-run-1-wide",
    ] {
        assert_eq!(
            args.iter().filter(|x| *x == a).count(),
            1,
            "{a} in {args:?}"
        );
    }
    assert!(!args.iter().any(|x| x == ":"), "{args:?}");
    let script = spread_script(&equal).unwrap();
    assert!(
        script.contains("exec srun --kill-on-bad-exit=1 /bin/sh -c "),
        "{script}"
    );
    // Unequal shares: one component per node, in order, each with its own resources.
    let unequal = [task("n1", 1, 512, 2), task("n2", 2, 256, 1)];
    let args = sbatch_args(&unequal);
    let colon = args.iter().position(|x| x == ":").expect("two components");
    let (first, second) = (&args[..colon], &args[colon + 1..]);
    for (part, want) in [
        (
            first,
            [
                "--nodelist=n1",
                "--cpus-per-task=1",
                "--mem=512M",
                "--gres=gpu:2",
            ],
        ),
        (
            second,
            [
                "--nodelist=n2",
                "--cpus-per-task=2",
                "--mem=256M",
                "--gres=gpu:1",
            ],
        ),
    ] {
        for a in want {
            assert!(part.iter().any(|x| x == a), "{a} in {part:?}");
        }
        assert!(part.iter().any(|x| x == "--partition=main"), "{part:?}");
    }
    assert!(first.iter().any(|x| x == "--job-name=synergy-run-1-wide"));
    let script = spread_script(&unequal).unwrap();
    assert!(
        script.contains("exec srun --het-group=0,1 --kill-on-bad-exit=1"),
        "{script}"
    );
    // Each node runs its own exports and command, found by the node's name: the script run with
    // an `srun` that only runs its command, as on each node.
    let dir = tempfile::tempdir().unwrap();
    let srun = dir.path().join("srun");
    std::fs::write(
        &srun,
        "#!/bin/sh\nwhile [ \"${1#--}\" != \"$1\" ]; do shift; done\nexec \"$@\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&srun, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut tasks = unequal.clone();
    for t in tasks.iter_mut() {
        t.command = vec![
            "/bin/sh".into(),
            "-c".into(),
            "echo \"$0 it's $SYNERGY_STATE_FILE\"".into(),
            t.node.clone().unwrap(),
        ];
    }
    let script = spread_script(&tasks).unwrap();
    let path = format!(
        "{}:{}",
        dir.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for node in ["n1", "n2", "n3"] {
        let out = std::process::Command::new("/bin/sh")
            .args(["-c", &script])
            .env("PATH", &path)
            .env("SLURMD_NODENAME", node)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        if node == "n3" {
            assert!(!out.status.success(), "no task for {node}: {said}");
        } else {
            assert_eq!(said, format!("{node} it's /s/{node}\n"), "{script}");
        }
    }
    // Two tasks on one node, or a task without a node, are refused.
    let twice = [task("n1", 1, 256, 1), task("n1", 1, 256, 1)];
    assert!(matches!(
        spread_script(&twice),
        Err(SlurmError::InvalidRequest { .. })
    ));
    let mut nameless = unequal.clone();
    nameless[1].node = None;
    assert!(matches!(
        spread_script(&nameless),
        Err(SlurmError::InvalidRequest { .. })
    ));
}
