//! The groups of an integer column's values (`GROUP BY qty` over a table's `int32`
//! column, `GROUP BY value` over an integer array), numbered as the values come. A value
//! in `0..DENSE_INTS` finds its group in a table indexed by the value itself (grown to the
//! largest such value seen); any other value through a hash map keyed with a seed of the
//! process's, so that chosen values cannot make one chain of it. Group 0 is the null
//! rows'.

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, UInt64Array};
use arrow::buffer::NullBuffer;
use arrow::datatypes::{
    DataType, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type, UInt32Type,
    UInt64Type,
};
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

/// Whether the values of a key of type `t` are numbered here: integers, and timestamps,
/// dates and 64-bit times as the integers they hold (their key column is cast back).
pub fn supported(t: &DataType) -> bool {
    t.is_integer()
        || matches!(
            t,
            DataType::Timestamp(..) | DataType::Date32 | DataType::Date64 | DataType::Time64(_)
        )
}

/// Values below this (and not negative) are looked up by index: 16 MiB of table at most.
const DENSE_INTS: u64 = 1 << 22;

/// The groups of the values of an integer column.
#[derive(Debug, Default)]
pub struct IntGroups {
    /// The group of each value below its length (0: none yet).
    dense: Vec<u32>,
    /// The group of the other values (and of any whose group does not fit a `u32`).
    other: HashMap<i64, u64, SeededInts>,
    /// The value of groups `1..`.
    values: Vec<i64>,
    /// The last value looked up in `other`, and its group (0: none yet): keys that come
    /// in runs (`date_trunc('day', t)` over rows in time order) skip the hash map.
    last: (i64, i64),
}

impl IntGroups {
    /// How many groups: the null group and one per distinct value so far.
    pub fn groups(&self) -> usize {
        1 + self.values.len()
    }

    /// Replaces `out` with the group of each row of `col`, adding the groups of values
    /// not seen before; `None` when `col` is not of a type [`supported`] takes. A `uint64`
    /// value is kept as the `i64` of its bits (the same value then gets the same group).
    pub fn map(&mut self, col: &ArrayRef, out: &mut Vec<i64>) -> Option<()> {
        out.clear();
        out.reserve(col.len());
        // Temporal values are numbered as the integers they hold.
        let col = &match col.data_type() {
            t if !t.is_integer() && supported(t) => {
                arrow::compute::cast(col, &DataType::Int64).ok()?
            }
            _ => std::sync::Arc::clone(col),
        };
        macro_rules! of_type {
            ($($t:ty),*) => {$(
                if let Some(a) = col.as_primitive_opt::<$t>() {
                    self.map_values(a.values().iter().map(|&v| v as i64), a.nulls(), out);
                    return Some(());
                }
            )*};
        }
        of_type!(
            Int64Type, Int32Type, Int16Type, Int8Type, UInt64Type, UInt32Type, UInt16Type,
            UInt8Type
        );
        None
    }

    fn map_values(
        &mut self,
        values: impl Iterator<Item = i64>,
        nulls: Option<&NullBuffer>,
        out: &mut Vec<i64>,
    ) {
        match nulls.filter(|n| n.null_count() > 0) {
            None => out.extend(values.map(|v| self.of(v))),
            Some(n) => out.extend(values.zip(n.iter()).map(|(v, valid)| match valid {
                true => self.of(v),
                false => 0,
            })),
        }
    }

    /// The group of value `v`, given one if it has none.
    #[inline(always)]
    fn of(&mut self, v: i64) -> i64 {
        // A negative value is past any table's end as a `u64`.
        match usize::try_from(v as u64)
            .ok()
            .and_then(|i| self.dense.get(i))
        {
            Some(&g) if g != 0 => i64::from(g),
            _ if self.last.1 != 0 && self.last.0 == v => self.last.1,
            _ => {
                let g = self.other_or_new(v);
                self.last = (v, g);
                g
            }
        }
    }

    /// The group of value `v` from the hash map, or a new one.
    #[inline(never)]
    fn other_or_new(&mut self, v: i64) -> i64 {
        if let Some(&g) = self.other.get(&v) {
            return g as i64;
        }
        self.values.push(v);
        let g = self.values.len() as u64;
        match u32::try_from(g) {
            Ok(small) if (v as u64) < DENSE_INTS => {
                let i = v as usize;
                if i >= self.dense.len() {
                    self.dense.resize((i + 1).next_power_of_two().max(64), 0);
                }
                self.dense[i] = small;
            }
            _ => {
                self.other.insert(v, g);
            }
        }
        g as i64
    }

    /// The values of `groups` (null for group 0), as `UInt64` for a key of that type
    /// (from the bits [`IntGroups::map`] kept), else as `Int64`.
    pub fn column(&self, groups: &[usize], key_type: &DataType) -> ArrayRef {
        let value = |g: usize| g.checked_sub(1).and_then(|i| self.values.get(i).copied());
        let values = groups.iter().map(|&g| value(g));
        match key_type {
            DataType::UInt64 => {
                std::sync::Arc::new(UInt64Array::from_iter(values.map(|v| v.map(|v| v as u64))))
            }
            _ => std::sync::Arc::new(Int64Array::from_iter(values)),
        }
    }
}

/// Hashes of `i64` keys: one multiplication and a fold, over the key mixed with a seed
/// drawn once per process.
#[derive(Debug, Clone, Copy)]
struct SeededInts(u64);

impl Default for SeededInts {
    fn default() -> Self {
        static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
        let seed =
            SEED.get_or_init(|| std::collections::hash_map::RandomState::new().hash_one(0u64));
        SeededInts(*seed | 1)
    }
}

impl BuildHasher for SeededInts {
    type Hasher = IntHasher;

    fn build_hasher(&self) -> IntHasher {
        IntHasher {
            seed: self.0,
            hash: 0,
        }
    }
}

/// The hasher of [`SeededInts`].
struct IntHasher {
    seed: u64,
    hash: u64,
}

impl Hasher for IntHasher {
    fn finish(&self) -> u64 {
        self.hash
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b) ^ self.hash.rotate_left(8));
        }
    }

    fn write_i64(&mut self, v: i64) {
        self.write_u64(v as u64);
    }

    fn write_u64(&mut self, v: u64) {
        let x = u128::from(v ^ self.seed) * 0x9e37_79b9_7f4a_7c15;
        self.hash = (x as u64) ^ ((x >> 64) as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int32Array, UInt8Array};
    use std::sync::Arc;

    /// Small, large, negative and null values, over two batches: each distinct value one
    /// group, in the order first seen, the same group in both batches, and its value back.
    #[test]
    fn values_get_one_group_each() {
        let first: ArrayRef = Arc::new(Int32Array::from(vec![
            Some(3),
            Some(-7),
            None,
            Some(3),
            Some(i32::MAX),
            Some(0),
            Some(5_000_000),
            Some(-7),
        ]));
        let second: ArrayRef = Arc::new(Int32Array::from(vec![Some(0), Some(i32::MIN), Some(3)]));
        let mut g = IntGroups::default();
        let mut out = Vec::new();
        g.map(&first, &mut out).unwrap();
        assert_eq!(out, [1, 2, 0, 1, 3, 4, 5, 2]);
        g.map(&second, &mut out).unwrap();
        assert_eq!(out, [4, 6, 1]);
        assert_eq!(g.groups(), 7);
        let keys = g.column(&[0, 1, 2, 3, 4, 5, 6], &DataType::Int64);
        let keys = keys.as_primitive::<Int64Type>();
        let want = [
            None,
            Some(3),
            Some(-7),
            Some(i32::MAX as i64),
            Some(0),
            Some(5_000_000),
            Some(i32::MIN as i64),
        ];
        assert_eq!(keys.iter().collect::<Vec<_>>(), want);
    }

    /// Every `u8` value in a shuffled order, and a column type it does not take.
    #[test]
    fn every_byte_and_other_types() {
        let values: Vec<u8> = (0..=255u8).map(|i| i.wrapping_mul(167)).collect();
        let col: ArrayRef = Arc::new(UInt8Array::from(values.clone()));
        let mut g = IntGroups::default();
        let mut out = Vec::new();
        g.map(&col, &mut out).unwrap();
        assert_eq!(out, (1..=256).collect::<Vec<i64>>());
        let keys = g.column(&(1..=256).collect::<Vec<_>>(), &DataType::Int64);
        let keys: Vec<i64> = keys.as_primitive::<Int64Type>().values().to_vec();
        assert_eq!(keys, values.iter().map(|&v| v as i64).collect::<Vec<_>>());
        let floats: ArrayRef = Arc::new(arrow::array::Float64Array::from(vec![1.0]));
        assert!(g.map(&floats, &mut out).is_none());
    }

    /// `uint64` values past `i64::MAX` (negative as bits) beside small ones: one group
    /// each, and their values back as `UInt64`.
    #[test]
    fn uint64_values_past_i64() {
        let values = [u64::MAX, 5, (1 << 63) + 5, 5, 0, 1 << 63, u64::MAX];
        let col: ArrayRef = Arc::new(UInt64Array::from(values.to_vec()));
        let mut g = IntGroups::default();
        let mut out = Vec::new();
        g.map(&col, &mut out).unwrap();
        assert_eq!(out, [1, 2, 3, 2, 4, 5, 1]);
        let keys = g.column(&[0, 1, 2, 3, 4, 5], &DataType::UInt64);
        let keys = keys.as_primitive::<UInt64Type>();
        let want = [
            None,
            Some(u64::MAX),
            Some(5),
            Some((1 << 63) + 5),
            Some(0),
            Some(1 << 63),
        ];
        assert_eq!(keys.iter().collect::<Vec<_>>(), want);
    }

    /// Timestamps (large values, looked up in the hash map) in runs, a run broken by a
    /// small value and by a null, a value coming back after others, and dates: each
    /// distinct value one group wherever it comes, and the values back in their type.
    #[test]
    fn temporal_values_in_runs() {
        use arrow::array::{Date32Array, TimestampMillisecondArray};
        let day = 86_400_000i64;
        let t = |d: i64| Some(1_700_000_000_000 + d * day);
        let values = vec![
            t(0),
            t(0),
            Some(5),
            t(0),
            t(1),
            t(1),
            None,
            t(1),
            t(0),
            t(2),
        ];
        let col: ArrayRef =
            Arc::new(TimestampMillisecondArray::from(values).with_timezone("+01:00"));
        let mut g = IntGroups::default();
        let mut out = Vec::new();
        g.map(&col, &mut out).unwrap();
        assert_eq!(out, [1, 1, 2, 1, 3, 3, 0, 3, 1, 4]);
        let key_type = col.data_type().clone();
        let keys = arrow::compute::cast(&g.column(&[0, 1, 2, 3, 4], &key_type), &key_type);
        let want: ArrayRef = Arc::new(
            TimestampMillisecondArray::from(vec![None, t(0), Some(5), t(1), t(2)])
                .with_timezone("+01:00"),
        );
        assert_eq!(&keys.unwrap(), &want);
        let dates: ArrayRef = Arc::new(Date32Array::from(vec![19_000, -3, 19_000, 19_001]));
        let mut g = IntGroups::default();
        g.map(&dates, &mut out).unwrap();
        assert_eq!(out, [1, 2, 1, 3]);
        let keys =
            arrow::compute::cast(&g.column(&[1, 2, 3], &DataType::Date32), &DataType::Date32);
        let want: ArrayRef = Arc::new(Date32Array::from(vec![19_000, -3, 19_001]));
        assert_eq!(&keys.unwrap(), &want);
        for t in [col.data_type(), &DataType::Date32, &DataType::Int8] {
            assert!(supported(t), "{t}");
        }
        for t in [
            DataType::Float64,
            DataType::Utf8,
            DataType::Time32(arrow::datatypes::TimeUnit::Second),
        ] {
            assert!(!supported(&t), "{t}");
        }
    }
}
