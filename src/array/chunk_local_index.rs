//! python-blosc2 PARTIAL and BUCKET indexes of CTable columns (layout `chunk-local-v1`):
//! the column cut in index chunks of `chunk_len` rows, each chunk's values sorted
//! (`<kind>.values.b2nd`, chunk after chunk from the offsets in `<kind>.offsets.b2nd`),
//! with, for each sorted value, its row inside the chunk (PARTIAL, `positions`) or its
//! bucket of `bucket_len` rows there (BUCKET, `bucket_positions`), and the first and last
//! value of every `nav_segment_len` sorted values of each chunk (`<kind>_nav.l2.b2nd`,
//! `nsegments_per_chunk` records `{start, end}` per chunk, the last repeated to fill).
//!
//! What python-blosc2 4.14.1 writes (checked against its output): a BUCKET index stores
//! its values with their `value_lossy_bits` low bits cleared (integers: the value's bits;
//! floats: the bits of an order-keeping unsigned twin), its navigation records the values
//! themselves; NaN sorts last in a chunk and is left out of the navigation records. So a
//! range is looked up by the records, then in the stored values with its lower bound
//! cleared the same way, and gives row ranges holding every row in the range, and a few
//! more (a bucket's other rows; values that only share their cleared form). NaN rows
//! are not found here: a caller keeps them by the block summaries' NaN flags.

use super::dtype::DType;
use super::index_sidecars::{
    IndexKey, KeyType, LookupLimit, above, below, current_descriptor, nav_records, open_sidecars,
    same_keys,
};
use super::ndarray::{NdArray, ReadStats};
use crate::container::store::StoreRoot;
use crate::error::Result;
use serde_json::Value as Json;
use std::ops::{Bound, Range};

/// The bits `b` of a float `width` bits wide with the low `lossy` bits of their
/// order-keeping unsigned twin cleared, as python-blosc2 quantizes BUCKET values: the
/// twin flips every bit of a negative number and the sign bit of a positive one.
fn clear_ordered(b: u64, width: u32, lossy: u32) -> u64 {
    let sign = 1u64 << (width - 1);
    let all = u64::MAX >> (64 - width);
    let twin = if b & sign != 0 { !b & all } else { b ^ sign };
    let twin = twin & !((1u64 << lossy) - 1);
    if twin & sign != 0 {
        twin ^ sign
    } else {
        !twin & all
    }
}

/// What a sorted value's entry says of its row.
#[derive(Debug)]
enum Rows {
    /// PARTIAL: the row inside the chunk (unsigned integers of `bytes`).
    Exact { bytes: usize },
    /// BUCKET: the bucket inside the chunk (unsigned integers of `bytes`), of `len` rows.
    Bucket { bytes: usize, len: u64 },
}

/// The opened PARTIAL or BUCKET index of one column.
#[derive(Debug)]
pub struct ChunkLocalIndex {
    values: NdArray,
    positions: NdArray,
    rows_of: Rows,
    /// The navigation records, `nsegments_per_chunk` per chunk.
    nav: Vec<(IndexKey, IndexKey)>,
    chunk_len: u64,
    segment_len: u64,
    segments_per_chunk: usize,
    /// Low bits cleared in the stored values (BUCKET).
    lossy_bits: u32,
    key: KeyType,
    /// Rows the index describes (the column's length when it was built).
    pub rows: u64,
}

impl ChunkLocalIndex {
    /// The PARTIAL or BUCKET index of column `name` (element type `elem`) that the
    /// catalog describes, when it is current (not stale, built at the table's
    /// `value_epoch`) and of a type looked up here; `Ok(None)` otherwise, and for
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
    ) -> Result<Option<ChunkLocalIndex>> {
        let Some(d) = current_descriptor(catalog, value_epoch, name) else {
            return Ok(None);
        };
        let kind = d.get("kind").and_then(Json::as_str).unwrap_or("");
        if !matches!(kind, "partial" | "bucket") {
            return Ok(None);
        }
        let Some(key) = KeyType::of(elem) else {
            return Ok(None);
        };
        let Some(b) = d
            .get(kind)
            .filter(|b| b.get("layout").and_then(Json::as_str) == Some("chunk-local-v1"))
        else {
            return Ok(None);
        };
        let num = |k: &str| b.get(k).and_then(Json::as_u64).filter(|&n| n > 0);
        let positions_key = match kind {
            "partial" => "positions_path",
            _ => "bucket_positions_path",
        };
        let (Some(chunk_len), Some(segment_len), Some(per_chunk)) = (
            num("chunk_len"),
            num("nav_segment_len"),
            num("nsegments_per_chunk"),
        ) else {
            return Ok(None);
        };
        let lossy_bits = match kind {
            "bucket" => b
                .get("value_lossy_bits")
                .and_then(Json::as_u64)
                .unwrap_or(0),
            _ => 0,
        };
        if lossy_bits >= 8 * key.size() as u64 || per_chunk > 1 << 20 {
            return Ok(None);
        }
        let keys = ["values_path", positions_key, "offsets_path", "l2_path"];
        let Some([values, positions, offsets, nav]) = open_sidecars(store, b, keys).await? else {
            return Ok(None);
        };
        if !same_keys(&values.dtype, elem) {
            return Ok(None);
        }
        let rows = values.geometry.shape[0];
        let nchunks = rows.div_ceil(chunk_len);
        let unsigned = |d: &DType| match *d {
            DType::Int {
                bytes,
                signed: false,
                endian: super::dtype::Endian::Little,
            } => Some(bytes as usize),
            _ => None,
        };
        let Some(pos_bytes) = unsigned(&positions.dtype) else {
            return Ok(None);
        };
        let rows_of = match kind {
            "partial" => Rows::Exact { bytes: pos_bytes },
            _ => match num("bucket_len") {
                Some(len) => Rows::Bucket {
                    bytes: pos_bytes,
                    len,
                },
                None => return Ok(None),
            },
        };
        // Chunk after chunk, every row: chunk `c`'s values start at `c * chunk_len`.
        if positions.geometry.shape[0] != rows || offsets.geometry.shape[0] != nchunks + 1 {
            return Ok(None);
        }
        let offsets_ok = match offsets.dtype {
            DType::Int {
                bytes: 8,
                signed: true,
                endian: super::dtype::Endian::Little,
            } => offsets
                .read_all()
                .await?
                .chunks_exact(8)
                .enumerate()
                .all(|(c, o)| {
                    i64::from_le_bytes(o.try_into().expect("8 bytes")) as u64
                        == (c as u64).saturating_mul(chunk_len).min(rows)
                }),
            _ => false,
        };
        if !offsets_ok || Some(nav.geometry.shape[0]) != nchunks.checked_mul(per_chunk) {
            return Ok(None);
        }
        let Some(nav) = nav_records(&nav, elem, key).await? else {
            return Ok(None);
        };
        Ok(Some(ChunkLocalIndex {
            values,
            positions,
            rows_of,
            nav,
            chunk_len,
            segment_len,
            segments_per_chunk: per_chunk as usize,
            lossy_bits: lossy_bits as u32,
            key,
            rows,
        }))
    }

    /// How the index reads its values as keys.
    pub(crate) fn key_type(&self) -> KeyType {
        self.key
    }

    /// `k` with the low bits a BUCKET index clears in its stored values cleared: no
    /// greater than `k` in the index's order, and the stored form of every value at or
    /// above `k` is at or above it.
    fn cleared(&self, k: IndexKey) -> IndexKey {
        let bits = self.lossy_bits;
        if bits == 0 {
            return k;
        }
        match (k, self.key) {
            (IndexKey::Int(v), _) => IndexKey::Int(v & !((1i128 << bits) - 1)),
            (IndexKey::Float(f), KeyType::Float { bytes: 4 }) if f.is_finite() => {
                let b = clear_ordered((f as f32).to_bits().into(), 32, bits);
                // Rounding `f` to float32 may have raised it: step below it then.
                let q = f32::from_bits(b as u32) as f64;
                IndexKey::Float(if q > f { f64::NEG_INFINITY } else { q })
            }
            (IndexKey::Float(f), _) if f.is_finite() => {
                IndexKey::Float(f64::from_bits(clear_ordered(f.to_bits(), 64, bits)))
            }
            (k, _) => k,
        }
    }

    /// `k` as the search compares stored values: with low bits cleared, −0.0 is stored as
    /// a tiny negative number and 0.0 as itself (their order-keeping twins differ), and
    /// NumPy sorts them as equals, so float values within the cleared bits' reach of zero
    /// count as 0.0 (monotone: the order of the others is kept).
    fn searched(&self, k: IndexKey) -> IndexKey {
        let reach = match self.key {
            KeyType::Float { bytes: 4 } => f32::from_bits(1u32 << self.lossy_bits) as f64,
            _ => f64::from_bits(1u64 << self.lossy_bits),
        };
        match k {
            IndexKey::Float(f) if self.lossy_bits > 0 && f.abs() <= reach => IndexKey::Float(0.0),
            k => k,
        }
    }

    /// Row ranges (ascending, disjoint) holding every row whose value lies between `lo`
    /// and `hi` by the index's order (NaN rows aside: see the module's notes), or
    /// `Ok(None)` when they are more than `limit` allows (cover too many rows, or lie in
    /// too many zones).
    ///
    /// # Errors
    /// IO and decoding errors.
    pub async fn rows_between(
        &self,
        lo: Bound<IndexKey>,
        hi: Bound<IndexKey>,
        limit: LookupLimit,
        stats: &mut ReadStats,
    ) -> Result<Option<Vec<Range<u64>>>> {
        let max_rows = limit.max_rows;
        let mut spread = limit.spread();
        let above_hi = |k: &IndexKey| above(k, &hi);
        // The stored values are searched from the lower bound as stored.
        let stored_lo = match &lo {
            Bound::Included(k) | Bound::Excluded(k) => {
                Bound::Included(self.searched(self.cleared(k.clone())))
            }
            Bound::Unbounded => Bound::Unbounded,
        };
        let nchunks = self.rows.div_ceil(self.chunk_len);
        // Per chunk, the segments whose values may lie in the range (NaN left out of the
        // records). Those strictly between its first and last hold such values alone:
        // more rows than wanted is known before any is read.
        let mut spans = Vec::new();
        let mut sure = 0u64;
        for c in 0..nchunks {
            let base = c * self.chunk_len;
            let items = (self.rows - base).min(self.chunk_len);
            let nseg = items.div_ceil(self.segment_len) as usize;
            let at = c as usize * self.segments_per_chunk;
            let Some(records) = self.nav.get(at..at + nseg.min(self.segments_per_chunk)) else {
                return Ok(None);
            };
            let s0 = records.partition_point(|(_, end)| below(end, &lo));
            let s1 = records.partition_point(|(start, _)| !above_hi(start));
            if s0 < s1 {
                let inner = (s1 - s0).saturating_sub(2) as u64;
                sure = sure.saturating_add(inner.saturating_mul(self.segment_len));
                spans.push((base, items, s0, s1));
            }
        }
        if sure > max_rows {
            return Ok(None);
        }
        let mut out: Vec<Range<u64>> = Vec::new();
        let mut covered = 0u64;
        for (base, items, s0, s1) in spans {
            let at_segment = |s: usize| {
                base.saturating_add((s as u64).saturating_mul(self.segment_len))
                    .min(base + items)
            };
            let (v0, v1) = (at_segment(s0), at_segment(s1));
            let b = self.values.read_box(&[v0..v1], stats).await?;
            if !self.key.is_sorted(&b, |k| self.searched(k)) {
                return Ok(None);
            }
            let key = self.key;
            let i0 = key.partition_point(&b, |k| below(&self.searched(k), &stored_lo));
            let rest = &b[i0 * key.size()..];
            let i1 = i0 + key.partition_point(rest, |k| !above_hi(&self.searched(k)));
            if i0 >= i1 {
                continue;
            }
            let p = self
                .positions
                .read_box(&[v0 + i0 as u64..v0 + i1 as u64], stats)
                .await?;
            let (bytes, len) = match self.rows_of {
                Rows::Exact { bytes } => (bytes, 1),
                Rows::Bucket { bytes, len } => (bytes, len),
            };
            let mut local: Vec<u64> = p
                .chunks_exact(bytes)
                .map(|b| {
                    let mut le = [0u8; 8];
                    le[..bytes].copy_from_slice(b);
                    u64::from_le_bytes(le)
                })
                .collect();
            local.sort_unstable();
            local.dedup();
            for l in local {
                let start = base + l.saturating_mul(len);
                let r = start..start.saturating_add(len).min(base + items);
                if r.start >= r.end {
                    continue;
                }
                covered += r.end - r.start;
                if covered > max_rows || !spread.add(&[r.start, r.end - 1]) {
                    return Ok(None);
                }
                match out.last_mut() {
                    Some(last) if last.end >= r.start => last.end = last.end.max(r.end),
                    _ => out.push(r),
                }
            }
        }
        Ok(Some(out))
    }
}

#[cfg(test)]
mod tests {
    use super::clear_ordered;

    /// The bits python-blosc2 4.14.1 stores (`_quantize_float_scalar`, 4 lossy bits).
    #[test]
    fn floats_are_cleared_as_python_blosc2_clears_them() {
        for (v, want) in [
            (12.25f64, 4623085754984169472u64),
            (-0.0, 9223372036854775823),
            (-3.7, 13838886114965428639),
            (1e-300, 118622047889322832),
        ] {
            assert_eq!(clear_ordered(v.to_bits(), 64, 4), want, "{v}");
        }
        for (v, want) in [
            (12.25f32, 1094975488u32),
            (-0.0, 2147483663),
            (-3.7, 3228355791),
        ] {
            assert_eq!(
                clear_ordered(v.to_bits().into(), 32, 4),
                u64::from(want),
                "{v}"
            );
        }
    }
}
