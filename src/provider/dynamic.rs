//! Dynamic filters: predicates other operators push into the scan while the query runs
//! (DataFusion's dynamic filter pushdown). A hash join's build side sends the bounds of
//! its keys (`dim_1 >= 7 AND dim_1 <= 7`, …) to the probe side's scan; a `TopK` (`ORDER
//! BY … LIMIT k`) sends the threshold its heap has reached (`dim_0 > 8180`). Before the
//! scan reads a unit, [`DynamicPruning::keeps`] checks the filter's current state against
//! the unit's statistics — its coordinate box, and the value statistics value pruning
//! uses ([`super::prune`]) — and skips units no row of which can pass. A CTable's
//! indexes are looked up for the filter's state once per generation
//! (`index_lookup`): a join's keys (`k IN (3, 7, 90)`) find the few units
//! holding them, a TopK's narrowing threshold the units holding values past it. A
//! partitioned join's filter, a `CASE` routing each row to its partition's keys, is
//! checked as the union of all partitions' keys (`branches_or`).
//!
//! A table's scan also reads the columns its filters name first ([`Probe`]) and decodes
//! its other columns only for units where some row passes.
//!
//! The filters stay with the operators that sent them (reported not pushed down): a kept
//! unit's rows are still filtered there, so skipping only ever saves work.

use super::index_lookup::{IndexFinds, index_finds, prune_by_finds};
use super::prune::{IndexCache, PruneReport, prune_units};
use super::zone_maps::ZoneMaps;
use crate::array::ndarray::ReadStats;
use crate::arrow_reader::reader::{BatchReader, ScanUnit};
use crate::arrow_reader::zones::ZonedUnit;
use crate::dataset::Dataset;
use arrow::array::{Array, BooleanArray, RecordBatch, RecordBatchOptions};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::ScalarValue;
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::Operator;
use datafusion::logical_expr::interval_arithmetic::Interval;
use datafusion::physical_expr::expressions::{BinaryExpr, CaseExpr, Column, Literal, lit};
use datafusion::physical_expr::utils::{collect_columns, conjunction};
use datafusion::physical_expr::{
    AnalysisContext, ExprBoundaries, PhysicalExpr, PhysicalSortExpr, analyze, split_conjunction,
};
use datafusion::physical_expr_common::physical_expr::{
    snapshot_generation, snapshot_physical_expr,
};
use datafusion::physical_optimizer::pruning::{PruningPredicate, PruningPredicateBuilder};
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex};

/// The dynamic filters of one scan and what they are checked against.
pub struct DynamicPruning {
    /// The filters as pushed, over the scan's output columns.
    filters: Vec<Arc<dyn PhysicalExpr>>,
    ds: Arc<Dataset>,
    /// The dataset's stored columns (what the pruning predicate is built over).
    stored: SchemaRef,
    zone_maps: Option<Arc<ZoneMaps>>,
    summaries: Arc<IndexCache>,
    /// The filters' state of one generation, rebuilt when a filter changes.
    current: Mutex<Option<Snapshot>>,
    /// An array's coordinate box the filters allow, for one generation.
    coordinates: Mutex<Option<(u64, Vec<Range<u64>>)>>,
    /// What a table's indexes find for the filters, for one generation.
    finds: Mutex<Option<(u64, Option<Arc<IndexFinds>>)>>,
}

/// The filters' state of one generation.
#[derive(Clone)]
struct Snapshot {
    generation: u64,
    /// Over the stored columns; `None`: nothing to prune on.
    predicate: Option<Arc<PruningPredicate>>,
    /// The filters' conjunction over the scan's output columns; `None`: no filter.
    expr: Option<Arc<dyn PhysicalExpr>>,
}

impl fmt::Debug for DynamicPruning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DynamicPruning")
            .field("filters", &self.filters)
            .finish_non_exhaustive()
    }
}

impl DynamicPruning {
    /// Pruning on `filters` (over the scan's output columns) for units of `ds`, with the
    /// statistics sources value pruning uses.
    pub fn new(
        filters: Vec<Arc<dyn PhysicalExpr>>,
        ds: Arc<Dataset>,
        stored: SchemaRef,
        zone_maps: Option<Arc<ZoneMaps>>,
        summaries: Arc<IndexCache>,
    ) -> Self {
        DynamicPruning {
            filters,
            ds,
            stored,
            zone_maps,
            summaries,
            current: Mutex::new(None),
            coordinates: Mutex::new(None),
            finds: Mutex::new(None),
        }
    }

    /// The filters, as pushed.
    pub fn filters(&self) -> &[Arc<dyn PhysicalExpr>] {
        &self.filters
    }

    /// This pruning with `more` filters added.
    pub fn with_filters(&self, more: Vec<Arc<dyn PhysicalExpr>>) -> Self {
        let mut filters = self.filters.clone();
        filters.extend(more);
        DynamicPruning::new(
            filters,
            Arc::clone(&self.ds),
            Arc::clone(&self.stored),
            self.zone_maps.clone(),
            Arc::clone(&self.summaries),
        )
    }

    /// False when the filters' current state proves that no row of `unit` passes them.
    ///
    /// # Errors
    /// Snapshotting a filter, reading a SUMMARY sidecar or an index, or evaluating the
    /// predicate.
    pub async fn keeps(&self, unit: &ZonedUnit) -> Result<bool> {
        // The index's finds first: looked up once per generation, they rule most units
        // out before their statistics are assembled.
        if self.index_finds().await?.is_some_and(|f| !f.holds(unit)) {
            return Ok(false);
        }
        let (kept, _) = self.prune(vec![unit.clone()]).await?;
        Ok(!kept.is_empty())
    }

    /// What a table's indexes find for the filters' current state
    /// ([`super::index_lookup::index_finds`]: a join's keys, a TopK's threshold), looked
    /// up once per generation.
    ///
    /// # Errors
    /// Snapshotting a filter, reading an index.
    async fn index_finds(&self) -> Result<Option<Arc<IndexFinds>>> {
        if !matches!(&*self.ds, Dataset::Table(_)) {
            return Ok(None);
        }
        let snapshot = self.snapshot()?;
        let lock = || self.finds.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((g, f)) = lock().as_ref()
            && *g == snapshot.generation
        {
            return Ok(f.clone());
        }
        // Two scans meeting a new generation at once may both look it up.
        let finds = match &snapshot.predicate {
            Some(p) => index_finds(&self.ds, &self.stored, p.orig_expr(), &self.summaries)
                .await
                .map_err(super::to_df)?
                .map(Arc::new),
            None => None,
        };
        *lock() = Some((snapshot.generation, finds.clone()));
        Ok(finds)
    }

    /// The units of `units` the filters' current state does not rule out, and what
    /// pruning did.
    ///
    /// # Errors
    /// Snapshotting a filter, reading a SUMMARY sidecar, or evaluating the predicate.
    pub async fn prune(&self, units: Vec<ZonedUnit>) -> Result<(Vec<ZonedUnit>, PruneReport)> {
        let Some(predicate) = self.snapshot()?.predicate else {
            let report = PruneReport {
                units_before: units.len(),
                ..PruneReport::default()
            };
            return Ok((units, report));
        };
        prune_units(
            &self.ds,
            &self.stored,
            units,
            &predicate,
            self.zone_maps.as_deref(),
            &self.summaries,
        )
        .await
    }

    /// [`Self::prune`], then the units a column's index proves empty
    /// (`index_lookup.rs`): for a scan's first pruning, when a file is opened (its
    /// lookups read the index; later prunings, as the filters tighten, do not repeat
    /// them).
    ///
    /// # Errors
    /// As [`Self::prune`], and reading an index.
    pub async fn prune_on_open(
        &self,
        units: Vec<ZonedUnit>,
    ) -> Result<(Vec<ZonedUnit>, PruneReport)> {
        let (units, report) = self.prune(units).await?;
        let finds = self.index_finds().await?;
        Ok(prune_by_finds(units, report, finds.as_deref()))
    }

    /// `unit` cut to the coordinate box the filters' current state allows (an array's:
    /// a join's key bounds on `dim_k`); `None` when nothing of it is left. A table's unit
    /// is returned as it is.
    ///
    /// # Errors
    /// Snapshotting a filter.
    pub fn clip(&self, unit: &ZonedUnit) -> Result<Option<ZonedUnit>> {
        let Dataset::Array(a) = &*self.ds else {
            return Ok(Some(unit.clone()));
        };
        let generation = self.generation();
        let mut cached = self.coordinates.lock().unwrap_or_else(|e| e.into_inner());
        let bx = match cached.as_ref() {
            Some((g, bx)) if *g == generation => bx,
            _ => {
                let bx = coordinate_box(&self.filters, &a.geometry.shape)?;
                &cached.insert((generation, bx)).1
            }
        };
        Ok(clip(vec![unit.clone()], bx).pop())
    }

    /// `unit` cut by [`Self::clip`], or `None` when the filters' current state rules it
    /// out: nothing of its box is left, or [`Self::keeps`] says no row of it passes.
    ///
    /// # Errors
    /// As [`Self::clip`] and [`Self::keeps`].
    pub async fn admit(&self, unit: &ZonedUnit) -> Result<Option<ZonedUnit>> {
        match self.clip(unit)? {
            Some(u) if self.keeps(&u).await? => Ok(Some(u)),
            _ => Ok(None),
        }
    }

    /// The filters' generation: changes whenever one of them does.
    fn generation(&self) -> u64 {
        self.filters
            .iter()
            .fold(0u64, |g, f| g.wrapping_add(snapshot_generation(f)))
    }

    /// The names of the columns the filters read.
    pub fn column_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .filters
            .iter()
            .flat_map(|f| collect_columns(f).into_iter().map(|c| c.name().to_string()))
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// True when some row of `batch` (columns named as the scan's output columns) passes
    /// the filters' current state, or when they cannot be evaluated on it.
    ///
    /// # Errors
    /// Snapshotting or evaluating a filter.
    pub fn any_row_passes(&self, batch: &RecordBatch) -> Result<bool> {
        let Some(expr) = self.snapshot()?.expr else {
            return Ok(true);
        };
        let schema = batch.schema();
        if collect_columns(&expr)
            .iter()
            .any(|c| schema.index_of(c.name()).is_err())
        {
            return Ok(true);
        }
        let expr = remap_columns(expr, &schema)?;
        let result = expr.evaluate(batch)?.into_array(batch.num_rows())?;
        Ok(match result.as_any().downcast_ref::<BooleanArray>() {
            Some(b) => b.true_count() > 0,
            None => true,
        })
    }

    /// The filters' current state.
    fn snapshot(&self) -> Result<Snapshot> {
        let generation = self.generation();
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = current.as_ref()
            && s.generation == generation
        {
            return Ok(s.clone());
        }
        let snapshots = self
            .filters
            .iter()
            .map(|f| snapshot_physical_expr(Arc::clone(f)))
            .collect::<Result<Vec<_>>>()?;
        // A filter naming a column the dataset does not store (one a projection above
        // computes) says nothing about the units.
        let mut over_stored = Vec::with_capacity(snapshots.len());
        for s in &snapshots {
            // A partitioned join's `CASE` of per-partition filters, which pruning
            // cannot read, as the `OR` of its branches.
            let s = branches_or(s);
            let stored = collect_columns(&s)
                .iter()
                .all(|c| self.stored.index_of(c.name()).is_ok());
            if stored {
                over_stored.push(remap_columns(s, &self.stored)?);
            }
        }
        let predicate = match over_stored.is_empty() {
            true => None,
            false => PruningPredicateBuilder::new()
                .with_file_schema(Arc::clone(&self.stored))
                .build(conjunction(over_stored)),
        };
        let snapshot = Snapshot {
            generation,
            predicate,
            expr: (!snapshots.is_empty()).then(|| conjunction(snapshots)),
        };
        *current = Some(snapshot.clone());
        Ok(snapshot)
    }
}

/// A boolean `expr` widened for pruning: each `CASE` among its conjuncts and disjuncts
/// becomes the `OR` of what it can return (its `THEN` and `ELSE` results, a `NULL` or
/// `false` result left out), which holds for every row the `CASE` holds for. A partitioned
/// hash join sends its probe side `CASE hash(k) % n WHEN 0 THEN k IN (…) … END`, one
/// branch per partition's build keys: pruning and index lookups cannot read the
/// routing, but they can read the union of the partitions' keys.
pub(crate) fn branches_or(expr: &Arc<dyn PhysicalExpr>) -> Arc<dyn PhysicalExpr> {
    if let Some(b) = expr.downcast_ref::<BinaryExpr>()
        && matches!(b.op(), Operator::And | Operator::Or)
    {
        let (l, r) = (branches_or(b.left()), branches_or(b.right()));
        if Arc::ptr_eq(&l, b.left()) && Arc::ptr_eq(&r, b.right()) {
            return Arc::clone(expr);
        }
        return Arc::new(BinaryExpr::new(l, *b.op(), r));
    }
    let Some(case) = expr.downcast_ref::<CaseExpr>() else {
        return Arc::clone(expr);
    };
    let results = case
        .when_then_expr()
        .iter()
        .map(|(_, then)| then)
        .chain(case.else_expr());
    let mut any: Option<Arc<dyn PhysicalExpr>> = None;
    for r in results {
        match r.downcast_ref::<Literal>().map(Literal::value) {
            Some(ScalarValue::Boolean(Some(false) | None)) => continue,
            Some(ScalarValue::Boolean(Some(true))) => return lit(true),
            _ => {}
        }
        let r = branches_or(r);
        any = Some(match any {
            Some(a) => Arc::new(BinaryExpr::new(a, Operator::Or, r)),
            None => r,
        });
    }
    any.unwrap_or_else(|| lit(false))
}

/// `expr` with each column's index taken from `schema` by name (names `schema` lacks
/// are left as they are).
pub(crate) fn remap_columns(
    expr: Arc<dyn PhysicalExpr>,
    schema: &Schema,
) -> Result<Arc<dyn PhysicalExpr>> {
    expr.transform_up(|e| match e.downcast_ref::<Column>() {
        Some(c) => match schema.index_of(c.name()) {
            Ok(i) if i != c.index() => {
                Ok(Transformed::yes(Arc::new(Column::new(c.name(), i)) as _))
            }
            _ => Ok(Transformed::no(e)),
        },
        None => Ok(Transformed::no(e)),
    })
    .map(|t| t.data)
}

/// The box of coordinates that the filters' conjuncts on coordinates alone allow
/// (`dim_0 BETWEEN 3000 AND 3818`, a join's key bounds as they stand when the file is
/// opened: a dynamic filter only ever rules out rows nobody needs), within `shape`; an
/// empty range where they allow none. Other conjuncts, and expressions DataFusion's
/// interval analysis does not take, leave their dimensions whole.
pub(crate) fn coordinate_box(
    filters: &[Arc<dyn PhysicalExpr>],
    shape: &[u64],
) -> Result<Vec<Range<u64>>> {
    let mut bx: Vec<Range<u64>> = shape.iter().map(|&n| 0..n).collect();
    if shape.contains(&0) {
        return Ok(bx);
    }
    let dims = Schema::new(
        (0..shape.len())
            .map(|d| Field::new(format!("dim_{d}"), DataType::Int64, false))
            .collect::<Vec<_>>(),
    );
    let mut conjuncts = Vec::new();
    for f in filters {
        let f = snapshot_physical_expr(Arc::clone(f))?;
        for c in split_conjunction(&f) {
            let cols = collect_columns(c);
            if !cols.is_empty() && cols.iter().all(|k| dims.index_of(k.name()).is_ok()) {
                conjuncts.push(remap_columns(Arc::clone(c), &dims)?);
            }
        }
    }
    let whole = shape
        .iter()
        .enumerate()
        .map(|(d, &n)| {
            Ok(ExprBoundaries {
                column: Column::new(&format!("dim_{d}"), d),
                interval: Some(Interval::try_new(
                    ScalarValue::Int64(Some(0)),
                    ScalarValue::Int64(Some(n as i64 - 1)),
                )?),
                distinct_count: Precision::Absent,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    // Narrows `r` to the coordinates `lo..=hi`.
    let narrow = |r: &mut Range<u64>, lo: i128, hi: i128| {
        r.start = r.start.max(lo.clamp(0, u64::MAX as i128) as u64);
        r.end = r
            .end
            .min(hi.saturating_add(1).clamp(0, u64::MAX as i128) as u64);
    };
    // One conjunct at a time: one the analysis does not take leaves the others' bounds.
    for c in conjuncts {
        // A comparison with a number is applied as it is (the scan reports it exact).
        if let Some((d, lo, hi)) = coordinate_range(&c) {
            narrow(&mut bx[d], lo, hi);
            continue;
        }
        let Ok(narrowed) = analyze(&c, AnalysisContext::new(whole.clone()), &dims) else {
            continue;
        };
        let bound = |v: &ScalarValue, none: i128| match v {
            ScalarValue::Int64(Some(x)) => *x as i128,
            _ => none,
        };
        for (r, b) in bx.iter_mut().zip(&narrowed.boundaries) {
            match &b.interval {
                None => *r = 0..0,
                Some(iv) => narrow(
                    r,
                    bound(iv.lower(), i128::MIN),
                    bound(iv.upper(), i128::MAX),
                ),
            }
        }
    }
    for r in &mut bx {
        if r.start >= r.end {
            *r = 0..0;
        }
    }
    Ok(bx)
}

/// The coordinates `(k, lo, hi)` (inclusive) a comparison of `dim_k` with an integer
/// allows: `dim_k op n` or `n op dim_k`, `op` one of `=`, `<`, `<=`, `>`, `>=`
/// (`BETWEEN` arrives as two of them). Such a conjunct is applied to the coordinate box
/// exactly, so a scan that cuts its units to the box need not filter its rows again.
/// `None` for anything else (other operators, casts, other columns, nulls).
pub(crate) fn coordinate_range(e: &Arc<dyn PhysicalExpr>) -> Option<(usize, i128, i128)> {
    let b = e.downcast_ref::<BinaryExpr>()?;
    let number = |x: &Arc<dyn PhysicalExpr>| match x.downcast_ref::<Literal>()?.value() {
        ScalarValue::Int64(Some(v)) => Some(*v as i128),
        _ => None,
    };
    let dim = |x: &Arc<dyn PhysicalExpr>| {
        x.downcast_ref::<Column>()?
            .name()
            .strip_prefix("dim_")?
            .parse::<usize>()
            .ok()
    };
    let (k, op, n) = match (dim(b.left()), number(b.right())) {
        (Some(k), Some(n)) => (k, *b.op(), n),
        _ => (dim(b.right())?, b.op().swap()?, number(b.left())?),
    };
    let (lo, hi) = (i64::MIN as i128, i64::MAX as i128);
    match op {
        Operator::Eq => Some((k, n, n)),
        Operator::Lt => Some((k, lo, n - 1)),
        Operator::LtEq => Some((k, lo, n)),
        Operator::Gt => Some((k, n + 1, hi)),
        Operator::GtEq => Some((k, n, hi)),
        _ => None,
    }
}

/// The coordinate column an order's first key sorts descending (`ORDER BY dim_k DESC`),
/// for which a scan reads its units last first: they follow the chunk grid in C order,
/// coordinates rising, so a TopK meets its largest coordinates first and its threshold
/// rules out the rest.
pub(crate) fn descending_coordinate(order: &[PhysicalSortExpr]) -> Option<&Column> {
    let first = order.first().filter(|s| s.options.descending)?;
    first
        .expr
        .downcast_ref::<Column>()
        .filter(|c| c.name().starts_with("dim_"))
}

/// `units` cut to the box `bx` (none for tables), without those left empty.
pub(crate) fn clip(units: Vec<ZonedUnit>, bx: &[Range<u64>]) -> Vec<ZonedUnit> {
    if bx.is_empty() {
        return units;
    }
    units
        .into_iter()
        .filter_map(|mut u| {
            if let ScanUnit::Box(b) = &mut u.unit {
                for (r, k) in b.iter_mut().zip(bx) {
                    (r.start, r.end) = (r.start.max(k.start), r.end.min(k.end));
                    if r.start >= r.end {
                        return None;
                    }
                }
            }
            Some(u)
        })
        .collect()
}

/// A table's scan read in two steps when its dynamic filters name some of the columns it
/// produces: those first, and the others only when a row of the unit passes the filters'
/// current state (a join's keys, a TopK's sort column: most units fail once the filter
/// has settled, and their other columns are never decoded).
#[derive(Debug)]
pub struct Probe {
    /// Reads the filter columns.
    first: BatchReader,
    /// Reads the other columns, with the same rows.
    rest: BatchReader,
    /// For each output column: from `first` (true) or `rest`, and its index there.
    from: Vec<(bool, usize)>,
    schema: SchemaRef,
}

impl Probe {
    /// The two-step read of `reader`'s columns, when `ds` is a table (whose columns are
    /// stored apart), no text match selects rows, and `dynamic`'s filters name some but
    /// not all of the columns.
    pub fn new(ds: &Dataset, reader: &BatchReader, dynamic: &DynamicPruning) -> Option<Self> {
        if !matches!(ds, Dataset::Table(_)) || !reader.text_match_columns().is_empty() {
            return None;
        }
        let names = dynamic.column_names();
        let full = reader.full_schema();
        let (first, mut rest): (Vec<usize>, Vec<usize>) = reader
            .projection()
            .iter()
            .partition(|&&c| names.contains(full.field(c).name()));
        if first.is_empty() || rest.is_empty() {
            return None;
        }
        // A filter column the scan yields as raw records is read converted first (for
        // the filters) and raw with the rest (for the batch).
        let raw: Vec<usize> = first
            .iter()
            .copied()
            .filter(|&c| reader.reads_raw(c))
            .collect();
        rest.extend(&raw);
        let from = reader
            .projection()
            .iter()
            .map(|c| match first.iter().position(|f| f == c) {
                Some(i) if !raw.contains(c) => (true, i),
                _ => (false, rest.iter().position(|r| r == c).unwrap_or(0)),
            })
            .collect();
        Some(Probe {
            first: reader.with_projection(first),
            rest: reader.with_projection(rest).with_raw_records(&raw),
            from,
            schema: reader.schema(),
        })
    }

    /// The columns read first (full-schema indices), in the order of the batches
    /// [`Probe::read`] returns them.
    pub fn first_columns(&self) -> &[usize] {
        self.first.projection()
    }

    /// The unit's batch, or `None` when no row of its filter columns passes `dynamic`;
    /// and the batch of its filter columns ([`Probe::first_columns`]), read either way.
    ///
    /// # Errors
    /// Reading or decoding, evaluating a filter.
    pub async fn read(
        &self,
        dynamic: &DynamicPruning,
        unit: &ScanUnit,
        st: &mut ReadStats,
    ) -> Result<(Option<RecordBatch>, RecordBatch)> {
        let first = self.first.read(unit, st).await.map_err(super::to_df)?;
        if !dynamic.any_row_passes(&first)? {
            return Ok((None, first));
        }
        let rest = self.rest.read(unit, st).await.map_err(super::to_df)?;
        if rest.num_rows() != first.num_rows() {
            return Err(DataFusionError::Internal(format!(
                "two reads of one unit gave {} and {} rows",
                first.num_rows(),
                rest.num_rows()
            )));
        }
        let cols = self
            .from
            .iter()
            .map(|&(f, i)| Arc::clone(if f { first.column(i) } else { rest.column(i) }))
            .collect();
        let opts = RecordBatchOptions::new().with_row_count(Some(first.num_rows()));
        let batch = RecordBatch::try_new_with_options(Arc::clone(&self.schema), cols, &opts)?;
        Ok((Some(batch), first))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::physical_expr::expressions::col;

    fn case(
        whens: Vec<Arc<dyn PhysicalExpr>>,
        other: Option<Arc<dyn PhysicalExpr>>,
    ) -> Arc<dyn PhysicalExpr> {
        let schema = Schema::new(vec![Field::new("k", DataType::Int64, true)]);
        let routing = col("k", &schema).unwrap();
        let arms = whens
            .into_iter()
            .enumerate()
            .map(|(i, then)| (lit(ScalarValue::Int64(Some(i as i64))), then))
            .collect();
        Arc::new(CaseExpr::try_new(Some(routing), arms, other).unwrap())
    }

    /// A `CASE` among conjuncts becomes the `OR` of its results, a `false` or `NULL`
    /// result left out, a `true` one making it `true`.
    #[test]
    fn case_results_become_a_disjunction() {
        let schema = Schema::new(vec![Field::new("k", DataType::Int64, true)]);
        let k = || col("k", &schema).unwrap();
        let eq = |v: i64| -> Arc<dyn PhysicalExpr> {
            Arc::new(BinaryExpr::new(k(), Operator::Eq, lit(v)))
        };
        let shown = |e: &Arc<dyn PhysicalExpr>| format!("{}", branches_or(e));
        let c = case(
            vec![eq(1), lit(false), eq(2)],
            Some(lit(ScalarValue::Boolean(None))),
        );
        assert_eq!(shown(&c), "k@0 = 1 OR k@0 = 2");
        let c = case(vec![eq(1)], Some(lit(true)));
        assert_eq!(shown(&c), "true");
        let c = case(vec![lit(false)], None);
        assert_eq!(shown(&c), "false");
        let both: Arc<dyn PhysicalExpr> = Arc::new(BinaryExpr::new(
            eq(7),
            Operator::And,
            case(vec![eq(3), eq(4)], Some(lit(false))),
        ));
        assert_eq!(shown(&both), "k@0 = 7 AND (k@0 = 3 OR k@0 = 4)");
        // Anything else is left as it is.
        let e = eq(5);
        assert!(Arc::ptr_eq(&branches_or(&e), &e));
    }
}
