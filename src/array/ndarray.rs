//! `NdArray`: an N-d array of one dtype over a chunk container — a b2nd frame, a plain
//! super-chunk (1-D items of `typesize` bytes) or a bcolz carray (rows of `chunklen`).
//!
//! Reading a coordinate box fetches only the chunks it intersects and, when blocks are
//! addressable (b2nd), decompresses only the blocks it touches.

use super::dtype::DType;
use super::geometry::B2ndGeometry;
use super::recent::RecentChunks;
use crate::chunk::{Chunk, DecodeLimits};
use crate::container::RawChunk;
use crate::container::bcolz::BcolzCarray;
use crate::container::frame::{Frame, decode_raw};
use crate::error::{Error, Result};
use crate::io::Location;
use crate::msgpack::{self, MsgValue};
use bytes::Bytes;
use std::ops::Range;

/// Smallest decoded chunk worth splitting over threads (thread start-up costs ~20 µs);
/// scans use block threads only for chunks at least this big.
pub const PARALLEL_MIN_BYTES: usize = 256 * 1024;

/// What kind of container the array comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArrayKind {
    /// A frame with a `b2nd` (or `caterva`) metalayer.
    B2nd,
    /// A frame without one: 1-D items of `typesize` bytes.
    SChunk,
    /// A bcolz carray directory.
    Bcolz,
}

/// Where the chunks come from.
#[derive(Debug, Clone)]
pub enum ChunkSource {
    /// A contiguous or sparse frame.
    Frame(Frame),
    /// A bcolz carray.
    Bcolz(BcolzCarray),
}

/// Counters a reader fills in (for metrics).
#[derive(Debug, Default, Clone, Copy)]
pub struct ReadStats {
    /// Chunks fetched and decoded.
    pub chunks_read: u64,
    /// Of those, chunks that were special values (no decompression).
    pub chunks_special: u64,
    /// Blocks decompressed.
    pub blocks_decoded: u64,
    /// Blocks skipped inside read chunks.
    pub blocks_skipped: u64,
    /// Compressed bytes fetched.
    pub bytes_fetched: u64,
}

/// An N-d array of one dtype.
#[derive(Debug, Clone)]
pub struct NdArray {
    /// Element type.
    pub dtype: DType,
    /// Chunk/block geometry.
    pub geometry: B2ndGeometry,
    /// Source kind.
    pub kind: ArrayKind,
    /// True when a geometry block is exactly one Blosc block (b2nd): partial chunk decode.
    pub block_addressable: bool,
    /// The chunk container.
    pub source: ChunkSource,
    /// The dtype string found in the file (before any override).
    pub stored_dtype: Option<String>,
    recent: RecentChunks,
    partial_fetch_min: u64,
}

/// Stored chunk size from which a read that touches at most a quarter of a chunk's blocks
/// fetches only those blocks ([`Frame::fetch_chunk_blocks`]); see
/// [`NdArray::set_partial_fetch_min`].
pub const PARTIAL_FETCH_MIN: u64 = 64 * 1024;

/// Parsed `b2nd` metalayer (`spec/b2nd.md` §1).
#[derive(Debug, Clone, PartialEq)]
pub struct B2ndMeta {
    /// Shape.
    pub shape: Vec<u64>,
    /// Chunk shape.
    pub chunkshape: Vec<u64>,
    /// Block shape.
    pub blockshape: Vec<u64>,
    /// NumPy dtype string (None for `caterva` metalayers).
    pub dtype: Option<String>,
}

/// Parses a `b2nd` or `caterva` metalayer.
///
/// # Errors
/// A message naming the item that is wrong.
pub fn parse_b2nd_meta(content: &[u8]) -> std::result::Result<B2ndMeta, String> {
    let (v, _) = msgpack::parse(content)?;
    let items = v.as_array().ok_or("not an array")?;
    if items.len() < 6 {
        return Err(format!("{} items, expected at least 6", items.len()));
    }
    let ndim = items[1]
        .as_i64()
        .filter(|n| (0..=16).contains(n))
        .ok_or("ndim not in 0..=16")? as usize;
    let dims = |k: usize, what: &str| -> std::result::Result<Vec<u64>, String> {
        let a = items[k]
            .as_array()
            .ok_or(format!("{what} is not an array"))?;
        if a.len() != ndim {
            return Err(format!("{what} has {} items for ndim {ndim}", a.len()));
        }
        a.iter()
            .map(|x| {
                x.as_i64()
                    .filter(|&n| n >= 0)
                    .map(|n| n as u64)
                    .ok_or(format!("{what} item {x:?} is not a non-negative int"))
            })
            .collect()
    };
    let dtype = match items.get(6) {
        Some(MsgValue::Str(s)) => Some(s.clone()),
        _ => None,
    };
    if items.len() >= 7 && items[5].as_i64() != Some(0) {
        return Err(format!(
            "dtype format {:?} (only 0, NumPy strings, exists)",
            items[5]
        ));
    }
    Ok(B2ndMeta {
        shape: dims(2, "shape")?,
        chunkshape: dims(3, "chunkshape")?,
        blockshape: dims(4, "blockshape")?,
        dtype,
    })
}

impl NdArray {
    /// Opens a frame (file or sparse directory) as an array: b2nd when it has the
    /// metalayer, a 1-D super-chunk otherwise. `dtype_override` replaces the stored dtype.
    ///
    /// # Errors
    /// Container errors; a dtype whose size disagrees with the frame's typesize.
    pub async fn open_frame(loc: &Location, dtype_override: Option<DType>) -> Result<NdArray> {
        let frame = Frame::open(loc).await?;
        Self::from_frame(frame, dtype_override)
    }

    /// Wraps an opened frame.
    ///
    /// # Errors
    /// As [`NdArray::open_frame`].
    pub fn from_frame(frame: Frame, dtype_override: Option<DType>) -> Result<NdArray> {
        let path = frame.display().to_string();
        if let Some(what) = super::recipe::recipe(&frame) {
            return Err(Error::unsupported(&path, what));
        }
        let h = frame.header().clone();
        let meta = frame
            .metalayer("b2nd")
            .or_else(|| frame.metalayer("caterva"));
        let typesize = h.typesize as usize;
        if let Some(m) = meta {
            let meta = parse_b2nd_meta(&m.content)
                .map_err(|e| Error::corrupt(&path, "b2nd metalayer", e))?;
            let stored = meta.dtype.clone();
            let dtype = match (&dtype_override, &stored) {
                (Some(d), _) => d.clone(),
                (None, Some(s)) => DType::parse(s)
                    .map_err(|e| Error::unsupported(&path, format!("dtype {s:?}: {e}")))?,
                (None, None) => DType::Bytes(typesize),
            };
            if dtype.itemsize() != typesize {
                return Err(Error::corrupt(
                    &path,
                    "b2nd metalayer",
                    format!(
                        "dtype {} is {} bytes per element but the frame's typesize is {typesize}; \
                     pass an element type override (e.g. '<f4') to read the values",
                        stored.as_deref().unwrap_or("?"),
                        dtype.itemsize()
                    ),
                ));
            }
            let geometry = B2ndGeometry::try_new(meta.shape, meta.chunkshape, meta.blockshape)
                .map_err(|e| Error::corrupt(&path, "b2nd metalayer", e))?;
            let chunk_bytes = geometry.chunk_items() * typesize as u64;
            if frame.nchunks() != geometry.nchunks()
                || (frame.nchunks() > 0 && h.chunksize as u64 != chunk_bytes)
            {
                return Err(Error::corrupt(
                    &path,
                    "b2nd metalayer",
                    format!(
                        "geometry implies {} chunks of {chunk_bytes} bytes, the frame has {} of {}",
                        geometry.nchunks(),
                        frame.nchunks(),
                        h.chunksize
                    ),
                ));
            }
            let block_addressable = h.blocksize as u64 == geometry.block_items() * typesize as u64;
            return Ok(NdArray {
                dtype,
                geometry,
                kind: ArrayKind::B2nd,
                block_addressable,
                source: ChunkSource::Frame(frame),
                stored_dtype: stored,
                recent: RecentChunks::default(),
                partial_fetch_min: PARTIAL_FETCH_MIN,
            });
        }
        // Plain super-chunk: 1-D items of typesize bytes.
        let dtype = dtype_override.unwrap_or(DType::Void(typesize));
        if dtype.itemsize() != typesize {
            return Err(Error::InvalidArgument(format!(
                "{path}: element type of {} bytes for a typesize of {typesize}",
                dtype.itemsize()
            )));
        }
        if h.nbytes > 0 && h.chunksize == 0 {
            return Err(Error::unsupported(
                &path,
                "variable-size chunks as a table (decode them with `b2sql decode`)",
            ));
        }
        if !h.nbytes.is_multiple_of(typesize as u64)
            || !(h.chunksize as usize).is_multiple_of(typesize)
        {
            return Err(Error::corrupt(
                &path,
                "frame header",
                format!(
                    "nbytes {} / chunksize {} not multiples of typesize {typesize}",
                    h.nbytes, h.chunksize
                ),
            ));
        }
        let n = h.nbytes / typesize as u64;
        let per_chunk = (h.chunksize as u64 / typesize as u64).max(1);
        let bs = h.blocksize as u64;
        let block_addressable =
            bs > 0 && bs.is_multiple_of(typesize as u64) && (h.chunksize as u64).is_multiple_of(bs);
        let block = if block_addressable {
            bs / typesize as u64
        } else {
            per_chunk
        };
        let geometry = B2ndGeometry::try_new(vec![n], vec![per_chunk], vec![block.min(per_chunk)])
            .map_err(|e| Error::corrupt(&path, "frame header", e))?;
        Ok(NdArray {
            dtype,
            geometry,
            kind: ArrayKind::SChunk,
            block_addressable,
            source: ChunkSource::Frame(frame),
            stored_dtype: None,
            recent: RecentChunks::default(),
            partial_fetch_min: PARTIAL_FETCH_MIN,
        })
    }

    /// Opens a bcolz carray directory.
    ///
    /// # Errors
    /// Container errors and unsupported dtypes (object).
    pub async fn open_bcolz(dir: &Location, dtype_override: Option<DType>) -> Result<NdArray> {
        let c = BcolzCarray::open(dir).await?;
        Self::from_bcolz(c, dtype_override)
    }

    /// Wraps an opened bcolz carray.
    ///
    /// # Errors
    /// As [`NdArray::open_bcolz`].
    pub fn from_bcolz(c: BcolzCarray, dtype_override: Option<DType>) -> Result<NdArray> {
        let path = c.display().to_string();
        let (dtype, sub) = match dtype_override {
            Some(d) => (d, Vec::new()),
            None => DType::parse_with_shape(&c.dtype)
                .map_err(|e| Error::unsupported(&path, format!("dtype {:?}: {e}", c.dtype)))?,
        };
        let mut shape = c.shape.clone();
        shape.extend(sub.iter().map(|&s| s as u64));
        let mut chunkshape = shape.clone();
        chunkshape[0] = c.chunklen;
        let geometry = B2ndGeometry::try_new(shape, chunkshape.clone(), chunkshape)
            .map_err(|e| Error::corrupt(&path, "meta/sizes", e))?;
        Ok(NdArray {
            dtype,
            geometry,
            kind: ArrayKind::Bcolz,
            block_addressable: false,
            stored_dtype: Some(c.dtype.clone()),
            recent: RecentChunks::default(),
            partial_fetch_min: PARTIAL_FETCH_MIN,
            source: ChunkSource::Bcolz(c),
        })
    }

    /// This array without the chunks its reads keep (clones share those): a copy for
    /// another scan that starts with none, so that what a long-lived copy holds is
    /// only what [`NdArray::heap_bytes`] counts.
    pub fn detached(&self) -> NdArray {
        NdArray {
            recent: RecentChunks::default(),
            ..self.clone()
        }
    }

    /// The compressed bytes of the chunks recent reads keep (for scans of chunks in
    /// parts; at most a few chunks).
    pub fn kept_chunk_bytes(&self) -> usize {
        self.recent.kept_bytes()
    }

    /// Drops the chunks recent reads keep (shared with this array's clones), as when a
    /// scan of it is over.
    pub fn release_kept_chunks(&self) {
        self.recent.release();
    }

    /// An estimate of the heap memory this array holds once opened (its container's
    /// index and layers; not the chunks recent reads keep).
    pub fn heap_bytes(&self) -> usize {
        let source = match &self.source {
            ChunkSource::Frame(f) => f.heap_bytes(),
            ChunkSource::Bcolz(c) => c.heap_bytes(),
        };
        let geometry = self.geometry.shape.len() * 3 * 8;
        source + geometry + self.stored_dtype.as_ref().map_or(0, String::len)
    }

    /// How errors name the array.
    pub fn display(&self) -> &str {
        match &self.source {
            ChunkSource::Frame(f) => f.display(),
            ChunkSource::Bcolz(c) => c.display(),
        }
    }

    /// Element size in bytes.
    pub fn itemsize(&self) -> usize {
        self.dtype.itemsize()
    }

    /// True when a whole chunk holds at least [`PARALLEL_MIN_BYTES`]: worth decoding its
    /// blocks on several threads.
    pub fn chunks_worth_threads(&self) -> bool {
        self.geometry.chunk_items() * self.itemsize() as u64 >= PARALLEL_MIN_BYTES as u64
    }

    /// User attributes as JSON.
    pub fn attributes_json(&self) -> serde_json::Value {
        match &self.source {
            ChunkSource::Frame(f) => f.attributes_json(),
            ChunkSource::Bcolz(c) => c.attrs.clone(),
        }
    }

    /// True when chunk `i` is an offset-encoded special (no bytes stored), with its kind.
    pub fn special_chunk(&self, i: u64) -> Option<crate::chunk::SpecialValue> {
        match &self.source {
            ChunkSource::Frame(f) => f.special_of(i),
            ChunkSource::Bcolz(_) => None,
        }
    }

    /// Estimated cost of reading chunk `i`: its stored bytes when the container knows them
    /// without a request, else its decoded bytes.
    pub fn chunk_cost(&self, i: u64) -> u64 {
        let stored = match &self.source {
            ChunkSource::Frame(f) => f.stored_len(i),
            ChunkSource::Bcolz(_) => None,
        };
        stored.unwrap_or_else(|| self.expected_chunk_bytes(i))
    }

    /// Fetches raw chunks.
    ///
    /// # Errors
    /// Container errors.
    pub async fn fetch(&self, chunks: &[u64]) -> Result<Vec<RawChunk>> {
        match &self.source {
            ChunkSource::Frame(f) => f.fetch_chunks(chunks).await,
            ChunkSource::Bcolz(c) => c.fetch_chunks(chunks).await,
        }
    }

    /// Sets the stored chunk size from which a read of box `bx` that touches at most a
    /// quarter of a chunk's blocks fetches only those blocks, as compact chunks (default
    /// [`PARTIAL_FETCH_MIN`]; 0 always, `u64::MAX` never). Only contiguous frames on a
    /// store qualify, and only on a chunk's first such read: a second read of it soon
    /// after fetches it whole, as does a read of a chunk next to one recently fetched
    /// whole (a scan going through the array).
    pub fn set_partial_fetch_min(&mut self, bytes: u64) {
        self.partial_fetch_min = bytes;
    }

    /// Fetches, in parts, the chunks of `missing` that a read of `bx` touches in at most
    /// a quarter of their blocks (see [`NdArray::set_partial_fetch_min`]); with `busy`
    /// (another read is fetching them whole), however many blocks it touches.
    async fn fetch_parts(
        &self,
        missing: &[u64],
        bx: &[Range<u64>],
        busy: bool,
    ) -> Result<Vec<(u64, Bytes)>> {
        let ChunkSource::Frame(f) = &self.source else {
            return Ok(Vec::new());
        };
        let g = &self.geometry;
        let nblocks: u64 = (0..g.ndim()).map(|d| g.nblocks_dim(d)).product();
        let mut parts = Vec::new();
        if !self.block_addressable || g.ndim() == 0 || nblocks < 4 {
            return Ok(parts);
        }
        for &i in missing {
            if f.stored_len(i).is_none_or(|n| n < self.partial_fetch_min) {
                continue;
            }
            let mut blocks: Vec<usize> = g.runs(i, bx).iter().map(|r| r.block as usize).collect();
            blocks.sort_unstable();
            blocks.dedup();
            if !busy
                && (blocks.len() as u64 * 4 > nblocks || !self.recent.first_partial(i, &blocks))
            {
                continue;
            }
            if let Some(b) = f.fetch_chunk_blocks(i, &blocks, nblocks as usize).await? {
                parts.push((i, b));
            }
        }
        Ok(parts)
    }

    /// Like [`NdArray::fetch`], but serves chunks fetched by a recent read from memory,
    /// and fetches only the blocks a read of `bx` needs when that is a small part of a big
    /// chunk; counts the bytes actually fetched.
    async fn fetch_recent(
        &self,
        chunks: &[u64],
        bx: &[Range<u64>],
        stats: &mut ReadStats,
    ) -> Result<Vec<RawChunk>> {
        let mut out: Vec<Option<RawChunk>> = chunks
            .iter()
            .map(|&i| self.recent.get(i).map(RawChunk::Stored))
            .collect();
        // The chunks not served yet.
        let unserved = |out: &[Option<RawChunk>]| -> Vec<u64> {
            chunks
                .iter()
                .zip(out)
                .filter(|(_, o)| o.is_none())
                .map(|(&i, _)| i)
                .collect()
        };
        let pending = unserved(&out);
        if pending.is_empty() {
            return Ok(out.into_iter().flatten().collect());
        }
        if self.partial_fetch_min < u64::MAX {
            // A chunk another read is fetching whole now is fetched in parts whatever
            // share of it this read needs: a second whole fetch costs more.
            let busy = self.recent.being_fetched(&pending);
            let idle: Vec<u64> = pending
                .iter()
                .copied()
                .filter(|i| !busy.contains(i))
                .collect();
            let mut parts = self.fetch_parts(&idle, bx, false).await?;
            parts.extend(self.fetch_parts(&busy, bx, true).await?);
            for (i, b) in parts {
                stats.bytes_fetched += b.len() as u64;
                for (k, slot) in chunks.iter().zip(out.iter_mut()) {
                    if *k == i && slot.is_none() {
                        *slot = Some(RawChunk::Stored(b.clone()));
                    }
                }
            }
        }
        let whole = unserved(&out);
        if whole.is_empty() {
            return Ok(out.into_iter().flatten().collect());
        }
        let claim = self.recent.claim(&whole);
        let mut fetched = self.fetch(&whole).await?.into_iter();
        for (i, slot) in chunks.iter().zip(out.iter_mut()) {
            if slot.is_none() {
                let raw = fetched
                    .next()
                    .ok_or_else(|| Error::InvalidArgument(format!("chunk {i} was not fetched")))?;
                stats.bytes_fetched += raw.stored_len() as u64;
                if let RawChunk::Stored(b) = &raw {
                    self.recent.put(*i, b);
                }
                *slot = Some(raw);
            }
        }
        drop(claim);
        Ok(out.into_iter().flatten().collect())
    }

    /// Expected decoded size of chunk `i` in bytes.
    fn expected_chunk_bytes(&self, i: u64) -> u64 {
        let g = &self.geometry;
        match self.kind {
            ArrayKind::B2nd => g.chunk_items() * self.itemsize() as u64,
            _ => {
                let rows = (g.shape[0] - i * g.chunkshape[0]).min(g.chunkshape[0]);
                rows * g.shape[1..].iter().product::<u64>() * self.itemsize() as u64
            }
        }
    }

    /// Parses stored chunk `i` and checks its decoded size against the geometry.
    fn parse_chunk<'a>(&self, i: u64, bytes: &'a [u8]) -> Result<Chunk<'a>> {
        let path = self.display();
        let chunk = Chunk::parse(bytes)
            .and_then(|c| match self.kind {
                // ZFP streams and the cell filters need the array's block shape.
                ArrayKind::B2nd => c.with_block_shape(&self.geometry.blockshape),
                _ => Ok(c),
            })
            .map_err(|e| Error::chunk(e, path, i, 0))?;
        let expected = self.expected_chunk_bytes(i);
        if chunk.nbytes() as u64 != expected {
            return Err(Error::corrupt(
                path,
                "chunk",
                format!(
                    "chunk {i} holds {} bytes, the geometry needs {expected}",
                    chunk.nbytes()
                ),
            ));
        }
        Ok(chunk)
    }

    /// Decodes chunk `i` for a read of `bx` into `buf`: only the blocks the box touches
    /// when blocks are addressable. Returns `base`: on return `buf` holds the chunk's
    /// decoded bytes from byte offset `base` on, as far as the last touched block; the
    /// whole chunk (`base` 0) when every block is needed. A whole chunk is decoded on up
    /// to `threads` threads. `buf` is scratch the caller may reuse across chunks: bytes of
    /// untouched blocks in between are left as they were, and nothing reads them.
    ///
    /// # Errors
    /// Decoding errors, or a decoded size that disagrees with the geometry.
    pub fn decode_for_box(
        &self,
        i: u64,
        raw: &RawChunk,
        bx: &[Range<u64>],
        stats: &mut ReadStats,
        threads: usize,
        buf: &mut Vec<u8>,
    ) -> Result<usize> {
        let path = self.display();
        stats.chunks_read += 1;
        let RawChunk::Stored(bytes) = raw else {
            stats.chunks_special += 1;
            // Zeros or NaN throughout: the span of the touched blocks only.
            if let RawChunk::Special { nbytes, .. } = raw
                && let Some((base, end)) = self.special_span(i, bx, *nbytes)
            {
                buf.resize(end - base, 0);
                if raw.fill_unstored(base, buf).is_some() {
                    return Ok(base);
                }
            }
            *buf = decode_raw(raw, path, i, &DecodeLimits::default())?;
            return Ok(0);
        };
        let chunk = self.parse_chunk(i, bytes)?;
        let nblocks = chunk.nblocks();
        if chunk.header().special() != crate::chunk::SpecialValue::None {
            return self.fill_special_for_box(&chunk, i, bx, stats, buf);
        }
        let mut touched: Vec<u64> = if self.block_addressable && nblocks > 1 {
            self.geometry.runs(i, bx).iter().map(|r| r.block).collect()
        } else {
            Vec::new()
        };
        touched.sort_unstable();
        touched.dedup();
        if touched.is_empty()
            || touched.len() == nblocks
            || touched.iter().any(|&b| b as usize >= nblocks)
        {
            // `resize` zero-fills only bytes past the buffer's current length; the
            // decoder overwrites them all.
            buf.resize(chunk.nbytes(), 0);
            chunk
                .decode_into_parallel(buf, threads)
                .map_err(|e| Error::chunk(e, path, i, 0))?;
            stats.blocks_decoded += nblocks as u64;
            return Ok(0);
        }
        // Only the span of the touched blocks is needed (a thin box through a big chunk
        // must not touch the whole chunk per read).
        let first = touched[0] as usize;
        let last = touched[touched.len() - 1] as usize;
        let whole = chunk
            .blocks_byte_range(first..last + 1)
            .map_err(|e| Error::chunk(e, path, i, 0))?;
        let base = whole.start;
        buf.resize(whole.len(), 0);
        // Contiguous runs of touched blocks.
        let mut k = 0;
        while k < touched.len() {
            let start = touched[k] as usize;
            let mut end = start + 1;
            while k + 1 < touched.len() && touched[k + 1] as usize == end {
                k += 1;
                end += 1;
            }
            k += 1;
            let span = chunk
                .blocks_byte_range(start..end)
                .map_err(|e| Error::chunk(e, path, i, 0))?;
            chunk
                .decode_blocks_into(start..end, &mut buf[span.start - base..span.end - base])
                .map_err(|e| Error::chunk(e, path, i, 0))?;
        }
        stats.blocks_decoded += touched.len() as u64;
        stats.blocks_skipped += (nblocks - touched.len()) as u64;
        Ok(base)
    }

    /// [`NdArray::decode_for_box`] for a special chunk (one value throughout, its header
    /// says): fills `buf` with the span of the blocks `bx` touches (by the array's block
    /// geometry: such a chunk's header may not give its blocks), not the whole chunk per
    /// read; the whole chunk when blocks are not addressable.
    fn fill_special_for_box(
        &self,
        chunk: &Chunk<'_>,
        i: u64,
        bx: &[Range<u64>],
        stats: &mut ReadStats,
        buf: &mut Vec<u8>,
    ) -> Result<usize> {
        stats.chunks_special += 1;
        if let Some((base, end)) = self.special_span(i, bx, chunk.nbytes()) {
            buf.resize(end - base, 0);
            if chunk.fill_special_range(base, buf).is_ok() {
                return Ok(base);
            }
        }
        buf.resize(chunk.nbytes(), 0);
        chunk
            .decode_into(buf)
            .map_err(|e| Error::chunk(e, self.display(), i, 0))?;
        Ok(0)
    }

    /// The bytes of chunk `i` (of `nbytes`) that the blocks `bx` touches span, by the
    /// array's block geometry; `None` when blocks are not addressable or none is touched.
    fn special_span(&self, i: u64, bx: &[Range<u64>], nbytes: usize) -> Option<(usize, usize)> {
        if !self.block_addressable {
            return None;
        }
        let block_bytes = self.geometry.block_items() * self.itemsize() as u64;
        let (first, last) = self.geometry.runs(i, bx).iter().map(|r| r.block).fold(
            None,
            |acc: Option<(u64, u64)>, b| {
                Some(acc.map_or((b, b), |(lo, hi)| (lo.min(b), hi.max(b))))
            },
        )?;
        let base = usize::try_from(first.saturating_mul(block_bytes)).ok()?;
        let end = usize::try_from((last + 1).saturating_mul(block_bytes))
            .ok()?
            .min(nbytes);
        (base < end).then_some((base, end))
    }

    /// Copies the elements of `bx` that chunk `i` holds out of its decoded bytes (`buf`
    /// from byte `base` on, as [`NdArray::decode_for_box`] leaves them) to their places in
    /// `out`, the C-ordered buffer of the whole box.
    ///
    /// # Errors
    /// A chunk buffer that does not hold the runs the geometry says.
    fn scatter_chunk(
        &self,
        bx: &[Range<u64>],
        i: u64,
        base: usize,
        buf: &[u8],
        out: &mut [u8],
    ) -> Result<()> {
        let isz = self.itemsize() as u64;
        for r in self.geometry.runs(i, bx) {
            let s = ((r.src * isz) as usize).wrapping_sub(base);
            let d = (r.dst * isz) as usize;
            let l = (r.len * isz) as usize;
            let src = buf.get(s..s.saturating_add(l)).ok_or_else(|| {
                Error::corrupt(
                    self.display(),
                    "chunk",
                    format!(
                        "chunk {i}: element run {}..{} past its {} bytes",
                        s,
                        s.saturating_add(l),
                        buf.len()
                    ),
                )
            })?;
            out[d..d + l].copy_from_slice(src);
        }
        Ok(())
    }

    /// Reads the C-ordered bytes of the elements in `bx`.
    ///
    /// # Errors
    /// IO, container and decoding errors.
    pub async fn read_box(&self, bx: &[Range<u64>], stats: &mut ReadStats) -> Result<Vec<u8>> {
        self.read_box_threads(bx, stats, 1).await
    }

    /// [`NdArray::read_box`], decoding whole chunks on up to `threads` threads (for scans
    /// that have fewer chunks than cores).
    ///
    /// # Errors
    /// As [`NdArray::read_box`].
    pub async fn read_box_threads(
        &self,
        bx: &[Range<u64>],
        stats: &mut ReadStats,
        threads: usize,
    ) -> Result<Vec<u8>> {
        let n = self.box_items(bx)?;
        let mut out = vec![0u8; (n * self.itemsize() as u64) as usize];
        self.read_box_into(bx, &mut out, stats, threads).await?;
        Ok(out)
    }

    /// Elements in `bx`, once it is checked to lie inside the array.
    ///
    /// # Errors
    /// A box of the wrong rank, inverted, or reaching past the array.
    pub fn box_items(&self, bx: &[Range<u64>]) -> Result<u64> {
        if bx.len() != self.geometry.ndim() {
            return Err(Error::InvalidArgument(format!(
                "box of rank {} for an array of rank {}",
                bx.len(),
                self.geometry.ndim()
            )));
        }
        for (d, r) in bx.iter().enumerate() {
            if r.end > self.geometry.shape[d] || r.start > r.end {
                return Err(Error::InvalidArgument(format!(
                    "box {r:?} outside dimension {d} of extent {}",
                    self.geometry.shape[d]
                )));
            }
        }
        Ok(bx.iter().map(|r| r.end - r.start).product())
    }

    /// Reads the C-ordered bytes of the elements in `bx` into `out` (elements ×
    /// itemsize bytes, e.g. an Arrow buffer; every byte is overwritten), decoding whole
    /// chunks on up to `threads` threads. Chunks are decoded one at a time into one
    /// scratch buffer, and each one's elements copied out before the next.
    ///
    /// # Errors
    /// A box outside the array or a buffer of the wrong size; IO and decoding errors.
    pub async fn read_box_into(
        &self,
        bx: &[Range<u64>],
        out: &mut [u8],
        stats: &mut ReadStats,
        threads: usize,
    ) -> Result<()> {
        let n = self.box_items(bx)?;
        if n.checked_mul(self.itemsize() as u64) != Some(out.len() as u64) {
            return Err(Error::InvalidArgument(format!(
                "box {bx:?} of {n} elements read into {} bytes",
                out.len()
            )));
        }
        let idx = if self.geometry.ndim() == 0 {
            vec![0]
        } else {
            self.geometry.chunks_in_box(bx)
        };
        let raws = self.fetch_recent(&idx, bx, stats).await?;
        let mut scratch = Vec::new();
        for (&i, raw) in idx.iter().zip(&raws) {
            let base = self.decode_for_box(i, raw, bx, stats, threads, &mut scratch)?;
            self.scatter_chunk(bx, i, base, &scratch, out)?;
        }
        Ok(())
    }

    /// Elements per dimension-0 row of box `bx` when its rows lie contiguous and in C order
    /// in the decoded bytes of the chunks they cross, so that the box can be decoded
    /// straight into a caller's buffer: along every other dimension, `bx` is exactly one
    /// chunk that lies wholly inside the array (the whole dimension when chunks span it,
    /// as in any 1-D array), and blocks span that chunk. `None` otherwise.
    pub fn contiguous_row_items(&self, bx: &[Range<u64>]) -> Option<u64> {
        let g = &self.geometry;
        if g.ndim() == 0 || bx.len() != g.ndim() {
            return None;
        }
        let one_chunk = (1..g.ndim()).all(|d| {
            let (r, c) = (&bx[d], g.chunkshape[d]);
            c > 0
                && r.start.is_multiple_of(c)
                && r.end.checked_sub(r.start) == Some(c)
                && r.end <= g.shape[d]
                && (!self.block_addressable || g.blockshape[d] == c)
        });
        one_chunk.then(|| g.chunkshape[1..].iter().product())
    }

    /// Reads box `bx`, whose rows lie contiguous in its chunks
    /// ([`NdArray::contiguous_row_items`]: e.g. any range of a 1-D array, or rows of one
    /// column of tiles whose blocks span the tile), straight into `out` (elements ×
    /// itemsize bytes, e.g. an Arrow buffer), in C order: a chunk the box covers whole is
    /// decoded into place (on up to `threads` threads); a run of whole blocks is decoded
    /// into place; only ragged edges go through a chunk buffer.
    ///
    /// # Errors
    /// A box whose rows are not contiguous, a box or buffer that does not fit, IO and
    /// decoding errors.
    pub async fn read_rows_into(
        &self,
        bx: &[Range<u64>],
        out: &mut [u8],
        stats: &mut ReadStats,
        threads: usize,
    ) -> Result<()> {
        let g = &self.geometry;
        let n = self.box_items(bx)?;
        let row_items = self.contiguous_row_items(bx);
        let row = row_items.map_or(0, |k| k * self.itemsize() as u64);
        let range = bx.first().cloned().unwrap_or(0..0);
        if row_items.is_none() || n.checked_mul(self.itemsize() as u64) != Some(out.len() as u64) {
            return Err(Error::InvalidArgument(format!(
                "row read of {bx:?} into {} bytes from an array of shape {:?}, chunks {:?}, \
                 blocks {:?}",
                out.len(),
                g.shape,
                g.chunkshape,
                g.blockshape
            )));
        }
        let idx = g.chunks_in_box(bx);
        let raws = self.fetch_recent(&idx, bx, stats).await?;
        let path = self.display();
        let mut scratch = Vec::new();
        for (&i, raw) in idx.iter().zip(&raws) {
            let cs = g.chunk_coords(i)[0] * g.chunkshape[0];
            let ce = (cs + g.chunkshape[0]).min(g.shape[0]);
            let (a, b) = (range.start.max(cs), range.end.min(ce));
            let dst =
                &mut out[((a - range.start) * row) as usize..((b - range.start) * row) as usize];
            // Special chunks (one value throughout): only the wanted rows are filled, not
            // the whole chunk per read.
            let at = ((a - cs) * row) as usize;
            if raw.fill_unstored(at, dst).is_some() {
                stats.chunks_read += 1;
                stats.chunks_special += 1;
                continue;
            }
            if let RawChunk::Stored(bytes) = raw {
                let chunk = self.parse_chunk(i, bytes)?;
                if chunk.header().special() != crate::chunk::SpecialValue::None
                    && chunk.fill_special_range(at, dst).is_ok()
                {
                    stats.chunks_read += 1;
                    stats.chunks_special += 1;
                    continue;
                }
                let nblocks = chunk.nblocks() as u64;
                if chunk.nbytes() == dst.len() {
                    chunk
                        .decode_into_parallel(dst, threads)
                        .map_err(|e| Error::chunk(e, path, i, 0))?;
                    stats.chunks_read += 1;
                    stats.blocks_decoded += nblocks;
                    continue;
                }
                // A run of whole blocks, decoded into place.
                let bi = g.blockshape[0].max(1);
                if self.block_addressable
                    && chunk.header().special() == crate::chunk::SpecialValue::None
                    && (a - cs).is_multiple_of(bi)
                {
                    let blocks = ((a - cs) / bi) as usize..((b - cs).div_ceil(bi)) as usize;
                    if let Ok(span) = chunk.blocks_byte_range(blocks.clone())
                        && span.start as u64 == (a - cs) * row
                        && span.len() == dst.len()
                    {
                        chunk
                            .decode_blocks_into(blocks.clone(), dst)
                            .map_err(|e| Error::chunk(e, path, i, 0))?;
                        stats.chunks_read += 1;
                        stats.blocks_decoded += blocks.len() as u64;
                        stats.blocks_skipped += nblocks - blocks.len() as u64;
                        continue;
                    }
                }
            }
            let base = self.decode_for_box(i, raw, bx, stats, threads, &mut scratch)?;
            let src = scratch
                .get(
                    (((a - cs) * row) as usize).wrapping_sub(base)
                        ..(((b - cs) * row) as usize).wrapping_sub(base),
                )
                .ok_or_else(|| {
                    Error::corrupt(path, "chunk", format!("chunk {i} shorter than its items"))
                })?;
            dst.copy_from_slice(src);
        }
        Ok(())
    }

    /// The whole array as C-ordered bytes.
    ///
    /// # Errors
    /// As [`NdArray::read_box`].
    pub async fn read_all(&self) -> Result<Vec<u8>> {
        let bx: Vec<Range<u64>> = self.geometry.shape.iter().map(|&s| 0..s).collect();
        self.read_box(&bx, &mut ReadStats::default()).await
    }
}
