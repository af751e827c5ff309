//! The declared type of the msgpack items of a BatchArray-backed CTable column
//! (`spec/stores.md` §5.3): `list` columns (a list of an item spec per row), `struct`
//! columns stored as msgpack maps, and `object` columns (any msgpack value).

use super::dtype::TimeUnit;
use crate::error::{Error, Result};
use serde_json::Value as Json;

/// What one msgpack value of a column holds.
#[derive(Debug, Clone, PartialEq)]
pub enum ItemType {
    /// An integer of `bits` bits.
    Int {
        /// 8, 16, 32 or 64.
        bits: u8,
        /// Signed or not.
        signed: bool,
    },
    /// A float of 32 or 64 bits.
    Float {
        /// 32 or 64.
        bits: u8,
    },
    /// true / false.
    Bool,
    /// Integer counts of `unit` since 1970 (a CTable `timestamp` item).
    Timestamp {
        /// Second, Milli, Micro or Nano.
        unit: TimeUnit,
        /// The declared time zone, if any.
        timezone: Option<String>,
    },
    /// A msgpack str.
    Text,
    /// A msgpack bin.
    Bytes,
    /// An array of items of one type.
    List(Box<ItemType>),
    /// A map with these named fields (missing keys are null).
    Struct(Vec<(String, ItemType)>),
    /// Any msgpack value, shown as JSON text.
    Json,
    /// Not msgpack: the Arrow values of a BatchArray of Arrow batches, of the type its
    /// IPC schema message declares.
    Arrow(ArrowSchemaMessage),
}

/// An encapsulated Arrow IPC schema message (as `pyarrow.Schema.serialize()` writes it),
/// kept as bytes: this layer does not read Arrow.
#[derive(Clone, PartialEq)]
pub struct ArrowSchemaMessage(pub Vec<u8>);

impl std::fmt::Debug for ArrowSchemaMessage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ArrowSchema({} bytes)", self.0.len())
    }
}

impl ItemType {
    /// The type a CTable schema entry (or a list's `item`, a struct's field) declares.
    ///
    /// # Errors
    /// A kind with no mapping here (named, with `what` saying where it was found).
    pub fn from_entry(path: &str, what: &str, entry: &Json) -> Result<ItemType> {
        let kind = entry.get("kind").and_then(Json::as_str).unwrap_or("");
        let int = |bits, signed| Ok(ItemType::Int { bits, signed });
        match kind {
            "int8" => int(8, true),
            "int16" => int(16, true),
            "int32" => int(32, true),
            "int64" => int(64, true),
            "uint8" => int(8, false),
            "uint16" => int(16, false),
            "uint32" => int(32, false),
            "uint64" => int(64, false),
            "float32" => Ok(ItemType::Float { bits: 32 }),
            "float64" => Ok(ItemType::Float { bits: 64 }),
            "bool" => Ok(ItemType::Bool),
            "timestamp" => Ok(ItemType::Timestamp {
                unit: match entry.get("unit").and_then(Json::as_str).unwrap_or("us") {
                    "s" => TimeUnit::Second,
                    "ms" => TimeUnit::Milli,
                    "ns" => TimeUnit::Nano,
                    _ => TimeUnit::Micro,
                },
                timezone: entry
                    .get("timezone")
                    .and_then(Json::as_str)
                    .map(str::to_string),
            }),
            "string" | "vlstring" | "utf8" => Ok(ItemType::Text),
            "bytes" | "vlbytes" => Ok(ItemType::Bytes),
            "object" => Ok(ItemType::Json),
            "list" => {
                let item = entry.get("item").ok_or_else(|| {
                    Error::corrupt(
                        path,
                        "_meta schema",
                        format!("{what}: a list without \"item\""),
                    )
                })?;
                Ok(ItemType::List(Box::new(ItemType::from_entry(
                    path,
                    &format!("{what} item"),
                    item,
                )?)))
            }
            "struct" => {
                let fields = entry
                    .get("fields")
                    .and_then(Json::as_array)
                    .ok_or_else(|| {
                        Error::corrupt(
                            path,
                            "_meta schema",
                            format!("{what}: a struct without a \"fields\" list"),
                        )
                    })?;
                fields
                    .iter()
                    .map(|f| {
                        let name = f.get("name").and_then(Json::as_str).ok_or_else(|| {
                            Error::corrupt(
                                path,
                                "_meta schema",
                                format!("{what}: a struct field without a name"),
                            )
                        })?;
                        let t = ItemType::from_entry(path, &format!("{what}.{name}"), f)?;
                        Ok((name.to_string(), t))
                    })
                    .collect::<Result<Vec<_>>>()
                    .map(ItemType::Struct)
            }
            other => Err(Error::unsupported(
                path,
                format!("{what}: items of kind {other:?} in a msgpack column are not read yet"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_declarations() {
        let e = json!({"kind": "list", "item": {"kind": "struct", "fields": [
            {"name": "a", "kind": "int32"}, {"name": "b", "kind": "vlstring"},
            {"name": "c", "kind": "list", "item": {"kind": "float64"}}]}});
        assert_eq!(
            ItemType::from_entry("p", "column \"x\"", &e).unwrap(),
            ItemType::List(Box::new(ItemType::Struct(vec![
                (
                    "a".into(),
                    ItemType::Int {
                        bits: 32,
                        signed: true
                    }
                ),
                ("b".into(), ItemType::Text),
                (
                    "c".into(),
                    ItemType::List(Box::new(ItemType::Float { bits: 64 }))
                ),
            ])))
        );
        let e = json!({"kind": "list", "item": {"kind": "ndarray"}});
        let err = ItemType::from_entry("p", "column \"x\"", &e)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("column \"x\" item") && err.contains("\"ndarray\""),
            "{err}"
        );
        let e = json!({"kind": "timestamp", "unit": "ms", "timezone": "UTC"});
        assert_eq!(
            ItemType::from_entry("p", "x", &e).unwrap(),
            ItemType::Timestamp {
                unit: TimeUnit::Milli,
                timezone: Some("UTC".into())
            }
        );
    }
}
