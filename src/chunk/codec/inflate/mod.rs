//! zlib streams (RFC 1950) and the DEFLATE data inside them (RFC 1951), decoded into an
//! output of known size: Blosc2's `ZLIB` codec (`spec/codecs.md` §2).
//!
//! Ours rather than an inflate library's because a Blosc2 stream's whole output is one
//! buffer of known size: no window to keep and no state to suspend when input or output
//! runs out. The fast loop looks each symbol up once in a table whose entry carries its
//! value, bit count and extra-bit position (`table.rs`), from a 64-bit buffer refilled by
//! one unaligned load; it looks the next entry up before refilling, decodes up to three
//! literals per refill, writes them straight into the output, and copies matches in fixed
//! 8- or 16-byte pieces (runs of one byte by `fill`). 0.98–1.19× zlib-rs's inflate on
//! the decode bench's zlib streams (`benches/README.md`, session 21). zlib-rs (through
//! `flate2`) stays the oracle the tests compare against. Safe code only.
//!
//! The Adler-32 check of the output runs our AVX-512 VNNI kernel where the CPU has one
//! (`chunk::simd`), else `zlib-rs`'s (AVX2 where it can, chosen at run time).

mod table;
#[cfg(test)]
mod tests;

use super::{copy_match, copy_piece, copy_run16, copy_short_period, copy16};
use std::cell::RefCell;
use table::{
    CODELEN_BITS, CODELEN_INFO, DIST_BITS, DIST_ENOUGH, DIST_INFO, EOB, EXCEPTIONAL, LITERAL,
    LITLEN_BITS, LITLEN_ENOUGH, LITLEN_INFO, SUB, TableError,
};

/// Why a zlib stream is invalid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InflateError {
    /// Input offset (byte) near which decoding failed.
    pub at: usize,
    /// What was wrong.
    pub why: &'static str,
}

fn err<T>(at: usize, why: &'static str) -> Result<T, InflateError> {
    Err(InflateError { at, why })
}

/// Decodes the zlib stream `src` into `out`, which it must fill exactly, and checks its
/// Adler-32. Bytes after the checksum are ignored (as zlib's `inflate` does).
///
/// # Errors
/// A bad zlib header (or one that asks for a preset dictionary), invalid DEFLATE data,
/// a stream that ends early or produces more or fewer bytes than `out.len()`, or a
/// checksum that does not match.
pub fn zlib_decompress_into(src: &[u8], out: &mut [u8]) -> Result<(), InflateError> {
    let [cmf, flg, ..] = *src else {
        return err(0, "stream shorter than its 2-byte zlib header");
    };
    if cmf & 15 != 8 || cmf >> 4 > 7 {
        return err(0, "not a DEFLATE stream with a window of at most 32 KiB");
    }
    if (u16::from(cmf) << 8 | u16::from(flg)) % 31 != 0 {
        return err(1, "zlib header check bits do not match");
    }
    if flg & 0x20 != 0 {
        return err(1, "zlib stream asks for a preset dictionary");
    }
    let end = TABLES
        .with(|t| inflate(&src[2..], out, &mut t.borrow_mut()))
        .map_err(|e| InflateError { at: e.at + 2, ..e })?
        + 2;
    let Some(sum) = src.get(end..end + 4) else {
        return err(end, "stream ends before its Adler-32");
    };
    let want = u32::from_be_bytes(sum.try_into().expect("4 bytes"));
    let got =
        crate::chunk::simd::adler32(1, out).unwrap_or_else(|| zlib_rs::adler32::adler32(1, out));
    if got != want {
        return err(end, "Adler-32 of the output does not match");
    }
    Ok(())
}

/// A thread's decode tables: the current block's dynamic code and, built on first use,
/// the fixed code's (a fresh set per stream would cost a zeroing of 11 KiB each).
struct Tables {
    litlen: [u32; LITLEN_ENOUGH],
    dist: [u32; DIST_ENOUGH],
    fixed: Option<Box<([u32; LITLEN_ENOUGH], [u32; DIST_ENOUGH])>>,
}

impl Tables {
    fn new() -> Box<Self> {
        Box::new(Tables {
            litlen: [0; LITLEN_ENOUGH],
            dist: [0; DIST_ENOUGH],
            fixed: None,
        })
    }
}

thread_local! {
    static TABLES: RefCell<Box<Tables>> = RefCell::new(Tables::new());
}

/// The stream's bits, lowest first, through a 64-bit buffer.
///
/// `pos` is the next byte to load. Past the end of `src` the stream reads as zero bytes,
/// counted in `pos` (which then exceeds `src.len()`); [`Bits::check`] says whether any of
/// them has been consumed.
#[derive(Clone, Copy)]
struct Bits<'a> {
    src: &'a [u8],
    pos: usize,
    buf: u64,
    /// Valid bits in `buf` in its low byte ([`Bits::left`]); the bits above are whatever
    /// [`Bits::consume`] left there (it subtracts whole entries). The bits of `buf` above
    /// the valid ones may hold the next bytes' bits, never others.
    n: u32,
}

impl Bits<'_> {
    /// Whether 8 bytes can be loaded at `pos` with room for `more` bytes after.
    #[inline(always)]
    fn has(&self, more: usize) -> bool {
        self.src.len().saturating_sub(self.pos) >= 8 + more
    }

    /// Tops the buffer up to at least 56 bits with one 8-byte load; needs
    /// [`Bits::has`]`(0)`.
    #[inline(always)]
    fn refill_fast(&mut self) {
        let w = u64::from_le_bytes(
            self.src[self.pos..self.pos + 8]
                .try_into()
                .expect("8 bytes"),
        );
        let n = self.left();
        self.buf |= w << n;
        self.pos += (63 - n as usize) >> 3;
        self.n = n | 56;
    }

    /// Tops the buffer up to at least 56 bits: one load where 8 bytes remain, else
    /// [`Bits::refill_bytes`].
    #[inline(always)]
    fn refill(&mut self) {
        if self.has(0) {
            self.refill_fast();
        } else {
            self.refill_bytes();
        }
    }

    /// Tops the buffer up to at least 56 bits byte by byte, zeros past the end.
    fn refill_bytes(&mut self) {
        self.n = self.left();
        while self.n < 56 {
            let b = self.src.get(self.pos).copied().unwrap_or(0);
            self.buf |= u64::from(b) << self.n;
            self.pos += 1;
            self.n += 8;
        }
    }

    /// The next `k` (at most 56, after a refill) bits, consumed.
    #[inline(always)]
    fn take(&mut self, k: u32) -> u32 {
        let v = (self.buf & ((1u64 << k) - 1)) as u32;
        self.consume(k);
        v
    }

    /// Drops the low `k & 63` bits (an entry's bit count: the rest of the entry is
    /// ignored, and the shift needs no mask of its own).
    #[inline(always)]
    fn consume(&mut self, k: u32) {
        self.buf >>= k & 63;
        self.n = self.n.wrapping_sub(k);
    }

    /// Valid bits in the buffer.
    #[inline(always)]
    fn left(&self) -> u32 {
        self.n & 0xFF
    }

    /// The input offset of the next unconsumed bit's byte.
    #[inline(always)]
    fn offset(&self) -> usize {
        self.pos - (self.left() as usize).div_ceil(8)
    }

    /// An error if bits past the end of the input have been consumed.
    fn check(&self) -> Result<(), InflateError> {
        // Bytes loaded minus whole bytes still unconsumed: past the end means truncated.
        if self.pos - self.left() as usize / 8 > self.src.len() {
            return err(
                self.src.len(),
                "stream ends in the middle of its DEFLATE data",
            );
        }
        Ok(())
    }
}

/// Decodes the DEFLATE blocks of `src` into `out`, which they must fill exactly; returns
/// the input offset just after the final block (byte-aligned).
fn inflate(src: &[u8], out: &mut [u8], t: &mut Tables) -> Result<usize, InflateError> {
    let mut bits = Bits {
        src,
        pos: 0,
        buf: 0,
        n: 0,
    };
    let mut op = 0;
    loop {
        bits.refill();
        let head = bits.take(3);
        bits.check()?;
        match head >> 1 {
            0 => op = stored(&mut bits, out, op)?,
            1 => {
                let f = t.fixed.get_or_insert_with(|| {
                    let mut f = Box::new(([0; LITLEN_ENOUGH], [0; DIST_ENOUGH]));
                    table::fixed(&mut f.0, &mut f.1);
                    f
                });
                op = huffman(&mut bits, out, op, &f.0, &f.1)?;
            }
            2 => {
                dynamic_tables(&mut bits, &mut t.litlen, &mut t.dist)?;
                op = huffman(&mut bits, out, op, &t.litlen, &t.dist)?;
            }
            _ => return err(bits.offset(), "invalid DEFLATE block type 3"),
        }
        bits.check()?;
        if head & 1 == 1 {
            break;
        }
    }
    if op != out.len() {
        return err(bits.offset(), "stream ended before the expected size");
    }
    // The checksum starts at the next whole byte.
    Ok(bits.pos - bits.left() as usize / 8)
}

/// A stored block: its bytes copied as they are; returns the new output position.
fn stored(bits: &mut Bits, out: &mut [u8], op: usize) -> Result<usize, InflateError> {
    // To the byte boundary, then give the whole bytes left in the buffer back.
    bits.consume(bits.left() % 8);
    let mut ip = bits.pos - bits.left() as usize / 8;
    bits.buf = 0;
    bits.n = 0;
    let Some(h) = bits.src.get(ip..ip + 4) else {
        return err(ip, "stored block header past the input");
    };
    let len = u16::from_le_bytes([h[0], h[1]]) as usize;
    if len != !u16::from_le_bytes([h[2], h[3]]) as usize {
        return err(ip, "stored block length and its complement disagree");
    }
    ip += 4;
    let Some(data) = bits.src.get(ip..ip + len) else {
        return err(ip, "stored block past the input");
    };
    let Some(dst) = out.get_mut(op..op + len) else {
        return err(ip, "stored block overruns the output");
    };
    dst.copy_from_slice(data);
    bits.pos = ip + len;
    Ok(op + len)
}

/// Order in which a dynamic block lists its code-length code's lengths.
const CODELEN_ORDER: [usize; 19] = [
    16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15,
];

/// Reads a dynamic block's header and builds its tables.
fn dynamic_tables(
    bits: &mut Bits,
    litlen: &mut [u32; LITLEN_ENOUGH],
    dist: &mut [u32; DIST_ENOUGH],
) -> Result<(), InflateError> {
    bits.refill();
    let nlit = bits.take(5) as usize + 257;
    let ndist = bits.take(5) as usize + 1;
    let nclen = bits.take(4) as usize + 4;
    if nlit > 286 || ndist > 30 {
        return err(bits.offset(), "too many length or distance symbols");
    }
    let mut clens = [0u8; 19];
    for &s in &CODELEN_ORDER[..nclen] {
        bits.refill();
        clens[s] = bits.take(3) as u8;
    }
    bits.check()?;
    let mut ctable = [0u32; 1 << CODELEN_BITS];
    table::build::<CODELEN_BITS>(&mut ctable, &clens, &CODELEN_INFO, false).map_err(|e| {
        table_error(
            bits,
            e,
            "over-subscribed code-length code",
            "incomplete code-length code",
        )
    })?;
    let mut lens = [0u8; 286 + 30];
    let total = nlit + ndist;
    let mut i = 0;
    while i < total {
        bits.refill();
        let e = ctable[(bits.buf & ((1 << CODELEN_BITS) - 1)) as usize];
        if e & EXCEPTIONAL != 0 {
            return err(bits.offset(), "invalid code-length code");
        }
        bits.consume(e);
        let sym = e >> 16;
        let (value, count) = match sym {
            0..=15 => (sym as u8, 1),
            16 => {
                let Some(&prev) = i.checked_sub(1).map(|p| &lens[p]) else {
                    return err(bits.offset(), "repeat of a code length before the first");
                };
                (prev, 3 + bits.take(2) as usize)
            }
            17 => (0, 3 + bits.take(3) as usize),
            _ => (0, 11 + bits.take(7) as usize),
        };
        let Some(run) = lens.get_mut(i..i + count).filter(|_| i + count <= total) else {
            return err(bits.offset(), "code lengths run past their count");
        };
        run.fill(value);
        i += count;
    }
    bits.check()?;
    if lens[256] == 0 {
        return err(bits.offset(), "code has no end-of-block symbol");
    }
    table::build::<LITLEN_BITS>(litlen, &lens[..nlit], &LITLEN_INFO, true).map_err(|e| {
        table_error(
            bits,
            e,
            "over-subscribed literal/length code",
            "incomplete literal/length code",
        )
    })?;
    table::build::<DIST_BITS>(dist, &lens[nlit..total], &DIST_INFO, true).map_err(|e| {
        table_error(
            bits,
            e,
            "over-subscribed distance code",
            "incomplete distance code",
        )
    })
}

/// The error for a code whose lengths make no usable table, with the message for each
/// way they can fail.
fn table_error(
    bits: &Bits,
    e: TableError,
    oversubscribed: &'static str,
    incomplete: &'static str,
) -> InflateError {
    InflateError {
        at: bits.offset(),
        why: match e {
            TableError::Oversubscribed => oversubscribed,
            TableError::Incomplete => incomplete,
        },
    }
}

/// Room the fast loop needs in the output: two literals, a whole match, and the 32
/// bytes that match copies may write past it.
const OUT_SLACK: usize = 2 + 258 + 32;

/// Decodes one Huffman-coded block; returns the new output position.
///
/// The fast loop runs while the input has 24 bytes left to load (two refills) and the
/// output room for [`OUT_SLACK`]; the careful loop finishes the block with checked
/// reads and writes. In the fast loop an entry is looked up before the buffer is refilled
/// and its bits are consumed before its kind is tested, so neither the refill nor the
/// test lies between one literal's lookup and the next.
fn huffman(
    state: &mut Bits,
    out: &mut [u8],
    mut op: usize,
    litlen: &[u32; LITLEN_ENOUGH],
    dist: &[u32; DIST_ENOUGH],
) -> Result<usize, InflateError> {
    const LMASK: u64 = (1 << LITLEN_BITS) - 1;
    const DMASK: u64 = (1 << DIST_BITS) - 1;
    // A copy in registers (the caller's may live in memory); written back on the way out.
    let mut local = *state;
    let b = &mut local;
    let n = out.len();
    let room = |b: &Bits, op: usize| b.has(16) && n - op >= OUT_SLACK;
    if room(b, op) {
        b.refill_fast();
        // The next symbol's entry, not yet consumed; at least 56 bits in the buffer.
        let mut e = litlen[(b.buf & LMASK) as usize];
        loop {
            let mut saved = b.buf;
            b.consume(e);
            if e & LITERAL != 0 {
                // Up to three literals per refill: 33 bits at most of the 56.
                let l1 = (e >> 16) as u8;
                e = litlen[(b.buf & LMASK) as usize];
                saved = b.buf;
                b.consume(e);
                if e & LITERAL != 0 {
                    let l2 = (e >> 16) as u8;
                    e = litlen[(b.buf & LMASK) as usize];
                    saved = b.buf;
                    b.consume(e);
                    if e & LITERAL != 0 {
                        let l3 = (e >> 16) as u8;
                        e = litlen[(b.buf & LMASK) as usize];
                        out[op..op + 3].copy_from_slice(&[l1, l2, l3]);
                        op += 3;
                        if !room(b, op) {
                            break;
                        }
                        b.refill_fast();
                        continue;
                    }
                    out[op..op + 2].copy_from_slice(&[l1, l2]);
                    op += 2;
                } else {
                    out[op] = l1;
                    op += 1;
                }
            }
            // `e` is consumed and not a literal; `saved` holds its bits. At least 23 bits
            // are left (two literals and an 11-bit subtable pointer took at most 33).
            if e & EXCEPTIONAL != 0 {
                if e & SUB != 0 {
                    e = sub_entry(litlen, e, b.buf);
                    saved = b.buf;
                    b.consume(e);
                    if e & LITERAL != 0 {
                        out[op] = (e >> 16) as u8;
                        op += 1;
                        e = litlen[(b.buf & LMASK) as usize];
                        if !room(b, op) {
                            break;
                        }
                        b.refill_fast();
                        continue;
                    }
                }
                if e & EOB != 0 {
                    *state = local;
                    return Ok(op);
                }
                if e & EXCEPTIONAL != 0 {
                    return err(b.offset(), "invalid literal/length code");
                }
            }
            let len = (e >> 16) as usize + extra(e, saved);
            // At least 14 bits left (a subtable entry takes at most 9 of the 23): enough
            // to look the distance up while the buffer is refilled for its extra bits.
            let mut de = dist[(b.buf & DMASK) as usize];
            b.refill_fast();
            let mut saved = b.buf;
            b.consume(de);
            if de & EXCEPTIONAL != 0 {
                if de & SUB == 0 {
                    return err(b.offset(), "invalid distance code");
                }
                de = sub_entry(dist, de, b.buf);
                saved = b.buf;
                b.consume(de);
                if de & EXCEPTIONAL != 0 {
                    return err(b.offset(), "invalid distance code");
                }
            }
            let d = (de >> 16) as usize + extra(de, saved);
            if d > op {
                return err(b.offset(), "match starts before the output");
            }
            // Pieces may write up to 31 bytes past the match, within the slack. The first
            // two are copied whatever the length: most matches need one or two, and a
            // branch on the length would mispredict.
            if d >= 16 {
                // 16-byte pieces, each reading only final bytes.
                let m = &mut out[op - d..op + len + 32];
                copy16(m, d, 0);
                copy16(m, d, 16);
                if len > 32 {
                    copy_run16(&mut m[32..], d, len - 32);
                }
            } else if d >= 8 {
                // 8-byte pieces, each reading only final bytes.
                let m = &mut out[op - d..op + len + 16];
                copy_piece(m, d, 0);
                copy_piece(m, d, 8);
                let mut k = 16;
                while k < len {
                    copy_piece(m, d, k);
                    k += 8;
                }
            } else if d == 1 {
                // Runs (planes of shuffled data are mostly long runs of one byte).
                let v = out[op - 1];
                out[op..op + len].fill(v);
            } else {
                // Short periods: the pattern stored whole.
                copy_short_period(out, op, d, len);
            }
            op += len;
            // At least 28 bits left: the next entry, then the refill.
            e = litlen[(b.buf & LMASK) as usize];
            if !room(b, op) {
                break;
            }
            b.refill_fast();
        }
    }
    *state = local;
    careful(state, out, op, litlen, dist)
}

/// The extra bits' value of a length or distance entry, from the buffer before the entry
/// is consumed.
#[inline(always)]
fn extra(e: u32, buf: u64) -> usize {
    ((buf & ((1u64 << (e & 31)) - 1)) >> ((e >> 8) & 15)) as usize
}

/// The entry of a subtable that `e` points to, for the buffer after the primary bits.
#[inline(always)]
fn sub_entry(t: &[u32], e: u32, buf: u64) -> u32 {
    let i = (e >> 16) as usize + (buf & ((1 << ((e >> 8) & 15)) - 1)) as usize;
    t.get(i).copied().unwrap_or(EXCEPTIONAL)
}

/// [`huffman`]'s block end: one symbol per refill, every read and write checked.
#[cold]
fn careful(
    bits: &mut Bits,
    out: &mut [u8],
    mut op: usize,
    litlen: &[u32; LITLEN_ENOUGH],
    dist: &[u32; DIST_ENOUGH],
) -> Result<usize, InflateError> {
    loop {
        bits.refill();
        bits.check()?;
        let mut e = litlen[(bits.buf & ((1 << LITLEN_BITS) - 1)) as usize];
        if e & SUB != 0 && e & EXCEPTIONAL != 0 {
            bits.consume(LITLEN_BITS as u32);
            e = sub_entry(litlen, e, bits.buf);
        }
        if e & LITERAL != 0 {
            bits.consume(e);
            bits.check()?;
            let Some(o) = out.get_mut(op) else {
                return err(bits.offset(), "literal overruns the output");
            };
            *o = (e >> 16) as u8;
            op += 1;
            continue;
        }
        if e & EXCEPTIONAL != 0 {
            if e & EOB != 0 {
                bits.consume(e);
                return Ok(op);
            }
            return err(bits.offset(), "invalid literal/length code");
        }
        let len = (e >> 16) as usize + extra(e, bits.buf);
        bits.consume(e);
        bits.refill();
        let mut e = dist[(bits.buf & ((1 << DIST_BITS) - 1)) as usize];
        if e & SUB != 0 && e & EXCEPTIONAL != 0 {
            bits.consume(DIST_BITS as u32);
            e = sub_entry(dist, e, bits.buf);
        }
        if e & EXCEPTIONAL != 0 {
            return err(bits.offset(), "invalid distance code");
        }
        let d = (e >> 16) as usize + extra(e, bits.buf);
        bits.consume(e);
        bits.check()?;
        if d > op {
            return err(bits.offset(), "match starts before the output");
        }
        if len > out.len() - op {
            return err(bits.offset(), "match overruns the output");
        }
        copy_match(out, op, d, len);
        op += len;
    }
}
