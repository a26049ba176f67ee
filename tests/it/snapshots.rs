//! What users see, held: the text and JSON each deterministic command prints (stdout, stderr and exit
//! code), and the files it writes, as reviewed snapshot files under `tests/it/snapshots/`. A change of
//! output shows as a diff to accept (`cargo insta review`, or `INSTA_UPDATE=always` and a look at `git
//! diff`); under CI a missing or different snapshot fails. Times, this run's directory and Unix times
//! are masked, as they differ between runs.

use super::common::{shared, synergy};
use std::path::Path;

/// `synergy ARGS` run in `dir`, as one text: the exit code, then stdout, then stderr.
fn shown(dir: &Path, args: &[&str]) -> String {
    // Help is wrapped at the terminal's width: the same everywhere without one.
    let out = synergy()
        .args(args)
        .current_dir(dir)
        .env("COLUMNS", "100")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    format!(
        "exit {}\n--- stdout\n{}--- stderr\n{}",
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A directory holding what the commands read: the shipped profiles, examples, workload specs and test
/// data, as a user's checkout has them.
fn workdir() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for sub in ["profiles", "examples", "workloads", "tests/data"] {
        copy_dir(&root.join(sub), &d.path().join(sub));
    }
    d
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let q = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_dir(&p, &q);
        } else {
            std::fs::copy(&p, &q).unwrap();
        }
    }
}

/// Every command whose output is a function of its input, by the name of its snapshot (arguments split
/// at spaces).
const COMMANDS: &[(&str, &str)] = &[
    ("help", "--help"),
    ("profile_help", "profile --help"),
    ("profile_replay_help", "profile replay --help"),
    ("profile_refine_help", "profile refine --help"),
    ("simulate_help", "simulate --help"),
    ("run_help", "run --help"),
    ("trace_import_help", "trace import --help"),
    ("slurm_advisor_help", "slurm advisor --help"),
    ("predict", "predict profiles/image.json --cpus 1 --mem 0.3"),
    ("predict_json", "predict profiles/image.json --cpus 1 --mem 0.3 --json"),
    ("predict_missing", "predict profiles/nope.json --cpus 1 --mem 1"),
    ("simulate", "simulate --load 4 --seed 1"),
    ("simulate_json", "simulate --load 4 --seed 1 --json"),
    ("simulate_sweep_json", "simulate --load 3 --seed 2 --policy fifo,las --mechanism proportional,tune --json"),
    ("simulate_trace", "simulate --trace tests/data/formats/trace/artifact-8jobs.csv --profiles profiles/zoo"),
    ("run_dry", "run examples/jobs-mixed.toml --dry-run --gpus 2"),
    ("run_dry_json", "run examples/jobs-mixed.toml --dry-run --gpus 2 --json"),
    ("refine_refused", "profile refine profiles/image.json --from tests/data/formats/observation --out refined.json"),
    ("refine_disturbed_json", "profile refine profiles/audio.json --from tests/data/formats/observation --include-disturbed --out refined.json --json"),
    ("trace_import_helios", "trace import --format helios tests/data/traces/helios.csv"),
    ("trace_import_sacct", "trace import --format sacct tests/data/traces/jobs.sacct"),
    ("trace_cluster_pai", "trace cluster --format pai tests/data/traces/pai_machine_spec.csv"),
    ("advisor", "slurm advisor profiles/zoo profiles/image.json --sinfo tests/data/traces/partitions.sinfo --out advisor"),
    ("advisor_check", "slurm advisor --check advisor/synergy-advisor.tsv --sinfo tests/data/traces/partitions.sinfo"),
    ("plot_json", "plot profiles/image.json --kind heatmap -o heat.svg --json"),
    ("measure_unknown", "measure nope --cpus 1"),
    ("recommend_help", "recommend --help"),
    ("recommend", "recommend profiles/image.json"),
    ("recommend_zoo_dgx", "recommend profiles/zoo/res18.json --server 8gpu,96cpu,1tb --gpus 8"),
    ("recommend_zoo_dgx_sbatch", "recommend profiles/zoo/res18.json --server 8gpu,96cpu,1tb --gpus 8 --format sbatch"),
    ("recommend_zoo_dgx_torchrun", "recommend profiles/zoo/res18.json --server 8gpu,96cpu,1tb --gpus 8 --format torchrun"),
    ("recommend_zoo_dgx_k8s", "recommend profiles/zoo/res18.json --server 8gpu,96cpu,1tb --gpus 8 --format k8s"),
    ("recommend_ddp_json", "recommend profiles/pytorch-ddp-resnet18-small.json --server 8gpu,96cpu,1tb --json"),
    ("recommend_g_not_separated", "recommend tests/data/formats/profile/1.12.json --server 8gpu,96cpu,1tb"),
    ("recommend_two_nodes_sbatch", "recommend profiles/zoo/gnmt.json --server 4gpu,32cpu,256gb --gpus 12 --format sbatch"),
];

#[test]
fn what_each_command_prints() {
    let _host = shared();
    let d = workdir();
    let dir = d.path().display().to_string();
    let masks = Masks::new(&dir);
    insta::with_settings!({prepend_module_to_snapshot => false}, {
        for (name, args) in COMMANDS {
            let args: Vec<&str> = args.split_whitespace().collect();
            insta::assert_snapshot!(*name, masks.apply(&shown(d.path(), &args)));
        }
        insta::assert_snapshot!("advisor_table", masks.apply(&std::fs::read_to_string(d.path().join("advisor/synergy-advisor.tsv")).unwrap()));
        insta::assert_snapshot!("refined_profile", masks.apply(&std::fs::read_to_string(d.path().join("refined.json")).unwrap()));
    });
}

/// What differs from run to run in what a command prints (the work directory, times, rates, Unix
/// times), replaced by a placeholder before the text is compared. Done here rather than with insta's
/// `filters` feature, which would give the test build other features of shared dependencies than the
/// installed binary's, and so a second build of every crate (README, "Development").
struct Masks(Vec<(regex::Regex, &'static str)>);

impl Masks {
    fn new(dir: &str) -> Masks {
        let masks = [
            (regex::escape(dir), "[DIR]"),
            (r"\b\d+(\.\d+)? ?(ms|s)\b".to_string(), "[T]"),
            (r"\d+ job-rounds/s".to_string(), "[R] job-rounds/s"),
            (
                r#""(job_rounds_per_s|elapsed_s|wall_s)": [0-9.e+-]+"#.to_string(),
                r#""$1": [R]"#,
            ),
            (r"\b1[78]\d{8}\b".to_string(), "[UNIX]"),
        ];
        Masks(
            masks
                .into_iter()
                .map(|(pattern, by)| (regex::Regex::new(&pattern).unwrap(), by))
                .collect(),
        )
    }

    fn apply(&self, text: &str) -> String {
        self.0.iter().fold(text.to_string(), |t, (re, by)| {
            re.replace_all(&t, *by).into_owned()
        })
    }
}

/// What `simulate --out` writes, held byte for byte: the per-job and per-round tables (CSV) and the
/// summary (its wall-clock fields masked) of a multi-GPU sweep on a cluster of three server shapes under
/// this project's rules, and of one under the reference's, so that a change to the round loop, placement
/// or the outputs that moves any job, round or digit shows as a diff (docs/architecture.md §5.1).
#[test]
fn simulation_outputs_are_held_byte_for_byte() {
    let _host = shared();
    let d = workdir();
    let cluster = d.path().join("mixed.toml");
    std::fs::write(
        &cluster,
        "[[servers]]\ncount = 2\ngpus = 4\ncpus = 16\nmemory_gb = 200\n\
         [[servers]]\ncount = 2\ngpus = 8\ncpus = 24\nmemory_gb = 500\n\
         [[servers]]\ngpus = 16\ncpus = 64\nmemory_gb = 1000\n",
    )
    .unwrap();
    let cluster = cluster.display().to_string();
    let runs: [(&str, Vec<&str>); 2] = [
        (
            "sim_out_mixed",
            vec![
                "--cluster",
                &cluster,
                "--multi-gpu",
                "--load",
                "6",
                "--jobs",
                "60",
                "--seed",
                "3",
                "--round",
                "1800",
                "--policy",
                "ftf",
                "--mechanism",
                "greedy,tune",
            ],
        ),
        (
            "sim_out_reference",
            vec![
                "--servers",
                "4",
                "--multi-gpu",
                "--semantics",
                "reference",
                "--load",
                "3",
                "--jobs",
                "60",
                "--seed",
                "5",
                "--round",
                "1800",
                "--policy",
                "srtf",
                "--mechanism",
                "tune",
            ],
        ),
    ];
    let wall = regex::Regex::new(r#""(wall_s|job_rounds_per_s)": [0-9.e+-]+"#).unwrap();
    for (name, args) in runs {
        let out = d.path().join(name);
        let status = synergy()
            .arg("simulate")
            .args(&args)
            .arg("--out")
            .arg(&out)
            .current_dir(d.path())
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "{name}: {status}");
        let mut files = Vec::new();
        collect_files(&out, &mut files);
        files.sort();
        let mut shown = String::new();
        for f in files {
            let rel = f.strip_prefix(&out).unwrap().display().to_string();
            if rel.ends_with(".parquet") {
                // Binary: held by its length and a 64-bit FNV-1a digest of its bytes.
                let bytes = std::fs::read(&f).unwrap();
                let digest = bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                    (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
                });
                shown.push_str(&format!(
                    "=== {rel}\n{} bytes, FNV-1a {digest:016x}\n",
                    bytes.len()
                ));
                continue;
            }
            let text = std::fs::read_to_string(&f).unwrap();
            let text = wall.replace_all(&text, r#""$1": [R]"#);
            shown.push_str(&format!("=== {rel}\n{text}"));
        }
        insta::with_settings!({prepend_module_to_snapshot => false}, {
            insta::assert_snapshot!(name, shown);
        });
    }
}

fn collect_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            collect_files(&p, out);
        } else {
            out.push(p);
        }
    }
}
