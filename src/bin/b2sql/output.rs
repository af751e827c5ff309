//! Running SQL and writing results in the requested format.

use crate::parquet_out::ParquetOut;
use crate::{CliResult, Format, msg};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::prelude::SessionContext;
use serde_json::Value;
use std::io::Write;
use std::path::Path;

/// Runs one statement and streams its batches into `sink`.
pub async fn run_sql(ctx: &SessionContext, sql: &str, sink: &mut Sink) -> CliResult {
    use futures::StreamExt;
    let df = match ctx.sql(sql).await {
        Ok(df) => df,
        Err(e) => return Err(with_left_out_column(ctx, sql, e).await),
    };
    let mut stream = df.execute_stream().await.map_err(msg)?;
    sink.begin(stream.schema())?;
    while let Some(batch) = stream.next().await {
        sink.write(&batch.map_err(msg)?)?;
    }
    sink.end()
}

/// `e`'s message; but when it is a column no table has and a table the statement names
/// left out a computed column of that name, why it did (`b2sql schema` says so too).
async fn with_left_out_column(
    ctx: &SessionContext,
    sql: &str,
    e: datafusion::error::DataFusionError,
) -> String {
    use datafusion::common::SchemaError;
    use datafusion::error::DataFusionError;
    use datafusion_blosc2::provider::computed::OMITTED_KEY;
    let text = msg(&e);
    let DataFusionError::SchemaError(err, _) = e.find_root() else {
        return text;
    };
    let SchemaError::FieldNotFound { field, .. } = err.as_ref() else {
        return text;
    };
    let state = ctx.state();
    let dialect = state.config().options().sql_parser.dialect;
    let Ok(tables) = state
        .sql_to_statement(sql, &dialect)
        .and_then(|stmt| state.resolve_table_references(&stmt))
    else {
        return text;
    };
    for t in tables {
        let Ok(provider) = ctx.table_provider(t.clone()).await else {
            continue;
        };
        let schema = provider.schema();
        let Some(note) = schema.metadata().get(OMITTED_KEY) else {
            continue;
        };
        for line in note.lines() {
            if let Some((name, why)) = line.split_once(": ")
                && name == field.name()
            {
                return format!(
                    "{t} has no column {name}: its computed column {name} is left out: {why}"
                );
            }
        }
    }
    text
}

/// Where results go. Every format but the aligned table streams: a statement's batches
/// are written as they arrive, so memory stays flat however many rows a query returns.
pub struct Sink {
    out: Box<dyn Write + Send>,
    format: Format,
    /// The schema of the statement being written (`None` between statements).
    schema: Option<SchemaRef>,
    /// The statement's batches, for the aligned table, which needs every row to size columns.
    table_rows: Vec<RecordBatch>,
    csv_header_due: bool,
    parquet: Option<ParquetOut<Box<dyn Write + Send>>>,
    ipc: Option<datafusion::arrow::ipc::writer::StreamWriter<Box<dyn Write + Send>>>,
    json_first: bool,
}

impl Sink {
    /// Opens `path` (stdout when `None`).
    pub fn open(path: Option<&Path>, format: Format) -> CliResult<Sink> {
        if format == Format::Parquet
            && path.is_none()
            && std::io::IsTerminal::is_terminal(&std::io::stdout())
        {
            return Err(
                "--format parquet writes binary data: give --output FILE or redirect stdout".into(),
            );
        }
        let out: Box<dyn Write + Send> = match path {
            Some(p) => Box::new(std::io::BufWriter::new(
                std::fs::File::create(p).map_err(|e| format!("{}: {e}", p.display()))?,
            )),
            None => Box::new(std::io::BufWriter::new(std::io::stdout())),
        };
        Ok(Sink {
            out,
            format,
            schema: None,
            table_rows: Vec::new(),
            csv_header_due: false,
            parquet: None,
            ipc: None,
            json_first: true,
        })
    }

    /// Starts a statement whose batches have `schema`. A statement without columns (DDL)
    /// writes nothing; one with columns but no rows still writes its header (table, CSV)
    /// or a valid empty file (Parquet, Arrow).
    pub fn begin(&mut self, schema: SchemaRef) -> CliResult {
        let has_columns = !schema.fields().is_empty();
        self.csv_header_due = self.format == Format::Csv && has_columns;
        if has_columns {
            // The binary writers own the output from their first statement on.
            let mut sink = || std::mem::replace(&mut self.out, Box::new(std::io::sink()));
            match self.format {
                Format::Parquet if self.parquet.is_none() => {
                    let props = datafusion::parquet::file::properties::WriterProperties::default();
                    let w = ParquetOut::try_new(sink(), schema.clone(), props);
                    self.parquet = Some(w.map_err(msg)?);
                }
                Format::Arrow if self.ipc.is_none() => {
                    let w = datafusion::arrow::ipc::writer::StreamWriter::try_new(sink(), &schema);
                    self.ipc = Some(w.map_err(msg)?);
                }
                _ => {}
            }
        }
        self.schema = Some(schema);
        Ok(())
    }

    /// Writes one batch of the current statement.
    pub fn write(&mut self, batch: &RecordBatch) -> CliResult {
        match self.format {
            Format::Table => self.table_rows.push(batch.clone()),
            Format::Csv => {
                if batch.num_columns() > 0 {
                    let mut w = datafusion::arrow::csv::WriterBuilder::new()
                        .with_header(std::mem::take(&mut self.csv_header_due))
                        .build(&mut self.out);
                    w.write(batch).map_err(msg)?;
                }
            }
            Format::Ndjson => {
                let mut w = datafusion::arrow::json::LineDelimitedWriter::new(&mut self.out);
                w.write(batch).map_err(msg)?;
                w.finish().map_err(msg)?;
            }
            Format::Json => {
                let mut buf = Vec::new();
                {
                    let mut w = datafusion::arrow::json::ArrayWriter::new(&mut buf);
                    w.write(batch).map_err(msg)?;
                    w.finish().map_err(msg)?;
                }
                // One JSON array over every batch of every statement.
                let rows: Vec<Value> = if buf.is_empty() {
                    Vec::new()
                } else {
                    serde_json::from_slice(&buf).map_err(msg)?
                };
                for r in rows {
                    let sep = if self.json_first { "[" } else { ",\n" };
                    write!(self.out, "{sep}{r}").map_err(msg)?;
                    self.json_first = false;
                }
            }
            Format::Parquet => {
                if let Some(w) = self.parquet.as_mut() {
                    w.write(batch).map_err(msg)?;
                }
            }
            Format::Arrow => {
                if let Some(w) = self.ipc.as_mut() {
                    w.write(batch).map_err(msg)?;
                }
            }
        }
        Ok(())
    }

    /// Ends the current statement.
    pub fn end(&mut self) -> CliResult {
        let schema = self.schema.take();
        let batches = std::mem::take(&mut self.table_rows);
        let Some(schema) = schema.filter(|s| !s.fields().is_empty()) else {
            return Ok(());
        };
        match self.format {
            Format::Table => {
                let n: usize = batches.iter().map(|b| b.num_rows()).sum();
                let s = if batches.is_empty() {
                    pretty_format_batches(&[RecordBatch::new_empty(schema)])
                } else {
                    pretty_format_batches(&batches)
                };
                writeln!(self.out, "{}", s.map_err(msg)?).map_err(msg)?;
                writeln!(self.out, "{n} row{}", if n == 1 { "" } else { "s" }).map_err(msg)?;
            }
            Format::Csv if self.csv_header_due => self.write(&RecordBatch::new_empty(schema))?,
            _ => {}
        }
        Ok(())
    }

    /// Flushes and closes.
    pub fn finish(mut self) -> CliResult {
        if self.format == Format::Json {
            writeln!(self.out, "{}", if self.json_first { "[]" } else { "]" }).map_err(msg)?;
        }
        if let Some(w) = self.parquet.take() {
            w.close().map_err(msg)?;
        }
        if let Some(mut w) = self.ipc.take() {
            w.finish().map_err(msg)?;
        }
        self.out.flush().map_err(msg)
    }
}

/// Prints a describe() JSON as indented `key: value` lines.
pub fn print_description(v: &Value, indent: usize) {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(m) => {
            for (k, val) in m {
                match val {
                    Value::Object(o) if !o.is_empty() => {
                        outln!("{pad}{k}:");
                        print_description(val, indent + 2);
                    }
                    Value::Array(a) if a.iter().any(|x| x.is_object()) => {
                        outln!("{pad}{k}:");
                        for item in a {
                            print_description(item, indent + 2);
                            outln!();
                        }
                    }
                    Value::Null => {}
                    other => outln!("{pad}{k}: {other}"),
                }
            }
        }
        other => outln!("{pad}{other}"),
    }
}
