//! The IO seam: a [`Location`] is an `ObjectStore` plus a path; every read of the crate
//! goes through it, so local files and remote stores behave the same.
//!
//! Reads are ranges; [`Location::get_ranges`] lets the store coalesce neighbours. Request
//! counts are asserted by the tests with a counting `ObjectStore` wrapper.

use crate::error::{Error, Result};
use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use std::ops::Range;
use std::sync::Arc;

/// A file or directory inside an object store.
#[derive(Debug, Clone)]
pub struct Location {
    store: Arc<dyn ObjectStore>,
    path: Path,
    display: String,
}

impl Location {
    /// A location in `store` at `path`; `display` is how errors name it.
    pub fn new(store: Arc<dyn ObjectStore>, path: Path, display: impl Into<String>) -> Self {
        Location {
            store,
            path,
            display: display.into(),
        }
    }

    /// A local file or directory (relative paths are resolved against the working directory).
    ///
    /// # Errors
    /// When the path cannot be made absolute or is not valid for the local store.
    pub fn local(path: impl AsRef<std::path::Path>) -> Result<Self> {
        let p = path.as_ref();
        let abs = std::fs::canonicalize(p)
            .or_else(|_| std::path::absolute(p))
            .map_err(|e| Error::InvalidArgument(format!("{}: {e}", p.display())))?;
        let os_path = Path::from_absolute_path(&abs)
            .map_err(|e| Error::InvalidArgument(format!("{}: {e}", p.display())))?;
        let store: Arc<dyn ObjectStore> = Arc::new(object_store::local::LocalFileSystem::new());
        Ok(Location::new(store, os_path, p.display().to_string()))
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// The path inside the store.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How errors name this location.
    pub fn display(&self) -> &str {
        &self.display
    }

    /// The entry `name` below this directory (same store).
    pub fn child(&self, name: &str) -> Location {
        let mut path = self.path.clone();
        for part in name.split('/').filter(|p| !p.is_empty()) {
            path = path.clone().join(part);
        }
        let display = format!("{}/{}", self.display.trim_end_matches('/'), name);
        Location {
            store: Arc::clone(&self.store),
            path,
            display,
        }
    }

    fn io_err(&self, source: object_store::Error) -> Error {
        match source {
            object_store::Error::NotFound { .. } => Error::NotFound {
                path: self.display.clone(),
                what: String::new(),
            },
            source => Error::Io {
                path: self.display.clone(),
                source,
            },
        }
    }

    /// Size in bytes, or `None` when nothing is stored at this path.
    ///
    /// # Errors
    /// Storage errors other than "not found".
    pub async fn size(&self) -> Result<Option<u64>> {
        match self.store.head(&self.path).await {
            Ok(meta) => Ok(Some(meta.size)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.io_err(e)),
        }
    }

    /// Reads `range`.
    ///
    /// # Errors
    /// Storage errors, or a short read.
    pub async fn get_range(&self, range: Range<u64>) -> Result<Bytes> {
        let want = range.end - range.start;
        let b = self
            .store
            .get_range(&self.path, range.clone())
            .await
            .map_err(|e| self.io_err(e))?;
        if b.len() as u64 != want {
            return Err(Error::corrupt(
                &self.display,
                "file",
                format!("short read of {range:?}: got {} bytes", b.len()),
            ));
        }
        Ok(b)
    }

    /// Reads up to `hint` bytes from the start and returns them with the object's size:
    /// one request, so small files are read whole. `None` when nothing is stored there.
    ///
    /// # Errors
    /// Storage errors other than "not found".
    pub async fn get_prefix(&self, hint: u64) -> Result<Option<(Bytes, u64)>> {
        let opts = object_store::GetOptions {
            range: Some(object_store::GetRange::Bounded(0..hint.max(1))),
            ..Default::default()
        };
        let res = match self.store.get_opts(&self.path, opts).await {
            Ok(r) => r,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => {
                // An empty object cannot serve a range starting at 0.
                if let Some(0) = self.size().await? {
                    return Ok(Some((Bytes::new(), 0)));
                }
                return Err(self.io_err(e));
            }
        };
        let size = res.meta.size;
        let b = res.bytes().await.map_err(|e| self.io_err(e))?;
        Ok(Some((b, size)))
    }

    /// Reads several ranges; the store may coalesce neighbours into one request.
    ///
    /// # Errors
    /// Storage errors, or a short read.
    pub async fn get_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        if ranges.is_empty() {
            return Ok(Vec::new());
        }
        let out = self
            .store
            .get_ranges(&self.path, ranges)
            .await
            .map_err(|e| self.io_err(e))?;
        for (r, b) in ranges.iter().zip(&out) {
            if b.len() as u64 != r.end - r.start {
                return Err(Error::corrupt(
                    &self.display,
                    "file",
                    format!("short read of {r:?}"),
                ));
            }
        }
        Ok(out)
    }

    /// Reads the whole object.
    ///
    /// # Errors
    /// Storage errors ("not found" included).
    pub async fn get_all(&self) -> Result<Bytes> {
        let r = self
            .store
            .get(&self.path)
            .await
            .map_err(|e| self.io_err(e))?;
        let b = r.bytes().await.map_err(|e| self.io_err(e))?;
        Ok(b)
    }

    /// Names of the files and sub-directories directly below this directory, sorted.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn list_dir(&self) -> Result<(Vec<String>, Vec<String>)> {
        let res = self
            .store
            .list_with_delimiter(Some(&self.path))
            .await
            .map_err(|e| self.io_err(e))?;
        let mut files: Vec<String> = res
            .objects
            .iter()
            .filter_map(|m| m.location.filename().map(str::to_string))
            .collect();
        let mut dirs: Vec<String> = res
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename().map(str::to_string))
            .collect();
        files.sort();
        dirs.sort();
        Ok((files, dirs))
    }
}
