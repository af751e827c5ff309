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

/// Open-addressing slots over entries numbered `0..len()` in the order added, each
/// entry known by its hash; what an entry is, and when two are equal, is its table's.
#[derive(Debug)]
struct Slots {
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

impl Slots {
    fn new() -> Self {
        Slots {
            hashes: Vec::new(),
            slots: vec![0; 64],
        }
    }

    /// The entry whose hash is `h` and that `equal` accepts, or the empty slot where it
    /// would go.
    #[inline(always)]
    fn find(&self, h: u64, equal: impl Fn(usize) -> bool) -> Result<usize, usize> {
        let mask = self.slots.len() - 1;
        let tag = h >> 32;
        let mut i = h as usize & mask;
        loop {
            match self.slots[i] {
                0 => return Err(i),
                s => {
                    let e = (s & 0xffff_ffff) as usize - 1;
                    if s >> 32 == tag && equal(e) {
                        return Ok(e);
                    }
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// Adds an entry of hash `h` in empty slot `i` ([`Slots::find`]'s); its number.
    fn add(&mut self, h: u64, i: usize) -> usize {
        let e = self.hashes.len();
        self.hashes.push(h);
        self.slots[i] = slot(h, e);
        if SLOTS_PER_ENTRY * self.hashes.len() > self.slots.len() {
            self.grow();
        }
        e
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

/// Distinct records of one width, numbered `0..len()` in the order first seen.
#[derive(Debug)]
pub struct RecordTable {
    width: usize,
    /// Entry `e`'s record is `records[e * width..][..width]`.
    records: Vec<u8>,
    slots: Slots,
}

impl RecordTable {
    /// An empty table of records of `width` bytes.
    pub fn new(width: usize) -> Self {
        RecordTable {
            width,
            records: Vec::new(),
            slots: Slots::new(),
        }
    }

    /// The number of distinct records.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.slots.hashes.len()
    }

    /// The records' width.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Distinct record `e`.
    #[inline(always)]
    pub fn record(&self, e: usize) -> &[u8] {
        &self.records[e * self.width..][..self.width]
    }

    /// The entry number of `record` (`width` bytes), and whether it is new: added as
    /// entry `len()` if it was not in the table.
    #[inline]
    pub fn entry(&mut self, record: &[u8]) -> (usize, bool) {
        let h = hash(record);
        match self.slots.find(h, |e| same(self.record(e), record)) {
            Ok(e) => (e, false),
            Err(i) => {
                self.records.extend_from_slice(record);
                (self.slots.add(h, i), true)
            }
        }
    }
}

/// Distinct items (byte strings of any lengths: UTF-8 text), numbered `0..len()` in the
/// order first seen.
#[derive(Debug)]
pub struct ItemTable {
    /// Entry `e`'s item is `items[ends[e]..ends[e + 1]]`.
    items: Vec<u8>,
    /// Where each item starts, and one past the last's end.
    ends: Vec<usize>,
    /// Each item's [`Head`], which alone tells short ones apart.
    heads: Vec<Head>,
    slots: Slots,
}

/// An item's length and first 16 bytes as two little-endian words, zero past its end:
/// two items of up to [`SHORT`] bytes are equal when their heads are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Head {
    lo: u64,
    hi: u64,
    len: usize,
}

/// The longest item its [`Head`] holds whole.
const SHORT: usize = 16;

impl Head {
    /// The head of `data[start..start + len]`. With [`SHORT`] bytes of `data` from
    /// `start`, one 16-byte load masked to `len` (most items are short, and a copy of a
    /// few bytes costs a call); else through a zeroed copy.
    #[inline(always)]
    fn of(data: &[u8], start: usize, len: usize) -> Head {
        let bytes = match data.get(start..start + SHORT) {
            Some(b) => u128::from_le_bytes(b.try_into().expect("16 bytes")),
            None => {
                let mut b = [0u8; SHORT];
                let n = len.min(SHORT);
                b[..n].copy_from_slice(&data[start..start + n]);
                u128::from_le_bytes(b)
            }
        };
        let bytes = match len {
            0..SHORT => bytes & ((1u128 << (8 * len)) - 1),
            _ => bytes,
        };
        Head {
            lo: bytes as u64,
            hi: (bytes >> 64) as u64,
            len,
        }
    }

    /// The hash of a short item: its two words folded through one product, keyed by its
    /// length.
    #[inline(always)]
    fn hash(&self) -> u64 {
        fold_mul(
            self.lo ^ SECRETS[0],
            self.hi ^ SECRETS[1] ^ (self.len as u64).wrapping_mul(K),
        )
    }
}

impl ItemTable {
    /// An empty table.
    pub fn new() -> Self {
        ItemTable {
            items: Vec::new(),
            ends: vec![0],
            heads: Vec::new(),
            slots: Slots::new(),
        }
    }

    /// The number of distinct items.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.slots.hashes.len()
    }

    /// Distinct item `e`.
    #[inline(always)]
    pub fn item(&self, e: usize) -> &[u8] {
        &self.items[self.ends[e]..self.ends[e + 1]]
    }

    /// The entry number of item `data[start..end]`, and whether it is new: added as entry
    /// `len()` if it was not in the table. The bytes of `data` after the item may be read
    /// (not used): an item of up to 16 bytes is compared as its [`Head`], loaded at once
    /// where `data` goes on long enough.
    #[inline]
    pub fn entry(&mut self, data: &[u8], start: usize, end: usize) -> (usize, bool) {
        let len = end - start;
        let found = if len <= SHORT {
            let head = Head::of(data, start, len);
            let h = head.hash();
            (h, self.slots.find(h, |e| self.heads[e] == head))
        } else {
            let item = &data[start..end];
            let h = hash(item);
            (h, self.slots.find(h, |e| same(self.item(e), item)))
        };
        match found {
            (_, Ok(e)) => (e, false),
            (h, Err(i)) => {
                let item = &data[start..end];
                self.items.extend_from_slice(item);
                self.ends.push(self.items.len());
                self.heads.push(Head::of(item, 0, len));
                (self.slots.add(h, i), true)
            }
        }
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
    let word = |b: &[u8]| u64::from_ne_bytes(b.try_into().expect("8 bytes"));
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    // Differences gathered without a branch per word (a hit compares every word).
    let mut diff = ca.zip(cb).fold(0u64, |d, (x, y)| d | (word(x) ^ word(y)));
    diff |= ra
        .iter()
        .zip(rb)
        .fold(0u64, |d, (x, y)| d | u64::from(x ^ y));
    a.len() == b.len() && diff == 0
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

    /// Items of any lengths (0 to 40 bytes: empty ones, ones that are prefixes of
    /// others, ones equal but for a last zero byte), looked up in one buffer (the last
    /// ones too near its end for a 16-byte load) and on their own: each keeps the number
    /// it got first, as a `HashMap` says.
    #[test]
    fn items_keep_their_first_numbers() {
        let mut x = 777u64;
        let records: Vec<Vec<u8>> = (0..20_000)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let v = (x >> 33) % 2000;
                let len = (v % 41) as usize;
                let mut r = vec![0u8; len];
                if len > 0 {
                    r[0] = (v / 41) as u8;
                }
                r
            })
            .collect();
        let data: Vec<u8> = records.concat();
        let mut table = ItemTable::new();
        let mut alone = ItemTable::new();
        let mut want: HashMap<Vec<u8>, usize> = HashMap::new();
        let mut start = 0;
        for r in &records {
            let next = want.len();
            let first = *want.entry(r.clone()).or_insert(next);
            let (e, new) = table.entry(&data, start, start + r.len());
            assert_eq!((e, new), (first, first == next), "record {r:?}");
            assert_eq!(table.item(e), r.as_slice());
            assert_eq!(alone.entry(r, 0, r.len()), (e, new));
            start += r.len();
        }
        assert_eq!(table.len(), want.len());
        // Heads of items of every length up to 16, at the end of their buffer and not.
        let bytes: Vec<u8> = (1..=40).collect();
        for len in 0..=SHORT {
            let far = Head::of(&bytes, 3, len);
            let near = Head::of(&bytes[..3 + len], 3, len);
            assert_eq!(far, near, "len {len}");
            let mut padded = bytes[3..3 + len].to_vec();
            padded.resize(SHORT, 0);
            let words = u128::from_le_bytes(padded.try_into().unwrap());
            assert_eq!((far.lo, far.hi), (words as u64, (words >> 64) as u64));
        }
    }
}
