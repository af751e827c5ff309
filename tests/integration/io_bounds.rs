//! Reads are few and small: a store wrapper counts every request (`get_opts`, after
//! `get_ranges` coalescing) and the bytes it returns.

use crate::containers::arrays;
use crate::util::{fixture, sha256_hex};
use async_trait::async_trait;
use datafusion_blosc2::container::frame::Frame;
use datafusion_blosc2::io::Location;
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug)]
struct Counting {
    inner: Arc<dyn ObjectStore>,
    requests: AtomicU64,
    bytes: Arc<AtomicU64>,
}

impl std::fmt::Display for Counting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Counting({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for Counting {
    async fn put_opts(&self, l: &Path, p: PutPayload, o: PutOptions) -> Result<PutResult> {
        self.inner.put_opts(l, p, o).await
    }
    async fn put_multipart_opts(
        &self,
        l: &Path,
        o: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(l, o).await
    }
    async fn get_opts(&self, l: &Path, o: GetOptions) -> Result<GetResult> {
        self.requests.fetch_add(1, Ordering::SeqCst);
        let r = self.inner.get_opts(l, o).await?;
        // Count the bytes of the range served (the payload is read by the caller).
        self.bytes
            .fetch_add(r.range.end - r.range.start, Ordering::SeqCst);
        Ok(r)
    }
    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.requests.fetch_add(1, Ordering::SeqCst);
        self.inner.list(prefix).boxed()
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.requests.fetch_add(1, Ordering::SeqCst);
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy_opts(&self, from: &Path, to: &Path, o: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, o).await
    }
}

fn counting() -> Arc<Counting> {
    Arc::new(Counting {
        inner: Arc::new(local::LocalFileSystem::new()),
        requests: AtomicU64::new(0),
        bytes: Arc::new(AtomicU64::new(0)),
    })
}

fn loc(store: &Arc<Counting>, rel: &str) -> Location {
    let p = std::fs::canonicalize(fixture(rel)).unwrap();
    Location::new(
        Arc::clone(store) as Arc<dyn ObjectStore>,
        Path::from_absolute_path(&p).unwrap(),
        rel,
    )
}

#[tokio::test]
async fn open_and_read_one_chunk_of_1000() {
    let store = counting();
    let l = loc(&store, "schunk/many-chunks.b2frame");
    let size = std::fs::metadata(fixture("schunk/many-chunks.b2frame"))
        .unwrap()
        .len();
    let f = Frame::open(&l).await.unwrap();
    assert_eq!(f.nchunks(), 1000);
    let open_requests = store.requests.load(Ordering::SeqCst);
    let open_bytes = store.bytes.load(Ordering::SeqCst);
    assert!(open_requests <= 2, "opening took {open_requests} requests");
    assert!(
        open_bytes <= 2 * 64 * 1024,
        "opening read {open_bytes} of {size} bytes"
    );
    let raw = f.fetch_chunks(&[500]).await.unwrap();
    let total = store.requests.load(Ordering::SeqCst);
    assert!(total <= 3, "open + chunk 500 took {total} requests");
    let chunk_bytes = store.bytes.load(Ordering::SeqCst) - open_bytes;
    assert_eq!(
        chunk_bytes as usize,
        raw[0].stored_len(),
        "only chunk 500's bytes were read"
    );
    let decoded = f.decode(500, &raw[0]).unwrap();
    let want = &arrays()["schunk/many-chunks.b2frame"]["chunk500_sha256"];
    assert_eq!(&sha256_hex(&decoded), want.as_str().unwrap());
}

#[tokio::test]
async fn small_frames_are_one_request() {
    let store = counting();
    let l = loc(&store, "b2nd/attrs.b2nd");
    let f = Frame::open(&l).await.unwrap();
    let all: Vec<u64> = (0..f.nchunks()).collect();
    f.fetch_chunks(&all).await.unwrap();
    assert_eq!(
        store.requests.load(Ordering::SeqCst),
        1,
        "a 630-byte frame is read once"
    );
}

#[tokio::test]
async fn neighbouring_chunks_are_coalesced() {
    let store = counting();
    let l = loc(&store, "schunk/many-chunks.b2frame");
    let f = Frame::open(&l).await.unwrap();
    let before = store.requests.load(Ordering::SeqCst);
    let idx: Vec<u64> = (100..200).collect();
    f.fetch_chunks(&idx).await.unwrap();
    let used = store.requests.load(Ordering::SeqCst) - before;
    assert_eq!(
        used, 1,
        "100 neighbouring chunks in one request, took {used}"
    );
}
