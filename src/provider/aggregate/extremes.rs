//! `min` and `max` in the fused aggregation: every value becomes an `i64` **order key**
//! (integers as themselves, `u64` with its top bit flipped, floats by IEEE 754's total
//! order, as `f64::total_cmp` ranks them), so that one state type and one loop serve every
//! numeric and temporal column, and the extremes are turned back into values of the
//! column's own type at the end.
//!
//! Semantics follow DataFusion 55's `min`/`max`: nulls are skipped, floats are ranked by
//! total order (a NaN with its sign bit clear is above every number, one with it set below),
//! `-0.0 < 0.0`, and the result over no non-null value is null.

use crate::chunk::simd::reduce;
use arrow::array::{
    Array, ArrayRef, AsArray, Float16Array, Float32Array, Float64Array, PrimitiveArray,
};
use arrow::array::{Int64Array, UInt16Array, UInt64Array};
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
/// types stored as integers.
pub fn supported(t: &DataType) -> bool {
    use DataType::*;
    matches!(
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

// Total order on floats: a negative float's magnitude bits are flipped, so that larger
// magnitudes rank lower; the sign bit keeps negatives below positives. Each map is its own
// inverse.

/// The order key of an `f64` of bits `b` (as `i64`), and its inverse.
#[inline(always)]
fn key64(b: i64) -> i64 {
    b ^ (((b >> 63) as u64) >> 1) as i64
}

/// The order key of an `f32` of bits `b`.
#[inline(always)]
fn key32(b: u32) -> i64 {
    let b = b as i32;
    (b ^ (((b >> 31) as u32) >> 1) as i32) as i64
}

/// The order key of an `f16` of bits `b`.
#[inline(always)]
fn key16(b: u16) -> i64 {
    let b = b as i16;
    (b ^ (((b >> 15) as u16) >> 1) as i16) as i64
}

/// The order key of a `u64`: its top bit flipped.
#[inline(always)]
fn key_u64(x: u64) -> i64 {
    (x ^ (1 << 63)) as i64
}

/// The vectorized extremes of a slice of native values.
type Fast<T> = fn(&[<T as ArrowPrimitiveType>::Native]) -> Option<(i64, i64)>;

/// `$f(array, key, fast, $args…)` with primitive column `$col` as its typed array, the
/// order key function of its values and the vectorized extremes of a slice of them
/// (`reduce::extremes`; `None` for `f16`), for every type [`supported`] admits; `$other` otherwise.
macro_rules! by_native {
    ($col:expr, $f:ident($($arg:expr),*), $other:expr) => {{
        use DataType::*;
        let c = $col;
        match c.data_type() {
            Int8 => $f(c.as_primitive::<Int8Type>(), |x| x as i64, Some(reduce::extremes::<<Int8Type as ArrowPrimitiveType>::Native>), $($arg),*),
            Int16 => $f(c.as_primitive::<Int16Type>(), |x| x as i64, Some(reduce::extremes::<<Int16Type as ArrowPrimitiveType>::Native>), $($arg),*),
            Int32 => $f(c.as_primitive::<Int32Type>(), |x| x as i64, Some(reduce::extremes::<<Int32Type as ArrowPrimitiveType>::Native>), $($arg),*),
            Int64 => $f(c.as_primitive::<Int64Type>(), |x| x, Some(reduce::extremes::<<Int64Type as ArrowPrimitiveType>::Native>), $($arg),*),
            UInt8 => $f(c.as_primitive::<UInt8Type>(), |x| x as i64, Some(reduce::extremes::<<UInt8Type as ArrowPrimitiveType>::Native>), $($arg),*),
            UInt16 => $f(c.as_primitive::<UInt16Type>(), |x| x as i64, Some(reduce::extremes::<<UInt16Type as ArrowPrimitiveType>::Native>), $($arg),*),
            UInt32 => $f(c.as_primitive::<UInt32Type>(), |x| x as i64, Some(reduce::extremes::<<UInt32Type as ArrowPrimitiveType>::Native>), $($arg),*),
            UInt64 => $f(c.as_primitive::<UInt64Type>(), key_u64, Some(reduce::extremes::<<UInt64Type as ArrowPrimitiveType>::Native>), $($arg),*),
            Float16 => $f(c.as_primitive::<Float16Type>(), |x| key16(x.to_bits()), None, $($arg),*),
            Float32 => $f(c.as_primitive::<Float32Type>(), |x| key32(x.to_bits()), Some(reduce::extremes::<<Float32Type as ArrowPrimitiveType>::Native>), $($arg),*),
            Float64 => $f(c.as_primitive::<Float64Type>(), |x| key64(x.to_bits() as i64), Some(reduce::extremes::<<Float64Type as ArrowPrimitiveType>::Native>), $($arg),*),
            Date32 => $f(c.as_primitive::<Date32Type>(), |x| x as i64, Some(reduce::extremes::<<Date32Type as ArrowPrimitiveType>::Native>), $($arg),*),
            Date64 => $f(c.as_primitive::<Date64Type>(), |x| x, Some(reduce::extremes::<<Date64Type as ArrowPrimitiveType>::Native>), $($arg),*),
            Time32(TimeUnit::Second) => $f(c.as_primitive::<Time32SecondType>(), |x| x as i64, Some(reduce::extremes::<<Time32SecondType as ArrowPrimitiveType>::Native>), $($arg),*),
            Time32(TimeUnit::Millisecond) => $f(c.as_primitive::<Time32MillisecondType>(), |x| x as i64, Some(reduce::extremes::<<Time32MillisecondType as ArrowPrimitiveType>::Native>), $($arg),*),
            Time64(TimeUnit::Microsecond) => $f(c.as_primitive::<Time64MicrosecondType>(), |x| x, Some(reduce::extremes::<<Time64MicrosecondType as ArrowPrimitiveType>::Native>), $($arg),*),
            Time64(TimeUnit::Nanosecond) => $f(c.as_primitive::<Time64NanosecondType>(), |x| x, Some(reduce::extremes::<<Time64NanosecondType as ArrowPrimitiveType>::Native>), $($arg),*),
            Timestamp(TimeUnit::Second, _) => $f(c.as_primitive::<TimestampSecondType>(), |x| x, Some(reduce::extremes::<<TimestampSecondType as ArrowPrimitiveType>::Native>), $($arg),*),
            Timestamp(TimeUnit::Millisecond, _) => $f(c.as_primitive::<TimestampMillisecondType>(), |x| x, Some(reduce::extremes::<<TimestampMillisecondType as ArrowPrimitiveType>::Native>), $($arg),*),
            Timestamp(TimeUnit::Microsecond, _) => $f(c.as_primitive::<TimestampMicrosecondType>(), |x| x, Some(reduce::extremes::<<TimestampMicrosecondType as ArrowPrimitiveType>::Native>), $($arg),*),
            Timestamp(TimeUnit::Nanosecond, _) => $f(c.as_primitive::<TimestampNanosecondType>(), |x| x, Some(reduce::extremes::<<TimestampNanosecondType as ArrowPrimitiveType>::Native>), $($arg),*),
            Duration(TimeUnit::Second) => $f(c.as_primitive::<DurationSecondType>(), |x| x, Some(reduce::extremes::<<DurationSecondType as ArrowPrimitiveType>::Native>), $($arg),*),
            Duration(TimeUnit::Millisecond) => $f(c.as_primitive::<DurationMillisecondType>(), |x| x, Some(reduce::extremes::<<DurationMillisecondType as ArrowPrimitiveType>::Native>), $($arg),*),
            Duration(TimeUnit::Microsecond) => $f(c.as_primitive::<DurationMicrosecondType>(), |x| x, Some(reduce::extremes::<<DurationMicrosecondType as ArrowPrimitiveType>::Native>), $($arg),*),
            Duration(TimeUnit::Nanosecond) => $f(c.as_primitive::<DurationNanosecondType>(), |x| x, Some(reduce::extremes::<<DurationNanosecondType as ArrowPrimitiveType>::Native>), $($arg),*),
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

/// The array of type `t` (a [`supported`] one) holding the values whose order keys are
/// `keys` (`None`: null).
pub fn values_of(t: &DataType, keys: impl Iterator<Item = Option<i64>>) -> Result<ArrayRef> {
    let back32 = |k: i64| f32::from_bits(key32(k as u32) as u32);
    let out: ArrayRef = match t {
        DataType::Float64 => Arc::new(Float64Array::from_iter(
            keys.map(|k| k.map(|k| f64::from_bits(key64(k) as u64))),
        )),
        DataType::Float32 => Arc::new(Float32Array::from_iter(keys.map(|k| k.map(back32)))),
        DataType::Float16 => {
            let bits = UInt16Array::from_iter(keys.map(|k| k.map(|k| key16(k as u16) as u16)));
            let values = ScalarBuffer::new(bits.values().inner().clone(), 0, bits.len());
            Arc::new(Float16Array::new(values, bits.nulls().cloned()))
        }
        DataType::UInt64 => Arc::new(UInt64Array::from_iter(
            keys.map(|k| k.map(|k| key_u64(k as u64) as u64)),
        )),
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

    /// Order keys rank floats as `total_cmp` does (signed NaNs, signed zeros,
    /// infinities, subnormals) and come back to the same bits.
    #[test]
    fn float_keys_follow_total_order_and_invert() {
        let specials = vec![
            f64::NAN,
            -f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.0,
            -0.0,
            1.0,
            -1.0,
            f64::MIN_POSITIVE / 4.0,
            -f64::MIN_POSITIVE / 4.0,
            f64::MAX,
            f64::MIN,
            1e-300,
            -3.5e200,
            65504.0,
            -6.1e-5,
        ];
        let halves =
            arrow::compute::cast(&Float64Array::from(specials.clone()), &DataType::Float16)
                .unwrap();
        let halves = halves.as_primitive::<Float16Type>().values();
        for (i, &a) in specials.iter().enumerate() {
            let key = |x: f64| key64(x.to_bits() as i64);
            for (j, &b) in specials.iter().enumerate() {
                assert_eq!(key(a).cmp(&key(b)), a.total_cmp(&b), "{a} {b}");
                let (x, y) = (a as f32, b as f32);
                let k = |x: f32| key32(x.to_bits());
                assert_eq!(k(x).cmp(&k(y)), x.total_cmp(&y), "{x} {y}");
                let (p, q) = (halves[i], halves[j]);
                let k = |x: u16| key16(x);
                assert_eq!(
                    k(p.to_bits()).cmp(&k(q.to_bits())),
                    p.total_cmp(&q),
                    "{p} {q}"
                );
            }
            let back = values_of(&DataType::Float64, [Some(key(a))].into_iter()).unwrap();
            assert_eq!(
                back.as_primitive::<Float64Type>().value(0).to_bits(),
                a.to_bits()
            );
            let x = a as f32;
            let back = values_of(&DataType::Float32, [Some(key32(x.to_bits()))].into_iter());
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
        for (a, b) in [
            (0u64, 1u64),
            (u64::MAX - 1, u64::MAX),
            (1 << 63, (1 << 63) - 1),
        ] {
            assert_eq!(key_u64(a).cmp(&key_u64(b)), a.cmp(&b));
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
                assert_eq!(lo[g], key64(least.to_bits() as i64), "group {g}");
                assert_eq!(hi[g], key64(most.to_bits() as i64), "group {g}");
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
