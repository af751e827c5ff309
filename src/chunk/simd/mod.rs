//! Vectorized kernels: the only `unsafe` code of the crate.
//!
//! Each filter kernel has a portable twin in `chunk::filter` that tests compare it with on
//! random inputs; `reduce` (slice sums for the fused aggregates) is one loop built for the
//! baseline and for AVX2. The choice is made once per process:
//! `DATAFUSION_BLOSC2_SIMD=off` forces the portable path without recompiling (`sse2`, the
//! SSE2 kernels). Returning `false` means "no kernel here, use the portable one". This
//! file dispatches; `x86_shuffle` holds the byte-unshuffle kernels (SSE2 and AVX2, one
//! unpack network generic over the register type), `x86_bits` the bit unshuffle's plane
//! transpose, `x86_lanes` the register trait both are written against, `x86_adler` the
//! Adler-32 of zlib streams (AVX-512 VNNI; its portable twin is zlib-rs's), `x86_sum`
//! BYTEDELTA's running sum, and `reduce` the sums.

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

/// Name of the kernel set in use, for diagnostics (`DATAFUSION_BLOSC2_SIMD` changes it).
pub fn active_kernels() -> &'static str {
    if !enabled() {
        return "portable (DATAFUSION_BLOSC2_SIMD=off)";
    }
    #[cfg(target_arch = "x86_64")]
    {
        if !has_avx2() {
            return "x86_64 sse2 (unshuffle: every typesize but 1; bit untranspose)";
        }
        // Built once: the AVX2 set, and which of GFNI and AVX-512 VNNI it adds.
        static NAME: OnceLock<String> = OnceLock::new();
        NAME.get_or_init(|| {
            format!(
                "x86_64 avx2 + sse2 (unshuffle: every typesize but 1; bit untranspose{}; \
                 sums){}",
                if has_gfni() {
                    ", its transpose with gfni"
                } else {
                    ""
                },
                if has_avx512_vnni() {
                    ", avx512 vnni (Adler-32)"
                } else {
                    ""
                },
            )
        })
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
        x86_shuffle::unshuffle(rows, dst, ne)
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
            let done = if has_gfni() {
                // SAFETY: AVX2 and GFNI support was just checked at run time.
                unsafe { x86_bits::bit_untranspose_plane_gfni(plane, rowlen, out) }
            } else {
                // SAFETY: AVX2 support was just checked at run time.
                unsafe { x86_bits::bit_untranspose_plane_avx2(plane, rowlen, out) }
            };
            // The SSE2 kernel finishes a 16-byte tail the 32-byte kernel left.
            let sse =
                x86_bits::bit_untranspose_plane(&plane[done..], rowlen, &mut out[8 * done..], done);
            return done + sse;
        }
        x86_bits::bit_untranspose_plane(plane, rowlen, out, 0)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (plane, rowlen, out);
        0
    }
}

/// The running sum mod 256 of `src` into `dst` (byte `i` becomes the sum of bytes `0..=i`,
/// BYTEDELTA's undo), or of `dst` in place when `src` is `None`, with a SIMD kernel over
/// a prefix of it; returns the length of that prefix (0 when there is no kernel), which
/// the portable loop continues from. `src`, when given, is as long as `dst`.
pub fn running_sum_bytes(src: Option<&[u8]>, dst: &mut [u8]) -> usize {
    if !enabled() || src.is_some_and(|s| s.len() != dst.len()) {
        return 0;
    }
    #[cfg(target_arch = "x86_64")]
    {
        let len = dst.len();
        let to = dst.as_mut_ptr();
        let from = src.map_or(to.cast_const(), <[u8]>::as_ptr);
        if has_avx2() {
            // SAFETY: `from` and `to` are valid for `len` bytes (two slices of that length,
            // a shared one that cannot overlap the exclusive `dst`, or `dst` itself), and
            // `has_avx2` checked AVX2 at run time.
            // (The portable loop sums the under 32 bytes it leaves.)
            return unsafe { x86_sum::running_sum_avx2(from, to, len) };
        }
        // SAFETY: as above; SSE2 is part of the x86_64 baseline.
        unsafe { x86_sum::running_sum_sse2(from, to, len) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (src, dst);
        0
    }
}

/// Whether more than 8 of `rows` (the 8 ways of an L1 set) start in the same set of a
/// 64-set L1 data cache, counting a row that starts where the one before it does (the
/// shared zero row of zero-run streams) once. Such rows, read together, evict each other:
/// the unshuffles then go a few rows at a time (x86 `groups16_avx2`, the portable words'
/// runs).
pub(crate) fn rows_collide(rows: &[&[u8]]) -> bool {
    let mut sets = [0u16; 64];
    let mut prev = None;
    for row in rows {
        let at = row.as_ptr() as usize;
        if prev != Some(at) {
            sets[(at >> 6) & 63] += 1;
        }
        prev = Some(at);
    }
    sets.iter().any(|&n| n > 8)
}

/// Adler-32 of `data` continuing from `start` with a SIMD kernel when this CPU has one
/// (AVX-512 VNNI); `None` means "use the portable one" (`zlib_rs::adler32::adler32`,
/// whose own AVX2 loop is the path of every other x86_64 CPU).
pub fn adler32(start: u32, data: &[u8]) -> Option<u32> {
    #[cfg(target_arch = "x86_64")]
    if enabled() && has_avx512_vnni() {
        // SAFETY: AVX-512F, BW and VNNI support was checked at run time.
        return Some(unsafe { x86_adler::adler32_vnni(start, data) });
    }
    let _ = (start, data);
    None
}

/// True when the CPU has AVX-512F, BW and VNNI (checked once) and SIMD is not limited to
/// SSE2 (`DATAFUSION_BLOSC2_SIMD=sse2`).
#[cfg(target_arch = "x86_64")]
fn has_avx512_vnni() -> bool {
    static VNNI: OnceLock<bool> = OnceLock::new();
    *VNNI.get_or_init(|| {
        has_avx2()
            && std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("avx512vnni")
    })
}

/// True when the CPU has AVX2 and GFNI (checked once) and SIMD is not limited to SSE2.
#[cfg(target_arch = "x86_64")]
fn has_gfni() -> bool {
    static GFNI: OnceLock<bool> = OnceLock::new();
    *GFNI.get_or_init(|| has_avx2() && std::is_x86_feature_detected!("gfni"))
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

pub mod reduce;
#[cfg(target_arch = "x86_64")]
mod x86_adler;
#[cfg(target_arch = "x86_64")]
mod x86_bits;
#[cfg(target_arch = "x86_64")]
mod x86_lanes;
#[cfg(target_arch = "x86_64")]
mod x86_shuffle;
#[cfg(target_arch = "x86_64")]
mod x86_sum;

#[cfg(test)]
mod tests {
    use crate::chunk::filter::shuffle::{shuffle, unshuffle_portable};

    /// The Adler-32 kernel, where this CPU has it, against the definition read byte by
    /// byte and against zlib-rs's (the portable path), from several starting sums, over
    /// lengths around its 64-byte steps, its rounds of four and its runs between
    /// reductions, on random bytes and on bytes of 255 (the largest sums, for the bounds
    /// of its accumulators). Without the kernel, the dispatcher must decline.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn adler32_kernel_equals_definition() {
        use super::x86_adler::{RUN, adler32_vnni};
        fn definition(start: u32, data: &[u8]) -> u32 {
            let (mut a, mut b) = (start & 0xffff, start >> 16);
            for &x in data {
                a = (a + u32::from(x)) % 65521;
                b = (b + a) % 65521;
            }
            (b << 16) | a
        }
        if !super::has_avx512_vnni() {
            assert_eq!(super::adler32(1, &[1, 2, 3]), None);
            return;
        }
        let mut seed = 0x5EED_AD1E_0032_0001u64;
        let random = crate::chunk::random_bytes(&mut seed, 2 * RUN + 300);
        let ones = vec![255u8; 2 * RUN + 300];
        let mut lens: Vec<usize> = (0..=300).collect();
        lens.extend([
            1000,
            4095,
            4096,
            4097,
            65_553,
            RUN - 1,
            RUN,
            RUN + 1,
            RUN + 64,
        ]);
        lens.extend([2 * RUN - 5, 2 * RUN + 63, 2 * RUN + 300]);
        for start in [1u32, 0, (65520 << 16) | 65520, (12345 << 16) | 54321] {
            for &len in &lens {
                for data in [&random[..len], &ones[..len]] {
                    let want = definition(start, data);
                    // SAFETY: the CPU's AVX-512F, BW and VNNI support was checked above.
                    let got = unsafe { adler32_vnni(start, data) };
                    assert_eq!(got, want, "start={start:#x} len={len}");
                    assert_eq!(zlib_rs::adler32::adler32(start, data), want);
                }
            }
        }
    }

    /// Each x86 bit-untranspose kernel on its own (the dispatcher picks one per CPU:
    /// SSE2, AVX2, or AVX2 with GFNI), against the scalar 8×8 transpose, for row lengths
    /// around the vector widths.
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
            let done = super::x86_bits::bit_untranspose_plane(&plane, rowlen, &mut sse, 0);
            assert_eq!(done, rowlen / 16 * 16);
            assert_eq!(sse[..8 * done], want[..8 * done], "sse2 rowlen={rowlen}");
            if std::is_x86_feature_detected!("avx2") {
                let mut avx = vec![0u8; 8 * rowlen];
                // SAFETY: AVX2 support was just checked.
                let done = unsafe {
                    super::x86_bits::bit_untranspose_plane_avx2(&plane, rowlen, &mut avx)
                };
                assert_eq!(done, rowlen / 32 * 32);
                assert_eq!(avx[..8 * done], want[..8 * done], "avx2 rowlen={rowlen}");
            }
            if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("gfni") {
                let mut gfni = vec![0u8; 8 * rowlen];
                // SAFETY: AVX2 and GFNI support was just checked.
                let done = unsafe {
                    super::x86_bits::bit_untranspose_plane_gfni(&plane, rowlen, &mut gfni)
                };
                assert_eq!(done, rowlen / 32 * 32);
                assert_eq!(gfni[..8 * done], want[..8 * done], "gfni rowlen={rowlen}");
            }
        }
    }

    /// Each x86 running-sum kernel on its own (the dispatcher picks AVX2 where it can,
    /// else SSE2), in place and from another buffer, against the portable loop, for
    /// lengths around their 16-byte steps, on random bytes and on bytes of 255.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn x86_running_sum_kernels_equal_portable() {
        use crate::chunk::filter::bytedelta::running_sum_from;
        let mut seed = 0x5EED_0000_0000_0035u64;
        for n in (0..70).chain([255, 256, 4096, 4100]) {
            for data in [crate::chunk::random_bytes(&mut seed, n), vec![255u8; n]] {
                let mut want = data.clone();
                running_sum_from(0, &mut want);
                let avx2 = std::is_x86_feature_detected!("avx2");
                for (name, kernel, step) in [
                    (
                        "sse2",
                        super::x86_sum::running_sum_sse2 as unsafe fn(_, _, _) -> _,
                        16,
                    ),
                    ("avx2", super::x86_sum::running_sum_avx2, 32),
                ] {
                    if name == "avx2" && !avx2 {
                        continue;
                    }
                    let done = n / step * step;
                    let mut copied = vec![0u8; n];
                    let mut in_place = data.clone();
                    // SAFETY: the pointers are of slices of `n` bytes (distinct ones, or
                    // one for both); AVX2 support was checked above for that kernel.
                    let (a, b) = unsafe {
                        (
                            kernel(data.as_ptr(), copied.as_mut_ptr(), n),
                            kernel(in_place.as_ptr(), in_place.as_mut_ptr(), n),
                        )
                    };
                    assert_eq!((a, b), (done, done), "{name} {n}");
                    assert_eq!(copied[..done], want[..done], "{name} {n} bytes, copied");
                    assert_eq!(in_place[..done], want[..done], "{name} {n} bytes, in place");
                }
            }
        }
    }

    /// Each x86 byte-unshuffle kernel on its own (the dispatcher runs AVX2 where it can
    /// and SSE2 only for the rest), with AVX2 and without, against the portable
    /// unshuffle, for element counts around their 16- and 32-element steps.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn x86_unshuffle_kernels_equal_portable() {
        use super::x86_shuffle::{any_width_avx2, any_width_sse2, finish, groups16_avx2, run};
        use crate::chunk::filter::shuffle::unshuffle_rows_portable;
        let mut seed = 0x0123_4567_89AB_CDEFu64;
        let has_avx2 = std::is_x86_feature_detected!("avx2");
        for s in (2..=40usize).chain([48, 64, 80, 128, 240]) {
            for ne in [
                0usize, 1, 16, 31, 32, 33, 47, 63, 64, 65, 96, 100, 511, 512, 1000, 1100,
            ] {
                let planes: Vec<Vec<u8>> = (0..s)
                    .map(|_| crate::chunk::random_bytes(&mut seed, ne))
                    .collect();
                let rows: Vec<&[u8]> = planes.iter().map(|p| &p[..]).collect();
                let mut want = vec![0u8; ne * s];
                unshuffle_rows_portable(&rows, &mut want);
                for avx2 in [false, true].into_iter().filter(|&a| !a || has_avx2) {
                    let mut got = vec![0u8; ne * s];
                    match s {
                        2 => run::<2>(&rows, &mut got, ne, avx2),
                        4 => run::<4>(&rows, &mut got, ne, avx2),
                        8 => run::<8>(&rows, &mut got, ne, avx2),
                        16 => run::<16>(&rows, &mut got, ne, avx2),
                        _ if avx2 && s % 16 == 0 => {
                            // SAFETY: AVX2 support was checked above.
                            let done = unsafe { groups16_avx2(&rows, &mut got, ne) };
                            assert_eq!(done, ne / 32 * 32, "s={s} ne={ne}");
                            let done = any_width_sse2(&rows, &mut got, ne, done);
                            finish(&rows, &mut got, done, ne);
                        }
                        _ => {
                            let mut done = 0;
                            if avx2 {
                                // SAFETY: AVX2 support was checked above.
                                done = unsafe { any_width_avx2(&rows, &mut got, ne) };
                                assert!(ne < 64 || done > 0, "s={s} ne={ne}");
                            }
                            done = any_width_sse2(&rows, &mut got, ne, done);
                            assert!(done <= ne && (ne < 32 || done > 0), "s={s} ne={ne}");
                            finish(&rows, &mut got, done, ne);
                        }
                    }
                    assert_eq!(got, want, "s={s} ne={ne} avx2={avx2}");
                }
            }
        }
    }

    /// Rows a multiple of 4 KiB apart, as the planes of a block whose size is a power of
    /// two lie: they collide in the L1 cache, so typesizes that are multiples of 16 take
    /// the two-pass x86 kernel and typesizes above 16 the portable words' runs. Through
    /// the dispatcher and through the portable path, every such typesize (with bands of
    /// 8, 4, 2 and 1 rows) equals the byte loop. Rows that repeat (the shared zero row)
    /// count once.
    #[test]
    fn colliding_rows_unshuffle_like_the_byte_loop() {
        use crate::chunk::filter::shuffle::{
            unshuffle_rows, unshuffle_rows_portable, unshuffle_rows_reference,
        };
        let mut seed = 0xC011_1DE5_0000_4096u64;
        for s in [17usize, 20, 22, 23, 32, 40, 48, 64, 128] {
            for ne in [4096usize, 4096 + 40] {
                let stride = ne.div_ceil(4096) * 4096;
                let buf = crate::chunk::random_bytes(&mut seed, stride * s + 4096);
                let base = buf.as_ptr().align_offset(4096);
                let rows: Vec<&[u8]> = (0..s)
                    .map(|j| &buf[base + j * stride..base + j * stride + ne])
                    .collect();
                assert!(super::rows_collide(&rows), "s={s}");
                let mut want = vec![0u8; ne * s];
                unshuffle_rows_reference(&rows, &mut want);
                let mut got = vec![0u8; ne * s];
                unshuffle_rows(&rows, &mut got);
                assert_eq!(got, want, "dispatched s={s} ne={ne}");
                let mut got = vec![0u8; ne * s];
                unshuffle_rows_portable(&rows, &mut got);
                assert_eq!(got, want, "portable s={s} ne={ne}");
            }
        }
        let zero = [0u8; 64];
        let same: Vec<&[u8]> = vec![&zero[..]; 32];
        assert!(!super::rows_collide(&same));
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
