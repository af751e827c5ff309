//! [`Blosc2Opener`]: one listed file (or a byte range of it) → a stream of record batches.
//!
//! Opening a file plans its zone-aligned scan units (for an array, whole blocks of each
//! chunk within the coordinate box the static filters allow; row ranges for a table),
//! keeps those of the file's byte range, drops those the scan's filters rule out on
//! their statistics (zone maps included), cuts them again to the box the dynamic
//! filters allow as they stand, and reads the rest in order (last first when a
//! `dim_k DESC` order was pushed down), checking and cutting again with dynamic filters
//! before each unit. Each zone read whole goes into the file's zone maps. Equalities and
//! `LIKE 'x%'` prefixes on text stored as `U<n>`/`S<n>` records or `vlstring`/`vlbytes`
//! items are tested on them before anything is converted (`text_filters.rs`), as the
//! table provider's scans do.
//!
//! **Byte ranges.** DataFusion splits big files into byte ranges to scan them on several
//! partitions. A Blosc2 file has no record boundaries in its bytes, so units are dealt
//! out by position instead: of the `n` zones the static filters' coordinate box leaves
//! (the same in every range's open), the `k`-th belongs to the range holding byte
//! `k × size / n`. Every zone lands in exactly one of the ranges that cover the file, and
//! the zones a selection leaves spread evenly, wherever in the file they lie.

use super::computed::ComputedColumns;
use super::dynamic::{DynamicPruning, Probe, clip, coordinate_box, remap_columns};
use super::format::FileZoneMaps;
use super::listed::{ListedFiles, Opened, open_columns};
use super::text_filters::physical_text_matches;
use super::to_df;
use super::zone_maps::{ZoneMaps, ZoneRecorder};
use crate::array::ndarray::ReadStats;
use crate::arrow_reader::reader::{BatchReader, Selection};
use crate::arrow_reader::schema::dataset_schema;
use crate::arrow_reader::zones::{ZonedUnit, plan_zoned_units};
use crate::dataset::Dataset;
use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions, new_null_array};
use arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::datasource::listing::{FileRange, PartitionedFile};
use datafusion::datasource::physical_plan::{FileOpenFuture, FileOpener};
use datafusion::datasource::table_schema::TableSchema;
use datafusion::error::{DataFusionError, Result};
use datafusion::physical_expr::DynamicFilterTracking;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{Column, Literal};
use datafusion::physical_plan::metrics::{Count, ExecutionPlanMetricsSet, MetricBuilder, Time};
use futures::StreamExt;
use object_store::ObjectStore;
use std::sync::Arc;

/// Opens the files of one partition of a [`super::source::Blosc2Source`] scan.
pub struct Blosc2Opener {
    pub(crate) store: Arc<dyn ObjectStore>,
    pub(crate) table_schema: TableSchema,
    /// The file columns to produce (indices into the table's file schema).
    pub(crate) file_indices: Vec<usize>,
    /// Over the table schema.
    pub(crate) filters: Vec<Arc<dyn PhysicalExpr>>,
    /// Read each file's units last first.
    pub(crate) reverse_units: bool,
    /// When coordinate filters were reported exact (`source.rs`), the schema's coordinate
    /// columns, which every file must be an array of at least as many dimensions as (its
    /// units are cut to their box); 0 otherwise.
    pub(crate) exact_dims: usize,
    /// Zone maps by file; `None`: off.
    pub(crate) zone_maps: Option<Arc<FileZoneMaps>>,
    /// How files are opened.
    pub(crate) files: ListedFiles,
    pub(crate) batch_size: usize,
    pub(crate) limit: Option<usize>,
    /// Threads that decode the blocks of one big chunk.
    pub(crate) block_threads: usize,
    pub(crate) metrics: ExecutionPlanMetricsSet,
    pub(crate) partition: usize,
}

/// The scan's counters for one partition.
#[derive(Clone)]
struct OpenerMetrics {
    /// Chunks of the files' arrays, and those outside the static filters' coordinate
    /// box (counted by the range holding a file's first byte).
    chunks_total: Count,
    chunks_pruned: Count,
    /// Files taken opened from the session's file metadata cache.
    files_from_cache: Count,
    /// Files taken opened from another partition (or scan) holding them open.
    files_shared: Count,
    units_total: Count,
    units_pruned_by_stats: Count,
    units_pruned_by_dynamic_filters: Count,
    /// Units whose rows were selected by testing stored text (`text_filters.rs`).
    units_text_tested: Count,
    chunks_read: Count,
    blocks_decoded: Count,
    bytes_fetched: Count,
    read_decode_time: Time,
}

impl OpenerMetrics {
    fn new(m: &ExecutionPlanMetricsSet, partition: usize) -> Self {
        let b = || MetricBuilder::new(m);
        OpenerMetrics {
            chunks_total: b().counter("chunks_total", partition),
            chunks_pruned: b().counter("chunks_pruned", partition),
            files_from_cache: b().counter("files_from_cache", partition),
            files_shared: b().counter("files_shared", partition),
            units_total: b().counter("units_total", partition),
            units_pruned_by_stats: b().counter("units_pruned_by_stats", partition),
            units_pruned_by_dynamic_filters: b()
                .counter("units_pruned_by_dynamic_filters", partition),
            units_text_tested: b().counter("units_text_tested", partition),
            chunks_read: b().counter("chunks_read", partition),
            blocks_decoded: b().counter("blocks_decoded", partition),
            bytes_fetched: b().counter("bytes_fetched", partition),
            read_decode_time: b().subset_time("read_decode_time", partition),
        }
    }

    fn add(&self, st: &ReadStats) {
        self.chunks_read.add(st.chunks_read as usize);
        self.blocks_decoded.add(st.blocks_decoded as usize);
        self.bytes_fetched.add(st.bytes_fetched as usize);
    }
}

/// What one file's scan reads, and how its columns become the table's.
struct FileScan {
    /// Reads the file columns present in the file.
    reader: BatchReader,
    /// Reads the filter columns first when dynamic filters may skip the rest.
    probe: Option<Probe>,
    pruning: DynamicPruning,
    /// Dynamic filters are checked again before each unit.
    dynamic: bool,
    /// The reader tests stored text to select rows.
    text_tested: bool,
    /// How each output column is made.
    columns: Vec<OutputColumn>,
    schema: SchemaRef,
    /// The file's zone maps, and the value columns recorded in them: positions in the
    /// reader's batch and dataset column indices.
    zone_maps: Option<(Arc<ZoneMaps>, RecordedColumns)>,
}

/// Where an output column of a file's scan comes from.
enum OutputColumn {
    /// The reader's batch column at this position.
    Read(usize),
    /// Not in this file: nulls.
    Null,
    /// A CTable computed column of this file, evaluated over the reader's batch.
    Computed(Arc<dyn PhysicalExpr>),
}

/// Value columns recorded in zone maps: (position in the batch, dataset column index).
type RecordedColumns = Vec<(usize, usize)>;

impl FileOpener for Blosc2Opener {
    fn open(&self, file: PartitionedFile) -> Result<FileOpenFuture> {
        let store = Arc::clone(&self.store);
        let schema = Arc::new(
            self.table_schema
                .file_schema()
                .project(&self.file_indices)?,
        );
        let filters = with_partition_values(&self.filters, &self.table_schema, &file)?;
        let (batch_size, limit, block_threads) = (self.batch_size, self.limit, self.block_threads);
        let reverse = self.reverse_units;
        let exact_dims = self.exact_dims;
        let zone_maps = self.zone_maps.as_ref().map(|z| z.of(&file.object_meta));
        let metrics = OpenerMetrics::new(&self.metrics, self.partition);
        let files = self.files.clone();
        Ok(Box::pin(async move {
            let (ds, opened) = files.open(&store, &file.object_meta).await?;
            match opened {
                Opened::Cached => metrics.files_from_cache.add(1),
                Opened::Shared => metrics.files_shared.add(1),
                Opened::Read => {}
            }
            // The box of the static filters is the same in every range's open (dynamic
            // ones change as the scan goes), so the zones it leaves are dealt out.
            let (fixed, bounds) = match &*ds {
                Dataset::Array(a) if a.geometry.ndim() < exact_dims => {
                    return Err(DataFusionError::Plan(format!(
                        "{}: an array of {} dimensions, in a listing table whose schema \
                         has {exact_dims} coordinate columns (its coordinate filters were \
                         planned as exact)",
                        file.object_meta.location,
                        a.geometry.ndim()
                    )));
                }
                Dataset::Array(a) => {
                    let fixed: Vec<_> = filters
                        .iter()
                        .filter(|f| !DynamicFilterTracking::classify(f).contains_dynamic_filter())
                        .cloned()
                        .collect();
                    let shape = &a.geometry.shape;
                    let fixed_box = coordinate_box(&fixed, shape)?;
                    // Without dynamic filters both boxes are the same analysis.
                    let bounds = match fixed.len() == filters.len() {
                        true => fixed_box.clone(),
                        false => coordinate_box(&filters, shape)?,
                    };
                    (fixed_box, bounds)
                }
                Dataset::Table(_) if exact_dims > 0 => {
                    return Err(DataFusionError::Plan(format!(
                        "{}: a table, in a listing table whose schema is an array's \
                         (its coordinate filters were planned as exact)",
                        file.object_meta.location
                    )));
                }
                Dataset::Table(_) => (Vec::new(), Vec::new()),
            };
            let columns = open_columns(&ds);
            let scan = FileScan::new(&ds, schema, filters, block_threads, zone_maps).await?;
            files.remember(&store, &file.object_meta, &ds, columns);
            // Units planned over the box, as the table provider plans them: whole blocks
            // of it, so that a chunk the box takes a few blocks of is fetched in parts.
            let selection = match fixed.is_empty() {
                true => Selection::all(&shape(&ds)),
                false => Selection::of_box(&fixed),
            };
            let units = plan_zoned_units(&ds, &selection, batch_size as u64 * 8);
            if let Dataset::Array(a) = &*ds
                && file.range.as_ref().is_none_or(|r| r.start <= 0)
            {
                let (all, kept) = (a.geometry.nchunks(), a.geometry.chunks_in_box(&fixed).len());
                metrics.chunks_total.add(all as usize);
                metrics
                    .chunks_pruned
                    .add(all as usize - kept.min(all as usize));
            }
            let units = in_range(units, file.range.as_ref(), file.object_meta.size);
            metrics.units_total.add(units.len());
            let (units, report) = scan.pruning.prune_on_open(units).await?;
            let kept = units.len();
            let mut units = clip(units, &bounds);
            metrics
                .units_pruned_by_stats
                .add(report.units_pruned + kept - units.len());
            if reverse {
                units.reverse();
            }
            Ok(scan.stream(units, batch_size, limit, metrics))
        }))
    }
}

impl FileScan {
    /// The scan of `ds` producing `schema` (the table's projected file columns), pruning
    /// on `filters` (over the table schema, partition values already substituted).
    async fn new(
        ds: &Arc<Dataset>,
        schema: SchemaRef,
        filters: Vec<Arc<dyn PhysicalExpr>>,
        block_threads: usize,
        zone_maps: Option<Arc<ZoneMaps>>,
    ) -> Result<Self> {
        let own = Arc::new(dataset_schema(ds));
        let computed = match &**ds {
            Dataset::Table(t) if !t.computed.is_empty() => ComputedColumns::of_table(t, &own),
            _ => ComputedColumns::default(),
        };
        let mut read: Vec<usize> = Vec::new();
        let mut columns = Vec::with_capacity(schema.fields().len());
        // Computed columns produced: (output position, index in `computed`).
        let mut evaluated = Vec::new();
        for f in schema.fields() {
            let computed_here = || {
                computed
                    .columns
                    .iter()
                    .position(|(c, _)| c.name() == f.name())
            };
            match own.index_of(f.name()) {
                Ok(i) if own.field(i).data_type() == f.data_type() => {
                    columns.push(OutputColumn::Read(read.len()));
                    read.push(i);
                }
                Err(_) if computed_here().is_some() => {
                    let k = computed_here().expect("found");
                    let t = computed.columns[k].0.data_type();
                    if t != f.data_type() {
                        return Err(DataFusionError::Execution(format!(
                            "{}: computed column {:?} is {t} here, but the table's is {}",
                            ds.display(),
                            f.name(),
                            f.data_type()
                        )));
                    }
                    evaluated.push((columns.len(), k));
                    columns.push(OutputColumn::Null);
                }
                Ok(i) => {
                    return Err(DataFusionError::Execution(format!(
                        "{}: column {:?} is {} here, but the table's is {}",
                        ds.display(),
                        f.name(),
                        own.field(i).data_type(),
                        f.data_type()
                    )));
                }
                Err(_) if f.is_nullable() => columns.push(OutputColumn::Null),
                Err(_) => {
                    return Err(DataFusionError::Execution(format!(
                        "{}: no column {:?}, which the table has and cannot hold nulls",
                        ds.display(),
                        f.name()
                    )));
                }
            }
        }
        // The stored columns computed ones are made of are read too (after the others).
        for &(_, k) in &evaluated {
            for c in computed.columns[k].1.column_refs() {
                if let Ok(i) = own.index_of(&c.name)
                    && !read.contains(&i)
                {
                    read.push(i);
                }
            }
        }
        if let Dataset::Table(t) = &**ds {
            // Tables open their columns on demand: those produced and those filtered on.
            let mut open = read.clone();
            for f in &filters {
                for c in datafusion::physical_expr::utils::collect_columns(f) {
                    open.extend(own.index_of(c.name()).ok());
                }
            }
            open.sort_unstable();
            open.dedup();
            t.open_columns(open).await.map_err(to_df)?;
        }
        let big_chunks = matches!(&**ds, Dataset::Array(a) if a.chunks_worth_threads());
        // Equalities and prefixes on stored text are tested before it is converted.
        let text_matches = physical_text_matches(ds, &own, &filters)
            .await
            .map_err(to_df)?;
        let matched = !text_matches.is_empty();
        let reader = BatchReader::with_schema(Arc::clone(ds), Arc::clone(&own), Some(read))
            .with_block_threads(if big_chunks { block_threads } else { 1 })
            .with_text_matches(text_matches);
        if !evaluated.is_empty() {
            let planned = computed.physical();
            let batch_schema = reader.schema();
            for (pos, k) in evaluated {
                let e = remap_columns(Arc::clone(&planned[k]), &batch_schema)?;
                columns[pos] = OutputColumn::Computed(e);
            }
        }
        let dynamic = filters
            .iter()
            .any(|f| DynamicFilterTracking::classify(f).contains_dynamic_filter());
        let pruning = DynamicPruning::new(
            filters,
            Arc::clone(ds),
            own,
            zone_maps.clone(),
            Arc::default(),
        );
        let probe = dynamic.then(|| Probe::new(ds, &reader, &pruning)).flatten();
        // Values only: an array's coordinates have exact statistics already. Batches that
        // text matches filtered no longer hold whole zones.
        let record = reader.value_columns();
        let zone_maps = zone_maps
            .filter(|_| !record.is_empty() && !matched)
            .map(|z| (z, record));
        Ok(FileScan {
            reader,
            probe,
            pruning,
            dynamic,
            text_tested: matched,
            columns,
            schema,
            zone_maps,
        })
    }

    /// Reads `units` in order: batches of at most `batch_size` rows, `limit` rows in all.
    fn stream(
        self,
        units: Vec<ZonedUnit>,
        batch_size: usize,
        limit: Option<usize>,
        metrics: OpenerMetrics,
    ) -> futures::stream::BoxStream<'static, Result<RecordBatch>> {
        // Zones are not shared between a file's opens: one read in part is not recorded.
        let recorder = self.zone_maps.as_ref().map(|(maps, record)| {
            let first = self.probe.as_ref().map_or(&[][..], Probe::first_columns);
            ZoneRecorder::new(Arc::clone(maps), Arc::default(), record, first)
        });
        let scan = Arc::new(self);
        let state = (units.into_iter(), 0usize, recorder);
        futures::stream::unfold(state, move |(mut units, produced, mut rec)| {
            let scan = Arc::clone(&scan);
            let metrics = metrics.clone();
            async move {
                if limit.is_some_and(|l| produced >= l) {
                    return None;
                }
                let unit = units.next()?;
                let batch = match scan.read(&unit, &metrics, &mut rec).await {
                    Ok(Some(b)) => b,
                    Ok(None) => return Some((Vec::new(), (units, produced, rec))),
                    Err(e) => {
                        return Some((vec![Err(e)], (Vec::new().into_iter(), produced, None)));
                    }
                };
                let take = limit.map_or(batch.num_rows(), |l| (l - produced).min(batch.num_rows()));
                let pieces = (0..take)
                    .step_by(batch_size)
                    .map(|o| Ok(batch.slice(o, batch_size.min(take - o))))
                    .collect();
                Some((pieces, (units, produced + take, rec)))
            }
        })
        .flat_map(futures::stream::iter)
        .boxed()
    }

    /// One unit as the table's columns, or `None` when dynamic filters rule it out; its
    /// values go into the zone maps through `rec`.
    async fn read(
        &self,
        unit: &ZonedUnit,
        metrics: &OpenerMetrics,
        rec: &mut Option<ZoneRecorder>,
    ) -> Result<Option<RecordBatch>> {
        let clipped;
        let unit = match self.dynamic {
            false => unit,
            true => match self.pruning.admit(unit).await? {
                Some(u) => {
                    clipped = u;
                    &clipped
                }
                None => {
                    metrics.units_pruned_by_dynamic_filters.add(1);
                    return Ok(None);
                }
            },
        };
        let mut st = ReadStats::default();
        let timer = metrics.read_decode_time.timer();
        let read = match &self.probe {
            Some(p) => p
                .read(&self.pruning, &unit.unit, &mut st)
                .await
                .map(|(b, first)| {
                    if let Some(rec) = rec.as_mut() {
                        rec.first(unit, &first);
                    }
                    b
                }),
            None => self
                .reader
                .read(&unit.unit, &mut st)
                .await
                .map(Some)
                .map_err(to_df),
        };
        timer.done();
        metrics.add(&st);
        if self.text_tested {
            metrics.units_text_tested.add(1);
        }
        let Some(batch) = read? else {
            metrics.units_pruned_by_dynamic_filters.add(1);
            return Ok(None);
        };
        if let Some(rec) = rec.as_mut() {
            rec.batch(unit, &batch);
        }
        let rows = batch.num_rows();
        let columns: Vec<ArrayRef> = self
            .columns
            .iter()
            .zip(self.schema.fields())
            .map(|(c, f)| match c {
                OutputColumn::Read(i) => Ok(Arc::clone(batch.column(*i))),
                OutputColumn::Null => Ok(new_null_array(f.data_type(), rows)),
                OutputColumn::Computed(e) => e.evaluate(&batch)?.into_array(rows),
            })
            .collect::<Result<_>>()?;
        let opts = RecordBatchOptions::new().with_row_count(Some(rows));
        Ok(Some(RecordBatch::try_new_with_options(
            Arc::clone(&self.schema),
            columns,
            &opts,
        )?))
    }
}

/// The selection shape of `ds`: the array's shape, or `[physical rows]`.
fn shape(ds: &Dataset) -> Vec<u64> {
    match ds {
        Dataset::Array(a) => a.geometry.shape.clone(),
        Dataset::Table(t) => vec![t.physical_rows],
    }
}

/// The units of the zones whose position falls in `range` (all when there is none): of
/// the `n` zones `units` hold, the `k`-th (in zone order) is at byte `k × size / n`. The
/// same units in every range's open deal each zone to exactly one range, and a selection
/// that leaves a few zones of one end of the file still spreads them over the ranges.
fn in_range(units: Vec<ZonedUnit>, range: Option<&FileRange>, size: u64) -> Vec<ZonedUnit> {
    let Some(r) = range else {
        return units;
    };
    let zone = |u: &ZonedUnit| if u.zone == u64::MAX { 0 } else { u.zone };
    let mut zones: Vec<u64> = units.iter().map(zone).collect();
    zones.sort_unstable();
    zones.dedup();
    let n = zones.len().max(1) as u128;
    let (start, end) = (r.start.max(0) as u128, r.end.max(0) as u128);
    units
        .into_iter()
        .filter(|u| {
            let k = zones.binary_search(&zone(u)).unwrap_or(0) as u128;
            let at = k * size as u128 / n;
            start <= at && at < end
        })
        .collect()
}

/// `filters` with the file's partition columns replaced by its values, so that a filter
/// mixing them with file columns (`year = 2024 OR v > 3`) still prunes.
fn with_partition_values(
    filters: &[Arc<dyn PhysicalExpr>],
    table_schema: &TableSchema,
    file: &PartitionedFile,
) -> Result<Vec<Arc<dyn PhysicalExpr>>> {
    let file_columns = table_schema.file_schema().fields().len();
    let names: Vec<&str> = table_schema
        .table_partition_cols()
        .iter()
        .map(|f| f.name().as_str())
        .collect();
    if names.is_empty() {
        return Ok(filters.to_vec());
    }
    filters
        .iter()
        .map(|f| {
            Arc::clone(f)
                .transform(|e| {
                    let Some(c) = e.downcast_ref::<Column>() else {
                        return Ok(Transformed::no(e));
                    };
                    let k = c.index().checked_sub(file_columns);
                    match k.and_then(|k| Some((k, *names.get(k)?))) {
                        Some((k, name)) if name == c.name() => match file.partition_values.get(k) {
                            Some(v) => Ok(Transformed::yes(Arc::new(Literal::new(v.clone())) as _)),
                            None => Ok(Transformed::no(e)),
                        },
                        _ => Ok(Transformed::no(e)),
                    }
                })
                .map(|t| t.data)
        })
        .collect()
}
