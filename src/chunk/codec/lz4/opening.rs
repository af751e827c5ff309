//! The long literal runs that open an LZ4 stream, left in the input instead of copied.
//!
//! python-blosc2 compresses a shuffled block with LZ4HC as one stream over all its byte
//! planes (it does not split LZ4HC). The low planes of floats are nearly random bytes, so
//! such a stream opens with literal runs of tens of KiB, broken only by the odd short
//! match: three quarters of every block of `noise-f4-lz4hc-shuffle` and
//! `smooth-f8-lz4hc-shuffle`. Copied into the block's scratch, those bytes are read once
//! more by the unshuffle; the copy (`memmove`) was 12 and 23 % of the two rows' decode
//! (`benches/README.md`, session 29). Left in the input, a plane that lies inside one run
//! is unshuffled from there, as a split block's raw planes are.
//!
//! The opening is every sequence up to the first literal run shorter than [`MIN_RUN`]. A
//! match in it first copies the run bytes it reads. The rest of the stream is then
//! decoded by the usual decoder, with the end of the opening as its dictionary: the run
//! bytes of its last 16 KiB are copied to the output first, which is as far back as the
//! rest's matches reach in nearly every block of those rows; when one reaches further,
//! that decode fails and the rest is decoded again with the last 64 KiB (an LZ4 match
//! reaches back at most 65,535 bytes). [`OpeningRuns::settle`] copies the other run bytes
//! a caller wants in the output. The bytes that come out are the same either way.

use super::{Lz4Error, copy_any, decompress_counted, err, extra_len};

/// The shortest literal run left in the input; the opening ends at the first shorter one.
pub const MIN_RUN: usize = 4096;

/// The most runs one opening leaves; it ends after them.
pub const MAX_RUNS: usize = 16;

/// How far back an LZ4 match reaches at most.
const WINDOW: usize = 65535;

/// The end of the opening copied to the output first, as the dictionary of the rest.
const FIRST_WINDOW: usize = 16 * 1024;

/// One run left in the input: `len` bytes at `src[ip..]`, standing for `out[op..]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Run {
    op: usize,
    ip: usize,
    len: usize,
}

/// The runs a stream's opening left in its input ([`decompress_leaving_opening`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpeningRuns {
    runs: [Run; MAX_RUNS],
    count: usize,
    /// From here on, every run byte is in the output too (the last 64 KiB of the opening).
    settled_from: usize,
}

impl OpeningRuns {
    /// The output positions where the runs left start and end, in no particular order.
    pub fn boundaries(&self) -> impl Iterator<Item = usize> + '_ {
        self.runs[..self.count]
            .iter()
            .flat_map(|r| [r.op, r.op + r.len])
    }

    /// The `len` output bytes at `at`, from the input, when one run left holds them all.
    pub fn in_input<'s>(&self, src: &'s [u8], at: usize, len: usize) -> Option<&'s [u8]> {
        let r = self.runs[..self.count]
            .iter()
            .find(|r| r.op <= at && at + len <= r.op + r.len)?;
        let from = r.ip + (at - r.op);
        src.get(from..from + len)
    }

    /// Copies into `piece`, which stands for the output bytes from `at` on, the bytes of
    /// the runs left there that the output does not hold yet. `src` is the stream the runs
    /// were left in.
    pub fn settle(&self, src: &[u8], piece: &mut [u8], at: usize) {
        let to = (at + piece.len()).min(self.settled_from);
        settle_runs(&self.runs[..self.count], src, piece, at, to);
    }
}

/// Copies the bytes of `runs` that fall in the output range `at..to` from `src` into
/// `piece`, which stands for the output from `at` on and reaches at least to `to`. The
/// runs were checked against both buffers when they were left.
fn settle_runs(runs: &[Run], src: &[u8], piece: &mut [u8], at: usize, to: usize) {
    for r in runs {
        let lo = at.max(r.op);
        let hi = to.min(r.op + r.len);
        if lo < hi {
            let from = r.ip + (lo - r.op);
            piece[lo - at..hi - at].copy_from_slice(&src[from..from + (hi - lo)]);
        }
    }
}

/// Whether the stream `src` can open with a literal run of [`MIN_RUN`] bytes or more: its
/// token's literal nibble is 15 and the 16 length bytes after it are 255 (a run of at
/// least 4,095 bytes; [`decompress_leaving_opening`] applies [`MIN_RUN`] itself).
pub fn opens_with_long_run(src: &[u8]) -> bool {
    const FULL: usize = (MIN_RUN - 15) / 255;
    src.get(..FULL + 1)
        .is_some_and(|s| s[0] >= 0xF0 && s[1..].iter().all(|&b| b == 255))
}

/// Decodes the LZ4 stream `src`, which has no dictionary, into `out` as
/// [`decompress_into`](super::decompress_into) does, except that the literal runs of its
/// opening (see the module docs) are left in `src`: the output bytes they stand for are
/// written only where a match reads them or close before the opening's end. The returned
/// runs say where the others are.
///
/// # Errors
/// As [`decompress_into`](super::decompress_into), with input offsets into `src`.
pub fn decompress_leaving_opening(src: &[u8], out: &mut [u8]) -> Result<OpeningRuns, Lz4Error> {
    let mut left = OpeningRuns {
        settled_from: out.len(),
        ..OpeningRuns::default()
    };
    let (ip, op) = opening(src, out, &mut left)?;
    if ip == src.len() {
        // The stream ended with the opening's last run.
        if op != out.len() {
            return err(ip, "stream ended before the expected size");
        }
        return Ok(left);
    }
    // The usual decoder for the rest, over the output after the opening, with the end of
    // the opening (its run bytes copied first) as its dictionary: the last 16 KiB, then,
    // if a match reaches further and that decode fails, the last 64 KiB.
    let n = out.len();
    let runs = &left.runs[..left.count];
    let (head, rest) = out.split_at_mut(op);
    let at_ip = |e: Lz4Error| Lz4Error {
        at: e.at + ip,
        why: e.why,
    };
    let near = op.saturating_sub(FIRST_WINDOW);
    settle_runs(runs, src, &mut head[near..], near, op);
    match decompress_counted(&src[ip..], rest, rest.len(), &head[near..], n) {
        Ok(()) => left.settled_from = near,
        Err(e) if near == 0 => return Err(at_ip(e)),
        Err(_) => {
            let far = op.saturating_sub(WINDOW);
            settle_runs(runs, src, &mut head[far..near], far, near);
            decompress_counted(&src[ip..], rest, rest.len(), &head[far..], n).map_err(at_ip)?;
            left.settled_from = far;
        }
    }
    Ok(left)
}

/// The opening: sequences whose literal runs are at least [`MIN_RUN`] bytes, the runs
/// recorded in `left` instead of copied. Returns where the first other sequence starts
/// (input, output), or the input's end and the output filled so far when the stream ended
/// with a run of the opening.
fn opening(src: &[u8], out: &mut [u8], left: &mut OpeningRuns) -> Result<(usize, usize), Lz4Error> {
    let n = out.len();
    let (mut ip, mut op) = (0, 0);
    while left.count < MAX_RUNS {
        let start = ip;
        let Some(&token) = src.get(ip) else {
            return err(ip, "stream ended before its last literal run");
        };
        ip += 1;
        let mut lit = (token >> 4) as usize;
        if lit == 15 {
            lit += extra_len(src, &mut ip)?;
        }
        if lit < MIN_RUN {
            return Ok((start, op));
        }
        if lit > src.len() - ip {
            return err(ip, "literal run past the input");
        }
        if lit > n - op {
            return err(ip, "literal run overruns the output");
        }
        left.runs[left.count] = Run { op, ip, len: lit };
        left.count += 1;
        ip += lit;
        op += lit;
        if ip == src.len() {
            return Ok((ip, op));
        }
        // The match, read and checked as `step`'s checked path does. That path keeps its
        // own copy: through one helper shared with it, the natural-data decoder ran 4–8 %
        // slower (session 29).
        let (Some(&d0), Some(&d1)) = (src.get(ip), src.get(ip + 1)) else {
            return err(ip, "match offset runs past the input");
        };
        ip += 2;
        let dist = u16::from_le_bytes([d0, d1]) as usize;
        if dist == 0 {
            return err(ip - 2, "zero match offset");
        }
        let mut len = (token & 15) as usize + 4;
        if len == 19 {
            len += extra_len(src, &mut ip)?;
        }
        if len > n - op {
            return err(ip, "match overruns the output");
        }
        // The bytes the match reads before `op` first, where they are still in the input.
        let from = op.saturating_sub(dist);
        let to = op.min(from + len);
        settle_runs(&left.runs[..left.count], src, &mut out[from..to], from, to);
        op = copy_any(out, op, dist, len, &[], ip)?;
    }
    Ok((ip, op))
}

#[cfg(test)]
mod tests {
    use super::super::decompress_into;
    use super::*;
    use crate::chunk::{random_bytes, xorshift};

    /// Data shaped like a shuffled float block: `random` nearly random bytes (with, at
    /// `echo`, 16 bytes repeated from 3,000 back, so that the opening has a match reading
    /// a run it left), then `tail` bytes of short repeats reaching up to `reach` back.
    fn planes(seed: u64, random: usize, echo: Option<usize>, tail: usize, reach: usize) -> Vec<u8> {
        let mut s = seed;
        let mut d = random_bytes(&mut s, random);
        if let Some(at) = echo {
            let piece: Vec<u8> = d[at - 3000..at - 2984].to_vec();
            d[at..at + 16].copy_from_slice(&piece);
        }
        while d.len() < random + tail {
            let r = xorshift(&mut s) as usize;
            let back = 1 + r % reach.min(d.len());
            let len = 4 + (r >> 20) % 12;
            for _ in 0..len {
                let b = d[d.len() - back];
                d.push(b);
            }
            d.push((r >> 32) as u8 & 0x0F);
        }
        d.truncate(random + tail);
        d
    }

    /// Decodes `src` leaving the opening into a buffer of 0xAA: returns it and the runs.
    fn leave(src: &[u8], n: usize) -> (Vec<u8>, Result<OpeningRuns, Lz4Error>) {
        let mut out = vec![0xAA; n];
        let left = decompress_leaving_opening(src, &mut out);
        (out, left)
    }

    /// Every shape of opening gives the usual bytes: the output holds all but the left
    /// runs' bytes, `in_input` finds those in the stream, and `settle` completes the
    /// output. Shapes: a stream that is one run, runs then a rest whose matches stay
    /// within 16 KiB, or reach further (the second decode), a match inside the opening
    /// reading a left run, and a stream that opens short (nothing left).
    #[test]
    fn leaving_the_opening_gives_the_usual_bytes() {
        let cases = [
            (planes(1, 70_000, None, 0, 1), true),
            (planes(2, 100_000, None, 60_000, 4000), true),
            (planes(3, 100_000, None, 60_000, 60_000), true),
            (planes(4, 50_000, Some(20_000), 30_000, 1000), true),
            (planes(5, 2000, None, 50_000, 1000), false),
        ];
        for (k, (data, opens_long)) in cases.into_iter().enumerate() {
            let src = lz4_flex::block::compress(&data);
            assert_eq!(opens_with_long_run(&src), opens_long, "case {k}");
            let (mut out, left) = leave(&src, data.len());
            let left = left.unwrap_or_else(|e| panic!("case {k}: {e:?}"));
            assert_eq!(left.count > 0, opens_long, "case {k}");
            let mut unwritten = 0;
            for (p, (&o, &want)) in out.iter().zip(&data).enumerate() {
                match left.in_input(&src, p, 1) {
                    Some(b) => assert_eq!(b[0], want, "case {k} byte {p}"),
                    None => assert_eq!(o, want, "case {k} byte {p} not left"),
                }
                unwritten += usize::from(o != want);
            }
            assert_eq!(unwritten > 0, opens_long, "case {k}: runs left unwritten");
            left.settle(&src, &mut out[1..], 1);
            assert_eq!(out[1..], data[1..], "case {k}: settled");
        }
    }

    /// Truncated or corrupted streams fail exactly where the usual decoder fails, and
    /// never panic.
    #[test]
    fn bad_streams_fail_as_usual() {
        let data = planes(6, 30_000, Some(10_000), 20_000, 20_000);
        let src = lz4_flex::block::compress(&data);
        let mut seed = 7;
        let check = |s: &[u8], n: usize| {
            let mut want = vec![0; n];
            let usual = decompress_into(s, &mut want, &[]);
            let (mut out, left) = leave(s, n);
            assert_eq!(left.is_ok(), usual.is_ok());
            if let Ok(left) = left {
                left.settle(s, &mut out, 0);
                assert_eq!(out, want);
            }
        };
        for cut in (0..src.len()).step_by(97) {
            check(&src[..cut], data.len());
        }
        for _ in 0..300 {
            let mut bad = src.clone();
            let at = xorshift(&mut seed) as usize % bad.len();
            bad[at] ^= 1 << (xorshift(&mut seed) % 8);
            check(&bad, data.len());
        }
        check(&src, data.len() - 1);
        check(&src, data.len() + 1);
        // Garbage after an opening run's length: whatever follows, the same verdict.
        for k in 0..300 {
            let mut junk = vec![0xF0];
            junk.extend(std::iter::repeat_n(255, 16 + k % 3));
            junk.push((k * 7) as u8);
            let n = 4096 + xorshift(&mut seed) as usize % 8192;
            junk.extend(random_bytes(&mut seed, n));
            check(&junk, 4096 + 16 * 255 + k % 5000);
        }
    }
}
