//! Our inflate against `flate2` (zlib-rs's inflate): the same bytes for every stream
//! zlib-rs writes, and the same verdict (and bytes) on every damaged stream.

use super::{Bits, Tables, inflate, zlib_decompress_into};
use crate::chunk::{random_bytes, xorshift};
use std::io::Write;

/// Data of several shapes: incompressible bytes, runs, a small alphabet (long
/// literal/length codes), repeated records at many distances, and all of them mixed.
fn shapes(seed: &mut u64, n: usize) -> Vec<(&'static str, Vec<u8>)> {
    let noise = random_bytes(seed, n);
    let runs: Vec<u8> = (0..n).map(|i| (i / 300) as u8).collect();
    let skewed: Vec<u8> = noise
        .iter()
        .map(|b| b.trailing_zeros() as u8 * 17)
        .collect();
    let records: Vec<u8> = (0..n)
        .map(|i| {
            let r = xorshift(seed);
            if r.is_multiple_of(7) {
                r as u8
            } else {
                (i % 12) as u8 + b'a'
            }
        })
        .collect();
    let mut mixed = Vec::with_capacity(n);
    for i in 0..n {
        mixed.push([noise[i], runs[i], skewed[i], records[i]][(i / 97) % 4]);
    }
    vec![
        ("noise", noise),
        ("runs", runs),
        ("skewed", skewed),
        ("records", records),
        ("mixed", mixed),
    ]
}

fn zlib(data: &[u8], level: u32) -> Vec<u8> {
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(level));
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// zlib-rs's verdict on `src` for an output of `n` bytes: the bytes, or `None`.
fn oracle(src: &[u8], n: usize) -> Option<Vec<u8>> {
    let mut z = flate2::Decompress::new(true);
    let mut out = vec![0; n];
    match z.decompress(src, &mut out, flate2::FlushDecompress::Finish) {
        Ok(flate2::Status::StreamEnd) if z.total_out() as usize == n => Some(out),
        _ => None,
    }
}

/// Every level (stored, fixed and dynamic blocks, short and long matches), sizes from
/// empty through the fast loop's thresholds to several blocks, each shape.
#[test]
fn decodes_what_zlib_rs_writes() {
    let mut seed = 11u64;
    for n in [
        0, 1, 2, 3, 7, 64, 275, 276, 300, 1000, 4096, 70_000, 300_000,
    ] {
        for (shape, data) in shapes(&mut seed, n) {
            for level in 0..=9 {
                let src = zlib(&data, level);
                let mut out = vec![0xAA; n];
                zlib_decompress_into(&src, &mut out)
                    .unwrap_or_else(|e| panic!("{shape} n {n} level {level}: {e:?}"));
                assert!(out == data, "{shape} n {n} level {level}: wrong bytes");
            }
        }
    }
}

/// A stream into an output of the wrong size is an error, whether it is one byte too
/// short or too long.
#[test]
fn wrong_output_sizes_are_errors() {
    let mut seed = 3u64;
    for (shape, data) in shapes(&mut seed, 5000) {
        let src = zlib(&data, 6);
        for n in [0, 4999, 5001, 6000] {
            assert!(
                zlib_decompress_into(&src, &mut vec![0; n]).is_err(),
                "{shape} into {n}"
            );
        }
    }
}

/// Damaged streams (cut at every length, one byte changed at every offset, for the
/// stream kinds the levels write): never a panic, and the same verdict as zlib-rs, with
/// the same bytes when both accept.
#[test]
fn damaged_streams_get_zlib_rs_verdict() {
    let mut seed = 5u64;
    for (shape, data) in shapes(&mut seed, 2000) {
        for level in [0, 1, 6, 9] {
            let src = zlib(&data, level);
            let n = data.len();
            for cut in 0..src.len() {
                let mut out = vec![0; n];
                let ours = zlib_decompress_into(&src[..cut], &mut out)
                    .ok()
                    .map(|()| out);
                assert_eq!(
                    ours,
                    oracle(&src[..cut], n),
                    "{shape} level {level} cut {cut}"
                );
            }
            for at in 0..src.len() {
                for flip in [0x01, 0x10, 0x80, 0xFF] {
                    let mut bad = src.clone();
                    bad[at] ^= flip;
                    let mut out = vec![0; n];
                    let ours = zlib_decompress_into(&bad, &mut out).ok().map(|()| out);
                    assert_eq!(
                        ours,
                        oracle(&bad, n),
                        "{shape} level {level} byte {at} ^ {flip:#x}"
                    );
                }
            }
        }
    }
}

/// Random DEFLATE data (no zlib wrapper, so no checksum hides the decoding): where
/// zlib-rs reaches the final block, we decode the same bytes and end at the same input
/// byte; where it does not, we refuse, whatever output size we are given.
#[test]
fn random_deflate_data_gets_zlib_rs_verdict() {
    let mut seed = 9u64;
    let mut ended = 0;
    for i in 0..30_000 {
        let len = 1 + (xorshift(&mut seed) % 120) as usize;
        let mut src = random_bytes(&mut seed, len);
        // Half final fixed blocks (which decode far on random bits), the rest any kind.
        if i % 2 == 0 {
            src[0] = (src[0] & !7) | 3;
        }
        let mut z = flate2::Decompress::new(false);
        let mut want = vec![0; 1 << 16];
        let verdict = z.decompress(&src, &mut want, flate2::FlushDecompress::Finish);
        let tables = &mut Tables::new();
        if let Ok(flate2::Status::StreamEnd) = verdict {
            ended += 1;
            want.truncate(z.total_out() as usize);
            let mut out = vec![0; want.len()];
            let end = inflate(&src, &mut out, tables)
                .unwrap_or_else(|e| panic!("case {i}: {src:02x?}: {e:?}"));
            assert_eq!(out, want, "case {i}: {src:02x?}");
            assert_eq!(end as u64, z.total_in(), "case {i}: {src:02x?}");
        } else {
            for n in [0, 1, 100, z.total_out() as usize] {
                assert!(
                    inflate(&src, &mut vec![0; n], tables).is_err(),
                    "case {i}: {src:02x?} into {n}"
                );
            }
        }
    }
    assert!(ended > 300, "only {ended} random streams reached their end");
}

/// The bit reader's refills, one load or byte by byte, give the same bits, and past the
/// end of the input it reads zeros that `check` reports once consumed.
#[test]
fn bit_reader_refills_agree() {
    let mut seed = 1u64;
    let src = random_bytes(&mut seed, 40);
    let mut fast = Bits {
        src: &src,
        pos: 0,
        buf: 0,
        n: 0,
    };
    // Byte by byte only.
    let mut slow = Bits {
        src: &src[..],
        pos: 0,
        buf: 0,
        n: 0,
    };
    let mut taken = 0usize;
    for k in (1..=13).cycle().take(60) {
        if fast.has(0) {
            fast.refill_fast();
        } else {
            fast.refill();
        }
        slow.refill_bytes();
        assert_eq!(fast.take(k), slow.take(k), "after {taken} bits");
        taken += k as usize;
        assert_eq!(
            fast.check().is_ok(),
            taken <= 8 * src.len(),
            "after {taken} bits"
        );
    }
}
