//! What `b2sql inspect` shows: a JSON description of a dataset's container and layout.

use crate::array::batch_array::{BatchArray, Serializer};
use crate::array::column_spec::NullDecl;
use crate::array::index_sidecars::{KeyType, current_descriptor};
use crate::array::item_type::ItemType;
use crate::array::ndarray::{ArrayKind, ChunkSource, NdArray};
use crate::array::table::{ColumnStorage, NullRule, Table};
use crate::dataset::Dataset;
use serde_json::{Value, json};

fn array_json(a: &NdArray) -> Value {
    let g = &a.geometry;
    let mut v = json!({
        "kind": match a.kind { ArrayKind::B2nd => "b2nd array", ArrayKind::SChunk => "super-chunk", ArrayKind::Bcolz => "bcolz carray" },
        "path": a.display(),
        "dtype": a.stored_dtype.clone().unwrap_or_else(|| format!("{:?}", a.dtype)),
        "itemsize": a.itemsize(),
        "shape": g.shape,
        "chunkshape": g.chunkshape,
        "blockshape": g.blockshape,
        "nchunks": g.nchunks(),
        "attributes": a.attributes_json(),
    });
    match &a.source {
        ChunkSource::Frame(f) => {
            let h = f.header();
            let nbytes = h.nbytes;
            let cbytes = h.cbytes;
            v["format"] = json!(if f.is_sparse() {
                "sparse frame"
            } else {
                "contiguous frame"
            });
            v["frame_version"] = json!(h.version());
            v["codec"] = json!(h.codec_name());
            if h.codec_meta != 0 {
                v["codec_meta"] = json!(h.codec_meta);
            }
            v["clevel"] = json!(h.clevel());
            v["filters"] = json!(h.filter_names());
            v["typesize"] = json!(h.typesize);
            v["chunksize"] = json!(h.chunksize);
            v["blocksize"] = json!(h.blocksize);
            v["special_chunks"] = json!(f.nspecial_offsets());
            v["nbytes"] = json!(nbytes);
            v["cbytes"] = json!(cbytes);
            v["ratio"] = json!(if cbytes > 0 {
                (nbytes as f64 / cbytes as f64 * 100.0).round() / 100.0
            } else {
                0.0
            });
            v["metalayers"] = json!(
                f.metalayers()
                    .iter()
                    .map(|m| m.name.clone())
                    .collect::<Vec<_>>()
            );
        }
        ChunkSource::Bcolz(c) => {
            v["format"] = json!("bcolz rootdir");
            v["cparams"] = c.cparams.clone();
            v["chunklen"] = json!(c.chunklen);
            v["nbytes"] = json!(g.nitems() * a.itemsize() as u64);
        }
    }
    v
}

fn batch_array_json(b: &BatchArray, items: String) -> Value {
    let h = b.frame().header();
    json!({
        "kind": "BatchArray",
        "path": b.display(),
        "items": items,
        "len": b.len(),
        "batches": b.nbatches(),
        "codec": h.codec_name(),
        "clevel": h.clevel(),
        "filters": h.filter_names(),
        "nbytes": h.nbytes,
        "cbytes": h.cbytes,
    })
}

fn table_json(t: &Table) -> Value {
    let cols: Vec<Value> = t
        .specs
        .iter()
        .enumerate()
        .map(|(i, spec)| match t.column(i) {
            Some(c) => {
                let storage = match &c.storage {
                    ColumnStorage::Fixed(a) => array_json(a),
                    ColumnStorage::Utf8 { offsets, data } => json!({"offsets": array_json(offsets), "data": array_json(data)}),
                    ColumnStorage::Var { items, kind } => batch_array_json(items, format!("{kind:?}").to_lowercase()),
                    ColumnStorage::Items { items, item } => batch_array_json(items, match items.serializer() { Serializer::Msgpack => format!("msgpack {item:?}"), Serializer::ArrowIpc { .. } if matches!(item, ItemType::Arrow(_)) => "Arrow IPC, of the type its arrow_schema declares (b2sql schema)".to_string(), Serializer::ArrowIpc { .. } => format!("Arrow IPC {item:?}") }),
                    ColumnStorage::Dictionary { codes, values, null_code } => json!({"codes": array_json(codes), "values": values.len(), "null_code": null_code}),
                };
                json!({
                    "name": c.name,
                    "kind": c.kind,
                    "nulls": match (&c.storage, &c.nulls) {
                        (ColumnStorage::Var { .. } | ColumnStorage::Items { .. }, _) => json!("nil items"),
                        (ColumnStorage::Dictionary { null_code, .. }, _) => json!({"null_code": null_code}),
                        (_, nulls) => match nulls { NullRule::None => json!(null), NullRule::Mask(Some(_)) => json!("mask"), NullRule::Mask(None) => json!("mask (no sidecar: none null)"), NullRule::Sentinel(v) => json!({"sentinel": v}) },
                    },
                    "storage": storage,
                })
            }
            // Not opened (see `Dataset::open_all_columns`): what the schema declares.
            None => json!({
                "name": spec.name,
                "kind": spec.kind,
                "nulls": match &spec.nulls { NullDecl::None => json!(null), NullDecl::Mask => json!("mask"), NullDecl::Sentinel(v) => json!({"sentinel": v}) },
                "storage": "not opened",
            }),
        })
        .collect();
    let mut out = json!({
        "kind": match t.kind { crate::array::table::TableKind::Bcolz => "bcolz ctable", crate::array::table::TableKind::CTable => "python-blosc2 CTable", crate::array::table::TableKind::BatchArray => "python-blosc2 BatchArray (one column, value)" },
        "path": t.display(),
        "rows": t.live_rows,
        "physical_rows": t.physical_rows,
        "columns": cols,
        "schema": t.schema_json,
        "attributes": t.attrs,
    });
    if let Some(indexes) = indexes_json(t) {
        out["indexes"] = indexes;
    }
    out
}

/// A CTable's python-blosc2 indexes, per column: the kind, and what queries use of it
/// (block summaries for pruning, row lookups) or why nothing.
fn indexes_json(t: &Table) -> Option<Value> {
    let catalog = t.index_catalog.as_object().filter(|c| !c.is_empty())?;
    let mut out = serde_json::Map::new();
    for (name, d) in catalog {
        let kind = d.get("kind").and_then(Value::as_str).unwrap_or("?");
        let column = t
            .specs
            .iter()
            .position(|s| &s.name == name)
            .and_then(|i| t.column(i));
        let fixed = match column.map(|c| &c.storage) {
            Some(ColumnStorage::Fixed(a)) if a.geometry.ndim() == 1 => Some(a),
            _ => None,
        };
        let finds_rows = matches!(kind, "full" | "partial" | "bucket" | "opsi")
            && fixed.is_some_and(|a| KeyType::of(&a.dtype).is_some());
        let ranked = kind == "full"
            && matches!(column.map(|c| &c.storage), Some(ColumnStorage::Utf8 { .. }));
        let used = if current_descriptor(&t.index_catalog, t.value_epoch, name).is_none() {
            "stale: not used"
        } else if finds_rows {
            "block summaries, row lookups"
        } else if fixed.is_some() {
            "block summaries"
        } else if ranked {
            "row lookups (by the ranks of its values)"
        } else {
            "not used"
        };
        out.insert(name.clone(), json!(format!("{kind}: {used}")));
    }
    Some(Value::Object(out))
}

/// Describes a python-blosc2 DictStore / TreeStore / EmbedStore: its kind and, per key,
/// what [`describe`] says about the leaf (the first 200 keys).
///
/// # Errors
/// `loc` is not a store.
pub async fn describe_store(loc: &crate::io::Location) -> crate::Result<Value> {
    let keys = Dataset::store_keys(loc).await?;
    let mut leaves = serde_json::Map::new();
    for (k, _) in keys.iter().take(200) {
        let d = describe_opened(Dataset::open_key(loc, k, &Default::default()).await).await;
        leaves.insert(k.clone(), d);
    }
    Ok(json!({
        "kind": "python-blosc2 store",
        "path": loc.display(),
        "keys": keys.len(),
        "leaves": leaves,
        "open_a_leaf_as": format!("{}#/key", loc.display()),
    }))
}

/// What [`describe`] says of an opened dataset once all its columns are open, or
/// `{"error": …}` when opening either failed.
async fn describe_opened(opened: crate::Result<Dataset>) -> Value {
    let ds = match opened {
        Ok(ds) => ds,
        Err(e) => return json!({"error": e.to_string()}),
    };
    match ds.open_all_columns().await {
        Ok(()) => describe(&ds),
        Err(e) => json!({"error": e.to_string()}),
    }
}

/// Describes the containers of a glob or directory (`path`): per member, what
/// [`describe`] says of it, or its error.
pub async fn describe_files(path: &str, members: &[(String, crate::io::Location)]) -> Value {
    let mut described = serde_json::Map::new();
    for (p, loc) in members {
        let d = describe_opened(Dataset::open(loc, &Default::default()).await).await;
        described.insert(p.clone(), d);
    }
    json!({
        "kind": "files",
        "path": path,
        "files": members.len(),
        "members": described,
    })
}

/// Describes a dataset (kind, codec, filters, geometry, sizes, attributes, columns).
pub fn describe(ds: &Dataset) -> Value {
    match ds {
        Dataset::Array(a) => array_json(a),
        Dataset::Table(t) => table_json(t),
    }
}
