//! `Blosc2Table`: a DataFusion [`TableProvider`] over any opened [`Dataset`].
//!
//! `scan` turns dimension filters into a [`Selection`] (Exact pushdown), value filters
//! into zone pruning, and equalities (or `LIKE 'x%'`) on fixed-width text into tests on
//! the stored records (`text_match`; both Inexact), plans scan units and spreads them over
//! `target_partitions`; statistics give exact row counts and exact `dim_k` ranges, so
//! `count(*)` and `min(dim_0)` need no decompression.

use super::computed::{ComputedColumns, full_schema};
use super::exec::Blosc2Exec;
use super::index_lookup::prune_by_column_indexes;
use super::prune::{IndexCache, PruneReport, exact_extrema, prune_units};
use super::pushdown;
use super::text_filters::logical_text_matches;
use super::zone_maps::{ZoneMaps, zone_map_column};
use crate::arrow_reader::reader::{Selection, plan_units, units_follow_chunks};
use crate::arrow_reader::schema::dataset_schema;
use crate::arrow_reader::zones::{ZonedUnit, plan_zoned_units};
use crate::dataset::Dataset;
use arrow::datatypes::{Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::common::DFSchema;
use datafusion::common::stats::Precision;
use datafusion::common::{ColumnStatistics, ScalarValue, Statistics};
use datafusion::datasource::{TableProvider, TableType};
use datafusion::error::Result;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::Column as PhysicalColumn;
use datafusion::physical_optimizer::pruning::PruningPredicateBuilder;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::projection::ProjectionExec;
use std::sync::Arc;

/// A Blosc2 / bcolz container as a DataFusion table.
#[derive(Debug, Clone)]
pub struct Blosc2Table {
    ds: Arc<Dataset>,
    /// The table's columns: the stored ones, then the computed ones.
    schema: SchemaRef,
    /// The stored columns (what [`Blosc2Exec`] reads).
    stored: SchemaRef,
    computed: Arc<ComputedColumns>,
    value_pruning: bool,
    zone_maps: Option<Arc<ZoneMaps>>,
    summaries: Arc<IndexCache>,
    /// Scans drop the chunks their reads keep when they end.
    release_kept_chunks: bool,
    /// Scans run in one partition, in stored order, on all target partitions' threads.
    in_order: bool,
}

impl Blosc2Table {
    /// Wraps an opened dataset, with value pruning and zone maps on.
    pub fn new(ds: Dataset) -> Self {
        let stored = dataset_schema(&ds);
        let computed = match &ds {
            Dataset::Table(t) => ComputedColumns::of_table(t, &stored),
            Dataset::Array(_) => ComputedColumns::default(),
        };
        let (schema, stored) = schemas(&stored, &computed);
        Blosc2Table {
            ds: Arc::new(ds),
            schema,
            stored,
            computed: Arc::new(computed),
            value_pruning: true,
            zone_maps: Some(Arc::default()),
            summaries: Arc::default(),
            release_kept_chunks: false,
            in_order: false,
        }
    }

    /// Scans of this table run in one partition, rows in stored order, reading ahead on
    /// the session's `target_partitions` threads ([`super::Blosc2Options::in_order`]).
    pub fn with_in_order(mut self, on: bool) -> Self {
        self.in_order = on;
        self
    }

    /// Scans of this table drop the chunks their reads keep (a few chunks, for units
    /// smaller than a chunk) when they end, instead of keeping them for the next query.
    /// For the members of a multi-file table, which would hold a few chunks each.
    pub fn with_kept_chunks_released(mut self) -> Self {
        self.release_kept_chunks = true;
        self
    }

    /// Turns value pruning (skipping zones on min/max statistics) on or off.
    pub fn with_value_pruning(mut self, on: bool) -> Self {
        self.value_pruning = on;
        self
    }

    /// Turns zone maps (min/max recorded while scanning, reused by later queries) on or
    /// off.
    pub fn with_zone_maps(mut self, on: bool) -> Self {
        self.zone_maps = on.then(Arc::default);
        self
    }

    /// Replaces the schema-level metadata (attributes, kind) the table reports and its
    /// scans produce.
    pub fn with_schema_metadata(mut self, meta: std::collections::HashMap<String, String>) -> Self {
        let stored = Schema::new_with_metadata(self.stored.fields().clone(), meta);
        (self.schema, self.stored) = schemas(&stored, &self.computed);
        self
    }

    /// The zone maps recorded so far (`None` when turned off).
    pub fn zone_maps(&self) -> Option<&Arc<ZoneMaps>> {
        self.zone_maps.as_ref()
    }

    /// The dataset.
    pub fn dataset(&self) -> &Arc<Dataset> {
        &self.ds
    }

    /// Shape used for selections: the array shape, or `[physical rows]` for tables.
    pub fn selection_shape(&self) -> Vec<u64> {
        match &*self.ds {
            Dataset::Array(a) => a.geometry.shape.clone(),
            Dataset::Table(t) => vec![t.physical_rows],
        }
    }

    fn dim_shape(&self) -> Vec<u64> {
        match &*self.ds {
            Dataset::Array(a) => a.geometry.shape.clone(),
            Dataset::Table(_) => Vec::new(),
        }
    }

    /// Statistics of a selection over the stored columns: exact rows (arrays) and exact
    /// dim ranges.
    pub fn statistics_for(&self, sel: &Selection) -> Statistics {
        // A non-nullable column holds no nulls; nor does an opened table column without
        // a stored null.
        let no_null = |i: usize| matches!(&*self.ds, Dataset::Table(t) if t.holds_no_null(i));
        let mut cols: Vec<ColumnStatistics> = self
            .stored
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| match f.is_nullable() && !no_null(i) {
                true => ColumnStatistics::new_unknown(),
                false => ColumnStatistics::new_unknown().with_null_count(Precision::Exact(0)),
            })
            .collect();
        let rows = match &*self.ds {
            Dataset::Array(a) => {
                for (col, r) in cols.iter_mut().zip(&sel.dims).take(a.geometry.ndim()) {
                    if let (Some(first), Some(last)) = (r.first(), r.last()) {
                        *col = ColumnStatistics::new_unknown()
                            .with_min_value(Precision::Exact(ScalarValue::Int64(Some(
                                first.start as i64,
                            ))))
                            .with_max_value(Precision::Exact(ScalarValue::Int64(Some(
                                last.end as i64 - 1,
                            ))))
                            .with_null_count(Precision::Exact(0));
                    }
                }
                if a.geometry.ndim() == 0 { 1 } else { sel.len() }
            }
            Dataset::Table(t) => t.live_rows,
        };
        Statistics {
            num_rows: Precision::Exact(rows as usize),
            total_byte_size: Precision::Absent,
            column_statistics: cols,
        }
    }
}

#[async_trait]
impl TableProvider for Blosc2Table {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        let shape = self.dim_shape();
        Ok(filters
            .iter()
            .map(|f| {
                if self.names_computed(f) {
                    // Evaluated by DataFusion above the projection that computes it.
                    TableProviderFilterPushDown::Unsupported
                } else if !shape.is_empty() && pushdown::is_exact(f, &shape) {
                    TableProviderFilterPushDown::Exact
                } else if self.value_pruning {
                    // Seen by `scan` for pruning; DataFusion still applies it.
                    TableProviderFilterPushDown::Inexact
                } else {
                    TableProviderFilterPushDown::Unsupported
                }
            })
            .collect())
    }

    fn statistics(&self) -> Option<Statistics> {
        let mut s = self.statistics_for(&Selection::all(&self.selection_shape()));
        s.column_statistics.extend(
            self.computed
                .columns
                .iter()
                .map(|_| ColumnStatistics::new_unknown()),
        );
        Some(s)
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let nstored = self.stored.fields().len();
        let wanted: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..self.schema.fields().len()).collect(),
        };
        if wanted.iter().all(|&i| i < nstored) {
            return self.scan_stored(state, projection, filters, limit).await;
        }
        // The stored columns wanted and those the computed ones read, then a projection.
        let computed = |i: usize| &self.computed.columns[i - nstored];
        let mut inner: Vec<usize> = wanted.iter().copied().filter(|&i| i < nstored).collect();
        for &i in wanted.iter().filter(|&&i| i >= nstored) {
            for c in computed(i).1.column_refs() {
                inner.push(self.stored.index_of(c.name())?);
            }
        }
        inner.sort_unstable();
        inner.dedup();
        let plan = self
            .scan_stored(state, Some(&inner), filters, limit)
            .await?;
        let inner_schema = plan.schema();
        let df_schema = DFSchema::try_from(inner_schema.as_ref().clone())?;
        let exprs = wanted
            .iter()
            .map(|&i| {
                let name = self.schema.field(i).name().clone();
                let e: Arc<dyn PhysicalExpr> = if i < nstored {
                    Arc::new(PhysicalColumn::new(&name, inner_schema.index_of(&name)?))
                } else {
                    state.create_physical_expr(computed(i).1.clone(), &df_schema)?
                };
                Ok((e, name))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Arc::new(ProjectionExec::try_new(exprs, plan)?))
    }
}

impl Blosc2Table {
    /// True when `f` reads a computed column.
    fn names_computed(&self, f: &Expr) -> bool {
        f.column_refs().iter().any(|c| {
            self.stored.index_of(c.name()).is_err() && self.schema.index_of(c.name()).is_ok()
        })
    }

    /// The scan of stored columns (`projection` indexes [`Self::stored`]).
    async fn scan_stored(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let shape = self.selection_shape();
        let sel = match &*self.ds {
            Dataset::Array(_) => pushdown::selection(filters, &shape),
            Dataset::Table(_) => Selection::all(&shape),
        };
        if let Dataset::Table(t) = &*self.ds {
            // Only the columns the query names are opened: the projection and the
            // columns of the filters (used for pruning).
            let mut cols: Vec<usize> = match projection {
                Some(p) => p.clone(),
                None => (0..t.ncolumns()).collect(),
            };
            for f in filters {
                for c in f.column_refs() {
                    if let Ok(i) = self.stored.index_of(c.name()) {
                        cols.push(i);
                    }
                }
            }
            cols.sort_unstable();
            cols.dedup();
            t.open_columns(cols).await.map_err(super::to_df)?;
        }
        let cfg = state.config();
        let batch_size = cfg.batch_size();
        let max_rows = (batch_size as u64).max(1) * 8;
        let dims = self.dim_shape();
        let value_filters: Vec<Expr> = filters
            .iter()
            .filter(|f| dims.is_empty() || !pushdown::is_exact(f, &dims))
            .cloned()
            .collect();
        let predicate = match conjunction(value_filters) {
            Some(expr) if self.value_pruning => {
                let df_schema = DFSchema::try_from(self.stored.as_ref().clone())?;
                let phys = state.create_physical_expr(expr, &df_schema)?;
                PruningPredicateBuilder::new()
                    .with_file_schema(Arc::clone(&self.stored))
                    .build(phys)
            }
            _ => None,
        };
        // Zone-aligned units when they can be pruned or feed the zone maps; an N-d array
        // scanned without a value filter keeps wider units (whole chunk rows) where they
        // fit, and the zones of the units it cuts chunk by chunk otherwise.
        let zoned =
            predicate.is_some() || dims.len() <= 1 || units_follow_chunks(&self.ds, &sel, max_rows);
        let units = if zoned {
            plan_zoned_units(&self.ds, &sel, max_rows)
        } else {
            plan_units(&self.ds, &sel, max_rows)
                .into_iter()
                .map(ZonedUnit::unzoned)
                .collect()
        };
        // Exact extrema and null counts of the projected value columns from the zone
        // maps, when the scan takes the whole array or table and earlier scans mapped
        // every zone: `min`, `max` and `count(x)` are then answered without a scan.
        let wanted: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..self.stored.fields().len()).collect(),
        };
        let whole = sel.len() == shape.iter().product::<u64>();
        type Mapped = (usize, (Option<(ScalarValue, ScalarValue)>, u64));
        let mapped: Vec<Mapped> = match &self.zone_maps {
            Some(zm) if whole && zoned => wanted
                .iter()
                .filter(|&&c| c >= dims.len())
                .filter_map(|&c| zone_map_column(zm, c, &units).map(|m| (c, m)))
                .collect(),
            _ => Vec::new(),
        };
        let (units, report) = match &predicate {
            Some(p) => {
                let (units, report) = prune_units(
                    &self.ds,
                    &self.stored,
                    units,
                    p,
                    self.zone_maps.as_deref(),
                    &self.summaries,
                )
                .await?;
                prune_by_column_indexes(
                    &self.ds,
                    &self.stored,
                    units,
                    report,
                    p.orig_expr(),
                    &self.summaries,
                )
                .await
                .map_err(super::to_df)?
            }
            None => (units, PruneReport::default()),
        };
        let mut stats = self.statistics_for(&sel);
        for (col, (extrema, nulls)) in mapped {
            let c = &mut stats.column_statistics[col];
            *c = std::mem::take(c).with_null_count(Precision::Exact(nulls as usize));
            if let Some((lo, hi)) = extrema {
                *c = std::mem::take(c)
                    .with_min_value(Precision::Exact(lo))
                    .with_max_value(Precision::Exact(hi));
            }
        }
        if let Dataset::Table(t) = &*self.ds {
            // Exact extrema from SUMMARY sidecars: `min`/`max` answered without a scan.
            for &col in &wanted {
                let extrema = exact_extrema(t, &self.stored, col, &self.summaries)
                    .await
                    .map_err(super::to_df)?;
                if let Some((lo, hi)) = extrema {
                    let c = &mut stats.column_statistics[col];
                    *c = std::mem::take(c)
                        .with_min_value(Precision::Exact(lo))
                        .with_max_value(Precision::Exact(hi));
                }
            }
        }
        let text_matches = logical_text_matches(&self.ds, &self.stored, filters)
            .await
            .map_err(super::to_df)?;
        let exec = Blosc2Exec::new(
            Arc::clone(&self.ds),
            Arc::clone(&self.stored),
            projection.cloned(),
            units,
            cfg.target_partitions(),
            batch_size,
            limit,
            stats,
            sel,
            self.zone_maps.clone(),
            report,
        )
        .with_text_matches(text_matches);
        let exec = match self.in_order {
            true => exec.in_order(cfg.target_partitions()),
            false => exec,
        };
        // Dynamic filters prune on statistics as value pruning does: with it, or not at all.
        let exec = match self.value_pruning {
            true => exec.with_dynamic_filters(Arc::clone(&self.summaries)),
            false => exec,
        };
        let exec = match self.release_kept_chunks {
            true => exec.releasing_kept_chunks(),
            false => exec,
        };
        Ok(Arc::new(exec))
    }
}

/// The table's schema (`stored`, then the computed columns) and the stored one, both with
/// the table's metadata (DataFusion checks that a scan reports the table's).
fn schemas(stored: &Schema, computed: &ComputedColumns) -> (SchemaRef, SchemaRef) {
    let schema = full_schema(stored, computed);
    let stored = Schema::new_with_metadata(stored.fields().clone(), schema.metadata().clone());
    (Arc::new(schema), Arc::new(stored))
}
