//! The portable byte unshuffle in 64-bit words: 8 elements at a time, each row's 8 bytes
//! of them read as one little-endian word, the byte matrix transposed with masked shifts
//! and swaps (the 8×8 case of the block transpose in Warren's *Hacker's Delight*, §7-3),
//! and the elements written as whole words. The bit unshuffle's portable plane pass uses
//! the same swaps one level down (`transpose_bits8`).
//!
//! Safe code that runs on every CPU: the path of CPUs without a SIMD kernel (aarch64 among
//! them, where LLVM turns the swaps into NEON operations on two words at a time) and of
//! `DATAFUSION_BLOSC2_SIMD=off`. 1.3–3.3× the byte loop of
//! [`unshuffle_rows_reference`](super::unshuffle_rows_reference) on whole shuffled chunks,
//! measured on x86_64 with SIMD off (`benches/README.md`, session 20); the tests compare
//! the two. Each function returns how many elements it did (a multiple of 8); the caller
//! finishes the rest.

/// The 8 bytes of `row` from `i` as a little-endian word.
#[inline(always)]
pub(crate) fn word(row: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(row[i..i + 8].try_into().expect("8 bytes"))
}

/// Exchanges the bytes `mask` selects in `b` with those `shift` bits higher in `a`.
#[inline(always)]
fn swap(x: &mut [u64], a: usize, b: usize, shift: u32, mask: u64) {
    let t = ((x[a] >> shift) ^ x[b]) & mask;
    x[a] ^= t << shift;
    x[b] ^= t;
}

/// The three rounds of masked swaps of an 8×8 block transpose across 8 words: blocks of
/// 4×4, 2×2 and 1×1 units, each round swapping the units `(shift, mask)` select between
/// words 4, 2 and 1 apart.
#[inline(always)]
fn block_transpose(x: &mut [u64; 8], rounds: [(u32, u64); 3]) {
    let [(s4, m4), (s2, m2), (s1, m1)] = rounds;
    for j in 0..4 {
        swap(x, j, j + 4, s4, m4);
    }
    for j in [0, 1, 4, 5] {
        swap(x, j, j + 2, s2, m2);
    }
    for j in [0, 2, 4, 6] {
        swap(x, j, j + 1, s1, m1);
    }
}

/// Transposes the 8×8 byte matrix whose row `j` is word `j` (byte `i` of a word is column
/// `i`): afterwards byte `j` of word `i` is what byte `i` of word `j` was.
#[inline(always)]
pub(crate) fn transpose_bytes8(x: &mut [u64; 8]) {
    block_transpose(
        x,
        [
            (32, 0x0000_0000_FFFF_FFFF),
            (16, 0x0000_FFFF_0000_FFFF),
            (8, 0x00FF_00FF_00FF_00FF),
        ],
    );
}

/// For each byte position on its own, transposes the 8×8 bit matrix whose row `j` is that
/// byte of word `j`: afterwards bit `b` of byte `p` of word `t` is what bit `t` of byte `p`
/// of word `b` was. (The bit unshuffle's plane pass: this, then [`transpose_bytes8`].)
#[inline(always)]
pub(crate) fn transpose_bits8(x: &mut [u64; 8]) {
    block_transpose(
        x,
        [
            (4, 0x0F0F_0F0F_0F0F_0F0F),
            (2, 0x3333_3333_3333_3333),
            (1, 0x5555_5555_5555_5555),
        ],
    );
}

/// The rows cut to the `groups * 8` bytes the words read (one check per row, not one per
/// word).
#[inline(always)]
fn cut<'a, const S: usize>(rows: &[&'a [u8]], groups: usize) -> [&'a [u8]; S] {
    std::array::from_fn(|j| &rows[j][..groups * 8])
}

/// Bytes 0–3 of `x` to bytes 0, 2, 4 and 6 of the result, zeros between.
#[inline(always)]
fn spread(x: u64) -> u64 {
    let x = x & 0xFFFF_FFFF;
    let x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF;
    (x | (x << 8)) & 0x00FF_00FF_00FF_00FF
}

/// Two 4×4 byte transposes side by side: the low halves of the 4 words as one matrix, the
/// high halves as another. Afterwards word `i`'s low half holds what byte `i` of every
/// word's low half was (element `i` of 4 rows), its high half the same for element 4 + i.
#[inline(always)]
fn transpose4x2(x: &mut [u64; 4]) {
    swap(x, 0, 2, 16, 0x0000_FFFF_0000_FFFF);
    swap(x, 1, 3, 16, 0x0000_FFFF_0000_FFFF);
    swap(x, 0, 1, 8, 0x00FF_00FF_00FF_00FF);
    swap(x, 2, 3, 8, 0x00FF_00FF_00FF_00FF);
}

/// Typesize 2: each row's 4 bytes of 4 elements spread to every other byte of a word.
pub fn unshuffle2(rows: &[&[u8]], dst: &mut [u8]) -> usize {
    let groups = dst.len() / 2 / 8;
    let rows = cut::<2>(rows, groups);
    for (g, out) in dst.chunks_exact_mut(16).take(groups).enumerate() {
        let (a, b) = (word(rows[0], 8 * g), word(rows[1], 8 * g));
        let lo = spread(a) | (spread(b) << 8);
        let hi = spread(a >> 32) | (spread(b >> 32) << 8);
        out[..8].copy_from_slice(&lo.to_le_bytes());
        out[8..].copy_from_slice(&hi.to_le_bytes());
    }
    groups * 8
}

/// Typesize 4: two 4×4 byte transposes side by side (elements 0–3 in the low halves of the
/// words, 4–7 in the high halves), then pairs of halves joined into words.
pub fn unshuffle4(rows: &[&[u8]], dst: &mut [u8]) -> usize {
    const LOW: u64 = 0x0000_0000_FFFF_FFFF;
    let groups = dst.len() / 4 / 8;
    let rows = cut::<4>(rows, groups);
    for (g, out) in dst.chunks_exact_mut(32).take(groups).enumerate() {
        let mut x: [u64; 4] = std::array::from_fn(|j| word(rows[j], 8 * g));
        transpose4x2(&mut x);
        let pairs = [
            (x[0] & LOW) | (x[1] << 32),
            (x[2] & LOW) | (x[3] << 32),
            (x[0] >> 32) | (x[1] & !LOW),
            (x[2] >> 32) | (x[3] & !LOW),
        ];
        for (k, w) in pairs.iter().enumerate() {
            out[8 * k..8 * k + 8].copy_from_slice(&w.to_le_bytes());
        }
    }
    groups * 8
}

/// Typesize 8: one 8×8 byte transpose per 8 elements.
pub fn unshuffle8(rows: &[&[u8]], dst: &mut [u8]) -> usize {
    let groups = dst.len() / 8 / 8;
    let rows = cut::<8>(rows, groups);
    for (g, out) in dst.chunks_exact_mut(64).take(groups).enumerate() {
        let mut x: [u64; 8] = std::array::from_fn(|j| word(rows[j], 8 * g));
        transpose_bytes8(&mut x);
        for (i, w) in x.iter().enumerate() {
            out[8 * i..8 * i + 8].copy_from_slice(&w.to_le_bytes());
        }
    }
    groups * 8
}

/// Typesize 16: rows 0–7 and rows 8–15 transposed apart, each into its half of the
/// elements, 512 elements (8 KiB of output, which stays in L1) with rows 0–7 before rows
/// 8–15. The 16 rows of a 256 KiB block lie 16 KiB apart, all in one set of an 8-way L1
/// cache: reading all 16 for each 8 elements ran at 7.9–9.9 GB/s, 64 elements a half at
/// 10.5, 512 at 15.3 (`benches/README.md`, session 20).
pub fn unshuffle16(rows: &[&[u8]], dst: &mut [u8]) -> usize {
    let groups = dst.len() / 16 / 8;
    let rows = cut::<16>(rows, groups);
    for (b, run) in dst[..groups * 128].chunks_mut(8192).enumerate() {
        for half in 0..2 {
            for (k, out) in run.chunks_exact_mut(128).enumerate() {
                let g = 64 * b + k;
                let mut x: [u64; 8] = std::array::from_fn(|j| word(rows[8 * half + j], 8 * g));
                transpose_bytes8(&mut x);
                for (i, w) in x.iter().enumerate() {
                    let at = 16 * i + 8 * half;
                    out[at..at + 8].copy_from_slice(&w.to_le_bytes());
                }
            }
        }
    }
    groups * 8
}

/// Any other typesize: the rows in bands of 8, then at most one band each of 4, 2 and 1
/// (typesize 12 is a band of 8 and one of 4), each band transposed in words like the
/// typesizes above and its bytes of each element stored at their place in it. Typesizes
/// 3, 5, 6, 7 and 9–15 get code of their own (constant offsets, no checks per word).
pub fn unshuffle_any(rows: &[&[u8]], dst: &mut [u8]) -> usize {
    match rows.len() {
        0 => 0,
        3 => bands::<3>(rows, dst),
        5 => bands::<5>(rows, dst),
        6 => bands::<6>(rows, dst),
        7 => bands::<7>(rows, dst),
        9 => bands::<9>(rows, dst),
        10 => bands::<10>(rows, dst),
        11 => bands::<11>(rows, dst),
        12 => bands::<12>(rows, dst),
        13 => bands::<13>(rows, dst),
        14 => bands::<14>(rows, dst),
        15 => bands::<15>(rows, dst),
        s => {
            let groups = dst.len() / s / 8;
            let collide = crate::chunk::simd::rows_collide(rows);
            let rows: Vec<&[u8]> = rows.iter().map(|r| &r[..groups * 8]).collect();
            if collide {
                groups_in_runs(&rows, dst, groups)
            } else {
                groups_into(&rows, dst, groups)
            }
        }
    }
}

/// [`groups_into`] for rows that collide in the L1 cache (`simd::rows_collide`): a run
/// of 8 groups (64 elements) at a time, band by band, so that only a band's rows are read
/// at once. Rows a multiple of 4 KiB apart, all read for each group, ran typesizes 32 and
/// 64 at 2.5 GB/s, under the byte loop's 3.1; in runs, 3.6–3.7 (`benches/README.md`,
/// session 22). For rows apart, runs cost typesize 12 half its speed (session 20), hence
/// only here.
fn groups_in_runs(rows: &[&[u8]], dst: &mut [u8], groups: usize) -> usize {
    const RUN: usize = 8;
    let s = rows.len();
    let mut g0 = 0;
    while g0 < groups {
        let g1 = (g0 + RUN).min(groups);
        let run = &mut dst[g0 * 8 * s..g1 * 8 * s];
        let mut r = 0;
        while r < s {
            let width = band_width(s - r);
            for (k, out) in run.chunks_exact_mut(8 * s).enumerate() {
                band(rows, out, g0 + k, r, width);
            }
            r += width;
        }
        g0 = g1;
    }
    groups * 8
}

/// The width of the next band when `left` rows are left: 8, then 4, 2 and 1.
fn band_width(left: usize) -> usize {
    match left {
        8.. => 8,
        4..=7 => 4,
        2..=3 => 2,
        _ => 1,
    }
}

/// [`unshuffle_any`] for a typesize known when compiling.
fn bands<const S: usize>(rows: &[&[u8]], dst: &mut [u8]) -> usize {
    let groups = dst.len() / S / 8;
    groups_into(&cut::<S>(rows, groups), dst, groups)
}

/// The first `groups` groups of 8 elements by [`group`], from rows cut to them; returns
/// the elements done.
#[inline(always)]
fn groups_into(rows: &[&[u8]], dst: &mut [u8], groups: usize) -> usize {
    let s = rows.len();
    for (g, out) in dst[..groups * 8 * s].chunks_exact_mut(8 * s).enumerate() {
        group(rows, out, g);
    }
    groups * 8
}

/// Elements `8g..8g + 8` of the rows into `out` (their `8 * rows.len()` bytes). The band
/// order is spelled out rather than walked with [`band_width`] as [`groups_in_runs`] does:
/// with the loop, the typesizes compiled on their own lost their constant bands (5: 9.9 →
/// 5.8 GB/s, 12: 5.5 → 4.9).
#[inline(always)]
fn group(rows: &[&[u8]], out: &mut [u8], g: usize) {
    let s = rows.len();
    let mut r = 0;
    while s - r >= 8 {
        band(rows, out, g, r, 8);
        r += 8;
    }
    if s - r >= 4 {
        band(rows, out, g, r, 4);
        r += 4;
    }
    if s - r >= 2 {
        band(rows, out, g, r, 2);
        r += 2;
    }
    if s - r == 1 {
        band(rows, out, g, r, 1);
    }
}

/// Bytes `r..r + width` (`width` 8, 4, 2 or 1) of elements `8g..8g + 8` from rows
/// `r..r + width` into `out` (the 8 elements' `8 * rows.len()` bytes).
#[inline(always)]
fn band(rows: &[&[u8]], out: &mut [u8], g: usize, r: usize, width: usize) {
    let s = rows.len();
    match width {
        8 => {
            let mut x: [u64; 8] = std::array::from_fn(|j| word(rows[r + j], 8 * g));
            transpose_bytes8(&mut x);
            for (i, w) in x.iter().enumerate() {
                out[i * s + r..i * s + r + 8].copy_from_slice(&w.to_le_bytes());
            }
        }
        4 => {
            let mut x: [u64; 4] = std::array::from_fn(|j| word(rows[r + j], 8 * g));
            transpose4x2(&mut x);
            for (i, w) in x.iter().enumerate() {
                let b = w.to_le_bytes();
                out[i * s + r..i * s + r + 4].copy_from_slice(&b[..4]);
                out[(4 + i) * s + r..(4 + i) * s + r + 4].copy_from_slice(&b[4..]);
            }
        }
        2 => {
            let (a, b) = (word(rows[r], 8 * g), word(rows[r + 1], 8 * g));
            let pairs = [
                spread(a) | (spread(b) << 8),
                spread(a >> 32) | (spread(b >> 32) << 8),
            ];
            for (h, w) in pairs.iter().enumerate() {
                for (k, two) in w.to_le_bytes().chunks_exact(2).enumerate() {
                    let i = 4 * h + k;
                    out[i * s + r..i * s + r + 2].copy_from_slice(two);
                }
            }
        }
        _ => {
            for (i, &b) in word(rows[r], 8 * g).to_le_bytes().iter().enumerate() {
                out[i * s + r] = b;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::random_rows;
    use super::super::unshuffle_rows_reference;
    use super::*;

    /// Every word path against the byte loop, on random rows of every length up to 70
    /// elements and some longer (rows longer than needed, as a chunk decoder passes them):
    /// equal on the elements it reports done, and it reports all whole groups of 8.
    #[test]
    fn words_equal_the_byte_loop() {
        let mut seed = 97u64;
        type Kernel = fn(&[&[u8]], &mut [u8]) -> usize;
        let mut kernels: Vec<(usize, Kernel)> = vec![
            (2, unshuffle2),
            (4, unshuffle4),
            (8, unshuffle8),
            (16, unshuffle16),
        ];
        kernels.extend((1..=27).map(|s| (s, unshuffle_any as Kernel)));
        for (s, kernel) in kernels {
            for ne in (0..=70).chain([127, 128, 129, 1000, 4099]) {
                let rows = random_rows(&mut seed, s, ne);
                let refs: Vec<&[u8]> = rows.iter().map(Vec::as_slice).collect();
                let mut want = vec![0u8; s * ne];
                unshuffle_rows_reference(&refs, &mut want);
                let mut got = vec![0xA5u8; s * ne];
                let done = kernel(&refs, &mut got);
                assert_eq!(done, ne / 8 * 8, "s={s} ne={ne}");
                assert_eq!(got[..done * s], want[..done * s], "s={s} ne={ne}");
            }
        }
    }

    /// The transpose on a matrix whose every byte names its place.
    #[test]
    fn transpose_bytes8_moves_every_byte() {
        let mut x: [u64; 8] = std::array::from_fn(|j| {
            u64::from_le_bytes(std::array::from_fn(|i| (16 * j + i) as u8))
        });
        transpose_bytes8(&mut x);
        for (i, w) in x.iter().enumerate() {
            for (j, b) in w.to_le_bytes().iter().enumerate() {
                assert_eq!(*b as usize, 16 * j + i, "word {i} byte {j}");
            }
        }
    }
}
