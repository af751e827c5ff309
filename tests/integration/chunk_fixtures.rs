//! Every chunk written by python-blosc2 4.14.1 / bcolz-zipline 1.13.0 decodes to the bytes
//! the writer's own decoder returns (sha256 in `expected/chunks.tsv`), by every decode path:
//! whole chunk, block by block, and in parallel.

use crate::util::{fixture, sha256_hex};
use datafusion_blosc2::chunk::{Chunk, DecodeLimits};

pub fn expected_chunks() -> Vec<(String, usize, String)> {
    let tsv = std::fs::read_to_string(fixture("expected/chunks.tsv")).unwrap();
    tsv.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (f[0].to_string(), f[1].parse().unwrap(), f[2].to_string())
        })
        .collect()
}

#[test]
fn every_fixture_chunk_matches_the_writer() {
    let cases = expected_chunks();
    assert!(cases.len() > 400, "fixture list looks truncated");
    let mut failures = Vec::new();
    for (rel, nbytes, sha) in &cases {
        let buf = std::fs::read(fixture(rel)).unwrap();
        let res = Chunk::parse(&buf).and_then(|c| c.decode(&DecodeLimits::default()));
        match res {
            Ok(out) if out.len() == *nbytes && sha256_hex(&out) == *sha => {}
            Ok(out) => failures.push(format!(
                "{rel}: {} bytes, sha {}",
                out.len(),
                &sha256_hex(&out)[..12]
            )),
            Err(e) => failures.push(format!("{rel}: {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} chunks differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn block_by_block_and_parallel_decoding_agree() {
    for (rel, _, _) in expected_chunks() {
        let buf = std::fs::read(fixture(&rel)).unwrap();
        let chunk = Chunk::parse(&buf).unwrap();
        let whole = chunk.decode(&DecodeLimits::default()).unwrap();
        let n = chunk.nblocks();
        if n > 1 && !chunk.header().is_vl_blocks() {
            // Each block alone, and a middle range alone.
            for j in 0..n {
                let span = chunk.blocks_byte_range(j..j + 1).unwrap();
                let mut part = vec![0u8; span.len()];
                chunk.decode_blocks_into(j..j + 1, &mut part).unwrap();
                assert!(part[..] == whole[span], "{rel}: block {j}");
            }
            let span = chunk.blocks_byte_range(1..n).unwrap();
            let mut part = vec![0u8; span.len()];
            chunk.decode_blocks_into(1..n, &mut part).unwrap();
            assert!(part[..] == whole[span], "{rel}: blocks 1..{n}");
        }
        let mut par = vec![0u8; whole.len()];
        chunk.decode_into_parallel(&mut par, 3).unwrap();
        assert!(par == whole, "{rel}: parallel");
    }
}
