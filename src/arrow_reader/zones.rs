//! Zones: the granularity at which value statistics are known and scans can be pruned.
//! An array's zone is a chunk; a table's is a fixed run of
//! [`Table::zone_rows`](crate::array::table::Table::zone_rows) rows (a CTable block, what
//! its SUMMARY sidecars describe). Zoned planning cuts a selection into
//! scan units that each lie inside one zone, so a unit can be skipped on its zone's
//! min/max. This module also turns the statistics sources that need no decoding (SUMMARY
//! sidecars, special-value chunks) into Arrow arrays.

use super::convert::to_arrow;
use super::reader::{ScanUnit, Selection, cast_to, value_column};
use crate::array::dtype::DType;
use crate::array::geometry::odometer;
use crate::array::ndarray::NdArray;
use crate::array::summary::ColumnSummary;
use crate::chunk::SpecialValue;
use crate::dataset::Dataset;
use crate::error::Result;
use arrow::array::{Array, ArrayRef};
use arrow::datatypes::{DataType, Schema};
use std::ops::Range;

/// A scan unit and the zone it lies in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZonedUnit {
    /// What to read.
    pub unit: ScanUnit,
    /// Chunk index (arrays) or `row / zone_rows` (tables).
    pub zone: u64,
    /// Rows (elements) of the whole zone, 0 when unknown: statistics over units of one
    /// zone that add up to this many rows describe the zone.
    pub zone_rows: u64,
}

impl ZonedUnit {
    /// A unit outside zone planning (no zone statistics are gathered from it).
    pub fn unzoned(unit: ScanUnit) -> Self {
        ZonedUnit {
            unit,
            zone: u64::MAX,
            zone_rows: 0,
        }
    }
}

/// Plans scan units of `sel` so that each lies inside one zone, in zone order: about
/// `max_rows` rows each or fewer, in whole blocks along dimension 0 (one block when a
/// block is bigger than `max_rows`).
pub fn plan_zoned_units(ds: &Dataset, sel: &Selection, max_rows: u64) -> Vec<ZonedUnit> {
    let max_rows = max_rows.max(1);
    match ds {
        Dataset::Array(a) => {
            let g = &a.geometry;
            if g.ndim() == 0 {
                return vec![ZonedUnit {
                    unit: ScanUnit::Box(Vec::new()),
                    zone: 0,
                    zone_rows: 1,
                }];
            }
            let Some(bbox) = sel
                .dims
                .iter()
                .map(|d| Some(d.first()?.start..d.last()?.end))
                .collect::<Option<Vec<_>>>()
            else {
                return Vec::new();
            };
            let mut out = Vec::new();
            for c in g.chunks_in_box(&bbox) {
                let region = g.chunk_region(&g.chunk_coords(c));
                let per_dim: Vec<Vec<Range<u64>>> = region
                    .iter()
                    .zip(&sel.dims)
                    .map(|(reg, rs)| {
                        rs.iter()
                            .map(|r| r.start.max(reg.start)..r.end.min(reg.end))
                            .filter(|r| r.start < r.end)
                            .collect()
                    })
                    .collect();
                let counts: Vec<Range<u64>> = per_dim.iter().map(|v| 0..v.len() as u64).collect();
                let mut boxes = Vec::new();
                odometer(&counts, |k| {
                    boxes.push(
                        k.iter()
                            .enumerate()
                            .map(|(d, &i)| per_dim[d][i as usize].clone())
                            .collect::<Vec<_>>(),
                    );
                });
                let region_rows: u64 = region.iter().map(|r| r.end - r.start).product();
                for bx in boxes {
                    let inner: u64 = bx[1..].iter().map(|r| r.end - r.start).product();
                    // Whole blocks per unit (rounded down, or up to one block): no block
                    // is decoded by two units, and whole-row reads decode straight into
                    // the batch. A unit may then exceed `max_rows`; the scan slices its
                    // batches to `batch_size`.
                    let block = if a.block_addressable {
                        g.blockshape[0].max(1)
                    } else {
                        g.chunkshape[0].max(1)
                    };
                    let step = (max_rows / inner.max(1)).max(1);
                    let step = if step > block {
                        step - step % block
                    } else {
                        block
                    };
                    // Cuts at multiples of `step` from the chunk's first row, so that a
                    // selection starting inside a block does not shift every later cut
                    // off the block edges.
                    let (cs, mut s) = (region[0].start, bx[0].start);
                    while s < bx[0].end {
                        let e = (cs + ((s - cs) / step + 1) * step).min(bx[0].end);
                        let mut piece = bx.clone();
                        piece[0] = s..e;
                        out.push(ZonedUnit {
                            unit: ScanUnit::Box(piece),
                            zone: c,
                            zone_rows: region_rows,
                        });
                        s = e;
                    }
                }
            }
            out
        }
        Dataset::Table(t) => {
            let z = t.zone_rows();
            let mut out = Vec::new();
            for r in &sel.dims[0] {
                let mut s = r.start;
                while s < r.end {
                    let zone = s / z;
                    let zone_end = ((zone + 1) * z).min(t.physical_rows);
                    let e = zone_end.min(r.end);
                    out.push(ZonedUnit {
                        unit: ScanUnit::Rows(s..e),
                        zone,
                        zone_rows: zone_end - zone * z,
                    });
                    s = e;
                }
            }
            out
        }
    }
}

/// Estimated cost of reading `unit`, for spreading units over partitions: the stored
/// bytes of the chunks it touches (pro rata), plus its decoded size / 8 so that special
/// (unstored) chunks still weigh something. Tables add up the opened columns among
/// `projection` (all opened columns when `None`).
pub fn unit_cost(ds: &Dataset, unit: &ScanUnit, projection: Option<&[usize]>) -> u64 {
    fn array_cost(a: &NdArray, bx: &[Range<u64>]) -> u64 {
        let g = &a.geometry;
        let items: u64 = bx.iter().map(|r| r.end - r.start).product();
        if g.ndim() == 0 {
            return a.chunk_cost(0) + a.itemsize() as u64 / 8;
        }
        let mut cost = items * a.itemsize() as u64 / 8;
        if g.ndim() == 1 {
            // The chunks of a row range, without building index lists (a big scan plans
            // thousands of units).
            let (r, cs) = (&bx[0], g.chunkshape[0].max(1));
            let mut c = r.start / cs;
            while c * cs < r.end {
                let (s, e) = (c * cs, ((c + 1) * cs).min(g.shape[0]));
                let overlap = e.min(r.end).saturating_sub(s.max(r.start));
                cost += a.chunk_cost(c) * overlap / (e - s).max(1);
                c += 1;
            }
            return cost;
        }
        for c in g.chunks_in_box(bx) {
            let region = g.chunk_region(&g.chunk_coords(c));
            let total: u64 = region.iter().map(|r| r.end - r.start).product();
            let overlap: u64 = region
                .iter()
                .zip(bx)
                .map(|(r, b)| r.end.min(b.end).saturating_sub(r.start.max(b.start)))
                .product();
            cost += a.chunk_cost(c) * overlap / total.max(1);
        }
        cost
    }
    match (ds, unit) {
        (Dataset::Array(a), ScanUnit::Box(bx)) => array_cost(a, bx),
        // The columns a scan reads are opened before it is planned; the others cost
        // nothing.
        (Dataset::Table(t), ScanUnit::Rows(rows)) => t
            .opened_columns()
            .filter(|(i, _)| projection.is_none_or(|p| p.contains(i)))
            .map(|(_, c)| match &c.storage {
                crate::array::table::ColumnStorage::Fixed(a) => {
                    let mut bx = vec![rows.clone()];
                    bx.extend(a.geometry.shape[1..].iter().map(|&s| 0..s));
                    array_cost(a, &bx)
                }
                crate::array::table::ColumnStorage::Utf8 { offsets, .. } => {
                    array_cost(offsets, std::slice::from_ref(rows)) * 2
                }
                crate::array::table::ColumnStorage::Dictionary { codes, .. } => {
                    array_cost(codes, std::slice::from_ref(rows))
                }
                // Batches of items: about a compressed byte per row.
                crate::array::table::ColumnStorage::Var { .. }
                | crate::array::table::ColumnStorage::Items { .. } => rows.end - rows.start,
            })
            .sum(),
        _ => unit.rows(),
    }
}

/// Per-segment minima and maxima of a table column's SUMMARY sidecar as arrays of the
/// column's Arrow type `to`; segments whose extrema do not describe every value (NaN,
/// all-null) are null.
///
/// # Errors
/// A cast to `to` that Arrow refuses.
pub fn summary_arrays(
    s: &ColumnSummary,
    elem: &DType,
    to: &DataType,
) -> Result<(ArrayRef, ArrayRef)> {
    let n = s.nsegments();
    let unusable = arrow::array::BooleanArray::from_iter((0..n).map(|i| Some(!s.usable(i))));
    let side = |offset: usize| -> Result<ArrayRef> {
        let a = cast_to(to_arrow(elem, &s.records, n, s.record_size, offset), to)?;
        arrow::compute::nullif(&a, &unusable)
            .map_err(|e| crate::Error::InvalidArgument(e.to_string()))
    };
    Ok((side(s.min_offset)?, side(s.max_offset)?))
}

/// For a chunk that is a special value every element of which is known without
/// decoding (zeros, NaN; uninitialized chunks read as zeros), the one-element value columns of the array
/// (indices into `full`, each array of length 1). `None` for other chunks.
///
/// # Errors
/// Conversion errors.
pub fn special_chunk_values(
    a: &NdArray,
    full: &Schema,
    chunk: u64,
) -> Result<Option<Vec<(usize, ArrayRef)>>> {
    // The element bytes decoding yields for the chunk (`chunk::fill_nan` for NaN), so
    // these statistics agree with what a scan would produce.
    let mut elem = vec![0u8; a.itemsize()];
    match a.special_chunk(chunk) {
        Some(SpecialValue::Zeros | SpecialValue::Uninit) => {}
        Some(SpecialValue::NaN) => {
            if crate::chunk::fill_nan(a.itemsize(), &mut elem).is_err() {
                return Ok(None);
            }
        }
        _ => return Ok(None),
    }
    let ndim = a.geometry.ndim();
    let mut out = Vec::new();
    for p in ndim..full.fields().len() {
        let col = value_column(a, full, p, &elem, 1)?;
        if col.len() == 1 {
            out.push((p, col));
        }
    }
    Ok(Some(out))
}
