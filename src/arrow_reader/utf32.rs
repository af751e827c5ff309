//! numpy `U<n>` values (fixed-width UTF-32, as b2nd arrays and CTable string columns store
//! them) → an Arrow `Utf8` array.
//!
//! numpy's rules: a value is its `n` code units with the trailing NULs dropped (NULs
//! before the last other unit stay); a unit that is not a Unicode scalar value (a
//! surrogate, or above U+10FFFF) becomes U+FFFD here. Values are written straight into
//! the array's value buffer, no allocation per value, and a value whose units are all
//! ASCII is narrowed a unit to a byte without a branch per unit. Per `<U12` value, against
//! a `Vec<u32>` and a `String` per value before: 12 ns against 33 when ASCII, 15 against 34
//! with one value in ten not, and 34 either way when every value has a non-ASCII letter
//! (`benches/README.md`, session 32).

use arrow::array::{ArrayRef, GenericStringArray, OffsetSizeTrait};
use arrow::buffer::{Buffer, OffsetBuffer, ScalarBuffer};
use std::sync::Arc;

/// `n` values of `chars` UTF-32 code units each (big-endian when `big`), the value of
/// record `i` at `data[i * stride + offset..]`, as a `Utf8` array. Should the UTF-8 of all
/// `n` values exceed `i32::MAX` bytes, a `LargeUtf8` array instead (the caller's schema
/// then reports the mismatch as an error).
///
/// # Panics
/// When `data` is shorter than the `n` records (the caller sizes it from the same
/// geometry).
pub fn utf32_to_arrow(
    data: &[u8],
    n: usize,
    stride: usize,
    offset: usize,
    chars: usize,
    big: bool,
) -> ArrayRef {
    match build::<i32>(data, n, stride, offset, chars, big) {
        Some(a) => Arc::new(a),
        None => Arc::new(
            build::<i64>(data, n, stride, offset, chars, big).expect("a Vec's length fits i64"),
        ),
    }
}

/// [`utf32_to_arrow`] with offsets of type `O`; `None` when the values outgrow them.
fn build<O: OffsetSizeTrait>(
    data: &[u8],
    n: usize,
    stride: usize,
    offset: usize,
    chars: usize,
    big: bool,
) -> Option<GenericStringArray<O>> {
    let size = chars * 4;
    let mut values: Vec<u8> = Vec::with_capacity(n.saturating_mul(chars));
    let mut offsets: Vec<O> = Vec::with_capacity(n + 1);
    offsets.push(O::usize_as(0));
    for i in 0..n {
        let rec = &data[i * stride + offset..][..size];
        if big {
            push_value::<true>(rec, &mut values);
        } else {
            push_value::<false>(rec, &mut values);
        }
        offsets.push(O::from_usize(values.len())?);
    }
    let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
    Some(GenericStringArray::new(
        offsets,
        Buffer::from_vec(values),
        None,
    ))
}

/// The code unit in the 4 bytes `c`.
#[inline(always)]
fn unit<const BIG: bool>(c: &[u8]) -> u32 {
    let b: [u8; 4] = c.try_into().expect("4 bytes");
    if BIG {
        u32::from_be_bytes(b)
    } else {
        u32::from_le_bytes(b)
    }
}

/// Appends the UTF-8 of one value (`rec`, its code units) to `out`.
#[inline(always)]
fn push_value<const BIG: bool>(rec: &[u8], out: &mut Vec<u8>) {
    // One pass for the length without the trailing NULs and for all units' bits OR-ed
    // together (below 0x80: ASCII), with no branch on the units. (Narrowing first and
    // trimming the zero bytes after, 8 at a time, took 15 ns per value, not 12.)
    let (mut end, mut bits) = (0, 0);
    for (k, c) in rec.chunks_exact(4).enumerate() {
        let u = unit::<BIG>(c);
        bits |= u;
        end = if u != 0 { k + 1 } else { end };
    }
    if bits < 0x80 {
        // Every unit narrowed to its byte, then the trailing NULs cut off again.
        let start = out.len();
        out.extend(rec.chunks_exact(4).map(|c| unit::<BIG>(c) as u8));
        out.truncate(start + end);
        return;
    }
    out.reserve(end * 4);
    for c in rec[..end * 4].chunks_exact(4) {
        push_utf8(out, unit::<BIG>(c));
    }
}

/// Appends the UTF-8 of code unit `u` (U+FFFD if it is not a Unicode scalar value), a
/// byte at a time. (`char::encode_utf8` and a `memcpy` call per character took this path
/// from a `String` per value's 33 to 49 ns per 12-character value.)
#[inline(always)]
fn push_utf8(out: &mut Vec<u8>, u: u32) {
    let u = char::from_u32(u).unwrap_or(char::REPLACEMENT_CHARACTER) as u32;
    if u < 0x80 {
        out.push(u as u8);
    } else if u < 0x800 {
        out.push(0xC0 | (u >> 6) as u8);
        out.push(0x80 | (u & 0x3F) as u8);
    } else if u < 0x1_0000 {
        out.push(0xE0 | (u >> 12) as u8);
        out.push(0x80 | ((u >> 6) & 0x3F) as u8);
        out.push(0x80 | (u & 0x3F) as u8);
    } else {
        out.push(0xF0 | (u >> 18) as u8);
        out.push(0x80 | ((u >> 12) & 0x3F) as u8);
        out.push(0x80 | ((u >> 6) & 0x3F) as u8);
        out.push(0x80 | (u & 0x3F) as u8);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, AsArray};

    /// The definition: a `String` per value from its code units, trailing NULs dropped.
    fn reference(rec: &[u8], big: bool) -> String {
        let cps: Vec<u32> = rec
            .chunks_exact(4)
            .map(|c| {
                let b = c.try_into().expect("4 bytes");
                if big {
                    u32::from_be_bytes(b)
                } else {
                    u32::from_le_bytes(b)
                }
            })
            .collect();
        let end = cps.iter().rposition(|&c| c != 0).map_or(0, |p| p + 1);
        cps[..end]
            .iter()
            .map(|&c| char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER))
            .collect()
    }

    /// Random values of every kind (empty, ASCII, Latin-1, CJK, astral, surrogates, above
    /// U+10FFFF, NULs inside and at the end), little- and big-endian, packed and as a field
    /// of wider records: the same strings as the definition.
    #[test]
    fn values_equal_the_definition() {
        let mut seed = 11u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let pool: [u32; 12] = [
            0,
            0x41,
            0x7a,
            0x7f,
            0x80,
            0xe9,
            0x4e2d,
            0xd800,
            0xdfff,
            0x1f600,
            0x110000,
            u32::MAX,
        ];
        for chars in [0usize, 1, 3, 12, 33] {
            for (stride_extra, offset) in [(0usize, 0usize), (9, 5)] {
                for big in [false, true] {
                    let n = 300;
                    let stride = chars * 4 + stride_extra;
                    let mut data = vec![0xAAu8; n * stride];
                    let mut want = Vec::new();
                    for i in 0..n {
                        let ascii = next() % 2 == 0;
                        let len = if chars == 0 {
                            0
                        } else {
                            (next() % (chars as u64 + 1)) as usize
                        };
                        let rec = &mut data[i * stride + offset..][..chars * 4];
                        rec.fill(0);
                        for k in 0..len {
                            let r = next();
                            let u = if ascii {
                                (r % 0x80) as u32
                            } else {
                                pool[(r % pool.len() as u64) as usize]
                            };
                            let b = if big {
                                u.to_be_bytes()
                            } else {
                                u.to_le_bytes()
                            };
                            rec[k * 4..k * 4 + 4].copy_from_slice(&b);
                        }
                        want.push(reference(rec, big));
                    }
                    let got = utf32_to_arrow(&data, n, stride, offset, chars, big);
                    let got = got.as_string::<i32>();
                    assert_eq!(got.len(), n);
                    for (i, w) in want.iter().enumerate() {
                        assert_eq!(got.value(i), w, "chars {chars} big {big} row {i}");
                    }
                }
            }
        }
    }

    /// The 64-bit offsets (taken when the values outgrow 32-bit ones, past 2 GiB, which no
    /// test here builds) give the same strings.
    #[test]
    fn large_offsets_hold_the_same_values() {
        let data: Vec<u8> = "héllo\u{1f600}"
            .chars()
            .chain(std::iter::repeat_n('\0', 2))
            .flat_map(|c| (c as u32).to_le_bytes())
            .collect();
        let a = build::<i64>(&data, 1, data.len(), 0, data.len() / 4, false).unwrap();
        assert_eq!(a.value(0), "héllo\u{1f600}");
    }
}
