//! The check of an installed advisor table ([`crate::format::advisor_table`]) against a cluster's
//! `sinfo`, and the reading of that `sinfo` output.

use super::size;
use crate::error::InputError;
use crate::format::advisor_table::{problem, NodeShape, Partition, Problem, Table, TABLE_VERSION};
use crate::import::machines::{parse_machines, MachineFormat, PerGpu};

/// The `sinfo` format the advisor reads: node, cores, memory (MB), GRES, partition (`*` marks the default).
pub const SINFO_FORMAT: &str = "%N %c %m %G %P";

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
                shapes: groups.iter().map(super::shape_of_group).collect(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::build;
    use super::*;
    use crate::format::advisor_table::{PerGpuDemand, TABLE_HEADER};

    const SINFO: &str = "adv-a1 24 500000 gpu:8 big*\nadv-a2 24 500000 gpu:8 big*\nadv-b1 2 21695 gpu:2(S:0) small\nlogin 4 8000 (null) cpu\n";

    fn table() -> (Table, tempfile::NamedTempFile) {
        let profile = tempfile::NamedTempFile::new().unwrap();
        let parts = parse_sinfo("sinfo", SINFO).unwrap();
        let d = PerGpuDemand {
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
