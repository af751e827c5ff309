//! Running SQL and writing results in the requested format.

use crate::{CliResult, Format, msg};
use datafusion::arrow::array::RecordBatch;
use datafusion::prelude::SessionContext;
use serde_json::Value;
use std::io::Write;
use std::path::Path;

/// Runs one statement and collects its batches.
pub async fn run_sql(ctx: &SessionContext, sql: &str) -> CliResult<Vec<RecordBatch>> {
    let df = ctx.sql(sql).await.map_err(msg)?;
    df.collect().await.map_err(msg)
}

/// Where results go.
pub struct Sink {
    out: Box<dyn Write + Send>,
    format: Format,
    parquet: Option<datafusion::parquet::arrow::ArrowWriter<Box<dyn Write + Send>>>,
    ipc: Option<datafusion::arrow::ipc::writer::StreamWriter<Box<dyn Write + Send>>>,
    json_first: bool,
}

impl Sink {
    /// Opens `path` (stdout when `None`).
    pub fn open(path: Option<&Path>, format: Format) -> CliResult<Sink> {
        let out: Box<dyn Write + Send> = match path {
            Some(p) => Box::new(std::io::BufWriter::new(
                std::fs::File::create(p).map_err(|e| format!("{}: {e}", p.display()))?,
            )),
            None => Box::new(std::io::BufWriter::new(std::io::stdout())),
        };
        if format == Format::Parquet
            && path.is_none()
            && std::io::IsTerminal::is_terminal(&std::io::stdout())
        {
            return Err(
                "--format parquet writes binary data: give --output FILE or redirect stdout".into(),
            );
        }
        Ok(Sink {
            out,
            format,
            parquet: None,
            ipc: None,
            json_first: true,
        })
    }

    /// Writes batches of one statement.
    pub fn write(&mut self, batches: &[RecordBatch]) -> CliResult {
        let io = |e: std::io::Error| msg(e);
        match self.format {
            Format::Table => {
                if batches.iter().all(|b| b.num_rows() == 0)
                    && batches.first().is_none_or(|b| b.num_columns() == 0)
                {
                    return Ok(());
                }
                let s =
                    datafusion::arrow::util::pretty::pretty_format_batches(batches).map_err(msg)?;
                writeln!(self.out, "{s}").map_err(io)?;
                let n: usize = batches.iter().map(|b| b.num_rows()).sum();
                writeln!(self.out, "{n} row{}", if n == 1 { "" } else { "s" }).map_err(io)?;
            }
            Format::Csv => {
                // One header per statement that returns columns (DDL returns none).
                if batches.first().is_some_and(|b| b.num_columns() > 0) {
                    let mut w = datafusion::arrow::csv::WriterBuilder::new()
                        .with_header(true)
                        .build(&mut self.out);
                    for b in batches {
                        w.write(b).map_err(msg)?;
                    }
                }
            }
            Format::Ndjson => {
                let mut w = datafusion::arrow::json::LineDelimitedWriter::new(&mut self.out);
                for b in batches {
                    w.write(b).map_err(msg)?;
                }
                w.finish().map_err(msg)?;
            }
            Format::Json => {
                let mut buf = Vec::new();
                {
                    let mut w = datafusion::arrow::json::ArrayWriter::new(&mut buf);
                    for b in batches {
                        w.write(b).map_err(msg)?;
                    }
                    w.finish().map_err(msg)?;
                }
                // Concatenate the arrays of several statements into one.
                let rows: Vec<Value> = if buf.is_empty() {
                    Vec::new()
                } else {
                    serde_json::from_slice(&buf).map_err(msg)?
                };
                for r in rows {
                    write!(
                        self.out,
                        "{}{}",
                        if self.json_first { "[" } else { ",\n" },
                        r
                    )
                    .map_err(io)?;
                    self.json_first = false;
                }
            }
            Format::Parquet => {
                for b in batches {
                    if self.parquet.is_none() {
                        let sink = std::mem::replace(&mut self.out, Box::new(std::io::sink()));
                        self.parquet = Some(
                            datafusion::parquet::arrow::ArrowWriter::try_new(
                                sink,
                                b.schema(),
                                None,
                            )
                            .map_err(msg)?,
                        );
                    }
                    self.parquet
                        .as_mut()
                        .expect("created above")
                        .write(b)
                        .map_err(msg)?;
                }
            }
            Format::Arrow => {
                for b in batches {
                    if self.ipc.is_none() {
                        let sink = std::mem::replace(&mut self.out, Box::new(std::io::sink()));
                        self.ipc = Some(
                            datafusion::arrow::ipc::writer::StreamWriter::try_new(
                                sink,
                                &b.schema(),
                            )
                            .map_err(msg)?,
                        );
                    }
                    self.ipc
                        .as_mut()
                        .expect("created above")
                        .write(b)
                        .map_err(msg)?;
                }
            }
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
