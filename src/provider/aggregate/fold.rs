//! The running state of one fused aggregate and the loops that fold a column of a batch
//! into it. The loops read the column's values in place: no widened copy of the column
//! is made, which is what DataFusion's `CAST` in front of `sum`/`avg` costs.
//!
//! Semantics follow DataFusion 55's `SumAccumulator`, `AvgAccumulator` and `count`:
//! integer sums wrap; float sums (and every `avg`) add each value as `f64`; nulls are
//! skipped; a sum over no non-null value is null. Float sums add in a different order
//! than DataFusion's kernel, as DataFusion's own result differs between partitionings.

use crate::chunk::simd::reduce::{self, AsF64, AsI64};
use arrow::array::{Array, ArrayRef, AsArray};
use arrow::buffer::NullBuffer;
use arrow::datatypes::{
    DataType, Float16Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type,
    UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};

/// What a fused aggregate computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggKind {
    /// `count(col)` (non-null values) or `count(*)`.
    Count,
    /// `sum(col)`, as `Int64`, `UInt64` or `Float64` (the sum's DataFusion return type).
    Sum,
    /// `avg(col)`: a count and a `Float64` sum.
    Avg,
    /// `min(col)`, in the column's type (`extremes.rs`).
    Min,
    /// `max(col)`, in the column's type.
    Max,
}

/// The accumulator a sum adds into: DataFusion's return type of `sum` over the column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SumType {
    /// Signed integers, wrapping.
    I64,
    /// Unsigned integers, wrapping.
    U64,
    /// Floats (and `avg` of anything).
    F64,
}

impl SumType {
    /// The sum type `kind` uses for a column of type `t`, or `None` where the fused path
    /// does not apply (decimals, non-numeric columns).
    pub fn of(kind: AggKind, t: &DataType) -> Option<SumType> {
        use DataType::*;
        let float = matches!(t, Float16 | Float32 | Float64);
        let signed = matches!(t, Int8 | Int16 | Int32 | Int64);
        let unsigned = matches!(t, UInt8 | UInt16 | UInt32 | UInt64);
        match kind {
            AggKind::Avg if float || signed || unsigned => Some(SumType::F64),
            AggKind::Sum if float => Some(SumType::F64),
            AggKind::Sum if signed => Some(SumType::I64),
            AggKind::Sum if unsigned => Some(SumType::U64),
            _ => None,
        }
    }

    /// The Arrow type of the sum.
    pub fn data_type(self) -> DataType {
        match self {
            SumType::I64 => DataType::Int64,
            SumType::U64 => DataType::UInt64,
            SumType::F64 => DataType::Float64,
        }
    }
}

/// A running sum in its accumulator type.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sum {
    /// See [`SumType::I64`].
    I64(i64),
    /// See [`SumType::U64`].
    U64(u64),
    /// See [`SumType::F64`].
    F64(f64),
}

/// The state of one aggregate over the rows folded so far.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AggState {
    /// Non-null values (rows, for `count(*)`).
    pub count: u64,
    /// The sum of those values (unused by `count`, `min` and `max`).
    pub sum: Sum,
    /// The least and greatest order keys of those values (`min`, `max`; see
    /// `extremes.rs`), meaningful once `count > 0`.
    pub lo: i64,
    /// See `lo`.
    pub hi: i64,
}

impl AggState {
    /// The empty state of an aggregate that sums into `t`.
    pub fn new(t: SumType) -> Self {
        let sum = match t {
            SumType::I64 => Sum::I64(0),
            SumType::U64 => Sum::U64(0),
            SumType::F64 => Sum::F64(0.0),
        };
        AggState {
            count: 0,
            sum,
            lo: i64::MAX,
            hi: i64::MIN,
        }
    }

    /// Folds the non-null values of `col` (a type `extremes::supported` admits) into
    /// the count and the extremes.
    pub fn add_extremes(&mut self, col: &dyn Array) {
        if let Some((lo, hi)) = super::extremes::extremes(col) {
            self.count += (col.len() - col.logical_null_count()) as u64;
            self.lo = self.lo.min(lo);
            self.hi = self.hi.max(hi);
        }
    }

    /// Counts `rows` rows (`count(*)`).
    pub fn add_rows(&mut self, rows: usize) {
        self.count += rows as u64;
    }

    /// Counts the non-null values of `col` (`count(col)`).
    pub fn add_count(&mut self, col: &dyn Array) {
        self.count += (col.len() - col.null_count()) as u64;
    }

    /// Adds the non-null values of `col` to the count and the sum. `col`'s type is one
    /// [`SumType::of`] accepted for this state's sum type.
    pub fn add_values(&mut self, col: &ArrayRef) {
        self.add_count(col.as_ref());
        let nulls = col.logical_nulls();
        let nulls = nulls.as_ref().filter(|n| n.null_count() > 0);
        match &mut self.sum {
            Sum::F64(s) => *s += float_sum(col.as_ref(), nulls),
            Sum::I64(s) => *s = s.wrapping_add(int_sum(col.as_ref(), nulls)),
            // Wrapping addition is the same on the bits of i64 and u64.
            Sum::U64(s) => *s = s.wrapping_add(int_sum(col.as_ref(), nulls) as u64),
        }
    }
}

/// `$f(values, nulls)` over the values of integer array `$c` by its type; `$other` for
/// any other type (the rule admits none).
macro_rules! by_int_type {
    ($c:expr, $f:ident, $nulls:expr, $other:expr) => {
        match $c.data_type() {
            DataType::Int8 => $f($c.as_primitive::<Int8Type>().values(), $nulls),
            DataType::Int16 => $f($c.as_primitive::<Int16Type>().values(), $nulls),
            DataType::Int32 => $f($c.as_primitive::<Int32Type>().values(), $nulls),
            DataType::Int64 => $f($c.as_primitive::<Int64Type>().values(), $nulls),
            DataType::UInt8 => $f($c.as_primitive::<UInt8Type>().values(), $nulls),
            DataType::UInt16 => $f($c.as_primitive::<UInt16Type>().values(), $nulls),
            DataType::UInt32 => $f($c.as_primitive::<UInt32Type>().values(), $nulls),
            DataType::UInt64 => $f($c.as_primitive::<UInt64Type>().values(), $nulls),
            _ => $other,
        }
    };
}

/// The sum of the valid values of numeric `c` as `f64`.
fn float_sum(c: &dyn Array, nulls: Option<&NullBuffer>) -> f64 {
    match c.data_type() {
        DataType::Float16 => {
            let v = c.as_primitive::<Float16Type>().values();
            match nulls {
                Some(n) => n.valid_indices().map(|i| f64::from(v[i])).sum(),
                None => v.iter().map(|&x| f64::from(x)).sum(),
            }
        }
        DataType::Float32 => sum_f64(c.as_primitive::<Float32Type>().values(), nulls),
        DataType::Float64 => sum_f64(c.as_primitive::<Float64Type>().values(), nulls),
        _ => by_int_type!(c, sum_f64, nulls, 0.0),
    }
}

/// The wrapping sum of the valid values of integer `c` as `i64`.
fn int_sum(c: &dyn Array, nulls: Option<&NullBuffer>) -> i64 {
    by_int_type!(c, sum_int, nulls, 0)
}

/// The sum of the valid values of `v` as `f64`.
fn sum_f64<T: AsF64>(v: &[T], nulls: Option<&NullBuffer>) -> f64 {
    match nulls {
        Some(n) => n.valid_indices().map(|i| v[i].as_f64()).sum(),
        None => reduce::sum_f64(v),
    }
}

/// The wrapping sum of the valid values of `v` as `i64`.
fn sum_int<T: AsI64>(v: &[T], nulls: Option<&NullBuffer>) -> i64 {
    match nulls {
        Some(n) => n
            .valid_indices()
            .fold(0i64, |a, i| a.wrapping_add(v[i].as_i64())),
        None => reduce::sum_wrapping(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float32Array, Int32Array, Int64Array, UInt64Array};
    use std::sync::Arc;

    #[test]
    fn sums_skip_nulls_and_wrap() {
        let f: ArrayRef = Arc::new(Float32Array::from(vec![
            Some(1.5),
            None,
            Some(2.0),
            Some(-0.5),
            Some(4.0),
            Some(1.0),
            Some(1.0),
            Some(1.0),
            Some(1.0),
            Some(1.0),
        ]));
        let mut s = AggState::new(SumType::F64);
        s.add_values(&f);
        assert_eq!(
            s,
            AggState {
                count: 9,
                sum: Sum::F64(12.0),
                ..AggState::new(SumType::F64)
            }
        );

        let i: ArrayRef = Arc::new(Int32Array::from(vec![i32::MAX, 1, -5]));
        let mut s = AggState::new(SumType::I64);
        s.add_values(&i);
        s.add_values(&i);
        let one = i32::MAX as i64 + 1 - 5;
        assert_eq!(
            s,
            AggState {
                count: 6,
                sum: Sum::I64(2 * one),
                ..AggState::new(SumType::I64)
            }
        );

        let i: ArrayRef = Arc::new(Int64Array::from(vec![i64::MAX, 1, 1]));
        let mut s = AggState::new(SumType::I64);
        s.add_values(&i);
        assert_eq!(
            s,
            AggState {
                count: 3,
                sum: Sum::I64(i64::MIN + 1),
                ..AggState::new(SumType::I64)
            }
        );

        let u: ArrayRef = Arc::new(UInt64Array::from(vec![u64::MAX, 2]));
        let mut s = AggState::new(SumType::U64);
        s.add_values(&u);
        assert_eq!(
            s,
            AggState {
                count: 2,
                sum: Sum::U64(1),
                ..AggState::new(SumType::U64)
            }
        );
    }
}
