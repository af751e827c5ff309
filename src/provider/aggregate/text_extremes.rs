//! `min`/`max` of a table's `U<n>` text column folded over its stored UTF-32 records
//! (`Blosc2Exec::with_raw_records`): each record is compared with the least and greatest
//! so far as the text it converts to, and only those two are converted at the end. The
//! usual plan converted every record to an Arrow string for DataFusion's `min`/`max`,
//! which cost about twice the column's decode.
//!
//! The order is DataFusion's order of the converted strings (their UTF-8 bytes, which is
//! the order of their code points). A record compares as its units in turn, each taken as
//! the character it converts to (`crate::arrow_reader::utf32`: an invalid unit becomes
//! U+FFFD), its NUL padding as NUL units. Trailing NULs are no part of a
//! converted string, and a NUL unit is less than any other, so a string that is a prefix
//! of another compares less either way. Rows that are null (by the column's mask, or
//! whose text is its sentinel) are left out, as DataFusion leaves out nulls.

use crate::array::dtype::{DType, Endian};
use crate::arrow_reader::reader::RawText;
use crate::arrow_reader::utf32::push_utf32;
use crate::provider::exec::RawTextColumn;
use arrow::array::{Array, ArrayRef, AsArray};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result};
use std::cmp::Ordering;

/// The least and greatest records of a `U<n>` column folded so far.
#[derive(Debug, Clone)]
pub struct TextExtremes {
    /// Record size in bytes (`4n`).
    width: usize,
    /// Big-endian units.
    big: bool,
    /// The record whose text is the column's sentinel (NULL), where one can be.
    null_record: Option<Vec<u8>>,
    /// The least record so far.
    lo: Option<Vec<u8>>,
    /// The greatest record so far.
    hi: Option<Vec<u8>>,
    /// The column, for errors.
    what: String,
}

impl TextExtremes {
    /// The empty fold of raw column `col`; `None` unless its records are UTF-32 (`U<n>`)
    /// and its sentinel, if any, is a text that no record with invalid units converts
    /// to (one holding U+FFFD is: those rows could not be told from the others).
    pub fn new(col: &RawTextColumn) -> Option<Self> {
        let RawText::Utf32(DType::Unicode { chars, endian }) = &col.raw else {
            return None;
        };
        let big = *endian == Endian::Big;
        let null_record = match &col.null_text {
            Some(t) if t.contains('\u{FFFD}') => return None,
            // No record converts to a text ending in NUL or longer than the records.
            Some(t) if t.ends_with('\0') || t.chars().count() > *chars => None,
            Some(t) => {
                let mut rec = Vec::with_capacity(chars * 4);
                for c in t.chars() {
                    let u = c as u32;
                    rec.extend_from_slice(&if big {
                        u.to_be_bytes()
                    } else {
                        u.to_le_bytes()
                    });
                }
                rec.resize(chars * 4, 0);
                Some(rec)
            }
            None => None,
        };
        Some(TextExtremes {
            width: chars * 4,
            big,
            null_record,
            lo: None,
            hi: None,
            what: col.what.clone(),
        })
    }

    /// Folds the records of `col` (the raw records of this fold's column, a piece of a
    /// batch) into the least and greatest so far.
    ///
    /// # Errors
    /// A column that is not records of this fold's width.
    pub fn add(&mut self, col: &ArrayRef) -> Result<()> {
        let records = (col.as_fixed_size_binary_opt())
            .filter(|r| r.value_length() as usize == self.width)
            .ok_or_else(|| {
                DataFusionError::Internal(format!(
                    "Blosc2 text min/max: {}: the column is not its raw records",
                    self.what
                ))
            })?;
        let n = records.len();
        if n == 0 || self.width == 0 {
            return Ok(());
        }
        let data = &records.value_data()[..n * self.width];
        let nulls = records.nulls().filter(|b| b.null_count() > 0);
        // A row may stand in for the fold only when it is no null.
        let counts = |i: usize, rec: &[u8]| {
            !nulls.is_some_and(|b| b.is_null(i)) && self.null_record.as_deref() != Some(rec)
        };
        let (width, big) = (self.width, self.big);
        let lo = best(data, width, big, self.lo.as_deref(), Ordering::Less, counts);
        let hi = best(
            data,
            width,
            big,
            self.hi.as_deref(),
            Ordering::Greater,
            counts,
        );
        if let Some(i) = lo {
            self.lo = Some(data[i * width..][..width].to_vec());
        }
        if let Some(i) = hi {
            self.hi = Some(data[i * width..][..width].to_vec());
        }
        Ok(())
    }

    /// The least (`max` false) or greatest text folded, as a one-row array of type
    /// `t` (null when no row counted).
    ///
    /// # Errors
    /// A cast to `t` that fails (the rule admits string types only).
    pub fn result(&self, max: bool, t: &arrow::datatypes::DataType) -> Result<ArrayRef> {
        let rec = if max { &self.hi } else { &self.lo };
        let text = rec.as_deref().map(|r| {
            let mut out = Vec::with_capacity(r.len());
            push_utf32(r, self.big, &mut out);
            // `push_utf32` writes UTF-8 (an invalid unit as U+FFFD's).
            String::from_utf8_lossy(&out).into_owned()
        });
        ScalarValue::Utf8(text).cast_to(t)?.to_array()
    }
}

/// The character unit `u` converts to: itself when it is a Unicode scalar value, else
/// U+FFFD.
#[inline(always)]
fn character(u: u32) -> u32 {
    if u < 0xD800 || (0xE000..=0x10FFFF).contains(&u) {
        u
    } else {
        0xFFFD
    }
}

/// Unit `i` of a record.
#[inline(always)]
fn unit(rec: &[u8], i: usize, big: bool) -> u32 {
    let b: [u8; 4] = rec[i * 4..i * 4 + 4].try_into().expect("4 bytes");
    if big {
        u32::from_be_bytes(b)
    } else {
        u32::from_le_bytes(b)
    }
}

/// Records `a` and `b` (of one width) compared as the texts they convert to.
fn compare(a: &[u8], b: &[u8], big: bool) -> Ordering {
    (0..a.len() / 4)
        .map(|i| character(unit(a, i, big)).cmp(&character(unit(b, i, big))))
        .find(|o| o.is_ne())
        .unwrap_or(Ordering::Equal)
}

/// The index of the record of `data` (records of `width` bytes) that is furthest in
/// direction `way` (`Less`: least) among those `counts` admits, when it goes beyond
/// `so_far`; `None` when none does. Ties keep the earlier record (they convert to equal
/// texts).
fn best(
    data: &[u8],
    width: usize,
    big: bool,
    so_far: Option<&[u8]>,
    way: Ordering,
    counts: impl Fn(usize, &[u8]) -> bool,
) -> Option<usize> {
    let mut found: Option<usize> = None;
    let mut current = so_far;
    // The current best's first character, compared before anything else: most records
    // are decided by it.
    let mut first = current.map(|r| character(unit(r, 0, big)));
    for (i, rec) in data.chunks_exact(width).enumerate() {
        let c = character(unit(rec, 0, big));
        if let Some(f) = first {
            if c.cmp(&f) == way.reverse() {
                continue;
            }
            if c == f && compare(rec, current.expect("a first char"), big) != way {
                continue;
            }
        }
        if counts(i, rec) {
            found = Some(i);
            current = Some(rec);
            first = Some(c);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{FixedSizeBinaryArray, StringArray};
    use arrow::buffer::{Buffer, NullBuffer};
    use arrow::datatypes::DataType;
    use std::sync::Arc;

    /// Random records of 3 units (ASCII letters, NULs, U+6100, astral, surrogate and
    /// out-of-range units), both byte orders, in pieces, with a mask and a sentinel (the
    /// greatest text or the least, in many rows): the
    /// fold's min and max are Arrow's `min_string`/`max_string` of the converted strings
    /// with those rows null.
    #[test]
    fn extremes_are_those_of_the_converted_strings() {
        let units = [
            0u32, 0x61, 0x62, 0x7A, 0x6100, 0x1F600, 0xD800, 0x110000, 0xFFFD,
        ];
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = |m: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % m as u64) as usize
        };
        for big in [false, true] {
            for round in 0..40 {
                let n = 1 + next(60);
                // Some rounds have a sentinel: the greatest text the units make, or the
                // empty one (the least), in about one row of four.
                let sentinel = match round % 3 {
                    0 => Some([0x1F600u32; 3]),
                    1 => Some([0u32; 3]),
                    _ => None,
                };
                let mut data = Vec::new();
                for _ in 0..n {
                    let row: [u32; 3] = match sentinel {
                        Some(s) if next(4) == 0 => s,
                        _ => std::array::from_fn(|_| units[next(units.len())]),
                    };
                    for u in row {
                        data.extend_from_slice(&if big {
                            u.to_be_bytes()
                        } else {
                            u.to_le_bytes()
                        });
                    }
                }
                let valid: Vec<bool> = (0..n).map(|_| next(5) > 0).collect();
                let nulls = (round % 2 == 0).then(|| NullBuffer::from(valid.clone()));
                let records = FixedSizeBinaryArray::try_new(
                    12,
                    Buffer::from_vec(data.clone()),
                    nulls.clone(),
                )
                .unwrap();
                let strings = crate::arrow_reader::utf32::utf32_to_arrow(&data, n, 12, 0, 3, big);
                let strings = strings.as_string::<i32>();
                let sentinel: Option<String> = sentinel.map(|s| {
                    let text = s
                        .iter()
                        .filter(|&&u| u != 0)
                        .map(|&u| char::from_u32(u).unwrap());
                    text.collect()
                });
                let col = RawTextColumn {
                    raw: RawText::Utf32(DType::Unicode {
                        chars: 3,
                        endian: if big { Endian::Big } else { Endian::Little },
                    }),
                    null_text: sentinel.clone(),
                    what: "test".into(),
                };
                let masked: StringArray = (0..n)
                    .map(|i| {
                        let v = strings.value(i);
                        let null = nulls.as_ref().is_some_and(|b| b.is_null(i))
                            || sentinel.as_deref() == Some(v);
                        (!null).then_some(v)
                    })
                    .collect();
                let mut fold = TextExtremes::new(&col).expect("U<3>");
                let arr: ArrayRef = Arc::new(records);
                // In pieces, as the node folds cache-sized slices.
                let mut at = 0;
                while at < n {
                    let len = (1 + next(20)).min(n - at);
                    fold.add(&arr.slice(at, len)).unwrap();
                    at += len;
                }
                let got = |max| {
                    let a = fold.result(max, &DataType::Utf8).unwrap();
                    let s = a.as_string::<i32>();
                    s.is_valid(0).then(|| s.value(0).to_string())
                };
                let want_min = arrow::compute::min_string(&masked).map(String::from);
                let want_max = arrow::compute::max_string(&masked).map(String::from);
                assert_eq!(got(false), want_min, "min, round {round}, big {big}");
                assert_eq!(got(true), want_max, "max, round {round}, big {big}");
            }
        }
    }

    /// Sentinels: one holding U+FFFD is refused; one no record converts to is none.
    #[test]
    fn sentinels_that_records_cannot_be_told_from_are_refused() {
        let col = |t: &str| RawTextColumn {
            raw: RawText::Utf32(DType::Unicode {
                chars: 2,
                endian: Endian::Little,
            }),
            null_text: Some(t.into()),
            what: "test".into(),
        };
        assert!(TextExtremes::new(&col("a\u{FFFD}")).is_none());
        assert_eq!(TextExtremes::new(&col("abc")).unwrap().null_record, None);
        assert_eq!(TextExtremes::new(&col("a\0")).unwrap().null_record, None);
        assert_eq!(
            TextExtremes::new(&col("a")).unwrap().null_record,
            Some(vec![0x61, 0, 0, 0, 0, 0, 0, 0])
        );
        let items = RawTextColumn {
            raw: RawText::Utf8,
            null_text: None,
            what: "test".into(),
        };
        assert!(TextExtremes::new(&items).is_none());
    }
}
