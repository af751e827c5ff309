//! Blocks of one SHUFFLE over a single LZ4 stream (python-blosc2's LZ4HC) whose stream
//! opens with long literal runs: decoded with those runs left in the chunk
//! ([`codec::lz4::opening`]) and unshuffled from wherever each plane's bytes lie.
//!
//! The block is unshuffled in segments of elements, cut where a plane passes from one run
//! to other bytes (rounded out to 32 elements, the SIMD kernels' step). In a segment, a
//! plane that lies inside one run is read from the chunk; any other is read from the
//! scratch, after the run bytes it holds are copied there. Whole planes read from the
//! chunk were first measured against copying every run (session 29 in
//! `benches/README.md`).

use super::{Chunk, ChunkResult, Codec, Scratch, Stream, codec, codec_error, filter, grown};
use codec::lz4::opening::{MAX_RUNS, OpeningRuns};

/// Elements per step of the unshuffle kernels: segments are cut at multiples of it.
const STEP: usize = 32;

impl Chunk<'_> {
    /// The typesize when a block of `bsize` bytes in `streams` streams, undoing `ops`, is
    /// one SHUFFLE of the typesize over a single LZ4 stream with no tail and no chunk
    /// dictionary, as python-blosc2 writes LZ4HC: [`Chunk::decode_opening_planes`] may then
    /// leave the stream's opening runs in the chunk.
    pub(super) fn unsplit_lz4_shuffle(
        &self,
        streams: usize,
        bsize: usize,
        ops: &[(usize, u8)],
    ) -> Option<usize> {
        let &[(slot, 1)] = ops else {
            return None;
        };
        self.byte_planes(slot, bsize).filter(|&ts| {
            self.codec == Some(Codec::Lz4) && self.dict.is_none() && streams == 1 && bsize >= ts
        })
    }

    /// Block `j` as [`Chunk::unsplit_lz4_shuffle`] describes it, when its stream opens
    /// with a long literal run (see the module docs). False, with nothing done, when it
    /// does not; the caller then decodes the block as usual.
    pub(super) fn decode_opening_planes(
        &self,
        j: usize,
        ts: usize,
        dst: &mut [u8],
        s: &mut Scratch,
    ) -> ChunkResult<bool> {
        let pos = self.block_start(j)?;
        let (Stream::Coded(src), _) = self.stream_at(j, pos, dst.len())? else {
            return Ok(false);
        };
        if !codec::lz4::opening::opens_with_long_run(src) {
            return Ok(false);
        }
        let scratch = grown(&mut s.a, dst.len());
        let left = codec::decompress_lz4_leaving_opening(src, scratch).map_err(codec_error(
            j,
            pos,
            Codec::Lz4,
        ))?;
        unshuffle_segments(&left, src, scratch, ts, dst);
        Ok(true)
    }
}

/// Unshuffles the `ts` planes of `scratch` (one stream's output, the runs `left` still
/// in `src`) into `dst`, segment by segment (see the module docs).
fn unshuffle_segments(
    left: &OpeningRuns,
    src: &[u8],
    scratch: &mut [u8],
    ts: usize,
    dst: &mut [u8],
) {
    let ne = dst.len() / ts;
    // Two cuts around each run boundary that falls inside a plane, then the planes' end.
    let mut cuts = [0usize; 4 * MAX_RUNS + 1];
    let mut n = 0;
    for b in left.boundaries() {
        let e = b % ne;
        if e != 0 {
            cuts[n] = e / STEP * STEP;
            cuts[n + 1] = e.next_multiple_of(STEP).min(ne);
            n += 2;
        }
    }
    cuts[n] = ne;
    n += 1;
    let cuts = &mut cuts[..n];
    cuts.sort_unstable();
    let mut e0 = 0;
    for &e1 in cuts.iter() {
        if e1 <= e0 {
            continue;
        }
        let len = e1 - e0;
        // Each plane's bytes in the chunk when one run holds them; the others settled.
        let mut in_chunk: [Option<&[u8]>; 16] = [None; 16];
        for (k, slot) in in_chunk[..ts].iter_mut().enumerate() {
            let at = k * ne + e0;
            *slot = left.in_input(src, at, len);
            if slot.is_none() {
                left.settle(src, &mut scratch[at..at + len], at);
            }
        }
        let mut rows: [&[u8]; 16] = [&[]; 16];
        for (k, row) in rows[..ts].iter_mut().enumerate() {
            let at = k * ne + e0;
            *row = in_chunk[k].unwrap_or(&scratch[at..at + len]);
        }
        filter::shuffle::unshuffle_rows(&rows[..ts], &mut dst[e0 * ts..e1 * ts]);
        e0 = e1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks written by C-Blosc2 whose LZ4 and LZ4HC streams open with long runs (13 of
    /// the fixtures do): this path takes them and gives the bytes of the usual one.
    #[test]
    fn opening_planes_equal_the_usual_decode() {
        for name in [
            "codec-lz4hc-c1",
            "codec-lz4hc-c5",
            "codec-lz4hc-c9",
            "split-never-lz4-ts4",
            "split-auto-lz4hc-ts4",
        ] {
            let path = format!(
                "{}/tests/fixtures/chunks/{name}.chunk",
                env!("CARGO_MANIFEST_DIR")
            );
            let buf = std::fs::read(path).unwrap();
            let chunk = Chunk::parse(&buf).unwrap();
            let bsize = chunk.header().blocksize;
            let plan = chunk.block_plan(bsize, false);
            let ts = plan.unsplit.expect("one SHUFFLE over one LZ4 stream");
            let (mut ours, mut usual) = (vec![0u8; bsize], vec![1u8; bsize]);
            assert!(
                chunk
                    .decode_opening_planes(0, ts, &mut ours, &mut Scratch::default())
                    .unwrap(),
                "{name}"
            );
            chunk
                .run_pipeline(
                    0,
                    &mut usual,
                    None,
                    &plan.ops,
                    &mut Scratch::default(),
                    |raw| chunk.decode_streams(0, plan.split, raw),
                )
                .unwrap();
            assert!(ours == usual, "{name}");
        }
    }
}
