//! The computed-column functions python-blosc2 4.14.1 evaluates with NumPy rather than
//! numexpr (`clip`, `reciprocal`, `logaddexp`): numexpr does not know them, so the whole
//! expression is then run by NumPy, in NumPy's types (no numexpr kinds: an `int8`
//! operand stays `int8`, a Python number takes the array's type).
//!
//! Such a definition is translated when the function is the whole expression and its
//! arguments are columns or numbers (`clip(x, 0, 1)`, `reciprocal(o0)`); inside a larger
//! expression the rest would have to follow NumPy's arithmetic instead of numexpr's, which
//! this does not do, so the column is left out with that reason.

use super::numpy_types::{numpy_type, promoted_type};
use crate::array::expression::{Expression, UnaryOp};
use arrow::array::{Array, ArrayRef, AsArray, PrimitiveArray};
use arrow::datatypes::{
    ArrowPrimitiveType, DataType, Field, FieldRef, Float32Type, Float64Type, Int8Type, Int16Type,
    Int32Type, Int64Type, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use datafusion::common::{Column, DFSchema, Result, ScalarValue, exec_err};
use datafusion::logical_expr::{
    Cast, ColumnarValue, Expr, Operator, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, Volatility, binary_expr, lit,
};
use std::sync::Arc;

/// Whether python-blosc2 evaluates a call of `name` with NumPy.
pub fn is_numpy_function(name: &str) -> bool {
    matches!(name, "clip" | "reciprocal" | "logaddexp")
}

/// Whether `e` calls one of the [`is_numpy_function`] functions anywhere.
pub fn calls_numpy_function(e: &Expression) -> bool {
    match e {
        Expression::Call(name, args) => {
            is_numpy_function(name) || args.iter().any(calls_numpy_function)
        }
        Expression::Unary(_, x) => calls_numpy_function(x),
        Expression::Binary(_, a, b) => calls_numpy_function(a) || calls_numpy_function(b),
        _ => false,
    }
}

/// An argument: a stored column (by its name in `schema`) or a number.
enum Arg {
    Column(String, DataType),
    Int(i64),
    Float(f64),
}

/// `tree` (which calls a NumPy-evaluated function) as a DataFusion expression, its type
/// NumPy's; `column` maps an operand name to its stored column.
pub fn translate(
    tree: &Expression,
    column: &dyn Fn(&str) -> String,
    schema: &DFSchema,
) -> Result<Expr, String> {
    let why = "is evaluated by NumPy in python-blosc2; only a call of it on columns and \
               numbers is supported, not inside a larger expression";
    let Expression::Call(name, tree_args) = tree else {
        let name = first_numpy_call(tree).unwrap_or("clip");
        return Err(format!("{name}() {why}"));
    };
    if !is_numpy_function(name) {
        let name = first_numpy_call(tree).unwrap_or(name);
        return Err(format!("{name}() {why}"));
    }
    let args = tree_args
        .iter()
        .map(|a| argument(a, column, schema).ok_or_else(|| format!("{name}() {why}")))
        .collect::<Result<Vec<_>, _>>()?;
    let arity = match name.as_str() {
        "clip" => 3,
        "reciprocal" => 1,
        _ => 2,
    };
    if args.len() != arity {
        return Err(format!(
            "{name}() takes {arity} arguments, not {}",
            args.len()
        ));
    }
    if !matches!(args.first(), Some(Arg::Column(..))) {
        return Err(format!("{name}() of a number"));
    }
    let name_type = |n: &str| {
        let f = schema.field_with_unqualified_name(&column(n)).ok()?;
        Some(f.data_type().clone())
    };
    // NumPy computes in the arguments' promoted type (`clip(s, -5.5, 5)` over `int8` in
    // float64); the caller casts that to the type python-blosc2 gives the column.
    let operands: Vec<&Expression> = tree_args.iter().collect();
    let promoted = match name.as_str() {
        "reciprocal" => numpy_type(tree, &name_type),
        _ => promoted_type(&operands, &name_type),
    };
    let Some(t) = promoted else {
        return Err(format!("{name}(): NumPy's type of it is not known here"));
    };
    let cast = |a: &Arg| -> Result<Expr, String> { as_type(a, &t) };
    match name.as_str() {
        "reciprocal" => {
            let one = ScalarValue::Float64(Some(1.0))
                .cast_to(&t)
                .map_err(|e| e.to_string())?;
            Ok(binary_expr(lit(one), Operator::Divide, cast(&args[0])?))
        }
        "logaddexp" if t.is_floating() => {
            Ok(NumpyFunction::Logaddexp.call(vec![cast(&args[0])?, cast(&args[1])?]))
        }
        "clip" if t.is_integer() || t.is_floating() => {
            let constant = |a: &Arg| !matches!(a, Arg::Column(..));
            let f = if constant(&args[1]) && constant(&args[2]) {
                NumpyFunction::ClipByConstants
            } else {
                NumpyFunction::Clip
            };
            let bound = |a: &Arg, upper: bool| -> Result<Expr, String> {
                match (a, t.is_integer()) {
                    (Arg::Int(v), true) => int_bound(*v, &t, upper),
                    _ => cast(a),
                }
            };
            Ok(f.call(vec![
                cast(&args[0])?,
                bound(&args[1], false)?,
                bound(&args[2], true)?,
            ]))
        }
        _ => Err(format!("{name}() of {t}")),
    }
}

/// The first NumPy-evaluated function `e` calls.
fn first_numpy_call(e: &Expression) -> Option<&str> {
    match e {
        Expression::Call(name, _) if is_numpy_function(name) => Some(name),
        Expression::Call(_, args) => args.iter().find_map(first_numpy_call),
        Expression::Unary(_, x) => first_numpy_call(x),
        Expression::Binary(_, a, b) => first_numpy_call(a).or_else(|| first_numpy_call(b)),
        _ => None,
    }
}

fn argument(e: &Expression, column: &dyn Fn(&str) -> String, schema: &DFSchema) -> Option<Arg> {
    Some(match e {
        Expression::Name(n) => {
            let c = column(n);
            let f = schema.field_with_unqualified_name(&c).ok()?;
            Arg::Column(c, f.data_type().clone())
        }
        Expression::Int(v) => Arg::Int(*v),
        Expression::Float(v) => Arg::Float(*v),
        Expression::Unary(UnaryOp::Neg, x) => match argument(x, column, schema)? {
            Arg::Int(v) => Arg::Int(v.checked_neg()?),
            Arg::Float(v) => Arg::Float(-v),
            Arg::Column(..) => return None,
        },
        _ => return None,
    })
}

/// `a` as a value of type `t` (a number as NumPy's weak scalar takes the array's type).
fn as_type(a: &Arg, t: &DataType) -> Result<Expr, String> {
    Ok(match a {
        Arg::Column(c, ct) => {
            let e = Expr::Column(Column::new_unqualified(c));
            if ct == t {
                e
            } else {
                Expr::Cast(Cast::new(Box::new(e), t.clone()))
            }
        }
        Arg::Int(v) => lit(ScalarValue::Int64(Some(*v))
            .cast_to(t)
            .map_err(|_| format!("{v} does not fit {t}"))?),
        Arg::Float(v) => lit(ScalarValue::Float64(Some(*v))
            .cast_to(t)
            .map_err(|e| e.to_string())?),
    })
}

/// An integer bound of `clip` over integers of type `t`: NumPy clips a Python integer
/// beyond `t`'s range to it, which bounds nothing (a lower bound under the minimum, an
/// upper one over the maximum); one beyond the other side is refused.
fn int_bound(v: i64, t: &DataType, upper: bool) -> Result<Expr, String> {
    if let Ok(x) = ScalarValue::Int64(Some(v)).cast_to(t) {
        return Ok(lit(x));
    }
    let (min, max) = range(t).ok_or_else(|| format!("clip() of {t}"))?;
    let edge = match (upper, (v as i128) < min) {
        (false, true) => min,
        (true, false) if (v as i128) > max => max,
        _ => {
            return Err(format!(
                "clip() bound {v} is beyond {t} on the clipping side"
            ));
        }
    };
    ScalarValue::Utf8(Some(edge.to_string()))
        .cast_to(t)
        .map(lit)
        .map_err(|e| e.to_string())
}

fn range(t: &DataType) -> Option<(i128, i128)> {
    Some(match t {
        DataType::Int8 => (i8::MIN.into(), i8::MAX.into()),
        DataType::Int16 => (i16::MIN.into(), i16::MAX.into()),
        DataType::Int32 => (i32::MIN.into(), i32::MAX.into()),
        DataType::Int64 => (i64::MIN.into(), i64::MAX.into()),
        DataType::UInt8 => (0, u8::MAX.into()),
        DataType::UInt16 => (0, u16::MAX.into()),
        DataType::UInt32 => (0, u32::MAX.into()),
        DataType::UInt64 => (0, u64::MAX.into()),
        _ => return None,
    })
}

/// A function NumPy computes, over arguments of one type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum NumpyFunction {
    /// `clip(x, lo, hi)` with a column among the bounds: NaN if any is; a bound on ties
    /// (NumPy's general loop: `clip(-0.0, 0.0, 1)` is 0.0).
    Clip,
    /// `clip(x, lo, hi)` with both bounds numbers: `x` kept on ties (NumPy's loop for
    /// constant bounds: `clip(-0.0, 0, 1)` is −0.0).
    ClipByConstants,
    /// `logaddexp(x, y)`: ln(e^x + e^y) without overflow, as NumPy computes it.
    Logaddexp,
}

impl NumpyFunction {
    fn call(self, args: Vec<Expr>) -> Expr {
        let n = if self == Self::Logaddexp { 2 } else { 3 };
        ScalarUDF::new_from_impl(NumpyUdf {
            function: self,
            signature: Signature::any(n, Volatility::Immutable),
        })
        .call(args)
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct NumpyUdf {
    function: NumpyFunction,
    signature: Signature,
}

impl ScalarUDFImpl for NumpyUdf {
    fn name(&self) -> &str {
        match self.function {
            NumpyFunction::Clip | NumpyFunction::ClipByConstants => "clip",
            NumpyFunction::Logaddexp => "logaddexp",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        match args.first() {
            Some(t) if args.iter().all(|a| a == t) => Ok(t.clone()),
            _ => exec_err!("{} of {args:?}", self.name()),
        }
    }

    /// Null where any argument is.
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let types: Vec<DataType> = args
            .arg_fields
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        let nullable = args.arg_fields.iter().any(|f| f.is_nullable());
        Ok(Arc::new(Field::new(
            self.name(),
            self.return_type(&types)?,
            nullable,
        )))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let a = ColumnarValue::values_to_arrays(&args.args)?;
        let f = self.function;
        let out: ArrayRef = match (f, a[0].data_type()) {
            (NumpyFunction::Logaddexp, DataType::Float64) => {
                Arc::new(arrow::compute::binary::<_, _, _, Float64Type>(
                    a[0].as_primitive::<Float64Type>(),
                    a[1].as_primitive::<Float64Type>(),
                    logaddexp_f64,
                )?)
            }
            (NumpyFunction::Logaddexp, DataType::Float32) => {
                Arc::new(arrow::compute::binary::<_, _, _, Float32Type>(
                    a[0].as_primitive::<Float32Type>(),
                    a[1].as_primitive::<Float32Type>(),
                    logaddexp_f32,
                )?)
            }
            (NumpyFunction::Logaddexp, t) => return exec_err!("logaddexp of {t}"),
            (_, DataType::Int8) => clip::<Int8Type>(f, &a),
            (_, DataType::Int16) => clip::<Int16Type>(f, &a),
            (_, DataType::Int32) => clip::<Int32Type>(f, &a),
            (_, DataType::Int64) => clip::<Int64Type>(f, &a),
            (_, DataType::UInt8) => clip::<UInt8Type>(f, &a),
            (_, DataType::UInt16) => clip::<UInt16Type>(f, &a),
            (_, DataType::UInt32) => clip::<UInt32Type>(f, &a),
            (_, DataType::UInt64) => clip::<UInt64Type>(f, &a),
            (_, DataType::Float32) => clip::<Float32Type>(f, &a),
            (_, DataType::Float64) => clip::<Float64Type>(f, &a),
            (_, t) => return exec_err!("clip of {t}"),
        };
        Ok(ColumnarValue::Array(out))
    }
}

/// `clip` over three arrays of type `T`.
fn clip<T: ArrowPrimitiveType>(f: NumpyFunction, a: &[ArrayRef]) -> ArrayRef
where
    T::Native: PartialOrd,
{
    let (x, lo, hi) = (
        a[0].as_primitive::<T>(),
        a[1].as_primitive::<T>(),
        a[2].as_primitive::<T>(),
    );
    // `v != v` is NaN's test for floats and never true for integers.
    #[allow(clippy::eq_op)]
    let nan = |v: T::Native| v != v;
    let out: PrimitiveArray<T> = (0..x.len())
        .map(|i| {
            if x.is_null(i) || lo.is_null(i) || hi.is_null(i) {
                return None;
            }
            let (v, l, h) = (x.value(i), lo.value(i), hi.value(i));
            Some(if f == NumpyFunction::ClipByConstants {
                let m = if v < l { l } else { v };
                if m > h { h } else { m }
            } else {
                let m = if nan(v) || v > l { v } else { l };
                if nan(m) || m < h { m } else { h }
            })
        })
        .collect();
    Arc::new(out.with_data_type(a[0].data_type().clone()))
}

/// NumPy's `logaddexp` in float64.
fn logaddexp_f64(x: f64, y: f64) -> f64 {
    if x == y {
        x + std::f64::consts::LN_2
    } else {
        let d = x - y;
        if d > 0.0 {
            x + (-d).exp().ln_1p()
        } else if d <= 0.0 {
            y + d.exp().ln_1p()
        } else {
            d
        }
    }
}

/// NumPy's `logaddexp` in float32.
fn logaddexp_f32(x: f32, y: f32) -> f32 {
    if x == y {
        x + std::f32::consts::LN_2
    } else {
        let d = x - y;
        if d > 0.0 {
            x + (-d).exp().ln_1p()
        } else if d <= 0.0 {
            y + d.exp().ln_1p()
        } else {
            d
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logaddexp_at_its_edges() {
        let inf = f64::INFINITY;
        assert_eq!(logaddexp_f64(inf, inf), inf);
        assert_eq!(logaddexp_f64(-inf, -inf), -inf);
        assert_eq!(logaddexp_f64(1000.0, 0.0), 1000.0);
        assert!(logaddexp_f64(f64::NAN, 1.0).is_nan());
        assert_eq!(logaddexp_f64(0.0, 0.0), std::f64::consts::LN_2);
    }
}
