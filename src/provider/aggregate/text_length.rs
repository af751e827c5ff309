//! `length(t)` (`character_length`, `char_length`) of a table's text column, evaluated by
//! a fused aggregation over the column's stored records rather than its text: a `U<n>`
//! record's length is the number of its units up to the last that is not NUL (numpy
//! drops the trailing NULs; a unit that is no character becomes one U+FFFD), a UTF-8
//! item's is its number of bytes that do not continue a character, once the batch's items
//! are checked as UTF-8 as the scan checks them. Where the scan would convert every value
//! to text (8–12 ns per `<U12` value, then DataFusion's `character_length` walking it
//! character by character), this reads each record once, and no string array is built.
//!
//! A column is read as records only where nothing else the node evaluates, filters on or
//! aggregates reads it as text ([`from_records`]).

use super::arguments::replace_calls;
use super::text_extremes::check_utf8;
use crate::arrow_reader::reader::RawText;
use crate::arrow_reader::schema::is_big_endian;
use crate::arrow_reader::utf32::character_of;
use crate::provider::exec::RawTextColumn;
use arrow::array::{Array, ArrayRef, AsArray, PrimitiveArray};
use arrow::buffer::NullBuffer;
use arrow::datatypes::{
    ArrowNativeType, ArrowPrimitiveType, DataType, Int32Type, Int64Type, Schema,
};
use arrow::record_batch::RecordBatch;
use datafusion::common::{DataFusionError, Result};
use datafusion::logical_expr::ColumnarValue;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_expr::{PhysicalExpr, ScalarFunctionExpr};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// The length in characters of each row of a text column read as its stored records.
#[derive(Debug, Clone)]
pub struct RecordLength {
    /// The records' column in the batches evaluated.
    column: Column,
    text: RawTextColumn,
    /// `Int32` or `Int64`, as `character_length` of the column's text type returns.
    return_type: DataType,
}

impl PartialEq for RecordLength {
    fn eq(&self, other: &Self) -> bool {
        self.column == other.column
            && self.text.what == other.text.what
            && self.return_type == other.return_type
    }
}

impl Eq for RecordLength {}

impl Hash for RecordLength {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.column.hash(state);
        self.text.what.hash(state);
        self.return_type.hash(state);
    }
}

impl fmt::Display for RecordLength {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "character_length({} as records)", self.column)
    }
}

impl PhysicalExpr for RecordLength {
    fn data_type(&self, _input_schema: &Schema) -> Result<DataType> {
        Ok(self.return_type.clone())
    }

    fn nullable(&self, _input_schema: &Schema) -> Result<bool> {
        Ok(true)
    }

    fn evaluate(&self, batch: &RecordBatch) -> Result<ColumnarValue> {
        let col = batch.column(self.column.index());
        let lengths = match self.return_type {
            DataType::Int64 => Arc::new(lengths::<Int64Type>(col, &self.text)?) as ArrayRef,
            _ => Arc::new(lengths::<Int32Type>(col, &self.text)?) as ArrayRef,
        };
        Ok(ColumnarValue::Array(lengths))
    }

    fn children(&self) -> Vec<&Arc<dyn PhysicalExpr>> {
        vec![]
    }

    fn with_new_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn PhysicalExpr>>,
    ) -> Result<Arc<dyn PhysicalExpr>> {
        Ok(self)
    }

    fn fmt_sql(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The column `e` takes the length of, when it is `character_length` of a column.
fn length_of(e: &Arc<dyn PhysicalExpr>) -> Option<&Column> {
    let f = e.downcast_ref::<ScalarFunctionExpr>()?;
    match f.args() {
        [c] if f.name() == "character_length" => c.downcast_ref::<Column>(),
        _ => None,
    }
}

/// Rewrites the lengths of text columns in `evaluated` (the expressions the node
/// evaluates: arguments, a computed key, its filter; over `schema`, the scan's output
/// before any column is read raw) to [`RecordLength`]s of their records, for each column
/// whose records `raw_of` gives and that nothing else reads: not `elsewhere` (the
/// columns the node aggregates), nor the rest of `evaluated`. The columns to read as
/// records.
pub fn from_records(
    evaluated: &mut [Arc<dyn PhysicalExpr>],
    elsewhere: &[usize],
    schema: &Schema,
    raw_of: impl Fn(usize) -> Option<RawTextColumn>,
) -> Vec<usize> {
    // Each expression with every length of a column whose records are known rewritten,
    // to see what still reads those columns as text.
    let rewrite = |e: &Arc<dyn PhysicalExpr>, take: &dyn Fn(usize) -> Option<RawTextColumn>| {
        replace_calls(e, |x| {
            let c = length_of(x)?;
            let text = take(c.index())?;
            let return_type = x.data_type(schema).ok()?;
            matches!(return_type, DataType::Int32 | DataType::Int64).then(|| {
                Arc::new(RecordLength {
                    column: c.clone(),
                    text,
                    return_type,
                }) as Arc<dyn PhysicalExpr>
            })
        })
    };
    let mut candidates: Vec<usize> = Vec::new();
    let mut read_as_text: Vec<usize> = elsewhere.to_vec();
    for e in evaluated.iter() {
        let rewritten = rewrite(e, &raw_of);
        read_as_text.extend(collect_columns(&rewritten).iter().map(|c| c.index()));
        candidates.extend(collect_columns(e).iter().map(|c| c.index()));
    }
    candidates.sort_unstable();
    candidates.dedup();
    candidates.retain(|c| !read_as_text.contains(c) && raw_of(*c).is_some());
    if candidates.is_empty() {
        return candidates;
    }
    let take = |c: usize| match candidates.contains(&c) {
        true => raw_of(c),
        false => None,
    };
    for e in evaluated.iter_mut() {
        *e = rewrite(e, &take);
    }
    candidates
}

/// Why a raw column could not be read.
fn wrong(text: &RawTextColumn) -> DataFusionError {
    DataFusionError::Internal(format!(
        "fused aggregate: {}: a length's column is not its raw records",
        text.what
    ))
}

/// The lengths of the rows of `col`, the raw records of `text`: null where `col` is or
/// where the text is the column's `null_text`.
///
/// # Errors
/// A column that is not the raw records of `text`; a UTF-8 item that is not UTF-8, as
/// the scan refuses it; a length `T` does not hold.
fn lengths<T: ArrowPrimitiveType>(
    col: &ArrayRef,
    text: &RawTextColumn,
) -> Result<PrimitiveArray<T>> {
    let too_long = || DataFusionError::Execution(format!("{}: a text too long", text.what));
    let (values, null_text): (Vec<T::Native>, Vec<bool>) = match &text.raw {
        RawText::Utf32(dtype) => {
            let width = dtype.itemsize();
            let records = (col.as_fixed_size_binary_opt())
                .filter(|r| r.value_length() as usize == width && width % 4 == 0)
                .ok_or_else(|| wrong(text))?;
            // Every length is at most the units of a record.
            T::Native::from_usize(width / 4).ok_or_else(too_long)?;
            let data = &records.value_data()[..records.len() * width];
            let values = record_lengths::<T::Native>(data, width);
            let big = is_big_endian(dtype);
            let null_text = match &text.null_text {
                None => Vec::new(),
                Some(t) => {
                    let chars: Vec<u32> = t.chars().map(u32::from).collect();
                    let n = T::Native::from_usize(chars.len());
                    (data.chunks_exact(width).zip(&values))
                        .map(|(r, &l)| Some(l) == n && record_is(r, &chars, big))
                        .collect()
                }
            };
            (values, null_text)
        }
        RawText::Utf8 => {
            let items = col.as_binary_opt::<i64>().ok_or_else(|| wrong(text))?;
            let offsets = items.value_offsets();
            let (first, last) = (offsets[0] as usize, offsets[items.len()] as usize);
            let data = items.value_data();
            let all = data.get(first..last).ok_or_else(|| wrong(text))?;
            // Every length is at most the bytes of all items.
            T::Native::from_usize(all.len()).ok_or_else(too_long)?;
            let sizes = offsets.windows(2).map(|w| (w[1] - w[0]) as usize);
            let values = match all.is_ascii() {
                // A byte a character (and UTF-8 already).
                true => sizes.map(T::Native::usize_as).collect(),
                false => {
                    check_utf8(offsets, data).map_err(|at| {
                        DataFusionError::Execution(format!(
                            "{}: an item is not UTF-8 (at byte {at} of the batch's items)",
                            text.what
                        ))
                    })?;
                    item_lengths(all, offsets)
                }
            };
            let null_text = match &text.null_text {
                None => Vec::new(),
                Some(t) => (0..items.len())
                    .map(|i| items.value(i) == t.as_bytes())
                    .collect(),
            };
            (values, null_text)
        }
    };
    let nulls = match (
        col.nulls().filter(|n| n.null_count() > 0),
        null_text.is_empty(),
    ) {
        (nulls, true) => nulls.cloned(),
        (nulls, false) => {
            Some(NullBuffer::from_iter((0..col.len()).map(|i| {
                !null_text[i] && nulls.is_none_or(|n| n.is_valid(i))
            })))
        }
    };
    Ok(PrimitiveArray::<T>::new(values.into(), nulls))
}

/// The length in characters of each item `all[offsets[i] - offsets[0]..][..size]`, UTF-8:
/// its bytes less those that continue a character. Those are counted once for the
/// whole batch, 8 bytes a word, into a running count per word, from which each item's
/// is two lookups and two masked words: no loop per item (items of a few bytes each
/// cost their loops' setup: 28 % of a query taking `avg(length(text))` over items of 7
/// bytes, counted item by item).
fn item_lengths<N: ArrowNativeType>(all: &[u8], offsets: &[i64]) -> Vec<N> {
    // The bytes as words, padded with one whole word of zeros (no continuation).
    let mut pieces = all.chunks_exact(8);
    let mut words: Vec<u64> = (&mut pieces)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect();
    let mut last = [0u8; 8];
    last[..pieces.remainder().len()].copy_from_slice(pieces.remainder());
    words.extend([u64::from_le_bytes(last), 0]);
    // A continuation byte is `10xxxxxx`: its top bit set, the next one clear (`x << 1`
    // brings each byte's bit 6 under its bit 7; what crosses into the next byte lands
    // on its bit 0, masked off). Those top bits, moved to each byte's bit 0, are summed
    // into the top byte by one product (`count_ones` without a CPU's `popcnt` is a
    // dozen instructions; this binary targets any x86_64).
    let continuations = |x: u64| x & !(x << 1) & 0x8080_8080_8080_8080;
    let count = |t: u64| (t >> 7).wrapping_mul(0x0101_0101_0101_0101) >> 56;
    // Per word, the continuation bytes before it.
    let mut before = Vec::with_capacity(words.len());
    let mut running = 0u64;
    for &w in &words {
        before.push(running);
        running += count(continuations(w));
    }
    let first = offsets.first().copied().unwrap_or(0);
    // The continuation bytes among the first `o` bytes.
    let counted = |o: usize| {
        let (at, within) = (o / 8, o % 8);
        let below = (1u64 << (8 * within)) - 1;
        before[at] + count(continuations(words[at]) & below)
    };
    (offsets.windows(2))
        .map(|w| {
            let (a, b) = ((w[0] - first) as usize, (w[1] - first) as usize);
            N::usize_as(b - a - (counted(b) - counted(a)) as usize)
        })
        .collect()
}

/// The length of each `U<n>` record of `width` bytes in `data`: its number of units up
/// to its last that is not NUL. Records of up to 32 units are read as fixed windows
/// ([`window_lengths`]), the others unit pair by unit pair ([`units_to_last`]).
fn record_lengths<N: ArrowNativeType>(data: &[u8], width: usize) -> Vec<N> {
    match width / 4 {
        0..=4 => window_lengths::<N, 4>(data, width),
        5..=8 => window_lengths::<N, 8>(data, width),
        9..=16 => window_lengths::<N, 16>(data, width),
        17..=32 => window_lengths::<N, 32>(data, width),
        _ => (data.chunks_exact(width))
            .map(|r| N::usize_as(units_to_last(r)))
            .collect(),
    }
}

/// [`record_lengths`] of records of at most `W` units, each read as a window of `W`
/// units from its start (units past its own masked off), which the compiler turns into
/// a few vector compares: a bit per unit that is not NUL, the length one past the
/// highest. Records too near the end of `data` for a whole window take
/// [`units_to_last`].
fn window_lengths<N: ArrowNativeType, const W: usize>(data: &[u8], width: usize) -> Vec<N> {
    let n = width / 4;
    let keep: [u32; W] = std::array::from_fn(|k| if k < n { u32::MAX } else { 0 });
    let rows = data.len().checked_div(width).unwrap_or(0);
    (0..rows)
        .map(|i| {
            let rec = &data[i * width..];
            let Some(window) = rec.get(..4 * W) else {
                return N::usize_as(units_to_last(&rec[..width]));
            };
            let mut bits = 0u32;
            for (k, (u, keep)) in window.chunks_exact(4).zip(keep).enumerate() {
                let u = u32::from_ne_bytes(u.try_into().expect("4 bytes")) & keep;
                bits |= u32::from(u != 0) << k;
            }
            N::usize_as((32 - bits.leading_zeros()) as usize)
        })
        .collect()
}

/// The number of units of `U<n>` record `r` up to its last that is not NUL (0 for all
/// NULs), two units at a time as one word; either byte order (a unit is NUL when its
/// four bytes are).
#[inline]
fn units_to_last(r: &[u8]) -> usize {
    let mut end = 0;
    let mut words = r.chunks_exact(8);
    for (i, w) in (&mut words).enumerate() {
        let x = u64::from_le_bytes(w.try_into().expect("8 bytes"));
        // The first unit is the word's low half.
        let here = 2 * i + 1 + usize::from(x >> 32 != 0);
        end = if x != 0 { here } else { end };
    }
    if words.remainder().iter().any(|&b| b != 0) {
        end = r.len() / 4;
    }
    end
}

/// Whether record `r`, of `chars.len()` units up to its last that is not NUL, converts
/// to the text of `chars` (each unit to its character, an invalid one to U+FFFD).
fn record_is(r: &[u8], chars: &[u32], big: bool) -> bool {
    (r.chunks_exact(4).zip(chars)).all(|(u, &c)| character_of(u, big) == c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::dtype::{DType, Endian};
    use arrow::array::{FixedSizeBinaryArray, LargeBinaryArray};

    /// Lengths as `i64`s.
    fn as_i64(a: &dyn Array) -> Vec<Option<i64>> {
        match a.data_type() {
            DataType::Int32 => (a.as_primitive::<Int32Type>().iter())
                .map(|v| v.map(i64::from))
                .collect(),
            _ => a.as_primitive::<Int64Type>().iter().collect(),
        }
    }

    fn column(raw: RawText, null_text: Option<&str>) -> RawTextColumn {
        RawTextColumn {
            raw,
            null_text: null_text.map(String::from),
            what: "t.b2d: column \"t\"".into(),
        }
    }

    /// `U<n>` records of both byte orders, with NULs inside and at the end, invalid
    /// units, all-NUL records, nulls and a null sentinel (matched by its text, through
    /// invalid units that convert to its U+FFFD too): each row's length is that of the
    /// text the scan converts it to, as `chars().count()` says.
    #[test]
    fn record_lengths_are_their_texts() {
        let texts: Vec<Vec<u32>> = vec![
            vec![],
            vec![u32::from('a')],
            vec![u32::from('a'), 0, u32::from('b')],
            vec![0, 0, 0, 0, 0, 0, 0],
            vec![0, 0, 0, 0, 0, 0, u32::from('z')],
            vec![0x1F600, 0xD800, 0x110000, u32::from('é')],
            vec![u32::from('n'), u32::from('a'), 0xFFFD],
            vec![u32::from('n'), u32::from('a'), 0xDC00],
            vec![u32::from('n'), u32::from('a')],
            vec![7; 7],
            vec![u32::from('x'), 0, 0, 0, 0, 0],
        ];
        for n in [1usize, 2, 3, 7, 9, 17, 33] {
            for endian in [Endian::Little, Endian::Big] {
                let big = endian == Endian::Big;
                let dtype = DType::Unicode { endian, chars: n };
                let units: Vec<&Vec<u32>> = texts.iter().filter(|t| t.len() <= n).collect();
                let records: Vec<Vec<u8>> = (units.iter())
                    .map(|t| {
                        let mut r: Vec<u8> = (t.iter())
                            .flat_map(|u| {
                                if big {
                                    u.to_be_bytes()
                                } else {
                                    u.to_le_bytes()
                                }
                            })
                            .collect();
                        r.resize(4 * n, 0);
                        r
                    })
                    .collect();
                let valid: Vec<bool> = (0..records.len()).map(|i| i % 5 != 4).collect();
                let array: ArrayRef = Arc::new(
                    FixedSizeBinaryArray::try_from_sparse_iter_with_size(
                        (records.iter().zip(&valid)).map(|(r, &v)| v.then_some(r.as_slice())),
                        4 * n as i32,
                    )
                    .unwrap(),
                );
                for null_text in [None, Some("na\u{FFFD}")] {
                    let text = column(RawText::Utf32(dtype.clone()), null_text);
                    let got = as_i64(&lengths::<Int64Type>(&array, &text).unwrap());
                    let want: Vec<Option<i64>> = (units.iter().zip(&valid))
                        .map(|(t, &v)| {
                            let s: String = (t.iter())
                                .map(|&u| char::from_u32(u).unwrap_or('\u{FFFD}'))
                                .collect::<String>()
                                .trim_end_matches('\0')
                                .to_string();
                            (v && Some(s.as_str()) != null_text).then(|| s.chars().count() as i64)
                        })
                        .collect();
                    assert_eq!(got, want, "U{n} {endian:?} {null_text:?}");
                }
            }
        }
    }

    /// UTF-8 items of one to four bytes a character, empty ones, nulls and a sentinel:
    /// each length is `chars().count()`; an item that is not UTF-8, or that starts
    /// inside a character (the items together being UTF-8), is an error naming the
    /// column.
    #[test]
    fn item_lengths_count_characters() {
        let texts = [
            "",
            "abc",
            "é",
            "日本語",
            "😀x",
            "NA",
            "a\u{0}b",
            "ÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿ",
        ];
        let valid: Vec<bool> = (0..texts.len()).map(|i| i != 2).collect();
        let array: ArrayRef = Arc::new(LargeBinaryArray::from_iter(
            (texts.iter().zip(&valid)).map(|(t, &v)| v.then_some(t.as_bytes())),
        ));
        for null_text in [None, Some("NA")] {
            let got = lengths::<Int32Type>(&array, &column(RawText::Utf8, null_text)).unwrap();
            let want: Vec<Option<i64>> = (texts.iter().zip(&valid))
                .map(|(t, &v)| (v && Some(*t) != null_text).then(|| t.chars().count() as i64))
                .collect();
            assert_eq!(as_i64(&got), want);
        }
        // Random items of 0 to 40 characters of one to four bytes, whole and sliced (the
        // offsets then start past 0).
        let alphabet = ['a', 'Z', '\0', 'é', 'ÿ', '日', '\u{FFFD}', '😀'];
        let mut x = 4242u64;
        let items: Vec<String> = (0..3000)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let len = (x >> 33) as usize % 41;
                (0..len)
                    .map(|k| alphabet[((x >> (k % 50)) as usize + k) % 8])
                    .collect()
            })
            .collect();
        let whole: ArrayRef = Arc::new(LargeBinaryArray::from_iter_values(&items));
        for (from, n) in [(0, items.len()), (1, 7), (13, 2000), (2999, 1)] {
            let got = lengths::<Int64Type>(&whole.slice(from, n), &column(RawText::Utf8, None));
            let want: Vec<Option<i64>> = (items[from..from + n].iter())
                .map(|t| Some(t.chars().count() as i64))
                .collect();
            assert_eq!(as_i64(&got.unwrap()), want, "{from} {n}");
        }
        let bad: ArrayRef = Arc::new(LargeBinaryArray::from_iter_values([
            b"ok".as_slice(),
            b"\xff",
        ]));
        let split: ArrayRef = Arc::new(LargeBinaryArray::from_iter_values([
            "é".as_bytes()[..1].to_vec(),
            "é".as_bytes()[1..].to_vec(),
        ]));
        for a in [bad, split] {
            let e = lengths::<Int32Type>(&a, &column(RawText::Utf8, None)).unwrap_err();
            assert!(
                e.to_string().contains("column \"t\": an item is not UTF-8"),
                "{e}"
            );
        }
    }
}
