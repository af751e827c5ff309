//! Arrow arrays of variable-length column values: CTable `utf8` text, BatchArray items
//! (`vlstring` → `Utf8`, `vlbytes` → `Binary`, `nil` → null) and dictionary columns
//! (`int32` codes → `Dictionary(Int32, Utf8)`, the null code → null).

use crate::array::batch_array::{ItemKind, VarValues};
use crate::error::{Error, Result};
use arrow::array::{Array, ArrayRef, BinaryArray, DictionaryArray, Int32Array, StringArray};
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

/// BatchArray items as an Arrow array (`nil` → null).
///
/// # Errors
/// As [`var_array`].
pub fn items_array(kind: ItemKind, v: VarValues, what: &dyn Fn() -> String) -> Result<ArrayRef> {
    let nulls = (!v.present.is_empty()).then(|| NullBuffer::from(v.present));
    var_array(kind, &v.offsets, v.data, nulls, what)
}

/// The values of a dictionary column as the dictionary of its Arrow arrays.
///
/// # Errors
/// As [`var_array`].
pub fn dictionary_values(v: &VarValues, what: &dyn Fn() -> String) -> Result<ArrayRef> {
    var_array(ItemKind::Text, &v.offsets, v.data.clone(), None, what)
}

/// A dictionary array over `values` from little-endian `int32` codes, `null_code`
/// meaning null.
///
/// # Errors
/// A code outside the dictionary (named with its row).
pub fn dictionary_array(
    codes: &[u8],
    values: ArrayRef,
    null_code: i64,
    what: &dyn Fn() -> String,
) -> Result<ArrayRef> {
    let keys: Vec<i32> = codes
        .chunks_exact(4)
        .map(|b| i32::from_le_bytes(b.try_into().expect("4 bytes")))
        .collect();
    let n = values.len() as i64;
    if let Some((row, &k)) = keys
        .iter()
        .enumerate()
        .find(|&(_, &k)| k as i64 != null_code && !(0..n).contains(&(k as i64)))
    {
        return Err(Error::InvalidArgument(format!(
            "{}: row {row} has code {k}, outside the {n} values of its dictionary",
            what()
        )));
    }
    let nulls = keys
        .iter()
        .any(|&k| k as i64 == null_code)
        .then(|| NullBuffer::from_iter(keys.iter().map(|&k| k as i64 != null_code)));
    let keys = Int32Array::new(ScalarBuffer::from(keys), nulls);
    let d = DictionaryArray::<Int32Type>::try_new(keys, values)
        .map_err(|e| Error::InvalidArgument(format!("{}: {e}", what())))?;
    Ok(Arc::new(d))
}
