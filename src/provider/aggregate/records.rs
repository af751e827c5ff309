//! A hash table of fixed-width byte records (numpy `U<n>` values as stored: `4n` bytes of
//! UTF-32), numbering each distinct record in the order first seen. The fused `GROUP BY`
//! of a `U<n>` column (`keys.rs`) looks every row's record up here, before anything is
//! converted to text: a row costs a hash of its words and, on a hit, one comparison of
//! its bytes, where the usual path converts every value to UTF-8 and then hashes the
//! strings (DataFusion's `GROUP BY`).
//!
//! Open addressing with linear probing over a power-of-two slot array at most half full;
//! each slot holds an entry number (+1, 0 empty), each entry its hash and, in one flat
//! vector, its record.

/// Distinct records of one width, numbered `0..len()` in the order first seen.
#[derive(Debug)]
pub struct RecordTable {
    width: usize,
    /// Entry `e`'s record is `records[e * width..][..width]`.
    records: Vec<u8>,
    /// Entry `e`'s hash.
    hashes: Vec<u64>,
    /// Entry number + 1 per slot; 0 for an empty slot.
    slots: Vec<u32>,
}

/// Multiplier of the word mixing (the 64-bit golden ratio, odd).
const K: u64 = 0x9e37_79b9_7f4a_7c15;

impl RecordTable {
    /// An empty table of records of `width` bytes.
    pub fn new(width: usize) -> Self {
        RecordTable {
            width,
            records: Vec::new(),
            hashes: Vec::new(),
            slots: vec![0; 64],
        }
    }

    /// The number of distinct records.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    /// Distinct record `e`.
    pub fn record(&self, e: usize) -> &[u8] {
        &self.records[e * self.width..][..self.width]
    }

    /// The entry number of `record` (`width` bytes), and whether it is new: added as
    /// entry `len()` if it was not in the table.
    pub fn entry(&mut self, record: &[u8]) -> (usize, bool) {
        let h = hash(record);
        let mask = self.slots.len() - 1;
        // The high bits, which the last multiplication mixed best.
        let mut i = (h >> 40) as usize & mask;
        loop {
            match self.slots[i] {
                0 => break,
                s => {
                    let e = s as usize - 1;
                    if self.hashes[e] == h && self.record(e) == record {
                        return (e, false);
                    }
                }
            }
            i = (i + 1) & mask;
        }
        let e = self.hashes.len();
        self.hashes.push(h);
        self.records.extend_from_slice(record);
        self.slots[i] = e as u32 + 1;
        if 2 * self.hashes.len() > self.slots.len() {
            self.grow();
        }
        (e, true)
    }

    /// Doubles the slots and places every entry again.
    fn grow(&mut self) {
        let n = self.slots.len() * 2;
        let mask = n - 1;
        let mut slots = vec![0u32; n];
        for (e, &h) in self.hashes.iter().enumerate() {
            let mut i = (h >> 40) as usize & mask;
            while slots[i] != 0 {
                i = (i + 1) & mask;
            }
            slots[i] = e as u32 + 1;
        }
        self.slots = slots;
    }
}

/// A hash of `record`: its 8-byte words (and a last shorter piece) mixed in turn, then the
/// whole once more.
#[inline]
fn hash(record: &[u8]) -> u64 {
    let mut h = record.len() as u64;
    let mut words = record.chunks_exact(8);
    for w in &mut words {
        let w = u64::from_le_bytes(w.try_into().expect("8 bytes"));
        h = (h.rotate_left(23) ^ w).wrapping_mul(K);
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut last = [0u8; 8];
        last[..rest.len()].copy_from_slice(rest);
        h = (h.rotate_left(23) ^ u64::from_le_bytes(last)).wrapping_mul(K);
    }
    (h ^ (h >> 29)).wrapping_mul(K)
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
}
