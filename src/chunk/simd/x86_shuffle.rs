//! x86_64 byte-unshuffle kernels: `dst[i * s + j] = rows[j][i]` for `s` byte planes.
//!
//! Every kernel turns registers holding byte `j` of 16 or 32 elements into registers
//! holding whole elements, with the unpack network of [`interleave`], on SSE2's 16-byte
//! registers (the x86_64 baseline) or AVX2's 32-byte ones (chosen at run time): one
//! network generic over [`Lanes`]. Typesizes 2, 4, 8 and 16 fill whole registers
//! ([`tiles`], [`tiles_avx2`]; with AVX2, typesize 16 in two passes of 8 rows,
//! [`tiles16_avx2`]); typesize 3 and every one above 4 other than 8 and 16 go in groups of
//! 16 planes ([`any_width`]), or, for multiples of 16 whose rows would evict each other
//! from the L1 cache and for 64 and more, in two passes of 8 planes per group
//! ([`groups16_avx2`]).

use super::x86_lanes::Lanes;
use std::arch::x86_64::*;

/// `rows.len()` rows of at least `ne` bytes into `dst` (`rows.len() * ne` bytes); false
/// when there is no kernel for that row count.
pub(super) fn unshuffle(rows: &[&[u8]], dst: &mut [u8], ne: usize) -> bool {
    if ne < 16 {
        return false;
    }
    match rows.len() {
        2 => run::<2>(rows, dst, ne, super::has_avx2()),
        4 => run::<4>(rows, dst, ne, super::has_avx2()),
        8 => run::<8>(rows, dst, ne, super::has_avx2()),
        16 => run::<16>(rows, dst, ne, super::has_avx2()),
        // (Typesizes are bytes: at most 255 rows, which `any_width_steps` relies on.)
        s if s == 3 || (s > 4 && s <= 256) => {
            let mut done = 0;
            if super::has_avx2() && s % 16 == 0 && s >= 32 && (s >= 64 || super::rows_collide(rows))
            {
                // SAFETY: AVX2 support was checked at run time.
                done = unsafe { groups16_avx2(rows, dst, ne) };
            } else if super::has_avx2() {
                // SAFETY: AVX2 support was checked at run time.
                done = unsafe { any_width_avx2(rows, dst, ne) };
            }
            done = any_width_sse2(rows, dst, ne, done);
            finish(rows, dst, done, ne);
        }
        _ => return false,
    }
    true
}

/// Turns S registers (register j = byte j of 16 elements, per 128-bit lane) into S
/// registers holding the 16 elements in order (16*S bytes per lane): log2(S) rounds of
/// unpacklo/unpackhi.
///
/// After round r, register `g * 2^r + e` holds byte group g (2^r bytes wide) of element
/// group e (16 / 2^r elements); a round merges byte groups 2g and 2g+1 of the same
/// element group into element groups 2e (lo) and 2e+1 (hi).
///
/// # Safety
/// `V`'s instruction set (see [`Lanes`]).
#[inline(always)]
unsafe fn interleave<V: Lanes, const S: usize>(v: [V; S]) -> [V; S] {
    // One call per round, each with constant trip counts: the compiler unrolls them all
    // into register operations (a loop over a run-time width kept the 16-row network in
    // memory, copying all 16 registers with `memcpy` every round).
    let mut cur = v;
    // SAFETY (each round): guaranteed by the caller.
    unsafe {
        if S > 1 {
            cur = interleave_round::<V, S, 1>(cur);
        }
        if S > 2 {
            cur = interleave_round::<V, S, 2>(cur);
        }
        if S > 4 {
            cur = interleave_round::<V, S, 4>(cur);
        }
        if S > 8 {
            cur = interleave_round::<V, S, 8>(cur);
        }
    }
    cur
}

/// One round of [`interleave`]: merges byte groups `W` wide.
///
/// # Safety
/// `V`'s instruction set (see [`Lanes`]).
#[inline(always)]
unsafe fn interleave_round<V: Lanes, const S: usize, const W: usize>(cur: [V; S]) -> [V; S] {
    let mut next = cur;
    for g2 in 0..S / W / 2 {
        for e in 0..W {
            let (a, b) = (cur[2 * g2 * W + e], cur[(2 * g2 + 1) * W + e]);
            // SAFETY: guaranteed by the caller.
            let (lo, hi) = unsafe { V::unpack::<W>(a, b) };
            next[g2 * 2 * W + 2 * e] = lo;
            next[g2 * 2 * W + 2 * e + 1] = hi;
        }
    }
    next
}

/// Typesizes 2, 4, 8 and 16: AVX2 for pairs of tiles when `avx2` (which the caller has
/// checked the CPU has), SSE2 for the rest.
pub(super) fn run<const S: usize>(rows: &[&[u8]], dst: &mut [u8], ne: usize, avx2: bool) {
    let first = if avx2 && S == 16 {
        // SAFETY: the caller checked AVX2 support at run time.
        unsafe { tiles16_avx2(rows, dst, ne) }
    } else if avx2 {
        // SAFETY: the caller checked AVX2 support at run time.
        unsafe { tiles_avx2::<S>(rows, dst, ne) }
    } else {
        0
    };
    tiles::<S>(rows, dst, ne, first);
}

/// 32 elements per step: each 128-bit lane runs the interleave network on its 16
/// elements; lane 0 of the S results is tile 2p, lane 1 tile 2p + 1. Returns the number
/// of 16-element tiles done.
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
unsafe fn tiles_avx2<const S: usize>(rows: &[&[u8]], dst: &mut [u8], ne: usize) -> usize {
    let pairs = ne / 32;
    // Raw pointers, the bounds checked once here: slices indexed per step cost eight
    // compares a step and, with the eight row pointers spilled, reloads from the stack.
    let rows: [*const u8; S] = std::array::from_fn(|j| rows[j][..pairs * 32].as_ptr());
    let dst = dst[..pairs * 32 * S].as_mut_ptr();
    for p in 0..pairs {
        // SAFETY (loads and network): this function runs with AVX2; each row holds at
        // least `pairs * 32` bytes (sliced above) and `p * 32 + 32 <= pairs * 32`.
        let out = unsafe {
            let mut v = [__m256i::zero(); S];
            for (slot, row) in v.iter_mut().zip(&rows) {
                *slot = _mm256_loadu_si256(row.add(p * 32).cast());
            }
            interleave::<__m256i, S>(v)
        };
        // SAFETY: AVX2 (this function); `dst` holds `pairs * 32S` bytes (sliced above)
        // and `p < pairs`.
        unsafe { store_tiles(&out, dst, p) };
    }
    pairs * 2
}

/// Stores tiles 2p and 2p + 1 of `S`-byte elements: tile 2p is the low lanes of
/// `out[0..S]` in order, tile 2p + 1 the high lanes. Pairing registers k, k + 1 gives
/// 32-byte stores (half as many as 16-byte ones). The stores go in address order, all of
/// tile 2p before tile 2p + 1: alternating between the two tiles (each pair's low half,
/// then its high half) ran shuffled typesize-8 chunks 1.3–14 % slower
/// (`benches/README.md`, session 25).
///
/// # Safety
/// AVX2; `dst` must have room for `(p + 1) * 32 * S` bytes.
#[inline(always)]
unsafe fn store_tiles<const S: usize>(out: &[__m256i; S], dst: *mut u8, p: usize) {
    for k in (0..S).step_by(2) {
        // SAFETY: AVX2 and room, guaranteed by the caller: the store ends at most at
        // `2p * 16S + 16S <= (p + 1) * 32S` bytes into `dst`; unaligned stores.
        unsafe {
            let lo = _mm256_permute2x128_si256::<0x20>(out[k], out[k + 1]);
            _mm256_storeu_si256(dst.add(2 * p * 16 * S + k * 16).cast(), lo);
        }
    }
    for k in (0..S).step_by(2) {
        // SAFETY: as above: the store ends at most at `(2p + 1) * 16S + 16S = (p + 1) * 32S`.
        unsafe {
            let hi = _mm256_permute2x128_si256::<0x31>(out[k], out[k + 1]);
            _mm256_storeu_si256(dst.add((2 * p + 1) * 16 * S + k * 16).cast(), hi);
        }
    }
}

/// Typesize 16 with AVX2, as [`tiles_avx2`] does it but in two passes over runs of 16
/// steps (512 elements): rows 0–7 through the 8-row network into a 4 KiB buffer, then
/// rows 8–15, each step's two results joined by the network's last round
/// ([`interleave_round`] with 8-byte groups; the 16-row
/// network's first three rounds never mix the two halves). The 16 rows of a block whose
/// size is a power of two lie a multiple of 4 KiB apart, in one set of the 8-way L1 cache;
/// read all at once they ran at 12–15 GB/s on a 256 KiB block, against 34–41 GB/s with
/// the rows 64 bytes further apart (`benches/README.md`, session 20).
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
unsafe fn tiles16_avx2(rows: &[&[u8]], dst: &mut [u8], ne: usize) -> usize {
    const RUN: usize = 16;
    let pairs = ne / 32;
    // Raw pointers, the bounds checked once here (as in `tiles_avx2`).
    let rows: [*const u8; 16] = std::array::from_fn(|j| rows[j][..pairs * 32].as_ptr());
    let dst = dst[..pairs * 32 * 16].as_mut_ptr();
    // SAFETY: AVX2 (this function); a register op.
    let mut stage = [[unsafe { __m256i::zero() }; 8]; RUN];
    let mut p0 = 0;
    while p0 < pairs {
        let n = RUN.min(pairs - p0);
        for (q, slot) in stage.iter_mut().enumerate().take(n) {
            // SAFETY (loads and network): AVX2 (this function); each row holds
            // `pairs * 32` bytes (sliced above) and `(p0 + q) * 32 + 32 <= pairs * 32`.
            *slot = unsafe {
                let v: [__m256i; 8] =
                    std::array::from_fn(|j| _mm256_loadu_si256(rows[j].add((p0 + q) * 32).cast()));
                interleave::<__m256i, 8>(v)
            };
        }
        for (q, a) in stage.iter().enumerate().take(n) {
            let p = p0 + q;
            // SAFETY (loads, network and last round): as above, for rows 8–15; then
            // `dst` holds `pairs * 512` bytes (sliced above) and `p < pairs`.
            unsafe {
                let v: [__m256i; 8] =
                    std::array::from_fn(|j| _mm256_loadu_si256(rows[8 + j].add(p * 32).cast()));
                let b = interleave::<__m256i, 8>(v);
                let halves: [__m256i; 16] =
                    std::array::from_fn(|k| if k < 8 { a[k] } else { b[k - 8] });
                let out = interleave_round::<__m256i, 16, 8>(halves);
                store_tiles(&out, dst, p);
            }
        }
        p0 += n;
    }
    pairs * 2
}

/// Typesizes that are multiples of 16 from 32 on, with AVX2: [`tiles16_avx2`]'s two
/// passes of 8 rows per group of 16 rows, over runs of about 16 KiB of output, each group
/// landing as 16-byte pieces at its place in every element; returns the elements done (a
/// multiple of 32). For rows that would evict each other from the L1 cache
/// ([`super::rows_collide`]; a block whose size is a power of two puts its rows a multiple of
/// 4 KiB apart, all in one set) and for typesizes of 64 or more: [`any_width`] reads 16
/// rows per step, and on 256 KiB blocks ran typesizes 32 and 64 at 8 GB/s, this at 21–25
/// (`benches/README.md`, session 22). With rows apart, typesize 32 and 48 run faster
/// through [`any_width`] (32 GB/s against 18). The two passes repeat those of
/// [`tiles16_avx2`] on purpose: one helper for both, taking the stores as a closure, ran
/// typesizes 16, 64 and 128 10–45 % slower.
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn groups16_avx2(rows: &[&[u8]], dst: &mut [u8], ne: usize) -> usize {
    let s = rows.len();
    assert!(s.is_multiple_of(16) && s <= 256);
    const RUN: usize = 16;
    let pairs = ne / 32;
    let mut ptrs = [std::ptr::null::<u8>(); 256];
    for (slot, row) in ptrs.iter_mut().zip(rows) {
        *slot = row[..pairs * 32].as_ptr();
    }
    let dst = dst[..pairs * 32 * s].as_mut_ptr();
    let run = (RUN * 32 / s).clamp(2, RUN);
    // SAFETY: AVX2 (this function); a register op.
    let mut stage = [[unsafe { __m256i::zero() }; 8]; RUN];
    let mut p0 = 0;
    while p0 < pairs {
        let n = run.min(pairs - p0);
        for h in 0..s / 16 {
            let rows = &ptrs[16 * h..16 * h + 16];
            for (q, slot) in stage.iter_mut().enumerate().take(n) {
                // SAFETY (loads and network): AVX2 (this function); each row holds
                // `pairs * 32` bytes (sliced above) and `(p0 + q) * 32 + 32 <= pairs * 32`.
                *slot = unsafe {
                    let v: [__m256i; 8] = std::array::from_fn(|j| {
                        _mm256_loadu_si256(rows[j].add((p0 + q) * 32).cast())
                    });
                    interleave::<__m256i, 8>(v)
                };
            }
            for (q, a) in stage.iter().enumerate().take(n) {
                let p = p0 + q;
                // SAFETY: the loads and the network as above, for rows 8–15 of the
                // group; each 16-byte store (unaligned) ends at most at
                // `e * s + 16h + 16 <= (e + 1) * s <= pairs * 32 * s` bytes into `dst`
                // (sliced above), as `16h + 16 <= s` and `e < 32p + 32 <= pairs * 32`.
                unsafe {
                    let v: [__m256i; 8] =
                        std::array::from_fn(|j| _mm256_loadu_si256(rows[8 + j].add(p * 32).cast()));
                    let b = interleave::<__m256i, 8>(v);
                    let halves: [__m256i; 16] =
                        std::array::from_fn(|k| if k < 8 { a[k] } else { b[k - 8] });
                    let out = interleave_round::<__m256i, 16, 8>(halves);
                    for (k, reg) in out.iter().enumerate() {
                        for l in 0..2 {
                            let e = 32 * p + 16 * l + k;
                            _mm_storeu_si128(dst.add(e * s + 16 * h).cast(), reg.lane(l));
                        }
                    }
                }
            }
        }
        p0 += n;
    }
    pairs * 32
}

/// Full tiles of 16 elements from tile `first` on with SSE2, the rest with scalar code.
fn tiles<const S: usize>(rows: &[&[u8]], dst: &mut [u8], ne: usize, first: usize) {
    let tiles = ne / 16;
    for t in first..tiles {
        // SAFETY: SSE2 is part of the x86_64 baseline.
        let out = unsafe {
            let mut v = [__m128i::zero(); S];
            for (slot, row) in v.iter_mut().zip(rows) {
                *slot = __m128i::load(&row[t * 16..t * 16 + 16]);
            }
            interleave::<__m128i, S>(v)
        };
        let tile = &mut dst[t * 16 * S..(t + 1) * 16 * S];
        for (k, reg) in out.iter().enumerate() {
            let o = &mut tile[k * 16..k * 16 + 16];
            // SAFETY: `o` is exactly 16 writable bytes; unaligned store is allowed.
            unsafe { _mm_storeu_si128(o.as_mut_ptr().cast(), *reg) };
        }
    }
    finish(rows, dst, tiles * 16, ne);
}

/// Elements `from..ne` byte by byte.
pub(super) fn finish(rows: &[&[u8]], dst: &mut [u8], from: usize, ne: usize) {
    let s = rows.len();
    for i in from..ne {
        for (j, row) in rows.iter().enumerate() {
            dst[i * s + j] = row[i];
        }
    }
}

/// [`any_width`] with AVX2, from element 0: 32 elements per step.
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn any_width_avx2(rows: &[&[u8]], dst: &mut [u8], ne: usize) -> usize {
    // SAFETY: this function runs with AVX2.
    unsafe { any_width::<__m256i>(rows, dst, ne, 0) }
}

/// [`any_width`] with SSE2, from element `from` (a multiple of 16): 16 elements per step.
pub(super) fn any_width_sse2(rows: &[&[u8]], dst: &mut [u8], ne: usize, from: usize) -> usize {
    // SAFETY: SSE2 is part of the x86_64 baseline.
    unsafe { any_width::<__m128i>(rows, dst, ne, from) }
}

/// Row count 3 and any above 4 other than 8 and 16, up to 256, `V::BYTES` elements per
/// step from element `from` (a multiple of it): each group of 16 rows (the last one padded
/// with zero registers) goes through the 16-row [`interleave`] and is stored by [`group`].
/// The last, partial group goes first: its stores run up to 15 bytes into the next
/// element, whose own stores come later and overwrite them. Steps run while every store
/// stays inside `dst`; returns the element where they stopped (the caller [`finish`]es the
/// rest).
///
/// # Safety
/// `V`'s instruction set (see [`Lanes`]).
#[inline(always)]
unsafe fn any_width<V: Lanes>(rows: &[&[u8]], dst: &mut [u8], ne: usize, from: usize) -> usize {
    let (s, e) = (rows.len(), V::BYTES);
    let first = from / e;
    // A step's stores span (e - 1) * s + 16 * groups bytes from its first element.
    let span = (e - 1) * s + 16 * s.div_ceil(16);
    let mut end = ne / e;
    while end > first && e * (end - 1) * s + span > dst.len() {
        end -= 1;
    }
    let steps = first..end;
    // SAFETY (every arm): guaranteed by the caller. Common row counts get a copy of the
    // loop where the count, and so every store offset and group width, is a constant.
    unsafe {
        match s {
            3 => any_width_steps::<V>(rows, dst, steps, 3),
            5 => any_width_steps::<V>(rows, dst, steps, 5),
            6 => any_width_steps::<V>(rows, dst, steps, 6),
            7 => any_width_steps::<V>(rows, dst, steps, 7),
            9 => any_width_steps::<V>(rows, dst, steps, 9),
            10 => any_width_steps::<V>(rows, dst, steps, 10),
            11 => any_width_steps::<V>(rows, dst, steps, 11),
            12 => any_width_steps::<V>(rows, dst, steps, 12),
            13 => any_width_steps::<V>(rows, dst, steps, 13),
            14 => any_width_steps::<V>(rows, dst, steps, 14),
            15 => any_width_steps::<V>(rows, dst, steps, 15),
            24 => any_width_steps::<V>(rows, dst, steps, 24),
            32 => any_width_steps::<V>(rows, dst, steps, 32),
            _ => any_width_steps::<V>(rows, dst, steps, s),
        }
    }
    end.max(first) * e
}

/// The steps `steps` of [`any_width`] for `s = rows.len()` rows.
///
/// # Safety
/// `V`'s instruction set (see [`Lanes`]).
#[inline(always)]
unsafe fn any_width_steps<V: Lanes>(
    rows: &[&[u8]],
    dst: &mut [u8],
    steps: std::ops::Range<usize>,
    s: usize,
) {
    let e = V::BYTES;
    // Recomputed from `s` (a constant in most copies) rather than passed in, so that the
    // compiler sees every store of a step inside `o` and drops the checks.
    let span = (e - 1) * s + 16 * s.div_ceil(16);
    let (full, rest) = (s / 16, s % 16);
    // Row pointers, each row's bounds checked once: the steps read its first
    // `steps.end * e` bytes. (Slices indexed per step cost two compares a row and a step.)
    let mut ptrs = [std::ptr::null::<u8>(); 256];
    for (slot, row) in ptrs.iter_mut().zip(rows) {
        *slot = row[..steps.end * e].as_ptr();
    }
    let rows = &ptrs[..s];
    let (part, col) = (&rows[16 * full..], 16 * full);
    for p in steps {
        let o = &mut dst[e * p * s..][..span];
        // SAFETY (every group): guaranteed by the caller.
        unsafe {
            match rest {
                1 => group::<V, 1>(part, p, o, s, col),
                2 => group::<V, 2>(part, p, o, s, col),
                3 => group::<V, 3>(part, p, o, s, col),
                4 => group::<V, 4>(part, p, o, s, col),
                5 => group::<V, 5>(part, p, o, s, col),
                6 => group::<V, 6>(part, p, o, s, col),
                7 => group::<V, 7>(part, p, o, s, col),
                8 => group::<V, 8>(part, p, o, s, col),
                9 => group::<V, 9>(part, p, o, s, col),
                10 => group::<V, 10>(part, p, o, s, col),
                11 => group::<V, 11>(part, p, o, s, col),
                12 => group::<V, 12>(part, p, o, s, col),
                13 => group::<V, 13>(part, p, o, s, col),
                14 => group::<V, 14>(part, p, o, s, col),
                15 => group::<V, 15>(part, p, o, s, col),
                _ => {}
            }
            for g in 0..full {
                group::<V, 16>(&rows[16 * g..], p, o, s, 16 * g);
            }
        }
    }
}

/// Step `p` (elements `e·p .. e·p + e`, `e = V::BYTES`) of the `R` rows `rows[..R]`, which
/// are bytes `col..col + R` of elements of `s` bytes: after the 16-row [`interleave`]
/// (with 16 - R zero registers), 128-bit lane `l` of register k holds element 16l + k's
/// 16 bytes from `col`; each is stored at its place in `o` (the step's elements), in
/// element order.
///
/// # Safety
/// `V`'s instruction set (see [`Lanes`]).
#[inline(always)]
unsafe fn group<V: Lanes, const R: usize>(
    rows: &[*const u8],
    p: usize,
    o: &mut [u8],
    s: usize,
    col: usize,
) {
    let e = V::BYTES;
    // SAFETY: the instruction set is guaranteed by the caller, and each row pointer by
    // `any_width_steps`: `e` readable bytes at `p * e` for every step `p` it runs.
    let out = unsafe {
        let mut v = [V::zero(); 16];
        for (slot, row) in v.iter_mut().zip(&rows[..R]) {
            *slot = V::load(std::slice::from_raw_parts(row.add(p * e), e));
        }
        interleave::<V, 16>(v)
    };
    for l in 0..e / 16 {
        for (k, reg) in out.iter().enumerate() {
            let at = (16 * l + k) * s + col;
            let to = &mut o[at..at + 16];
            // SAFETY: `to` is exactly 16 writable bytes; unaligned store; the lane
            // extraction needs `V`'s instruction set, guaranteed by the caller.
            unsafe { _mm_storeu_si128(to.as_mut_ptr().cast(), reg.lane(l)) };
        }
    }
}
