//! Arrow arrays from msgpack values of a declared [`ItemType`]: `list` columns →
//! `List`, msgpack `struct` columns → `Struct`, `object` columns → JSON text. `nil` is
//! null at every level; a struct key that is missing is a null field.

use super::schema::time_mapping;
use crate::array::item_type::ItemType;
use crate::error::{Error, Result};
use crate::msgpack::MsgValue;
use arrow::array::{
    ArrayRef, BinaryArray, BooleanArray, Float32Array, Float64Array, Int8Array, Int16Array,
    Int32Array, Int64Array, ListArray, StringArray, StructArray, UInt8Array, UInt16Array,
    UInt32Array, UInt64Array,
};
use arrow::buffer::{NullBuffer, OffsetBuffer};
use arrow::datatypes::{DataType, Field, Fields};
use std::sync::Arc;

/// The Arrow type of values of type `t` (every child nullable).
pub fn arrow_type(t: &ItemType) -> DataType {
    match t {
        ItemType::Int { bits, signed } => match (bits, signed) {
            (8, true) => DataType::Int8,
            (16, true) => DataType::Int16,
            (32, true) => DataType::Int32,
            (8, false) => DataType::UInt8,
            (16, false) => DataType::UInt16,
            (32, false) => DataType::UInt32,
            (_, true) => DataType::Int64,
            (_, false) => DataType::UInt64,
        },
        ItemType::Float { bits: 32 } => DataType::Float32,
        ItemType::Float { .. } => DataType::Float64,
        ItemType::Bool => DataType::Boolean,
        ItemType::Timestamp { unit, timezone } => DataType::Timestamp(
            time_mapping(*unit, 1).0,
            timezone.as_deref().map(Into::into),
        ),
        ItemType::Text | ItemType::Json => DataType::Utf8,
        // A schema message that does not pass the check types the column `Null`: its
        // reads then fail, naming the stream's type (see `ipc_items`).
        ItemType::Arrow(m) => super::ipc_items::schema_message_type(&m.0).unwrap_or(DataType::Null),
        ItemType::Bytes => DataType::Binary,
        ItemType::List(item) => {
            DataType::List(Arc::new(Field::new("item", arrow_type(item), true)))
        }
        ItemType::Struct(fields) => DataType::Struct(struct_fields(fields)),
    }
}

fn struct_fields(fields: &[(String, ItemType)]) -> Fields {
    fields
        .iter()
        .map(|(n, t)| Field::new(n, arrow_type(t), true))
        .collect()
}

/// The array of `values` (one per row; `None` or `nil` is null) as type `t`.
///
/// # Errors
/// A value that is not of `t` (an integer out of range, a string where a number is
/// declared, …), naming its row among `values` and the path inside it.
pub fn values_array(t: &ItemType, values: &[Option<&MsgValue>]) -> Result<ArrayRef> {
    build(t, values, "")
}

/// `path` is empty for the rows themselves, else says which nested values are meant
/// (`list items`, `field "a"`, …); `row` counts among those.
fn mismatch(t: &ItemType, v: &MsgValue, row: usize, path: &str) -> Error {
    let at = if path.is_empty() {
        format!("row {row}")
    } else {
        format!("{}, value {row}", path.trim_start())
    };
    Error::InvalidArgument(format!("{at}: {} is not a {t:?}", v.to_json()))
}

/// Present, non-nil values.
fn present<'a>(values: &[Option<&'a MsgValue>]) -> impl Iterator<Item = Option<&'a MsgValue>> {
    values
        .iter()
        .map(|v| v.filter(|v| !matches!(v, MsgValue::Nil)))
}

/// Each value through `f` (`None` for a value that is not of `t`, an error then).
fn scalars<'v, T>(
    t: &ItemType,
    values: &[Option<&'v MsgValue>],
    path: &str,
    f: impl Fn(&'v MsgValue) -> Option<T>,
) -> Result<Vec<Option<T>>> {
    present(values)
        .enumerate()
        .map(|(row, v)| match v {
            None => Ok(None),
            Some(m) => f(m).map(Some).ok_or_else(|| mismatch(t, m, row, path)),
        })
        .collect()
}

fn int<N: TryFrom<i64> + TryFrom<u64>>(m: &MsgValue) -> Option<N> {
    match m {
        MsgValue::Int(i) => N::try_from(*i).ok(),
        MsgValue::UInt(u) => N::try_from(*u).ok(),
        _ => None,
    }
}

fn float(m: &MsgValue) -> Option<f64> {
    match m {
        MsgValue::Float(f) => Some(*f),
        MsgValue::Int(i) => Some(*i as f64),
        MsgValue::UInt(u) => Some(*u as f64),
        _ => None,
    }
}

fn build(t: &ItemType, values: &[Option<&MsgValue>], path: &str) -> Result<ArrayRef> {
    macro_rules! ints {
        ($arr:ty, $native:ty) => {
            Arc::new(<$arr>::from(scalars(t, values, path, int::<$native>)?)) as ArrayRef
        };
    }
    Ok(match t {
        ItemType::Int { bits, signed } => match (bits, signed) {
            (8, true) => ints!(Int8Array, i8),
            (16, true) => ints!(Int16Array, i16),
            (32, true) => ints!(Int32Array, i32),
            (8, false) => ints!(UInt8Array, u8),
            (16, false) => ints!(UInt16Array, u16),
            (32, false) => ints!(UInt32Array, u32),
            (_, true) => ints!(Int64Array, i64),
            (_, false) => ints!(UInt64Array, u64),
        },
        ItemType::Float { bits: 32 } => {
            Arc::new(Float32Array::from(scalars(t, values, path, |m| {
                float(m).map(|f| f as f32)
            })?))
        }
        ItemType::Float { .. } => Arc::new(Float64Array::from(scalars(t, values, path, float)?)),
        ItemType::Timestamp { .. } => {
            let counts = Int64Array::from(scalars(t, values, path, int::<i64>)?);
            arrow::compute::cast(&counts, &arrow_type(t))
                .map_err(|e| Error::InvalidArgument(format!("{e}{path}")))?
        }
        ItemType::Bool => Arc::new(BooleanArray::from(scalars(t, values, path, |m| match m {
            MsgValue::Bool(b) => Some(*b),
            _ => None,
        })?)),
        ItemType::Text => Arc::new(StringArray::from(scalars(t, values, path, |m| match m {
            MsgValue::Str(s) => Some(s.as_str()),
            _ => None,
        })?)),
        ItemType::Bytes => Arc::new(BinaryArray::from(scalars(t, values, path, |m| match m {
            MsgValue::Bin(b) => Some(b.as_slice()),
            _ => None,
        })?)),
        ItemType::Json => Arc::new(StringArray::from_iter(
            present(values).map(|v| v.map(|m| m.to_json().to_string())),
        )),
        ItemType::Arrow(_) => {
            return Err(Error::InvalidArgument(format!(
                "{path}: Arrow batches are not msgpack values"
            )));
        }
        ItemType::List(item) => {
            let mut children: Vec<Option<&MsgValue>> = Vec::new();
            let mut offsets = Vec::with_capacity(values.len() + 1);
            offsets.push(0i32);
            let mut valid = Vec::with_capacity(values.len());
            for (row, v) in present(values).enumerate() {
                match v {
                    None => valid.push(false),
                    Some(MsgValue::Array(a)) => {
                        children.extend(a.iter().map(Some));
                        valid.push(true);
                    }
                    Some(m) => return Err(mismatch(t, m, row, path)),
                }
                let n = i32::try_from(children.len()).map_err(|_| {
                    Error::InvalidArgument(format!("over 2^31 list items in one batch{path}"))
                })?;
                offsets.push(n);
            }
            let child = build(item, &children, &format!("{path} list items"))?;
            let field = Arc::new(Field::new("item", arrow_type(item), true));
            let nulls = valid.contains(&false).then(|| NullBuffer::from(valid));
            Arc::new(
                ListArray::try_new(field, OffsetBuffer::new(offsets.into()), child, nulls)
                    .map_err(|e| Error::InvalidArgument(format!("{e}{path}")))?,
            )
        }
        ItemType::Struct(fields) => {
            let rows: Vec<Option<&[(MsgValue, MsgValue)]>> = present(values)
                .enumerate()
                .map(|(row, v)| match v {
                    None => Ok(None),
                    Some(MsgValue::Map(m)) => Ok(Some(m.as_slice())),
                    Some(m) => Err(mismatch(t, m, row, path)),
                })
                .collect::<Result<_>>()?;
            let valid: Vec<bool> = rows.iter().map(Option::is_some).collect();
            let mut columns = Vec::with_capacity(fields.len());
            for (name, ft) in fields {
                let of_field: Vec<Option<&MsgValue>> = rows
                    .iter()
                    .map(|r| {
                        r.and_then(|m| {
                            m.iter()
                                .find(|(k, _)| k.as_str() == Some(name.as_str()))
                                .map(|(_, v)| v)
                        })
                    })
                    .collect();
                columns.push(build(ft, &of_field, &format!("{path} field {name:?}"))?);
            }
            let nulls = valid.contains(&false).then(|| NullBuffer::from(valid));
            Arc::new(
                StructArray::try_new(struct_fields(fields), columns, nulls)
                    .map_err(|e| Error::InvalidArgument(format!("{e}{path}")))?,
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::Int32Type;

    fn s(x: &str) -> MsgValue {
        MsgValue::Str(x.into())
    }

    #[test]
    fn lists_of_structs_with_nulls() {
        let t = ItemType::List(Box::new(ItemType::Struct(vec![
            (
                "a".into(),
                ItemType::Int {
                    bits: 32,
                    signed: true,
                },
            ),
            ("b".into(), ItemType::Text),
        ])));
        let row0 = MsgValue::Array(vec![
            MsgValue::Map(vec![(s("a"), MsgValue::Int(1)), (s("b"), s("x"))]),
            MsgValue::Nil,
            MsgValue::Map(vec![(s("b"), s("y"))]),
        ]);
        let row2 = MsgValue::Array(vec![]);
        let vals = [Some(&row0), Some(&MsgValue::Nil), Some(&row2), None];
        let a = values_array(&t, &vals).unwrap();
        assert_eq!(a.data_type(), &arrow_type(&t));
        let l = a.as_list::<i32>();
        assert_eq!(l.len(), 4);
        assert_eq!(l.value_offsets(), &[0, 3, 3, 3, 3]);
        assert!(l.is_valid(0) && l.is_null(1) && l.is_valid(2) && l.is_null(3));
        let st = l.values().as_struct();
        assert!(st.is_valid(0) && st.is_null(1) && st.is_valid(2));
        let a_col = st.column(0).as_primitive::<Int32Type>();
        assert_eq!((a_col.value(0), a_col.is_null(2)), (1, true));
        assert_eq!(st.column(1).as_string::<i32>().value(2), "y");
    }

    #[test]
    fn mismatches_name_the_row_and_path() {
        let t = ItemType::List(Box::new(ItemType::Int {
            bits: 8,
            signed: false,
        }));
        let ok = MsgValue::Array(vec![MsgValue::Int(255)]);
        let bad = MsgValue::Array(vec![MsgValue::Int(1), MsgValue::Int(256)]);
        let e = values_array(&t, &[Some(&ok), Some(&bad)])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("list items, value 2") && e.contains("256"),
            "{e}"
        );
        let e = values_array(&ItemType::Bool, &[Some(&s("no"))])
            .unwrap_err()
            .to_string();
        assert!(e.contains("row 0") && e.contains("\"no\""), "{e}");
        let j = values_array(&ItemType::Json, &[Some(&ok), Some(&MsgValue::Nil)]).unwrap();
        assert_eq!(j.as_string::<i32>().value(0), "[255]");
        assert!(j.is_null(1));
    }
}
