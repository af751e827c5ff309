//! L1: one Blosc1/Blosc2 chunk, `&[u8]` in, bytes out. No IO; threads only on request.
//!
//! Implements `spec/chunk.md` (§4 algorithm, §5 split streams, §6 stream forms, §7
//! dictionaries, §8 VL-blocks, §9 special values) and `spec/filters.md` §7 (the pipeline).
//!
//! ```text
//! chunk = header (16|32) | bstarts[nblocks] (i32, from chunk start) | [dsize + dict] | blocks
//! block = 1 or typesize streams; stream = i32 csize + payload (raw, codec, zeros or a run)
//! ```
//!
//! Entry points: [`Chunk::parse`], then [`Chunk::decode`], [`Chunk::decode_into`],
//! [`Chunk::decode_blocks_into`] (random access) or [`Chunk::decode_into_parallel`].

pub mod codec;
mod error;
pub mod filter;
mod header;
mod opening;
mod run_rows;
pub mod simd;

pub use error::{ChunkError, ChunkResult};
pub use header::{ChunkHeader, Codec, SpecialValue, compcode_name, filter_name};

use run_rows::RunRows;
use std::cell::RefCell;
use std::ops::Range;
use std::sync::{Mutex, OnceLock};

/// Budget for sizes read from untrusted headers (checked before any allocation).
#[derive(Debug, Clone, Copy)]
pub struct DecodeLimits {
    /// Largest uncompressed chunk accepted.
    pub max_nbytes: u64,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        // Blosc chunks are at most i32::MAX bytes by construction; keep a 2 GiB ceiling.
        DecodeLimits {
            max_nbytes: i32::MAX as u64,
        }
    }
}

/// A parsed chunk whose tables have been checked against its bytes.
#[derive(Debug, Clone)]
pub struct Chunk<'a> {
    header: ChunkHeader,
    buf: &'a [u8],
    dict: Option<codec::StreamDict<'a>>,
    codec: Option<Codec>,
    /// What in the chunk needs the b2nd array's block shape, as (kind, name): a ZFP codec
    /// (`("codec", "zfp_acc")`, …) or a cell filter (`("filter", "ndcell")`); `None` for
    /// chunks that decode without it.
    shape_user: Option<(&'static str, &'static str)>,
    /// That block shape, once given ([`Chunk::with_block_shape`]).
    block_shape: Option<BlockShape>,
    /// How a block of `blocksize` bytes is decoded, worked out once ([`BlockPlan`]).
    /// Blocks of 4 KiB spent 2 % of their time redoing the filters' part.
    full_block: BlockPlan,
}

/// A b2nd block shape (up to 8 dimensions, C order), held inline.
#[derive(Debug, Clone, Copy)]
struct BlockShape {
    ndim: usize,
    dims: [u64; 8],
}

impl BlockShape {
    fn dims(&self) -> &[u64] {
        &self.dims[..self.ndim]
    }
}

/// How one block is decoded: its filters ([`Chunk::filters_to_undo`]), the typesize when
/// it is a plain byte-plane shuffle ([`Chunk::plain_shuffle_split`]), and how its bytes
/// split into streams.
#[derive(Debug, Clone, Copy, Default)]
struct BlockPlan {
    /// The filters to undo, slot 5 → 0.
    ops: FilterOps,
    /// The typesize when the block is a plain byte-plane shuffle.
    plain: Option<usize>,
    /// The typesize when the block is one SHUFFLE of it over a single LZ4 stream without a
    /// dictionary (`Chunk::unsplit_lz4_shuffle`, in `opening.rs`).
    unsplit: Option<usize>,
    /// How the block's bytes split into streams.
    split: StreamSplit,
}

/// How a block's bytes split into streams (`spec/chunk.md` §5): `ns` streams of
/// `neblock` bytes, then, when the block is not a multiple of `ns` (a blocksize clamped
/// to a short chunk), one more with the `rem` bytes left (C-Blosc2 writes it; seen in its
/// output, spec chunk.md §5 predates this).
#[derive(Debug, Clone, Copy, Default)]
struct StreamSplit {
    /// Streams of `neblock` bytes.
    ns: usize,
    /// Bytes of each of those.
    neblock: usize,
    /// Bytes of the extra stream (0: none).
    rem: usize,
}

impl StreamSplit {
    /// The split of a block of `bsize` bytes (the chunk's short last one when `leftover`).
    fn of(h: &ChunkHeader, bsize: usize, leftover: bool) -> Self {
        let ns = h.nstreams(bsize, leftover);
        let neblock = bsize / ns;
        StreamSplit {
            ns,
            neblock,
            rem: bsize - neblock * ns,
        }
    }

    /// Streams in the block, the extra one included.
    fn streams(self) -> usize {
        self.ns + usize::from(self.rem > 0)
    }
}

/// The planes of a plain byte-plane shuffle ([`Chunk::plain_shuffle_split`]): one stream
/// of `split.neblock` bytes each, and whether each is summed (BYTEDELTA) before the
/// unshuffle.
#[derive(Debug, Clone, Copy)]
struct Planes {
    split: StreamSplit,
    summed: bool,
}

/// What a plain byte-plane shuffle undoes after the unshuffle.
#[derive(Debug, Clone, Copy)]
enum Delta<'r> {
    /// Nothing.
    None,
    /// The DELTA of block 0 (a running XOR within the block).
    Block0,
    /// The DELTA of another block: an XOR with the decoded block 0.
    Against(&'r [u8]),
}

impl<'r> Delta<'r> {
    /// The DELTA block `j` undoes: block 0 its own running XOR, any other an XOR with the
    /// decoded block 0 `reference`; `None` when that is needed and missing.
    fn of_block(j: usize, reference: Option<&'r [u8]>) -> Option<Self> {
        match (j, reference) {
            (0, _) => Some(Delta::Block0),
            (_, Some(r)) => Some(Delta::Against(r)),
            (_, None) => None,
        }
    }
}

/// Output bytes unshuffled at a time before a DELTA against block 0 is undone on them.
const DELTA_PIECE: usize = 16 * 1024;

/// Unshuffles `rows` into `dst` and undoes `delta` on it. Against block 0, a piece of at
/// most `DELTA_PIECE` bytes at a time, each XORed while it is still in cache: one pass
/// over the block instead of two (`counter-i8-*-delta-shuffle` +24 to +34 %). Out of line:
/// inlined into the plain path, its loop cost blocks without DELTA 3–4 % (4 KiB blocks).
#[inline(never)]
fn unshuffle_then_undelta(rows: &[&[u8]], dst: &mut [u8], delta: Delta) {
    let ts = rows.len();
    match delta {
        Delta::None => filter::shuffle::unshuffle_rows(rows, dst),
        Delta::Block0 => {
            filter::shuffle::unshuffle_rows(rows, dst);
            filter::delta::undelta_block0(ts, dst);
        }
        Delta::Against(reference) => {
            let extent = filter::delta::other_extent(ts, dst.len(), reference.len());
            // Elements per piece: a multiple of 32, the AVX2 kernels' step.
            let step = (DELTA_PIECE / ts / 32 * 32).max(32);
            for (p, piece) in dst.chunks_mut(step * ts).enumerate() {
                let from = p * step;
                let n = piece.len() / ts;
                let piece_rows: [&[u8]; 16] =
                    std::array::from_fn(|k| rows.get(k).map_or(&[][..], |r| &r[from..from + n]));
                filter::shuffle::unshuffle_rows(&piece_rows[..ts], piece);
                let (start, end) = (from * ts, (from * ts + piece.len()).min(extent));
                if start < end {
                    filter::delta::xor_with(&mut piece[..end - start], &reference[start..end]);
                }
            }
        }
    }
}

/// Bytes of blocks a thread of [`Chunk::decode_into_parallel`] takes at a time, at least.
const BATCH_BYTES: usize = 32 * 1024;
/// The most blocks it takes at a time.
const MAX_BATCH: usize = 64;
/// Scratch bytes after a block's planes, for the last plane's stream to overwrite
/// ([`Chunk::decode_planes`]).
const ROOM: usize = 64;

thread_local! {
    /// Per-thread buffers of the block decoders, in one cell (one thread-local access a
    /// block): two block-sized scratch buffers, all zeros as long as the longest
    /// all-zero plane seen (such planes, the high bytes of small integers, are unshuffled
    /// from there instead of being zeroed per block), and rows of the bytes of planes
    /// stored as runs ([`RunRows`]).
    static SCRATCH: RefCell<Scratch> = const {
        RefCell::new(Scratch {
            a: Vec::new(),
            b: Vec::new(),
            zeros: Vec::new(),
            runs: RunRows::new(),
        })
    };
}

/// The buffers in [`SCRATCH`].
#[derive(Default)]
struct Scratch {
    /// Block scratch.
    a: Vec<u8>,
    /// Second block scratch, for pipelines of two out-of-place filters.
    b: Vec<u8>,
    /// All zeros (never written other than by growing).
    zeros: Vec<u8>,
    /// Rows of one repeated byte, for planes stored as runs.
    runs: RunRows,
}

/// Runs `f` with this thread's [`Scratch`], borrowed once for all the blocks `f` decodes
/// (a borrow per 4 KiB block was about 2 % of its decode). Should the thread's scratch
/// already be lent (a caller up the stack decoding, which no path here does), `f` gets
/// buffers of its own instead of a panic.
fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut s) => f(&mut s),
        Err(_) => f(&mut Scratch::default()),
    })
}

/// The filters a block undoes as `(slot, filter)`, slot 5 → 0: at most the header's six,
/// held inline (a `Vec` per block cost 4 KiB blocks 6 % of their decode in `malloc`).
#[derive(Debug, Clone, Copy, Default)]
struct FilterOps {
    ops: [(usize, u8); 6],
    len: usize,
}

impl std::ops::Deref for FilterOps {
    type Target = [(usize, u8)];
    fn deref(&self) -> &Self::Target {
        &self.ops[..self.len]
    }
}

/// Undoes one DELTA in place on block `j`: block 0 against itself, the others against the
/// decoded block 0 (`reference`).
fn undelta_one(j: usize, ts: usize, reference: Option<&[u8]>, buf: &mut [u8]) -> ChunkResult<()> {
    match Delta::of_block(j, reference) {
        Some(Delta::Block0) => filter::delta::undelta_block0(ts, buf),
        Some(Delta::Against(r)) => filter::delta::undelta_other(ts, buf, r),
        Some(Delta::None) => {}
        None => {
            return Err(ChunkError::InvalidArgument(
                "DELTA needs the decoded block 0".into(),
            ));
        }
    }
    Ok(())
}

/// The first `len` bytes of a reused scratch buffer, which only ever grows (zero-filling
/// the new bytes): resized down and up again, it would zero the same bytes each time a
/// scan's columns with different block sizes take turns on a thread. Callers write every
/// byte they read.
fn grown(v: &mut Vec<u8>, len: usize) -> &mut [u8] {
    if v.len() < len {
        v.resize(len, 0);
    }
    &mut v[..len]
}

/// One stream of a block, as its size word says (`spec/chunk.md` §6).
enum Stream<'b> {
    /// All zeros (size 0).
    Zeros,
    /// One byte repeated (a negative size and a run token).
    Run(u8),
    /// Stored uncompressed: these chunk bytes.
    Raw(&'b [u8]),
    /// Compressed by the chunk's codec: these chunk bytes.
    Coded(&'b [u8]),
}

fn read_i32(buf: &[u8], at: usize, what: &'static str) -> ChunkResult<i32> {
    match buf.get(at..at + 4) {
        Some(b) => Ok(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        None => Err(ChunkError::Truncated {
            what,
            at,
            need: 4,
            have: buf.len().saturating_sub(at),
        }),
    }
}

impl<'a> Chunk<'a> {
    /// What this chunk's streams decode to, by its filters (picks LZ4's match copy).
    fn shape(&self) -> codec::StreamShape {
        codec::StreamShape::of_filters(&self.header.filters)
    }

    /// Parses the header and checks the bstarts table and dictionary against the buffer.
    /// `buf` may extend past the chunk; only `cbytes` bytes are used.
    ///
    /// # Errors
    /// Any structural problem of the header, bstarts table or dictionary.
    pub fn parse(buf: &'a [u8]) -> ChunkResult<Self> {
        let header = ChunkHeader::parse(buf)?;
        let buf = &buf[..header.cbytes];
        let mut chunk = Chunk {
            header,
            buf,
            dict: None,
            codec: None,
            shape_user: None,
            block_shape: None,
            full_block: BlockPlan::default(),
        };
        let h = &chunk.header;
        if h.nbytes == 0 || h.special() != SpecialValue::None {
            return Ok(chunk);
        }
        if h.is_memcpyed() {
            if h.cbytes != h.nbytes + h.header_len {
                return Err(ChunkError::BadHeader {
                    field: "cbytes",
                    value: h.cbytes as i64,
                    why: "a memcpyed chunk must hold exactly nbytes after its header",
                });
            }
            return Ok(chunk);
        }
        let codec = h.codec()?;
        for (slot, &f) in h.filters.iter().enumerate() {
            match f {
                0..=4 | 35 | 36 => {}
                32 | 33 => {
                    let side = h.filters_meta[slot];
                    if h.is_vl_blocks() || !(1..=127).contains(&side) {
                        return Err(ChunkError::Unsupported(format!(
                            "filter {} in pipeline slot {slot} with cell side {side} (1 to \
                             127, outside VL-block chunks)",
                            filter_name(f)
                        )));
                    }
                    chunk.shape_user = Some(("filter", if f == 32 { "ndcell" } else { "ndmean" }));
                }
                _ => {
                    return Err(ChunkError::Unsupported(format!(
                        "filter {} in pipeline slot {slot}",
                        filter_name(f)
                    )));
                }
            }
        }
        if let Codec::Zfp(mode) = codec {
            if h.typesize != 4 && h.typesize != 8 {
                return Err(ChunkError::Unsupported(format!(
                    "codec {} with typesize {} (ZFP codes float32 and float64)",
                    mode.name(),
                    h.typesize
                )));
            }
            if h.is_vl_blocks() || h.nstreams(h.blocksize, false) != 1 {
                return Err(ChunkError::Unsupported(format!(
                    "codec {} over split or variable-length blocks",
                    mode.name()
                )));
            }
            chunk.shape_user = Some(("codec", mode.name()));
        }
        if let Codec::Ndlz(side) = codec
            && side != 4
            && side != 8
        {
            return Err(ChunkError::Unsupported(format!(
                "codec ndlz with cells of side {side} (NDLZ has 4 and 8)"
            )));
        }
        if h.is_vl_blocks() && h.has_delta() {
            return Err(ChunkError::Unsupported(
                "DELTA filter in a VL-block chunk".into(),
            ));
        }
        let nblocks = h.nblocks();
        let table_end = nblocks
            .checked_mul(4)
            .and_then(|t| t.checked_add(h.header_len))
            .filter(|&e| e <= h.cbytes)
            .ok_or(ChunkError::Truncated {
                what: "bstarts table",
                at: h.header_len,
                need: nblocks.saturating_mul(4),
                have: h.cbytes - h.header_len,
            })?;
        let mut data_start = table_end;
        if h.has_dict() {
            if !matches!(codec, Codec::Zstd | Codec::Lz4) {
                return Err(ChunkError::Unsupported(format!(
                    "dictionary with codec {}",
                    codec.name()
                )));
            }
            let dsize = read_i32(buf, table_end, "dictionary size")?;
            if dsize <= 0 || dsize > 32768 {
                return Err(ChunkError::BadHeader {
                    field: "dsize",
                    value: dsize.into(),
                    why: "must be in 1..=32768",
                });
            }
            let d = buf
                .get(table_end + 4..table_end + 4 + dsize as usize)
                .ok_or(ChunkError::Truncated {
                    what: "dictionary",
                    at: table_end + 4,
                    need: dsize as usize,
                    have: buf.len().saturating_sub(table_end + 4),
                })?;
            chunk.dict = Some(codec::StreamDict::new(d));
            data_start = table_end + 4 + dsize as usize;
        }
        for j in 0..nblocks {
            let s = read_i32(buf, h.header_len + 4 * j, "bstarts entry")?;
            if s < 0 || (s as usize) < data_start || s as usize >= h.cbytes {
                return Err(ChunkError::BadBlock {
                    block: j,
                    at: h.header_len + 4 * j,
                    why: format!(
                        "bstarts entry {s} outside the block data [{data_start}, {})",
                        h.cbytes
                    ),
                });
            }
        }
        chunk.codec = Some(codec);
        chunk.full_block = chunk.block_plan(chunk.header.blocksize, false);
        Ok(chunk)
    }

    /// Gives a chunk the shape of its blocks (the b2nd array's `blockshape`), which ZFP
    /// streams and the NDCELL and NDMEAN filters need and the chunk does not hold; other
    /// chunks are returned unchanged.
    ///
    /// # Errors
    /// `Unsupported` for a chunk needing it whose blocks are not of that shape
    /// (`blocksize` bytes of the chunk's typesize; 1 to 4 dimensions for ZFP).
    pub fn with_block_shape(mut self, blockshape: &[u64]) -> ChunkResult<Self> {
        let Some((kind, name)) = self.shape_user else {
            return Ok(self);
        };
        // Whether blocks of this shape hold `blocksize` bytes of the typesize.
        let fills = blockshape
            .iter()
            .try_fold(self.header.typesize as u64, |n, &d| n.checked_mul(d))
            == Some(self.header.blocksize as u64);
        let zfp = matches!(self.codec, Some(Codec::Zfp(_)));
        if !fills || blockshape.len() > 8 || (zfp && !codec::zfp::codes_shape(blockshape)) {
            return Err(ChunkError::Unsupported(format!(
                "{kind} {name} over blocks of {} bytes, which a block shape {blockshape:?} of \
                 {}-byte items does not fill{}",
                self.header.blocksize,
                self.header.typesize,
                if zfp {
                    " (ZFP codes 1 to 4 dimensions)"
                } else {
                    ""
                }
            )));
        }
        let mut dims = [0u64; 8];
        dims[..blockshape.len()].copy_from_slice(blockshape);
        self.block_shape = Some(BlockShape {
            ndim: blockshape.len(),
            dims,
        });
        Ok(self)
    }

    /// The parsed header.
    pub fn header(&self) -> &ChunkHeader {
        &self.header
    }

    /// Uncompressed size.
    pub fn nbytes(&self) -> usize {
        self.header.nbytes
    }

    /// Number of blocks that can be decoded one by one (0 when the chunk is not block-structured).
    pub fn nblocks(&self) -> usize {
        self.header.nblocks()
    }

    /// The decoded size of each block of a VL-block chunk, in order; `None` for a chunk
    /// of fixed-size blocks. Each size is read from its block's prefix and checked to be
    /// positive; [`Chunk::decode`] checks that they add up to `nbytes`.
    ///
    /// # Errors
    /// A block start or size prefix outside the chunk, or a size that is not positive.
    pub fn vl_block_sizes(&self) -> ChunkResult<Option<Vec<usize>>> {
        if !self.header.is_vl_blocks() {
            return Ok(None);
        }
        let n = self.header.nblocks();
        let mut sizes = Vec::with_capacity(n.min(self.buf.len() / 4));
        for j in 0..n {
            let start = self.block_start(j)?;
            let size = read_i32(self.buf, start, "VL block size")?;
            if size <= 0 {
                return Err(ChunkError::BadBlock {
                    block: j,
                    at: start,
                    why: format!("VL block size {size}"),
                });
            }
            sizes.push(size as usize);
        }
        Ok(Some(sizes))
    }

    /// True when decoding any block needs block 0 first (DELTA in the pipeline).
    pub fn needs_reference_block(&self) -> bool {
        self.header.has_delta()
    }

    /// Decodes the whole chunk into a new vector, after checking `nbytes` against `limits`.
    ///
    /// # Errors
    /// `LimitExceeded` or any decoding error.
    pub fn decode(&self, limits: &DecodeLimits) -> ChunkResult<Vec<u8>> {
        if self.header.nbytes as u64 > limits.max_nbytes {
            return Err(ChunkError::LimitExceeded {
                declared: self.header.nbytes as u64,
                limit: limits.max_nbytes,
            });
        }
        let mut out = vec![0u8; self.header.nbytes];
        self.decode_into(&mut out)?;
        Ok(out)
    }

    /// Decodes the whole chunk into `out`, which must be exactly `nbytes` long.
    ///
    /// # Errors
    /// `InvalidArgument` for a wrong `out` length, or any decoding error.
    pub fn decode_into(&self, out: &mut [u8]) -> ChunkResult<()> {
        let h = &self.header;
        if out.len() != h.nbytes {
            return Err(ChunkError::InvalidArgument(format!(
                "output is {} bytes, chunk holds {}",
                out.len(),
                h.nbytes
            )));
        }
        if h.nbytes == 0 {
            return Ok(());
        }
        match h.special() {
            SpecialValue::None => {}
            kind => return self.fill_special(kind, out),
        }
        if let Some(payload) = self.raw_payload() {
            out.copy_from_slice(payload);
            return Ok(());
        }
        if h.is_vl_blocks() {
            return self.decode_vl(out);
        }
        self.decode_blocks_into(0..self.nblocks(), out)
    }

    /// Decodes blocks `blocks` (a range of block indices) into `out`, which must be exactly
    /// the bytes those blocks cover (`block_span`). Other blocks are not decompressed, except
    /// block 0 when DELTA needs it as reference.
    ///
    /// # Errors
    /// `InvalidArgument` for a bad range or length, or any decoding error.
    pub fn decode_blocks_into(&self, blocks: Range<usize>, out: &mut [u8]) -> ChunkResult<()> {
        let h = &self.header;
        if h.is_vl_blocks() || h.special() != SpecialValue::None || h.is_memcpyed() {
            // Not block-addressable: decode all, then copy the byte range.
            let span = self.blocks_byte_range(blocks.clone())?;
            if span.len() != out.len() {
                return Err(ChunkError::InvalidArgument(
                    "output length does not match the blocks".into(),
                ));
            }
            let all = self.decode(&DecodeLimits::default())?;
            out.copy_from_slice(&all[span]);
            return Ok(());
        }
        let span = self.blocks_byte_range(blocks.clone())?;
        if span.len() != out.len() {
            return Err(ChunkError::InvalidArgument(format!(
                "output is {} bytes, blocks {blocks:?} cover {}",
                out.len(),
                span.len()
            )));
        }
        let reference = self.reference_block()?;
        with_scratch(|s| {
            for j in blocks {
                let (start, len) = h.block_span(j);
                let dst = &mut out[start - span.start..start - span.start + len];
                self.decode_block(j, dst, reference.as_deref(), s)?;
            }
            Ok(())
        })
    }

    /// Decodes the whole chunk into `out` using up to `threads` threads over its blocks.
    ///
    /// The calling thread decodes too; the helpers are tasks on rayon's persistent global
    /// pool, so a call spawns no thread and the helpers' scratch buffers stay warm. Blocks
    /// are handed out from a shared queue, one at a time when they are 32 KiB or larger,
    /// else as many as make 32 KiB (at most 64): a helper that starts late (or never, when
    /// the pool is busy) only leaves more blocks to the others.
    ///
    /// # Errors
    /// As [`Chunk::decode_into`].
    pub fn decode_into_parallel(&self, out: &mut [u8], threads: usize) -> ChunkResult<()> {
        self.decode_into_parallel_with(out, threads, Self::COPY_PIECE)
    }

    /// The pieces a stored-raw (memcpyed) chunk is copied in by
    /// [`Chunk::decode_into_parallel`]: one thread copies about 48 GB/s here, and two
    /// copying halves of a 4 MiB chunk reach about what C-Blosc2 does (`benches/README.md`).
    const COPY_PIECE: usize = 256 << 10;

    /// [`Chunk::decode_into_parallel`], with a memcpyed chunk's payload copied in pieces
    /// of `piece` bytes (the blocks of the others).
    fn decode_into_parallel_with(
        &self,
        out: &mut [u8],
        threads: usize,
        piece: usize,
    ) -> ChunkResult<()> {
        let h = &self.header;
        let raw = self.raw_payload();
        let nblocks = match raw {
            Some(payload) => payload.len().div_ceil(piece.max(1)),
            None => self.nblocks(),
        };
        if threads <= 1 || nblocks < 2 || h.is_vl_blocks() || out.len() != h.nbytes {
            return self.decode_into(out);
        }
        let reference = match raw {
            Some(_) => None,
            None => self.reference_block()?,
        };
        let reference = reference.as_deref();
        let mut rest: &mut [u8] = out;
        let mut blocks = Vec::with_capacity(nblocks);
        for j in 0..nblocks {
            let len = match raw {
                Some(_) => piece.min(rest.len()),
                None => h.block_span(j).1,
            };
            let (mine, tail) = rest.split_at_mut(len);
            rest = tail;
            blocks.push((j, mine));
        }
        let decode_block = |j: usize, dst: &mut [u8], s: &mut Scratch| match raw {
            Some(payload) => {
                dst.copy_from_slice(&payload[j * piece..j * piece + dst.len()]);
                Ok(())
            }
            None => self.decode_block(j, dst, reference, s),
        };
        // Blocks are taken a batch of at least 32 KiB at a time: one lock per 4 KiB block
        // cost more than the block on two threads (int64 counters in 4 KiB blocks decoded
        // slower on two threads than on one).
        let batch = match raw {
            Some(_) => 1,
            None => (BATCH_BYTES / h.blocksize.max(1)).clamp(1, MAX_BATCH),
        };
        let queue = Mutex::new(blocks.into_iter());
        // The first failure; once set, the other threads stop (reading it takes no lock).
        let failed = OnceLock::new();
        let work = || {
            with_scratch(|s| {
                let mut mine = Vec::with_capacity(batch);
                loop {
                    mine.extend(
                        queue
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .by_ref()
                            .take(batch),
                    );
                    if mine.is_empty() {
                        return;
                    }
                    for (j, dst) in mine.drain(..) {
                        if failed.get().is_some() {
                            return; // A block failed: the others are not worth decoding.
                        }
                        if let Err(e) = decode_block(j, dst, s) {
                            let _ = failed.set(e);
                            return;
                        }
                    }
                }
            })
        };
        rayon_core::in_place_scope(|scope| {
            for _ in 1..threads.min(nblocks) {
                scope.spawn(|_| work());
            }
            work();
        });
        match failed.into_inner() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The payload of a chunk stored raw (memcpyed, no special value): the `nbytes` after
    /// its header, which parse checked it holds exactly.
    fn raw_payload(&self) -> Option<&'a [u8]> {
        let h = &self.header;
        (h.is_memcpyed() && h.special() == SpecialValue::None)
            .then(|| &self.buf[h.header_len..h.header_len + h.nbytes])
    }

    /// Byte range of the uncompressed chunk covered by `blocks`.
    ///
    /// # Errors
    /// `InvalidArgument` when the range is empty-inverted or past the last block.
    pub fn blocks_byte_range(&self, blocks: Range<usize>) -> ChunkResult<Range<usize>> {
        let n = self.nblocks();
        let h = &self.header;
        if blocks.start > blocks.end || blocks.end > n.max(1) {
            return Err(ChunkError::InvalidArgument(format!(
                "blocks {blocks:?} out of 0..{n}"
            )));
        }
        if n == 0 || h.is_vl_blocks() {
            return Ok(0..h.nbytes);
        }
        if blocks.is_empty() {
            return Ok(0..0);
        }
        let start = h.block_span(blocks.start).0;
        let (ls, ll) = h.block_span(blocks.end - 1);
        Ok(start..ls + ll)
    }

    /// Block 0 decoded, when DELTA needs it as the reference of the other blocks.
    fn reference_block(&self) -> ChunkResult<Option<Vec<u8>>> {
        if !self.needs_reference_block() || self.nblocks() == 0 {
            return Ok(None);
        }
        let (_, len) = self.header.block_span(0);
        let mut b0 = vec![0u8; len];
        with_scratch(|s| self.decode_block(0, &mut b0, None, s))?;
        Ok(Some(b0))
    }

    /// Fills `out` with bytes `at..at + out.len()` of this special chunk's data (zeros,
    /// NaN, or its repeated value: see [`ChunkHeader::special`]) without producing the
    /// rest of it. `at` and the length must be whole elements of the repeated pattern
    /// (the value's size, or the typesize for NaN) inside the chunk.
    ///
    /// # Errors
    /// A chunk that is not special, a range outside it or not on element boundaries.
    pub fn fill_special_range(&self, at: usize, out: &mut [u8]) -> ChunkResult<()> {
        let h = &self.header;
        let kind = h.special();
        let unit = match kind {
            SpecialValue::None => {
                return Err(ChunkError::InvalidArgument(
                    "a partial fill of a chunk that is not special".into(),
                ));
            }
            SpecialValue::Value => self.buf.len().saturating_sub(32).max(1),
            SpecialValue::NaN => (h.typesize as usize).max(1),
            _ => 1,
        };
        let end = at.checked_add(out.len());
        if end.is_none_or(|e| e > h.nbytes)
            || !at.is_multiple_of(unit)
            || !out.len().is_multiple_of(unit)
        {
            return Err(ChunkError::InvalidArgument(format!(
                "bytes {at}..+{} of a special chunk of {} bytes in elements of {unit}",
                out.len(),
                h.nbytes
            )));
        }
        self.fill_special(kind, out)
    }

    fn fill_special(&self, kind: SpecialValue, out: &mut [u8]) -> ChunkResult<()> {
        let h = &self.header;
        match kind {
            SpecialValue::Zeros | SpecialValue::Uninit | SpecialValue::None => out.fill(0),
            SpecialValue::NaN => fill_nan(h.typesize as usize, out)?,
            SpecialValue::Value => {
                let value = &self.buf[32..];
                if value.is_empty() || !h.nbytes.is_multiple_of(value.len()) {
                    return Err(ChunkError::BadHeader {
                        field: "cbytes",
                        value: h.cbytes as i64,
                        why: "repeated-value size must divide nbytes",
                    });
                }
                for piece in out.chunks_exact_mut(value.len()) {
                    piece.copy_from_slice(value);
                }
            }
        }
        Ok(())
    }

    fn decode_vl(&self, out: &mut [u8]) -> ChunkResult<()> {
        let h = &self.header;
        let n = h.nblocks();
        let written = with_scratch(|s| self.decode_vl_blocks(out, s))?;
        if written != h.nbytes {
            return Err(ChunkError::BadBlock {
                block: n,
                at: h.cbytes,
                why: format!("VL blocks hold {written} bytes, nbytes is {}", h.nbytes),
            });
        }
        Ok(())
    }

    /// The VL blocks of [`Chunk::decode_vl`] into `out`; returns the bytes they wrote.
    fn decode_vl_blocks(&self, out: &mut [u8], s: &mut Scratch) -> ChunkResult<usize> {
        let h = &self.header;
        let n = h.nblocks();
        let mut written = 0usize;
        for j in 0..n {
            let start = self.block_start(j)?;
            let end = if j + 1 < n {
                self.block_start(j + 1)?
            } else {
                h.cbytes
            };
            if end < start + 4 || end > h.cbytes {
                return Err(ChunkError::BadBlock {
                    block: j,
                    at: start,
                    why: format!("VL block ends at {end}"),
                });
            }
            let ublock = read_i32(self.buf, start, "VL block size")?;
            if ublock <= 0 || ublock as usize > h.nbytes - written {
                return Err(ChunkError::BadBlock {
                    block: j,
                    at: start,
                    why: format!(
                        "VL block size {ublock} exceeds the {} bytes left",
                        h.nbytes - written
                    ),
                });
            }
            let ublock = ublock as usize;
            let payload = &self.buf[start + 4..end];
            let dst = &mut out[written..written + ublock];
            let ops = self.filters_to_undo(dst.len());
            self.run_pipeline(j, dst, None, &ops, s, |raw: &mut [u8]| {
                if payload.len() == ublock {
                    raw.copy_from_slice(payload);
                    Ok(())
                } else {
                    self.decode_stream(j, start + 4, payload, raw)
                }
            })?;
            written += ublock;
        }
        Ok(written)
    }

    /// Decodes block `j` (regular chunk) into `dst` (its exact size). `reference` is block
    /// 0 already decoded ([`Chunk::reference_block`], for DELTA): block 0 itself is then
    /// copied from it rather than decoded again.
    fn decode_block(
        &self,
        j: usize,
        dst: &mut [u8],
        reference: Option<&[u8]>,
        s: &mut Scratch,
    ) -> ChunkResult<()> {
        if let (Some((kind, name)), None) = (self.shape_user, self.block_shape) {
            return Err(ChunkError::Unsupported(format!(
                "{kind} {name}: its blocks need the block shape of the b2nd array holding the \
                 chunk"
            )));
        }
        if let (0, Some(r)) = (j, reference) {
            dst.copy_from_slice(&r[..dst.len()]);
            return Ok(());
        }
        let short;
        let plan = if dst.len() == self.header.blocksize {
            // (Only the last block may be shorter, or have a stream more: not this one.)
            // Borrowed: a copy of the plan was a `memcpy` call per block.
            &self.full_block
        } else {
            short = self.block_plan(dst.len(), self.header.is_leftover(j));
            &short
        };
        if let Some(ts) = plan.unsplit
            && self.decode_opening_planes(j, ts, dst, s)?
        {
            return Ok(());
        }
        if let Some(ts) = plan.plain {
            // A second filter to undo after the unshuffle is a DELTA
            // (`plain_shuffle_split` admits no other). It needs block 0 for the other
            // blocks; without it, the pipeline below reports that.
            let delta = if plan.ops.last().is_some_and(|&(_, f)| f == 3) {
                Delta::of_block(j, reference)
            } else {
                Some(Delta::None)
            };
            if let Some(delta) = delta {
                // (A BYTEDELTA before the unshuffle is the first filter to undo.)
                let planes = Planes {
                    split: plan.split,
                    summed: plan.ops.first().is_some_and(|&(_, f)| f == 35),
                };
                return self.decode_shuffled_planes(j, ts, planes, delta, dst, s);
            }
        }
        self.run_pipeline(j, dst, reference, &plan.ops, s, |raw| {
            self.decode_streams(j, plan.split, raw)
        })
    }

    /// How a block of `bsize` bytes (the chunk's short last one when `leftover`) is decoded.
    fn block_plan(&self, bsize: usize, leftover: bool) -> BlockPlan {
        let ops = self.filters_to_undo(bsize);
        let split = StreamSplit::of(&self.header, bsize, leftover);
        BlockPlan {
            ops,
            plain: self.plain_shuffle_split(leftover, bsize, &ops),
            unsplit: self.unsplit_lz4_shuffle(split.streams(), bsize, &ops),
            split,
        }
    }

    /// The typesize when a block of `bsize` bytes (the chunk's short last one when
    /// `leftover`), undoing `ops`, is the common case of one SHUFFLE of the typesize over one
    /// stream per byte plane, with no tail, at most a BYTEDELTA over those planes to undo
    /// before it and at most a DELTA after it: its planes can be unshuffled from wherever
    /// they lie (summed on the way when BYTEDELTA is there).
    fn plain_shuffle_split(
        &self,
        leftover: bool,
        bsize: usize,
        ops: &[(usize, u8)],
    ) -> Option<usize> {
        let ops = match ops {
            [(b, 35), rest @ ..] => {
                if self.header.bytedelta_streams(*b) != self.header.typesize as usize {
                    return None;
                }
                rest
            }
            _ => ops,
        };
        let (&[(slot, 1)] | &[(slot, 1), (_, 3)]) = ops else {
            return None;
        };
        self.byte_planes(slot, bsize)
            .filter(|&ts| self.header.nstreams(bsize, leftover) == ts)
    }

    /// The typesize when the SHUFFLE in filter slot `slot` moves whole elements of it
    /// (group 0 or the typesize, of 2–16 bytes) in a block of `bsize` bytes that holds
    /// whole elements: its byte planes are then the unshuffle's rows.
    fn byte_planes(&self, slot: usize, bsize: usize) -> Option<usize> {
        let ts = self.header.typesize as usize;
        let group = self.header.filters_meta[slot] as usize;
        ((2..=16).contains(&ts) && (group == 0 || group == ts) && bsize.is_multiple_of(ts))
            .then_some(ts)
    }

    /// Filters to undo for a block of `bsize` bytes, slot 5 → 0, with the Blosc1 no-op
    /// cases dropped (filters.md §1).
    fn filters_to_undo(&self, bsize: usize) -> FilterOps {
        let h = &self.header;
        let ts = h.typesize as usize;
        let mut ops = FilterOps {
            ops: [(0, 0); 6],
            len: 0,
        };
        for slot in (0..6).rev() {
            let f = h.filters[slot];
            let undo = match f {
                1 => !(h.version <= 2 && ts == 1),
                2 => !(h.version <= 2 && bsize < ts),
                3 | 32 | 33 | 35 => true,
                _ => false,
            };
            if undo {
                ops.ops[ops.len] = (slot, f);
                ops.len += 1;
            }
        }
        ops
    }

    /// Block `j` as [`Chunk::plain_shuffle_split`] describes it: streams stored raw are
    /// unshuffled straight from the chunk bytes, the others after decoding into scratch;
    /// then `delta` is undone ([`unshuffle_then_undelta`]).
    fn decode_shuffled_planes(
        &self,
        j: usize,
        ts: usize,
        planes: Planes,
        delta: Delta,
        dst: &mut [u8],
        s: &mut Scratch,
    ) -> ChunkResult<()> {
        // One stream per plane (plain_shuffle_split), so a plane is `neblock` bytes.
        let ne = planes.split.neblock;
        let Scratch { a, zeros, runs, .. } = s;
        let scratch = grown(a, dst.len() + ROOM);
        let zeros: &[u8] = grown(zeros, ne);
        let mut rows: [&[u8]; 16] = [&[]; 16];
        self.decode_planes(j, planes, scratch, zeros, runs, &mut rows[..ts])?;
        match delta {
            Delta::None => filter::shuffle::unshuffle_rows(&rows[..ts], dst),
            _ => unshuffle_then_undelta(&rows[..ts], dst, delta),
        }
        Ok(())
    }

    /// The planes of block `j` (one stream of `ne` bytes each, as many as `rows`, at most
    /// 16) into `rows`: a plane stored raw is its bytes in the chunk, an all-zero one
    /// `zeros`, a run a row of `runs`, any other is decoded into its place in `scratch`,
    /// which holds [`ROOM`] bytes more than the planes. A coded plane's stream may write
    /// into the next plane's place (or that room): LZ4 keeps its fixed-size copies up to
    /// the stream's end (4 KiB blocks of float64, a 512-byte stream in each: +3 %,
    /// `benches/README.md`, sessions 30 and 31).
    ///
    /// Planes to be summed (BYTEDELTA) are summed right after they are decoded, while in
    /// cache: in place, or from the chunk into their place for one stored raw (no copy
    /// first); an all-zero plane stays `zeros`, a run is written out and summed.
    fn decode_planes<'p>(
        &'p self,
        j: usize,
        planes: Planes,
        scratch: &'p mut [u8],
        zeros: &'p [u8],
        runs: &'p mut RunRows,
        rows: &mut [&'p [u8]],
    ) -> ChunkResult<()> {
        let ne = planes.split.neblock;
        let mut pos = self.block_start(j)?;
        // The planes stored as runs that take a row of `runs` (a bit each), and their bytes.
        let (mut run_planes, mut run_bytes) = (0u32, [0u8; run_rows::MAX_ROWS]);
        // The places of the planes not yet decoded, and `ROOM` bytes after them.
        let mut left: &'p mut [u8] = scratch;
        for (k, row) in rows.iter_mut().enumerate() {
            let (stream, next) = self.stream_at(j, pos, ne)?;
            let room = left.len().min(ne + ROOM);
            if room < ne {
                break; // (the scratch holds every plane)
            }
            if let Stream::Coded(src) = stream {
                // The stream may overwrite up to `ROOM` bytes past its plane: the next
                // plane's place, which is written after it, or the scratch's end.
                self.decode_stream_room(j, pos, src, &mut left[..room], ne)?;
            }
            let (plane, rest) = std::mem::take(&mut left).split_at_mut(ne);
            left = rest;
            *row = match stream {
                Stream::Zeros => zeros,
                Stream::Run(v) if !planes.summed && ne >= run_rows::MIN_LEN => {
                    run_planes |= 1 << k;
                    run_bytes[k] = v;
                    &[]
                }
                Stream::Run(v) => {
                    plane.fill(v);
                    if planes.summed {
                        filter::bytedelta::running_sum(plane);
                    }
                    plane
                }
                Stream::Raw(src) if planes.summed => {
                    filter::bytedelta::running_sum_copy(src, plane);
                    plane
                }
                Stream::Raw(src) => src,
                Stream::Coded(_) => {
                    if planes.summed {
                        filter::bytedelta::running_sum(plane);
                    }
                    plane
                }
            };
            pos = next;
        }
        if run_planes != 0 {
            runs.rows_for(run_planes, &run_bytes, ne, rows);
        }
        Ok(())
    }

    /// Fills a block with its streams (`fill`), then undoes the filters `ops`
    /// ([`Chunk::filters_to_undo`], slot 5 → 0).
    fn run_pipeline(
        &self,
        j: usize,
        dst: &mut [u8],
        reference: Option<&[u8]>,
        ops: &[(usize, u8)],
        s: &mut Scratch,
        fill: impl FnOnce(&mut [u8]) -> ChunkResult<()>,
    ) -> ChunkResult<()> {
        let h = &self.header;
        let ts = h.typesize as usize;
        let bsize = dst.len();
        // DELTA (3) and BYTEDELTA (35) are undone in place; SHUFFLE, BITSHUFFLE, NDCELL
        // (32) and NDMEAN (33) out of place. Once only in-place filters are left, the data
        // goes to `dst` and stays there (no copy at the end).
        let in_place = |buf: &mut [u8], slot: usize, f: u8| -> ChunkResult<()> {
            if f == 35 {
                filter::bytedelta::unbytedelta(h.bytedelta_streams(slot), buf);
                Ok(())
            } else {
                undelta_one(j, ts, reference, buf)
            }
        };
        let in_place_from = ops
            .iter()
            .rposition(|&(_, f)| matches!(f, 1 | 2 | 32 | 33))
            .map_or(0, |k| k + 1);
        let undo_rest = |buf: &mut [u8]| -> ChunkResult<()> {
            for &(slot, f) in &ops[in_place_from..] {
                in_place(buf, slot, f)?;
            }
            Ok(())
        };
        if in_place_from == 0 {
            fill(dst)?;
            return undo_rest(dst);
        }
        let Scratch { a, b, .. } = s;
        let (mut cur, mut other) = (grown(a, bsize), grown(b, bsize));
        fill(cur)?;
        for (k, &(slot, f)) in ops[..in_place_from].iter().enumerate() {
            let last = k + 1 == in_place_from;
            match f {
                1 | 2 | 32 | 33 => {
                    // Out of place; the last one writes straight into the output.
                    let target: &mut [u8] = if last { &mut *dst } else { &mut *other };
                    if f >= 32 {
                        // NDMEAN's cells hold their mean; both are scattered back alike.
                        filter::ndcell::uncell(
                            h.filters_meta[slot] as usize,
                            self.block_dims(),
                            ts,
                            cur,
                            target,
                        )
                        .map_err(|why| ChunkError::BadBlock {
                            block: j,
                            at: 0,
                            why: format!("filter {}: {why}", filter_name(f)),
                        })?;
                    } else if f == 1 {
                        let group = match h.filters_meta[slot] {
                            0 => ts,
                            g => g as usize,
                        };
                        filter::shuffle::unshuffle(group, cur, target);
                    } else {
                        filter::bitshuffle::bitunshuffle(ts, h.version <= 2, cur, target);
                    }
                    if !last {
                        std::mem::swap(&mut cur, &mut other);
                    }
                }
                _ => in_place(cur, slot, f)?,
            }
        }
        undo_rest(dst)
    }

    /// Concatenates the streams of block `j`, split as `split` says, into `raw` (the
    /// block's size; `spec/chunk.md` §5–6).
    fn decode_streams(&self, j: usize, split: StreamSplit, raw: &mut [u8]) -> ChunkResult<()> {
        let StreamSplit { ns, neblock, rem } = split;
        debug_assert_eq!(raw.len(), ns * neblock + rem, "the split is of this block");
        let mut pos = self.block_start(j)?;
        for s in 0..split.streams() {
            let len = if s < ns { neblock } else { rem };
            let out = &mut raw[s * neblock..s * neblock + len];
            let (stream, next) = self.stream_at(j, pos, len)?;
            match stream {
                Stream::Zeros => out.fill(0),
                Stream::Run(v) => out.fill(v),
                Stream::Raw(src) => out.copy_from_slice(src),
                Stream::Coded(src) => self.decode_stream(j, pos, src, out)?,
            }
            pos = next;
        }
        Ok(())
    }

    /// Where block `j`'s first stream starts (its `bstarts` entry).
    fn block_start(&self, j: usize) -> ChunkResult<usize> {
        Ok(read_i32(self.buf, self.header.header_len + 4 * j, "bstarts entry")? as usize)
    }

    /// The stream at `pos` of block `j`, which decodes to `len` bytes, and where the
    /// stream after it starts.
    #[inline(always)]
    fn stream_at(&self, j: usize, pos: usize, len: usize) -> ChunkResult<(Stream<'_>, usize)> {
        let csize = read_i32(self.buf, pos, "stream size")?;
        let body = pos + 4;
        let payload = |need: usize| {
            self.buf
                .get(body..body + need)
                .ok_or(ChunkError::Truncated {
                    what: "stream payload",
                    at: body,
                    need,
                    have: self.buf.len().saturating_sub(body),
                })
        };
        if csize > 0 {
            let csize = csize as usize;
            if csize == len {
                // Stored raw. The next stream starts `len` bytes on, a length known before
                // this size was read: with the branch predicted, the next size's load need
                // not wait for this one (`len`, not `csize`; float64 in 4 KiB blocks, six
                // planes of eight stored raw: +5 to +7 %).
                return Ok((Stream::Raw(payload(len)?), body + len));
            }
            return Ok((Stream::Coded(payload(csize)?), body + csize));
        }
        if !self.header.is_extended() {
            return Err(ChunkError::BadBlock {
                block: j,
                at: pos,
                why: format!("stream size {csize} in a Blosc1 chunk"),
            });
        }
        if csize == 0 {
            return Ok((Stream::Zeros, body));
        }
        let token = *self.buf.get(body).ok_or(ChunkError::Truncated {
            what: "run token",
            at: body,
            need: 1,
            have: 0,
        })?;
        if token & 1 == 0 || token & !1 != 0 || csize < -255 {
            return Err(ChunkError::BadBlock {
                block: j,
                at: pos,
                why: format!("invalid run stream (csize {csize}, token {token:#x})"),
            });
        }
        Ok((Stream::Run((-csize) as u8), body + 1))
    }

    /// The block shape [`Chunk::with_block_shape`] gave, C order; empty when none was.
    fn block_dims(&self) -> &[u64] {
        self.block_shape.as_ref().map_or(&[], BlockShape::dims)
    }

    /// What decoding this chunk's streams takes besides their bytes.
    fn stream_context(&self) -> codec::StreamContext<'_> {
        codec::StreamContext {
            dict: self.dict.as_ref(),
            shape: self.shape(),
            typesize: self.header.typesize as usize,
            block_shape: self.block_dims(),
        }
    }

    /// [`Chunk::decode_stream`] for a stream of `n` bytes into the start of `out`, whose
    /// bytes after the first `n` it may overwrite.
    fn decode_stream_room(
        &self,
        j: usize,
        at: usize,
        src: &[u8],
        out: &mut [u8],
        n: usize,
    ) -> ChunkResult<()> {
        let codec = self.codec.expect("parse sets the codec of block chunks");
        codec::decompress_stream_room(codec, src, out, n, &self.stream_context())
            .map_err(codec_error(j, at, codec))
    }

    /// Decodes the compressed stream `src` of block `j` into `out`; errors name chunk
    /// offset `at` (the stream's size word, or a VL block's payload).
    fn decode_stream(&self, j: usize, at: usize, src: &[u8], out: &mut [u8]) -> ChunkResult<()> {
        let codec = self.codec.expect("parse sets the codec of block chunks");
        codec::decompress_stream(codec, src, out, &self.stream_context())
            .map_err(codec_error(j, at, codec))
    }
}

/// The error for what `codec` reported on block `j`'s stream at chunk offset `at`.
fn codec_error(j: usize, at: usize, codec: Codec) -> impl FnOnce(String) -> ChunkError {
    move |why| ChunkError::Codec {
        block: j,
        at,
        codec: codec.name(),
        why,
    }
}

/// Fills `out` with quiet NaNs of `typesize` 4 or 8 (`spec/chunk.md` §9).
///
/// # Errors
/// Other typesizes, or a length that is not a multiple of the typesize.
pub fn fill_nan(typesize: usize, out: &mut [u8]) -> ChunkResult<()> {
    let pattern: &[u8] = match typesize {
        4 => &[0, 0, 0xC0, 0x7F],
        8 => &[0, 0, 0, 0, 0, 0, 0xF8, 0x7F],
        t => {
            return Err(ChunkError::BadHeader {
                field: "typesize",
                value: t as i64,
                why: "NaN chunks need typesize 4 or 8",
            });
        }
    };
    if !out.len().is_multiple_of(typesize) {
        return Err(ChunkError::BadHeader {
            field: "nbytes",
            value: out.len() as i64,
            why: "not a multiple of typesize",
        });
    }
    for piece in out.chunks_exact_mut(typesize) {
        piece.copy_from_slice(pattern);
    }
    Ok(())
}

/// Decodes a complete chunk held in `buf` with default limits.
///
/// # Errors
/// Any parsing or decoding error.
pub fn decode_chunk(buf: &[u8]) -> ChunkResult<Vec<u8>> {
    Chunk::parse(buf)?.decode(&DecodeLimits::default())
}

/// Seeded xorshift64 for the SIMD-vs-portable tests (reproducible random inputs).
#[cfg(test)]
pub(crate) fn xorshift(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

/// `n` bytes from [`xorshift`] (the low byte of each draw).
#[cfg(test)]
pub(crate) fn random_bytes(seed: &mut u64, n: usize) -> Vec<u8> {
    (0..n).map(|_| xorshift(seed) as u8).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Blosc2 chunk of 128 bytes in one block (header, bstarts and one stream byte)
    /// whose last filter slot holds `filter` with meta `fmeta`, written with user codec
    /// `udcodec` (meta `cmeta`) and `typesize`.
    fn chunk_with(filter: u8, fmeta: u8, udcodec: u8, cmeta: u8, typesize: u8) -> Vec<u8> {
        let mut b = vec![
            5,
            1,
            6 << 5 | 0x15,
            typesize,
            128,
            0,
            0,
            0,
            128,
            0,
            0,
            0,
            37,
            0,
            0,
            0,
        ];
        b.extend_from_slice(&[0, 0, 0, 0, 0, filter, udcodec, cmeta]);
        b.extend_from_slice(&[0, 0, 0, 0, 0, fmeta, 0, 0]);
        b.extend_from_slice(&[36, 0, 0, 0, 0]);
        b
    }

    /// Plugins and user-defined ids this crate does not decode are refused by name; the
    /// ones it decodes but that need the array's block shape say so when decoded alone.
    #[test]
    fn unknown_plugins_are_refused_by_name() {
        let refused = [
            (chunk_with(34, 0, 5, 0, 4), "bytedelta_buggy (plugin 34)"),
            (chunk_with(160, 0, 5, 0, 4), "user-defined filter 160"),
            (
                chunk_with(33, 0, 5, 0, 4),
                "ndmean (plugin 33) in pipeline slot 5 with cell side 0",
            ),
            (chunk_with(32, 128, 5, 0, 4), "cell side 128"),
            (chunk_with(0, 0, 36, 0, 4), "openhtj2k (plugin 36)"),
            (chunk_with(0, 0, 200, 0, 4), "user-defined codec 200"),
            (chunk_with(0, 0, 32, 5, 1), "ndlz with cells of side 5"),
            (chunk_with(0, 0, 33, 0, 2), "zfp_acc with typesize 2"),
        ];
        for (buf, want) in refused {
            let e = Chunk::parse(&buf).unwrap_err();
            assert!(
                matches!(e, ChunkError::Unsupported(ref m) if m.contains(want)),
                "{want}: {e}"
            );
        }
        for (buf, user) in [
            (chunk_with(33, 4, 5, 0, 4), "filter ndmean"),
            (chunk_with(32, 2, 5, 0, 4), "filter ndcell"),
            (chunk_with(0, 0, 35, 20, 4), "codec zfp_rate"),
        ] {
            let chunk = Chunk::parse(&buf).unwrap();
            let e = chunk.decode(&DecodeLimits::default()).unwrap_err();
            assert!(
                matches!(e, ChunkError::Unsupported(ref m)
                    if m.starts_with(user) && m.contains("block shape of the b2nd array")),
                "{user}: {e}"
            );
            // A block shape that does not make the block's 128 bytes is refused too.
            let e = chunk.with_block_shape(&[4, 4]).unwrap_err();
            assert!(e.to_string().contains("does not fill"), "{user}: {e}");
        }
    }

    /// A memcpyed chunk written by C-Blosc2, copied in pieces that do not divide it (the
    /// last one short) by 1–4 threads: the same bytes as one copy.
    #[test]
    fn stored_raw_chunks_are_copied_in_parallel_pieces() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/chunks/blosc1-lz4hc-s0-c5-f8.chunk"
        );
        let buf = std::fs::read(path).unwrap();
        let chunk = Chunk::parse(&buf).unwrap();
        assert!(chunk.header().is_memcpyed());
        let whole = chunk.decode(&DecodeLimits::default()).unwrap();
        assert!(whole.len() > 3000);
        for threads in 1..=4 {
            for piece in [1000, 4096, whole.len() - 1, whole.len(), 1 << 20] {
                let mut par = vec![0u8; whole.len()];
                chunk
                    .decode_into_parallel_with(&mut par, threads, piece)
                    .unwrap();
                assert!(par == whole, "{threads} threads, pieces of {piece}");
            }
        }
    }
}
