//! Value pruning: skips scan units whose zone's min/max prove that no row can pass the
//! query's filters, with DataFusion's [`PruningPredicate`].
//!
//! Each zoned scan unit (see [`crate::arrow_reader::zones`]) is one pruning container.
//! Its statistics come, per column, from the first source that knows them:
//! - `dim_k` columns: the unit's own coordinate box (exact);
//! - special-value chunks (zeros, NaN, uninitialized): the one value every element has,
//!   known from the frame's offsets index without fetching anything;
//! - python-blosc2 SUMMARY sidecars (CTables), combined over the segments a unit spans;
//! - zone maps: min/max and null counts computed while earlier scans of this table
//!   decoded whole zones ([`super::zone_maps`]).
//!
//! Null counts: none for a non-nullable column; else a unit inside a mapped zone holds
//! none when the zone holds none, and only nulls when the zone holds no value, or when
//! SUMMARY flags its segments all null. With them `x IS NULL OR x > t` (a descending
//! TopK's threshold) and `x IS NULL` prune.
//!
//! Unknown statistics keep a unit, so pruning never changes results; the filters stay
//! with DataFusion (reported Inexact).

use super::zone_maps::{ZoneMaps, widen};
use crate::array::batch_array::ItemKind;
use crate::array::full_index::ColumnIndex;
use crate::array::ndarray::ReadStats;
use crate::array::ranked_text_index::RankedTextIndex;
use crate::array::summary::ColumnSummary;
use crate::array::table::{ColumnData, ColumnStorage, Table};
use crate::arrow_reader::reader::ScanUnit;
use crate::arrow_reader::varlen::var_array;
use crate::arrow_reader::zones::{ZonedUnit, special_chunk_values, summary_arrays};
use crate::dataset::Dataset;
use arrow::array::{Array, ArrayRef, BooleanArray, UInt64Array};
use arrow::datatypes::{Schema, SchemaRef};
use datafusion::common::pruning::PruningStatistics;
use datafusion::common::{Column, ScalarValue};
use datafusion::physical_optimizer::pruning::PruningPredicate;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// What pruning did, for `EXPLAIN` and metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PruneReport {
    /// Units before pruning.
    pub units_before: usize,
    /// Units pruned.
    pub units_pruned: usize,
    /// Statistics sources that were available (`special`, `summary`, `zone_map`).
    pub sources: Vec<&'static str>,
}

/// A table's index sidecars, per column (full-schema index), each read once: the
/// block summaries every index kind keeps, and the indexes that find rows (FULL,
/// PARTIAL, BUCKET).
#[derive(Debug, Default)]
pub struct IndexCache {
    summaries: Mutex<HashMap<usize, Option<Arc<ColumnSummary>>>>,
    indexes: Mutex<HashMap<usize, Option<Arc<ColumnIndex>>>>,
}

/// The statistics of each unit for the columns a predicate names.
struct UnitStatistics {
    containers: usize,
    min: HashMap<String, ArrayRef>,
    max: HashMap<String, ArrayRef>,
    /// Per column, the nulls of each unit (null where unknown): zeros for columns that
    /// hold none (coordinates, non-nullable values), else from the zone maps.
    nulls: HashMap<String, ArrayRef>,
    /// Rows of each unit.
    rows: ArrayRef,
}

impl PruningStatistics for UnitStatistics {
    fn min_values(&self, column: &Column) -> Option<ArrayRef> {
        self.min.get(column.name()).cloned()
    }
    fn max_values(&self, column: &Column) -> Option<ArrayRef> {
        self.max.get(column.name()).cloned()
    }
    fn num_containers(&self) -> usize {
        self.containers
    }
    fn null_counts(&self, column: &Column) -> Option<ArrayRef> {
        // `x IS NULL OR x > t` (a `DESC` TopK's threshold) prunes only where the nulls are
        // known; `x > t` prunes a unit of nulls alone.
        self.nulls.get(column.name()).cloned()
    }
    fn row_counts(&self) -> Option<ArrayRef> {
        Some(Arc::clone(&self.rows))
    }
    fn contained(&self, _column: &Column, _values: &HashSet<ScalarValue>) -> Option<BooleanArray> {
        None
    }
}

/// The nulls of column `col` in each of `units`, null where unknown: none when the
/// column is not `nullable`; else what the zone maps say ([`ZoneStats::unit_nulls`]), or
/// every row where the column's SUMMARY sidecar flags each segment a unit spans as all
/// null (deleted rows count there too, as in [`ZoneStats::unit_nulls`]). `None` when no
/// unit's count is known. The sources used go into `sources`.
fn units_nulls(
    nullable: bool,
    col: usize,
    units: &[ZonedUnit],
    zone_maps: Option<&ZoneMaps>,
    summary: Option<&ColumnSummary>,
    sources: &mut HashSet<&'static str>,
) -> Option<ArrayRef> {
    let all_null = |u: &ZonedUnit| -> Option<u64> {
        let (ScanUnit::Rows(rows), Some(s)) = (&u.unit, summary) else {
            return None;
        };
        let mut segs = s.segments_for(rows.start, rows.end);
        let flagged = rows.end <= s.rows
            && !segs.is_empty()
            && segs.all(|i| s.flags(i) & crate::array::summary::FLAG_ALL_NULL != 0);
        flagged.then(|| u.unit.rows())
    };
    let nulls: UInt64Array = match nullable {
        false => units.iter().map(|_| Some(0)).collect(),
        true => units
            .iter()
            .map(|u| {
                let zoned = u.zone_rows > 0;
                let mapped = zone_maps.filter(|_| zoned).and_then(|m| m.get(col, u.zone));
                let from_map = mapped.and_then(|stats| stats.unit_nulls(u.unit.rows()));
                if from_map.is_some() {
                    sources.insert("zone_map");
                    return from_map;
                }
                all_null(u).inspect(|_| {
                    sources.insert("summary");
                })
            })
            .collect(),
    };
    (nulls.null_count() < nulls.len()).then(|| Arc::new(nulls) as ArrayRef)
}

/// Per-unit extrema of one column, `None` where unknown.
type Extrema = Vec<Option<(ScalarValue, ScalarValue)>>;

/// Drops the units `predicate` proves empty. `summaries` holds the SUMMARY sidecars
/// already loaded (missing columns are loaded here).
///
/// # Errors
/// Reading a SUMMARY sidecar, or evaluating the predicate.
pub async fn prune_units(
    ds: &Dataset,
    schema: &SchemaRef,
    units: Vec<ZonedUnit>,
    predicate: &PruningPredicate,
    zone_maps: Option<&ZoneMaps>,
    summaries: &IndexCache,
) -> datafusion::error::Result<(Vec<ZonedUnit>, PruneReport)> {
    let mut report = PruneReport {
        units_before: units.len(),
        ..PruneReport::default()
    };
    let mut sources: HashSet<&'static str> = HashSet::new();
    let mut stats = UnitStatistics {
        containers: units.len(),
        min: HashMap::new(),
        max: HashMap::new(),
        nulls: HashMap::new(),
        rows: Arc::new(UInt64Array::from_iter_values(
            units.iter().map(|u| u.unit.rows()),
        )),
    };
    let mut names: Vec<String> =
        datafusion::physical_expr::utils::collect_columns(predicate.orig_expr())
            .iter()
            .map(|c| c.name().to_string())
            .collect();
    names.sort();
    names.dedup();
    for name in names {
        let Ok(col) = schema.index_of(&name) else {
            continue;
        };
        let ex = column_extrema(ds, schema, col, &units, zone_maps, summaries, &mut sources)
            .await
            .map_err(super::to_df)?;
        // A column without a stored null (an absent mask sidecar) is as good as one
        // declared without nulls.
        let nullable = schema.field(col).is_nullable()
            && !matches!(ds, Dataset::Table(t) if t.holds_no_null(col));
        let summary = match ds {
            Dataset::Table(t) if nullable => cached_summary(t, col, summaries)
                .await
                .map_err(super::to_df)?,
            _ => None,
        };
        let nulls = units_nulls(
            nullable,
            col,
            &units,
            zone_maps,
            summary.as_deref(),
            &mut sources,
        );
        if let Some(nulls) = nulls {
            stats.nulls.insert(name.clone(), nulls);
        }
        if ex.iter().all(Option::is_none) {
            continue;
        }
        let t = schema.field(col).data_type();
        let side = |pick: fn(&(ScalarValue, ScalarValue)) -> &ScalarValue| {
            let null = ScalarValue::try_from(t)?;
            ScalarValue::iter_to_array(
                ex.iter()
                    .map(|e| e.as_ref().map_or_else(|| null.clone(), |p| pick(p).clone())),
            )
        };
        stats.min.insert(name.clone(), side(|p| &p.0)?);
        stats.max.insert(name, side(|p| &p.1)?);
    }
    let mut sources: Vec<_> = sources.into_iter().collect();
    sources.sort();
    report.sources = sources;
    if stats.min.is_empty() && stats.nulls.is_empty() {
        return Ok((units, report));
    }
    let keep = predicate.prune(&stats)?;
    Ok(kept_units(units, &keep, report))
}

/// The units whose `keep` is true, and `report` counting the others as pruned.
pub(super) fn kept_units(
    units: Vec<ZonedUnit>,
    keep: &[bool],
    mut report: PruneReport,
) -> (Vec<ZonedUnit>, PruneReport) {
    let kept: Vec<ZonedUnit> = units
        .into_iter()
        .zip(keep)
        .filter_map(|(u, &k)| k.then_some(u))
        .collect();
    report.units_pruned = report.units_before - kept.len();
    (kept, report)
}

async fn column_extrema(
    ds: &Dataset,
    schema: &Schema,
    col: usize,
    units: &[ZonedUnit],
    zone_maps: Option<&ZoneMaps>,
    summaries: &IndexCache,
    sources: &mut HashSet<&'static str>,
) -> crate::Result<Extrema> {
    let cached = |zone: u64| zone_maps.and_then(|z| z.extrema(col, zone));
    let mut out: Extrema = Vec::with_capacity(units.len());
    match ds {
        Dataset::Array(a) => {
            let ndim = a.geometry.ndim();
            let mut special: HashMap<u64, Option<(ScalarValue, ScalarValue)>> = HashMap::new();
            for u in units {
                let e = match &u.unit {
                    ScanUnit::Box(bx) if col < ndim => {
                        let r = &bx[col];
                        (r.start < r.end).then(|| {
                            (
                                ScalarValue::Int64(Some(r.start as i64)),
                                ScalarValue::Int64(Some(r.end as i64 - 1)),
                            )
                        })
                    }
                    // A unit planned without zones may span chunks: no chunk's
                    // statistics describe it.
                    _ if u.zone == u64::MAX => None,
                    _ => {
                        let known = match special.get(&u.zone) {
                            Some(v) => v.clone(),
                            None => {
                                let v = special_chunk_values(a, schema, u.zone)?
                                    .and_then(|cols| cols.into_iter().find(|(p, _)| *p == col))
                                    .and_then(|(_, arr)| {
                                        let s = ScalarValue::try_from_array(&arr, 0).ok()?;
                                        Some((s.clone(), s))
                                    });
                                special.insert(u.zone, v.clone());
                                v
                            }
                        };
                        match known {
                            Some(v) => {
                                sources.insert("special");
                                Some(v)
                            }
                            None => cached(u.zone).inspect(|_| {
                                sources.insert("zone_map");
                            }),
                        }
                    }
                };
                out.push(e);
            }
        }
        Dataset::Table(t) => {
            let summary = cached_summary(t, col, summaries).await?;
            let arrays = match &summary {
                Some(s) => Some(summary_arrays(
                    s,
                    t.open_column(col).await?.dtype(),
                    schema.field(col).data_type(),
                )?),
                None => None,
            };
            for u in units {
                let ScanUnit::Rows(rows) = &u.unit else {
                    out.push(None);
                    continue;
                };
                let from_summary = match (&summary, &arrays) {
                    (Some(s), Some((mins, maxs))) if rows.end <= s.rows => {
                        combine(mins, maxs, s.segments_for(rows.start, rows.end))
                    }
                    _ => None,
                };
                let e = match from_summary {
                    Some(v) => {
                        sources.insert("summary");
                        Some(v)
                    }
                    None => cached(u.zone).inspect(|_| {
                        sources.insert("zone_map");
                    }),
                };
                out.push(e);
            }
        }
    }
    Ok(out)
}

/// Column `col`'s entry of `map`, loaded by `load` the first time (two loads racing
/// both load; the second's is kept).
async fn cached<T, F>(
    map: &Mutex<HashMap<usize, Option<Arc<T>>>>,
    col: usize,
    load: F,
) -> crate::Result<Option<Arc<T>>>
where
    F: std::future::Future<Output = crate::Result<Option<T>>>,
{
    let lock = || map.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(v) = lock().get(&col).cloned() {
        return Ok(v);
    }
    let v = load.await?.map(Arc::new);
    lock().insert(col, v.clone());
    Ok(v)
}

/// The block summaries of column `col` of `t` ([`Table::summary`]), read once per table
/// provider.
pub(super) async fn cached_summary(
    t: &Table,
    col: usize,
    cache: &IndexCache,
) -> crate::Result<Option<Arc<ColumnSummary>>> {
    cached(&cache.summaries, col, t.summary(col)).await
}

/// The index of column `col` of `t` that finds rows ([`Table::column_index`]), opened
/// once per table provider.
pub(super) async fn cached_column_index(
    t: &Table,
    col: usize,
    cache: &IndexCache,
) -> crate::Result<Option<Arc<ColumnIndex>>> {
    cached(&cache.indexes, col, t.column_index(col)).await
}

/// The exact minimum and maximum of column `col` (`schema`'s field) of `t`, from its
/// SUMMARY sidecar (a utf8 column's: from its FULL index, the values of the rows
/// [`RankedTextIndex::extreme_rows`] finds):
/// when no row was deleted (deleted rows still count in the extrema),
/// the sidecar describes every row, the column holds no nulls (python-blosc2 leaves them
/// out; see [`Table::holds_no_null`]) and no segment holds a NaN (nor is unusable
/// otherwise).
///
/// # Errors
/// Reading the sidecar.
pub async fn exact_extrema(
    t: &Table,
    schema: &Schema,
    col: usize,
    summaries: &IndexCache,
) -> crate::Result<Option<(ScalarValue, ScalarValue)>> {
    let nulls = schema.field(col).is_nullable() && !t.holds_no_null(col);
    if nulls || t.live_rows != t.physical_rows || t.live_rows == 0 {
        return Ok(None);
    }
    // Only a utf8 column's index is opened here (others' summaries are their own files).
    let utf8 = matches!(
        t.open_column(col).await?.storage,
        ColumnStorage::Utf8 { .. }
    );
    if utf8
        && let Some(ColumnIndex::RankedText(index)) =
            cached_column_index(t, col, summaries).await?.as_deref()
        && index.rows() == t.live_rows
    {
        return ranked_text_extrema(t, schema, col, index).await;
    }
    let Some(s) = cached_summary(t, col, summaries).await? else {
        return Ok(None);
    };
    if s.rows != t.live_rows {
        return Ok(None);
    }
    let (mins, maxs) = summary_arrays(
        &s,
        t.open_column(col).await?.dtype(),
        schema.field(col).data_type(),
    )?;
    Ok(combine(&mins, &maxs, 0..s.nsegments()))
}

/// The exact extrema of utf8 column `col` of `t` (no row deleted, none null) from its
/// FULL index: the values of the rows holding its first and last ranks.
async fn ranked_text_extrema(
    t: &Table,
    schema: &Schema,
    col: usize,
    index: &RankedTextIndex,
) -> crate::Result<Option<(ScalarValue, ScalarValue)>> {
    let mut stats = ReadStats::default();
    let Some((first, last)) = index.extreme_rows(&mut stats).await? else {
        return Ok(None);
    };
    let mut values = Vec::with_capacity(2);
    for row in [first, last] {
        if row >= t.physical_rows {
            return Ok(None);
        }
        let ColumnData::Utf8 { offsets, data } =
            t.read_column(col, row..row + 1, &mut stats).await?
        else {
            return Ok(None);
        };
        // The scan's conversion (offsets and UTF-8 checked); what it refuses is left to
        // the scan to report.
        let what = || format!("{}: column {:?}", t.display(), schema.field(col).name());
        let Ok(text) = var_array(ItemKind::Text, &offsets, data, None, &what) else {
            return Ok(None);
        };
        let type_ = schema.field(col).data_type();
        let Ok(v) = ScalarValue::try_from_array(&text, 0).and_then(|v| v.cast_to(type_)) else {
            return Ok(None);
        };
        values.push(v);
    }
    let [min, max]: [ScalarValue; 2] = values.try_into().expect("two values");
    Ok(Some((min, max)))
}

/// Min of `mins` and max of `maxs` over `segs`; `None` if any segment is unknown.
fn combine(
    mins: &ArrayRef,
    maxs: &ArrayRef,
    segs: std::ops::Range<usize>,
) -> Option<(ScalarValue, ScalarValue)> {
    if segs.is_empty() {
        return None;
    }
    let mut out: Option<(ScalarValue, ScalarValue)> = None;
    for i in segs {
        if mins.is_null(i) || maxs.is_null(i) {
            return None;
        }
        let seg = (
            ScalarValue::try_from_array(mins, i).ok()?,
            ScalarValue::try_from_array(maxs, i).ok()?,
        );
        out = Some(match out {
            Some(o) => widen(o, seg)?,
            None => seg,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::zone_maps::ZoneStats;
    use crate::provider::zone_maps::test_zones::{known, unit};
    use arrow::datatypes::DataType;

    #[test]
    fn null_counts_prune_a_descending_topk_threshold() {
        use datafusion::logical_expr::Operator;
        use datafusion::physical_expr::expressions::{BinaryExpr, IsNullExpr, col, lit};
        let schema = Arc::new(Schema::new(vec![arrow::datatypes::Field::new(
            "x",
            DataType::Float64,
            true,
        )]));
        let x = col("x", &schema).unwrap();
        // DataFusion's TopK filter for `ORDER BY x DESC` (NULLS FIRST) once its heap
        // holds 5.0, and a plain comparison.
        let topk: Arc<dyn datafusion::physical_expr::PhysicalExpr> = Arc::new(BinaryExpr::new(
            Arc::new(IsNullExpr::new(Arc::clone(&x))),
            Operator::Or,
            Arc::new(BinaryExpr::new(Arc::clone(&x), Operator::Gt, lit(5.0f64))),
        ));
        let gt: Arc<dyn datafusion::physical_expr::PhysicalExpr> =
            Arc::new(BinaryExpr::new(x, Operator::Gt, lit(5.0f64)));
        let maps = ZoneMaps::default();
        maps.insert(0, 0, known(0.0, 4.0, 0)); // no null, below: pruned
        maps.insert(0, 1, known(0.0, 4.0, 2)); // nulls: kept
        maps.insert(0, 2, known(0.0, 9.0, 0)); // above: kept
        maps.insert(
            0,
            3,
            ZoneStats {
                extrema: None,
                nulls: 10,
                values: 0,
            },
        ); // nulls alone: kept for the TopK, pruned for `x > 5`
        let units: Vec<ZonedUnit> = (0..5).map(|z| unit(z, z * 10..z * 10 + 10, 10)).collect();
        let ex: Extrema = units.iter().map(|u| maps.extrema(0, u.zone)).collect();
        let side = |pick: fn(&(ScalarValue, ScalarValue)) -> &ScalarValue| {
            ScalarValue::iter_to_array(ex.iter().map(|e| {
                e.as_ref()
                    .map_or(ScalarValue::Float64(None), |p| pick(p).clone())
            }))
            .unwrap()
        };
        let stats = UnitStatistics {
            containers: units.len(),
            min: HashMap::from([("x".to_string(), side(|p| &p.0))]),
            max: HashMap::from([("x".to_string(), side(|p| &p.1))]),
            nulls: HashMap::from([(
                "x".to_string(),
                units_nulls(true, 0, &units, Some(&maps), None, &mut HashSet::new()).unwrap(),
            )]),
            rows: Arc::new(UInt64Array::from(vec![10u64; 5])),
        };
        let kept = |expr: &Arc<dyn datafusion::physical_expr::PhysicalExpr>| -> Vec<u64> {
            let p = datafusion::physical_optimizer::pruning::PruningPredicateBuilder::new()
                .with_file_schema(Arc::clone(&schema))
                .build(Arc::clone(expr))
                .unwrap();
            let keep = p.prune(&stats).unwrap();
            units
                .iter()
                .zip(keep)
                .filter(|(_, k)| *k)
                .map(|(u, _)| u.zone)
                .collect()
        };
        // Zone 4 is not mapped: kept by both.
        assert_eq!(kept(&topk), vec![1, 2, 3, 4]);
        assert_eq!(kept(&gt), vec![2, 4]);
        // Not nullable: no null anywhere, mapped or not.
        let none = units_nulls(false, 0, &units, None, None, &mut HashSet::new()).unwrap();
        assert_eq!(none.null_count(), 0);
        assert!(units_nulls(true, 0, &units, None, None, &mut HashSet::new()).is_none());
    }
}
