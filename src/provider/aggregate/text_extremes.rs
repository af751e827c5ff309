//! `min`/`max` of a table's text column folded over its stored values
//! (`Blosc2Exec::with_raw_records`): each `U<n>` record (UTF-32) or `utf8` / `vlstring`
//! item (UTF-8) is compared with the least (`min`) or greatest (`max`) so far as the
//! text it converts to, and only the winner is converted at the end. The usual plan
//! converted every record, or checked every item and built a string array, for
//! DataFusion's `min`/`max`: about twice the column's decode for a `<U12` column.
//!
//! Items are compared as their bytes (UTF-8's order is the order of code points); each
//! batch's items are first checked to be UTF-8, as converting them would. A dictionary
//! column (`min(CAST(category AS Utf8))`, as DataFusion coerces it) is folded over the
//! values its codes name in each batch: a pass over the codes, then one comparison per
//! value named, where DataFusion's plan cast every row to a string.
//!
//! The order is DataFusion's order of the converted strings (their UTF-8 bytes, which is
//! the order of their code points). A record compares as its units in turn, each taken as
//! the character it converts to (`crate::arrow_reader::utf32`: an invalid unit becomes
//! U+FFFD), its NUL padding as NUL units. Trailing NULs are no part of a converted
//! string, and a NUL unit is less than any other, so a string that is a prefix of another
//! compares less either way. Rows that are null (by the column's mask, or
//! whose text is its sentinel) are left out, as DataFusion leaves out nulls.

use crate::array::dtype::{DType, Endian};
use crate::arrow_reader::reader::RawText;
use crate::arrow_reader::text_match::equal_records;
use crate::arrow_reader::utf32::{character_of, push_utf32};
use crate::provider::exec::RawTextColumn;
use arrow::array::{Array, ArrayRef, AsArray, DictionaryArray};
use arrow::datatypes::{DataType, Int32Type};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result};
use std::cmp::Ordering;

/// Where a text column's `min`/`max` reads its values.
#[derive(Debug, Clone, PartialEq)]
pub enum TextSource {
    /// Its stored records or items, which the scan yields raw
    /// (`Blosc2Exec::with_raw_records`).
    Raw(RawTextColumn),
    /// A dictionary column (`Dictionary(Int32, text)`, as the scan yields it): the
    /// values its codes name.
    Dictionary,
}

/// How a text column's values arrive.
#[derive(Debug, Clone, Copy)]
enum Layout {
    /// `U<n>` records (`FixedSizeBinary`) of `width` bytes (`4n`), big-endian units when
    /// `big`.
    Utf32 { width: usize, big: bool },
    /// `utf8` / `vlstring` items (`LargeBinary`), not yet checked to be UTF-8.
    Utf8,
    /// Int32 codes over text values (a `DictionaryArray`).
    Dictionary,
}

/// The least (`min`) or greatest (`max`) value of a text column folded so far, as
/// stored.
#[derive(Debug, Clone)]
pub struct TextExtreme {
    layout: Layout,
    /// `Less` for the least value, `Greater` for the greatest.
    way: Ordering,
    /// The stored value whose text is the column's sentinel (NULL), where one can be.
    null_value: Option<Vec<u8>>,
    /// The least or greatest value so far.
    best: Option<Vec<u8>>,
    /// The column, for errors.
    what: String,
}

impl TextExtreme {
    /// The empty fold of the greatest (`max`) or least value of a column read as
    /// `source`; `None` for `U<n>` records whose sentinel holds U+FFFD (records with
    /// invalid units convert to it too, so those rows could not be told from the others).
    pub fn new(source: &TextSource, max: bool) -> Option<Self> {
        let way = if max {
            Ordering::Greater
        } else {
            Ordering::Less
        };
        let col = match source {
            TextSource::Raw(col) => col,
            TextSource::Dictionary => {
                return Some(TextExtreme {
                    layout: Layout::Dictionary,
                    way,
                    null_value: None,
                    best: None,
                    what: "a dictionary column".into(),
                });
            }
        };
        let layout = match &col.raw {
            RawText::Utf32(DType::Unicode { chars, endian }) => Layout::Utf32 {
                width: chars * 4,
                big: *endian == Endian::Big,
            },
            RawText::Utf32(_) => return None,
            RawText::Utf8 => Layout::Utf8,
        };
        let null_value = match (&col.null_text, layout) {
            (None, _) | (_, Layout::Dictionary) => None,
            (Some(t), Layout::Utf8) => Some(t.as_bytes().to_vec()),
            // The record that converts to it, if one does.
            (Some(t), Layout::Utf32 { width, big }) => {
                equal_records(std::slice::from_ref(t), width / 4, big)?.pop()
            }
        };
        Some(TextExtreme {
            layout,
            way,
            null_value,
            best: None,
            what: col.what.clone(),
        })
    }

    /// Folds the raw values of `col` (this fold's column, a piece of a batch) into the
    /// least or greatest so far.
    ///
    /// # Errors
    /// A column that is not this fold's raw values; a `utf8` / `vlstring` item that is not
    /// UTF-8 (as any scan of the column fails).
    pub fn add(&mut self, col: &ArrayRef) -> Result<()> {
        let wrong = || {
            DataFusionError::Internal(format!(
                "Blosc2 text min/max: {}: the column is not its raw values",
                self.what
            ))
        };
        let nulls = col.nulls().filter(|b| b.null_count() > 0);
        let null_value = self.null_value.as_deref();
        // A row may stand in for the fold only when it is no null.
        let counts =
            |i: usize, v: &[u8]| !nulls.is_some_and(|b| b.is_null(i)) && null_value != Some(v);
        let way = self.way;
        let found = match self.layout {
            Layout::Utf32 { width, big } => {
                let records = (col.as_fixed_size_binary_opt())
                    .filter(|r| r.value_length() as usize == width)
                    .ok_or_else(wrong)?;
                let n = records.len();
                if n == 0 || width == 0 {
                    return Ok(());
                }
                let data = &records.value_data()[..n * width];
                let records = data.chunks_exact(width).enumerate();
                let first = |r: &[u8]| character_of(&r[..4], big);
                let order = |a: &[u8], b: &[u8]| compare(a, b, big);
                best(records, self.best.as_deref(), way, first, order, counts).map(<[u8]>::to_vec)
            }
            Layout::Utf8 => {
                let items = col.as_binary_opt::<i64>().ok_or_else(wrong)?;
                check_utf8(items.value_offsets(), items.values()).map_err(|at| {
                    DataFusionError::Execution(format!(
                        "{}: an item is not UTF-8 (at byte {at} of the batch's items)",
                        self.what
                    ))
                })?;
                let offsets = items.value_offsets();
                let data = items.values();
                let items = (offsets.windows(2).enumerate())
                    .map(|(i, w)| (i, &data[w[0] as usize..w[1] as usize]));
                let first = |v: &[u8]| v.first().copied();
                best(items, self.best.as_deref(), way, first, <[u8]>::cmp, counts)
                    .map(<[u8]>::to_vec)
            }
            Layout::Dictionary => {
                let dict = col.as_dictionary_opt::<Int32Type>().ok_or_else(wrong)?;
                let seen = used_codes(dict).ok_or_else(wrong)?;
                let so_far = self.best.as_deref();
                let values = dict.values();
                let used = seen.iter().enumerate().filter(|(_, s)| **s).map(|(i, _)| i);
                match values.data_type() {
                    DataType::Utf8 => {
                        let v = values.as_string::<i32>();
                        best_text(used.map(|i| v.is_valid(i).then(|| v.value(i))), so_far, way)
                    }
                    DataType::LargeUtf8 => {
                        let v = values.as_string::<i64>();
                        best_text(used.map(|i| v.is_valid(i).then(|| v.value(i))), so_far, way)
                    }
                    DataType::Utf8View => {
                        let v = values.as_string_view();
                        best_text(used.map(|i| v.is_valid(i).then(|| v.value(i))), so_far, way)
                    }
                    _ => return Err(wrong()),
                }
            }
        };
        if found.is_some() {
            self.best = found;
        }
        Ok(())
    }

    /// The least or greatest text folded, as a one-row array of type `t` (null when no
    /// row counted).
    ///
    /// # Errors
    /// A cast to `t` that fails (the rule admits string types only).
    pub fn result(&self, t: &arrow::datatypes::DataType) -> Result<ArrayRef> {
        let text = self.best.as_deref().map(|v| match self.layout {
            Layout::Utf32 { big, .. } => {
                let mut out = Vec::with_capacity(v.len());
                push_utf32(v, big, &mut out);
                // `push_utf32` writes UTF-8 (an invalid unit as U+FFFD's).
                String::from_utf8_lossy(&out).into_owned()
            }
            // Checked when folded, or taken from a string array.
            Layout::Utf8 | Layout::Dictionary => String::from_utf8_lossy(v).into_owned(),
        });
        ScalarValue::Utf8(text).cast_to(t)?.to_array()
    }
}

/// The value of `values` (row index and stored bytes) furthest in direction `way`
/// (`Less`: least) among those `counts` admits, when it goes beyond `so_far`; `None`
/// when none does. Values are ordered by `order`, and `first` (a key of their start
/// that `order` agrees with) is compared first: most values are decided by it. Ties
/// keep the earlier value. `counts` runs only on a value that would win, so a null's
/// bytes are compared too and it turns them away.
fn best<'a, K: Ord + Copy>(
    values: impl Iterator<Item = (usize, &'a [u8])>,
    so_far: Option<&'a [u8]>,
    way: Ordering,
    first: impl Fn(&[u8]) -> K,
    order: impl Fn(&[u8], &[u8]) -> Ordering,
    counts: impl Fn(usize, &[u8]) -> bool,
) -> Option<&'a [u8]> {
    let mut found = None;
    let mut current = so_far.map(|b| (b, first(b)));
    for (i, v) in values {
        let k = first(v);
        if let Some((b, f)) = current {
            match k.cmp(&f) {
                o if o == way.reverse() => continue,
                Ordering::Equal if order(v, b) != way => continue,
                _ => {}
            }
        }
        if counts(i, v) {
            (found, current) = (Some(v), Some((v, k)));
        }
    }
    found
}

/// The bytes of the text of `texts` (nulls left out) furthest in direction `way`, when
/// it goes beyond `so_far`.
fn best_text<'a>(
    texts: impl Iterator<Item = Option<&'a str>>,
    so_far: Option<&'a [u8]>,
    way: Ordering,
) -> Option<Vec<u8>> {
    let texts = texts.flatten().map(str::as_bytes).enumerate();
    let first = |v: &[u8]| v.first().copied();
    best(texts, so_far, way, first, <[u8]>::cmp, |_, _| true).map(<[u8]>::to_vec)
}

/// Which values of `dict`'s dictionary its non-null codes name; `None` for a code
/// outside the dictionary (the scan makes none).
fn used_codes(dict: &DictionaryArray<Int32Type>) -> Option<Vec<bool>> {
    let mut seen = vec![false; dict.values().len()];
    let keys = dict.keys();
    let mut mark = |k: i32| -> Option<()> {
        *seen.get_mut(usize::try_from(k).ok()?)? = true;
        Some(())
    };
    match keys.nulls().filter(|n| n.null_count() > 0) {
        Some(n) => n.valid_indices().try_for_each(|i| mark(keys.value(i)))?,
        None => keys.values().iter().try_for_each(|&k| mark(k))?,
    }
    Some(seen)
}

/// Whether the items at `offsets` of `data` are each UTF-8: the bytes they span are, and
/// each item starts on a character (not a continuation byte), so no character spans two
/// items. `Err` gives the offset of the first byte found wrong.
pub(super) fn check_utf8(offsets: &[i64], data: &[u8]) -> std::result::Result<(), usize> {
    let (Some(&first), Some(&last)) = (offsets.first(), offsets.last()) else {
        return Ok(());
    };
    let (first, last) = (first as usize, last as usize);
    let span = data.get(first..last).ok_or(first)?;
    if let Err(e) = std::str::from_utf8(span) {
        return Err(first + e.valid_up_to());
    }
    // A continuation byte is 0b10xxxxxx.
    match offsets
        .iter()
        .map(|&o| o as usize)
        .find(|&o| o < last && data[o] & 0xC0 == 0x80)
    {
        Some(o) => Err(o),
        None => Ok(()),
    }
}

/// Records `a` and `b` (of one width, big-endian units when `big`) compared as the
/// texts they convert to.
fn compare(a: &[u8], b: &[u8], big: bool) -> Ordering {
    let chars = |r| <[u8]>::chunks_exact(r, 4).map(move |c| character_of(c, big));
    chars(a).cmp(chars(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{FixedSizeBinaryArray, LargeBinaryArray, StringArray};
    use arrow::buffer::{Buffer, NullBuffer};
    use arrow::datatypes::DataType;
    use std::sync::Arc;

    /// Random draws below a bound (xorshift), from `x`.
    fn draws(mut x: u64) -> impl FnMut(usize) -> usize {
        move |m| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % m as u64) as usize
        }
    }

    /// Folds `col` into a `min` and a `max` of `source` in pieces of random lengths
    /// (as the node folds cache-sized slices), each result in type `t`, and checks them
    /// against Arrow's `min_string`/`max_string` of `want` (the strings the scan gives,
    /// null where a row is).
    fn check_folds(
        source: &TextSource,
        col: &ArrayRef,
        want: &StringArray,
        t: &DataType,
        next: &mut impl FnMut(usize) -> usize,
        what: &str,
    ) {
        let mut folds = [false, true].map(|max| TextExtreme::new(source, max).expect(what));
        let n = col.len();
        let mut at = 0;
        while at < n {
            let len = (1 + next(20)).min(n - at);
            for f in &mut folds {
                f.add(&col.slice(at, len)).unwrap();
            }
            at += len;
        }
        let wanted = [
            arrow::compute::min_string(want),
            arrow::compute::max_string(want),
        ];
        for (f, want) in folds.iter().zip(wanted) {
            let got = arrow::compute::cast(&f.result(t).unwrap(), &DataType::Utf8).unwrap();
            let got = got.as_string::<i32>();
            assert_eq!(got.is_valid(0).then(|| got.value(0)), want, "{what}");
        }
    }

    /// Random records of 3 units (ASCII letters, NULs, U+6100, astral, surrogate and
    /// out-of-range units), both byte orders, in pieces, with a mask and a sentinel (the
    /// greatest text or the least, in many rows): the fold's min and max are Arrow's
    /// `min_string`/`max_string` of the converted strings with those rows null.
    #[test]
    fn extremes_are_those_of_the_converted_strings() {
        let units = [
            0u32, 0x61, 0x62, 0x7A, 0x6100, 0x1F600, 0xD800, 0x110000, 0xFFFD,
        ];
        let mut next = draws(0x9E37_79B9_7F4A_7C15);
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
                let source = TextSource::Raw(col);
                let records: ArrayRef = Arc::new(records);
                let what = format!("round {round}, big {big}");
                check_folds(
                    &source,
                    &records,
                    &masked,
                    &DataType::Utf8,
                    &mut next,
                    &what,
                );
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
        assert!(TextExtreme::new(&TextSource::Raw(col("a\u{FFFD}")), false).is_none());
        assert_eq!(
            TextExtreme::new(&TextSource::Raw(col("abc")), false)
                .unwrap()
                .null_value,
            None
        );
        assert_eq!(
            TextExtreme::new(&TextSource::Raw(col("a\0")), false)
                .unwrap()
                .null_value,
            None
        );
        assert_eq!(
            TextExtreme::new(&TextSource::Raw(col("a")), false)
                .unwrap()
                .null_value,
            Some(vec![0x61, 0, 0, 0, 0, 0, 0, 0])
        );
    }

    /// UTF-8 items (empty, ASCII, two-, three- and four-byte letters, NUL), in pieces,
    /// with nulls and the sentinel `b` in some rounds: the fold's min and max are Arrow's
    /// `min_string`/`max_string` with those rows null. Items that are not UTF-8, or that
    /// split a letter between them, are an error.
    #[test]
    fn item_extremes_are_those_of_the_strings() {
        let words = [
            "",
            "a",
            "b",
            "ab",
            "a\0",
            "é",
            "ñandú",
            "日本",
            "😀",
            "b\u{FFFD}",
            "zz",
        ];
        let mut next = draws(0x2545_F491_4F6C_DD1D);
        for round in 0..60 {
            let n = 1 + next(40);
            let values: Vec<Option<&str>> = (0..n)
                .map(|_| (next(6) > 0).then(|| words[next(words.len())]))
                .collect();
            let items: ArrayRef = Arc::new(LargeBinaryArray::from_iter(
                values.iter().map(|v| v.map(str::as_bytes)),
            ));
            let sentinel = (round % 2 == 0).then(|| "b".to_string());
            let col = RawTextColumn {
                raw: RawText::Utf8,
                null_text: sentinel.clone(),
                what: "test".into(),
            };
            let masked: StringArray = values
                .iter()
                .map(|v| v.filter(|v| sentinel.as_deref() != Some(*v)))
                .collect();
            let what = format!("round {round}");
            let t = DataType::Utf8View;
            check_folds(&TextSource::Raw(col), &items, &masked, &t, &mut next, &what);
        }
        let col = RawTextColumn {
            raw: RawText::Utf8,
            null_text: None,
            what: "t.b2d: column \"s\"".into(),
        };
        // "é" is C3 A9: split between two items, each item is no UTF-8, though the bytes
        // together are.
        for bad in [
            vec![&b"ok"[..], b"\xFF"],
            vec![b"a\xC3", b"\xA9b"],
            vec![b"\xA9"],
        ] {
            let items: ArrayRef = Arc::new(LargeBinaryArray::from_iter_values(bad.iter().copied()));
            let mut fold = TextExtreme::new(&TextSource::Raw(col.clone()), true).expect("items");
            let e = fold.add(&items).unwrap_err().to_string();
            assert!(e.contains("column \"s\": an item is not UTF-8"), "{e}");
        }
    }

    /// Dictionary arrays (codes with nulls, whose codes name the least and greatest
    /// values; a null value; values as `Utf8`, `LargeUtf8` and `Utf8View`), in pieces: the fold's min and max are Arrow's
    /// `min_string`/`max_string` of the arrays cast to text.
    #[test]
    fn dictionary_extremes_are_those_of_the_values_named() {
        use arrow::array::{Int32Array, LargeStringArray, StringViewArray};
        let words = [
            Some("b"),
            Some("ab"),
            None,
            Some("日本"),
            Some(""),
            Some("zz"),
            Some("é"),
            // Named only by the codes under nulls: the least and the greatest.
            Some("\0"),
            Some("\u{10FFFF}"),
        ];
        let mut next = draws(0x1234_5678_9ABC_DEF1);
        for round in 0..30 {
            let values: ArrayRef = match round % 3 {
                0 => Arc::new(StringArray::from(words.to_vec())),
                1 => Arc::new(LargeStringArray::from(words.to_vec())),
                _ => Arc::new(StringViewArray::from(words.to_vec())),
            };
            let n = 1 + next(30);
            let codes: Vec<i32> = (0..n).map(|_| next(words.len()) as i32).collect();
            let valid: Vec<bool> = (0..n).map(|i| codes[i] < 7 && next(5) > 0).collect();
            let keys = Int32Array::new(codes.into(), Some(NullBuffer::from(valid)));
            let dict: ArrayRef = Arc::new(DictionaryArray::new(keys, values));
            let cast = arrow::compute::cast(&dict, &DataType::Utf8).unwrap();
            let want = cast.as_string::<i32>();
            let what = format!("round {round}");
            let t = DataType::Utf8;
            check_folds(&TextSource::Dictionary, &dict, want, &t, &mut next, &what);
        }
    }
}
