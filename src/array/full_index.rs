//! python-blosc2 FULL indexes of CTable columns: the column's values sorted
//! (`_indexes/<col>/full.values.b2nd`), the row each came from
//! (`full.positions.b2nd`, int64), and the first and last sorted value of every block of
//! the sorted values (`full.full_nav.l2.b2nd`, records `{start, end}`), as the column's
//! descriptor in the `index_catalog` vlmeta of `_meta` names them (`full.values_path`,
//! `full.positions_path`, `full.l2_path`).
//!
//! A range of values is looked up by the navigation records, then by the sorted values
//! of the blocks they point at, and gives the rows holding such a value: what a scan
//! needs to skip the blocks of the column holding none. What python-blosc2 4.14.1 writes
//! (checked against its output): numbers sorted as NumPy sorts them (NaN last, −0.0 and
//! 0.0 as equals), one position per row of the column when the index was built, deleted
//! rows included.
//!
//! Integers (timestamps too), little-endian floats of 4 and 8 bytes and NumPy `<U`
//! strings are looked up; other columns are not. A utf8 column's FULL index sorts the
//! ranks of its values ([`RankedTextIndex`]).

use super::chunk_local_index::ChunkLocalIndex;
use super::dtype::DType;
pub use super::index_sidecars::{IndexKey, LookupLimit};
use super::index_sidecars::{
    KeyType, MAX_VALUES_READ, POSITION, above, below, current_descriptor, index_lower_bound,
    nav_records, open_sidecars, position, same_keys, stored_text_bounds, wants_nan,
};
use super::ndarray::{NdArray, ReadStats};
use super::opsi_index::OpsiIndex;
use super::ranked_text_index::RankedTextIndex;
use crate::container::store::StoreRoot;
use crate::error::Result;
use serde_json::Value as Json;
use std::cmp::Ordering;
use std::ops::Bound;

/// Positions read at a time (rounded up to whole blocks), so that a lookup whose rows
/// spread over too many zones stops early ([`LookupLimit`]).
const POSITIONS_READ: u64 = 1 << 16;

/// The opened FULL index of one column.
#[derive(Debug)]
pub struct FullIndex {
    values: NdArray,
    positions: NdArray,
    /// The first and last key of each block of `values`.
    blocks: Vec<(IndexKey, IndexKey)>,
    block_len: u64,
    /// Rows the index describes (the column's length when it was built).
    pub rows: u64,
    key: KeyType,
}

/// The `full` part of column `name`'s descriptor when it is current and of a FULL index.
pub(crate) fn full_part<'a>(
    catalog: &'a Json,
    value_epoch: Option<i64>,
    name: &str,
) -> Option<&'a Json> {
    current_descriptor(catalog, value_epoch, name)
        .filter(|d| d.get("kind").and_then(Json::as_str) == Some("full"))?
        .get("full")
}

impl FullIndex {
    /// The FULL index of column `name` (element type `elem`, `rows` rows now) that the
    /// catalog describes, when it is current (not stale, built at the table's
    /// `value_epoch`, over the column's present length) and of a type looked up here.
    /// `Ok(None)` otherwise, and for sidecars that disagree with their descriptor.
    ///
    /// # Errors
    /// IO errors and unreadable frames.
    pub async fn open(
        store: &StoreRoot,
        catalog: &Json,
        value_epoch: Option<i64>,
        name: &str,
        elem: &DType,
    ) -> Result<Option<FullIndex>> {
        match full_part(catalog, value_epoch, name) {
            // A utf8 column's FULL index sorts ranks ([`RankedTextIndex`]).
            Some(full) if full.get("utf8_rank").is_none() => {
                Self::open_sorted(store, full, elem).await
            }
            _ => Ok(None),
        }
    }

    /// The FULL index whose part of a descriptor is `full`, over sorted values of type
    /// `elem`: see [`FullIndex::open`].
    pub(crate) async fn open_sorted(
        store: &StoreRoot,
        full: &Json,
        elem: &DType,
    ) -> Result<Option<FullIndex>> {
        let Some(key) = KeyType::of(elem) else {
            return Ok(None);
        };
        let keys = ["values_path", "positions_path", "l2_path"];
        let Some([values, positions, nav]) = open_sidecars(store, full, keys).await? else {
            return Ok(None);
        };
        let rows = values.geometry.shape[0];
        let block_len = values.geometry.blockshape[0];
        if !same_keys(&values.dtype, elem)
            || positions.dtype != POSITION
            || positions.geometry.shape[0] != rows
            || block_len == 0
            || nav.geometry.shape[0] != rows.div_ceil(block_len)
        {
            return Ok(None);
        }
        let Some(blocks) = nav_records(&nav, elem, key).await? else {
            return Ok(None);
        };
        let sorted = blocks.windows(2).all(|w| {
            w[0].0.order(&w[0].1) != Ordering::Greater && w[0].1.order(&w[1].0) != Ordering::Greater
        });
        if !sorted {
            return Ok(None);
        }
        Ok(Some(FullIndex {
            values,
            positions,
            blocks,
            block_len,
            rows,
            key,
        }))
    }

    /// The rows (ascending, deduplicated) whose value lies between `lo` and `hi` by the
    /// index's order, and for a float column every row holding a NaN when the range may
    /// hold one (`wants_nan`: SQL's comparisons order some NaN below every number, some
    /// above; the index keeps them all last).
    /// `Ok(None)` when they are more than `limit` allows (too many, or spread over too
    /// many zones: their positions are read a piece at a time and the lookup stops at
    /// the piece that shows it) or the sorted values read turn out unsorted (then the
    /// index is not used).
    ///
    /// Of the sorted values, only the blocks where the range starts and ends are read:
    /// the navigation records (checked in order when the index was opened) put every
    /// block between them inside the range.
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
        let below_lo = |k: &IndexKey| below(k, &lo);
        let above_hi = |k: &IndexKey| above(k, &hi);
        // Blocks of sorted values that may hold keys in the range.
        let first = self.blocks.partition_point(|(_, end)| below_lo(end)) as u64;
        let last = self.blocks.partition_point(|(start, _)| !above_hi(start)) as u64;
        // The blocks strictly between the first and the last hold values in the range
        // alone: more rows than wanted is known before any is read.
        let sure = last.saturating_sub(first).saturating_sub(2) * self.block_len;
        if sure > limit.max_rows {
            return Ok(None);
        }
        let mut ranges = Vec::new();
        if first < last {
            // The first block: values from the first not below `lo`.
            let Some(b) = self.sorted_block(first, stats).await? else {
                return Ok(None);
            };
            let i0 =
                self.block_start(first) + self.key.partition_point(&b, |k| below_lo(&k)) as u64;
            // The last block (maybe the same): values up to the first above `hi`.
            let b = match last - 1 == first {
                true => b,
                false => match self.sorted_block(last - 1, stats).await? {
                    Some(b) => b,
                    None => return Ok(None),
                },
            };
            let partition = self.key.partition_point(&b, |k| !above_hi(&k)) as u64;
            let i1 = self.block_start(last - 1) + partition;
            ranges.push(i0..i1.max(i0));
        }
        if matches!(self.key, KeyType::Float { .. }) && wants_nan(&lo, &hi) {
            // NaN sort last: the blocks from the first whose last value is NaN.
            let nan = self.blocks.partition_point(|(_, end)| !end.is_nan()) as u64;
            let (v0, v1) = (self.block_start(nan), self.rows);
            if v1 - v0 > MAX_VALUES_READ {
                return Ok(None);
            }
            if v0 < v1 {
                let b = self.values.read_box(&[v0..v1], stats).await?;
                if !self.key.is_sorted(&b, |k| k) {
                    return Ok(None);
                }
                ranges.push(v0 + self.key.partition_point(&b, |k| !k.is_nan()) as u64..v1);
            }
        }
        let total: u64 = ranges.iter().map(|r| r.end - r.start).sum();
        if total > limit.max_rows {
            return Ok(None);
        }
        let mut rows = Vec::with_capacity(total as usize);
        let mut spread = limit.spread();
        // Pieces of whole blocks of positions, about POSITIONS_READ at a time.
        let block = self.positions.geometry.blockshape[0].max(1);
        let piece = POSITIONS_READ.div_ceil(block) * block;
        for r in ranges.into_iter().filter(|r| r.start < r.end) {
            let mut at = r.start;
            while at < r.end {
                let end = (at / piece + 1).saturating_mul(piece).min(r.end);
                let b = self.positions.read_box(&[at..end], stats).await?;
                let from = rows.len();
                rows.extend((0..b.len() / 8).map(|i| position(&b, i)));
                if !spread.add(&rows[from..]) {
                    return Ok(None);
                }
                at = end;
            }
        }
        rows.sort_unstable();
        rows.dedup();
        Ok(Some(rows))
    }

    /// The first and the last sorted value with the row each came from; `None` for an
    /// index of no row.
    ///
    /// # Errors
    /// IO and decoding errors.
    pub(crate) async fn ends(&self, stats: &mut ReadStats) -> Result<Option<[(IndexKey, u64); 2]>> {
        let Some(last) = self.rows.checked_sub(1) else {
            return Ok(None);
        };
        let mut out = Vec::with_capacity(2);
        for i in [0, last] {
            let v = self.values.read_box(&[i..i + 1], stats).await?;
            let p = self.positions.read_box(&[i..i + 1], stats).await?;
            if v.len() != self.key.size() || p.len() != 8 {
                return Ok(None);
            }
            out.push((self.key.key(&v), position(&p, 0)));
        }
        Ok(out.try_into().ok())
    }

    /// The first value of block `b` of the sorted values.
    fn block_start(&self, b: u64) -> u64 {
        (b * self.block_len).min(self.rows)
    }

    /// The values of block `b` of the sorted values; `None` when they are not sorted.
    async fn sorted_block(&self, b: u64, stats: &mut ReadStats) -> Result<Option<Vec<u8>>> {
        let (v0, v1) = (self.block_start(b), self.block_start(b + 1));
        let values = self.values.read_box(&[v0..v1], stats).await?;
        Ok(self.key.is_sorted(&values, |k| k).then_some(values))
    }
}

/// An index that finds the rows of a range of values: FULL, PARTIAL / BUCKET
/// ([`ChunkLocalIndex`]), a utf8 column's FULL ([`RankedTextIndex`]) or OPSI
/// ([`OpsiIndex`]).
#[derive(Debug)]
pub enum ColumnIndex {
    /// A FULL index (exact rows; NaN rows included).
    Full(FullIndex),
    /// A PARTIAL or BUCKET index (row ranges, a superset; NaN rows left out).
    ChunkLocal(ChunkLocalIndex),
    /// A utf8 column's FULL index: ranks of its distinct values (exact rows).
    RankedText(Box<RankedTextIndex>),
    /// An OPSI index (exact rows; NaN rows included).
    Opsi(OpsiIndex),
}

impl ColumnIndex {
    /// Rows the index describes.
    pub fn rows(&self) -> u64 {
        match self {
            ColumnIndex::Full(i) => i.rows,
            ColumnIndex::ChunkLocal(i) => i.rows,
            ColumnIndex::RankedText(i) => i.rows(),
            ColumnIndex::Opsi(i) => i.rows,
        }
    }

    /// True when the rows it finds include those holding NaN.
    pub fn finds_nan(&self) -> bool {
        matches!(self, ColumnIndex::Full(_) | ColumnIndex::Opsi(_))
    }

    /// Row ranges (ascending, disjoint) holding the rows whose value lies between `lo`
    /// and `hi`; `Ok(None)` when they are more than `limit` allows or the index cannot
    /// tell (see [`FullIndex::rows_between`], [`ChunkLocalIndex::rows_between`]).
    ///
    /// # Errors
    /// IO and decoding errors.
    pub async fn rows_between(
        &self,
        lo: Bound<IndexKey>,
        hi: Bound<IndexKey>,
        limit: LookupLimit,
        stats: &mut ReadStats,
    ) -> Result<Option<Vec<std::ops::Range<u64>>>> {
        // Bounds of another kind than the index's keys (text on numbers) find nothing
        // certain.
        let key = match self {
            ColumnIndex::Full(i) => i.key,
            ColumnIndex::ChunkLocal(i) => i.key_type(),
            ColumnIndex::RankedText(i) => i.key_type(),
            ColumnIndex::Opsi(i) => i.key_type(),
        };
        let fits = |b: &Bound<IndexKey>| match b {
            Bound::Included(k) | Bound::Excluded(k) => key.accepts(k),
            Bound::Unbounded => true,
        };
        if !fits(&lo) || !fits(&hi) {
            return Ok(None);
        }
        // Text as the sidecars store it (NumPy drops trailing NULs).
        let (lo, hi) = stored_text_bounds(index_lower_bound(lo), hi);
        let runs = |rows: Option<Vec<u64>>| rows.map(|rows| runs_of(&rows));
        match self {
            ColumnIndex::Full(i) => Ok(runs(i.rows_between(lo, hi, limit, stats).await?)),
            ColumnIndex::ChunkLocal(i) => i.rows_between(lo, hi, limit, stats).await,
            ColumnIndex::RankedText(i) => Ok(runs(i.rows_between(lo, hi, limit, stats).await?)),
            ColumnIndex::Opsi(i) => Ok(runs(i.rows_between(lo, hi, limit, stats).await?)),
        }
    }
}

/// Ascending rows as the runs of consecutive ones they make.
fn runs_of(rows: &[u64]) -> Vec<std::ops::Range<u64>> {
    let mut out: Vec<std::ops::Range<u64>> = Vec::new();
    for &r in rows {
        match out.last_mut() {
            Some(last) if last.end == r => last.end = r.saturating_add(1),
            _ => out.push(r..r.saturating_add(1)),
        }
    }
    out
}
