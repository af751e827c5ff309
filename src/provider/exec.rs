//! `Blosc2Exec`: the scan node. Each partition reads a contiguous run of scan units (boxes
//! or row ranges), one batch per unit, sliced to `batch_size`, and when it runs out takes
//! units from its siblings (`work.rs`); LIMIT stops it early and dropping the stream stops
//! all work. Metrics show what was read and skipped.

use super::dynamic::{DynamicPruning, Probe, descending_coordinate};
use super::prune::{IndexCache, PruneReport};
use super::work::{ExecutionUnits, UnitSource};
use super::zone_maps::{ZoneMaps, ZoneRecorder};
use crate::array::ndarray::ReadStats;
use crate::array::table::{ColumnStorage, NullRule, TableColumn};
use crate::arrow_reader::reader::{BatchReader, RawText, ScanUnit, Selection, raw_text};
use crate::arrow_reader::text_match::TextMatch;
use crate::arrow_reader::zones::{ZonedUnit, plan_zoned_units, unit_cost};
use crate::dataset::Dataset;
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use datafusion::common::Statistics;
use datafusion::common::config::ConfigOptions;
use datafusion::common::runtime::SpawnedTask;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::DynamicFilterTracking;
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr, PhysicalSortExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::filter_pushdown::{
    ChildPushdownResult, FilterPushdownPhase, FilterPushdownPropagation, PushedDown,
};
use datafusion::physical_plan::metrics::{Count, Time};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::statistics::StatisticsArgs;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    SortOrderPushdownResult,
};
use futures::StreamExt;
use futures::stream::BoxStream;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A table's text column that a scan can yield as its stored records
/// (`Blosc2Exec::raw_text_column`), as a consumer grouping them needs to know it.
#[derive(Debug, Clone, PartialEq)]
pub struct RawTextColumn {
    /// How its records arrive.
    pub raw: RawText,
    /// The text that stands for NULL, where the scan would apply a sentinel (`U<n>` and
    /// `utf8` columns; `vlstring` nulls are `nil` items, which arrive as nulls).
    pub null_text: Option<String>,
    /// The file and column, for errors.
    pub what: String,
}

/// Scan of a Blosc2 dataset.
#[derive(Debug, Clone)]
pub struct Blosc2Exec {
    ds: Arc<Dataset>,
    projection: Option<Vec<usize>>,
    reader: BatchReader,
    partitions: Vec<Vec<ZonedUnit>>,
    batch_size: usize,
    zone_maps: Option<Arc<ZoneMaps>>,
    pruning: PruneReport,
    limit: Option<usize>,
    stats: Statistics,
    selection: Selection,
    chunks_total: u64,
    chunks_selected: u64,
    metrics: ExecutionPlanMetricsSet,
    /// The units the partitions of the current execution share.
    execution: Arc<ExecutionUnits>,
    props: Arc<PlanProperties>,
    /// Where dynamic filters find value statistics; `None` when the scan takes none.
    summaries: Option<Arc<IndexCache>>,
    /// Filters other operators update while the query runs, checked before each unit.
    dynamic: Option<Arc<DynamicPruning>>,
    /// Each partition reads its units last first (a `dim_k DESC` order was pushed down).
    reversed: bool,
    /// `Some`: the streams of this scan that are live; the last one to end drops the
    /// chunks the dataset's reads keep.
    release: Option<Arc<AtomicUsize>>,
    /// Units a partition reads at once, on the runtime's threads, handing them out in
    /// order (1: one at a time).
    read_ahead: usize,
}

/// Held by each stream of a scan that releases its kept chunks: the last one dropped
/// (its stream ended or was cancelled) drops the chunks.
struct ReleaseWhenDone {
    ds: Arc<Dataset>,
    live: Arc<AtomicUsize>,
}

impl ReleaseWhenDone {
    fn new(ds: &Arc<Dataset>, live: &Arc<AtomicUsize>) -> Self {
        live.fetch_add(1, Ordering::SeqCst);
        ReleaseWhenDone {
            ds: Arc::clone(ds),
            live: Arc::clone(live),
        }
    }
}

impl Drop for ReleaseWhenDone {
    fn drop(&mut self) {
        if self.live.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.ds.release_kept_chunks();
        }
    }
}

/// The plan properties of a scan reading with `reader` in `partitioning`: its batches
/// arrive as units are read, and end.
fn properties(reader: &BatchReader, partitioning: Partitioning) -> Arc<PlanProperties> {
    Arc::new(PlanProperties::new(
        EquivalenceProperties::new(reader.schema()),
        partitioning,
        EmissionType::Incremental,
        Boundedness::Bounded,
    ))
}

/// Splits `units` into at most `n` contiguous groups of similar estimated cost
/// ([`unit_cost`]: stored bytes read plus decoded bytes produced).
fn balance(
    ds: &Dataset,
    projection: Option<&[usize]>,
    units: Vec<ZonedUnit>,
    n: usize,
) -> Vec<Vec<ZonedUnit>> {
    let n = n.max(1).min(units.len().max(1));
    let costs: Vec<u64> = units
        .iter()
        .map(|u| unit_cost(ds, &u.unit, projection).max(1))
        .collect();
    let total: u64 = costs.iter().sum();
    let per = total.div_ceil(n as u64).max(1);
    let mut out = vec![Vec::new()];
    let mut acc = 0;
    for (u, c) in units.into_iter().zip(costs) {
        if acc >= per && out.len() < n {
            out.push(Vec::new());
            acc = 0;
        }
        acc += c;
        out.last_mut().expect("non-empty").push(u);
    }
    out
}

impl Blosc2Exec {
    /// Whether earlier scans mapped the extrema of one of the output columns `positions`
    /// (value columns) in the zone of some unit of this scan (zone maps on): dynamic
    /// filters on them can then skip units.
    pub fn has_mapped_zones(&self, positions: &[usize]) -> bool {
        let Some(maps) = &self.zone_maps else {
            return false;
        };
        let mut cols = self.reader.value_columns();
        cols.retain(|(p, _)| positions.contains(p));
        self.partitions.iter().flatten().any(|u| {
            u.zone_rows > 0 && cols.iter().any(|&(_, c)| maps.extrema(c, u.zone).is_some())
        })
    }

    /// Builds the scan of `ds`, whose full schema is `schema`. `zone_maps`, when given,
    /// receives the min/max of every whole zone the scan decodes; `pruning` is what value
    /// pruning did while planning.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        ds: Arc<Dataset>,
        schema: SchemaRef,
        projection: Option<Vec<usize>>,
        units: Vec<ZonedUnit>,
        target_partitions: usize,
        batch_size: usize,
        limit: Option<usize>,
        stats: Statistics,
        selection: Selection,
        zone_maps: Option<Arc<ZoneMaps>>,
        pruning: PruneReport,
    ) -> Self {
        let reader = BatchReader::with_schema(Arc::clone(&ds), schema, projection.clone());
        let (chunks_total, chunks_selected) = match &*ds {
            Dataset::Array(a) => {
                let mut touched = std::collections::BTreeSet::new();
                for u in &units {
                    match &u.unit {
                        // A zoned unit of an array lies in the one chunk it names.
                        _ if u.zone != u64::MAX => {
                            touched.insert(u.zone);
                        }
                        ScanUnit::Box(_) if a.geometry.ndim() == 0 => {
                            touched.insert(0);
                        }
                        ScanUnit::Box(b) => touched.extend(a.geometry.chunks_in_box(b)),
                        ScanUnit::Rows(_) => {}
                    }
                }
                (a.geometry.nchunks(), touched.len() as u64)
            }
            Dataset::Table(_) => (0, 0),
        };
        // A limit the first unit fills takes one partition: the others would only decode
        // units nobody reads (the one left goes on past the first unit if rows are deleted).
        let n = match limit {
            Some(l) if units.first().is_some_and(|u| u.unit.rows() >= l as u64) => 1,
            _ => target_partitions,
        };
        let partitions = balance(&ds, projection.as_deref(), units, n);
        // Fewer units than cores: the idle cores decode blocks of each big chunk instead.
        let big_chunks = matches!(&*ds, Dataset::Array(a) if a.chunks_worth_threads());
        let reader = if big_chunks && partitions.len() < target_partitions {
            reader.with_block_threads(target_partitions / partitions.len().max(1))
        } else {
            reader
        };
        let props = properties(&reader, Partitioning::UnknownPartitioning(partitions.len()));
        Blosc2Exec {
            ds,
            projection,
            reader,
            partitions,
            batch_size: batch_size.max(1),
            zone_maps,
            pruning,
            limit,
            stats,
            selection,
            chunks_total,
            chunks_selected,
            metrics: ExecutionPlanMetricsSet::new(),
            execution: Arc::default(),
            props,
            summaries: None,
            dynamic: None,
            reversed: false,
            release: None,
            read_ahead: 1,
        }
    }

    /// This scan in one partition, in the container's order, on `threads` threads: each
    /// big chunk's blocks decoded in parallel, or else `threads` units read at once and
    /// handed out in order (while no dynamic filter is pushed into it). For consumers
    /// that need the rows as stored (`b2sql export`) without giving up the cores.
    pub(crate) fn in_order(mut self, threads: usize) -> Self {
        let units: Vec<ZonedUnit> = std::mem::take(&mut self.partitions)
            .into_iter()
            .flatten()
            .collect();
        self.partitions = vec![units];
        self.props = properties(&self.reader, Partitioning::UnknownPartitioning(1));
        let big_chunks = matches!(&*self.ds, Dataset::Array(a) if a.chunks_worth_threads());
        if big_chunks {
            self.reader = self.reader.with_block_threads(threads);
        } else {
            self.read_ahead = threads.max(1);
        }
        self
    }

    /// This scan dropping the chunks its reads keep when its last stream ends, so that
    /// the dataset holds none between scans (members of a multi-file table: each would
    /// keep a few chunks, and a table of many members would hold many).
    pub(crate) fn releasing_kept_chunks(mut self) -> Self {
        self.release = Some(Arc::default());
        self
    }

    /// This scan taking dynamic filters (a hash join's key bounds, a TopK's threshold)
    /// pushed into it while the query is planned, and skipping the units their state
    /// rules out as it runs; value statistics come from `summaries`, the zone maps and
    /// special chunks, as in value pruning.
    pub fn with_dynamic_filters(mut self, summaries: Arc<IndexCache>) -> Self {
        self.summaries = Some(summaries);
        self
    }

    /// The open table column behind output column `position`, if the scan reads a table.
    fn table_column(&self, position: usize) -> Option<&TableColumn> {
        let Dataset::Table(t) = &*self.ds else {
            return None;
        };
        t.column(*self.reader.projection().get(position)?)
    }

    /// The full-schema indices of output columns `positions` (those that exist).
    fn full_indices(&self, positions: &[usize]) -> Vec<usize> {
        let projection = self.reader.projection();
        positions
            .iter()
            .filter_map(|&i| projection.get(i).copied())
            .collect()
    }

    /// The number of values in the dictionary of output column `position`, when it is an
    /// open CTable dictionary column (its batches then carry the codes as they are
    /// stored, over that one dictionary).
    pub(crate) fn dictionary_len(&self, position: usize) -> Option<usize> {
        match &self.table_column(position)?.storage {
            ColumnStorage::Dictionary { values, .. } => Some(values.len()),
            _ => None,
        }
    }

    /// Output column `position` as a [`RawTextColumn`], when it is an open text column
    /// of a table that [`Blosc2Exec::with_raw_records`] can yield as stored
    /// ([`raw_text`]: `U<n>`, `utf8`, `vlstring`).
    pub(crate) fn raw_text_column(&self, position: usize) -> Option<RawTextColumn> {
        let Dataset::Table(t) = &*self.ds else {
            return None;
        };
        let c = self.table_column(position)?;
        let raw = raw_text(c)?;
        let null_text = match (&c.nulls, &c.storage) {
            // `vlstring` nulls are `nil` items; the scan applies no sentinel to them.
            (_, ColumnStorage::Var { .. }) => None,
            // A sentinel that is not text matches no text.
            (NullRule::Sentinel(v), _) => v.as_str().map(String::from),
            _ => None,
        };
        Some(RawTextColumn {
            raw,
            null_text,
            what: format!("{}: column {:?}", t.display(), c.name),
        })
    }

    /// This scan yielding its output columns `positions` that are tables' text columns
    /// as their stored records ([`BatchReader::with_raw_records`]: `FixedSizeBinary` or
    /// `LargeBinary`, a sentinel not applied), for a consumer of its own that groups them. Their zones
    /// are not mapped, and their statistics become unknown.
    pub(crate) fn with_raw_records(mut self, positions: &[usize]) -> Self {
        let cols = self.full_indices(positions);
        self.reader = self.reader.with_raw_records(&cols);
        for &c in &cols {
            if let Some(s) = self.stats.column_statistics.get_mut(c) {
                *s = datafusion::common::ColumnStatistics::new_unknown();
            }
        }
        self.props = properties(&self.reader, self.props.partitioning.clone());
        self
    }

    /// This scan yielding each scan unit as one batch, not sliced to `batch_size`: for a
    /// consumer of its own that folds every batch it gets (`Blosc2AggregateExec`), to
    /// which slices are only per-batch overhead. Metrics and executions start afresh.
    pub(crate) fn with_unit_batches(&self) -> Self {
        Self {
            batch_size: usize::MAX,
            metrics: ExecutionPlanMetricsSet::new(),
            execution: Arc::default(),
            ..self.clone()
        }
    }

    /// This scan reading its output columns `positions` for their nulls only
    /// ([`BatchReader::with_validity_only`]): for a consumer that only counts their
    /// non-null values. Their zones are not mapped (their values may be zeros).
    pub(crate) fn with_validity_only(mut self, positions: &[usize]) -> Self {
        let cols = self.full_indices(positions);
        self.reader = self.reader.with_validity_only(cols);
        self
    }

    /// This scan yielding only the table rows (array elements) whose `U<n>` or `S<n>`
    /// columns equal the values of `matches` (full-schema column index, values): see
    /// [`BatchReader::with_text_matches`]. Its row count becomes an upper bound, and it
    /// records no zone maps, since its batches no longer hold whole zones.
    pub(crate) fn with_text_matches(mut self, matches: Vec<(usize, Arc<TextMatch>)>) -> Self {
        if matches.is_empty() {
            return self;
        }
        self.reader = self.reader.with_text_matches(matches);
        self.zone_maps = None;
        self.stats = self.stats.to_inexact();
        self
    }

    /// This scan with chunk-aligned units when its dynamic filters name a coordinate other
    /// than `dim_0` of an N-d array read in units that span chunks along it (whole rows of
    /// chunks, planned so when no value filter asks for zones): such units hold every
    /// value of that coordinate, so no filter on it could skip them.
    fn zoned_for_dynamic_filters(self) -> Self {
        let Dataset::Array(a) = &*self.ds else {
            return self;
        };
        let ndim = a.geometry.ndim();
        let names_inner_dim = self.dynamic.iter().flat_map(|d| d.filters()).any(|f| {
            collect_columns(f)
                .iter()
                .any(|c| (1..ndim).any(|k| self.reader.full_schema().field(k).name() == c.name()))
        });
        let spanning = self.partitions.iter().flatten().any(|u| u.zone == u64::MAX);
        if !names_inner_dim || !spanning {
            return self;
        }
        let max_rows = (self.batch_size as u64).max(1).saturating_mul(8);
        let units = plan_zoned_units(&self.ds, &self.selection, max_rows);
        let n = self.partitions.len();
        let mut partitions = balance(&self.ds, self.projection.as_deref(), units, n);
        // The plan's partition count stays what it was declared.
        partitions.resize_with(n, Vec::new);
        if self.reversed {
            partitions.iter_mut().for_each(|p| p.reverse());
        }
        Self { partitions, ..self }
    }

    /// The selection this scan produces.
    pub fn selection(&self) -> &Selection {
        &self.selection
    }
}

impl DisplayAs for Blosc2Exec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let units: usize = self.partitions.iter().map(Vec::len).sum();
        write!(
            f,
            "Blosc2Exec: source={}, partitions={}, units={units}",
            self.ds.display(),
            self.partitions.len(),
        )?;
        if let Dataset::Array(_) = &*self.ds {
            write!(
                f,
                ", chunks={}/{} (pruned {})",
                self.chunks_selected,
                self.chunks_total,
                self.chunks_total - self.chunks_selected
            )?;
        }
        if self.selection.dims.iter().any(|d| d.len() != 1)
            || self.stats.num_rows.get_value().is_some()
        {
            let sel: Vec<String> = self
                .selection
                .dims
                .iter()
                .map(|d| format!("{d:?}"))
                .collect();
            write!(f, ", selection=[{}]", sel.join(" x "))?;
        }
        let p = &self.pruning;
        if p.units_before > 0 && !p.sources.is_empty() {
            write!(
                f,
                ", value_pruning=pruned {}/{} units ({})",
                p.units_pruned,
                p.units_before,
                p.sources.join("+")
            )?;
        }
        let text_columns = self.reader.text_match_columns();
        if !text_columns.is_empty() {
            write!(f, ", text_match=[{}]", text_columns.join(", "))?;
        }
        // The names of the columns among `cols` (full-schema indices) that `pick` keeps.
        let full = self.reader.full_schema();
        let mut list = |label: &str, cols: &[usize], pick: &dyn Fn(usize) -> bool| {
            let names: Vec<&str> = (cols.iter().copied())
                .filter(|&c| pick(c))
                .map(|c| full.field(c).name().as_str())
                .collect();
            match names.is_empty() {
                true => Ok(()),
                false => write!(f, ", {label}=[{}]", names.join(", ")),
            }
        };
        list("nulls_only", self.reader.validity_only(), &|c| {
            self.reader.reads_nulls_only(c)
        })?;
        list("raw_records", self.reader.projection(), &|c| {
            self.reader.reads_raw(c)
        })?;
        if let Some(l) = self.limit {
            write!(f, ", limit={l}")?;
        }
        if let Some(d) = &self.dynamic {
            let filters: Vec<String> = d.filters().iter().map(|e| e.to_string()).collect();
            write!(f, ", dynamic_filters=[{}]", filters.join(", "))?;
        }
        if self.reversed {
            write!(f, ", reverse_units=true")?;
        }
        Ok(())
    }
}

impl ExecutionPlan for Blosc2Exec {
    fn name(&self) -> &str {
        "Blosc2Exec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.props
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        Vec::new()
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        // The dynamic filters: a hash join computes its filter only when it finds the
        // filter in its probe side's expressions.
        for e in self.dynamic.iter().flat_map(|d| d.filters()) {
            if f(e)? == TreeNodeRecursion::Stop {
                return Ok(TreeNodeRecursion::Stop);
            }
        }
        Ok(TreeNodeRecursion::Continue)
    }

    #[allow(deprecated)]
    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if children.is_empty() {
            Ok(self)
        } else {
            Err(DataFusionError::Internal(
                "Blosc2Exec has no children".into(),
            ))
        }
    }

    fn reset_state(self: Arc<Self>) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(Arc::new(Self {
            execution: Arc::default(),
            ..(*self).clone()
        }))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        // Sharing units follows DataFusion's switch for its own file scans: executors that
        // run partitions apart (and never poll the siblings) turn it off.
        let share = context
            .session_config()
            .options()
            .execution
            .enable_file_stream_work_stealing;
        let (units, pieces) = self.execution.source(&self.partitions, partition, share);
        let reader = self.reader.clone();
        let m = &self.metrics;
        let chunks_read = MetricBuilder::new(m).counter("chunks_read", partition);
        let chunks_special = MetricBuilder::new(m).counter("chunks_special", partition);
        let blocks_decoded = MetricBuilder::new(m).counter("blocks_decoded", partition);
        let blocks_skipped = MetricBuilder::new(m).counter("blocks_skipped", partition);
        let bytes_fetched = MetricBuilder::new(m).counter("bytes_fetched", partition);
        let decode_time = MetricBuilder::new(m).subset_time("read_decode_time", partition);
        let units_pruned_dynamic =
            MetricBuilder::new(m).counter("units_pruned_by_dynamic_filters", partition);
        if partition == 0 {
            MetricBuilder::new(m)
                .counter("chunks_total", 0)
                .add(self.chunks_total as usize);
            MetricBuilder::new(m)
                .counter("chunks_pruned", 0)
                .add((self.chunks_total - self.chunks_selected) as usize);
            MetricBuilder::new(m)
                .counter("units_pruned_by_stats", 0)
                .add(self.pruning.units_pruned);
        }
        let batch_size = self.batch_size;
        let limit = self.limit;
        let dynamic = self.dynamic.clone();
        let probe = self
            .dynamic
            .as_deref()
            .and_then(|d| Probe::new(&self.ds, &self.reader, d))
            .map(Arc::new);
        // The produced columns that hold values (not dims): output position, full index;
        // not those read for their nulls only or as raw records.
        let mut record = self.reader.value_columns();
        record.retain(|&(_, c)| !self.reader.reads_nulls_only(c) && !self.reader.reads_raw(c));
        let recorder = match &self.zone_maps {
            Some(maps) if !record.is_empty() => Some(ZoneRecorder::new(
                Arc::clone(maps),
                pieces,
                &record,
                probe.as_deref().map_or(&[], Probe::first_columns),
            )),
            _ => None,
        };
        let release = self
            .release
            .as_ref()
            .map(|live| ReleaseWhenDone::new(&self.ds, live));
        let counters = Counters {
            chunks_read,
            chunks_special,
            blocks_decoded,
            blocks_skipped,
            bytes_fetched,
            units_pruned_dynamic,
        };
        // Each unit read: in order, one at a time (checked against dynamic filters
        // first), or `read_ahead` at once on the runtime's threads.
        let reads = match (self.read_ahead > 1, &dynamic) {
            (true, None) => read_ahead(reader, units, self.read_ahead, decode_time),
            _ => read_in_turn(reader, units, dynamic, probe, decode_time),
        };
        let out = UnitOutput {
            produced: 0,
            limit,
            batch_size,
            rec: recorder,
            counters,
            failed: false,
        };
        let stream = futures::stream::unfold((reads, out), move |(mut reads, mut out)| {
            // Dropped with the stream.
            let _ = &release;
            async move {
                if out.failed {
                    return None;
                }
                let next = match out.limit.is_some_and(|l| out.produced >= l) {
                    true => None,
                    false => reads.next().await,
                };
                let Some(read) = next else {
                    // A zone this partition read in part goes to its execution.
                    if let Some(rec) = &mut out.rec {
                        rec.finish();
                    }
                    return None;
                };
                let batches = out.emit(read);
                Some((futures::stream::iter(batches), (reads, out)))
            }
        })
        .flatten()
        .filter(|r| futures::future::ready(!matches!(r, Ok(b) if b.num_rows() == 0)));
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.reader.schema(),
            stream,
        )))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn statistics_from_inputs(
        &self,
        _input_stats: &[Arc<Statistics>],
        args: &StatisticsArgs,
    ) -> Result<Arc<Statistics>> {
        if args.partition().is_some() && self.partitions.len() > 1 {
            return Ok(Arc::new(Statistics::new_unknown(&self.reader.schema())));
        }
        let mut s = self.stats.clone();
        if let Some(p) = &self.projection {
            s = s.project(Some(p));
        }
        if let Some(l) = self.limit {
            s = s.with_fetch(Some(l), 0, 1)?;
        }
        Ok(Arc::new(s))
    }

    fn try_pushdown_sort(
        &self,
        order: &[PhysicalSortExpr],
    ) -> Result<SortOrderPushdownResult<Arc<dyn ExecutionPlan>>> {
        // An array's units read last first for `dim_k DESC`; the rows stay unsorted, so
        // the sort stays.
        let descending_coordinate = descending_coordinate(order)
            .is_some_and(|c| self.reader.schema().index_of(c.name()).ok() == Some(c.index()));
        if self.reversed || !descending_coordinate || !matches!(&*self.ds, Dataset::Array(_)) {
            return Ok(SortOrderPushdownResult::Unsupported);
        }
        let mut partitions = self.partitions.clone();
        partitions.iter_mut().for_each(|p| p.reverse());
        Ok(SortOrderPushdownResult::Inexact {
            inner: Arc::new(Self {
                partitions,
                reversed: true,
                metrics: ExecutionPlanMetricsSet::new(),
                execution: Arc::default(),
                ..self.clone()
            }),
        })
    }

    fn supports_limit_pushdown(&self) -> bool {
        true
    }

    fn handle_child_pushdown_result(
        &self,
        _phase: FilterPushdownPhase,
        child_pushdown_result: ChildPushdownResult,
        _config: &ConfigOptions,
    ) -> Result<FilterPushdownPropagation<Arc<dyn ExecutionPlan>>> {
        // Every filter stays with its operator; dynamic ones are also checked against
        // each unit's statistics before it is read. (Static filters were used while
        // planning: the table provider got them.)
        let filters: Vec<Arc<dyn PhysicalExpr>> = child_pushdown_result
            .parent_filters
            .into_iter()
            .map(|f| f.filter)
            .collect();
        let result = FilterPushdownPropagation::with_parent_pushdown_result(vec![
            PushedDown::No;
            filters.len()
        ]);
        let dynamic: Vec<_> = filters
            .into_iter()
            .filter(|f| DynamicFilterTracking::classify(f).contains_dynamic_filter())
            .collect();
        let Some(summaries) = &self.summaries else {
            return Ok(result);
        };
        if dynamic.is_empty() {
            return Ok(result);
        }
        let pruning = match &self.dynamic {
            Some(d) => d.with_filters(dynamic),
            None => DynamicPruning::new(
                dynamic,
                Arc::clone(&self.ds),
                self.reader.full_schema(),
                self.zone_maps.clone(),
                Arc::clone(summaries),
            ),
        };
        let node = Self {
            dynamic: Some(Arc::new(pruning)),
            metrics: ExecutionPlanMetricsSet::new(),
            execution: Arc::default(),
            ..self.clone()
        }
        .zoned_for_dynamic_filters();
        Ok(result.with_updated_node(Arc::new(node)))
    }
}

/// One unit's read: the unit, its batch (`None`: dynamic filters ruled it out), what
/// reading it cost, and the filter columns a probe read first (for the zone maps).
struct UnitRead {
    unit: ZonedUnit,
    batch: Result<Option<RecordBatch>>,
    stats: ReadStats,
    first: Option<RecordBatch>,
}

/// A partition's counters of what it read.
struct Counters {
    chunks_read: Count,
    chunks_special: Count,
    blocks_decoded: Count,
    blocks_skipped: Count,
    bytes_fetched: Count,
    units_pruned_dynamic: Count,
}

/// What a partition's stream does with each unit read, in order: counts it, records its
/// zones, and slices its batch to `batch_size`, up to `limit` rows in all.
struct UnitOutput {
    produced: usize,
    limit: Option<usize>,
    batch_size: usize,
    rec: Option<ZoneRecorder>,
    counters: Counters,
    /// A read failed: the stream ends after its error.
    failed: bool,
}

impl UnitOutput {
    fn emit(&mut self, read: UnitRead) -> Vec<Result<RecordBatch>> {
        let c = &self.counters;
        let st = &read.stats;
        c.chunks_read.add(st.chunks_read as usize);
        c.chunks_special.add(st.chunks_special as usize);
        c.blocks_decoded.add(st.blocks_decoded as usize);
        c.blocks_skipped.add(st.blocks_skipped as usize);
        c.bytes_fetched.add(st.bytes_fetched as usize);
        if let (Some(rec), Some(first)) = (&mut self.rec, &read.first) {
            rec.first(&read.unit, first);
        }
        let b = match read.batch {
            Ok(Some(b)) => b,
            Ok(None) => {
                c.units_pruned_dynamic.add(1);
                return Vec::new();
            }
            Err(e) => {
                self.failed = true;
                return vec![Err(e)];
            }
        };
        if let Some(rec) = &mut self.rec {
            rec.batch(&read.unit, &b);
        }
        let take = self
            .limit
            .map_or(b.num_rows(), |l| (l - self.produced).min(b.num_rows()));
        self.produced += take;
        let b = b.slice(0, take);
        (0..b.num_rows().max(1))
            .step_by(self.batch_size)
            .map(|o| Ok(b.slice(o, self.batch_size.min(b.num_rows() - o))))
            .collect()
    }
}

/// The reads of `units` one at a time, each checked against the dynamic filters first
/// (which may rule it out or cut it), through the probe when there is one.
fn read_in_turn(
    reader: BatchReader,
    units: UnitSource,
    dynamic: Option<Arc<DynamicPruning>>,
    probe: Option<Arc<Probe>>,
    decode_time: Time,
) -> BoxStream<'static, UnitRead> {
    futures::stream::unfold(units, move |mut units| {
        let (reader, dynamic, probe, decode_time) = (
            reader.clone(),
            dynamic.clone(),
            probe.clone(),
            decode_time.clone(),
        );
        async move {
            let mut unit = units.next()?;
            let mut stats = ReadStats::default();
            let mut first = None;
            // `None`: the dynamic filters rule the unit out, on its coordinate box
            // (which they may also cut), on its statistics, or on its filter columns
            // read first (nothing else is decoded).
            let keeps = match &dynamic {
                Some(d) => d.admit(&unit).await.map(|admitted| match admitted {
                    Some(u) => {
                        unit = u;
                        true
                    }
                    None => false,
                }),
                None => Ok(true),
            };
            let batch = match keeps {
                Ok(false) => Ok(None),
                Err(e) => Err(e),
                Ok(true) => {
                    let timer = decode_time.timer();
                    let r = match (&probe, &dynamic) {
                        (Some(p), Some(d)) => {
                            p.read(d, &unit.unit, &mut stats).await.map(|(b, f)| {
                                first = Some(f);
                                b
                            })
                        }
                        _ => reader
                            .read(&unit.unit, &mut stats)
                            .await
                            .map(Some)
                            .map_err(super::to_df),
                    };
                    timer.done();
                    r
                }
            };
            let read = UnitRead {
                unit,
                batch,
                stats,
                first,
            };
            Some((read, units))
        }
    })
    .boxed()
}

/// The reads of `units`, `threads` at a time on the runtime's threads, handed out in
/// order (a single-partition scan keeping the container's order on every core).
fn read_ahead(
    reader: BatchReader,
    units: UnitSource,
    threads: usize,
    decode_time: Time,
) -> BoxStream<'static, UnitRead> {
    futures::stream::iter(units)
        .map(move |unit| {
            let (reader, decode_time) = (reader.clone(), decode_time.clone());
            let same = unit.clone();
            let task = SpawnedTask::spawn(async move {
                let mut stats = ReadStats::default();
                let timer = decode_time.timer();
                let batch = reader
                    .read(&unit.unit, &mut stats)
                    .await
                    .map(Some)
                    .map_err(super::to_df);
                timer.done();
                UnitRead {
                    unit,
                    batch,
                    stats,
                    first: None,
                }
            });
            async move {
                task.join().await.unwrap_or_else(|e| UnitRead {
                    unit: same,
                    batch: Err(DataFusionError::External(Box::new(e))),
                    stats: ReadStats::default(),
                    first: None,
                })
            }
        })
        .buffered(threads)
        .boxed()
}
