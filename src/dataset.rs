//! Opens any supported container at a location and says what it is: an N-d array (b2nd,
//! plain super-chunk, bcolz carray) or a table (bcolz ctable, CTable `.b2d` / `.b2z`).

use crate::array::dtype::DType;
use crate::array::ndarray::NdArray;
use crate::array::table::Table;
use crate::container::embed::{EmbedRole, EmbedStore};
use crate::container::frame::Frame;
use crate::container::store::{Leaf, LeafKind, StoreRoot};
use crate::error::{Error, Result};
use crate::io::Location;
use std::sync::Arc;

/// The store at `loc`: a zip, an EmbedStore file, or a directory.
async fn store_root(loc: &Location) -> Result<StoreRoot> {
    match loc.get_prefix(16).await? {
        Some((head, _)) if head.starts_with(b"PK") => StoreRoot::open_zip(loc).await,
        Some(_) => Ok(StoreRoot::Embed(Arc::new(
            EmbedStore::open(Frame::open(loc).await?).await?,
        ))),
        None => {
            if loc.child("embed.b2e").size().await?.is_none() {
                return Err(Error::NotAContainer {
                    path: loc.display().to_string(),
                    what: "not a python-blosc2 store (no embed.b2e)".into(),
                });
            }
            Ok(StoreRoot::Dir(loc.clone()))
        }
    }
}

/// The dataset of a store leaf or a file: an array, or a BatchArray, ListArray or
/// ObjectArray as a one-column table; other generic containers are refused.
async fn leaf_dataset(frame: Frame, opts: &OpenOptions) -> Result<Dataset> {
    if frame.metalayer("batcharray").is_some() || frame.metalayer("vlarray").is_some() {
        return Ok(Dataset::Table(Table::open_batch_array(frame).await?));
    }
    Ok(Dataset::Array(NdArray::from_frame(
        frame,
        opts.dtype.clone(),
    )?))
}

fn key_list(keys: &[(String, LeafKind)]) -> String {
    if keys.is_empty() {
        return "no readable keys".into();
    }
    let mut v: Vec<String> = keys
        .iter()
        .take(20)
        .map(|(k, kind)| match kind {
            LeafKind::CTable => format!("{k} (CTable)"),
            LeafKind::Frame => k.clone(),
        })
        .collect();
    if keys.len() > 20 {
        v.push(format!("… {} more", keys.len() - 20));
    }
    v.join(", ")
}

/// The error for opening a whole store: name its keys and how to pick one.
async fn choose_a_leaf(loc: &Location, store: &StoreRoot) -> Error {
    let kind = match store.embed().await {
        Ok(Some(e)) => match e.role {
            EmbedRole::Tree => "TreeStore",
            EmbedRole::Dict => "DictStore",
            EmbedRole::Embed => "EmbedStore",
        },
        _ => "store",
    };
    let keys = store.keys().await.unwrap_or_default();
    Error::InvalidArgument(format!(
        "{} is a python-blosc2 {kind}, not one table; open a key as '{}#/key' ({})",
        loc.display(),
        loc.display(),
        key_list(&keys)
    ))
}

/// An opened container.
#[derive(Debug, Clone)]
// One per table, held in an `Arc`: boxing a variant buys nothing.
#[allow(clippy::large_enum_variant)]
pub enum Dataset {
    /// Array-like: b2nd, super-chunk, bcolz carray.
    Array(NdArray),
    /// Table-like: bcolz ctable, CTable.
    Table(Table),
}

/// Options for opening.
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// Replaces the element type of an array (e.g. `<f4` for a frame whose metalayer
    /// disagrees with its typesize, or to give plain super-chunk items a type).
    pub dtype: Option<DType>,
}

impl Dataset {
    /// This dataset without the chunks its reads keep, for another scan (see
    /// [`NdArray::detached`]).
    pub fn detached(&self) -> Dataset {
        match self {
            Dataset::Array(a) => Dataset::Array(a.detached()),
            Dataset::Table(t) => Dataset::Table(t.detached()),
        }
    }

    /// The compressed bytes of the chunks recent reads keep (see
    /// [`NdArray::kept_chunk_bytes`]).
    pub fn kept_chunk_bytes(&self) -> usize {
        match self {
            Dataset::Array(a) => a.kept_chunk_bytes(),
            Dataset::Table(t) => t.kept_chunk_bytes(),
        }
    }

    /// Drops the chunks recent reads keep, as when a scan is over.
    pub fn release_kept_chunks(&self) {
        match self {
            Dataset::Array(a) => a.release_kept_chunks(),
            Dataset::Table(t) => t.release_kept_chunks(),
        }
    }

    /// An estimate of the heap memory the opened dataset holds: indexes, layers,
    /// metadata and the columns opened so far; not the chunks recent reads keep.
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Dataset>()
            + match self {
                Dataset::Array(a) => a.heap_bytes(),
                Dataset::Table(t) => t.heap_bytes(),
            }
    }

    /// Detects the container kind at `loc` and opens it.
    ///
    /// Files: a `b2frame` magic → frame; a zip → CTable store. Directories:
    /// `chunks.b2frame` → sparse frame; `__rootdirs__` → bcolz ctable; `meta/sizes` →
    /// bcolz carray; `_meta.b2f` → CTable.
    ///
    /// # Errors
    /// `NotFound` when nothing is there; `Unsupported` for an unknown kind; container errors.
    pub async fn open(loc: &Location, opts: &OpenOptions) -> Result<Dataset> {
        match loc.get_prefix(16).await? {
            Some((head, size)) => {
                if size == 0 {
                    return Err(Error::corrupt(loc.display(), "file", "empty file"));
                }
                if head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06") {
                    let store = StoreRoot::open_zip(loc).await?;
                    if !store.contains("_meta.b2f").await? && store.contains("embed.b2e").await? {
                        return Err(choose_a_leaf(loc, &store).await);
                    }
                    return Ok(Dataset::Table(Table::open_ctable(&store).await?));
                }
                if head.len() >= 10 && &head[2..10] == b"b2frame\0" {
                    let frame = Frame::open(loc).await?;
                    if EmbedRole::of(&frame).is_some() {
                        let store = StoreRoot::Embed(Arc::new(EmbedStore::open(frame).await?));
                        // `CTable.to_cframe()`: the table's keys at the root.
                        if let Some(Leaf::CTable) = store.resolve("/").await? {
                            return Ok(Dataset::Table(Table::open_ctable(&store).await?));
                        }
                        return Err(choose_a_leaf(loc, &store).await);
                    }
                    return leaf_dataset(frame, opts).await;
                }
                Err(Error::NotAContainer {
                    path: loc.display().to_string(),
                    what: "no \"b2frame\" magic and not a .b2z zip store".into(),
                })
            }
            None => {
                let has = |name: &str| {
                    let l = loc.child(name);
                    async move { l.size().await.map(|s| s.is_some()) }
                };
                if has("chunks.b2frame").await? {
                    return Ok(Dataset::Array(
                        NdArray::open_frame(loc, opts.dtype.clone()).await?,
                    ));
                }
                if has("__rootdirs__").await? {
                    return Ok(Dataset::Table(Table::open_bcolz(loc).await?));
                }
                if has("meta/sizes").await? {
                    return Ok(Dataset::Array(
                        NdArray::open_bcolz(loc, opts.dtype.clone()).await?,
                    ));
                }
                if has("_meta.b2f").await? {
                    return Ok(Dataset::Table(
                        Table::open_ctable(&StoreRoot::Dir(loc.clone())).await?,
                    ));
                }
                if has("embed.b2e").await? {
                    return Err(choose_a_leaf(loc, &StoreRoot::Dir(loc.clone())).await);
                }
                let (files, dirs) = loc.list_dir().await?;
                if files.is_empty() && dirs.is_empty() {
                    return Err(Error::NotFound {
                        path: loc.display().to_string(),
                        what: "no file or non-empty directory".into(),
                    });
                }
                Err(Error::NotAContainer {
                    path: loc.display().to_string(),
                    what: "directory is none of: sparse frame (chunks.b2frame), bcolz ctable (__rootdirs__), bcolz carray (meta/sizes), CTable (_meta.b2f)".into(),
                })
            }
        }
    }

    /// Opens the leaf `key` (`/grp/temps`) of the store at `loc`: a DictStore/TreeStore
    /// (`.b2d` directory or `.b2z` zip) or an EmbedStore (`.b2e`). A key naming a CTable
    /// subtree opens the table.
    ///
    /// # Errors
    /// `NotFound` (listing the keys there are), container errors.
    pub async fn open_key(loc: &Location, key: &str, opts: &OpenOptions) -> Result<Dataset> {
        let store = store_root(loc).await?;
        match store.resolve(key).await? {
            Some(Leaf::CTable) => Ok(Dataset::Table(
                Table::open_ctable(&store.subtree(key)).await?,
            )),
            Some(Leaf::Frame(f)) => leaf_dataset(*f, opts).await,
            None => {
                let keys = store.keys().await.unwrap_or_default();
                Err(Error::NotFound {
                    path: format!("{}#{key}", loc.display()),
                    what: format!("no such key; the store holds {}", key_list(&keys)),
                })
            }
        }
    }

    /// The keys of the store at `loc` (see [`StoreRoot::keys`]).
    ///
    /// # Errors
    /// Not a store; IO errors.
    pub async fn store_keys(loc: &Location) -> Result<Vec<(String, LeafKind)>> {
        store_root(loc).await?.keys().await
    }

    /// Opens every column of a table (tables open their columns when a query reads
    /// them); nothing to do for an array. `inspect` uses it to describe every column.
    ///
    /// # Errors
    /// Missing or mismatching column files.
    pub async fn open_all_columns(&self) -> Result<()> {
        match self {
            Dataset::Array(_) => Ok(()),
            Dataset::Table(t) => t.open_columns(0..t.ncolumns()).await,
        }
    }

    /// User attributes as JSON.
    pub fn attributes_json(&self) -> serde_json::Value {
        match self {
            Dataset::Array(a) => a.attributes_json(),
            Dataset::Table(t) => t.attrs.clone(),
        }
    }

    /// How errors name it.
    pub fn display(&self) -> &str {
        match self {
            Dataset::Array(a) => a.display(),
            Dataset::Table(t) => t.display(),
        }
    }
}
