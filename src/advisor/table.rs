//! The advisor's table file: tab-separated rows with a version line and a generation time, written by
//! [`Table::to_tsv`], read back by [`Table::parse`] (and, independently, by the shipped `job_submit.lua`),
//! and checked against a cluster's `sinfo` by [`check`]. Also the reading of that `sinfo` output.

use super::{size, Bound, Demand, NodeShape, Partition, Size};
use crate::error::InputError;
use crate::import::machines::{parse_machines, MachineFormat, PerGpu};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

/// The first field of the table's version line.
pub const TABLE_HEADER: &str = "synergy-advisor-table";
/// The table format this build writes and its script reads.
pub const TABLE_VERSION: u32 = 1;

/// The `sinfo` format the advisor reads: node, cores, memory (MB), GRES, partition (`*` marks the default).
pub const SINFO_FORMAT: &str = "%N %c %m %G %P";

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
    pub profiles: Vec<Demand>,
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

fn problem(line: usize, field: &str, message: impl Into<String>) -> Problem {
    Problem {
        line: Some(line),
        field: field.into(),
        message: message.into(),
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
                    if !name_ok(c[1]) {
                        bad("name", c[1], "a partition name");
                    } else if let Some(k) = nums.iter().position(|v| !v.is_some_and(|x| x >= 1)) {
                        bad(fields[k], c[2 + k], "a whole number of at least 1");
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
                        t.profiles.push(Demand {
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
                    let nums: Vec<Option<u64>> = c[3..6].iter().map(|v| whole(v)).collect();
                    if !name_ok(c[1]) {
                        bad("profile", c[1], "a profile name");
                    } else if !name_ok(c[2]) {
                        bad("partition", c[2], "a partition name");
                    } else if let Some(k) = nums.iter().position(|v| !v.is_some_and(|x| x >= 1)) {
                        bad(fields[k], c[3 + k], "a whole number of at least 1");
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
    generated: usize,
    partitions: BTreeMap<String, usize>,
    profiles: BTreeMap<String, usize>,
    job_names: Vec<usize>,
    sizes: Vec<usize>,
}

/// Every problem of the table `text` against the cluster's `partitions` at `now_s`: rows that do not
/// parse, an unknown version, a table made before one of its profiles (stale) or in the future, rows
/// naming profiles or partitions it does not have, partitions the cluster lacks or whose node shapes
/// changed, and sizes that differ from what the cluster's nodes give now.
pub fn check(text: &str, partitions: &[Partition], now_s: u64) -> Vec<Problem> {
    let (t, lines, mut problems) = Table::parse(text);
    if t.version != TABLE_VERSION {
        return problems;
    }
    if t.generated_s > now_s + 300 {
        problems.push(problem(
            lines.generated,
            "generated",
            format!("{} is in the future (now {now_s})", t.generated_s),
        ));
    }
    let cluster_default = partitions.iter().find(|p| p.default).map(|p| &p.name);
    if t.default_partition.as_ref() != cluster_default {
        problems.push(Problem {
            line: None,
            field: "default_partition".into(),
            message: format!(
                "the table says `{}`, the cluster's default partition is `{}`",
                t.default_partition.as_deref().unwrap_or("(none)"),
                cluster_default.map_or("(none)", String::as_str)
            ),
        });
    }
    for p in &t.partitions {
        let n = lines.partitions[&p.name];
        match partitions.iter().find(|c| c.name == p.name) {
            None => problems.push(problem(
                n,
                "name",
                format!("the cluster has no partition `{}`", p.name),
            )),
            Some(c) => {
                let (mut a, mut b) = (p.shapes.clone(), c.shapes.clone());
                a.sort_by_key(|s| (s.gpus, s.cpus, s.memory_mb, s.nodes));
                b.sort_by_key(|s| (s.gpus, s.cpus, s.memory_mb, s.nodes));
                if a != b {
                    problems.push(problem(
                        n,
                        "shape",
                        format!(
                            "partition `{}` has nodes {}; the table was made for {}",
                            p.name,
                            shapes_text(&b),
                            shapes_text(&a)
                        ),
                    ));
                }
            }
        }
    }
    for d in &t.profiles {
        let n = lines.profiles[&d.name];
        match super::mtime_s(&d.source) {
            None => problems.push(problem(
                n,
                "path",
                format!("profile file {} is not there: the table cannot be checked against it", d.source.display()),
            )),
            Some(m) if m > t.generated_s => problems.push(problem(
                n,
                "generated",
                format!(
                    "stale: {} changed after the table was made; regenerate it with synergy slurm advisor",
                    d.source.display()
                ),
            )),
            Some(_) => {}
        }
    }
    for (k, (_, profile)) in t.job_names.iter().enumerate() {
        if !lines.profiles.contains_key(profile) {
            problems.push(problem(
                lines.job_names[k],
                "profile",
                format!("`{profile}` has no profile row"),
            ));
        }
    }
    for (k, z) in t.sizes.iter().enumerate() {
        let n = lines.sizes[k];
        let Some(d) = t.profiles.iter().find(|d| d.name == z.profile) else {
            problems.push(problem(
                n,
                "profile",
                format!("`{}` has no profile row", z.profile),
            ));
            continue;
        };
        let Some(p) = partitions.iter().find(|p| p.name == z.partition) else {
            problems.push(problem(
                n,
                "partition",
                format!("the cluster has no partition `{}`", z.partition),
            ));
            continue;
        };
        match size(d, p, z.gpus) {
            None => problems.push(problem(
                n,
                "gpus",
                format!("no node of partition `{}` has {} GPUs", z.partition, z.gpus),
            )),
            Some(now) => {
                if now.cpus != z.cpus {
                    problems.push(problem(
                        n,
                        "cpus",
                        format!(
                            "{} cores; the profile on partition `{}`'s nodes gives {} ({})",
                            z.cpus,
                            z.partition,
                            now.cpus,
                            now.cpus_by.word()
                        ),
                    ));
                }
                if now.memory_mb != z.memory_mb {
                    problems.push(problem(
                        n,
                        "memory_mb",
                        format!(
                            "{} MB; the profile on partition `{}`'s nodes gives {} ({})",
                            z.memory_mb,
                            z.partition,
                            now.memory_mb,
                            now.memory_by.word()
                        ),
                    ));
                }
            }
        }
    }
    problems
}

fn shapes_text(shapes: &[NodeShape]) -> String {
    shapes
        .iter()
        .map(|s| {
            format!(
                "{} x ({} GPUs, {} cores, {} MB)",
                s.nodes, s.gpus, s.cpus, s.memory_mb
            )
        })
        .collect::<Vec<_>>()
        .join(" + ")
}

/// Reads `sinfo -N -h -o "%N %c %m %G %P"` (one line per node and partition) into partitions, in the
/// order they first appear; a `*` after a name marks the default. `origin` names it in errors. Node
/// shapes are read by the machine-list importer ([`parse_machines`]), so both read `sinfo` alike.
pub fn parse_sinfo(origin: &str, text: &str) -> Result<Vec<Partition>, InputError> {
    let mut order: Vec<(String, bool)> = Vec::new();
    let mut of_line: Vec<Option<usize>> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.is_empty() {
            of_line.push(None);
            continue;
        }
        let Some(part) = f.get(4) else {
            return Err(InputError::field(
                format!("{origin}, line {}", i + 1),
                "partition",
                format!("missing; write it with sinfo -N -h -o \"{SINFO_FORMAT}\""),
            ));
        };
        let (name, default) = match part.strip_suffix('*') {
            Some(n) => (n, true),
            None => (*part, false),
        };
        let k = match order.iter().position(|(n, _)| n == name) {
            Some(k) => k,
            None => {
                order.push((name.to_string(), false));
                order.len() - 1
            }
        };
        order[k].1 |= default;
        of_line.push(Some(k));
    }
    if order.is_empty() {
        return Err(InputError::new(origin, "lists no node"));
    }
    let per_gpu = PerGpu {
        cpus: 0.0,
        memory_gb: 0.0,
    };
    order
        .iter()
        .enumerate()
        .map(|(k, (name, default))| {
            // The other partitions' lines blanked, so errors keep their line numbers.
            let own: String = text
                .lines()
                .zip(&of_line)
                .map(|(l, p)| if *p == Some(k) { l } else { "" })
                .collect::<Vec<_>>()
                .join("\n");
            let groups = parse_machines(MachineFormat::Sinfo, origin, &own, per_gpu)?;
            Ok(Partition {
                name: name.clone(),
                default: *default,
                shapes: groups.iter().map(NodeShape::of_group).collect(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::build;
    use super::*;

    const SINFO: &str = "adv-a1 24 500000 gpu:8 big*\nadv-a2 24 500000 gpu:8 big*\nadv-b1 2 21695 gpu:2(S:0) small\nlogin 4 8000 (null) cpu\n";

    fn table() -> (Table, tempfile::NamedTempFile) {
        let profile = tempfile::NamedTempFile::new().unwrap();
        let parts = parse_sinfo("sinfo", SINFO).unwrap();
        let d = Demand {
            name: "res18".into(),
            cpus_per_gpu: 9.0,
            memory_gib_per_gpu: 58.2,
            below_share: false,
            source: profile.path().to_path_buf(),
            source_mtime_s: 5,
        };
        let now = super::super::mtime_s(profile.path()).unwrap() + 10;
        (
            build(&[d], &parts, &[("train-r18-".into(), "res18".into())], now).unwrap(),
            profile,
        )
    }

    #[test]
    fn sinfo_gives_partitions_their_shapes_and_the_default() {
        let p = parse_sinfo("sinfo", SINFO).unwrap();
        assert_eq!(p.len(), 3);
        assert_eq!((p[0].name.as_str(), p[0].default), ("big", true));
        assert_eq!(
            p[0].shapes,
            vec![NodeShape {
                nodes: 2,
                gpus: 8,
                cpus: 24,
                memory_mb: 500_000
            }]
        );
        assert_eq!(p[1].shapes[0].memory_mb, 21_695);
        assert!(p[2].shapes.is_empty());
        let e = parse_sinfo("nodes.txt", "a 2 100 gpu:1 main\nb 2 1OO gpu:1 main\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("nodes.txt, line 2") && e.contains("memory"),
            "{e}"
        );
        let e = parse_sinfo("nodes.txt", "a 2 100 gpu:1\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 1") && e.contains("partition"), "{e}");
    }

    #[test]
    fn a_table_reads_back_as_written_and_checks_clean() {
        let (t, _keep) = table();
        let text = t.to_tsv();
        let (back, _, problems) = Table::parse(&text);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(back.sizes, t.sizes);
        assert_eq!(back.job_names, t.job_names);
        assert_eq!(back.partitions, t.partitions);
        let parts = parse_sinfo("sinfo", SINFO).unwrap();
        assert_eq!(check(&text, &parts, t.generated_s), vec![]);
    }

    #[test]
    fn the_check_names_the_line_and_field() {
        let (t, _keep) = table();
        let parts = parse_sinfo("sinfo", SINFO).unwrap();
        let text = t.to_tsv();
        let line_of = |needle: &str| text.lines().position(|l| l.starts_with(needle)).unwrap() + 1;
        // A corrupt entry.
        let bad = text.replacen("size\tres18\tbig\t1\t9\t", "size\tres18\tbig\t1\tnine\t", 1);
        let p = check(&bad, &parts, t.generated_s);
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(
            (p[0].line, p[0].field.as_str()),
            (Some(line_of("size\tres18\tbig\t1\t")), "cpus")
        );
        // Another version.
        let p = check(
            &text.replacen(
                &format!("{TABLE_HEADER}\t1"),
                &format!("{TABLE_HEADER}\t7"),
                1,
            ),
            &parts,
            0,
        );
        assert_eq!((p[0].line, p[0].field.as_str()), (Some(2), "version"));
        // The cluster's nodes changed.
        let grown = parse_sinfo("sinfo", &SINFO.replace("adv-b1 2 ", "adv-b1 4 ")).unwrap();
        let p = check(&text, &grown, t.generated_s);
        assert!(
            p.iter()
                .any(|p| p.field == "shape" && p.line == Some(line_of("partition\tsmall"))),
            "{p:?}"
        );
        assert!(p.iter().any(|p| p.field == "cpus"), "{p:?}");
        // A profile newer than the table.
        let old = text.replacen(&format!("generated\t{}", t.generated_s), "generated\t6", 1);
        let p = check(&old, &parts, t.generated_s);
        assert!(
            p.iter()
                .any(|p| p.field == "generated" && p.message.contains("stale")),
            "{p:?}"
        );
        // A missing partition.
        let p = check(&text, &parts[..1], t.generated_s);
        assert!(
            p.iter().any(|p| p.message.contains("no partition `small`")),
            "{p:?}"
        );
    }
}
