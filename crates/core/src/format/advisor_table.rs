//! The advisor's table file (docs/slurm.md, "The submit-time advisor"): tab-separated rows after a
//! version line (`synergy-advisor-table`, [`TABLE_VERSION`]) and a generation time, written by
//! [`Table::to_tsv`], read back by [`Table::parse`] and, independently, by the shipped `job_submit.lua`.
//! The script refuses a table of another version, so any change of rows is a new version.

use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

/// The first field of the table's version line.
pub const TABLE_HEADER: &str = "synergy-advisor-table";

/// The table format this build writes and its script reads.
pub const TABLE_VERSION: u32 = 1;

/// Everything the script needs to size a job, and what the check needs to tell whether it still holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Table {
    /// Format version ([`TABLE_VERSION`]).
    pub version: u32,
    /// When it was made, Unix seconds.
    pub generated_s: u64,
    /// The partition of jobs that name none.
    pub default_partition: Option<String>,
    /// The partitions (with GPUs) and their node shapes it was made for.
    pub partitions: Vec<Partition>,
    /// The profiles' demands.
    pub profiles: Vec<PerGpuDemand>,
    /// Job-name prefixes that name a profile, `(prefix, profile)`.
    pub job_names: Vec<(String, String)>,
    /// What each job is given.
    pub sizes: Vec<Size>,
}

/// Something wrong with a table: where (line, field) and what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// Line number from 1; `None` for the table as a whole.
    pub line: Option<usize>,
    /// The field at fault.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(l) = self.line {
            write!(f, "line {l}, ")?;
        }
        write!(f, "field `{}`: {}", self.field, self.message)
    }
}

impl Table {
    /// The table as the file the script reads.
    pub fn to_tsv(&self) -> String {
        let mut s = String::new();
        let mut row = |cells: &[&str]| {
            s.push_str(&cells.join("\t"));
            s.push('\n');
        };
        row(&["# Synergy's Slurm advisor table, written by `synergy slurm advisor`: data that job_submit.lua reads (docs/slurm.md)."]);
        row(&[TABLE_HEADER, &self.version.to_string()]);
        row(&["generated", &self.generated_s.to_string()]);
        if let Some(p) = &self.default_partition {
            row(&["default_partition", p]);
        }
        row(&["# partition", "NAME", "NODES", "GPUS", "CPUS", "MEMORY_MB"]);
        for p in &self.partitions {
            for s in &p.shapes {
                row(&[
                    "partition",
                    &p.name,
                    &s.nodes.to_string(),
                    &s.gpus.to_string(),
                    &s.cpus.to_string(),
                    &s.memory_mb.to_string(),
                ]);
            }
        }
        row(&[
            "# profile",
            "NAME",
            "CPUS_PER_GPU",
            "MEMORY_GIB_PER_GPU",
            "BELOW_SHARE",
            "MTIME",
            "PATH",
        ]);
        for d in &self.profiles {
            row(&[
                "profile",
                &d.name,
                &d.cpus_per_gpu.to_string(),
                &d.memory_gib_per_gpu.to_string(),
                if d.below_share { "allow" } else { "raise" },
                &d.source_mtime_s.to_string(),
                &d.source.display().to_string(),
            ]);
        }
        row(&["# job_name", "PREFIX", "PROFILE"]);
        for (prefix, profile) in &self.job_names {
            row(&["job_name", prefix, profile]);
        }
        row(&[
            "# size",
            "PROFILE",
            "PARTITION",
            "GPUS",
            "CPUS",
            "MEMORY_MB",
            "CPUS_BY",
            "MEMORY_BY",
        ]);
        for z in &self.sizes {
            row(&[
                "size",
                &z.profile,
                &z.partition,
                &z.gpus.to_string(),
                &z.cpus.to_string(),
                &z.memory_mb.to_string(),
                z.cpus_by.word(),
                z.memory_by.word(),
            ]);
        }
        s
    }

    /// Reads a table, and every problem found on the way (a table with problems is not trusted, but the
    /// rows that did parse are kept so the check can say more about them). Lines of the rows it holds are
    /// returned beside it, for the check's messages.
    pub fn parse(text: &str) -> (Table, Lines, Vec<Problem>) {
        let mut t = Table {
            version: 0,
            generated_s: 0,
            default_partition: None,
            partitions: Vec::new(),
            profiles: Vec::new(),
            job_names: Vec::new(),
            sizes: Vec::new(),
        };
        let mut lines = Lines::default();
        let mut problems = Vec::new();
        let mut header = false;
        let mut generated = false;
        for (i, raw) in text.lines().enumerate() {
            let n = i + 1;
            if raw.is_empty() || raw.starts_with('#') {
                continue;
            }
            let c: Vec<&str> = raw.split('\t').collect();
            if !header {
                if c[0] != TABLE_HEADER {
                    problems.push(problem(n, "version", format!("the first row must be `{TABLE_HEADER}<TAB>{TABLE_VERSION}`; this is not a synergy advisor table")));
                    return (t, lines, problems);
                }
                header = true;
                match c.get(1).and_then(|v| v.parse::<u32>().ok()) {
                    Some(TABLE_VERSION) => t.version = TABLE_VERSION,
                    _ => {
                        problems.push(problem(n, "version", format!("`{}` is not a version this build reads ({TABLE_VERSION}); regenerate the table and its script with this synergy", c.get(1).unwrap_or(&""))));
                        return (t, lines, problems);
                    }
                }
                continue;
            }
            let want = match c[0] {
                "generated" | "default_partition" => 2,
                "partition" => 6,
                "profile" => 7,
                "job_name" => 3,
                "size" => 8,
                other => {
                    problems.push(problem(
                        n,
                        "kind",
                        format!("`{other}` is not a row kind (generated, default_partition, partition, profile, job_name, size)"),
                    ));
                    continue;
                }
            };
            if c.len() != want {
                problems.push(problem(
                    n,
                    c[0],
                    format!(
                        "has {} tab-separated fields; a `{}` row has {want}",
                        c.len(),
                        c[0]
                    ),
                ));
                continue;
            }
            let mut bad = |field: &str, v: &str, what: &str| {
                problems.push(problem(n, field, format!("`{v}` is not {what}")));
            };
            let whole = |v: &str| v.parse::<u64>().ok();
            let name_ok = |v: &str| !v.is_empty() && !v.chars().any(char::is_whitespace);
            match c[0] {
                "generated" => match whole(c[1]) {
                    Some(s) => {
                        t.generated_s = s;
                        generated = true;
                        lines.generated = n;
                    }
                    None => bad("generated", c[1], "a time in Unix seconds"),
                },
                "default_partition" => {
                    if name_ok(c[1]) {
                        t.default_partition = Some(c[1].into());
                    } else {
                        bad("default_partition", c[1], "a partition name");
                    }
                }
                "partition" => {
                    let nums: Vec<Option<u64>> = c[2..6].iter().map(|v| whole(v)).collect();
                    let fields = ["nodes", "gpus", "cpus", "memory_mb"];
                    let most = [U32, U32, U32, u64::MAX];
                    if !name_ok(c[1]) {
                        bad("name", c[1], "a partition name");
                    } else if let Some(k) = out_of_range(&nums, &most) {
                        bad(fields[k], c[2 + k], &in_range(most[k]));
                    } else {
                        let v: Vec<u64> = nums.into_iter().flatten().collect();
                        let shape = NodeShape {
                            nodes: v[0] as u32,
                            gpus: v[1] as u32,
                            cpus: v[2] as u32,
                            memory_mb: v[3],
                        };
                        match t.partitions.iter_mut().find(|p| p.name == c[1]) {
                            Some(p) => p.shapes.push(shape),
                            None => {
                                lines.partitions.insert(c[1].into(), n);
                                t.partitions.push(Partition {
                                    name: c[1].into(),
                                    default: false,
                                    shapes: vec![shape],
                                });
                            }
                        }
                    }
                }
                "profile" => {
                    let num = |v: &str| v.parse::<f64>().ok().filter(|x| x.is_finite() && *x > 0.0);
                    let below = match c[4] {
                        "raise" => Some(false),
                        "allow" => Some(true),
                        _ => None,
                    };
                    if !name_ok(c[1]) {
                        bad("name", c[1], "a profile name");
                    } else if num(c[2]).is_none() {
                        bad("cpus_per_gpu", c[2], "a positive number");
                    } else if num(c[3]).is_none() {
                        bad("memory_gib_per_gpu", c[3], "a positive number");
                    } else if below.is_none() {
                        bad("below_share", c[4], "`raise` or `allow`");
                    } else if whole(c[5]).is_none() {
                        bad("mtime", c[5], "a time in Unix seconds");
                    } else if lines.profiles.contains_key(c[1]) {
                        bad("name", c[1], "a new profile (it has a row already)");
                    } else {
                        lines.profiles.insert(c[1].into(), n);
                        t.profiles.push(PerGpuDemand {
                            name: c[1].into(),
                            cpus_per_gpu: num(c[2]).unwrap_or_default(),
                            memory_gib_per_gpu: num(c[3]).unwrap_or_default(),
                            below_share: below.unwrap_or_default(),
                            source_mtime_s: whole(c[5]).unwrap_or_default(),
                            source: PathBuf::from(c[6]),
                        });
                    }
                }
                "job_name" => {
                    if !name_ok(c[1]) {
                        bad("prefix", c[1], "a job-name prefix");
                    } else if !name_ok(c[2]) {
                        bad("profile", c[2], "a profile name");
                    } else {
                        lines.job_names.push(n);
                        t.job_names.push((c[1].into(), c[2].into()));
                    }
                }
                _ => {
                    let bound = |v: &str| match v {
                        "demand" => Some(Bound::Demand),
                        "share" => Some(Bound::Share),
                        "node" => Some(Bound::Node),
                        _ => None,
                    };
                    let fields = ["gpus", "cpus", "memory_mb"];
                    let most = [U32, U32, u64::MAX];
                    let nums: Vec<Option<u64>> = c[3..6].iter().map(|v| whole(v)).collect();
                    if !name_ok(c[1]) {
                        bad("profile", c[1], "a profile name");
                    } else if !name_ok(c[2]) {
                        bad("partition", c[2], "a partition name");
                    } else if let Some(k) = out_of_range(&nums, &most) {
                        bad(fields[k], c[3 + k], &in_range(most[k]));
                    } else if bound(c[6]).is_none() {
                        bad("cpus_by", c[6], "demand, share or node");
                    } else if bound(c[7]).is_none() {
                        bad("memory_by", c[7], "demand, share or node");
                    } else {
                        let v: Vec<u64> = nums.into_iter().flatten().collect();
                        lines.sizes.push(n);
                        t.sizes.push(Size {
                            profile: c[1].into(),
                            partition: c[2].into(),
                            gpus: v[0] as u32,
                            cpus: v[1] as u32,
                            memory_mb: v[2],
                            cpus_by: bound(c[6]).unwrap_or(Bound::Demand),
                            memory_by: bound(c[7]).unwrap_or(Bound::Demand),
                        });
                    }
                }
            }
        }
        if !header {
            problems.push(Problem {
                line: None,
                field: "version".into(),
                message: format!("no `{TABLE_HEADER}` row: the table is empty"),
            });
        } else if !generated {
            problems.push(Problem {
                line: None,
                field: "generated".into(),
                message: "no `generated` row: the script does not trust a table without one".into(),
            });
        }
        if let Some(d) = &t.default_partition {
            for p in &mut t.partitions {
                p.default = &p.name == d;
            }
        }
        (t, lines, problems)
    }
}

/// Where [`Table::parse`] found each row, for messages about them.
#[derive(Debug, Default)]
pub struct Lines {
    /// The generation time's line.
    pub generated: usize,
    /// Each partition's line.
    pub partitions: BTreeMap<String, usize>,
    /// Each profile's line.
    pub profiles: BTreeMap<String, usize>,
    /// Each job-name prefix's line.
    pub job_names: Vec<usize>,
    /// Each size's line.
    pub sizes: Vec<usize>,
}

/// A Slurm partition's nodes, grouped by shape.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Partition {
    /// Its name.
    pub name: String,
    /// Whether it is the cluster's default partition (jobs that name none go there).
    pub default: bool,
    /// Its nodes with GPUs, one entry per shape.
    pub shapes: Vec<NodeShape>,
}

/// Nodes of one shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NodeShape {
    /// How many nodes have it.
    pub nodes: u32,
    /// GPUs each.
    pub gpus: u32,
    /// Cores (Slurm CPUs) each.
    pub cpus: u32,
    /// Memory each, in Slurm's MB (MiB).
    pub memory_mb: u64,
}

/// What a profile asks of each GPU, as the table records it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PerGpuDemand {
    /// The profile's `workload.name`: what `--comment=synergy:NAME` names.
    pub name: String,
    /// Best-case cores per GPU.
    pub cpus_per_gpu: f64,
    /// Best-case memory per GPU, GiB.
    pub memory_gib_per_gpu: f64,
    /// Whether the job may get less than the GPU-proportional share (`--allow-below-share`).
    pub below_share: bool,
    /// The profile file (absolute where it could be resolved).
    pub source: PathBuf,
    /// The profile file's modification time, Unix seconds: a table older than it is stale.
    pub source_mtime_s: u64,
}

/// What set a number of a [`Size`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Bound {
    /// The profile's best-case demand.
    Demand,
    /// The GPU-proportional share (the demand was below it).
    Share,
    /// The node (the demand or the share was above it).
    Node,
}

impl Bound {
    /// Its word in the table and in the messages jobs get.
    pub fn word(self) -> &'static str {
        match self {
            Bound::Demand => "demand",
            Bound::Share => "share",
            Bound::Node => "node",
        }
    }
}

/// What a job of one profile asking for `gpus` GPUs on one node of a partition is given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Size {
    /// The profile.
    pub profile: String,
    /// The partition.
    pub partition: String,
    /// GPUs the job asks for.
    pub gpus: u32,
    /// Cores (`cpus_per_task` of its one task).
    pub cpus: u32,
    /// Memory, Slurm MB (MiB) per node.
    pub memory_mb: u64,
    /// What set the cores.
    pub cpus_by: Bound,
    /// What set the memory.
    pub memory_by: Bound,
}

/// The largest count a table's node, GPU or core field may hold.
const U32: u64 = u32::MAX as u64;

/// The first of `nums` that is missing or outside 1..=its bound in `most`.
fn out_of_range(nums: &[Option<u64>], most: &[u64]) -> Option<usize> {
    nums.iter()
        .zip(most)
        .position(|(v, &m)| !v.is_some_and(|x| (1..=m).contains(&x)))
}

/// What a field bounded by `most` must be, in words.
fn in_range(most: u64) -> String {
    if most == u64::MAX {
        "a whole number of at least 1".to_string()
    } else {
        format!("a whole number from 1 to {most}")
    }
}

/// A problem at `line`, in `field`.
pub fn problem(line: usize, field: &str, message: impl Into<String>) -> Problem {
    Problem {
        line: Some(line),
        field: field.into(),
        message: message.into(),
    }
}
