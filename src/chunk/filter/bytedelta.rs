//! BYTEDELTA (filter id 35, `spec/filters.md` §6): the block is `s` streams of
//! `len / s` bytes (the byte planes a SHUFFLE before it made), each stored as the byte
//! differences of its bytes; undoing it is a running sum mod 256 along each stream. Bytes
//! after the `s` whole streams are stored as they are.
//!
//! python-blosc2 writes it after a SHUFFLE (`filters=[SHUFFLE, BYTEDELTA]`, the pair its
//! documentation recommends for floats) with the typesize in the meta byte.
//!
//! The portable running sum goes 8 bytes at a time: the sum inside one 64-bit word is three
//! shifted byte-wise additions (bytes added without carries from one to the next), then
//! the carry (the last sum so far, repeated) is added. Only the carry chains from word to
//! word. `crate::chunk::simd` has SSE2 and AVX2 twins, 16 and 32 bytes at a time.

/// Undoes BYTEDELTA over streams of `s` bytes' worth (`s` streams of `buf.len() / s`
/// bytes) in place. `s == 0` leaves `buf` as it is.
pub fn unbytedelta(s: usize, buf: &mut [u8]) {
    if s == 0 {
        return;
    }
    let len = buf.len() / s;
    if len == 0 {
        return;
    }
    for stream in buf[..s * len].chunks_exact_mut(len) {
        running_sum(stream);
    }
}

/// The running sum mod 256 of `stream` in place: byte `i` becomes the sum of bytes
/// `0..=i`. The SIMD kernel when there is one, the portable loop for what it leaves.
pub fn running_sum(stream: &mut [u8]) {
    let done = crate::chunk::simd::running_sum_bytes(None, stream);
    finish(stream, done);
}

/// [`running_sum`] of `src` written to `dst` (as long as `src`): for streams stored raw,
/// which stay in the chunk.
pub fn running_sum_copy(src: &[u8], dst: &mut [u8]) {
    let done = crate::chunk::simd::running_sum_bytes(Some(src), dst);
    dst[done..].copy_from_slice(&src[done..]);
    finish(dst, done);
}

/// The portable loop over `stream` after the `done` bytes a kernel summed, from the last
/// of them.
fn finish(stream: &mut [u8], done: usize) {
    let carry = done.checked_sub(1).map_or(0, |d| stream[d]);
    running_sum_from(carry, &mut stream[done..]);
}

/// The portable running sum of `stream`, every byte added to `carry` first (the sum of
/// the bytes before `stream`).
pub fn running_sum_from(carry: u8, stream: &mut [u8]) {
    const REPEAT: u64 = 0x0101_0101_0101_0101;
    // The sum so far repeated over the word's 8 bytes.
    let mut carry = u64::from(carry) * REPEAT;
    let mut words = stream.chunks_exact_mut(8);
    for piece in &mut words {
        let mut x = u64::from_le_bytes(piece.try_into().expect("8 bytes"));
        // The running sum within the word (lower bytes first).
        x = add_bytes(x, x << 8);
        x = add_bytes(x, x << 16);
        x = add_bytes(x, x << 32);
        piece.copy_from_slice(&add_bytes(x, carry).to_le_bytes());
        // The word's own total (its top byte) added to the carry: one addition on the
        // chain from word to word.
        carry = add_bytes(carry, (x >> 56) * REPEAT);
    }
    let mut acc = carry as u8;
    for b in words.into_remainder() {
        acc = acc.wrapping_add(*b);
        *b = acc;
    }
}

/// `a + b` byte by byte, mod 256 in each byte (no carry from one byte into the next).
#[inline(always)]
fn add_bytes(a: u64, b: u64) -> u64 {
    const LOW7: u64 = 0x7F7F_7F7F_7F7F_7F7F;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    ((a & LOW7) + (b & LOW7)) ^ ((a ^ b) & HIGH)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition (`spec/filters.md` §6), a byte at a time.
    fn definition(s: usize, buf: &[u8]) -> Vec<u8> {
        let mut b = buf.to_vec();
        if s == 0 {
            return b;
        }
        let len = buf.len() / s;
        for c in 0..s {
            let mut acc = 0u8;
            for x in &mut b[c * len..(c + 1) * len] {
                acc = acc.wrapping_add(*x);
                *x = acc;
            }
        }
        b
    }

    /// Deterministic pseudo-random bytes (xorshift), so that failures repeat.
    fn bytes(n: usize, seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect()
    }

    #[test]
    fn unbytedelta_matches_the_definition() {
        for s in [0, 1, 2, 3, 4, 7, 8, 12, 13, 16, 33] {
            for n in [0, 1, 5, 15, 16, 17, 31, 100, 257, 1000, 4099] {
                let data = bytes(n, (s * 7919 + n) as u64);
                let mut got = data.clone();
                unbytedelta(s, &mut got);
                assert_eq!(got, definition(s, &data), "s {s}, {n} bytes");
            }
        }
    }

    /// The SIMD kernel (where this CPU has one) and the portable loop agree, over
    /// lengths around the kernel's 16-byte steps, from every starting carry the
    /// portable loop takes, on random bytes and on bytes of 255 (every addition wraps).
    #[test]
    fn running_sum_kernel_matches_portable() {
        for n in (0..80).chain([255, 256, 257, 4096, 4111]) {
            for data in [bytes(n, n as u64 + 1), vec![255u8; n]] {
                let mut portable = data.clone();
                running_sum_from(0, &mut portable);
                let mut got = data.clone();
                running_sum(&mut got);
                assert_eq!(got, portable, "{n} bytes");
                let mut copied = vec![7u8; n];
                running_sum_copy(&data, &mut copied);
                assert_eq!(copied, portable, "{n} bytes, copied");
                assert_eq!(portable, definition(1, &data), "{n} bytes");
            }
        }
        let data = bytes(1000, 5);
        for carry in [0u8, 1, 127, 128, 255] {
            let mut got = data.clone();
            running_sum_from(carry, &mut got);
            let mut acc = carry;
            let want: Vec<u8> = data
                .iter()
                .map(|&b| {
                    acc = acc.wrapping_add(b);
                    acc
                })
                .collect();
            assert_eq!(got, want, "carry {carry}");
        }
    }
}
