//! The Slurm submit-time advisor (`synergy slurm advisor`, docs/slurm.md "The submit-time advisor")
//! against real slurmctlds with `JobSubmitPlugins=lua`.
//!
//! Most cases run on the controller of `scripts/slurm-advisor-ctld.sh`, started here in a temporary directory
//! on a free port of its own, so replacing its script and table (broken tables, a broken script) disturbs
//! neither local test cluster. Its nodes never start, so jobs stay pending: what the plugin made of each
//! submission is what `scontrol show job` and sbatch's own output say.
//!
//! One test installs the advisor on the single-node cluster of `scripts/slurm-setup.sh`, whose plugin runs a
//! pass-through script, and shows a profiled job running with the advised cores and memory, in Slurm's
//! allocation and in the kernel's cgroups; a guard puts the pass-through back. Needs root and the daemons
//! (`scripts/slurm-setup.sh`); the tests fail and say so otherwise.

use crate::common::{self, job_field as field, job_running as running, serial, shared};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant, SystemTime};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/slurm-advisor-ctld.sh");

/// A controller of its own, stopped when dropped.
struct Ctld {
    dir: tempfile::TempDir,
}

impl Ctld {
    fn start() -> Ctld {
        let dir = tempfile::tempdir().unwrap();
        // A port nothing listens on (not the script's default), so a controller left by a killed run, or
        // the benchmark's, cannot answer in this one's place.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let out = Command::new(SCRIPT)
            .args(["start", dir.path().to_str().unwrap(), &port.to_string()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "the advisor's test controller did not start (it needs root and munged: run scripts/slurm-setup.sh): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Ctld { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn conf(&self) -> PathBuf {
        self.path("slurm.conf")
    }

    fn tool(&self, cmd: &str, args: &[&str]) -> Output {
        Command::new(cmd)
            .args(args)
            .env("SLURM_CONF", self.conf())
            .output()
            .unwrap_or_else(|e| panic!("{cmd}: {e}"))
    }

    fn synergy(&self, args: &[&str]) -> Output {
        common::synergy()
            .args(args)
            .env("SLURM_CONF", self.conf())
            .output()
            .unwrap()
    }

    /// Submits a job that would run `true`; returns its `scontrol show job` line and what sbatch printed
    /// on stderr (the plugin's `slurm.log_user` messages).
    fn submit(&self, args: &[&str]) -> (String, String) {
        let mut all = vec!["--parsable", "--output=/dev/null", "--chdir=/"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--wrap", "true"]);
        let out = self.tool("sbatch", &all);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "sbatch {args:?}: {stderr}");
        let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let show = self.tool("scontrol", &["show", "job", "-o", &id]);
        (String::from_utf8_lossy(&show.stdout).into_owned(), stderr)
    }

    fn ping(&self) -> bool {
        String::from_utf8_lossy(&self.tool("scontrol", &["ping"]).stdout).contains("is UP")
    }

    /// Replaces a file of the controller's directory whole (as the advisor writes it).
    fn put(&self, name: &str, text: &str) {
        let before = mtime(&self.path("job_submit.lua"));
        synergy::fsutil::write_atomic(&self.path(name), text.as_bytes()).unwrap();
        if name == "job_submit.lua" {
            bump(&self.path(name), before);
        }
    }
}

impl Drop for Ctld {
    fn drop(&mut self) {
        let _ = Command::new(SCRIPT)
            .args(["stop", self.dir.path().to_str().unwrap()])
            .output();
    }
}

/// The plugin reloads its script when the file's modification time (whole seconds) is newer than that of
/// the script it loaded: a script written in the same second as the one before would be missed, so tests
/// date each script a second past the later of now and the one it replaces.
fn bump(p: &Path, before: SystemTime) {
    let f = std::fs::File::options().write(true).open(p).unwrap();
    let at = before.max(SystemTime::now()) + Duration::from_secs(1);
    f.set_modified(at).unwrap();
}

fn mtime(p: &Path) -> SystemTime {
    std::fs::metadata(p).unwrap().modified().unwrap()
}

/// Cores, cores per task and memory per node of a job.
fn sized(job: &str) -> (&str, &str, &str) {
    (
        field(job, "NumCPUs"),
        field(job, "CPUs/Task"),
        field(job, "MinMemoryNode"),
    )
}

fn repo(p: &str) -> String {
    format!("{}/{p}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_advisor_sizes_profiled_jobs_and_fails_open() {
    let _host = shared();
    let c = Ctld::start();
    let dir = c.dir.path().to_str().unwrap().to_string();
    let before = mtime(&c.path("job_submit.lua"));
    let out = c.synergy(&[
        "slurm",
        "advisor",
        &repo("profiles/zoo/res18.json"),
        &repo("profiles/image.json"),
        "--job-name",
        "train-r18-=res18",
        "--allow-below-share",
        "image",
        "--out",
        &dir,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    bump(&c.path("job_submit.lua"), before);
    let table = c.path("synergy-advisor.tsv");
    let table_arg = table.to_str().unwrap();
    let check = c.synergy(&["slurm", "advisor", "--check", table_arg, "--json"]);
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&check.stdout).unwrap();
    assert_eq!(v["ok"], true, "{v}");

    // res18 asks 9 cores and 58.2 GiB per GPU; a GPU of partition `gpu` (24 cores, 500000 MB, 8 GPUs)
    // comes with 3 cores and 62500 MB: the cores are its demand, the memory the share.
    let (job, said) = c.submit(&["--gres=gpu:1", "--comment=synergy:res18"]);
    assert_eq!(sized(&job), ("9", "9", "62500M"), "{job}");
    assert!(job.contains("AdminComment=synergy-advisor: profile `res18`, 1 GPU(s) on `gpu`: 9 cores (was default; demand), 62500 MB (was default; share)"), "{job}");
    assert!(
        said.contains("synergy: profile `res18`, 1 GPU(s) on `gpu`: 9 cores"),
        "{said}"
    );
    // On `small` (2 cores, 21695 MB, 2 GPUs) both are capped at the node.
    let (job, _) = c.submit(&[
        "-p",
        "small",
        "--gres=gpu:1",
        "--comment=synergy:res18",
        "-c",
        "1",
        "--mem=100",
    ]);
    assert_eq!(sized(&job), ("2", "2", "21695M"), "{job}");
    assert!(
        job.contains("2 cores (was 1; node), 21695 MB (was 100 MB; node)"),
        "{job}"
    );
    // A job name in the table names the profile; two GPUs, twice the demand and the share.
    let (job, _) = c.submit(&["-J", "train-r18-7", "--gres=gpu:2"]);
    assert_eq!(sized(&job), ("18", "18", "125000M"), "{job}");
    // image may go below the share: its demand, in whole cores and MB rounded up (the shipped profile:
    // 1.25 cores -> 2, 0.3255 GiB -> 334 MB; --gpus=1 counts as one GPU).
    let image = common::read_json(repo("profiles/image.json"));
    let demand = &image["demand"]["per_gpu"];
    let cores = demand["cpus"].as_f64().unwrap().ceil().to_string();
    let mem = format!(
        "{}M",
        (demand["memory_gib"].as_f64().unwrap() * 1024.0).ceil()
    );
    let (job, _) = c.submit(&["--gpus=1", "--comment=synergy:image"]);
    assert_eq!(
        sized(&job),
        (cores.as_str(), cores.as_str(), mem.as_str()),
        "{job}"
    );

    // No profile, and a job of synergy run (already sized by its scheduler): kept, with the reason.
    let (job, said) = c.submit(&["--gres=gpu:1", "-c", "1"]);
    assert_eq!(field(&job, "NumCPUs"), "1", "{job}");
    assert!(
        job.contains("AdminComment=synergy-advisor: no profile named"),
        "{job}"
    );
    assert!(!said.contains("synergy:"), "{said}");
    let (job, _) = c.submit(&[
        "--gres=gpu:1",
        "-c",
        "1",
        "--comment=synergy:res18 synergy-run:42-1796000000",
    ]);
    assert_eq!(field(&job, "NumCPUs"), "1", "{job}");
    assert!(
        job.contains("submitted by synergy run, which sized it already: kept as asked"),
        "{job}"
    );
    // `synergy:` inside another word names nothing.
    let (job, _) = c.submit(&["--gres=gpu:1", "-c", "1", "--comment=nosynergy:res18"]);
    assert_eq!(field(&job, "NumCPUs"), "1", "{job}");
    // A profile the table does not have.
    let (job, said) = c.submit(&["--gres=gpu:1", "--comment=synergy:gnmt"]);
    assert_eq!(field(&job, "NumCPUs"), "1", "{job}");
    assert!(said.contains("profile `gnmt` is not in"), "{said}");

    // A corrupt entry: that profile's jobs keep their request, and why; the others are still sized.
    let good = std::fs::read_to_string(&table).unwrap();
    let corrupt = good.replacen("size\tres18\tgpu\t1\t9\t", "size\tres18\tgpu\t1\tnine\t", 1);
    assert_ne!(corrupt, good);
    let line = corrupt
        .lines()
        .position(|l| l.contains("\tnine\t"))
        .unwrap()
        + 1;
    c.put("synergy-advisor.tsv", &corrupt);
    let (job, said) = c.submit(&["--gres=gpu:1", "--comment=synergy:res18", "-c", "1"]);
    assert_eq!(sized(&job).0, "1", "{job}");
    let why = format!("line {line}: field `cpus` is `nine`");
    assert!(
        job.contains("the table's entry for `res18` is corrupt") && job.contains(&why),
        "{job}"
    );
    assert!(said.contains(&why), "{said}");
    let (job, _) = c.submit(&["--gpus=1", "--comment=synergy:image"]);
    assert_eq!(
        sized(&job),
        (cores.as_str(), cores.as_str(), mem.as_str()),
        "{job}"
    );
    let check = c.synergy(&["slurm", "advisor", "--check", table_arg]);
    let stderr = String::from_utf8_lossy(&check.stderr);
    assert_eq!(check.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("line {line}, field `cpus`: `nine`")),
        "{stderr}"
    );

    // A table of another version, then none at all: every job keeps its request, and the reason.
    c.put(
        "synergy-advisor.tsv",
        &good.replacen("synergy-advisor-table\t1", "synergy-advisor-table\t9", 1),
    );
    let (job, said) = c.submit(&["--gres=gpu:1", "--comment=synergy:res18", "-c", "1"]);
    assert_eq!(sized(&job).0, "1", "{job}");
    assert!(said.contains("has table version `9`"), "{said}");
    c.put("synergy-advisor.tsv", "\u{0}\u{1}garbage\nnot\ta table\n");
    let (job, said) = c.submit(&["--gres=gpu:1", "--comment=synergy:res18", "-c", "1"]);
    assert_eq!(sized(&job).0, "1", "{job}");
    assert!(
        said.contains("is not a synergy advisor table header"),
        "{said}"
    );
    assert!(c.ping(), "slurmctld went down on a broken table");
    std::fs::remove_file(&table).unwrap();
    let (job, _) = c.submit(&["--gres=gpu:1", "--comment=synergy:res18", "-c", "1"]);
    assert_eq!(sized(&job).0, "1", "{job}");
    assert!(
        job.contains("AdminComment=synergy-advisor: no table ("),
        "{job}"
    );

    // A script that does not parse: slurmctld stays up, keeps the script it had, and takes jobs.
    c.put("synergy-advisor.tsv", &good);
    c.put("job_submit.lua", "function slurm_job_submit(  -- cut off\n");
    let (job, _) = c.submit(&["--gres=gpu:1", "--comment=synergy:res18"]);
    assert!(c.ping(), "slurmctld went down on a broken script");
    assert_eq!(sized(&job), ("9", "9", "62500M"), "{job}");
    let log = std::fs::read_to_string(c.path("slurmctld.log")).unwrap();
    assert!(log.contains("using previous script"), "{log}");
    // The advisor's script back: jobs are sized again.
    c.put("job_submit.lua", synergy::advisor::SCRIPT);
    let (job, _) = c.submit(&["--gres=gpu:2", "--comment=synergy:res18"]);
    assert_eq!(sized(&job), ("18", "18", "125000M"), "{job}");
}

#[test]
fn the_check_refuses_a_table_that_does_not_fit_the_cluster() {
    let _host = shared();
    let dir = tempfile::tempdir().unwrap();
    let nodes = dir.path().join("nodes.txt");
    std::fs::write(&nodes, "n1 24 500000 gpu:8 gpu*\nn2 24 500000 gpu:8 gpu*\n").unwrap();
    let out_dir = dir.path().join("adv");
    let args = |extra: &[&str]| {
        let mut a: Vec<String> = vec!["slurm".into(), "advisor".into()];
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let v = common::run_json(&[
        "slurm",
        "advisor",
        &repo("profiles/zoo"),
        "--sinfo",
        nodes.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(v["table"]["sizes"].as_array().unwrap().len(), 10 * 8);
    let table = out_dir.join("synergy-advisor.tsv");
    let script = std::fs::read_to_string(out_dir.join("job_submit.lua")).unwrap();
    assert!(script.contains("function slurm_job_submit"));
    let check = |sinfo: &str| {
        std::fs::write(&nodes, sinfo).unwrap();
        common::synergy()
            .args(args(&[
                "--check",
                table.to_str().unwrap(),
                "--sinfo",
                nodes.to_str().unwrap(),
            ]))
            .output()
            .unwrap()
    };
    assert!(check("n1 24 500000 gpu:8 gpu*\nn2 24 500000 gpu:8 gpu*\n")
        .status
        .success());
    // The nodes lost half their memory: every size above it, and the partition's shape, are named.
    let out = check("n1 24 250000 gpu:8 gpu*\nn2 24 250000 gpu:8 gpu*\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("field `shape`") && stderr.contains("field `memory_mb`"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}

/// The single-node cluster of `scripts/slurm-setup.sh` (default `SLURM_CONF`): its slurmctld runs
/// `JobSubmitPlugins=lua` with the pass-through script beside its slurm.conf.
const LOCAL_CONF_DIR: &str = "/etc/slurm";
const PASSTHROUGH: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/scripts/job_submit-passthrough.lua"
);

/// The advisor installed on the local cluster, taken out when dropped (a failing test's too): its jobs
/// cancelled, the pass-through script back (dated past the advisor's, so slurmctld reloads it) and the
/// table removed.
struct Installed {
    jobs: Vec<String>,
}

impl Installed {
    /// Installs `from`'s table, then its script (the script reads the table on every submission).
    fn install(from: &Path) -> Installed {
        let dir = Path::new(LOCAL_CONF_DIR);
        let passthrough = std::fs::read_to_string(PASSTHROUGH).unwrap();
        let conf = std::fs::read_to_string(dir.join("slurm.conf")).unwrap_or_default();
        let script =
            std::fs::read_to_string(dir.join(synergy::advisor::SCRIPT_FILE)).unwrap_or_default();
        // The advisor's own script is what a run killed before its guard ran leaves behind; any other is an
        // administrator's, and is not this test's to replace.
        assert!(
            conf.lines().any(|l| l.trim() == "JobSubmitPlugins=lua")
                && (script == passthrough || script == synergy::advisor::SCRIPT),
            "the local cluster runs no pass-through job_submit.lua in {LOCAL_CONF_DIR}: run scripts/slurm-setup.sh"
        );
        let guard = Installed { jobs: Vec::new() };
        let table = std::fs::read(from.join(synergy::advisor::TABLE_FILE)).unwrap();
        synergy::fsutil::write_atomic(&dir.join(synergy::advisor::TABLE_FILE), &table).unwrap();
        put_script(synergy::advisor::SCRIPT);
        guard
    }

    /// Submits `sleep 30` with `args`: its id and what sbatch printed on stderr.
    fn submit(&mut self, args: &[&str]) -> (String, String) {
        let mut all = vec!["--parsable", "--output=/dev/null", "--chdir=/"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--wrap", "sleep 30"]);
        let out = Command::new("sbatch").args(&all).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "sbatch {args:?}: {stderr}");
        let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
        self.jobs.push(id.clone());
        (id, stderr)
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        if !self.jobs.is_empty() {
            let _ = Command::new("scancel").args(&self.jobs).output();
        }
        if let Ok(passthrough) = std::fs::read_to_string(PASSTHROUGH) {
            put_script(&passthrough);
        }
        let _ = std::fs::remove_file(Path::new(LOCAL_CONF_DIR).join(synergy::advisor::TABLE_FILE));
    }
}

/// Replaces the local cluster's job_submit.lua whole, dated so that slurmctld reloads it (see [`bump`]).
fn put_script(text: &str) {
    let p = Path::new(LOCAL_CONF_DIR).join(synergy::advisor::SCRIPT_FILE);
    let before = std::fs::metadata(&p)
        .and_then(|m| m.modified())
        .unwrap_or(SystemTime::UNIX_EPOCH);
    synergy::fsutil::write_atomic(&p, text.as_bytes()).unwrap();
    bump(&p, before);
}

/// The kernel's cpuset and memory limit of a running job of the local cluster (Slurm's cgroup v1 tree
/// `slurm_<node>`, as in docs/slurm.md). slurmctld says RUNNING before slurmstepd has made the job's
/// cgroups, so this waits until the batch step's process is in both.
fn job_cgroup(show: &str) -> (String, u64) {
    let (node, job) = (field(show, "NodeList"), field(show, "JobId"));
    let path =
        |ctl: &str, file: &str| format!("/sys/fs/cgroup/{ctl}/slurm_{node}/uid_0/job_{job}/{file}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while ["cpuset", "memory"].iter().any(|ctl| {
        std::fs::read_to_string(path(ctl, "step_batch/cgroup.procs"))
            .map_or(true, |procs| procs.trim().is_empty())
    }) {
        assert!(
            Instant::now() < deadline,
            "job {job}'s batch step has no cgroups: {show}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let read = |ctl: &str, file: &str| {
        let p = path(ctl, file);
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
    };
    (
        read("cpuset", "cpuset.cpus").trim().to_string(),
        read("memory", "memory.limit_in_bytes")
            .trim()
            .parse()
            .unwrap(),
    )
}

#[test]
fn a_profiled_job_runs_on_the_local_node_with_the_advised_cores_and_memory() {
    let _host = serial();
    // The advisor's files for the live cluster (sinfo): res18 asks more cores per GPU than this node's
    // share, so the advisor raises it, here to the whole node.
    let out_dir = tempfile::tempdir().unwrap();
    let v = common::run_json(&[
        "slurm",
        "advisor",
        &repo("profiles/zoo/res18.json"),
        "--json",
        "--out",
        out_dir.path().to_str().unwrap(),
    ]);
    let part = &v["table"]["partitions"][0];
    let shape = &part["shapes"][0];
    let share = shape["cpus"].as_u64().unwrap() / shape["gpus"].as_u64().unwrap();
    let size = v["table"]["sizes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["gpus"] == 1 && s["partition"] == part["name"])
        .unwrap_or_else(|| panic!("no 1-GPU size: {v}"));
    let (cpus, mem_mb) = (
        size["cpus"].as_u64().unwrap(),
        size["memory_mb"].as_u64().unwrap(),
    );
    assert!(
        cpus > share && cpus > 1,
        "res18 is not raised above the share here: {v}"
    );

    let mut adv = Installed::install(out_dir.path());
    let (sized_job, said) = adv.submit(&["--gres=gpu:1", "--comment=synergy:res18"]);
    let (plain_job, _) = adv.submit(&["--gres=gpu:1"]);
    assert!(
        said.contains("synergy: profile `res18`, 1 GPU(s)"),
        "{said}"
    );

    // Slurm gave the job the advised cores and memory, and the kernel confines it to exactly them.
    let show = running(&sized_job);
    assert_eq!(field(&show, "NumCPUs"), cpus.to_string(), "{show}");
    assert_eq!(field(&show, "Mem"), mem_mb.to_string(), "{show}");
    let ids = field(&show, "CPU_IDs");
    assert_eq!(ids, format!("0-{}", cpus - 1), "{show}");
    let (cpuset, limit) = job_cgroup(&show);
    assert_eq!((cpuset.as_str(), limit), (ids, mem_mb << 20), "{show}");
    // The job without a comment, submitted beside it, keeps its one core and the default memory; it waits
    // for the node, then runs on one core.
    let plain = Command::new("scontrol")
        .args(["show", "job", "-o", &plain_job])
        .output()
        .unwrap();
    let plain = String::from_utf8_lossy(&plain.stdout);
    assert_eq!(field(&plain, "NumCPUs"), "1", "{plain}");
    assert!(
        plain.contains("AdminComment=synergy-advisor: no profile named"),
        "{plain}"
    );
    let cancel = Command::new("scancel").arg(&sized_job).output().unwrap();
    assert!(cancel.status.success());
    let show = running(&plain_job);
    assert_eq!(field(&show, "NumCPUs"), "1", "{show}");
    let ids = field(&show, "CPU_IDs");
    assert!(ids.parse::<u32>().is_ok(), "{show}");
    let mem: u64 = field(&show, "Mem").parse().unwrap();
    assert_eq!(job_cgroup(&show), (ids.to_string(), mem << 20), "{show}");
}
