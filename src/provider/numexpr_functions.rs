//! The numexpr functions of computed columns that DataFusion has no exact equivalent for
//! (`maximum`, `hypot`, `expm1`, `round`, `sign`, …), as scalar functions, and the kind
//! numexpr computes each in ([`function_kind`]), as python-blosc2 4.14.1 evaluates them
//! (numexpr 2.14).
//!
//! The translator casts the arguments to that kind before the call, so each function
//! here sees one type: `Float64`, `Float32` (`expm1`, `log1p`), or an integer type
//! (`round`, `sign`).

use crate::array::expression::BinaryOp;
use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, PrimitiveArray};
use arrow::compute::kernels::arity::binary;
use arrow::datatypes::{
    ArrowPrimitiveType, DataType, Field, FieldRef, Float32Type, Float64Type, Int32Type, Int64Type,
};
use datafusion::common::{DataFusionError, Result, exec_err};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use std::sync::Arc;

/// A numexpr function this module computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NumexprFunction {
    /// `expm1(x)`: e^x − 1.
    Expm1,
    /// `log1p(x)`: ln(1 + x).
    Log1p,
    /// `hypot(x, y)`.
    Hypot,
    /// `copysign(x, y)`: |x| with y's sign bit.
    Copysign,
    /// `nextafter(x, y)`: the next float after x toward y.
    Nextafter,
    /// `maximum(x, y)`: NaN if either is; `y` on ties (`maximum(0.0, -0.0)` is −0.0).
    Maximum,
    /// `minimum(x, y)`: NaN if either is; `y` on ties.
    Minimum,
    /// `real(x)`, `conj(x)` of a real number: x.
    Real,
    /// `imag(x)` of a real number: 0.
    Imag,
    /// `isinf(x)`.
    Isinf,
    /// `isfinite(x)`.
    Isfinite,
    /// `signbit(x)`: whether x's sign bit is set (−0.0 has it).
    Signbit,
    /// `round(x)`: to the nearest integer, ties to even; integers unchanged.
    Round,
    /// `sign(x)`: −1, 0 or 1 (0.0 for −0.0), NaN for NaN.
    Sign,
}

/// How numexpr types a function's arguments: the least kind it computes in (`minkind`)
/// and whether integers keep their kind (`round`, `sign`) rather than becoming float64.
struct Typing {
    min_kind: DataType,
    max_kind: Option<DataType>,
    keeps_integers: bool,
    arity: usize,
}

impl NumexprFunction {
    /// The function python-blosc2 names `name`, if it is one of these.
    pub fn named(name: &str) -> Option<Self> {
        use NumexprFunction as F;
        Some(match name {
            "expm1" => F::Expm1,
            "log1p" => F::Log1p,
            "hypot" => F::Hypot,
            "copysign" => F::Copysign,
            "nextafter" => F::Nextafter,
            "maximum" => F::Maximum,
            "minimum" => F::Minimum,
            "real" | "conj" => F::Real,
            "imag" => F::Imag,
            "isinf" => F::Isinf,
            "isfinite" => F::Isfinite,
            "signbit" => F::Signbit,
            "round" => F::Round,
            "sign" => F::Sign,
            _ => return None,
        })
    }

    /// The number of arguments it takes.
    pub fn arity(self) -> usize {
        self.typing().arity
    }

    fn typing(self) -> Typing {
        use NumexprFunction as F;
        let (min_kind, arity) = match self {
            F::Expm1 | F::Log1p => (DataType::Float32, 1),
            F::Hypot | F::Copysign | F::Nextafter | F::Maximum | F::Minimum => {
                (DataType::Float64, 2)
            }
            _ => (DataType::Float64, 1),
        };
        Typing {
            min_kind,
            // `real` and `imag` are typed (double, double); `conj` computes in complex,
            // whose real part is the same double.
            max_kind: matches!(self, F::Real | F::Imag).then_some(DataType::Float64),
            keeps_integers: matches!(self, F::Round | F::Sign),
            arity,
        }
    }

    /// Whether the result is a boolean.
    fn predicate(self) -> bool {
        matches!(self, Self::Isinf | Self::Isfinite | Self::Signbit)
    }

    /// The call of this function on `args`, already cast to its [`function_kind`].
    pub fn call(self, args: Vec<Expr>) -> Expr {
        ScalarUDF::new_from_impl(NumexprUdf {
            function: self,
            signature: Signature::any(self.arity(), Volatility::Immutable),
        })
        .call(args)
    }
}

/// The kind numexpr computes `f` in over arguments of the numexpr kinds `args` (bool,
/// int32, int64, float32, float64): the widest of them; integers as float64 (except for
/// `round` and `sign`, which keep them); then at least `f`'s least kind (float32 for
/// `expm1` and `log1p`, float64 for the others, so these compute float32 in float64).
pub fn function_kind(f: NumexprFunction, args: &[DataType]) -> Option<DataType> {
    use super::numpy_types::numexpr_kind as wider;
    let typing = f.typing();
    let mut kind = args.first()?.clone();
    for a in &args[1..] {
        kind = wider(&kind, a)?;
    }
    Some(if kind.is_integer() {
        if typing.keeps_integers {
            kind
        } else {
            DataType::Float64
        }
    } else {
        let kind = wider(&typing.min_kind, &kind)?;
        match typing.max_kind {
            Some(max) if wider(&max, &kind)? != max => max,
            _ => kind,
        }
    })
}

/// `a op b` for floats `a` and `b` of one type, compared as IEEE 754 (and numexpr)
/// compares them: false wherever either side is NaN, but for `!=`, which is true there.
/// (Arrow orders floats totally: NaN equals NaN and is above every number, so `f > 0`
/// would be true for NaN.) `None` when `op` is not a comparison.
pub fn ieee_comparison(op: BinaryOp, a: Expr, b: Expr) -> Option<Expr> {
    use BinaryOp as B;
    let name = match op {
        B::Lt => "ieee_lt",
        B::Le => "ieee_le",
        B::Gt => "ieee_gt",
        B::Ge => "ieee_ge",
        B::Eq => "ieee_eq",
        B::Ne => "ieee_ne",
        _ => return None,
    };
    let udf = FloatComparisonUdf {
        op,
        name,
        signature: Signature::any(2, Volatility::Immutable),
    };
    Some(ScalarUDF::new_from_impl(udf).call(vec![a, b]))
}

/// `a[0] op a[1]` over two arrays of type `T`, row by row (null where either is).
fn compare<T: ArrowPrimitiveType>(op: BinaryOp, a: &[ArrayRef]) -> BooleanArray
where
    T::Native: PartialOrd,
{
    let (x, y) = (a[0].as_primitive::<T>(), a[1].as_primitive::<T>());
    x.iter()
        .zip(y.iter())
        .map(|(x, y)| Some(test(op, x?, y?)))
        .collect()
}

/// `a op b` for a comparison `op`.
fn test<T: PartialOrd>(op: BinaryOp, a: T, b: T) -> bool {
    use BinaryOp as B;
    match op {
        B::Lt => a < b,
        B::Le => a <= b,
        B::Gt => a > b,
        B::Ge => a >= b,
        B::Eq => a == b,
        _ => a != b,
    }
}

/// The scalar function behind [`ieee_comparison`].
#[derive(Debug, PartialEq, Eq, Hash)]
struct FloatComparisonUdf {
    op: BinaryOp,
    name: &'static str,
    signature: Signature,
}

impl ScalarUDFImpl for FloatComparisonUdf {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        match args {
            [a, b] if a == b && a.is_floating() => Ok(DataType::Boolean),
            _ => exec_err!("{} of {args:?}", self.name()),
        }
    }

    /// Null where either argument is.
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        null_where_any_is(self, args)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let op = self.op;
        let out = match (arrays[0].data_type(), arrays[1].data_type()) {
            (DataType::Float64, DataType::Float64) => compare::<Float64Type>(op, &arrays),
            (DataType::Float32, DataType::Float32) => compare::<Float32Type>(op, &arrays),
            (a, b) => return exec_err!("{} of {a} and {b}", self.name()),
        };
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

/// The scalar function computing one [`NumexprFunction`].
#[derive(Debug, PartialEq, Eq, Hash)]
struct NumexprUdf {
    function: NumexprFunction,
    signature: Signature,
}

impl ScalarUDFImpl for NumexprUdf {
    fn name(&self) -> &str {
        use NumexprFunction as F;
        match self.function {
            F::Expm1 => "expm1",
            F::Log1p => "log1p",
            F::Hypot => "hypot",
            F::Copysign => "copysign",
            F::Nextafter => "nextafter",
            F::Maximum => "maximum",
            F::Minimum => "minimum",
            F::Real => "real",
            F::Imag => "imag",
            F::Isinf => "isinf",
            F::Isfinite => "isfinite",
            F::Signbit => "signbit",
            F::Round => "round",
            F::Sign => "sign",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        let Some(t) = args.first() else {
            return exec_err!("{} needs an argument", self.name());
        };
        if args.iter().any(|a| a != t) {
            return exec_err!("{} of mixed types {args:?}", self.name());
        }
        Ok(if self.function.predicate() {
            DataType::Boolean
        } else {
            t.clone()
        })
    }

    /// Null where any argument is.
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        null_where_any_is(self, args)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        Ok(ColumnarValue::Array(evaluate(self.function, &arrays)?))
    }
}

/// The result field of `udf` over `args`: its return type, nullable where any argument
/// is (these functions give null exactly where an argument is null).
pub(crate) fn null_where_any_is(
    udf: &dyn ScalarUDFImpl,
    args: ReturnFieldArgs,
) -> Result<FieldRef> {
    let types: Vec<DataType> = args
        .arg_fields
        .iter()
        .map(|f| f.data_type().clone())
        .collect();
    let nullable = args.arg_fields.iter().any(|f| f.is_nullable());
    Ok(Arc::new(Field::new(
        udf.name(),
        udf.return_type(&types)?,
        nullable,
    )))
}

/// `f` over `args` (one type, the kind [`function_kind`] chose).
fn evaluate(f: NumexprFunction, args: &[ArrayRef]) -> Result<ArrayRef> {
    use NumexprFunction as F;
    let t = args.first().map(|a| a.data_type().clone());
    let wrong = || {
        let types: Vec<_> = args.iter().map(|a| a.data_type()).collect();
        DataFusionError::Execution(format!("{f:?} of {types:?}"))
    };
    let f64s = |i: usize| -> Result<&PrimitiveArray<Float64Type>> {
        args.get(i)
            .and_then(|a| a.as_primitive_opt::<Float64Type>())
            .ok_or_else(wrong)
    };
    let pair = |op: fn(f64, f64) -> f64| -> Result<ArrayRef> {
        Ok(Arc::new(binary::<_, _, _, Float64Type>(
            f64s(0)?,
            f64s(1)?,
            op,
        )?))
    };
    let test = |p: fn(f64) -> bool| -> Result<ArrayRef> {
        let a = f64s(0)?;
        let values: BooleanArray = a.iter().map(|v| v.map(p)).collect();
        Ok(Arc::new(values))
    };
    Ok(match (f, t) {
        (F::Expm1, Some(DataType::Float32)) => unary_f32(&args[0], f32::exp_m1),
        (F::Expm1, _) => Arc::new(f64s(0)?.unary::<_, Float64Type>(f64::exp_m1)),
        (F::Log1p, Some(DataType::Float32)) => unary_f32(&args[0], f32::ln_1p),
        (F::Log1p, _) => Arc::new(f64s(0)?.unary::<_, Float64Type>(f64::ln_1p)),
        (F::Hypot, _) => pair(f64::hypot)?,
        (F::Copysign, _) => pair(f64::copysign)?,
        (F::Nextafter, _) => pair(next_after)?,
        (F::Maximum, _) => pair(|a, b| if a.is_nan() || a > b { a } else { b })?,
        (F::Minimum, _) => pair(|a, b| if a.is_nan() || a < b { a } else { b })?,
        (F::Real, _) => Arc::new(f64s(0)?.clone()),
        (F::Imag, _) => Arc::new(f64s(0)?.unary::<_, Float64Type>(|_| 0.0)),
        (F::Isinf, _) => test(f64::is_infinite)?,
        (F::Isfinite, _) => test(f64::is_finite)?,
        (F::Signbit, _) => test(f64::is_sign_negative)?,
        (F::Round, Some(DataType::Int32 | DataType::Int64)) => Arc::clone(&args[0]),
        (F::Round, _) => Arc::new(f64s(0)?.unary::<_, Float64Type>(f64::round_ties_even)),
        (F::Sign, Some(DataType::Int32)) => Arc::new(
            args[0]
                .as_primitive::<Int32Type>()
                .unary::<_, Int32Type>(i32::signum),
        ),
        (F::Sign, Some(DataType::Int64)) => Arc::new(
            args[0]
                .as_primitive::<Int64Type>()
                .unary::<_, Int64Type>(i64::signum),
        ),
        (F::Sign, _) => Arc::new(f64s(0)?.unary::<_, Float64Type>(float_sign)),
    })
}

fn unary_f32(a: &ArrayRef, op: fn(f32) -> f32) -> ArrayRef {
    Arc::new(a.as_primitive::<Float32Type>().unary::<_, Float32Type>(op))
}

/// NumPy's `sign` of a float: NaN for NaN, 0.0 for ±0.0, else ±1.0.
fn float_sign(x: f64) -> f64 {
    if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else if x == 0.0 {
        0.0
    } else {
        x
    }
}

/// C's `nextafter`: NaN if either is; `y` when equal (so ±0.0 take `y`'s sign); else the
/// neighbouring float of `x` toward `y`.
fn next_after(x: f64, y: f64) -> f64 {
    if x.is_nan() || y.is_nan() {
        x + y
    } else if x == y {
        y
    } else if y > x {
        x.next_up()
    } else {
        x.next_down()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_as_numexpr_types_them() {
        use DataType as T;
        use NumexprFunction as F;
        for (f, args, want) in [
            (F::Maximum, vec![T::Int32, T::Int32], T::Float64),
            (F::Maximum, vec![T::Float32, T::Float32], T::Float64),
            (F::Maximum, vec![T::Float32, T::Int32], T::Float64),
            (F::Expm1, vec![T::Float32], T::Float32),
            (F::Expm1, vec![T::Int32], T::Float64),
            (F::Expm1, vec![T::Boolean], T::Float32),
            (F::Round, vec![T::Int64], T::Int64),
            (F::Round, vec![T::Float32], T::Float64),
            (F::Sign, vec![T::Int32], T::Int32),
            (F::Real, vec![T::Int64], T::Float64),
            (F::Signbit, vec![T::Float32], T::Float64),
        ] {
            assert_eq!(function_kind(f, &args), Some(want), "{f:?}{args:?}");
        }
    }

    #[test]
    fn floats_at_their_edges() {
        let (z, nz, nan) = (0.0f64, -0.0f64, f64::NAN);
        assert_eq!(next_after(1.0, 0.0), 0.9999999999999999);
        assert_eq!(next_after(-0.0, 1.0), 5e-324);
        assert!(next_after(z, nz).is_sign_negative());
        assert!(next_after(nan, 1.0).is_nan() && next_after(1.0, nan).is_nan());
        assert!(float_sign(nz) == 0.0 && !float_sign(nz).is_sign_negative());
        assert!(float_sign(nan).is_nan());
        assert_eq!((float_sign(-3.0), float_sign(1e-300)), (-1.0, 1.0));
    }
}
