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
use arrow::datatypes::{DataType, Schema};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::datasource::physical_plan::{FileOpener, FileScanConfig, FileSource};
use datafusion::datasource::projection::{ProjectionOpener, SplitProjection};
use datafusion::datasource::table_schema::TableSchema;
use datafusion::error::Result;
use datafusion::physical_expr::projection::ProjectionExprs;
use datafusion::physical_expr::split_conjunction;
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
        // The filters reported exact are those `exact_on_arrays` takes (dynamic ones never).
        let exact = self
            .filters
            .iter()
            .any(|f| exact_on_arrays(&self.table_schema, f));
        let exact_dims = match exact {
            true => leading_coordinates(self.table_schema.file_schema()),
            false => 0,
        };
        let opener = Blosc2Opener {
            store: object_store,
            table_schema: self.table_schema.clone(),
            file_indices: self.projection.file_indices.clone(),
            filters: self.filters.clone(),
            reverse_units: self.reverse_units,
            exact_dims,
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

/// The number of coordinate columns an array's schema starts with: `dim_0`, `dim_1`, …
/// (`Int64`), as many as lead the schema in that order.
fn leading_coordinates(file: &Schema) -> usize {
    file.fields()
        .iter()
        .enumerate()
        .take_while(|(k, f)| f.name() == &format!("dim_{k}") && f.data_type() == &DataType::Int64)
        .count()
}

/// Whether the scan applies `filter` exactly: the files are b2nd arrays or super-chunks
/// (their schema's kind says so; `Blosc2Format` reads no directory containers), and each
/// of the filter's conjuncts compares one of their coordinates with an integer
/// ([`coordinate_range`]), which the opener cuts each file's units to. (The opener
/// refuses a file whose dimensions are fewer than the schema's coordinate columns.)
fn exact_on_arrays(table: &TableSchema, filter: &Arc<dyn PhysicalExpr>) -> bool {
    let file = table.file_schema();
    let arrays = matches!(
        file.metadata().get(KIND_KEY).map(String::as_str),
        Some("b2nd" | "schunk")
    );
    // The comparison's one column is `dim_k`, which leads the schema when `k < dims`.
    let dims = leading_coordinates(file);
    let coordinate =
        |c: &Arc<dyn PhysicalExpr>| coordinate_range(c).is_some_and(|(k, _, _)| k < dims);
    arrays && split_conjunction(filter).into_iter().all(coordinate)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::Field;
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::{BinaryExpr, col, lit};
    use std::collections::HashMap;

    fn schema(kind: &str, fields: &[(&str, DataType)]) -> Schema {
        let fields: Vec<Field> = fields
            .iter()
            .map(|(n, t)| Field::new(*n, t.clone(), false))
            .collect();
        let meta = HashMap::from([(KIND_KEY.to_string(), kind.to_string())]);
        Schema::new_with_metadata(fields, meta)
    }

    #[test]
    fn coordinates_lead_an_arrays_schema() {
        let i = DataType::Int64;
        let f = DataType::Float64;
        let cases = [
            (
                vec![
                    ("dim_0", i.clone()),
                    ("dim_1", i.clone()),
                    ("value", f.clone()),
                ],
                2,
            ),
            (
                vec![("dim_0", i.clone()), ("a", i.clone()), ("dim_2", i.clone())],
                1,
            ),
            (vec![("dim_1", i.clone()), ("value", f.clone())], 0),
            (vec![("dim_0", DataType::Int32)], 0),
            (vec![("value", f.clone())], 0),
        ];
        for (fields, want) in cases {
            assert_eq!(
                leading_coordinates(&schema("b2nd", &fields)),
                want,
                "{fields:?}"
            );
        }
    }

    /// Only conjunctions of coordinate-integer comparisons over arrays are exact.
    #[test]
    fn only_coordinate_ranges_over_arrays_are_exact() {
        let fields = [
            ("dim_0", DataType::Int64),
            ("dim_1", DataType::Int64),
            ("value", DataType::Float64),
        ];
        let array = schema("b2nd", &fields);
        let cmp = |name: &str, op: Operator, v: datafusion::common::ScalarValue| {
            let c = col(name, &array).unwrap();
            Arc::new(BinaryExpr::new(c, op, lit(v))) as Arc<dyn PhysicalExpr>
        };
        let and = |a, b| Arc::new(BinaryExpr::new(a, Operator::And, b)) as Arc<dyn PhysicalExpr>;
        let or = |a, b| Arc::new(BinaryExpr::new(a, Operator::Or, b)) as Arc<dyn PhysicalExpr>;
        let ge0 = cmp("dim_0", Operator::GtEq, 3i64.into());
        let lt1 = cmp("dim_1", Operator::Lt, 5i64.into());
        let cases: Vec<(Arc<dyn PhysicalExpr>, bool)> = vec![
            (Arc::clone(&ge0), true),
            (and(Arc::clone(&ge0), Arc::clone(&lt1)), true),
            (cmp("dim_0", Operator::Eq, 4i64.into()), true),
            (cmp("dim_0", Operator::NotEq, 4i64.into()), false),
            (cmp("dim_0", Operator::Eq, 4i32.into()), false),
            (cmp("value", Operator::Gt, 1.5f64.into()), false),
            (
                and(Arc::clone(&ge0), cmp("value", Operator::Gt, 1.5f64.into())),
                false,
            ),
            (or(Arc::clone(&ge0), Arc::clone(&lt1)), false),
        ];
        let table = TableSchema::from(Arc::new(array.clone()));
        for (filter, want) in &cases {
            assert_eq!(exact_on_arrays(&table, filter), *want, "{filter}");
        }
        // Never over tables, whose rows are not coordinates.
        let ctable = TableSchema::from(Arc::new(schema("ctable", &fields)));
        assert!(!exact_on_arrays(&ctable, &ge0));
    }
}
