//! XOR delta (`spec/filters.md` §4): block 0 is a running XOR of `w`-byte words, every other
//! block is XORed with the decoded block 0 of the same chunk.
//!
//! Block 0 goes 8 bytes at a time: the running XOR inside one 64-bit word is at most three
//! shift-XORs, then the carry (the last decoded `w`-byte word, repeated) is XORed in. Only
//! the carry chains from word to word, one XOR each (byte by byte, the chain was a load, an
//! XOR and a store per byte).

use crate::chunk::codec::period_word;

/// Word size used by the delta filter for a given typesize.
pub fn word_size(typesize: usize) -> usize {
    match typesize {
        1 | 2 | 4 | 8 => typesize,
        t if t % 8 == 0 => 8,
        _ => 1,
    }
}

/// Undoes delta on block 0 in place.
pub fn undelta_block0(typesize: usize, buf: &mut [u8]) {
    let w = word_size(typesize);
    let end = buf.len() / w * w;
    match w {
        1 => running_xor::<1>(&mut buf[..end]),
        2 => running_xor::<2>(&mut buf[..end]),
        4 => running_xor::<4>(&mut buf[..end]),
        _ => running_xor::<8>(&mut buf[..end]),
    }
}

/// The running XOR of `W`-byte words over `buf` (a multiple of `W` bytes long), in place:
/// word `i` becomes the XOR of words `0..=i`.
fn running_xor<const W: usize>(buf: &mut [u8]) {
    // The last decoded `W`-byte word, repeated over 64 bits.
    let mut carry = 0u64;
    let mut words = buf.chunks_exact_mut(8);
    for piece in &mut words {
        let mut x = u64::from_le_bytes(piece.try_into().expect("8 bytes"));
        // The running XOR within the word, element by element (lower bytes first).
        if W <= 4 {
            x ^= x << 32;
        }
        if W <= 2 {
            x ^= x << 16;
        }
        if W == 1 {
            x ^= x << 8;
        }
        piece.copy_from_slice(&(x ^ carry).to_le_bytes());
        // The new last element is the old one XOR the word's own last element (its top
        // `W` bytes repeated over the word, as LZ4's short periods build theirs): one XOR
        // on the chain from word to word.
        carry ^= period_word(x, W);
    }
    // Under 8 bytes left: element by element.
    let rest = words.into_remainder();
    let mut prev = carry;
    for elem in rest.chunks_exact_mut(W) {
        let mut bytes = [0u8; 8];
        bytes[..W].copy_from_slice(elem);
        let x = u64::from_le_bytes(bytes) ^ prev;
        elem.copy_from_slice(&x.to_le_bytes()[..W]);
        prev = x;
    }
}

/// Undoes delta on a block other than 0 in place, against the decoded block 0 `reference`.
pub fn undelta_other(typesize: usize, buf: &mut [u8], reference: &[u8]) {
    let end = other_extent(typesize, buf.len(), reference.len());
    xor_with(&mut buf[..end], &reference[..end]);
}

/// How many leading bytes of a block of `len` bytes other than block 0 delta changes,
/// against a block 0 of `reference_len` bytes: whole words only (`undelta_other` XORs
/// exactly these; a caller undoing a block piece by piece XORs its part of them).
pub fn other_extent(typesize: usize, len: usize, reference_len: usize) -> usize {
    let w = word_size(typesize);
    (len / w * w).min(reference_len)
}

/// XORs `buf` with `reference`, byte by byte over the shorter of the two.
pub fn xor_with(buf: &mut [u8], reference: &[u8]) {
    for (b, r) in buf.iter_mut().zip(reference) {
        *b ^= r;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition (`spec/filters.md` §4): byte `k` XORed with byte `k - w`, in order.
    fn by_bytes(typesize: usize, buf: &mut [u8]) {
        let w = word_size(typesize);
        let end = buf.len() / w * w;
        for k in w..end {
            buf[k] ^= buf[k - w];
        }
    }

    #[test]
    fn block0_equals_the_byte_loop() {
        let mut seed = 0xDE17A;
        for typesize in [1, 2, 3, 4, 7, 8, 12, 16, 24] {
            for len in (0..70).chain([255, 256, 257, 1000, 4096, 4099]) {
                let src = crate::chunk::random_bytes(&mut seed, len);
                let (mut fast, mut slow) = (src.clone(), src);
                undelta_block0(typesize, &mut fast);
                by_bytes(typesize, &mut slow);
                assert_eq!(fast, slow, "typesize {typesize} len {len}");
            }
        }
    }
}
