//! [`RecentChunks`]: the last few stored chunks an array's reads fetched, shared by the
//! array's clones, and the whole-chunk fetches under way.
//!
//! Scan units smaller than a chunk (value pruning works per block; a python-blosc2 CTable
//! column is often one chunk of millions of rows) read each chunk several times, often on
//! several partitions at once: the first read fetches the chunk whole and the later ones
//! take it from here. A read that comes while another is fetching the chunk whole fetches
//! only the blocks it needs (`NdArray::fetch_recent`) rather than the whole chunk again.
//! It does not wait for that fetch: a task woken by another that then goes on decoding
//! sits in that worker's queue until it yields (tokio's LIFO slot is not stolen), and
//! waiting made a two-partition scan of a one-chunk CTable column 1.3-1.5x slower.

use bytes::Bytes;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

/// The last `N` values kept by index (chunk or batch), oldest first, each index once: what
/// [`RecentChunks`] keeps of whole chunks and a BatchArray of its decoded batches.
#[derive(Debug)]
pub(crate) struct LastKept<T, const N: usize>(VecDeque<(u64, T)>);

impl<T, const N: usize> Default for LastKept<T, N> {
    fn default() -> Self {
        LastKept(VecDeque::with_capacity(N))
    }
}

impl<T: Clone, const N: usize> LastKept<T, N> {
    /// The value kept for `i`.
    pub(crate) fn get(&self, i: u64) -> Option<T> {
        self.0.iter().find(|(k, _)| *k == i).map(|(_, v)| v.clone())
    }

    /// Keeps `v` for `i` (unless `i` is kept), dropping the oldest beyond `N`.
    pub(crate) fn put(&mut self, i: u64, v: T) {
        if self.0.iter().any(|(k, _)| *k == i) {
            return;
        }
        if self.0.len() == N {
            self.0.pop_front();
        }
        self.0.push_back((i, v));
    }

    /// The indices and values kept.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &(u64, T)> {
        self.0.iter()
    }

    /// Drops everything kept.
    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }
}

/// The last few stored chunks fetched, shared by clones of an array, so that scan units
/// smaller than a chunk fetch each chunk once.
/// Also remembers the blocks of chunks recently fetched in parts: a read of blocks next
/// to (or among) those of an earlier one is taken as a scan going through the chunk block
/// by block, which then fetches it whole; so is a read of a chunk next to one of the
/// recent whole ones. Reads of blocks apart (those an index found) stay in parts.
#[derive(Debug, Clone, Default)]
pub(crate) struct RecentChunks(Arc<Mutex<Recent>>);

#[derive(Debug, Default)]
struct Recent {
    whole: LastKept<Bytes, { RecentChunks::CAPACITY }>,
    /// `(chunk, first block, last block)` of the recent reads in parts.
    partial: VecDeque<(u64, usize, usize)>,
    /// Chunks being fetched whole now, and by which claim.
    fetching: Vec<(u64, u64)>,
    /// Numbers the claims.
    claims: u64,
}

/// Whole-chunk fetches one read is making; dropped when they are done (or failed, or
/// the read was cancelled).
pub(crate) struct FetchClaim {
    recent: RecentChunks,
    id: u64,
}

impl Drop for FetchClaim {
    fn drop(&mut self) {
        self.recent.lock().fetching.retain(|(_, id)| *id != self.id);
    }
}

impl RecentChunks {
    const CAPACITY: usize = 4;
    const PARTIAL_CAPACITY: usize = 16;

    fn lock(&self) -> MutexGuard<'_, Recent> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The chunk `i` if a recent read fetched it whole.
    pub(crate) fn get(&self, i: u64) -> Option<Bytes> {
        self.lock().whole.get(i)
    }

    /// Keeps chunk `i`, fetched whole, dropping the oldest kept beyond capacity.
    pub(crate) fn put(&self, i: u64, b: &Bytes) {
        self.lock().whole.put(i, b.clone());
    }

    /// The compressed bytes of the chunks kept.
    pub(crate) fn kept_bytes(&self) -> usize {
        self.lock().whole.iter().map(|(_, b)| b.len()).sum()
    }

    /// Drops the chunks kept.
    pub(crate) fn release(&self) {
        self.lock().whole.clear();
    }

    /// Records that a read fetches `chunks` whole now, until the claim is dropped.
    pub(crate) fn claim(&self, chunks: &[u64]) -> FetchClaim {
        let mut q = self.lock();
        q.claims += 1;
        let id = q.claims;
        q.fetching.extend(chunks.iter().map(|&i| (i, id)));
        drop(q);
        FetchClaim {
            recent: self.clone(),
            id,
        }
    }

    /// Those of `chunks` another read is fetching whole now.
    pub(crate) fn being_fetched(&self, chunks: &[u64]) -> Vec<u64> {
        let q = self.lock();
        chunks
            .iter()
            .copied()
            .filter(|i| q.fetching.iter().any(|(k, _)| k == i))
            .collect()
    }

    /// Whether blocks `blocks` (ascending, not empty) of chunk `i` may be fetched in
    /// parts now, and if so records that they are: not when a recent read in parts of `i`
    /// took blocks next to or among them (a scan going through the chunk), nor when a
    /// chunk next to `i` is among the recent whole ones (a scan going through the array,
    /// which will read all of `i` too: fetched in parts and then whole, a full scan of
    /// 1024 × 1024 tiles took 1.5× its decode floor instead of 1.2×).
    pub(crate) fn first_partial(&self, i: u64, blocks: &[usize]) -> bool {
        let (Some(&first), Some(&last)) = (blocks.first(), blocks.last()) else {
            return false;
        };
        let mut q = self.lock();
        let near = |k: u64| k.abs_diff(i) == 1;
        let touches = |&(k, f, l): &(u64, usize, usize)| k == i && first <= l + 1 && f <= last + 1;
        if q.partial.iter().any(touches) || q.whole.iter().any(|(k, _)| near(*k)) {
            return false;
        }
        if q.partial.len() == Self::PARTIAL_CAPACITY {
            q.partial.pop_front();
        }
        q.partial.push_back((i, first, last));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_next_to_earlier_blocks_of_a_chunk_go_whole() {
        let recent = RecentChunks::default();
        assert!(recent.first_partial(7, &[3]));
        // Blocks apart: an index's finds.
        assert!(recent.first_partial(7, &[9, 10]));
        assert!(recent.first_partial(8, &[3]));
        // Next to block 3, among 9..=10, next to 10: a scan going through.
        assert!(!recent.first_partial(7, &[4]));
        assert!(!recent.first_partial(7, &[10]));
        assert!(!recent.first_partial(7, &[0, 11]));
        assert!(!recent.first_partial(7, &[]));
    }

    #[test]
    fn a_chunk_is_being_fetched_while_a_claim_on_it_lasts() {
        let recent = RecentChunks::default();
        let first = recent.claim(&[3, 4]);
        let second = recent.claim(&[4, 5]);
        assert_eq!(recent.being_fetched(&[1, 3, 4, 5]), [3, 4, 5]);
        drop(first);
        assert_eq!(recent.being_fetched(&[1, 3, 4, 5]), [4, 5]);
        drop(second);
        assert!(recent.being_fetched(&[3, 4, 5]).is_empty());
        assert!(recent.lock().fetching.is_empty());
    }
}
