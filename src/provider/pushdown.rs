//! Turns filter expressions on `dim_k` columns into a [`Selection`]: per dimension, a set of
//! sorted disjoint index ranges. `=`, `<`, `<=`, `>`, `>=`, `BETWEEN`, `IN`, `AND` and `OR`
//! (within one dimension) are understood; those filters are then reported Exact, because
//! the scan yields exactly the rows of the selection. Anything else is left to DataFusion.
//! [`text_equality`] finds the filters a table scan can test on stored text records
//! (`name = 'x'`, `name IN (…)`, `name LIKE '%x%'`); those stay Inexact.

use crate::arrow_reader::reader::Selection;
use crate::arrow_reader::text_match::Matching;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::expr::{InList, Like};
use datafusion::logical_expr::{Between, BinaryExpr, Expr, Operator};
use std::ops::Range;

/// Per-dimension constraint: sorted disjoint ranges.
type Ranges = Vec<Range<u64>>;

fn normalize(mut v: Ranges) -> Ranges {
    v.retain(|r| r.start < r.end);
    v.sort_by_key(|r| r.start);
    let mut out: Ranges = Vec::with_capacity(v.len());
    for r in v {
        match out.last_mut() {
            Some(l) if r.start <= l.end => l.end = l.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

fn intersect(a: &Ranges, b: &Ranges) -> Ranges {
    let mut out = Vec::new();
    for x in a {
        for y in b {
            let s = x.start.max(y.start);
            let e = x.end.min(y.end);
            if s < e {
                out.push(s..e);
            }
        }
    }
    normalize(out)
}

fn int_literal(e: &Expr) -> Option<i128> {
    match e {
        Expr::Literal(v, _) => match v {
            ScalarValue::Int8(Some(x)) => Some(*x as i128),
            ScalarValue::Int16(Some(x)) => Some(*x as i128),
            ScalarValue::Int32(Some(x)) => Some(*x as i128),
            ScalarValue::Int64(Some(x)) => Some(*x as i128),
            ScalarValue::UInt8(Some(x)) => Some(*x as i128),
            ScalarValue::UInt16(Some(x)) => Some(*x as i128),
            ScalarValue::UInt32(Some(x)) => Some(*x as i128),
            ScalarValue::UInt64(Some(x)) => Some(*x as i128),
            _ => None,
        },
        Expr::Cast(c) => int_literal(&c.expr),
        Expr::TryCast(c) => int_literal(&c.expr),
        _ => None,
    }
}

/// The dimension a column expression names (`dim_k`, possibly behind a cast).
fn dim_of(e: &Expr, ndim: usize) -> Option<usize> {
    match e {
        Expr::Column(c) => c
            .name
            .strip_prefix("dim_")
            .and_then(|k| k.parse::<usize>().ok())
            .filter(|&k| k < ndim),
        Expr::Cast(c) => dim_of(&c.expr, ndim),
        Expr::TryCast(c) => dim_of(&c.expr, ndim),
        _ => None,
    }
}

fn clamp(lo: i128, hi_excl: i128, extent: u64) -> Ranges {
    let lo = lo.max(0);
    let hi = hi_excl.min(extent as i128);
    if lo < hi {
        vec![lo as u64..hi as u64]
    } else {
        Vec::new()
    }
}

/// The constraint `e` puts on one dimension, or `None` when it is not such a constraint.
fn constraint(e: &Expr, shape: &[u64]) -> Option<(usize, Ranges)> {
    let nd = shape.len();
    match e {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => match op {
            Operator::And => {
                let (a, ra) = constraint(left, shape)?;
                let (b, rb) = constraint(right, shape)?;
                (a == b).then(|| (a, intersect(&ra, &rb)))
            }
            Operator::Or => {
                let (a, mut ra) = constraint(left, shape)?;
                let (b, rb) = constraint(right, shape)?;
                (a == b).then(|| {
                    ra.extend(rb);
                    (a, normalize(ra))
                })
            }
            _ => {
                let (d, v, op) = match (
                    dim_of(left, nd),
                    int_literal(right),
                    dim_of(right, nd),
                    int_literal(left),
                ) {
                    (Some(d), Some(v), _, _) => (d, v, *op),
                    (_, _, Some(d), Some(v)) => (d, v, op.swap()?),
                    _ => return None,
                };
                let ext = shape[d];
                let r = match op {
                    Operator::Eq => clamp(v, v + 1, ext),
                    Operator::Lt => clamp(0, v, ext),
                    Operator::LtEq => clamp(0, v + 1, ext),
                    Operator::Gt => clamp(v + 1, ext as i128, ext),
                    Operator::GtEq => clamp(v, ext as i128, ext),
                    Operator::NotEq => {
                        normalize([clamp(0, v, ext), clamp(v + 1, ext as i128, ext)].concat())
                    }
                    _ => return None,
                };
                Some((d, r))
            }
        },
        Expr::Between(Between {
            expr,
            negated: false,
            low,
            high,
        }) => {
            let d = dim_of(expr, nd)?;
            let (lo, hi) = (int_literal(low)?, int_literal(high)?);
            Some((d, clamp(lo, hi + 1, shape[d])))
        }
        Expr::InList(il) if !il.negated => {
            let d = dim_of(&il.expr, nd)?;
            let mut v = Vec::new();
            for item in &il.list {
                let x = int_literal(item)?;
                v.extend(clamp(x, x + 1, shape[d]));
            }
            Some((d, normalize(v)))
        }
        _ => None,
    }
}

/// True when `filter` is a dimension constraint this module turns into a selection.
pub fn is_exact(filter: &Expr, shape: &[u64]) -> bool {
    split_and(filter)
        .iter()
        .all(|f| constraint(f, shape).is_some())
}

fn split_and(e: &Expr) -> Vec<&Expr> {
    match e {
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::And,
            right,
        }) => {
            let mut v = split_and(left);
            v.extend(split_and(right));
            v
        }
        e => vec![e],
    }
}

/// The selection of all conjuncts of `filters` that are dimension constraints.
pub fn selection(filters: &[Expr], shape: &[u64]) -> Selection {
    let mut sel = Selection::all(shape);
    for f in filters {
        for c in split_and(f) {
            if let Some((d, r)) = constraint(c, shape) {
                sel.dims[d] = intersect(&sel.dims[d], &r);
            }
        }
    }
    sel
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::logical_expr::{col, lit};

    #[test]
    fn ranges_from_expressions() {
        let shape = [100u64, 50];
        let f = col("dim_0")
            .gt_eq(lit(10i64))
            .and(col("dim_0").lt(lit(20i64)));
        assert_eq!(selection(&[f], &shape).dims[0], vec![10..20]);
        let f = col("dim_1")
            .eq(lit(3i64))
            .or(col("dim_1").between(lit(40i64), lit(60i64)));
        assert_eq!(selection(&[f], &shape).dims[1], vec![3..4, 40..50]);
        let f = col("dim_0").in_list(vec![lit(5i64), lit(7i64), lit(6i64), lit(500i64)], false);
        assert_eq!(selection(&[f], &shape).dims[0], vec![5..8]);
        assert!(!is_exact(
            &col("dim_0").eq(lit(1i64)).or(col("dim_1").eq(lit(2i64))),
            &shape
        ));
        assert!(!is_exact(&col("value").gt(lit(1i64)), &shape));
    }
}

/// What a filter requires of a column's values: to equal, start with or hold one of some
/// texts (a string column), or to equal one of some byte strings (a binary column, which
/// DataFusion compares with binary literals).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Needles {
    /// On a `Utf8` column: `name = 'x'` ([`Matching::Equal`]), the literal start of a
    /// `LIKE 'x%'` pattern ([`Matching::Prefix`]), or a text every match of a
    /// `LIKE '%x%'` pattern or `contains(name, 'x')` holds ([`Matching::Substring`]).
    Text {
        /// The texts; a value passes when it matches one of them.
        texts: Vec<String>,
        /// How a value is compared with them.
        how: Matching,
        /// `ILIKE`: the texts are ASCII, compared with a value's ASCII letters in either
        /// case, and a value that is not all ASCII passes (never with
        /// [`Matching::Equal`]).
        any_case: bool,
    },
    /// `name = 'x'` on a `Binary` column (the literal coerced to bytes).
    Bytes(Vec<Vec<u8>>),
}

impl Needles {
    /// Texts compared as `how`, in their case.
    pub(crate) fn text(texts: Vec<String>, how: Matching) -> Needles {
        Needles::Text {
            texts,
            how,
            any_case: false,
        }
    }

    /// The value a literal is, when it is a text or byte string (not NULL).
    pub(crate) fn of_literal(v: &ScalarValue) -> Option<Needles> {
        match v {
            ScalarValue::Utf8(Some(s))
            | ScalarValue::LargeUtf8(Some(s))
            | ScalarValue::Utf8View(Some(s)) => {
                Some(Needles::text(vec![s.clone()], Matching::Equal))
            }
            ScalarValue::Binary(Some(b))
            | ScalarValue::LargeBinary(Some(b))
            | ScalarValue::BinaryView(Some(b)) => Some(Needles::Bytes(vec![b.clone()])),
            // `name = 'x'` on a dictionary column, the literal coerced to its type.
            ScalarValue::Dictionary(_, v) => Needles::of_literal(v),
            _ => None,
        }
    }

    /// The one text a literal is ([`Needles::of_literal`]), if it is one.
    fn literal_text(self) -> Option<String> {
        match self {
            Needles::Text {
                mut texts,
                how: Matching::Equal,
                any_case: false,
            } if texts.len() == 1 => texts.pop(),
            _ => None,
        }
    }

    /// What every value a `LIKE` pattern matches holds, with `escape` as its escape
    /// character: the pattern's text when it has no wildcard; else its literal start when
    /// it has one (`'ab%'`, `'ab_d%'`: a prefix); else its longest literal piece
    /// (`'%ab%'`, `'%ab'`, `'%a%bcd%'`: a substring). `None` for a pattern holding the
    /// escape character or no literal piece (`'%'`, `'_%'`). Values that hold it need not
    /// match, so the pattern is still applied above the scan.
    ///
    /// For `ILIKE` (`no_case`) the same in either case, for an ASCII pattern only. Arrow's
    /// `ILIKE` folds case by Unicode's rules (`k` matches the Kelvin sign, U+212A), so the
    /// stored values tested in ASCII's cases are those that are all ASCII; the others
    /// are kept.
    pub(crate) fn of_like(pattern: Needles, escape: char, no_case: bool) -> Option<Needles> {
        let p = pattern.literal_text()?;
        if p.contains(escape) {
            return None;
        }
        let wild = |c: char| c == '%' || c == '_';
        let found = match p.find(wild) {
            None => Needles::text(vec![p], Matching::Equal),
            Some(0) => {
                let piece = p.split(wild).max_by_key(|piece| piece.len())?;
                if piece.is_empty() {
                    return None;
                }
                Needles::text(vec![piece.to_string()], Matching::Substring)
            }
            Some(end) => Needles::text(vec![p[..end].to_string()], Matching::Prefix),
        };
        if no_case {
            return found.any_case();
        }
        Some(found)
    }

    /// The same texts compared in either case (ASCII texts only): a text or prefix as a
    /// prefix, a substring as a substring.
    fn any_case(self) -> Option<Needles> {
        match self {
            Needles::Text { texts, how, .. } if texts.iter().all(|t| t.is_ascii()) => {
                Some(Needles::Text {
                    texts,
                    how: how.max(Matching::Prefix),
                    any_case: true,
                })
            }
            _ => None,
        }
    }

    /// What `contains(col, text)` requires: a value holding the text (not the empty
    /// one, which every value holds).
    pub(crate) fn held(self) -> Option<Needles> {
        let text = self.literal_text().filter(|t| !t.is_empty())?;
        Some(Needles::text(vec![text], Matching::Substring))
    }

    /// Values that satisfy one of `self` or `more` (for `OR`): both lists, compared as
    /// the looser of the two (a text is its own prefix, a prefix a substring), in either
    /// case when one of them is (ASCII texts only). Byte strings only join byte strings.
    pub(crate) fn extend(self, more: Needles) -> Option<Needles> {
        match (self, more) {
            (Needles::Bytes(mut a), Needles::Bytes(b)) => {
                a.extend(b);
                Some(Needles::Bytes(a))
            }
            (
                Needles::Text {
                    texts: mut a,
                    how: how_a,
                    any_case: case_a,
                },
                Needles::Text {
                    texts: b,
                    how: how_b,
                    any_case: case_b,
                },
            ) => {
                a.extend(b);
                let joined = Needles::text(a, how_a.max(how_b));
                if case_a || case_b {
                    return joined.any_case();
                }
                Some(joined)
            }
            _ => None,
        }
    }
}

/// The column a filter requires to equal one of some values, and the values: `col = 'x'`
/// (either way round), `col IN ('x', …)`, and `OR`s of those on one column, with string
/// or binary literals; or to start with or hold one of some texts: `col LIKE 'pattern'`
/// (its literal start, else its longest literal piece; `ILIKE` with an ASCII pattern in
/// either case), `contains(col, 'x')`, and `OR`s of those. The column may be
/// cast to text (`contains` casts a dictionary column): a text column's values are kept,
/// and the tests apply to text columns only. `None` for any other filter (a `NULL` among
/// the values included).
pub fn text_equality(e: &Expr) -> Option<(String, Needles)> {
    fn column(e: &Expr) -> Option<String> {
        match e {
            Expr::Column(c) => Some(c.name.clone()),
            Expr::Cast(c) if is_text(c.field.data_type()) => column(&c.expr),
            _ => None,
        }
    }
    fn value(e: &Expr) -> Option<Needles> {
        match e {
            Expr::Literal(v, _) => Needles::of_literal(v),
            _ => None,
        }
    }
    match e {
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Eq,
            right,
        }) => match (column(left), value(right)) {
            (Some(c), Some(v)) => Some((c, v)),
            _ => Some((column(right)?, value(left)?)),
        },
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Or,
            right,
        }) => {
            let (a, x) = text_equality(left)?;
            let (b, y) = text_equality(right)?;
            if a != b {
                return None;
            }
            Some((a, x.extend(y)?))
        }
        Expr::Like(Like {
            negated: false,
            expr,
            pattern,
            escape_char,
            case_insensitive,
        }) => {
            let escape = escape_char.unwrap_or('\\');
            let needles = Needles::of_like(value(pattern)?, escape, *case_insensitive)?;
            Some((column(expr)?, needles))
        }
        Expr::ScalarFunction(f) => match f.args.as_slice() {
            [c, v] if f.name() == "contains" => Some((column(c)?, value(v)?.held()?)),
            _ => None,
        },
        Expr::InList(InList {
            expr,
            list,
            negated: false,
        }) => {
            let c = column(expr)?;
            let mut values = list.iter().map(value);
            let first = values.next()??;
            Some((c, values.try_fold(first, |acc, v| acc.extend(v?))?))
        }
        _ => None,
    }
}

/// Whether values of `t` are text (a cast to it keeps a text column's values).
pub(crate) fn is_text(t: &arrow::datatypes::DataType) -> bool {
    use arrow::datatypes::DataType::{LargeUtf8, Utf8, Utf8View};
    matches!(t, Utf8 | LargeUtf8 | Utf8View)
}

#[cfg(test)]
mod text_tests {
    use super::*;
    use arrow::datatypes::DataType;
    use datafusion::prelude::{col, lit};

    #[test]
    fn text_equalities_are_recognised() {
        let t = |e: Expr| text_equality(&e);
        let one = |c: &str, v: &[&str]| {
            Some((
                c.to_string(),
                Needles::text(v.iter().map(|s| s.to_string()).collect(), Matching::Equal),
            ))
        };
        assert_eq!(t(col("name").eq(lit("x"))), one("name", &["x"]));
        assert_eq!(t(lit("x").eq(col("name"))), one("name", &["x"]));
        assert_eq!(
            t(col("name").in_list(vec![lit("a"), lit("b")], false)),
            one("name", &["a", "b"])
        );
        assert_eq!(
            t(col("name").eq(lit("a")).or(col("name").eq(lit("b")))),
            one("name", &["a", "b"])
        );
        assert_eq!(
            t(col("name").eq(lit("a")).or(col("other").eq(lit("b")))),
            None
        );
        assert_eq!(t(col("name").in_list(vec![lit("a")], true)), None);
        assert_eq!(
            t(col("name").in_list(vec![lit("a"), lit(ScalarValue::Utf8(None))], false)),
            None
        );
        assert_eq!(t(col("name").not_eq(lit("x"))), None);
        assert_eq!(t(col("id").eq(lit(3))), None);
        assert_eq!(t(col("name").eq(col("other"))), None);
        let bytes = |v: &[u8]| lit(ScalarValue::Binary(Some(v.to_vec())));
        assert_eq!(
            t(col("b").eq(bytes(b"x")).or(col("b").eq(bytes(b"y")))),
            Some((
                "b".into(),
                Needles::Bytes(vec![b"x".to_vec(), b"y".to_vec()])
            ))
        );
        assert_eq!(t(col("b").eq(bytes(b"x")).or(col("b").eq(lit("y")))), None);
        assert_eq!(t(col("b").in_list(vec![], false)), None);
        let prefix = |v: &[&str]| {
            Some((
                "name".into(),
                Needles::text(v.iter().map(|s| s.to_string()).collect(), Matching::Prefix),
            ))
        };
        assert_eq!(t(col("name").like(lit("ab%"))), prefix(&["ab"]));
        assert_eq!(
            t(col("name").like(lit("ab%")).or(col("name").like(lit("c%")))),
            prefix(&["ab", "c"])
        );
        // A pattern's literal start, with more wildcards after it.
        assert_eq!(t(col("name").like(lit("a_b%"))), prefix(&["a"]));
        assert_eq!(t(col("name").like(lit("ab%c_"))), prefix(&["ab"]));
        assert_eq!(t(col("name").like(lit("a\\%%"))), None);
        let escaped = |p: &str| {
            Expr::Like(Like::new(
                false,
                Box::new(col("name")),
                Box::new(lit(p)),
                Some('#'),
                false,
            ))
        };
        assert_eq!(t(escaped("a#%%")), None, "its escape character");
        assert_eq!(t(escaped("a\\%")), prefix(&["a\\"]), "another escape");
        assert_eq!(t(col("name").not_like(lit("ab%"))), None);
        // `ILIKE`: ASCII patterns only, in either case (a text as a prefix); `OR`s with
        // case-sensitive ones widen to either case.
        let any_case = |v: &[&str], how| {
            let texts = v.iter().map(|s| s.to_string()).collect();
            Some((
                "name".into(),
                Needles::Text {
                    texts,
                    how,
                    any_case: true,
                },
            ))
        };
        assert_eq!(
            t(col("name").ilike(lit("aB%"))),
            any_case(&["aB"], Matching::Prefix)
        );
        assert_eq!(
            t(col("name").ilike(lit("%Ab%c"))),
            any_case(&["Ab"], Matching::Substring)
        );
        assert_eq!(
            t(col("name").ilike(lit("abc"))),
            any_case(&["abc"], Matching::Prefix)
        );
        assert_eq!(t(col("name").ilike(lit("é%"))), None);
        assert_eq!(
            t(col("name")
                .ilike(lit("a%"))
                .or(col("name").like(lit("%b%")))),
            any_case(&["a", "b"], Matching::Substring)
        );
        assert_eq!(
            t(col("name").ilike(lit("a%")).or(col("name").eq(lit("c")))),
            any_case(&["a", "c"], Matching::Prefix)
        );
        assert_eq!(
            t(col("name").ilike(lit("a%")).or(col("name").eq(lit("é")))),
            None
        );
        // Its longest literal piece when it starts with a wildcard.
        let substring = |v: &[&str]| {
            Some((
                "name".into(),
                Needles::text(
                    v.iter().map(|s| s.to_string()).collect(),
                    Matching::Substring,
                ),
            ))
        };
        assert_eq!(t(col("name").like(lit("%ab%"))), substring(&["ab"]));
        assert_eq!(t(col("name").like(lit("%ab"))), substring(&["ab"]));
        assert_eq!(t(col("name").like(lit("_a%bcd_%e"))), substring(&["bcd"]));
        let contains = |args| {
            Expr::ScalarFunction(datafusion::logical_expr::expr::ScalarFunction::new_udf(
                datafusion::functions::string::contains(),
                args,
            ))
        };
        assert_eq!(
            t(contains(vec![col("name"), lit("ab")])),
            substring(&["ab"])
        );
        assert_eq!(t(contains(vec![col("name"), lit("")])), None);
        assert_eq!(t(contains(vec![lit("ab"), col("name")])), None);
        // Through a cast to text (as of a dictionary column), not to anything else.
        let cast = |t| {
            Expr::Cast(datafusion::logical_expr::Cast::new(
                Box::new(col("name")),
                t,
            ))
        };
        assert_eq!(
            t(contains(vec![cast(DataType::Utf8), lit("ab")])),
            substring(&["ab"])
        );
        assert_eq!(
            t(cast(DataType::Utf8View).eq(lit("ab"))),
            one("name", &["ab"])
        );
        assert_eq!(t(cast(DataType::Binary).eq(lit("ab"))), None);
        assert_eq!(t(col("name").like(lit("%"))), None);
        assert_eq!(t(col("name").like(lit("_%_"))), None);
        // No wildcard: the text itself.
        assert_eq!(t(col("name").like(lit("abc"))), one("name", &["abc"]));
        // `OR`s widen to the loosest kind.
        assert_eq!(
            t(col("name").like(lit("ab%")).or(col("name").eq(lit("c")))),
            prefix(&["ab", "c"])
        );
        assert_eq!(
            t(col("name")
                .eq(lit("c"))
                .or(col("name").like(lit("%x%")))
                .or(col("name").like(lit("ab%")))),
            substring(&["c", "x", "ab"])
        );
        assert_eq!(
            t(col("b").eq(bytes(b"x")).or(col("b").like(lit("%y%")))),
            None
        );
    }
}
