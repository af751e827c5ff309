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
        if has_avx2() {
            "x86_64 avx2 + sse2 (unshuffle: every typesize but 1 and 3; bit untranspose)"
        } else {
            "x86_64 sse2 (unshuffle: every typesize but 1 and 3; bit untranspose)"
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        "portable"
    }
}

/// Byte unshuffle from separate rows with a SIMD kernel when one exists for
/// `rows.len()`: `dst[i * s + j] = rows[j][i]` for `i < dst.len() / s` (`dst.len()` a
/// multiple of `s`, every row at least that long).
pub fn unshuffle_rows(rows: &[&[u8]], dst: &mut [u8]) -> bool {
    let s = rows.len();
    if !enabled() || s == 0 || !dst.len().is_multiple_of(s) {
        return false;
    }
    let ne = dst.len() / s;
    if rows.iter().any(|r| r.len() < ne) {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    {
        x86::unshuffle(rows, dst, ne)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (rows, dst, ne);
        false
    }
}

/// Untransposes the bits of one byte plane of a bitshuffled block: `plane` holds 8 bit
/// rows of `rowlen` bytes, `out` receives `8 * rowlen` bytes (byte `8k + t` gets bit `t`
/// of byte `k` of every row). Returns how many row bytes `k` were done (a prefix; the
/// caller finishes the rest), 0 when there is no kernel.
pub fn bit_untranspose_plane(plane: &[u8], rowlen: usize, out: &mut [u8]) -> usize {
    if !enabled() || plane.len() < 8 * rowlen || out.len() < 8 * rowlen {
        return 0;
    }
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx2() {
            // SAFETY: AVX2 support was just checked at run time.
            let done = unsafe { x86::bit_untranspose_plane_avx2(plane, rowlen, out) };
            // The SSE2 kernel finishes a 16-byte tail the 32-byte kernel left.
            let sse =
                x86::bit_untranspose_plane(&plane[done..], rowlen, &mut out[8 * done..], done);
            return done + sse;
        }
        x86::bit_untranspose_plane(plane, rowlen, out, 0)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (plane, rowlen, out);
        0
    }
}

/// True when the CPU has AVX2 (checked once) and SIMD is on.
#[cfg(target_arch = "x86_64")]
fn has_avx2() -> bool {
    static AVX2: OnceLock<bool> = OnceLock::new();
    *AVX2.get_or_init(|| {
        std::is_x86_feature_detected!("avx2")
            && !matches!(
                std::env::var("DATAFUSION_BLOSC2_SIMD").as_deref(),
                Ok("sse2")
            )
    })
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// SSE2 is part of the x86_64 baseline, so these kernels need no run-time detection.
    /// `rows.len()` rows of at least `ne` bytes into `dst` (`rows.len() * ne` bytes).
    pub(super) fn unshuffle(rows: &[&[u8]], dst: &mut [u8], ne: usize) -> bool {
        if ne < 16 {
            return false;
        }
        match rows.len() {
            2 => run::<2>(rows, dst, ne),
            4 => run::<4>(rows, dst, ne),
            8 => run::<8>(rows, dst, ne),
            16 => run::<16>(rows, dst, ne),
            s if s == 3 || s > 4 => {
                let first = if super::has_avx2() {
                    // SAFETY: AVX2 support was checked at run time.
                    unsafe { any_width_avx2(rows, dst, ne) }
                } else {
                    0
                };
                any_width(rows, dst, ne, first);
            }
            _ => return false,
        }
        true
    }

    /// Row count 3 and any above 4 other than 8 and 16 with AVX2, 32 elements per step: each
    /// group of 16 rows (the last one padded with zero registers) goes through the 16-row
    /// [`interleave256`] and is stored by [`group_avx2`]. The last, partial group goes
    /// first: its stores run up to 15 bytes into the next element, whose own stores come
    /// later and overwrite them. Steps run while every store stays inside `dst`; returns
    /// the number of 16-element tiles done.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn any_width_avx2(rows: &[&[u8]], dst: &mut [u8], ne: usize) -> usize {
        let s = rows.len();
        // A step's stores span 31 * s + 16 * groups bytes from its first element.
        let span = 31 * s + 16 * s.div_ceil(16);
        let mut steps = ne / 32;
        while steps > 0 && 32 * (steps - 1) * s + span > dst.len() {
            steps -= 1;
        }
        // SAFETY (every call): the caller guarantees AVX2.
        unsafe {
            // Common row counts get a copy where the count, and so every store offset and
            // group width, is a constant.
            match s {
                3 => const_steps_avx2::<3>(rows, dst, steps),
                5 => const_steps_avx2::<5>(rows, dst, steps),
                6 => const_steps_avx2::<6>(rows, dst, steps),
                7 => const_steps_avx2::<7>(rows, dst, steps),
                9 => const_steps_avx2::<9>(rows, dst, steps),
                10 => const_steps_avx2::<10>(rows, dst, steps),
                11 => const_steps_avx2::<11>(rows, dst, steps),
                12 => const_steps_avx2::<12>(rows, dst, steps),
                13 => const_steps_avx2::<13>(rows, dst, steps),
                14 => const_steps_avx2::<14>(rows, dst, steps),
                15 => const_steps_avx2::<15>(rows, dst, steps),
                24 => const_steps_avx2::<24>(rows, dst, steps),
                32 => const_steps_avx2::<32>(rows, dst, steps),
                _ => steps_avx2(rows, dst, steps, s),
            }
        }
        steps * 2
    }

    /// [`steps_avx2`] for a constant row count `S`.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    unsafe fn const_steps_avx2<const S: usize>(rows: &[&[u8]], dst: &mut [u8], steps: usize) {
        // SAFETY: the caller guarantees AVX2.
        unsafe { steps_avx2(rows, dst, steps, S) }
    }

    /// The first `steps` steps of [`any_width_avx2`] for `s = rows.len()` rows.
    ///
    /// # Safety
    /// The CPU must support AVX2. (Not itself an AVX2 function, so that it can be inlined
    /// into its AVX2 callers: `inline(always)` cannot be combined with `target_feature`.)
    #[inline(always)]
    unsafe fn steps_avx2(rows: &[&[u8]], dst: &mut [u8], steps: usize, s: usize) {
        let span = 31 * s + 16 * s.div_ceil(16);
        let (full, rest) = (s / 16, s % 16);
        let (part, col) = (&rows[16 * full..], 16 * full);
        for p in 0..steps {
            let o = &mut dst[32 * p * s..][..span];
            // SAFETY (every group): the caller guarantees AVX2.
            unsafe {
                match rest {
                    1 => group_avx2::<1>(part, p, o, s, col),
                    2 => group_avx2::<2>(part, p, o, s, col),
                    3 => group_avx2::<3>(part, p, o, s, col),
                    4 => group_avx2::<4>(part, p, o, s, col),
                    5 => group_avx2::<5>(part, p, o, s, col),
                    6 => group_avx2::<6>(part, p, o, s, col),
                    7 => group_avx2::<7>(part, p, o, s, col),
                    8 => group_avx2::<8>(part, p, o, s, col),
                    9 => group_avx2::<9>(part, p, o, s, col),
                    10 => group_avx2::<10>(part, p, o, s, col),
                    11 => group_avx2::<11>(part, p, o, s, col),
                    12 => group_avx2::<12>(part, p, o, s, col),
                    13 => group_avx2::<13>(part, p, o, s, col),
                    14 => group_avx2::<14>(part, p, o, s, col),
                    15 => group_avx2::<15>(part, p, o, s, col),
                    _ => {}
                }
                for g in 0..full {
                    group_avx2::<16>(&rows[16 * g..], p, o, s, 16 * g);
                }
            }
        }
    }

    /// Step `p` (elements `32p..32p + 32`) of the `R` rows `rows[..R]`, which are bytes
    /// `col..col + R` of elements of `s` bytes: after the 16-row [`interleave256`] (with
    /// 16 - R zero registers), lane 0 of register k holds element k's 16 bytes from `col`
    /// and lane 1 element 16 + k's; each is stored at its place in `o` (the step's
    /// elements), in element order.
    ///
    /// # Safety
    /// The CPU must support AVX2. (Not itself an AVX2 function, so that it can be inlined
    /// into its AVX2 callers: `inline(always)` cannot be combined with `target_feature`.)
    #[inline(always)]
    unsafe fn group_avx2<const R: usize>(
        rows: &[&[u8]],
        p: usize,
        o: &mut [u8],
        s: usize,
        col: usize,
    ) {
        // SAFETY: the caller guarantees AVX2; a register op.
        let mut v = [unsafe { _mm256_setzero_si256() }; 16];
        for (slot, row) in v.iter_mut().zip(&rows[..R]) {
            let r = &row[p * 32..p * 32 + 32];
            // SAFETY: `r` is exactly 32 readable bytes (slice-checked); unaligned load.
            *slot = unsafe { _mm256_loadu_si256(r.as_ptr().cast()) };
        }
        // SAFETY: the caller guarantees AVX2.
        let out = unsafe { interleave256::<16>(v) };
        for (k, reg) in out.iter().enumerate() {
            let at = k * s + col;
            let lo = &mut o[at..at + 16];
            // SAFETY: `lo` is exactly 16 writable bytes; unaligned store.
            unsafe { _mm_storeu_si128(lo.as_mut_ptr().cast(), _mm256_castsi256_si128(*reg)) };
        }
        for (k, reg) in out.iter().enumerate() {
            let at = (16 + k) * s + col;
            let hi = &mut o[at..at + 16];
            // SAFETY: `hi` is exactly 16 writable bytes; unaligned store.
            unsafe {
                _mm_storeu_si128(hi.as_mut_ptr().cast(), _mm256_extracti128_si256::<1>(*reg))
            };
        }
    }

    /// Any other row count above 4, and 3 (typesizes 3, 6, 12, 24, 32 …): each 16-element tile is
    /// transposed 16 rows at a time (rows past the last are zeros) by the 16×16
    /// [`interleave`], and each element's 16 bytes of a group are stored at their place in
    /// the output. The last, partial group of rows goes first, in element order: its
    /// stores run up to 15 bytes into the next element, whose own stores come later and
    /// overwrite them. Tiles run from tile `first` (the ones before it were done by
    /// [`any_width_avx2`]) while every store stays inside `dst`; the remaining elements go
    /// byte by byte. Without AVX2 this runs the whole block, at about a third of the AVX2
    /// kernel's speed (its out-of-line group costs a call and run-time row checks).
    pub(super) fn any_width(rows: &[&[u8]], dst: &mut [u8], ne: usize, first: usize) {
        let s = rows.len();
        let groups = s.div_ceil(16);
        let mut t = first;
        while 16 * t + 16 <= ne && (16 * t + 15) * s + 16 * groups <= dst.len() {
            for g in std::iter::once(groups - 1).chain(0..groups - 1) {
                any_width_group(rows, dst, t, g);
            }
            t += 1;
        }
        for i in 16 * t..ne {
            for (j, row) in rows.iter().enumerate() {
                dst[i * s + j] = row[i];
            }
        }
    }

    /// One group of [`any_width`]: rows `16g..16g + 16` of tile `t`. Kept out of line so
    /// that the compiler unrolls its fixed-size network into registers, as in [`tiles`].
    #[inline(never)]
    fn any_width_group(rows: &[&[u8]], dst: &mut [u8], t: usize, g: usize) {
        let s = rows.len();
        let v: [__m128i; 16] = std::array::from_fn(|j| match rows.get(16 * g + j) {
            Some(row) => {
                let r = &row[16 * t..16 * t + 16];
                // SAFETY: `r` is exactly 16 readable bytes; unaligned load.
                unsafe { _mm_loadu_si128(r.as_ptr().cast()) }
            }
            // SAFETY: SSE2 is part of the x86_64 baseline; a register op.
            None => unsafe { _mm_setzero_si128() },
        });
        for (k, reg) in interleave::<16>(v).iter().enumerate() {
            let at = (16 * t + k) * s + 16 * g;
            let o = &mut dst[at..at + 16];
            // SAFETY: `o` is exactly 16 writable bytes; unaligned store.
            unsafe { _mm_storeu_si128(o.as_mut_ptr().cast(), *reg) };
        }
    }

    /// AVX2 for pairs of tiles when the CPU has it, SSE2 for the rest.
    fn run<const S: usize>(rows: &[&[u8]], dst: &mut [u8], ne: usize) {
        let first = if super::has_avx2() {
            // SAFETY: AVX2 support was checked at run time.
            unsafe { tiles_avx2::<S>(rows, dst, ne) }
        } else {
            0
        };
        tiles::<S>(rows, dst, ne, first);
    }

    /// 32 elements per step: each 128-bit lane runs the SSE2 interleave network on its 16
    /// elements; lane 0 of the S results is tile 2p, lane 1 tile 2p + 1. Returns the number
    /// of 16-element tiles done.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    unsafe fn tiles_avx2<const S: usize>(rows: &[&[u8]], dst: &mut [u8], ne: usize) -> usize {
        let pairs = ne / 32;
        // Each row cut to exactly the bytes read, once: the loop's slicing below then needs
        // no per-step length loads and checks.
        let rows: [&[u8]; S] = std::array::from_fn(|j| &rows[j][..pairs * 32]);
        for p in 0..pairs {
            let mut v = [_mm256_setzero_si256(); S];
            for (j, slot) in v.iter_mut().enumerate() {
                let row = &rows[j][p * 32..p * 32 + 32];
                // SAFETY: `row` is exactly 32 readable bytes (slice-checked); unaligned load.
                *slot = unsafe { _mm256_loadu_si256(row.as_ptr().cast()) };
            }
            // SAFETY: this function runs with AVX2.
            let out = unsafe { interleave256::<S>(v) };
            // Tile 2p is the low lanes of out[0..S] in order, tile 2p + 1 the high lanes:
            // pairing registers k, k + 1 gives 32-byte stores (half as many as 16-byte ones).
            let pair = &mut dst[2 * p * 16 * S..(2 * p + 2) * 16 * S];
            let (t0, t1) = pair.split_at_mut(16 * S);
            for k in (0..S).step_by(2) {
                let lo = _mm256_permute2x128_si256::<0x20>(out[k], out[k + 1]);
                let hi = _mm256_permute2x128_si256::<0x31>(out[k], out[k + 1]);
                let o0 = &mut t0[k * 16..k * 16 + 32];
                let o1 = &mut t1[k * 16..k * 16 + 32];
                // SAFETY: `o0` and `o1` are exactly 32 writable bytes; unaligned stores.
                unsafe {
                    _mm256_storeu_si256(o0.as_mut_ptr().cast(), lo);
                    _mm256_storeu_si256(o1.as_mut_ptr().cast(), hi);
                }
            }
        }
        pairs * 2
    }

    /// [`interleave`] on 256-bit registers (the unpacks work per 128-bit lane), in the
    /// same constant-count rounds.
    ///
    /// # Safety
    /// The CPU must support AVX2. (Not itself an AVX2 function, so that it is inlined
    /// into its AVX2 callers: `inline(always)` cannot be combined with `target_feature`.)
    #[inline(always)]
    unsafe fn interleave256<const S: usize>(v: [__m256i; S]) -> [__m256i; S] {
        let mut cur = v;
        // SAFETY (each round): the caller guarantees AVX2.
        unsafe {
            if S > 1 {
                cur = interleave256_round::<S, 1>(cur);
            }
            if S > 2 {
                cur = interleave256_round::<S, 2>(cur);
            }
            if S > 4 {
                cur = interleave256_round::<S, 4>(cur);
            }
            if S > 8 {
                cur = interleave256_round::<S, 8>(cur);
            }
        }
        cur
    }

    /// One round of [`interleave256`]: merges byte groups `W` wide.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[inline(always)]
    unsafe fn interleave256_round<const S: usize, const W: usize>(
        cur: [__m256i; S],
    ) -> [__m256i; S] {
        let mut next = cur;
        for g2 in 0..S / W / 2 {
            for e in 0..W {
                let (a, b) = (cur[2 * g2 * W + e], cur[(2 * g2 + 1) * W + e]);
                // SAFETY: the caller guarantees AVX2; these are register ops.
                let (lo, hi) = unsafe {
                    match W {
                        1 => (_mm256_unpacklo_epi8(a, b), _mm256_unpackhi_epi8(a, b)),
                        2 => (_mm256_unpacklo_epi16(a, b), _mm256_unpackhi_epi16(a, b)),
                        4 => (_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b)),
                        _ => (_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b)),
                    }
                };
                next[g2 * 2 * W + 2 * e] = lo;
                next[g2 * 2 * W + 2 * e + 1] = hi;
            }
        }
        next
    }

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

    /// Processes full tiles of 16 elements with SSE2, the rest with scalar code.
    fn tiles<const S: usize>(rows: &[&[u8]], dst: &mut [u8], ne: usize, first: usize) {
        let tiles = ne / 16;
        for t in first..tiles {
            // SAFETY: SSE2 is part of the x86_64 baseline; a register op with no memory access.
            let mut v = [unsafe { _mm_setzero_si128() }; S];
            for (j, slot) in v.iter_mut().enumerate() {
                let row = &rows[j][t * 16..t * 16 + 16];
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
                dst[i * S + j] = rows[j][i];
            }
        }
    }

    /// Turns S registers (register j = byte j of 16 elements) into S registers holding the
    /// 16 elements in order (16*S bytes): log2(S) rounds of unpacklo/unpackhi.
    ///
    /// After round r, register `g * 2^r + e` holds byte group g (2^r bytes wide) of element
    /// group e (16 / 2^r elements); a round merges byte groups 2g and 2g+1 of the same
    /// element group into element groups 2e (lo) and 2e+1 (hi).
    fn interleave<const S: usize>(v: [__m128i; S]) -> [__m128i; S] {
        // One call per round, each with constant trip counts: the compiler unrolls them all
        // into register operations (a loop over a run-time width kept the 16-row network
        // in memory, copying all 16 registers with `memcpy` every round).
        let mut cur = v;
        if S > 1 {
            cur = interleave_round::<S, 1>(cur);
        }
        if S > 2 {
            cur = interleave_round::<S, 2>(cur);
        }
        if S > 4 {
            cur = interleave_round::<S, 4>(cur);
        }
        if S > 8 {
            cur = interleave_round::<S, 8>(cur);
        }
        cur
    }

    /// One round of [`interleave`]: merges byte groups `W` wide.
    #[inline(always)]
    fn interleave_round<const S: usize, const W: usize>(cur: [__m128i; S]) -> [__m128i; S] {
        let mut next = cur;
        for g2 in 0..S / W / 2 {
            for e in 0..W {
                let (a, b) = (cur[2 * g2 * W + e], cur[(2 * g2 + 1) * W + e]);
                // SAFETY: SSE2 is always available on x86_64; these are register ops.
                let (lo, hi) = unsafe {
                    match W {
                        1 => (_mm_unpacklo_epi8(a, b), _mm_unpackhi_epi8(a, b)),
                        2 => (_mm_unpacklo_epi16(a, b), _mm_unpackhi_epi16(a, b)),
                        4 => (_mm_unpacklo_epi32(a, b), _mm_unpackhi_epi32(a, b)),
                        _ => (_mm_unpacklo_epi64(a, b), _mm_unpackhi_epi64(a, b)),
                    }
                };
                next[g2 * 2 * W + 2 * e] = lo;
                next[g2 * 2 * W + 2 * e + 1] = hi;
            }
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use crate::chunk::filter::shuffle::{shuffle, unshuffle_portable};

    /// Each x86 bit-untranspose kernel on its own (the dispatcher picks one per CPU),
    /// against the scalar 8×8 transpose, for row lengths around the vector widths.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn x86_bit_untranspose_kernels_equal_scalar() {
        use crate::chunk::filter::bitshuffle::transpose8;
        let mut seed = 0x1234_5678_9ABC_DEF1u64;
        for rowlen in [0usize, 1, 15, 16, 17, 31, 32, 33, 48, 63, 64, 100, 257] {
            let plane: Vec<u8> = crate::chunk::random_bytes(&mut seed, 8 * rowlen);
            let mut want = vec![0u8; 8 * rowlen];
            for k in 0..rowlen {
                let x = u64::from_le_bytes(std::array::from_fn(|b| plane[b * rowlen + k]));
                want[8 * k..8 * k + 8].copy_from_slice(&transpose8(x).to_le_bytes());
            }
            let mut sse = vec![0u8; 8 * rowlen];
            let done = super::x86::bit_untranspose_plane(&plane, rowlen, &mut sse, 0);
            assert_eq!(done, rowlen / 16 * 16);
            assert_eq!(sse[..8 * done], want[..8 * done], "sse2 rowlen={rowlen}");
            if std::is_x86_feature_detected!("avx2") {
                let mut avx = vec![0u8; 8 * rowlen];
                // SAFETY: AVX2 support was just checked.
                let done =
                    unsafe { super::x86::bit_untranspose_plane_avx2(&plane, rowlen, &mut avx) };
                assert_eq!(done, rowlen / 32 * 32);
                assert_eq!(avx[..8 * done], want[..8 * done], "avx2 rowlen={rowlen}");
            }
        }
    }

    /// The x86 kernels for row counts other than 2, 4, 8 and 16 each on their own (the
    /// dispatcher runs AVX2 where it can and SSE2 only for the rest), against the
    /// portable unshuffle, for element counts around their 16- and 32-element steps.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn x86_any_width_kernels_equal_portable() {
        use crate::chunk::filter::shuffle::unshuffle_rows_portable;
        let mut seed = 0x0123_4567_89AB_CDEFu64;
        for s in (3..=40usize).filter(|s| ![4, 8, 16].contains(s)) {
            for ne in [0usize, 1, 16, 31, 32, 33, 47, 63, 64, 65, 96, 100, 1000] {
                let planes: Vec<Vec<u8>> = (0..s)
                    .map(|_| crate::chunk::random_bytes(&mut seed, ne))
                    .collect();
                let rows: Vec<&[u8]> = planes.iter().map(|p| &p[..]).collect();
                let mut want = vec![0u8; ne * s];
                unshuffle_rows_portable(&rows, &mut want);
                let mut sse = vec![0u8; ne * s];
                super::x86::any_width(&rows, &mut sse, ne, 0);
                assert_eq!(sse, want, "sse2 s={s} ne={ne}");
                if std::is_x86_feature_detected!("avx2") {
                    let mut avx = vec![0u8; ne * s];
                    // SAFETY: AVX2 support was just checked.
                    let first = unsafe { super::x86::any_width_avx2(&rows, &mut avx, ne) };
                    assert!(16 * first <= ne && (ne < 64 || first > 0), "s={s} ne={ne}");
                    super::x86::any_width(&rows, &mut avx, ne, first);
                    assert_eq!(avx, want, "avx2 s={s} ne={ne}");
                }
            }
        }
    }

    /// Property check over random (typesize, length, contents): every dispatched kernel
    /// (byte unshuffle and bit unshuffle, whatever this CPU selects) equals the portable
    /// one and inverts the forward filter. The seed is fixed; failures print the case.
    #[test]
    fn random_cases_equal_portable() {
        use crate::chunk::filter::bitshuffle::{bitshuffle, bitunshuffle, bitunshuffle_portable};
        use crate::chunk::filter::shuffle::{shuffle, unshuffle};
        let mut seed = 0xDEAD_BEEF_CAFE_F00Du64;
        let mut next = move || crate::chunk::xorshift(&mut seed);
        for case in 0..400 {
            let s = 1 + (next() % 33) as usize;
            let n = (next() % 3000) as usize;
            let src: Vec<u8> = (0..n * s + (next() % 7) as usize)
                .map(|_| next() as u8)
                .collect();
            let mut sh = vec![0; src.len()];
            shuffle(s, &src, &mut sh);
            let (mut fast, mut slow) = (vec![0; src.len()], vec![0; src.len()]);
            unshuffle(s, &sh, &mut fast);
            unshuffle_portable(s, &sh, &mut slow);
            assert!(
                fast == slow && fast == src,
                "case {case}: unshuffle s={s} n={n}"
            );
            let m = n - n % 8;
            bitshuffle(s, &src[..n * s], &mut sh[..n * s]);
            let (mut fast, mut slow) = (vec![0; n * s], vec![0; n * s]);
            bitunshuffle(s, false, &sh[..n * s], &mut fast);
            bitunshuffle_portable(s, m, &sh[..n * s], &mut slow);
            slow[m * s..].copy_from_slice(&sh[m * s..n * s]);
            assert!(
                fast == slow && fast[..] == src[..n * s],
                "case {case}: bitunshuffle s={s} n={n}"
            );
        }
    }

    #[test]
    fn simd_unshuffle_equals_portable() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        for s in 1..=33usize {
            for len in [0usize, 1, 15, 16, 17, 63, 64, 65, 255, 256, 257, 1000, 4099] {
                let src: Vec<u8> = crate::chunk::random_bytes(&mut seed, len * s / 4 + len);
                let mut sh = vec![0; src.len()];
                shuffle(s, &src, &mut sh);
                let mut a = vec![0; src.len()];
                let mut b = vec![0; src.len()];
                unshuffle_portable(s, &sh, &mut a);
                if !crate::chunk::filter::shuffle::unshuffle_simd(s, &sh, &mut b) {
                    continue;
                }
                assert_eq!(a, b, "s={s} len={}", src.len());
                assert_eq!(a, src);
            }
        }
    }
}
