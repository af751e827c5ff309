//! The cast of a computed column's integer value to its declared integer dtype, as NumPy's
//! `astype` does it: modulo 2^bits. python-blosc2 evaluates `u + 300` over a `uint8`
//! column to `uint8` values that wrapped (255 + 300 is 43); Arrow's cast refuses every
//! value out of the target's range, which would fail the whole query.

use arrow::array::{Array, ArrayRef, AsArray, Int64Array};
use arrow::buffer::ScalarBuffer;
use arrow::compute::cast;
use arrow::datatypes::{
    DataType, Field, FieldRef, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type,
    UInt32Type, UInt64Type,
};
use datafusion::common::{Result, exec_err};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use std::sync::Arc;

/// `e` (of an integer type) cast to the integer type `target`, wrapping.
pub fn wrapping_cast(e: Expr, target: DataType) -> Expr {
    ScalarUDF::new_from_impl(WrappingCast {
        target,
        signature: Signature::any(1, Volatility::Immutable),
    })
    .call(vec![e])
}

/// The scalar function behind [`wrapping_cast`]: one integer argument, the integer
/// `target` type out.
#[derive(Debug, PartialEq, Eq, Hash)]
struct WrappingCast {
    target: DataType,
    signature: Signature,
}

impl ScalarUDFImpl for WrappingCast {
    fn name(&self) -> &str {
        "wrapping_cast"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        match args {
            [t] if t.is_integer() && self.target.is_integer() => Ok(self.target.clone()),
            _ => exec_err!("wrapping_cast of {args:?} to {}", self.target),
        }
    }

    /// Null exactly where the argument is.
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let [arg] = args.arg_fields else {
            return exec_err!("wrapping_cast takes one argument");
        };
        let t = self.return_type(&[arg.data_type().clone()])?;
        Ok(Arc::new(Field::new(self.name(), t, arg.is_nullable())))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [a] = ColumnarValue::values_to_arrays(&args.args)?
            .try_into()
            .map_err(|_| datafusion::common::DataFusionError::Internal("one argument".into()))?;
        Ok(ColumnarValue::Array(wrap(&as_i64(&a)?, &self.target)?))
    }
}

/// The integers of `a` as `i64`, the same modulo 2^64 (so `u64` values are reinterpreted).
fn as_i64(a: &ArrayRef) -> Result<Int64Array> {
    Ok(match a.data_type() {
        DataType::UInt64 => {
            let u = a.as_primitive::<UInt64Type>();
            let values = ScalarBuffer::new(u.values().inner().clone(), 0, u.len());
            Int64Array::new(values, u.nulls().cloned())
        }
        // Every other integer type fits in i64, so Arrow's cast is exact.
        _ => cast(a, &DataType::Int64)?
            .as_primitive::<Int64Type>()
            .clone(),
    })
}

/// `v` cast to the integer type `target`, keeping the low bits.
fn wrap(v: &Int64Array, target: &DataType) -> Result<ArrayRef> {
    Ok(match target {
        DataType::Int8 => Arc::new(v.unary::<_, Int8Type>(|x| x as i8)),
        DataType::Int16 => Arc::new(v.unary::<_, Int16Type>(|x| x as i16)),
        DataType::Int32 => Arc::new(v.unary::<_, Int32Type>(|x| x as i32)),
        DataType::Int64 => Arc::new(v.clone()),
        DataType::UInt8 => Arc::new(v.unary::<_, UInt8Type>(|x| x as u8)),
        DataType::UInt16 => Arc::new(v.unary::<_, UInt16Type>(|x| x as u16)),
        DataType::UInt32 => Arc::new(v.unary::<_, UInt32Type>(|x| x as u32)),
        DataType::UInt64 => Arc::new(v.unary::<_, UInt64Type>(|x| x as u64)),
        t => return exec_err!("wrapping_cast to {t}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int8Array, UInt8Array, UInt64Array};

    #[test]
    fn integers_wrap_modulo_the_target_width() {
        let a: ArrayRef = Arc::new(Int64Array::from(vec![
            Some(300),
            Some(-10),
            None,
            Some(-12800),
            Some(255),
        ]));
        let u8s = wrap(&as_i64(&a).unwrap(), &DataType::UInt8).unwrap();
        assert_eq!(
            u8s.as_primitive::<UInt8Type>(),
            &UInt8Array::from(vec![Some(44), Some(246), None, Some(0), Some(255)])
        );
        let i8s = wrap(&as_i64(&a).unwrap(), &DataType::Int8).unwrap();
        assert_eq!(
            i8s.as_primitive::<Int8Type>(),
            &Int8Array::from(vec![Some(44), Some(-10), None, Some(0), Some(-1)])
        );
        // u64 beyond i64 and back.
        let big: ArrayRef = Arc::new(UInt64Array::from(vec![u64::MAX, 1 << 63]));
        let back = wrap(&as_i64(&big).unwrap(), &DataType::UInt64).unwrap();
        assert_eq!(
            back.as_primitive::<UInt64Type>(),
            &UInt64Array::from(vec![u64::MAX, 1 << 63])
        );
        let low = wrap(&as_i64(&big).unwrap(), &DataType::Int16).unwrap();
        assert_eq!(low.as_primitive::<Int16Type>().values(), &[-1i16, 0]);
    }
}
