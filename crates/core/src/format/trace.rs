//! The simulator's trace CSV: `id,model,arrival_s,iters,gpus`, the reference artifact's five columns,
//! which `synergy simulate --trace` reads; `synergy trace import` writes them followed by the source's id,
//! run time and requests (docs/traces.md). A reader ignores columns it does not know, so a later version
//! may add columns but never rename or drop one. Also the CSV reader the simulator's own tables are read
//! back with.

use crate::error::InputError;
use serde::Serialize;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::Read;
use std::rc::Rc;

/// The models a trace may name: a row's model becomes its index among them.
pub trait ModelNames {
    /// The index of the model called `name`.
    fn index(&self, name: &str) -> Option<usize>;
    /// Every known name, for an error message.
    fn names(&self) -> String;
}

/// One record of a CSV file: the line it starts on (1-based, as an editor counts) and its fields, trimmed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsvRecord {
    /// Line of the file where the record starts.
    pub line: u64,
    /// Fields, with surrounding spaces trimmed (inside quotes too).
    pub fields: Vec<String>,
}

/// Reads CSV text (a header is just the first record) through the csv crate: quoted fields (holding
/// commas, doubled quotes or line breaks), LF or CRLF line ends, and a UTF-8 byte-order mark before the
/// first record, which spreadsheets write. As in RFC 4180, a quote opens a quoted field only as the
/// field's first character; spaces around unquoted fields are trimmed. Blank lines are skipped. Records
/// may differ in length: callers compare them with their header, so that the error names the line.
/// `origin` names the file in errors.
pub fn read_csv(text: &str, origin: &str) -> Result<Vec<CsvRecord>, InputError> {
    CsvRecords::new(text.as_bytes(), origin).collect()
}

/// [`read_csv`] as it reads: the records of `reader` one at a time, so a file of millions of rows is
/// never held whole. Ends after the first error.
pub struct CsvRecords<R: Read> {
    reader: csv::Reader<LineEnds<R>>,
    ends: Rc<RefCell<VecDeque<(u64, bool)>>>,
    origin: String,
    /// The line reached and the byte it was counted to.
    line: u64,
    counted: u64,
    failed: bool,
}

/// A reader that notes where each `\r` and `\n` it passes on lies (and which it is), for
/// [`CsvRecords`] to count lines by: only those not yet counted are kept, at most a buffer's worth.
struct LineEnds<R> {
    inner: R,
    offset: u64,
    ends: Rc<RefCell<VecDeque<(u64, bool)>>>,
}

impl<R: Read> Read for LineEnds<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let mut ends = self.ends.borrow_mut();
        for (i, b) in buf[..n].iter().enumerate() {
            if matches!(b, b'\r' | b'\n') {
                ends.push_back((self.offset + i as u64, *b == b'\n'));
            }
        }
        self.offset += n as u64;
        Ok(n)
    }
}

impl<R: Read> CsvRecords<R> {
    /// The records of `reader`; `origin` names it in errors.
    pub fn new(reader: R, origin: &str) -> CsvRecords<R> {
        let ends = Rc::new(RefCell::new(VecDeque::new()));
        let reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .from_reader(LineEnds {
                inner: reader,
                offset: 0,
                ends: ends.clone(),
            });
        CsvRecords {
            reader,
            ends,
            origin: origin.to_string(),
            line: 1,
            counted: 0,
            failed: false,
        }
    }

    /// The line a record at `byte` starts on. Lines are counted here: the crate's own count leaves out
    /// the blank lines it skips and counts a CRLF line end as no line at all. Its byte position of a
    /// record is where the previous record's line end began, so the record itself starts after the
    /// line-end bytes that follow (a record never starts with one: an empty line is no record, a line
    /// break in a field is inside quotes).
    fn line_at(&mut self, byte: u64) -> u64 {
        let mut start = byte.max(self.counted);
        let mut ends = self.ends.borrow_mut();
        while let Some(&(at, newline)) = ends.front() {
            if at > start {
                break;
            }
            if at == start {
                start += 1;
            }
            self.line += u64::from(newline);
            ends.pop_front();
        }
        self.counted = start;
        self.line
    }
}

impl<R: Read> Iterator for CsvRecords<R> {
    type Item = Result<CsvRecord, InputError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let mut record = csv::StringRecord::new();
        loop {
            match self.reader.read_record(&mut record) {
                Err(e) => {
                    self.failed = true;
                    let at = match e.position() {
                        Some(p) => {
                            let line = self.line_at(p.byte());
                            format!("{}, line {line}", self.origin)
                        }
                        None => self.origin.clone(),
                    };
                    return Some(Err(InputError::new(
                        at,
                        format!("is not readable as CSV: {e}"),
                    )));
                }
                Ok(false) => return None,
                Ok(true) => {}
            }
            let mut fields: Vec<String> = record.iter().map(|f| f.trim().to_string()).collect();
            // The crate strips a byte-order mark only when its first read holds all of it; a reader
            // that hands over fewer bytes leaves it on the first field.
            if self.line == 1 && self.counted == 0 {
                if let Some(first) = fields.first_mut() {
                    if let Some(rest) = first.strip_prefix('\u{feff}') {
                        *first = rest.trim_start().to_string();
                    }
                }
            }
            // A line of spaces only: as blank as an empty line (which the reader skips itself).
            if fields.len() == 1 && fields[0].is_empty() {
                continue;
            }
            let line = self.line_at(record.position().map_or(0, |p| p.byte()));
            return Some(Ok(CsvRecord { line, fields }));
        }
    }
}

/// One job of a trace.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TraceJob {
    /// Job id (window bounds refer to it).
    pub id: u64,
    /// Index of its model in the catalog.
    pub model: u32,
    /// Arrival, seconds from the start.
    pub arrival_s: f64,
    /// Work, iterations.
    pub iters: u64,
    /// GPUs.
    pub gpus: u32,
}

/// Parses a CSV trace; `origin` names the file. Fields may be quoted, lines may end in CRLF and a
/// byte-order mark may precede the header (a trace saved by a spreadsheet). Errors name the line and the
/// field.
pub fn parse_csv(
    text: &str,
    origin: &str,
    catalog: &dyn ModelNames,
    max_gpus: u64,
) -> Result<Vec<TraceJob>, InputError> {
    collect_jobs(
        TraceRows::new(
            CsvRecords::new(text.as_bytes(), origin),
            origin,
            catalog,
            max_gpus,
        )?,
        origin,
    )
}

/// [`parse_csv`] of records [`read_csv`] has read (the fuzz tests check both halves of one reading).
pub fn parse_records(
    records: Vec<CsvRecord>,
    origin: &str,
    catalog: &dyn ModelNames,
    max_gpus: u64,
) -> Result<Vec<TraceJob>, InputError> {
    collect_jobs(
        TraceRows::new(records.into_iter().map(Ok), origin, catalog, max_gpus)?,
        origin,
    )
}

/// Every job of `rows`, each id once, in arrival order with ties by id: the order the simulator admits
/// them in.
pub fn collect_jobs(
    rows: impl Iterator<Item = Result<(u64, TraceJob), InputError>>,
    origin: &str,
) -> Result<Vec<TraceJob>, InputError> {
    let mut ids = JobIds::default();
    let mut jobs = Vec::new();
    for row in rows {
        let (line, job) = row?;
        ids.insert(job.id, origin, line)?;
        jobs.push(job);
    }
    if jobs.is_empty() {
        return Err(no_jobs(origin));
    }
    jobs.sort_by(arrival_order);
    Ok(jobs)
}

/// The order the simulator admits jobs in: by arrival, ties by id.
pub fn arrival_order(a: &TraceJob, b: &TraceJob) -> std::cmp::Ordering {
    a.arrival_s.total_cmp(&b.arrival_s).then(a.id.cmp(&b.id))
}

fn no_jobs(origin: &str) -> InputError {
    InputError::new(origin, "the trace has a header but no jobs")
}

/// The ids of a trace's jobs so far, to refuse one that appears twice: a compressed bitmap, a few bits
/// a job where ids are dense (as `trace import` writes them), so a trace of millions checks in little
/// memory.
#[derive(Debug, Clone, Default)]
pub struct JobIds(roaring::RoaringTreemap);

impl JobIds {
    /// Adds `id`, read at `line` of `origin`; an error if it was there.
    fn insert(&mut self, id: u64, origin: &str, line: u64) -> Result<(), InputError> {
        if self.0.insert(id) {
            return Ok(());
        }
        Err(InputError::field(
            format!("{origin}, line {line}"),
            "id",
            format!("job id {id} appears twice"),
        ))
    }

    /// How many ids lie in `first..=last`.
    pub fn count_in(&self, first: u64, last: u64) -> u64 {
        let below = first.checked_sub(1).map_or(0, |b| self.0.rank(b));
        self.0.rank(last).saturating_sub(below)
    }

    /// How many ids in all.
    pub fn len(&self) -> u64 {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// What a pass over a whole trace found ([`scan`]): every row checked, nothing kept but the ids.
#[derive(Debug, Clone)]
pub struct TraceScan {
    /// Every job's id.
    pub ids: JobIds,
    /// Whether the rows are already in arrival order ([`arrival_order`]), so the simulator can read the
    /// file as it goes instead of holding and sorting it.
    pub in_arrival_order: bool,
}

/// Checks every row of a trace as [`parse_csv`] does (ids once each, at least one job), keeping only the
/// ids and whether the rows are in arrival order.
pub fn scan(
    reader: impl Read,
    origin: &str,
    catalog: &dyn ModelNames,
    max_gpus: u64,
) -> Result<TraceScan, InputError> {
    let mut ids = JobIds::default();
    let mut in_arrival_order = true;
    let mut last: Option<TraceJob> = None;
    for row in TraceRows::new(CsvRecords::new(reader, origin), origin, catalog, max_gpus)? {
        let (line, job) = row?;
        ids.insert(job.id, origin, line)?;
        if last.is_some_and(|l| arrival_order(&l, &job).is_gt()) {
            in_arrival_order = false;
        }
        last = Some(job);
    }
    if ids.is_empty() {
        return Err(no_jobs(origin));
    }
    Ok(TraceScan {
        ids,
        in_arrival_order,
    })
}

/// The jobs of a trace's rows as they are read, each with the line it is on, every field checked; ids
/// appearing twice and the order are the caller's to check ([`parse_csv`], [`scan`]).
pub struct TraceRows<'a, I> {
    records: I,
    origin: String,
    /// Where each of `id,model,arrival_s,iters,gpus` is among the header's columns, and how many it has.
    at: [usize; 5],
    columns: usize,
    catalog: &'a dyn ModelNames,
    max_gpus: u64,
}

/// The columns a trace must have, in the order [`TraceRows`] holds their positions.
const COLUMNS: [&str; 5] = ["id", "model", "arrival_s", "iters", "gpus"];

impl<'a, I: Iterator<Item = Result<CsvRecord, InputError>>> TraceRows<'a, I> {
    /// Reads the header of `records`; `origin` names the file in errors.
    pub fn new(
        mut records: I,
        origin: &str,
        catalog: &'a dyn ModelNames,
        max_gpus: u64,
    ) -> Result<TraceRows<'a, I>, InputError> {
        let Some(header) = records.next().transpose()? else {
            return Err(InputError::new(
                origin,
                "the trace is empty (expected a header `id,model,arrival_s,iters,gpus` and jobs)",
            ));
        };
        let cols = &header.fields;
        let mut at = [0usize; 5];
        for (k, w) in COLUMNS.iter().enumerate() {
            at[k] = cols.iter().position(|c| c == w).ok_or_else(|| {
                InputError::new(
                    format!("{origin}, line {}", header.line),
                    format!(
                        "the header lacks column `{w}` (expected id,model,arrival_s,iters,gpus)"
                    ),
                )
            })?;
        }
        Ok(TraceRows {
            records,
            origin: origin.to_string(),
            at,
            columns: cols.len(),
            catalog,
            max_gpus,
        })
    }

    fn job(&self, record: &CsvRecord) -> Result<TraceJob, InputError> {
        let here = format!("{}, line {}", self.origin, record.line);
        let f: Vec<&str> = record.fields.iter().map(String::as_str).collect();
        if f.len() != self.columns {
            return Err(InputError::new(
                here,
                format!("has {} fields, the header has {}", f.len(), self.columns),
            ));
        }
        let at = self.at;
        let int = |k: usize, min: u64| -> Result<u64, InputError> {
            let v = f[at[k]];
            match v.parse::<u64>() {
                Ok(x) if x >= min => Ok(x),
                _ => Err(InputError::field(
                    here.clone(),
                    COLUMNS[k],
                    format!("`{v}` is not an integer of at least {min}"),
                )),
            }
        };
        let id = int(0, 0)?;
        let model_name = f[at[1]];
        let model = self.catalog.index(model_name).ok_or_else(|| {
            InputError::field(
                here.clone(),
                "model",
                format!(
                    "unknown model `{model_name}`; known: {} (add its profile to the profile directory)",
                    self.catalog.names()
                ),
            )
        })?;
        let a = f[at[2]];
        let arrival_s = match a.parse::<f64>() {
            Ok(x) if crate::range::is_seconds(x) => x,
            _ => {
                return Err(InputError::field(
                    here,
                    "arrival_s",
                    format!("`{a}` is not {}", crate::range::SECONDS),
                ))
            }
        };
        let iters = int(3, 1)?;
        if !crate::range::is_work(iters) {
            return Err(InputError::field(
                here,
                "iters",
                format!("{iters} is not {}", crate::range::WORK),
            ));
        }
        let gpus = int(4, 1)?;
        if gpus > self.max_gpus {
            return Err(InputError::field(
                here,
                "gpus",
                format!(
                    "{gpus} GPUs is wider than the cluster ({} GPUs)",
                    self.max_gpus
                ),
            ));
        }
        Ok(TraceJob {
            id,
            model: model as u32,
            arrival_s,
            iters,
            gpus: gpus as u32,
        })
    }
}

impl<I: Iterator<Item = Result<CsvRecord, InputError>>> Iterator for TraceRows<'_, I> {
    /// The line the row is on, and its job.
    type Item = Result<(u64, TraceJob), InputError>;

    fn next(&mut self) -> Option<Self::Item> {
        let record = match self.records.next()? {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        Some(self.job(&record).map(|job| (record.line, job)))
    }
}

/// One imported job: the simulator's trace row and what the source said of it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ImportedJob {
    /// Id (0, 1, ... in arrival order).
    pub id: u64,
    /// Model (a profile's `workload.name`).
    pub model: String,
    /// Arrival, seconds after the first kept submission (scaled by the load factor).
    pub arrival_s: f64,
    /// Work, iterations.
    pub iters: u64,
    /// GPUs.
    pub gpus: u32,
    /// The trace's own id.
    pub source_id: String,
    /// Run time in the trace, seconds.
    pub duration_s: f64,
    /// Cores the job asked for, where the trace says.
    pub req_cpus: Option<f64>,
    /// Memory the job asked for, decimal GB, where the trace says.
    pub req_mem_gb: Option<f64>,
}

/// The trace CSV of imported jobs: the simulator's five columns, then the source's id, run time and
/// requests (empty where the trace has none).
pub fn to_csv(jobs: &[ImportedJob]) -> Result<Vec<u8>, csv::Error> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "id",
        "model",
        "arrival_s",
        "iters",
        "gpus",
        "source_id",
        "duration_s",
        "req_cpus",
        "req_mem_gb",
    ])?;
    // Millisecond precision: what every source has at most, without float noise in the file.
    let num = |x: f64| ((x * 1000.0).round() / 1000.0).to_string();
    let opt = |x: Option<f64>| x.map(num).unwrap_or_default();
    for j in jobs {
        w.write_record([
            j.id.to_string(),
            j.model.clone(),
            num(j.arrival_s),
            j.iters.to_string(),
            j.gpus.to_string(),
            j.source_id.clone(),
            num(j.duration_s),
            opt(j.req_cpus),
            opt(j.req_mem_gb),
        ])?;
    }
    w.into_inner().map_err(|e| e.into_error().into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_csv_takes_quotes_crlf_and_a_byte_order_mark() {
        let text = "\u{feff}a, b\r\n\r\n1,\"x, \"\"y\"\"\"\r\n  \r\n2,\"two\nlines\"\r\n3\r\n";
        let r = read_csv(text, "t.csv").unwrap();
        let lines: Vec<u64> = r.iter().map(|r| r.line).collect();
        assert_eq!(lines, [1, 3, 5, 7]);
        assert_eq!(r[0].fields, ["a", "b"]);
        assert_eq!(r[1].fields, ["1", "x, \"y\""]);
        assert_eq!(r[2].fields, ["2", "two\nlines"]);
        assert_eq!(r[3].fields, ["3"]);
        assert!(read_csv("", "t.csv").unwrap().is_empty());
    }

    /// A reader that hands over one byte a call: every record boundary and line end falls on a read.
    struct ByteByByte<'a>(&'a [u8]);

    impl Read for ByteByByte<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            match (self.0.split_first(), buf.first_mut()) {
                (Some((b, rest)), Some(out)) => {
                    *out = *b;
                    self.0 = rest;
                    Ok(1)
                }
                _ => Ok(0),
            }
        }
    }

    #[test]
    fn records_read_as_they_come_have_the_lines_of_the_whole_text() {
        let text =
            "\u{feff}a, b\r\n\r\n1,\"x, \"\"y\"\"\"\r\n  \r\n2,\"two\nlines\"\r\n\n\n3\r\n4,\"un";
        let whole: Vec<_> = CsvRecords::new(text.as_bytes(), "t.csv").collect();
        let streamed: Vec<_> = CsvRecords::new(ByteByByte(text.as_bytes()), "t.csv").collect();
        assert_eq!(streamed, whole);
        let lines: Vec<u64> = whole
            .iter()
            .filter_map(|r| r.as_ref().ok())
            .map(|r| r.line)
            .collect();
        assert_eq!(lines, [1, 3, 5, 9, 10]);
    }

    struct Two;

    impl ModelNames for Two {
        fn index(&self, name: &str) -> Option<usize> {
            ["a", "b"].iter().position(|n| *n == name)
        }
        fn names(&self) -> String {
            "a, b".to_string()
        }
    }

    #[test]
    fn a_scan_checks_every_row_and_keeps_the_ids_and_whether_they_arrive_in_order() {
        let scan = |t: &str| super::scan(t.as_bytes(), "t.csv", &Two, 8);
        let ordered = "id,model,arrival_s,iters,gpus\n3,a,0,10,1\n1,b,5,10,2\n2,a,5,10,1\n";
        let s = scan(ordered).unwrap();
        assert!(s.in_arrival_order);
        assert_eq!(
            (s.ids.len(), s.ids.count_in(1, 2), s.ids.count_in(0, 0)),
            (3, 2, 0)
        );
        // The same arrival, ids out of order: not the order the simulator admits them in.
        let s = scan("id,model,arrival_s,iters,gpus\n2,a,5,10,1\n1,b,5,10,2\n").unwrap();
        assert!(!s.in_arrival_order);
        let e = scan("id,model,arrival_s,iters,gpus\n1,a,0,10,1\n1,b,5,10,2\n").unwrap_err();
        assert!(e.to_string().contains("line 3"), "{e}");
        assert!(e.to_string().contains("job id 1 appears twice"), "{e}");
        let e = scan("id,model,arrival_s,iters,gpus\n1,a,0,10,9\n").unwrap_err();
        assert!(e.to_string().contains("wider than the cluster"), "{e}");
        let e = scan("id,model,arrival_s,iters,gpus\n").unwrap_err();
        assert!(e.to_string().contains("no jobs"), "{e}");
    }
}
