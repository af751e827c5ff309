//! x86_64 kernels of the bit unshuffle's first pass: the 8×8 bit transpose of one byte
//! plane (`filter::bitshuffle`), 16 row bytes per step with SSE2 (the x86_64 baseline)
//! and 32 with AVX2 (chosen at run time by the caller).

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
        // SAFETY: SSE2 is part of the x86_64 baseline; a register op.
        let mut r = [unsafe { _mm_setzero_si128() }; 8];
        for (b, slot) in r.iter_mut().enumerate() {
            let row = &plane[b * rowlen + k..b * rowlen + k + 16];
            // SAFETY: `row` is exactly 16 readable bytes (bounds checked by the slice:
            // k + 16 <= done <= rowlen and the caller checked 8 * rowlen <= len);
            // unaligned loads are allowed.
            *slot = unsafe { _mm_loadu_si128(row.as_ptr().cast()) };
        }
        // SAFETY: register-only SSE2 ops (baseline on x86_64).
        let lanes = unsafe { rows_to_lanes(r) };
        for (i, v) in lanes.iter().enumerate() {
            let o = &mut out[8 * (k + 2 * i)..8 * (k + 2 * i) + 16];
            // SAFETY: `o` is exactly 16 writable bytes; unaligned store is allowed;
            // `transpose8x2` is register-only.
            unsafe { _mm_storeu_si128(o.as_mut_ptr().cast(), transpose8x2(*v)) };
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
    let done = rowlen / 32 * 32;
    for k in (0..done).step_by(32) {
        let mut r = [_mm256_setzero_si256(); 8];
        for (b, slot) in r.iter_mut().enumerate() {
            let row = &plane[b * rowlen + k..b * rowlen + k + 32];
            // SAFETY: `row` is exactly 32 readable bytes (slice-checked); unaligned
            // loads are allowed.
            *slot = unsafe { _mm256_loadu_si256(row.as_ptr().cast()) };
        }
        let a = [
            _mm256_unpacklo_epi8(r[0], r[1]),
            _mm256_unpackhi_epi8(r[0], r[1]),
            _mm256_unpacklo_epi8(r[2], r[3]),
            _mm256_unpackhi_epi8(r[2], r[3]),
            _mm256_unpacklo_epi8(r[4], r[5]),
            _mm256_unpackhi_epi8(r[4], r[5]),
            _mm256_unpacklo_epi8(r[6], r[7]),
            _mm256_unpackhi_epi8(r[6], r[7]),
        ];
        let b0123 = [
            _mm256_unpacklo_epi16(a[0], a[2]),
            _mm256_unpackhi_epi16(a[0], a[2]),
            _mm256_unpacklo_epi16(a[1], a[3]),
            _mm256_unpackhi_epi16(a[1], a[3]),
        ];
        let b4567 = [
            _mm256_unpacklo_epi16(a[4], a[6]),
            _mm256_unpackhi_epi16(a[4], a[6]),
            _mm256_unpacklo_epi16(a[5], a[7]),
            _mm256_unpackhi_epi16(a[5], a[7]),
        ];
        for q in 0..4 {
            for (h, v) in [
                _mm256_unpacklo_epi32(b0123[q], b4567[q]),
                _mm256_unpackhi_epi32(b0123[q], b4567[q]),
            ]
            .into_iter()
            .enumerate()
            {
                let t = transpose8x4(v);
                // Register i = 2q + h holds row bytes k + 2i, k + 2i + 1 in its low
                // lane and k + 16 + 2i, k + 17 + 2i in its high lane.
                let i = 2 * q + h;
                let lo = &mut out[8 * (k + 2 * i)..8 * (k + 2 * i) + 16];
                // SAFETY: `lo` is exactly 16 writable bytes; unaligned store.
                unsafe { _mm_storeu_si128(lo.as_mut_ptr().cast(), _mm256_castsi256_si128(t)) };
                let hi = &mut out[8 * (k + 16 + 2 * i)..8 * (k + 16 + 2 * i) + 16];
                // SAFETY: as above.
                unsafe {
                    _mm_storeu_si128(hi.as_mut_ptr().cast(), _mm256_extracti128_si256::<1>(t))
                };
            }
        }
    }
    done
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

/// `r[b]` = bytes k..k+16 of row b → 8 registers, register i holding
/// `[r0[2i], …, r7[2i], r0[2i+1], …, r7[2i+1]]`.
///
/// # Safety
/// Needs SSE2 (x86_64 baseline). No memory access.
unsafe fn rows_to_lanes(r: [__m128i; 8]) -> [__m128i; 8] {
    // SAFETY: SSE2 register ops, guaranteed by the caller.
    unsafe {
        let a = [
            _mm_unpacklo_epi8(r[0], r[1]),
            _mm_unpackhi_epi8(r[0], r[1]),
            _mm_unpacklo_epi8(r[2], r[3]),
            _mm_unpackhi_epi8(r[2], r[3]),
            _mm_unpacklo_epi8(r[4], r[5]),
            _mm_unpackhi_epi8(r[4], r[5]),
            _mm_unpacklo_epi8(r[6], r[7]),
            _mm_unpackhi_epi8(r[6], r[7]),
        ];
        // b0123[q] / b4567[q]: rows 0–3 / 4–7 for k = 4q .. 4q+4.
        let b0123 = [
            _mm_unpacklo_epi16(a[0], a[2]),
            _mm_unpackhi_epi16(a[0], a[2]),
            _mm_unpacklo_epi16(a[1], a[3]),
            _mm_unpackhi_epi16(a[1], a[3]),
        ];
        let b4567 = [
            _mm_unpacklo_epi16(a[4], a[6]),
            _mm_unpackhi_epi16(a[4], a[6]),
            _mm_unpacklo_epi16(a[5], a[7]),
            _mm_unpackhi_epi16(a[5], a[7]),
        ];
        let mut out = [_mm_setzero_si128(); 8];
        for q in 0..4 {
            out[2 * q] = _mm_unpacklo_epi32(b0123[q], b4567[q]);
            out[2 * q + 1] = _mm_unpackhi_epi32(b0123[q], b4567[q]);
        }
        out
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
