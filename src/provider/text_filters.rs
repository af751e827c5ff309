//! Which filters a scan tests on stored text before converting it ([`TextMatch`]): the
//! equalities, and the prefixes and substrings `LIKE` patterns imply, that
//! [`pushdown::text_equality`] finds in the table provider's logical filters, or
//! [`physical_text_equality`] in the physical filters a listing table's scan gets,
//! matched to the columns of one dataset that store text as
//! `U<n>` / `S<n>` records, as the items of a `vlstring` / `vlbytes` column, or as the
//! int32 codes of a `dictionary` column (the codes of the values that match).

use super::pushdown::{self, Needles};
use crate::array::batch_array::{ItemFilter, ItemKind, VarValues};
use crate::array::dtype::{DType, Endian};
use crate::array::table::ColumnStorage;
use crate::arrow_reader::text_match::{Matching, TextMatch};
use crate::dataset::Dataset;
use arrow::datatypes::Schema;
use datafusion::logical_expr::{Expr, Operator};
use datafusion::physical_expr::expressions::{
    BinaryExpr, CastExpr, Column, InListExpr, LikeExpr, Literal,
};
use datafusion::physical_expr::{PhysicalExpr, ScalarFunctionExpr};
use std::sync::Arc;

/// The text tests of the logical `filters` on `ds` (whose schema is `schema`): full-schema
/// column index and test, for the filters a scan can run on stored records or items.
pub(crate) async fn logical_text_matches(
    ds: &Dataset,
    schema: &Schema,
    filters: &[Expr],
) -> crate::Result<Vec<(usize, Arc<TextMatch>)>> {
    let found = filters.iter().filter_map(pushdown::text_equality);
    text_matches(ds, schema, found).await
}

/// The same for physical filters (over a schema whose columns are named as `schema`'s).
pub(crate) async fn physical_text_matches(
    ds: &Dataset,
    schema: &Schema,
    filters: &[Arc<dyn PhysicalExpr>],
) -> crate::Result<Vec<(usize, Arc<TextMatch>)>> {
    let found = filters.iter().filter_map(physical_text_equality);
    text_matches(ds, schema, found).await
}

/// The tests for the column requirements `found` (column name, values) on the columns of
/// `ds` that can run them: a table's 1-D `U<n>`/`S<n>` columns and its `vlstring` /
/// `vlbytes` columns, an array's `U<n>`/`S<n>` `value`. Other requirements are left to
/// the filter above the scan.
async fn text_matches(
    ds: &Dataset,
    schema: &Schema,
    found: impl Iterator<Item = (String, Needles)>,
) -> crate::Result<Vec<(usize, Arc<TextMatch>)>> {
    let mut out = Vec::new();
    for (name, needles) in found {
        let Ok(p) = schema.index_of(&name) else {
            continue;
        };
        let m = match ds {
            Dataset::Table(t) => {
                let c = t.open_column(p).await?;
                match &c.storage {
                    ColumnStorage::Fixed(a) if a.geometry.ndim() == 1 => {
                        record_match(&a.dtype, &needles)
                    }
                    ColumnStorage::Var { kind, .. } => item_match(*kind, needles),
                    ColumnStorage::Dictionary { values, .. } => code_match(values, needles),
                    _ => None,
                }
            }
            Dataset::Array(a) if p == a.geometry.ndim() => record_match(&a.dtype, &needles),
            Dataset::Array(_) => None,
        };
        out.extend(m.map(|m| (p, Arc::new(m))));
    }
    Ok(out)
}

/// The test on the variable-length items of a BatchArray column (`vlstring`,
/// `vlbytes`) for `needles`: texts, prefixes and substrings (in either case, for
/// `ILIKE`) on text items, byte strings on bytes.
fn item_match(kind: ItemKind, needles: Needles) -> Option<TextMatch> {
    match (kind, needles) {
        (
            ItemKind::Text,
            Needles::Text {
                texts,
                how,
                any_case,
            },
        ) => TextMatch::texts(&texts, how, any_case, None),
        (ItemKind::Bytes, Needles::Bytes(values)) => {
            Some(TextMatch::items(values, Matching::Equal))
        }
        _ => None,
    }
}

/// The test on the codes of a dictionary column whose distinct values are `values`
/// (text) for `needles`: the codes of the values that pass the test a `vlstring`
/// column's items would get ([`item_match`]). A null value's code is never one of them.
fn code_match(values: &VarValues, needles: Needles) -> Option<TextMatch> {
    // The values are text items: tested as a `vlstring` column's are.
    let test = item_match(ItemKind::Text, needles)?;
    let test = test.item_test();
    let codes: Vec<i32> = (0..values.len())
        .filter(|&i| values.get(i).is_some_and(|v| test.passes(v)))
        .map(|i| i32::try_from(i).ok())
        .collect::<Option<_>>()?;
    Some(TextMatch::codes(&codes))
}

/// The test on records of `dtype` for `needles`: texts, prefixes and substrings (in
/// either case, for `ILIKE`) on `U<n>`, byte strings on `S<n>`.
fn record_match(dtype: &DType, needles: &Needles) -> Option<TextMatch> {
    match (dtype, needles) {
        (
            DType::Unicode { chars, endian },
            Needles::Text {
                texts,
                how,
                any_case,
            },
        ) => {
            let records = (*chars, *endian == Endian::Big);
            TextMatch::texts(texts, *how, *any_case, Some(records))
        }
        (DType::Bytes(len), Needles::Bytes(values)) => Some(TextMatch::bytes(values, *len)),
        _ => None,
    }
}

/// [`pushdown::text_equality`] for a physical filter: `col = 'x'` (either way round),
/// `col IN ('x', …)`, `OR`s of those on one column, `col LIKE 'pattern'` (DataFusion's
/// physical `LIKE` escapes with `\`), `contains(col, 'x')`, with text or byte-string
/// literals.
pub(crate) fn physical_text_equality(e: &Arc<dyn PhysicalExpr>) -> Option<(String, Needles)> {
    fn column(e: &Arc<dyn PhysicalExpr>) -> Option<String> {
        if let Some(c) = e.downcast_ref::<CastExpr>() {
            return if pushdown::is_text(c.cast_type()) {
                column(c.expr())
            } else {
                None
            };
        }
        e.downcast_ref::<Column>().map(|c| c.name().to_string())
    }
    fn value(e: &Arc<dyn PhysicalExpr>) -> Option<Needles> {
        Needles::of_literal(e.downcast_ref::<Literal>()?.value())
    }
    if let Some(b) = e.downcast_ref::<BinaryExpr>() {
        let (left, right) = (b.left(), b.right());
        return match b.op() {
            Operator::Eq => match (column(left), value(right)) {
                (Some(c), Some(v)) => Some((c, v)),
                _ => Some((column(right)?, value(left)?)),
            },
            Operator::Or => {
                let (a, x) = physical_text_equality(left)?;
                let (b, y) = physical_text_equality(right)?;
                if a != b {
                    return None;
                }
                Some((a, x.extend(y)?))
            }
            _ => None,
        };
    }
    if let Some(l) = e.downcast_ref::<LikeExpr>() {
        if l.negated() {
            return None;
        }
        let needles = Needles::of_like(value(l.pattern())?, '\\', l.case_insensitive())?;
        return Some((column(l.expr())?, needles));
    }
    if let Some(f) = e.downcast_ref::<ScalarFunctionExpr>() {
        return match f.args() {
            [c, v] if f.name() == "contains" => Some((column(c)?, value(v)?.held()?)),
            _ => None,
        };
    }
    if let Some(l) = e.downcast_ref::<InListExpr>() {
        if l.negated() {
            return None;
        }
        let c = column(l.expr())?;
        let mut values = l.list().iter().map(value);
        let first = values.next()??;
        return Some((c, values.try_fold(first, |acc, v| acc.extend(v?))?));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{DataType, Field};
    use datafusion::common::{DFSchema, ScalarValue};
    use datafusion::logical_expr::Expr;
    use datafusion::prelude::{SessionContext, col, lit};

    /// Every filter the logical analysis recognises is recognised the same way once
    /// planned, and those it refuses stay refused.
    #[test]
    fn physical_filters_are_read_as_the_logical_ones() {
        let schema = Schema::new(vec![
            Field::new("name", DataType::Utf8, true),
            Field::new("other", DataType::Utf8, true),
            Field::new("blob", DataType::Binary, true),
            Field::new("i", DataType::Int64, true),
        ]);
        let df_schema = DFSchema::try_from(schema.clone()).unwrap();
        let bytes = |b: &[u8]| lit(ScalarValue::Binary(Some(b.to_vec())));
        let cases = [
            col("name").eq(lit("x")),
            lit("x").eq(col("name")),
            col("name").in_list(vec![lit("a"), lit("b")], false),
            col("name").in_list(vec![lit("a"), lit("b")], true),
            col("name").eq(lit("a")).or(col("name").eq(lit("b"))),
            col("name").eq(lit("a")).or(col("other").eq(lit("b"))),
            col("name").like(lit("ab%")),
            col("name").like(lit("a_b%")),
            col("name").like(lit("a\\%%")),
            col("name").like(lit("%ab")),
            col("name").like(lit("%a%bc_")),
            col("name").like(lit("%_")),
            col("name").not_like(lit("ab%")),
            datafusion::functions::expr_fn::contains(col("name"), lit("ab")),
            datafusion::functions::expr_fn::contains(col("name"), lit("")),
            Expr::Cast(datafusion::logical_expr::Cast::new(
                Box::new(col("name")),
                DataType::Utf8,
            ))
            .eq(lit("x")),
            Expr::Cast(datafusion::logical_expr::Cast::new(
                Box::new(col("i")),
                DataType::Binary,
            ))
            .eq(lit(ScalarValue::Binary(Some(b"x".to_vec())))),
            col("name").ilike(lit("ab%")),
            col("name").like(lit("a%")).or(col("name").like(lit("b%"))),
            col("name").eq(lit("a")).or(col("name").like(lit("b%"))),
            col("blob").eq(bytes(b"\x00\xff")),
            col("name").eq(lit(ScalarValue::Utf8(None))),
            col("name").not_eq(lit("x")),
            col("i").eq(lit(3i64)),
        ];
        let state = SessionContext::new().state();
        let mut recognised = 0;
        for e in cases {
            let physical = state.create_physical_expr(e.clone(), &df_schema).unwrap();
            let logical = pushdown::text_equality(&e);
            assert_eq!(physical_text_equality(&physical), logical, "{e}");
            recognised += usize::from(logical.is_some());
        }
        assert_eq!(recognised, 14);
    }
}
