//! Byte unshuffle (`spec/filters.md` §2): `dst[i*s + j] = src[j*ne + i]`, tail copied.
//!
//! The kernels read the `s` byte rows (planes) from separate slices, so a chunk decoder can
//! unshuffle straight from stored planes without first copying them together. Without a
//! SIMD kernel (other CPUs than x86_64, or `DATAFUSION_BLOSC2_SIMD=off`), it goes through
//! 64-bit words ([`words`]); the byte-by-byte [`unshuffle_rows_reference`] is the oracle of
//! both.

pub mod words;

/// Undoes the byte shuffle of `src` (group size `s`) into `dst` (same length).
/// Dispatches to a SIMD kernel when one exists for `s` on this CPU.
pub fn unshuffle(s: usize, src: &[u8], dst: &mut [u8]) {
    debug_assert_eq!(src.len(), dst.len());
    split(s, src, dst, unshuffle_rows);
}

/// `dst[i * s + j] = rows[j][i]` for `s = rows.len()` and `i < dst.len() / s`: the
/// unshuffle of a block whose planes lie in separate buffers (`dst.len()` a multiple of
/// `s`, every row at least `dst.len() / s` bytes).
pub fn unshuffle_rows(rows: &[&[u8]], dst: &mut [u8]) {
    if !crate::chunk::simd::unshuffle_rows(rows, dst) {
        unshuffle_rows_portable(rows, dst);
    }
}

/// The SIMD kernel alone (for tests): `false` when there is none for `s` on this CPU.
pub fn unshuffle_simd(s: usize, src: &[u8], dst: &mut [u8]) -> bool {
    split(s, src, dst, |rows, body| {
        crate::chunk::simd::unshuffle_rows(rows, body)
    })
}

/// The portable byte unshuffle: the oracle every SIMD kernel is tested against.
pub fn unshuffle_portable(s: usize, src: &[u8], dst: &mut [u8]) {
    split(s, src, dst, |rows, body| {
        unshuffle_rows_portable(rows, body)
    });
}

/// Cuts `src` into its `s` rows and runs `f(rows, body of dst)`, then copies the tail
/// that is not a whole element (or everything when there is nothing to unshuffle).
fn split<R: Default>(
    s: usize,
    src: &[u8],
    dst: &mut [u8],
    f: impl FnOnce(&[&[u8]], &mut [u8]) -> R,
) -> R {
    let len = src.len().min(dst.len());
    if s <= 1 || len < s {
        dst[..len].copy_from_slice(&src[..len]);
        return R::default();
    }
    let ne = len / s;
    let body = ne * s;
    dst[body..len].copy_from_slice(&src[body..len]);
    with_rows(
        s,
        |j| &src[j * ne..(j + 1) * ne],
        |rows| f(rows, &mut dst[..body]),
    )
}

/// Calls `f` with the `s` rows `row(0..s)`: on the stack up to 16 (the common typesizes;
/// no allocation per block), in a `Vec` beyond.
pub(crate) fn with_rows<'a, R>(
    s: usize,
    row: impl Fn(usize) -> &'a [u8],
    f: impl FnOnce(&[&'a [u8]]) -> R,
) -> R {
    if s <= 16 {
        let mut rows: [&[u8]; 16] = [&[]; 16];
        for (j, r) in rows.iter_mut().take(s).enumerate() {
            *r = row(j);
        }
        f(&rows[..s])
    } else {
        let rows: Vec<&[u8]> = (0..s).map(row).collect();
        f(&rows)
    }
}

/// The portable twin of [`unshuffle_rows`]: 8 elements at a time in 64-bit words
/// ([`words`]; typesizes 2, 4, 8 and 16 each their own), the last elements byte by byte
/// ([`unshuffle_rows_reference`]).
pub fn unshuffle_rows_portable(rows: &[&[u8]], dst: &mut [u8]) {
    let done = match rows.len() {
        1 => {
            let n = dst.len();
            dst.copy_from_slice(&rows[0][..n]);
            return;
        }
        2 => words::unshuffle2(rows, dst),
        4 => words::unshuffle4(rows, dst),
        8 => words::unshuffle8(rows, dst),
        16 => words::unshuffle16(rows, dst),
        _ => words::unshuffle_any(rows, dst),
    };
    unshuffle_from(rows, dst, done);
}

/// The byte-by-byte unshuffle of separate rows: the oracle the portable words and every
/// SIMD kernel are tested against, and the path of typesizes that have no faster one.
pub fn unshuffle_rows_reference(rows: &[&[u8]], dst: &mut [u8]) {
    unshuffle_from(rows, dst, 0);
}

/// Elements `from..` of [`unshuffle_rows_reference`] (`from` a multiple of 16 or the
/// number of elements): tiles of 16 elements, 16 contiguous bytes of each of the `s` rows
/// written into one contiguous `16 * s`-byte output run, which stays in L1 until it is
/// complete (row by row over the whole block instead, every output cache line would be
/// written `s` times, far apart), then the last elements one by one.
fn unshuffle_from(rows: &[&[u8]], dst: &mut [u8], from: usize) {
    let s = rows.len();
    if s == 0 {
        return;
    }
    let ne = dst.len() / s;
    let first = from.div_ceil(16);
    let tiles = ne / 16;
    let head_end = (first * 16).min(ne);
    let one_by_one = |dst: &mut [u8], elements: std::ops::Range<usize>| {
        for i in elements {
            for (j, row) in rows.iter().enumerate() {
                dst[i * s + j] = row[i];
            }
        }
    };
    one_by_one(dst, from..head_end);
    for t in first..tiles {
        let out = &mut dst[t * 16 * s..(t + 1) * 16 * s];
        for (j, row) in rows.iter().enumerate() {
            let w: &[u8; 16] = row[t * 16..t * 16 + 16].try_into().expect("16 bytes");
            for (i, &b) in w.iter().enumerate() {
                out[i * s + j] = b;
            }
        }
    }
    one_by_one(dst, (tiles * 16).max(head_end)..ne);
}

/// Forward byte shuffle (writer side), used by tests and benches to make inputs.
pub fn shuffle(s: usize, src: &[u8], dst: &mut [u8]) {
    let len = src.len();
    if s <= 1 || len < s {
        dst.copy_from_slice(src);
        return;
    }
    let ne = len / s;
    for i in 0..ne {
        for j in 0..s {
            dst[j * ne + i] = src[i * s + j];
        }
    }
    dst[ne * s..].copy_from_slice(&src[ne * s..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `s` random rows of `ne` bytes, some 1 or 2 longer (as a chunk decoder passes them).
    pub(super) fn random_rows(seed: &mut u64, s: usize, ne: usize) -> Vec<Vec<u8>> {
        (0..s)
            .map(|j| crate::chunk::random_bytes(seed, ne + j % 3))
            .collect()
    }

    /// Rows in separate buffers (some longer than needed), as a chunk decoder passes
    /// them: the dispatched kernel equals the portable one.
    #[test]
    fn separate_rows_equal_portable() {
        let mut seed = 41u64;
        for s in [2usize, 3, 4, 8, 16, 17] {
            for ne in [0usize, 1, 15, 16, 31, 32, 33, 100, 1000] {
                let rows = random_rows(&mut seed, s, ne);
                let refs: Vec<&[u8]> = rows.iter().map(Vec::as_slice).collect();
                let mut fast = vec![0u8; s * ne];
                let mut slow = vec![1u8; s * ne];
                unshuffle_rows(&refs, &mut fast);
                unshuffle_rows_portable(&refs, &mut slow);
                assert_eq!(fast, slow, "s={s} ne={ne}");
                for i in 0..ne {
                    for j in 0..s {
                        assert_eq!(slow[i * s + j], rows[j][i]);
                    }
                }
            }
        }
    }

    /// The portable unshuffle (words where there are some) equals the byte loop for every
    /// typesize and every length around the group and tile sizes.
    #[test]
    fn portable_equals_reference() {
        let mut seed = 43u64;
        for s in 1..=20usize {
            for ne in (0..=40).chain([63, 64, 65, 1000]) {
                let rows = random_rows(&mut seed, s, ne);
                let refs: Vec<&[u8]> = rows.iter().map(Vec::as_slice).collect();
                let mut want = vec![0u8; s * ne];
                let mut got = vec![1u8; s * ne];
                unshuffle_rows_reference(&refs, &mut want);
                unshuffle_rows_portable(&refs, &mut got);
                assert_eq!(got, want, "s={s} ne={ne}");
            }
        }
    }

    #[test]
    fn roundtrip_every_typesize() {
        for s in 1..=20 {
            for len in [0usize, 1, 7, 16, 33, 100, 257, 1000] {
                let src: Vec<u8> = (0..len).map(|i| (i * 31 + s) as u8).collect();
                let mut sh = vec![0; len];
                shuffle(s, &src, &mut sh);
                let mut back = vec![0; len];
                unshuffle_portable(s, &sh, &mut back);
                assert_eq!(back, src, "s={s} len={len}");
            }
        }
    }
}
