//! The computed-column functions python-blosc2 4.14.1 evaluates with NumPy rather than
//! numexpr (`clip`, `reciprocal`, `logaddexp`: numexpr does not know them), as NumPy
//! computes them, over arguments of one type; [`super::numpy_mode`] translates the
//! expressions calling them.

use super::numexpr_functions::null_where_any_is;
use crate::array::expression::Expression;
use arrow::array::{Array, ArrayRef, AsArray, PrimitiveArray};
use arrow::datatypes::{
    ArrowPrimitiveType, DataType, FieldRef, Float32Type, Float64Type, Int8Type, Int16Type,
    Int32Type, Int64Type, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use datafusion::common::{Result, ScalarValue, exec_err};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility, lit,
};
use std::sync::Arc;

/// Whether python-blosc2 evaluates a call of `name` with NumPy.
pub fn is_numpy_function(name: &str) -> bool {
    matches!(name, "clip" | "reciprocal" | "logaddexp")
}

/// The first function `e` calls that python-blosc2 evaluates with NumPy.
pub fn first_numpy_call(e: &Expression) -> Option<&str> {
    match e {
        Expression::Call(name, _) if is_numpy_function(name) => Some(name),
        Expression::Call(_, args) => args.iter().find_map(first_numpy_call),
        Expression::Unary(_, x) => first_numpy_call(x),
        Expression::Binary(_, a, b) => first_numpy_call(a).or_else(|| first_numpy_call(b)),
        _ => None,
    }
}

/// An integer bound of `clip` over integers of type `t`: NumPy clips a Python integer
/// beyond `t`'s range to it, which bounds nothing (a lower bound under the minimum, an
/// upper one over the maximum); one beyond the other side is refused.
pub(crate) fn int_bound(v: i64, t: &DataType, upper: bool) -> Result<Expr, String> {
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
pub(crate) enum NumpyFunction {
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
    /// The call of this function on `args` (of one type).
    pub(crate) fn call(self, args: Vec<Expr>) -> Expr {
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
        null_where_any_is(self, args)
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

/// NumPy's `logaddexp` (`npy_logaddexp`): ln(e^x + e^y) as `x + ln(1 + e^(y−x))` from
/// the larger side, `x + ln 2` when equal (so equal infinities stay infinite), NaN
/// otherwise.
macro_rules! logaddexp {
    ($name:ident, $t:ty, $ln2:expr) => {
        fn $name(x: $t, y: $t) -> $t {
            if x == y {
                return x + $ln2;
            }
            let d = x - y;
            if d > 0.0 {
                x + (-d).exp().ln_1p()
            } else if d <= 0.0 {
                y + d.exp().ln_1p()
            } else {
                d
            }
        }
    };
}

logaddexp!(logaddexp_f64, f64, std::f64::consts::LN_2);
logaddexp!(logaddexp_f32, f32, std::f32::consts::LN_2);

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
