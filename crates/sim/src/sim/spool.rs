//! Writing a run's tables as the run goes, in memory bounded by a chunk rather than by the run's length
//! (docs/architecture.md §5.1, "Cost of a round"). [`TableSpool`] takes rows in their final order: each
//! goes to the CSV file at once, and its cells wait, column by column, in a chunk of [`FRAME_ROWS`] rows
//! that moves to an unnamed temporary file when full, to be read back one column at a time into the
//! Parquet file. [`SortedSpool`] takes rows in any order: it sorts chunks of them by their first column
//! (the job id) and keeps each as a sorted run on disk, then merges the runs into a [`TableSpool`].
//!
//! Temporary files are unnamed (`O_TMPFILE`) in the directory being written, so they take the output's
//! file system and never its memory (as `/tmp` on tmpfs would), and they vanish with the process however
//! it ends.

use super::table::{parquet_io, write_parquet, Cell, CsvRows, Kind, Schema, Values};
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, Write};
use std::path::{Path, PathBuf};

/// Rows of a [`TableSpool`]'s chunk: the Parquet writer's batch size times 64, so that the chunks read
/// back give the bytes of a column written whole ([`super::table::PARQUET_BATCH_ROWS`]). At the per-job
/// table's ~90 bytes a row, about 6 MB.
pub const FRAME_ROWS: usize = 64 * super::table::PARQUET_BATCH_ROWS;

/// Bytes of rows a [`SortedSpool`] sorts in memory before it writes them out as a run.
pub const RUN_BYTES: usize = 8 << 20;

/// An unnamed temporary file in `dir`.
fn scratch(dir: &Path) -> io::Result<File> {
    tempfile::tempfile_in(dir).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("creating a temporary file in {}: {e}", dir.display()),
        )
    })
}

/// `file`, written through `w`, flushed and rewound for reading.
fn rewound(w: BufWriter<File>) -> io::Result<File> {
    let mut file = w.into_inner().map_err(|e| e.into_error())?;
    file.rewind()?;
    Ok(file)
}

/// A table written as its rows come, in their final order: `NAME.csv` at once, `NAME.parquet` at
/// [`TableSpool::finish`].
pub struct TableSpool {
    schema: Schema,
    dir: PathBuf,
    csv: CsvRows<BufWriter<File>>,
    /// The chunk's cells, column by column, encoded ([`Cell::encode`]).
    frame: Vec<Vec<u8>>,
    frame_rows: usize,
    /// Rows per chunk.
    capacity: usize,
    /// Full chunks, per column: each chunk is its byte length (8 bytes) then its cells.
    spilled: Option<Vec<BufWriter<File>>>,
    spilled_frames: usize,
}

impl TableSpool {
    /// Starts `schema`'s table in `dir` (which exists), keeping [`FRAME_ROWS`] rows in memory.
    pub fn create(dir: &Path, schema: Schema) -> io::Result<TableSpool> {
        TableSpool::with_frame_rows(dir, schema, FRAME_ROWS)
    }

    /// As [`TableSpool::create`], with `rows` rows per chunk (a multiple of the Parquet batch size).
    pub fn with_frame_rows(dir: &Path, schema: Schema, rows: usize) -> io::Result<TableSpool> {
        assert!(rows > 0 && rows % super::table::PARQUET_BATCH_ROWS == 0);
        let path = dir.join(format!("{}.csv", schema.name));
        let file = File::create(&path).map_err(|e| in_file(&path, e))?;
        Ok(TableSpool {
            schema,
            dir: dir.to_path_buf(),
            csv: CsvRows::new(BufWriter::new(file), &schema).map_err(|e| in_file(&path, e))?,
            frame: vec![Vec::new(); schema.columns.len()],
            frame_rows: 0,
            capacity: rows,
            spilled: None,
            spilled_frames: 0,
        })
    }

    fn csv_path(&self) -> PathBuf {
        self.dir.join(format!("{}.csv", self.schema.name))
    }

    fn parquet_path(&self) -> PathBuf {
        self.dir.join(format!("{}.parquet", self.schema.name))
    }

    /// Adds a row, its cells in the schema's order.
    pub fn push(&mut self, cells: &[Cell<'_>]) -> io::Result<()> {
        self.csv
            .row(cells)
            .map_err(|e| in_file(&self.csv_path(), e))?;
        for (bytes, cell) in self.frame.iter_mut().zip(cells) {
            cell.encode(bytes);
        }
        self.frame_rows += 1;
        if self.frame_rows == self.capacity {
            self.spill().map_err(|e| self.spilling(e))?;
        }
        Ok(())
    }

    fn spilling(&self, e: io::Error) -> io::Error {
        on_disk("keeping", self.schema.name, &self.dir, e)
    }

    /// Moves the chunk to the column files.
    fn spill(&mut self) -> io::Result<()> {
        if self.spilled.is_none() {
            let files = (0..self.frame.len())
                .map(|_| scratch(&self.dir).map(|f| BufWriter::with_capacity(1 << 16, f)))
                .collect::<io::Result<Vec<_>>>()?;
            self.spilled = Some(files);
        }
        let files = self.spilled.as_mut().expect("made above");
        for (w, bytes) in files.iter_mut().zip(&mut self.frame) {
            w.write_all(&(bytes.len() as u64).to_le_bytes())?;
            w.write_all(bytes)?;
            bytes.clear();
        }
        self.spilled_frames += 1;
        self.frame_rows = 0;
        Ok(())
    }

    /// Finishes the CSV file and writes the Parquet file, both synced.
    pub fn finish(self) -> io::Result<()> {
        let (csv_path, parquet_path) = (self.csv_path(), self.parquet_path());
        let (name, dir) = (self.schema.name, self.dir.clone());
        let spilling = |e| on_disk("keeping", name, &dir, e);
        let TableSpool {
            schema,
            csv,
            frame,
            frame_rows: tail_rows,
            capacity,
            spilled,
            spilled_frames: frames,
            ..
        } = self;
        synced(csv.finish(), &csv_path)?;
        let mut columns = spilled
            .map(|files| {
                files
                    .into_iter()
                    .map(|w| rewound(w).map(BufReader::new))
                    .collect::<io::Result<Vec<_>>>()
            })
            .transpose()
            .map_err(spilling)?;
        let out = File::create(&parquet_path).map_err(|e| in_file(&parquet_path, e))?;
        let out = write_parquet(BufWriter::new(out), &schema, |c, write| {
            let kind = schema.columns[c].1;
            if let Some(columns) = &mut columns {
                let mut bytes = Vec::new();
                for _ in 0..frames {
                    read_frame(&mut columns[c], &mut bytes)?;
                    write(Values::decode(kind, &bytes, capacity)?)?;
                }
            }
            if tail_rows > 0 || frames == 0 {
                write(Values::decode(kind, &frame[c], tail_rows)?)?;
            }
            Ok(())
        })
        .map_err(|e| in_file(&parquet_path, parquet_io(e)))?;
        synced(Ok(out), &parquet_path)
    }
}

/// Syncs the file behind a finished writer: the staged directory it sits in is renamed into place once
/// every file is on disk.
fn synced(w: io::Result<BufWriter<File>>, path: &Path) -> io::Result<()> {
    let file = w
        .and_then(|w| w.into_inner().map_err(|e| e.into_error()))
        .map_err(|e| in_file(path, e))?;
    file.sync_all().map_err(|e| in_file(path, e))
}

/// The next chunk of a column file (its length, then its bytes) into `bytes`.
fn read_frame(r: &mut impl Read, bytes: &mut Vec<u8>) -> io::Result<()> {
    let mut len = [0u8; 8];
    r.read_exact(&mut len)?;
    bytes.resize(u64::from_le_bytes(len) as usize, 0);
    r.read_exact(bytes)
}

/// A failure to keep a table's rows (`verb`: keeping, sorting) in temporary files in `dir`.
fn on_disk(verb: &str, table: &str, dir: &Path, e: io::Error) -> io::Error {
    io::Error::new(
        e.kind(),
        format!(
            "{verb} the {table} table's rows in temporary files in {}: {e}",
            dir.display()
        ),
    )
}

fn in_file(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("writing {}: {e}", path.display()))
}

/// Rows taken in any order and written sorted by their first column, an integer (ties in the order they
/// came), through sorted runs on disk and a merge.
pub struct SortedSpool {
    schema: Schema,
    dir: PathBuf,
    /// Rows of the current run, encoded back to back.
    arena: Vec<u8>,
    /// Per row of the arena: its key, where it starts and ends.
    index: Vec<(i64, usize, usize)>,
    run_bytes: usize,
    /// Runs written: each row is its length (4 bytes) then its cells.
    runs: Vec<File>,
}

impl SortedSpool {
    /// Starts sorting rows of `schema`, whose first column is an integer, keeping runs in `dir`.
    pub fn new(dir: &Path, schema: Schema) -> SortedSpool {
        SortedSpool::with_run_bytes(dir, schema, RUN_BYTES)
    }

    /// As [`SortedSpool::new`], sorting about `bytes` bytes of rows at a time.
    pub fn with_run_bytes(dir: &Path, schema: Schema, bytes: usize) -> SortedSpool {
        assert_eq!(schema.columns.first().map(|c| c.1), Some(Kind::Int));
        SortedSpool {
            schema,
            dir: dir.to_path_buf(),
            arena: Vec::new(),
            index: Vec::new(),
            run_bytes: bytes,
            runs: Vec::new(),
        }
    }

    fn spilling(&self, e: io::Error) -> io::Error {
        on_disk("sorting", self.schema.name, &self.dir, e)
    }

    /// Adds a row, its cells in the schema's order.
    pub fn push(&mut self, cells: &[Cell<'_>]) -> io::Result<()> {
        let Some(&Cell::Int(key)) = cells.first() else {
            unreachable!("the first cell is the integer key");
        };
        if self.arena.is_empty() {
            self.arena.reserve_exact(self.run_bytes + 1024);
        }
        let start = self.arena.len();
        cells.iter().for_each(|c| c.encode(&mut self.arena));
        self.index.push((key, start, self.arena.len()));
        if self.arena.len() >= self.run_bytes {
            self.write_run().map_err(|e| self.spilling(e))?;
        }
        Ok(())
    }

    /// Sorts the rows in memory and writes them out as a run.
    fn write_run(&mut self) -> io::Result<()> {
        // Stable: rows with one key keep the order they came in.
        self.index.sort_by_key(|e| e.0);
        let mut w = BufWriter::with_capacity(1 << 16, scratch(&self.dir)?);
        for &(_, a, b) in &self.index {
            w.write_all(&((b - a) as u32).to_le_bytes())?;
            w.write_all(&self.arena[a..b])?;
        }
        self.runs.push(rewound(w)?);
        self.arena.clear();
        self.index.clear();
        Ok(())
    }

    /// Writes every row, sorted, into `out`.
    pub fn finish(mut self, out: &mut TableSpool) -> io::Result<()> {
        let kinds: Vec<Kind> = self.schema.kinds().collect();
        if self.runs.is_empty() {
            self.index.sort_by_key(|e| e.0);
            for &(_, a, b) in &self.index {
                out.push(&decode_row(&kinds, &self.arena[a..b])?)?;
            }
            return Ok(());
        }
        if !self.index.is_empty() {
            self.write_run().map_err(|e| self.spilling(e))?;
        }
        self.arena = Vec::new();
        self.index = Vec::new();
        let mut runs = Vec::with_capacity(self.runs.len());
        // Smallest key first; of equal keys, the earlier run's (rows that came first).
        let mut heads = BinaryHeap::new();
        for (k, file) in std::mem::take(&mut self.runs).into_iter().enumerate() {
            let mut run = Run {
                r: BufReader::with_capacity(1 << 16, file),
                row: Vec::new(),
            };
            if let Some(key) = run.advance().map_err(|e| self.spilling(e))? {
                heads.push(std::cmp::Reverse((key, k)));
            }
            runs.push(run);
        }
        while let Some(std::cmp::Reverse((_, k))) = heads.pop() {
            let run = &mut runs[k];
            let cells = decode_row(&kinds, &run.row).map_err(|e| self.spilling(e))?;
            out.push(&cells)?;
            if let Some(key) = run.advance().map_err(|e| self.spilling(e))? {
                heads.push(std::cmp::Reverse((key, k)));
            }
        }
        Ok(())
    }
}

/// A sorted run being merged: its reader and its current row.
struct Run {
    r: BufReader<File>,
    row: Vec<u8>,
}

impl Run {
    /// Reads the next row; its key, or None at the run's end.
    fn advance(&mut self) -> io::Result<Option<i64>> {
        let mut len = [0u8; 4];
        match self.r.read_exact(&mut len) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e),
        }
        self.row.resize(u32::from_le_bytes(len) as usize, 0);
        self.r.read_exact(&mut self.row)?;
        match Cell::decode(Kind::Int, &mut &self.row[..])? {
            Cell::Int(key) => Ok(Some(key)),
            _ => unreachable!("an integer decodes as one"),
        }
    }
}

/// The cells of one encoded row.
fn decode_row<'a>(kinds: &[Kind], mut bytes: &'a [u8]) -> io::Result<Vec<Cell<'a>>> {
    kinds
        .iter()
        .map(|&kind| Cell::decode(kind, &mut bytes))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::RowAccessor;

    use crate::sim::table::tests::SAMPLE as T;

    /// Rows in a scrambled order with a repeated key, as jobs finish out of id order.
    fn rows() -> Vec<(i64, String, f64, bool)> {
        (0..5000i64)
            .map(|i| {
                let id = (i * 7919) % 4999;
                let name = ["res18", "gnmt, big", "deepspeech"][(i % 3) as usize];
                (id, name.to_string(), i as f64 / 7.0, i % 5 == 0)
            })
            .collect()
    }

    /// The table written through a spool of the given chunk sizes; (csv, parquet) bytes.
    fn written(frame_rows: usize, run_bytes: usize) -> (Vec<u8>, Vec<u8>, usize) {
        let d = tempfile::tempdir().unwrap();
        let mut sorted = SortedSpool::with_run_bytes(d.path(), T, run_bytes);
        for (id, name, jct, late) in rows() {
            sorted
                .push(&[
                    Cell::Int(id),
                    Cell::Text(&name),
                    Cell::Float(jct),
                    Cell::Bool(late),
                ])
                .unwrap();
        }
        let runs = sorted.runs.len();
        let mut table = TableSpool::with_frame_rows(d.path(), T, frame_rows).unwrap();
        sorted.finish(&mut table).unwrap();
        table.finish().unwrap();
        let names: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 2, "only the two tables are left: {names:?}");
        (
            std::fs::read(d.path().join("jobs.csv")).unwrap(),
            std::fs::read(d.path().join("jobs.parquet")).unwrap(),
            runs,
        )
    }

    #[test]
    fn spilled_and_merged_tables_are_the_bytes_of_one_sorted_in_memory() {
        let (csv, parquet, runs) = written(FRAME_ROWS, RUN_BYTES);
        assert_eq!(runs, 0, "this table fits one chunk");
        let (csv_small, parquet_small, runs_small) = written(1024, 4096);
        assert!(runs_small > 10, "{runs_small} runs");
        assert_eq!(csv, csv_small);
        assert_eq!(parquet, parquet_small);

        // Sorted by id, ties in the order the rows came.
        let mut expected = rows();
        expected.sort_by_key(|r| r.0);
        let text = String::from_utf8(csv).unwrap();
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some("id,model,jct_s,in_window"));
        for (line, (id, name, jct, late)) in lines.zip(&expected) {
            let name = if name.contains(',') {
                format!("\"{name}\"")
            } else {
                name.clone()
            };
            assert_eq!(line, format!("{id},{name},{jct:.3},{late}"));
        }
        let file = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut &file, &parquet).unwrap();
        let reader = SerializedFileReader::new(file).unwrap();
        assert_eq!(reader.metadata().num_row_groups(), 1);
        let ids: Vec<i64> = reader
            .get_row_iter(None)
            .unwrap()
            .map(|r| r.unwrap().get_long(0).unwrap())
            .collect();
        assert_eq!(ids, expected.iter().map(|r| r.0).collect::<Vec<_>>());
    }

    #[test]
    fn an_empty_table_has_its_header_and_a_readable_parquet_file() {
        let d = tempfile::tempdir().unwrap();
        let mut table = TableSpool::create(d.path(), T).unwrap();
        SortedSpool::new(d.path(), T).finish(&mut table).unwrap();
        table.finish().unwrap();
        assert_eq!(
            std::fs::read_to_string(d.path().join("jobs.csv")).unwrap(),
            "id,model,jct_s,in_window\n"
        );
        let f = File::open(d.path().join("jobs.parquet")).unwrap();
        assert_eq!(
            SerializedFileReader::new(f)
                .unwrap()
                .metadata()
                .file_metadata()
                .num_rows(),
            0
        );
    }
}
