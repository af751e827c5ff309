//! Byte unshuffle (`spec/filters.md` §2): `dst[i*s + j] = src[j*ne + i]`, tail copied.

/// Undoes the byte shuffle of `src` (group size `s`) into `dst` (same length).
/// Dispatches to a SIMD kernel when one exists for `s` on this CPU.
pub fn unshuffle(s: usize, src: &[u8], dst: &mut [u8]) {
    debug_assert_eq!(src.len(), dst.len());
    if !crate::chunk::simd::unshuffle(s, src, dst) {
        unshuffle_portable(s, src, dst);
    }
}

/// The portable byte unshuffle: the oracle every SIMD kernel is tested against.
pub fn unshuffle_portable(s: usize, src: &[u8], dst: &mut [u8]) {
    let len = src.len().min(dst.len());
    if s <= 1 || len < s {
        dst[..len].copy_from_slice(&src[..len]);
        return;
    }
    match s {
        2 => unshuffle_const::<2>(src, dst),
        4 => unshuffle_const::<4>(src, dst),
        8 => unshuffle_const::<8>(src, dst),
        16 => unshuffle_const::<16>(src, dst),
        _ => unshuffle_dyn(s, src, dst),
    }
}

fn unshuffle_const<const S: usize>(src: &[u8], dst: &mut [u8]) {
    let len = src.len();
    let ne = len / S;
    let body = ne * S;
    // Tiles of 16 elements: read 16 contiguous bytes of each of the S streams, write one
    // contiguous 16*S output run (fits in L1, lets the compiler keep it in registers).
    let tiles = ne / 16;
    for t in 0..tiles {
        let out = &mut dst[t * 16 * S..(t + 1) * 16 * S];
        for j in 0..S {
            let row = &src[j * ne + t * 16..j * ne + t * 16 + 16];
            for (i, &b) in row.iter().enumerate() {
                out[i * S + j] = b;
            }
        }
    }
    for i in tiles * 16..ne {
        for j in 0..S {
            dst[i * S + j] = src[j * ne + i];
        }
    }
    dst[body..len].copy_from_slice(&src[body..len]);
}

fn unshuffle_dyn(s: usize, src: &[u8], dst: &mut [u8]) {
    let len = src.len();
    let ne = len / s;
    let body = ne * s;
    for j in 0..s {
        let row = &src[j * ne..(j + 1) * ne];
        for (i, &b) in row.iter().enumerate() {
            dst[i * s + j] = b;
        }
    }
    dst[body..len].copy_from_slice(&src[body..len]);
}

/// Forward byte shuffle (writer side), used by tests and benches to make inputs.
pub fn shuffle(s: usize, src: &[u8], dst: &mut [u8]) {
    let len = src.len();
    if s <= 1 || len < s {
        dst.copy_from_slice(src);
        return;
    }
    let ne = len / s;
    for i in 0..ne {
        for j in 0..s {
            dst[j * ne + i] = src[i * s + j];
        }
    }
    dst[ne * s..].copy_from_slice(&src[ne * s..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_every_typesize() {
        for s in 1..=20 {
            for len in [0usize, 1, 7, 16, 33, 100, 257, 1000] {
                let src: Vec<u8> = (0..len).map(|i| (i * 31 + s) as u8).collect();
                let mut sh = vec![0; len];
                shuffle(s, &src, &mut sh);
                let mut back = vec![0; len];
                unshuffle_portable(s, &sh, &mut back);
                assert_eq!(back, src, "s={s} len={len}");
            }
        }
    }
}
