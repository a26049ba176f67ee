//! Result tables of a simulation (per job, per round) as typed columns, written both as CSV for people and
//! spreadsheets and as Parquet for dataframe tools, from one [`Schema`] so the two never disagree. Rows go
//! to CSV one at a time; Parquet is written column after column from batches, so neither needs the whole
//! table in memory ([`super::spool`] keeps it on disk). [`read_csv`] is how the crate reads CSV back
//! (traces, and these tables for the charts).

use parquet::basic::{Compression, LogicalType, Repetition, Type as PhysicalType};
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::errors::ParquetError;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;
use std::fmt::Write as _;
use std::io::{self, Write};
use std::sync::Arc;

/// What a column holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Integers.
    Int,
    /// Floating point, printed in CSV with this many decimals (Parquet keeps every digit).
    Float(usize),
    /// Text.
    Text,
    /// Flags.
    Bool,
}

/// A table's name (the Parquet message's) and its columns in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schema {
    /// Parquet message name; the files are `NAME.csv` and `NAME.parquet`.
    pub name: &'static str,
    /// Column names and kinds.
    pub columns: &'static [(&'static str, Kind)],
}

impl Schema {
    /// The kind of each column.
    pub fn kinds(&self) -> impl Iterator<Item = Kind> + '_ {
        self.columns.iter().map(|(_, k)| *k)
    }
}

/// One value of a row, of its column's [`Kind`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cell<'a> {
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// Text.
    Text(&'a str),
    /// A flag.
    Bool(bool),
}

impl Cell<'_> {
    /// Appends the cell's bytes to `out`: 8 bytes little-endian for a number, 1 for a flag, a 4-byte
    /// length and UTF-8 for text. [`Cell::decode`] reads them back; the spool keeps rows and columns on
    /// disk this way.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match *self {
            Cell::Int(v) => out.extend_from_slice(&v.to_le_bytes()),
            Cell::Float(v) => out.extend_from_slice(&v.to_bits().to_le_bytes()),
            Cell::Bool(v) => out.push(u8::from(v)),
            Cell::Text(s) => {
                let len = u32::try_from(s.len()).expect("a table's text cell is under 4 GiB");
                out.extend_from_slice(&len.to_le_bytes());
                out.extend_from_slice(s.as_bytes());
            }
        }
    }

    /// The cell of `kind` at the front of `bytes`, which then starts after it.
    pub fn decode<'a>(kind: Kind, bytes: &mut &'a [u8]) -> io::Result<Cell<'a>> {
        let mut take = |n: usize| -> io::Result<&'a [u8]> {
            if bytes.len() < n {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "a spooled table row ends early",
                ));
            }
            let (head, rest) = bytes.split_at(n);
            *bytes = rest;
            Ok(head)
        };
        let eight = |b: &[u8]| <[u8; 8]>::try_from(b).expect("8 bytes taken");
        Ok(match kind {
            Kind::Int => Cell::Int(i64::from_le_bytes(eight(take(8)?))),
            Kind::Float(_) => Cell::Float(f64::from_bits(u64::from_le_bytes(eight(take(8)?)))),
            Kind::Bool => Cell::Bool(take(1)?[0] != 0),
            Kind::Text => {
                let len = u32::from_le_bytes(take(4)?.try_into().expect("4 bytes taken"));
                let text = take(len as usize)?;
                Cell::Text(std::str::from_utf8(text).map_err(io::Error::other)?)
            }
        })
    }
}

/// A table as CSV with a header line and LF line ends, one row at a time. Text cells come from profile
/// files (model and class names), which may hold a comma or a quote: those cells are quoted, every other
/// cell is written as it is.
pub struct CsvRows<W: Write> {
    w: csv::Writer<W>,
    kinds: Vec<Kind>,
    /// One buffer per cell, reused from row to row.
    cells: Vec<String>,
}

impl<W: Write> CsvRows<W> {
    /// Starts the table of `schema` in `w` with its header line.
    pub fn new(w: W, schema: &Schema) -> io::Result<CsvRows<W>> {
        let mut w = csv::Writer::from_writer(w);
        w.write_record(schema.columns.iter().map(|(n, _)| n))
            .map_err(csv_io)?;
        Ok(CsvRows {
            w,
            kinds: schema.kinds().collect(),
            cells: vec![String::new(); schema.columns.len()],
        })
    }

    /// Writes one row, its cells in the schema's order.
    pub fn row(&mut self, cells: &[Cell<'_>]) -> io::Result<()> {
        debug_assert_eq!(cells.len(), self.kinds.len());
        for ((buf, cell), kind) in self.cells.iter_mut().zip(cells).zip(&self.kinds) {
            buf.clear();
            let _ = match (*cell, *kind) {
                (Cell::Int(v), _) => write!(buf, "{v}"),
                (Cell::Float(v), Kind::Float(decimals)) => write!(buf, "{v:.decimals$}"),
                (Cell::Float(v), _) => write!(buf, "{v}"),
                (Cell::Text(s), _) => write!(buf, "{s}"),
                (Cell::Bool(v), _) => write!(buf, "{v}"),
            };
        }
        self.w.write_record(&self.cells).map_err(csv_io)
    }

    /// Flushes the rows and hands back the writer.
    pub fn finish(self) -> io::Result<W> {
        self.w
            .into_inner()
            .map_err(|e| io::Error::new(e.error().kind(), e.error().to_string()))
    }
}

fn csv_io(e: csv::Error) -> io::Error {
    match e.into_kind() {
        csv::ErrorKind::Io(e) => e,
        other => io::Error::other(format!("{other:?}")),
    }
}

/// Values of one column, a batch of a Parquet column chunk.
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    /// Integers.
    Int(Vec<i64>),
    /// Floats.
    Float(Vec<f64>),
    /// Text.
    Text(Vec<ByteArray>),
    /// Flags.
    Bool(Vec<bool>),
}

impl Values {
    /// The cells of `kind` encoded back to back in `bytes` ([`Cell::encode`]), as a batch.
    pub fn decode(kind: Kind, mut bytes: &[u8], rows: usize) -> io::Result<Values> {
        let mut values = match kind {
            Kind::Int => Values::Int(Vec::with_capacity(rows)),
            Kind::Float(_) => Values::Float(Vec::with_capacity(rows)),
            Kind::Text => Values::Text(Vec::with_capacity(rows)),
            Kind::Bool => Values::Bool(Vec::with_capacity(rows)),
        };
        for _ in 0..rows {
            match (&mut values, Cell::decode(kind, &mut bytes)?) {
                (Values::Int(v), Cell::Int(x)) => v.push(x),
                (Values::Float(v), Cell::Float(x)) => v.push(x),
                (Values::Text(v), Cell::Text(x)) => v.push(ByteArray::from(x)),
                (Values::Bool(v), Cell::Bool(x)) => v.push(x),
                _ => unreachable!("a cell decodes to its own kind"),
            }
        }
        Ok(values)
    }
}

/// How many values the Parquet writer takes at a time (its default `write_batch_size`): it cuts what it
/// is given into runs of this many and decides page breaks between them, so batches whose lengths are
/// multiples of it (all but the last) give the same bytes as the whole column given at once.
pub const PARQUET_BATCH_ROWS: usize = 1024;

/// Writes `schema`'s table as a Parquet file of one row group (snappy) into `w`, column after column:
/// `column(c, write)` hands column `c`'s values to `write` in row order, in batches of a multiple of
/// [`PARQUET_BATCH_ROWS`] but for the last.
pub fn write_parquet<W: Write + Send>(
    w: W,
    schema: &Schema,
    mut column: impl FnMut(
        usize,
        &mut dyn FnMut(Values) -> Result<(), ParquetError>,
    ) -> Result<(), ParquetError>,
) -> Result<W, ParquetError> {
    let fields = schema
        .columns
        .iter()
        .map(|(name, kind)| {
            let (physical, logical) = match kind {
                Kind::Int => (PhysicalType::INT64, None),
                Kind::Float(_) => (PhysicalType::DOUBLE, None),
                Kind::Text => (PhysicalType::BYTE_ARRAY, Some(LogicalType::String)),
                Kind::Bool => (PhysicalType::BOOLEAN, None),
            };
            Type::primitive_type_builder(name, physical)
                .with_repetition(Repetition::REQUIRED)
                .with_logical_type(logical)
                .build()
                .map(Arc::new)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let message = Type::group_type_builder(schema.name)
        .with_fields(fields)
        .build()?;
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_write_batch_size(PARQUET_BATCH_ROWS)
        // A fixed creator string keeps the same results byte-identical across builds.
        .set_created_by(format!("synergy {}", env!("CARGO_PKG_VERSION")))
        .build();
    let mut writer = SerializedFileWriter::new(w, Arc::new(message), Arc::new(props))?;
    let mut group = writer.next_row_group()?;
    for c in 0..schema.columns.len() {
        let mut col = group
            .next_column()?
            .expect("one column writer per schema field");
        column(c, &mut |values| {
            match values {
                Values::Int(v) => col.typed::<Int64Type>().write_batch(&v, None, None)?,
                Values::Float(v) => col.typed::<DoubleType>().write_batch(&v, None, None)?,
                Values::Text(v) => col.typed::<ByteArrayType>().write_batch(&v, None, None)?,
                Values::Bool(v) => col.typed::<BoolType>().write_batch(&v, None, None)?,
            };
            Ok(())
        })?;
        col.close()?;
    }
    group.close()?;
    writer.into_inner()
}

/// A Parquet error as an I/O error, keeping the kind of an I/O failure underneath (a full disk).
pub fn parquet_io(e: ParquetError) -> io::Error {
    match e {
        ParquetError::External(inner) => match inner.downcast::<io::Error>() {
            Ok(io) => *io,
            Err(other) => io::Error::other(other),
        },
        other => io::Error::other(other),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::format::trace::read_csv;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;

    /// A small table of each kind of column (the spool's tests use it too).
    pub(in crate::sim) const SAMPLE: Schema = Schema {
        name: "jobs",
        columns: &[
            ("id", Kind::Int),
            ("model", Kind::Text),
            ("jct_s", Kind::Float(3)),
            ("in_window", Kind::Bool),
        ],
    };

    fn sample_rows() -> Vec<[Cell<'static>; 4]> {
        vec![
            [
                Cell::Int(3),
                Cell::Text("res18"),
                Cell::Float(1.23456),
                Cell::Bool(true),
            ],
            [
                Cell::Int(7),
                Cell::Text("gnmt"),
                Cell::Float(900.0),
                Cell::Bool(false),
            ],
        ]
    }

    fn csv_of(schema: &Schema, rows: &[impl AsRef<[Cell<'static>]>]) -> String {
        let mut w = CsvRows::new(Vec::new(), schema).unwrap();
        for r in rows {
            w.row(r.as_ref()).unwrap();
        }
        String::from_utf8(w.finish().unwrap()).unwrap()
    }

    /// The sample as Parquet, each column handed over as one batch.
    fn sample_parquet() -> Vec<u8> {
        let rows = sample_rows();
        write_parquet(Vec::new(), &SAMPLE, |c, write| {
            let mut bytes = Vec::new();
            rows.iter().for_each(|r| r[c].encode(&mut bytes));
            write(Values::decode(SAMPLE.columns[c].1, &bytes, rows.len()).unwrap())
        })
        .unwrap()
    }

    #[test]
    fn csv_has_header_and_rounded_cells() {
        assert_eq!(
            csv_of(&SAMPLE, &sample_rows()),
            "id,model,jct_s,in_window\n3,res18,1.235,true\n7,gnmt,900.000,false\n"
        );
    }

    #[test]
    fn csv_quotes_only_cells_that_need_it() {
        const T: Schema = Schema {
            name: "jobs",
            columns: &[("model", Kind::Text), ("id", Kind::Int)],
        };
        let csv = csv_of(
            &T,
            &[
                [Cell::Text("res,18"), Cell::Int(1)],
                [Cell::Text("say \"hi\""), Cell::Int(2)],
            ],
        );
        assert_eq!(csv, "model,id\n\"res,18\",1\n\"say \"\"hi\"\"\",2\n");
        let back = read_csv(&csv, "t.csv").unwrap();
        assert_eq!(back[1].fields, ["res,18", "1"]);
        assert_eq!(back[2].fields, ["say \"hi\"", "2"]);
    }

    #[test]
    fn cells_read_back_as_written_and_a_short_row_is_an_error() {
        let mut bytes = Vec::new();
        for r in sample_rows() {
            r.iter().for_each(|c| c.encode(&mut bytes));
        }
        let mut rest = &bytes[..];
        for r in sample_rows() {
            for (cell, kind) in r.iter().zip(SAMPLE.kinds()) {
                assert_eq!(Cell::decode(kind, &mut rest).unwrap(), *cell);
            }
        }
        assert!(rest.is_empty());
        let mut short = &bytes[..bytes.len() - 1];
        let err = (0..8)
            .find_map(|k| Cell::decode(SAMPLE.columns[k % 4].1, &mut short).err())
            .unwrap();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn parquet_reads_back_with_types_and_full_precision() {
        let mut file = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut file, &sample_parquet()).unwrap();
        let reader = SerializedFileReader::new(file).unwrap();
        assert_eq!(reader.metadata().file_metadata().num_rows(), 2);
        assert_eq!(reader.metadata().num_row_groups(), 1);
        let rows: Vec<_> = reader
            .get_row_iter(None)
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        let first: Vec<_> = rows[0]
            .get_column_iter()
            .map(|(n, f)| (n.clone(), f.clone()))
            .collect();
        assert_eq!(first[0], ("id".to_string(), Field::Long(3)));
        assert_eq!(first[1], ("model".to_string(), Field::Str("res18".into())));
        assert_eq!(first[2], ("jct_s".to_string(), Field::Double(1.23456)));
        assert_eq!(first[3], ("in_window".to_string(), Field::Bool(true)));
    }

    #[test]
    fn same_table_gives_identical_bytes() {
        assert_eq!(sample_parquet(), sample_parquet());
    }
}
