//! x86_64 kernels of the bit unshuffle's first pass: the 8×8 bit transpose of one byte
//! plane (`filter::bitshuffle`), 16 row bytes per step with SSE2 (the x86_64 baseline)
//! and 32 with AVX2 (chosen at run time by the caller), the bit transpose itself one GFNI
//! instruction where the CPU has GFNI (Intel since Ice Lake, AMD since Zen 4).

use super::x86_lanes::Lanes;
use std::arch::x86_64::*;

/// 16 row bytes at a time: an 8×16 byte transpose (unpack rounds) puts byte `k` of the
/// 8 rows into one 64-bit lane, then the 8×8 bit transpose of `transpose8` runs on
/// both lanes at once and 16 output bytes are stored.
/// `start`: row bytes already done (by the AVX2 kernel); returns how many more.
pub(super) fn bit_untranspose_plane(
    plane: &[u8],
    rowlen: usize,
    out: &mut [u8],
    start: usize,
) -> usize {
    // `plane` and `out` are already advanced by `start` row bytes / `8 * start` bytes.
    let done = (rowlen - start) / 16 * 16;
    for k in (0..done).step_by(16) {
        // SAFETY: SSE2 is part of the x86_64 baseline; the loads are of exactly 16 bytes
        // (slice-checked: k + 16 <= done <= rowlen and the caller checked
        // 8 * rowlen <= len).
        let (b0123, b4567) = unsafe {
            let mut r = [__m128i::zero(); 8];
            for (b, slot) in r.iter_mut().enumerate() {
                *slot = __m128i::load(&plane[b * rowlen + k..b * rowlen + k + 16]);
            }
            rows_to_bands(r)
        };
        // The 128 output bytes of row bytes k .. k + 16, checked once.
        let o = &mut out[8 * k..8 * k + 128];
        for q in 0..4 {
            // SAFETY: SSE2 register ops (x86_64 baseline).
            let pair = unsafe { __m128i::unpack::<4>(b0123[q], b4567[q]) };
            // Register i = 2q + h holds row bytes k + 2i and k + 2i + 1.
            for (h, v) in [pair.0, pair.1].into_iter().enumerate() {
                let i = 2 * q + h;
                let dst = &mut o[16 * i..16 * i + 16];
                // SAFETY: `dst` is exactly 16 writable bytes; unaligned store is allowed;
                // `transpose8x2` is register-only.
                unsafe { _mm_storeu_si128(dst.as_mut_ptr().cast(), transpose8x2(v)) };
            }
        }
    }
    done
}

/// The AVX2 twin of [`bit_untranspose_plane`]: 32 row bytes per step (each 128-bit
/// lane runs the SSE2 unpack network on its 16 bytes). Returns the row bytes done.
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn bit_untranspose_plane_avx2(
    plane: &[u8],
    rowlen: usize,
    out: &mut [u8],
) -> usize {
    // SAFETY: this function runs with AVX2.
    unsafe { plane_steps::<false>(plane, rowlen, out) }
}

/// [`bit_untranspose_plane_avx2`] with each 8×8 bit transpose one GFNI affine
/// transformation (`vgf2p8affineqb`) instead of [`transpose8x4`]'s 18 operations.
///
/// # Safety
/// The CPU must support AVX2 and GFNI.
#[target_feature(enable = "avx2,gfni")]
pub(super) unsafe fn bit_untranspose_plane_gfni(
    plane: &[u8],
    rowlen: usize,
    out: &mut [u8],
) -> usize {
    // SAFETY: this function runs with AVX2 and GFNI.
    unsafe { plane_steps::<true>(plane, rowlen, out) }
}

/// The steps of [`bit_untranspose_plane_avx2`] (`GFNI` false) and
/// [`bit_untranspose_plane_gfni`].
///
/// # Safety
/// AVX2, and GFNI when `GFNI`.
#[inline(always)]
unsafe fn plane_steps<const GFNI: bool>(plane: &[u8], rowlen: usize, out: &mut [u8]) -> usize {
    let done = rowlen / 32 * 32;
    for k in (0..done).step_by(32) {
        // SAFETY: AVX2, guaranteed by the caller; the loads are of exactly 32 bytes
        // (slice-checked).
        let (b0123, b4567) = unsafe {
            let mut r = [__m256i::zero(); 8];
            for (b, slot) in r.iter_mut().enumerate() {
                // With GFNI the rows go in reverse order, so that each 64-bit lane holds
                // the 8×8 bit matrix with its bytes reversed, as `transpose8_gfni` takes it.
                let row = if GFNI { 7 - b } else { b };
                *slot = __m256i::load(&plane[row * rowlen + k..row * rowlen + k + 32]);
            }
            rows_to_bands(r)
        };
        // The 256 output bytes of row bytes k .. k + 32, checked once.
        let o = &mut out[8 * k..8 * k + 256];
        for q in 0..4 {
            // SAFETY: register ops with AVX2 (and GFNI when `GFNI`), guaranteed by the
            // caller.
            let pair = unsafe { __m256i::unpack::<4>(b0123[q], b4567[q]) };
            for (h, v) in [pair.0, pair.1].into_iter().enumerate() {
                let i = 2 * q + h;
                // SAFETY: as above.
                let t = unsafe {
                    if GFNI {
                        transpose8_gfni(v)
                    } else {
                        transpose8x4(v)
                    }
                };
                // Register i holds row bytes k + 2i, k + 2i + 1 in its low lane and
                // k + 16 + 2i, k + 17 + 2i in its high lane.
                let lo = &mut o[16 * i..16 * i + 16];
                // SAFETY: `lo` is exactly 16 writable bytes; unaligned store.
                unsafe { _mm_storeu_si128(lo.as_mut_ptr().cast(), _mm256_castsi256_si128(t)) };
                let hi = &mut o[128 + 16 * i..128 + 16 * i + 16];
                // SAFETY: as above.
                unsafe {
                    _mm_storeu_si128(hi.as_mut_ptr().cast(), _mm256_extracti128_si256::<1>(t))
                };
            }
        }
    }
    done
}

/// `filter::bitshuffle::transpose8` on the four 64-bit lanes of `x`, each given with its
/// bytes reversed (byte 7 − r holding row r). `vgf2p8affineqb` makes byte c of its result
/// from byte c of the data operand, here the unit vector `1 << c`: bit b is the parity of
/// that byte AND byte 7 − b of the matrix, that is bit c of byte 7 − b of the matrix, which
/// is bit c of row b. So byte c gets column c, with row b in bit b: the transpose.
///
/// # Safety
/// AVX2 and GFNI. No memory access.
#[inline(always)]
unsafe fn transpose8_gfni(x: __m256i) -> __m256i {
    // SAFETY: register ops with AVX and GFNI, guaranteed by the caller.
    unsafe {
        let units = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
        _mm256_gf2p8affine_epi64_epi8::<0>(units, x)
    }
}

/// `filter::bitshuffle::transpose8` on the four 64-bit lanes.
#[target_feature(enable = "avx2")]
fn transpose8x4(mut x: __m256i) -> __m256i {
    let t = _mm256_and_si256(
        _mm256_xor_si256(x, _mm256_srli_epi64::<7>(x)),
        _mm256_set1_epi64x(0x00AA_00AA_00AA_00AA),
    );
    x = _mm256_xor_si256(_mm256_xor_si256(x, t), _mm256_slli_epi64::<7>(t));
    let t = _mm256_and_si256(
        _mm256_xor_si256(x, _mm256_srli_epi64::<14>(x)),
        _mm256_set1_epi64x(0x0000_CCCC_0000_CCCC),
    );
    x = _mm256_xor_si256(_mm256_xor_si256(x, t), _mm256_slli_epi64::<14>(t));
    let t = _mm256_and_si256(
        _mm256_xor_si256(x, _mm256_srli_epi64::<28>(x)),
        _mm256_set1_epi64x(0x0000_0000_F0F0_F0F0),
    );
    _mm256_xor_si256(_mm256_xor_si256(x, t), _mm256_slli_epi64::<28>(t))
}

/// The first two rounds of an 8×16 byte transpose (per 128-bit lane): `r[b]` = bytes
/// k..k+16 of row b → `b0123[q]` / `b4567[q]` holding rows 0–3 / 4–7 for row bytes
/// `4q .. 4q + 4`. The third round, `unpack::<4>(b0123[q], b4567[q])`, then gives
/// `[r0[4q], …, r7[4q], r0[4q+1], …, r7[4q+1]]` and the same for `4q + 2`, `4q + 3`: byte
/// `k'` of the 8 rows in one 64-bit lane. The callers run that round as they store, with
/// straight-line stores into one checked 128- or 256-byte slice (an iterator over the
/// results kept the registers on the stack: the whole bitshuffled chunk ran 1.5× slower).
///
/// # Safety
/// `V`'s instruction set (see [`Lanes`]). No memory access.
#[inline(always)]
unsafe fn rows_to_bands<V: Lanes>(r: [V; 8]) -> ([V; 4], [V; 4]) {
    // SAFETY: register ops, guaranteed by the caller.
    unsafe {
        let mut a = [V::zero(); 8];
        for j in 0..4 {
            (a[2 * j], a[2 * j + 1]) = V::unpack::<1>(r[2 * j], r[2 * j + 1]);
        }
        let (x, y) = (V::unpack::<2>(a[0], a[2]), V::unpack::<2>(a[1], a[3]));
        let b0123 = [x.0, x.1, y.0, y.1];
        let (x, y) = (V::unpack::<2>(a[4], a[6]), V::unpack::<2>(a[5], a[7]));
        (b0123, [x.0, x.1, y.0, y.1])
    }
}

/// `filter::bitshuffle::transpose8` on both 64-bit lanes.
///
/// # Safety
/// Needs SSE2 (x86_64 baseline). No memory access.
unsafe fn transpose8x2(mut x: __m128i) -> __m128i {
    // SAFETY: SSE2 register ops, guaranteed by the caller.
    unsafe {
        let step = |x: __m128i, shift: i32, mask: i64| -> __m128i {
            let m = _mm_set1_epi64x(mask);
            let t = match shift {
                7 => _mm_and_si128(_mm_xor_si128(x, _mm_srli_epi64::<7>(x)), m),
                14 => _mm_and_si128(_mm_xor_si128(x, _mm_srli_epi64::<14>(x)), m),
                _ => _mm_and_si128(_mm_xor_si128(x, _mm_srli_epi64::<28>(x)), m),
            };
            let tl = match shift {
                7 => _mm_slli_epi64::<7>(t),
                14 => _mm_slli_epi64::<14>(t),
                _ => _mm_slli_epi64::<28>(t),
            };
            _mm_xor_si128(_mm_xor_si128(x, t), tl)
        };
        x = step(x, 7, 0x00AA_00AA_00AA_00AA);
        x = step(x, 14, 0x0000_CCCC_0000_CCCC);
        step(x, 28, 0x0000_0000_F0F0_F0F0)
    }
}
