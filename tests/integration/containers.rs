//! Every array fixture (b2nd contiguous and sparse, plain super-chunks, bcolz carrays),
//! read through `object_store`, equals NumPy's `arr.tobytes()` (sha256 by the writer).

use crate::util::{c_blosc2, fixture, sha256_16, sha256_hex};
use datafusion_blosc2::array::ndarray::NdArray;
use datafusion_blosc2::container::frame::Frame;
use datafusion_blosc2::io::Location;
use serde_json::Value;

pub fn arrays() -> serde_json::Map<String, Value> {
    let v: Value = crate::util::expected_json("arrays.json");
    v.as_object().unwrap().clone()
}

/// Fixture `rel` as an array: a bcolz carray for `kind` "bcolz", else a frame (a b2nd
/// array or a super-chunk).
pub async fn open(rel: &str, kind: &str) -> NdArray {
    let loc = Location::local(fixture(rel)).unwrap();
    match kind {
        "bcolz" => NdArray::open_bcolz(&loc, None)
            .await
            .unwrap_or_else(|e| panic!("{rel}: {e}")),
        _ => NdArray::open_frame(&loc, None)
            .await
            .unwrap_or_else(|e| panic!("{rel}: {e}")),
    }
}

#[tokio::test]
async fn every_array_fixture_reads_back_exactly() {
    let all = arrays();
    assert!(all.len() >= 50);
    for (rel, info) in &all {
        let arr = open(rel, info["kind"].as_str().unwrap()).await;
        let shape: Vec<u64> = info["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect();
        if info["kind"] != "schunk" {
            assert_eq!(arr.geometry.shape, shape, "{rel}");
        }
        let bytes = arr
            .read_all()
            .await
            .unwrap_or_else(|e| panic!("{rel}: {e}"));
        assert_eq!(
            sha256_hex(&bytes),
            info["sha256"].as_str().unwrap(),
            "{rel}"
        );
        // The scan's block-parallel path (whole chunks decoded on several threads).
        let whole: Vec<std::ops::Range<u64>> = arr.geometry.shape.iter().map(|&s| 0..s).collect();
        let par = arr
            .read_box_threads(&whole, &mut Default::default(), 3)
            .await
            .unwrap_or_else(|e| panic!("{rel}: {e}"));
        assert!(par == bytes, "{rel}: 3-thread read differs");
        if let Some(attrs) = info.get("attrs") {
            let got = arr.attributes_json();
            for (k, v) in attrs.as_object().unwrap() {
                assert_eq!(&got[k], v, "{rel}: attribute {k}");
            }
        }
    }
}

/// A read of a few blocks of a chunk fetches the chunk's header and those blocks only (a
/// compact chunk); a second read of the chunk fetches it whole, a third none of it. The
/// frames must be bigger than what opening reads (small frames are read whole).
#[tokio::test]
async fn small_reads_fetch_only_their_blocks() {
    // 200 x 100, chunks 64 x 50, blocks 16 x 25: chunk 5 holds rows 128..192, cols 50..100.
    for rel in [
        "b2nd/codec-lz4-bitshuffle.b2nd",
        "b2nd/codec-zlib-delta.b2nd",
        "b2nd/codec-blosclz.b2nd",
    ] {
        let whole = open(rel, "b2nd").await;
        let mut parts = open(rel, "b2nd").await;
        parts.set_partial_fetch_min(0);
        let stored = whole.chunk_cost(5);
        let mut fetched = Vec::new();
        for bx in [[130..131, 60..61], [180..182, 90..92], [131..133, 61..63]] {
            let want = whole.read_box(&bx, &mut Default::default()).await.unwrap();
            let mut stats = Default::default();
            let got = parts.read_box(&bx, &mut stats).await.unwrap();
            assert_eq!(got, want, "{rel} {bx:?}");
            fetched.push(stats.bytes_fetched);
        }
        // Blocks 0, then 7 (of 4 x 2), apart: in parts both times (as an index's finds);
        // then block 0 again, among those read: fetched whole (a scan going through).
        assert!(
            fetched[..2].iter().all(|&f| f > 0 && f < stored / 2),
            "{rel}: {fetched:?} of {stored}"
        );
        assert_eq!(fetched[2], stored, "{rel}");
        // Chunk 4 (rows 128..192, cols 0..50), next to chunk 5 fetched whole: taken as
        // a scan going through the array, so fetched whole at once. Chunk 1 (rows 0..64,
        // cols 50..100), away from both: in parts.
        for (bx, chunk, whole_fetch) in
            [([130..131, 10..11], 4, true), ([10..11, 60..61], 1, false)]
        {
            let want = whole.read_box(&bx, &mut Default::default()).await.unwrap();
            let mut stats = Default::default();
            let got = parts.read_box(&bx, &mut stats).await.unwrap();
            assert_eq!(got, want, "{rel} {bx:?}");
            let stored = whole.chunk_cost(chunk);
            if whole_fetch {
                assert_eq!(stats.bytes_fetched, stored, "{rel} {bx:?}");
            } else {
                assert!(stats.bytes_fetched < stored / 4, "{rel} {bx:?}");
            }
        }
    }

    // Every fixture, one element in the middle: the same bytes as a whole-chunk read.
    let mut partial = 0;
    for (rel, info) in &arrays() {
        let kind = info["kind"].as_str().unwrap();
        let whole = open(rel, kind).await;
        let mut parts = open(rel, kind).await;
        parts.set_partial_fetch_min(0);
        let g = &whole.geometry;
        if g.shape.contains(&0) {
            continue;
        }
        let bx: Vec<std::ops::Range<u64>> = g.shape.iter().map(|&s| s / 2..s / 2 + 1).collect();
        let want = whole.read_box(&bx, &mut Default::default()).await.unwrap();
        let mut stats = Default::default();
        let got = parts
            .read_box(&bx, &mut stats)
            .await
            .unwrap_or_else(|e| panic!("{rel}: {e}"));
        assert_eq!(got, want, "{rel}");
        let chunk = g.chunks_in_box(&bx).first().copied().unwrap_or(0);
        if stats.bytes_fetched > 0 && stats.bytes_fetched < whole.chunk_cost(chunk) {
            partial += 1;
        }
    }
    assert!(partial >= 3, "{partial} fixtures read in parts");
}

#[tokio::test]
async fn boxes_read_only_what_they_touch() {
    // 1-D, 100k items, chunks of 10k, blocks of 1k: a 50-item box touches 1 chunk, 1 block.
    let arr = open("b2nd/geom-1d-big.b2nd", "b2nd").await;
    let mut stats = Default::default();
    let got = arr.read_box(&[45_500..45_550], &mut stats).await.unwrap();
    let want: Vec<u8> = (45_500i64..45_550)
        .flat_map(|i| (i * 2 + 1).to_le_bytes())
        .collect();
    assert_eq!(got, want);
    assert_eq!(
        (
            stats.chunks_read,
            stats.blocks_decoded,
            stats.blocks_skipped
        ),
        (1, 1, 9)
    );
    // 3-D box across chunk edges equals the same slice of the whole array.
    let arr = open("b2nd/geom-3d.b2nd", "b2nd").await;
    let all = arr.read_all().await.unwrap();
    let bx = [3..9, 4..11, 2..12];
    let got = arr.read_box(&bx, &mut Default::default()).await.unwrap();
    let mut want = Vec::new();
    for i in bx[0].clone() {
        for j in bx[1].clone() {
            for k in bx[2].clone() {
                let off = ((i * 11 + j) * 12 + k) as usize * 8;
                want.extend_from_slice(&all[off..off + 8]);
            }
        }
    }
    assert_eq!(got, want);
    // Boxes outside the array, of the wrong rank, or into a buffer of the wrong size are
    // refused before anything is allocated or read.
    let mut stats = Default::default();
    for bad in [
        vec![0..11, 0..11, 0..12],
        vec![0..10, 0..11, 0..u64::MAX],
        vec![std::ops::Range { start: 5, end: 4 }, 0..11, 0..12],
        vec![0..10, 0..11],
    ] {
        let e = arr.read_box(&bad, &mut stats).await.unwrap_err();
        assert!(e.to_string().contains("box"), "{bad:?}: {e}");
    }
    let mut short = vec![0u8; 8];
    let e = arr
        .read_box_into(&[0..1, 0..1, 0..2], &mut short, &mut stats, 1)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("into 8 bytes"), "{e}");
    assert_eq!(stats.bytes_fetched, 0);
}

/// A random non-empty box inside `shape`.
fn random_box(rng: &mut crate::util::Rng, shape: &[u64]) -> Vec<std::ops::Range<u64>> {
    shape
        .iter()
        .map(|&n| {
            let a = rng.next(n);
            a..a + 1 + rng.next(n - a)
        })
        .collect()
}

/// The items of box `bx`, C order, cut from `whole`, an array of `shape` holding items
/// of `item` bytes.
fn box_of(whole: &[u8], shape: &[u64], item: usize, bx: &[std::ops::Range<u64>]) -> Vec<u8> {
    let count: u64 = bx.iter().map(|r| r.end - r.start).product();
    let mut out = Vec::with_capacity(count as usize * item);
    for k in 0..count {
        // The k-th item of the box as a flat index of the array.
        let (mut rem, mut flat, mut stride) = (k, 0u64, 1u64);
        for d in (0..shape.len()).rev() {
            let len = bx[d].end - bx[d].start;
            flat += (bx[d].start + rem % len) * stride;
            rem /= len;
            stride *= shape[d];
        }
        let at = flat as usize * item;
        out.extend_from_slice(&whole[at..at + item]);
    }
    out
}

/// Chunks whose blocks need the array's block shape, ZFP arrays (python-blosc2's lossy
/// float codecs) and NDCELL and NDMEAN ones, read by boxes: the blocks a box touches, decoded alone,
/// give the same values as the whole array (which `every_array_fixture_reads_back_exactly`
/// checks against python-blosc2), and boxes that leave some blocks untouched skip them.
/// Their chunks decoded without the array, as a plain super-chunk's are, are refused
/// with what they lack.
#[tokio::test]
async fn block_shaped_chunks_read_by_boxes_equal_the_whole_array() {
    let mut rng = crate::util::Rng(0x2F9_0001);
    let mut skipped = 0;
    for rel in [
        "b2nd/zfp-acc-1d.b2nd",
        "b2nd/zfp-prec-2d.b2nd",
        "b2nd/zfp-rate-3d.b2nd",
        "b2nd/zfp-acc-4d.b2nd",
        "b2nd/ndcell-2d.b2nd",
        "b2nd/ndcell-3d-shuffle.b2nd",
        "b2nd/ndmean-2d.b2nd",
        "b2nd/ndmean-3d-bitshuffle.b2nd",
        "b2nd/ndmean-1d-wide-cells.b2nd",
    ] {
        let f = Frame::open(&Location::local(fixture(rel)).unwrap())
            .await
            .unwrap();
        let raw = f.fetch_chunks(&[0]).await.unwrap();
        let e = f.decode(0, &raw[0]).unwrap_err().to_string();
        assert!(e.contains("block shape of the b2nd array"), "{rel}: {e}");
        let arr = open(rel, "b2nd").await;
        let all = arr.read_all().await.unwrap();
        let shape = arr.geometry.shape.clone();
        let item = all.len() / shape.iter().product::<u64>() as usize;
        for _ in 0..12 {
            let bx = random_box(&mut rng, &shape);
            let mut stats = Default::default();
            let got = arr.read_box(&bx, &mut stats).await.unwrap();
            skipped += stats.blocks_skipped;
            assert!(got == box_of(&all, &shape, item, &bx), "{rel}: box {bx:?}");
        }
    }
    assert!(skipped > 0, "no box skipped a block");
}

#[tokio::test]
async fn c_blosc2_frames_decode() {
    for (name, nbytes, sha) in [
        (
            "compat/varchunks-lz4-3.0.0.b2frame",
            4_321,
            "3cd5f447ffd0ddc9",
        ),
        (
            "compat/vlblocks-lz4-fixed-3.0.0.b2frame",
            10_000,
            "49282948b4f2748a",
        ),
        (
            "compat/vlblocks-lz4-variable-3.0.0.b2frame",
            10_000,
            "1418bc37f9672f9d",
        ),
        (
            "tests_fuzz_corpus/frame_simple-blosclz.b2frame",
            2_000_000,
            "1d2d58a111f57eeb",
        ),
        (
            "tests_fuzz_corpus/frame_simple-lz4.b2frame",
            2_000_000,
            "1d2d58a111f57eeb",
        ),
        (
            "tests_fuzz_corpus/frame_simple-lz4hc.b2frame",
            2_000_000,
            "1d2d58a111f57eeb",
        ),
        (
            "tests_fuzz_corpus/frame_simple-zlib.b2frame",
            2_000_000,
            "1d2d58a111f57eeb",
        ),
        (
            "tests_fuzz_corpus/frame_simple-zstd.b2frame",
            2_000_000,
            "1d2d58a111f57eeb",
        ),
    ] {
        let f = Frame::open(&Location::local(c_blosc2(name)).unwrap())
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let idx: Vec<u64> = (0..f.nchunks()).collect();
        let raws = f.fetch_chunks(&idx).await.unwrap();
        let mut all = Vec::new();
        for (i, r) in idx.iter().zip(&raws) {
            all.extend(f.decode(*i, r).unwrap_or_else(|e| panic!("{name}: {e}")));
        }
        assert_eq!(all.len(), nbytes, "{name}");
        assert_eq!(sha256_16(&all), sha, "{name}");
    }
}

#[tokio::test]
async fn typesize_mismatch_is_reported_and_overridable() {
    use datafusion_blosc2::array::dtype::DType;
    let loc = Location::local(c_blosc2("plugins_test_data/example_day_month_temp.b2nd")).unwrap();
    let err = NdArray::open_frame(&loc, None)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("typesize is 4") && err.contains("override"),
        "{err}"
    );
    let arr = NdArray::open_frame(&loc, Some(DType::parse("<f4").unwrap()))
        .await
        .unwrap();
    assert_eq!(arr.geometry.shape, vec![400, 3]);
    let bytes = arr.read_all().await.unwrap();
    let vals: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(vals.len(), 1200);
    // First elements as python-blosc2 decompresses chunk 0 (blocks span whole rows here).
    assert_eq!(&vals[..3], &[9.0, 3.0, 31.144001]);
    assert_eq!((vals[4], vals[5]), (19.0, 1.0));
}

/// `read_rows_into` (what scans of arrays whose chunks and blocks span whole rows decode
/// into Arrow buffers with) agrees with `read_box` for whole chunks, block-aligned runs
/// and ragged ranges, and decodes only the blocks of a block-aligned run; arrays whose
/// chunks or blocks split rows are refused.
#[tokio::test]
async fn row_reads_into_place() {
    for rel in [
        "b2nd/geom-1d-big.b2nd",
        "b2nd/special-zeros.b2nd",
        // Special chunks: only the wanted rows are filled.
        "b2nd/special-full.b2nd",
        "b2nd/mixed-special.b2nd",
        "schunk/special-nan.b2frame",
        "schunk/plain.b2frame",
        "b2nd/geom-2d-rows.b2nd",
        "b2nd/geom-3d-rows.b2nd",
        "b2nd/geom-2d-tiles.b2nd",
        "b2nd/geom-3d-tiles.b2nd",
    ] {
        let arr = open(rel, "frame").await;
        let g = &arr.geometry;
        let (n, c, b) = (g.shape[0], g.chunkshape[0], g.blockshape[0]);
        let mut ranges = vec![0..n, 0..c.min(n), n - n.min(7)..n, n / 3..n / 2];
        if c > 2 * b && n > c + 3 * b {
            ranges.push(c + b..c + 3 * b);
            ranges.push(c + b..c + 3 * b - 1);
        }
        // Every column of chunks along the other dimensions that lies inside the array
        // (one, the whole width, for whole-row layouts).
        let mut columns: Vec<Vec<std::ops::Range<u64>>> = vec![vec![]];
        for d in 1..g.ndim() {
            let k = g.shape[d] / g.chunkshape[d];
            columns = columns
                .into_iter()
                .flat_map(|p| {
                    (0..k).map(move |j| {
                        let mut p = p.clone();
                        p.push(j * g.chunkshape[d]..(j + 1) * g.chunkshape[d]);
                        p
                    })
                })
                .collect();
        }
        for inner in &columns {
            for r in &ranges {
                let mut bx = vec![r.clone()];
                bx.extend(inner.iter().cloned());
                let row =
                    arr.contiguous_row_items(&bx).expect("contiguous rows") * arr.itemsize() as u64;
                let want = arr.read_box(&bx, &mut Default::default()).await.unwrap();
                for threads in [1, 3] {
                    let mut got = vec![0xAB; ((r.end - r.start) * row) as usize];
                    let mut st = datafusion_blosc2::array::ndarray::ReadStats::default();
                    arr.read_rows_into(&bx, &mut got, &mut st, threads)
                        .await
                        .unwrap_or_else(|e| panic!("{rel} {bx:?}: {e}"));
                    assert!(got == want, "{rel} {bx:?} threads={threads}");
                    if arr.block_addressable && *r == (c + b..c + 3 * b) {
                        assert_eq!(st.blocks_decoded, 2, "{rel} {bx:?}: {st:?}");
                    }
                }
            }
        }
    }
    // Rows that are not contiguous: blocks that split a chunk's rows, a box wider than one
    // chunk, a chunk the array clips (its rows carry padding).
    let split = open("b2nd/geom-2d.b2nd", "b2nd").await;
    let tiles = open("b2nd/geom-2d-tiles.b2nd", "b2nd").await;
    for (arr, bx) in [
        (&split, [0..2, 0..15]),
        (&tiles, [0..2, 0..30]),
        (&tiles, [0..2, 30..40]),
        (&tiles, [0..2, 5..20]),
    ] {
        assert_eq!(arr.contiguous_row_items(&bx), None, "{bx:?}");
        let err = arr
            .read_rows_into(&bx, &mut [0; 2 * 15 * 8], &mut Default::default(), 1)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("row read of"), "{err}");
    }
}

/// Boxes read out of special chunks (one value throughout: zeros, NaN, a repeated value) fill
/// only the blocks they touch, and equal the same elements of the whole array.
#[tokio::test]
async fn boxes_of_special_chunks_read_back() {
    let mut rng = crate::util::Rng(0x5EC1_A100_0000_0001);
    for rel in [
        "b2nd/full-tiles.b2nd",
        "b2nd/special-full.b2nd",
        "b2nd/mixed-special.b2nd",
        "b2nd/special-zeros.b2nd",
        "schunk/special-nan.b2frame",
    ] {
        let arr = open(rel, "frame").await;
        let shape = arr.geometry.shape.clone();
        let whole = arr.read_all().await.unwrap();
        assert_eq!(
            sha256_hex(&whole),
            arrays()[rel]["sha256"].as_str().unwrap(),
            "{rel}"
        );
        let isz = arr.itemsize();
        for _ in 0..60 {
            let bx = random_box(&mut rng, &shape);
            let mut stats = Default::default();
            let got = arr.read_box(&bx, &mut stats).await.unwrap();
            assert!(got == box_of(&whole, &shape, isz, &bx), "{rel} {bx:?}");
        }
    }
}

/// A saved lazy expression stores its recipe, not values: opening it, as an array or
/// through `Dataset::open`, is refused with the expression and its operands (which are
/// themselves arrays that read back exactly above).
#[tokio::test]
async fn saved_lazy_expressions_are_refused_with_their_recipe() {
    use datafusion_blosc2::dataset::{Dataset, OpenOptions};
    let loc = Location::local(fixture("lazy/expr.b2nd")).unwrap();
    let as_array = NdArray::open_frame(&loc, None)
        .await
        .unwrap_err()
        .to_string();
    let as_dataset = Dataset::open(&loc, &OpenOptions::default())
        .await
        .unwrap_err()
        .to_string();
    for err in [as_array, as_dataset] {
        assert!(
            err.contains("lazy/expr.b2nd")
                && err.contains("lazy expression, \"a * b + sin(a)\"")
                && err.contains("over a = operand-a.b2nd, b = operand-b.b2nd")
                && err.contains("not stored"),
            "{err}"
        );
    }
    assert!(arrays().contains_key("lazy/operand-a.b2nd"));
}
