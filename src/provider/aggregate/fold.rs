//! The running state of one fused aggregate and the loops that fold a column of a batch
//! into it. The loops read the column's values in place: no widened copy of the column
//! is made, which is what DataFusion's `CAST` in front of `sum`/`avg` costs.
//!
//! Semantics follow DataFusion 55's `SumAccumulator`, `AvgAccumulator` and `count`:
//! integer sums wrap; float sums (and every `avg`) add each value as `f64`; nulls are
//! skipped; a sum over no non-null value is null. Float sums add in a different order
//! than DataFusion's kernel, as DataFusion's own result differs between partitionings.

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
    /// The sum of those values (unused by `count`).
    pub sum: Sum,
}

impl AggState {
    /// The empty state of an aggregate that sums into `t`.
    pub fn new(t: SumType) -> Self {
        let sum = match t {
            SumType::I64 => Sum::I64(0),
            SumType::U64 => Sum::U64(0),
            SumType::F64 => Sum::F64(0.0),
        };
        AggState { count: 0, sum }
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
        macro_rules! fold {
            ($t:ty, $acc:ident, $f:expr) => {{
                let v = col.as_primitive::<$t>().values();
                $acc = $f(v.as_ref(), nulls, $acc);
            }};
        }
        match &mut self.sum {
            Sum::F64(s) => {
                let mut acc = *s;
                match col.data_type() {
                    DataType::Float16 => {
                        fold!(Float16Type, acc, |v, n, a| sum_f64(v, n, a, f64::from))
                    }
                    DataType::Float32 => {
                        fold!(Float32Type, acc, |v, n, a| sum_f64(v, n, a, |x: f32| x
                            as f64))
                    }
                    DataType::Float64 => {
                        fold!(Float64Type, acc, |v, n, a| sum_f64(v, n, a, |x: f64| x))
                    }
                    DataType::Int8 => {
                        fold!(Int8Type, acc, |v, n, a| sum_f64(v, n, a, |x: i8| x as f64))
                    }
                    DataType::Int16 => {
                        fold!(Int16Type, acc, |v, n, a| sum_f64(v, n, a, |x: i16| x
                            as f64))
                    }
                    DataType::Int32 => {
                        fold!(Int32Type, acc, |v, n, a| sum_f64(v, n, a, |x: i32| x
                            as f64))
                    }
                    DataType::Int64 => {
                        fold!(Int64Type, acc, |v, n, a| sum_f64(v, n, a, |x: i64| x
                            as f64))
                    }
                    DataType::UInt8 => {
                        fold!(UInt8Type, acc, |v, n, a| sum_f64(v, n, a, |x: u8| x as f64))
                    }
                    DataType::UInt16 => {
                        fold!(UInt16Type, acc, |v, n, a| sum_f64(v, n, a, |x: u16| x
                            as f64))
                    }
                    DataType::UInt32 => {
                        fold!(UInt32Type, acc, |v, n, a| sum_f64(v, n, a, |x: u32| x
                            as f64))
                    }
                    DataType::UInt64 => {
                        fold!(UInt64Type, acc, |v, n, a| sum_f64(v, n, a, |x: u64| x
                            as f64))
                    }
                    _ => {}
                }
                *s = acc;
            }
            Sum::I64(s) => {
                let mut acc = *s;
                match col.data_type() {
                    DataType::Int8 => {
                        fold!(Int8Type, acc, |v, n, a| sum_wrapping(v, n, a, |x: i8| x
                            as i64))
                    }
                    DataType::Int16 => {
                        fold!(Int16Type, acc, |v, n, a| sum_wrapping(v, n, a, |x: i16| x
                            as i64))
                    }
                    DataType::Int32 => {
                        fold!(Int32Type, acc, |v, n, a| sum_wrapping(v, n, a, |x: i32| x
                            as i64))
                    }
                    DataType::Int64 => {
                        fold!(Int64Type, acc, |v, n, a| sum_wrapping(v, n, a, |x: i64| x))
                    }
                    _ => {}
                }
                *s = acc;
            }
            Sum::U64(s) => {
                let mut acc = *s as i64;
                match col.data_type() {
                    DataType::UInt8 => {
                        fold!(UInt8Type, acc, |v, n, a| sum_wrapping(v, n, a, |x: u8| x
                            as i64))
                    }
                    DataType::UInt16 => fold!(UInt16Type, acc, |v, n, a| sum_wrapping(
                        v,
                        n,
                        a,
                        |x: u16| x as i64
                    )),
                    DataType::UInt32 => fold!(UInt32Type, acc, |v, n, a| sum_wrapping(
                        v,
                        n,
                        a,
                        |x: u32| x as i64
                    )),
                    // Wrapping addition is the same on the bits of i64 and u64.
                    DataType::UInt64 => fold!(UInt64Type, acc, |v, n, a| sum_wrapping(
                        v,
                        n,
                        a,
                        |x: u64| x as i64
                    )),
                    _ => {}
                }
                *s = acc as u64;
            }
        }
    }
}

/// Lanes of independent partial sums: lets the compiler keep several additions in flight
/// (and in vector registers) where one running sum would wait on each addition.
const LANES: usize = 8;

/// `acc` plus the valid values of `v`, each converted by `f`.
fn sum_f64<T: Copy>(v: &[T], nulls: Option<&NullBuffer>, acc: f64, f: impl Fn(T) -> f64) -> f64 {
    if let Some(n) = nulls {
        return n.valid_indices().fold(acc, |a, i| a + f(v[i]));
    }
    let mut lanes = [0f64; LANES];
    let mut it = v.chunks_exact(LANES);
    for c in &mut it {
        for (l, &x) in lanes.iter_mut().zip(c) {
            *l += f(x);
        }
    }
    let tail = it.remainder().iter().fold(0.0, |a, &x| a + f(x));
    acc + lanes.iter().sum::<f64>() + tail
}

/// `acc` plus the valid values of `v`, each converted by `f`, wrapping.
fn sum_wrapping<T: Copy>(
    v: &[T],
    nulls: Option<&NullBuffer>,
    acc: i64,
    f: impl Fn(T) -> i64,
) -> i64 {
    match nulls {
        Some(n) => n.valid_indices().fold(acc, |a, i| a.wrapping_add(f(v[i]))),
        None => v.iter().fold(acc, |a, &x| a.wrapping_add(f(x))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float32Array, Int32Array, UInt64Array};
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
                sum: Sum::F64(12.0)
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
                sum: Sum::I64(2 * one)
            }
        );

        let u: ArrayRef = Arc::new(UInt64Array::from(vec![u64::MAX, 2]));
        let mut s = AggState::new(SumType::U64);
        s.add_values(&u);
        assert_eq!(
            s,
            AggState {
                count: 2,
                sum: Sum::U64(1)
            }
        );
    }

    #[test]
    fn float_sum_without_nulls_uses_all_lanes_and_the_tail() {
        let v: Vec<f64> = (0..1000).map(|i| i as f64 * 0.25).collect();
        let a: ArrayRef = Arc::new(arrow::array::Float64Array::from(v.clone()));
        let mut s = AggState::new(SumType::F64);
        s.add_values(&a);
        assert_eq!(s.sum, Sum::F64(v.iter().sum()));
        assert_eq!(s.count, 1000);
    }
}
