//! The IO seam: a [`Location`] is an `ObjectStore` plus a path; every read of the crate
//! goes through it, so local files and remote stores behave the same.
//!
//! Reads are ranges; [`Location::get_ranges`] lets the store coalesce neighbours. Request
//! counts are asserted by the tests with a counting `ObjectStore` wrapper.
//!
//! Local files ([`Location::local`]) are opened on the calling thread, which copies what
//! the page cache holds (`read_cached`); the rest is read in one task on the runtime's
//! blocking threads. Reads land in buffers recycled once every holder has dropped them
//! (`ReadPool`). `LocalFileSystem::get_ranges` zero-fills a fresh buffer per range, and a
//! full scan spent about as long zero-filling and page-faulting those buffers as decoding.
//! Its `get_opts` opens the file in a blocking task of its own, and each hand-off between
//! threads cost a scan's fetch about as much as the open itself (`benches/README.md`).

use crate::error::{Error, Result};
use bytes::Bytes;
use object_store::path::{Path, PathPart};
use object_store::{ObjectStore, ObjectStoreExt};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// A file or directory inside an object store.
#[derive(Debug, Clone)]
pub struct Location {
    store: Arc<dyn ObjectStore>,
    path: Path,
    display: String,
    /// Set for local files: their reads go through `Location::read_file_ranges`.
    local: Option<LocalFile>,
}

/// Where a local file is on disk (as the store maps its path), and the read buffers of its
/// file tree.
#[derive(Debug, Clone)]
struct LocalFile {
    fs: Arc<object_store::local::LocalFileSystem>,
    /// `None` where the store refuses the path as a file's (the root, `/`): reads of it
    /// go through the store, which reports why; its entries still share the buffers.
    on_disk: Option<PathBuf>,
    pool: Arc<ReadPool>,
}

impl LocalFile {
    /// `path` of the store `fs`.
    fn new(
        fs: Arc<object_store::local::LocalFileSystem>,
        path: &Path,
        pool: Arc<ReadPool>,
    ) -> Self {
        let on_disk = fs.path_to_filesystem(path).ok();
        LocalFile { fs, on_disk, pool }
    }
}

/// Read buffers of one local file tree, kept for reuse once the [`Bytes`] made from them
/// are dropped: the next read lands in memory that is already mapped. A buffer's length
/// only grows (a read uses its first bytes, see [`Recycled`]), so a byte is zeroed once,
/// not each time a shorter read is followed by a longer one, as chunk sizes vary.
#[derive(Debug, Default)]
struct ReadPool {
    bufs: Mutex<Vec<Vec<u8>>>,
}

#[cfg_attr(not(unix), allow(dead_code))]
impl ReadPool {
    /// Idle buffers kept at most, and their total bytes: enough for a scan's partitions to
    /// cycle their few recent chunks, little for an idle table to hold on to.
    const KEEP: usize = 8;
    const KEEP_BYTES: usize = 64 << 20;
    /// Smaller buffers are not kept: malloc serves them from memory it already maps, and
    /// kept, they took the slots of chunk-sized ones (a partial chunk fetch reads a
    /// header of a few hundred bytes), which were then freed and faulted in afresh.
    const KEEP_MIN: usize = 64 << 10;

    /// A buffer of at least `len` initialized bytes (recycled contents or zeros).
    fn take(&self, len: usize) -> Vec<u8> {
        let mut bufs = self.bufs.lock().unwrap_or_else(|e| e.into_inner());
        match bufs.iter().position(|b| worth_reusing(b.capacity(), len)) {
            Some(k) => {
                let mut b = bufs.swap_remove(k);
                if b.len() < len {
                    b.resize(len, 0);
                }
                b
            }
            None => vec![0; len],
        }
    }

    /// Keeps `buf` for reuse, unless it is small; when more than `KEEP` buffers or
    /// `KEEP_BYTES` bytes are held then, the smallest go. Buffers that returned first used
    /// to keep their slots: a query that fetched a few blocks of some chunks (buffers of
    /// 200 KB) and then whole chunks (6.5 MB) filled the pool with the small ones, and
    /// every whole chunk of every later query was zero-filled and faulted in afresh.
    fn give(&self, buf: Vec<u8>) {
        if buf.capacity() < Self::KEEP_MIN || buf.capacity() > Self::KEEP_BYTES {
            return;
        }
        let mut bufs = self.bufs.lock().unwrap_or_else(|e| e.into_inner());
        bufs.push(buf);
        let mut held: usize = bufs.iter().map(Vec::capacity).sum();
        while bufs.len() > Self::KEEP || held > Self::KEEP_BYTES {
            let smallest = (0..bufs.len())
                .min_by_key(|&k| bufs[k].capacity())
                .expect("not empty");
            held -= bufs.swap_remove(smallest).capacity();
        }
    }
}

/// Whether a pooled buffer of `capacity` bytes should serve a request of `len`: big
/// enough, and not much bigger (it would stay mostly unused). Shared by the read pool here
/// and the Arrow buffer pool of the scans.
pub(crate) fn worth_reusing(capacity: usize, len: usize) -> bool {
    capacity >= len && capacity / 2 <= len.max(4096)
}

/// The owner of a [`Bytes`] read by `Location::read_file_ranges`: the first `len` bytes
/// of a pooled buffer, which goes back to the pool when the last clone of the `Bytes` is
/// dropped.
#[cfg_attr(not(unix), allow(dead_code))]
struct Recycled {
    buf: Vec<u8>,
    len: usize,
    pool: Arc<ReadPool>,
}

impl AsRef<[u8]> for Recycled {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Drop for Recycled {
    fn drop(&mut self) {
        self.pool.give(std::mem::take(&mut self.buf));
    }
}

/// Copies into `buf` what the page cache holds of the file from `offset` on, without
/// waiting for the disk (`preadv2` with `RWF_NOWAIT`); returns the bytes copied, which
/// stop at the first byte not cached, at the end of the file, or at any error (the
/// blocking read that follows reports it).
///
/// A scan awaits each of its reads before it decodes, so handing a read of cached bytes to
/// a blocking thread only added two thread wake-ups per read: a full scan of the tiles
/// bench table over LZ4 took 36 ms with them and 29 ms without (`benches/README.md`).
#[cfg(target_os = "linux")]
fn read_cached(file: &std::fs::File, buf: &mut [u8], offset: u64) -> usize {
    use rustix::io::{ReadWriteFlags, preadv2};
    let mut done = 0;
    while done < buf.len() {
        let mut slice = [std::io::IoSliceMut::new(&mut buf[done..])];
        match preadv2(
            file,
            &mut slice,
            offset + done as u64,
            ReadWriteFlags::NOWAIT,
        ) {
            Ok(0) | Err(_) => break,
            Ok(n) => done += n,
        }
    }
    done
}

/// Elsewhere every local read is a blocking one.
#[cfg(all(unix, not(target_os = "linux")))]
fn read_cached(_file: &std::fs::File, _buf: &mut [u8], _offset: u64) -> usize {
    0
}

impl Location {
    /// A location in `store` at `path`; `display` is how errors name it.
    pub fn new(store: Arc<dyn ObjectStore>, path: Path, display: impl Into<String>) -> Self {
        Location {
            store,
            path,
            display: display.into(),
            local: None,
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
        let fs = Arc::new(object_store::local::LocalFileSystem::new());
        let local = Some(LocalFile::new(Arc::clone(&fs), &os_path, Arc::default()));
        let mut loc = Location::new(fs, os_path, p.display().to_string());
        loc.local = local;
        Ok(loc)
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

    /// The entry `name` below this directory (same store). `name` is as a listing
    /// ([`Self::list_dir`]) or the file system spells it: `station=a%20b` is the entry of
    /// that name, not one called `station=a b` (nor `a%2520b`).
    pub fn child(&self, name: &str) -> Location {
        let mut path = self.path.clone();
        for part in name.split('/').filter(|p| !p.is_empty()) {
            // Taken as it is spelled; a part the store cannot hold (`..`, control
            // characters) is escaped instead.
            let part = PathPart::parse(part).unwrap_or_else(|_| PathPart::from(part));
            path = path.clone().join(part);
        }
        let display = format!("{}/{}", self.display.trim_end_matches('/'), name);
        self.sibling(path, display)
    }

    /// The entry at `path` of the same store (named `display` in errors), sharing this
    /// location's read buffers when it is local: the files one scan opens one after the
    /// other reuse memory already mapped instead of zero-filling fresh buffers.
    pub fn sibling(&self, path: Path, display: impl Into<String>) -> Location {
        let local = self
            .local
            .as_ref()
            .map(|l| LocalFile::new(Arc::clone(&l.fs), &path, Arc::clone(&l.pool)));
        Location {
            store: Arc::clone(&self.store),
            path,
            display: display.into(),
            local,
        }
    }

    /// The directory holding this entry (same store), or `None` at the store's root.
    pub fn parent(&self) -> Option<Location> {
        let parts: Vec<PathPart<'_>> = self.path.parts().collect();
        let (_, dirs) = parts.split_last()?;
        let path = Path::from_iter(dirs.iter().cloned());
        let display = match self.display.trim_end_matches('/').rsplit_once('/') {
            Some(("", _)) => "/".to_string(),
            Some((dir, _)) => dir.to_string(),
            None => ".".to_string(),
        };
        Some(self.sibling(path, display))
    }

    /// Nothing is stored here.
    fn not_found(&self) -> Error {
        Error::NotFound {
            path: self.display.clone(),
            what: String::new(),
        }
    }

    fn io_err(&self, source: object_store::Error) -> Error {
        match source {
            object_store::Error::NotFound { .. } => self.not_found(),
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
        let out = match &self.local {
            Some(local) => self.read_file_ranges(Some(ranges), local).await?,
            None => None,
        };
        let out = match out {
            Some(out) => out,
            None => self
                .store
                .get_ranges(&self.path, ranges)
                .await
                .map_err(|e| self.io_err(e))?,
        };
        for (r, b) in ranges.iter().zip(&out) {
            if b.len() as u64 != r.end - r.start {
                return Err(self.short_read(r));
            }
        }
        Ok(out)
    }

    fn short_read(&self, r: &Range<u64>) -> Error {
        Error::corrupt(&self.display, "file", format!("short read of {r:?}"))
    }

    /// `ranges` of a local file (all of it for `None`), into buffers from the file tree's
    /// pool: opened and copied from the page cache on the calling thread, and whatever is
    /// not cached read in one task on the runtime's blocking threads (inline outside a
    /// runtime). A directory is "not found", as the store reports it. `Ok(None)` where the
    /// store reads instead (not unix).
    #[cfg(unix)]
    async fn read_file_ranges(
        &self,
        ranges: Option<&[Range<u64>]>,
        local: &LocalFile,
    ) -> Result<Option<Vec<Bytes>>> {
        use std::os::unix::fs::FileExt;
        let Some(on_disk) = &local.on_disk else {
            return Ok(None);
        };
        let file = std::fs::File::open(on_disk).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => self.not_found(),
            _ => self.local_io(e),
        })?;
        let meta = file.metadata().map_err(|e| self.local_io(e))?;
        if meta.is_dir() {
            return Err(self.not_found());
        }
        let size = meta.len();
        let ranges = ranges.map_or_else(|| vec![0..size], <[_]>::to_vec);
        if let Some(r) = ranges.iter().find(|r| r.end > size || r.start > r.end) {
            return Err(self.short_read(r));
        }
        // What the page cache holds is copied here and now; the rest (if any) is read in
        // a blocking task.
        let mut reads = Vec::with_capacity(ranges.len());
        let mut cached = true;
        for r in ranges {
            let len = (r.end - r.start) as usize;
            let mut buf = local.pool.take(len);
            let done = if cached {
                read_cached(&file, &mut buf[..len], r.start)
            } else {
                0
            };
            cached &= done == len;
            reads.push((r, buf, done));
        }
        let (this, pool) = (self.clone(), Arc::clone(&local.pool));
        let finish = move || -> Result<Vec<Bytes>> {
            let mut out = Vec::with_capacity(reads.len());
            for (r, mut buf, done) in reads {
                let len = (r.end - r.start) as usize;
                file.read_exact_at(&mut buf[done..len], r.start + done as u64)
                    .map_err(|e| {
                        if e.kind() == std::io::ErrorKind::UnexpectedEof {
                            this.short_read(&r)
                        } else {
                            this.local_io(e)
                        }
                    })?;
                let pool = Arc::clone(&pool);
                out.push(Bytes::from_owner(Recycled { buf, len, pool }));
            }
            Ok(out)
        };
        let out = match tokio::runtime::Handle::try_current() {
            Ok(rt) if !cached => rt
                .spawn_blocking(finish)
                .await
                .map_err(|e| self.local_io(e))??,
            _ => finish()?,
        };
        Ok(Some(out))
    }

    /// Other platforms read through the store.
    #[cfg(not(unix))]
    async fn read_file_ranges(
        &self,
        _ranges: Option<&[Range<u64>]>,
        _local: &LocalFile,
    ) -> Result<Option<Vec<Bytes>>> {
        Ok(None)
    }

    fn local_io(&self, e: impl std::error::Error + Send + Sync + 'static) -> Error {
        Error::Io {
            path: self.display.clone(),
            source: object_store::Error::Generic {
                store: "LocalFileSystem",
                source: Box::new(e),
            },
        }
    }

    /// Reads the whole object.
    ///
    /// # Errors
    /// Storage errors ("not found" included).
    pub async fn get_all(&self) -> Result<Bytes> {
        if let Some(local) = &self.local
            && let Some(mut b) = self.read_file_ranges(None, local).await?
        {
            return Ok(b.pop().expect("one range"));
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges_of(data: &[u8], loc: &Location, ranges: &[Range<u64>]) -> Vec<Bytes> {
        let got = futures::executor::block_on(loc.get_ranges(ranges)).unwrap();
        for (r, b) in ranges.iter().zip(&got) {
            assert_eq!(b[..], data[r.start as usize..r.end as usize], "{r:?}");
        }
        got
    }

    /// Names with `%` (hive partition values are percent-encoded on disk:
    /// `station=a%20b`) are listed as the file system spells them, and a child of that
    /// name is that entry.
    #[test]
    fn children_are_named_as_listed() {
        let d = tempfile::tempdir().unwrap();
        for dir in ["k=a%20b", "k=c d", "x{y}%"] {
            std::fs::create_dir(d.path().join(dir)).unwrap();
            std::fs::write(d.path().join(dir).join("f.bin"), dir.as_bytes()).unwrap();
        }
        let root = Location::local(d.path()).unwrap();
        let (files, dirs) = futures::executor::block_on(root.list_dir()).unwrap();
        assert!(files.is_empty());
        assert_eq!(dirs, ["k=a%20b", "k=c d", "x{y}%"]);
        for dir in &dirs {
            let child = root.child(&format!("{dir}/f.bin"));
            let got = futures::executor::block_on(child.get_all()).unwrap();
            assert_eq!(got, dir.as_bytes(), "{dir}");
            let (files, _) = futures::executor::block_on(root.child(dir).list_dir()).unwrap();
            assert_eq!(files, ["f.bin"], "{dir}");
        }
    }

    /// Local ranges and whole files come back right, in recycled buffers once the earlier
    /// ones are dropped (a shorter read in a longer buffer included), with or without a
    /// tokio runtime; a range past the end is a short read.
    #[test]
    fn local_ranges_are_read_into_recycled_buffers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.bin");
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let loc = Location::local(&path).unwrap();
        let ranges = [0..10, 5..100_005, 150_000..200_000, 7..7];
        let first = ranges_of(&data, &loc, &ranges);
        let ptr = first[1].as_ptr();
        drop(first);
        // Only the buffer of at least `KEEP_MIN` bytes is kept (those of the 10-byte,
        // 50,000-byte and empty reads are freed).
        let pool = Arc::clone(&loc.local.as_ref().unwrap().pool);
        let kept: Vec<usize> = pool.bufs.lock().unwrap().iter().map(Vec::len).collect();
        assert_eq!(kept, [100_000]);
        // The 100 000-byte buffer is reused for a range of a similar size.
        let again = ranges_of(&data, &loc, &[60_000..160_000]);
        assert_eq!(again[0].as_ptr(), ptr);
        // Still held by a slice: not handed out again.
        let part = again[0].slice(10..20);
        drop(again);
        let other = ranges_of(&data, &loc, &[1..100_001]);
        assert_ne!(other[0].as_ptr(), ptr);
        drop(part);
        drop(other);
        // A shorter read into a recycled (longer) buffer sees only its own bytes.
        let shorter = ranges_of(&data, &loc, &[1_000..71_000]);
        assert_eq!(shorter[0].len(), 70_000);
        drop(shorter);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let in_rt = rt.block_on(loc.get_ranges(&[100..200_000])).unwrap();
        assert_eq!(in_rt[0][..], data[100..]);
        let all = futures::executor::block_on(loc.get_all()).unwrap();
        assert_eq!(all[..], data[..]);
        let err = futures::executor::block_on(loc.get_ranges(&[10..20, 199_990..200_001]));
        assert!(
            err.unwrap_err()
                .to_string()
                .contains("short read of 199990..200001"),
            "past the end"
        );
    }

    /// A full pool keeps its biggest buffers: small ones returned first do not keep a
    /// chunk-sized one out; one over the byte budget is not kept and evicts nothing.
    #[test]
    fn the_pool_keeps_its_biggest_buffers() {
        let pool = ReadPool::default();
        let held = |p: &ReadPool| {
            let mut v: Vec<usize> = p.bufs.lock().unwrap().iter().map(Vec::capacity).collect();
            v.sort_unstable();
            v
        };
        for k in 0..ReadPool::KEEP {
            pool.give(Vec::with_capacity(100_000 + k));
        }
        pool.give(Vec::with_capacity(7 << 20));
        let got = held(&pool);
        assert_eq!(got.len(), ReadPool::KEEP);
        assert_eq!(got[0], 100_001, "the smallest went");
        assert_eq!(got[ReadPool::KEEP - 1], 7 << 20);
        for _ in 0..9 {
            pool.give(Vec::with_capacity(8 << 20));
        }
        let got = held(&pool);
        assert!(got.iter().sum::<usize>() <= ReadPool::KEEP_BYTES);
        assert_eq!(got.iter().filter(|&&c| c == 8 << 20).count(), 8);
        pool.give(Vec::with_capacity(ReadPool::KEEP_BYTES + 1));
        assert_eq!(held(&pool), got);
        // A chunk-sized request is served from the pool.
        assert_eq!(pool.take(7 << 20).capacity(), 8 << 20);
    }

    /// Reads of a file the page cache holds in part, none of or all of: the cached bytes
    /// are copied at once, the rest read in a blocking task, with the same bytes.
    #[cfg(target_os = "linux")]
    #[test]
    fn uncached_bytes_are_read_from_disk() {
        use rustix::fs::{Advice, fadvise};
        use std::os::unix::fs::FileExt;
        // In `target/`, on a disk file system (`/tmp` may be a tmpfs, which keeps its
        // pages whatever the advice).
        let dir = tempfile::tempdir_in(concat!(env!("CARGO_MANIFEST_DIR"), "/target")).unwrap();
        let path = dir.path().join("f.bin");
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 13 % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        file.sync_all().unwrap();
        let mut buf = vec![0u8; 1_000_000];
        assert_eq!(read_cached(&file, &mut buf, 500_000), 1_000_000);
        assert_eq!(buf[..], data[500_000..1_500_000]);
        // Past the end: the bytes up to it.
        assert_eq!(read_cached(&file, &mut buf, 2_500_000), 500_000);
        let loc = Location::local(&path).unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        let ranges = [0..10, 100_000..1_300_000, 2_000_000..3_000_000];
        // Dropped from the cache, then with nothing cached, and with the file's first
        // 700 kB cached: the first range whole, the second in part.
        for keep in [0..0, 0..700_000] {
            fadvise(&file, 0, None, Advice::DontNeed).unwrap();
            assert!(read_cached(&file, &mut buf, 0) < buf.len(), "not dropped");
            let mut part = vec![0u8; keep.end - keep.start];
            file.read_exact_at(&mut part, keep.start as u64).unwrap();
            let got = rt.block_on(loc.get_ranges(&ranges)).unwrap();
            for (r, b) in ranges.iter().zip(&got) {
                assert!(b[..] == data[r.start as usize..r.end as usize], "{r:?}");
            }
        }
    }

    /// A missing file and a directory are "not found", as the store reports them, inside
    /// a runtime or not.
    #[test]
    fn local_missing_files_and_directories_are_not_found() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let root = Location::local(dir.path()).unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        for name in ["missing.bin", "sub"] {
            let loc = root.child(name);
            for e in [
                futures::executor::block_on(loc.get_all()).unwrap_err(),
                rt.block_on(loc.get_ranges(&[0..1])).unwrap_err(),
            ] {
                assert!(
                    matches!(&e, Error::NotFound { path, .. } if path.ends_with(name)),
                    "{e}"
                );
            }
        }
    }
}
