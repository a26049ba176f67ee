//! What `synergy slurm advisor` prints: the table it wrote, or the check of an installed one.

use super::*;

/// `synergy slurm advisor --json`: the files written and the table in them.
#[derive(serde::Serialize)]
pub(in crate::cli) struct AdvisorWritten<'a> {
    /// The script and the table, in that order.
    pub(in crate::cli) written: &'a [std::path::PathBuf; 2],
    /// What the table holds.
    pub(in crate::cli) table: &'a crate::format::advisor_table::Table,
}

/// `synergy slurm advisor --check --json`: the table checked and its problems.
#[derive(serde::Serialize)]
pub(in crate::cli) struct AdvisorCheck<'a> {
    /// The table file.
    pub(in crate::cli) table: &'a Path,
    /// No problems.
    pub(in crate::cli) ok: bool,
    /// Each with its line and field.
    pub(in crate::cli) problems: &'a [crate::format::advisor_table::Problem],
}

/// The advisor's table for people: the files, then what a one-GPU job of each profile gets per partition.
pub(in crate::cli) fn render_advisor(
    t: &crate::format::advisor_table::Table,
    written: &[std::path::PathBuf; 2],
) -> String {
    let mut o = format!(
        "synergy: wrote {} and {} ({} profiles, {} partitions, {} sizes); install both beside slurm.conf (docs/slurm.md)\n",
        written[0].display(),
        written[1].display(),
        t.profiles.len(),
        t.partitions.len(),
        t.sizes.len()
    );
    o.push_str("profile       partition     1 GPU: cores        memory (MB)\n");
    for z in t.sizes.iter().filter(|z| z.gpus == 1) {
        o.push_str(&format!(
            "{:<13} {:<13} {:>5} {:<8}  {:>9} ({})\n",
            z.profile,
            z.partition,
            z.cpus,
            format!("({})", z.cpus_by.word()),
            z.memory_mb,
            z.memory_by.word()
        ));
    }
    o
}

/// A table that passed the check.
pub(in crate::cli) fn render_advisor_check(table: &Path, text: &str) -> String {
    let sizes = text.lines().filter(|l| l.starts_with("size\t")).count();
    format!(
        "synergy: {} is good: {sizes} sizes, matching the cluster's partitions and the profiles\n",
        table.display()
    )
}
