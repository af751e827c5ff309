//! LZ4 block decoder (the public LZ4 block format; `spec/codecs.md` §2), for LZ4 and
//! LZ4HC streams, with or without a chunk dictionary.
//!
//! Ours rather than `lz4_flex`'s because Blosc2's shuffled and bitshuffled streams are
//! dominated by long matches at short distances, which `lz4_flex`'s safe decoder copies
//! a byte at a time (0.3–0.7× C-Blosc2 on those chunks, see `benches/README.md`). Matches
//! are copied by `copy_match`, shared with BloscLZ. `lz4_flex` stays the oracle
//! the tests compare against. Safe code only: every read and write is bounds-checked, and
//! literal runs of up to 64 bytes use one fixed 16- or 64-byte copy when both buffers have
//! room for it.
//!
//! The short matches of a sequence are copied one of two ways, picked per chunk by its
//! [`StreamShape`]. Byte planes (shuffled data) copy 8-byte pieces, as many as the length
//! needs, unless the thread's recent plane streams had many 9–18-byte matches
//! (`WideHint`: planes of strings under LZ4HC, the mantissa planes of float64): those copy
//! two pieces whatever the length whenever the match starts at least 8 bytes back, with no
//! branch on the length or the distance. Natural data (no shuffle) copies one 16-byte
//! piece whenever the match starts at least 16 bytes back: its matches are 8–16 bytes long
//! at any length in between, so deciding on the length there mispredicts on about one
//! sequence in four (+25–40 % on unfiltered strings, `benches/README.md`), while on most
//! planes, whose matches are mostly 4–5 bytes, the wider copy measured 2–10 % slower.
//! Matches of at most 8 bytes with a period below 8 store their pattern as one word
//! (`period_word`), inline. Long matches of natural data are decoded after the
//! literal-run length, 19–48 bytes as two or three fixed 16-byte pieces; those of byte
//! planes go through `long_match`.
//!
//! Measure changes here over several code placements (`benches/README.md`, session 18):
//! the same machine code at another address runs up to 5 % apart.
//!
//! [`opening`] decodes the long literal runs that open a stream without copying them, and
//! the rest with this decoder.

pub mod opening;

#[cfg(doc)]
use super::StreamShape;
use super::{copy_run16, copy16};
use std::cell::Cell;

/// Why an LZ4 stream is invalid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lz4Error {
    /// Input offset where decoding failed.
    pub at: usize,
    /// What was wrong.
    pub why: &'static str,
}

fn err<T>(at: usize, why: &'static str) -> Result<T, Lz4Error> {
    Err(Lz4Error { at, why })
}

/// Reads the 255-continued extension of a length whose nibble was 15.
#[inline(always)]
fn extra_len(src: &[u8], ip: &mut usize) -> Result<usize, Lz4Error> {
    let mut n = 0usize;
    loop {
        let Some(&b) = src.get(*ip) else {
            return err(*ip, "length runs past the input");
        };
        *ip += 1;
        n += b as usize;
        if b != 255 {
            return Ok(n);
        }
    }
}

/// Decodes the LZ4 block `src` into `out`, which it must fill exactly. `dict` is the
/// data that precedes the output (empty when the chunk has no dictionary): matches may
/// reach back into it.
///
/// How it copies matches follows the streams this thread decoded before (`WideHint`);
/// the bytes it writes do not.
///
/// # Errors
/// A stream that reads past its end, has a zero offset, refers before the dictionary, or
/// produces more or fewer bytes than `out.len()`.
pub fn decompress_into(src: &[u8], out: &mut [u8], dict: &[u8]) -> Result<(), Lz4Error> {
    decompress_counted(src, out, out.len(), dict, out.len())
}

/// [`decompress_into`] for a stream of `n` bytes into the start of `out`, whose bytes
/// after the first `n` are scratch the decoder may overwrite: sequences near the stream's
/// end keep the fixed-size copies.
///
/// # Errors
/// As [`decompress_into`].
pub fn decompress_into_room(
    src: &[u8],
    out: &mut [u8],
    n: usize,
    dict: &[u8],
) -> Result<(), Lz4Error> {
    debug_assert!(n <= out.len());
    decompress_counted(src, out, n, dict, n)
}

/// [`decompress_into`] for the part of a stream after `counted - out.len()` output bytes
/// decoded otherwise ([`opening`]): `WideHint` counts its matches over all `counted`.
fn decompress_counted(
    src: &[u8],
    out: &mut [u8],
    n: usize,
    dict: &[u8],
    counted: usize,
) -> Result<(), Lz4Error> {
    WIDE_HINT.with(|hint| {
        let h = hint.get();
        if h.wide() || h.age >= 15 {
            let at = decode::<false, true>(src, out, n, dict)?;
            hint.set(WideHint {
                long: h.long / 2 + at.long,
                near: h.near / 2 + at.near,
                bytes: h.bytes / 2 + counted,
                age: 0,
            });
        } else {
            decode::<false, false>(src, out, n, dict)?;
            hint.set(WideHint {
                age: h.age + 1,
                ..h
            });
        }
        Ok(())
    })
}

/// Whether a thread copies the matches of byte-plane streams from 8 or more back as two
/// 8-byte pieces whatever their length (`WIDE` in [`decode`]). The pieces have no branch
/// on the match length or distance to mispredict, but cost streams of 4–8-byte matches
/// 2–6 % (`benches/README.md`, sessions 19 and 24). Wide decoding counts the 9–18-byte
/// matches, and the matches from 8–15 back, over the streams decoded wide lately (each
/// stream halving the weight of those before). It stays on with more than one 9–18-byte
/// match per KiB of output and under a quarter as many from 8–15 back (planes of strings
/// under LZ4HC: about two per KiB, nearly all from far back), or with more than five per
/// KiB whatever their distance (the mantissa planes of float64 random walks: about seven,
/// a fifth of all their matches from 8–15 back; +7 to +26 % in 4–64 KiB blocks). Planes
/// with four per KiB and many from 8–15 back (`smooth-f8-lz4-shuffle`) ran 4–6 % slower
/// wide (`benches/README.md`, session 24). Otherwise every 16th stream is decoded wide to
/// look again. The choice changes only speed: both copies write the same bytes.
#[derive(Debug, Clone, Copy)]
struct WideHint {
    /// 9–18-byte matches from 8 or more back counted, decayed.
    long: usize,
    /// Matches of at most 18 bytes from 8–15 back counted, decayed.
    near: usize,
    /// Output bytes they were counted over, decayed.
    bytes: usize,
    /// Streams decoded with 8-byte pieces since the last wide one.
    age: u32,
}

impl WideHint {
    /// Whether the counts call for wide decoding: over one 9–18-byte match per KiB and
    /// under a quarter as many near ones, or over five per KiB.
    fn wide(self) -> bool {
        let per_kib = |k: usize| self.long.saturating_mul(1024) > k.saturating_mul(self.bytes);
        (per_kib(1) && self.near.saturating_mul(4) < self.long) || per_kib(5)
    }
}

thread_local! {
    static WIDE_HINT: Cell<WideHint> = const {
        Cell::new(WideHint {
            long: 0,
            near: 0,
            bytes: 0,
            age: 0,
        })
    };
}

/// [`decompress_into`] for a stream of [`StreamShape::Natural`] data: the same bytes,
/// with the match copy that suits that shape (see the module docs).
///
/// # Errors
/// As [`decompress_into`].
pub fn decompress_natural_into(src: &[u8], out: &mut [u8], dict: &[u8]) -> Result<(), Lz4Error> {
    decode::<true, false>(src, out, out.len(), dict).map(|_| ())
}

/// The decoder, with the match copy for natural data (`NATURAL`) or for byte planes, whose
/// matches from 8 or more back are two 8-byte pieces whatever their length when `WIDE`,
/// else as many 8-byte pieces as their length needs.
fn decode<const NATURAL: bool, const WIDE: bool>(
    src: &[u8],
    out: &mut [u8],
    n: usize,
    dict: &[u8],
) -> Result<Cursor, Lz4Error> {
    let mut at = Cursor::default();
    while !step::<NATURAL, WIDE>(src, out, dict, &mut at)? {}
    at.finished(n)?;
    Ok(at)
}

/// Where a stream's decoding stands: the next input byte and the next output byte; when
/// byte planes are decoded wide, also how many of the common path's matches from 8 or
/// more back were over 8 bytes (`long`) and how many came from 8–15 back (`near`), for
/// [`WideHint`].
#[derive(Debug, Default, Clone, Copy)]
struct Cursor {
    ip: usize,
    op: usize,
    long: usize,
    near: usize,
}

impl Cursor {
    /// After the last literal run: the output must be exactly `n` bytes (a decoder given
    /// room after them may have gone past).
    fn finished(self, n: usize) -> Result<(), Lz4Error> {
        if self.op < n {
            return err(self.ip, "stream ended before the expected size");
        }
        if self.op > n {
            return err(self.ip, "stream runs past the expected size");
        }
        Ok(())
    }
}

/// Decodes one sequence at `at` and moves it on; true once the stream's last literal run
/// has been copied.
#[inline(always)]
fn step<const NATURAL: bool, const WIDE: bool>(
    src: &[u8],
    out: &mut [u8],
    dict: &[u8],
    at: &mut Cursor,
) -> Result<bool, Lz4Error> {
    let n = out.len();
    let Cursor { mut ip, mut op, .. } = *at;
    let Some(&token) = src.get(ip) else {
        return err(ip, "stream ended before its last literal run");
    };
    ip += 1;
    // The common sequence: literals and match length fit the token, and both buffers
    // have room for a 16-byte literal copy, then (after at most 14 literals) a match
    // copied in 24 bytes: 14 + 24 = 38. Bytes written past the sequence's end are
    // scratch that later sequences overwrite.
    if token < 0xF0
        && token & 15 != 15
        && let Some(s) = src.get(ip..ip + 18)
        && let Some(w) = out.get_mut(op..op + 38)
    {
        // Fixed-size views: the literal copy and the offset read need no checks.
        let s: &[u8; 18] = s.try_into().expect("18 bytes");
        let w: &mut [u8; 38] = w.try_into().expect("38 bytes");
        let lit = (token >> 4) as usize;
        w[..16].copy_from_slice(&s[..16]);
        let dist = u16::from_le_bytes(s[lit..lit + 2].try_into().expect("2 bytes")) as usize;
        ip += lit + 2;
        op += lit;
        let len = (token & 15) as usize + 4;
        if WIDE && dist >= 8 && dist <= op {
            // Two 8-byte pieces whatever the length (a third for 17–18 bytes): no branch
            // on the length or on the distance to mispredict. Each reads only final bytes
            // since dist >= 8; the view is exactly `dist + 24` bytes.
            let m = &mut out[op - dist..][..dist + 24];
            super::copy_piece(m, dist, 0);
            super::copy_piece(m, dist, 8);
            if len > 16 {
                super::copy_piece(m, dist, 16);
            }
            op += len;
            let long = at.long + usize::from(len > 8);
            let near = at.near + usize::from(dist < 16);
            *at = Cursor { ip, op, long, near };
            return Ok(false);
        }
        if NATURAL && dist >= 16 && dist <= op {
            // One 16-byte piece reading only final bytes; a third piece for the rare
            // 17- and 18-byte matches. The view ends where the 24 bytes of room do.
            let m = &mut out[op - dist..op + 24];
            copy16(m, dist, 0);
            if len > 16 {
                super::copy_piece(m, dist, 16);
            }
            op += len;
            *at = Cursor { ip, op, ..*at };
            return Ok(false);
        }
        if dist >= 8 && dist <= op {
            // 8-byte pieces (at most 3: len <= 18); each reads only final bytes since
            // dist >= 8. Small loads are forwarded from the recent small stores. The
            // view is cut to exactly `dist + 24` bytes, so no piece needs a check.
            copy_pieces8(&mut out[op - dist..][..dist + 24], dist, len);
            op += len;
            *at = Cursor { ip, op, ..*at };
            return Ok(false);
        }
        if dist < 8 && dist != 0 && len <= 8 && op >= 8 {
            // A period below 8 over at most 8 bytes (doubled letters, short runs): the
            // last `dist` bytes before `op`, already final, repeated over one word by a
            // multiplication and stored whole (`op + 8` is within the 38 bytes of room).
            // Through `copy_any` and its out-of-line `copy_short_period`, such sequences
            // cost unfiltered strings 5 % (`benches/README.md`, session 18).
            let m = &mut out[op - 8..op + 8];
            let before = u64::from_le_bytes(m[..8].try_into().expect("8 bytes"));
            m[8..].copy_from_slice(&super::period_word(before, dist).to_le_bytes());
            op += len;
            *at = Cursor { ip, op, ..*at };
            return Ok(false);
        }
        if NATURAL && dist < 8 && dist != 0 && op >= 8 {
            // Natural data: the same for 9–18 bytes in three words, each the period
            // repeated from where the one before ends (`op + 24` is within the room).
            // Unfiltered `<U8` strings under LZ4 are 5 % such sequences (zero padding at
            // period 2), which went through `copy_any`: +2.3 % there. In the byte-plane
            // decoder the same block cost noise-f4-lz4-shuffle 9 % (register allocation).
            let m = &mut out[op - 8..op + 24];
            let before = u64::from_le_bytes(m[..8].try_into().expect("8 bytes"));
            let first = super::period_word(before, dist);
            m[8..16].copy_from_slice(&first.to_le_bytes());
            let second = super::period_word(first, dist);
            m[16..24].copy_from_slice(&second.to_le_bytes());
            m[24..].copy_from_slice(&super::period_word(second, dist).to_le_bytes());
            op += len;
            *at = Cursor { ip, op, ..*at };
            return Ok(false);
        }
        if dist == 0 {
            return err(ip - 2, "zero match offset");
        }
        op = copy_any(out, op, dist, len, dict, ip)?;
        *at = Cursor { ip, op, ..*at };
        return Ok(false);
    }
    if !NATURAL
        && token < 0xF0
        && token & 15 == 15
        && let Some(s) = src.get(ip..ip + 18)
        && let Some(w) = out.get_mut(op..op + 16)
    {
        // Byte planes: a long match after at most 14 literals, the literals in one
        // 16-byte copy, the match by `long_match`. (Natural data takes the long-match
        // path below instead; here, that path cost the shuffled rows 3–6 %.)
        let s: &[u8; 18] = s.try_into().expect("18 bytes");
        let lit = (token >> 4) as usize;
        w.copy_from_slice(&s[..16]);
        let dist = u16::from_le_bytes([s[lit], s[lit + 1]]) as usize;
        ip += lit + 2;
        op += lit;
        op = long_match(src, &mut ip, out, op, dist, dict)?;
        *at = Cursor { ip, op, ..*at };
        return Ok(false);
    }
    let mut lit = (token >> 4) as usize;
    if lit == 15 {
        lit += extra_len(src, &mut ip)?;
    }
    if NATURAL
        && lit <= 64
        && token & 15 == 15
        && let Some(s) = src.get(ip..ip + 67)
        && let Some(w) = out.get_mut(op..op + 64)
    {
        // Natural data: a long match (LZ4HC writes many of 19–48 bytes over strings)
        // after a literal run of at most 64 bytes, starting at least 16 bytes back, its
        // length in one extension byte: the run in one 64-byte copy, the match in two or
        // three 16-byte pieces from a fixed-size view when it is at most 48 bytes, else
        // in a loop of them. Anything else falls through to the checked code below,
        // which starts over. Half the instructions of `long_match` per 19–48-byte match
        // (`benches/README.md`, session 18).
        let s: &[u8; 67] = s.try_into().expect("67 bytes");
        w.copy_from_slice(&s[..64]);
        let dist = u16::from_le_bytes([s[lit], s[lit + 1]]) as usize;
        let e = s[lit + 2] as usize;
        let o = op + lit;
        if e <= 29
            && dist >= 16
            && dist <= o
            && let Some(m) = out.get_mut(o - dist..).and_then(|t| t.get_mut(..dist + 48))
        {
            copy16(m, dist, 0);
            copy16(m, dist, 16);
            if e > 13 {
                copy16(m, dist, 32);
            }
            *at = Cursor {
                ip: ip + lit + 3,
                op: o + 19 + e,
                ..*at
            };
            return Ok(false);
        }
        let len = 19 + e;
        if e < 255
            && dist >= 16
            && dist <= o
            && let Some(m) = out
                .get_mut(o - dist..)
                .and_then(|t| t.get_mut(..dist + len + 16))
        {
            copy_run16(m, dist, len);
            *at = Cursor {
                ip: ip + lit + 3,
                op: o + len,
                ..*at
            };
            return Ok(false);
        }
    }
    if lit <= 64
        && token & 15 != 15
        && let Some(s) = src.get(ip..ip + 66)
        && let Some(w) = out.get_mut(op..op + 88)
    {
        // A literal run of 15–64 bytes (the length took an extension byte) and a match
        // of at most 18 bytes: the run in one 64-byte copy, the match in 8-byte pieces
        // when it starts at least 8 bytes back, from fixed-size views (no check left
        // inside). Unfiltered float64 under LZ4HC is 18 % such sequences: +4 % there,
        // measured over four code placements.
        // Anything else falls through to the checked code below, which starts over.
        let s: &[u8; 66] = s.try_into().expect("66 bytes");
        w[..64].copy_from_slice(&s[..64]);
        let dist = u16::from_le_bytes([s[lit], s[lit + 1]]) as usize;
        let len = (token & 15) as usize + 4;
        let o = op + lit;
        if dist >= 8
            && dist <= o
            && let Some(m) = out.get_mut(o - dist..).and_then(|t| t.get_mut(..dist + 24))
        {
            copy_pieces8(m, dist, len);
            *at = Cursor {
                ip: ip + lit + 2,
                op: o + len,
                ..*at
            };
            return Ok(false);
        }
    }
    if lit > src.len() - ip {
        return err(ip, "literal run past the input");
    }
    if lit > n - op {
        return err(ip, "literal run overruns the output");
    }
    if lit <= 64 && src.len() - ip >= 64 && n - op >= 64 {
        // One fixed 64-byte copy: cheaper than a `memcpy` call for the 15–64-byte
        // runs that LZ4HC writes between short matches in unfiltered data.
        out[op..op + 64].copy_from_slice(&src[ip..ip + 64]);
    } else {
        out[op..op + lit].copy_from_slice(&src[ip..ip + lit]);
    }
    ip += lit;
    op += lit;
    if ip == src.len() {
        *at = Cursor { ip, op, ..*at };
        return Ok(true);
    }
    let (Some(&d0), Some(&d1)) = (src.get(ip), src.get(ip + 1)) else {
        return err(ip, "match offset runs past the input");
    };
    ip += 2;
    let dist = u16::from_le_bytes([d0, d1]) as usize;
    if dist == 0 {
        return err(ip - 2, "zero match offset");
    }
    let mut len = (token & 15) as usize + 4;
    if len == 19 {
        len += extra_len(src, &mut ip)?;
    }
    if len > n - op {
        return err(ip, "match overruns the output");
    }
    op = copy_any(out, op, dist, len, dict, ip)?;
    *at = Cursor { ip, op, ..*at };
    Ok(false)
}

/// A match of at most 18 bytes from `dist >= 8` back in as many 8-byte pieces as it needs,
/// each reading only final bytes; `m` starts at the match's source and is exactly
/// `dist + 24` bytes long, so the compiler sees every piece in bounds.
#[inline(always)]
fn copy_pieces8(m: &mut [u8], dist: usize, len: usize) {
    super::copy_piece(m, dist, 0);
    if len > 8 {
        super::copy_piece(m, dist, 8);
        if len > 16 {
            super::copy_piece(m, dist, 16);
        }
    }
}

/// The match of a sequence whose token's match nibble is 15, at `op` from `dist` back,
/// with `ip` on its length's first extension byte; returns the new output position. A
/// match starting at least 16 bytes back with 16 bytes of room past its end is copied in
/// 16-byte pieces, each reading only final bytes.
#[inline(always)]
fn long_match(
    src: &[u8],
    ip: &mut usize,
    out: &mut [u8],
    op: usize,
    dist: usize,
    dict: &[u8],
) -> Result<usize, Lz4Error> {
    let offset_at = *ip - 2;
    let len = 19 + extra_len(src, ip)?;
    let n = out.len();
    if len > n - op {
        return err(*ip, "match overruns the output");
    }
    if dist >= 16 && dist <= op && len + 16 <= n - op {
        copy_run16(&mut out[op - dist..op + len + 16], dist, len);
        return Ok(op + len);
    }
    if dist == 0 {
        return err(offset_at, "zero match offset");
    }
    copy_any(out, op, dist, len, dict, *ip)
}

/// Copies a match of `len` bytes at `op` from `dist` (>= 1) bytes back, where the start
/// may lie in `dict` (the data before the output); returns the new output position. The
/// caller has checked `op + len <= out.len()`.
#[inline(always)]
fn copy_any(
    out: &mut [u8],
    op: usize,
    dist: usize,
    len: usize,
    dict: &[u8],
    ip: usize,
) -> Result<usize, Lz4Error> {
    if dist <= op {
        super::copy_match(out, op, dist, len);
    } else {
        // Starts in the dictionary, and continues from the output's first byte.
        let back = dist - op;
        if back > dict.len() {
            return err(ip, "match refers before the start of the output");
        }
        let k = back.min(len);
        let start = dict.len() - back;
        out[op..op + k].copy_from_slice(&dict[start..start + k]);
        if len > k {
            super::copy_match(out, op + k, dist, len - k);
        }
    }
    Ok(op + len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk::xorshift;

    /// Decodes with each match copy (natural data, byte planes in 8-byte pieces, byte
    /// planes wide, both of those with room after the output): the same result, and on
    /// success the same bytes (the tests below compare them with `lz4_flex`). With room,
    /// a stream that overruns the output may fail at another place, so only success is
    /// compared there.
    fn decompress_into(src: &[u8], out: &mut [u8], dict: &[u8]) -> Result<(), Lz4Error> {
        let n = out.len();
        let mut far = vec![0u8; n];
        let mut wide = vec![0u8; n];
        let natural = decompress_natural_into(src, &mut far, dict);
        let planes = decode::<false, false>(src, out, n, dict).map(|_| ());
        let planes_wide = decode::<false, true>(src, &mut wide, n, dict).map(|_| ());
        assert_eq!(planes, natural, "natural and planes decoding disagree");
        assert_eq!(
            planes, planes_wide,
            "planes decoding, narrow and wide, disagree"
        );
        if planes.is_ok() {
            assert!(
                out[..] == far[..],
                "natural and planes decode different bytes"
            );
            assert!(
                out[..] == wide[..],
                "narrow and wide decode different bytes"
            );
        }
        for room in [1, 17, 64] {
            let mut roomy = vec![0xA5u8; n + room];
            let narrow = decode::<false, false>(src, &mut roomy, n, dict).map(|_| ());
            assert_eq!(narrow.is_ok(), planes.is_ok(), "room {room}: {narrow:?}");
            if planes.is_ok() {
                assert!(roomy[..n] == out[..], "room {room}: different bytes");
            }
            let mut roomy = vec![0x5Au8; n + room];
            let wide = decode::<false, true>(src, &mut roomy, n, dict).map(|_| ());
            assert_eq!(wide.is_ok(), planes.is_ok(), "room {room}, wide: {wide:?}");
            if planes.is_ok() {
                assert!(roomy[..n] == out[..], "room {room}, wide: different bytes");
            }
        }
        planes
    }

    /// [`WideHint`] turns wide decoding on for streams of 9–16-byte matches from far back
    /// (within 16 streams, at the next look), keeps it on while they last, and turns it
    /// off again within 8 streams of 4-byte matches (the counts of earlier streams
    /// halve with each stream). Many 12-byte matches from 12 back turn it on too.
    #[test]
    fn wide_decoding_follows_the_streams() {
        let wide_now = || WIDE_HINT.with(|h| h.get().wide());
        // 64 KiB of 4-byte words from a 4096-word vocabulary, and of 12-byte ones.
        let words = |width: usize| -> Vec<u8> {
            let mut s = 0x5EED_u64;
            let vocab: Vec<u8> = (0..4096 * width).map(|_| xorshift(&mut s) as u8).collect();
            (0..65536 / width)
                .flat_map(|_| {
                    let w = (xorshift(&mut s) % 4096) as usize;
                    vocab[w * width..(w + 1) * width].to_vec()
                })
                .collect()
        };
        let (short, long) = (words(4), words(12));
        let (short_c, long_c) = (
            lz4_flex::block::compress(&short),
            lz4_flex::block::compress(&long),
        );
        let mut out = vec![0u8; 65536];
        for _ in 0..16 {
            super::decompress_into(&short_c, &mut out[..short.len()], &[]).unwrap();
        }
        assert!(!wide_now(), "4-byte matches decoded wide");
        for _ in 0..16 {
            super::decompress_into(&long_c, &mut out[..long.len()], &[]).unwrap();
        }
        assert!(out[..long.len()] == long[..]);
        assert!(wide_now(), "12-byte matches not decoded wide");
        for _ in 0..8 {
            super::decompress_into(&short_c, &mut out[..short.len()], &[]).unwrap();
        }
        assert!(out[..short.len()] == short[..]);
        assert!(!wide_now(), "wide decoding stays on after 4-byte matches");
        // 12 random bytes, then the same 12 again: a 12-byte match from 12 back per
        // 24 bytes, all of them near.
        let mut seed = 0xD15_u64;
        let near: Vec<u8> = (0..65536 / 24)
            .flat_map(|_| {
                let unit: Vec<u8> = (0..12).map(|_| xorshift(&mut seed) as u8).collect();
                [unit.clone(), unit].concat()
            })
            .collect();
        let near_c = lz4_flex::block::compress(&near);
        for _ in 0..16 {
            super::decompress_into(&near_c, &mut out[..near.len()], &[]).unwrap();
        }
        assert!(out[..near.len()] == near[..]);
        assert!(wide_now(), "many near 12-byte matches not decoded wide");
    }

    /// Data with runs, short periods and noise: long overlapping matches at every distance.
    fn patterned(seed: u64, n: usize) -> Vec<u8> {
        let mut s = seed | 1;
        let mut v = Vec::with_capacity(n);
        while v.len() < n {
            let r = xorshift(&mut s);
            let run = (r % 300) as usize + 1;
            match r % 5 {
                0 => v.extend(std::iter::repeat_n((r >> 8) as u8, run)),
                1 | 2 => {
                    let period = ((r >> 16) % 24) as usize + 1;
                    let pat: Vec<u8> = (0..period).map(|_| xorshift(&mut s) as u8).collect();
                    v.extend((0..run * 4).map(|i| pat[i % period]));
                }
                3 => v.extend((0..run).map(|_| xorshift(&mut s) as u8)),
                _ => {
                    // Repeat something far back.
                    if v.len() > 1000 {
                        let from = v.len() - 1000 + (r as usize % 900);
                        v.extend_from_within(from..from + run.min(90));
                    }
                }
            }
        }
        v.truncate(n);
        v
    }

    #[test]
    fn matches_lz4_flex_on_random_streams() {
        for seed in 0..300u64 {
            let n = (seed as usize * 977) % 70_000;
            let data = patterned(seed, n);
            let comp = lz4_flex::block::compress(&data);
            let mut out = vec![0u8; n];
            decompress_into(&comp, &mut out, &[]).unwrap_or_else(|e| panic!("seed {seed}: {e:?}"));
            assert!(out == data, "seed {seed}: {n} bytes differ");
        }
    }

    #[test]
    fn matches_lz4_flex_with_a_dictionary() {
        for seed in 0..100u64 {
            let dict = patterned(seed + 1000, 100 + (seed as usize * 313) % 60_000);
            let mut data = patterned(seed, 20_000);
            // Pieces of the dictionary, so that matches reach into it.
            data.extend_from_slice(&dict[dict.len() / 2..]);
            data.extend(patterned(seed + 7, 5_000));
            let comp = lz4_flex::block::compress_with_dict(&data, &dict);
            let mut out = vec![0u8; data.len()];
            decompress_into(&comp, &mut out, &dict)
                .unwrap_or_else(|e| panic!("seed {seed}: {e:?}"));
            assert!(out == data, "seed {seed}: output differs");
        }
    }

    /// The longest token-only sequence (14 literals, an 18-byte match) ending 2 bytes
    /// before the output's end: the fast path's piece copies must not run past it.
    #[test]
    fn a_long_sequence_near_the_end_fits() {
        let lits: Vec<u8> = (1..=14).collect();
        let mut stream = vec![0xEE];
        stream.extend_from_slice(&lits);
        stream.extend_from_slice(&[14, 0, 0x20, b'a', b'b']);
        let want = lz4_flex::block::decompress(&stream, 34).unwrap();
        let mut out = [0u8; 34];
        decompress_into(&stream, &mut out, &[]).unwrap();
        assert_eq!(out[..], want[..]);
        // A nearer match (distance 9) takes the 8-byte pieces.
        stream[15] = 9;
        let want = lz4_flex::block::decompress(&stream, 34).unwrap();
        decompress_into(&stream, &mut out, &[]).unwrap();
        assert_eq!(out[..], want[..]);
    }

    /// Long matches (match nibble 15) after at most 14 literals, which take the 16-byte
    /// literal copy and `long_match`: distances on both sides of 16, matches ending at the
    /// output's end or short of it, and one byte too many (an error).
    #[test]
    fn long_matches_after_short_literals() {
        for dist in [1u16, 7, 15, 16, 17, 26] {
            for mlen in [19usize, 20, 33, 48, 273, 274, 600] {
                for tail in [0usize, 1, 14, 15, 40] {
                    // 20 literals and a 4-byte match, so that 24 bytes precede the test.
                    let mut stream = vec![0xF0, 5];
                    stream.extend(1..=20u8);
                    stream.extend_from_slice(&[1, 0]);
                    stream.push(0x3F);
                    stream.extend_from_slice(&[30, 31, 32]);
                    stream.extend_from_slice(&dist.to_le_bytes());
                    let mut ext = mlen - 19;
                    while ext >= 255 {
                        stream.push(255);
                        ext -= 255;
                    }
                    stream.push(ext as u8);
                    if tail >= 15 {
                        stream.extend_from_slice(&[0xF0, (tail - 15) as u8]);
                    } else {
                        stream.push((tail as u8) << 4);
                    }
                    stream.extend((0..tail).map(|i| i as u8 + 100));
                    let len = 24 + 3 + mlen + tail;
                    let want = lz4_flex::block::decompress(&stream, len).unwrap();
                    let mut out = vec![0u8; len];
                    decompress_into(&stream, &mut out, &[])
                        .unwrap_or_else(|e| panic!("dist {dist} mlen {mlen} tail {tail}: {e:?}"));
                    assert!(out == want, "dist {dist} mlen {mlen} tail {tail}");
                    if tail == 0 {
                        let mut short = vec![0u8; len - 1];
                        assert!(decompress_into(&stream, &mut short, &[]).is_err());
                    }
                }
            }
        }
    }

    /// Decodes a stream made of 30 literals and a 4-byte match, then `seqs` as
    /// `(literals, match length, distance)` (match length at most 18, distance within
    /// reach), then a final run of `last` literals; compares with `lz4_flex`.
    fn check_sequences(seqs: &[(usize, usize, u16)], last: usize, s: &mut u64, case: usize) {
        let mut stream = vec![0xF0, 15];
        stream.extend((0..30).map(|_| xorshift(s) as u8));
        stream.extend_from_slice(&[1, 0]);
        let mut len = 34;
        let mut run = |n: usize, low: u8, stream: &mut Vec<u8>| {
            stream.push(((n.min(15) as u8) << 4) | low);
            if n >= 15 {
                stream.push((n - 15) as u8);
            }
            stream.extend((0..n).map(|_| xorshift(s) as u8));
        };
        for &(lit, mlen, dist) in seqs {
            run(lit, (mlen - 4) as u8, &mut stream);
            stream.extend_from_slice(&dist.to_le_bytes());
            len += lit + mlen;
        }
        run(last, 0, &mut stream);
        len += last;
        let want = lz4_flex::block::decompress(&stream, len).unwrap();
        let mut out = vec![0u8; len];
        decompress_into(&stream, &mut out, &[]).unwrap_or_else(|e| panic!("case {case}: {e:?}"));
        assert!(out == want, "case {case}");
    }

    /// 300 streams for [`check_sequences`], the `case`-th with `case % most` random
    /// sequences (literal runs `lit.0 + [0, lit.1)`, match lengths `4 + [0, mlen)`,
    /// distances `1 + [0, dist)`) and a final run of `case % last` literals.
    fn check_random(seed: u64, most: usize, lit: (usize, u64), mlen: u64, dist: u64, last: usize) {
        let mut s = seed;
        for case in 0..300 {
            let seqs: Vec<_> = (0..case % most)
                .map(|_| {
                    let l = lit.0 + (xorshift(&mut s) % lit.1) as usize;
                    let m = 4 + (xorshift(&mut s) % mlen) as usize;
                    (l, m, 1 + (xorshift(&mut s) % dist) as u16)
                })
                .collect();
            check_sequences(&seqs, case % last, &mut s, case);
        }
    }

    /// Matches of 4–18 bytes at distances 1–7 (the word-pattern paths: one word up to 8
    /// bytes, three for natural data up to 18), between literal runs of 0–2 bytes, at
    /// every distance from the output's end.
    #[test]
    fn short_periods_match_lz4_flex() {
        check_random(0x5EED, 40, (0, 3), 15, 7, 7);
    }

    /// Literal runs of 15–70 bytes before matches of 4–18 bytes at distances 1–40 (the
    /// 64-byte literal copy and its 8-byte match pieces, and the general path around
    /// them), at every distance from the output's end.
    #[test]
    fn long_literal_runs_match_lz4_flex() {
        check_random(0x11FE, 12, (15, 56), 15, 40, 70);
    }

    /// Streams built sequence by sequence with random literal and match lengths and
    /// distances, including short final literal runs that break LZ4's end-of-block rules
    /// (decoders accept them): same bytes as `lz4_flex`, and no panic at any output size.
    #[test]
    fn random_sequences_match_lz4_flex() {
        let mut s = 0xC0FFEE_u64;
        for case in 0..2000 {
            let (mut stream, mut len) = (Vec::new(), 0usize);
            for _ in 0..1 + xorshift(&mut s) % 6 {
                let lit = (xorshift(&mut s) % 20) as usize + usize::from(len == 0);
                let mlen = (xorshift(&mut s) % 24) as usize + 4;
                let dist = 1 + (xorshift(&mut s) as usize % (len + lit));
                let ext = |n: usize, v: &mut Vec<u8>| {
                    if n >= 15 {
                        v.push((n - 15) as u8);
                    }
                };
                stream.push(((lit.min(15) as u8) << 4) | (mlen - 4).min(15) as u8);
                ext(lit, &mut stream);
                stream.extend((0..lit).map(|_| xorshift(&mut s) as u8));
                stream.extend_from_slice(&(dist as u16).to_le_bytes());
                ext(mlen - 4, &mut stream);
                len += lit + mlen;
            }
            let last = (xorshift(&mut s) % 6) as usize;
            stream.push((last as u8) << 4);
            stream.extend((0..last).map(|_| xorshift(&mut s) as u8));
            len += last;
            let want = lz4_flex::block::decompress(&stream, len).unwrap();
            let mut out = vec![0u8; len];
            decompress_into(&stream, &mut out, &[])
                .unwrap_or_else(|e| panic!("case {case}: {e:?}"));
            assert!(out == want, "case {case}");
        }
    }

    #[test]
    fn bad_streams_are_errors() {
        let data = patterned(3, 50_000);
        let comp = lz4_flex::block::compress(&data);
        let mut out = vec![0u8; data.len()];
        for cut in (0..comp.len()).step_by(97) {
            assert!(
                decompress_into(&comp[..cut], &mut out, &[]).is_err(),
                "cut {cut}"
            );
        }
        let mut short = vec![0u8; data.len() - 1];
        assert!(decompress_into(&comp, &mut short, &[]).is_err());
        let mut long = vec![0u8; data.len() + 1];
        assert!(decompress_into(&comp, &mut long, &[]).is_err());
        // Offset 0, and an offset before the start.
        assert_eq!(
            decompress_into(&[0x14, b'a', 0, 0], &mut [0u8; 9], &[]),
            err(2, "zero match offset")
        );
        assert!(decompress_into(&[0x14, b'a', 2, 0], &mut [0u8; 9], &[]).is_err());
        let mut s = 99u64;
        for _ in 0..2000 {
            let mut c = comp.clone();
            let at = xorshift(&mut s) as usize % c.len();
            c[at] ^= 1 << (xorshift(&mut s) % 8);
            let _ = decompress_into(&c, &mut out, &[]);
        }
    }
}
