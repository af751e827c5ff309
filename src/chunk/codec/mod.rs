//! One decompressor per codec: `&[u8]` stream in, exactly `out.len()` bytes out.
//!
//! BloscLZ, LZ4 and zlib are ours (`blosclz.rs`, `lz4.rs`, `inflate/`, sharing
//! `copy_match`; `lz4/opening.rs` leaves the long literal runs that open an unsplit
//! shuffled LZ4 block in the chunk), and so are python-blosc2's plugins ZFP (`zfp.rs`)
//! and NDLZ (`ndlz.rs`); Zstd is the `zstd` crate. Stream forms:
//! `spec/codecs.md` §2.

pub mod blosclz;
pub mod inflate;
pub mod lz4;
pub mod ndlz;
pub mod zfp;

use super::header::Codec;
use std::cell::RefCell;
use std::sync::OnceLock;
use zstd::zstd_safe::{DCtx, DDict};

/// A chunk's dictionary (`spec/chunk.md` §7): its bytes, which LZ4 matches reach back
/// into, and for Zstd the digested form, made on first use and then shared by every
/// block of the chunk (digesting a dictionary costs more than decoding a small block:
/// done per block, a chunk of 128 blocks of 32 KiB decoded at a tenth of C-Blosc2's speed).
pub struct StreamDict<'a> {
    bytes: &'a [u8],
    zstd: OnceLock<Option<DDict<'static>>>,
}

impl<'a> StreamDict<'a> {
    /// The dictionary `bytes`, not yet digested.
    pub fn new(bytes: &'a [u8]) -> Self {
        StreamDict {
            bytes,
            zstd: OnceLock::new(),
        }
    }

    /// The dictionary's bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

impl Clone for StreamDict<'_> {
    /// The same bytes, digested again on first use by the clone.
    fn clone(&self) -> Self {
        StreamDict::new(self.bytes)
    }
}

impl std::fmt::Debug for StreamDict<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamDict")
            .field("len", &self.bytes.len())
            .field("zstd_digested", &self.zstd.get().is_some())
            .finish()
    }
}

/// What the bytes of a chunk's streams look like, known from its filters; LZ4 copies
/// matches the way that suits the shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamShape {
    /// Shuffled or bitshuffled byte planes (every typed column by default): mostly short
    /// matches at varying distances.
    Planes,
    /// Data in its own byte order (no shuffle filter): strings and records repeat as
    /// longer matches from further back.
    Natural,
}

impl StreamShape {
    /// The shape of streams that the filter pipeline `filters` (the header's six slots)
    /// is undone on: planes when it shuffles or bitshuffles.
    pub fn of_filters(filters: &[u8; 6]) -> Self {
        if filters.iter().any(|&f| f == 1 || f == 2) {
            StreamShape::Planes
        } else {
            StreamShape::Natural
        }
    }
}

/// What decoding one of a chunk's streams takes besides its bytes.
#[derive(Debug, Clone, Copy)]
pub struct StreamContext<'a> {
    /// The chunk's dictionary (`spec/chunk.md` §7), if it has one.
    pub dict: Option<&'a StreamDict<'a>>,
    /// What the stream decodes to. It only picks how LZ4 copies matches: any shape
    /// decodes any stream to the same bytes.
    pub shape: StreamShape,
    /// The chunk's typesize (ZFP's float width).
    pub typesize: usize,
    /// The b2nd array's block shape, C order, which ZFP streams are fields of; empty when
    /// not known.
    pub block_shape: &'a [u64],
}

/// Decompresses one stream of `codec` into `out` (exact size), with what `cx` gives.
///
/// # Errors
/// A message saying what the codec reported.
pub fn decompress_stream(
    codec: Codec,
    src: &[u8],
    out: &mut [u8],
    cx: &StreamContext,
) -> Result<(), String> {
    let dict = cx.dict;
    match codec {
        Codec::BloscLz => {
            if dict.is_some() {
                return Err("blosclz does not use dictionaries".into());
            }
            blosclz::decompress_into(src, out)
                .map_err(|e| format!("{} (input offset {})", e.why, e.at))
        }
        Codec::Lz4 => {
            let dict = dict.map_or(&[][..], StreamDict::bytes);
            match cx.shape {
                StreamShape::Planes => lz4::decompress_into(src, out, dict),
                StreamShape::Natural => lz4::decompress_natural_into(src, out, dict),
            }
            .map_err(lz4_message)
        }
        Codec::Zlib => inflate::zlib_decompress_into(src, out)
            .map_err(|e| format!("zlib: {} (input offset {})", e.why, e.at)),
        Codec::Zstd => zstd_decompress(src, out, dict),
        Codec::Snappy => Err("snappy streams are not supported (Blosc1-only codec)".into()),
        Codec::Zfp(mode) => zfp::decompress_into(src, out, mode, cx.typesize, cx.block_shape),
        Codec::Ndlz(side) => ndlz::decompress_into(src, out, side),
    }
}

/// [`decompress_stream`] for a stream of `n` bytes into the start of `out`, whose bytes
/// after the first `n` the decoder may overwrite (LZ4 then keeps its fixed-size copies up
/// to the stream's end).
///
/// # Errors
/// As [`decompress_stream`].
pub fn decompress_stream_room(
    codec: Codec,
    src: &[u8],
    out: &mut [u8],
    n: usize,
    cx: &StreamContext,
) -> Result<(), String> {
    match (codec, cx.shape) {
        (Codec::Lz4, StreamShape::Planes) => {
            let dict = cx.dict.map_or(&[][..], StreamDict::bytes);
            lz4::decompress_into_room(src, out, n, dict).map_err(lz4_message)
        }
        _ => {
            let out = out
                .get_mut(..n)
                .ok_or("output shorter than the stream's size")?;
            decompress_stream(codec, src, out, cx)
        }
    }
}

/// [`decompress_stream`] for an LZ4 stream of byte planes without a dictionary, its
/// opening's long literal runs left in `src` ([`lz4::opening`]): the returned runs say
/// which output bytes are still there.
///
/// # Errors
/// As [`decompress_stream`].
pub fn decompress_lz4_leaving_opening(
    src: &[u8],
    out: &mut [u8],
) -> Result<lz4::opening::OpeningRuns, String> {
    lz4::opening::decompress_leaving_opening(src, out).map_err(lz4_message)
}

/// What an LZ4 error says, with its input offset.
fn lz4_message(e: lz4::Lz4Error) -> String {
    format!("lz4: {} (input offset {})", e.why, e.at)
}

/// Copies an LZ77 match: `len` bytes at `op` from `dist` bytes back, where the source may
/// overlap the destination (a period-`dist` pattern repeats). The caller has checked
/// `1 <= dist <= op` and `op + len <= out.len()`.
///
/// Short matches are copied in fixed 8- or 16-byte pieces (a piece may write past
/// `op + len` when the buffer has room; later sequences overwrite those bytes), periods up
/// to 8 by storing their pattern ([`copy_short_period`]) when there is room, long
/// overlapping ones by doubling the pattern with `copy_within`.
#[inline(always)]
pub(crate) fn copy_match(out: &mut [u8], op: usize, dist: usize, len: usize) {
    debug_assert!(dist >= 1 && dist <= op && op + len <= out.len());
    let from = op - dist;
    if dist >= 8 && len <= 16 && out.len() - op >= 16 {
        // One or two 8-byte pieces; each reads only final bytes since dist >= 8.
        let w: [u8; 8] = out[from..from + 8].try_into().expect("8 bytes");
        out[op..op + 8].copy_from_slice(&w);
        if len > 8 {
            let w: [u8; 8] = out[from + 8..from + 16].try_into().expect("8 bytes");
            out[op + 8..op + 16].copy_from_slice(&w);
        }
    } else if dist <= 8 && out.len() - op - len >= 16 && len <= 256 && (dist > 1 || len <= 64) {
        // (A one-byte period over 64 bytes is a `fill` below, anything over 256 a doubling.)
        copy_short_period(out, op, dist, len);
    } else if dist >= len {
        out.copy_within(from..from + len, op);
    } else if len > 64 {
        if dist == 1 {
            let v = out[from];
            out[op..op + len].fill(v);
        } else {
            // The pattern so far is copied onto its end, doubling each step.
            let mut done = 0;
            while done < len {
                let step = (op + done - from).min(len - done);
                out.copy_within(from..from + step, op + done);
                done += step;
            }
        }
    } else {
        // A period shorter than 8 is widened to a multiple of itself, `d >= 8`: its first
        // `d - dist` bytes are copied one by one, then each 8-byte piece reads `d` back,
        // from bytes already final.
        let d = dist * 8usize.div_ceil(dist);
        let mut i = 0;
        while i < (d - dist).min(len) {
            out[op + i] = out[from + i];
            i += 1;
        }
        while i < len {
            let (src, dst) = (op + i - d, op + i);
            if out.len() - dst >= 8 {
                let w: [u8; 8] = out[src..src + 8].try_into().expect("8 bytes");
                out[dst..dst + 8].copy_from_slice(&w);
                i += 8;
            } else {
                out[dst] = out[src];
                i += 1;
            }
        }
    }
}

/// Copies `src` (at most 32 bytes) to `dst`, of the same length, in at most two fixed-size
/// pieces that overlap in the middle: no `memcpy` call, and no room needed past either
/// end. The short literal runs near a stream's end take this (BloscLZ planes of 42 bytes,
/// where every run after the first ten bytes lacked the room for a 32-byte copy).
#[inline(always)]
pub(crate) fn copy_upto32(dst: &mut [u8], src: &[u8]) {
    let k = src.len();
    debug_assert!(k == dst.len() && k <= 32);
    if k >= 16 {
        dst[..16].copy_from_slice(&src[..16]);
        dst[k - 16..].copy_from_slice(&src[k - 16..]);
    } else if k >= 8 {
        dst[..8].copy_from_slice(&src[..8]);
        dst[k - 8..].copy_from_slice(&src[k - 8..]);
    } else if k >= 4 {
        dst[..4].copy_from_slice(&src[..4]);
        dst[k - 4..].copy_from_slice(&src[k - 4..]);
    } else if k > 0 {
        dst[0] = src[0];
        dst[k / 2] = src[k / 2];
        dst[k - 1] = src[k - 1];
    }
}

/// Copies the 8 bytes at `m[k..]` to `m[dist + k..]`. The caller cuts `m` to start at
/// the match's source and to be exactly `dist + 8 * pieces` long, so the compiler can see
/// that every piece is in bounds and drops the checks (LZ4's fast path: 20–24 % faster on
/// short-match streams than with a check per piece).
#[inline(always)]
pub(crate) fn copy_piece(m: &mut [u8], dist: usize, k: usize) {
    let w: [u8; 8] = m[k..k + 8].try_into().expect("8 bytes");
    m[dist + k..dist + k + 8].copy_from_slice(&w);
}

/// Copies the 16 bytes at `k` of `m` to `k + dist`.
#[inline(always)]
pub(crate) fn copy16(m: &mut [u8], dist: usize, k: usize) {
    let w: [u8; 16] = m[k..k + 16].try_into().expect("16 bytes");
    m[dist + k..dist + k + 16].copy_from_slice(&w);
}

/// A match of `len` bytes from `dist >= 16` back in 16-byte pieces, each reading only
/// final bytes; `m` starts at the match's source and holds `dist + len + 16` bytes.
#[inline(always)]
pub(crate) fn copy_run16(m: &mut [u8], dist: usize, len: usize) {
    let mut k = 0;
    while k < len {
        copy16(m, dist, k);
        k += 16;
    }
}

/// Per period `p` below 9, a multiplier with a 1 at every multiple of `p` below 8 bytes: a
/// pattern of `p` bytes times it repeats the pattern over a word (the copies do not overlap,
/// so no carries).
pub(crate) const REPEAT: [u64; 9] = [
    0,
    0x0101_0101_0101_0101,
    0x0001_0001_0001_0001,
    0x0001_0000_0100_0001,
    0x0000_0001_0000_0001,
    0x0000_0100_0000_0001,
    0x0001_0000_0000_0001,
    0x0100_0000_0000_0001,
    0x0000_0000_0000_0001,
];

/// The 8 bytes after `before` (the 8 bytes ending where a match starts, little-endian)
/// when the match repeats its last `dist` bytes (1–8): those bytes times [`REPEAT`].
#[inline(always)]
pub(crate) fn period_word(before: u64, dist: usize) -> u64 {
    (before >> (64 - 8 * dist)).wrapping_mul(REPEAT[dist])
}

/// [`copy_match`] for a period of at most 8 and at most 256 bytes, when the output has 16
/// bytes of room past the match (`op + len + 16 <= out.len()`), so whole pieces may write
/// up to 15 bytes past `op + len` (scratch that later sequences overwrite).
///
/// A period dividing 8 becomes one 16-byte pattern stored over the match: no loads, and no
/// `memmove` calls (doubling a 2-byte period over 200 bytes takes 7). Other periods write
/// one 8-byte word of their pattern, then copy 8-byte pieces from `d` back, the least
/// multiple of the period that is at least 8, so each piece reads only final bytes.
#[inline(never)]
pub(crate) fn copy_short_period(out: &mut [u8], op: usize, dist: usize, len: usize) {
    debug_assert!((1..=8).contains(&dist) && dist <= op && op + len + 16 <= out.len());
    let from = op - dist;
    if matches!(dist, 1 | 2 | 4 | 8) {
        // The period's bytes loaded at their own width, so that the load lies within
        // the last store that wrote them (a wider one spanning two stores waits for them).
        let unit = match dist {
            1 => u64::from(out[from]),
            2 => u64::from(u16::from_le_bytes([out[from], out[from + 1]])),
            4 => u64::from(u32::from_le_bytes(
                out[from..op].try_into().expect("4 bytes"),
            )),
            _ => u64::from_le_bytes(out[from..op].try_into().expect("8 bytes")),
        };
        let word = unit.wrapping_mul(REPEAT[dist]).to_le_bytes();
        let mut p16 = [0u8; 16];
        p16[..8].copy_from_slice(&word);
        p16[8..].copy_from_slice(&word);
        // Cut once: `op + len + 16 <= out.len()` leaves room for whole pieces.
        for piece in out[op..op + len.next_multiple_of(16)].chunks_exact_mut(16) {
            piece.copy_from_slice(&p16);
        }
        return;
    }
    // The first `dist` bytes repeated over a word; `from + 8 <= op + 8` is in bounds.
    let w = u64::from_le_bytes(out[from..from + 8].try_into().expect("8 bytes"));
    let mut word = (w & (u64::MAX >> (64 - 8 * dist))).wrapping_mul(REPEAT[dist]);
    // Each next word from the one before, in registers: loading it from `d` back would
    // span two of the stores just made, and wait for them.
    for piece in out[op..op + len.next_multiple_of(8)].chunks_exact_mut(8) {
        piece.copy_from_slice(&word.to_le_bytes());
        word = period_word(word, dist);
    }
}

/// One decompression context per thread, reused by every stream.
fn zstd_decompress(src: &[u8], out: &mut [u8], dict: Option<&StreamDict>) -> Result<(), String> {
    thread_local! {
        static ZSTD: RefCell<Option<DCtx<'static>>> = const { RefCell::new(None) };
    }
    let ddict = match dict {
        None => None,
        Some(d) => Some(
            d.zstd
                .get_or_init(|| DDict::try_create(d.bytes))
                .as_ref()
                .ok_or("zstd could not load the chunk's dictionary")?,
        ),
    };
    let n = ZSTD.with(|cell| -> Result<usize, String> {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(DCtx::try_create().ok_or("zstd could not create a context")?);
        }
        let dctx = slot.as_mut().expect("zstd context was just created");
        let done = match ddict {
            Some(dd) => dctx.decompress_using_ddict(out, src, dd),
            None => dctx.decompress(out, src),
        };
        done.map_err(|code| zstd::zstd_safe::get_error_name(code).to_string())
    })?;
    if n != out.len() {
        return Err(format!("produced {n} bytes, expected {}", out.len()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{copy_match, copy_upto32};

    /// Every length `copy_upto32` takes, at several offsets: exactly the source's bytes, and
    /// nothing written outside the destination.
    #[test]
    fn copy_upto32_copies_exactly_its_bytes() {
        let mut seed = 3u64;
        let src = crate::chunk::random_bytes(&mut seed, 64);
        for k in 0..=32 {
            for at in [0, 1, 7, 16] {
                let mut buf = [0xAAu8; 80];
                copy_upto32(&mut buf[at..at + k], &src[at..at + k]);
                assert_eq!(buf[at..at + k], src[at..at + k], "len {k} at {at}");
                assert!(buf[..at].iter().all(|&b| b == 0xAA), "len {k} at {at}");
                assert!(buf[at + k..].iter().all(|&b| b == 0xAA), "len {k} at {at}");
            }
        }
    }

    /// Every branch of `copy_match` (piece sizes, period patterns, doubling, buffer ends
    /// with and without room for a whole piece) against the byte-at-a-time definition.
    #[test]
    fn copy_match_is_the_byte_loop() {
        let mut seed = 7u64;
        let prefix = crate::chunk::random_bytes(&mut seed, 100);
        for dist in 1..=80 {
            for len in (1..=150).chain([255, 256, 257, 1000]) {
                for slack in [0, 1, 7, 8, 15, 16, 40] {
                    let op = 100;
                    let mut want = prefix.clone();
                    want.resize(op + len + slack, 0xAA);
                    let mut got = want.clone();
                    for i in 0..len {
                        want[op + i] = want[op + i - dist];
                    }
                    copy_match(&mut got, op, dist, len);
                    assert_eq!(
                        got[..op + len],
                        want[..op + len],
                        "dist {dist} len {len} slack {slack}"
                    );
                }
            }
        }
    }
}
