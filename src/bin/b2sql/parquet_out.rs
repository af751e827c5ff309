//! Parquet files from record batches, encoded on every core: `export` and
//! `query --format parquet` spend most of their time compressing pages, which parquet's
//! `ArrowWriter` does on one thread. Full row groups wait until there is one per thread;
//! then each (row group, column) pair is encoded on its own, by a few scoped threads, and
//! the chunks are appended to the file in order. The file is what `ArrowWriter` writes
//! (its schema, Arrow metadata, properties; row groups of `max_row_group_row_count` rows).

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::arrow::arrow_writer::{
    ArrowColumnChunk, ArrowColumnWriter, ArrowRowGroupWriterFactory, compute_leaves,
};
use datafusion::parquet::errors::{ParquetError, Result};
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::parquet::file::writer::SerializedFileWriter;
use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A Parquet file being written.
pub struct ParquetOut<W: Write + Send> {
    encoder: Encoder<W>,
    row_group_rows: usize,
    /// Rows of the row group being filled.
    filling: Vec<RecordBatch>,
    filling_rows: usize,
    /// Full row groups waiting to be encoded.
    full: Vec<Vec<RecordBatch>>,
}

impl<W: Write + Send> ParquetOut<W> {
    /// A file of `schema` with `props` written to `out`.
    pub fn try_new(out: W, schema: SchemaRef, props: WriterProperties) -> Result<Self> {
        let row_group_rows = props.max_row_group_row_count().unwrap_or(1 << 20).max(1);
        let (writer, factory) =
            ArrowWriter::try_new(out, schema.clone(), Some(props))?.into_serialized_writer()?;
        // The Parquet leaf columns of each top-level field, as the file's schema maps them.
        let descr = writer.schema_descr();
        let mut leaves = vec![0; schema.fields().len()];
        for leaf in 0..descr.num_columns() {
            leaves[descr.get_column_root_idx(leaf)] += 1;
        }
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        Ok(ParquetOut {
            encoder: Encoder {
                writer,
                factory,
                schema,
                leaves,
                threads,
                row_groups: 0,
            },
            row_group_rows,
            filling: Vec::new(),
            filling_rows: 0,
            full: Vec::new(),
        })
    }

    /// Adds `batch`'s rows; encodes row groups once there is one per thread. (Encoding
    /// them in the background while more rows arrive measured slower on two cores: the
    /// scan and the encoders then compete for them.)
    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let mut at = 0;
        while at < batch.num_rows() {
            let take = (self.row_group_rows - self.filling_rows).min(batch.num_rows() - at);
            self.filling.push(batch.slice(at, take));
            self.filling_rows += take;
            at += take;
            if self.filling_rows == self.row_group_rows {
                self.full.push(std::mem::take(&mut self.filling));
                self.filling_rows = 0;
                if self.full.len() >= self.encoder.threads {
                    self.encoder.encode(std::mem::take(&mut self.full))?;
                }
            }
        }
        Ok(())
    }

    /// Writes the rows left and the footer.
    pub fn close(mut self) -> Result<()> {
        if self.filling_rows > 0 {
            self.full.push(std::mem::take(&mut self.filling));
        }
        self.encoder.encode(std::mem::take(&mut self.full))?;
        self.encoder.writer.close()?;
        Ok(())
    }
}

/// The file writer and what encoding row groups for it needs.
struct Encoder<W: Write + Send> {
    writer: SerializedFileWriter<W>,
    factory: ArrowRowGroupWriterFactory,
    schema: SchemaRef,
    /// Leaf columns of each top-level field, in order.
    leaves: Vec<usize>,
    threads: usize,
    /// Row groups created so far.
    row_groups: usize,
}

impl<W: Write + Send> Encoder<W> {
    /// Encodes `groups`, a (row group, field) pair per task on scoped threads, and
    /// appends them in order.
    fn encode(&mut self, groups: Vec<Vec<RecordBatch>>) -> Result<()> {
        let leaf_total: usize = self.leaves.iter().sum();
        let mut tasks: Vec<Mutex<Option<Task>>> = Vec::new();
        for batches in &groups {
            let mut writers = self.factory.create_column_writers(self.row_groups)?;
            self.row_groups += 1;
            if writers.len() != leaf_total {
                return Err(ParquetError::General(format!(
                    "{} column writers for {leaf_total} leaf columns",
                    writers.len()
                )));
            }
            for (field, &n) in self.leaves.iter().enumerate() {
                let rest = writers.split_off(n);
                let writers = std::mem::replace(&mut writers, rest);
                tasks.push(Mutex::new(Some(Task {
                    batches,
                    field,
                    writers,
                })));
            }
        }
        let done: Vec<Mutex<Option<Result<Vec<ArrowColumnChunk>>>>> =
            tasks.iter().map(|_| Mutex::new(None)).collect();
        let next = AtomicUsize::new(0);
        let schema = &self.schema;
        std::thread::scope(|s| {
            for _ in 0..self.threads.min(tasks.len()) {
                s.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(task) = tasks.get(i) else { break };
                        let task = lock(task).take().expect("each task taken once");
                        *lock(&done[i]) = Some(task.encode(schema));
                    }
                });
            }
        });
        let mut done = done.into_iter();
        for _ in &groups {
            let mut row_group = self.writer.next_row_group()?;
            for _ in &self.leaves {
                let chunks = done.next().and_then(lock_into).expect("every task ran")?;
                for chunk in chunks {
                    chunk.append_to_row_group(&mut row_group)?;
                }
            }
            row_group.close()?;
        }
        Ok(())
    }
}

/// One field of one row group: its rows and its leaves' writers.
struct Task<'a> {
    batches: &'a [RecordBatch],
    field: usize,
    writers: Vec<ArrowColumnWriter>,
}

impl Task<'_> {
    fn encode(mut self, schema: &SchemaRef) -> Result<Vec<ArrowColumnChunk>> {
        let field = schema.field(self.field);
        for batch in self.batches {
            let leaves = compute_leaves(field, batch.column(self.field))?;
            for (leaf, writer) in leaves.iter().zip(&mut self.writers) {
                writer.write(leaf)?;
            }
        }
        self.writers
            .into_iter()
            .map(ArrowColumnWriter::close)
            .collect()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn lock_into<T>(m: Mutex<Option<T>>) -> Option<T> {
    m.into_inner().unwrap_or_else(|e| e.into_inner())
}
