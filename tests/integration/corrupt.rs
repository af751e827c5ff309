//! Bad input never panics, hangs or over-allocates: fixtures are truncated at every header
//! offset and have bytes flipped across headers, tables and streams; every case must return
//! Ok (with the declared length) or Err.

use crate::chunk_fixtures::expected_chunks;
use crate::util::{c_blosc2, fixture};
use datafusion_blosc2::arrow_reader::reader::read_all;
use datafusion_blosc2::chunk::{Chunk, DecodeLimits};
use datafusion_blosc2::dataset::{Dataset, OpenOptions};
use datafusion_blosc2::io::Location;
use futures::FutureExt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

fn decode_must_not_panic(buf: &[u8], what: &str) {
    let r = std::panic::catch_unwind(|| {
        Chunk::parse(buf).and_then(|c| {
            let n = c.nbytes();
            let serial = c.decode(&DecodeLimits {
                max_nbytes: 64 << 20,
            });
            // Blocks spread over threads fail or succeed alike, with the same bytes.
            if n <= 64 << 20 {
                let mut par = vec![0u8; n];
                let parallel = c.decode_into_parallel(&mut par, 2);
                assert_eq!(parallel.is_ok(), serial.is_ok(), "{what}: parallel decode");
                if let Ok(out) = &serial {
                    assert!(par == *out, "{what}: parallel bytes differ");
                }
            }
            let out = serial?;
            assert_eq!(out.len(), n);
            // Random access on the mutated chunk too.
            if c.nblocks() > 1 {
                let span = c.blocks_byte_range(1..2)?;
                let mut part = vec![0u8; span.len()];
                let _ = c.decode_blocks_into(1..2, &mut part);
            }
            Ok(())
        })
    });
    assert!(r.is_ok(), "decoder panicked on {what}");
}

fn mutations(len: usize, header: usize) -> Vec<usize> {
    let mut pos: Vec<usize> = (0..header.min(len)).collect();
    let step = (len / 97).max(1);
    pos.extend((header..len).step_by(step));
    pos
}

#[test]
fn mutated_chunks_error_cleanly() {
    let mut files: Vec<std::path::PathBuf> = expected_chunks()
        .iter()
        .step_by(7)
        .map(|(rel, _, _)| fixture(rel))
        .collect();
    files.push(c_blosc2("compat/blosc-1.3.0-blosclz.cdata"));
    files.push(c_blosc2("compat/blosc-lz4-3.0.0.cdata"));
    let mut cases = 0;
    for f in &files {
        let orig = std::fs::read(f).unwrap();
        let name = f.file_name().unwrap().to_string_lossy();
        // Truncations: every offset of the header and bstarts, then a spread.
        for cut in mutations(orig.len(), 96) {
            decode_must_not_panic(&orig[..cut], &format!("{name} truncated at {cut}"));
            cases += 1;
        }
        for at in mutations(orig.len(), 64) {
            for x in [0xFFu8, 0x80, 0x01, 0x7F] {
                let mut b = orig.clone();
                b[at] ^= x;
                decode_must_not_panic(&b, &format!("{name} byte {at} ^ {x:#x}"));
                cases += 1;
            }
        }
    }
    assert!(cases > 20_000, "{cases} cases");
}

async fn open_and_read(dir: &std::path::Path, rel: &str) -> Result<(), String> {
    // `store#/key` opens one leaf of a store.
    let (rel, key) = rel
        .split_once('#')
        .map_or((rel, None), |(r, k)| (r, Some(k)));
    let loc = Location::local(dir.join(rel)).map_err(|e| e.to_string())?;
    let ds = match key {
        Some(k) => Dataset::open_key(&loc, k, &OpenOptions::default()).await,
        None => Dataset::open(&loc, &OpenOptions::default()).await,
    }
    .map_err(|e| e.to_string())?;
    read_all(Arc::new(ds), 1 << 16)
        .await
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// Copies `rel` (file or directory) into a temp dir, mutates the file `target` inside it with
/// `f`, and opens + reads it all.
async fn mutate_and_read(rel: &str, target: &str, f: impl Fn(&mut Vec<u8>)) -> Result<(), String> {
    let tmp = tempfile::tempdir().unwrap();
    let (rel, key) = rel.split_once('#').map_or((rel, ""), |(r, k)| (r, k));
    let src = fixture(rel);
    let dst = tmp.path().join(rel.rsplit('/').next().unwrap());
    copy_tree(&src, &dst);
    let t = if target.is_empty() {
        dst.clone()
    } else {
        dst.join(target)
    };
    let mut b = std::fs::read(&t).unwrap();
    f(&mut b);
    std::fs::write(&t, b).unwrap();
    let mut name = dst.file_name().unwrap().to_string_lossy().to_string();
    if !key.is_empty() {
        name = format!("{name}#{key}");
    }
    let r = AssertUnwindSafe(open_and_read(tmp.path(), &name))
        .catch_unwind()
        .await;
    r.map_err(|_| "PANIC".to_string())?
}

fn copy_tree(src: &std::path::Path, dst: &std::path::Path) {
    if src.is_dir() {
        std::fs::create_dir_all(dst).unwrap();
        for e in std::fs::read_dir(src).unwrap() {
            let e = e.unwrap();
            copy_tree(&e.path(), &dst.join(e.file_name()));
        }
    } else {
        std::fs::copy(src, dst).unwrap();
    }
}

#[tokio::test]
async fn mutated_containers_error_cleanly() {
    let targets = [
        ("b2nd/attrs.b2nd", ""),
        ("b2nd/geom-2d.b2nd", ""),
        ("b2nd/struct-nested.b2nd", ""),
        ("b2nd/special-zeros.b2nd", ""),
        ("b2nd/zfp-rate-3d.b2nd", ""),
        ("b2nd/zfp-prec-2d.b2nd", ""),
        ("b2nd/ndcell-3d-shuffle.b2nd", ""),
        ("b2nd/ndmean-3d-bitshuffle.b2nd", ""),
        ("b2nd/ndlz-4-partial.b2nd", ""),
        ("b2nd/ndlz-8.b2nd", ""),
        ("schunk/plain.b2frame", ""),
        ("b2nd/sparse.b2nd", "chunks.b2frame"),
        ("b2nd/sparse.b2nd", "00000001.chunk"),
        ("ctable/people.b2z", ""),
        ("ctable/nulls.b2d", "_meta.b2f"),
        ("ctable/nulls.b2d", "_cols/s.b2nd"),
        ("ctable/varlen.b2d", "_cols/note.b2b"),
        ("ctable/varlen.b2d", "_cols/blob.b2b"),
        ("ctable/varlen.b2d", "_cols/word_dict.b2b"),
        ("ctable/varlen.b2d", "_cols/cat.b2nd"),
        ("ctable/nested.b2d", "_cols/st.b2b"),
        ("ctable/nested.b2d", "_cols/o.b2b"),
        ("b2b/lists.b2b", ""),
        ("b2b/arrow-lists.b2b", ""),
        ("b2b/arrow-batches.b2b", ""),
        ("ctable/arrow-lists.b2d", "_cols/st.b2b"),
        ("b2b/objects.b2b", ""),
        ("b2b/objects-vl.b2f", ""),
        ("b2b/objects-nolengths.b2b", ""),
        ("bcolz/carray-S3", "meta/sizes"),
        ("bcolz/carray-S3", "meta/storage"),
        ("bcolz/carray-S3", "data/__3.blp"),
        ("bcolz/ctable", "__rootdirs__"),
        ("ctable/people-zip64.b2z", ""),
        ("stores/obs.b2e", ""),
        ("stores/small.b2e#/b/c", ""),
        ("stores/tree.b2z#/grp/table", ""),
        ("stores/tree.b2d#/grp/counts", "embed.b2e"),
    ];
    let mut cases = 0;
    let mut errs = 0;
    for (rel, target) in targets {
        let file = fixture(rel.split('#').next().unwrap());
        let len = std::fs::read(file.join(target))
            .map(|b| b.len())
            .unwrap_or_else(|_| std::fs::read(&file).unwrap().len());
        let positions: Vec<usize> = if len <= 700 {
            (0..len).collect()
        } else {
            mutations(len, 160)
        };
        for &at in &positions {
            let r = mutate_and_read(rel, target, |b| b[at] ^= 0xFF).await;
            assert!(
                r.as_ref().err().map(String::as_str) != Some("PANIC"),
                "{rel}/{target}: byte {at} flipped: panic"
            );
            errs += usize::from(r.is_err());
            cases += 1;
        }
        for cut in (0..len).step_by((len / 60).max(1)) {
            let r = mutate_and_read(rel, target, |b| b.truncate(cut)).await;
            assert!(
                r.as_ref().err().map(String::as_str) != Some("PANIC"),
                "{rel}/{target}: truncated at {cut}: panic"
            );
            let json = target.starts_with("meta/") || target == "__rootdirs__";
            assert!(
                r.is_err() || json,
                "{rel}/{target}: truncated at {cut} still opened"
            );
            cases += 1;
        }
    }
    assert!(cases > 3000 && errs > 500, "{cases} cases, {errs} errors");
}

/// The Arrow IPC streams of python-blosc2's Arrow-serialized list columns, mutated after
/// decompression (where the chunk codecs no longer stand between the bytes and Arrow's
/// reader): every byte flipped three ways, every truncation. Each case gives the block's
/// items or an error; the stream check keeps Arrow's reader from the metadata it trusts.
#[tokio::test]
async fn mutated_arrow_streams_error_cleanly() {
    use datafusion_blosc2::array::batch_array::BatchArray;
    use datafusion_blosc2::array::batch_array::Serializer;
    use datafusion_blosc2::array::ndarray::ReadStats;
    use datafusion_blosc2::arrow::datatypes::DataType;
    use datafusion_blosc2::arrow_reader::ipc_items::{schema_message_type, stream_column};
    use datafusion_blosc2::container::frame::Frame;
    let mut cases = 0;
    let mut errs = 0;
    let columns = ["ints", "big", "fl", "tx", "lt", "bl", "nest", "st"];
    let files = columns
        .iter()
        .map(|c| format!("ctable/arrow-lists.b2d/_cols/{c}.b2b"));
    let mut rng = crate::util::Rng(0x9E37_79B9_7F4A_7C15);
    for rel in std::iter::once("b2b/arrow-lists.b2b".to_string()).chain(files) {
        let frame = Frame::open(&Location::local(fixture(&rel)).unwrap())
            .await
            .unwrap();
        let items = BatchArray::open(frame).await.unwrap();
        let blocks = items
            .read_streams(0..items.len(), &mut ReadStats::default())
            .await
            .unwrap();
        // The first and the last block of the array (the last of a batch is shorter).
        for b in [&blocks[0], &blocks[blocks.len() - 1]] {
            let good = stream_column(&b.bytes, b.items).unwrap();
            assert_eq!(good.len() as u64, b.items, "{rel}");
            let mut check = |bytes: Vec<u8>, what: String| {
                let r = std::panic::catch_unwind(|| stream_column(&bytes, b.items));
                match r {
                    Err(_) => panic!("{rel}: {what}: panic"),
                    Ok(Ok(col)) => assert_eq!(col.len() as u64, b.items, "{rel}: {what}"),
                    Ok(Err(_)) => errs += 1,
                }
                cases += 1;
            };
            for at in 0..b.bytes.len() {
                for x in [0xFF, 0x01, 0x80] {
                    let mut m = b.bytes.clone();
                    m[at] ^= x;
                    check(m, format!("byte {at} ^ {x:#x}"));
                }
            }
            for cut in 0..b.bytes.len() {
                check(b.bytes[..cut].to_vec(), format!("cut at {cut}"));
            }
            // Whole 4-byte words (lengths, offsets, counts) set to small, large and
            // negative values.
            for _ in 0..1500 {
                let rng = rng.next_u64();
                let at = (rng as usize % (b.bytes.len() / 4)) * 4;
                let v: i32 = match (rng >> 32) % 4 {
                    0 => (rng >> 40) as i32 % 64,
                    1 => -((rng >> 40) as i32 % 64),
                    2 => (rng >> 33) as i32,
                    _ => i32::MAX - (rng >> 50) as i32,
                };
                let mut m = b.bytes.clone();
                m[at..at + 4].copy_from_slice(&v.to_le_bytes());
                check(m, format!("word at {at} = {v}"));
            }
        }
    }
    assert!(
        cases > 40_000 && errs > 10_000,
        "{cases} cases, {errs} errors"
    );

    // The schema message that types a bare BatchArray of Arrow batches.
    let frame = Frame::open(&Location::local(fixture("b2b/arrow-batches.b2b")).unwrap())
        .await
        .unwrap();
    let items = BatchArray::open(frame).await.unwrap();
    let Serializer::ArrowIpc {
        schema: Some(schema),
        ..
    } = items.serializer()
    else {
        panic!("an Arrow BatchArray with a schema");
    };
    let good = schema_message_type(schema).unwrap();
    assert!(matches!(good, DataType::Struct(_)), "{good}");
    let (mut cases, mut errs) = (0, 0);
    let mut check = |bytes: &[u8], what: String| {
        match std::panic::catch_unwind(|| schema_message_type(bytes)) {
            Err(_) => panic!("arrow_schema: {what}: panic"),
            Ok(r) => errs += usize::from(r.is_err()),
        }
        cases += 1;
    };
    for at in 0..schema.len() {
        for x in [0xFF, 0x01, 0x80] {
            let mut m = schema.clone();
            m[at] ^= x;
            check(&m, format!("byte {at} ^ {x:#x}"));
        }
    }
    for cut in 0..schema.len() {
        check(&schema[..cut], format!("cut at {cut}"));
    }
    assert!(cases > 500 && errs > 100, "{cases} cases, {errs} errors");
}

#[tokio::test]
async fn missing_pieces_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("sparse.b2nd");
    copy_tree(&fixture("b2nd/sparse.b2nd"), &d);
    std::fs::remove_file(d.join("00000002.chunk")).unwrap();
    let e = open_and_read(tmp.path(), "sparse.b2nd").await.unwrap_err();
    assert!(
        e.contains("00000002.chunk") && e.contains("not found") && e.contains("chunk 2"),
        "{e}"
    );

    let c = tmp.path().join("ct");
    copy_tree(&fixture("bcolz/ctable"), &c);
    std::fs::remove_file(c.join("x/data/__0.blp")).unwrap();
    let e = open_and_read(tmp.path(), "ct").await.unwrap_err();
    assert!(
        e.contains("x/data/__0.blp") && e.contains("not found"),
        "{e}"
    );

    std::fs::create_dir(tmp.path().join("empty")).unwrap();
    let e = open_and_read(tmp.path(), "empty").await.unwrap_err();
    assert!(e.contains("not found"), "{e}");
    std::fs::write(tmp.path().join("zero.b2nd"), b"").unwrap();
    let e = open_and_read(tmp.path(), "zero.b2nd").await.unwrap_err();
    assert!(e.contains("empty file"), "{e}");
    let mut junk = b"\x9e\xa8b2frame\x00".to_vec();
    junk.extend([0x42; 200]);
    std::fs::write(tmp.path().join("junk.b2nd"), junk).unwrap();
    let e = open_and_read(tmp.path(), "junk.b2nd").await.unwrap_err();
    assert!(e.contains("junk.b2nd") && e.contains("frame header"), "{e}");
}

/// A session with the table at `dir` registered as `name`.
async fn session_over(name: &str, dir: &std::path::Path) -> datafusion::prelude::SessionContext {
    use datafusion_blosc2::provider::Blosc2SessionExt;
    let ctx = datafusion::prelude::SessionContext::new();
    ctx.register_blosc2(name, dir.to_str().unwrap(), Default::default())
        .await
        .unwrap();
    ctx
}

/// The batches of `q`, or its planning or execution error as text.
async fn collect(
    ctx: datafusion::prelude::SessionContext,
    q: &str,
) -> Result<Vec<datafusion::arrow::record_batch::RecordBatch>, String> {
    match ctx.sql(q).await {
        Ok(df) => df.collect().await.map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    }
}

/// CTable columns are opened when a query reads them, and checked then against the schema:
/// a column file holding another type, or missing, is an error naming the column, while
/// queries over the other columns still work.
#[tokio::test]
async fn ctable_columns_are_checked_when_read() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("events.b2d");
    copy_tree(&fixture("ctable/events.b2d"), &d);
    // `t` is declared int64; give it `v`'s float64 frame. `tag` loses its text bytes.
    std::fs::copy(d.join("_cols/v.b2nd"), d.join("_cols/t.b2nd")).unwrap();
    std::fs::remove_file(d.join("_cols/tag.utf8.b2nd")).unwrap();
    let ctx = session_over("e", &d).await;
    let run = |q: &'static str| collect(ctx.clone(), q);
    let e = run("SELECT t FROM e").await.unwrap_err();
    assert!(
        e.contains("events.b2d")
            && e.contains("column \"t\"")
            && e.contains("declares kind \"int64\""),
        "{e}"
    );
    let e = run("SELECT tag FROM e").await.unwrap_err();
    assert!(
        e.contains("_cols/tag.utf8.b2nd") && e.contains("not found"),
        "{e}"
    );
    let b = run("SELECT count(v), count(k) FROM e").await.unwrap();
    let n = datafusion::arrow::util::pretty::pretty_format_batches(&b)
        .unwrap()
        .to_string();
    assert!(n.contains("5998"), "{n}");
}

/// BatchArray-backed columns whose files disagree with the schema: codes past the end of
/// their dictionary, bytes items in a text column. Errors name the file or column and
/// the row or batch; the other columns still read.
#[tokio::test]
async fn batch_columns_are_checked_when_read() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("varlen.b2d");
    copy_tree(&fixture("ctable/varlen.b2d"), &d);
    // `word` has 2,600 distinct values; give it `cat`'s 7. `note` (text) gets `blob`'s bins.
    std::fs::copy(d.join("_cols/cat_dict.b2b"), d.join("_cols/word_dict.b2b")).unwrap();
    std::fs::copy(d.join("_cols/blob.b2b"), d.join("_cols/note.b2b")).unwrap();
    let ctx = session_over("v", &d).await;
    let run = |q: &'static str| collect(ctx.clone(), q);
    let e = run("SELECT count(word) FROM v").await.unwrap_err();
    // Codes are given in first-seen order and every row brings a new word: row 7 (deleted,
    // but stored) is the first whose code is past the 7 values.
    assert!(
        e.contains("column \"word\"") && e.contains("row 7 has code 7") && e.contains("7 values"),
        "{e}"
    );
    let e = run("SELECT count(note) FROM v").await.unwrap_err();
    assert!(
        e.contains("_cols/note.b2b") && e.contains("batch 0") && e.contains("not a str"),
        "{e}"
    );
    let b = run("SELECT count(cat), count(blob) FROM v").await.unwrap();
    let n = datafusion::arrow::util::pretty::pretty_format_batches(&b)
        .unwrap()
        .to_string();
    assert!(n.contains("2722") && n.contains("2994"), "{n}");
}

/// Index sidecars mutated (bytes flipped, files cut): a query whose filter the index is
/// looked up for answers or fails, and never panics (FULL `r`, BUCKET `rb`, PARTIAL `rp`:
/// their values, positions, offsets and navigation records; utf8 `w`'s ranks and
/// vocabulary; OPSI `d`'s values, positions and block maxima).
#[tokio::test]
async fn mutated_index_sidecars_never_panic() {
    use datafusion::prelude::SessionContext;
    use datafusion_blosc2::provider::{Blosc2Options, Blosc2SessionExt};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("indexed.b2d");
    copy_tree(&fixture("ctable/indexed.b2d"), &dir);
    let targets = [
        ("r", "_indexes/r/full.values.b2nd"),
        ("r", "_indexes/r/full.positions.b2nd"),
        ("r", "_indexes/r/full.full_nav.l2.b2nd"),
        ("rb", "_indexes/rb/bucket.values.b2nd"),
        ("rb", "_indexes/rb/bucket.bucket_positions.b2nd"),
        ("rb", "_indexes/rb/bucket.offsets.b2nd"),
        ("rb", "_indexes/rb/bucket.bucket_nav.l2.b2nd"),
        ("rp", "_indexes/rp/partial.positions.b2nd"),
        ("rp", "_indexes/rp/partial.partial_nav.l2.b2nd"),
        ("w", "_indexes/w/full.values.utf8_vocab.b2nd"),
        ("w", "_indexes/w/full.values.b2nd"),
        ("w", "_indexes/w/full.positions.b2nd"),
        ("d", "_indexes/d/opsi.opsi_cycle0.values.b2nd"),
        ("d", "_indexes/d/opsi.opsi_cycle0.positions.b2nd"),
        ("d", "_indexes/d/opsi.opsi_nav.maxs.b2nd"),
    ];
    let mut cases = 0;
    for (col, target) in targets {
        let path = dir.join(target);
        let original = std::fs::read(&path).unwrap();
        let len = original.len();
        // About 40 bytes spread over the file (frame headers have tests of their own).
        let mut mutations: Vec<Vec<u8>> = (0..len)
            .step_by((len / 40).max(1))
            .map(|at| {
                let mut b = original.clone();
                b[at] ^= 0xFF;
                b
            })
            .collect();
        mutations.extend(
            (0..len)
                .step_by((len / 8).max(1))
                .map(|cut| original[..cut].to_vec()),
        );
        for m in mutations {
            std::fs::write(&path, &m).unwrap();
            let run = async {
                let ctx = SessionContext::new();
                ctx.register_blosc2("t", dir.to_str().unwrap(), Blosc2Options::default())
                    .await
                    .map_err(|e| e.to_string())?;
                let sql = match col {
                    "w" => "SELECT count(*) FROM t WHERE w BETWEEN 'w0100' AND 'w0110'".into(),
                    "d" => "SELECT count(*) FROM t WHERE d BETWEEN 10 AND 12".into(),
                    _ => format!("SELECT count(*) FROM t WHERE {col} BETWEEN -3000 AND 3000"),
                };
                ctx.sql(&sql)
                    .await
                    .map_err(|e| e.to_string())?
                    .collect()
                    .await
                    .map_err(|e| e.to_string())
            };
            let r = AssertUnwindSafe(run).catch_unwind().await;
            assert!(r.is_ok(), "{target}: panic");
            cases += 1;
        }
        std::fs::write(&path, &original).unwrap();
    }
    assert!(cases > 300, "{cases} cases");
}
