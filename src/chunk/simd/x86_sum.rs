//! x86_64 kernels of BYTEDELTA's undo (`filter::bytedelta`): the running sum mod 256 of a
//! byte stream, with SSE2 (the x86_64 baseline, 16 bytes per step) or AVX2 (chosen at run
//! time by the caller, 32). The carry (the sum so far, repeated over the register) is
//! added to each step's own running sum, and the step's total added to the carry: one
//! addition on the chain from step to step.
//!
//! - SSE2: the running sum inside a register is four shifted additions (by 1, 2, 4 and 8
//!   bytes), its total spread by three unpacks and shuffles: seven shuffles per 16 bytes.
//! - AVX2: three additions shifted within the 64-bit lanes (8, 16 and 32 bits: shifts,
//!   not shuffles); each 64-bit lane's total added to the one above it within a 128-bit
//!   lane (`vpshufb`), the low 128-bit lane's total to the high one and the step's total
//!   spread (two `vpshufb`, two lane permutes): five shuffles per 32 bytes. The SSSE3
//!   form of the same at 16 bytes (VEX-less, two shuffles and seven register copies per
//!   step) ran 15 GB/s here, a quarter of the unshuffle's speed.

use std::arch::x86_64::*;

/// The running sum of `len / 16 * 16` bytes from `src` to `dst` (which may be the same
/// memory), SSE2; returns how many bytes it did.
///
/// # Safety
/// `src` must be valid for reads and `dst` for writes of `len` bytes; the two ranges are
/// either the same or do not overlap.
pub(super) unsafe fn running_sum_sse2(src: *const u8, dst: *mut u8, len: usize) -> usize {
    let done = len / 16 * 16;
    // SAFETY (whole body): SSE2 is part of the x86_64 baseline; every load and store is of
    // 16 bytes at `i < done <= len`, within the ranges the caller vouches for, unaligned
    // access being allowed; a step reads its 16 bytes before it writes them, so the same
    // memory for both is fine.
    unsafe {
        let mut carry = _mm_setzero_si128();
        let mut i = 0;
        while i < done {
            let mut v = _mm_loadu_si128(src.add(i).cast());
            v = _mm_add_epi8(v, _mm_slli_si128::<1>(v));
            v = _mm_add_epi8(v, _mm_slli_si128::<2>(v));
            v = _mm_add_epi8(v, _mm_slli_si128::<4>(v));
            v = _mm_add_epi8(v, _mm_slli_si128::<8>(v));
            _mm_storeu_si128(dst.add(i).cast(), _mm_add_epi8(v, carry));
            // Byte 15 (the total) over all 16: bytes 8-15 doubled, 12-15 doubled again,
            // then the last 32-bit lane repeated.
            let high = _mm_unpackhi_epi8(v, v);
            let total = _mm_shuffle_epi32::<0xFF>(_mm_unpackhi_epi16(high, high));
            carry = _mm_add_epi8(carry, total);
            i += 16;
        }
    }
    done
}

/// [`running_sum_sse2`] with AVX2, 32 bytes per step (see the module docs); the bytes
/// after the last whole 32 are left to the caller.
///
/// # Safety
/// As [`running_sum_sse2`], and the CPU must have AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn running_sum_avx2(src: *const u8, dst: *mut u8, len: usize) -> usize {
    let done = len / 32 * 32;
    // SAFETY (whole body): AVX2 is vouched for by the caller; every load and store is of
    // 32 bytes at `i < done <= len`, within the ranges the caller vouches for, unaligned
    // access being allowed; a step reads its 32 bytes before it writes them.
    unsafe {
        // Byte 7 of each 128-bit lane into its bytes 8-15 (a set top bit selects zero).
        let low_total = _mm256_setr_epi8(
            -1, -1, -1, -1, -1, -1, -1, -1, 7, 7, 7, 7, 7, 7, 7, 7, //
            -1, -1, -1, -1, -1, -1, -1, -1, 7, 7, 7, 7, 7, 7, 7, 7,
        );
        let lane_total = _mm256_set1_epi8(15);
        let mut carry = _mm256_setzero_si256();
        let mut i = 0;
        while i < done {
            let mut v = _mm256_loadu_si256(src.add(i).cast());
            // Byte-wise additions of each 64-bit lane shifted by 1, 2 and 4 bytes: the
            // bytes a shift moves past the lane's top are dropped, as the sum wants.
            v = _mm256_add_epi8(v, _mm256_slli_epi64::<8>(v));
            v = _mm256_add_epi8(v, _mm256_slli_epi64::<16>(v));
            v = _mm256_add_epi8(v, _mm256_slli_epi64::<32>(v));
            v = _mm256_add_epi8(v, _mm256_shuffle_epi8(v, low_total));
            // Each 128-bit lane's total over it; the low lane's added to the high lane.
            let totals = _mm256_shuffle_epi8(v, lane_total);
            v = _mm256_add_epi8(v, _mm256_permute2x128_si256::<0x08>(totals, totals));
            _mm256_storeu_si256(dst.add(i).cast(), _mm256_add_epi8(v, carry));
            // The step's total (byte 31) over all 32 bytes, added to the carry.
            let step_total = _mm256_shuffle_epi8(v, lane_total);
            carry = _mm256_add_epi8(
                carry,
                _mm256_permute2x128_si256::<0x11>(step_total, step_total),
            );
            i += 32;
        }
    }
    done
}
