//! `min` and `max` in the fused aggregation: every value becomes an `i64` **order key**
//! (integers as themselves, `u64` with its top bit flipped, floats by IEEE 754's total
//! order, as `f64::total_cmp` ranks them), so that one state type and one loop serve every
//! numeric and temporal column, and the extremes are turned back into values of the
//! column's own type at the end.
//!
//! Semantics follow DataFusion 55's `min`/`max`: nulls are skipped, floats are ranked by
//! total order (a NaN with its sign bit clear is above every number, one with it set below),
//! `-0.0 < 0.0`, and the result over no non-null value is null.

use super::FusedAggregate;
use super::fold::AggKind;
use crate::chunk::simd::reduce;
use arrow::array::{
    Array, ArrayRef, AsArray, Float16Array, Float32Array, Float64Array, PrimitiveArray,
};
use arrow::array::{Int32Array, Int64Array, UInt16Array, UInt64Array};
use arrow::buffer::ScalarBuffer;
use arrow::compute::{max, min};
use arrow::datatypes::{
    ArrowNumericType, ArrowPrimitiveType, DataType, Date32Type, Date64Type,
    DurationMicrosecondType, DurationMillisecondType, DurationNanosecondType, DurationSecondType,
    Float16Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type,
    Time32MillisecondType, Time32SecondType, Time64MicrosecondType, Time64NanosecondType, TimeUnit,
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use datafusion::error::{DataFusionError, Result};
use std::sync::Arc;

/// Whether `min`/`max` of a column of type `t` can be fused: numbers and the temporal
/// types stored as integers (those [`values_of`] rebuilds by a cast from `Int64`).
pub fn supported(t: &DataType) -> bool {
    use DataType::*;
    let rebuilt = matches!(t, Float16 | Float32 | Float64 | UInt64 | Time32(_))
        || arrow::compute::can_cast_types(&Int64, t);
    rebuilt
        && matches!(
            t,
            Int8 | Int16
                | Int32
                | Int64
                | UInt8
                | UInt16
                | UInt32
                | UInt64
                | Float16
                | Float32
                | Float64
                | Date32
                | Date64
                | Timestamp(_, _)
                | Duration(_)
                | Time32(TimeUnit::Second | TimeUnit::Millisecond)
                | Time64(TimeUnit::Microsecond | TimeUnit::Nanosecond)
        )
}

/// The order key of an `f16` of bits `b` (`reduce::OrderKey`'s total order; `f16` is not
/// a Rust type here). The map is its own inverse on the bits.
#[inline(always)]
fn key16(b: u16) -> i64 {
    let b = b as i16;
    (b ^ (((b >> 15) as u16) >> 1) as i16) as i64
}

/// The `f64` whose order key is `k`: the key's map is its own inverse on the bits.
fn f64_of_key(k: i64) -> f64 {
    f64::from_bits((k ^ (((k >> 63) as u64) >> 1) as i64) as u64)
}

/// The `f32` whose order key is `k`.
fn f32_of_key(k: i64) -> f32 {
    let k = k as i32;
    f32::from_bits((k ^ (((k >> 31) as u32) >> 1) as i32) as u32)
}

/// `$f(typed column, key, fast, $args…)` for a column of Arrow type `$t` whose native
/// values have a `reduce::OrderKey`.
macro_rules! keyed {
    ($f:ident, $c:ident, $t:ty $(, $arg:expr)*) => {
        $f(
            $c.as_primitive::<$t>(),
            |x| reduce::OrderKey::key(x).into(),
            Some(reduce::extremes::<<$t as ArrowPrimitiveType>::Native> as Fast<$t>),
            $($arg),*
        )
    };
}

/// The vectorized extremes of a slice of native values.
type Fast<T> = fn(&[<T as ArrowPrimitiveType>::Native]) -> Option<(i64, i64)>;

/// `$f(array, key, fast, $args…)` with primitive column `$col` as its typed array, the
/// order key function of its values and the vectorized extremes of a slice of them
/// (`reduce::extremes`; `None` for `f16`), for every type [`supported`] admits; `$other`
/// otherwise.
macro_rules! by_native {
    ($col:expr, $f:ident($($arg:expr),*), $other:expr) => {{
        use DataType::*;
        let c = $col;
        match c.data_type() {
            Int8 => keyed!($f, c, Int8Type $(, $arg)*),
            Int16 => keyed!($f, c, Int16Type $(, $arg)*),
            Int32 => keyed!($f, c, Int32Type $(, $arg)*),
            Int64 => keyed!($f, c, Int64Type $(, $arg)*),
            UInt8 => keyed!($f, c, UInt8Type $(, $arg)*),
            UInt16 => keyed!($f, c, UInt16Type $(, $arg)*),
            UInt32 => keyed!($f, c, UInt32Type $(, $arg)*),
            UInt64 => keyed!($f, c, UInt64Type $(, $arg)*),
            Float16 => $f(c.as_primitive::<Float16Type>(), |x| key16(x.to_bits()), None, $($arg),*),
            Float32 => keyed!($f, c, Float32Type $(, $arg)*),
            Float64 => keyed!($f, c, Float64Type $(, $arg)*),
            Date32 => keyed!($f, c, Date32Type $(, $arg)*),
            Date64 => keyed!($f, c, Date64Type $(, $arg)*),
            Time32(TimeUnit::Second) => keyed!($f, c, Time32SecondType $(, $arg)*),
            Time32(TimeUnit::Millisecond) => keyed!($f, c, Time32MillisecondType $(, $arg)*),
            Time64(TimeUnit::Microsecond) => keyed!($f, c, Time64MicrosecondType $(, $arg)*),
            Time64(TimeUnit::Nanosecond) => keyed!($f, c, Time64NanosecondType $(, $arg)*),
            Timestamp(TimeUnit::Second, _) => keyed!($f, c, TimestampSecondType $(, $arg)*),
            Timestamp(TimeUnit::Millisecond, _) => keyed!($f, c, TimestampMillisecondType $(, $arg)*),
            Timestamp(TimeUnit::Microsecond, _) => keyed!($f, c, TimestampMicrosecondType $(, $arg)*),
            Timestamp(TimeUnit::Nanosecond, _) => keyed!($f, c, TimestampNanosecondType $(, $arg)*),
            Duration(TimeUnit::Second) => keyed!($f, c, DurationSecondType $(, $arg)*),
            Duration(TimeUnit::Millisecond) => keyed!($f, c, DurationMillisecondType $(, $arg)*),
            Duration(TimeUnit::Microsecond) => keyed!($f, c, DurationMicrosecondType $(, $arg)*),
            Duration(TimeUnit::Nanosecond) => keyed!($f, c, DurationNanosecondType $(, $arg)*),
            _ => $other,
        }
    }};
}

/// The least and greatest order keys of the non-null values of `col` (a [`supported`]
/// type), or `None` when it has none: `reduce::extremes` over the values (the same keys,
/// vectorized), or Arrow's `min`/`max` kernels (the same total order) where there are
/// nulls or the values are `f16`.
pub fn extremes(col: &dyn Array) -> Option<(i64, i64)> {
    fn go<T: ArrowNumericType>(
        a: &PrimitiveArray<T>,
        key: impl Fn(T::Native) -> i64,
        fast: Option<Fast<T>>,
    ) -> Option<(i64, i64)> {
        match fast {
            Some(f) if a.null_count() == 0 => f(a.values()),
            _ => Some((key(min(a)?), key(max(a)?))),
        }
    }
    by_native!(col, go(), None)
}

/// Folds the valid values of `col` into per-group extremes `lo`/`hi` (keys) and value
/// counts, the group of row `i` being `keys[i]`: runs of one key are reduced as slices,
/// stretches of keys that step by one update their groups' states in one pass.
pub fn add_grouped(
    col: &dyn Array,
    keys: &[i64],
    counts: &mut [u64],
    lo: &mut [i64],
    hi: &mut [i64],
) {
    fn go<T: ArrowNumericType>(
        a: &PrimitiveArray<T>,
        key: impl Fn(T::Native) -> i64,
        fast: Option<Fast<T>>,
        keys: &[i64],
        counts: &mut [u64],
        lo: &mut [i64],
        hi: &mut [i64],
    ) {
        let v = a.values();
        let nulls = a.logical_nulls();
        match nulls.as_ref().filter(|n| n.null_count() > 0) {
            Some(n) => n.valid_indices().for_each(|i| {
                let (g, k) = (keys[i] as usize, key(v[i]));
                counts[g] += 1;
                lo[g] = lo[g].min(k);
                hi[g] = hi[g].max(k);
            }),
            None => {
                let n = keys.len();
                let mut i = 0;
                while i < n {
                    let g = keys[i] as usize;
                    let mut j = i + 1;
                    if j < n && keys[j] == keys[i] + 1 {
                        // Keys that step by one (grouped by the last coordinate of whole
                        // rows): each value meets its group's state directly.
                        while j < n && keys[j] == keys[j - 1] + 1 {
                            j += 1;
                        }
                        let m = j - i;
                        let states = counts[g..g + m]
                            .iter_mut()
                            .zip(&mut lo[g..g + m])
                            .zip(&mut hi[g..g + m]);
                        for (((c, l), h), &x) in states.zip(&v[i..j]) {
                            let k = key(x);
                            *c += 1;
                            *l = (*l).min(k);
                            *h = (*h).max(k);
                        }
                        i = j;
                        continue;
                    }
                    while j < n && keys[j] == keys[i] {
                        j += 1;
                    }
                    let (a, b) = match (j - i >= super::grouped::SLICE_RUN, fast) {
                        (true, Some(f)) => f(&v[i..j]).unwrap_or((i64::MAX, i64::MIN)),
                        (true, None) => {
                            let run = a.slice(i, j - i);
                            match (min(&run), max(&run)) {
                                (Some(x), Some(y)) => (key(x), key(y)),
                                _ => (i64::MAX, i64::MIN),
                            }
                        }
                        (false, _) => {
                            let (mut x, mut y) = (i64::MAX, i64::MIN);
                            for &e in &v[i..j] {
                                let k = key(e);
                                x = x.min(k);
                                y = y.max(k);
                            }
                            (x, y)
                        }
                    };
                    counts[g] += (j - i) as u64;
                    lo[g] = lo[g].min(a);
                    hi[g] = hi[g].max(b);
                    i = j;
                }
            }
        }
    }
    by_native!(col, go(keys, counts, lo, hi), ())
}

/// The results of the fused `min` or `max` `a`, one per entry of `extremes` (the least and
/// greatest keys of its values; `None` when it had none: null), in the column's type.
pub fn results(
    a: &FusedAggregate,
    extremes: impl Iterator<Item = Option<(i64, i64)>>,
) -> Result<ArrayRef> {
    let t = a
        .value_type
        .as_ref()
        .ok_or_else(|| DataFusionError::Internal("fused min/max without a type".into()))?;
    let max = a.kind == AggKind::Max;
    values_of(
        t,
        extremes.map(|e| e.map(|(lo, hi)| if max { hi } else { lo })),
    )
}

/// The array of type `t` (a [`supported`] one) holding the values whose order keys are
/// `keys` (`None`: null).
pub(crate) fn values_of(t: &DataType, keys: impl Iterator<Item = Option<i64>>) -> Result<ArrayRef> {
    let out: ArrayRef = match t {
        DataType::Float64 => Arc::new(Float64Array::from_iter(keys.map(|k| k.map(f64_of_key)))),
        DataType::Float32 => Arc::new(Float32Array::from_iter(keys.map(|k| k.map(f32_of_key)))),
        DataType::Float16 => {
            let bits = UInt16Array::from_iter(keys.map(|k| k.map(|k| key16(k as u16) as u16)));
            let values = ScalarBuffer::new(bits.values().inner().clone(), 0, bits.len());
            Arc::new(Float16Array::new(values, bits.nulls().cloned()))
        }
        DataType::UInt64 => Arc::new(UInt64Array::from_iter(
            keys.map(|k| k.map(|k| (k as u64) ^ (1 << 63))),
        )),
        // Times of day in seconds or milliseconds are 32-bit, and cast from Int32 only.
        DataType::Time32(_) => {
            let ints: ArrayRef = Arc::new(Int32Array::from_iter(keys.map(|k| k.map(|k| k as i32))));
            arrow::compute::cast(&ints, t)?
        }
        // Every other supported type's values fit an i64 and come back by a cast, which
        // for integers and temporal types from Int64 keeps the value.
        _ => {
            let ints: ArrayRef = Arc::new(Int64Array::from_iter(keys));
            arrow::compute::cast(&ints, t)?
        }
    };
    if out.data_type() != t {
        return Err(DataFusionError::Internal(format!(
            "fused min/max: built {} for {t}",
            out.data_type()
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int8Array, TimestampMillisecondArray};

    /// Keys come back to the same values (signed NaNs and zeros, infinities,
    /// subnormals); `f16` keys rank as `total_cmp` does (the other types' keys are
    /// `reduce::OrderKey`'s, tested there).
    #[test]
    fn keys_invert_and_f16_follows_total_order() {
        use reduce::OrderKey;
        // Those of `reduce`'s tests, and two at the ends of `f16`'s range.
        let mut specials = reduce::ORDER_TEST_FLOATS.to_vec();
        specials.extend([-3.5e200, 65504.0, -6.1e-5]);
        let halves =
            arrow::compute::cast(&Float64Array::from(specials.clone()), &DataType::Float16);
        let halves = halves.unwrap();
        let halves = halves.as_primitive::<Float16Type>().values();
        for (i, &a) in specials.iter().enumerate() {
            for (j, _) in specials.iter().enumerate() {
                let (p, q) = (halves[i], halves[j]);
                let order = key16(p.to_bits()).cmp(&key16(q.to_bits()));
                assert_eq!(order, p.total_cmp(&q), "{p} {q}");
            }
            let back = values_of(&DataType::Float64, [Some(a.key())].into_iter()).unwrap();
            assert_eq!(
                back.as_primitive::<Float64Type>().value(0).to_bits(),
                a.to_bits()
            );
            let x = a as f32;
            let back = values_of(&DataType::Float32, [Some(x.key().into())].into_iter());
            let back = back.unwrap();
            assert_eq!(
                back.as_primitive::<Float32Type>().value(0).to_bits(),
                x.to_bits()
            );
            let h = halves[i].to_bits();
            let back = values_of(&DataType::Float16, [Some(key16(h)), None].into_iter()).unwrap();
            assert_eq!(back.as_primitive::<Float16Type>().value(0).to_bits(), h);
            assert!(back.is_null(1));
        }
    }

    /// Grouped extremes, over long runs (Arrow's kernels on slices), short runs and
    /// rows with nulls, match a per-group `total_cmp` fold of the same values.
    #[test]
    fn grouped_extremes_match_total_order_per_group() {
        let n = 300;
        let keys: Vec<i64> = (0..n as i64)
            .map(|i| if i < 200 { i / 40 } else { i % 7 })
            .collect();
        let specials = [f64::NAN, -f64::NAN, -0.0, 0.0, f64::INFINITY, -1.5];
        let values: Vec<f64> = (0..n)
            .map(|i| match i % 13 {
                3 => specials[(i / 13) % specials.len()],
                _ => ((i * 7919) % 1000) as f64 - 500.0,
            })
            .collect();
        for with_nulls in [false, true] {
            let col = Float64Array::from_iter(
                values
                    .iter()
                    .enumerate()
                    .map(|(i, &v)| (!with_nulls || i % 5 != 0).then_some(v)),
            );
            let groups = 40;
            let (mut counts, mut lo, mut hi) = (
                vec![0; groups],
                vec![i64::MAX; groups],
                vec![i64::MIN; groups],
            );
            add_grouped(&col, &keys, &mut counts, &mut lo, &mut hi);
            for g in 0..groups {
                let mine: Vec<f64> = (0..n)
                    .filter(|&i| keys[i] == g as i64 && col.is_valid(i))
                    .map(|i| values[i])
                    .collect();
                assert_eq!(counts[g], mine.len() as u64, "group {g}");
                let Some(&first) = mine.first() else { continue };
                let least = mine.iter().fold(first, |a, &b| match b.total_cmp(&a) {
                    std::cmp::Ordering::Less => b,
                    _ => a,
                });
                let most = mine.iter().fold(first, |a, &b| match b.total_cmp(&a) {
                    std::cmp::Ordering::Greater => b,
                    _ => a,
                });
                assert_eq!(lo[g], reduce::OrderKey::key(least), "group {g}");
                assert_eq!(hi[g], reduce::OrderKey::key(most), "group {g}");
            }
        }
    }

    /// Extremes skip nulls, and come back in the column's type (a time zone kept).
    #[test]
    fn extremes_skip_nulls_and_keep_the_type() {
        let c = Int8Array::from(vec![Some(3), None, Some(-7), Some(100)]);
        let (lo, hi) = extremes(&c).unwrap();
        assert_eq!((lo, hi), (-7, 100));
        assert_eq!(extremes(&Int8Array::from(vec![None, None])), None);
        let t = TimestampMillisecondArray::from(vec![Some(5), None, Some(-2)])
            .with_timezone("Europe/Madrid");
        let (lo, hi) = extremes(&t).unwrap();
        let back = values_of(t.data_type(), [Some(lo), Some(hi), None].into_iter()).unwrap();
        // Every supported type comes back from its keys.
        for t in [
            DataType::Time32(TimeUnit::Second),
            DataType::Time32(TimeUnit::Millisecond),
            DataType::Time64(TimeUnit::Nanosecond),
            DataType::Date32,
            DataType::Date64,
            DataType::Duration(TimeUnit::Microsecond),
            DataType::UInt32,
            DataType::Int8,
        ] {
            assert!(supported(&t), "{t}");
            let built = values_of(&t, [Some(7), None].into_iter()).unwrap();
            assert_eq!(built.data_type(), &t);
            assert_eq!(built.null_count(), 1);
        }
        assert_eq!(back.data_type(), t.data_type());
        let back = back.as_primitive::<TimestampMillisecondType>();
        assert_eq!(back.values().to_vec(), vec![-2, 5, 0]);
        assert!(back.is_null(2));
        let u = UInt64Array::from(vec![u64::MAX, 7]);
        let (lo, hi) = extremes(&u).unwrap();
        let back = values_of(&DataType::UInt64, [Some(lo), Some(hi)].into_iter()).unwrap();
        assert_eq!(
            back.as_primitive::<UInt64Type>().values().to_vec(),
            vec![7, u64::MAX]
        );
    }
}
