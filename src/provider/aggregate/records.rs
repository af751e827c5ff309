//! A hash table of byte records, numbering each distinct record in the order first seen:
//! fixed-width records (numpy `U<n>` values as stored: `4n` bytes of UTF-32), or records
//! of any lengths (the UTF-8 items of `vlstring` and `utf8` columns). The fused `GROUP
//! BY` of a text column (`keys.rs`) looks every row's record up here, before anything is
//! converted or checked: a row costs a hash of its words and, on a hit, one comparison
//! of its bytes, where the usual path converts or checks every value and builds a string
//! array that DataFusion's `GROUP BY` then hashes.
//!
//! Open addressing with linear probing over a power-of-two slot array at most a quarter
//! full; each slot holds a tag of its entry's hash and the entry number (+1, 0 empty),
//! each entry its hash and, in one flat vector, its record. The hash folds each 16-byte
//! piece through one 128-bit product (the multiplications of one record are independent,
//! so they overlap), and records are compared in place, without a call to the C
//! library's `memcmp`: 19–20 ns per `<U12` row in cache on this project's VM, where a
//! chained 64-bit mix per word, the hash compared from its own vector and `memcmp` took
//! 24. (Looking up runs of rows in two passes, all hashes and first slots before any
//! comparison, measured slower: 24–26 ns.)

/// Distinct records, of one width or of any lengths, numbered `0..len()` in the order
/// first seen.
#[derive(Debug)]
pub struct RecordTable {
    /// The records' width; `None` for records of any lengths (then `ends` bounds them).
    width: Option<usize>,
    /// Entry `e`'s record is `records[e * width..][..width]`, or
    /// `records[ends[e]..ends[e + 1]]` for records of any lengths.
    records: Vec<u8>,
    /// Records of any lengths: where each starts, and one past the last's end.
    ends: Vec<usize>,
    /// Entry `e`'s hash.
    hashes: Vec<u64>,
    /// Per slot: 0 when empty, else the high half of its entry's hash (a tag compared
    /// before the record) over the entry number + 1.
    slots: Vec<u64>,
}

/// Multiplier of the word mixing (the 64-bit golden ratio, odd).
const K: u64 = 0x9e37_79b9_7f4a_7c15;

/// Slots per entry at least: a sparse table keeps most lookups to their first slot
/// (2,000 names of 6–12 letters: 1.18 slots per lookup here, 1.5 at half full).
const SLOTS_PER_ENTRY: usize = 4;

/// The slot of an entry whose hash is `h`.
#[inline(always)]
fn slot(h: u64, e: usize) -> u64 {
    (h & 0xffff_ffff_0000_0000) | (e as u64 + 1)
}

impl RecordTable {
    /// An empty table of records of `width` bytes.
    pub fn new(width: usize) -> Self {
        RecordTable {
            width: Some(width),
            records: Vec::new(),
            ends: Vec::new(),
            hashes: Vec::new(),
            slots: vec![0; 64],
        }
    }

    /// An empty table of records of any lengths (UTF-8 items).
    pub fn variable() -> Self {
        RecordTable {
            width: None,
            ends: vec![0],
            ..RecordTable::new(0)
        }
    }

    /// The number of distinct records.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    /// Distinct record `e`.
    #[inline(always)]
    pub fn record(&self, e: usize) -> &[u8] {
        match self.width {
            Some(w) => &self.records[e * w..][..w],
            None => &self.records[self.ends[e]..self.ends[e + 1]],
        }
    }

    /// The entry number of `record` (`width` bytes, or any length in a table of
    /// variable records), and whether it is new: added as entry `len()` if it was not in
    /// the table.
    #[inline]
    pub fn entry(&mut self, record: &[u8]) -> (usize, bool) {
        let h = hash(record);
        let mask = self.slots.len() - 1;
        let tag = h >> 32;
        let mut i = h as usize & mask;
        loop {
            match self.slots[i] {
                0 => break,
                s => {
                    let e = (s & 0xffff_ffff) as usize - 1;
                    if s >> 32 == tag && same(self.record(e), record) {
                        return (e, false);
                    }
                }
            }
            i = (i + 1) & mask;
        }
        let e = self.hashes.len();
        self.hashes.push(h);
        self.records.extend_from_slice(record);
        if self.width.is_none() {
            self.ends.push(self.records.len());
        }
        self.slots[i] = slot(h, e);
        if SLOTS_PER_ENTRY * self.hashes.len() > self.slots.len() {
            self.grow();
        }
        (e, true)
    }

    /// Doubles the slots and places every entry again.
    fn grow(&mut self) {
        let n = self.slots.len() * 2;
        let mask = n - 1;
        let mut slots = vec![0u64; n];
        for (e, &h) in self.hashes.iter().enumerate() {
            let mut i = h as usize & mask;
            while slots[i] != 0 {
                i = (i + 1) & mask;
            }
            slots[i] = slot(h, e);
        }
        self.slots = slots;
    }
}

/// Per-position keys of the hash: each 16-byte piece of a record is mixed with its own
/// pair (cycled every 8 pieces), so that pieces in another order hash apart.
const SECRETS: [u64; 16] = [
    0xa076_1d64_78bd_642f,
    0xe703_7ed1_a0b4_28db,
    0x8ebc_6af0_9c88_c6e3,
    0x5899_65cc_7537_4cc3,
    0x1d8e_4e27_c47d_124f,
    0x9e37_79b9_7f4a_7c15,
    0xbf58_476d_1ce4_e5b9,
    0x94d0_49bb_1331_11eb,
    0x2545_f491_4f6c_dd1d,
    0xd6e8_feb8_6659_fd93,
    0xff51_afd7_ed55_8ccd,
    0xc4ce_b9fe_1a85_ec53,
    0x87c3_7b91_1142_53d5,
    0x4cf5_ad43_2745_937f,
    0x6a09_e667_f3bc_c908,
    0xbb67_ae85_84ca_a73b,
];

/// The 128-bit product of `a` and `b`, its halves folded.
#[inline(always)]
fn fold_mul(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

/// A hash of `record`: each 16-byte piece folded through one multiplication of its two
/// words (independent of the others', so they run side by side), keyed by its position;
/// a last shorter piece padded with zeros; the sum mixed once more.
#[inline]
fn hash(record: &[u8]) -> u64 {
    let word = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
    let mut h = (record.len() as u64).wrapping_mul(K);
    let mut pieces = record.chunks_exact(16);
    for (i, p) in (&mut pieces).enumerate() {
        let k = 2 * (i % 8);
        h = h.wrapping_add(fold_mul(
            word(&p[..8]) ^ SECRETS[k],
            word(&p[8..]) ^ SECRETS[k + 1],
        ));
    }
    let rest = pieces.remainder();
    if !rest.is_empty() {
        let mut last = [0u8; 16];
        last[..rest.len()].copy_from_slice(rest);
        h = h.wrapping_add(fold_mul(
            word(&last[..8]) ^ K,
            word(&last[8..]) ^ SECRETS[0],
        ));
    }
    fold_mul(h, K)
}

/// Whether records `a` and `b` are equal: of one length, and compared 8 bytes at a time
/// in place, not through a call to the C library.
#[inline(always)]
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let word = |b: &[u8]| u64::from_ne_bytes(b.try_into().expect("8 bytes"));
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    // Differences gathered without a branch per word (a hit compares every word).
    let mut diff = ca.zip(cb).fold(0u64, |d, (x, y)| d | (word(x) ^ word(y)));
    diff |= ra
        .iter()
        .zip(rb)
        .fold(0u64, |d, (x, y)| d | u64::from(x ^ y));
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Records of widths 4 (a shorter last piece), 8 and 48, many of them distinct (the
    /// table grows many times), looked up again and again in a shuffled order: each
    /// keeps the number it got first, as a `HashMap` says.
    #[test]
    fn records_keep_their_first_numbers() {
        for width in [4usize, 8, 12, 48] {
            let mut table = RecordTable::new(width);
            let mut want: HashMap<Vec<u8>, usize> = HashMap::new();
            let mut x = 12345u64;
            for _ in 0..20_000 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let v = (x >> 33) % 3000;
                // Records that differ only in their last byte, or only in their first.
                let mut r = vec![0u8; width];
                r[width - 1] = v as u8;
                r[0] = (v >> 8) as u8;
                let next = want.len();
                let first = *want.entry(r.clone()).or_insert(next);
                let (e, new) = table.entry(&r);
                assert_eq!((e, new), (first, first == next), "width {width}");
                assert_eq!(table.record(e), r.as_slice());
            }
            assert_eq!(table.len(), want.len());
        }
    }

    /// Records of any lengths (0 to 40 bytes: empty ones, ones that are prefixes of
    /// others, ones equal but for their length's last zero byte): each keeps the number
    /// it got first, as a `HashMap` says.
    #[test]
    fn variable_records_keep_their_first_numbers() {
        let mut table = RecordTable::variable();
        let mut want: HashMap<Vec<u8>, usize> = HashMap::new();
        let mut x = 777u64;
        for _ in 0..20_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let v = (x >> 33) % 2000;
            let len = (v % 41) as usize;
            let mut r = vec![0u8; len];
            if len > 0 {
                r[0] = (v / 41) as u8;
            }
            let next = want.len();
            let first = *want.entry(r.clone()).or_insert(next);
            let (e, new) = table.entry(&r);
            assert_eq!((e, new), (first, first == next), "record {r:?}");
            assert_eq!(table.record(e), r.as_slice());
        }
        assert_eq!(table.len(), want.len());
    }
}
