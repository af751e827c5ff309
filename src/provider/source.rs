//! [`Blosc2Source`]: the [`FileSource`] of [`super::format::Blosc2Format`], which
//! DataFusion's `DataSourceExec` drives: it holds the scan's projection and the filters
//! pushed into it (static and dynamic), and makes an opener (`opener.rs`) per partition.
//!
//! Filters are taken for pruning and reported not pushed down (DataFusion still applies
//! them to the rows, as with Parquet's row-group pruning), except comparisons of a
//! coordinate with an integer (`dim_0 BETWEEN 10 AND 20`, `dim_1 = 3`) over arrays: each
//! file's units are cut to the box those allow, so they are reported exact and
//! DataFusion's `FilterExec` over them goes.

use super::dynamic::{coordinate_range, descending_coordinate};
use super::format::FileZoneMaps;
use super::listed::ListedFiles;
use super::opener::Blosc2Opener;
use crate::arrow_reader::schema::KIND_KEY;
use arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::datasource::physical_plan::{FileOpener, FileScanConfig, FileSource};
use datafusion::datasource::projection::{ProjectionOpener, SplitProjection};
use datafusion::datasource::table_schema::TableSchema;
use datafusion::error::Result;
use datafusion::physical_expr::projection::ProjectionExprs;
use datafusion::physical_expr::split_conjunction;
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr, PhysicalSortExpr};
use datafusion::physical_plan::filter_pushdown::{FilterPushdownPropagation, PushedDown};
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use datafusion::physical_plan::{
    DisplayFormatType, SortOrderPushdownResult, apply_expression_roots,
};
use object_store::ObjectStore;
use std::fmt;
use std::sync::Arc;

/// The scan of Blosc2 files listed by a `ListingTable` (or any [`FileScanConfig`]).
#[derive(Clone)]
pub struct Blosc2Source {
    table_schema: TableSchema,
    projection: SplitProjection,
    batch_size: Option<usize>,
    /// Over the table schema (file columns, then partition columns).
    filters: Vec<Arc<dyn PhysicalExpr>>,
    /// Read each file's units last first (a `dim_k DESC` order was pushed down).
    reverse_units: bool,
    /// Some filter was reported exact ([`exact_on_arrays`]): the files must be arrays.
    exact_coordinates: bool,
    /// Zone maps by file, shared by the scans of one format; `None`: off.
    zone_maps: Option<Arc<FileZoneMaps>>,
    /// How the scan opens files (local reads and the cache shared by one format's scans).
    files: ListedFiles,
    metrics: ExecutionPlanMetricsSet,
}

impl fmt::Debug for Blosc2Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Blosc2Source")
            .field("projection", &self.projection.file_indices)
            .field("filters", &self.filters)
            .finish_non_exhaustive()
    }
}

impl Blosc2Source {
    /// The scan of every column of `table_schema`, without filters.
    pub fn new(table_schema: impl Into<TableSchema>) -> Self {
        let table_schema = table_schema.into();
        Blosc2Source {
            projection: SplitProjection::unprojected(&table_schema),
            table_schema,
            batch_size: None,
            filters: Vec::new(),
            reverse_units: false,
            exact_coordinates: false,
            zone_maps: None,
            files: ListedFiles::default(),
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// This scan recording and pruning on the zone maps of `maps`.
    pub(crate) fn with_file_zone_maps(mut self, maps: Option<Arc<FileZoneMaps>>) -> Self {
        self.zone_maps = maps;
        self
    }

    /// This scan opening its files through `files`.
    pub(crate) fn with_listed_files(mut self, files: ListedFiles) -> Self {
        self.files = files;
        self
    }

    /// The filters the scan prunes on (over the table schema).
    pub fn filters(&self) -> &[Arc<dyn PhysicalExpr>] {
        &self.filters
    }
}

impl FileSource for Blosc2Source {
    fn create_file_opener(
        &self,
        object_store: Arc<dyn ObjectStore>,
        base_config: &FileScanConfig,
        partition: usize,
    ) -> Result<Arc<dyn FileOpener>> {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let opener = Blosc2Opener {
            store: object_store,
            table_schema: self.table_schema.clone(),
            file_indices: self.projection.file_indices.clone(),
            filters: self.filters.clone(),
            reverse_units: self.reverse_units,
            exact_coordinates: self.exact_coordinates,
            zone_maps: self.zone_maps.clone(),
            files: self.files.clone(),
            batch_size: self.batch_size.unwrap_or(8192).max(1),
            limit: base_config.limit,
            block_threads: (threads / base_config.file_groups.len().max(1)).max(1),
            metrics: self.metrics.clone(),
            partition,
        };
        ProjectionOpener::try_new(
            self.projection.clone(),
            Arc::new(opener),
            self.table_schema.file_schema(),
        )
    }

    fn table_schema(&self) -> &TableSchema {
        &self.table_schema
    }

    fn with_batch_size(&self, batch_size: usize) -> Arc<dyn FileSource> {
        Arc::new(Blosc2Source {
            batch_size: Some(batch_size),
            ..self.clone()
        })
    }

    fn filter(&self) -> Option<Arc<dyn PhysicalExpr>> {
        (!self.filters.is_empty())
            .then(|| datafusion::physical_expr::utils::conjunction(self.filters.clone()))
    }

    fn projection(&self) -> Option<&ProjectionExprs> {
        Some(&self.projection.source)
    }

    fn try_pushdown_projection(
        &self,
        projection: &ProjectionExprs,
    ) -> Result<Option<Arc<dyn FileSource>>> {
        let merged = self.projection.source.try_merge(projection)?;
        Ok(Some(Arc::new(Blosc2Source {
            projection: SplitProjection::new(self.table_schema.file_schema(), &merged),
            ..self.clone()
        })))
    }

    fn try_pushdown_filters(
        &self,
        filters: Vec<Arc<dyn PhysicalExpr>>,
        _config: &ConfigOptions,
    ) -> Result<FilterPushdownPropagation<Arc<dyn FileSource>>> {
        let mut source = self.clone();
        let pushed: Vec<PushedDown> = filters
            .iter()
            .map(|f| match exact_on_arrays(&self.table_schema, f) {
                true => PushedDown::Yes,
                false => PushedDown::No,
            })
            .collect();
        source.exact_coordinates |= pushed.iter().any(|p| matches!(p, PushedDown::Yes));
        let result = FilterPushdownPropagation::with_parent_pushdown_result(pushed);
        if filters.is_empty() {
            return Ok(result);
        }
        source.filters.extend(filters);
        Ok(result.with_updated_node(Arc::new(source) as Arc<dyn FileSource>))
    }

    fn try_pushdown_sort(
        &self,
        order: &[PhysicalSortExpr],
        eq_properties: &EquivalenceProperties,
    ) -> Result<SortOrderPushdownResult<Arc<dyn FileSource>>> {
        if order.is_empty() {
            return Ok(SortOrderPushdownResult::Unsupported);
        }
        if eq_properties.ordering_satisfy(order.iter().cloned())? {
            return Ok(SortOrderPushdownResult::Exact {
                inner: Arc::new(self.clone()),
            });
        }
        // A declared order that is a prefix of the request serves the sort better as it
        // is (a TopK stops early on it).
        for n in 1..order.len() {
            if eq_properties.ordering_satisfy(order[..n].iter().cloned())? {
                return Ok(SortOrderPushdownResult::Unsupported);
            }
        }
        if descending_coordinate(order).is_some() {
            return Ok(SortOrderPushdownResult::Inexact {
                inner: Arc::new(Blosc2Source {
                    reverse_units: true,
                    ..self.clone()
                }),
            });
        }
        Ok(SortOrderPushdownResult::Unsupported)
    }

    fn metrics(&self) -> &ExecutionPlanMetricsSet {
        &self.metrics
    }

    fn file_type(&self) -> &str {
        "blosc2"
    }

    fn fmt_extra(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        if matches!(t, DisplayFormatType::TreeRender) {
            return Ok(());
        }
        if !self.filters.is_empty() {
            let shown: Vec<String> = self.filters.iter().map(|e| e.to_string()).collect();
            write!(f, ", pruning_filters=[{}]", shown.join(", "))?;
        }
        if self.reverse_units {
            write!(f, ", reverse_units=true")?;
        }
        Ok(())
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        // The filters first: a hash join computes its dynamic filter only when it finds
        // the filter here.
        for e in &self.filters {
            if f(e)? == TreeNodeRecursion::Stop {
                return Ok(TreeNodeRecursion::Stop);
            }
        }
        apply_expression_roots(self.projection.source.iter(), f)
    }
}

/// Whether the scan applies `filter` exactly: the files are b2nd arrays or super-chunks
/// (their schema's kind says so; `Blosc2Format` reads no directory containers), and each
/// of the filter's conjuncts compares one of their coordinates with an integer
/// ([`coordinate_range`]), which the opener cuts each file's units to.
fn exact_on_arrays(table: &TableSchema, filter: &Arc<dyn PhysicalExpr>) -> bool {
    let file = table.file_schema();
    let arrays = matches!(
        file.metadata().get(KIND_KEY).map(String::as_str),
        Some("b2nd" | "schunk")
    );
    let coordinate = |c: &Arc<dyn PhysicalExpr>| {
        coordinate_range(c).is_some()
            && collect_columns(c).iter().all(|col| {
                file.field_with_name(col.name())
                    .is_ok_and(|f| f.data_type() == &DataType::Int64)
            })
    };
    arrays && split_conjunction(filter).into_iter().all(coordinate)
}
