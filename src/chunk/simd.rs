//! Vectorized filter kernels: the only `unsafe` code of the crate.
//!
//! Each kernel has a portable twin in `chunk::filter` that tests compare it with on random
//! inputs. The choice is made once per process: `DATAFUSION_BLOSC2_SIMD=off` forces the
//! portable path without recompiling. Returning `false` means "no kernel here, use the
//! portable one".
#![allow(unsafe_code)]

use std::sync::OnceLock;

fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        !matches!(
            std::env::var("DATAFUSION_BLOSC2_SIMD").as_deref(),
            Ok("off") | Ok("0") | Ok("false")
        )
    })
}

/// Name of the kernel set in use (for `inspect` and benches).
pub fn active_kernels() -> &'static str {
    if !enabled() {
        return "portable (DATAFUSION_BLOSC2_SIMD=off)";
    }
    #[cfg(target_arch = "x86_64")]
    {
        "x86_64 sse2"
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        "portable"
    }
}

/// Byte unshuffle with a SIMD kernel when one exists for group size `s`.
pub fn unshuffle(s: usize, src: &[u8], dst: &mut [u8]) -> bool {
    if !enabled() || src.len() != dst.len() {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    {
        x86::unshuffle(s, src, dst)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (s, src, dst);
        false
    }
}

/// Bit unshuffle of `m` elements with a SIMD kernel (none yet: the portable kernel is used).
pub fn bitunshuffle(s: usize, m: usize, src: &[u8], dst: &mut [u8]) -> bool {
    let _ = (s, m, src, dst);
    false
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// SSE2 is part of the x86_64 baseline, so these kernels need no run-time detection.
    pub(super) fn unshuffle(s: usize, src: &[u8], dst: &mut [u8]) -> bool {
        let ne = src.len() / s.max(1);
        if ne < 16 {
            return false;
        }
        match s {
            2 => tiles::<2>(src, dst, ne),
            4 => tiles::<4>(src, dst, ne),
            8 => tiles::<8>(src, dst, ne),
            16 => tiles::<16>(src, dst, ne),
            _ => return false,
        }
        true
    }

    /// Processes full tiles of 16 elements with SSE2, the rest with scalar code.
    fn tiles<const S: usize>(src: &[u8], dst: &mut [u8], ne: usize) {
        let tiles = ne / 16;
        for t in 0..tiles {
            // SAFETY: SSE2 is part of the x86_64 baseline; a register op with no memory access.
            let mut v = [unsafe { _mm_setzero_si128() }; S];
            for (j, slot) in v.iter_mut().enumerate() {
                let row = &src[j * ne + t * 16..j * ne + t * 16 + 16];
                // SAFETY: `row` is exactly 16 readable bytes (slice bounds checked above);
                // `_mm_loadu_si128` has no alignment requirement.
                *slot = unsafe { _mm_loadu_si128(row.as_ptr().cast()) };
            }
            let out = interleave::<S>(v);
            let tile = &mut dst[t * 16 * S..(t + 1) * 16 * S];
            for (k, reg) in out.iter().enumerate() {
                let o = &mut tile[k * 16..k * 16 + 16];
                // SAFETY: `o` is exactly 16 writable bytes; unaligned store is allowed.
                unsafe { _mm_storeu_si128(o.as_mut_ptr().cast(), *reg) };
            }
        }
        for i in tiles * 16..ne {
            for j in 0..S {
                dst[i * S + j] = src[j * ne + i];
            }
        }
        let body = ne * S;
        dst[body..].copy_from_slice(&src[body..]);
    }

    /// Turns S registers (register j = byte j of 16 elements) into S registers holding the
    /// 16 elements in order (16*S bytes): log2(S) rounds of unpacklo/unpackhi.
    ///
    /// After round r, register `g * 2^r + e` holds byte group g (2^r bytes wide) of element
    /// group e (16 / 2^r elements); a round merges byte groups 2g and 2g+1 of the same
    /// element group into element groups 2e (lo) and 2e+1 (hi).
    fn interleave<const S: usize>(v: [__m128i; S]) -> [__m128i; S] {
        let mut cur = v;
        let mut width = 1;
        while width < S {
            let mut next = cur;
            for g2 in 0..S / width / 2 {
                for e in 0..width {
                    let (a, b) = (cur[2 * g2 * width + e], cur[(2 * g2 + 1) * width + e]);
                    // SAFETY: SSE2 is always available on x86_64; these are register ops.
                    let (lo, hi) = unsafe {
                        match width {
                            1 => (_mm_unpacklo_epi8(a, b), _mm_unpackhi_epi8(a, b)),
                            2 => (_mm_unpacklo_epi16(a, b), _mm_unpackhi_epi16(a, b)),
                            4 => (_mm_unpacklo_epi32(a, b), _mm_unpackhi_epi32(a, b)),
                            _ => (_mm_unpacklo_epi64(a, b), _mm_unpackhi_epi64(a, b)),
                        }
                    };
                    next[g2 * 2 * width + 2 * e] = lo;
                    next[g2 * 2 * width + 2 * e + 1] = hi;
                }
            }
            cur = next;
            width *= 2;
        }
        cur
    }
}

#[cfg(test)]
mod tests {
    use crate::chunk::filter::shuffle::{shuffle, unshuffle_portable};

    #[test]
    fn simd_unshuffle_equals_portable() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        for s in 1..=33usize {
            for len in [0usize, 1, 15, 16, 17, 63, 64, 65, 255, 256, 257, 1000, 4099] {
                let src: Vec<u8> = (0..len * s / 4 + len)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        seed as u8
                    })
                    .collect();
                let mut sh = vec![0; src.len()];
                shuffle(s, &src, &mut sh);
                let mut a = vec![0; src.len()];
                let mut b = vec![0; src.len()];
                unshuffle_portable(s, &sh, &mut a);
                if !super::unshuffle(s, &sh, &mut b) {
                    continue;
                }
                assert_eq!(a, b, "s={s} len={}", src.len());
                assert_eq!(a, src);
            }
        }
    }
}
