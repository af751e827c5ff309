//! Bit unshuffle (`spec/filters.md` §3), with the Blosc1 and Blosc2 rules for blocks whose
//! element count is not a multiple of 8.

use super::shuffle::words;

/// Transposes an 8×8 bit matrix held in a u64 (byte r, bit c) → (byte c, bit r).
#[inline]
pub fn transpose8(mut x: u64) -> u64 {
    let t = (x ^ (x >> 7)) & 0x00AA_00AA_00AA_00AA;
    x = x ^ t ^ (t << 7);
    let t = (x ^ (x >> 14)) & 0x0000_CCCC_0000_CCCC;
    x = x ^ t ^ (t << 14);
    let t = (x ^ (x >> 28)) & 0x0000_0000_F0F0_F0F0;
    x ^ t ^ (t << 28)
}

/// Undoes the bitshuffle of a block. `s` = typesize; `blosc1` selects the version ≤ 2 rule.
pub fn bitunshuffle(s: usize, blosc1: bool, src: &[u8], dst: &mut [u8]) {
    let len = src.len();
    if s == 0 {
        dst.copy_from_slice(src);
        return;
    }
    let n = len / s;
    let m = if blosc1 {
        if !n.is_multiple_of(8) { 0 } else { n }
    } else {
        n - n % 8
    };
    if m == 0 {
        dst.copy_from_slice(src);
        return;
    }
    untranspose(s, m, src, dst, true);
    dst[m * s..].copy_from_slice(&src[m * s..]);
}

/// Portable bit-untranspose of the first `m` (multiple of 8) elements of size `s`: the
/// oracle the SIMD path is tested against.
pub fn bitunshuffle_portable(s: usize, m: usize, src: &[u8], dst: &mut [u8]) {
    untranspose(s, m, src, dst, false);
}

/// Two passes (optimization notes: `notes.md`): first each byte plane `j` (8 bit rows) is
/// untransposed into `m` contiguous bytes — an 8×8 bit transpose per 8 elements, 16 row
/// bytes at a time with SIMD — then the planes are interleaved by the byte unshuffle. For
/// `s = 1` the plane is the output.
fn untranspose(s: usize, m: usize, src: &[u8], dst: &mut [u8], simd: bool) {
    let rowlen = m / 8;
    let plane_pass = |j: usize, out: &mut [u8]| {
        let plane = &src[8 * j * rowlen..8 * (j + 1) * rowlen];
        let done = if simd {
            crate::chunk::simd::bit_untranspose_plane(plane, rowlen, out)
        } else {
            0
        };
        let r: [&[u8]; 8] = std::array::from_fn(|b| &plane[b * rowlen..(b + 1) * rowlen]);
        // 8 row bytes at a time, each bit row's 8 as one word: the bits transposed across
        // the words byte position by byte position (word t then holds bit t of every
        // element, row by row), then the bytes, so that word p holds the 8 output bytes
        // of row byte k + p. Before, each output word gathered its 8 row bytes with 8
        // byte loads and went through `transpose8`: 1.5× the operations.
        let first = done.div_ceil(8);
        let whole = rowlen / 8;
        for (q, o) in out.chunks_exact_mut(64).enumerate().take(whole).skip(first) {
            let mut x: [u64; 8] = std::array::from_fn(|b| words::word(r[b], 8 * q));
            words::transpose_bits8(&mut x);
            words::transpose_bytes8(&mut x);
            for (p, w) in x.iter().enumerate() {
                o[8 * p..8 * p + 8].copy_from_slice(&w.to_le_bytes());
            }
        }
        // The row bytes the words left: those before the first whole word after `done`,
        // and those after the last whole word.
        let rest = (done..(8 * first).min(rowlen)).chain(8 * whole.max(first)..rowlen);
        for k in rest {
            let o = &mut out[8 * k..8 * k + 8];
            let x = u64::from_le_bytes([
                r[0][k], r[1][k], r[2][k], r[3][k], r[4][k], r[5][k], r[6][k], r[7][k],
            ]);
            o.copy_from_slice(&transpose8(x).to_le_bytes());
        }
    };
    if s == 1 {
        plane_pass(0, &mut dst[..m]);
        return;
    }
    PLANES.with(|cell| {
        let mut planes = cell.borrow_mut();
        // One cache line between planes, so that planes of power-of-two lengths do not all
        // start in one L1 set (`simd::rows_collide`).
        let stride = m + 64;
        planes.resize(s * stride, 0);
        for (j, plane) in planes.chunks_exact_mut(stride).enumerate() {
            plane_pass(j, &mut plane[..m]);
        }
        let row = |j: usize| &planes[j * stride..j * stride + m];
        super::shuffle::with_rows(s, row, |rows| {
            if simd {
                super::shuffle::unshuffle_rows(rows, &mut dst[..s * m]);
            } else {
                super::shuffle::unshuffle_rows_portable(rows, &mut dst[..s * m]);
            }
        });
    });
}

thread_local! {
    static PLANES: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Forward bitshuffle (Blosc2 rule), used by tests and benches to make inputs.
pub fn bitshuffle(s: usize, src: &[u8], dst: &mut [u8]) {
    let n = src.len() / s.max(1);
    let m = n - n % 8;
    let rowlen = m / 8;
    dst.copy_from_slice(src);
    for j in 0..s {
        for k in 0..rowlen {
            let x = u64::from_le_bytes(std::array::from_fn(|t| src[(8 * k + t) * s + j]));
            let y = transpose8(x).to_le_bytes();
            for (b, &byte) in y.iter().enumerate() {
                dst[(8 * j + b) * rowlen + k] = byte;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transpose_is_an_involution_and_moves_bits() {
        assert_eq!(transpose8(1 << 1), 1 << 8);
        let x = 0x0123_4567_89AB_CDEF;
        assert_eq!(transpose8(transpose8(x)), x);
    }

    #[test]
    fn simd_bitunshuffle_equals_portable() {
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        for s in 1..=17usize {
            for n in [8usize, 16, 120, 128, 136, 256, 384, 392, 1000, 4096, 4104] {
                let src: Vec<u8> = crate::chunk::random_bytes(&mut seed, n * s);
                let mut sh = vec![0; src.len()];
                bitshuffle(s, &src, &mut sh);
                let mut fast = vec![0; src.len()];
                let mut slow = vec![0; src.len()];
                bitunshuffle(s, false, &sh, &mut fast);
                bitunshuffle_portable(s, n, &sh, &mut slow);
                assert_eq!(fast, slow, "s={s} n={n}");
                assert_eq!(fast, src, "s={s} n={n}");
            }
        }
    }

    #[test]
    fn roundtrip_blosc2_rule() {
        for s in 1..=17 {
            for n in [0usize, 3, 8, 9, 64, 101] {
                let src: Vec<u8> = (0..n * s + 2).map(|i| (i * 7 + 3) as u8).collect();
                let mut sh = vec![0; src.len()];
                bitshuffle(s, &src, &mut sh);
                let mut back = vec![0; src.len()];
                bitunshuffle(s, false, &sh, &mut back);
                assert_eq!(back, src, "s={s} n={n}");
            }
        }
    }
}
