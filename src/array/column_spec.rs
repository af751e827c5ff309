//! Table columns as their schema declares them, before any column file is opened, and
//! the opening of one CTable column (`spec/stores.md` §5.3) checked against that
//! declaration.
//!
//! A CTable's `_meta` schema JSON names every column's kind, which fixes its logical
//! type; the column's own frames are opened only when a query reads the column. A kind
//! whose element type the schema does not spell out (e.g. python-blosc2's `legacy`
//! columns) has no declaration here and is opened with the table.

use super::batch_array::{BatchArray, ItemKind, VarValues};
use super::dtype::{DType, Endian, TimeUnit};
use super::item_type::ItemType;
use super::ndarray::NdArray;
use super::table::{ColumnStorage, NullRule, TableColumn, column_path};
use crate::container::frame::Frame;
use crate::container::store::StoreRoot;
use crate::error::{Error, Result};
use serde_json::Value as Json;

/// What each row of a column holds.
#[derive(Debug, Clone, PartialEq)]
pub enum ColumnValues {
    /// One element (or a C-ordered sub-array of `item_shape` elements) per row.
    Fixed {
        /// Element type. For fixed-width text and bytes the width is the declared one;
        /// the stored width may be larger (python-blosc2 widens for null sentinels).
        dtype: DType,
        /// Shape of one row's value (empty for scalars).
        item_shape: Vec<u64>,
    },
    /// Variable-length UTF-8 text (offsets and bytes).
    Utf8,
    /// Variable-length items of a BatchArray (`vlstring`: text, `vlbytes`: bytes).
    Var(ItemKind),
    /// msgpack values of a declared type in a BatchArray (`list`, `struct`, `object`).
    Items(ItemType),
    /// `int32` codes into a BatchArray of distinct strings.
    Dictionary {
        /// The code of a null row.
        null_code: i64,
    },
}

/// How a column records nulls, as declared.
#[derive(Debug, Clone, PartialEq)]
pub enum NullDecl {
    /// Not nullable.
    None,
    /// A `<col>.notnull.b2nd` sidecar (absent when no row is null).
    Mask,
    /// In-band sentinel value (JSON: number, NaN as a string, or text).
    Sentinel(Json),
}

/// A column as the table's schema declares it.
#[derive(Debug, Clone)]
pub struct ColumnSpec {
    /// Column name.
    pub name: String,
    /// CTable kind (`int64`, `utf8`, …) or the bcolz dtype string.
    pub kind: String,
    /// What the rows hold.
    pub values: ColumnValues,
    /// Null storage.
    pub nulls: NullDecl,
    /// Time zone of a timestamp column.
    pub timezone: Option<String>,
    /// The CTable schema entry (`Null` for bcolz columns).
    pub(crate) entry: Json,
}

/// NumPy spelling of the element of a scalar CTable kind.
fn scalar_kind_dtype(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "int8" => "|i1",
        "int16" => "<i2",
        "int32" => "<i4",
        "int64" => "<i8",
        "uint8" => "|u1",
        "uint16" => "<u2",
        "uint32" => "<u4",
        "uint64" => "<u8",
        "float32" => "<f4",
        "float64" => "<f8",
        "complex64" => "<c8",
        "complex128" => "<c16",
        _ => return None,
    })
}

fn timestamp_dtype(entry: &Json) -> DType {
    let unit = match entry.get("unit").and_then(Json::as_str).unwrap_or("us") {
        "s" => TimeUnit::Second,
        "ms" => TimeUnit::Milli,
        "ns" => TimeUnit::Nano,
        _ => TimeUnit::Micro,
    };
    DType::DateTime {
        unit,
        mult: 1,
        endian: Endian::Little,
    }
}

/// What every CTable schema entry says whatever its kind: name, kind, null storage and
/// time zone.
struct EntryHead {
    name: String,
    kind: String,
    nulls: NullDecl,
    timezone: Option<String>,
}

impl EntryHead {
    fn parse(path: &str, entry: &Json) -> Result<EntryHead> {
        let name = entry
            .get("name")
            .and_then(Json::as_str)
            .ok_or_else(|| Error::corrupt(path, "_meta schema", "column without a name"))?
            .to_string();
        let kind = entry
            .get("kind")
            .and_then(Json::as_str)
            .unwrap_or("")
            .to_string();
        let nulls = if let Some(v) = entry.get("null_value") {
            NullDecl::Sentinel(v.clone())
        } else if entry.get("nullable").and_then(Json::as_bool) == Some(true) {
            NullDecl::Mask
        } else {
            NullDecl::None
        };
        let timezone = entry
            .get("timezone")
            .and_then(Json::as_str)
            .map(str::to_string);
        Ok(EntryHead {
            name,
            kind,
            nulls,
            timezone,
        })
    }
}

impl ColumnSpec {
    /// The declaration of one CTable schema entry. `Ok(None)` when the kind does not
    /// fix the element type (the column must be opened to learn it).
    ///
    /// # Errors
    /// An entry without a name, a BatchArray-backed kind (named), an unparsable
    /// `dtype_str` or `item_shape`.
    pub fn from_ctable_entry(path: &str, entry: &Json) -> Result<Option<ColumnSpec>> {
        let EntryHead {
            name,
            kind,
            nulls,
            timezone,
        } = EntryHead::parse(path, entry)?;
        let bad = |what: String| Error::corrupt(path, "_meta schema", what);
        let width = || {
            entry
                .get("max_length")
                .and_then(Json::as_u64)
                .unwrap_or(1)
                .max(1) as usize
        };
        let values = match kind.as_str() {
            "utf8" => ColumnValues::Utf8,
            "vlstring" => ColumnValues::Var(ItemKind::Text),
            "vlbytes" => ColumnValues::Var(ItemKind::Bytes),
            "list" | "object" | "struct" => ColumnValues::Items(ItemType::from_entry(
                path,
                &format!("column {name:?}"),
                entry,
            )?),
            "dictionary" => {
                check_dictionary_entry(path, &name, entry)?;
                ColumnValues::Dictionary {
                    null_code: entry.get("null_code").and_then(Json::as_i64).unwrap_or(-1),
                }
            }
            "bool" => fixed(DType::Bool),
            "timestamp" => fixed(timestamp_dtype(entry)),
            "string" => fixed(DType::Unicode {
                chars: width(),
                endian: Endian::Little,
            }),
            "bytes" => fixed(DType::Bytes(width())),
            "ndarray" => {
                let s = entry
                    .get("dtype_str")
                    .and_then(Json::as_str)
                    .ok_or_else(|| bad(format!("ndarray column {name:?} without dtype_str")))?;
                let dtype = DType::parse(s)
                    .map_err(|e| bad(format!("column {name:?}: dtype_str {s:?}: {e}")))?;
                let item_shape: Vec<u64> = entry
                    .get("item_shape")
                    .and_then(Json::as_array)
                    .and_then(|a| a.iter().map(Json::as_u64).collect())
                    .filter(|s: &Vec<u64>| !s.is_empty() && s.iter().all(|&d| d > 0))
                    .ok_or_else(|| {
                        bad(format!(
                            "ndarray column {name:?}: item_shape is not a list of positive integers"
                        ))
                    })?;
                ColumnValues::Fixed { dtype, item_shape }
            }
            k => match scalar_kind_dtype(k) {
                Some(s) => fixed(DType::parse(s).expect("known NumPy spelling")),
                None => return Ok(None),
            },
        };
        Ok(Some(ColumnSpec {
            name,
            kind,
            values,
            nulls,
            timezone,
            entry: entry.clone(),
        }))
    }

    /// The declaration an opened column implies (bcolz columns, undeclared kinds).
    pub fn of_opened(c: &TableColumn, entry: Json) -> ColumnSpec {
        ColumnSpec {
            name: c.name.clone(),
            kind: c.kind.clone(),
            values: match &c.storage {
                ColumnStorage::Fixed(a) => ColumnValues::Fixed {
                    dtype: a.dtype.clone(),
                    item_shape: a.geometry.shape[1..].to_vec(),
                },
                ColumnStorage::Utf8 { .. } => ColumnValues::Utf8,
                ColumnStorage::Var { kind, .. } => ColumnValues::Var(*kind),
                ColumnStorage::Items { item, .. } => ColumnValues::Items(item.clone()),
                ColumnStorage::Dictionary { null_code, .. } => ColumnValues::Dictionary {
                    null_code: *null_code,
                },
            },
            nulls: match &c.nulls {
                NullRule::None => NullDecl::None,
                NullRule::Mask(_) => NullDecl::Mask,
                NullRule::Sentinel(v) => NullDecl::Sentinel(v.clone()),
            },
            timezone: c.timezone.clone(),
            entry,
        }
    }

    /// True when values may be null by declaration (mask or sentinel).
    pub fn declares_nulls(&self) -> bool {
        !matches!(self.nulls, NullDecl::None)
    }

    /// Checks that an opened column stores what the declaration says: the same logical
    /// element type (byte order and text widths may differ; a sentinel-nullable bool is
    /// stored as `uint8`) and the same per-row shape.
    ///
    /// # Errors
    /// A mismatch, naming the column, the declaration and what is stored.
    pub fn check(&self, path: &str, c: &TableColumn) -> Result<()> {
        let ok = match (&self.values, &c.storage) {
            (ColumnValues::Utf8, ColumnStorage::Utf8 { .. }) => true,
            (ColumnValues::Var(k), ColumnStorage::Var { kind, .. }) => k == kind,
            (ColumnValues::Items(t), ColumnStorage::Items { item, .. }) => t == item,
            (ColumnValues::Dictionary { .. }, ColumnStorage::Dictionary { .. }) => true,
            (ColumnValues::Fixed { dtype, item_shape }, ColumnStorage::Fixed(a)) => {
                same_logical(dtype, &a.dtype) && a.geometry.shape[1..] == item_shape[..]
            }
            _ => false,
        };
        if ok {
            return Ok(());
        }
        let stored = match &c.storage {
            ColumnStorage::Fixed(a) => {
                format!("{:?} with row shape {:?}", a.dtype, &a.geometry.shape[1..])
            }
            ColumnStorage::Utf8 { .. } => "utf8 offsets and data".into(),
            ColumnStorage::Var { kind, .. } => format!("a BatchArray of {kind:?} items"),
            ColumnStorage::Items { item, .. } => format!("a BatchArray of {item:?} items"),
            ColumnStorage::Dictionary { .. } => "dictionary codes and values".into(),
        };
        Err(Error::corrupt(
            path,
            "CTable column",
            format!(
                "column {:?}: the schema declares kind {:?} ({:?}) but its files hold {stored}",
                self.name, self.kind, self.values
            ),
        ))
    }
}

fn fixed(dtype: DType) -> ColumnValues {
    ColumnValues::Fixed {
        dtype,
        item_shape: Vec::new(),
    }
}

/// Same logical element type, ignoring byte order and fixed text widths.
fn same_logical(declared: &DType, stored: &DType) -> bool {
    match (declared, stored) {
        (
            DType::Bool,
            DType::Bool
            | DType::Int {
                bytes: 1,
                signed: false,
                ..
            },
        ) => true,
        (
            DType::Int {
                bytes: a,
                signed: s,
                ..
            },
            DType::Int {
                bytes: b,
                signed: t,
                ..
            },
        ) => a == b && s == t,
        (DType::Float { bytes: a, .. }, DType::Float { bytes: b, .. })
        | (DType::Complex { bytes: a, .. }, DType::Complex { bytes: b, .. }) => a == b,
        (
            DType::DateTime {
                unit: u, mult: m, ..
            },
            DType::DateTime {
                unit: v, mult: n, ..
            },
        ) => u == v && m == n,
        (DType::Unicode { .. }, DType::Unicode { .. }) | (DType::Bytes(_), DType::Bytes(_)) => true,
        (a, b) => a == b,
    }
}

/// Opens the files of the CTable column of schema entry `entry` under `store`, as its
/// declaration `declared` says they are laid out (`None`: a kind the schema does not
/// type, opened as one array), and checks them against the table's `physical_rows`.
///
/// # Errors
/// Missing files (named), frames that are not what the schema declares, columns shorter
/// than the table.
pub async fn open_ctable_column(
    store: &StoreRoot,
    path: &str,
    entry: &Json,
    declared: Option<&ColumnValues>,
    physical_rows: u64,
) -> Result<TableColumn> {
    let EntryHead {
        name,
        kind,
        nulls,
        timezone,
    } = EntryHead::parse(path, entry)?;
    let rel = column_path(&name);
    let open = |suffix: &'static str| {
        let rel = format!("_cols/{rel}{suffix}");
        async move { store.open_frame(&rel).await }
    };
    let need = |f: Option<Frame>, suffix: &str| {
        f.ok_or_else(|| Error::NotFound {
            path: format!("{path}/_cols/{rel}{suffix}"),
            what: format!("column {name:?}"),
        })
    };
    let items = || async { BatchArray::open(need(open(".b2b").await?, ".b2b")?).await };
    let storage = match declared {
        Some(ColumnValues::Utf8) => {
            let (offsets, data) = futures::try_join!(open(".b2nd"), open(".utf8.b2nd"))?;
            ColumnStorage::Utf8 {
                offsets: NdArray::from_frame(need(offsets, ".b2nd")?, None)?,
                data: NdArray::from_frame(need(data, ".utf8.b2nd")?, None)?,
            }
        }
        Some(ColumnValues::Var(kind)) => ColumnStorage::Var {
            items: items().await?,
            kind: *kind,
        },
        Some(ColumnValues::Items(item)) => ColumnStorage::Items {
            items: items().await?,
            item: item.clone(),
        },
        Some(ColumnValues::Dictionary { null_code }) => {
            let (codes, values) = futures::try_join!(open(".b2nd"), open("_dict.b2b"))?;
            let codes = NdArray::from_frame(need(codes, ".b2nd")?, None)?;
            let values = dictionary_values(need(values, "_dict.b2b")?, &name).await?;
            ColumnStorage::Dictionary {
                codes,
                values: std::sync::Arc::new(values),
                null_code: *null_code,
            }
        }
        Some(ColumnValues::Fixed { .. }) | None => {
            let f = need(open(".b2nd").await?, ".b2nd")?;
            let override_dtype = (kind == "timestamp").then(|| timestamp_dtype(entry));
            ColumnStorage::Fixed(NdArray::from_frame(f, override_dtype)?)
        }
    };
    let rows_ok = match &storage {
        ColumnStorage::Fixed(a) => a.geometry.ndim() >= 1 && a.geometry.shape[0] >= physical_rows,
        ColumnStorage::Utf8 { offsets, data } => {
            offsets.geometry.ndim() == 1
                && offsets.geometry.shape[0] > physical_rows
                && offsets.itemsize() == 8
                && data.geometry.ndim() == 1
                && data.itemsize() == 1
        }
        ColumnStorage::Var { items, .. } | ColumnStorage::Items { items, .. } => {
            items.len() >= physical_rows
        }
        ColumnStorage::Dictionary { codes, .. } => {
            codes.geometry.ndim() == 1
                && codes.geometry.shape[0] >= physical_rows
                && codes.dtype
                    == DType::Int {
                        bytes: 4,
                        signed: true,
                        endian: Endian::Little,
                    }
        }
    };
    if !rows_ok {
        return Err(Error::corrupt(
            path,
            "CTable column",
            format!(
                "column {name:?} holds fewer rows than _valid_rows ({physical_rows}), \
                 or its utf8 offsets/data are not int64/uint8 vectors, or its dictionary \
                 codes are not a little-endian int32 vector"
            ),
        ));
    }
    let nulls = match nulls {
        // Nulls are nil items and null codes, whatever the entry declares.
        _ if matches!(
            storage,
            ColumnStorage::Var { .. }
                | ColumnStorage::Items { .. }
                | ColumnStorage::Dictionary { .. }
        ) =>
        {
            NullRule::None
        }
        NullDecl::None => NullRule::None,
        NullDecl::Sentinel(v) => NullRule::Sentinel(v),
        NullDecl::Mask => NullRule::Mask(match open(".notnull.b2nd").await? {
            Some(f) => Some(NdArray::from_frame(f, None)?),
            None => None,
        }),
    };
    Ok(TableColumn {
        name,
        kind,
        storage,
        nulls,
        timezone,
    })
}

/// Refuses a `dictionary` entry whose codes are not `int32` or whose values are not
/// `vlstring` (the only types python-blosc2 writes).
fn check_dictionary_entry(path: &str, name: &str, entry: &Json) -> Result<()> {
    let kind_of = |key: &str| {
        entry
            .get(key)
            .and_then(|t| t.get("kind"))
            .and_then(Json::as_str)
            .map(str::to_string)
    };
    for (key, want) in [("index_type", "int32"), ("value_type", "vlstring")] {
        if let Some(k) = kind_of(key).filter(|k| k != want) {
            return Err(Error::unsupported(
                path,
                format!("dictionary column {name:?} with {key} {k:?} (only {want} is read)"),
            ));
        }
    }
    Ok(())
}

/// Every value of a dictionary column's value store, which holds no nulls.
async fn dictionary_values(frame: Frame, name: &str) -> Result<VarValues> {
    let items = BatchArray::open(frame).await?;
    let values = items
        .read(0..items.len(), ItemKind::Text, &mut Default::default())
        .await?;
    if values.present.contains(&false) {
        return Err(Error::corrupt(
            items.display(),
            "dictionary values",
            format!("column {name:?}: a null among the distinct values"),
        ));
    }
    Ok(values)
}
