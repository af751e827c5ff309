//! Tables: bcolz ctables (`spec/bcolz.md` §2) and python-blosc2 CTables (`spec/stores.md`
//! §5) as ordered, named columns over [`NdArray`]s, with deleted rows and null rules.
//!
//! Column rows are dimension 0 of each column array; only the first `physical_rows` rows
//! count, and a CTable row is live iff `_valid_rows[row]`.

use super::batch_array::{BatchArray, ItemFilter, ItemKind, Serializer, StreamBlock, VarValues};
use super::chunk_local_index::ChunkLocalIndex;
use super::column_spec::{ColumnSpec, open_ctable_column};
use super::computed::ComputedColumn;
use super::dtype::DType;
use super::full_index::{ColumnIndex, FullIndex};
use super::item_type::{ArrowSchemaMessage, ItemType};
use super::ndarray::{NdArray, ReadStats};
use super::opsi_index::OpsiIndex;
use super::ranked_text_index::RankedTextIndex;
use super::summary::ColumnSummary;
use crate::container::bcolz::{BcolzCarray, ctable_columns};
use crate::container::frame::Frame;
use crate::container::store::StoreRoot;
use crate::error::{Error, Result};
use crate::io::Location;
use crate::msgpack::MsgValue;
use futures::{StreamExt, TryStreamExt};
use serde_json::Value as Json;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

/// How a column's values are stored.
#[derive(Debug, Clone)]
// A handful per table; boxing buys nothing.
#[allow(clippy::large_enum_variant)]
pub enum ColumnStorage {
    /// One fixed-size element (or sub-array) per row.
    Fixed(NdArray),
    /// UTF-8 text: int64 offsets (rows + 1) and the bytes.
    Utf8 {
        /// Offsets array.
        offsets: NdArray,
        /// Bytes array (uint8).
        data: NdArray,
    },
    /// One BatchArray item (text or bytes, `nil` for null) per row.
    Var {
        /// The items.
        items: BatchArray,
        /// What they are.
        kind: ItemKind,
    },
    /// One msgpack value of a declared type per row (`list`, `struct`, `object`).
    Items {
        /// The items.
        items: BatchArray,
        /// Their declared type.
        item: ItemType,
    },
    /// `int32` codes into the distinct values (read when the column is opened).
    Dictionary {
        /// One code per row.
        codes: NdArray,
        /// The distinct values, in code order.
        values: Arc<VarValues>,
        /// The code of a null row.
        null_code: i64,
    },
}

/// How nulls are recorded.
#[derive(Debug, Clone)]
// One per column.
#[allow(clippy::large_enum_variant)]
pub enum NullRule {
    /// Not nullable.
    None,
    /// `<col>.notnull.b2nd` (true = present); `None` inside when the sidecar is absent.
    Mask(Option<NdArray>),
    /// In-band sentinel value (JSON: number, NaN as a string, or text).
    Sentinel(Json),
}

/// One column of a table.
#[derive(Debug, Clone)]
pub struct TableColumn {
    /// Column name.
    pub name: String,
    /// CTable kind (`int64`, `utf8`, …) or the bcolz dtype string.
    pub kind: String,
    /// Values.
    pub storage: ColumnStorage,
    /// Nulls.
    pub nulls: NullRule,
    /// Time zone of a CTable timestamp column.
    pub timezone: Option<String>,
}

impl TableColumn {
    /// The element dtype (uint8 for UTF-8 text and BatchArray items, int32 for
    /// dictionary codes).
    pub fn dtype(&self) -> &DType {
        static BYTE: DType = DType::Int {
            bytes: 1,
            signed: false,
            endian: super::dtype::Endian::Little,
        };
        match &self.storage {
            ColumnStorage::Fixed(a) => &a.dtype,
            ColumnStorage::Utf8 { data, .. } => &data.dtype,
            ColumnStorage::Var { .. } | ColumnStorage::Items { .. } => &BYTE,
            ColumnStorage::Dictionary { codes, .. } => &codes.dtype,
        }
    }
    /// The array whose dimension 0 is the column's rows (the offsets of a UTF-8 column,
    /// the codes of a dictionary column); `None` for BatchArray items.
    pub fn rows_array(&self) -> Option<&NdArray> {
        match &self.storage {
            ColumnStorage::Fixed(a) => Some(a),
            ColumnStorage::Utf8 { offsets, .. } => Some(offsets),
            ColumnStorage::Dictionary { codes, .. } => Some(codes),
            ColumnStorage::Var { .. } | ColumnStorage::Items { .. } => None,
        }
    }

    /// The column's arrays (values, offsets, codes and null mask), to change them all.
    fn arrays_mut(&mut self) -> Vec<&mut NdArray> {
        let mut v: Vec<&mut NdArray> = match &mut self.storage {
            ColumnStorage::Fixed(a) => vec![a],
            ColumnStorage::Utf8 { offsets, data } => vec![offsets, data],
            ColumnStorage::Dictionary { codes, .. } => vec![codes],
            ColumnStorage::Var { .. } | ColumnStorage::Items { .. } => Vec::new(),
        };
        if let NullRule::Mask(Some(m)) = &mut self.nulls {
            v.push(m);
        }
        v
    }

    /// The column's arrays (values, offsets, codes and null mask).
    fn arrays(&self) -> Vec<&NdArray> {
        let mut v: Vec<&NdArray> = match &self.storage {
            ColumnStorage::Fixed(a) => vec![a],
            ColumnStorage::Utf8 { offsets, data } => vec![offsets, data],
            ColumnStorage::Dictionary { codes, .. } => vec![codes],
            ColumnStorage::Var { .. } | ColumnStorage::Items { .. } => Vec::new(),
        };
        if let NullRule::Mask(Some(m)) = &self.nulls {
            v.push(m);
        }
        v
    }

    /// An estimate of the heap memory the opened column holds (see
    /// [`NdArray::heap_bytes`]; a dictionary's values included).
    pub fn heap_bytes(&self) -> usize {
        let arrays: usize = self.arrays().into_iter().map(NdArray::heap_bytes).sum();
        let other = match &self.storage {
            ColumnStorage::Var { items, .. } | ColumnStorage::Items { items, .. } => {
                items.heap_bytes()
            }
            ColumnStorage::Dictionary { values, .. } => values.heap_bytes(),
            ColumnStorage::Fixed(_) | ColumnStorage::Utf8 { .. } => 0,
        };
        let sentinel = match &self.nulls {
            NullRule::Sentinel(j) => crate::container::json_heap_bytes(j),
            _ => 0,
        };
        arrays + other + sentinel + self.name.len() + self.kind.len()
    }

    /// Shape of one row's value (empty for scalars).
    pub fn item_shape(&self) -> Vec<u64> {
        match &self.storage {
            ColumnStorage::Fixed(a) => a.geometry.shape[1..].to_vec(),
            _ => Vec::new(),
        }
    }
}

/// What kind of table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableKind {
    /// bcolz ctable directory.
    Bcolz,
    /// python-blosc2 CTable (`.b2d` / `.b2z`).
    CTable,
    /// A python-blosc2 BatchArray, ListArray or ObjectArray as one column named `value`.
    BatchArray,
}

/// Values of one column for a row range.
#[derive(Debug, Clone)]
pub enum ColumnData {
    /// C-ordered element bytes, `rows × item_size` (a dictionary column's int32 codes).
    Fixed(Vec<u8>),
    /// Offsets relative to `data` (rows + 1 entries) and the text bytes.
    Utf8 {
        /// rows + 1 offsets starting at 0.
        offsets: Vec<i64>,
        /// UTF-8 bytes.
        data: Vec<u8>,
    },
    /// BatchArray items (text or bytes), with their nulls.
    Var(VarValues),
    /// BatchArray items as msgpack values.
    Values(Vec<MsgValue>),
    /// BatchArray blocks serialized as Arrow IPC streams, and the items wanted of each.
    Streams(Vec<StreamBlock>),
}

/// A table over column arrays.
#[derive(Debug, Clone)]
pub struct Table {
    /// bcolz or CTable.
    pub kind: TableKind,
    /// Columns in stored order, as declared.
    pub specs: Vec<ColumnSpec>,
    /// Columns opened so far (by index).
    opened: Vec<OnceLock<TableColumn>>,
    /// Scan granularity.
    layout: RowLayout,
    /// Rows stored (live or deleted), up to the last live row.
    pub physical_rows: u64,
    /// `_valid_rows` (CTable only).
    pub valid: Option<NdArray>,
    /// Live rows.
    pub live_rows: u64,
    /// Per chunk of `valid`: every row of it is live (scans then skip reading it).
    live_chunks: Vec<bool>,
    /// User attributes.
    pub attrs: Json,
    /// The raw schema (CTable) for `inspect`.
    pub schema_json: Json,
    /// Virtual columns defined by expressions over the stored ones (CTable).
    pub computed: Vec<ComputedColumn>,
    /// The `index_catalog` vlmeta of a CTable's `_meta` (`Null` when absent).
    pub index_catalog: Json,
    /// The `value_epoch` vlmeta of a CTable's `_meta`.
    pub value_epoch: Option<i64>,
    store: Option<std::sync::Arc<StoreRoot>>,
    display: String,
}

/// Rows per chunk and per block that scans and value pruning align to.
#[derive(Debug, Clone, Copy)]
struct RowLayout {
    chunk_rows: u64,
    block_rows: u64,
}

/// Parses Python's `json.dumps` output, which may hold bare `NaN` / `Infinity` tokens.
fn lenient_json(s: &str) -> std::result::Result<Json, serde_json::Error> {
    match serde_json::from_str(s) {
        Ok(v) => Ok(v),
        Err(_) => {
            let fixed = s
                .replace("-Infinity", "\"-Infinity\"")
                .replace("Infinity", "\"Infinity\"")
                .replace("NaN", "\"NaN\"");
            serde_json::from_str(&fixed)
        }
    }
}

impl Table {
    /// How errors name the table.
    pub fn display(&self) -> &str {
        &self.display
    }

    /// This table without the chunks its reads keep: see [`NdArray::detached`]. The
    /// columns opened so far stay open.
    pub fn detached(&self) -> Table {
        let mut t = self.clone();
        for c in t.opened.iter_mut().filter_map(OnceLock::get_mut) {
            for a in c.arrays_mut() {
                *a = a.detached();
            }
        }
        t.valid = t.valid.as_ref().map(NdArray::detached);
        t
    }

    /// The arrays of the columns opened so far, and `_valid_rows`.
    fn open_arrays(&self) -> impl Iterator<Item = &NdArray> {
        let columns = self.opened_columns().flat_map(|(_, c)| c.arrays());
        columns.chain(self.valid.iter())
    }

    /// The BatchArrays of the columns opened so far.
    fn open_batch_arrays(&self) -> impl Iterator<Item = &BatchArray> {
        self.opened_columns().filter_map(|(_, c)| match &c.storage {
            ColumnStorage::Var { items, .. } | ColumnStorage::Items { items, .. } => Some(items),
            _ => None,
        })
    }

    /// The bytes its columns' recent reads keep: compressed chunks of arrays, decoded
    /// batches of BatchArrays.
    pub fn kept_chunk_bytes(&self) -> usize {
        self.open_arrays()
            .map(NdArray::kept_chunk_bytes)
            .sum::<usize>()
            + self
                .open_batch_arrays()
                .map(BatchArray::kept_bytes)
                .sum::<usize>()
    }

    /// Drops the chunks (and decoded batches) its columns' recent reads keep.
    pub fn release_kept_chunks(&self) {
        self.open_arrays().for_each(NdArray::release_kept_chunks);
        self.open_batch_arrays().for_each(BatchArray::release_kept);
    }

    /// An estimate of the heap memory the table holds: its metadata, the columns opened
    /// so far and its store's index (not the chunks recent reads keep).
    pub fn heap_bytes(&self) -> usize {
        use crate::container::json_heap_bytes;
        let columns: usize = self.opened_columns().map(|(_, c)| c.heap_bytes()).sum();
        let specs = self.specs.len() * std::mem::size_of::<ColumnSpec>()
            + self.opened.len() * std::mem::size_of::<OnceLock<TableColumn>>();
        let computed: usize = self
            .computed
            .iter()
            .map(|c| c.name.len() + c.deps.iter().map(|d| d.len() + 24).sum::<usize>() + 256)
            .sum();
        columns
            + specs
            + computed
            + self.valid.as_ref().map_or(0, NdArray::heap_bytes)
            + self.live_chunks.len()
            + json_heap_bytes(&self.attrs)
            + json_heap_bytes(&self.schema_json)
            + json_heap_bytes(&self.index_catalog)
            + self.store.as_ref().map_or(0, |s| s.heap_bytes())
            + self.display.len()
    }

    /// Opens a bcolz ctable directory (`__rootdirs__` present).
    ///
    /// # Errors
    /// Missing column directories, inconsistent lengths.
    pub async fn open_bcolz(dir: &Location) -> Result<Table> {
        let names = ctable_columns(dir).await?.ok_or_else(|| Error::NotFound {
            path: dir.child("__rootdirs__").display().to_string(),
            what: "bcolz ctable column list".into(),
        })?;
        let mut columns = Vec::with_capacity(names.len());
        let mut nrows = None;
        for name in names {
            let c = BcolzCarray::open(&dir.child(&name)).await?;
            let kind = c.dtype.clone();
            let arr = NdArray::from_bcolz(c, None)?;
            let n = arr.geometry.shape[0];
            if *nrows.get_or_insert(n) != n {
                return Err(Error::corrupt(
                    dir.display(),
                    "ctable",
                    format!(
                        "column {name:?} has {n} rows, others {}",
                        nrows.unwrap_or(0)
                    ),
                ));
            }
            columns.push(TableColumn {
                name,
                kind,
                storage: ColumnStorage::Fixed(arr),
                nulls: NullRule::None,
                timezone: None,
            });
        }
        let attrs = match dir.child("__attrs__").get_all().await {
            Ok(b) => serde_json::from_slice(&b).unwrap_or(Json::Null),
            Err(Error::NotFound { .. }) => Json::Object(Default::default()),
            Err(e) => return Err(e),
        };
        // bcolz has no table schema: each column's `meta/` is its declaration, so the
        // columns are opened (metadata only, no chunk files) with the table.
        let chunk_rows = columns
            .first()
            .and_then(TableColumn::rows_array)
            .map_or(0, |a| a.geometry.chunkshape[0]);
        Ok(Table::of_opened_columns(
            TableKind::Bcolz,
            columns,
            chunk_rows,
            nrows.unwrap_or(0),
            attrs,
            dir.display().to_string(),
        ))
    }

    /// A table of columns opened with it, every row live, no schema of its own (each
    /// column's declaration is what it stores), scanned `chunk_rows` at a time.
    fn of_opened_columns(
        kind: TableKind,
        columns: Vec<TableColumn>,
        chunk_rows: u64,
        rows: u64,
        attrs: Json,
        display: String,
    ) -> Table {
        Table {
            kind,
            specs: columns
                .iter()
                .map(|c| ColumnSpec::of_opened(c, Json::Null))
                .collect(),
            opened: columns.into_iter().map(OnceLock::from).collect(),
            layout: RowLayout {
                chunk_rows,
                block_rows: chunk_rows,
            },
            physical_rows: rows,
            valid: None,
            live_rows: rows,
            live_chunks: Vec::new(),
            attrs,
            schema_json: Json::Null,
            computed: Vec::new(),
            index_catalog: Json::Null,
            value_epoch: None,
            store: None,
            display,
        }
    }

    /// A python-blosc2 BatchArray, ListArray or ObjectArray frame (a `.b2b` / `.b2f` file
    /// or store leaf) as a table of one column, `value`, one row per item: a ListArray's
    /// declared lists, the text or bytes of a BatchArray a CTable column left
    /// (`ctable_varlen_scalar`), else any msgpack value as JSON text.
    ///
    /// # Errors
    /// Item kinds with no mapping, BatchArray errors.
    pub async fn open_batch_array(frame: Frame) -> Result<Table> {
        let path = frame.display().to_string();
        let layer = |name: &str| {
            frame
                .metalayer(name)
                .and_then(|m| crate::msgpack::parse(&m.content).ok())
                .map(|(v, _)| v.to_json())
        };
        let list_item = match layer("listarray") {
            Some(mut entry) => {
                let Some(fields) = entry.as_object_mut() else {
                    return Err(Error::corrupt(
                        &path,
                        "listarray metalayer",
                        format!("not a map: {entry}"),
                    ));
                };
                fields.insert("kind".into(), Json::from("list"));
                Some(ItemType::from_entry(&path, "the ListArray", &entry)?)
            }
            None => None,
        };
        let py_type = layer("ctable_varlen_scalar")
            .and_then(|m| m.get("py_type").and_then(Json::as_str).map(str::to_string));
        let mut attrs = frame.attributes_json();
        // The batch lengths are the container's bookkeeping, not user attributes.
        if let Some(o) = attrs.as_object_mut() {
            o.remove("_batch_array_metadata");
        }
        let items = BatchArray::open(frame).await?;
        // A BatchArray of Arrow batches of no declared item type: its values, of the
        // type its schema message declares.
        let arrow_item = match (items.serializer(), &list_item) {
            (
                Serializer::ArrowIpc {
                    schema: Some(s), ..
                },
                None,
            ) => Some(ItemType::Arrow(ArrowSchemaMessage(s.clone()))),
            (Serializer::ArrowIpc { schema: None, .. }, None) => {
                return Err(Error::unsupported(
                    &path,
                    "a BatchArray of Arrow batches with no declared item type and no \
                     arrow_schema",
                ));
            }
            _ => None,
        };
        let rows = items.len();
        let batch_rows = items.batch_len(0).unwrap_or(0);
        let (kind, storage) = match (list_item, arrow_item, py_type.as_deref()) {
            (Some(item), _, _) => ("list", ColumnStorage::Items { items, item }),
            (None, Some(item), _) => ("arrow", ColumnStorage::Items { items, item }),
            (None, None, Some("str")) => (
                "vlstring",
                ColumnStorage::Var {
                    items,
                    kind: ItemKind::Text,
                },
            ),
            (None, None, Some("bytes")) => (
                "vlbytes",
                ColumnStorage::Var {
                    items,
                    kind: ItemKind::Bytes,
                },
            ),
            _ => (
                "object",
                ColumnStorage::Items {
                    items,
                    item: ItemType::Json,
                },
            ),
        };
        let column = TableColumn {
            name: "value".into(),
            kind: kind.into(),
            storage,
            nulls: NullRule::None,
            timezone: None,
        };
        Ok(Table::of_opened_columns(
            TableKind::BatchArray,
            vec![column],
            batch_rows,
            rows,
            attrs,
            path,
        ))
    }

    /// Opens a CTable whose root is `store` (a `.b2d` directory or `.b2z` zip).
    ///
    /// # Errors
    /// A missing `_meta`, a `kind` other than `"ctable"`, column kinds not supported
    /// (named), missing column files.
    pub async fn open_ctable(store: &StoreRoot) -> Result<Table> {
        let path = store.display().to_string();
        let meta = store
            .open_frame("_meta.b2f")
            .await?
            .ok_or_else(|| Error::NotFound {
                path: format!("{path}/_meta.b2f"),
                what: "CTable metadata".into(),
            })?;
        let kind = meta.vlmeta_value("kind");
        if kind.as_ref().and_then(|k| k.as_str()) != Some("ctable") {
            return Err(Error::corrupt(
                &path,
                "_meta",
                format!("vlmeta \"kind\" is {kind:?}, expected \"ctable\""),
            ));
        }
        let schema_text = meta
            .vlmeta_value("schema")
            .and_then(|v| v.as_str().map(str::to_string))
            .ok_or_else(|| Error::corrupt(&path, "_meta", "no \"schema\" vlmeta"))?;
        let schema = lenient_json(&schema_text)
            .map_err(|e| Error::corrupt(&path, "_meta schema", e.to_string()))?;
        let cols = schema
            .get("columns")
            .and_then(Json::as_array)
            .ok_or_else(|| Error::corrupt(&path, "_meta schema", "no \"columns\" list"))?;
        let valid_frame =
            store
                .open_frame("_valid_rows.b2nd")
                .await?
                .ok_or_else(|| Error::NotFound {
                    path: format!("{path}/_valid_rows.b2nd"),
                    what: "row liveness".into(),
                })?;
        let valid = NdArray::from_frame(valid_frame, None)?;
        if valid.geometry.ndim() != 1 || valid.dtype != DType::Bool {
            return Err(Error::corrupt(&path, "_valid_rows", "not a 1-D bool array"));
        }
        let Liveness {
            live_rows,
            physical_rows,
            live_chunks,
        } = liveness(&valid).await?;
        // Columns are declared by the schema and opened when a query reads them; only a
        // kind the schema does not type is opened now (concurrently: a remote table
        // costs about one round trip, not one per column).
        let declared: Vec<Option<ColumnSpec>> = cols
            .iter()
            .map(|c| ColumnSpec::from_ctable_entry(&path, c))
            .collect::<Result<_>>()?;
        let undeclared_idx: Vec<usize> =
            (0..cols.len()).filter(|&i| declared[i].is_none()).collect();
        let path_ref = path.as_str();
        let undeclared: Vec<(usize, TableColumn)> =
            futures::stream::iter(undeclared_idx.into_iter().map(|i| async move {
                let c = open_ctable_column(store, path_ref, &cols[i], None, physical_rows).await?;
                Ok::<_, Error>((i, c))
            }))
            .buffered(16)
            .try_collect()
            .await?;
        let opened: Vec<OnceLock<TableColumn>> = cols.iter().map(|_| OnceLock::new()).collect();
        let mut specs = Vec::with_capacity(cols.len());
        let mut undeclared = undeclared.into_iter();
        for (i, d) in declared.into_iter().enumerate() {
            specs.push(match d {
                Some(spec) => spec,
                None => {
                    let (j, c) = undeclared.next().expect("one opened column per undeclared");
                    debug_assert_eq!(i, j);
                    let spec = ColumnSpec::of_opened(&c, cols[i].clone());
                    let _ = opened[i].set(c);
                    spec
                }
            });
        }
        let attrs = match store.open_frame("_vlmeta.b2f").await? {
            Some(f) => f.attributes_json(),
            None => Json::Object(Default::default()),
        };
        // Scan granularity: the first column's declared chunks and blocks, else those of
        // `_valid_rows` (python-blosc2 gives every column of a table the same defaults).
        let declared_len = |key: &str| {
            cols.first()
                .and_then(|c| c.get(key))
                .and_then(Json::as_array)
                .and_then(|a| a.first())
                .and_then(Json::as_u64)
        };
        let layout = RowLayout {
            chunk_rows: declared_len("chunks").unwrap_or(valid.geometry.chunkshape[0]),
            block_rows: declared_len("blocks").unwrap_or(valid.geometry.blockshape[0]),
        };
        Ok(Table {
            kind: TableKind::CTable,
            specs,
            opened,
            layout,
            physical_rows,
            valid: Some(valid),
            live_rows,
            live_chunks,
            attrs,
            computed: ComputedColumn::from_schema(&schema),
            schema_json: schema,
            index_catalog: meta
                .vlmeta_value("index_catalog")
                .map_or(Json::Null, |v| v.to_json()),
            value_epoch: meta.vlmeta_value("value_epoch").and_then(|v| v.as_i64()),
            store: Some(std::sync::Arc::new(store.clone())),
            display: path,
        })
    }

    /// Number of columns.
    pub fn ncolumns(&self) -> usize {
        self.specs.len()
    }

    /// Column `col` if it has been opened (see [`Table::open_column`]).
    pub fn column(&self, col: usize) -> Option<&TableColumn> {
        self.opened.get(col).and_then(OnceLock::get)
    }

    /// Column `col`, opening its files on first use and checking them against the
    /// schema's declaration.
    ///
    /// # Errors
    /// `col` out of range, missing or mismatching column files.
    pub async fn open_column(&self, col: usize) -> Result<&TableColumn> {
        if let Some(c) = self.column(col) {
            return Ok(c);
        }
        let (Some(spec), Some(store)) = (self.specs.get(col), &self.store) else {
            return Err(Error::InvalidArgument(format!(
                "{}: no column {col} (the table has {})",
                self.display,
                self.specs.len()
            )));
        };
        let c = open_ctable_column(
            store,
            &self.display,
            &spec.entry,
            Some(&spec.values),
            self.physical_rows,
        )
        .await?;
        spec.check(&self.display, &c)?;
        // A concurrent opener may have won; both opened the same files.
        let _ = self.opened[col].set(c);
        Ok(self.opened[col].get().expect("set above"))
    }

    /// Opens the columns in `cols` that are not open yet, concurrently.
    ///
    /// # Errors
    /// As [`Table::open_column`].
    pub async fn open_columns(&self, cols: impl IntoIterator<Item = usize>) -> Result<()> {
        futures::stream::iter(cols.into_iter().filter(|&c| self.column(c).is_none()))
            .map(|c| self.open_column(c))
            .buffered(16)
            .try_for_each(|_| async { Ok(()) })
            .await
    }

    /// True when column `col` is open and holds no null although its declaration allows
    /// them: its nulls live in a `.notnull` mask sidecar that does not exist (python-blosc2
    /// writes it with the first null), and its values have no null of their own (NaT).
    pub fn holds_no_null(&self, col: usize) -> bool {
        let Some(c) = self.column(col) else {
            return false;
        };
        let values_without_null = match &c.storage {
            ColumnStorage::Fixed(a) => {
                !matches!(a.dtype, DType::DateTime { .. } | DType::TimeDelta { .. })
            }
            ColumnStorage::Utf8 { .. } => true,
            _ => false,
        };
        values_without_null && matches!(c.nulls, NullRule::Mask(None))
    }

    /// The opened columns with their indices.
    pub fn opened_columns(&self) -> impl Iterator<Item = (usize, &TableColumn)> {
        self.opened
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.get().map(|c| (i, c)))
    }

    /// The SUMMARY index sidecar of column `col` (`spec/stores.md` §5), when python-blosc2
    /// built one that is still current. Scalar fixed-width columns only.
    ///
    /// # Errors
    /// IO errors and malformed sidecars.
    pub async fn summary(&self, col: usize) -> Result<Option<ColumnSummary>> {
        let Some((store, name, elem)) = self.indexable(col).await? else {
            return Ok(None);
        };
        ColumnSummary::open(store, &self.index_catalog, self.value_epoch, name, elem).await
    }

    /// The index of column `col` that finds the rows of a range of values
    /// ([`ColumnIndex`]: FULL, PARTIAL, BUCKET or OPSI of a scalar fixed-width column; a
    /// utf8 column's FULL), when python-blosc2 built one that is still current and of a
    /// type it looks up.
    ///
    /// # Errors
    /// IO errors and unreadable sidecar frames.
    pub async fn column_index(&self, col: usize) -> Result<Option<ColumnIndex>> {
        let (catalog, epoch) = (&self.index_catalog, self.value_epoch);
        let Some((store, name, elem)) = self.indexable(col).await? else {
            // A utf8 column's FULL index ranks its values.
            let c = self.open_column(col).await?;
            return Ok(match (self.store.as_deref(), &c.storage) {
                (Some(store), ColumnStorage::Utf8 { .. }) => {
                    RankedTextIndex::open(store, catalog, epoch, &c.name)
                        .await?
                        .map(|i| ColumnIndex::RankedText(Box::new(i)))
                }
                _ => None,
            });
        };
        if let Some(i) = FullIndex::open(store, catalog, epoch, name, elem).await? {
            return Ok(Some(ColumnIndex::Full(i)));
        }
        if let Some(i) = ChunkLocalIndex::open(store, catalog, epoch, name, elem).await? {
            return Ok(Some(ColumnIndex::ChunkLocal(i)));
        }
        Ok(OpsiIndex::open(store, catalog, epoch, name, elem)
            .await?
            .map(ColumnIndex::Opsi))
    }

    /// The store, name and element type of column `col` when python-blosc2's index
    /// sidecars can describe it: a scalar fixed-width column of a table in a store.
    async fn indexable(&self, col: usize) -> Result<Option<(&StoreRoot, &str, &DType)>> {
        let Some(store) = self.store.as_deref() else {
            return Ok(None);
        };
        let c = self.open_column(col).await?;
        Ok(match &c.storage {
            ColumnStorage::Fixed(a) if a.geometry.ndim() == 1 => {
                Some((store, c.name.as_str(), &a.dtype))
            }
            _ => None,
        })
    }

    /// Row granularity of value pruning: a CTable's first column's declared block (what
    /// its SUMMARY sidecars describe; `_valid_rows`' block when undeclared), a bcolz
    /// table's chunk.
    pub fn zone_rows(&self) -> u64 {
        Some(self.layout.block_rows)
            .filter(|&n| n > 0)
            .unwrap_or(65_536)
            .clamp(64, 1 << 20)
    }

    /// Row granularity that keeps reads chunk-aligned: the first column's chunk length
    /// (declared, or `_valid_rows`' for a CTable that does not declare it).
    pub fn natural_rows(&self) -> u64 {
        Some(self.layout.chunk_rows)
            .filter(|&n| n > 0)
            .unwrap_or(65_536)
            .clamp(1024, 1 << 20)
    }

    /// Reads rows `rows` of column `col`.
    ///
    /// # Errors
    /// IO and decoding errors; inconsistent UTF-8 offsets.
    pub async fn read_column(
        &self,
        col: usize,
        rows: Range<u64>,
        stats: &mut ReadStats,
    ) -> Result<ColumnData> {
        let c = self.open_column(col).await?;
        match &c.storage {
            ColumnStorage::Fixed(a) if a.geometry.ndim() == 1 => {
                Ok(ColumnData::Fixed(read_1d(a, rows, stats).await?))
            }
            ColumnStorage::Fixed(a) => {
                let mut bx = vec![rows];
                bx.extend(a.geometry.shape[1..].iter().map(|&s| 0..s));
                Ok(ColumnData::Fixed(a.read_box(&bx, stats).await?))
            }
            ColumnStorage::Utf8 { offsets, data } => {
                let raw = read_1d(offsets, rows.start..rows.end + 1, stats).await?;
                let offs: Vec<i64> = raw
                    .chunks_exact(8)
                    .map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes")))
                    .collect();
                let (lo, hi) = (offs[0], offs[offs.len() - 1]);
                let dlen = data.geometry.shape[0] as i64;
                if lo < 0 || hi < lo || hi > dlen || offs.windows(2).any(|w| w[1] < w[0]) {
                    return Err(Error::corrupt(
                        &self.display,
                        "utf8 offsets",
                        format!(
                            "column {:?}: offsets {lo}..{hi} not increasing within the {dlen} data bytes",
                            c.name
                        ),
                    ));
                }
                let bytes = read_1d(data, lo as u64..hi as u64, stats).await?;
                Ok(ColumnData::Utf8 {
                    offsets: offs.iter().map(|o| o - lo).collect(),
                    data: bytes,
                })
            }
            ColumnStorage::Var { items, kind } => {
                Ok(ColumnData::Var(items.read(rows, *kind, stats).await?))
            }
            ColumnStorage::Items { items, .. } => match items.serializer() {
                Serializer::Msgpack => {
                    Ok(ColumnData::Values(items.read_values(rows, stats).await?))
                }
                Serializer::ArrowIpc { .. } => {
                    Ok(ColumnData::Streams(items.read_streams(rows, stats).await?))
                }
            },
            ColumnStorage::Dictionary { codes, .. } => {
                Ok(ColumnData::Fixed(read_1d(codes, rows, stats).await?))
            }
        }
    }

    /// For a column of variable-length items (`vlstring`, `vlbytes`): which of `rows`
    /// hold an item that passes `test`, and those items ([`BatchArray::read_where`]);
    /// `None` for other columns.
    ///
    /// # Errors
    /// IO and decoding errors.
    pub async fn read_items_where(
        &self,
        col: usize,
        rows: Range<u64>,
        stats: &mut ReadStats,
        test: &impl ItemFilter,
    ) -> Result<Option<(Vec<bool>, VarValues)>> {
        match &self.open_column(col).await?.storage {
            ColumnStorage::Var { items, kind } => {
                Ok(Some(items.read_where(rows, *kind, stats, test).await?))
            }
            _ => Ok(None),
        }
    }

    /// Not-null mask bytes of column `col` for `rows` (1 = present), if the column has a mask.
    ///
    /// # Errors
    /// IO and decoding errors.
    pub async fn read_notnull(
        &self,
        col: usize,
        rows: Range<u64>,
        stats: &mut ReadStats,
    ) -> Result<Option<Vec<u8>>> {
        match &self.open_column(col).await?.nulls {
            NullRule::Mask(Some(m)) => Ok(Some(read_1d(m, rows, stats).await?)),
            _ => Ok(None),
        }
    }

    /// Liveness bytes for `rows` (1 = live), `None` when every row is live (known from
    /// the open, so nothing is read then).
    ///
    /// # Errors
    /// IO and decoding errors.
    pub async fn read_valid(
        &self,
        rows: Range<u64>,
        stats: &mut ReadStats,
    ) -> Result<Option<Vec<u8>>> {
        let Some(v) = &self.valid else {
            return Ok(None);
        };
        let cr = v.geometry.chunkshape[0].max(1);
        let chunks = (rows.start / cr) as usize..rows.end.div_ceil(cr) as usize;
        if rows.start < rows.end
            && self
                .live_chunks
                .get(chunks)
                .is_some_and(|c| c.iter().all(|&live| live))
        {
            return Ok(None);
        }
        Ok(Some(read_1d(v, rows, stats).await?))
    }
}

/// Rows `rows` of a 1-D array, decoded into place (see [`NdArray::read_rows_into`]).
/// What a CTable's `_valid_rows` says of its rows.
struct Liveness {
    /// Rows not deleted.
    live_rows: u64,
    /// Rows up to the last live one: `_valid_rows` can be longer (python-blosc2 keeps its
    /// capacity when every row is deleted, or none was written), and variable-length
    /// columns hold only the rows written.
    physical_rows: u64,
    /// Per chunk of `_valid_rows`, whether all its rows are live.
    live_chunks: Vec<bool>,
}

/// Reads `valid` (a 1-D bool array) chunk by chunk into one reused buffer: its chunks
/// are fetched together (one round trip on a remote store), and a table of 10 M rows no
/// longer allocates and walks 10 MB of flags three times on every open (25 ms of a
/// 35 ms `count(*)`).
///
/// # Errors
/// IO and decoding errors; a chunk that decodes to fewer bytes than its rows.
async fn liveness(valid: &NdArray) -> Result<Liveness> {
    let rows = valid.geometry.shape[0];
    let chunk_rows = valid.geometry.chunkshape[0].max(1);
    let chunks: Vec<u64> = (0..rows.div_ceil(chunk_rows)).collect();
    let raws = valid.fetch(&chunks).await?;
    if raws.len() != chunks.len() {
        let what = format!("{} chunks read of {}", raws.len(), chunks.len());
        return Err(Error::corrupt(valid.display(), "_valid_rows", what));
    }
    let mut out = Liveness {
        live_rows: 0,
        physical_rows: 0,
        live_chunks: Vec::with_capacity(chunks.len()),
    };
    let (mut buf, mut stats) = (Vec::new(), ReadStats::default());
    for (&i, raw) in chunks.iter().zip(&raws) {
        let start = i * chunk_rows;
        let end = rows.min(start + chunk_rows);
        let base = valid.decode_for_box(i, raw, &[start..end], &mut stats, 1, &mut buf)?;
        let flags = buf
            .get(..(end - start) as usize)
            .filter(|_| base == 0)
            .ok_or_else(|| {
                let what = format!("chunk {i} decodes to fewer bytes than its rows");
                Error::corrupt(valid.display(), "_valid_rows", what)
            })?;
        // Counted 255 flags at a time in bytes, which vectorizes (a `u64` per flag did
        // not: 20 % of opening a table of 10 M rows).
        let live: u64 = (flags.chunks(255))
            .map(|c| u64::from(c.iter().map(|&b| u8::from(b != 0)).sum::<u8>()))
            .sum();
        out.live_rows += live;
        out.live_chunks.push(live == end - start);
        if let Some(last) = flags.iter().rposition(|&b| b != 0) {
            out.physical_rows = start + last as u64 + 1;
        }
    }
    Ok(out)
}

async fn read_1d(a: &NdArray, rows: Range<u64>, stats: &mut ReadStats) -> Result<Vec<u8>> {
    let n = rows.end.saturating_sub(rows.start) * a.itemsize() as u64;
    let mut out = vec![0u8; n as usize];
    a.read_rows_into(std::slice::from_ref(&rows), &mut out, stats, 1)
        .await?;
    Ok(out)
}

/// Path of a column under `_cols/` (`spec/stores.md` §5.3): split on unescaped dots,
/// percent-encode `%`, `/`, `.`, `\` inside segments.
pub fn column_path(name: &str) -> String {
    let mut segs = vec![String::new()];
    let mut chars = name.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(n) = chars.next() {
                    segs.last_mut().expect("non-empty").push_str(&encode(n));
                }
            }
            '.' => segs.push(String::new()),
            c => segs.last_mut().expect("non-empty").push_str(&encode(c)),
        }
    }
    segs.join("/")
}

fn encode(c: char) -> String {
    match c {
        '%' => "%25".into(),
        '/' => "%2F".into(),
        '.' => "%2E".into(),
        '\\' => "%5C".into(),
        c => c.to_string(),
    }
}
