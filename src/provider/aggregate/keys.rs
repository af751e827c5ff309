//! How the rows of a grouped fused aggregation find their group, and how the groups get
//! their keys back: an array coordinate is its own group; a dictionary column's row is
//! in the group of its code. Both keys lie in a range known when the plan is made (the
//! array's shape, the dictionary's length), so the states stay dense (`grouped.rs`).
//! A table's text column arrives as its stored records: a `U<n>` column's UTF-32
//! records, a `utf8` or `vlstring` column's UTF-8 items, unchecked. Each distinct record
//! is numbered in a hash table (`records.rs`) and converted (or checked) once, and its
//! group is that of its text (UTF-32 records that convert alike, such as two invalid
//! units that both become U+FFFD, share one); the groups, dense in the order first seen,
//! grow with them.
//!
//! Dictionary codes: python-blosc2 writes each distinct value once, but a dictionary
//! that repeats a value must still give it one group (a one-partition plan's output is
//! final), so each code's group is the first code of its value. Null rows (the null
//! code, or a null dictionary value) share one group after the codes, keyed NULL.
//! Text records: null rows (a mask sidecar's, `nil` items, or those whose text is the
//! column's sentinel) are group 0, keyed NULL. An integer column's values are numbered as
//! they come too (`ints.rs`), its null rows in group 0.

use super::ints::IntGroups;
use super::records::{ItemTable, RecordTable};
use crate::arrow_reader::convert::to_arrow;
use crate::arrow_reader::reader::RawText;
use crate::arrow_reader::schema::is_big_endian;
use crate::arrow_reader::utf32::push_utf32;
use crate::provider::exec::RawTextColumn;
use arrow::array::{
    Array, ArrayRef, AsArray, DictionaryArray, Int32Array, Int64Array, OffsetSizeTrait, StringArray,
};
use arrow::datatypes::{DataType, Int32Type, Int64Type};
use datafusion::error::{DataFusionError, Result};
use std::collections::HashMap;
use std::sync::Arc;

/// What a grouped fused node groups by.
#[derive(Debug, Clone, PartialEq)]
pub enum KeyKind {
    /// An array coordinate: `Int64` in `0..bound`, never null.
    Coordinate,
    /// The int32 codes of a dictionary column of `bound` values.
    DictionaryCodes,
    /// The values of an integer column, numbered as they come ([`IntGroups`]).
    Integer,
    /// A table's text column as its stored records (`FixedSizeBinary` of UTF-32,
    /// `LargeBinary` of UTF-8); rows whose text is its `null_text` are null.
    Text(RawTextColumn),
    /// Text as Arrow gives it (`Utf8`, `LargeUtf8`, `Utf8View`): a text expression's
    /// values (`substr(sku, 1, 5)`), or a text column the scan converts (also read as
    /// text, or with no records to group). Numbered as UTF-8 items are; its column is
    /// [`KeyKind::converted`]'s, naming the key for errors.
    Converted(RawTextColumn),
}

impl KeyKind {
    /// [`KeyKind::Converted`] of the key `what` names.
    pub fn converted(what: String) -> Self {
        KeyKind::Converted(RawTextColumn {
            raw: RawText::Utf8,
            null_text: None,
            what,
        })
    }
}

/// The distinct records of a text column.
#[derive(Debug)]
enum Distinct {
    /// `U<n>` records.
    Records(RecordTable),
    /// UTF-8 items.
    Items(ItemTable),
}

/// The groups of a text column's records.
#[derive(Debug)]
struct TextGroups {
    /// The distinct records seen.
    distinct: Distinct,
    /// Their groups.
    groups: DistinctGroups,
}

/// The groups of the distinct records of a text column, in the order they were seen.
#[derive(Debug)]
struct DistinctGroups {
    /// Each distinct record's group.
    record_group: Vec<i64>,
    /// The groups of texts holding U+FFFD, which records with invalid units convert to:
    /// two such records can convert alike. (Distinct records whose texts hold no U+FFFD
    /// have distinct texts.)
    replaced: HashMap<String, i64>,
    /// The texts of groups `1..`, concatenated: group `g`'s is `text[ends[g - 1]..ends[g]]`.
    text: Vec<u8>,
    /// Where each group's text ends (group 0's, the nulls', first).
    ends: Vec<usize>,
}

impl Default for DistinctGroups {
    fn default() -> Self {
        DistinctGroups {
            record_group: Vec::new(),
            replaced: HashMap::new(),
            text: Vec::new(),
            ends: vec![0],
        }
    }
}

impl TextGroups {
    fn new(raw: &RawText) -> Self {
        TextGroups {
            distinct: match raw {
                RawText::Utf32(d) => Distinct::Records(RecordTable::new(d.itemsize())),
                RawText::Utf8 => Distinct::Items(ItemTable::new()),
            },
            groups: DistinctGroups::default(),
        }
    }
}

impl DistinctGroups {
    /// The group of distinct record `e` (`record`), given one if `new`.
    ///
    /// # Errors
    /// As [`DistinctGroups::add`].
    #[inline(always)]
    fn of(&mut self, (e, new): (usize, bool), record: &[u8], col: &RawTextColumn) -> Result<i64> {
        if new {
            self.add(record, col)?;
        }
        // A record whose `add` failed has no group: its error ended the query.
        (self.record_group.get(e).copied()).ok_or_else(|| {
            DataFusionError::Internal(format!("{}: a record without a group", col.what))
        })
    }

    /// Gives new record `record` of column `col` its group: that of its text, converted
    /// as the scan converts it (UTF-32) or checked as the scan checks it (UTF-8), and
    /// appended to the texts of the groups (no allocation of its own: a column of many
    /// distinct texts pays this for most rows).
    ///
    /// # Errors
    /// A UTF-8 item that is not UTF-8, as the scan refuses it.
    #[inline(never)]
    fn add(&mut self, record: &[u8], col: &RawTextColumn) -> Result<()> {
        let start = self.text.len();
        match &col.raw {
            RawText::Utf32(dtype) => {
                push_utf32(record, is_big_endian(dtype), &mut self.text);
            }
            RawText::Utf8 => self.text.extend_from_slice(record),
        }
        let text = std::str::from_utf8(&self.text[start..]).map_err(|e| {
            DataFusionError::Execution(format!("{}: an item is not UTF-8 ({e})", col.what))
        })?;
        // Distinct UTF-8 items are distinct texts; UTF-32 records too unless replaced.
        let may_repeat =
            matches!(col.raw, RawText::Utf32(_)) && text.contains(char::REPLACEMENT_CHARACTER);
        let g = if col.null_text.as_deref() == Some(text) {
            Some(0)
        } else if may_repeat {
            self.replaced.get(text).copied()
        } else {
            None
        };
        let g = match g {
            Some(g) => {
                self.text.truncate(start);
                g
            }
            None => {
                let g = self.ends.len() as i64;
                if may_repeat {
                    self.replaced.insert(text.to_string(), g);
                }
                self.ends.push(self.text.len());
                g
            }
        };
        self.record_group.push(g);
        Ok(())
    }

    /// How many groups of texts (the null group not counted).
    fn len(&self) -> usize {
        self.ends.len() - 1
    }

    /// The key column of `groups`: each group's text, null for group 0.
    ///
    /// # Errors
    /// None in practice: every text was checked as UTF-8 when added.
    fn column(&self, groups: &[usize]) -> Result<ArrayRef> {
        let mut keys = arrow::array::StringBuilder::with_capacity(groups.len(), 0);
        for &g in groups {
            match g.checked_sub(1).filter(|&g| g < self.len()) {
                None => keys.append_null(),
                Some(g) => {
                    let text = &self.text[self.ends[g]..self.ends[g + 1]];
                    keys.append_value(std::str::from_utf8(text).map_err(|e| {
                        DataFusionError::Internal(format!("a group's text is not UTF-8 ({e})"))
                    })?);
                }
            }
        }
        Ok(Arc::new(keys.finish()))
    }
}

/// Appends to `buf` the group of each item `data[offsets[i]..offsets[i + 1]]` of column
/// `col` (0 where `null(i)`), numbering new ones in `table` and `groups`.
///
/// # Errors
/// As [`DistinctGroups::add`].
fn item_groups<O: OffsetSizeTrait>(
    table: &mut ItemTable,
    groups: &mut DistinctGroups,
    offsets: &[O],
    data: &[u8],
    null: impl Fn(usize) -> bool,
    col: &RawTextColumn,
    buf: &mut Vec<i64>,
) -> Result<()> {
    for (i, w) in offsets.windows(2).enumerate() {
        let (a, b) = (w[0].as_usize(), w[1].as_usize());
        buf.push(match null(i) {
            true => 0,
            false => groups.of(table.entry(data, a, b), &data[a..b], col)?,
        });
    }
    Ok(())
}

/// The texts of raw records `col` of column `text` as the scan would have given them: a
/// `Utf8` array, null where `col` is or where the text is the column's `null_text`.
///
/// # Errors
/// A column that is not the raw records of `text`, a UTF-8 item that is not UTF-8.
pub fn texts_of(col: &ArrayRef, text: &RawTextColumn) -> Result<ArrayRef> {
    let wrong = || {
        DataFusionError::Internal(format!(
            "grouped Blosc2 aggregate: {}: the key is not its raw records",
            text.what
        ))
    };
    let texts: StringArray = match &text.raw {
        RawText::Utf32(dtype) => {
            let width = dtype.itemsize();
            let records = (col.as_fixed_size_binary_opt())
                .filter(|r| r.value_length() as usize == width)
                .ok_or_else(wrong)?;
            let data = &records.value_data()[..records.len() * width];
            let converted = to_arrow(dtype, data, records.len(), width, 0);
            converted.as_string::<i32>().clone()
        }
        RawText::Utf8 => {
            let items = col.as_binary_opt::<i64>().ok_or_else(wrong)?;
            // Not `safe`: a safe cast would make an item that is not UTF-8 a null.
            let strict = arrow::compute::CastOptions {
                safe: false,
                ..Default::default()
            };
            let checked = arrow::compute::cast_with_options(items, &DataType::LargeUtf8, &strict)
                .map_err(|e| {
                DataFusionError::Execution(format!("{}: an item is not UTF-8 ({e})", text.what))
            })?;
            let small = arrow::compute::cast(&checked, &DataType::Utf8)?;
            small.as_string::<i32>().clone()
        }
    };
    let nulls = col.nulls().filter(|n| n.null_count() > 0);
    let null = |i: usize| {
        nulls.is_some_and(|n| n.is_null(i)) || text.null_text.as_deref() == Some(texts.value(i))
    };
    if nulls.is_none() && text.null_text.is_none() {
        return Ok(Arc::new(texts));
    }
    let valid = arrow::buffer::NullBuffer::from_iter((0..texts.len()).map(|i| !null(i)));
    let (offsets, values, _) = texts.into_parts();
    Ok(Arc::new(StringArray::try_new(
        offsets,
        values,
        Some(valid),
    )?))
}

/// The groups of the rows of one partition's batches, by [`KeyKind`].
#[derive(Debug)]
pub struct GroupKeys {
    kind: KeyKind,
    /// The keys' bound (the shape along the coordinate, the dictionary's length).
    bound: usize,
    /// Dictionary codes: the values of the first batch, which every batch must share.
    values: Option<ArrayRef>,
    /// Dictionary codes: each code's group.
    code_groups: Vec<i64>,
    /// Text records: their groups.
    text: Option<TextGroups>,
    /// Integers: their groups.
    ints: IntGroups,
    /// The groups of the current batch's rows, when they are not its column's values.
    buf: Vec<i64>,
}

impl GroupKeys {
    /// Keys of `kind` below `bound`.
    pub fn new(kind: KeyKind, bound: usize) -> Self {
        let text = match &kind {
            KeyKind::Text(col) | KeyKind::Converted(col) => Some(TextGroups::new(&col.raw)),
            _ => None,
        };
        GroupKeys {
            kind,
            bound,
            values: None,
            code_groups: Vec::new(),
            text,
            ints: IntGroups::default(),
            buf: Vec::new(),
        }
    }

    /// How many groups the states need: the bound, and a null group after the codes;
    /// for text records, the null group and one per distinct text so far.
    pub fn groups(&self) -> usize {
        match (&self.kind, &self.text) {
            (KeyKind::Coordinate, _) => self.bound,
            (KeyKind::DictionaryCodes, _) => self.bound + 1,
            (KeyKind::Text(_) | KeyKind::Converted(_), t) => {
                1 + t.as_ref().map_or(0, |t| t.groups.len())
            }
            (KeyKind::Integer, _) => self.ints.groups(),
        }
    }

    /// Finds the group of each row of key column `col` ([`GroupKeys::of`] then gives
    /// them), adding the groups of texts not seen before ([`GroupKeys::groups`]).
    ///
    /// # Errors
    /// A column that is not the kind's (the rule admits only the kind's columns), or a
    /// dictionary other than the first batch's or of another length than planned.
    pub fn map(&mut self, col: &ArrayRef) -> Result<()> {
        let wrong = |what: &str| {
            DataFusionError::Internal(format!("grouped Blosc2 aggregate: the key {what}"))
        };
        match &self.kind {
            KeyKind::Coordinate => match col.as_primitive_opt::<Int64Type>() {
                Some(k) if k.null_count() == 0 => Ok(()),
                _ => Err(wrong("is not a coordinate")),
            },
            KeyKind::Integer => {
                (self.ints.map(col, &mut self.buf)).ok_or_else(|| wrong("is not an integer column"))
            }
            KeyKind::Text(col_of) | KeyKind::Converted(col_of) => {
                let raw = matches!(self.kind, KeyKind::Text(_));
                let text = self.text.as_mut().expect("made with the kind");
                let groups = &mut text.groups;
                self.buf.clear();
                self.buf.reserve(col.len());
                let nulls = col.nulls().filter(|n| n.null_count() > 0);
                let null = |i: usize| nulls.is_some_and(|n| n.is_null(i));
                let buf = &mut self.buf;
                // Items between offsets of either width.
                macro_rules! between_offsets {
                    ($table:expr, $s:expr) => {
                        item_groups(
                            $table,
                            groups,
                            $s.value_offsets(),
                            $s.value_data(),
                            null,
                            col_of,
                            buf,
                        )
                    };
                }
                match &mut text.distinct {
                    Distinct::Records(table) => {
                        let width = table.width();
                        let records = col
                            .as_fixed_size_binary_opt()
                            .filter(|r| r.value_length() as usize == width)
                            .ok_or_else(|| wrong("is not records of its width"))?;
                        let data = &records.value_data()[..records.len() * width];
                        for (i, r) in data.chunks_exact(width).enumerate() {
                            buf.push(match null(i) {
                                true => 0,
                                false => groups.of(table.entry(r), r, col_of)?,
                            });
                        }
                        Ok(())
                    }
                    // Stored items, unchecked.
                    Distinct::Items(table) if raw => match col.as_binary_opt::<i64>() {
                        Some(items) => between_offsets!(table, items),
                        None => Err(wrong("is not items")),
                    },
                    // Text: `Utf8`, `LargeUtf8`, `Utf8View`.
                    Distinct::Items(table) => {
                        if let Some(s) = col.as_string_opt::<i32>() {
                            between_offsets!(table, s)
                        } else if let Some(s) = col.as_string_opt::<i64>() {
                            between_offsets!(table, s)
                        } else if let Some(v) = col.as_string_view_opt() {
                            // A value of up to 12 bytes is held in its view, after its
                            // length: looked up there, in the views' bytes, where its
                            // 16-byte head loads at once (a copy of it alone cost a call
                            // a row).
                            let views = v.views().inner().as_slice();
                            for (i, &view) in v.views().iter().enumerate() {
                                let len = view as u32 as usize;
                                let (data, at) = match len {
                                    0..=12 => (views, 16 * i + 4),
                                    _ => (v.value(i).as_bytes(), 0),
                                };
                                let item = &data[at..at + len];
                                buf.push(match null(i) {
                                    true => 0,
                                    false => {
                                        groups.of(table.entry(data, at, at + len), item, col_of)?
                                    }
                                });
                            }
                            Ok(())
                        } else {
                            Err(wrong("is not text"))
                        }
                    }
                }
            }
            KeyKind::DictionaryCodes => {
                let d = col
                    .as_dictionary_opt::<Int32Type>()
                    .ok_or_else(|| wrong("is not a dictionary of int32 codes"))?;
                // No row, no group: an empty batch (a scan unit none of whose rows
                // matched) may carry an empty dictionary.
                if d.is_empty() {
                    self.buf.clear();
                    return Ok(());
                }
                match &self.values {
                    None => {
                        if d.values().len() != self.bound {
                            return Err(wrong("dictionary is not of the planned length"));
                        }
                        self.code_groups = code_groups(d.values())?;
                        self.values = Some(Arc::clone(d.values()));
                    }
                    Some(v)
                        if Arc::ptr_eq(v, d.values()) || v.to_data() == d.values().to_data() => {}
                    Some(_) => return Err(wrong("dictionary changed between batches")),
                }
                let null_group = self.bound as i64;
                let groups = &self.code_groups;
                self.buf.clear();
                match d.keys().nulls().filter(|n| n.null_count() > 0) {
                    Some(n) => self.buf.extend(d.keys().values().iter().zip(n.iter()).map(
                        |(&c, valid)| match valid {
                            true => groups.get(c as usize).copied().unwrap_or(i64::MAX),
                            false => null_group,
                        },
                    )),
                    None => self.buf.extend(
                        (d.keys().values().iter())
                            .map(|&c| groups.get(c as usize).copied().unwrap_or(i64::MAX)),
                    ),
                }
                Ok(())
            }
        }
    }

    /// The groups of the rows of `col`, which [`GroupKeys::map`] took last.
    pub fn of<'a>(&'a self, col: &'a ArrayRef) -> &'a [i64] {
        match (&self.kind, col.as_primitive_opt::<Int64Type>()) {
            (KeyKind::Coordinate, Some(k)) => k.values(),
            _ => &self.buf,
        }
    }

    /// Forgets every group seen (the states of their groups were output): what
    /// [`GroupKeys::new`] made.
    pub fn reset(&mut self) {
        *self = GroupKeys::new(self.kind.clone(), self.bound);
    }

    /// The key column of `groups` (ascending), in type `key_type` (the output schema's).
    ///
    /// # Errors
    /// A type the keys cannot be cast to.
    pub fn column(&self, groups: &[usize], key_type: &DataType) -> Result<ArrayRef> {
        let keys: ArrayRef = match (&self.kind, &self.values) {
            (KeyKind::Coordinate, _) => Arc::new(Int64Array::from_iter_values(
                groups.iter().map(|&g| g as i64),
            )),
            (KeyKind::Integer, _) => self.ints.column(groups, key_type),
            (KeyKind::Text(_) | KeyKind::Converted(_), _) => match &self.text {
                Some(t) => t.groups.column(groups)?,
                None => arrow::array::new_null_array(&DataType::Utf8, groups.len()),
            },
            // No batch: no group.
            (KeyKind::DictionaryCodes, None) => arrow::array::new_empty_array(key_type),
            (KeyKind::DictionaryCodes, Some(values)) => {
                let codes = Int32Array::from_iter(
                    groups.iter().map(|&g| (g < self.bound).then_some(g as i32)),
                );
                Arc::new(DictionaryArray::<Int32Type>::try_new(
                    codes,
                    Arc::clone(values),
                )?)
            }
        };
        if keys.data_type() == key_type {
            return Ok(keys);
        }
        Ok(arrow::compute::cast(&keys, key_type)?)
    }
}

/// Each code's group among `values`: the first code with its value; null values in the
/// null group (`values.len()`).
fn code_groups(values: &ArrayRef) -> Result<Vec<i64>> {
    let null_group = values.len() as i64;
    let Some(text) = values.as_string_opt::<i32>() else {
        return Err(DataFusionError::Internal(format!(
            "grouped Blosc2 aggregate: dictionary values of type {}",
            values.data_type()
        )));
    };
    let mut first: HashMap<&str, i64> = HashMap::with_capacity(text.len());
    Ok((0..text.len())
        .map(|i| match text.is_valid(i) {
            true => *first.entry(text.value(i)).or_insert(i as i64),
            false => null_group,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::FixedSizeBinaryArray;
    use arrow::buffer::NullBuffer;

    /// `map` then `of`, or `map`'s error.
    fn groups(keys: &mut GroupKeys, col: &ArrayRef) -> Result<Vec<i64>> {
        keys.map(col)?;
        Ok(keys.of(col).to_vec())
    }

    /// Codes of a dictionary that repeats a value and holds a null, null codes, and a
    /// second batch sharing the dictionary: groups, then keys back as text.
    #[test]
    fn dictionary_codes_group_by_value() {
        let values: ArrayRef = Arc::new(StringArray::from(vec![
            Some("a"),
            Some("b"),
            Some("a"),
            None,
        ]));
        let batch = |codes: Vec<Option<i32>>| -> ArrayRef {
            Arc::new(
                DictionaryArray::<Int32Type>::try_new(Int32Array::from(codes), Arc::clone(&values))
                    .unwrap(),
            )
        };
        let mut keys = GroupKeys::new(KeyKind::DictionaryCodes, 4);
        assert_eq!(keys.groups(), 5);
        // An empty batch over an empty dictionary (a unit none of whose rows matched)
        // has no group, and does not set the dictionary.
        let empty = arrow::array::new_empty_array(&DataType::Dictionary(
            Box::new(DataType::Int32),
            Box::new(DataType::Utf8),
        ));
        assert_eq!(groups(&mut keys, &empty).unwrap(), Vec::<i64>::new());
        let first = batch(vec![Some(0), Some(1), Some(2), None, Some(3)]);
        assert_eq!(groups(&mut keys, &first).unwrap(), [0, 1, 0, 4, 4]);
        let second = batch(vec![Some(2), Some(1)]);
        assert_eq!(groups(&mut keys, &second).unwrap(), [0, 1]);
        let text = keys.column(&[0, 1, 4], &DataType::Utf8).unwrap();
        let text = text.as_string::<i32>();
        assert_eq!(
            (text.value(0), text.value(1), text.is_null(2)),
            ("a", "b", true)
        );
        let dict_type = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
        let dict = keys.column(&[1, 4], &dict_type).unwrap();
        let dict = dict.as_dictionary::<Int32Type>();
        assert_eq!(dict.keys(), &Int32Array::from(vec![Some(1), None]));
        // Another dictionary, or another length than planned, is refused.
        let other: ArrayRef = Arc::new(
            DictionaryArray::<Int32Type>::try_new(
                Int32Array::from(vec![0]),
                Arc::new(StringArray::from(vec!["z", "b", "a", "c"])),
            )
            .unwrap(),
        );
        assert!(groups(&mut keys, &other).is_err());
        assert!(groups(&mut GroupKeys::new(KeyKind::DictionaryCodes, 3), &first).is_err());
        // Coordinates are their own groups; nulls are refused.
        let mut coords = GroupKeys::new(KeyKind::Coordinate, 9);
        let c: ArrayRef = Arc::new(Int64Array::from(vec![3, 8]));
        assert_eq!(groups(&mut coords, &c).unwrap(), [3, 8]);
        let c: ArrayRef = Arc::new(Int64Array::from(vec![Some(3), None]));
        assert!(groups(&mut coords, &c).is_err());
    }

    /// `<U3` records, little- and big-endian: trailing NULs dropped, two different
    /// invalid units and U+FFFD itself (all U+FFFD as text) in one group, the sentinel's
    /// text and masked rows in the null group, a text seen again in a second batch; after
    /// `reset`, the numbering starts afresh.
    #[test]
    fn utf32_records_group_by_their_text() {
        for endian in [
            crate::array::dtype::Endian::Little,
            crate::array::dtype::Endian::Big,
        ] {
            let dtype = crate::array::dtype::DType::Unicode { chars: 3, endian };
            let record = |units: [u32; 3]| -> Vec<u8> {
                units
                    .iter()
                    .flat_map(|&u| match endian {
                        crate::array::dtype::Endian::Big => u.to_be_bytes(),
                        _ => u.to_le_bytes(),
                    })
                    .collect()
            };
            let rows = [
                [0x61, 0x62, 0],    // "ab"
                [0x61, 0x62, 0],    // "ab"
                [0xD800, 0, 0],     // U+FFFD
                [0x110000, 0, 0],   // U+FFFD
                [0x4E, 0x41, 0],    // "NA": the sentinel
                [0x65E5, 0, 0],     // "日"
                [0x61, 0, 0x62],    // "a\0b"
                [0xFFFD, 0, 0],     // U+FFFD stored as such
                [0x61, 0x62, 0x63], // "abc", masked
            ];
            let bytes: Vec<u8> = rows.iter().flat_map(|&r| record(r)).collect();
            let mask =
                NullBuffer::from(vec![true, true, true, true, true, true, true, true, false]);
            let col: ArrayRef =
                Arc::new(FixedSizeBinaryArray::try_new(12, bytes.into(), Some(mask)).unwrap());
            let kind = KeyKind::Text(RawTextColumn {
                raw: RawText::Utf32(dtype.clone()),
                null_text: Some("NA".into()),
                what: "t.b2d: column \"s\"".into(),
            });
            let mut keys = GroupKeys::new(kind, 0);
            assert_eq!(keys.groups(), 1);
            assert_eq!(
                groups(&mut keys, &col).unwrap(),
                [1, 1, 2, 2, 0, 3, 4, 2, 0]
            );
            assert_eq!(keys.groups(), 5);
            let again: ArrayRef = Arc::new(
                FixedSizeBinaryArray::try_new(12, record([0x65E5, 0, 0]).into(), None).unwrap(),
            );
            assert_eq!(groups(&mut keys, &again).unwrap(), [3]);
            let text = keys.column(&[0, 1, 2, 3, 4], &DataType::Utf8).unwrap();
            let text: Vec<Option<&str>> = text.as_string::<i32>().iter().collect();
            assert_eq!(
                text,
                [None, Some("ab"), Some("\u{FFFD}"), Some("日"), Some("a\0b")]
            );
            // A slice of the column (the fused node folds slices of each unit's batch).
            let sliced = col.slice(2, 5);
            assert_eq!(groups(&mut keys, &sliced).unwrap(), [2, 2, 0, 3, 4]);
            keys.reset();
            assert_eq!(keys.groups(), 1);
            assert_eq!(groups(&mut keys, &again).unwrap(), [1]);
            // Records of another width are refused.
            let narrow: ArrayRef =
                Arc::new(FixedSizeBinaryArray::try_new(8, vec![0u8; 8].into(), None).unwrap());
            assert!(groups(&mut keys, &narrow).is_err());
        }
    }

    /// UTF-8 items: empty, NUL, non-ASCII and prefix-sharing items, `nil` items and the
    /// sentinel's text in the null group, a slice, and an item that is not UTF-8 refused
    /// with the column named.
    #[test]
    fn utf8_items_group_by_their_bytes() {
        use arrow::array::LargeBinaryArray;
        let kind = KeyKind::Text(RawTextColumn {
            raw: RawText::Utf8,
            null_text: Some("__BLOSC2_NULL__".into()),
            what: "t.b2d: column \"s\"".into(),
        });
        let mut keys = GroupKeys::new(kind, 0);
        let items: Vec<Option<&[u8]>> = vec![
            Some(b"ab"),
            Some(b""),
            Some(b"abc"),
            None,
            Some("日本".as_bytes()),
            Some(b"ab"),
            Some(b"a\0b"),
            Some(b"__BLOSC2_NULL__"),
            Some(b""),
        ];
        let col: ArrayRef = Arc::new(LargeBinaryArray::from(items));
        assert_eq!(
            groups(&mut keys, &col).unwrap(),
            [1, 2, 3, 0, 4, 1, 5, 0, 2]
        );
        assert_eq!(keys.groups(), 6);
        let text = keys
            .column(&[0, 1, 2, 3, 4, 5], &DataType::Utf8View)
            .unwrap();
        let text: Vec<Option<&str>> = text.as_string_view().iter().collect();
        assert_eq!(
            text,
            [
                None,
                Some("ab"),
                Some(""),
                Some("abc"),
                Some("日本"),
                Some("a\0b")
            ]
        );
        assert_eq!(groups(&mut keys, &col.slice(4, 3)).unwrap(), [4, 1, 5]);
        let bad: ArrayRef = Arc::new(LargeBinaryArray::from(vec![Some(&b"a\xffb"[..])]));
        let err = groups(&mut keys, &bad).unwrap_err().to_string();
        assert!(
            err.contains("t.b2d: column \"s\"") && err.contains("UTF-8"),
            "{err}"
        );
        // Fixed-width records are not items.
        let records: ArrayRef =
            Arc::new(FixedSizeBinaryArray::try_new(4, vec![0u8; 4].into(), None).unwrap());
        assert!(groups(&mut keys, &records).is_err());
    }

    /// Text as Arrow gives it (`Utf8`, `LargeUtf8`, `Utf8View` of values held in their
    /// views and not, sliced), numbered as a `HashMap` of the values numbers them in the
    /// order first seen, nulls in group 0; another type is refused.
    #[test]
    fn converted_text_groups_by_value() {
        use arrow::array::{LargeStringArray, StringViewArray};
        let mut x = 99u64;
        let values: Vec<Option<String>> = (0..3000)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let v = (x >> 33) % 400;
                // Lengths 0 to 39: inline in a view up to 12 bytes, then not.
                (v % 17 != 3).then(|| format!("{}é{v}", "k".repeat(v as usize % 30)))
            })
            .collect();
        let arrays: [ArrayRef; 3] = [
            Arc::new(StringArray::from(values.clone())),
            Arc::new(LargeStringArray::from(values.clone())),
            Arc::new(StringViewArray::from(values.clone())),
        ];
        for col in arrays {
            for (from, n) in [(0, values.len()), (7, 500)] {
                let mut keys = GroupKeys::new(KeyKind::converted("the key k".into()), 0);
                let mut want: HashMap<&str, i64> = HashMap::new();
                let expected: Vec<i64> = (values[from..from + n].iter())
                    .map(|v| match v {
                        None => 0,
                        Some(v) => {
                            let next = want.len() as i64 + 1;
                            *want.entry(v.as_str()).or_insert(next)
                        }
                    })
                    .collect();
                let got = groups(&mut keys, &col.slice(from, n)).unwrap();
                assert_eq!(got, expected, "{}", col.data_type());
                assert_eq!(keys.groups(), want.len() + 1);
                let all: Vec<usize> = (0..keys.groups()).collect();
                let texts = keys.column(&all, &DataType::Utf8).unwrap();
                let mut by_group: Vec<(i64, &str)> = want.iter().map(|(v, &g)| (g, *v)).collect();
                by_group.sort();
                let texts: Vec<Option<&str>> = texts.as_string::<i32>().iter().collect();
                assert_eq!(texts[0], None);
                assert!(
                    texts[1..]
                        .iter()
                        .zip(&by_group)
                        .all(|(t, (_, v))| *t == Some(*v))
                );
            }
        }
        let mut keys = GroupKeys::new(KeyKind::converted("the key k".into()), 0);
        let ints: ArrayRef = Arc::new(Int64Array::from(vec![1, 2]));
        assert!(groups(&mut keys, &ints).is_err());
    }
}
