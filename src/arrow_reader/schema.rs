//! The table contract: how arrays and tables become Arrow schemas.
//!
//! Array-like inputs: `dim_0 … dim_{n-1}` (Int64 coordinates, C order), then `value` for a
//! scalar dtype or one column per top-level struct field. Table-like inputs: their columns
//! in stored order. User attributes go into the schema metadata as JSON.

use super::msgpack_arrow;
use super::varlen::dictionary_type;
use crate::array::batch_array::ItemKind;
use crate::array::column_spec::ColumnValues;
use crate::array::dtype::{DType, Endian, TimeUnit};
use crate::array::table::Table;
use crate::dataset::Dataset;
use arrow::datatypes::{DataType, Field, Fields, Schema, TimeUnit as ArrowUnit};
use std::collections::HashMap;
use std::sync::Arc;

/// Schema metadata key holding the user attributes (JSON).
pub const ATTRS_KEY: &str = "blosc2.attributes";
/// Schema metadata key holding the container kind.
pub const KIND_KEY: &str = "blosc2.kind";
/// Schema metadata key holding the number of member files of a multi-file table.
pub const FILES_KEY: &str = "blosc2.files";

/// Arrow unit a datetime64/timedelta64 unit maps to, and the factor to multiply by.
pub fn time_mapping(unit: TimeUnit, mult: i64) -> (ArrowUnit, i64) {
    let (u, f) = match unit {
        TimeUnit::Second | TimeUnit::Generic => (ArrowUnit::Second, 1),
        TimeUnit::Milli => (ArrowUnit::Millisecond, 1),
        TimeUnit::Micro => (ArrowUnit::Microsecond, 1),
        TimeUnit::Nano => (ArrowUnit::Nanosecond, 1),
        TimeUnit::Minute => (ArrowUnit::Second, 60),
        TimeUnit::Hour => (ArrowUnit::Second, 3600),
        TimeUnit::Day => (ArrowUnit::Second, 86_400),
        TimeUnit::Week => (ArrowUnit::Second, 604_800),
        // Calendar units are converted to days by the reader, then to seconds.
        TimeUnit::Year | TimeUnit::Month => (ArrowUnit::Second, 86_400),
        // No finer unit exists in Arrow: nanoseconds, truncated.
        TimeUnit::Pico | TimeUnit::Femto | TimeUnit::Atto => (ArrowUnit::Nanosecond, 1),
    };
    (u, f * mult.max(1))
}

/// The Arrow type of one element of `dtype`.
pub fn arrow_type(dtype: &DType) -> DataType {
    match dtype {
        DType::Bool => DataType::Boolean,
        DType::Int { bytes, signed, .. } => match (bytes, signed) {
            (1, true) => DataType::Int8,
            (2, true) => DataType::Int16,
            (4, true) => DataType::Int32,
            (_, true) => DataType::Int64,
            (1, false) => DataType::UInt8,
            (2, false) => DataType::UInt16,
            (4, false) => DataType::UInt32,
            (_, false) => DataType::UInt64,
        },
        DType::Float { bytes: 2, .. } => DataType::Float16,
        DType::Float { bytes: 4, .. } => DataType::Float32,
        DType::Float { .. } => DataType::Float64,
        DType::Complex { bytes, .. } => {
            let t = if *bytes == 8 {
                DataType::Float32
            } else {
                DataType::Float64
            };
            DataType::Struct(Fields::from(vec![
                Field::new("real", t.clone(), false),
                Field::new("imag", t, false),
            ]))
        }
        DType::DateTime {
            unit: TimeUnit::Day,
            mult: 1,
            ..
        } => DataType::Date32,
        DType::DateTime { unit, mult, .. } => {
            DataType::Timestamp(time_mapping(*unit, *mult).0, None)
        }
        DType::TimeDelta { unit, mult, .. } => DataType::Duration(time_mapping(*unit, *mult).0),
        DType::Bytes(_) => DataType::Binary,
        DType::Unicode { .. } => DataType::Utf8,
        DType::Void(n) => DataType::FixedSizeBinary(*n as i32),
        DType::Struct(fields) => DataType::Struct(Fields::from(
            fields
                .iter()
                .map(|f| struct_field(&f.name, &f.dtype, &f.shape))
                .collect::<Vec<_>>(),
        )),
    }
}

/// True when values of `dtype` may be null (NaT).
fn nullable(dtype: &DType) -> bool {
    matches!(dtype, DType::DateTime { .. } | DType::TimeDelta { .. })
}

/// A (possibly sub-array) field of `dtype`.
pub fn struct_field(name: &str, dtype: &DType, shape: &[usize]) -> Field {
    let t = arrow_type(dtype);
    let n: usize = shape.iter().product();
    if shape.is_empty() {
        Field::new(name, t, nullable(dtype))
    } else {
        Field::new(
            name,
            DataType::FixedSizeList(Arc::new(Field::new("item", t, nullable(dtype))), n as i32),
            false,
        )
    }
}

/// The Arrow schema of a dataset (see the module doc for the contract).
pub fn dataset_schema(ds: &Dataset) -> Schema {
    let mut meta = HashMap::new();
    meta.insert(ATTRS_KEY.to_string(), ds.attributes_json().to_string());
    match ds {
        Dataset::Array(a) => {
            meta.insert(KIND_KEY.to_string(), format!("{:?}", a.kind).to_lowercase());
            let mut fields: Vec<Field> = (0..a.geometry.ndim())
                .map(|d| Field::new(format!("dim_{d}"), DataType::Int64, false))
                .collect();
            match &a.dtype {
                DType::Struct(fs) => {
                    fields.extend(fs.iter().map(|f| struct_field(&f.name, &f.dtype, &f.shape)))
                }
                d => fields.push(struct_field("value", d, &[])),
            }
            Schema::new_with_metadata(fields, meta)
        }
        Dataset::Table(t) => {
            meta.insert(KIND_KEY.to_string(), format!("{:?}", t.kind).to_lowercase());
            Schema::new_with_metadata(table_fields(t), meta)
        }
    }
}

/// Fields of a table's columns, from their declarations (no column file is opened).
pub fn table_fields(t: &Table) -> Vec<Field> {
    t.specs
        .iter()
        .map(|c| {
            let (t, shape, elem_nullable) = match &c.values {
                ColumnValues::Utf8 => (DataType::Utf8, &[][..], false),
                // Items may be nil, codes the null code, whatever the declaration says.
                ColumnValues::Var(ItemKind::Text) => (DataType::Utf8View, &[][..], true),
                ColumnValues::Var(ItemKind::Bytes) => (DataType::Binary, &[][..], true),
                ColumnValues::Dictionary { .. } => (dictionary_type(), &[][..], true),
                ColumnValues::Items(t) => (msgpack_arrow::arrow_type(t), &[][..], true),
                ColumnValues::Fixed { dtype, item_shape } => {
                    let t = match (c.kind.as_str(), arrow_type(dtype)) {
                        ("bool", _) => DataType::Boolean,
                        ("timestamp", DataType::Timestamp(u, _)) => {
                            DataType::Timestamp(u, c.timezone.clone().map(Into::into))
                        }
                        (_, t) => t,
                    };
                    (t, &item_shape[..], nullable(dtype))
                }
            };
            let nullable = c.declares_nulls() || elem_nullable;
            if shape.is_empty() {
                Field::new(&c.name, t, nullable)
            } else {
                let n: u64 = shape.iter().product();
                Field::new(
                    &c.name,
                    DataType::FixedSizeList(Arc::new(Field::new("item", t, false)), n as i32),
                    nullable,
                )
            }
        })
        .collect()
}

/// True when the dtype's multi-byte values are stored big-endian.
pub fn is_big_endian(dtype: &DType) -> bool {
    matches!(
        dtype,
        DType::Int {
            endian: Endian::Big,
            ..
        } | DType::Float {
            endian: Endian::Big,
            ..
        } | DType::Complex {
            endian: Endian::Big,
            ..
        } | DType::DateTime {
            endian: Endian::Big,
            ..
        } | DType::TimeDelta {
            endian: Endian::Big,
            ..
        } | DType::Unicode {
            endian: Endian::Big,
            ..
        }
    )
}
