//! `B2ndGeometry`: shape, chunk grid and block grid of an N-d array, and the index math
//! that turns a coordinate box into chunks, blocks and byte offsets (`spec/b2nd.md` §2).
//!
//! ```text
//!   shape 5×7, chunks 3×4, blocks 2×2            chunk (0,1) buffer, extchunk 4×4:
//!   +-----------+-------+ <- edge chunks padded   [blk(0,0) 2×2][blk(0,1)][blk(1,0)][blk(1,1)]
//!   | c0  0..3  | c1    |    to chunkshape,       each block C-ordered inside, blocks in C
//!   |           | 4..7  |    chunkshape padded    order over the block grid; padding is
//!   +-----------+-------+    to whole blocks      never read.
//!   | c2  3..5  | c3    |
//!   +-----------+-------+
//! ```

use std::ops::Range;

/// Chunk and block geometry of an N-d array (0-d allowed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct B2ndGeometry {
    /// Array shape.
    pub shape: Vec<u64>,
    /// Chunk shape.
    pub chunkshape: Vec<u64>,
    /// Block shape.
    pub blockshape: Vec<u64>,
}

/// One contiguous run of elements to copy from a chunk buffer into the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// Element offset in the chunk buffer.
    pub src: u64,
    /// Element offset in the output (C order over the box).
    pub dst: u64,
    /// Number of elements.
    pub len: u64,
    /// Block index (C order over the chunk's block grid) the run lies in.
    pub block: u64,
}

impl B2ndGeometry {
    /// Builds and checks a geometry.
    ///
    /// # Errors
    /// Mismatched ranks, zero chunk/block sizes for a non-empty dimension, blocks larger
    /// than chunks, or element counts that overflow.
    pub fn try_new(
        shape: Vec<u64>,
        chunkshape: Vec<u64>,
        blockshape: Vec<u64>,
    ) -> Result<Self, String> {
        let n = shape.len();
        if chunkshape.len() != n || blockshape.len() != n {
            return Err(format!(
                "rank mismatch: shape {shape:?}, chunks {chunkshape:?}, blocks {blockshape:?}"
            ));
        }
        for d in 0..n {
            if shape[d] > 0 && (chunkshape[d] == 0 || blockshape[d] == 0) {
                return Err(format!(
                    "dimension {d}: zero chunk or block size for extent {}",
                    shape[d]
                ));
            }
            if blockshape[d] > chunkshape[d] {
                return Err(format!(
                    "dimension {d}: block {} larger than chunk {}",
                    blockshape[d], chunkshape[d]
                ));
            }
        }
        let g = B2ndGeometry {
            shape,
            chunkshape,
            blockshape,
        };
        let mut acc: u64 = 1;
        for d in 0..n {
            acc = acc
                .checked_mul(g.extchunk(d))
                .ok_or("chunk element count overflows")?;
            g.shape[d].checked_mul(1).ok_or("shape overflows")?;
        }
        g.nchunks_checked().ok_or("chunk count overflows")?;
        g.shape
            .iter()
            .try_fold(1u64, |a, &s| a.checked_mul(s))
            .ok_or("element count overflows")?;
        Ok(g)
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// Total number of elements.
    pub fn nitems(&self) -> u64 {
        self.shape.iter().product()
    }

    /// Chunks along dimension `d`.
    pub fn nchunks_dim(&self, d: usize) -> u64 {
        if self.shape[d] == 0 {
            0
        } else {
            self.shape[d].div_ceil(self.chunkshape[d])
        }
    }

    fn nchunks_checked(&self) -> Option<u64> {
        (0..self.ndim()).try_fold(1u64, |a, d| a.checked_mul(self.nchunks_dim(d)))
    }

    /// Total number of chunks (1 for 0-d arrays).
    pub fn nchunks(&self) -> u64 {
        self.nchunks_checked().unwrap_or(0)
    }

    /// Chunk extent along `d` padded to whole blocks.
    pub fn extchunk(&self, d: usize) -> u64 {
        if self.blockshape[d] == 0 {
            0
        } else {
            self.chunkshape[d].div_ceil(self.blockshape[d]) * self.blockshape[d]
        }
    }

    /// Elements in one (padded) chunk buffer.
    pub fn chunk_items(&self) -> u64 {
        (0..self.ndim()).map(|d| self.extchunk(d)).product()
    }

    /// Elements in one block.
    pub fn block_items(&self) -> u64 {
        self.blockshape.iter().product()
    }

    /// Blocks along `d` inside a chunk.
    pub fn nblocks_dim(&self, d: usize) -> u64 {
        self.extchunk(d)
            .checked_div(self.blockshape[d])
            .unwrap_or(0)
    }

    /// Chunk coordinates of chunk index `c` (C order).
    pub fn chunk_coords(&self, mut c: u64) -> Vec<u64> {
        let mut out = vec![0; self.ndim()];
        for d in (0..self.ndim()).rev() {
            let n = self.nchunks_dim(d).max(1);
            out[d] = c % n;
            c /= n;
        }
        out
    }

    /// The index range the chunk with coordinates `cc` covers along each dimension.
    pub fn chunk_region(&self, cc: &[u64]) -> Vec<Range<u64>> {
        (0..self.ndim())
            .map(|d| {
                let s = cc[d] * self.chunkshape[d];
                s..(s + self.chunkshape[d]).min(self.shape[d])
            })
            .collect()
    }

    /// Chunk indices intersecting `bx` (C order), given as per-dimension index ranges.
    pub fn chunks_in_box(&self, bx: &[Range<u64>]) -> Vec<u64> {
        if bx.iter().any(|r| r.is_empty()) || self.nitems() == 0 {
            return Vec::new();
        }
        let ranges: Vec<Range<u64>> = (0..self.ndim())
            .map(|d| bx[d].start / self.chunkshape[d]..(bx[d].end - 1) / self.chunkshape[d] + 1)
            .collect();
        let mut out = Vec::new();
        odometer(&ranges, |cc| {
            let idx = cc
                .iter()
                .enumerate()
                .fold(0u64, |acc, (d, &c)| acc * self.nchunks_dim(d) + c);
            out.push(idx);
        });
        out
    }

    /// Runs to copy from chunk `chunk` into the C-ordered output of `bx`: each run is
    /// contiguous both in the chunk buffer (inside one block) and in the output.
    pub fn runs(&self, chunk: u64, bx: &[Range<u64>]) -> Vec<Run> {
        let n = self.ndim();
        let cc = self.chunk_coords(chunk);
        let region = self.chunk_region(&cc);
        let inter: Vec<Range<u64>> = (0..n)
            .map(|d| bx[d].start.max(region[d].start)..bx[d].end.min(region[d].end))
            .collect();
        if n == 0 {
            return vec![Run {
                src: 0,
                dst: 0,
                len: 1,
                block: 0,
            }];
        }
        if inter.iter().any(|r| r.is_empty()) {
            return Vec::new();
        }
        let box_len: Vec<u64> = bx.iter().map(|r| r.end - r.start).collect();
        let block_items = self.block_items();
        let mut runs = Vec::new();
        let outer = &inter[..n - 1];
        let last = n - 1;
        odometer(outer, |idx| {
            // Split the last dimension at block boundaries.
            let mut x = inter[last].start;
            while x < inter[last].end {
                let local_last = x - region[last].start;
                let bl = self.blockshape[last];
                let run_end =
                    ((local_last / bl + 1) * bl + region[last].start).min(inter[last].end);
                let mut block = 0u64;
                let mut inblock = 0u64;
                let mut dst = 0u64;
                for d in 0..n {
                    let g = if d == last { x } else { idx[d] };
                    let local = g - region[d].start;
                    block = block * self.nblocks_dim(d) + local / self.blockshape[d];
                    inblock = inblock * self.blockshape[d] + local % self.blockshape[d];
                    dst = dst * box_len[d] + (g - bx[d].start);
                }
                runs.push(Run {
                    src: block * block_items + inblock,
                    dst,
                    len: run_end - x,
                    block,
                });
                x = run_end;
            }
        });
        runs
    }
}

/// Calls `f` with every coordinate tuple of the product of `ranges`, in C order.
pub fn odometer(ranges: &[Range<u64>], mut f: impl FnMut(&[u64])) {
    if ranges.iter().any(|r| r.is_empty()) {
        return;
    }
    let mut cur: Vec<u64> = ranges.iter().map(|r| r.start).collect();
    loop {
        f(&cur);
        let mut d = ranges.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            cur[d] += 1;
            if cur[d] < ranges[d].end {
                break;
            }
            cur[d] = ranges[d].start;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_cover_the_box_once() {
        let g = B2ndGeometry::try_new(vec![5, 7], vec![3, 4], vec![2, 3]).unwrap();
        assert_eq!(g.nchunks(), 4);
        assert_eq!(g.extchunk(1), 6);
        let bx = [1..5, 2..7];
        let mut seen = [0u32; 4 * 5];
        for c in g.chunks_in_box(&bx) {
            for r in g.runs(c, &bx) {
                for k in 0..r.len {
                    seen[(r.dst + k) as usize] += 1;
                }
            }
        }
        assert!(seen.iter().all(|&s| s == 1));
    }
}
