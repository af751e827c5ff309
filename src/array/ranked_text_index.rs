//! python-blosc2 FULL indexes of utf8 CTable columns: a FULL index
//! ([`FullIndex`]) over int32 ranks, each row's rank being its value's place among the
//! column's distinct values in code point order, and those distinct values in rank order
//! (`full.values.utf8_vocab.b2nd`, a NumPy `<U` array), as the descriptor's
//! `full.utf8_rank` part names them (`vocab_path`, `vocab_len`; null rows rank
//! `null_rank`, after every value).
//!
//! A range of text is looked up as the range of ranks whose vocabulary entries lie in
//! it, found by a binary search over the vocabulary's blocks, then in the ranks' index.
//! What python-blosc2 4.14.1 writes (checked against its output): the vocabulary holds
//! each value with its trailing NULs dropped (NumPy's `<U`), so `'a\0'` and `'a'` are two
//! ranks with equal entries, and the bounds are widened to match (see
//! `stored_text_bounds` in `index_sidecars`).

use super::dtype::{DType, Endian};
use super::full_index::{FullIndex, full_part};
use super::index_sidecars::{IndexKey, KeyType, LookupLimit, open_sidecars};
use super::ndarray::{NdArray, ReadStats};
use crate::container::store::StoreRoot;
use crate::error::Result;
use serde_json::Value as Json;
use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Mutex;

/// The opened FULL index of one utf8 column.
#[derive(Debug)]
pub struct RankedTextIndex {
    ranks: FullIndex,
    vocab: NdArray,
    vocab_len: u64,
    key: KeyType,
    /// The first entries of the vocabulary's blocks read so far, by block.
    firsts: Mutex<HashMap<u64, IndexKey>>,
}

impl RankedTextIndex {
    /// The FULL index of utf8 column `name` that the catalog describes, when it is
    /// current (not stale, built at the table's `value_epoch`); `Ok(None)` otherwise, and
    /// for sidecars that disagree with their descriptor.
    ///
    /// # Errors
    /// IO errors and unreadable frames.
    pub async fn open(
        store: &StoreRoot,
        catalog: &Json,
        value_epoch: Option<i64>,
        name: &str,
    ) -> Result<Option<RankedTextIndex>> {
        let Some(full) = full_part(catalog, value_epoch, name) else {
            return Ok(None);
        };
        let Some(rank) = full.get("utf8_rank") else {
            return Ok(None);
        };
        let Some(vocab_len) = rank.get("vocab_len").and_then(Json::as_u64) else {
            return Ok(None);
        };
        let int32 = DType::Int {
            bytes: 4,
            signed: true,
            endian: Endian::Little,
        };
        let Some(ranks) = FullIndex::open_sorted(store, full, &int32).await? else {
            return Ok(None);
        };
        let Some([vocab]) = open_sidecars(store, rank, ["vocab_path"]).await? else {
            return Ok(None);
        };
        let Some(key @ KeyType::Text { .. }) = KeyType::of(&vocab.dtype) else {
            return Ok(None);
        };
        if vocab.geometry.shape[0] != vocab_len || vocab.geometry.blockshape[0] == 0 {
            return Ok(None);
        }
        Ok(Some(RankedTextIndex {
            ranks,
            vocab,
            vocab_len,
            key,
            firsts: Mutex::default(),
        }))
    }

    /// Rows the index describes.
    pub fn rows(&self) -> u64 {
        self.ranks.rows
    }

    /// The rows holding the smallest and the largest value (the first and the last
    /// sorted rank), when every row the index describes holds a value: a null ranks
    /// `vocab_len` or more, and sorts last. The values are the column's, read at these
    /// rows (the vocabulary's NumPy strings drop trailing NULs the column keeps).
    ///
    /// # Errors
    /// IO and decoding errors.
    pub async fn extreme_rows(&self, stats: &mut ReadStats) -> Result<Option<(u64, u64)>> {
        let Some([(_, first), (last_rank, last)]) = self.ranks.ends(stats).await? else {
            return Ok(None);
        };
        let ranked =
            matches!(last_rank, IndexKey::Int(r) if (0..i128::from(self.vocab_len)).contains(&r));
        Ok(ranked.then_some((first, last)))
    }

    /// How the index reads its vocabulary as keys (text).
    pub(crate) fn key_type(&self) -> KeyType {
        self.key
    }

    /// The number of vocabulary entries `e` (a prefix: the vocabulary is sorted) for
    /// which `before(e)` holds, by a binary search over the first entries of its blocks
    /// and then the one block where it ends; `Ok(None)` when the entries read are
    /// unsorted.
    async fn partition(
        &self,
        before: impl Fn(&IndexKey) -> bool,
        stats: &mut ReadStats,
    ) -> Result<Option<u64>> {
        let block = self.vocab.geometry.blockshape[0];
        // The first entry of block `b` (each read decodes the block: kept for the
        // searches that follow, which pass through the same blocks first).
        let first = async |b: u64, stats: &mut ReadStats| -> Result<IndexKey> {
            let lock = || self.firsts.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(k) = lock().get(&b) {
                return Ok(k.clone());
            }
            let i = b * block;
            let k = self
                .key
                .key(&self.vocab.read_box(&[i..i + 1], stats).await?);
            lock().insert(b, k.clone());
            Ok(k)
        };
        // Blocks 0..lo start with an entry before the point, lo.. do not.
        let (mut lo, mut hi) = (0, self.vocab_len.div_ceil(block));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if before(&first(mid, stats).await?) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if lo == 0 {
            return Ok(Some(0));
        }
        let start = (lo - 1) * block;
        let end = (start + block).min(self.vocab_len);
        let b = self.vocab.read_box(&[start..end], stats).await?;
        if !self.key.is_sorted(&b, |k| k) {
            return Ok(None);
        }
        Ok(Some(
            start + self.key.partition_point(&b, |k| before(&k)) as u64,
        ))
    }

    /// The rows (ascending) whose value lies between `lo` and `hi`, bounds on text as
    /// the vocabulary stores it (see the module's notes), or
    /// `Ok(None)` when they are more than `limit` allows or the index cannot tell.
    ///
    /// # Errors
    /// IO and decoding errors.
    pub async fn rows_between(
        &self,
        lo: Bound<IndexKey>,
        hi: Bound<IndexKey>,
        limit: LookupLimit,
        stats: &mut ReadStats,
    ) -> Result<Option<Vec<u64>>> {
        let first = match &lo {
            Bound::Included(k) => self.partition(|e| e.order(k).is_lt(), stats).await?,
            Bound::Excluded(k) => self.partition(|e| e.order(k).is_le(), stats).await?,
            Bound::Unbounded => Some(0),
        };
        // Null rows rank `vocab_len` or more: never in a range of values.
        let end = match &hi {
            Bound::Included(k) => self.partition(|e| e.order(k).is_le(), stats).await?,
            Bound::Excluded(k) => self.partition(|e| e.order(k).is_lt(), stats).await?,
            Bound::Unbounded => Some(self.vocab_len),
        };
        let (Some(first), Some(end)) = (first, end) else {
            return Ok(None);
        };
        if first >= end {
            return Ok(Some(Vec::new()));
        }
        let rank = |r: u64| IndexKey::Int(i128::from(r));
        self.ranks
            .rows_between(
                Bound::Included(rank(first)),
                Bound::Excluded(rank(end)),
                limit,
                stats,
            )
            .await
    }
}
