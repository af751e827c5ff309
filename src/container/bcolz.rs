//! bcolz carray root directories: `meta/sizes`, `meta/storage`, `__attrs__` (JSON) and
//! `data/__N.blp` files holding one Blosc1 chunk each (`spec/bcolz.md` §1, §3).

use super::RawChunk;
use crate::error::{Error, Result};
use crate::io::Location;
use serde_json::Value as Json;

/// An opened bcolz carray directory.
#[derive(Debug, Clone)]
pub struct BcolzCarray {
    dir: Location,
    /// `meta/sizes` shape: rows, then per-row dimensions.
    pub shape: Vec<u64>,
    /// `meta/storage` dtype string (one row's type, NumPy spelling).
    pub dtype: String,
    /// Rows per chunk.
    pub chunklen: u64,
    /// `meta/storage` cparams (informational).
    pub cparams: Json,
    /// `__attrs__` (user attributes).
    pub attrs: Json,
}

async fn read_json(loc: &Location, what: &'static str) -> Result<Json> {
    let b = loc.get_all().await.map_err(|e| match e {
        Error::NotFound { path, .. } => Error::NotFound {
            path,
            what: what.into(),
        },
        e => e,
    })?;
    if b.len() > 16 << 20 {
        return Err(Error::corrupt(
            loc.display(),
            what,
            format!("{} bytes of JSON", b.len()),
        ));
    }
    serde_json::from_slice(&b)
        .map_err(|e| Error::corrupt(loc.display(), what, format!("invalid JSON: {e}")))
}

impl BcolzCarray {
    /// Opens the carray rooted at `dir`.
    ///
    /// # Errors
    /// Missing or invalid `meta/sizes` / `meta/storage`.
    pub async fn open(dir: &Location) -> Result<Self> {
        let sizes_loc = dir.child("meta/sizes");
        let storage_loc = dir.child("meta/storage");
        let sizes = read_json(&sizes_loc, "meta/sizes").await?;
        let storage = read_json(&storage_loc, "meta/storage").await?;
        let shape: Vec<u64> = sizes
            .get("shape")
            .and_then(Json::as_array)
            .and_then(|a| a.iter().map(Json::as_u64).collect())
            .filter(|s: &Vec<u64>| !s.is_empty())
            .ok_or_else(|| {
                Error::corrupt(
                    sizes_loc.display(),
                    "meta/sizes",
                    "\"shape\" is not a non-empty list of non-negative integers",
                )
            })?;
        let dtype = match storage.get("dtype") {
            Some(Json::String(s)) => s.clone(),
            other => {
                return Err(Error::corrupt(
                    storage_loc.display(),
                    "meta/storage",
                    format!("\"dtype\" is {other:?}"),
                ));
            }
        };
        let chunklen = storage
            .get("chunklen")
            .and_then(Json::as_u64)
            .filter(|&c| c > 0)
            .ok_or_else(|| {
                Error::corrupt(
                    storage_loc.display(),
                    "meta/storage",
                    "\"chunklen\" is not a positive integer",
                )
            })?;
        let attrs = match dir.child("__attrs__").get_all().await {
            Ok(b) => serde_json::from_slice(&b).unwrap_or(Json::Null),
            Err(Error::NotFound { .. }) => Json::Object(Default::default()),
            Err(e) => return Err(e),
        };
        Ok(BcolzCarray {
            dir: dir.clone(),
            shape,
            dtype,
            chunklen,
            cparams: storage.get("cparams").cloned().unwrap_or(Json::Null),
            attrs,
        })
    }

    /// How errors name it.
    pub fn display(&self) -> &str {
        self.dir.display()
    }

    /// An estimate of the heap memory it holds once opened (its metadata).
    pub fn heap_bytes(&self) -> usize {
        self.shape.len() * 8
            + self.dtype.len()
            + super::json_heap_bytes(&self.cparams)
            + super::json_heap_bytes(&self.attrs)
            + self.dir.display().len()
    }

    /// Number of rows.
    pub fn nrows(&self) -> u64 {
        self.shape[0]
    }

    /// Number of `.blp` chunk files the rows need (full chunks plus the leftover).
    pub fn nchunks(&self) -> u64 {
        self.nrows().div_ceil(self.chunklen)
    }

    /// Rows held by chunk `i`.
    pub fn chunk_rows(&self, i: u64) -> u64 {
        (self.nrows() - i * self.chunklen).min(self.chunklen)
    }

    /// Reads `data/__i.blp` files and returns the Blosc1 chunks inside.
    ///
    /// # Errors
    /// Missing files, a wrong `blpk` header, or a chunk that does not fill the file.
    pub async fn fetch_chunks(&self, indices: &[u64]) -> Result<Vec<RawChunk>> {
        let mut out = Vec::with_capacity(indices.len());
        for &i in indices {
            if i >= self.nchunks() {
                return Err(Error::InvalidArgument(format!(
                    "{}: chunk {i} out of 0..{}",
                    self.display(),
                    self.nchunks()
                )));
            }
            let loc = self.dir.child(&format!("data/__{i}.blp"));
            let b = loc.get_all().await.map_err(|e| match e {
                Error::NotFound { path, .. } => Error::NotFound {
                    path,
                    what: format!("chunk {i} of {} rows", self.nrows()),
                },
                e => e,
            })?;
            if b.len() < 32 || &b[..4] != b"blpk" {
                return Err(Error::corrupt(
                    loc.display(),
                    "bloscpack header",
                    "missing \"blpk\" magic or file shorter than 32 bytes",
                ));
            }
            if b[4] != 1 {
                return Err(Error::unsupported(
                    loc.display(),
                    format!("bloscpack format version {}", b[4]),
                ));
            }
            let n = i64::from_le_bytes(b[8..16].try_into().expect("8 bytes"));
            if n != 1 {
                return Err(Error::corrupt(
                    loc.display(),
                    "bloscpack header",
                    format!("{n} chunks in the file, bcolz writes exactly 1"),
                ));
            }
            out.push(RawChunk::Stored(b.slice(16..)));
        }
        Ok(out)
    }
}

/// Column names of a bcolz ctable (`__rootdirs__`), or `None` for a carray directory.
///
/// # Errors
/// An invalid `__rootdirs__`.
pub async fn ctable_columns(dir: &Location) -> Result<Option<Vec<String>>> {
    let loc = dir.child("__rootdirs__");
    match loc.get_all().await {
        Ok(b) => {
            let v: Json = serde_json::from_slice(&b)
                .map_err(|e| Error::corrupt(loc.display(), "__rootdirs__", e.to_string()))?;
            let names = v
                .get("names")
                .and_then(Json::as_array)
                .and_then(|a| {
                    a.iter()
                        .map(|n| n.as_str().map(str::to_string))
                        .collect::<Option<Vec<_>>>()
                })
                .ok_or_else(|| {
                    Error::corrupt(
                        loc.display(),
                        "__rootdirs__",
                        "\"names\" is not a list of strings",
                    )
                })?;
            Ok(Some(names))
        }
        Err(Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}
