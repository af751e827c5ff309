//! python-blosc2 OPSI indexes of CTable columns: the column's values reordered in a few
//! sorting cycles so that each block of `block_len` of them spans a narrow range
//! (`opsi.opsi_cycle<N>.values.b2nd`), the row each came from (`…positions.b2nd`, int64),
//! and each block's least and greatest value (`opsi.opsi_nav.mins.b2nd`,
//! `opsi.opsi_nav.maxs.b2nd`), as the descriptor's `opsi` part names them.
//!
//! What python-blosc2 4.14.1 writes (checked against its output): the values of the last
//! cycle are a permutation of the column's (deleted rows included), not necessarily
//! sorted inside a block (`is_csi` tells when they are sorted throughout); NaN gathers at
//! the end, and a block holding one has NaN as its greatest value. So a range is looked up
//! by the blocks whose extrema meet it, whose values are then each tested: the rows found
//! are exact, NaN rows included when the range may hold them.

use super::dtype::DType;
use super::index_sidecars::{
    IndexKey, KeyType, LookupLimit, MAX_VALUES_READ, POSITION, above, below, current_descriptor,
    open_sidecars, position, same_keys, wants_nan,
};
use super::ndarray::{NdArray, ReadStats};
use crate::container::store::StoreRoot;
use crate::error::Result;
use serde_json::Value as Json;
use std::ops::Bound;

/// The opened OPSI index of one column.
#[derive(Debug)]
pub struct OpsiIndex {
    values: NdArray,
    positions: NdArray,
    /// The least and greatest value of each block of `values`.
    extrema: Vec<(IndexKey, IndexKey)>,
    block_len: u64,
    key: KeyType,
    /// Rows the index describes (the column's length when it was built).
    pub rows: u64,
}

impl OpsiIndex {
    /// The OPSI index of column `name` (element type `elem`) that the catalog describes,
    /// when it is current and of a type looked up here; `Ok(None)` otherwise, and for
    /// sidecars that disagree with their descriptor.
    ///
    /// # Errors
    /// IO errors and unreadable frames.
    pub async fn open(
        store: &StoreRoot,
        catalog: &Json,
        value_epoch: Option<i64>,
        name: &str,
        elem: &DType,
    ) -> Result<Option<OpsiIndex>> {
        let Some(o) = current_descriptor(catalog, value_epoch, name)
            .filter(|d| d.get("kind").and_then(Json::as_str) == Some("opsi"))
            .and_then(|d| d.get("opsi"))
        else {
            return Ok(None);
        };
        let (Some(key), Some(block_len)) = (
            KeyType::of(elem),
            o.get("block_len").and_then(Json::as_u64).filter(|&n| n > 0),
        ) else {
            return Ok(None);
        };
        let keys = ["values_path", "positions_path", "mins_path", "maxs_path"];
        let Some([values, positions, mins, maxs]) = open_sidecars(store, o, keys).await? else {
            return Ok(None);
        };
        let rows = values.geometry.shape[0];
        let nblocks = rows.div_ceil(block_len);
        let fits = |a: &NdArray| same_keys(&a.dtype, elem) && a.geometry.shape[0] == nblocks;
        if !same_keys(&values.dtype, elem)
            || positions.dtype != POSITION
            || positions.geometry.shape[0] != rows
            || !fits(&mins)
            || !fits(&maxs)
        {
            return Ok(None);
        }
        let keys = |b: Vec<u8>| -> Vec<IndexKey> {
            b.chunks_exact(key.size()).map(|e| key.key(e)).collect()
        };
        let extrema = keys(mins.read_all().await?)
            .into_iter()
            .zip(keys(maxs.read_all().await?))
            .collect();
        Ok(Some(OpsiIndex {
            values,
            positions,
            extrema,
            block_len,
            key,
            rows,
        }))
    }

    /// How the index reads its values as keys.
    pub(crate) fn key_type(&self) -> KeyType {
        self.key
    }

    /// The rows (ascending, deduplicated) whose value lies between `lo` and `hi` by the
    /// index's order, and every row holding a NaN when the range may hold one
    /// (open on a side or bounded by a NaN); `Ok(None)` when they are more than `limit`
    /// allows (too many, or spread over too many zones), or when the blocks to read
    /// hold too many values.
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
        let max_rows = limit.max_rows;
        let mut spread = limit.spread();
        // Blocks whose extrema meet the range (a block holding a NaN has NaN as its
        // greatest value), and those holding a NaN when the range may hold one.
        let nan = wants_nan(&lo, &hi);
        let meets = |(min, max): &(IndexKey, IndexKey)| {
            !(above(min, &hi) || below(max, &lo)) || (nan && (min.is_nan() || max.is_nan()))
        };
        let mut spans: Vec<(u64, u64)> = Vec::new();
        for (b, _) in self.extrema.iter().enumerate().filter(|(_, e)| meets(e)) {
            let b = b as u64;
            match spans.last_mut() {
                Some(last) if last.1 == b => last.1 = b + 1,
                _ => spans.push((b, b + 1)),
            }
        }
        let values: u64 = spans
            .iter()
            .map(|(b0, b1)| (b1 - b0) * self.block_len)
            .sum();
        if values > MAX_VALUES_READ {
            return Ok(None);
        }
        let size = self.key.size();
        let mut rows = Vec::new();
        for (b0, b1) in spans {
            let (v0, v1) = (b0 * self.block_len, (b1 * self.block_len).min(self.rows));
            if v0 >= v1 {
                continue;
            }
            let b = self.values.read_box(&[v0..v1], stats).await?;
            let hits: Vec<u64> = b
                .chunks_exact(size)
                .enumerate()
                .filter(|(_, e)| {
                    let k = self.key.key(e);
                    (nan && k.is_nan()) || !(below(&k, &lo) || above(&k, &hi))
                })
                .map(|(i, _)| v0 + i as u64)
                .collect();
            if rows.len() as u64 + hits.len() as u64 > max_rows {
                return Ok(None);
            }
            if hits.is_empty() {
                continue;
            }
            // The positions of the span's values, for its hits.
            let p = self.positions.read_box(&[v0..v1], stats).await?;
            let from = rows.len();
            rows.extend(hits.iter().map(|&h| position(&p, (h - v0) as usize)));
            if !spread.add(&rows[from..]) {
                return Ok(None);
            }
        }
        rows.sort_unstable();
        rows.dedup();
        Ok(Some(rows))
    }
}
