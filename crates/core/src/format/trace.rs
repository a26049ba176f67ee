//! The simulator's trace CSV: `id,model,arrival_s,iters,gpus`, the reference artifact's five columns,
//! which `synergy simulate --trace` reads; `synergy trace import` writes them followed by the source's id,
//! run time and requests (docs/traces.md). A reader ignores columns it does not know, so a later version
//! may add columns but never rename or drop one. Also the CSV reader the simulator's own tables are read
//! back with.

use crate::error::InputError;
use serde::Serialize;

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
    // The crate strips the byte-order mark itself, even without its own header handling.
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(text.as_bytes());
    // Line numbers are counted here: the crate's own count leaves out the blank lines it skips and counts
    // a CRLF line end as no line at all. Its byte position of a record is where the previous record's
    // line end began, so the record itself starts after the line-end bytes that follow (a record never
    // starts with one: an empty line is no record, a line break in a field is inside quotes).
    let bytes = text.as_bytes();
    let (mut line, mut counted) = (1u64, 0usize);
    let mut line_at = |byte: u64| {
        let mut start = (byte as usize).clamp(counted, bytes.len());
        while start < bytes.len() && matches!(bytes[start], b'\r' | b'\n') {
            start += 1;
        }
        line += bytes[counted..start]
            .iter()
            .filter(|&&b| b == b'\n')
            .count() as u64;
        counted = start;
        line
    };
    let mut out = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| {
            let at = match e.position() {
                Some(p) => format!("{origin}, line {}", line_at(p.byte())),
                None => origin.to_string(),
            };
            InputError::new(at, format!("is not readable as CSV: {e}"))
        })?;
        let fields: Vec<String> = record.iter().map(|f| f.trim().to_string()).collect();
        // A line of spaces only: as blank as an empty line (which the reader skips itself).
        if fields.len() == 1 && fields[0].is_empty() {
            continue;
        }
        let line = line_at(record.position().map_or(0, |p| p.byte()));
        out.push(CsvRecord { line, fields });
    }
    Ok(out)
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
    parse_records(read_csv(text, origin)?, origin, catalog, max_gpus)
}

/// [`parse_csv`] of records [`read_csv`] has read (the fuzz tests check both halves of one reading).
pub fn parse_records(
    records: Vec<CsvRecord>,
    origin: &str,
    catalog: &dyn ModelNames,
    max_gpus: u64,
) -> Result<Vec<TraceJob>, InputError> {
    let mut records = records.into_iter();
    let Some(header) = records.next() else {
        return Err(InputError::new(
            origin,
            "the trace is empty (expected a header `id,model,arrival_s,iters,gpus` and jobs)",
        ));
    };
    let cols = &header.fields;
    let want = ["id", "model", "arrival_s", "iters", "gpus"];
    let mut at = [0usize; 5];
    for (k, w) in want.iter().enumerate() {
        at[k] = cols.iter().position(|c| c == w).ok_or_else(|| {
            InputError::new(
                format!("{origin}, line {}", header.line),
                format!("the header lacks column `{w}` (expected id,model,arrival_s,iters,gpus)"),
            )
        })?;
    }
    let mut jobs = Vec::new();
    let mut ids = std::collections::HashSet::new();
    for record in records {
        let here = format!("{origin}, line {}", record.line);
        let f: Vec<&str> = record.fields.iter().map(String::as_str).collect();
        if f.len() != cols.len() {
            return Err(InputError::new(
                here,
                format!("has {} fields, the header has {}", f.len(), cols.len()),
            ));
        }
        let int = |k: usize, min: u64| -> Result<u64, InputError> {
            let v = f[at[k]];
            match v.parse::<u64>() {
                Ok(x) if x >= min => Ok(x),
                _ => Err(InputError::field(
                    here.clone(),
                    want[k],
                    format!("`{v}` is not an integer of at least {min}"),
                )),
            }
        };
        let id = int(0, 0)?;
        if !ids.insert(id) {
            return Err(InputError::field(
                here,
                "id",
                format!("job id {id} appears twice"),
            ));
        }
        let model_name = f[at[1]];
        let model = catalog.index(model_name).ok_or_else(|| {
            InputError::field(
                here.clone(),
                "model",
                format!(
                    "unknown model `{model_name}`; known: {} (add its profile to the profile directory)",
                    catalog.names()
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
        if gpus > max_gpus {
            return Err(InputError::field(
                here,
                "gpus",
                format!("{gpus} GPUs is wider than the cluster ({max_gpus} GPUs)"),
            ));
        }
        jobs.push(TraceJob {
            id,
            model: model as u32,
            arrival_s,
            iters,
            gpus: gpus as u32,
        });
    }
    if jobs.is_empty() {
        return Err(InputError::new(
            origin,
            "the trace has a header but no jobs",
        ));
    }
    // Arrival order with ties by id: the simulator admits jobs in this order.
    jobs.sort_by(|a, b| a.arrival_s.total_cmp(&b.arrival_s).then(a.id.cmp(&b.id)));
    Ok(jobs)
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
}
