//! [`Blosc2Format`]: single-file containers as a DataFusion [`FileFormat`], so that
//! DataFusion's own `ListingTable` lists, partitions and scans them like Parquet files.
//!
//! A file here is anything [`Dataset::open`] opens from one object: a b2nd or super-chunk
//! frame (`.b2nd`, `.b2frame`), a CTable zip (`.b2z`) or a CTable frame. Directory
//! containers (sparse frames, bcolz, `.b2d` CTables) are not files; the table provider
//! ([`super::Blosc2Table`], [`super::Blosc2MultiTable`]) reads those. This module owns
//! what a format says about whole files: their schema, statistics and order; the scan
//! itself is [`super::source::Blosc2Source`].

use super::computed::{ComputedColumns, full_schema};
use super::listed::{ListedFiles, LocalReads, open_columns};
use super::prune::{IndexCache, exact_extrema};
use super::source::Blosc2Source;
use super::table::Blosc2Table;
use super::to_df;
use super::zone_maps::ZoneMaps;
use crate::array::column_spec::NullDecl;
use crate::arrow_reader::schema::dataset_schema;
use crate::dataset::Dataset;
use arrow::datatypes::{Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::common::stats::Precision;
use datafusion::common::{GetExt, Statistics};
use datafusion::datasource::file_format::file_compression_type::FileCompressionType;
use datafusion::datasource::file_format::{FileFormat, FileFormatFactory, FileMeta};
use datafusion::datasource::physical_plan::{FileScanConfig, FileScanConfigBuilder, FileSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::datasource::table_schema::TableSchema;
use datafusion::error::{DataFusionError, Result};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::{LexOrdering, PhysicalSortExpr};
use datafusion::physical_plan::ExecutionPlan;
use futures::{StreamExt, TryStreamExt};
use object_store::{ObjectMeta, ObjectStore};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The extension [`Blosc2Format`] lists by default (`ListingOptions::with_file_extension`
/// picks others, e.g. `.b2frame` or `.b2z`).
pub const DEFAULT_EXTENSION: &str = ".b2nd";

/// How many files schema inference opens at once (each open is a few small reads).
const CONCURRENT_OPENS: usize = 16;

/// Blosc2 single-file containers as a DataFusion [`FileFormat`].
///
/// ```no_run
/// # async fn f() -> datafusion::error::Result<()> {
/// use datafusion::datasource::listing::ListingOptions;
/// use datafusion::prelude::SessionContext;
/// use datafusion_blosc2::provider::Blosc2Format;
/// use std::sync::Arc;
///
/// let ctx = SessionContext::new();
/// let options = ListingOptions::new(Arc::new(Blosc2Format::default()));
/// ctx.register_listing_table("temps", "data/temps/", options, None, None).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Blosc2Format {
    /// `None`: zone maps off.
    zone_maps: Option<Arc<FileZoneMaps>>,
    local: LocalReads,
}

impl Default for Blosc2Format {
    fn default() -> Self {
        Blosc2Format {
            zone_maps: Some(Arc::default()),
            local: LocalReads::default(),
        }
    }
}

impl Blosc2Format {
    /// How this format's work in `state` opens files: with its local reads, through
    /// the session's file metadata cache.
    fn files(&self, state: &dyn Session) -> ListedFiles {
        let cache = state.runtime_env().cache_manager.get_file_metadata_cache();
        ListedFiles::new(self.local.clone()).with_cache(cache)
    }

    /// The statistics of the file `object` ([`file_statistics`]) and its dataset; the
    /// columns they open for SUMMARY extrema stay open in the cached file.
    async fn statistics(
        &self,
        state: &dyn Session,
        store: &Arc<dyn ObjectStore>,
        table_schema: &Schema,
        object: &ObjectMeta,
    ) -> Result<(Statistics, Arc<Dataset>)> {
        let files = self.files(state);
        let (ds, _) = files.open(store, object).await?;
        let before = open_columns(&ds);
        let (statistics, ds) = file_statistics(Arc::unwrap_or_clone(ds), table_schema).await?;
        files.remember(store, object, &ds, before);
        Ok((statistics, ds))
    }

    /// The format, with zone maps on.
    pub fn new() -> Self {
        Self::default()
    }

    /// Turns zone maps on or off: the min/max of each zone (chunk, or table rows) a scan
    /// decodes whole, kept per file version (path, size, modification time, ETag) for
    /// later scans through this format to prune on. On by default.
    pub fn with_zone_maps(mut self, on: bool) -> Self {
        self.zone_maps = on.then(Arc::default);
        self
    }
}

/// The zone maps of the files scans through one [`Blosc2Format`] have read, by file
/// version: a rewritten file (other size, time or ETag) starts a new map.
#[derive(Debug, Default)]
pub(crate) struct FileZoneMaps {
    files: Mutex<HashMap<FileVersion, Arc<ZoneMaps>>>,
}

/// Path, size, modification time (ns) and ETag of a listed file.
type FileVersion = (String, u64, i64, Option<String>);

/// Files whose zone maps one format keeps at most (then it starts over).
const MAX_MAPPED_FILES: usize = 4096;

impl FileZoneMaps {
    /// The zone maps of the file `meta` describes.
    pub(crate) fn of(&self, meta: &ObjectMeta) -> Arc<ZoneMaps> {
        let key = (
            meta.location.to_string(),
            meta.size,
            meta.last_modified.timestamp_nanos_opt().unwrap_or_default(),
            meta.e_tag.clone(),
        );
        let mut files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        if files.len() >= MAX_MAPPED_FILES && !files.contains_key(&key) {
            files.clear();
        }
        Arc::clone(files.entry(key).or_default())
    }
}

/// The schemas of several files merged into one: fields by name (a type conflict is an
/// error naming the file), schema metadata kept where every file agrees.
/// A file's columns: its stored ones, then a CTable's computed columns (with the note of
/// those left out).
fn file_schema(ds: &Dataset) -> Schema {
    let stored = dataset_schema(ds);
    match ds {
        Dataset::Table(t) if !t.computed.is_empty() => {
            full_schema(&stored, &ComputedColumns::of_table(t, &stored))
        }
        _ => stored,
    }
}

fn merge_schemas(schemas: Vec<(String, Schema)>) -> Result<Schema> {
    let mut it = schemas.into_iter();
    let Some((_, first)) = it.next() else {
        return Ok(Schema::empty());
    };
    let mut meta = first.metadata().clone();
    let mut merged = first;
    for (path, s) in it {
        meta.retain(|k, v| s.metadata().get(k) == Some(v));
        let bare = |s: &Schema| Schema::new(s.fields().clone());
        merged = Schema::try_merge([bare(&merged), bare(&s)]).map_err(|e| {
            DataFusionError::Plan(format!(
                "{path}: its columns do not agree with the files listed before it: {e}"
            ))
        })?;
    }
    Ok(merged.with_metadata(meta))
}

#[async_trait]
impl FileFormat for Blosc2Format {
    fn get_ext(&self) -> String {
        DEFAULT_EXTENSION[1..].to_string()
    }

    fn get_ext_with_compression(&self, c: &FileCompressionType) -> Result<String> {
        match c.is_compressed() {
            false => Ok(self.get_ext()),
            true => Err(DataFusionError::Plan(
                "Blosc2 files are compressed inside; an outer compression is not supported".into(),
            )),
        }
    }

    fn compression_type(&self) -> Option<FileCompressionType> {
        None
    }

    async fn infer_schema(
        &self,
        state: &dyn Session,
        store: &Arc<dyn ObjectStore>,
        objects: &[ObjectMeta],
    ) -> Result<SchemaRef> {
        let files = self.files(state);
        let schemas: Vec<(String, Schema)> = futures::stream::iter(objects.iter().cloned())
            .map(|o| {
                let (store, files) = (Arc::clone(store), files.clone());
                async move {
                    let (ds, _) = files.open(&store, &o).await?;
                    Ok::<_, DataFusionError>((o.location.to_string(), file_schema(&ds)))
                }
            })
            .buffered(CONCURRENT_OPENS)
            .try_collect()
            .await?;
        Ok(Arc::new(merge_schemas(schemas)?))
    }

    async fn infer_stats(
        &self,
        state: &dyn Session,
        store: &Arc<dyn ObjectStore>,
        table_schema: SchemaRef,
        object: &ObjectMeta,
    ) -> Result<Statistics> {
        Ok(self
            .statistics(state, store, &table_schema, object)
            .await?
            .0)
    }

    async fn infer_ordering(
        &self,
        state: &dyn Session,
        store: &Arc<dyn ObjectStore>,
        table_schema: SchemaRef,
        object: &ObjectMeta,
    ) -> Result<Option<LexOrdering>> {
        let (ds, _) = self.files(state).open(store, object).await?;
        Ok(file_ordering(&ds, &table_schema))
    }

    async fn infer_stats_and_ordering(
        &self,
        state: &dyn Session,
        store: &Arc<dyn ObjectStore>,
        table_schema: SchemaRef,
        object: &ObjectMeta,
    ) -> Result<FileMeta> {
        // One open for both (a listing table asks for both of every file).
        let (statistics, ds) = self.statistics(state, store, &table_schema, object).await?;
        let ordering = file_ordering(&ds, &table_schema);
        Ok(FileMeta::new(statistics).with_ordering(ordering))
    }

    async fn create_physical_plan(
        &self,
        state: &dyn Session,
        conf: FileScanConfig,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        // The scan opens files through the session's cache (`file_source` has no session).
        let conf = match conf.file_source().downcast_ref::<Blosc2Source>() {
            Some(source) => {
                let source = source.clone().with_listed_files(self.files(state));
                FileScanConfigBuilder::from(conf)
                    .with_source(Arc::new(source))
                    .build()
            }
            None => conf,
        };
        Ok(DataSourceExec::from_data_source(conf))
    }

    fn file_source(&self, table_schema: TableSchema) -> Arc<dyn FileSource> {
        Arc::new(
            Blosc2Source::new(table_schema)
                .with_file_zone_maps(self.zone_maps.clone())
                .with_listed_files(ListedFiles::new(self.local.clone())),
        )
    }
}

/// A file's statistics over `table_schema`'s columns (matched by name): exact rows, exact
/// coordinate ranges, zero nulls where a column cannot hold any or holds none (a mask
/// sidecar never written), and a table's exact
/// extrema from its SUMMARY sidecars ([`exact_extrema`]); and the dataset, with the
/// columns those opened.
async fn file_statistics(ds: Dataset, table_schema: &Schema) -> Result<(Statistics, Arc<Dataset>)> {
    let own = Arc::new(dataset_schema(&ds));
    let table = Blosc2Table::new(ds);
    let Some(stats) = datafusion::datasource::TableProvider::statistics(&table) else {
        return Ok((
            Statistics::new_unknown(table_schema),
            Arc::clone(table.dataset()),
        ));
    };
    let summaries = IndexCache::default();
    let mut column_statistics = Vec::with_capacity(table_schema.fields().len());
    for f in table_schema.fields() {
        let mut c = match own.index_of(f.name()) {
            Ok(i) if own.field(i).data_type() == f.data_type() => {
                (i, stats.column_statistics[i].clone())
            }
            _ => {
                column_statistics.push(Default::default());
                continue;
            }
        };
        if let Dataset::Table(t) = &**table.dataset() {
            // A column whose nulls would live in a mask sidecar holds none when the
            // sidecar is absent (found by opening the column).
            let masked = t
                .specs
                .get(c.0)
                .is_some_and(|s| matches!(s.nulls, NullDecl::Mask));
            if masked && f.is_nullable() {
                t.open_column(c.0).await.map_err(to_df)?;
                if t.holds_no_null(c.0) {
                    c.1 = c.1.with_null_count(Precision::Exact(0));
                }
            }
            // Opens the column only where its sidecar can give exact extrema.
            if let Some((lo, hi)) = exact_extrema(t, &own, c.0, &summaries)
                .await
                .map_err(to_df)?
            {
                c.1 =
                    c.1.with_min_value(Precision::Exact(lo))
                        .with_max_value(Precision::Exact(hi));
            }
        }
        column_statistics.push(c.1);
    }
    let statistics = Statistics {
        num_rows: stats.num_rows,
        total_byte_size: stats.total_byte_size,
        column_statistics,
    };
    Ok((statistics, Arc::clone(table.dataset())))
}

/// The order a file's rows come in: a 1-D array's by `dim_0` (an N-d array's units
/// follow the chunk grid, so no column is sorted across them; a table's rows are in
/// the order they were written).
fn file_ordering(ds: &Dataset, table_schema: &Schema) -> Option<LexOrdering> {
    match ds {
        Dataset::Array(a) if a.geometry.ndim() == 1 => {
            let i = table_schema.index_of("dim_0").ok()?;
            LexOrdering::new([PhysicalSortExpr::new_default(Arc::new(Column::new(
                "dim_0", i,
            )))])
        }
        _ => None,
    }
}

/// Creates [`Blosc2Format`] for DataFusion's `COPY … STORED AS` and format registry
/// (`SessionState::register_file_format`); registered by
/// [`super::Blosc2SessionExt::enable_blosc2`]. Writing is not supported.
#[derive(Debug, Clone, Default)]
pub struct Blosc2FormatFactory {}

impl FileFormatFactory for Blosc2FormatFactory {
    fn create(
        &self,
        _state: &dyn Session,
        format_options: &HashMap<String, String>,
    ) -> Result<Arc<dyn FileFormat>> {
        if let Some(k) = format_options.keys().next() {
            return Err(DataFusionError::Plan(format!(
                "the Blosc2 file format takes no options (got {k:?})"
            )));
        }
        Ok(Arc::new(Blosc2Format::default()))
    }

    fn default(&self) -> Arc<dyn FileFormat> {
        Arc::new(Blosc2Format::default())
    }
}

impl GetExt for Blosc2FormatFactory {
    fn get_ext(&self) -> String {
        "blosc2".into()
    }
}
