//! CTable computed columns ([`crate::array::computed`]) in DataFusion. Each definition
//! becomes a logical expression over the stored columns, appended to the table's schema
//! and evaluated by a projection over the scan of the stored columns it needs.
//!
//! Operations run in numexpr's kinds, as python-blosc2 runs them, and the result is cast
//! to the dtype NumPy gives the expression ([`super::numpy_types`]).
//! NumPy's meaning is kept where SQL's differs: `/` divides integers as floats, `//`
//! rounds toward −∞, `%` takes the divisor's sign, `&` `|` `^` `~` are logical on
//! booleans and bitwise on integers, and the result is cast to the declared dtype as
//! NumPy's `astype` casts (integers wrap: `u + 300` over `uint8` is `uint8`). The
//! functions are numexpr's: those DataFusion has with their meaning (`sqrt`, `log`,
//! `arctan2`, `where`, `contains`, …) and the others in [`super::numexpr_functions`]
//! (`maximum`, `hypot`, `round`, …), each computed in the kind numexpr chooses. An
//! expression calling `clip`, `reciprocal` or `logaddexp`, which numexpr lacks, is
//! evaluated as NumPy evaluates it (`numpy_mode.rs`). A definition using another
//! function leaves its column out of the schema, and the schema metadata says why
//! ([`OMITTED_KEY`]).
//! Computed values of rows whose operands are null are null.

use super::numexpr_functions::{NumexprFunction, function_kind, ieee_comparison};
use super::numpy_types::{numexpr_int, numexpr_kind, numexpr_type, numpy_type};
use super::wrapping_cast::wrapping_cast;
use super::{numpy_functions, numpy_mode};
use crate::array::computed::{ComputedColumn, Definition};
use crate::array::expression::{BinaryOp, Expression, UnaryOp};
use crate::array::table::Table;
use crate::arrow_reader::schema::arrow_type;
use arrow::datatypes::{DataType, Field, FieldRef, Schema};
use datafusion::common::{Column, DFSchema, ScalarValue};
use datafusion::execution::session_state::{SessionState, SessionStateBuilder};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{
    Cast, Expr, ExprSchemable, Operator, ScalarUDF, TryCast, binary_expr, lit, when,
};
use datafusion::physical_expr::PhysicalExpr;
use std::sync::Arc;

/// Schema metadata key listing the computed columns left out of the schema, one
/// `name: reason` per line.
pub const OMITTED_KEY: &str = "blosc2.computed_columns_omitted";

/// The evaluable computed columns of a table and those left out.
#[derive(Debug, Clone, Default)]
pub struct ComputedColumns {
    /// Each column's field and its expression over the stored columns, in schema order.
    pub columns: Vec<(FieldRef, Expr)>,
    /// `(name, reason)` of each column left out.
    pub omitted: Vec<(String, String)>,
    /// Each column's expression planned over the stored columns, in `columns`' order
    /// (planned once, when the columns were translated).
    planned: Vec<Arc<dyn PhysicalExpr>>,
}

impl ComputedColumns {
    /// The computed columns of `t`, translated against its stored columns (`stored`).
    pub fn of_table(t: &Table, stored: &Schema) -> ComputedColumns {
        Self::new(&t.computed, stored)
    }

    /// `computed` translated against the stored columns `stored`.
    pub fn new(computed: &[ComputedColumn], stored: &Schema) -> ComputedColumns {
        let mut out = ComputedColumns::default();
        let Ok(df_schema) = DFSchema::try_from(stored.clone()) else {
            return out;
        };
        // Each expression is planned once here, so that one DataFusion cannot evaluate
        // (e.g. `-x` of an unsigned column) is left out rather than failing every query.
        let planner = std::cell::OnceCell::new();
        let plan = |e: &Expr| {
            let state: &SessionState = planner.get_or_init(|| SessionStateBuilder::new().build());
            state
                .create_physical_expr(e.clone(), &df_schema)
                .map_err(|err| err.strip_backtrace())
        };
        for c in computed {
            if stored.index_of(&c.name).is_ok() {
                continue; // A stored column of that name wins (as python-blosc2 refuses both).
            }
            match c.definition.as_ref().map_err(String::clone).and_then(|d| {
                let e = if numpy_functions::first_numpy_call(&d.tree).is_some() {
                    let column = |n: &str| operand(n, c).to_string();
                    numpy_mode::translate(&d.tree, &column, &df_schema)?
                } else {
                    translate(&d.tree, c, &df_schema)?
                };
                let nullable = e.nullable(&df_schema).map_err(|e| e.to_string())?;
                let own = numpy_type(&d.tree, &|n| {
                    let f = df_schema.field_with_unqualified_name(operand(n, c)).ok()?;
                    Some(f.data_type().clone())
                });
                let (field, e) = typed(&c.name, e, own, d, nullable, &df_schema)?;
                let planned = plan(&e)?;
                Ok((field, e, planned))
            }) {
                Ok((field, e, planned)) => {
                    out.columns.push((field, e));
                    out.planned.push(planned);
                }
                Err(why) => out.omitted.push((c.name.clone(), why)),
            }
        }
        out
    }

    /// Each column's expression planned over the stored columns it was translated
    /// against, in [`Self::columns`]' order.
    pub fn physical(&self) -> &[Arc<dyn PhysicalExpr>] {
        &self.planned
    }

    /// The `OMITTED_KEY` metadata value (`None` when nothing was left out).
    pub fn omitted_note(&self) -> Option<String> {
        (!self.omitted.is_empty()).then(|| {
            self.omitted
                .iter()
                .map(|(n, why)| format!("{n}: {why}"))
                .collect::<Vec<_>>()
                .join("\n")
        })
    }
}

/// The field of column `name` and its expression `e` cast to the declared type as
/// NumPy's `astype` casts, from the expression's own NumPy type `own` (when known and
/// other than the declared one: python-blosc2 casts numexpr's result to it, and a declared
/// dtype only relabels that): integers wrap modulo 2^bits; floats become integers
/// truncated toward zero, and null where NumPy's result is undefined (NaN, ±inf, out of
/// range), so such a column is nullable.
fn typed(
    name: &str,
    e: Expr,
    own: Option<DataType>,
    d: &Definition,
    nullable: bool,
    schema: &DFSchema,
) -> Result<(FieldRef, Expr), String> {
    let t = arrow_type(&d.dtype);
    let (e, nullable) = match own {
        Some(own) if own != t => astype(e, own, nullable, schema)?,
        _ => (e, nullable),
    };
    let (e, nullable) = astype(e, t.clone(), nullable, schema)?;
    Ok((Arc::new(Field::new(name, t, nullable)), e))
}

/// `e` cast to `t` as NumPy's `astype` casts, and whether the result is nullable.
fn astype(e: Expr, t: DataType, nullable: bool, schema: &DFSchema) -> Result<(Expr, bool), String> {
    let from = type_of(&e, schema)?;
    Ok(if from == t {
        (e, nullable)
    } else if from.is_integer() && t.is_integer() {
        (wrapping_cast(e, t), nullable)
    } else if from.is_floating() && t.is_integer() {
        (Expr::TryCast(TryCast::new(Box::new(e), t)), true)
    } else {
        (Expr::Cast(Cast::new(Box::new(e), t)), nullable)
    })
}

/// `stored` with the computed columns appended (and the note of those left out).
pub fn full_schema(stored: &Schema, computed: &ComputedColumns) -> Schema {
    let mut fields: Vec<FieldRef> = stored.fields().iter().cloned().collect();
    fields.extend(computed.columns.iter().map(|(f, _)| Arc::clone(f)));
    let mut meta = stored.metadata().clone();
    if let Some(note) = computed.omitted_note() {
        meta.insert(OMITTED_KEY.into(), note);
    }
    Schema::new_with_metadata(fields, meta)
}

type Translated = Result<Expr, String>;

/// `e` as a DataFusion expression over the stored columns, its operands in numexpr's
/// kinds ([`numexpr_type`], [`numexpr_int`]).
fn translate(e: &Expression, c: &ComputedColumn, schema: &DFSchema) -> Translated {
    let go = |x: &Expression| translate(x, c, schema);
    Ok(match e {
        Expression::Name(n) => {
            let column = operand(n, c);
            let Some(i) = schema.index_of_column_by_name(None, column) else {
                return Err(format!("no stored column {column:?}"));
            };
            let e = Expr::Column(Column::new_unqualified(column));
            let t = schema.field(i).data_type();
            match numexpr_type(t) {
                wide if wide != *t => wrapping_cast(e, wide),
                _ => e,
            }
        }
        Expression::Int(v) => lit(numexpr_int(*v)),
        Expression::Float(v) => lit(*v),
        Expression::Bool(v) => lit(*v),
        Expression::Str(s) => lit(s.as_str()),
        Expression::Unary(op, x) => unary(*op, go(x)?, schema)?,
        Expression::Binary(BinaryOp::Pow, a, b) if constant_power(b).is_some() => {
            let x = constant_power(b).expect("checked");
            power_by_products(go(a)?, x, schema)?
        }
        Expression::Binary(op, a, b) => binary(*op, go(a)?, go(b)?, schema)?,
        Expression::Call(name, args) => {
            let args = args.iter().map(go).collect::<Result<Vec<_>, _>>()?;
            call(name, args, schema)?
        }
    })
}

/// The stored column an operand names: `o<i>` is the column's `i`-th dependency, another
/// name a stored column.
fn operand<'a>(n: &'a str, c: &'a ComputedColumn) -> &'a str {
    n.strip_prefix('o')
        .and_then(|i| i.parse::<usize>().ok())
        .and_then(|i| c.deps.get(i))
        .map_or(n, String::as_str)
}

/// The exponent of `x ** k` that numexpr (python-blosc2's evaluator) turns into
/// products: a literal `k` with `2k` integral and `|k| <= 50`.
fn constant_power(k: &Expression) -> Option<f64> {
    let k = match k {
        Expression::Int(v) => *v as f64,
        Expression::Float(v) => *v,
        Expression::Unary(UnaryOp::Neg, v) => -constant_power(v)?,
        Expression::Unary(UnaryOp::Pos, v) => constant_power(v)?,
        _ => return None,
    };
    ((2.0 * k).fract() == 0.0 && k.abs() <= 50.0).then_some(k)
}

/// `a ** k` as numexpr computes it: `a` squared repeatedly and the squares of `k`'s bits
/// multiplied, lowest first; times `sqrt(a)` for a half power; `1 / r` for a negative
/// one; ones for 0. (`f ** 2` is `f * f`, which can differ from `pow(f, 2)` in the last
/// bit.)
fn power_by_products(a: Expr, k: f64, schema: &DFSchema) -> Translated {
    let n = k.abs() as u64;
    let half = (2.0 * k.abs()) as u64 % 2 == 1;
    let mul = |x: Expr, y: Expr| binary_expr(x, Operator::Multiply, y);
    let mut r: Option<Expr> = None;
    let mut p = a.clone();
    let mut mask = 1u64;
    loop {
        if n & mask != 0 {
            r = Some(match r {
                None => p.clone(),
                Some(r) => mul(r, p.clone()),
            });
        }
        mask <<= 1;
        if mask > n {
            break;
        }
        p = mul(p.clone(), p);
    }
    // Integers go to float64 where numexpr takes them to doubles; floats keep their width.
    let as_float = |e: Expr| -> Translated {
        Ok(if is_integer(&type_of(&e, schema)?) {
            float(e)
        } else {
            e
        })
    };
    if half {
        let root = sqrt(as_float(a.clone())?, schema)?;
        r = Some(match r {
            None => root,
            Some(r) => mul(r, root),
        });
    }
    let r = match r {
        Some(r) => r,
        None => Expr::Cast(Cast::new(Box::new(lit(1)), type_of(&a, schema)?)),
    };
    Ok(if k < 0.0 {
        binary_expr(lit(1.0), Operator::Divide, as_float(r)?)
    } else {
        r
    })
}

fn type_of(e: &Expr, schema: &DFSchema) -> Result<DataType, String> {
    e.get_type(schema).map_err(|err| err.to_string())
}

fn is_integer(t: &DataType) -> bool {
    t.is_integer() || *t == DataType::Boolean
}

fn unary(op: UnaryOp, x: Expr, schema: &DFSchema) -> Translated {
    Ok(match op {
        // Operands are signed here (numexpr's kinds): `-u` of a uint8 is negated in int32
        // and wraps when cast to uint8.
        UnaryOp::Neg => Expr::Negative(Box::new(x)),
        UnaryOp::Pos => x,
        UnaryOp::Invert => match type_of(&x, schema)? {
            DataType::Boolean => Expr::Not(Box::new(x)),
            t if t.is_integer() => {
                let ones = ScalarValue::Int64(Some(-1))
                    .cast_to(&t)
                    .map_err(|e| e.to_string())?;
                binary_expr(x, Operator::BitwiseXor, lit(ones))
            }
            t => return Err(format!("~ of {t}")),
        },
    })
}

pub(super) fn binary(op: BinaryOp, a: Expr, b: Expr, schema: &DFSchema) -> Translated {
    use BinaryOp as B;
    let (ta, tb) = (type_of(&a, schema)?, type_of(&b, schema)?);
    let both_bool = ta == DataType::Boolean && tb == DataType::Boolean;
    let arithmetic = matches!(
        op,
        B::Add | B::Sub | B::Mul | B::Div | B::FloorDiv | B::Mod | B::Pow
    );
    if arithmetic && both_bool {
        // NumPy adds booleans as `or` and multiplies them as `and`.
        return match op {
            B::Add => binary(B::Or, a, b, schema),
            B::Mul => binary(B::And, a, b, schema),
            _ => Err(format!("{op:?} of booleans")),
        };
    }
    if arithmetic && (ta == DataType::Boolean || tb == DataType::Boolean) {
        // numexpr computes a boolean with a number as an int32 (0 or 1).
        let int = |e: Expr, t: &DataType| match t {
            DataType::Boolean => Expr::Cast(Cast::new(Box::new(e), DataType::Int32)),
            _ => e,
        };
        return binary(op, int(a, &ta), int(b, &tb), schema);
    }
    let both_int = is_integer(&ta) && is_integer(&tb);
    if op.is_comparison() && (ta.is_floating() || tb.is_floating()) {
        // numexpr compares in the operands' kind, as IEEE 754 does (NaN is unordered).
        let Some(kind) = numexpr_kind(&ta, &tb) else {
            return Err(format!("{op:?} of {ta} and {tb}"));
        };
        let (a, b) = (cast_from(a, &ta, &kind), cast_from(b, &tb, &kind));
        return ieee_comparison(op, a, b).ok_or_else(|| format!("{op:?}"));
    }
    let simple = |o: Operator| Ok(binary_expr(a.clone(), o, b.clone()));
    match op {
        B::Lt => simple(Operator::Lt),
        B::Le => simple(Operator::LtEq),
        B::Gt => simple(Operator::Gt),
        B::Ge => simple(Operator::GtEq),
        B::Eq => simple(Operator::Eq),
        B::Ne => simple(Operator::NotEq),
        B::Add => simple(Operator::Plus),
        B::Sub => simple(Operator::Minus),
        B::Mul => simple(Operator::Multiply),
        B::Or if both_bool => simple(Operator::Or),
        B::And if both_bool => simple(Operator::And),
        B::Xor if both_bool => simple(Operator::NotEq),
        B::Or | B::And | B::Xor | B::Shl | B::Shr if !both_int => {
            Err(format!("{op:?} of {ta} and {tb}"))
        }
        B::Or => simple(Operator::BitwiseOr),
        B::And => simple(Operator::BitwiseAnd),
        B::Xor => simple(Operator::BitwiseXor),
        B::Shl => simple(Operator::BitwiseShiftLeft),
        B::Shr => simple(Operator::BitwiseShiftRight),
        B::Div if both_int => Ok(binary_expr(float(a), Operator::Divide, float(b))),
        B::Div => simple(Operator::Divide),
        B::FloorDiv if both_int => {
            // Truncated quotient, one less when there is a remainder and the signs differ.
            let q = binary_expr(a.clone(), Operator::Divide, b.clone());
            let inexact = binary_expr(
                binary_expr(
                    binary_expr(a.clone(), Operator::Modulo, b.clone()),
                    Operator::NotEq,
                    lit(0),
                ),
                Operator::And,
                binary_expr(negative(a), Operator::NotEq, negative(b.clone())),
            );
            let floor = when(inexact, binary_expr(q.clone(), Operator::Minus, lit(1)))
                .otherwise(q)
                .map_err(|e| e.to_string())?;
            zero_when_divisor_zero(floor, b, schema)
        }
        B::FloorDiv => Ok(math("floor", vec![binary_expr(a, Operator::Divide, b)])),
        B::Mod => {
            // SQL's remainder takes the dividend's sign; NumPy's the divisor's.
            let r = binary_expr(a, Operator::Modulo, b.clone());
            let adjust = binary_expr(
                binary_expr(r.clone(), Operator::NotEq, lit(0)),
                Operator::And,
                binary_expr(negative(r.clone()), Operator::NotEq, negative(b.clone())),
            );
            let rem = when(adjust, binary_expr(r.clone(), Operator::Plus, b.clone()))
                .otherwise(r)
                .map_err(|e| e.to_string())?;
            if both_int {
                zero_when_divisor_zero(rem, b, schema)
            } else {
                Ok(rem)
            }
        }
        // DataFusion's `power` computes in float64 or int64; numexpr in the operands' kind.
        B::Pow => {
            let p = math("power", vec![a, b]);
            match numexpr_kind(&ta, &tb) {
                Some(k) if k != type_of(&p, schema)? => astype(p, k, false, schema).map(|(e, _)| e),
                _ => Ok(p),
            }
        }
    }
}

/// `e` (an integer `//` or `%` by `divisor`), but 0 where the divisor is 0, as NumPy gives
/// (DataFusion fails the whole query on an integer division by zero). `CASE` evaluates
/// `e` only on the other rows; a null divisor still gives NULL.
fn zero_when_divisor_zero(e: Expr, divisor: Expr, schema: &DFSchema) -> Translated {
    let zero = Expr::Cast(Cast::new(Box::new(lit(0)), type_of(&e, schema)?));
    when(binary_expr(divisor, Operator::Eq, lit(0)), zero)
        .otherwise(e)
        .map_err(|e| e.to_string())
}

/// `e`, of type `from`, cast to `to` (unchanged when it already is).
fn cast_from(e: Expr, from: &DataType, to: &DataType) -> Expr {
    match from == to {
        true => e,
        false => Expr::Cast(Cast::new(Box::new(e), to.clone())),
    }
}

fn float(e: Expr) -> Expr {
    Expr::Cast(Cast::new(Box::new(e), DataType::Float64))
}

fn negative(e: Expr) -> Expr {
    binary_expr(e, Operator::Lt, lit(0))
}

/// A DataFusion function by name (those [`udf`] knows).
fn math(name: &str, args: Vec<Expr>) -> Expr {
    let f = udf(name).expect("a function udf() knows");
    Expr::ScalarFunction(ScalarFunction::new_udf(f, args))
}

/// The DataFusion functions computed columns may call, by DataFusion name.
fn udf(name: &str) -> Option<Arc<ScalarUDF>> {
    use datafusion::functions::{math as m, string as s};
    Some(match name {
        "abs" => m::abs(),
        "sqrt" => m::sqrt(),
        "exp" => m::exp(),
        "ln" => m::ln(),
        "log2" => m::log2(),
        "log10" => m::log10(),
        "sin" => m::sin(),
        "cos" => m::cos(),
        "tan" => m::tan(),
        "asin" => m::asin(),
        "acos" => m::acos(),
        "atan" => m::atan(),
        "atan2" => m::atan2(),
        "sinh" => m::sinh(),
        "cosh" => m::cosh(),
        "tanh" => m::tanh(),
        "asinh" => m::asinh(),
        "acosh" => m::acosh(),
        "atanh" => m::atanh(),
        "floor" => m::floor(),
        "ceil" => m::ceil(),
        "trunc" => m::trunc(),
        "power" => m::power(),
        "isnan" => m::isnan(),
        "lower" => s::lower(),
        "upper" => s::upper(),
        "contains" => s::contains(),
        "starts_with" => s::starts_with(),
        "ends_with" => s::ends_with(),
        _ => return None,
    })
}

/// The operator a NumPy function form names (`add`, `less_equal`, …).
pub(crate) fn operator_call(name: &str) -> Option<BinaryOp> {
    use BinaryOp as B;
    match name {
        "add" => Some(B::Add),
        "subtract" => Some(B::Sub),
        "multiply" => Some(B::Mul),
        "divide" => Some(B::Div),
        "floor_divide" => Some(B::FloorDiv),
        "remainder" => Some(B::Mod),
        "pow" | "power" => Some(B::Pow),
        "equal" => Some(B::Eq),
        "not_equal" => Some(B::Ne),
        "less" => Some(B::Lt),
        "less_equal" => Some(B::Le),
        "greater" => Some(B::Gt),
        "greater_equal" => Some(B::Ge),
        "logical_and" | "bitwise_and" => Some(B::And),
        "logical_or" | "bitwise_or" => Some(B::Or),
        "logical_xor" | "bitwise_xor" => Some(B::Xor),
        "bitwise_left_shift" => Some(B::Shl),
        "bitwise_right_shift" => Some(B::Shr),
        _ => None,
    }
}

/// The unary operator a NumPy function form names (`negative`, `invert`, …).
pub(crate) fn unary_call(name: &str) -> Option<UnaryOp> {
    match name {
        "negative" => Some(UnaryOp::Neg),
        "positive" => Some(UnaryOp::Pos),
        "logical_not" | "bitwise_invert" | "invert" => Some(UnaryOp::Invert),
        _ => None,
    }
}

/// A NumPy / python-blosc2 function call.
fn call(name: &str, mut args: Vec<Expr>, schema: &DFSchema) -> Translated {
    let arity = |n: usize| {
        if args.len() == n {
            Ok(())
        } else {
            Err(format!("{name}() takes {n} arguments, not {}", args.len()))
        }
    };
    // Function forms of the operators.
    if let Some(op) = operator_call(name) {
        arity(2)?;
        let b = args.pop().expect("two");
        let a = args.pop().expect("two");
        return binary(op, a, b, schema);
    }
    if let Some(op) = unary_call(name) {
        arity(1)?;
        return unary(op, args.pop().expect("one"), schema);
    }
    match name {
        "where" => {
            arity(3)?;
            let (b, a, c) = (args.pop(), args.pop(), args.pop());
            let (c, a, b) = (c.expect("3"), a.expect("3"), b.expect("3"));
            return when(c, a).otherwise(b).map_err(|e| e.to_string());
        }
        "square" => {
            arity(1)?;
            let x = args.pop().expect("one");
            return Ok(binary_expr(x.clone(), Operator::Multiply, x));
        }
        _ => {}
    }
    if let Some(f) = NumexprFunction::named(name) {
        arity(f.arity())?;
        let types = args
            .iter()
            .map(|a| type_of(a, schema))
            .collect::<Result<Vec<_>, _>>()?;
        let Some(kind) = function_kind(f, &types) else {
            return Err(format!("{name}() of {types:?}"));
        };
        let args = args
            .into_iter()
            .zip(&types)
            .map(|(a, t)| cast_from(a, t, &kind))
            .collect();
        return Ok(f.call(args));
    }
    let (df_name, n) = match name {
        "log" => ("ln", 1),
        "arcsin" => ("asin", 1),
        "arccos" => ("acos", 1),
        "arctan" => ("atan", 1),
        "arcsinh" => ("asinh", 1),
        "arccosh" => ("acosh", 1),
        "arctanh" => ("atanh", 1),
        "arctan2" => ("atan2", 2),
        "startswith" => ("starts_with", 2),
        "endswith" => ("ends_with", 2),
        "atan2" | "contains" => (name, 2),
        "abs" | "sqrt" | "exp" | "log2" | "log10" | "sin" | "cos" | "tan" | "asin" | "acos"
        | "atan" | "sinh" | "cosh" | "tanh" | "asinh" | "acosh" | "atanh" | "floor" | "ceil"
        | "trunc" | "isnan" | "lower" | "upper" => (name, 1),
        _ => return Err(format!("the function {name}() is not supported")),
    };
    arity(n)?;
    if df_name == "sqrt" {
        return sqrt(args.pop().expect("one"), schema);
    }
    Ok(math(df_name, args))
}

/// `sqrt(x)` as NumPy computes it: NaN below 0, where DataFusion's `sqrt` fails the whole
/// query. `CASE` evaluates the root only on the other rows.
fn sqrt(x: Expr, schema: &DFSchema) -> Translated {
    let root = math("sqrt", vec![x.clone()]);
    let nan = ScalarValue::Float64(Some(f64::NAN))
        .cast_to(&type_of(&root, schema)?)
        .map_err(|e| e.to_string())?;
    when(binary_expr(x, Operator::Lt, lit(0)), lit(nan))
        .otherwise(root)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::expression::parse;

    fn column(deps: &[&str], expr: &str) -> ComputedColumn {
        ComputedColumn {
            name: "c".into(),
            deps: deps.iter().map(|d| d.to_string()).collect(),
            definition: Err(String::new()),
        }
        .with_tree(expr)
    }

    impl ComputedColumn {
        fn with_tree(mut self, expr: &str) -> Self {
            self.definition = Ok(Definition {
                text: expr.into(),
                tree: parse(expr).unwrap(),
                dtype: crate::array::dtype::DType::parse("<f8").unwrap(),
            });
            self
        }
    }

    fn schema() -> DFSchema {
        DFSchema::try_from(Schema::new(vec![
            Field::new("i", DataType::Int32, false),
            Field::new("f", DataType::Float64, false),
            Field::new("b", DataType::Boolean, false),
            Field::new("s", DataType::Utf8, false),
        ]))
        .unwrap()
    }

    fn translated(deps: &[&str], expr: &str) -> Translated {
        let c = column(deps, expr);
        let tree = &c.definition.as_ref().unwrap().tree;
        translate(tree, &c, &schema())
    }

    /// Columns DataFusion cannot plan are left out with its reason; the others kept,
    /// typed as declared.
    #[test]
    fn unplannable_columns_are_left_out() {
        let stored = Schema::new(vec![
            Field::new("s", DataType::Utf8, false),
            Field::new("f", DataType::Float64, true),
        ]);
        // DataFusion does not negate text.
        let mut neg = column(&["s"], "-o0");
        neg.name = "neg".into();
        let mut half = column(&["f"], "o0 / 2");
        half.name = "half".into();
        let c = ComputedColumns::new(&[neg, half], &stored);
        assert_eq!(c.columns.len(), 1);
        assert_eq!(c.columns[0].0.name(), "half");
        assert!(c.columns[0].0.is_nullable());
        assert_eq!(c.omitted.len(), 1);
        assert_eq!(c.omitted[0].0, "neg");
        assert!(
            c.omitted_note().unwrap().starts_with("neg: "),
            "{:?}",
            c.omitted
        );
    }

    #[test]
    fn operands_bind_to_dependencies_or_names() {
        let e = translated(&["f", "i"], "o0 * o1 + i").unwrap();
        assert_eq!(e.to_string(), "f * i + i");
        assert_eq!(
            translated(&["f"], "o1").unwrap_err(),
            "no stored column \"o1\""
        );
        assert_eq!(
            translated(&[], "zz").unwrap_err(),
            "no stored column \"zz\""
        );
    }

    #[test]
    fn numpy_meanings() {
        assert_eq!(
            translated(&["i"], "o0 / 2").unwrap().to_string(),
            "CAST(i AS Float64) / CAST(Int32(2) AS Float64)"
        );
        assert_eq!(
            translated(&["f"], "o0 / 2").unwrap().to_string(),
            "f / Int32(2)"
        );
        assert_eq!(translated(&["b"], "~o0").unwrap().to_string(), "NOT b");
        assert_eq!(
            translated(&["i"], "~o0").unwrap().to_string(),
            "i BIT_XOR Int32(-1)"
        );
        assert_eq!(
            translated(&["b", "i"], "o0 & (o1 > 2)")
                .unwrap()
                .to_string(),
            "b AND i > Int32(2)"
        );
        for (expr, why) in [
            ("o0 & 1", "And of Float64"),
            ("cbrt(o0)", "cbrt() is not supported"),
            ("maximum(o0)", "takes 2 arguments"),
            ("sqrt(o0, 2)", "takes 1 arguments"),
        ] {
            let e = translated(&["f"], expr).unwrap_err();
            assert!(e.contains(why), "{expr}: {e}");
        }
        assert_eq!(
            translated(&["f"], "where(o0 > 0, log(o0), arctan2(o0, 1))")
                .unwrap()
                .to_string(),
            "CASE WHEN ieee_gt(f, CAST(Int32(0) AS Float64)) THEN ln(f) ELSE atan2(f, Int32(1)) END"
        );
    }
}
