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
//!   decoded whole zones, cached for the life of the table provider ([`ZoneMaps`]).
//!
//! Null counts: none for a non-nullable column; else a unit inside a mapped zone holds
//! none when the zone holds none, and only nulls when the zone holds no value. With
//! them `x IS NULL OR x > t` (a descending TopK's threshold) and `x IS NULL` prune.
//!
//! Unknown statistics keep a unit, so pruning never changes results; the filters stay
//! with DataFusion (reported Inexact).

use super::aggregate::extremes as keyed;
use crate::array::summary::ColumnSummary;
use crate::array::table::Table;
use crate::arrow_reader::reader::ScanUnit;
use crate::arrow_reader::zones::{ZonedUnit, special_chunk_values, summary_arrays};
use crate::dataset::Dataset;
use arrow::array::{Array, ArrayRef, BooleanArray, UInt64Array};
use arrow::datatypes::{DataType, Schema, SchemaRef};
use datafusion::common::pruning::PruningStatistics;
use datafusion::common::{Column, ScalarValue};
use datafusion::functions_aggregate::min_max::{MaxAccumulator, MinAccumulator};
use datafusion::logical_expr::Accumulator;
use datafusion::physical_optimizer::pruning::PruningPredicate;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// Longest string or binary extremum kept in a zone map (longer ones are not cached).
const MAX_CACHED_BYTES: usize = 256;

/// What a zone map knows of one column in one zone, from a scan that read the zone whole.
#[derive(Debug, Clone, PartialEq)]
pub struct ZoneStats {
    /// Min and max of the zone's non-null values: `None` when it holds none, or when they
    /// are unknown (a NaN, a long string, a type without an order).
    pub extrema: Option<(ScalarValue, ScalarValue)>,
    /// Nulls among the zone's rows (deleted table rows are not rows).
    pub nulls: u64,
    /// Non-null values among them.
    pub values: u64,
}

impl ZoneStats {
    /// The nulls of a unit of `rows` rows inside this zone, where the zone's counts
    /// decide them: none when the zone holds none, every row when it holds no value (a
    /// deleted row then counts as a null, which prunes nothing a live row could pass).
    pub fn unit_nulls(&self, rows: u64) -> Option<u64> {
        match (self.nulls, self.values) {
            (0, _) => Some(0),
            (_, 0) => Some(rows),
            _ => None,
        }
    }
}

/// Per-zone statistics of columns (min/max, null and value counts), filled in by scans
/// that decode whole zones.
#[derive(Debug, Default)]
pub struct ZoneMaps {
    map: Mutex<HashMap<(usize, u64), ZoneStats>>,
}

impl ZoneMaps {
    /// The statistics of column `col` (full-schema index) in `zone`.
    pub fn get(&self, col: usize, zone: u64) -> Option<ZoneStats> {
        self.lock().get(&(col, zone)).cloned()
    }

    /// The extrema of column `col` in `zone`, when mapped and known.
    pub fn extrema(&self, col: usize, zone: u64) -> Option<(ScalarValue, ScalarValue)> {
        self.lock().get(&(col, zone))?.extrema.clone()
    }

    /// True when the statistics of column `col` in `zone` are recorded.
    pub fn contains(&self, col: usize, zone: u64) -> bool {
        self.lock().contains_key(&(col, zone))
    }

    /// Number of recorded (column, zone) entries.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn insert(&self, col: usize, zone: u64, stats: ZoneStats) {
        self.lock().insert((col, zone), stats);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(usize, u64), ZoneStats>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The extrema of one column over the rows of a zone read so far.
#[derive(Debug, Clone)]
enum PieceExtrema {
    /// No non-null value yet.
    NoValue,
    /// The least and greatest value.
    Known(ScalarValue, ScalarValue),
    /// Some values have no extrema (NaN, a long string, a type without an order).
    Unknown,
}

impl PieceExtrema {
    fn of(values: &ArrayRef) -> Self {
        if values.null_count() == values.len() {
            return PieceExtrema::NoValue;
        }
        match extrema(values) {
            Some((lo, hi)) => PieceExtrema::Known(lo, hi),
            None => PieceExtrema::Unknown,
        }
    }

    fn merge(self, other: Self) -> Self {
        use PieceExtrema::{Known, NoValue, Unknown};
        match (self, other) {
            (NoValue, x) | (x, NoValue) => x,
            (Known(a, b), Known(c, d)) => match widen((a, b), (c, d)) {
                Some((lo, hi)) => Known(lo, hi),
                None => Unknown,
            },
            _ => Unknown,
        }
    }
}

/// One column's statistics over the rows of a zone read so far.
#[derive(Debug, Clone)]
struct ColumnPiece {
    extrema: PieceExtrema,
    nulls: u64,
    values: u64,
}

impl ColumnPiece {
    fn of(values: &ArrayRef) -> Self {
        let nulls = values.logical_null_count() as u64;
        ColumnPiece {
            extrema: PieceExtrema::of(values),
            nulls,
            values: values.len() as u64 - nulls,
        }
    }

    fn merge(self, other: Self) -> Self {
        ColumnPiece {
            extrema: self.extrema.merge(other.extrema),
            nulls: self.nulls + other.nulls,
            values: self.values + other.values,
        }
    }

    fn stats(self) -> ZoneStats {
        ZoneStats {
            extrema: match self.extrema {
                PieceExtrema::Known(lo, hi) => Some((lo, hi)),
                _ => None,
            },
            nulls: self.nulls,
            values: self.values,
        }
    }
}

/// Gathers one zone's statistics over the several units (batches) it was read in, in
/// one partition; the zone is recorded when its units add up to all its rows. A zone the
/// partition read only part of goes to its execution's [`ZonePieces`].
#[derive(Debug)]
pub struct ZoneAccumulator {
    zone: u64,
    rows: u64,
    zone_rows: u64,
    /// Per recorded column: its statistics so far.
    cols: Vec<ColumnPiece>,
}

impl ZoneAccumulator {
    /// Folds the batch of `unit` (columns `values`, full-schema indices `cols`) into the
    /// accumulator, flushing a completed zone into `maps`; the zone it held before, if
    /// another, into `pieces`.
    pub fn add(
        acc: &mut Option<ZoneAccumulator>,
        maps: &ZoneMaps,
        pieces: Option<&ZonePieces>,
        unit: &ZonedUnit,
        cols: &[usize],
        values: &[&ArrayRef],
    ) {
        if unit.zone_rows == 0 {
            return;
        }
        // Zones already mapped cost nothing (min/max is a pass over every value).
        if acc.is_none() && cols.iter().all(|&c| maps.contains(c, unit.zone)) {
            return;
        }
        // Types without an ordering DataFusion can prune on, NaN and long strings have
        // no extrema; one such batch leaves the zone's extrema unknown (its counts are
        // still kept).
        let piece = ZoneAccumulator {
            zone: unit.zone,
            rows: unit.unit.rows(),
            zone_rows: unit.zone_rows,
            cols: values.iter().map(|v| ColumnPiece::of(v)).collect(),
        };
        let whole = match acc.take() {
            Some(a) if a.zone == unit.zone => a.merge(piece),
            other => {
                if let Some(other) = other {
                    Self::hand_over(other, maps, pieces, cols);
                }
                piece
            }
        };
        if whole.rows == whole.zone_rows {
            whole.record(maps, cols);
        } else {
            *acc = Some(whole);
        }
    }

    /// Hands the zone `acc` holds, read in part, to `pieces` (the partition is done).
    pub fn leave(
        acc: &mut Option<ZoneAccumulator>,
        maps: &ZoneMaps,
        pieces: Option<&ZonePieces>,
        cols: &[usize],
    ) {
        if let Some(a) = acc.take() {
            Self::hand_over(a, maps, pieces, cols);
        }
    }

    fn hand_over(a: Self, maps: &ZoneMaps, pieces: Option<&ZonePieces>, cols: &[usize]) {
        if let Some(pieces) = pieces {
            pieces.merge(a, maps, cols);
        }
    }

    /// Both pieces of one zone as one (their rows apart).
    fn merge(self, other: ZoneAccumulator) -> ZoneAccumulator {
        ZoneAccumulator {
            cols: self
                .cols
                .into_iter()
                .zip(other.cols)
                .map(|(a, b)| a.merge(b))
                .collect(),
            rows: self.rows + other.rows,
            ..self
        }
    }

    fn record(self, maps: &ZoneMaps, cols: &[usize]) {
        for (&col, piece) in cols.iter().zip(self.cols) {
            maps.insert(col, self.zone, piece.stats());
        }
    }
}

/// The zones the partitions of one execution each read a part of (a plan may split a
/// zone between partitions, e.g. an array of one chunk): their pieces are merged here,
/// and a zone is recorded once its pieces add up to all its rows. Every unit is read at
/// most once per execution, so no row is counted twice.
#[derive(Debug, Default)]
pub struct ZonePieces(Mutex<HashMap<u64, ZoneAccumulator>>);

impl ZonePieces {
    fn merge(&self, piece: ZoneAccumulator, maps: &ZoneMaps, cols: &[usize]) {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let whole = match m.remove(&piece.zone) {
            Some(held) => held.merge(piece),
            None => piece,
        };
        if whole.rows == whole.zone_rows {
            whole.record(maps, cols);
        } else {
            m.insert(whole.zone, whole);
        }
    }
}

/// What the zone maps know of column `col` (full-schema index) over `units`, the planned
/// units of a whole selection, exactly: when every unit is zoned, the units of each zone
/// add up to the whole zone (the selection takes it whole), and every zone is mapped.
/// The zones' statistics come back combined: the extrema of the zones that hold values
/// (`None` when one of them has unknown extrema, or none holds a value), and the nulls.
pub fn zone_map_column(
    maps: &ZoneMaps,
    col: usize,
    units: &[ZonedUnit],
) -> Option<(Option<(ScalarValue, ScalarValue)>, u64)> {
    // Zone → (rows of its units, rows of the zone), in the units' order.
    let mut zones: Vec<(u64, u64, u64)> = Vec::new();
    for u in units {
        if u.zone_rows == 0 {
            return None;
        }
        match zones.last_mut() {
            Some((z, rows, _)) if *z == u.zone => *rows += u.unit.rows(),
            _ => zones.push((u.zone, u.unit.rows(), u.zone_rows)),
        }
    }
    if zones.is_empty() {
        return None;
    }
    let mut combined = PieceExtrema::NoValue;
    let mut nulls = 0u64;
    let mut seen = HashSet::new();
    let map = maps.lock();
    for (zone, rows, zone_rows) in zones {
        // A zone's units are planned one after another; one seen twice is not whole.
        if rows != zone_rows || !seen.insert(zone) {
            return None;
        }
        let stats = map.get(&(col, zone))?;
        nulls += stats.nulls;
        let extrema = match (&stats.extrema, stats.values) {
            (_, 0) => PieceExtrema::NoValue,
            (Some((lo, hi)), _) => PieceExtrema::Known(lo.clone(), hi.clone()),
            (None, _) => PieceExtrema::Unknown,
        };
        combined = combined.merge(extrema);
    }
    let extrema = match combined {
        PieceExtrema::Known(lo, hi) => Some((lo, hi)),
        _ => None,
    };
    Some((extrema, nulls))
}

/// The exact minimum and maximum of column `col` over `units` from the zone maps
/// ([`zone_map_column`]). A zone's extrema are DataFusion's own `min`/`max` of its values
/// (nulls left out; a zone holding NaN or long strings has none), and zones combine by
/// the same order, so these are what a scan would give.
pub fn zone_map_extrema(
    maps: &ZoneMaps,
    col: usize,
    units: &[ZonedUnit],
) -> Option<(ScalarValue, ScalarValue)> {
    zone_map_column(maps, col, units)?.0
}

/// [`extrema`] of a column of a type the fused aggregates fold
/// ([`keyed::supported`]: numbers, dates, times, timestamps, durations), from the least
/// and greatest order keys of its values ([`keyed::extremes`]: one vectorized pass with
/// no null). Floats rank by IEEE 754's total order, as DataFusion's `min`/`max` do
/// (`-0.0` below `0.0`); a NaN ranks beyond ±inf, so a zone holding one has a NaN
/// extremum, and is left unknown.
fn keyed_extrema(values: &ArrayRef) -> Option<(ScalarValue, ScalarValue)> {
    let (lo, hi) = keyed::extremes(values.as_ref())?;
    let both = keyed::values_of(values.data_type(), [Some(lo), Some(hi)].into_iter()).ok()?;
    let (lo, hi) = (
        ScalarValue::try_from_array(&both, 0).ok()?,
        ScalarValue::try_from_array(&both, 1).ok()?,
    );
    let nan = |v: &ScalarValue| match v {
        ScalarValue::Float16(Some(x)) => x.is_nan(),
        ScalarValue::Float32(Some(x)) => x.is_nan(),
        ScalarValue::Float64(Some(x)) => x.is_nan(),
        _ => false,
    };
    (!nan(&lo) && !nan(&hi)).then_some((lo, hi))
}

/// The smaller minimum and the larger maximum of two extrema; `None` when they do not
/// compare.
fn widen(
    (lo, hi): (ScalarValue, ScalarValue),
    (l2, h2): (ScalarValue, ScalarValue),
) -> Option<(ScalarValue, ScalarValue)> {
    use std::cmp::Ordering::{Greater, Less};
    let lo = if lo.partial_cmp(&l2)? == Greater {
        l2
    } else {
        lo
    };
    let hi = if hi.partial_cmp(&h2)? == Less { h2 } else { hi };
    Some((lo, hi))
}

fn extrema(values: &ArrayRef) -> Option<(ScalarValue, ScalarValue)> {
    let t = values.data_type();
    let orderable = t.is_primitive()
        || matches!(
            t,
            DataType::Boolean
                | DataType::Utf8
                | DataType::LargeUtf8
                | DataType::Utf8View
                | DataType::Binary
                | DataType::BinaryView
                | DataType::FixedSizeBinary(_)
        );
    if !orderable || values.null_count() == values.len() {
        return None;
    }
    if keyed::supported(t) {
        return keyed_extrema(values);
    }
    general_extrema(values)
}

/// [`extrema`] of an orderable column holding some non-null value, through DataFusion's
/// `min`/`max` accumulators: for the types [`keyed_extrema`] does not take (booleans,
/// text, bytes, decimals), and the reference its tests compare it with.
fn general_extrema(values: &ArrayRef) -> Option<(ScalarValue, ScalarValue)> {
    use arrow::array::AsArray;
    use arrow::datatypes::{Float16Type, Float32Type, Float64Type};
    let t = values.data_type();
    // NaN sorts above every number in DataFusion's comparisons, but a negative NaN below;
    // rather than reason about signs, zones with NaN keep unknown statistics.
    let has_nan = match t {
        DataType::Float16 => values
            .as_primitive::<Float16Type>()
            .iter()
            .flatten()
            .any(|v| v.is_nan()),
        DataType::Float32 => values
            .as_primitive::<Float32Type>()
            .iter()
            .flatten()
            .any(f32::is_nan),
        DataType::Float64 => values
            .as_primitive::<Float64Type>()
            .iter()
            .flatten()
            .any(f64::is_nan),
        _ => false,
    };
    if has_nan {
        return None;
    }
    let mut mn = MinAccumulator::try_new(t).ok()?;
    let mut mx = MaxAccumulator::try_new(t).ok()?;
    mn.update_batch(std::slice::from_ref(values)).ok()?;
    mx.update_batch(std::slice::from_ref(values)).ok()?;
    let (lo, hi) = (mn.evaluate().ok()?, mx.evaluate().ok()?);
    let too_long = |s: &ScalarValue| match s {
        ScalarValue::Utf8(Some(v))
        | ScalarValue::LargeUtf8(Some(v))
        | ScalarValue::Utf8View(Some(v)) => v.len() > MAX_CACHED_BYTES,
        ScalarValue::Binary(Some(v))
        | ScalarValue::BinaryView(Some(v))
        | ScalarValue::FixedSizeBinary(_, Some(v)) => v.len() > MAX_CACHED_BYTES,
        _ => false,
    };
    if lo.is_null() || hi.is_null() || too_long(&lo) || too_long(&hi) {
        return None;
    }
    Some((lo, hi))
}

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

/// Loaded SUMMARY sidecars of a table, per column (full-schema index), read once.
pub type SummaryCache = Mutex<HashMap<usize, Option<Arc<ColumnSummary>>>>;

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
    summaries: &SummaryCache,
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
        let nullable = schema.field(col).is_nullable();
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
    let kept: Vec<ZonedUnit> = units
        .into_iter()
        .zip(keep)
        .filter_map(|(u, k)| k.then_some(u))
        .collect();
    report.units_pruned = report.units_before - kept.len();
    Ok((kept, report))
}

async fn column_extrema(
    ds: &Dataset,
    schema: &Schema,
    col: usize,
    units: &[ZonedUnit],
    zone_maps: Option<&ZoneMaps>,
    summaries: &SummaryCache,
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

/// The SUMMARY sidecar of column `col` of `t`, read once per table provider.
async fn cached_summary(
    t: &Table,
    col: usize,
    summaries: &SummaryCache,
) -> crate::Result<Option<Arc<ColumnSummary>>> {
    let loaded = summaries
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&col)
        .cloned();
    if let Some(s) = loaded {
        return Ok(s);
    }
    let s = t.summary(col).await?.map(Arc::new);
    summaries
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(col, s.clone());
    Ok(s)
}

/// The exact minimum and maximum of column `col` (`schema`'s field) of `t`, from its
/// SUMMARY sidecar: when no row was deleted (deleted rows still count in the extrema),
/// the sidecar describes every row, the column holds no nulls (python-blosc2 leaves them
/// out) and no segment holds a NaN (nor is unusable otherwise).
///
/// # Errors
/// Reading the sidecar.
pub async fn exact_extrema(
    t: &Table,
    schema: &Schema,
    col: usize,
    summaries: &SummaryCache,
) -> crate::Result<Option<(ScalarValue, ScalarValue)>> {
    if schema.field(col).is_nullable() || t.live_rows != t.physical_rows || t.live_rows == 0 {
        return Ok(None);
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

    fn unit(zone: u64, rows: std::ops::Range<u64>, zone_rows: u64) -> ZonedUnit {
        ZonedUnit {
            unit: ScanUnit::Rows(rows),
            zone,
            zone_rows,
        }
    }

    fn f(v: f64) -> ScalarValue {
        ScalarValue::Float64(Some(v))
    }

    /// A zone of 10 rows with extrema `lo..=hi` and `nulls` nulls.
    fn known(lo: f64, hi: f64, nulls: u64) -> ZoneStats {
        ZoneStats {
            extrema: Some((f(lo), f(hi))),
            nulls,
            values: 10 - nulls,
        }
    }

    fn float_batch(values: &[Option<f64>]) -> ArrayRef {
        Arc::new(arrow::array::Float64Array::from(values.to_vec()))
    }

    #[test]
    fn zones_count_nulls_over_their_pieces() {
        let maps = ZoneMaps::default();
        let mut acc = None;
        // Zone 0 (10 rows) in three pieces: values, nulls alone, values with a null.
        let pieces = [
            (0..4, vec![Some(2.0), Some(-1.0), Some(7.5), Some(0.0)]),
            (4..6, vec![None, None]),
            (6..10, vec![Some(3.0), None, Some(9.0), Some(-4.0)]),
        ];
        for (rows, vals) in pieces {
            let b = float_batch(&vals);
            ZoneAccumulator::add(&mut acc, &maps, None, &unit(0, rows, 10), &[1], &[&b]);
        }
        assert!(acc.is_none());
        assert_eq!(
            maps.get(1, 0),
            Some(ZoneStats {
                extrema: Some((f(-4.0), f(9.0))),
                nulls: 3,
                values: 7
            })
        );
        // A zone of nulls alone is mapped (its extrema unknown, its values none); one
        // with a NaN keeps its counts.
        let b = float_batch(&[None; 5]);
        ZoneAccumulator::add(&mut acc, &maps, None, &unit(1, 10..15, 5), &[1], &[&b]);
        let b = float_batch(&[Some(1.0), Some(f64::NAN), None]);
        ZoneAccumulator::add(&mut acc, &maps, None, &unit(2, 15..18, 3), &[1], &[&b]);
        let all_null = maps.get(1, 1).unwrap();
        assert_eq!(
            (&all_null.extrema, all_null.nulls, all_null.values),
            (&None, 5, 0)
        );
        let nan = maps.get(1, 2).unwrap();
        assert_eq!((&nan.extrema, nan.nulls, nan.values), (&None, 1, 2));
        // What a unit inside each zone is known to hold.
        assert_eq!(known(0.0, 1.0, 0).unit_nulls(4), Some(0));
        assert_eq!(maps.get(1, 0).unwrap().unit_nulls(4), None);
        assert_eq!(all_null.unit_nulls(3), Some(3));
        // Over the whole table: the extrema of the zones holding values, every null.
        let units = [unit(0, 0..10, 10), unit(1, 10..15, 5)];
        assert_eq!(
            zone_map_column(&maps, 1, &units),
            Some((Some((f(-4.0), f(9.0))), 8))
        );
        assert_eq!(zone_map_column(&maps, 1, &units[1..]), Some((None, 5)));
        let with_nan = [unit(0, 0..10, 10), unit(2, 15..18, 3)];
        assert_eq!(zone_map_column(&maps, 1, &with_nan), Some((None, 4)));
    }

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

    #[test]
    fn keyed_extrema_match_datafusion_min_max() {
        use arrow::array::{Float32Array, Float64Array, Int8Array, UInt64Array};
        let specials32 = [
            0.0f32,
            -0.0,
            1.5,
            -2.5,
            f32::INFINITY,
            f32::NEG_INFINITY,
            1e-45,
            -1e-45,
        ];
        let specials64 = [
            0.0f64,
            -0.0,
            1.5,
            -2.5,
            f64::INFINITY,
            f64::NEG_INFINITY,
            5e-324,
        ];
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || crate::chunk::xorshift(&mut seed);
        let mut arrays: Vec<ArrayRef> = Vec::new();
        for len in [1usize, 2, 7, 64, 1000] {
            let pick32 = |r: u64| specials32[r as usize % specials32.len()];
            let pick64 = |r: u64| specials64[r as usize % specials64.len()];
            let v32: Vec<f32> = (0..len)
                .map(|_| match next() % 3 {
                    0 => pick32(next()),
                    _ => f32::from_bits(next() as u32 & 0xbf7f_ffff), // finite, either sign
                })
                .collect();
            let v64: Vec<f64> = (0..len)
                .map(|_| match next() % 3 {
                    0 => pick64(next()),
                    _ => (next() as i64 as f64) / 1e9,
                })
                .collect();
            arrays.push(Arc::new(Float32Array::from(v32.clone())));
            arrays.push(Arc::new(Float64Array::from(v64.clone())));
            let mut nan32 = v32;
            nan32[next() as usize % len] = if next() % 2 == 0 { f32::NAN } else { -f32::NAN };
            arrays.push(Arc::new(Float32Array::from(nan32)));
            let mut nan64 = v64;
            nan64[next() as usize % len] = -f64::NAN;
            arrays.push(Arc::new(Float64Array::from(nan64)));
            arrays.push(Arc::new(Int8Array::from_iter_values(
                (0..len).map(|_| next() as i8),
            )));
            arrays.push(Arc::new(UInt64Array::from_iter_values(
                (0..len).map(|_| next()),
            )));
            // Nulls (Arrow's min/max kernels), and a temporal type.
            let with_nulls: Vec<Option<f64>> = (0..len)
                .map(|_| (next() % 3 != 0).then(|| pick64(next())))
                .collect();
            arrays.push(Arc::new(Float64Array::from(with_nulls)));
            arrays.push(Arc::new(
                arrow::array::TimestampMillisecondArray::from_iter_values(
                    (0..len).map(|_| next() as i64 >> 20),
                ),
            ));
        }
        for a in &arrays {
            if a.null_count() == a.len() {
                continue; // `extrema` leaves all-null batches out before either path.
            }
            assert!(keyed::supported(a.data_type()), "{a:?}");
            let fast = keyed_extrema(a);
            let slow = general_extrema(a);
            // Compare bit for bit (-0.0 against 0.0).
            let bits = |m: &Option<(ScalarValue, ScalarValue)>| format!("{m:?}");
            assert_eq!(bits(&fast), bits(&slow), "{a:?}");
        }
    }

    #[test]
    fn zone_map_extrema_need_every_zone_whole_and_mapped() {
        let maps = ZoneMaps::default();
        maps.insert(1, 0, known(0.0, 5.0, 0));
        maps.insert(1, 1, known(-0.0, 2.0, 3));
        maps.insert(1, 2, known(-3.5, 1.0, 0));
        // Zones 0..3 of 10 rows, zone 1 in two units.
        let units = vec![
            unit(0, 0..10, 10),
            unit(1, 10..14, 10),
            unit(1, 14..20, 10),
            unit(2, 20..30, 10),
        ];
        assert_eq!(zone_map_extrema(&maps, 1, &units), Some((f(-3.5), f(5.0))));
        // By IEEE 754 total order, as DataFusion's `min`: -0.0 below 0.0.
        assert_eq!(
            zone_map_extrema(&maps, 1, &units[..3]),
            Some((f(-0.0), f(5.0)))
        );
        assert!(zone_map_extrema(&maps, 1, &units[..3]).unwrap().0 != f(0.0));
        // Another column, a zone taken in part, a zone not mapped, an unzoned unit, no
        // units: unknown.
        assert_eq!(zone_map_extrema(&maps, 2, &units), None);
        assert_eq!(zone_map_extrema(&maps, 1, &units[1..2]), None);
        let mut more = units.clone();
        more.push(unit(3, 30..40, 10));
        assert_eq!(zone_map_extrema(&maps, 1, &more), None);
        let unzoned = vec![ZonedUnit::unzoned(ScanUnit::Rows(0..10))];
        assert_eq!(zone_map_extrema(&maps, 1, &unzoned), None);
        assert_eq!(zone_map_extrema(&maps, 1, &[]), None);
        // A zone's units apart from each other are not taken as the whole zone.
        let apart = vec![unit(0, 0..5, 10), unit(1, 10..20, 10), unit(0, 5..10, 10)];
        assert_eq!(zone_map_extrema(&maps, 1, &apart), None);
    }
}
