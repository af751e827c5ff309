//! The types python-blosc2 4.14.1 gives a computed column's values, checked against its
//! output (`tests/fixtures/generate.py`, `ctable/computed*.b2d`).
//!
//! It evaluates the expression with numexpr, which runs each operation in one of five
//! kinds, the widest of its operands' (bool < int32 < int64 < float32 < float64): integer
//! columns of up to two bytes compute as int32 (`(s * s) // 7` over int16 does not wrap
//! at 16 bits), uint32 and uint64 as int64 (uint64 bit for bit), integer literals as
//! int32 when they fit, float literals as float64, integers divided by `/` as float64.
//! [`numexpr_type`] and [`numexpr_int`] put the operands in those kinds, so that
//! DataFusion's own coercion among them computes what numexpr does. python-blosc2 then
//! casts numexpr's result to the dtype NumPy's promotion gives the expression
//! ([`numpy_type`]; NEP 50: Python numbers are "weak" and take the
//! array's type), which a declared dtype only relabels.

use crate::array::expression::{BinaryOp, Expression};
use arrow::datatypes::DataType;
use datafusion::common::ScalarValue;

/// The type numexpr computes a column of type `t` in (`t` itself when it is not widened).
/// uint64 is read as int64, bit for bit: values from 2^63 are negative there (`u > 5` is
/// false for 2^63 + 5 in python-blosc2 4.14.1).
pub fn numexpr_type(t: &DataType) -> DataType {
    match t {
        DataType::Int8 | DataType::Int16 | DataType::UInt8 | DataType::UInt16 => DataType::Int32,
        DataType::UInt32 | DataType::UInt64 => DataType::Int64,
        t => t.clone(),
    }
}

/// The kind numexpr runs an operation on operands of types `a` and `b` in (both already
/// numexpr types): the wider in bool < int32 < int64 < float32 < float64.
pub fn numexpr_kind(a: &DataType, b: &DataType) -> Option<DataType> {
    let rank = |t: &DataType| match t {
        DataType::Boolean => Some(0),
        DataType::Int32 => Some(1),
        DataType::Int64 => Some(2),
        DataType::Float32 => Some(3),
        DataType::Float64 => Some(4),
        _ => None,
    };
    Some(if rank(a)? >= rank(b)? {
        a.clone()
    } else {
        b.clone()
    })
}

/// An integer literal as numexpr types it: int32 when it fits, int64 otherwise.
pub fn numexpr_int(v: i64) -> ScalarValue {
    match i32::try_from(v) {
        Ok(v) => ScalarValue::Int32(Some(v)),
        Err(_) => ScalarValue::Int64(Some(v)),
    }
}

/// An operand's NumPy type: an array's (strong), or a Python number's (weak).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Np {
    /// An array of this type.
    Strong(DataType),
    /// A Python `int`.
    WeakInt,
    /// A Python `float`.
    WeakFloat,
}

/// The dtype NumPy gives `e`, whose names have the types `name_type` gives; `None` where
/// this does not know it for sure (then the caller keeps the computed type).
pub fn numpy_type(
    e: &Expression,
    name_type: &dyn Fn(&str) -> Option<DataType>,
) -> Option<DataType> {
    Some(match numpy(e, name_type)? {
        Np::Strong(t) => t,
        Np::WeakInt => DataType::Int64,
        Np::WeakFloat => DataType::Float64,
    })
}

fn numpy(e: &Expression, name_type: &dyn Fn(&str) -> Option<DataType>) -> Option<Np> {
    let go = |x: &Expression| numpy(x, name_type);
    Some(match e {
        Expression::Name(n) => Np::Strong(name_type(n)?),
        Expression::Int(_) => Np::WeakInt,
        Expression::Float(_) => Np::WeakFloat,
        Expression::Bool(_) => Np::Strong(DataType::Boolean),
        Expression::Str(_) => return None,
        Expression::Unary(_, x) => go(x)?,
        Expression::Binary(op, a, b) => binary(*op, go(a)?, go(b)?)?,
        Expression::Call(name, args) => {
            let args = args.iter().map(go).collect::<Option<Vec<_>>>()?;
            call(name, args)?
        }
    })
}

fn binary(op: BinaryOp, a: Np, b: Np) -> Option<Np> {
    use BinaryOp as B;
    Some(match op {
        B::Lt | B::Le | B::Gt | B::Ge | B::Eq | B::Ne => Np::Strong(DataType::Boolean),
        B::Div => match promote(a, b)? {
            Np::Strong(t) if t.is_floating() => Np::Strong(t),
            Np::Strong(t) if t.is_integer() || t == DataType::Boolean => {
                Np::Strong(DataType::Float64)
            }
            Np::WeakInt | Np::WeakFloat => Np::WeakFloat,
            Np::Strong(_) => return None,
        },
        _ => promote(a, b)?,
    })
}

fn call(name: &str, mut args: Vec<Np>) -> Option<Np> {
    if let Some(op) = super::computed::operator_call(name) {
        let b = args.pop()?;
        return binary(op, args.pop()?, b);
    }
    if super::computed::unary_call(name).is_some() {
        return args.pop();
    }
    Some(match name {
        "where" => {
            let b = args.pop()?;
            promote(args.pop()?, b)?
        }
        // NumPy 2 rounds integers to themselves (`floor` of an int32 is an int32).
        "abs" | "square" | "lower" | "upper" | "floor" | "ceil" | "trunc" => args.pop()?,
        "real" | "conj" | "imag" | "round" | "sign" => args.pop()?,
        "isnan" | "isinf" | "isfinite" | "signbit" | "contains" | "startswith" | "endswith" => {
            Np::Strong(DataType::Boolean)
        }
        // python-blosc2 casts NumPy's result (in the promoted type) to `x`'s:
        // `clip(s, -5.5, 5)` over `int8` is `int8`.
        "clip" => args.into_iter().next()?,
        "reciprocal" => binary(BinaryOp::Div, args.pop()?, Np::WeakFloat)?,
        "logaddexp" => {
            let b = args.pop()?;
            float_of(promote(args.pop()?, b)?)?
        }
        "maximum" | "minimum" => {
            let b = args.pop()?;
            promote(args.pop()?, b)?
        }
        "arctan2" | "atan2" | "hypot" | "copysign" | "nextafter" => {
            let b = args.pop()?;
            float_of(promote(args.pop()?, b)?)?
        }
        "sqrt" | "exp" | "log" | "log2" | "log10" | "sin" | "cos" | "tan" | "arcsin" | "asin"
        | "arccos" | "acos" | "arctan" | "atan" | "sinh" | "cosh" | "tanh" | "arcsinh"
        | "asinh" | "arccosh" | "acosh" | "arctanh" | "atanh" | "expm1" | "log1p" => {
            float_of(args.pop()?)?
        }
        _ => return None,
    })
}

/// The type NumPy's float functions (`sqrt`, `sin`, …) return for an argument of type
/// `t`: floats keep theirs, 1-byte integers and booleans give float16, 2-byte integers
/// float32, wider ones float64.
pub(crate) fn float_of(t: Np) -> Option<Np> {
    Some(match t {
        Np::Strong(t) if t.is_floating() => Np::Strong(t),
        Np::Strong(DataType::Int8 | DataType::UInt8 | DataType::Boolean) => {
            Np::Strong(DataType::Float16)
        }
        Np::Strong(DataType::Int16 | DataType::UInt16) => Np::Strong(DataType::Float32),
        Np::Strong(t) if t.is_integer() && int_bytes(&t)? >= 4 => Np::Strong(DataType::Float64),
        Np::WeakInt | Np::WeakFloat => Np::WeakFloat,
        Np::Strong(_) => return None,
    })
}

/// NumPy's promotion of two operands (NEP 50).
pub(crate) fn promote(a: Np, b: Np) -> Option<Np> {
    Some(match (a, b) {
        (Np::Strong(a), Np::Strong(b)) => Np::Strong(promote_strong(&a, &b)?),
        (Np::Strong(t), weak) | (weak, Np::Strong(t)) => Np::Strong(match weak {
            _ if t.is_floating() => t,
            Np::WeakInt if t.is_integer() => t,
            Np::WeakInt if t == DataType::Boolean => DataType::Int64,
            Np::WeakFloat if t.is_integer() || t == DataType::Boolean => DataType::Float64,
            _ => return None,
        }),
        (Np::WeakInt, Np::WeakInt) => Np::WeakInt,
        _ => Np::WeakFloat,
    })
}

fn int_bytes(t: &DataType) -> Option<u8> {
    Some(match t {
        DataType::Int8 | DataType::UInt8 => 1,
        DataType::Int16 | DataType::UInt16 => 2,
        DataType::Int32 | DataType::UInt32 => 4,
        DataType::Int64 | DataType::UInt64 => 8,
        _ => return None,
    })
}

fn signed_int(bytes: u8) -> DataType {
    match bytes {
        1 => DataType::Int8,
        2 => DataType::Int16,
        4 => DataType::Int32,
        _ => DataType::Int64,
    }
}

/// NumPy's promotion of two array types.
fn promote_strong(a: &DataType, b: &DataType) -> Option<DataType> {
    use DataType as T;
    if a == b {
        return Some(a.clone());
    }
    Some(match (a, b) {
        (T::Boolean, t) | (t, T::Boolean) if t.is_integer() || t.is_floating() => t.clone(),
        (T::Float64, t) | (t, T::Float64) if t.is_integer() || t.is_floating() => T::Float64,
        (T::Float32, t) | (t, T::Float32) if t.is_integer() => {
            if int_bytes(t)? <= 2 {
                T::Float32
            } else {
                T::Float64
            }
        }
        (a, b) if a.is_integer() && b.is_integer() => {
            let (ab, bb) = (int_bytes(a)?, int_bytes(b)?);
            match (a.is_signed_integer(), b.is_signed_integer()) {
                (true, true) | (false, false) => {
                    if ab >= bb {
                        a.clone()
                    } else {
                        b.clone()
                    }
                }
                (signed, _) => {
                    // One signed (`s` bytes), one unsigned (`u` bytes).
                    let (s, u) = if signed { (ab, bb) } else { (bb, ab) };
                    if s > u {
                        signed_int(s)
                    } else if u < 8 {
                        signed_int(2 * u)
                    } else {
                        T::Float64
                    }
                }
            }
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::expression::parse;
    use DataType as T;

    /// The dtypes python-blosc2 4.14.1 reported for these expressions (its
    /// `t[name].dtype`) over columns s8 int8, s16 int16, u8 uint8, u16 uint16, u32 uint32,
    /// u64 uint64, l int64, h float32, b bool, i int32, f float64, a float32.
    #[test]
    fn numpy_types_as_python_blosc2_reports_them() {
        let col = |n: &str| {
            Some(match n {
                "s8" => T::Int8,
                "s16" => T::Int16,
                "u8" => T::UInt8,
                "u16" => T::UInt16,
                "u32" => T::UInt32,
                "u64" => T::UInt64,
                "l" => T::Int64,
                "h" | "a" => T::Float32,
                "b" => T::Boolean,
                "i" => T::Int32,
                "f" => T::Float64,
                _ => return None,
            })
        };
        for (expr, want) in [
            ("(s8 * s8) // 7", T::Int8),
            ("(u16 * u16) // 7", T::UInt16),
            ("u64 + 1", T::UInt64),
            ("s8 * h", T::Float32),
            ("u16 * h", T::Float32),
            ("l * h", T::Float64),
            ("s8 / 3", T::Float64),
            ("b + b", T::Boolean),
            ("sqrt(s16)", T::Float32),
            ("where(b, s8, s16) * 1000", T::Int16),
            ("l * 2.5", T::Float64),
            ("s8 * 3.5", T::Float64),
            ("(s8 + 100) > 150", T::Boolean),
            ("abs(s8 * 2)", T::Int8),
            ("s8 ** 2", T::Int8),
            ("u32 - 5000000000", T::UInt32),
            ("l // 7 * 1.5", T::Float64),
            ("h // 2", T::Float32),
            ("-s8 * 2", T::Int8),
            ("a * 1.1 + 0.3", T::Float32),
            ("a * i", T::Float64),
            ("a / 7 + h", T::Float32),
            ("sqrt(a) * 1.3", T::Float32),
            ("i / s16", T::Float64),
            ("u8 + 300", T::UInt8),
            ("i * f", T::Float64),
            ("sqrt(s8)", T::Float16),
            ("sin(u8) * 2", T::Float16),
            ("floor(i)", T::Int32),
            ("ceil(s8)", T::Int8),
            ("exp(u8 / 100)", T::Float64),
            ("log(u8 + 1)", T::Float16),
            ("maximum(s8, u8)", T::Int16),
            ("maximum(h, i)", T::Float64),
            ("minimum(i, l)", T::Int64),
            ("log1p(s8)", T::Float16),
            ("expm1(i)", T::Float64),
            ("sign(u8)", T::UInt8),
            ("round(i)", T::Int32),
            ("copysign(h, f)", T::Float64),
            ("hypot(h, a)", T::Float32),
            ("imag(i)", T::Int32),
            ("isinf(h)", T::Boolean),
            ("clip(s8, -5, 5)", T::Int8),
            ("clip(s8, -5.5, 5)", T::Int8),
            ("clip(i, f, 1)", T::Int32),
            ("clip(h, 0, 1)", T::Float32),
            ("reciprocal(s8)", T::Float64),
            ("reciprocal(h)", T::Float32),
            ("logaddexp(h, h)", T::Float32),
        ] {
            let got = numpy_type(&parse(expr).unwrap(), &col);
            assert_eq!(got, Some(want), "{expr}");
        }
        // Not known for sure: left to the computed type.
        for expr in ["'x'", "zz + 1", "cbrt(f)"] {
            assert_eq!(numpy_type(&parse(expr).unwrap(), &col), None, "{expr}");
        }
    }
}
