//! Rows of one repeated byte, kept per thread for the byte planes stored as runs.
//!
//! A shuffled block's plane whose bytes are all one value is stored as a run: a negative
//! stream size, then the byte (`spec/chunk.md` §6). The high bytes of counters, of
//! timestamps and of small negative integers are such planes, with one value over many
//! blocks. Before, every block filled a plane of scratch with the byte for the unshuffle
//! to read (a 64 KiB `memset` per run plane in the 512 KiB blocks of the int64 counters).
//! [`RunRows`] fills a row once per value and hands it to every later block with that
//! value: +3 to +4 % on the shuffled counter rows of the decode bench (`benches/README.md`,
//! sessions 30 and 31). Planes under [`MIN_LEN`] bytes are still filled in place.

/// At most this many rows: one per plane of a block (the plane path takes typesizes of
/// at most 16).
pub(super) const MAX_ROWS: usize = 16;

/// Planes shorter than this are filled in place: at 512 bytes (4 KiB blocks of int64),
/// the lookup and a row kept apart cost about what the fill saved.
pub(super) const MIN_LEN: usize = 1024;

/// Up to [`MAX_ROWS`] rows, each all one byte value.
pub(super) struct RunRows {
    /// Row `s` holds `value[s]` in every byte (empty: unused).
    rows: [Vec<u8>; MAX_ROWS],
    /// The byte of each row.
    value: [u8; MAX_ROWS],
    /// When each row was last handed out (`clock` then).
    used: [u64; MAX_ROWS],
    /// The row that last held each byte value (checked against `value` before use).
    slot_of: [u8; 256],
    /// Counts hand-outs.
    clock: u64,
}

impl Default for RunRows {
    fn default() -> Self {
        RunRows::new()
    }
}

impl RunRows {
    /// No rows yet.
    pub(super) const fn new() -> RunRows {
        RunRows {
            rows: [const { Vec::new() }; MAX_ROWS],
            value: [0; MAX_ROWS],
            used: [0; MAX_ROWS],
            slot_of: [0; 256],
            clock: 0,
        }
    }

    /// Sets `rows[k]` to a row of `len` bytes of `bytes[k]` for each plane `k` in
    /// `planes` (a bit each), out of at most [`MAX_ROWS`] planes in `rows`.
    #[inline(never)]
    pub(super) fn rows_for<'r>(
        &'r mut self,
        planes: u32,
        bytes: &[u8; MAX_ROWS],
        len: usize,
        rows: &mut [&'r [u8]],
    ) {
        let n = rows.len();
        let (mut taken, mut slot) = (0u32, [0u8; MAX_ROWS]);
        let mut left = planes;
        while left != 0 {
            let k = left.trailing_zeros() as usize;
            let s = self.slot_for(bytes[k], len, n, taken);
            taken |= 1 << s;
            slot[k] = s as u8;
            left &= left - 1;
        }
        // Every plane has its row; none changes until the next call.
        let this: &'r RunRows = self;
        let mut left = planes;
        while left != 0 {
            let k = left.trailing_zeros() as usize;
            rows[k] = this.row(slot[k] as usize, len);
            left &= left - 1;
        }
    }

    /// The row for `len` bytes of `value` in a block of `planes` planes (at most
    /// [`MAX_ROWS`]), whose run planes so far took the rows in `taken` (a bit per row):
    /// one of the first `planes` rows that already holds the value, else the least recently
    /// used of them not taken, filled. A block has at most `planes` run planes, so a row
    /// not taken is always left; and only the first `planes` rows serve it, so the rows
    /// hold at most about a block's bytes (planes × plane length).
    fn slot_for(&mut self, value: u8, len: usize, planes: usize, taken: u32) -> usize {
        debug_assert!((1..=MAX_ROWS).contains(&planes) && taken.count_ones() < planes as u32);
        self.clock += 1;
        let s = self.slot_of[value as usize] as usize;
        if s < planes && self.value[s] == value && self.rows[s].len() >= len {
            self.used[s] = self.clock;
            return s;
        }
        let s = (0..planes)
            .filter(|&s| taken & (1 << s) == 0)
            .min_by_key(|&s| self.used[s])
            .unwrap_or(0);
        let row = &mut self.rows[s];
        if self.value[s] != value {
            row.clear();
        }
        row.resize(row.len().max(len), value);
        self.value[s] = value;
        self.used[s] = self.clock;
        self.slot_of[value as usize] = s as u8;
        s
    }

    /// The first `len` bytes of row `s`, which [`RunRows::slot_for`] returned for `len`
    /// bytes or more.
    fn row(&self, s: usize, len: usize) -> &[u8] {
        &self.rows[s][..len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk::xorshift;

    /// Every row handed out holds its plane's byte over its length, whatever the order of
    /// bytes, lengths and plane counts; the other planes' rows are left as they were.
    #[test]
    fn rows_hold_their_bytes() {
        let mut runs = RunRows::new();
        let mut seed = 11u64;
        let other: &[u8] = b"other";
        for block in 0..2000 {
            let planes = 1 + (xorshift(&mut seed) % 16) as usize;
            let len = [1024usize, 7, 4096, 1][block / 500];
            let (mut mask, mut bytes) = (0u32, [0u8; MAX_ROWS]);
            for (k, byte) in bytes.iter_mut().enumerate().take(planes) {
                if !xorshift(&mut seed).is_multiple_of(3) {
                    mask |= 1 << k;
                    *byte = (xorshift(&mut seed) % 6) as u8 * 51;
                }
            }
            let mut rows = [other; MAX_ROWS];
            runs.rows_for(mask, &bytes, len, &mut rows[..planes]);
            for (k, row) in rows.iter().enumerate() {
                if mask & (1 << k) == 0 {
                    assert_eq!(*row, other, "block {block} plane {k} not a run");
                } else {
                    assert_eq!(row.len(), len, "block {block} plane {k}");
                    assert!(
                        row.iter().all(|&b| b == bytes[k]),
                        "block {block} plane {k}"
                    );
                }
            }
        }
    }

    /// A value met again keeps its row; a new one takes the least recently used row that
    /// its block has not taken.
    #[test]
    fn rows_are_reused_and_evicted_by_age() {
        let mut runs = RunRows::new();
        let a = runs.slot_for(1, 64, 2, 0);
        let b = runs.slot_for(2, 64, 2, 1 << a);
        assert_ne!(a, b);
        // Next block: 2 again keeps its row; 3 takes 1's, the older and not taken.
        assert_eq!(runs.slot_for(2, 64, 2, 0), b);
        assert_eq!(runs.slot_for(3, 64, 2, 1 << b), a);
        assert!(runs.row(a, 64).iter().all(|&x| x == 3));
        // A longer row for a value held is extended with the value.
        assert_eq!(runs.slot_for(2, 100, 2, 0), b);
        assert!(runs.row(b, 100).iter().all(|&x| x == 2));
        // Two planes of one block with one value share its row.
        assert_eq!(runs.slot_for(3, 64, 2, 1 << a), a);
    }
}
