//! What the simulation charts need from a run, read from a `synergy simulate --out` directory (`jobs.csv`,
//! `rounds.csv`, `summary.json`; a sweep is a directory of such directories) or taken from a result in memory.

use super::{Kind, PlotError};
use crate::error::InputError;
use crate::error::Setting;
use crate::format::trace::{read_csv, CsvRecord};
use crate::sim::metrics::{FinishedJob, RoundRecord, SimResult};
use crate::sim::{Recorder, SimError};
use std::path::Path;

/// One simulated configuration, as the charts see it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunData {
    /// Where it came from (a directory, or `simulation` for a run in memory).
    pub origin: String,
    /// Policy.
    pub policy: String,
    /// Mechanism.
    pub mechanism: String,
    /// Generated load, jobs per hour (None for a trace file).
    pub load_jobs_per_h: Option<f64>,
    /// Seed of the generated trace.
    pub seed: Option<u64>,
    /// Mean JCT of the measured jobs, hours.
    pub mean_jct_h: f64,
    /// JCT of each measured job (every job when none is marked measured), hours.
    pub jct_h: Vec<f64>,
    /// Per round: start (hours), GPUs, cores and GiB allocated.
    pub rounds: Vec<[f64; 4]>,
    /// The cluster's GPUs, cores and GiB (None when the output does not say).
    pub capacity: Option<[f64; 3]>,
}

/// What the charts need of a run, gathered as it goes ([`Recorder`]): the measured jobs' JCTs (8 bytes a
/// job) and each round's allocation (32 bytes a round), so that `synergy simulate --plot` keeps no
/// per-job record (docs/architecture.md §5.1, "Cost of a round").
#[derive(Debug, Clone, PartialEq)]
pub struct Gather {
    run: RunData,
}

impl Gather {
    /// Gathers a run of generated `load_jobs_per_h` and `seed` (None for a trace file) on a cluster of
    /// `capacity` GPUs, cores and GiB.
    pub fn new(load_jobs_per_h: Option<f64>, seed: Option<u64>, capacity: [f64; 3]) -> Gather {
        Gather {
            run: RunData {
                origin: "simulation".into(),
                policy: String::new(),
                mechanism: String::new(),
                load_jobs_per_h,
                seed,
                mean_jct_h: 0.0,
                jct_h: Vec::new(),
                rounds: Vec::new(),
                capacity: Some(capacity),
            },
        }
    }

    /// The run, once it has finished.
    pub fn into_run(self) -> RunData {
        self.run
    }
}

impl Recorder for Gather {
    fn job(&mut self, job: &FinishedJob) -> Result<(), SimError> {
        // A run always measures some job (its window is never empty), so only measured ones are kept.
        if job.in_window {
            self.run.jct_h.push(job.jct_s / 3600.0);
        }
        Ok(())
    }

    fn round(&mut self, x: &RoundRecord) -> Result<(), SimError> {
        self.run.rounds.push([
            x.start_s / 3600.0,
            x.gpus_used as f64,
            x.cpus_used,
            x.memory_gib_used,
        ]);
        Ok(())
    }

    fn finish(&mut self, r: &SimResult) -> Result<(), SimError> {
        self.run.policy.clone_from(&r.summary.policy);
        self.run.mechanism.clone_from(&r.summary.mechanism);
        self.run.mean_jct_h = r.summary.jct.mean_h;
        Ok(())
    }
}

impl RunData {
    /// `policy / mechanism`, with load and seed.
    pub fn label(&self) -> String {
        let mut s = format!("{} / {}", self.policy, self.mechanism);
        if let Some(l) = self.load_jobs_per_h {
            s.push_str(&format!(", {} jobs/h", super::render::num(l)));
        }
        if let Some(x) = self.seed {
            s.push_str(&format!(", seed {x}"));
        }
        s
    }
}

/// The runs under `path`: the run itself when it holds `summary.json`, else each subdirectory that does
/// (a sweep), in name order.
pub fn load(path: &Path, kind: Kind) -> Result<Vec<RunData>, PlotError> {
    let origin = path.display().to_string();
    let not_output = |what: &str| {
        InputError::new(
            &origin,
            format!(
                "{what}; {} {} takes a `synergy simulate --out` directory (a run with summary.json, \
                 or a sweep of them); cpu, mem, heatmap and fit take profile files",
                Setting::Kind,
                kind.name()
            ),
        )
    };
    if !path.exists() {
        return Err(not_output("does not exist").into());
    }
    if !path.is_dir() {
        return Err(not_output("is not a directory").into());
    }
    if path.join("summary.json").is_file() {
        return Ok(vec![read_run(path)?]);
    }
    let mut dirs: Vec<_> = std::fs::read_dir(path)
        .map_err(|e| InputError::new(&origin, format!("cannot list: {e}")))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("summary.json").is_file())
        .collect();
    dirs.sort();
    if dirs.is_empty() {
        return Err(not_output("has no summary.json, here or in a subdirectory").into());
    }
    let mut runs = dirs
        .iter()
        .map(|d| read_run(d))
        .collect::<Result<Vec<_>, _>>()?;
    // Numeric order of load and seed (directory names sort `load12` before `load6`).
    runs.sort_by(|a, b| {
        (&a.policy, &a.mechanism)
            .cmp(&(&b.policy, &b.mechanism))
            .then(
                a.load_jobs_per_h
                    .unwrap_or(0.0)
                    .total_cmp(&b.load_jobs_per_h.unwrap_or(0.0)),
            )
            .then(a.seed.cmp(&b.seed))
            .then(a.origin.cmp(&b.origin))
    });
    Ok(runs)
}

fn read_text(path: &Path) -> Result<String, InputError> {
    crate::input::read_text(path, crate::input::SIM_OUTPUT)
        .map_err(|e| e.into_input(&path.display().to_string()))
}

/// One run directory.
fn read_run(dir: &Path) -> Result<RunData, PlotError> {
    let summary_path = dir.join("summary.json");
    let so = summary_path.display().to_string();
    let summary: serde_json::Value = serde_json::from_str(&read_text(&summary_path)?)
        .map_err(|e| InputError::new(&so, format!("not JSON: {e}")))?;
    let text_field = |name: &str| {
        summary[name]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| InputError::field(&so, name, "missing (not a synergy summary)"))
    };
    let policy = text_field("policy")?;
    let mechanism = text_field("mechanism")?;
    let mean_jct_h = summary["jct"]["mean_h"]
        .as_f64()
        .ok_or_else(|| InputError::field(&so, "jct.mean_h", "missing (not a synergy summary)"))?;
    // Older outputs say load and seed only in the sweep's directory name.
    let (name_load, name_seed) = from_dir_name(dir);
    let load_jobs_per_h = summary["load_jobs_per_h"].as_f64().or(name_load);
    let seed = summary["seed"].as_u64().or(name_seed);
    let c = &summary["cluster"];
    let capacity = match (
        c["gpus"].as_f64(),
        c["cpus"].as_f64(),
        c["memory_gib"].as_f64(),
    ) {
        (Some(g), Some(p), Some(m)) if g > 0.0 && p > 0.0 && m > 0.0 => Some([g, p, m]),
        _ => None,
    };

    let jobs_path = dir.join("jobs.csv");
    let table = Csv::parse(&read_text(&jobs_path)?, &jobs_path.display().to_string())?;
    let (jct, in_window) = (table.column("jct_s")?, table.column("in_window")?);
    let mut all = Vec::new();
    let mut measured = Vec::new();
    for r in 0..table.rows.len() {
        let j = table.number(r, jct)? / 3600.0;
        all.push(j);
        if table.cell(r, in_window)? == "true" {
            measured.push(j);
        }
    }
    let jct_h = if measured.is_empty() { all } else { measured };

    let rounds_path = dir.join("rounds.csv");
    let rounds = if rounds_path.is_file() {
        let t = Csv::parse(
            &read_text(&rounds_path)?,
            &rounds_path.display().to_string(),
        )?;
        let cols = [
            t.column("start_s")?,
            t.column("gpus_used")?,
            t.column("cpus_used")?,
            t.column("memory_gib_used")?,
        ];
        (0..t.rows.len())
            .map(|r| {
                Ok([
                    t.number(r, cols[0])? / 3600.0,
                    t.number(r, cols[1])?,
                    t.number(r, cols[2])?,
                    t.number(r, cols[3])?,
                ])
            })
            .collect::<Result<Vec<_>, InputError>>()?
    } else {
        Vec::new()
    };
    Ok(RunData {
        origin: dir.display().to_string(),
        policy,
        mechanism,
        load_jobs_per_h,
        seed,
        mean_jct_h,
        jct_h,
        rounds,
        capacity,
    })
}

/// Load and seed from a sweep directory's name, `{policy}-{mechanism}-load{L}-seed{S}`.
fn from_dir_name(dir: &Path) -> (Option<f64>, Option<u64>) {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let Some((rest, seed)) = name.rsplit_once("-seed") else {
        return (None, None);
    };
    let load = rest.rsplit_once("-load").and_then(|(_, l)| l.parse().ok());
    (load, seed.parse().ok())
}

/// A CSV file with a header: what `synergy simulate` writes, read through [`read_csv`] so that a table
/// re-saved by a spreadsheet (quoted cells, CRLF, a byte-order mark) still reads.
struct Csv {
    origin: String,
    header: Vec<String>,
    rows: Vec<CsvRecord>,
}

impl Csv {
    fn parse(text: &str, origin: &str) -> Result<Csv, InputError> {
        let mut records = read_csv(text, origin)?.into_iter();
        let header = records
            .next()
            .ok_or_else(|| InputError::new(origin, "is empty (expected a header line)"))?
            .fields;
        Ok(Csv {
            origin: origin.into(),
            header,
            rows: records.collect(),
        })
    }

    fn column(&self, name: &str) -> Result<usize, InputError> {
        self.header
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| InputError::field(&self.origin, name, "no such column in the header"))
    }

    /// The cell of `row` in column `col`, text; errors name the file's line and the column.
    fn cell(&self, row: usize, col: usize) -> Result<&str, InputError> {
        let r = &self.rows[row];
        r.fields.get(col).map(String::as_str).ok_or_else(|| {
            InputError::field(
                &self.origin,
                format!("line {}, column {}", r.line, self.header[col]),
                "missing",
            )
        })
    }

    fn number(&self, row: usize, col: usize) -> Result<f64, InputError> {
        let cell = self.cell(row, col)?;
        cell.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| {
                InputError::field(
                    &self.origin,
                    format!("line {}, column {}", self.rows[row].line, self.header[col]),
                    format!("`{cell}` is not a number"),
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_read_with_quotes_crlf_and_a_byte_order_mark() {
        let t = Csv::parse(
            "\u{feff}id,\"model\",jct_s\r\n0,\"res,18\",\"7200\"\r\n\r\n1,gnmt,3600.5\r\n",
            "jobs.csv",
        )
        .unwrap();
        let (model, jct) = (t.column("model").unwrap(), t.column("jct_s").unwrap());
        assert_eq!(t.cell(0, model).unwrap(), "res,18");
        assert_eq!(t.number(0, jct).unwrap(), 7200.0);
        assert_eq!(t.number(1, jct).unwrap(), 3600.5);
    }

    #[test]
    fn a_bad_cell_names_its_line_and_column() {
        let t = Csv::parse("id,jct_s\n0,1\n\n1,soon\n2\n", "jobs.csv").unwrap();
        let jct = t.column("jct_s").unwrap();
        assert_eq!(
            t.number(1, jct).unwrap_err().to_string(),
            "jobs.csv: field `line 4, column jct_s`: `soon` is not a number"
        );
        assert_eq!(
            t.number(2, jct).unwrap_err().to_string(),
            "jobs.csv: field `line 5, column jct_s`: missing"
        );
        assert_eq!(
            t.column("in_window").unwrap_err().to_string(),
            "jobs.csv: field `in_window`: no such column in the header"
        );
    }
}
