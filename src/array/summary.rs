//! python-blosc2 index summaries: per-segment min/max of one CTable column
//! (`<root>/_indexes/<col>/<kind>.summary.block.b2nd`, the `block` level of the column's
//! descriptor in the `index_catalog` vlmeta of `_meta`). One structured element `{min,
//! max, flags}` per segment of `segment_len` rows. Every index kind keeps this level: a
//! SUMMARY index is nothing else; BUCKET, PARTIAL, FULL and OPSI indexes keep it beside
//! their positions (python-blosc2 4.14.1's summaries are exact for all of them).
//!
//! What python-blosc2 4.14 writes (checked against its output, not in the upstream docs):
//! extrema skip NaN and, when the catalog says `null_aware`, null rows; `flags` bit 0 means
//! "no value to summarise" (all NaN or all null), bit 1 "holds a NaN", bit 2 "all null".
//! Rows deleted after the build are still counted, so the extrema are a superset: safe
//! for pruning. A descriptor marked `stale`, or built at another `value_epoch` than the
//! table's, is not used.

use super::dtype::DType;
use super::index_sidecars::{current_descriptor, same_keys};
use super::ndarray::NdArray;
use crate::container::store::StoreRoot;
use crate::error::{Error, Result};
use serde_json::Value as Json;

/// `flags` bit: the segment has no summarisable value (all NaN or all null).
pub const FLAG_ALL_NAN: u8 = 1;
/// `flags` bit: the segment holds at least one NaN (the extrema exclude it).
pub const FLAG_HAS_NAN: u8 = 2;
/// `flags` bit: every row of the segment is null.
pub const FLAG_ALL_NULL: u8 = 4;

/// The decoded SUMMARY sidecar of one column.
#[derive(Debug, Clone)]
pub struct ColumnSummary {
    /// Rows per segment.
    pub segment_len: u64,
    /// Rows the summary describes (the column length when it was built).
    pub rows: u64,
    /// Size of one `{min, max, flags}` record.
    pub record_size: usize,
    /// Byte offset of `min` inside a record.
    pub min_offset: usize,
    /// Byte offset of `max` inside a record.
    pub max_offset: usize,
    /// Byte offset of `flags` inside a record.
    pub flags_offset: usize,
    /// The records, C order.
    pub records: Vec<u8>,
}

impl ColumnSummary {
    /// Number of segments.
    pub fn nsegments(&self) -> usize {
        self.records.len() / self.record_size.max(1)
    }

    /// `flags` of segment `i`.
    pub fn flags(&self, i: usize) -> u8 {
        self.records[i * self.record_size + self.flags_offset]
    }

    /// True when segment `i`'s extrema describe every value in it (no NaN, not empty).
    pub fn usable(&self, i: usize) -> bool {
        self.flags(i) & (FLAG_ALL_NAN | FLAG_HAS_NAN | FLAG_ALL_NULL) == 0
    }

    /// Segments that overlap rows `start..end`.
    pub fn segments_for(&self, start: u64, end: u64) -> std::ops::Range<usize> {
        let s = (start / self.segment_len.max(1)) as usize;
        let e = end.div_ceil(self.segment_len.max(1)) as usize;
        s.min(self.nsegments())..e.min(self.nsegments())
    }

    /// Reads and validates the sidecar of column `name` whose element type is `elem`.
    /// `Ok(None)` when the catalog has no usable SUMMARY descriptor for the column.
    ///
    /// # Errors
    /// IO errors, or a sidecar that disagrees with its descriptor or the column.
    pub async fn open(
        store: &StoreRoot,
        catalog: &Json,
        value_epoch: Option<i64>,
        name: &str,
        elem: &DType,
    ) -> Result<Option<ColumnSummary>> {
        // Every index kind (summary, bucket, partial, full, opsi) keeps this level.
        let Some(d) = current_descriptor(catalog, value_epoch, name) else {
            return Ok(None);
        };
        let Some(level) = d.get("levels").and_then(|l| l.get("block")) else {
            return Ok(None);
        };
        let (Some(rel), Some(segment_len)) = (
            level.get("path").and_then(Json::as_str),
            level.get("segment_len").and_then(Json::as_u64),
        ) else {
            return Ok(None);
        };
        let rows = d
            .get("shape")
            .and_then(Json::as_array)
            .and_then(|s| s.first())
            .and_then(Json::as_u64)
            .unwrap_or(0);
        let display = format!("{}/{rel}", store.display());
        let bad = |what: String| Error::corrupt(&display, "SUMMARY index", what);
        if segment_len == 0 || rel.contains("..") {
            return Err(bad(format!("segment_len {segment_len}, path {rel:?}")));
        }
        let Some(frame) = store.open_frame(rel).await? else {
            return Ok(None);
        };
        let arr = NdArray::from_frame(frame, None)?;
        let DType::Struct(fields) = &arr.dtype else {
            return Err(bad(format!("dtype {:?} is not a record", arr.dtype)));
        };
        let field = |n: &str| fields.iter().find(|f| f.name == n && f.shape.is_empty());
        let (Some(mn), Some(mx), Some(fl)) = (field("min"), field("max"), field("flags")) else {
            return Err(bad("records lack min, max or flags".into()));
        };
        // A summary of something else than the values (a text column's FULL index
        // summarises ranks) is not this column's.
        if d.get("kind").and_then(Json::as_str) != Some("summary")
            && !(same_keys(&mn.dtype, elem) && same_keys(&mx.dtype, elem))
        {
            return Ok(None);
        }
        if mn.dtype.itemsize() != elem.itemsize()
            || mx.dtype.itemsize() != elem.itemsize()
            || fl.dtype.itemsize() != 1
        {
            return Err(bad(format!(
                "min/max of {} bytes for a column of {}-byte values",
                mn.dtype.itemsize(),
                elem.itemsize()
            )));
        }
        let nseg = rows.div_ceil(segment_len);
        if arr.geometry.ndim() != 1 || arr.geometry.shape[0] != nseg {
            return Err(bad(format!(
                "{:?} segments for {rows} rows of {segment_len}",
                arr.geometry.shape
            )));
        }
        let records = arr.read_all().await?;
        Ok(Some(ColumnSummary {
            segment_len,
            rows,
            record_size: arr.itemsize(),
            min_offset: mn.offset,
            max_offset: mx.offset,
            flags_offset: fl.offset,
            records,
        }))
    }
}
