//! Adler-32 (RFC 1950 §8.2, the checksum that ends every zlib stream) with AVX-512 VNNI:
//! 64 bytes per step, the weighted sum in one `vpdpbusd`. The portable twin is
//! `zlib_rs::adler32::adler32` (AVX2 where the CPU has it), which tests compare this
//! kernel with, as well as a byte-at-a-time reading of the definition.
//!
//! The arithmetic. Over a run of `n` 64-byte steps `c_0 … c_{n-1}` that starts from the
//! sums `(a, b)`:
//! - `a` gains every byte: `Σ S_j`, `S_j` the byte sum of step `j`;
//! - `b` gains `a` once per byte: `64 n a`, plus each byte `x` at step `j`, position `i`
//!   weighted by the bytes from it to the run's end, `64 (n - 1 - j) + (64 - i)`.
//!
//! So three accumulators: `sums` (`Σ S_j` so far, per lane, `vpsadbw`), `prefix` (`sums`
//! added before each step: `Σ_j (n - 1 - j) S_j` at the end) and `dots` (`Σ (64 - i) x`,
//! `vpdpbusd` against the weights 64 … 1). Runs are short enough that no lane overflows:
//! a `dots` lane gains at most `4 · 255 · 64 = 65 280` per step, so a run of at most 8192
//! steps (512 KiB) stays under 2^32 with four accumulators taking turns; `sums` and
//! `prefix` have 64-bit lanes. Sums are reduced modulo 65521 after each run.

use std::arch::x86_64::*;

/// The Adler-32 modulus.
const BASE: u64 = 65521;

/// Bytes per run between reductions: 8192 steps of 64 (see the module docs).
pub(super) const RUN: usize = 64 * 8192;

/// Adler-32 of `data` continuing from `adler`, for the whole input.
///
/// # Safety
/// The CPU must have AVX-512F, AVX-512BW and AVX-512 VNNI.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub(super) unsafe fn adler32_vnni(adler: u32, data: &[u8]) -> u32 {
    let mut a = u64::from(adler & 0xffff);
    let mut b = u64::from(adler >> 16);
    let mut rest = data;
    while rest.len() >= 64 {
        let take = rest.len().min(RUN) / 64 * 64;
        let (run, tail) = rest.split_at(take);
        let (da, db) = run_sums(run);
        b = (b + (take as u64) * a + db) % BASE;
        a = (a + da) % BASE;
        rest = tail;
    }
    for &x in rest {
        a += u64::from(x);
        b += a;
    }
    ((b % BASE) << 16 | (a % BASE)) as u32
}

/// For `run` (a multiple of 64 bytes, at most [`RUN`]): the byte sum, and what the bytes
/// add to `b` besides `64 n a` (module docs), both unreduced.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
fn run_sums(run: &[u8]) -> (u64, u64) {
    // Byte i of a step is weighted 64 - i.
    let weights = _mm512_set_epi8(
        1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25,
        26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48,
        49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64,
    );
    let zero = _mm512_setzero_si512();
    let mut sums = zero;
    let mut prefix = zero;
    let mut dots = [zero; 4];
    let mut steps = run.chunks_exact(256);
    for four in &mut steps {
        for (k, step) in four.chunks_exact(64).enumerate() {
            let v = load(step);
            prefix = _mm512_add_epi64(prefix, sums);
            sums = _mm512_add_epi64(sums, _mm512_sad_epu8(v, zero));
            dots[k] = _mm512_dpbusd_epi32(dots[k], v, weights);
        }
    }
    for step in steps.remainder().chunks_exact(64) {
        let v = load(step);
        prefix = _mm512_add_epi64(prefix, sums);
        sums = _mm512_add_epi64(sums, _mm512_sad_epu8(v, zero));
        dots[0] = _mm512_dpbusd_epi32(dots[0], v, weights);
    }
    let dot: u64 = dots.iter().map(|&d| lanes_u32(d)).sum();
    (lanes_u64(sums), 64 * lanes_u64(prefix) + dot)
}

/// One 64-byte step.
#[target_feature(enable = "avx512f")]
fn load(step: &[u8]) -> __m512i {
    assert_eq!(step.len(), 64);
    // SAFETY: `step` holds the 64 bytes read (checked above); the load is unaligned.
    unsafe { _mm512_loadu_si512(step.as_ptr().cast()) }
}

/// The sum of the 16 unsigned 32-bit lanes of `v`, widened.
#[target_feature(enable = "avx512f")]
fn lanes_u32(v: __m512i) -> u64 {
    let lo = _mm512_cvtepu32_epi64(_mm512_castsi512_si256(v));
    let hi = _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64::<1>(v));
    lanes_u64(_mm512_add_epi64(lo, hi))
}

/// The sum of the 8 unsigned 64-bit lanes of `v`.
#[target_feature(enable = "avx512f")]
fn lanes_u64(v: __m512i) -> u64 {
    _mm512_reduce_add_epi64(v) as u64
}
