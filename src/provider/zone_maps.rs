//! Zone maps: the statistics of each zone (an array chunk, a run of table rows: see
//! [`crate::arrow_reader::zones`]) that scans learn as they decode whole zones, kept for
//! the life of a table provider (or, in listing tables, per file) for value pruning
//! ([`super::prune`]) and exact statistics.
//!
//! A zone's statistics per column ([`ZoneStats`]) are its min/max as DataFusion's `min`
//! and `max` compute them (nulls left out; none for a zone holding NaN or long strings, or
//! of a type without an order) and its null and value counts. A zone read in several
//! units, by one partition or pieces of it by several, is recorded once its units add up
//! to all its rows.

use super::aggregate::extremes as keyed;
use crate::arrow_reader::zones::ZonedUnit;
use arrow::array::{Array, ArrayRef, RecordBatch};
use arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::functions_aggregate::min_max::{MaxAccumulator, MinAccumulator};
use datafusion::logical_expr::Accumulator;
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

    pub(crate) fn insert(&self, col: usize, zone: u64, stats: ZoneStats) {
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
pub struct ZonePieces(Mutex<HashMap<(Vec<usize>, u64), ZoneAccumulator>>);

impl ZonePieces {
    fn merge(&self, piece: ZoneAccumulator, maps: &ZoneMaps, cols: &[usize]) {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        // Pieces of one zone over the same columns (a two-step read records its filter
        // columns apart).
        let key = (cols.to_vec(), piece.zone);
        let whole = match m.remove(&key) {
            Some(held) => held.merge(piece),
            None => piece,
        };
        if whole.rows == whole.zone_rows {
            whole.record(maps, cols);
        } else {
            m.insert(key, whole);
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
pub(crate) fn widen(
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
    if let Some(e) = byte_extrema(values) {
        return e;
    }
    general_extrema(values)
}

/// [`extrema`] of a text or bytes column (`Utf8`, `LargeUtf8`, `Utf8View`, `Binary`,
/// `BinaryView`) holding some non-null value, in one pass that orders values by their
/// first four bytes (big-endian, zero-padded: the order of the bytes themselves where
/// they differ) and compares whole values only where those tie. Values order by their
/// bytes, as DataFusion's `min`/`max` order them. `None` for other types.
fn byte_extrema(values: &ArrayRef) -> Option<Option<(ScalarValue, ScalarValue)>> {
    use arrow::array::AsArray;
    let found = match values.data_type() {
        DataType::Utf8 => least_and_greatest(values.as_string::<i32>(), |a, i| {
            head_key(a.value(i).as_bytes())
        }),
        DataType::LargeUtf8 => least_and_greatest(values.as_string::<i64>(), |a, i| {
            head_key(a.value(i).as_bytes())
        }),
        DataType::Binary => {
            least_and_greatest(values.as_binary::<i32>(), |a, i| head_key(a.value(i)))
        }
        DataType::Utf8View => {
            least_and_greatest(values.as_string_view(), |a, i| view_key(a.views()[i]))
        }
        DataType::BinaryView => {
            least_and_greatest(values.as_binary_view(), |a, i| view_key(a.views()[i]))
        }
        _ => return None,
    };
    let Some((lo, hi)) = found else {
        return Some(None); // only nulls
    };
    let value = |i: usize| ScalarValue::try_from_array(values, i).ok();
    let e = value(lo).zip(value(hi));
    Some(e.filter(|(lo, hi)| !too_long(lo) && !too_long(hi)))
}

/// A value's first four bytes as a big-endian number, zero-padded.
fn head_key(b: &[u8]) -> u32 {
    let mut w = [0u8; 4];
    let n = b.len().min(4);
    w[..n].copy_from_slice(&b[..n]);
    u32::from_be_bytes(w)
}

/// [`head_key`] from an Arrow view: its inline prefix (bytes 4..8), masked to the length.
fn view_key(view: u128) -> u32 {
    let len = view as u32;
    let prefix = u32::from_be_bytes(((view >> 32) as u32).to_le_bytes());
    match len {
        0 => 0,
        1..=3 => prefix & !(u32::MAX >> (8 * len)),
        _ => prefix,
    }
}

/// Positions of the least and greatest non-null values of `a` by their bytes, ordered
/// first by `key` (see [`head_key`]); `None` when every value is null.
fn least_and_greatest<A>(a: A, key: impl Fn(A, usize) -> u32) -> Option<(usize, usize)>
where
    A: arrow::array::ArrayAccessor + Copy,
    A::Item: AsRef<[u8]>,
{
    let bytes = |i: usize| a.value(i);
    let nulls = a.logical_nulls();
    let mut best: Option<((usize, u32), (usize, u32))> = None;
    for i in 0..a.len() {
        if nulls.as_ref().is_some_and(|n| n.is_null(i)) {
            continue;
        }
        let k = key(a, i);
        let ((lo, lk), (hi, hk)) = best.get_or_insert(((i, k), (i, k)));
        if k < *lk || (k == *lk && bytes(i).as_ref() < bytes(*lo).as_ref()) {
            (*lo, *lk) = (i, k);
        }
        if k > *hk || (k == *hk && bytes(i).as_ref() > bytes(*hi).as_ref()) {
            (*hi, *hk) = (i, k);
        }
    }
    best.map(|((lo, _), (hi, _))| (lo, hi))
}

/// True for a text or bytes extremum longer than zone maps keep.
fn too_long(s: &ScalarValue) -> bool {
    match s {
        ScalarValue::Utf8(Some(v))
        | ScalarValue::LargeUtf8(Some(v))
        | ScalarValue::Utf8View(Some(v)) => v.len() > MAX_CACHED_BYTES,
        ScalarValue::Binary(Some(v))
        | ScalarValue::BinaryView(Some(v))
        | ScalarValue::FixedSizeBinary(_, Some(v)) => v.len() > MAX_CACHED_BYTES,
        _ => false,
    }
}

/// [`extrema`] of an orderable column holding some non-null value, through DataFusion's
/// `min`/`max` accumulators: for the types neither [`keyed_extrema`] nor
/// [`byte_extrema`] takes (booleans, fixed-size bytes, decimals), and the reference
/// their tests compare them with.
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
    if lo.is_null() || hi.is_null() || too_long(&lo) || too_long(&hi) {
        return None;
    }
    Some((lo, hi))
}

/// Feeds the zone maps from one partition's scan: the batches of the units it reads
/// whole, and, in a two-step read ([`super::dynamic::Probe`]), the filter columns read
/// first of every unit, whether its rows pass or not (so that a TopK's first query maps
/// the zones of the column it orders by, which later queries then skip unread).
#[derive(Debug)]
pub struct ZoneRecorder {
    maps: Arc<ZoneMaps>,
    pieces: Arc<ZonePieces>,
    whole: Recorded,
    first: Recorded,
}

/// Columns recorded from one kind of batch, and the zone they are in so far.
#[derive(Debug, Default)]
struct Recorded {
    /// Positions in the batch.
    at: Vec<usize>,
    /// Full-schema indices.
    cols: Vec<usize>,
    acc: Option<ZoneAccumulator>,
}

impl Recorded {
    fn new(cols: impl IntoIterator<Item = (usize, usize)>) -> Self {
        let (at, cols) = cols.into_iter().unzip();
        Recorded {
            at,
            cols,
            acc: None,
        }
    }

    fn add(&mut self, maps: &ZoneMaps, pieces: &ZonePieces, unit: &ZonedUnit, b: &RecordBatch) {
        if self.cols.is_empty() {
            return;
        }
        let values: Vec<&ArrayRef> = self.at.iter().map(|&i| b.column(i)).collect();
        ZoneAccumulator::add(&mut self.acc, maps, Some(pieces), unit, &self.cols, &values);
    }

    fn leave(&mut self, maps: &ZoneMaps, pieces: &ZonePieces) {
        ZoneAccumulator::leave(&mut self.acc, maps, Some(pieces), &self.cols);
    }
}

impl ZoneRecorder {
    /// A recorder into `maps` for batches whose value columns are `record` (position in
    /// the batch, full-schema index), of which those whose full index is in `first` are
    /// read first (in that order) by a two-step read. `pieces` gathers the zones the
    /// partitions of one execution each read a part of.
    pub fn new(
        maps: Arc<ZoneMaps>,
        pieces: Arc<ZonePieces>,
        record: &[(usize, usize)],
        first: &[usize],
    ) -> Self {
        let probed: HashSet<usize> = first.iter().copied().collect();
        let whole = record.iter().copied().filter(|(_, c)| !probed.contains(c));
        let first = first
            .iter()
            .enumerate()
            .filter(|(_, c)| record.iter().any(|(_, r)| r == *c))
            .map(|(i, &c)| (i, c));
        ZoneRecorder {
            maps,
            pieces,
            whole: Recorded::new(whole),
            first: Recorded::new(first),
        }
    }

    /// Records the batch of `unit` (every column of the scan).
    pub fn batch(&mut self, unit: &ZonedUnit, b: &RecordBatch) {
        self.whole.add(&self.maps, &self.pieces, unit, b);
    }

    /// Records the batch of the columns a two-step read read first for `unit`.
    pub fn first(&mut self, unit: &ZonedUnit, b: &RecordBatch) {
        self.first.add(&self.maps, &self.pieces, unit, b);
    }

    /// Hands the zones read in part to the execution's pieces (the partition is done).
    pub fn finish(&mut self) {
        self.whole.leave(&self.maps, &self.pieces);
        self.first.leave(&self.maps, &self.pieces);
    }
}

/// Units and zone statistics for the tests of this module and of [`super::prune`].
#[cfg(test)]
pub(crate) mod test_zones {
    use super::*;
    use crate::arrow_reader::reader::ScanUnit;

    /// A unit of table rows `rows` in `zone` of `zone_rows` rows.
    pub fn unit(zone: u64, rows: std::ops::Range<u64>, zone_rows: u64) -> ZonedUnit {
        ZonedUnit {
            unit: ScanUnit::Rows(rows),
            zone,
            zone_rows,
        }
    }

    /// A `Float64` scalar.
    pub fn f(v: f64) -> ScalarValue {
        ScalarValue::Float64(Some(v))
    }

    /// A zone of 10 rows with extrema `lo..=hi` and `nulls` nulls.
    pub fn known(lo: f64, hi: f64, nulls: u64) -> ZoneStats {
        ZoneStats {
            extrema: Some((f(lo), f(hi))),
            nulls,
            values: 10 - nulls,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_zones::{f, known, unit};
    use super::*;
    use crate::arrow_reader::reader::ScanUnit;

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
    fn byte_extrema_match_datafusion_min_max() {
        use arrow::array::StringViewArray;
        use arrow::array::{BinaryArray, BinaryViewArray, LargeStringArray, StringArray};
        let mut seed = 0x51ed_2701_9e37_79b9u64;
        let mut next = move || crate::chunk::xorshift(&mut seed);
        // Letters that tie on short prefixes, NUL (the padding's byte), and non-ASCII.
        let alphabet = ["a", "b", "\0", "é", "z", "ab", "\u{10FFFF}"];
        for round in 0..400 {
            let len = 1 + (next() % 40) as usize;
            let texts: Vec<Option<String>> = (0..len)
                .map(|_| {
                    if next() % 5 == 0 {
                        return None;
                    }
                    let n = match next() % 9 {
                        0 => 0,
                        8 => 2 + (next() % 300) as usize, // past the inline 12 and the cap
                        k => k as usize,
                    };
                    Some(
                        (0..n)
                            .map(|_| alphabet[next() as usize % alphabet.len()])
                            .collect(),
                    )
                })
                .collect();
            let strs: Vec<Option<&str>> = texts.iter().map(|t| t.as_deref()).collect();
            let bins: Vec<Option<&[u8]>> = strs.iter().map(|t| t.map(str::as_bytes)).collect();
            let arrays: Vec<ArrayRef> = vec![
                Arc::new(StringArray::from(strs.clone())),
                Arc::new(LargeStringArray::from(strs.clone())),
                Arc::new(StringViewArray::from(strs.clone())),
                Arc::new(BinaryArray::from(bins.clone())),
                Arc::new(BinaryViewArray::from(bins.clone())),
            ];
            for a in &arrays {
                let fast = byte_extrema(a).expect("a byte type");
                let slow = match a.null_count() == a.len() {
                    true => None,
                    false => general_extrema(a),
                };
                assert_eq!(fast, slow, "round {round}: {a:?}");
            }
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
