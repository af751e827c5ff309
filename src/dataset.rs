//! Opens any supported container at a location and says what it is: an N-d array (b2nd,
//! plain super-chunk, bcolz carray) or a table (bcolz ctable, CTable `.b2d` / `.b2z`).

use crate::array::dtype::DType;
use crate::array::ndarray::NdArray;
use crate::array::table::Table;
use crate::container::store::StoreRoot;
use crate::error::{Error, Result};
use crate::io::Location;

/// An opened container.
#[derive(Debug, Clone)]
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
                    return Ok(Dataset::Table(Table::open_ctable(&store).await?));
                }
                if head.len() >= 10 && &head[2..10] == b"b2frame\0" {
                    return Ok(Dataset::Array(
                        NdArray::open_frame(loc, opts.dtype.clone()).await?,
                    ));
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
