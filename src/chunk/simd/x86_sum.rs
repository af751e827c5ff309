//! x86_64 kernel of BYTEDELTA's undo (`filter::bytedelta`): the running sum mod 256 of a
//! byte stream, 16 bytes per step with SSE2 (the x86_64 baseline). Inside a register the
//! sum is four shifted byte additions (by 1, 2, 4 and 8 bytes); the carry (the sum so far,
//! repeated over the 16 bytes) is then added, and the register's own total added to the
//! carry: one addition on the chain from step to step.

use std::arch::x86_64::*;

/// Runs the sum over the first `stream.len() / 16 * 16` bytes of `stream` in place;
/// returns how many bytes it did (the portable loop continues from the last of them).
pub(super) fn running_sum(stream: &mut [u8]) -> usize {
    let done = stream.len() / 16 * 16;
    // SAFETY: SSE2 is part of the x86_64 baseline; register-only.
    let mut carry = unsafe { _mm_setzero_si128() };
    for piece in stream[..done].chunks_exact_mut(16) {
        // SAFETY: SSE2 (baseline); `piece` is exactly 16 readable and writable bytes, and
        // the unaligned load and store need no alignment; the rest is register-only.
        unsafe {
            let mut v = _mm_loadu_si128(piece.as_ptr().cast());
            v = _mm_add_epi8(v, _mm_slli_si128::<1>(v));
            v = _mm_add_epi8(v, _mm_slli_si128::<2>(v));
            v = _mm_add_epi8(v, _mm_slli_si128::<4>(v));
            v = _mm_add_epi8(v, _mm_slli_si128::<8>(v));
            _mm_storeu_si128(piece.as_mut_ptr().cast(), _mm_add_epi8(v, carry));
            // Byte 15 (the register's total) over all 16: bytes 8-15 doubled, then
            // 12-15 doubled again, then the last 32-bit lane repeated.
            let high = _mm_unpackhi_epi8(v, v);
            let total = _mm_shuffle_epi32::<0xFF>(_mm_unpackhi_epi16(high, high));
            carry = _mm_add_epi8(carry, total);
        }
    }
    done
}
