//! Value pruning by python-blosc2 FULL indexes ([`crate::array::full_index`]): a filter's
//! conjuncts that bound one indexed column (`x = 5`, `x BETWEEN 1 AND 9`, `x > 2.5`,
//! `x IN (1, 7)`) are looked up in the column's sorted values, and the scan units
//! holding none of the rows found are dropped. Where the summaries of blocks help only
//! columns whose values cluster, this finds the few blocks of an unsorted column that
//! hold a value.
//!
//! Only what the index proves is dropped: a lookup that would find more than a quarter
//! of the rows, or an index that is stale or unreadable, drops nothing; rows written
//! after the index was built are never dropped. The filter stays with DataFusion.

use super::prune::{IndexCache, PruneReport, cached_full_index};
use crate::array::full_index::IndexKey;
use crate::array::ndarray::ReadStats;
use crate::arrow_reader::reader::ScanUnit;
use crate::arrow_reader::zones::ZonedUnit;
use crate::dataset::Dataset;
use arrow::datatypes::Schema;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{BinaryExpr, Column, InListExpr, Literal};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

/// What a filter allows one column: any of these ranges (`x = 1 OR x = 7` is two).
type Allowed = Vec<(Bound<IndexKey>, Bound<IndexKey>)>;

/// The key of a literal, for the integer and float types indexes are looked up with.
fn key(v: &ScalarValue) -> Option<IndexKey> {
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
        _ => return None,
    })
}

/// The tighter of two lower (`upper` false) or upper bounds.
fn tighter(a: Bound<IndexKey>, b: Bound<IndexKey>, upper: bool) -> Bound<IndexKey> {
    use std::cmp::Ordering::*;
    let (ka, kb) = match (&a, &b) {
        (Bound::Unbounded, _) => return b,
        (_, Bound::Unbounded) => return a,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            (*x, *y)
        }
    };
    match (ka.order(&kb), upper) {
        (Less, false) | (Greater, true) => b,
        (Greater, false) | (Less, true) => a,
        // Equal keys: the exclusive bound is the tighter one.
        (Equal, _) => match a {
            Bound::Excluded(_) => a,
            _ => b,
        },
    }
}

/// `column op literal` (either way round) as the column's name and its allowed range.
fn comparison(e: &BinaryExpr) -> Option<(String, Allowed)> {
    let (col, lit, op) = match (
        e.left().downcast_ref::<Column>(),
        e.right().downcast_ref::<Literal>(),
        e.left().downcast_ref::<Literal>(),
        e.right().downcast_ref::<Column>(),
    ) {
        (Some(c), Some(l), _, _) => (c, l, *e.op()),
        (_, _, Some(l), Some(c)) => (c, l, e.op().swap()?),
        _ => return None,
    };
    let k = key(lit.value())?;
    let range = match op {
        Operator::Eq => (Bound::Included(k), Bound::Included(k)),
        Operator::Lt => (Bound::Unbounded, Bound::Excluded(k)),
        Operator::LtEq => (Bound::Unbounded, Bound::Included(k)),
        Operator::Gt => (Bound::Excluded(k), Bound::Unbounded),
        Operator::GtEq => (Bound::Included(k), Bound::Unbounded),
        _ => return None,
    };
    Some((col.name().to_string(), vec![range]))
}

/// Both `a` and `b`: their intersection when each is one range, else the one of fewer
/// ranges (a superset of what both allow).
fn both(a: Allowed, b: Allowed) -> Allowed {
    match (a.as_slice(), b.as_slice()) {
        ([(l0, h0)], [(l1, h1)]) => vec![(tighter(*l0, *l1, false), tighter(*h0, *h1, true))],
        _ if a.len() <= b.len() => a,
        _ => b,
    }
}

/// What `e` allows, when it bounds one column and nothing else: a comparison with a
/// literal, an `IN` list of literals, or `AND` / `OR` of such on the same column.
fn one_column(e: &Arc<dyn PhysicalExpr>) -> Option<(String, Allowed)> {
    if let Some(b) = e.downcast_ref::<BinaryExpr>() {
        return match *b.op() {
            op @ (Operator::And | Operator::Or) => {
                let (n0, a0) = one_column(b.left())?;
                let (n1, a1) = one_column(b.right())?;
                (n0 == n1).then(|| match op {
                    Operator::And => (n0, both(a0, a1)),
                    _ => (n0, [a0, a1].concat()),
                })
            }
            _ => comparison(b),
        };
    }
    let list = e.downcast_ref::<InListExpr>()?;
    let c = list.expr().downcast_ref::<Column>()?;
    if list.negated() {
        return None;
    }
    let keys: Option<Allowed> = list
        .list()
        .iter()
        .map(|v| {
            let k = key(v.downcast_ref::<Literal>()?.value())?;
            Some((Bound::Included(k), Bound::Included(k)))
        })
        .collect();
    Some((c.name().to_string(), keys?))
}

/// What the conjuncts of `e` allow each column they bound.
fn allowed_by_conjuncts(e: &Arc<dyn PhysicalExpr>, out: &mut BTreeMap<String, Allowed>) {
    if let Some(b) = e.downcast_ref::<BinaryExpr>()
        && *b.op() == Operator::And
    {
        allowed_by_conjuncts(b.left(), out);
        allowed_by_conjuncts(b.right(), out);
    } else if let Some((name, a)) = one_column(e) {
        let merged = match out.remove(&name) {
            Some(before) => both(before, a),
            None => a,
        };
        out.insert(name, merged);
    }
}

/// Drops the units of a CTable scan that hold no row a FULL index finds for the
/// conjuncts of `filter` (see the module's notes), and says so in `report`.
///
/// # Errors
/// Reading an index.
pub async fn prune_by_full_indexes(
    ds: &Dataset,
    schema: &Schema,
    units: Vec<ZonedUnit>,
    mut report: PruneReport,
    filter: &Arc<dyn PhysicalExpr>,
    cache: &IndexCache,
) -> crate::Result<(Vec<ZonedUnit>, PruneReport)> {
    let Dataset::Table(t) = ds else {
        return Ok((units, report));
    };
    let mut allowed = BTreeMap::new();
    allowed_by_conjuncts(filter, &mut allowed);
    let mut keep = vec![true; units.len()];
    let max_rows = t.physical_rows / 4;
    let mut used = false;
    for (name, a) in allowed {
        let Ok(col) = schema.index_of(&name) else {
            continue;
        };
        if col >= t.ncolumns() {
            continue; // a computed column
        }
        let Some(index) = cached_full_index(t, col, cache).await? else {
            continue;
        };
        let mut stats = ReadStats::default();
        let mut rows = Vec::new();
        let mut found = true;
        for (lo, hi) in a {
            match index.rows_between(lo, hi, max_rows, &mut stats).await? {
                Some(r) if rows.len() + r.len() <= max_rows as usize => rows.extend(r),
                _ => {
                    found = false;
                    break;
                }
            }
        }
        if !found {
            continue;
        }
        rows.sort_unstable();
        used = true;
        for (u, k) in units.iter().zip(keep.iter_mut()) {
            let ScanUnit::Rows(r) = &u.unit else {
                continue;
            };
            // Rows past the index (written after it) are kept.
            let holds = r.end > index.rows || {
                let i = rows.partition_point(|&x| x < r.start);
                i < rows.len() && rows[i] < r.end
            };
            *k &= holds;
        }
    }
    if !used {
        return Ok((units, report));
    }
    report.sources.push("full_index");
    let kept: Vec<ZonedUnit> = units
        .into_iter()
        .zip(keep)
        .filter_map(|(u, k)| k.then_some(u))
        .collect();
    report.units_pruned = report.units_before - kept.len();
    Ok((kept, report))
}
