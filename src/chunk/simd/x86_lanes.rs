//! The SIMD register types the x86_64 kernels are generic over: SSE2's `__m128i` (the
//! x86_64 baseline) and AVX2's `__m256i`, so that one unpack network serves both widths.

use std::arch::x86_64::*;

/// A SIMD register the kernels run on: SSE2's `__m128i` or AVX2's `__m256i` (whose
/// unpacks work within each 128-bit lane, so one `__m256i` runs the network of two
/// `__m128i` side by side).
///
/// # Safety
/// Every method needs the register's instruction set, which the caller guarantees: SSE2
/// is part of the x86_64 baseline, AVX2 must have been detected at run time. The methods
/// are not themselves `target_feature` functions so that they can be `inline(always)`
/// into the callers that are.
pub(super) trait Lanes: Copy {
    /// Bytes in one register (elements per step of a row).
    const BYTES: usize;
    /// All zeros.
    unsafe fn zero() -> Self;
    /// The bytes of `src`, which must be exactly [`Lanes::BYTES`] long (checked).
    unsafe fn load(src: &[u8]) -> Self;
    /// Unpacks of `W`-byte groups (`W` = 1, 2, 4 or 8): the low halves of `a` and `b`
    /// interleaved, then the high halves (within each 128-bit lane).
    unsafe fn unpack<const W: usize>(a: Self, b: Self) -> (Self, Self);
    /// The 128-bit lane `k`.
    unsafe fn lane(self, k: usize) -> __m128i;
}

impl Lanes for __m128i {
    const BYTES: usize = 16;
    #[inline(always)]
    unsafe fn zero() -> Self {
        // SAFETY: SSE2, guaranteed by the caller; a register op.
        unsafe { _mm_setzero_si128() }
    }
    #[inline(always)]
    unsafe fn load(src: &[u8]) -> Self {
        assert_eq!(src.len(), 16);
        // SAFETY: `src` is 16 readable bytes (asserted); unaligned load.
        unsafe { _mm_loadu_si128(src.as_ptr().cast()) }
    }
    #[inline(always)]
    unsafe fn unpack<const W: usize>(a: Self, b: Self) -> (Self, Self) {
        // SAFETY: SSE2, guaranteed by the caller; register ops.
        unsafe {
            match W {
                1 => (_mm_unpacklo_epi8(a, b), _mm_unpackhi_epi8(a, b)),
                2 => (_mm_unpacklo_epi16(a, b), _mm_unpackhi_epi16(a, b)),
                4 => (_mm_unpacklo_epi32(a, b), _mm_unpackhi_epi32(a, b)),
                _ => (_mm_unpacklo_epi64(a, b), _mm_unpackhi_epi64(a, b)),
            }
        }
    }
    #[inline(always)]
    unsafe fn lane(self, _k: usize) -> __m128i {
        self
    }
}

impl Lanes for __m256i {
    const BYTES: usize = 32;
    #[inline(always)]
    unsafe fn zero() -> Self {
        // SAFETY: AVX, guaranteed by the caller; a register op.
        unsafe { _mm256_setzero_si256() }
    }
    #[inline(always)]
    unsafe fn load(src: &[u8]) -> Self {
        assert_eq!(src.len(), 32);
        // SAFETY: `src` is 32 readable bytes (asserted); unaligned load; AVX guaranteed
        // by the caller.
        unsafe { _mm256_loadu_si256(src.as_ptr().cast()) }
    }
    #[inline(always)]
    unsafe fn unpack<const W: usize>(a: Self, b: Self) -> (Self, Self) {
        // SAFETY: AVX2, guaranteed by the caller; register ops.
        unsafe {
            match W {
                1 => (_mm256_unpacklo_epi8(a, b), _mm256_unpackhi_epi8(a, b)),
                2 => (_mm256_unpacklo_epi16(a, b), _mm256_unpackhi_epi16(a, b)),
                4 => (_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b)),
                _ => (_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b)),
            }
        }
    }
    #[inline(always)]
    unsafe fn lane(self, k: usize) -> __m128i {
        // SAFETY: AVX2, guaranteed by the caller; register ops.
        unsafe {
            if k == 0 {
                _mm256_castsi256_si128(self)
            } else {
                _mm256_extracti128_si256::<1>(self)
            }
        }
    }
}
