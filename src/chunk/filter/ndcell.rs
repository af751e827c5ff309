//! NDCELL (Blosc2 filter 32, a plugin python-blosc2 ships): a b2nd block's items regrouped
//! cell by cell, so that a codec sees each small N-d neighbourhood together.
//!
//! The writer cuts the block (its `blockshape`, C order) into cells of `side` items along
//! every dimension, partial at the block's far edges, and writes the cells in C order,
//! each cell's items in C order. The reader scatters them back. The cell side is the
//! filter's meta byte; the block shape comes from the b2nd array (the chunk does not
//! hold it).
//!
//! NDMEAN (filter 33, lossy) writes the same cells with every item replaced by its cell's
//! mean (python-blosc2 4.14.1 accepts cells larger than the block: one partial cell), and
//! is undone the same way: its fixtures decode bit for bit as python-blosc2 reads them.

/// Scatters a block of cells (`src`) back into C order (`dst`): a block of `shape` items
/// of `typesize` bytes, in cells of `side` items along every dimension.
///
/// # Errors
/// A side of 0, or buffers that do not hold exactly the block.
pub fn uncell(
    side: usize,
    shape: &[u64],
    typesize: usize,
    src: &[u8],
    dst: &mut [u8],
) -> Result<(), String> {
    let items = shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(usize::try_from(d).ok()?));
    if side == 0
        || shape.is_empty()
        || items.and_then(|n| n.checked_mul(typesize)) != Some(src.len())
        || src.len() != dst.len()
    {
        return Err(format!(
            "cells of side {side} over a block of shape {shape:?} and {typesize}-byte items do not fit {} bytes",
            src.len()
        ));
    }
    let ndim = shape.len();
    if ndim > 8 {
        return Err(format!("a block of {ndim} dimensions (b2nd has at most 8)"));
    }
    // Fixed-size arrays, not vectors: a block of many small cells allocates nothing.
    let mut dims = [1usize; 8];
    for (d, &s) in dims.iter_mut().zip(shape) {
        *d = s as usize;
    }
    // Items between consecutive indexes along each dimension.
    let mut stride = [1usize; 8];
    for d in (0..ndim - 1).rev() {
        stride[d] = stride[d + 1] * dims[d + 1];
    }
    let cells = dims.map(|d| d.div_ceil(side));
    let ncells: usize = cells[..ndim].iter().product();
    let last = ndim - 1;
    let mut at = 0usize;
    let mut cell = [0usize; 8];
    for _ in 0..ncells {
        // This cell's extent along each dimension, and its first item.
        let mut extent = [1usize; 8];
        for d in 0..ndim {
            extent[d] = (dims[d] - cell[d] * side).min(side);
        }
        let origin: usize = (0..ndim).map(|d| cell[d] * side * stride[d]).sum();
        let rows: usize = extent[..last].iter().product();
        let run = extent[last] * typesize;
        let mut row = [0usize; 8];
        for _ in 0..rows {
            let item = origin + (0..last).map(|d| row[d] * stride[d]).sum::<usize>();
            dst[item * typesize..item * typesize + run].copy_from_slice(&src[at..at + run]);
            at += run;
            // The next row of the cell, C order over all but the last dimension.
            for d in (0..last).rev() {
                row[d] += 1;
                if row[d] < extent[d] {
                    break;
                }
                row[d] = 0;
            }
        }
        for d in (0..ndim).rev() {
            cell[d] += 1;
            if cell[d] < cells[d] {
                break;
            }
            cell[d] = 0;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_2d_block_with_partial_cells_scatters_back() {
        // A 3 x 5 block of one-byte items in cells of 2: cells (0,0) (0,1) (0,2) (1,0) ...
        let celled: Vec<u8> = vec![
            0, 1, 5, 6, // cell (0, 0): rows 0-1, cols 0-1
            2, 3, 7, 8, // cell (0, 1)
            4, 9, // cell (0, 2): one column
            10, 11, // cell (1, 0): one row
            12, 13, // cell (1, 1)
            14, // cell (1, 2)
        ];
        let mut out = vec![0u8; 15];
        uncell(2, &[3, 5], 1, &celled, &mut out).unwrap();
        assert_eq!(out, (0..15).collect::<Vec<u8>>());
        assert!(uncell(0, &[3, 5], 1, &celled, &mut out).is_err());
        assert!(uncell(2, &[3, 4], 1, &celled, &mut out).is_err());
    }
}
