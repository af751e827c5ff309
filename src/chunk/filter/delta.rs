//! XOR delta (`spec/filters.md` §4): block 0 is a running XOR of `w`-byte words, every other
//! block is XORed with the decoded block 0 of the same chunk.

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
    for k in w..end {
        buf[k] ^= buf[k - w];
    }
}

/// Undoes delta on a block other than 0 in place, against the decoded block 0 `reference`.
pub fn undelta_other(typesize: usize, buf: &mut [u8], reference: &[u8]) {
    let w = word_size(typesize);
    let end = (buf.len() / w * w).min(reference.len());
    for (b, r) in buf[..end].iter_mut().zip(&reference[..end]) {
        *b ^= r;
    }
}
