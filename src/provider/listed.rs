//! How a listing table's scans open the files it lists: [`ListedFiles`].
//!
//! A local file is read with the crate's own reads (one file-system handle and one pool
//! of read buffers per [`super::Blosc2Format`]). An opened file (its frame index,
//! layers, a table's opened columns) is kept in the session's file metadata cache
//! (`RuntimeEnv::cache_manager`, the cache DataFusion's Parquet scans keep footers in),
//! so that later queries, and the other byte ranges of the same query, do not open it
//! again. The cache bounds what it keeps by [`Dataset::heap_bytes`]; the chunks a
//! scan's reads keep are never cached (each open takes a [`Dataset::detached`] copy).
//!
//! The opens of one file that overlap in time (the partitions of a scan, each given a
//! byte range of it, or two queries at once) share one opened copy, and so the chunks
//! its reads keep: a column stored in one big chunk, which every range's units read, is
//! fetched once, not once per partition. The copy, and its chunks, go when the last
//! scan holding it ends.

use super::to_df;
use crate::dataset::{Dataset, OpenOptions};
use crate::io::Location;
use datafusion::common::HashMap;
use datafusion::error::Result;
use datafusion::execution::cache::cache_manager::{
    CachedFileMetadataEntry, FileMetadata, FileMetadataCache,
};
use object_store::{ObjectMeta, ObjectStore};
use std::any::Any;
use std::sync::{Arc, Mutex, Weak};

/// Opens the objects a listing lists, through the session's file metadata cache when it
/// has one.
#[derive(Clone, Default)]
pub(crate) struct ListedFiles {
    local: LocalReads,
    cache: Option<Arc<FileMetadataCache>>,
    /// The files open now, shared by the clones of this value.
    open_now: Arc<Mutex<Vec<OpenNow>>>,
}

/// A file some scan holds open: which version of it, from which store.
struct OpenNow {
    meta: ObjectMeta,
    store: StoreKey,
    dataset: Weak<Dataset>,
}

impl std::fmt::Debug for ListedFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListedFiles")
            .field("cached", &self.cache.is_some())
            .finish_non_exhaustive()
    }
}

/// Whether an open found the file in the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Opened {
    /// Opened from its bytes.
    Read,
    /// Taken from the file metadata cache.
    Cached,
    /// Shared with another scan (or partition) holding the file open.
    Shared,
}

impl ListedFiles {
    /// Opening with `local`'s reads, without a cache.
    pub(crate) fn new(local: LocalReads) -> Self {
        ListedFiles {
            local,
            ..ListedFiles::default()
        }
    }

    /// The same, keeping opened files in `cache`.
    pub(crate) fn with_cache(mut self, cache: Arc<FileMetadataCache>) -> Self {
        self.cache = Some(cache);
        self
    }

    /// The dataset of the object `meta` describes in `store`: the one another scan
    /// holds open when it is this version of the file (same store, size, modification
    /// time and ETag), else from the cache when it holds this version, else opened and
    /// cached. The dataset keeps no chunks from scans that have ended.
    pub(crate) async fn open(
        &self,
        store: &Arc<dyn ObjectStore>,
        meta: &ObjectMeta,
    ) -> Result<(Arc<Dataset>, Opened)> {
        let store_key = StoreKey::of(store);
        if let Some(ds) = self.open_now(&store_key, meta, None) {
            return Ok((ds, Opened::Shared));
        }
        let (ds, how) = self.open_anew(&store_key, store, meta).await?;
        // Another open of the file may have finished meanwhile: the first one is kept.
        match self.open_now(&store_key, meta, Some(&ds)) {
            Some(theirs) => Ok((theirs, Opened::Shared)),
            None => Ok((ds, how)),
        }
    }

    /// The dataset a scan holds open for this version of the file, if any; else records
    /// `mine` (when given) as the one open now. Forgets the files no scan holds.
    fn open_now(
        &self,
        store: &StoreKey,
        meta: &ObjectMeta,
        mine: Option<&Arc<Dataset>>,
    ) -> Option<Arc<Dataset>> {
        let mut open = self.open_now.lock().unwrap_or_else(|e| e.into_inner());
        open.retain(|o| o.dataset.strong_count() > 0);
        let same = |o: &&OpenNow| o.store == *store && same_version(&o.meta, meta);
        if let Some(ds) = open.iter().find(same).and_then(|o| o.dataset.upgrade()) {
            return Some(ds);
        }
        if let Some(ds) = mine {
            open.push(OpenNow {
                meta: meta.clone(),
                store: store.clone(),
                dataset: Arc::downgrade(ds),
            });
        }
        None
    }

    /// [`ListedFiles::open`] when no scan holds the file open.
    async fn open_anew(
        &self,
        store_key: &StoreKey,
        store: &Arc<dyn ObjectStore>,
        meta: &ObjectMeta,
    ) -> Result<(Arc<Dataset>, Opened)> {
        if let Some(cache) = &self.cache
            && let Some(entry) = cache.get(&meta.location)
            && same_version(&entry.meta, meta)
            && let Some(file) = entry.file_metadata.as_any().downcast_ref::<OpenedFile>()
            && file.store == *store_key
        {
            return Ok((Arc::new(file.dataset.detached()), Opened::Cached));
        }
        let ds = open_object(store, meta, &self.local).await?;
        self.keep(store_key.clone(), meta, &ds);
        Ok((Arc::new(ds), Opened::Read))
    }

    /// Caches `ds` again if work on it opened more of it (a table's columns) than the
    /// `before` ([`open_columns`]) it was opened with.
    pub(crate) fn remember(
        &self,
        store: &Arc<dyn ObjectStore>,
        meta: &ObjectMeta,
        ds: &Dataset,
        before: usize,
    ) {
        if open_columns(ds) > before {
            self.keep(StoreKey::of(store), meta, ds);
        }
    }

    fn keep(&self, store: StoreKey, meta: &ObjectMeta, ds: &Dataset) {
        if let Some(cache) = &self.cache {
            let file = OpenedFile {
                dataset: ds.detached(),
                store,
            };
            cache.put(
                &meta.location,
                CachedFileMetadataEntry::new(meta.clone(), Arc::new(file)),
            );
        }
    }
}

/// How many of a table's columns are open (0 for an array).
pub(crate) fn open_columns(ds: &Dataset) -> usize {
    match ds {
        Dataset::Array(_) => 0,
        Dataset::Table(t) => t.opened_columns().count(),
    }
}

/// The store a cached file was read from. The cache is keyed by path alone, and two
/// stores can hold different files at one path, with the same size, time and ETag (two
/// `InMemory` stores count their ETags alike), so an entry is used only for the store
/// it was read from: the same store object (a session's registry hands out the one it
/// holds), printing itself the same way.
#[derive(Debug, Clone, PartialEq, Eq)]
struct StoreKey {
    /// How the store prints itself (`LocalFileSystem(file:///)`, `AmazonS3(bucket)`).
    name: String,
    /// Its address.
    addr: usize,
}

impl StoreKey {
    fn of(store: &Arc<dyn ObjectStore>) -> Self {
        StoreKey {
            name: store.to_string(),
            addr: Arc::as_ptr(store) as *const () as usize,
        }
    }
}

/// An opened file in the file metadata cache, with the store it was read from.
struct OpenedFile {
    dataset: Dataset,
    store: StoreKey,
}

impl FileMetadata for OpenedFile {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn memory_size(&self) -> usize {
        std::mem::size_of::<Self>() + self.store.name.len() + self.dataset.heap_bytes()
    }

    fn extra_info(&self) -> HashMap<String, String> {
        let kind = match &self.dataset {
            Dataset::Array(_) => "blosc2 array",
            Dataset::Table(_) => "blosc2 table",
        };
        HashMap::from_iter([
            ("file_type".to_string(), kind.to_string()),
            (
                "columns_open".to_string(),
                open_columns(&self.dataset).to_string(),
            ),
        ])
    }
}

/// Opens the dataset of one listed object.
async fn open_object(
    store: &Arc<dyn ObjectStore>,
    object: &ObjectMeta,
    local: &LocalReads,
) -> Result<Dataset> {
    let loc = match (local_root(store), local.root()) {
        // The local file system at its root (DataFusion's store for `file://`): read
        // with the crate's local path (reads served inline from the page cache, buffers
        // reused across the files and scans of this format), as a table provider over
        // the same file does.
        (true, Some(root)) => {
            root.sibling(object.location.clone(), format!("/{}", object.location))
        }
        _ => Location::new(
            Arc::clone(store),
            object.location.clone(),
            object.location.to_string(),
        ),
    };
    Dataset::open(&loc, &OpenOptions::default())
        .await
        .map_err(to_df)
}

/// The crate's local reads for the files of one [`super::Blosc2Format`]: one file system
/// handle and one pool of read buffers (bounded, see `io.rs`), shared by every file its
/// scans open. Each file opened anew got buffers of its own, which a scan then
/// zero-filled and page-faulted in: a third of a small rectangle query's time.
#[derive(Debug, Clone, Default)]
pub(crate) struct LocalReads(Arc<std::sync::OnceLock<Option<Location>>>);

impl LocalReads {
    /// The root of the local file system, created on first use; `None` where it cannot
    /// be (the files are then read through the listing's store).
    fn root(&self) -> Option<&Location> {
        self.0.get_or_init(|| Location::local("/").ok()).as_ref()
    }
}

/// True for an `object_store` local file system rooted at `/` (told by how it prints
/// itself: the trait has no downcast).
fn local_root(store: &Arc<dyn ObjectStore>) -> bool {
    store.to_string() == "LocalFileSystem(file:///)"
}

/// True when `a` and `b` describe the same version of one file: its path, size,
/// modification time and ETag.
fn same_version(a: &ObjectMeta, b: &ObjectMeta) -> bool {
    a.location == b.location
        && a.size == b.size
        && a.last_modified == b.last_modified
        && a.e_tag == b.e_tag
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::execution::cache::cache_manager::{CacheManager, CacheManagerConfig};
    use object_store::memory::InMemory;
    use object_store::path::Path;
    use object_store::{ObjectStoreExt, PutPayload};

    /// A store holding the fixtures `names`, and their listings.
    async fn store_of(names: &[&str]) -> (Arc<dyn ObjectStore>, Vec<ObjectMeta>) {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let mut metas = Vec::new();
        for name in names {
            let at = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
            let path = Path::from(*name);
            let bytes = std::fs::read(&at).unwrap();
            store.put(&path, PutPayload::from(bytes)).await.unwrap();
            metas.push(store.head(&path).await.unwrap());
        }
        (store, metas)
    }

    fn cache(limit: usize) -> Arc<FileMetadataCache> {
        let config = CacheManagerConfig::default().with_metadata_cache_limit(limit);
        CacheManager::try_new(&config)
            .unwrap()
            .get_file_metadata_cache()
    }

    #[tokio::test]
    async fn an_opened_file_is_cached_for_its_version_only() {
        let (store, metas) = store_of(&["b2nd/geom-1d-big.b2nd"]).await;
        let files = ListedFiles::default().with_cache(cache(1 << 20));
        let meta = &metas[0];
        let (first, how) = files.open(&store, meta).await.unwrap();
        assert_eq!(how, Opened::Read);
        // Opened again while the first is held: shared; once it is dropped: cached.
        let (shared, how) = files.open(&store, meta).await.unwrap();
        assert_eq!(how, Opened::Shared);
        assert!(Arc::ptr_eq(&first, &shared));
        let first = Arc::unwrap_or_clone(first);
        drop(shared);
        let (again, how) = files.open(&store, meta).await.unwrap();
        assert_eq!(how, Opened::Cached);
        let (Dataset::Array(a), Dataset::Array(b)) = (&first, &*again) else {
            panic!("not arrays");
        };
        assert_eq!(a.geometry, b.geometry);
        assert_eq!(a.read_all().await.unwrap(), b.read_all().await.unwrap());
        // The same bytes written again (a new time and ETag) are opened anew.
        let path = &meta.location;
        let bytes = store.get(path).await.unwrap().bytes().await.unwrap();
        store.put(path, PutPayload::from(bytes)).await.unwrap();
        let rewritten = store.head(path).await.unwrap();
        assert_ne!(rewritten.e_tag, meta.e_tag);
        assert_eq!(
            files.open(&store, &rewritten).await.unwrap().1,
            Opened::Read
        );
        assert_eq!(
            files.open(&store, &rewritten).await.unwrap().1,
            Opened::Cached
        );
        // The ETag alone decides too.
        let mut tagged = rewritten.clone();
        tagged.e_tag = Some("another".into());
        assert_eq!(files.open(&store, &tagged).await.unwrap().1, Opened::Read);
        // Another array at the same path is read, not the cached one.
        let other = std::fs::read(format!(
            "{}/tests/fixtures/b2nd/dtype-le_f8.b2nd",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        store.put(path, PutPayload::from(other)).await.unwrap();
        let replaced = store.head(path).await.unwrap();
        let (ds, how) = files.open(&store, &replaced).await.unwrap();
        assert_eq!(how, Opened::Read);
        let Dataset::Array(c) = &*ds else { panic!() };
        assert_ne!(c.geometry, a.geometry);
    }

    #[tokio::test]
    async fn a_file_cached_from_one_store_is_not_used_for_another() {
        // Two in-memory stores holding different arrays of one size at one path, listed
        // alike (the same size, time and ETag), so that only the store tells them apart.
        let (first, metas) = store_of(&["b2nd/dtype-le_i2.b2nd"]).await;
        let (second, _) = store_of(&["b2nd/dtype-le_u2.b2nd"]).await;
        let theirs = Path::from("b2nd/dtype-le_u2.b2nd");
        let bytes = second.get(&theirs).await.unwrap().bytes().await.unwrap();
        let meta = &metas[0];
        second
            .put(&meta.location, PutPayload::from(bytes))
            .await
            .unwrap();
        assert_eq!(second.head(&meta.location).await.unwrap().size, meta.size);
        assert_eq!(first.to_string(), second.to_string());
        let files = ListedFiles::default().with_cache(cache(16 << 20));
        let (from_first, _) = files.open(&first, meta).await.unwrap();
        let (from_second, how) = files.open(&second, meta).await.unwrap();
        assert_eq!(how, Opened::Read);
        let (Dataset::Array(a), Dataset::Array(b)) = (&*from_first, &*from_second) else {
            panic!("not arrays");
        };
        assert_ne!(a.dtype, b.dtype);
        // Each is shared, while held, with the opens of its own store only.
        let (again, how) = files.open(&first, meta).await.unwrap();
        assert_eq!(how, Opened::Shared);
        assert!(Arc::ptr_eq(&again, &from_first));
        drop((again, from_first));
        let (again, how) = files.open(&second, meta).await.unwrap();
        assert_eq!(how, Opened::Shared);
        assert!(Arc::ptr_eq(&again, &from_second));
        drop((again, from_second));
        // The entry is now the second store's file.
        assert_eq!(files.open(&second, meta).await.unwrap().1, Opened::Cached);
        assert_eq!(files.open(&first, meta).await.unwrap().1, Opened::Read);
    }

    #[tokio::test]
    async fn the_cache_bounds_what_it_keeps_by_heap_size() {
        let (store, metas) = store_of(&["b2nd/geom-1d-big.b2nd"]).await;
        let (ds, _) = ListedFiles::default()
            .open(&store, &metas[0])
            .await
            .unwrap();
        let size = ds.heap_bytes();
        let Dataset::Array(a) = &*ds else { panic!() };
        assert!(size >= a.geometry.nchunks() as usize * 8, "{size}");
        // Too small a cache keeps nothing; one big enough keeps the file.
        for (limit, kept) in [(size / 2, false), (size * 4, true)] {
            let files = ListedFiles::default().with_cache(cache(limit));
            files.open(&store, &metas[0]).await.unwrap();
            let (_, how) = files.open(&store, &metas[0]).await.unwrap();
            assert_eq!(how == Opened::Cached, kept, "limit {limit}, heap {size}");
        }
    }

    #[tokio::test]
    async fn a_tables_columns_opened_by_a_scan_are_cached_with_it() {
        let (store, metas) = store_of(&["ctable/people.b2z"]).await;
        let files = ListedFiles::default().with_cache(cache(16 << 20));
        let meta = &metas[0];
        let (ds, _) = files.open(&store, meta).await.unwrap();
        let Dataset::Table(t) = &*ds else {
            panic!("not a table")
        };
        let before = open_columns(&ds);
        let size = ds.heap_bytes();
        let columns = t.specs.len();
        t.open_columns(0..columns).await.unwrap();
        assert!(open_columns(&ds) > before);
        assert!(ds.heap_bytes() > size);
        files.remember(&store, meta, &ds, before);
        drop(ds);
        let (cached, how) = files.open(&store, meta).await.unwrap();
        assert_eq!(how, Opened::Cached);
        let Dataset::Table(c) = &*cached else {
            panic!()
        };
        assert_eq!(c.opened_columns().count(), columns);
    }
}
