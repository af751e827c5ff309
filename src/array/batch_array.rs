//! python-blosc2 BatchArrays (`.b2b`, `spec/stores.md` §4): a frame whose chunks are
//! *batches* of variable-length items, each chunk a VL-block chunk whose blocks are
//! msgpack arrays of consecutive items. Here: opening one (metalayer `batcharray`, batch
//! lengths from the `_batch_array_metadata` vlmetalayer), and reading the string or
//! bytes items of a row range into Arrow-style offsets and bytes, or as msgpack values.
//!
//! ObjectArrays (metalayer `vlarray`: each chunk one msgpack item) are read the same way,
//! as batches of one item.
//!
//! CTables store `vlstring` and `vlbytes` columns this way (`nil` for a null row), and the
//! distinct values of a `dictionary` column.
//!
//! With the Arrow serializer (`serializer="arrow"`: list columns of
//! `CTable.from_arrow(..., list_serializer="arrow")`, ListArrays made so) each block is an
//! Arrow IPC stream of one column holding `items_per_block` items (the batch's last block
//! fewer). This layer hands those streams out as bytes ([`BatchArray::read_streams`]);
//! decoding them is Arrow's business (`arrow_reader::ipc_items`).

use super::ndarray::ReadStats;
use super::recent::LastKept;
use crate::container::RawChunk;
use crate::container::frame::Frame;
use crate::error::{Error, Result};
use crate::msgpack::{self, MsgValue};
use std::ops::Range;
use std::sync::{Arc, Mutex};

/// What every item of a BatchArray must be (or `nil`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemKind {
    /// msgpack `str` (UTF-8 text).
    Text,
    /// msgpack `bin`.
    Bytes,
}

/// Variable-length values of consecutive rows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VarValues {
    /// Row `i` is `data[offsets[i]..offsets[i + 1]]`; `rows + 1` entries from 0.
    pub offsets: Vec<i64>,
    /// The values' bytes, concatenated.
    pub data: Vec<u8>,
    /// Per row, false when the item is `nil`; empty when no row is null.
    pub present: Vec<bool>,
}

impl VarValues {
    /// The heap memory its buffers hold.
    pub fn heap_bytes(&self) -> usize {
        self.offsets.len() * 8 + self.data.len() + self.present.len()
    }

    fn new() -> VarValues {
        VarValues {
            offsets: vec![0],
            ..VarValues::default()
        }
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// True when there are no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Row `i`'s value; `None` for a null.
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        let present = self.present.is_empty() || self.present[i];
        let (a, b) = (self.offsets[i] as usize, self.offsets[i + 1] as usize);
        present.then(|| &self.data[a..b])
    }

    /// The values of rows `rows` (indices into these), in that order.
    pub fn select(&self, rows: impl Iterator<Item = usize>) -> VarValues {
        let mut out = VarValues::new();
        for i in rows {
            out.push(self.get(i));
        }
        out
    }

    #[inline(always)]
    fn push(&mut self, value: Option<&[u8]>) {
        self.push_item(value.map(|v| Value {
            tail: v,
            len: v.len(),
        }))
    }

    /// Appends `value` (or a null). A value of up to [`Value::SHORT`] bytes followed by
    /// enough of its batch is copied as that many bytes, then cut to its length: one
    /// fixed-size move instead of a call to copy a few bytes (most text items are short).
    #[inline(always)]
    fn push_item(&mut self, value: Option<Value>) {
        match value {
            Some(v) => {
                if v.len <= Value::SHORT && v.tail.len() >= Value::SHORT {
                    let end = self.data.len() + v.len;
                    self.data.extend_from_slice(&v.tail[..Value::SHORT]);
                    self.data.truncate(end);
                } else {
                    self.data.extend_from_slice(v.bytes());
                }
                if !self.present.is_empty() {
                    self.present.push(true);
                }
            }
            None => {
                if self.present.is_empty() {
                    self.present = vec![true; self.len()];
                }
                self.present.push(false);
            }
        }
        self.offsets.push(self.data.len() as i64);
    }
}

/// How a BatchArray's blocks are serialized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Serializer {
    /// Each block is a msgpack array of items.
    Msgpack,
    /// Each block is an Arrow IPC stream of one column, of `items_per_block` items.
    ArrowIpc {
        /// Items in every block of a batch but its last.
        items_per_block: u64,
        /// The metalayer's encapsulated IPC schema message (`arrow_schema`), if any.
        schema: Option<Vec<u8>>,
    },
}

/// One block of an Arrow-serialized BatchArray: an IPC stream, and which of its items
/// are wanted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamBlock {
    /// The block's bytes: one Arrow IPC stream.
    pub bytes: Vec<u8>,
    /// The number of items the stream must hold.
    pub items: u64,
    /// The wanted items, as indices into the stream's.
    pub want: Range<u64>,
    /// Where the block is, for errors: batch (chunk) and block index.
    pub batch: u64,
    /// Block index within the batch.
    pub block: usize,
}

/// A decoded batch: its bytes, and for an Arrow BatchArray each VL block's size.
#[derive(Debug)]
struct DecodedBatch {
    bytes: Vec<u8>,
    blocks: Vec<usize>,
}

/// The last few batches reads decoded, shared by an array's clones: a table's scan
/// units are often smaller than a batch (a CTable's units follow its fixed-width
/// columns' blocks, python-blosc2 flushes list and text columns every 2,048 rows), and
/// without these each unit decoded its whole batch again.
#[derive(Debug, Clone, Default)]
struct RecentBatches(Arc<Mutex<LastKept<Arc<DecodedBatch>, 4>>>);

impl RecentBatches {
    fn lock(&self) -> std::sync::MutexGuard<'_, LastKept<Arc<DecodedBatch>, 4>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// An opened BatchArray.
#[derive(Debug, Clone)]
pub struct BatchArray {
    frame: Frame,
    serializer: Serializer,
    recent: RecentBatches,
    /// An ObjectArray: each chunk is one msgpack item, not arrays of them.
    one_per_chunk: bool,
    /// First item of each batch, then the item count: `nchunks + 1` entries.
    starts: Vec<u64>,
}

impl BatchArray {
    /// An estimate of the heap memory it holds once opened (its frame's index and the
    /// batch starts).
    pub fn heap_bytes(&self) -> usize {
        self.frame.heap_bytes() + self.starts.len() * 8
    }

    /// Reads the BatchArray layers of `frame`: the `batcharray` metalayer (its serializer,
    /// and for Arrow IPC the items per block) and the batch lengths, which must be one per
    /// chunk (counted by decoding every msgpack batch when an old writer left them out).
    ///
    /// # Errors
    /// A frame without the metalayer, another serializer (named), an Arrow one without a
    /// positive `items_per_block` or without batch lengths, batch lengths that are not one
    /// non-negative count per chunk, and decoding errors.
    pub async fn open(frame: Frame) -> Result<BatchArray> {
        let path = frame.display().to_string();
        let bad = |what: String| Error::corrupt(&path, "BatchArray", what);
        let one_per_chunk = frame.metalayer("batcharray").is_none();
        let layer = frame
            .metalayer("batcharray")
            .or_else(|| frame.metalayer("vlarray"))
            .ok_or_else(|| bad("no \"batcharray\" or \"vlarray\" metalayer".into()))?;
        let (meta, _) = msgpack::parse(&layer.content)
            .map_err(|e| bad(format!("{:?} metalayer: {e}", layer.name)))?;
        let serializer = match meta.get("serializer").and_then(MsgValue::as_str) {
            Some("msgpack") | None => Serializer::Msgpack,
            Some("arrow") if !one_per_chunk => {
                let items_per_block = meta
                    .get("items_per_block")
                    .and_then(MsgValue::as_i64)
                    .filter(|&n| n > 0)
                    .ok_or_else(|| {
                        bad("an Arrow BatchArray without a positive items_per_block".into())
                    })? as u64;
                let schema = match meta.get("arrow_schema") {
                    Some(MsgValue::Bin(b)) => Some(b.clone()),
                    _ => None,
                };
                Serializer::ArrowIpc {
                    items_per_block,
                    schema,
                }
            }
            Some(other) => {
                return Err(Error::unsupported(
                    &path,
                    format!(
                        "BatchArray serializer {other:?} (msgpack, and arrow in BatchArrays, \
                         are read)"
                    ),
                ));
            }
        };
        let lengths: Option<Vec<u64>> = match frame.vlmeta_value("_batch_array_metadata") {
            _ if one_per_chunk => Some(vec![1; frame.nchunks() as usize]),
            Some(m) => {
                let l = m
                    .get("batch_lengths")
                    .and_then(MsgValue::as_array)
                    .and_then(|a| {
                        a.iter()
                            .map(|v| v.as_i64().and_then(|n| u64::try_from(n).ok()))
                            .collect::<Option<Vec<u64>>>()
                    })
                    .ok_or_else(|| {
                        bad("_batch_array_metadata has no list of batch_lengths".into())
                    })?;
                if l.len() as u64 != frame.nchunks() {
                    return Err(bad(format!(
                        "{} batch lengths for {} chunks",
                        l.len(),
                        frame.nchunks()
                    )));
                }
                Some(l)
            }
            None if serializer != Serializer::Msgpack => {
                return Err(bad(
                    "an Arrow BatchArray without _batch_array_metadata batch lengths".into(),
                ));
            }
            None => None,
        };
        let mut arr = BatchArray {
            frame,
            serializer,
            recent: RecentBatches::default(),
            one_per_chunk,
            starts: Vec::new(),
        };
        let lengths = match lengths {
            Some(l) => l,
            None => {
                let mut l = Vec::with_capacity(arr.frame.nchunks() as usize);
                for i in 0..arr.frame.nchunks() {
                    let raw = arr.frame.fetch_chunks(&[i]).await?;
                    let bytes = arr.frame.decode(i, &raw[0])?;
                    l.push(
                        scan_batch(&bytes, 0..0, &mut NoItems)
                            .map_err(|e| arr.batch_error(i, e))?,
                    );
                }
                l
            }
        };
        // Every item takes at least one byte of the decoded batches.
        let limit = arr.frame.header().nbytes;
        let mut at = 0u64;
        arr.starts.push(0);
        for n in lengths {
            at = at.checked_add(n).filter(|&a| a <= limit).ok_or_else(|| {
                Error::corrupt(
                    arr.display(),
                    "BatchArray",
                    format!("batch lengths add up to more items than its {limit} bytes hold"),
                )
            })?;
            arr.starts.push(at);
        }
        Ok(arr)
    }

    /// How its blocks are serialized.
    pub fn serializer(&self) -> &Serializer {
        &self.serializer
    }

    /// How errors name the array.
    pub fn display(&self) -> &str {
        self.frame.display()
    }

    /// The underlying frame.
    pub fn frame(&self) -> &Frame {
        &self.frame
    }

    /// Number of items.
    pub fn len(&self) -> u64 {
        *self.starts.last().unwrap_or(&0)
    }

    /// True when there are no items.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of items in batch `b`.
    pub fn batch_len(&self, b: u64) -> Option<u64> {
        let b = b as usize;
        Some(self.starts.get(b + 1)? - self.starts[b])
    }

    /// Number of batches (chunks).
    pub fn nbatches(&self) -> u64 {
        self.starts.len().saturating_sub(1) as u64
    }

    /// The items `rows`, each of which must be of `kind` or `nil`.
    ///
    /// # Errors
    /// Rows past the end, IO and decoding errors, batches that are not msgpack arrays of
    /// `kind` items or hold another count than their recorded length (naming the batch).
    pub async fn read(
        &self,
        rows: Range<u64>,
        kind: ItemKind,
        stats: &mut ReadStats,
    ) -> Result<VarValues> {
        let mut out = VarValues::new();
        self.each_item(
            rows,
            stats,
            &mut Values {
                out: &mut out,
                kind,
            },
        )
        .await?;
        Ok(out)
    }

    /// Which of the items `rows` are present (not `nil`) and pass `test`, and those
    /// items, as [`BatchArray::read`] gives them: the others are scanned but not copied.
    ///
    /// # Errors
    /// As [`BatchArray::read`].
    pub async fn read_where(
        &self,
        rows: Range<u64>,
        kind: ItemKind,
        stats: &mut ReadStats,
        test: &impl ItemFilter,
    ) -> Result<(Vec<bool>, VarValues)> {
        let mut sink = Passing {
            keep: Vec::with_capacity(rows.end.saturating_sub(rows.start) as usize),
            out: VarValues::new(),
            kind,
            test,
            cursor: Default::default(),
        };
        self.each_item(rows, stats, &mut sink).await?;
        Ok((sink.keep, sink.out))
    }

    /// The items `rows` as msgpack values, whatever they are.
    ///
    /// # Errors
    /// As [`BatchArray::read`]; a `str` that is not UTF-8.
    pub async fn read_values(
        &self,
        rows: Range<u64>,
        stats: &mut ReadStats,
    ) -> Result<Vec<MsgValue>> {
        let mut sink = MsgValues(Vec::with_capacity(
            (rows.end.saturating_sub(rows.start)) as usize,
        ));
        self.each_item(rows, stats, &mut sink).await?;
        Ok(sink.0)
    }

    /// Fetches the batches that hold `rows` (in one request where they are neighbours)
    /// and hands each item of `rows` to `on`, in order.
    async fn each_item(
        &self,
        rows: Range<u64>,
        stats: &mut ReadStats,
        on: &mut impl for<'a> ItemSink<'a>,
    ) -> Result<()> {
        if self.serializer != Serializer::Msgpack {
            return Err(Error::InvalidArgument(format!(
                "{}: Arrow IPC batches are read as streams, not msgpack items",
                self.display()
            )));
        }
        let batches = self.batches_of(&rows)?;
        let decoded = self.decoded(&batches, stats).await?;
        for (&b, batch) in batches.iter().zip(&decoded) {
            let bytes = &batch.bytes;
            let (lo, hi) = (self.starts[b as usize], self.starts[b as usize + 1]);
            let want = rows.start.max(lo) - lo..rows.end.min(hi) - lo;
            let n = if self.one_per_chunk {
                scan_single(bytes, want, on)
            } else {
                scan_batch(bytes, want, on)
            }
            .map_err(|e| self.batch_error(b, e))?;
            if n != hi - lo {
                return Err(self.batch_error(
                    b,
                    Error::InvalidArgument(format!(
                        "holds {n} items, its recorded length is {}",
                        hi - lo
                    )),
                ));
            }
        }
        Ok(())
    }

    /// The blocks of an Arrow-serialized BatchArray that hold `rows`, each an IPC stream
    /// with the range of its items that `rows` wants; blocks that hold none are left
    /// out. The item counts come from `items_per_block` and the batch lengths: the
    /// caller checks each stream holds that many.
    ///
    /// # Errors
    /// A msgpack BatchArray, rows past the end, IO and decoding errors, and a batch whose
    /// VL-block count does not fit its length and `items_per_block` (naming the batch).
    pub async fn read_streams(
        &self,
        rows: Range<u64>,
        stats: &mut ReadStats,
    ) -> Result<Vec<StreamBlock>> {
        let Serializer::ArrowIpc {
            items_per_block: per,
            ..
        } = self.serializer
        else {
            return Err(Error::InvalidArgument(format!(
                "{}: msgpack batches are read as items, not streams",
                self.display()
            )));
        };
        let batches = self.batches_of(&rows)?;
        let decoded = self.decoded(&batches, stats).await?;
        let mut out = Vec::new();
        for (&b, batch) in batches.iter().zip(&decoded) {
            let (bytes, sizes) = (&batch.bytes, &batch.blocks);
            let (lo, hi) = (self.starts[b as usize], self.starts[b as usize + 1]);
            let n = hi - lo;
            if sizes.len() as u64 != n.div_ceil(per) {
                return Err(self.batch_error(
                    b,
                    Error::InvalidArgument(format!(
                        "{} blocks for {n} items of {per} per block",
                        sizes.len()
                    )),
                ));
            }
            let want = rows.start.max(lo) - lo..rows.end.min(hi) - lo;
            let mut at = 0usize;
            for (k, &size) in sizes.iter().enumerate() {
                let first = k as u64 * per;
                let items = per.min(n - first);
                let span = first..first + items;
                let (a, z) = (want.start.max(span.start), want.end.min(span.end));
                // `decoded` checked that the sizes add up to the decoded bytes.
                let block = &bytes[at..at + size];
                at += size;
                if a < z {
                    out.push(StreamBlock {
                        bytes: block.to_vec(),
                        items,
                        want: a - first..z - first,
                        batch: b,
                        block: k,
                    });
                }
            }
        }
        Ok(out)
    }

    /// Batches `batches` decoded, from the recent ones or fetched (the missing ones in
    /// one request) and decoded now; for an Arrow BatchArray with their block sizes.
    async fn decoded(
        &self,
        batches: &[u64],
        stats: &mut ReadStats,
    ) -> Result<Vec<Arc<DecodedBatch>>> {
        let mut out: Vec<Option<Arc<DecodedBatch>>> = {
            let kept = self.recent.lock();
            batches.iter().map(|&b| kept.get(b)).collect()
        };
        let missing: Vec<u64> = batches
            .iter()
            .zip(&out)
            .filter(|(_, d)| d.is_none())
            .map(|(&b, _)| b)
            .collect();
        let raws = self.frame.fetch_chunks(&missing).await?;
        let mut fetched = missing.iter().zip(raws);
        for slot in out.iter_mut().filter(|d| d.is_none()) {
            let (&b, raw) = fetched.next().expect("one fetched batch per missing one");
            stats.chunks_read += 1;
            if let RawChunk::Stored(stored) = &raw {
                stats.bytes_fetched += stored.len() as u64;
            }
            let bytes = self.frame.decode(b, &raw)?;
            let blocks = match (&self.serializer, &raw) {
                (Serializer::Msgpack, _) => Vec::new(),
                (Serializer::ArrowIpc { .. }, RawChunk::Stored(stored)) => {
                    crate::chunk::Chunk::parse(stored)
                        .and_then(|c| c.vl_block_sizes())
                        .map_err(|e| Error::chunk(e, self.display(), b, 0))?
                        .ok_or_else(|| {
                            self.batch_error(
                                b,
                                Error::InvalidArgument("not a VL-block chunk".into()),
                            )
                        })?
                }
                (Serializer::ArrowIpc { .. }, RawChunk::Special { .. }) => {
                    return Err(self.batch_error(
                        b,
                        Error::InvalidArgument("a special-value chunk, not VL blocks".into()),
                    ));
                }
            };
            // The sizes come from the blocks' prefixes, the bytes from decoding them: a
            // chunk whose flags say otherwise (stored raw) must not be cut by them.
            if !blocks.is_empty() && blocks.iter().sum::<usize>() != bytes.len() {
                return Err(self.batch_error(
                    b,
                    Error::InvalidArgument(format!(
                        "VL blocks of {} bytes in all, the batch decodes to {}",
                        blocks.iter().sum::<usize>(),
                        bytes.len()
                    )),
                ));
            }
            let d = Arc::new(DecodedBatch { bytes, blocks });
            self.recent.lock().put(b, d.clone());
            *slot = Some(d);
        }
        Ok(out
            .into_iter()
            .map(|d| d.expect("every batch decoded"))
            .collect())
    }

    /// The decoded bytes of the batches recent reads keep.
    pub fn kept_bytes(&self) -> usize {
        self.recent.lock().iter().map(|(_, d)| d.bytes.len()).sum()
    }

    /// Drops the batches recent reads keep.
    pub fn release_kept(&self) {
        self.recent.lock().clear();
    }

    /// The non-empty batches overlapping `rows`, after checking `rows` is in range.
    fn batches_of(&self, rows: &Range<u64>) -> Result<Vec<u64>> {
        if rows.end > self.len() || rows.start > rows.end {
            return Err(Error::InvalidArgument(format!(
                "{}: items {rows:?} out of 0..{}",
                self.display(),
                self.len()
            )));
        }
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        // Batches overlapping `rows`: the last whose start is <= rows.start, through the
        // last that starts before rows.end; empty batches are left out.
        let first = self.starts.partition_point(|&s| s <= rows.start) - 1;
        let end = self.starts.partition_point(|&s| s < rows.end);
        Ok((first..end.min(self.nbatches() as usize))
            .filter(|&b| self.starts[b] < self.starts[b + 1])
            .map(|b| b as u64)
            .collect())
    }

    fn batch_error(&self, b: u64, e: Error) -> Error {
        Error::corrupt(
            self.display(),
            "BatchArray batch",
            format!("batch {b}: {e}"),
        )
    }
}

/// Reads the msgpack arrays of one decoded batch, handing items `want` (indices within
/// the batch) to `on`; returns the number of items.
fn scan_batch<'a>(bytes: &'a [u8], want: Range<u64>, on: &mut impl ItemSink<'a>) -> Result<u64> {
    let mut r = ItemReader { bytes, pos: 0 };
    let mut index = 0u64;
    while r.pos < bytes.len() {
        let n = r.array_len()?;
        for _ in 0..n {
            let at = r.pos;
            if want.contains(&index) {
                let item = r.item()?;
                on.take(index, at, item)?;
            } else {
                r.skip()?;
            }
            index += 1;
        }
    }
    Ok(index)
}

/// The one msgpack item of an ObjectArray chunk, handed to `on` when `want` holds it.
fn scan_single<'a>(bytes: &'a [u8], want: Range<u64>, on: &mut impl ItemSink<'a>) -> Result<u64> {
    let mut r = ItemReader { bytes, pos: 0 };
    let item = r.item()?;
    if r.pos != bytes.len() {
        return Err(Error::InvalidArgument(format!(
            "{} bytes after its item",
            bytes.len() - r.pos
        )));
    }
    if want.contains(&0) {
        on.take(0, 0, item)?;
    }
    Ok(1)
}

/// What a scan does with each item it is handed. A trait, not a closure, so that its
/// one call per item is inlined into the scan's loop: a closure passed on as `&mut F`
/// stayed a call per item, 43 % of a `text = 'x'` scan over short items.
trait ItemSink<'a> {
    /// Item `index` of its batch, which starts at byte `at`.
    fn take(&mut self, index: u64, at: usize, item: Item<'a>) -> Result<()>;
}

/// Counts items only (the scan counts them).
struct NoItems;

impl ItemSink<'_> for NoItems {
    #[inline(always)]
    fn take(&mut self, _: u64, _: usize, _: Item) -> Result<()> {
        Ok(())
    }
}

/// Text or bytes items (or `nil`) of `kind`, appended to `out`.
struct Values<'v> {
    out: &'v mut VarValues,
    kind: ItemKind,
}

impl ItemSink<'_> for Values<'_> {
    #[inline(always)]
    fn take(&mut self, index: u64, at: usize, item: Item) -> Result<()> {
        push_var(self.out, self.kind, index, at, item)
    }
}

/// A test of text or bytes items as they are scanned ([`BatchArray::read_where`]).
pub trait ItemFilter {
    /// What a scan keeps for the test from one item to the next (`()` for most).
    type Cursor: Default;

    /// Whether `item` passes. Implementations are best `#[inline(always)]`: this is
    /// called on every item in the scan's loop, where a closure stayed a call.
    fn passes(&self, item: &[u8]) -> bool;

    /// Whether the item that is the first `len` bytes of `tail` passes, where `tail`
    /// runs on to the end of the item's batch (a test may look further ahead, and keep
    /// what it saw in `cursor` for the batch's next items). By default, [`passes`].
    ///
    /// [`passes`]: ItemFilter::passes
    #[inline(always)]
    fn passes_at(&self, cursor: &mut Self::Cursor, tail: &[u8], len: usize) -> bool {
        let _ = cursor;
        self.passes(&tail[..len])
    }
}

/// Whether each item is present and passes `test` (`keep`), and the items that do.
struct Passing<'t, T: ItemFilter> {
    keep: Vec<bool>,
    out: VarValues,
    kind: ItemKind,
    test: &'t T,
    cursor: T::Cursor,
}

impl<T: ItemFilter> ItemSink<'_> for Passing<'_, T> {
    #[inline(always)]
    fn take(&mut self, index: u64, at: usize, item: Item) -> Result<()> {
        let kept = match (item, self.kind) {
            (Item::Nil, _) => false,
            (Item::Str(s), ItemKind::Text) | (Item::Bin(s), ItemKind::Bytes) => {
                let kept = self.test.passes_at(&mut self.cursor, s.tail, s.len);
                if kept {
                    self.out.push_item(Some(s));
                }
                kept
            }
            (item, kind) => return Err(not_of_kind(index, at, &item, kind)),
        };
        self.keep.push(kept);
        Ok(())
    }
}

/// Items as msgpack values, whatever they are.
struct MsgValues(Vec<MsgValue>);

impl ItemSink<'_> for MsgValues {
    fn take(&mut self, index: u64, _: usize, item: Item) -> Result<()> {
        self.0.push(to_value(index, item)?);
        Ok(())
    }
}

/// Appends a text or bytes item (or `nil`) of `kind` to `out`.
#[inline(always)]
fn push_var(out: &mut VarValues, kind: ItemKind, index: u64, at: usize, item: Item) -> Result<()> {
    match (item, kind) {
        (Item::Nil, _) => out.push_item(None),
        (Item::Str(s), ItemKind::Text) | (Item::Bin(s), ItemKind::Bytes) => out.push_item(Some(s)),
        (item, kind) => return Err(not_of_kind(index, at, &item, kind)),
    }
    Ok(())
}

#[cold]
#[inline(never)]
fn not_of_kind(index: u64, at: usize, item: &Item, kind: ItemKind) -> Error {
    Error::InvalidArgument(format!(
        "item {index} (byte {at}) is a msgpack {}, not {}",
        item.name(),
        match kind {
            ItemKind::Text => "a str",
            ItemKind::Bytes => "a bin",
        }
    ))
}

/// An item as a msgpack value.
fn to_value(index: u64, item: Item) -> Result<MsgValue> {
    Ok(match item {
        Item::Nil => MsgValue::Nil,
        Item::Str(s) => MsgValue::Str(String::from_utf8(s.bytes().to_vec()).map_err(|e| {
            Error::InvalidArgument(format!("item {index}: a str that is not UTF-8 ({e})"))
        })?),
        Item::Bin(b) => MsgValue::Bin(b.bytes().to_vec()),
        Item::Other(v, _) => *v,
    })
}

/// One item as far as a string or bytes column cares.
enum Item<'a> {
    Nil,
    Str(Value<'a>),
    Bin(Value<'a>),
    /// Any other msgpack value, parsed whole, and its marker byte.
    Other(Box<MsgValue>, u8),
}

impl Item<'_> {
    fn name(&self) -> &'static str {
        match self {
            Item::Nil => "nil",
            Item::Str(_) => "str",
            Item::Bin(_) => "bin",
            Item::Other(_, m) => match m {
                0x00..=0x7f | 0xe0..=0xff | 0xcc..=0xd3 => "int",
                0xc2 | 0xc3 => "bool",
                0xca | 0xcb => "float",
                0x80..=0x8f | 0xde | 0xdf => "map",
                0x90..=0x9f | 0xdc | 0xdd => "array",
                _ => "ext",
            },
        }
    }
}

/// A `str` or `bin` value where its batch holds it.
#[derive(Clone, Copy)]
struct Value<'a> {
    /// The batch from the value's first byte to its end.
    tail: &'a [u8],
    /// The value's length (at most `tail.len()`).
    len: usize,
}

impl<'a> Value<'a> {
    /// Values this long or shorter are copied as this many bytes where the batch has them.
    const SHORT: usize = 16;

    #[inline(always)]
    fn bytes(self) -> &'a [u8] {
        &self.tail[..self.len]
    }
}

/// A cursor over msgpack bytes that reads str, bin and nil in place and skips anything
/// else through the bounded general parser.
struct ItemReader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> ItemReader<'a> {
    #[inline(always)]
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.bytes.len() - self.pos {
            return Err(self.short(n));
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    #[cold]
    #[inline(never)]
    fn short(&self, n: usize) -> Error {
        Error::InvalidArgument(format!(
            "{n} bytes needed at byte {}, {} left",
            self.pos,
            self.bytes.len() - self.pos
        ))
    }

    #[inline(always)]
    fn be(&mut self, n: usize) -> Result<usize> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0usize, |a, &b| (a << 8) | b as usize))
    }

    /// The next `n` bytes as a [`Value`].
    #[inline(always)]
    fn value(&mut self, n: usize) -> Result<Value<'a>> {
        let tail = &self.bytes[self.pos..];
        if n > tail.len() {
            return Err(self.short(n));
        }
        self.pos += n;
        Ok(Value { tail, len: n })
    }

    /// The length of the array that starts here (each block of a batch is one).
    fn array_len(&mut self) -> Result<usize> {
        let at = self.pos;
        match self.take(1)?[0] {
            m @ 0x90..=0x9f => Ok((m & 0x0f) as usize),
            0xdc => self.be(2),
            0xdd => self.be(4),
            m => Err(Error::InvalidArgument(format!(
                "byte {at}: a block starts with msgpack marker {m:#04x}, not an array"
            ))),
        }
    }

    #[inline(always)]
    fn item(&mut self) -> Result<Item<'a>> {
        let m = self.take(1)?[0];
        Ok(match m {
            0xc0 => Item::Nil,
            0xa0..=0xbf => Item::Str(self.value((m & 0x1f) as usize)?),
            0xd9..=0xdb => {
                let n = self.be(1 << (m - 0xd9))?;
                Item::Str(self.value(n)?)
            }
            0xc4..=0xc6 => {
                let n = self.be(1 << (m - 0xc4))?;
                Item::Bin(self.value(n)?)
            }
            _ => self.other(m)?,
        })
    }

    /// Moves past the item that starts here without building it.
    #[inline(always)]
    fn skip(&mut self) -> Result<()> {
        let m = *self.bytes.get(self.pos).ok_or_else(|| self.short(1))?;
        match m {
            0xc0 => self.pos += 1,
            0xa0..=0xbf => {
                self.pos += 1;
                self.take((m & 0x1f) as usize)?;
            }
            _ => {
                let used = msgpack::skip(&self.bytes[self.pos..])
                    .map_err(|e| Error::InvalidArgument(format!("byte {}: {e}", self.pos)))?;
                self.pos += used;
            }
        }
        Ok(())
    }

    /// Any other value, parsed whole (rare in text and bytes columns).
    #[inline(never)]
    fn other(&mut self, m: u8) -> Result<Item<'a>> {
        self.pos -= 1;
        let (v, used) = msgpack::parse(&self.bytes[self.pos..])
            .map_err(|e| Error::InvalidArgument(format!("byte {}: {e}", self.pos)))?;
        self.pos += used;
        Ok(Item::Other(Box::new(v), m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(bytes: &[u8], kind: ItemKind, want: Range<u64>) -> Result<(u64, VarValues)> {
        let mut v = VarValues::new();
        let n = scan_batch(bytes, want, &mut Values { out: &mut v, kind })?;
        Ok((n, v))
    }

    /// Two blocks, `["a", nil]` and `["bc", <str8 of 40 bytes>, <str16 of 300>]`.
    fn batch() -> Vec<u8> {
        let mut b = vec![0x92, 0xa1, b'a', 0xc0, 0x93, 0xa2, b'b', b'c', 0xd9, 40];
        b.extend([b'x'; 40]);
        b.extend([0xda, 0x01, 0x2c]);
        b.extend([b'y'; 300]);
        b
    }

    /// Short values are copied as 16 bytes and cut, except near the batch's end: every
    /// length from 0 to 17, each followed by the rest of the batch or ending it.
    #[test]
    fn short_values_anywhere_in_their_batch() {
        let values: Vec<Vec<u8>> = (0u8..18)
            .map(|n| (0..n).map(|i| b'a' + i).collect())
            .collect();
        for last in 0..values.len() {
            let mut order: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
            order.swap(last, values.len() - 1); // `values[last]` ends the batch
            let mut b = vec![0xdc, 0, order.len() as u8];
            for v in &order {
                b.push(0xa0 | v.len() as u8);
                b.extend_from_slice(v);
            }
            let (n, got) = scan(&b, ItemKind::Text, 0..order.len() as u64).unwrap();
            assert_eq!(n as usize, order.len());
            for (i, v) in order.iter().enumerate() {
                let (s, e) = (got.offsets[i] as usize, got.offsets[i + 1] as usize);
                assert_eq!(&got.data[s..e], *v, "value {i} with {last} last");
            }
            assert_eq!(got.data.len(), got.offsets[order.len()] as usize);
        }
    }

    #[test]
    fn items_of_a_range_across_blocks() {
        let (n, v) = scan(&batch(), ItemKind::Text, 1..4).unwrap();
        assert_eq!(n, 5);
        assert_eq!(v.offsets, [0, 0, 2, 42]);
        assert_eq!(&v.data[..2], b"bc");
        assert!(v.data[2..].iter().all(|&c| c == b'x'));
        assert_eq!(v.present, [false, true, true]);
        let (_, all) = scan(&batch(), ItemKind::Text, 0..5).unwrap();
        assert_eq!(all.len(), 5);
        assert_eq!(all.offsets[5], 1 + 2 + 40 + 300);
        let (_, none_null) = scan(&batch(), ItemKind::Text, 2..5).unwrap();
        assert!(none_null.present.is_empty());
    }

    #[test]
    fn bytes_items_and_long_forms() {
        // array16 of two: bin8 [1, 2], str32 "z"; a bin item in a text column is refused.
        let b = [
            0xdc, 0, 2, 0xc4, 2, 1, 2, 0xdb, 0, 0, 0, 1, b'z', //
        ];
        let (n, v) = scan(&b, ItemKind::Bytes, 0..1).unwrap();
        assert_eq!((n, v.data), (2, vec![1, 2]));
        let e = scan(&b, ItemKind::Bytes, 0..2).unwrap_err().to_string();
        assert!(
            e.contains("item 1") && e.contains("msgpack str, not a bin"),
            "{e}"
        );
        let e = scan(&b, ItemKind::Text, 0..1).unwrap_err().to_string();
        assert!(e.contains("item 0") && e.contains("msgpack bin"), "{e}");
        // Items outside the range are skipped whatever they are.
        let ints = [0x93, 0x01, 0xcd, 0x01, 0x00, 0xa1, b'q'];
        let (n, v) = scan(&ints, ItemKind::Text, 2..3).unwrap();
        assert_eq!((n, v.data), (3, b"q".to_vec()));
        let e = scan(&ints, ItemKind::Text, 0..3).unwrap_err().to_string();
        assert!(e.contains("msgpack int"), "{e}");
    }

    #[test]
    fn damaged_batches_are_errors() {
        let b = batch();
        for cut in 1..b.len() {
            // A cut at a block boundary leaves fewer items (the caller checks the count).
            match scan(&b[..cut], ItemKind::Text, 0..5) {
                Ok((n, _)) => assert!(n < 5 && cut == 4, "cut {cut}: {n} items"),
                Err(e) => assert!(e.to_string().contains("needed"), "cut {cut}: {e}"),
            }
        }
        let e = scan(&[0xa1, b'a'], ItemKind::Text, 0..1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not an array"), "{e}");
        // A declared count far past the bytes ends at the bytes, with no allocation.
        let e = scan(&[0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0], ItemKind::Text, 0..1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("1 bytes needed"), "{e}");
    }
}
