//! Arrow arrays of variable-length column values: CTable `utf8` text, BatchArray items
//! (`vlstring` → `Utf8View`, `vlbytes` → `Binary`, `nil` → null) and dictionary columns
//! (`int32` codes → `Dictionary(Int32, Utf8)`, the null code → null).
//!
//! `vlstring` text is `Utf8View` (what DataFusion reads Parquet text as): DataFusion
//! groups views about twice as fast as offset-based strings.

use crate::array::batch_array::{ItemKind, VarValues};
use crate::error::{Error, Result};
use arrow::array::{
    Array, ArrayRef, AsArray, BinaryArray, DictionaryArray, Int32Array, StringArray,
    StringViewArray,
};
use arrow::buffer::{Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow::datatypes::{DataType, Int32Type};
use std::sync::Arc;

/// The Arrow type of a dictionary column.
pub fn dictionary_type() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}

/// Arrow `i32` offsets from offsets that start at 0.
///
/// # Errors
/// Values past 2 GiB (`what` names them).
fn offsets_i32(offsets: &[i64], what: &dyn Fn() -> String) -> Result<OffsetBuffer<i32>> {
    let last = offsets.last().copied().unwrap_or(0);
    if i32::try_from(last).is_err() {
        return Err(Error::InvalidArgument(format!(
            "{}: {last} bytes of values in one batch (over 2 GiB; use a smaller batch size)",
            what()
        )));
    }
    Ok(OffsetBuffer::new(ScalarBuffer::from(
        offsets.iter().map(|&o| o as i32).collect::<Vec<i32>>(),
    )))
}

/// Text (validated as UTF-8) or bytes with offsets from 0, as `Utf8` or `Binary`.
///
/// # Errors
/// Invalid UTF-8 in text, decreasing offsets, more than 2 GiB; `what` names the column.
pub fn var_array(
    kind: ItemKind,
    offsets: &[i64],
    data: Vec<u8>,
    nulls: Option<NullBuffer>,
    what: &dyn Fn() -> String,
) -> Result<ArrayRef> {
    let offs = offsets_i32(offsets, what)?;
    let bad = |e: arrow::error::ArrowError| Error::InvalidArgument(format!("{}: {e}", what()));
    let data = Buffer::from(data);
    Ok(match kind {
        ItemKind::Text => Arc::new(StringArray::try_new(offs, data, nulls).map_err(bad)?),
        ItemKind::Bytes => Arc::new(BinaryArray::try_new(offs, data, nulls).map_err(bad)?),
    })
}

/// Text with offsets from 0 as `Utf8View`, viewing `data`. The bytes are checked as a
/// `Utf8` array first (UTF-8 over the whole buffer, then each offset on a character
/// boundary), then viewed: checking each view on its own measured slower
/// (`benches/README.md`, session 35).
///
/// # Errors
/// As [`var_array`].
pub fn text_view_array(
    offsets: &[i64],
    data: Vec<u8>,
    nulls: Option<NullBuffer>,
    what: &dyn Fn() -> String,
) -> Result<ArrayRef> {
    let a = var_array(ItemKind::Text, offsets, data, nulls, what)?;
    Ok(Arc::new(StringViewArray::from(a.as_string::<i32>())))
}

/// BatchArray items as an Arrow array (`nil` → null): text as `Utf8View`, bytes as
/// `Binary`.
///
/// # Errors
/// As [`var_array`].
pub fn items_array(kind: ItemKind, v: VarValues, what: &dyn Fn() -> String) -> Result<ArrayRef> {
    let nulls = (!v.present.is_empty()).then(|| NullBuffer::from(v.present));
    match kind {
        ItemKind::Text => text_view_array(&v.offsets, v.data, nulls, what),
        ItemKind::Bytes => var_array(kind, &v.offsets, v.data, nulls, what),
    }
}

/// The values of a dictionary column as the dictionary of its Arrow arrays.
///
/// # Errors
/// As [`var_array`].
pub fn dictionary_values(v: &VarValues, what: &dyn Fn() -> String) -> Result<ArrayRef> {
    var_array(ItemKind::Text, &v.offsets, v.data.clone(), None, what)
}

/// A dictionary array over `values` from the codes `keys` (of rows `first_row..`),
/// `null_code` meaning null.
///
/// # Errors
/// A code outside the dictionary (named with its row).
pub fn dictionary_array(
    keys: &Int32Array,
    values: ArrayRef,
    null_code: i64,
    first_row: u64,
    what: &dyn Fn() -> String,
) -> Result<ArrayRef> {
    let codes = keys.values();
    let nulls = codes
        .iter()
        .any(|&k| k as i64 == null_code)
        .then(|| NullBuffer::from_iter(codes.iter().map(|&k| k as i64 != null_code)));
    let n = values.len() as i64;
    // Arrow checks every non-null code against the values; only when one fails are the
    // codes searched again, to name its row.
    let keyed = Int32Array::new(codes.clone(), nulls);
    let e = match DictionaryArray::<Int32Type>::try_new(keyed, values) {
        Ok(d) => return Ok(Arc::new(d)),
        Err(e) => e,
    };
    let bad = codes
        .iter()
        .map(|&k| k as i64)
        .enumerate()
        .find(|&(_, k)| k != null_code && !(0..n).contains(&k));
    Err(Error::InvalidArgument(match bad {
        Some((row, k)) => format!(
            "{}: row {} has code {k}, outside the {n} values of its dictionary",
            what(),
            first_row + row as u64
        ),
        None => format!("{}: {e}", what()),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_views_short_long_and_null() {
        let long = "é".repeat(10); // 20 bytes: viewed in the buffer
        let data = [b"ab".as_slice(), b"", long.as_bytes(), b"twelve bytes"].concat();
        let offsets = [0, 2, 2, 22, 34];
        let nulls = NullBuffer::from(vec![true, false, true, true]);
        let a = text_view_array(&offsets, data, Some(nulls), &|| "c".into()).unwrap();
        let v = a.as_string_view();
        assert_eq!(v.value(0), "ab");
        assert!(v.is_null(1));
        assert_eq!(v.value(2), long);
        assert_eq!(v.value(3), "twelve bytes");
        let a = text_view_array(&[0, 3, 5], b"abcde".to_vec(), None, &|| "c".into()).unwrap();
        assert_eq!(a.as_string_view().value(1), "de");
    }

    #[test]
    fn text_views_check_their_bytes() {
        let e = text_view_array(&[0, 2], vec![0xc3, 0x28], None, &|| "column \"t\"".into())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("column \"t\"") && e.to_lowercase().contains("utf-8"),
            "{e}"
        );
        let e = text_view_array(&[0, 9], b"abc".to_vec(), None, &|| "c".into()).unwrap_err();
        assert!(e.to_string().contains("c: "), "{e}");
        // A value ending inside a character.
        let e =
            text_view_array(&[0, 1, 2], "é".as_bytes().to_vec(), None, &|| "c".into()).unwrap_err();
        assert!(e.to_string().contains("c: "), "{e}");
        let long = "x".repeat(20);
        let mut data = long.clone().into_bytes();
        data[15] = 0xff;
        let e = text_view_array(&[0, 20], data, None, &|| "c".into()).unwrap_err();
        assert!(e.to_string().to_lowercase().contains("utf-8"), "{e}");
    }
}
