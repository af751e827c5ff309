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
//! (`benches/README.md`, session 32). Values of up to 32 units are read as fixed windows
//! of 4, 8, 16 or 32 units (`push_windowed`), which the compiler vectorizes: 8.4 ns per
//! ASCII `<U12` value in cache, 10.2 with one in ten not (11.7 and 14.3 before; session 36).

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

/// Appends the UTF-8 of one `U<n>` value (`record`: its `4n` bytes, big-endian units when
/// `big`) to `out`, as [`utf32_to_arrow`] converts it.
pub fn push_utf32(record: &[u8], big: bool, out: &mut Vec<u8>) {
    match big {
        false => push_value::<false>(record, out),
        true => push_value::<true>(record, out),
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
    macro_rules! records {
        ($push:expr) => {
            each_record::<O>(data, n, stride, offset, chars, $push)
        };
    }
    let (values, offsets) = match (chars, big) {
        (0..=4, false) => records!(push_windowed::<4, false>(chars))?,
        (0..=4, true) => records!(push_windowed::<4, true>(chars))?,
        (5..=8, false) => records!(push_windowed::<8, false>(chars))?,
        (5..=8, true) => records!(push_windowed::<8, true>(chars))?,
        (9..=16, false) => records!(push_windowed::<16, false>(chars))?,
        (9..=16, true) => records!(push_windowed::<16, true>(chars))?,
        (17..=32, false) => records!(push_windowed::<32, false>(chars))?,
        (17..=32, true) => records!(push_windowed::<32, true>(chars))?,
        (_, false) => records!(push_whole::<false>(chars))?,
        (_, true) => records!(push_whole::<true>(chars))?,
    };
    let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
    Some(GenericStringArray::new(
        offsets,
        Buffer::from_vec(values),
        None,
    ))
}

/// The values and offsets of the `n` records, each appended by `push(data from the
/// record's start on, values)`.
#[inline(always)]
fn each_record<O: OffsetSizeTrait>(
    data: &[u8],
    n: usize,
    stride: usize,
    offset: usize,
    chars: usize,
    mut push: impl FnMut(&[u8], &mut Vec<u8>),
) -> Option<(Vec<u8>, Vec<O>)> {
    let mut values: Vec<u8> = Vec::with_capacity(n.saturating_mul(chars));
    let mut offsets: Vec<O> = Vec::with_capacity(n + 1);
    offsets.push(O::usize_as(0));
    for i in 0..n {
        push(&data[i * stride + offset..], &mut values);
        offsets.push(O::from_usize(values.len())?);
    }
    Some((values, offsets))
}

/// A converter of values of `chars` units, for any width.
fn push_whole<const BIG: bool>(chars: usize) -> impl FnMut(&[u8], &mut Vec<u8>) {
    move |rec: &[u8], out: &mut Vec<u8>| push_value::<BIG>(&rec[..chars * 4], out)
}

/// A converter of values of `chars <= W` units that reads each record as a window of `W`
/// units (`rec` is the data from the record's start on). Units past `chars` are masked to
/// 0, so with fixed widths the compiler turns the ASCII test, the narrowing and the search
/// for the last non-NUL unit into a few vector instructions, and the value is stored as
/// `W` bytes and cut back to its length. A record too close to the end of the data for a
/// whole window, or holding a non-ASCII unit, takes [`push_value`].
fn push_windowed<const W: usize, const BIG: bool>(chars: usize) -> impl FnMut(&[u8], &mut Vec<u8>) {
    let keep: [u32; W] = std::array::from_fn(|k| if k < chars { u32::MAX } else { 0 });
    move |rec: &[u8], out: &mut Vec<u8>| {
        let Some(window) = rec.get(..W * 4) else {
            return push_value_cold::<BIG>(&rec[..chars * 4], out);
        };
        let mut units = [0u32; W];
        for ((u, c), keep) in units.iter_mut().zip(window.chunks_exact(4)).zip(keep) {
            *u = unit::<BIG>(c) & keep;
        }
        let mut bits = 0;
        for u in units {
            bits |= u;
        }
        if bits >= 0x80 {
            return push_value_cold::<BIG>(&rec[..chars * 4], out);
        }
        let mut bytes = [0u8; W];
        for (b, u) in bytes.iter_mut().zip(units) {
            *b = u as u8;
        }
        // The last non-NUL byte, 8 bytes a word (a compare per byte made a chain of W
        // conditional moves).
        let mut end = 0;
        for (i, c) in bytes.chunks(8).enumerate() {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            let x = u64::from_le_bytes(w);
            if x != 0 {
                end = i * 8 + 8 - x.leading_zeros() as usize / 8;
            }
        }
        let start = out.len();
        out.extend_from_slice(&bytes);
        out.truncate(start + end);
    }
}

/// The character (code point) that the code unit in the 4 bytes `c` (big-endian when
/// `big`) converts to: the unit when it is a Unicode scalar value, else U+FFFD.
#[inline(always)]
pub fn character_of(c: &[u8], big: bool) -> u32 {
    let u = if big {
        unit::<true>(c)
    } else {
        unit::<false>(c)
    };
    character(u)
}

/// The character code unit `u` converts to: itself when it is a Unicode scalar value,
/// else U+FFFD.
#[inline(always)]
fn character(u: u32) -> u32 {
    char::from_u32(u).unwrap_or(char::REPLACEMENT_CHARACTER) as u32
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

/// [`push_value`] kept out of [`push_windowed`]'s loop: inlined there, it made the
/// common ASCII value 35 % slower (11.5 ns against 8.5 per `<U12` value).
#[cold]
#[inline(never)]
fn push_value_cold<const BIG: bool>(rec: &[u8], out: &mut Vec<u8>) {
    push_value::<BIG>(rec, out)
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
    let u = character(u);
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
        let mut next = move || crate::chunk::xorshift(&mut seed);
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
        for chars in [0usize, 1, 3, 4, 5, 8, 12, 16, 17, 32, 33] {
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

#[cfg(test)]
mod timing {
    use super::*;

    /// Per-value cost of the conversion (`cargo test --release --lib utf32_timing --
    /// --ignored --nocapture`): 10,000 `<U12` values of 3–12 letters (480 KB, in cache, as
    /// a decoded block is), all ASCII and one in ten with a non-ASCII letter.
    #[test]
    #[ignore]
    fn utf32_timing() {
        let chars = 12;
        let n = 10_000;
        for non_ascii_every in [0usize, 10] {
            let mut x = 88172645463325252u64;
            let mut data = Vec::with_capacity(n * chars * 4);
            for i in 0..n {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let len = 3 + (x % 10) as usize;
                for k in 0..chars {
                    let u = match k {
                        k if k >= len => 0,
                        0 if non_ascii_every > 0 && i % non_ascii_every == 0 => 0xe9,
                        k => 0x61 + ((x >> (k * 5)) % 26) as u32,
                    };
                    data.extend_from_slice(&u.to_le_bytes());
                }
            }
            let mut best = f64::MAX;
            for _ in 0..300 {
                let t = std::time::Instant::now();
                std::hint::black_box(utf32_to_arrow(&data, n, chars * 4, 0, chars, false));
                best = best.min(t.elapsed().as_secs_f64());
            }
            println!(
                "non-ASCII 1 in {non_ascii_every}: {:.2} ns/value",
                best * 1e9 / n as f64
            );
        }
    }
}
