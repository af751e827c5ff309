//! BloscLZ stream decoder, written from `spec/codecs.md` §3.
//!
//! Decodes straight into the caller's output slice, which must be exactly the expected
//! size; every read of the input and every write of the output is bounds-checked.

/// Why a BloscLZ stream is invalid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BloscLzError {
    /// Input offset where decoding failed.
    pub at: usize,
    /// What was wrong.
    pub why: &'static str,
}

/// Decodes `src` into `out`; the stream must produce exactly `out.len()` bytes.
///
/// # Errors
/// When the stream reads past its end, refers before the start of the output, or produces
/// more or fewer bytes than `out.len()`.
pub fn decompress_into(src: &[u8], out: &mut [u8]) -> Result<(), BloscLzError> {
    let n = out.len();
    if src.is_empty() {
        return if n == 0 {
            Ok(())
        } else {
            Err(BloscLzError {
                at: 0,
                why: "empty stream",
            })
        };
    }
    let err = |at, why| Err(BloscLzError { at, why });
    let mut ip = 1usize;
    let mut op = 0usize;
    let mut ctrl = (src[0] & 31) as usize;
    loop {
        if ctrl >= 32 {
            let lcode = ctrl >> 5;
            let hi = ctrl & 31;
            let mut len = lcode + 2;
            if lcode == 7 {
                loop {
                    let Some(&b) = src.get(ip) else {
                        return err(ip, "match length runs past the input");
                    };
                    ip += 1;
                    len += b as usize;
                    if b != 255 {
                        break;
                    }
                }
            }
            let Some(&lo) = src.get(ip) else {
                return err(ip, "match distance runs past the input");
            };
            ip += 1;
            let dist = if lo == 255 && hi == 31 {
                let (Some(&d0), Some(&d1)) = (src.get(ip), src.get(ip + 1)) else {
                    return err(ip, "far distance runs past the input");
                };
                ip += 2;
                (((d0 as usize) << 8) | d1 as usize) + 8192
            } else {
                (hi << 8) + lo as usize + 1
            };
            if dist > op {
                return err(ip, "match refers before the start of the output");
            }
            if len > n - op {
                return err(ip, "match overruns the output");
            }
            if dist < 8 && len <= 16 && op >= 8 && n - op >= 16 {
                copy_short_period(&mut out[op - 8..op + 16], dist, len);
            } else {
                super::copy_match(out, op, dist, len);
            }
            op += len;
        } else {
            let k = ctrl + 1;
            if let Some(next) = literal_then_near_match(src, ip, out, op, k) {
                (ip, op) = next;
            } else {
                if src.len() - ip >= 32 && n - op >= 32 {
                    // Any literal run (at most 32 bytes) as one fixed-size copy when both
                    // buffers have room: bytes past the run are scratch that later
                    // sequences overwrite (a match only reads bytes before `op`).
                    out[op..op + 32].copy_from_slice(&src[ip..ip + 32]);
                } else {
                    if k > src.len() - ip {
                        return err(ip, "literal run past the input");
                    }
                    if k > n - op {
                        return err(ip, "literal run overruns the output");
                    }
                    super::copy_upto32(&mut out[op..op + k], &src[ip..ip + k]);
                }
                ip += k;
                op += k;
            }
        }
        if ip >= src.len() {
            break;
        }
        ctrl = src[ip] as usize;
        ip += 1;
    }
    if op != n {
        return err(ip, "stream ended before the expected size");
    }
    Ok(())
}

/// A literal run of `k` bytes at `ip` followed by a match of at most 16 bytes whose source
/// lies wholly before the run (the pattern of an unfiltered counter: 2 literals, then 6
/// bytes from 8 back; of fixed-width strings: 2 literals, then 6, 10 or 14 bytes from 64
/// back), decoded together. Returns the input and output positions after both, or `None`
/// (nothing written) when the sequence is not of that shape or the buffers lack room for
/// a 32-byte literal store and the match's 8-byte pieces.
///
/// Matches of 9–16 bytes (length code 7, one more length byte) take their own branch:
/// choosing the input position after the match without a branch would put the load of
/// the length code on the chain from one sequence's control byte to the next (−27 % on
/// `counter-i8-blosclz-nofilter`, `benches/README.md`, session 19). That branch also
/// takes a period of at most 7 bytes lying within the run (`abc`, then 9 more `c`s),
/// whose pattern it builds from the input.
///
/// The match's bytes are loaded *before* the literal run is stored. Loaded after, they
/// would span two recent stores (the previous match's and this run's), which the CPU
/// cannot forward to a load: it waits for both to reach the cache, every element.
#[inline(always)]
fn literal_then_near_match(
    src: &[u8],
    ip: usize,
    out: &mut [u8],
    op: usize,
    k: usize,
) -> Option<(usize, usize)> {
    // Fixed-size views (the run is at most 32 bytes, `k <= 32`): the reads of the match's
    // two bytes and the stores below need no checks.
    let s: &[u8; 35] = src.get(ip..)?.get(..35)?.try_into().expect("35 bytes");
    let ctrl = s[k] as usize;
    let (lcode, hi) = (ctrl >> 5, ctrl & 31);
    if lcode == 0 {
        return None;
    }
    let mop = op + k;
    if lcode == 7 {
        // A match of 9-16 bytes (one extra length byte under 8).
        let (e, lo) = (s[k + 1] as usize, s[k + 2] as usize);
        let (len, dist) = (9 + e, (hi << 8) + lo + 1);
        if e >= 8 || (lo == 255 && hi == 31) || dist > mop {
            return None;
        }
        if out.len() - op < 48 {
            return None;
        }
        let (w, w2) = if dist >= k + len {
            let m: &[u8] = &out[mop - dist..];
            let w: [u8; 8] = m[..8].try_into().expect("8 bytes");
            (w, m[8..16].try_into().expect("8 bytes"))
        } else if dist <= k && dist < 8 && ip + k >= 8 {
            // A period within the run (a byte repeated after it): its pattern is built
            // from the input, never loaded from the bytes about to be stored.
            let tail = u64::from_le_bytes(src[ip + k - 8..ip + k].try_into().expect("8 bytes"));
            let (w, w2) = period_words(tail, dist);
            (w.to_le_bytes(), w2.to_le_bytes())
        } else {
            return None;
        };
        let o: &mut [u8; 48] = (&mut out[op..op + 48]).try_into().expect("48 bytes");
        o[..32].copy_from_slice(&s[..32]);
        o[k..k + 8].copy_from_slice(&w);
        o[k + 8..k + 16].copy_from_slice(&w2);
        return Some((ip + k + 3, mop + len));
    }
    let lo = s[k + 1] as usize;
    if lo == 255 && hi == 31 {
        return None;
    }
    let (len, dist) = (lcode + 2, (hi << 8) + lo + 1);
    if dist < k + len || dist > mop || out.len() - op < 40 {
        return None;
    }
    let w: [u8; 8] = out[mop - dist..][..8].try_into().expect("8 bytes");
    let o: &mut [u8; 40] = (&mut out[op..op + 40]).try_into().expect("40 bytes");
    o[..32].copy_from_slice(&s[..32]);
    o[k..k + 8].copy_from_slice(&w);
    Some((ip + k + 2, mop + len))
}

/// Copies a match of at most 16 bytes whose period `dist` is below 8 (runs of one byte,
/// the zero bytes of wide characters) into `m[8..]`, where `m` is the 8 bytes before the
/// match's start and the 16 after it (bytes past the match are scratch that later
/// sequences overwrite). The pattern is built in registers ([`period_words`]); through
/// `copy_match`, each such match took an out-of-line call.
#[inline(always)]
fn copy_short_period(m: &mut [u8], dist: usize, len: usize) {
    debug_assert!((1..8).contains(&dist) && len <= 16);
    let m: &mut [u8; 24] = m.try_into().expect("24 bytes");
    let (word, next) = period_words(
        u64::from_le_bytes(m[..8].try_into().expect("8 bytes")),
        dist,
    );
    m[8..16].copy_from_slice(&word.to_le_bytes());
    if len > 8 {
        m[16..].copy_from_slice(&next.to_le_bytes());
    }
}

/// The first 16 bytes of a match with period `dist` (1–7), as two little-endian words,
/// from `before`, the 8 bytes before the match: [`super::period_word`], then that word
/// moved on by one phase.
#[inline(always)]
fn period_words(before: u64, dist: usize) -> (u64, u64) {
    let word = super::period_word(before, dist);
    // Byte `i` of the next word is the pattern's byte `(8 + i) % dist`: the word moved down
    // by `r = 8 % dist` bytes, its top `r` bytes taken from `dist - r` lower (where both
    // shifts give a byte, it is the same byte).
    let r = 8 % dist;
    (word, (word >> (8 * r)) | (word << (8 * (dist - r))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_example_blosc_repeated() {
        // spec/codecs.md §3.5 first example.
        let mut src = vec![
            0x24, b'B', b'l', b'o', b's', b'c', 0xE0, 0x55, 0x04, 0x1C, b'c',
        ];
        src.extend(0u8..0x1C);
        let mut out = vec![0u8; 128];
        decompress_into(&src, &mut out).unwrap();
        let mut want = b"Blosc".repeat(20);
        want.extend(0u8..0x1C);
        assert_eq!(out, want);
    }

    #[test]
    fn overlapping_match_with_short_period() {
        // literal "ab", then match len 7 dist 2, then literal "z".
        let src = [0x21, b'a', b'b', 5 << 5, 1, 0, b'z'];
        let mut out = vec![0u8; 10];
        decompress_into(&src, &mut out).unwrap();
        assert_eq!(&out, b"ababababaz");
    }

    /// The format read the simplest way (`spec/codecs.md` §3): one byte at a time, into
    /// a growing vector. `None` where the stream is invalid for an output of `n` bytes.
    fn byte_at_a_time(src: &[u8], n: usize) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        let mut ctrl = (*src.first()? & 31) as usize;
        let mut ip = 1;
        loop {
            if ctrl >= 32 {
                let mut len = (ctrl >> 5) + 2;
                if ctrl >> 5 == 7 {
                    loop {
                        let b = *src.get(ip)?;
                        ip += 1;
                        len += b as usize;
                        if b != 255 {
                            break;
                        }
                    }
                }
                let lo = *src.get(ip)? as usize;
                ip += 1;
                let dist = if lo == 255 && ctrl & 31 == 31 {
                    let far = ((*src.get(ip)? as usize) << 8 | *src.get(ip + 1)? as usize) + 8192;
                    ip += 2;
                    far
                } else {
                    ((ctrl & 31) << 8) + lo + 1
                };
                if dist > out.len() || out.len() + len > n {
                    return None;
                }
                for _ in 0..len {
                    out.push(out[out.len() - dist]);
                }
            } else {
                let k = ctrl + 1;
                out.extend_from_slice(src.get(ip..ip + k)?);
                ip += k;
                if out.len() > n {
                    return None;
                }
            }
            if ip >= src.len() {
                break;
            }
            ctrl = src[ip] as usize;
            ip += 1;
        }
        (out.len() == n).then_some(out)
    }

    /// A random stream of literal runs and matches and the length it decodes to. With
    /// `near`, literal runs are at most 8 bytes, half the matches come from at most 32
    /// bytes back (periods below 8 among them) and their long length codes extend to at
    /// most 18 bytes: the shapes [`copy_short_period`] and the long-match arm of
    /// [`literal_then_near_match`] take.
    fn random_stream(s: &mut u64, near: bool) -> (Vec<u8>, usize) {
        use crate::chunk::xorshift;
        let mut stream = Vec::new();
        let mut len = 0usize;
        for q in 0..1 + xorshift(s) % if near { 24 } else { 12 } {
            if q == 0 || xorshift(s).is_multiple_of(3) {
                let k = (xorshift(s) % if near { 8 } else { 32 }) as usize + 1;
                stream.push(k as u8 - 1);
                stream.extend((0..k).map(|_| xorshift(s) as u8));
                len += k;
            } else {
                let lcode = 1 + (xorshift(s) % 7) as usize;
                let near_now = near && xorshift(s).is_multiple_of(2);
                let reach = if near_now { len.min(32) } else { len.min(9000) };
                let dist = 1 + (xorshift(s) as usize % reach);
                let mut mlen = lcode + 2;
                let mut head = Vec::new();
                if lcode == 7 {
                    let extra = (xorshift(s) % if near_now { 10 } else { 300 }) as usize;
                    head.extend(std::iter::repeat_n(255u8, extra / 255));
                    head.push((extra % 255) as u8);
                    mlen += extra;
                }
                if dist > 8191 {
                    stream.push((lcode << 5) as u8 | 31);
                    stream.extend_from_slice(&head);
                    let far = dist - 8192;
                    stream.extend_from_slice(&[255, (far >> 8) as u8, far as u8]);
                } else {
                    let d = dist - 1;
                    stream.push((lcode << 5) as u8 | (d >> 8) as u8);
                    stream.extend_from_slice(&head);
                    stream.push(d as u8);
                }
                len += mlen;
            }
        }
        (stream, len)
    }

    /// Random streams (see [`random_stream`]), far-reaching ones and near ones, and
    /// single-byte mutations of them: the same bytes as [`byte_at_a_time`], and an error
    /// exactly where it has none.
    #[test]
    fn random_streams_match_the_byte_at_a_time_reading() {
        use crate::chunk::xorshift;
        let mut s = 0xB105C_u64;
        for case in 0..6000 {
            let (stream, len) = random_stream(&mut s, case % 2 == 1);
            let mut out = vec![0u8; len];
            let want = byte_at_a_time(&stream, len).expect("a well-formed stream");
            decompress_into(&stream, &mut out).unwrap_or_else(|e| panic!("case {case}: {e:?}"));
            assert!(out == want, "case {case}");
            for _ in 0..4 {
                let mut bad = stream.clone();
                let at = xorshift(&mut s) as usize % bad.len();
                bad[at] ^= 1 << (xorshift(&mut s) % 8);
                let got = decompress_into(&bad, &mut out);
                match byte_at_a_time(&bad, len) {
                    Some(want) => assert!(got.is_ok() && out == want, "case {case}, byte {at}"),
                    None => assert!(got.is_err(), "case {case}, byte {at}: {got:?}"),
                }
            }
        }
    }

    #[test]
    fn errors_instead_of_panics() {
        let mut out = vec![0u8; 8];
        assert!(decompress_into(&[0x20, 1, 0xE0], &mut out).is_err());
        assert!(decompress_into(&[0x25, 1], &mut out).is_err());
        assert!(decompress_into(&[0x20, 1, 0x40, 5], &mut out).is_err());
    }
}
