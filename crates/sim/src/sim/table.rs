//! Result tables of a simulation (per job, per round) as typed columns, written both as CSV for people and
//! spreadsheets and as Parquet for dataframe tools, from one definition so the two never disagree; and
//! [`read_csv`], how the crate reads CSV back (traces, and these tables for the charts).

use parquet::basic::{Compression, LogicalType, Repetition, Type as PhysicalType};
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;
use std::sync::Arc;

/// The values of one column.
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    /// Integers.
    Int(Vec<i64>),
    /// Floating point, printed in CSV with the given number of decimals.
    Float(Vec<f64>, usize),
    /// Text.
    Text(Vec<String>),
    /// Flags.
    Bool(Vec<bool>),
}

impl Values {
    fn len(&self) -> usize {
        match self {
            Values::Int(v) => v.len(),
            Values::Float(v, _) => v.len(),
            Values::Text(v) => v.len(),
            Values::Bool(v) => v.len(),
        }
    }

    fn cell(&self, row: usize) -> String {
        match self {
            Values::Int(v) => v[row].to_string(),
            Values::Float(v, decimals) => format!("{:.*}", *decimals, v[row]),
            Values::Text(v) => v[row].clone(),
            Values::Bool(v) => v[row].to_string(),
        }
    }
}

/// A named table of equally long columns.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// Parquet message name.
    pub name: &'static str,
    /// Columns in order.
    pub columns: Vec<(&'static str, Values)>,
}

impl Table {
    /// Rows (the length of the first column).
    pub fn rows(&self) -> usize {
        self.columns.first().map_or(0, |(_, v)| v.len())
    }

    /// The table as CSV with a header line, LF line ends. Text cells come from profile files (model and
    /// class names), which may hold a comma or a quote: those cells are quoted, every other cell is written
    /// as it is.
    pub fn to_csv(&self) -> String {
        let mut w = csv::Writer::from_writer(Vec::new());
        let write = |w: &mut csv::Writer<Vec<u8>>, cells: Vec<String>| {
            w.write_record(&cells).expect("CSV into memory cannot fail")
        };
        write(
            &mut w,
            self.columns.iter().map(|(n, _)| n.to_string()).collect(),
        );
        for row in 0..self.rows() {
            write(
                &mut w,
                self.columns.iter().map(|(_, v)| v.cell(row)).collect(),
            );
        }
        let bytes = w.into_inner().expect("CSV into memory cannot fail");
        String::from_utf8(bytes).expect("CSV of strings is UTF-8")
    }

    /// The table as a Parquet file (one row group, snappy), in memory.
    pub fn to_parquet(&self) -> Result<Vec<u8>, parquet::errors::ParquetError> {
        debug_assert!(self.columns.iter().all(|(_, v)| v.len() == self.rows()));
        let fields = self
            .columns
            .iter()
            .map(|(name, v)| {
                let (physical, logical) = match v {
                    Values::Int(_) => (PhysicalType::INT64, None),
                    Values::Float(..) => (PhysicalType::DOUBLE, None),
                    Values::Text(_) => (PhysicalType::BYTE_ARRAY, Some(LogicalType::String)),
                    Values::Bool(_) => (PhysicalType::BOOLEAN, None),
                };
                Type::primitive_type_builder(name, physical)
                    .with_repetition(Repetition::REQUIRED)
                    .with_logical_type(logical)
                    .build()
                    .map(Arc::new)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let schema = Type::group_type_builder(self.name)
            .with_fields(fields)
            .build()?;
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            // A fixed creator string keeps the same results byte-identical across builds.
            .set_created_by(format!("synergy {}", env!("CARGO_PKG_VERSION")))
            .build();
        let mut buf = Vec::new();
        let mut writer = SerializedFileWriter::new(&mut buf, Arc::new(schema), Arc::new(props))?;
        let mut group = writer.next_row_group()?;
        for (_, values) in &self.columns {
            let mut col = group
                .next_column()?
                .expect("one column writer per schema field");
            match values {
                Values::Int(v) => {
                    col.typed::<Int64Type>().write_batch(v, None, None)?;
                }
                Values::Float(v, _) => {
                    col.typed::<DoubleType>().write_batch(v, None, None)?;
                }
                Values::Text(v) => {
                    let bytes: Vec<ByteArray> =
                        v.iter().map(|s| ByteArray::from(s.as_str())).collect();
                    col.typed::<ByteArrayType>()
                        .write_batch(&bytes, None, None)?;
                }
                Values::Bool(v) => {
                    col.typed::<BoolType>().write_batch(v, None, None)?;
                }
            }
            col.close()?;
        }
        group.close()?;
        writer.close()?;
        Ok(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::trace::read_csv;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;

    fn sample() -> Table {
        Table {
            name: "jobs",
            columns: vec![
                ("id", Values::Int(vec![3, 7])),
                ("model", Values::Text(vec!["res18".into(), "gnmt".into()])),
                ("jct_s", Values::Float(vec![1.23456, 900.0], 3)),
                ("in_window", Values::Bool(vec![true, false])),
            ],
        }
    }

    #[test]
    fn csv_has_header_and_rounded_cells() {
        assert_eq!(
            sample().to_csv(),
            "id,model,jct_s,in_window\n3,res18,1.235,true\n7,gnmt,900.000,false\n"
        );
    }

    #[test]
    fn csv_quotes_only_cells_that_need_it() {
        let t = Table {
            name: "jobs",
            columns: vec![
                (
                    "model",
                    Values::Text(vec!["res,18".into(), "say \"hi\"".into()]),
                ),
                ("id", Values::Int(vec![1, 2])),
            ],
        };
        let csv = t.to_csv();
        assert_eq!(csv, "model,id\n\"res,18\",1\n\"say \"\"hi\"\"\",2\n");
        let back = read_csv(&csv, "t.csv").unwrap();
        assert_eq!(back[1].fields, ["res,18", "1"]);
        assert_eq!(back[2].fields, ["say \"hi\"", "2"]);
    }

    #[test]
    fn parquet_reads_back_with_types_and_full_precision() {
        let mut file = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut file, &sample().to_parquet().unwrap()).unwrap();
        let reader = SerializedFileReader::new(file).unwrap();
        assert_eq!(reader.metadata().file_metadata().num_rows(), 2);
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
        assert_eq!(
            sample().to_parquet().unwrap(),
            sample().to_parquet().unwrap()
        );
    }
}
