//! Reads are few and small: a store wrapper counts every request (`get_opts`, after
//! `get_ranges` coalescing) and the bytes it returns.

use crate::arrow_values::json_of;
use crate::containers::arrays;
use crate::util::{fixture, sha256_hex};
use async_trait::async_trait;
use datafusion_blosc2::container::frame::Frame;
use datafusion_blosc2::io::Location;
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::*;
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug)]
struct Counting {
    inner: Arc<dyn ObjectStore>,
    requests: AtomicU64,
    bytes: Arc<AtomicU64>,
    /// Every path read or listed, in order.
    paths: std::sync::Mutex<Vec<String>>,
    /// When set, the first request of at least this many bytes waits for the receiver
    /// (the test's gate) before it is served, and sets `entered`.
    gate: std::sync::Mutex<Option<(u64, futures::channel::oneshot::Receiver<()>)>>,
    entered: std::sync::atomic::AtomicBool,
}

impl Counting {
    fn note(&self, l: Option<&Path>) {
        let p = l.map_or(String::new(), |l| l.to_string());
        self.paths.lock().unwrap().push(p);
    }
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
        let len = match &o.range {
            Some(GetRange::Bounded(r)) => r.end - r.start,
            _ => u64::MAX,
        };
        let gate = {
            let mut g = self.gate.lock().unwrap();
            match g.as_ref() {
                Some((min, _)) if len >= *min => g.take(),
                _ => None,
            }
        };
        if let Some((_, open)) = gate {
            self.entered.store(true, Ordering::SeqCst);
            let _ = open.await;
        }
        self.requests.fetch_add(1, Ordering::SeqCst);
        self.note(Some(l));
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
        self.note(prefix);
        self.inner.list(prefix).boxed()
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.requests.fetch_add(1, Ordering::SeqCst);
        self.note(prefix);
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
        paths: Default::default(),
        gate: Default::default(),
        entered: Default::default(),
    })
}

/// Registers fixture `rel` (a trailing `/` kept) as table `name` of `ctx`, read through a
/// fresh [`Counting`] store registered as `counted://local`, which it returns.
async fn register_counted(
    ctx: &datafusion::prelude::SessionContext,
    name: &str,
    rel: &str,
) -> Arc<Counting> {
    use datafusion_blosc2::provider::Blosc2SessionExt;
    let store = counting();
    ctx.register_object_store(
        &url::Url::parse("counted://local").unwrap(),
        Arc::clone(&store) as Arc<dyn ObjectStore>,
    );
    let abs = std::fs::canonicalize(fixture(rel)).unwrap();
    let slash = if rel.ends_with('/') { "/" } else { "" };
    let url = format!("counted://local{}{slash}", abs.display());
    ctx.register_blosc2(name, &url, Default::default())
        .await
        .unwrap();
    store
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

/// The column files (`_cols/…`) requested since the last call, as `_cols/` suffixes.
fn column_files_read(store: &Counting) -> std::collections::BTreeSet<String> {
    let mut paths = store.paths.lock().unwrap();
    let out = paths
        .iter()
        .filter_map(|p| p.split_once("/_cols/").map(|(_, f)| f.to_string()))
        .collect();
    paths.clear();
    out
}

/// A CTable opens only the column files a query names: none to register it or to count
/// rows, the projected and filtered ones (with their companions) for a query.
#[tokio::test]
async fn ctable_opens_only_the_columns_a_query_names() {
    use datafusion::arrow::array::RecordBatch;
    use datafusion::prelude::{SessionConfig, SessionContext};

    // One partition keeps rows in stored order for the value comparisons.
    let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(1));
    let store = register_counted(&ctx, "e", "ctable/events.b2d").await;
    let none = std::collections::BTreeSet::new();
    assert_eq!(
        column_files_read(&store),
        none,
        "registering reads no column"
    );

    let rows = |b: &[RecordBatch]| b.iter().map(RecordBatch::num_rows).sum::<usize>();
    let sql = |q: &'static str| {
        let ctx = ctx.clone();
        async move { ctx.sql(q).await.unwrap().collect().await.unwrap() }
    };
    let b = sql("SELECT count(*) FROM e").await;
    assert_eq!(rows(&b), 1);
    assert_eq!(column_files_read(&store), none, "count(*) reads no column");

    let want: Value = crate::util::expected_json("tables.json");
    let want = &want["ctable/events.b2d"]["columns"];

    // A nullable column: its values and its mask sidecar, nothing else.
    let b = sql("SELECT k FROM e").await;
    let got: Vec<Value> = b
        .iter()
        .flat_map(|b| (0..b.num_rows()).map(|i| json_of(b.column(0).as_ref(), i)))
        .collect();
    assert_eq!(&got, want["k"].as_array().unwrap(), "every k value");
    let read = column_files_read(&store);
    assert_eq!(
        read,
        ["k.b2nd", "k.notnull.b2nd"].map(String::from).into(),
        "SELECT k read {read:?}"
    );

    // A filter column and a UTF-8 column (offsets and data); `v` is never opened.
    let b = sql("SELECT tag FROM e WHERE t < 40").await;
    let (ts, tags) = (
        want["t"].as_array().unwrap(),
        want["tag"].as_array().unwrap(),
    );
    let expect: Vec<&Value> = (0..ts.len())
        .filter(|&i| ts[i].as_i64().unwrap() < 40)
        .map(|i| &tags[i])
        .collect();
    let got: Vec<Value> = b
        .iter()
        .flat_map(|b| (0..b.num_rows()).map(|i| json_of(b.column(0).as_ref(), i)))
        .collect();
    assert!(!expect.is_empty());
    assert_eq!(got.iter().collect::<Vec<_>>(), expect, "tag where t < 40");
    let read = column_files_read(&store);
    // `k` was opened by the previous query and stays open; only the new ones are read.
    assert_eq!(
        read,
        ["t.b2nd", "tag.b2nd", "tag.utf8.b2nd"]
            .map(String::from)
            .into(),
        "SELECT tag … WHERE t read {read:?}"
    );
}

/// A hive-partitioned directory through an object store URL: the partition directories
/// are listed and read by their names as stored (`station=south%20east` is that
/// directory, not `station=south east`), and a filter on partition columns scans only
/// the members it picks (each member's values checked against the writer's).
#[tokio::test]
async fn partitioned_directory_through_a_store() {
    use datafusion::prelude::SessionContext;
    use datafusion_blosc2::provider::Blosc2SessionExt;

    let ctx = SessionContext::new();
    let store = register_counted(&ctx, "t", "partitioned/temps/").await;
    let listed = store.paths.lock().unwrap().clone();
    assert!(
        listed
            .iter()
            .any(|p| p.ends_with("year=2023/station=south%20east")),
        "listed {listed:?}"
    );
    let want: Value = crate::util::expected_json("partitioned.json");
    let rows = want["partitioned/temps"]["rows"].as_array().unwrap();
    for (year, station) in [("2023", "north"), ("2023", "south east"), ("2024", "north")] {
        let of_member: Vec<f64> = rows
            .iter()
            .filter(|r| r[2] == year && r[3] == station)
            .map(|r| r[1].as_f64().unwrap())
            .collect();
        let sql = format!(
            "SELECT count(*), sum(value) FROM t WHERE year = '{year}' AND station = '{station}'"
        );
        let plan = ctx.sql(&format!("EXPLAIN {sql}")).await.unwrap();
        let plan =
            datafusion::arrow::util::pretty::pretty_format_batches(&plan.collect().await.unwrap())
                .unwrap()
                .to_string();
        let scanned = plan.matches("Blosc2Exec").count();
        let files = if year == "2024" { 2 } else { 1 };
        // count(*) of the picked members is a statistic; the sum scans them alone.
        assert_eq!(scanned, files, "{plan}");
        let (count, sum) = count_and_sum(&ctx, &sql).await;
        assert_eq!(count, of_member.len(), "{year} {station}");
        let expect: f64 = of_member.iter().sum();
        assert!((sum - expect).abs() < 1e-9, "{year} {station}: {sum}");
    }

    // A glob below the root is matched level by level through the store too.
    let abs = std::fs::canonicalize(fixture("partitioned/temps")).unwrap();
    let glob = format!(
        "counted://local{}/year=*/station=north/*.b2nd",
        abs.display()
    );
    ctx.register_blosc2("north", &glob, Default::default())
        .await
        .unwrap();
    let (count, sum) = count_and_sum(&ctx, "SELECT count(*), sum(value) FROM north").await;
    let north: Vec<f64> = rows
        .iter()
        .filter(|r| r[3] == "north")
        .map(|r| r[1].as_f64().unwrap())
        .collect();
    assert_eq!(count, north.len());
    assert!((sum - north.iter().sum::<f64>()).abs() < 1e-9, "{sum}");
}

/// The count and the sum `sql` (`SELECT count(*), sum(…) …`) returns.
async fn count_and_sum(ctx: &datafusion::prelude::SessionContext, sql: &str) -> (usize, f64) {
    use datafusion::arrow::array::{Float64Array, Int64Array};
    let b = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    let count = b[0]
        .column(0)
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap();
    let sum = b[0]
        .column(1)
        .as_any()
        .downcast_ref::<Float64Array>()
        .unwrap();
    (count.value(0) as usize, sum.value(0))
}

/// Partition directories are walked to a bounded depth (the file system's own loop
/// check stops a link back to an ancestor): both end in an error, not an endless walk.
#[cfg(unix)]
#[tokio::test]
async fn partition_walks_are_bounded() {
    use datafusion::prelude::SessionContext;
    use datafusion_blosc2::provider::Blosc2SessionExt;
    let member = fixture("partitioned/temps/year=2023/station=north/part-0.b2nd");
    let open = |dir: std::path::PathBuf| async move {
        SessionContext::new()
            .register_blosc2("t", dir.to_str().unwrap(), Default::default())
            .await
            .unwrap_err()
            .to_string()
    };
    let d = tempfile::tempdir().unwrap();
    let mut deep = d.path().to_path_buf();
    for k in 0..40 {
        deep.push(format!("k{k}=1"));
    }
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::copy(&member, deep.join("a.b2nd")).unwrap();
    let e = open(d.path().to_path_buf()).await;
    assert!(
        e.contains("partition directories nest deeper than 32"),
        "{e}"
    );
    // `**` crosses any directory, to the same bound.
    let e = open(d.path().join("**").join("*.b2nd")).await;
    assert!(e.contains("directories nest deeper than 32"), "{e}");
    let e = open(d.path().join("k0=1").join("**")).await;
    assert!(e.contains("directories nest deeper than 32"), "{e}");

    let d = tempfile::tempdir().unwrap();
    std::fs::copy(&member, d.path().join("a.b2nd")).unwrap();
    std::os::unix::fs::symlink(".", d.path().join("k=1")).unwrap();
    let e = open(d.path().to_path_buf()).await;
    assert!(e.contains("loop"), "{e}");
}

/// The members of a multi-file table keep no chunks once a scan of them is over (each
/// would keep a few, and many members add up); a single-file table keeps its few for the
/// next query. Both answer a second query alike.
#[tokio::test]
async fn multi_file_members_keep_no_chunks_after_a_scan() {
    use datafusion::prelude::SessionContext;
    use datafusion_blosc2::provider::{
        Blosc2MultiTable, Blosc2Options, Blosc2SessionExt, Blosc2Table,
    };
    let ctx = SessionContext::new();
    for (name, rel) in [
        ("many", "partitioned/temps"),
        ("one", "b2nd/geom-1d-big.b2nd"),
    ] {
        let path = fixture(rel);
        ctx.register_blosc2(name, path.to_str().unwrap(), Blosc2Options::default())
            .await
            .unwrap();
    }
    let sum = |t: &'static str| {
        let ctx = ctx.clone();
        async move {
            let sql = format!("SELECT count(*), sum(value) FROM {t}");
            let b = ctx.sql(&sql).await.unwrap().collect().await.unwrap();
            (0..b[0].num_columns())
                .map(|c| json_of(b[0].column(c).as_ref(), 0))
                .collect::<Vec<Value>>()
        }
    };
    let first = sum("many").await;
    assert_eq!(sum("many").await, first);
    let many = ctx.table_provider("many").await.unwrap();
    let many = many.downcast_ref::<Blosc2MultiTable>().unwrap();
    let mut members = 0;
    for (rel, t) in many.members() {
        assert_eq!(t.dataset().kept_chunk_bytes(), 0, "{rel}");
        members += 1;
    }
    assert!(members > 1);
    let first = sum("one").await;
    assert_eq!(sum("one").await, first);
    let one = ctx.table_provider("one").await.unwrap();
    let one = one.downcast_ref::<Blosc2Table>().unwrap();
    assert!(one.dataset().kept_chunk_bytes() > 0);
}

/// A read that needs a chunk another read is fetching whole (two partitions whose units
/// share a big chunk, as a one-chunk CTable column's do) fetches only the blocks it needs,
/// even half of them, and does not wait; the chunk is then kept once.
#[tokio::test]
async fn a_read_of_a_chunk_being_fetched_whole_fetches_only_its_blocks() {
    use datafusion_blosc2::array::ndarray::NdArray;
    // 200 x 100, chunks 64 x 50, blocks 16 x 25: chunk 5 holds rows 128..192, cols
    // 50..100, in 8 blocks.
    let rel = "b2nd/codec-lz4-bitshuffle.b2nd";
    let reference = crate::containers::open(rel, "b2nd").await;
    let stored = reference.chunk_cost(5);
    let (open_gate, gate) = futures::channel::oneshot::channel();
    let store = counting();
    let mut a = NdArray::open_frame(&loc(&store, rel), None).await.unwrap();
    a.set_partial_fetch_min(0);
    *store.gate.lock().unwrap() = Some((stored, gate));
    // The whole chunk, read (and fetched whole) by another task, held at the store.
    let first = tokio::spawn({
        let a = a.clone();
        async move {
            let mut stats = Default::default();
            let got = a.read_box(&[128..192, 50..100], &mut stats).await.unwrap();
            (got, stats.bytes_fetched)
        }
    });
    while !store.entered.load(Ordering::SeqCst) {
        tokio::task::yield_now().await;
    }
    // Half the chunk's blocks: alone, that read would fetch the chunk whole.
    let half = [128..160, 50..100];
    let mut stats = Default::default();
    let got = a.read_box(&half, &mut stats).await.unwrap();
    let want = reference.read_box(&half, &mut Default::default()).await;
    assert_eq!(got, want.unwrap());
    assert!(
        stats.bytes_fetched > 0 && stats.bytes_fetched < stored * 3 / 4,
        "{} of {stored} bytes fetched",
        stats.bytes_fetched
    );
    open_gate.send(()).unwrap();
    let (got, fetched) = first.await.unwrap();
    let want = reference
        .read_box(&[128..192, 50..100], &mut Default::default())
        .await;
    assert_eq!(got, want.unwrap());
    assert_eq!(fetched, stored);
    // Kept once, for the next read.
    assert_eq!(a.kept_chunk_bytes() as u64, stored);
    let mut stats = Default::default();
    a.read_box(&half, &mut stats).await.unwrap();
    assert_eq!(stats.bytes_fetched, 0);
}
