//! The delimited formats, read row by row with the `csv` crate: Helios, Acme and Tiresias (CSV with a
//! header), Slurm's `sacct --parsable2` (`|`, a header, job steps folded into their job), Gavel (tabs, no
//! header) and PAI (two header-less tables joined by job name). Each names its columns as its publisher
//! does (docs/traces.md).

use super::time::{is_missing, parse_elapsed, parse_time};
use super::{Format, JobOutcome, RawJob, Sink};
use crate::error::InputError;
use crate::error::Setting;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A delimited file being read, with the column positions of its header.
struct Table {
    origin: String,
    rows: csv::StringRecordsIntoIter<std::io::BufReader<crate::input::Bounded<std::fs::File>>>,
    header: Vec<String>,
}

fn open(path: &Path, delimiter: u8, has_header: bool) -> Result<Table, InputError> {
    let origin = path.display().to_string();
    let file = crate::input::open(path, crate::input::IMPORTED_TRACE)
        .map_err(|e| e.into_input(&origin))?;
    let mut rdr = csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .has_headers(has_header)
        .flexible(true)
        .quoting(delimiter == b',')
        .from_reader(std::io::BufReader::with_capacity(1 << 20, file));
    let header = if has_header {
        rdr.headers()
            .map_err(|e| csv_error(&origin, e))?
            .iter()
            .map(|h| h.trim().trim_start_matches('\u{feff}').to_string())
            .collect()
    } else {
        Vec::new()
    };
    Ok(Table {
        origin,
        rows: rdr.into_records(),
        header,
    })
}

fn csv_error(origin: &str, e: csv::Error) -> InputError {
    let at = e
        .position()
        .map(|p| format!("{origin}, line {}", p.line()))
        .unwrap_or_else(|| origin.to_string());
    match e.kind() {
        csv::ErrorKind::Utf8 { .. } => InputError::new(at, "is not UTF-8 text"),
        // A limit of the input reader (a line too long) is the file's.
        csv::ErrorKind::Io(io) if io.kind() == std::io::ErrorKind::InvalidData => {
            InputError::new(at, io.to_string())
        }
        csv::ErrorKind::Io(io) => InputError::new(at, format!("cannot read the trace: {io}")),
        _ => InputError::new(at, format!("is not a delimited table: {e}")),
    }
}

impl Table {
    /// The position of column `name`; `layout` says what the format's header looks like.
    fn col(&self, name: &str, layout: &str) -> Result<usize, InputError> {
        self.opt_col(name).ok_or_else(|| {
            InputError::new(
                format!("{}, line 1", self.origin),
                format!("the header lacks column `{name}` (is this the right --format? expected {layout})"),
            )
        })
    }

    fn opt_col(&self, name: &str) -> Option<usize> {
        self.header
            .iter()
            .position(|h| h.eq_ignore_ascii_case(name))
    }

    /// Calls `row` with each record and where it is (`FILE, line N`).
    fn each(
        self,
        mut row: impl FnMut(&csv::StringRecord, &Row) -> Result<(), InputError>,
    ) -> Result<(), InputError> {
        let origin = self.origin;
        for rec in self.rows {
            let rec = rec.map_err(|e| csv_error(&origin, e))?;
            let line = rec.position().map_or(0, |p| p.line());
            if rec.iter().all(|f| f.trim().is_empty()) {
                continue;
            }
            row(
                &rec,
                &Row {
                    origin: &origin,
                    line,
                },
            )?;
        }
        Ok(())
    }
}

/// Where a record is, for errors that name it.
struct Row<'a> {
    origin: &'a str,
    line: u64,
}

impl Row<'_> {
    fn err(&self, field: &str, what: impl Into<String>) -> InputError {
        InputError::field(format!("{}, line {}", self.origin, self.line), field, what)
    }

    fn get<'r>(
        &self,
        rec: &'r csv::StringRecord,
        at: usize,
        field: &str,
    ) -> Result<&'r str, InputError> {
        rec.get(at)
            .map(str::trim)
            .ok_or_else(|| self.err(field, "is missing: the row is shorter than the header"))
    }

    /// A time, `None` where the trace writes none.
    fn time(
        &self,
        rec: &csv::StringRecord,
        at: usize,
        field: &str,
    ) -> Result<Option<f64>, InputError> {
        let v = self.get(rec, at, field)?;
        parse_time(v).ok_or_else(|| self.err(field, format!("`{v}` is not a time")))
    }

    /// A non-negative number, `None` where the trace writes none.
    fn num(
        &self,
        rec: &csv::StringRecord,
        at: usize,
        field: &str,
    ) -> Result<Option<f64>, InputError> {
        let v = self.get(rec, at, field)?;
        if is_missing(v) {
            return Ok(None);
        }
        match v.parse::<f64>() {
            Ok(x) if x.is_finite() && x >= 0.0 => Ok(Some(x)),
            Ok(x) if x < 0.0 => Err(self.err(field, format!("`{v}` is negative"))),
            _ => Err(self.err(field, format!("`{v}` is not a number"))),
        }
    }

    fn opt_num(
        &self,
        rec: &csv::StringRecord,
        at: Option<usize>,
        field: &str,
    ) -> Result<Option<f64>, InputError> {
        at.map_or(Ok(None), |a| self.num(rec, a, field))
    }

    /// A whole count of GPUs (or nodes).
    fn count(&self, rec: &csv::StringRecord, at: usize, field: &str) -> Result<u32, InputError> {
        let v = self.get(rec, at, field)?;
        if is_missing(v) {
            return Ok(0);
        }
        match v.parse::<f64>() {
            Ok(x) if x >= 0.0 && x.fract() == 0.0 && x <= u32::MAX as f64 => Ok(x as u32),
            _ => Err(self.err(field, format!("`{v}` is not a whole number of at least 0"))),
        }
    }

    /// A submission time the job cannot do without.
    fn submit(
        &self,
        rec: &csv::StringRecord,
        at: usize,
        field: &str,
    ) -> Result<Option<f64>, InputError> {
        self.time(rec, at, field)
    }
}

fn text(rec: &csv::StringRecord, at: Option<usize>) -> Option<String> {
    at.and_then(|a| rec.get(a))
        .map(str::trim)
        .filter(|t| !is_missing(t))
        .map(str::to_string)
}

/// Run time: the trace's duration, else end minus start; an end before its start is an error.
fn run_time(
    row: &Row,
    duration: Option<f64>,
    start: Option<f64>,
    end: Option<f64>,
) -> Result<f64, InputError> {
    if let Some(d) = duration {
        return Ok(d);
    }
    match (start, end) {
        (Some(s), Some(e)) if e < s => Err(row.err("end_time", "is before start_time")),
        (Some(s), Some(e)) => Ok(e - s),
        _ => Ok(0.0),
    }
}

/// Reads one file of a delimited format other than PAI.
pub(super) fn read(format: Format, path: &Path, sink: &mut Sink) -> Result<(), InputError> {
    match format {
        Format::Helios | Format::Acme => read_helios_like(format, path, sink),
        Format::Tiresias => read_tiresias(path, sink),
        Format::Sacct => read_sacct(path, sink),
        Format::Gavel => read_gavel(path, sink),
        Format::Philly | Format::Pai => unreachable!("read elsewhere"),
    }
}

const HELIOS: &str =
    "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue";
const ACME: &str = "job_id,user,node_num,gpu_num,cpu_num,type,state,submit_time,start_time,end_time,duration,queue,gpu_time";

/// Helios `cluster_log.csv` and Acme's job tables: the same columns, but for Helios's `vc` and Acme's
/// `type` (and Kalos's `mem_per_pod_GB`). Their `queue` column is a queueing delay, not a queue's name.
fn read_helios_like(format: Format, path: &Path, sink: &mut Sink) -> Result<(), InputError> {
    let t = open(path, b',', true)?;
    let layout = if format == Format::Helios {
        HELIOS
    } else {
        ACME
    };
    let id = t.col("job_id", layout)?;
    let gpus = t.col("gpu_num", layout)?;
    let state = t.col("state", layout)?;
    let submit = t.col("submit_time", layout)?;
    let duration = t.opt_col("duration");
    let (start, end) = (t.opt_col("start_time"), t.opt_col("end_time"));
    if duration.is_none() && (start.is_none() || end.is_none()) {
        t.col("duration", layout)?;
    }
    let (user, cpus, nodes) = (
        t.opt_col("user"),
        t.opt_col("cpu_num"),
        t.opt_col("node_num"),
    );
    let queue = t.opt_col("vc");
    let name = t.opt_col("type");
    let mem_per_pod = t.opt_col("mem_per_pod_GB");
    t.each(|rec, row| {
        let Some(submit_s) = row.submit(rec, submit, "submit_time")? else {
            sink.skip("no submission time");
            return Ok(());
        };
        let d = duration.map_or(Ok(None), |a| row.num(rec, a, "duration"))?;
        let s = start.map_or(Ok(None), |a| row.time(rec, a, "start_time"))?;
        let e = end.map_or(Ok(None), |a| row.time(rec, a, "end_time"))?;
        let pods = nodes
            .map_or(Ok(1), |a| row.count(rec, a, "node_num"))?
            .max(1);
        sink.offer(RawJob {
            name: text(rec, name),
            queue: text(rec, queue),
            user: text(rec, user),
            req_cpus: row.opt_num(rec, cpus, "cpu_num")?,
            req_mem_gb: row
                .opt_num(rec, mem_per_pod, "mem_per_pod_GB")?
                .map(|m| m * pods as f64),
            ..RawJob::new(
                row.get(rec, id, "job_id")?.to_string(),
                submit_s,
                run_time(row, d, s, e)?,
                row.count(rec, gpus, "gpu_num")?,
                JobOutcome::from_word(row.get(rec, state, "state")?),
            )
        });
        Ok(())
    })
}

const TIRESIAS: &str = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval";

/// Tiresias's trace CSV: times in seconds from the trace's start, every job finished.
fn read_tiresias(path: &Path, sink: &mut Sink) -> Result<(), InputError> {
    let t = open(path, b',', true)?;
    let id = t.col("job_id", TIRESIAS)?;
    let gpus = t.col("num_gpu", TIRESIAS)?;
    let submit = t.col("submit_time", TIRESIAS)?;
    let duration = t.col("duration", TIRESIAS)?;
    let model = t.opt_col("model_name");
    t.each(|rec, row| {
        let Some(submit_s) = row.num(rec, submit, "submit_time")? else {
            sink.skip("no submission time");
            return Ok(());
        };
        sink.offer(RawJob {
            name: text(rec, model),
            model: text(rec, model),
            ..RawJob::new(
                row.get(rec, id, "job_id")?.to_string(),
                submit_s,
                row.num(rec, duration, "duration")?.unwrap_or(0.0),
                row.count(rec, gpus, "num_gpu")?,
                JobOutcome::Completed,
            )
        });
        Ok(())
    })
}

const SACCT: &str = "sacct --parsable2 with JobID|Submit|Start|End|Elapsed|AllocTRES|State|Partition|JobName|Comment";

/// `sacct --parsable2`: a job's own row carries its allocation; its steps (`123.batch`, `123.0`,
/// `123.extern`) are folded into it by being skipped. A comment `synergy:NAME` names the job's model.
/// Submissions whose comment carries `synergy-run:MARK` (what `synergy run --backend slurm` writes)
/// and that share a job name are one job resubmitted with new resources: they are folded by
/// [`Resubmissions`] and offered once, after the file is read.
fn read_sacct(path: &Path, sink: &mut Sink) -> Result<(), InputError> {
    let t = open(path, b'|', true)?;
    let id = t.col("JobID", SACCT)?;
    let submit = t.col("Submit", SACCT)?;
    let elapsed = t.col("Elapsed", SACCT)?;
    let state = t.col("State", SACCT)?;
    let tres = match t.opt_col("AllocTRES") {
        Some(a) => a,
        None => t.col("ReqTRES", SACCT)?,
    };
    let req = t.opt_col("ReqTRES");
    let (name, queue, user, comment) = (
        t.opt_col("JobName"),
        t.opt_col("Partition"),
        t.opt_col("User"),
        t.opt_col("Comment"),
    );
    let mut resubmitted = Resubmissions::default();
    t.each(|rec, row| {
        let job_id = row.get(rec, id, "JobID")?;
        if job_id.contains('.') {
            return Ok(());
        }
        let Some(submit_s) = row.time(rec, submit, "Submit")? else {
            sink.skip("no submission time");
            return Ok(());
        };
        let e = row.get(rec, elapsed, "Elapsed")?;
        let run_s = parse_elapsed(e)
            .ok_or_else(|| row.err("Elapsed", format!("`{e}` is not [D-]HH:MM:SS")))?;
        let alloc = parse_tres(row, row.get(rec, tres, "AllocTRES")?)?;
        // A job that never started has no allocation: its request says what it asked for.
        let asked = match req {
            Some(r) => parse_tres(row, row.get(rec, r, "ReqTRES")?)?,
            None => Tres::default(),
        };
        let words = text(rec, comment).unwrap_or_default();
        let mut words = words.split(|ch: char| ch == ',' || ch.is_whitespace());
        let model = words
            .clone()
            .find_map(|w| w.strip_prefix("synergy:").map(str::to_string));
        let mark = words.find_map(|w| w.strip_prefix("synergy-run:").map(str::to_string));
        let job = RawJob {
            name: text(rec, name),
            queue: text(rec, queue),
            user: text(rec, user),
            req_cpus: asked.cpus.or(alloc.cpus),
            req_mem_gb: asked.mem_gb.or(alloc.mem_gb),
            model,
            ..RawJob::new(
                job_id.to_string(),
                submit_s,
                run_s,
                alloc.gpus.or(asked.gpus).unwrap_or(0),
                JobOutcome::from_word(row.get(rec, state, "State")?),
            )
        };
        match (mark, &job.name) {
            (Some(mark), Some(name)) => {
                resubmitted.add((mark, name.clone()), job_number(job_id), job)
            }
            _ => sink.offer(job),
        }
        Ok(())
    })?;
    resubmitted.offer(sink);
    Ok(())
}

/// The number a job id starts with (`123`, `123_4` of an array), to order submissions of one second.
fn job_number(id: &str) -> u64 {
    let digits = id.find(|c: char| !c.is_ascii_digit()).unwrap_or(id.len());
    id[..digits].parse().unwrap_or(0)
}

/// The submissions of jobs that `synergy run --backend slurm` cancelled and submitted again whenever
/// their allocation changed (docs/traces.md, "Jobs synergy run resubmitted"), folded into one job each,
/// keyed by (run mark, job name): submitted when first submitted, run for the sum of the submissions'
/// run times, as wide as the widest, asking for the most cores and memory any asked for, ended as the
/// last submission ended (the earlier ones are `CANCELLED` by the executor). Its id is its first
/// submission's.
#[derive(Default)]
struct Resubmissions {
    /// Per (run mark, job name): the folded job, and its first and last submissions.
    jobs: HashMap<(String, String), (RawJob, Submission, Submission)>,
}

/// When a submission was made and its job number: the order of one job's submissions.
type Submission = (f64, u64);

impl Resubmissions {
    fn add(&mut self, key: (String, String), number: u64, job: RawJob) {
        use std::collections::hash_map::Entry;
        let at = (job.submit_s, number);
        let (folded, first, last) = match self.jobs.entry(key) {
            Entry::Vacant(v) => {
                v.insert((job, at, at));
                return;
            }
            Entry::Occupied(o) => o.into_mut(),
        };
        let max = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        folded.run_s += job.run_s;
        folded.gpus = folded.gpus.max(job.gpus);
        folded.req_cpus = max(folded.req_cpus, job.req_cpus);
        folded.req_mem_gb = max(folded.req_mem_gb, job.req_mem_gb);
        folded.model = folded.model.take().or(job.model);
        // sacct lists jobs by id, but a file may be concatenated or sorted: order by submission.
        if at >= *last {
            folded.state = job.state;
            *last = at;
        }
        if at < *first {
            folded.submit_s = job.submit_s;
            folded.source_id = job.source_id;
            *first = at;
        }
    }

    /// Offers the folded jobs, in order of their first submission.
    fn offer(self, sink: &mut Sink) {
        let mut jobs: Vec<RawJob> = self.jobs.into_values().map(|(j, ..)| j).collect();
        jobs.sort_by(|a, b| {
            a.submit_s
                .total_cmp(&b.submit_s)
                .then(a.source_id.cmp(&b.source_id))
        });
        for j in jobs {
            sink.offer(j);
        }
    }
}

/// What a Slurm TRES string (`billing=2,cpu=2,gres/gpu=1,mem=4G,node=1`) gives.
#[derive(Debug, Default, PartialEq)]
struct Tres {
    cpus: Option<f64>,
    mem_gb: Option<f64>,
    gpus: Option<u32>,
}

fn parse_tres(row: &Row, text: &str) -> Result<Tres, InputError> {
    let mut t = Tres::default();
    let mut typed_gpus = 0u32;
    for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let Some((k, v)) = item.split_once('=') else {
            return Err(row.err("AllocTRES", format!("`{item}` is not KEY=VALUE")));
        };
        let bad = || row.err("AllocTRES", format!("`{item}` has no number"));
        match k {
            "cpu" => t.cpus = Some(v.parse().map_err(|_| bad())?),
            "mem" => t.mem_gb = Some(slurm_mem_gb(v).ok_or_else(bad)?),
            "gres/gpu" => t.gpus = Some(v.parse().map_err(|_| bad())?),
            k if k.starts_with("gres/gpu:") => typed_gpus += v.parse::<u32>().map_err(|_| bad())?,
            _ => {}
        }
    }
    if t.gpus.is_none() && typed_gpus > 0 {
        t.gpus = Some(typed_gpus);
    }
    Ok(t)
}

/// Slurm's memory sizes (`4000M`, `4G`, `1T`; no suffix is MiB), which count in 1024s, in decimal GB.
fn slurm_mem_gb(v: &str) -> Option<f64> {
    let (num, mult_mib) = match v.char_indices().last()? {
        (i, 'K') => (&v[..i], 1.0 / 1024.0),
        (i, 'M') => (&v[..i], 1.0),
        (i, 'G') => (&v[..i], 1024.0),
        (i, 'T') => (&v[..i], 1024.0 * 1024.0),
        _ => (v, 1.0),
    };
    let x: f64 = num.parse().ok()?;
    (x.is_finite() && x >= 0.0).then(|| x * mult_mib * 1_048_576.0 / 1e9)
}

/// Gavel's trace file: tab-separated, no header; `job_type, command, working_directory, num_steps_arg,
/// needs_data_dir, total_steps, scale_factor, [mode,] priority_weight, SLO, arrival_time` (10 or 11
/// fields; 12 with a `duration` before the arrival). Work is `total_steps` iterations of the job type's
/// model; every job finished.
fn read_gavel(path: &Path, sink: &mut Sink) -> Result<(), InputError> {
    let t = open(path, b'\t', false)?;
    t.each(|rec, row| {
        let n = rec.len();
        if !(10..=12).contains(&n) {
            return Err(row.err(
                "fields",
                format!(
                    "has {n} tab-separated fields; a Gavel trace line has 10 (or 11 with a mode)"
                ),
            ));
        }
        let job_type = row.get(rec, 0, "job_type")?.to_string();
        let steps = row.get(rec, 5, "total_steps")?;
        let iters: u64 = steps.parse().ok().filter(|&s| s > 0).ok_or_else(|| {
            row.err(
                "total_steps",
                format!("`{steps}` is not a positive integer"),
            )
        })?;
        let gpus = row.count(rec, 6, "scale_factor")?;
        let Some(submit_s) = row.num(rec, n - 1, "arrival_time")? else {
            sink.skip("no submission time");
            return Ok(());
        };
        sink.offer(RawJob {
            name: Some(job_type.clone()),
            model: Some(job_type),
            iters: Some(iters),
            ..RawJob::new(
                (row.line).to_string(),
                submit_s,
                0.0,
                gpus,
                JobOutcome::Completed,
            )
        });
        Ok(())
    })
}

/// One job's tasks in PAI's task table, summed.
#[derive(Debug, Default)]
struct PaiTasks {
    gpus: f64,
    cpus: f64,
    mem_gb: f64,
    start_s: Option<f64>,
    end_s: Option<f64>,
}

const PAI_JOB: &str = "pai_job_table: job_name,inst_id,user,status,start_time,end_time";
const PAI_TASK: &str =
    "pai_task_table: job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,gpu_type";

/// PAI 2020: the job table (`job_name,inst_id,user,status,start_time,end_time`, where a job's
/// `start_time` is its submission) joined by job name with the task table, whose tasks give the GPUs
/// (`inst_num * plan_gpu / 100`, rounded up: a fraction of a GPU takes one here), cores (`plan_cpu` is
/// percent of a core), memory (`plan_mem`, GB) and the run time (first task start to last task end).
/// The tables ship without headers; a header row, if present, is skipped.
pub(super) fn read_pai(files: &[PathBuf], sink: &mut Sink) -> Result<(), InputError> {
    let mut jobs = Vec::new();
    let mut tasks = Vec::new();
    for f in files {
        match pai_columns(f)? {
            6 => jobs.push(f),
            10 => tasks.push(f),
            n => {
                return Err(InputError::new(
                    format!("{}, line 1", f.display()),
                    format!("has {n} columns; PAI's job table has 6 ({PAI_JOB}) and its task table 10 ({PAI_TASK})"),
                ))
            }
        }
    }
    let (Some(job_file), Some(task_file)) = (jobs.first(), tasks.first()) else {
        return Err(InputError::setting(
            Setting::TraceFiles,
            format!("the pai format needs both tables: {PAI_JOB}; {PAI_TASK}"),
        ));
    };
    let mut by_job: HashMap<String, PaiTasks> = HashMap::new();
    open(task_file, b',', false)?.each(|rec, row| {
        if row.line == 1 && rec.get(0) == Some("job_name") {
            return Ok(());
        }
        let n = |at, field| row.num(rec, at, field).map(|x| x.unwrap_or(0.0));
        let inst = n(2, "inst_num")?;
        let t = by_job
            .entry(row.get(rec, 0, "job_name")?.to_string())
            .or_default();
        t.gpus += inst * n(8, "plan_gpu")? / 100.0;
        t.cpus += inst * n(6, "plan_cpu")? / 100.0;
        t.mem_gb += inst * n(7, "plan_mem")?;
        if let Some(s) = row.time(rec, 4, "start_time")? {
            t.start_s = Some(t.start_s.map_or(s, |x: f64| x.min(s)));
        }
        if let Some(e) = row.time(rec, 5, "end_time")? {
            t.end_s = Some(t.end_s.map_or(e, |x: f64| x.max(e)));
        }
        Ok(())
    })?;
    open(job_file, b',', false)?.each(|rec, row| {
        if row.line == 1 && rec.get(0) == Some("job_name") {
            return Ok(());
        }
        let name = row.get(rec, 0, "job_name")?;
        let Some(t) = by_job.get(name) else {
            sink.skip("no task in the task table");
            return Ok(());
        };
        let Some(submit_s) = row.time(rec, 4, "start_time")? else {
            sink.skip("no submission time");
            return Ok(());
        };
        let end = row.time(rec, 5, "end_time")?;
        let run_s = match (t.start_s, t.end_s) {
            (Some(s), Some(e)) if e >= s => e - s,
            _ => run_time(row, None, Some(submit_s), end)?,
        };
        sink.offer(RawJob {
            user: text(rec, Some(2)),
            req_cpus: Some(t.cpus),
            req_mem_gb: Some(t.mem_gb),
            ..RawJob::new(
                name.to_string(),
                submit_s,
                run_s,
                (t.gpus - 1e-9).ceil().max(0.0) as u32,
                JobOutcome::from_word(row.get(rec, 3, "status")?),
            )
        });
        Ok(())
    })
}

/// Columns in the first row of a header-less PAI table.
fn pai_columns(path: &Path) -> Result<usize, InputError> {
    let mut t = open(path, b',', false)?;
    let origin = t.origin.clone();
    match t.rows.next() {
        Some(Ok(rec)) => Ok(rec.len()),
        Some(Err(e)) => Err(csv_error(&origin, e)),
        None => Err(InputError::new(origin, "is empty")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurm_sizes_and_tres() {
        assert_eq!(slurm_mem_gb("1024M"), Some(1.073741824));
        assert_eq!(slurm_mem_gb("1G"), Some(1.073741824));
        assert_eq!(slurm_mem_gb("x"), None);
        let row = Row {
            origin: "f",
            line: 2,
        };
        let t = parse_tres(
            &row,
            "billing=2,cpu=2,gres/gpu:a100=1,gres/gpu:v100=2,mem=4G,node=1",
        )
        .unwrap();
        assert_eq!(t.gpus, Some(3));
        assert_eq!(t.cpus, Some(2.0));
        let e = parse_tres(&row, "cpu").unwrap_err().to_string();
        assert!(e.contains("f, line 2") && e.contains("AllocTRES"), "{e}");
    }
}
