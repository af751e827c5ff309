//! Value pruning by python-blosc2 indexes that find rows: FULL
//! ([`crate::array::full_index`]), PARTIAL and BUCKET ([`crate::array::chunk_local_index`]),
//! and a utf8 column's FULL by rank ([`crate::array::ranked_text_index`]).
//! A filter's conjuncts that bound one indexed column (`x = 5`, `x BETWEEN 1 AND 9`,
//! `x > 2.5`, `x IN (1, 7)`, `name LIKE 'ab%'`, `OR`s of these; numbers, text, and
//! timestamps in the column's unit) are looked up in the column's index, and the scan
//! units holding none of the rows found are dropped. Where the summaries of blocks help
//! only columns whose values cluster, this finds the few blocks of an unsorted column
//! that hold a value. Dynamic filters are looked up too ([`super::dynamic`]).
//!
//! Only what the index proves is dropped: a lookup that would find more than a quarter
//! of the rows, or rows in more than half of the table's zones (a scan skips whole
//! zones: such a lookup would cost more than it saves, and stops as soon as it sees
//! that), or an index that is stale or unreadable, drops nothing; rows written
//! after the index was built are never dropped; NaN rows, which SQL's order puts below or
//! above every number depending on their sign, are kept for a range open on a side (found
//! by a FULL or OPSI index; for the others, the blocks the summaries flag holding a NaN).
//! The filter stays with DataFusion.

use super::prune::{IndexCache, PruneReport, cached_column_index, cached_summary, kept_units};
use crate::array::full_index::{IndexKey, LookupLimit};
use crate::array::index_sidecars::wants_nan;
use crate::array::ndarray::ReadStats;
use crate::array::summary::{ColumnSummary, FLAG_ALL_NAN, FLAG_HAS_NAN};
use crate::arrow_reader::reader::ScanUnit;
use crate::arrow_reader::zones::ZonedUnit;
use crate::dataset::Dataset;
use arrow::datatypes::{DataType, Schema};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{
    BinaryExpr, CastExpr, Column, InListExpr, LikeExpr, Literal,
};
use std::collections::BTreeMap;
use std::ops::{Bound, Range};
use std::sync::Arc;

/// Ranges of one column looked up at most (`x IN (…)` of more values is not).
const MAX_LOOKUPS: usize = 64;

/// What a filter allows one column: any of these ranges (`x = 1 OR x = 7` is two).
type Allowed = Vec<(Bound<IndexKey>, Bound<IndexKey>)>;

/// The key of a literal compared with a column of type `column`: integers, floats,
/// text, and timestamps and durations of the column's own type (DataFusion casts such a
/// literal to the column's unit and zone; their keys are the integer counts the column
/// stores).
fn key(v: &ScalarValue, column: &DataType) -> Option<IndexKey> {
    Some(match v {
        ScalarValue::Int8(Some(x)) => IndexKey::Int(*x as i128),
        ScalarValue::Int16(Some(x)) => IndexKey::Int(*x as i128),
        ScalarValue::Int32(Some(x)) => IndexKey::Int(*x as i128),
        ScalarValue::Int64(Some(x)) => IndexKey::Int(*x as i128),
        ScalarValue::UInt8(Some(x)) => IndexKey::Int(*x as i128),
        ScalarValue::UInt16(Some(x)) => IndexKey::Int(*x as i128),
        ScalarValue::UInt32(Some(x)) => IndexKey::Int(*x as i128),
        ScalarValue::UInt64(Some(x)) => IndexKey::Int(*x as i128),
        ScalarValue::Float32(Some(x)) => IndexKey::Float(*x as f64),
        ScalarValue::Float64(Some(x)) => IndexKey::Float(*x),
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => IndexKey::Text(s.clone()),
        ScalarValue::TimestampSecond(Some(x), _)
        | ScalarValue::TimestampMillisecond(Some(x), _)
        | ScalarValue::TimestampMicrosecond(Some(x), _)
        | ScalarValue::TimestampNanosecond(Some(x), _)
        | ScalarValue::DurationSecond(Some(x))
        | ScalarValue::DurationMillisecond(Some(x))
        | ScalarValue::DurationMicrosecond(Some(x))
        | ScalarValue::DurationNanosecond(Some(x))
            if v.data_type() == *column =>
        {
            IndexKey::Int(*x as i128)
        }
        _ => return None,
    })
}

/// The least string above every string starting with `prefix` (`None`: there is none).
fn after_prefix(prefix: &str) -> Option<String> {
    let mut s: Vec<char> = prefix.chars().collect();
    while let Some(c) = s.pop() {
        let next = match c as u32 {
            0xD7FF => Some('\u{E000}'),
            u => char::from_u32(u + 1),
        };
        if let Some(n) = next {
            s.push(n);
            return Some(s.into_iter().collect());
        }
    }
    None
}

/// What `x LIKE 'pattern'` allows `x`: the strings starting with the pattern's text
/// before its first wildcard or escape (`'ab%'`, `'ab_c%'` both start with `ab`), or
/// the pattern itself when it has none.
fn like_range(pattern: &str) -> Option<(Bound<IndexKey>, Bound<IndexKey>)> {
    let text = |s: &str| IndexKey::Text(s.to_string());
    match pattern.find(['%', '_', '\\']) {
        None => Some((
            Bound::Included(text(pattern)),
            Bound::Included(text(pattern)),
        )),
        Some(0) => None,
        Some(i) => {
            let prefix = &pattern[..i];
            let hi = match after_prefix(prefix) {
                Some(a) => Bound::Excluded(text(&a)),
                None => Bound::Unbounded,
            };
            Some((Bound::Included(text(prefix)), hi))
        }
    }
}

/// The tighter of two lower (`upper` false) or upper bounds.
fn tighter(a: Bound<IndexKey>, b: Bound<IndexKey>, upper: bool) -> Bound<IndexKey> {
    use std::cmp::Ordering::*;
    let (ka, kb) = match (&a, &b) {
        (Bound::Unbounded, _) => return b,
        (_, Bound::Unbounded) => return a,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            (x, y)
        }
    };
    match (ka.order(kb), upper) {
        (Less, false) | (Greater, true) => b,
        (Greater, false) | (Less, true) => a,
        // Equal keys: the exclusive bound is the tighter one.
        (Equal, _) => match a {
            Bound::Excluded(_) => a,
            _ => b,
        },
    }
}

/// The column `e` is, or widens without changing any value's order against a literal
/// (`CAST(x AS DOUBLE)` of a float32 or integer `x`, as DataFusion compares `x = 0.5`;
/// an integer to a wider one): the comparison of its values as they are then means
/// what the index's order means (which compares integers with floats as floats).
fn column_of(e: &Arc<dyn PhysicalExpr>, schema: &Schema) -> Option<Column> {
    if let Some(c) = e.downcast_ref::<Column>() {
        return Some(c.clone());
    }
    let cast = e.downcast_ref::<CastExpr>()?;
    let c = cast.expr().downcast_ref::<Column>()?;
    let from = schema.field_with_name(c.name()).ok()?.data_type();
    let widens = match cast.cast_type() {
        DataType::Float64 => from.is_integer() || *from == DataType::Float32,
        DataType::Int64 => {
            from.is_signed_integer()
                || matches!(from, DataType::UInt8 | DataType::UInt16 | DataType::UInt32)
        }
        DataType::UInt64 => from.is_unsigned_integer(),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => matches!(
            from,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
        ),
        _ => false,
    };
    widens.then(|| c.clone())
}

/// The type of column `c` in `schema`.
fn field_type<'a>(c: &Column, schema: &'a Schema) -> Option<&'a DataType> {
    Some(schema.field_with_name(c.name()).ok()?.data_type())
}

/// `column op literal` (either way round) as the column's name and its allowed range.
fn comparison(e: &BinaryExpr, schema: &Schema) -> Option<(String, Allowed)> {
    let (col, lit, op) = match (
        column_of(e.left(), schema),
        e.right().downcast_ref::<Literal>(),
        e.left().downcast_ref::<Literal>(),
        column_of(e.right(), schema),
    ) {
        (Some(c), Some(l), _, _) => (c, l, *e.op()),
        (_, _, Some(l), Some(c)) => (c, l, e.op().swap()?),
        _ => return None,
    };
    let k = key(lit.value(), field_type(&col, schema)?)?;
    let range = match op {
        Operator::Eq => (Bound::Included(k.clone()), Bound::Included(k)),
        Operator::Lt => (Bound::Unbounded, Bound::Excluded(k)),
        Operator::LtEq => (Bound::Unbounded, Bound::Included(k)),
        Operator::Gt => (Bound::Excluded(k), Bound::Unbounded),
        Operator::GtEq => (Bound::Included(k), Bound::Unbounded),
        _ => return None,
    };
    Some((col.name().to_string(), vec![range]))
}

/// Both `a` and `b`: their intersection when one is a single range (a join's dynamic
/// filter `k >= 3 AND k <= 90 AND k IN (3, 7, 90)` is the three keys), else the one of
/// fewer ranges (a superset of what both allow).
fn both(a: Allowed, b: Allowed) -> Allowed {
    let (one, many) = match (a.len(), b.len()) {
        (1, _) => (&a[0], &b),
        (_, 1) => (&b[0], &a),
        _ if a.len() <= b.len() => return a,
        _ => return b,
    };
    many.iter()
        .map(|(l, h)| {
            (
                tighter(l.clone(), one.0.clone(), false),
                tighter(h.clone(), one.1.clone(), true),
            )
        })
        .collect()
}

/// What `e` allows, when it bounds one column and nothing else: a comparison with a
/// literal, an `IN` list of literals, a `LIKE` pattern, or `AND` / `OR` of such on the
/// same column.
fn one_column(e: &Arc<dyn PhysicalExpr>, schema: &Schema) -> Option<(String, Allowed)> {
    if let Some(b) = e.downcast_ref::<BinaryExpr>() {
        return match *b.op() {
            op @ (Operator::And | Operator::Or) => {
                let (n0, a0) = one_column(b.left(), schema)?;
                let (n1, a1) = one_column(b.right(), schema)?;
                (n0 == n1).then(|| match op {
                    Operator::And => (n0, both(a0, a1)),
                    _ => (n0, [a0, a1].concat()),
                })
            }
            _ => comparison(b, schema),
        };
    }
    if let Some(like) = e.downcast_ref::<LikeExpr>() {
        let c = column_of(like.expr(), schema)?;
        if like.negated() || like.case_insensitive() {
            return None;
        }
        let IndexKey::Text(pattern) = key(
            like.pattern().downcast_ref::<Literal>()?.value(),
            field_type(&c, schema)?,
        )?
        else {
            return None;
        };
        return Some((c.name().to_string(), vec![like_range(&pattern)?]));
    }
    let list = e.downcast_ref::<InListExpr>()?;
    let c = column_of(list.expr(), schema)?;
    if list.negated() {
        return None;
    }
    let column = field_type(&c, schema)?;
    let keys: Option<Allowed> = list
        .list()
        .iter()
        .map(|v| {
            let k = key(v.downcast_ref::<Literal>()?.value(), column)?;
            Some((Bound::Included(k.clone()), Bound::Included(k)))
        })
        .collect();
    Some((c.name().to_string(), keys?))
}

/// What the conjuncts of `e` allow each column they bound.
fn allowed_by_conjuncts(
    e: &Arc<dyn PhysicalExpr>,
    schema: &Schema,
    out: &mut BTreeMap<String, Allowed>,
) {
    if let Some(b) = e.downcast_ref::<BinaryExpr>()
        && *b.op() == Operator::And
    {
        allowed_by_conjuncts(b.left(), schema, out);
        allowed_by_conjuncts(b.right(), schema, out);
    } else if let Some((name, a)) = one_column(e, schema) {
        let merged = match out.remove(&name) {
            Some(before) => both(before, a),
            None => a,
        };
        out.insert(name, merged);
    }
}

/// `ranges` sorted and merged: ascending and disjoint.
fn merged(mut ranges: Vec<Range<u64>>) -> Vec<Range<u64>> {
    ranges.sort_unstable_by_key(|r| r.start);
    let mut out: Vec<Range<u64>> = Vec::with_capacity(ranges.len());
    for r in ranges.into_iter().filter(|r| r.start < r.end) {
        match out.last_mut() {
            Some(last) if last.end >= r.start => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

/// Whether `r` meets any of `ranges` (ascending and disjoint).
fn overlaps(ranges: &[Range<u64>], r: &Range<u64>) -> bool {
    let i = ranges.partition_point(|x| x.end <= r.start);
    i < ranges.len() && ranges[i].start < r.end
}

/// What one column's index found for the filter's conjuncts on it.
#[derive(Debug)]
struct ColumnFinds {
    /// Row ranges holding every row found (ascending, disjoint).
    rows: Vec<Range<u64>>,
    /// Rows the index describes: rows past them were written after it.
    index_rows: u64,
    /// For a float column whose index does not find NaN rows: its block summaries,
    /// whose flags tell the blocks holding one.
    nan_blocks: Option<Arc<ColumnSummary>>,
}

impl ColumnFinds {
    /// Whether rows `r` may hold a row the filter keeps.
    fn holds(&self, r: &Range<u64>) -> bool {
        r.end > self.index_rows
            || overlaps(&self.rows, r)
            || self.nan_blocks.as_ref().is_some_and(|s| {
                s.segments_for(r.start, r.end)
                    .any(|i| s.flags(i) & (FLAG_HAS_NAN | FLAG_ALL_NAN) != 0)
            })
    }
}

/// What a CTable's indexes found for a filter: the units holding none of the rows found
/// for some column hold no row the filter keeps.
#[derive(Debug)]
pub struct IndexFinds {
    columns: Vec<ColumnFinds>,
}

impl IndexFinds {
    /// False when `unit` holds no row the indexes found for some column (and so no row
    /// passing the filter).
    pub fn holds(&self, unit: &ZonedUnit) -> bool {
        match &unit.unit {
            ScanUnit::Rows(r) => self.columns.iter().all(|c| c.holds(r)),
            _ => true,
        }
    }
}

/// Looks up the conjuncts of `filter` that bound one indexed column of a CTable (see
/// the module's notes); `None` when no index was used.
///
/// # Errors
/// Reading an index.
pub async fn index_finds(
    ds: &Dataset,
    schema: &Schema,
    filter: &Arc<dyn PhysicalExpr>,
    cache: &IndexCache,
) -> crate::Result<Option<IndexFinds>> {
    let Dataset::Table(t) = ds else {
        return Ok(None);
    };
    let mut allowed = BTreeMap::new();
    allowed_by_conjuncts(filter, schema, &mut allowed);
    let max_rows = t.physical_rows / 4;
    let limit = LookupLimit::rows_in_half_the_zones(max_rows, t.physical_rows, t.zone_rows());
    let mut columns = Vec::new();
    for (name, a) in allowed {
        let Ok(col) = schema.index_of(&name) else {
            continue;
        };
        if col >= t.ncolumns() {
            continue; // a computed column
        }
        // Each range is a lookup of its own: long `IN` lists are left to the scan.
        if a.len() > MAX_LOOKUPS {
            continue;
        }
        let Some(index) = cached_column_index(t, col, cache).await? else {
            continue;
        };
        // NaN rows (which ranges open on a side match) a PARTIAL or BUCKET index does
        // not find: the blocks the summaries flag holding one are kept.
        let float = matches!(
            schema.field(col).data_type(),
            DataType::Float16 | DataType::Float32 | DataType::Float64
        );
        let nan = a.iter().any(|(lo, hi)| wants_nan(lo, hi));
        let nan_blocks = match (float && nan, index.finds_nan()) {
            (true, false) => match cached_summary(t, col, cache).await? {
                Some(s) if s.rows == index.rows() => Some(s),
                _ => continue,
            },
            _ => None,
        };
        let mut stats = ReadStats::default();
        let mut rows: Vec<Range<u64>> = Vec::new();
        let mut found = true;
        for (lo, hi) in a {
            let left = max_rows.saturating_sub(rows.iter().map(|r| r.end - r.start).sum());
            match index
                .rows_between(lo, hi, limit.with_max_rows(left), &mut stats)
                .await?
            {
                Some(r) => rows.extend(r),
                None => {
                    found = false;
                    break;
                }
            }
        }
        if found {
            columns.push(ColumnFinds {
                rows: merged(rows),
                index_rows: index.rows(),
                nan_blocks,
            });
        }
    }
    Ok((!columns.is_empty()).then_some(IndexFinds { columns }))
}

/// Drops the units of a CTable scan that hold no row an index finds for the conjuncts
/// of `filter` ([`index_finds`]), and says so in `report` (source `index`).
///
/// # Errors
/// Reading an index.
pub async fn prune_by_column_indexes(
    ds: &Dataset,
    schema: &Schema,
    units: Vec<ZonedUnit>,
    report: PruneReport,
    filter: &Arc<dyn PhysicalExpr>,
    cache: &IndexCache,
) -> crate::Result<(Vec<ZonedUnit>, PruneReport)> {
    let finds = index_finds(ds, schema, filter, cache).await?;
    Ok(prune_by_finds(units, report, finds.as_ref()))
}

/// Drops the units holding no row `finds` found, and says so in `report` (source
/// `index`); all are kept when nothing was looked up.
pub fn prune_by_finds(
    units: Vec<ZonedUnit>,
    mut report: PruneReport,
    finds: Option<&IndexFinds>,
) -> (Vec<ZonedUnit>, PruneReport) {
    let Some(finds) = finds else {
        return (units, report);
    };
    let keep: Vec<bool> = units.iter().map(|u| finds.holds(u)).collect();
    report.sources.push("index");
    kept_units(units, &keep, report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> IndexKey {
        IndexKey::Text(s.to_string())
    }

    #[test]
    fn like_patterns_bound_their_prefix() {
        assert_eq!(
            like_range("ab%"),
            Some((Bound::Included(text("ab")), Bound::Excluded(text("ac"))))
        );
        // Text before the first wildcard or escape; none: the pattern itself.
        assert_eq!(like_range("ab_c%").unwrap().1, Bound::Excluded(text("ac")));
        assert_eq!(like_range("a\\%b").unwrap().0, Bound::Included(text("a")));
        assert_eq!(
            like_range("abc"),
            Some((Bound::Included(text("abc")), Bound::Included(text("abc"))))
        );
        assert_eq!(like_range("%b"), None);
        assert_eq!(like_range("_b"), None);
        // The greatest code point carries; surrogates are skipped.
        assert_eq!(after_prefix("a\u{10FFFF}").as_deref(), Some("b"));
        assert_eq!(after_prefix("\u{D7FF}").as_deref(), Some("\u{E000}"));
        assert_eq!(after_prefix("\u{10FFFF}"), None);
        assert_eq!(
            like_range("\u{10FFFF}%"),
            Some((Bound::Included(text("\u{10FFFF}")), Bound::Unbounded))
        );
    }
}
