//! Huffman decode tables for DEFLATE (RFC 1951 §3.2.2): canonical codes from their
//! lengths, looked up by the next bits of the stream.
//!
//! A table is indexed by the low `PB` bits of the bit buffer (DEFLATE packs each code's
//! first bit lowest, so the index is the code bit-reversed). Codes of at most `PB` bits
//! fill every entry whose low bits they are; longer codes sit in subtables, one per
//! `PB`-bit prefix, that the prefix's entry points to.
//!
//! An entry (`u32`) holds everything the decoder needs, so a symbol costs one lookup:
//! - bits 0–4: bits to consume (code length plus extra bits);
//! - bits 8–11: the code's length (where the extra bits start);
//! - bit 13 [`EOB`], bit 14 [`SUB`], bit 15 [`EXCEPTIONAL`] (end of block, subtable pointer,
//!   or with neither, an invalid code);
//! - bits 16–30: the value (a literal byte, a length or distance base, a subtable start);
//! - bit 31 [`LITERAL`].
//!
//! For a subtable pointer, bits 0–4 are `PB` and bits 8–11 the subtable's index bits;
//! subtable entries count their bits after the `PB` already consumed.

/// The entry is a literal byte (bits 16–23).
pub const LITERAL: u32 = 1 << 31;
/// The entry is not a literal, length or distance: see [`EOB`] and [`SUB`].
pub const EXCEPTIONAL: u32 = 1 << 15;
/// With [`EXCEPTIONAL`]: the end-of-block symbol.
pub const EOB: u32 = 1 << 13;
/// With [`EXCEPTIONAL`]: points to a subtable.
pub const SUB: u32 = 1 << 14;

/// Primary index bits of the literal/length table.
pub const LITLEN_BITS: usize = 11;
/// Primary index bits of the distance table.
pub const DIST_BITS: usize = 8;
/// Index bits of the code-length table (its codes are at most 7 bits: no subtables).
pub const CODELEN_BITS: usize = 7;

/// Entries of the literal/length table with its subtables: the most that any code of
/// at most 288 symbols and 15 bits needs with an 11-bit primary table (`enough 288 11 15`
/// of zlib's `examples/enough.c`). The builder checks it anyway.
pub const LITLEN_ENOUGH: usize = 2342;
/// The same for distances (`enough 32 8 15`).
pub const DIST_ENOUGH: usize = 402;

/// What the decoder needs of a symbol, before its code length is added: the value in
/// bits 16–30, the flags, and the number of extra bits in bits 0–4.
const fn info(value: u32, extra: u32) -> u32 {
    (value << 16) | extra
}

/// Length base and extra bits of symbols 257–285.
const LENGTHS: [(u32, u32); 29] = [
    (3, 0),
    (4, 0),
    (5, 0),
    (6, 0),
    (7, 0),
    (8, 0),
    (9, 0),
    (10, 0),
    (11, 1),
    (13, 1),
    (15, 1),
    (17, 1),
    (19, 2),
    (23, 2),
    (27, 2),
    (31, 2),
    (35, 3),
    (43, 3),
    (51, 3),
    (59, 3),
    (67, 4),
    (83, 4),
    (99, 4),
    (115, 4),
    (131, 5),
    (163, 5),
    (195, 5),
    (227, 5),
    (258, 0),
];

/// Symbol information of the literal/length alphabet (288 symbols: the fixed code names
/// 286 and 287, which are invalid in a stream).
pub const LITLEN_INFO: [u32; 288] = {
    let mut t = [EXCEPTIONAL; 288];
    let mut s = 0;
    while s < 256 {
        t[s] = LITERAL | info(s as u32, 0);
        s += 1;
    }
    t[256] = EXCEPTIONAL | EOB;
    let mut i = 0;
    while i < 29 {
        t[257 + i] = info(LENGTHS[i].0, LENGTHS[i].1);
        i += 1;
    }
    t
};

/// Symbol information of the distance alphabet (32 symbols: 30 and 31 are invalid).
pub const DIST_INFO: [u32; 32] = {
    let mut t = [EXCEPTIONAL; 32];
    let mut d = 0;
    while d < 30 {
        t[d] = if d < 4 {
            info(d as u32 + 1, 0)
        } else {
            let extra = d as u32 / 2 - 1;
            info(1 + ((2 + (d as u32 & 1)) << extra), extra)
        };
        d += 1;
    }
    t
};

/// Symbol information of the code-length alphabet: the symbol itself.
pub const CODELEN_INFO: [u32; 19] = {
    let mut t = [0; 19];
    let mut s = 0;
    while s < 19 {
        t[s] = info(s as u32, 0);
        s += 1;
    }
    t
};

/// Why a set of code lengths makes no usable code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableError {
    /// More codes than the lengths leave room for.
    Oversubscribed,
    /// Room left over where only a complete code is allowed.
    Incomplete,
}

/// Fills `table` (primary part `1 << PB` entries, subtables after it) for the code whose
/// lengths per symbol are `lens` (0: unused), with `infos[symbol]` as each entry's base.
///
/// Like zlib, an incomplete code is accepted only when `allow_single` and its longest code
/// is one bit (one used symbol), or no symbol is used at all; its unused entries decode as
/// invalid. Over-subscribed codes are refused.
pub fn build<const PB: usize>(
    table: &mut [u32],
    lens: &[u8],
    infos: &[u32],
    allow_single: bool,
) -> Result<(), TableError> {
    debug_assert!(lens.len() <= infos.len() && lens.len() <= 288);
    let mut count = [0u16; 16];
    for &l in lens {
        count[l as usize & 15] += 1;
    }
    count[0] = 0;
    let mut left: i32 = 1;
    for &c in &count[1..] {
        left = (left << 1) - c as i32;
        if left < 0 {
            return Err(TableError::Oversubscribed);
        }
    }
    let max = (1..16).rev().find(|&l| count[l] > 0).unwrap_or(0);
    if left > 0 {
        if max > 1 || (max == 1 && !allow_single) {
            return Err(TableError::Incomplete);
        }
        // No code, or one 1-bit code: whatever it does not cover is invalid.
        table[..1 << PB].fill(EXCEPTIONAL);
    }
    // Symbols in canonical order (by length, then symbol), with their codes.
    let mut offs = [0u16; 16];
    for l in 1..15 {
        offs[l + 1] = offs[l] + count[l];
    }
    let mut sorted = [0u16; 288];
    for (s, &l) in lens.iter().enumerate() {
        if l != 0 {
            sorted[offs[l as usize] as usize] = s as u16;
            offs[l as usize] += 1;
        }
    }
    let used = offs[15] as usize;
    // Each code, bit-reversed: its first bit is the stream's lowest.
    let mut next = [0u32; 16];
    for l in 1..16 {
        next[l] = (next[l - 1] + count[l - 1] as u32) << 1;
    }
    let mut codes = [0u16; 288];
    for (c, &s) in codes.iter_mut().zip(&sorted[..used]) {
        let l = lens[s as usize] as usize;
        *c = (next[l] as u16).reverse_bits() >> (16 - l);
        next[l] += 1;
    }
    // Codes of at most PB bits, shortest first, into a table that doubles (by copying
    // itself) with each length: a code of `l` bits must fill every entry whose low `l`
    // bits are its own, and the copies put it there (one copy of the table per length
    // instead of one store per entry: the fill cost a sparse stream a tenth of its time).
    let top = max.min(PB);
    let mut i = 0;
    for l in 1..=top {
        if l > 1 {
            table.copy_within(..1 << (l - 1), 1 << (l - 1));
        }
        while i < used && lens[sorted[i] as usize] as usize == l {
            let s = sorted[i] as usize;
            table[codes[i] as usize] = infos[s] + ((l as u32) << 8) + l as u32;
            i += 1;
        }
    }
    if top > 0 {
        let mut size = 1usize << top;
        while size < 1 << PB {
            table.copy_within(..size, size);
            size *= 2;
        }
    }
    let pmask = (1usize << PB) - 1;
    let mut free = 1usize << PB;
    while i < used {
        // The codes longer than PB bits that share their first PB bits follow each other
        // in canonical order: one subtable for them, as deep as the last (longest) needs.
        let prefix = codes[i] as usize & pmask;
        let mut j = i + 1;
        while j < used && codes[j] as usize & pmask == prefix {
            j += 1;
        }
        let bits = lens[sorted[j - 1] as usize] as usize - PB;
        let start = free;
        free += 1 << bits;
        if free > table.len() {
            return Err(TableError::Oversubscribed);
        }
        table[prefix] =
            EXCEPTIONAL | SUB | ((start as u32) << 16) | ((bits as u32) << 8) | PB as u32;
        for k in i..j {
            let s = sorted[k] as usize;
            let sl = lens[s] as usize - PB;
            let e = infos[s] + ((sl as u32) << 8) + sl as u32;
            let mut x = codes[k] as usize >> PB;
            while x < 1 << bits {
                table[start + x] = e;
                x += 1 << sl;
            }
        }
        i = j;
    }
    Ok(())
}

/// The literal/length and distance tables of the fixed code (RFC 1951 §3.2.6).
pub fn fixed(litlen: &mut [u32; LITLEN_ENOUGH], dist: &mut [u32; DIST_ENOUGH]) {
    let mut lens = [0u8; 288];
    lens[..144].fill(8);
    lens[144..256].fill(9);
    lens[256..280].fill(7);
    lens[280..].fill(8);
    build::<LITLEN_BITS>(litlen, &lens, &LITLEN_INFO, false).expect("the fixed code is complete");
    build::<DIST_BITS>(dist, &[5; 32], &DIST_INFO, false).expect("the fixed code is complete");
}
